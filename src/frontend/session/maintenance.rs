//! `ANALYZE`, `CHECK`, `OPTIMIZE`, `REPAIR` and `CHECKSUM TABLE` (sqlparser reads few of
//! them): each node that holds a table runs the statement for it, and the table's rows are
//! one node's (every node's when they all say the same, else the node with the gravest
//! message: an error before a warning before a note before a status), a table after another
//! in the order named, as one server answers. `CHECKSUM TABLE` of such a table is refused:
//! while rows move, or where time tiers overlap, a row is on two nodes at once. Like DDL,
//! they commit the open transaction first and run outside any.

use std::sync::Arc;

use mysql_common::packets::Column;
use mysql_common::value::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{Outcome, Session};
use crate::error::MyError;
use crate::exec::door::Access;
use crate::exec::txn::Transactions;
use crate::merge::Row;
use crate::plan::{Plan, Target};
use crate::sql::lex::{statement_tokens, Kind};

const VERBS: [&str; 5] = ["ANALYZE", "CHECK", "OPTIMIZE", "REPAIR", "CHECKSUM"];

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// One of the statements above, answered (a table on one node: by that node alone);
    /// `None` for any other statement.
    pub(super) async fn table_maintenance(&mut self, sql: &str, first: &str) -> Option<Outcome> {
        if !VERBS.iter().any(|v| first.eq_ignore_ascii_case(v)) {
            return None;
        }
        let sql = sql.trim_end().trim_end_matches(';').trim_end();
        let toks = statement_tokens(sql, self.mode());
        let is = |i: usize, w: &str| toks.get(i).is_some_and(|t| t.is(sql, w));
        let mut i = 1;
        if is(i, "NO_WRITE_TO_BINLOG") || is(i, "LOCAL") {
            i += 1;
        }
        if !(is(i, "TABLE") || is(i, "TABLES")) {
            return None;
        }
        let head = &sql[..toks.get(i)?.end];
        i += 1;
        // The list: `[db.]t, ...`, then the options as written.
        let mut tables: Vec<(String, &str)> = Vec::new();
        loop {
            let start = toks.get(i)?.start;
            let (schema, name, next) = crate::plan::views::object_name(sql, &toks, i)?;
            if !self.own_schema(schema.as_deref()) {
                return None;
            }
            tables.push((name, &sql[start..toks.get(next - 1)?.end]));
            i = next;
            if toks.get(i).is_some_and(|t| t.kind == Kind::Comma) {
                i += 1;
            } else {
                break;
            }
        }
        let options = toks.get(i).map_or("", |t| &sql[t.start..]);
        let topo = self.topo.clone();
        let spread: Vec<&str> = tables
            .iter()
            .filter(|(t, _)| topo.holders(t).len() > 1)
            .map(|(t, _)| t.as_str())
            .collect();
        if first.eq_ignore_ascii_case("CHECKSUM") && !spread.is_empty() {
            return Some(Err(MyError::unsupported(format!(
                "shardproxy: CHECKSUM TABLE of `{}`, whose rows are on several nodes, has no one checksum the proxy can vouch for (a row being moved, or in time tiers' overlap, is on two nodes at once): run it on each node",
                spread[0]
            ))));
        }
        let placed: Vec<(&str, Vec<usize>)> =
            tables.iter().map(|(t, w)| (*w, topo.holders(t))).collect();
        Some(self.run_maintenance(head, &placed, options).await)
    }

    async fn run_maintenance(
        &mut self,
        head: &str,
        tables: &[(&str, Vec<usize>)],
        options: &str,
    ) -> Outcome {
        let topo = self.topo.clone();
        self.nodes.ddl(true).await?;
        let mut cols: Option<Arc<[Column]>> = None;
        let mut out: Vec<Row> = Vec::new();
        let mut failed = None;
        for (written, nodes) in tables {
            let sql = format!("{head} {written} {options}");
            let mut answers: Vec<Vec<Row>> = Vec::new();
            for &node in nodes {
                let plan = Plan::Route(Target {
                    node,
                    sql: sql.trim_end().to_string(),
                    params: Vec::new(),
                });
                let mut got = crate::exec::collect::Collect::new(u64::MAX);
                if let Err(e) =
                    crate::exec::run(&plan, &topo, Access::Write, &mut self.nodes, &mut got).await
                {
                    failed = Some(e);
                    break;
                }
                if cols.is_none() {
                    cols = got.cols;
                }
                answers.push(got.rows);
            }
            if failed.is_some() {
                break;
            }
            out.extend(gravest(answers));
        }
        self.nodes.ddl(false).await?;
        if let Some(e) = failed {
            return Err(e);
        }
        let cols = cols.ok_or_else(|| MyError::internal("shardproxy: no node answered"))?;
        self.write_rows(&cols, &out);
        Ok(())
    }
}

/// One table's rows from each node's: the rows all nodes gave alike, else those of the node
/// whose gravest message (`Msg_type`, the third column) is the gravest of all.
fn gravest(answers: Vec<Vec<Row>>) -> Vec<Row> {
    let rank = |rows: &Vec<Row>| {
        rows.iter()
            .map(|r| match r.get(2) {
                Some(Some(Value::Bytes(b))) => match b.to_ascii_lowercase().as_slice() {
                    b"error" => 4,
                    b"warning" => 3,
                    b"note" => 2,
                    b"info" => 1,
                    _ => 0,
                },
                _ => 0,
            })
            .max()
            .unwrap_or(0)
    };
    let mut best: Option<(u8, Vec<Row>)> = None;
    for rows in answers {
        let r = rank(&rows);
        if best.as_ref().is_none_or(|(b, _)| r > *b) {
            best = Some((r, rows));
        }
    }
    best.map(|b| b.1).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kind: &str, text: &str) -> Row {
        ["shop.t", "check", kind, text]
            .iter()
            .map(|s| Some(Value::Bytes(s.as_bytes().to_vec())))
            .collect()
    }

    #[test]
    fn the_gravest_node_speaks_for_the_table() {
        let ok = vec![row("status", "OK")];
        assert_eq!(gravest(vec![ok.clone(), ok.clone()]), ok);
        let bad = vec![
            row("error", "Table is marked as crashed"),
            row("error", "Corrupt"),
        ];
        assert_eq!(gravest(vec![ok.clone(), bad.clone(), ok.clone()]), bad);
        let note = vec![
            row("note", "Table does not support optimize"),
            row("status", "OK"),
        ];
        assert_eq!(gravest(vec![ok.clone(), note.clone()]), note);
        assert!(gravest(Vec::new()).is_empty());
    }
}
