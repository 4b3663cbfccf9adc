//! What the proxy itself writes into SQL: every value through one literal writer, every
//! name through one quoting function. A client's own text is never re-printed (it is kept,
//! or edited by token spans: `crate::sql::text`); these are for the values the proxy adds —
//! bound parameters it inlines, copied rows, row images, keys of lookups and moves.
//!
//! A literal must read back as the same value whatever the connection's `sql_mode`: strings
//! are written in hex with their character set as introducer (`_utf8mb4 X'C3A9'`, binary
//! ones as `X'..'`), which neither `NO_BACKSLASH_ESCAPES` nor `ANSI_QUOTES` reads otherwise;
//! integers in decimal; doubles with an exponent (`1.5e0`, a DOUBLE as the binary
//! protocol's); dates and times as quoted digits, which no mode changes either.

use mysql_common::collations::{Collation, CollationId};
use mysql_common::constants::ColumnType;
use mysql_common::packets::Column;
use mysql_common::value::Value;

/// `name` as a backquoted identifier (a backquote in it doubled).
pub fn ident(out: &mut String, name: &str) {
    out.reserve(name.len() + 2);
    out.push('`');
    for c in name.chars() {
        if c == '`' {
            out.push('`');
        }
        out.push(c);
    }
    out.push('`');
}

/// `name` as a backquoted identifier.
pub fn quoted(name: &str) -> String {
    let mut s = String::with_capacity(name.len() + 2);
    ident(&mut s, name);
    s
}

/// `X'..'`: the bytes in hex.
pub fn hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    out.reserve(bytes.len() * 2 + 3);
    out.push_str("X'");
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out.push('\'');
}

/// A character set's name fit to be an introducer (`utf8mb4`, `latin1`, `binary`), or
/// `None` for anything else.
fn charset_name(cs: &str) -> Option<&str> {
    (!cs.is_empty()
        && cs.len() <= 32
        && cs != "unknown"
        && cs.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
    .then_some(cs)
}

/// A string of `charset` (its bytes as the client or node sent them): `_charset X'..'`
/// (`_binary X'..'` for binary ones: a bare `X'..'` is a number where a number is wanted);
/// a name that is no charset's is taken for `utf8mb4`.
pub fn string(out: &mut String, bytes: &[u8], charset: &str) {
    // MariaDB checks an introduced string strictly (1300, invalid character string) where
    // a bound value or a quoted literal of the same bytes passes: bytes that are no text of
    // a UTF-8 charset (a client's binary data bound as a string) go as the bytes they are.
    let utf8 = charset.len() >= 4 && charset[..4].eq_ignore_ascii_case("utf8");
    let four = charset.eq_ignore_ascii_case("utf8mb4");
    let valid = match std::str::from_utf8(bytes) {
        Ok(s) => four || !utf8 || s.chars().all(|c| c.len_utf8() < 4),
        Err(_) => !utf8,
    };
    let charset = if valid { charset } else { "binary" };
    match charset_name(charset) {
        Some(cs) => {
            out.push('_');
            out.push_str(cs);
            out.push(' ');
        }
        None => out.push_str("_utf8mb4 "),
    }
    hex(out, bytes);
}

/// Digits and the punctuation of dates, times and decimals only: quoted as they are, they
/// read the same in every mode.
fn plain(bytes: &[u8], allowed: &[u8]) -> bool {
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|b| b.is_ascii_digit() || allowed.contains(b))
}

/// A double as MariaDB reads a DOUBLE literal: with an exponent. Not finite (no SQL
/// literal is): its text as a string, which MariaDB converts as it converts such text.
fn double(out: &mut String, d: f64) {
    if d.is_finite() {
        out.push_str(&format!("{d:e}"));
    } else {
        string(out, d.to_string().as_bytes(), "utf8mb4");
    }
}

/// A value the client bound to a parameter (or the proxy read), as a literal: strings in
/// `charset` (the session's `character_set_client`, as the binary protocol's strings are).
pub fn value(out: &mut String, v: &Value, charset: &str) {
    match v {
        Value::NULL => out.push_str("NULL"),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::UInt(u) => out.push_str(&u.to_string()),
        Value::Float(f) => double(out, f64::from(*f)),
        Value::Double(d) => double(out, *d),
        Value::Bytes(b) => string(out, b, charset),
        Value::Date(..) | Value::Time(..) => {
            let text = crate::value::text_form(v).unwrap_or_default();
            if plain(&text, b"-: .") {
                out.push('\'');
                out.push_str(&String::from_utf8_lossy(&text));
                out.push('\'');
            } else {
                string(out, &text, "utf8mb4");
            }
        }
    }
}

