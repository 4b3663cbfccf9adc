//! The session state every door keeps the same way: autocommit, the open transaction and
//! its node, a running DDL, where the session ran last and which node generated its last
//! insert id. The real door (`backend::session`) and the fake both hold one, so the fake
//! follows the real door's transaction rules by construction.

use mysql_common::constants::StatusFlags;

use crate::config::TxMode;
use crate::error::{MyError, ER_LOCK_DEADLOCK};

/// A transaction the session is in: its BEGIN text and its branches, one per node it
/// touched, in the order it touched them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tx {
    pub begin: String,
    pub branches: Vec<Branch>,
    /// A branch's connection was lost, or a deadlock rolled the transaction back on a
    /// node: every statement fails until the client ends it, so no later write can
    /// silently run outside it.
    pub lost: bool,
    /// The transaction's XA id (its gtrid), once a second branch opened in XA mode.
    pub xid: Option<String>,
    /// The savepoints set so far, in order (name, SAVEPOINT statement): replayed on a branch
    /// that opens later, so ROLLBACK TO finds them on every branch.
    pub savepoints: Vec<(String, String)>,
    /// To be rolled back on every node once the statement is answered: a deadlock on one of
    /// its nodes, or a write over several nodes that could not be undone on all of them.
    pub abort: bool,
    /// Every branch opens READ COMMITTED: the proxy's own transaction around one client
    /// statement whose locking reads must lock the rows they find and never the gaps
    /// between them (`SessionState::read_committed`).
    pub read_committed: bool,
}

/// What opens a branch READ COMMITTED (the next transaction only: the connection's own
/// level is back once it ends).
const READ_COMMITTED: &str = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; ";

/// The transaction's part on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Branch {
    pub node: usize,
    /// Opened with XA START (every branch but the first, in XA mode); the first is a plain
    /// transaction, so a transaction on one node costs what it costs without the proxy.
    pub xa: bool,
    /// A statement that may change rows ran on it.
    pub wrote: bool,
    /// What it wrote is only row images of slots being moved (`super::dual_write`): it
    /// commits after the transaction's own branches, and its failure is the migration's,
    /// never the client's.
    pub shadow: bool,
}

/// What a statement on a node needs first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enter {
    /// Nothing: no transaction, or it already has a branch on that node.
    Ready,
    /// The transaction's branch on that node opens first: send these statements there (its
    /// BEGIN or XA START, then the savepoints so far), then call [`SessionState::began`].
    Begin { sql: String, xa: bool },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionState {
    pub autocommit: bool,
    pub tx: Option<Tx>,
    /// A DDL statement is running: outside any transaction, even with autocommit off.
    pub ddl: bool,
    pub last_node: Option<usize>,
    /// The node whose last INSERT generated an id: `LAST_INSERT_ID()` is read there.
    pub insert_id_node: Option<usize>,
    /// The session's `LAST_INSERT_ID()` is known to the proxy (`crate::sql::seen`); if not,
    /// the connection to `insert_id_node` stays the session's and is asked.
    pub insert_id_known: bool,
    /// The session's last statement left warnings or an error on its connection to
    /// `last_node`: it stays the session's for `SHOW WARNINGS`.
    pub diagnostics: bool,
    /// The nodes where the session holds table locks (LOCK TABLES).
    pub locked: Vec<usize>,
    /// Row images of a migration are being written to this node (`super::dual_write`): the
    /// branch there opens, or stays, as a [`Branch::shadow`].
    pub shadowing: Option<usize>,
    /// How the session's `sql_mode` reads text (`NO_BACKSLASH_ESCAPES`, `ANSI_QUOTES`), as
    /// the nodes last reported it: statements are read, split and digested in it.
    pub mode: crate::sql::lex::Mode,
    /// The session's `character_set_client`, as the nodes last reported it: the charset a
    /// bound string parameter is written in when the proxy writes it into SQL.
    pub charset: String,
}

