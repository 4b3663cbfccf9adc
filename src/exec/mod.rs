//! Execution: a plan run through the door to the nodes, its answer written to a sink.
//!
//! One primitive a file: [`route`] (one node, any copy, the sticky node), [`scatter`] (many
//! nodes, rows appended, OKs combined), the merge nodes of a plan tree ([`rows::project`],
//! [`rows::limit`], [`rows::aggregate`], [`rows::merge_sort`]: streams over [`rows`], each pulling rows from
//! its input, run by [`merge`] over a leaf that reads the nodes), the time-tier paths
//! ([`tier_read`], [`tier_page`], [`poll`], [`tier_write`]), [`lookup`] (directory lookup
//! tables), [`session_op`] (BEGIN, SET, USE, ...) and [`txn`] (a transaction's branches on
//! the nodes it touches, two-phase commit). Every primitive reaches the nodes only through
//! [`door::Door`] and writes only to [`door::Sink`]; [`fake`] drives their unit tests.
//!
//! A new primitive goes in a file of its own here, takes `(door, sink, ...)`, and gets its
//! case in [`run`]; a new merge step is a stream in a file of its own and a case in
//! [`rows::build::build`].

pub mod bind;
pub mod collect;
pub mod columns;
pub mod door;
pub mod dual_write;
#[cfg(test)]
pub mod fake;
pub mod gather;
pub mod held;
pub mod inline;
#[cfg(test)]
mod inline_tests;
pub mod key_page;
pub mod key_update;
pub mod lookup;
pub mod merge;
pub mod poll;
pub mod route;
pub mod rows;
pub mod scatter;
pub mod sequence;
pub mod session_op;
pub mod spread;
pub mod tier_page;
pub mod tier_read;
pub mod tier_write;
pub mod txn;
pub mod weights;

use door::{Access, Door, NodeError, Sink, Stmt};

use crate::config::Topology;
use crate::error::MyError;
use crate::plan::{Plan, TierMode, TierPlan};

