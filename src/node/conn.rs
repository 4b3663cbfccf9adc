//! One connection to a node: the handshake, commands, and results read packet by packet.
//!
//! A result is read in steps the caller drives: [`Conn::query`] / [`Conn::execute`] return
//! its first [`Head`] (an OK, or a result set's columns); [`Conn::read_row`] returns each row
//! packet as the node sent it and then the end of the set; when the node says more results
//! follow, [`Conn::next_head`] reads the next one. What a caller leaves unread is read and
//! dropped before the next command ([`Conn::drain`]), so a connection is never out of step.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use mysql_common::constants::{CapabilityFlags, MariadbCapabilities, StatusFlags};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{
    AuthPlugin, AuthSwitchRequest, Column, ComStmtClose, ComStmtExecuteRequestBuilder,
    ComStmtSendLongData, CommonOkPacket, ErrPacket, HandshakePacket, HandshakeResponse, OkPacket,
    OkPacketDeserializer, OldEofPacket, ResultSetTerminator, SslRequest, StmtPacket,
};
use mysql_common::proto::{Binary, MySerialize, Text};
use mysql_common::row::RowDeserializer;
use mysql_common::value::{ServerSide, Value};
use tokio::net::{TcpStream, UnixStream};

use super::stream::{Stream, Tls};
use crate::packet::PacketIo;

mod login;

/// utf8mb4_general_ci, the handshake's character set (sessions set their own after).
const UTF8MB4_GENERAL_CI: u8 = 45;
/// The largest packet the proxy announces it accepts from a node.
const MAX_PACKET: u32 = 1 << 30;
/// What one chunk of COM_STMT_SEND_LONG_DATA carries.
const LONG_DATA_CHUNK: usize = 1 << 20;

/// A node connection failed a command.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The node's own error: the connection is still usable.
    #[error("ERROR {code} ({state}): {message}")]
    Server {
        code: u16,
        state: String,
        message: String,
    },
    /// The socket failed or closed: the connection is gone.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The node sent what the protocol does not allow there: the connection is dropped.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The node sent nothing for this long while an answer was due: the connection is
    /// dropped (and its query killed, `crate::pools`).
    #[error("no answer for {0} s (node_timeout_secs); its query is being killed")]
    Timeout(u64),
}

impl WireError {
    /// Did the failure leave the connection unusable?
    pub fn breaks(&self) -> bool {
        !matches!(self, WireError::Server { .. })
    }
}

/// Where and as whom to connect.
#[derive(Clone)]
pub struct ConnectOpts {
    pub host: String,
    pub port: u16,
    /// A unix socket to use instead of TCP.
    pub socket: Option<String>,
    pub user: String,
    pub pass: Option<String>,
    pub db: Option<String>,
    pub tls: Option<Tls>,
    /// CLIENT_FOUND_ROWS: an UPDATE's affected rows count the rows it matched.
    pub found_rows: bool,
    /// Milliseconds a node may send nothing while an answer is due (0: no bound); shared
    /// so that a reload changes it for open connections too.
    pub timeout_ms: Arc<std::sync::atomic::AtomicU64>,
    /// A replica's connection: its session's transactions are READ ONLY (from connect and
    /// after every reset), so a statement that would write there (a stored function's
    /// INSERT in a SELECT) fails with 1792 whatever the account's privileges, and the
    /// proxy runs it on the primary instead.
    pub read_only: bool,
}

/// An OK packet, or the end of a result set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// The session's state changed in a way the proxy must answer for (anything the
    /// node's session tracking reported but `last_gtid`).
    pub changed: bool,
    /// The GTID of the transaction this statement committed (`last_gtid`, when tracked).
    pub last_gtid: Option<String>,
    pub affected: u64,
    pub last_insert_id: u64,
    pub warnings: u16,
    pub info: String,
    pub status: StatusFlags,
}

impl Summary {
    fn of(ok: &OkPacket<'_>) -> Self {
        let (changed, last_gtid) = session_changes(ok);
        Summary {
            changed,
            last_gtid,
            affected: ok.affected_rows(),
            last_insert_id: ok.last_insert_id().unwrap_or(0),
            warnings: ok.warnings(),
            info: ok
                .info_ref()
                .map(|i| String::from_utf8_lossy(i).into_owned())
                .unwrap_or_default(),
            status: ok.status_flags(),
        }
    }

