//! This proxy's part in slot migrations (`crate::migrate` runs them): its heartbeat, the
//! fence that follows from it, and its counters. Every session reads it, so it lives with
//! the process's shared state.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::Topology;
use crate::error::MyError;
use crate::plan::Plan;

/// This proxy's migration state.
#[derive(Debug)]
pub struct Local {
    epoch: Instant,
    /// Milliseconds after `epoch` of the last heartbeat written, plus one (0: none yet).
    last_beat: AtomicU64,
    /// Row images that could not be written to a target, since the proxy started.
    pub shadow_failures: AtomicU64,
    /// Dual writes running now, by the node their images go to: a proxy acknowledges a
    /// move's freeze only when none runs toward its target.
    pub dual_writes: DualWrites,
    /// This proxy heartbeats (it watches a metadata schema with its rules file): only then
    /// does it take part in migrations, and only then is it fenced.
    watched: std::sync::atomic::AtomicBool,
    /// Milliseconds after `epoch` until which this proxy may act as the migrations' driver:
    /// its lease's last renewal (taken when it was sent) plus three quarters of the lease.
    /// 0: it does not drive.
    driving_until: AtomicU64,
    /// Woken when this proxy's driver wrote a slot-map version: the proxy reads it and
    /// heartbeats at once instead of at its next poll (a cutover's writes wait on both).
    poll_now: tokio::sync::Notify,
}

impl Default for Local {
    fn default() -> Self {
        Local {
            epoch: Instant::now(),
            last_beat: AtomicU64::new(0),
            shadow_failures: AtomicU64::new(0),
            dual_writes: DualWrites::default(),
            watched: Default::default(),
            driving_until: AtomicU64::new(0),
            poll_now: tokio::sync::Notify::new(),
        }
    }
}

/// The dual writes running, counted by their target node. A mutex, not atomics: a session
/// counts itself and then reads the rules' version, the heartbeat reads the version and then
/// the counts, and one of the two must see the other's write (`crate::shared::Running`).
#[derive(Debug, Default)]
pub struct DualWrites(Mutex<Vec<usize>>);

impl DualWrites {
    fn counts(&self) -> std::sync::MutexGuard<'_, Vec<usize>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn begin(&self, target: usize) {
        let mut v = self.counts();
        if v.len() <= target {
            v.resize(target + 1, 0);
        }
        v[target] += 1;
    }

    pub fn end(&self, target: usize) {
        if let Some(n) = self.counts().get_mut(target) {
            *n = n.saturating_sub(1);
        }
    }

    /// The targets some dual write runs toward now.
    pub fn busy(&self) -> Vec<usize> {
        let v = self.counts();
        (0..v.len()).filter(|i| v[*i] > 0).collect()
    }
}

/// A proxy that has not written its heartbeat for this many leases may have missed the
/// start of a move it knows nothing of: it stops writing every hash_slot table.
pub const BLIND_LEASES: u32 = 6;

/// MySQL's ER_OPTION_PREVENTS_STATEMENT: the fence's error.
const ER_OPTION_PREVENTS_STATEMENT: u16 = 1290;

impl Local {
    /// The proxy watches its metadata schema and heartbeats there.
    pub fn watched(&self) {
        self.watched.store(true, Ordering::Relaxed);
    }

    /// A slot-map version was written here: the watch polls at once (`Self::polled`).
    pub fn poll_now(&self) {
        self.poll_now.notify_one();
    }

    /// Waits for `every` or a [`Self::poll_now`], whichever comes first.
    pub async fn polled(&self, every: Duration) {
        let _ = tokio::time::timeout(every, self.poll_now.notified()).await;
    }

    /// The heartbeat written at `at` (taken before it was sent).
    pub fn beat(&self, at: Instant) {
        let ms = at.saturating_duration_since(self.epoch).as_millis() as u64;
        self.last_beat.fetch_max(ms + 1, Ordering::Relaxed);
    }

    /// The driver's lease was renewed (the renewal sent at `at`) for `lease`.
    pub fn drives(&self, at: Instant, lease: Duration) {
        let until = at.saturating_duration_since(self.epoch) + lease * 3 / 4;
        self.driving_until
            .store(until.as_millis() as u64, Ordering::SeqCst);
    }

    /// The lease is given back or lost.
    pub fn stops_driving(&self) {
        self.driving_until.store(0, Ordering::SeqCst);
    }

    /// May this proxy act as the driver now (its lease certainly its own)? Checked before
    /// each step and each batch, and after opening the nodes' connections.
    pub fn may_drive(&self) -> bool {
        let now = Instant::now()
            .saturating_duration_since(self.epoch)
            .as_millis() as u64;
        now < self.driving_until.load(Ordering::SeqCst)
    }

    /// How long since the last heartbeat (since start when there was none).
    pub fn silence(&self) -> Duration {
        let last = self.last_beat.load(Ordering::Relaxed);
        let since = Instant::now().saturating_duration_since(self.epoch);
        since.saturating_sub(Duration::from_millis(last.saturating_sub(1)))
    }