impl Default for SessionState {
    fn default() -> Self {
        SessionState {
            autocommit: true,
            tx: None,
            ddl: false,
            last_node: None,
            insert_id_node: None,
            insert_id_known: true,
            diagnostics: false,
            locked: Vec::new(),
            shadowing: None,
            mode: crate::sql::lex::Mode::default(),
            charset: "utf8mb4".into(),
        }
    }
}

/// The error of every statement of a transaction whose node connection was lost.
pub fn lost_tx() -> MyError {
    MyError::new(
        ER_LOCK_DEADLOCK,
        "shardproxy: the connection of this transaction to one of its nodes was lost and the transaction was rolled back; ROLLBACK and retry it",
    )
}

/// A transaction id's branch qualifier and format: `'gtrid',X'bqual',FORMAT`. The branch
/// qualifier names the node that holds the transaction's decision record.
pub const XA_FORMAT: u32 = 0x5350;

/// The xid of a branch, as XA statements take it.
pub fn xid_sql(gtrid: &str, decision_node: &str) -> String {
    let hex: String = decision_node
        .bytes()
        .take(64)
        .map(|b| format!("{b:02X}"))
        .collect();
    format!(
        "{},X'{hex}',{XA_FORMAT}",
        crate::sql::write::token_literal(gtrid)
    )
}

/// Is this BEGIN text a read-only transaction? (No XA there: nothing to commit atomically.)
fn read_only(begin: &str) -> bool {
    let w = crate::sql::leading_words(begin, 8);
    w.windows(2).any(|p| {
        p[0].eq_ignore_ascii_case("READ") && p[1].trim_end_matches(',').eq_ignore_ascii_case("ONLY")
    })
}

impl SessionState {
    /// Before a statement on `node` (`write`: it may change rows): inside a transaction,
    /// the branch on that node opens first. The first branch is a plain transaction
    /// (its BEGIN text); later ones are XA branches in `Xa` mode, plain in `BestEffort`.
    /// `xid` names the transaction's XA id when the first XA branch opens.
    pub fn enter(
        &mut self,
        node: usize,
        write: bool,
        mode: TxMode,
        xid: impl FnOnce() -> String,
        name: impl Fn(usize) -> String,
    ) -> Result<Enter, MyError> {
        if self.tx.is_none() && !self.autocommit && !self.ddl {
            self.tx = Some(Tx {
                begin: "BEGIN".into(),
                branches: Vec::new(),
                lost: false,
                xid: None,
                savepoints: Vec::new(),
                abort: false,
                read_committed: false,
            });
        }
        let Some(tx) = &mut self.tx else {
            return Ok(Enter::Ready);
        };
        if tx.lost {
            return Err(lost_tx());
        }
        let shadowing = self.shadowing == Some(node);
        if let Some((i, b)) = tx
            .branches
            .iter_mut()
            .enumerate()
            .find(|(_, b)| b.node == node)
        {
            if write {
                if !shadowing {
                    b.shadow = false;
                } else if !b.wrote && i > 0 {
                    b.shadow = true;
                }
                b.wrote = true;
            }
            return Ok(Enter::Ready);
        }
        let xa = !tx.branches.is_empty() && mode == TxMode::Xa && !read_only(&tx.begin);
        let mut sql = if xa {
            let first = tx.branches[0].node;
            let gtrid = tx.xid.get_or_insert_with(xid).clone();
            format!("XA START {}", xid_sql(&gtrid, &name(first)))
        } else {
            tx.begin.clone()
        };
        if tx.read_committed {
            sql.insert_str(0, READ_COMMITTED);
        }
        for (_, sp) in &tx.savepoints {
            sql.push_str("; ");
            sql.push_str(sp);
        }
        Ok(Enter::Begin { sql, xa })
    }

    /// The transaction's branch on `node` opened (`write`: for a statement that may change
    /// rows).
    pub fn began(&mut self, node: usize, xa: bool, write: bool) {
        if let Some(tx) = self.tx.as_mut() {
            let shadow = self.shadowing == Some(node) && !tx.branches.is_empty();
            tx.branches.push(Branch {
                node,
                xa,
                wrote: write,
                shadow,
            });
        }
    }

