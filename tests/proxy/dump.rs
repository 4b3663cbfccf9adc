//! One database to the tools (issue 29): `SHOW [FULL] TABLES`, `SHOW TABLE STATUS` and
//! `information_schema.TABLES` list every table and kept view once, wherever its rule puts
//! it, and not the proxy's own tables; `LOCK TABLES` locks each table where it is (a view's
//! tables too), two sessions in opposite orders without a deadlock; `FLUSH TABLES WITH READ
//! LOCK` locks every node; and `mariadb-dump` through the proxy, with its defaults, with
//! `--single-transaction` and with `--no-data`, holds every table and view of every rule
//! kind (hash, range, directory, time-tier, broadcast, single, default node), and restored
//! through the proxy into emptied nodes gives the same rows on the same nodes, the view
//! again, and a sequence that continues above the restored ids. The test has a database of
//! its own on every node, so a dump of it sees no other test's tables.

use std::process::{Command, Stdio};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::*;

const DB: &str = "dumpdb";

const META: &str = "dumpmeta";

/// hash_slot `t_dh` over the four nodes, `t_dq` the same with a sequence for its ids,
/// broadcast `t_db`, `t_ds` on ds2 alone, range `t_dr` by id, directory `t_dy` (one key on
/// ds3, the rest hashed), time-tier `t_dt` (hot on ds0 from 2024, cold on ds1), and `t_dd`
/// on the default node (named by no rule).
fn rules(c: &Cluster, directed: i64) -> String {
    let mut s = format!(
        "version = 1\ndefault_node = \"ds0\"\n\n[server]\nlisten = \"127.0.0.1:0\"\n\
         users = [{{ name = \"app\", password = \"app\" }}]\n\n[metadata]\nurl = \"{}\"\n\n[nodes]\n",
        c.root_url(0, META)
    );
    for i in 0..NODES {
        s.push_str(&format!("ds{i} = \"{}\"\n", c.root_url(i, DB)));
    }
    s.push('\n');
    s.push_str(&sharded("t_dh"));
    s.push_str(&sharded("t_dq"));
    s.insert_str(
        s.trim_end().len(),
        "\nkey_generator = { column = \"id\", kind = \"sequence\" }",
    );
    s.push_str(&format!(
        "\n[tables.t_db]\nrule = \"broadcast\"\n\n[tables.t_ds]\nrule = \"single\"\nnode = \"ds2\"\n\n\
         [tables.t_dr]\nrule = \"range\"\ncolumn = \"id\"\n\
         ranges = [{{ below = 5, node = \"ds0\" }}, {{ below = 9, node = \"ds1\" }}, {{ node = \"ds3\" }}]\n\n\
         [tables.t_dy]\nrule = \"directory\"\ncolumn = \"user_id\"\nentries = {{ \"{directed}\" = \"ds3\" }}\n\
         fallback = {{ rule = \"hash_slot\", slots = [{{ slots = \"0-511\", node = \"ds0\" }}, {{ slots = \"512-1023\", node = \"ds1\" }}] }}\n\n\
         [tables.t_dt]\nrule = \"time_tier\"\ncolumn = \"d\"\n\
         tiers = [{{ name = \"hot\", node = \"ds0\", lower = \"2024-01-01\" }}, {{ name = \"cold\", node = \"ds1\" }}]\n\n"
    ));
    s
}

const TABLES: [&str; 8] = [
    "t_db", "t_dd", "t_dh", "t_dq", "t_dr", "t_ds", "t_dt", "t_dy",
];
const VIEW: &str = "v_dump";

async fn node_conn(c: &Cluster, node: usize) -> (mysql_async::Pool, Conn) {
    let pool = mysql_async::Pool::new(
        mysql_async::Opts::from_url(&c.root_url(node, DB)).expect("node URL"),
    );
    let conn = pool.get_conn().await.expect("connect to a node");
    (pool, conn)
}

/// Every table's and the view's rows through the proxy, as text.
async fn contents(p: &mut Conn) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for t in TABLES {
        let rows: Vec<String> = p
            .query(format!(
                "SELECT CONCAT_WS('|', id, user_id, v, d) FROM {t} ORDER BY id"
            ))
            .await
            .expect("read a table");
        out.push((t.to_string(), rows));
    }
    let rows: Vec<String> = p
        .query(format!(
            "SELECT CONCAT_WS('|', id, v, bv) FROM {VIEW} ORDER BY id"
        ))
        .await
        .expect("read the view");
    out.push((VIEW.to_string(), rows));
    out
}

