//! Views over sharded tables (issue 30): created through the proxy, kept in its metadata
//! schema, read as their SELECTs, against the same views on the reference: answers, column
//! names, the errors MariaDB gives at CREATE / ALTER / DROP VIEW, views over views and
//! column lists, text and prepared; a second proxy sees them; a write to one is refused.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use crate::common::{expect_code, hash_slot_table, start_proxy_with_rules, Proxy};
use crate::judge::{judge, must, Check, Compare, Outcome, Pair};
use crate::{cluster, ER_NOT_SUPPORTED_YET, L, REFERENCE, SHARDS};

/// The metadata schema of this test's proxies, on the reference node's server.
const META: &str = "meta_views";

fn rules() -> String {
    let c = cluster();
    let mut s = String::from(
        "version = 1\ndefault_node = \"ds0\"\n\n[server]\nlisten = \"127.0.0.1:0\"\n\
         users = [{ name = \"app\", password = \"app\" }]\n\n",
    );
    s.push_str(&format!(
        "[metadata]\nurl = \"{}\"\npoll_ms = 100\n\n[nodes]\n",
        c.root_url(REFERENCE, META)
    ));
    for (i, node) in SHARDS.iter().enumerate() {
        s.push_str(&format!("ds{i} = \"{}\"\n", c.url(*node)));
    }
    s.push('\n');
    s.push_str(&hash_slot_table("t_vo", "user_id", &L));
    s.push_str("[tables.t_vc]\nrule = \"broadcast\"\n\n");
    s
}

const SETUP: &[&str] = &[
    "DROP VIEW IF EXISTS v_top, v_sum, v_o, v_named, v_cnt, v_lbl",
    "DROP TABLE IF EXISTS t_vo",
    "DROP TABLE IF EXISTS t_vc",
    "CREATE TABLE t_vo (id INT PRIMARY KEY, user_id INT NOT NULL, amount DECIMAL(8,2), \
     status VARCHAR(10))",
    "CREATE TABLE t_vc (code VARCHAR(10) PRIMARY KEY, label VARCHAR(20))",
    "INSERT INTO t_vo VALUES (1, 1, 10.50, 'paid'), (2, 1, 99.00, 'paid'), (3, 2, 5.25, 'new'), \
     (4, 3, 120.00, 'paid'), (5, 3, 1.00, 'cancelled'), (6, 4, NULL, 'new'), \
     (7, 5, 300.00, 'paid'), (8, 6, 42.00, 'new'), (9, 7, 0.50, 'cancelled'), (10, 8, 77.70, 'paid')",
    "INSERT INTO t_vc VALUES ('paid', 'Paid'), ('new', 'New'), ('cancelled', 'Cancelled')",
];

/// The views, created on both.
const VIEWS: &[&str] = &[
    "CREATE VIEW v_o AS SELECT id, user_id, amount, status FROM t_vo WHERE status <> 'cancelled'",
    "CREATE VIEW v_sum (uid, total, n) AS SELECT user_id, SUM(amount), COUNT(*) FROM t_vo GROUP BY user_id",
    "CREATE VIEW v_top AS SELECT uid, total FROM v_sum WHERE total > 100",
    "CREATE OR REPLACE ALGORITHM=TEMPTABLE VIEW v_named AS SELECT o.id, c.label FROM t_vo o \
     JOIN t_vc c ON c.code = o.status",
    "CREATE VIEW v_lbl AS SELECT code, label FROM t_vc WHERE label <> 'New'",
];

