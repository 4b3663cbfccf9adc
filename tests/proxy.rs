//! Integration tests through the proxy, against 4 real MariaDB nodes.
//!
//! Every test starts its own proxy over the binary's shared cluster and uses its own tables,
//! so the tests run concurrently. Sharded tables use `hash_slot` on `user_id` with slots
//! 0-255 on ds0, 256-511 on ds1, 512-767 on ds2, 768-1023 on ds3.

mod common;

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

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn slot_hash_matches_mariadb_crc32() {
    let c = cluster();
    let (_pool, mut conn) = direct_conn(c, 0).await;

    // (SQL expression, the value the proxy would see for it)
    let mut cases: Vec<(String, Value)> = Vec::new();
    let mut ints: Vec<i64> = vec![
        0,
        1,
        -1,
        7,
        -7,
        42,
        255,
        256,
        1023,
        1024,
        -1024,
        99_999,
        i64::from(i32::MAX),
        i64::from(i32::MIN),
        i64::MAX,
        i64::MIN + 1,
        i64::MIN,
    ];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..120 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let magnitude = (x >> (i % 60 + 1)) as i64;
        ints.push(if i % 3 == 0 { -magnitude } else { magnitude });
    }
    for i in &ints {
        cases.push((i.to_string(), Value::Int(*i)));
    }
    for u in [
        u64::MAX,
        u64::MAX - 1,
        1u64 << 63,
        9_223_372_036_854_775_808,
    ] {
        cases.push((u.to_string(), Value::UInt(u)));
    }
    let strings = [
        "",
        "a",
        "42",
        "-7",
        "hello world",
        "O'Brien",
        "back\\slash",
        "tab\there",
        "ünïcødé",
        "日本語のテキスト",
        "emoji 😀🎉",
        "Ελληνικά",
        "кириллица",
        "user-000123",
        "  leading and trailing  ",
        "a,b),(c",
        "NULL",
        "0042",
        "4.20",
        "x".repeat(300).as_str(),
    ]
    .map(String::from);
    for s in &strings {
        cases.push((sql_string(s), Value::Bytes(s.as_bytes().to_vec())));
    }
    // Decimal literals and decimal text: MySQL hashes them as it prints them.
    for d in [
        "3.50",
        "-3.50",
        "0.1",
        "0.000001",
        "100.000",
        "12345678901234.123456",
        "-0.5",
        "1.0",
    ] {
        cases.push((d.to_string(), Value::Bytes(d.as_bytes().to_vec())));
        cases.push((format!("'{d}'"), Value::Bytes(d.as_bytes().to_vec())));
    }
    // Dates, as strings and as date/time values.
    let dates = [
        (2024, 1, 31),
        (1999, 12, 31),
        (2000, 2, 29),
        (1970, 1, 1),
        (2038, 1, 19),
        (9999, 12, 31),
    ];
    for (y, m, d) in dates {
        let text = format!("{y:04}-{m:02}-{d:02}");
        cases.push((format!("'{text}'"), Value::Bytes(text.as_bytes().to_vec())));
        cases.push((format!("DATE '{text}'"), Value::Date(y, m, d, 0, 0, 0, 0)));
        cases.push((
            format!("TIMESTAMP '{text} 13:05:09'"),
            Value::Date(y, m, d, 13, 5, 9, 0),
        ));
        cases.push((
            format!("CAST('{text} 01:02:03.000123' AS DATETIME(6))"),
            Value::Date(y, m, d, 1, 2, 3, 123),
        ));
    }
    cases.push((
        "CAST('-26:03:04' AS TIME)".into(),
        Value::Time(true, 1, 2, 3, 4, 0),
    ));
    cases.push((
        "CAST('12:34:56' AS TIME)".into(),
        Value::Time(false, 0, 12, 34, 56, 0),
    ));
    for d in [1.5f64, -0.25, 3.0, 1024.0] {
        cases.push((format!("{d:?}e0"), Value::Double(d)));
    }
    assert!(cases.len() >= 200, "only {} cases", cases.len());

    let mut mismatches = Vec::new();
    for (expr, value) in &cases {
        let db: Option<u64> = conn
            .query_first(format!("SELECT CRC32({expr}) % 1024"))
            .await
            .unwrap_or_else(|e| panic!("SELECT CRC32({expr}): {e}"));
        let ours = slot_of(value).map(u64::from);
        if db != ours {
            mismatches.push(format!(
                "CRC32({expr}) % 1024 = {db:?}, slot_of({value:?}) = {ours:?}"
            ));
        }
    }
    // Integers and strings bound as binary-protocol parameters hash the same way.
    for (_, value) in cases
        .iter()
        .filter(|(_, v)| matches!(v, Value::Int(_) | Value::UInt(_) | Value::Bytes(_)))
    {
        let db: Option<u64> = conn
            .exec_first("SELECT CRC32(?) % 1024", (value.clone(),))
            .await
            .expect("SELECT CRC32(?)");
        let ours = slot_of(value).map(u64::from);
        if db != ours {
            mismatches.push(format!(
                "CRC32(? = {value:?}) % 1024 = {db:?}, slot_of = {ours:?}"
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} slot computations differ from MariaDB:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------

async fn point_reads_and_writes(table: &str, prepared: bool) {
    let c = cluster();
    let proxy = start_proxy(c, &sharded(table));
    let mut conn = proxy.conn().await;
    conn.query_drop(format!(
        "CREATE TABLE {table} (user_id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL, qty INT NOT NULL)"
    ))
    .await
    .expect("CREATE TABLE through the proxy");
    for n in 0..NODES {
        assert!(table_exists(c, n, table).await, "ds{n} lacks {table}");
    }

    let mut keys: Vec<i64> = (0..NODES).map(|n| key_on_node(&L, n)).collect();
    keys.push(negative_key_on(2));
    keys.push(9_000_000_000_123);
    let insert = format!("INSERT INTO {table} (user_id, name, qty) VALUES (?, ?, ?)");
    let select = format!("SELECT name, qty FROM {table} WHERE user_id = ?");
    let update = format!("UPDATE {table} SET qty = qty + ? WHERE user_id = ?");
    let delete = format!("DELETE FROM {table} WHERE user_id = ?");

    for &k in &keys {
        let name = format!("name-{k}-é");
        if prepared {
            conn.exec_drop(&insert, (k, &name, 1)).await
        } else {
            conn.query_drop(format!(
                "INSERT INTO {table} (user_id, name, qty) VALUES ({k}, {}, 1)",
                sql_string(&name)
            ))
            .await
        }
        .unwrap_or_else(|e| panic!("INSERT key {k}: {e}"));
        assert_eq!(conn.affected_rows(), 1, "INSERT key {k}");

        let got: Vec<(String, i64)> = if prepared {
            conn.exec(&select, (k,)).await
        } else {
            conn.query(format!("SELECT name, qty FROM {table} WHERE user_id = {k}"))
                .await
        }
        .unwrap_or_else(|e| panic!("SELECT key {k}: {e}"));
        assert_eq!(got, vec![(name.clone(), 1)], "SELECT key {k}");

        if prepared {
            conn.exec_drop(&update, (10, k)).await
        } else {
            conn.query_drop(format!(
                "UPDATE {table} SET qty = qty + 10 WHERE user_id = {k}"
            ))
            .await
        }
        .unwrap_or_else(|e| panic!("UPDATE key {k}: {e}"));
        assert_eq!(conn.affected_rows(), 1, "UPDATE key {k}");
        let got: Vec<(String, i64)> = if prepared {
            conn.exec(&select, (k,)).await
        } else {
            conn.query(format!("SELECT name, qty FROM {table} WHERE user_id = {k}"))
                .await
        }
        .unwrap_or_else(|e| panic!("SELECT key {k}: {e}"));
        assert_eq!(got, vec![(name.clone(), 11)], "SELECT key {k} after UPDATE");
    }

    // Each row lives on its owner only.
    for n in 0..NODES {
        let (_pool, mut d) = direct_conn(c, n).await;
        let rows: Vec<(i64, String, i64)> = d
            .query(format!(
                "SELECT user_id, name, qty FROM {table} ORDER BY user_id"
            ))
            .await
            .expect("direct read");
        let mut expected: Vec<(i64, String, i64)> = keys
            .iter()
            .filter(|k| node_of_key(&L, **k) == n)
            .map(|k| (*k, format!("name-{k}-é"), 11))
            .collect();
        expected.sort();
        assert_eq!(rows, expected, "rows of {table} on ds{n}");
    }

    for &k in &keys {
        if prepared {
            conn.exec_drop(&delete, (k,)).await
        } else {
            conn.query_drop(format!("DELETE FROM {table} WHERE user_id = {k}"))
                .await
        }
        .unwrap_or_else(|e| panic!("DELETE key {k}: {e}"));
        assert_eq!(conn.affected_rows(), 1, "DELETE key {k}");
        let got: Vec<(String, i64)> = conn
            .query(format!("SELECT name, qty FROM {table} WHERE user_id = {k}"))
            .await
            .expect("SELECT after DELETE");
        assert!(
            got.is_empty(),
            "key {k} still readable after DELETE: {got:?}"
        );
        let (_pool, mut d) = direct_conn(c, node_of_key(&L, k)).await;
        let left: Option<i64> = d
            .query_first(format!("SELECT COUNT(*) FROM {table} WHERE user_id = {k}"))
            .await
            .expect("direct count");
        assert_eq!(left, Some(0), "key {k} still on its node after DELETE");
    }
    // The repeated shapes ran on their cached plans (keys on every node, each answered
    // right above), all but a shape's first execution and the negative key's own shape.
    use std::sync::atomic::Ordering::Relaxed;
    for shape in [
        format!("SELECT name, qty FROM {table} WHERE user_id = ?"),
        format!("UPDATE {table} SET qty = qty + ? WHERE user_id = ?"),
    ] {
        let e = proxy
            .shared
            .plans
            .entry(&shape)
            .expect("a plan-cache entry");
        assert!(
            e.cached_executions.load(Relaxed) >= 4,
            "{shape}: {} of {} executions on the cached plan ({})",
            e.cached_executions.load(Relaxed),
            e.executions.load(Relaxed),
            e.plan()
        );
    }
    conn.disconnect().await.ok();
}

#[tokio::test]
async fn point_reads_and_writes_text_protocol() {
    point_reads_and_writes("t_point_text", false).await;
}

#[tokio::test]
async fn point_reads_and_writes_prepared() {
    point_reads_and_writes("t_point_ps", true).await;
}

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn multi_row_insert_splits_rows_by_node() {
    let c = cluster();
    let proxy = start_proxy(
        c,
        &format!("{}{}", sharded("t_multi"), sharded("t_multi_ps")),
    );
    let mut conn = proxy.conn().await;
    for t in ["t_multi", "t_multi_ps"] {
        conn.query_drop(format!(
            "CREATE TABLE {t} (user_id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(64) NOT NULL)"
        ))
        .await
        .expect("CREATE TABLE");
    }

    // 40 rows, 10 per node, interleaved; some values look like row separators.
    let keys = spread_keys(10, 0);
    let value = |k: i64| {
        if k % 3 == 0 {
            format!("v{k}), ('x")
        } else {
            format!("v{k}")
        }
    };
    let rows: Vec<String> = keys
        .iter()
        .map(|k| format!("({k}, {})", sql_string(&value(*k))))
        .collect();
    conn.query_drop(format!(
        "INSERT INTO t_multi (user_id, v) VALUES {}",
        rows.join(", ")
    ))
    .await
    .expect("multi-row INSERT");
    assert_eq!(conn.affected_rows(), 40, "affected rows of a 40-row INSERT");
    for n in 0..NODES {
        let mut expected: Vec<(i64, String)> = keys
            .iter()
            .filter(|k| node_of_key(&L, **k) == n)
            .map(|k| (*k, value(*k)))
            .collect();
        expected.sort();
        assert_eq!(expected.len(), 10);
        assert_eq!(
            direct_rows(c, n, "t_multi").await,
            expected,
            "t_multi on ds{n}"
        );
    }

    // The same with placeholders: 12 rows, 3 per node.
    let keys = spread_keys(3, 10);
    let placeholders = vec!["(?, ?)"; keys.len()].join(", ");
    let mut params: Vec<Value> = Vec::new();
    for k in &keys {
        params.push(Value::Int(*k));
        params.push(Value::Bytes(value(*k).into_bytes()));
    }
    conn.exec_drop(
        format!("INSERT INTO t_multi_ps (user_id, v) VALUES {placeholders}"),
        Params::Positional(params),
    )
    .await
    .expect("prepared multi-row INSERT");
    assert_eq!(
        conn.affected_rows(),
        12,
        "affected rows of a 12-row prepared INSERT"
    );
    for n in 0..NODES {
        let mut expected: Vec<(i64, String)> = keys
            .iter()
            .filter(|k| node_of_key(&L, **k) == n)
            .map(|k| (*k, value(*k)))
            .collect();
        expected.sort();
        assert_eq!(expected.len(), 3);
        assert_eq!(
            direct_rows(c, n, "t_multi_ps").await,
            expected,
            "t_multi_ps on ds{n}"
        );
    }
    conn.disconnect().await.ok();
}

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn update_and_delete_with_and_without_key() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_upd"));
    let mut conn = proxy.conn().await;
    conn.query_drop(
        "CREATE TABLE t_upd (user_id BIGINT NOT NULL PRIMARY KEY, grp INT NOT NULL, v VARCHAR(32) NOT NULL)",
    )
    .await
    .expect("CREATE TABLE");
    let keys = spread_keys(6, 0); // 24 rows
    let rows: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("({k}, {}, 'init')", i % 3))
        .collect();
    conn.query_drop(format!(
        "INSERT INTO t_upd (user_id, grp, v) VALUES {}",
        rows.join(", ")
    ))
    .await
    .expect("INSERT");
    let grp_of = |k: i64| keys.iter().position(|x| *x == k).expect("key") % 3;
    let count_in = |g: usize| keys.iter().filter(|k| grp_of(**k) == g).count() as u64;

    // Without the key: every node runs it, affected rows add up.
    conn.query_drop("UPDATE t_upd SET v = 'g1' WHERE grp = 1")
        .await
        .expect("UPDATE without key");
    assert_eq!(
        conn.affected_rows(),
        count_in(1),
        "UPDATE ... WHERE grp = 1"
    );
    conn.exec_drop("UPDATE t_upd SET v = ? WHERE grp = ?", ("g0", 0))
        .await
        .expect("prepared UPDATE without key");
    assert_eq!(
        conn.affected_rows(),
        count_in(0),
        "prepared UPDATE ... WHERE grp = 0"
    );
    conn.query_drop("DELETE FROM t_upd WHERE grp = 2")
        .await
        .expect("DELETE without key");
    assert_eq!(
        conn.affected_rows(),
        count_in(2),
        "DELETE ... WHERE grp = 2"
    );
    conn.query_drop("UPDATE t_upd SET v = 'none' WHERE grp = 99")
        .await
        .expect("UPDATE matching nothing");
    assert_eq!(conn.affected_rows(), 0, "UPDATE matching nothing");

    let mut expected: Vec<(i64, String)> = keys
        .iter()
        .filter(|k| grp_of(**k) != 2)
        .map(|k| (*k, format!("g{}", grp_of(*k))))
        .collect();

    // With the key: only the owner's rows change.
    let on1: Vec<i64> = keys
        .iter()
        .copied()
        .filter(|k| node_of_key(&L, *k) == 1 && grp_of(*k) != 2)
        .take(2)
        .collect();
    assert_eq!(on1.len(), 2);
    conn.query_drop(format!(
        "UPDATE t_upd SET v = 'keyed' WHERE user_id IN ({}, {})",
        on1[0], on1[1]
    ))
    .await
    .expect("UPDATE by keys");
    assert_eq!(
        conn.affected_rows(),
        2,
        "UPDATE ... WHERE user_id IN (two keys on ds1)"
    );
    let other = keys
        .iter()
        .copied()
        .find(|k| node_of_key(&L, *k) == 3 && grp_of(*k) != 2)
        .expect("a key on ds3");
    conn.exec_drop("DELETE FROM t_upd WHERE user_id = ?", (other,))
        .await
        .expect("DELETE by key");
    assert_eq!(conn.affected_rows(), 1, "DELETE ... WHERE user_id = ?");
    for e in expected.iter_mut() {
        if on1.contains(&e.0) {
            e.1 = "keyed".into();
        }
    }
    expected.retain(|e| e.0 != other);

    for n in 0..NODES {
        let mut want: Vec<(i64, String)> = expected
            .iter()
            .filter(|(k, _)| node_of_key(&L, *k) == n)
            .cloned()
            .collect();
        want.sort();
        assert_eq!(direct_rows(c, n, "t_upd").await, want, "t_upd on ds{n}");
    }
    conn.disconnect().await.ok();
}

// ---------------------------------------------------------------------------------------------

/// INSERT ... SELECT whose rows must move between nodes: the SELECT is read, its rows
/// inserted where each belongs, checked on every node directly.
#[tokio::test]
async fn insert_select_moves_rows_between_nodes() {
    let c = cluster();
    // t_ins_src is not in the rules: it lives on the default node, ds0.
    let proxy = start_proxy(c, &sharded("t_ins"));
    let mut conn = proxy.conn().await;
    for sql in [
        "CREATE TABLE t_ins (user_id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(32) NOT NULL)",
        "CREATE TABLE t_ins_src (user_id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(32) NOT NULL)",
    ] {
        conn.query_drop(sql).await.expect("CREATE TABLE");
    }
    let keys = spread_keys(3, 0);
    let rows: Vec<String> = keys.iter().map(|k| format!("({k}, 'v{k}')")).collect();
    conn.query_drop(format!("INSERT INTO t_ins_src VALUES {}", rows.join(", ")))
        .await
        .expect("INSERT into the single table");

    // Into the sharded table, without a column list: each row on its key's node.
    conn.query_drop("INSERT INTO t_ins SELECT * FROM t_ins_src")
        .await
        .expect("INSERT ... SELECT into the sharded table");
    assert_eq!(conn.affected_rows(), keys.len() as u64);
    for n in 0..NODES {
        let mut want: Vec<(i64, String)> = keys
            .iter()
            .filter(|k| node_of_key(&L, **k) == n)
            .map(|k| (*k, format!("v{k}")))
            .collect();
        want.sort();
        assert_eq!(direct_rows(c, n, "t_ins").await, want, "t_ins on ds{n}");
    }
    // ON DUPLICATE KEY UPDATE and expressions of the SELECT, back into the single table.
    conn.query_drop(
        "INSERT INTO t_ins_src (user_id, v) SELECT user_id, CONCAT(v, '!') FROM t_ins ON DUPLICATE KEY UPDATE v = VALUES(v)",
    )
    .await
    .expect("INSERT ... SELECT ... ON DUPLICATE KEY UPDATE into the single table");
    let mut want: Vec<(i64, String)> = keys.iter().map(|k| (*k, format!("v{k}!"))).collect();
    want.sort();
    assert_eq!(
        direct_rows(c, 0, "t_ins_src").await,
        want,
        "t_ins_src on ds0"
    );
    // No rows: nothing inserted, an OK.
    conn.query_drop("INSERT INTO t_ins SELECT * FROM t_ins_src WHERE user_id < 0")
        .await
        .expect("INSERT ... SELECT of no rows");
    assert_eq!(conn.affected_rows(), 0);
    // Inside a transaction: rolled back with it, on every node.
    conn.query_drop("BEGIN").await.expect("BEGIN");
    conn.query_drop("DELETE FROM t_ins").await.expect("DELETE");
    conn.query_drop("INSERT INTO t_ins SELECT user_id, 'tx' FROM t_ins_src")
        .await
        .expect("INSERT ... SELECT in a transaction");
    let tx: Vec<(i64, String)> = conn
        .query("SELECT user_id, v FROM t_ins WHERE v = 'tx' ORDER BY user_id")
        .await
        .expect("read in the transaction");
    assert_eq!(tx.len(), keys.len(), "the transaction reads its own rows");
    conn.query_drop("ROLLBACK").await.expect("ROLLBACK");
    for n in 0..NODES {
        let rows = direct_rows(c, n, "t_ins").await;
        assert!(
            rows.iter().all(|(_, v)| v.starts_with('v')),
            "ds{n}: {rows:?}"
        );
        assert_eq!(
            rows.len(),
            keys.iter().filter(|k| node_of_key(&L, **k) == n).count(),
            "ds{n} after ROLLBACK"
        );
    }
    // Prepared: the bound values are the SELECT's, written into its text by the literal
    // writer; the row lands on its key's node.
    conn.exec_drop("DELETE FROM t_ins WHERE user_id = ?", (keys[0],))
        .await
        .expect("DELETE");
    conn.exec_drop(
        "INSERT INTO t_ins SELECT user_id, CONCAT(v, ?) FROM t_ins_src WHERE user_id = ?",
        ("\\' OR 1=1 -- ", keys[0]),
    )
    .await
    .expect("prepared INSERT ... SELECT across nodes");
    assert_eq!(conn.affected_rows(), 1);
    let n = node_of_key(&L, keys[0]);
    let on_node = direct_rows(c, n, "t_ins").await;
    assert!(
        on_node.contains(&(keys[0], format!("v{}!\\' OR 1=1 -- ", keys[0]))),
        "the prepared INSERT ... SELECT's row on ds{n}: {on_node:?}"
    );
    // A placeholder outside the SELECT has no statement to go to: refused clearly.
    expect_code(
        conn.exec_drop(
            "INSERT INTO t_ins SELECT * FROM t_ins_src ON DUPLICATE KEY UPDATE v = ?",
            ("x",),
        )
        .await,
        1235,
        "a placeholder in ON DUPLICATE KEY UPDATE of an INSERT ... SELECT across nodes",
    );
    conn.disconnect().await.ok();
}

#[tokio::test]
async fn refusals_and_fan_out_select() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_fan"));
    let mut conn = proxy.conn().await;
    conn.query_drop(
        "CREATE TABLE t_fan (user_id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(32) NOT NULL)",
    )
    .await
    .expect("CREATE TABLE");
    let keys = spread_keys(5, 0);
    let rows: Vec<String> = keys.iter().map(|k| format!("({k}, 'v{k}')")).collect();
    conn.query_drop(format!(
        "INSERT INTO t_fan (user_id, v) VALUES {}",
        rows.join(", ")
    ))
    .await
    .expect("INSERT");
    let k0 = keys[0];
    let target = keys_on_node(&L, 3, 50)[49];

    // Changing the shard key would move the row to another node.
    expect_code(
        conn.query_drop(format!(
            "UPDATE t_fan SET user_id = {target} WHERE user_id = {k0}"
        ))
        .await,
        1235,
        "UPDATE of the shard key",
    );
    expect_code(
        conn.query_drop("UPDATE t_fan SET user_id = user_id + 1")
            .await,
        1235,
        "UPDATE of the shard key without WHERE",
    );
    expect_code(
        conn.exec_drop(
            "UPDATE t_fan SET v = 'x', user_id = ? WHERE user_id = ?",
            (target, k0),
        )
        .await,
        1235,
        "prepared UPDATE of the shard key",
    );
    // A UNION over several nodes runs gathered on one node: MariaDB's own answer.
    let union: Vec<i64> = conn
        .query("SELECT user_id FROM t_fan UNION SELECT user_id + 1 FROM t_fan ORDER BY 1")
        .await
        .expect("SELECT ... UNION across nodes");
    let mut want: Vec<i64> = keys.iter().flat_map(|k| [*k, *k + 1]).collect();
    want.sort_unstable();
    want.dedup();
    assert_eq!(union, want, "SELECT ... UNION across nodes");
    // A locking read across nodes cannot be gathered (its copies would lock nothing).
    expect_code(
        conn.query_drop("SELECT user_id FROM t_fan UNION SELECT user_id FROM t_fan FOR UPDATE")
            .await,
        1235,
        "SELECT ... UNION ... FOR UPDATE across nodes",
    );
    // The connection is still usable, and nothing moved.
    let one: Option<i64> = conn.query_first("SELECT 1").await.expect("SELECT 1");
    assert_eq!(one, Some(1));
    let (_pool, mut d) = direct_conn(c, node_of_key(&L, k0)).await;
    let still: Option<i64> = d
        .query_first(format!("SELECT COUNT(*) FROM t_fan WHERE user_id = {k0}"))
        .await
        .expect("direct count");
    assert_eq!(still, Some(1), "the refused UPDATE changed the row");

    // A SELECT without the key is the union of every node's rows.
    let expected: BTreeSet<(i64, String)> = keys.iter().map(|k| (*k, format!("v{k}"))).collect();
    let got: Vec<(i64, String)> = conn
        .query("SELECT user_id, v FROM t_fan")
        .await
        .expect("fan-out SELECT");
    assert_eq!(
        got.len(),
        expected.len(),
        "duplicates or missing rows: {got:?}"
    );
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), expected);
    let got: Vec<(i64, String)> = conn
        .exec("SELECT user_id, v FROM t_fan WHERE v <> ?", ("nothing",))
        .await
        .expect("prepared fan-out SELECT");
    assert_eq!(
        got.len(),
        expected.len(),
        "duplicates or missing rows: {got:?}"
    );
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), expected);
    // ORDER BY + LIMIT across nodes: a k-way merge, in text and prepared form.
    let mut sorted: Vec<i64> = keys.clone();
    sorted.sort_unstable();
    let got: Vec<i64> = conn
        .query("SELECT user_id FROM t_fan ORDER BY user_id DESC LIMIT 3, 5")
        .await
        .expect("ordered merge");
    let want: Vec<i64> = sorted.iter().rev().skip(3).take(5).copied().collect();
    assert_eq!(got, want);
    let got: Vec<(i64, String)> = conn
        .exec(
            "SELECT user_id, v FROM t_fan ORDER BY v, user_id LIMIT ?, ?",
            (2, 4),
        )
        .await
        .expect("prepared ordered merge");
    let mut by_v: Vec<(i64, String)> = expected.iter().cloned().collect();
    by_v.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
    assert_eq!(got, by_v.into_iter().skip(2).take(4).collect::<Vec<_>>());
    // Aggregates across nodes.
    let (n, total, lo, hi): (i64, i64, i64, i64) = conn
        .query_first("SELECT COUNT(*), SUM(user_id), MIN(user_id), MAX(user_id) FROM t_fan")
        .await
        .expect("aggregates")
        .expect("one row");
    assert_eq!(n as usize, keys.len());
    assert_eq!(total, keys.iter().sum::<i64>());
    assert_eq!(lo, sorted[0]);
    assert_eq!(hi, sorted[sorted.len() - 1]);
    // ORDER BY with the key pinned to one node is fine.
    let mine: Vec<i64> = keys
        .iter()
        .copied()
        .filter(|k| node_of_key(&L, *k) == 2)
        .collect();
    let list = mine
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let got: Vec<i64> = conn
        .query(format!(
            "SELECT user_id FROM t_fan WHERE user_id IN ({list}) ORDER BY user_id DESC"
        ))
        .await
        .expect("ORDER BY on one node");
    let mut want = mine.clone();
    want.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(got, want);
    conn.disconnect().await.ok();
}

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn broadcast_table_is_copied_to_every_node() {
    let c = cluster();
    let proxy = start_proxy(c, "[tables.t_country]\nrule = \"broadcast\"\n");
    let mut conn = proxy.conn().await;
    conn.query_drop(
        "CREATE TABLE t_country (id INT NOT NULL PRIMARY KEY, name VARCHAR(32) NOT NULL)",
    )
    .await
    .expect("CREATE TABLE");
    conn.query_drop("INSERT INTO t_country (id, name) VALUES (1, 'France')")
        .await
        .expect("INSERT");
    assert_eq!(
        conn.affected_rows(),
        1,
        "one row inserted into a broadcast table"
    );
    conn.exec_drop(
        "INSERT INTO t_country (id, name) VALUES (?, ?), (?, ?), (?, ?)",
        (2, "Japan", 3, "Perú", 4, "Ελλάδα"),
    )
    .await
    .expect("prepared INSERT");
    assert_eq!(
        conn.affected_rows(),
        3,
        "three rows inserted into a broadcast table"
    );
    conn.query_drop("UPDATE t_country SET name = 'Nippon' WHERE id = 2")
        .await
        .expect("UPDATE");
    assert_eq!(
        conn.affected_rows(),
        1,
        "one row updated in a broadcast table"
    );

    let expected = vec![
        (1, "France".to_string()),
        (2, "Nippon".to_string()),
        (3, "Perú".to_string()),
        (4, "Ελλάδα".to_string()),
    ];
    for n in 0..NODES {
        let (_pool, mut d) = direct_conn(c, n).await;
        let rows: Vec<(i32, String)> = d
            .query("SELECT id, name FROM t_country ORDER BY id")
            .await
            .expect("direct read");
        assert_eq!(rows, expected, "t_country on ds{n}");
    }
    let rows: Vec<(i32, String)> = conn
        .query("SELECT id, name FROM t_country ORDER BY id")
        .await
        .expect("SELECT through the proxy");
    assert_eq!(rows, expected, "a broadcast read returns one copy");
    let n: Option<i64> = conn
        .query_first("SELECT COUNT(*) FROM t_country")
        .await
        .expect("COUNT");
    assert_eq!(n, Some(4));
    conn.disconnect().await.ok();
}

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn single_table_lives_on_its_node_only() {
    let c = cluster();
    let proxy = start_proxy(
        c,
        "[tables.t_merchant]\nrule = \"single\"\nnode = \"ds2\"\n",
    );
    let mut conn = proxy.conn().await;
    conn.query_drop(
        "CREATE TABLE t_merchant (id INT NOT NULL PRIMARY KEY, v VARCHAR(32) NOT NULL)",
    )
    .await
    .expect("CREATE TABLE");
    for n in 0..NODES {
        assert_eq!(
            table_exists(c, n, "t_merchant").await,
            n == 2,
            "t_merchant on ds{n}"
        );
    }
    conn.query_drop("INSERT INTO t_merchant (id, v) VALUES (1, 'a'), (2, 'b')")
        .await
        .expect("INSERT");
    assert_eq!(conn.affected_rows(), 2);
    conn.exec_drop("INSERT INTO t_merchant (id, v) VALUES (?, ?)", (3, "c"))
        .await
        .expect("prepared INSERT");
    let rows: Vec<(i32, String)> = conn
        .query("SELECT id, v FROM t_merchant ORDER BY id")
        .await
        .expect("SELECT");
    let expected = vec![(1, "a".to_string()), (2, "b".into()), (3, "c".into())];
    assert_eq!(rows, expected);
    let (_pool, mut d) = direct_conn(c, 2).await;
    let direct: Vec<(i32, String)> = d
        .query("SELECT id, v FROM t_merchant ORDER BY id")
        .await
        .expect("direct read");
    assert_eq!(direct, expected);
    conn.disconnect().await.ok();
}

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn authentication() {
    let c = cluster();
    let proxy = start_proxy(c, "");
    let connect = |url: String| async move {
        mysql_async::Conn::new(mysql_async::Opts::from_url(&url).expect("URL")).await
    };
    let base = format!("127.0.0.1:{}/shop", proxy.port);
    let msg = expect_code(
        connect(format!("mysql://app:wrong@{base}")).await,
        1045,
        "wrong password",
    );
    assert!(msg.contains("app"), "{msg}");
    expect_code(
        connect(format!("mysql://nobody:app@{base}")).await,
        1045,
        "unknown user",
    );
    expect_code(
        connect(format!("mysql://app@{base}")).await,
        1045,
        "no password",
    );
    let mut ok = connect(format!("mysql://app:app@{base}"))
        .await
        .expect("the right password is accepted");
    let one: Option<i64> = ok.query_first("SELECT 1").await.expect("SELECT 1");
    assert_eq!(one, Some(1));
    ok.disconnect().await.ok();
}

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn syntax_errors_leave_the_connection_usable() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_syntax"));
    let mut conn = proxy.conn().await;
    for bad in [
        "SELEC 1",
        "SELECT * FRM t_x",
        "SELECT * FRM t_syntax",
        "SELECT FROM WHERE",
    ] {
        expect_code(conn.query_drop(bad).await, 1064, bad);
        let v: Option<i64> = conn
            .query_first("SELECT 41 + 1")
            .await
            .unwrap_or_else(|e| panic!("a good query after `{bad}`: {e}"));
        assert_eq!(v, Some(42), "after `{bad}`");
    }
    expect_code(conn.prep("SELEC ?").await, 1064, "prepare SELEC ?");
    let v: Option<i64> = conn
        .exec_first("SELECT ? + 1", (41,))
        .await
        .expect("a good prepared query after a bad one");
    assert_eq!(v, Some(42));
    conn.disconnect().await.ok();
}

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn transactions_on_one_node() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_tx"));
    let mut conn = proxy.conn().await;
    conn.query_drop(
        "CREATE TABLE t_tx (user_id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(32) NOT NULL)",
    )
    .await
    .expect("CREATE TABLE");
    let k = keys_on_node(&L, 1, 5);
    let other = key_on_node(&L, 2);
    let (_p1, mut d1) = direct_conn(c, 1).await;
    let (_p2, mut d2) = direct_conn(c, 2).await;
    let count = |keys: &[i64]| {
        format!(
            "SELECT COUNT(*) FROM t_tx WHERE user_id IN ({})",
            keys.iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };

    // ROLLBACK discards.
    conn.query_drop("BEGIN").await.expect("BEGIN");
    conn.query_drop(format!(
        "INSERT INTO t_tx (user_id, v) VALUES ({}, 'a')",
        k[0]
    ))
    .await
    .expect("INSERT in a transaction");
    conn.exec_drop("INSERT INTO t_tx (user_id, v) VALUES (?, ?)", (k[1], "b"))
        .await
        .expect("prepared INSERT in a transaction");
    let inside: Option<i64> = conn
        .query_first(count(&k[..2]))
        .await
        .expect("read own writes");
    assert_eq!(inside, Some(2), "the transaction sees its own rows");
    let outside: Option<i64> = d1.query_first(count(&k[..2])).await.expect("direct");
    assert_eq!(
        outside,
        Some(0),
        "uncommitted rows are visible outside the transaction"
    );
    conn.query_drop("ROLLBACK").await.expect("ROLLBACK");
    let after: Option<i64> = conn.query_first(count(&k[..2])).await.expect("count");
    assert_eq!(after, Some(0), "rows survived ROLLBACK");
    let direct: Option<i64> = d1.query_first(count(&k[..2])).await.expect("direct");
    assert_eq!(direct, Some(0), "rows survived ROLLBACK on ds1");

    // COMMIT keeps.
    conn.query_drop("START TRANSACTION")
        .await
        .expect("START TRANSACTION");
    conn.query_drop(format!(
        "INSERT INTO t_tx (user_id, v) VALUES ({}, 'c'), ({}, 'd')",
        k[2], k[3]
    ))
    .await
    .expect("INSERT in a transaction");
    conn.query_drop("COMMIT").await.expect("COMMIT");
    let after: Option<i64> = conn.query_first(count(&k[2..4])).await.expect("count");
    assert_eq!(after, Some(2), "committed rows are missing");
    let direct: Option<i64> = d1.query_first(count(&k[2..4])).await.expect("direct");
    assert_eq!(direct, Some(2), "committed rows are missing on ds1");

    // A write to a second node joins the transaction (an XA branch there); ROLLBACK undoes
    // both nodes.
    conn.query_drop("BEGIN").await.expect("BEGIN");
    conn.query_drop(format!(
        "INSERT INTO t_tx (user_id, v) VALUES ({}, 'e')",
        k[4]
    ))
    .await
    .expect("INSERT on ds1");
    conn.query_drop(format!(
        "INSERT INTO t_tx (user_id, v) VALUES ({other}, 'x')"
    ))
    .await
    .expect("a write on a second node inside a transaction");
    let one: Option<i64> = conn.query_first("SELECT 1").await.expect("SELECT 1");
    assert_eq!(one, Some(1));
    let inside: Option<i64> = conn.query_first(count(&k[4..5])).await.expect("count");
    assert_eq!(inside, Some(1), "the transaction lost its row");
    let inside: Option<i64> = conn.query_first(count(&[other])).await.expect("count");
    assert_eq!(
        inside,
        Some(1),
        "the transaction does not see its row on ds2"
    );
    conn.query_drop("ROLLBACK").await.expect("ROLLBACK");
    let direct: Option<i64> = d1.query_first(count(&k[4..5])).await.expect("direct");
    assert_eq!(
        direct,
        Some(0),
        "the row of the rolled-back transaction is on ds1"
    );
    let direct: Option<i64> = d2.query_first(count(&[other])).await.expect("direct");
    assert_eq!(direct, Some(0), "the rolled-back write stayed on ds2");
    conn.disconnect().await.ok();
}

