//! Project: the client's columns: the helper columns a merge needed (sort keys, AVG's hidden
//! SUM and COUNT) cut from the end of every row.

use super::door::{NodeError, NodeResult};
use super::rows::Rows;
use crate::merge::Row;

pub struct Project<R> {
    pub(super) input: Rows<R>,
    /// Columns the client sees (the rest are helpers).
    pub(super) visible: usize,
}

impl<R: NodeResult> Project<R> {
    pub async fn next(&mut self) -> Result<Option<Row>, NodeError> {
        Ok(self.input.next().await?.map(|mut row| {
            row.truncate(self.visible);
            row
        }))
    }
}
