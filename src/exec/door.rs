//! The one door from execution to the nodes, and the one way out to the client.
//!
//! A primitive reaches a node only through [`Door`]: start a statement there (text, or
//! prepared when the client's statement was), read its result sets, run the proxy's own
//! statements, and the session statements that are state on the node connections (database,
//! SETs, transactions). The real door is the session's node connections
//! (`backend::session::NodeSession`); [`super::fake::FakeDoor`] logs each node's SQL, replays
//! canned answers and injects errors, so every primitive is unit-tested without a server.
//! Dual-write, transaction branches, per-slot load counting and multiplexing belong behind
//! this door, not in the primitives nor in the protocol code.
//!
//! Results leave through [`Sink`]: the frontend writes them as MySQL packets, a test records
//! them.

use std::future::Future;
use std::io;
use std::sync::Arc;

use mysql_common::constants::StatusFlags;
use mysql_common::packets::Column;
use mysql_common::value::Value;

use super::txn::state::SessionState;
use crate::config::TxMode;
use crate::error::MyError;
use crate::merge::Row;

/// One statement for one node: its text, and the values of its `?` placeholders.
#[derive(Debug, Clone, Copy)]
pub struct Stmt<'a> {
    pub sql: &'a str,
    pub params: &'a [Value],
}

impl<'a> Stmt<'a> {
    pub fn new(sql: &'a str, params: &'a [Value]) -> Self {
        Stmt { sql, params }
    }
}

/// Does the statement only read? Inside a transaction a read may run on a node the
/// transaction has not touched; a write may not (yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

impl Access {
    /// `Read` for a statement that only reads.
    pub fn of(read: bool) -> Self {
        if read {
            Access::Read
        } else {
            Access::Write
        }
    }
}

/// An OK packet's content.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OkInfo {
    pub affected: u64,
    pub last_insert_id: u64,
    pub warnings: u16,
    pub info: String,
}

/// What a node says of a statement it prepared: its parameters and result columns.
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    pub params: Vec<Column>,
    pub columns: Vec<Column>,
}

/// A node failed a statement: the client's error, and whether the node's connection is gone
/// (a connection or protocol failure, not a server error): then nothing was answered by it,
/// and another copy may answer instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeError {
    pub node: usize,
    pub error: MyError,
    pub broke: bool,
}

impl From<NodeError> for MyError {
    fn from(e: NodeError) -> Self {
        e.error
    }
}

/// The answer of one node to one statement, read as it arrives: a result set (columns, then
/// rows) or an OK, possibly followed by more (a CALL).
pub trait NodeResult: Send {
    /// The current result set's columns; `None` when it is an OK packet.
    fn columns(&self) -> Option<Arc<[Column]>>;
    /// The next row of the current result set; `None` at its end (which also moves to the
    /// next result set, if there is one).
    fn next(&mut self) -> impl Future<Output = Result<Option<Row>, NodeError>> + Send;
    /// Writes the rest of the current result set's rows to `sink` (for a relay: one node
    /// answers, nothing merges). A door that reads the node's packets passes each row on as
    /// the node sent it ([`Sink::raw_row`]); this default writes the decoded rows.
    fn relay_rows<K: Sink>(
        &mut self,
        sink: &mut K,
    ) -> impl Future<Output = Result<(), NodeError>> + Send {
        async move {
            let Some(cols) = self.columns() else {
                return Ok(());
            };
            while let Some(row) = self.next().await? {
                sink.row(&row, &cols);
                sink.flush_some().await.map_err(client_gone)?;
            }
            Ok(())
        }
    }
    /// The current OK packet (meaningful when `columns()` is `None`).
    fn ok(&self) -> OkInfo;
    /// Warnings of the current result.
    fn warnings(&self) -> u16;
    /// Another result (set or OK) follows the one just read.
    fn pending(&self) -> bool;
    /// The session's status flags once the statement started (it may have opened the
    /// transaction), for the packets that answer it.
    fn status(&self) -> StatusFlags;
    /// Reads and drops whatever is left.
    fn finish(self) -> impl Future<Output = Result<(), NodeError>> + Send;
}

/// What kind of statement runs, for the door's transaction rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub access: Access,
    /// Run as a prepared statement on the node (the client's was one: binary rows).
    pub binary: bool,
}

impl Run {
    /// A read of the proxy's own, in the text protocol.
    pub const TEXT_READ: Run = Run {
        access: Access::Read,
        binary: false,
    };
}

/// The door to the nodes (see the module documentation).
pub trait Door: Send + Sized {
    type Res<'a>: NodeResult + 'a
    where
        Self: 'a;

