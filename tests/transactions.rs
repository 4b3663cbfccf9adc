//! Transactions over several nodes on real MariaDB nodes: a branch per node, two-phase
//! commit, reads inside the transaction, rollback, savepoints, deadlocks and lock waits, and
//! recovery of a proxy killed between PREPARE and COMMIT. Its own test binary (its own
//! cluster); the tests run one at a time, since one stops a node.

mod common;

use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Pool};
use tokio::sync::Mutex;

const L2: [(u16, u16); 2] = [(0, 511), (512, 1023)];

static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// A table of accounts over both nodes, `n` of them on each with balance 100; returns
/// their ids (node 0's, node 1's).
async fn accounts(conn: &mut Conn, table: &str, n: usize) -> (Vec<i64>, Vec<i64>) {
    conn.query_drop(format!("DROP TABLE IF EXISTS {table}"))
        .await
        .expect("drop");
    conn.query_drop(format!(
        "CREATE TABLE {table} (id BIGINT PRIMARY KEY, balance INT NOT NULL)"
    ))
    .await
    .expect("create");
    let a = keys_on_node(&L2, 0, n);
    let b = keys_on_node(&L2, 1, n);
    for k in a.iter().chain(&b) {
        conn.exec_drop(format!("INSERT INTO {table} VALUES (?, 100)"), (k,))
            .await
            .expect("insert");
    }
    (a, b)
}

/// `UPDATE table SET balance = v WHERE id = ?`, prepared.
async fn set_balance(
    conn: &mut Conn,
    table: &str,
    id: i64,
    v: i64,
) -> Result<(), mysql_async::Error> {
    conn.exec_drop(
        format!("UPDATE {table} SET balance = ? WHERE id = ?"),
        (v, id),
    )
    .await
}

async fn total(conn: &mut Conn, table: &str) -> i64 {
    let t: Option<String> = conn
        .query_first(format!("SELECT SUM(balance) FROM {table}"))
        .await
        .expect("sum");
    t.and_then(|t| t.parse().ok()).unwrap_or(0)
}

async fn balance(pool: &Pool, table: &str, id: i64) -> Option<i64> {
    let mut c = pool.get_conn().await.expect("direct conn");
    c.exec_first(format!("SELECT balance FROM {table} WHERE id = ?"), (id,))
        .await
        .expect("direct read")
}

/// The prepared XA branches of node `i`.
async fn prepared(c: &Cluster, i: usize) -> Vec<String> {
    let mut conn = c.direct(i).get_conn().await.expect("direct conn");
    let rows: Vec<mysql_async::Row> = conn.query("XA RECOVER").await.expect("XA RECOVER");
    rows.into_iter()
        .map(|r| {
            let data: Vec<u8> = r.get(3).unwrap_or_default();
            String::from_utf8_lossy(&data).into_owned()
        })
        .collect()
}

