//! Global secondary indexes under faults, on real MariaDB nodes: a proxy SIGKILLed in the
//! middle of indexed writes (blind, and stopped by a test hook after PREPARE or after the
//! decision), and a node killed while indexed writes run. After recovery, every write a
//! client saw committed is there and found by its email through the proxy, a read by email
//! never returns a row twice or a row of another email, and the index is exact: one entry
//! per row with an email, on the node its hash names, and no other. Its own binary (its own
//! cluster, whose nodes it kills); the tests run one at a time.
//!
//! The clients keep a model of what they know: a write they got an OK for is committed; a
//! transaction that failed before its COMMIT was sent is not; a statement that needed a node
//! down for the whole of it is not; any other failure may have gone either way, and the row
//! must then be in one of the states the writes could have left. The writers, the reader and
//! that check are `load.rs`.

#[path = "../common/mod.rs"]
mod common;
mod load;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use common::moves::{named_rows, ops};
use common::*;
use load::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Pool, Row};

const L3: [(u16, u16); 3] = [(0, 340), (341, 681), (682, 1023)];

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The longest one statement, or one wait for a condition, may take.
const STEP: Duration = Duration::from_secs(60);
/// Rows loaded before the index is built.
const LOADED: i64 = 3000;
/// Concurrent writer connections.
const WRITERS: usize = 4;

/// Phases of a run: all up, a node being killed, the fault (proxy killed, node down), the
/// node starting, back.
const UP: usize = 0;
const KILLING: usize = 1;
const FAULT: usize = 2;
const STARTING: usize = 3;
const BACK: usize = 4;
const PHASES: usize = 5;

/// The node of an email's index entry (a binary collation: the hash is the value's text).
fn email_node(email: &str) -> usize {
    node_of(
        &L3,
        &mysql_async::Value::Bytes(email.trim_end_matches(' ').as_bytes().to_vec()),
    )
}

fn rules(c: &Cluster) -> String {
    let tables: String = ["t_pk", "t_hold", "t_nk"]
        .iter()
        .map(|t| hash_slot_table(t, "user_id", &L3))
        .collect();
    common::indexes::rules_with_admin(c, &tables)
}

async fn direct(c: &Cluster, i: usize) -> Conn {
    Conn::new(Opts::from_url(&c.url(i)).expect("node URL"))
        .await
        .unwrap_or_else(|e| panic!("connect to node {i} directly: {e}"))
}

/// `table` loaded with `rows` rows (`u<k>@x`, every tenth email NULL) and a unique global
/// index on its email, built by a proxy with an admin port; the rules file the admin
/// interface rewrote (the index public), without its `[admin]` section.
async fn indexed_table(c: &Cluster, table: &str, rows: i64) -> String {
    for i in 0..3 {
        let mut d = direct(c, i).await;
        for t in [table.to_string(), format!("{table}_email_gsi")] {
            d.query_drop(format!("DROP TABLE IF EXISTS {t}"))
                .await
                .expect("drop");
        }
        d.disconnect().await.ok();
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, rules(c)).expect("write the rules");
    let p = start_proxy_watching(&path);
    let mut app = p.conn().await;
    app.query_drop(format!(
        "CREATE TABLE {table} (user_id BIGINT PRIMARY KEY, \
         email VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, name VARCHAR(32))"
    ))
    .await
    .expect("create");
    let keys: Vec<i64> = (1..=rows).collect();
    for chunk in keys.chunks(1000) {
        let values: Vec<String> = chunk
            .iter()
            .map(|k| format!("({k}, {}, 'n{k}')", lit(&preloaded(*k))))
            .collect();
        app.query_drop(format!("INSERT INTO {table} VALUES {}", values.join(", ")))
            .await
            .expect("load");
    }
    let mut admin = ops(p.admin_port.expect("admin")).await;
    let _: Vec<Row> = admin
        .query(format!("CREATE UNIQUE GLOBAL INDEX email ON {table}"))
        .await
        .expect("CREATE GLOBAL INDEX");
    let shown = named_rows(&mut admin, "SHOW GLOBAL INDEXES").await;
    let ix = shown
        .iter()
        .find(|r| r["table"] == table)
        .unwrap_or_else(|| panic!("no index of {table}: {shown:?}"));
    assert_eq!(ix["state"], "public", "{shown:?}");
    exact(c, table).await;
    drop((app, admin, p));
    let text = std::fs::read_to_string(&path).expect("the rewritten rules");
    let mut doc: toml_edit::DocumentMut = text.parse().expect("the rewritten rules parse");
    doc.remove("admin");
    let state = doc["tables"][table]["indexes"]["email"]["state"].as_str();
    let gsi = doc["tables"][format!("{table}_email_gsi").as_str()]["rule"].as_str();
    let text = doc.to_string();
    assert_eq!(
        (state, gsi),
        (Some("public"), Some("hash_slot")),
        "the rules the admin interface wrote:\n{text}"
    );
    text
}

