//! Read replicas: real MariaDB GTID replication between nodes of a binlog cluster
//! (tests/common/replication.rs). Its own test binary: nodes 1 and 2 replicate node 0, node 4
//! replicates node 3. `guards.rs`: what must never happen (a wrong replica read, a write there).

#[path = "../common/mod.rs"]
mod common;
mod guards;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::replication::*;
use common::*;
use mysql_async::prelude::Queryable;

fn cluster() -> &'static Cluster {
    Cluster::shared_binlog(5)
}

/// The tests of this binary change the cluster's replication: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The ids in `shop.<table>` on node `i`, in order.
async fn ids(c: &Cluster, i: usize, table: &str) -> Vec<i64> {
    let pool = c.direct(i);
    let mut conn = pool.get_conn().await.expect("a direct connection");
    let ids: Vec<i64> = conn
        .query(format!("SELECT id FROM {table} ORDER BY id"))
        .await
        .unwrap_or_else(|e| panic!("node {i}: SELECT id FROM {table}: {e}"));
    drop(conn);
    pool.disconnect().await.ok();
    ids
}

/// Does node `i` have a table `shop.<table>`?
async fn has_table(c: &Cluster, i: usize, table: &str) -> bool {
    let pool = c.direct(i);
    let mut conn = pool.get_conn().await.expect("a direct connection");
    let n: Option<i64> = conn
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = 'shop' AND TABLE_NAME = ?",
            (table,),
        )
        .await
        .expect("information_schema.TABLES");
    drop(conn);
    pool.disconnect().await.ok();
    n == Some(1)
}

/// Runs `sql` on node `i` (database `shop`).
async fn exec(c: &Cluster, i: usize, sql: &str) {
    let pool = c.direct(i);
    let mut conn = pool.get_conn().await.expect("a direct connection");
    conn.query_drop(sql)
        .await
        .unwrap_or_else(|e| panic!("node {i}: {sql}: {e}"));
    drop(conn);
    pool.disconnect().await.ok();
}

/// Sleeps until just after the wall clock's next whole second (binlog event times have whole
/// seconds: a statement run then is delayed by the full `MASTER_DELAY`).
async fn next_second() {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    let into = Duration::from_nanos(u64::from(now.subsec_nanos()));
    tokio::time::sleep(Duration::from_secs(1) - into + Duration::from_millis(5)).await;
}

