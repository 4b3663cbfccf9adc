//! This proxy kept in step with the shared metadata schema ([`crate::metadata`]): a newer
//! version there is merged over the rules file's own tables, validated like a file, and
//! offered like any reload; each poll is followed by this proxy's heartbeat.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mysql_async::Pool;
use tracing::{info, warn};

use crate::metadata::{create_schema, merge_into, read, version, MAX_VERSION};
use crate::shared::{Reload, Shared};

/// Loads the metadata if its version is newer than the running rules.
pub async fn poll_once(
    shared: &Shared,
    pool: &Pool,
    file: &Path,
    origin: &str,
) -> Result<Option<Reload>, String> {
    let v = version(pool)
        .await
        .map_err(|e| format!("metadata {origin}: {e}"))?;
    if v <= shared.topology().version {
        return Ok(None);
    }
    if v >= MAX_VERSION {
        return Err(format!(
            "metadata {origin}: version {v} is out of range (versions stay below {MAX_VERSION}); not loaded"
        ));
    }
    let rows = read(pool)
        .await
        .map_err(|e| format!("metadata {origin}: {e}"))?;
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let merged = merge_into(&text, &rows)?;
    let outcome = match crate::config::parse(
        &merged,
        &format!("metadata {origin} over {}", file.display()),
    ) {
        Ok(t) => shared.offer(t),
        Err(e) => Reload::Refused(e.to_string()),
    };
    match &outcome {
        Reload::Applied { from, to } => {
            info!("rules reloaded from metadata {origin}: version {from} -> {to}")
        }
        Reload::Refused(reason) => {
            shared
                .reloads_refused
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            shared.metrics.reloads.with_label_values(&["refused"]).inc();
            warn!("metadata reload refused, the running rules stay: {reason}")
        }
        Reload::Ignored { .. } => {}
    }
    Ok(Some(outcome))
}

/// Creates the schema's tables if missing, then polls every `poll_ms` (every few ms while
/// slots move), each poll followed by this proxy's heartbeat.
pub async fn watch(shared: Arc<Shared>, file: PathBuf) {
    let Some(w) = Watch::new(&shared, file) else {
        return;
    };
    loop {
        let topo = shared.topology();
        let every = if crate::plan::moving::any_moving(&topo) {
            w.poll_ms.min(MOVING_POLL_MS)
        } else {
            w.poll_ms
        };
        shared.migration.polled(Duration::from_millis(every)).await;
        w.sync(&shared).await;
    }
}

/// Loads the metadata's rules and writes the first heartbeat before the proxy serves
/// clients (within `limit`): a proxy that has not heartbeated is fenced from sharded writes.
pub async fn first_sync(shared: &Arc<Shared>, file: PathBuf, limit: Duration) {
    let Some(w) = Watch::new(shared, file) else {
        return;
    };
    let _ = tokio::time::timeout(limit, async {
        while !w.sync(shared).await {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    w.pool.disconnect().await.ok();
}

struct Watch {
    pool: Pool,
    file: PathBuf,
    origin: String,
    poll_ms: u64,
    proxy: String,
    ready: std::sync::atomic::AtomicBool,
    /// The rules version no command begun under an older one still runs on.
    settled: std::sync::atomic::AtomicU64,
}

impl Watch {
    fn new(shared: &Shared, file: PathBuf) -> Option<Watch> {
        let meta = shared.topology().metadata.clone()?;
        let origin = masked(&meta.url);
        // Its connections take no lock and leave no transaction: they come back unreset,
        // so the heartbeat's prepared statement is kept (a reset drops it, and each of the
        // 50 heartbeats a second while slots move would prepare it again).
        let pool = match mysql_async::Opts::from_url(&meta.url) {
            Ok(o) => Pool::new(
                mysql_async::OptsBuilder::from_opts(o)
                    .pool_opts(mysql_async::PoolOpts::default().with_reset_connection(false)),
            ),
            Err(e) => {
                warn!("metadata url {origin}: {e}");
                return None;
            }
        };
        shared.migration.watched();
        Some(Watch {
            pool,
            file,
            origin,
            poll_ms: meta.poll_ms,
            proxy: shared.instance().to_string(),
            ready: Default::default(),
            settled: Default::default(),
        })
    }

    /// One poll and heartbeat; whether both went through.
    async fn sync(&self, shared: &Shared) -> bool {
        use std::sync::atomic::Ordering;
        let origin = &self.origin;
        if !self.ready.load(Ordering::Relaxed) {
            match create_schema(&self.pool).await {
                Ok(()) => self.ready.store(true, Ordering::Relaxed),
                Err(e) => {
                    warn!("metadata {origin}: {e}");
                    return false;
                }
            }
        }
        let at = std::time::Instant::now();
        if let Err(e) = poll_once(shared, &self.pool, &self.file, origin).await {
            warn!("{e}");
            return false;
        }
        // The version this proxy runs now, then whether a dual write runs (in that order:
        // see `crate::shared::Running`).
        let version = shared.topology().version;
        let m = &shared.migration;
        let topo = shared.topology();
        let busy: Vec<String> = m
            .dual_writes
            .busy()
            .into_iter()
            .map(|n| topo.node_name(n).to_string())
            .collect();
        let failures = m.shadow_failures.load(Ordering::Relaxed);
        // Settled on `version` once no command begun before this moment still runs (they
        // all read it or a newer one): what a global index's build waits for.
        // Only while this version is not settled yet: a settled proxy's polls wait for nothing.
        if self.settled.load(Ordering::Relaxed) < version {
            let bound = std::time::Duration::from_millis(self.poll_ms.clamp(10, 500));
            if shared.epochs.barrier(bound).await.is_ok() {
                self.settled.fetch_max(version, Ordering::Relaxed);
            }
        }
        let settled = self.settled.load(Ordering::Relaxed);
        match crate::metadata::migrations::heartbeat(
            &self.pool,
            &self.proxy,
            version,
            &busy,
            failures,
            settled,
        )
        .await
        {
            Ok(()) => {
                m.beat(at);
                true
            }
            Err(e) => {
                warn!("metadata {origin}: heartbeat: {e}");
                false
            }
        }
    }
}

/// How often proxies look at the metadata while slots move (at most `poll_ms`).
const MOVING_POLL_MS: u64 = 20;

fn masked(url: &str) -> String {
    crate::config::masked_url(url)
}
