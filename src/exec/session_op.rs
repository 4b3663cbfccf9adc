//! Session statements: BEGIN / COMMIT / ROLLBACK, SET, `SET autocommit`, USE. They change
//! the state the door keeps on every node connection; the client gets one OK.

use super::door::{Door, Sink};
use super::txn::Transactions;
use crate::error::MyError;
use crate::plan::{SavepointKind, SessionOp};

/// Carries out `op` and answers it.
pub async fn apply<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    op: &SessionOp,
) -> Result<(), MyError> {
    apply_quietly(door, op).await?;
    sink.ok(&Default::default(), door.status(), false);
    Ok(())
}

/// Carries out `op` without answering (one assignment of several in a SET).
pub async fn apply_quietly<D: Door>(door: &mut D, op: &SessionOp) -> Result<(), MyError> {
    match op {
        SessionOp::Begin(sql) => door.begin(sql).await,
        SessionOp::Commit => door.end(true).await,
        SessionOp::Rollback => door.end(false).await,
        SessionOp::SetAutocommit(on) => door.set_autocommit(*on).await,
        SessionOp::Use(db) => door.use_db(db).await,
        SessionOp::Set(sql) => door.set(sql).await,
        SessionOp::Lock { locks } => {
            unlock(door).await?;
            // LOCK TABLES commits the open transaction, as in MySQL.
            door.end(true).await?;
            for (node, sql) in locks {
                if let Err(e) = door.run_on(*node, sql).await {
                    // All or nothing, as one server's LOCK TABLES.
                    unlock(door).await?;
                    return Err(e.into());
                }
                door.state_mut().locked.push(*node);
            }
            Ok(())
        }
        SessionOp::Unlock => unlock(door).await,
        SessionOp::Savepoint { name, kind, .. } => savepoint(door, name, *kind).await,
        SessionOp::Kill { id, query_only } => door.kill(*id, *query_only).await,
    }
}

/// A savepoint statement on every branch of the transaction; the list of savepoints follows
/// MySQL's rules (a name set again moves; ROLLBACK TO drops the later ones; RELEASE drops
/// it and the later ones).
async fn savepoint<D: Door>(door: &mut D, name: &str, kind: SavepointKind) -> Result<(), MyError> {
    if door.state().tx.is_none() && !door.state().autocommit {
        door.state_mut().begin("BEGIN");
    }
    let Some(tx) = door.state().tx.as_ref() else {
        // Outside a transaction MySQL takes a SAVEPOINT and forgets it at once.
        return match kind {
            SavepointKind::Set => Ok(()),
            _ => Err(no_savepoint(name)),
        };
    };
    let at = tx.savepoints.iter().position(|(n, _)| n == name);
    if kind != SavepointKind::Set && at.is_none() {
        return Err(no_savepoint(name));
    }
    // Written by the proxy from the name: the client's text never goes in a batch.
    let quoted = crate::sql::write::quoted(name);
    let sql = match kind {
        SavepointKind::Set => format!("SAVEPOINT {quoted}"),
        SavepointKind::RollbackTo => format!("ROLLBACK TO SAVEPOINT {quoted}"),
        SavepointKind::Release => format!("RELEASE SAVEPOINT {quoted}"),
    };
    let sql = sql.as_str();
    let stmts: Vec<(usize, String)> = tx
        .branches
        .iter()
        .map(|b| (b.node, sql.to_string()))
        .collect();
    let results = door.run_each(&stmts).await;
    if let Some(e) = results.into_iter().find_map(Result::err) {
        if kind == SavepointKind::RollbackTo {
            // Some branches went back and some did not: nothing consistent is left.
            door.state_mut().doom();
        }
        return Err(e.error);
    }
    if let Some(tx) = door.state_mut().tx.as_mut() {
        match (kind, at) {
            (SavepointKind::Set, _) => {
                tx.savepoints.retain(|(n, _)| n != name);
                tx.savepoints.push((name.to_string(), sql.to_string()));
            }
            (SavepointKind::RollbackTo, Some(i)) => tx.savepoints.truncate(i + 1),
            (SavepointKind::Release, Some(i)) => tx.savepoints.truncate(i),
            _ => {}
        }
    }
    Ok(())
}

fn no_savepoint(name: &str) -> MyError {
    MyError::new(1305, format!("SAVEPOINT {name} does not exist"))
}

