//! `[balance] mode = "auto"`: the moves `SHOW BALANCE` suggests, made. Every proxy with a
//! metadata schema runs [`run`]; a move is queued as a rebalance plan of one move
//! (`crate::metadata::rebalance::enqueue`, under the plan lock), so the migration driver runs
//! it like any other, `SHOW REBALANCE` shows it and `ABORT REBALANCE` stops it, and only one
//! balancing action is ever in flight in the cluster: a proxy whose plan comes second is
//! refused, as is any plan while a migration or another plan runs.
//!
//! Guards against flapping, on top of the detection's hysteresis and the planner's rule that
//! a move never makes its target the hotter of the two nodes:
//! - the same first move suggested in [`CONFIRM`] consecutive windows (not one noisy window);
//! - no move of a slot moved (by anyone, for any reason) within `cooldown_secs`;
//! - at most `max_moves_per_hour` moves of the balancer's in any hour;
//! - after a move ends, the windows that still saw the old placement ([hot] seconds and a
//!   margin) pass before the next is planned;
//! - a slot or key never goes back, within [`RETURN_AFTER`], to a node it was moved off
//!   (a hot spot that wanders back finds its slot on a third node, not ping-ponging).
//!
//! The guards read the metadata schema, so they hold across proxies and restarts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use tracing::{info, warn};

use crate::config::hot::BalanceMode;
use crate::config::{TableRule, Topology};
use crate::load::balance::Move;
use crate::metadata::migrations::Migration;
use crate::metadata::ranges;
use crate::shared::load::group_of;
use crate::shared::Shared;

/// Windows (seconds) in a row the same move must be suggested before it is queued.
pub const CONFIRM: u32 = 2;
/// How long one look at the metadata schema (the guards, the queueing) may take.
const ACT_TIMEOUT: Duration = Duration::from_secs(10);
/// What a balancer's plan is called (`shard_rebalance.what` starts with it).
pub const WHAT: &str = "BALANCE";
/// How long a move its guards held is left out of the plans before they are asked again.
const HELD_FOR: Duration = Duration::from_secs(10);
/// How long a slot or key the balancer moved stays off the node it left, seconds.
pub const RETURN_AFTER: u64 = 3600;

/// The auto balancer of a proxy (see the module documentation).
pub async fn run(shared: Arc<Shared>) {
    let mut seen: Option<(String, u16, Option<Vec<u8>>, usize)> = None;
    let mut streak = 0u32;
    let mut conn: Option<Conn> = None;
    let mut told: Vec<String> = Vec::new();
    // The plan of each window as the load's tick made it: one plan a window, so the
    // confirmation counts windows, not this loop's turns.
    let mut windows = shared.suggested.subscribe();
    while windows.changed().await.is_ok() {
        let plan = windows.borrow_and_update().clone();
        let topo = shared.topology();
        let Some(meta) = topo
            .metadata
            .as_ref()
            .filter(|_| topo.balance.mode == BalanceMode::Auto)
        else {
            conn = None;
            seen = None;
            continue;
        };
        // The moves the guards allow, in the planner's order: the first is the one queued.
        let Some(first) = plan.moves.first() else {
            seen = None;
            continue;
        };
        // A range's cut follows its sampled keys, which differ a little each window: the
        // same range to the same node is the same move.
        let cut = if first.range { None } else { first.key.clone() };
        let key = (first.table.clone(), first.slot, cut, first.to);
        if seen.as_ref() == Some(&key) {
            streak += 1;
        } else {
            seen = Some(key);
            streak = 1;
            told.clear();
        }
        if streak < CONFIRM {
            continue;
        }
        let Some(c) = crate::metadata::link::kept(&mut conn, &meta.url).await else {
            continue;
        };
        // A metadata node that hangs holds the balancer only this long.
        let acted =
            tokio::time::timeout(ACT_TIMEOUT, act(&shared, c, &topo, &plan.moves, &mut told))
                .await
                .unwrap_or_else(|_| {
                    Err(mysql_async::Error::Other(
                        "no answer from the metadata schema within 10 s".into(),
                    ))
                });
        match acted {
            Ok(Some(said)) => {
                shared.metrics.balance_moves.inc();
                info!(plan = %said, "balance: queued");
                seen = None;
            }
            Ok(None) => {}
            Err(e) => {
                warn!(error = %e, "balance: the metadata schema failed; trying again");
                conn = None;
            }
        }
    }
}

