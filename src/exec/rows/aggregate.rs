//! Aggregate: node rows that are partial results (each node grouped its own rows) merged
//! into the client's groups, with HAVING after the merge. [`Streamed`] when the nodes send
//! their groups sorted by the group keys (a MergeSort below: one group at a time, at most one
//! row per node held); otherwise [`InMemory`]: every row is held (bounded by the statement's
//! row cap) and grouped, de-duplicated and sorted in memory
//! ([`crate::merge::finish_buffered`]).

use std::sync::Arc;

use mysql_common::packets::Column;

use super::input::{Ctx, Input};
use crate::error::MyError;
use crate::exec::door::NodeError;
use crate::exec::scatter::not_a_node;
use crate::merge::{aggregate, cmp_rows, finish_buffered, having, Class, Cond, Grouping, Row};
use crate::merge::{InMemory as Steps, SortKey};

fn merge_error(e: crate::merge::MergeError) -> NodeError {
    not_a_node(MyError::unsupported(format!("shardproxy: {}", e.0)))
}

/// Groups folded as rows sorted by the group keys stream past.
pub struct Streamed<I> {
    pub(super) input: I,
    grouping: Grouping,
    having: Option<Cond>,
    /// The group keys, to tell where a group ends.
    keys: Vec<SortKey>,
    /// The rows of the group being read.
    group: Vec<Row>,
    done: bool,
    cols: Arc<[Column]>,
    classes: Vec<Class>,
    binary: bool,
    cap: usize,
}

impl<I: Input> Streamed<I> {
    pub fn new(input: I, grouping: Grouping, having: Option<Cond>, cx: &Ctx, cap: usize) -> Self {
        let keys = grouping
            .keys
            .iter()
            .map(|&i| SortKey::ascending(i))
            .collect();
        Streamed {
            input,
            grouping,
            having,
            keys,
            group: Vec::new(),
            done: false,
            cols: cx.cols.clone(),
            classes: cx.classes.clone(),
            binary: cx.binary,
            cap,
        }
    }

    /// The next group that passes HAVING, once the row after it (or the end) is read.
    pub async fn next(&mut self) -> Result<Option<Row>, NodeError> {
        if self.done {
            return Ok(None);
        }
        loop {
            let Some(row) = self.input.next().await? else {
                self.done = true;
                return self.finish();
            };
            let same = self.group.first().is_some_and(|g| {
                cmp_rows(g, &row, &self.keys, &self.classes) == std::cmp::Ordering::Equal
            });
            if same || self.group.is_empty() {
                self.group.push(row);
                continue;
            }
            let done = self.finish()?;
            self.group.push(row);
            if done.is_some() {
                return Ok(done);
            }
        }
    }

    /// The group read so far merged into one row, unless HAVING drops it.
    fn finish(&mut self) -> Result<Option<Row>, NodeError> {
        if self.group.is_empty() {
            return Ok(None);
        }
        let merged = aggregate(
            std::mem::take(&mut self.group),
            &self.grouping,
            &self.cols,
            self.binary,
            self.cap,
        )
        .map_err(merge_error)?;
        Ok(merged.into_iter().next().filter(|r| {
            self.having
                .as_ref()
                .is_none_or(|h| having(h, r, &self.classes))
        }))
    }
}

/// Every input row in memory: grouped, HAVING, DISTINCT, sorted; then given out in order.
pub struct InMemory<I> {
    pub(super) input: I,
    steps: Steps,
    visible: usize,
    cols: Arc<[Column]>,
    binary: bool,
    cap: usize,
    out: Option<std::vec::IntoIter<Row>>,
}

impl<I: Input> InMemory<I> {
    pub fn new(input: I, steps: Steps, cx: &Ctx, cap: usize) -> Self {
        InMemory {
            input,
            steps,
            visible: cx.visible,
            cols: cx.cols.clone(),
            binary: cx.binary,
            cap,
            out: None,
        }
    }

    /// Reads the whole input and merges it (once).
    pub async fn prepare(&mut self) -> Result<(), NodeError> {
        if self.out.is_some() {
            return Ok(());
        }
        let mut rows = Vec::new();
        let mut bytes = 0usize;
        while let Some(row) = self.input.next().await? {
            bytes += crate::exec::held::row_bytes(&row);
            if bytes > crate::exec::held::HELD_BYTES {
                return Err(not_a_node(crate::exec::held::too_many_bytes(
                    "this merge must read every row before it answers, and would hold",
                )));
            }
            rows.push(row);
        }
        let merged = finish_buffered(
            rows,
            &self.steps,
            self.visible,
            &self.cols,
            self.binary,
            self.cap,
        )
        .map_err(merge_error)?;
        self.out = Some(merged.into_iter());
        Ok(())
    }

    pub async fn next(&mut self) -> Result<Option<Row>, NodeError> {
        self.prepare().await?;
        Ok(self.out.as_mut().and_then(Iterator::next))
    }
}

#[cfg(test)]
mod tests {
    use crate::exec::door::Access;
    use crate::exec::fake::{Canned, FakeDoor, RecordSink};
    use crate::exec::merge::run;
    use crate::merge::Aggregate;
    use crate::plan::tests::merge_plan_of;
    use crate::plan::Plan;
    use mysql_common::constants::ColumnType;

