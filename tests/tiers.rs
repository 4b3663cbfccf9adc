//! Range, directory and time_tier tables and generated keys on real MariaDB nodes.
//!
//! Cluster nodes 0..=2 are the proxy's `ds0..ds2` (hot / warm / cold for time tiers); node 3
//! is a plain MariaDB holding every row once, the reference each answer is compared with.

mod common;

use chrono::{Duration, NaiveDate};
use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Value};

const NODES: usize = 4;
const REFERENCE: usize = 3;

fn cluster() -> &'static Cluster {
    Cluster::shared(NODES)
}

fn day(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("date")
}

/// Noon UTC of a day, in Unix milliseconds.
fn noon_ms(d: NaiveDate) -> i64 {
    d.and_hms_opt(12, 0, 0)
        .map(|t| t.and_utc().timestamp_millis())
        .expect("time")
}

fn show(v: &Value) -> String {
    match v {
        Value::NULL => "NULL".into(),
        other => other.as_sql(false),
    }
}

async fn rows(conn: &mut Conn, sql: &str) -> Vec<Vec<String>> {
    let rows: Vec<mysql_async::Row> = conn
        .query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter()
        .map(|r| r.unwrap().iter().map(show).collect())
        .collect()
}

async fn prepared_rows(conn: &mut Conn, sql: &str, params: Vec<Value>) -> Vec<Vec<String>> {
    let rows: Vec<mysql_async::Row> = conn
        .exec(sql, params)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter()
        .map(|r| r.unwrap().iter().map(show).collect())
        .collect()
}

async fn direct(i: usize) -> Conn {
    cluster()
        .direct(i)
        .get_conn()
        .await
        .expect("direct connection")
}

/// Where a row of the tier test lives.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Place {
    /// On one tier.
    Only(usize),
    /// In an overlap window: imported into the older tier, not yet deleted from the newer.
    Both(usize, usize),
}

const TXN_DDL: &str =
    "CREATE TABLE t_txn (id BIGINT NOT NULL PRIMARY KEY, txn_date DATETIME NULL, \
    account INT NOT NULL, amount DECIMAL(12,2) NOT NULL, serial_no VARCHAR(20) NOT NULL, \
    KEY (txn_date), KEY (serial_no))";

/// Today is 2025-06-30: hot holds [2024-06-30, ..) with a 3-day window from 2024-06-27, warm
/// [2020-01-01, 2024-06-30) with a 2-day window from 2019-12-30, cold the rest and NULL dates.
fn tier_rules() -> String {
    r#"
[tables.t_txn]
rule = "time_tier"
column = "txn_date"
primary_key = ["id"]
tiers = [
  { name = "hot", node = "ds0", lower = "now-365d", overlap_days = 3 },
  { name = "warm", node = "ds1", lower = "2020-01-01", overlap_days = 2 },
  { name = "cold", node = "ds2" },
]
poll_columns = ["serial_no"]
poll_unique = true
poll_retries = 2
poll_retry_ms = 50
"#
    .to_string()
}

