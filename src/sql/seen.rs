//! What a session may ask about itself and its own last statements — `LAST_INSERT_ID()`,
//! `ROW_COUNT()`, `FOUND_ROWS()` (and `@@identity`, `@@last_insert_id`), `CONNECTION_ID()`
//! — answered from what the proxy saw, not from a node connection: outside a transaction a
//! session's node connections change hands between statements, so the node that ran its
//! last INSERT may be serving another client by the time it asks, and the node
//! connection's id is neither stable nor the id the client's `KILL` takes. The calls are replaced in the statement's
//! text by their values before it is planned (a key given as `LAST_INSERT_ID()` routes like
//! a literal); an unaliased select item that held one keeps its name by an alias of its
//! own text, as MariaDB names it.

use sqlparser::ast::{SelectItem, SetExpr, Statement};

/// The values, as MariaDB would give them on the session's own connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// `LAST_INSERT_ID()`; `None` where the proxy does not know it (the node that set it is
    /// asked instead).
    pub insert_id: Option<u64>,
    pub row_count: i64,
    /// `FOUND_ROWS()`; `None` after a `SELECT SQL_CALC_FOUND_ROWS`, whose count only its
    /// node knows.
    pub found_rows: Option<u64>,
    /// `CONNECTION_ID()`: the session's own id, the handshake's thread id, which `KILL`
    /// takes.
    pub connection_id: u32,
}

impl Default for Seen {
    fn default() -> Self {
        Seen {
            insert_id: Some(0),
            row_count: -1,
            found_rows: Some(0),
            connection_id: 0,
        }
    }
}

/// The functions answered, with the variables that are their synonyms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    InsertId,
    RowCount,
    FoundRows,
    ConnectionId,
    /// `@@warning_count`, `@@error_count`: answered only after a diagnostic of the proxy's
    /// own.
    WarningCount,
    ErrorCount,
    /// `@@socket`: the proxy listens on no unix socket. A node's socket path, answered by
    /// the node, sent clients that prefer sockets on a local host (mysql_async's default)
    /// to the node itself, past the proxy.
    Socket,
}

/// Could the statement ask one of them? A cheap test, before the exact scan.
pub fn may_ask(sql: &str) -> bool {
    const WORDS: [&[u8]; 6] = [
        b"insert_id",
        b"row_count",
        b"found_rows",
        b"@@identity",
        b"socket",
        b"connection_id",
    ];
    let b = sql.as_bytes();
    // Each has a `_` or an `@` (`socket` counts only as `@@socket`): most statements have
    // neither, and one vector scan says so.
    memchr::memchr2(b'_', b'@', b).is_some() && WORDS.iter().any(|w| crate::sql::contains_ci(b, w))
}

/// Does the statement set the session's `LAST_INSERT_ID` itself (`LAST_INSERT_ID(expr)`)?
pub fn sets_insert_id(sql: &str, mode: crate::sql::lex::Mode) -> bool {
    may_ask(sql) && calls(sql, mode).iter().any(|c| c.sets)
}

/// One occurrence found: its byte range, what it asks, and whether it has an argument.
struct Call {
    start: usize,
    end: usize,
    asked: Asked,
    sets: bool,
}

