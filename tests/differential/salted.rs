//! A salted key (`routing/salt.rs`): one tenant's rows spread over its buckets' nodes by a
//! second column, written the way an application writes (no column list, prepared, upserts,
//! changes of the salt column), and every read by the tenant answering like one MariaDB.

use mysql_async::prelude::Queryable;

use crate::common::{hash_slot_table, slots_toml, start_proxy_on};
use crate::judge::{judge, must, Check, Compare, Outcome, Pair};
use crate::{cluster, ER_NOT_SUPPORTED_YET, L, SHARDS};

/// The salted tenant: its rows spread over ds0-ds3 by `id`, 8 buckets.
const HOT: i64 = 7;

const READS: &[&str] = &[
    "SELECT id, tenant_id, v, note FROM s_events WHERE tenant_id = 7 ORDER BY id",
    "SELECT COUNT(*), SUM(v), MIN(id), MAX(id) FROM s_events WHERE tenant_id = 7",
    "SELECT v % 5, COUNT(*), SUM(id) FROM s_events WHERE tenant_id = 7 GROUP BY v % 5 ORDER BY 1",
    "SELECT id, v FROM s_events WHERE tenant_id = 7 ORDER BY v DESC, id LIMIT 5",
    "SELECT id, v FROM s_events WHERE tenant_id = 7 ORDER BY id LIMIT 10, 5",
    "SELECT id, note FROM s_events WHERE tenant_id = 7 AND id = 123",
    "SELECT id, note FROM s_events WHERE tenant_id = 7 AND id IN (5, 77, 123, 250, 9999) ORDER BY id",
    "SELECT COUNT(DISTINCT note) FROM s_events WHERE tenant_id = 7 AND id BETWEEN 50 AND 150",
    "SELECT tenant_id, COUNT(*), SUM(v) FROM s_events GROUP BY tenant_id ORDER BY tenant_id",
    "SELECT tenant_id, COUNT(*) FROM s_events WHERE tenant_id IN (3, 7) GROUP BY tenant_id ORDER BY tenant_id",
    "SELECT e.id, t.name FROM s_events e JOIN s_tenants t ON t.tenant_id = e.tenant_id \
     WHERE e.tenant_id = 7 AND e.v > 90 ORDER BY e.id",
    "SELECT t.name, COUNT(*) FROM s_tenants t JOIN s_events e ON e.tenant_id = t.tenant_id \
     GROUP BY t.name ORDER BY t.name",
    "SELECT a.id, b.id FROM s_events a JOIN s_events b ON a.tenant_id = b.tenant_id AND b.id = a.id + 1 \
     WHERE a.tenant_id = 7 ORDER BY a.id LIMIT 20",
];

/// The writes, each run on the proxy and on the reference, with the same outcome.
const WRITES: &[&str] = &[
    "UPDATE s_events SET v = v + 1 WHERE tenant_id = 7 AND v > 50",
    "UPDATE s_events SET note = 'changed' WHERE tenant_id = 7 AND id = 40",
    "DELETE FROM s_events WHERE tenant_id = 7 AND id IN (41, 42, 43)",
    "DELETE FROM s_events WHERE tenant_id = 7 AND v = 3",
    "INSERT INTO s_events VALUES (1001, 7, 1, 'new'), (1002, 7, 2, 'new'), (1003, 3, 3, 'new')",
    "INSERT INTO s_events (id, tenant_id, v, note) VALUES (1004, 7, 4, 'x') \
     ON DUPLICATE KEY UPDATE v = v + 100",
    "INSERT INTO s_events (id, tenant_id, v, note) VALUES (1004, 7, 4, 'x') \
     ON DUPLICATE KEY UPDATE v = v + 100",
    "REPLACE INTO s_events VALUES (1001, 7, 11, 'replaced')",
    // The salt column changes: the row moves to its new bucket's node.
    "UPDATE s_events SET id = id + 5000 WHERE tenant_id = 7 AND id BETWEEN 60 AND 70",
    "UPDATE s_events SET id = 3000 WHERE tenant_id = 7 AND id = 1002",
];

