//! INSERT / REPLACE: rows grouped by the node of their shard key; a multi-row INSERT whose
//! rows live on several nodes is split so each node gets exactly its rows.

use std::collections::BTreeMap;

use mysql_common::value::Value;
use sqlparser::ast::{Assignment, AssignmentTarget, Insert, OnInsert, SetExpr, TableObject};

use super::uses::{collect_uses, without_first};
use super::{refuse, IdError, OkMerge, Plan, Planner, Target};
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
    let Some((column, rule)) = rule.and_then(|r| r.column().map(|c| (c.to_string(), r))) else {
        return unsharded(p, ins, &table, rule, &uses);
    };
    let column = column.as_str();

    // `INSERT INTO t VALUES (...)`: the values are by position; name the columns.
    if ins.columns.is_empty() {
        if let Some(SetExpr::Values(values)) = ins.source.as_ref().map(|s| s.body.as_ref()) {
            return with_column_list(p, ins, name, values);
        }
    }

    if let Some(OnInsert::DuplicateKeyUpdate(assignments)) = &ins.on {
        if assigns(assignments, column) {
            return refuse(format!(
                "ON DUPLICATE KEY UPDATE of the shard key `{column}` of `{table}` would move rows to another node"
            ));
        }
        if let Some(by) = rule.salt_column().filter(|by| assigns(assignments, by)) {
            return refuse(format!(
                "ON DUPLICATE KEY UPDATE of the salt column `{by}` of `{table}` would move a salted key's rows to another bucket's node"
            ));
        }
    }
    let generator = p.topo.key_generators.get(&table);

    // INSERT ... SET col = v, ...
    if ins.source.is_none() {
        if let Some(g) = generator {
            if !assigns(&ins.assignments, &g.column) {
                return refuse(format!(
                    "INSERT ... SET into `{table}` without its generated key `{}`: use INSERT ... (columns) VALUES, which gets the key generated",
                    g.column
                ));
            }
        }
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
        let v = literal(expr, p.parsed, p.params).unwrap_or(Value::NULL);
        let by = rule.salt_column().and_then(|by| {
            let a = ins
                .assignments
                .iter()
                .find(|a| assigns(std::slice::from_ref(*a), by))?;
            literal(&a.value, p.parsed, p.params)
        });
        return match p.node_of_value(&table, rule, &v, by.as_ref()) {
            Ok(node) => p.on(node),
            Err(m) => refuse(m),
        };
    }

    let Some(source) = &ins.source else {
        return refuse("INSERT without rows");
    };
    let SetExpr::Values(values) = source.body.as_ref() else {
        return insert_select(p, ins, &table);
    };
    // A generated key: the column list leaves it out.
    let generate = generator.filter(|g| !ins.columns.iter().any(|c| table_name(c) == g.column));
    // The generated column is the shard key itself: each row goes where its new id lives.
    let key_generated = generate.is_some_and(|g| g.column == column);
    // A generator on the shard key also fills a NULL given for it (AUTO_INCREMENT's way).
    let fills_null = generator.is_some_and(|g| g.column == column);
    let pos = ins.columns.iter().position(|c| table_name(c) == *column);
    let by_pos = rule
        .salt_column()
        .and_then(|by| ins.columns.iter().position(|c| table_name(c) == by));
    let by_generated = rule
        .salt_column()
        .is_some_and(|by| generate.is_some_and(|g| g.column == by));
    if pos.is_none() && !key_generated {
        return refuse(format!(
            "INSERT into the sharded table `{table}` needs a column list that names its shard key `{column}`"
        ));
    }

    // Node of each row, in order, the generated id of each row, and the rows whose NULL key
    // was given an id (row, the id).
    let mut by_node: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut first_node = None;
    let mut ids: Vec<u64> = Vec::new();
    let mut filled: Vec<(usize, u64)> = Vec::new();
    let rows = values.rows.len() as u64;
    let mut row_keys = Vec::with_capacity(values.rows.len());
    let new_id = |slot: u16| match (p.ctx.next_id)(&table, slot) {
        Ok(id) => Ok(id),
        Err(IdError::NeedBlock) => Err(Box::new(Plan::NeedIds {
            table: table.clone(),
            count: rows,
        })),
        Err(IdError::Refused(m)) => Err(Box::new(refuse_with(1105, m))),
    };
    for (i, row) in values.rows.iter().enumerate() {
        let v = match pos {
            None => match new_id(0) {
                Ok(id) => {
                    ids.push(id);
                    Value::UInt(id)
                }
                Err(plan) => return *plan,
            },
            Some(pos) => {
                let Some(expr) = row.content.get(pos) else {
                    return refuse(format!("row {} has fewer values than columns", i + 1));
                };
                let Some(v) = literal(expr, p.parsed, p.params) else {
                    return refuse(format!(
                        "the shard key `{column}` of `{table}` must be a constant in every row (row {}: `{expr}`), not an expression",
                        i + 1
                    ));
                };
                if v == Value::NULL && fills_null {
                    match new_id(0) {
                        Ok(id) => {
                            filled.push((i, id));
                            Value::UInt(id)
                        }
                        Err(plan) => return *plan,
                    }
                } else {
                    v
                }
            }
        };
        let generated = if generate.is_some() && !key_generated {
            match new_id(slot_of(&v).unwrap_or(0)) {
                Ok(id) => {
                    ids.push(id);
                    Some(Value::UInt(id))
                }
                Err(plan) => return *plan,
            }
        } else {
            None
        };
        // A salted key's row goes to its bucket's node, by its salt column's value (given,
        // or the generated key).
        let by = match (by_pos, by_generated) {
            (Some(j), _) => row
                .content
                .get(j)
                .and_then(|e| literal(e, p.parsed, p.params)),
            (None, true) => generated,
            (None, false) => None,
        };
        let node = match p.node_of_value(&table, rule, &v, by.as_ref()) {
            Ok(n) => n,
            Err(m) => return refuse(format!("row {}: {m}", i + 1)),
        };
        row_keys.push(v);
        first_node.get_or_insert(node);
        by_node.entry(node).or_default().push(i);
    }
    *p.row_keys.borrow_mut() = Some(row_keys);
    if by_node.len() <= 1 && generate.is_none() && filled.is_empty() {
        let node = by_node
            .keys()
            .next()
            .copied()
            .unwrap_or(p.topo.default_node);
        return p.on(node);
    }

    // Split (or extend with generated ids): one INSERT per node with exactly its rows, cut
    // from the client's own text so that every literal reaches the node byte for byte.
    let Some(spans) = row_spans(p.sql, values) else {
        return refuse("cannot locate the rows of this INSERT in its text to split it");
    };
    let mut prefix = p.sql[..spans[0].0].to_string();
    let suffix = &p.sql[spans[spans.len() - 1].1..];
    let mut row_text: Vec<String> = spans
        .iter()
        .map(|(a, b)| p.sql[*a..*b].to_string())
        .collect();
    // A NULL key given an id: the id in its place (the first one also as LAST_INSERT_ID).
    let offsets = crate::sql::Offsets::new(p.sql);
    for (n, (i, id)) in filled.iter().enumerate() {
        let Some(pos) = pos else { break };
        let Some(expr) = values.rows[*i].content.get(pos) else {
            return refuse("cannot locate a NULL key in this INSERT's text");
        };
        let span = sqlparser::ast::Spanned::span(expr);
        let (Some(a), Some(b)) = (offsets.at(span.start), offsets.at(span.end)) else {
            return refuse("cannot locate a NULL key in this INSERT's text");
        };
        let (start, _) = spans[*i];
        let (Some(a), Some(b)) = (a.checked_sub(start), b.checked_sub(start)) else {
            return refuse("cannot locate a NULL key in this INSERT's text");
        };
        match row_text[*i].get(a..b) {
            Some(t) if t.eq_ignore_ascii_case("null") => {}
            Some("?") => {
                return refuse(format!(
                    "a NULL bound for the generated shard key `{column}` of `{table}`: leave the column out to have it generated"
                ))
            }
            _ => return refuse("cannot locate a NULL key in this INSERT's text"),
        }
        let value = if n == 0 && generate.is_none() {
            format!("LAST_INSERT_ID({id})")
        } else {
            id.to_string()
        };
        row_text[*i].replace_range(a..b, &value);
    }
    if let Some(g) = generate {
        // `(a, b)` -> `(a, b, id_col)`; each row `(..)` -> `(.., id)`, the first row's id
        // through LAST_INSERT_ID(id) so the session's LAST_INSERT_ID() names it, as MySQL
        // does for the first AUTO_INCREMENT value of a multi-row INSERT.
        let Some(close) = column_list_end(p.sql, ins, spans[0].0) else {
            return refuse("cannot locate the column list of this INSERT to add its generated key");
        };
        prefix = format!(
            "{}, `{}`{}",
            &p.sql[..close],
            g.column.replace('`', "``"),
            &p.sql[close..spans[0].0]
        );
        for (i, text) in row_text.iter_mut().enumerate() {
            let id = ids.get(i).copied().unwrap_or(0);
            let value = if i == 0 {
                format!("LAST_INSERT_ID({id})")
            } else {
                id.to_string()
            };
            text.truncate(text.len() - 1);
            text.push_str(&format!(", {value})"));
        }
    }
    let offsets = crate::sql::Offsets::new(p.sql);
    let placeholders: Vec<usize> = p
        .parsed
        .placeholder_locations()
        .filter_map(|loc| offsets.at(loc))
        .collect();
    let mut targets = Vec::with_capacity(by_node.len());
    let mut row_order = Vec::with_capacity(by_node.len());
    for (node, rows) in by_node {
        let mut sql = String::with_capacity(p.sql.len() + 32 * rows.len());
        sql.push_str(&prefix);
        for (n, i) in rows.iter().enumerate() {
            if n > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&row_text[*i]);
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
        row_order.push(rows);
    }
    // The first row's node first: it holds LAST_INSERT_ID() afterwards.
    if let Some(i) = targets.iter().position(|t| Some(t.node) == first_node) {
        targets[..=i].rotate_right(1);
        row_order[..=i].rotate_right(1);
    }
    if targets.len() == 1 {
        return targets
            .pop()
            .map(Plan::Route)
            .unwrap_or_else(|| refuse("INSERT without rows"));
    }
    // RETURNING rows come back in VALUES order, as from one MySQL (an ORM pairs them with
    // its objects by position).
    let scatter = Plan::Scatter {
        targets,
        ok: OkMerge::Sum,
    };
    if ins.returning.is_none() {
        return scatter;
    }
    Plan::ValuesOrder {
        positions: row_order,
        input: Box::new(scatter),
    }
}

