//! The logical slot of a shard-key value: `CRC32(text form) % 1024`, exactly as MariaDB's
//! `CRC32()` computes it, so ops can select a slot's rows in plain SQL.

use std::collections::HashMap;

use mysql_common::value::Value;

use super::directory::KeyMove;
use super::salt::{BucketMove, Buckets, Salt};
use crate::value::text_form;

/// Number of logical slots. The modulus never changes; only the slot map does.
pub const SLOTS: usize = 1024;

/// Slot of a value already in MySQL's text form (`42`, `abc`, `2024-01-31`).
pub fn slot_of_text(text: &[u8]) -> u16 {
    (crc32fast::hash(text) % SLOTS as u32) as u16
}

/// Slot of a value; `None` for NULL.
pub fn slot_of(value: &Value) -> Option<u16> {
    text_form(value).map(|t| slot_of_text(&t))
}

/// Which node serves each slot: a dense table of node indexes, and the slot ranges being
/// moved to another node (`crate::migrate`); and the keys split out of their slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotMap {
    /// The node each slot's reads go to.
    nodes: Box<[u16; SLOTS]>,
    moves: Vec<Move>,
    /// Keys placed apart from their slot (`MIGRATE KEY` on a hash_slot table: a hot key moved
    /// alone): each key's text form and its node. Its slot's other keys stay with the slot.
    keys: HashMap<Vec<u8>, usize>,
    /// Keys being moved alone, from their slot's node or their own.
    key_moves: Vec<KeyMove>,
    /// The table's salting scheme, if it has one.
    salt: Option<Salt>,
    /// Keys salted (`crate::routing::salt`): each key's text form and the node each of its
    /// buckets' reads go to.
    salted: HashMap<Vec<u8>, Buckets>,
    /// Buckets of salted keys being moved.
    salt_moves: Vec<BucketMove>,
}

/// Where the rows of one key are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place<'a> {
    /// On one node; with the slot whose rows they are (`None` for a key split out of its
    /// slot: its load is not its slot's).
    One(usize, Option<u16>),
    /// A salted key: spread over its buckets' nodes by the salt's `by` column.
    Salted(&'a Salt, &'a Buckets),
}

impl Place<'_> {
    /// The nodes holding rows of the key whose `by` is one of `by` (any when `None`).
    pub fn nodes(&self, by: Option<&[Value]>) -> Vec<usize> {
        match self {
            Place::One(n, _) => vec![*n],
            Place::Salted(salt, b) => b.nodes_for(salt, by),
        }
    }

    /// The node of one row, given its `by` column (`None` when a salted key's row has none).
    pub fn row_node(&self, by: Option<&Value>) -> Option<usize> {
        match self {
            Place::One(n, _) => Some(*n),
            Place::Salted(salt, b) => Some(b.node(salt.bucket_of(by?)?)),
        }
    }
}

/// A step of a slot range's move from `from` to `to`, as every proxy routes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MoveStep {
    /// Writes run on `from` (its answer is the client's) and their row images are written to
    /// `to`; reads stay on `from`. Backfill and verify run in this step.
    DualWrite,
    /// Reads move to `to`; writes still as in `DualWrite`.
    ReadTarget,
    /// Writes wait; reads on `to`. Every proxy stops writing `from` before `to` takes the
    /// writes alone.
    Freeze,
    /// Writes and reads run on `from` alone; the migration's driver copies the rows they
    /// change to `to` from `from`'s binary log (`crate::migrate::binlog`). Backfill and
    /// verify run in this step.
    Capture,
    /// Writes wait; reads stay on `from` while the driver brings `to` up to `from`'s binary
    /// log (the capture's cutover: `to` is behind `from` until then).
    Hold,
    /// `to` owns the slots; `from` still holds copies of their rows, deleted in batches.
    Cleanup,
}

