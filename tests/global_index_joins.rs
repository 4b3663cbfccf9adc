//! Joins that bind a globally indexed column, on real MariaDB nodes: orders sharded by
//! `user_id` joined to users by the buyer's email, which a global index of users maps to
//! their `user_id`. The users' copy is read only on the nodes of the keys the index names
//! (PREVIEW shows it), and every join form answers as one MariaDB holding every row does:
//! inner, left, `IN (SELECT ...)`, `EXISTS`, text and prepared, with NULL, missing and
//! repeated emails, in a binary and in a case-insensitive collation. Its own binary (its own
//! cluster).

mod common;

use common::indexes::{both, reference, same_rows};
use common::moves::{named_rows, ops};
use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

const L3: [(u16, u16); 3] = [(0, 340), (341, 681), (682, 1023)];

const REFERENCE: &str = "gsi_joins_reference";

async fn tables(app: &mut Conn, r: &mut Conn, suffix: &str, collation: &str) {
    for conn in [&mut *app, &mut *r] {
        for t in ["u", "o"] {
            conn.query_drop(format!("DROP TABLE IF EXISTS {t}_{suffix}"))
                .await
                .expect("drop");
        }
        conn.query_drop(format!(
            "CREATE TABLE u_{suffix} (user_id INT PRIMARY KEY, \
             email VARCHAR(64) CHARACTER SET utf8mb4 COLLATE {collation}, name VARCHAR(32))"
        ))
        .await
        .expect("users");
        conn.query_drop(format!(
            "CREATE TABLE o_{suffix} (order_id INT PRIMARY KEY, user_id INT NOT NULL, \
             buyer VARCHAR(64) CHARACTER SET utf8mb4 COLLATE {collation}, amount INT)"
        ))
        .await
        .expect("orders");
    }
    let users: Vec<String> = (1..=60i64)
        .map(|k| {
            let email = match k % 7 {
                0 => "NULL".to_string(),
                1 => format!("'User{k}@X'"),
                _ => format!("'user{k}@x'"),
            };
            format!("({k}, {email}, 'n{k}')")
        })
        .collect();
    both(
        app,
        r,
        &format!("INSERT INTO u_{suffix} VALUES {}", users.join(", ")),
    )
    .await
    .expect("users' rows");
    let orders: Vec<String> = (1..=300i64)
        .map(|k| {
            let buyer = match k % 9 {
                0 => "NULL".to_string(),
                1 => "'nobody@x'".to_string(),
                // As the user wrote it, or in another case (equal only in a _ci collation).
                2 => format!("'USER{}@x'", k % 61),
                _ => format!("'user{}@x'", (k * 7) % 61),
            };
            format!("({k}, {}, {buyer}, {})", k % 10, k * 3)
        })
        .collect();
    both(
        app,
        r,
        &format!("INSERT INTO o_{suffix} VALUES {}", orders.join(", ")),
    )
    .await
    .expect("orders' rows");
}

fn queries(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    for user in [3, 5, 0] {
        out.extend([
            format!("SELECT o.order_id, u.user_id, u.name FROM o_{s} o JOIN u_{s} u ON u.email = o.buyer WHERE o.user_id = {user} ORDER BY o.order_id"),
            format!("SELECT o.order_id, u.name FROM o_{s} o LEFT JOIN u_{s} u ON u.email = o.buyer WHERE o.user_id = {user} ORDER BY o.order_id"),
            format!("SELECT o.order_id FROM o_{s} o WHERE o.user_id = {user} AND o.buyer IN (SELECT email FROM u_{s}) ORDER BY o.order_id"),
            format!("SELECT o.order_id FROM o_{s} o WHERE o.user_id = {user} AND EXISTS (SELECT 1 FROM u_{s} u WHERE u.email = o.buyer AND u.name <> 'n4') ORDER BY o.order_id"),
            format!("SELECT u.name, COUNT(*), SUM(o.amount) FROM o_{s} o JOIN u_{s} u ON u.email = o.buyer WHERE o.user_id = {user} GROUP BY u.name ORDER BY u.name"),
        ]);
    }
    out
}

#[tokio::test]
async fn joins_that_bind_an_indexed_column_read_only_the_rows_nodes_and_answer_as_one_mariadb() {
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut sections = String::new();
    for s in ["bin", "ci"] {
        sections += &hash_slot_table(&format!("u_{s}"), "user_id", &L3);
        sections += &hash_slot_table(&format!("o_{s}"), "user_id", &L3);
    }
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, common::indexes::rules_with_admin(c, &sections)).expect("rules");
    let p = start_proxy_watching(&path);
    let mut app = p.conn().await;
    let mut r = reference(c, REFERENCE).await;
    let mut ops = ops(p.admin_port.expect("admin")).await;
    for (s, collation) in [("bin", "utf8mb4_bin"), ("ci", "utf8mb4_general_ci")] {
        tables(&mut app, &mut r, s, collation).await;
        ops.query_drop(format!("CREATE GLOBAL INDEX email ON u_{s}"))
            .await
            .expect("CREATE GLOBAL INDEX");
        let whole = || {
            p.shared
                .metrics
                .copied_rows
                .with_label_values(&["whole"])
                .get()
        };
        let before = whole();
        for sql in queries(s) {
            same_rows(&mut app, &mut r, &sql).await;
        }
        assert_eq!(whole(), before, "{s}: no copy of the users read whole");
        // (After the reads: a collation's weights are read by the first statement needing them.)
        let plan = named_rows(
            &mut ops,
            &format!("PREVIEW SELECT o.order_id, u.name FROM o_{s} o JOIN u_{s} u ON u.email = o.buyer WHERE o.user_id = 3"),
        )
        .await;
        let text = format!("{plan:?}");
        assert!(
            text.contains("global index `email`"),
            "the users' copy is bound through the index: {text}"
        );
        // Prepared, the outer key bound.
        let a: Vec<(i64, String)> = app
            .exec(
                format!("SELECT o.order_id, u.name FROM o_{s} o JOIN u_{s} u ON u.email = o.buyer WHERE o.user_id = ? ORDER BY o.order_id"),
                (4,),
            )
            .await
            .expect("through the proxy");
        let b: Vec<(i64, String)> = r
            .exec(
                format!("SELECT o.order_id, u.name FROM o_{s} o JOIN u_{s} u ON u.email = o.buyer WHERE o.user_id = ? ORDER BY o.order_id"),
                (4,),
            )
            .await
            .expect("on one MariaDB");
        assert_eq!(a, b, "{s}: prepared");
        assert!(!a.is_empty(), "{s}: user 4's orders find buyers");
        // After writes that move entries: still the same answers.
        for sql in [
            format!("UPDATE u_{s} SET email = 'moved@x' WHERE user_id = 10"),
            format!("UPDATE u_{s} SET user_id = 500 WHERE user_id = 12"),
            format!("UPDATE o_{s} SET buyer = 'moved@x' WHERE order_id IN (3, 13, 23)"),
        ] {
            both(&mut app, &mut r, &sql).await.expect(&sql);
        }
        for sql in queries(s) {
            same_rows(&mut app, &mut r, &sql).await;
        }
    }
}