    /// `node`'s connection is gone: a transaction with a branch there is lost.
    pub fn lost(&mut self, node: usize) -> bool {
        // A branch of row images only: the migration loses them, not the client.
        if let Some(tx) = self.tx.as_mut() {
            if let Some(i) = tx.branches.iter().position(|b| b.node == node && b.shadow) {
                tx.branches.remove(i);
                return false;
            }
        }
        match self
            .tx
            .as_mut()
            .filter(|t| t.branches.iter().any(|b| b.node == node))
        {
            Some(tx) => {
                tx.lost = true;
                true
            }
            None => false,
        }
    }

    /// A statement failed on `node` with `code`: a deadlock (the node rolled its branch back)
    /// inside a transaction with a branch there rolls the transaction back on every node, as
    /// MySQL does. A lock wait timeout (1205) rolls back only the statement, there as in
    /// MySQL, and the transaction goes on. A branch of a migration's row images only
    /// ([`Branch::shadow`]) loses nothing of the client's to a deadlock: the migration drops
    /// it and counts it, and the transaction goes on.
    pub fn failed(&mut self, node: usize, code: u16) {
        if let Some(tx) = self.tx.as_mut() {
            if code == 1213 && tx.branches.iter().any(|b| b.node == node && !b.shadow) {
                tx.abort = true;
            }
        }
    }

    /// Marks the open transaction to be rolled back on every node (see [`Tx::abort`]).
    pub fn doom(&mut self) {
        if let Some(tx) = self.tx.as_mut() {
            tx.abort = true;
        }
    }

    /// BEGIN: returns `true` when an open transaction on a node must be committed first.
    pub fn begin(&mut self, sql: &str) -> bool {
        let commit_first = self.tx.as_ref().is_some_and(|t| !t.branches.is_empty());
        if !commit_first {
            self.tx = Some(Tx {
                begin: sql.to_string(),
                branches: Vec::new(),
                lost: false,
                xid: None,
                savepoints: Vec::new(),
                abort: false,
                read_committed: false,
            });
        }
        commit_first
    }

    /// COMMIT / ROLLBACK: the transaction to end, if it reached a node. A lost one cannot
    /// commit (the client learns it was rolled back); its branches are rolled back.
    pub fn end(&mut self, commit: bool) -> Result<Option<Tx>, MyError> {
        let tx = self.tx.take().filter(|t| !t.branches.is_empty());
        match tx {
            Some(t) if t.lost && commit => {
                // Whatever branch is left is rolled back by the caller first.
                self.tx = Some(t);
                Err(lost_tx())
            }
            other => Ok(other),
        }
    }

    /// The transaction just begun, not yet on any node, opens its branches READ COMMITTED.
    /// `false` when there is none or it already has a branch (whose level is set).
    pub fn read_committed(&mut self) -> bool {
        match self.tx.as_mut().filter(|t| t.branches.is_empty()) {
            Some(t) => {
                t.read_committed = true;
                true
            }
            None => false,
        }
    }

    /// The open transaction was begun READ ONLY (`START TRANSACTION READ ONLY`).
    pub fn read_only_tx(&self) -> bool {
        self.tx.as_ref().is_some_and(|t| read_only(&t.begin))
    }

    /// Where a statement that names no table runs (see `Door::sticky`).
    pub fn sticky(&self, insert_id: bool, default: usize) -> Option<usize> {
        let tx_node = self.tx_node();
        if tx_node.is_none() && self.last_node.is_none() && self.insert_id_node.is_none() {
            return None;
        }
        Some(match (tx_node, self.insert_id_node) {
            (_, Some(n)) if insert_id => n,
            (Some(n), _) => {
                // Inside the transaction: where it last ran, if that is one of its branches.
                match self.last_node {
                    Some(l) if self.tx_nodes().any(|b| b == l) => l,
                    _ => n,
                }
            }
            _ => self.last_node.unwrap_or(default),
        })
    }

