//! Range tables kept in ranges of a workable size, every `[balance] range_check_secs` with a
//! metadata schema and `[balance] mode` not "off":
//! - a range holding more than `range_split_rows` rows (its node's estimate: the optimizer's
//!   index dives, `EXPLAIN`) is split at its middle key (read on its node along the index);
//! - two neighbouring ranges on one node, both cold (not hot, under a quarter of the slot
//!   thresholds in the last windows) and holding fewer than `range_merge_rows` rows together,
//!   are merged, never within `cooldown_secs` of the table's last range change (a split, a
//!   merge, a move's step), so a split is not undone while its parts settle.
//!
//! One action a pass, none while a plan or migration is unfinished, and only on the ranges
//! the metadata holds as this proxy planned from (two proxies never both act). In "suggest"
//! mode the action is logged and shown by `SHOW BALANCE`, not made. A split moves nothing:
//! the load balancer moves a part if it turns hot; a size split gives it parts to move.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use tracing::{info, warn};

use crate::config::hot::BalanceMode;
use crate::config::{TableRule, Topology};
use crate::metadata::ranges;
use crate::plan::moving::{quote, Moving, Which};
use crate::routing::range::RangeMap;
use crate::routing::slot::MoveStep;
use crate::shared::Shared;

/// What upkeep knows of one range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub node: usize,
    /// Its rows, as its node estimates them (`None`: not known).
    pub rows: Option<u64>,
    /// No load to speak of in the last windows.
    pub cold: bool,
}

/// What to do with a table's ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Split range `i` at its middle key.
    Split(usize),
    /// Merge range `i` into the one before it.
    Merge(usize),
}

/// The first range over `split_rows` is split; else, with `merge` allowed, the first two
/// cold neighbours on one node with fewer than `merge_rows` rows together merge.
pub fn choose(facts: &[Facts], split_rows: u64, merge_rows: u64, merge: bool) -> Option<Choice> {
    if let Some(i) = facts
        .iter()
        .position(|f| f.rows.is_some_and(|r| r > split_rows))
    {
        return Some(Choice::Split(i));
    }
    if !merge {
        return None;
    }
    facts
        .windows(2)
        .position(|w| {
            w[0].node == w[1].node
                && w[0].cold
                && w[1].cold
                && matches!((w[0].rows, w[1].rows), (Some(a), Some(b)) if a + b < merge_rows)
        })
        .map(|j| Choice::Merge(j + 1))
}

/// An action upkeep chose, as the admin statement that makes it and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    pub table: String,
    pub statement: String,
    pub why: String,
    map: RangeMap,
}

/// Looks at the ranges every `range_check_secs` until the process ends.
pub async fn run(shared: Arc<Shared>) {
    let mut conn: Option<Conn> = None;
    let mut said = String::new();
    loop {
        let topo = shared.topology();
        tokio::time::sleep(Duration::from_secs(topo.balance.range_check_secs)).await;
        let topo = shared.topology();
        let Some(meta) = topo
            .metadata
            .as_ref()
            .filter(|_| topo.balance.mode != BalanceMode::Off)
        else {
            conn = None;
            continue;
        };
        let Some(c) = crate::metadata::link::kept(&mut conn, &meta.url).await else {
            continue;
        };
        let pass = tokio::time::timeout(Duration::from_secs(60), pass(&shared, &topo, c)).await;
        let action = match pass {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                warn!(error = %e, "range upkeep: the metadata schema failed; trying again");
                conn = None;
                None
            }
            Err(_) => {
                warn!("range upkeep: no pass within 60 s; trying again");
                conn = None;
                None
            }
        };
        let now = action
            .as_ref()
            .map(|a| format!("{} -- {}", a.statement, a.why))
            .unwrap_or_default();
        *shared
            .range_upkeep
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = action.as_ref().map(|_| now.clone());
        let Some(a) = action else {
            said.clear();
            continue;
        };
        if topo.balance.mode != BalanceMode::Auto {
            if now != said {
                info!(suggestion = %now, "range upkeep suggests");
                said = now;
            }
            continue;
        }
        let Some(c) = conn.as_mut() else {
            continue;
        };
        match apply(&topo, c, &a).await {
            Ok(true) => {
                info!(done = %now, "range upkeep");
                shared.migration.poll_now();
            }
            Ok(false) => {}
            Err(e) => {
                warn!(error = %e, "range upkeep: the metadata schema failed; trying again");
                conn = None;
            }
        }
    }
}

