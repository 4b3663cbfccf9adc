//! What a replica must never do: answer for a node it does not replicate, miss a write of
//! the same packet, or take a write.

use super::*;

/// A write and a read of its row in one COM_QUERY (`INSERT ...; SELECT ...`, as a driver
/// with CLIENT_MULTI_STATEMENTS sends a script): the read sees the write, though ds0's
/// replicas, two seconds behind, are in rotation for reads that need nothing.
#[tokio::test]
async fn a_read_after_a_write_in_one_packet_sees_it() {
    let _one = SERIAL.lock().await;
    let c = cluster();
    fresh(c).await;
    let proxy = start_proxy_with_rules(replica_rules(c, "check_ms = 50\nmax_lag_ms = 8000"));
    let admin = proxy.admin_port.expect("an admin port");
    until_health(admin, "ds0/r1", "up", Duration::from_secs(5)).await;
    until_health(admin, "ds0/r2", "up", Duration::from_secs(5)).await;
    let k = key_on_node(&[(0, 511), (512, 1023)], 0);
    exec(c, 0, &format!("INSERT INTO t VALUES ({k}, 'first')")).await;
    for r in [1, 2] {
        caught_up(c, r, 0, Duration::from_secs(5)).await;
        set_delay(c, r, 2).await;
    }
    let pool = proxy.pool();
    let mut conn = pool.get_conn().await.expect("a connection");
    let mut servers = Vec::new();
    for i in 0..40 {
        let mut r = conn
            .query_iter(format!(
                "REPLACE INTO t VALUES ({k}, 'v{i}'); SELECT @@server_id, v FROM t WHERE id = {k}"
            ))
            .await
            .expect("the packet");
        let mut got: Vec<(u32, String)> = Vec::new();
        while !r.is_empty() {
            got.extend(r.collect::<(u32, String)>().await.expect("a result"));
        }
        drop(r);
        let (server, v) = got.pop().expect("the read's row");
        assert_eq!(
            v,
            format!("v{i}"),
            "the read in the write's packet, from server {server}"
        );
        servers.push(server);
        // Another session's read may take a replica meanwhile: they stay in rotation.
        let other: Option<(u32, String)> = pool
            .get_conn()
            .await
            .expect("a connection")
            .query_first(format!("SELECT @@server_id, v FROM t WHERE id = {k}"))
            .await
            .expect("another session's read");
        servers.push(other.expect("the row").0);
    }
    assert!(
        servers.iter().any(|s| *s != 1),
        "the replicas served other reads: {servers:?}"
    );
    for r in [1, 2] {
        set_delay(c, r, 0).await;
    }
    drop(conn);
    pool.disconnect().await.ok();
}

/// A SELECT whose stored function writes (an audit row) looks like any read, and the
/// proxy's node account (root here) is not held back by a replica's `read_only`. The
/// replica connections' own READ ONLY transactions refuse the write there (1792) before
/// any answer, and the statement runs on the primary: every audit row is on the primary,
/// and reaches the replicas by replication only.
#[tokio::test]
async fn a_select_whose_function_writes_writes_on_the_primary() {
    let _one = SERIAL.lock().await;
    let c = cluster();
    fresh(c).await;
    exec(c, 0, "DROP TABLE IF EXISTS audit").await;
    exec(c, 0, "CREATE TABLE audit (n INT)").await;
    exec(
        c,
        0,
        "CREATE OR REPLACE FUNCTION bump() RETURNS INT DETERMINISTIC MODIFIES SQL DATA \
         BEGIN INSERT INTO audit VALUES (1); RETURN 1; END",
    )
    .await;
    let k = key_on_node(&[(0, 511), (512, 1023)], 0);
    exec(c, 0, &format!("INSERT INTO t VALUES ({k}, 'row')")).await;
    for r in [1, 2] {
        caught_up(c, r, 0, Duration::from_secs(5)).await;
    }
    let proxy = start_proxy_with_rules(replica_rules(c, "check_ms = 50\nmax_lag_ms = 8000"));
    let admin = proxy.admin_port.expect("an admin port");
    until_health(admin, "ds0/r1", "up", Duration::from_secs(5)).await;
    until_health(admin, "ds0/r2", "up", Duration::from_secs(5)).await;
    // The replicas two seconds behind: a session that reads its function's rows at once
    // finds them only on the primary.
    for r in [1, 2] {
        set_delay(c, r, 2).await;
    }
    let pool = proxy.pool();
    let mut conn = pool.get_conn().await.expect("a connection");
    // Plain reads go to the replicas (before the session writes).
    let mut servers = Vec::new();
    for _ in 0..6 {
        let s: Option<u32> = conn
            .query_first(format!("SELECT @@server_id FROM t WHERE id = {k}"))
            .await
            .expect("a read");
        servers.push(s.expect("the row"));
    }
    assert!(servers.iter().any(|s| *s != 1), "{servers:?}");
    for i in 0..20 {
        // Text and prepared.
        let got: Option<(i64, String)> = if i % 2 == 0 {
            conn.query_first(format!("SELECT bump(), v FROM t WHERE id = {k}"))
                .await
        } else {
            conn.exec_first("SELECT bump(), v FROM t WHERE id = ?", (k,))
                .await
        }
        .expect("a SELECT of a writing function answers as on one MariaDB");
        assert_eq!(got, Some((1, "row".to_string())));
        // Its write is the session's: read at once, it is there.
        let seen: Option<i64> = conn
            .query_first("SELECT COUNT(*) FROM audit")
            .await
            .expect("the session reads its audit rows");
        assert_eq!(seen, Some(i + 1), "the session's own function's writes");
    }
    // Inside a READ ONLY transaction the write is refused, as one MariaDB refuses it.
    let mut ro = pool.get_conn().await.expect("a connection");
    ro.query_drop("START TRANSACTION READ ONLY")
        .await
        .expect("begin read only");
    let refused = ro
        .query_first::<(i64, String), _>(format!("SELECT bump(), v FROM t WHERE id = {k}"))
        .await;
    assert!(
        matches!(&refused, Err(mysql_async::Error::Server(e)) if e.code == 1792),
        "{refused:?}"
    );
    ro.query_drop("ROLLBACK").await.expect("rollback");
    drop(ro);
    // A session that set its transactions READ WRITE (its SETs replayed on the replica's
    // connection) does not make that connection writable.
    let mut rw = pool.get_conn().await.expect("a connection");
    rw.query_drop("SET SESSION TRANSACTION READ WRITE")
        .await
        .expect("READ WRITE");
    rw.query_drop("SET autocommit = 1, tx_read_only = 0")
        .await
        .expect("tx_read_only = 0");
    // Before it writes, its reads use the replicas (after, its own writes keep it on the
    // primary while the replicas lag).
    let first: Option<u32> = rw
        .query_first(format!("SELECT @@server_id FROM t WHERE id = {k}"))
        .await
        .expect("a read");
    assert!(
        matches!(first, Some(2 | 3)),
        "a READ WRITE session's read on a replica: {first:?}"
    );
    for _ in 0..4 {
        let got: Option<(i64, String)> = rw
            .query_first(format!("SELECT bump(), v FROM t WHERE id = {k}"))
            .await
            .expect("a SELECT of a writing function in a READ WRITE session");
        assert_eq!(got, Some((1, "row".to_string())));
    }
    drop(rw);
    for r in [1, 2] {
        set_delay(c, r, 0).await;
        caught_up(c, r, 0, Duration::from_secs(10)).await;
    }
    for node in [0, 1, 2] {
        let pool = c.direct(node);
        let mut d = pool.get_conn().await.expect("a direct connection");
        let n: Option<i64> = d
            .query_first("SELECT COUNT(*) FROM audit")
            .await
            .expect("audit rows");
        assert_eq!(
            n,
            Some(24),
            "node {node}: every audit row written once, on the primary"
        );
        drop(d);
        pool.disconnect().await.ok();
    }
    drop(conn);
    pool.disconnect().await.ok();
    exec(c, 0, "DROP FUNCTION bump").await;
    exec(c, 0, "DROP TABLE audit").await;
}