#[tokio::test]
async fn a_transaction_whose_node_connection_dies_is_not_continued_silently() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_txlost"));
    let mut conn = proxy.conn().await;
    conn.query_drop(
        "CREATE TABLE t_txlost (user_id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(32) NOT NULL)",
    )
    .await
    .expect("CREATE TABLE");
    let k = keys_on_node(&L, 3, 3);
    let (_p3, mut d3) = direct_conn(c, 3).await;

    conn.query_drop("BEGIN").await.expect("BEGIN");
    conn.query_drop(format!(
        "INSERT INTO t_txlost (user_id, v) VALUES ({}, 'a')",
        k[0]
    ))
    .await
    .expect("INSERT in a transaction");
    // The transaction's own backend connection, as the node sees it.
    let backend_id: Option<u64> = conn
        .query_first("SELECT @@pseudo_thread_id")
        .await
        .expect("CONNECTION_ID()");
    let backend_id = backend_id.expect("a connection id");
    d3.query_drop(format!("KILL {backend_id}"))
        .await
        .expect("KILL the backend connection");
    // The next statement fails (its connection is gone) ...
    assert!(
        conn.query_drop(format!(
            "INSERT INTO t_txlost (user_id, v) VALUES ({}, 'b')",
            k[1]
        ))
        .await
        .is_err(),
        "a statement on a killed transaction connection succeeded"
    );
    // ... and so does every later one, until the client ends the transaction: none may run
    // outside it in autocommit mode.
    expect_code(
        conn.query_drop(format!(
            "INSERT INTO t_txlost (user_id, v) VALUES ({}, 'c')",
            k[2]
        ))
        .await,
        1213,
        "a write after the transaction was lost",
    );
    expect_code(
        conn.query_drop("COMMIT").await,
        1213,
        "COMMIT of a lost transaction",
    );
    // COMMIT ended it; the session works again, and nothing of the transaction was kept.
    let rows: Option<i64> = conn
        .query_first(format!(
            "SELECT COUNT(*) FROM t_txlost WHERE user_id IN ({}, {}, {})",
            k[0], k[1], k[2]
        ))
        .await
        .expect("count after the lost transaction");
    assert_eq!(rows, Some(0), "rows of the lost transaction were kept");
    conn.disconnect().await.ok();
}

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn session_basics() {
    let c = cluster();
    let proxy = start_proxy(c, "");
    let mut conn = proxy.conn().await;
    conn.query_drop("SET NAMES utf8mb4")
        .await
        .expect("SET NAMES");
    let version: Option<String> = conn
        .query_first("SELECT @@version")
        .await
        .expect("SELECT @@version");
    assert!(
        version.as_deref().is_some_and(|v| !v.is_empty()),
        "@@version: {version:?}"
    );
    let db: Option<Option<String>> = conn
        .query_first("SELECT DATABASE()")
        .await
        .expect("SELECT DATABASE()");
    assert_eq!(db, Some(Some("shop".to_string())));
    conn.query_drop("USE shop").await.expect("USE shop");
    let db: Option<Option<String>> = conn
        .query_first("SELECT DATABASE()")
        .await
        .expect("SELECT DATABASE()");
    assert_eq!(db, Some(Some("shop".to_string())));
    expect_code(
        conn.query_drop("USE no_such_db").await,
        1049,
        "USE of an unknown database",
    );
    let db: Option<Option<String>> = conn
        .query_first("SELECT DATABASE()")
        .await
        .expect("SELECT DATABASE()");
    assert_eq!(
        db,
        Some(Some("shop".to_string())),
        "a failed USE changed the database"
    );

    // Not configured: lives on the default node.
    conn.query_drop(
        "CREATE TABLE t_ai (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, v VARCHAR(16) NOT NULL)",
    )
    .await
    .expect("CREATE TABLE t_ai");
    for n in 0..NODES {
        assert_eq!(table_exists(c, n, "t_ai").await, n == 0, "t_ai on ds{n}");
    }
    conn.query_drop("INSERT INTO t_ai (v) VALUES ('a')")
        .await
        .expect("INSERT");
    assert_eq!(conn.last_insert_id(), Some(1), "OK packet last insert id");
    conn.query_drop("INSERT INTO t_ai (v) VALUES ('b')")
        .await
        .expect("INSERT");
    assert_eq!(conn.last_insert_id(), Some(2), "OK packet last insert id");
    let id: Option<u64> = conn
        .query_first("SELECT LAST_INSERT_ID()")
        .await
        .expect("SELECT LAST_INSERT_ID()");
    assert_eq!(id, Some(2), "SELECT LAST_INSERT_ID()");
    conn.disconnect().await.ok();
}

