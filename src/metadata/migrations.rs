//! The migrations' state in the metadata schema: one row per migration
//! (`shard_migrations`), one row per proxy with its heartbeat (`shard_proxies`), and the slot
//! map rows (`shard_slot_map`) whose versions every proxy applies.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Pool, TxOpts};

use super::schema::FENCE;

/// The steps a migration can be aborted from (past them the target owns the slots).
pub const ABORTABLE: [&str; 6] = [
    "prepare",
    "dual_write",
    "backfill",
    "verify",
    "ready",
    "cutover",
];

/// The steps a migration's row goes through (`SHOW MIGRATIONS`).
pub const ACTIVE: [&str; 8] = [
    "prepare",
    "dual_write",
    "backfill",
    "verify",
    "ready",
    "cutover",
    "cleanup",
    "aborting",
];

/// A `shard_migrations` row.
#[derive(Debug, Clone, PartialEq)]
pub struct Migration {
    pub id: u64,
    pub table: String,
    pub first: u16,
    pub last: u16,
    pub source: String,
    pub target: String,
    pub step: String,
    pub rate: u64,
    pub auto_cutover: bool,
    pub copied: u64,
    pub rows_estimate: u64,
    /// A directory table's key (a tenant) moving, instead of slots.
    pub key: Option<String>,
    pub rows_per_sec: f64,
    pub cursor: Option<String>,
    pub chunks_verified: u64,
    pub chunks_differing: u64,
    pub failures_seen: u64,
    pub cleaned: u64,
    pub message: Option<String>,
    /// The rebalance plan it is a move of (`super::rebalance`), and its place there.
    pub plan: Option<u64>,
    pub seq: Option<u32>,
    /// How the target gets the writes made while the rows move: `binlog` (copied from the
    /// source's binary log by the driver) or `images` (dual writes); `None` until the
    /// prepare step chose.
    pub capture: Option<String>,
    /// With `binlog`: the source's binary log position (`file:pos`) up to which every
    /// change is on the target.
    pub binlog_pos: Option<String>,
    /// `first..=last` are buckets of the salted key `key` (`SALT KEY`, a drain), not slots.
    pub salted_buckets: bool,
    /// A range of a range table moves (`MIGRATE RANGE`): range number `first` (from 0, the
    /// same as `last`), whose lowest key is `key` (`None`: the first range).
    pub range_move: bool,
}

impl Migration {
    /// A migration to insert (its progress at zero).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        table: String,
        first: u16,
        last: u16,
        key: Option<String>,
        source: String,
        target: String,
        rate: u64,
        auto_cutover: bool,
    ) -> Migration {
        Migration {
            id: 0,
            table,
            first,
            last,
            source,
            target,
            step: "prepare".into(),
            rate,
            auto_cutover,
            copied: 0,
            rows_estimate: 0,
            key,
            rows_per_sec: 0.0,
            cursor: None,
            chunks_verified: 0,
            chunks_differing: 0,
            failures_seen: 0,
            cleaned: 0,
            message: None,
            plan: None,
            seq: None,
            capture: None,
            binlog_pos: None,
            salted_buckets: false,
            range_move: false,
        }
    }

    /// A move of range `index` of a range table, whose lowest key is `lo` (the word the
    /// admin reads it as; `None` for the first range).
    pub fn of_range(
        table: String,
        index: u16,
        lo: Option<String>,
        source: String,
        target: String,
        rate: u64,
        auto_cutover: bool,
    ) -> Migration {
        Migration {
            range_move: true,
            ..Migration::new(table, index, index, lo, source, target, rate, auto_cutover)
        }
    }

    /// The same move, of buckets `first..=last` of its salted key.
    pub fn of_buckets(mut self) -> Migration {
        self.salted_buckets = true;
        self
    }

    /// Is it a move of a salted key's buckets `first..=last`?
    pub fn buckets(&self) -> bool {
        self.key.is_some() && self.salted_buckets && !self.range_move
    }

    /// What moves, for messages: `slots a-b` or `key 'v'`.
    pub fn what(&self) -> String {
        if self.range_move {
            return self.slots_text();
        }
        match &self.key {
            Some(_) => self.slots_text(),
            None => format!("slots {}", self.slots_text()),
        }
    }

    /// What moves, for the admin's rows: `a-b` or `key 'v'`.
    pub fn slots_text(&self) -> String {
        if self.range_move {
            return match &self.key {
                Some(k) => format!("range from '{k}'"),
                None => "the first range".to_string(),
            };
        }
        match &self.key {
            Some(k) if self.buckets() => {
                format!("key '{k}' buckets {}-{}", self.first, self.last)
            }
            Some(k) => format!("key '{k}'"),
            None => format!("{}-{}", self.first, self.last),
        }
    }

    /// The tables it moves (`table_name` lists tables sharded alike, comma-separated: they
    /// move together so joins on their shard keys stay on one node).
    pub fn tables(&self) -> Vec<String> {
        self.table
            .split(',')
            .map(|t| t.trim().to_string())
            .collect()
    }
}

