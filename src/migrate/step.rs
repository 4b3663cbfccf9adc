//! What the driver's steps share: the nodes' connections of a migration ([`Ends`]), the
//! slot-map versions a step writes and the proxies' acknowledgements it waits for.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use tracing::info;

use super::copy::{self, Shape};
use crate::config::{TableRule, Topology};
use crate::metadata::migrations::{self as store, Migration};
use crate::plan::moving::{Moving, Which};
use crate::routing::slot::MoveStep;
use crate::shared::Shared;

/// How long a step waits for every proxy to acknowledge its version.
pub(super) const ACK_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the freeze may wait for proxies to finish their running dual writes.
pub(super) const FREEZE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a step stopped: the lease is no longer certainly this proxy's.
pub(super) const NOT_DRIVING: &str =
    "this proxy's lease on the migrations ran out: it drives no more";

/// Seconds a driver's node connection may sit idle before the node closes it: under the
/// lease, less the renewal's slack, so that a driver paused long enough for another proxy
/// to take its lease over has lost them by then.
fn idle_limit(lease_ms: u64) -> u64 {
    (lease_ms.saturating_sub(1000) / 1000).max(1)
}

/// A step that could not go on: said in the migration's `message` and tried again.
pub(super) type Step<T> = Result<T, String>;

pub(super) fn err(e: mysql_async::Error) -> String {
    e.to_string()
}

/// The nodes' connections of a migration, and the shapes of its tables.
pub(super) struct Ends {
    pub(super) s: Conn,
    pub(super) t: Conn,
    pub(super) shapes: Vec<Shape>,
    /// The source's, for reads of its binary log.
    pub(super) opts: Opts,
}

/// Opened only while this proxy's lease is its own, and closed by the node itself after
/// [`idle_limit`] without a statement: a driver paused past its lease (which another proxy
/// then takes) finds them gone when it wakes, its uncommitted batch rolled back, and its
/// next step checks the lease before opening others.
pub(super) async fn ends(shared: &Shared, topo: &Topology, m: &Migration) -> Step<Ends> {
    let node = |name: &str| {
        topo.node_index(name)
            .map(|i| topo.nodes[i].opts.clone())
            .ok_or_else(|| format!("node `{name}` is not in the rules"))
    };
    let opts = node(&m.source)?;
    let mut s = Conn::new(opts.clone())
        .await
        .map_err(|e| format!("source `{}`: {e}", m.source))?;
    let mut t = Conn::new(node(&m.target)?)
        .await
        .map_err(|e| format!("target `{}`: {e}", m.target))?;
    let lease = topo.metadata.as_ref().map_or(10_000, |x| x.lease_ms);
    for c in [&mut s, &mut t] {
        copy::session(c).await.map_err(err)?;
        c.exec_drop("SET SESSION wait_timeout = ?", (idle_limit(lease),))
            .await
            .map_err(err)?;
    }
    if !shared.migration.may_drive() {
        return Err(NOT_DRIVING.into());
    }
    let mut shapes = Vec::new();
    for table in m.tables() {
        let (column, which) = match (topo.table(&table), &m.key) {
            (Some(TableRule::Range { column, map }), lo) if m.range_move => {
                let (lo, hi) = super::range_of(map, m.first, lo.as_deref()).ok_or_else(|| {
                    format!("the ranges of `{table}` changed since the move began")
                })?;
                (
                    column.clone(),
                    Which::Range {
                        kind: map.kind,
                        lo,
                        hi,
                    },
                )
            }
            (_, _) if m.range_move => {
                return Err(format!("`{table}` is no longer a range table"));
            }
            (Some(TableRule::HashSlot { column, map }), None) => {
                (column.clone(), Which::Slots(m.first, m.last, map.apart()))
            }
            (Some(TableRule::Directory(d)), Some(k)) => {
                (d.column.clone(), Which::Key(k.as_bytes().to_vec()))
            }
            (Some(TableRule::HashSlot { column, map }), Some(k)) => {
                let salted = map.salted().contains_key(k.as_bytes());
                let which = match map.salt() {
                    // Buckets of a salted key.
                    Some(salt) if salted && m.buckets() => Which::Buckets {
                        key: k.as_bytes().to_vec(),
                        by: salt.by.clone(),
                        buckets: salt.buckets,
                        first: m.first,
                        last: m.last,
                    },
                    _ if m.buckets() => {
                        return Err(format!(
                            "this proxy does not see key '{k}' of `{table}` salted yet"
                        ))
                    }
                    _ if salted => {
                        return Err(format!(
                            "key '{k}' of `{table}` is salted: its buckets move, not the key"
                        ))
                    }
                    _ => Which::Key(k.as_bytes().to_vec()),
                };
                (column.clone(), which)
            }
            _ => {
                return Err(format!(
                    "`{table}` is no longer a {} table",
                    if m.key.is_some() {
                        "directory or hash_slot"
                    } else {
                        "hash_slot"
                    }
                ))
            }
        };
        let moving = Moving {
            which,
            from: 0,
            to: 0,
            step: MoveStep::DualWrite,
        };
        shapes.push(copy::prepare(&mut s, &mut t, m, &table, moving, &column).await?);
    }
    Ok(Ends { s, t, shapes, opts })
}