impl MoveStep {
    pub fn name(self) -> &'static str {
        match self {
            MoveStep::DualWrite => "dual_write",
            MoveStep::ReadTarget => "read_target",
            MoveStep::Freeze => "freeze",
            MoveStep::Cleanup => "cleanup",
            MoveStep::Capture => "capture",
            MoveStep::Hold => "hold",
        }
    }

    /// Where reads of rows moving from `from` to `to` go at this step: the source until
    /// reads move, the target after.
    pub fn read_node(self, from: usize, to: usize) -> usize {
        match self {
            MoveStep::DualWrite | MoveStep::Capture | MoveStep::Hold => from,
            _ => to,
        }
    }

    /// The owner of record of rows moving from `from` to `to`: the source until the cleanup
    /// step, the target from it.
    pub fn owner(self, from: usize, to: usize) -> usize {
        match self {
            MoveStep::Cleanup => to,
            _ => from,
        }
    }

    /// The other node: it holds copies of the moving rows that reads must not see there
    /// (the target's being filled, or the source's left to clean up).
    pub fn shadow_node(self, from: usize, to: usize) -> usize {
        match self {
            MoveStep::DualWrite | MoveStep::Capture | MoveStep::Hold => to,
            _ => from,
        }
    }

    /// A step at which any write may run where the rows are owned: the move copies changes
    /// from its source's binary log (`Capture`, `Hold`), or the target owns them
    /// (`Cleanup`); only the copies on the other node must be left alone.
    pub fn captured_or_owned(self) -> bool {
        matches!(self, MoveStep::Capture | MoveStep::Hold | MoveStep::Cleanup)
    }

    pub fn parse(s: &str) -> Option<MoveStep> {
        Some(match s {
            "dual_write" => MoveStep::DualWrite,
            "read_target" => MoveStep::ReadTarget,
            "freeze" => MoveStep::Freeze,
            "cleanup" => MoveStep::Cleanup,
            "capture" => MoveStep::Capture,
            "hold" => MoveStep::Hold,
            _ => return None,
        })
    }
}

/// Slots `first..=last` moving from node `from` to node `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Move {
    pub first: u16,
    pub last: u16,
    pub from: usize,
    pub to: usize,
    pub step: MoveStep,
}

impl Move {
    pub fn contains(&self, slot: u16) -> bool {
        (self.first..=self.last).contains(&slot)
    }

    /// The node reads of these slots go to.
    pub fn read_node(&self) -> usize {
        self.step.read_node(self.from, self.to)
    }
}

impl SlotMap {
    /// A map from a complete assignment (every slot named exactly once, checked by the caller).
    pub fn from_assignment(nodes: Box<[u16; SLOTS]>) -> Self {
        SlotMap {
            nodes,
            moves: Vec::new(),
            keys: HashMap::new(),
            key_moves: Vec::new(),
            salt: None,
            salted: HashMap::new(),
            salt_moves: Vec::new(),
        }
    }

    /// The map with this salting scheme, these keys salted (each with `salt.buckets` owners
    /// of record, none also split or moving) and these buckets moving (of salted keys,
    /// disjoint, each from its owner: checked by the caller); a moving bucket is given to
    /// `from` (read there) or `to` (from `ReadTarget` on).
    pub fn with_salt(
        mut self,
        salt: Option<Salt>,
        mut salted: HashMap<Vec<u8>, Buckets>,
        moves: Vec<BucketMove>,
    ) -> Self {
        for m in &moves {
            if let Some(b) = salted.get_mut(&m.key) {
                for i in m.first..=m.last {
                    if let Some(n) = b.0.get_mut(usize::from(i)) {
                        *n = m.read_node();
                    }
                }
            }
        }
        self.salt = salt;
        self.salted = salted;
        self.salt_moves = moves;
        self
    }

    /// The salted keys' buckets being moved.
    pub fn salt_moves(&self) -> &[BucketMove] {
        &self.salt_moves
    }