    /// Starts `stmt` on `node` (connecting, and entering the session's transaction there,
    /// first): its first result is ready to read.
    fn start<'a>(
        &'a mut self,
        node: usize,
        stmt: Stmt<'a>,
        run: Run,
    ) -> impl Future<Output = Result<Self::Res<'a>, NodeError>> + Send + 'a;

    /// Starts each statement on its node, all at once (nodes distinct), each inside the
    /// session's transaction's branch there (opened first where missing: [`Door::enter`]).
    /// `Err` when a node cannot be reached or brought to the session's state; else one
    /// result per statement, in order.
    #[allow(clippy::type_complexity)]
    fn start_all<'a>(
        &'a mut self,
        stmts: &'a [(usize, Stmt<'a>)],
        run: Run,
    ) -> impl Future<Output = Result<Vec<Result<Self::Res<'a>, NodeError>>, NodeError>> + Send + 'a;

    /// A query the proxy runs for itself on the session's connection to `node`: every row,
    /// values typed (binary protocol).
    fn fetch(
        &mut self,
        node: usize,
        sql: &str,
    ) -> impl Future<Output = Result<Vec<Vec<Value>>, NodeError>> + Send;

    /// A query on a connection of its own, outside the session and its transaction (lookup
    /// tables): every row.
    fn fetch_outside(
        &mut self,
        node: usize,
        sql: &str,
    ) -> impl Future<Output = Result<Vec<Vec<Value>>, NodeError>> + Send;

    /// Runs one of the proxy's own statements on the session's connection to `node` (table
    /// locks), outside the transaction rules, and reads its whole answer.
    fn run_on(
        &mut self,
        node: usize,
        sql: &str,
    ) -> impl Future<Output = Result<(), NodeError>> + Send;

    /// Statements on one connection of their own to `node`, outside the session (a
    /// sequence's reservation), in order: the rows of the last.
    fn fetch_outside_all(
        &mut self,
        node: usize,
        sqls: &[&str],
    ) -> impl Future<Output = Result<Vec<Vec<Value>>, NodeError>> + Send;

    /// Asks `node` to parse `sql` without running it (PREPARE + CLOSE): `Ok` when it would
    /// run, the node's own error (a syntax error) otherwise.
    fn check_syntax(
        &mut self,
        node: usize,
        sql: &str,
    ) -> impl Future<Output = Result<(), NodeError>> + Send;

    /// Prepares `sql` on `node` to learn its parameters and columns (the client's
    /// COM_STMT_PREPARE is answered with them).
    fn prepare(
        &mut self,
        node: usize,
        sql: &str,
    ) -> impl Future<Output = Result<Prepared, NodeError>> + Send;

    /// The collation of each of `sql`'s result columns as `node`'s schema has them: MariaDB's
    /// result metadata gives the connection's collation for every string column (a
    /// `utf8mb4_bin` one too), the true one only under `character_set_results = NULL`. The
    /// statement is prepared under that setting, not run, outside the session. `None` when
    /// the node could not say (the statement's own run then fails the same way).
    fn collations(
        &mut self,
        node: usize,
        sql: &str,
    ) -> impl Future<Output = Option<Arc<[u16]>>> + Send;

    /// Can the session reach `node` (connecting when it holds no connection there)? The
    /// error says why not.
    fn reachable(&mut self, node: usize) -> impl Future<Output = Result<(), MyError>> + Send;

    /// Does the session hold its own connection to `node` now (kept since its last
    /// statement, not one the pool will lend it, and not closed by the node since)?
    fn holds(&self, node: usize) -> bool;

    /// The node's name, for messages.
    fn name(&self, node: usize) -> String;

    /// The session state the door keeps (autocommit, the transaction, where it ran last);
    /// the rules over it are [`SessionState`]'s, the same for every door.
    fn state(&self) -> &SessionState;
    fn state_mut(&mut self) -> &mut SessionState;

    /// Where a statement that names no table runs: the transaction's node, else (when
    /// `insert_id` is asked) the node that generated the session's last insert id, else the
    /// node of the session's last statement, else `default`. `None`: nothing ties the
    /// session to a node yet.
    fn sticky(&self, insert_id: bool, default: usize) -> Option<usize> {
        self.state().sticky(insert_id, default)
    }

    /// The node of the open transaction, once it touched one.
    fn tx_node(&self) -> Option<usize> {
        self.state().tx_node()
    }

    /// Remembers where the session ran last and which node generated an insert id.
    fn ran_on(&mut self, node: usize, generated_id: bool) {
        self.state_mut().ran_on(node, generated_id);
    }

    /// The status flags the session's answers carry (autocommit, in transaction).
    fn status(&self) -> StatusFlags {
        self.state().status()
    }

    /// The session statements: each one changes the state of every node connection the
    /// session holds and of those it opens later.
    fn use_db(&mut self, db: &str) -> impl Future<Output = Result<(), MyError>> + Send;
    fn set(&mut self, sql: &str) -> impl Future<Output = Result<(), MyError>> + Send;

    /// `KILL [QUERY] id`: stops the statements the proxy's session `id` runs on its nodes
    /// and, unless `query_only`, ends that session (MySQL's 1094 for an unknown id, 1095 for
    /// another user's session).
    fn kill(
        &mut self,
        id: u32,
        query_only: bool,
    ) -> impl Future<Output = Result<(), MyError>> + Send;

    /// How transactions over several nodes commit (`[server] transaction_mode`).
    fn tx_mode(&self) -> TxMode;

    /// A new XA transaction id (gtrid), unique among every proxy of the family.
    fn new_xid(&self) -> String;

    /// Runs each of the proxy's own statements (a text, possibly several statements) on
    /// the session's connection to its node, all at once (nodes distinct), outside the
    /// transaction rules (they are the transaction's BEGINs and XA steps); one result each.
    fn run_each(
        &mut self,
        stmts: &[(usize, String)],
    ) -> impl Future<Output = Vec<Result<(), NodeError>>> + Send;

    /// The table of XA decision records on `node`, created there if need be (outside the
    /// session), qualified with its database: `db`.`shardproxy_xa`.
    fn decision_table(
        &mut self,
        node: usize,
    ) -> impl Future<Output = Result<String, NodeError>> + Send;

    /// Forgets that `node`'s decision table was made: the next [`Door::decision_table`]
    /// makes it again (it went away under the proxy: a database emptied and restored).
    fn forget_decision_table(&mut self, node: usize);

    /// Closes the session's connection to `node` instead of giving it back (a branch on
    /// it was left prepared, or failed to roll back: the node decides, or recovery does).
    fn discard(&mut self, node: usize);

    /// Row images of a migration could not be written to `node` (`super::dual_write`): the
    /// client's statement stands; the migration counts it and verifies again.
    fn shadow_failed(&self, node: usize, error: &MyError);

    /// Counts rows a merge read (metrics).
    fn count_merged(&self, rows: u64);
    /// Counts a tier statement by mode (metrics: read, page, poll, write, write_retry).
    fn count_tier(&self, mode: &str);
    /// Counts a transaction's end by how it went (metrics: commit, commit_xa, rollback, ...).
    fn count_tx(&self, outcome: &str);
    /// Counts lookup-table reads (metrics: read, failed).
    fn count_lookups(&self, outcome: &str, n: u64);
    /// Counts rows read through the proxy into a gathered statement's copies (metrics), by
    /// how the copy was read: `bound` by a join's keys, `whole` as planned.
    fn count_copied(&self, how: &str, rows: u64);
    /// The outer read `read` of a bound join (its keys' query, or a spread's rows) returned
    /// more than its plan takes: remembered a while, so that the next plans of that read do
    /// not try again ([`crate::plan::PlanCtx::overflowed`]).
    fn overflowed(&self, read: &str);
    /// A table's `SHOW CREATE TABLE` text read lately in the session's database, kept for
    /// [`crate::shared::COLLATIONS_TTL`] and dropped by this proxy's DDL (as the merges'
    /// collations are); `None` when not kept.
    fn kept_definition(&self, table: &str) -> Option<Arc<str>>;
    /// Keeps `text` as `table`'s definition (`None`: forgets it).
    fn keep_definition(&self, table: &str, text: Option<&str>);
}

