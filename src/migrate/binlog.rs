//! Moves whose target gets the writes made meanwhile from the source's binary log, instead of
//! by dual writes (`[metadata] capture`): the clients' writes run on the source alone, as
//! they would with no move, and the driver reads the log from the position it took before
//! the backfill began, keeps the keys of the moving rows that changed there, and copies those
//! rows again from the source as they are now (`recopy`). Vitess's VReplication tails the
//! binary log the same way; here only keys are taken from it, never row images, so a row is
//! always copied whole from the source itself.
//!
//! Why that ends with the target equal to the source: the log lists every committed change;
//! each change's key is copied again after the driver has read it from the log, by a locking
//! read that cannot see a row its writer has not finished committing (it skips locked rows
//! and tries their keys on a later pass). The backfill's batches, the copies again and the
//! verify run one after the other on one task, so the last write of a row to the target is
//! the latest read of it. At the cutover writes wait (`MoveStep::Hold`), the log is read to
//! its end, and only then does the target own the rows (`docs/design.md`).
//!
//! The copies never wait for a row lock: the source's reads skip locked rows or fail
//! (`SKIP LOCKED`, `NOWAIT`), the target's writes fail at once and are sent again
//! (`super::copy::OnLock`). A client's statement never waits long behind them, and they are
//! never part of a deadlock a client could lose.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::StreamExt;
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStream, BinlogStreamRequest, Conn, Opts, Value};
use mysql_common::binlog::events::EventData;
use mysql_common::binlog::row::BinlogRow;
use mysql_common::binlog::value::BinlogValue;
use mysql_common::constants::ColumnType;

use super::copy::{write, OnLock, Shape, BATCH};
use crate::plan::moving::tuples;

/// A position in a node's binary log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    pub file: String,
    pub pos: u64,
}

impl Position {
    /// `file:pos`, as `shard_migrations.binlog_pos` keeps it.
    pub fn parse(s: &str) -> Option<Position> {
        let (file, pos) = s.rsplit_once(':')?;
        Some(Position {
            file: file.to_string(),
            pos: pos.parse().ok()?,
        })
    }

    pub fn text(&self) -> String {
        format!("{}:{}", self.file, self.pos)
    }

    /// Is this position before `other` (a log's files are numbered in order)?
    fn before(&self, other: &Position) -> bool {
        (self.file.as_str(), self.pos) < (other.file.as_str(), other.pos)
    }
}

/// How long one read of the log to its end may take.
const READ_LIMIT: Duration = Duration::from_secs(60);
/// How often the nodes' connections are pinged while the log is read (the shortest lease's
/// idle limit is one second).
const KEEP_ALIVE: Duration = Duration::from_millis(400);

/// The source's log position now, if its binary log can carry a move's changes: on, in ROW
/// format, with every column in the row images (`FULL` or `NOBLOB`), readable by the
/// proxy's user. `None`: the move uses dual writes.
pub async fn usable(s: &mut Conn) -> Option<Position> {
    let row: Option<(i64, String, String)> = s
        .query_first("SELECT @@log_bin, @@binlog_format, @@binlog_row_image")
        .await
        .ok()?;
    let (on, format, image) = row?;
    let full = image.eq_ignore_ascii_case("FULL") || image.eq_ignore_ascii_case("NOBLOB");
    if on != 1 || !format.eq_ignore_ascii_case("ROW") || !full {
        return None;
    }
    end_of_log(s).await.ok()
}

/// Keys of changed rows, each once.
#[derive(Debug, Default)]
pub struct Keys(HashMap<Vec<Option<Vec<u8>>>, Vec<Value>>);

impl Keys {
    pub fn add(&mut self, key: Vec<Value>) {
        let id = key.iter().map(crate::value::text_form).collect();
        self.0.entry(id).or_insert(key);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn take(&mut self) -> Vec<Vec<Value>> {
        self.0.drain().map(|(_, k)| k).collect()
    }
}

/// A replica's server id for a read to the log's end: the source ends an older connection
/// that uses the same id, so no two such reads share one.
fn server_id() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    0x4000_0000 ^ (std::process::id() << 12) ^ (n & 0xfff)
}

