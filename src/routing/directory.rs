//! The `directory` rule: explicit key -> node entries (a big tenant on its own node), optionally
//! read from a lookup table on a node, with a fallback rule for every other key.

use std::collections::HashMap;

use mysql_common::value::Value;

use super::TableRule;
use crate::value::text_form;

/// A table of `key_column -> node_column` rows on a node, read through a cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    pub node: usize,
    pub table: String,
    pub key_column: String,
    pub node_column: String,
    /// Keys the cache holds at most.
    pub cache_size: u64,
    pub ttl_secs: u64,
}

impl Lookup {
    /// The query reading the keys this lookup table places on node `name`.
    pub fn keys_on(&self, name: &str) -> String {
        format!(
            "SELECT {} FROM {} WHERE {} = {}",
            crate::sql::write::quoted(&self.key_column),
            crate::sql::write::quoted(&self.table),
            crate::sql::write::quoted(&self.node_column),
            crate::sql::write::text_literal(name)
        )
    }

    /// The query reading these keys' entries.
    pub fn query(&self, keys: &[Vec<u8>]) -> String {
        let list: Vec<String> = keys
            .iter()
            .map(|k| crate::sql::write::key_literal(k))
            .collect();
        format!(
            "SELECT `{k}`, `{n}` FROM `{t}` WHERE `{k}` IN ({})",
            list.join(", "),
            k = self.key_column.replace('`', "``"),
            n = self.node_column.replace('`', "``"),
            t = self.table.replace('`', "``"),
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryRule {
    /// Lower-cased key column.
    pub column: String,
    /// Key (as MySQL's text form of the value: `42`, `acme`) -> node.
    pub entries: HashMap<Vec<u8>, usize>,
    pub lookup: Option<Lookup>,
    /// Where every other key goes: hash_slot, range or single on the same column.
    pub fallback: Box<TableRule>,
    /// Keys (tenants) being moved to another node (`crate::migrate`).
    pub moves: Vec<KeyMove>,
}

/// A key of a directory table moving from node `from` to node `to`, at `step` (the steps of
/// a slot range's move: [`super::slot::MoveStep`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyMove {
    /// The key's text form.
    pub key: Vec<u8>,
    pub from: usize,
    pub to: usize,
    pub step: super::slot::MoveStep,
}

impl KeyMove {
    /// The node reads of the key go to.
    pub fn read_node(&self) -> usize {
        self.step.read_node(self.from, self.to)
    }
}

/// Where one key of a directory table lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    Node(usize),
    /// Not an entry (and not in the lookup table): the fallback decides.
    Fallback,
    /// A lookup-table key the cache does not know yet.
    Unknown,
}

impl DirectoryRule {
    /// `looked_up` answers from the lookup cache: `Some(Some(node))` an entry,
    /// `Some(None)` known absent, `None` not cached.
    pub fn place(&self, key: &Value, looked_up: &dyn Fn(&[u8]) -> Option<Option<usize>>) -> Placed {
        let Some(text) = text_form(key) else {
            return Placed::Fallback;
        };
        if let Some(m) = self.moves.iter().find(|m| m.key == text) {
            return Placed::Node(m.read_node());
        }
        if let Some(n) = self.entries.get(&text) {
            return Placed::Node(*n);
        }
        if self.lookup.is_none() {
            return Placed::Fallback;
        }
        match looked_up(&text) {
            Some(Some(n)) => Placed::Node(n),
            Some(None) => Placed::Fallback,
            None => Placed::Unknown,
        }
    }

    /// Every node a row could be on (entries, the lookup's possible targets, the fallback).
    pub fn entry_nodes(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.entries.values().copied().collect();
        v.extend(self.moves.iter().flat_map(|m| [m.from, m.to]));
        v.sort_unstable();
        v.dedup();
        v
    }

    pub fn describe(&self, name: &dyn Fn(usize) -> String) -> String {
        let mut e: Vec<(String, String)> = self
            .entries
            .iter()
            .map(|(k, n)| (String::from_utf8_lossy(k).into_owned(), name(*n)))
            .collect();
        e.sort();
        let mut out = format!(
            "entries {{{}}}",
            e.iter()
                .map(|(k, n)| format!("{k} -> {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some(l) = &self.lookup {
            out.push_str(&format!(
                ", lookup {}.{} -> {} on {} (cache {} keys, ttl {} s)",
                l.table,
                l.key_column,
                l.node_column,
                name(l.node),
                l.cache_size,
                l.ttl_secs
            ));
        }
        out.push_str(&format!(", fallback {}", self.fallback.kind()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(lookup: bool) -> DirectoryRule {
        DirectoryRule {
            column: "tenant_id".into(),
            entries: [(b"42".to_vec(), 1usize)].into_iter().collect(),
            lookup: lookup.then(|| Lookup {
                node: 0,
                table: "tenant_dir".into(),
                key_column: "tenant_id".into(),
                node_column: "node".into(),
                cache_size: 10,
                ttl_secs: 60,
            }),
            fallback: Box::new(TableRule::Single { node: 0 }),
            moves: Vec::new(),
        }
    }

    #[test]
    fn entries_win_then_lookup_then_fallback() {
        let none = |_: &[u8]| None;
        let r = rule(false);
        assert_eq!(r.place(&Value::Int(42), &none), Placed::Node(1));
        assert_eq!(
            r.place(&Value::Bytes(b"42".to_vec()), &none),
            Placed::Node(1)
        );
        assert_eq!(r.place(&Value::Int(7), &none), Placed::Fallback);
        let r = rule(true);
        assert_eq!(r.place(&Value::Int(7), &none), Placed::Unknown);
        let cached = |k: &[u8]| match k {
            b"7" => Some(Some(2)),
            _ => Some(None),
        };
        assert_eq!(r.place(&Value::Int(7), &cached), Placed::Node(2));
        assert_eq!(r.place(&Value::Int(8), &cached), Placed::Fallback);
        assert_eq!(r.place(&Value::Int(42), &cached), Placed::Node(1));
    }

    #[test]
    fn lookup_query_quotes_keys() {
        let r = rule(true);
        let q = r
            .lookup
            .as_ref()
            .unwrap()
            .query(&[b"7".to_vec(), b"o'k".to_vec()]);
        assert_eq!(
            q,
            "SELECT `tenant_id`, `node` FROM `tenant_dir` WHERE `tenant_id` IN ('7', _utf8mb4 X'6F276B')"
        );
    }
}