/// The rows: dates spread over 2018-2025, extra rows in both windows in each ETL state, and
/// a few NULL dates.
fn txn_rows() -> Vec<(i64, Option<String>, i64, String, Place)> {
    let hot = day("2024-06-30");
    let warm = day("2020-01-01");
    let start = day("2018-06-01");
    let mut out = Vec::new();
    let place = |d: NaiveDate, i: i64| -> Place {
        if d >= hot {
            Place::Only(0)
        } else if d >= hot - Duration::days(3) {
            // ETL late (still on hot only), imported (both), moved (warm only).
            match i % 3 {
                0 => Place::Only(0),
                1 => Place::Both(0, 1),
                _ => Place::Only(1),
            }
        } else if d >= warm {
            Place::Only(1)
        } else if d >= warm - Duration::days(2) {
            match i % 3 {
                0 => Place::Only(1),
                1 => Place::Both(1, 2),
                _ => Place::Only(2),
            }
        } else {
            Place::Only(2)
        }
    };
    let mut id = 0i64;
    for k in 0..1500i64 {
        id += 1;
        let d = start + Duration::days((k * 7 + k % 5) % 2580);
        let secs = (k * 3727) % 86_400;
        let ts = format!(
            "{d} {:02}:{:02}:{:02}",
            secs / 3600,
            (secs / 60) % 60,
            secs % 60
        );
        out.push((
            id,
            Some(ts),
            1 + k % 7,
            format!("{}.{:02}", k % 900, k % 100),
            place(d, id),
        ));
    }
    // Dense windows: 60 rows in each, every state.
    for (lo, n) in [
        (hot - Duration::days(3), 60),
        (warm - Duration::days(2), 60),
    ] {
        for k in 0..n {
            id += 1;
            let d = lo + Duration::days(k % 3);
            let ts = format!("{d} {:02}:{:02}:00", (k * 5) % 24, (k * 7) % 60);
            out.push((id, Some(ts), 1 + k % 7, format!("{k}.50"), place(d, id)));
        }
    }
    for k in 0..5 {
        id += 1;
        out.push((id, None, 1 + k, "1.00".into(), Place::Only(2)));
    }
    out
}

async fn load_txn(proxy: &Proxy) -> Vec<(i64, Option<String>, i64, String, Place)> {
    let mut conn = proxy.conn().await;
    conn.query_drop("DROP TABLE IF EXISTS t_txn")
        .await
        .expect("drop");
    conn.query_drop(TXN_DDL)
        .await
        .expect("create through the proxy");
    let mut reference = direct(REFERENCE).await;
    reference
        .query_drop("DROP TABLE IF EXISTS t_txn")
        .await
        .expect("drop");
    reference
        .query_drop(TXN_DDL)
        .await
        .expect("create on the reference");
    let data = txn_rows();
    let mut per_node: Vec<Vec<String>> = vec![Vec::new(); 3];
    let mut all = Vec::new();
    for (id, ts, account, amount, place) in &data {
        let d = ts
            .as_ref()
            .map(|t| format!("'{t}'"))
            .unwrap_or_else(|| "NULL".into());
        let row = format!("({id}, {d}, {account}, {amount}, 'S{id}')");
        match place {
            Place::Only(n) => per_node[*n].push(row.clone()),
            Place::Both(a, b) => {
                per_node[*a].push(row.clone());
                per_node[*b].push(row.clone());
            }
        }
        all.push(row);
    }
    let insert = |rows: &[String]| {
        format!(
            "INSERT INTO t_txn (id, txn_date, account, amount, serial_no) VALUES {}",
            rows.join(", ")
        )
    };
    for (n, rows) in per_node.iter().enumerate() {
        let mut c = direct(n).await;
        c.query_drop(insert(rows)).await.expect("load a tier");
    }
    reference
        .query_drop(insert(&all))
        .await
        .expect("load the reference");
    data
}

