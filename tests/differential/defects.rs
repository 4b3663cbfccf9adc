//! What generated queries found (issue 30), each a fixed case answered like one MariaDB: no
//! refusal allowed, in the text and the binary protocol.

use crate::common::{hash_slot_table, start_proxy_on};
use crate::judge::{judge, must, Check, Compare, Outcome, Pair};
use crate::{cluster, L, SHARDS};

const SETUP: &[&str] = &[
    "DROP TABLE IF EXISTS t_dq",
    "DROP TABLE IF EXISTS t_tk8",
    "DROP TABLE IF EXISTS t_tk9",
    "CREATE TABLE t_dq (user_id INT PRIMARY KEY, x INT, y VARCHAR(10), d DATE, dt DATETIME(2), \
     tm TIME) DEFAULT CHARSET=utf8mb4",
    "INSERT INTO t_dq VALUES (1, 1, 'true', '2024-01-02', '2024-01-02 10:11:12.50', '-01:02:03'), \
     (2, NULL, 'false', '2024-01-03', '2024-01-02 10:11:12.25', '10:00:00'), \
     (3, 3, NULL, NULL, NULL, NULL), (4, 4, 'true', '2024-01-02', '2024-01-04 00:00:00', '00:00:01'), \
     (5, 5, '12abc', '2023-12-31', NULL, '838:59:59'), (6, 6, ' 1e2x', NULL, NULL, NULL), \
     (7, 7, 'TRUE', '2024-01-03', NULL, NULL), (8, 8, '', NULL, NULL, NULL)",
    "CREATE TABLE t_tk8 (user_id TEXT, v INT) DEFAULT CHARSET=utf8mb4",
    "CREATE TABLE t_tk9 (user_id TEXT, v INT) DEFAULT CHARSET=utf8mb4",
    "INSERT INTO t_tk8 VALUES ('d', 1), ('e', 2), ('f', 3), ('é', 4), ('', 5)",
];

/// (query, compared as): each must match the reference, or both fail alike.
const CASES: &[(&str, Compare)] = &[
    // Aggregates of a DISTINCT constant: the nodes grouped by it as a column position.
    (
        "SELECT COUNT(DISTINCT 76), SUM(DISTINCT 12), AVG(DISTINCT + 97), COUNT(DISTINCT - 8) FROM t_dq",
        Compare::Ordered,
    ),
    ("SELECT SUM(DISTINCT (7)), COUNT(DISTINCT 'a') FROM t_dq", Compare::Ordered),
    ("SELECT COUNT(DISTINCT 76) FROM t_dq WHERE user_id > 100", Compare::Ordered),
    ("SELECT x, SUM(DISTINCT 3) FROM t_dq GROUP BY x", Compare::Unordered),
    // SUM and AVG(DISTINCT) of strings, dates and times: each as the number MariaDB reads,
    // once per number.
    ("SELECT AVG(DISTINCT y), SUM(DISTINCT y), COUNT(DISTINCT y) FROM t_dq", Compare::Ordered),
    ("SELECT SUM(DISTINCT d), AVG(DISTINCT d) FROM t_dq", Compare::Ordered),
    ("SELECT SUM(DISTINCT dt), SUM(DISTINCT tm), AVG(DISTINCT tm) FROM t_dq", Compare::Ordered),
    // What MariaDB rejects stays rejected.
    ("SELECT x FROM t_dq WHERE x NOT NULL", Compare::Unordered),
    ("SELECT COUNT(*) FROM t_dq WHERE x NOT NULL", Compare::Ordered),
    ("SELECT x FROM t_dq WHERE user_id = 1 AND x NOT NULL", Compare::Unordered),
    // An integer shard key compared with a string (or decimal) that is another integer's
    // text: the rows are on the integer's node, not the string's.
    ("SELECT user_id, x FROM t_dq WHERE user_id = '01'", Compare::Ordered),
    ("SELECT user_id, x FROM t_dq WHERE user_id = ' 4'", Compare::Ordered),
    ("SELECT user_id, x FROM t_dq WHERE user_id = '2.0'", Compare::Ordered),
    ("SELECT user_id, x FROM t_dq WHERE user_id = 8.0", Compare::Ordered),
    ("SELECT user_id, x FROM t_dq WHERE user_id IN ('5e0', '06', 7)", Compare::Unordered),
    ("UPDATE t_dq SET x = x + 1 WHERE user_id = '03'", Compare::Ordered),
    ("SELECT user_id, x FROM t_dq WHERE user_id = 3", Compare::Ordered),
    // INSERT ... SELECT between tables whose shard key is TEXT.
    ("INSERT INTO t_tk9 SELECT * FROM t_tk8", Compare::Unordered),
    ("SELECT * FROM t_tk9", Compare::Unordered),
];

/// A WHERE of 255 AND / OR terms in brackets 30 deep (about 4.5 KB).
fn long_where() -> String {
    let mut w = String::from("x IS NOT NULL");
    for i in 0..254 {
        let op = if i % 3 == 0 { "OR" } else { "AND" };
        w = if i % 8 == 0 {
            format!("({w}) {op} y <> 'v{i}'")
        } else {
            format!("{w} {op} user_id > {}", i % 5)
        };
    }
    format!("SELECT user_id FROM t_dq WHERE {w}")
}

#[tokio::test]
async fn what_generated_queries_found_is_answered_like_one_mariadb() {
    let c = cluster();
    let rules = hash_slot_table("t_dq", "user_id", &L)
        + &hash_slot_table("t_tk8", "user_id", &L)
        + &hash_slot_table("t_tk9", "user_id", &L);
    let proxy = start_proxy_on(c, &SHARDS, &rules);
    let mut pair = Pair::new(&proxy, c).await;
    let deep = format!(
        "SELECT user_id FROM t_dq WHERE {}x > 2{}",
        "(".repeat(200),
        ")".repeat(200)
    );
    let long = long_where();
    let mut wrong = Vec::new();
    for prepared in [false, true] {
        for sql in SETUP {
            must(&mut pair.p, sql, "the proxy").await;
            must(&mut pair.r, sql, "the reference").await;
        }
        let extra = [
            (long.as_str(), Compare::Unordered),
            (deep.as_str(), Compare::Unordered),
        ];
        for (sql, compare) in CASES.iter().copied().chain(extra) {
            let (want, got) = pair.both(sql, prepared).await;
            match judge(&want, &got, &Check::exact(compare)) {
                Outcome::Matched => {}
                other => wrong.push(format!(
                    "{} {}: {other:?}",
                    if prepared { "prepared" } else { "text" },
                    &sql[..sql.len().min(120)]
                )),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