/// The server id of a move's open read of the log: one per move, so that the source ends
/// the connection an earlier read left (a replica's connection that was closed lingers on
/// the source until it has an event to send), whichever proxy opened it.
fn move_server_id(migration: u64) -> u32 {
    0x5000_0000 | (migration as u32 & 0x0fff_ffff)
}

/// Reads the source's log from `from` to its end and adds the keys of the moving rows of
/// each shape that changed there to `keys` (one set per shape); returns the position after.
/// (A request that ends at the log's end: `prepare` proves with it that the log can be read.)
pub async fn read(
    opts: &Opts,
    from: &Position,
    shapes: &[Shape],
    keys: &mut [Keys],
) -> Result<Position, String> {
    let mut stream = open(opts, from, server_id(), true).await?;
    let db = opts.db_name().unwrap_or_default().to_string();
    let mut at = from.clone();
    let reading = async {
        while let Some(event) = stream.next().await {
            let event = event.map_err(log_err)?;
            take(&stream, event, &mut at, &db, shapes, keys)?;
        }
        Ok::<(), String>(())
    };
    match tokio::time::timeout(READ_LIMIT, reading).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(format!(
                "reading the source's binary log took over {READ_LIMIT:?}"
            ))
        }
    }
    let _ = stream.close().await;
    Ok(at)
}

/// MariaDB's `MARIA_SLAVE_CAPABILITY_GTID`: a replica that reads GTID events as they are.
const MARIA_SLAVE_CAPABILITY_GTID: u32 = 4;

fn log_err(e: mysql_async::Error) -> String {
    format!("reading the source's binary log: {e}")
}

/// A replica's request for the log from `from`: to its end and no further (`to_end`), or
/// open, each event sent as it is written.
async fn open(opts: &Opts, from: &Position, id: u32, to_end: bool) -> Result<BinlogStream, String> {
    let mut conn = Conn::new(opts.clone()).await.map_err(log_err)?;
    // A replica that does not say it knows GTIDs gets each GTID event rewritten into an
    // older one, which MariaDB cannot do for a two-phase commit's (the proxy's XA: "Failed
    // to replace GTID event with backwards-compatible event: corrupt event", at every try).
    // Said, it sends MariaDB's own events, which `take` passes over.
    conn.query_drop(format!(
        "SET @mariadb_slave_capability = {MARIA_SLAVE_CAPABILITY_GTID}"
    ))
    .await
    .map_err(log_err)?;
    let mut request = BinlogStreamRequest::new(id)
        .with_filename(from.file.as_bytes())
        .with_pos(from.pos);
    if to_end {
        request = request.with_non_blocking();
    }
    conn.get_binlog_stream(request).await.map_err(log_err)
}

/// One event of the log: the position after it in `at`, and the keys of the moving rows it
/// changed in `keys`.
fn take(
    stream: &BinlogStream,
    event: mysql_async::binlog::events::Event,
    at: &mut Position,
    db: &str,
    shapes: &[Shape],
    keys: &mut [Keys],
) -> Result<(), String> {
    let end = u64::from(event.header().log_pos());
    let data = event
        .read_data()
        .map_err(|e| format!("a binary log event: {e}"))?;
    match data {
        // A real one ends a file naming the next. The stream sends an artificial one (its
        // end position 0) where it starts, naming `at` (with the checksum in its name: no
        // format is known yet), and where it goes on in a file that followed one without a
        // rotate event (the server stopped: it ends in a stop event), naming that file's
        // start.
        Some(EventData::RotateEvent(r)) => {
            let next = Position {
                file: r
                    .name()
                    .trim_end_matches(|c: char| !c.is_ascii_graphic())
                    .to_string(),
                pos: r.position(),
            };
            if end > 0 || (next.pos != at.pos && at.before(&next)) {
                *at = next;
            }
            return Ok(());
        }
        Some(EventData::RowsEvent(rows)) => {
            let Some(tme) = stream.get_tme(rows.table_id()) else {
                return Err("a row event without its table map".to_string());
            };
            let which = (tme.database_name() == db)
                .then(|| shapes.iter().position(|s| tme.table_name() == s.name))
                .flatten();
            if let Some(i) = which {
                let shape = &shapes[i];
                let types: Vec<Option<ColumnType>> = (0..tme.columns_count() as usize)
                    .map(|c| tme.get_column_type(c).ok().flatten())
                    .collect();
                for row in rows.rows(tme) {
                    let (before, after) = row.map_err(|e| format!("a binary log row: {e}"))?;
                    for image in [before, after].into_iter().flatten() {
                        if let Some(key) = moving_key(shape, &types, &image)? {
                            keys[i].add(key);
                        }
                    }
                }
            }
        }
        _ => {}
    }
    // Events the stream repeats at its start (the format description) carry no later
    // position than where it starts.
    if end > at.pos {
        at.pos = end;
    }
    Ok(())
}