/// Releases the session's table locks on every node that holds some.
async fn unlock<D: Door>(door: &mut D) -> Result<(), MyError> {
    let nodes = std::mem::take(&mut door.state_mut().locked);
    let mut first_err = None;
    for node in nodes {
        if let Err(e) = door.run_on(node, "UNLOCK TABLES").await {
            first_err.get_or_insert(e.error);
        }
    }
    first_err.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::door::{Access, Stmt};
    use crate::exec::fake::{FakeDoor, RecordSink};
    use crate::exec::route::single;
    use crate::plan::SavepointKind;

    #[tokio::test]
    async fn table_locks_are_released_where_they_were_taken() {
        let mut door = FakeDoor::new(3);
        let mut sink = RecordSink::text();
        let lock = SessionOp::Lock {
            locks: vec![
                (0, "LOCK TABLES t WRITE".into()),
                (2, "LOCK TABLES t WRITE".into()),
            ],
        };
        apply(&mut door, &mut sink, &lock).await.unwrap();
        // A second LOCK TABLES releases the first one's locks first, as MySQL does.
        let again = SessionOp::Lock {
            locks: vec![(1, "LOCK TABLES u READ".into())],
        };
        apply(&mut door, &mut sink, &again).await.unwrap();
        apply(&mut door, &mut sink, &SessionOp::Unlock)
            .await
            .unwrap();
        // Nothing left to release.
        apply(&mut door, &mut sink, &SessionOp::Unlock)
            .await
            .unwrap();
        assert_eq!(door.sql_on(0), vec!["LOCK TABLES t WRITE", "UNLOCK TABLES"]);
        assert_eq!(door.sql_on(2), vec!["LOCK TABLES t WRITE", "UNLOCK TABLES"]);
        assert_eq!(door.sql_on(1), vec!["LOCK TABLES u READ", "UNLOCK TABLES"]);
        assert!(door.state().locked.is_empty());
    }

    #[tokio::test]
    async fn a_transaction_begins_on_the_first_node_it_touches() {
        let mut door = FakeDoor::new(2);
        let mut sink = RecordSink::text();
        apply(&mut door, &mut sink, &SessionOp::Begin("BEGIN".into()))
            .await
            .unwrap();
        assert!(door.log().is_empty(), "BEGIN waits for the first statement");
        single(
            &mut door,
            &mut sink,
            1,
            Stmt::new("UPDATE t SET v = 1", &[]),
            Access::Write,
        )
        .await
        .unwrap();
        apply(&mut door, &mut sink, &SessionOp::Commit)
            .await
            .unwrap();
        assert_eq!(
            door.sql_on(1),
            vec!["BEGIN", "UPDATE t SET v = 1", "COMMIT"]
        );
        assert!(door.sql_on(0).is_empty());
    }

    #[tokio::test]
    async fn autocommit_off_opens_a_transaction_that_multi_node_writes_join() {
        let mut door = FakeDoor::new(2);
        let mut sink = RecordSink::text();
        apply(&mut door, &mut sink, &SessionOp::SetAutocommit(false))
            .await
            .unwrap();
        let stmts = [
            (0, Stmt::new("DELETE FROM t", &[])),
            (1, Stmt::new("DELETE FROM t", &[])),
        ];
        crate::exec::scatter::append(
            &mut door,
            &mut sink,
            &stmts,
            crate::plan::OkMerge::Sum,
            Access::Write,
        )
        .await
        .unwrap();
        assert_eq!(
            door.sql_on(0),
            vec!["BEGIN", "SAVEPOINT shardproxy_stmt", "DELETE FROM t"]
        );
        assert_eq!(door.sql_on(1)[2], "DELETE FROM t");
        assert!(door.sql_on(1)[0].starts_with("XA START"));
        // DDL commits the transaction first and runs outside any.
        door.ddl(true).await.unwrap();
        assert!(door.state().tx.is_none());
        assert_eq!(door.sql_on(0).last().unwrap(), "COMMIT");
        let before = door.log().len();
        crate::exec::scatter::append(
            &mut door,
            &mut sink,
            &stmts,
            crate::plan::OkMerge::Copies,
            Access::Write,
        )
        .await
        .unwrap();
        door.ddl(false).await.unwrap();
        assert_eq!(door.log().len(), before + 2, "no BEGIN around DDL");
    }

    #[tokio::test]
    async fn savepoints_reach_every_branch_and_follow_mysqls_rules() {
        let mut door = FakeDoor::new(2);
        let mut sink = RecordSink::text();
        let sp = |sql: &str, name: &str, kind| SessionOp::Savepoint {
            sql: sql.into(),
            name: name.into(),
            kind,
        };
        let e = apply(
            &mut door,
            &mut sink,
            &sp("ROLLBACK TO a", "a", SavepointKind::RollbackTo),
        )
        .await
        .unwrap_err();
        assert_eq!(e.code, 1305, "no transaction, no savepoint");
        apply(&mut door, &mut sink, &SessionOp::Begin("BEGIN".into()))
            .await
            .unwrap();
        single(
            &mut door,
            &mut sink,
            0,
            Stmt::new("UPDATE t SET v = 1", &[]),
            Access::Write,
        )
        .await
        .unwrap();
        apply(
            &mut door,
            &mut sink,
            &sp("SAVEPOINT a", "a", SavepointKind::Set),
        )
        .await
        .unwrap();
        single(
            &mut door,
            &mut sink,
            1,
            Stmt::new("UPDATE t SET v = 2", &[]),
            Access::Write,
        )
        .await
        .unwrap();
        apply(
            &mut door,
            &mut sink,
            &sp("SAVEPOINT b", "b", SavepointKind::Set),
        )
        .await
        .unwrap();
        apply(
            &mut door,
            &mut sink,
            &sp("ROLLBACK TO SAVEPOINT a", "a", SavepointKind::RollbackTo),
        )
        .await
        .unwrap();
        assert_eq!(
            door.sql_on(1)[0],
            "XA START 'sp:test:1',X'647330',21328; SAVEPOINT `a`",
            "the branch opened later has the savepoint too"
        );
        assert_eq!(
            door.sql_on(0)[2..],
            [
                "SAVEPOINT `a`",
                "SAVEPOINT `b`",
                "ROLLBACK TO SAVEPOINT `a`"
            ]
        );
        assert_eq!(
            door.sql_on(1)[2..],
            ["SAVEPOINT `b`", "ROLLBACK TO SAVEPOINT `a`"]
        );
        let e = apply(
            &mut door,
            &mut sink,
            &sp("RELEASE SAVEPOINT b", "b", SavepointKind::Release),
        )
        .await
        .unwrap_err();
        assert_eq!(e.code, 1305, "ROLLBACK TO a dropped b");
    }
}
