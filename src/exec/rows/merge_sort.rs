//! MergeSort: a k-way merge of node results that each arrive in ORDER BY order, holding one
//! row per node (the heads); rows come out in the query's order. Its input is the leaf's
//! node results ([`Parts`]), read one at a time where the next row comes from.

use crate::merge::{cmp_rows, Class, Row, SortKey};

use super::input::Parts;
use crate::exec::door::{NodeError, NodeResult};

pub struct MergeSort<R> {
    parts: Parts<R>,
    /// Each node's next row; read on the first `next` (after the client's columns).
    heads: Option<Vec<Option<Row>>>,
    keys: Vec<SortKey>,
    classes: Vec<Class>,
}

impl<R: NodeResult> MergeSort<R> {
    pub fn new(parts: Parts<R>, keys: Vec<SortKey>, classes: Vec<Class>) -> Self {
        MergeSort {
            parts,
            heads: None,
            keys,
            classes,
        }
    }

    /// The next row in order over all nodes; `None` when every node is done.
    pub async fn next(&mut self) -> Result<Option<Row>, NodeError> {
        let heads = match &mut self.heads {
            Some(h) => h,
            None => {
                let mut heads = Vec::with_capacity(self.parts.len());
                for i in 0..self.parts.len() {
                    heads.push(self.parts.next_of(i).await?);
                }
                self.heads.insert(heads)
            }
        };
        let mut best: Option<usize> = None;
        for (i, h) in heads.iter().enumerate() {
            let Some(row) = h else { continue };
            best = match best.and_then(|b| heads[b].as_ref().map(|r| (b, r))) {
                Some((b, brow)) => {
                    if cmp_rows(row, brow, &self.keys, &self.classes) == std::cmp::Ordering::Less {
                        Some(i)
                    } else {
                        Some(b)
                    }
                }
                None => Some(i),
            };
        }
        let Some(i) = best else { return Ok(None) };
        let next = self.parts.next_of(i).await?;
        Ok(std::mem::replace(&mut heads[i], next))
    }

    pub fn into_parts(self) -> Parts<R> {
        self.parts
    }
}

#[cfg(test)]
mod tests {
    use crate::exec::door::Access;
    use crate::exec::fake::{Canned, FakeDoor, RecordSink};
    use crate::exec::merge::run;
    use crate::merge::SortKey;
    use crate::plan::tests::scatter_of;
    use crate::plan::Plan;
    use mysql_common::constants::ColumnType;

    fn sorted(keys: Vec<SortKey>, nodes: usize, sql: &str) -> Plan {
        Plan::MergeSort {
            keys,
            input: Box::new(scatter_of(sql, nodes)),
        }
    }

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
        let key = SortKey {
            index: 0,
            desc: false,
            fixed: false,
        };
        let plan = sorted(vec![key], 3, "SELECT k FROM t ORDER BY k");
        let mut sink = RecordSink::text();
        run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap();
        // NULL first, numbers compared as numbers (10 after 9).
        assert_eq!(sink.lines(), vec!["NULL", "1", "2", "3", "5", "9", "10"]);
    }

    #[tokio::test]
    async fn strings_are_compared_in_the_collation_of_their_column() {
        // The nodes' metadata says utf8mb4_general_ci (the connection's, as MariaDB always
        // answers); the column's own is utf8mb4_bin.
        let answer = |rows: &[&[&str]]| match Canned::rows(&["s"], rows) {
            Canned::Rows { cols, rows, .. } => Canned::Rows {
                cols: cols
                    .iter()
                    .map(|c| c.clone().with_character_set(45))
                    .collect(),
                rows,
                fail_after: None,
            },
            other => other,
        };
        let key = SortKey {
            index: 0,
            desc: false,
            fixed: false,
        };
        let plan = sorted(vec![key], 2, "SELECT s FROM t ORDER BY s");
        // Each node sorted its rows in the column's collation (byte order).
        for (collations, want) in [
            // Merged as general_ci: a wrong order.
            (None, vec!["B", "b", "Z", "a"]),
            (Some(vec![46u16]), vec!["B", "Z", "a", "b"]),
        ] {
            let mut door = FakeDoor::new(2);
            door.answer(0, "SELECT", answer(&[&["Z"], &["a"]]));
            door.answer(1, "SELECT", answer(&[&["B"], &["b"]]));
            door.collations = collations.map(Into::into);
            let mut sink = RecordSink::text();
            run(&mut door, &mut sink, &plan, 1000, Access::Read)
                .await
                .unwrap();
            assert_eq!(sink.lines(), want);
            assert_eq!(
                door.collations_asked,
                vec![(0, "SELECT s FROM t ORDER BY s".to_string())]
            );
        }
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
        let key = SortKey {
            index: 0,
            desc: false,
            fixed: false,
        };
        let plan = sorted(vec![key], 2, "SELECT k FROM t ORDER BY k");
        let mut sink = RecordSink::text();
        let e = run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap_err();
        // The rows merged before the node died went out; then its error, never the end of
        // a result that would pass them for the whole.
        assert_eq!((e.node, e.broke), (1, true));
        assert_eq!(sink.lines(), vec!["1", "2", "3"]);
        assert!(!sink.ended(), "{:?}", sink.events);
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
        let key = SortKey {
            index: 0,
            desc: true,
            fixed: false,
        };
        let plan = Plan::Limit {
            offset: 1,
            limit: Some(3),
            input: Box::new(sorted(vec![key], 2, "SELECT k")),
        };
        let mut sink = RecordSink::text();
        run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["7", "5", "4"]);
    }

    #[tokio::test]
    async fn an_error_on_one_node_under_the_merge_is_the_answer_and_names_it() {
        let mut door = FakeDoor::new(3);
        let int = ColumnType::MYSQL_TYPE_LONG;
        door.answer(
            2,
            "SELECT",
            Canned::typed(&[("k", int)], &[&["0"], &["3"], &["4"]]).failing_after(2),
        );
        door.answer_any("SELECT", Canned::typed(&[("k", int)], &[&["1"], &["2"]]));
        let key = SortKey {
            index: 0,
            desc: false,
            fixed: false,
        };
        let plan = Plan::Limit {
            offset: 0,
            limit: Some(10),
            input: Box::new(sorted(vec![key], 3, "SELECT k FROM t ORDER BY k")),
        };
        let mut sink = RecordSink::text();
        let e = run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap_err();
        assert_eq!(e.node, 2);
        assert!(e.broke, "{e:?}");
        assert!(
            !matches!(
                sink.events.last(),
                Some(crate::exec::fake::Event::End { .. })
            ),
            "the answer is not ended as if complete"
        );
        // A node failing at the start fails the statement before anything is written.
        let mut door = FakeDoor::new(3);
        door.answer_any("SELECT", Canned::typed(&[("k", int)], &[&["1"]]));
        door.fail_on(1, "SELECT", 1146, "Table 'shop.t' doesn't exist");
        let mut sink = RecordSink::text();
        let e = run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap_err();
        assert_eq!((e.node, e.error.code), (1, 1146));
        assert!(sink.events.is_empty(), "{:?}", sink.events);
    }
}
