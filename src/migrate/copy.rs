//! The data steps of a move, on the source and target nodes' own connections: the backfill
//! (rows copied in primary-key order, each batch under the source's row locks), the verify
//! (per-chunk row count and checksum on both sides, under the same locks; a chunk that
//! differs is copied again and checked again) and the cleanups (a range's rows deleted in
//! batches).
//!
//! Every batch locks its rows on the source (`FOR UPDATE`, READ COMMITTED so rows of other
//! slots the scan passes are not held) and writes them to the target before it lets them
//! go. A client's write to one of those rows waits for the batch; its image then follows
//! the batch's to the target (`crate::exec::dual_write`). A write that came first has its
//! image on the target before the batch can lock the row. Either way the target ends with
//! the source's last image of every row.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value};

use crate::metadata::migrations::Migration;
use crate::plan::moving::{quote, tuples, Moving};

/// What the copy needs to know of the table, read from the source.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Quoted name.
    pub table: String,
    /// The name as the nodes know it (a binary log names tables so).
    pub name: String,
    /// The moving rows: `CRC32(key) % 1024 BETWEEN a AND b`, or `key = 'v'`.
    pub slots: String,
    /// Quoted primary-key columns, and their positions among `columns`.
    pub key: Vec<String>,
    pub key_pos: Vec<usize>,
    /// Which key columns are UNSIGNED (a binary log's row images do not say).
    pub key_unsigned: Vec<bool>,
    /// The routing column's position among `columns`, where its values read from a binary
    /// log route as the clients' do (integer and string types); `None`: the move cannot be
    /// captured from the binary log.
    pub routing: Option<usize>,
    /// A salted key's buckets moving: the salt column's position among `columns` and
    /// whether it is UNSIGNED (its values read from a binary log pick their bucket).
    pub by: Option<(usize, bool)>,
    /// The rows that move.
    pub moving: Moving,
    /// Quoted columns, in order.
    pub columns: Vec<String>,
}

/// Rows per batch.
pub const BATCH: usize = 500;
/// Rows per verify chunk.
pub const CHUNK: usize = 1000;

fn columns_sql(table: &str) -> String {
    format!(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() \
         AND TABLE_NAME = {} ORDER BY ORDINAL_POSITION",
        crate::sql::write::text_literal(table)
    )
}

async fn names(c: &mut Conn, sql: &str) -> mysql_async::Result<Vec<String>> {
    c.query(sql).await
}

/// Connects the copy's session: READ COMMITTED (its locking reads hold only the rows they
/// return), and a short lock wait (a batch that waits gives way and is tried again).
pub async fn session(c: &mut Conn) -> mysql_async::Result<()> {
    c.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .await?;
    c.query_drop("SET SESSION innodb_lock_wait_timeout = 5")
        .await
}

