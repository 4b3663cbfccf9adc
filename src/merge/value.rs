//! Values as MySQL compares and adds them: numbers numerically (DECIMAL exactly), strings by
//! the column's collation, NULL first.

use std::cmp::Ordering;

use mysql_common::collations::{Collation, CollationId};
use mysql_common::constants::ColumnType;
use mysql_common::packets::Column;
use mysql_common::value::Value;

/// An exact decimal: `mantissa / 10^scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dec {
    pub mantissa: i128,
    pub scale: u32,
}

const MAX_SCALE: u32 = 30;

impl Dec {
    pub fn parse(s: &str) -> Option<Dec> {
        let s = s.trim();
        let (neg, digits) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
            return None;
        }
        let mut m: i128 = 0;
        for b in int.bytes().chain(frac.bytes()) {
            m = m.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
        }
        let scale = u32::try_from(frac.len()).ok()?;
        Some(Dec {
            mantissa: if neg { -m } else { m },
            scale,
        })
    }

    pub fn from_int(i: i128) -> Dec {
        Dec {
            mantissa: i,
            scale: 0,
        }
    }

    fn rescale(self, scale: u32) -> Option<Dec> {
        if scale < self.scale {
            return None;
        }
        let f = 10i128.checked_pow(scale - self.scale)?;
        Some(Dec {
            mantissa: self.mantissa.checked_mul(f)?,
            scale,
        })
    }

    pub fn checked_add(self, o: Dec) -> Option<Dec> {
        let scale = self.scale.max(o.scale);
        let a = self.rescale(scale)?;
        let b = o.rescale(scale)?;
        Some(Dec {
            mantissa: a.mantissa.checked_add(b.mantissa)?,
            scale,
        })
    }

    pub fn compare(self, o: Dec) -> Ordering {
        let scale = self.scale.max(o.scale);
        match (self.rescale(scale), o.rescale(scale)) {
            (Some(a), Some(b)) => a.mantissa.cmp(&b.mantissa),
            _ => self.to_f64().total_cmp(&o.to_f64()),
        }
    }

    pub fn to_f64(self) -> f64 {
        self.mantissa as f64 / 10f64.powi(self.scale as i32)
    }

    /// `self / o` as MySQL divides decimals: the dividend's scale plus
    /// `div_precision_increment` (4) digits, rounded half away from zero. `None` when `o` is 0
    /// (SQL NULL) or on overflow.
    pub fn divide(self, o: Dec) -> Option<Dec> {
        if o.mantissa == 0 {
            return None;
        }
        let scale = (self.scale + 4).min(MAX_SCALE);
        // self.m * 10^(o.s + scale - self.s + 1) / o.m, then round off the extra digit.
        let exp = (o.scale + scale + 1).checked_sub(self.scale)?;
        let num = self.mantissa.checked_mul(10i128.checked_pow(exp)?)?;
        let q = num / o.mantissa;
        let rounded = if q >= 0 { (q + 5) / 10 } else { (q - 5) / 10 };
        Some(Dec {
            mantissa: rounded,
            scale,
        })
    }

    pub fn checked_mul(self, o: Dec) -> Option<Dec> {
        Some(Dec {
            mantissa: self.mantissa.checked_mul(o.mantissa)?,
            scale: self.scale + o.scale,
        })
    }

    pub fn negate(self) -> Dec {
        Dec {
            mantissa: -self.mantissa,
            scale: self.scale,
        }
    }

    /// `self / n` rounded half away from zero to `scale` decimals, as MySQL's AVG.
    pub fn div_round(self, n: i128, scale: u32) -> Option<Dec> {
        if n == 0 {
            return None;
        }
        let scale = scale.min(MAX_SCALE);
        // mantissa * 10^(scale - self.scale + 1) / n, then round the extra digit.
        let extra = (scale + 1).checked_sub(self.scale);
        let (num, den) = match extra {
            Some(e) => (self.mantissa.checked_mul(10i128.checked_pow(e)?)?, n),
            None => (
                self.mantissa,
                n.checked_mul(10i128.checked_pow(self.scale - scale - 1)?)?,
            ),
        };
        let q = num / den;
        let rounded = if q >= 0 { (q + 5) / 10 } else { (q - 5) / 10 };
        Some(Dec {
            mantissa: rounded,
            scale,
        })
    }

    /// The text MySQL prints for this value with exactly `scale` decimals.
    pub fn format(self, scale: u32) -> String {
        let d = match self.rescale(scale) {
            Some(d) => d,
            None => self.div_round(1, scale).unwrap_or(self),
        };
        let neg = d.mantissa < 0;
        let digits = d.mantissa.unsigned_abs().to_string();
        let s = d.scale as usize;
        let body = if s == 0 {
            digits
        } else if digits.len() > s {
            format!(
                "{}.{}",
                &digits[..digits.len() - s],
                &digits[digits.len() - s..]
            )
        } else {
            format!("0.{}{}", "0".repeat(s - digits.len()), digits)
        };
        if neg {
            format!("-{body}")
        } else {
            body
        }
    }
}

