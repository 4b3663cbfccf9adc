//! `UPDATE t SET shard_key = ...` against the reference MariaDB: rows moved between nodes in
//! one transaction, answered with the same affected rows and `Rows matched / Changed`, in
//! autocommit and in transactions (committed, rolled back, and a failed statement inside
//! one), text and prepared; what cannot be done exactly is refused with 1235.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::common::{hash_slot_table, node_of_key, start_proxy_on};
use crate::judge::{must, Pair};
use crate::{cluster, ER_NOT_SUPPORTED_YET, L, SHARDS};

/// A statement's outcome as a client sees it: affected rows and info, or the error code.
async fn outcome(c: &mut Conn, sql: &str, params: Option<Vec<mysql_async::Value>>) -> String {
    let r = match params {
        None => c.query_drop(sql).await,
        Some(p) => c.exec_drop(sql, p).await,
    };
    match r {
        Ok(()) => format!("ok {} [{}]", c.affected_rows(), c.info()),
        Err(mysql_async::Error::Server(e)) => format!("error {}", e.code),
        Err(e) => format!("client error {e}"),
    }
}

async fn rows(c: &mut Conn) -> Vec<(i64, String, Option<String>)> {
    c.query("SELECT user_id, name, CAST(v AS CHAR) FROM t_ku ORDER BY user_id")
        .await
        .expect("read t_ku")
}

#[tokio::test]
async fn an_update_of_the_shard_key_moves_rows_like_one_mariadb() {
    let c = cluster();
    let proxy = start_proxy_on(c, &SHARDS, &hash_slot_table("t_ku", "user_id", &L));
    let mut pair = Pair::new(&proxy, c).await;
    for sql in [
        "DROP TABLE IF EXISTS t_ku",
        "CREATE TABLE t_ku (user_id BIGINT PRIMARY KEY, name VARCHAR(20) NOT NULL, v DECIMAL(8,2))",
        "INSERT INTO t_ku VALUES (1, 'a', 1.5), (2, 'b', 2), (3, 'c', NULL), (4, 'd', 4), \
         (5, 'e', 5), (6, 'f', 6), (7, 'g', 7), (8, 'h', 8), (9, 'i', 9), (10, 'j', 10)",
    ] {
        must(&mut pair.p, sql, "the proxy").await;
        must(&mut pair.r, sql, "the reference").await;
    }
    // The keys move between nodes: 1 and 2 go elsewhere, some of 4..10 stay.
    assert!(
        (1..=10).any(|k| node_of_key(&L, k) != node_of_key(&L, k + 100)),
        "no key moves: the test proves nothing"
    );
    type P = Option<Vec<mysql_async::Value>>;
    let steps: Vec<(&str, P)> = vec![
        // Autocommit: several rows to several nodes.
        (
            "UPDATE t_ku SET user_id = user_id + 100 WHERE user_id <= 4",
            None,
        ),
        // A row that stays (same key), and one that changes nothing.
        (
            "UPDATE t_ku SET user_id = user_id, name = 'E' WHERE user_id = 5",
            None,
        ),
        ("UPDATE t_ku SET user_id = 6 WHERE user_id = 6", None),
        // Other columns along, computed by the node.
        (
            "UPDATE t_ku SET user_id = 1000 + user_id, v = v * 2 WHERE name IN ('f', 'g')",
            None,
        ),
        // No row matches.
        ("UPDATE t_ku SET user_id = 1 WHERE user_id = 424242", None),
        // A duplicate key: the whole statement fails, nothing moves.
        (
            "UPDATE t_ku SET user_id = 101 WHERE user_id IN (8, 9)",
            None,
        ),
        // Prepared.
        (
            "UPDATE t_ku SET user_id = ? WHERE user_id = ?",
            Some(vec![77.into(), 8.into()]),
        ),
        // A transaction rolled back.
        ("BEGIN", None),
        ("UPDATE t_ku SET user_id = 500 WHERE user_id = 9", None),
        ("ROLLBACK", None),
        // A transaction with a failed statement inside, then committed.
        ("BEGIN", None),
        ("UPDATE t_ku SET user_id = 900 WHERE user_id = 9", None),
        (
            "UPDATE t_ku SET user_id = 102 WHERE user_id IN (10, 101)",
            None,
        ),
        (
            "UPDATE t_ku SET user_id = 910, name = 'J' WHERE user_id = 10",
            None,
        ),
        ("COMMIT", None),
    ];
    let mut differ = Vec::new();
    for (sql, params) in steps {
        let want = outcome(&mut pair.r, sql, params.clone()).await;
        let got = outcome(&mut pair.p, sql, params).await;
        if want != got {
            differ.push(format!("{sql}\n  reference: {want}\n  proxy:     {got}"));
        }
        let (w, g) = (rows(&mut pair.r).await, rows(&mut pair.p).await);
        if w != g {
            differ.push(format!(
                "after {sql}\n  reference: {w:?}\n  proxy:     {g:?}"
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    // Every row sits on the node its key names, once.
    for (k, _, _) in rows(&mut pair.r).await {
        let node = node_of_key(&L, k);
        let pool = c.direct(SHARDS[node]);
        let mut conn = pool.get_conn().await.expect("shard");
        let n: Option<i64> = conn
            .exec_first("SELECT COUNT(*) FROM t_ku WHERE user_id = ?", (k,))
            .await
            .expect("count");
        assert_eq!(n, Some(1), "key {k} on ds{node}");
        drop(conn);
        pool.disconnect().await.ok();
    }
    // What it cannot do exactly is refused, and changes nothing.
    for sql in [
        "UPDATE t_ku SET user_id = user_id + 1, v = user_id WHERE user_id = 5",
        "UPDATE t_ku SET user_id = user_id + 1 WHERE user_id > 0 ORDER BY user_id LIMIT 1",
    ] {
        let got = outcome(&mut pair.p, sql, None).await;
        assert_eq!(got, format!("error {ER_NOT_SUPPORTED_YET}"), "{sql}");
    }
    assert_eq!(rows(&mut pair.r).await, rows(&mut pair.p).await);
}
