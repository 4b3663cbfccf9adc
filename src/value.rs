//! Where values live: MySQL's text forms of the values the proxy reads from statements and
//! nodes. Routing hashes and looks keys up by [`text_form`], the SQL layer compares and
//! prints keys with it, the merge prints merged doubles with [`format_float`].

use mysql_common::value::Value;

/// The text form MySQL's `CRC32()` hashes for a value: integers in decimal, strings as their
/// bytes, dates as `YYYY-MM-DD[ hh:mm:ss[.ffffff]]`. `None` for NULL (NULL has no slot).
pub fn text_form(value: &Value) -> Option<Vec<u8>> {
    Some(match value {
        Value::NULL => return None,
        Value::Bytes(b) => b.clone(),
        Value::Int(i) => i.to_string().into_bytes(),
        Value::UInt(u) => u.to_string().into_bytes(),
        Value::Float(f) => key_float(f64::from(*f)).into_bytes(),
        Value::Double(d) => key_float(*d).into_bytes(),
        Value::Date(y, m, d, 0, 0, 0, 0) => format!("{y:04}-{m:02}-{d:02}").into_bytes(),
        Value::Date(y, mo, d, h, mi, s, 0) => {
            format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}").into_bytes()
        }
        Value::Date(y, mo, d, h, mi, s, us) => {
            format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{us:06}").into_bytes()
        }
        Value::Time(neg, days, h, m, s, us) => {
            let hours = u64::from(*days) * 24 + u64::from(*h);
            let sign = if *neg { "-" } else { "" };
            if *us == 0 {
                format!("{sign}{hours:02}:{m:02}:{s:02}").into_bytes()
            } else {
                format!("{sign}{hours:02}:{m:02}:{s:02}.{us:06}").into_bytes()
            }
        }
    })
}

/// An integer a node sent: in the binary protocol typed, in the text protocol its digits.
/// `None` for any other value, or one that does not fit `T`.
pub fn integer<T: std::str::FromStr>(value: &Value) -> Option<T> {
    match value {
        Value::Bytes(_) | Value::Int(_) | Value::UInt(_) => {
            std::str::from_utf8(&text_form(value)?).ok()?.parse().ok()
        }
        _ => None,
    }
}

/// A float key's text in [`text_form`]: whole numbers below 1e15 as integers, anything else
/// in Rust's shortest form, never with an exponent. Not [`format_float`] (which writes `1e20`):
/// the slot of a stored row depends on this text, so it stays as it is.
fn key_float(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

/// The integer MariaDB reads a key string that is a number as, where that is not the
/// string's own text: an integer column compared with `'012'`, `' 12'`, `'12.0'` or `'1.2e1'`
/// compares with 12, and its rows lie on the slot of `12`, not of the string. `None` for other
/// values, strings that are not wholly a number (`'abc'`, a UUID: a string key's own text),
/// canonical integer text, numbers that are not whole (no integer equals them) and ones past
/// 2^53 (a double's exact integers). (MariaDB also reads `'12abc'` as 12, with a warning:
/// such keys are routed by their text.)
pub fn integer_alias(value: &Value) -> Option<Value> {
    let Value::Bytes(b) = value else {
        return None;
    };
    let s = std::str::from_utf8(b).ok()?;
    const BLANK: [char; 6] = [' ', '\t', '\n', '\r', '\x0b', '\x0c'];
    let t = s.trim_matches(BLANK);
    let bytes = t.as_bytes();
    let mut end = 0;
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        end = 1;
    }
    let digits = |from: usize| {
        bytes[from..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    };
    let int = digits(end);
    end += int;
    let mut frac = 0;
    if bytes.get(end) == Some(&b'.') {
        frac = digits(end + 1);
        if int + frac > 0 {
            end += 1 + frac;
        }
    }
    if int + frac > 0 && matches!(bytes.get(end), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(end + 1), Some(b'+' | b'-')));
        let exp = digits(end + 1 + sign);
        if exp > 0 {
            end += 1 + sign + exp;
        }
    }
    if int + frac == 0 || end != t.len() {
        return None;
    }
    let n: f64 = t.parse().ok()?;
    if n.fract() != 0.0 || n.abs() >= 9_007_199_254_740_992.0 {
        return None;
    }
    let whole = n as i64;
    (whole.to_string() != s).then_some(Value::Int(whole))
}

/// MySQL's text for a DOUBLE.
pub fn format_float(f: f64) -> String {
    if f != 0.0 && (f.abs() >= 1e15 || f.abs() < 1e-4) {
        format!("{f:e}")
    } else {
        format!("{f}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_string_is_read_as_the_integer_mariadb_compares_it_with() {
        let alias = |s: &str| integer_alias(&Value::Bytes(s.as_bytes().to_vec()));
        for (s, n) in [
            ("012", 12),
            (" 12", 12),
            ("12.0", 12),
            ("1e3", 1000),
            ("1.2e1", 12),
            ("+7", 7),
            ("-007", -7),
            ("12 ", 12),
            ("-0", 0),
        ] {
            assert_eq!(alias(s), Some(Value::Int(n)), "{s:?}");
        }
        for s in [
            "12",
            "-7",
            "0",
            "12.5",
            "1e400",
            "99999999999999999999",
            "abc",
            "",
            "12abc",
            "3f2a9c1e-0000-4000-8000-000000000000",
            "1e",
            ".",
        ] {
            assert_eq!(alias(s), None, "{s:?}");
        }
        assert_eq!(integer_alias(&Value::Int(12)), None);
    }

    #[test]
    fn integers_are_read_typed_or_from_their_digits() {
        assert_eq!(integer::<u32>(&Value::Bytes(b"42".to_vec())), Some(42));
        assert_eq!(integer::<u32>(&Value::Int(42)), Some(42));
        assert_eq!(integer::<u64>(&Value::UInt(u64::MAX)), Some(u64::MAX));
        assert_eq!(integer::<u64>(&Value::Int(-1)), None, "does not fit");
        assert_eq!(integer::<u32>(&Value::Bytes(b"x".to_vec())), None);
        assert_eq!(
            integer::<u32>(&Value::Double(4.0)),
            None,
            "not an integer value"
        );
        assert_eq!(integer::<u32>(&Value::NULL), None);
    }

    #[test]
    fn text_forms_follow_mysql_printing() {
        assert_eq!(text_form(&Value::Int(-7)).unwrap(), b"-7");
        assert_eq!(
            text_form(&Value::Date(2024, 1, 31, 0, 0, 0, 0)).unwrap(),
            b"2024-01-31"
        );
        assert_eq!(
            text_form(&Value::Date(2024, 1, 31, 13, 5, 9, 0)).unwrap(),
            b"2024-01-31 13:05:09"
        );
        assert_eq!(
            text_form(&Value::Time(true, 1, 2, 3, 4, 0)).unwrap(),
            b"-26:03:04"
        );
        assert_eq!(text_form(&Value::Double(3.0)).unwrap(), b"3");
    }
}