    /// The node of the transaction's first branch.
    pub fn tx_node(&self) -> Option<usize> {
        self.tx
            .as_ref()
            .and_then(|t| t.branches.first())
            .map(|b| b.node)
    }

    /// Every node the open transaction has a branch on.
    pub fn tx_nodes(&self) -> impl Iterator<Item = usize> + '_ {
        self.tx
            .iter()
            .flat_map(|t| t.branches.iter().map(|b| b.node))
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

    fn enter(s: &mut SessionState, node: usize, write: bool) -> Result<Enter, MyError> {
        s.enter(node, write, TxMode::Xa, || "sp:t:1".into(), name)
    }

    fn plain(sql: &str) -> Enter {
        Enter::Begin {
            sql: sql.into(),
            xa: false,
        }
    }

    #[test]
    fn a_transaction_opens_a_plain_branch_first_and_xa_branches_after() {
        let mut s = SessionState::default();
        assert!(!s.begin("START TRANSACTION"));
        assert_eq!(enter(&mut s, 1, false), Ok(plain("START TRANSACTION")));
        s.began(1, false, false);
        assert_eq!(enter(&mut s, 1, true), Ok(Enter::Ready));
        assert_eq!(
            enter(&mut s, 0, false),
            Ok(Enter::Begin {
                sql: "XA START 'sp:t:1',X'647331',21328".into(),
                xa: true
            }),
            "the XA branch names the first branch's node"
        );
        s.began(0, true, false);
        assert_eq!(enter(&mut s, 0, true), Ok(Enter::Ready));
        let tx = s.tx.clone().unwrap();
        assert_eq!(
            tx.branches,
            vec![
                Branch {
                    node: 1,
                    xa: false,
                    wrote: true,
                    shadow: false,
                },
                Branch {
                    node: 0,
                    xa: true,
                    wrote: true,
                    shadow: false,
                }
            ]
        );
        assert!(s.status().contains(StatusFlags::SERVER_STATUS_IN_TRANS));
        assert!(
            s.begin("BEGIN"),
            "a BEGIN inside commits the open one first"
        );
        assert_eq!(
            s.end(true).map(|t| t.map(|t| t.branches.len())),
            Ok(Some(2))
        );
        assert_eq!(s.tx, None);
    }

    #[test]
    fn best_effort_and_read_only_transactions_open_plain_branches() {
        let mut s = SessionState::default();
        s.begin("START TRANSACTION READ ONLY");
        assert_eq!(
            enter(&mut s, 0, false),
            Ok(plain("START TRANSACTION READ ONLY"))
        );
        s.began(0, false, false);
        assert_eq!(
            enter(&mut s, 1, false),
            Ok(plain("START TRANSACTION READ ONLY"))
        );
        let mut s = SessionState::default();
        s.begin("BEGIN");
        s.enter(0, true, TxMode::BestEffort, String::new, name)
            .unwrap();
        s.began(0, false, true);
        assert_eq!(
            s.enter(1, true, TxMode::BestEffort, String::new, name),
            Ok(plain("BEGIN"))
        );
    }

    #[test]
    fn a_read_committed_transaction_opens_every_branch_so() {
        let mut s = SessionState::default();
        assert!(!s.read_committed(), "no transaction: nothing to set");
        s.begin("BEGIN");
        assert!(s.read_committed());
        assert_eq!(
            enter(&mut s, 0, true),
            Ok(plain(
                "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; BEGIN"
            ))
        );
        s.began(0, false, true);
        assert!(
            !s.read_committed(),
            "a branch is open: its level is set already"
        );
        assert_eq!(
            enter(&mut s, 1, true),
            Ok(Enter::Begin {
                sql: "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; XA START 'sp:t:1',X'647330',21328".into(),
                xa: true
            })
        );
        s.began(1, true, true);
        s.end(true).unwrap();
        s.begin("BEGIN");
        assert_eq!(
            enter(&mut s, 0, true),
            Ok(plain("BEGIN")),
            "the next transaction has the connection's own level"
        );
    }

