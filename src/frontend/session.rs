//! One client connection: authentication, the command loop, and running plans on the
//! session's backend connections.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use futures::future::join_all;
use mysql_async::prelude::Queryable;
use mysql_async::{BinaryProtocol, Conn, QueryResult, TextProtocol};
use mysql_common::collations::{Collation, CollationId};
use mysql_common::constants::{CapabilityFlags, ColumnFlags, ColumnType, StatusFlags};
use mysql_common::io::ParseBuf;
use mysql_common::packets::Column;
use mysql_common::value::{BinValue, Value, ValueDeserializer};
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::{debug, warn};

use super::auth;
use super::codec;
use super::packet::PacketIo;
use super::stream::{ClientStream, Rewind};
use crate::backend::MyError;
use crate::config::Topology;
use crate::merge::{MergeSpec, Row};
use crate::plan::{self, OkMerge, Plan, SessionOp, Target};
use crate::server::Shared;
use crate::sql::{self, Parsed};

mod tier;

const COM_QUIT: u8 = 0x01;
const COM_INIT_DB: u8 = 0x02;
const COM_QUERY: u8 = 0x03;
const COM_FIELD_LIST: u8 = 0x04;
const COM_PING: u8 = 0x0E;
const COM_CHANGE_USER: u8 = 0x11;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
const COM_STMT_CLOSE: u8 = 0x19;
const COM_STMT_RESET: u8 = 0x1A;
const COM_SET_OPTION: u8 = 0x1B;
const COM_RESET_CONNECTION: u8 = 0x1F;

const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A transaction the session is in: its BEGIN text and the node it runs on once it touched one.
struct Tx {
    begin: String,
    node: Option<usize>,
    /// The connection it ran on was lost: the node rolled it back. Every statement fails
    /// until the client ends it, so no later write can silently run outside it.
    lost: bool,
}

/// A client's prepared statement.
struct Prepared {
    sql: String,
    parsed: Result<Parsed, String>,
    num_params: usize,
    /// Parameter types from the last execute that sent them.
    types: Vec<(ColumnType, ColumnFlags)>,
    long_data: HashMap<usize, Vec<u8>>,
}

pub struct Session<S> {
    io: PacketIo<ClientStream<S>>,
    shared: Arc<Shared>,
    /// The rules snapshot of the statement being run: taken once when its command arrives and
    /// kept to its end, so a reload never changes the rules under a running statement.
    topo: Arc<Topology>,
    conn_id: u32,
    /// The client's host, as MySQL names it in errors.
    peer: String,
    conns: Vec<Option<Conn>>,
    db: Option<String>,
    /// Session SETs, replayed on every backend connection the session opens later.
    sets: Vec<String>,
    autocommit: bool,
    tx: Option<Tx>,
    last_node: Option<usize>,
    /// The node whose last INSERT generated an id: `LAST_INSERT_ID()` is asked there.
    insert_id_node: Option<usize>,
    stmts: HashMap<u32, Prepared>,
    next_stmt: u32,
    /// The salt of the handshake (COM_CHANGE_USER responses are scrambled with it).
    salt: [u8; 20],
    /// The capabilities both sides have.
    caps: CapabilityFlags,
    /// COM_QUERY may carry several statements (CLIENT_MULTI_STATEMENTS or COM_SET_OPTION).
    multi_statements: bool,
    /// More results of the same COM_QUERY follow the one being written.
    more_results: bool,
    /// The SETs the handshake implies (the client's character set): what a reset returns to.
    base_sets: Vec<String>,
    /// A DDL statement is running: outside any transaction, even with autocommit off.
    ddl: bool,
}

/// A result set being read from one node, in either protocol.
enum Res<'a> {
    Text(QueryResult<'a, 'static, TextProtocol>),
    Bin(QueryResult<'a, 'static, BinaryProtocol>),
}

impl Res<'_> {
    fn columns(&self) -> Option<Arc<[Column]>> {
        let cols = match self {
            Res::Text(r) => r.columns(),
            Res::Bin(r) => r.columns(),
        };
        cols.filter(|c| !c.is_empty())
    }
    async fn next(&mut self) -> mysql_async::Result<Option<mysql_async::Row>> {
        match self {
            Res::Text(r) => r.next().await,
            Res::Bin(r) => r.next().await,
        }
    }
    fn ok_info(&self) -> (u64, u64, u16, String) {
        match self {
            Res::Text(r) => (
                r.affected_rows(),
                r.last_insert_id().unwrap_or(0),
                r.warnings(),
                r.info().into_owned(),
            ),
            Res::Bin(r) => (
                r.affected_rows(),
                r.last_insert_id().unwrap_or(0),
                r.warnings(),
                r.info().into_owned(),
            ),
        }
    }
    fn warnings(&self) -> u16 {
        match self {
            Res::Text(r) => r.warnings(),
            Res::Bin(r) => r.warnings(),
        }
    }
    /// A result set (possibly an OK) is waiting to be read.
    fn pending(&self) -> bool {
        match self {
            Res::Text(r) => r.columns().is_some(),
            Res::Bin(r) => r.columns().is_some(),
        }
    }
    async fn finish(self) -> mysql_async::Result<()> {
        match self {
            Res::Text(r) => r.drop_result().await,
            Res::Bin(r) => r.drop_result().await,
        }
    }
}

async fn start<'a>(
    conn: &'a mut Conn,
    t: &'a Target,
    binary: bool,
) -> mysql_async::Result<Res<'a>> {
    if binary {
        let params = if t.params.is_empty() {
            mysql_async::Params::Empty
        } else {
            mysql_async::Params::Positional(t.params.clone())
        };
        conn.exec_iter(t.sql.as_str(), params).await.map(Res::Bin)
    } else {
        conn.query_iter(t.sql.as_str()).await.map(Res::Text)
    }
}

