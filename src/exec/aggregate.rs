//! Aggregate: node rows that are partial results (each node grouped its own rows) merged
//! into the client's groups, with HAVING after the merge. Streamed when the nodes send their
//! groups sorted by the group keys (one group at a time, at most one row per node held);
//! otherwise every row is held (bounded by the statement's row cap) and grouped, de-duplicated
//! and sorted in memory ([`crate::merge::finish_buffered`]).

use mysql_common::packets::Column;

use super::door::NodeError;
use super::scatter::not_a_node;
use crate::error::MyError;
use crate::merge::{aggregate, cmp_rows, finish_buffered, having, Class, MergeSpec, Row};

/// Groups folded as sorted rows stream past.
pub struct StreamGroups<'s> {
    spec: &'s MergeSpec,
    group: Vec<Row>,
    cap: usize,
}

fn merge_error(e: crate::merge::MergeError) -> NodeError {
    not_a_node(MyError::unsupported(format!("shardproxy: {}", e.0)))
}

impl<'s> StreamGroups<'s> {
    pub fn new(spec: &'s MergeSpec, cap: usize) -> Self {
        StreamGroups {
            spec,
            group: Vec::new(),
            cap,
        }
    }

    /// Takes the next row in group order; returns the finished previous group's row when
    /// this row starts a new group (and that group passes HAVING).
    pub fn push(
        &mut self,
        row: Row,
        cols: &[Column],
        classes: &[Class],
        binary: bool,
    ) -> Result<Option<Row>, NodeError> {
        let same = self.group.first().is_some_and(|g| {
            cmp_rows(g, &row, &self.spec.order, classes) == std::cmp::Ordering::Equal
        });
        if same || self.group.is_empty() {
            self.group.push(row);
            return Ok(None);
        }
        let done = self.finish(cols, classes, binary)?;
        self.group.push(row);
        Ok(done)
    }

    /// The last group's row, once the rows ended.
    pub fn finish(
        &mut self,
        cols: &[Column],
        classes: &[Class],
        binary: bool,
    ) -> Result<Option<Row>, NodeError> {
        if self.group.is_empty() {
            return Ok(None);
        }
        let Some(g) = self.spec.group.as_ref() else {
            return Ok(None);
        };
        let merged = aggregate(std::mem::take(&mut self.group), g, cols, binary, self.cap)
            .map_err(merge_error)?;
        Ok(merged.into_iter().next().filter(|r| {
            self.spec
                .having
                .as_ref()
                .is_none_or(|h| having(h, r, classes))
        }))
    }
}

/// Every row in memory: grouped, HAVING, DISTINCT, sorted, paged.
pub fn buffered(
    rows: Vec<Row>,
    spec: &MergeSpec,
    cols: &[Column],
    binary: bool,
    cap: usize,
) -> Result<Vec<Row>, NodeError> {
    finish_buffered(rows, spec, cols, binary, cap).map_err(merge_error)
}

#[cfg(test)]
mod tests {
    use crate::exec::door::{Access, Stmt};
    use crate::exec::fake::{Canned, FakeDoor, RecordSink};
    use crate::exec::merge::merged;
    use crate::plan::tests::merge_spec_of;
    use mysql_common::constants::ColumnType;

    const INT: ColumnType = ColumnType::MYSQL_TYPE_LONGLONG;

    #[tokio::test]
    async fn counts_and_sums_of_every_node_add_up() {
        let (node_sql, spec) = merge_spec_of("SELECT COUNT(*), SUM(v), MAX(v) FROM t");
        let mut door = FakeDoor::new(2);
        let cols = [
            ("c", INT),
            ("s", ColumnType::MYSQL_TYPE_NEWDECIMAL),
            ("m", INT),
        ];
        door.answer(0, "SELECT", Canned::typed(&cols, &[&["3", "10", "7"]]));
        door.answer(1, "SELECT", Canned::typed(&cols, &[&["2", "5", "9"]]));
        let mut sink = RecordSink::text();
        let s: Vec<_> = (0..2).map(|n| (n, Stmt::new(&node_sql, &[]))).collect();
        merged(&mut door, &mut sink, &s, &spec, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["5,15,9"]);
    }

    #[tokio::test]
    async fn sorted_groups_stream_and_having_runs_after_the_merge() {
        let (node_sql, spec) =
            merge_spec_of("SELECT k, COUNT(*) FROM t GROUP BY k HAVING COUNT(*) > 2 ORDER BY k");
        assert!(spec.stream_groups, "{spec:?}");
        let mut door = FakeDoor::new(2);
        door.answer(
            0,
            "SELECT",
            Canned::typed(
                &[("k", INT), ("c", INT)],
                &[&["1", "2"], &["2", "1"], &["4", "5"]],
            ),
        );
        door.answer(
            1,
            "SELECT",
            Canned::typed(
                &[("k", INT), ("c", INT)],
                &[&["1", "1"], &["3", "1"], &["4", "1"]],
            ),
        );
        let mut sink = RecordSink::text();
        let s: Vec<_> = (0..2).map(|n| (n, Stmt::new(&node_sql, &[]))).collect();
        merged(&mut door, &mut sink, &s, &spec, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["1,3", "4,6"]);
    }

    #[tokio::test]
    async fn a_node_that_dies_while_groups_stream_fails_the_statement() {
        let (node_sql, spec) = merge_spec_of("SELECT k, COUNT(*) FROM t GROUP BY k");
        assert!(spec.stream_groups, "{spec:?}");
        let mut door = FakeDoor::new(2);
        let rows: &[&[&str]] = &[&["1", "1"], &["2", "1"], &["3", "1"]];
        door.answer(0, "SELECT", Canned::typed(&[("k", INT), ("c", INT)], rows));
        door.answer(
            1,
            "SELECT",
            Canned::typed(&[("k", INT), ("c", INT)], rows).failing_after(2),
        );
        let mut sink = RecordSink::text();
        let s: Vec<_> = (0..2).map(|n| (n, Stmt::new(&node_sql, &[]))).collect();
        let e = merged(&mut door, &mut sink, &s, &spec, 1000, Access::Read)
            .await
            .unwrap_err();
        // The node's error, after the groups merged before it died; never an end of
        // result that would pass the groups written for all of them.
        assert_eq!((e.node, e.broke), (1, true));
        assert_eq!(sink.lines(), vec!["1,2"]);
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
    async fn unsorted_groups_are_held_and_capped() {
        let (node_sql, spec) =
            merge_spec_of("SELECT k, COUNT(*) FROM t GROUP BY k ORDER BY COUNT(*) DESC");
        let mut door = FakeDoor::new(2);
        door.answer(
            0,
            "SELECT",
            Canned::typed(&[("k", INT), ("c", INT)], &[&["1", "2"], &["2", "1"]]),
        );
        door.answer(
            1,
            "SELECT",
            Canned::typed(&[("k", INT), ("c", INT)], &[&["2", "5"]]),
        );
        let mut sink = RecordSink::text();
        let s: Vec<_> = (0..2).map(|n| (n, Stmt::new(&node_sql, &[]))).collect();
        merged(&mut door, &mut sink, &s, &spec, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["2,6", "1,2"]);
        let mut sink = RecordSink::text();
        let e = merged(&mut door, &mut sink, &s, &spec, 2, Access::Read)
            .await
            .unwrap_err();
        assert_eq!(e.error.code, 1235);
        assert!(
            e.error.message.contains("max_rows_per_statement"),
            "{}",
            e.error.message
        );
    }
}