// ---------------------------------------------------------------------------------------------

/// MySQL keeps `LAST_INSERT_ID()` until the session's next insert: a read of a sharded table on
/// another node in between must not change what `SELECT LAST_INSERT_ID()` returns.
#[tokio::test]
async fn last_insert_id_survives_a_read_on_another_node() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_lid_sharded"));
    let mut conn = proxy.conn().await;
    conn.query_drop(
        "CREATE TABLE t_lid_sharded (user_id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(16) NOT NULL)",
    )
    .await
    .expect("CREATE TABLE t_lid_sharded");
    conn.query_drop(
        "CREATE TABLE t_lid (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, v VARCHAR(16) NOT NULL)",
    )
    .await
    .expect("CREATE TABLE t_lid");
    for v in ["a", "b", "c"] {
        conn.exec_drop("INSERT INTO t_lid (v) VALUES (?)", (v,))
            .await
            .expect("INSERT");
    }
    assert_eq!(conn.last_insert_id(), Some(3));
    let k = key_on_node(&L, 3);
    let n: Option<i64> = conn
        .query_first(format!(
            "SELECT COUNT(*) FROM t_lid_sharded WHERE user_id = {k}"
        ))
        .await
        .expect("a read on ds3");
    assert_eq!(n, Some(0));
    let id: Option<u64> = conn
        .query_first("SELECT LAST_INSERT_ID()")
        .await
        .expect("SELECT LAST_INSERT_ID()");
    assert_eq!(
        id,
        Some(3),
        "SELECT LAST_INSERT_ID() after a read of a table on ds3 (the insert ran on ds0)"
    );
    conn.disconnect().await.ok();
}