    /// The owner of record of each bucket of a salted key: a moving bucket's `from` until
    /// its cleanup step.
    pub fn bucket_owners(&self, key: &[u8]) -> Option<Vec<usize>> {
        let mut v = self.salted.get(key)?.0.clone();
        for m in self.salt_moves.iter().filter(|m| m.key == key) {
            for i in m.first..=m.last {
                if let Some(n) = v.get_mut(usize::from(i)) {
                    *n = m.step.owner(m.from, m.to);
                }
            }
        }
        Some(v)
    }

    /// The table's salting scheme.
    pub fn salt(&self) -> Option<&Salt> {
        self.salt.as_ref()
    }

    /// The salted keys, each with its buckets' nodes.
    pub fn salted(&self) -> &HashMap<Vec<u8>, Buckets> {
        &self.salted
    }

    /// The map with these keys split out of their slots, and these keys moving (a key
    /// moving at most once, checked by the caller).
    pub fn with_keys(mut self, keys: HashMap<Vec<u8>, usize>, moves: Vec<KeyMove>) -> Self {
        self.keys = keys;
        self.key_moves = moves;
        self
    }

    /// The keys split out of their slots, each with its node of record.
    pub fn split_keys(&self) -> &HashMap<Vec<u8>, usize> {
        &self.keys
    }

    /// The keys being moved alone.
    pub fn key_moves(&self) -> &[KeyMove] {
        &self.key_moves
    }

    /// Is this key (its text form) placed apart from its slot, moving alone, or salted?
    pub fn is_split(&self, text: &[u8]) -> bool {
        self.keys.contains_key(text)
            || self.salted.contains_key(text)
            || self.key_moves.iter().any(|m| m.key == text)
    }

    /// Every key placed apart from its slot, moving alone or salted (the rows a slot range's
    /// move leaves where they are).
    pub fn apart(&self) -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = self.keys.keys().cloned().collect();
        v.extend(self.salted.keys().cloned());
        v.extend(self.key_moves.iter().map(|m| m.key.clone()));
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Where reads of a split key (its text form) go, if it is one.
    pub fn split_node(&self, text: &[u8]) -> Option<usize> {
        if let Some(m) = self.key_moves.iter().find(|m| m.key == text) {
            return Some(m.read_node());
        }
        self.keys.get(text).copied()
    }

    /// Where reads of one row with this key go, given its `by` column if the key is salted:
    /// the key's own node if split out of its slot, else its slot's. `None` for NULL, and for
    /// a salted key's row without a `by` value.
    pub fn node_of_row(&self, v: &Value, by: Option<&Value>) -> Option<usize> {
        self.place(v)?.row_node(by)
    }