#[tokio::test]
async fn time_tiers_answer_every_row_once_in_every_etl_state() {
    let c = cluster();
    let proxy = start_proxy_on(c, &[0, 1, 2], &tier_rules());
    proxy.shared.clock.set_now_ms(noon_ms(day("2025-06-30")));
    let data = load_txn(&proxy).await;
    let mut conn = proxy.conn().await;
    let mut reference = direct(REFERENCE).await;

    let same = |what: &str, got: &Vec<Vec<String>>, want: &Vec<Vec<String>>| {
        assert!(
            got == want,
            "{what}: the proxy answered {} rows, the reference {}; first difference at {:?}",
            got.len(),
            want.len(),
            got.iter().zip(want.iter()).position(|(a, b)| a != b)
        );
    };
    let queries = [
        "SELECT * FROM t_txn ORDER BY id",
        "SELECT COUNT(*), SUM(amount), MIN(txn_date), MAX(txn_date) FROM t_txn",
        "SELECT account, COUNT(*), SUM(amount), AVG(amount) FROM t_txn GROUP BY account ORDER BY account",
        "SELECT YEAR(txn_date) AS y, MONTH(txn_date) AS m, COUNT(*), SUM(amount) FROM t_txn GROUP BY y, m ORDER BY y, m",
        // The hot/warm window alone, and ranges that cross it.
        "SELECT id, txn_date FROM t_txn WHERE txn_date >= '2024-06-27' AND txn_date < '2024-06-30' ORDER BY id",
        "SELECT COUNT(*) FROM t_txn WHERE txn_date >= '2024-06-01' AND txn_date < '2024-07-15'",
        "SELECT COUNT(*), SUM(amount) FROM t_txn WHERE txn_date BETWEEN '2019-12-01' AND '2020-02-01'",
        "SELECT id FROM t_txn WHERE txn_date < '2020-01-01' ORDER BY id",
        "SELECT COUNT(*) FROM t_txn WHERE txn_date IS NULL",
        "SELECT DISTINCT account FROM t_txn WHERE txn_date >= '2024-06-28' ORDER BY account",
        "SELECT id, amount FROM t_txn ORDER BY amount DESC, id LIMIT 30",
    ];
    for q in queries {
        let got = rows(&mut conn, q).await;
        let want = rows(&mut reference, q).await;
        same(q, &got, &want);
    }

    // Rows in each window and state come back exactly once (a fixed split at
    // bound - overlap would lose the ones an on-time ETL already moved).
    let ids: Vec<Vec<String>> = rows(&mut conn, "SELECT id FROM t_txn ORDER BY id").await;
    assert_eq!(ids.len(), data.len());
    for state in [
        Place::Only(0),
        Place::Both(0, 1),
        Place::Only(1),
        Place::Both(1, 2),
    ] {
        let n = data.iter().filter(|r| r.4 == state).count();
        assert!(n > 10, "the data has rows {state:?}");
    }

    // Every page, both directions, including those spanning tiers and windows.
    for (order, step) in [("DESC", 97u64), ("ASC", 113)] {
        let total = data.len() as u64;
        let mut o = 0;
        while o <= total {
            let q = format!(
                "SELECT id, txn_date, amount FROM t_txn ORDER BY txn_date {order}, id {order} LIMIT {o}, {step}"
            );
            same(
                &q,
                &rows(&mut conn, &q).await,
                &rows(&mut reference, &q).await,
            );
            o += step;
        }
    }
    // With the query's own WHERE, and prepared.
    for o in [0u64, 40, 180, 215, 500] {
        let q = format!(
            "SELECT id, txn_date FROM t_txn WHERE account = 3 ORDER BY txn_date DESC, id DESC LIMIT {o}, 25"
        );
        same(
            &q,
            &rows(&mut conn, &q).await,
            &rows(&mut reference, &q).await,
        );
        let pq = "SELECT id, txn_date FROM t_txn WHERE account = ? ORDER BY txn_date DESC, id DESC LIMIT ?, ?";
        let params = vec![Value::Int(3), Value::Int(o as i64), Value::Int(25)];
        same(
            pq,
            &prepared_rows(&mut conn, pq, params.clone()).await,
            &prepared_rows(&mut reference, pq, params).await,
        );
    }

    // A jump page deep in the data costs counts, not rows.
    let before = proxy.shared.metrics.rows_merged.get();
    let q = "SELECT id FROM t_txn ORDER BY txn_date DESC, id DESC LIMIT 1400, 20";
    same(q, &rows(&mut conn, q).await, &rows(&mut reference, q).await);
    let read = proxy.shared.metrics.rows_merged.get() - before;
    assert!(read <= 20, "the jump page read {read} rows from the nodes");
    let before = proxy.shared.metrics.rows_merged.get();
    let q = "SELECT id FROM t_txn ORDER BY amount DESC, id LIMIT 1400, 20";
    same(q, &rows(&mut conn, q).await, &rows(&mut reference, q).await);
    let plain = proxy.shared.metrics.rows_merged.get() - before;
    assert!(plain > 1400, "the ordered merge read {plain} rows");

    // Polling by a unique serial: newest tier first, one row whatever the row's state.
    for (id, _, _, _, place) in data.iter().filter(|r| r.0 % 37 == 0 || r.0 > 1500) {
        let q = format!("SELECT id, txn_date, amount FROM t_txn WHERE serial_no = 'S{id}'");
        let got = rows(&mut conn, &q).await;
        assert_eq!(got.len(), 1, "{q} ({place:?})");
        same(&q, &got, &rows(&mut reference, &q).await);
    }
    let q = "SELECT id FROM t_txn WHERE serial_no = 'nope'";
    assert!(rows(&mut conn, q).await.is_empty());

    // An update by serial reaches every copy (hot's and warm's in a window); affected rows
    // are summed over the tiers.
    let (both_id, ..) = data
        .iter()
        .find(|r| r.4 == Place::Both(0, 1))
        .expect("a row on both tiers");
    let r = conn
        .query_iter(format!(
            "UPDATE t_txn SET amount = amount + 1 WHERE serial_no = 'S{both_id}'"
        ))
        .await
        .expect("update by serial");
    assert_eq!(r.affected_rows(), 2);
    drop(r);
    for n in [0, 1] {
        let mut d = direct(n).await;
        let v: Option<String> = d
            .query_first(format!("SELECT amount FROM t_txn WHERE id = {both_id}"))
            .await
            .expect("read a tier");
        let orig = &data.iter().find(|r| r.0 == *both_id).expect("row").3;
        let want = format!("{:.2}", orig.parse::<f64>().expect("amount") + 1.0);
        assert_eq!(v.as_deref(), Some(want.as_str()), "tier ds{n}");
    }

    // Inserts go to the tier of their date.
    conn.query_drop(
        "INSERT INTO t_txn (id, txn_date, account, amount, serial_no) VALUES \
         (90001, '2025-06-01 10:00:00', 1, 1.00, 'N1'), (90002, '2022-01-01', 1, 1.00, 'N2'), \
         (90003, '2010-01-01', 1, 1.00, 'N3')",
    )
    .await
    .expect("insert by date");
    for (n, id) in [(0, 90001), (1, 90002), (2, 90003)] {
        let mut d = direct(n).await;
        let found: Option<i64> = d
            .query_first(format!("SELECT id FROM t_txn WHERE id = {id}"))
            .await
            .expect("read");
        assert_eq!(found, Some(id), "row {id} on ds{n}");
    }
    let err = conn
        .query_drop("INSERT INTO t_txn (id, txn_date, account, amount, serial_no) VALUES (90004, NOW(), 1, 1, 'x')")
        .await;
    expect_code(err, 1235, "an INSERT whose date is not a constant");
}