/// The source's log position now.
async fn end_of_log(s: &mut Conn) -> Result<Position, String> {
    let r: Option<mysql_async::Row> = s.query_first("SHOW MASTER STATUS").await.map_err(log_err)?;
    r.and_then(|r| {
        Some(Position {
            file: r.get(0)?,
            pos: r.get(1)?,
        })
    })
    .ok_or_else(|| "the source's binary log is off".to_string())
}

/// The primary key of a row image, if the row is one of the moving rows.
fn moving_key(
    shape: &Shape,
    types: &[Option<ColumnType>],
    image: &BinlogRow,
) -> Result<Option<Vec<Value>>, String> {
    let value = |i: usize| -> Result<Value, String> {
        match image.as_ref(i) {
            Some(BinlogValue::Value(v)) => Ok(v.clone()),
            _ => Err(format!(
                "a row image of {} without column {} (binlog_row_image must be FULL)",
                shape.table,
                i + 1
            )),
        }
    };
    let Some(r) = shape.routing else {
        return Err(format!(
            "{} cannot be captured from the binary log",
            shape.table
        ));
    };
    let unsigned_at = |i: usize| {
        shape
            .key_pos
            .iter()
            .position(|p| *p == i)
            .is_some_and(|k| shape.key_unsigned[k])
    };
    let routing = value(r)?;
    let routing = if unsigned_at(r) {
        unsigned(routing, types.get(r).copied().flatten())
    } else {
        routing
    };
    let by = match shape.by {
        None => None,
        Some((i, unsigned_by)) => {
            let v = value(i)?;
            Some(if unsigned_by {
                unsigned(v, types.get(i).copied().flatten())
            } else {
                v
            })
        }
    };
    if !shape.moving.holds_row(&routing, by.as_ref()) {
        return Ok(None);
    }
    let mut key = Vec::with_capacity(shape.key_pos.len());
    for (k, &i) in shape.key_pos.iter().enumerate() {
        let v = value(i)?;
        key.push(if shape.key_unsigned[k] {
            unsigned(v, types.get(i).copied().flatten())
        } else {
            v
        });
    }
    Ok(Some(key))
}

/// A row image's integer as its UNSIGNED column holds it (the log's images carry no sign).
fn unsigned(v: Value, t: Option<ColumnType>) -> Value {
    let Value::Int(n) = v else { return v };
    if n >= 0 {
        return Value::Int(n);
    }
    Value::UInt(match t {
        Some(ColumnType::MYSQL_TYPE_TINY) => u64::from(n as u8),
        Some(ColumnType::MYSQL_TYPE_SHORT) => u64::from(n as u16),
        Some(ColumnType::MYSQL_TYPE_INT24) => u64::from(n as u32) & 0xff_ffff,
        Some(ColumnType::MYSQL_TYPE_LONG) => u64::from(n as u32),
        _ => n as u64,
    })
}

