//! A client session's node connections: the real [`Door`].
//!
//! It holds one connection per node the session touched, brings each new one to the
//! session's state (database, SETs, character set) before its first statement, carries the
//! session's transaction (opened on the first node a statement touches; a write on a second
//! node is refused until cross-node transactions exist), drops connections that broke, and
//! counts node latency and errors.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use mysql_common::constants::StatusFlags;
use mysql_common::packets::Column;
use mysql_common::value::Value;
use tracing::warn;

use crate::error::MyError;
use crate::exec::door::{client_gone, NodeError, NodeResult, OkInfo, Sink, Stmt};
use crate::exec::txn::state::SessionState;
use crate::exec::txn::Transactions;
use crate::merge::Row;
use crate::node::conn::Ahead;
use crate::node::conn::{decode, Summary};
use crate::node::{Head, RowEvent, Statement, WireError};
use crate::pools::Pooled;
use crate::shared::Shared;

mod door;
mod outside;
mod replicas;
mod rerun;

mod pins;
mod read_from;

use pins::pin_if_stateful;
pub use read_from::ReadFrom;

/// Failures seen while results were being read (the results borrow the connections, so the
/// session deals with them when the statement is over): node, message, connection broken,
/// the node's error code (0: not a server error).
type Casualties = Mutex<Vec<(usize, String, bool, u16)>>;

/// Prepared-statement handles kept per node connection, at most this many (all closed when
/// it fills up).
const MAX_HANDLES: usize = 256;

/// A node connection the session holds. The statements prepared on it stay with it (an
/// execute sends only the handle and the values), in the pool too, for whichever session
/// takes it next.
pub struct NodeConn {
    conn: Pooled,
    /// Kept past the last command only for what its statement left to read there (its
    /// warnings, for SHOW WARNINGS), nothing that dies with it (a transaction's branch,
    /// locks, untracked state, an insert id not read): [`NodeSession::settle`] decides it
    /// between commands, the next command's first use of the connection clears it.
    spare: bool,
    /// A connection to this replica of the node (its index), for one read: never kept for
    /// anything but that read's diagnostics.
    replica: Option<(usize, crate::replica::Reading)>,
    /// A read a replica refused as a write (a stored function's INSERT) ran here, on the
    /// primary, instead: it counts as the session's write there (read your writes).
    wrote_instead: bool,
}

impl NodeConn {
    fn new(conn: Pooled) -> Self {
        NodeConn {
            conn,
            spare: false,
            replica: None,
            wrote_instead: false,
        }
    }

    /// The handle of `sql` on this connection, prepared on first use.
    async fn handle(&mut self, sql: &str) -> Result<&mut Statement, WireError> {
        let (conn, handles) = self.conn.with_handles();
        if !handles.contains_key(sql) {
            if handles.len() >= MAX_HANDLES {
                for (_, h) in handles.drain() {
                    conn.close(h.id).await?;
                }
            }
            // Preparing is the proxy's doing, tracked by its handles: not a change of the
            // session's state to answer for.
            let before = conn.state_changed();
            let h = conn.prepare(sql).await?;
            if !before {
                conn.take_state_changed();
            }
            handles.insert(sql.to_string(), h);
        }
        handles
            .get_mut(sql)
            .ok_or_else(|| WireError::Protocol("a statement handle vanished".into()))
    }

    /// [`NodeConn::exec`] with `first` (a BEGIN) sent in the same write: `Ok(Err(e))` when
    /// `first` failed (the execute ran without it: its answer is drained and dropped);
    /// `Ok(Ok(r))`: `first` succeeded, and the execute's outcome; `None` when the parameters
    /// need long data (nothing was sent).
    #[allow(clippy::type_complexity)]
    async fn exec_after(
        &mut self,
        first: &str,
        sql: &str,
        params: &[Value],
    ) -> Result<Option<Result<Result<(Head, Arc<[Column]>), WireError>, WireError>>, WireError>
    {
        self.handle(sql).await?;
        let (conn, handles) = self.conn.with_handles();
        let Some(h) = handles.get_mut(sql) else {
            return Err(WireError::Protocol("a statement handle vanished".into()));
        };
        if h.params.len() != params.len() {
            return Ok(None);
        }
        match conn.query_then_execute(first, h, params).await? {
            None => Ok(None),
            Some(Ahead::Ran(head)) => Ok(Some(Ok(head.map(|h2| (h2, h.columns.clone()))))),
            Some(Ahead::FirstFailed(e)) => {
                conn.drain().await?;
                Ok(Some(Err(e)))
            }
        }
    }