type Outcome = Result<(), MyError>;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    pub fn new(stream: S, shared: Arc<Shared>, conn_id: u32, peer: String) -> Self {
        let topo = shared.topology();
        let nodes = topo.nodes.len();
        Session {
            io: PacketIo::new(ClientStream::Plain(stream), shared.max_packet),
            topo,
            shared,
            conn_id,
            peer,
            conns: (0..nodes).map(|_| None).collect(),
            db: None,
            sets: Vec::new(),
            autocommit: true,
            tx: None,
            last_node: None,
            insert_id_node: None,
            stmts: HashMap::new(),
            next_stmt: 1,
            salt: auth::new_salt(),
            caps: CapabilityFlags::empty(),
            multi_statements: false,
            more_results: false,
            base_sets: Vec::new(),
            ddl: false,
        }
    }

    fn status(&self) -> StatusFlags {
        let mut s = StatusFlags::empty();
        if self.autocommit {
            s |= StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        }
        if self.tx.is_some() {
            s |= StatusFlags::SERVER_STATUS_IN_TRANS;
        }
        if self.more_results {
            s |= StatusFlags::SERVER_MORE_RESULTS_EXISTS;
        }
        s
    }

    fn write_err(&mut self, e: &MyError) {
        self.io.write(&codec::err(e.code, &e.state, &e.message));
    }

    fn write_ok(&mut self, affected: u64, last_id: u64, warnings: u16, info: &str) {
        let status = self.status();
        self.io
            .write(&codec::ok(affected, last_id, status, warnings, info));
    }

    /// The whole life of the connection.
    pub async fn run(mut self) -> io::Result<()> {
        // A client that never finishes the handshake does not hold a task forever.
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, self.authenticate()).await {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => return Ok(()),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Ok(()),
        }
        loop {
            let Some(packet) = self.io.read().await? else {
                return Ok(());
            };
            let Some((&cmd, body)) = packet.split_first() else {
                continue;
            };
            if cmd == COM_QUIT {
                return Ok(());
            }
            if cmd == COM_CHANGE_USER {
                self.topo = self.shared.topology();
                if !self.change_user(body).await? {
                    return Ok(());
                }
                self.io.flush().await?;
                continue;
            }
            self.command(cmd, body).await?;
            self.io.flush().await?;
        }
    }

    async fn authenticate(&mut self) -> io::Result<bool> {
        let salt = self.salt;
        let tls = self.shared.tls.clone();
        self.io.set_seq(0);
        self.io.write(&auth::handshake_packet(
            &self.shared.server_version,
            self.conn_id,
            &salt,
            tls.is_some(),
        ));
        self.io.flush().await?;
        let Some(mut payload) = self.io.read().await? else {
            return Ok(false);
        };
        let mut hello = auth::parse_response(&payload, tls.is_some());
        if let (Ok(auth::Hello::Ssl), Some(acceptor)) = (&hello, &tls) {
            self.upgrade(acceptor).await?;
            payload = match self.io.read().await? {
                Some(p) => p,
                None => return Ok(false),
            };
            hello = auth::parse_response(&payload, true);
            if matches!(hello, Ok(auth::Hello::Ssl)) {
                hello = Err("a second SSLRequest inside TLS".into());
            }
        }
        let hello = match hello {
            Ok(auth::Hello::Response(h)) => h,
            Ok(auth::Hello::Ssl) => return Ok(false),
            Err(m) => {
                self.write_err(&MyError::new(1043, m));
                self.io.flush().await?;
                return Ok(false);
            }
        };
        let user = hello.user.clone();
        if !self
            .check_password(&user, hello.plugin.clone(), hello.response.clone())
            .await?
        {
            return Ok(false);
        }
        self.caps = hello.capabilities;
        self.multi_statements = self.caps.contains(CapabilityFlags::CLIENT_MULTI_STATEMENTS);
        self.db = hello.db;
        // Backend connections speak utf8mb4; a client that asked for another character set
        // gets it on every node it reaches.
        self.base_sets = charset_sets(u16::from(hello.collation));
        self.sets = self.base_sets.clone();
        self.write_ok(0, 0, 0, "");
        self.io.flush().await?;
        debug!(conn = self.conn_id, %user, "client authenticated");
        Ok(true)
    }

    /// Switches the client stream to TLS (after an SSLRequest).
    async fn upgrade(&mut self, acceptor: &tokio_rustls::TlsAcceptor) -> io::Result<()> {
        let seq = self.io.seq();
        let max = self.shared.max_packet;
        let old = std::mem::replace(&mut self.io, PacketIo::new(ClientStream::Gone, max));
        let (stream, buffered) = old.into_parts();
        let ClientStream::Plain(plain) = stream else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "SSLRequest on a stream that is already TLS",
            ));
        };
        let tls = acceptor.accept(Rewind::new(buffered, plain)).await?;
        self.io = PacketIo::new(ClientStream::Tls(Box::new(tls)), max);
        self.io.set_seq(seq);
        Ok(())
    }

    /// Verifies a password response (switching the client to mysql_native_password when it
    /// used a plugin this server does not verify); on failure the client got the error.
    async fn check_password(
        &mut self,
        user: &str,
        plugin: auth::Plugin,
        mut response: Vec<u8>,
    ) -> io::Result<bool> {
        let mut plugin = plugin;
        let mut salt = self.salt;
        let topo = self.shared.topology();
        if let Some(to) = auth::needs_switch(&topo.users, user, &plugin, &response) {
            // A fresh salt for the switch, kept for later COM_CHANGE_USERs.
            salt = auth::new_salt();
            self.salt = salt;
            self.io.write(&auth::switch_to(&to, &salt));
            self.io.flush().await?;
            response = match self.io.read().await? {
                Some(r) => r,
                None => return Ok(false),
            };
            plugin = to;
        }
        if auth::verify(&topo.users, user, &plugin, &salt, &response).is_none() {
            self.write_err(&MyError::new(
                1045,
                format!(
                    "Access denied for user '{}'@'{}' (using password: {})",
                    user,
                    self.peer,
                    if response.is_empty() { "NO" } else { "YES" }
                ),
            ));
            self.io.flush().await?;
            return Ok(false);
        }
        if plugin == auth::Plugin::CachingSha2 && !response.is_empty() {
            self.io.write(&auth::FAST_AUTH_OK);
        }
        Ok(true)
    }

    /// COM_CHANGE_USER: authenticates the new user, then the session starts over as a fresh
    /// one (like COM_RESET_CONNECTION) in the database it names. A failed change ends the
    /// connection, as MySQL does.
    async fn change_user(&mut self, body: &[u8]) -> io::Result<bool> {
        let cu = match auth::parse_change_user(body, self.caps) {
            Ok(cu) => cu,
            Err(m) => {
                self.write_err(&MyError::new(1047, m));
                return Ok(true);
            }
        };
        if !self
            .check_password(&cu.user, cu.plugin.clone(), cu.response.clone())
            .await?
        {
            return Ok(false);
        }
        self.reset().await;
        if let Some(c) = cu.collation {
            self.base_sets = charset_sets(c);
            self.sets = self.base_sets.clone();
        }
        self.db = cu.db;
        self.write_ok(0, 0, 0, "");
        debug!(conn = self.conn_id, user = %cu.user, "changed user");
        Ok(true)
    }

    /// The client asked for an UPDATE's matched rows as its affected rows.
    fn found_rows(&self) -> bool {
        self.caps.contains(CapabilityFlags::CLIENT_FOUND_ROWS)
    }

    /// The statements of a COM_QUERY that holds several.
    fn split_batch(&self, sql: &str) -> Option<Vec<String>> {
        // Most queries hold no semicolon at all: they are not tokenized twice.
        if !sql.contains(';') {
            return None;
        }
        let parts = super::split::split_statements(sql);
        (parts.len() > 1).then_some(parts)
    }

    /// A COM_QUERY of several statements: one result each, all but the last flagged
    /// SERVER_MORE_RESULTS_EXISTS; the first error ends the batch.
    async fn batch(&mut self, parts: Vec<String>) {
        let last = parts.len().saturating_sub(1);
        for (i, part) in parts.iter().enumerate() {
            self.more_results = i < last;
            let r = self.query(part).await;
            self.more_results = false;
            if let Err(e) = r {
                self.write_err(&e);
                return;
            }
        }
    }

    async fn command(&mut self, cmd: u8, body: &[u8]) -> io::Result<()> {
        self.topo = self.shared.topology();
        let result = match cmd {
            COM_QUERY => {
                let sql = String::from_utf8_lossy(body).into_owned();
                match self.split_batch(&sql) {
                    Some(parts) if self.multi_statements => {
                        self.batch(parts).await;
                        return Ok(());
                    }
                    // Node connections accept several statements; a client that did not
                    // allow them gets MySQL's syntax error instead (stacked statements are
                    // an injection risk its code may rely on the server to refuse).
                    Some(parts) => Err(MyError::new(
                        1064,
                        format!(
                            "You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version for the right syntax to use near ';{}' at line 1",
                            parts[1..].join(";").chars().take(80).collect::<String>()
                        ),
                    )),
                    None => self.query(&sql).await,
                }
            }
            COM_INIT_DB => {
                let db = String::from_utf8_lossy(body).into_owned();
                self.use_db(db).await
            }
            COM_PING => {
                self.write_ok(0, 0, 0, "");
                Ok(())
            }
            COM_STMT_PREPARE => {
                let sql = String::from_utf8_lossy(body).into_owned();
                self.prepare(sql).await
            }
            COM_STMT_EXECUTE => self.execute(body).await,
            COM_STMT_SEND_LONG_DATA => {
                self.long_data(body);
                return Ok(()); // no response
            }
            COM_STMT_CLOSE => {
                if let Some(id) = body.get(..4) {
                    self.stmts
                        .remove(&u32::from_le_bytes([id[0], id[1], id[2], id[3]]));
                }
                return Ok(()); // no response
            }
            COM_STMT_RESET => {
                if let Some(id) = body.get(..4) {
                    if let Some(s) = self
                        .stmts
                        .get_mut(&u32::from_le_bytes([id[0], id[1], id[2], id[3]]))
                    {
                        s.long_data.clear();
                    }
                }
                self.write_ok(0, 0, 0, "");
                Ok(())
            }
            COM_FIELD_LIST => self.field_list(body).await,
            COM_RESET_CONNECTION => {
                self.reset().await;
                self.write_ok(0, 0, 0, "");
                Ok(())
            }
            COM_SET_OPTION => match body {
                // MYSQL_OPTION_MULTI_STATEMENTS_ON / _OFF; answered with an EOF packet.
                [0, 0] | [1, 0] => {
                    self.multi_statements = body[0] == 0;
                    let status = self.status();
                    self.io.write(&codec::eof(status, 0));
                    Ok(())
                }
                _ => Err(MyError::new(1047, "Unknown option to COM_SET_OPTION")),
            },
            other => Err(MyError::new(1047, format!("Unknown command {other:#04x}"))),
        };
        if let Err(e) = result {
            self.write_err(&e);
        }
        Ok(())
    }

    /// COM_RESET_CONNECTION: back to a fresh session (backend connections go back to their
    /// pools, which reset them).
    async fn reset(&mut self) {
        for n in 0..self.conns.len() {
            self.drop_conn(n);
        }
        self.sets = self.base_sets.clone();
        self.autocommit = true;
        self.tx = None;
        self.last_node = None;
        self.insert_id_node = None;
        self.stmts.clear();
    }

    async fn query(&mut self, sql: &str) -> Outcome {
        if let Some(parts) = super::split::set_with_autocommit(sql) {
            return self.set_parts(parts).await;
        }
        let topo = self.topo.clone();
        let parsed = sql::parse(sql);
        let (plan, slots) = self
            .plan_with_lookups(sql, parsed.as_ref().map_err(String::as_str), &[], &topo)
            .await;
        let read = is_read(parsed.as_ref().ok(), sql);
        debug!(conn = self.conn_id, %sql, ?plan, "query");
        self.account(&plan, parsed.as_ref().ok(), sql, &slots);
        let kind = statement_kind(parsed.as_ref().ok(), sql);
        self.run_statement(plan, false, read, kind).await
    }

    /// Runs a statement's plan. DDL first commits the open transaction and runs outside any
    /// transaction, as MySQL does: drivers that turn autocommit off (PyMySQL, mysqlclient)
    /// still create and alter sharded tables.
    async fn run_statement(&mut self, plan: Plan, binary: bool, read: bool, kind: &str) -> Outcome {
        if kind != "ddl" || matches!(plan, Plan::Refuse { .. }) {
            return self.run_plan(plan, binary, read).await;
        }
        self.end_tx(true).await?;
        self.ddl = true;
        let r = self.run_plan(plan, binary, read).await;
        self.ddl = false;
        r
    }

    /// Counts a statement in the metrics: by type and route, and per slot it was routed to.
    fn account(&self, plan: &Plan, parsed: Option<&Parsed>, sql: &str, slots: &[(String, u16)]) {
        self.account_kind(plan, statement_kind(parsed, sql), sql.len(), slots);
    }

    fn account_kind(&self, plan: &Plan, kind: &str, bytes: usize, slots: &[(String, u16)]) {
        let m = &self.shared.metrics;
        let route = match plan {
            Plan::Route(_) | Plan::Sticky { .. } => "single",
            Plan::AnyCopy { .. } => "broadcast",
            Plan::Scatter {
                ok: OkMerge::Copies,
                ..
            } => "broadcast",
            Plan::Scatter { .. } => "scatter",
            Plan::Tier(_) => "tiers",
            Plan::NeedLookup(_) => "lookup",
            Plan::Session(_) => "session",
            Plan::Refuse { message, .. }
            | Plan::Unroutable {
                reason: message, ..
            } => {
                m.refused
                    .with_label_values(&[crate::admin::metrics::refusal_reason(message)])
                    .inc();
                "refused"
            }
        };
        m.statements.with_label_values(&[kind, route]).inc();
        for (table, slot) in slots {
            m.slot_hit(table, *slot, bytes);
        }
    }

    async fn use_db(&mut self, db: String) -> Outcome {
        let node = self.sticky_node();
        let stmt = format!("USE `{}`", db.replace('`', "``"));
        // Check it on one node first so an unknown database fails cleanly. With no connection
        // open and that node unreachable, it is only remembered (and checked on the first
        // connection the session opens): a node that is down fails only what needs it.
        self.grow(node);
        let reachable = self.conns[node].is_some() || self.conn(node).await.is_ok();
        if reachable {
            self.on_conn(node, |c| Box::pin(c.query_drop(stmt.clone())))
                .await?;
        }
        // Every other open connection follows.
        for n in 0..self.conns.len() {
            if n != node && self.conns[n].is_some() {
                self.on_conn(n, |c| Box::pin(c.query_drop(stmt.clone())))
                    .await?;
            }
        }
        self.db = Some(db);
        self.write_ok(0, 0, 0, "");
        Ok(())
    }

    /// Runs `f` on node's held connection; a broken connection is dropped from the session.
    async fn on_conn<T>(
        &mut self,
        node: usize,
        f: impl for<'c> FnOnce(&'c mut Conn) -> futures::future::BoxFuture<'c, mysql_async::Result<T>>,
    ) -> Result<T, MyError> {
        let name = self.shared.backends.name(node).to_string();
        let conn = self.conn(node).await?;
        match f(conn).await {
            Ok(v) => Ok(v),
            Err(e) => {
                if MyError::breaks_connection(&e) {
                    self.drop_conn(node);
                }
                Err(MyError::from_backend(&name, &e))
            }
        }
    }

    fn drop_conn(&mut self, node: usize) {
        if self.conns.get_mut(node).and_then(Option::take).is_some() {
            self.held(node, -1);
        }
        if let Some(tx) = self.tx.as_mut().filter(|t| t.node == Some(node)) {
            tx.lost = true;
            warn!(
                conn = self.conn_id,
                node, "lost the connection of an open transaction; it was rolled back"
            );
        }
    }

    /// The session's connection to `node`, opened and brought to the session's state on first
    /// use.
    async fn conn(&mut self, node: usize) -> Result<&mut Conn, MyError> {
        self.grow(node);
        if self.conns[node].is_none() {
            let c = self
                .shared
                .backends
                .connect_with(node, self.found_rows())
                .await?;
            let c = self.bring_to_state(node, c).await?;
            self.store_conn(node, c);
        }
        self.conns[node]
            .as_mut()
            .ok_or_else(|| MyError::new(1105, "shardproxy: connection vanished"))
    }

    /// Replays the session's database and SETs on a connection it just opened.
    async fn bring_to_state(&self, node: usize, mut c: Conn) -> Result<Conn, MyError> {
        let name = self.shared.backends.name(node);
        if let Some(db) = &self.db {
            c.query_drop(format!("USE `{}`", db.replace('`', "``")))
                .await
                .map_err(|e| MyError::from_backend(&name, &e))?;
        }
        for s in &self.sets {
            c.query_drop(s.as_str())
                .await
                .map_err(|e| MyError::from_backend(&name, &e))?;
        }
        Ok(c)
    }

    fn store_conn(&mut self, node: usize, c: Conn) {
        self.grow(node);
        if self.conns[node].replace(c).is_none() {
            self.held(node, 1);
        }
    }

    /// Counts the node connections sessions hold, for the metrics.
    fn held(&self, node: usize, delta: i64) {
        self.shared
            .metrics
            .held
            .with_label_values(&[&self.shared.backends.name(node)])
            .add(delta);
    }

    /// Room for a connection to `node` (a reload may have added nodes).
    fn grow(&mut self, node: usize) {
        if node >= self.conns.len() {
            self.conns.resize_with(node + 1, || None);
        }
    }

    fn sticky_node(&self) -> usize {
        self.tx
            .as_ref()
            .and_then(|t| t.node)
            .or(self.last_node)
            .unwrap_or(self.topo.default_node)
    }

    /// Before a statement on `node`: inside a transaction, the first node touched gets the
    /// BEGIN; a write elsewhere is refused (the transaction would span nodes).
    async fn enter_tx(&mut self, node: usize, read: bool) -> Result<(), MyError> {
        if self.tx.is_none() && !self.autocommit && !self.ddl {
            self.tx = Some(Tx {
                begin: "BEGIN".into(),
                node: None,
                lost: false,
            });
        }
        let Some(tx) = &self.tx else {
            return Ok(());
        };
        if tx.lost {
            return Err(lost_tx());
        }
        match tx.node {
            Some(n) if n == node => Ok(()),
            Some(n) if read => {
                let _ = n;
                Ok(())
            }
            Some(n) => Err(MyError::new(
                1235,
                format!(
                    "this transaction runs on node `{}`; a write on node `{}` would make it span two nodes, which shardproxy does not support yet",
                    self.shared.backends.name(n),
                    self.shared.backends.name(node)
                ),
            )),
            None => {
                let begin = tx.begin.clone();
                self.on_conn(node, |c| Box::pin(c.query_drop(begin))).await?;
                if let Some(tx) = self.tx.as_mut() {
                    tx.node = Some(node);
                }
                Ok(())
            }
        }
    }

    async fn end_tx(&mut self, commit: bool) -> Outcome {
        let tx = self.tx.take();
        if tx.as_ref().is_some_and(|t| t.lost) {
            return if commit { Err(lost_tx()) } else { Ok(()) };
        }
        if let Some(node) = tx.and_then(|t| t.node) {
            let word = if commit { "COMMIT" } else { "ROLLBACK" };
            self.on_conn(node, |c| Box::pin(c.query_drop(word))).await?;
        }
        Ok(())
    }

    /// A SET of several assignments, autocommit among them: each assignment on its own, one OK.
    async fn set_parts(&mut self, parts: Vec<String>) -> Outcome {
        let topo = self.topo.clone();
        for part in parts {
            let parsed = sql::parse(&part);
            let (plan, _) = self.shared.with_plan_ctx(&topo, |ctx| {
                plan::plan_traced(
                    &part,
                    parsed.as_ref().map_err(String::as_str),
                    &[],
                    &topo,
                    ctx,
                )
            });
            match plan {
                Plan::Session(SessionOp::Use(_)) => {
                    return Err(MyError::new(1064, "USE inside SET"));
                }
                Plan::Session(op) => self.apply_session_op(op).await?,
                Plan::Refuse { code, message } => return Err(MyError::new(code, message)),
                _ => {
                    return Err(MyError::new(
                        1235,
                        format!("shardproxy: `{part}` is not a session SET"),
                    ))
                }
            }
        }
        self.write_ok(0, 0, 0, "");
        Ok(())
    }

    async fn session_op(&mut self, op: SessionOp) -> Outcome {
        if let SessionOp::Use(db) = op {
            return self.use_db(db).await;
        }
        self.apply_session_op(op).await?;
        self.write_ok(0, 0, 0, "");
        Ok(())
    }

    /// Carries out a session statement other than USE (the caller answers it).
    async fn apply_session_op(&mut self, op: SessionOp) -> Outcome {
        match op {
            SessionOp::Begin(sql) => {
                if self.tx.as_ref().is_some_and(|t| t.node.is_some()) {
                    self.end_tx(true).await?;
                }
                self.tx = Some(Tx {
                    begin: sql,
                    node: None,
                    lost: false,
                });
            }
            SessionOp::Commit => self.end_tx(true).await?,
            SessionOp::Rollback => self.end_tx(false).await?,
            SessionOp::SetAutocommit(on) => {
                if on && !self.autocommit {
                    self.end_tx(true).await?;
                }
                self.autocommit = on;
            }
            SessionOp::Use(db) => {
                return Err(MyError::new(
                    1105,
                    format!("shardproxy: USE `{db}` reached the wrong handler"),
                ))
            }
            SessionOp::Set(sql) => {
                // Check it where the session runs, then on every other open connection.
                let first = self.sticky_node();
                self.on_conn(first, |c| Box::pin(c.query_drop(sql.clone())))
                    .await?;
                for n in 0..self.conns.len() {
                    if n != first && self.conns[n].is_some() {
                        self.on_conn(n, |c| Box::pin(c.query_drop(sql.clone())))
                            .await?;
                    }
                }
                self.sets.retain(|s| *s != sql);
                if self.sets.len() >= 256 {
                    return Err(MyError::new(
                        1235,
                        "more than 256 distinct session SET statements in one session",
                    ));
                }
                self.sets.push(sql);
            }
        }
        Ok(())
    }

    async fn run_plan(&mut self, plan: Plan, binary: bool, read: bool) -> Outcome {
        match plan {
            Plan::Session(op) => self.session_op(op).await,
            Plan::Refuse { code, message } => Err(MyError::new(code, message)),
            Plan::Unroutable { node, sql, reason } => {
                // The node parses it without running it: a real syntax error is its own.
                let check = sql.clone();
                self.on_conn(node, |c| {
                    Box::pin(async move {
                        let stmt = c.prep(check).await?;
                        c.close(stmt).await
                    })
                })
                .await?;
                Err(MyError::new(plan::ER_NOT_SUPPORTED_YET, reason))
            }
            Plan::Sticky { sql, params } => {
                let asks_insert_id = {
                    let lower = sql.to_ascii_lowercase();
                    lower.contains("last_insert_id") || lower.contains("@@identity")
                };
                let tx_node = self.tx.as_ref().and_then(|t| t.node);
                let node = match self.insert_id_node {
                    Some(n) if asks_insert_id && tx_node.is_none() => n,
                    _ => self.sticky_node(),
                };
                if self.last_node.is_none() && tx_node.is_none() && self.insert_id_node.is_none() {
                    // Nothing ties this session to a node yet (a driver's connect-time
                    // `SELECT @@max_allowed_packet`): any reachable node answers, the default
                    // first, so the default node being down does not refuse connections.
                    let mut nodes = self.topo.all_nodes();
                    nodes.retain(|n| *n != node);
                    nodes.insert(0, node);
                    return self.any_copy(nodes, sql, params, binary, read).await;
                }
                self.single(Target { node, sql, params }, binary, read)
                    .await
            }
            Plan::Route(t) => self.single(t, binary, read).await,
            Plan::AnyCopy { nodes, sql, params } => {
                self.any_copy(nodes, sql, params, binary, read).await
            }
            Plan::Scatter { targets, ok, merge } => {
                self.scatter(targets, ok, merge, binary, read).await
            }
            Plan::Tier(t) => self.tier(*t, binary, read).await,
            Plan::NeedLookup(keys) => Err(MyError::new(
                1105,
                format!(
                    "shardproxy: directory lookup entries for {} key(s) could not be resolved",
                    keys.len()
                ),
            )),
        }
    }

    /// Runs on the first reachable of `nodes` (the transaction's node first): for statements
    /// any copy can answer.
    async fn any_copy(
        &mut self,
        mut nodes: Vec<usize>,
        sql: String,
        params: Vec<Value>,
        binary: bool,
        read: bool,
    ) -> Outcome {
        if let Some(i) = self
            .tx
            .as_ref()
            .and_then(|t| t.node)
            .and_then(|n| nodes.iter().position(|m| *m == n))
        {
            nodes[..=i].rotate_right(1);
        }
        let mut last = MyError::new(1105, "shardproxy: no node in service");
        for node in nodes {
            if let Err(e) = self.conn(node).await {
                last = e;
                continue;
            }
            let before = self.io.packets();
            let t = Target {
                node,
                sql: sql.clone(),
                params: params.clone(),
            };
            match self.single(t, binary, read).await {
                // The node's connection broke before any answer reached the client (a node
                // that went down since the session last used it): the next copy answers.
                Err(e) if self.io.packets() == before && self.conns[node].is_none() => last = e,
                other => return other,
            }
        }
        Err(last)
    }

    async fn single(&mut self, t: Target, binary: bool, read: bool) -> Outcome {
        self.enter_tx(t.node, read).await?;
        self.last_node = Some(t.node);
        let node = t.node;
        let name = self.shared.backends.name(node).to_string();
        self.conn(node).await?;
        let status = self.status();
        let multi_results = self.caps.contains(CapabilityFlags::CLIENT_MULTI_RESULTS);
        let Some(conn) = self.conns.get_mut(node).and_then(Option::as_mut) else {
            return Err(MyError::new(1105, "shardproxy: connection vanished"));
        };
        let started = std::time::Instant::now();
        let outcome = match start(conn, &t, binary).await {
            Ok(res) => relay(&mut self.io, res, binary, status, multi_results).await,
            Err(e) => Err(e),
        };
        let m = &self.shared.metrics;
        m.latency
            .with_label_values(&[&name])
            .observe(started.elapsed().as_secs_f64());
        match outcome {
            Ok(generated) => {
                if generated != 0 {
                    self.insert_id_node = Some(node);
                }
                Ok(())
            }
            Err(e) => {
                m.backend_errors.with_label_values(&[&name]).inc();
                self.shared.backends.note_error(node, &e.to_string());
                if MyError::breaks_connection(&e) {
                    self.drop_conn(node);
                }
                Err(MyError::from_backend(&name, &e))
            }
        }
    }

    async fn scatter(
        &mut self,
        targets: Vec<Target>,
        ok: OkMerge,
        merge: Option<MergeSpec>,
        binary: bool,
        read: bool,
    ) -> Outcome {
        if !read && !self.ddl && (self.tx.is_some() || !self.autocommit) {
            return Err(MyError::new(
                1235,
                format!(
                    "this write touches {} nodes inside a transaction; shardproxy does not support transactions across nodes yet",
                    targets.len()
                ),
            ));
        }
        if let Some(max) = targets.iter().map(|t| t.node).max() {
            self.grow(max);
        }
        // Open missing connections in parallel.
        let missing: Vec<usize> = targets
            .iter()
            .map(|t| t.node)
            .filter(|n| self.conns.get(*n).is_some_and(|c| c.is_none()))
            .collect();
        if !missing.is_empty() {
            let found_rows = self.found_rows();
            let opened = join_all(
                missing
                    .iter()
                    .map(|n| self.shared.backends.connect_with(*n, found_rows)),
            )
            .await;
            for (n, r) in missing.iter().zip(opened) {
                let c = self.bring_to_state(*n, r?).await?;
                self.store_conn(*n, c);
            }
        }
        self.last_node = targets.first().map(|t| t.node);
        let status = self.status();
        let mut taken: Vec<(usize, Conn)> = Vec::with_capacity(targets.len());
        for t in &targets {
            match self.conns.get_mut(t.node).and_then(Option::take) {
                Some(c) => taken.push((t.node, c)),
                None => {
                    for (n, c) in taken {
                        self.conns[n] = Some(c);
                    }
                    return Err(MyError::new(
                        1105,
                        "shardproxy: a statement names one node twice",
                    ));
                }
            }
        }
        let names: Vec<String> = targets
            .iter()
            .map(|t| self.shared.backends.name(t.node).to_string())
            .collect();
        let started = std::time::Instant::now();
        let outcome = {
            let starts = taken
                .iter_mut()
                .zip(targets.iter())
                .map(|((_, conn), t)| start(conn, t, binary));
            let results = join_all(starts).await;
            match &merge {
                None => merge_append(&mut self.io, results, ok, binary, status, &names).await,
                Some(spec) => {
                    let cap = self.topo.max_rows_per_statement;
                    let rows = &self.shared.metrics.rows_merged;
                    merge_rows(&mut self.io, results, spec, binary, status, cap, rows)
                        .await
                        .map(|()| 0)
                }
            }
        };
        let elapsed = started.elapsed().as_secs_f64();
        for name in &names {
            self.shared
                .metrics
                .latency
                .with_label_values(&[name])
                .observe(elapsed);
        }
        for (n, c) in taken {
            self.conns[n] = Some(c);
        }
        match outcome {
            Ok(last_id) => {
                if last_id != 0 {
                    // A split INSERT: the node of its first row holds LAST_INSERT_ID().
                    self.insert_id_node = targets.first().map(|t| t.node);
                }
                Ok(())
            }
            Err(ScatterError::Merge(e)) => Err(e),
            Err(ScatterError::Node(idx, e)) => {
                self.shared
                    .metrics
                    .backend_errors
                    .with_label_values(&[&names[idx]])
                    .inc();
                self.shared
                    .backends
                    .note_error(targets[idx].node, &e.to_string());
                if MyError::breaks_connection(&e) {
                    self.drop_conn(targets[idx].node);
                }
                Err(MyError::from_backend(&names[idx], &e))
            }
        }
    }

    async fn prepare(&mut self, sql: String) -> Outcome {
        let topo = self.topo.clone();
        let parsed = sql::parse(&sql);
        let node = match &parsed {
            Ok(p) => prepare_node(p, &topo).unwrap_or_else(|| self.sticky_node()),
            Err(_) => self.sticky_node(),
        };
        let name = self.shared.backends.name(node).to_string();
        let stmt = {
            let conn = self.conn(node).await?;
            match conn.prep(sql.as_str()).await {
                Ok(s) => s,
                Err(e) => {
                    if MyError::breaks_connection(&e) {
                        self.drop_conn(node);
                    }
                    return Err(MyError::from_backend(&name, &e));
                }
            }
        };
        let num_params = usize::from(stmt.num_params());
        // If our parser saw a different number of placeholders than the server, its reading of
        // the statement cannot be trusted for routing: route it as unparsed.
        let parsed = match parsed {
            Ok(p) if p.param_count() == num_params => Ok(p),
            Ok(_) => Err("placeholder count differs from the server's".to_string()),
            Err(e) => Err(e),
        };
        let id = self.next_stmt;
        self.next_stmt = self.next_stmt.wrapping_add(1).max(1);
        let columns = stmt.columns();
        let params = stmt.params().to_vec();
        // COM_STMT_PREPARE_OK
        let mut head = vec![0x00];
        head.extend_from_slice(&id.to_le_bytes());
        head.extend_from_slice(&(columns.len() as u16).to_le_bytes());
        head.extend_from_slice(&(num_params as u16).to_le_bytes());
        head.push(0);
        head.extend_from_slice(&0u16.to_le_bytes());
        self.io.write(&head);
        let status = self.status();
        if num_params > 0 {
            for p in &params {
                self.io.write(&codec::column_def(p));
            }
            self.io.write(&codec::eof(status, 0));
        }
        if !columns.is_empty() {
            for c in columns.iter() {
                self.io.write(&codec::column_def(c));
            }
            self.io.write(&codec::eof(status, 0));
        }
        self.stmts.insert(
            id,
            Prepared {
                sql,
                parsed,
                num_params,
                types: Vec::new(),
                long_data: HashMap::new(),
            },
        );
        Ok(())
    }

    fn long_data(&mut self, body: &[u8]) {
        if body.len() < 6 {
            return;
        }
        let id = u32::from_le_bytes([body[0], body[1], body[2], body[3]]);
        let param = usize::from(u16::from_le_bytes([body[4], body[5]]));
        if let Some(s) = self.stmts.get_mut(&id) {
            if param < s.num_params {
                s.long_data
                    .entry(param)
                    .or_default()
                    .extend_from_slice(&body[6..]);
            }
        }
    }

    async fn execute(&mut self, body: &[u8]) -> Outcome {
        if body.len() < 9 {
            return Err(MyError::new(
                1210,
                "Incorrect arguments to mysqld_stmt_execute",
            ));
        }
        let id = u32::from_le_bytes([body[0], body[1], body[2], body[3]]);
        let Some(stmt) = self.stmts.get_mut(&id) else {
            return Err(MyError::new(
                1243,
                format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute"),
            ));
        };
        let params = decode_params(stmt, &body[9..]).map_err(|m| {
            MyError::new(
                1210,
                format!("Incorrect arguments to mysqld_stmt_execute: {m}"),
            )
        })?;
        stmt.long_data.clear();
        let topo = self.topo.clone();
        // Out of the map while it plans (planning may read lookup tables), back after.
        let Some(prep) = self.stmts.remove(&id) else {
            return Err(MyError::new(1243, "prepared statement vanished"));
        };
        let (plan, slots) = self
            .plan_with_lookups(
                &prep.sql,
                prep.parsed.as_ref().map_err(String::as_str),
                &params,
                &topo,
            )
            .await;
        let read = is_read(prep.parsed.as_ref().ok(), &prep.sql);
        let kind = statement_kind(prep.parsed.as_ref().ok(), &prep.sql);
        let bytes = prep.sql.len() + body.len();
        self.stmts.insert(id, prep);
        self.account_kind(&plan, kind, bytes, &slots);
        self.run_statement(plan, true, read, kind).await
    }

    /// COM_FIELD_LIST (deprecated, still sent by the mariadb CLI for completion): the
    /// table's column definitions, read from the node that holds it.
    async fn field_list(&mut self, body: &[u8]) -> Outcome {
        let end = body.iter().position(|b| *b == 0).unwrap_or(body.len());
        let table = String::from_utf8_lossy(&body[..end]).into_owned();
        let topo = self.topo.clone();
        let sql = format!("SELECT * FROM `{}` LIMIT 0", table.replace('`', "``"));
        let parsed = sql::parse(&sql).map_err(|e| MyError::new(1064, e))?;
        let node = prepare_node(&parsed, &topo).unwrap_or_else(|| self.sticky_node());
        let cols = self
            .on_conn(node, |c| {
                Box::pin(async move {
                    let r = c.query_iter(sql).await?;
                    let cols = r.columns();
                    r.drop_result().await?;
                    Ok(cols)
                })
            })
            .await?;
        for c in cols.iter().flat_map(|c| c.iter()) {
            let mut def = codec::column_def(c);
            def.push(0xFB); // no default value
            self.io.write(&def);
        }
        let status = self.status();
        self.io.write(&codec::eof(status, 0));
        Ok(())
    }
}

