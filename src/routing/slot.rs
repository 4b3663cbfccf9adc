//! The logical slot of a shard-key value: `CRC32(text form) % 1024`, exactly as MariaDB's
//! `CRC32()` computes it, so ops can select a slot's rows in plain SQL.

use mysql_common::value::Value;

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

/// Which node serves each slot: a dense table of node indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotMap {
    nodes: Box<[u16; SLOTS]>,
}

impl SlotMap {
    /// A map from a complete assignment (every slot named exactly once, checked by the caller).
    pub fn from_assignment(nodes: Box<[u16; SLOTS]>) -> Self {
        SlotMap { nodes }
    }

    pub fn node_of_slot(&self, slot: u16) -> usize {
        usize::from(self.nodes[usize::from(slot) % SLOTS])
    }

    /// The nodes that hold at least one slot, in node order.
    pub fn nodes(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.nodes.iter().map(|n| usize::from(*n)).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The same map with node indexes renumbered.
    pub fn remap(&self, f: &dyn Fn(usize) -> usize) -> SlotMap {
        let mut nodes = self.nodes.clone();
        for n in nodes.iter_mut() {
            *n = f(usize::from(*n)) as u16;
        }
        SlotMap { nodes }
    }

    /// Contiguous `(first, last, node)` runs, for display.
    pub fn runs(&self) -> Vec<(u16, u16, usize)> {
        let mut out: Vec<(u16, u16, usize)> = Vec::new();
        for (slot, node) in self.nodes.iter().enumerate() {
            let node = usize::from(*node);
            match out.last_mut() {
                Some(last) if last.2 == node => last.1 = slot as u16,
                _ => out.push((slot as u16, slot as u16, node)),
            }
        }
        out
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
}
