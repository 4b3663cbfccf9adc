//! Splitting a multi-statement COM_QUERY (CLIENT_MULTI_STATEMENTS) into its statements, each
//! keeping its original text: sqlparser's MySQL tokenizer finds the top-level semicolons, so
//! semicolons inside strings, quoted names and comments do not split.

use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, Tokenizer};

/// The statements of `sql` in order, without their terminating semicolons; empty statements
/// are dropped. Text the tokenizer cannot read, and compound statements (a `BEGIN ... END`
/// body holds semicolons of its own), stay one statement.
pub fn split_statements(sql: &str) -> Vec<String> {
    let whole = || vec![sql.to_string()];
    let Ok(tokens) = Tokenizer::new(&MySqlDialect {}, sql).tokenize_with_location() else {
        return whole();
    };
    // Byte offset of each line start (tokenizer locations are 1-based line and char column).
    let mut line_starts = vec![0usize];
    for (i, b) in sql.bytes().enumerate() {
        if b == b'\n' {
            line_starts.push(i + 1);
        }
    }
    let offset = |line: u64, column: u64| -> Option<usize> {
        let start = *line_starts.get(usize::try_from(line).ok()?.checked_sub(1)?)?;
        let col = usize::try_from(column).ok()?.checked_sub(1)?;
        let rest = sql.get(start..)?;
        Some(match rest.char_indices().nth(col) {
            Some((i, _)) => start + i,
            None => sql.len(),
        })
    };
    let mut parts = Vec::new();
    let mut from = 0usize;
    let mut first_word = true;
    for t in &tokens {
        match &t.token {
            Token::SemiColon => {
                let Some(at) = offset(t.span.start.line, t.span.start.column) else {
                    return whole();
                };
                if at < from || sql.as_bytes().get(at) != Some(&b';') {
                    return whole();
                }
                parts.push(&sql[from..at]);
                from = at + 1;
                first_word = true;
            }
            Token::Whitespace(_) => {}
            Token::Word(w) => {
                if w.keyword == Keyword::BEGIN && !first_word && w.quote_style.is_none() {
                    return whole();
                }
                first_word = false;
            }
            _ => first_word = false,
        }
    }
    parts.push(&sql[from..]);
    let parts: Vec<String> = parts
        .into_iter()
        .filter(|p| !is_blank(p))
        .map(str::to_string)
        .collect();
    if parts.is_empty() {
        whole()
    } else {
        parts
    }
}

/// A `SET` of several assignments one of which is `autocommit` (Connector/J sends
/// `set autocommit=1, sql_mode = concat(@@sql_mode, ...)` on connect), as one `SET` per
/// assignment: autocommit is the session's own state, the rest go to the nodes. `None` for
/// anything else.
pub fn set_with_autocommit(sql: &str) -> Option<Vec<String>> {
    let head = sql.trim_start().get(..3)?;
    if !head.eq_ignore_ascii_case("set") || !sql.contains(',') {
        return None;
    }
    let tokens = Tokenizer::new(&MySqlDialect {}, sql).tokenize().ok()?;
    let mut words = tokens.iter().filter(|t| !matches!(t, Token::Whitespace(_)));
    match words.next() {
        Some(Token::Word(w)) if w.keyword == Keyword::SET && w.quote_style.is_none() => {}
        _ => return None,
    }
    let mut parts: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut depth = 0i32;
    let mut started = false;
    for t in &tokens {
        if !started {
            // Skip up to and including the SET keyword.
            if let Token::Word(w) = t {
                if w.keyword == Keyword::SET {
                    started = true;
                }
            }
            continue;
        }
        match t {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Comma if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            Token::SemiColon | Token::EOF => continue,
            _ => {}
        }
        current.push_str(&t.to_string());
    }
    parts.push(current);
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
    if !parts.iter().any(|p| names_autocommit(p)) {
        return None;
    }
    Some(
        parts
            .into_iter()
            .map(|p| format!("SET {}", p.trim()))
            .collect(),
    )
}

/// Only whitespace and comments.
fn is_blank(s: &str) -> bool {
    match Tokenizer::new(&MySqlDialect {}, s).tokenize() {
        Ok(tokens) => tokens
            .iter()
            .all(|t| matches!(t, Token::Whitespace(_) | Token::EOF)),
        Err(_) => s.trim().is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_top_level_semicolons_only() {
        let sql = "SELECT 'a;b', `c;d` FROM t; /* ; */ INSERT INTO t VALUES (\"x;\") ;\n-- end;\n";
        assert_eq!(
            split_statements(sql),
            vec![
                "SELECT 'a;b', `c;d` FROM t".to_string(),
                " /* ; */ INSERT INTO t VALUES (\"x;\") ".to_string(),
            ]
        );
    }

    #[test]
    fn multibyte_text_and_lines_keep_their_bytes() {
        let sql = "SELECT 'é;ü'\n  ;SELECT 'ß'";
        assert_eq!(
            split_statements(sql),
            vec!["SELECT 'é;ü'\n  ", "SELECT 'ß'"]
        );
    }

    #[test]
    fn a_set_naming_autocommit_among_others_is_split_per_assignment() {
        assert_eq!(
            set_with_autocommit(
                "set autocommit=1, sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')"
            ),
            Some(vec![
                "SET autocommit=1".to_string(),
                "SET sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')".to_string(),
            ])
        );
        assert_eq!(
            set_with_autocommit("SET @@session.autocommit = OFF, @a = 'x,y'").map(|v| v.len()),
            Some(2)
        );
        assert_eq!(set_with_autocommit("SET autocommit = 1"), None);
        assert_eq!(set_with_autocommit("SET a = 1, b = 2"), None);
        assert_eq!(set_with_autocommit("SELECT autocommit, 1"), None);
    }

    #[test]
    fn single_statements_and_compound_bodies_stay_whole() {
        assert_eq!(split_statements("SELECT 1"), vec!["SELECT 1"]);
        assert_eq!(split_statements("SELECT 1;"), vec!["SELECT 1"]);
        let proc = "CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END";
        assert_eq!(split_statements(proc), vec![proc]);
        assert_eq!(
            split_statements("BEGIN; SELECT 1"),
            vec!["BEGIN", " SELECT 1"]
        );
        let bad = "SELECT 'unterminated; SELECT 2";
        assert_eq!(split_statements(bad), vec![bad]);
        assert_eq!(split_statements(" ; "), vec![" ; "]);
    }
}
