//! What the transaction layer's own tasks (the detector of deadlocks across nodes, XA
//! recovery) need of the running proxy. `crate::shared::Shared` provides it: a trait, so
//! that transactions stay below the state of the whole process that holds them.

use std::sync::Arc;

use crate::config::Topology;
use crate::metrics::Metrics;
use crate::pools::Backends;

use super::branches::Registry;

pub trait Cluster: Send + Sync + 'static {
    /// The node pools.
    fn backends(&self) -> &Backends;
    /// The routing snapshot now.
    fn topology(&self) -> Arc<Topology>;
    fn metrics(&self) -> &Metrics;
    /// Transactions' branch connections, as sessions register them.
    fn deadlocks(&self) -> &Registry;
    /// Has this process made sure the XA decision table exists on `node`?
    fn decision_table_ready(&self, node: usize) -> bool;
}
