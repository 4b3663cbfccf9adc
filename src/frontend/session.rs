//! One client connection: the command loop and the client's own state. Authentication is in
//! `handshake.rs`, text queries in `query.rs`, prepared statements in `prepared.rs`; what
//! runs on the nodes is `crate::exec`'s, through the session's node connections
//! (`crate::backend::session::NodeSession`, the door).

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use futures::FutureExt;
use mysql_common::constants::{CapabilityFlags, ColumnFlags, ColumnType, StatusFlags};
use tokio::io::{AsyncRead, AsyncWrite};

use super::sink::ClientSink;
use crate::backend::session::NodeSession;
use crate::config::Topology;
use crate::error::{MyError, ER_UNKNOWN_COM};
use crate::packet::PacketIo;
use crate::protocol::codec;
use crate::protocol::stream::ClientStream;
use crate::shared::Shared;
use crate::sql::Parsed;

mod catalog;
mod diagnostics;
mod handshake;
mod indexed;
mod indexed_upsert;
mod kept;
mod key_update;
mod maintenance;
mod moves;
mod prepared;
mod query;
mod replicas;
mod view_columns;
mod views;

const COM_QUIT: u8 = 0x01;
const COM_INIT_DB: u8 = 0x02;
const COM_QUERY: u8 = 0x03;
const COM_FIELD_LIST: u8 = 0x04;
const COM_PROCESS_KILL: u8 = 0x0C;
const COM_PING: u8 = 0x0E;
const COM_CHANGE_USER: u8 = 0x11;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
const COM_STMT_CLOSE: u8 = 0x19;
const COM_STMT_RESET: u8 = 0x1A;
const COM_SET_OPTION: u8 = 0x1B;
const COM_RESET_CONNECTION: u8 = 0x1F;

/// The largest packet a client may send before it has logged in: a handshake response
/// (user, scramble, database, plugin, connection attributes) or an auth-switch answer.
/// MariaDB's own limit there is far below max_allowed_packet too; 4,096 sockets that
/// claim 16 MiB each then reserve nothing (memory follows the bytes read, `PacketIo`)
/// and may send at most this much each.
pub const PRE_AUTH_MAX_PACKET: usize = 64 * 1024;