/// The statements of `session_functions_answer_as_one_mariadb_on_lent_connections`, as an
/// application interleaves them: inserts with generated and explicit ids, ODKU, an id set
/// by LAST_INSERT_ID(expr) in an UPDATE and in a SELECT, a failed statement, found rows
/// with and without SQL_CALC_FOUND_ROWS, warnings read twice and after a clean statement.
const SESSION_FUNCTIONS: &[&str] = &[
    "SELECT LAST_INSERT_ID(), ROW_COUNT(), FOUND_ROWS()",
    "INSERT INTO t_sf (v) VALUES (7)",
    "SELECT LAST_INSERT_ID()",
    "INSERT INTO t_sf VALUES (500, 1)",
    "SELECT LAST_INSERT_ID() AS x, ROW_COUNT()",
    "INSERT INTO t_sf VALUES (NULL, 1)",
    "select last_insert_id() + 1, @@identity",
    "INSERT INTO t_sf (id, v) VALUES (1, 5) ON DUPLICATE KEY UPDATE v = 8",
    "SELECT LAST_INSERT_ID(), ROW_COUNT()",
    "UPDATE t_sf SET v = LAST_INSERT_ID(v) WHERE id = 500",
    "SELECT LAST_INSERT_ID()",
    "SELECT LAST_INSERT_ID(77)",
    "SELECT LAST_INSERT_ID()",
    "INSERT INTO t_sf (v) VALUES (1),(2)",
    "SELECT LAST_INSERT_ID(), ROW_COUNT()",
    "INSERT INTO t_sf_nosuch VALUES (1)",
    "SELECT ROW_COUNT(), FOUND_ROWS()",
    "SELECT * FROM t_sf ORDER BY id",
    "SELECT FOUND_ROWS()",
    "SELECT * FROM t_sf WHERE id = LAST_INSERT_ID()",
    "UPDATE t_sf SET v = 0",
    "SELECT ROW_COUNT()",
    "SELECT CAST('abc' AS UNSIGNED)",
    "SHOW WARNINGS",
    "SHOW WARNINGS",
    "SELECT @@warning_count",
    // A statement that names no table leaves them; one that reads a table clears them.
    "SELECT 1",
    "SHOW WARNINGS",
    "SELECT @@warning_count, @@error_count",
    "SELECT COUNT(*) FROM t_sf",
    "SHOW WARNINGS",
    "SELECT @@warning_count, @@error_count",
    // Pins the session to its connection (FOUND_ROWS() is the node's count): last.
    "SELECT SQL_CALC_FOUND_ROWS * FROM t_sf ORDER BY id LIMIT 1",
    "SELECT FOUND_ROWS()",
];

/// Statements of [`SESSION_FUNCTIONS`] after which the session keeps its connection: an
/// error and the statement naming no table after it, warnings and the six statements after
/// them that name no table, SQL_CALC_FOUND_ROWS and its FOUND_ROWS().
const SESSION_FUNCTIONS_KEEPING: usize = 11;

/// Every answer of a statement: (column names, rows) or the error code.
type Answers = Result<Vec<(Vec<String>, Vec<Row>)>, u16>;

async fn answers(conn: &mut Conn, sql: &str, prepared: bool) -> Answers {
    let code = |e: mysql_async::Error| server_error::<()>(Err(e)).0;
    if prepared {
        match conn.exec_iter(sql, ()).await {
            Ok(r) => result_sets(r).await.map_err(code),
            Err(e) => Err(code(e)),
        }
    } else {
        match conn.query_iter(sql).await {
            Ok(r) => result_sets(r).await.map_err(code),
            Err(e) => Err(code(e)),
        }
    }
}

async fn result_sets<P: mysql_async::prelude::Protocol>(
    mut r: mysql_async::QueryResult<'_, 'static, P>,
) -> Result<Vec<(Vec<String>, Vec<Row>)>, mysql_async::Error> {
    let mut out = Vec::new();
    loop {
        let names: Vec<String> = r
            .columns_ref()
            .iter()
            .map(|c| c.name_str().into_owned())
            .collect();
        let rows: Vec<Row> = r.collect().await?;
        out.push((names, rows));
        if r.is_empty() {
            break;
        }
    }
    Ok(out)
}

/// `LAST_INSERT_ID()`, `ROW_COUNT()`, `FOUND_ROWS()` and the warnings answer through the
/// proxy as on one MariaDB, though the session's node connection is lent to another client
/// between its statements (the pool holds one): that client's inserts and warnings on the
/// same connection never show. Text and prepared.
#[test]
fn session_functions_answer_as_one_mariadb_on_lent_connections() {
    let c = cluster();
    let rules = rules_toml(c, "").replace("/shop\"", "/shop?pool_min=1&pool_max=1\"");
    let proxy = start_proxy_with_rules(rules);
    block_on(async move {
        let create = "CREATE TABLE t_sf (id INT AUTO_INCREMENT PRIMARY KEY, v INT)";
        let node0 = c.direct(0);
        let mut b = proxy.conn().await;
        b.query_drop("CREATE TABLE IF NOT EXISTS t_sf_other (id INT AUTO_INCREMENT PRIMARY KEY, v INT) AUTO_INCREMENT = 9000")
            .await
            .expect("b's table");
        let mut lent = 0;
        for prepared in [false, true] {
            let mut a = proxy.conn().await;
            let mut direct = node0.get_conn().await.expect("node 0");
            direct
                .query_drop("CREATE DATABASE IF NOT EXISTS sf_direct")
                .await
                .expect("db");
            direct.query_drop("USE sf_direct").await.expect("use");
            direct
                .query_drop("SELECT 1")
                .await
                .expect("as a new session");
            for conn in [&mut direct, &mut a] {
                conn.query_drop("DROP TABLE IF EXISTS t_sf")
                    .await
                    .expect("drop");
                conn.query_drop(create).await.expect("create");
            }
            for sql in SESSION_FUNCTIONS {
                let want = answers(&mut direct, sql, prepared).await;
                let got = answers(&mut a, sql, prepared).await;
                let show = |r: &Answers| match r {
                    Ok(sets) => format!(
                        "{:?}",
                        sets.iter()
                            .map(|(n, rows)| (
                                n.clone(),
                                rows.iter().map(|r| r.clone().unwrap()).collect::<Vec<_>>()
                            ))
                            .collect::<Vec<_>>()
                    ),
                    Err(code) => format!("error {code}"),
                };
                assert_eq!(show(&got), show(&want), "{sql} (prepared: {prepared})");
                // The session gives its connection back once its answer went out.
                let mut idle = false;
                for _ in 0..50 {
                    idle = proxy
                        .shared
                        .backends
                        .pool_usage(0)
                        .is_some_and(|(used, _)| used == 0);
                    if idle {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(4)).await;
                }
                // Whenever a holds no connection, b takes the pool's only one and leaves its
                // insert id, row count and found rows on it (a session that leaves warnings
                // keeps its connection: b's never reach a's).
                if idle {
                    b.query_drop("INSERT INTO t_sf_other (v) VALUES (1), (2), (3)")
                        .await
                        .expect("b inserts");
                    b.query_drop("SELECT * FROM t_sf_other")
                        .await
                        .expect("b reads");
                    lent += 1;
                }
            }
        }
        assert_eq!(
            lent,
            2 * (SESSION_FUNCTIONS.len() - SESSION_FUNCTIONS_KEEPING),
            "statements after which a's connection went back to the pool"
        );
    });
}

