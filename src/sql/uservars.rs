//! User variables (`@v`) as the proxy carries them across lent node connections.
//!
//! A session's statements run on whichever node connection its pool lends, so a user variable
//! cannot live on one connection: every assignment's value is read once, where it was
//! computed, and kept as a `SET @v = <literal>` that the session replays on every connection
//! it borrows, like its other `SET`s. Replaying the client's own `SET @v = @v + 1` would
//! compute again on each connection (and a subquery in it would read that node only).
//!
//! - `SET @a = e1, @b = e2` (user variables only): each `e` is read as `SELECT e`, planned
//!   like any read (so `(SELECT COUNT(*) FROM sharded)` is merged over its nodes), in order.
//! - `@v := e` or `SELECT ... INTO @v` inside another statement: the statement runs on one
//!   node only (else 1235), and the variables are read back there.
//! - Named locks (`GET_LOCK` and its kin) live on the default node, for every session.

use mysql_common::constants::ColumnType;
use mysql_common::packets::Column;
use mysql_common::value::Value;

use super::lex::Mode;
use super::{quote_end_in, skip_blanks};

/// One assignment of a `SET` that assigns user variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetPart {
    /// `@name = expression`.
    User { name: String, expr: String },
    /// Any other assignment (`sql_mode = ''`, `NAMES utf8mb4`), as written: it runs as
    /// `SET <text>`.
    Other(String),
}

/// The assignments of a `SET` that assigns at least one user variable, in order; `None`
/// for any other statement (and for an expression that assigns again, `@a = @b := 1`).
pub fn set_parts(sql: &str) -> Option<Vec<SetPart>> {
    set_parts_in(sql, Mode::default())
}

/// [`set_parts`] of a text read in `mode`.
pub fn set_parts_in(sql: &str, mode: Mode) -> Option<Vec<SetPart>> {
    let b = sql.as_bytes();
    let mut i = skip_blanks(b, 0);
    if !b.get(i..i + 3)?.eq_ignore_ascii_case(b"SET") {
        return None;
    }
    i += 3;
    let after = skip_blanks(b, i);
    if after == i || memchr::memchr(b'@', b).is_none() {
        return None;
    }
    i = after;
    let mut out = Vec::new();
    loop {
        let (end, last) = expression_end(b, i, mode);
        let whole = sql.get(i..end)?.trim();
        let whole = whole.strip_suffix(';').unwrap_or(whole).trim_end();
        let user = var_name(b, i, mode).and_then(|(name, at)| {
            let j = skip_blanks(b, at);
            let op = match b.get(j..j + 2) {
                Some(b":=") => 2,
                _ if b.get(j) == Some(&b'=') => 1,
                _ => return None,
            };
            Some((name, j + op))
        });
        let part = match user {
            Some((name, from)) => {
                let expr = sql.get(from..end)?.trim();
                let expr = expr.strip_suffix(';').unwrap_or(expr).trim_end();
                if expr.is_empty() || assigns_in(expr, mode) {
                    return None;
                }
                SetPart::User {
                    name,
                    expr: expr.to_string(),
                }
            }
            None if whole.is_empty() || assigns_in(whole, mode) => return None,
            None => SetPart::Other(whole.to_string()),
        };
        out.push(part);
        if last {
            break;
        }
        i = skip_blanks(b, end + 1);
    }
    out.iter()
        .any(|p| matches!(p, SetPart::User { .. }))
        .then_some(out)
}

/// The user variables a statement assigns other than by a leading `SET`: `@v := e`, and the
/// targets of `INTO @a, @b`.
pub fn assigned(sql: &str) -> Vec<String> {
    assigned_in(sql, Mode::default())
}

/// [`assigned`] of a text read in `mode`.
pub fn assigned_in(sql: &str, mode: Mode) -> Vec<String> {
    let b = sql.as_bytes();
    if memchr::memchr(b'@', b).is_none() {
        return Vec::new();
    }
    let mut names = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\'' | b'"' | b'`' => i = quote_end_in(b, i, mode) + 1,
            b'#' | b'-' | b'/' if skip_blanks(b, i) > i => i = skip_blanks(b, i),
            b'@' if b.get(i + 1) == Some(&b'@') => i += 2,
            b'@' => match var_name(b, i, mode) {
                Some((name, at)) => {
                    let next = skip_blanks(b, at);
                    if b.get(next..next + 2) == Some(b":=") {
                        names.push(name);
                    }
                    i = at;
                }
                None => i += 1,
            },
            c if (c == b'I' || c == b'i') && word_at(b, i, b"INTO") => {
                let mut j = skip_blanks(b, i + 4);
                while let Some((name, at)) = var_name(b, j, mode) {
                    names.push(name);
                    j = skip_blanks(b, at);
                    if b.get(j) != Some(&b',') {
                        break;
                    }
                    j = skip_blanks(b, j + 1);
                }
                i += 4;
            }
            _ => i += 1,
        }
    }
    names.dedup();
    names
}

