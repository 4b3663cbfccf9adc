//! Poll: a lookup by a unique poll column of a time_tier table, which has no date to pick a
//! tier by: the tiers are asked newest first, and the first whose answer has rows answers.

use mysql_common::value::Value;

use super::door::{client_gone, Access, Door, NodeError, NodeResult, Run, Sink, Stmt};
use super::route::relay;
use crate::error::MyError;
use crate::plan::tier::TierPlan;

pub async fn first<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    t: &TierPlan,
    sql: &str,
    params: &[Value],
    access: Access,
) -> Result<(), NodeError> {
    let run = Run {
        access,
        binary: sink.binary(),
    };
    for (k, part) in t.parts.iter().enumerate() {
        let node = part.node;
        if k + 1 == t.parts.len() {
            return super::route::single(door, sink, node, Stmt::new(sql, params), access).await;
        }
        let mut res = door.start(node, Stmt::new(sql, params), run).await?;
        let status = res.status();
        let Some(cols) = res.columns() else {
            let generated = relay(res, sink).await?;
            door.ran_on(node, generated != 0);
            return Ok(());
        };
        // The result-set header is written only once a row shows this tier has the answer.
        let Some(first) = res.next().await? else {
            res.finish().await?;
            continue;
        };
        sink.columns(&cols, status);
        sink.row(&first, &cols);
        while let Some(row) = res.next().await? {
            sink.row(&row, &cols);
            sink.flush_some().await.map_err(client_gone)?;
        }
        sink.end(status, res.warnings(), false);
        res.finish().await?;
        door.ran_on(node, false);
        return Ok(());
    }
    Err(super::scatter::not_a_node(MyError::internal(
        "shardproxy: no tier to ask",
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::fake::{Canned, Event, FakeDoor, RecordSink};
    use crate::plan::rules_tests::tier;
    use crate::plan::TierMode;

    #[tokio::test]
    async fn tiers_are_asked_newest_first_until_one_has_the_row() {
        let t = tier("SELECT * FROM t_txn WHERE serial_no = 'S1'");
        let TierMode::PollFirst { sql, params } = &t.mode else {
            panic!("{:?}", t.mode)
        };
        let mut door = FakeDoor::new(3);
        door.answer(0, "serial_no", Canned::rows(&["id"], &[]));
        door.answer(1, "serial_no", Canned::rows(&["id"], &[&["77"]]));
        let mut sink = RecordSink::text();
        first(&mut door, &mut sink, &t, sql, params, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["77"]);
        assert_eq!(
            door.log().iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            vec![0, 1]
        );
        // One result set: the empty tier wrote nothing.
        assert_eq!(
            sink.events
                .iter()
                .filter(|e| matches!(e, Event::Columns(_)))
                .count(),
            1
        );
    }

    #[tokio::test]
    async fn the_oldest_tier_answers_even_when_empty() {
        let t = tier("SELECT * FROM t_txn WHERE serial_no = 'S9'");
        let TierMode::PollFirst { sql, params } = &t.mode else {
            panic!("{:?}", t.mode)
        };
        let mut door = FakeDoor::new(3);
        door.answer_any("serial_no", Canned::rows(&["id"], &[]));
        let mut sink = RecordSink::text();
        first(&mut door, &mut sink, &t, sql, params, Access::Read)
            .await
            .unwrap();
        assert!(sink.rows().is_empty());
        assert_eq!(door.log().len(), 3);
        assert!(matches!(sink.events.last(), Some(Event::End { .. })));
    }
}