// ---------------------------------------------------------------------------------------------

/// Differences between the column definitions the proxy sent and the node's own.
fn column_diffs(proxy: &Row, direct: &Row) -> Vec<String> {
    let p = proxy.columns_ref();
    let d = direct.columns_ref();
    if p.len() != d.len() {
        return vec![format!("{} columns, the node sends {}", p.len(), d.len())];
    }
    let mut diffs = Vec::new();
    for (a, b) in p.iter().zip(d) {
        let name = b.name_str();
        let facets = [
            ("name", a.name_str().into_owned(), name.clone().into_owned()),
            (
                "type",
                format!("{:?}", a.column_type()),
                format!("{:?}", b.column_type()),
            ),
            (
                "flags",
                format!("{:?}", a.flags()),
                format!("{:?}", b.flags()),
            ),
            (
                "charset",
                a.character_set().to_string(),
                b.character_set().to_string(),
            ),
            (
                "length",
                a.column_length().to_string(),
                b.column_length().to_string(),
            ),
            (
                "decimals",
                a.decimals().to_string(),
                b.decimals().to_string(),
            ),
            (
                "table",
                a.table_str().into_owned(),
                b.table_str().into_owned(),
            ),
            (
                "org_name",
                a.org_name_str().into_owned(),
                b.org_name_str().into_owned(),
            ),
        ];
        for (facet, via, direct) in facets {
            if via != direct {
                diffs.push(format!("`{name}` {facet}: proxy {via}, node {direct}"));
            }
        }
    }
    diffs
}

/// Differences between the values the proxy sent and the node's own.
fn value_diffs(proxy: Row, direct: Row) -> Vec<String> {
    let names: Vec<String> = direct
        .columns_ref()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    let (p, d) = (proxy.unwrap(), direct.unwrap());
    if p.len() != d.len() {
        return vec![format!("{} values, the node sends {}", p.len(), d.len())];
    }
    names
        .iter()
        .zip(p.iter().zip(&d))
        .filter(|(_, (a, b))| a != b)
        .map(|(n, (a, b))| format!("`{n}`: proxy {a:?}, node {b:?}"))
        .collect()
}

/// Creates TABLE (sharded) through the proxy with one column of each type and two rows, on ds1
/// and ds3; returns their keys.
async fn types_table(conn: &mut Conn, table: &str) -> [(i64, usize); 2] {
    conn.query_drop(format!(
        "CREATE TABLE {table} (
            user_id BIGINT NOT NULL PRIMARY KEY,
            d DECIMAL(20,6),
            dt DATETIME(6),
            da DATE,
            tm TIME(6),
            b BLOB,
            n INT NULL,
            u BIGINT UNSIGNED,
            ti TINYINT,
            dbl DOUBLE,
            s VARCHAR(64) CHARACTER SET utf8mb4,
            f FLOAT,
            bin VARBINARY(16),
            e ENUM('red', 'green')
        )"
    ))
    .await
    .expect("CREATE TABLE");
    let blob_hex: String = (0u8..=255).map(|b| format!("{b:02X}")).collect();
    let k1 = key_on_node(&L, 1);
    let k3 = key_on_node(&L, 3);
    conn.query_drop(format!(
        "INSERT INTO {table} (user_id, d, dt, da, tm, b, n, u, ti, dbl, s, f, bin, e) VALUES
         ({k1}, 12345678901234.123456, '2024-02-29 23:59:59.123456', '2024-02-29',
          '-25:03:04.500000', UNHEX('{blob_hex}'), NULL, 18446744073709551615, -128,
          3.141592653589793, 'héllo wörld 日本 😀', 1.5, UNHEX('00FF00'), 'green'),
         ({k3}, -0.000001, '1970-01-01 00:00:00.000001', '1000-01-01',
          '12:34:56.000001', '', 7, 0, 127,
          -1.5e300, '', -0.25, '', 'red')"
    ))
    .await
    .expect("INSERT");
    assert_eq!(conn.affected_rows(), 2);
    [(k1, 1), (k3, 3)]
}

#[tokio::test]
async fn binary_protocol_values_round_trip() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_types_v"));
    let mut conn = proxy.conn().await;
    let rows = types_table(&mut conn, "t_types_v").await;
    let mut problems = Vec::new();
    for (k, node) in rows {
        let (_pool, mut d) = direct_conn(c, node).await;
        let sql = "SELECT * FROM t_types_v WHERE user_id = ?";
        let via: Vec<Row> = conn
            .exec(sql, (k,))
            .await
            .expect("prepared SELECT via proxy");
        let direct: Vec<Row> = d.exec(sql, (k,)).await.expect("prepared SELECT direct");
        assert_eq!(via.len(), 1, "prepared SELECT key {k}");
        assert_eq!(direct.len(), 1);
        for (p, d) in via.into_iter().zip(direct) {
            problems.extend(
                value_diffs(p, d)
                    .into_iter()
                    .map(|e| format!("prepared SELECT key {k}: {e}")),
            );
        }
        let sql = format!("SELECT * FROM t_types_v WHERE user_id = {k}");
        let via: Vec<Row> = conn.query(&sql).await.expect("text SELECT via proxy");
        let direct: Vec<Row> = d.query(&sql).await.expect("text SELECT direct");
        assert_eq!(via.len(), 1, "text SELECT key {k}");
        for (p, d) in via.into_iter().zip(direct) {
            problems.extend(
                value_diffs(p, d)
                    .into_iter()
                    .map(|e| format!("text SELECT key {k}: {e}")),
            );
        }
    }

    // Spot checks against known values (not only "same as the node").
    let row: Row = conn
        .exec_first(
            "SELECT d, dt, da, tm, b, n, u, ti, dbl, s FROM t_types_v WHERE user_id = ?",
            (rows[0].0,),
        )
        .await
        .expect("SELECT")
        .expect("a row");
    let expected = [
        Value::Bytes(b"12345678901234.123456".to_vec()),
        Value::Date(2024, 2, 29, 23, 59, 59, 123_456),
        Value::Date(2024, 2, 29, 0, 0, 0, 0),
        Value::Time(true, 1, 1, 3, 4, 500_000),
        Value::Bytes((0u8..=255).collect()),
        Value::NULL,
        Value::UInt(u64::MAX),
        Value::Int(-128),
        Value::Double(std::f64::consts::PI),
        Value::Bytes("héllo wörld 日本 😀".as_bytes().to_vec()),
    ];
    for (i, (got, want)) in row.unwrap().iter().zip(&expected).enumerate() {
        if got != want {
            problems.push(format!("spot check #{i}: got {got:?}, expected {want:?}"));
        }
    }

    // Rows from several nodes in the binary protocol.
    let via: Vec<Row> = conn
        .exec("SELECT * FROM t_types_v WHERE ti <> ?", (0,))
        .await
        .expect("prepared fan-out SELECT");
    let mut via: Vec<Vec<Value>> = via.into_iter().map(Row::unwrap).collect();
    via.sort_by_key(|r| r[0].as_sql(false));
    let mut direct = Vec::new();
    for (_, node) in rows {
        let (_pool, mut d) = direct_conn(c, node).await;
        let rows: Vec<Row> = d
            .exec("SELECT * FROM t_types_v WHERE ti <> ?", (0,))
            .await
            .expect("direct");
        direct.extend(rows.into_iter().map(Row::unwrap));
    }
    direct.sort_by_key(|r| r[0].as_sql(false));
    if via != direct {
        problems.push(format!(
            "prepared fan-out SELECT: proxy {via:?}, nodes {direct:?}"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    conn.disconnect().await.ok();
}

/// Drivers decode values by the column definitions (charset 63 = binary, length, flags): the
/// proxy must hand over the node's own, in both protocols.
#[tokio::test]
async fn column_definitions_match_the_node() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_types_m"));
    let mut conn = proxy.conn().await;
    let rows = types_table(&mut conn, "t_types_m").await;
    let mut problems = Vec::new();
    for (k, node) in rows {
        let (_pool, mut d) = direct_conn(c, node).await;
        let sql = "SELECT * FROM t_types_m WHERE user_id = ?";
        let via: Vec<Row> = conn
            .exec(sql, (k,))
            .await
            .expect("prepared SELECT via proxy");
        let direct: Vec<Row> = d.exec(sql, (k,)).await.expect("prepared SELECT direct");
        assert_eq!(via.len(), 1, "prepared SELECT key {k}");
        problems.extend(
            column_diffs(&via[0], &direct[0])
                .into_iter()
                .map(|e| format!("prepared SELECT key {k}: {e}")),
        );
        let sql = format!("SELECT * FROM t_types_m WHERE user_id = {k}");
        let via: Vec<Row> = conn.query(&sql).await.expect("text SELECT via proxy");
        let direct: Vec<Row> = d.query(&sql).await.expect("text SELECT direct");
        assert_eq!(via.len(), 1, "text SELECT key {k}");
        problems.extend(
            column_diffs(&via[0], &direct[0])
                .into_iter()
                .map(|e| format!("text SELECT key {k}: {e}")),
        );
    }
    assert!(
        problems.is_empty(),
        "{} column definition facets differ from the node's:\n{}",
        problems.len(),
        problems.join("\n")
    );
    conn.disconnect().await.ok();
}

// ---------------------------------------------------------------------------------------------

async fn cli(port: u16, args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new("mariadb")
        .arg("-h127.0.0.1")
        .arg(format!("-P{port}"))
        .arg("-uapp")
        .arg("-papp")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("run the mariadb client");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn mariadb_cli_through_the_proxy() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_cli"));
    let port = proxy.port;
    let k1 = key_on_node(&L, 1);
    let k2 = key_on_node(&L, 2);

    let (ok, out, err) = cli(port, &["shop", "-e", "SELECT 1 + 1 AS two, 'x' AS s"]).await;
    assert!(ok, "mariadb -e failed: {err}");
    assert_eq!(out, "two\ts\n2\tx\n", "stderr: {err}");

    let (ok, _, err) = cli(
        port,
        &[
            "shop",
            "-e",
            "CREATE TABLE t_cli (user_id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(16) NOT NULL)",
        ],
    )
    .await;
    assert!(ok, "CREATE TABLE with the CLI failed: {err}");
    let insert = format!("INSERT INTO t_cli (user_id, v) VALUES ({k1}, 'one'), ({k2}, 'two')");
    let (ok, _, err) = cli(port, &["shop", "-e", &insert]).await;
    assert!(ok, "INSERT with the CLI failed: {err}");

    let select = format!("SELECT user_id, v FROM t_cli WHERE user_id = {k2}");
    let (ok, out, err) = cli(
        port,
        &["--batch", "--skip-column-names", "shop", "-e", &select],
    )
    .await;
    assert!(ok, "SELECT with the CLI failed: {err}");
    assert_eq!(out, format!("{k2}\ttwo\n"));

    let (ok, out, err) = cli(
        port,
        &[
            "--batch",
            "--skip-column-names",
            "shop",
            "-e",
            "SELECT v FROM t_cli WHERE v <> ''; SELECT DATABASE()",
        ],
    )
    .await;
    assert!(ok, "fan-out SELECT with the CLI failed: {err}");
    let mut lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.pop(), Some("shop"), "output: {out}");
    lines.sort_unstable();
    assert_eq!(lines, vec!["one", "two"], "output: {out}");

    let (ok, _, err) = cli(port, &["shop", "-e", "SELEC 1"]).await;
    assert!(!ok, "a syntax error exited 0");
    assert!(err.contains("ERROR 1064"), "stderr: {err}");

    let (ok, _, err) = cli(port, &["-papp-wrong", "shop", "-e", "SELECT 1"]).await;
    assert!(!ok, "a wrong password exited 0");
    assert!(err.contains("ERROR 1045"), "stderr: {err}");
}

