//! Read replicas: what the proxy knows of each replica of a node, and the rules a read goes
//! by. The checks that feed it run in `crate::pools::replicas`; the sessions that read from
//! replicas are `crate::backend::session`'s.
//!
//! **Lag** is time, not transactions: a replica's lag is how long ago it was last seen
//! holding every transaction its primary had logged when that check began (the primary's
//! `@@gtid_binlog_pos` read first, then the replica's `Gtid_Slave_Pos`). So it is a bound
//! on what a read there can miss, known to within one check, whatever the cause: a replica
//! behind, one whose replication stopped while the primary writes, one that hangs (its
//! check does not answer, its lag grows). A replica whose primary writes nothing is never
//! stale, stopped replication or not.
//!
//! **Read your writes**: a session remembers, per node, the GTID of its last write there
//! (the OK packet's `last_gtid`, MariaDB's session tracking). A replica that holds it (as
//! far as its checks and the waits on it have shown) reads at once; else it is asked to
//! wait for it (`MASTER_GTID_WAIT`, `[replicas] wait_ms`), else the read goes to the
//! primary.

pub mod gtid;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use gtid::{Gtid, Position};

/// What the last check of a replica found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Not checked yet.
    Unknown,
    /// Both replication threads run.
    Replicating,
    /// A replication thread is stopped (STOP SLAVE), without an error.
    Stopped,
    /// Replication stopped on an error: out of rotation, whatever its position.
    Broken,
    /// The server is no replica (SHOW SLAVE STATUS is empty).
    NotReplica,
    /// The check failed or did not answer in time.
    Unreachable,
    /// It replicates some server other than its node's primary (or has not reached one
    /// yet): its rows are not the node's.
    Elsewhere,
}

impl Seen {
    pub fn word(self) -> &'static str {
        match self {
            Seen::Unknown => "unknown",
            Seen::Replicating => "replicating",
            Seen::Stopped => "stopped",
            Seen::Broken => "broken",
            Seen::NotReplica => "not a replica",
            Seen::Unreachable => "unreachable",
            Seen::Elsewhere => "not replicating its primary",
        }
    }
}

struct State {
    seen: Seen,
    /// When the latest check that found it holding all its primary had logged began.
    synced_at: Option<Instant>,
    /// The GTIDs it is known to hold (its last check's position, and waits since).
    applied: Position,
    /// The last failure or replication error, for SHOW NODES.
    error: Option<String>,
}

/// One replica of one node, as the proxy knows it.
pub struct Health {
    pub name: String,
    state: Mutex<State>,
    /// The proxy's reads running on it now.
    busy: AtomicUsize,
    /// Reads sent to it since the proxy started.
    reads: AtomicU64,
    max_lag_ms: AtomicU64,
}

