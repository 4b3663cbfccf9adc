//! Writes over any rows of a table whose moves are captured from their sources' binary logs
//! (or past their cutover): run where the rows are owned, kept off the copies the other node
//! holds (docs/design.md, "Writes over any rows while a move is captured").

use sqlparser::ast::{Statement, TableFactor};

use super::moving::{moving_msg, quote, table_sql, Moving};
use super::{refuse, Plan, Planner, Target};
use crate::routing::slot::MoveStep;
use crate::sql;
use crate::sql::text::{Edits, Text};

/// A write to rows whose moves are all captured from their sources' binary logs (or past
/// their cutover): it runs as routed, where the rows are owned, and the logs carry its
/// changes to the targets. Only the copies must not be written where they are not the rows:
/// on a target before its cutover, on the source after it (the same copies reads leave
/// out). Counted toward the targets whose cutover is still to come; at a hold it waits.
pub(super) fn captured(
    p: &Planner<'_>,
    mut plan: Plan,
    written: &str,
    column: &str,
    seen: &[&Moving],
) -> Plan {
    let targets: Vec<&mut Target> = match plan.source_mut() {
        Plan::Route(t) => vec![t],
        Plan::Scatter { targets, .. } => targets.iter_mut().collect(),
        _ => {
            return refuse(moving_msg(
                written,
                "a write planned other than on its nodes",
            ))
        }
    };
    for t in targets {
        let here: Vec<&Moving> = seen
            .iter()
            .copied()
            .filter(|m| m.shadow_node() == t.node)
            .collect();
        // An INSERT's rows go where they are owned: none is a copy.
        if here.is_empty() || matches!(p.stmt, Statement::Insert(_)) {
            continue;
        }
        match past_copies(p, &t.sql, column, &here) {
            Ok(sql) => t.sql = sql,
            Err(why) => return refuse(moving_msg(written, &why)),
        }
    }
    let mut to: Vec<usize> = seen
        .iter()
        .filter(|m| m.step != MoveStep::Cleanup)
        .map(|m| m.to)
        .collect();
    to.sort_unstable();
    to.dedup();
    if to.is_empty() {
        return plan;
    }
    let plan = Plan::Captured {
        targets: to,
        write: Box::new(plan),
    };
    if seen.iter().any(|m| m.step == MoveStep::Hold) {
        return Plan::Frozen {
            table: written.to_string(),
            unless: Some(Box::new(plan)),
        };
    }
    plan
}

/// An UPDATE's or DELETE's text `sql` with its WHERE restricted to rows outside `moves`
/// (`(where) AND (pred) IS NOT TRUE`, or a WHERE of its own), by an edit of the text; every
/// other byte, its `?` included, stays.
fn past_copies(
    p: &Planner<'_>,
    sql: &str,
    column: &str,
    moves: &[&Moving],
) -> Result<String, String> {
    let parsed = if sql == p.sql {
        None
    } else {
        Some(
            sql::parse_in(sql, p.parsed.mode)
                .map_err(|e| format!("the statement does not parse ({e})"))?,
        )
    };
    let parsed = parsed.as_ref().unwrap_or(p.parsed);
    let text = Text::new(sql, parsed.mode)?;
    let (relation, selection, ordered) = match &parsed.stmt {
        Statement::Update(u) if u.from.is_none() && u.table.joins.is_empty() => {
            (&u.table.relation, u.selection.as_ref(), u.limit.is_some())
        }
        Statement::Delete(d) if d.tables.is_empty() && d.using.is_none() => {
            let from = match &d.from {
                sqlparser::ast::FromTable::WithFromKeyword(t)
                | sqlparser::ast::FromTable::WithoutKeyword(t) => t,
            };
            match from.as_slice() {
                [one] if one.joins.is_empty() => (
                    &one.relation,
                    d.selection.as_ref(),
                    d.limit.is_some() || !d.order_by.is_empty(),
                ),
                _ => return Err("a write over several tables".into()),
            }
        }
        _ => return Err("a write over several tables".into()),
    };
    let TableFactor::Table { name, alias, .. } = relation else {
        return Err("a write to a derived table".into());
    };
    let qualifier = match alias {
        Some(a) => quote(&a.name.value),
        None => table_sql(name),
    };
    let pred = moves
        .iter()
        .map(|m| format!("({}) IS NOT TRUE", m.predicate(Some(&qualifier), column)))
        .collect::<Vec<_>>()
        .join(" AND ");
    let mut edits = Edits::new();
    match selection {
        Some(e) => {
            let (a, b) = text
                .extent(e)
                .ok_or("a write whose WHERE shardproxy cannot place")?;
            edits.insert(a, "(");
            edits.insert(b, format!(") AND {pred}"));
        }
        None if ordered => return Err("a write with ORDER BY or LIMIT and no WHERE".into()),
        None => {
            let end = text
                .toks
                .iter()
                .rev()
                .find(|t| t.kind != crate::sql::lex::Kind::Semi)
                .map_or(sql.len(), |t| t.end);
            edits.insert(end, format!(" WHERE {pred}"));
        }
    }
    edits.apply_keeping_params(&text)
}
