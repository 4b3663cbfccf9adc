//! Global secondary indexes on real MariaDB nodes: built online by `CREATE GLOBAL INDEX`
//! while writes run, kept exact by every write (autocommit and transactions), a unique one
//! refusing a duplicate across nodes with MariaDB's own 1062, and reads by the column going
//! to the rows' node, answered as one MariaDB holding every row answers. Its own binary (its
//! own cluster); the tests run one at a time.

mod common;

use std::time::Duration;

use common::indexes::{both, duplicate, exact_placed, exact_with, same_rows, writer};
use common::moves::{named_rows, ops};
use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

const L3: [(u16, u16); 3] = [(0, 340), (341, 681), (682, 1023)];

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The reference: one MariaDB (node 0) holding every row in a database of its own.
const REFERENCE: &str = "gsi_reference";

fn rules(c: &Cluster, table: &str) -> String {
    let tables = hash_slot_table(table, "user_id", &L3) + &hash_slot_table("t_cz", "user_id", &L3);
    common::indexes::rules_with_admin(c, &tables)
}

/// A proxy serving its rules from a file the admin interface edits.
fn proxy(dir: &tempfile::TempDir, c: &Cluster, table: &str) -> Proxy {
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, rules(c, table)).expect("write the rules");
    start_proxy_watching(&path)
}

async fn reference(c: &Cluster) -> Conn {
    common::indexes::reference(c, REFERENCE).await
}

/// Every row with an email has exactly one entry, on the node its hash names, pointing at
/// the row's key; no other entry exists.
async fn exact(c: &Cluster, table: &str, index_table: &str) {
    exact_in(c, table, index_table, true).await
}

/// [`exact`]; for a binary collation (`binary`) the hash is the value's text too.
async fn exact_in(c: &Cluster, table: &str, index_table: &str, binary: bool) {
    let place = |h: &[u8]| node_of(&L3, &mysql_async::Value::Bytes(h.to_vec()));
    let row = |k: i64| node_of_key(&L3, k);
    exact_with(c, 3, table, index_table, binary, &place, &row).await
}

async fn fresh(p: &mut Conn, r: &mut Conn, table: &str) {
    fresh_in(p, r, table, "utf8mb4_bin").await
}

/// `table` through the proxy and on the reference, its email compared in `collation`.
async fn fresh_in(p: &mut Conn, r: &mut Conn, table: &str, collation: &str) {
    for conn in [&mut *p, &mut *r] {
        conn.query_drop(format!("DROP TABLE IF EXISTS {table}"))
            .await
            .expect("drop");
        conn.query_drop(format!(
            "CREATE TABLE {table} (user_id INT PRIMARY KEY, \
             email VARCHAR(64) CHARACTER SET utf8mb4 COLLATE {collation}, \
             name VARCHAR(32), UNIQUE KEY email (email))"
        ))
        .await
        .expect("create");
    }
}

fn selects(table: &str, keys: &[i64]) -> Vec<String> {
    let mut out = vec![
        format!("SELECT * FROM {table} WHERE email = 'u{}@x' ", keys[0]),
        format!(
            "SELECT user_id, name FROM {table} WHERE email IN ('u{}@x', 'u{}@x', 'nobody@x') ORDER BY user_id",
            keys[1], keys[2]
        ),
        format!("SELECT COUNT(*) FROM {table} WHERE email = 'nobody@x'"),
        format!("SELECT * FROM {table} WHERE email = 'u{}@x   '", keys[3]),
        format!("SELECT * FROM {table} WHERE email = 'U{}@X'", keys[4]),
        format!("SELECT * FROM {table} WHERE email = NULL"),
        format!("SELECT * FROM {table} WHERE email IS NULL ORDER BY user_id"),
    ];
    out.push(format!(
        "SELECT * FROM {table} WHERE email = 'u{}@x' AND name = 'n{}'",
        keys[5], keys[5]
    ));
    out.push(format!(
        "SELECT a.user_id, b.name FROM {table} a JOIN {table} b ON b.user_id = a.user_id \
         WHERE a.email IN ('u{}@x', 'u{}@x') ORDER BY a.user_id",
        keys[6], keys[7]
    ));
    out
}

