//! MergeSort: a k-way merge of node results that each arrive in ORDER BY order, holding one
//! row per node (the heads); rows come out in the query's order.

use crate::merge::{cmp_rows, Class, Row, SortKey};

use super::door::{NodeError, NodeResult};
use super::merge::Reader;

pub struct MergeSort<'k> {
    heads: Vec<Option<Row>>,
    order: &'k [SortKey],
}

impl<'k> MergeSort<'k> {
    /// Reads the first row of each node.
    pub async fn open<R: NodeResult>(
        ress: &mut [R],
        order: &'k [SortKey],
        reader: &mut Reader,
    ) -> Result<MergeSort<'k>, NodeError> {
        let mut heads = Vec::with_capacity(ress.len());
        for res in ress.iter_mut() {
            heads.push(reader.next(res).await?);
        }
        Ok(MergeSort { heads, order })
    }

    /// The next row in order over all nodes; `None` when every node is done.
    pub async fn next<R: NodeResult>(
        &mut self,
        ress: &mut [R],
        classes: &[Class],
        reader: &mut Reader,
    ) -> Result<Option<Row>, NodeError> {
        let mut best: Option<usize> = None;
        for (i, h) in self.heads.iter().enumerate() {
            let Some(row) = h else { continue };
            best = match best.and_then(|b| self.heads[b].as_ref().map(|r| (b, r))) {
                Some((b, brow)) => {
                    if cmp_rows(row, brow, self.order, classes) == std::cmp::Ordering::Less {
                        Some(i)
                    } else {
                        Some(b)
                    }
                }
                None => Some(i),
            };
        }
        let Some(i) = best else { return Ok(None) };
        let next = reader.next(&mut ress[i]).await?;
        Ok(std::mem::replace(&mut self.heads[i], next))
    }
}

#[cfg(test)]
mod tests {
    use crate::exec::door::{Access, Stmt};
    use crate::exec::fake::{Canned, FakeDoor, RecordSink};
    use crate::exec::merge::merged;
    use crate::merge::{MergeSpec, SortKey};
    use mysql_common::constants::ColumnType;

    #[tokio::test]
    async fn rows_come_out_in_order_over_all_nodes() {
        let mut door = FakeDoor::new(3);
        let int = ColumnType::MYSQL_TYPE_LONG;
        door.answer(
            0,
            "SELECT",
            Canned::typed(&[("k", int)], &[&["1"], &["5"], &["9"]]),
        );
        door.answer(
            1,
            "SELECT",
            Canned::typed(&[("k", int)], &[&["2"], &["10"]]),
        );
        door.answer(
            2,
            "SELECT",
            Canned::typed(&[("k", int)], &[&["NULL"], &["3"]]),
        );
        let spec = MergeSpec {
            order: vec![SortKey {
                index: 0,
                desc: false,
                fixed: false,
            }],
            ..Default::default()
        };
        let mut sink = RecordSink::text();
        let s: Vec<_> = (0..3)
            .map(|n| (n, Stmt::new("SELECT k FROM t ORDER BY k", &[])))
            .collect();
        merged(&mut door, &mut sink, &s, &spec, 1000, Access::Read)
            .await
            .unwrap();
        // NULL first, numbers compared as numbers (10 after 9).
        assert_eq!(sink.lines(), vec!["NULL", "1", "2", "3", "5", "9", "10"]);
    }

    #[tokio::test]
    async fn a_node_that_dies_mid_merge_fails_the_statement() {
        let mut door = FakeDoor::new(2);
        let int = ColumnType::MYSQL_TYPE_LONG;
        door.answer(
            0,
            "SELECT",
            Canned::typed(&[("k", int)], &[&["1"], &["3"], &["5"]]),
        );
        door.answer(
            1,
            "SELECT",
            Canned::typed(&[("k", int)], &[&["2"], &["4"], &["6"]]).failing_after(2),
        );
        let spec = MergeSpec {
            order: vec![SortKey {
                index: 0,
                desc: false,
                fixed: false,
            }],
            ..Default::default()
        };
        let mut sink = RecordSink::text();
        let s: Vec<_> = (0..2)
            .map(|n| (n, Stmt::new("SELECT k FROM t ORDER BY k", &[])))
            .collect();
        let e = merged(&mut door, &mut sink, &s, &spec, 1000, Access::Read)
            .await
            .unwrap_err();
        // The rows merged before the node died went out; then its error, never the end of
        // a result that would pass them for the whole.
        assert_eq!((e.node, e.broke), (1, true));
        assert_eq!(sink.lines(), vec!["1", "2", "3"]);
        assert!(
            !sink
                .events
                .iter()
                .any(|ev| matches!(ev, crate::exec::fake::Event::End { .. })),
            "{:?}",
            sink.events
        );
    }

    #[tokio::test]
    async fn descending_with_a_page() {
        let mut door = FakeDoor::new(2);
        let int = ColumnType::MYSQL_TYPE_LONG;
        door.answer(
            0,
            "SELECT",
            Canned::typed(&[("k", int)], &[&["8"], &["4"], &["2"]]),
        );
        door.answer(
            1,
            "SELECT",
            Canned::typed(&[("k", int)], &[&["7"], &["5"], &["1"]]),
        );
        let spec = MergeSpec {
            order: vec![SortKey {
                index: 0,
                desc: true,
                fixed: false,
            }],
            offset: 1,
            limit: Some(3),
            ..Default::default()
        };
        let mut sink = RecordSink::text();
        let s: Vec<_> = (0..2).map(|n| (n, Stmt::new("SELECT k", &[]))).collect();
        merged(&mut door, &mut sink, &s, &spec, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["7", "5", "4"]);
    }
}