/// MariaDB's answer to a `NOWAIT` read of a locked row.
const LOCKED: u16 = super::copy::LOCK_WAIT;

/// Copies the rows of `keys` as the source holds them now: each that is there (among the
/// moving rows) replaced on the target, each that is not deleted there. Never waits for a
/// row lock; returns the keys whose rows were locked, to copy on a later pass, and the rows
/// written.
///
/// `later`: the rows the backfill has still to copy (a predicate on the table's columns,
/// read by MariaDB in the key's own collation): found there, they are left to it. Copied now,
/// each would be written twice, and the target's index built in the order the application
/// happened to write instead of the key's: measured, a target 70% larger than its source,
/// whose buffer pool then missed nine times as often (bench/README.md). Deletes are never
/// left: a row an earlier driver copied ahead of its saved cursor must go too.
pub(super) async fn recopy(
    s: &mut Conn,
    t: &mut Conn,
    shape: &Shape,
    keys: &mut Keys,
    later: Option<&str>,
    on: OnLock,
) -> mysql_async::Result<(Keys, u64)> {
    let mut locked_now = Keys::default();
    let mut written = 0;
    let all = keys.take();
    let width = shape.key.len().max(1);
    let copied: mysql_async::Result<()> = async {
        for chunk in all.chunks((60_000 / width).clamp(1, BATCH)) {
            let (rows, gone, locked) = read_now(s, shape, chunk, later).await?;
            for k in locked {
                locked_now.add(k);
            }
            // Two statements, no transaction around them: the target is written by this
            // task alone, and a pass that fails is read again from the saved position.
            if !gone.is_empty() {
                let params: Vec<Value> = gone.iter().flatten().cloned().collect();
                let delete = format!(
                    "DELETE FROM {} WHERE {} AND ({}) IN ({})",
                    shape.table,
                    shape.slots,
                    shape.key.join(", "),
                    tuples(width, gone.len())
                );
                write(t, &delete, params, on).await?;
            }
            super::copy::replace(t, shape, &rows, on).await?;
            written += rows.len() as u64;
        }
        Ok(())
    }
    .await;
    if let Err(e) = copied {
        // Every key stays to copy: a pass that stops is copied again, not lost.
        for k in all {
            keys.add(k);
        }
        return Err(e);
    }
    Ok((locked_now, written))
}

/// The moving rows of `keys` on the source now (read by a locking read that skips locked
/// rows) but those `later` holds, the keys with no moving row there, and the keys whose rows
/// were locked.
#[allow(clippy::type_complexity)]
async fn read_now(
    s: &mut Conn,
    shape: &Shape,
    keys: &[Vec<Value>],
    later: Option<&str>,
) -> mysql_async::Result<(Vec<Vec<Value>>, Vec<Vec<Value>>, Vec<Vec<Value>>)> {
    // Each row with whether the backfill copies it later, as its last column.
    let select = |n: usize, how: &str| {
        format!(
            "SELECT *, ({}) FROM {} WHERE {} AND ({}) IN ({}) FOR UPDATE {how}",
            later.unwrap_or("0"),
            shape.table,
            shape.slots,
            shape.key.join(", "),
            tuples(shape.key.len(), n)
        )
    };
    let params: Vec<Value> = keys.iter().flatten().cloned().collect();
    let found: Vec<mysql_async::Row> = s.exec(select(keys.len(), "SKIP LOCKED"), params).await?;
    let mut rows: Vec<Vec<Value>> = found.into_iter().map(mysql_async::Row::unwrap).collect();
    let id =
        |k: &[Value]| -> Vec<Option<Vec<u8>>> { k.iter().map(crate::value::text_form).collect() };
    let key_of = |r: &[Value]| -> Vec<Option<Vec<u8>>> {
        shape
            .key_pos
            .iter()
            .map(|i| r.get(*i).and_then(crate::value::text_form))
            .collect()
    };
    let present: std::collections::HashSet<_> = rows.iter().map(|r| key_of(r)).collect();
    let missing: Vec<Vec<Value>> = keys
        .iter()
        .filter(|k| !present.contains(&id(k)))
        .cloned()
        .collect();
    if missing.is_empty() {
        return Ok((not_later(rows), Vec::new(), Vec::new()));
    }
    // Not there, or locked: a read that fails rather than wait tells which.
    let params: Vec<Value> = missing.iter().flatten().cloned().collect();
    match s
        .exec::<mysql_async::Row, _, _>(select(missing.len(), "NOWAIT"), params)
        .await
    {
        Ok(more) => {
            let more: Vec<Vec<Value>> = more.into_iter().map(mysql_async::Row::unwrap).collect();
            let there: std::collections::HashSet<_> = more.iter().map(|r| key_of(r)).collect();
            let gone = missing
                .into_iter()
                .filter(|k| !there.contains(&id(k)))
                .collect();
            rows.extend(more);
            Ok((not_later(rows), gone, Vec::new()))
        }
        Err(mysql_async::Error::Server(e)) if e.code == LOCKED => {
            Ok((not_later(rows), Vec::new(), missing))
        }
        Err(e) => Err(e),
    }
}