/// One look at every range table: the first action due, if any.
async fn pass(
    shared: &Shared,
    topo: &Topology,
    c: &mut Conn,
) -> mysql_async::Result<Option<Action>> {
    if crate::metadata::rebalance::current(c).await?.is_some()
        || !crate::metadata::migrations::active(c).await?.is_empty()
    {
        return Ok(None);
    }
    let rates = shared.metrics.load.slots(&topo.hot, usize::MAX);
    // One connection a node for the whole pass.
    let mut nodes: HashMap<usize, Conn> = HashMap::new();
    let mut names: Vec<&String> = topo.tables.keys().collect();
    names.sort();
    for name in names {
        let Some(TableRule::Range { column, map }) = topo.table(name) else {
            continue;
        };
        if map.is_moving() {
            continue;
        }
        let mut facts = Vec::with_capacity(map.len());
        for i in 0..map.len() {
            let rate = rates
                .iter()
                .find(|r| r.table == *name && usize::from(r.slot) == i);
            // A range past the counted numbers (`SLOTS`) has no load known: never cold.
            let counted = i < crate::routing::slot::SLOTS;
            let cold = counted
                && rate.is_none_or(|r| {
                    r.hot_for.is_none()
                        && r.rate[0] * 4 < topo.hot.slot_statements
                        && r.rate[crate::load::detect::MICROS] * 4 < topo.hot.slot_node_ms * 1000
                });
            let rows = estimate(&mut nodes, topo, name, column, map, i).await;
            facts.push(Facts {
                node: map.owner(i),
                rows,
                cold,
            });
        }
        let b = &topo.balance;
        let merge = ranges::changed_secs_ago(c, name)
            .await?
            .is_none_or(|s| s >= b.cooldown_secs as f64);
        let (action, why) = match choose(&facts, b.range_split_rows, b.range_merge_rows, merge) {
            None => continue,
            Some(Choice::Split(i)) => {
                let Some(at) = middle(&mut nodes, topo, name, column, map, i, facts[i].rows).await
                else {
                    continue;
                };
                let Ok(split) = map.split_at(&at) else {
                    continue;
                };
                let word = map.word(&at);
                (
                    (
                        format!(
                            "SPLIT RANGE {} OF {name}",
                            crate::sql::write::admin_word(&word)
                        ),
                        split,
                    ),
                    format!(
                        "range {i} holds about {} rows, over range_split_rows ({})",
                        facts[i].rows.unwrap_or(0),
                        b.range_split_rows
                    ),
                )
            }
            Some(Choice::Merge(i)) => {
                let Some(at) = map.bounds(i).0.cloned() else {
                    continue;
                };
                let Ok(merged) = map.merge_at(&at) else {
                    continue;
                };
                (
                    (
                        format!(
                            "MERGE RANGE {} OF {name}",
                            crate::sql::write::admin_word(&map.word(&at))
                        ),
                        merged,
                    ),
                    format!(
                        "ranges {} and {i} are cold and hold about {} rows together, under range_merge_rows ({})",
                        i - 1,
                        facts[i - 1].rows.unwrap_or(0) + facts[i].rows.unwrap_or(0),
                        b.range_merge_rows
                    ),
                )
            }
        };
        return Ok(Some(Action {
            table: name.clone(),
            statement: action.0,
            why,
            map: action.1,
        }));
    }
    Ok(None)
}

/// Writes the action's ranges, if the metadata still holds the ones it was planned from.
async fn apply(topo: &Topology, c: &mut Conn, a: &Action) -> mysql_async::Result<bool> {
    let Some(TableRule::Range { map, .. }) = topo.table(&a.table) else {
        return Ok(false);
    };
    let name = |n: usize| topo.node_name(n).to_string();
    let (Ok(base), Ok(rows)) = (ranges::rows_of(map, &name), ranges::rows_of(&a.map, &name)) else {
        return Ok(false);
    };
    Ok(
        ranges::write_map(c, &a.table, Some(&base), &rows, topo.version)
            .await?
            .is_some(),
    )
}

