//! Rows: the stream every merge primitive pulls its input from.
//!
//! A merge tree of the plan (Project -> Limit -> Aggregate -> MergeSort -> a leaf reading the
//! nodes, see [`crate::plan::Plan`]) is built bottom-up into nested streams: the leaf's
//! node results are [`Parts`] (appended node after node, every row read counted against the
//! statement's cap), and each merge node owns the stream of its input and pulls rows from it
//! with `next()`. A new merge step is a variant here, a struct with an async `next` over any
//! [`input::Input`] in a file of its own, and its case in [`build::build`]. `Rows` is a
//! recursive type (a stream's input is a `Rows`), but only here: the streams are generic over
//! their input, so their files name [`input`] alone and this one names them.

use futures::future::BoxFuture;

pub mod aggregate;
pub mod build;
pub mod input;
pub mod limit;
pub mod merge_sort;
pub mod project;

use self::aggregate::{InMemory, Streamed};
use self::input::{Input, Parts};
use self::limit::Limit;
use self::merge_sort::MergeSort;
use self::project::Project;
use crate::exec::door::{NodeError, NodeResult};
use crate::merge::Row;

/// A stream of rows (see the module documentation).
pub enum Rows<R> {
    /// The leaf: the node results, appended node after node.
    Parts(Parts<R>),
    MergeSort(MergeSort<R>),
    Streamed(Box<Streamed<Rows<R>>>),
    InMemory(Box<InMemory<Rows<R>>>),
    Limit(Box<Limit<Rows<R>>>),
    Project(Box<Project<Rows<R>>>),
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

impl<R: NodeResult> Input for Rows<R> {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<Row>, NodeError>> {
        Rows::next(self)
    }
}
