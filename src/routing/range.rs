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

use super::slot::MoveStep;
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
    /// The node reads of each range go to: range `i` holds `[uppers[i-1], uppers[i])`.
    /// A moving range's is its move's read node.
    pub nodes: Vec<usize>,
    /// Ranges being moved (`MIGRATE RANGE`), each at most once.
    moves: Vec<RangeMove>,
}

/// Range `index` of a map moving from node `from` to node `to`, at `step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeMove {
    pub index: usize,
    pub from: usize,
    pub to: usize,
    pub step: MoveStep,
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
            moves: Vec::new(),
        })
    }

    /// The map with these ranges moving (each from its node, at most one move a range:
    /// checked here); a moving range is read on `from` or, from `ReadTarget` on, on `to`.
    pub fn with_moves(mut self, moves: Vec<RangeMove>) -> Result<RangeMap, String> {
        for (i, m) in moves.iter().enumerate() {
            let n = m.index + 1;
            if self.nodes.get(m.index) != Some(&m.from) {
                return Err(format!("range {n} moves from a node that does not hold it"));
            }
            if m.from == m.to {
                return Err(format!("range {n} moves to the node it is on"));
            }
            if moves[..i].iter().any(|o| o.index == m.index) {
                return Err(format!("range {n} is moving twice"));
            }
        }
        for m in &moves {
            self.nodes[m.index] = m.step.read_node(m.from, m.to);
        }
        self.moves = moves;
        Ok(self)
    }

    /// The ranges being moved.
    pub fn moves(&self) -> &[RangeMove] {
        &self.moves
    }

    pub fn is_moving(&self) -> bool {
        !self.moves.is_empty()
    }

    /// Where range `i`'s rows are of record: a moving range's source until its cleanup.
    pub fn owner(&self, i: usize) -> usize {
        match self.moves.iter().find(|m| m.index == i) {
            Some(m) => m.step.owner(m.from, m.to),
            None => self.nodes[i],
        }
    }

    /// Range `i`'s bounds: its lowest key (`None`: from the domain's start) and the key above
    /// it (`None`: to the domain's end).
    pub fn bounds(&self, i: usize) -> (Option<&RangeKey>, Option<&RangeKey>) {
        let lo = i.checked_sub(1).and_then(|j| self.uppers.get(j));
        (lo, self.uppers.get(i))
    }

    /// How many ranges.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Index of the range holding `k`.
    pub fn index_of(&self, k: &RangeKey) -> usize {
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

    /// All nodes holding rows (a moving range's both ends), sorted, without duplicates.
    pub fn nodes(&self) -> Vec<usize> {
        let mut v = self.nodes.clone();
        v.extend(self.moves.iter().flat_map(|m| [m.from, m.to]));
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
            moves: self
                .moves
                .iter()
                .map(|m| RangeMove {
                    from: f(m.from),
                    to: f(m.to),
                    ..*m
                })
                .collect(),
        }
    }

    /// A key as a rules-file boundary (what [`KeyKind::bound`] reads back), if the rules can
    /// spell it: integers within TOML's 64 bits, dates at whole seconds, text.
    pub fn bound_toml(&self, k: &RangeKey) -> Option<toml::Value> {
        match (self.kind, k) {
            (KeyKind::Int, RangeKey::Int(i)) => i64::try_from(*i).ok().map(toml::Value::Integer),
            (KeyKind::Date, RangeKey::Text(s)) => s
                .strip_suffix(".000000")
                .map(|s| toml::Value::String(s.to_string())),
            (KeyKind::Text, RangeKey::Text(s)) => Some(toml::Value::String(s.clone())),
            _ => None,
        }
    }

    /// An admin's word as a key of this domain (`SPLIT RANGE 1000 OF t`), read as a
    /// rules-file boundary is.
    pub fn key_of_word(&self, w: &str) -> Result<RangeKey, String> {
        let v = match self.kind {
            KeyKind::Int => toml::Value::Integer(w.trim().parse().map_err(|_| {
                format!("'{w}' is not an integer, and this table's range keys are integers")
            })?),
            _ => toml::Value::String(w.to_string()),
        };
        self.kind.bound(&v)
    }

    /// A key as the admin writes it (`SPLIT RANGE 1000 OF t`): the word
    /// [`RangeMap::key_of_word`] reads back.
    pub fn word(&self, k: &RangeKey) -> String {
        match self.bound_toml(k) {
            Some(toml::Value::Integer(i)) => i.to_string(),
            Some(toml::Value::String(s)) => s,
            _ => show(self.kind, k),
        }
    }

    /// A key of range `i` as the admin writes it: its lowest key, or for the first range the
    /// domain's lowest (`MIGRATE RANGE k OF t` names a range by any of its keys).
    pub fn word_in(&self, i: usize) -> String {
        match self.bounds(i).0 {
            Some(k) => self.word(k),
            None => match self.kind {
                KeyKind::Int => i64::MIN.to_string(),
                KeyKind::Date => "0000-01-01".to_string(),
                KeyKind::Text => String::new(),
            },
        }
    }

    /// A key for messages: integers bare, text quoted, dates without a zero time.
    pub fn show_key(&self, k: &RangeKey) -> String {
        show(self.kind, k)
    }

    /// Each range's upper bound (`None` for the last) and node of record, in order.
    pub fn entries(&self) -> Vec<(Option<RangeKey>, usize)> {
        (0..self.nodes.len())
            .map(|i| (self.uppers.get(i).cloned(), self.owner(i)))
            .collect()
    }

    /// The map with a range starting at `k`, cut from the range holding it, on its node.
    pub fn split_at(&self, k: &RangeKey) -> Result<RangeMap, String> {
        if self.is_moving() {
            return Err("a range of the table is being moved: split once the move is done".into());
        }
        if !self.kind.holds(k) || self.bound_toml(k).is_none() {
            return Err(format!(
                "{} cannot be a bound of these ranges",
                show(self.kind, k)
            ));
        }
        let i = self.index_of(k);
        if self.bounds(i).0 == Some(k) {
            return Err(format!("a range starts at {} already", show(self.kind, k)));
        }
        let mut entries = self.entries();
        let node = entries[i].1;
        entries.insert(i, (Some(k.clone()), node));
        RangeMap::new(self.kind, entries)
    }

    /// The map without bound `k`: the range starting there joins the one before it, which
    /// must be on the same node.
    pub fn merge_at(&self, k: &RangeKey) -> Result<RangeMap, String> {
        if self.is_moving() {
            return Err("a range of the table is being moved: merge once the move is done".into());
        }
        let Some(j) = self.uppers.iter().position(|u| u == k) else {
            return Err(format!("no range starts at {}", show(self.kind, k)));
        };
        if self.nodes[j] != self.nodes[j + 1] {
            return Err(format!(
                "the ranges on each side of {} are on different nodes: move one to the other's node first",
                show(self.kind, k)
            ));
        }
        let mut entries = self.entries();
        let below = entries[j + 1].0.clone();
        entries[j].0 = below;
        entries.remove(j + 1);
        RangeMap::new(self.kind, entries)
    }

    /// For display: `[-inf, 1000000) -> ds0, [1000000, +inf) -> ds1`.
    pub fn describe(&self, name: &dyn Fn(usize) -> String) -> String {
        (0..self.nodes.len())
            .map(|i| self.describe_range(i, name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Range `i` for display: `[1000, 2000) -> ds1`, or while it moves `[1000, 2000) -> ds1
    /// moving to ds2 (capture)`.
    pub fn describe_range(&self, i: usize, name: &dyn Fn(usize) -> String) -> String {
        let (lo, hi) = self.bounds(i);
        let lo = lo.map_or("-inf".into(), |k| show(self.kind, k));
        let hi = hi.map_or("+inf".into(), |k| show(self.kind, k));
        match self.moves.iter().find(|m| m.index == i) {
            Some(m) => format!(
                "[{lo}, {hi}) -> {} moving to {} ({})",
                name(m.from),
                name(m.to),
                m.step.name()
            ),
            None => format!("[{lo}, {hi}) -> {}", name(self.nodes[i])),
        }
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
#[path = "range_tests.rs"]
mod tests;