#[tokio::test]
async fn replication_helpers_work() {
    let _one = SERIAL.lock().await;
    let c = cluster();
    let started = Instant::now();
    let wait = Duration::from_secs(10);
    for i in 0..5 {
        assert_eq!(server_id(c, i).await, i as u32 + 1, "server id of node {i}");
    }

    replicate(c, 1, 0).await;
    replicate(c, 2, 0).await;
    replicate(c, 4, 3).await;
    for r in [1, 2, 4] {
        let pool = c.direct(r);
        let mut conn = pool.get_conn().await.expect("a direct connection");
        let ro: Option<i64> = conn
            .query_first("SELECT @@read_only")
            .await
            .expect("@@read_only");
        assert_eq!(ro, Some(1), "replica {r} is read-only");
        drop(conn);
        pool.disconnect().await.ok();
    }

    exec(
        c,
        0,
        "CREATE TABLE rep_a (id BIGINT PRIMARY KEY, v VARCHAR(32) NOT NULL)",
    )
    .await;
    exec(
        c,
        0,
        "INSERT INTO rep_a VALUES (1, 'a1'), (2, 'a2'), (3, 'a3')",
    )
    .await;
    exec(
        c,
        3,
        "CREATE TABLE rep_b (id BIGINT PRIMARY KEY, v VARCHAR(32) NOT NULL)",
    )
    .await;
    exec(c, 3, "INSERT INTO rep_b VALUES (7, 'b7'), (8, 'b8')").await;
    caught_up(c, 1, 0, wait).await;
    caught_up(c, 2, 0, wait).await;
    caught_up(c, 4, 3, wait).await;
    for r in [1, 2] {
        assert_eq!(ids(c, r, "rep_a").await, [1, 2, 3], "rep_a on replica {r}");
        assert!(
            !has_table(c, r, "rep_b").await,
            "replica {r} has node 3's table"
        );
    }
    assert_eq!(ids(c, 4, "rep_b").await, [7, 8], "rep_b on replica 4");
    assert!(
        !has_table(c, 4, "rep_a").await,
        "replica 4 has node 0's table"
    );

    // A delayed replica applies a row a second after it was written; the others at once.
    set_delay(c, 1, 1).await;
    next_second().await;
    let written = Instant::now();
    exec(c, 0, "INSERT INTO rep_a VALUES (10, 'delayed')").await;
    caught_up(c, 2, 0, wait).await;
    assert_eq!(
        ids(c, 1, "rep_a").await,
        [1, 2, 3],
        "the delayed replica 1 has the row {:?} after it was written",
        written.elapsed()
    );
    while ids(c, 1, "rep_a").await != [1, 2, 3, 10] {
        assert!(
            written.elapsed() < Duration::from_secs(5),
            "the delayed replica 1 lacks the row after 5s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let delayed = written.elapsed();
    assert!(
        delayed >= Duration::from_millis(900),
        "replica 1 applied the row after {delayed:?}, under its 1s delay"
    );
    set_delay(c, 1, 0).await;
    caught_up(c, 1, 0, wait).await;

    // A stopped replica lacks what was written meanwhile, and catches up once started.
    stop_replication(c, 2).await;
    exec(c, 0, "INSERT INTO rep_a VALUES (20, 'while stopped')").await;
    caught_up(c, 1, 0, wait).await;
    assert_eq!(
        ids(c, 1, "rep_a").await,
        [1, 2, 3, 10, 20],
        "rep_a on replica 1"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        ids(c, 2, "rep_a").await,
        [1, 2, 3, 10],
        "the stopped replica 2 has the row"
    );
    start_replication(c, 2).await;
    caught_up(c, 2, 0, wait).await;
    assert_eq!(
        ids(c, 2, "rep_a").await,
        [1, 2, 3, 10, 20],
        "rep_a on replica 2"
    );
    eprintln!(
        "replication_helpers_work: delayed row applied after {delayed:?}, test body {:.1}s",
        started.elapsed().as_secs_f64()
    );
}

/// Rules over the cluster: ds0 = node 0 with replicas 1 and 2, ds1 = node 3 with replica 4;
/// `t` split between them; `[replicas]` as given; an admin interface.
fn replica_rules(c: &Cluster, replicas: &str) -> String {
    replica_rules_with(c, replicas, "")
}

/// [`replica_rules`] with `extra` sections (a `[metadata]`) before `[nodes]`.
fn replica_rules_with(c: &Cluster, replicas: &str, extra: &str) -> String {
    format!(
        "version = 1\ndefault_node = \"ds0\"\n\n[server]\nlisten = \"127.0.0.1:0\"\n\
         users = [{{ name = \"app\", password = \"app\" }}]\nnode_timeout_secs = 3\n\n\
         [admin]\nlisten = \"127.0.0.1:0\"\nusers = [{{ name = \"ops\", password = \"ops\" }}]\n\n\
         [metrics]\nlisten = \"127.0.0.1:0\"\n\n\
         [replicas]\n{replicas}\n\n{extra}[nodes]\n\
         ds0 = {{ url = \"{}\", replicas = [\"{}\", \"{}\"] }}\n\
         ds1 = {{ primary = \"{}\", replicas = [\"{}\"] }}\n\n{}",
        c.url(0),
        c.url(1),
        c.url(2),
        c.url(3),
        c.url(4),
        hash_slot_table("t", "id", &[(0, 511), (512, 1023)]),
    )
}

/// Replication as the read tests start from: 1 and 2 from 0, 4 from 3, none delayed,
/// `shop.t` fresh on the primaries (and so on the replicas).
async fn fresh(c: &Cluster) {
    for (r, p) in [(1, 0), (2, 0), (4, 3)] {
        replicate(c, r, p).await;
    }
    for p in [0, 3] {
        exec(c, p, "DROP TABLE IF EXISTS t").await;
        exec(
            c,
            p,
            "CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR(20))",
        )
        .await;
    }
    for (r, p) in [(1, 0), (2, 0), (4, 3)] {
        caught_up(c, r, p, Duration::from_secs(10)).await;
    }
}

/// Write-then-read iterations through each driver (text and prepared in mysql_async).
const RYW_ITERATIONS: i64 = 5_000;

/// tests/clients/read_your_writes.py through PyMySQL against `proxy` (ids from `base`):
/// its one line of figures. Panics when it fails.
fn pymysql_session(proxy: &Proxy, base: i64, expect: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients");
    let python = root.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run tests/clients/install.sh",
        python.display()
    );
    let out = std::process::Command::new(python)
        .arg(root.join("read_your_writes.py"))
        .env("PYTHONPATH", &root)
        .env("SP_HOST", "127.0.0.1")
        .env("SP_PORT", proxy.port.to_string())
        .env("SP_USER", "app")
        .env("SP_PASSWORD", "app")
        .env("SP_DB", "shop")
        .env("SP_ITERATIONS", (RYW_ITERATIONS).to_string())
        .env("SP_BASE", base.to_string())
        .env("SP_PRIMARY_IDS", "1,4")
        .env("SP_EXPECT", expect)
        .output()
        .expect("run read_your_writes.py");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "read_your_writes.py ({expect}) failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.trim().to_string()
}

/// Writes through the proxy on both nodes until stopped (ids from `base`): the replicas
/// apply a load while the sessions under test write and read.
struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

fn write_load(pool: &mysql_async::Pool, base: i64) -> Load {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (pool, flag) = (pool.clone(), stop.clone());
    let task = tokio::spawn(async move {
        let mut conn = pool.get_conn().await.expect("a connection");
        let mut n = 0u64;
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            let rows: Vec<String> = (0..20)
                .map(|j| format!("({}, 'load')", base + (n as i64) * 20 + j))
                .collect();
            conn.query_drop(format!("INSERT INTO t VALUES {}", rows.join(", ")))
                .await
                .expect("the load's insert");
            n += 1;
        }
        n * 20
    });
    Load { stop, task }
}

