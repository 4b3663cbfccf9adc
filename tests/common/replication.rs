//! MariaDB GTID replication between nodes of a [`Cluster`] started with
//! [`Cluster::shared_binlog`] (every node writes a ROW binary log under its own server id):
//! make a node a read-only replica of another, wait until it has caught up, delay it, stop and
//! start it.
//!
//! Every node of such a cluster ran `CREATE DATABASE IF NOT EXISTS shop` on its own, so each
//! binary log starts with a GTID of the node's own server id in domain 0 (`0-<id>-1`).
//! [`replicate`] clears the replica's own binary log and replication position and replicates
//! with `MASTER_USE_GTID=slave_pos` from the primary's first event: the primary's
//! `CREATE DATABASE IF NOT EXISTS shop` is a no-op on the replica, and the replica's own GTIDs
//! are never asked of the primary (as `current_pos` would, which the primary does not have:
//! error 1236).

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Row, Value};

use super::Cluster;

/// How long [`replicate`] waits for a new replica to run and catch up.
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// A root connection to node `i` (no default database).
async fn root(c: &Cluster, i: usize) -> Conn {
    let url = c.root_url(i, "");
    Conn::new(Opts::from_url(&url).expect("node URL"))
        .await
        .unwrap_or_else(|e| panic!("connect to node {i} ({url}): {e}"))
}

/// Runs `sql` on `conn` (node `i`), panicking with the statement and the error.
async fn run(conn: &mut Conn, i: usize, sql: &str) {
    conn.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("node {i}: {sql}: {e}"));
}

/// A global string variable (`@@gtid_binlog_pos`, ...) of `conn` (node `i`).
async fn global(conn: &mut Conn, i: usize, var: &str) -> String {
    let v: Option<String> = conn
        .query_first(format!("SELECT @@GLOBAL.{var}"))
        .await
        .unwrap_or_else(|e| panic!("node {i}: SELECT @@GLOBAL.{var}: {e}"));
    v.unwrap_or_default()
}

fn text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::NULL) => "NULL".to_string(),
        Some(Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(other) => format!("{other:?}"),
    }
}

/// `SHOW SLAVE STATUS` of node `i` as `(column, value)` pairs; empty when it replicates from
/// nothing.
async fn slave_status(conn: &mut Conn, i: usize) -> Vec<(String, String)> {
    let row: Option<Row> = conn
        .query_first("SHOW SLAVE STATUS")
        .await
        .unwrap_or_else(|e| panic!("node {i}: SHOW SLAVE STATUS: {e}"));
    let Some(row) = row else {
        return Vec::new();
    };
    row.columns_ref()
        .iter()
        .enumerate()
        .map(|(k, col)| (col.name_str().into_owned(), text(row.as_ref(k))))
        .collect()
}

fn field<'a>(status: &'a [(String, String)], name: &str) -> &'a str {
    status
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

/// Can replication (as `SHOW SLAVE STATUS` shows it) not go on by itself: none configured, the
/// SQL thread stopped on an error, or the I/O thread gave up (e.g. error 1236, a position the
/// primary lacks)? A stopped or still connecting replica is not broken.
fn broken(status: &[(String, String)]) -> bool {
    status.is_empty()
        || field(status, "Last_SQL_Errno") != "0"
        || (field(status, "Slave_IO_Running") == "No" && field(status, "Last_IO_Errno") != "0")
}

/// What a replication failure message shows: the replica's slave status, its GTID positions
/// and the tail of its error log.
async fn details(c: &Cluster, conn: &mut Conn, replica: usize) -> String {
    let status = slave_status(conn, replica).await;
    let mut s = format!(
        "node {replica}: @@gtid_slave_pos = '{}', @@gtid_binlog_pos = '{}'\n\
         --- SHOW SLAVE STATUS ---\n",
        global(conn, replica, "gtid_slave_pos").await,
        global(conn, replica, "gtid_binlog_pos").await,
    );
    if status.is_empty() {
        s.push_str("(empty: no replication configured)\n");
    }
    for (k, v) in &status {
        s.push_str(&format!("{k}: {v}\n"));
    }
    s.push_str(&c.log_tail(replica));
    s
}

