//! Statement digests: a statement's shape with its literals taken out, so that a repeated
//! shape (`SELECT c FROM t WHERE id = 17`, `... id = 42`) finds its cached plan without the
//! parser. One pass over the bytes: single-quoted strings and numbers become `?` and are
//! kept as values; runs of whitespace become one space; everything else (identifiers,
//! keywords, operators, comments, double-quoted text, which is an identifier under
//! ANSI_QUOTES) stays as written, so two statements share a digest only when they differ in
//! literals alone.

use mysql_common::value::Value;

/// A literal taken out of a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Literal {
    /// A number as written (`42`, `3.50`, `1e3`).
    Number(String),
    /// A single-quoted string, its content when it holds no escape (`None`: it does, and
    /// its value is left to the parser).
    Str(Option<String>),
}

impl Literal {
    /// The value the parser's reading of this literal would give (see `sql::literal`), or
    /// `None` when only the parser can tell.
    pub fn value(&self) -> Option<Value> {
        match self {
            Literal::Number(n) => super::number_value(n),
            Literal::Str(Some(s)) => Some(Value::Bytes(super::raw::bytes(s))),
            Literal::Str(None) => None,
        }
    }
}

/// A statement's digest: its normalized text and its literals in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    pub text: String,
    pub literals: Vec<Literal>,
    /// Where each literal is in the statement's text (byte offsets, its quotes included).
    pub spans: Vec<(usize, usize)>,
}

/// The longest digest made: a longer shape (a dump's multi-row INSERT) is no point
/// statement, and lexing it to the end would be work thrown away.
pub const MAX_LEN: usize = 4096;

/// The digest of a text statement; `None` when it has a shape the digest does not cover (an
/// unterminated string or comment, a `?` of its own, more than [`MAX_LEN`] bytes of shape).
pub fn digest(sql: &str) -> Option<Digest> {
    lex(sql, false)
}

/// The digest of a prepared statement: its `?` placeholders stay, so it shares the digest of
/// the same shape sent as text.
pub fn digest_prepared(sql: &str) -> Option<Digest> {
    lex(sql, true)
}

fn lex(sql: &str, placeholders: bool) -> Option<Digest> {
    let b = sql.as_bytes();
    let mut text = String::with_capacity(sql.len().min(MAX_LEN + 64));
    let mut literals = Vec::new();
    let mut spans = Vec::new();
    let mut i = 0;
    let mut space = false;
    // The previous byte written belongs to a word (an identifier or keyword).
    let mut in_word = false;
    while i < b.len() {
        if text.len() > MAX_LEN {
            return None;
        }
        let c = b[i];
        if c.is_ascii_whitespace() {
            space = true;
            in_word = false;
            i += 1;
            continue;
        }
        if space && !text.is_empty() {
            text.push(' ');
        }
        space = false;
        match c {
            b'\'' => {
                let (end, content) = quoted(b, i)?;
                text.push('?');
                literals.push(Literal::Str(content));
                spans.push((i, end));
                i = end;
                in_word = false;
            }
            b'"' | b'`' => {
                let (end, _) = quoted(b, i)?;
                text.push_str(&sql[i..end]);
                i = end;
                in_word = false;
            }
            b'?' if placeholders => {
                text.push('?');
                i += 1;
                in_word = false;
            }
            b'?' => return None,
            // `# ...` and `-- ...` run to the end of the line.
            b'#' | b'-'
                if c == b'#'
                    || b.get(i + 1) == Some(&b'-')
                        && b.get(i + 2).is_none_or(|x| x.is_ascii_whitespace()) =>
            {
                let end = b[i..]
                    .iter()
                    .position(|&x| x == b'\n')
                    .map_or(b.len(), |p| i + p);
                text.push_str(&sql[i..end]);
                i = end;
                in_word = false;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = sql[i + 2..].find("*/").map(|p| i + 2 + p + 2)?;
                text.push_str(&sql[i..end]);
                i = end;
                in_word = false;
            }
            b'0'..=b'9' if !in_word => {
                let end = number_end(b, i);
                let n = &sql[i..end];
                if end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
                    // `0x1F`, `1abc` (an identifier starting with digits): kept as written.
                    let word_end = word_end(b, end);
                    text.push_str(&sql[i..word_end]);
                    i = word_end;
                    in_word = true;
                    continue;
                }
                text.push('?');
                literals.push(Literal::Number(n.to_string()));
                spans.push((i, end));
                i = end;
                in_word = false;
            }
            b'.' if !in_word && b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                let end = number_end(b, i);
                text.push('?');
                literals.push(Literal::Number(sql[i..end].to_string()));
                spans.push((i, end));
                i = end;
                in_word = false;
            }
            _ if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80 => {
                let end = word_end(b, i);
                text.push_str(&sql[i..end]);
                i = end;
                in_word = true;
            }
            _ => {
                text.push(c as char);
                i += 1;
                in_word = false;
            }
        }
    }
    Some(Digest {
        text,
        literals,
        spans,
    })
}