    /// Executes `sql` (prepared on first use) with `params`: the first result, and the
    /// statement's columns (a MariaDB node may leave them out of the answer).
    async fn exec(
        &mut self,
        sql: &str,
        params: &[Value],
    ) -> Result<(Head, Arc<[Column]>), WireError> {
        self.handle(sql).await?;
        let (conn, handles) = self.conn.with_handles();
        let Some(h) = handles.get_mut(sql) else {
            return Err(WireError::Protocol("a statement handle vanished".into()));
        };
        if h.params.len() != params.len() {
            return Err(WireError::Server {
                code: 1210,
                state: "HY000".into(),
                message: format!(
                    "Incorrect arguments to mysqld_stmt_execute: {} parameters for {} markers",
                    params.len(),
                    h.params.len()
                ),
            });
        }
        let head = conn.execute(h, params).await?;
        Ok((head, h.columns.clone()))
    }
}

/// A node's name and metric handles, looked up once per session (node indexes and names are
/// stable across reloads).
struct NodeLabels {
    name: String,
    latency: prometheus::Histogram,
    /// Node connections sessions hold (`shardproxy_backend_connections_held`).
    held: prometheus::IntGauge,
}

pub struct NodeSession {
    shared: Arc<Shared>,
    conn_id: u32,
    labels: Vec<Option<Arc<NodeLabels>>>,
    conns: Vec<Option<NodeConn>>,
    casualties: Casualties,
    db: Option<String>,
    /// Session SETs, replayed on every node connection the session opens later.
    sets: Vec<String>,
    /// Autocommit, the transaction, where the session ran last.
    state: SessionState,
    /// Node connections count an UPDATE's matched rows as affected (CLIENT_FOUND_ROWS).
    found_rows: bool,
    /// Branches of the open transaction registered with the deadlock detector (0: none).
    registered: usize,
    /// What other sessions see of this one (KILL).
    ctl: Arc<crate::sessions::SessionCtl>,
    /// Where the statement running may read (set by the frontend for each statement).
    read_from: ReadFrom,
    /// Per node, what a replica must hold before this session reads there: its last
    /// write's (`crate::replica`).
    needs: Vec<Option<crate::replica::Needs>>,
    /// Nodes written outside a transaction by the command running.
    wrote: Vec<usize>,
    /// Nodes the open transaction wrote on.
    tx_wrote: Vec<usize>,
}

impl NodeSession {
    pub fn new(shared: Arc<Shared>, conn_id: u32) -> Self {
        let nodes = shared.topology().nodes.len();
        let ctl = shared.sessions.register(conn_id);
        let mode = shared.base_mode();
        NodeSession {
            shared,
            conn_id,
            conns: (0..nodes).map(|_| None).collect(),
            labels: Vec::new(),
            casualties: Mutex::new(Vec::new()),
            db: None,
            sets: Vec::new(),
            state: SessionState {
                mode,
                ..SessionState::default()
            },
            found_rows: false,
            registered: 0,
            ctl,
            read_from: ReadFrom::Primary,
            needs: Vec::new(),
            wrote: Vec::new(),
            tx_wrote: Vec::new(),
        }
    }

    /// The state a session starts in (after the handshake, COM_RESET_CONNECTION or
    /// COM_CHANGE_USER): connections back to their pools, `sets` the handshake's.
    /// The session's current database (USE, the handshake's, COM_CHANGE_USER's).
    pub fn db(&self) -> Option<&str> {
        self.db.as_deref()
    }

