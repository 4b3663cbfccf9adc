//! Tier pages: `ORDER BY <tier column> ... LIMIT offset, limit` over tiers, the leaf of a
//! merge tree (MergeSort and the page's Limit above it). Rows are counted per date segment,
//! one tier at a time in page order, until the counted segments hold the page; then only the
//! segments holding the page are read, the skip pushed into the node's own LIMIT where a
//! single tier starts the page; the Limit above skips only what the nodes did not.

use mysql_common::value::Value;

use super::door::{Door, NodeError};
use super::scatter::not_a_node;
use super::tier_read::exclusions;
use crate::error::MyError;
use crate::plan::tier::{fill, TierPlan};
use crate::plan::TierMode;
use crate::routing::time_tier::{pick_page, Segment};

fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        Value::UInt(u) => Some(*u),
        Value::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::UInt(u) => i64::try_from(*u).ok(),
        Value::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// Each statement that reads the page, and how many rows of the answer come before the
/// first row they return (the Limit above skips that many fewer).
pub async fn statements<D: Door>(
    door: &mut D,
    t: &TierPlan,
    cap: u64,
) -> Result<(Vec<(usize, String)>, u64), NodeError> {
    let TierMode::Page {
        node_sql,
        count_tail,
        segments,
        offset,
        limit,
    } = &t.mode
    else {
        return Err(not_a_node(MyError::internal(
            "shardproxy: a tier page without its page".to_string(),
        )));
    };
    let p = Page {
        node_sql,
        count_tail,
        segments,
        offset: *offset,
        limit: *limit,
    };
    let segments = p.segments;
    let excl = exclusions(door, t, cap).await?;
    let preds: Vec<String> = (0..t.parts.len()).map(|i| t.part_pred(i, &excl)).collect();
    let mut counts: Vec<Vec<Option<u64>>> =
        segments.iter().map(|s| vec![None; s.parts.len()]).collect();
    let mut order: Vec<usize> = Vec::new();
    for s in segments {
        for part in &s.parts {
            if !order.contains(part) {
                order.push(*part);
            }
        }
    }
    let need = p.offset.saturating_add(p.limit);
    let known = |counts: &Vec<Vec<Option<u64>>>| -> (usize, u64) {
        let mut n = 0;
        let mut total = 0u64;
        for c in counts {
            if c.iter().any(Option::is_none) {
                break;
            }
            total += c.iter().map(|x| x.unwrap_or(0)).sum::<u64>();
            n += 1;
        }
        (n, total)
    };
    for part in order {
        if known(&counts).1 >= need {
            break;
        }
        let sql = t.count_sql(p.count_tail, part, &preds[part], segments);
        let rows = door.fetch(t.parts[part].node, &sql).await?;
        for row in rows {
            let (Some(seg), Some(n)) = (row.first().and_then(as_i64), row.get(1).and_then(as_u64))
            else {
                continue;
            };
            let Ok(seg) = usize::try_from(seg) else {
                continue;
            };
            if let Some(j) = segments
                .get(seg)
                .and_then(|s| s.parts.iter().position(|x| *x == part))
            {
                counts[seg][j] = Some(n);
            }
        }
        for (s, seg) in segments.iter().enumerate() {
            if let Some(j) = seg.parts.iter().position(|x| *x == part) {
                counts[s][j].get_or_insert(0);
            }
        }
    }
    let (n_known, _) = known(&counts);
    let known_counts: Vec<Vec<u64>> = counts[..n_known]
        .iter()
        .map(|c| c.iter().map(|x| x.unwrap_or(0)).collect())
        .collect();
    let before: u64;
    let sqls: Vec<(usize, String)> =
        match pick_page(&segments[..n_known], &known_counts, p.offset, p.limit) {
            None => {
                // Past the last row: an empty page with the query's columns.
                before = p.offset;
                vec![(
                    t.parts[0].node,
                    format!("{} LIMIT 0", fill(p.node_sql, &preds[0])),
                )]
            }
            Some(pick) => {
                // The merge skips `pick.skip` rows of what is read.
                before = p.offset.saturating_sub(pick.skip);
                let range: Vec<String> = segments[pick.first..=pick.last]
                    .iter()
                    .map(|s| format!("({})", s.pred(&t.col_ref)))
                    .collect();
                let range = range.join(" OR ");
                pick.reads
                    .iter()
                    .map(|&(part, off, cnt)| {
                        (
                            t.parts[part].node,
                            format!(
                                "{} LIMIT {off}, {cnt}",
                                fill(p.node_sql, &format!("{} AND ({range})", preds[part]))
                            ),
                        )
                    })
                    .collect()
            }
        };
    Ok((sqls, before))
}

