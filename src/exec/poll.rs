//! Poll: a lookup by a unique poll column of a time_tier table, which has no date to pick a
//! tier by: the tiers are asked newest first, and the first whose answer has rows answers.

use mysql_common::value::Value;

use super::door::{client_gone, Access, Door, NodeError, NodeResult, Run, Sink, Stmt};
use super::route::relay;
use crate::error::MyError;
use crate::plan::tier::TierPlan;

pub async fn first<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    t: &TierPlan,
    sql: &str,
    params: &[Value],
    access: Access,
) -> Result<(), NodeError> {
    let run = Run {
        access,
        binary: sink.binary(),
    };
    for (k, part) in t.parts.iter().enumerate() {
        let node = part.node;
        if k + 1 == t.parts.len() {
            return super::route::single(door, sink, node, Stmt::new(sql, params), access).await;
        }
        let mut res = door.start(node, Stmt::new(sql, params), run).await?;
        let status = res.status();
        let Some(cols) = res.columns() else {
            let generated = relay(res, sink).await?;
            door.ran_on(node, generated != 0);
            return Ok(());
        };
        // The result-set header is written only once a row shows this tier has the answer.
        let Some(first) = res.next().await? else {
            res.finish().await?;
            continue;
        };
        sink.columns(&cols, status);
        sink.row(&first, &cols);
        while let Some(row) = res.next().await? {
            sink.row(&row, &cols);
            sink.flush_some().await.map_err(client_gone)?;
        }
        sink.end(status, res.warnings(), false);
        res.finish().await?;
        door.ran_on(node, false);
        return Ok(());
    }
    Err(super::scatter::not_a_node(MyError::internal(
        "shardproxy: no tier to ask",
    )))
}