    /// Another result of the same statement follows.
    pub fn more(&self) -> bool {
        self.status
            .contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS)
    }
}

/// What an OK packet says changed in the session (SERVER_SESSION_STATE_CHANGED): whether
/// anything but `last_gtid` did, and `last_gtid`. What cannot be read counts as a change.
fn session_changes(ok: &OkPacket<'_>) -> (bool, Option<String>) {
    use mysql_common::packets::session_state_change::SessionStateChange;
    if !ok
        .status_flags()
        .contains(StatusFlags::SERVER_SESSION_STATE_CHANGED)
    {
        return (false, None);
    }
    let Ok(infos) = ok.session_state_info() else {
        return (true, None);
    };
    let mut changed = infos.is_empty();
    let mut gtid = None;
    for info in &infos {
        match info.decode() {
            Ok(SessionStateChange::SystemVariables(vars)) => {
                for v in vars {
                    if v.name_bytes().eq_ignore_ascii_case(b"last_gtid") {
                        gtid = Some(String::from_utf8_lossy(v.value_bytes()).into_owned());
                    } else {
                        changed = true;
                    }
                }
            }
            _ => changed = true,
        }
    }
    (changed, gtid)
}

/// The first packet(s) of a result.
#[derive(Debug, Clone)]
pub enum Head {
    Ok(Summary),
    /// A result set: its columns; rows follow ([`Conn::read_row`]).
    Rows(Arc<[Column]>),
}

/// What [`Conn::read_row`] read.
#[derive(Debug)]
pub enum RowEvent<'a> {
    /// A row packet's payload, as the node sent it.
    Row(&'a [u8]),
    /// The end of the result set (its warnings and status: more results may follow).
    End(Summary),
}

/// A statement prepared on this connection.
#[derive(Debug, Clone)]
pub struct Statement {
    pub id: u32,
    pub params: Vec<Column>,
    /// Its result columns, as the node last described them (a MariaDB node may skip them in
    /// an execute's answer when they did not change).
    pub columns: Arc<[Column]>,
}

/// What is left to read of the last command's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Nothing,
    /// Rows of a result set, up to its end (in the binary protocol: an execute's).
    Rows {
        binary: bool,
    },
    /// The first packet of another result.
    Head {
        binary: bool,
    },
}

pub struct Conn {
    io: PacketIo<Stream>,
    /// The last packet read.
    buf: Vec<u8>,
    caps: CapabilityFlags,
    /// MariaDB may leave out the columns of an execute's result (MARIADB_CLIENT_CACHE_METADATA).
    cache_metadata: bool,
    id: u32,
    status: StatusFlags,
    pending: Pending,
    broken: bool,
    /// The current database, as far as the proxy set it.
    db: Option<String>,
    /// When the connection last went idle (the pools use it).
    pub idle_since: Instant,
    timeout_ms: Arc<std::sync::atomic::AtomicU64>,
    /// An answer did not come in time: the node may still be running the query.
    timed_out: bool,
    /// The node tracks changes of the session's state for this connection
    /// (`session_track_state_change`), so [`Conn::state_changed`] is its word.
    tracks_state: bool,
    /// An answer since [`Conn::take_state_changed`] said the session's state changed
    /// (SERVER_SESSION_STATE_CHANGED: a variable, the database, a temporary table, a
    /// prepared statement, a user variable).
    state_changed: bool,
    /// `last_gtid` as the node last reported it, not yet taken.
    last_gtid: Option<String>,
    /// A replica's connection ([`ConnectOpts::read_only`]).
    read_only: bool,
}

fn protocol(what: impl Into<String>) -> WireError {
    WireError::Protocol(what.into())
}

fn server_error(buf: &[u8], caps: CapabilityFlags) -> WireError {
    match ParseBuf(buf).parse::<ErrPacket<'_>>(caps) {
        Ok(ErrPacket::Error(e)) => WireError::Server {
            code: e.error_code(),
            state: e
                .sql_state_ref()
                .map(|s| s.as_str().into_owned())
                .unwrap_or_else(|| "HY000".into()),
            message: e.message_str().into_owned(),
        },
        Ok(ErrPacket::Progress(_)) => protocol("an unexpected progress report"),
        Err(e) => protocol(format!("a malformed error packet: {e}")),
    }
}

