//! The `range` rule: the key's domain is cut at increasing boundaries, and each range of keys
//! lives on one node.
//!
//! Keys are compared in one of three domains:
//! - **Int**: integer columns. Integers, and text that reads exactly as an integer (`'42'`,
//!   `'-7'`: MySQL converts such a constant to the integer before comparing it with an integer
//!   column). Decimals, floats and other text have no key.
//! - **Date**: `DATE` / `DATETIME` columns. Keys are the text `YYYY-MM-DD HH:MM:SS.ffffff`,
//!   always that wide, so text order is time order. For a `DATE` column use boundaries at
//!   midnight: MySQL drops the time of a datetime stored there. `TIMESTAMP` columns work only
//!   while every session uses the same time zone.
//! - **Text**: string columns with a case-insensitive, PAD SPACE collation (MySQL's and
//!   MariaDB's `_ci` collations such as `utf8mb4_general_ci`): keys are the text with trailing
//!   spaces removed, upper-cased, compared byte by byte. Range predicates (`<`, `BETWEEN`) are
//!   routed correctly only while the collation orders the values as that byte order does
//!   (true of ASCII under `utf8mb4_general_ci`; not of punctuation under the UCA collations,
//!   nor of accented letters, which `_ai_ci` collations also equate with unaccented ones).
//!   So only ASCII text has a key: a non-ASCII value cannot be written through a text range
//!   rule (its INSERT is refused) and a read naming one asks every range.
//!
//! The same [`KeyKind::key_of`] places the rows written and reads the values in a WHERE
//! clause, so a row is always looked for where it was written.

use std::ops::Bound;

use mysql_common::value::Value;

use crate::sql::ranges::Ranges;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Int,
    Date,
    Text,
}

/// A key in one of the domains. Date keys are `Text` in the fixed-width form
/// `YYYY-MM-DD HH:MM:SS.ffffff`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RangeKey {
    Int(i128),
    Text(String),
}

impl KeyKind {
    /// The key of a SQL value in this domain, None when it cannot be compared safely.
    pub fn key_of(&self, v: &Value) -> Option<RangeKey> {
        match (self, v) {
            (KeyKind::Int, Value::Int(i)) => Some(RangeKey::Int(i128::from(*i))),
            (KeyKind::Int, Value::UInt(u)) => Some(RangeKey::Int(i128::from(*u))),
            (KeyKind::Int, Value::Bytes(b)) => int_of_text(b).map(RangeKey::Int),
            (KeyKind::Date, Value::Date(y, mo, d, h, mi, s, us)) => {
                date_key(*y, *mo, *d, *h, *mi, *s, *us).map(RangeKey::Text)
            }
            (KeyKind::Date, Value::Bytes(b)) => std::str::from_utf8(b)
                .ok()
                .and_then(|s| parse_datetime(s, true))
                .map(RangeKey::Text),
            (KeyKind::Text, Value::Bytes(b)) => {
                // Only ASCII text has a key: outside ASCII, collations order and equate
                // values in ways byte order does not (accents, UCA weights), so such a row
                // could be looked for on the wrong node. Its INSERT is refused; a read naming
                // it asks every range.
                std::str::from_utf8(b)
                    .ok()
                    .filter(|s| s.is_ascii())
                    .map(|s| RangeKey::Text(fold(s)))
            }
            _ => None,
        }
    }

    /// A boundary from the rules file: toml integer for Int, "YYYY-MM-DD" or
    /// "YYYY-MM-DD HH:MM:SS" string (or a TOML local date / local date-time) for Date, other
    /// strings for Text.
    pub fn bound(&self, v: &toml::Value) -> Result<RangeKey, String> {
        match (self, v) {
            (KeyKind::Int, toml::Value::Integer(i)) => Ok(RangeKey::Int(i128::from(*i))),
            (KeyKind::Date, toml::Value::String(s)) => {
                parse_datetime(s, false).map(RangeKey::Text).ok_or_else(|| {
                    format!(
                        "range boundary {v} is not a valid date: expected \"YYYY-MM-DD\" or \
                         \"YYYY-MM-DD HH:MM:SS\""
                    )
                })
            }
            (KeyKind::Date, toml::Value::Datetime(dt)) => {
                toml_date_key(dt).map(RangeKey::Text).ok_or_else(|| {
                    format!(
                        "range boundary {v} is not a usable date: expected a local date or \
                         date-time with whole seconds and no time zone offset"
                    )
                })
            }
            (KeyKind::Text, toml::Value::String(s)) if s.is_ascii() => Ok(RangeKey::Text(fold(s))),
            (KeyKind::Text, toml::Value::String(s)) => Err(format!(
                "text bound \"{s}\" is not ASCII: text ranges compare ASCII only"
            )),
            (kind, other) => Err(format!(
                "range boundary {other} is {}, but this rule's boundaries are {}",
                toml_kind(other),
                kind.noun()
            )),
        }
    }

