//! Salting on real MariaDB nodes whose binary log is on (a salted key's buckets move only
//! through it): `SALT KEY` on a tenant with rows under writes through two proxies, its buckets
//! spread over three nodes, then `DRAIN NODE` moving one node's buckets on; afterwards every
//! row of the tenant is on its bucket's node, both proxies read and write it there, and no
//! statement failed or row was lost. Its own test binary: ds0-ds2 hold data, node 3 the
//! metadata schema.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::moves::*;
use common::workload::*;
use common::*;
use mysql_async::prelude::Queryable;

const L2: [(u16, u16); 2] = [(0, 511), (512, 1023)];

fn cluster() -> &'static Cluster {
    Cluster::shared_binlog(4)
}

/// The `capture` column of a migration's SHOW MIGRATIONS row is `want`.
fn assert_capture(m: &HashMap<String, String>, want: &str) {
    assert_eq!(m.get("capture").map(String::as_str), Some(want), "{m:?}");
}

/// `SALT KEY` on a tenant with rows, under writes through two proxies: the tenant is salted
/// where its rows are, then each other node's run of its buckets moves there through the
/// source's binary log; then `DRAIN NODE` moves one node's run on.
#[tokio::test]
async fn a_tenant_with_rows_is_salted_over_three_nodes_and_a_node_drained_under_writes() {
    let c = cluster();
    let meta = "meta_salt";
    let table = "t_salt";
    fresh_schema(c, meta).await;
    // Tenant 42 is in slot 136 (ds0's); tenant 5 in slot 942 (ds1's). Six buckets by `id`.
    let tables = format!(
        "[tables.{table}]\nrule = \"hash_slot\"\ncolumn = \"tenant_id\"\nslots = {}\n\
         salt = {{ by = \"id\", buckets = 6 }}\n\n",
        slots_toml(&L2)
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let a = watching(&dir, "a", rules(c, meta, &tables));
    let b = watching(&dir, "b", rules(c, meta, &tables));
    let (pool_a, pool_b) = (a.pool(), b.pool());
    drop_on(c, &[0, 1, 2], table).await;
    let mut conn = pool_a.get_conn().await.expect("proxy");
    conn.query_drop(format!(
        "CREATE TABLE {table} (tenant_id BIGINT NOT NULL, id BIGINT PRIMARY KEY, v BIGINT NOT NULL)"
    ))
    .await
    .expect("create");
    fn tenant(k: i64) -> i64 {
        [42, 5][(k % 2) as usize]
    }
    const KEYS: i64 = 4000;
    for chunk in (1..=KEYS).collect::<Vec<_>>().chunks(500) {
        let values: Vec<String> = chunk
            .iter()
            .map(|k| format!("({}, {k}, {k})", tenant(*k)))
            .collect();
        conn.query_drop(format!("INSERT INTO {table} VALUES {}", values.join(", ")))
            .await
            .expect("load");
    }
    drop(conn);
    let workers = Workers::start_scoped(
        table,
        Some(tenant),
        4,
        KEYS,
        &[pool_a.clone(), pool_b.clone()],
    );
    workers.write(30).await;
    let mut ops_a = ops(a.admin_port.expect("admin")).await;
    ops_a
        .query_drop(format!("SALT KEY '42' OF {table} OVER ds1, ds2 RATE 4000"))
        .await
        .expect("SALT KEY");
    // Buckets 2-3 to ds1, then 4-5 to ds2; ds0 keeps 0-1.
    let m = until_step(&mut ops_a, "1", "done", Duration::from_secs(180)).await;
    assert_eq!(m["slots"], "key '42' buckets 2-3");
    assert_capture(&m, "binlog");
    workers.write(30).await;
    let m = until_step(&mut ops_a, "2", "done", Duration::from_secs(180)).await;
    assert_eq!(
        (m["slots"].as_str(), m["target"].as_str()),
        ("key '42' buckets 4-5", "ds2")
    );
    workers.write(30).await;
    // Salted: each node holds its run of the tenant's buckets and nothing else of it, and
    // both proxies place them so.
    for i in 0..3 {
        let there = format!("tenant_id = 42 AND CRC32(id) % 6 DIV 2 <> {i}");
        assert_eq!(
            count_on(c, i, table, &there).await,
            0,
            "ds{i} holds others' buckets"
        );
    }
    owners_are(&[&a, &b], table, ["ds0", "ds0", "ds1", "ds1", "ds2", "ds2"]);
    // The plan ends once its last move has.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while named_rows(&mut ops_a, "SHOW REBALANCE")
        .await
        .first()
        .is_none_or(|r| r["plan_state"] != "done")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the SALT KEY plan did not end"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Draining ds2 moves its run of buckets to the node holding fewest of them.
    let plan = dry_run(&mut ops_a, "DRAIN NODE ds2 DRY RUN").await;
    assert_eq!(
        plan,
        vec![format!("MIGRATE KEY '42' OF {table} BUCKETS 4-5 TO ds0")]
    );
    ops_a
        .query_drop("DRAIN NODE ds2")
        .await
        .expect("DRAIN NODE");
    let m = until_step(&mut ops_a, "3", "done", Duration::from_secs(180)).await;
    assert_eq!(
        (m["slots"].as_str(), m["target"].as_str()),
        ("key '42' buckets 4-5", "ds0")
    );
    workers.write(30).await;
    let (expected, failed, writes) = workers.stop().await;
    no_client_failed(&failed);
    assert!(writes > 300, "the workers wrote little: {writes}");
    for pool in [&pool_a, &pool_b] {
        let mut conn = pool.get_conn().await.expect("proxy");
        tenants_match(&mut conn, table, &[42, 5], tenant, &expected).await;
    }
    // Buckets 0-1 and 4-5 on ds0, 2-3 on ds1, none left on ds2; every row once.
    let live = |t: i64| {
        expected
            .iter()
            .filter(|(k, v)| tenant(**k) == t && v.is_some())
            .count() as i64
    };
    let run = "CRC32(id) % 6 DIV 2";
    let on0 = count_on(c, 0, table, &format!("tenant_id = 42 AND {run} IN (0, 2)")).await;
    let on1 = count_on(c, 1, table, &format!("tenant_id = 42 AND {run} = 1")).await;
    assert_eq!(
        count_on(c, 0, table, &format!("tenant_id = 42 AND {run} = 1")).await,
        0
    );
    assert_eq!(
        count_on(c, 1, table, &format!("tenant_id = 42 AND {run} <> 1")).await,
        0
    );
    assert_eq!(count_on(c, 2, table, "tenant_id = 42").await, 0);
    assert!(
        on0 > 600 && on1 > 300,
        "tenant 42 on ds0 {on0}, on ds1 {on1}"
    );
    assert_eq!(on0 + on1, live(42));
    assert_eq!(count_on(c, 1, table, "tenant_id = 5").await, live(5));
    owners_are(&[&a, &b], table, ["ds0", "ds0", "ds1", "ds1", "ds0", "ds0"]);
    // A row of the salted tenant needs its `id`: without one it has no bucket.
    let mut conn = pool_b.get_conn().await.expect("proxy");
    let e = conn
        .query_drop(format!("INSERT INTO {table} (tenant_id, v) VALUES (42, 1)"))
        .await
        .expect_err("no bucket");
    assert!(e.to_string().contains("is salted"), "{e}");
    drop(conn);
    drop(ops_a);
    pool_a.disconnect().await.ok();
    pool_b.disconnect().await.ok();
}

/// Both proxies place the buckets of tenant 42 of `table` on these nodes, none moving.
fn owners_are(proxies: &[&Proxy], table: &str, want: [&str; 6]) {
    for p in proxies {
        let t = p.shared.topology();
        let Some(shardproxy::config::TableRule::HashSlot { map, .. }) = t.table(table) else {
            panic!("{table} is not hash_slot");
        };
        assert!(!map.is_moving());
        let nodes: Vec<&str> = map.salted()[b"42".as_slice()]
            .0
            .iter()
            .map(|n| t.node_name(*n))
            .collect();
        assert_eq!(nodes, want);
    }
}
