//! The migrations' driver is a lease, not a lock held as long as a connection: a driving
//! proxy paused past its lease (SIGSTOP: its connections stay open) loses it to another
//! proxy, which carries the move on; the paused one, woken, neither acts on its stale step
//! nor writes where the slots no longer are. A driver killed between a freeze and the new
//! owner's version leaves its plan to another proxy, and no client statement fails. Its own
//! test binary (its own cluster): ds0-ds2 hold data, node 3 the metadata schemas.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::moves::*;
use common::workload::*;
use common::*;
use mysql_async::prelude::Queryable;

const L2: [(u16, u16); 2] = [(0, 511), (512, 1023)];
const LEASE: Duration = Duration::from_millis(3000);

/// Tests here share ds2 as a target: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `rules` with the admin listener on `port`, for a proxy process.
fn with_admin_on(rules: String, port: u16) -> String {
    rules.replacen(
        "[admin]\nlisten = \"127.0.0.1:0\"",
        &format!("[admin]\nlisten = \"127.0.0.1:{port}\""),
        1,
    )
}

/// The lease row: holder and token.
async fn lease_row(c: &Cluster, meta: &str) -> (String, u64) {
    let pool = mysql_async::Pool::new(
        mysql_async::Opts::from_url(&c.url(3).replace("/shop", &format!("/{meta}"))).expect("url"),
    );
    let mut conn = pool.get_conn().await.expect("metadata");
    let row: Option<(String, u64)> = conn
        .query_first("SELECT holder, token FROM shard_driver WHERE id = 1")
        .await
        .expect("lease row");
    drop(conn);
    pool.disconnect().await.ok();
    row.expect("a lease row")
}

/// Keys above `from` whose slots are in 0-511 (on ds0 before the move).
fn moving_keys_above(from: i64, n: usize) -> Vec<i64> {
    (from + 1..)
        .filter(|k| node_of_key(&L2, *k) == 0)
        .take(n)
        .collect()
}