/// The SETs that give a backend connection (utf8mb4_general_ci) the client's character set
/// and collation. MySQL 8 collations (id 255 and up) are unknown to MariaDB, which answers
/// such a client in its default collation: only their character set is set.
fn charset_sets(collation: u16) -> Vec<String> {
    let c = Collation::resolve(CollationId::from(collation));
    if c.id() == CollationId::UNKNOWN_COLLATION_ID
        || collation == u16::from(auth::DEFAULT_COLLATION)
    {
        return Vec::new();
    }
    if collation < 255 {
        vec![format!(
            "SET NAMES {} COLLATE {}",
            c.charset(),
            c.collation()
        )]
    } else if c.charset() != "utf8mb4" {
        vec![format!("SET NAMES {}", c.charset())]
    } else {
        Vec::new()
    }
}

fn lost_tx() -> MyError {
    MyError::new(
        1213,
        "shardproxy: the connection of this transaction to its node was lost and the node rolled the transaction back; ROLLBACK and retry it",
    )
}

/// The node a statement is prepared on (to learn its parameter and column metadata): a node
/// holding the first configured table it names.
fn prepare_node(parsed: &Parsed, topo: &Topology) -> Option<usize> {
    let mut node = None;
    let _ = sqlparser::ast::visit_relations(&parsed.stmt, |n| {
        use crate::config::TableRule;
        node = match topo.table(&sql::table_name(n)) {
            Some(TableRule::Broadcast) | None => Some(topo.default_node),
            Some(r) => r.all_nodes(topo).first().copied(),
        };
        std::ops::ControlFlow::Break(())
    });
    node
}

