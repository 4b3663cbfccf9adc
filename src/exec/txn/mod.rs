//! Transactions, all in this folder: what happens at BEGIN, at a statement inside a
//! transaction, at COMMIT and ROLLBACK, and after a crash.
//!
//! - `state.rs`: the session's transaction state (autocommit, the open transaction and its
//!   branches), the same rules for every door;
//! - this file: the branch a transaction opens on each node it touches and how it ends
//!   there ([`Transactions`], over any [`Door`]);
//! - `deadlock.rs`: the detector of deadlocks across nodes; `recovery.rs`: XA recovery of
//!   branches a dead coordinator left prepared; both run over a [`cluster::Cluster`].
//!
//! The first node a transaction touches gets a plain transaction (its BEGIN text), so a
//! transaction that stays on one node commits as it would without the proxy. Every later
//! node gets an XA branch (`XA START`, in `transaction_mode = "xa"`), whose branch qualifier
//! names the first node. COMMIT then depends on how many nodes changed rows:
//!
//! - one or none: every branch commits in one phase, at once (`XA COMMIT ... ONE PHASE`);
//! - several: two-phase commit, where the first branch is the coordinator's "last
//!   resource". Phase 1, at once: the first branch inserts the decision record
//!   (`shardproxy_xa`, gtrid -> `commit`) inside its own transaction, the branches that
//!   wrote `XA END` + `XA PREPARE`, the ones that only read commit in one phase. Any failure
//!   rolls everything back. Phase 2: the first branch COMMITs: that commit makes its rows
//!   and the decision record durable together, so the decision is exactly whether it
//!   committed. Phase 3, at once: `XA COMMIT` on every prepared branch; the client's OK
//!   comes after them.
//!
//! Recovery (`recovery.rs`) finishes prepared branches whose coordinator died: it
//! inserts `rollback` for their gtrid with `INSERT IGNORE` on the decision node and obeys
//! whichever record is there. The insert waits on the row lock of a decision not yet
//! committed, so a recoverer can never roll back what a live coordinator commits. Why this
//! is safe, step by step: `docs/design.md`.
//!
//! `transaction_mode = "best_effort"` opens plain transactions everywhere and commits them
//! one after another; a failure between two commits leaves the transaction applied on some
//! nodes only, and the error says which.

use std::future::Future;

use tracing::warn;

pub mod branches;
pub mod cluster;
pub mod deadlock;
pub mod recovery;
pub mod state;

use self::state::{lost_tx, xid_sql, Branch, Enter, Tx};
use crate::config::TxMode;
use crate::error::{MyError, ER_ERROR_DURING_COMMIT, ER_LOCK_DEADLOCK};
use crate::exec::door::{Access, Door, NodeError};

/// The transaction side of a door: BEGIN, COMMIT, ROLLBACK and what opens and settles
/// branches, the same for every [`Door`] (so they live here, over the door, not in it).
pub trait Transactions: Door {
    /// A DDL statement runs (`true`) or ended: it commits the open transaction first and
    /// runs outside any, even with autocommit off, as in MySQL.
    fn ddl(&mut self, on: bool) -> impl Future<Output = Result<(), MyError>> + Send {
        async move {
            if on {
                self.end(true).await?;
            }
            self.state_mut().ddl = on;
            Ok(())
        }
    }

    /// BEGIN: an open transaction that reached a node commits first (as in MySQL); the new
    /// one opens on the first node a statement touches.
    fn begin(&mut self, sql: &str) -> impl Future<Output = Result<(), MyError>> + Send {
        async move {
            if self.state_mut().begin(sql) {
                self.end(true).await?;
                self.state_mut().begin(sql);
            }
            Ok(())
        }
    }

    /// COMMIT (`true`) or ROLLBACK of the open transaction on every node it touched: one
    /// node commits alone; several commit by two-phase commit (see this module).
    fn end(&mut self, commit: bool) -> impl Future<Output = Result<(), MyError>> + Send {
        end(self, commit)
    }

    /// Before statements on `nodes` (`access`: whether they may change rows): inside a
    /// transaction, opens its branch on each node that has none yet (the first branch
    /// alone, then the others at once). The branches that opened are recorded even when
    /// another failed.
    fn enter(
        &mut self,
        nodes: &[usize],
        access: Access,
    ) -> impl Future<Output = Result<(), NodeError>> + Send {
        enter(self, nodes, access)
    }