/// The rows [`read_now`] read whose last column (the backfill copies it later) is false,
/// without that column.
fn not_later(rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    rows.into_iter()
        .filter_map(|mut r| {
            let later = match r.pop() {
                Some(Value::Int(v)) => v != 0,
                Some(Value::UInt(v)) => v != 0,
                Some(Value::Bytes(b)) => b != b"0",
                _ => false,
            };
            (!later).then_some(r)
        })
        .collect()
}

/// A move's capture as a driver's pass carries it on: the log read up to `at`, the keys
/// read there and not copied yet (their rows were locked), and the position saved in the
/// move's row (every change before it is on the target).
pub struct Tail {
    opts: Opts,
    at: Position,
    saved: Position,
    keys: Vec<Keys>,
    /// The log as it is written, read up to `at` (opened at the first pass, again after
    /// an error).
    stream: Option<BinlogStream>,
    id: u32,
}

impl Tail {
    /// The capture of `m`, if its changes come from the source's log.
    pub fn of(
        m: &crate::metadata::migrations::Migration,
        opts: &Opts,
        shapes: &[Shape],
    ) -> Result<Option<Tail>, String> {
        if m.capture.as_deref() != Some("binlog") {
            return Ok(None);
        }
        let at = m
            .binlog_pos
            .as_deref()
            .and_then(Position::parse)
            .ok_or_else(|| format!("migration {}: no binary log position kept", m.id))?;
        Ok(Some(Tail {
            opts: opts.clone(),
            saved: at.clone(),
            at,
            keys: shapes.iter().map(|_| Keys::default()).collect(),
            stream: None,
            id: move_server_id(m.id),
        }))
    }

    /// Reads the log to its end and copies the rows that changed there (those locked now
    /// stay to copy on the next pass: [`Tail::pending`]), but those the backfill copies
    /// later: `later[i]` for `shapes[i]` ([`recopy`]; none past its end). The rows written.
    pub async fn catch_up(
        &mut self,
        s: &mut Conn,
        t: &mut Conn,
        shapes: &[Shape],
        later: &[Option<String>],
    ) -> Result<u64, String> {
        match self.pass(s, t, shapes, later, OnLock::Retry).await {
            Ok(n) => Ok(n),
            Err(Caught::Failed(e)) => Err(e),
            Err(Caught::Locked(e)) => Err(copying(&e)),
        }
    }

    /// As [`Tail::catch_up`], while the source's connection holds locks a client may wait
    /// on: a write that meets a client's lock on the target does not wait for it (the
    /// client may be waiting on the source's), `Ok(None)`: release the locks, try again.
    pub async fn catch_up_holding(
        &mut self,
        s: &mut Conn,
        t: &mut Conn,
        shapes: &[Shape],
    ) -> Result<Option<u64>, String> {
        match self.pass(s, t, shapes, &[], OnLock::Fail).await {
            Ok(n) => Ok(Some(n)),
            Err(Caught::Locked(_)) => Ok(None),
            Err(Caught::Failed(e)) => Err(e),
        }
    }