/// A number as it takes part in comparisons and sums.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    Int(i128),
    Dec(Dec),
    Float(f64),
}

impl Num {
    pub fn to_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Dec(d) => d.to_f64(),
            Num::Float(f) => f,
        }
    }

    fn to_dec(self) -> Option<Dec> {
        match self {
            Num::Int(i) => Some(Dec::from_int(i)),
            Num::Dec(d) => Some(d),
            Num::Float(_) => None,
        }
    }

    pub fn compare(self, o: Num) -> Ordering {
        match (self, o) {
            (Num::Int(a), Num::Int(b)) => a.cmp(&b),
            (Num::Float(_), _) | (_, Num::Float(_)) => self.to_f64().total_cmp(&o.to_f64()),
            (a, b) => match (a.to_dec(), b.to_dec()) {
                (Some(x), Some(y)) => x.compare(y),
                _ => a.to_f64().total_cmp(&b.to_f64()),
            },
        }
    }

    /// Arithmetic as MySQL does it on these types: exact for integers and decimals (division
    /// gives a decimal with 4 more digits), IEEE for floats. `None` for division by zero (SQL
    /// NULL) and on overflow.
    pub fn arith(self, op: char, o: Num) -> Option<Num> {
        if let (Num::Float(_), _) | (_, Num::Float(_)) = (self, o) {
            let (x, y) = (self.to_f64(), o.to_f64());
            return match op {
                '+' => Some(Num::Float(x + y)),
                '-' => Some(Num::Float(x - y)),
                '*' => Some(Num::Float(x * y)),
                _ if y == 0.0 => None,
                _ => Some(Num::Float(x / y)),
            };
        }
        if let (Num::Int(a), Num::Int(b), '+' | '-' | '*') = (self, o, op) {
            return match op {
                '+' => a.checked_add(b),
                '-' => a.checked_sub(b),
                _ => a.checked_mul(b),
            }
            .map(Num::Int);
        }
        let (a, b) = (self.to_dec()?, o.to_dec()?);
        match op {
            '+' => a.checked_add(b),
            '-' => a.checked_add(b.negate()),
            '*' => a.checked_mul(b),
            _ => a.divide(b),
        }
        .map(Num::Dec)
    }

    /// Exact for integers and decimals (`None` on overflow), IEEE for floats.
    pub fn checked_add(self, o: Num) -> Option<Num> {
        match (self, o) {
            (Num::Int(a), Num::Int(b)) => a.checked_add(b).map(Num::Int),
            (Num::Float(_), _) | (_, Num::Float(_)) => Some(Num::Float(self.to_f64() + o.to_f64())),
            (a, b) => a.to_dec()?.checked_add(b.to_dec()?).map(Num::Dec),
        }
    }
}

/// How a column's values compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Integer,
    Decimal,
    Float,
    /// Strings compared byte by byte (binary strings and `_bin` collations).
    Binary {
        pad: bool,
    },
    /// Strings compared case- and accent-insensitively (`_ci` collations).
    Folded {
        pad: bool,
    },
    /// Dates and times: their text forms order correctly.
    Temporal,
}

/// DATE, TIME, DATETIME and TIMESTAMP in all their wire forms.
pub fn is_temporal(ty: ColumnType) -> bool {
    use ColumnType::*;
    matches!(
        ty,
        MYSQL_TYPE_DATE
            | MYSQL_TYPE_DATETIME
            | MYSQL_TYPE_TIMESTAMP
            | MYSQL_TYPE_NEWDATE
            | MYSQL_TYPE_TIME
            | MYSQL_TYPE_DATETIME2
            | MYSQL_TYPE_TIMESTAMP2
            | MYSQL_TYPE_TIME2
    )
}