/// Does the statement call a named-lock function (`GET_LOCK`, `RELEASE_LOCK`,
/// `RELEASE_ALL_LOCKS`, `IS_FREE_LOCK`, `IS_USED_LOCK`: the name standing alone, then `(`)?
/// Conservative: a call written inside a string counts too.
pub fn names_a_lock(sql: &str) -> bool {
    const FUNCTIONS: [&[u8]; 5] = [
        b"GET_LOCK",
        b"RELEASE_LOCK",
        b"RELEASE_ALL_LOCKS",
        b"IS_FREE_LOCK",
        b"IS_USED_LOCK",
    ];
    let b = sql.as_bytes();
    if !super::contains_ci(b, b"_LOCK") {
        return false;
    }
    let upper = sql.to_ascii_uppercase();
    let u = upper.as_bytes();
    FUNCTIONS.iter().any(|f| {
        memchr::memmem::find_iter(u, f).any(|at| {
            let before = at.checked_sub(1).map(|i| u[i]);
            let call = u.get(skip_blanks(u, at + f.len())) == Some(&b'(');
            call && !before.is_some_and(|c| {
                c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.' | b'`')
            })
        })
    })
}

/// Does a statement take the one-node path for user variables or named locks: a `SET` of
/// user variables, an assignment inside a statement, a named-lock function?
pub fn special(sql: &str) -> bool {
    special_in(sql, Mode::default())
}

/// [`special`] of a text read in `mode`.
pub fn special_in(sql: &str, mode: Mode) -> bool {
    set_parts_in(sql, mode).is_some() || !assigned_in(sql, mode).is_empty() || names_a_lock(sql)
}

/// How many `?` placeholders an expression holds (outside strings, quoted names and
/// comments).
pub fn placeholders(expr: &str) -> usize {
    placeholders_in(expr, Mode::default())
}

/// [`placeholders`] of a text read in `mode`.
pub fn placeholders_in(expr: &str, mode: Mode) -> usize {
    let b = expr.as_bytes();
    let (mut i, mut n) = (0, 0);
    while i < b.len() {
        match b[i] {
            b'\'' | b'"' | b'`' => i = quote_end_in(b, i, mode) + 1,
            b'#' | b'-' | b'/' if skip_blanks(b, i) > i => i = skip_blanks(b, i),
            b'?' => {
                n += 1;
                i += 1;
            }
            _ => i += 1,
        }
    }
    n
}

/// `SELECT @a, @b`: the variables' values, where they were assigned.
pub fn read_back(names: &[String]) -> String {
    let items: Vec<String> = names.iter().map(|n| format!("@{}", quoted(n))).collect();
    format!("SELECT {}", items.join(", "))
}

/// The `SET` that gives `@name` the value `v` read in a column `col`, of the same kind
/// (integer, decimal, floating point, string in its character set, NULL).
pub fn set_literal(name: &str, v: Option<&Value>, col: &Column) -> String {
    let mut lit = String::new();
    crate::sql::write::typed(&mut lit, v, col);
    let approximate = matches!(
        col.column_type(),
        ColumnType::MYSQL_TYPE_FLOAT | ColumnType::MYSQL_TYPE_DOUBLE
    );
    if approximate
        && lit
            .bytes()
            .all(|c| c.is_ascii_digit() || b"+-.".contains(&c))
    {
        // `1.5E0` is a DOUBLE literal, `1.5` a DECIMAL one.
        lit.push_str("E0");
    }
    format!("{}{lit}", set_prefix(name))
}

/// `SET @`name` = `: the start of every `SET` [`set_literal`] writes, by which a newer value
/// of the variable replaces the older in the session's record.
pub fn set_prefix(name: &str) -> String {
    format!("SET @{} = ", quoted(name))
}

/// What a recorded `SET` is known by in the session's list of SETs: a user variable's
/// `SET @`name` = ` as [`set_literal`] writes it (a newer value replaces the older), else
/// the whole statement.
pub fn record_key(sql: &str) -> &str {
    let b = sql.as_bytes();
    if !sql.starts_with("SET @`") {
        return sql;
    }
    match var_name(b, 4, Mode::default()) {
        Some((_, end)) if b.get(end..end + 3) == Some(b" = ") => &sql[..end + 3],
        _ => sql,
    }
}

fn quoted(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A user variable's name at `b[i]` (`@name`, ``@`name` ``, `@'name'`, `@"name"`) and where
/// it ends; `None` when no user variable starts there.
fn var_name(b: &[u8], i: usize, mode: Mode) -> Option<(String, usize)> {
    if b.get(i) != Some(&b'@') || b.get(i + 1) == Some(&b'@') {
        return None;
    }
    let start = i + 1;
    match *b.get(start)? {
        q @ (b'`' | b'\'' | b'"') => {
            let mut end = quote_end_in(b, start, mode);
            // A doubled quote stands for one.
            while end + 1 < b.len() && b[end + 1] == q {
                end = quote_end_in(b, end + 1, mode);
            }
            if end >= b.len() {
                return None;
            }
            let inner = std::str::from_utf8(&b[start + 1..end]).ok()?;
            let doubled = [q as char, q as char].iter().collect::<String>();
            if inner.contains('\\') {
                return None;
            }
            Some((inner.replace(&doubled, &(q as char).to_string()), end + 1))
        }
        _ => {
            let len = b[start..]
                .iter()
                .take_while(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'.') || **c >= 0x80
                })
                .count();
            if len == 0 {
                return None;
            }
            let name = std::str::from_utf8(&b[start..start + len]).ok()?;
            Some((name.to_string(), start + len))
        }
    }
}

/// Is the word `w` (upper case) at `b[i]`, standing alone?
fn word_at(b: &[u8], i: usize, w: &[u8]) -> bool {
    let ident = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'@');
    b.get(i..i + w.len())
        .is_some_and(|x| x.eq_ignore_ascii_case(w))
        && (i == 0 || !ident(&b[i - 1]))
        && b.get(i + w.len()).is_none_or(|c| !ident(c))
}

/// Where the expression starting at `b[i]` ends: a comma at its own depth (`false`) or the
/// text's end (`true`).
fn expression_end(b: &[u8], mut i: usize, mode: Mode) -> (usize, bool) {
    let mut depth = 0usize;
    while i < b.len() {
        match b[i] {
            b'\'' | b'"' | b'`' => i = quote_end_in(b, i, mode),
            b'#' | b'-' | b'/' if skip_blanks(b, i) > i => {
                i = skip_blanks(b, i);
                continue;
            }
            b'(' => depth += 1,
            b')' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => return (i, false),
            _ => {}
        }
        i += 1;
    }
    (b.len(), true)
}

/// Does an expression assign a user variable itself (`@v := ...`, `INTO`)?
fn assigns_in(expr: &str, mode: Mode) -> bool {
    !assigned_in(expr, mode).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(v: &[(&str, &str)]) -> Option<Vec<SetPart>> {
        Some(
            v.iter()
                .map(|(a, b)| SetPart::User {
                    name: a.to_string(),
                    expr: b.to_string(),
                })
                .collect(),
        )
    }

    #[test]
    fn sets_of_user_variables() {
        assert_eq!(set_parts("SET @a = 1"), users(&[("a", "1")]));
        assert_eq!(
            set_parts("set @a := @a + 1, @`b c` = (SELECT COUNT(*) FROM t WHERE x IN (1, 2)), @'d''e' = 'x,y';"),
            users(&[
                ("a", "@a + 1"),
                ("b c", "(SELECT COUNT(*) FROM t WHERE x IN (1, 2))"),
                ("d'e", "'x,y'"),
            ])
        );
        assert_eq!(
            set_parts("SET /* c */ @v=CONCAT('a', \"b\")"),
            users(&[("v", "CONCAT('a', \"b\")")])
        );
        assert_eq!(
            set_parts("SET @a = 1, sql_mode = CONCAT(@@sql_mode, ',ANSI'), NAMES utf8mb4"),
            Some(vec![
                SetPart::User {
                    name: "a".into(),
                    expr: "1".into()
                },
                SetPart::Other("sql_mode = CONCAT(@@sql_mode, ',ANSI')".into()),
                SetPart::Other("NAMES utf8mb4".into()),
            ])
        );
        for other in [
            "SET sql_mode = ''",
            "SET @@session.time_zone = '+00:00'",
            "SET NAMES utf8mb4",
            "SET @a = @b := 2",
            "SET @a",
            "SELECT @a := 1",
            "SETTLE @a = 1",
        ] {
            assert_eq!(set_parts(other), None, "{other}");
        }
    }

    #[test]
    fn assignments_inside_statements() {
        assert_eq!(assigned("SELECT @r := @r + 1, id FROM t"), vec!["r"]);
        assert_eq!(
            assigned("SELECT a, b INTO @x, @`y` FROM t WHERE id = 7"),
            vec!["x", "y"]
        );
        assert_eq!(assigned("SELECT id FROM t WHERE v = @x INTO @y"), vec!["y"]);
        assert!(assigned("SELECT @x, @@sql_mode, '@y := 1' FROM t").is_empty());
        assert!(assigned("INSERT INTO t VALUES (@x)").is_empty());
        assert!(assigned("SELECT 1 -- @y := 2\n").is_empty());
        assert!(assigned("SELECT `a@b` FROM t").is_empty());
        // Without backslash escapes `'a\'` ends at its second quote: the assignment after it
        // is seen (with escapes, the string runs on over it).
        let nbe = Mode {
            no_backslash_escapes: true,
            ansi_quotes: false,
        };
        let sql = r"SELECT 'a\', @v := 1 FROM t";
        assert_eq!(assigned_in(sql, nbe), vec!["v"]);
        assert!(assigned(sql).is_empty());
        assert_eq!(placeholders_in(r"CONCAT('\', ?)", nbe), 1);
    }

    #[test]
    fn placeholders_outside_strings() {
        assert_eq!(placeholders("? + ?"), 2);
        assert_eq!(placeholders("CONCAT('?', ?) /* ? */"), 1);
        assert_eq!(placeholders("1"), 0);
        assert!(special("SET @v = ?"));
        assert!(special("SELECT @r := ? FROM t"));
        assert!(special("SELECT GET_LOCK(?, 1)"));
        assert!(!special("SELECT c FROM sbtest1 WHERE id=?"));
        assert!(!special("SET NAMES utf8mb4"));
    }

    #[test]
    fn named_locks() {
        assert!(names_a_lock("SELECT GET_LOCK('x', 1)"));
        assert!(names_a_lock("select release_lock('x')"));
        assert!(names_a_lock("SELECT IS_FREE_LOCK('x'), is_used_lock('x')"));
        assert!(!names_a_lock("SELECT * FROM t FOR UPDATE"));
        assert!(!names_a_lock("LOCK TABLES t WRITE"));
        assert!(names_a_lock("DO get_lock ('x', 0)"));
        assert!(!names_a_lock(
            "SELECT * FROM audit_get_lock WHERE user_id = 7"
        ));
        assert!(!names_a_lock("SELECT get_lock_count FROM t"));
        assert!(!names_a_lock("SELECT t.get_lock(1) FROM t"));
    }

    #[test]
    fn literals_keep_the_kind_of_value() {
        use mysql_common::constants::ColumnType::*;
        let col = |t| Column::new(t);
        assert_eq!(
            set_literal(
                "a",
                Some(&Value::Bytes(b"42".to_vec())),
                &col(MYSQL_TYPE_LONGLONG)
            ),
            "SET @`a` = 42"
        );
        assert_eq!(
            set_literal(
                "a",
                Some(&Value::Bytes(b"1.5".to_vec())),
                &col(MYSQL_TYPE_DOUBLE)
            ),
            "SET @`a` = 1.5E0"
        );
        assert_eq!(
            set_literal(
                "a",
                Some(&Value::Bytes(b"1e300".to_vec())),
                &col(MYSQL_TYPE_DOUBLE)
            ),
            "SET @`a` = 1e300"
        );
        assert_eq!(
            set_literal(
                "a",
                Some(&Value::Bytes(b"1.50".to_vec())),
                &col(MYSQL_TYPE_NEWDECIMAL)
            ),
            "SET @`a` = 1.50"
        );
        assert_eq!(
            set_literal("a`b", None, &col(MYSQL_TYPE_LONGLONG)),
            "SET @`a``b` = NULL"
        );
        assert_eq!(
            read_back(&["a".into(), "b`c".into()]),
            "SELECT @`a`, @`b``c`"
        );
        assert!(set_literal("a", None, &col(MYSQL_TYPE_NULL)).starts_with(&set_prefix("a")));
    }

    #[test]
    fn a_user_variables_newer_value_replaces_the_older() {
        let a = set_literal(
            "a`` = b",
            None,
            &mysql_common::packets::Column::new(
                mysql_common::constants::ColumnType::MYSQL_TYPE_NULL,
            ),
        );
        assert_eq!(record_key(&a), "SET @`a```` = b` = ");
        assert_eq!(record_key("SET @`v` = 1"), record_key("SET @`v` = 'x'"));
        assert_ne!(record_key("SET @`v` = 1"), record_key("SET @`w` = 1"));
        assert_eq!(record_key("SET NAMES utf8mb4"), "SET NAMES utf8mb4");
        assert_eq!(record_key("SET @v = 1"), "SET @v = 1");
    }
}