/// A text the proxy holds (a range bound, a key of a move), as a literal: quoted as it is
/// when it holds only characters no mode reads otherwise (letters, digits and `-:. _+/@`),
/// else as `_utf8mb4 X'..'`.
pub fn text(out: &mut String, s: &str) {
    if quotes_plainly(s) {
        out.push('\'');
        out.push_str(s);
        out.push('\'');
    } else {
        string(out, s.as_bytes(), "utf8mb4");
    }
}

/// Is `s` a parenthesised, comma-separated list of literals as this module writes them
/// (numbers, `NULL`, quoted dates and times, `X'..'` with or without a `_charset`
/// introducer), and nothing else?
pub fn is_literal_tuple(s: &str) -> bool {
    use super::lex::{lex, Kind, Mode};
    let lexed = lex(s, Mode::default());
    if lexed.error.is_some() {
        return false;
    }
    let t = &lexed.toks;
    // Only blanks between the tokens: no comment may hide what follows the tuple.
    let mut at = 0;
    for tok in t {
        if !s.as_bytes()[at..tok.start].iter().all(|b| *b == b' ') {
            return false;
        }
        at = tok.end;
    }
    if at != s.len() {
        return false;
    }
    let text = |i: usize| t[i].text(s);
    if t.len() < 3 || t[0].kind != Kind::LParen || t[t.len() - 1].kind != Kind::RParen {
        return false;
    }
    let mut i = 1;
    let end = t.len() - 1;
    loop {
        // One literal.
        if i < end && t[i].kind == Kind::Op && (text(i) == "-" || text(i) == "+") {
            i += 1;
        }
        let Some(tok) = t.get(i).filter(|_| i < end) else {
            return false;
        };
        let plain_str = |x: &str| {
            x.len() >= 2
                && x[1..x.len() - 1]
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b"-: .".contains(&b))
        };
        let hex_str =
            |x: &str| x.len() >= 2 && x[1..x.len() - 1].bytes().all(|b| b.is_ascii_hexdigit());
        match tok.kind {
            Kind::Number => i += 1,
            Kind::Str if text(i).starts_with('\'') && plain_str(text(i)) => i += 1,
            Kind::Word if text(i).eq_ignore_ascii_case("NULL") => i += 1,
            Kind::Word => {
                let mut j = i;
                if text(j).starts_with('_') && charset_name(&text(j)[1..]).is_some() && j + 1 < end
                {
                    j += 1;
                }
                let x_then_hex = text(j).eq_ignore_ascii_case("X")
                    && j + 1 < end
                    && t[j + 1].kind == Kind::Str
                    && t[j + 1].start == t[j].end
                    && hex_str(text(j + 1));
                if !x_then_hex {
                    return false;
                }
                i = j + 2;
            }
            _ => return false,
        }
        match t.get(i) {
            Some(c) if i == end && c.kind == Kind::RParen => return true,
            Some(c) if c.kind == Kind::Comma && i < end => i += 1,
            _ => return false,
        }
    }
}

/// [`text`] into a new string.
pub fn text_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    text(&mut out, s);
    out
}

/// A key's text form (as routing compares keys) as a literal: a string when it is UTF-8,
/// else its bytes as a binary string.
pub fn key_literal(k: &[u8]) -> String {
    let mut lit = String::new();
    match std::str::from_utf8(k) {
        Ok(t) => text(&mut lit, t),
        Err(_) => string(&mut lit, k, "binary"),
    }
    lit
}

/// A value in the admin interface's own language, as the proxy shows statements for it to
/// take back (`MIGRATE KEY 'o''k' ...`): quoted so that `crate::sql::leading_words` reads
/// it back as it is. Never for a node's SQL.
pub fn admin_word(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// A name the proxy made (an XA transaction id): quoted as it is when it holds only
/// characters no mode reads otherwise, else `X'..'`, which every statement that takes a
/// string (XA's xid included, where an introducer is not allowed) reads as its bytes.
pub fn token(out: &mut String, s: &str) {
    if !s.is_empty() && quotes_plainly(s) {
        out.push('\'');
        out.push_str(s);
        out.push('\'');
    } else {
        hex(out, s.as_bytes());
    }
}

/// [`token`] into a new string.
pub fn token_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    token(&mut out, s);
    out
}

/// Letters, digits and `-:. _+/@` only: quoted as it is, no mode reads it otherwise.
fn quotes_plainly(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-:. _+/@".contains(&b))
}