#[tokio::test]
async fn relative_bounds_move_with_the_clock() {
    let c = cluster();
    let rules = r#"
[tables.t_clock]
rule = "time_tier"
column = "d"
tiers = [
  { name = "hot", node = "ds0", lower = "now-10d" },
  { name = "cold", node = "ds1" },
]
"#;
    let proxy = start_proxy_on(c, &[0, 1, 2], rules);
    let mut conn = proxy.conn().await;
    conn.query_drop("DROP TABLE IF EXISTS t_clock")
        .await
        .expect("drop");
    conn.query_drop("CREATE TABLE t_clock (id INT PRIMARY KEY, d DATE NOT NULL)")
        .await
        .expect("create");
    proxy.shared.clock.set_now_ms(noon_ms(day("2025-01-20")));
    conn.query_drop("INSERT INTO t_clock (id, d) VALUES (1, '2025-01-15')")
        .await
        .expect("insert");
    proxy.shared.clock.set_now_ms(noon_ms(day("2025-02-20")));
    conn.query_drop("INSERT INTO t_clock (id, d) VALUES (2, '2025-01-15')")
        .await
        .expect("insert");
    let on = |n: usize| async move {
        let mut d = direct(n).await;
        let ids: Vec<i64> = d
            .query("SELECT id FROM t_clock ORDER BY id")
            .await
            .expect("read");
        ids
    };
    // The same date was hot in January and cold a month later.
    assert_eq!(on(0).await, vec![1]);
    assert_eq!(on(1).await, vec![2]);
}