/// Waits until node 0 holds the committed decision of a branch prepared on node 1: the
/// commit is past its phase 2 (where `SHARDPROXY_XA_HOLD=decided` stops it).
async fn until_decided(c: &Cluster) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut n0 = c.direct(0).get_conn().await.expect("direct conn");
    let mut n1 = c.direct(1).get_conn().await.expect("direct conn");
    loop {
        let rows: Vec<mysql_async::Row> = n1.query("XA RECOVER").await.expect("XA RECOVER");
        for r in rows {
            let len: usize = r.get(1).unwrap_or(0);
            let data: Vec<u8> = r.get(3).unwrap_or_default();
            let gtrid = data[..len.min(data.len())].to_vec();
            // No decision table yet is no decision yet.
            let outcome: Option<String> = n0
                .exec_first(
                    "SELECT outcome FROM shardproxy_xa WHERE gtrid = ?",
                    (gtrid,),
                )
                .await
                .unwrap_or(None);
            if outcome.as_deref() == Some("commit") {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no decision committed on node 0 in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn transfer(
    conn: &mut Conn,
    table: &str,
    from: i64,
    to: i64,
    n: i64,
) -> Result<(), mysql_async::Error> {
    transfer_as(conn, table, from, to, n, true).await
}

/// A transfer with prepared statements (`prepared`) or as text queries (the drivers that
/// send text: the proxy then sends a branch's BEGIN in the statement's packet).
async fn transfer_as(
    conn: &mut Conn,
    table: &str,
    from: i64,
    to: i64,
    n: i64,
    prepared: bool,
) -> Result<(), mysql_async::Error> {
    conn.query_drop("BEGIN").await?;
    let r = async {
        if prepared {
            conn.exec_drop(
                format!("UPDATE {table} SET balance = balance - ? WHERE id = ?"),
                (n, from),
            )
            .await?;
            conn.exec_drop(
                format!("UPDATE {table} SET balance = balance + ? WHERE id = ?"),
                (n, to),
            )
            .await?;
        } else {
            conn.query_drop(format!(
                "UPDATE {table} SET balance = balance - {n} WHERE id = {from}"
            ))
            .await?;
            conn.query_drop(format!(
                "UPDATE {table} SET balance = balance + {n} WHERE id = {to}"
            ))
            .await?;
        }
        conn.query_drop("COMMIT").await
    }
    .await;
    if r.is_err() {
        let _ = conn.query_drop("ROLLBACK").await;
    }
    r
}

#[tokio::test]
async fn concurrent_transfers_across_nodes_keep_the_total() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(2);
    let proxy = start_proxy(c, &hash_slot_table("acct", "id", &L2));
    let mut conn = proxy.conn().await;
    let (a, b) = accounts(&mut conn, "acct", 6).await;
    assert_eq!(total(&mut conn, "acct").await, 1200);
    let mut retried = 0;
    for round in 0..4 {
        let mut tasks = Vec::new();
        for w in 0..6usize {
            let (a, b) = (a.clone(), b.clone());
            let pool = proxy.pool();
            tasks.push(tokio::spawn(async move {
                let mut conn = pool.get_conn().await.expect("conn");
                conn.query_drop("SET SESSION innodb_lock_wait_timeout = 2")
                    .await
                    .expect("set");
                let mut retries = 0;
                for i in 0..8usize {
                    let (x, y) = (a[(w + i) % a.len()], b[(w * 3 + i) % b.len()]);
                    let (from, to) = if w % 2 == 0 { (x, y) } else { (y, x) };
                    loop {
                        match transfer_as(
                            &mut conn,
                            "acct",
                            from,
                            to,
                            (w * 7 + i + 1) as i64,
                            w < 3,
                        )
                        .await
                        {
                            Ok(()) => break,
                            Err(mysql_async::Error::Server(e)) if matches!(e.code, 1213 | 1205) => {
                                retries += 1;
                                assert!(retries < 200, "too many retries");
                            }
                            Err(e) => panic!("transfer failed: {e}"),
                        }
                    }
                }
                retries
            }));
        }
        for t in tasks {
            retried += t.await.expect("worker");
        }
        assert_eq!(total(&mut conn, "acct").await, 1200, "after round {round}");
        for i in 0..2 {
            assert!(
                prepared(c, i).await.is_empty(),
                "a branch left prepared on node {i}"
            );
        }
    }
    eprintln!("transfers retried after a deadlock or lock wait: {retried}");
    // Each node's own sum moved (transfers crossed nodes), the total did not.
    let on0: i64 = {
        let mut d = c.direct(0).get_conn().await.expect("direct");
        d.query_first("SELECT CAST(SUM(balance) AS SIGNED) FROM acct")
            .await
            .expect("sum")
            .unwrap_or(0)
    };
    assert_ne!(on0, 600, "no transfer crossed nodes?");
    let committed = proxy
        .shared
        .metrics
        .transactions
        .with_label_values(&["commit_xa"])
        .get();
    assert!(committed >= 4 * 6 * 8, "two-phase commits: {committed}");
}

#[tokio::test]
async fn a_transaction_reads_its_own_writes_on_every_node_and_rollback_leaves_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(2);
    let proxy = start_proxy(c, &hash_slot_table("acct2", "id", &L2));
    let mut conn = proxy.conn().await;
    let (a, b) = accounts(&mut conn, "acct2", 1).await;
    let (x, y) = (a[0], b[0]);
    let mut other = proxy.conn().await;
    // Session state reaches every branch before its first statement.
    for set in [
        "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
        "SET time_zone = '+05:00'",
        "SET sql_mode = 'ANSI_QUOTES'",
        "SET @who = 'ann'",
    ] {
        conn.query_drop(set).await.expect(set);
    }
    // Autocommit off, as PyMySQL and mysqlclient default to.
    conn.query_drop("SET autocommit = 0")
        .await
        .expect("autocommit off");
    set_balance(&mut conn, "acct2", x, 100)
        .await
        .expect("first branch");
    let state: Option<(String, String, String, String)> = conn
        .exec_first(
            "SELECT @@tx_isolation, @@time_zone, @@sql_mode, @who FROM acct2 WHERE id = ?",
            (y,),
        )
        .await
        .expect("session state on the second branch");
    assert_eq!(
        state,
        Some((
            "READ-COMMITTED".into(),
            "+05:00".into(),
            "ANSI_QUOTES".into(),
            "ann".into()
        ))
    );
    set_balance(&mut conn, "acct2", x, 1).await.expect("w0");
    set_balance(&mut conn, "acct2", y, 2).await.expect("w1");
    let seen: Vec<i64> = conn
        .exec(
            "SELECT balance FROM acct2 WHERE id IN (?, ?) ORDER BY id",
            (x.min(y), x.max(y)),
        )
        .await
        .expect("read own writes");
    let mut want = [(x, 1), (y, 2)];
    want.sort();
    assert_eq!(seen, want.iter().map(|p| p.1).collect::<Vec<_>>());
    let outside: Option<i64> = other
        .exec_first("SELECT balance FROM acct2 WHERE id = ?", (y,))
        .await
        .expect("other session");
    assert_eq!(outside, Some(100), "not committed yet");
    conn.query_drop("ROLLBACK").await.expect("rollback");
    assert_eq!(balance(&c.direct(0), "acct2", x).await, Some(100));
    assert_eq!(balance(&c.direct(1), "acct2", y).await, Some(100));
    // The next unit of work commits on both nodes.
    set_balance(&mut conn, "acct2", x, 7).await.expect("w0");
    set_balance(&mut conn, "acct2", y, 8).await.expect("w1");
    conn.query_drop("COMMIT").await.expect("commit");
    assert_eq!(balance(&c.direct(0), "acct2", x).await, Some(7));
    assert_eq!(balance(&c.direct(1), "acct2", y).await, Some(8));
    for i in 0..2 {
        assert!(prepared(c, i).await.is_empty());
    }
}

#[tokio::test]
async fn savepoints_work_across_nodes() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(2);
    let proxy = start_proxy(c, &hash_slot_table("acct3", "id", &L2));
    let mut conn = proxy.conn().await;
    let (a, b) = accounts(&mut conn, "acct3", 1).await;
    conn.query_drop("BEGIN").await.expect("begin");
    set_balance(&mut conn, "acct3", a[0], 1).await.expect("w0");
    conn.query_drop("SAVEPOINT before_b")
        .await
        .expect("savepoint");
    set_balance(&mut conn, "acct3", b[0], 2).await.expect("w1");
    set_balance(&mut conn, "acct3", a[0], 3)
        .await
        .expect("w0 again");
    conn.query_drop("ROLLBACK TO SAVEPOINT before_b")
        .await
        .expect("rollback to");
    conn.query_drop("COMMIT").await.expect("commit");
    assert_eq!(balance(&c.direct(0), "acct3", a[0]).await, Some(1));
    assert_eq!(balance(&c.direct(1), "acct3", b[0]).await, Some(100));
    let e = expect_code(
        conn.query_drop("RELEASE SAVEPOINT before_b").await,
        1305,
        "after commit",
    );
    assert!(e.contains("before_b"), "{e}");
}

