//! `REBALANCE [TABLE t | ALL] DRY RUN` and `DRAIN NODE n DRY RUN`: the plan of slot moves
//! that brings every node of each group of tables sharded alike to its fair share by weight
//! (`crate::routing::rebalance`), or that moves every slot off one node (and no other
//! node's), printed as the `MIGRATE SLOTS` statements that carry it out, with the rows each
//! would copy. Directory tenants on a drained node are not in the plan yet.
//!
//! Only the plan is built: the queue that runs it move after move (and resumes it in another
//! proxy) is not, so without `DRY RUN` these statements are refused with the reason, and ops
//! run the printed statements one at a time.

use std::collections::HashMap;

use super::words::{headers, unsupported, Answer};
use crate::backend::MyError;
use crate::config::{TableRule, Topology};
use crate::routing::rebalance::{self, PlannedMove};
use crate::routing::slot::{SlotMap, SLOTS};
use crate::shared::Shared;

/// Why a plan is not run yet.
const NOT_RUN: &str = "running a rebalance plan as a queue of moves is not built yet: add DRY RUN to see the plan, then run its MIGRATE statements one at a time (SHOW MIGRATIONS)";

/// The hash_slot tables in groups sharded alike (one slot map each), each group by name,
/// the group's first name first. Groups with slots moving are left out, with their names.
fn groups(t: &Topology) -> (Vec<(Vec<String>, &SlotMap)>, Vec<String>) {
    let mut names: Vec<&String> = t.tables.keys().collect();
    names.sort();
    let mut out: Vec<(Vec<String>, &SlotMap)> = Vec::new();
    let mut moving = Vec::new();
    for name in names {
        let Some(TableRule::HashSlot { map, .. }) = t.table(name) else {
            continue;
        };
        if !map.moves().is_empty() {
            moving.push(name.clone());
            continue;
        }
        match out.iter_mut().find(|(_, m)| m.same_reads(map)) {
            Some((g, _)) => g.push(name.clone()),
            None => out.push((vec![name.clone()], map)),
        }
    }
    (out, moving)
}

/// The nodes' weights: a retired node weighs nothing.
fn weights(t: &Topology) -> Vec<u32> {
    t.nodes
        .iter()
        .map(|n| if n.retired { 0 } else { n.weight })
        .collect()
}

/// The rows of `table` on `node`, from the node's statistics (InnoDB's estimate).
async fn rows_on(shared: &Shared, node: usize, table: &str) -> Option<u64> {
    let mut c = shared.backends.connect(node).await.ok()?;
    let sql = format!(
        "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = {}",
        crate::sql::write::text_literal(table)
    );
    c.query_text(&sql).await.ok()??.parse().ok()
}

/// A group's plan: its tables, each slot's node now, and the moves.
type GroupPlan = (Vec<String>, Vec<usize>, Vec<PlannedMove>);

/// Each group's plan by `plan`, from the node of each of its slots.
fn plan_groups(
    groups: Vec<(Vec<String>, &SlotMap)>,
    plan: impl Fn(&[usize]) -> Vec<PlannedMove>,
) -> Vec<GroupPlan> {
    groups
        .into_iter()
        .map(|(tables, map)| {
            let owner: Vec<usize> = (0..SLOTS as u16).map(|s| map.owner_of_slot(s)).collect();
            let moves = plan(&owner);
            (tables, owner, moves)
        })
        .collect()
}

