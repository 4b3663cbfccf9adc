//! Statements across placements: INSERT ... SELECT moving rows, refusals and fan-out SELECTs, broadcast and single tables.

use super::*;

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

    // An UPDATE of the shard key moves rows between nodes (tests/differential/key_update.rs);
    // one it cannot run exactly is refused, and changes nothing.
    expect_code(
        conn.query_drop(format!(
            "UPDATE t_fan SET user_id = {target}, v = user_id WHERE user_id = {k0}"
        ))
        .await,
        1235,
        "UPDATE of the shard key and of a column from it",
    );
    expect_code(
        conn.query_drop("UPDATE t_fan SET user_id = user_id + 1 ORDER BY user_id LIMIT 1")
            .await,
        1235,
        "UPDATE of the shard key with ORDER BY and LIMIT",
    );
    expect_code(
        conn.exec_drop(
            "UPDATE t_fan SET user_id = ?, user_id = ? WHERE user_id = ?",
            (target, target, k0),
        )
        .await,
        1235,
        "prepared UPDATE setting the shard key twice",
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