#[tokio::test]
async fn a_lock_wait_timeout_ends_the_statement_and_the_transaction_goes_on() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(2);
    let proxy = start_proxy(c, &hash_slot_table("acct4", "id", &L2));
    let mut s1 = proxy.conn().await;
    let mut s2 = proxy.conn().await;
    let (a, b) = accounts(&mut s1, "acct4", 2).await;
    s2.query_drop("SET SESSION innodb_lock_wait_timeout = 1")
        .await
        .expect("set");
    s1.query_drop("BEGIN").await.expect("begin");
    set_balance(&mut s1, "acct4", a[0], 1)
        .await
        .expect("lock a");
    s2.query_drop("BEGIN").await.expect("begin");
    set_balance(&mut s2, "acct4", b[0], 2).await.expect("s2 b");
    let r = set_balance(&mut s2, "acct4", a[0], 2).await;
    expect_code(r, 1205, "waiting on s1's lock");
    // As in MySQL, only the statement is gone: the transaction goes on, on both nodes.
    set_balance(&mut s2, "acct4", a[1], 3)
        .await
        .expect("after the lock wait");
    set_balance(&mut s2, "acct4", b[1], 3)
        .await
        .expect("after the lock wait");
    s2.query_drop("ROLLBACK").await.expect("rollback");
    s1.query_drop("COMMIT").await.expect("commit");
    assert_eq!(balance(&c.direct(0), "acct4", a[0]).await, Some(1));
    for (node, id) in [(1, b[0]), (0, a[1]), (1, b[1])] {
        assert_eq!(
            balance(&c.direct(node), "acct4", id).await,
            Some(100),
            "s2's ROLLBACK undid every node"
        );
    }
}

