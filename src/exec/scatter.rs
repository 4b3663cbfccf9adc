//! Scatter: one statement per node, all at once; their result rows appended node after node
//! (the nodes read later wait on their sockets), their OK packets combined. An error names
//! the node that failed; the other nodes' results are drained.

use super::door::{client_gone, Access, Door, NodeError, NodeResult, OkInfo, Run, Sink, Stmt};
use crate::merge::Row;
use crate::plan::OkMerge;

/// Runs `stmts` and appends their answers. Returns the generated insert id (a split INSERT:
/// the first row's node holds `LAST_INSERT_ID()`).
pub async fn append<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    stmts: &[(usize, Stmt<'_>)],
    ok: OkMerge,
    access: Access,
) -> Result<u64, NodeError> {
    append_in_order(door, sink, stmts, ok, access, None).await
}

/// [`append`]; with `order` (a split INSERT ... RETURNING: for each statement, the VALUES
/// positions of its rows), the rows are written in VALUES order, as one MySQL returns them.
pub async fn append_in_order<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    stmts: &[(usize, Stmt<'_>)],
    ok: OkMerge,
    access: Access,
    order: Option<&[Vec<usize>]>,
) -> Result<u64, NodeError> {
    let nodes: Vec<usize> = stmts.iter().map(|(n, _)| *n).collect();
    let guarded = access == Access::Write && super::txn::statement_savepoint(door, &nodes).await?;
    match append_started(door, sink, stmts, ok, access, order).await {
        Ok(id) => Ok(id),
        Err((mut e, partial)) => {
            if guarded && partial && !super::txn::undo_statement(door, &nodes).await {
                e.error.from_node = false;
                e.error.message = format!(
                    "{}; the statement had run on other nodes of the transaction and could not be undone there, so the transaction was rolled back",
                    e.error.message
                );
            }
            Err(e)
        }
    }
}

/// [`append`]; an error says whether some statements had started.
async fn append_started<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    stmts: &[(usize, Stmt<'_>)],
    ok: OkMerge,
    access: Access,
    order: Option<&[Vec<usize>]>,
) -> Result<u64, (NodeError, bool)> {
    let run = Run {
        access,
        binary: sink.binary(),
    };
    let status = door.status();
    let first_node = stmts.first().map(|(n, _)| *n);
    let results = door.start_all(stmts, run).await.map_err(|e| (e, false))?;
    let partial = results.iter().any(|r| r.is_ok()) && results.iter().any(|r| r.is_err());
    let ress = started(results).await.map_err(|e| (e, partial))?;
    let generated = match ress.iter().find_map(|r| r.columns()) {
        Some(cols) => {
            sink.columns(&cols, status);
            let mut warnings = 0u16;
            let mut failed = None;
            // In VALUES order: (position, row), written once every node answered.
            let mut held: Vec<(usize, Row)> = Vec::new();
            for (t, mut res) in ress.into_iter().enumerate() {
                let positions = order.and_then(|o| o.get(t));
                let mut k = 0usize;
                if failed.is_none() {
                    loop {
                        match res.next().await {
                            Ok(Some(row)) if order.is_some() => {
                                let pos = positions.and_then(|p| p.get(k)).copied();
                                held.push((pos.unwrap_or(usize::MAX), row));
                                k += 1;
                            }
                            Ok(Some(row)) => {
                                sink.row(&row, &cols);
                                if let Err(e) = sink.flush_some().await {
                                    failed = Some(client_gone(e));
                                    break;
                                }
                            }
                            Ok(None) => break,
                            Err(e) => {
                                failed = Some(e);
                                break;
                            }
                        }
                    }
                    warnings = warnings.saturating_add(res.warnings());
                }
                if let Err(e) = res.finish().await {
                    failed.get_or_insert(e);
                }
            }
            if let Some(e) = failed {
                return Err((e, true));
            }
            held.sort_by_key(|(pos, _)| *pos);
            for (_, row) in held {
                sink.row(&row, &cols);
                sink.flush_some()
                    .await
                    .map_err(|e| (client_gone(e), true))?;
            }
            sink.end(status, warnings, false);
            0
        }
        None => {
            let mut total = OkInfo::default();
            let mut failed = None;
            let mut parts = Vec::new();
            for (i, res) in ress.into_iter().enumerate() {
                let o = res.ok();
                match ok {
                    OkMerge::Sum => {
                        parts.push(o.clone());
                        total.affected += o.affected;
                        // The first row's node comes first: its id is the statement's (a
                        // node given explicit AUTO_INCREMENT values reports its own too).
                        if total.last_insert_id == 0 {
                            total.last_insert_id = o.last_insert_id;
                        }
                        total.warnings = total.warnings.saturating_add(o.warnings);
                    }
                    OkMerge::Copies if i == 0 => total = o,
                    OkMerge::Copies => {}
                }
                if let Err(e) = res.finish().await {
                    failed.get_or_insert(e);
                }
            }
            if let Some(e) = failed {
                return Err((e, true));
            }
            if matches!(ok, OkMerge::Sum) {
                let kinds: Vec<Inserting> = stmts.iter().map(|(_, s)| inserting(s.sql)).collect();
                let kind = match kinds.first() {
                    Some(k) if kinds.iter().all(|x| x == k) => *k,
                    _ => Inserting::No,
                };
                total.info = summed_info(&parts, kind);
            }
            sink.ok(&total, status, false);
            total.last_insert_id
        }
    };
    if let Some(n) = first_node {
        door.ran_on(n, generated != 0);
    }
    Ok(generated)
}

/// The `info` of one statement's OKs from several nodes, as one MariaDB reports the whole
/// statement: each count summed (`Rows matched: 3  Changed: 2  Warnings: 0` for an
/// UPDATE, `Records: 5  Duplicates: 0  Warnings: 0` for an INSERT of several rows, which a
/// node given one row of reports without). Empty where the parts do not share one shape.
/// `kind`: what the parts insert. A node given one row of a split INSERT reports no info; its
/// record, and whether it met a duplicate, follow from its affected rows.
pub fn summed_info(parts: &[OkInfo], kind: Inserting) -> String {
    fn parsed(info: &str) -> Option<Vec<(&str, u64)>> {
        info.split("  ")
            .filter(|s| !s.trim().is_empty())
            .map(|item| {
                let (label, n) = item.split_once(": ")?;
                Some((label.trim(), n.trim().parse().ok()?))
            })
            .collect()
    }
    let shape: Option<Vec<&str>> = parts
        .iter()
        .find_map(|o| parsed(&o.info).filter(|p| !p.is_empty()))
        .map(|p| p.iter().map(|(l, _)| *l).collect());
    let records_shape = vec!["Records", "Duplicates", "Warnings"];
    let shape = match shape {
        Some(s) => s,
        None if kind != Inserting::No && parts.len() > 1 => records_shape.clone(),
        None => return String::new(),
    };
    let records = shape == records_shape;
    let mut sums = vec![0u64; shape.len()];
    for o in parts {
        let counts: Vec<u64> = match parsed(&o.info) {
            Some(p) if !p.is_empty() => {
                if p.iter().map(|(l, _)| *l).ne(shape.iter().copied()) {
                    return String::new();
                }
                p.into_iter().map(|(_, n)| n).collect()
            }
            // One row of a split INSERT: no info of its own.
            _ if records => {
                let duplicates = match (kind, o.affected) {
                    (Inserting::Plain, 1) => 0,
                    (Inserting::Ignore, 0 | 1) => 1 - o.affected,
                    (Inserting::Update, 1 | 2) => o.affected - 1,
                    (Inserting::Replace, n) if n >= 1 => n - 1,
                    _ => return String::new(),
                };
                vec![1, duplicates, u64::from(o.warnings)]
            }
            _ => return String::new(),
        };
        for (s, n) in sums.iter_mut().zip(counts) {
            *s += n;
        }
    }
    shape
        .iter()
        .zip(sums)
        .map(|(l, n)| format!("{l}: {n}"))
        .collect::<Vec<_>>()
        .join("  ")
}

/// What a statement of a scatter inserts, for its OK's info.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserting {
    No,
    Plain,
    Ignore,
    /// INSERT ... ON DUPLICATE KEY UPDATE.
    Update,
    Replace,
}

/// What `sql` inserts, by its words (a name quoted is no word).
fn inserting(sql: &str) -> Inserting {
    let lexed = crate::sql::lex::lex(sql, crate::sql::lex::Mode::default());
    let mut words = lexed
        .toks
        .iter()
        .filter(|t| t.kind == crate::sql::lex::Kind::Word)
        .map(|t| t.text(sql).to_ascii_uppercase());
    match words.next().as_deref() {
        Some("REPLACE") => Inserting::Replace,
        Some("INSERT") => {
            let rest: Vec<String> = words.collect();
            if rest.iter().any(|w| w == "DUPLICATE") {
                Inserting::Update
            } else if rest.first().is_some_and(|w| w == "IGNORE") {
                Inserting::Ignore
            } else {
                Inserting::Plain
            }
        }
        _ => Inserting::No,
    }
}

/// An error of the statement, not of a node.
pub fn not_a_node(error: crate::error::MyError) -> NodeError {
    NodeError {
        node: usize::MAX,
        error,
        broke: false,
    }
}

/// Every row of a started result, and its end (finished on an error too).
pub async fn drain<R: NodeResult>(mut res: R) -> Result<Vec<Row>, NodeError> {
    let mut rows = Vec::new();
    loop {
        match res.next().await {
            Ok(Some(row)) => rows.push(row),
            Ok(None) => break,
            Err(e) => {
                let _ = res.finish().await;
                return Err(e);
            }
        }
    }
    res.finish().await?;
    Ok(rows)
}

/// The results of statements started on several nodes, or the first node's error (the
/// others drained).
pub async fn started<R: NodeResult>(
    results: Vec<Result<R, NodeError>>,
) -> Result<Vec<R>, NodeError> {
    let mut ress = Vec::with_capacity(results.len());
    let mut first_err = None;
    for r in results {
        match r {
            Ok(res) => ress.push(res),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        for res in ress {
            let _ = res.finish().await;
        }
        return Err(e);
    }
    Ok(ress)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_info_of_several_nodes_oks_is_summed_as_one_statement_reports_it() {
        let ok = |affected: u64, info: &str| super::OkInfo {
            affected,
            info: info.into(),
            ..Default::default()
        };
        let updates = [
            ok(2, "Rows matched: 2  Changed: 2  Warnings: 0"),
            ok(0, "Rows matched: 1  Changed: 0  Warnings: 1"),
        ];
        assert_eq!(
            super::summed_info(&updates, super::Inserting::No),
            "Rows matched: 3  Changed: 2  Warnings: 1"
        );
        let inserts = [ok(2, "Records: 2  Duplicates: 0  Warnings: 0"), ok(1, "")];
        assert_eq!(
            super::summed_info(&inserts, super::Inserting::Plain),
            "Records: 3  Duplicates: 0  Warnings: 0"
        );
        // Rows of a split INSERT one to a node: a record each.
        assert_eq!(
            super::summed_info(&[ok(1, ""), ok(1, "")], super::Inserting::Plain),
            "Records: 2  Duplicates: 0  Warnings: 0"
        );
        // A DELETE over several nodes: nothing to say. Upserts' rows: what they met.
        assert_eq!(
            super::summed_info(&[ok(1, ""), ok(1, "")], super::Inserting::No),
            ""
        );
        assert_eq!(
            super::summed_info(&[ok(0, ""), ok(1, "")], super::Inserting::Ignore),
            "Records: 2  Duplicates: 1  Warnings: 0"
        );
        assert_eq!(
            super::summed_info(&[ok(2, ""), ok(1, "")], super::Inserting::Update),
            "Records: 2  Duplicates: 1  Warnings: 0"
        );
        // An upsert's row that met its key unchanged (0): what it met is not told apart.
        assert_eq!(
            super::summed_info(&[ok(0, ""), ok(1, "")], super::Inserting::Update),
            ""
        );
        let mixed = [ok(1, "Rows matched: 1  Changed: 1  Warnings: 0"), ok(1, "")];
        assert_eq!(super::summed_info(&mixed, super::Inserting::No), "");
        use super::{inserting, Inserting};
        assert_eq!(
            inserting("/* c */ INSERT INTO t VALUES (1), (2)"),
            Inserting::Plain
        );
        assert_eq!(
            inserting("INSERT IGNORE INTO t VALUES (1)"),
            Inserting::Ignore
        );
        assert_eq!(
            inserting("INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE v = 1"),
            Inserting::Update
        );
        assert_eq!(inserting("REPLACE INTO t VALUES (1)"), Inserting::Replace);
        assert_eq!(inserting("UPDATE t SET v = 1"), Inserting::No);
    }

    use super::*;
    use crate::exec::fake::{Canned, Event, FakeDoor, RecordSink};

    fn stmts<'a>(sql: &'a str, nodes: &[usize]) -> Vec<(usize, Stmt<'a>)> {
        nodes.iter().map(|n| (*n, Stmt::new(sql, &[]))).collect()
    }

    #[tokio::test]
    async fn rows_of_every_node_are_appended() {
        let mut door = FakeDoor::new(3);
        door.answer(0, "SELECT", Canned::rows(&["id"], &[&["1"], &["4"]]));
        door.answer(1, "SELECT", Canned::rows(&["id"], &[]));
        door.answer(2, "SELECT", Canned::rows(&["id"], &[&["2"]]));
        let mut sink = RecordSink::text();
        let s = stmts("SELECT id FROM t", &[0, 1, 2]);
        append(&mut door, &mut sink, &s, OkMerge::Sum, Access::Read)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["1", "4", "2"]);
        assert_eq!(door.log().len(), 3);
        assert!(matches!(sink.events.last(), Some(Event::End { .. })));
    }

    #[tokio::test]
    async fn affected_rows_add_up_and_copies_report_one() {
        let mut door = FakeDoor::new(2);
        door.answer(0, "UPDATE", Canned::ok(3, 0));
        door.answer(1, "UPDATE", Canned::ok(4, 0));
        let mut sink = RecordSink::text();
        let s = stmts("UPDATE t SET v = 1", &[0, 1]);
        append(&mut door, &mut sink, &s, OkMerge::Sum, Access::Write)
            .await
            .unwrap();
        append(&mut door, &mut sink, &s, OkMerge::Copies, Access::Write)
            .await
            .unwrap();
        let oks: Vec<u64> = sink
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Ok { affected, .. } => Some(*affected),
                _ => None,
            })
            .collect();
        assert_eq!(oks, vec![7, 3]);
    }

    #[tokio::test]
    async fn an_error_on_one_node_is_the_answer_and_names_it() {
        let mut door = FakeDoor::new(3);
        door.answer_any("SELECT", Canned::rows(&["id"], &[&["1"]]));
        door.fail_on(1, "SELECT", 1146, "Table 'shop.t' doesn't exist");
        let mut sink = RecordSink::text();
        let s = stmts("SELECT id FROM t", &[0, 1, 2]);
        let e = append(&mut door, &mut sink, &s, OkMerge::Sum, Access::Read)
            .await
            .unwrap_err();
        assert_eq!((e.node, e.error.code), (1, 1146));
        assert!(
            sink.events.is_empty(),
            "nothing was written before the error"
        );
    }

    #[tokio::test]
    async fn a_node_that_dies_mid_stream_fails_the_statement() {
        let mut door = FakeDoor::new(2);
        door.answer(0, "SELECT", Canned::rows(&["id"], &[&["1"], &["2"]]));
        door.answer(
            1,
            "SELECT",
            Canned::rows(&["id"], &[&["3"], &["4"]]).failing_after(1),
        );
        let mut sink = RecordSink::text();
        let s = stmts("SELECT id FROM t", &[0, 1]);
        let e = append(&mut door, &mut sink, &s, OkMerge::Sum, Access::Read)
            .await
            .unwrap_err();
        assert!(e.broke);
        assert_eq!(e.node, 1);
        assert!(!matches!(sink.events.last(), Some(Event::End { .. })));
    }

    #[tokio::test]
    async fn a_split_insert_remembers_its_first_rows_node_for_last_insert_id() {
        let mut door = FakeDoor::new(3);
        door.answer(2, "INSERT", Canned::ok(1, 90));
        door.answer(0, "INSERT", Canned::ok(1, 91));
        let mut sink = RecordSink::text();
        let s = stmts("INSERT INTO t (id) VALUES (1)", &[2, 0]);
        let id = append(&mut door, &mut sink, &s, OkMerge::Sum, Access::Write)
            .await
            .unwrap();
        // The first target holds the first row: its id is the statement's, as one MySQL
        // names a multi-row INSERT's first generated id.
        assert_eq!(id, 90);
        assert_eq!(door.sticky(true, 0), Some(2));
    }

    #[tokio::test]
    async fn returning_rows_of_a_split_insert_come_back_in_values_order() {
        use crate::plan::tests::scatter_of;
        use crate::plan::Plan;
        // VALUES rows 0 and 2 went to node 0, row 1 to node 1.
        let plan = Plan::ValuesOrder {
            positions: vec![vec![0, 2], vec![1]],
            input: Box::new(scatter_of("INSERT INTO t (id) VALUES (1) RETURNING id", 2)),
        };
        let mut door = FakeDoor::new(2);
        door.answer(0, "INSERT", Canned::rows(&["id"], &[&["a"], &["c"]]));
        door.answer(1, "INSERT", Canned::rows(&["id"], &[&["b"]]));
        let mut sink = RecordSink::text();
        let topo = crate::plan::rules_tests::topo();
        crate::exec::run(&plan, &topo, Access::Write, &mut door, &mut sink)
            .await
            .unwrap();
        assert_eq!(sink.lines(), vec!["a", "b", "c"]);
        assert!(matches!(sink.events.last(), Some(Event::End { .. })));
    }
}