/// Reads the table's shape on the source and makes sure the target has the same table
/// (created from the source's `SHOW CREATE TABLE` when it has none).
pub async fn prepare(
    s: &mut Conn,
    t: &mut Conn,
    m: &Migration,
    table: &str,
    moving: Moving,
    column: &str,
) -> Result<Shape, String> {
    let rows = moving.predicate(None, column);
    let err = |e: mysql_async::Error| e.to_string();
    // The source's columns, each with whether it is UNSIGNED and its type.
    let described: Vec<(String, bool, String)> = s
        .query(format!(
            "SELECT COLUMN_NAME, COLUMN_TYPE LIKE '%unsigned%', DATA_TYPE FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = {} ORDER BY ORDINAL_POSITION",
            crate::sql::write::text_literal(table)
        ))
        .await
        .map_err(err)?;
    let columns: Vec<String> = described.iter().map(|(c, _, _)| c.clone()).collect();
    if columns.is_empty() {
        return Err(format!("the source `{}` has no table `{table}`", m.source));
    }
    let mut there = names(t, &columns_sql(table)).await.map_err(err)?;
    if there.is_empty() {
        let create: Option<(String, String)> = s
            .query_first(format!("SHOW CREATE TABLE {}", quote(table)))
            .await
            .map_err(err)?;
        let Some((_, ddl)) = create else {
            return Err(format!(
                "SHOW CREATE TABLE `{table}` on the source gave nothing"
            ));
        };
        t.query_drop(ddl).await.map_err(err)?;
        there = names(t, &columns_sql(table)).await.map_err(err)?;
    }
    if there != columns {
        return Err(format!(
            "`{table}` has other columns on the target `{}` ({}) than on the source `{}` ({})",
            m.target,
            there.join(", "),
            m.source,
            columns.join(", ")
        ));
    }
    let key = names(
        s,
        &format!(
            "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = DATABASE() \
             AND TABLE_NAME = {} AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
            crate::sql::write::text_literal(table)
        ),
    )
    .await
    .map_err(err)?;
    if key.is_empty() {
        return Err(format!(
            "`{table}` has no primary key: its rows cannot be copied and compared by key"
        ));
    }
    let key_pos: Vec<usize> = key
        .iter()
        .map(|k| columns.iter().position(|c| c == k).unwrap_or(0))
        .collect();
    let key_unsigned = key_pos.iter().map(|i| described[*i].1).collect();
    let routing = columns.iter().position(|c| c.eq_ignore_ascii_case(column));
    // Read from a binary log, a routing value must name its move as the client's did:
    // integers and strings do; so must a salt column's.
    let logs = |i: usize| {
        matches!(
            described[i].2.to_ascii_lowercase().as_str(),
            "tinyint"
                | "smallint"
                | "mediumint"
                | "int"
                | "bigint"
                | "char"
                | "varchar"
                | "binary"
                | "varbinary"
        )
    };
    let by = match moving.by() {
        None => None,
        Some(b) => match columns.iter().position(|c| c.eq_ignore_ascii_case(b)) {
            Some(i) => Some((i, described[i].1)),
            None => return Err(format!("`{table}` has no salt column `{b}`")),
        },
    };
    let logged = routing.filter(|r| logs(*r) && by.is_none_or(|(i, _)| logs(i)));
    Ok(Shape {
        table: quote(table),
        name: table.to_string(),
        key_unsigned,
        routing: logged,
        by,
        moving,
        slots: rows,
        key: key.iter().map(|k| quote(k)).collect(),
        key_pos,
        columns: columns.iter().map(|c| quote(c)).collect(),
    })
}

impl Shape {
    fn key_list(&self) -> String {
        self.key.join(", ")
    }

    /// `(key) > (cursor)`, or nothing at the start.
    fn after(&self, cursor: Option<&str>) -> String {
        match cursor {
            Some(c) => format!(" AND ({}) > {c}", self.key_list()),
            None => String::new(),
        }
    }

    fn upto(&self, hi: Option<&str>) -> String {
        match hi {
            Some(h) => format!(" AND ({}) <= {h}", self.key_list()),
            None => String::new(),
        }
    }

    /// The key of a row as a SQL tuple literal (the stored cursor), each value through
    /// the literal writer by its column's type and character set.
    fn cursor_of(&self, row: &mysql_async::Row) -> String {
        let cols = row.columns_ref();
        let mut out = String::from("(");
        for (n, i) in self.key_pos.iter().enumerate() {
            if n > 0 {
                out.push_str(", ");
            }
            match cols.get(*i) {
                Some(col) => crate::sql::write::typed(&mut out, row.as_ref(*i), col),
                None => out.push_str("NULL"),
            }
        }
        out.push(')');
        out
    }
}

/// What a backfill at `table`'s `cursor` (its rows up to `upto` to copy) has still to copy,
/// per shape: nothing of the tables before, the rows after the cursor up to `upto` of this
/// one (none when it was empty), every row of the tables after (their last keys are taken
/// when the backfill reaches them, after every change read before). As predicates for
/// [`super::binlog::recopy`].
pub fn still_to_copy(
    shapes: &[Shape],
    table: usize,
    cursor: Option<&str>,
    upto: Option<&str>,
) -> Vec<Option<String>> {
    shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| match i.cmp(&table) {
            std::cmp::Ordering::Less => None,
            std::cmp::Ordering::Equal => {
                upto.map(|u| format!("1{}{}", shape.after(cursor), shape.upto(Some(u))))
            }
            std::cmp::Ordering::Greater => Some("1".to_string()),
        })
        .collect()
}

/// How a write of the move meets a row lock a client holds.
///
/// With the binary log's capture a client's write over any rows scans the copies too (the
/// target's before the cutover, the source's left-overs after) and, in REPEATABLE READ,
/// locks what it scans. Were the move's write to wait for such a lock while holding rows the
/// client's scan waits for, InnoDB would end one of the two, often the client's (the lighter
/// transaction): an error one MariaDB would not give that client, and inside the client's
/// own transaction not one the proxy can take back. A write that never waits is never part
/// of a cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OnLock {
    /// Waits (`innodb_lock_wait_timeout` of the session): the moves by row images, whose
    /// clients' writes pin their keys.
    Wait,
    /// Fails at once with 1205 (inside a transaction the caller rolls back and tries the
    /// whole again).
    Fail,
    /// Fails at once and, being a statement of its own (autocommit: nothing of it stays,
    /// no lock of it is held), is sent again after 2, 4 .. 64 ms, for up to [`GIVE_WAY`].
    Retry,
}