#[tokio::test]
async fn a_deadlock_rolls_back_every_branch() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(2);
    let proxy = start_proxy(c, &hash_slot_table("acct10", "id", &L2));
    let mut s1 = proxy.conn().await;
    let mut s2 = proxy.conn().await;
    let (a, b) = accounts(&mut s1, "acct10", 2).await;
    s1.query_drop("BEGIN").await.expect("begin");
    set_balance(&mut s1, "acct10", a[0], 1)
        .await
        .expect("s1 a0");
    s2.query_drop("BEGIN").await.expect("begin");
    set_balance(&mut s2, "acct10", b[0], 2)
        .await
        .expect("s2 b0");
    set_balance(&mut s2, "acct10", a[1], 2)
        .await
        .expect("s2 a1");
    // s1 waits for a1, then s2 asks for a0: node 0 sees the deadlock and picks a victim.
    let (a0, a1) = (a[0], a[1]);
    let blocked = tokio::spawn(async move {
        let r = set_balance(&mut s1, "acct10", a1, 1).await;
        (s1, r)
    });
    // Once s1 waits on node 0 (a lock wait in its InnoDB), not after a guessed pause.
    lock_wait_on(c, 0, "s1 never waited for a1's lock").await;
    let r2 = set_balance(&mut s2, "acct10", a0, 2).await;
    let (mut s1, r1) = blocked.await.expect("s1");
    let s2_victim = match (&r1, &r2) {
        (Ok(()), Err(mysql_async::Error::Server(e))) if e.code == 1213 => true,
        (Err(mysql_async::Error::Server(e)), Ok(())) if e.code == 1213 => false,
        other => panic!("expected one deadlock victim: {other:?}"),
    };
    let (victim, survivor) = if s2_victim {
        (&mut s2, &mut s1)
    } else {
        (&mut s1, &mut s2)
    };
    survivor
        .query_drop("COMMIT")
        .await
        .expect("the survivor commits");
    // The victim is out of the transaction, as in MySQL: its ROLLBACK has nothing to undo.
    victim.query_drop("ROLLBACK").await.expect("rollback");
    let b0 = balance(&c.direct(1), "acct10", b[0]).await;
    if s2_victim {
        assert_eq!(
            b0,
            Some(100),
            "the victim's write on node 1 was rolled back with its deadlocked branch"
        );
        assert_eq!(balance(&c.direct(0), "acct10", a0).await, Some(1));
    } else {
        assert_eq!(b0, Some(2), "the survivor's write on node 1 committed");
        assert_eq!(balance(&c.direct(0), "acct10", a0).await, Some(2));
    }
    for i in 0..2 {
        assert!(prepared(c, i).await.is_empty());
    }
}

