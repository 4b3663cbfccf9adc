//! INSERT / REPLACE: rows grouped by the node of their shard key; a multi-row INSERT whose
//! rows live on several nodes is split so each node gets exactly its rows.

use std::collections::BTreeMap;

use sqlparser::ast::{Assignment, AssignmentTarget, Insert, OnInsert, SetExpr, TableObject};

use super::uses::{collect_uses, without_first};
use super::{refuse, OkMerge, Plan, Planner, Target};
use crate::config::TableRule;
use crate::routing::slot::slot_of;
use crate::sql::{literal, table_name};

pub(super) fn plan_insert(p: &Planner<'_>, ins: &Insert) -> Plan {
    let TableObject::TableName(name) = &ins.table else {
        return refuse("INSERT into a table function");
    };
    let table = table_name(name);
    let uses = without_first(collect_uses(p.stmt, p), &table);
    let rule = p.topo.table(&table);
    let (column, map) = match rule {
        Some(TableRule::HashSlot { column, map }) => (column, map),
        // Not sharded: one node, or every copy of a broadcast table.
        _ => {
            let nodes = match rule {
                None => vec![p.topo.default_node],
                Some(r) => p.nodes_for_keys(&table, r, None),
            };
            if !uses.is_empty() {
                if matches!(rule, Some(TableRule::Broadcast)) {
                    if let Some(u) = uses
                        .iter()
                        .find(|u| !matches!(p.topo.table(&u.table), Some(TableRule::Broadcast)))
                    {
                        return refuse(format!(
                            "INSERT into the broadcast table `{table}` reading `{}`, which is not on every node",
                            u.table
                        ));
                    }
                } else {
                    match p.common_node(&uses) {
                        Ok(Some(n)) if nodes == [n] => {}
                        Ok(None) => {}
                        _ => {
                            return refuse(format!(
                                "INSERT into `{table}` reading tables on other nodes; shardproxy cannot move rows between nodes"
                            ))
                        }
                    }
                }
            }
            let ok = if matches!(rule, Some(TableRule::Broadcast)) {
                OkMerge::Copies
            } else {
                OkMerge::Sum
            };
            return p.on_nodes(&nodes, ok);
        }
    };

    if let Some(OnInsert::DuplicateKeyUpdate(assignments)) = &ins.on {
        if assigns(assignments, column) {
            return refuse(format!(
                "ON DUPLICATE KEY UPDATE of the shard key `{column}` of `{table}` would move rows to another node"
            ));
        }
    }

    // INSERT ... SET col = v, ...
    if ins.source.is_none() {
        let value = ins
            .assignments
            .iter()
            .find(|a| assigns(std::slice::from_ref(*a), column))
            .map(|a| &a.value);
        let Some(expr) = value else {
            return refuse(format!(
                "INSERT into `{table}` must set its shard key `{column}`"
            ));
        };
        return match literal(expr, p.parsed, p.params).as_ref().and_then(slot_of) {
            Some(slot) => {
                p.trace(&table, slot);
                p.on(map.node_of_slot(slot))
            }
            None => refuse(format!(
                "the shard key `{column}` of `{table}` must be a constant, not NULL or an expression"
            )),
        };
    }

    let Some(source) = &ins.source else {
        return refuse("INSERT without rows");
    };
    let SetExpr::Values(values) = source.body.as_ref() else {
        return refuse(format!(
            "INSERT ... SELECT into the sharded table `{table}`: shardproxy cannot move rows between nodes; insert the rows with VALUES"
        ));
    };
    let Some(pos) = ins.columns.iter().position(|c| table_name(c) == *column) else {
        return refuse(format!(
            "INSERT into the sharded table `{table}` needs a column list that names its shard key `{column}`"
        ));
    };

    // Node of each row, in order.
    let mut by_node: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, row) in values.rows.iter().enumerate() {
        let Some(expr) = row.content.get(pos) else {
            return refuse(format!("row {} has fewer values than columns", i + 1));
        };
        let Some(slot) = literal(expr, p.parsed, p.params).as_ref().and_then(slot_of) else {
            return refuse(format!(
                "the shard key `{column}` of `{table}` must be a constant in every row (row {}: `{expr}`), not NULL or an expression",
                i + 1
            ));
        };
        p.trace(&table, slot);
        by_node.entry(map.node_of_slot(slot)).or_default().push(i);
    }
    if by_node.len() <= 1 {
        let node = by_node
            .keys()
            .next()
            .copied()
            .unwrap_or(p.topo.default_node);
        return p.on(node);
    }

    // Split: one INSERT per node with exactly its rows, cut from the client's own text so
    // that every literal reaches the node byte for byte.
    let Some(spans) = row_spans(p.sql, values) else {
        return refuse("cannot locate the rows of this INSERT in its text to split it");
    };
    let prefix = &p.sql[..spans[0].0];
    let suffix = &p.sql[spans[spans.len() - 1].1..];
    let placeholders: Vec<usize> = p
        .parsed
        .placeholder_locations()
        .filter_map(|loc| byte_offset(p.sql, loc))
        .collect();
    let mut targets = Vec::with_capacity(by_node.len());
    for (node, rows) in by_node {
        let mut sql = String::with_capacity(p.sql.len());
        sql.push_str(prefix);
        for (n, i) in rows.iter().enumerate() {
            if n > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&p.sql[spans[*i].0..spans[*i].1]);
        }
        sql.push_str(suffix);
        let keep = |off: usize| {
            off < spans[0].0
                || off >= spans[spans.len() - 1].1
                || rows
                    .iter()
                    .any(|i| (spans[*i].0..spans[*i].1).contains(&off))
        };
        let params = placeholders
            .iter()
            .zip(p.params.iter())
            .filter(|(off, _)| keep(**off))
            .map(|(_, v)| v.clone())
            .collect();
        targets.push(Target { node, sql, params });
    }
    Plan::Scatter {
        targets,
        ok: OkMerge::Sum,
        merge: None,
    }
}

/// Byte range `[start, end)` of each `( ... )` row of a VALUES list in the statement text.
fn row_spans(sql: &str, values: &sqlparser::ast::Values) -> Option<Vec<(usize, usize)>> {
    let mut out = Vec::with_capacity(values.rows.len());
    for row in &values.rows {
        let start = byte_offset(sql, row.opening_token.0.span.start)?;
        let close = byte_offset(sql, row.closing_token.0.span.start)?;
        if sql.as_bytes().get(start) != Some(&b'(') || sql.as_bytes().get(close) != Some(&b')') {
            return None;
        }
        out.push((start, close + 1));
    }
    if out.is_empty() || out.windows(2).any(|w| w[0].1 > w[1].0) {
        return None;
    }
    Some(out)
}

/// Byte offset of a tokenizer location (1-based line and character column).
fn byte_offset(sql: &str, loc: sqlparser::tokenizer::Location) -> Option<usize> {
    if loc.line == 0 || loc.column == 0 {
        return None;
    }
    let mut line_start = 0usize;
    for _ in 1..loc.line {
        line_start += sql[line_start..].find('\n')? + 1;
    }
    let line = &sql[line_start..];
    let col = usize::try_from(loc.column - 1).ok()?;
    match line.char_indices().nth(col) {
        Some((i, _)) => Some(line_start + i),
        None if col == line.chars().count() => Some(sql.len()),
        None => None,
    }
}

fn assigns(assignments: &[Assignment], column: &str) -> bool {
    assignments.iter().any(|a| match &a.target {
        AssignmentTarget::ColumnName(n) => table_name(n) == column,
        AssignmentTarget::Tuple(ns) => ns.iter().any(|n| table_name(n) == column),
    })
}