impl Load {
    async fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.task.await.expect("the load")
    }
}

/// The server ids that answered `n` point reads of `id` through `conn`.
async fn answered_by(conn: &mut mysql_async::Conn, id: i64, n: usize) -> Vec<u32> {
    let mut out = Vec::new();
    for _ in 0..n {
        let row: Option<(u32, String)> = conn
            .exec_first("SELECT @@server_id, v FROM t WHERE id = ?", (id,))
            .await
            .expect("a point read");
        out.push(row.expect("the row").0);
    }
    out
}

#[tokio::test]
async fn reads_spread_over_replicas_and_a_session_reads_its_own_writes() {
    let _one = SERIAL.lock().await;
    let c = cluster();
    fresh(c).await;
    let proxy = start_proxy_with_rules(replica_rules(c, "check_ms = 50\nmax_lag_ms = 2000"));
    let pool = proxy.pool();
    let mut w = pool.get_conn().await.expect("a connection");
    let on0 = key_on_node(&[(0, 511), (512, 1023)], 0);
    let on1 = key_on_node(&[(0, 511), (512, 1023)], 1);
    for k in [on0, on1] {
        w.exec_drop("INSERT INTO t VALUES (?, 'a')", (k,))
            .await
            .expect("insert");
    }
    caught_up(c, 1, 0, Duration::from_secs(5)).await;
    caught_up(c, 4, 3, Duration::from_secs(5)).await;
    // Another session, which wrote nothing: its reads go to the replicas, in turn.
    let mut r = pool.get_conn().await.expect("a connection");
    let ids = answered_by(&mut r, on0, 40).await;
    assert!(
        ids.iter().all(|&s| s == 2 || s == 3),
        "ds0's reads answered by {ids:?}"
    );
    assert!(
        ids.contains(&2) && ids.contains(&3),
        "both replicas read: {ids:?}"
    );
    let ids = answered_by(&mut r, on1, 10).await;
    assert!(
        ids.iter().all(|&s| s == 5),
        "ds1's reads answered by {ids:?}"
    );
    // Text, a scatter, and a read in a transaction.
    let rows: Vec<(u32, i64)> = r
        .query("SELECT @@server_id, COUNT(*) FROM t")
        .await
        .expect("a scatter");
    assert!(
        rows.iter().all(|(s, _)| [2, 3, 5].contains(s)),
        "scatter answered by {rows:?}"
    );
    r.query_drop("BEGIN").await.expect("begin");
    let ids = answered_by(&mut r, on0, 3).await;
    r.query_drop("COMMIT").await.expect("commit");
    assert_eq!(ids, [1, 1, 1], "reads in a transaction go to the primary");
    // A read's warnings are the replica's, and SHOW WARNINGS reads them there.
    let warned: Vec<(u32, i64)> = r
        .exec(
            "SELECT @@server_id, CAST('3x' AS SIGNED) FROM t WHERE id = ?",
            (on0,),
        )
        .await
        .expect("a read that warns");
    assert!(
        warned[0].0 == 2 || warned[0].0 == 3,
        "answered by {warned:?}"
    );
    let shown: Vec<(String, u32, String)> = r.query("SHOW WARNINGS").await.expect("SHOW WARNINGS");
    assert_eq!(shown.len(), 1, "the read's warning: {shown:?}");
    assert_eq!(shown[0].1, 1292, "{shown:?}");
    // The metrics count each replica's reads and show its lag.
    let text = scrape(proxy.metrics_port.expect("a metrics port")).await;
    for name in ["ds0/r1", "ds0/r2", "ds1/r1"] {
        assert!(
            text.contains(&format!(
                "shardproxy_replica_reads_total{{replica=\"{name}\"}}"
            )) && text.contains(&format!("shardproxy_replica_up{{replica=\"{name}\"}} 1"))
                && text.contains(&format!(
                    "shardproxy_replica_lag_seconds{{replica=\"{name}\"}}"
                )),
            "{name} in the metrics:\n{text}"
        );
    }
    // A READ ONLY transaction reads one replica of the node for its whole life.
    r.query_drop("START TRANSACTION READ ONLY")
        .await
        .expect("begin read only");
    let ids = answered_by(&mut r, on0, 6).await;
    r.query_drop("COMMIT").await.expect("commit");
    assert!(
        (ids[0] == 2 || ids[0] == 3) && ids.iter().all(|&s| s == ids[0]),
        "a read-only transaction's reads answered by {ids:?}"
    );
    // So does a plain BEGIN after SET SESSION TRANSACTION READ ONLY (MySQL Connector/J's
    // setReadOnly), until READ WRITE.
    r.query_drop("SET SESSION TRANSACTION READ ONLY")
        .await
        .expect("read only");
    r.query_drop("BEGIN").await.expect("begin");
    let ids = answered_by(&mut r, on0, 4).await;
    let rows: Vec<(u32, i64)> = r
        .query("SELECT @@server_id, COUNT(*) FROM t")
        .await
        .expect("a scatter in the transaction");
    r.query_drop("COMMIT").await.expect("commit");
    assert!(
        rows.iter().all(|(s, _)| [2, 3, 5].contains(s)) && rows.iter().any(|(s, _)| *s == ids[0]),
        "a session-read-only transaction's scatter answered by {rows:?} (its point reads by {ids:?})"
    );
    assert!(
        (ids[0] == 2 || ids[0] == 3) && ids.iter().all(|&s| s == ids[0]),
        "a session-read-only transaction's reads answered by {ids:?}"
    );
    // And with autocommit off (Connector/J's setReadOnly(true), setAutoCommit(false)): no
    // BEGIN, the transaction begins with its first read.
    r.query_drop("SET autocommit = 0")
        .await
        .expect("autocommit off");
    let ids = answered_by(&mut r, on0, 4).await;
    r.query_drop("COMMIT").await.expect("commit");
    let again = answered_by(&mut r, on0, 2).await;
    r.query_drop("COMMIT").await.expect("commit");
    r.query_drop("SET autocommit = 1")
        .await
        .expect("autocommit on");
    assert!(
        (ids[0] == 2 || ids[0] == 3) && ids.iter().all(|&s| s == ids[0]),
        "an autocommit-off read-only session's transaction read by {ids:?}"
    );
    assert!(
        again.iter().all(|&s| s == 2 || s == 3),
        "its next transaction read by {again:?}"
    );
    r.query_drop("SET SESSION TRANSACTION READ WRITE")
        .await
        .expect("read write");
    r.query_drop("BEGIN").await.expect("begin");
    let ids = answered_by(&mut r, on0, 2).await;
    r.query_drop("COMMIT").await.expect("commit");
    assert_eq!(ids, [1, 1], "a read-write transaction reads the primary");
    let locked: Option<u32> = r
        .exec_first("SELECT @@server_id FROM t WHERE id = ? FOR UPDATE", (on0,))
        .await
        .expect("a locking read");
    assert_eq!(locked, Some(1), "a locking read goes to the primary");
    let hinted: Option<u32> = r
        .exec_first(
            "SELECT /*+ primary */ @@server_id FROM t WHERE id = ?",
            (on0,),
        )
        .await
        .expect("a hinted read");
    assert_eq!(hinted, Some(1), "/*+ primary */ goes to the primary");

    // Replica 1 lags a second behind: a session that writes then reads at once sees its
    // write every time, text and prepared, autocommit and committed transactions.
    set_delay(c, 1, 1).await;
    let load = write_load(&pool, 50_000_000);
    let mut on_replica = 0;
    for i in 0..RYW_ITERATIONS {
        let id = 10_000 + i;
        let v = format!("v{i}");
        match i % 3 {
            0 => {
                w.exec_drop("INSERT INTO t VALUES (?, ?)", (id, &v))
                    .await
                    .expect("insert");
            }
            1 => {
                w.query_drop(format!("INSERT INTO t VALUES ({id}, '{v}')"))
                    .await
                    .expect("insert");
            }
            _ => {
                w.query_drop("BEGIN").await.expect("begin");
                w.exec_drop("INSERT INTO t VALUES (?, ?)", (id, &v))
                    .await
                    .expect("insert");
                w.query_drop("COMMIT").await.expect("commit");
            }
        }
        let got: Option<(u32, String)> = if i % 2 == 0 {
            w.exec_first("SELECT @@server_id, v FROM t WHERE id = ?", (id,))
                .await
                .expect("read")
        } else {
            w.query_first(format!("SELECT @@server_id, v FROM t WHERE id = {id}"))
                .await
                .expect("read")
        };
        let (server, seen) = got.unwrap_or_else(|| panic!("write {i} (id {id}) not read back"));
        assert_eq!(seen, v, "write {i} read back");
        if server != 1 && server != 4 {
            on_replica += 1;
        }
    }
    eprintln!(
        "read-your-writes (mysql_async): {on_replica} of {RYW_ITERATIONS} reads on a replica"
    );
    let line = pymysql_session(&proxy, 1_000_000, "all");
    eprintln!("read-your-writes (PyMySQL): {line}");
    let written = load.stop().await;
    eprintln!("{written} writes of the load meanwhile");
    set_delay(c, 1, 0).await;
    drop((w, r));
    pool.disconnect().await.ok();
}