/// How long a statement that gives way to clients' locks keeps trying (the sessions' lock
/// wait before: `session`).
const GIVE_WAY: std::time::Duration = std::time::Duration::from_secs(5);

/// MariaDB's lock wait timeout.
pub(super) const LOCK_WAIT: u16 = 1205;

/// Runs one of the move's writes on `c` as `on` says.
pub(super) async fn write(
    c: &mut Conn,
    sql: &str,
    params: Vec<Value>,
    on: OnLock,
) -> mysql_async::Result<()> {
    // Without parameters as text: a statement whose text changes every batch (a cursor in
    // it) would be prepared, run and closed, three round trips instead of one.
    async fn send(c: &mut Conn, sql: &str, params: &[Value]) -> mysql_async::Result<()> {
        if params.is_empty() {
            c.query_drop(sql).await
        } else {
            c.exec_drop(sql, params.to_vec()).await
        }
    }
    if on == OnLock::Wait {
        return send(c, sql, &params).await;
    }
    let sql = format!("SET STATEMENT innodb_lock_wait_timeout = 0 FOR {sql}");
    let started = std::time::Instant::now();
    let mut tries = 0u32;
    loop {
        match send(c, &sql, &params).await {
            Err(mysql_async::Error::Server(e))
                if e.code == LOCK_WAIT && on == OnLock::Retry && started.elapsed() < GIVE_WAY =>
            {
                tries += 1;
                let ms = 1u64 << tries.min(6);
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            }
            r => return r,
        }
    }
}

/// Writes `rows` to the target, each chunk as `on` says (inside an open transaction: not
/// [`OnLock::Retry`]).
pub(super) async fn replace(
    t: &mut Conn,
    shape: &Shape,
    rows: &[Vec<Value>],
    on: OnLock,
) -> mysql_async::Result<()> {
    let width = shape.columns.len();
    for chunk in rows.chunks((60_000 / width.max(1)).clamp(1, BATCH)) {
        let sql = format!(
            "REPLACE INTO {} VALUES {}",
            shape.table,
            tuples(width, chunk.len())
        );
        let params: Vec<Value> = chunk.iter().flatten().cloned().collect();
        write(t, &sql, params, on).await?;
    }
    Ok(())
}

/// The largest key of the moving rows on `c` now (`None`: there are none). A pass of the
/// backfill or the verify stops there: every row inserted after it was taken has its image
/// on the target already (the pass starts only once every proxy writes images), so a pass
/// over a table that keeps growing still ends.
pub async fn last_key(c: &mut Conn, shape: &Shape) -> mysql_async::Result<Option<String>> {
    let desc: Vec<String> = shape.key.iter().map(|k| format!("{k} DESC")).collect();
    let row: Option<mysql_async::Row> = c
        .query_first(format!(
            "SELECT * FROM {} WHERE {} ORDER BY {} LIMIT 1",
            shape.table,
            shape.slots,
            desc.join(", ")
        ))
        .await?;
    Ok(row.map(|r| shape.cursor_of(&r)))
}

/// Copies the next batch after `cursor`, up to the key `last`: the rows read and locked on
/// the source, written to the target, committed there, then the source's locks let go.
/// Returns the rows copied and the new cursor (`None`: nothing was left). A move captured
/// from the source's binary log copies without locks instead ([`batch_ahead`]).
///
/// The read does not wait for a client's lock: holding the batch's rows read so far while
/// waiting for the next one, it could close a cycle with a client's transaction that holds
/// that row and wants one of them, and InnoDB would end the lighter side, the client's: a
/// 1213 one MariaDB would not give it. A locked batch is tried again after a pause, halved
/// each time; a batch of one row holds nothing else while it waits, so it simply waits.
pub async fn batch(
    s: &mut Conn,
    t: &mut Conn,
    shape: &Shape,
    cursor: Option<&str>,
    last: &str,
    n: usize,
) -> mysql_async::Result<(usize, Option<String>)> {
    let mut n = n.max(1);
    let mut tries = 0u32;
    loop {
        match batch_once(s, t, shape, cursor, last, n).await {
            Err(mysql_async::Error::Server(e)) if e.code == LOCK_WAIT && n > 1 => {
                tries += 1;
                n /= 2;
                let ms = 1u64 << tries.min(6);
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            }
            r => return r,
        }
    }
}