/// A client's node connections go back to their node's pool when it leaves, reset: the next
/// client that gets the same connection finds none of the last one's session state. Past the
/// URL's `pool_max` a statement waits, then fails naming the node.
#[test]
fn pooled_node_connections_carry_nothing_between_clients() {
    let c = cluster();
    block_on(async {
        let mut direct = c.direct(0).get_conn().await.expect("node 0");
        direct
            .query_drop("CREATE TABLE IF NOT EXISTS pool_probe (id INT PRIMARY KEY)")
            .await
            .expect("create pool_probe");
    });
    let rules = rules_toml(c, "").replace("/shop\"", "/shop?pool_min=1&pool_max=1\"");
    let proxy = start_proxy_with_rules(rules);
    block_on(async move {
        // `pool_probe` is in no rule: the default node, ds0, answers.
        let mut a = proxy.conn().await;
        a.query_drop("SELECT * FROM pool_probe")
            .await
            .expect("a reads");
        a.query_drop("SET @leak = 42").await.expect("a sets");
        // Between statements a session holds no connection: in a transaction it keeps one.
        a.query_drop("BEGIN").await.expect("a begins");
        a.query_drop("SELECT * FROM pool_probe")
            .await
            .expect("a reads in its transaction");
        let id_a: Option<u64> = a
            .query_first("SELECT @@pseudo_thread_id")
            .await
            .expect("a's node connection");

        let mut b = proxy.conn().await;
        let started = std::time::Instant::now();
        let (code, message) = server_error(b.query_drop("SELECT * FROM pool_probe").await);
        assert_eq!(code, 1105, "{message}");
        assert!(
            message.contains("ds0") && message.contains("in use"),
            "{message}"
        );
        assert!(started.elapsed() >= std::time::Duration::from_secs(4));

        a.disconnect().await.expect("a leaves");
        // The connection is reset in the background, then idle in the pool.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while proxy.shared.backends.pool_usage(0) != Some((0, 1)) {
            assert!(
                std::time::Instant::now() < deadline,
                "the connection did not go back to the pool: {:?}",
                proxy.shared.backends.pool_usage(0)
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        b.query_drop("SELECT * FROM pool_probe")
            .await
            .expect("b reads once a left");
        let id_b: Option<u64> = b
            .query_first("SELECT @@pseudo_thread_id")
            .await
            .expect("b's node connection");
        assert_eq!(id_a, id_b, "the pool's one connection was not reused");
        let leak: Option<Option<i64>> = b.query_first("SELECT @leak").await.expect("b reads @leak");
        assert_eq!(leak, Some(None), "a's user variable reached b");
        let db: Option<String> = b.query_first("SELECT DATABASE()").await.expect("db");
        assert_eq!(db.as_deref(), Some("shop"));
    });
}

/// `INSERT INTO t VALUES (...)` without a column list, as loaders and dump files write it:
/// rows go to their key's node (a multi-row INSERT split by node), REPLACE / IGNORE / ON
/// DUPLICATE KEY UPDATE and prepared statements too; a row of the wrong width gets MySQL's
/// 1136; after an ALTER through the proxy the new column order is used at once.
#[test]
fn inserts_without_a_column_list_reach_their_keys_node() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_nocols"));
    block_on(async move {
        let mut conn = proxy.conn().await;
        conn.query_drop("DROP TABLE IF EXISTS t_nocols")
            .await
            .expect("drop");
        conn.query_drop(
            "CREATE TABLE t_nocols (id INT NOT NULL, user_id BIGINT NOT NULL, v VARCHAR(20), PRIMARY KEY (user_id, id))",
        )
        .await
        .expect("create");
        let keys = spread_keys(2, 40);
        // One multi-row INSERT over all four nodes, the way mysqldump writes it.
        let rows: Vec<String> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| format!("({i},{k},'v{i}')"))
            .collect();
        let r = conn
            .query_iter(format!("INSERT INTO `t_nocols` VALUES {}", rows.join(",")))
            .await
            .expect("multi-row insert without columns");
        assert_eq!(r.affected_rows(), keys.len() as u64);
        drop(r);
        for node in 0..NODES {
            let got = direct_rows(c, node, "t_nocols").await;
            let mut want: Vec<(i64, String)> = keys
                .iter()
                .enumerate()
                .filter(|(_, k)| node_of_key(&L, **k) == node)
                .map(|(i, k)| (*k, format!("v{i}")))
                .collect();
            want.sort();
            assert_eq!(got, want, "node {node}");
        }
        // Prepared, REPLACE, IGNORE, ON DUPLICATE KEY UPDATE.
        let k = keys[1];
        conn.exec_drop("INSERT INTO t_nocols VALUES (?, ?, ?)", (100, k, "p"))
            .await
            .expect("prepared insert");
        conn.query_drop(format!("REPLACE INTO t_nocols VALUES (100, {k}, 'r')"))
            .await
            .expect("replace");
        conn.query_drop(format!(
            "INSERT IGNORE INTO t_nocols VALUES (100, {k}, 'ignored')"
        ))
        .await
        .expect("insert ignore");
        conn.query_drop(format!(
            "INSERT INTO t_nocols VALUES (100, {k}, 'x') ON DUPLICATE KEY UPDATE v = CONCAT(v, '+')"
        ))
        .await
        .expect("on duplicate key update");
        let v: Option<String> = conn
            .exec_first(
                "SELECT v FROM t_nocols WHERE user_id = ? AND id = 100",
                (k,),
            )
            .await
            .expect("read back");
        assert_eq!(v.as_deref(), Some("r+"));

        let (code, message) = server_error(
            conn.query_drop(format!(
                "INSERT INTO t_nocols VALUES (1, {k}, 'a'), (2, {k})"
            ))
            .await,
        );
        assert_eq!(code, 1136, "{message}");
        assert!(message.contains("row 2"), "{message}");
        // The connection stays usable, and a new column is seen right after the ALTER.
        conn.query_drop("ALTER TABLE t_nocols ADD COLUMN w INT NOT NULL DEFAULT 0")
            .await
            .expect("alter");
        conn.query_drop(format!("INSERT INTO t_nocols VALUES (200, {k}, 'w', 7)"))
            .await
            .expect("insert with the new column");
        let w: Option<i64> = conn
            .exec_first(
                "SELECT w FROM t_nocols WHERE user_id = ? AND id = 200",
                (k,),
            )
            .await
            .expect("read w");
        assert_eq!(w, Some(7));
    });
}

/// The nodes of a table must agree on its columns before an INSERT without a column list is
/// routed by position.
#[test]
fn inserts_without_a_column_list_refuse_nodes_that_disagree() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_nocols_split"));
    block_on(async move {
        for node in 0..NODES {
            let (_pool, mut d) = direct_conn(c, node).await;
            d.query_drop("DROP TABLE IF EXISTS t_nocols_split")
                .await
                .expect("drop");
            let cols = if node == 2 {
                "v VARCHAR(20), user_id BIGINT NOT NULL PRIMARY KEY"
            } else {
                "user_id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20)"
            };
            d.query_drop(format!("CREATE TABLE t_nocols_split ({cols})"))
                .await
                .expect("create");
        }
        let mut conn = proxy.conn().await;
        let (code, message) = server_error(
            conn.query_drop("INSERT INTO t_nocols_split VALUES (1, 'a')")
                .await,
        );
        assert_eq!(code, 1235, "{message}");
        assert!(
            message.contains("disagree") && message.contains("ds2"),
            "{message}"
        );
        conn.query_drop("INSERT INTO t_nocols_split (user_id, v) VALUES (1, 'a')")
            .await
            .expect("with a column list it still works");
    });
}

/// Between statements outside a transaction a session keeps no node connection: each goes
/// back to its pool and serves other sessions, with none of this session's SETs on them.
#[test]
fn sessions_give_back_node_connections_between_statements() {
    let c = cluster();
    let rules =
        rules_toml(c, &sharded("t_mux")).replace("/shop\"", "/shop?pool_min=1&pool_max=1\"");
    let proxy = start_proxy_with_rules(rules);
    block_on(async move {
        let mut a = proxy.conn().await;
        a.query_drop("CREATE TABLE IF NOT EXISTS t_mux (user_id BIGINT PRIMARY KEY, v VARCHAR(8))")
            .await
            .expect("create");
        // A statement on every node: afterwards the session holds none.
        for node in 0..NODES {
            let k = key_on_node(&L, node);
            a.exec_drop("SELECT v FROM t_mux WHERE user_id = ?", (k,))
                .await
                .expect("point read");
        }
        // Connections go back once the answer is written, so the client may see its answer
        // a moment before the pool sees the connection: wait for it, within a bound.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let held: usize = (0..NODES)
                .map(|n| proxy.shared.backends.pool_usage(n).unwrap_or((0, 0)).0)
                .sum();
            if held == 0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{held} node connections still in use 5 s after four point reads"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }

        // A session SET lands on a connection; once a moves on, the next session that takes
        // that connection gets it without a's SET. a runs on ds0 first, so the SET and
        // the read of the node connection's id (`@@pseudo_thread_id`: CONNECTION_ID() is the
        // proxy's) run there.
        a.exec_drop(
            "SELECT v FROM t_mux WHERE user_id = ?",
            (key_on_node(&L, 0),),
        )
        .await
        .expect("read on ds0");
        a.query_drop("SET SESSION sql_mode = 'ANSI_QUOTES'")
            .await
            .expect("set");
        let id_a: Option<u64> = a
            .query_first("SELECT @@pseudo_thread_id")
            .await
            .expect("a's connection");
        let mode_a: Option<String> = a.query_first("SELECT @@sql_mode").await.expect("mode");
        assert_eq!(mode_a.as_deref(), Some("ANSI_QUOTES"));
        // a moves to a node other than the default one, which gives ds0's connection back.
        let k = key_on_node(&L, 1);
        a.exec_drop("SELECT v FROM t_mux WHERE user_id = ?", (k,))
            .await
            .expect("read on ds1");
        let mut b = proxy.conn().await;
        let id_b: Option<u64> = b
            .query_first("SELECT @@pseudo_thread_id")
            .await
            .expect("b's connection");
        assert_eq!(id_a, id_b, "ds0's one connection went from a to b");
        let mode_b: Option<String> = b.query_first("SELECT @@sql_mode").await.expect("mode");
        assert!(
            !mode_b.unwrap_or_default().contains("ANSI_QUOTES"),
            "a's SET reached b"
        );
        // And a, back on ds0, finds its SET again (on ds0's one connection, which a's read
        // waits for while b's session gives it back).
        b.disconnect().await.expect("b leaves");
        let mode_a: Option<String> = a.query_first("SELECT @@sql_mode").await.expect("mode");
        assert_eq!(mode_a.as_deref(), Some("ANSI_QUOTES"));
    });
}

/// AUTO_INCREMENT shard keys: `key_generator = { kind = "sequence" }` gives small ids from a
/// sequence row on a node, reserved in blocks per proxy. Two proxies never give the same id,
/// ids start past the rows already there, each row lands on its id's node, LAST_INSERT_ID()
/// and the OK packet name the first id, and a NULL key (or no column at all) is generated.
#[test]
fn auto_increment_keys_come_from_a_sequence_shared_by_proxies() {
    let c = cluster();
    let table = hash_slot_table("t_auto", "id", &L).trim_end().to_string()
        + "\nkey_generator = { column = \"id\", kind = \"sequence\", block = 5 }\n";
    let rules = rules_toml(c, &table);
    let p1 = start_proxy_with_rules(rules.clone());
    let p2 = start_proxy_with_rules(rules);
    block_on(async move {
        let mut a = p1.conn().await;
        a.query_drop("DROP TABLE IF EXISTS t_auto")
            .await
            .expect("drop");
        a.query_drop(
            "CREATE TABLE t_auto (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10))",
        )
        .await
        .expect("create");
        // A row already there (a restored dump): the sequence starts after it.
        let (_pool, mut d) = direct_conn(c, node_of_key(&L, 20)).await;
        d.query_drop("INSERT INTO t_auto VALUES (20, 'old')")
            .await
            .expect("direct insert");
        let r = a
            .query_iter("INSERT INTO t_auto (v) VALUES ('a'), ('b'), ('c')")
            .await
            .expect("insert without the key");
        assert_eq!(r.affected_rows(), 3);
        assert_eq!(
            r.last_insert_id(),
            Some(21),
            "the OK packet names the first id"
        );
        drop(r);
        let first: Option<u64> = a
            .query_first("SELECT LAST_INSERT_ID()")
            .await
            .expect("LAST_INSERT_ID");
        assert_eq!(first, Some(21));

        // The second proxy reserves its own block; a NULL key without a column list.
        let mut b = p2.conn().await;
        b.query_drop("INSERT INTO t_auto VALUES (NULL, 'x')")
            .await
            .expect("NULL key through the other proxy");
        let xid: Option<u64> = b
            .query_first("SELECT LAST_INSERT_ID()")
            .await
            .expect("LAST_INSERT_ID");
        assert_eq!(xid, Some(26), "past the first proxy's block of 5");
        // The first proxy finishes its block, then takes the next one.
        a.exec_drop(
            "INSERT INTO t_auto (v) VALUES (?), (?), (?)",
            ("d", "e", "f"),
        )
        .await
        .expect("prepared insert without the key");

        let rows: Vec<(i64, String)> = a
            .query("SELECT id, v FROM t_auto ORDER BY id")
            .await
            .expect("read back");
        let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
        // 24 and 25 were drawn by the planning that found the block short: skipped, never
        // reused (gaps, as AUTO_INCREMENT has).
        assert_eq!(ids, vec![20, 21, 22, 23, 26, 31, 32, 33]);
        for (id, _) in &rows {
            let node = node_of_key(&L, *id);
            let (_pool, mut d) = direct_conn(c, node).await;
            let here: Option<i64> = d
                .exec_first("SELECT COUNT(*) FROM t_auto WHERE id = ?", (id,))
                .await
                .expect("direct count");
            assert_eq!(here, Some(1), "id {id} is on its node {node}");
        }
    });
}