pub fn class_of(col: &Column) -> Class {
    use ColumnType::*;
    match col.column_type() {
        MYSQL_TYPE_TINY | MYSQL_TYPE_SHORT | MYSQL_TYPE_INT24 | MYSQL_TYPE_LONG
        | MYSQL_TYPE_LONGLONG | MYSQL_TYPE_YEAR | MYSQL_TYPE_BIT => Class::Integer,
        MYSQL_TYPE_DECIMAL | MYSQL_TYPE_NEWDECIMAL => Class::Decimal,
        MYSQL_TYPE_FLOAT | MYSQL_TYPE_DOUBLE => Class::Float,
        ty if is_temporal(ty) => Class::Temporal,
        _ => {
            let id = col.character_set();
            if id == 63 {
                return Class::Binary { pad: false };
            }
            let c = Collation::resolve(CollationId::from(id));
            let name = c.collation();
            let pad = !name.contains("nopad");
            if name.ends_with("_bin")
                || name.ends_with("_cs")
                || c.id() == CollationId::UNKNOWN_COLLATION_ID
            {
                Class::Binary { pad }
            } else {
                Class::Folded { pad }
            }
        }
    }
}

/// The number a value stands for in a numeric column.
pub fn num_of(v: &Value, class: Class) -> Option<Num> {
    match v {
        Value::Int(i) => Some(Num::Int(i128::from(*i))),
        Value::UInt(u) => Some(Num::Int(i128::from(*u))),
        Value::Float(f) => Some(Num::Float(f64::from(*f))),
        Value::Double(d) => Some(Num::Float(*d)),
        Value::Bytes(b) => {
            let s = std::str::from_utf8(b).ok()?;
            match class {
                Class::Integer => s.trim().parse::<i128>().ok().map(Num::Int),
                Class::Decimal => Dec::parse(s).map(Num::Dec),
                Class::Float => s.trim().parse::<f64>().ok().map(Num::Float),
                _ => s
                    .trim()
                    .parse::<i128>()
                    .ok()
                    .map(Num::Int)
                    .or_else(|| Dec::parse(s).map(Num::Dec))
                    .or_else(|| s.trim().parse::<f64>().ok().map(Num::Float)),
            }
        }
        _ => None,
    }
}