    async fn pass(
        &mut self,
        s: &mut Conn,
        t: &mut Conn,
        shapes: &[Shape],
        later: &[Option<String>],
        on: OnLock,
    ) -> Result<u64, Caught> {
        let end = end_of_log(s).await.map_err(Caught::Failed)?;
        if self.at.before(&end) {
            let read = self.read_to(&end, shapes, [s, t]).await;
            if let Err(e) = read {
                // Read again from where it stands, on a new connection, next time.
                self.stream = None;
                return Err(Caught::Failed(e));
            }
        }
        let mut written = 0;
        for (i, (shape, keys)) in shapes.iter().zip(self.keys.iter_mut()).enumerate() {
            let later = later.get(i).and_then(Option::as_deref);
            match recopy(s, t, shape, keys, later, on).await {
                Ok((locked, n)) => {
                    *keys = locked;
                    written += n;
                }
                Err(mysql_async::Error::Server(e)) if e.code == super::copy::LOCK_WAIT => {
                    return Err(Caught::Locked(e.to_string()));
                }
                Err(e) => return Err(Caught::Failed(copying(&e.to_string()))),
            }
        }
        Ok(written)
    }

    /// Reads the open log up to `end` (a position it holds already, so the read ends),
    /// pinging the nodes' connections `alive` meanwhile: they close themselves when idle for
    /// about a lease (`super::step::ends`), and a long log takes longer to read.
    async fn read_to(
        &mut self,
        end: &Position,
        shapes: &[Shape],
        mut alive: [&mut Conn; 2],
    ) -> Result<(), String> {
        if self.stream.is_none() {
            self.stream = Some(open(&self.opts, &self.at, self.id, false).await?);
        }
        let db = self.opts.db_name().unwrap_or_default().to_string();
        let (Some(stream), at, keys) = (self.stream.as_mut(), &mut self.at, &mut self.keys) else {
            return Ok(());
        };
        let reading = async {
            let mut pinged = std::time::Instant::now();
            while at.before(end) {
                if pinged.elapsed() > KEEP_ALIVE {
                    for (c, which) in alive.iter_mut().zip(["source", "target"]) {
                        c.ping().await.map_err(|e| {
                            format!("the {which}'s connection while reading the log: {e}")
                        })?;
                    }
                    pinged = std::time::Instant::now();
                }
                let Some(event) = stream.next().await else {
                    return Err("the source ended its binary log stream".to_string());
                };
                let event = event.map_err(log_err)?;
                take(stream, event, at, &db, shapes, keys)?;
            }
            Ok(())
        };
        match tokio::time::timeout(READ_LIMIT, reading).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "the source's binary log did not reach {} within {READ_LIMIT:?}",
                end.text()
            )),
        }
    }

    /// The position to save once everything read is copied (and it moved since last
    /// saved), if any: taken as saved.
    pub fn to_save(&mut self) -> Option<String> {
        (self.pending() == 0 && self.at != self.saved).then(|| {
            self.saved = self.at.clone();
            self.at.text()
        })
    }

    /// Keys read from the log whose rows were locked when last tried.
    pub fn pending(&self) -> usize {
        self.keys.iter().map(Keys::len).sum()
    }
}

/// Why a pass of the log stopped.
enum Caught {
    /// A write met a client's lock on the target (and did not wait).
    Locked(String),
    Failed(String),
}

fn copying(e: &str) -> String {
    format!("copying the rows the binary log changed to the target: {e}")
}

