//! Writes to a table with global indexes beyond INSERT, UPDATE of a column and DELETE, on
//! real MariaDB nodes, each against one MariaDB holding every row: UPDATE of the shard key,
//! REPLACE, INSERT IGNORE and INSERT ... ON DUPLICATE KEY UPDATE (autocommit, in a
//! transaction, prepared), and a plain index over rows that share a shard key. Afterwards
//! every read by the column answers as one MariaDB does and the index holds exactly the
//! entries of the rows. Its own binary (its own cluster); the tests run one at a time.

mod common;

use std::collections::BTreeSet;

use common::indexes::{both, exact_placed, exact_with, reference, same_rows, writer};
use common::moves::{deadlocks_on, global_status, ops};
use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

const L3: [(u16, u16); 3] = [(0, 340), (341, 681), (682, 1023)];

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const REFERENCE: &str = "gsi_writes_reference";

fn proxy(dir: &tempfile::TempDir, c: &Cluster) -> Proxy {
    // t_g's keys are the proxy's own (snowflake ids).
    let generated = hash_slot_table("t_g", "user_id", &L3).replacen(
        "\n\n",
        "\nkey_generator = { column = \"user_id\", kind = \"snowflake\" }\n\n",
        1,
    );
    let tables = hash_slot_table("t_w", "user_id", &L3)
        + &hash_slot_table("o_w", "user_id", &L3)
        + &hash_slot_table("t_gap", "user_id", &L3)
        + &generated;
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, common::indexes::rules_with_admin(c, &tables)).expect("write the rules");
    start_proxy_watching(&path)
}

async fn exact(c: &Cluster, table: &str) {
    let place = |h: &[u8]| node_of(&L3, &mysql_async::Value::Bytes(h.to_vec()));
    let row = |k: i64| node_of_key(&L3, k);
    exact_with(
        c,
        3,
        table,
        &format!("{table}_email_gsi"),
        true,
        &place,
        &row,
    )
    .await
}

/// A key of this many on a node other than `other`'s.
fn key_apart(from: i64, other: i64) -> i64 {
    (from..)
        .find(|k| node_of_key(&L3, *k) != node_of_key(&L3, other))
        .expect("a key")
}

/// Key `a` and key `b` on one node, `b` from `from`.
fn key_beside(from: i64, a: i64) -> i64 {
    (from..)
        .find(|k| node_of_key(&L3, *k) == node_of_key(&L3, a))
        .expect("a key")
}

/// `t` made anew through `conn`: `user_id` its key, `email` unique.
async fn create(conn: &mut Conn, t: &str) {
    conn.query_drop(format!("DROP TABLE IF EXISTS {t}"))
        .await
        .expect("drop");
    conn.query_drop(format!(
        "CREATE TABLE {t} (user_id INT PRIMARY KEY, \
         email VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, \
         name VARCHAR(32), UNIQUE KEY email (email))"
    ))
    .await
    .expect("create");
}

async fn all_rows(app: &mut Conn, r: &mut Conn, table: &str) {
    same_rows(app, r, &format!("SELECT * FROM {table} ORDER BY user_id")).await;
}

/// Reads by email of every value `table` holds, and some it does not, as one MariaDB answers.
async fn reads_by_email(app: &mut Conn, r: &mut Conn, table: &str) {
    let emails: Vec<Option<String>> = r
        .query(format!("SELECT email FROM {table}"))
        .await
        .expect("emails");
    let mut probes: Vec<String> = emails.into_iter().flatten().collect();
    probes.extend((1..=20).map(|k| format!("u{k}@x")));
    for e in probes {
        same_rows(
            app,
            r,
            &format!("SELECT * FROM {table} WHERE email = '{e}' ORDER BY user_id"),
        )
        .await;
    }
}