/// Writes the migration's next slot-map version, if the migration is still at `expected`
/// (an ABORT in between wins: nothing is written).
#[allow(clippy::too_many_arguments)]
pub(super) async fn version(
    shared: &Shared,
    c: &mut Conn,
    m: &Migration,
    node: &str,
    state: &str,
    target: Option<&str>,
    step: &str,
    expected: &str,
) -> Step<u64> {
    let floor = shared.topology().version;
    match store::write_version(c, m, node, state, target, step, expected, floor)
        .await
        .map_err(err)?
    {
        Some(v) => {
            // This proxy applies it (and acknowledges it) now, not at its next poll.
            shared.migration.poll_now();
            Ok(v)
        }
        None => Err(format!(
            "the migration left step `{expected}` meanwhile (ABORT?)"
        )),
    }
}

pub(super) async fn current_version(c: &mut Conn) -> Step<u64> {
    let v: Option<u64> = c
        .query_first(crate::metadata::schema::VERSION_SQL)
        .await
        .map_err(err)?;
    Ok(v.unwrap_or(0))
}

/// Waits until every proxy that heartbeated within `window_ms` runs `version` or newer
/// (and, with `quiet` a target node, runs no dual write toward it).
pub(super) async fn acks(
    c: &mut Conn,
    version: u64,
    window_ms: u64,
    quiet: Option<&str>,
    timeout: Duration,
) -> Step<()> {
    let started = Instant::now();
    loop {
        let behind = behind(c, version, window_ms, quiet).await?;
        if behind.is_empty() {
            return Ok(());
        }
        if started.elapsed() > timeout {
            return Err(format!(
                "proxies {} have not acknowledged version {version}",
                behind.join(", ")
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The live proxies that have not acknowledged `version` yet (or still run writes toward
/// `quiet`); a proxy's name stands for all of them while none is live.
pub(super) async fn behind(
    c: &mut Conn,
    version: u64,
    window_ms: u64,
    quiet: Option<&str>,
) -> Step<Vec<String>> {
    let live = store::live(c, window_ms).await.map_err(err)?;
    if live.is_empty() {
        return Ok(vec!["(none live)".to_string()]);
    }
    Ok(live
        .iter()
        .filter(|p| {
            p.version < version || quiet.is_some_and(|t| p.busy.iter().any(|b| b == t || b == "*"))
        })
        .map(|p| p.proxy.clone())
        .collect())
}

/// Gives the writes back after a freeze (or a hold) that did not end in time: the slot map
/// at `state` again, the migration back at `cutover` (AUTO: tried again) or `ready`.
/// Returns the step's error, saying so.
pub(super) async fn give_back(
    shared: &Shared,
    c: &mut Conn,
    m: &Migration,
    state: &str,
    why: String,
) -> Step<bool> {
    let (next, then) = if m.auto_cutover {
        ("cutover", "tried again")
    } else {
        ("ready", "back to ready: CUTOVER again")
    };
    version(
        shared,
        c,
        m,
        &m.source,
        state,
        Some(&m.target),
        next,
        "cutover",
    )
    .await?;
    Err(format!("{why}; {then}"))
}

/// The point of no return of a cutover: the target owns the rows (version `cleanup`), the
/// writes' stall since `frozen` observed, and every proxy's acknowledgement awaited.
pub(super) async fn hand_over(
    shared: &Shared,
    c: &mut Conn,
    m: &Migration,
    frozen: Instant,
    window: u64,
) -> Step<bool> {
    let v = version(
        shared,
        c,
        m,
        &m.source,
        "cleanup",
        Some(&m.target),
        "cleanup",
        "cutover",
    )
    .await?;
    let stall = frozen.elapsed();
    shared
        .metrics
        .migration_freeze_seconds
        .observe(stall.as_secs_f64());
    info!(
        migration = m.id,
        version = v,
        stall_ms = stall.as_millis() as u64,
        "cut over"
    );
    acks(c, v, window, None, ACK_TIMEOUT).await?;
    Ok(true)
}
