//! May a read go to a replica? A statement that only reads can still leave something
//! behind or ask for what only the primary has: named locks, a generated id, a sequence's
//! next value, an assignment to a user variable, a file written by `INTO OUTFILE`, a
//! replication wait. Those stay on the primary, as do reads the client marks with a
//! `/*+ primary */` comment and reads of the tables `[replicas] primary_tables` names.
//! The scan is of tokens, as MariaDB reads the text in the session's mode: a word inside a
//! string is no call.

use super::lex::{lex, Kind, Mode};

/// Words that, as calls or clauses, keep a read on the primary.
const PRIMARY_WORDS: &[&str] = &[
    "GET_LOCK",
    "RELEASE_LOCK",
    "RELEASE_ALL_LOCKS",
    "IS_FREE_LOCK",
    "IS_USED_LOCK",
    "LAST_INSERT_ID",
    "NEXTVAL",
    "LASTVAL",
    "SETVAL",
    "INTO",
    "SQL_CALC_FOUND_ROWS",
    "FOUND_ROWS",
    "MASTER_GTID_WAIT",
    "MASTER_POS_WAIT",
];

/// May `sql` (a read) run on a replica?
pub fn replica_read(sql: &str, mode: Mode, primary_tables: &[String]) -> bool {
    let lexed = lex(sql, mode);
    if lexed.error.is_some() {
        return false;
    }
    let toks = &lexed.toks;
    // Comments are what lies between tokens.
    let mut from = 0;
    for t in toks.iter().chain(std::iter::once(&super::lex::Tok {
        kind: Kind::Semi,
        start: sql.len(),
        end: sql.len(),
    })) {
        if asks_primary(sql.get(from..t.start).unwrap_or("")) {
            return false;
        }
        from = t.end;
    }
    for (i, t) in toks.iter().enumerate() {
        let text = t.text(sql);
        match t.kind {
            Kind::Word if PRIMARY_WORDS.iter().any(|w| text.eq_ignore_ascii_case(w)) => {
                return false
            }
            // NEXT VALUE FOR / PREVIOUS VALUE FOR a sequence.
            Kind::Word
                if (text.eq_ignore_ascii_case("NEXT") || text.eq_ignore_ascii_case("PREVIOUS"))
                    && toks.get(i + 1).is_some_and(|n| n.is(sql, "VALUE")) =>
            {
                return false
            }
            // `@v := e`.
            Kind::Op if text == ":" && toks.get(i + 1).is_some_and(|n| n.text(sql) == "=") => {
                return false
            }
            Kind::Word | Kind::Quoted if !primary_tables.is_empty() => {
                let name = unquoted(text);
                if primary_tables.iter().any(|p| p.eq_ignore_ascii_case(&name)) {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

/// A name's text without its quotes.
fn unquoted(text: &str) -> String {
    let b = text.as_bytes();
    match b.first() {
        Some(&q) if (q == b'`' || q == b'"') && text.len() >= 2 => {
            let inner = &text[1..text.len() - 1];
            let doubled = if q == b'`' { "``" } else { "\"\"" };
            inner.replace(doubled, &text[..1])
        }
        _ => text.to_string(),
    }
}

/// Does this stretch between tokens hold a comment `/*+ primary */` or `/* primary */`?
fn asks_primary(gap: &str) -> bool {
    let mut rest = gap;
    while let Some(open) = rest.find("/*") {
        let body = &rest[open + 2..];
        let Some(close) = body.find("*/") else {
            return false;
        };
        let inner = body[..close].trim_start_matches(['+', '!']).trim();
        if inner.eq_ignore_ascii_case("primary") {
            return true;
        }
        rest = &body[close + 2..];
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(sql: &str) -> bool {
        replica_read(sql, Mode::default(), &["ledger".to_string()])
    }

    #[test]
    fn reads_with_side_effects_or_a_hint_stay_on_the_primary() {
        for sql in [
            "SELECT * FROM t WHERE id = 1",
            "SELECT 'GET_LOCK(1)', `into` FROM t",
            "SELECT /* a comment */ v FROM t",
            "SELECT @a, @@server_id FROM t",
            "select count(*) from t where note = 'INTO @x'",
        ] {
            assert!(ok(sql), "{sql}");
        }
        for sql in [
            "SELECT /*+ primary */ * FROM t",
            "/* PRIMARY */ SELECT * FROM t",
            "SELECT * FROM t /*+primary*/",
            "SELECT GET_LOCK('a', 1) FROM t",
            "SELECT LAST_INSERT_ID() FROM t",
            "SELECT v INTO @x FROM t WHERE id = 1",
            "SELECT @n := @n + 1 FROM t",
            "SELECT NEXT VALUE FOR s",
            "SELECT NEXTVAL(s)",
            "SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1",
            "SELECT * FROM ledger WHERE id = 1",
            "SELECT * FROM `Ledger`",
            "SELECT * FROM t WHERE note = 'unterminated",
        ] {
            assert!(!ok(sql), "{sql}");
        }
    }
}