/// One try of [`batch`]: `n` rows, read without waiting unless `n` is 1.
async fn batch_once(
    s: &mut Conn,
    t: &mut Conn,
    shape: &Shape,
    cursor: Option<&str>,
    last: &str,
    n: usize,
) -> mysql_async::Result<(usize, Option<String>)> {
    let lock = if n > 1 {
        " FOR UPDATE NOWAIT"
    } else {
        " FOR UPDATE"
    };
    let sql = batch_sql(shape, cursor, last, n) + lock;
    s.query_drop("START TRANSACTION").await?;
    let r = async {
        let rows: Vec<mysql_async::Row> = s.exec(sql, ()).await?;
        let last = rows.last().map(|r| shape.cursor_of(r));
        let rows: Vec<Vec<Value>> = rows.into_iter().map(mysql_async::Row::unwrap).collect();
        if rows.is_empty() {
            return Ok((0, None));
        }
        crate::hooks::migration_batch_read(&shape.table).await;
        t.query_drop("START TRANSACTION").await?;
        if let Err(e) = replace(t, shape, &rows, OnLock::Wait).await {
            let _ = t.query_drop("ROLLBACK").await;
            return Err(e);
        }
        t.query_drop("COMMIT").await?;
        Ok((rows.len(), last))
    }
    .await;
    let end = if r.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let _ = s.query_drop(end).await;
    r
}

/// The next `n` moving rows after `cursor`, up to the key `last`, in key order.
fn batch_sql(shape: &Shape, cursor: Option<&str>, last: &str, n: usize) -> String {
    format!(
        "SELECT * FROM {} WHERE {}{}{} ORDER BY {} LIMIT {n}",
        shape.table,
        shape.slots,
        shape.after(cursor),
        shape.upto(Some(last)),
        shape.key_list(),
    )
}

/// A batch of rows read as committed, without locks: up to `n` after `cursor`, up to the
/// key `last`, and the cursor after them.
pub type Read = (Vec<Vec<Value>>, Option<String>);

async fn read(
    s: &mut Conn,
    shape: &Shape,
    cursor: Option<&str>,
    last: &str,
    n: usize,
) -> mysql_async::Result<Read> {
    let rows: Vec<mysql_async::Row> = s.query(batch_sql(shape, cursor, last, n)).await?;
    let after = rows.last().map(|r| shape.cursor_of(r));
    Ok((
        rows.into_iter().map(mysql_async::Row::unwrap).collect(),
        after,
    ))
}

/// [`batch`] for a move captured from the source's binary log: the rows read as committed,
/// without locks (a write the batch missed is in the log, and copied again after it:
/// `super::binlog`), written to the target in one statement, and the batch after them read
/// from the source meanwhile: `ahead` holds that one for the next call. The caller empties `ahead` before it copies the log's
/// changes: a batch read before them must not be written after them, over the newer rows.
pub async fn batch_ahead(
    s: &mut Conn,
    t: &mut Conn,
    shape: &Shape,
    cursor: Option<&str>,
    last: &str,
    n: usize,
    ahead: &mut Option<Read>,
) -> mysql_async::Result<(usize, Option<String>)> {
    let (rows, after) = match ahead.take() {
        Some(read) => read,
        None => read(s, shape, cursor, last, n).await?,
    };
    if rows.is_empty() {
        return Ok((0, None));
    }
    let (written, next) = tokio::join!(
        replace(t, shape, &rows, OnLock::Retry),
        read(s, shape, after.as_deref(), last, n)
    );
    written?;
    *ahead = Some(next?);
    Ok((rows.len(), after))
}

/// One verify chunk after `lo`, up to the key `last`: its upper key (`None`: the last chunk) and whether both
/// sides agree, after copying it again up to three times while they did not.
/// Returns (upper key, differed at first, agrees now).
pub async fn verify_chunk(
    s: &mut Conn,
    t: &mut Conn,
    shape: &Shape,
    lo: Option<&str>,
    last: &str,
) -> mysql_async::Result<(Option<String>, bool, bool)> {
    let (hi, range) = chunk(s, shape, lo, last).await?;
    let mut first_differed = false;
    for attempt in 0..4 {
        if sums_agree(s, t, shape, &range).await? {
            return Ok((hi, first_differed, true));
        }
        if attempt == 0 {
            first_differed = true;
        }
        if attempt < 3 {
            copy_range(s, t, shape, &range).await?;
        }
    }
    Ok((hi, first_differed, false))
}