const COLUMNS: &str = "id, table_name, first_slot, last_slot, source, target, step, rate, auto_cutover, \
     copied, rows_per_sec, cursor_key, chunks_verified, chunks_differing, failures_seen, cleaned, message, rows_estimate, key_value, plan_id, seq, capture, binlog_pos, salted_buckets, range_move";

fn from_row(mut r: mysql_async::Row) -> Option<Migration> {
    Some(Migration {
        id: r.take(0)?,
        table: r.take(1)?,
        first: r.take(2)?,
        last: r.take(3)?,
        source: r.take(4)?,
        target: r.take(5)?,
        step: r.take(6)?,
        rate: r.take(7)?,
        auto_cutover: r.take::<i64, _>(8)? != 0,
        copied: r.take(9)?,
        rows_per_sec: r.take(10)?,
        cursor: r.take(11)?,
        chunks_verified: r.take(12)?,
        chunks_differing: r.take(13)?,
        failures_seen: r.take(14)?,
        cleaned: r.take(15)?,
        message: r.take(16)?,
        rows_estimate: r.take(17)?,
        key: r.take(18)?,
        plan: r.take(19)?,
        seq: r.take(20)?,
        capture: r.take(21)?,
        binlog_pos: r.take(22)?,
        salted_buckets: r.take::<i64, _>(23)? != 0,
        range_move: r.take::<i64, _>(24)? != 0,
    })
}

pub async fn create(pool: &Pool) -> mysql_async::Result<()> {
    let mut c = pool.get_conn().await?;
    super::ensure_schema(&mut c).await
}

/// Every migration, newest first.
pub async fn list(c: &mut Conn) -> mysql_async::Result<Vec<Migration>> {
    let rows: Vec<mysql_async::Row> = c
        .query(format!(
            "SELECT {COLUMNS} FROM shard_migrations ORDER BY id DESC"
        ))
        .await?;
    Ok(rows.into_iter().filter_map(from_row).collect())
}

pub async fn get(c: &mut Conn, id: u64) -> mysql_async::Result<Option<Migration>> {
    let rows: Vec<mysql_async::Row> = c
        .exec(
            format!("SELECT {COLUMNS} FROM shard_migrations WHERE id = ?"),
            (id,),
        )
        .await?;
    Ok(rows.into_iter().find_map(from_row))
}

/// The migrations not finished, oldest first.
pub async fn active(c: &mut Conn) -> mysql_async::Result<Vec<Migration>> {
    let rows: Vec<mysql_async::Row> = c
        .query(format!(
            "SELECT {COLUMNS} FROM shard_migrations WHERE step IN ({}) ORDER BY id",
            literals(&ACTIVE)
        ))
        .await?;
    Ok(rows.into_iter().filter_map(from_row).collect())
}

/// A rebalance plan's moves, in their order.
pub async fn of_plan(c: &mut Conn, plan: u64) -> mysql_async::Result<Vec<Migration>> {
    let rows: Vec<mysql_async::Row> = c
        .exec(
            format!("SELECT {COLUMNS} FROM shard_migrations WHERE plan_id = ? ORDER BY seq, id"),
            (plan,),
        )
        .await?;
    Ok(rows.into_iter().filter_map(from_row).collect())
}

