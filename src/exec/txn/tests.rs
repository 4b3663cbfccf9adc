use super::*;
use crate::exec::door::{Run, Stmt};
use crate::exec::fake::{Canned, FakeDoor, RecordSink};
use crate::exec::route::single;

const X: &str = "'sp:test:1',X'647330',21328";

async fn on(door: &mut FakeDoor, node: usize, sql: &str, access: Access) {
    let mut sink = RecordSink::text();
    single(door, &mut sink, node, Stmt::new(sql, &[]), access)
        .await
        .unwrap();
}

async fn write(door: &mut FakeDoor, node: usize) {
    on(door, node, "UPDATE t SET v = v + 1", Access::Write).await;
}

async fn read(door: &mut FakeDoor, node: usize) {
    on(door, node, "SELECT v FROM t", Access::Read).await;
}

fn counts(door: &FakeDoor) -> Vec<String> {
    door.tx_counts.lock().unwrap().clone()
}

#[tokio::test]
async fn one_node_commits_without_xa() {
    let mut door = FakeDoor::new(2);
    door.begin("BEGIN").await.unwrap();
    write(&mut door, 1).await;
    read(&mut door, 1).await;
    door.end(true).await.unwrap();
    assert_eq!(
        door.sql_on(1),
        [
            "BEGIN",
            "UPDATE t SET v = v + 1",
            "SELECT v FROM t",
            "COMMIT"
        ]
    );
    assert!(door.outside.is_empty());
    assert_eq!(counts(&door), ["commit"]);
}

#[tokio::test]
async fn two_writers_commit_in_two_phases_with_the_decision_on_the_first_branch() {
    let mut door = FakeDoor::new(3);
    door.begin("BEGIN").await.unwrap();
    write(&mut door, 0).await;
    write(&mut door, 2).await;
    read(&mut door, 1).await;
    door.end(true).await.unwrap();
    let insert = "INSERT INTO `db`.shardproxy_xa (gtrid, outcome) VALUES ('sp:test:1', 'commit')";
    assert_eq!(
        door.sql_on(0),
        ["BEGIN", "UPDATE t SET v = v + 1", insert, "COMMIT"]
    );
    assert_eq!(
        door.sql_on(2),
        [
            format!("XA START {X}"),
            "UPDATE t SET v = v + 1".into(),
            format!("XA END {X}; XA PREPARE {X}"),
            format!("XA COMMIT {X}"),
        ]
    );
    assert_eq!(
        door.sql_on(1)[2],
        format!("XA END {X}; XA COMMIT {X} ONE PHASE"),
        "a branch that only read commits in one phase"
    );
    // Prepared everywhere before the decision; the decision before any XA COMMIT.
    let log = door.log();
    let at = |s: &str| log.iter().position(|(_, q)| q == s).unwrap();
    assert!(at(&format!("XA END {X}; XA PREPARE {X}")) < at("COMMIT"));
    assert!(at("COMMIT") < at(&format!("XA COMMIT {X}")));
    assert_eq!(counts(&door), ["commit_xa"]);
    assert!(door.state().tx.is_none());
}

#[tokio::test]
async fn a_decision_table_gone_under_the_proxy_is_made_again_and_the_commit_goes_on() {
    let mut door = FakeDoor::new(2);
    // The table was dropped on node 0 since the proxy made it: the record's first INSERT
    // finds none.
    door.fail_times(
        0,
        "INSERT INTO",
        1146,
        "Table 'db.shardproxy_xa' doesn't exist",
        1,
    );
    door.begin("BEGIN").await.unwrap();
    write(&mut door, 0).await;
    write(&mut door, 1).await;
    door.end(true).await.unwrap();
    let insert = "INSERT INTO `db`.shardproxy_xa (gtrid, outcome) VALUES ('sp:test:1', 'commit')";
    assert_eq!(
        door.sql_on(0),
        ["BEGIN", "UPDATE t SET v = v + 1", insert, insert, "COMMIT"]
    );
    let outside: Vec<&str> = door.outside.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(outside.len(), 3, "made, forgotten, made again: {outside:?}");
    assert!(outside[1].contains("forget"), "{outside:?}");
    assert_eq!(door.sql_on(1)[3], format!("XA COMMIT {X}"));
    assert_eq!(counts(&door), ["commit_xa"]);
}

