//! `UPDATE t SET shard_key = ...`: rows whose key moves them to another node are deleted
//! there and inserted where their new key belongs, in one transaction (the client's, or one
//! of the proxy's own for an autocommit statement: XA when the nodes differ), as Vitess does
//! for its primary vindex column. The rows are first read with the new values of every SET
//! column, computed by the node (`SELECT <columns>, <SET expressions> ... FOR UPDATE`), so no
//! expression is evaluated by the proxy.
//!
//! Refused with the reason (1235): a multi-table UPDATE, ORDER BY / LIMIT, a column set
//! twice or set from a column set before it in the same SET (MariaDB assigns left to right),
//! a table without a primary key, rules other than `hash_slot` and `range`, and a table whose
//! slots are moving.

use sqlparser::ast::{AssignmentTarget, Expr, Spanned, Update};

use super::tree::refuse;
use super::{Plan, Planner};
use crate::config::TableRule;
use crate::sql::text::Text;
use crate::sql::write::quoted;
use crate::sql::{self, Offsets};

/// A planned UPDATE of a shard key (see the module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyUpdate {
    /// The table's rule name.
    pub table: String,
    /// The table as the generated statements name it (schema-qualified when the client's
    /// was), quoted.
    pub target: String,
    /// `SELECT <every column>, <each SET expression> FROM ... [WHERE ...] FOR UPDATE`, bound
    /// values written in: planned as a read of its own, then run in the transaction.
    pub select: String,
    /// The table's columns, in order (unquoted).
    pub columns: Vec<String>,
    /// Positions in `columns` of the primary key's columns.
    pub key: Vec<usize>,
    /// Position in `columns` of each SET target, in SET order; the SELECT's columns after
    /// the table's are their new values, in the same order.
    pub assigned: Vec<usize>,
    /// Position in `columns` of the shard key.
    pub shard: usize,
    /// Position in `columns` of the salt's column, when the table has salted keys (a row of
    /// a salted key whose salt column changes may move to another bucket's node).
    pub by: Option<usize>,
}