impl Health {
    pub fn new(name: &str) -> Self {
        Health {
            name: name.to_string(),
            state: Mutex::new(State {
                seen: Seen::Unknown,
                synced_at: None,
                applied: Position::default(),
                error: None,
            }),
            busy: AtomicUsize::new(0),
            reads: AtomicU64::new(0),
            max_lag_ms: AtomicU64::new(1000),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How stale a read there may be: since the last check that found it in sync (`None`:
    /// never found so).
    pub fn lag(&self, now: Instant) -> Option<Duration> {
        let s = self.lock();
        // A replica whose replication failed may hold other rows than its primary (a
        // duplicate key, a missing row): nothing it says is known to be right.
        if matches!(
            s.seen,
            Seen::Unreachable | Seen::NotReplica | Seen::Unknown | Seen::Broken | Seen::Elsewhere
        ) {
            return None;
        }
        s.synced_at.map(|t| now.saturating_duration_since(t))
    }

    /// In rotation: reachable, a replica, and lagging at most `max_lag`.
    pub fn usable(&self, now: Instant, max_lag: Duration) -> bool {
        self.lag(now).is_some_and(|l| l <= max_lag)
    }

    /// In rotation under the bound it was last given (see [`Health::set_max_lag`]).
    pub fn in_rotation(&self, now: Instant) -> bool {
        self.usable(
            now,
            Duration::from_millis(self.max_lag_ms.load(Ordering::Relaxed)),
        )
    }

    /// The `[replicas] max_lag_ms` in force (for what only shows the replica).
    pub fn set_max_lag(&self, ms: u64) {
        self.max_lag_ms.store(ms, Ordering::Relaxed);
    }

    /// Known to hold the transaction `g`.
    pub fn holds(&self, g: &Gtid) -> bool {
        self.lock().applied.covers(g)
    }

    /// Known to have been in sync after `t` (every transaction committed before `t` is
    /// there).
    pub fn synced_after(&self, t: Instant) -> bool {
        self.lock().synced_at.is_some_and(|s| s > t)
    }

    /// A wait there for `g` succeeded.
    pub fn applied(&self, g: Gtid) {
        self.lock().applied.add(g);
    }

    /// A check begun at `began` found the primary at `primary` (read first) and the
    /// replica at `at`, its threads as `seen`.
    pub fn checked(
        &self,
        began: Instant,
        primary: &Position,
        at: Position,
        seen: Seen,
        error: Option<String>,
    ) {
        let mut s = self.lock();
        if at.covers_all(primary) && s.synced_at.is_none_or(|t| t < began) {
            s.synced_at = Some(began);
        }
        // Waits since the check read the position may have seen later GTIDs.
        for g in at.gtids() {
            s.applied.add(*g);
        }
        s.seen = seen;
        s.error = error;
    }

    /// A check failed: the replica (or its primary, `seen` Unknown then) did not answer.
    pub fn failed(&self, seen: Seen, error: String) {
        let mut s = self.lock();
        s.seen = seen;
        s.error = Some(error);
    }

    /// A failure that says nothing of the replica itself (its primary did not answer).
    pub fn note_error(&self, error: String) {
        self.lock().error = Some(error);
    }

    pub fn seen(&self) -> Seen {
        self.lock().seen
    }

    pub fn error(&self) -> Option<String> {
        self.lock().error.clone()
    }

    pub fn position(&self) -> String {
        self.lock().applied.to_string()
    }

    pub fn busy(&self) -> usize {
        self.busy.load(Ordering::Relaxed)
    }

    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// A read starts there: counted until the guard drops.
    pub fn reading(self: &std::sync::Arc<Self>) -> Reading {
        self.busy.fetch_add(1, Ordering::Relaxed);
        self.reads.fetch_add(1, Ordering::Relaxed);
        Reading(self.clone())
    }
}

/// A read running on a replica (for `least_busy`).
pub struct Reading(std::sync::Arc<Health>);

impl Reading {
    pub fn health(&self) -> &Health {
        &self.0
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a session must see on a node: nothing, its last write's GTID there, or a write
/// whose GTID it could not learn (committed before `at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    Gtid(Gtid),
    Before(Instant),
}

impl Needs {
    /// Does `h` hold it, as far as is known?
    pub fn met_by(&self, h: &Health) -> bool {
        match self {
            Needs::Gtid(g) => h.holds(g),
            Needs::Before(t) => h.synced_after(*t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(s: &str) -> Position {
        Position::parse(s).expect("a position")
    }

    #[test]
    fn lag_is_the_time_since_the_replica_was_last_seen_in_sync() {
        let h = Health::new("ds0/r1");
        let t0 = Instant::now();
        let max = Duration::from_millis(1000);
        assert!(!h.usable(t0, max), "never checked: out of rotation");
        h.checked(t0, &pos("0-1-10"), pos("0-1-10"), Seen::Replicating, None);
        assert!(h.usable(t0 + Duration::from_millis(500), max));
        // Behind at the next checks: its lag grows from the last sync.
        let t1 = t0 + Duration::from_millis(300);
        h.checked(t1, &pos("0-1-20"), pos("0-1-12"), Seen::Replicating, None);
        assert_eq!(
            h.lag(t1 + Duration::from_millis(900)),
            Some(Duration::from_millis(1200))
        );
        assert!(!h.usable(t1 + Duration::from_millis(900), max));
        // Caught up: back.
        let t2 = t1 + Duration::from_millis(1000);
        h.checked(t2, &pos("0-1-20"), pos("0-1-20"), Seen::Stopped, None);
        assert!(h.usable(t2 + Duration::from_millis(10), max));
        // Unreachable: out at once.
        h.failed(Seen::Unreachable, "timed out".into());
        assert!(!h.usable(t2 + Duration::from_millis(10), max));
        // Broken replication: out at once, in sync or not.
        let t3 = t2 + Duration::from_millis(100);
        h.checked(
            t3,
            &pos("0-1-20"),
            pos("0-1-20"),
            Seen::Broken,
            Some("1062".into()),
        );
        assert!(!h.usable(t3 + Duration::from_millis(10), max));
    }

    #[test]
    fn a_session_needs_its_write_or_a_sync_after_it() {
        let h = Health::new("ds0/r1");
        let t0 = Instant::now();
        h.checked(t0, &pos("0-1-10"), pos("0-1-10"), Seen::Replicating, None);
        let g = Gtid::parse("0-1-11").expect("gtid");
        assert!(!Needs::Gtid(g).met_by(&h));
        h.applied(g);
        assert!(Needs::Gtid(g).met_by(&h));
        let wrote = t0 + Duration::from_millis(5);
        assert!(!Needs::Before(wrote).met_by(&h));
        h.checked(
            wrote + Duration::from_millis(1),
            &pos("0-1-11"),
            pos("0-1-11"),
            Seen::Replicating,
            None,
        );
        assert!(Needs::Before(wrote).met_by(&h));
    }
}