    /// After a statement: a transaction a deadlock or a lock wait timeout rolled back on
    /// one node (or a write that ran on some of its nodes only) is rolled back on all.
    fn settle_tx(&mut self) -> impl Future<Output = ()> + Send {
        settle(self)
    }

    /// `SET autocommit`: turning it on commits the open transaction.
    fn set_autocommit(&mut self, on: bool) -> impl Future<Output = Result<(), MyError>> + Send {
        async move {
            if on && !self.state().autocommit {
                self.end(true).await?;
            }
            self.state_mut().autocommit = on;
            Ok(())
        }
    }
}

impl<D: Door> Transactions for D {}

/// The decision records' table, in the database of each node's URL.
pub const DECISIONS: &str = "shardproxy_xa";

/// MariaDB's error for a table that does not exist.
const ER_NO_SUCH_TABLE: u16 = 1146;

/// The decision table in database `db`, qualified.
pub fn decisions_in(db: &str) -> String {
    format!("`{}`.{DECISIONS}", db.replace('`', "``"))
}

/// Its definition.
pub fn decisions_ddl(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (gtrid VARBINARY(64) NOT NULL PRIMARY KEY, \
         outcome ENUM('commit','rollback') NOT NULL, \
         at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB"
    )
}

/// XAER_NOTA: the node knows no such branch (already finished, by recovery or before).
const XAER_NOTA: u16 = 1397;
/// XA_RBROLLBACK: a prepared branch that changed nothing answers XA COMMIT so.
const XA_RBROLLBACK: u16 = 1402;

/// See [`Door::enter`].
pub async fn enter<D: Door>(
    door: &mut D,
    nodes: &[usize],
    access: Access,
) -> Result<(), NodeError> {
    {
        let st = door.state();
        if st.tx.is_none() && (st.autocommit || st.ddl) {
            return Ok(());
        }
    }
    let fresh = door
        .state()
        .tx
        .as_ref()
        .is_none_or(|t| t.branches.is_empty());
    let rest = match nodes.split_first() {
        // The first branch opens alone: the others name its node.
        Some((first, rest)) if fresh => {
            open(door, &[*first], access).await?;
            rest
        }
        _ => nodes,
    };
    open(door, rest, access).await
}

/// The branch a text statement on `node` must open first, for the door to send in the same
/// packet as the statement (`BEGIN; stmt`: one round trip fewer, and the node stops at a
/// BEGIN that fails, so the statement never runs outside the transaction). `None`: nothing
/// to open, or not in one packet (the first branch of several, savepoints to replay, a
/// level to set: a batch of statements); then
/// [`Door::enter`] as usual. After the BEGIN's OK, the door calls
/// [`super::state::SessionState::began`].
pub fn begin_ahead<D: Door>(
    door: &mut D,
    node: usize,
    access: Access,
) -> Result<Option<(String, bool)>, NodeError> {
    let st = door.state();
    if st.tx.is_none() && (st.autocommit || st.ddl) {
        return Ok(None);
    }
    if st.tx_nodes().any(|b| b == node)
        || st
            .tx
            .as_ref()
            .is_some_and(|t| !t.savepoints.is_empty() || t.lost || t.read_committed)
    {
        return Ok(None);
    }
    let mut opens = plan_opens(door, &[node], access)?;
    Ok(opens.pop().map(|(_, sql, xa)| (sql, xa)))
}

/// The statements that open the missing branches on `nodes`: (node, BEGIN or XA START
/// text, whether it is an XA branch). The branches count once
/// [`super::state::SessionState::began`] records them.
fn plan_opens<D: Door>(
    door: &mut D,
    nodes: &[usize],
    access: Access,
) -> Result<Vec<(usize, String, bool)>, NodeError> {
    let write = access == Access::Write;
    let mode = door.tx_mode();
    let first_name = door
        .state()
        .tx_node()
        .or(nodes.first().copied())
        .map(|n| door.name(n))
        .unwrap_or_default();
    let needs_xid = mode == TxMode::Xa
        && door
            .state()
            .tx
            .as_ref()
            .is_some_and(|t| t.xid.is_none() && !t.branches.is_empty())
        && nodes
            .iter()
            .any(|n| !door.state().tx_nodes().any(|b| b == *n));
    let xid = if needs_xid {
        door.new_xid()
    } else {
        String::new()
    };
    let mut opens = Vec::new();
    for &node in nodes {
        let e = door
            .state_mut()
            .enter(node, write, mode, || xid.clone(), |_| first_name.clone())
            .map_err(|error| NodeError {
                node,
                error,
                broke: false,
            })?;
        if let Enter::Begin { sql, xa } = e {
            opens.push((node, sql, xa));
        }
    }
    Ok(opens)
}

