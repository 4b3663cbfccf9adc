//! The elastic cluster on real MariaDB nodes: a node added with `REBALANCE`, another drained
//! and removed, while two proxies on one metadata schema serve a mixed write load; and a
//! plan whose moves share no node running them side by side. Its own test binary (its own
//! cluster): nodes 0-3 are ds0-ds3, node 4 holds the metadata schemas, node 5 is the node
//! added (ds4), with an empty database.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::moves::*;
use common::workload::*;
use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Pool};

const NODES: usize = 6;
const META: usize = 4;
const NEW: usize = 5;

/// Tests here share ds4 and the metadata node: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn rules_over(c: &Cluster, meta: &str, nodes: &[(&str, usize)], tables: &str) -> String {
    rules_on(c, META, meta, nodes, tables)
}

async fn fresh_meta(c: &Cluster, meta: &str) {
    fresh_schema_on(c, META, meta).await
}

/// `table` gone from every data node (the new one too), then created through `pool` with
/// `rows` rows `(k, k)`.
async fn load_all(c: &Cluster, pool: &Pool, table: &str, rows: i64) {
    let data: Vec<usize> = (0..NODES).filter(|n| *n != META).collect();
    load_after_dropping(c, &data, pool, table, rows).await
}

/// SHOW REBALANCE, each row by column name.
async fn plan_rows(ops: &mut Conn) -> Vec<HashMap<String, String>> {
    named_rows(ops, "SHOW REBALANCE").await
}

