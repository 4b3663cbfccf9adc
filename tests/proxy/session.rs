//! A session: logins, syntax errors, transactions on one node, session basics, and the session functions answering as one MariaDB on lent connections.

use super::*;

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