async fn open<D: Door>(door: &mut D, nodes: &[usize], access: Access) -> Result<(), NodeError> {
    let write = access == Access::Write;
    let opens = plan_opens(door, nodes, access)?;
    if opens.is_empty() {
        return Ok(());
    }
    let stmts: Vec<(usize, String)> = opens.iter().map(|(n, s, _)| (*n, s.clone())).collect();
    let results = door.run_each(&stmts).await;
    let mut first_err = None;
    for ((node, _, xa), r) in opens.into_iter().zip(results) {
        match r {
            Ok(()) => door.state_mut().began(node, xa, write),
            Err(e) => {
                // Half opened (XA START ran, a savepoint failed): the node rolls it back
                // when the connection closes.
                door.discard(node);
                first_err.get_or_insert(e);
            }
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// The savepoint a write over several nodes inside a transaction sets first, so that a
/// failure on some of its nodes undoes it on the others (MySQL rolls back a failed statement,
/// not the transaction). Not one of the client's savepoints: never replayed, never listed.
const STMT_SAVEPOINT: &str = "shardproxy_stmt";

/// Before a write over `nodes` (several): inside a transaction, opens the branches it
/// needs and sets [`STMT_SAVEPOINT`] on each; `true` when it did (undo with
/// [`undo_statement`] if the write fails on some node).
pub async fn statement_savepoint<D: Door>(
    door: &mut D,
    nodes: &[usize],
) -> Result<bool, NodeError> {
    if nodes.len() < 2 {
        return Ok(false);
    }
    savepoint_on(door, nodes).await
}

/// [`statement_savepoint`] on any number of nodes: for a statement the proxy runs as several
/// writes, even on one node.
pub async fn savepoint_on<D: Door>(door: &mut D, nodes: &[usize]) -> Result<bool, NodeError> {
    savepoint_named(door, nodes, STMT_SAVEPOINT).await
}

/// The savepoint a write to a table with global indexes sets inside the client's
/// transaction before its index writes and its own (which may set [`STMT_SAVEPOINT`]).
pub const INDEX_SAVEPOINT: &str = "shardproxy_index";

/// [`savepoint_on`], by another name.
pub async fn savepoint_named<D: Door>(
    door: &mut D,
    nodes: &[usize],
    name: &str,
) -> Result<bool, NodeError> {
    let st = door.state();
    if nodes.is_empty() || st.ddl || (st.tx.is_none() && st.autocommit) {
        return Ok(false);
    }
    door.enter(nodes, Access::Write).await?;
    let stmts: Vec<(usize, String)> = nodes
        .iter()
        .map(|n| (*n, format!("SAVEPOINT {name}")))
        .collect();
    if let Some(e) = door
        .run_each(&stmts)
        .await
        .into_iter()
        .find_map(Result::err)
    {
        return Err(e);
    }
    Ok(true)
}

/// A write over `nodes` failed on some of them: every node goes back to the statement's
/// savepoint, as MySQL rolls back a failed statement. `false` when some node could not (its
/// branch is gone, a deadlock ended it): then the transaction is rolled back on every node
/// once the statement is answered.
pub async fn undo_statement<D: Door>(door: &mut D, nodes: &[usize]) -> bool {
    undo_named(door, nodes, STMT_SAVEPOINT).await
}

/// [`undo_statement`] to the savepoint `name`.
pub async fn undo_named<D: Door>(door: &mut D, nodes: &[usize], name: &str) -> bool {
    let stmts: Vec<(usize, String)> = nodes
        .iter()
        .map(|n| (*n, format!("ROLLBACK TO SAVEPOINT {name}")))
        .collect();
    let undone = door.run_each(&stmts).await.iter().all(Result::is_ok);
    if !undone {
        door.state_mut().doom();
    }
    undone
}

/// Rolls back and forgets the transaction's branch on `node` if it holds row images only (a
/// migration's write there failed): the transaction goes on without it.
pub async fn drop_shadow<D: Door>(door: &mut D, node: usize) {
    let Some(tx) = door.state().tx.clone() else {
        return;
    };
    let Some(b) = tx.branches.iter().find(|b| b.node == node && b.shadow) else {
        return;
    };
    let x = xid_of(door, &tx);
    let stmt = if b.xa {
        format!("XA END {x}; XA ROLLBACK {x}")
    } else {
        "ROLLBACK".to_string()
    };
    if door
        .run_each(&[(node, stmt)])
        .await
        .iter()
        .any(Result::is_err)
    {
        door.discard(node);
    }
    if let Some(t) = door.state_mut().tx.as_mut() {
        t.branches.retain(|b| b.node != node);
    }
}

/// See [`Door::settle_tx`].
pub async fn settle<D: Door>(door: &mut D) {
    if door.state().tx.as_ref().is_some_and(|t| t.abort) {
        if let Some(tx) = door.state_mut().tx.take() {
            if let Err(e) = rollback(door, &tx).await {
                warn!(error = %e, "rolling back a transaction a deadlock ended failed");
            }
            door.count_tx("rolled_back_by_error");
        }
    }
}

/// See [`Door::end`].
pub async fn end<D: Door>(door: &mut D, commit: bool) -> Result<(), MyError> {
    let tx = match door.state_mut().end(commit) {
        Ok(None) => return Ok(()),
        Ok(Some(tx)) => tx,
        Err(e) => {
            if let Some(tx) = door.state_mut().tx.take() {
                let _ = rollback(door, &tx).await;
            }
            return Err(e);
        }
    };
    if !commit || tx.lost || tx.abort {
        let r = rollback(door, &tx).await;
        door.count_tx("rollback");
        return if commit { Err(lost_tx()) } else { r };
    }
    commit_tx(door, tx).await
}

/// The XA steps' xid of `tx`.
fn xid_of<D: Door>(door: &D, tx: &Tx) -> String {
    let gtrid = tx.xid.clone().unwrap_or_default();
    xid_sql(&gtrid, &door.name(tx.branches[0].node))
}

/// Rolls back every branch. A branch that fails to (an XA branch a deadlock already ended,
/// a lost connection) has its connection closed: the node rolls back what it holds. Only a
/// plain ROLLBACK's own error is returned.
pub async fn rollback<D: Door>(door: &mut D, tx: &Tx) -> Result<(), MyError> {
    if tx.branches.is_empty() {
        return Ok(());
    }
    let x = xid_of(door, tx);
    let stmts = per_branch(
        &tx.branches,
        "ROLLBACK",
        &format!("XA END {x}; XA ROLLBACK {x}"),
    );
    let results = door.run_each(&stmts).await;
    let mut err = None;
    for (b, r) in tx.branches.iter().zip(results) {
        if let Err(e) = r {
            door.discard(b.node);
            if !b.xa && !e.broke {
                err.get_or_insert(e.error);
            }
        }
    }
    err.map_or(Ok(()), Err)
}

/// Each branch's statement: `plain` on the plain branch, `xa` on the XA ones.
fn per_branch(b: &[Branch], plain: &str, xa: &str) -> Vec<(usize, String)> {
    b.iter()
        .map(|br| (br.node, if br.xa { xa } else { plain }.to_string()))
        .collect()
}

fn commit_error(node: &str, e: &MyError, what: &str) -> MyError {
    if e.code == ER_LOCK_DEADLOCK {
        return e.clone();
    }
    MyError::new(
        ER_ERROR_DURING_COMMIT,
        format!(
            "shardproxy: COMMIT failed on node `{node}` ({} {}); {what}",
            e.code, e.message
        ),
    )
}

/// Commits the transaction's own branches and those that hold only row images of slots
/// being moved ([`Branch::shadow`]), one phase each; a failure on an image branch is counted
/// for the migration (its verify step finds and copies the rows again), never the client's.
///
/// With one own branch (an autocommit write, most transactions) both commits go at once:
/// the images are in order whichever commits first, because a writer waiting for a row's
/// lock on the source gets it only after this commit there, and then waits for this
/// branch's lock on the target (taken by its REPLACE, before either commit) to write its own
/// image. Should the source's commit fail after the images committed, those images count as
/// failed: the verify runs again. With several own branches the images commit after them
/// (or roll back when the transaction fails).
async fn commit_tx<D: Door>(door: &mut D, mut tx: Tx) -> Result<(), MyError> {
    if !tx.branches.iter().skip(1).any(|b| b.shadow) {
        return commit_own(door, tx).await;
    }
    let x = xid_of(door, &tx);
    let first = tx.branches.remove(0);
    let (shadows, mut own): (Vec<Branch>, Vec<Branch>) =
        tx.branches.drain(..).partition(|b| b.shadow);
    own.insert(0, first);
    if own.len() == 1 {
        return commit_beside_images(door, &own[0], &shadows, &x).await;
    }
    tx.branches = own;
    let r = commit_own(door, tx).await;
    let stmts = if r.is_ok() {
        per_branch(
            &shadows,
            "COMMIT",
            &format!("XA END {x}; XA COMMIT {x} ONE PHASE"),
        )
    } else {
        per_branch(
            &shadows,
            "ROLLBACK",
            &format!("XA END {x}; XA ROLLBACK {x}"),
        )
    };
    let results = door.run_each(&stmts).await;
    for (b, res) in shadows.iter().zip(results) {
        if let Err(e) = res {
            door.discard(b.node);
            if r.is_ok() {
                door.shadow_failed(b.node, &e.error);
            }
        }
    }
    r
}

/// One own branch's COMMIT and its image branches' commits, sent at once (see [`commit_tx`]).
async fn commit_beside_images<D: Door>(
    door: &mut D,
    own: &Branch,
    shadows: &[Branch],
    x: &str,
) -> Result<(), MyError> {
    let plain = if own.xa {
        format!("XA END {x}; XA COMMIT {x} ONE PHASE")
    } else {
        "COMMIT".to_string()
    };
    let mut stmts = vec![(own.node, plain)];
    stmts.extend(per_branch(
        shadows,
        "COMMIT",
        &format!("XA END {x}; XA COMMIT {x} ONE PHASE"),
    ));
    let mut results = door.run_each(&stmts).await.into_iter();
    door.count_tx("commit");
    let own_result = results.next();
    let own_failed = matches!(own_result, Some(Err(_)));
    for (b, res) in shadows.iter().zip(results) {
        match res {
            Err(e) => {
                door.discard(b.node);
                door.shadow_failed(b.node, &e.error);
            }
            Ok(()) if own_failed => door.shadow_failed(
                b.node,
                &MyError::new(
                    ER_ERROR_DURING_COMMIT,
                    "row images committed for a write whose own commit failed",
                ),
            ),
            Ok(()) => {}
        }
    }
    match own_result {
        Some(Err(e)) => Err(e.error),
        _ => Ok(()),
    }
}

async fn commit_own<D: Door>(door: &mut D, tx: Tx) -> Result<(), MyError> {
    let b = &tx.branches;
    if b.len() == 1 {
        let r = door.run_each(&[(b[0].node, "COMMIT".into())]).await;
        door.count_tx("commit");
        return match r.into_iter().next() {
            Some(Err(e)) => Err(e.error),
            _ => Ok(()),
        };
    }
    if tx.xid.is_none() || !b.iter().any(|x| x.xa) {
        return commit_in_turn(door, b).await;
    }
    let x = xid_of(door, &tx);
    let writers = b[1..].iter().filter(|x| x.wrote).count() + usize::from(b[0].wrote);
    if writers <= 1 {
        return commit_one_phase(door, b, &x).await;
    }
    two_phase(door, &tx, &x).await
}

/// Several plain transactions (best_effort, or READ ONLY): committed one after another.
async fn commit_in_turn<D: Door>(door: &mut D, b: &[Branch]) -> Result<(), MyError> {
    let mut committed = Vec::new();
    for (i, br) in b.iter().enumerate() {
        let r = door.run_each(&[(br.node, "COMMIT".into())]).await;
        if let Some(Err(e)) = r.into_iter().next() {
            let rest: Vec<(usize, String)> = b[i + 1..]
                .iter()
                .map(|r| (r.node, "ROLLBACK".into()))
                .collect();
            for (br, r) in b[i + 1..].iter().zip(door.run_each(&rest).await) {
                if r.is_err() {
                    door.discard(br.node);
                }
            }
            door.count_tx("failed");
            if committed.is_empty() {
                return Err(e.error);
            }
            let what = format!(
                "the transaction had committed on {} already (transaction_mode = \"best_effort\") and rolled back on the others",
                committed.join(", ")
            );
            return Err(commit_error(&door.name(br.node), &e.error, &what));
        }
        committed.push(format!("`{}`", door.name(br.node)));
    }
    door.count_tx("commit_in_turn");
    Ok(())
}

/// At most one node changed rows: no decision to record; every branch commits at once.
async fn commit_one_phase<D: Door>(door: &mut D, b: &[Branch], x: &str) -> Result<(), MyError> {
    let stmts = per_branch(b, "COMMIT", &format!("XA END {x}; XA COMMIT {x} ONE PHASE"));
    let results = door.run_each(&stmts).await;
    let mut err = None;
    for (br, r) in b.iter().zip(results) {
        if let Err(e) = r {
            if br.xa {
                door.discard(br.node);
            }
            // A branch that only read loses nothing by failing.
            if br.wrote {
                err.get_or_insert(e.error);
            }
        }
    }
    door.count_tx(if err.is_some() { "failed" } else { "commit" });
    err.map_or(Ok(()), Err)
}

async fn two_phase<D: Door>(door: &mut D, tx: &Tx, x: &str) -> Result<(), MyError> {
    let b = &tx.branches;
    let first = b[0].node;
    let first_name = door.name(first);
    let gtrid = tx.xid.clone().unwrap_or_default();
    let table = match door.decision_table(first).await {
        Ok(t) => t,
        Err(e) => {
            let _ = rollback(door, tx).await;
            door.count_tx("failed");
            return Err(commit_error(
                &first_name,
                &e.error,
                "its decision record could not be written, so it was rolled back on every node",
            ));
        }
    };
    let writers: Vec<usize> = b[1..].iter().filter(|x| x.wrote).map(|x| x.node).collect();
    let readers: Vec<usize> = b[1..].iter().filter(|x| !x.wrote).map(|x| x.node).collect();
    // Phase 1.
    let mut stmts = vec![(
        first,
        format!(
            "INSERT INTO {table} (gtrid, outcome) VALUES ({}, 'commit')",
            crate::sql::write::token_literal(&gtrid)
        ),
    )];
    stmts.extend(
        writers
            .iter()
            .map(|n| (*n, format!("XA END {x}; XA PREPARE {x}"))),
    );
    stmts.extend(
        readers
            .iter()
            .map(|n| (*n, format!("XA END {x}; XA COMMIT {x} ONE PHASE"))),
    );
    let mut results = door.run_each(&stmts).await;
    // The decision table went away under the proxy (the database emptied and restored):
    // made again on a connection of its own (the branch holds no lock on a table it could
    // not open) and the record written once more, in the same transaction.
    if matches!(results.first(), Some(Err(e)) if e.error.code == ER_NO_SUCH_TABLE && !e.broke) {
        door.forget_decision_table(first);
        let again = match door.decision_table(first).await {
            Ok(_) => door.run_each(&stmts[..1]).await.into_iter().next(),
            Err(e) => Some(Err(e)),
        };
        if let (Some(r), Some(slot)) = (again, results.first_mut()) {
            *slot = r;
        }
    }
    let mut failure = None;
    let mut prepared = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        let node = stmts[i].0;
        match r {
            Ok(()) if (1..=writers.len()).contains(&i) => prepared.push(node),
            Ok(()) => {}
            Err(_) if i > writers.len() => door.discard(node),
            Err(e) => {
                if i > 0 {
                    // Not prepared (or not known to be): closing the connection rolls an
                    // unprepared branch back; one prepared after all is recovery's.
                    door.discard(node);
                }
                failure.get_or_insert(e);
            }
        }
    }
    if let Some(e) = failure {
        abandon(door, first, &prepared, x).await;
        door.count_tx("failed");
        return Err(commit_error(
            &door.name(e.node),
            &e.error,
            "the transaction was rolled back on every node",
        ));
    }
    crate::hooks::xa_hold("prepared").await;
    // Phase 2: the decision.
    let r = door.run_each(&[(first, "COMMIT".into())]).await;
    if let Some(Err(e)) = r.into_iter().next() {
        let committed = if e.broke {
            // Unknown: the record says, once any late commit is fenced out.
            door.discard(first);
            decided(door, first, &table, &gtrid).await
        } else {
            Ok(false)
        };
        match committed {
            Ok(true) => {}
            Ok(false) => {
                abandon(door, usize::MAX, &prepared, x).await;
                door.count_tx("failed");
                return Err(commit_error(
                    &first_name,
                    &e.error,
                    "the transaction was rolled back on every node",
                ));
            }
            Err(_) => {
                for n in &prepared {
                    door.discard(*n);
                }
                door.count_tx("unknown");
                return Err(commit_error(
                    &first_name,
                    &e.error,
                    "its outcome is unknown until that node answers again; the proxies' recovery then commits or rolls it back on every node alike",
                ));
            }
        }
    }
    crate::hooks::xa_hold("decided").await;
    // Phase 3.
    let stmts: Vec<(usize, String)> = prepared
        .iter()
        .map(|n| (*n, format!("XA COMMIT {x}")))
        .collect();
    let results = door.run_each(&stmts).await;
    for ((node, sql), r) in stmts.iter().zip(results) {
        let Err(e) = r else { continue };
        if matches!(e.error.code, XAER_NOTA | XA_RBROLLBACK) {
            continue;
        }
        door.discard(*node);
        // A prepared branch can be committed from any connection.
        if let Err(e2) = door.fetch_outside(*node, sql).await {
            if !matches!(e2.error.code, XAER_NOTA | XA_RBROLLBACK) {
                warn!(node = %door.name(*node), error = %e2.error,
                    "a committed transaction's branch is still prepared there; recovery will commit it");
            }
        }
    }
    door.count_tx("commit_xa");
    Ok(())
}

/// Nothing was decided: the first branch (unless `usize::MAX`) and every prepared branch
/// roll back.
async fn abandon<D: Door>(door: &mut D, first: usize, prepared: &[usize], x: &str) {
    let mut stmts: Vec<(usize, String)> = prepared
        .iter()
        .map(|n| (*n, format!("XA ROLLBACK {x}")))
        .collect();
    if first != usize::MAX {
        stmts.push((first, "ROLLBACK".into()));
    }
    let results = door.run_each(&stmts).await;
    for ((node, _), r) in stmts.iter().zip(results) {
        if r.is_err() {
            door.discard(*node);
        }
    }
}

/// Whether the decision record of `gtrid` says commit, asked on a connection of its own:
/// `rollback` is inserted unless a record is there (waiting for a commit in flight), so a
/// late commit cannot follow the answer.
pub async fn decided<D: Door>(
    door: &mut D,
    node: usize,
    table: &str,
    gtrid: &str,
) -> Result<bool, NodeError> {
    let rows = door
        .fetch_outside_all(
            node,
            &decide_sql(table, gtrid)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
        .await?;
    Ok(outcome_is_commit(&rows))
}

/// The statements that fence a decision and read it.
pub fn decide_sql(table: &str, gtrid: &str) -> [String; 3] {
    [
        "SET SESSION innodb_lock_wait_timeout = 5".to_string(),
        format!(
            "INSERT IGNORE INTO {table} (gtrid, outcome) VALUES ({}, 'rollback')",
            crate::sql::write::token_literal(gtrid)
        ),
        format!(
            "SELECT outcome FROM {table} WHERE gtrid = {}",
            crate::sql::write::token_literal(gtrid)
        ),
    ]
}

/// Does a decision query's answer say commit?
pub fn outcome_is_commit(rows: &[Vec<mysql_common::value::Value>]) -> bool {
    matches!(
        rows.first().and_then(|r| r.first()),
        Some(mysql_common::value::Value::Bytes(b)) if b == b"commit"
    )
}

#[cfg(test)]
mod tests;