/// The number a value of any column stands for in SUM(DISTINCT) and AVG(DISTINCT), as
/// MariaDB reads it: numbers as they are; a string by its longest leading number after
/// spaces (`'12abc'` 12, `' 1e2x'` 100, `'true'` 0), a double; a date or time as its digits
/// (`2024-01-02` 20240102, `-01:02:03` -10203, a DATETIME's fraction kept).
pub fn summed(v: &Value, class: Class, ty: ColumnType) -> Option<Num> {
    let clock = |neg: bool, whole: i128, us: u32| {
        let n = if us == 0 {
            Num::Int(whole)
        } else {
            Num::Dec(Dec {
                mantissa: whole * 1_000_000 + i128::from(us),
                scale: 6,
            })
        };
        match (neg, n) {
            (true, Num::Int(i)) => Num::Int(-i),
            (true, Num::Dec(d)) => Num::Dec(d.negate()),
            (_, n) => n,
        }
    };
    let b = match v {
        Value::Bytes(b) => b,
        // The binary protocol's dates and times.
        Value::Date(y, mo, d, h, mi, sec, us) => {
            let day = i128::from(*y) * 10_000 + i128::from(*mo) * 100 + i128::from(*d);
            if matches!(
                ty,
                ColumnType::MYSQL_TYPE_DATE | ColumnType::MYSQL_TYPE_NEWDATE
            ) {
                return Some(Num::Int(day));
            }
            let time = i128::from(*h) * 10_000 + i128::from(*mi) * 100 + i128::from(*sec);
            return Some(clock(false, day * 1_000_000 + time, *us));
        }
        Value::Time(neg, days, h, mi, sec, us) => {
            let hours = i128::from(*days) * 24 + i128::from(*h);
            let whole = hours * 10_000 + i128::from(*mi) * 100 + i128::from(*sec);
            return Some(clock(*neg, whole, *us));
        }
        _ => return num_of(v, class),
    };
    match class {
        Class::Binary { .. } | Class::Folded { .. } => Some(Num::Float(leading_number(b))),
        Class::Temporal => {
            let s = std::str::from_utf8(b).ok()?;
            let digits: String = s
                .chars()
                .filter(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let n = if digits.contains('.') {
                Num::Dec(Dec::parse(&digits)?)
            } else {
                Num::Int(digits.parse::<i128>().ok()?)
            };
            // Only a TIME is negative; a date's dashes come after its year.
            Some(match (s.starts_with('-'), n) {
                (false, n) => n,
                (true, Num::Int(i)) => Num::Int(-i),
                (true, Num::Dec(d)) => Num::Dec(d.negate()),
                (true, n) => n,
            })
        }
        _ => num_of(v, class),
    }
}

/// MariaDB's string to double: the longest prefix that reads as a number, 0 if none.
fn leading_number(b: &[u8]) -> f64 {
    let s = b.trim_ascii_start();
    let mut end = 0;
    let digits = |from: usize| from + s[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    if matches!(s.first(), Some(b'+' | b'-')) {
        end = 1;
    }
    let int_end = digits(end);
    let mut seen = int_end > end;
    end = int_end;
    if s.get(end) == Some(&b'.') {
        let frac_end = digits(end + 1);
        seen |= frac_end > end + 1;
        end = frac_end;
    }
    if !seen {
        return 0.0;
    }
    if matches!(s.get(end), Some(b'e' | b'E')) {
        let mut e = end + 1;
        if matches!(s.get(e), Some(b'+' | b'-')) {
            e += 1;
        }
        let exp_end = digits(e);
        if exp_end > e {
            end = exp_end;
        }
    }
    std::str::from_utf8(&s[..end])
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// Accent- and case-folded form of a string under a `_ci` collation, as
/// utf8mb4_general_ci weighs it: letters by their upper case (`a` = `A` = `á` = `Ä`, so
/// `\` and `_` sort after every letter, as on the node), one character for one, and every
/// character beyond the BMP the same weight (U+FFFD).
pub fn fold(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let base = match c {
            'À'..='Å' | 'à'..='å' => 'A',
            'Ç' | 'ç' => 'C',
            'È'..='Ë' | 'è'..='ë' => 'E',
            'Ì'..='Ï' | 'ì'..='ï' => 'I',
            'Ñ' | 'ñ' => 'N',
            'Ò'..='Ö' | 'ò'..='ö' | 'Ø' | 'ø' => 'O',
            'Ù'..='Ü' | 'ù'..='ü' => 'U',
            'Ý' | 'ý' | 'ÿ' => 'Y',
            'ß' => 'S',
            c if u32::from(c) > 0xFFFF => '\u{FFFD}',
            other => {
                let mut up = other.to_uppercase();
                match (up.next(), up.next()) {
                    (Some(u), None) => u,
                    _ => other,
                }
            }
        };
        out.push(base);
    }
    out
}

fn bytes_of(v: &Value) -> std::borrow::Cow<'_, [u8]> {
    match v {
        Value::Bytes(b) => std::borrow::Cow::Borrowed(b.as_slice()),
        other => std::borrow::Cow::Owned(crate::value::text_form(other).unwrap_or_default()),
    }
}

fn trim_pad(b: &[u8]) -> &[u8] {
    let mut end = b.len();
    while end > 0 && b[end - 1] == b' ' {
        end -= 1;
    }
    &b[..end]
}

/// A key under which equal values (by the column's comparison) are identical: for grouping
/// and DISTINCT.
pub fn key_of(v: &Option<Value>, class: Class) -> Vec<u8> {
    let Some(v) = v.as_ref().filter(|v| **v != Value::NULL) else {
        return vec![0];
    };
    let mut out = vec![1];
    match class {
        Class::Integer | Class::Decimal | Class::Float => match num_of(v, class) {
            // Normalise so 1.50 and 1.5 (or 2 and 2.0) group together.
            Some(Num::Int(i)) => out.extend_from_slice(format!("i{i}").as_bytes()),
            Some(Num::Dec(d)) => {
                let mut m = d.mantissa;
                let mut s = d.scale;
                while s > 0 && m % 10 == 0 {
                    m /= 10;
                    s -= 1;
                }
                if s == 0 {
                    out.extend_from_slice(format!("i{m}").as_bytes());
                } else {
                    out.extend_from_slice(format!("d{m}e{s}").as_bytes());
                }
            }
            Some(Num::Float(f)) => out.extend_from_slice(format!("f{f:?}").as_bytes()),
            None => out.extend_from_slice(&bytes_of(v)),
        },
        Class::Binary { pad } => {
            let b = bytes_of(v);
            out.extend_from_slice(if pad { trim_pad(&b) } else { &b });
        }
        Class::Folded { pad } => {
            let b = bytes_of(v);
            let b = if pad { trim_pad(&b) } else { &b[..] };
            out.extend_from_slice(fold(&String::from_utf8_lossy(b)).as_bytes());
        }
        Class::Temporal => out.extend_from_slice(&bytes_of(v)),
    }
    out
}

/// Compares two values of one column as MySQL orders them (NULL first).
pub fn compare(a: &Option<Value>, b: &Option<Value>, class: Class) -> Ordering {
    let a = a.as_ref().filter(|v| **v != Value::NULL);
    let b = b.as_ref().filter(|v| **v != Value::NULL);
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => match class {
            Class::Integer | Class::Decimal | Class::Float => {
                match (num_of(x, class), num_of(y, class)) {
                    (Some(p), Some(q)) => p.compare(q),
                    _ => bytes_of(x).cmp(&bytes_of(y)),
                }
            }
            Class::Binary { pad } => {
                let (p, q) = (bytes_of(x), bytes_of(y));
                if pad {
                    trim_pad(&p).cmp(trim_pad(&q))
                } else {
                    p.cmp(&q)
                }
            }
            Class::Folded { pad } => {
                let (p, q) = (bytes_of(x), bytes_of(y));
                let (p, q) = if pad {
                    (trim_pad(&p), trim_pad(&q))
                } else {
                    (&p[..], &q[..])
                };
                fold(&String::from_utf8_lossy(p)).cmp(&fold(&String::from_utf8_lossy(q)))
            }
            Class::Temporal => match (x, y) {
                (Value::Date(..) | Value::Time(..), Value::Date(..) | Value::Time(..)) => {
                    temporal_tuple(x).cmp(&temporal_tuple(y))
                }
                // As text, a negative TIME or one of 100 hours and more does not order by
                // its bytes (`-21:05:01` is less than `-15:05:01`).
                _ => {
                    let (p, q) = (bytes_of(x), bytes_of(y));
                    match (temporal_key(&p), temporal_key(&q)) {
                        (Some(a), Some(b)) => a.cmp(&b),
                        _ => p.cmp(&q),
                    }
                }
            },
        },
    }
}