/// What one page needs of the plan.
struct Page<'p> {
    node_sql: &'p str,
    count_tail: &'p str,
    segments: &'p [Segment],
    offset: u64,
    limit: u64,
}

#[cfg(test)]
mod tests {
    use crate::exec::door::Access;
    use crate::exec::fake::{Canned, FakeDoor, RecordSink};
    use crate::exec::merge::run;
    use crate::plan::rules_tests::tier_plan;
    use crate::plan::Plan;

    #[tokio::test]
    async fn a_page_counts_segments_newest_first_and_reads_only_the_page() {
        // Newest first: hot, the hot/warm window, warm, cold, NULL dates.
        let plan = tier_plan("SELECT id FROM t_txn ORDER BY txn_date DESC LIMIT 3, 2");
        // The tier page is the leaf of the merge: the nodes' rows carry the sort key as a
        // helper column, cut before the client.
        let Plan::Project {
            hidden: 1, input, ..
        } = &plan
        else {
            panic!("{plan:?}")
        };
        let Plan::Limit {
            offset: 3,
            limit: Some(2),
            input,
        } = input.as_ref()
        else {
            panic!("{plan:?}")
        };
        assert!(
            matches!(input.as_ref(), Plan::MergeSort { input, .. } if matches!(input.as_ref(), Plan::Tier(_))),
            "{plan:?}"
        );
        let mut door = FakeDoor::new(3);
        // Hot holds 10 rows in its own segment: the page (rows 3..5) is there, so warm and
        // cold are never counted.
        door.answer(
            0,
            "__sp_seg",
            Canned::rows(&["s", "n"], &[&["0", "10"], &["1", "0"]]),
        );
        door.answer(
            0,
            "LIMIT",
            Canned::rows(
                &["id", "d"],
                &[&["103", "2025-06-03"], &["104", "2025-06-02"]],
            ),
        );
        let mut sink = RecordSink::text();
        run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["103", "104"]);
        assert!(
            door.sql_on(1).is_empty() && door.sql_on(2).is_empty(),
            "{:?}",
            door.log()
        );
        let read = door.sql_on(0).pop().unwrap();
        assert!(
            read.ends_with("LIMIT 3, 2"),
            "the skip runs on the node: {read}"
        );
    }

    #[tokio::test]
    async fn a_page_starting_in_a_window_is_merged_and_skipped_above_the_tiers() {
        let plan = tier_plan("SELECT id FROM t_txn ORDER BY txn_date DESC LIMIT 3, 2");
        let mut door = FakeDoor::new(3);
        // Hot holds 2 rows of its own and 1 in the hot/warm window, warm 2 in the window: the
        // page (rows 3..5) starts at the window's second row. Both tiers read the window
        // from its start; the merge skips its first row.
        door.answer(
            0,
            "__sp_seg",
            Canned::rows(&["s", "n"], &[&["0", "2"], &["1", "1"]]),
        );
        door.answer(
            1,
            "__sp_seg",
            Canned::rows(&["s", "n"], &[&["1", "2"], &["2", "5"]]),
        );
        door.answer(
            0,
            "LIMIT",
            Canned::rows(&["id", "d"], &[&["101", "2024-06-29"]]),
        );
        door.answer(
            1,
            "LIMIT",
            Canned::rows(
                &["id", "d"],
                &[&["201", "2024-06-28"], &["202", "2024-06-28"]],
            ),
        );
        let mut sink = RecordSink::text();
        run(&mut door, &mut sink, &plan, 1000, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["201", "202"]);
        for node in [0, 1] {
            let read = door.sql_on(node).pop().unwrap();
            assert!(read.ends_with("LIMIT 0, 3"), "{read}");
        }
        assert!(door.sql_on(2).is_empty(), "{:?}", door.log());
    }
}