/// An autocommit statement is a deadlock's victim on its node: it had a transaction of its
/// own, rolled back whole, so the proxy sends it again and the client gets its OK, never the
/// 1213 (one MariaDB could give it here, the proxy's own work behind a client could too).
#[tokio::test]
async fn an_autocommit_write_a_deadlock_ended_is_sent_again() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(2);
    let proxy = start_proxy(c, &hash_slot_table("acct12", "id", &L2));
    let mut client = proxy.conn().await;
    let (a, _) = accounts(&mut client, "acct12", 2).await;
    let (lo, hi) = (a[0].min(a[1]), a[0].max(a[1]));
    // Another session on the node, heavier than the client's statement (InnoDB's victim is
    // the transaction with fewer changes), holds `hi`.
    let mut other = c.direct(0).get_conn().await.expect("direct");
    other
        .query_drop("CREATE TABLE IF NOT EXISTS acct12_weight (n INT)")
        .await
        .expect("create");
    other.query_drop("BEGIN").await.expect("begin");
    other
        .query_drop("INSERT INTO acct12_weight SELECT seq FROM seq_1_to_200")
        .await
        .expect("weight");
    other
        .query_drop(format!("UPDATE acct12 SET balance = 10 WHERE id = {hi}"))
        .await
        .expect("hi");
    // The client's statement locks `lo`, then waits for `hi`.
    let sql = format!("UPDATE acct12 SET balance = balance + 1 WHERE id IN ({lo}, {hi})");
    let blocked = tokio::spawn(async move {
        let r = client.query_drop(sql).await;
        (client, r)
    });
    lock_wait_on(c, 0, "the client's UPDATE never waited for hi").await;
    // The cycle: the other session asks for `lo`; the client's statement is the victim.
    other
        .query_drop(format!("UPDATE acct12 SET balance = 20 WHERE id = {lo}"))
        .await
        .expect("the other session gets lo");
    other.query_drop("COMMIT").await.expect("commit");
    let (mut client, r) = blocked.await.expect("client");
    r.expect("the client's autocommit UPDATE was sent again, not failed with 1213");
    let rows: Vec<(i64, i64)> = client
        .query(format!(
            "SELECT id, balance FROM acct12 WHERE id IN ({lo}, {hi}) ORDER BY id"
        ))
        .await
        .expect("read");
    assert_eq!(rows, vec![(lo, 21), (hi, 11)], "run once, after the other");
    let reruns = proxy
        .shared
        .metrics
        .transactions
        .with_label_values(&["autocommit_deadlock_rerun"])
        .get();
    assert!(reruns >= 1, "no rerun counted");
    other
        .query_drop("DROP TABLE acct12_weight")
        .await
        .expect("drop");
}

#[tokio::test]
async fn a_multi_node_write_that_fails_on_one_node_is_undone_and_the_transaction_goes_on() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(2);
    let proxy = start_proxy(c, &hash_slot_table("acct11", "id", &L2));
    let mut conn = proxy.conn().await;
    let (a, b) = accounts(&mut conn, "acct11", 3).await;
    // b[0] exists: a two-node INSERT of a new id on node 0 and b[0] fails on node 1.
    conn.exec_drop(
        "DELETE FROM acct11 WHERE id IN (?, ?, ?)",
        (a[0], a[1], b[1]),
    )
    .await
    .expect("delete");
    for commit in [false, true] {
        conn.query_drop("BEGIN").await.expect("begin");
        conn.exec_drop("INSERT INTO acct11 VALUES (?, 1)", (a[0],))
            .await
            .expect("first insert");
        let r = conn
            .exec_drop("INSERT INTO acct11 VALUES (?, 1), (?, 1)", (a[1], b[0]))
            .await;
        expect_code(r, 1062, "the duplicate on node 1");
        conn.exec_drop("INSERT INTO acct11 VALUES (?, 1)", (b[1],))
            .await
            .expect("after the failed statement");
        conn.query_drop(if commit { "COMMIT" } else { "ROLLBACK" })
            .await
            .expect("end");
        let want = |v: i64| if commit { Some(v) } else { None };
        assert_eq!(balance(&c.direct(0), "acct11", a[0]).await, want(1));
        assert_eq!(
            balance(&c.direct(0), "acct11", a[1]).await,
            None,
            "the failed statement's row on node 0 was undone"
        );
        assert_eq!(balance(&c.direct(1), "acct11", b[0]).await, Some(100));
        assert_eq!(balance(&c.direct(1), "acct11", b[1]).await, want(1));
    }
}