impl<S> Drop for Session<S> {
    fn drop(&mut self) {
        for (node, c) in self.conns.iter().enumerate() {
            if c.is_some() {
                self.shared
                    .metrics
                    .held
                    .with_label_values(&[&self.shared.backends.name(node)])
                    .dec();
            }
        }
    }
}

/// The statement's type, for the metrics.
fn statement_kind(parsed: Option<&Parsed>, sql: &str) -> &'static str {
    use sqlparser::ast::Statement as S;
    match parsed.map(|p| &p.stmt) {
        Some(S::Query(_)) => "select",
        Some(S::Insert(_)) => "insert",
        Some(S::Update(_)) => "update",
        Some(S::Delete(_)) => "delete",
        Some(
            S::CreateTable(_)
            | S::AlterTable(_)
            | S::CreateIndex(_)
            | S::Drop { .. }
            | S::Truncate(_),
        ) => "ddl",
        _ => match sql::leading_words(sql, 1)
            .first()
            .map(|w| w.to_ascii_uppercase())
            .as_deref()
        {
            Some("SET" | "USE" | "BEGIN" | "START" | "COMMIT" | "ROLLBACK") => "session",
            Some("SHOW" | "DESCRIBE" | "DESC" | "EXPLAIN") => "show",
            _ => "other",
        },
    }
}

