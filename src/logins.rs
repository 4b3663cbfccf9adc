//! Clients that have not logged in yet, by the address they come from: how many are in
//! their handshake at once (a host may hold only so many: unauthenticated sockets from one
//! address cannot fill `max_connections` for everyone), and how many of their logins failed
//! lately (each failure answered later than the one before, up to a few seconds: a
//! password cannot be guessed at the speed of the network).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Failures older than this are forgotten.
const MEMORY: Duration = Duration::from_secs(60);
/// The first failure's delay; each further one doubles it, up to [`MAX_DELAY`].
const FIRST_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_secs(3);
/// Addresses held before old failures are swept out.
const PRUNE_AT: usize = 10_000;

#[derive(Default)]
struct Peer {
    handshaking: usize,
    failures: u32,
    last_failure: Option<Instant>,
}

#[derive(Default, Clone)]
pub struct Logins {
    peers: Arc<Mutex<HashMap<String, Peer>>>,
}

/// A client in its handshake, counted against its address until dropped.
pub struct Handshaking {
    peers: Arc<Mutex<HashMap<String, Peer>>>,
    peer: String,
}

impl Logins {
    /// Counts a new client from `peer` in its handshake; `None` when `limit` clients from
    /// there are in theirs already (0: no limit).
    pub fn begin(&self, peer: &str, limit: usize) -> Option<Handshaking> {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let p = peers.entry(peer.to_string()).or_default();
        if limit > 0 && p.handshaking >= limit {
            return None;
        }
        p.handshaking += 1;
        Some(Handshaking {
            peers: self.peers.clone(),
            peer: peer.to_string(),
        })
    }

    /// A login from `peer` failed: how long to wait before answering it.
    pub fn failed(&self, peer: &str) -> Duration {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        // Many addresses (an IPv6 range) must not grow the map without end: past a bound,
        // what is forgotten anyway goes.
        if peers.len() >= PRUNE_AT {
            peers.retain(|_, p| {
                p.handshaking > 0
                    || p.last_failure
                        .is_some_and(|t| now.duration_since(t) <= MEMORY)
            });
        }
        let p = peers.entry(peer.to_string()).or_default();
        if p.last_failure
            .is_some_and(|t| now.duration_since(t) > MEMORY)
        {
            p.failures = 0;
        }
        p.failures = p.failures.saturating_add(1);
        p.last_failure = Some(now);
        let doublings = p.failures.saturating_sub(1).min(16);
        FIRST_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY)
    }

    /// A login from `peer` succeeded: its failures are forgiven.
    pub fn succeeded(&self, peer: &str) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = peers.get_mut(peer) {
            p.failures = 0;
            p.last_failure = None;
        }
        forget_idle(&mut peers, peer);
    }
}

fn forget_idle(peers: &mut HashMap<String, Peer>, peer: &str) {
    if peers
        .get(peer)
        .is_some_and(|p| p.handshaking == 0 && p.failures == 0)
    {
        peers.remove(peer);
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = peers.get_mut(&self.peer) {
            p.handshaking = p.handshaking.saturating_sub(1);
            if p.last_failure.is_some_and(|t| t.elapsed() > MEMORY) {
                p.failures = 0;
                p.last_failure = None;
            }
        }
        forget_idle(&mut peers, &self.peer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_holds_so_many_handshakes_and_waits_longer_after_each_failure() {
        let l = Logins::default();
        let a = l.begin("10.0.0.1", 2).expect("first");
        let _b = l.begin("10.0.0.1", 2).expect("second");
        assert!(
            l.begin("10.0.0.1", 2).is_none(),
            "a third from the same host"
        );
        assert!(l.begin("10.0.0.2", 2).is_some(), "another host");
        drop(a);
        assert!(l.begin("10.0.0.1", 2).is_some(), "a place freed");
        assert!(l.begin("10.0.0.1", 0).is_some(), "0: no limit");
        let delays: Vec<u128> = (0..8).map(|_| l.failed("10.0.0.3").as_millis()).collect();
        assert_eq!(delays, vec![100, 200, 400, 800, 1600, 3000, 3000, 3000]);
        l.succeeded("10.0.0.3");
        assert_eq!(l.failed("10.0.0.3").as_millis(), 100);
        assert_eq!(l.failed("10.0.0.4").as_millis(), 100, "per host");
    }
}