    #[test]
    fn savepoints_are_replayed_on_a_branch_that_opens_later() {
        let mut s = SessionState::default();
        s.begin("BEGIN");
        enter(&mut s, 0, true).unwrap();
        s.began(0, false, true);
        s.tx.as_mut()
            .unwrap()
            .savepoints
            .push(("a".into(), "SAVEPOINT a".into()));
        assert_eq!(
            enter(&mut s, 2, true),
            Ok(Enter::Begin {
                sql: "XA START 'sp:t:1',X'647330',21328; SAVEPOINT a".into(),
                xa: true
            })
        );
    }

    #[test]
    fn a_lost_transaction_fails_until_it_is_ended() {
        let mut s = SessionState {
            autocommit: false,
            ..Default::default()
        };
        assert_eq!(enter(&mut s, 2, true), Ok(plain("BEGIN")));
        s.began(2, false, true);
        assert!(s.lost(2));
        assert_eq!(enter(&mut s, 2, false).unwrap_err().code, 1213);
        assert_eq!(s.end(true).unwrap_err().code, 1213);
        assert!(s.tx.is_some(), "kept for the caller to roll back");
        s.tx = None;
        assert_eq!(enter(&mut s, 2, true), Ok(plain("BEGIN")));
        s.began(2, false, true);
        s.lost(2);
        assert!(
            s.end(false).is_ok(),
            "ROLLBACK of a lost transaction is fine"
        );
    }

    #[test]
    fn a_deadlock_on_a_branch_dooms_the_transaction() {
        let mut s = SessionState::default();
        s.begin("BEGIN");
        enter(&mut s, 0, true).unwrap();
        s.began(0, false, true);
        s.failed(1, 1213);
        assert!(!s.tx.as_ref().unwrap().abort, "no branch on node 1");
        s.failed(0, 1062);
        assert!(
            !s.tx.as_ref().unwrap().abort,
            "a duplicate key ends the statement only"
        );
        s.failed(0, 1205);
        assert!(
            !s.tx.as_ref().unwrap().abort,
            "a lock wait timeout ends the statement only, as in MySQL"
        );
        s.failed(0, 1213);
        assert!(s.tx.as_ref().unwrap().abort);
    }

    #[test]
    fn a_deadlock_on_a_branch_of_row_images_only_leaves_the_transaction_alone() {
        let mut s = SessionState::default();
        s.begin("BEGIN");
        enter(&mut s, 0, true).unwrap();
        s.began(0, false, true);
        s.shadowing = Some(2);
        enter(&mut s, 2, true).unwrap();
        s.began(2, true, true);
        s.shadowing = None;
        s.failed(2, 1213);
        assert!(
            !s.tx.as_ref().unwrap().abort,
            "the images' branch on node 2 had nothing of the client's"
        );
        // Once the client writes there itself, the branch is the client's.
        enter(&mut s, 2, true).unwrap();
        s.failed(2, 1213);
        assert!(s.tx.as_ref().unwrap().abort);
    }

    #[test]
    fn ddl_runs_outside_the_transaction() {
        let mut s = SessionState {
            autocommit: false,
            ddl: true,
            ..Default::default()
        };
        assert_eq!(enter(&mut s, 0, true), Ok(Enter::Ready));
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
        s.begin("BEGIN");
        enter(&mut s, 3, true).unwrap();
        s.began(3, false, true);
        assert_eq!(s.sticky(false, 0), Some(3), "the transaction's node");
        s.ran_on(3, false);
        enter(&mut s, 1, true).unwrap();
        s.began(1, true, true);
        s.ran_on(1, false);
        assert_eq!(s.sticky(false, 0), Some(1), "its branch that ran last");
    }

    #[test]
    fn xids_quote_the_decision_node_in_hex() {
        assert_eq!(xid_sql("p:1:2", "d'1"), "'p:1:2',X'642731',21328");
    }
}