/// (query, compared as).
const READS: &[(&str, Compare)] = &[
    ("SELECT * FROM v_o ORDER BY id", Compare::Ordered),
    ("SELECT * FROM v_o WHERE user_id = 3", Compare::Unordered),
    ("SELECT status, COUNT(*), SUM(amount) FROM v_o GROUP BY status ORDER BY status", Compare::Ordered),
    ("SELECT * FROM v_sum ORDER BY uid", Compare::Ordered),
    ("SELECT uid, total FROM v_top ORDER BY total DESC", Compare::Ordered),
    ("SELECT x.uid, c.label FROM v_sum x JOIN t_vo o ON o.user_id = x.uid JOIN t_vc c ON c.code = o.status ORDER BY o.id", Compare::Ordered),
    ("SELECT id FROM t_vo WHERE user_id IN (SELECT uid FROM v_top) ORDER BY id", Compare::Ordered),
    ("SELECT (SELECT MAX(total) FROM v_sum), COUNT(*) FROM v_named", Compare::Ordered),
    ("SELECT label, COUNT(*) FROM v_named GROUP BY label ORDER BY label", Compare::Ordered),
    ("SELECT shop.v_o.id FROM shop.v_o WHERE amount > 50 ORDER BY 1 LIMIT 2", Compare::Ordered),
    ("SELECT a.id, b.id FROM v_o a JOIN v_o b ON b.user_id = a.user_id AND b.id > a.id ORDER BY 1, 2", Compare::Ordered),
    ("WITH v_o AS (SELECT 1 AS id) SELECT * FROM v_o", Compare::Ordered),
    ("SELECT COUNT(*) FROM v_nosuch", Compare::Ordered),
    ("SHOW FULL TABLES LIKE 'v\\_%'", Compare::Ordered),
    ("SHOW TABLES LIKE 'v_s%'", Compare::Ordered),
];

/// Their shape, as tools and mariadb-dump read it: answered like the reference to a text
/// query; prepared, answered alike or refused (a listing over every node, a view's columns).
const CATALOG: &[(&str, Compare)] = &[
    ("DESCRIBE v_o", Compare::Ordered),
    ("DESCRIBE v_sum uid", Compare::Ordered),
    ("SHOW FULL COLUMNS FROM v_named", Compare::Ordered),
    ("SHOW COLUMNS FROM v_top LIKE 't%'", Compare::Ordered),
    ("SHOW FIELDS FROM v_lbl WHERE Field = 'label'", Compare::Ordered),
    ("SELECT TABLE_NAME, TABLE_TYPE, ENGINE, TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 'v\\_%' ORDER BY TABLE_NAME", Compare::Ordered),
    ("SELECT engine, table_type FROM INFORMATION_SCHEMA.TABLES WHERE table_schema = DATABASE() AND table_name = 'v_o'", Compare::Ordered),
    ("SELECT TABLE_NAME, CHECK_OPTION, SECURITY_TYPE, ALGORITHM FROM information_schema.VIEWS WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME", Compare::Ordered),
    ("SELECT v.TABLE_NAME FROM information_schema.VIEWS v WHERE v.TABLE_SCHEMA = 'shop' AND v.TABLE_NAME = 'v_top'", Compare::Ordered),
    // Table maintenance, each node holding a table running it.
    ("ANALYZE TABLE t_vo, t_vc", Compare::Ordered),
    ("CHECK TABLE t_vo QUICK", Compare::Ordered),
    ("CHECK TABLE t_vo, t_nosuch", Compare::Ordered),
];

/// View statements whose outcome (OK, or the error code) must be the reference's.
const DDL: &[&str] = &[
    "CREATE VIEW v_o AS SELECT 1",
    "CREATE VIEW IF NOT EXISTS v_o AS SELECT 1",
    "ALTER VIEW v_nosuch AS SELECT id FROM t_vo",
    "CREATE VIEW v_bad AS SELECT nosuch FROM t_vo",
    "CREATE VIEW v_bad (a, A) AS SELECT id, user_id FROM t_vo",
    "CREATE VIEW v_bad (a) AS SELECT id, user_id FROM t_vo",
    "CREATE VIEW v_bad AS SELECT id, user_id AS id FROM t_vo",
    "CREATE VIEW v_bad AS SELECT id FROM t_vo WHERE user_id = @x",
    "CREATE VIEW t_vo AS SELECT 1",
    "DROP VIEW v_nosuch",
    "DROP VIEW IF EXISTS v_nosuch",
    "CREATE VIEW v_cnt AS SELECT COUNT(*) AS n FROM t_vo",
    "ALTER VIEW v_cnt AS SELECT COUNT(*) AS n FROM t_vo WHERE status = 'paid'",
];

async fn outcome(c: &mut Conn, sql: &str) -> String {
    match c.query_drop(sql).await {
        Ok(()) => "ok".into(),
        Err(mysql_async::Error::Server(e)) => format!("error {}", e.code),
        Err(e) => format!("client error {e}"),
    }
}