#[tokio::test]
async fn a_driver_paused_past_its_lease_loses_it_and_writes_nothing_stale_when_it_wakes() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(4);
    let meta = "meta_lease_stop";
    let table = "t_ls";
    fresh_schema(c, meta).await;
    let tables = hash_slot_table(table, "id", &L2);
    let admin = free_ports(1)[0];
    let a = ProxyProcess::start(&with_admin_on(rules(c, meta, &tables), admin), &[]);
    let pool_a = a.pool();
    const ROWS: i64 = 4_000;
    const KEYS: i64 = 1_000;
    load(c, &pool_a, table, ROWS).await;
    let mut ops_a = ops(admin).await;
    ops_a
        .query_drop(format!("MIGRATE SLOTS 0-511 OF {table} TO ds2"))
        .await
        .expect("MIGRATE");
    until_step(&mut ops_a, "1", "ready", Duration::from_secs(60)).await;
    let (driver, _) = lease_row(c, meta).await;
    // Proxy b joins, the load goes through it; a, the driver, is paused at `ready`.
    let dir = tempfile::tempdir().expect("temp dir");
    let b = watching(&dir, "b", rules(c, meta, &tables));
    let pool_b = b.pool();
    let workers = Workers::start(table, 4, KEYS, &[pool_b.clone(), pool_b.clone()]);
    workers.write(50).await;
    a.signal("STOP");
    let mut ops_b = ops(b.admin_port.expect("admin")).await;
    ops_b.query_drop("CUTOVER 1").await.expect("CUTOVER");
    let asked = Instant::now();
    // b takes the lease once a's has run out, and cuts over.
    loop {
        let step = migration(&mut ops_b, "1").await["step"].clone();
        if step == "cleanup" || step == "done" {
            break;
        }
        assert!(
            asked.elapsed() < LEASE + Duration::from_secs(7),
            "the cutover sat at `{step}` for {:?} with its driver paused",
            asked.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    until_step(&mut ops_b, "1", "done", Duration::from_secs(60)).await;
    let (holder, token) = lease_row(c, meta).await;
    assert_ne!(holder, driver, "the paused proxy still holds the lease");
    assert!(token >= 2, "the lease was never taken over (token {token})");
    workers.write(50).await;

    // a wakes believing the slots are still moving: its writes to them are refused (it has
    // not heartbeated for longer than its lease) or, once it has caught up, go to ds2.
    a.signal("CONT");
    let mut conn = pool_a.get_conn().await.expect("a, woken");
    // New keys inserted as applications do (no column list), and loaded keys the workers
    // never touch overwritten: either would show, on the old owner or as a lost write.
    let mut acked = HashSet::new();
    let new_keys = moving_keys_above(ROWS, 30);
    let old_keys = moving_keys_above(KEYS, 30);
    for (i, k) in new_keys
        .iter()
        .zip(&old_keys)
        .flat_map(|(n, o)| [*n, *o])
        .enumerate()
    {
        let sql = if i % 2 == 0 {
            format!("INSERT INTO {table} VALUES ({k}, -1)")
        } else {
            format!("UPDATE {table} SET v = -1 WHERE id = {k}")
        };
        match conn.query_drop(sql).await {
            Ok(()) => {
                acked.insert(k);
            }
            Err(e) => {
                let (code, message) = server_error::<()>(Err(e));
                assert_eq!(code, 1290, "{message}");
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(conn);
    assert!(!acked.is_empty(), "a never caught up with the new owner");
    // Its stale driver changed nothing: the move stays done, the lease b's.
    tokio::time::sleep(LEASE).await;
    assert_eq!(migration(&mut ops_b, "1").await["step"], "done");
    assert_eq!(
        lease_row(c, meta).await.1,
        token,
        "the woken proxy took the lease back"
    );
    let (mut expected, failed, _) = workers.stop().await;
    no_client_failed(&failed);
    for k in KEYS + 1..=ROWS {
        expected.insert(k, Some(if acked.contains(&k) { -1 } else { k }));
    }
    for k in new_keys {
        expected.insert(k, acked.contains(&k).then_some(-1));
    }
    keys_match(&[&pool_b], table, &expected).await;
    assert_eq!(
        count_on(c, 0, table, "CRC32(id) % 1024 BETWEEN 0 AND 511").await,
        0,
        "a write landed on the old owner"
    );
    pool_a.disconnect().await.ok();
    pool_b.disconnect().await.ok();
}

#[tokio::test]
async fn a_plan_whose_driver_died_between_a_freeze_and_the_new_owner_is_finished_by_another_proxy()
{
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(4);
    let meta = "meta_lease_kill";
    let table = "t_lk";
    fresh_schema(c, meta).await;
    let tables = hash_slot_table(table, "id", &L2);
    let admin = free_ports(1)[0];
    // a stops its driver for good once a freeze is acknowledged.
    let mut a = ProxyProcess::start(
        &with_admin_on(rules(c, meta, &tables), admin),
        &[("SHARDPROXY_MIGRATION_HOLD", "frozen")],
    );
    let pool_a = a.pool();
    const ROWS: i64 = 4_000;
    const KEYS: i64 = 1_000;
    load(c, &pool_a, table, ROWS).await;
    pool_a.disconnect().await.ok();
    let mut ops_a = ops(admin).await;
    // ds2 is empty: two moves to it, one after the other.
    ops_a.query_drop("REBALANCE").await.expect("REBALANCE");
    // a drives: its first move under way (it may be frozen at its cutover already).
    let start = Instant::now();
    while ["queued", "prepare"].contains(&migration(&mut ops_a, "1").await["step"].as_str()) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the plan never began"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let b = watching(&dir, "b", rules(c, meta, &tables));
    let pool_b = b.pool();
    let workers = Workers::start(table, 4, KEYS, &[pool_b.clone(), pool_b.clone()]);
    // The first move frozen, its driver stopped there: then a dies.
    let start = Instant::now();
    loop {
        let t = b.shared.topology();
        let frozen = matches!(t.table(table), Some(shardproxy::config::TableRule::HashSlot { map, .. })
            if map.moves().iter().any(|m| m.step == shardproxy::routing::slot::MoveStep::Freeze));
        if frozen {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no freeze");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    a.kill();
    let mut ops_b = ops(b.admin_port.expect("admin")).await;
    let rows = {
        let start = Instant::now();
        loop {
            let rows: Vec<(String, String)> = ops_b
                .query_map("SHOW REBALANCE", |r: mysql_async::Row| {
                    let state: Option<String> = r.get(2);
                    let step: Option<String> = r.get(9);
                    (state.unwrap_or_default(), step.unwrap_or_default())
                })
                .await
                .expect("SHOW REBALANCE");
            if rows.first().is_some_and(|r| r.0 == "done") {
                break rows;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "the plan was not finished: {rows:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    assert!(rows.iter().all(|r| r.1 == "done"), "{rows:?}");
    workers.write(50).await;
    let (mut expected, failed, _) = workers.stop().await;
    no_client_failed(&failed);
    for k in KEYS + 1..=ROWS {
        expected.insert(k, Some(k));
    }
    keys_match(&[&pool_b], table, &expected).await;
    // Each node holds its share, and only the rows of its slots.
    let t = b.shared.topology();
    let Some(shardproxy::config::TableRule::HashSlot { map, .. }) = t.table(table) else {
        panic!("{table} is not hash_slot");
    };
    for n in 0..3 {
        let slots = (0..1024u16).filter(|s| map.owner_of_slot(*s) == n).count();
        assert!((341..=342).contains(&slots), "ds{n} holds {slots} slots");
        let pool = c.direct(n);
        let mut conn = pool.get_conn().await.expect("direct");
        let by_slot: Vec<(u16, i64)> = conn
            .query(format!(
                "SELECT CRC32(id) % 1024, COUNT(*) FROM {table} GROUP BY 1"
            ))
            .await
            .expect("rows by slot");
        drop(conn);
        pool.disconnect().await.ok();
        for (s, rows) in by_slot {
            assert_eq!(
                map.owner_of_slot(s),
                n,
                "{rows} rows of slot {s} lie on ds{n}"
            );
        }
    }
    pool_b.disconnect().await.ok();
}
