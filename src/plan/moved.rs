//! Which rows a move moves ([`Which`]: slots, a key, a salted key's buckets, a range of
//! keys), from where to where, at which step: how a row is told to be one of them, and the
//! SQL predicate that selects them on a node.

use mysql_common::value::Value;

use super::moving::quote;
use crate::routing::range::{key_sql, KeyKind, RangeKey};
use crate::routing::slot::{MoveStep, SLOTS};

/// Rows being moved: a slot range of a hash_slot table, or one key (a tenant) of a
/// directory table, from node `from` to node `to`, at `step`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moving {
    pub which: Which,
    pub from: usize,
    pub to: usize,
    pub step: MoveStep,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Which {
    /// Slots `a..=b` but the keys split out of them (text forms), which stay where they are.
    Slots(u16, u16, Vec<Vec<u8>>),
    /// The key's text form.
    Key(Vec<u8>),
    /// Buckets `first..=last` of a salted key (its text form): the key's rows whose salt
    /// column `by` has `CRC32(by) % buckets` among them.
    Buckets {
        key: Vec<u8>,
        by: String,
        buckets: u16,
        first: u16,
        last: u16,
    },
    /// A range of a range table: the keys from `lo` (`None`: the domain's start) up to,
    /// not including, `hi` (`None`: to its end), compared in the rule's domain.
    Range {
        kind: KeyKind,
        lo: Option<RangeKey>,
        hi: Option<RangeKey>,
    },
}

impl Moving {
    /// Is a row whose routing column holds `v` one of the moving rows?
    pub fn holds(&self, v: &Value) -> bool {
        match &self.which {
            Which::Slots(a, b, except) => crate::value::text_form(v).is_some_and(|t| {
                (*a..=*b).contains(&crate::routing::slot::slot_of_text(&t)) && !except.contains(&t)
            }),
            // Some of the key's rows are, some not: a statement by the key may touch them.
            Which::Key(k) | Which::Buckets { key: k, .. } => {
                crate::value::text_form(v).is_some_and(|t| t == *k)
            }
            Which::Range { kind, lo, hi } => kind.key_of(v).is_some_and(|k| {
                lo.as_ref().is_none_or(|lo| k >= *lo) && hi.as_ref().is_none_or(|hi| k < *hi)
            }),
        }
    }

    /// Is a row whose routing column holds `v` and whose salt column holds `by` one of the
    /// moving rows (the binary log's row images, which have both)?
    pub fn holds_row(&self, v: &Value, by: Option<&Value>) -> bool {
        match &self.which {
            Which::Buckets {
                buckets,
                first,
                last,
                ..
            } => {
                self.holds(v)
                    && by
                        .and_then(crate::value::text_form)
                        .map(|t| (crc32fast::hash(&t) % u32::from(*buckets)) as u16)
                        .is_some_and(|b| (*first..=*last).contains(&b))
            }
            _ => self.holds(v),
        }
    }

    /// The salt column a row image needs for [`Moving::holds_row`].
    pub fn by(&self) -> Option<&str> {
        match &self.which {
            Which::Buckets { by, .. } => Some(by),
            _ => None,
        }
    }

    /// The node holding copies of these rows that reads must not see there.
    pub fn shadow_node(&self) -> usize {
        self.step.shadow_node(self.from, self.to)
    }

    /// The SQL predicate selecting these rows by their routing column `column` (a bare
    /// name), its table named `qualifier` (quoted, `None`: unqualified).
    pub fn predicate(&self, qualifier: Option<&str>, column: &str) -> String {
        let col = |c: &str| match qualifier {
            Some(q) => format!("{q}.{}", quote(c)),
            None => quote(c),
        };
        let column = col(column);
        let column = column.as_str();
        match &self.which {
            Which::Slots(a, b, except) if except.is_empty() => {
                format!("CRC32({column}) % {SLOTS} BETWEEN {a} AND {b}")
            }
            Which::Slots(a, b, except) => {
                let keys: Vec<String> = except
                    .iter()
                    .map(|k| crate::sql::write::key_literal(k))
                    .collect();
                format!(
                    "(CRC32({column}) % {SLOTS} BETWEEN {a} AND {b} AND CAST({column} AS BINARY) NOT IN ({}))",
                    keys.join(", ")
                )
            }
            // The column's own comparison finds the rows by its index; the binary one keeps
            // out a key its collation holds equal (`ABC` for `abc`), placed by its own bytes.
            Which::Key(k) => format!(
                "({column} = {lit} AND CAST({column} AS BINARY) = {lit})",
                lit = crate::sql::write::key_literal(k)
            ),
            Which::Buckets {
                key,
                by,
                buckets,
                first,
                last,
            } => format!(
                "({column} = {lit} AND CAST({column} AS BINARY) = {lit} AND CRC32({}) % {buckets} BETWEEN {first} AND {last})",
                col(by),
                lit = crate::sql::write::key_literal(key)
            ),
            // The node compares in the column's own type and collation, as routing does in
            // the rule's domain (`crate::routing::range`).
            Which::Range { lo, hi, .. } => match (lo, hi) {
                (Some(lo), Some(hi)) => format!(
                    "({column} >= {} AND {column} < {})",
                    key_sql(lo),
                    key_sql(hi)
                ),
                (Some(lo), None) => format!("{column} >= {}", key_sql(lo)),
                (None, Some(hi)) => format!("{column} < {}", key_sql(hi)),
                (None, None) => format!("{column} IS NOT NULL"),
            },
        }
    }
}