/// Two strings a merged HAVING compares, as MariaDB compares them: in the class of the column
/// one of them came from (`_bin` byte by byte, `_ci` folded, a temporal column's value as a
/// date and time, so `'2020-01-01 00:00:00'` equals a DATETIME at midnight however it was
/// sent); two literals in the connection's collation, folded.
pub fn compare_text(p: &[u8], q: &[u8], class: Option<Class>) -> Ordering {
    let bytes = |b: &[u8]| Some(Value::Bytes(b.to_vec()));
    match class {
        Some(Class::Temporal) => match (temporal_key(p), temporal_key(q)) {
            (Some(a), Some(b)) => a.cmp(&b),
            _ => p.cmp(q),
        },
        Some(c @ (Class::Binary { .. } | Class::Folded { .. })) => compare(&bytes(p), &bytes(q), c),
        _ => fold(&String::from_utf8_lossy(p))
            .trim_end()
            .cmp(fold(&String::from_utf8_lossy(q)).trim_end()),
    }
}

/// A date, datetime or time in text (`2020-01-02`, `2020-01-02 03:04:05.5`, `-838:59:59`) as
/// (yyyymmdd, signed microseconds of the day or time); `None` for other text.
fn temporal_key(b: &[u8]) -> Option<(i64, i64)> {
    let s = std::str::from_utf8(b).ok()?.trim();
    let is_date = |d: &str| d.len() >= 8 && d.as_bytes().get(4) == Some(&b'-');
    let (date, time) = match s.split_once(' ') {
        Some((d, t)) => (Some(d), Some(t.trim())),
        None if is_date(s) => (Some(s), None),
        None => (None, Some(s)),
    };
    let day = match date {
        Some(d) => {
            let mut it = d.split('-');
            let y: i64 = it.next()?.parse().ok()?;
            let m: i64 = it.next()?.parse().ok()?;
            let dd: i64 = it.next()?.parse().ok()?;
            if it.next().is_some() {
                return None;
            }
            y * 10_000 + m * 100 + dd
        }
        None => 0,
    };
    let micros = match time {
        Some(t) => {
            let (neg, t) = match t.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, t),
            };
            let (hms, frac) = t.split_once('.').unwrap_or((t, ""));
            let mut it = hms.split(':');
            let h: i64 = it.next()?.parse().ok()?;
            let m: i64 = it.next()?.parse().ok()?;
            let sec: i64 = it.next()?.parse().ok()?;
            if it.next().is_some() || !frac.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            let digits: String = frac.chars().chain(std::iter::repeat('0')).take(6).collect();
            let us: i64 = digits.parse().ok()?;
            let v = ((h * 60 + m) * 60 + sec) * 1_000_000 + us;
            if neg {
                -v
            } else {
                v
            }
        }
        None => 0,
    };
    Some((day, micros))
}