#[tokio::test]
async fn with_consistency_lag_a_session_may_miss_its_own_write() {
    let _one = SERIAL.lock().await;
    let c = cluster();
    fresh(c).await;
    let proxy = start_proxy_with_rules(replica_rules(
        c,
        "check_ms = 50\nmax_lag_ms = 5000\nconsistency = \"lag\"",
    ));
    set_delay(c, 1, 1).await;
    set_delay(c, 2, 1).await;
    let pool = proxy.pool();
    let mut w = pool.get_conn().await.expect("a connection");
    let on0 = keys_on_node(&[(0, 511), (512, 1023)], 0, 20);
    let mut missed = 0;
    for id in on0 {
        w.exec_drop("INSERT INTO t VALUES (?, 'x')", (id,))
            .await
            .expect("insert");
        let got: Option<String> = w
            .exec_first("SELECT v FROM t WHERE id = ?", (id,))
            .await
            .expect("read");
        if got.is_none() {
            missed += 1;
        }
    }
    assert!(missed > 0, "with consistency = \"lag\" and replicas a second behind, some reads miss the write just made");
    // PyMySQL too (its writes keep the replicas behind: the lag bound is 5 s).
    let line = pymysql_session(&proxy, 2_000_000, "some-missed");
    eprintln!("consistency = lag (PyMySQL): {line}");
    set_delay(c, 1, 0).await;
    set_delay(c, 2, 0).await;
    drop(w);
    pool.disconnect().await.ok();
}

