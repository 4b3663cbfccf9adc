//! A COM_QUERY's statements: split where MariaDB splits them (`crate::sql::lex`, under the
//! session's `sql_mode`), each keeping its original bytes, and MariaDB's answer to a client
//! that did not allow several.

use crate::error::{MyError, ER_PARSE_ERROR};
use crate::sql::lex::{self, Kind, Mode};

/// What a COM_QUERY holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Batch<'s> {
    /// One statement (the text as it came, a trailing `;` and comments included).
    One,
    /// Several, in order, without their `;`.
    Many(Vec<&'s str>),
}

/// The statements of `sql`. `multi`: the client allows several (CLIENT_MULTI_STATEMENTS);
/// without it, a second statement is MariaDB's 1064 (stacked statements are an injection
/// risk its code may rely on the server to refuse) — except where a compound statement's
/// body made the proxy count blocks to find its end: that text goes to a node whole, whose
/// connection takes one statement only, so MariaDB's own parser gives the verdict.
pub fn batch(sql: &str, mode: Mode, multi: bool) -> Result<Batch<'_>, MyError> {
    // Most queries hold no semicolon at all: they are not read twice.
    if !sql.contains(';') {
        return Ok(Batch::One);
    }
    let split = lex::statements(sql, mode);
    if split.parts.len() < 2 {
        return Ok(Batch::One);
    }
    if multi {
        return Ok(Batch::Many(
            split.parts.iter().map(|(a, b)| &sql[*a..*b]).collect(),
        ));
    }
    if split.compound {
        return Ok(Batch::One);
    }
    Err(syntax_error_near(sql, split.parts[1].0))
}

