//! Tier reads: a time_tier table read over several tiers. Each tier's SQL gets its serving
//! range; in an overlap window the older tier also leaves out the keys the newer tier holds
//! there (read first, [`exclusions`]), so the tiers answer disjoint rows and every merge
//! counts each row once whatever the ETL's state.

use mysql_common::value::Value;

use super::door::{Access, Door, NodeError, Sink, Stmt};
use super::scatter::not_a_node;
use crate::error::MyError;
use crate::merge::MergeSpec;
use crate::plan::tier::{fill, TierPlan};
use crate::plan::OkMerge;

/// Each window's exclusion for its older tier: the newer tier's keys there.
pub async fn exclusions<D: Door>(
    door: &mut D,
    t: &TierPlan,
    cap: u64,
) -> Result<Vec<Option<String>>, NodeError> {
    let mut out = Vec::with_capacity(t.windows.len());
    for w in &t.windows {
        let rows: Vec<Vec<Value>> = door.fetch(w.node, &t.window_sql(w)).await?;
        if rows.len() as u64 > cap {
            return Err(not_a_node(MyError::unsupported(format!(
                "shardproxy: the overlap window [{}, {}) of `{}` holds {} rows on its newer tier, more than max_rows_per_statement; narrow the query's date range",
                w.lo,
                w.hi,
                t.table,
                rows.len()
            ))));
        }
        out.push(t.exclusion(w, &rows));
    }
    Ok(out)
}

/// Every tier at once, merged as `merge` says (appended when `None`).
pub async fn read<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    t: &TierPlan,
    node_sql: &str,
    merge: Option<&MergeSpec>,
    cap: u64,
    access: Access,
) -> Result<(), NodeError> {
    let excl = exclusions(door, t, cap).await?;
    let sqls: Vec<(usize, String)> = (0..t.parts.len())
        .map(|i| (t.parts[i].node, fill(node_sql, &t.part_pred(i, &excl))))
        .collect();
    let stmts: Vec<(usize, Stmt<'_>)> = sqls.iter().map(|(n, s)| (*n, Stmt::new(s, &[]))).collect();
    match merge {
        None => super::scatter::append(door, sink, &stmts, OkMerge::Sum, access)
            .await
            .map(|_| ()),
        Some(spec) => super::merge::merged(door, sink, &stmts, spec, cap, access).await,
    }
}