const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A client's prepared statement.
struct Prepared {
    sql: Arc<str>,
    parsed: Result<Parsed, String>,
    num_params: usize,
    /// Parameter types from the last execute that sent them.
    types: Vec<(ColumnType, ColumnFlags)>,
    long_data: HashMap<usize, Vec<u8>>,
    /// Long data past max_allowed_packet was sent: the next execute fails.
    long_data_over: bool,
    /// Its plan when it is a point statement, made at PREPARE; used once `trusted` (the first
    /// execution's full plan agreed with it).
    route: Option<crate::plan::cached::KeyRoute>,
    trusted: bool,
    read: bool,
    kind: &'static str,
    /// Its shape's entry in the plan cache (the counters).
    entry: Option<Arc<crate::plan::cache::Entry>>,
    /// The slot counters of its cached plan's table.
    slots: Option<Arc<crate::load::SlotLoad>>,
    /// It assigns user variables or calls a named-lock function
    /// (`crate::sql::uservars::special`): it takes the one-node path at every execute.
    special: bool,
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
    /// The session's node connections and the state on them: the door to the nodes.
    nodes: NodeSession,
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
    /// Rows written to the client so far (the plan counters take differences).
    rows_written: u64,
    /// `shardproxy_statements_total{type, route="single"}` by type, for cached plans.
    single_counters: Vec<(&'static str, prometheus::IntCounter)>,
    /// The dual writes planned for the statement about to run (or held by its transaction),
    /// one per target node, counted until they end (a move's freeze step waits for none
    /// toward its target to run).
    dual_write: Vec<crate::shared::Running>,
    /// The transaction wrote rows of a move whose changes the source's binary log carries
    /// (`Plan::Captured`): its counts in `dual_write` last until it ends.
    captured: bool,
    /// What the last statement left that the client may ask about.
    last: super::sink::Last,
    /// A second handle on the client's socket, to notice it hang up mid-statement.
    watch: Option<Arc<tokio::net::TcpStream>>,
    /// Counted against the client's address until it has logged in.
    handshaking: Option<crate::logins::Handshaking>,
}

type Outcome = Result<(), MyError>;

/// How long a command runs before the client's socket is watched for a hang-up (a quick
/// statement costs no watching).
const WATCH_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

/// Resolves once the client has hung up (its socket reads end-of-file or fails), watched
/// from [`WATCH_AFTER`] into a command. Bytes it sent ahead (a pipelined command) are left
/// for the session: then it looks again every 100 ms.
async fn hung_up(watch: &Arc<tokio::net::TcpStream>) {
    tokio::time::sleep(WATCH_AFTER).await;
    let mut b = [0u8; 1];
    loop {
        match watch.peek(&mut b).await {
            Ok(0) | Err(_) => return,
            Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
}

/// Sleeps `d`, or forever without one.
async fn sleep_or_never(d: Option<std::time::Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    pub fn new(stream: S, shared: Arc<Shared>, conn_id: u32, peer: String) -> Self {
        let topo = shared.topology();
        Session {
            // Until the client has logged in, its packets are a handshake's: small.
            io: PacketIo::with_read_buffer(
                ClientStream::Plain(stream),
                PRE_AUTH_MAX_PACKET.min(shared.max_packet),
                crate::packet::CLIENT_READ_BUF,
            ),
            topo,
            nodes: NodeSession::new(shared.clone(), conn_id),
            shared,
            conn_id,
            peer,
            stmts: HashMap::new(),
            next_stmt: 1,
            salt: crate::protocol::auth::new_salt(),
            caps: CapabilityFlags::empty(),
            multi_statements: false,
            more_results: false,
            base_sets: Vec::new(),
            rows_written: 0,
            single_counters: Vec::new(),
            dual_write: Vec::new(),
            captured: false,
            last: super::sink::Last::new(conn_id),
            watch: None,
            handshaking: None,
        }
    }

    /// Counts the client against its address until it has logged in (or failed to).
    pub fn handshaking(mut self, h: crate::logins::Handshaking) -> Self {
        self.handshaking = Some(h);
        self
    }

    /// Watches `watch` (the client's socket) while statements run: a client that hangs up
    /// mid-statement gets its statements on the nodes killed.
    pub fn watching(mut self, watch: Option<Arc<tokio::net::TcpStream>>) -> Self {
        self.watch = watch;
        self
    }

    fn status(&self) -> StatusFlags {
        let mut s = crate::exec::door::Door::status(&self.nodes);
        if self.more_results {
            s |= StatusFlags::SERVER_MORE_RESULTS_EXISTS;
        }
        s
    }

    fn write_err(&mut self, e: &MyError) {
        self.last.failed(e);
        self.io.write(&codec::err(e.code, &e.state, &e.message));
    }

    fn write_ok(&mut self) {
        let status = self.status();
        self.io.write(&codec::ok(0, 0, status, 0, ""));
    }

    /// Where a statement's results go: this client, in the protocol of its command.
    fn sink(&mut self, binary: bool) -> (&mut NodeSession, ClientSink<'_, ClientStream<S>>) {
        let multi_results = self.caps.contains(CapabilityFlags::CLIENT_MULTI_RESULTS);
        (
            &mut self.nodes,
            ClientSink {
                io: &mut self.io,
                last: &mut self.last,
                rows_before: 0,
                binary,
                multi_results,
                more_results: self.more_results,
                rows: 0,
            },
        )
    }

    /// The whole life of the connection.
    pub async fn run(mut self) -> io::Result<()> {
        // A client that never finishes the handshake does not hold a task forever.
        let outcome = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.authenticate()).await;
        self.handshaking = None;
        match outcome {
            Ok(Ok(true)) => self.io.set_max_request(self.shared.max_packet),
            Ok(Ok(false)) => return Ok(()),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Ok(()),
        }
        let ctl = self.nodes.ctl().clone();
        loop {
            // KILL CONNECTION from another session ends this one, idle or not; so does
            // idling past `idle_timeout_secs`; a packet over max_allowed_packet gets MySQL's
            // 1153 and ends it too (its rest is never read). A kill is looked at first: once
            // KILL CONNECTION has answered, the next statement of this session fails, as on
            // MariaDB, even when it had already arrived.
            let idle = self.shared.topology().idle_timeout;
            let packet = tokio::select! {
                biased;
                _ = ctl.killed() => return Ok(()),
                p = self.io.read() => p,
                _ = sleep_or_never(idle) => {
                    self.write_err(&MyError::new(
                        4031,
                        "The client was disconnected by the server because of inactivity (idle_timeout_secs)",
                    ));
                    let _ = self.io.flush().await;
                    return Ok(());
                }
            };
            let packet = match packet {
                Ok(p) => p,
                Err(e)
                    if e.kind() == io::ErrorKind::InvalidData
                        && e.to_string().contains("max_allowed_packet") =>
                {
                    self.write_err(&MyError::new(
                        1153,
                        format!("Got a packet bigger than 'max_allowed_packet' bytes ({e})"),
                    ));
                    let _ = self.io.flush().await;
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            let Some(packet) = packet else {
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
            // A panic under one client's command (a bug) ends that client only, with an
            // error, and is counted; the proxy and its other clients go on.
            let watch = self.watch.take();
            let ran = {
                let command = std::panic::AssertUnwindSafe(self.command(cmd, body)).catch_unwind();
                match &watch {
                    Some(w) => tokio::select! {
                        r = command => Some(r),
                        () = hung_up(w) => None,
                    },
                    None => Some(command.await),
                }
            };
            self.watch = watch;
            let Some(ran) = ran else {
                // The client is gone mid-statement: what it started on the nodes stops
                // (from connections of their own); its connections are closed with it.
                tracing::debug!(conn = self.conn_id, "the client hung up mid-statement");
                self.shared.metrics.hangups.inc();
                let _ = crate::exec::door::Door::kill(&mut self.nodes, self.conn_id, true).await;
                return Ok(());
            };
            match ran {
                Ok(r) => r?,
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    tracing::error!(
                        conn = self.conn_id,
                        "a client's command panicked (a bug): {what}"
                    );
                    self.shared.metrics.panics.inc();
                    self.write_err(&MyError::internal(format!(
                        "shardproxy: internal error (a bug, logged); this connection is closed: {what}"
                    )));
                    let _ = self.io.flush().await;
                    return Ok(());
                }
            }
            // The answer goes out first: what the session gives back afterwards costs the
            // client no wait.
            self.io.flush().await?;
            self.io.idle();
            self.after_command().await;
            if ctl.is_killed() {
                return Ok(());
            }
        }
    }

    /// The client asked for an UPDATE's matched rows as its affected rows.
    fn found_rows(&self) -> bool {
        self.caps.contains(CapabilityFlags::CLIENT_FOUND_ROWS)
    }

    async fn command(&mut self, cmd: u8, body: &[u8]) -> io::Result<()> {
        // Counted before it reads the rules: a change that waits for the commands begun
        // before it (`crate::shared::epochs`) waits for this one if it planned under older.
        let shared = self.shared.clone();
        let _running = shared.epochs.enter();
        self.topo = self.shared.topology();
        let result = match cmd {
            COM_QUERY => match crate::sql::raw::decode(body) {
                Ok(sql) => self.com_query(&sql).await,
                Err(why) => Err(MyError::unsupported(why)),
            },
            COM_INIT_DB => {
                let db = String::from_utf8_lossy(body).into_owned();
                self.use_db(&db).await
            }
            COM_PING => {
                self.write_ok();
                Ok(())
            }
            COM_PROCESS_KILL => match body.get(..4) {
                Some(id) => {
                    let id = u32::from_le_bytes([id[0], id[1], id[2], id[3]]);
                    let op = crate::plan::SessionOp::Kill {
                        id,
                        query_only: false,
                    };
                    let (door, mut sink) = self.sink(false);
                    crate::exec::session_op::apply(door, &mut sink, &op).await
                }
                None => Err(MyError::new(
                    ER_UNKNOWN_COM,
                    "COM_PROCESS_KILL without an id",
                )),
            },
            COM_STMT_PREPARE => match crate::sql::raw::decode(body) {
                Ok(sql) => self.prepare(sql.into_owned()).await,
                Err(why) => Err(MyError::unsupported(why)),
            },
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
                        s.long_data_over = false;
                    }
                }
                self.write_ok();
                Ok(())
            }
            COM_FIELD_LIST => self.field_list(body).await,
            COM_RESET_CONNECTION => {
                self.reset(self.nodes.db().map(str::to_string));
                self.write_ok();
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
                _ => Err(MyError::new(
                    ER_UNKNOWN_COM,
                    "Unknown option to COM_SET_OPTION",
                )),
            },
            other => Err(MyError::new(
                ER_UNKNOWN_COM,
                format!("Unknown command {other:#04x}"),
            )),
        };
        if let Err(e) = result {
            self.write_err(&e);
        }
        Ok(())
    }

    /// Back to a fresh session in `db` (COM_RESET_CONNECTION, COM_CHANGE_USER): node
    /// connections go back to their pools, which reset them; prepared statements are gone.
    fn reset(&mut self, db: Option<String>) {
        let found_rows = self.found_rows();
        self.nodes.reset(db, self.base_sets.clone(), found_rows);
        self.stmts.clear();
        self.last = super::sink::Last::new(self.conn_id);
    }

    /// After a command's answer went out: the session's `LAST_INSERT_ID()` read from the
    /// node whose result reported an id, then the node connections the session no longer
    /// needs given back (`NodeSession::settle`).
    async fn after_command(&mut self) {
        let reported = std::mem::take(&mut self.last.reported_id);
        let sets = std::mem::take(&mut self.last.sets_id);
        if reported != 0 || sets {
            let state = crate::exec::door::Door::state(&self.nodes);
            if let Some(node) = state.insert_id_node.or(state.last_node) {
                match self.nodes.insert_id_after(node, reported, sets).await {
                    Ok(Some(id)) => self.last.seen.insert_id = Some(id),
                    Ok(None) => {}
                    // Unknown: asked of the node that holds it, which the session keeps.
                    Err(_) => self.last.seen.insert_id = None,
                }
            }
        }
        let state = crate::exec::door::Door::state_mut(&mut self.nodes);
        state.diagnostics = self.last.diagnostics;
        state.insert_id_known = self.last.seen.insert_id.is_some();
        self.nodes.settle().await;
    }

    /// USE / COM_INIT_DB.
    async fn use_db(&mut self, db: &str) -> Outcome {
        let op = crate::plan::SessionOp::Use(db.to_string());
        let (door, mut sink) = self.sink(false);
        crate::exec::session_op::apply(door, &mut sink, &op).await
    }
}
