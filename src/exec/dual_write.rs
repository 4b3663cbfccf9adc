//! DualWrite: a write to slots being moved (`crate::migrate`). It runs on the source, whose
//! answer (and error) is the client's; the images of the rows it changed are then written
//! to the target, inside the same transaction, before the source commits.
//!
//! Why images and not the statement: the target may not hold a row yet (the backfill copies
//! it later) or may hold it already; `v = v + 1` run on both would be lost or counted twice.
//! Images are taken under the source's row locks (the rows are locked by a locking read
//! before the statement and stay locked to the commit), and the target's branch holds its
//! own row locks from its REPLACE to its commit (sent with the source's: `super::txn`). So
//! for each row the target gets the images in the order the source committed them, and
//! the backfill, which copies
//! each batch under the same locks, interleaves correctly with them (`docs/design.md`).
//!
//! Outside a transaction the write gets one of its own (BEGIN on the source, the target's
//! branch, COMMIT), so the client's OK comes after both nodes have it. A failure on the
//! target never reaches the client: that branch is dropped and the migration counts it
//! (its verify step finds the rows and copies them again).

use mysql_common::value::Value;

use super::door::{Access, Door, NodeError, NodeResult, OkInfo, Run, Sink, Stmt};
use super::txn::Transactions;
use crate::plan::moving::{Changed, DualWrite};

/// Placeholders one statement may carry (MySQL's limit is 65,535).
const MAX_PARAMS: usize = 60_000;

/// How many times an autocommit dual write is run again after a deadlock on its source.
const DEADLOCK_RETRIES: u32 = 5;

/// Runs the write and answers the client with the source's OK.
///
/// An autocommit statement runs in a transaction of the proxy's own (its locking reads, the
/// statement, the images): where that transaction is a deadlock's victim on the source
/// (1213), nothing of it committed, and the statement alone, as the client sent it, would
/// not have waited for those locks. So it runs again, up to [`DEADLOCK_RETRIES`] times,
/// before the client sees the deadlock. Inside the client's own transaction a deadlock is
/// the client's, as on MariaDB.
pub async fn run<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    w: &DualWrite,
) -> Result<(), NodeError> {
    let st = door.state();
    let implicit = st.tx.is_none() && st.autocommit && !st.ddl;
    let mut retries = 0;
    let ok = loop {
        if implicit {
            door.state_mut().begin("BEGIN");
        }
        match write(door, sink.binary(), w).await {
            Ok(ok) => break ok,
            Err(e) => {
                if implicit {
                    let _ = door.end(false).await;
                }
                door.settle_tx().await;
                if implicit && e.error.code == 1213 && retries < DEADLOCK_RETRIES {
                    retries += 1;
                    door.count_tx("dual_write_deadlock_retried");
                    tokio::time::sleep(std::time::Duration::from_millis(1 << retries)).await;
                    continue;
                }
                return Err(e);
            }
        }
    };
    if implicit {
        door.end(true).await.map_err(|error| NodeError {
            node: w.source,
            error,
            broke: false,
        })?;
    }
    door.ran_on(w.source, ok.last_insert_id != 0);
    sink.ok(&ok, door.status(), false);
    Ok(())
}

async fn write<D: Door>(door: &mut D, binary: bool, w: &DualWrite) -> Result<OkInfo, NodeError> {
    let s = w.source;
    // The source's branch opens with the first statement there (its BEGIN in the same
    // packet where the door can: the locking read, or a text statement).
    let mut keys: Vec<Vec<Value>> = match &w.rows {
        Changed::Keys(k) => k.clone(),
        Changed::Select { sql, params } => rows_of(door, s, sql, params, Access::Read).await?,
        Changed::Generated => Vec::new(),
    };
    let run = Run {
        access: Access::Write,
        binary,
    };
    let res = door.start(s, Stmt::new(&w.sql, &w.params), run).await?;
    let ok = res.ok();
    res.finish().await?;
    if matches!(w.rows, Changed::Generated) && ok.last_insert_id != 0 {
        keys.extend((0..ok.affected).map(|i| vec![Value::UInt(ok.last_insert_id + i)]));
    }
    keys.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    keys.dedup();
    if keys.is_empty() {
        return Ok(ok);
    }
    let width = w.key.len();
    let mut images = Vec::with_capacity(keys.len());
    for chunk in keys.chunks((MAX_PARAMS / width.max(1)).max(1)) {
        let params: Vec<Value> = chunk.iter().flatten().cloned().collect();
        images.extend(rows_of(door, s, &w.images_sql(chunk.len()), &params, Access::Write).await?);
    }
    shadow(door, w, &keys, images).await;
    Ok(ok)
}

