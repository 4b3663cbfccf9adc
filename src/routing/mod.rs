//! Routing rules: value -> node.

pub mod directory;
pub mod keygen;
pub mod range;
pub mod rebalance;
pub mod salt;
pub mod slot;
pub mod time_tier;
pub mod weights;

use directory::DirectoryRule;
use range::{KeyKind, RangeMap};
use slot::SlotMap;
use time_tier::TierRule;

/// A run written `A-B` or `N` (slots, buckets), unchecked: its two numbers.
pub fn parse_run(text: &str) -> Option<(usize, usize)> {
    let (a, b) = text.split_once('-').unwrap_or((text, text));
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

/// Consecutive equal items as `(first index, last index, item)` runs, in order.
pub fn runs<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<(usize, usize, T)> {
    let mut out: Vec<(usize, usize, T)> = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        match out.last_mut() {
            Some(last) if last.2 == item => last.1 = i,
            _ => out.push((i, i, item)),
        }
    }
    out
}

/// How one table is placed. Its nodes and description, which need the whole topology, are
/// `crate::config`'s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableRule {
    /// `CRC32(column) % 1024` picks a slot, the map picks the node.
    HashSlot { column: String, map: SlotMap },
    /// A full copy on every node: writes go everywhere, reads to one.
    Broadcast,
    /// The whole table on one node.
    Single { node: usize },
    /// Ordered boundaries on a column, each range on a node.
    Range { column: String, map: RangeMap },
    /// Explicit key -> node entries (and a lookup table), a fallback rule for the rest.
    Directory(Box<DirectoryRule>),
    /// Hot / warm / cold nodes by a date column.
    TimeTier(Box<TierRule>),
}

impl TableRule {
    pub fn kind(&self) -> &'static str {
        match self {
            TableRule::HashSlot { .. } => "hash_slot",
            TableRule::Broadcast => "broadcast",
            TableRule::Single { .. } => "single",
            TableRule::Range { .. } => "range",
            TableRule::Directory(_) => "directory",
            TableRule::TimeTier(_) => "time_tier",
        }
    }

    /// The column that routes rows, if any.
    pub fn column(&self) -> Option<&str> {
        match self {
            TableRule::HashSlot { column, .. } | TableRule::Range { column, .. } => Some(column),
            TableRule::Directory(d) => Some(&d.column),
            TableRule::TimeTier(t) => Some(&t.column),
            TableRule::Broadcast | TableRule::Single { .. } => None,
        }
    }

    /// The salt column of a hash_slot table that has salted keys: the column a row of such a
    /// key is placed by, besides its key (`crate::routing::salt`).
    pub fn salt_column(&self) -> Option<&str> {
        match self {
            TableRule::HashSlot { map, .. } if !map.salted().is_empty() => {
                map.salt().map(|s| s.by.as_str())
            }
            _ => None,
        }
    }

    /// The domain a range or time_tier rule compares its column's values in (`None`: the
    /// rule routes by equal keys only, or not by a column).
    pub fn key_kind(&self) -> Option<KeyKind> {
        match self {
            TableRule::Range { map, .. } => Some(map.kind),
            TableRule::TimeTier(_) => Some(KeyKind::Date),
            _ => None,
        }
    }

    /// The rule with its nodes renumbered.
    pub fn remap(&mut self, at: &dyn Fn(usize) -> usize) {
        match self {
            TableRule::HashSlot { map, .. } => *map = map.remap(at),
            TableRule::Range { map, .. } => *map = map.remap(at),
            TableRule::Single { node } => *node = at(*node),
            TableRule::Broadcast => {}
            TableRule::Directory(d) => {
                for n in d.entries.values_mut() {
                    *n = at(*n);
                }
                if let Some(l) = d.lookup.as_mut() {
                    l.node = at(l.node);
                }
                for m in d.moves.iter_mut() {
                    m.from = at(m.from);
                    m.to = at(m.to);
                }
                d.fallback.remap(at);
            }
            TableRule::TimeTier(t) => {
                for tier in t.tiers.iter_mut() {
                    tier.node = at(tier.node);
                }
            }
        }
    }
}
