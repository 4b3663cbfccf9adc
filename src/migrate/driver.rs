//! Runs migrations step by step. Every proxy with a metadata schema runs [`run`]; the one
//! that holds the migrations' lease (`crate::metadata::lease`) drives, the others wait, and
//! take over from the stored state once the driver has not renewed its lease for its
//! length (it died, or it is paused or cut off with its connections open). A driver acts
//! only while its lease is certainly its own, its writes of the migrations' state carry the
//! lease's token, and its node connections close themselves when left idle past the lease.
//!
//! Steps of a migration (`shard_migrations.step`) and the slot-map version each writes:
//! - `prepare`: the target gets the table (from the source's `SHOW CREATE TABLE`) and loses
//!   any rows of the range an earlier attempt left; then version `dual_write`.
//! - `dual_write`: waits for every proxy to run that version (and any proxy that has not
//!   heartbeated for a while to be fenced), so no write of the range escapes the images.
//! - `backfill`: batches in primary-key order, throttled to `rate` rows/s, resumable.
//! - `verify`: chunks compared, differing ones copied again; done again from the start if a
//!   proxy failed to write images meanwhile. Then `ready`, or `cutover` when automatic.
//! - `cutover`: version `read_target` (acknowledged), version `freeze` (acknowledged by
//!   every proxy with no dual write running), version `cleanup` (the target owns the
//!   slots): writes waited only between the last two.
//! - `cleanup`: the source's rows of the range deleted, throttled; version `stable`; `done`.
//! - `aborting` (ABORT before the cleanup version): version `stable` on the source, the
//!   target's copies deleted; `aborted`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use tracing::{info, warn};

use super::binlog;
use super::copy::{self, Shape};
use super::pace::Throttle;
use super::step::{
    acks, current_version, ends, err, give_back, hand_over, version, Step, ACK_TIMEOUT,
    FREEZE_TIMEOUT, NOT_DRIVING,
};
use crate::config::{TableRule, Topology};
use crate::metadata::lease;
use crate::metadata::migrations::{self as store, Migration};
use crate::metadata::schema::FENCE;
use crate::shared::migration::BLIND_LEASES;
use crate::shared::Shared;

/// How often the backfill saves its progress (rows copied, the cursor to resume from).
const PROGRESS_EVERY: Duration = Duration::from_millis(100);
/// How often the backfill stops to copy what the source's binary log changed meanwhile.
const CATCH_UP_EVERY: Duration = Duration::from_millis(200);

/// The migrations loop of a proxy (see the module documentation).
pub async fn run(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let topo = shared.topology();
        let Some(meta) = topo.metadata.clone() else {
            tokio::time::sleep(Duration::from_secs(5)).await;
            continue;
        };
        let Ok(opts) = Opts::from_url(&meta.url) else {
            continue;
        };
        // A connection of its own: the lease is taken, renewed and given back on it, and
        // the plan's queue is run from it.
        let Ok(mut lock) = Conn::new(opts.clone()).await else {
            continue;
        };
        let lease_ms = meta.lease_ms;
        let token = async {
            let queued = crate::metadata::rebalance::current(&mut lock)
                .await
                .is_ok_and(|p| p.is_some());
            if store::active(&mut lock).await.ok()?.is_empty() && !queued {
                return None;
            }
            let at = Instant::now();
            let t = lease::take(&mut lock, shared.instance(), lease_ms)
                .await
                .ok()??;
            shared.migration.drives(at, Duration::from_millis(lease_ms));
            Some(t)
        }
        .await;
        let Some(token) = token else {
            let _ = lock.disconnect().await;
            continue;
        };
        info!(
            token,
            "driving slot migrations (this proxy took the migrations' lease)"
        );
        drive_all(&shared, &mut lock, &opts, token, lease_ms).await;
        shared.migration.stops_driving();
        let _ = lease::release(&mut lock, token).await;
        let _ = lock.disconnect().await;
    }
}