    const INT: ColumnType = ColumnType::MYSQL_TYPE_LONGLONG;

    /// The aggregate node of a merge tree.
    fn agg(p: &Plan) -> Option<&Aggregate> {
        match p {
            Plan::Aggregate { agg, .. } => Some(agg),
            other => other.input().and_then(agg),
        }
    }

    #[tokio::test]
    async fn counts_and_sums_of_every_node_add_up() {
        let plan = merge_plan_of("SELECT COUNT(*), SUM(v), MAX(v) FROM t", 2);
        assert!(
            matches!(agg(&plan), Some(Aggregate::InMemory(_))),
            "{plan:?}"
        );
        let mut door = FakeDoor::new(2);
        let cols = [
            ("c", INT),
            ("s", ColumnType::MYSQL_TYPE_NEWDECIMAL),
            ("m", INT),
        ];
        door.answer(0, "SELECT", Canned::typed(&cols, &[&["3", "10", "7"]]));
        door.answer(1, "SELECT", Canned::typed(&cols, &[&["2", "5", "9"]]));
        let mut sink = RecordSink::text();
        run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["5,15,9"]);
    }

    #[tokio::test]
    async fn sorted_groups_stream_and_having_runs_after_the_merge() {
        let plan = merge_plan_of(
            "SELECT k, COUNT(*) FROM t GROUP BY k HAVING COUNT(*) > 2 ORDER BY k",
            2,
        );
        assert!(
            matches!(agg(&plan), Some(Aggregate::Streamed { .. })),
            "{plan:?}"
        );
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
        run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["1,3", "4,6"]);
    }

    #[tokio::test]
    async fn a_node_that_dies_while_groups_stream_fails_the_statement() {
        let plan = merge_plan_of("SELECT k, COUNT(*) FROM t GROUP BY k", 2);
        assert!(
            matches!(agg(&plan), Some(Aggregate::Streamed { .. })),
            "{plan:?}"
        );
        let mut door = FakeDoor::new(2);
        let rows: &[&[&str]] = &[&["1", "1"], &["2", "1"], &["3", "1"]];
        door.answer(0, "SELECT", Canned::typed(&[("k", INT), ("c", INT)], rows));
        door.answer(
            1,
            "SELECT",
            Canned::typed(&[("k", INT), ("c", INT)], rows).failing_after(2),
        );
        let mut sink = RecordSink::text();
        let e = run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap_err();
        // The node's error, after the groups merged before it died; never an end of
        // result that would pass the groups written for all of them.
        assert_eq!((e.node, e.broke), (1, true));
        assert_eq!(sink.lines(), vec!["1,2"]);
        assert!(!sink.ended(), "{:?}", sink.events);
    }

    #[tokio::test]
    async fn streamed_groups_stop_reading_once_the_page_is_full() {
        let plan = merge_plan_of("SELECT k, COUNT(*) FROM t GROUP BY k LIMIT 1", 2);
        let mut door = FakeDoor::new(2);
        let cols = [("k", INT), ("c", INT)];
        door.answer(
            0,
            "SELECT",
            Canned::typed(&cols, &[&["1", "2"], &["2", "1"], &["3", "1"]]),
        );
        door.answer(
            1,
            "SELECT",
            Canned::typed(&cols, &[&["1", "1"], &["2", "7"], &["3", "1"]]),
        );
        let mut sink = RecordSink::text();
        // The first group ends at the first row of group 2: 5 rows read by then (the two
        // heads and the three that replaced the rows taken), the sixth never is, so a cap of
        // 5 rows is not reached.
        run(&mut door, &mut sink, &plan, 5, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["1,3"]);
    }

    #[tokio::test]
    async fn unsorted_groups_are_held_and_capped() {
        let plan = merge_plan_of(
            "SELECT k, COUNT(*) FROM t GROUP BY k ORDER BY COUNT(*) DESC",
            2,
        );
        assert!(
            matches!(agg(&plan), Some(Aggregate::InMemory(_))),
            "{plan:?}"
        );
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
        run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["2,6", "1,2"]);
        let mut sink = RecordSink::text();
        let e = run(&mut door, &mut sink, &plan, 2, Access::Read)
            .await
            .unwrap_err();
        assert_eq!(e.error.code, 1235);
        assert!(
            e.error.message.contains("max_rows_per_statement"),
            "{}",
            e.error.message
        );
        assert!(
            sink.events.is_empty(),
            "an in-memory merge that fails writes nothing: {:?}",
            sink.events
        );
    }

    #[tokio::test]
    async fn distinct_keeps_one_of_equal_rows_then_sorts() {
        let plan = merge_plan_of("SELECT DISTINCT name FROM t ORDER BY name DESC", 2);
        let Some(Aggregate::InMemory(m)) = agg(&plan) else {
            panic!("{plan:?}")
        };
        assert!(m.distinct && m.grouping.is_none(), "{m:?}");
        let mut door = FakeDoor::new(2);
        door.answer(0, "SELECT", Canned::rows(&["name"], &[&["a"], &["b"]]));
        door.answer(1, "SELECT", Canned::rows(&["name"], &[&["b"], &["c"]]));
        let mut sink = RecordSink::text();
        run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["c", "b", "a"]);
    }
}