/// Rows of `table` on each node, read there.
async fn counts(c: &Cluster, table: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for node in 0..NODES {
        let (_pool, mut conn) = node_conn(c, node).await;
        let n: Option<i64> = conn
            .query_first(format!("SELECT COUNT(*) FROM {table}"))
            .await
            .unwrap_or(Some(-1));
        out.push(n.unwrap_or(-1));
    }
    out
}

fn dump(port: u16, extra: &[&str]) -> String {
    let out = Command::new("mariadb-dump")
        .args(["-h127.0.0.1", &format!("-P{port}"), "-uapp", "-papp"])
        .args(extra)
        .arg(DB)
        .stdin(Stdio::null())
        .output()
        .expect("run mariadb-dump");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "mariadb-dump {extra:?} failed: {stderr}"
    );
    // mariadb-dump goes on (exit 0) past a table whose status it cannot read.
    assert!(
        !stderr.contains("Error") && !stderr.contains("error"),
        "mariadb-dump {extra:?} complained: {stderr}"
    );
    String::from_utf8(out.stdout).expect("a dump is text")
}

fn restore(port: u16, file: &str) {
    mariadb_feed(port, DB, file.as_bytes(), "restoring the dump");
}

#[tokio::test]
async fn a_dump_through_the_proxy_holds_every_table_and_restores_them_where_they_were() {
    let c = cluster();
    emptied(c, &[DB, META]).await;
    let keys = spread_keys(3, 0);
    let proxy = start_proxy_with_rules(rules(c, keys[0]));
    let mut p = Conn::new(mysql_async::Opts::from_url(&proxy.url(DB)).expect("proxy URL"))
        .await
        .expect("connect to the proxy");
    for t in TABLES {
        p.query_drop(format!(
            "CREATE TABLE {t} (id INT PRIMARY KEY, user_id BIGINT NOT NULL, v VARCHAR(20), d DATE NOT NULL)"
        ))
        .await
        .expect("create a table");
        for (i, k) in keys.iter().enumerate() {
            // Every other row hot, the others cold.
            let d = if i % 2 == 0 {
                "2025-03-01"
            } else {
                "2022-03-01"
            };
            if t == "t_dq" {
                // Ids from the table's sequence.
                p.exec_drop(
                    "INSERT INTO t_dq (user_id, v, d) VALUES (?, ?, ?)",
                    (*k, format!("{t}-{i}"), d),
                )
                .await
                .expect("insert with a generated id");
                continue;
            }
            p.exec_drop(
                format!("INSERT INTO {t} VALUES (?, ?, ?, ?)"),
                (i as i64 + 1, *k, format!("{t}-{i}"), d),
            )
            .await
            .expect("insert");
        }
    }
    p.query_drop(format!(
        "CREATE VIEW {VIEW} AS SELECT h.id, h.v, b.v AS bv FROM t_dh h JOIN t_db b ON b.id = h.id"
    ))
    .await
    .expect("a view over a hashed and a broadcast table");
    // Every table once and the view, in name order, as one server lists them; not the
    // sequence's table the proxy keeps beside them.
    let names: Vec<String> = p.query("SHOW TABLES").await.expect("SHOW TABLES");
    let mut all: Vec<&str> = TABLES.to_vec();
    all.push(VIEW);
    assert_eq!(names, all);
    let full: Vec<(String, String)> = p
        .query("SHOW FULL TABLES LIKE 't\\_d%'")
        .await
        .expect("SHOW FULL TABLES");
    assert_eq!(
        full,
        TABLES.map(|t| (t.to_string(), "BASE TABLE".to_string()))
    );
    let status: Vec<mysql_async::Row> = p.query("SHOW TABLE STATUS").await.expect("status");
    let status_names: Vec<String> = status
        .iter()
        .map(|r| r.get::<String, _>("Name").expect("Name"))
        .collect();
    assert_eq!(status_names, all);
    // The view's columns as MariaDB infers them, asked of a node holding its tables.
    let fields: Vec<mysql_async::Row> = p
        .query(format!("DESCRIBE {VIEW}"))
        .await
        .expect("DESCRIBE a kept view");
    let fields: Vec<(String, String)> = fields
        .iter()
        .map(|r| {
            (
                r.get::<String, _>("Field").expect("Field"),
                r.get::<String, _>("Type").expect("Type"),
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            ("id", "int(11)"),
            ("v", "varchar(20)"),
            ("bv", "varchar(20)")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    // information_schema.TABLES listed as one database: each table once, a sharded table's
    // row estimate the sum of its nodes', a broadcast table's one copy's.
    let mut estimates = Vec::new();
    for t in ["t_dh", "t_db"] {
        let mut per_node = Vec::new();
        for node in 0..NODES {
            let (_pool, mut conn) = node_conn(c, node).await;
            conn.query_drop(format!("ANALYZE TABLE {t}"))
                .await
                .expect("analyze");
            let n: Option<u64> = conn
                .exec_first(
                    "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
                    (t,),
                )
                .await
                .expect("a node's estimate");
            per_node.push(n.unwrap_or(0));
        }
        estimates.push(per_node);
    }
    let listed: Vec<(String, Option<u64>)> = p
        .query(
            "SELECT TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME",
        )
        .await
        .expect("information_schema.TABLES through the proxy");
    let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, all);
    let kinds: Vec<(String, Option<String>)> = p
        .query(format!(
            "SELECT table_type, engine FROM information_schema.TABLES \
             WHERE table_schema = DATABASE() AND table_name = '{VIEW}'"
        ))
        .await
        .expect("the view's row in information_schema.TABLES");
    assert_eq!(kinds, [("VIEW".to_string(), None)]);
    let rows_of = |t: &str| listed.iter().find(|(n, _)| n == t).and_then(|r| r.1);
    assert_eq!(rows_of("t_dh"), Some(estimates[0].iter().sum::<u64>()));
    assert_eq!(rows_of("t_db"), Some(estimates[1][0]));
    // An index's cardinality summed over a sharded table's nodes, as its rows are.
    let mut cardinality = 0u64;
    for node in 0..NODES {
        let (_pool, mut conn) = node_conn(c, node).await;
        let n: Option<u64> = conn
            .query_first(
                "SELECT CARDINALITY FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() \
                 AND TABLE_NAME = 't_dh' AND INDEX_NAME = 'PRIMARY'",
            )
            .await
            .expect("a node's cardinality");
        cardinality += n.unwrap_or(0);
    }
    let shown: Vec<mysql_async::Row> = p
        .query("SHOW INDEX FROM t_dh")
        .await
        .expect("SHOW INDEX over nodes");
    let shown: Vec<(String, Option<u64>)> = shown
        .iter()
        .map(|r| {
            (
                r.get::<String, _>("Key_name").expect("Key_name"),
                r.get::<Option<u64>, _>("Cardinality").expect("Cardinality"),
            )
        })
        .collect();
    assert_eq!(shown, [("PRIMARY".to_string(), Some(cardinality))]);
    let listed: Vec<(String, Option<u64>)> = p
        .query(
            "SELECT TABLE_NAME, CARDINALITY FROM information_schema.STATISTICS \
             WHERE TABLE_SCHEMA = DATABASE() AND INDEX_NAME = 'PRIMARY' ORDER BY TABLE_NAME",
        )
        .await
        .expect("information_schema.STATISTICS");
    assert_eq!(
        listed.iter().find(|r| r.0 == "t_dh").map(|r| r.1),
        Some(Some(cardinality))
    );
    // information_schema.COLUMNS the same: each table's columns once, in the asked order.
    let columns: Vec<(String, String)> = p
        .query(
            "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME, ORDINAL_POSITION",
        )
        .await
        .expect("information_schema.COLUMNS through the proxy");
    let want: Vec<(String, String)> = TABLES
        .iter()
        .flat_map(|t| ["id", "user_id", "v", "d"].map(|c| (t.to_string(), c.to_string())))
        .collect();
    assert_eq!(columns, want);
    // An ORM reflects in a transaction: SHOW CREATE TABLE and SHOW INDEX of tables on two
    // nodes are reads, committed with no two-phase commit (no decision table appears).
    p.query_drop("SET autocommit = 0")
        .await
        .expect("autocommit off");
    for sql in [
        "SHOW CREATE TABLE t_dd",
        "SHOW CREATE TABLE t_ds",
        "DESCRIBE t_ds",
        "SHOW INDEX FROM t_ds",
        "SHOW KEYS IN `t_dh`",
    ] {
        let rows: Vec<mysql_async::Row> = p.query(sql).await.expect(sql);
        assert!(!rows.is_empty(), "{sql} answered nothing");
    }
    p.query_drop("COMMIT").await.expect("COMMIT");
    p.query_drop("SET autocommit = 1")
        .await
        .expect("autocommit on");
    for node in 0..NODES {
        let (_pool, mut conn) = node_conn(c, node).await;
        let xa: Vec<String> = conn
            .query("SHOW TABLES LIKE 'shardproxy_xa'")
            .await
            .expect("a node's tables");
        assert!(
            xa.is_empty(),
            "reflection made a decision table on ds{node}"
        );
    }
    // Table maintenance runs where each table is; a checksum over nodes is refused.
    let analyzed: Vec<(String, String, String, String)> = p
        .query("ANALYZE TABLE t_dh, t_ds, t_dt")
        .await
        .expect("ANALYZE TABLE over nodes");
    let tables: Vec<&str> = analyzed.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(
        tables,
        [
            format!("{DB}.t_dh"),
            format!("{DB}.t_ds"),
            format!("{DB}.t_dt")
        ]
    );
    expect_code(
        p.query_drop("CHECKSUM TABLE t_dh").await,
        1235,
        "a checksum over nodes",
    );
    let sum: Vec<(String, u64)> = p
        .query("CHECKSUM TABLE t_ds")
        .await
        .expect("the checksum of a table on one node");
    assert_eq!(sum.len(), 1);
    // A routine, created on the default node, is listed once.
    p.query_drop("CREATE PROCEDURE p_dump() SELECT 1")
        .await
        .expect("a procedure");
    let routines: Vec<String> = p
        .query("SELECT ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()")
        .await
        .expect("information_schema.ROUTINES");
    assert_eq!(routines, ["p_dump"]);
    // What cannot be merged is refused, not answered from one node.
    expect_code(
        p.query_drop(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()",
        )
        .await,
        1235,
        "an aggregate over the listing",
    );
    // LOCK TABLES of tables on different nodes: each where it is.
    p.query_drop(format!(
        "LOCK TABLES t_ds READ, t_dd READ, t_dh READ, t_db READ, t_dr READ, t_dt READ, t_dy READ, {VIEW} READ"
    ))
    .await
    .expect("LOCK TABLES over every placement and a view");
    let viewed: Vec<i64> = p
        .query(format!("SELECT id FROM {VIEW} ORDER BY id"))
        .await
        .expect("the view read under its tables' locks");
    assert_eq!(viewed.len(), keys.len());
    p.query_drop("UNLOCK TABLES").await.expect("UNLOCK TABLES");
    // Two sessions locking tables of two nodes in opposite orders: the second waits for the
    // first, and neither deadlocks (each node's locks are taken in node order).
    let mut other = Conn::new(mysql_async::Opts::from_url(&proxy.url(DB)).expect("proxy URL"))
        .await
        .expect("a second session");
    p.query_drop("LOCK TABLES t_ds WRITE, t_dd WRITE")
        .await
        .expect("the first session's locks");
    let waiter = tokio::spawn(async move {
        let started = std::time::Instant::now();
        other
            .query_drop("LOCK TABLES t_dd WRITE, t_ds WRITE")
            .await
            .expect("the second session's locks, once the first releases them");
        let waited = started.elapsed();
        other.query_drop("UNLOCK TABLES").await.expect("UNLOCK");
        waited
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "the second LOCK TABLES did not wait");
    p.query_drop("UNLOCK TABLES").await.expect("UNLOCK TABLES");
    let waited = tokio::time::timeout(std::time::Duration::from_secs(10), waiter)
        .await
        .expect("the second session finished")
        .expect("its task");
    assert!(
        waited >= std::time::Duration::from_millis(250),
        "waited {waited:?}"
    );

    // FLUSH TABLES WITH READ LOCK holds every node's global read lock until UNLOCK TABLES:
    // a write on ds2, made there directly, waits for it.
    p.query_drop("FLUSH TABLES WITH READ LOCK")
        .await
        .expect("the global read lock");
    let (_pool, mut ds2) = node_conn(c, 2).await;
    ds2.query_drop("SET SESSION lock_wait_timeout = 1")
        .await
        .expect("a short lock wait");
    expect_code(
        ds2.query_drop("UPDATE t_ds SET v = v WHERE id = 1").await,
        1205,
        "a write on ds2 under the proxy's global read lock",
    );
    p.query_drop("UNLOCK TABLES").await.expect("UNLOCK TABLES");
    ds2.query_drop("UPDATE t_ds SET v = v WHERE id = 1")
        .await
        .expect("the write once the lock is gone");
    drop(ds2);
    let before = contents(&mut p).await;
    let placed: Vec<Vec<i64>> = {
        let mut v = Vec::new();
        for t in TABLES {
            v.push(counts(c, t).await);
        }
        v
    };
    let n = keys.len() as i64;
    assert_eq!(placed[0], vec![n; NODES], "broadcast t_db");
    assert_eq!(placed[5], vec![-1, -1, n, -1], "t_ds on ds2 alone");
    assert_eq!(placed[4], vec![4, 4, 0, n - 8], "t_dr by its ranges");
    assert_eq!(placed[6], vec![n / 2, n / 2, 0, 0], "t_dt hot and cold");
    assert_eq!(placed[7][3], 1, "t_dy's directed key on ds3");

    let defaults = dump(proxy.port, &[]);
    let single = dump(proxy.port, &["--single-transaction"]);
    let schema = dump(proxy.port, &["--no-data"]);
    for (what, file) in [("default", &defaults), ("--single-transaction", &single)] {
        assert!(
            file.contains(&format!("VIEW `{VIEW}` AS")),
            "the {what} dump lacks the view"
        );
        assert!(
            !file.contains("shardproxy_sequences"),
            "the {what} dump holds the proxy's own table"
        );
    }
    for t in TABLES {
        for (what, file) in [("default", &defaults), ("--single-transaction", &single)] {
            assert!(
                file.contains(&format!("CREATE TABLE `{t}`"))
                    && file.contains(&format!("INSERT INTO `{t}` VALUES")),
                "the {what} dump lacks {t}"
            );
        }
        assert!(
            schema.contains(&format!("CREATE TABLE `{t}`")),
            "--no-data lacks {t}"
        );
    }

    // Restored through the proxy into emptied nodes (the view dropped too): the same rows,
    // where they were, and the view again.
    p.query_drop(format!("DROP VIEW {VIEW}"))
        .await
        .expect("drop the view");
    drop(p);
    emptied(c, &[DB]).await;
    restore(proxy.port, &defaults);
    let mut p = Conn::new(mysql_async::Opts::from_url(&proxy.url(DB)).expect("proxy URL"))
        .await
        .expect("connect to the proxy");
    assert_eq!(contents(&mut p).await, before, "rows after the round trip");
    for (i, t) in TABLES.iter().enumerate() {
        assert_eq!(
            counts(c, t).await,
            placed[i],
            "{t} per node after the round trip"
        );
    }
    // The sequence goes on above the restored ids.
    let restored_max: Option<i64> = p
        .query_first("SELECT MAX(id) FROM t_dq")
        .await
        .expect("the largest restored id");
    p.exec_drop(
        "INSERT INTO t_dq (user_id, v, d) VALUES (?, 'after', '2025-05-05')",
        (keys[1],),
    )
    .await
    .expect("an insert after the restore");
    let next: Option<i64> = p
        .query_first("SELECT LAST_INSERT_ID()")
        .await
        .expect("its id");
    assert!(
        next > restored_max,
        "the id {next:?} after the restore is not above {restored_max:?}"
    );
    // A view whose WITH clause names a table of its own, over a table on ds2 alone: its
    // columns are asked of ds2 (the WITH's name is no table to find a node for).
    p.query_drop("CREATE VIEW v_cte AS WITH s AS (SELECT id, v FROM t_ds) SELECT v FROM s")
        .await
        .expect("a view with a WITH clause");
    let fields: Vec<mysql_async::Row> = p
        .query("DESCRIBE v_cte")
        .await
        .expect("DESCRIBE a view with a WITH clause");
    let fields: Vec<String> = fields
        .iter()
        .map(|r| r.get::<String, _>("Type").expect("Type"))
        .collect();
    assert_eq!(fields, ["varchar(20)"]);
    p.query_drop("DROP VIEW v_cte").await.expect("drop it");
    drop(p);

    // `shardproxy check --nodes` finds every table where its rule puts it, until a node
    // loses one: then it names the table and the node, and fails.
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("rules.toml");
    std::fs::write(&file, rules(c, keys[0])).expect("write the rules");
    let check = || {
        Command::new(env!("CARGO_BIN_EXE_shardproxy"))
            .args(["check", "--nodes", "--config"])
            .arg(&file)
            .output()
            .expect("run shardproxy check")
    };
    let out = check();
    assert!(
        out.status.success(),
        "check --nodes: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_pool, mut ds1) = node_conn(c, 1).await;
    ds1.query_drop("DROP TABLE t_dh")
        .await
        .expect("lose a table on ds1");
    drop(ds1);
    let out = check();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "check --nodes passed: {said}");
    assert!(
        said.contains("table `t_dh` is missing on ds1"),
        "check --nodes said: {said}"
    );
    dropped(c, &[DB, META]).await;
}