    pub fn reset(&mut self, db: Option<String>, sets: Vec<String>, found_rows: bool) {
        self.mark_tx_dirty();
        self.unregister();
        for n in 0..self.conns.len() {
            self.drop_conn(n);
        }
        self.db = db;
        self.state = SessionState::default();
        self.state.mode = self.shared.base_mode();
        // The handshake's character set (`SET NAMES x [COLLATE y]`, the proxy's own text).
        for s in &sets {
            if let Some(cs) = s
                .strip_prefix("SET NAMES ")
                .and_then(|r| r.split_whitespace().next())
            {
                self.state.charset = cs.to_string();
            }
        }
        self.sets = sets;
        self.found_rows = found_rows;
    }

    /// After a SET that may change how text is read (`sql_mode`) or what charset bound
    /// strings are in (`NAMES`, `character_set_client`), the node's word on both: the
    /// session reads, splits and rewrites its statements the way the node will.
    async fn read_text_state(&mut self, node: usize, sql: &str) -> Result<(), NodeError> {
        let b = sql.as_bytes();
        let touches = [&b"sql_mode"[..], b"names", b"character_set", b"charset"]
            .iter()
            .any(|w| crate::sql::contains_ci(b, w));
        if !touches {
            return Ok(());
        }
        let rows = self
            .rows_of(
                node,
                "SELECT @@SESSION.sql_mode, @@SESSION.character_set_client",
            )
            .await?;
        let text = |i: usize| -> Option<String> {
            match rows.first()?.get(i)? {
                Value::Bytes(v) => Some(String::from_utf8_lossy(v).into_owned()),
                _ => None,
            }
        };
        if let Some(mode) = text(0) {
            self.state.mode = crate::sql::lex::Mode::of_sql_mode(&mode);
        }
        if let Some(cs) = text(1) {
            self.state.charset = cs;
        }
        Ok(())
    }

    /// The connections of an open transaction's branches are reset when given back (the
    /// node then rolls the branch back), whatever their last status flags said: an XA
    /// branch must never reach another session.
    fn mark_tx_dirty(&mut self) {
        let nodes: Vec<usize> = self.state.tx_nodes().collect();
        for n in nodes {
            if let Some(c) = self.conns.get_mut(n).and_then(Option::as_mut) {
                c.conn.mark_dirty();
            }
        }
    }

    /// What other sessions see of this one (its user, KILL).
    pub fn ctl(&self) -> &Arc<crate::sessions::SessionCtl> {
        &self.ctl
    }

    /// Tells the deadlock detector which node connections the open transaction's branches
    /// are on, when they changed.
    fn sync_registry(&mut self) {
        let n = self.state.tx.as_ref().map_or(0, |t| t.branches.len());
        if n == self.registered {
            return;
        }
        let conns = self.conn_ids(self.state.tx_nodes());
        self.shared.deadlocks.register(self.conn_id, conns);
        self.registered = n;
    }

    /// (node, the node's id of the session's connection there) for each of `nodes` the
    /// session holds a connection to: what the deadlock detector and KILL address.
    fn conn_ids(&self, nodes: impl Iterator<Item = usize>) -> Vec<(usize, u32)> {
        nodes
            .filter_map(|n| {
                self.conns
                    .get(n)
                    .and_then(Option::as_ref)
                    .map(|c| (n, c.conn.id()))
            })
            .collect()
    }

    fn unregister(&mut self) {
        if self.registered > 0 {
            self.shared.deadlocks.unregister(self.conn_id);
            self.registered = 0;
        }
    }

