//! Joins of tables sharded on different keys whose copy is read by the join's keys
//! (`plan/bind.rs`): the outer table's rows on one node, the other table's rows read only where
//! their keys are among the outer rows' values. Each query against one MariaDB holding every
//! row, in the text and the binary protocol, with NULL keys, duplicate keys, keys no row
//! matches and empty outer sides; and the rows each copied, counted.

use mysql_async::prelude::Queryable;

use crate::common::{hash_slot_table, start_proxy_on, Proxy};
use crate::judge::{judge, must, Check, Compare, Outcome, Pair};
use crate::{cluster, L, SHARDS};

/// (query, whether its copy is read by the join's keys).
const CASES: &[(&str, bool)] = &[
    (
        "SELECT o.order_id, p.name, p.price * o.qty FROM j_orders o JOIN j_products p \
         ON p.product_id = o.product_id WHERE o.user_id = 7 ORDER BY o.order_id",
        true,
    ),
    // A table's columns beside other items, ordered by a qualified name and by a bare one
    // MariaDB finds among the wildcard's (both tables have `product_id`).
    (
        "SELECT o.*, p.name AS pname, p.price * o.qty AS total FROM j_orders o \
         JOIN j_products p ON p.product_id = o.product_id WHERE o.user_id = 7 \
         ORDER BY total DESC, o.order_id LIMIT 4",
        true,
    ),
    (
        "SELECT o.*, p.name AS pname FROM j_orders o JOIN j_products p \
         ON p.product_id = o.product_id WHERE o.user_id = 7 ORDER BY product_id, order_id",
        true,
    ),
    // The products on the right of a LEFT JOIN: orders without one keep NULLs.
    (
        "SELECT o.order_id, o.product_id, p.name FROM j_orders o LEFT JOIN j_products p \
         ON p.product_id = o.product_id WHERE o.user_id = 13 ORDER BY o.order_id",
        true,
    ),
    // The join in the WHERE, written the other way round.
    (
        "SELECT o.order_id, p.price FROM j_orders o, j_products p \
         WHERE o.product_id = p.product_id AND o.user_id = 11 ORDER BY o.order_id",
        true,
    ),
    (
        "SELECT p.name, SUM(o.qty), COUNT(*) FROM j_orders o JOIN j_products p \
         ON o.product_id = p.product_id WHERE o.user_id IN (3) GROUP BY p.name ORDER BY p.name",
        true,
    ),
    // A filter of the products' own, and one of the orders' beyond the key.
    (
        "SELECT o.order_id, p.name FROM j_orders o JOIN j_products p \
         ON p.product_id = o.product_id AND p.price > 10 WHERE o.user_id = 7 AND o.qty > 1 \
         ORDER BY o.order_id",
        true,
    ),
    // No outer row; outer rows whose keys are all NULL.
    (
        "SELECT o.order_id, p.name FROM j_orders o JOIN j_products p \
         ON p.product_id = o.product_id WHERE o.user_id = 9999",
        true,
    ),
    (
        "SELECT o.order_id, p.name FROM j_orders o LEFT JOIN j_products p \
         ON p.product_id = o.product_id WHERE o.user_id = 40 ORDER BY o.order_id",
        true,
    ),
    // The products kept whole by the join (their side preserved): read as before.
    (
        "SELECT p.product_id, o.order_id FROM j_products p LEFT JOIN j_orders o \
         ON p.product_id = o.product_id AND o.user_id = 5 WHERE p.product_id < 30 \
         ORDER BY p.product_id, o.order_id",
        false,
    ),
    // A string key: its equality is the collation's ('ab' = 'AB'), not its text's slot: the
    // values are read on every node.
    (
        "SELECT o.order_id, c.label FROM j_orders o JOIN j_codes c ON c.code = o.code \
         WHERE o.user_id = 7 ORDER BY o.order_id",
        true,
    ),
    // An integer column joined to a string key: '0012' equals 12 there, and lies on the
    // slot of its own text, so the values are read on every node.
    (
        "SELECT o.order_id, s.sku FROM j_orders o JOIN j_skus s ON s.sku = o.product_id \
         WHERE o.user_id = 13 ORDER BY o.order_id, s.sku",
        true,
    ),
    // Semi-joins: IN (SELECT key ...) and [NOT] EXISTS tied by the key, as conjuncts.
    (
        "SELECT o.order_id, o.qty FROM j_orders o WHERE o.user_id = 7 AND o.product_id IN \
         (SELECT p.product_id FROM j_products p WHERE p.price > 10) ORDER BY o.order_id",
        true,
    ),
    (
        "SELECT order_id FROM j_orders WHERE user_id = 13 AND product_id IN \
         (SELECT product_id FROM j_products) ORDER BY order_id",
        true,
    ),
    (
        "SELECT o.order_id FROM j_orders o WHERE o.user_id = 11 AND EXISTS (SELECT 1 FROM \
         j_products p WHERE p.product_id = o.product_id AND p.price < 20) ORDER BY o.order_id",
        true,
    ),
    // NOT EXISTS: products missing, and (user 40) every order's product NULL.
    (
        "SELECT o.order_id, o.product_id FROM j_orders o WHERE NOT EXISTS (SELECT * FROM \
         j_products p WHERE o.product_id = p.product_id) AND o.user_id = 17 \
         ORDER BY o.order_id",
        true,
    ),
    (
        "SELECT o.order_id FROM j_orders o WHERE NOT EXISTS (SELECT * FROM j_products p \
         WHERE o.product_id = p.product_id) AND o.user_id = 40 ORDER BY o.order_id",
        true,
    ),
    (
        "SELECT o.order_id, o.code FROM j_orders o WHERE o.user_id = 7 AND o.code IN \
         (SELECT c.code FROM j_codes c) ORDER BY o.order_id",
        true,
    ),
    // NOT IN and an EXISTS in the select list: read as before.
    (
        "SELECT o.order_id FROM j_orders o WHERE o.user_id = 13 AND o.product_id NOT IN \
         (SELECT p.product_id FROM j_products p WHERE p.price > 10) ORDER BY o.order_id",
        false,
    ),
    (
        "SELECT o.order_id, EXISTS (SELECT 1 FROM j_products p WHERE p.product_id = \
         o.product_id) FROM j_orders o WHERE o.user_id = 7 ORDER BY o.order_id",
        false,
    ),
];