/// How long a verify step keeps meeting a client's lock on the source's chunk before the
/// move gives up (tried every 10 ms, as for the moves captured from the binary log).
const VERIFY_GIVE_WAY: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether a verify step begun at `since` met a client's lock (to be tried again): past
/// [`VERIFY_GIVE_WAY`] the error stands.
fn locked_again<T>(r: &mysql_async::Result<T>, since: std::time::Instant) -> bool {
    matches!(r, Err(mysql_async::Error::Server(e)) if e.code == LOCK_WAIT)
        && since.elapsed() < VERIFY_GIVE_WAY
}

/// The verify chunk after `lo`, up to the key `last`: its upper key (`None`: the last
/// chunk) and its rows as a predicate.
pub async fn chunk(
    s: &mut Conn,
    shape: &Shape,
    lo: Option<&str>,
    last: &str,
) -> mysql_async::Result<(Option<String>, String)> {
    let hi: Option<mysql_async::Row> = s
        .query_first(format!(
            "SELECT * FROM {} WHERE {}{}{} ORDER BY {} LIMIT 1 OFFSET {}",
            shape.table,
            shape.slots,
            shape.after(lo),
            shape.upto(Some(last)),
            shape.key_list(),
            CHUNK - 1
        ))
        .await?;
    let hi = hi.map(|r| shape.cursor_of(&r));
    // The last chunk ends at `last`.
    let range = format!(
        "{}{}{}",
        shape.slots,
        shape.after(lo),
        shape.upto(Some(hi.as_deref().unwrap_or(last)))
    );
    Ok((hi, range))
}

pub(super) fn checksum_sql(shape: &Shape, range: &str, lock: &str) -> String {
    let parts: Vec<String> = shape
        .columns
        .iter()
        .map(|c| format!("ISNULL({c}), {c}"))
        .collect();
    format!(
        "SELECT COUNT(*), CAST(COALESCE(BIT_XOR(CRC32(CONCAT_WS('|', {}))), 0) AS UNSIGNED) FROM {} WHERE {range} {lock}",
        parts.join(", "),
        shape.table
    )
}

