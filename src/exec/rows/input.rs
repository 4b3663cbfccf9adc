//! What the merge streams read and share: the leaf's node results ([`Parts`]), the stream
//! below a stream ([`Input`]: in a plan's tree, a `super::Rows`), and what the streams of
//! one merge know of its columns ([`Ctx`]).

use std::sync::Arc;

use futures::future::BoxFuture;
use mysql_common::packets::Column;

use crate::error::MyError;
use crate::exec::door::{NodeError, NodeResult};
use crate::exec::scatter::not_a_node;
use crate::merge::{Class, Row};
use crate::plan::Plan;

/// The stream a merge stream pulls its rows from.
pub trait Input: Send {
    /// The next row; `None` once the stream ended.
    fn next(&mut self) -> BoxFuture<'_, Result<Option<Row>, NodeError>>;
}

/// The node results of a leaf, read as they arrive; every row counts against the cap.
pub struct Parts<R> {
    ress: Vec<R>,
    /// Appending: the result being read (those before it are done).
    at: usize,
    /// Rows read from the nodes so far.
    pub read: u64,
    cap: u64,
}

impl<R: NodeResult> Parts<R> {
    pub fn new(ress: Vec<R>, cap: u64) -> Self {
        Parts {
            ress,
            at: 0,
            read: 0,
            cap,
        }
    }

    /// The first result set's columns (`None`: every node answered with an OK).
    pub fn columns(&self) -> Option<Arc<[Column]>> {
        self.ress.iter().find_map(|r| r.columns())
    }

    pub fn len(&self) -> usize {
        self.ress.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ress.is_empty()
    }

    /// The next row of node result `i`, counted. Not called again on a result once it
    /// returned `None` (that would read its next result set).
    pub async fn next_of(&mut self, i: usize) -> Result<Option<Row>, NodeError> {
        let Some(res) = self.ress.get_mut(i) else {
            return Ok(None);
        };
        match res.next().await? {
            Some(row) => {
                self.read += 1;
                if self.read > self.cap {
                    return Err(not_a_node(MyError::unsupported(format!(
                        "shardproxy: this statement would read more than {} rows from the nodes (max_rows_per_statement); narrow it or page with a key instead of a deep OFFSET",
                        self.cap
                    ))));
                }
                Ok(Some(row))
            }
            None => Ok(None),
        }
    }

    /// The next row, node after node.
    pub async fn next(&mut self) -> Result<Option<Row>, NodeError> {
        while self.at < self.ress.len() {
            if let Some(row) = self.next_of(self.at).await? {
                return Ok(Some(row));
            }
            self.at += 1;
        }
        Ok(None)
    }

    /// The results (to finish) and the rows read from them.
    pub fn into_results(self) -> (Vec<R>, u64) {
        (self.ress, self.read)
    }
}

/// What the streams of one merge share: the nodes' columns and how the client reads them.
pub struct Ctx {
    pub cols: Arc<[Column]>,
    pub classes: Vec<Class>,
    pub binary: bool,
    /// The statement's row cap (max_rows_per_statement).
    pub cap: u64,
    /// The columns the client sees (the rest are helpers, cut by the Project on top).
    pub visible: usize,
    /// Added to the column indexes of sort keys (`SELECT *`: counted from the first helper).
    pub base: usize,
    /// Rows of the answer that come before the leaf's first row (a tier page that skipped
    /// whole segments by predicate): the Limit skips that many fewer.
    pub before: u64,
}

impl Ctx {
    /// For rows of `cols` under `plan`'s merge nodes.
    pub fn new(plan: &Plan, cols: Arc<[Column]>, binary: bool, cap: u64, before: u64) -> Self {
        let (hidden, from_end) = project_of(plan);
        let visible = cols.len().saturating_sub(hidden);
        Ctx {
            classes: crate::merge::classes(&cols),
            cols,
            binary,
            cap,
            visible,
            base: if from_end { visible } else { 0 },
            before,
        }
    }

    pub(crate) fn cap_rows(&self) -> usize {
        usize::try_from(self.cap).unwrap_or(usize::MAX)
    }
}

/// The helper columns a Project in the tree cuts, and whether they count from the end.
fn project_of(plan: &Plan) -> (usize, bool) {
    let mut p = Some(plan);
    while let Some(node) = p {
        if let Plan::Project {
            hidden, from_end, ..
        } = node
        {
            return (*hidden, *from_end);
        }
        p = node.input();
    }
    (0, false)
}
