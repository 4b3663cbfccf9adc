//! Key pages (`crate::plan::key_page`): rounds that find how many rows of the answer come
//! before a key, then the statements that read the page from there. The leaf of a merge tree
//! like a tier page: the Limit above skips only what the rounds did not.

use mysql_common::value::Value;

use super::door::{Door, NodeError, NodeResult, Run, Stmt};
use super::scatter::started;
use crate::merge::value::{class_of, Class};
use crate::plan::key_page::KeyPage;
use crate::plan::tier::fill;

/// Rounds at most: each leaves about the square root of what was left to skip.
const ROUNDS: usize = 8;

/// Below this share of what is left to skip per node (or below a page), another round costs
/// more than reading the rest.
const MIN_SHARE: u64 = 16;

/// What one node answered a round's statement: the first column of its first row, if it
/// sent a row, as an integer; `Err(())` for a value of another type (the page is then read as
/// a plain merge would: the proxy compares no other keys itself).
type First = Result<Option<i128>, ()>;

/// `sql` on every node at once (inside the session's transaction where it has one, as the
/// page's own read is), each node's first value.
async fn first_values<D: Door>(
    door: &mut D,
    nodes: &[usize],
    sql: &str,
) -> Result<Vec<First>, NodeError> {
    let stmts: Vec<(usize, Stmt<'_>)> = nodes.iter().map(|n| (*n, Stmt::new(sql, &[]))).collect();
    let results = started(door.start_all(&stmts, Run::TEXT_READ).await?).await?;
    let mut out = Vec::with_capacity(results.len());
    for mut r in results {
        let integer = r
            .columns()
            .and_then(|c| c.first().map(|c| class_of(c) == Class::Integer));
        let row = r.next().await?;
        r.finish().await?;
        let v = row.and_then(|row| row.into_iter().next().flatten());
        out.push(match (v, integer) {
            (None | Some(Value::NULL), _) => Ok(None),
            (Some(Value::Bytes(b)), Some(true)) => std::str::from_utf8(&b)
                .ok()
                .and_then(|t| t.parse::<i128>().ok())
                .map(Some)
                .ok_or(()),
            (Some(Value::Int(i)), _) => Ok(Some(i128::from(i))),
            (Some(Value::UInt(u)), _) => Ok(Some(i128::from(u))),
            _ => Err(()),
        });
    }
    Ok(out)
}

/// A key as SQL, through the literal writer.
fn key_sql(k: i128) -> String {
    let v = match i64::try_from(k) {
        Ok(i) => Value::Int(i),
        Err(_) => Value::UInt(u64::try_from(k).unwrap_or(u64::MAX)),
    };
    crate::sql::write::literal(&v, "utf8mb4")
}

/// Each statement that reads the page, and how many rows of the answer come before the
/// first row they return.
pub async fn statements<D: Door>(
    door: &mut D,
    k: &KeyPage,
) -> Result<(Vec<(usize, String)>, u64), NodeError> {
    let n = k.nodes.len().max(1) as u64;
    let (from, below) = if k.desc { ("<=", ">") } else { (">=", "<") };
    let bound = |lo: Option<i128>| match lo {
        Some(v) => format!("{} {from} {}", k.key, key_sql(v)),
        None => "1 = 1".to_string(),
    };
    let read = |lo: Option<i128>, before: u64| -> (Vec<(usize, String)>, u64) {
        let take = (k.offset - before).saturating_add(k.limit);
        let sql = format!("{} LIMIT {take}", fill(&k.texts.rows, &bound(lo)));
        (k.nodes.iter().map(|n| (*n, sql.clone())).collect(), before)
    };
    let mut lo: Option<i128> = None;
    let mut before = 0u64;
    for _ in 0..ROUNDS {
        let left = k.offset - before;
        let share = left / n;
        if share < k.limit.max(MIN_SHARE) {
            break;
        }
        let lower = bound(lo);
        // Each node's key `share` rows past the bound; the least of them.
        let probe = format!("{} LIMIT {share}, 1", fill(&k.texts.keys, &lower));
        let mut least: Option<i128> = None;
        for first in first_values(door, &k.nodes, &probe).await? {
            let Ok(x) = first else {
                return Ok(read(None, 0));
            };
            let Some(x) = x else {
                continue;
            };
            let first = match least {
                None => true,
                Some(l) if k.desc => x > l,
                Some(l) => x < l,
            };
            if first {
                least = Some(x);
            }
        }
        // No node holds more rows past the bound than its share: all of them together
        // come before the page, which is past the last row (empty, with the columns).
        let Some(v) = least else {
            let sql = format!("{} LIMIT 0", fill(&k.texts.rows, &lower));
            return Ok((vec![(k.nodes[0], sql)], k.offset));
        };
        let upper = format!("{lower} AND {} {below} {}", k.key, key_sql(v));
        let counting = fill(&k.texts.count, &upper);
        let mut counted = 0u64;
        for c in first_values(door, &k.nodes, &counting).await? {
            counted += c
                .ok()
                .flatten()
                .and_then(|c| u64::try_from(c).ok())
                .unwrap_or(0);
        }
        // At most `share` per node came before `v`; more means rows were written between
        // the rounds: the page is read as a plain merge would.
        if counted > left {
            return Ok(read(None, 0));
        }
        before += counted;
        lo = Some(v);
    }
    Ok(read(lo, before))
}

#[cfg(test)]
mod tests {
    use crate::exec::door::Access;
    use crate::exec::fake::{Canned, FakeDoor, RecordSink};
    use crate::exec::merge::run;
    use crate::plan::tests::plan_in;
    use crate::plan::tier::MARK;
    use crate::plan::Plan;
    use mysql_common::constants::ColumnType::MYSQL_TYPE_LONGLONG as BIGINT;

    fn page_plan(sql: &str) -> Plan {
        plan_in(&topology(), sql, &[])
    }

    fn topology() -> crate::config::Topology {
        crate::config::test_topology(
            2,
            2,
            "[tables.t_page]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
             slots = [{ slots = \"0-511\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds1\" }]\n",
        )
    }

    #[test]
    fn a_deep_page_by_the_primary_key_is_a_key_page_and_others_are_not() {
        let p = page_plan("SELECT id, v FROM t_page ORDER BY id LIMIT 5000, 10");
        assert!(matches!(p.source(), Plan::KeyPage(_)), "{p:?}");
        let Plan::KeyPage(k) = p.source() else {
            unreachable!()
        };
        assert_eq!(
            k.texts.keys,
            format!("SELECT id FROM t_page WHERE {MARK} ORDER BY id")
        );
        assert_eq!(
            k.texts.count,
            format!("SELECT COUNT(*) FROM t_page WHERE {MARK}")
        );
        let shown = p.describe(&topology()).to_string();
        assert!(
            shown.contains("KeyPage on ds0, ds1: rows 5000..5010 by id"),
            "{shown}"
        );
        for sql in [
            // A shallow page, another sort key, an alias that the ORDER BY would name.
            "SELECT id, v FROM t_page ORDER BY id LIMIT 50, 10",
            "SELECT id, v FROM t_page ORDER BY v LIMIT 5000, 10",
            "SELECT v AS id FROM t_page ORDER BY id LIMIT 5000, 10",
            "SELECT id, COUNT(*) FROM t_page GROUP BY id ORDER BY id LIMIT 5000, 10",
            "SELECT id FROM t_page ORDER BY id LIMIT 5000, 10 FOR UPDATE",
            "SELECT id, v FROM t_page HAVING v > 3 ORDER BY id LIMIT 5000, 10",
        ] {
            let p = page_plan(sql);
            assert!(!matches!(p.source(), Plan::KeyPage(_)), "{sql}: {p:?}");
        }
        // While its slots move, the scatter that leaves out the copies reads it.
        let moving = crate::config::test_topology(
            2,
            2,
            "[tables.t_page]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
             slots = [{ slots = \"0-511\", node = \"ds0\", to = \"ds1\", step = \"capture\" }, { slots = \"512-1023\", node = \"ds1\" }]\n",
        );
        let p = plan_in(
            &moving,
            "SELECT id, v FROM t_page ORDER BY id LIMIT 5000, 10",
            &[],
        );
        assert!(matches!(p.source(), Plan::Scatter { .. }), "{p:?}");
    }

    #[tokio::test]
    async fn rounds_find_the_rows_before_a_key_and_read_only_the_rest_and_the_page() {
        let plan = page_plan("SELECT id, v FROM t_page ORDER BY id LIMIT 5000, 2");
        let mut door = FakeDoor::new(2);
        // Round 1: each node's key 2,500 rows in; 9,000 is the least; node 0 has 2,500
        // rows below it, node 1 2,400.
        door.answer(
            0,
            "LIMIT 2500, 1",
            Canned::typed(&[("id", BIGINT)], &[&["9100"]]),
        );
        door.answer(
            1,
            "LIMIT 2500, 1",
            Canned::typed(&[("id", BIGINT)], &[&["9000"]]),
        );
        door.answer(
            0,
            "id < 9000",
            Canned::typed(&[("c", BIGINT)], &[&["2490"]]),
        );
        door.answer(
            1,
            "id < 9000",
            Canned::typed(&[("c", BIGINT)], &[&["2500"]]),
        );
        // 10 rows left to skip: under a round's worth; each node reads 12 from 9,000.
        door.answer_any(
            "LIMIT 12",
            Canned::rows(&["id", "v"], &[&["9000", "a"], &["9001", "b"]]),
        );
        let mut sink = RecordSink::text();
        run(&mut door, &mut sink, &plan, 1_000_000, Access::Read)
            .await
            .expect("page");
        let log = door.log();
        assert!(
            log.iter()
                .all(|(_, s)| !s.contains("LIMIT 5002") && !s.contains("LIMIT 5000")),
            "{log:?}"
        );
        let last = door.sql_on(0).pop().unwrap_or_default();
        assert!(
            last.contains("id >= 9000") && last.ends_with("LIMIT 12"),
            "{last}"
        );
    }

    #[tokio::test]
    async fn a_page_past_the_last_row_is_empty_without_reading_the_rows_before_it() {
        let plan = page_plan("SELECT id, v FROM t_page ORDER BY id LIMIT 5000, 2");
        let mut door = FakeDoor::new(2);
        // Neither node holds 2,500 rows: the 5,000th row is past the last.
        door.answer_any("LIMIT 2500, 1", Canned::typed(&[("id", BIGINT)], &[]));
        door.answer_any("LIMIT 0", Canned::rows(&["id", "v"], &[]));
        let mut sink = RecordSink::text();
        run(&mut door, &mut sink, &plan, 1_000_000, Access::Read)
            .await
            .expect("page");
        assert!(sink.rows().is_empty());
        let log = door.log();
        assert_eq!(log.len(), 3, "{log:?}");
        assert!(log[2].1.ends_with("LIMIT 0"), "{log:?}");
    }

    #[tokio::test]
    async fn a_key_that_is_not_an_integer_reads_the_page_as_a_plain_merge() {
        let plan = page_plan("SELECT id, v FROM t_page ORDER BY id LIMIT 5000, 2");
        let mut door = FakeDoor::new(2);
        door.answer_any("LIMIT 2500, 1", Canned::rows(&["id"], &[&["k9"]]));
        door.answer_any("LIMIT 5002", Canned::rows(&["id", "v"], &[]));
        let mut sink = RecordSink::text();
        run(&mut door, &mut sink, &plan, 1_000_000, Access::Read)
            .await
            .expect("page");
        let log = door.log();
        assert!(log.iter().all(|(_, s)| !s.contains("COUNT(*)")), "{log:?}");
        assert!(
            log[2..]
                .iter()
                .all(|(_, s)| s.ends_with("1 = 1 ORDER BY id LIMIT 5002")),
            "{log:?}"
        );
    }
}