#[tokio::test]
async fn range_and_directory_rows_live_where_the_rules_say() {
    let c = cluster();
    let layout = [(0u16, 511u16), (512, 1023)];
    let rules = format!(
        r#"
[tables.t_rng]
rule = "range"
column = "id"
ranges = [{{ below = 1000, node = "ds0" }}, {{ below = 2000, node = "ds1" }}, {{ node = "ds2" }}]

[tables.t_dir]
rule = "directory"
column = "tenant_id"
entries = {{ "42" = "ds2" }}
lookup = {{ node = "ds0", table = "tenant_dir", key_column = "tenant_id", node_column = "node", cache_size = 100, ttl_secs = 60 }}
fallback = {{ rule = "hash_slot", slots = {} }}
"#,
        slots_toml(&layout)
    );
    let mut d0 = direct(0).await;
    d0.query_drop("DROP TABLE IF EXISTS tenant_dir")
        .await
        .expect("drop");
    d0.query_drop("CREATE TABLE tenant_dir (tenant_id INT PRIMARY KEY, node VARCHAR(16) NOT NULL)")
        .await
        .expect("lookup table");
    d0.query_drop("INSERT INTO tenant_dir VALUES (7, 'ds1'), (8, 'ds2')")
        .await
        .expect("lookup rows");
    let proxy = start_proxy_on(c, &[0, 1, 2], &rules);
    let mut conn = proxy.conn().await;
    let mut reference = direct(REFERENCE).await;
    for ddl in [
        "DROP TABLE IF EXISTS t_rng",
        "CREATE TABLE t_rng (id INT PRIMARY KEY, v VARCHAR(10) NOT NULL)",
        "DROP TABLE IF EXISTS t_dir",
        "CREATE TABLE t_dir (id INT PRIMARY KEY, tenant_id INT NOT NULL, v INT NOT NULL)",
    ] {
        conn.query_drop(ddl).await.expect(ddl);
        reference.query_drop(ddl).await.expect(ddl);
    }
    let rng_rows: Vec<String> = (0..60).map(|i| format!("({}, 'v{i}')", i * 53)).collect();
    let ins = format!("INSERT INTO t_rng (id, v) VALUES {}", rng_rows.join(", "));
    conn.query_drop(&ins).await.expect("insert ranges");
    reference.query_drop(&ins).await.expect("insert reference");
    for (n, lo, hi) in [
        (0usize, 0i64, 1000i64),
        (1, 1000, 2000),
        (2, 2000, i64::MAX),
    ] {
        let mut d = direct(n).await;
        let ids: Vec<i64> = d.query("SELECT id FROM t_rng").await.expect("read");
        assert!(!ids.is_empty());
        assert!(
            ids.iter().all(|i| *i >= lo && *i < hi),
            "ds{n} holds {ids:?}"
        );
    }
    for q in [
        "SELECT * FROM t_rng WHERE id BETWEEN 900 AND 2100 ORDER BY id",
        "SELECT * FROM t_rng WHERE id < 300 OR id >= 3000 ORDER BY id",
        "SELECT COUNT(*), SUM(id) FROM t_rng WHERE id > 1000",
        "SELECT * FROM t_rng WHERE id IN (53, 1007, 2120, 5) ORDER BY id",
    ] {
        assert_eq!(
            rows(&mut conn, q).await,
            rows(&mut reference, q).await,
            "{q}"
        );
    }

    // Directory: 42 by entry, 7 and 8 by the lookup table, the rest by the fallback.
    let tenants = [42i64, 7, 8, 1, 2, 3, 4, 5, 6, 9, 10, 11];
    let dir_rows: Vec<String> = tenants
        .iter()
        .enumerate()
        .map(|(i, t)| format!("({i}, {t}, {})", i * 10))
        .collect();
    let ins = format!(
        "INSERT INTO t_dir (id, tenant_id, v) VALUES {}",
        dir_rows.join(", ")
    );
    conn.query_drop(&ins).await.expect("insert directory rows");
    reference.query_drop(&ins).await.expect("insert reference");
    for t in tenants {
        let want = match t {
            42 => 2,
            7 => 1,
            8 => 2,
            other => node_of_key(&layout, other),
        };
        for n in 0..3 {
            let mut d = direct(n).await;
            let count: Option<i64> = d
                .query_first(format!("SELECT COUNT(*) FROM t_dir WHERE tenant_id = {t}"))
                .await
                .expect("count");
            assert_eq!(count, Some(i64::from(n == want)), "tenant {t} on ds{n}");
        }
        let q = format!("SELECT * FROM t_dir WHERE tenant_id = {t}");
        assert_eq!(
            rows(&mut conn, &q).await,
            rows(&mut reference, &q).await,
            "{q}"
        );
    }
    let q = "SELECT tenant_id, SUM(v) FROM t_dir GROUP BY tenant_id ORDER BY tenant_id";
    assert_eq!(
        rows(&mut conn, q).await,
        rows(&mut reference, q).await,
        "{q}"
    );

    // A lookup table that cannot be read fails the statement; it never falls back.
    d0.query_drop("RENAME TABLE tenant_dir TO tenant_dir_away")
        .await
        .expect("hide the lookup table");
    let r = conn
        .query_drop("SELECT * FROM t_dir WHERE tenant_id = 12345")
        .await;
    let msg = expect_code(r, 1105, "a lookup that fails");
    assert!(msg.contains("lookup table"), "{msg}");
    // Cached keys still route.
    let q = "SELECT * FROM t_dir WHERE tenant_id = 7";
    assert_eq!(rows(&mut conn, q).await, rows(&mut reference, q).await);
    d0.query_drop("RENAME TABLE tenant_dir_away TO tenant_dir")
        .await
        .expect("restore the lookup table");
    let r = conn
        .query_drop("SELECT * FROM t_dir WHERE tenant_id = 12345")
        .await;
    assert!(r.is_ok(), "{r:?}");
}

