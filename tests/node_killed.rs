//! A node killed (SIGKILL) while statements run on it: each statement that needed it gets
//! one MySQL error that names it, never a result cut short that ends as if whole; the
//! sessions go on; a transaction with a branch there rolls back and leaves nothing on the
//! other nodes; and once the node accepts connections again, its statements are served
//! within 2 s without a retry. Its own test binary (its own cluster), so killing a node
//! disturbs no other test.
//!
//! Every kill waits for observable conditions, never for a fixed time: the statements are
//! held on the node by `SLEEP()` on one row of it (the node's processlist shows them in
//! `User sleep`), and a streaming client has read its first rows before the kill.

mod common;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::{Protocol, Queryable};
use mysql_async::{Conn, Opts, QueryResult};

/// Three nodes: ds0 0-341, ds1 342-682, ds2 683-1023.
const L3: [(u16, u16); 3] = [(0, 341), (342, 682), (683, 1023)];
/// The node that is killed.
const KILLED: usize = 2;
/// Keys 1..=ROWS, about 40,000 a node.
const ROWS: i64 = 120_000;
/// `g = user_id % GROUPS`: the groups of the aggregate.
const GROUPS: i64 = 20_000;
/// The longest any one step may take.
const STEP: Duration = Duration::from_secs(60);
/// The longest a part of the test may take.
const PART: Duration = Duration::from_secs(180);
/// The hardening issue's bound: a node back is served within this of accepting connections.
const BACK_WITHIN: Duration = Duration::from_secs(2);

/// Awaits a step, failing the test if it hangs.
async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(STEP, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {}s", STEP.as_secs()))
}

/// Keys of node `n` past the loaded ones (for rows a test writes).
fn new_keys(n: usize, count: usize) -> Vec<i64> {
    (ROWS + 1..)
        .filter(|k| node_of_key(&L3, *k) == n)
        .take(count)
        .collect()
}

/// A connection straight to node `n`.
async fn direct(c: &Cluster, n: usize) -> Conn {
    Conn::new(Opts::from_url(&c.url(n)).expect("node URL"))
        .await
        .unwrap_or_else(|e| panic!("connect to node {n} directly: {e}"))
}

/// The table, its rows loaded on each node directly (multi-row INSERTs), and the key on the
/// killed node whose row sleeps: past the middle of the node's keys (so rows before it
/// stream first), with a group in the middle of the groups.
async fn load(c: &Cluster, proxy: &Proxy) -> i64 {
    let mut conn = proxy.conn().await;
    conn.query_drop(
        "CREATE TABLE t_kill (user_id BIGINT NOT NULL PRIMARY KEY, g INT NOT NULL, \
         v VARCHAR(24) NOT NULL, KEY (g))",
    )
    .await
    .expect("CREATE TABLE through the proxy");
    conn.disconnect().await.ok();
    for n in 0..L3.len() {
        let keys: Vec<i64> = (1..=ROWS).filter(|k| node_of_key(&L3, *k) == n).collect();
        let mut d = direct(c, n).await;
        for chunk in keys.chunks(5_000) {
            let values: Vec<String> = chunk
                .iter()
                .map(|k| format!("({k},{},'v{k}')", k % GROUPS))
                .collect();
            d.query_drop(format!(
                "INSERT INTO t_kill (user_id, g, v) VALUES {}",
                values.join(",")
            ))
            .await
            .expect("load rows on a node");
        }
        d.disconnect().await.ok();
    }
    let k = (ROWS * 7 / 12..)
        .find(|k| node_of_key(&L3, *k) == KILLED)
        .expect("a key on the killed node");
    assert!((GROUPS / 4..GROUPS * 3 / 4).contains(&(k % GROUPS)));
    k
}

/// Statements sleeping now (in `SLEEP()`) on the node `d` is connected to.
async fn sleeping(d: &mut Conn) -> usize {
    let n: Option<i64> = d
        .query_first(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User sleep'",
        )
        .await
        .expect("read the node's processlist");
    n.unwrap_or(0) as usize
}