/// MariaDB's 1064 for the text from byte `at` on: `near '...'` holds at most 80 bytes (77
/// and `...` when longer, never a character cut), and the line is `at`'s.
pub fn syntax_error_near(sql: &str, at: usize) -> MyError {
    let rest = sql.get(at..).unwrap_or("");
    let near = if rest.len() <= 80 {
        rest.to_string()
    } else {
        let mut cut = 77;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}...", &rest[..cut])
    };
    let line = 1 + sql.as_bytes()[..at.min(sql.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count();
    MyError::new(
        ER_PARSE_ERROR,
        format!(
            "You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version for the right syntax to use near '{near}' at line {line}"
        ),
    )
}

/// A `SET` of several assignments one of which is `autocommit` (Connector/J sends
/// `set autocommit=1, sql_mode = concat(@@sql_mode, ...)` on connect), as one `SET` per
/// assignment, each cut from the client's text: autocommit is the session's own state, the
/// rest go to the nodes. `None` for anything else.
pub fn set_with_autocommit(sql: &str, mode: Mode) -> Option<Vec<String>> {
    let head = sql.trim_start().get(..3)?;
    if !head.eq_ignore_ascii_case("set") || !sql.contains(',') {
        return None;
    }
    let lexed = lex::lex(sql, mode);
    if lexed.error.is_some() {
        return None;
    }
    let toks = &lexed.toks;
    if !toks.first()?.is(sql, "SET") {
        return None;
    }
    // Assignments: the spans between top-level commas after SET.
    let mut parts: Vec<(usize, usize)> = Vec::new();
    let mut depth = 0i32;
    let mut from: Option<usize> = None;
    let mut last_end = 0;
    for t in &toks[1..] {
        match t.kind {
            Kind::LParen => depth += 1,
            Kind::RParen => depth -= 1,
            Kind::Comma if depth == 0 => {
                parts.push((from?, last_end));
                from = None;
                continue;
            }
            Kind::Semi => break,
            _ => {}
        }
        from.get_or_insert(t.start);
        last_end = t.end;
    }
    parts.push((from?, last_end));
    if parts.len() < 2 {
        return None;
    }
    let names_autocommit = |p: &str| {
        let name = p
            .split(['=', ':'])
            .next()
            .unwrap_or("")
            .trim()
            .trim_matches('`')
            .to_ascii_lowercase();
        matches!(
            name.as_str(),
            "autocommit" | "@@autocommit" | "@@session.autocommit" | "session autocommit"
        ) || name.ends_with(".autocommit")
    };
    let texts: Vec<&str> = parts.iter().map(|(a, b)| &sql[*a..*b]).collect();
    if !texts.iter().any(|p| names_autocommit(p)) {
        return None;
    }
    Some(texts.into_iter().map(|p| format!("SET {p}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The planner's random statements and noise (`crate::plan::random_tests`), split in
    /// either quoting mode, with and without CLIENT_MULTI_STATEMENTS: never a panic.
    #[test]
    fn splitting_random_text_never_panics() {
        use crate::plan::random_tests::{noise, piece_statements};
        let texts = piece_statements(0x5eed_1234_abcd_0001, 20_000)
            .into_iter()
            .map(|(sql, _)| sql)
            .chain(noise(0xdead_beef_0bad_f00d, 5_000));
        for sql in texts {
            for mode in [
                Mode::default(),
                Mode {
                    no_backslash_escapes: true,
                    ansi_quotes: true,
                },
            ] {
                let _ = batch(&sql, mode, true);
                let _ = batch(&sql, mode, false);
            }
        }
    }

    fn many(sql: &str) -> Vec<&str> {
        match batch(sql, Mode::default(), true) {
            Ok(Batch::Many(p)) => p,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn splits_on_top_level_semicolons_only() {
        let sql = "SELECT 'a;b', `c;d` FROM t; /* ; */ INSERT INTO t VALUES (\"x;\") ;\n-- end;\n";
        assert_eq!(
            many(sql),
            vec![
                "SELECT 'a;b', `c;d` FROM t",
                "INSERT INTO t VALUES (\"x;\") "
            ]
        );
        assert_eq!(
            many("SELECT 'é;ü'\n  ;SELECT 'ß'"),
            vec!["SELECT 'é;ü'\n  ", "SELECT 'ß'"]
        );
        assert_eq!(
            batch("SELECT 1;", Mode::default(), true).ok(),
            Some(Batch::One)
        );
    }

    #[test]
    fn a_client_without_multi_statements_gets_mariadbs_syntax_error() {
        fn no(sql: &str) -> Result<Batch<'_>, String> {
            batch(sql, Mode::default(), false).map_err(|e| e.message)
        }
        assert_eq!(
            no("SELECT 1; CREATE TABLE t_stacked (x INT); SELECT 1 begin"),
            Err("You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version for the right syntax to use near 'CREATE TABLE t_stacked (x INT); SELECT 1 begin' at line 1".into())
        );
        assert!(no("SELECT 1;\n\n  SELECT 2")
            .unwrap_err()
            .ends_with("near 'SELECT 2' at line 3"));
        assert!(no("SELECT 1; SELECT 'open")
            .unwrap_err()
            .ends_with("near 'SELECT 'open' at line 1"));
        assert!(no("SELECT 1 /*!50000 ; SELECT 2 */")
            .unwrap_err()
            .ends_with("near 'SELECT 2 */' at line 1"));
        let long = format!("SELECT 1; SELECT {}", "x".repeat(100));
        let e = no(&long).unwrap_err();
        assert!(
            e.contains(&format!("near 'SELECT {}...' at", "x".repeat(70))),
            "{e}"
        );
        let wide = format!("SELECT 1; SELECT '{}'", "é".repeat(100));
        let e = no(&wide).unwrap_err();
        assert!(
            e.contains(&format!("near 'SELECT '{}...' at", "é".repeat(34))),
            "{e}"
        );
        for fine in [
            "SELECT 1;;",
            "SELECT 1; -- c",
            "SELECT 1;  ",
            "SELECT 'a;b'",
        ] {
            assert_eq!(no(fine), Ok(Batch::One), "{fine}");
        }
        // Without backslash escapes `\'` ends the string.
        let nbe = Mode {
            no_backslash_escapes: true,
            ansi_quotes: false,
        };
        assert!(batch(r"SELECT 'a\'; DROP TABLE t; -- '", nbe, false).is_err());
        assert_eq!(no(r"SELECT 'a\'; DROP TABLE t; -- '"), Ok(Batch::One));
        // A compound statement goes whole: the node judges it.
        let p = "CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END";
        assert_eq!(no(p), Ok(Batch::One));
        assert_eq!(many(&format!("{p}; SELECT 3")), vec![p, "SELECT 3"]);
    }

    #[test]
    fn a_set_naming_autocommit_among_others_is_split_per_assignment() {
        let d = Mode::default();
        assert_eq!(
            set_with_autocommit(
                "set autocommit=1, sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')",
                d
            ),
            Some(vec![
                "SET autocommit=1".to_string(),
                "SET sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')".to_string(),
            ])
        );
        assert_eq!(
            set_with_autocommit(r"SET @@session.autocommit = OFF, @a = 'x,\'y'", d),
            Some(vec![
                "SET @@session.autocommit = OFF".to_string(),
                r"SET @a = 'x,\'y'".to_string()
            ])
        );
        assert_eq!(set_with_autocommit("SET autocommit = 1", d), None);
        assert_eq!(set_with_autocommit("SET a = 1, b = 2", d), None);
        assert_eq!(set_with_autocommit("SELECT autocommit, 1", d), None);
    }
}