#[tokio::test]
async fn one_writer_among_readers_needs_no_decision() {
    let mut door = FakeDoor::new(2);
    door.begin("BEGIN").await.unwrap();
    read(&mut door, 0).await;
    write(&mut door, 1).await;
    door.end(true).await.unwrap();
    assert_eq!(door.sql_on(0), ["BEGIN", "SELECT v FROM t", "COMMIT"]);
    assert_eq!(
        door.sql_on(1).last().unwrap(),
        &format!("XA END {X}; XA COMMIT {X} ONE PHASE")
    );
    assert!(door.outside.is_empty(), "no decision table touched");
}

#[tokio::test]
async fn a_failed_prepare_rolls_every_branch_back() {
    let mut door = FakeDoor::new(3);
    door.fail_on(
        2,
        "XA PREPARE",
        1614,
        "XA_RBDEADLOCK: Transaction branch was rolled back: deadlock was detected",
    );
    door.begin("BEGIN").await.unwrap();
    write(&mut door, 0).await;
    write(&mut door, 1).await;
    write(&mut door, 2).await;
    let e = door.end(true).await.unwrap_err();
    assert_eq!(e.code, 1180);
    assert!(
        e.message.contains("ds2") && e.message.contains("rolled back on every node"),
        "{}",
        e.message
    );
    assert_eq!(door.sql_on(0).last().unwrap(), "ROLLBACK");
    assert_eq!(door.sql_on(1).last().unwrap(), &format!("XA ROLLBACK {X}"));
    assert!(!door
        .log()
        .iter()
        .any(|(_, s)| s == "COMMIT" || s.starts_with("XA COMMIT")));
    assert_eq!(
        door.discarded,
        [2],
        "the branch that failed to prepare is closed"
    );
    assert_eq!(counts(&door), ["failed"]);
}

#[tokio::test]
async fn a_lost_decision_commit_asks_the_record_before_answering() {
    let mut door = FakeDoor::new(2);
    door.begin("BEGIN").await.unwrap();
    write(&mut door, 0).await;
    write(&mut door, 1).await;
    door.break_on(0, "COMMIT");
    door.answer(
        0,
        "SELECT outcome",
        Canned::rows(&["outcome"], &[&["commit"]]),
    );
    door.end(true).await.unwrap();
    assert!(door
        .outside
        .iter()
        .any(|(n, s)| *n == 0 && s.starts_with("INSERT IGNORE")));
    assert_eq!(door.sql_on(1).last().unwrap(), &format!("XA COMMIT {X}"));

    // The record says rollback (the commit never reached the node): every branch rolls back.
    let mut door = FakeDoor::new(2);
    door.begin("BEGIN").await.unwrap();
    write(&mut door, 0).await;
    write(&mut door, 1).await;
    door.break_on(0, "COMMIT");
    door.answer(
        0,
        "SELECT outcome",
        Canned::rows(&["outcome"], &[&["rollback"]]),
    );
    assert_eq!(door.end(true).await.unwrap_err().code, 1180);
    assert_eq!(door.sql_on(1).last().unwrap(), &format!("XA ROLLBACK {X}"));
}

#[tokio::test]
async fn rollback_ends_every_branch() {
    let mut door = FakeDoor::new(2);
    door.begin("BEGIN").await.unwrap();
    write(&mut door, 1).await;
    write(&mut door, 0).await;
    door.end(false).await.unwrap();
    assert_eq!(door.sql_on(1).last().unwrap(), "ROLLBACK");
    assert_eq!(
        door.sql_on(0).last().unwrap(),
        "XA END 'sp:test:1',X'647331',21328; XA ROLLBACK 'sp:test:1',X'647331',21328"
    );
    assert_eq!(counts(&door), ["rollback"]);
}

#[tokio::test]
async fn a_deadlock_on_one_branch_rolls_back_all_of_them() {
    let mut door = FakeDoor::new(2);
    door.begin("BEGIN").await.unwrap();
    write(&mut door, 0).await;
    door.fail_on(
        1,
        "UPDATE",
        1213,
        "Deadlock found when trying to get lock; try restarting transaction",
    );
    let mut sink = RecordSink::text();
    let e = single(
        &mut door,
        &mut sink,
        1,
        Stmt::new("UPDATE t SET v = 0", &[]),
        Access::Write,
    )
    .await
    .unwrap_err();
    assert_eq!(e.error.code, 1213);
    door.settle_tx().await;
    assert!(
        door.state().tx.is_none(),
        "out of the transaction, as in MySQL"
    );
    assert_eq!(door.sql_on(0).last().unwrap(), "ROLLBACK");
    assert!(door.sql_on(1).last().unwrap().contains("XA ROLLBACK"));
    // The next statement runs on its own.
    let res = door
        .start(
            0,
            Stmt::new("SELECT 1", &[]),
            Run {
                access: Access::Read,
                binary: false,
            },
        )
        .await;
    assert!(res.is_ok());
    assert_eq!(door.sql_on(0).last().unwrap(), "SELECT 1");
}