async fn fresh_metadata() {
    let mut c = cluster()
        .direct(REFERENCE)
        .get_conn()
        .await
        .expect("reference");
    c.query_drop(format!("DROP DATABASE IF EXISTS {META}"))
        .await
        .expect("drop the metadata schema");
    c.query_drop(format!("CREATE DATABASE {META}"))
        .await
        .expect("create the metadata schema");
}

/// Waits until `sql` answers `want` through `proxy` (its first value as text, or `error
/// CODE`): another proxy's change arrives by poll.
async fn until(proxy: &Proxy, sql: &str, want: &str) {
    let mut c = proxy.conn().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = match c.query_first::<String, _>(sql).await {
            Ok(v) => v.unwrap_or_else(|| "no row".into()),
            Err(mysql_async::Error::Server(e)) => format!("error {}", e.code),
            Err(e) => format!("client error {e}"),
        };
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{sql}: still {got}, not {want}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn views_over_sharded_tables_answer_like_one_mariadb() {
    let c = cluster();
    fresh_metadata().await;
    let proxy = start_proxy_with_rules(rules());
    let mut pair = Pair::new(&proxy, c).await;
    for sql in SETUP.iter().chain(VIEWS) {
        must(&mut pair.p, sql, "the proxy").await;
        must(&mut pair.r, sql, "the reference").await;
    }
    // The views live in the metadata, not on the nodes.
    let mut ds0 = c.direct(SHARDS[0]).get_conn().await.expect("ds0");
    let on_node: Vec<String> = ds0
        .query("SELECT TABLE_NAME FROM information_schema.VIEWS WHERE TABLE_SCHEMA = 'shop' AND TABLE_NAME LIKE 'v\\_%'")
        .await
        .expect("ds0's views");
    assert!(on_node.is_empty(), "views on ds0: {on_node:?}");

    let mut wrong = Vec::new();
    // READS must match in both protocols; CATALOG prepared may be refused instead.
    let reads = READS.iter().map(|r| (r, false));
    for ((sql, compare), may_refuse_prepared) in reads.chain(CATALOG.iter().map(|r| (r, true))) {
        for prepared in [false, true] {
            if prepared && sql.starts_with("SHOW") {
                continue;
            }
            let (want, got) = pair.both(sql, prepared).await;
            match judge(&want, &got, &Check::exact(*compare)) {
                Outcome::Matched => {}
                Outcome::Refused(_) if prepared && may_refuse_prepared => {}
                Outcome::Refused(r) => {
                    wrong.push(format!("{sql} (prepared {prepared}): refused: {r}"))
                }
                Outcome::Wrong(w) => wrong.push(format!("{sql} (prepared {prepared}): {w}")),
            }
        }
    }
    // A prepared statement with a parameter, over a view over a view.
    let sql = "SELECT uid, total FROM v_top WHERE uid > ? ORDER BY uid";
    let want: Vec<(i64, String)> = pair.r.exec(sql, (2,)).await.expect("reference");
    let got: Vec<(i64, String)> = pair.p.exec(sql, (2,)).await.expect("proxy");
    assert_eq!(got, want, "{sql}");
    for sql in DDL {
        let want = outcome(&mut pair.r, sql).await;
        let got = outcome(&mut pair.p, sql).await;
        if got != want {
            wrong.push(format!("{sql}: the reference gave {want}, the proxy {got}"));
        }
    }
    for (sql, compare) in [
        ("SELECT * FROM v_cnt", Compare::Ordered),
        ("SELECT * FROM v_o ORDER BY id", Compare::Ordered),
    ] {
        let (want, got) = pair.both(sql, false).await;
        if let Outcome::Wrong(w) | Outcome::Refused(w) = judge(&want, &got, &Check::exact(compare))
        {
            wrong.push(format!("{sql} after the DDL: {w}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} differences:\n{}",
        wrong.len(),
        wrong.join("\n")
    );

    // SHOW CREATE VIEW names the view and gives a statement that makes it again.
    let row: (String, String, String, String) = pair
        .p
        .query_first("SHOW CREATE VIEW v_sum")
        .await
        .expect("SHOW CREATE VIEW")
        .expect("a row");
    assert_eq!(row.0, "v_sum");
    assert!(
        row.1.starts_with("CREATE ALGORITHM=UNDEFINED DEFINER=`app`@`%` SQL SECURITY DEFINER VIEW `v_sum` (`uid`,`total`,`n`) AS SELECT user_id"),
        "{}",
        row.1
    );

    // Reads of a view inside a write run where the view's tables are where the write runs
    // (a broadcast table's); elsewhere they are refused as the same write over the view's
    // tables is, naming those tables; writes to a view are refused with the reason.
    let msg = expect_code(
        pair.p
            .query_drop(
                "UPDATE t_vo SET amount = amount + 1 WHERE user_id IN (SELECT uid FROM v_top)",
            )
            .await,
        ER_NOT_SUPPORTED_YET,
        "a write reading a view over other nodes' rows",
    );
    assert!(msg.contains("t_vo") && !msg.contains("__sp"), "{msg}");
    for sql in [
        "UPDATE t_vo SET amount = amount + 1 WHERE status IN (SELECT code FROM v_lbl)",
        "DELETE FROM t_vo WHERE status IN (SELECT code FROM v_lbl WHERE label = 'Cancelled')",
    ] {
        must(&mut pair.p, sql, "the proxy").await;
        must(&mut pair.r, sql, "the reference").await;
    }
    let (want, got) = pair.both("SELECT * FROM t_vo ORDER BY id", false).await;
    assert!(matches!(
        judge(&want, &got, &Check::exact(Compare::Ordered)),
        Outcome::Matched
    ));
    for sql in [
        "INSERT INTO v_o (id, user_id) VALUES (100, 1)",
        "UPDATE v_o SET amount = 0 WHERE id = 1",
        "DELETE FROM v_o WHERE id = 1",
    ] {
        let msg = expect_code(pair.p.query_drop(sql).await, ER_NOT_SUPPORTED_YET, sql);
        assert!(msg.contains("v_o"), "{msg}");
    }

    // Another proxy over the same metadata: the views are there when it starts, and it
    // follows a change made through the first one.
    let second = start_proxy_with_rules(rules());
    let mut s = second.conn().await;
    let n: Option<i64> = s
        .query_first("SELECT COUNT(*) FROM v_o")
        .await
        .expect("second proxy");
    let want: Option<i64> = pair
        .r
        .query_first("SELECT COUNT(*) FROM v_o")
        .await
        .expect("reference");
    assert_eq!(n, want);
    must(
        &mut pair.p,
        "CREATE OR REPLACE VIEW v_cnt AS SELECT 42 AS n FROM t_vc LIMIT 1",
        "the proxy",
    )
    .await;
    until(&second, "SELECT n FROM v_cnt", "42").await;
    must(&mut pair.p, "DROP VIEW v_cnt, v_named", "the proxy").await;
    until(&second, "SELECT * FROM v_cnt", "error 1146").await;
    let _ = expect_code(
        s.query_drop("SELECT * FROM v_named").await,
        1146,
        "a dropped view",
    );
    for sql in [
        "DROP VIEW IF EXISTS v_top, v_sum, v_o, v_named, v_cnt, v_lbl",
        "DROP TABLE t_vo",
        "DROP TABLE t_vc",
    ] {
        must(&mut pair.p, sql, "the proxy").await;
        must(&mut pair.r, sql, "the reference").await;
    }
}

#[tokio::test]
async fn a_view_without_a_metadata_schema_is_refused_with_the_reason() {
    let c = cluster();
    let proxy = crate::common::start_proxy_on(c, &SHARDS, &hash_slot_table("t_vn", "user_id", &L));
    let mut p = proxy.conn().await;
    must(&mut p, "DROP TABLE IF EXISTS t_vn", "the proxy").await;
    must(
        &mut p,
        "CREATE TABLE t_vn (user_id INT PRIMARY KEY)",
        "the proxy",
    )
    .await;
    let msg = expect_code(
        p.query_drop("CREATE VIEW v_vn AS SELECT * FROM t_vn").await,
        ER_NOT_SUPPORTED_YET,
        "a view without [metadata]",
    );
    assert!(msg.contains("[metadata]"), "{msg}");
    must(&mut p, "DROP TABLE t_vn", "the proxy").await;
}
