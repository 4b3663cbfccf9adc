//! A mixed write load for the migration and rebalance tests: workers writing their own
//! keys through several proxies (upserts, overwrites, increments, deletes and re-inserts;
//! text and prepared; autocommit and in transactions), each keeping a log of its
//! acknowledged writes, so that afterwards every key can be checked against its log.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Pool};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::Cluster;

/// What a worker's log of acknowledged writes says each of its keys holds.
pub type Expected = HashMap<i64, Option<i64>>;

/// A worker: random writes to its own keys (`key % workers == me`) through both proxies
/// until `stop`, each acknowledged write applied to the log. Returns the log and the
/// statements that failed.
#[allow(clippy::too_many_arguments)]
async fn worker(
    table: &'static str,
    tenant: Option<fn(i64) -> i64>,
    me: i64,
    workers: i64,
    keys: i64,
    pools: Vec<Pool>,
    stop: Arc<AtomicBool>,
    writes: Arc<AtomicU64>,
    mut expected: Expected,
    autocommit_off: bool,
) -> (Expected, Vec<String>) {
    let mut rng = StdRng::seed_from_u64(me as u64 + 7);
    // A directory table: every statement names the key's tenant too.
    let fix = |sql: String, k: i64| -> String {
        match tenant {
            None => sql,
            Some(of) => {
                let t = of(k);
                let sql = sql.replace("WHERE id = ", &format!("WHERE tenant_id = {t} AND id = "));
                if sql.contains("(id, v) VALUES (") {
                    sql.replace(
                        "(id, v) VALUES (",
                        &format!("(tenant_id, id, v) VALUES ({t}, "),
                    )
                } else {
                    // INSERT without a column list: (tenant_id, id, v).
                    sql.replace(&format!(" VALUES ({k}, "), &format!(" VALUES ({t}, {k}, "))
                }
            }
        }
    };
    let mut conns = Vec::new();
    for p in &pools {
        let mut c = p.get_conn().await.expect("worker connection");
        if autocommit_off {
            // As a driver with autocommit off (JDBC's setAutoCommit(false), Python's DB-API)
            // runs: every statement in a transaction that the next COMMIT ends.
            c.query_drop("SET autocommit = 0")
                .await
                .expect("SET autocommit = 0");
        }
        conns.push(c);
    }
    let mine: Vec<i64> = (1..=keys).filter(|k| k % workers == me).collect();
    let mut failed = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let k = mine[rng.gen_range(0..mine.len())];
        let x: i64 = rng.gen_range(0..1000);
        let c = &mut conns[rng.gen_range(0..2)];
        let prepared = rng.gen_bool(0.5);
        let op = rng.gen_range(0..6);
        // Now and then longer than every proxy takes to acknowledge a step.
        let pause = if rng.gen_bool(0.25) {
            rng.gen_range(50..150)
        } else {
            rng.gen_range(0..5)
        };
        let r: Result<(), mysql_async::Error> = async {
            match op {
                0 => {
                    let sql = format!("INSERT INTO {table} (id, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)");
                    if prepared {
                        c.exec_drop(fix(sql, k), (k, x)).await?
                    } else {
                        c.query_drop(fix(format!("INSERT INTO {table} (id, v) VALUES ({k}, {x}) ON DUPLICATE KEY UPDATE v = VALUES(v)"), k)).await?
                    }
                    expected.insert(k, Some(x));
                }
                1 => {
                    if prepared {
                        c.exec_drop(fix(format!("UPDATE {table} SET v = ? WHERE id = ?"), k), (x, k)).await?
                    } else {
                        c.query_drop(fix(format!("UPDATE {table} SET v = {x} WHERE id = {k}"), k)).await?
                    }
                    if let Some(Some(_)) = expected.get(&k) {
                        expected.insert(k, Some(x));
                    }
                }
                2 => {
                    if prepared {
                        c.exec_drop(fix(format!("UPDATE {table} SET v = v + 1 WHERE id = ?"), k), (k,)).await?
                    } else {
                        c.query_drop(fix(format!("UPDATE {table} SET v = v + 1 WHERE id = {k}"), k)).await?
                    }
                    if let Some(Some(v)) = expected.get(&k).copied() {
                        expected.insert(k, Some(v + 1));
                    }
                }
                3 => {
                    c.query_drop(fix(format!("DELETE FROM {table} WHERE id = {k}"), k)).await?;
                    expected.insert(k, None);
                }
                4 => {
                    // A delete and a re-insert of the same key.
                    c.exec_drop(fix(format!("DELETE FROM {table} WHERE id = ?"), k), (k,)).await?;
                    expected.insert(k, None);
                    c.query_drop(fix(format!("INSERT INTO {table} VALUES ({k}, {x})"), k)).await?;
                    expected.insert(k, Some(x));
                }
                _ => {
                    // Two increments in one transaction: both or neither.
                    c.query_drop("BEGIN").await?;
                    c.query_drop(fix(format!("UPDATE {table} SET v = v + 1 WHERE id = {k}"), k)).await?;
                    c.exec_drop(fix(format!("UPDATE {table} SET v = v + 1 WHERE id = ?"), k), (k,)).await?;
                    c.query_drop("COMMIT").await?;
                    if let Some(Some(v)) = expected.get(&k).copied() {
                        expected.insert(k, Some(v + 2));
                    }
                }
            }
            if autocommit_off {
                // As an application does its own work before it commits: the transaction
                // stays open across a step of the move now and then.
                tokio::time::sleep(Duration::from_millis(pause)).await;
                // The op counts once committed (a failed COMMIT reads the key back below).
                c.query_drop("COMMIT").await?;
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
                    .query_first(fix(format!("SELECT v FROM {table} WHERE id = {k}"), k))
                    .await
                    .ok()
                    .flatten();
                expected.insert(k, v);
            }
        }
    }
    (expected, failed)
}