fn preloaded(k: i64) -> Option<String> {
    (k % 10 != 0).then(|| format!("u{k}@x"))
}

/// Every row with an email has exactly one entry, on the node its hash names, pointing at
/// the row's key; no other entry exists.
async fn exact(c: &Cluster, table: &str) {
    let place = |h: &[u8]| node_of(&L3, &mysql_async::Value::Bytes(h.to_vec()));
    let row = |k: i64| node_of_key(&L3, k);
    let index = format!("{table}_email_gsi");
    common::indexes::exact_with(c, 3, table, &index, true, &place, &row).await
}

/// The prepared XA branches of node `i`: (gtrid, bqual).
async fn prepared(c: &Cluster, i: usize) -> Vec<(String, String)> {
    let mut conn = direct(c, i).await;
    let rows: Vec<Row> = conn.query("XA RECOVER").await.expect("XA RECOVER");
    conn.disconnect().await.ok();
    rows.into_iter()
        .map(|r| {
            let g: usize = r.get(1).unwrap_or(0);
            let b: usize = r.get(2).unwrap_or(0);
            let data: Vec<u8> = r.get(3).unwrap_or_default();
            let g = g.min(data.len());
            let text = |s: &[u8]| String::from_utf8_lossy(s).into_owned();
            (text(&data[..g]), text(&data[g..(g + b).min(data.len())]))
        })
        .collect()
}

async fn all_prepared(c: &Cluster) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    for i in 0..3 {
        out.extend(prepared(c, i).await.into_iter().map(|(g, b)| (i, g, b)));
    }
    out
}

