//! Live slot migration on real MariaDB nodes: slots move from one node to another while two
//! proxies on one metadata schema serve upserts, overwrites, increments, deletes and
//! re-inserts (text and prepared, autocommit and in transactions); afterwards every key has
//! the value its log of acknowledged writes implies, on its new node only, and no client
//! statement failed. Its own test binary (its own cluster): ds0-ds2 hold data, node 3 the
//! metadata schemas.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Pool};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const L2: [(u16, u16); 2] = [(0, 511), (512, 1023)];

/// The rules of a proxy over ds0-ds2 with `tables`, an admin listener and the metadata
/// schema `meta` on node 3.
fn rules(c: &Cluster, meta: &str, tables: &str) -> String {
    let mut s = String::from(
        "version = 1\ndefault_node = \"ds0\"\n\n[server]\nlisten = \"127.0.0.1:0\"\n\
         users = [{ name = \"app\", password = \"app\" }]\n\n\
         [admin]\nlisten = \"127.0.0.1:0\"\nusers = [{ name = \"ops\", password = \"ops\" }]\n\n",
    );
    s.push_str(&format!(
        "[metadata]\nurl = \"{}\"\npoll_ms = 100\nlease_ms = 2000\n\n[nodes]\n",
        c.url(3).replace("/shop", &format!("/{meta}"))
    ));
    for i in 0..3 {
        s.push_str(&format!("ds{i} = \"{}\"\n", c.url(i)));
    }
    s.push('\n');
    s.push_str(tables);
    s
}

/// A proxy serving `rules` from a file of its own (the metadata is merged over it).
fn watching(dir: &tempfile::TempDir, name: &str, rules: String) -> Proxy {
    let path = dir.path().join(format!("rules-{name}.toml"));
    std::fs::write(&path, rules).expect("write the rules");
    start_proxy_watching(&path)
}

async fn fresh_schema(c: &Cluster, meta: &str) {
    let pool = c.direct(3);
    let mut conn = pool.get_conn().await.expect("metadata node");
    conn.query_drop(format!("DROP DATABASE IF EXISTS {meta}"))
        .await
        .expect("drop");
    conn.query_drop(format!("CREATE DATABASE {meta}"))
        .await
        .expect("create");
    drop(conn);
    pool.disconnect().await.ok();
}

async fn ops(admin_port: u16) -> Conn {
    Conn::new(Opts::from_url(&format!("mysql://ops:ops@127.0.0.1:{admin_port}")).expect("url"))
        .await
        .expect("operator login")
}

/// The migration's row in SHOW MIGRATIONS, by column name.
async fn migration(ops: &mut Conn, id: &str) -> HashMap<String, String> {
    let rows: Vec<mysql_async::Row> = ops.query("SHOW MIGRATIONS").await.expect("SHOW MIGRATIONS");
    for r in rows {
        let cols: Vec<String> = r
            .columns_ref()
            .iter()
            .map(|c| c.name_str().to_string())
            .collect();
        let vals: Vec<String> = (0..cols.len())
            .map(|i| r.get::<Option<String>, _>(i).flatten().unwrap_or_default())
            .collect();
        let m: HashMap<String, String> = cols.into_iter().zip(vals).collect();
        if m.get("id").map(String::as_str) == Some(id) {
            return m;
        }
    }
    panic!("no migration {id}");
}