/// Past `[server] max_connections` a client gets MySQL's 1040 instead of the handshake; a
/// client leaving makes room again.
#[test]
fn clients_past_max_connections_get_1040() {
    let c = cluster();
    let rules = rules_toml(c, "").replace(
        "users = [{ name = \"app\", password = \"app\" }]",
        "users = [{ name = \"app\", password = \"app\" }]\nmax_connections = 2",
    );
    let proxy = start_proxy_with_rules(rules);
    block_on(async move {
        let opts = || mysql_async::Opts::from_url(&proxy.url("shop")).expect("url");
        let mut a = Conn::new(opts()).await.expect("first client");
        let b = Conn::new(opts()).await.expect("second client");
        let (code, message) = server_error(Conn::new(opts()).await);
        assert_eq!(code, 1040, "{message}");
        a.query_drop("SELECT 1")
            .await
            .expect("the first still works");
        b.disconnect().await.expect("second leaves");
        // The slot is given back when its session ends.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut third = loop {
            match Conn::new(opts()).await {
                Ok(conn) => break conn,
                Err(e) => {
                    assert!(std::time::Instant::now() < deadline, "no room again: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
        };
        third.query_drop("SELECT 1").await.expect("served");
    });
}

#[tokio::test]
async fn a_split_insert_returning_answers_in_values_order() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_ret"));
    let mut conn = proxy.conn().await;
    conn.query_drop("CREATE TABLE t_ret (user_id BIGINT PRIMARY KEY, v VARCHAR(8))")
        .await
        .expect("create");
    // Keys on nodes 3, 0, 2, 0, 1, 3: the nodes answer in another order.
    let mut used = [0usize; 4];
    let keys: Vec<i64> = [3, 0, 2, 0, 1, 3]
        .iter()
        .map(|n| {
            used[*n] += 1;
            keys_on_node(&L, *n, 2)[used[*n] - 1]
        })
        .collect();
    let values: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("({k}, 'r{i}')"))
        .collect();
    let sql = format!(
        "INSERT INTO t_ret (user_id, v) VALUES {} RETURNING user_id, v",
        values.join(", ")
    );
    let rows: Vec<(i64, String)> = conn.query(&sql).await.expect("INSERT ... RETURNING");
    let want: Vec<(i64, String)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (*k, format!("r{i}")))
        .collect();
    assert_eq!(
        rows, want,
        "RETURNING rows in VALUES order, as from one MariaDB"
    );
    // Prepared, too.
    conn.query_drop("DELETE FROM t_ret").await.expect("delete");
    let marks = vec!["(?, ?)"; keys.len()].join(", ");
    let params: Vec<mysql_async::Value> = keys
        .iter()
        .enumerate()
        .flat_map(|(i, k)| [(*k).into(), format!("r{i}").into()])
        .collect();
    let rows: Vec<(i64, String)> = conn
        .exec(
            format!("INSERT INTO t_ret (user_id, v) VALUES {marks} RETURNING user_id, v"),
            params,
        )
        .await
        .expect("prepared INSERT ... RETURNING");
    assert_eq!(rows, want);
}

/// A client that hangs up while its statement runs (the process killed) gets that statement
/// stopped on its node, not left to run out there.
#[tokio::test]
async fn a_client_that_hangs_up_mid_statement_has_its_node_statement_killed() {
    let c = cluster();
    let proxy = start_proxy(c, "");
    let mut node0 = c.direct(0).get_conn().await.expect("node 0");
    let running = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP(30) AS hangup_probe%'";
    let mut client = tokio::process::Command::new("mariadb")
        .arg("-h127.0.0.1")
        .arg(format!("-P{}", proxy.port))
        .args([
            "-uapp",
            "-papp",
            "shop",
            "-e",
            "SELECT SLEEP(30) AS hangup_probe",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run the mariadb client");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let n: Option<i64> = node0.query_first(running).await.expect("processlist");
        if n == Some(1) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the statement never reached ds0"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.kill().await.expect("kill the client");
    let hung_up = std::time::Instant::now();
    loop {
        let n: Option<i64> = node0.query_first(running).await.expect("processlist");
        if n == Some(0) {
            break;
        }
        assert!(
            hung_up.elapsed() < Duration::from_secs(5),
            "ds0 still runs the statement of a client gone {:?} ago",
            hung_up.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(proxy.shared.metrics.hangups.get(), 1);
}

#[tokio::test]
async fn kill_stops_the_proxys_own_sessions_never_a_nodes_connection() {
    let c = cluster();
    let rules = rules_toml(c, &sharded("t_kill")).replace(
        "users = [{ name = \"app\", password = \"app\" }]",
        "users = [{ name = \"app\", password = \"app\" }, { name = \"other\", password = \"other\" }]",
    );
    let proxy = start_proxy_with_rules(rules);
    let mut a = proxy.conn().await;
    let mut b = proxy.conn().await;
    let a_id = a.id();
    assert_ne!(a_id, b.id());
    // CONNECTION_ID() is the id KILL takes, the handshake's, text or prepared, whichever
    // node connection the statement ran on.
    a.query_drop("CREATE TABLE IF NOT EXISTS t_kill (user_id BIGINT PRIMARY KEY, v INT)")
        .await
        .expect("create");
    for node in 0..NODES {
        let k = key_on_node(&L, node);
        a.query_drop(format!("REPLACE INTO t_kill VALUES ({k}, {node})"))
            .await
            .expect("a row on the node");
        let text: Option<(u32, i64)> = a
            .query_first(format!(
                "SELECT CONNECTION_ID(), v FROM t_kill WHERE user_id = {k}"
            ))
            .await
            .expect("CONNECTION_ID()");
        assert_eq!(
            text,
            Some((a_id, node as i64)),
            "CONNECTION_ID() on ds{node}"
        );
    }
    let prepared: Option<u32> = a
        .exec_first("SELECT connection_id() + ?", (0,))
        .await
        .expect("prepared CONNECTION_ID()");
    assert_eq!(prepared, Some(a_id));
    // KILL QUERY: a's running statement stops on its node, a's connection goes on.
    let sleeping = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let r: Result<Option<i64>, _> = a.query_first("SELECT SLEEP(30)").await;
        (a, r, started.elapsed())
    });
    // Once the SLEEP runs on a node (its processlist shows it), not after a guessed pause.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    'running: loop {
        for n in 0..NODES {
            let (_pool, mut direct) = direct_conn(c, n).await;
            let running: Option<i64> = direct
                .query_first(
                    "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(30)'",
                )
                .await
                .expect("processlist");
            if running.unwrap_or(0) > 0 {
                break 'running;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the SLEEP never ran on a node"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    b.query_drop(format!("KILL QUERY {a_id}"))
        .await
        .expect("KILL QUERY");
    let (mut a, r, took) = sleeping.await.expect("a");
    assert!(
        took < Duration::from_secs(10),
        "the killed query ran {took:?}"
    );
    // MariaDB answers a killed SLEEP with 1 (interrupted) or error 1317.
    match r {
        Ok(v) => assert_eq!(v, Some(1), "SLEEP interrupted"),
        Err(e) => assert!(e.to_string().contains("1317"), "{e}"),
    }
    let one: Option<i64> = a.query_first("SELECT 1").await.expect("a goes on");
    assert_eq!(one, Some(1));
    // Ids the proxy does not know, and sessions of other users, are refused as MySQL does.
    expect_code(b.query_drop("KILL 4000000").await, 1094, "an unknown id");
    let mut other = mysql_async::Conn::new(
        mysql_async::Opts::from_url(&format!(
            "mysql://other:other@127.0.0.1:{}/shop",
            proxy.port
        ))
        .expect("url"),
    )
    .await
    .expect("other user");
    expect_code(
        other.query_drop(format!("KILL {a_id}")).await,
        1095,
        "another user's session",
    );
    // KILL (CONNECTION): a's session ends.
    b.query_drop(format!("KILL CONNECTION {a_id}"))
        .await
        .expect("KILL CONNECTION");
    // No wait: once KILL has answered, a's next statement fails.
    assert!(
        a.query_drop("SELECT 1").await.is_err(),
        "a killed session still answers"
    );
    // A session killing itself is told so and closed.
    let b_id = b.id();
    expect_code(
        b.query_drop(format!("KILL {b_id}")).await,
        1927,
        "KILL of itself",
    );
    assert!(b.query_drop("SELECT 1").await.is_err());
}

#[tokio::test]
async fn a_user_given_by_its_password_hash_logs_in() {
    use sha1::{Digest, Sha1};
    let c = cluster();
    let hash: Vec<u8> = Sha1::digest(Sha1::digest(b"only-a-hash")).to_vec();
    let hex: String = hash.iter().map(|b| format!("{b:02X}")).collect();
    let rules = rules_toml(c, &sharded("t_hash_user")).replace(
        "users = [{ name = \"app\", password = \"app\" }]",
        &format!("users = [{{ name = \"app\", password_hash = \"*{hex}\" }}]"),
    );
    let proxy = start_proxy_with_rules(rules);
    let url = |pw: &str| format!("mysql://app:{pw}@127.0.0.1:{}/shop", proxy.port);
    let mut conn =
        mysql_async::Conn::new(mysql_async::Opts::from_url(&url("only-a-hash")).unwrap())
            .await
            .expect("the right password");
    let one: Option<i64> = conn.query_first("SELECT 1").await.expect("query");
    assert_eq!(one, Some(1));
    let wrong = mysql_async::Conn::new(mysql_async::Opts::from_url(&url("nope")).unwrap()).await;
    match wrong {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1045),
        other => panic!("a wrong password logged in or failed oddly: {other:?}"),
    }
}

/// The columns of a result as (name, type, unsigned), and its rows.
async fn described(
    conn: &mut mysql_async::Conn,
    sql: &str,
    prepared: bool,
) -> (Vec<(String, u8, bool)>, Vec<mysql_async::Row>) {
    use mysql_common::constants::ColumnFlags;
    let shape = |cols: &[mysql_async::Column]| {
        cols.iter()
            .map(|c| {
                (
                    c.name_str().to_string(),
                    c.column_type() as u8,
                    c.flags().contains(ColumnFlags::UNSIGNED_FLAG),
                )
            })
            .collect::<Vec<_>>()
    };
    if prepared {
        let r = conn.exec_iter(sql, ()).await.expect(sql);
        let cols = r.columns().map(|c| shape(&c)).unwrap_or_default();
        (cols, r.collect_and_drop().await.expect(sql))
    } else {
        let r = conn.query_iter(sql).await.expect(sql);
        let cols = r.columns().map(|c| shape(&c)).unwrap_or_default();
        (cols, r.collect_and_drop().await.expect(sql))
    }
}

/// An error the proxy raised itself (a refusal) is in no node's diagnostics area: `SHOW
/// WARNINGS`, `SHOW ERRORS`, their counts and `@@warning_count` / `@@error_count` tell of it
/// as MariaDB tells of its own errors, text or prepared; a statement that names no table
/// keeps it, one that reads a table clears it, and a node's error after it is the node's.
#[tokio::test]
async fn show_warnings_tells_of_an_error_the_proxy_raised_itself() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_own_err"));
    let mut a = proxy.conn().await;
    a.query_drop("CREATE TABLE IF NOT EXISTS t_own_err (user_id BIGINT PRIMARY KEY, v INT)")
        .await
        .expect("create");
    // MariaDB's own answer about its own error, for the shape.
    let (_pool, mut d) = direct_conn(c, 0).await;
    expect_code(
        d.query_drop("SELECT * FROM t_own_err_nowhere").await,
        1146,
        "direct",
    );
    let (want_cols, want_rows) = described(&mut d, "SHOW WARNINGS", false).await;
    assert_eq!(want_rows.len(), 1);
    let (want_count_cols, _) = described(&mut d, "SHOW COUNT(*) ERRORS", false).await;

    let refused = "UPDATE t_own_err SET user_id = user_id + 1";
    for prepared in [false, true] {
        let message = expect_code(a.query_drop(refused).await, 1235, "a refusal");
        let (cols, rows) = described(&mut a, "SHOW WARNINGS", prepared).await;
        assert_eq!(
            cols, want_cols,
            "SHOW WARNINGS' columns (prepared: {prepared})"
        );
        let rows: Vec<(String, u32, String)> =
            rows.into_iter().map(mysql_async::from_row).collect();
        assert_eq!(rows, vec![("Error".to_string(), 1235, message.clone())]);
        let (_, errors) = described(&mut a, "SHOW ERRORS LIMIT 1", prepared).await;
        assert_eq!(errors.len(), 1);
        let (_, none) = described(&mut a, "SHOW WARNINGS LIMIT 0", prepared).await;
        assert!(none.is_empty());
        let (count_cols, count) = described(&mut a, "SHOW COUNT(*) ERRORS", prepared).await;
        assert_eq!(count_cols, want_count_cols);
        assert_eq!(
            count
                .into_iter()
                .map(mysql_async::from_row)
                .collect::<Vec<u64>>(),
            vec![1]
        );
        // A SET names no table: the error stays, as on MariaDB.
        a.query_drop("SET @own_err = 1").await.expect("set");
        let counts: Option<(u64, u64)> = if prepared {
            a.exec_first("SELECT @@warning_count, @@session.error_count", ())
                .await
                .expect("counts")
        } else {
            a.query_first("SELECT @@warning_count, @@session.error_count")
                .await
                .expect("counts")
        };
        assert_eq!(
            counts,
            Some((1, 1)),
            "the counts after a SET (prepared: {prepared})"
        );
        // A read of a table clears it.
        a.query_drop("SELECT v FROM t_own_err WHERE user_id = 1")
            .await
            .expect("read");
        let (_, rows) = described(&mut a, "SHOW WARNINGS", prepared).await;
        assert!(
            rows.is_empty(),
            "SHOW WARNINGS after a read (prepared: {prepared})"
        );
        let counts: Option<(u64, u64)> = a
            .query_first("SELECT @@warning_count, @@error_count")
            .await
            .expect("counts");
        assert_eq!(counts, Some((0, 0)));
    }
    // A node's error after the proxy's: the node's is what SHOW WARNINGS tells.
    expect_code(a.query_drop(refused).await, 1235, "a refusal");
    expect_code(
        a.query_drop("SELECT * FROM t_own_err_nowhere").await,
        1146,
        "the node's error",
    );
    let (_, rows) = described(&mut a, "SHOW WARNINGS", false).await;
    let rows: Vec<(String, u32, String)> = rows.into_iter().map(mysql_async::from_row).collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].1, 1146, "{rows:?}");
}

