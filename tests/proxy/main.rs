//! Integration tests through the proxy, against 4 real MariaDB nodes.
//!
//! Every test starts its own proxy over the binary's shared cluster and uses its own tables,
//! so the tests run concurrently. Sharded tables use `hash_slot` on `user_id` with slots
//! 0-255 on ds0, 256-511 on ds1, 512-767 on ds2, 768-1023 on ds3.

#[path = "../common/mod.rs"]
mod common;

mod connections;
mod dump;
mod hot;
mod placements;
mod session;
mod statements;
mod tools;
mod unique;
mod variables;
mod wire;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Pool, Row, Value};
use shardproxy::routing::slot::slot_of;

const NODES: usize = 4;
const L: [(u16, u16); 4] = FOUR_NODES;

fn cluster() -> &'static Cluster {
    Cluster::shared(NODES)
}

fn sharded(table: &str) -> String {
    hash_slot_table(table, "user_id", &L)
}

async fn direct_conn(c: &Cluster, node: usize) -> (Pool, Conn) {
    let pool = c.direct(node);
    let conn = pool.get_conn().await.expect("connect to a node directly");
    (pool, conn)
}

async fn table_exists(c: &Cluster, node: usize, table: &str) -> bool {
    let (_pool, mut conn) = direct_conn(c, node).await;
    let n: Option<i64> = conn
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'shop' AND table_name = ?",
            (table,),
        )
        .await
        .expect("information_schema");
    n == Some(1)
}

/// `(user_id, v)` rows of a table read directly on one node, ordered by key.
async fn direct_rows(c: &Cluster, node: usize, table: &str) -> Vec<(i64, String)> {
    let (_pool, mut conn) = direct_conn(c, node).await;
    conn.query(format!("SELECT user_id, v FROM {table} ORDER BY user_id"))
        .await
        .expect("direct read")
}

/// Integer keys: `per_node` keys on each node, interleaved node by node.
fn spread_keys(per_node: usize, skip: usize) -> Vec<i64> {
    let by_node: Vec<Vec<i64>> = (0..NODES)
        .map(|n| keys_on_node(&L, n, skip + per_node)[skip..].to_vec())
        .collect();
    let mut out = Vec::new();
    for j in 0..per_node {
        for keys in &by_node {
            out.push(keys[j]);
        }
    }
    out
}

/// A negative integer key on `node`.
fn negative_key_on(node: usize) -> i64 {
    (1..)
        .map(|k: i64| -k)
        .find(|k| node_of_key(&L, *k) == node)
        .expect("a negative key")
}

fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// `sql` fed to the `mariadb` CLI as `app` through the proxy on `port`, database `db` (a
/// dump restored, a demo file loaded); `what` names it when it fails.
fn mariadb_feed(port: u16, db: &str, sql: &[u8], what: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new("mariadb")
        .args(["-h127.0.0.1", &format!("-P{port}"), "-uapp", "-papp", db])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run mariadb");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(sql)
        .expect("feed mariadb");
    let out = child.wait_with_output().expect("mariadb ends");
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Each database made anew, empty, on every node.
async fn emptied(c: &Cluster, dbs: &[&str]) {
    for node in 0..NODES {
        let (_pool, mut conn) = direct_conn(c, node).await;
        for db in dbs {
            conn.query_drop(format!("DROP DATABASE IF EXISTS {db}"))
                .await
                .expect("drop");
            conn.query_drop(format!("CREATE DATABASE {db}"))
                .await
                .expect("create");
        }
    }
}

/// Each database dropped on every node (a test's own, at its end).
async fn dropped(c: &Cluster, dbs: &[&str]) {
    for node in 0..NODES {
        let (_pool, mut conn) = direct_conn(c, node).await;
        for db in dbs {
            let _ = conn
                .query_drop(format!("DROP DATABASE IF EXISTS {db}"))
                .await;
        }
    }
}