    /// Which kind a rules-file boundary value is (integer → Int, date-looking string → Date,
    /// other string → Text). A string that starts like a date (`2024-02-30`) is a Date
    /// boundary, to be rejected by [`KeyKind::bound`] if it is not a valid one.
    pub fn of_bound(v: &toml::Value) -> Result<KeyKind, String> {
        match v {
            toml::Value::Integer(_) => Ok(KeyKind::Int),
            toml::Value::Datetime(_) => Ok(KeyKind::Date),
            toml::Value::String(s) if looks_like_date(s) => Ok(KeyKind::Date),
            toml::Value::String(_) => Ok(KeyKind::Text),
            other => Err(format!(
                "range boundary {other} is {}; boundaries must be integers, dates \
                 (\"YYYY-MM-DD\" or \"YYYY-MM-DD HH:MM:SS\") or strings",
                toml_kind(other)
            )),
        }
    }

    fn noun(&self) -> &'static str {
        match self {
            KeyKind::Int => "integers",
            KeyKind::Date => "dates",
            KeyKind::Text => "strings",
        }
    }

    /// Is `k` a key of this domain (as [`KeyKind::key_of`] and [`KeyKind::bound`] make them)?
    fn holds(&self, k: &RangeKey) -> bool {
        match (self, k) {
            (KeyKind::Int, RangeKey::Int(_)) | (KeyKind::Text, RangeKey::Text(_)) => true,
            (KeyKind::Date, RangeKey::Text(s)) => parse_datetime(s, true).as_deref() == Some(s),
            _ => false,
        }
    }
}

fn toml_kind(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a float",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a date",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}

/// Text that reads exactly as an integer in MySQL's range (`42`, `-7`, `+3`, `007`).
fn int_of_text(b: &[u8]) -> Option<i128> {
    let n: i128 = std::str::from_utf8(b).ok()?.parse().ok()?;
    (i128::from(i64::MIN)..=i128::from(u64::MAX))
        .contains(&n)
        .then_some(n)
}

/// Case-insensitive, PAD SPACE folding: trailing spaces dropped, upper-cased.
fn fold(s: &str) -> String {
    let s = s.trim_end_matches(' ');
    if s.is_ascii() {
        s.to_ascii_uppercase()
    } else {
        s.to_uppercase()
    }
}

fn days_in_month(y: u16, m: u8) -> u8 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400) => 29,
        2 => 28,
        _ => 0,
    }
}

/// The fixed-width key of a valid date-time; `None` for zero or out-of-range parts.
fn date_key(y: u16, mo: u8, d: u8, h: u8, mi: u8, s: u8, us: u32) -> Option<String> {
    let valid = y <= 9999
        && (1..=12).contains(&mo)
        && d >= 1
        && d <= days_in_month(y, mo)
        && h <= 23
        && mi <= 59
        && s <= 59
        && us <= 999_999;
    valid.then(|| format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{us:06}"))
}

fn looks_like_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
        && b[8..10].iter().all(u8::is_ascii_digit)
}

/// `YYYY-MM-DD`, `YYYY-MM-DD HH:MM:SS` and, when `fraction`, `YYYY-MM-DD HH:MM:SS.f` with 1
/// to 6 digits of fraction, as a fixed-width key. Nothing else: other spellings MySQL may
/// accept have no key (conservative).
fn parse_datetime(s: &str, fraction: bool) -> Option<String> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = b.get(r)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        part.iter()
            .try_fold(0u32, |acc, c| Some(acc * 10 + u32::from(c - b'0')))
    };
    if !looks_like_date(s) {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (mut h, mut mi, mut sec, mut us) = (0, 0, 0, 0);
    if b.len() > 10 {
        if b.len() < 19 || b[10] != b' ' || b[13] != b':' || b[16] != b':' {
            return None;
        }
        (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if b.len() > 19 {
            let digits = b.len() - 20;
            if !fraction || b[19] != b'.' || !(1..=6).contains(&digits) {
                return None;
            }
            us = num(20..b.len())? * 10u32.pow(6 - digits as u32);
        }
    }
    date_key(
        u16::try_from(y).ok()?,
        u8::try_from(mo).ok()?,
        u8::try_from(d).ok()?,
        u8::try_from(h).ok()?,
        u8::try_from(mi).ok()?,
        u8::try_from(sec).ok()?,
        us,
    )
}

fn toml_date_key(dt: &toml::value::Datetime) -> Option<String> {
    if dt.offset.is_some() {
        return None;
    }
    let date = dt.date?;
    let (h, mi, s) = match dt.time {
        Some(t) if t.nanosecond == 0 => (t.hour, t.minute, t.second),
        Some(_) => return None,
        None => (0, 0, 0),
    };
    date_key(date.year, date.month, date.day, h, mi, s, 0)
}

/// Print a key as a SQL literal (42, '2024-01-01 00:00:00.000000', 'abc') for predicates
/// the proxy adds, through the one literal writer (`crate::sql::write::text`: other text in
/// hex, which no `sql_mode` reads otherwise).
pub fn key_sql(k: &RangeKey) -> String {
    match k {
        RangeKey::Int(i) => i.to_string(),
        RangeKey::Text(s) => {
            let mut out = String::with_capacity(s.len() + 2);
            crate::sql::write::text(&mut out, s);
            out
        }
    }
}

/// Which node holds each range of keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeMap {
    pub kind: KeyKind,
    /// Upper bounds (exclusive), strictly increasing; n-1 of them for n ranges.
    pub uppers: Vec<RangeKey>,
    /// The node of each range: range `i` holds `[uppers[i-1], uppers[i])`.
    pub nodes: Vec<usize>,
}