/// Where results go: the client, as MySQL packets (the frontend), or a test's record.
pub trait Sink: Send {
    /// Rows are written in the binary protocol (an executed prepared statement).
    fn binary(&self) -> bool;
    /// The client takes several results for one statement (CLIENT_MULTI_RESULTS).
    fn multi_results(&self) -> bool;
    /// A result set's header: column count, definitions, EOF.
    fn columns(&mut self, cols: &[Column], status: StatusFlags);
    /// One row of the result set (values as the node sent them, or merged).
    fn row(&mut self, row: &[Option<Value>], cols: &[Column]);
    /// One row as a node sent it (a row packet's payload, in the protocol the client asked
    /// for: [`Sink::binary`]), passed on untouched.
    fn raw_row(&mut self, payload: &[u8]);
    /// The end of a result set; `more`: another result of the same statement follows.
    fn end(&mut self, status: StatusFlags, warnings: u16, more: bool);
    /// An OK packet; `more`: another result of the same statement follows.
    fn ok(&mut self, ok: &OkInfo, status: StatusFlags, more: bool);
    /// Sends what is buffered when enough has piled up (while rows stream).
    fn flush_some(&mut self) -> impl Future<Output = io::Result<()>> + Send;
    /// Packets written so far: unchanged across an attempt means the client saw nothing.
    fn written(&self) -> u64;
}

/// A failure while writing to the client during a merge, as an error of no node.
pub fn client_gone(e: io::Error) -> NodeError {
    NodeError {
        node: usize::MAX,
        error: MyError::internal(format!("shardproxy: writing to the client failed: {e}")),
        broke: false,
    }
}