/// Runs `plan` (planned against `topo`, the statement's snapshot). `access`: the statement
/// only reads.
pub async fn run<D: Door, K: Sink>(
    plan: &Plan,
    topo: &Topology,
    access: Access,
    door: &mut D,
    sink: &mut K,
) -> Result<(), MyError> {
    let cap = topo.max_rows_per_statement;
    let r: Result<(), NodeError> = match plan {
        Plan::Session(op) => return session_op::apply(door, sink, op).await,
        Plan::Refuse { code, message } => return Err(MyError::new(*code, message.clone())),
        Plan::Unroutable { node, sql, reason } => {
            return route::unroutable(door, *node, sql, reason).await
        }
        Plan::NeedLookup(keys) => {
            return Err(MyError::internal(format!(
                "shardproxy: directory lookup entries for {} key(s) could not be resolved",
                keys.len()
            )))
        }
        Plan::NeedIds { table, .. } => {
            return Err(MyError::internal(format!(
                "shardproxy: no ids could be reserved from the sequence of `{table}`"
            )))
        }
        Plan::NeedColumns { table, .. } => {
            return Err(MyError::internal(format!(
                "shardproxy: the column order of `{table}` could not be read from its nodes"
            )))
        }
        Plan::NeedRows { table } => {
            return Err(MyError::internal(format!(
                "shardproxy: the row estimate of `{table}` could not be read from its nodes"
            )))
        }
        Plan::Sticky { sql, params } => {
            return route::sticky(
                door,
                sink,
                sql,
                params,
                topo.default_node,
                topo.all_nodes(),
                access,
            )
            .await
        }
        Plan::AnyCopy { nodes, sql, params } => {
            return route::any_copy(door, sink, nodes.clone(), sql, params, access).await
        }
        Plan::Route(t) => {
            route::single(door, sink, t.node, Stmt::new(&t.sql, &t.params), access).await
        }
        Plan::Scatter { targets, ok } => {
            let stmts: Vec<(usize, Stmt<'_>)> = targets
                .iter()
                .map(|t| (t.node, Stmt::new(&t.sql, &t.params)))
                .collect();
            scatter::append(door, sink, &stmts, *ok, access)
                .await
                .map(|_| ())
        }
        Plan::ValuesOrder { positions, input } => match input.as_ref() {
            Plan::Scatter { targets, ok } => {
                let stmts: Vec<(usize, Stmt<'_>)> = targets
                    .iter()
                    .map(|t| (t.node, Stmt::new(&t.sql, &t.params)))
                    .collect();
                scatter::append_in_order(door, sink, &stmts, *ok, access, Some(positions))
                    .await
                    .map(|_| ())
            }
            _ => {
                return Err(MyError::internal(
                    "shardproxy: RETURNING rows to put in order over something other than a scatter"
                        .to_string(),
                ))
            }
        },
        Plan::Project { .. }
        | Plan::Limit { .. }
        | Plan::Aggregate { .. }
        | Plan::MergeSort { .. } => merge::run(door, sink, plan, cap, access).await,
        Plan::Tier(t) if matches!(t.mode, TierMode::Page { .. }) => {
            merge::run(door, sink, plan, cap, access).await
        }
        Plan::KeyPage(_) => merge::run(door, sink, plan, cap, access).await,
        Plan::Tier(t) => tier(t, cap, access, door, sink).await,
        Plan::DualWrite(w) => dual_write::run(door, sink, w).await,
        // Counted for the move's freeze by the session; the write itself is the client's.
        Plan::Captured { write, .. } => {
            return Box::pin(run(write, topo, access, door, sink)).await
        }
        Plan::Gather(g) => gather::run(door, sink, g, cap, access).await,
        Plan::Shipped(s) => return shipped(door, sink, s, topo, access).await,
        Plan::Spread(s) => return spread(door, sink, s, topo, access).await,
        // The session plans the read of its rows, then runs it ([`key_update::run`]).
        Plan::KeyUpdate(_) => {
            return Err(MyError::internal(
                "shardproxy: an UPDATE of a shard key reached execution unplanned".to_string(),
            ))
        }
        // The session reads the SELECT and plans the INSERT of its rows.
        Plan::InsertSelect(_) => {
            return Err(MyError::internal(
                "shardproxy: an INSERT ... SELECT reached execution unplanned".to_string(),
            ))
        }
        Plan::Frozen { table, .. } => {
            return Err(MyError::new(
                crate::error::ER_LOCK_WAIT_TIMEOUT,
                format!("shardproxy: the write to `{table}` waited too long for the cutover of its slots' move; try again"),
            ))
        }
        Plan::NeedKey { table, .. } => {
            return Err(MyError::internal(format!(
                "shardproxy: the primary key of `{table}` could not be read from its nodes"
            )))
        }
        Plan::NeedWeights(c) => {
            return Err(MyError::internal(format!(
                "shardproxy: the weights of {c} could not be read"
            )))
        }
        Plan::NeedIndex(probes) => {
            return Err(MyError::internal(format!(
                "shardproxy: the entries of the global index table `{}` could not be read",
                probes.first().map(|p| p.index_table.as_str()).unwrap_or("?")
            )))
        }
        // The session reads the rows it changes and writes the index entries around it.
        Plan::Indexed(w) => {
            return Err(MyError::internal(format!(
                "shardproxy: a write to `{}`, which has global indexes, reached execution unplanned",
                w.table
            )))
        }
    };
    r.map_err(MyError::from)
}

/// A tier plan that is a primitive on its own: a read appended, a poll, a write (a page is
/// the leaf of its merge tree: [`merge::run`]).
async fn tier<D: Door, K: Sink>(
    t: &TierPlan,
    cap: u64,
    access: Access,
    door: &mut D,
    sink: &mut K,
) -> Result<(), NodeError> {
    let mode = match &t.mode {
        TierMode::Read { .. } => "read",
        TierMode::Page { .. } => "page",
        TierMode::PollFirst { .. } => "poll",
        TierMode::Write { .. } => "write",
    };
    door.count_tier(mode);
    match &t.mode {
        TierMode::Read { node_sql } => tier_read::read(door, sink, t, node_sql, cap, access).await,
        TierMode::Page { .. } => Err(scatter::not_a_node(MyError::internal(
            "shardproxy: a tier page outside its merge".to_string(),
        ))),
        TierMode::PollFirst { sql, params } => {
            poll::first(door, sink, t, sql, params, access).await
        }
        TierMode::Write {
            sql,
            params,
            retries,
            retry_ms,
        } => {
            let retry = tier_write::Retry {
                retries: *retries,
                retry_ms: *retry_ms,
            };
            tier_write::write(door, sink, t, sql, params, retry).await
        }
    }
}

/// Runs a plan after copying tables to each of its nodes ([`crate::plan::gather::Shipped`]).
pub async fn shipped<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    s: &crate::plan::gather::Shipped,
    topo: &crate::config::Topology,
    access: Access,
) -> Result<(), MyError> {
    let nodes = s.nodes();
    let made = gather::copy_all(
        door,
        &s.ships,
        &nodes,
        topo.max_rows_per_statement,
        gather::Inline::No,
    )
    .await;
    let r = match made {
        // Its copies are not bound by keys: none travels inside the statement.
        Ok(inlined) if inlined.is_empty() => Box::pin(run(&s.then, topo, access, door, sink)).await,
        Ok(_) => Err(MyError::internal(
            "shardproxy: a copy to every node cannot travel inside the statement",
        )),
        Err(e) => Err(MyError::from(e)),
    };
    gather::drop_copies(door, &s.ships, &nodes, r.is_ok())
        .await
        .map_err(MyError::from)
        .and(r)
}

/// Runs a bound join with its outer rows carried to the inner table's nodes
/// ([`crate::plan::spread::Spread`]), or gathered where they cannot travel so.
pub async fn spread<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    s: &crate::plan::spread::Spread,
    topo: &crate::config::Topology,
    access: Access,
) -> Result<(), MyError> {
    let cap = topo.max_rows_per_statement;
    // A binary-protocol answer comes from a statement the node prepares and keeps by its
    // text: the rows go as a parameter, so that the text does not change with them.
    if let Some(then) = spread::spread_rows(door, s, cap, sink.binary()).await? {
        let before = sink.written();
        match Box::pin(run(&then, topo, access, door, sink)).await {
            Err(e) if e.code == gather::ER_PARSE_ERROR && sink.written() == before => {}
            r => return r,
        }
    }
    gather::run(door, sink, &s.gather, cap, access)
        .await
        .map_err(MyError::from)
}

/// Whether a table is one the proxy keeps for itself in the nodes' databases (a sequence's
/// blocks, XA decisions), not the application's.
pub fn proxy_table(name: &str) -> bool {
    [sequence::TABLE, txn::DECISIONS]
        .iter()
        .any(|t| name.eq_ignore_ascii_case(t))
}