impl RangeMap {
    /// Validates: entries in order, each with `below` except the last, which must have none
    /// (open-ended, covers the rest of the domain); below strictly increasing; all of one kind.
    /// Errors are clear sentences naming the offending entry (numbered from 1).
    pub fn new(kind: KeyKind, entries: Vec<(Option<RangeKey>, usize)>) -> Result<RangeMap, String> {
        let n = entries.len();
        if n == 0 {
            return Err("a range rule needs at least one range".into());
        }
        let mut uppers: Vec<RangeKey> = Vec::with_capacity(n - 1);
        let mut nodes = Vec::with_capacity(n);
        for (i, (below, node)) in entries.into_iter().enumerate() {
            let num = i + 1;
            let last = num == n;
            match (below, last) {
                (None, true) => {}
                (None, false) => {
                    return Err(format!(
                        "range {num} of {n} has no `below` bound, but only the last range may be \
                         open-ended; give it a `below` or move it to the end"
                    ))
                }
                (Some(b), true) => {
                    return Err(format!(
                        "the last range (range {n}, below {}) must have no `below` bound: it is \
                         open-ended and covers the rest of the domain; add a final range without \
                         `below`",
                        show(kind, &b)
                    ))
                }
                (Some(b), false) => {
                    if !kind.holds(&b) {
                        return Err(format!(
                            "range {num}'s bound {} is not one of this rule's {}",
                            show(kind, &b),
                            kind.noun()
                        ));
                    }
                    if let Some(prev) = uppers.last() {
                        if b <= *prev {
                            let how = if b == *prev { "equal to" } else { "less than" };
                            let folded = if kind == KeyKind::Text {
                                " (text bounds compare case-insensitively, ignoring trailing \
                                 spaces)"
                            } else {
                                ""
                            };
                            return Err(format!(
                                "range {num}'s bound {} is {how} range {}'s bound {}{folded}; \
                                 bounds must strictly increase",
                                show(kind, &b),
                                num - 1,
                                show(kind, prev)
                            ));
                        }
                    }
                    uppers.push(b);
                }
            }
            nodes.push(node);
        }
        Ok(RangeMap {
            kind,
            uppers,
            nodes,
        })
    }

    /// Index of the range holding `k`.
    fn index_of(&self, k: &RangeKey) -> usize {
        self.uppers.partition_point(|u| u <= k)
    }

    /// The node of the range holding `k`: range i holds [uppers[i-1], uppers[i]).
    pub fn node_of(&self, k: &RangeKey) -> usize {
        self.nodes[self.index_of(k).min(self.nodes.len() - 1)]
    }

