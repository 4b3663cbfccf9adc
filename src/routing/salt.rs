//! Salting: one key of a hash_slot table too hot for any one node, its rows spread over
//! buckets by a second column. A row of a salted key is in bucket `CRC32(by) % buckets` (the
//! text form of its `by` column, as MariaDB's `CRC32()` computes it, so a bucket's rows can
//! be selected in plain SQL), and each bucket is on a node of its own choosing. A read by the
//! key alone reads every bucket's node; a read or write that also pins `by` reads one.

use mysql_common::value::Value;

use super::slot::MoveStep;
use crate::value::text_form;

/// A table's salting scheme (`salt = { by = "id", buckets = 8 }` on a hash_slot table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Salt {
    /// The lower-cased column that picks a row's bucket.
    pub by: String,
    pub buckets: u16,
}

/// The most buckets a key may be salted into.
pub const MAX_BUCKETS: u16 = 256;

impl Salt {
    /// The bucket of a row whose `by` column holds `v`; `None` for NULL.
    pub fn bucket_of(&self, v: &Value) -> Option<u16> {
        text_form(v).map(|t| (crc32fast::hash(&t) % u32::from(self.buckets)) as u16)
    }
}

/// Where a salted key's rows are: the node of each bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buckets(pub Vec<usize>);

impl Buckets {
    /// `buckets` buckets spread in equal runs over `nodes`, in order: bucket `b` on
    /// `nodes[b * len / buckets]` (non-empty `nodes`, checked by the caller).
    pub fn spread(nodes: &[usize], buckets: u16) -> Buckets {
        let n = usize::from(buckets);
        Buckets((0..n).map(|b| nodes[b * nodes.len() / n]).collect())
    }

    /// The node of bucket `b`.
    pub fn node(&self, b: u16) -> usize {
        self.0[usize::from(b) % self.0.len().max(1)]
    }

    /// The nodes holding rows whose `by` is one of `by` (any row when `None`), in node order.
    pub fn nodes_for(&self, salt: &Salt, by: Option<&[Value]>) -> Vec<usize> {
        let mut v: Vec<usize> = match by {
            Some(values) => values
                .iter()
                .filter_map(|v| salt.bucket_of(v))
                .map(|b| self.node(b))
                .collect(),
            None => self.0.clone(),
        };
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// Buckets `first..=last` of a salted key moving from node `from` to node `to` (salting a key
/// that has rows, or moving its buckets on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketMove {
    /// The key's text form.
    pub key: Vec<u8>,
    pub first: u16,
    pub last: u16,
    pub from: usize,
    pub to: usize,
    pub step: MoveStep,
}

impl BucketMove {
    /// The node reads of these buckets go to.
    pub fn read_node(&self) -> usize {
        self.step.read_node(self.from, self.to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_is_mariadbs_crc32_of_the_text_form() {
        let s = Salt {
            by: "id".into(),
            buckets: 8,
        };
        // `SELECT CRC32(42) % 8` on MariaDB 10.11: 841265288 % 8.
        assert_eq!(s.bucket_of(&Value::Int(42)), Some(0));
        assert_eq!(s.bucket_of(&Value::Bytes(b"42".to_vec())), Some(0));
        assert_eq!(s.bucket_of(&Value::NULL), None);
        let b = Buckets(vec![0, 1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(b.nodes_for(&s, None), vec![0, 1, 2, 3]);
        assert_eq!(b.nodes_for(&s, Some(&[Value::Int(42)])), vec![0]);
        assert_eq!(b.nodes_for(&s, Some(&[])), Vec::<usize>::new());
    }
}