#[tokio::test]
async fn generated_keys_carry_the_slot_and_refuse_a_clock_that_steps_back() {
    let c = cluster();
    let layout = [(0u16, 511u16), (512, 1023)];
    let rules = format!(
        "{}key_generator = {{ column = \"order_id\", kind = \"snowflake\", epoch = \"2024-01-01\" }}\n",
        hash_slot_table("t_kg", "user_id", &layout)
    );
    let proxy = start_proxy_on(c, &[0, 1, 2], &rules);
    let mut conn = proxy.conn().await;
    conn.query_drop("DROP TABLE IF EXISTS t_kg")
        .await
        .expect("drop");
    conn.query_drop(
        "CREATE TABLE t_kg (order_id BIGINT NOT NULL PRIMARY KEY, user_id INT NOT NULL, note VARCHAR(10))",
    )
    .await
    .expect("create");
    let r = conn
        .query_iter("INSERT INTO t_kg (user_id, note) VALUES (5, 'a')")
        .await
        .expect("insert");
    let reported = r.last_insert_id().expect("an insert id");
    drop(r);
    let last: Option<u64> = conn
        .query_first("SELECT LAST_INSERT_ID()")
        .await
        .expect("LAST_INSERT_ID()");
    assert_eq!(last, Some(reported));
    let slot = u64::from(shardproxy::routing::slot::slot_of(&Value::Int(5)).expect("slot"));
    assert_eq!((reported >> 12) & 0x3FF, slot);
    let stored: Option<u64> = conn
        .query_first("SELECT order_id FROM t_kg WHERE user_id = 5")
        .await
        .expect("read back");
    assert_eq!(stored, Some(reported));

    // A multi-row insert over both nodes: distinct ids, LAST_INSERT_ID() is the first row's.
    let a = key_on_node(&layout, 0);
    let b = key_on_node(&layout, 1);
    conn.query_drop(format!(
        "INSERT INTO t_kg (user_id, note) VALUES ({b}, 'x'), ({a}, 'y'), ({b}, 'z')"
    ))
    .await
    .expect("multi-row insert");
    let ids: Vec<(u64, String)> = conn
        .query("SELECT order_id, note FROM t_kg WHERE note IN ('x', 'y', 'z') ORDER BY note")
        .await
        .expect("read ids");
    assert_eq!(ids.len(), 3);
    let mut distinct: Vec<u64> = ids.iter().map(|r| r.0).collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 3);
    let last: Option<u64> = conn
        .query_first("SELECT LAST_INSERT_ID()")
        .await
        .expect("LAST_INSERT_ID()");
    assert_eq!(last, Some(ids[0].0), "the first row's id");

    // The clock steps back: refused with an error and a metric, never a repeated id.
    proxy.shared.clock.shift_ms(-60_000);
    let r = conn
        .query_drop("INSERT INTO t_kg (user_id, note) VALUES (6, 'back')")
        .await;
    let msg = expect_code(r, 1105, "an id while the clock is behind");
    assert!(msg.contains("clock"), "{msg}");
    assert!(
        proxy
            .shared
            .metrics
            .keygen_refused
            .with_label_values(&["clock_back"])
            .get()
            >= 1
    );
    proxy.shared.clock.shift_ms(61_000);
    conn.query_drop("INSERT INTO t_kg (user_id, note) VALUES (6, 'fwd')")
        .await
        .expect("ids again once the clock passed the last one");
}

