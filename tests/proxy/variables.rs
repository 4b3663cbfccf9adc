//! Result shapes, diagnostics of refusals, user variables and named locks across nodes and lent connections.

use super::*;

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

    let refused = "UPDATE t_own_err SET user_id = user_id + 1 ORDER BY user_id LIMIT 1";
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