#[tokio::test]
async fn a_node_killed_during_a_transaction_fails_it_and_leaves_nothing_half_done() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(2);
    let proxy = start_proxy(c, &hash_slot_table("acct5", "id", &L2));
    let mut conn = proxy.conn().await;
    let (a, b) = accounts(&mut conn, "acct5", 1).await;
    conn.query_drop("BEGIN").await.expect("begin");
    set_balance(&mut conn, "acct5", a[0], 0).await.expect("w0");
    set_balance(&mut conn, "acct5", b[0], 200)
        .await
        .expect("w1");
    c.kill_node(1);
    let r = conn.query_drop("COMMIT").await;
    let (code, message) = server_error(r);
    assert!(matches!(code, 1213 | 1180), "{code} {message}");
    c.start_node(1);
    let _ = conn.query_drop("ROLLBACK").await;
    assert_eq!(balance(&c.direct(0), "acct5", a[0]).await, Some(100));
    assert_eq!(balance(&c.direct(1), "acct5", b[0]).await, Some(100));
    assert!(prepared(c, 1).await.is_empty());
    // The session goes on.
    transfer(&mut conn, "acct5", a[0], b[0], 5)
        .await
        .expect("after the node is back");
    assert_eq!(total(&mut conn, "acct5").await, 200);
}

#[tokio::test]
async fn best_effort_mode_commits_node_by_node_without_xa() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(2);
    let rules = rules_toml(c, &hash_slot_table("acct6", "id", &L2)).replace(
        "users = [{ name = \"app\", password = \"app\" }]",
        "users = [{ name = \"app\", password = \"app\" }]\ntransaction_mode = \"best_effort\"",
    );
    let proxy = start_proxy_with_rules(rules);
    let mut conn = proxy.conn().await;
    let (a, b) = accounts(&mut conn, "acct6", 1).await;
    transfer(&mut conn, "acct6", a[0], b[0], 30)
        .await
        .expect("transfer");
    assert_eq!(balance(&c.direct(0), "acct6", a[0]).await, Some(70));
    assert_eq!(balance(&c.direct(1), "acct6", b[0]).await, Some(130));
    let m = &proxy.shared.metrics.transactions;
    assert_eq!(m.with_label_values(&["commit_in_turn"]).get(), 1);
    assert_eq!(m.with_label_values(&["commit_xa"]).get(), 0);
}

/// Kills a proxy stopped at `hold` in the middle of a cross-node commit, starts another
/// one, and returns how long until no branch is left prepared.
async fn killed_at(hold: &str, table: &str) -> (Vec<i64>, Vec<i64>, Duration) {
    let c = Cluster::shared(2);
    let rules = rules_toml(c, &hash_slot_table(table, "id", &L2));
    let mut held = ProxyProcess::start(&rules, &[("SHARDPROXY_XA_HOLD", hold)]);
    let pool = held.pool();
    let mut conn = pool.get_conn().await.expect("conn");
    let (a, b) = accounts(&mut conn, table, 1).await;
    let (x, y) = (a[0], b[0]);
    let t = table.to_string();
    let commit = tokio::spawn(async move {
        let _ = transfer(&mut conn, &t, x, y, 40).await;
    });
    // Wait for the branch on node 1 to be prepared.
    let deadline = Instant::now() + Duration::from_secs(10);
    while prepared(c, 1).await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the commit never reached PREPARE"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if hold == "decided" {
        until_decided(c).await;
    }
    held.kill();
    commit.abort();
    let _ = pool.disconnect().await;
    let killed = Instant::now();
    let _recovering = start_proxy(c, &hash_slot_table(table, "id", &L2));
    loop {
        if prepared(c, 0).await.is_empty() && prepared(c, 1).await.is_empty() {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(10),
            "branches still prepared 10 s after the coordinator died: {:?}",
            prepared(c, 1).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (a, b, killed.elapsed())
}

#[tokio::test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test hook: cargo test --features test-hooks (scripts/test.sh)"
)]
async fn a_proxy_killed_after_prepare_is_rolled_back_by_recovery() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(2);
    let (a, b, took) = killed_at("prepared", "acct7").await;
    eprintln!("recovered in {took:?}");
    assert_eq!(balance(&c.direct(0), "acct7", a[0]).await, Some(100));
    assert_eq!(balance(&c.direct(1), "acct7", b[0]).await, Some(100));
}

