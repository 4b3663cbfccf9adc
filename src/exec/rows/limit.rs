//! Limit: OFFSET and LIMIT over the rows of its input. The nodes were asked for `offset +
//! limit` rows each; the page is cut here, and once it is full no more rows are read.

use super::input::Input;
use crate::exec::door::NodeError;
use crate::merge::Row;

pub struct Limit<I> {
    pub(super) input: I,
    skip: u64,
    left: u64,
}

impl<I: Input> Limit<I> {
    pub fn new(input: I, offset: u64, limit: Option<u64>) -> Self {
        Limit {
            input,
            skip: offset,
            left: limit.unwrap_or(u64::MAX),
        }
    }

    /// The next row of the page; `None` once it is full (nothing more is read) or the input
    /// ended.
    pub async fn next(&mut self) -> Result<Option<Row>, NodeError> {
        while self.left > 0 {
            let Some(row) = self.input.next().await? else {
                return Ok(None);
            };
            if self.skip > 0 {
                self.skip -= 1;
                continue;
            }
            self.left -= 1;
            return Ok(Some(row));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use crate::exec::door::Access;
    use crate::exec::fake::{Canned, FakeDoor, RecordSink};
    use crate::exec::merge::run;
    use crate::plan::tests::{merge_plan_of, scatter_of};
    use crate::plan::Plan;

    #[tokio::test]
    async fn skips_then_takes_and_reads_no_further() {
        let mut door = FakeDoor::new(2);
        door.answer(0, "SELECT", Canned::rows(&["k"], &[&["0"], &["1"], &["2"]]));
        // Node 1 breaks after its first row: the page is full before that is read.
        door.answer(
            1,
            "SELECT",
            Canned::rows(&["k"], &[&["3"], &["4"], &["5"]]).failing_after(1),
        );
        let plan = Plan::Limit {
            offset: 2,
            limit: Some(2),
            input: Box::new(scatter_of("SELECT k FROM t LIMIT 4", 2)),
        };
        let mut sink = RecordSink::text();
        run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["2", "3"]);
        // LIMIT 0 reads no row at all.
        let plan = Plan::Limit {
            offset: 0,
            limit: Some(0),
            input: Box::new(scatter_of("SELECT k FROM t", 2)),
        };
        let mut sink = RecordSink::text();
        run(&mut door, &mut sink, &plan, 0, Access::Read)
            .await
            .unwrap();
        assert!(sink.lines().is_empty());
    }

    #[tokio::test]
    async fn a_page_of_an_ordered_merge_with_its_helper_column_cut() {
        // ORDER BY a column the client did not ask for: the nodes send it as a helper column,
        // the Project on top cuts it.
        let plan = merge_plan_of("SELECT k FROM t ORDER BY v DESC LIMIT 1, 2", 2);
        assert!(matches!(&plan, Plan::Project { hidden: 1, .. }), "{plan:?}");
        let mut door = FakeDoor::new(2);
        door.answer(
            0,
            "SELECT",
            Canned::rows(&["k", "v"], &[&["a", "9"], &["b", "5"]]),
        );
        door.answer(
            1,
            "SELECT",
            Canned::rows(&["k", "v"], &[&["c", "7"], &["d", "1"]]),
        );
        let mut sink = RecordSink::text();
        run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.rows().len(), 2);
        assert_eq!(sink.lines(), vec!["c", "b"]);
    }
}