    /// The node's name and metric handles.
    fn labels(&mut self, node: usize) -> Arc<NodeLabels> {
        if node >= self.labels.len() {
            self.labels.resize_with(node + 1, || None);
        }
        if let Some(l) = &self.labels[node] {
            return l.clone();
        }
        let name = self.shared.backends.name(node);
        let l = Arc::new(NodeLabels {
            latency: self.shared.metrics.latency.with_label_values(&[&name]),
            held: self.shared.metrics.held.with_label_values(&[&name]),
            name,
        });
        self.labels[node] = Some(l.clone());
        l
    }

    fn node_error(&self, node: usize, e: &WireError) -> NodeError {
        NodeError {
            node,
            error: MyError::from_wire(&self.shared.backends.name(node), e),
            broke: e.breaks(),
        }
    }

    /// Deals with the failures the last statement's results reported, and gives back the
    /// node connections the session does not need between statements (the frontend calls
    /// it when a command is answered; every door operation reaps first).
    ///
    /// Kept: the connection of the session's open transaction, of its table locks, of its
    /// last statement when that left warnings or an error (for `SHOW WARNINGS`), of its
    /// last generated id when the proxy could not read it (`LAST_INSERT_ID()`; otherwise
    /// the proxy answers that itself, as `ROW_COUNT()` and `FOUND_ROWS()`:
    /// `crate::sql::seen`), and any that carries state the proxy does not track (it stays
    /// the session's until the session ends: the session is pinned). Every other goes back to its node's pool as it is, for whichever session
    /// needs that node next: the nodes serve few, busy connections instead of one per
    /// client and node.
    pub async fn settle(&mut self) {
        self.ctl.idle();
        self.reap();
        self.read_from = ReadFrom::Primary;
        self.note_writes();
        self.settle_tx().await;
        if self.state.tx.is_none() {
            self.unregister();
        }
        for node in 0..self.conns.len() {
            // A statement of the client's changed the session's state on the node in a way
            // the proxy did not read (a SET inside an executable comment, a procedure's
            // USE, a temporary table): the connection is the session's from now on, and
            // reset before another takes it.
            if let Some(c) = self.conns[node].as_mut() {
                if c.conn.take_state_changed() {
                    if !c.conn.is_dirty() {
                        self.shared
                            .metrics
                            .pins
                            .with_label_values(&["session_state"])
                            .inc();
                    }
                    c.conn.mark_dirty();
                }
            }
            let (needed, diagnostics) = match &self.conns[node] {
                None => continue,
                // A replica's state goes with its connection (reset in the pool); a read-only
                // transaction's branch there stays.
                Some(c) if c.replica.is_some() => (
                    self.state.tx_nodes().any(|b| b == node),
                    self.state.diagnostics && self.state.last_node == Some(node),
                ),
                Some(_) => (
                    self.needed(node),
                    self.state.diagnostics && self.state.last_node == Some(node),
                ),
            };
            if !needed && !diagnostics {
                self.conns[node] = None;
                self.held(node, -1);
            } else if let Some(c) = self.conns[node].as_mut() {
                c.spare = !needed;
            }
        }
    }

    /// Is the session's connection to `node` more than a way to the node: its
    /// transaction's, its locks', its untracked state's, an insert id's not read yet?
    fn needed(&self, node: usize) -> bool {
        self.conns
            .get(node)
            .and_then(Option::as_ref)
            .is_some_and(|c| c.conn.is_dirty())
            || (!self.state.insert_id_known && self.state.insert_id_node == Some(node))
            || self.state.tx_nodes().any(|b| b == node)
            || self.state.locked.contains(&node)
    }