/// Is this a statement that only reads (may run outside the session's transaction node)?
fn is_read(parsed: Option<&Parsed>, sql: &str) -> bool {
    match parsed {
        Some(p) => match &p.stmt {
            sqlparser::ast::Statement::Query(q) => q.locks.is_empty(),
            _ => false,
        },
        None => sql::leading_words(sql, 1)
            .first()
            .is_some_and(|w| w.eq_ignore_ascii_case("SHOW")),
    }
}

/// Decodes COM_STMT_EXECUTE parameters (after statement id, flags and iteration count).
fn decode_params(stmt: &mut Prepared, mut rest: &[u8]) -> Result<Vec<Value>, String> {
    let n = stmt.num_params;
    if n == 0 {
        return Ok(Vec::new());
    }
    let bitmap_len = n.div_ceil(8);
    if rest.len() < bitmap_len + 1 {
        return Err("truncated parameter block".into());
    }
    let bitmap = rest[..bitmap_len].to_vec();
    let new_bound = rest[bitmap_len];
    rest = &rest[bitmap_len + 1..];
    if new_bound == 1 {
        if rest.len() < 2 * n {
            return Err("truncated parameter types".into());
        }
        stmt.types = (0..n)
            .map(|i| {
                let ty =
                    ColumnType::try_from(rest[2 * i]).unwrap_or(ColumnType::MYSQL_TYPE_VAR_STRING);
                let flags = if rest[2 * i + 1] & 0x80 != 0 {
                    ColumnFlags::UNSIGNED_FLAG
                } else {
                    ColumnFlags::empty()
                };
                (ty, flags)
            })
            .collect();
        rest = &rest[2 * n..];
    }
    if stmt.types.len() != n {
        return Err("parameter types were never sent".into());
    }
    let mut buf = ParseBuf(rest);
    let mut values = Vec::with_capacity(n);
    for i in 0..n {
        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
            values.push(Value::NULL);
        } else if let Some(data) = stmt.long_data.get(&i) {
            values.push(Value::Bytes(data.clone()));
        } else {
            let v: ValueDeserializer<BinValue> = buf
                .parse(stmt.types[i])
                .map_err(|e| format!("parameter {}: {e}", i + 1))?;
            values.push(v.0);
        }
    }
    Ok(values)
}