/// SHOW NODES' row of `name`.
async fn node_row(admin: u16, name: &str) -> std::collections::HashMap<String, String> {
    let mut ops = common::moves::ops(admin).await;
    let rows = common::moves::named_rows(&mut ops, "SHOW NODES").await;
    rows.into_iter()
        .find(|r| r.get("node").map(String::as_str) == Some(name))
        .unwrap_or_else(|| panic!("no SHOW NODES row for {name}"))
}

/// Waits until `name`'s SHOW NODES health starts with `health`; how long it took.
async fn until_health(admin: u16, name: &str, health: &str, within: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        let row = node_row(admin, name).await;
        if row.get("health").is_some_and(|h| h.starts_with(health)) {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < within,
            "{name} not `{health}` within {within:?}: {row:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_stopped_replica_leaves_rotation_and_comes_back() {
    let _one = SERIAL.lock().await;
    let c = cluster();
    fresh(c).await;
    let proxy = start_proxy_with_rules(replica_rules(c, "check_ms = 100\nmax_lag_ms = 1000"));
    let admin = proxy.admin_port.expect("an admin port");
    let pool = proxy.pool();
    let on0 = key_on_node(&[(0, 511), (512, 1023)], 0);
    let mut w = pool.get_conn().await.expect("a connection");
    w.exec_drop("INSERT INTO t VALUES (?, 'a')", (on0,))
        .await
        .expect("insert");
    caught_up(c, 1, 0, Duration::from_secs(5)).await;
    caught_up(c, 2, 0, Duration::from_secs(5)).await;
    until_health(admin, "ds0/r1", "up", Duration::from_secs(5)).await;
    until_health(admin, "ds0/r2", "up", Duration::from_secs(5)).await;

    // Readers run all along: no read fails.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..4 {
        let (pool, stop) = (pool.clone(), stop.clone());
        readers.push(tokio::spawn(async move {
            let mut conn = pool.get_conn().await.expect("a connection");
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let row: Option<(u32, String)> = conn
                    .exec_first("SELECT @@server_id, v FROM t WHERE id = ?", (on0,))
                    .await
                    .unwrap_or_else(|e| panic!("a read failed: {e}"));
                assert!(row.is_some(), "the row is there");
                n += 1;
            }
            n
        }));
    }
    // Replica 1 frozen (SIGSTOP): out of rotation within 2 s, back once it runs again.
    let paused = c.pause_node(1);
    let out = until_health(admin, "ds0/r1", "out of rotation", Duration::from_secs(2)).await;
    eprintln!("a frozen replica left rotation in {out:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(paused);
    until_health(admin, "ds0/r1", "up", Duration::from_secs(10)).await;

    // Replication stopped on replica 2: in rotation while the primary writes nothing new,
    // out once its lag passes max_lag_ms under writes, back when it catches up.
    stop_replication(c, 2).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        node_row(admin, "ds0/r2").await["health"].starts_with("up"),
        "no writes: nothing stale"
    );
    for i in 0..5i64 {
        w.exec_drop("INSERT INTO t VALUES (?, 'b')", (on0 + 1024 * (i + 1),))
            .await
            .expect("insert");
    }
    until_health(admin, "ds0/r2", "out of rotation", Duration::from_secs(3)).await;
    start_replication(c, 2).await;
    until_health(admin, "ds0/r2", "up", Duration::from_secs(10)).await;

    // Replica 2 killed under the readers: reads in flight there go to the primary; it is
    // out of rotation at once, and back once restarted and caught up.
    c.kill_node(2);
    until_health(admin, "ds0/r2", "out of rotation", Duration::from_secs(2)).await;
    c.start_node(2);
    until_health(admin, "ds0/r2", "up", Duration::from_secs(20)).await;

    // Replica 2's replication broken by a row the primary lacks (a duplicate key): its
    // rows are no longer its primary's, so it leaves rotation at once, in sync or not;
    // repaired, it comes back.
    let clash = on0 + 1024 * 7;
    exec(c, 2, &format!("INSERT INTO t VALUES ({clash}, 'replica')")).await;
    w.exec_drop("INSERT INTO t VALUES (?, 'primary')", (clash,))
        .await
        .expect("insert");
    let out = until_health(admin, "ds0/r2", "out of rotation", Duration::from_secs(2)).await;
    let row = node_row(admin, "ds0/r2").await;
    assert!(row["replication"].starts_with("broken"), "{row:?}");
    assert!(row["last_error"].contains("1062"), "{row:?}");
    eprintln!("a broken replica left rotation in {out:?}");
    exec(c, 2, &format!("DELETE FROM t WHERE id = {clash}")).await;
    start_replication(c, 2).await;
    until_health(admin, "ds0/r2", "up", Duration::from_secs(10)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut reads = 0;
    for r in readers {
        reads += r.await.expect("a reader");
    }
    assert!(reads > 0);
    let r1 = node_row(admin, "ds0/r1").await;
    let r2 = node_row(admin, "ds0/r2").await;
    eprintln!("reads: {reads}; r1 {r1:?}; r2 {r2:?}");
    drop(w);
    pool.disconnect().await.ok();
}