#[tokio::test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test hook: cargo test --features test-hooks (scripts/test.sh)"
)]
async fn a_proxy_killed_after_the_decision_is_committed_by_recovery() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(2);
    let (a, b, took) = killed_at("decided", "acct8").await;
    eprintln!("recovered in {took:?}");
    assert_eq!(balance(&c.direct(0), "acct8", a[0]).await, Some(60));
    assert_eq!(balance(&c.direct(1), "acct8", b[0]).await, Some(140));
}

#[tokio::test]
async fn blind_kills_during_a_transfer_load_leave_no_transfer_half_applied() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(2);
    let rules = rules_toml(c, &hash_slot_table("acct9", "id", &L2));
    let (a, b) = {
        let setup = start_proxy(c, &hash_slot_table("acct9", "id", &L2));
        let mut conn = setup.conn().await;
        accounts(&mut conn, "acct9", 4).await
    };
    let mut committed_total = 0u64;
    for (kill, after_ms) in [(0, 300u64), (1, 650), (2, 1000)] {
        let mut proxy = ProxyProcess::start(&rules, &[]);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut workers = Vec::new();
        for w in 0..4usize {
            let (a, b, pool, stop) = (a.clone(), b.clone(), proxy.pool(), stop.clone());
            workers.push(tokio::spawn(async move {
                let mut ok = 0u64;
                let Ok(mut conn) = pool.get_conn().await else {
                    return ok;
                };
                let mut i = 0usize;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let (x, y) = (a[(w + i) % a.len()], b[(w + 2 * i) % b.len()]);
                    let (from, to) = if w % 2 == 0 { (x, y) } else { (y, x) };
                    match transfer_as(&mut conn, "acct9", from, to, (w + 1) as i64, w % 2 == 0)
                        .await
                    {
                        Ok(()) => ok += 1,
                        Err(mysql_async::Error::Server(_)) => {}
                        Err(_) => break, // the proxy is gone
                    }
                    i += 1;
                }
                ok
            }));
        }
        tokio::time::sleep(Duration::from_millis(after_ms)).await;
        proxy.kill();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in workers {
            committed_total += w.await.expect("worker");
        }
        // Another proxy finishes whatever the killed one left prepared.
        let killed = Instant::now();
        let recovering = ProxyProcess::start(&rules, &[]);
        while !(prepared(c, 0).await.is_empty() && prepared(c, 1).await.is_empty()) {
            assert!(
                killed.elapsed() < Duration::from_secs(10),
                "kill {kill}: branches still prepared after 10 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut conn = recovering.pool().get_conn().await.expect("conn");
        assert_eq!(
            total(&mut conn, "acct9").await,
            800,
            "kill {kill}: a transfer was half applied"
        );
    }
    assert!(committed_total > 0, "no transfer committed at all");
}

