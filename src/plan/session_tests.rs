//! The planner's tests of session statements (SET, USE, transactions, locks) and of
//! statements it cannot parse.

use super::tests::{plan_of, refused};
use super::*;

#[test]
fn session_statements() {
    assert_eq!(
        plan_of("BEGIN"),
        Plan::Session(SessionOp::Begin("BEGIN".into()))
    );
    // Written again by the proxy, never sent as the client's text.
    for (sql, begin) in [
        ("start transaction", "START TRANSACTION"),
        ("BEGIN WORK;", "BEGIN"),
        (
            "START TRANSACTION read only, WITH consistent SNAPSHOT",
            "START TRANSACTION READ ONLY, WITH CONSISTENT SNAPSHOT",
        ),
    ] {
        assert_eq!(
            plan_of(sql),
            Plan::Session(SessionOp::Begin(begin.into())),
            "{sql}"
        );
    }
    for bad in [
        "START TRANSACTION foo",
        "START TRANSACTION READ ONLY READ WRITE",
        "BEGIN WORK 1",
    ] {
        assert!(
            matches!(plan_of(bad), Plan::Refuse { code: 1064, .. }),
            "{bad}"
        );
    }
    assert_eq!(plan_of("COMMIT"), Plan::Session(SessionOp::Commit));
    assert_eq!(plan_of("rollback"), Plan::Session(SessionOp::Rollback));
    for (sql, id, query_only) in [
        ("KILL 12", 12, false),
        ("kill connection 12;", 12, false),
        ("KILL QUERY 7", 7, true),
        ("KILL HARD QUERY 7", 7, true),
    ] {
        assert_eq!(
            plan_of(sql),
            Plan::Session(SessionOp::Kill { id, query_only }),
            "{sql}"
        );
    }
    assert!(matches!(plan_of("KILL USER app"), Plan::Refuse { .. }));
    assert!(matches!(plan_of("KILL QUERY ID 5"), Plan::Refuse { .. }));
    for (sql, name, kind) in [
        ("SAVEPOINT s1", "s1", SavepointKind::Set),
        ("savepoint `Django_1`;", "django_1", SavepointKind::Set),
        ("ROLLBACK TO SAVEPOINT s1", "s1", SavepointKind::RollbackTo),
        ("ROLLBACK WORK TO s1", "s1", SavepointKind::RollbackTo),
        ("RELEASE SAVEPOINT s1", "s1", SavepointKind::Release),
    ] {
        assert_eq!(
            plan_of(sql),
            Plan::Session(SessionOp::Savepoint {
                sql: sql.trim_end_matches(';').into(),
                name: name.into(),
                kind
            }),
            "{sql}"
        );
    }
    assert_eq!(
        plan_of("SET autocommit=0"),
        Plan::Session(SessionOp::SetAutocommit(false))
    );
    assert_eq!(
        plan_of("set @@session.autocommit = ON"),
        Plan::Session(SessionOp::SetAutocommit(true))
    );
    assert_eq!(
        plan_of("SET NAMES utf8mb4"),
        Plan::Session(SessionOp::Set("SET NAMES utf8mb4".into()))
    );
    assert_eq!(
        plan_of("USE `shop`"),
        Plan::Session(SessionOp::Use("shop".into()))
    );
    assert!(refused(&plan_of("SET GLOBAL max_connections = 10")).contains("GLOBAL"));
    assert!(matches!(plan_of("SELECT @@version"), Plan::Sticky { .. }));
    assert!(matches!(
        plan_of("SELECT LAST_INSERT_ID()"),
        Plan::Sticky { .. }
    ));
}

#[test]
fn unparsable_statements() {
    // Names no configured table: the node answers (with its own error if it is one).
    assert!(matches!(plan_of("SELEC 1"), Plan::Sticky { .. }));
    match plan_of("SELEC * FROM t_order") {
        Plan::Unroutable { node, reason, .. } => {
            assert_eq!(node, 0);
            assert!(reason.contains("cannot parse"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        plan_of("SELECT * FROM t_merchant LOCK IN SHARE MODE").nodes(),
        vec![1]
    );
}