/// Workers writing keys `1..=keys` of `table` through `pools` until stopped.
pub struct Workers {
    stop: Arc<AtomicBool>,
    pub writes: Arc<AtomicU64>,
    handles: Vec<tokio::task::JoinHandle<(Expected, Vec<String>)>>,
}

impl Workers {
    pub fn start(table: &'static str, n: i64, keys: i64, pools: &[Pool]) -> Workers {
        Self::start_scoped(table, None, n, keys, pools)
    }

    /// Workers whose connections run with autocommit off, each op committed after it.
    pub fn start_autocommit_off(table: &'static str, n: i64, keys: i64, pools: &[Pool]) -> Workers {
        Self::spawn(table, None, n, keys, pools, true)
    }

    /// Workers on a directory table whose key `k` belongs to tenant `tenant(k)`.
    pub fn start_scoped(
        table: &'static str,
        tenant: Option<fn(i64) -> i64>,
        n: i64,
        keys: i64,
        pools: &[Pool],
    ) -> Workers {
        Self::spawn(table, tenant, n, keys, pools, false)
    }

    fn spawn(
        table: &'static str,
        tenant: Option<fn(i64) -> i64>,
        n: i64,
        keys: i64,
        pools: &[Pool],
        autocommit_off: bool,
    ) -> Workers {
        let stop = Arc::new(AtomicBool::new(false));
        let writes = Arc::new(AtomicU64::new(0));
        let handles = (0..n)
            .map(|me| {
                let start: Expected = (1..=keys)
                    .filter(|k| k % n == me)
                    .map(|k| (k, Some(k)))
                    .collect();
                tokio::spawn(worker(
                    table,
                    tenant,
                    me,
                    n,
                    keys,
                    pools.to_vec(),
                    stop.clone(),
                    writes.clone(),
                    start,
                    autocommit_off,
                ))
            })
            .collect();
        Workers {
            stop,
            writes,
            handles,
        }
    }

    /// Waits until they have had `more` writes acknowledged from now on: load that has
    /// certainly run through the routing of this moment (a step, a cutover, a proxy that
    /// joined), where a fixed sleep only hopes it did on a loaded machine.
    pub async fn write(&self, more: u64) {
        let from = self.writes.load(Ordering::Relaxed);
        let start = Instant::now();
        while self.writes.load(Ordering::Relaxed) < from + more {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the workers had {} of {more} writes acknowledged in 60 s",
                self.writes.load(Ordering::Relaxed) - from
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops them: what their logs imply for every key they own, the statements that
    /// failed, and the writes acknowledged.
    pub async fn stop(self) -> (Expected, Vec<String>, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let mut expected = Expected::new();
        let mut failed = Vec::new();
        for h in self.handles {
            let (e, f) = h.await.expect("worker");
            expected.extend(e);
            failed.extend(f);
        }
        (expected, failed, self.writes.load(Ordering::Relaxed))
    }
}

/// No client statement failed (the first ten that did, if any).
pub fn no_client_failed(failed: &[String]) {
    assert!(
        failed.is_empty(),
        "{} client statements failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(10)]
    );
}

pub async fn count_on(c: &Cluster, n: usize, table: &str, pred: &str) -> i64 {
    let pool = c.direct(n);
    let mut conn = pool.get_conn().await.expect("direct");
    let v: Option<i64> = conn
        .query_first(format!("SELECT COUNT(*) FROM {table} WHERE {pred}"))
        .await
        .expect("count");
    drop(conn);
    pool.disconnect().await.ok();
    v.unwrap_or(-1)
}

/// Every key read through each of `pools` holds what `expected` says, and no row is there
/// that no log has (the first ten that differ, if any).
pub async fn keys_match(pools: &[&Pool], table: &str, expected: &Expected) {
    for pool in pools {
        let mut conn = pool.get_conn().await.expect("proxy");
        let got: Vec<(i64, i64)> = conn
            .query(format!("SELECT id, v FROM {table}"))
            .await
            .expect("read all");
        let got: HashMap<i64, i64> = got.into_iter().collect();
        let wrong: Vec<_> = expected
            .iter()
            .filter(|(k, want)| got.get(k).copied() != **want)
            .map(|(k, want)| (*k, *want, got.get(k).copied()))
            .collect();
        let extra = got.keys().filter(|k| !expected.contains_key(k)).count();
        assert!(
            wrong.is_empty() && extra == 0,
            "{} keys differ from their log (key, log, proxy): {:?}; {extra} rows no log has",
            wrong.len(),
            &wrong[..wrong.len().min(10)]
        );
    }
}

/// Each tenant's rows of `table`, read through `conn` by `tenant_id`, as the writers' log
/// says (`tenant(k)`: key `k`'s tenant).
pub async fn tenants_match(
    conn: &mut Conn,
    table: &str,
    tenants: &[i64],
    tenant: fn(i64) -> i64,
    expected: &Expected,
) {
    for t in tenants {
        let got: Vec<(i64, i64)> = conn
            .query(format!("SELECT id, v FROM {table} WHERE tenant_id = {t}"))
            .await
            .expect("read a tenant");
        let got: HashMap<i64, i64> = got.into_iter().collect();
        let wrong: Vec<_> = expected
            .iter()
            .filter(|(k, _)| tenant(**k) == *t)
            .filter(|(k, v)| got.get(k).copied() != **v)
            .map(|(k, v)| (*k, *v, got.get(k).copied()))
            .collect();
        assert!(
            wrong.is_empty(),
            "tenant {t}: {} keys differ from their log (key, log, proxy): {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(8)]
        );
    }
}
