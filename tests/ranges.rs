//! A range table's ranges changed while it serves, on real MariaDB nodes whose binary log is
//! on: `SPLIT RANGE` cuts a range where it is, `MIGRATE RANGE` moves one under writes through
//! two proxies, `MERGE RANGE` joins neighbours on one node, `DRAIN NODE` moves a node's ranges
//! off it. Afterwards every row is on its range's node, both proxies read and write it there,
//! and no statement failed or row was lost. Its own test binary: ds0-ds2 hold data, node 3
//! the metadata schema.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::moves::*;
use common::workload::*;
use common::*;
use mysql_async::prelude::Queryable;

fn cluster() -> &'static Cluster {
    Cluster::shared_binlog(4)
}

/// The ranges each proxy runs for `table`, as `(lowest key, node, moving)`.
fn ranges_of(p: &Proxy, table: &str) -> Vec<(String, String, bool)> {
    let t = p.shared.topology();
    let Some(shardproxy::config::TableRule::Range { map, .. }) = t.table(table) else {
        panic!("{table} is not a range table");
    };
    (0..map.len())
        .map(|i| {
            (
                map.bounds(i).0.map(|k| map.word(k)).unwrap_or_default(),
                t.node_name(map.owner(i)).to_string(),
                map.moves().iter().any(|m| m.index == i),
            )
        })
        .collect()
}

