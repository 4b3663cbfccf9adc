//! The proxy's own locks during a move never become a client's error. A write to moving
//! slots also writes its rows' images to the target, in a branch of the client's
//! transaction; under REPEATABLE READ the image of a delete of a row the target does not hold
//! yet takes a gap lock there, and two clients' images can deadlock on the target where the
//! same statements on one MariaDB (or on the source alone) take no conflicting locks at all.
//! Before the fix the victim's whole transaction was rolled back in silence: its statements
//! had answered OK, its COMMIT answered OK, and its delete and insert were gone.
//! Its own test binary (its own cluster): ds0-ds2 hold data, node 3 the metadata schema.

mod common;

use std::time::Duration;

use common::moves::*;
use common::*;
use mysql_async::prelude::Queryable;

const L2: [(u16, u16); 2] = [(0, 511), (512, 1023)];

#[tokio::test]
async fn a_deadlock_between_two_clients_images_on_the_target_is_no_clients_error() {
    let c = Cluster::shared(4);
    let meta = "meta_locks";
    fresh_schema(c, meta).await;
    let tables = hash_slot_table("t_locks", "id", &L2);
    let dir = tempfile::tempdir().expect("temp dir");
    let a = watching(&dir, "a", rules(c, meta, &tables));
    let pool = a.pool();
    const ROWS: i64 = 2000;
    load(c, &pool, "t_locks", ROWS).await;
    // ds0's two largest keys, and two new keys above them: the slow backfill copies the
    // smallest keys first, so none of the four reaches the target while the test runs, and
    // all four fall in one gap there (after the copied rows).
    let on_ds0: Vec<i64> = (1..=ROWS + 200)
        .filter(|k| node_of_key(&L2, *k) == 0)
        .collect();
    let old: Vec<i64> = on_ds0.iter().copied().filter(|k| *k <= ROWS).collect();
    let (k1, k2) = (old[old.len() - 2], old[old.len() - 1]);
    let new: Vec<i64> = on_ds0.iter().copied().filter(|k| *k > ROWS).collect();
    let (k5, k6) = (new[0], new[1]);
    let mut ops_a = ops(a.admin_port.expect("admin")).await;
    ops_a
        .query_drop("MIGRATE SLOTS 0-511 OF t_locks TO ds2 RATE 5")
        .await
        .expect("MIGRATE");
    until_step(&mut ops_a, "1", "backfill", Duration::from_secs(30)).await;
    let before = deadlocks_on(c, 2).await;

    let mut s1 = pool.get_conn().await.expect("s1");
    let mut s2 = pool.get_conn().await.expect("s2");
    // Each delete's image deletes a key the target does not hold: a gap lock there, which
    // the other's insert image then waits for. On the source the deletes lock their rows
    // only and the inserts go into another gap: no statement here waits on one MariaDB.
    s1.query_drop("BEGIN").await.expect("s1 begin");
    s1.exec_drop("DELETE FROM t_locks WHERE id = ?", (k1,))
        .await
        .expect("s1 delete");
    s2.query_drop("BEGIN").await.expect("s2 begin");
    s2.exec_drop("DELETE FROM t_locks WHERE id = ?", (k2,))
        .await
        .expect("s2 delete");
    let first = tokio::spawn(async move {
        let r = s1
            .exec_drop("INSERT INTO t_locks (id, v) VALUES (?, 5)", (k5,))
            .await;
        (s1, r)
    });
    lock_wait_on(c, 2, "s1's image never waited on the target").await;
    s2.exec_drop("INSERT INTO t_locks (id, v) VALUES (?, 6)", (k6,))
        .await
        .expect("s2 insert");
    let (mut s1, r) = first.await.expect("s1");
    r.expect("s1 insert");
    s1.query_drop("COMMIT").await.expect("s1 commit");
    s2.query_drop("COMMIT").await.expect("s2 commit");
    assert_eq!(
        deadlocks_on(c, 2).await,
        before + 1,
        "the two images deadlocked on the target (else this test tests nothing)"
    );
    assert!(
        a.shared.metrics.shadow_failures.get() >= 1,
        "the victim's image write was counted for the migration"
    );

    // The clients' rows are as they wrote them, before and after the move is called off.
    let mut conn = pool.get_conn().await.expect("proxy");
    let got: Vec<i64> = conn
        .exec(
            "SELECT id FROM t_locks WHERE id IN (?, ?, ?, ?) ORDER BY id",
            (k1, k2, k5, k6),
        )
        .await
        .expect("read");
    assert_eq!(got, vec![k5, k6]);
    ops_a.query_drop("ABORT").await.expect("ABORT");
    until_step(&mut ops_a, "1", "aborted", Duration::from_secs(60)).await;
    let got: Vec<i64> = conn
        .exec(
            "SELECT id FROM t_locks WHERE id IN (?, ?, ?, ?) ORDER BY id",
            (k1, k2, k5, k6),
        )
        .await
        .expect("read after the abort");
    assert_eq!(got, vec![k5, k6]);
    drop((conn, s1, s2));
    pool.disconnect().await.ok();
}

