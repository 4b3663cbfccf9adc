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
    if s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-:. _+/@".contains(&b))
    {
        out.push('\'');
        out.push_str(s);
        out.push('\'');
    } else {
        string(out, s.as_bytes(), "utf8mb4");
    }
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