/// Writes one node's answer to the client as it arrives: every result set of it (a CALL
/// returns several) when the client takes multiple results, each but the last flagged
/// SERVER_MORE_RESULTS_EXISTS; only the first otherwise. Returns the generated insert id.
async fn relay<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut PacketIo<S>,
    mut res: Res<'_>,
    binary: bool,
    status: StatusFlags,
    multi_results: bool,
) -> mysql_async::Result<u64> {
    let mut generated = 0;
    let more = |more: bool| {
        if more && multi_results {
            status | StatusFlags::SERVER_MORE_RESULTS_EXISTS
        } else {
            status
        }
    };
    loop {
        let follows = if let Some(cols) = res.columns() {
            io.write(&codec::column_count(cols.len()));
            for c in cols.iter() {
                io.write(&codec::column_def(c));
            }
            io.write(&codec::eof(status, 0));
            // The last `next` also moves to the next result set, if there is one.
            while let Some(row) = res.next().await? {
                write_row(io, row, &cols, binary);
                io.maybe_flush().await?;
            }
            let follows = res.pending();
            io.write(&codec::eof(more(follows), res.warnings()));
            follows
        } else {
            let (affected, last_id, warnings, info) = res.ok_info();
            if generated == 0 {
                generated = last_id;
            }
            // Moves past this OK to the next result set, if there is one.
            let _ = res.next().await?;
            let follows = res.pending();
            io.write(&codec::ok(
                affected,
                last_id,
                more(follows),
                warnings,
                &info,
            ));
            follows
        };
        if !follows || !multi_results {
            break;
        }
    }
    res.finish().await?;
    Ok(generated)
}

