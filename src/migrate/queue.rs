//! Runs the rebalance plan's queue (`crate::metadata::rebalance`): the driver calls
//! [`schedule`] between its passes. A running plan starts its queued moves in order, up to
//! its `max_parallel` at once, never two moves on one node (a node is the source or target
//! of one move at a time, so a move's cutover waits only for its own target's dual writes);
//! a move whose node is busy waits while later ones with free nodes may start. A paused plan
//! starts nothing (its moves under way finish). An aborting plan drops its queued moves and
//! aborts its moves under way that can still be aborted (those past their cutover finish).

use std::collections::HashSet;

use mysql_async::Conn;
use tracing::info;

use crate::metadata::migrations::{self as store, ABORTABLE};
use crate::metadata::rebalance::{self as plans, in_flight};

/// One look at the plan not finished; whether one is (the driver keeps driving).
pub async fn schedule(c: &mut Conn) -> mysql_async::Result<bool> {
    let Some(plan) = plans::current(c).await? else {
        return Ok(false);
    };
    let mine = plans::moves(c, plan.id).await?;
    let under_way = mine.iter().filter(|m| in_flight(m)).count();
    let queued: Vec<&store::Migration> = mine.iter().filter(|m| m.step == "queued").collect();
    match plan.state.as_str() {
        "aborting" => {
            for m in &queued {
                store::transition(c, m.id, &["queued"], "dropped").await?;
            }
            for m in mine.iter().filter(|m| in_flight(m)) {
                store::transition(c, m.id, &ABORTABLE, "aborting").await?;
            }
            if under_way == 0 {
                plans::set_state(
                    c,
                    plan.id,
                    &["aborting"],
                    "aborted",
                    Some(&format!("aborted: {} moves dropped", queued.len())),
                )
                .await?;
                info!(plan = plan.id, "rebalance aborted");
            }
        }
        "running" => {
            if queued.is_empty() && under_way == 0 {
                let failed = mine.iter().filter(|m| m.step != "done").count();
                let message = if failed == 0 {
                    format!("{} moves done", mine.len())
                } else {
                    format!(
                        "{} moves done, {failed} not (their slots changed meanwhile): REBALANCE again",
                        mine.len() - failed
                    )
                };
                plans::set_state(c, plan.id, &["running"], "done", Some(&message)).await?;
                info!(plan = plan.id, "rebalance done: {message}");
                return Ok(false);
            }
            // Every move under way holds its nodes, a plan's or an admin's.
            let mut busy: HashSet<&str> = HashSet::new();
            let active = store::active(c).await?;
            for m in &active {
                busy.insert(&m.source);
                busy.insert(&m.target);
            }
            let mut running = under_way;
            for m in queued {
                if running >= plan.max_parallel as usize {
                    break;
                }
                if busy.contains(m.source.as_str()) || busy.contains(m.target.as_str()) {
                    continue;
                }
                if store::transition(c, m.id, &["queued"], "prepare").await? {
                    info!(
                        plan = plan.id,
                        migration = m.id,
                        "rebalance move {} of `{}` from `{}` to `{}` begins",
                        m.what(),
                        m.table,
                        m.source,
                        m.target
                    );
                    busy.insert(&m.source);
                    busy.insert(&m.target);
                    running += 1;
                }
            }
        }
        _ => {}
    }
    Ok(true)
}
