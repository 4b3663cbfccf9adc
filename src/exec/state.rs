//! The session state every door keeps the same way: autocommit, the open transaction and
//! its node, a running DDL, where the session ran last and which node generated its last
//! insert id. The real door (`backend::session`) and the fake both hold one, so the fake
//! follows the real door's transaction rules by construction.

use mysql_common::constants::StatusFlags;

use crate::error::{MyError, ER_LOCK_DEADLOCK, ER_NOT_SUPPORTED_YET};

/// A transaction the session is in: its BEGIN text and the node it runs on once it touched one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tx {
    pub begin: String,
    pub node: Option<usize>,
    /// The connection it ran on was lost: the node rolled it back. Every statement fails
    /// until the client ends it, so no later write can silently run outside it.
    pub lost: bool,
}

/// What a statement on a node needs first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enter {
    /// Nothing: no transaction, or the transaction is already on that node (or the statement
    /// only reads elsewhere).
    Ready,
    /// The transaction's first statement: send its BEGIN there, then call
    /// [`SessionState::began`].
    Begin(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionState {
    pub autocommit: bool,
    pub tx: Option<Tx>,
    /// A DDL statement is running: outside any transaction, even with autocommit off.
    pub ddl: bool,
    pub last_node: Option<usize>,
    /// The node whose last INSERT generated an id: `LAST_INSERT_ID()` is asked there.
    pub insert_id_node: Option<usize>,
    /// The nodes where the session holds table locks (LOCK TABLES).
    pub locked: Vec<usize>,
}

impl Default for SessionState {
    fn default() -> Self {
        SessionState {
            autocommit: true,
            tx: None,
            ddl: false,
            last_node: None,
            insert_id_node: None,
            locked: Vec::new(),
        }
    }
}

/// The error of every statement of a transaction whose node connection was lost.
pub fn lost_tx() -> MyError {
    MyError::new(
        ER_LOCK_DEADLOCK,
        "shardproxy: the connection of this transaction to its node was lost and the node rolled the transaction back; ROLLBACK and retry it",
    )
}

impl SessionState {
    /// Before a statement on `node` (`write`: it changes rows): inside a transaction, the
    /// first node touched gets the BEGIN; a write elsewhere is refused (the transaction
    /// would span nodes). `name` names nodes for the message.
    pub fn enter(
        &mut self,
        node: usize,
        write: bool,
        name: impl Fn(usize) -> String,
    ) -> Result<Enter, MyError> {
        if self.tx.is_none() && !self.autocommit && !self.ddl {
            self.tx = Some(Tx {
                begin: "BEGIN".into(),
                node: None,
                lost: false,
            });
        }
        let Some(tx) = &self.tx else {
            return Ok(Enter::Ready);
        };
        if tx.lost {
            return Err(lost_tx());
        }
        match tx.node {
            Some(n) if n == node => Ok(Enter::Ready),
            Some(_) if !write => Ok(Enter::Ready),
            Some(n) => Err(MyError::new(
                ER_NOT_SUPPORTED_YET,
                format!(
                    "this transaction runs on node `{}`; a write on node `{}` would make it span two nodes, which shardproxy does not support yet",
                    name(n),
                    name(node)
                ),
            )),
            None => Ok(Enter::Begin(tx.begin.clone())),
        }
    }

    /// The transaction's BEGIN ran on `node`.
    pub fn began(&mut self, node: usize) {
        if let Some(tx) = self.tx.as_mut() {
            tx.node = Some(node);
        }
    }

    /// `node`'s connection is gone: a transaction there is lost.
    pub fn lost(&mut self, node: usize) -> bool {
        match self.tx.as_mut().filter(|t| t.node == Some(node)) {
            Some(tx) => {
                tx.lost = true;
                true
            }
            None => false,
        }
    }

    /// BEGIN: returns `true` when an open transaction on a node must be committed first.
    pub fn begin(&mut self, sql: &str) -> bool {
        let commit_first = self.tx.as_ref().is_some_and(|t| t.node.is_some());
        if !commit_first {
            self.tx = Some(Tx {
                begin: sql.to_string(),
                node: None,
                lost: false,
            });
        }
        commit_first
    }

    /// COMMIT / ROLLBACK: the node to send it to, if the transaction reached one.
    pub fn end(&mut self, commit: bool) -> Result<Option<usize>, MyError> {
        let tx = self.tx.take();
        if tx.as_ref().is_some_and(|t| t.lost) {
            return if commit { Err(lost_tx()) } else { Ok(None) };
        }
        Ok(tx.and_then(|t| t.node))
    }

    /// Where a statement that names no table runs (see `Door::sticky`).
    pub fn sticky(&self, insert_id: bool, default: usize) -> Option<usize> {
        let tx_node = self.tx_node();
        if tx_node.is_none() && self.last_node.is_none() && self.insert_id_node.is_none() {
            return None;
        }
        Some(match (tx_node, self.insert_id_node) {
            (Some(n), _) => n,
            (None, Some(n)) if insert_id => n,
            _ => self.last_node.unwrap_or(default),
        })
    }

    pub fn tx_node(&self) -> Option<usize> {
        self.tx.as_ref().and_then(|t| t.node)
    }

    /// Refuses a write over several parts inside a transaction (`what` names them).
    pub fn check_multi_write(&self, what: &str) -> Result<(), MyError> {
        if !self.ddl && (self.tx.is_some() || !self.autocommit) {
            return Err(MyError::new(
                ER_NOT_SUPPORTED_YET,
                format!(
                    "this write touches {what} inside a transaction; shardproxy does not support transactions across nodes yet"
                ),
            ));
        }
        Ok(())
    }

    pub fn ran_on(&mut self, node: usize, generated_id: bool) {
        self.last_node = Some(node);
        if generated_id {
            self.insert_id_node = Some(node);
        }
    }

    pub fn status(&self) -> StatusFlags {
        let mut s = StatusFlags::empty();
        if self.autocommit {
            s |= StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        }
        if self.tx.is_some() {
            s |= StatusFlags::SERVER_STATUS_IN_TRANS;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: usize) -> String {
        format!("ds{n}")
    }

    #[test]
    fn a_transaction_lives_on_its_first_node() {
        let mut s = SessionState::default();
        assert!(!s.begin("START TRANSACTION"));
        assert_eq!(
            s.enter(1, true, name),
            Ok(Enter::Begin("START TRANSACTION".into()))
        );
        s.began(1);
        assert_eq!(s.enter(1, true, name), Ok(Enter::Ready));
        assert_eq!(s.enter(0, false, name), Ok(Enter::Ready), "reads elsewhere");
        assert_eq!(s.enter(0, true, name).unwrap_err().code, 1235);
        assert!(s.status().contains(StatusFlags::SERVER_STATUS_IN_TRANS));
        assert!(
            s.begin("BEGIN"),
            "a BEGIN inside commits the open one first"
        );
        assert_eq!(s.end(true), Ok(Some(1)));
        assert_eq!(s.tx, None);
    }

    #[test]
    fn a_lost_transaction_fails_until_it_is_ended() {
        let mut s = SessionState {
            autocommit: false,
            ..Default::default()
        };
        assert_eq!(s.enter(2, true, name), Ok(Enter::Begin("BEGIN".into())));
        s.began(2);
        assert!(s.lost(2));
        assert_eq!(s.enter(2, false, name).unwrap_err().code, 1213);
        assert_eq!(s.end(true).unwrap_err().code, 1213);
        s.autocommit = false;
        assert_eq!(s.enter(2, true, name), Ok(Enter::Begin("BEGIN".into())));
        s.began(2);
        s.lost(2);
        assert_eq!(
            s.end(false),
            Ok(None),
            "ROLLBACK of a lost transaction is fine"
        );
    }

    #[test]
    fn ddl_runs_outside_the_transaction() {
        let mut s = SessionState {
            autocommit: false,
            ..Default::default()
        };
        assert!(s.check_multi_write("2 nodes").is_err());
        s.ddl = true;
        assert!(s.check_multi_write("2 nodes").is_ok());
        assert_eq!(s.enter(0, true, name), Ok(Enter::Ready));
        assert_eq!(s.tx, None);
    }

    #[test]
    fn sticky_node() {
        let mut s = SessionState::default();
        assert_eq!(s.sticky(false, 0), None);
        s.ran_on(2, true);
        s.ran_on(1, false);
        assert_eq!(s.sticky(false, 0), Some(1));
        assert_eq!(s.sticky(true, 0), Some(2));
    }
}