/// A connection to `node`, kept in `open` for the pass.
async fn node<'c>(
    open: &'c mut HashMap<usize, Conn>,
    topo: &Topology,
    node: usize,
) -> Option<&'c mut Conn> {
    match open.entry(node) {
        std::collections::hash_map::Entry::Occupied(e) => Some(e.into_mut()),
        std::collections::hash_map::Entry::Vacant(e) => {
            let c = Conn::new(topo.nodes.get(node)?.opts.clone()).await.ok()?;
            Some(e.insert(c))
        }
    }
}

/// The rows of range `i`, as the optimizer of its node estimates them from the index on the
/// routing column; `None` without such an index (or an answer).
async fn estimate(
    open: &mut HashMap<usize, Conn>,
    topo: &Topology,
    table: &str,
    column: &str,
    map: &RangeMap,
    i: usize,
) -> Option<u64> {
    let pred = predicate(map, column, i);
    let c = node(open, topo, map.owner(i)).await?;
    let rows: Vec<mysql_async::Row> = c
        .query(format!(
            "EXPLAIN SELECT 1 FROM {} WHERE {pred}",
            quote(table)
        ))
        .await
        .ok()?;
    let row = rows.first()?;
    let named = |n: &str| {
        let i = row.columns_ref().iter().position(|c| c.name_str() == n)?;
        Some(row.as_ref(i)?.clone())
    };
    // No index on the column: the estimate is the table's, and the middle a full sort.
    if matches!(named("key"), None | Some(mysql_async::Value::NULL)) {
        return None;
    }
    match named("rows")? {
        mysql_async::Value::Int(n) => u64::try_from(n).ok(),
        mysql_async::Value::UInt(n) => Some(n),
        mysql_async::Value::Bytes(b) => std::str::from_utf8(&b).ok()?.parse().ok(),
        _ => None,
    }
}

/// The key in the middle of range `i`'s `rows` rows, read on its node along the index.
async fn middle(
    open: &mut HashMap<usize, Conn>,
    topo: &Topology,
    table: &str,
    column: &str,
    map: &RangeMap,
    i: usize,
    rows: Option<u64>,
) -> Option<crate::routing::range::RangeKey> {
    let pred = predicate(map, column, i);
    let c = node(open, topo, map.owner(i)).await?;
    let col = quote(column);
    let v: Option<mysql_async::Value> = c
        .query_first(format!(
            "SELECT {col} FROM {} WHERE {pred} ORDER BY {col} LIMIT 1 OFFSET {}",
            quote(table),
            rows? / 2
        ))
        .await
        .ok()?;
    map.kind.key_of(&v?)
}

/// The SQL predicate of range `i`'s rows (as a move of it selects them).
fn predicate(map: &RangeMap, column: &str, i: usize) -> String {
    let (lo, hi) = map.bounds(i);
    Moving {
        which: Which::Range {
            kind: map.kind,
            lo: lo.cloned(),
            hi: hi.cloned(),
        },
        from: 0,
        to: 0,
        step: MoveStep::Capture,
    }
    .predicate(None, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(node: usize, rows: u64, cold: bool) -> Facts {
        Facts {
            node,
            rows: Some(rows),
            cold,
        }
    }

    #[test]
    fn a_big_range_splits_and_small_cold_neighbours_on_one_node_merge() {
        // Range 1 is over the split size: split first, whatever else is due.
        let facts = [f(0, 10, true), f(0, 5000, false), f(0, 10, true)];
        assert_eq!(choose(&facts, 4000, 500, true), Some(Choice::Split(1)));
        // Cold and small on one node: range 2 merges into range 1.
        let facts = [f(0, 3000, true), f(1, 100, true), f(1, 200, true)];
        assert_eq!(choose(&facts, 4000, 500, true), Some(Choice::Merge(2)));
        // Not within the cooldown after the table's ranges changed.
        assert_eq!(choose(&facts, 4000, 500, false), None);
        // Not across nodes, not when one is warm, not when they are big together.
        let facts = [f(0, 100, true), f(1, 100, true)];
        assert_eq!(choose(&facts, 4000, 500, true), None);
        let facts = [f(1, 100, false), f(1, 100, true)];
        assert_eq!(choose(&facts, 4000, 500, true), None);
        let facts = [f(1, 300, true), f(1, 300, true)];
        assert_eq!(choose(&facts, 4000, 500, true), None);
        // Rows not known: nothing is done with that range.
        let facts = [
            Facts {
                node: 1,
                rows: None,
                cold: true,
            },
            f(1, 1, true),
        ];
        assert_eq!(choose(&facts, 4000, 500, true), None);
    }
}