#[tokio::test]
async fn a_unique_index_is_built_online_then_keeps_every_write_and_routes_reads() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let table = "t_user";
    let p = proxy(&dir, c, table);
    let mut app = p.conn().await;
    let mut r = reference(c).await;
    fresh(&mut app, &mut r, table).await;
    for k in 1..=300i64 {
        let email = if k % 10 == 0 {
            "NULL".to_string()
        } else {
            format!("'u{k}@x'")
        };
        both(
            &mut app,
            &mut r,
            &format!("INSERT INTO {table} VALUES ({k}, {email}, 'n{k}')"),
        )
        .await
        .expect("insert");
    }
    // Before the index: the same email on another node is taken (per-node UNIQUE only).
    let mut ops = ops(p.admin_port.expect("admin")).await;
    let built: Vec<Row> = ops
        .query(format!("CREATE UNIQUE GLOBAL INDEX email ON {table}"))
        .await
        .expect("CREATE GLOBAL INDEX");
    drop(built);
    // A plain one too, on a column in the table's default collation.
    ops.query_drop(format!("CREATE GLOBAL INDEX name ON {table}"))
        .await
        .expect("CREATE GLOBAL INDEX (not unique)");
    let shown = named_rows(&mut ops, "SHOW GLOBAL INDEXES").await;
    assert_eq!(shown.len(), 2, "{shown:?}");
    let email = shown.iter().find(|r| r["index"] == "email").expect("email");
    assert_eq!(email["state"], "public", "{shown:?}");
    assert_eq!(email["build"], "built: 300 row(s) indexed", "{shown:?}");
    exact(c, table, "t_user_email_gsi").await;

    // Reads by email: one MariaDB's answers, routed to the row's node.
    let keys: Vec<i64> = (1..=9).collect();
    let before = p
        .shared
        .metrics
        .statements
        .with_label_values(&["select", "single"])
        .get();
    for sql in selects(table, &keys) {
        same_rows(&mut app, &mut r, &sql).await;
    }
    let single = p
        .shared
        .metrics
        .statements
        .with_label_values(&["select", "single"])
        .get()
        - before;
    assert!(single >= 5, "reads by email routed to one node: {single}");
    // Prepared, too.
    for k in [11i64, 12, 13] {
        let a: Option<(i64, String)> = app
            .exec_first(
                format!("SELECT user_id, name FROM {table} WHERE email = ?"),
                (format!("u{k}@x"),),
            )
            .await
            .expect("prepared read");
        assert_eq!(a, Some((k, format!("n{k}"))));
    }

    // Prepared writes, their values bound.
    for conn in [&mut app, &mut r] {
        conn.exec_drop(
            format!("INSERT INTO {table} (user_id, email, name) VALUES (?, ?, ?)"),
            (7001, "prep@x", "p"),
        )
        .await
        .expect("a prepared INSERT");
        conn.exec_drop(
            format!("UPDATE {table} SET email = ? WHERE user_id = ?"),
            ("prep2@x", 7001),
        )
        .await
        .expect("a prepared UPDATE");
        let e = conn
            .exec_drop(
                format!("INSERT INTO {table} (user_id, email, name) VALUES (?, ?, ?)"),
                (7003, "prep2@x", "q"),
            )
            .await
            .expect_err("a prepared duplicate");
        assert!(e.to_string().contains("1062"), "{e}");
        conn.exec_drop(
            format!("INSERT INTO {table} (user_id, email, name) VALUES (?, ?, ?)"),
            (7002, "gone2@x", "g"),
        )
        .await
        .expect("a prepared INSERT");
        conn.exec_drop(format!("DELETE FROM {table} WHERE user_id = ?"), (7002,))
            .await
            .expect("a prepared DELETE");
    }
    same_rows(
        &mut app,
        &mut r,
        &format!("SELECT * FROM {table} WHERE email IN ('prep@x', 'prep2@x', 'gone2@x')"),
    )
    .await;
    // A duplicate across nodes: 1062, as one MariaDB answers.
    let k2 = (301..)
        .find(|k| node_of_key(&L3, *k) != node_of_key(&L3, 1))
        .expect("a key");
    duplicate(
        &mut app,
        &mut r,
        &format!("INSERT INTO {table} VALUES ({k2}, 'u1@x', 'dup')"),
        "a duplicate email",
    )
    .await;
    duplicate(
        &mut app,
        &mut r,
        &format!(
            "INSERT INTO {table} (user_id, email) VALUES ({}, 'fresh@x'), ({k2}, 'fresh@x')",
            k2 + 1
        ),
        "a duplicate inside one INSERT",
    )
    .await;
    // Changes of the email, the key's row moving nowhere; to one held elsewhere: 1062.
    both(
        &mut app,
        &mut r,
        &format!("UPDATE {table} SET email = 'changed1@x' WHERE user_id = 1"),
    )
    .await
    .expect("change");
    both(
        &mut app,
        &mut r,
        &format!("UPDATE {table} SET email = CONCAT('c', email) WHERE user_id IN (2, 3, 10)"),
    )
    .await
    .expect("change by expression");
    duplicate(
        &mut app,
        &mut r,
        &format!("UPDATE {table} SET email = 'u4@x' WHERE user_id = 5"),
        "a change to a taken email",
    )
    .await;
    both(
        &mut app,
        &mut r,
        &format!("UPDATE {table} SET email = NULL WHERE user_id = 6"),
    )
    .await
    .expect("to NULL");
    both(
        &mut app,
        &mut r,
        &format!("DELETE FROM {table} WHERE user_id IN (7, 8) OR email = 'u9@x'"),
    )
    .await
    .expect("delete");
    both(
        &mut app,
        &mut r,
        &format!("INSERT INTO {table} VALUES ({k2}, 'u1@x', 'reuses a freed email')"),
    )
    .await
    .expect("the old email is free again");
    both(
        &mut app,
        &mut r,
        &format!("INSERT INTO {table} SET user_id = 2000, email = 'set@x', name = 's'"),
    )
    .await
    .expect("INSERT ... SET");
    duplicate(
        &mut app,
        &mut r,
        &format!(
            "INSERT INTO {table} SET name = 't', email = 'set@x', user_id = {}",
            k2 + 7
        ),
        "a duplicate by INSERT ... SET",
    )
    .await;
    both(
        &mut app,
        &mut r,
        &format!(
            "INSERT INTO {table} (user_id, email, name) SELECT user_id + 5000, CONCAT('copy-', email), name \
             FROM {table} WHERE user_id BETWEEN 20 AND 40"
        ),
    )
    .await
    .expect("INSERT ... SELECT");
    duplicate(
        &mut app,
        &mut r,
        &format!(
            "INSERT INTO {table} (user_id, email, name) SELECT user_id + 6000, email, name \
             FROM {table} WHERE user_id = 25"
        ),
        "INSERT ... SELECT of a taken email",
    )
    .await;
    // Inside a transaction: a duplicate fails the statement only; a rollback leaves no entry.
    both(&mut app, &mut r, "START TRANSACTION")
        .await
        .expect("begin");
    both(
        &mut app,
        &mut r,
        &format!("INSERT INTO {table} VALUES (1001, 'tx1@x', 'a'), (1002, 'tx2@x', 'b')"),
    )
    .await
    .expect("insert in a transaction");
    duplicate(
        &mut app,
        &mut r,
        &format!("INSERT INTO {table} VALUES (1003, 'tx1@x', 'c')"),
        "a duplicate in the transaction",
    )
    .await;
    both(
        &mut app,
        &mut r,
        &format!("UPDATE {table} SET email = 'tx3@x' WHERE user_id = 1002"),
    )
    .await
    .expect("update in a transaction");
    same_rows(
        &mut app,
        &mut r,
        &format!("SELECT * FROM {table} WHERE email = 'tx3@x'"),
    )
    .await;
    both(&mut app, &mut r, "COMMIT").await.expect("commit");
    both(&mut app, &mut r, "START TRANSACTION")
        .await
        .expect("begin");
    both(
        &mut app,
        &mut r,
        &format!("INSERT INTO {table} VALUES (1004, 'gone@x', 'd')"),
    )
    .await
    .expect("insert");
    both(
        &mut app,
        &mut r,
        &format!("DELETE FROM {table} WHERE user_id = 1001"),
    )
    .await
    .expect("delete");
    both(&mut app, &mut r, "ROLLBACK").await.expect("rollback");
    for sql in selects(table, &keys).into_iter().chain([
        format!("SELECT * FROM {table} WHERE email IN ('changed1@x', 'cu2@x', 'tx1@x', 'tx2@x', 'tx3@x', 'gone@x', 'set@x', 'copy-u21@x') ORDER BY user_id"),
        format!("SELECT * FROM {table} ORDER BY user_id"),
    ]) {
        same_rows(&mut app, &mut r, &sql).await;
    }
    exact(c, table, "t_user_email_gsi").await;
    for sql in [
        format!("SELECT user_id, email FROM {table} WHERE name = 'n11'"),
        format!("SELECT user_id FROM {table} WHERE name IN ('n12', 'N13', 'dup', 'nobody') ORDER BY user_id"),
        format!("SELECT COUNT(*) FROM {table} WHERE name = 'reuses a freed email'"),
    ] {
        same_rows(&mut app, &mut r, &sql).await;
    }
    let entries: Vec<i64> = app
        .query("SELECT COUNT(*) FROM t_user_name_gsi")
        .await
        .expect("the plain index's entries");
    let named: Vec<i64> = r
        .query(format!(
            "SELECT COUNT(*) FROM {table} WHERE name IS NOT NULL"
        ))
        .await
        .expect("rows with a name");
    assert_eq!(entries, named, "an entry for every row with a name");

    // What it cannot keep yet is refused, never half done.
    for sql in [
        format!("TRUNCATE TABLE {table}"),
        format!("ALTER TABLE {table} MODIFY email VARCHAR(80)"),
        format!("UPDATE {table} SET email = UUID() WHERE user_id = 1"),
        format!("UPDATE {table} SET email = 'x' WHERE user_id = 1 LIMIT 1"),
    ] {
        let (code, m) = server_error(app.query_drop(&sql).await);
        assert_eq!(code, 1235, "{sql}: {m}");
    }
    exact(c, table, "t_user_email_gsi").await;

    for ix in ["email", "name"] {
        ops.query_drop(format!("DROP GLOBAL INDEX {ix} ON {table}"))
            .await
            .expect("DROP GLOBAL INDEX");
    }
    let shown: Vec<Row> = ops.query("SHOW GLOBAL INDEXES").await.expect("SHOW");
    assert!(shown.is_empty());
    for sql in selects(table, &keys) {
        same_rows(&mut app, &mut r, &sql).await;
    }
    drop(app);
    tokio::time::sleep(Duration::from_millis(10)).await;
}