    /// Would a write to a hash_slot table be fenced (see [`Local::fence`])? For the cached
    /// plans' path, which skips planning: a fenced write goes on to be planned, and refused.
    pub fn blind(&self, topo: &Topology) -> bool {
        let Some(meta) = topo.metadata.as_ref() else {
            return false;
        };
        self.watched.load(Ordering::Relaxed)
            && (self.last_beat.load(Ordering::Relaxed) == 0
                || self.silence() > Duration::from_millis(meta.lease_ms) * BLIND_LEASES)
    }

    /// The fence: `Some(error)` when this proxy must not run `plan` because it may be
    /// writing where the other proxies no longer look. Only with a metadata schema (several
    /// proxies). A proxy that has not heartbeated within its lease is fenced from the slots
    /// it knows to be moving; one that has not heartbeated yet, or not for
    /// [`BLIND_LEASES`] leases, from every write to a hash_slot table (`sharded`), as it may
    /// not know of a move at all.
    pub fn fence(&self, topo: &Topology, plan: &Plan, sharded: bool) -> Option<MyError> {
        let meta = topo.metadata.as_ref()?;
        if !self.watched.load(Ordering::Relaxed) {
            return None;
        }
        let lease = Duration::from_millis(meta.lease_ms);
        let silence = self.silence();
        let never = self.last_beat.load(Ordering::Relaxed) == 0;
        if silence <= lease && !never {
            return None;
        }
        let moving = matches!(
            plan,
            Plan::DualWrite(_) | Plan::Captured { .. } | Plan::Frozen { .. }
        );
        let blind = sharded && (never || silence > lease * BLIND_LEASES);
        (moving || blind).then(|| {
            let since = if never {
                "has not reached its metadata schema yet".to_string()
            } else {
                format!("has not reached its metadata schema for {} ms", silence.as_millis())
            };
            MyError::new(
                ER_OPTION_PREVENTS_STATEMENT,
                format!(
                    "shardproxy: this proxy {since} (lease {} ms), so it may not know where moving slots are written; it refuses such writes until it does",
                    meta.lease_ms
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_topology;

    fn topo(metadata: bool) -> Topology {
        let mut t = test_topology(
            1,
            2,
            "[tables.t]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
             slots = [{ slots = \"0-511\", node = \"ds0\", to = \"ds1\", step = \"dual_write\" }, { slots = \"512-1023\", node = \"ds1\" }]\n",
        );
        if metadata {
            t.metadata = Some(crate::config::MetadataSection {
                url: "mysql://root:root@127.0.0.1:1/meta".into(),
                poll_ms: 100,
                lease_ms: 50,
                max_parallel_moves: 2,
                capture: Default::default(),
                copy_slowdown_pct: 15,
            });
        }
        t
    }

    fn frozen() -> Plan {
        Plan::Frozen {
            table: "t".into(),
            unless: None,
        }
    }

    fn route() -> Plan {
        Plan::Route(crate::plan::Target {
            node: 1,
            sql: "UPDATE t SET v = 1 WHERE id = 1".into(),
            params: vec![],
        })
    }

    #[test]
    fn a_proxy_that_does_not_heartbeat_is_fenced_from_moving_slots_then_from_every_sharded_write() {
        let l = Local::default();
        // Without a metadata schema, or not watching one, nothing is fenced.
        assert!(l.fence(&topo(false), &frozen(), true).is_none());
        assert!(l.fence(&topo(true), &frozen(), true).is_none());
        l.watched();
        // Before its first heartbeat: no sharded write at all.
        let e = l.fence(&topo(true), &route(), true).expect("fenced");
        assert_eq!(e.code, 1290);
        assert!(
            e.message.contains("not reached its metadata schema yet"),
            "{}",
            e.message
        );
        assert!(
            l.fence(&topo(true), &route(), false).is_none(),
            "reads and unsharded writes pass"
        );
        // Heartbeating: nothing fenced.
        l.beat(Instant::now());
        assert!(l.fence(&topo(true), &frozen(), true).is_none());
        assert!(l.fence(&topo(true), &route(), true).is_none());
        // Silent past its lease (50 ms): writes to moving slots fail, others still go.
        std::thread::sleep(Duration::from_millis(80));
        assert!(l.fence(&topo(true), &frozen(), true).is_some());
        assert!(l.fence(&topo(true), &route(), true).is_none());
        // Past six leases it may have missed a move it knows nothing of.
        std::thread::sleep(Duration::from_millis(260));
        assert!(l.fence(&topo(true), &route(), true).is_some());
        assert!(l.blind(&topo(true)));
        // A heartbeat lifts the fence.
        l.beat(Instant::now());
        assert!(!l.blind(&topo(true)));
        assert!(l.fence(&topo(true), &route(), true).is_none());
    }
}
