//! Session statements: BEGIN / COMMIT / ROLLBACK, SET, `SET autocommit`, USE. They change
//! the state the door keeps on every node connection; the client gets one OK.

use super::door::{Door, Sink};
use crate::error::MyError;
use crate::plan::SessionOp;

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
        SessionOp::Lock { sql, nodes } => {
            unlock(door).await?;
            // LOCK TABLES commits the open transaction, as in MySQL.
            door.end(true).await?;
            for node in nodes {
                door.run_on(*node, sql).await?;
                door.state_mut().locked.push(*node);
            }
            Ok(())
        }
        SessionOp::Unlock => unlock(door).await,
    }
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

    #[tokio::test]
    async fn table_locks_are_released_where_they_were_taken() {
        let mut door = FakeDoor::new(3);
        let mut sink = RecordSink::text();
        let lock = SessionOp::Lock {
            sql: "LOCK TABLES t WRITE".into(),
            nodes: vec![0, 2],
        };
        apply(&mut door, &mut sink, &lock).await.unwrap();
        // A second LOCK TABLES releases the first one's locks first, as MySQL does.
        let again = SessionOp::Lock {
            sql: "LOCK TABLES u READ".into(),
            nodes: vec![1],
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
    async fn a_transaction_begins_on_the_first_node_it_touches_and_ends_there() {
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
        let e = single(
            &mut door,
            &mut sink,
            0,
            Stmt::new("UPDATE t SET v = 2", &[]),
            Access::Write,
        )
        .await
        .unwrap_err();
        assert_eq!(e.error.code, 1235);
        single(
            &mut door,
            &mut sink,
            0,
            Stmt::new("SELECT 1 FROM t", &[]),
            Access::Read,
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
    }

    #[tokio::test]
    async fn autocommit_off_opens_a_transaction_that_multi_node_writes_refuse() {
        let mut door = FakeDoor::new(2);
        let mut sink = RecordSink::text();
        apply(&mut door, &mut sink, &SessionOp::SetAutocommit(false))
            .await
            .unwrap();
        let stmts = [
            (0, Stmt::new("DELETE FROM t", &[])),
            (1, Stmt::new("DELETE FROM t", &[])),
        ];
        let e = crate::exec::scatter::append(
            &mut door,
            &mut sink,
            &stmts,
            crate::plan::OkMerge::Sum,
            Access::Write,
        )
        .await
        .unwrap_err();
        assert!(
            e.error.message.contains("2 nodes inside a transaction"),
            "{}",
            e.error.message
        );
        // DDL runs outside the transaction.
        door.ddl(true).await.unwrap();
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
    }
}