    /// The nodes of the ranges the set touches, sorted, without duplicates. Empty set: none.
    pub fn nodes_for(&self, r: &Ranges<RangeKey>) -> Vec<usize> {
        let last = self.nodes.len() - 1;
        let mut touched = vec![false; self.nodes.len()];
        for (lo, hi) in r.parts() {
            let (lo, hi) = self.discrete(lo, hi);
            let first = match lo {
                Bound::Unbounded => 0,
                Bound::Included(a) | Bound::Excluded(a) => self.index_of(&a),
            };
            let end = match hi {
                Bound::Unbounded => last,
                Bound::Included(b) => self.index_of(&b),
                // Keys just below b are in the range holding b, unless b opens its range.
                Bound::Excluded(b) => self.uppers.partition_point(|u| *u < b),
            };
            for t in touched.iter_mut().take(end.min(last) + 1).skip(first) {
                *t = true;
            }
        }
        let mut out: Vec<usize> = touched
            .iter()
            .zip(&self.nodes)
            .filter(|(t, _)| **t)
            .map(|(_, n)| *n)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Integer keys are discrete: `> a` is `>= a+1` and `< b` is `<= b-1`, so `id > 999` does
    /// not touch a range ending at 1000.
    fn discrete(
        &self,
        lo: &Bound<RangeKey>,
        hi: &Bound<RangeKey>,
    ) -> (Bound<RangeKey>, Bound<RangeKey>) {
        let step = |b: &Bound<RangeKey>, d: i128| match b {
            Bound::Excluded(RangeKey::Int(i)) if self.kind == KeyKind::Int => i
                .checked_add(d)
                .map(|j| Bound::Included(RangeKey::Int(j)))
                .unwrap_or_else(|| b.clone()),
            other => other.clone(),
        };
        (step(lo, 1), step(hi, -1))
    }

    /// All nodes, sorted, without duplicates.
    pub fn nodes(&self) -> Vec<usize> {
        let mut v = self.nodes.clone();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The same map with node indexes renumbered.
    pub fn remap(&self, f: &dyn Fn(usize) -> usize) -> RangeMap {
        RangeMap {
            kind: self.kind,
            uppers: self.uppers.clone(),
            nodes: self.nodes.iter().map(|n| f(*n)).collect(),
        }
    }

    /// For display: `[-inf, 1000000) -> ds0, [1000000, +inf) -> ds1`.
    pub fn describe(&self, name: &dyn Fn(usize) -> String) -> String {
        let mut out = Vec::with_capacity(self.nodes.len());
        for (i, node) in self.nodes.iter().enumerate() {
            let lo = match i.checked_sub(1).and_then(|j| self.uppers.get(j)) {
                Some(k) => show(self.kind, k),
                None => "-inf".into(),
            };
            let hi = match self.uppers.get(i) {
                Some(k) => show(self.kind, k),
                None => "+inf".into(),
            };
            out.push(format!("[{lo}, {hi}) -> {}", name(*node)));
        }
        out.join(", ")
    }
}

/// A key for messages: integers bare, text quoted, dates without a zero fraction or time.
fn show(kind: KeyKind, k: &RangeKey) -> String {
    match (kind, k) {
        (KeyKind::Date, RangeKey::Text(s)) if kind.holds(k) => {
            let s = s.strip_suffix(".000000").unwrap_or(s);
            key_sql(&RangeKey::Text(
                s.strip_suffix(" 00:00:00").unwrap_or(s).to_string(),
            ))
        }
        _ => key_sql(k),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Bound::{Excluded, Included, Unbounded};

    fn int(i: i128) -> RangeKey {
        RangeKey::Int(i)
    }

    fn text(s: &str) -> RangeKey {
        RangeKey::Text(s.into())
    }

    fn bytes(s: &str) -> Value {
        Value::Bytes(s.as_bytes().to_vec())
    }

    fn tv(s: &str) -> toml::Value {
        toml::Value::String(s.into())
    }

    /// `[-inf, 100) -> 0, [100, 200) -> 1, [200, 300) -> 0, [300, +inf) -> 2`.
    fn ints() -> RangeMap {
        RangeMap::new(
            KeyKind::Int,
            vec![
                (Some(int(100)), 0),
                (Some(int(200)), 1),
                (Some(int(300)), 0),
                (None, 2),
            ],
        )
        .unwrap()
    }

    fn dates() -> RangeMap {
        let b = |s: &str| Some(KeyKind::Date.bound(&tv(s)).unwrap());
        RangeMap::new(
            KeyKind::Date,
            vec![
                (b("2024-01-01"), 0),
                (b("2024-07-01 12:00:00"), 1),
                (None, 2),
            ],
        )
        .unwrap()
    }

    fn nodes_for(m: &RangeMap, lo: Bound<RangeKey>, hi: Bound<RangeKey>) -> Vec<usize> {
        m.nodes_for(&Ranges::from_bounds(lo, hi))
    }

    #[test]
    fn int_keys() {
        let k = KeyKind::Int;
        assert_eq!(k.key_of(&Value::Int(-7)), Some(int(-7)));
        assert_eq!(k.key_of(&Value::UInt(u64::MAX)), Some(int(u64::MAX.into())));
        assert_eq!(k.key_of(&bytes("42")), Some(int(42)));
        assert_eq!(k.key_of(&bytes("-7")), Some(int(-7)));
        assert_eq!(k.key_of(&bytes("007")), Some(int(7)));
        assert_eq!(
            k.key_of(&bytes("18446744073709551615")),
            Some(int(u64::MAX.into()))
        );
        assert_eq!(k.key_of(&bytes("18446744073709551616")), None);
        assert_eq!(k.key_of(&bytes("3.50")), None);
        assert_eq!(k.key_of(&bytes("42abc")), None);
        assert_eq!(k.key_of(&bytes(" 42")), None);
        assert_eq!(k.key_of(&bytes("")), None);
        assert_eq!(k.key_of(&Value::Bytes(vec![0xff, b'1'])), None);
        assert_eq!(k.key_of(&Value::Double(42.0)), None);
        assert_eq!(k.key_of(&Value::Float(42.0)), None);
        assert_eq!(k.key_of(&Value::Date(2024, 1, 1, 0, 0, 0, 0)), None);
        assert_eq!(k.key_of(&Value::NULL), None);
    }

    #[test]
    fn date_keys_are_fixed_width() {
        let k = KeyKind::Date;
        let midnight = Some(text("2024-01-31 00:00:00.000000"));
        assert_eq!(k.key_of(&bytes("2024-01-31")), midnight);
        assert_eq!(k.key_of(&bytes("2024-01-31 00:00:00")), midnight);
        assert_eq!(k.key_of(&Value::Date(2024, 1, 31, 0, 0, 0, 0)), midnight);
        assert_eq!(
            k.key_of(&bytes("2024-01-31 13:05:09.5")),
            Some(text("2024-01-31 13:05:09.500000"))
        );
        assert_eq!(
            k.key_of(&bytes("2024-01-31 13:05:09.123456")),
            Some(text("2024-01-31 13:05:09.123456"))
        );
        assert_eq!(
            k.key_of(&Value::Date(2024, 1, 31, 13, 5, 9, 7)),
            Some(text("2024-01-31 13:05:09.000007"))
        );
        assert_eq!(
            k.key_of(&bytes("2024-02-29")),
            Some(text("2024-02-29 00:00:00.000000"))
        );
        // Keys order as time does.
        assert!(k.key_of(&bytes("2024-01-31 09:00:00")) < k.key_of(&bytes("2024-01-31 10:00:00")));
        assert!(k.key_of(&bytes("999-01-01")).is_none());
        for bad in [
            "2023-02-29",
            "2024-13-01",
            "2024-00-10",
            "2024-04-31",
            "2024-01-00",
            "0000-00-00",
            "2024-01-01 24:00:00",
            "2024-01-01 10:60:00",
            "2024-01-01 10:00:60",
            "2024-01-01 10:00",
            "2024-01-01T10:00:00",
            "2024-01-01 10:00:00.",
            "2024-01-01 10:00:00.1234567",
            "2024-01-01 ",
            "2024-1-1",
            "20240101",
            "yesterday",
            "2024-01-01 10:00:0x",
        ] {
            assert_eq!(k.key_of(&bytes(bad)), None, "{bad}");
        }
        assert_eq!(k.key_of(&Value::Date(0, 0, 0, 0, 0, 0, 0)), None);
        assert_eq!(k.key_of(&Value::Date(2024, 2, 30, 0, 0, 0, 0)), None);
        assert_eq!(k.key_of(&Value::Date(2024, 1, 1, 0, 0, 0, 1_000_000)), None);
        assert_eq!(k.key_of(&Value::Int(20240101)), None);
        assert_eq!(k.key_of(&Value::Time(false, 0, 1, 0, 0, 0)), None);
    }

    #[test]
    fn text_keys_fold_case_and_trailing_spaces() {
        let k = KeyKind::Text;
        assert_eq!(k.key_of(&bytes("abc")), Some(text("ABC")));
        assert_eq!(k.key_of(&bytes("AbC  ")), Some(text("ABC")));
        assert_eq!(k.key_of(&bytes("  a b ")), Some(text("  A B")));
        assert_eq!(k.key_of(&bytes("abc\t")), Some(text("ABC\t")));
        // Outside ASCII collations disagree with byte order: no key.
        assert_eq!(k.key_of(&bytes("straße")), None);
        assert_eq!(k.key_of(&bytes("émile")), None);
        assert_eq!(k.key_of(&bytes("")), Some(text("")));
        assert_eq!(k.key_of(&Value::Bytes(vec![b'a', 0xff])), None);
        assert_eq!(k.key_of(&Value::Int(1)), None);
        assert_eq!(k.key_of(&Value::UInt(1)), None);
        assert_eq!(k.key_of(&Value::Date(2024, 1, 1, 0, 0, 0, 0)), None);
        assert_eq!(k.key_of(&Value::NULL), None);
        // Bounds fold the same way.
        assert_eq!(k.bound(&tv("m ")), Ok(text("M")));
    }

    #[test]
    fn bounds_from_the_rules_file() {
        assert_eq!(KeyKind::Int.bound(&toml::Value::Integer(-5)), Ok(int(-5)));
        assert_eq!(
            KeyKind::Date.bound(&tv("2024-01-01")),
            Ok(text("2024-01-01 00:00:00.000000"))
        );
        assert_eq!(
            KeyKind::Date.bound(&tv("2024-01-01 06:30:00")),
            Ok(text("2024-01-01 06:30:00.000000"))
        );
        let native: toml::Value = toml::from_str::<toml::Table>(
            "a = 2024-03-01\nb = 2024-03-01T06:00:00\nc = 2024-03-01T06:00:00Z",
        )
        .unwrap()
        .into();
        assert_eq!(
            KeyKind::Date.bound(&native["a"]),
            Ok(text("2024-03-01 00:00:00.000000"))
        );
        assert_eq!(
            KeyKind::Date.bound(&native["b"]),
            Ok(text("2024-03-01 06:00:00.000000"))
        );
        assert!(KeyKind::Date.bound(&native["c"]).is_err());
        assert_eq!(KeyKind::of_bound(&native["a"]), Ok(KeyKind::Date));
        let err = KeyKind::Date.bound(&tv("2024-02-30")).unwrap_err();
        assert!(
            err.contains("2024-02-30") && err.contains("not a valid date"),
            "{err}"
        );
        assert!(KeyKind::Date.bound(&tv("2024-01-01 10:00:00.5")).is_err());
        let err = KeyKind::Int.bound(&tv("42")).unwrap_err();
        assert!(
            err.contains("a string") && err.contains("integers"),
            "{err}"
        );
        assert!(KeyKind::Text.bound(&toml::Value::Integer(1)).is_err());
        assert!(KeyKind::Int.bound(&toml::Value::Float(1.5)).is_err());

        assert_eq!(
            KeyKind::of_bound(&toml::Value::Integer(1)),
            Ok(KeyKind::Int)
        );
        assert_eq!(KeyKind::of_bound(&tv("2024-01-01")), Ok(KeyKind::Date));
        assert_eq!(
            KeyKind::of_bound(&tv("2024-01-01 10:00:00")),
            Ok(KeyKind::Date)
        );
        // Date-looking but invalid: a Date bound, which `bound` then rejects.
        assert_eq!(KeyKind::of_bound(&tv("2024-02-30")), Ok(KeyKind::Date));
        assert_eq!(KeyKind::of_bound(&tv("m")), Ok(KeyKind::Text));
        assert_eq!(KeyKind::of_bound(&tv("2024")), Ok(KeyKind::Text));
        assert_eq!(KeyKind::of_bound(&tv("42")), Ok(KeyKind::Text));
        let err = KeyKind::of_bound(&toml::Value::Float(1.5)).unwrap_err();
        assert!(err.contains("1.5") && err.contains("a float"), "{err}");
        assert!(KeyKind::of_bound(&toml::Value::Boolean(true)).is_err());
    }

    #[test]
    fn keys_print_as_sql_literals() {
        assert_eq!(key_sql(&int(-42)), "-42");
        assert_eq!(key_sql(&int(u64::MAX.into())), "18446744073709551615");
        assert_eq!(key_sql(&text("ABC")), "'ABC'");
        assert_eq!(
            key_sql(&text("2024-01-01 00:00:00.000000")),
            "'2024-01-01 00:00:00.000000'"
        );
        assert_eq!(key_sql(&text(r"O'B\X")), "_utf8mb4 X'4F27425C58'");
        assert_eq!(key_sql(&text("A\0B")), "_utf8mb4 X'410042'");
    }

    #[test]
    fn validation_errors_name_the_entry() {
        let err = |kind, e| RangeMap::new(kind, e).unwrap_err();
        let e = err(KeyKind::Int, vec![]);
        assert!(e.contains("at least one range"), "{e}");
        let e = err(
            KeyKind::Int,
            vec![(Some(int(10)), 0), (Some(int(5)), 1), (None, 2)],
        );
        assert!(
            e.contains("range 2's bound 5 is less than range 1's bound 10"),
            "{e}"
        );
        let e = err(
            KeyKind::Int,
            vec![(Some(int(10)), 0), (Some(int(10)), 1), (None, 2)],
        );
        assert!(
            e.contains("range 2's bound 10 is equal to range 1's bound 10"),
            "{e}"
        );
        let e = err(
            KeyKind::Text,
            vec![(Some(text("M")), 0), (Some(text("M")), 1), (None, 2)],
        );
        assert!(e.contains("case-insensitively"), "{e}");
        let e = err(KeyKind::Int, vec![(Some(int(10)), 0), (Some(int(20)), 1)]);
        assert!(
            e.contains("the last range (range 2, below 20) must have no `below`"),
            "{e}"
        );
        let e = err(KeyKind::Int, vec![(None, 0), (Some(int(20)), 1), (None, 2)]);
        assert!(e.contains("range 1 of 3 has no `below` bound"), "{e}");
        let e = err(KeyKind::Int, vec![(Some(int(1)), 0), (None, 1), (None, 2)]);
        assert!(e.contains("range 2 of 3 has no `below` bound"), "{e}");
        let e = err(KeyKind::Int, vec![(Some(text("M")), 0), (None, 1)]);
        assert!(
            e.contains("range 1's bound 'M' is not one of this rule's integers"),
            "{e}"
        );
        let e = err(
            KeyKind::Text,
            vec![(Some(text("M")), 0), (Some(int(5)), 1), (None, 2)],
        );
        assert!(
            e.contains("range 2's bound 5 is not one of this rule's strings"),
            "{e}"
        );
        let e = err(
            KeyKind::Date,
            vec![(Some(text("2024-01-01")), 0), (None, 1)],
        );
        assert!(e.contains("not one of this rule's dates"), "{e}");
        // One open-ended range is the whole domain.
        let one = RangeMap::new(KeyKind::Int, vec![(None, 3)]).unwrap();
        assert_eq!(one.node_of(&int(i128::MIN)), 3);
        assert_eq!(one.nodes_for(&Ranges::all()), vec![3]);
        assert_eq!(one.describe(&|n| format!("ds{n}")), "[-inf, +inf) -> ds3");
    }

    #[test]
    fn node_of_at_and_around_each_boundary() {
        let m = ints();
        for (k, node) in [
            (i128::MIN, 0),
            (-1, 0),
            (99, 0),
            (100, 1),
            (101, 1),
            (199, 1),
            (200, 0),
            (299, 0),
            (300, 2),
            (301, 2),
            (i128::MAX, 2),
        ] {
            assert_eq!(m.node_of(&int(k)), node, "{k}");
        }
        let d = dates();
        let at = |s: &str| d.node_of(&KeyKind::Date.key_of(&bytes(s)).unwrap());
        assert_eq!(at("2023-12-31 23:59:59.999999"), 0);
        assert_eq!(at("2024-01-01"), 1);
        assert_eq!(at("2024-07-01"), 1);
        assert_eq!(at("2024-07-01 11:59:59"), 1);
        assert_eq!(at("2024-07-01 12:00:00"), 2);
        assert_eq!(
            d.node_of(
                &KeyKind::Date
                    .key_of(&Value::Date(2024, 7, 1, 12, 0, 0, 0))
                    .unwrap()
            ),
            2
        );
    }

    #[test]
    fn nodes_for_sets_of_keys() {
        let m = ints();
        let pts = |v: &[i128]| {
            v.iter()
                .fold(Ranges::empty(), |acc, p| acc.union(&Ranges::point(int(*p))))
        };
        assert_eq!(m.nodes_for(&pts(&[5])), vec![0]);
        assert_eq!(m.nodes_for(&pts(&[150])), vec![1]);
        assert_eq!(m.nodes_for(&pts(&[5, 250])), vec![0]);
        assert_eq!(m.nodes_for(&pts(&[5, 300])), vec![0, 2]);
        assert_eq!(m.nodes_for(&pts(&[100, 299, 1000])), vec![0, 1, 2]);
        assert_eq!(m.nodes_for(&Ranges::empty()), Vec::<usize>::new());
        assert_eq!(m.nodes_for(&Ranges::all()), vec![0, 1, 2]);
        // Half-open ranges.
        assert_eq!(nodes_for(&m, Unbounded, Excluded(int(100))), vec![0]);
        assert_eq!(nodes_for(&m, Unbounded, Included(int(100))), vec![0, 1]);
        assert_eq!(nodes_for(&m, Included(int(300)), Unbounded), vec![2]);
        assert_eq!(nodes_for(&m, Included(int(299)), Unbounded), vec![0, 2]);
        assert_eq!(
            nodes_for(&m, Included(int(200)), Excluded(int(300))),
            vec![0]
        );
        // Integers are discrete: `> 299` is `>= 300`, `< 101` is `<= 100`.
        assert_eq!(nodes_for(&m, Excluded(int(299)), Unbounded), vec![2]);
        assert_eq!(nodes_for(&m, Excluded(int(298)), Unbounded), vec![0, 2]);
        assert_eq!(nodes_for(&m, Unbounded, Excluded(int(101))), vec![0, 1]);
        assert_eq!(
            nodes_for(&m, Excluded(int(i128::MAX - 1)), Unbounded),
            vec![2]
        );
        // BETWEEN across two ranges.
        assert_eq!(
            nodes_for(&m, Included(int(150)), Included(int(250))),
            vec![0, 1]
        );
        assert_eq!(
            nodes_for(&m, Included(int(310)), Included(int(320))),
            vec![2]
        );
        // Two parts.
        let two = Ranges::from_bounds(Unbounded, Excluded(int(50)))
            .union(&Ranges::from_bounds(Included(int(120)), Included(int(130))));
        assert_eq!(m.nodes_for(&two), vec![0, 1]);
    }

    #[test]
    fn nodes_for_dates_and_text() {
        let d = dates();
        let key = |s: &str| KeyKind::Date.key_of(&bytes(s)).unwrap();
        assert_eq!(
            nodes_for(&d, Included(key("2023-06-01")), Excluded(key("2024-01-01"))),
            vec![0]
        );
        assert_eq!(
            nodes_for(&d, Included(key("2023-06-01")), Included(key("2024-01-01"))),
            vec![0, 1]
        );
        assert_eq!(
            nodes_for(&d, Excluded(key("2024-07-01 12:00:00")), Unbounded),
            vec![2]
        );
        assert_eq!(
            nodes_for(
                &d,
                Included(key("2024-03-01")),
                Included(key("2024-08-01 10:00:00.5"))
            ),
            vec![1, 2]
        );

        let b = |s: &str| Some(KeyKind::Text.bound(&tv(s)).unwrap());
        let t = RangeMap::new(KeyKind::Text, vec![(b("h"), 0), (b("q"), 1), (None, 2)]).unwrap();
        let tk = |s: &str| KeyKind::Text.key_of(&bytes(s)).unwrap();
        assert_eq!(t.node_of(&tk("apple")), 0);
        assert_eq!(t.node_of(&tk("Hello")), 1);
        assert_eq!(t.node_of(&tk("hello   ")), t.node_of(&tk("HELLO")));
        assert_eq!(t.node_of(&tk("h")), 1);
        assert_eq!(t.node_of(&tk("zebra")), 2);
        assert_eq!(nodes_for(&t, Included(tk("a")), Excluded(tk("H"))), vec![0]);
        assert_eq!(
            nodes_for(&t, Included(tk("g")), Included(tk("i"))),
            vec![0, 1]
        );
    }

    #[test]
    fn remap_and_describe() {
        let m = ints();
        assert_eq!(m.nodes(), vec![0, 1, 2]);
        let r = m.remap(&|n| n + 10);
        assert_eq!(r.nodes, vec![10, 11, 10, 12]);
        assert_eq!(r.uppers, m.uppers);
        assert_eq!(r.nodes(), vec![10, 11, 12]);
        assert_eq!(
            m.describe(&|n| format!("ds{n}")),
            "[-inf, 100) -> ds0, [100, 200) -> ds1, [200, 300) -> ds0, [300, +inf) -> ds2"
        );
        assert_eq!(
            dates().describe(&|n| format!("ds{n}")),
            "[-inf, '2024-01-01') -> ds0, ['2024-01-01', '2024-07-01 12:00:00') -> ds1, \
             ['2024-07-01 12:00:00', +inf) -> ds2"
        );
    }

    #[test]
    fn where_clauses_route_through_the_map() {
        use crate::sql::keys::KeyColumn;
        use crate::sql::parse;
        use crate::sql::ranges::where_ranges;
        use sqlparser::ast::{SetExpr, Statement};

        let route = |m: &RangeMap, cond: &str, params: &[Value]| {
            let p = parse(&format!("SELECT * FROM t WHERE {cond}")).unwrap();
            let Statement::Query(q) = &p.stmt else {
                panic!("not a query")
            };
            let SetExpr::Select(s) = q.body.as_ref() else {
                panic!("not a select")
            };
            let col = KeyColumn {
                column: "k".into(),
                qualifiers: vec!["t".into()],
            };
            let kind = m.kind;
            let r = where_ranges(s.selection.as_ref(), &col, &p, params, &|v| kind.key_of(v));
            m.nodes_for(&r)
        };
        let m = ints();
        assert_eq!(route(&m, "k = 150", &[]), vec![1]);
        assert_eq!(route(&m, "k = '150'", &[]), vec![1]);
        assert_eq!(route(&m, "k BETWEEN 150 AND 250", &[]), vec![0, 1]);
        assert_eq!(route(&m, "k > 299", &[]), vec![2]);
        assert_eq!(route(&m, "k = 1.5", &[]), vec![0, 1, 2]);
        assert_eq!(route(&m, "k = 1 AND k = 2", &[]), Vec::<usize>::new());
        assert_eq!(
            route(&m, "k IN (?, ?)", &[bytes("5"), Value::UInt(301)]),
            vec![0, 2]
        );

        let d = dates();
        assert_eq!(
            route(&d, "k >= '2024-02-01' AND k < '2024-03-01'", &[]),
            vec![1]
        );
        assert_eq!(route(&d, "k < '2024-01-01'", &[]), vec![0]);
        assert_eq!(route(&d, "k <= '2024-01-01'", &[]), vec![0, 1]);
        assert_eq!(
            route(&d, "k = ?", &[Value::Date(2025, 1, 1, 0, 0, 0, 0)]),
            vec![2]
        );
        assert_eq!(route(&d, "k = '2024/01/01'", &[]), vec![0, 1, 2]);

        let b = |s: &str| Some(KeyKind::Text.bound(&tv(s)).unwrap());
        let t = RangeMap::new(KeyKind::Text, vec![(b("h"), 0), (None, 1)]).unwrap();
        assert_eq!(route(&t, "k = 'hat '", &[]), vec![1]);
        assert_eq!(route(&t, "k < 'H'", &[]), vec![0]);
        assert_eq!(route(&t, "k = 5", &[]), vec![0, 1]);
    }
}