/// Verifies one chunk (`range`) of the shape `i` of a captured move: its rows and the gaps
/// between them locked on the source (REPEATABLE READ, so no write can enter the range),
/// the target brought up to the log's end, then both sides' row count and checksum
/// compared; a chunk that differs is copied again under the same locks. The locking read
/// does not wait: `None` when a row of the range is locked now (try the chunk again).
/// Otherwise (differed at first, agrees now).
pub async fn verify_chunk(
    s: &mut Conn,
    t: &mut Conn,
    tail: &mut Tail,
    shapes: &[Shape],
    i: usize,
    range: &str,
) -> Result<Option<(bool, bool)>, String> {
    let err = |e: mysql_async::Error| e.to_string();
    let shape = &shapes[i];
    // Most of the log before the chunk is locked: its rows are held only for the rest.
    tail.catch_up(s, t, shapes, &[]).await?;
    s.query_drop("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .await
        .map_err(err)?;
    s.query_drop("START TRANSACTION").await.map_err(err)?;
    let r = async {
        let sums = super::copy::checksum_sql(shape, range, "FOR UPDATE NOWAIT");
        let a: Option<(u64, u64)> = match s.query_first(&sums).await {
            Ok(a) => a,
            Err(mysql_async::Error::Server(e)) if e.code == LOCKED => return Ok(None),
            Err(e) => return Err(err(e)),
        };
        // The chunk's rows stay locked meanwhile: a client's write waiting on them may
        // hold a lock on the target this pass would wait for.
        if tail.catch_up_holding(s, t, shapes).await?.is_none() {
            return Ok(None);
        }
        let target = super::copy::checksum_sql(shape, range, "");
        let b: Option<(u64, u64)> = t.query_first(&target).await.map_err(err)?;
        if a == b {
            return Ok(Some((false, true)));
        }
        // A client's lock on the target's rows: rolled back, and the chunk tried again.
        match super::copy::copy_range_in(s, t, shape, range, OnLock::Fail).await {
            Err(mysql_async::Error::Server(e)) if e.code == LOCKED => return Ok(None),
            r => r.map_err(err)?,
        }
        let b: Option<(u64, u64)> = t.query_first(&target).await.map_err(err)?;
        Ok(Some((true, a == b)))
    }
    .await;
    let _ = s.query_drop("COMMIT").await;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_reads_back_as_written() {
        let p = Position {
            file: "binlog.000012".into(),
            pos: 4711,
        };
        assert_eq!(Position::parse(&p.text()), Some(p));
        assert_eq!(Position::parse("binlog.000012"), None);
        assert_eq!(Position::parse("binlog.000012:x"), None);
    }

    #[test]
    fn unsigned_integers_from_a_log_image_get_their_value_back() {
        use ColumnType::*;
        assert_eq!(
            unsigned(Value::Int(-1), Some(MYSQL_TYPE_LONGLONG)),
            Value::UInt(u64::MAX)
        );
        assert_eq!(
            unsigned(Value::Int(-1), Some(MYSQL_TYPE_LONG)),
            Value::UInt(4_294_967_295)
        );
        assert_eq!(
            unsigned(Value::Int(-1), Some(MYSQL_TYPE_INT24)),
            Value::UInt(16_777_215)
        );
        assert_eq!(
            unsigned(Value::Int(-2), Some(MYSQL_TYPE_SHORT)),
            Value::UInt(65_534)
        );
        assert_eq!(
            unsigned(Value::Int(-1), Some(MYSQL_TYPE_TINY)),
            Value::UInt(255)
        );
        assert_eq!(
            unsigned(Value::Int(7), Some(MYSQL_TYPE_LONG)),
            Value::Int(7)
        );
        assert_eq!(
            unsigned(Value::Bytes(b"a".to_vec()), None),
            Value::Bytes(b"a".to_vec())
        );
    }

    #[test]
    fn keys_are_kept_once_by_their_text() {
        let mut k = Keys::default();
        k.add(vec![Value::Int(5)]);
        k.add(vec![Value::UInt(5)]);
        k.add(vec![Value::Bytes(b"5".to_vec())]);
        k.add(vec![Value::Int(6)]);
        assert_eq!(k.len(), 2);
        assert_eq!(k.take().len(), 2);
        assert!(k.is_empty());
    }
}