/// The plan's rows: one per move, as the statement that carries it out.
async fn answer(
    shared: &Shared,
    t: &Topology,
    plans: Vec<GroupPlan>,
    moving: Vec<String>,
) -> Answer {
    let mut rows = Vec::new();
    let mut step = 0;
    // Each table's rows on each node, asked of the node once.
    let mut stats: HashMap<(usize, String), Option<u64>> = HashMap::new();
    for (tables, owner, plan) in plans {
        for m in plan {
            step += 1;
            // Rows spread over a node's slots as the hash spreads keys: evenly.
            let held = owner.iter().filter(|o| **o == m.from).count().max(1) as u64;
            let mut rows_est: Option<u64> = Some(0);
            for table in &tables {
                let key = (m.from, table.clone());
                let on_node = match stats.get(&key) {
                    Some(r) => *r,
                    None => {
                        let r = rows_on(shared, m.from, table).await;
                        stats.insert(key, r);
                        r
                    }
                };
                rows_est = match (rows_est, on_node) {
                    (Some(sum), Some(r)) => Some(sum + r * m.slots() as u64 / held),
                    _ => None,
                };
            }
            rows.push(vec![
                step.to_string(),
                format!(
                    "MIGRATE SLOTS {}-{} OF {} TO {}",
                    m.first,
                    m.last,
                    tables[0],
                    t.node_name(m.to)
                ),
                tables.join(","),
                t.node_name(m.from).to_string(),
                t.node_name(m.to).to_string(),
                m.slots().to_string(),
                rows_est
                    .map(|r| r.to_string())
                    .unwrap_or_else(|| "?".into()),
            ]);
        }
    }
    for name in moving {
        rows.push(vec![
            "-".into(),
            format!("-- `{name}` has slots moving: planned once that move is done"),
            name,
            String::new(),
            String::new(),
            "0".into(),
            "0".into(),
        ]);
    }
    Answer::Rows {
        columns: headers(&[
            "step",
            "statement",
            "tables",
            "from",
            "to",
            "slots",
            "est_rows",
        ]),
        rows,
    }
}

/// `REBALANCE [TABLE t | ALL] [DRY RUN]` (`words` upper-cased).
pub async fn rebalance(shared: &Shared, t: &Topology, words: &[String]) -> Result<Answer, MyError> {
    let dry = dry_run(words);
    let only = match words.get(1).map(String::as_str) {
        Some("TABLE") => Some(
            words
                .get(2)
                .ok_or_else(|| unsupported("usage: REBALANCE [TABLE t | ALL] [DRY RUN]"))?
                .to_ascii_lowercase(),
        ),
        _ => None,
    };
    if let Some(table) = &only {
        if !matches!(t.table(table), Some(TableRule::HashSlot { .. })) {
            return Err(unsupported(format!("`{table}` is not a hash_slot table")));
        }
    }
    if !dry {
        return Err(unsupported(NOT_RUN));
    }
    let w = weights(t);
    let (groups, moving) = groups(t);
    let groups = groups
        .into_iter()
        .filter(|(g, _)| only.as_ref().is_none_or(|x| g.contains(x)))
        .collect();
    let plans = plan_groups(groups, |owner| rebalance::plan(owner, &w));
    let moving = moving
        .into_iter()
        .filter(|x| only.as_ref().is_none_or(|o| o == x))
        .collect();
    Ok(answer(shared, t, plans, moving).await)
}

/// `DRAIN NODE n [DRY RUN]` (`words` upper-cased, `name` as written).
pub async fn drain(
    shared: &Shared,
    t: &Topology,
    words: &[String],
    name: &str,
) -> Result<Answer, MyError> {
    let Some(node) = t.node_index(name).filter(|i| !t.nodes[*i].retired) else {
        return Err(unsupported(format!("unknown node `{name}`")));
    };
    if !dry_run(words) {
        return Err(unsupported(NOT_RUN));
    }
    let w = weights(t);
    if (0..w.len()).all(|i| i == node || w[i] == 0) {
        return Err(unsupported(format!(
            "`{name}` is the only node with a weight: its slots have nowhere to go"
        )));
    }
    let (groups, moving) = groups(t);
    let plans = plan_groups(groups, |owner| rebalance::drain(owner, &w, node));
    Ok(answer(shared, t, plans, moving).await)
}

fn dry_run(words: &[String]) -> bool {
    words.windows(2).any(|p| p[0] == "DRY" && p[1] == "RUN")
}