/// An INSERT without a column list into a sharded table: planned as the same statement with
/// the table's columns named (read from its nodes and cached, `Plan::NeedColumns` until
/// then), so the shard key is found by name and the nodes get an INSERT that names what each
/// value is. A row with another number of values is refused as MySQL refuses it.
fn with_column_list(
    p: &Planner<'_>,
    ins: &Insert,
    name: &sqlparser::ast::ObjectName,
    values: &sqlparser::ast::Values,
) -> Plan {
    let table = table_name(name);
    let schema = crate::sql::schema_name(name);
    let Some(cols) = (p.ctx.columns)(schema.as_deref(), &table) else {
        return Plan::NeedColumns { schema, table };
    };
    if let Some(i) = values
        .rows
        .iter()
        .position(|r| r.content.len() != cols.len())
    {
        return refuse_with(
            ER_WRONG_VALUE_COUNT_ON_ROW,
            format!("Column count doesn't match value count at row {}", i + 1),
        );
    }
    if ins.partitioned.is_some() || ins.table_alias.is_some() {
        return refuse(format!(
            "INSERT into `{table}` with PARTITION or a row alias needs a column list"
        ));
    }
    let Some(mut end) = crate::sql::byte_offset(p.sql, sqlparser::ast::Spanned::span(name).end)
    else {
        return refuse("cannot locate the table of this INSERT in its text to name its columns");
    };
    // A quoted name's span may stop before its closing quote.
    if matches!(p.sql.as_bytes().get(end), Some(b'`' | b'"')) {
        end += 1;
    }
    let list = cols
        .iter()
        .map(|c| format!("`{}`", c.replace('`', "``")))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!("{} ({list}){}", &p.sql[..end], &p.sql[end..]);
    let parsed = match crate::sql::parse_in(&sql, p.parsed.mode) {
        Ok(parsed) => parsed,
        Err(e) => return refuse(format!("naming the columns of this INSERT failed: {e}")),
    };
    match &parsed.stmt {
        sqlparser::ast::Statement::Insert(named) if named.columns.len() == cols.len() => {}
        _ => return refuse("naming the columns of this INSERT changed its meaning"),
    }
    let (plan, slots) = super::plan_traced(&sql, Ok(&parsed), p.params, p.topo, p.ctx);
    p.slots.borrow_mut().extend(slots);
    plan
}

