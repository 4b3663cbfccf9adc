//! The driver's steps for a move captured from its source's binary log (`super::binlog`):
//! choosing the capture at `prepare`, the passes that copy what the log changed, and the
//! cutover that holds writes while the target reads the log to its end.

use std::time::{Duration, Instant};

use mysql_async::Conn;
use tracing::{info, warn};

use super::binlog;
use super::step::{behind, ends, err, give_back, hand_over, version, Ends, Step, FREEZE_TIMEOUT};
use crate::config::Topology;
use crate::metadata::migrations::{self as store, Migration};
use crate::shared::Shared;

/// How the move's target will get the writes made meanwhile: from the source's binary log
/// (its position now) where the rules allow, every table's rows can be told apart there and
/// the log can be read; `None`: by dual writes.
pub(super) async fn choose(topo: &Topology, e: &mut Ends) -> Option<binlog::Position> {
    let allowed = topo
        .metadata
        .as_ref()
        .is_none_or(|x| x.capture == crate::config::Capture::Auto);
    if !allowed || e.shapes.iter().any(|s| s.routing.is_none()) {
        return None;
    }
    let pos = binlog::usable(&mut e.s).await?;
    // The proxy's user may lack the right to read it (REPLICATION SLAVE).
    let mut keys: Vec<binlog::Keys> = e.shapes.iter().map(|_| Default::default()).collect();
    match binlog::read(&e.opts, &pos, &e.shapes, &mut keys).await {
        Ok(_) => Some(pos),
        Err(why) => {
            warn!("the source's binary log cannot be read, so the move uses dual writes: {why}");
            None
        }
    }
}

/// Copies what the source's binary log changed since the last pass (but the rows the
/// backfill copies later: [`binlog::recopy`]), and saves the position once nothing read is
/// left to copy.
pub(super) async fn catch_up(
    shared: &Shared,
    c: &mut Conn,
    m: &Migration,
    tail: &mut binlog::Tail,
    e: &mut Ends,
    later: &[Option<String>],
) -> Step<()> {
    let written = tail.catch_up(&mut e.s, &mut e.t, &e.shapes, later).await?;
    shared
        .metrics
        .migration_rows
        .with_label_values(&["recopied"])
        .inc_by(written);
    if let Some(pos) = tail.to_save() {
        store::set_binlog_pos(c, m.id, &pos).await.map_err(err)?;
    }
    Ok(())
}

/// The cutover of a move captured from the source's binary log: writes of the rows wait
/// (version `hold`, acknowledged by every proxy with none of them running), the target gets
/// the rest of the log, then it owns the rows (version `cleanup`). Reads stay on the source
/// until then: the target is behind it until the log is read to its end.
pub(super) async fn cutover(
    shared: &Shared,
    c: &mut Conn,
    topo: &Topology,
    m: &Migration,
    lease: u64,
) -> Step<bool> {
    let window = lease + 1000;
    let mut e = ends(shared, topo, m).await?;
    let Some(mut tail) = binlog::Tail::of(m, &e.opts, &e.shapes)? else {
        return Err("the move's capture is not from a binary log".into());
    };
    // Most of the log while writes still run: the hold is then short.
    catch_up(shared, c, m, &mut tail, &mut e, &[]).await?;
    let v = version(
        shared,
        c,
        m,
        &m.source,
        "hold",
        Some(&m.target),
        "cutover",
        "cutover",
    )
    .await?;
    let frozen = Instant::now();
    let held: Step<()> = async {
        // The log is copied while the proxies acknowledge: the pass after that has little
        // left to copy.
        loop {
            let late = behind(c, v, window, Some(&m.target)).await?;
            if late.is_empty() {
                break;
            }
            if frozen.elapsed() > FREEZE_TIMEOUT {
                return Err(format!(
                    "proxies {} have not acknowledged version {v}",
                    late.join(", ")
                ));
            }
            catch_up(shared, c, m, &mut tail, &mut e, &[]).await?;
        }
        let acked = frozen.elapsed();
        // No write of the rows runs now: the log's end holds every one of them.
        loop {
            catch_up(shared, c, m, &mut tail, &mut e, &[]).await?;
            if tail.pending() == 0 {
                info!(
                    migration = m.id,
                    acked_ms = acked.as_millis() as u64,
                    caught_up_ms = frozen.elapsed().as_millis() as u64,
                    "held: the target has the source's binary log to its end"
                );
                return Ok(());
            }
            if frozen.elapsed() > FREEZE_TIMEOUT {
                return Err(format!(
                    "{} row(s) stayed locked on the source",
                    tail.pending()
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    .await;
    if let Err(why) = held {
        let why = format!("the hold did not end in time ({why})");
        return give_back(shared, c, m, "capture", why).await;
    }
    crate::hooks::migration_hold("frozen").await;
    // The point of no return: the target owns the rows.
    hand_over(shared, c, m, frozen, window).await
}