    /// Where the rows with this key are: a salted key's buckets, a split key's node, or its
    /// slot's node with the slot. `None` for NULL.
    pub fn place(&self, v: &Value) -> Option<Place<'_>> {
        if self.keys.is_empty() && self.key_moves.is_empty() && self.salted.is_empty() {
            return slot_of(v).map(|s| Place::One(self.node_of_slot(s), Some(s)));
        }
        Some(self.place_text(&text_form(v)?))
    }

    /// [`SlotMap::place`] for a key's text form.
    pub fn place_text(&self, text: &[u8]) -> Place<'_> {
        if let (Some(salt), Some(b)) = (&self.salt, self.salted.get(text)) {
            return Place::Salted(salt, b);
        }
        match self.split_node(text) {
            Some(n) => Place::One(n, None),
            None => {
                let s = slot_of_text(text);
                Place::One(self.node_of_slot(s), Some(s))
            }
        }
    }

    /// The map with these ranges moving (disjoint, checked by the caller); each range's
    /// slots are given to `from` (read there) or `to` (from `ReadTarget` on).
    pub fn with_moves(mut self, moves: Vec<Move>) -> Self {
        for m in &moves {
            for s in m.first..=m.last {
                self.nodes[usize::from(s) % SLOTS] = m.read_node() as u16;
            }
        }
        self.moves = moves;
        self
    }

    /// Where the slot's reads go (its owner, or a moving range's read node).
    pub fn node_of_slot(&self, slot: u16) -> usize {
        usize::from(self.nodes[usize::from(slot) % SLOTS])
    }

    /// Do both maps read every slot on the same node (tables sharded alike, even while one
    /// has slots moving and still reads them at their source)?
    pub fn same_reads(&self, other: &SlotMap) -> bool {
        self.nodes == other.nodes
            && self.split_reads() == other.split_reads()
            && self.salted == other.salted
    }

    /// Do rows of both tables with equal keys always sit on one node, so that a join on the
    /// keys can run node by node? Not with salted keys: their rows spread by another column.
    pub fn joins_alike(&self, other: &SlotMap) -> bool {
        self.salted.is_empty() && other.salted.is_empty() && self.same_reads(other)
    }

    /// Each split key and where its reads go, in key order.
    fn split_reads(&self) -> Vec<(&[u8], usize)> {
        let mut v: Vec<(&[u8], usize)> = self
            .keys
            .keys()
            .chain(self.key_moves.iter().map(|m| &m.key))
            .filter_map(|k| Some((k.as_slice(), self.split_node(k)?)))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Are slot ranges or split keys being moved (rows on two nodes)?
    pub fn is_moving(&self) -> bool {
        !self.moves.is_empty() || !self.key_moves.is_empty() || !self.salt_moves.is_empty()
    }

    /// The ranges being moved.
    pub fn moves(&self) -> &[Move] {
        &self.moves
    }

    /// The move of this slot, if it is moving.
    pub fn moving(&self, slot: u16) -> Option<&Move> {
        if self.moves.is_empty() {
            return None;
        }
        self.moves.iter().find(|m| m.contains(slot))
    }

    /// The owner of record of each slot: a moving range's `from` until its cleanup step.
    pub fn owner_of_slot(&self, slot: u16) -> usize {
        match self.moving(slot) {
            Some(m) => m.step.owner(m.from, m.to),
            None => self.node_of_slot(slot),
        }
    }

    /// The nodes that hold at least one slot's rows (moving ranges: both ends), in node order.
    pub fn nodes(&self) -> Vec<usize> {
        // Marked by index, not sorted: planning asks this several times a statement.
        let mut seen: Vec<bool> = Vec::new();
        let mut mark = |n: usize| {
            if n >= seen.len() {
                seen.resize(n + 1, false);
            }
            seen[n] = true;
        };
        for n in self.nodes.iter() {
            mark(usize::from(*n));
        }
        let ends = self.moves.iter().map(|m| (m.from, m.to));
        let ends = ends.chain(self.key_moves.iter().map(|m| (m.from, m.to)));
        for (from, to) in ends.chain(self.salt_moves.iter().map(|m| (m.from, m.to))) {
            mark(from);
            mark(to);
        }
        for n in self.keys.values() {
            mark(*n);
        }
        for n in self.salted.values().flat_map(|b| b.0.iter()) {
            mark(*n);
        }
        seen.iter()
            .enumerate()
            .filter_map(|(n, s)| s.then_some(n))
            .collect()
    }

    /// The same map with node indexes renumbered.
    pub fn remap(&self, f: &dyn Fn(usize) -> usize) -> SlotMap {
        let mut nodes = self.nodes.clone();
        for n in nodes.iter_mut() {
            *n = f(usize::from(*n)) as u16;
        }
        let moves = self
            .moves
            .iter()
            .map(|m| Move {
                from: f(m.from),
                to: f(m.to),
                ..*m
            })
            .collect();
        SlotMap {
            nodes,
            moves,
            keys: self.keys.iter().map(|(k, n)| (k.clone(), f(*n))).collect(),
            key_moves: self
                .key_moves
                .iter()
                .map(|m| KeyMove {
                    from: f(m.from),
                    to: f(m.to),
                    ..m.clone()
                })
                .collect(),
            salt: self.salt.clone(),
            salted: self
                .salted
                .iter()
                .map(|(k, b)| (k.clone(), Buckets(b.0.iter().map(|n| f(*n)).collect())))
                .collect(),
            salt_moves: self
                .salt_moves
                .iter()
                .map(|m| BucketMove {
                    from: f(m.from),
                    to: f(m.to),
                    ..m.clone()
                })
                .collect(),
        }
    }

    /// Contiguous `(first, last, owner of record)` runs, a moving range always a run of its
    /// own, for display and for writing the map back.
    pub fn runs(&self) -> Vec<(u16, u16, usize)> {
        self.runs_with_moves()
            .into_iter()
            .map(|(a, b, n, _)| (a, b, n))
            .collect()
    }

    /// [`SlotMap::runs`] with each run's move.
    pub fn runs_with_moves(&self) -> Vec<(u16, u16, usize, Option<Move>)> {
        super::runs((0..SLOTS as u16).map(|s| (self.owner_of_slot(s), self.moving(s).copied())))
            .into_iter()
            .map(|(a, b, (node, m))| (a as u16, b as u16, node, m))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values checked on MariaDB 10.11: `SELECT CRC32(x)`.
    #[test]
    fn crc32_matches_mariadb() {
        assert_eq!(crc32fast::hash(b"42"), 841_265_288);
        assert_eq!(
            slot_of(&Value::Int(42)),
            Some((841_265_288u32 % 1024) as u16)
        );
        assert_eq!(
            slot_of(&Value::Bytes(b"42".to_vec())),
            slot_of(&Value::Int(42))
        );
        assert_eq!(slot_of(&Value::UInt(42)), slot_of(&Value::Int(42)));
        assert_eq!(slot_of(&Value::NULL), None);
    }

    #[test]
    fn runs_compress_the_map() {
        let mut a = Box::new([0u16; SLOTS]);
        for s in a.iter_mut().skip(512) {
            *s = 1;
        }
        let m = SlotMap::from_assignment(a);
        assert_eq!(m.runs(), vec![(0, 511, 0), (512, 1023, 1)]);
        assert_eq!(m.nodes(), vec![0, 1]);
        assert_eq!(m.node_of_slot(511), 0);
        assert_eq!(m.node_of_slot(512), 1);
    }

    #[test]
    fn a_split_key_reads_on_its_own_node_and_its_slot_stays() {
        let m = SlotMap::from_assignment(Box::new([0u16; SLOTS]));
        let plain = m.clone();
        let m = m.with_keys(
            [(b"42".to_vec(), 2usize)].into_iter().collect(),
            vec![KeyMove {
                key: b"7".to_vec(),
                from: 0,
                to: 1,
                step: MoveStep::ReadTarget,
            }],
        );
        assert_eq!(m.node_of_row(&Value::Int(42), None), Some(2));
        assert_eq!(m.node_of_row(&Value::Bytes(b"42".to_vec()), None), Some(2));
        assert_eq!(m.node_of_row(&Value::Int(7), None), Some(1));
        assert_eq!(m.node_of_row(&Value::Int(43), None), Some(0));
        assert_eq!(m.node_of_row(&Value::NULL, None), None);
        assert_eq!(m.nodes(), vec![0, 1, 2]);
        assert!(m.is_split(b"7") && m.is_split(b"42") && !m.is_split(b"43"));
        assert_eq!(m.apart(), vec![b"42".to_vec(), b"7".to_vec()]);
        // Tables with other split keys are not sharded alike.
        assert!(!m.same_reads(&plain));
        assert!(m.same_reads(&m.remap(&|n| n)));
        assert_eq!(
            m.remap(&|n| n + 1).node_of_row(&Value::Int(42), None),
            Some(3)
        );
    }
}