fn write_row<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut PacketIo<S>,
    row: mysql_async::Row,
    cols: &[Column],
    binary: bool,
) {
    let values = row.unwrap_raw();
    io.write_with(|out| {
        if binary {
            codec::binary_row(&values, cols, out)
        } else {
            codec::text_row(&values, out)
        }
    });
}

/// Several nodes' answers to one statement: result rows appended node after node (all nodes
/// already run the statement in parallel; the ones read later wait on their sockets), OK
/// packets combined. The error names which node failed.
async fn merge_append<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut PacketIo<S>,
    results: Vec<mysql_async::Result<Res<'_>>>,
    ok: OkMerge,
    binary: bool,
    status: StatusFlags,
    _names: &[String],
) -> Result<u64, ScatterError> {
    let mut ress = Vec::with_capacity(results.len());
    let mut first_err = None;
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Ok(res) => ress.push((i, res)),
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some((i, e));
                }
            }
        }
    }
    if let Some((i, e)) = first_err {
        for (_, res) in ress {
            let _ = res.finish().await;
        }
        return Err(ScatterError::Node(i, e));
    }
    let columns = ress.iter().find_map(|(_, r)| r.columns());
    match columns {
        Some(cols) => {
            io.write(&codec::column_count(cols.len()));
            for c in cols.iter() {
                io.write(&codec::column_def(c));
            }
            io.write(&codec::eof(status, 0));
            let mut warnings = 0u16;
            let mut failed = None;
            for (i, mut res) in ress {
                if failed.is_none() {
                    loop {
                        match res.next().await {
                            Ok(Some(row)) => {
                                write_row(io, row, &cols, binary);
                                if let Err(e) = io.maybe_flush().await {
                                    failed = Some((i, mysql_async::Error::Io(e.into())));
                                    break;
                                }
                            }
                            Ok(None) => break,
                            Err(e) => {
                                failed = Some((i, e));
                                break;
                            }
                        }
                    }
                    warnings = warnings.saturating_add(res.warnings());
                }
                if let Err(e) = res.finish().await {
                    if failed.is_none() {
                        failed = Some((i, e));
                    }
                }
            }
            if let Some((i, e)) = failed {
                return Err(ScatterError::Node(i, e));
            }
            io.write(&codec::eof(status, warnings));
            Ok(0)
        }
        None => {
            let mut affected = 0u64;
            let mut last_id = 0u64;
            let mut warnings = 0u16;
            let mut info = String::new();
            let mut first = true;
            let mut failed = None;
            for (i, res) in ress {
                let (a, l, w, inf) = res.ok_info();
                match ok {
                    OkMerge::Sum => {
                        affected += a;
                        last_id = last_id.max(l);
                        warnings = warnings.saturating_add(w);
                    }
                    OkMerge::Copies => {
                        if first {
                            affected = a;
                            last_id = l;
                            warnings = w;
                            info = inf;
                        }
                    }
                }
                first = false;
                if let Err(e) = res.finish().await {
                    failed.get_or_insert((i, e));
                }
            }
            if let Some((i, e)) = failed {
                return Err(ScatterError::Node(i, e));
            }
            io.write(&codec::ok(affected, last_id, status, warnings, &info));
            Ok(last_id)
        }
    }
}

/// Why a statement over several nodes failed: a node's error, or the merge's own.
enum ScatterError {
    Node(usize, mysql_async::Error),
    Merge(MyError),
}

fn merge_error(m: impl Into<String>) -> ScatterError {
    ScatterError::Merge(MyError::new(1235, m.into()))
}

