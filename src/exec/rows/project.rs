//! Project: the client's columns: the helper columns a merge needed (sort keys, AVG's hidden
//! SUM and COUNT) cut from the end of every row.

use super::input::Input;
use crate::exec::door::NodeError;
use crate::merge::Row;

pub struct Project<I> {
    pub(super) input: I,
    /// Columns the client sees (the rest are helpers).
    pub(super) visible: usize,
}

impl<I: Input> Project<I> {
    pub async fn next(&mut self) -> Result<Option<Row>, NodeError> {
        Ok(self.input.next().await?.map(|mut row| {
            row.truncate(self.visible);
            row
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::exec::door::Access;
    use crate::exec::fake::{Canned, FakeDoor, RecordSink};
    use crate::exec::merge::run;
    use crate::plan::tests::merge_plan_of;
    use crate::plan::Plan;

    #[tokio::test]
    async fn select_star_sorts_by_a_helper_counted_from_the_end_and_cuts_it() {
        let plan = merge_plan_of("SELECT * FROM t ORDER BY v DESC", 2);
        assert!(
            matches!(
                &plan,
                Plan::Project {
                    hidden: 1,
                    from_end: true,
                    ..
                }
            ),
            "{plan:?}"
        );
        // `*` expands to two columns on the nodes; the helper (v) is the third.
        let mut door = FakeDoor::new(2);
        let cols = ["id", "v", "__sp_h0"];
        door.answer(
            0,
            "SELECT",
            Canned::rows(&cols, &[&["1", "8", "8"], &["2", "3", "3"]]),
        );
        door.answer(1, "SELECT", Canned::rows(&cols, &[&["3", "5", "5"]]));
        let mut sink = RecordSink::text();
        run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["1,8", "3,5", "2,3"]);
    }
}