/// Every occurrence outside string literals, quoted names and comments.
fn calls(sql: &str, mode: crate::sql::lex::Mode) -> Vec<Call> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\'' | b'"' | b'`' => i = crate::sql::quote_end_in(b, i, mode) + 1,
            b'#' => {
                i = b[i..]
                    .iter()
                    .position(|x| *x == b'\n')
                    .map_or(b.len(), |n| i + n)
            }
            b'-' if b.get(i + 1) == Some(&b'-')
                && b.get(i + 2).is_none_or(|x| x.is_ascii_whitespace()) =>
            {
                i = b[i..]
                    .iter()
                    .position(|x| *x == b'\n')
                    .map_or(b.len(), |n| i + n)
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = sql[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n + 2)
            }
            b'@' if b.get(i + 1) == Some(&b'@') => {
                let start = i;
                let mut j = i + 2;
                let word = |j: usize| {
                    b[j..]
                        .iter()
                        .position(|x| !(x.is_ascii_alphanumeric() || *x == b'_'))
                        .map_or(b.len(), |n| j + n)
                };
                let mut end = word(j);
                if sql[j..end].eq_ignore_ascii_case("session") && b.get(end) == Some(&b'.') {
                    j = end + 1;
                    end = word(j);
                }
                if sql[j..end].eq_ignore_ascii_case("global") && b.get(end) == Some(&b'.') {
                    j = end + 1;
                    end = word(j);
                }
                let name = &sql[j..end];
                let asked = if name.eq_ignore_ascii_case("identity")
                    || name.eq_ignore_ascii_case("last_insert_id")
                {
                    Some(Asked::InsertId)
                } else if name.eq_ignore_ascii_case("socket") {
                    Some(Asked::Socket)
                } else if name.eq_ignore_ascii_case("warning_count") {
                    Some(Asked::WarningCount)
                } else if name.eq_ignore_ascii_case("error_count") {
                    Some(Asked::ErrorCount)
                } else {
                    None
                };
                if let Some(asked) = asked {
                    out.push(Call {
                        start,
                        end,
                        asked,
                        sets: false,
                    });
                }
                i = end.max(i + 2);
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                let end = b[i..]
                    .iter()
                    .position(|x| !(x.is_ascii_alphanumeric() || *x == b'_' || *x == b'$'))
                    .map_or(b.len(), |n| i + n);
                i = end;
                // A qualified name (`t.row_count`, `db.found_rows()`) is not the function.
                if start > 0 && b[start - 1] == b'.' {
                    continue;
                }
                let asked = match &sql[start..end] {
                    w if w.eq_ignore_ascii_case("last_insert_id") => Asked::InsertId,
                    w if w.eq_ignore_ascii_case("row_count") => Asked::RowCount,
                    w if w.eq_ignore_ascii_case("found_rows") => Asked::FoundRows,
                    w if w.eq_ignore_ascii_case("connection_id") => Asked::ConnectionId,
                    _ => continue,
                };
                let mut j = end;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if b.get(j) != Some(&b'(') {
                    continue;
                }
                j += 1;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if b.get(j) == Some(&b')') {
                    out.push(Call {
                        start,
                        end: j + 1,
                        asked,
                        sets: false,
                    });
                    i = j + 1;
                } else if asked == Asked::InsertId {
                    out.push(Call {
                        start,
                        end: j,
                        asked,
                        sets: true,
                    });
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// The diagnostics of the last statement the proxy raised itself, which no node's
/// diagnostics area holds: an error (one warning, one error) or a warning it added to a
/// statement that succeeded (one warning).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Own {
    pub warnings: u8,
    pub errors: u8,
}

/// The statement with its calls replaced by their values; `None` when it makes none (or
/// only of what the proxy does not know, which the node that knows answers). `own`: the
/// last statement's diagnostics are the proxy's own, so `@@warning_count` and
/// `@@error_count` are theirs.
pub fn answer(
    sql: &str,
    seen: &Seen,
    own: Option<Own>,
    mode: crate::sql::lex::Mode,
) -> Option<String> {
    if !(may_ask(sql) || own.is_some() && reads_diagnostics(sql)) {
        return None;
    }
    let calls = calls(sql, mode);
    // LAST_INSERT_ID(expr) in the same statement changes what a later call in it returns:
    // the node runs such a statement as it is.
    if calls.iter().any(|c| c.sets) {
        return None;
    }
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    for c in &calls {
        let value = match c.asked {
            Asked::InsertId => match seen.insert_id {
                Some(v) => v.to_string(),
                None => continue,
            },
            Asked::RowCount => seen.row_count.to_string(),
            Asked::FoundRows => match seen.found_rows {
                Some(v) => v.to_string(),
                None => continue,
            },
            Asked::ConnectionId => seen.connection_id.to_string(),
            Asked::WarningCount | Asked::ErrorCount => match (own, c.asked) {
                (Some(o), Asked::WarningCount) => o.warnings.to_string(),
                (Some(o), _) => o.errors.to_string(),
                (None, _) => continue,
            },
            Asked::Socket => "NULL".to_string(),
        };
        edits.push((c.start, c.end, value));
    }
    if edits.is_empty() {
        return None;
    }
    // Unaliased top-level select items that held a call are named by their own text.
    if let Ok(Statement::Query(q)) = crate::sql::parse_in(sql, mode).as_ref().map(|p| &p.stmt) {
        if let SetExpr::Select(s) = q.body.as_ref() {
            for item in &s.projection {
                let SelectItem::UnnamedExpr(e) = item else {
                    continue;
                };
                let Some((a, b)) = crate::sql::item_range(sql, e, mode) else {
                    continue;
                };
                if b - a <= 250 && edits.iter().any(|(x, y, _)| a <= *x && *y <= b) {
                    edits.push((b, b, format!(" AS `{}`", sql[a..b].replace('`', "``"))));
                }
            }
        }
    }
    edits.sort_by_key(|(a, b, _)| (*a, *b));
    let mut out = String::with_capacity(sql.len() + 32);
    let mut at = 0;
    for (a, b, with) in edits {
        out.push_str(&sql[at..a]);
        out.push_str(&with);
        at = b;
    }
    out.push_str(&sql[at..]);
    Some(out)
}

/// Does the statement ask its node to count every row a LIMIT leaves out
/// (`SQL_CALC_FOUND_ROWS`), for the `FOUND_ROWS()` after it?
pub fn calcs_found_rows(sql: &str) -> bool {
    crate::sql::contains_ci(sql.as_bytes(), b"SQL_CALC_FOUND_ROWS")
}

/// Does the statement read the diagnostics area (what the last statement left: its
/// warnings, errors, their counts)?
pub fn reads_diagnostics(sql: &str) -> bool {
    let b = sql.as_bytes();
    let first = crate::sql::first_word(sql);
    let first_is = |k: &str| first.is_some_and(|w| w.eq_ignore_ascii_case(k));
    if first_is("SHOW") || first_is("GET") {
        let w = crate::sql::leading_words(sql, 3);
        let is = |i: usize, k: &str| w.get(i).is_some_and(|x| x.eq_ignore_ascii_case(k));
        if is(0, "SHOW") && (is(1, "WARNINGS") || is(1, "ERRORS") || is(1, "COUNT")) {
            return true;
        }
        if is(0, "GET") && (is(1, "DIAGNOSTICS") || is(2, "DIAGNOSTICS")) {
            return true;
        }
    }
    if memchr::memchr(b'@', b).is_none() {
        return false;
    }
    const VARS: [&[u8]; 2] = [b"@@warning_count", b"@@error_count"];
    VARS.iter().any(|v| crate::sql::contains_ci(b, v)) || {
        let s = b"@@session.";
        b.windows(s.len()).enumerate().any(|(i, x)| {
            x.eq_ignore_ascii_case(s)
                && ["warning_count", "error_count"].iter().any(|n| {
                    b.get(i + s.len()..i + s.len() + n.len())
                        .is_some_and(|y| y.eq_ignore_ascii_case(n.as_bytes()))
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen() -> Seen {
        Seen {
            insert_id: Some(42),
            row_count: 3,
            found_rows: Some(7),
            connection_id: 9,
        }
    }

    #[test]
    fn calls_become_values_and_items_keep_their_names() {
        let a = |s: &str| answer(s, &seen(), None, Default::default());
        assert_eq!(
            a("SELECT LAST_INSERT_ID()").as_deref(),
            Some("SELECT 42 AS `LAST_INSERT_ID()`")
        );
        assert_eq!(
            a("select last_insert_id() + 1 AS n, row_count ( ), FOUND_ROWS()").as_deref(),
            Some("select 42 + 1 AS n, 3 AS `row_count ( )`, 7 AS `FOUND_ROWS()`")
        );
        assert_eq!(
            a("INSERT INTO item (order_id, n) VALUES (LAST_INSERT_ID(), 1)").as_deref(),
            Some("INSERT INTO item (order_id, n) VALUES (42, 1)")
        );
        assert_eq!(
            a("SELECT @@identity, @@session.last_insert_id").as_deref(),
            Some("SELECT 42 AS `@@identity`, 42 AS `@@session.last_insert_id`")
        );
        assert_eq!(
            a("SELECT * FROM t WHERE id = last_insert_id()").as_deref(),
            Some("SELECT * FROM t WHERE id = 42")
        );
        // The session's own id, as the handshake gave it and KILL takes it.
        assert_eq!(
            a("SELECT CONNECTION_ID(), connection_id ()").as_deref(),
            Some("SELECT 9 AS `CONNECTION_ID()`, 9 AS `connection_id ()`")
        );
        assert_eq!(
            a("KILL QUERY CONNECTION_ID()").as_deref(),
            Some("KILL QUERY 9")
        );
        // After an error the proxy raised itself, its counts are the proxy's (after a warning
        // it added, no error); else the node's.
        for (errors, want) in [
            (
                1,
                "SELECT 1 AS `@@warning_count`, 1 AS `@@session.error_count`",
            ),
            (
                0,
                "SELECT 1 AS `@@warning_count`, 0 AS `@@session.error_count`",
            ),
        ] {
            let own = Some(Own {
                warnings: 1,
                errors,
            });
            let sql = "SELECT @@warning_count, @@session.error_count";
            assert_eq!(
                answer(sql, &seen(), own, Default::default()).as_deref(),
                Some(want)
            );
        }
        assert_eq!(a("SELECT @@warning_count"), None);
        // The proxy has no unix socket: a client must not learn a node's.
        assert_eq!(
            a("SELECT @@socket").as_deref(),
            Some("SELECT NULL AS `@@socket`")
        );
        assert_eq!(
            a("select @@GLOBAL.socket, @@version").as_deref(),
            Some("select NULL AS `@@GLOBAL.socket`, @@version")
        );
    }

    #[test]
    fn literals_names_and_comments_are_left_alone() {
        let a = |s: &str| answer(s, &seen(), None, Default::default());
        assert_eq!(a("SELECT 'LAST_INSERT_ID()'"), None);
        assert_eq!(a("SELECT `row_count()` FROM t"), None);
        assert_eq!(a("SELECT t.row_count FROM t"), None);
        assert_eq!(a("SELECT row_count FROM t"), None);
        assert_eq!(a("SELECT 1 /* FOUND_ROWS() */"), None);
        assert_eq!(a("SELECT 1 -- FOUND_ROWS()\n"), None);
        assert_eq!(a("SELECT db.found_rows()"), None);
        assert_eq!(a("SELECT 1"), None);
    }

    #[test]
    fn what_the_proxy_does_not_know_stays_for_the_node() {
        // LAST_INSERT_ID(expr) sets the id: the statement runs as it is.
        assert_eq!(
            answer(
                "SELECT LAST_INSERT_ID(5), LAST_INSERT_ID()",
                &seen(),
                None,
                Default::default()
            ),
            None
        );
        assert!(sets_insert_id(
            "UPDATE s SET n = LAST_INSERT_ID(n + 1)",
            Default::default()
        ));
        assert!(!sets_insert_id(
            "SELECT LAST_INSERT_ID( )",
            Default::default()
        ));
        let unknown = Seen {
            insert_id: None,
            ..seen()
        };
        assert_eq!(
            answer(
                "SELECT LAST_INSERT_ID()",
                &unknown,
                None,
                Default::default()
            ),
            None
        );
        // Without backslash escapes the call after `'\'` is outside the string.
        let nbe = crate::sql::lex::Mode {
            no_backslash_escapes: true,
            ansi_quotes: false,
        };
        assert_eq!(
            answer(r"SELECT '\', LAST_INSERT_ID() AS i", &seen(), None, nbe).as_deref(),
            Some(r"SELECT '\', 42 AS i")
        );
        assert_eq!(
            answer(
                "SELECT LAST_INSERT_ID(), ROW_COUNT()",
                &unknown,
                None,
                Default::default()
            )
            .as_deref(),
            Some("SELECT LAST_INSERT_ID(), 3 AS `ROW_COUNT()`")
        );
    }

    #[test]
    fn diagnostics_readers() {
        for s in [
            "SHOW WARNINGS",
            "show errors limit 1",
            "SHOW COUNT(*) WARNINGS",
            "SELECT @@warning_count",
            "select @@SESSION.error_count",
            "GET DIAGNOSTICS @n = NUMBER",
            "GET CURRENT DIAGNOSTICS CONDITION 1 @m = MESSAGE_TEXT",
        ] {
            assert!(reads_diagnostics(s), "{s}");
        }
        for s in ["SELECT 1", "SHOW TABLES", "SELECT @@version"] {
            assert!(!reads_diagnostics(s), "{s}");
        }
    }
}