fn word_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len()
        && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$' || b[i] >= 0x80)
    {
        i += 1;
    }
    i
}

/// The end of a number starting at `i`: digits, one fraction, an exponent.
fn number_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    i
}

/// The end of the quoted text starting at `i` (after its closing quote), and its content
/// when it holds neither a backslash nor a doubled quote; `None` if it never ends.
fn quoted(b: &[u8], i: usize) -> Option<(usize, Option<String>)> {
    let q = b[i];
    let mut j = i + 1;
    let mut plain = true;
    while j < b.len() {
        match b[j] {
            b'\\' if q != b'`' => {
                plain = false;
                j += 2;
            }
            x if x == q => {
                if b.get(j + 1) == Some(&q) {
                    plain = false;
                    j += 2;
                } else {
                    let content = plain
                        .then(|| std::str::from_utf8(&b[i + 1..j]).ok().map(str::to_string))
                        .flatten();
                    return Some((j + 1, content));
                }
            }
            _ => j += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(sql: &str) -> (String, Vec<Literal>) {
        let d = digest(sql).unwrap();
        (d.text, d.literals)
    }

    #[test]
    fn literals_become_placeholders() {
        let (t, l) = d("SELECT c FROM sbtest1 WHERE id=4217");
        assert_eq!(t, "SELECT c FROM sbtest1 WHERE id=?");
        assert_eq!(l, vec![Literal::Number("4217".into())]);
        let (t2, _) = d("SELECT  c FROM sbtest1\n WHERE id=17");
        assert_eq!(t, t2);
        let (t, l) = d("UPDATE t SET v = 'it''s', w = 'x' WHERE k = 3.50 AND j = -7");
        assert_eq!(t, "UPDATE t SET v = ?, w = ? WHERE k = ? AND j = -?");
        assert_eq!(
            l,
            vec![
                Literal::Str(None),
                Literal::Str(Some("x".into())),
                Literal::Number("3.50".into()),
                Literal::Number("7".into())
            ]
        );
    }

    #[test]
    fn identifiers_comments_and_quoted_names_stay() {
        let (t, l) = d("SELECT `a1`, t2.b3, \"q 1\" FROM t9 /* 42 */ WHERE x1 = 1 -- 5\n");
        assert_eq!(
            t,
            "SELECT `a1`, t2.b3, \"q 1\" FROM t9 /* 42 */ WHERE x1 = ? -- 5"
        );
        assert_eq!(l.len(), 1);
        let (t, l) = d("SELECT 0x1F, 1e3, .5 FROM t LIMIT 3");
        assert_eq!(t, "SELECT 0x1F, ?, ? FROM t LIMIT ?");
        assert_eq!(l.len(), 3);
    }

    #[test]
    fn a_prepared_statement_shares_its_text_shapes_digest() {
        assert_eq!(
            digest_prepared("SELECT c FROM t WHERE id = ? AND v = 'x'")
                .unwrap()
                .text,
            digest("SELECT c FROM t WHERE id = 5 AND v = 'y'")
                .unwrap()
                .text
        );
    }

    #[test]
    fn shapes_it_does_not_cover() {
        assert!(digest("SELECT 'unterminated").is_none());
        assert!(digest("SELECT * FROM t WHERE id = ?").is_none());
        assert!(digest("SELECT 1 /* open").is_none());
        let dump = format!("INSERT INTO t VALUES {}(1)", "(1), ".repeat(2000));
        assert!(digest(&dump).is_none(), "longer than MAX_LEN");
    }

    #[test]
    fn literal_values_match_the_parsers() {
        assert_eq!(Literal::Number("42".into()).value(), Some(Value::Int(42)));
        assert_eq!(
            Literal::Number("3.50".into()).value(),
            Some(Value::Bytes(b"3.50".to_vec()))
        );
        assert_eq!(
            Literal::Str(Some("ab".into())).value(),
            Some(Value::Bytes(b"ab".to_vec()))
        );
        assert_eq!(Literal::Str(None).value(), None);
    }
}