    /// The session's `LAST_INSERT_ID()` after its statement on `node` whose result reported
    /// an id (`reported`; 0 for none, when the statement set it by `LAST_INSERT_ID(expr)`):
    /// read from the connection. `Ok(None)`: the statement left it unchanged. An id given
    /// explicitly is reported too, but changes nothing: the connection's value, lent by
    /// another session, is told apart by what the proxy read there before.
    pub async fn insert_id_after(
        &mut self,
        node: usize,
        reported: u64,
        sets: bool,
    ) -> Result<Option<u64>, NodeError> {
        let rows = self.rows_of(node, "SELECT LAST_INSERT_ID()").await?;
        let now = match rows.first().and_then(|r| r.first()) {
            Some(Value::UInt(v)) => *v,
            Some(Value::Int(v)) => u64::try_from(*v).unwrap_or(0),
            _ => return Err(vanished(node)),
        };
        let Some(nc) = self.conns.get_mut(node).and_then(Option::as_mut) else {
            return Err(vanished(node));
        };
        let before = nc.conn.insert_id();
        nc.conn.set_insert_id(now);
        let changed = if sets {
            true
        } else {
            now == reported && now != before
        };
        Ok(changed.then_some(now))
    }

    /// Deals with the failures results reported: counted, noted for SHOW NODES, broken
    /// connections dropped.
    fn reap(&mut self) {
        let found: Vec<(usize, String, bool, u16)> =
            std::mem::take(&mut *self.casualties.lock().unwrap_or_else(|e| e.into_inner()));
        for (node, message, broke, code) in found {
            self.failed(node, &message, broke, code);
        }
    }

    fn failed(&mut self, node: usize, message: &str, broke: bool, code: u16) {
        self.state.failed(node, code);
        // The node's health counts its faults, not the statements' own errors (a client's
        // syntax error, a duplicate key).
        if broke || code == 0 || node_fault(code) {
            let name = self.shared.backends.name(node);
            self.shared
                .metrics
                .backend_errors
                .with_label_values(&[&name])
                .inc();
            self.shared.backends.note_error(node, message);
        }
        if broke {
            self.drop_conn(node);
        }
    }

    /// The connection to `node` goes back to its pool (it holds nothing of the session's).
    fn give_back(&mut self, node: usize) {
        if self.conns.get_mut(node).and_then(Option::take).is_some() {
            self.held(node, -1);
        }
    }

    fn drop_conn(&mut self, node: usize) {
        if self.conns.get_mut(node).and_then(Option::take).is_some() {
            self.held(node, -1);
        }
        if self.state.lost(node) {
            warn!(
                conn = self.conn_id,
                node, "lost the connection of an open transaction; it was rolled back"
            );
        }
    }

    /// Counts the node connections sessions hold, for the metrics.
    fn held(&mut self, node: usize, delta: i64) {
        self.labels(node).held.add(delta);
    }

    fn grow(&mut self, node: usize) {
        if node >= self.conns.len() {
            self.conns.resize_with(node + 1, || None);
        }
    }

    /// At the first use of a [`NodeConn::spare`] connection in a command: dropped when the
    /// node closed it meanwhile (killed, or restarted), so the statement opens a fresh one
    /// instead of failing on a dead one; the warnings it was kept for went with the node.
    fn drop_if_dead(&mut self, node: usize) {
        let Some(c) = self.conns.get_mut(node).and_then(Option::as_mut) else {
            return;
        };
        if std::mem::take(&mut c.spare) && !c.conn.alive() {
            self.drop_conn(node);
        }
    }

    /// Opens the session's connection to `node` if it holds none, brought to its state.
    async fn open(&mut self, node: usize) -> Result<(), NodeError> {
        self.reap();
        self.grow(node);
        self.drop_if_dead(node);
        if self.conns[node]
            .as_ref()
            .is_some_and(|c| c.replica.is_some())
            && !self.read_only_tx()
        {
            // A read-only transaction's replica is the one its branch there opens on.
            self.give_back(node);
        }
        if self.conns[node].is_none() {
            let c = self
                .shared
                .backends
                .connect_with(node, self.found_rows, &self.sets)
                .await
                .map_err(|error| broken_at(node, error))?;
            let mut c = c;
            self.bring_to_state(node, &mut c).await?;
            self.conns[node] = Some(NodeConn::new(c));
            self.held(node, 1);
        }
        Ok(())
    }

