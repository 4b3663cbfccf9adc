//! The proxy's client sessions by connection id, for `KILL`: a client sees the proxy's
//! connection ids (the handshake's thread id, which `CONNECTION_ID()` answers too), so `KILL
//! QUERY n` must stop the statements session n runs on its nodes, and `KILL n` must also
//! close that session; sending the KILL to a node would kill whatever node connection has
//! that number there.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// What another session may do to this one.
#[derive(Default)]
pub struct SessionCtl {
    /// The user it logged in as (MySQL lets a user kill only its own sessions).
    user: Mutex<String>,
    /// The node connections (node, connection id) of the statement it is running.
    running: Mutex<Vec<(usize, Option<usize>, u32)>>,
    /// `KILL CONNECTION`: the session ends after its current command.
    killed: AtomicBool,
    wake: Notify,
}

impl SessionCtl {
    pub fn set_user(&self, user: &str) {
        *self.user.lock().unwrap_or_else(|e| e.into_inner()) = user.to_string();
    }

    pub fn user(&self) -> String {
        self.user.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The statement about to run uses these node connections.
    /// (node, the replica's index when the connection is to one, the server's thread id).
    pub fn running(&self, conns: &[(usize, Option<usize>, u32)]) {
        let mut r = self.running.lock().unwrap_or_else(|e| e.into_inner());
        r.clear();
        r.extend_from_slice(conns);
    }

    /// Between statements.
    pub fn idle(&self) {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub fn running_now(&self) -> Vec<(usize, Option<usize>, u32)> {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// Resolves once the session is killed.
    pub async fn killed(&self) {
        while !self.is_killed() {
            self.wake.notified().await;
        }
    }
}

#[derive(Default)]
pub struct Sessions {
    map: Mutex<HashMap<u32, Arc<SessionCtl>>>,
}

impl Sessions {
    pub fn register(&self, id: u32) -> Arc<SessionCtl> {
        let ctl = Arc::new(SessionCtl::default());
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, ctl.clone());
        ctl
    }

    pub fn unregister(&self, id: u32) {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }

    pub fn get(&self, id: u32) -> Option<Arc<SessionCtl>> {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_killed_session_is_woken_and_its_running_statement_known() {
        let s = Sessions::default();
        let ctl = s.register(7);
        ctl.set_user("app");
        ctl.running(&[(0, None, 41), (2, Some(1), 9)]);
        let other = s.get(7).unwrap();
        assert_eq!(other.user(), "app");
        assert_eq!(other.running_now(), vec![(0, None, 41), (2, Some(1), 9)]);
        let waiting = tokio::spawn({
            let ctl = ctl.clone();
            async move { ctl.killed().await }
        });
        other.kill();
        waiting.await.unwrap();
        ctl.idle();
        assert!(other.running_now().is_empty());
        s.unregister(7);
        assert!(s.get(7).is_none());
    }
}