/// Writes the images to the target: each row that still exists replaced whole, each one
/// that is gone deleted. A failure is counted for the migration, never returned.
async fn shadow<D: Door>(
    door: &mut D,
    w: &DualWrite,
    keys: &[Vec<Value>],
    images: Vec<Vec<Value>>,
) {
    let t = w.target;
    let lost_before = door.state().tx.as_ref().is_some_and(|x| x.lost);
    door.state_mut().shadowing = Some(t);
    let r = images_to(door, w, keys, images).await;
    door.state_mut().shadowing = None;
    if let Err(e) = r {
        door.shadow_failed(t, &e.error);
        super::txn::drop_shadow(door, t).await;
        if !lost_before {
            if let Some(x) = door.state_mut().tx.as_mut() {
                x.lost = false;
            }
        }
    }
}

async fn images_to<D: Door>(
    door: &mut D,
    w: &DualWrite,
    keys: &[Vec<Value>],
    images: Vec<Vec<Value>>,
) -> Result<(), NodeError> {
    let t = w.target;
    let k = w.key.len();
    let present: Vec<&[Value]> = images.iter().map(|r| &r[..k.min(r.len())]).collect();
    let gone: Vec<&Vec<Value>> = keys
        .iter()
        .filter(|key| !present.iter().any(|p| same(p, key)))
        .collect();
    let run = Run {
        access: Access::Write,
        binary: true,
    };
    if let Some(first) = images.first() {
        let width = first.len().saturating_sub(k).max(1);
        for chunk in images.chunks((MAX_PARAMS / width).max(1)) {
            let params: Vec<Value> = chunk
                .iter()
                .flat_map(|r| r.iter().skip(k).cloned())
                .collect();
            let sql = w.replace_sql(width, chunk.len());
            let res = door.start(t, Stmt::new(&sql, &params), run).await?;
            res.finish().await?;
        }
    }
    for chunk in gone.chunks((MAX_PARAMS / k.max(1)).max(1)) {
        let params: Vec<Value> = chunk.iter().flat_map(|r| r.iter().cloned()).collect();
        let sql = w.delete_sql(chunk.len());
        let res = door.start(t, Stmt::new(&sql, &params), run).await?;
        res.finish().await?;
    }
    Ok(())
}

/// Keys compare as MySQL's text forms (an INT key given as `'5'` is the row `5`).
fn same(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| crate::value::text_form(x) == crate::value::text_form(y))
}

