//! Deep pages by the primary key over hash shards (`plan/key_page.rs`): the same rows as one
//! MariaDB, in the text and the binary protocol, read with about a page per node instead of
//! the offset and the page from every node.

use mysql_async::prelude::Queryable;

use crate::common::{hash_slot_table, start_proxy_on};
use crate::judge::{judge, must, Check, Compare, Outcome, Pair};
use crate::{cluster, L, SHARDS};

/// (query, at most this many rows read from the nodes by the merge).
const CASES: &[(&str, u64)] = &[
    (
        "SELECT user_id, v FROM t_pg ORDER BY user_id LIMIT 10000, 20",
        1_000,
    ),
    (
        "SELECT user_id, v, s FROM t_pg ORDER BY user_id DESC LIMIT 12345, 7",
        1_000,
    ),
    (
        "SELECT * FROM t_pg WHERE v % 3 = 1 ORDER BY user_id LIMIT 3000, 15",
        1_000,
    ),
    // The key is not selected: a helper column the client does not see.
    (
        "SELECT v, s FROM t_pg ORDER BY t_pg.user_id LIMIT 1500, 10",
        1_000,
    ),
    (
        "SELECT user_id FROM t_pg ORDER BY user_id LIMIT 25 OFFSET 19990",
        1_000,
    ),
    // Past the end, and a page over the end.
    (
        "SELECT user_id FROM t_pg ORDER BY user_id LIMIT 25000, 5",
        1_000,
    ),
    (
        "SELECT user_id FROM t_pg WHERE user_id < 0 ORDER BY user_id DESC LIMIT 9990, 50",
        1_000,
    ),
    // A table whose rows lie mostly on one node.
    (
        "SELECT k, v FROM t_pg_skew ORDER BY k LIMIT 4000, 30",
        1_000,
    ),
    // Not a key page (a sort key that is not the primary key, a HAVING): as before, every
    // row up to the page from every node.
    (
        "SELECT user_id, v AS w FROM t_pg HAVING w > 500 ORDER BY user_id LIMIT 2000, 5",
        u64::MAX,
    ),
    (
        "SELECT user_id, v FROM t_pg ORDER BY v, user_id LIMIT 2000, 5",
        u64::MAX,
    ),
];

#[tokio::test]
async fn deep_pages_by_the_key_read_about_a_page_per_node_and_answer_like_one_mariadb() {
    let c = cluster();
    let rules = hash_slot_table("t_pg", "user_id", &L)
        + "[tables.t_pg_skew]\nrule = \"hash_slot\"\ncolumn = \"k\"\n\
           slots = [{ slots = \"0-900\", node = \"ds0\" }, { slots = \"901-1023\", node = \"ds1\" }]\n";
    let proxy = start_proxy_on(c, &SHARDS, &rules);
    let mut pair = Pair::new(&proxy, c).await;
    let mut setup = vec![
        "DROP TABLE IF EXISTS t_pg".to_string(),
        "DROP TABLE IF EXISTS t_pg_skew".to_string(),
        "CREATE TABLE t_pg (user_id BIGINT PRIMARY KEY, v INT NOT NULL, s VARCHAR(8))".into(),
        "CREATE TABLE t_pg_skew (k INT PRIMARY KEY, v INT)".into(),
    ];
    for from in (-10_000..10_000).step_by(1000) {
        let rows: Vec<String> = (from..from + 1000)
            .map(|k: i64| format!("({k}, {}, 's{}')", (k * 7919).rem_euclid(1000), k % 13))
            .collect();
        setup.push(format!("INSERT INTO t_pg VALUES {}", rows.join(", ")));
    }
    let rows: Vec<String> = (1..=6000).map(|k| format!("({k}, {})", k % 10)).collect();
    setup.push(format!("INSERT INTO t_pg_skew VALUES {}", rows.join(", ")));
    for sql in &setup {
        must(&mut pair.p, sql, "the proxy").await;
        must(&mut pair.r, sql, "the reference").await;
    }
    let mut wrong = Vec::new();
    for prepared in [false, true] {
        for (sql, most) in CASES {
            let before = proxy.shared.metrics.rows_merged.get();
            let (want, got) = pair.both(sql, prepared).await;
            let read = proxy.shared.metrics.rows_merged.get() - before;
            let how = if prepared { "prepared" } else { "text" };
            match judge(&want, &got, &Check::exact(Compare::Ordered)) {
                Outcome::Matched => {}
                other => wrong.push(format!("{how} {sql}: {other:?}")),
            }
            if read > *most {
                wrong.push(format!("{how} {sql}: {read} rows read from the nodes"));
            }
        }
    }
    // Bound values in the LIMIT and the WHERE.
    let sql = "SELECT user_id, s FROM t_pg WHERE v > ? ORDER BY user_id DESC LIMIT ?, ?";
    for (v, off, n) in [(100, 5_000, 20), (990, 2_000, 3), (-1, 19_000, 10)] {
        let before = proxy.shared.metrics.rows_merged.get();
        let got: Vec<(i64, Option<String>)> =
            pair.p.exec(sql, (v, off, n)).await.expect("proxy, bound");
        let read = proxy.shared.metrics.rows_merged.get() - before;
        let want: Vec<(i64, Option<String>)> = pair
            .r
            .exec(sql, (v, off, n))
            .await
            .expect("reference, bound");
        if got != want || read > 1_000 {
            wrong.push(format!(
                "bound ({v}, {off}, {n}): {got:?} against {want:?}, {read} rows read"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