/// What [`Conn::query_then_execute`] got.
pub enum Ahead {
    /// The first statement failed; the execute ran without it (its answer is still to
    /// drain).
    FirstFailed(WireError),
    /// The first statement succeeded; the execute's first result (or its error).
    Ran(Result<Head, WireError>),
}

impl Conn {
    /// Connects and authenticates.
    pub async fn connect(opts: &ConnectOpts) -> Result<Conn, WireError> {
        let stream = match &opts.socket {
            Some(path) => Stream::Unix(UnixStream::connect(path).await?),
            None => {
                let s = TcpStream::connect((opts.host.as_str(), opts.port)).await?;
                s.set_nodelay(true)?;
                Stream::Tcp(s)
            }
        };
        let mut conn = Conn {
            io: PacketIo::new(stream, usize::MAX),
            buf: Vec::with_capacity(4096),
            caps: CapabilityFlags::empty(),
            cache_metadata: false,
            id: 0,
            status: StatusFlags::empty(),
            pending: Pending::Nothing,
            broken: false,
            db: opts.db.clone(),
            idle_since: Instant::now(),
            timeout_ms: opts.timeout_ms.clone(),
            timed_out: false,
            tracks_state: false,
            state_changed: false,
            last_gtid: None,
            read_only: opts.read_only,
        };
        conn.handshake(opts).await?;
        conn.track_state().await?;
        Ok(conn)
    }

    /// Asks the node to flag every change of the session's state in its answers, where it
    /// can (MariaDB 10.2 and MySQL 5.7 on): the pools then tell a connection left as it was
    /// from one a statement changed, whatever its words. A COM_RESET_CONNECTION turns it
    /// off again, so it is asked after each (and a replica's READ ONLY with it).
    async fn track_state(&mut self) -> Result<(), WireError> {
        self.tracks_state = false;
        if self.read_only {
            self.query_drop("SET SESSION TRANSACTION READ ONLY").await?;
        }
        if !self.caps.contains(CapabilityFlags::CLIENT_SESSION_TRACK) {
            self.state_changed = false;
            return Ok(());
        }
        // `last_gtid` too, for reads on replicas after a write (a node without it, or
        // without binary logs, still tracks the state).
        let both = "SET SESSION session_track_state_change = ON, session_track_system_variables = 'last_gtid'";
        let tracked = match self.query_drop(both).await {
            Err(WireError::Server { .. }) => {
                self.query_drop("SET SESSION session_track_state_change = ON")
                    .await
            }
            other => other,
        };
        match tracked {
            Ok(()) => self.tracks_state = true,
            // A node without the variable: the proxy's own reading of statements is all.
            Err(WireError::Server { .. }) => {}
            Err(e) => return Err(e),
        }
        self.state_changed = false;
        Ok(())
    }

    /// Notes the status flags and session changes of an answer.
    fn note(&mut self, s: &Summary) {
        self.status = s.status;
        if s.changed {
            self.state_changed = true;
        }
        if let Some(g) = &s.last_gtid {
            self.last_gtid = Some(g.clone());
        }
    }

    /// The GTID of the last transaction a statement on this connection committed since
    /// the last call (the node reports it where `last_gtid` is tracked).
    pub fn take_last_gtid(&mut self) -> Option<String> {
        self.last_gtid.take()
    }

    /// Did an answer since the last call say the session's state changed? Clears it.
    pub fn take_state_changed(&mut self) -> bool {
        std::mem::take(&mut self.state_changed)
    }

    /// Did an answer since [`Conn::take_state_changed`] say the session's state changed?
    pub fn state_changed(&self) -> bool {
        self.state_changed
    }

    /// Does the node flag changes of the session's state on this connection?
    pub fn tracks_state(&self) -> bool {
        self.tracks_state
    }

