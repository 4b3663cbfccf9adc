//! The register of transactions' branch connections across nodes, which sessions keep and
//! the detector of deadlocks across nodes (`deadlock.rs`) reads.

use std::collections::{HashMap, HashSet};

/// Node connections of transactions that span nodes, and the waits the detector broke.
#[derive(Default)]
pub struct Registry {
    /// Session -> its branches' (node, connection id).
    pub(super) branches: std::sync::Mutex<HashMap<u32, Vec<(usize, u32)>>>,
    /// (node, connection id) whose statement was killed to break a cycle: its error is
    /// the deadlock, not an interruption.
    pub(super) victims: std::sync::Mutex<HashSet<(usize, u32)>>,
    /// Sessions whose transaction the proxy opened itself and runs again whole after a
    /// deadlock (an autocommit write with global indexes): a wait that may close a cycle
    /// through another proxy's transaction is broken there too.
    pub(super) retryable: std::sync::Mutex<HashSet<u32>>,
}

impl Registry {
    pub fn register(&self, session: u32, conns: Vec<(usize, u32)>) {
        let mut b = self.branches.lock().unwrap_or_else(|e| e.into_inner());
        if b.get(&session) != Some(&conns) {
            b.insert(session, conns);
        }
    }

    /// The session's transaction ended: its connections leave the graph, and a kill the
    /// detector aimed at one of them that hit nothing is forgotten (a later interruption
    /// there is not a deadlock).
    pub fn unregister(&self, session: u32) {
        let gone = self
            .branches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&session);
        self.set_retryable(session, false);
        if let Some(conns) = gone {
            let mut v = self.victims.lock().unwrap_or_else(|e| e.into_inner());
            for c in conns {
                v.remove(&c);
            }
        }
    }

    /// The session's transaction is (or no longer is) one the proxy runs again after a
    /// deadlock.
    pub fn set_retryable(&self, session: u32, on: bool) {
        let mut r = self.retryable.lock().unwrap_or_else(|e| e.into_inner());
        if on {
            r.insert(session);
        } else {
            r.remove(&session);
        }
    }

    pub(super) fn retryable(&self) -> HashSet<u32> {
        self.retryable
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Was the statement on this connection killed by the detector? (Once.)
    pub fn take_victim(&self, node: usize, conn: u32) -> bool {
        self.victims
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(node, conn))
    }

    pub(super) fn snapshot(&self) -> HashMap<u32, Vec<(usize, u32)>> {
        self.branches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