#[tokio::test]
async fn a_replica_reads_a_moved_slot_only_once_in_sync_after_the_move() {
    let _one = SERIAL.lock().await;
    let c = cluster();
    fresh(c).await;
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, replica_rules(c, "check_ms = 50\nmax_lag_ms = 5000"))
        .expect("write rules");
    let proxy = start_proxy_watching(&path);
    let admin = proxy.admin_port.expect("an admin port");
    let layout = [(0, 511), (512, 1023)];
    let k = key_on_node(&layout, 0);
    let slot = shardproxy::routing::slot::slot_of(&mysql_async::Value::Int(k)).expect("a slot");
    // ds1's replica lags two seconds; the row is written on ds1's primary, as a move's
    // copy would write it, then the slot is given to ds1.
    set_delay(c, 4, 2).await;
    next_second().await;
    exec(c, 3, &format!("INSERT INTO t VALUES ({k}, 'moved')")).await;
    until_health(admin, "ds1/r1", "up", Duration::from_secs(5)).await;
    let mut ops = common::moves::ops(admin).await;
    ops.query_drop(format!("SET SLOTS {slot}-{slot} NODE ds1 FOR t"))
        .await
        .expect("SET SLOTS");
    let pool = proxy.pool();
    let mut r = pool.get_conn().await.expect("a connection");
    let got: Option<(u32, String)> = r
        .exec_first("SELECT @@server_id, v FROM t WHERE id = ?", (k,))
        .await
        .expect("a read");
    let (server, v) = got.expect("the moved row is read at once, from ds1's primary");
    assert_eq!((server, v.as_str()), (4, "moved"));
    set_delay(c, 4, 0).await;
    drop(r);
    pool.disconnect().await.ok();
}