/// Row count and checksum of the range on both sides, the source's rows locked meanwhile
/// (so a write that committed there has its image on the target, or is waiting).
///
/// The locking read of the chunk does not wait: a read of a thousand rows that waited for
/// a client's lock while holding the others could close a cycle with the client's
/// transaction, and InnoDB would end the lighter side, the client's, with a 1213 one
/// MariaDB would not give it. A chunk a client holds a row of is tried again 10 ms later.
async fn sums_agree(
    s: &mut Conn,
    t: &mut Conn,
    shape: &Shape,
    range: &str,
) -> mysql_async::Result<bool> {
    let since = std::time::Instant::now();
    loop {
        let r = sums_agree_once(s, t, shape, range).await;
        if !locked_again(&r, since) {
            return r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

async fn sums_agree_once(
    s: &mut Conn,
    t: &mut Conn,
    shape: &Shape,
    range: &str,
) -> mysql_async::Result<bool> {
    s.query_drop("START TRANSACTION").await?;
    let r = async {
        let a: Option<(u64, u64)> = s
            .query_first(checksum_sql(shape, range, "FOR UPDATE NOWAIT"))
            .await?;
        t.query_drop("START TRANSACTION").await?;
        let b: mysql_async::Result<Option<(u64, u64)>> = t
            .query_first(checksum_sql(shape, range, "LOCK IN SHARE MODE"))
            .await;
        let _ = t.query_drop("COMMIT").await;
        Ok(a == b?)
    }
    .await;
    let _ = s.query_drop("COMMIT").await;
    r
}

/// Copies a range again: the target's rows there replaced by the source's, under the
/// source's locks (taken without waiting, as in [`sums_agree`]).
async fn copy_range(
    s: &mut Conn,
    t: &mut Conn,
    shape: &Shape,
    range: &str,
) -> mysql_async::Result<()> {
    let since = std::time::Instant::now();
    loop {
        s.query_drop("START TRANSACTION").await?;
        let r = copy_range_in(s, t, shape, range, OnLock::Wait).await;
        let end = if r.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let _ = s.query_drop(end).await;
        if !locked_again(&r, since) {
            return r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// [`copy_range`] inside the source's open transaction, the target's writes meeting its
/// clients' locks as `on` says (not [`OnLock::Retry`]: they share a transaction).
pub(super) async fn copy_range_in(
    s: &mut Conn,
    t: &mut Conn,
    shape: &Shape,
    range: &str,
    on: OnLock,
) -> mysql_async::Result<()> {
    {
        let rows: Vec<mysql_async::Row> = s
            .query(format!(
                "SELECT * FROM {} WHERE {range} FOR UPDATE NOWAIT",
                shape.table
            ))
            .await?;
        let rows: Vec<Vec<Value>> = rows.into_iter().map(mysql_async::Row::unwrap).collect();
        t.query_drop("START TRANSACTION").await?;
        let w = async {
            let delete = format!("DELETE FROM {} WHERE {range}", shape.table);
            write(t, &delete, Vec::new(), on).await?;
            replace(t, shape, &rows, on).await
        }
        .await;
        match w {
            Ok(()) => t.query_drop("COMMIT").await,
            Err(e) => {
                let _ = t.query_drop("ROLLBACK").await;
                Err(e)
            }
        }
    }
}

/// The rows of the range on `c` (a full scan: once, for the progress of a migration).
pub async fn count(c: &mut Conn, shape: &Shape) -> mysql_async::Result<u64> {
    let n: Option<u64> = c
        .query_first(format!(
            "SELECT COUNT(*) FROM {} WHERE {}",
            shape.table, shape.slots
        ))
        .await?;
    Ok(n.unwrap_or(0))
}

/// Deletes about `n` rows of the range on `c` after the key `after` (a cursor the caller
/// keeps: without it each batch would scan again every row the batches before passed);
/// how many it deleted. Moves `after` on; a batch that deletes nothing is the end.
pub async fn delete_batch(
    c: &mut Conn,
    shape: &Shape,
    n: usize,
    after: &mut Option<String>,
) -> mysql_async::Result<u64> {
    let hi: Option<mysql_async::Row> = c
        .query_first(format!(
            "SELECT * FROM {} WHERE {}{} ORDER BY {} LIMIT 1 OFFSET {}",
            shape.table,
            shape.slots,
            shape.after(after.as_deref()),
            shape.key_list(),
            n.max(1) - 1
        ))
        .await?;
    let hi = hi.map(|r| shape.cursor_of(&r));
    let delete = format!(
        "DELETE FROM {} WHERE {}{}{}",
        shape.table,
        shape.slots,
        shape.after(after.as_deref()),
        shape.upto(hi.as_deref())
    );
    write(c, &delete, Vec::new(), OnLock::Retry).await?;
    let deleted = c.affected_rows();
    if hi.is_some() {
        *after = hi;
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::moving::{Moving, Which};
    use crate::routing::slot::MoveStep;

    fn shape(table: &str) -> Shape {
        Shape {
            table: format!("`{table}`"),
            name: table.to_string(),
            slots: "CRC32(`id`) % 1024 BETWEEN 0 AND 511".into(),
            key: vec!["`id`".into()],
            key_pos: vec![0],
            key_unsigned: vec![false],
            routing: Some(0),
            by: None,
            moving: Moving {
                which: Which::Slots(0, 511, vec![]),
                from: 0,
                to: 1,
                step: MoveStep::DualWrite,
            },
            columns: vec!["`id`".into(), "`v`".into()],
        }
    }

    #[test]
    fn a_backfill_has_still_to_copy_the_rows_after_its_cursor_and_every_later_table() {
        let shapes = [shape("a"), shape("b"), shape("c")];
        assert_eq!(
            still_to_copy(&shapes, 1, Some("(7)"), Some("(90)")),
            vec![
                None,
                Some("1 AND (`id`) > (7) AND (`id`) <= (90)".to_string()),
                Some("1".to_string()),
            ]
        );
        // Nothing copied of the table yet: every row up to its last key.
        assert_eq!(
            still_to_copy(&shapes, 0, None, Some("(90)"))[0].as_deref(),
            Some("1 AND (`id`) <= (90)")
        );
        // A table that was empty when reached: what it gets since, the log copies.
        assert_eq!(
            still_to_copy(&shapes, 2, None, None),
            vec![None, None, None]
        );
    }
}