/// Every row of a query the proxy runs inside the session's transaction on `node`.
async fn rows_of<D: Door>(
    door: &mut D,
    node: usize,
    sql: &str,
    params: &[Value],
    access: Access,
) -> Result<Vec<Vec<Value>>, NodeError> {
    let run = Run {
        access,
        binary: true,
    };
    let mut res = door.start(node, Stmt::new(sql, params), run).await?;
    let mut out = Vec::new();
    while let Some(row) = res.next().await? {
        out.push(row.into_iter().map(|v| v.unwrap_or(Value::NULL)).collect());
    }
    res.finish().await?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::exec::fake::{Canned, Event, FakeDoor, RecordSink};

    /// `UPDATE t SET v = v + 1 WHERE id = 10` moving from ds0 to ds2 (`t` keyed on `id`).
    fn update() -> DualWrite {
        DualWrite {
            source: 0,
            target: 2,
            sql: "UPDATE t SET v = v + 1 WHERE id = 10".into(),
            params: vec![],
            table: "`t`".into(),
            key: Arc::from(vec!["`id`".to_string()]),
            rows: Changed::Select {
                sql: "SELECT `t`.`id` FROM `t` WHERE id = 10 FOR UPDATE".into(),
                params: vec![],
            },
        }
    }

    fn door() -> FakeDoor {
        let mut d = FakeDoor::new(3);
        d.answer(0, "SELECT `t`.`id` FROM", Canned::rows(&["id"], &[&["10"]]));
        d.answer(0, "UPDATE t", Canned::ok(1, 0));
        d.answer(
            0,
            "SELECT `id`, `t`.*",
            Canned::rows(&["id", "id", "v"], &[&["10", "10", "6"]]),
        );
        d
    }

    fn at(log: &[(usize, String)], node: usize, starts: &str) -> usize {
        log.iter()
            .position(|(n, s)| *n == node && s.starts_with(starts))
            .unwrap_or_else(|| panic!("no `{starts}` on node {node} in {log:?}"))
    }

    #[tokio::test]
    async fn an_autocommit_write_gets_a_transaction_and_its_images_commit_after_the_source() {
        let mut d = door();
        let mut sink = RecordSink::text();
        run(&mut d, &mut sink, &update()).await.unwrap();
        let log = d.log();
        let begin = at(&log, 0, "BEGIN");
        let lock = at(&log, 0, "SELECT `t`.`id` FROM `t` WHERE id = 10 FOR UPDATE");
        let write = at(&log, 0, "UPDATE t SET v = v + 1");
        let image = at(
            &log,
            0,
            "SELECT `id`, `t`.* FROM `t` WHERE (`id`) IN ((?)) FOR UPDATE",
        );
        let replace = at(&log, 2, "REPLACE INTO `t` VALUES (?, ?)");
        let commit = at(&log, 0, "COMMIT");
        let target_commit = at(&log, 2, "XA END");
        assert!(begin < lock && lock < write && write < image && image < replace);
        // Both commits after the images are written (sent at once: see `commit_tx`).
        assert!(replace < commit && replace < target_commit, "{log:?}");
        assert!(log[target_commit].1.contains("XA COMMIT"), "{log:?}");
        assert_eq!(
            sink.events,
            vec![Event::Ok {
                affected: 1,
                last_insert_id: 0,
                more: false
            }]
        );
        assert!(d.state().tx.is_none(), "the write's own transaction ended");
    }

    #[tokio::test]
    async fn a_row_the_write_removed_is_deleted_on_the_target() {
        let mut d = FakeDoor::new(3);
        d.answer(0, "SELECT `t`.`id` FROM", Canned::rows(&["id"], &[&["10"]]));
        d.answer(0, "DELETE FROM t", Canned::ok(1, 0));
        d.answer(
            0,
            "SELECT `id`, `t`.*",
            Canned::rows(&["id", "id", "v"], &[]),
        );
        let mut w = update();
        w.sql = "DELETE FROM t WHERE id = 10".into();
        run(&mut d, &mut RecordSink::text(), &w).await.unwrap();
        let on2 = d.sql_on(2);
        assert!(
            on2.iter()
                .any(|s| s == "DELETE FROM `t` WHERE (`id`) IN ((?))"),
            "{on2:?}"
        );
        assert!(!on2.iter().any(|s| s.starts_with("REPLACE")), "{on2:?}");
    }

    #[tokio::test]
    async fn a_failure_on_the_target_is_counted_and_never_the_clients() {
        let mut d = door();
        d.fail_on(2, "REPLACE", 1146, "Table 'shop.t' doesn't exist");
        let mut sink = RecordSink::text();
        run(&mut d, &mut sink, &update()).await.unwrap();
        assert_eq!(*d.shadow_failures.lock().unwrap(), vec![2]);
        let log = d.log();
        // The target's branch is rolled back; the source commits.
        let rolled = at(&log, 2, "XA END");
        assert!(log[rolled].1.contains("XA ROLLBACK"), "{log:?}");
        assert!(d.sql_on(0).iter().any(|s| s == "COMMIT"), "{log:?}");
        assert!(matches!(sink.events[..], [Event::Ok { affected: 1, .. }]));
    }

    #[tokio::test]
    async fn images_committed_beside_a_source_commit_that_failed_count_as_failed() {
        let mut d = door();
        d.fail_on(0, "COMMIT", 1180, "Got error 6 during COMMIT");
        let mut sink = RecordSink::text();
        let r = run(&mut d, &mut sink, &update()).await;
        assert_eq!(r.map_err(|e| e.error.code).err(), Some(1180));
        // The target has images of a write that did not commit: the verify must run again.
        assert_eq!(*d.shadow_failures.lock().unwrap(), vec![2]);
    }

    #[tokio::test]
    async fn a_deadlock_on_the_target_is_counted_and_never_the_clients() {
        let mut d = door();
        d.fail_on(2, "REPLACE", 1213, "Deadlock found when trying to get lock");
        let mut sink = RecordSink::text();
        run(&mut d, &mut sink, &update()).await.unwrap();
        assert_eq!(*d.shadow_failures.lock().unwrap(), vec![2]);
        assert!(d.sql_on(0).iter().any(|s| s == "COMMIT"), "{:?}", d.log());
        assert!(matches!(sink.events[..], [Event::Ok { affected: 1, .. }]));
        // Inside the client's transaction too: it goes on and commits.
        let mut d = door();
        d.fail_on(2, "REPLACE", 1213, "Deadlock found when trying to get lock");
        d.begin("BEGIN").await.unwrap();
        run(&mut d, &mut RecordSink::text(), &update())
            .await
            .unwrap();
        d.end(true).await.unwrap();
        assert!(d.sql_on(0).iter().any(|s| s == "COMMIT"), "{:?}", d.log());
    }

    #[tokio::test]
    async fn an_autocommit_write_that_a_deadlock_ends_on_the_source_runs_again() {
        let mut d = door();
        d.fail_times(
            0,
            "UPDATE t",
            1213,
            "Deadlock found when trying to get lock",
            2,
        );
        let mut sink = RecordSink::text();
        run(&mut d, &mut sink, &update()).await.unwrap();
        assert!(matches!(sink.events[..], [Event::Ok { affected: 1, .. }]));
        let on_source = d.sql_on(0);
        assert_eq!(
            on_source
                .iter()
                .filter(|s| s.as_str() == "ROLLBACK")
                .count(),
            2,
            "{on_source:?}"
        );
        assert_eq!(
            on_source.iter().filter(|s| s.as_str() == "COMMIT").count(),
            1
        );
        assert_eq!(
            d.tx_counts
                .lock()
                .unwrap()
                .iter()
                .filter(|c| c.as_str() == "dual_write_deadlock_retried")
                .count(),
            2
        );
        // A deadlock that keeps coming is the client's in the end.
        let mut d = door();
        d.fail_on(
            0,
            "UPDATE t",
            1213,
            "Deadlock found when trying to get lock",
        );
        let e = run(&mut d, &mut RecordSink::text(), &update())
            .await
            .unwrap_err();
        assert_eq!(e.error.code, 1213);
        // Inside the client's own transaction it is the client's at once, as on MariaDB.
        let mut d = door();
        d.fail_times(
            0,
            "UPDATE t",
            1213,
            "Deadlock found when trying to get lock",
            1,
        );
        d.begin("BEGIN").await.unwrap();
        let e = run(&mut d, &mut RecordSink::text(), &update())
            .await
            .unwrap_err();
        assert_eq!(e.error.code, 1213);
        assert_eq!(
            d.sql_on(0)
                .iter()
                .filter(|s| s.contains("UPDATE t"))
                .count(),
            1
        );
    }

    #[tokio::test]
    async fn a_failure_on_the_source_is_the_clients_and_nothing_reaches_the_target() {
        let mut d = door();
        d.fail_on(0, "UPDATE t", 1062, "Duplicate entry");
        let e = run(&mut d, &mut RecordSink::text(), &update())
            .await
            .unwrap_err();
        assert_eq!(e.error.code, 1062);
        assert!(d.sql_on(2).is_empty(), "{:?}", d.log());
        assert!(d.sql_on(0).iter().any(|s| s == "ROLLBACK"));
    }

    #[tokio::test]
    async fn inside_a_transaction_the_images_wait_for_its_commit_and_commit_after_it() {
        let mut d = door();
        d.answer(1, "UPDATE u", Canned::ok(1, 0));
        d.begin("BEGIN").await.unwrap();
        // The client's own write on another node first.
        crate::exec::route::single(
            &mut d,
            &mut RecordSink::text(),
            1,
            Stmt::new("UPDATE u SET x = 1 WHERE id = 3", &[]),
            Access::Write,
        )
        .await
        .unwrap();
        run(&mut d, &mut RecordSink::text(), &update())
            .await
            .unwrap();
        let tx = d.state().tx.clone().unwrap();
        let shadows: Vec<(usize, bool)> = tx.branches.iter().map(|b| (b.node, b.shadow)).collect();
        assert_eq!(shadows, [(1, false), (0, false), (2, true)]);
        assert!(!d.sql_on(0).iter().any(|s| s.contains("COMMIT")), "not yet");
        d.end(true).await.unwrap();
        let log = d.log();
        // Two writers of their own: two phases between ds1 and ds0; the images after both.
        let decided = at(&log, 1, "COMMIT");
        let images = log
            .iter()
            .rposition(|(n, s)| *n == 2 && s.contains("XA COMMIT"))
            .unwrap();
        assert!(decided < images, "{log:?}");
        assert!(log[images].1.contains("ONE PHASE"), "{log:?}");
    }
}