    /// Brings a connection just taken from the pool to the session's state: a connection
    /// whose SETs are not a beginning of the session's is reset first; then the session's
    /// database (the URL's when it chose none) and the SETs it lacks.
    async fn bring_to_state(&self, node: usize, c: &mut Pooled) -> Result<(), NodeError> {
        bring(c, self.db.as_deref(), &self.sets)
            .await
            .map_err(|e| self.node_error(node, &e))
    }

    /// Runs one of the proxy's own statements on the session's connection to `node`.
    async fn run_own(&mut self, node: usize, sql: &str) -> Result<(), NodeError> {
        self.open(node).await?;
        let Some(nc) = self.conns.get_mut(node).and_then(Option::as_mut) else {
            return Err(vanished(node));
        };
        // The proxy's own statements (a session SET it records, USE) change the state it
        // tracks: what the node flags for them is not the client's doing.
        let before = nc.conn.state_changed();
        let r = nc.conn.query_drop(sql).await;
        if !before {
            nc.conn.take_state_changed();
        }
        match r {
            Ok(()) => Ok(()),
            Err(e) => {
                let err = self.node_error(node, &e);
                self.failed(node, &err.error.message, err.broke, err.error.code);
                Err(err)
            }
        }
    }

    /// A statement on the session's connection (after any lost connection was dealt with).
    async fn rows_of(&mut self, node: usize, sql: &str) -> Result<Vec<Vec<Value>>, NodeError> {
        self.open(node).await?;
        let Some(nc) = self.conns.get_mut(node).and_then(Option::as_mut) else {
            return Err(vanished(node));
        };
        let r = async {
            let (head, _) = nc.exec(sql, &[]).await?;
            let mut rows = Vec::new();
            if let Head::Rows(cols) = head {
                while let RowEvent::Row(p) = nc.conn.read_row().await? {
                    let row = decode(p, &cols, true)
                        .map_err(|e| WireError::Protocol(format!("a malformed row: {e}")))?;
                    rows.push(typed(row));
                }
            }
            nc.conn.drain().await?;
            Ok::<_, WireError>(rows)
        }
        .await;
        match r {
            Ok(rows) => Ok(rows),
            Err(e) => {
                let err = self.node_error(node, &e);
                self.failed(node, &err.error.message, err.broke, err.error.code);
                Err(err)
            }
        }
    }

    /// The connection to `node` has `db` as its database now.
    fn used(&mut self, node: usize, db: &str) {
        if let Some(nc) = self.conns.get_mut(node).and_then(Option::as_mut) {
            nc.conn.set_db(Some(db.to_string()));
        }
    }

    /// Every open connection but `first` runs `sql` too.
    async fn on_others(&mut self, first: usize, sql: &str) -> Result<(), MyError> {
        for n in 0..self.conns.len() {
            if n != first && self.conns[n].is_some() {
                self.run_own(n, sql).await?;
            }
        }
        Ok(())
    }
}

/// [`NodeSession::bring_to_state`], given the session's database and SETs.
async fn bring(c: &mut Pooled, db: Option<&str>, sets: &[String]) -> Result<(), WireError> {
    if !sets.starts_with(c.sets()) {
        c.reset_state().await?;
    }
    let db = db.map(str::to_string).or_else(|| c.url_db());
    match db {
        Some(db) if c.db() != Some(db.as_str()) => {
            c.query_drop(&use_stmt(&db)).await?;
            c.set_db(Some(db));
        }
        None if c.db().is_some() => c.reset_state().await?,
        _ => {}
    }
    let done = c.sets().len();
    for s in &sets[done..] {
        c.query_drop(s.as_str()).await?;
    }
    // A replica's connection stays READ ONLY whatever the session's SETs said (a `SET
    // SESSION TRANSACTION READ WRITE`, in any of its spellings).
    if c.read_only() && done < sets.len() {
        c.query_drop("SET SESSION TRANSACTION READ ONLY").await?;
    }
    c.set_sets(sets);
    // All of that is the session's known state: what the node flags from here on is the
    // client's doing.
    c.take_state_changed();
    Ok(())
}