/// While this proxy holds the lease `token`: the lease renewed, the plan's queue looked
/// at, and each move under way driven by a task of its own (moves of a plan run side by
/// side), until there is nothing to drive or the lease is lost (then the tasks stop:
/// another proxy may be driving).
async fn drive_all(shared: &Arc<Shared>, lock: &mut Conn, opts: &Opts, token: u64, lease_ms: u64) {
    let mut tasks: HashMap<u64, tokio::task::JoinHandle<()>> = HashMap::new();
    let every = Duration::from_millis((lease_ms / 4).clamp(10, 300));
    loop {
        let at = Instant::now();
        match lease::renew(lock, token, lease_ms).await {
            // Still its token: no other proxy has driven meanwhile, however long this one
            // was away.
            Ok(true) => {
                shared.migration.drives(at, Duration::from_millis(lease_ms));
            }
            Ok(_) => {
                warn!(
                    token,
                    "the migrations' lease was lost: this proxy drives no more"
                );
                break;
            }
            Err(e) => {
                warn!(token, "the migrations' lease could not be renewed: {e}");
                break;
            }
        }
        let planned = match super::queue::schedule(lock).await {
            Ok(p) => p,
            Err(e) => {
                warn!("the rebalance queue could not be read: {e}");
                break;
            }
        };
        let Ok(active) = store::active(lock).await else {
            break;
        };
        tasks.retain(|_, t| !t.is_finished());
        if active.is_empty() && tasks.is_empty() && !planned {
            break;
        }
        for m in active {
            tasks.entry(m.id).or_insert_with(|| {
                tokio::spawn(drive_one(shared.clone(), opts.clone(), m.id, token))
            });
        }
        tokio::time::sleep(every).await;
    }
    shared.migration.stops_driving();
    for (_, t) in tasks {
        t.abort();
    }
}