/// MySQL's ER_WRONG_VALUE_COUNT_ON_ROW.
const ER_WRONG_VALUE_COUNT_ON_ROW: u16 = 1136;

/// An INSERT into a table that is not sharded: its node, or every copy of a broadcast table.
fn unsharded(
    p: &Planner<'_>,
    ins: &Insert,
    table: &str,
    rule: Option<&TableRule>,
    uses: &[super::uses::Use],
) -> Plan {
    let nodes = match rule {
        None => vec![p.topo.default_node],
        Some(r) => p.nodes_for_keys(table, r, None),
    };
    if !uses.is_empty() {
        if matches!(rule, Some(TableRule::Broadcast)) {
            if let Some(u) = uses
                .iter()
                .find(|u| !matches!(p.topo.table(&u.table), Some(TableRule::Broadcast)))
            {
                let _ = u;
                return insert_select(p, ins, table);
            }
        } else {
            match p.common_node(uses) {
                Ok(Some(n)) if nodes == [n] => {}
                Ok(None) => {}
                _ => return insert_select(p, ins, table),
            }
        }
    }
    let ok = if matches!(rule, Some(TableRule::Broadcast)) {
        OkMerge::Copies
    } else {
        OkMerge::Sum
    };
    p.on_nodes(&nodes, ok)
}