/// Reads the next row of node `i`, counting rows read against the statement's cap.
async fn next_row(
    res: &mut Res<'_>,
    i: usize,
    read: &mut u64,
    cap: u64,
) -> Result<Option<Row>, ScatterError> {
    match res.next().await {
        Ok(Some(row)) => {
            *read += 1;
            if *read > cap {
                return Err(merge_error(format!(
                    "shardproxy: this statement would read more than {cap} rows from the nodes (max_rows_per_statement); narrow it or page with a key instead of a deep OFFSET"
                )));
            }
            Ok(Some(row.unwrap_raw()))
        }
        Ok(None) => Ok(None),
        Err(e) => Err(ScatterError::Node(i, e)),
    }
}

fn write_values<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut PacketIo<S>,
    values: &[Option<Value>],
    cols: &[Column],
    binary: bool,
) {
    io.write_with(|out| {
        if binary {
            codec::binary_row(values, cols, out)
        } else {
            codec::text_row(values, out)
        }
    });
}

/// OFFSET and LIMIT applied to merged rows as they are written.
struct Page {
    skip: u64,
    left: u64,
    visible: usize,
}

impl Page {
    /// Writes the row unless it is skipped; `true` once the page is full.
    async fn emit<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        io: &mut PacketIo<S>,
        row: &Row,
        cols: &[Column],
        binary: bool,
    ) -> Result<bool, ScatterError> {
        if self.skip > 0 {
            self.skip -= 1;
            return Ok(false);
        }
        write_values(io, &row[..self.visible.min(row.len())], cols, binary);
        io.maybe_flush()
            .await
            .map_err(|e| ScatterError::Node(0, mysql_async::Error::Io(e.into())))?;
        self.left = self.left.saturating_sub(1);
        Ok(self.left == 0)
    }
}

/// Several nodes' answers merged into one: buffered (grouping, DISTINCT) or streamed (a k-way
/// merge holding one row per node, or an append), then offset and limit, helper columns
/// removed.
async fn merge_rows<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut PacketIo<S>,
    results: Vec<mysql_async::Result<Res<'_>>>,
    spec: &MergeSpec,
    binary: bool,
    status: StatusFlags,
    cap: u64,
    rows_merged: &prometheus::IntCounter,
) -> Result<(), ScatterError> {
    let mut ress = Vec::with_capacity(results.len());
    let mut first_err = None;
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Ok(res) => ress.push(res),
            Err(e) => {
                first_err.get_or_insert((i, e));
            }
        }
    }
    if let Some((i, e)) = first_err {
        for res in ress {
            let _ = res.finish().await;
        }
        return Err(ScatterError::Node(i, e));
    }
    let mut read = 0u64;
    let outcome = merge_streams(io, &mut ress, spec, binary, status, cap, &mut read).await;
    rows_merged.inc_by(read);
    let mut warnings = 0u16;
    let mut failed = None;
    for (i, res) in ress.into_iter().enumerate() {
        warnings = warnings.saturating_add(res.warnings());
        if let Err(e) = res.finish().await {
            failed.get_or_insert(ScatterError::Node(i, e));
        }
    }
    outcome?;
    if let Some(f) = failed {
        return Err(f);
    }
    io.write(&codec::eof(status, warnings));
    Ok(())
}

async fn merge_streams<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut PacketIo<S>,
    ress: &mut [Res<'_>],
    spec: &MergeSpec,
    binary: bool,
    status: StatusFlags,
    cap: u64,
    read: &mut u64,
) -> Result<(), ScatterError> {
    let Some(cols) = ress.iter().find_map(|r| r.columns()) else {
        return Err(merge_error(
            "shardproxy: the nodes returned no result set to merge",
        ));
    };
    let spec = spec.resolve(cols.len());
    let visible = cols.len().saturating_sub(spec.hidden);
    let header = |io: &mut PacketIo<S>| {
        io.write(&codec::column_count(visible));
        for c in cols.iter().take(visible) {
            io.write(&codec::column_def(c));
        }
        io.write(&codec::eof(status, 0));
    };
    if spec.buffers() {
        let mut rows = Vec::new();
        for (i, res) in ress.iter_mut().enumerate() {
            while let Some(row) = next_row(res, i, read, cap).await? {
                rows.push(row);
            }
        }
        let cap_rows = usize::try_from(cap).unwrap_or(usize::MAX);
        let rows = crate::merge::finish_buffered(rows, &spec, &cols, binary, cap_rows)
            .map_err(|e| merge_error(format!("shardproxy: {}", e.0)))?;
        header(io);
        for row in rows {
            write_values(io, &row[..visible.min(row.len())], &cols, binary);
            io.maybe_flush()
                .await
                .map_err(|e| ScatterError::Node(0, mysql_async::Error::Io(e.into())))?;
        }
        return Ok(());
    }
    header(io);
    let mut page = Page {
        skip: spec.offset,
        left: spec.limit.unwrap_or(u64::MAX),
        visible,
    };
    if page.left == 0 {
        return Ok(());
    }
    let classes = crate::merge::classes(&cols);
    // Rows of the current group (at most one per node) while groups stream past.
    let mut group: Vec<Row> = Vec::new();
    let cap_rows = usize::try_from(cap).unwrap_or(usize::MAX);
    let emit_group = |group: &mut Vec<Row>| -> Result<Option<Row>, ScatterError> {
        let Some(g) = spec.group.as_ref() else {
            return Ok(None);
        };
        let merged = crate::merge::aggregate(std::mem::take(group), g, &cols, binary, cap_rows)
            .map_err(|e| merge_error(format!("shardproxy: {}", e.0)))?;
        Ok(merged.into_iter().next().filter(|r| {
            spec.having
                .as_ref()
                .is_none_or(|h| crate::merge::having(h, r, &classes))
        }))
    };
    if spec.order.is_empty() {
        // Append, node after node.
        for (i, res) in ress.iter_mut().enumerate() {
            while let Some(row) = next_row(res, i, read, cap).await? {
                if page.emit(io, &row, &cols, binary).await? {
                    return Ok(());
                }
            }
        }
        return Ok(());
    }
    // k-way merge: each node's rows arrive in ORDER BY order; hold one row per node.
    let mut heads: Vec<Option<Row>> = Vec::with_capacity(ress.len());
    for (i, res) in ress.iter_mut().enumerate() {
        heads.push(next_row(res, i, read, cap).await?);
    }
    loop {
        let mut best: Option<usize> = None;
        for (i, h) in heads.iter().enumerate() {
            let Some(row) = h else { continue };
            best = match best {
                Some(b) => match heads[b].as_ref() {
                    Some(brow)
                        if crate::merge::cmp_rows(row, brow, &spec.order, &classes)
                            == std::cmp::Ordering::Less =>
                    {
                        Some(i)
                    }
                    _ => Some(b),
                },
                None => Some(i),
            };
        }
        let Some(i) = best else {
            if spec.stream_groups && !group.is_empty() {
                if let Some(row) = emit_group(&mut group)? {
                    page.emit(io, &row, &cols, binary).await?;
                }
            }
            return Ok(());
        };
        let next = next_row(&mut ress[i], i, read, cap).await?;
        let Some(row) = std::mem::replace(&mut heads[i], next) else {
            return Ok(());
        };
        let row = if spec.stream_groups {
            let same = group.first().is_some_and(|g| {
                crate::merge::cmp_rows(g, &row, &spec.order, &classes) == std::cmp::Ordering::Equal
            });
            if same || group.is_empty() {
                group.push(row);
                continue;
            }
            let done = emit_group(&mut group)?;
            group.push(row);
            match done {
                Some(r) => r,
                None => continue,
            }
        } else {
            row
        };
        if page.emit(io, &row, &cols, binary).await? {
            return Ok(());
        }
    }
}