/// A new migration at its step (`prepare`, or `queued` in a plan); its id.
pub async fn insert<C: Queryable>(c: &mut C, m: &Migration) -> mysql_async::Result<u64> {
    c.exec_drop(
        "INSERT INTO shard_migrations (table_name, first_slot, last_slot, key_value, source, target, step, rate, auto_cutover, plan_id, seq, salted_buckets, range_move) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        mysql_async::Params::Positional(vec![
            m.table.as_str().into(),
            m.first.into(),
            m.last.into(),
            m.key.as_deref().into(),
            m.source.as_str().into(),
            m.target.as_str().into(),
            m.step.as_str().into(),
            m.rate.into(),
            m.auto_cutover.into(),
            m.plan.into(),
            m.seq.into(),
            m.salted_buckets.into(),
            m.range_move.into(),
        ]),
    )
    .await?;
    let id: Option<u64> = c.query_first("SELECT LAST_INSERT_ID()").await?;
    Ok(id.unwrap_or(0))
}

/// `a, b, ...`: each word as a literal of the proxy's writer (for `IN (...)`).
pub(super) fn literals(words: &[&str]) -> String {
    let list: Vec<String> = words
        .iter()
        .map(|s| crate::sql::write::text_literal(s))
        .collect();
    list.join(", ")
}

/// Moves a migration from one of `from` to `to` (the admin's CUTOVER and ABORT); whether it
/// did.
pub async fn transition(
    c: &mut Conn,
    id: u64,
    from: &[&str],
    to: &str,
) -> mysql_async::Result<bool> {
    c.exec_drop(
        format!(
            "UPDATE shard_migrations SET step = ? WHERE id = ? AND step IN ({}) AND {FENCE}",
            literals(from)
        ),
        (to, id),
    )
    .await?;
    Ok(c.affected_rows() > 0)
}

/// The migration's step, read again (an admin may have changed it).
pub async fn step(c: &mut Conn, id: u64) -> mysql_async::Result<Option<String>> {
    c.exec_first("SELECT step FROM shard_migrations WHERE id = ?", (id,))
        .await
}

pub async fn set_step(
    c: &mut Conn,
    id: u64,
    step: &str,
    message: Option<&str>,
) -> mysql_async::Result<()> {
    c.exec_drop(
        format!("UPDATE shard_migrations SET step = ?, message = ? WHERE id = ? AND {FENCE}"),
        (step, message, id),
    )
    .await
}

pub async fn set_message(c: &mut Conn, id: u64, message: &str) -> mysql_async::Result<()> {
    c.exec_drop(
        format!("UPDATE shard_migrations SET message = ? WHERE id = ? AND {FENCE}"),
        (message, id),
    )
    .await
}

/// One more version of the slot map: the migration's slots at `state` (`stable` with no
/// target, or a move step toward `target`) with `node` their owner of record, and the
/// migration from step `expected` to `step`, in one transaction. `None` (nothing written)
/// when the migration is no longer at `expected` (an ABORT came first). The version is above
/// `floor` (the running rules' version).
#[allow(clippy::too_many_arguments)]
pub async fn write_version(
    c: &mut Conn,
    m: &Migration,
    node: &str,
    state: &str,
    target: Option<&str>,
    step: &str,
    expected: &str,
    floor: u64,
) -> mysql_async::Result<Option<u64>> {
    super::lock_versions(c).await?;
    let r = version_under_lock(c, m, node, state, target, step, expected, floor).await;
    super::unlock_versions(c).await;
    r
}