/// [`value`] into a new string.
pub fn literal(v: &Value, charset: &str) -> String {
    let mut s = String::new();
    value(&mut s, v, charset);
    s
}

/// The character set of a column a node described (its collation id), `binary` for 63.
pub fn column_charset(col: &Column) -> String {
    let id = col.character_set();
    if id == 63 {
        return "binary".into();
    }
    let collation = Collation::resolve(CollationId::from(id));
    charset_name(collation.charset())
        .unwrap_or("utf8mb4")
        .to_string()
}

/// A value a node sent for `col` (text protocol: its bytes), as a literal that stores the
/// same value into a column of that type: numbers as they came, dates and times quoted,
/// BIT as `X'..'` (a BIT column takes the number), binary strings as `_binary X'..'`, text
/// as `_charset X'..'` in the column's character set.
pub fn typed(out: &mut String, v: Option<&Value>, col: &Column) {
    let bytes: Vec<u8> = match v {
        None | Some(Value::NULL) => {
            out.push_str("NULL");
            return;
        }
        Some(Value::Bytes(b)) => b.clone(),
        Some(other) => crate::value::text_form(other).unwrap_or_default(),
    };
    use ColumnType::*;
    match col.column_type() {
        MYSQL_TYPE_DECIMAL
        | MYSQL_TYPE_NEWDECIMAL
        | MYSQL_TYPE_TINY
        | MYSQL_TYPE_SHORT
        | MYSQL_TYPE_LONG
        | MYSQL_TYPE_FLOAT
        | MYSQL_TYPE_DOUBLE
        | MYSQL_TYPE_LONGLONG
        | MYSQL_TYPE_INT24
        | MYSQL_TYPE_YEAR
            if plain(&bytes, b"+-.eE") =>
        {
            out.push_str(&String::from_utf8_lossy(&bytes));
        }
        MYSQL_TYPE_DATE
        | MYSQL_TYPE_NEWDATE
        | MYSQL_TYPE_TIME
        | MYSQL_TYPE_TIME2
        | MYSQL_TYPE_DATETIME
        | MYSQL_TYPE_DATETIME2
        | MYSQL_TYPE_TIMESTAMP
        | MYSQL_TYPE_TIMESTAMP2
            if plain(&bytes, b"-: .") =>
        {
            out.push('\'');
            out.push_str(&String::from_utf8_lossy(&bytes));
            out.push('\'');
        }
        MYSQL_TYPE_BIT => hex(out, &bytes),
        _ => string(out, &bytes, &column_charset(col)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_backquoted_with_backquotes_doubled() {
        assert_eq!(quoted("t"), "`t`");
        assert_eq!(quoted("a`b"), "`a``b`");
        assert_eq!(quoted("x' OR 1 -- "), "`x' OR 1 -- `");
    }

    #[test]
    fn values_are_written_in_forms_no_mode_reads_otherwise() {
        let l = |v: Value| literal(&v, "utf8mb4");
        assert_eq!(l(Value::NULL), "NULL");
        assert_eq!(l(Value::Int(-7)), "-7");
        assert_eq!(l(Value::UInt(u64::MAX)), "18446744073709551615");
        assert_eq!(l(Value::Double(1.5)), "1.5e0");
        assert_eq!(l(Value::Double(-0.001)), "-1e-3");
        assert_eq!(
            l(Value::Bytes(b"\\' OR 1=1 -- ".to_vec())),
            "_utf8mb4 X'5C27204F5220313D31202D2D20'"
        );
        assert_eq!(
            literal(&Value::Bytes(vec![0xff]), "latin1"),
            "_latin1 X'FF'"
        );
        assert_eq!(literal(&Value::Bytes(vec![0]), "binary"), "_binary X'00'");
        assert_eq!(
            literal(&Value::Bytes(vec![1]), "bad name'"),
            "_utf8mb4 X'01'"
        );
        assert_eq!(
            l(Value::Date(2024, 2, 29, 10, 0, 0, 5)),
            "'2024-02-29 10:00:00.000005'"
        );
        assert_eq!(l(Value::Time(true, 1, 2, 3, 4, 0)), "'-26:03:04'");
        assert!(l(Value::Double(f64::NAN)).starts_with("_utf8mb4 X'"));
    }

    #[test]
    fn stored_tuples_are_taken_only_as_literals() {
        for ok in [
            "(5)",
            "(-5, 1.5e0, NULL)",
            "(_utf8mb4 X'41', X'00FF', _binary X'')",
            "('2024-01-01 10:00:00.5', 7)",
            "(1.5e+20, -1.5E-3, .5, -0.0)",
        ] {
            assert!(is_literal_tuple(ok), "{ok}");
        }
        for bad in [
            "(5) OR 1=1",
            "(5); DROP TABLE t",
            "('a')",
            "(SLEEP(5))",
            "(_utf8mb4 'x')",
            "(X'4G')",
            "(1) -- ",
            "()",
            "(1,)",
            "5",
            "(_x X'41' _y)",
        ] {
            assert!(!is_literal_tuple(bad), "{bad}");
        }
    }

    #[test]
    fn literals_keep_values_whatever_the_sql_mode() {
        let mut s = String::new();
        let text = Column::new(ColumnType::MYSQL_TYPE_VAR_STRING).with_character_set(45);
        typed(&mut s, Some(&Value::Bytes(b"a'\\".to_vec())), &text);
        s.push(' ');
        let bin = Column::new(ColumnType::MYSQL_TYPE_BLOB).with_character_set(63);
        typed(&mut s, Some(&Value::Bytes(vec![0, 255])), &bin);
        s.push(' ');
        let num = Column::new(ColumnType::MYSQL_TYPE_NEWDECIMAL).with_character_set(63);
        typed(&mut s, Some(&Value::Bytes(b"-12.50".to_vec())), &num);
        s.push(' ');
        let date = Column::new(ColumnType::MYSQL_TYPE_DATETIME).with_character_set(63);
        typed(
            &mut s,
            Some(&Value::Bytes(b"2026-12-01 10:00:00".to_vec())),
            &date,
        );
        s.push(' ');
        typed(&mut s, None, &num);
        s.push(' ');
        let latin = Column::new(ColumnType::MYSQL_TYPE_STRING).with_character_set(8);
        typed(&mut s, Some(&Value::Bytes(vec![0xe9])), &latin);
        assert_eq!(
            s,
            "_utf8mb4 X'61275C' _binary X'00FF' -12.50 '2026-12-01 10:00:00' NULL _latin1 X'E9'"
        );
    }
}

/// What keeps the rule: no source file but this one writes a value into SQL by hand.
#[cfg(test)]
mod lint {
    use std::path::{Path, PathBuf};

    /// Hand-made escaping, mysql_common's escaper, or a value placed in quotes in SQL text.
    fn offences(line: &str) -> Option<&'static str> {
        if line.contains(".as_sql(") {
            return Some(
                "Value::as_sql (backslash escapes, which NO_BACKSLASH_ESCAPES reads otherwise)",
            );
        }
        if line.contains("replace('\\'',") || line.contains("replace('\\\\',") {
            return Some("quotes or backslashes escaped by hand");
        }
        let sql = [
            "SELECT ", "INSERT ", "UPDATE ", "DELETE ", "WHERE ", "VALUES", " IN (", "XA ", "SET ",
        ];
        if let Some(at) = line.find("'{") {
            if line[at..].contains("}'") && sql.iter().any(|k| line.contains(k)) {
                return Some("a value formatted into quotes in SQL");
            }
        }
        None
    }

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }

    #[test]
    fn values_reach_sql_only_through_the_literal_writer() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&root, &mut files);
        assert!(
            files.len() > 50,
            "the sources were not found under {root:?}"
        );
        let mut found = Vec::new();
        for f in files {
            let rel = f
                .strip_prefix(&root)
                .unwrap_or(&f)
                .to_string_lossy()
                .into_owned();
            // This file is the writer (the admin's own language included: `admin_word`).
            // Tests build clients' statements: the lint reads the code that runs.
            if rel == "sql/write.rs" || rel.ends_with("tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            for (n, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("#[cfg(test)]") {
                    break;
                }
                if line.trim_start().starts_with("//") {
                    continue;
                }
                if let Some(why) = offences(line) {
                    found.push(format!("src/{rel}:{}: {why}: {}", n + 1, line.trim()));
                }
            }
        }
        assert!(found.is_empty(), "{}", found.join("\n"));
    }

    #[test]
    fn the_lint_sees_what_it_forbids() {
        assert!(offences(r#"format!("WHERE a = '{v}'")"#).is_some());
        assert!(offences(r#"v.as_sql(false)"#).is_some());
        assert!(offences(r#"s.replace('\'', "''")"#).is_some());
        assert!(offences(r#"format!("key '{k}' of `{t}` moves")"#).is_none());
    }
}