#[tokio::test]
async fn a_write_that_fails_on_some_nodes_is_undone_on_all_and_the_transaction_goes_on() {
    let mut door = FakeDoor::new(2);
    door.begin("BEGIN").await.unwrap();
    door.fail_on(1, "DELETE", 1451, "Cannot delete or update a parent row");
    let stmts = [
        (0, Stmt::new("DELETE FROM t", &[])),
        (1, Stmt::new("DELETE FROM t", &[])),
    ];
    let mut sink = RecordSink::text();
    let e = crate::exec::scatter::append(
        &mut door,
        &mut sink,
        &stmts,
        crate::plan::OkMerge::Sum,
        Access::Write,
    )
    .await
    .unwrap_err();
    assert_eq!(e.error.code, 1451);
    assert_eq!(
        door.sql_on(0),
        [
            "BEGIN",
            "SAVEPOINT shardproxy_stmt",
            "DELETE FROM t",
            "ROLLBACK TO SAVEPOINT shardproxy_stmt"
        ]
    );
    door.settle_tx().await;
    assert!(
        door.state().tx.as_ref().is_some_and(|t| !t.abort),
        "the transaction goes on, as in MySQL"
    );
    // A node that cannot go back to the savepoint: the transaction is rolled back.
    door.fail_on(
        0,
        "ROLLBACK TO",
        1305,
        "SAVEPOINT shardproxy_stmt does not exist",
    );
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
        e.error.message.contains("transaction was rolled back"),
        "{}",
        e.error.message
    );
    door.settle_tx().await;
    assert!(door.state().tx.is_none());
    assert_eq!(door.sql_on(0).last().unwrap(), "ROLLBACK");
}

#[tokio::test]
async fn a_branch_can_open_in_the_statements_own_packet() {
    let mut door = FakeDoor::new(3);
    assert_eq!(
        begin_ahead(&mut door, 0, Access::Write),
        Ok(None),
        "no transaction"
    );
    door.begin("BEGIN").await.unwrap();
    assert_eq!(
        begin_ahead(&mut door, 0, Access::Write),
        Ok(Some(("BEGIN".into(), false)))
    );
    door.state_mut().began(0, false, true);
    assert_eq!(
        begin_ahead(&mut door, 1, Access::Read),
        Ok(Some((format!("XA START {X}"), true)))
    );
    assert_eq!(
        begin_ahead(&mut door, 0, Access::Read),
        Ok(None),
        "open already"
    );
    door.state_mut()
        .tx
        .as_mut()
        .unwrap()
        .savepoints
        .push(("a".into(), "SAVEPOINT a".into()));
    assert_eq!(
        begin_ahead(&mut door, 2, Access::Read),
        Ok(None),
        "savepoints to replay: opened apart"
    );
}

#[tokio::test]
async fn a_single_node_write_sets_no_savepoint() {
    let mut door = FakeDoor::new(2);
    door.begin("BEGIN").await.unwrap();
    write(&mut door, 0).await;
    write(&mut door, 1).await;
    assert!(!door.log().iter().any(|(_, s)| s.contains("SAVEPOINT")));
}

#[tokio::test]
async fn best_effort_commits_in_turn_and_says_what_committed() {
    let mut door = FakeDoor::new(3);
    door.mode = TxMode::BestEffort;
    door.begin("BEGIN").await.unwrap();
    write(&mut door, 0).await;
    write(&mut door, 1).await;
    write(&mut door, 2).await;
    assert_eq!(door.sql_on(1)[0], "BEGIN", "no XA");
    door.fail_on(1, "COMMIT", 1180, "Got error 28 during COMMIT");
    let e = door.end(true).await.unwrap_err();
    assert_eq!(e.code, 1180);
    assert!(
        e.message.contains("committed on `ds0` already"),
        "{}",
        e.message
    );
    assert_eq!(door.sql_on(2).last().unwrap(), "ROLLBACK");
}

#[tokio::test]
async fn a_lost_branch_fails_commit_and_rolls_back_the_rest() {
    let mut door = FakeDoor::new(2);
    door.begin("BEGIN").await.unwrap();
    write(&mut door, 0).await;
    write(&mut door, 1).await;
    door.state_mut().lost(1);
    assert_eq!(door.end(true).await.unwrap_err().code, 1213);
    assert_eq!(door.sql_on(0).last().unwrap(), "ROLLBACK");
    assert!(door.state().tx.is_none());
}