#[allow(clippy::too_many_arguments)]
async fn version_under_lock(
    c: &mut Conn,
    m: &Migration,
    node: &str,
    state: &str,
    target: Option<&str>,
    step: &str,
    expected: &str,
    floor: u64,
) -> mysql_async::Result<Option<u64>> {
    let mut tx = c.start_transaction(TxOpts::default()).await?;
    let now: Option<String> = tx
        .exec_first(
            "SELECT step FROM shard_migrations WHERE id = ? FOR UPDATE",
            (m.id,),
        )
        .await?;
    if now.as_deref() != Some(expected) {
        tx.rollback().await?;
        return Ok(None);
    }
    // The lease, read under a shared lock: a proxy taking it over waits for this commit.
    let token: Option<Option<u64>> = tx
        .query_first("SELECT token FROM shard_driver WHERE id = 1 LOCK IN SHARE MODE")
        .await?;
    let mine: Option<Option<u64>> = tx.query_first("SELECT @shardproxy_token").await?;
    if let Some(Some(mine)) = mine {
        if token.flatten() != Some(mine) {
            tx.rollback().await?;
            return Err(mysql_async::Error::Other(
                "this proxy's lease on the migrations was taken over: it drives no more".into(),
            ));
        }
    }
    tx.exec_drop(
        "UPDATE shard_migrations SET step = ?, message = NULL WHERE id = ?",
        (step, m.id),
    )
    .await?;
    let v: Option<u64> = tx.query_first(super::schema::VERSION_SQL).await?;
    // Above the metadata's versions and the running rules' (a rules file's own version
    // may be higher than anything the metadata holds yet).
    let v = v.unwrap_or(0).max(floor) + 1;
    if m.range_move {
        let table = m.tables().into_iter().next().unwrap_or_default();
        super::ranges::write_step(&mut tx, &table, m.first, node, state, target, v).await?;
        tx.commit().await?;
        return Ok(Some(v));
    }
    if let Some(key) = &m.key {
        // Buckets `first..=last` of a salted key: their rows.
        if m.buckets() {
            let table = m.tables().into_iter().next().unwrap_or_default();
            super::salted::write_step(
                &mut tx, &table, key, m.first, m.last, node, state, target, v,
            )
            .await?;
            tx.commit().await?;
            return Ok(Some(v));
        }
        // A key (a directory's tenant, a hash_slot table's split key): its row in each
        // table (an entry once stable).
        for table in m.tables() {
            tx.exec_drop(
                "INSERT INTO directory_map (table_name, key_value, node, state, target_node, version) \
                 VALUES (?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE node = VALUES(node), \
                 state = VALUES(state), target_node = VALUES(target_node), version = VALUES(version)",
                (&table, key, node, state, target, v),
            )
            .await?;
        }
        tx.commit().await?;
        return Ok(Some(v));
    }
    for table in m.tables() {
        tx.exec_drop(
            "UPDATE shard_slot_map SET node = ?, state = ?, target_node = ?, version = ? \
             WHERE table_name = ? AND slot_id BETWEEN ? AND ?",
            (node, state, target, v, &table, m.first, m.last),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(Some(v))
}

/// How the move's target gets the writes made meanwhile (`binlog` or `images`), and for
/// `binlog` the source's log position the capture starts from.
pub async fn set_capture(
    c: &mut Conn,
    id: u64,
    capture: &str,
    pos: Option<&str>,
) -> mysql_async::Result<()> {
    c.exec_drop(
        format!("UPDATE shard_migrations SET capture = ?, binlog_pos = ? WHERE id = ? AND {FENCE}"),
        (capture, pos, id),
    )
    .await
}

/// The source's log position up to which every change of the moving rows is on the target.
pub async fn set_binlog_pos(c: &mut Conn, id: u64, pos: &str) -> mysql_async::Result<()> {
    c.exec_drop(
        format!("UPDATE shard_migrations SET binlog_pos = ? WHERE id = ? AND {FENCE}"),
        (pos, id),
    )
    .await
}

pub async fn progress(
    c: &mut Conn,
    id: u64,
    copied: u64,
    rows_per_sec: f64,
    cursor: Option<&str>,
) -> mysql_async::Result<()> {
    c.exec_drop(
        format!("UPDATE shard_migrations SET copied = ?, rows_per_sec = ?, cursor_key = ? WHERE id = ? AND {FENCE}"),
        (copied, rows_per_sec, cursor, id),
    )
    .await
}

pub async fn verified(
    c: &mut Conn,
    id: u64,
    chunks: u64,
    differing: u64,
    cursor: Option<&str>,
) -> mysql_async::Result<()> {
    c.exec_drop(
        format!("UPDATE shard_migrations SET chunks_verified = ?, chunks_differing = ?, cursor_key = ? WHERE id = ? AND {FENCE}"),
        (chunks, differing, cursor, id),
    )
    .await
}

/// A counter of the migration's row.
#[derive(Debug, Clone, Copy)]
pub enum Count {
    /// The rows the range held on the source when it began (progress bars).
    Estimate,
    /// Rows the cleanup deleted.
    Cleaned,
    /// The proxies' failed image writes when the verify began.
    FailuresSeen,
}

pub async fn set_count(c: &mut Conn, id: u64, which: Count, n: u64) -> mysql_async::Result<()> {
    let column = match which {
        Count::Estimate => "rows_estimate",
        Count::Cleaned => "cleaned",
        Count::FailuresSeen => "failures_seen",
    };
    c.exec_drop(
        format!("UPDATE shard_migrations SET {column} = ? WHERE id = ? AND {FENCE}"),
        (n, id),
    )
    .await
}

/// This proxy's heartbeat: the rules version it runs, the nodes its running dual writes
/// write images to (none: it is quiet), the row images it failed to write, and the version
/// it is settled on (no command begun under an older one still runs).
pub async fn heartbeat(
    pool: &Pool,
    proxy: &str,
    version: u64,
    busy: &[String],
    failures: u64,
    settled: u64,
) -> mysql_async::Result<()> {
    let mut c = pool.get_conn().await?;
    c.exec_drop(
        "INSERT INTO shard_proxies (proxy_id, version, quiet, busy, shadow_failures, settled, heartbeat) \
         VALUES (?, ?, ?, ?, ?, ?, NOW(3)) ON DUPLICATE KEY UPDATE version = VALUES(version), \
         quiet = VALUES(quiet), busy = VALUES(busy), shadow_failures = VALUES(shadow_failures), \
         settled = VALUES(settled), heartbeat = NOW(3)",
        (proxy, version, busy.is_empty(), busy.join(","), failures, settled),
    )
    .await
}

/// The live proxies (heartbeat within `window_ms`) not settled on `version` yet: their
/// names.
pub async fn unsettled(
    c: &mut Conn,
    version: u64,
    window_ms: u64,
) -> mysql_async::Result<Vec<String>> {
    c.exec(
        "SELECT proxy_id FROM shard_proxies WHERE heartbeat > NOW(3) - INTERVAL ? MICROSECOND \
         AND settled < ? ORDER BY proxy_id",
        (window_ms * 1000, version),
    )
    .await
}

/// A proxy's last heartbeat.
#[derive(Debug, Clone, PartialEq)]
pub struct Beat {
    pub proxy: String,
    pub version: u64,
    /// The target nodes of the dual writes it ran.
    pub busy: Vec<String>,
    pub failures: u64,
}

/// The proxies that heartbeated within `window_ms`.
pub async fn live(c: &mut Conn, window_ms: u64) -> mysql_async::Result<Vec<Beat>> {
    let rows: Vec<(String, u64, i64, String, u64)> = c
        .exec(
            "SELECT proxy_id, version, quiet, busy, shadow_failures FROM shard_proxies \
             WHERE heartbeat > NOW(3) - INTERVAL ? MICROSECOND ORDER BY proxy_id",
            (window_ms * 1000,),
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|(proxy, version, quiet, busy, failures)| Beat {
            proxy,
            version,
            busy: match (quiet != 0, busy.is_empty()) {
                (true, _) => Vec::new(),
                // A proxy from before targets were named: busy toward every node.
                (false, true) => vec!["*".into()],
                (false, false) => busy.split(',').map(str::to_string).collect(),
            },
            failures,
        })
        .collect())
}