/// Waits until no node holds a prepared XA branch (recovery finished them all).
async fn until_none_prepared(c: &Cluster, what: &str) {
    let t0 = Instant::now();
    loop {
        let left = all_prepared(c).await;
        if left.is_empty() {
            eprintln!("{what}: no prepared branch left after {:?}", t0.elapsed());
            return;
        }
        assert!(
            t0.elapsed() < STEP,
            "{what}: branches still prepared {}s later (node, gtrid, decision node): {left:?}",
            STEP.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The committed decision records with outcome `commit`, over every node.
async fn commit_records(c: &Cluster) -> i64 {
    let mut n = 0;
    for i in 0..3 {
        let mut conn = direct(c, i).await;
        let r: Result<Option<i64>, _> = conn
            .query_first("SELECT COUNT(*) FROM shardproxy_xa WHERE outcome = 'commit'")
            .await;
        n += r.ok().flatten().unwrap_or(0);
        conn.disconnect().await.ok();
    }
    n
}

/// Polls `probe` every 50 ms until it answers `Ok`; panics with `what` and its last answer
/// after [`STEP`].
async fn until<T, D, F, Fut>(what: &str, mut probe: F) -> T
where
    D: std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, D>>,
{
    let t0 = Instant::now();
    loop {
        match probe().await {
            Ok(v) => return v,
            Err(last) => assert!(
                t0.elapsed() < STEP,
                "{what}: not within {}s (last seen: {last:?})",
                STEP.as_secs()
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `Ok` when `ok`, else what was seen.
fn seen<D>(ok: bool, d: D) -> Result<(), D> {
    if ok {
        Ok(())
    } else {
        Err(d)
    }
}

async fn blocking(f: impl FnOnce() + Send + 'static) {
    tokio::task::spawn_blocking(f)
        .await
        .expect("a blocking step");
}

/// Four writers (autocommit INSERTs of one and two rows, email changes to a value or NULL,
/// DELETEs, two-statement transactions) and a reader by email through a `shardproxy serve`
/// process, SIGKILLed: twice blind under load, once with every writer's commit held after
/// PREPARE (none of them may survive), once after its decision (all of them must). Each
/// time another process recovers and the rows, the reads by email and the index are
/// checked against what the clients saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test hook: cargo test --features test-hooks (scripts/test.sh)"
)]
async fn a_proxy_killed_under_indexed_writes_loses_no_committed_row_and_leaves_the_index_exact() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(3);
    let table = "t_pk";
    let rules = indexed_table(c, table, LOADED).await;
    let mut writers = Writer::all(table, LOADED);
    // Blind kills under load, then every writer's commit stopped after PREPARE, then after
    // the decision.
    for (round, hold) in [None, None, Some("prepared"), Some("decided")]
        .into_iter()
        .enumerate()
    {
        let what = format!("round {round} (hold: {hold:?})");
        let env: Vec<(&str, &str)> = hold.iter().map(|h| ("SHARDPROXY_XA_HOLD", *h)).collect();
        let mut proxy = ProxyProcess::start(&rules, &env);
        let ctl = Ctl::new(hold.map(|h| h == "decided"), None, &writers);
        let records = commit_records(c).await;
        let load = start_load(writers, process_conn(proxy.pool()), table, &ctl).await;
        match hold {
            None => {
                until(&format!("{what}: 150 writes committed"), || async {
                    let n = ctl.total(&ctl.oks, UP);
                    seen(n >= 150 * (round as u64 + 1), n)
                })
                .await;
                if round == 1 {
                    // Aim the kill at a moment some commit is between its phases.
                    let t0 = Instant::now();
                    while all_prepared(c).await.is_empty() && t0.elapsed() < STEP / 12 {}
                }
            }
            Some("prepared") => {
                until(
                    &format!("{what}: every writer's commit prepared"),
                    || async {
                        let p = all_prepared(c).await;
                        let g: BTreeSet<&String> = p.iter().map(|p| &p.1).collect();
                        seen(g.len() == WRITERS, p.clone())
                    },
                )
                .await
            }
            Some(_) => {
                until(
                    &format!("{what}: every writer's commit decided"),
                    || async {
                        let n = commit_records(c).await - records;
                        seen(n == WRITERS as i64, n)
                    },
                )
                .await
            }
        }
        ctl.phase.store(FAULT, SeqCst);
        proxy.kill();
        let left = all_prepared(c).await;
        let (back, bad) = stop_load(&ctl, load).await;
        writers = back;
        eprintln!(
            "{what}: killed after {} committed writes, {} reads; {} branch(es) left prepared",
            ctl.total(&ctl.oks, UP),
            ctl.reads.load(SeqCst),
            left.len()
        );
        assert!(bad.is_empty(), "{what}: reads by email: {bad:#?}");
        let failed: Vec<&str> = writers
            .iter()
            .flat_map(|w| &w.events)
            .filter(|e| e.start == UP && e.end == UP && !e.ok || e.hung)
            .map(|e| e.what.as_str())
            .collect();
        assert!(
            failed.is_empty(),
            "{what}: writes failed before the kill: {failed:#?}"
        );
        let after = ProxyProcess::start(&rules, &[]);
        let models: Vec<&Model> = writers.iter().map(|w| &w.model).collect();
        check(c, &after.pool(), table, &models, &what).await;
        for w in &mut writers {
            w.events.clear();
        }
    }
}

/// Which node a variant of [`held_insert`] kills besides the proxy.
#[derive(Clone, Copy, Debug)]
enum Crash {
    None,
    /// The node of the prepared branch.
    Prepared,
    /// The node whose own transaction holds the decision record.
    Decider,
}

/// An INSERT whose row is on `row` and its entry on `entry` through a proxy stopped at
/// `hold` in its two-phase commit; the proxy (and the `crash` node) killed there; another
/// proxy recovers. Both the row and its entry are there (`decided`) or neither (`prepared`).
async fn held_insert(
    c: &'static Cluster,
    rules: &str,
    n: i64,
    hold: &str,
    row: usize,
    crash: Crash,
) {
    let table = "t_hold";
    let entry = (row + 1) % 3;
    let key = (10_000 * n..)
        .find(|k| node_of_key(&L3, *k) == row)
        .expect("a key");
    let email = (0..)
        .map(|i| format!("held{n}-{i}@x"))
        .find(|e| email_node(e) == entry)
        .expect("an email");
    let what =
        format!("held at {hold}, crash {crash:?}: row {key} on ds{row}, {email} on ds{entry}");
    let mut held = ProxyProcess::start(rules, &[("SHARDPROXY_XA_HOLD", hold)]);
    let pool = held.pool();
    let mut conn = pool
        .get_conn()
        .await
        .expect("a connection to the held proxy");
    let sql = format!("INSERT INTO {table} VALUES ({key}, '{email}', 'held')");
    let insert = tokio::spawn(async move { conn.query_drop(sql).await });
    let branches = until(&format!("{what}: the INSERT's branch prepared"), || async {
        let b = all_prepared(c).await;
        if b.is_empty() {
            Err(b)
        } else {
            Ok(b)
        }
    })
    .await;
    assert_eq!(
        branches.len(),
        1,
        "{what}: one prepared branch: {branches:?}"
    );
    let (prepared_on, gtrid, decider) = branches[0].clone();
    let decider: usize = decider
        .strip_prefix("ds")
        .and_then(|d| d.parse().ok())
        .unwrap_or_else(|| panic!("{what}: a decision node named {decider}"));
    assert_eq!(
        BTreeSet::from([prepared_on, decider]),
        BTreeSet::from([row, entry]),
        "{what}: the branches are on the row's and the entry's nodes"
    );
    if hold == "decided" {
        until(
            &format!("{what}: the decision committed on ds{decider}"),
            || {
                let g = gtrid.clone();
                async move {
                    let mut d = direct(c, decider).await;
                    let o: Result<Option<String>, _> = d
                        .exec_first("SELECT outcome FROM shardproxy_xa WHERE gtrid = ?", (g,))
                        .await;
                    d.disconnect().await.ok();
                    let o = o.ok().flatten();
                    seen(o.as_deref() == Some("commit"), o)
                }
            },
        )
        .await;
    }
    assert!(
        !insert.is_finished(),
        "{what}: the INSERT returned although its commit is held: {:?}",
        insert.await
    );
    eprintln!("{what}: prepared at the kill: {:?}", all_prepared(c).await);
    let crashed = match crash {
        Crash::None => None,
        Crash::Prepared => Some(prepared_on),
        Crash::Decider => Some(decider),
    };
    if let Some(node) = crashed {
        blocking(move || c.kill_node(node)).await;
    }
    held.kill();
    let r = tokio::time::timeout(STEP, insert)
        .await
        .expect("the INSERT's client did not see the proxy die")
        .expect("the INSERT's task");
    assert!(r.is_err(), "{what}: the INSERT succeeded: {r:?}");
    drop(pool);
    let after = ProxyProcess::start(rules, &[]);
    if let Some(node) = crashed {
        blocking(move || c.start_node(node)).await;
    }
    until_none_prepared(c, &what).await;
    let mut rd = direct(c, row).await;
    let got_row: Option<String> = rd
        .query_first(format!("SELECT email FROM {table} WHERE user_id = {key}"))
        .await
        .expect("the row");
    let mut ed = direct(c, entry).await;
    let got_entry: Option<i64> = ed
        .exec_first(
            format!("SELECT user_id FROM {table}_email_gsi WHERE v_hash = ?"),
            (email.as_bytes(),),
        )
        .await
        .expect("the entry");
    let both = hold == "decided";
    assert_eq!(
        (got_row.clone(), got_entry),
        if both {
            (Some(email.clone()), Some(key))
        } else {
            (None, None)
        },
        "{what}: (row, entry) after recovery; expected {}",
        if both { "both" } else { "neither" }
    );
    let mut p = after.pool().get_conn().await.expect("the recovering proxy");
    let read: Vec<i64> = p
        .exec(
            format!("SELECT user_id FROM {table} WHERE email = ?"),
            (&email,),
        )
        .await
        .expect("a read by email");
    assert_eq!(
        read,
        got_entry.into_iter().collect::<Vec<_>>(),
        "{what}: read by email"
    );
    exact(c, table).await;
}

/// One INSERT whose row and entry are on two nodes, its proxy killed after PREPARE (rolled
/// back), after the decision (committed), with the prepared branch's node killed too
/// (committed once it is back), with the decision's node killed too (rolled back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test hook: cargo test --features test-hooks (scripts/test.sh)"
)]
async fn an_indexed_insert_across_nodes_killed_after_prepare_or_decision_is_all_or_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(3);
    let rules = indexed_table(c, "t_hold", 30).await;
    held_insert(c, &rules, 1, "prepared", 0, Crash::None).await;
    held_insert(c, &rules, 2, "decided", 1, Crash::None).await;
    held_insert(c, &rules, 3, "decided", 2, Crash::Prepared).await;
    held_insert(c, &rules, 4, "prepared", 1, Crash::Decider).await;
}

/// Waits until no node has a transaction open (none left behind, locks held).
async fn until_no_transaction(c: &Cluster, what: &str) {
    for i in 0..3 {
        until(
            &format!("{what}: no transaction open on ds{i}"),
            || async move {
                let mut d = direct(c, i).await;
                let o = d
                    .query::<(u64, String, Option<String>), _>(
                        "SELECT trx_mysql_thread_id, trx_state, trx_query \
                         FROM information_schema.INNODB_TRX",
                    )
                    .await
                    .expect("INNODB_TRX");
                d.disconnect().await.ok();
                seen(o.is_empty(), o)
            },
        )
        .await;
    }
}

/// A statement that needs the killed node: a server error naming it, in bounded time.
async fn fails_naming(conn: &mut Conn, sql: &str, node: usize) {
    let r = tokio::time::timeout(STEP, conn.query_drop(sql))
        .await
        .unwrap_or_else(|_| panic!("{sql}: no answer with ds{node} down"));
    let (code, message) = server_error(r);
    eprintln!("{sql}: ERROR {code}: {message}");
    assert!(
        message.contains(&format!("ds{node}")),
        "{sql}: the error does not name ds{node}: {code} {message}"
    );
}

async fn succeeds(conn: &mut Conn, sql: &str) {
    tokio::time::timeout(STEP, conn.query_drop(sql))
        .await
        .unwrap_or_else(|_| panic!("{sql}: no answer"))
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// ds2 SIGKILLed under the same load through an in-process proxy, with a session's
/// transaction holding a row and an entry there, and an indexed UPDATE asleep in its read
/// there: every statement that needs ds2 fails with an error naming it (none hangs, no
/// connection breaks), every one that does not is served, all are served once it is back,
/// and nothing a failed statement wrote is left, on ds2 or elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_under_indexed_writes_fails_only_its_statements_and_leaves_the_index_exact() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(3);
    let table = "t_nk";
    const KILLED: usize = 2;
    let rules = indexed_table(c, table, LOADED).await;
    let proxy = start_proxy_with_rules(rules);
    let writers = Writer::all(table, LOADED);
    let ctl = Ctl::new(None, Some(KILLED), &writers);
    let url = proxy.url("shop");
    let connect = move || -> futures::future::BoxFuture<'static, Conn> {
        let url = url.clone();
        Box::pin(async move {
            Conn::new(Opts::from_url(&url).expect("url"))
                .await
                .expect("a connection to the proxy")
        })
    };
    let load = start_load(writers, connect, table, &ctl).await;
    until("every writer committing", || async {
        let n = ctl.least(&ctl.oks, UP);
        seen(n >= 20, n)
    })
    .await;

    // A session's own transaction with a row and an entry on the node about to die.
    let fresh = |node: usize, from: i64| {
        (from..)
            .find(|k| node_of_key(&L3, *k) == node)
            .expect("a key")
    };
    let on = |node: usize, tag: &str| {
        (0..)
            .map(|i| format!("{tag}{i}@x"))
            .find(|e| email_node(e) == node)
            .expect("an email")
    };
    let (x, y, z, w) = (
        fresh(0, 900_000),
        fresh(KILLED, 900_000),
        fresh(0, 900_100),
        fresh(1, 900_200),
    );
    let (ex, ey, ez, ew) = (on(KILLED, "x"), on(1, "y"), on(1, "z"), on(KILLED, "w"));
    let (v, ev, ev2) = (fresh(KILLED, 900_300), on(0, "v"), on(1, "v-new"));
    let mut s = proxy.conn().await;
    // A change of a row on the node, asleep there in its read when the node dies.
    succeeds(
        &mut s,
        &format!("INSERT INTO {table} VALUES ({v}, '{ev}', 's')"),
    )
    .await;
    let mut sleeper = proxy.conn().await;
    let sql = format!("UPDATE {table} SET email = '{ev2}' WHERE user_id = {v} AND SLEEP(60) = 0");
    let asleep = tokio::spawn(async move {
        let r = tokio::time::timeout(STEP, sleeper.query_drop(&sql)).await;
        (sleeper, sql, r)
    });
    until(&format!("the UPDATE asleep on ds{KILLED}"), || async {
        let mut d = direct(c, KILLED).await;
        let n: Option<i64> = d
            .query_first(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User sleep'",
            )
            .await
            .expect("the node's processlist");
        d.disconnect().await.ok();
        seen(n == Some(1), n)
    })
    .await;
    succeeds(&mut s, "START TRANSACTION").await;
    succeeds(
        &mut s,
        &format!("INSERT INTO {table} VALUES ({x}, '{ex}', 's')"),
    )
    .await;
    succeeds(
        &mut s,
        &format!("INSERT INTO {table} VALUES ({y}, '{ey}', 's')"),
    )
    .await;

    ctl.phase.store(KILLING, SeqCst);
    blocking(move || c.kill_node(KILLED)).await;
    ctl.phase.store(FAULT, SeqCst);
    let killed = Instant::now();
    fails_naming(&mut s, "COMMIT", KILLED).await;
    let _ = tokio::time::timeout(STEP, s.query_drop("ROLLBACK")).await;
    // The session goes on: what needs no dead node is served, what needs it fails.
    succeeds(
        &mut s,
        &format!("INSERT INTO {table} VALUES ({z}, '{ez}', 's')"),
    )
    .await;
    fails_naming(
        &mut s,
        &format!("INSERT INTO {table} VALUES ({w}, '{ew}', 's')"),
        KILLED,
    )
    .await;
    let got: Vec<(i64, String)> = s
        .query(format!(
            "SELECT user_id, email FROM {table} WHERE email = '{ez}'"
        ))
        .await
        .expect("a read by email on live nodes");
    assert_eq!(got, vec![(z, ez.clone())]);
    let (mut sleeper, sql, r) = asleep.await.expect("the sleeping UPDATE's task");
    let r = r.unwrap_or_else(|_| panic!("{sql}: no answer once ds{KILLED} died under it"));
    let (code, message) = server_error(r);
    eprintln!("{sql}: ERROR {code}: {message}");
    assert!(
        message.contains(&format!("ds{KILLED}")),
        "{sql}: {code} {message}"
    );
    let got: Vec<i64> = sleeper
        .exec(
            format!("SELECT user_id FROM {table} WHERE email = ?"),
            (&ez,),
        )
        .await
        .expect("the session after its error");
    assert_eq!(got, vec![z], "the session after its error");
    until(
        "every writer through 25 statements with the node down",
        || async {
            let n = ctl.least(&ctl.done, FAULT);
            seen(n >= 25, n)
        },
    )
    .await;
    ctl.phase.store(STARTING, SeqCst);
    let down = killed.elapsed();
    blocking(move || c.start_node(KILLED)).await;
    ctl.phase.store(BACK, SeqCst);
    until("every writer committing again", || async {
        let n = ctl.least(&ctl.oks, BACK);
        seen(n >= 20, n)
    })
    .await;
    let (writers, bad) = stop_load(&ctl, load).await;
    eprintln!(
        "ds{KILLED} down for {down:?}; writes committed before/while down/after: {}/{}/{}; reads {}",
        ctl.total(&ctl.oks, UP),
        ctl.total(&ctl.oks, FAULT),
        ctl.total(&ctl.oks, BACK),
        ctl.reads.load(SeqCst)
    );
    assert!(bad.is_empty(), "reads by email: {bad:#?}");
    let mut wrong = Vec::new();
    let mut refused = 0;
    let spanned = writers
        .iter()
        .flat_map(|w| &w.events)
        .filter(|e| e.start == UP && e.end != UP)
        .count();
    assert!(
        spanned > 0,
        "no writer's statement ran when the node was killed"
    );
    for e in writers.iter().flat_map(|w| &w.events) {
        let why = if e.hung {
            "hung"
        } else if e.io {
            "lost its connection"
        } else if matches!((e.start, e.end), (UP, UP) | (BACK, BACK)) && !e.ok {
            "failed with every node up"
        } else if (e.start, e.end) == (FAULT, FAULT) && e.needs_down && e.ok {
            "succeeded although it needs the dead node"
        } else if (e.start, e.end) == (FAULT, FAULT) && !e.needs_down && !e.ok {
            "failed although it needs no dead node"
        } else {
            refused += usize::from((e.start, e.end) == (FAULT, FAULT) && !e.ok);
            continue;
        };
        wrong.push(format!("{why}: {}", e.what));
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert!(refused > 0, "no writer's statement needed the dead node");

    let mut mine = Model::default();
    mine.certain(
        x,
        None,
        "a transaction whose COMMIT failed with ds2 dead".into(),
    );
    mine.certain(
        y,
        None,
        "a transaction whose COMMIT failed with ds2 dead".into(),
    );
    mine.certain(
        z,
        Some(Some(ez.clone())),
        "an INSERT on live nodes (committed)".into(),
    );
    mine.certain(w, None, "an INSERT needing the dead node (failed)".into());
    mine.certain(
        v,
        Some(Some(ev.clone())),
        "a change asleep on ds2 when it died (failed)".into(),
    );
    mine.written.extend([ex, ey, ez, ew, ev, ev2]);
    let mut models: Vec<&Model> = writers.iter().map(|w| &w.model).collect();
    models.push(&mine);
    check(c, &proxy.pool(), table, &models, "after the node came back").await;
    drop(s);
    until_no_transaction(c, "after the node came back").await;
}