fn typed(r: Row) -> Vec<Value> {
    r.into_iter().map(|v| v.unwrap_or(Value::NULL)).collect()
}

/// Server errors that say the node is in trouble, not the statement: out of connections,
/// memory or disk, shutting down, connection killed or timed out by the server.
fn node_fault(code: u16) -> bool {
    matches!(
        code,
        1021 | 1030 | 1037 | 1038 | 1040 | 1041 | 1053 | 1135 | 1927 | 4031
    )
}

/// A statement the deadlock detector killed (1317, query interrupted) failed by a deadlock:
/// the client gets 1213, as from a node's own detection, and the transaction is rolled back.
fn deadlock_of(
    registry: &crate::exec::txn::branches::Registry,
    node: usize,
    conn: u32,
    e: WireError,
) -> WireError {
    match e {
        WireError::Server { code: 1317, .. } if registry.take_victim(node, conn) => {
            WireError::Server {
                code: 1213,
                state: "40001".into(),
                message: "Deadlock found when trying to get lock; try restarting transaction (a deadlock across nodes, broken by shardproxy)".into(),
            }
        }
        other => other,
    }
}

fn use_stmt(db: &str) -> String {
    format!("USE `{}`", db.replace('`', "``"))
}

fn vanished(node: usize) -> NodeError {
    NodeError {
        node,
        error: MyError::internal("shardproxy: connection vanished"),
        broke: true,
    }
}

impl Drop for NodeSession {
    fn drop(&mut self) {
        self.shared.sessions.unregister(self.conn_id);
        self.reap();
        self.mark_tx_dirty();
        self.unregister();
        for node in 0..self.conns.len() {
            if self.conns[node].is_some() {
                self.held(node, -1);
            }
        }
    }
}

/// A result being read from one node, in either protocol.
pub struct NodeRes<'a> {
    nc: &'a mut NodeConn,
    cur: Cur,
    /// An executed statement's result (binary rows).
    binary: bool,
    /// The executed statement's columns, for a next result whose columns the node left out.
    known: Option<Arc<[Column]>>,
    warnings: u16,
    node: usize,
    labels: Arc<NodeLabels>,
    casualties: &'a Casualties,
    started: Instant,
    status: StatusFlags,
}

/// The result being read.
enum Cur {
    Rows(Arc<[Column]>),
    Ok(Summary),
    /// Every result was read.
    Done,
}

/// A node's failure while the connections are borrowed: recorded for the session to deal
/// with when the statement is over (counted, noted, a broken connection dropped), and
/// returned as the statement's error.
fn casualty(casualties: &Casualties, node: usize, name: &str, e: WireError) -> NodeError {
    let broke = e.breaks();
    casualty_as(casualties, node, name, e, broke)
}

/// [`casualty`], `broke` saying whether the session must drop the connection.
fn casualty_as(
    casualties: &Casualties,
    node: usize,
    name: &str,
    e: WireError,
    broke: bool,
) -> NodeError {
    let code = match &e {
        WireError::Server { code, .. } => *code,
        _ => 0,
    };
    casualties
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((node, e.to_string(), broke, code));
    NodeError {
        node,
        error: MyError::from_wire(name, &e),
        broke,
    }
}

impl<'a> NodeRes<'a> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        nc: &'a mut NodeConn,
        head: Head,
        binary: bool,
        known: Option<Arc<[Column]>>,
        node: usize,
        labels: Arc<NodeLabels>,
        casualties: &'a Casualties,
        started: Instant,
        status: StatusFlags,
    ) -> Self {
        let mut r = NodeRes {
            nc,
            cur: Cur::Done,
            binary,
            known,
            warnings: 0,
            node,
            labels,
            casualties,
            started,
            status,
        };
        r.enter(head);
        r
    }

    fn enter(&mut self, head: Head) {
        self.cur = match head {
            Head::Rows(cols) => Cur::Rows(cols),
            Head::Ok(s) => {
                self.warnings = s.warnings;
                Cur::Ok(s)
            }
        };
    }

    fn fail(&mut self, e: WireError) -> NodeError {
        self.cur = Cur::Done;
        casualty(self.casualties, self.node, &self.labels.name, e)
    }

    /// Past the current result: the next one if the node said one follows.
    async fn advance(&mut self, more: bool) -> Result<(), NodeError> {
        if !more {
            self.cur = Cur::Done;
            return Ok(());
        }
        match self.nc.conn.next_head(self.known.as_ref()).await {
            Ok(head) => {
                self.enter(head);
                Ok(())
            }
            Err(e) => Err(self.fail(e)),
        }
    }
}