pub(super) fn plan(
    p: &Planner<'_>,
    u: &Update,
    table: &str,
    alias: Option<&str>,
    column: &str,
) -> Plan {
    let no = |why: &str| {
        refuse(format!(
            "UPDATE of the shard key `{column}` of `{table}` (shardproxy moves such rows between nodes, but not {why})"
        ))
    };
    match p.topo.table(table) {
        Some(TableRule::HashSlot { map, .. }) if map.is_moving() => {
            return no("while slots of the table move: try again after the move")
        }
        Some(TableRule::HashSlot { .. } | TableRule::Range { .. }) => {}
        Some(r) => return no(&format!("in a `{}` table", r.kind())),
        None => return no("in a table without a rule"),
    }
    if u.limit.is_some() || !u.order_by.is_empty() {
        return no("with ORDER BY or LIMIT");
    }
    if u.returning.is_some() || u.or.is_some() {
        return no("with RETURNING or an OR clause");
    }
    let sqlparser::ast::TableFactor::Table { name, .. } = &u.table.relation else {
        return no("of something other than a table");
    };
    let schema = sql::schema_name(name);
    let Some(columns) = (p.ctx.columns)(schema.as_deref(), table) else {
        return Plan::NeedColumns {
            schema,
            table: table.to_string(),
        };
    };
    let Some(pk) = (p.ctx.primary_key)(schema.as_deref(), table) else {
        let node = p
            .topo
            .table(table)
            .and_then(|r| r.all_nodes(p.topo).first().copied())
            .unwrap_or(p.topo.default_node);
        return Plan::NeedKey {
            schema,
            table: table.to_string(),
            node,
        };
    };
    let position = |name: &str| columns.iter().position(|c| c.eq_ignore_ascii_case(name));
    let mut key = Vec::with_capacity(pk.len());
    for k in pk.iter() {
        let plain = k
            .strip_prefix('`')
            .and_then(|k| k.strip_suffix('`'))
            .unwrap_or(k)
            .replace("``", "`");
        match position(&plain) {
            Some(i) => key.push(i),
            None => return no("where its primary key's columns cannot be found among its columns"),
        }
    }
    if key.is_empty() {
        return no("in a table without a primary key, whose rows cannot be told apart");
    }
    let Some(shard) = position(column) else {
        return no("where its shard key is not among its columns");
    };
    let by = match p.topo.table(table).and_then(TableRule::salt_column) {
        Some(by) => match position(by) {
            Some(i) => Some(i),
            None => return no("where its salt column is not among its columns"),
        },
        None => None,
    };
    let text = match Text::new(p.sql, p.parsed.mode) {
        Ok(t) => t,
        Err(e) => return no(&format!("where its text cannot be read ({e})")),
    };
    let offsets = Offsets::new(p.sql);
    let own = |e: &Expr| expr_text(p, &text, &offsets, e);
    let mut assigned = Vec::with_capacity(u.assignments.len());
    let mut values = Vec::with_capacity(u.assignments.len());
    for a in &u.assignments {
        let AssignmentTarget::ColumnName(n) = &a.target else {
            return no("with a tuple assignment");
        };
        let name = sql::table_name(n);
        let Some(i) = position(&name) else {
            return no(&format!(
                "setting `{name}`, which is not a column of the table"
            ));
        };
        if assigned.contains(&i) {
            return no(&format!("setting `{name}` twice"));
        }
        // MariaDB assigns left to right: an expression sees the columns set before it.
        if let Some(j) = assigned.iter().find(|j| mentions(&a.value, &columns[**j])) {
            return no(&format!(
                "setting `{name}` from `{}`, which the same SET changes before it",
                columns[*j]
            ));
        }
        let Some(v) = own(&a.value) else {
            return no("where an assignment cannot be located in the text");
        };
        assigned.push(i);
        values.push(v);
    }
    let filter = match &u.selection {
        None => String::new(),
        Some(w) => match own(w) {
            Some(w) => format!(" WHERE {w}"),
            None => return no("where its WHERE cannot be located in the text"),
        },
    };
    let target = match &schema {
        Some(s) => format!("{}.{}", quoted(s), quoted(table)),
        None => quoted(table),
    };
    let from = match alias {
        Some(a) => format!("{target} AS {}", quoted(a)),
        None => target.clone(),
    };
    let qualifier = quoted(alias.unwrap_or(table));
    let mut list: Vec<String> = columns
        .iter()
        .map(|c| format!("{qualifier}.{}", quoted(c)))
        .collect();
    list.extend(values.iter().map(|v| format!("({v})")));
    let select = format!("SELECT {} FROM {from}{filter} FOR UPDATE", list.join(", "));
    Plan::KeyUpdate(Box::new(KeyUpdate {
        table: table.to_string(),
        target,
        select,
        columns: columns.to_vec(),
        key,
        assigned,
        shard,
        by,
    }))
}

/// The text of `e` in the statement, bound values written in; None when it cannot be
/// located exactly. A span may leave out the expression's first or last token (its
/// brackets), so its ends move out token by token until the text parses as `e`.
pub(super) fn expr_text(
    p: &Planner<'_>,
    text: &Text,
    offsets: &Offsets,
    e: &Expr,
) -> Option<String> {
    let span = e.span();
    let (a, b) = (offsets.at(span.start)?, offsets.at(span.end)?);
    let starts: Vec<usize> = std::iter::once(a)
        .chain(
            text.toks
                .iter()
                .rev()
                .filter(|t| t.start < a)
                .map(|t| t.start)
                .take(MAX_STRETCH),
        )
        .collect();
    let ends: Vec<usize> = std::iter::once(b)
        .chain(
            text.toks
                .iter()
                .filter(|t| t.end > b)
                .map(|t| t.end)
                .take(MAX_STRETCH),
        )
        .collect();
    for start in &starts {
        for end in &ends {
            if p.sql
                .get(*start..*end)
                .is_some_and(|raw| text.parses_as(raw, e))
            {
                return text.render(*start, *end, p.bound()).ok();
            }
        }
    }
    None
}

/// Tokens an expression's text may run past the end of its span.
const MAX_STRETCH: usize = 8;

/// Does `e` name the column `column` (as `c`, `t.c` or `s.t.c`)?
pub(super) fn mentions(e: &Expr, column: &str) -> bool {
    let mut found = false;
    let _ = sqlparser::ast::visit_expressions(e, |x| {
        let name = match x {
            Expr::Identifier(i) => Some(&i.value),
            Expr::CompoundIdentifier(parts) => parts.last().map(|i| &i.value),
            _ => None,
        };
        if name.is_some_and(|n| n.eq_ignore_ascii_case(column)) {
            found = true;
            return std::ops::ControlFlow::Break(());
        }
        std::ops::ControlFlow::Continue(())
    });
    found
}
