//! Tier reads: a time_tier table read over several tiers. Each tier's SQL gets its serving
//! range; in an overlap window the older tier also leaves out the keys the newer tier holds
//! there (read first, [`exclusions`]), so the tiers answer disjoint rows and every merge
//! counts each row once whatever the ETL's state.

use mysql_common::value::Value;

use super::door::{Access, Door, NodeError, Sink, Stmt};
use super::scatter::not_a_node;
use crate::error::MyError;
use crate::plan::tier::{fill, TierPlan};
use crate::plan::OkMerge;

/// Each window's exclusion for its older tier: the newer tier's keys there.
pub async fn exclusions<D: Door>(
    door: &mut D,
    t: &TierPlan,
    cap: u64,
) -> Result<Vec<Option<String>>, NodeError> {
    let mut out = Vec::with_capacity(t.windows.len());
    let charset = door.state().charset.clone();
    for w in &t.windows {
        let rows: Vec<Vec<Value>> = door.fetch(w.node, &t.window_sql(w)).await?;
        if rows.len() as u64 > cap {
            return Err(not_a_node(MyError::unsupported(format!(
                "shardproxy: the overlap window [{}, {}) of `{}` holds {} rows on its newer tier, more than max_rows_per_statement; narrow the query's date range",
                w.lo,
                w.hi,
                t.table,
                rows.len()
            ))));
        }
        out.push(t.exclusion(w, &rows, &charset));
    }
    Ok(out)
}

/// Each tier's statement: the node SQL with the tier's range, less the keys a newer tier
/// holds in its window (read first).
pub async fn statements<D: Door>(
    door: &mut D,
    t: &TierPlan,
    node_sql: &str,
    cap: u64,
) -> Result<Vec<(usize, String)>, NodeError> {
    let excl = exclusions(door, t, cap).await?;
    Ok((0..t.parts.len())
        .map(|i| (t.parts[i].node, fill(node_sql, &t.part_pred(i, &excl))))
        .collect())
}

/// Every tier at once, rows appended newest tier first (a tier read under merge nodes is
/// their leaf: [`super::merge::run`]).
pub async fn read<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    t: &TierPlan,
    node_sql: &str,
    cap: u64,
    access: Access,
) -> Result<(), NodeError> {
    let sqls = statements(door, t, node_sql, cap).await?;
    let stmts: Vec<(usize, Stmt<'_>)> = sqls.iter().map(|(n, s)| (*n, Stmt::new(s, &[]))).collect();
    super::scatter::append(door, sink, &stmts, OkMerge::Sum, access)
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::fake::{Canned, FakeDoor, RecordSink};
    use crate::plan::rules_tests::tier;

    #[tokio::test]
    async fn the_older_tier_leaves_out_the_keys_the_newer_holds_in_the_window() {
        // Today 2025-06-30: hot from 2024-06-30 with a window from 2024-06-28.
        let t = tier("SELECT id FROM t_txn WHERE txn_date >= '2024-06-29'");
        let crate::plan::TierMode::Read { node_sql, .. } = &t.mode else {
            panic!("{:?}", t.mode)
        };
        let mut door = FakeDoor::new(3);
        // The window read on hot finds key 5; warm then answers without it.
        door.answer(
            0,
            "SELECT `id` FROM `t_txn` WHERE",
            Canned::rows(&["id"], &[&["5"]]),
        );
        door.answer(
            0,
            "SELECT id FROM t_txn",
            Canned::rows(&["id"], &[&["5"], &["6"]]),
        );
        door.answer(1, "SELECT id FROM t_txn", Canned::rows(&["id"], &[&["4"]]));
        let mut sink = RecordSink::text();
        read(&mut door, &mut sink, &t, node_sql, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["5", "6", "4"]);
        let warm = door.sql_on(1);
        assert_eq!(warm.len(), 1);
        assert!(
            warm[0].contains("`t_txn`.`id` IN (_utf8mb4 X'35')"),
            "{}",
            warm[0]
        );
        assert!(
            warm[0].starts_with("SELECT id FROM t_txn WHERE"),
            "{}",
            warm[0]
        );
    }

    #[tokio::test]
    async fn a_window_larger_than_the_cap_is_refused() {
        let t = tier("SELECT id FROM t_txn WHERE txn_date >= '2024-06-29'");
        let crate::plan::TierMode::Read { node_sql, .. } = &t.mode else {
            panic!("{:?}", t.mode)
        };
        let mut door = FakeDoor::new(3);
        door.answer(
            0,
            "SELECT `id`",
            Canned::rows(&["id"], &[&["1"], &["2"], &["3"]]),
        );
        let mut sink = RecordSink::text();
        let e = read(&mut door, &mut sink, &t, node_sql, 2, Access::Read)
            .await
            .unwrap_err();
        assert_eq!(e.error.code, 1235);
        assert!(
            e.error.message.contains("overlap window"),
            "{}",
            e.error.message
        );
    }

    #[tokio::test]
    async fn a_tier_read_under_an_aggregate_counts_each_row_once() {
        let plan = crate::plan::rules_tests::tier_plan(
            "SELECT COUNT(*) FROM t_txn WHERE txn_date >= '2024-06-29'",
        );
        assert!(
            matches!(&plan, crate::plan::Plan::Aggregate { input, .. } if matches!(input.as_ref(), crate::plan::Plan::Tier(_))),
            "{plan:?}"
        );
        let mut door = FakeDoor::new(3);
        // Hot holds key 5 in the window; warm's count leaves it out.
        door.answer(
            0,
            "SELECT `id` FROM `t_txn` WHERE",
            Canned::rows(&["id"], &[&["5"]]),
        );
        let int = mysql_common::constants::ColumnType::MYSQL_TYPE_LONGLONG;
        door.answer(0, "COUNT(*)", Canned::typed(&[("c", int)], &[&["2"]]));
        door.answer(1, "COUNT(*)", Canned::typed(&[("c", int)], &[&["3"]]));
        let mut sink = RecordSink::text();
        crate::exec::merge::run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["5"]);
        let warm = door.sql_on(1);
        assert!(
            warm[0].contains("`t_txn`.`id` IN (_utf8mb4 X'35')"),
            "{}",
            warm[0]
        );
    }
}