#[tokio::test]
async fn a_salted_tenants_rows_spread_over_its_buckets_and_answer_like_one_mariadb() {
    let c = cluster();
    let salted = format!(
        "[tables.s_events]\nrule = \"hash_slot\"\ncolumn = \"tenant_id\"\nslots = {}\n\
         salt = {{ by = \"id\", buckets = 8 }}\n\
         salted = {{ \"{HOT}\" = [\"ds0\", \"ds1\", \"ds2\", \"ds3\"] }}\n\n",
        slots_toml(&L)
    );
    let rules = salted + &hash_slot_table("s_tenants", "tenant_id", &L);
    let proxy = start_proxy_on(c, &SHARDS, &rules);
    let mut pair = Pair::new(&proxy, c).await;
    let mut setup = vec![
        "DROP TABLE IF EXISTS s_events".to_string(),
        "DROP TABLE IF EXISTS s_tenants".to_string(),
        "CREATE TABLE s_events (id BIGINT PRIMARY KEY, tenant_id INT NOT NULL, v INT, \
         note VARCHAR(20), KEY (tenant_id))"
            .into(),
        "CREATE TABLE s_tenants (tenant_id INT PRIMARY KEY, name VARCHAR(20))".into(),
        "INSERT INTO s_tenants VALUES (1, 'one'), (3, 'three'), (7, 'hot'), (9, 'nine')".into(),
    ];
    // Half the rows are the hot tenant's.
    let rows: Vec<String> = (1..=400i64)
        .map(|id| {
            let tenant = if id % 2 == 0 {
                HOT
            } else {
                [1, 3, 9][(id % 3) as usize]
            };
            format!("({id}, {tenant}, {}, 'n{}')", id % 97, id % 7)
        })
        .collect();
    for chunk in rows.chunks(100) {
        setup.push(format!("INSERT INTO s_events VALUES {}", chunk.join(", ")));
    }
    for sql in &setup {
        must(&mut pair.p, sql, "the proxy").await;
        must(&mut pair.r, sql, "the reference").await;
    }

    // The hot tenant's rows are on every node, each where its bucket says.
    let mut per_node = Vec::new();
    for i in SHARDS {
        let mut n = c.direct(i).get_conn().await.expect("a node");
        let ids: Vec<i64> = n
            .query(format!(
                "SELECT id FROM s_events WHERE tenant_id = {HOT} AND CRC32(id) % 8 DIV 2 = {i}"
            ))
            .await
            .expect("read a node");
        let all: i64 = n
            .query_first(format!(
                "SELECT COUNT(*) FROM s_events WHERE tenant_id = {HOT}"
            ))
            .await
            .expect("count on a node")
            .unwrap_or(0);
        assert_eq!(all, ids.len() as i64, "ds{i} holds rows of other buckets");
        per_node.push(all);
    }
    assert!(
        per_node.iter().all(|n| *n > 20),
        "rows per node: {per_node:?}"
    );
    assert_eq!(per_node.iter().sum::<i64>(), 200);

    let mut wrong = Vec::new();
    let check = Check::exact(Compare::Ordered);
    for round in ["loaded", "written"] {
        for prepared in [false, true] {
            for sql in READS {
                let (want, got) = pair.both(sql, prepared).await;
                match judge(&want, &got, &check) {
                    Outcome::Matched => {}
                    other => wrong.push(format!("{round} prepared={prepared} {sql}: {other:?}")),
                }
            }
        }
        if round == "written" {
            break;
        }
        for sql in WRITES {
            let (want, got) = pair.both(sql, false).await;
            match judge(&want, &got, &Check::exact(Compare::Ordered)) {
                Outcome::Matched => {}
                other => wrong.push(format!("write {sql}: {other:?}")),
            }
            let (a, b) = (pair.p.affected_rows(), pair.r.affected_rows());
            if a != b {
                wrong.push(format!("write {sql}: {a} rows affected, the reference {b}"));
            }
        }
        // Prepared writes of the hot tenant, as a driver sends them.
        for (id, v) in [(2001i64, 5i64), (2002, 6), (2003, 7), (2004, 8)] {
            let sql = "INSERT INTO s_events (id, tenant_id, v, note) VALUES (?, ?, ?, 'p')";
            pair.p
                .exec_drop(sql, (id, HOT, v))
                .await
                .expect("prepared insert, proxy");
            pair.r
                .exec_drop(sql, (id, HOT, v))
                .await
                .expect("prepared insert, reference");
        }
        let sql = "UPDATE s_events SET v = ? WHERE tenant_id = ? AND id = ?";
        pair.p
            .exec_drop(sql, (77, HOT, 2003))
            .await
            .expect("prepared update, proxy");
        pair.r
            .exec_drop(sql, (77, HOT, 2003))
            .await
            .expect("prepared update, reference");
        // A driver with autocommit off: writes to several buckets' nodes in one transaction,
        // one rolled back, one committed.
        for end in ["ROLLBACK", "COMMIT"] {
            for sql in [
                "SET autocommit = 0",
                "INSERT INTO s_events VALUES (3001, 7, 1, 'tx'), (3002, 7, 2, 'tx'), (3003, 7, 3, 'tx'), (3004, 7, 4, 'tx')",
                "UPDATE s_events SET v = v + 10 WHERE tenant_id = 7 AND id IN (2001, 2002, 3001)",
                "DELETE FROM s_events WHERE tenant_id = 7 AND id = 2004",
                end,
                "SET autocommit = 1",
            ] {
                must(&mut pair.p, sql, "the proxy").await;
                must(&mut pair.r, sql, "the reference").await;
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );

    // A row of the salted tenant without its salt column has no bucket: refused, not
    // guessed; other tenants need none.
    let r = pair
        .p
        .query_drop("INSERT INTO s_events (tenant_id, v) VALUES (7, 1)")
        .await;
    match r {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!(e.code, ER_NOT_SUPPORTED_YET, "{}", e.message);
            assert!(e.message.contains("salted"), "{}", e.message);
        }
        other => panic!("expected 1235, got {other:?}"),
    }
    // Every row once, on the node its bucket (or slot) names.
    let mut total = 0;
    for i in SHARDS {
        let mut n = c.direct(i).get_conn().await.expect("a node");
        let stray: i64 = n
            .query_first(format!(
                "SELECT COUNT(*) FROM s_events WHERE tenant_id = {HOT} AND CRC32(id) % 8 DIV 2 <> {i}"
            ))
            .await
            .expect("read a node")
            .unwrap_or(-1);
        assert_eq!(
            stray, 0,
            "ds{i} holds rows of other buckets after the writes"
        );
        let count: i64 = n
            .query_first("SELECT COUNT(*) FROM s_events")
            .await
            .expect("count")
            .unwrap_or(0);
        total += count;
    }
    let want: i64 = pair
        .r
        .query_first("SELECT COUNT(*) FROM s_events")
        .await
        .expect("count the reference")
        .unwrap_or(0);
    assert_eq!(total, want, "rows on the nodes against the reference");
}