/// Waits until the newest plan is `state`; its moves.
async fn until_plan(ops: &mut Conn, state: &str, limit: Duration) -> Vec<HashMap<String, String>> {
    let start = Instant::now();
    loop {
        let rows = plan_rows(ops).await;
        if rows.first().is_some_and(|r| r["plan_state"] == state) {
            return rows;
        }
        assert!(
            start.elapsed() < limit,
            "the rebalance did not reach `{state}` in {limit:?}: {rows:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Slots of `table` per node name, in `p`'s rules.
fn slots_per_node(p: &Proxy, table: &str) -> HashMap<String, usize> {
    let t = p.shared.topology();
    let Some(shardproxy::config::TableRule::HashSlot { map, .. }) = t.table(table) else {
        panic!("{table} is not hash_slot");
    };
    assert!(map.moves().is_empty(), "slots of {table} still moving");
    let mut n = HashMap::new();
    for s in 0..1024u16 {
        *n.entry(t.node_name(map.owner_of_slot(s)).to_string())
            .or_insert(0) += 1;
    }
    n
}

/// Waits until both proxies run the same rules with no slot of `table` moving.
async fn settled(ps: &[&Proxy], table: &str) {
    let start = Instant::now();
    loop {
        let versions: Vec<u64> = ps.iter().map(|p| p.shared.topology().version).collect();
        let still = ps.iter().any(|p| {
            let t = p.shared.topology();
            matches!(t.table(table), Some(shardproxy::config::TableRule::HashSlot { map, .. }) if !map.moves().is_empty())
        });
        if versions.windows(2).all(|w| w[0] == w[1]) && !still {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the proxies did not settle: versions {versions:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every row of `table` on a node in service lies in a slot that node owns, in `p`'s rules;
/// the rows on each node.
async fn rows_where_their_slots_say(
    c: &Cluster,
    p: &Proxy,
    table: &str,
    nodes: &[(&str, usize)],
) -> HashMap<String, i64> {
    let t = p.shared.topology();
    let Some(shardproxy::config::TableRule::HashSlot { map, .. }) = t.table(table) else {
        panic!("{table} is not hash_slot");
    };
    let mut held = HashMap::new();
    for (name, i) in nodes {
        let pool = c.direct(*i);
        let mut conn = pool.get_conn().await.expect("direct");
        let slots: Vec<(u16, i64)> = conn
            .query(format!(
                "SELECT CRC32(id) % 1024, COUNT(*) FROM {table} GROUP BY 1"
            ))
            .await
            .unwrap_or_default();
        drop(conn);
        pool.disconnect().await.ok();
        let mut n = 0;
        for (s, rows) in slots {
            let owner = t.node_name(map.owner_of_slot(s));
            assert_eq!(
                owner, *name,
                "{rows} rows of slot {s} lie on `{name}`, which the slot map gives to `{owner}`"
            );
            n += rows;
        }
        held.insert(name.to_string(), n);
    }
    held
}

/// Every key through each proxy holds what the workers' logs say (keys past `touched` as
/// loaded, up to `rows`).
async fn check_keys(pools: &[&Pool], table: &str, mut expected: Expected, touched: i64, rows: i64) {
    for k in touched + 1..=rows {
        expected.insert(k, Some(k));
    }
    keys_match(pools, table, &expected).await;
}

fn within_one_of_share(slots: &HashMap<String, usize>, nodes: &[&str]) {
    let share = 1024 / nodes.len();
    for n in nodes {
        let have = slots.get(*n).copied().unwrap_or(0);
        assert!(
            have == share || have == share + 1,
            "`{n}` holds {have} slots, its share is {share} (or one more): {slots:?}"
        );
    }
    assert_eq!(
        slots.values().sum::<usize>(),
        1024,
        "slots on nodes not in service: {slots:?}"
    );
}

#[tokio::test]
async fn a_node_is_added_then_another_drained_and_removed_under_load_through_two_proxies() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(NODES);
    let meta = "rb_meta_el";
    let table = "t_el";
    fresh_meta(c, meta).await;
    let four = [("ds0", 0), ("ds1", 1), ("ds2", 2), ("ds3", 3)];
    let tables = format!(
        "[tables.{table}]\nrule = \"hash_slot\"\ncolumn = \"id\"\nslots = [{{ slots = \"0-255\", node = \"ds0\" }}, \
         {{ slots = \"256-511\", node = \"ds1\" }}, {{ slots = \"512-767\", node = \"ds2\" }}, {{ slots = \"768-1023\", node = \"ds3\" }}]\n"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let a = watching(&dir, "a", rules_over(c, meta, &four, &tables));
    let b = watching(&dir, "b", rules_over(c, meta, &four, &tables));
    let (pool_a, pool_b) = (a.pool(), b.pool());
    let rows = 20_000;
    load_all(c, &pool_a, table, rows).await;
    let keys = 2_000;
    let workers = Workers::start(table, 8, keys, &[pool_a.clone(), pool_b.clone()]);
    workers.write(100).await;
    let mut ops_a = ops(a.admin_port.expect("admin")).await;
    let mut ops_b = ops(b.admin_port.expect("admin")).await;

    // A fifth node with only its empty database: its share, a fifth of every node's slots.
    ops_a
        .query_drop(format!("ADD NODE ds4 '{}' REBALANCE", c.url(NEW)))
        .await
        .expect("ADD NODE ds4 ... REBALANCE");
    // The other proxy learns of the node from the metadata, and sees the plan.
    let moves = until_plan(&mut ops_b, "done", Duration::from_secs(240)).await;
    assert!(
        moves
            .iter()
            .all(|m| m["target"] == "ds4" && m["step"] == "done"),
        "{moves:?}"
    );
    settled(&[&a, &b], table).await;
    workers.write(100).await;
    let five = [("ds0", 0), ("ds1", 1), ("ds2", 2), ("ds3", 3), ("ds4", NEW)];
    let names5: Vec<&str> = five.iter().map(|n| n.0).collect();
    for p in [&a, &b] {
        within_one_of_share(&slots_per_node(p, table), &names5);
    }
    // Exactly its share moved, so about a fifth of the rows: within one point of 20%.
    let held = rows_where_their_slots_say(c, &a, table, &five).await;
    let total: i64 = held.values().sum();
    let moved = held["ds4"] as f64 / total as f64;
    assert!(
        (moved - 0.20).abs() <= 0.01,
        "{:.2}% of the rows moved to the fifth node: {held:?}",
        moved * 100.0
    );

    // A node in service cannot be removed.
    let refused = expect_code(
        ops_a.query_drop("REMOVE NODE ds1").await,
        1235,
        "REMOVE NODE before a drain",
    );
    assert!(refused.contains("DRAIN NODE ds1"), "{refused}");

    // Drained through the other proxy: every slot of ds1 to the other four.
    ops_b
        .query_drop("DRAIN NODE ds1")
        .await
        .expect("DRAIN NODE ds1");
    let moves = until_plan(&mut ops_a, "done", Duration::from_secs(240)).await;
    assert!(moves.iter().all(|m| m["source"] == "ds1"), "{moves:?}");
    settled(&[&a, &b], table).await;
    workers.write(100).await;
    let left = [("ds0", 0), ("ds2", 2), ("ds3", 3), ("ds4", NEW)];
    let names4: Vec<&str> = left.iter().map(|n| n.0).collect();
    for p in [&a, &b] {
        within_one_of_share(&slots_per_node(p, table), &names4);
    }
    assert_eq!(
        count_on(c, 1, table, "1 = 1").await,
        0,
        "ds1 keeps rows after its drain"
    );

    // Now it can go, from every proxy's rules.
    ops_a
        .query_drop("REMOVE NODE ds1")
        .await
        .expect("REMOVE NODE ds1");
    let start = Instant::now();
    while [&a, &b].iter().any(|p| {
        let t = p.shared.topology();
        t.node_index("ds1").is_some_and(|i| !t.nodes[i].retired)
    }) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "a proxy still has ds1"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    workers.write(100).await;
    let (expected, failed, writes) = workers.stop().await;
    assert!(writes > 300, "only {writes} writes");
    no_client_failed(&failed);
    check_keys(&[&pool_a, &pool_b], table, expected, keys, rows).await;
    rows_where_their_slots_say(c, &b, table, &left).await;
    drop((ops_a, ops_b));
    pool_a.disconnect().await.ok();
    pool_b.disconnect().await.ok();
}

#[tokio::test]
async fn moves_that_share_no_node_run_side_by_side_and_a_plan_is_paused_and_aborted() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(NODES);
    let meta = "rb_meta_par";
    let table = "t_par";
    fresh_meta(c, meta).await;
    let four = [("ds0", 0), ("ds1", 1), ("ds2", 2), ("ds3", 3)];
    let tables = format!(
        "[tables.{table}]\nrule = \"hash_slot\"\ncolumn = \"id\"\nslots = [{{ slots = \"0-511\", node = \"ds0\" }}, \
         {{ slots = \"512-1023\", node = \"ds1\" }}]\n"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let a = watching(&dir, "a", rules_over(c, meta, &four, &tables));
    let pool = a.pool();
    load_all(c, &pool, table, 4_000).await;
    let mut ops_a = ops(a.admin_port.expect("admin")).await;

    // ds0 and ds1 each give half to ds2 and ds3: two moves with no node in common, run at
    // once (their backfills held, so both are seen under way together).
    shardproxy::hooks::hold_migration_batches(table, Some(Duration::from_millis(200)));
    ops_a.query_drop("REBALANCE").await.expect("REBALANCE");
    let start = Instant::now();
    loop {
        let rows = plan_rows(&mut ops_a).await;
        let under_way = rows.iter().filter(|m| m["step"] == "backfill").count();
        if under_way == 2 {
            let pairs: Vec<(&str, &str)> = rows
                .iter()
                .filter(|m| m["step"] == "backfill")
                .map(|m| (m["source"].as_str(), m["target"].as_str()))
                .collect();
            let mut nodes: Vec<&str> = pairs.iter().flat_map(|(s, t)| [*s, *t]).collect();
            nodes.sort();
            nodes.dedup();
            assert_eq!(
                nodes.len(),
                4,
                "two moves under way share a node: {pairs:?}"
            );
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never two moves under way at once: {rows:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shardproxy::hooks::hold_migration_batches(table, None);
    until_plan(&mut ops_a, "done", Duration::from_secs(120)).await;
    within_one_of_share(&slots_per_node(&a, table), &["ds0", "ds1", "ds2", "ds3"]);
    rows_where_their_slots_say(c, &a, table, &four).await;

    // A plan paused starts nothing more; aborted, its moves under way go back and the rest
    // are dropped.
    shardproxy::hooks::hold_migration_batches(table, Some(Duration::from_millis(300)));
    ops_a
        .query_drop("DRAIN NODE ds3")
        .await
        .expect("DRAIN NODE ds3");
    ops_a.query_drop("PAUSE REBALANCE").await.expect("PAUSE");
    expect_code(
        ops_a.query_drop("PAUSE REBALANCE").await,
        1235,
        "a second PAUSE",
    );
    let rows = until_plan(&mut ops_a, "paused", Duration::from_secs(10)).await;
    assert!(rows.iter().any(|m| m["step"] == "queued"), "{rows:?}");
    expect_code(
        ops_a.query_drop("MIGRATE SLOTS 0-10 OF t_par TO ds3").await,
        1235,
        "a MIGRATE beside a plan",
    );
    ops_a
        .query_drop("ABORT REBALANCE")
        .await
        .expect("ABORT REBALANCE");
    shardproxy::hooks::hold_migration_batches(table, None);
    let rows = until_plan(&mut ops_a, "aborted", Duration::from_secs(60)).await;
    assert!(
        rows.iter()
            .all(|m| ["dropped", "aborted"].contains(&m["step"].as_str())),
        "{rows:?}"
    );
    settled(&[&a], table).await;
    within_one_of_share(&slots_per_node(&a, table), &["ds0", "ds1", "ds2", "ds3"]);
    let held = rows_where_their_slots_say(c, &a, table, &four).await;
    assert_eq!(held.values().sum::<i64>(), 4_000, "{held:?}");
    pool.disconnect().await.ok();
}

#[tokio::test]
async fn a_drain_moves_the_nodes_directory_tenants_and_then_the_node_can_go() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(NODES);
    let meta = "rb_meta_dir";
    fresh_meta(c, meta).await;
    let three = [("ds0", 0), ("ds1", 1), ("ds2", 2)];
    // Tenants 7 and 8 live on ds1 by their entries, 9 on ds0; 11 and 12 on ds1 and 13 on
    // ds2 by the lookup table on ds0; the rest fall back to ds0.
    let tables = "[tables.t_dten]\nrule = \"directory\"\ncolumn = \"tenant_id\"\n\
         entries = { \"7\" = \"ds1\", \"8\" = \"ds1\", \"9\" = \"ds0\" }\n\
         lookup = { node = \"ds0\", table = \"t_dten_nodes\", key_column = \"tenant_id\", node_column = \"node\" }\n\
         fallback = { rule = \"single\", node = \"ds0\" }\n";
    {
        let ds0 = c.direct(0);
        let mut d = ds0.get_conn().await.expect("ds0");
        for sql in [
            "DROP TABLE IF EXISTS t_dten_nodes",
            "CREATE TABLE t_dten_nodes (tenant_id INT PRIMARY KEY, node VARCHAR(16) NOT NULL)",
            "INSERT INTO t_dten_nodes VALUES (11, 'ds1'), (12, 'ds1'), (13, 'ds2'), (7, 'ds2')",
        ] {
            d.query_drop(sql).await.expect("the lookup table");
        }
        drop(d);
        ds0.disconnect().await.ok();
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let a = watching(&dir, "a", rules_over(c, meta, &three, tables));
    let pool = a.pool();
    drop_on(c, &[0, 1, 2], "t_dten").await;
    let mut conn = pool.get_conn().await.expect("proxy");
    conn.query_drop(
        "CREATE TABLE t_dten (tenant_id INT NOT NULL, id INT NOT NULL, v INT, PRIMARY KEY (tenant_id, id))",
    )
    .await
    .expect("create");
    for t in [7, 8, 9, 10, 11, 12, 13] {
        let values: Vec<String> = (1..=200).map(|i| format!("({t}, {i}, {i})")).collect();
        conn.query_drop(format!("INSERT INTO t_dten VALUES {}", values.join(",")))
            .await
            .expect("load");
    }
    let mut ops_a = ops(a.admin_port.expect("admin")).await;
    // The plan, dry: one key move each, to the nodes with the fewest of the table's entries,
    // the entries' keys first (7's entry wins over its lookup row).
    let plan: Vec<String> = ops_a
        .query_map("DRAIN NODE ds1 DRY RUN", |r: mysql_async::Row| {
            r.get::<String, _>(1).unwrap_or_default()
        })
        .await
        .expect("DRAIN NODE ds1 DRY RUN");
    assert_eq!(
        plan,
        vec![
            "MIGRATE KEY '7' OF t_dten TO ds2".to_string(),
            "MIGRATE KEY '8' OF t_dten TO ds0".to_string(),
            "MIGRATE KEY '11' OF t_dten TO ds2".to_string(),
            "MIGRATE KEY '12' OF t_dten TO ds0".to_string(),
        ]
    );
    ops_a
        .query_drop("DRAIN NODE ds1")
        .await
        .expect("DRAIN NODE ds1");
    until_plan(&mut ops_a, "done", Duration::from_secs(120)).await;
    let t = a.shared.topology();
    let Some(shardproxy::config::TableRule::Directory(d)) = t.table("t_dten") else {
        panic!("t_dten is not a directory table");
    };
    let on = |k: &str| {
        d.entries
            .get(k.as_bytes())
            .map(|n| t.node_name(*n).to_string())
    };
    assert_eq!(on("7").as_deref(), Some("ds2"));
    assert_eq!(on("8").as_deref(), Some("ds0"));
    assert_eq!(on("11").as_deref(), Some("ds2"));
    assert_eq!(on("12").as_deref(), Some("ds0"));
    assert_eq!(
        on("13"),
        None,
        "a key placed elsewhere by the lookup table moved"
    );
    assert_eq!(
        count_on(c, 1, "t_dten", "1 = 1").await,
        0,
        "ds1 keeps tenants"
    );
    assert_eq!(count_on(c, 2, "t_dten", "tenant_id = 7").await, 200);
    assert_eq!(count_on(c, 0, "t_dten", "tenant_id = 8").await, 200);
    assert_eq!(count_on(c, 2, "t_dten", "tenant_id IN (11, 13)").await, 400);
    assert_eq!(count_on(c, 0, "t_dten", "tenant_id = 12").await, 200);
    // Every tenant reads whole through the proxy.
    let n: Vec<(i64, i64)> = conn
        .query("SELECT tenant_id, COUNT(*) FROM t_dten GROUP BY tenant_id ORDER BY tenant_id")
        .await
        .expect("counts");
    assert_eq!(n, [7, 8, 9, 10, 11, 12, 13].map(|t| (t, 200)).to_vec());
    drop(conn);
    ops_a
        .query_drop("REMOVE NODE ds1")
        .await
        .expect("REMOVE NODE ds1 after its drain");
    let t = a.shared.topology();
    assert!(t.node_index("ds1").is_none_or(|i| t.nodes[i].retired));
    pool.disconnect().await.ok();
}