#[tokio::test]
async fn shard_key_changes_and_upserts_keep_a_unique_index_exact() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let p = proxy(&dir, c);
    let mut app = p.conn().await;
    let mut r = reference(c, REFERENCE).await;
    let t = "t_w";
    for conn in [&mut app, &mut r] {
        create(conn, t).await;
    }
    for k in 1..=20i64 {
        both(
            &mut app,
            &mut r,
            &format!("INSERT INTO {t} VALUES ({k}, 'u{k}@x', 'n{k}')"),
        )
        .await
        .expect("insert");
    }
    let mut ops = ops(p.admin_port.expect("admin")).await;
    ops.query_drop(format!("CREATE UNIQUE GLOBAL INDEX email ON {t}"))
        .await
        .expect("CREATE GLOBAL INDEX");

    // UPDATE of the shard key: the rows move, their entries point at the new key.
    let moved_to = key_apart(100, 1);
    for sql in [
        format!("UPDATE {t} SET user_id = user_id + 100 WHERE user_id IN (1, 2, 3)"),
        format!("UPDATE {t} SET user_id = {moved_to} + 1000, email = 'moved@x' WHERE user_id = 4"),
        format!("UPDATE {t} SET user_id = 5, name = 'same' WHERE user_id = 5"),
    ] {
        both(&mut app, &mut r, &sql).await.expect(&sql);
    }
    // ... and one whose new email another row holds: 1062, nothing moved.
    let e = both(
        &mut app,
        &mut r,
        &format!("UPDATE {t} SET user_id = 500, email = 'u6@x' WHERE user_id = 5"),
    )
    .await
    .expect_err("a moved row onto a taken email");
    assert_eq!(e.0, 1062, "{e:?}");
    exact(c, t).await;

    // REPLACE: of a row's own key; of a key whose email another node's row holds (that
    // row is deleted, as one MariaDB deletes it); of both at once.
    let apart6 = key_apart(300, 6);
    let beside8 = key_beside(400, 8);
    for sql in [
        format!("REPLACE INTO {t} VALUES (5, 'five@x', 'r')"),
        format!("REPLACE INTO {t} VALUES ({apart6}, 'u6@x', 'r')"),
        format!("REPLACE INTO {t} VALUES (7, 'u8@x', 'r')"),
        format!("REPLACE INTO {t} VALUES ({beside8}, 'u9@x', 'r'), (9, 'nine@x', 'r')"),
        format!("REPLACE INTO {t} SET user_id = 10, email = NULL, name = 'null'"),
    ] {
        both(&mut app, &mut r, &sql).await.expect(&sql);
        exact(c, t).await;
    }

    // INSERT IGNORE: a key that exists is left; a row whose email another node's row
    // holds is not inserted (MariaDB's 1062 warning); the rest are.
    let apart11 = key_apart(600, 11);
    for sql in [
        format!("INSERT IGNORE INTO {t} VALUES (12, 'x12@x', 'i')"),
        format!("INSERT IGNORE INTO {t} VALUES ({apart11}, 'u11@x', 'i')"),
        format!("INSERT IGNORE INTO {t} VALUES (700, 'n700@x', 'i'), (13, 'x13@x', 'i'), (701, NULL, 'i')"),
    ] {
        both(&mut app, &mut r, &sql).await.expect(&sql);
        exact(c, t).await;
    }

    // ON DUPLICATE KEY UPDATE: of the key's row, to a new value, to one another row holds
    // (1062, as one MariaDB), and an insert.
    let e = both(
        &mut app,
        &mut r,
        &format!("INSERT INTO {t} VALUES (15, 'q@x', 'd') ON DUPLICATE KEY UPDATE email = 'u16@x'"),
    )
    .await
    .expect_err("an update onto a taken email");
    assert_eq!(e.0, 1062, "{e:?}");
    for sql in [
        format!("INSERT INTO {t} VALUES (14, 'x14@x', 'd') ON DUPLICATE KEY UPDATE email = VALUES(email)"),
        format!("INSERT INTO {t} VALUES (17, 'u17@x', 'd') ON DUPLICATE KEY UPDATE name = 'same'"),
        format!("INSERT INTO {t} VALUES (800, 'n800@x', 'd') ON DUPLICATE KEY UPDATE name = 'new'"),
        format!("INSERT INTO {t} VALUES (18, 'x18@x', 'd'), (801, 'n801@x', 'd') ON DUPLICATE KEY UPDATE email = CONCAT('y', email)"),
    ] {
        both(&mut app, &mut r, &sql).await.expect(&sql);
        exact(c, t).await;
    }
    // One whose new row's key is free and whose email another key's row (on another node)
    // holds: one MariaDB updates that row, and so does the proxy, on that row's node.
    let apart19 = key_apart(900, 19);
    for sql in [
        format!("INSERT INTO {t} VALUES ({apart19}, 'u19@x', 'd') ON DUPLICATE KEY UPDATE name = 'other'"),
        format!("INSERT INTO {t} VALUES ({apart19}, 'u19@x', 'd') ON DUPLICATE KEY UPDATE name = CONCAT(name, VALUES(name))"),
        format!("INSERT INTO {t} VALUES ({apart19}, 'u19@x', 'd') ON DUPLICATE KEY UPDATE email = 'v19@x'"),
    ] {
        both(&mut app, &mut r, &sql).await.expect(&sql);
        exact(c, t).await;
    }
    for conn in [&mut app, &mut r] {
        conn.exec_drop(
            format!(
                "INSERT INTO {t} (user_id, email, name) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE email = ?"
            ),
            (apart19, "v19@x", "p", "u19@x"),
        )
        .await
        .expect("a prepared upsert onto another key's row");
    }
    all_rows(&mut app, &mut r, t).await;
    // Unless its update names the shard key (VALUES(user_id) would be the other row's):
    // refused, nothing changed.
    let e = app
        .query_drop(format!(
            "INSERT INTO {t} VALUES ({apart19}, 'u19@x', 'd') ON DUPLICATE KEY UPDATE name = VALUES(user_id)"
        ))
        .await
        .expect_err("an upsert onto another key's row naming the key");
    assert!(e.to_string().contains("1235"), "{e}");

    // In a transaction, prepared: a rollback leaves the index as it was.
    for conn in [&mut app, &mut r] {
        conn.query_drop("BEGIN").await.expect("begin");
        conn.exec_drop(
            format!("REPLACE INTO {t} (user_id, email, name) VALUES (?, ?, ?)"),
            (20, "tx@x", "p"),
        )
        .await
        .expect("a prepared REPLACE");
        conn.exec_drop(
            format!("UPDATE {t} SET user_id = ? WHERE user_id = ?"),
            (moved_to + 2000, 20),
        )
        .await
        .expect("a prepared UPDATE of the key");
        conn.query_drop("ROLLBACK").await.expect("rollback");
        conn.query_drop("BEGIN").await.expect("begin");
        conn.exec_drop(
            format!(
                "INSERT INTO {t} (user_id, email, name) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE email = ?"
            ),
            (20, "u20@x", "p", "tx20@x"),
        )
        .await
        .expect("a prepared upsert");
        conn.exec_drop(
            format!("INSERT IGNORE INTO {t} (user_id, email, name) VALUES (?, ?, ?)"),
            (950, "tx20@x", "p"),
        )
        .await
        .expect("a prepared INSERT IGNORE");
        conn.query_drop("COMMIT").await.expect("commit");
    }
    all_rows(&mut app, &mut r, t).await;
    reads_by_email(&mut app, &mut r, t).await;
    exact(c, t).await;

    // Writes by the indexed column run where the rows are: each UPDATE on one node (and the
    // reference's), not on all three.
    let before = com_update(c).await;
    for sql in [
        format!("UPDATE {t} SET name = 'by email' WHERE email = 'u17@x'"),
        format!("UPDATE {t} SET email = 'e19@x' WHERE email = 'u19@x'"),
        format!("UPDATE {t} SET name = 'nobody' WHERE email IN ('nobody@x', 'none@x')"),
    ] {
        both(&mut app, &mut r, &sql).await.expect(&sql);
    }
    let updates = com_update(c).await - before;
    assert_eq!(updates, 6, "one node each, and the reference's");
    for sql in [
        format!("DELETE FROM {t} WHERE email IN ('e19@x', 'u16@x', 'nobody@x')"),
        format!(
            "UPDATE {t} SET name = CONCAT(name, '!') WHERE email = 'five@x' OR email = 'x14@x'"
        ),
    ] {
        both(&mut app, &mut r, &sql).await.expect(&sql);
    }
    // In a transaction, the entries are read locked, as one MariaDB locks the range.
    for conn in [&mut app, &mut r] {
        conn.query_drop("BEGIN").await.expect("begin");
        conn.exec_drop(
            format!("UPDATE {t} SET name = ? WHERE email = ?"),
            ("in tx", "u18@x"),
        )
        .await
        .expect("a prepared UPDATE by email");
        conn.exec_drop(format!("DELETE FROM {t} WHERE email = ?"), ("u20@x",))
            .await
            .expect("a prepared DELETE by email");
        conn.query_drop("COMMIT").await.expect("commit");
    }
    all_rows(&mut app, &mut r, t).await;
    reads_by_email(&mut app, &mut r, t).await;
    exact(c, t).await;
}