/// Why the per-move guards hold move `m`, if they do: its slot or key was moved within
/// `cooldown_secs`, or moved off the node it would go to within [`RETURN_AFTER`].
pub async fn held(c: &mut Conn, topo: &Topology, m: &Move) -> mysql_async::Result<Option<String>> {
    if m.range {
        return range_held(c, topo, m).await;
    }
    let tables = group_of(topo, &m.table);
    let key = m.key.as_deref().map(String::from_utf8_lossy);
    let what = match &key {
        Some(k) => format!("key '{k}' of {}", m.table),
        None => format!("slot {} of {}", m.slot, m.table),
    };
    let (cooldown, to) = (topo.balance.cooldown_secs, topo.node_name(m.to));
    Ok(
        if moved(c, &tables, m.slot, key.as_deref(), None, cooldown).await? {
            Some(format!(
                "{what} was moved less than {cooldown} s ago (cooldown_secs)"
            ))
        } else if moved(c, &tables, m.slot, key.as_deref(), Some(to), RETURN_AFTER).await? {
            Some(format!(
                "{what} was moved off {to} less than {RETURN_AFTER} s ago: it does not go back"
            ))
        } else {
            None
        },
    )
}

/// Queues the first of `moves` the guards allow, as a plan of its own; what it queued.
/// `told`: the holds logged since the plan last changed (each is logged once).
async fn act(
    shared: &Shared,
    c: &mut Conn,
    topo: &Topology,
    moves: &[Move],
    told: &mut Vec<String>,
) -> mysql_async::Result<Option<String>> {
    // A held move is left out of the next plans for a while (then its guards are asked again).
    let hold = |m: &Move| {
        shared
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((m.table.clone(), m.slot), Instant::now() + HELD_FOR);
    };
    let b = &topo.balance;
    // A move's windows still saw the old placement: let them pass.
    let settle = u64::from(topo.hot.seconds) + 3;
    let recent: Option<i64> = c
        .exec_first(
            "SELECT COUNT(*) FROM shard_rebalance WHERE what LIKE CONCAT(?, '%') \
             AND (state IN ('running', 'paused', 'aborting') OR updated > NOW(3) - INTERVAL ? SECOND)",
            (WHAT, settle),
        )
        .await?;
    if recent.unwrap_or(0) > 0 {
        return Ok(None);
    }
    let last_hour: Option<i64> = c
        .exec_first(
            "SELECT COUNT(*) FROM shard_migrations m JOIN shard_rebalance r ON m.plan_id = r.id \
             WHERE r.what LIKE CONCAT(?, '%') AND m.started > NOW(3) - INTERVAL 1 HOUR",
            (WHAT,),
        )
        .await?;
    if last_hour.unwrap_or(0) >= i64::from(b.max_moves_per_hour) {
        return Ok(None);
    }
    for m in moves {
        if let Some(why) = held(c, topo, m).await? {
            if !told.contains(&why) {
                info!(held = %why, "balance: a suggested move is held");
                told.push(why);
            }
            hold(m);
            continue;
        }
        if m.range {
            return queue_range(c, topo, m).await;
        }
        let tables = group_of(topo, &m.table);
        let key = m.key.as_deref().map(String::from_utf8_lossy);
        let to = topo.node_name(m.to);
        let what = match &key {
            Some(k) => format!("{WHAT} key '{k}' (slot {}) of {}", m.slot, m.table),
            None => format!("{WHAT} slot {} of {}", m.slot, m.table),
        };
        let what = format!(
            "{what} from {} ({} ms/s) to {to} ({} ms/s): its {} ms/s",
            topo.node_name(m.from),
            m.from_load.0 / 1000,
            m.to_load.0 / 1000,
            m.micros / 1000
        );
        let (first, last) = if key.is_some() {
            (0, 0)
        } else {
            (m.slot, m.slot)
        };
        let mv = Migration::new(
            tables.join(","),
            first,
            last,
            key.map(|k| k.into_owned()),
            topo.node_name(m.from).to_string(),
            to.to_string(),
            0,
            true,
        );
        let max = topo.metadata.as_ref().map_or(1, |m| m.max_parallel_moves);
        return Ok(
            match crate::metadata::rebalance::enqueue(c, &what, max, &[mv]).await? {
                Ok(id) => Some(format!("rebalance {id}: {what}")),
                // Another plan or migration runs: one action in flight.
                Err(_) => None,
            },
        );
    }
    Ok(None)
}

/// Was the slot (or the key, when named), of any of `tables`, moved or being moved within
/// `secs` seconds: by anyone (a move aborted too), or off node `from` when named?
async fn moved(
    c: &mut Conn,
    tables: &[String],
    slot: u16,
    key: Option<&str>,
    from: Option<&str>,
    secs: u64,
) -> mysql_async::Result<bool> {
    let rows: Vec<String> = c
        .exec(
            "SELECT table_name FROM shard_migrations WHERE updated > NOW(3) - INTERVAL ? SECOND \
             AND (? IS NULL OR (source = ? AND step <> 'aborted')) \
             AND IF(? IS NULL, key_value IS NULL AND first_slot <= ? AND last_slot >= ?, \
                    key_value = ?)",
            (secs, from, from, key, slot, slot, key),
        )
        .await?;
    Ok(rows.iter().any(|names| {
        names
            .split(',')
            .any(|n| tables.iter().any(|t| t.eq_ignore_ascii_case(n.trim())))
    }))
}