impl NodeResult for NodeRes<'_> {
    fn columns(&self) -> Option<Arc<[Column]>> {
        match &self.cur {
            Cur::Rows(cols) if !cols.is_empty() => Some(cols.clone()),
            _ => None,
        }
    }

    async fn next(&mut self) -> Result<Option<Row>, NodeError> {
        let cols = match &self.cur {
            Cur::Rows(cols) => cols.clone(),
            Cur::Ok(s) => {
                let more = s.more();
                self.advance(more).await?;
                return Ok(None);
            }
            Cur::Done => return Ok(None),
        };
        let decoded = match self.nc.conn.read_row().await {
            Ok(RowEvent::Row(p)) => decode(p, &cols, self.binary)
                .map(Some)
                .map_err(|e| WireError::Protocol(format!("a malformed row: {e}"))),
            Ok(RowEvent::End(s)) => {
                self.warnings = s.warnings;
                self.advance(s.more()).await?;
                return Ok(None);
            }
            Err(e) => Err(e),
        };
        decoded.map_err(|e| self.fail(e))
    }

    /// The rows as the node sent them: one node answers and nothing merges, so each row
    /// packet is written to the client untouched (no decoding into values and back).
    async fn relay_rows<K: Sink>(&mut self, sink: &mut K) -> Result<(), NodeError> {
        if !matches!(self.cur, Cur::Rows(_)) {
            return Ok(());
        }
        loop {
            match self.nc.conn.read_row().await {
                Ok(RowEvent::Row(p)) => {
                    sink.raw_row(p);
                    sink.flush_some().await.map_err(client_gone)?;
                }
                Ok(RowEvent::End(s)) => {
                    self.warnings = s.warnings;
                    return self.advance(s.more()).await;
                }
                Err(e) => return Err(self.fail(e)),
            }
        }
    }

    fn ok(&self) -> OkInfo {
        match &self.cur {
            Cur::Ok(s) => OkInfo {
                affected: s.affected,
                last_insert_id: s.last_insert_id,
                warnings: s.warnings,
                info: s.info.clone(),
            },
            _ => OkInfo::default(),
        }
    }

    fn warnings(&self) -> u16 {
        self.warnings
    }

    fn status(&self) -> StatusFlags {
        self.status
    }

    fn pending(&self) -> bool {
        !matches!(self.cur, Cur::Done)
    }

    async fn finish(self) -> Result<(), NodeError> {
        let r = self.nc.conn.drain().await;
        self.labels
            .latency
            .observe(self.started.elapsed().as_secs_f64());
        r.map_err(|e| casualty(self.casualties, self.node, &self.labels.name, e))
    }
}

/// Starts `stmt` on a connection: its first result, and (executed) the statement's columns.
async fn start_on(
    nc: &mut NodeConn,
    stmt: Stmt<'_>,
    binary: bool,
) -> Result<(Head, Option<Arc<[Column]>>), WireError> {
    if binary {
        let (head, cols) = nc.exec(stmt.sql, stmt.params).await?;
        Ok((head, Some(cols)))
    } else {
        Ok((nc.conn.query(stmt.sql).await?, None))
    }
}

/// A node that could not be reached: its connection is gone, nothing was answered.
fn broken_at(node: usize, error: MyError) -> NodeError {
    NodeError {
        node,
        error,
        broke: true,
    }
}