/// Waits until both proxies run these ranges (none moving).
async fn until_ranges(proxies: &[&Proxy], table: &str, want: &[(&str, &str)]) {
    let want: Vec<(String, String, bool)> = want
        .iter()
        .map(|(k, n)| (k.to_string(), n.to_string(), false))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    for p in proxies {
        while ranges_of(p, table) != want {
            assert!(
                Instant::now() < deadline,
                "a proxy runs {:?}, not {want:?}",
                ranges_of(p, table)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test]
async fn a_range_is_split_moved_and_merged_while_two_proxies_write_it() {
    let c = cluster();
    let meta = "meta_ranges";
    let table = "t_rng";
    fresh_schema(c, meta).await;
    let tables = format!(
        "[tables.{table}]\nrule = \"range\"\ncolumn = \"id\"\n\
         ranges = [{{ below = 2001, node = \"ds0\" }}, {{ node = \"ds1\" }}]\n\n"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let a = watching(&dir, "a", rules(c, meta, &tables));
    let b = watching(&dir, "b", rules(c, meta, &tables));
    let (pool_a, pool_b) = (a.pool(), b.pool());
    const KEYS: i64 = 4000;
    load(c, &pool_a, table, KEYS).await;
    let workers = Workers::start(table, 4, KEYS, &[pool_a.clone(), pool_b.clone()]);
    workers.write(30).await;
    let mut ops_a = ops(a.admin_port.expect("admin")).await;
    let mut ops_b = ops(b.admin_port.expect("admin")).await;

    // A split moves nothing: both halves stay on ds0, on both proxies.
    ops_a
        .query_drop(format!("SPLIT RANGE 1001 OF {table}"))
        .await
        .expect("SPLIT RANGE");
    until_ranges(
        &[&a, &b],
        table,
        &[("", "ds0"), ("1001", "ds0"), ("2001", "ds1")],
    )
    .await;
    let e = ops_b
        .query_drop(format!("SPLIT RANGE 1001 OF {table}"))
        .await
        .expect_err("split twice");
    assert!(e.to_string().contains("starts at 1001 already"), "{e}");

    // The new range moves to ds2 under the writes, its changes read from ds0's binary log.
    ops_b
        .query_drop(format!(
            "MIGRATE RANGE 1500 OF {table} TO ds2 RATE 4000 AUTO"
        ))
        .await
        .expect("MIGRATE RANGE");
    let m = until_step(&mut ops_b, "1", "done", Duration::from_secs(180)).await;
    assert_eq!(m["slots"], "range from '1001'");
    assert_eq!(
        m.get("capture").map(String::as_str),
        Some("binlog"),
        "{m:?}"
    );
    until_ranges(
        &[&a, &b],
        table,
        &[("", "ds0"), ("1001", "ds2"), ("2001", "ds1")],
    )
    .await;
    workers.write(30).await;

    // Neighbours on two nodes do not merge; on one node they do.
    let e = ops_a
        .query_drop(format!("MERGE RANGE 2001 OF {table}"))
        .await
        .expect_err("merge across nodes");
    assert!(e.to_string().contains("different nodes"), "{e}");
    ops_a
        .query_drop(format!("SPLIT RANGE 3001 OF {table}"))
        .await
        .expect("SPLIT RANGE 3001");
    until_ranges(
        &[&a, &b],
        table,
        &[
            ("", "ds0"),
            ("1001", "ds2"),
            ("2001", "ds1"),
            ("3001", "ds1"),
        ],
    )
    .await;
    ops_b
        .query_drop(format!("MERGE RANGE 3001 OF {table}"))
        .await
        .expect("MERGE RANGE");
    until_ranges(
        &[&a, &b],
        table,
        &[("", "ds0"), ("1001", "ds2"), ("2001", "ds1")],
    )
    .await;
    let shown: Vec<HashMap<String, String>> =
        named_rows(&mut ops_a, &format!("SHOW RANGES FOR {table}")).await;
    let shown: Vec<(&str, &str, &str)> = shown
        .iter()
        .map(|r| (r["from"].as_str(), r["below"].as_str(), r["node"].as_str()))
        .collect();
    assert_eq!(
        shown,
        vec![
            ("-inf", "1001", "ds0"),
            ("1001", "2001", "ds2"),
            ("2001", "+inf", "ds1")
        ]
    );
    workers.write(30).await;

    // Draining ds2 moves its range to the node holding fewest of the table's (ds0, which
    // then holds both neighbours: they merge).
    let plan = dry_run(&mut ops_a, "DRAIN NODE ds2 DRY RUN").await;
    assert_eq!(
        plan,
        vec![format!("MIGRATE RANGE '1001' OF {table} TO ds0")]
    );
    ops_a
        .query_drop("DRAIN NODE ds2")
        .await
        .expect("DRAIN NODE");
    let m = until_step(&mut ops_a, "2", "done", Duration::from_secs(180)).await;
    assert_eq!(
        (m["slots"].as_str(), m["target"].as_str()),
        ("range from '1001'", "ds0")
    );
    until_ranges(
        &[&a, &b],
        table,
        &[("", "ds0"), ("1001", "ds0"), ("2001", "ds1")],
    )
    .await;
    workers.write(30).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Err(e) = ops_b
        .query_drop(format!("MERGE RANGE 1001 OF {table}"))
        .await
    {
        // The drain's plan ends just after its move.
        assert!(Instant::now() < deadline, "{e}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    until_ranges(&[&a, &b], table, &[("", "ds0"), ("2001", "ds1")]).await;
    workers.write(30).await;

    let (expected, failed, writes) = workers.stop().await;
    no_client_failed(&failed);
    assert!(writes > 200, "the workers wrote little: {writes}");
    keys_match(&[&pool_a, &pool_b], table, &expected).await;
    // Every row once, on its range's node.
    let live = |lo: i64, hi: i64| {
        expected
            .iter()
            .filter(|(k, v)| (lo..hi).contains(*k) && v.is_some())
            .count() as i64
    };
    assert_eq!(count_on(c, 2, table, "TRUE").await, 0);
    assert_eq!(count_on(c, 1, table, "id < 2001").await, 0);
    assert_eq!(count_on(c, 0, table, "TRUE").await, live(1, 2001));
    assert_eq!(count_on(c, 1, table, "TRUE").await, live(2001, KEYS + 1));
    // A move that names a range the table no longer has (written around the admin here, as
    // a move queued before a change would be) is aborted, not tried forever.
    let mut meta_conn = mysql_async::Conn::new(
        mysql_async::Opts::from_url(&c.root_url(3, meta)).expect("metadata URL"),
    )
    .await
    .expect("metadata");
    meta_conn
        .query_drop(
            "INSERT INTO shard_migrations (table_name, first_slot, last_slot, key_value, source, \
             target, step, rate, auto_cutover, range_move) \
             VALUES ('t_rng', 1, 1, '1500', 'ds1', 'ds2', 'prepare', 0, 1, 1)",
        )
        .await
        .expect("a stale move");
    let id: u64 = meta_conn
        .query_first("SELECT LAST_INSERT_ID()")
        .await
        .expect("its id")
        .expect("an id");
    let m = until_step(
        &mut ops_a,
        &id.to_string(),
        "aborted",
        Duration::from_secs(30),
    )
    .await;
    assert!(
        m["message"].contains("no longer as the move named it"),
        "{m:?}"
    );
    drop((ops_a, ops_b));
    pool_a.disconnect().await.ok();
    pool_b.disconnect().await.ok();
}

/// `[balance]` upkeep by size: a range over `range_split_rows` is split at its middle key,
/// and two cold neighbours on one node under `range_merge_rows` together merge once the
/// table's last change is `cooldown_secs` old; nothing moves, and nothing is undone.
#[tokio::test]
async fn a_big_range_is_split_at_its_middle_and_small_cold_neighbours_merged() {
    let c = cluster();
    let meta = "meta_range_size";
    let table = "t_rsize";
    fresh_schema(c, meta).await;
    let tables = format!(
        "[balance]\nmode = \"auto\"\ncooldown_secs = 3\nrange_split_rows = 2000\n\
         range_merge_rows = 600\nrange_check_secs = 1\n\n\
         [tables.{table}]\nrule = \"range\"\ncolumn = \"id\"\n\
         ranges = [{{ below = 1001, node = \"ds0\" }}, {{ below = 1201, node = \"ds1\" }}, \
         {{ below = 1401, node = \"ds1\" }}, {{ node = \"ds2\" }}]\n\n"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let a = watching(&dir, "a", rules(c, meta, &tables));
    let b = watching(&dir, "b", rules(c, meta, &tables));
    let pool = a.pool();
    load(c, &pool, table, 5000).await;
    // [1401, +inf) holds 3600 rows: split near 3201. Then [1001, 1201) and [1201, 1401), 200
    // rows each on ds1, merge; the two halves on ds2 are too big to.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mid = loop {
        let now = ranges_of(&a, table);
        let shape: Vec<(&str, &str)> = now
            .iter()
            .map(|(k, n, _)| (k.as_str(), n.as_str()))
            .collect();
        if let [("", "ds0"), ("1001", "ds1"), ("1401", "ds2"), (mid, "ds2")] = shape[..] {
            break mid.parse::<i64>().expect("an integer bound");
        }
        assert!(Instant::now() < deadline, "ranges now {now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!((2900..=3500).contains(&mid), "split at {mid}");
    let mid = mid.to_string();
    let want = [
        ("", "ds0"),
        ("1001", "ds1"),
        ("1401", "ds2"),
        (mid.as_str(), "ds2"),
    ];
    until_ranges(&[&a, &b], table, &want).await;
    // Settled: no other change in a few passes.
    tokio::time::sleep(Duration::from_secs(5)).await;
    until_ranges(&[&a, &b], table, &want).await;
    // Nothing moved: each node holds the rows it held.
    assert_eq!(count_on(c, 0, table, "TRUE").await, 1000);
    assert_eq!(count_on(c, 1, table, "TRUE").await, 400);
    assert_eq!(count_on(c, 2, table, "TRUE").await, 3600);
    let mut conn = b.pool().get_conn().await.expect("proxy");
    let n: Option<i64> = conn
        .query_first(format!("SELECT COUNT(*) FROM {table} WHERE id >= 1100"))
        .await
        .expect("count");
    assert_eq!(n, Some(3901));
    drop(conn);
    pool.disconnect().await.ok();
}
