//! A merge tree run: the leaf's statements started on their nodes (a Scatter's targets, or a
//! tier read's or page's, worked out first), the streams of the merge nodes above it built
//! over their results ([`super::rows`]), and the top stream's rows written to the client.
//! Whatever ends the merge, every node result is finished and its warnings summed.

use mysql_common::constants::StatusFlags;
use mysql_common::packets::Column;

use super::door::{client_gone, Access, Door, NodeError, NodeResult, Run, Sink, Stmt};
use super::rows::build::{build, check};
use super::rows::input::{Ctx, Parts};
use super::rows::Rows;
use super::scatter::{not_a_node, started};
use super::{key_page, tier_page, tier_read};
use crate::error::MyError;
use crate::plan::{Plan, TierMode};

/// Runs the merge tree `plan`; `cap`: the most rows the statement may read from the nodes.
pub async fn run<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    plan: &Plan,
    cap: u64,
    access: Access,
) -> Result<(), NodeError> {
    if let Err(what) = check(plan) {
        return Err(not_a_node(MyError::internal(format!(
            "shardproxy: a plan with {what} reached execution"
        ))));
    }
    let owned: Vec<(usize, String)>;
    let mut before = 0;
    let stmts: Vec<(usize, Stmt<'_>)> = match plan.source() {
        Plan::Scatter { targets, .. } => targets
            .iter()
            .map(|t| (t.node, Stmt::new(&t.sql, &t.params)))
            .collect(),
        Plan::Tier(t) => {
            owned = match &t.mode {
                TierMode::Read { node_sql } => {
                    door.count_tier("read");
                    tier_read::statements(door, t, node_sql, cap).await?
                }
                _ => {
                    door.count_tier("page");
                    let (sqls, b) = tier_page::statements(door, t, cap).await?;
                    before = b;
                    sqls
                }
            };
            owned.iter().map(|(n, s)| (*n, Stmt::new(s, &[]))).collect()
        }
        Plan::KeyPage(k) => {
            let (sqls, b) = key_page::statements(door, k).await?;
            before = b;
            owned = sqls;
            owned.iter().map(|(n, s)| (*n, Stmt::new(s, &[]))).collect()
        }
        _ => Vec::new(),
    };
    merged(door, sink, plan, &stmts, before, cap, access).await
}

/// Starts `stmts` and writes the rows of `plan`'s merge over their results.
async fn merged<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    plan: &Plan,
    stmts: &[(usize, Stmt<'_>)],
    before: u64,
    cap: u64,
    access: Access,
) -> Result<(), NodeError> {
    let binary = sink.binary();
    let run = Run { access, binary };
    let status = door.status();
    let first_node = stmts.first().map(|(n, _)| *n);
    // What the merge compares as strings, it compares in the columns' own collations.
    let collations = match stmts.first() {
        Some((node, stmt)) if compares(plan) => door.collations(*node, stmt.sql).await,
        _ => None,
    };
    let results = door.start_all(stmts, run).await?;
    let parts = Parts::new(started(results).await?, cap);
    let (outcome, parts) = match parts.columns() {
        None => (
            Err(not_a_node(MyError::unsupported(
                "shardproxy: the nodes returned no result set to merge",
            ))),
            parts,
        ),
        Some(cols) => {
            let compared = match &collations {
                Some(ids) => crate::merge::with_collations(&cols, ids),
                None => cols.clone(),
            };
            let cx = Ctx::new(plan, compared, binary, cap, before);
            let mut rows = build(plan, parts, &cx);
            let outcome = write(&mut rows, sink, &cols[..], cx.visible, status).await;
            (outcome, rows.into_parts())
        }
    };
    let (ress, read) = parts.into_results();
    let mut warnings = 0u16;
    let mut failed = None;
    for res in ress {
        warnings = warnings.saturating_add(res.warnings());
        if let Err(e) = res.finish().await {
            failed.get_or_insert(e);
        }
    }
    door.count_merged(read);
    if let Some(n) = first_node {
        door.ran_on(n, false);
    }
    outcome?;
    if let Some(e) = failed {
        return Err(e);
    }
    sink.end(status, warnings, false);
    Ok(())
}

/// Whether a merge node of the tree compares values (sorts, groups, MIN / MAX, DISTINCT).
fn compares(plan: &Plan) -> bool {
    let mut p = Some(plan);
    while let Some(node) = p {
        if matches!(node, Plan::MergeSort { .. } | Plan::Aggregate { .. }) {
            return true;
        }
        p = node.input();
    }
    false
}

/// The client's columns, then every row of the top stream.
async fn write<R: NodeResult, K: Sink>(
    rows: &mut Rows<R>,
    sink: &mut K,
    cols: &[Column],
    visible: usize,
    status: StatusFlags,
) -> Result<(), NodeError> {
    rows.prepare().await?;
    sink.columns(&cols[..visible.min(cols.len())], status);
    while let Some(row) = rows.next().await? {
        sink.row(&row, cols);
        sink.flush_some().await.map_err(client_gone)?;
    }
    Ok(())
}
