//! Tier writes: an UPDATE or DELETE of a time_tier table over several tiers runs on every
//! tier (copies in an overlap window included), affected rows summed; a tier that fails
//! transiently (a lost connection, a deadlock, a lock wait) is retried.

use std::time::Duration;

use mysql_common::value::Value;
use tracing::warn;

use super::door::{Access, Door, NodeError, NodeResult, OkInfo, Run, Sink, Stmt};
use crate::error::MyError;
use crate::plan::tier::TierPlan;

/// Errors worth retrying on a tier: lost or refused connections, deadlocks, lock waits.
pub fn transient(e: &MyError) -> bool {
    matches!(
        e.code,
        1105 | 1205 | 1213 | 1040 | 1053 | 1927 | 2006 | 2013
    )
}

pub struct Retry {
    pub retries: u32,
    pub retry_ms: u64,
}

pub async fn write<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    t: &TierPlan,
    sql: &str,
    params: &[Value],
    retry: Retry,
) -> Result<(), NodeError> {
    let run = Run {
        access: Access::Write,
        binary: sink.binary(),
    };
    let mut total = OkInfo::default();
    let mut done: Vec<String> = Vec::new();
    // Inside a transaction a failed part is not retried: the statement is undone on the
    // parts that ran (a savepoint), as MySQL rolls back a failed statement.
    let in_tx = door.state().tx.is_some() || !door.state().autocommit;
    let nodes: Vec<usize> = t.parts.iter().map(|p| p.node).collect();
    let guarded = super::txn::statement_savepoint(door, &nodes).await?;
    for part in &t.parts {
        let node = part.node;
        let name = door.name(node);
        let mut attempt = 0u32;
        loop {
            let r = async {
                let res = door.start(node, Stmt::new(sql, params), run).await?;
                let ok = res.ok();
                res.finish().await?;
                Ok::<OkInfo, NodeError>(ok)
            }
            .await;
            match r {
                Ok(ok) => {
                    total.affected += ok.affected;
                    total.warnings = total.warnings.saturating_add(ok.warnings);
                    done.push(name.clone());
                    break;
                }
                Err(e) if !in_tx && transient(&e.error) && attempt < retry.retries => {
                    attempt += 1;
                    door.count_tier("write_retry");
                    warn!(
                        node = %name,
                        attempt,
                        "tier write failed transiently, retrying: {}",
                        e.error.message
                    );
                    tokio::time::sleep(Duration::from_millis(retry.retry_ms)).await;
                }
                Err(mut e) => {
                    if guarded && !done.is_empty() {
                        if !super::txn::undo_statement(door, &nodes).await {
                            e.error.from_node = false;
                            e.error.message = format!(
                                "{} (tier node `{name}`); the statement had run on {} already and could not be undone there, so the transaction was rolled back",
                                e.error.message,
                                done.join(", ")
                            );
                        }
                    } else if !done.is_empty() {
                        e.error.from_node = false;
                        e.error.message = format!(
                            "{} (tier node `{name}`; already applied on {})",
                            e.error.message,
                            done.join(", ")
                        );
                    }
                    return Err(e);
                }
            }
        }
    }
    if let Some(p) = t.parts.first() {
        door.ran_on(p.node, false);
    }
    sink.ok(&total, door.status(), false);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::fake::{Canned, Event, FakeDoor, RecordSink};
    use crate::exec::txn::Transactions;
    use crate::plan::rules_tests::tier;
    use crate::plan::TierMode;

    fn write_plan() -> TierPlan {
        tier("UPDATE t_txn SET amount = 1 WHERE account = 3")
    }

    #[tokio::test]
    async fn every_tier_is_written_and_affected_rows_add_up() {
        let t = write_plan();
        let TierMode::Write { sql, params, .. } = &t.mode else {
            panic!("{:?}", t.mode)
        };
        let mut door = FakeDoor::new(3);
        door.answer(0, "UPDATE", Canned::ok(2, 0));
        door.answer(1, "UPDATE", Canned::ok(3, 0));
        door.answer(2, "UPDATE", Canned::ok(0, 0));
        let mut sink = RecordSink::text();
        let retry = Retry {
            retries: 0,
            retry_ms: 0,
        };
        write(&mut door, &mut sink, &t, sql, params, retry)
            .await
            .unwrap();
        assert_eq!(
            sink.events,
            vec![Event::Ok {
                affected: 5,
                last_insert_id: 0,
                more: false
            }]
        );
    }

    #[tokio::test]
    async fn a_failing_tier_names_the_tiers_already_written() {
        let t = write_plan();
        let TierMode::Write { sql, params, .. } = &t.mode else {
            panic!("{:?}", t.mode)
        };
        let mut door = FakeDoor::new(3);
        door.fail_on(1, "UPDATE", 1146, "Table 'shop.t_txn' doesn't exist");
        let mut sink = RecordSink::text();
        let retry = Retry {
            retries: 2,
            retry_ms: 0,
        };
        let e = write(&mut door, &mut sink, &t, sql, params, retry)
            .await
            .unwrap_err();
        assert_eq!(e.error.code, 1146);
        assert!(
            e.error.message.contains("already applied on ds0"),
            "{}",
            e.error.message
        );
        assert_eq!(
            door.sql_on(1).len(),
            1,
            "a server error that is not transient is not retried"
        );
        assert!(door.sql_on(2).is_empty());
    }

    #[tokio::test]
    async fn inside_a_transaction_a_failed_part_undoes_the_others_without_retry() {
        let t = write_plan();
        let TierMode::Write { sql, params, .. } = &t.mode else {
            panic!("{:?}", t.mode)
        };
        let mut door = FakeDoor::new(3);
        door.set_autocommit(false).await.unwrap();
        door.fail_on(1, "UPDATE", 1205, "Lock wait timeout exceeded");
        let mut sink = RecordSink::text();
        let retry = Retry {
            retries: 3,
            retry_ms: 0,
        };
        let e = write(&mut door, &mut sink, &t, sql, params, retry)
            .await
            .unwrap_err();
        assert_eq!(e.error.code, 1205);
        assert_eq!(
            door.sql_on(1)
                .iter()
                .filter(|s| s.starts_with("UPDATE"))
                .count(),
            1,
            "no retry inside a transaction"
        );
        assert_eq!(
            door.sql_on(0).last().unwrap(),
            "ROLLBACK TO SAVEPOINT shardproxy_stmt",
            "the tier that ran is undone"
        );
        door.settle_tx().await;
        assert!(door.state().tx.is_some(), "the transaction goes on");

        // A deadlock on a tier ends the transaction on every node.
        let mut door2 = FakeDoor::new(3);
        door2.set_autocommit(false).await.unwrap();
        door2.fail_on(1, "UPDATE", 1213, "Deadlock found when trying to get lock");
        let retry = Retry {
            retries: 3,
            retry_ms: 0,
        };
        let e = write(&mut door2, &mut sink, &t, sql, params, retry)
            .await
            .unwrap_err();
        assert_eq!(e.error.code, 1213);
        door2.settle_tx().await;
        assert!(door2.state().tx.is_none());
        assert_eq!(door2.sql_on(0).last().unwrap(), "ROLLBACK");
    }
}