/// Makes node `replica` a GTID replica of node `primary` (127.0.0.1, its port, root/root),
/// replicating the primary's whole binary log from its first event, and `read_only`. Whatever
/// replication the replica had is dropped, and so are its own binary log and replication
/// position (`RESET MASTER`: a node that feeds replicas must not be made a replica). Returns
/// once both replication threads run and the replica has applied the primary's current
/// `@@gtid_binlog_pos`; panics with the replica's `SHOW SLAVE STATUS` after 30 s.
pub async fn replicate(c: &Cluster, replica: usize, primary: usize) {
    assert_ne!(replica, primary, "a node cannot replicate from itself");
    let mut conn = root(c, replica).await;
    run(&mut conn, replica, "STOP SLAVE").await;
    run(&mut conn, replica, "RESET SLAVE ALL").await;
    // The replica's own GTIDs (its `CREATE DATABASE shop`, 0-<its id>-1) out of its binary
    // log, and no replication position left over from an earlier primary: `slave_pos` then
    // asks the primary for its binary log from the start.
    run(&mut conn, replica, "RESET MASTER").await;
    run(&mut conn, replica, "SET GLOBAL gtid_slave_pos = ''").await;
    run(
        &mut conn,
        replica,
        &format!(
            "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = {}, \
             MASTER_USER = 'root', MASTER_PASSWORD = 'root', MASTER_CONNECT_RETRY = 1, \
             MASTER_USE_GTID = slave_pos",
            c.ports[primary]
        ),
    )
    .await;
    run(&mut conn, replica, "SET GLOBAL read_only = 1").await;
    run(&mut conn, replica, "START SLAVE").await;

    let deadline = Instant::now() + SETUP_TIMEOUT;
    loop {
        let status = slave_status(&mut conn, replica).await;
        let io = field(&status, "Slave_IO_Running");
        let sql = field(&status, "Slave_SQL_Running");
        if io == "Yes" && sql == "Yes" {
            break;
        }
        let failed = sql == "No" || broken(&status);
        if failed || Instant::now() > deadline {
            panic!(
                "node {replica} does not replicate from node {primary} (port {}){}:\n{}",
                c.ports[primary],
                if failed { "" } else { " within 30s" },
                details(c, &mut conn, replica).await
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    conn.disconnect().await.ok();
    caught_up(
        c,
        replica,
        primary,
        deadline.saturating_duration_since(Instant::now()),
    )
    .await;
}

/// Waits until node `replica` has applied everything node `primary` has logged so far (the
/// primary's `@@gtid_binlog_pos`, awaited with `MASTER_GTID_WAIT` on the replica); panics with
/// the replica's `SHOW SLAVE STATUS` after `timeout`.
pub async fn caught_up(c: &Cluster, replica: usize, primary: usize, timeout: Duration) {
    let mut p = root(c, primary).await;
    let pos = global(&mut p, primary, "gtid_binlog_pos").await;
    p.disconnect().await.ok();
    let mut conn = root(c, replica).await;
    let deadline = Instant::now() + timeout;
    loop {
        // In short waits, so that a replica whose SQL thread stopped on an error fails at once.
        let left = deadline.saturating_duration_since(Instant::now());
        let secs = left
            .min(Duration::from_millis(250))
            .as_secs_f64()
            .max(0.001);
        let waited: Option<i64> = conn
            .exec_first("SELECT MASTER_GTID_WAIT(?, ?)", (pos.as_str(), secs))
            .await
            .unwrap_or_else(|e| panic!("node {replica}: MASTER_GTID_WAIT('{pos}'): {e}"));
        if waited == Some(0) {
            break;
        }
        let status = slave_status(&mut conn, replica).await;
        let failed = broken(&status);
        if failed || Instant::now() >= deadline {
            panic!(
                "node {replica} did not apply node {primary}'s @@gtid_binlog_pos '{pos}'{}:\n{}",
                if failed {
                    String::new()
                } else {
                    format!(" within {:.1}s", timeout.as_secs_f64())
                },
                details(c, &mut conn, replica).await
            );
        }
    }
    conn.disconnect().await.ok();
}

/// Makes node `replica` apply each event `secs` seconds after the primary logged it
/// (`CHANGE MASTER TO MASTER_DELAY`, between `STOP SLAVE` and `START SLAVE` as MariaDB
/// requires); 0 ends the delay. The primary's event times have whole seconds, so an event is
/// applied between `secs` and `secs + 1` seconds after its statement started.
pub async fn set_delay(c: &Cluster, replica: usize, secs: u32) {
    let mut conn = root(c, replica).await;
    run(&mut conn, replica, "STOP SLAVE").await;
    run(
        &mut conn,
        replica,
        &format!("CHANGE MASTER TO MASTER_DELAY = {secs}"),
    )
    .await;
    run(&mut conn, replica, "START SLAVE").await;
    conn.disconnect().await.ok();
}

/// Stops both replication threads of node `replica` (`STOP SLAVE`); it keeps its position.
pub async fn stop_replication(c: &Cluster, replica: usize) {
    let mut conn = root(c, replica).await;
    run(&mut conn, replica, "STOP SLAVE").await;
    conn.disconnect().await.ok();
}

/// Starts node `replica`'s replication threads again (`START SLAVE`), from where they stopped.
pub async fn start_replication(c: &Cluster, replica: usize) {
    let mut conn = root(c, replica).await;
    run(&mut conn, replica, "START SLAVE").await;
    conn.disconnect().await.ok();
}

/// Node `i`'s `@@server_id` (`i + 1` in a binlog cluster).
pub async fn server_id(c: &Cluster, i: usize) -> u32 {
    let mut conn = root(c, i).await;
    let id: Option<u32> = conn
        .query_first("SELECT @@server_id")
        .await
        .unwrap_or_else(|e| panic!("node {i}: SELECT @@server_id: {e}"));
    conn.disconnect().await.ok();
    id.unwrap_or_else(|| panic!("node {i}: no @@server_id"))
}
