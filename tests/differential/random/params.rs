//! Placeholders for the random tester: some literals of a generated statement become `?`
//! bound to the same values, so that prepared statements with parameters (in WHERE, IN,
//! LIMIT, function arguments) are compared too. Both sides get the same text and values.

use mysql_async::Value;
use rand::rngs::StdRng;
use rand::Rng;

/// A piece of a statement's text.
#[derive(Debug, PartialEq)]
enum Tok<'a> {
    /// A word: keyword or identifier.
    Word(&'a str),
    /// An integer literal.
    Int(&'a str),
    /// A string literal, its value.
    Str(String),
    /// Anything else, as written (numbers with a fraction or exponent included).
    Other(&'a str),
}

/// The tokens of `sql`; the text between them is kept in `Other`.
fn lex(sql: &str) -> Vec<(Tok<'_>, &str)> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        let c = b[i];
        if c == b'\'' {
            // A string literal: '' and \x escapes.
            let mut value = Vec::new();
            i += 1;
            while i < b.len() {
                match b[i] {
                    b'\'' if b.get(i + 1) == Some(&b'\'') => {
                        value.push(b'\'');
                        i += 2;
                    }
                    b'\'' => {
                        i += 1;
                        break;
                    }
                    b'\\' if i + 1 < b.len() => {
                        // MariaDB keeps the backslash of \% and \_ (LIKE escapes).
                        if matches!(b[i + 1], b'%' | b'_') {
                            value.push(b'\\');
                        }
                        value.push(b[i + 1]);
                        i += 2;
                    }
                    other => {
                        value.push(other);
                        i += 1;
                    }
                }
            }
            let text = String::from_utf8_lossy(&value).into_owned();
            out.push((Tok::Str(text), &sql[start..i]));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Word(&sql[start..i]), &sql[start..i]));
        } else if c.is_ascii_digit() {
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let plain = i >= b.len() || !(b[i] == b'.' || b[i] == b'e' || b[i] == b'E');
            if plain {
                out.push((Tok::Int(&sql[start..i]), &sql[start..i]));
            } else {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                    i += 1;
                }
                out.push((Tok::Other(&sql[start..i]), &sql[start..i]));
            }
        } else {
            i += 1;
            while i < b.len() && !sql.is_char_boundary(i) {
                i += 1;
            }
            out.push((Tok::Other(&sql[start..i]), &sql[start..i]));
        }
    }
    out
}

/// `sql` with about `share` of its integer and string literals replaced by `?`, and the
/// values bound to them; `None` when no literal could be.
///
/// Left as written: literals in ORDER BY and GROUP BY (a position there is not a value),
/// after DATE / TIMESTAMP (typed literals) and SEPARATOR, and everything in a statement
/// that has none of them.
pub(crate) fn parameterize(
    rng: &mut StdRng,
    sql: &str,
    share: f64,
) -> Option<(String, Vec<Value>)> {
    let toks = lex(sql);
    let mut out = String::with_capacity(sql.len());
    let mut params = Vec::new();
    // The last word, upper-cased, and whether we are in ORDER BY / GROUP BY.
    let mut prev = String::new();
    let mut in_by = false;
    for (tok, text) in &toks {
        let replaceable = !in_by
            && !matches!(prev.as_str(), "DATE" | "TIMESTAMP" | "SEPARATOR")
            && rng.gen_bool(share);
        match tok {
            Tok::Word(w) => {
                let up = w.to_ascii_uppercase();
                if up == "BY" && (prev == "ORDER" || prev == "GROUP") {
                    in_by = true;
                } else if matches!(
                    up.as_str(),
                    "LIMIT" | "HAVING" | "WHERE" | "UNION" | "FROM" | "SELECT" | "ON"
                ) {
                    in_by = false;
                }
                prev = up;
                out.push_str(text);
                continue;
            }
            Tok::Int(n) if replaceable => match n.parse::<i64>() {
                Ok(v) => params.push(Value::Int(v)),
                Err(_) => match n.parse::<u64>() {
                    Ok(v) => params.push(Value::UInt(v)),
                    Err(_) => {
                        out.push_str(text);
                        continue;
                    }
                },
            },
            Tok::Str(s) if replaceable => params.push(Value::Bytes(s.clone().into_bytes())),
            _ => {
                out.push_str(text);
                continue;
            }
        }
        out.push('?');
    }
    (!params.is_empty()).then_some((out, params))
}

#[test]
fn literals_become_placeholders_where_a_value_may_stand() {
    use rand::SeedableRng;
    let mut rng = StdRng::seed_from_u64(1);
    let sql = "SELECT ci_2, 'a''b' FROM t WHERE x IN (1, -2, 'O''Brien') AND y LIKE '50\\%' \
               AND d > DATE '2020-01-01' GROUP BY 1 ORDER BY 2, 1.5 LIMIT 3, 4";
    let (text, params) = parameterize(&mut rng, sql, 1.0).expect("literals");
    assert_eq!(
        text,
        "SELECT ci_2, ? FROM t WHERE x IN (?, -?, ?) AND y LIKE ? \
         AND d > DATE '2020-01-01' GROUP BY 1 ORDER BY 2, 1.5 LIMIT ?, ?"
    );
    assert_eq!(
        params,
        vec![
            Value::Bytes(b"a'b".to_vec()),
            Value::Int(1),
            Value::Int(2),
            Value::Bytes(b"O'Brien".to_vec()),
            Value::Bytes(b"50\\%".to_vec()),
            Value::Int(3),
            Value::Int(4),
        ]
    );
    assert!(parameterize(&mut rng, "SELECT 1.5 FROM t ORDER BY 1", 1.0).is_none());
}