/// A session through `proxy` and one to the reference, after `setup` ran on both.
async fn set_up<'p>(proxy: &'p Proxy, setup: &[String]) -> Pair<'p> {
    let mut pair = Pair::new(proxy, cluster()).await;
    for sql in setup {
        must(&mut pair.p, sql, "the proxy").await;
        must(&mut pair.r, sql, "the reference").await;
    }
    pair
}

/// `<prefix>_orders` and `<prefix>_products` made afresh.
fn orders_and_products(prefix: &str) -> Vec<String> {
    vec![
        format!("DROP TABLE IF EXISTS {prefix}_orders"),
        format!("DROP TABLE IF EXISTS {prefix}_products"),
        format!(
            "CREATE TABLE {prefix}_orders (order_id BIGINT PRIMARY KEY, user_id INT NOT NULL, \
             product_id INT, qty INT NOT NULL, code VARCHAR(8))"
        ),
        format!(
            "CREATE TABLE {prefix}_products (product_id INT PRIMARY KEY, name VARCHAR(20), \
             price DECIMAL(8,2))"
        ),
    ]
}

/// The rows the proxy's copies read so far, by how (`shardproxy_copied_rows_total`).
fn copied(proxy: &Proxy, how: &str) -> u64 {
    proxy
        .shared
        .metrics
        .copied_rows
        .with_label_values(&[how])
        .get()
}