fn refuse_with(code: u16, message: String) -> Plan {
    Plan::Refuse { code, message }
}

/// Byte offset of the `)` closing the INSERT's column list (before the first row at `limit`).
fn column_list_end(sql: &str, ins: &Insert, limit: usize) -> Option<usize> {
    let last = ins.columns.last()?;
    let start = crate::sql::byte_offset(sql, sqlparser::ast::Spanned::span(last).end)?;
    let rel = sql.get(start..limit)?.find(')')?;
    Some(start + rel)
}

/// Byte range `[start, end)` of each `( ... )` row of a VALUES list in the statement text.
fn row_spans(sql: &str, values: &sqlparser::ast::Values) -> Option<Vec<(usize, usize)>> {
    let mut out = Vec::with_capacity(values.rows.len());
    let offsets = crate::sql::Offsets::new(sql);
    for row in &values.rows {
        let start = offsets.at(row.opening_token.0.span.start)?;
        let close = offsets.at(row.closing_token.0.span.start)?;
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

fn assigns(assignments: &[Assignment], column: &str) -> bool {
    assignments.iter().any(|a| match &a.target {
        AssignmentTarget::ColumnName(n) => table_name(n) == column,
        AssignmentTarget::Tuple(ns) => ns.iter().any(|n| table_name(n) == column),
    })
}

/// An INSERT whose rows come from a SELECT that cannot run where the rows go: the SELECT is
/// read (planned like any read, so across nodes too), then its rows inserted as VALUES.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertSelect {
    /// The SELECT, as the client wrote it.
    pub select: String,
    /// The statement's text before the SELECT (`INSERT [IGNORE] INTO t [(cols)]`).
    pub head: String,
    /// Its text after (`ON DUPLICATE KEY UPDATE ...`).
    pub tail: String,
    pub table: String,
}

fn insert_select(p: &Planner<'_>, ins: &Insert, table: &str) -> Plan {
    let no = |why: &str| {
        refuse(format!(
            "INSERT ... SELECT into `{table}` reading rows placed elsewhere: shardproxy reads the rows and inserts them, but not {why}"
        ))
    };
    let Some(source) = &ins.source else {
        return no("without a SELECT");
    };
    let span = sqlparser::ast::Spanned::span(source.as_ref());
    let offsets = crate::sql::Offsets::new(p.sql);
    let (Some(a), Some(b)) = (offsets.at(span.start), offsets.at(span.end)) else {
        return no("where its SELECT cannot be located in the text");
    };
    let (Some(head), Some(select), Some(tail)) = (p.sql.get(..a), p.sql.get(a..b), p.sql.get(b..))
    else {
        return no("where its SELECT cannot be located in the text");
    };
    let same = matches!(
        crate::sql::parse_in(select, p.parsed.mode).map(|q| q.stmt.clone()),
        Ok(sqlparser::ast::Statement::Query(q)) if q == *source
    );
    if !same || head.trim_end().ends_with('(') {
        return no("where its SELECT cannot be located in the text");
    }
    // Bound values are the SELECT's: written into its text by the literal writer (it runs
    // as a read of its own); one before or after it has no statement to go to.
    let select = if p.parsed.param_count() > 0 {
        let text = match crate::sql::text::Text::new(p.sql, p.parsed.mode) {
            Ok(t) => t,
            Err(e) => return no(&format!("where its text cannot be read ({e})")),
        };
        let inside = text
            .toks
            .iter()
            .filter(|t| t.kind == crate::sql::lex::Kind::Param)
            .all(|t| t.start >= a && t.end <= b);
        if !inside {
            return no("with placeholders outside its SELECT (send it as text)");
        }
        match text.render(a, b, p.bound()) {
            Ok(s) => s,
            Err(e) => return no(&e),
        }
    } else {
        select.to_string()
    };
    Plan::InsertSelect(Box::new(InsertSelect {
        select,
        head: head.to_string(),
        tail: tail.to_string(),
        table: table.to_string(),
    }))
}
