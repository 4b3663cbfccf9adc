//! Test hooks: the points where a test stops or breaks the proxy on purpose, to reach a state
//! no client can reach from outside — a panic under one client's command, a two-phase commit
//! stopped between its steps (to kill the proxy there), a migration batch held between its
//! read and its write (to run a client's write in that gap).
//!
//! They exist only with the `test-hooks` cargo feature, which `scripts/test.sh` (and so CI)
//! turns on. A build without it, every release build, has none of them: the functions below
//! do nothing, read no environment, and compile away where they are called. The tests that
//! need a hook are ignored without the feature, saying so.

/// With `SHARDPROXY_TEST_PANIC` set in its environment, the proxy panics on this exact
/// statement (a panic must end one client only).
#[cfg(feature = "test-hooks")]
const PANIC_STATEMENT: &str = "/* shardproxy: test panic */";

/// Panics when `sql` asks for it (see [`PANIC_STATEMENT`]).
#[inline]
pub fn panic_if_asked(sql: &str) {
    #[cfg(feature = "test-hooks")]
    if sql == PANIC_STATEMENT && std::env::var_os("SHARDPROXY_TEST_PANIC").is_some() {
        panic!("the test statement asked for a panic");
    }
    let _ = sql;
}

/// `SHARDPROXY_XA_HOLD=prepared` (or `decided`) in the proxy's environment stops every
/// two-phase commit at that point, for good, so a test can kill the proxy there.
pub async fn xa_hold(point: &str) {
    #[cfg(feature = "test-hooks")]
    if std::env::var("SHARDPROXY_XA_HOLD").is_ok_and(|v| v == point) {
        tracing::warn!("SHARDPROXY_XA_HOLD={point}: this commit stops here (a test hook)");
        std::future::pending::<()>().await;
    }
    let _ = point;
}

/// `SHARDPROXY_MIGRATION_HOLD=frozen` in the proxy's environment stops its migration driver
/// for good once a move's freeze is acknowledged, before the target owns the slots, so a
/// test can kill the driver there.
pub async fn migration_hold(point: &str) {
    #[cfg(feature = "test-hooks")]
    if std::env::var("SHARDPROXY_MIGRATION_HOLD").is_ok_and(|v| v == point) {
        tracing::warn!("SHARDPROXY_MIGRATION_HOLD={point}: the driver stops here (a test hook)");
        std::future::pending::<()>().await;
    }
    let _ = point;
}

#[cfg(feature = "test-hooks")]
mod batches {
    use std::sync::Mutex;

    /// The table whose migration batches wait, and how long each waits.
    pub static HOLD: Mutex<Option<(String, std::time::Duration)>> = Mutex::new(None);
    /// The table one of whose batches is waiting now.
    pub static HOLDING: Mutex<Option<String>> = Mutex::new(None);

    pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// From now on every backfill batch of `table`'s migration (in this process) waits `hold`
/// between reading and locking its rows on the source and writing them to the target;
/// `None` ends that. Other tables' batches never wait, so tests moving other tables beside
/// it are not slowed or confused.
pub fn hold_migration_batches(table: &str, hold: Option<std::time::Duration>) {
    #[cfg(feature = "test-hooks")]
    {
        *batches::lock(&batches::HOLD) = hold.map(|d| (table.to_string(), d));
    }
    let _ = (table, hold);
}

/// Is a batch of `table`'s migration waiting between its read and its write now?
#[cfg(feature = "test-hooks")]
pub fn migration_batch_held(table: &str) -> bool {
    batches::lock(&batches::HOLDING).as_deref() == Some(table)
}

/// Is a batch of `table`'s migration waiting between its read and its write now? (Never,
/// without the `test-hooks` feature.)
#[cfg(not(feature = "test-hooks"))]
pub fn migration_batch_held(_table: &str) -> bool {
    false
}

/// Where a batch of `table` (its name as the node reads it, backquoted or not) has read its
/// rows: waits while [`hold_migration_batches`] asks it to.
pub async fn migration_batch_read(table: &str) {
    #[cfg(feature = "test-hooks")]
    {
        let table = table.trim_matches('`');
        let hold = batches::lock(&batches::HOLD)
            .as_ref()
            .filter(|(t, _)| t == table)
            .map(|(_, d)| *d);
        if let Some(d) = hold {
            *batches::lock(&batches::HOLDING) = Some(table.to_string());
            tokio::time::sleep(d).await;
            *batches::lock(&batches::HOLDING) = None;
        }
    }
    let _ = table;
}

#[cfg(feature = "test-hooks")]
mod upserts {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;

    /// The table whose upserts wait after reading their rows, and how long each waits.
    pub static HOLD: Mutex<Option<(String, std::time::Duration)>> = Mutex::new(None);
    /// How many upserts wait there now.
    pub static HOLDING: AtomicUsize = AtomicUsize::new(0);
}

/// From now on every upsert (REPLACE, INSERT IGNORE, ON DUPLICATE KEY UPDATE) of `table`,
/// a table with global indexes, in this process waits `hold` once it has read its rows
/// and before its write, so a test can run another write in that gap; `None` ends that
/// (an upsert waiting already waits its whole time).
pub fn hold_upserts(table: &str, hold: Option<std::time::Duration>) {
    #[cfg(feature = "test-hooks")]
    {
        *batches::lock(&upserts::HOLD) = hold.map(|d| (table.to_string(), d));
    }
    let _ = (table, hold);
}

/// How many upserts wait between their read and their write now (never any without the
/// `test-hooks` feature).
pub fn upserts_held() -> usize {
    #[cfg(feature = "test-hooks")]
    {
        upserts::HOLDING.load(std::sync::atomic::Ordering::SeqCst)
    }
    #[cfg(not(feature = "test-hooks"))]
    0
}

/// Where an upsert of `table` has read its rows: waits while [`hold_upserts`] asks it to.
pub async fn upsert_read(table: &str) {
    #[cfg(feature = "test-hooks")]
    {
        use std::sync::atomic::Ordering::SeqCst;
        let hold = batches::lock(&upserts::HOLD)
            .as_ref()
            .filter(|(t, _)| t == table)
            .map(|(_, d)| *d);
        if let Some(d) = hold {
            upserts::HOLDING.fetch_add(1, SeqCst);
            tokio::time::sleep(d).await;
            upserts::HOLDING.fetch_sub(1, SeqCst);
        }
    }
    let _ = table;
}