/// User variables follow the session from node to node, as on one MariaDB: a `SET @v` that
/// counts up, a value computed over a sharded table, `@v := ...` and `SELECT ... INTO @v` on
/// one node, each read afterwards in statements that run on every other node; an assignment
/// that would run on several nodes is refused. Named locks are one lock for every session:
/// they live on the default node, wherever the session ran last.
#[test]
fn user_variables_and_named_locks_follow_the_session_across_nodes() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_uvar"));
    block_on(async move {
        let mut a = proxy.conn().await;
        a.query_drop("CREATE TABLE IF NOT EXISTS t_uvar (user_id BIGINT PRIMARY KEY, v INT)")
            .await
            .expect("create");
        let keys = spread_keys(2, 0);
        for (i, k) in keys.iter().enumerate() {
            a.exec_drop("INSERT INTO t_uvar VALUES (?, ?)", (k, i as i64 + 1))
                .await
                .expect("insert");
        }
        let total: i64 = (1..=keys.len() as i64).sum();
        let on = |n: usize| keys[n];

        a.query_drop("SET @c = 0").await.expect("set");
        for _ in 0..3 {
            a.query_drop("SET @c = @c + 1").await.expect("count up");
        }
        a.query_drop("SET @n = (SELECT SUM(v) FROM t_uvar), @m := @n * 2")
            .await
            .expect("set from a sharded table");
        for n in 0..NODES {
            let row: Option<(i64, i64, i64, i64)> = a
                .exec_first(
                    "SELECT @c, @n, @m, v FROM t_uvar WHERE user_id = ?",
                    (on(n),),
                )
                .await
                .expect("read on a node");
            let (c, sum, twice, _) = row.expect("a row");
            assert_eq!((c, sum, twice), (3, total, 2 * total), "on ds{n}");
        }
        // Mixed with other variables: each assignment in its turn.
        a.query_drop("SET @m2 = @c + 1, time_zone = '+03:00', autocommit = 1, @m3 = @m2 * 10")
            .await
            .expect("a mixed SET");
        for n in 0..NODES {
            let got: Option<(i64, String, i64)> = a
                .exec_first(
                    "SELECT @m2, @@time_zone, @m3 FROM t_uvar WHERE user_id = ?",
                    (on(n),),
                )
                .await
                .expect("read on a node");
            assert_eq!(got, Some((4, "+03:00".to_string(), 40)), "on ds{n}");
        }
        // Assigned inside statements that one node answers, then read on the others.
        let v0: Option<i64> = a
            .query_first(format!(
                "SELECT @r := v FROM t_uvar WHERE user_id = {}",
                on(0)
            ))
            .await
            .expect(":=");
        a.query_drop(format!(
            "SELECT v INTO @i FROM t_uvar WHERE user_id = {}",
            on(1)
        ))
        .await
        .expect("INTO");
        let v1: Option<i64> = a
            .exec_first("SELECT v FROM t_uvar WHERE user_id = ?", (on(1),))
            .await
            .expect("read");
        for n in 0..NODES {
            let got: Option<(Option<i64>, Option<i64>)> = a
                .query_first(format!(
                    "SELECT @r, @i FROM t_uvar WHERE user_id = {}",
                    on(n)
                ))
                .await
                .expect("read the assigned values");
            assert_eq!(got, Some((v0, v1)), "on ds{n}");
        }
        let filtered: Vec<i64> = a
            .query("SELECT user_id FROM t_uvar WHERE v > @c ORDER BY user_id")
            .await
            .expect("a fan-out reading a variable");
        assert_eq!(filtered.len(), keys.len() - 3);
        let e = expect_code(
            a.query::<i64, _>("SELECT @x := v FROM t_uvar").await,
            1235,
            "an assignment on every node",
        );
        assert!(e.contains("@x"), "{e}");
        // The same through prepared statements (the binary protocol).
        a.exec_drop("SET @p = ?, @q = CONCAT(?, @p)", (3, "x"))
            .await
            .expect("prepared SET");
        let v2: Option<i64> = a
            .exec_first("SELECT @s := v FROM t_uvar WHERE user_id = ?", (on(2),))
            .await
            .expect("prepared :=");
        for n in 0..NODES {
            let got: Option<(i64, String, Option<i64>)> = a
                .exec_first("SELECT @p, @q, @s FROM t_uvar WHERE user_id = ?", (on(n),))
                .await
                .expect("read the prepared values");
            assert_eq!(got, Some((3, "x3".to_string(), v2)), "on ds{n}");
        }
        expect_code(
            a.exec::<i64, _, _>("SELECT @x := v FROM t_uvar WHERE v > ?", (0,))
                .await,
            1235,
            "a prepared assignment on every node",
        );
        // Another session has variables of its own.
        let mut b = proxy.conn().await;
        let none: Option<Option<i64>> = b.query_first("SELECT @c").await.expect("b");
        assert_eq!(none, Some(None));

        // Named locks: taken by a, seen as taken by b, released by a after a statement on
        // another node, free again.
        let got: Option<i64> = a
            .query_first("SELECT GET_LOCK('t_uvar_lock', 5)")
            .await
            .expect("get");
        assert_eq!(got, Some(1));
        a.exec_drop("SELECT v FROM t_uvar WHERE user_id = ?", (on(NODES - 1),))
            .await
            .expect("elsewhere");
        b.exec_drop("SELECT v FROM t_uvar WHERE user_id = ?", (on(1),))
            .await
            .expect("b elsewhere");
        let free: Option<i64> = b
            .query_first("SELECT IS_FREE_LOCK('t_uvar_lock')")
            .await
            .expect("is free");
        assert_eq!(free, Some(0), "b sees a's lock");
        let released: Option<i64> = a
            .query_first("SELECT RELEASE_LOCK('t_uvar_lock')")
            .await
            .expect("release");
        assert_eq!(released, Some(1), "released where it was taken");
        let free: Option<i64> = b
            .query_first("SELECT IS_FREE_LOCK('t_uvar_lock')")
            .await
            .expect("is free");
        assert_eq!(free, Some(1));
        expect_code(
            a.query::<i64, _>(format!(
                "SELECT GET_LOCK('x', 0) FROM t_uvar WHERE user_id = {}",
                on(1)
            ))
            .await,
            1235,
            "a lock in a statement on a shard node",
        );
    });
}

/// A connection whose session assigned user variables goes to the next session without them,
/// while the first session, elsewhere by then, keeps its values: one connection per node.
#[test]
fn a_sessions_user_variables_stay_its_own_on_a_lent_connection() {
    let c = cluster();
    let rules =
        rules_toml(c, &sharded("t_uvar2")).replace("/shop\"", "/shop?pool_min=1&pool_max=1\"");
    let proxy = start_proxy_with_rules(rules);
    block_on(async move {
        let mut a = proxy.conn().await;
        a.query_drop("CREATE TABLE IF NOT EXISTS t_uvar2 (user_id BIGINT PRIMARY KEY, v INT)")
            .await
            .expect("create");
        let (k0, k1) = (key_on_node(&L, 0), key_on_node(&L, 1));
        a.exec_drop("REPLACE INTO t_uvar2 VALUES (?, 7), (?, 8)", (k0, k1))
            .await
            .expect("rows");
        let id_a: Option<u64> = a
            .exec_first(
                "SELECT @@pseudo_thread_id FROM t_uvar2 WHERE user_id = ? AND (@r := v) > 0",
                (k0,),
            )
            .await
            .expect("a assigns on ds0");
        a.query_drop("SET @s = 'mine'").await.expect("a sets");
        // a moves on to ds1: ds0's only connection goes back to the pool, to b.
        a.exec_drop("SELECT v FROM t_uvar2 WHERE user_id = ?", (k1,))
            .await
            .expect("a on ds1");
        let mut b = proxy.conn().await;
        let got: Option<(u64, Option<i64>, Option<String>)> = b
            .exec_first(
                "SELECT @@pseudo_thread_id, @r, @s FROM t_uvar2 WHERE user_id = ?",
                (k0,),
            )
            .await
            .expect("b on ds0");
        let (id_b, r, s) = got.expect("a row");
        assert_eq!(Some(id_b), id_a, "ds0's one connection went from a to b");
        assert_eq!((r, s), (None, None), "a's user variables reached b");
        drop(b);
        let got: Option<(i64, String)> = a
            .exec_first("SELECT @r, @s FROM t_uvar2 WHERE user_id = ?", (k0,))
            .await
            .expect("a back on ds0");
        assert_eq!(got, Some((7, "mine".to_string())));
        drop(a);
        // A session with no SETs of its own whose statement fails after it assigned (the
        // select list runs left to right; the correlated subquery fails at the row): what
        // it assigned is read back all the same, so the next session, with no SETs either,
        // does not get it with the connection.
        let mut f = proxy.conn().await;
        expect_code(
            f.query_drop(format!(
                "SELECT @e := v, (SELECT x.a FROM (SELECT 1 AS a UNION ALL SELECT 2) x WHERE t.v > 0) FROM t_uvar2 t WHERE user_id = {k0}"
            ))
            .await,
            1242,
            "a subquery of two rows",
        );
        let e: Option<(Option<i64>,)> = f
            .exec_first("SELECT @e FROM t_uvar2 WHERE user_id = ?", (k1,))
            .await
            .expect("f on ds1");
        assert_eq!(
            e,
            Some((Some(7),)),
            "the value MariaDB assigned before the error"
        );
        let mut g = proxy.conn().await;
        let e: Option<(Option<i64>,)> = g
            .exec_first("SELECT @e FROM t_uvar2 WHERE user_id = ?", (k0,))
            .await
            .expect("g on ds0");
        assert_eq!(e, Some((None,)), "f's user variable reached g");
    });
}