/// Waits until `want` statements sleep on the killed node and each streaming client has
/// read its first rows (each `(rows read, at least)` of `progress`), then kills the node.
async fn kill_when(c: &'static Cluster, want: usize, progress: &[(Arc<AtomicUsize>, usize)]) {
    let mut d = direct(c, KILLED).await;
    let deadline = Instant::now() + STEP;
    loop {
        let read = progress
            .iter()
            .all(|(p, at_least)| p.load(Ordering::Relaxed) >= *at_least);
        let asleep = sleeping(&mut d).await;
        if read && asleep >= want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the statements did not reach ds{KILLED} in {}s: {asleep} of {want} sleep there, rows read {:?}",
            STEP.as_secs(),
            progress
                .iter()
                .map(|(p, _)| p.load(Ordering::Relaxed))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(d);
    tokio::task::spawn_blocking(move || c.kill_node(KILLED))
        .await
        .expect("kill the node");
}

/// Starts the killed node again; returns when it accepts connections.
async fn restart(c: &'static Cluster) {
    tokio::task::spawn_blocking(move || c.start_node(KILLED))
        .await
        .expect("start the node");
}

/// Starts the killed node again, then checks that a fresh session and each of `sessions`
/// are served `key` on it within 2 s, with no retry ([`served_again`]).
async fn restarted_serves(
    c: &'static Cluster,
    proxy: &Proxy,
    sessions: Vec<(&str, &mut Conn)>,
    key: i64,
) {
    restart(c).await;
    let mut fresh = proxy.conn().await;
    let mut all: Vec<(&str, &mut Conn)> = vec![("fresh session", &mut fresh)];
    all.extend(sessions);
    served_again(c, &mut all, key).await;
}

/// Reads a result row by row, counting the rows in `progress`: `Ok` only when the result
/// ended as complete (its EOF / OK), else the error that ended it.
async fn count_rows<P: Protocol>(
    mut result: QueryResult<'_, '_, P>,
    progress: &AtomicUsize,
) -> Result<(), mysql_async::Error> {
    while result.next().await?.is_some() {
        progress.fetch_add(1, Ordering::Relaxed);
    }
    result.drop_result().await
}

/// One statement streamed through the proxy by a session of its own: the session back, the
/// rows read and how the result ended.
type Streamed = (Conn, usize, Result<(), mysql_async::Error>);

fn stream(
    mut conn: Conn,
    sql: String,
    param: Option<i64>,
    progress: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<Streamed> {
    tokio::spawn(async move {
        let r = match param {
            None => match conn.query_iter(sql).await {
                Ok(result) => count_rows(result, &progress).await,
                Err(e) => Err(e),
            },
            Some(p) => match conn.exec_iter(sql, (p,)).await {
                Ok(result) => count_rows(result, &progress).await,
                Err(e) => Err(e),
            },
        };
        (conn, progress.load(Ordering::Relaxed), r)
    })
}

/// The statement failed with a server error that names the killed node.
fn names_the_node<T: std::fmt::Debug>(
    what: &str,
    r: Result<T, mysql_async::Error>,
) -> (u16, String) {
    let (code, message) = match r {
        Ok(v) => panic!("{what}: succeeded with ds{KILLED} killed under it: {v:?}"),
        Err(mysql_async::Error::Server(e)) => (e.code, e.message),
        Err(other) => panic!("{what}: expected a MySQL error packet, got: {other}"),
    };
    eprintln!("{what}: ERROR {code}: {message}");
    assert!(
        message.contains(&format!("ds{KILLED}")),
        "{what}: the error ({code}) does not name ds{KILLED}: {message}"
    );
    (code, message)
}

async fn value_of(conn: &mut Conn, key: i64) -> Result<Option<String>, mysql_async::Error> {
    conn.query_first(format!("SELECT v FROM t_kill WHERE user_id = {key}"))
        .await
}

/// The session runs a statement on a live node, right after its error.
async fn usable(what: &str, conn: &mut Conn, live_key: i64) {
    let v = bounded("a read on a live node", value_of(conn, live_key))
        .await
        .unwrap_or_else(|e| panic!("{what}: a read on a live node after the error: {e}"));
    assert_eq!(v, Some(format!("v{live_key}")), "{what}");
}

/// Once the node is back, each session's first statement that needs it is served without a
/// retry, within [`BACK_WITHIN`] of being sent (the moment that is the proxy's: how long the
/// node took to start, or the sessions before it, are not), plus what a direct client needs
/// right then to connect to the node and run a statement (room for a loaded machine,
/// measured rather than guessed); then the whole table is there through it.
async fn served_again(c: &Cluster, sessions: &mut [(&str, &mut Conn)], key: i64) {
    let machine = direct_round_trip(c, KILLED).await;
    for (what, conn) in sessions.iter_mut() {
        let sent = Instant::now();
        let v = bounded("a read on the restarted node", value_of(conn, key))
            .await
            .unwrap_or_else(|e| panic!("{what}: a read of a key on the restarted ds{KILLED}: {e}"));
        let took = sent.elapsed();
        assert_eq!(v, Some(format!("v{key}")), "{what}");
        assert!(
            took < BACK_WITHIN + machine,
            "{what}: the first read on ds{KILLED} after its restart took {took:?} (bound {BACK_WITHIN:?} + {machine:?}, a direct client's connect and statement)"
        );
    }
    for (what, conn) in sessions.iter_mut() {
        let n: Option<i64> = bounded(
            "a count on every node",
            conn.query_first("SELECT COUNT(*) FROM t_kill"),
        )
        .await
        .unwrap_or_else(|e| panic!("{what}: a count on every node after the restart: {e}"));
        assert_eq!(n, Some(ROWS), "{what}");
    }
}

/// A scatter streaming to its client when a node dies: the k-way merge of an ORDER BY (text
/// and prepared), rows appended without ORDER BY, and groups merged as they stream.
async fn scatters(c: &'static Cluster, proxy: &Proxy, k: i64) {
    let sleep_on = |p: &str| format!("IF(user_id = {p}, SLEEP(60), 0)");
    // (what, statement, its parameter, rows of the whole result, rows read before the kill)
    let cases: Vec<(&str, String, Option<i64>, usize, usize)> = vec![
        (
            "ORDER BY merge (text)",
            format!(
                "SELECT user_id, v, {} AS s FROM t_kill ORDER BY user_id",
                sleep_on(&k.to_string())
            ),
            None,
            ROWS as usize,
            1_000,
        ),
        (
            "ORDER BY merge (prepared)",
            format!(
                "SELECT user_id, v, {} AS s FROM t_kill ORDER BY user_id",
                sleep_on("?")
            ),
            Some(k),
            ROWS as usize,
            1_000,
        ),
        (
            "appended fan-out",
            format!(
                "SELECT user_id, v, {} AS s FROM t_kill",
                sleep_on(&k.to_string())
            ),
            None,
            ROWS as usize,
            1_000,
        ),
        (
            "GROUP BY merge",
            format!(
                "SELECT g, COUNT(*) AS n, MAX({}) AS s FROM t_kill GROUP BY g",
                sleep_on(&k.to_string())
            ),
            None,
            GROUPS as usize,
            100,
        ),
    ];
    let mut running = Vec::new();
    let mut progress = Vec::new();
    for (what, sql, param, whole, at_least) in &cases {
        let p = Arc::new(AtomicUsize::new(0));
        progress.push((p.clone(), *at_least));
        let conn = proxy.conn().await;
        running.push((*what, *whole, stream(conn, sql.clone(), *param, p)));
    }
    kill_when(c, cases.len(), &progress).await;

    let live = key_on_node(&L3, 0);
    let mut sessions = Vec::new();
    for (what, whole, task) in running {
        let (mut conn, rows, r) = bounded(what, task)
            .await
            .unwrap_or_else(|e| panic!("{what}: the client task failed: {e}"));
        if r.is_ok() {
            panic!(
                "{what}: the result ended as complete with ds{KILLED} killed under it, {rows} of {whole} rows"
            );
        }
        eprintln!("{what}: {rows} of {whole} rows before the error");
        assert!(rows < whole, "{what}: {rows} rows, then an error");
        names_the_node(what, r);
        usable(what, &mut conn, live).await;
        sessions.push((what, conn));
    }

    let sessions = sessions.iter_mut().map(|(w, c)| (*w, c)).collect();
    restarted_serves(c, proxy, sessions, key_on_node(&L3, KILLED)).await;
}

/// A point statement running on the node when it dies, in the text and the binary protocol.
async fn point_statements(c: &'static Cluster, proxy: &Proxy) {
    let key = key_on_node(&L3, KILLED);
    let text = {
        let mut conn = proxy.conn().await;
        let sql = format!("SELECT SLEEP(60) AS s, v FROM t_kill WHERE user_id = {key}");
        tokio::spawn(async move {
            let r = conn.query::<(i64, String), _>(sql).await;
            (conn, r)
        })
    };
    let prepared = {
        let mut conn = proxy.conn().await;
        tokio::spawn(async move {
            let r = conn
                .exec::<(i64, String), _, _>(
                    "SELECT SLEEP(60) AS s, v FROM t_kill WHERE user_id = ?",
                    (key,),
                )
                .await;
            (conn, r)
        })
    };
    kill_when(c, 2, &[]).await;
    let live = key_on_node(&L3, 1);
    let mut sessions = Vec::new();
    for (what, task) in [
        ("point SELECT (text)", text),
        ("point SELECT (prepared)", prepared),
    ] {
        let (mut conn, r) = bounded(what, task)
            .await
            .unwrap_or_else(|e| panic!("{what}: the client task failed: {e}"));
        names_the_node(what, r);
        usable(what, &mut conn, live).await;
        sessions.push((what, conn));
    }
    let sessions = sessions.iter_mut().map(|(w, c)| (*w, c)).collect();
    restarted_serves(c, proxy, sessions, key).await;
}

async fn autocommit_off(conn: &mut Conn) {
    conn.query_drop("SET autocommit = 0")
        .await
        .expect("autocommit off");
}

/// Which of `keys` a node holds, read on it directly.
async fn rows_of(node: &mut Conn, keys: &[i64]) -> Vec<i64> {
    let list: Vec<String> = keys.iter().map(i64::to_string).collect();
    node.query(format!(
        "SELECT user_id FROM t_kill WHERE user_id IN ({})",
        list.join(",")
    ))
    .await
    .expect("read a node directly")
}

/// A session with autocommit off that has written a row of each key, in order, in its
/// transaction.
async fn writing(proxy: &Proxy, keys: &[i64]) -> Conn {
    let mut conn = proxy.conn().await;
    autocommit_off(&mut conn).await;
    for k in keys {
        conn.query_drop(format!(
            "INSERT INTO t_kill (user_id, g, v) VALUES ({k}, 0, 'tx')"
        ))
        .await
        .unwrap_or_else(|e| panic!("a write of key {k} in the transaction: {e}"));
    }
    conn
}

/// Transactions with autocommit off (as PyMySQL and mysqlclient start) that wrote the node
/// when it dies: two between their writes and COMMIT (the first branch on the killed node,
/// or an XA branch there), one in an UPDATE there, one in a multi-row INSERT split over a
/// live node and the killed one. Each gets an error, ROLLBACK works, the session goes on,
/// and none of their rows is on any node afterwards, nor a branch left prepared.
async fn transactions(c: &'static Cluster, proxy: &Proxy) {
    let k0 = new_keys(0, 4);
    let k1 = new_keys(1, 3);
    let k2 = new_keys(KILLED, 4);
    let slept = key_on_node(&L3, KILLED);
    let insert = |k: i64| format!("INSERT INTO t_kill (user_id, g, v) VALUES ({k}, 0, 'tx')");

    // Written on every node (the killed one first), then COMMIT after the kill.
    let mut before_commit = writing(proxy, &[k2[0], k0[0], k1[0]]).await;
    // Written on ds0 first, then on the killed node (an XA branch there), then COMMIT
    // after the kill.
    let mut before_commit_xa = writing(proxy, &[k0[3], k2[3]]).await;
    // Written on ds0 and ds1, then an UPDATE on the killed node that sleeps there.
    let mut in_update = writing(proxy, &[k0[1], k1[1]]).await;
    let update = tokio::spawn(async move {
        let r = in_update
            .query_drop(format!(
                "UPDATE t_kill SET v = IF(SLEEP(60) = 0, 'slept', 'woken') WHERE user_id = {slept}"
            ))
            .await;
        (in_update, r)
    });
    // Written on ds1, then one INSERT of a row for ds0 and one for the killed node, whose
    // row sleeps there.
    let mut in_insert = proxy.conn().await;
    autocommit_off(&mut in_insert).await;
    in_insert
        .query_drop(insert(k1[2]))
        .await
        .expect("a write in the transaction");
    let sql = format!(
        "INSERT INTO t_kill (user_id, g, v) VALUES ({}, 0, 'tx'), ({}, SLEEP(60), 'tx')",
        k0[2], k2[2]
    );
    let split = tokio::spawn(async move {
        let r = in_insert.query_drop(sql).await;
        (in_insert, r)
    });

    kill_when(c, 2, &[]).await;

    let live = key_on_node(&L3, 0);
    let (mut in_update, r) = bounded("UPDATE", update).await.expect("UPDATE task");
    names_the_node("UPDATE in a transaction", r);
    let (mut in_insert, r) = bounded("INSERT", split).await.expect("INSERT task");
    names_the_node("split INSERT in a transaction", r);
    let r = bounded("COMMIT", before_commit.query_drop("COMMIT")).await;
    names_the_node("COMMIT (first branch on the killed node)", r);
    let r = bounded("COMMIT", before_commit_xa.query_drop("COMMIT")).await;
    names_the_node("COMMIT (XA branch on the killed node)", r);
    for (what, conn) in [
        ("transaction killed before COMMIT", &mut before_commit),
        ("XA branch killed before COMMIT", &mut before_commit_xa),
        ("transaction killed in an UPDATE", &mut in_update),
        ("transaction killed in an INSERT", &mut in_insert),
    ] {
        bounded("ROLLBACK", conn.query_drop("ROLLBACK"))
            .await
            .unwrap_or_else(|e| panic!("{what}: ROLLBACK: {e}"));
        usable(what, conn, live).await;
        bounded("ROLLBACK", conn.query_drop("ROLLBACK"))
            .await
            .unwrap_or_else(|e| panic!("{what}: ROLLBACK of the read: {e}"));
    }
    // Nothing of theirs on the live nodes.
    for (n, keys) in [(0, &k0), (1, &k1)] {
        let mut d = direct(c, n).await;
        let left = rows_of(&mut d, keys).await;
        assert!(
            left.is_empty(),
            "rows of transactions that failed are on ds{n}: {left:?}"
        );
        let prepared: Vec<mysql_async::Row> = d.query("XA RECOVER").await.expect("XA RECOVER");
        assert!(
            prepared.is_empty(),
            "branches of transactions that failed are left prepared on ds{n}: {prepared:?}"
        );
        d.disconnect().await.ok();
    }

    restarted_serves(
        c,
        proxy,
        vec![
            ("transaction killed before COMMIT", &mut before_commit),
            ("XA branch killed before COMMIT", &mut before_commit_xa),
            ("transaction killed in an UPDATE", &mut in_update),
            ("transaction killed in an INSERT", &mut in_insert),
        ],
        key_on_node(&L3, KILLED),
    )
    .await;
    // Nor on the node that died (its recovery rolled them back), and the UPDATE's row is
    // as it was.
    let mut d = direct(c, KILLED).await;
    let left = rows_of(&mut d, &k2).await;
    assert!(
        left.is_empty(),
        "rows of transactions that failed are on ds{KILLED}: {left:?}"
    );
    let v: Option<String> = d
        .query_first(format!("SELECT v FROM t_kill WHERE user_id = {slept}"))
        .await
        .expect("read the restarted node directly");
    assert_eq!(v, Some(format!("v{slept}")));
    let prepared: Vec<mysql_async::Row> = d.query("XA RECOVER").await.expect("XA RECOVER");
    assert!(prepared.is_empty(), "{prepared:?}");
    d.disconnect().await.ok();
}

/// A node killed between statements and started again at once: a session whose last
/// statement there left a warning (it keeps that connection for SHOW WARNINGS) and one that
/// used the node just before (its connection went back to the pool a moment before the
/// kill) are served as soon as the node accepts connections; transactions that had written
/// there fail their COMMIT and leave nothing behind.
async fn between_statements(c: &'static Cluster, proxy: &Proxy) {
    let key = key_on_node(&L3, KILLED);
    let mut warned = proxy.conn().await;
    let x: Option<f64> = warned
        .query_first(format!(
            "SELECT v + 0 AS x FROM t_kill WHERE user_id = {key}"
        ))
        .await
        .expect("a read that warns");
    assert_eq!(x, Some(0.0));
    assert!(
        warned.get_warnings() > 0,
        "`v + 0` warns of a truncated value"
    );
    // Open transactions that wrote the node (alone, and with ds0): their branches there
    // die with it, and a COMMIT after the restart must not commit on a new connection as
    // if nothing had happened.
    let k0 = new_keys(0, 6)[4];
    let k2 = &new_keys(KILLED, 6)[4..];
    let mut alone = proxy.conn().await;
    let mut with_ds0 = proxy.conn().await;
    for (conn, keys) in [(&mut alone, vec![k2[0]]), (&mut with_ds0, vec![k0, k2[1]])] {
        autocommit_off(conn).await;
        for k in keys {
            conn.query_drop(format!(
                "INSERT INTO t_kill (user_id, g, v) VALUES ({k}, 0, 'tx')"
            ))
            .await
            .unwrap_or_else(|e| panic!("a write of key {k} in the transaction: {e}"));
        }
    }
    let mut recent = proxy.conn().await;
    let v = value_of(&mut recent, key)
        .await
        .expect("a read on the node");
    assert_eq!(v, Some(format!("v{key}")));
    let t = Instant::now();
    tokio::task::spawn_blocking(move || c.kill_node(KILLED))
        .await
        .expect("kill the node");
    restart(c).await;
    eprintln!(
        "killed and started again in {:.2}s",
        t.elapsed().as_secs_f64()
    );
    // The warning went with the node: none is shown, nor another session's.
    let shown: Vec<(String, u32, String)> = bounded("SHOW WARNINGS", warned.query("SHOW WARNINGS"))
        .await
        .unwrap_or_else(|e| panic!("SHOW WARNINGS after the node came back: {e}"));
    assert!(shown.is_empty(), "{shown:?}");
    served_again(
        c,
        &mut [
            ("session that used the node just before", &mut recent),
            ("session holding the node's connection", &mut warned),
        ],
        key,
    )
    .await;
    for (what, conn) in [
        ("COMMIT of a transaction on the restarted node", &mut alone),
        (
            "COMMIT of a transaction on ds0 and the restarted node",
            &mut with_ds0,
        ),
    ] {
        let r = bounded("COMMIT", conn.query_drop("COMMIT")).await;
        names_the_node(what, r);
        bounded("ROLLBACK", conn.query_drop("ROLLBACK"))
            .await
            .unwrap_or_else(|e| panic!("{what}: ROLLBACK: {e}"));
        usable(what, conn, key).await;
    }
    for (n, keys) in [(0, vec![k0]), (KILLED, k2.to_vec())] {
        let mut d = direct(c, n).await;
        let list: Vec<String> = keys.iter().map(i64::to_string).collect();
        let left: Vec<i64> = d
            .query(format!(
                "SELECT user_id FROM t_kill WHERE user_id IN ({})",
                list.join(",")
            ))
            .await
            .expect("read a node directly");
        assert!(
            left.is_empty(),
            "rows of transactions that failed are on ds{n}: {left:?}"
        );
        d.disconnect().await.ok();
    }
}

/// Runs one part of the test, bounded as a whole: its steps have their own bounds, this one
/// catches a hang anywhere else (a connect, a write before the kill).
async fn part<T>(what: &str, f: impl Future<Output = T>) -> T {
    let t = Instant::now();
    let out = tokio::time::timeout(PART, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: not done within {}s", PART.as_secs()));
    eprintln!("{what}: {:.1}s", t.elapsed().as_secs_f64());
    out
}

#[tokio::test]
async fn a_node_killed_under_its_statements_fails_them_once_and_is_served_again() {
    let c = Cluster::shared(3);
    let proxy = start_proxy(c, &hash_slot_table("t_kill", "user_id", &L3));
    let k = part("load", load(c, &proxy)).await;
    part("scatters", scatters(c, &proxy, k)).await;
    part("point statements", point_statements(c, &proxy)).await;
    part("transactions", transactions(c, &proxy)).await;
    part("between statements", between_statements(c, &proxy)).await;
}
