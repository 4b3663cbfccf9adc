//! Rows: the stream every merge primitive pulls its input from.
//!
//! A merge tree of the plan (Project -> Limit -> Aggregate -> MergeSort -> a leaf reading the
//! nodes, see [`crate::plan::Plan`]) is built bottom-up into nested streams: the leaf's
//! node results are [`Parts`] (appended node after node, every row read counted against the
//! statement's cap), and each merge node owns the stream of its input and pulls rows from it
//! with `next()`. A new merge step is a variant here, a struct with an async `next` in a file
//! of its own, and its case in [`build::build`]. `Rows` is a recursive type: the enum of the streams,
//! each of which reads a `Rows`; so this file and the streams' files name each other (the
//! one circle of files this folder has, README "Layout").

use std::sync::Arc;

use futures::future::BoxFuture;
use mysql_common::packets::Column;

pub mod aggregate;
pub mod build;
pub mod limit;
pub mod merge_sort;
pub mod project;

use self::aggregate::{InMemory, Streamed};
use self::limit::Limit;
use self::merge_sort::MergeSort;
use self::project::Project;
use crate::error::MyError;
use crate::exec::door::{NodeError, NodeResult};
use crate::exec::scatter::not_a_node;
use crate::merge::{Class, Row};
use crate::plan::Plan;

/// A stream of rows (see the module documentation).
pub enum Rows<R> {
    /// The leaf: the node results, appended node after node.
    Parts(Parts<R>),
    MergeSort(MergeSort<R>),
    Streamed(Box<Streamed<R>>),
    InMemory(Box<InMemory<R>>),
    Limit(Box<Limit<R>>),
    Project(Box<Project<R>>),
}

impl<R: NodeResult> Rows<R> {
    /// The next row; `None` once the stream ended. (Boxed: the streams nest. Named as the
    /// other streams' async `next`, which clippy does not mistake for `Iterator::next`.)
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> BoxFuture<'_, Result<Option<Row>, NodeError>> {
        Box::pin(async move {
            match self {
                Rows::Parts(p) => p.next().await,
                Rows::MergeSort(m) => m.next().await,
                Rows::Streamed(s) => s.next().await,
                Rows::InMemory(m) => m.next().await,
                Rows::Limit(l) => l.next().await,
                Rows::Project(p) => p.next().await,
            }
        })
    }

    /// What runs before the client's columns are written: an in-memory merge reads and
    /// merges its whole input here, so a merge that fails writes nothing.
    pub fn prepare(&mut self) -> BoxFuture<'_, Result<(), NodeError>> {
        Box::pin(async move {
            match self {
                Rows::Parts(_) | Rows::MergeSort(_) => Ok(()),
                Rows::Streamed(s) => s.input.prepare().await,
                Rows::InMemory(m) => m.prepare().await,
                Rows::Limit(l) => l.input.prepare().await,
                Rows::Project(p) => p.input.prepare().await,
            }
        })
    }

    /// The node results at the leaf, once the stream is done with them.
    pub fn into_parts(self) -> Parts<R> {
        match self {
            Rows::Parts(p) => p,
            Rows::MergeSort(m) => m.into_parts(),
            Rows::Streamed(s) => s.input.into_parts(),
            Rows::InMemory(m) => m.input.into_parts(),
            Rows::Limit(l) => l.input.into_parts(),
            Rows::Project(p) => p.input.into_parts(),
        }
    }
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