/// `held`, an autocommit upsert of `t` through `p`, held between its read and its write
/// while `beside` runs through `app`, which must not wait for it; `held`'s affected rows.
async fn beside_held(p: &Proxy, app: &mut Conn, t: &str, held: String, beside: String) -> u64 {
    let hold = |on: bool| {
        shardproxy::hooks::hold_upserts(t, on.then(|| std::time::Duration::from_millis(1500)))
    };
    hold(true);
    let pool = p.pool();
    let first = tokio::spawn(async move {
        let mut conn = pool.get_conn().await.expect("conn");
        conn.query_drop(&held).await.expect("the held upsert");
        conn.affected_rows()
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while shardproxy::hooks::upserts_held() != 1 {
        assert!(std::time::Instant::now() < deadline, "no upsert waits");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    hold(false);
    app.query_drop(&beside).await.expect(&beside);
    assert_eq!(
        shardproxy::hooks::upserts_held(),
        1,
        "{beside} waited for the held upsert"
    );
    first.await.expect("the held upsert")
}

/// A REPLACE of a key no row holds reads that key's row first, locked, and one MariaDB
/// locks nothing there: under REPEATABLE READ that read locked the gap where the row goes,
/// so a second REPLACE into the same gap waited for the first, whose insert then waited
/// for the second's gap lock: a deadlock on the node (retried unseen, after a wait). The
/// proxy reads READ COMMITTED, and a row that arrives in the gap it no longer locks is
/// seen in the REPLACE's affected rows: it runs again, so no entry of the replaced row is
/// left behind.
#[tokio::test]
async fn replaces_of_new_keys_lock_no_gaps_and_see_a_row_that_arrived_meanwhile() {
    if !cfg!(feature = "test-hooks") {
        eprintln!("ignored: needs the test-hooks feature (scripts/test.sh turns it on)");
        return;
    }
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let p = proxy(&dir, c);
    let mut app = p.conn().await;
    let t = "t_gap";
    create(&mut app, t).await;
    let mut ops = ops(p.admin_port.expect("admin")).await;
    ops.query_drop(format!("CREATE UNIQUE GLOBAL INDEX email ON {t}"))
        .await
        .expect("CREATE GLOBAL INDEX");
    // Five keys of one node, which holds no row: one gap.
    let node = node_of_key(&L3, 1000);
    let keys: Vec<i64> = (1000..)
        .filter(|k| node_of_key(&L3, *k) == node)
        .take(5)
        .collect();
    // The second REPLACE ends while the first still waits after its read.
    let deadlocks = deadlocks_on(c, node).await;
    let affected = beside_held(
        &p,
        &mut app,
        t,
        format!("REPLACE INTO {t} VALUES ({}, 'a@x', 'a')", keys[0]),
        format!("REPLACE INTO {t} VALUES ({}, 'b@x', 'b')", keys[1]),
    )
    .await;
    assert_eq!(affected, 1);
    assert_eq!(
        deadlocks_on(c, node).await,
        deadlocks,
        "a deadlock on the node"
    );
    exact(c, t).await;

    // A row of the key arrives between the REPLACE's read and its write: replaced, as
    // one MariaDB replaces a row that came first, and its entry goes with it.
    let affected = beside_held(
        &p,
        &mut app,
        t,
        format!("REPLACE INTO {t} VALUES ({}, 'a2@x', 'a')", keys[2]),
        format!("INSERT INTO {t} VALUES ({}, 'came@x', 'c')", keys[2]),
    )
    .await;
    assert_eq!(affected, 2, "one row deleted, one inserted");
    let rows: Vec<(i64, String)> = app
        .query(format!(
            "SELECT user_id, email FROM {t} WHERE email IN ('came@x', 'a2@x')"
        ))
        .await
        .expect("by email");
    assert_eq!(rows, vec![(keys[2], "a2@x".to_string())]);
    exact(c, t).await;

    // The same for a REPLACE of several rows (a batch of new keys): one of them arrives.
    let affected = beside_held(
        &p,
        &mut app,
        t,
        format!(
            "REPLACE INTO {t} VALUES ({}, 'a3@x', 'a'), ({}, 'a4@x', 'a')",
            keys[3], keys[4]
        ),
        format!("INSERT INTO {t} VALUES ({}, 'came4@x', 'c')", keys[4]),
    )
    .await;
    assert_eq!(affected, 3, "one row deleted, two inserted");
    exact(c, t).await;
}

/// The UPDATE statements the three nodes have run.
async fn com_update(c: &Cluster) -> u64 {
    let mut n = 0;
    for i in 0..3 {
        n += global_status(c, i, "Com_update").await;
    }
    n
}

/// The entries of `o_w`'s plain index on `code`: exactly one for each (code, user_id) some
/// row holds, on the node its hash names.
async fn exact_shared(c: &Cluster) {
    let mut held: BTreeSet<(String, i64)> = BTreeSet::new();
    let mut entries: Vec<(String, i64)> = Vec::new();
    for i in 0..3 {
        let pool = c.direct(i);
        let mut conn = pool.get_conn().await.expect("node");
        let rows: Vec<(i64, Option<String>)> = conn
            .query("SELECT user_id, code FROM o_w")
            .await
            .expect("rows");
        held.extend(rows.into_iter().filter_map(|(k, v)| v.map(|v| (v, k))));
        let e: Vec<(Vec<u8>, String, i64)> = conn
            .query("SELECT v_hash, code, user_id FROM o_w_code_gsi")
            .await
            .expect("entries");
        for (h, v, k) in e {
            assert_eq!(
                node_of(&L3, &mysql_async::Value::Bytes(h)),
                i,
                "entry {v} on the wrong node"
            );
            entries.push((v, k));
        }
        drop(conn);
        pool.disconnect().await.ok();
    }
    entries.sort();
    let unique: Vec<(String, i64)> = held.into_iter().collect();
    assert_eq!(
        entries, unique,
        "entries (left) and the rows' (code, key) (right)"
    );
}

#[tokio::test]
async fn a_plain_index_keeps_an_entry_while_any_row_of_its_key_holds_the_value() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let p = proxy(&dir, c);
    let mut app = p.conn().await;
    let mut r = reference(c, REFERENCE).await;
    // Orders by user: many rows share a shard key.
    for conn in [&mut app, &mut r] {
        conn.query_drop("DROP TABLE IF EXISTS o_w")
            .await
            .expect("drop");
        conn.query_drop(
            "CREATE TABLE o_w (order_id INT PRIMARY KEY, user_id INT NOT NULL, \
             code VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, KEY (user_id))",
        )
        .await
        .expect("create");
    }
    both(
        &mut app,
        &mut r,
        "INSERT INTO o_w VALUES (1, 5, 'new'), (2, 5, 'new'), (3, 6, 'new'), (4, 5, 'old')",
    )
    .await
    .expect("insert");
    let mut ops = ops(p.admin_port.expect("admin")).await;
    ops.query_drop("CREATE GLOBAL INDEX code ON o_w")
        .await
        .expect("CREATE GLOBAL INDEX");
    exact_shared(c).await;
    let reads = [
        "SELECT * FROM o_w WHERE code = 'new' ORDER BY order_id",
        "SELECT * FROM o_w WHERE code = 'old' ORDER BY order_id",
        "SELECT * FROM o_w WHERE code IN ('new', 'old', 'none') ORDER BY order_id",
    ];
    for sql in [
        "DELETE FROM o_w WHERE order_id = 1",
        "UPDATE o_w SET code = 'old' WHERE order_id = 2",
        "INSERT INTO o_w VALUES (5, 5, 'new'), (6, 5, 'new')",
        "UPDATE o_w SET code = 'gone' WHERE order_id = 5",
        "UPDATE o_w SET user_id = 7 WHERE order_id = 4",
        "INSERT IGNORE INTO o_w VALUES (6, 5, 'ignored'), (7, 6, 'old')",
        "DELETE FROM o_w WHERE user_id = 5 AND code = 'old'",
    ] {
        both(&mut app, &mut r, sql).await.expect(sql);
        for read in reads {
            same_rows(&mut app, &mut r, read).await;
        }
        exact_shared(c).await;
    }
    // Its primary key leaves out the shard key: a REPLACE or an upsert by `order_id` meets
    // the row of another user on the same node, which is read first.
    let beside = key_beside(100, 6);
    for sql in [
        format!("REPLACE INTO o_w VALUES (3, {beside}, 'old')"),
        "INSERT INTO o_w VALUES (3, 6, 'x') ON DUPLICATE KEY UPDATE code = 'new'".to_string(),
        format!("INSERT INTO o_w VALUES (3, {beside}, 'x'), (8, 6, 'new') ON DUPLICATE KEY UPDATE code = CONCAT(code, '!')"),
        "REPLACE INTO o_w VALUES (7, 6, 'replaced'), (9, 7, NULL)".to_string(),
    ] {
        both(&mut app, &mut r, &sql).await.expect(&sql);
        for read in reads {
            same_rows(&mut app, &mut r, read).await;
        }
        same_rows(&mut app, &mut r, "SELECT * FROM o_w ORDER BY order_id").await;
        exact_shared(c).await;
    }
    // Unless the write gives that key no constant: refused, with the reason.
    let e = app
        .query_drop("REPLACE INTO o_w VALUES (3 + 0, 6, 'x')")
        .await
        .expect_err("a REPLACE whose primary key is an expression");
    assert!(e.to_string().contains("leaves out the shard key"), "{e}");
}

/// Slots of an index table laid out otherwise than its base table's.
const APART: [(u16, u16); 3] = [(0, 200), (201, 700), (701, 1023)];

#[tokio::test]
async fn an_index_table_placed_apart_stays_exact_while_either_table_moves_under_writes() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let meta = "gsi_apart";
    common::moves::fresh_schema_on(c, 0, meta).await;
    // Declared in the rules, in use from the first row: the index table is sharded apart
    // from its table, so a move of one is not a move of the other.
    let tables = hash_slot_table("t_ap", "user_id", &L3)
        + "[tables.t_ap.indexes.email]\nunique = true\nstate = \"public\"\n\n"
        + &hash_slot_table("t_ap_email_gsi", "v_hash", &APART);
    let p = common::moves::watching(
        &dir,
        "a",
        common::moves::rules_on(c, 0, meta, &[("ds0", 0), ("ds1", 1), ("ds2", 2)], &tables),
    );
    // (An indexed table is dropped on its nodes: the proxy refuses to drop it.)
    for i in 0..3 {
        let pool = c.direct(i);
        let mut conn = pool.get_conn().await.expect("node");
        conn.query_drop("DROP TABLE IF EXISTS t_ap, t_ap_email_gsi")
            .await
            .expect("drop");
        drop(conn);
        pool.disconnect().await.ok();
    }
    let mut app = p.conn().await;
    for sql in [
        "CREATE TABLE t_ap (user_id INT PRIMARY KEY, \
         email VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, name VARCHAR(32))",
        "CREATE TABLE t_ap_email_gsi (v_hash VARBINARY(256) NOT NULL, \
         email VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, user_id INT, \
         PRIMARY KEY (v_hash))",
    ] {
        app.query_drop(sql).await.expect(sql);
    }
    let values: Vec<String> = (1..=1000i64)
        .map(|k| format!("({k}, 'u{k}@x', 'n{k}')"))
        .collect();
    app.query_drop(format!("INSERT INTO t_ap VALUES {}", values.join(", ")))
        .await
        .expect("load");
    exact_placed(c, "t_ap", "t_ap_email_gsi", &p.shared.topology()).await;
    let mut ops = ops(p.admin_port.expect("admin")).await;
    for (id, what) in [
        ("1", "MIGRATE SLOTS 0-150 OF t_ap TO ds2 RATE 4000 AUTO"),
        (
            "2",
            "MIGRATE SLOTS 0-150 OF t_ap_email_gsi TO ds1 RATE 4000 AUTO",
        ),
    ] {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers: Vec<_> = (1..=2)
            .map(|i| {
                tokio::spawn(writer(
                    p.pool(),
                    "t_ap".to_string(),
                    10 * id.parse::<i64>().unwrap_or(0) + i,
                    stop.clone(),
                ))
            })
            .collect();
        ops.query_drop(what).await.expect(what);
        common::moves::until_step(&mut ops, id, "done", std::time::Duration::from_secs(120)).await;
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut errors = Vec::new();
        for w in writers {
            errors.extend(w.await.expect("writer"));
        }
        assert!(errors.is_empty(), "{what}: {errors:?}");
        exact_placed(c, "t_ap", "t_ap_email_gsi", &p.shared.topology()).await;
    }
    let found: Option<(i64, String)> = app
        .exec_first("SELECT user_id, name FROM t_ap WHERE email = ?", ("u3@x",))
        .await
        .expect("a read by email after both moves");
    assert_eq!(found, Some((3, "n3".to_string())));
}

#[tokio::test]
async fn rows_whose_shard_key_the_proxy_generates_get_entries_for_their_new_keys() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let p = proxy(&dir, c);
    let mut app = p.conn().await;
    for i in 0..3 {
        let pool = c.direct(i);
        let mut conn = pool.get_conn().await.expect("node");
        conn.query_drop("DROP TABLE IF EXISTS t_g, t_g_email_gsi")
            .await
            .expect("drop");
        drop(conn);
        pool.disconnect().await.ok();
    }
    app.query_drop(
        "CREATE TABLE t_g (user_id BIGINT PRIMARY KEY, \
         email VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, name VARCHAR(32))",
    )
    .await
    .expect("create");
    let mut ops = ops(p.admin_port.expect("admin")).await;
    ops.query_drop("CREATE UNIQUE GLOBAL INDEX email ON t_g")
        .await
        .expect("CREATE GLOBAL INDEX");
    // The key left out: the proxy generates it, and the entries point at it.
    app.query_drop(
        "INSERT INTO t_g (email, name) VALUES ('g1@x', 'a'), ('g2@x', 'b'), (NULL, 'c')",
    )
    .await
    .expect("an INSERT whose keys the proxy generates");
    app.exec_drop("INSERT INTO t_g (email, name) VALUES (?, ?)", ("g3@x", "d"))
        .await
        .expect("a prepared one");
    for (email, name) in [("g1@x", "a"), ("g2@x", "b"), ("g3@x", "d")] {
        let got: Vec<(i64, String)> = app
            .exec("SELECT user_id, name FROM t_g WHERE email = ?", (email,))
            .await
            .expect("a read by email");
        assert_eq!(got.len(), 1, "{email}: {got:?}");
        assert_eq!(got[0].1, name);
    }
    let e = app
        .query_drop("INSERT INTO t_g (email, name) VALUES ('g2@x', 'dup')")
        .await
        .expect_err("a duplicate with a generated key");
    assert!(e.to_string().contains("1062"), "{e}");
    let place = |h: &[u8]| node_of(&L3, &mysql_async::Value::Bytes(h.to_vec()));
    let row = |k: i64| node_of_key(&L3, k);
    exact_with(c, 3, "t_g", "t_g_email_gsi", true, &place, &row).await;
}
