//! A client session's node connections: the real [`Door`].
//!
//! It holds one connection per node the session touched, brings each new one to the
//! session's state (database, SETs, character set) before its first statement, carries the
//! session's transaction (opened on the first node a statement touches; a write on a second
//! node is refused until cross-node transactions exist), drops connections that broke, and
//! counts node latency and errors.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::future::join_all;
use mysql_common::constants::StatusFlags;
use mysql_common::packets::Column;
use mysql_common::value::Value;
use tracing::warn;

use crate::config::TxMode;
use crate::error::MyError;
use crate::exec::door::{
    client_gone, Door, NodeError, NodeResult, OkInfo, Prepared, Run, Sink, Stmt,
};
use crate::exec::txn::state::SessionState;
use crate::exec::txn::Transactions;
use crate::merge::Row;
use crate::node::conn::Ahead;
use crate::node::conn::{decode, Summary};
use crate::node::{Head, RowEvent, Statement, WireError};
use crate::pools::Pooled;
use crate::shared::Shared;

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
}

impl NodeConn {
    fn new(conn: Pooled) -> Self {
        NodeConn { conn, spare: false }
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
                Some(c) => (
                    c.conn.is_dirty()
                        || (!self.state.insert_id_known && self.state.insert_id_node == Some(node))
                        || self.state.tx_nodes().any(|b| b == node)
                        || self.state.locked.contains(&node),
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
        if self.conns[node].is_none() {
            let c = self
                .shared
                .backends
                .connect_with(node, self.found_rows, &self.sets)
                .await
                .map_err(|error| NodeError {
                    node,
                    error,
                    broke: true,
                })?;
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
        let err = |e: WireError| self.node_error(node, &e);
        if !self.sets.starts_with(c.sets()) {
            c.reset_state().await.map_err(err)?;
        }
        let db = self.db.clone().or_else(|| c.url_db());
        match db {
            Some(db) if c.db() != Some(db.as_str()) => {
                c.query_drop(&use_stmt(&db)).await.map_err(err)?;
                c.set_db(Some(db));
            }
            None if c.db().is_some() => c.reset_state().await.map_err(err)?,
            _ => {}
        }
        let done = c.sets().len();
        for s in &self.sets[done..] {
            c.query_drop(s.as_str()).await.map_err(err)?;
        }
        c.set_sets(&self.sets);
        // All of that is the session's known state: what the node flags from here on is
        // the client's doing.
        c.take_state_changed();
        Ok(())
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

    /// Statements on a pooled connection of their own to `node`, outside the session, on
    /// the URL's database: the rows of the last. `dirty`: they leave state on it.
    async fn outside(
        &self,
        node: usize,
        sqls: &[&str],
        dirty: bool,
    ) -> Result<Vec<Vec<Value>>, NodeError> {
        let mut conn = self
            .shared
            .backends
            .connect(node)
            .await
            .map_err(|error| NodeError {
                node,
                error,
                broke: true,
            })?;
        if dirty {
            conn.mark_dirty();
        }
        let r = async {
            conn.ensure_url_db().await?;
            let mut last = Vec::new();
            for sql in sqls {
                last = conn.query_rows(sql).await?;
            }
            Ok::<_, WireError>(last)
        }
        .await;
        r.map(|rows| rows.into_iter().map(typed).collect())
            .map_err(|e| self.node_error(node, &e))
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

fn typed(r: Row) -> Vec<Value> {
    r.into_iter().map(|v| v.unwrap_or(Value::NULL)).collect()
}

/// Does the statement leave state on its node connection that the proxy does not track
/// (temporary tables, named locks, SQL-level prepared
/// statements, a procedure's doings, FOUND_ROWS of SQL_CALC_FOUND_ROWS, XA)? Then the
/// connection stays with the session and is reset when given back: the reason, for the
/// pins metric. Conservative: an `@` in a string literal counts too. (`LAST_INSERT_ID(expr)`
/// does not: the proxy reads the id back and answers for it, `crate::sql::seen`.)
fn leaves_state(sql: &str) -> Option<&'static str> {
    let b = sql.as_bytes();
    let lead = crate::sql::first_word(sql);
    // User variables are not among them: the session reads back every value assigned and
    // keeps it as a `SET` of its own, on every connection it borrows, and the record of
    // each connection's SETs gets it reset before another session takes it
    // (`crate::sql::uservars`).
    const LEADS: [(&str, &str); 9] = [
        ("CALL", "procedure"),
        ("PREPARE", "sql_prepare"),
        ("EXECUTE", "sql_prepare"),
        ("DEALLOCATE", "sql_prepare"),
        ("HANDLER", "handler"),
        ("XA", "xa"),
        ("LOCK", "lock_tables"),
        ("FLUSH", "flush"),
        ("BACKUP", "backup_lock"),
    ];
    if let Some(w) = lead {
        if let Some((_, why)) = LEADS.iter().find(|(k, _)| w.eq_ignore_ascii_case(k)) {
            return Some(why);
        }
    }
    const MARKERS: [(&[u8], &str); 3] = [
        (b"TEMPORARY", "temporary_table"),
        (b"GET_LOCK", "named_lock"),
        (b"SQL_CALC_FOUND_ROWS", "calc_found_rows"),
    ];
    MARKERS
        .iter()
        .find(|(m, _)| crate::sql::contains_ci(b, m))
        .map(|(_, why)| *why)
}

/// Marks the connection pinned to its session when `sql` leaves state on it the proxy does
/// not track, counting the pin once per connection.
fn pin_if_stateful(conn: &mut Pooled, sql: &str, metrics: &crate::metrics::Metrics) {
    if let Some(why) = leaves_state(sql) {
        if !conn.is_dirty() {
            metrics.pins.with_label_values(&[why]).inc();
        }
        conn.mark_dirty();
    }
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

impl Door for NodeSession {
    type Res<'a> = NodeRes<'a>;

    async fn start<'a>(
        &'a mut self,
        node: usize,
        stmt: Stmt<'a>,
        run: Run,
    ) -> Result<NodeRes<'a>, NodeError> {
        self.reap();
        self.open(node).await?;
        // A statement that opens its node's branch carries the BEGIN in its packet (text:
        // `BEGIN; stmt`), or in the same write (a prepared read: were the BEGIN refused,
        // the read ran outside the transaction and its answer is dropped; a prepared write
        // could not be taken back, so it opens its branch first).
        let ahead = if run.binary && run.access == crate::exec::door::Access::Write {
            None
        } else {
            crate::exec::txn::begin_ahead(self, node, run.access)?
        };
        if ahead.is_none() {
            Transactions::enter(self, &[node], run.access).await?;
        }
        self.state.last_node = Some(node);
        self.sync_registry();
        // With the BEGIN ahead, the branches the deadlock detector must know once it opened
        // (before the statement can wait on a lock).
        let with_new: Option<Vec<(usize, u32)>> = ahead
            .as_ref()
            .map(|_| self.conn_ids(self.state.tx_nodes().chain([node])));
        let labels = self.labels(node);
        let started = Instant::now();
        let status = Door::status(self);
        let Some(conn) = self.conns.get_mut(node).and_then(Option::as_mut) else {
            return Err(vanished(node));
        };
        self.ctl.running(&[(node, conn.conn.id())]);
        pin_if_stateful(&mut conn.conn, stmt.sql, &self.shared.metrics);
        // The BEGIN sent ahead failed: the branch did not open, and the connection (an XA
        // START refused leaves it in a state of its own) is dropped, never reused.
        let mut begin_failed = false;
        // The detector knows the new branch before the statement can wait on a lock (it
        // is resynchronised if the BEGIN fails).
        if let Some(conns) = &with_new {
            self.registered = usize::MAX;
            self.shared.deadlocks.register(self.conn_id, conns.clone());
        }
        let r = match &ahead {
            None => start_on(conn, stmt, run.binary).await,
            // A statement the node cannot prepare is the statement's error: nothing was sent
            // ahead of it, the branch stays unopened and the connection good.
            Some((begin, xa)) if run.binary => match conn.handle(stmt.sql).await.map(|_| ()) {
                Err(e) => Err(e),
                Ok(()) => match conn.exec_after(begin, stmt.sql, stmt.params).await {
                    Ok(Some(Ok(ran))) => {
                        self.state.began(node, *xa, false);
                        ran.map(|(head, cols)| (head, Some(cols)))
                    }
                    Ok(Some(Err(e))) | Err(e) => {
                        if !e.breaks() {
                            conn.conn.discard();
                            begin_failed = true;
                        }
                        Err(e)
                    }
                    // Long data (or a parameter count the node will refuse): BEGIN apart.
                    Ok(None) => match conn.conn.query_drop(begin).await {
                        Ok(()) => {
                            self.state.began(node, *xa, false);
                            start_on(conn, stmt, true).await
                        }
                        Err(e) => {
                            conn.conn.discard();
                            begin_failed = true;
                            Err(e)
                        }
                    },
                },
            },
            // A read goes in the same write as its BEGIN, each its own command (were the
            // BEGIN refused, the read ran outside the transaction and its answer is
            // dropped); a write could not be taken back, so its BEGIN goes first. Never one
            // text: node connections read no client text as several statements.
            Some((begin, xa)) if run.access != crate::exec::door::Access::Write => {
                match conn.conn.query_then_query(begin, stmt.sql).await {
                    Ok(Ahead::Ran(head)) => {
                        self.state.began(node, *xa, false);
                        head.map(|h| (h, None))
                    }
                    Ok(Ahead::FirstFailed(e)) => {
                        let _ = conn.conn.drain().await;
                        conn.conn.discard();
                        begin_failed = true;
                        Err(e)
                    }
                    Err(e) => {
                        conn.conn.discard();
                        begin_failed = true;
                        Err(e)
                    }
                }
            }
            Some((begin, xa)) => match conn.conn.query_drop(begin).await {
                Ok(()) => {
                    self.state.began(node, *xa, true);
                    conn.conn.query(stmt.sql).await.map(|h| (h, None))
                }
                Err(e) => {
                    conn.conn.discard();
                    begin_failed = true;
                    Err(e)
                }
            },
        };
        match r {
            Ok((head, known)) => Ok(NodeRes::new(
                conn,
                head,
                run.binary,
                known,
                node,
                labels,
                &self.casualties,
                started,
                status,
            )),
            Err(e) => {
                let e = deadlock_of(&self.shared.deadlocks, node, conn.conn.id(), e);
                let broke = begin_failed || e.breaks();
                Err(casualty_as(&self.casualties, node, &labels.name, e, broke))
            }
        }
    }

    async fn start_all<'a>(
        &'a mut self,
        stmts: &'a [(usize, Stmt<'a>)],
        run: Run,
    ) -> Result<Vec<Result<NodeRes<'a>, NodeError>>, NodeError> {
        self.reap();
        if let Some(max) = stmts.iter().map(|(n, _)| *n).max() {
            self.grow(max);
        }
        for (n, _) in stmts {
            self.drop_if_dead(*n);
        }
        // Open missing connections in parallel.
        let missing: Vec<usize> = stmts
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| self.conns[*n].is_none())
            .collect();
        if !missing.is_empty() {
            let backends = &self.shared.backends;
            let opened = join_all(
                missing
                    .iter()
                    .map(|n| backends.connect_with(*n, self.found_rows, &self.sets)),
            )
            .await;
            for (n, r) in missing.iter().zip(opened) {
                let mut c = r.map_err(|error| NodeError {
                    node: *n,
                    error,
                    broke: true,
                })?;
                self.bring_to_state(*n, &mut c).await?;
                self.conns[*n] = Some(NodeConn::new(c));
                self.held(*n, 1);
            }
        }
        let nodes: Vec<usize> = stmts.iter().map(|(n, _)| *n).collect();
        Transactions::enter(self, &nodes, run.access).await?;
        self.sync_registry();
        self.state.last_node = stmts.first().map(|(n, _)| *n);
        let status = Door::status(self);
        let labels: Vec<Arc<NodeLabels>> = stmts.iter().map(|(n, _)| self.labels(*n)).collect();
        let running = self.conn_ids(stmts.iter().map(|(n, _)| *n));
        self.ctl.running(&running);
        // Each statement's connection, borrowed apart from the others.
        let mut slots: Vec<Option<&'a mut NodeConn>> = Vec::with_capacity(stmts.len());
        {
            let mut by_node: Vec<Option<&'a mut NodeConn>> =
                self.conns.iter_mut().map(Option::as_mut).collect();
            for (n, _) in stmts {
                slots.push(by_node.get_mut(*n).and_then(Option::take));
            }
        }
        let casualties = &self.casualties;
        let metrics = &self.shared.metrics;
        let registry = &self.shared.deadlocks;
        let starts = slots.into_iter().zip(stmts.iter()).zip(labels).map(
            |((conn, (node, stmt)), labels)| {
                let node = *node;
                async move {
                    let Some(conn) = conn else {
                        return Err(NodeError {
                            node,
                            error: MyError::internal(
                                "shardproxy: a statement names one node twice",
                            ),
                            broke: false,
                        });
                    };
                    let started = Instant::now();
                    pin_if_stateful(&mut conn.conn, stmt.sql, metrics);
                    match start_on(conn, *stmt, run.binary).await {
                        Ok((head, known)) => Ok(NodeRes::new(
                            conn, head, run.binary, known, node, labels, casualties, started,
                            status,
                        )),
                        Err(e) => {
                            let e = deadlock_of(registry, node, conn.conn.id(), e);
                            Err(casualty(casualties, node, &labels.name, e))
                        }
                    }
                }
            },
        );
        Ok(join_all(starts).await)
    }

    async fn fetch(&mut self, node: usize, sql: &str) -> Result<Vec<Vec<Value>>, NodeError> {
        self.rows_of(node, sql).await
    }

    async fn fetch_outside(
        &mut self,
        node: usize,
        sql: &str,
    ) -> Result<Vec<Vec<Value>>, NodeError> {
        self.outside(node, &[sql], false).await
    }

    async fn run_on(&mut self, node: usize, sql: &str) -> Result<(), NodeError> {
        self.open(node).await?;
        if let Some(nc) = self.conns.get_mut(node).and_then(Option::as_mut) {
            nc.conn.mark_dirty();
        }
        self.run_own(node, sql).await
    }

    async fn fetch_outside_all(
        &mut self,
        node: usize,
        sqls: &[&str],
    ) -> Result<Vec<Vec<Value>>, NodeError> {
        // LAST_INSERT_ID(expr) and the like: reset before anyone else takes it.
        self.outside(node, sqls, true).await
    }

    async fn check_syntax(&mut self, node: usize, sql: &str) -> Result<(), NodeError> {
        self.open(node).await?;
        let Some(nc) = self.conns.get_mut(node).and_then(Option::as_mut) else {
            return Err(vanished(node));
        };
        let r = async {
            let stmt = nc.conn.prepare(sql).await?;
            nc.conn.close(stmt.id).await
        }
        .await;
        r.map_err(|e| {
            let err = self.node_error(node, &e);
            if err.broke {
                self.drop_conn(node);
            }
            err
        })
    }

    async fn prepare(&mut self, node: usize, sql: &str) -> Result<Prepared, NodeError> {
        self.open(node).await?;
        let Some(nc) = self.conns.get_mut(node).and_then(Option::as_mut) else {
            return Err(vanished(node));
        };
        match nc.handle(sql).await {
            Ok(stmt) => Ok(Prepared {
                params: stmt.params.clone(),
                columns: stmt.columns.to_vec(),
            }),
            Err(e) => {
                let err = self.node_error(node, &e);
                self.failed(node, &err.error.message, err.broke, err.error.code);
                Err(err)
            }
        }
    }

    async fn reachable(&mut self, node: usize) -> Result<(), MyError> {
        self.open(node).await.map_err(|e| e.error)
    }

    fn holds(&self, node: usize) -> bool {
        // A spare one the node closed holds nothing to read (it is replaced on use).
        self.conns
            .get(node)
            .and_then(Option::as_ref)
            .is_some_and(|c| !c.spare || c.conn.alive())
    }

    fn name(&self, node: usize) -> String {
        self.shared.backends.name(node)
    }

    fn state(&self) -> &SessionState {
        &self.state
    }

    fn state_mut(&mut self) -> &mut SessionState {
        &mut self.state
    }

    async fn use_db(&mut self, db: &str) -> Result<(), MyError> {
        let default = self.shared.topology().default_node;
        let node = self.sticky(false, default).unwrap_or(default);
        let stmt = use_stmt(db);
        // Checked on one node first so an unknown database fails cleanly. With no connection
        // open and that node unreachable, it is only remembered (and checked on the first
        // connection the session opens): a node that is down fails only what needs it.
        if self.open(node).await.is_ok() {
            self.run_own(node, &stmt).await?;
            self.used(node, db);
        }
        for n in 0..self.conns.len() {
            if n != node && self.conns[n].is_some() {
                self.run_own(n, &stmt).await?;
                self.used(n, db);
            }
        }
        self.db = Some(db.to_string());
        Ok(())
    }

    async fn set(&mut self, sql: &str) -> Result<(), MyError> {
        // The record it would make, bounded before anything runs: a SET refused after it ran
        // would leave connections unlike the record. A user variable's newer value replaces
        // the older (`crate::sql::uservars`).
        let key = crate::sql::uservars::record_key(sql);
        let kept = self
            .sets
            .iter()
            .filter(|s| crate::sql::uservars::record_key(s) != key);
        if kept.clone().count() >= 256 {
            return Err(MyError::unsupported(
                "more than 256 distinct session SET statements in one session",
            ));
        }
        // Every SET is replayed on each connection the session borrows: their text is
        // bounded as their number is (a user variable holding a large value included).
        const SETS_BYTES: usize = 4 << 20;
        if kept.map(String::len).sum::<usize>() + sql.len() > SETS_BYTES {
            return Err(MyError::unsupported(
                "session SET statements (user variables' values included) over 4 MiB in one session: shardproxy replays them on every node connection it lends the session",
            ));
        }
        // Checked where the session runs, then on every other open connection.
        let default = self.shared.topology().default_node;
        let first = self.sticky(false, default).unwrap_or(default);
        self.run_own(first, sql).await?;
        if let Err(e) = self.on_others(first, sql).await {
            // Some connections ran it, some did not: none is like the session's record.
            for c in self.conns.iter_mut().flatten() {
                c.conn.mark_dirty();
            }
            return Err(e);
        }
        self.sets
            .retain(|s| crate::sql::uservars::record_key(s) != key);
        self.sets.push(sql.to_string());
        for c in self.conns.iter_mut().flatten() {
            c.conn.set_sets(&self.sets);
        }
        self.read_text_state(first, sql)
            .await
            .map_err(|e| e.error)?;
        Ok(())
    }

    async fn kill(&mut self, id: u32, query_only: bool) -> Result<(), MyError> {
        let Some(target) = self.shared.sessions.get(id) else {
            return Err(MyError::new(1094, format!("Unknown thread id: {id}")));
        };
        if target.user() != self.ctl.user() {
            return Err(MyError::new(
                1095,
                format!("You are not owner of thread {id}"),
            ));
        }
        if !query_only {
            target.kill();
        }
        // Its statements stop on every node they run on (from connections of their own).
        for (node, thread) in target.running_now() {
            if let Err(e) = self
                .outside(node, &[&format!("KILL QUERY {thread}")], false)
                .await
            {
                // A statement that already ended there leaves nothing to kill.
                if e.error.code != 1094 {
                    warn!(node = %self.name(node), error = %e.error, "KILL QUERY for session {id} failed on a node");
                }
            }
        }
        if id == self.conn_id && !query_only {
            return Err(MyError::new(1927, "Connection was killed"));
        }
        Ok(())
    }

    fn tx_mode(&self) -> TxMode {
        self.shared.topology().tx_mode
    }

    fn new_xid(&self) -> String {
        self.shared.new_xid()
    }

    async fn run_each(&mut self, stmts: &[(usize, String)]) -> Vec<Result<(), NodeError>> {
        self.reap();
        let mut opened = Vec::with_capacity(stmts.len());
        for (n, _) in stmts {
            opened.push(self.open(*n).await.err());
        }
        let results = {
            let mut by_node: Vec<Option<&mut NodeConn>> =
                self.conns.iter_mut().map(Option::as_mut).collect();
            let conns: Vec<Option<&mut NodeConn>> = stmts
                .iter()
                .zip(&opened)
                .map(|((n, _), failed)| {
                    if failed.is_some() {
                        None
                    } else {
                        by_node.get_mut(*n).and_then(Option::take)
                    }
                })
                .collect();
            join_all(
                conns
                    .into_iter()
                    .zip(stmts)
                    .map(|(c, (_, sql))| async move {
                        match c {
                            // The proxy's own XA steps come two to a text.
                            Some(c) if sql.contains(';') => {
                                c.conn.query_batch(sql).await.map_err(Some)
                            }
                            Some(c) => c.conn.query_drop(sql).await.map_err(Some),
                            None => Err(None),
                        }
                    }),
            )
            .await
        };
        let mut out = Vec::with_capacity(stmts.len());
        for ((r, failed), (node, _)) in results.into_iter().zip(opened).zip(stmts) {
            out.push(match (r, failed) {
                (Ok(()), _) => Ok(()),
                (Err(_), Some(e)) => Err(e),
                (Err(None), None) => Err(vanished(*node)),
                (Err(Some(e)), None) => {
                    let err = self.node_error(*node, &e);
                    self.failed(*node, &err.error.message, err.broke, err.error.code);
                    Err(err)
                }
            });
        }
        out
    }

    async fn decision_table(&mut self, node: usize) -> Result<String, NodeError> {
        self.open(node).await?;
        let db = self
            .conns
            .get(node)
            .and_then(Option::as_ref)
            .and_then(|c| c.conn.url_db());
        let Some(db) = db else {
            return Err(NodeError {
                node,
                error: MyError::unsupported(format!(
                    "a transaction that writes several nodes keeps its decision record in the database of node `{}`'s URL, and that URL names none",
                    self.shared.backends.name(node)
                )),
                broke: false,
            });
        };
        let table = crate::exec::txn::decisions_in(&db);
        if !self.shared.decision_table_ready(node) {
            self.outside(node, &[&crate::exec::txn::decisions_ddl(&table)], false)
                .await?;
            self.shared.decision_table_made(node);
        }
        Ok(table)
    }

    fn discard(&mut self, node: usize) {
        if let Some(c) = self.conns.get_mut(node).and_then(Option::as_mut) {
            c.conn.discard();
        }
        self.drop_conn(node);
    }

    fn count_tx(&self, outcome: &str) {
        self.shared
            .metrics
            .transactions
            .with_label_values(&[outcome])
            .inc();
    }

    fn shadow_failed(&self, node: usize, error: &MyError) {
        use std::sync::atomic::Ordering;
        self.shared
            .migration
            .shadow_failures
            .fetch_add(1, Ordering::Relaxed);
        self.shared.metrics.shadow_failures.inc();
        warn!(
            conn = self.conn_id,
            node = %self.shared.topology().node_name(node),
            error = %error,
            "a dual write's row images did not reach the migration's target; its verify will copy them again"
        );
    }

    fn count_merged(&self, rows: u64) {
        self.shared.metrics.rows_merged.inc_by(rows);
    }

    fn count_tier(&self, mode: &str) {
        self.shared
            .metrics
            .tier_statements
            .with_label_values(&[mode])
            .inc();
    }

    fn count_lookups(&self, outcome: &str, n: u64) {
        self.shared
            .metrics
            .lookups
            .with_label_values(&[outcome])
            .inc_by(n);
    }
}

#[cfg(test)]
mod state_tests {
    use super::leaves_state;

    #[test]
    fn statements_that_leave_untracked_state_are_told_apart() {
        for sql in [
            "CREATE TEMPORARY TABLE tt (a INT)",
            "DO GET_LOCK('a', 1)",
            "SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1",
            "call p()",
            "PREPARE s FROM 'SELECT 1'",
            "LOCK TABLES t WRITE",
            "FLUSH TABLES WITH READ LOCK",
            "XA START 'x'",
        ] {
            assert!(leaves_state(sql).is_some(), "{sql}");
        }
        for sql in [
            "SELECT c FROM sbtest1 WHERE id=?",
            "SELECT @@version, @@session.sql_mode",
            "SELECT @x, @`y` FROM t WHERE a = @z",
            "SELECT @x := 1",
            "SELECT c INTO @v FROM t",
            "SELECT LAST_INSERT_ID()",
            "SELECT LAST_INSERT_ID( )",
            "INSERT INTO t (id) VALUES (LAST_INSERT_ID(5))",
            "UPDATE t SET v = v + 1 WHERE id = 3",
            "DELETE FROM t WHERE id = 1",
        ] {
            assert!(leaves_state(sql).is_none(), "{sql}");
        }
    }
}