#[tokio::test]
async fn an_index_built_under_writes_is_exact_and_a_race_for_one_value_has_one_winner() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let table = "t_load";
    let p = proxy(&dir, c, table);
    let mut app = p.conn().await;
    let mut r = reference(c).await;
    fresh(&mut app, &mut r, table).await;
    let mut values = Vec::new();
    for k in 1..=3000i64 {
        values.push(format!("({k}, 'u{k}@x', 'n{k}')"));
    }
    app.query_drop(format!("INSERT INTO {table} VALUES {}", values.join(", ")))
        .await
        .expect("load");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (1..=3)
        .map(|i| tokio::spawn(writer(p.pool(), table.to_string(), i, stop.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut ops = ops(p.admin_port.expect("admin")).await;
    let built: Result<Vec<Row>, _> = ops
        .query(format!(
            "CREATE UNIQUE GLOBAL INDEX email ON {table} RATE 3000"
        ))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut errors = Vec::new();
    for w in writers {
        errors.extend(w.await.expect("writer"));
    }
    built.expect("CREATE GLOBAL INDEX under writes");
    assert!(errors.is_empty(), "{errors:?}");
    exact(c, table, "t_load_email_gsi").await;

    // A second proxy with the same rules: one value claimed from both at once, 20 times.
    let second = start_proxy_with_rules(
        std::fs::read_to_string(dir.path().join("rules.toml")).expect("rules"),
    );
    let mut a = p.conn().await;
    let mut b = second.conn().await;
    for round in 0..20i64 {
        let (ka, kb) = (500_000 + 2 * round, 500_001 + 2 * round);
        let email = format!("race{round}@x");
        let (ra, rb) = tokio::join!(
            a.query_drop(format!("INSERT INTO {table} VALUES ({ka}, '{email}', 'a')")),
            b.query_drop(format!("INSERT INTO {table} VALUES ({kb}, '{email}', 'b')")),
        );
        let dup = |r: &Result<(), mysql_async::Error>| matches!(r, Err(mysql_async::Error::Server(e)) if e.code == 1062);
        assert!(
            (ra.is_ok() && dup(&rb)) || (rb.is_ok() && dup(&ra)),
            "round {round}: {ra:?} / {rb:?}"
        );
    }
    exact(c, table, "t_load_email_gsi").await;
}

#[tokio::test]
async fn a_case_insensitive_column_is_indexed_by_its_collations_weights() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let table = "t_ci";
    let p = proxy(&dir, c, table);
    let mut app = p.conn().await;
    let mut r = reference(c).await;
    fresh_in(&mut app, &mut r, table, "utf8mb4_general_ci").await;
    let emails = [
        "Bob@X.org",
        "alice@x.org",
        "Zoë@x.org",
        "carl@x.org  ",
        "dave@x.org",
        "Émile@x.org",
        "\u{1F600}@x.org",
        "erin@x.org",
    ];
    for (i, e) in emails.iter().enumerate() {
        let k = i as i64 + 1;
        both(
            &mut app,
            &mut r,
            &format!("INSERT INTO {table} VALUES ({k}, '{e}', 'n{k}')"),
        )
        .await
        .expect("insert");
    }
    let mut ops = ops(p.admin_port.expect("admin")).await;
    let _: Vec<Row> = ops
        .query(format!("CREATE UNIQUE GLOBAL INDEX email ON {table}"))
        .await
        .expect("CREATE GLOBAL INDEX on a utf8mb4_general_ci column");
    let shown = named_rows(&mut ops, "SHOW GLOBAL INDEXES").await;
    assert_eq!(shown[0]["kind"], "string, utf8mb4_general_ci", "{shown:?}");
    exact_in(c, table, "t_ci_email_gsi", false).await;
    let before = p
        .shared
        .metrics
        .statements
        .with_label_values(&["select", "single"])
        .get();
    for probe in [
        "bob@x.org",
        "BOB@X.ORG",
        "bob@x.org   ",
        "ALICE@x.org",
        "zoe@X.ORG",
        "ZOË@x.org",
        "CARL@x.org",
        "emile@x.org",
        "\u{1F601}@x.org",
        "nobody@x.org",
        " bob@x.org",
    ] {
        same_rows(
            &mut app,
            &mut r,
            &format!("SELECT * FROM {table} WHERE email = '{probe}'"),
        )
        .await;
    }
    let single = p
        .shared
        .metrics
        .statements
        .with_label_values(&["select", "single"])
        .get()
        - before;
    assert_eq!(single, 11, "every read by email on one node");
    // Equal in the collation: a duplicate across nodes, as one MariaDB says.
    let k = (100..)
        .find(|k| node_of_key(&L3, *k) != node_of_key(&L3, 1))
        .expect("a key");
    for dup in ["BOB@x.org", "bob@x.org ", "ZOE@X.ORG", "\u{1F62C}@x.org"] {
        duplicate(
            &mut app,
            &mut r,
            &format!("INSERT INTO {table} VALUES ({k}, '{dup}', 'd')"),
            "a duplicate in the collation",
        )
        .await;
    }
    both(
        &mut app,
        &mut r,
        &format!("UPDATE {table} SET email = 'BOB@x.org' WHERE user_id = 1"),
    )
    .await
    .expect("a change of case only");
    both(
        &mut app,
        &mut r,
        &format!("INSERT INTO {table} VALUES ({k}, 'Bobby@x.org', 'b')"),
    )
    .await
    .expect("another value");
    same_rows(
        &mut app,
        &mut r,
        &format!("SELECT * FROM {table} ORDER BY user_id"),
    )
    .await;
    exact_in(c, table, "t_ci_email_gsi", false).await;
    // A collation whose strings weigh otherwise than their characters: refused.
    fresh_in(&mut app, &mut r, "t_cz", "utf8mb4_czech_ci").await;
    let e = ops
        .query_drop("CREATE GLOBAL INDEX email ON t_cz")
        .await
        .expect_err("no index by a collation with contractions");
    assert!(e.to_string().contains("contraction"), "{e}");
}

/// `table` over the three nodes by `user_id`, in rules kept in the metadata schema `meta`
/// (made afresh on ds0), for proxies that share them.
async fn metadata_rules(c: &Cluster, meta: &str, table: &str) -> String {
    common::moves::fresh_schema_on(c, 0, meta).await;
    common::moves::rules_on(
        c,
        0,
        meta,
        &[("ds0", 0), ("ds1", 1), ("ds2", 2)],
        &hash_slot_table(table, "user_id", &L3),
    )
}

/// Waits (10 s at most) until the proxy whose admin listens on `admin_port` uses the index.
async fn until_public(admin_port: u16) {
    let mut ops = ops(admin_port).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let shown = named_rows(&mut ops, "SHOW GLOBAL INDEXES").await;
        if shown.first().is_some_and(|r| r["state"] == "public") {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{shown:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_index_declared_through_the_metadata_is_kept_by_every_proxy_while_it_is_built() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let table = "t_meta";
    let rules = metadata_rules(c, "gsi_meta", table)
        .await
        // The other proxy sees the index a second late at most: its writes in that second
        // must not be missed by the build.
        .replace("poll_ms = 100", "poll_ms = 1000");
    let a = common::moves::watching(&dir, "a", rules.clone());
    let b = common::moves::watching(&dir, "b", rules);
    let mut app = a.conn().await;
    let mut r = reference(c).await;
    fresh(&mut app, &mut r, table).await;
    let values: Vec<String> = (1..=2000i64)
        .map(|k| format!("({k}, 'u{k}@x', 'n{k}')"))
        .collect();
    app.query_drop(format!("INSERT INTO {table} VALUES {}", values.join(", ")))
        .await
        .expect("load");
    // Both proxies heartbeat before the build looks for them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = [(1, a.pool()), (2, b.pool()), (3, b.pool())]
        .into_iter()
        .map(|(i, pool)| tokio::spawn(writer(pool, table.to_string(), i, stop.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut ops = ops(a.admin_port.expect("admin")).await;
    let built = ops
        .query_drop(format!(
            "CREATE UNIQUE GLOBAL INDEX email ON {table} RATE 4000"
        ))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut errors = Vec::new();
    for w in writers {
        errors.extend(w.await.expect("writer"));
    }
    built.expect("CREATE GLOBAL INDEX through the metadata, under writes from two proxies");
    assert!(errors.is_empty(), "{errors:?}");
    exact(c, table, "t_meta_email_gsi").await;
    // The other proxy has it in use too: a duplicate through it is refused.
    until_public(b.admin_port.expect("admin")).await;
    let k = (3000..)
        .find(|k| node_of_key(&L3, *k) != node_of_key(&L3, 1999))
        .expect("a key");
    let mut via_b = b.conn().await;
    let e = via_b
        .query_drop(format!(
            "INSERT INTO {table} VALUES ({k}, 'u1999@x', 'dup')"
        ))
        .await
        .expect_err("a duplicate through the other proxy");
    assert!(e.to_string().contains("1062"), "{e}");
    let found: Option<(i64, String)> = via_b
        .exec_first(
            format!("SELECT user_id, name FROM {table} WHERE email = ?"),
            ("u1998@x",),
        )
        .await
        .expect("a read by email through the other proxy");
    assert_eq!(found, Some((1998, "n1998".to_string())));

    // The index table's slots moved live while both proxies write: still exact.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = [(4, a.pool()), (5, b.pool())]
        .into_iter()
        .map(|(i, pool)| tokio::spawn(writer(pool, table.to_string(), i, stop.clone())))
        .collect();
    ops.query_drop(format!(
        "MIGRATE SLOTS 0-340 OF {table}_email_gsi TO ds1 RATE 4000 AUTO"
    ))
    .await
    .expect("MIGRATE SLOTS of the index table");
    common::moves::until_step(&mut ops, "1", "done", Duration::from_secs(120)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut errors = Vec::new();
    for w in writers {
        errors.extend(w.await.expect("writer"));
    }
    assert!(errors.is_empty(), "{errors:?}");
    exact_placed(c, table, "t_meta_email_gsi", &a.shared.topology()).await;
    let found: Option<(i64, String)> = via_b
        .exec_first(
            format!("SELECT user_id, name FROM {table} WHERE email = ?"),
            ("u1997@x",),
        )
        .await
        .expect("a read by email after the move");
    assert_eq!(found, Some((1997, "n1997".to_string())));
    ops.query_drop(format!("DROP GLOBAL INDEX email ON {table}"))
        .await
        .expect("DROP GLOBAL INDEX through the metadata");
}

/// A cycle of lock waits through two proxies: an autocommit write with the index through
/// one proxy waits on the index table's node for another proxy's transaction, which waits
/// on the row's node for it. No proxy sees both transactions whole; before, both waited
/// until `node_timeout_secs` and one failed with 1105. The proxy whose transaction is its
/// own (autocommit, run again whole after a deadlock) breaks the possible cycle on its side.
#[tokio::test]
async fn a_lock_wait_cycle_through_two_proxies_is_broken_on_the_retryable_side() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let table = "t_cycle";
    let rules = metadata_rules(c, "gsi_cycle_meta", table).await;
    let a = common::moves::watching(&dir, "a", rules.clone());
    let b = common::moves::watching(&dir, "b", rules);
    let mut app = a.conn().await;
    let mut r = reference(c).await;
    fresh(&mut app, &mut r, table).await;
    // k1's row and the entry of the email both claim are on different nodes.
    let (k1, k2) = (1i64, 2i64);
    let email = (0..)
        .map(|i| format!("e{i}@x"))
        .find(|e| {
            node_of(&L3, &mysql_async::Value::Bytes(e.clone().into_bytes())) != node_of_key(&L3, k1)
        })
        .expect("an email");
    app.query_drop(format!(
        "INSERT INTO {table} VALUES ({k1}, 'a1@x', 'a'), ({k2}, 'a2@x', 'b')"
    ))
    .await
    .expect("load");
    let mut ops_a = ops(a.admin_port.expect("admin")).await;
    ops_a
        .query_drop(format!("CREATE UNIQUE GLOBAL INDEX email ON {table}"))
        .await
        .expect("CREATE GLOBAL INDEX");
    until_public(b.admin_port.expect("admin")).await;
    // B claims the email in its transaction (its entry on the entry's node, not committed).
    let mut via_b = b.conn().await;
    via_b.query_drop("BEGIN").await.expect("begin");
    via_b
        .query_drop(format!(
            "UPDATE {table} SET email = '{email}' WHERE user_id = {k2}"
        ))
        .await
        .expect("B's claim");
    // A, autocommit, locks k1's row and waits for B's entry.
    let p = a.pool();
    let sql = format!("UPDATE {table} SET email = '{email}' WHERE user_id = {k1}");
    let first = tokio::spawn(async move {
        let mut conn = p.get_conn().await.expect("a");
        conn.query_drop(sql).await
    });
    let entry_node = node_of(&L3, &mysql_async::Value::Bytes(email.clone().into_bytes()));
    lock_wait_on(c, entry_node, "A never waited for B's entry").await;
    // B now waits for A's row: a cycle over two nodes and two proxies.
    via_b
        .query_drop(format!(
            "UPDATE {table} SET name = 'b' WHERE user_id = {k1}"
        ))
        .await
        .expect("B's update of k1's row: A gave way");
    via_b.query_drop("COMMIT").await.expect("B's commit");
    // A, run again after B's commit, meets the email taken, as after B on one MariaDB.
    let (code, msg) = server_error(first.await.expect("A"));
    assert_eq!(code, 1062, "{msg}");
    let rows: Vec<(i64, String, String)> = via_b
        .query(format!(
            "SELECT user_id, email, name FROM {table} ORDER BY user_id"
        ))
        .await
        .expect("rows");
    assert_eq!(
        rows,
        vec![
            (k1, "a1@x".to_string(), "b".to_string()),
            (k2, email, "b".to_string())
        ]
    );
    exact(c, table, "t_cycle_email_gsi").await;
}
