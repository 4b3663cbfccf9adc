//! Statements routed by their key: the slot hash, point reads and writes, multi-row INSERT split by node, UPDATE and DELETE with and without a key.

use super::*;

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