#[tokio::test]
async fn a_slot_moved_to_a_node_whose_replica_lags_is_never_read_short() {
    let _one = SERIAL.lock().await;
    let c = cluster();
    fresh(c).await;
    // The metadata schema on ds0's primary (its replicas copy it, harmlessly).
    common::moves::fresh_schema_on(c, 0, "meta_rep").await;
    let meta = format!(
        "[metadata]\nurl = \"{}\"\npoll_ms = 100\nlease_ms = 3000\n\n",
        c.root_url(0, "meta_rep")
    );
    let dir = tempfile::tempdir().expect("a temp dir");
    let proxy = common::moves::watching(
        &dir,
        "replicas",
        replica_rules_with(c, "check_ms = 50\nmax_lag_ms = 3000", &meta),
    );
    let admin = proxy.admin_port.expect("an admin port");
    let pool = proxy.pool();
    const ROWS: i64 = 400;
    {
        let mut w = pool.get_conn().await.expect("a connection");
        let rows: Vec<String> = (1..=ROWS).map(|k| format!("({k}, 'r{k}')")).collect();
        w.query_drop(format!("INSERT INTO t VALUES {}", rows.join(", ")))
            .await
            .expect("the rows");
    }
    for (r, p) in [(1, 0), (2, 0), (4, 3)] {
        caught_up(c, r, p, Duration::from_secs(10)).await;
    }
    // ds1's replica a second behind: the move's copies reach it late.
    set_delay(c, 4, 1).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (pool, stop) = (pool.clone(), stop.clone());
        tokio::spawn(async move {
            let mut conn = pool.get_conn().await.expect("a connection");
            let (mut reads, mut short) = (0u64, Vec::new());
            let mut k = 0i64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let n: Option<i64> = conn
                    .query_first("SELECT COUNT(*) FROM t")
                    .await
                    .unwrap_or_else(|e| panic!("a count failed: {e}"));
                if n != Some(ROWS) {
                    short.push(format!("COUNT(*) = {n:?}"));
                }
                k = k % ROWS + 1;
                let v: Option<String> = conn
                    .exec_first("SELECT v FROM t WHERE id = ?", (k,))
                    .await
                    .unwrap_or_else(|e| panic!("a point read failed: {e}"));
                if v.as_deref() != Some(format!("r{k}").as_str()) {
                    short.push(format!("id {k}: {v:?}"));
                }
                reads += 2;
            }
            (reads, short)
        })
    };
    let mut ops = common::moves::ops(admin).await;
    ops.query_drop("MIGRATE SLOTS 0-511 OF t TO ds1 AUTO")
        .await
        .expect("MIGRATE SLOTS");
    common::moves::until_step(&mut ops, "1", "done", Duration::from_secs(60)).await;
    // Reads go on while ds1's replica catches up with the copies.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (reads, short) = reader.await.expect("the reader");
    assert!(
        short.is_empty(),
        "{} of {reads} reads missed rows, first: {:?}",
        short.len(),
        &short[..short.len().min(5)]
    );
    let r = node_row(admin, "ds1/r1").await;
    eprintln!("{reads} reads, none short; ds1/r1 {r:?}");
    set_delay(c, 4, 0).await;
    pool.disconnect().await.ok();
}