/// The lowest key (the admin's word) of the range move `m` moves: the key it is split at,
/// or its range's; `None` for a table's first range.
fn range_lo(topo: &Topology, m: &Move) -> Option<String> {
    match (&m.key, topo.table(&m.table)) {
        (Some(k), _) => Some(String::from_utf8_lossy(k).into_owned()),
        (None, Some(TableRule::Range { map, .. })) => {
            map.bounds(usize::from(m.slot)).0.map(|k| map.word(k))
        }
        _ => None,
    }
}

/// [`held`] for a range: the same guards, a range named by its lowest key. A part split off
/// a range is held by the range's own moves too: its rows moved with it (a range just moved
/// is not cut up and sent on while its load settles, nor a part of it sent back).
async fn range_held(
    c: &mut Conn,
    topo: &Topology,
    m: &Move,
) -> mysql_async::Result<Option<String>> {
    let lo = range_lo(topo, m);
    let whole = match topo.table(&m.table) {
        Some(TableRule::Range { map, .. }) => {
            map.bounds(usize::from(m.slot)).0.map(|k| map.word(k))
        }
        _ => None,
    };
    let mut named = vec![lo];
    if m.key.is_some() {
        named.push(whole);
    }
    let (cooldown, to) = (topo.balance.cooldown_secs, topo.node_name(m.to));
    for lo in &named {
        let what = match lo {
            Some(k) => format!("the range of {} from '{k}'", m.table),
            None => format!("the first range of {}", m.table),
        };
        if range_moved(c, &m.table, lo.as_deref(), None, cooldown).await? {
            return Ok(Some(format!(
                "{what} was moved less than {cooldown} s ago (cooldown_secs)"
            )));
        }
        if range_moved(c, &m.table, lo.as_deref(), Some(to), RETURN_AFTER).await? {
            return Ok(Some(format!(
                "{what} was moved off {to} less than {RETURN_AFTER} s ago: it does not go back"
            )));
        }
    }
    Ok(None)
}

/// Was the range of `table` whose lowest key is `lo` moved or being moved within `secs`
/// seconds: by anyone (a move aborted too), or off node `from` when named?
async fn range_moved(
    c: &mut Conn,
    table: &str,
    lo: Option<&str>,
    from: Option<&str>,
    secs: u64,
) -> mysql_async::Result<bool> {
    let n: Option<i64> = c
        .exec_first(
            "SELECT COUNT(*) FROM shard_migrations WHERE range_move = 1 AND table_name = ? \
             AND updated > NOW(3) - INTERVAL ? SECOND AND key_value <=> ? \
             AND (? IS NULL OR (source = ? AND step <> 'aborted'))",
            (table, secs, lo, from, from),
        )
        .await?;
    Ok(n.unwrap_or(0) > 0)
}

/// Queues range move `m` as a plan of its own, after splitting its range where the move
/// says (a new version of the table's ranges, both parts on the range's node: nothing
/// moves yet); what it queued.
async fn queue_range(
    c: &mut Conn,
    topo: &Topology,
    m: &Move,
) -> mysql_async::Result<Option<String>> {
    let Some(TableRule::Range { map, .. }) = topo.table(&m.table) else {
        return Ok(None);
    };
    let name = |n: usize| topo.node_name(n).to_string();
    let (index, lo) = match &m.key {
        Some(k) => {
            let word = String::from_utf8_lossy(k).into_owned();
            let Ok(at) = map.key_of_word(&word) else {
                return Ok(None);
            };
            let Ok(new) = map.split_at(&at) else {
                return Ok(None);
            };
            let (Ok(base), Ok(rows)) = (ranges::rows_of(map, &name), ranges::rows_of(&new, &name))
            else {
                return Ok(None);
            };
            if ranges::write_map(c, &m.table, Some(&base), &rows, topo.version)
                .await?
                .is_none()
            {
                // Another proxy changed the ranges: planned again on the new ones.
                return Ok(None);
            }
            info!(table = %m.table, at = %word, "balance: range split");
            (new.index_of(&at), Some(word))
        }
        None => (usize::from(m.slot), range_lo(topo, m)),
    };
    let what = format!(
        "{WHAT} range of {} from {} from {} ({} ms/s) to {} ({} ms/s): its {} ms/s",
        m.table,
        lo.as_deref()
            .map_or("its start".to_string(), |k| format!("'{k}'")),
        topo.node_name(m.from),
        m.from_load.0 / 1000,
        topo.node_name(m.to),
        m.to_load.0 / 1000,
        m.micros / 1000
    );
    let mv = Migration::of_range(
        m.table.clone(),
        index as u16,
        lo,
        topo.node_name(m.from).to_string(),
        topo.node_name(m.to).to_string(),
        0,
        true,
    );
    let max = topo.metadata.as_ref().map_or(1, |x| x.max_parallel_moves);
    Ok(
        match crate::metadata::rebalance::enqueue(c, &what, max, &[mv]).await? {
            Ok(id) => Some(format!("rebalance {id}: {what}")),
            Err(_) => None,
        },
    )
}