#[tokio::test]
async fn joins_by_the_other_tables_key_copy_only_the_rows_they_join_and_answer_like_one_mariadb() {
    let rules = hash_slot_table("j_orders", "user_id", &L)
        + &hash_slot_table("j_products", "product_id", &L)
        + &hash_slot_table("j_codes", "code", &L)
        + &hash_slot_table("j_skus", "sku", &L);
    let mut setup = orders_and_products("j");
    setup.extend([
        "DROP TABLE IF EXISTS j_codes".to_string(),
        "DROP TABLE IF EXISTS j_skus".to_string(),
        "CREATE TABLE j_skus (sku VARCHAR(8) PRIMARY KEY)".into(),
        "CREATE TABLE j_codes (code VARCHAR(8) PRIMARY KEY, label VARCHAR(20))".into(),
    ]);
    // Orders: users 1-40, products 1-250 (some with no product row, several orders of one
    // product), user 40's orders without a product.
    let orders: Vec<String> = (1..=800)
        .map(|i: i64| {
            let user = 1 + i % 40;
            let product = if user == 40 || i % 17 == 0 {
                "NULL".to_string()
            } else {
                (1 + (i * 7) % 250).to_string()
            };
            let code = ["ab", "AB", "cd", "x"][(i % 4) as usize];
            format!("({i}, {user}, {product}, {}, '{code}')", 1 + i % 5)
        })
        .collect();
    setup.push(format!("INSERT INTO j_orders VALUES {}", orders.join(", ")));
    let products: Vec<String> = (1..=220)
        .filter(|p| p % 9 != 0)
        .map(|p: i64| format!("({p}, 'p{}', {}.{:02})", p % 60, p % 40, p % 100))
        .collect();
    setup.push(format!(
        "INSERT INTO j_products VALUES {}",
        products.join(", ")
    ));
    setup.push("INSERT INTO j_codes VALUES ('ab', 'lower'), ('cd', 'other')".into());
    let skus: Vec<String> = (1..=250)
        .flat_map(|p| [format!("('{p}')"), format!("('{p:04}')")])
        .collect();
    setup.push(format!(
        "INSERT IGNORE INTO j_skus VALUES {}",
        skus.join(", ")
    ));
    let proxy = start_proxy_on(cluster(), &SHARDS, &rules);
    let mut pair = set_up(&proxy, &setup).await;
    let copied = |how: &str| copied(&proxy, how);
    let mut wrong = Vec::new();
    let (mut inlined, mut spread) = (0, 0);
    for prepared in [false, true] {
        for (sql, bound) in CASES {
            let (b0, i0, s0, w0) = (
                copied("bound"),
                copied("inline"),
                copied("spread"),
                copied("whole"),
            );
            let (want, got) = pair.both(sql, prepared).await;
            let (b, i, sp, w) = (
                copied("bound") - b0,
                copied("inline") - i0,
                copied("spread") - s0,
                copied("whole") - w0,
            );
            inlined += i;
            spread += sp;
            // Rows read by keys: into a temporary table or into the statement, or the outer
            // rows carried to the nodes of the keys.
            let b = b + i + sp;
            let how = if prepared { "prepared" } else { "text" };
            match judge(&want, &got, &Check::exact(Compare::Ordered)) {
                Outcome::Matched => {}
                other => wrong.push(format!("{how} {sql}: {other:?}")),
            }
            if *bound && (w > 0 || b > 40) {
                wrong.push(format!("{how} {sql}: {b} rows copied by keys, {w} whole"));
            }
            if !*bound && b > 0 {
                wrong.push(format!("{how} {sql}: read by keys it may not be"));
            }
        }
    }
    // Bound values: the orders' filter takes them, the products' read by the keys.
    let sql = "SELECT o.order_id, p.name, p.price * o.qty FROM j_orders o JOIN j_products p \
               ON p.product_id = o.product_id WHERE o.user_id = ? ORDER BY o.order_id";
    for user in [1, 17, 40, 77] {
        let by_keys = || copied("bound") + copied("inline") + copied("spread");
        let b0 = by_keys();
        type Row = (i64, Option<String>, Option<String>);
        let got: Vec<Row> = pair.p.exec(sql, (user,)).await.expect("proxy, bound");
        let want: Vec<Row> = pair.r.exec(sql, (user,)).await.expect("reference, bound");
        let b = by_keys() - b0;
        if got != want || b > 40 {
            wrong.push(format!(
                "user {user}: {got:?} against {want:?}, {b} rows copied"
            ));
        }
    }
    // Few rows of plain types: carried inside the statement, no temporary table; integer
    // keys: the orders carried to the products' nodes (string keys stay gathered).
    assert!(inlined > 0, "no bound copy travelled inside its statement");
    assert!(spread > 0, "no join ran where its inner rows are");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Columns of every type whose rows travel inside the statement (`src/exec/inline.rs`), and
/// one of a type that keeps the temporary table (a FLOAT, whose text may round): each value
/// compares, sorts, converts and is described as the table's own would be.
const KINDS: &[(&str, bool)] = &[
    (
        "SELECT r.n, k.* FROM j_refs r JOIN j_kinds k ON k.id = r.k WHERE r.owner = 3 \
         ORDER BY r.n",
        true,
    ),
    // A binary collation (case and trailing spaces count), a latin1 column, and a
    // general_ci column of the outer table against the binary one.
    (
        "SELECT r.n, k.name, k.l FROM j_refs r JOIN j_kinds k ON k.id = r.k \
         WHERE r.owner = 3 AND k.name = 'ABC' ORDER BY r.n",
        true,
    ),
    (
        "SELECT r.n, k.name = r.label, CONCAT(k.l, '-', k.c), LENGTH(k.l), k.tx LIKE 'a%' \
         FROM j_refs r JOIN j_kinds k ON k.id = r.k WHERE r.owner = 6 \
         ORDER BY k.name, r.n",
        true,
    ),
    (
        "SELECT k.l, COUNT(*), SUM(k.d), MAX(k.dt), MIN(k.t) FROM j_refs r JOIN j_kinds k \
         ON k.id = r.k WHERE r.owner = 5 GROUP BY k.l ORDER BY k.l",
        true,
    ),
    (
        "SELECT r.n, k.u + 1, k.d * 3, k.dt + INTERVAL 1 DAY, k.y + 0, k.dd, k.t, k.ts \
         FROM j_refs r LEFT JOIN j_kinds k ON k.id = r.k WHERE r.owner = 5 ORDER BY r.n",
        true,
    ),
    (
        "SELECT r.n, f.f, f.f * 3 FROM j_refs r JOIN j_floats f ON f.id = r.k \
         WHERE r.owner = 3 ORDER BY r.n",
        false,
    ),
    // The outer rows' own values of every type, compared, sorted and converted.
    (
        "SELECT r.n, r.ti, r.sm + 1, r.mi, r.bi, r.d * 2, r.dt, r.t, r.dd, r.y, r.ts, r.c, \
         r.tx, r.c = 'AB', k.name FROM j_refs r JOIN j_kinds k ON k.id = r.k \
         WHERE r.owner = 4 AND r.dt > '2024-01-03' ORDER BY r.t, r.n",
        true,
    ),
    (
        "SELECT r.c, COUNT(*), MIN(r.t), MAX(r.dt), SUM(r.d), MAX(r.bi) FROM j_refs r \
         JOIN j_kinds k ON k.id = r.k WHERE r.owner = 2 GROUP BY r.c ORDER BY r.c",
        true,
    ),
];

#[tokio::test]
async fn rows_carried_inside_the_statement_keep_their_columns_types_and_collations() {
    let rules = hash_slot_table("j_refs", "owner", &L)
        + &hash_slot_table("j_refs_f", "owner", &L)
        + &hash_slot_table("j_kinds", "id", &L)
        + &hash_slot_table("j_floats", "id", &L);
    let mut setup = vec![
        "DROP TABLE IF EXISTS j_refs".to_string(),
        "DROP TABLE IF EXISTS j_refs_f".to_string(),
        "DROP TABLE IF EXISTS j_kinds".to_string(),
        "DROP TABLE IF EXISTS j_floats".to_string(),
        // Outer rows of every type that travels, to the other table's nodes or gathered.
        "CREATE TABLE j_refs (n INT PRIMARY KEY, owner INT NOT NULL, k INT, \
         label VARCHAR(10) COLLATE utf8mb4_general_ci, ti TINYINT, sm SMALLINT UNSIGNED, \
         mi MEDIUMINT, bi BIGINT UNSIGNED, d DECIMAL(12,3), dt DATETIME(3), t TIME(1), \
         dd DATE, y YEAR, ts TIMESTAMP NULL, c CHAR(3) CHARACTER SET latin1, tx TEXT)"
            .into(),
        "CREATE TABLE j_kinds (id INT PRIMARY KEY, u BIGINT UNSIGNED, d DECIMAL(30,10), \
         dt DATETIME(6), t TIME(2), y YEAR, dd DATE, \
         name VARCHAR(20) COLLATE utf8mb4_bin, l VARCHAR(10) CHARACTER SET latin1, \
         tx TEXT, c CHAR(4), ts TIMESTAMP NULL) DEFAULT CHARSET=utf8mb4"
            .into(),
        "CREATE TABLE j_floats (id INT PRIMARY KEY, f FLOAT)".into(),
    ];
    let refs: Vec<String> = (1..=60)
        .map(|n: i64| {
            let k = if n % 11 == 0 {
                "NULL".to_string()
            } else {
                (n % 23).to_string()
            };
            // A character past the BMP: carried as a parameter, two `\u` escapes.
            let label = ["abc", "ABC", "x", "é😀"][(n % 4) as usize];
            let ts = if n % 6 == 0 {
                "NULL".to_string()
            } else {
                format!("'2024-02-0{} 1{}:00:00'", 1 + n % 9, n % 10)
            };
            format!(
                "({n}, {}, {k}, '{label}', {}, {}, {}, {}, {}.{:03}, \
                 '2024-01-{:02} 10:00:0{}.{:03}', '-{}:30:00.5', '2023-0{}-01', {}, {ts}, \
                 'c{}', 't{n}')",
                n % 7,
                n - 30,
                n * 1000,
                n * -100_000,
                18446744073709551000u64 + n as u64,
                n * 3 - 90,
                n * 7,
                1 + n % 28,
                n % 10,
                n,
                n % 30,
                1 + n % 9,
                1950 + n,
                ["é", "ab", "AB"][(n % 3) as usize],
            )
        })
        .collect();
    setup.push(format!("INSERT INTO j_refs VALUES {}", refs.join(", ")));
    // The same rows beside a FLOAT, whose text may round: they cannot be carried to the
    // other table's nodes, so the join is gathered and that table's rows carried instead.
    setup.push("CREATE TABLE j_refs_f SELECT *, n / 3 AS w FROM j_refs".into());
    setup.push("ALTER TABLE j_refs_f MODIFY w FLOAT, ADD PRIMARY KEY (n)".into());
    let names = ["ABC", "abc", "ABC ", "Zé😀", "o''q\\\"", ""];
    let kinds: Vec<String> = (1..=20)
        .map(|i: i64| {
            format!(
                "({i}, {}, {}.{:010}, '2024-0{}-1{} 0{}:30:15.{:06}', '{}:05:01.5', {}, \
                 '2023-12-0{}', '{}', '{}', {}, 'c{}', {})",
                18446744073709551000u64 + i as u64,
                i * 12345,
                i * 7,
                1 + i % 9,
                i % 10,
                i % 10,
                i * 31,
                i * 3 - 30,
                1901 + i * 12,
                1 + i % 9,
                names[(i % 6) as usize],
                ["aé", "b", "Aé"][(i % 3) as usize],
                if i % 5 == 0 {
                    "NULL".to_string()
                } else {
                    format!("'a{i}'")
                },
                i,
                if i % 4 == 0 {
                    "NULL"
                } else {
                    "'2024-03-01 10:00:00'"
                },
            )
        })
        .collect();
    setup.push(format!("INSERT INTO j_kinds VALUES {}", kinds.join(", ")));
    let floats: Vec<String> = (1..=20)
        .map(|i: i64| format!("({i}, {}.1)", i * 3))
        .collect();
    setup.push(format!("INSERT INTO j_floats VALUES {}", floats.join(", ")));
    let proxy = start_proxy_on(cluster(), &SHARDS, &rules);
    let mut pair = set_up(&proxy, &setup).await;
    let copied = |how: &str| copied(&proxy, how);
    let mut wrong = Vec::new();
    // `j_refs`' rows are carried to `j_kinds`' nodes; `j_refs_f`'s cannot be, and the rows
    // of `j_kinds` are carried to them instead.
    for (outer, spreads) in [("j_refs", true), ("j_refs_f", false)] {
        for prepared in [false, true] {
            for (sql, inline) in KINDS {
                let sql = sql.replace("j_refs r", &format!("{outer} r"));
                let (i0, b0, s0) = (copied("inline"), copied("bound"), copied("spread"));
                let (want, got) = pair.both(&sql, prepared).await;
                let (i, b, sp) = (
                    copied("inline") - i0,
                    copied("bound") - b0,
                    copied("spread") - s0,
                );
                let how = if prepared { "prepared" } else { "text" };
                // Which spelling a group of a `_ci` column shows is any of its rows'.
                let mut check = Check::exact(Compare::Ordered);
                if sql.contains("GROUP BY k.l") || sql.contains("GROUP BY r.c") {
                    check.caseless = vec![0];
                }
                match judge(&want, &got, &check) {
                    Outcome::Matched => {}
                    other => wrong.push(format!("{how} {sql}: {other:?}")),
                }
                let counts = format!(
                    "{how} {sql}: {i} rows inside the statement, {b} in a table, {sp} carried to the other table's nodes"
                );
                // A prepared statement's rows travel as a parameter of their own (its node
                // statement is prepared and kept by its text), a text statement's written in.
                if spreads {
                    if sp == 0 || i > 0 || b > 0 {
                        wrong.push(counts);
                    }
                } else if (*inline && (i == 0 || b > 0)) || (!*inline && (i > 0 || b == 0)) {
                    wrong.push(counts);
                }
            }
        }
    }
    // A TIMESTAMP read on one node and carried to another is the same instant in the
    // session's time zone, and the client's SET names travel to every node.
    for sql in [
        "SET time_zone = '+05:30'",
        "SET NAMES latin1",
        "SET NAMES utf8mb4",
        // Rows read in UTF-8 travel; a parameter is taken in latin1.
        "SET character_set_client = latin1",
    ] {
        must(&mut pair.p, sql, "the proxy").await;
        must(&mut pair.r, sql, "the reference").await;
        for (outer, prepared) in [
            ("j_refs", false),
            ("j_refs_f", false),
            ("j_refs", true),
            ("j_refs_f", true),
        ] {
            // Text past ASCII (and past the BMP) both ways: carried in a session whose
            // strings are latin1.
            let texts = "SELECT r.n, r.label, k.name, k.l FROM j_refs r JOIN j_kinds k \
                         ON k.id = r.k WHERE r.owner = 6 ORDER BY r.n";
            for kind in [KINDS[0].0, texts] {
                let query = kind.replace("j_refs r", &format!("{outer} r"));
                let (want, got) = pair.both(&query, prepared).await;
                match judge(&want, &got, &Check::exact(Compare::Ordered)) {
                    Outcome::Matched => {}
                    other => wrong.push(format!("after {sql}, {outer} {prepared}: {other:?}")),
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A join's plan kept for its shape (`plan/template.rs`): the same shapes for every user,
/// whose orders are on either node, answer like one MariaDB; most executions take the kept
/// plan (neither parsed nor planned); a DDL through the proxy leaves none to a stale plan.
#[tokio::test]
async fn joins_repeated_with_other_literals_take_their_kept_plans_and_answer_like_one_mariadb() {
    let rules = hash_slot_table("k_orders", "user_id", &L)
        + &hash_slot_table("k_products", "product_id", &L);
    let mut setup = orders_and_products("k");
    let orders: Vec<String> = (1..=600)
        .map(|i: i64| {
            let product = if i % 13 == 0 {
                "NULL".to_string()
            } else {
                (1 + (i * 7) % 150).to_string()
            };
            let code = ["ab", "AB", "cd", "x"][(i % 4) as usize];
            format!("({i}, {}, {product}, {}, '{code}')", 1 + i % 30, 1 + i % 5)
        })
        .collect();
    setup.push(format!("INSERT INTO k_orders VALUES {}", orders.join(", ")));
    let products: Vec<String> = (1..=140)
        .map(|p: i64| format!("({p}, 'p{}', {}.{:02})", p % 50, p % 40, p % 100))
        .collect();
    setup.push(format!(
        "INSERT INTO k_products VALUES {}",
        products.join(", ")
    ));
    let proxy = start_proxy_on(cluster(), &SHARDS, &rules);
    let mut pair = set_up(&proxy, &setup).await;
    const SHAPES: &[&str] = &[
        "SELECT o.order_id, p.name, p.price * o.qty FROM k_orders o JOIN k_products p \
         ON p.product_id = o.product_id WHERE o.user_id = {u} ORDER BY o.order_id",
        "SELECT o.*, p.name FROM k_orders o JOIN k_products p ON p.product_id = o.product_id \
         WHERE o.user_id = {u} AND o.code = 'ab' ORDER BY o.order_id",
        "SELECT o.order_id, p.name FROM k_orders o LEFT JOIN k_products p \
         ON p.product_id = o.product_id WHERE o.user_id = {u} ORDER BY o.order_id LIMIT 3",
        "SELECT p.name, SUM(o.qty), COUNT(*) FROM k_orders o JOIN k_products p \
         ON o.product_id = p.product_id WHERE o.user_id IN ({u}, {v}) GROUP BY p.name \
         ORDER BY p.name",
    ];
    let mut wrong = Vec::new();
    let mut queries = Vec::new();
    for shape in SHAPES {
        for u in 1..=31 {
            let v = 1 + (u * 11) % 31;
            queries.push(
                shape
                    .replace("{u}", &u.to_string())
                    .replace("{v}", &v.to_string()),
            );
        }
    }
    for sql in queries {
        let (want, got) = pair.both(&sql, false).await;
        match judge(&want, &got, &Check::exact(Compare::Ordered)) {
            Outcome::Matched => {}
            other => wrong.push(format!("{sql}: {other:?}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Each shape was planned once for each signature of its literals (the nodes of their
    // slots: 31 executions of one literal have few, of two literals more), and kept for the
    // rest.
    let entries = proxy.shared.plans.top(100);
    for shape in SHAPES {
        let head = &shape[..30];
        let e = entries
            .iter()
            .find(|e| e.digest.starts_with(head) && e.digest.contains("k_products"))
            .unwrap_or_else(|| panic!("no entry for {shape}"));
        let cached = e
            .cached_executions
            .load(std::sync::atomic::Ordering::Relaxed);
        let least = if shape.contains("{v}") { 10 } else { 20 };
        assert!(
            cached >= least,
            "{}: {cached} executions of 31 on a kept plan",
            e.digest
        );
    }
    // The first shape prepared (its rows carried as a parameter), by the binary protocol.
    let count = |e: &std::sync::Arc<shardproxy::plan::cache::Entry>| {
        e.cached_executions
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let head = "SELECT o.order_id, p.name, p.price * o.qty FROM k_orders";
    let entry = || {
        proxy
            .shared
            .plans
            .top(100)
            .into_iter()
            .find(|e| e.digest.starts_with(head))
            .expect("the first shape's entry")
    };
    let before = count(&entry());
    let sql = SHAPES[0].replace("{u}", "?");
    type Row = (i64, Option<String>, Option<String>);
    for u in 1..=31 {
        let got: Vec<Row> = pair.p.exec(&sql, (u,)).await.expect("proxy, prepared");
        let want: Vec<Row> = pair.r.exec(&sql, (u,)).await.expect("reference, prepared");
        if got != want {
            wrong.push(format!("prepared, user {u}: {got:?} against {want:?}"));
        }
    }
    let prepared_kept = count(&entry()) - before;
    assert!(
        prepared_kept >= 20,
        "{prepared_kept} prepared executions of 31 on a kept plan"
    );
    // A DDL through the proxy: the next executions are planned afresh, and still right.
    for sql in [
        "ALTER TABLE k_orders ADD COLUMN note VARCHAR(10) NOT NULL DEFAULT 'n'",
        "ALTER TABLE k_products DROP COLUMN price",
    ] {
        must(&mut pair.p, sql, "the proxy").await;
        must(&mut pair.r, sql, "the reference").await;
    }
    for u in [3, 4, 5, 6] {
        let sql = format!(
            "SELECT o.*, p.name FROM k_orders o JOIN k_products p ON p.product_id = \
             o.product_id WHERE o.user_id = {u} AND o.code = 'ab' ORDER BY o.order_id"
        );
        let (want, got) = pair.both(&sql, false).await;
        match judge(&want, &got, &Check::exact(Compare::Ordered)) {
            Outcome::Matched => {}
            other => wrong.push(format!("after the DDL, {sql}: {other:?}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    pair.p.disconnect().await.ok();
}