/// The backfill's locking read of a batch never waits for a client's row while holding the
/// batch's rows before it. A client whose transaction holds the third row of the first batch
/// and then writes the first would close a cycle with such a read, and InnoDB ends one side:
/// the client's transaction (a 1213 one MariaDB would not give two updates of two rows no
/// one else writes) or the backfill. Found as a verify chunk's read ending a client's
/// two-statement transaction during a move of an index table.
#[tokio::test]
async fn the_backfill_gives_way_to_a_clients_transaction_instead_of_deadlocking_it() {
    let c = Cluster::shared(4);
    let meta = "meta_gives_way";
    fresh_schema(c, meta).await;
    let tables = hash_slot_table("t_way", "id", &L2);
    let dir = tempfile::tempdir().expect("temp dir");
    let a = watching(&dir, "a", rules(c, meta, &tables));
    let pool = a.pool();
    const ROWS: i64 = 100;
    load(c, &pool, "t_way", ROWS).await;
    let mut on_ds0: Vec<i64> = (1..=ROWS).filter(|k| node_of_key(&L2, *k) == 0).collect();
    on_ds0.sort_unstable();
    // RATE 20: batches of 20 rows from the smallest key.
    let (first, third) = (on_ds0[0], on_ds0[2]);
    let deadlocks = deadlocks_on(c, 0).await;
    let mut s1 = pool.get_conn().await.expect("s1");
    s1.query_drop("BEGIN").await.expect("begin");
    s1.exec_drop("UPDATE t_way SET v = 30 WHERE id = ?", (third,))
        .await
        .expect("update of the third row");
    let mut ops_a = ops(a.admin_port.expect("admin")).await;
    ops_a
        .query_drop("MIGRATE SLOTS 0-511 OF t_way TO ds2 RATE 20 AUTO")
        .await
        .expect("MIGRATE");
    // The backfill waits for the third row (before the fix, holding the first two).
    lock_wait_on(c, 0, "the backfill never waited for the client's row").await;
    s1.exec_drop("UPDATE t_way SET v = 10 WHERE id = ?", (first,))
        .await
        .expect("update of the first row: no deadlock with the backfill");
    s1.query_drop("COMMIT").await.expect("commit");
    // InnoDB may end either side of such a cycle; the backfill, when it loses, copies its
    // batch again unseen: the count is what tells.
    assert_eq!(
        deadlocks_on(c, 0).await,
        deadlocks,
        "the backfill and the client's transaction deadlocked on the source"
    );
    until_step(&mut ops_a, "1", "done", Duration::from_secs(120)).await;
    let got: Vec<(i64, i64)> = s1
        .exec(
            "SELECT id, v FROM t_way WHERE id IN (?, ?) ORDER BY id",
            (first, third),
        )
        .await
        .expect("read after the move");
    assert_eq!(got, vec![(first, 10), (third, 30)]);
    drop(s1);
    pool.disconnect().await.ok();
}