/// Drives one migration step after step, on a metadata connection of its own, until it is
/// no longer under way (or the connection fails: [`drive_all`] starts it again).
async fn drive_one(shared: Arc<Shared>, opts: Opts, id: u64, token: u64) {
    let Ok(mut c) = Conn::new(opts).await else {
        tokio::time::sleep(Duration::from_secs(1)).await;
        return;
    };
    if lease::carry(&mut c, token).await.is_err() {
        return;
    }
    loop {
        if !shared.migration.may_drive() {
            break;
        }
        let m = match store::get(&mut c, id).await {
            Ok(Some(m)) if store::ACTIVE.contains(&m.step.as_str()) => m,
            _ => break,
        };
        match drive(&shared, &mut c, m).await {
            Ok(true) => {}
            Ok(false) => tokio::time::sleep(Duration::from_millis(300)).await,
            Err(e) => {
                warn!(migration = id, "migration step failed, tried again: {e}");
                shared.metrics.migration_errors.inc();
                let _ = store::set_message(&mut c, id, &e).await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    let _ = c.disconnect().await;
}

/// A cursor over the migration's tables: `i:key` (the `i`-th table, after `key`). The
/// key is spliced into the nodes' SQL, so one read back from the metadata store is taken
/// only as a tuple of literals the proxy's writer makes; anything else starts the pass
/// over (copies and checks are idempotent), logged.
fn split_cursor(c: Option<&str>) -> (usize, Option<String>) {
    match c.and_then(|c| c.split_once(':')) {
        Some((i, k)) if k.is_empty() || crate::sql::write::is_literal_tuple(k) => (
            i.parse().unwrap_or(0),
            (!k.is_empty()).then(|| k.to_string()),
        ),
        Some(_) => {
            tracing::warn!(
                "a migration's stored cursor is not a tuple of literals: starting its pass over"
            );
            (0, None)
        }
        None => (0, None),
    }
}

fn join_cursor(i: usize, key: Option<&str>) -> String {
    format!("{i}:{}", key.unwrap_or_default())
}

/// Deletes the range's rows of every table on one side (an aborted move's target), in
/// batches, unthrottled; the rows deleted.
async fn delete_all(shared: &Shared, c: &mut Conn, shapes: &[Shape]) -> Step<u64> {
    let mut n = 0;
    for shape in shapes {
        let mut after = None;
        loop {
            if !shared.migration.may_drive() {
                return Err(NOT_DRIVING.into());
            }
            let d = copy::delete_batch(c, shape, copy::BATCH, &mut after)
                .await
                .map_err(err)?;
            if d == 0 {
                break;
            }
            n += d;
        }
    }
    Ok(n)
}

/// One pass over a migration's current step; `true` when it moved on (drive again).
async fn drive(shared: &Shared, c: &mut Conn, m: Migration) -> Step<bool> {
    let topo = shared.topology();
    let lease = topo.metadata.as_ref().map_or(10_000, |x| x.lease_ms);
    shared
        .metrics
        .migration_step
        .with_label_values(&[&m.step])
        .inc();
    match m.step.as_str() {
        "prepare" => {
            // A range move names its range by number and lowest key: once this proxy runs
            // the metadata's newest ranges and they no longer have it, it cannot start.
            if m.range_move
                && current_version(c).await? <= topo.version
                && !m.tables().iter().all(|t| {
                    matches!(topo.table(t), Some(TableRule::Range { map, .. })
                        if super::range_of(map, m.first, m.key.as_deref()).is_some())
                })
            {
                store::set_step(
                    c,
                    m.id,
                    "aborted",
                    Some("the range is no longer as the move named it (split, merged or moved since)"),
                )
                .await
                .map_err(err)?;
                return Ok(true);
            }
            let mut e = ends(shared, &topo, &m).await?;
            seed_slot_rows(&topo, &m).await?;
            seed_range_rows(c, &topo, &m).await?;
            let owners_ok = match &m.key {
                _ if m.range_move => m.tables().iter().all(|t| match topo.table(t) {
                    Some(TableRule::Range { map, .. }) => {
                        super::range_of(map, m.first, m.key.as_deref()).is_some()
                            && !map.moves().iter().any(|x| x.index == usize::from(m.first))
                            && topo.node_name(map.owner(usize::from(m.first))) == m.source.as_str()
                    }
                    _ => false,
                }),
                Some(k) => {
                    let mut ok = true;
                    for table in m.tables() {
                        let at = match super::buckets_placed(&topo, &table, k, m.first, m.last) {
                            Some(buckets) => buckets,
                            None if m.buckets() => {
                                return Err(format!(
                                    "this proxy does not see key '{k}' of `{table}` salted yet"
                                ))
                            }
                            None => super::placed(&topo, &table, k).await,
                        };
                        ok &= at.is_ok_and(|n| topo.node_name(n) == m.source.as_str());
                    }
                    ok
                }
                None => m.tables().iter().all(|t| match topo.table(t) {
                    Some(TableRule::HashSlot { map, .. }) => (m.first..=m.last).all(|s| {
                        map.moving(s).is_none()
                            && topo.node_name(map.owner_of_slot(s)) == m.source.as_str()
                    }),
                    _ => false,
                }),
            };
            if !owners_ok {
                store::set_step(
                    c,
                    m.id,
                    "aborted",
                    Some("the rows are no longer all on the source, or already moving"),
                )
                .await
                .map_err(err)?;
                return Ok(true);
            }
            let mut rows = 0;
            for shape in &e.shapes {
                rows += copy::count(&mut e.s, shape).await.map_err(err)?;
            }
            store::set_count(c, m.id, store::Count::Estimate, rows)
                .await
                .map_err(err)?;
            // Left-overs of an earlier attempt: no proxy writes images here yet.
            delete_all(shared, &mut e.t, &e.shapes).await?;
            let pos = super::capture::choose(&topo, &mut e).await;
            // A salted key's buckets are told apart by two columns: only the binary log's
            // full row images have both (dual writes select rows by their routing key).
            if pos.is_none() && e.shapes.iter().any(|s| s.by.is_some()) {
                store::set_step(
                    c,
                    m.id,
                    "aborted",
                    Some("a salted key's buckets move only through the source's binary log (log_bin, binlog_format ROW, binlog_row_image FULL, and REPLICATION SLAVE for the proxy's user)"),
                )
                .await
                .map_err(err)?;
                return Ok(true);
            }
            let (how, state) = match &pos {
                Some(_) => ("binlog", "capture"),
                None => ("images", "dual_write"),
            };
            let pos = pos.map(|p| p.text());
            store::set_capture(c, m.id, how, pos.as_deref())
                .await
                .map_err(err)?;
            let v = version(
                shared,
                c,
                &m,
                &m.source,
                state,
                Some(&m.target),
                "dual_write",
                "prepare",
            )
            .await?;
            info!(
                migration = m.id,
                version = v,
                capture = how,
                "the move's writes are captured"
            );
            Ok(true)
        }
        "dual_write" => {
            // A proxy may have missed this version only if it has been silent for long
            // enough to be fenced from every sharded write.
            let v = current_version(c).await?;
            acks(
                c,
                v,
                lease * u64::from(BLIND_LEASES) + 1000,
                None,
                ACK_TIMEOUT,
            )
            .await?;
            store::set_step(c, m.id, "backfill", None)
                .await
                .map_err(err)?;
            Ok(true)
        }
        "backfill" => backfill(shared, c, &topo, m).await,
        "verify" => verify(shared, c, &topo, m).await,
        "ready" => {
            // The target keeps up with the source's log while the move waits for CUTOVER.
            let mut e = ends(shared, &topo, &m).await?;
            if let Some(mut tail) = binlog::Tail::of(&m, &e.opts, &e.shapes)? {
                super::capture::catch_up(shared, c, &m, &mut tail, &mut e, &[]).await?;
            }
            Ok(false)
        }
        "cutover" if m.capture.as_deref() == Some("binlog") => {
            super::capture::cutover(shared, c, &topo, &m, lease).await
        }
        "cutover" => cutover(shared, c, &m, lease).await,
        "cleanup" => {
            let mut e = ends(shared, &topo, &m).await?;
            let mut cleaned = m.cleaned;
            // Paced as the backfill: once the target's index is built in key order (the
            // capture leaves unreached rows to the backfill), the paced deletes keep the
            // application at 0.87-0.88x instead of 0.84-0.86x (bench/README.md).
            let mut pace = paced(shared, &topo, &m).await;
            for shape in &e.shapes {
                let mut after = None;
                loop {
                    if !shared.migration.may_drive() {
                        return Err(NOT_DRIVING.into());
                    }
                    let n = copy::delete_batch(&mut e.s, shape, batch_size(m.rate), &mut after)
                        .await
                        .map_err(err)?;
                    if n == 0 {
                        break;
                    }
                    cleaned += n;
                    store::set_count(c, m.id, store::Count::Cleaned, cleaned)
                        .await
                        .map_err(err)?;
                    pace.after(n, &mut [&mut e.s, &mut e.t])
                        .await
                        .map_err(|x| lost(&m, x))?;
                }
            }
            let v = version(shared, c, &m, &m.target, "stable", None, "done", "cleanup").await?;
            acks(c, v, lease + 1000, None, ACK_TIMEOUT).await?;
            info!(
                migration = m.id,
                "{} of `{}` moved to `{}`",
                m.what(),
                m.table,
                m.target
            );
            shared.metrics.migrations.with_label_values(&["done"]).inc();
            Ok(true)
        }
        "aborting" => {
            let v = version(
                shared, c, &m, &m.source, "stable", None, "aborting", "aborting",
            )
            .await?;
            acks(c, v, lease + 1000, Some(&m.target), ACK_TIMEOUT).await?;
            let mut e = ends(shared, &topo, &m).await?;
            delete_all(shared, &mut e.t, &e.shapes).await?;
            store::set_step(
                c,
                m.id,
                "aborted",
                Some("aborted: the slots stay on the source"),
            )
            .await
            .map_err(err)?;
            shared
                .metrics
                .migrations
                .with_label_values(&["aborted"])
                .inc();
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Rows per batch at `rate` rows/s (0: unthrottled).
fn batch_size(rate: u64) -> usize {
    if rate == 0 {
        copy::BATCH
    } else {
        (rate as usize).clamp(1, copy::BATCH)
    }
}

/// A node's connection lost while a paced step slept (`Pace::after`'s ping of the
/// source, 0, or the target, 1).
fn lost(m: &Migration, (i, e): (usize, mysql_async::Error)) -> String {
    let (what, node) = if i == 0 {
        ("source", &m.source)
    } else {
        ("target", &m.target)
    };
    format!("the {what} `{node}`: {e}")
}

/// The pace of `m`'s backfill, verify or cleanup: its RATE, slowed while the application's
/// statements on its two nodes take more than `[metadata] copy_slowdown_pct` longer than
/// before the step began (`super::pace`).
async fn paced<'a>(shared: &'a Shared, topo: &Topology, m: &Migration) -> Throttle<'a> {
    let pct = topo.metadata.as_ref().map_or(0, |m| m.copy_slowdown_pct);
    Throttle::start(shared, m.rate, &m.source, &m.target, pct).await
}

/// The step, read again: an admin's ABORT stops the data steps at their next batch.
async fn still(c: &mut Conn, m: &Migration) -> Step<bool> {
    Ok(store::step(c, m.id).await.map_err(err)?.as_deref() == Some(m.step.as_str()))
}

async fn backfill(shared: &Shared, c: &mut Conn, topo: &Topology, m: Migration) -> Step<bool> {
    let mut e = ends(shared, topo, &m).await?;
    let mut pace = paced(shared, topo, &m).await;
    let mut tail = binlog::Tail::of(&m, &e.opts, &e.shapes)?;
    let mut caught = Instant::now();
    let started = Instant::now();
    let mut copied = m.copied;
    let (mut table, mut cursor) = split_cursor(m.cursor.as_deref());
    let mut checked = Instant::now();
    let mut last: Option<(usize, Option<String>)> = None;
    let mut ahead = None;
    let mut saved = Instant::now();
    while let Some(shape) = e.shapes.get(table) {
        if !shared.migration.may_drive() {
            return Err(NOT_DRIVING.into());
        }
        if last.as_ref().is_none_or(|(t, _)| *t != table) {
            let k = copy::last_key(&mut e.s, shape).await.map_err(err)?;
            last = Some((table, k));
        }
        let Some((_, Some(upto))) = &last else {
            table += 1;
            cursor = None;
            continue;
        };
        if let Some(tail) = tail.as_mut().filter(|_| caught.elapsed() > CATCH_UP_EVERY) {
            // Read before the log's changes are copied, the batch ahead would be written
            // over them.
            ahead = None;
            let upto = last.as_ref().and_then(|(_, k)| k.as_deref());
            let later = copy::still_to_copy(&e.shapes, table, cursor.as_deref(), upto);
            super::capture::catch_up(shared, c, &m, tail, &mut e, &later).await?;
            caught = Instant::now();
        }
        let Some(shape) = e.shapes.get(table) else {
            break;
        };
        let (from, n) = (cursor.as_deref(), batch_size(m.rate));
        let copied_now = if tail.is_some() {
            copy::batch_ahead(&mut e.s, &mut e.t, shape, from, upto, n, &mut ahead).await
        } else {
            copy::batch(&mut e.s, &mut e.t, shape, from, upto, n).await
        };
        let (n, next) = copied_now.map_err(|e| {
            format!(
                "backfill of {} from `{}` to the target `{}`: {e}",
                shape.table, m.source, m.target
            )
        })?;
        if n == 0 {
            table += 1;
            cursor = None;
            continue;
        }
        copied += n as u64;
        cursor = next;
        shared
            .metrics
            .migration_rows
            .with_label_values(&["copied"])
            .inc_by(n as u64);
        // Saved every PROGRESS_EVERY, not every batch (a hundred a second unthrottled, each
        // a commit on the metadata node): a driver that dies copies again what it copied
        // since, which is harmless.
        if saved.elapsed() > PROGRESS_EVERY {
            saved = Instant::now();
            let rps = (copied - m.copied) as f64 / started.elapsed().as_secs_f64().max(0.001);
            let at = join_cursor(table, cursor.as_deref());
            store::progress(c, m.id, copied, rps, Some(&at))
                .await
                .map_err(err)?;
        }
        pace.after(n as u64, &mut [&mut e.s, &mut e.t])
            .await
            .map_err(|x| lost(&m, x))?;
        if checked.elapsed() > Duration::from_millis(500) {
            checked = Instant::now();
            if !still(c, &m).await? {
                return Ok(true);
            }
        }
    }
    if let Some(tail) = tail.as_mut() {
        super::capture::catch_up(shared, c, &m, tail, &mut e, &[]).await?;
    }
    // The pass's average rate: what a progress bar ends on.
    let rps = if copied > m.copied {
        (copied - m.copied) as f64 / started.elapsed().as_secs_f64().max(0.001)
    } else {
        m.rows_per_sec
    };
    store::progress(c, m.id, copied, rps, None)
        .await
        .map_err(err)?;
    let failures = failures_now(c, topo).await?;
    store::set_count(c, m.id, store::Count::FailuresSeen, failures)
        .await
        .map_err(err)?;
    c.exec_drop(
        format!("UPDATE shard_migrations SET step = 'verify', chunks_verified = 0, chunks_differing = 0 WHERE id = ? AND step = 'backfill' AND {FENCE}"),
        (m.id,),
    )
    .await
    .map_err(err)?;
    Ok(true)
}

/// The row images the live proxies failed to write, summed.
async fn failures_now(c: &mut Conn, topo: &Topology) -> Step<u64> {
    let lease = topo.metadata.as_ref().map_or(10_000, |x| x.lease_ms);
    let live = store::live(c, lease * u64::from(BLIND_LEASES) * 10)
        .await
        .map_err(err)?;
    Ok(live.iter().map(|p| p.failures).sum())
}

async fn verify(shared: &Shared, c: &mut Conn, topo: &Topology, m: Migration) -> Step<bool> {
    let mut e = ends(shared, topo, &m).await?;
    // Paced as the backfill is: its chunks lock their rows on the source and read them on
    // both nodes; unpaced, the application ran at 0.65-0.75x of its rate meanwhile.
    let mut pace = paced(shared, topo, &m).await;
    let mut tail = binlog::Tail::of(&m, &e.opts, &e.shapes)?;
    let (mut table, mut lo) = split_cursor(m.cursor.as_deref());
    let mut chunks = m.chunks_verified;
    let mut differing = m.chunks_differing;
    let mut last: Option<(usize, Option<String>)> = None;
    while let Some(shape) = e.shapes.get(table) {
        if !shared.migration.may_drive() {
            return Err(NOT_DRIVING.into());
        }
        if last.as_ref().is_none_or(|(t, _)| *t != table) {
            let k = copy::last_key(&mut e.s, shape).await.map_err(err)?;
            last = Some((table, k));
        }
        let Some((_, Some(upto))) = &last else {
            table += 1;
            lo = None;
            continue;
        };
        let what = |e: String| {
            format!(
                "verify of {} on `{}` against the target `{}`: {e}",
                shape.table, m.source, m.target
            )
        };
        let (hi, differed, agrees) = match tail.as_mut() {
            Some(tail) => {
                let (hi, range) = copy::chunk(&mut e.s, shape, lo.as_deref(), upto)
                    .await
                    .map_err(|e| what(e.to_string()))?;
                let mut tries = 0;
                loop {
                    let r =
                        binlog::verify_chunk(&mut e.s, &mut e.t, tail, &e.shapes, table, &range)
                            .await
                            .map_err(what)?;
                    if let Some((differed, agrees)) = r {
                        break (hi, differed, agrees);
                    }
                    tries += 1;
                    if tries > 3000 {
                        return Err(what("its rows stayed locked on the source".into()));
                    }
                    // The target's connection closes itself when idle for about a lease
                    // (`step::ends`): a source busy with writes over the chunk must not
                    // leave it so.
                    if tries % 50 == 0 {
                        e.t.ping().await.map_err(|e| what(e.to_string()))?;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
            None => copy::verify_chunk(&mut e.s, &mut e.t, shape, lo.as_deref(), upto)
                .await
                .map_err(|e| what(e.to_string()))?,
        };
        if let (Some(tail), true) = (tail.as_mut(), agrees) {
            if let Some(pos) = tail.to_save() {
                store::set_binlog_pos(c, m.id, &pos).await.map_err(err)?;
            }
        }
        chunks += 1;
        if differed {
            differing += 1;
            shared
                .metrics
                .migration_rows
                .with_label_values(&["chunk_differed"])
                .inc();
        }
        if !agrees {
            return Err(format!(
                "a chunk of {} after {} still differs after copying it again three times",
                shape.table,
                lo.as_deref().unwrap_or("the first key")
            ));
        }
        let (next_table, next_lo) = match hi {
            Some(h) => (table, Some(h)),
            None => (table + 1, None),
        };
        let at = join_cursor(next_table, next_lo.as_deref());
        store::verified(c, m.id, chunks, differing, Some(&at))
            .await
            .map_err(err)?;
        let full = next_lo.is_some();
        (table, lo) = (next_table, next_lo);
        if !still(c, &m).await? {
            return Ok(true);
        }
        // Paced by full chunks: a table's last chunk holds what was left, often a few rows
        // (at RATE 20 a 30-row move paused 50 s after its one chunk).
        if full {
            pace.after(copy::CHUNK as u64, &mut [&mut e.s, &mut e.t])
                .await
                .map_err(|x| lost(&m, x))?;
        }
    }
    // A proxy that failed to write images meanwhile: some rows may differ again.
    let failures = failures_now(c, topo).await?;
    if failures > m.failures_seen {
        store::set_count(c, m.id, store::Count::FailuresSeen, failures)
            .await
            .map_err(err)?;
        c.exec_drop(
            format!("UPDATE shard_migrations SET chunks_verified = 0, chunks_differing = 0, cursor_key = NULL, \
             message = 'row images failed during verify: verifying again' WHERE id = ? AND step = 'verify' AND {FENCE}"),
            (m.id,),
        )
        .await
        .map_err(err)?;
        return Ok(true);
    }
    let next = if m.auto_cutover { "cutover" } else { "ready" };
    c.exec_drop(
        format!("UPDATE shard_migrations SET step = ?, cursor_key = NULL, message = NULL WHERE id = ? AND step = 'verify' AND {FENCE}"),
        (next, m.id),
    )
    .await
    .map_err(err)?;
    Ok(true)
}

async fn cutover(shared: &Shared, c: &mut Conn, m: &Migration, lease: u64) -> Step<bool> {
    let window = lease + 1000;
    let v = version(
        shared,
        c,
        m,
        &m.source,
        "read_target",
        Some(&m.target),
        "cutover",
        "cutover",
    )
    .await?;
    acks(c, v, window, None, ACK_TIMEOUT).await?;
    let v = version(
        shared,
        c,
        m,
        &m.source,
        "freeze",
        Some(&m.target),
        "cutover",
        "cutover",
    )
    .await?;
    let frozen = Instant::now();
    if let Err(e) = acks(c, v, window, Some(&m.target), FREEZE_TIMEOUT).await {
        // Writes wait while frozen: give them back, and try again later (a transaction
        // holding row images keeps a freeze from being acknowledged).
        let why = format!("the freeze was not acknowledged in time ({e})");
        return give_back(shared, c, m, "read_target", why).await;
    }
    let topo = shared.topology();
    if failures_now(c, &topo).await? > m.failures_seen {
        version(
            shared,
            c,
            m,
            &m.source,
            "dual_write",
            Some(&m.target),
            "verify",
            "cutover",
        )
        .await?;
        c.exec_drop(
            format!("UPDATE shard_migrations SET chunks_verified = 0, chunks_differing = 0, cursor_key = NULL, \
             message = 'row images failed since the verify: verifying again' WHERE id = ? AND {FENCE}"),
            (m.id,),
        )
        .await
        .map_err(err)?;
        return Ok(true);
    }
    crate::hooks::migration_hold("frozen").await;
    // The point of no return: the target owns the slots.
    hand_over(shared, c, m, frozen, window).await
}

/// Puts the table's slot map in the metadata schema (as the running rules have it) when the
/// metadata has none for it: the steps are written there.
async fn seed_slot_rows(topo: &Topology, m: &Migration) -> Step<()> {
    if m.key.is_some() || m.range_move {
        // A directory key's row is written with its first version.
        return Ok(());
    }
    for table in m.tables() {
        let Some(rule @ TableRule::HashSlot { column, .. }) = topo.table(&table) else {
            return Err(format!("`{table}` is not a hash_slot table"));
        };
        let owners = crate::metadata::owners_with(topo, rule, 1, 0, 0);
        let url = topo
            .metadata
            .as_ref()
            .map(|x| x.url.clone())
            .unwrap_or_default();
        crate::metadata::write_slots(&url, &table, column, &owners, topo.version, true)
            .await
            .map_err(err)?;
    }
    Ok(())
}

/// Puts a range table's ranges in the metadata schema (as the running rules have them) when
/// the metadata has none of them: a range move's steps are written there.
async fn seed_range_rows(c: &mut Conn, topo: &Topology, m: &Migration) -> Step<()> {
    if !m.range_move {
        return Ok(());
    }
    for table in m.tables() {
        let Some(TableRule::Range { map, .. }) = topo.table(&table) else {
            return Err(format!("`{table}` is not a range table"));
        };
        let rows = crate::metadata::ranges::rows_of(map, &|n| topo.node_name(n).to_string())?;
        crate::metadata::ranges::write_map(c, &table, None, &rows, topo.version)
            .await
            .map_err(err)?;
    }
    Ok(())
}