/// Waits until migration `id` reaches `step`.
async fn until_step(
    ops: &mut Conn,
    id: &str,
    step: &str,
    limit: Duration,
) -> HashMap<String, String> {
    let start = Instant::now();
    loop {
        let m = migration(ops, id).await;
        if m["step"] == step {
            return m;
        }
        assert!(
            start.elapsed() < limit,
            "migration {id} did not reach `{step}`: {m:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a worker's log of acknowledged writes says each of its keys holds.
type Expected = HashMap<i64, Option<i64>>;

/// A worker: random writes to its own keys (`key % workers == me`) through both proxies
/// until `stop`, each acknowledged write applied to the log. Returns the log and the
/// statements that failed.
async fn worker(
    me: i64,
    workers: i64,
    keys: i64,
    pools: Vec<Pool>,
    stop: Arc<AtomicBool>,
    writes: Arc<AtomicU64>,
    mut expected: Expected,
) -> (Expected, Vec<String>) {
    let mut rng = StdRng::seed_from_u64(me as u64 + 7);
    let mut conns = Vec::new();
    for p in &pools {
        conns.push(p.get_conn().await.expect("worker connection"));
    }
    let mine: Vec<i64> = (1..=keys).filter(|k| k % workers == me).collect();
    let mut failed = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let k = mine[rng.gen_range(0..mine.len())];
        let x: i64 = rng.gen_range(0..1000);
        let c = &mut conns[rng.gen_range(0..2)];
        let prepared = rng.gen_bool(0.5);
        let op = rng.gen_range(0..6);
        let r: Result<(), mysql_async::Error> = async {
            match op {
                0 => {
                    let sql = "INSERT INTO t_mig (id, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)";
                    if prepared {
                        c.exec_drop(sql, (k, x)).await?
                    } else {
                        c.query_drop(format!("INSERT INTO t_mig (id, v) VALUES ({k}, {x}) ON DUPLICATE KEY UPDATE v = VALUES(v)")).await?
                    }
                    expected.insert(k, Some(x));
                }
                1 => {
                    if prepared {
                        c.exec_drop("UPDATE t_mig SET v = ? WHERE id = ?", (x, k)).await?
                    } else {
                        c.query_drop(format!("UPDATE t_mig SET v = {x} WHERE id = {k}")).await?
                    }
                    if let Some(Some(_)) = expected.get(&k) {
                        expected.insert(k, Some(x));
                    }
                }
                2 => {
                    if prepared {
                        c.exec_drop("UPDATE t_mig SET v = v + 1 WHERE id = ?", (k,)).await?
                    } else {
                        c.query_drop(format!("UPDATE t_mig SET v = v + 1 WHERE id = {k}")).await?
                    }
                    if let Some(Some(v)) = expected.get(&k).copied() {
                        expected.insert(k, Some(v + 1));
                    }
                }
                3 => {
                    c.query_drop(format!("DELETE FROM t_mig WHERE id = {k}")).await?;
                    expected.insert(k, None);
                }
                4 => {
                    // A delete and a re-insert of the same key.
                    c.exec_drop("DELETE FROM t_mig WHERE id = ?", (k,)).await?;
                    expected.insert(k, None);
                    c.query_drop(format!("INSERT INTO t_mig VALUES ({k}, {x})")).await?;
                    expected.insert(k, Some(x));
                }
                _ => {
                    // Two increments in one transaction: both or neither.
                    c.query_drop("BEGIN").await?;
                    c.query_drop(format!("UPDATE t_mig SET v = v + 1 WHERE id = {k}")).await?;
                    c.exec_drop("UPDATE t_mig SET v = v + 1 WHERE id = ?", (k,)).await?;
                    c.query_drop("COMMIT").await?;
                    if let Some(Some(v)) = expected.get(&k).copied() {
                        expected.insert(k, Some(v + 2));
                    }
                }
            }
            Ok(())
        }
        .await;
        match r {
            Ok(()) => {
                writes.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                failed.push(format!("op {op} on key {k}: {e}"));
                // Whatever the failed op left open.
                let _ = c.query_drop("ROLLBACK").await;
                // The log no longer says what the key holds: read it back.
                let v: Option<i64> = c
                    .query_first(format!("SELECT v FROM t_mig WHERE id = {k}"))
                    .await
                    .ok()
                    .flatten();
                expected.insert(k, v);
            }
        }
    }
    (expected, failed)
}

#[tokio::test]
async fn slots_move_under_writes_through_two_proxies_and_nothing_is_lost() {
    let c = Cluster::shared(4);
    let meta = "meta_mig";
    fresh_schema(c, meta).await;
    let tables = hash_slot_table("t_mig", "id", &L2);
    let dir = tempfile::tempdir().expect("temp dir");
    let a = watching(&dir, "a", rules(c, meta, &tables));
    let b = watching(&dir, "b", rules(c, meta, &tables));
    let pool_a = a.pool();
    let pool_b = b.pool();
    let mut conn = pool_a.get_conn().await.expect("proxy a");
    conn.query_drop("DROP TABLE IF EXISTS t_mig")
        .await
        .expect("drop");
    for n in 0..3 {
        let p = c.direct(n);
        p.get_conn()
            .await
            .expect("direct")
            .query_drop("DROP TABLE IF EXISTS t_mig")
            .await
            .expect("drop on the node");
        p.disconnect().await.ok();
    }
    conn.query_drop("CREATE TABLE t_mig (id BIGINT PRIMARY KEY, v BIGINT NOT NULL)")
        .await
        .expect("create");
    // 20,000 rows: the backfill takes a few seconds at its rate, under the writes.
    const ROWS: i64 = 20_000;
    for chunk in (1..=ROWS).collect::<Vec<_>>().chunks(1000) {
        let values: Vec<String> = chunk.iter().map(|k| format!("({k}, {k})")).collect();
        conn.query_drop(format!(
            "INSERT INTO t_mig (id, v) VALUES {}",
            values.join(", ")
        ))
        .await
        .expect("load");
    }
    drop(conn);

    const WORKERS: i64 = 6;
    const KEYS: i64 = 3000;
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for me in 0..WORKERS {
        let start: Expected = (1..=KEYS)
            .filter(|k| k % WORKERS == me)
            .map(|k| (k, Some(k)))
            .collect();
        handles.push(tokio::spawn(worker(
            me,
            WORKERS,
            KEYS,
            vec![pool_a.clone(), pool_b.clone()],
            stop.clone(),
            writes.clone(),
            start,
        )));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut ops_a = ops(a.admin_port.expect("admin")).await;
    let started: String = ops_a
        .query_first("MIGRATE SLOTS 0-511 OF t_mig TO ds2 RATE 4000 AUTO")
        .await
        .expect("MIGRATE")
        .unwrap_or_default();
    let _ = started;
    let id = migration(&mut ops_a, "1").await["id"].clone();
    // Each step is seen while the writes go on.
    until_step(&mut ops_a, &id, "backfill", Duration::from_secs(30)).await;
    let m = until_step(&mut ops_a, &id, "done", Duration::from_secs(180)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut expected = Expected::new();
    let mut failed = Vec::new();
    for h in handles {
        let (e, f) = h.await.expect("worker");
        expected.extend(e);
        failed.extend(f);
    }
    assert!(
        failed.is_empty(),
        "{} client statements failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(10)]
    );
    assert!(
        writes.load(Ordering::Relaxed) > 500,
        "the workers wrote little"
    );
    assert!(
        m["rows_copied"].parse::<u64>().unwrap_or(0) > 5_000,
        "{m:?}"
    );

    // Every key: the value its log implies, through both proxies; untouched rows as loaded.
    for k in KEYS + 1..=ROWS {
        expected.insert(k, Some(k));
    }
    for pool in [&pool_a, &pool_b] {
        let mut conn = pool.get_conn().await.expect("proxy");
        let got: Vec<(i64, i64)> = conn
            .query("SELECT id, v FROM t_mig ORDER BY id")
            .await
            .expect("read all");
        let got: HashMap<i64, i64> = got.into_iter().collect();
        let mut wrong = Vec::new();
        for (k, want) in &expected {
            if got.get(k).copied() != *want {
                wrong.push((*k, *want, got.get(k).copied()));
            }
        }
        let extra = got.keys().filter(|k| !expected.contains_key(k)).count();
        assert!(
            wrong.is_empty() && extra == 0,
            "{} keys differ from their log (key, log, proxy): {:?}; {extra} rows no log has",
            wrong.len(),
            &wrong[..wrong.len().min(10)]
        );
    }
    // The moved slots' rows are on ds2 alone; ds0 holds none of them any more.
    let count = |n: usize, pred: &'static str| {
        let pool = c.direct(n);
        async move {
            let mut conn = pool.get_conn().await.expect("direct");
            let v: Option<i64> = conn
                .query_first(format!("SELECT COUNT(*) FROM t_mig WHERE {pred}"))
                .await
                .expect("count");
            drop(conn);
            pool.disconnect().await.ok();
            v.unwrap_or(-1)
        }
    };
    let moved = expected
        .iter()
        .filter(|(k, v)| v.is_some() && node_of_key(&L2, **k) == 0)
        .count() as i64;
    assert_eq!(count(0, "CRC32(id) % 1024 BETWEEN 0 AND 511").await, 0);
    assert_eq!(count(2, "CRC32(id) % 1024 BETWEEN 0 AND 511").await, moved);
    assert_eq!(count(2, "CRC32(id) % 1024 > 511").await, 0);
    // Both proxies route the slots to ds2 now, as stable slots.
    for p in [&a, &b] {
        let t = p.shared.topology();
        let Some(shardproxy::config::TableRule::HashSlot { map, .. }) = t.table("t_mig") else {
            panic!("t_mig is not hash_slot");
        };
        assert!(map.moves().is_empty());
        assert_eq!(t.node_name(map.node_of_slot(100)), "ds2");
        assert_eq!(t.node_name(map.node_of_slot(600)), "ds1");
    }
    pool_a.disconnect().await.ok();
    pool_b.disconnect().await.ok();
}