#[tokio::test]
async fn a_deadlock_across_nodes_is_broken_in_seconds() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(2);
    let proxy = start_proxy(c, &hash_slot_table("acct12", "id", &L2));
    for (round, prepared) in [(1u64, true), (2, false)] {
        let mut s1 = proxy.conn().await;
        let mut s2 = proxy.conn().await;
        let (a, b) = accounts(&mut s1, "acct12", 1).await;
        let (x, y) = (a[0], b[0]);
        let set = move |v: i64, id: i64| format!("UPDATE acct12 SET balance = {v} WHERE id = {id}");
        async fn run(
            conn: &mut Conn,
            sql: String,
            prepared: bool,
        ) -> Result<(), mysql_async::Error> {
            if prepared {
                conn.exec_drop(sql, ()).await
            } else {
                conn.query_drop(sql).await
            }
        }
        // Each node sees only a lock wait: without the proxy both would wait 50 s.
        s1.query_drop("BEGIN").await.expect("begin");
        run(&mut s1, set(1, x), prepared).await.expect("s1 x");
        s2.query_drop("BEGIN").await.expect("begin");
        run(&mut s2, set(2, y), prepared).await.expect("s2 y");
        let started = Instant::now();
        let t1 = tokio::spawn(async move {
            let r = run(&mut s1, set(1, y), prepared).await;
            (s1, r)
        });
        // s1 waits for y's lock on node 1 before s2 crosses it.
        lock_wait_on(c, 1, "s1 never waited for y's lock").await;
        let t2 = tokio::spawn(async move {
            let r = run(&mut s2, set(2, x), prepared).await;
            (s2, r)
        });
        let (mut s1, r1) = t1.await.expect("s1");
        let (mut s2, r2) = t2.await.expect("s2");
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(10),
            "the deadlock lasted {took:?}"
        );
        // The younger transaction (s2, connected second) is the victim and gets 1213.
        assert!(r1.is_ok(), "{r1:?}");
        let e = expect_code(r2, 1213, "the victim of a deadlock across nodes");
        assert!(e.contains("across nodes"), "{e}");
        s1.query_drop("COMMIT").await.expect("commit");
        s2.query_drop("ROLLBACK").await.expect("rollback");
        assert_eq!(balance(&c.direct(0), "acct12", x).await, Some(1));
        assert_eq!(balance(&c.direct(1), "acct12", y).await, Some(1));
        assert_eq!(proxy.shared.metrics.deadlocks.get(), round);
    }
}

#[tokio::test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test hook: cargo test --features test-hooks (scripts/test.sh)"
)]
async fn a_node_killed_with_a_prepared_branch_gets_it_committed_when_it_is_back() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(2);
    let rules = rules_toml(c, &hash_slot_table("acct13", "id", &L2));
    let mut held = ProxyProcess::start(&rules, &[("SHARDPROXY_XA_HOLD", "decided")]);
    let pool = held.pool();
    let mut conn = pool.get_conn().await.expect("conn");
    let (a, b) = accounts(&mut conn, "acct13", 1).await;
    let (x, y) = (a[0], b[0]);
    let commit = tokio::spawn(async move {
        let _ = transfer(&mut conn, "acct13", x, y, 40).await;
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while prepared(c, 1).await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the commit never reached PREPARE"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The decision is committed on node 0; node 1 dies with its branch prepared, and so
    // does the coordinator.
    until_decided(c).await;
    c.kill_node(1);
    held.kill();
    commit.abort();
    let _ = pool.disconnect().await;
    let _recovering = start_proxy(c, &hash_slot_table("acct13", "id", &L2));
    c.start_node(1);
    let back = Instant::now();
    while !prepared(c, 1).await.is_empty() {
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "the branch is still prepared 10 s after its node came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(balance(&c.direct(0), "acct13", x).await, Some(60));
    assert_eq!(
        balance(&c.direct(1), "acct13", y).await,
        Some(140),
        "the prepared branch survived the node's crash and was committed"
    );
}

/// The decision table dropped under the proxy (a database emptied and restored from a dump,
/// which does not carry it): the next transaction over two nodes makes it again and
/// commits, instead of failing its COMMIT.
#[tokio::test]
async fn a_decision_table_dropped_under_the_proxy_is_made_again_at_the_next_commit() {
    let _one = ONE_AT_A_TIME.lock().await;
    let c = Cluster::shared(2);
    let proxy = start_proxy(c, &hash_slot_table("acct_gone", "id", &L2));
    let mut conn = proxy.conn().await;
    let (a, b) = accounts(&mut conn, "acct_gone", 1).await;
    transfer(&mut conn, "acct_gone", a[0], b[0], 5)
        .await
        .expect("the first transfer, which makes the decision table");
    for node in 0..2 {
        let mut direct = c.direct(node).get_conn().await.expect("a node");
        direct
            .query_drop("DROP TABLE IF EXISTS shardproxy_xa")
            .await
            .expect("drop the decision table");
    }
    transfer(&mut conn, "acct_gone", a[0], b[0], 5)
        .await
        .expect("a transfer after the decision table went away");
    transfer_as(&mut conn, "acct_gone", b[0], a[0], 3, false)
        .await
        .expect("and one more, as text");
    assert_eq!(total(&mut conn, "acct_gone").await, 200);
    assert_eq!(balance(&c.direct(0), "acct_gone", a[0]).await, Some(93));
}