fn temporal_tuple(v: &Value) -> (i64, i64, i64) {
    match v {
        Value::Date(y, mo, d, h, mi, s, us) => (
            i64::from(*y) * 10_000 + i64::from(*mo) * 100 + i64::from(*d),
            i64::from(*h) * 10_000 + i64::from(*mi) * 100 + i64::from(*s),
            i64::from(*us),
        ),
        Value::Time(neg, days, h, m, s, us) => {
            let secs =
                ((i64::from(*days) * 24 + i64::from(*h)) * 60 + i64::from(*m)) * 60 + i64::from(*s);
            let sign = if *neg { -1 } else { 1 };
            (0, sign * secs, sign * i64::from(*us))
        }
        _ => (0, 0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Option<Value> {
        Some(Value::Bytes(s.as_bytes().to_vec()))
    }

    #[test]
    fn strings_compare_in_their_columns_class() {
        use std::cmp::Ordering::*;
        let c = |p: &str, q: &str, class| compare_text(p.as_bytes(), q.as_bytes(), class);
        assert_eq!(c("Abc", "abc", Some(Class::Binary { pad: true })), Less);
        assert_eq!(c("abc ", "abc", Some(Class::Binary { pad: true })), Equal);
        assert_eq!(c("Abc", "abc ", Some(Class::Folded { pad: true })), Equal);
        assert_eq!(c("Abc", "abc", None), Equal);
        // A midnight DATETIME sent as a date alone (binary protocol) is that datetime.
        assert_eq!(
            c("2020-01-01", "2020-01-01 00:00:00", Some(Class::Temporal)),
            Equal
        );
        assert_eq!(
            c(
                "2020-01-01 00:00:00.5",
                "2020-01-01 00:00:00.50",
                Some(Class::Temporal)
            ),
            Equal
        );
        assert_eq!(
            c("2020-01-01", "2020-01-01 00:00:01", Some(Class::Temporal)),
            Less
        );
        assert_eq!(c("-01:00:00", "00:30:00", Some(Class::Temporal)), Less);
        assert_eq!(
            c("10:00:00", "9:59:59.999999", Some(Class::Temporal)),
            Greater
        );
    }

    #[test]
    fn times_sent_as_text_sort_by_their_value() {
        use std::cmp::Ordering::*;
        let c = |p: &str, q: &str| compare(&b(p), &b(q), Class::Temporal);
        assert_eq!(c("-21:05:01.50", "-15:05:01.50"), Less);
        assert_eq!(c("100:00:00", "99:59:59"), Greater);
        assert_eq!(c("2024-01-02 03:04:05", "2024-01-02 03:04:05.000"), Equal);
        assert_eq!(c("2024-01-02", "2024-01-03"), Less);
    }

    #[test]
    fn summed_reads_strings_dates_and_times_as_mariadb_does() {
        let s = |v: &str, class| {
            summed(
                &Value::Bytes(v.as_bytes().to_vec()),
                class,
                ColumnType::MYSQL_TYPE_VAR_STRING,
            )
            .map(Num::to_f64)
        };
        let folded = Class::Folded { pad: true };
        for (text, want) in [
            ("true", 0.0),
            ("", 0.0),
            ("12abc", 12.0),
            (" 1e2x", 100.0),
            (".5", 0.5),
            ("-3.25e", -3.25),
            ("+", 0.0),
            ("1e+2", 100.0),
        ] {
            assert_eq!(s(text, folded), Some(want), "{text:?}");
        }
        assert_eq!(s("2024-01-02", Class::Temporal), Some(20_240_102.0));
        assert_eq!(s("-01:02:03", Class::Temporal), Some(-10_203.0));
        assert_eq!(
            s("2024-01-02 10:11:12.50", Class::Temporal),
            Some(20_240_102_101_112.5)
        );
        let date = |ty| summed(&Value::Date(2024, 1, 2, 0, 0, 0, 0), Class::Temporal, ty);
        assert_eq!(
            date(ColumnType::MYSQL_TYPE_DATE),
            Some(Num::Int(20_240_102))
        );
        assert_eq!(
            date(ColumnType::MYSQL_TYPE_DATETIME),
            Some(Num::Int(20_240_102_000_000))
        );
        assert_eq!(
            summed(
                &Value::Time(true, 0, 1, 2, 3, 500_000),
                Class::Temporal,
                ColumnType::MYSQL_TYPE_TIME
            )
            .map(Num::to_f64),
            Some(-10_203.5)
        );
    }

    #[test]
    fn decimals_are_exact() {
        let a = Dec::parse("0.10").unwrap();
        let c = Dec::parse("-0.3").unwrap();
        assert_eq!(
            a.checked_add(Dec::parse("0.2").unwrap()).unwrap().format(2),
            "0.30"
        );
        assert_eq!(a.checked_add(c).unwrap().format(3), "-0.200");
        assert_eq!(
            Dec::parse("10").unwrap().div_round(3, 4).unwrap().format(4),
            "3.3333"
        );
        assert_eq!(
            Dec::parse("2").unwrap().div_round(3, 4).unwrap().format(4),
            "0.6667"
        );
        assert_eq!(
            Dec::parse("-2").unwrap().div_round(3, 4).unwrap().format(4),
            "-0.6667"
        );
        assert_eq!(
            Dec::parse("5.125")
                .unwrap()
                .div_round(1, 2)
                .unwrap()
                .format(2),
            "5.13"
        );
        assert_eq!(
            Dec::parse("1.5")
                .unwrap()
                .compare(Dec::parse("1.50").unwrap()),
            Ordering::Equal
        );
        assert!(Dec::parse("abc").is_none());
        let d = |s: &str| Num::Dec(Dec::parse(s).unwrap());
        let show = |n: Option<Num>| match n {
            Some(Num::Dec(x)) => x.format(x.scale),
            other => format!("{other:?}"),
        };
        assert_eq!(show(d("7.000").arith('/', Num::Int(3))), "2.3333333");
        assert_eq!(show(Num::Int(5).arith('/', Num::Int(2))), "2.5000");
        assert_eq!(show(Num::Int(-2).arith('/', Num::Int(3))), "-0.6667");
        assert_eq!(show(d("1.5").arith('*', d("2.25"))), "3.375");
        assert_eq!(Num::Int(1).arith('/', Num::Int(0)), None);
    }

    #[test]
    fn numbers_compare_numerically() {
        assert_eq!(
            compare(&b("10"), &b("9"), Class::Integer),
            Ordering::Greater
        );
        assert_eq!(
            compare(&b("-1.5"), &b("-1.25"), Class::Decimal),
            Ordering::Less
        );
        assert_eq!(
            compare(&b("1e3"), &b("999.5"), Class::Float),
            Ordering::Greater
        );
        assert_eq!(compare(&None, &b("-100"), Class::Integer), Ordering::Less);
        assert_eq!(
            compare(&Some(Value::NULL), &None, Class::Integer),
            Ordering::Equal
        );
    }

    #[test]
    fn strings_follow_the_collation() {
        let ci = Class::Folded { pad: true };
        assert_eq!(compare(&b("abc"), &b("ABC"), ci), Ordering::Equal);
        assert_eq!(compare(&b("abc "), &b("ABC"), ci), Ordering::Equal);
        assert_eq!(compare(&b("Ábc"), &b("abd"), ci), Ordering::Less);
        assert_eq!(compare(&b("B"), &b("a"), ci), Ordering::Greater);
        let bin = Class::Binary { pad: false };
        assert_eq!(compare(&b("B"), &b("a"), bin), Ordering::Less);
        assert_eq!(key_of(&b("abc"), ci), key_of(&b("AbC  "), ci));
        assert_ne!(key_of(&b("abc"), bin), key_of(&b("AbC"), bin));
        assert_eq!(
            key_of(&b("1.50"), Class::Decimal),
            key_of(&b("1.5"), Class::Decimal)
        );
        assert_ne!(key_of(&None, ci), key_of(&b(""), ci));
    }
}