/// A replica listed under the wrong node (ds1's replica is node 1, which replicates ds0's
/// primary): its GTID position may well look in sync with ds1's (one replication domain,
/// alike numbers), but its rows are ds0's. It stays out of rotation, saying why, and ds1's
/// reads go to ds1's primary and find ds1's rows.
#[tokio::test]
async fn a_replica_of_another_nodes_primary_never_serves_that_node() {
    let _one = SERIAL.lock().await;
    let c = cluster();
    fresh(c).await;
    let rules = replica_rules(c, "check_ms = 50\nmax_lag_ms = 1000");
    let right = format!("replicas = [\"{}\"] }}", c.url(4));
    assert!(rules.contains(&right), "{rules}");
    let rules = rules.replace(&right, &format!("replicas = [\"{}\"] }}", c.url(1)));
    let proxy = start_proxy_with_rules(rules);
    let admin = proxy.admin_port.expect("an admin port");
    let layout = [(0, 511), (512, 1023)];
    let (on0, on1) = (key_on_node(&layout, 0), key_on_node(&layout, 1));
    let pool = proxy.pool();
    let mut w = pool.get_conn().await.expect("a connection");
    for k in [on0, on1] {
        w.exec_drop("INSERT INTO t VALUES (?, 'row')", (k,))
            .await
            .expect("insert");
    }
    caught_up(c, 1, 0, Duration::from_secs(5)).await;
    until_health(admin, "ds0/r1", "up", Duration::from_secs(5)).await;
    until_health(admin, "ds1/r1", "out of rotation", Duration::from_secs(2)).await;
    // Checks go on: it never joins.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let row = node_row(admin, "ds1/r1").await;
    assert!(row["health"].starts_with("out of rotation"), "{row:?}");
    assert!(
        row["replication"].starts_with("not replicating its primary"),
        "{row:?}"
    );
    assert!(row["last_error"].contains("server_id 1"), "{row:?}");
    let mut r = pool.get_conn().await.expect("a connection");
    for _ in 0..50 {
        let got: Option<(u32, String)> = r
            .exec_first("SELECT @@server_id, v FROM t WHERE id = ?", (on1,))
            .await
            .expect("a read of ds1");
        assert_eq!(
            got,
            Some((4, "row".to_string())),
            "ds1's row, from its primary"
        );
    }
    // ds0's own replica still serves ds0.
    let mut servers = Vec::new();
    for _ in 0..10 {
        let got: Option<(u32, String)> = r
            .exec_first("SELECT @@server_id, v FROM t WHERE id = ?", (on0,))
            .await
            .expect("a read of ds0");
        let (server, v) = got.expect("ds0's row");
        assert_eq!(v, "row");
        servers.push(server);
    }
    assert!(
        servers.contains(&2),
        "ds0's reads reach its replica: {servers:?}"
    );
    drop((w, r));
    pool.disconnect().await.ok();
}