#[tokio::test]
async fn a_tier_write_that_fails_transiently_is_retried() {
    let c = cluster();
    let rules = r#"
[tables.t_retry]
rule = "time_tier"
column = "d"
tiers = [
  { name = "hot", node = "ds0", lower = "2025-01-01" },
  { name = "cold", node = "ds1" },
]
poll_columns = ["serial_no"]
poll_retries = 3
poll_retry_ms = 100
"#;
    let proxy = start_proxy_on(c, &[0, 1, 2], rules);
    let mut conn = proxy.conn().await;
    // Lock waits give up after a second: the session's own SET, which the proxy replays on
    // every node connection the session borrows (a GLOBAL one leaked into the tests running
    // beside this one, and stayed when it failed).
    conn.query_drop("SET SESSION innodb_lock_wait_timeout = 1")
        .await
        .expect("set the lock wait timeout");
    conn.query_drop("DROP TABLE IF EXISTS t_retry")
        .await
        .expect("drop");
    conn.query_drop(
        "CREATE TABLE t_retry (id INT PRIMARY KEY, d DATE NOT NULL, serial_no VARCHAR(10) NOT NULL, n INT NOT NULL)",
    )
    .await
    .expect("create");
    conn.query_drop(
        "INSERT INTO t_retry (id, d, serial_no, n) VALUES (1, '2025-03-01', 'A', 0), (2, '2020-03-01', 'B', 0)",
    )
    .await
    .expect("insert");
    // Another client holds the cold row's lock until the proxy has retried the cold part:
    // the first attempt there times out (1205), a retry gets through.
    let mut holder = cluster().direct(1).get_conn().await.expect("holder");
    holder.query_drop("BEGIN").await.expect("begin");
    holder
        .query_drop("SELECT * FROM t_retry WHERE id = 2 FOR UPDATE")
        .await
        .expect("lock");
    let shared = proxy.shared.clone();
    let release = tokio::spawn(async move {
        let retries = || {
            shared
                .metrics
                .tier_statements
                .with_label_values(&["write_retry"])
                .get()
        };
        let start = std::time::Instant::now();
        while retries() == 0 && start.elapsed() < std::time::Duration::from_secs(30) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        holder.query_drop("COMMIT").await.expect("commit");
    });
    let r = conn
        .query_iter("UPDATE t_retry SET n = n + 1 WHERE serial_no IN ('A', 'B')")
        .await
        .expect("the retried write succeeds");
    assert_eq!(r.affected_rows(), 2);
    drop(r);
    let retries = proxy
        .shared
        .metrics
        .tier_statements
        .with_label_values(&["write_retry"])
        .get();
    assert!(
        retries >= 1,
        "the cold tier's write was retried ({retries})"
    );
    release.await.expect("release");
    let n: Vec<(i64, i64)> = conn
        .query("SELECT id, n FROM t_retry ORDER BY id")
        .await
        .expect("read");
    assert_eq!(n, vec![(1, 1), (2, 1)]);
}