    /// Reads one packet into `buf`; a failure, or a node silent past the timeout, breaks
    /// the connection.
    async fn read(&mut self) -> Result<(), WireError> {
        let ms = self.timeout_ms.load(std::sync::atomic::Ordering::Relaxed);
        let read = if ms == 0 {
            self.io.read_into(&mut self.buf).await
        } else {
            let limit = std::time::Duration::from_millis(ms);
            match tokio::time::timeout(limit, self.io.read_into(&mut self.buf)).await {
                Ok(r) => r,
                Err(_) => {
                    self.broken = true;
                    self.timed_out = true;
                    return Err(WireError::Timeout(ms.div_ceil(1000)));
                }
            }
        };
        match read {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.broken = true;
                Err(WireError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the node closed the connection",
                )))
            }
            // Closed in the middle of a packet (a node killed while it sent rows): said as
            // plainly, not as the reader's "early eof".
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                self.broken = true;
                Err(WireError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the node closed the connection in the middle of a packet",
                )))
            }
            Err(e) => {
                self.broken = true;
                Err(e.into())
            }
        }
    }

    /// Sends one command packet (after reading what the last one left).
    async fn command(&mut self, payload: &[u8]) -> Result<(), WireError> {
        self.ready().await?;
        self.io.set_seq(0);
        self.io.write(payload);
        if let Err(e) = self.io.flush().await {
            self.broken = true;
            return Err(e.into());
        }
        Ok(())
    }

    /// Reads what the last command left unread; refuses a broken connection.
    async fn ready(&mut self) -> Result<(), WireError> {
        if self.broken {
            return Err(WireError::Io(io::Error::new(
                io::ErrorKind::NotConnected,
                "the node connection broke earlier",
            )));
        }
        self.drain().await
    }

    fn broke(&mut self, e: WireError) -> WireError {
        if e.breaks() {
            self.broken = true;
        }
        e
    }

    /// COM_QUERY: the first result.
    pub async fn query(&mut self, sql: &str) -> Result<Head, WireError> {
        let mut payload = Vec::with_capacity(sql.len() + 1);
        payload.push(0x03);
        payload.extend_from_slice(&crate::sql::raw::encode(sql));
        self.command(&payload).await?;
        self.read_head(false, None).await
    }

    /// COM_STMT_PREPARE.
    pub async fn prepare(&mut self, sql: &str) -> Result<Statement, WireError> {
        let mut payload = Vec::with_capacity(sql.len() + 1);
        payload.push(0x16);
        payload.extend_from_slice(&crate::sql::raw::encode(sql));
        self.command(&payload).await?;
        self.read().await?;
        if self.buf.first() == Some(&0xFF) {
            return Err(server_error(&self.buf, self.caps));
        }
        let ok = ParseBuf(&self.buf)
            .parse::<StmtPacket>(())
            .map_err(|e| self.broke(protocol(format!("a malformed prepare answer: {e}"))))?;
        let params = self.read_columns(ok.num_params().into()).await?;
        let columns = self.read_columns(ok.num_columns().into()).await?;
        Ok(Statement {
            id: ok.statement_id(),
            params,
            columns: columns.into(),
        })
    }

    /// COM_STMT_EXECUTE of `stmt` with `params`: the first result.
    pub async fn execute(
        &mut self,
        stmt: &mut Statement,
        params: &[Value],
    ) -> Result<Head, WireError> {
        self.ready().await?;
        let (req, long_data) = ComStmtExecuteRequestBuilder::new(stmt.id).build(params);
        if long_data {
            for (i, v) in params.iter().enumerate() {
                if let Value::Bytes(bytes) = v {
                    let mut chunks: Vec<&[u8]> = bytes.chunks(LONG_DATA_CHUNK).collect();
                    if chunks.is_empty() {
                        chunks.push(&[]);
                    }
                    for chunk in chunks {
                        let mut payload = Vec::with_capacity(chunk.len() + 7);
                        ComStmtSendLongData::new(stmt.id, i as u16, chunk).serialize(&mut payload);
                        self.command(&payload).await?;
                    }
                }
            }
        }
        let mut payload = Vec::with_capacity(64);
        req.serialize(&mut payload);
        self.command(&payload).await?;
        let head = self.read_head(true, Some(&stmt.columns)).await?;
        if let Head::Rows(cols) = &head {
            if !Arc::ptr_eq(cols, &stmt.columns) {
                stmt.columns = cols.clone();
            }
        }
        Ok(head)
    }

    /// COM_QUERY of `first` (a statement answered by one OK or an error: a BEGIN) and
    /// COM_STMT_EXECUTE of `stmt` in one write, one round trip. `Err`: `first`'s answer never
    /// came. `None` when the parameters need long data (nothing was sent: send them apart).
    pub async fn query_then_execute(
        &mut self,
        first: &str,
        stmt: &mut Statement,
        params: &[Value],
    ) -> Result<Option<Ahead>, WireError> {
        self.ready().await?;
        let (req, long_data) = ComStmtExecuteRequestBuilder::new(stmt.id).build(params);
        if long_data {
            return Ok(None);
        }
        let mut exec = Vec::with_capacity(64);
        req.serialize(&mut exec);
        if let Some(e) = self.send_ahead(first, &exec, true).await? {
            return Ok(Some(Ahead::FirstFailed(e)));
        }
        let head = self.read_head(true, Some(&stmt.columns)).await;
        if let Ok(Head::Rows(cols)) = &head {
            if !Arc::ptr_eq(cols, &stmt.columns) {
                stmt.columns = cols.clone();
            }
        }
        Ok(Some(Ahead::Ran(head)))
    }

    /// COM_STMT_CLOSE (the node does not answer it).
    pub async fn close(&mut self, id: u32) -> Result<(), WireError> {
        let mut payload = Vec::with_capacity(5);
        ComStmtClose::new(id).serialize(&mut payload);
        self.command(&payload).await
    }

    /// A replica's connection, whose transactions are READ ONLY ([`ConnectOpts::read_only`]).
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// COM_RESET_CONNECTION: the session's state on the node as it was after the handshake
    /// (transaction rolled back, prepared statements and variables gone).
    pub async fn reset(&mut self) -> Result<(), WireError> {
        self.simple(0x1F).await?;
        self.track_state().await
    }

    /// COM_PING.
    pub async fn ping(&mut self) -> Result<(), WireError> {
        self.simple(0x0E).await
    }

    async fn simple(&mut self, command: u8) -> Result<(), WireError> {
        self.command(&[command]).await?;
        match self.read_head(false, None).await? {
            Head::Ok(_) => Ok(()),
            Head::Rows(_) => Err(self.broke(protocol("rows where an OK was due"))),
        }
    }

    /// Runs the proxy's own batch of statements `sql` (`XA END ...; XA PREPARE ...`) and
    /// reads its whole answer: multi-statements are turned on for this one command and off
    /// again, in the same write (COM_SET_OPTION, COM_QUERY, COM_SET_OPTION: one round
    /// trip). Never for a client's text.
    pub async fn query_batch(&mut self, sql: &str) -> Result<(), WireError> {
        self.ready().await?;
        const COM_SET_OPTION: u8 = 0x1B;
        let mut query = Vec::with_capacity(sql.len() + 1);
        query.push(0x03);
        query.extend_from_slice(&crate::sql::raw::encode(sql));
        for payload in [
            &[COM_SET_OPTION, 0, 0][..],
            &query[..],
            &[COM_SET_OPTION, 1, 0][..],
        ] {
            self.io.set_seq(0);
            self.io.write(payload);
        }
        if let Err(e) = self.io.flush().await {
            self.broken = true;
            return Err(e.into());
        }
        let on = self.option_reply().await;
        // The batch ran only if the option was set; its answer is read either way.
        let ran = match on {
            Ok(()) => match self.read_head(false, None).await {
                Ok(_) => self.drain().await,
                Err(e) if e.breaks() => return Err(e),
                Err(e) => {
                    // The first statement failed: MariaDB stops there.
                    self.pending = Pending::Nothing;
                    Err(e)
                }
            },
            Err(e) if e.breaks() => return Err(e),
            Err(e) => {
                // Without the option the batch is one statement to the node: a syntax
                // error at its first `;`, read here.
                let _ = self.read_head(false, None).await;
                let _ = self.drain().await;
                Err(e)
            }
        };
        // Off again, or the connection cannot be trusted with a client's text.
        if let Err(e) = self.option_reply().await {
            return Err(self.broke(protocol(format!(
                "multi-statements could not be turned off again: {e}"
            ))));
        }
        ran
    }

    /// The answer to COM_SET_OPTION: an EOF (0xFE) or OK, or an error.
    async fn option_reply(&mut self) -> Result<(), WireError> {
        self.read().await?;
        match self.buf.first() {
            Some(0x00) | Some(0xFE) => Ok(()),
            Some(0xFF) => Err(server_error(&self.buf, self.caps)),
            _ => Err(self.broke(protocol("a malformed answer to COM_SET_OPTION"))),
        }
    }

    /// COM_QUERY of `first` (a statement answered by one OK or an error: a BEGIN) and of
    /// `sql` in one write, one round trip, each its own command. `Err`: `first`'s answer
    /// never came. [`Ahead::FirstFailed`]: `sql` ran without it, its answer is still to
    /// drain (only for a statement that changes nothing: a read).
    pub async fn query_then_query(&mut self, first: &str, sql: &str) -> Result<Ahead, WireError> {
        self.ready().await?;
        let mut query = Vec::with_capacity(sql.len() + 1);
        query.push(0x03);
        query.extend_from_slice(&crate::sql::raw::encode(sql));
        if let Some(e) = self.send_ahead(first, &query, false).await? {
            return Ok(Ahead::FirstFailed(e));
        }
        Ok(Ahead::Ran(self.read_head(false, None).await))
    }

    /// COM_QUERY of `first` and the command `then` in one write; reads `first`'s answer.
    /// `Some`: `first` failed (the command ran without it, its answer still to read, in
    /// the binary protocol when `binary`).
    async fn send_ahead(
        &mut self,
        first: &str,
        then: &[u8],
        binary: bool,
    ) -> Result<Option<WireError>, WireError> {
        let mut query = Vec::with_capacity(first.len() + 1);
        query.push(0x03);
        query.extend_from_slice(&crate::sql::raw::encode(first));
        self.io.set_seq(0);
        self.io.write(&query);
        self.io.set_seq(0);
        self.io.write(then);
        if let Err(e) = self.io.flush().await {
            self.broken = true;
            return Err(e.into());
        }
        match self.read_head(false, None).await {
            Ok(Head::Ok(s)) if !s.more() => Ok(None),
            Ok(_) => Err(self.broke(protocol(
                "a statement sent ahead of another answered more than one OK",
            ))),
            Err(e) if e.breaks() => Err(e),
            Err(e) => {
                self.pending = Pending::Head { binary };
                Ok(Some(e))
            }
        }
    }

    /// Runs `sql` and reads its whole answer (every result); the first failure.
    pub async fn query_drop(&mut self, sql: &str) -> Result<(), WireError> {
        self.query(sql).await?;
        self.drain().await
    }

    /// Runs `sql` (a read of one value: `SELECT @@socket`) and returns its first row's
    /// first value as text, if it is one.
    pub async fn query_text(&mut self, sql: &str) -> Result<Option<String>, WireError> {
        let rows = self.query_rows(sql).await?;
        Ok(rows
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next().flatten())
            .and_then(|v| match v {
                Value::Bytes(b) => String::from_utf8(b).ok(),
                _ => None,
            }))
    }

    /// Runs `sql` and returns every row of its first result set, decoded (text protocol).
    pub async fn query_rows(&mut self, sql: &str) -> Result<Vec<Vec<Option<Value>>>, WireError> {
        let head = self.query(sql).await?;
        let mut rows = Vec::new();
        if let Head::Rows(cols) = head {
            while let RowEvent::Row(p) = self.read_row().await? {
                let row = decode(p, &cols, false).map_err(|e| {
                    self.broken = true;
                    protocol(format!("a malformed row: {e}"))
                })?;
                rows.push(row);
            }
        }
        self.drain().await?;
        Ok(rows)
    }

    /// Runs `sql` and returns its first row as text by column name (`SHOW SLAVE STATUS`);
    /// `None` when it returned none.
    pub async fn query_named(
        &mut self,
        sql: &str,
    ) -> Result<Option<std::collections::HashMap<String, Option<String>>>, WireError> {
        let head = self.query(sql).await?;
        let mut first = None;
        if let Head::Rows(cols) = head {
            while let RowEvent::Row(p) = self.read_row().await? {
                if first.is_some() {
                    continue;
                }
                let row = decode(p, &cols, false).map_err(|e| {
                    self.broken = true;
                    protocol(format!("a malformed row: {e}"))
                })?;
                let named = cols
                    .iter()
                    .zip(row)
                    .map(|(c, v)| {
                        let text = match v {
                            Some(Value::Bytes(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
                            _ => None,
                        };
                        (c.name_str().into_owned(), text)
                    })
                    .collect();
                first = Some(named);
            }
        }
        self.drain().await?;
        Ok(first)
    }

    /// Column definitions (and the EOF after them, for a node without CLIENT_DEPRECATE_EOF).
    async fn read_columns(&mut self, n: usize) -> Result<Vec<Column>, WireError> {
        let mut cols = Vec::with_capacity(n);
        for _ in 0..n {
            self.read().await?;
            let c = ParseBuf(&self.buf)
                .parse::<Column>(())
                .map_err(|e| self.broke(protocol(format!("a malformed column: {e}"))))?;
            cols.push(c);
        }
        if n > 0 && !self.caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF) {
            self.read().await?;
        }
        Ok(cols)
    }

    /// The first packet(s) of a result: an OK, an error, or a result set's columns.
    async fn read_head(
        &mut self,
        binary: bool,
        known: Option<&Arc<[Column]>>,
    ) -> Result<Head, WireError> {
        self.pending = Pending::Nothing;
        self.read().await?;
        match self.buf.first() {
            Some(0x00) => {
                let parsed = ParseBuf(&self.buf)
                    .parse::<OkPacketDeserializer<'_, CommonOkPacket>>(self.caps)
                    .map(|ok| Summary::of(&ok.into_inner()));
                let s = match parsed {
                    Ok(s) => s,
                    Err(e) => return Err(self.broke(protocol(format!("a malformed OK: {e}")))),
                };
                self.note(&s);
                if s.more() {
                    self.pending = Pending::Head { binary };
                }
                Ok(Head::Ok(s))
            }
            Some(0xFF) => Err(server_error(&self.buf, self.caps)),
            Some(0xFB) => Err(self.broke(protocol(
                "the node asked for a local file (LOAD DATA LOCAL INFILE is not relayed)",
            ))),
            _ => {
                let header = lenenc(&self.buf).map(|(n, rest)| (n, rest.first() == Some(&0)));
                let Some((count, zero_follows)) = header else {
                    return Err(self.broke(protocol("a malformed result set header")));
                };
                // A MariaDB node skips the columns of an execute's answer it already gave.
                let skipped = binary && self.cache_metadata && zero_follows;
                let cols: Arc<[Column]> = match known {
                    Some(k) if skipped => k.clone(),
                    _ if skipped => Arc::from(Vec::new()),
                    _ => self.read_columns(count as usize).await?.into(),
                };
                self.pending = Pending::Rows { binary };
                Ok(Head::Rows(cols))
            }
        }
    }

    /// The next result of the statement, once the last one said more follow.
    pub async fn next_head(&mut self, known: Option<&Arc<[Column]>>) -> Result<Head, WireError> {
        match self.pending {
            Pending::Head { binary } => self.read_head(binary, known).await,
            _ => Err(protocol("no further result is due")),
        }
    }

    /// The next row of the current result set, or its end.
    pub async fn read_row(&mut self) -> Result<RowEvent<'_>, WireError> {
        let Pending::Rows { binary } = self.pending else {
            return Err(protocol("no result set is being read"));
        };
        self.read().await?;
        let deprecate_eof = self.caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
        match self.buf.first() {
            Some(0xFE) if self.buf.len() < 0xFF_FFFF => {
                let s = if deprecate_eof {
                    ParseBuf(&self.buf)
                        .parse::<OkPacketDeserializer<'_, ResultSetTerminator>>(self.caps)
                        .map(|ok| Summary::of(&ok.into_inner()))
                } else {
                    ParseBuf(&self.buf)
                        .parse::<OkPacketDeserializer<'_, OldEofPacket>>(self.caps)
                        .map(|ok| Summary::of(&ok.into_inner()))
                };
                let s = s.map_err(|e| self.broke(protocol(format!("a malformed EOF: {e}"))))?;
                self.note(&s);
                self.pending = if s.more() {
                    Pending::Head { binary }
                } else {
                    Pending::Nothing
                };
                Ok(RowEvent::End(s))
            }
            Some(0xFF) => {
                self.pending = Pending::Nothing;
                Err(server_error(&self.buf, self.caps))
            }
            _ => Ok(RowEvent::Row(&self.buf)),
        }
    }

    /// Reads and drops whatever is left of the last command's answer; the first error a
    /// later result carried.
    pub async fn drain(&mut self) -> Result<(), WireError> {
        let mut first_err = None;
        loop {
            match self.pending {
                Pending::Nothing => break,
                Pending::Rows { .. } => loop {
                    match self.read_row().await {
                        Ok(RowEvent::Row(_)) => {}
                        Ok(RowEvent::End(_)) => break,
                        Err(e) if e.breaks() => return Err(e),
                        Err(e) => {
                            first_err.get_or_insert(e);
                            break;
                        }
                    }
                },
                Pending::Head { .. } => match self.next_head(None).await {
                    Ok(_) => {}
                    Err(e) if e.breaks() => return Err(e),
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                },
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// The status flags of the last answer (in transaction, autocommit).
    pub fn status(&self) -> StatusFlags {
        self.status
    }

    /// The node's id of this connection (for KILL).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The node may leave out the columns of an execute's answer when they did not change
    /// (MariaDB's MARIADB_CLIENT_CACHE_METADATA, agreed at the handshake).
    pub fn caches_metadata(&self) -> bool {
        self.cache_metadata
    }

    /// An answer did not come in time (the node may still run the query).
    pub fn timed_out(&self) -> bool {
        self.timed_out
    }

    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Nothing unread, not broken, no transaction open: fit to go back to a pool.
    pub fn is_clean(&self) -> bool {
        !self.broken && self.pending == Pending::Nothing
    }

    /// Can an idle connection still be used (the node has not closed it)?
    pub fn alive(&self) -> bool {
        !self.broken && !self.io_closed()
    }

    fn io_closed(&self) -> bool {
        self.io.has_buffered() || self.io.get_ref().closed_or_dirty()
    }

    /// The current database, as far as the proxy set it.
    pub fn db(&self) -> Option<&str> {
        self.db.as_deref()
    }

    pub fn set_db(&mut self, db: Option<String>) {
        self.db = db;
    }
}

/// A length-encoded integer at the start of `b`, and the bytes after it.
fn lenenc(b: &[u8]) -> Option<(u64, &[u8])> {
    let (&first, rest) = b.split_first()?;
    let take = |n: usize| -> Option<(u64, &[u8])> {
        let bytes = rest.get(..n)?;
        let mut v = 0u64;
        for (i, x) in bytes.iter().enumerate() {
            v |= u64::from(*x) << (8 * i);
        }
        Some((v, &rest[n..]))
    };
    match first {
        0xFC => take(2),
        0xFD => take(3),
        0xFE => take(8),
        0xFB | 0xFF => None,
        n => Some((u64::from(n), rest)),
    }
}

/// A row packet as values: text rows as bytes, binary rows typed by their columns; NULL is
/// `Some(Value::NULL)`, as mysql_async gave them.
pub fn decode(packet: &[u8], cols: &Arc<[Column]>, binary: bool) -> io::Result<Vec<Option<Value>>> {
    let row: mysql_common::row::Row = if binary {
        ParseBuf(packet)
            .parse::<RowDeserializer<ServerSide, Binary>>(cols.clone())?
            .into()
    } else {
        ParseBuf(packet)
            .parse::<RowDeserializer<ServerSide, Text>>(cols.clone())?
            .into()
    };
    Ok(row.unwrap_raw())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_reads_every_width() {
        assert_eq!(lenenc(&[3, 9]), Some((3, &[9u8][..])));
        assert_eq!(lenenc(&[0xFC, 0x10, 0x01]), Some((0x110, &[][..])));
        assert_eq!(lenenc(&[0xFD, 1, 2, 3, 7]), Some((0x030201, &[7u8][..])));
        assert_eq!(lenenc(&[0xFC, 1]), None);
        assert_eq!(lenenc(&[]), None);
    }

    #[test]
    fn rows_decode_as_mysql_async_did() {
        let cols: Arc<[Column]> = vec![
            Column::new(mysql_common::constants::ColumnType::MYSQL_TYPE_LONG),
            Column::new(mysql_common::constants::ColumnType::MYSQL_TYPE_VAR_STRING),
        ]
        .into();
        // Text: "42", NULL.
        let text = decode(&[2, b'4', b'2', 0xFB], &cols, false).unwrap();
        assert_eq!(
            text,
            vec![Some(Value::Bytes(b"42".to_vec())), Some(Value::NULL)]
        );
        // Binary: header 0x00, null bitmap (offset 2: column 1 is NULL -> bit 3), INT 42.
        let bin = decode(&[0x00, 0b0000_1000, 42, 0, 0, 0], &cols, true).unwrap();
        assert_eq!(bin, vec![Some(Value::Int(42)), Some(Value::NULL)]);
        assert!(decode(&[5, b'x'], &cols, false).is_err());
    }
}
