//! Statements over tables whose slots are being moved to another node (`crate::migrate`).
//!
//! While a range moves, two nodes hold its rows: the source (authoritative until the move's
//! last step) and the target (filling up). Every plan is checked against the moves:
//! - a write to one moving range becomes a [`DualWrite`]: it runs on the source, and the
//!   images of the rows it changed are written to the target (`crate::exec::dual_write`);
//!   at the freeze step it waits for the next step ([`Plan::Frozen`]);
//! - a read on the node that holds rows reads must not see there (the target's copies
//!   before reads move, the source's left-overs after) gets a predicate that leaves those
//!   slots out;
//! - what cannot be made right (a write over several ranges or none, DDL) is refused with
//!   1235 until the move ends.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use mysql_common::value::Value;
use sqlparser::ast::{
    Expr, JoinConstraint, JoinOperator, Query, Select, SetExpr, Statement, TableFactor,
    TableObject, Visit, Visitor,
};

pub use super::moved::{Moving, Which};
use super::uses::{collect_uses, Use};
use super::{refuse, Plan, Planner, Target};
use crate::config::TableRule;
use crate::routing::slot::MoveStep;
use crate::sql::text::{Edits, Text};
use crate::sql::{self, literal, table_name};

/// A write to slots being moved, as `crate::exec::dual_write` runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct DualWrite {
    /// Where it runs and answers the client.
    pub source: usize,
    /// Where the images of the rows it changed go.
    pub target: usize,
    pub sql: String,
    pub params: Vec<Value>,
    /// The table as the statement names it, ready for SQL (`` `db`.`t` `` or `` `t` ``).
    pub table: String,
    /// The table's primary-key columns, quoted.
    pub key: Arc<[String]>,
    pub rows: Changed,
}

/// How the rows a write changes are found.
#[derive(Debug, Clone, PartialEq)]
pub enum Changed {
    /// An INSERT / REPLACE: the primary key of each row it names.
    Keys(Vec<Vec<Value>>),
    /// An INSERT that leaves its one-column AUTO_INCREMENT key to the node: the ids from its
    /// OK packet's insert id on, one per affected row.
    Generated,
    /// An UPDATE / DELETE: the rows this locking read returns (its `?` take `params`), read
    /// before the statement, under the same row locks.
    Select { sql: String, params: Vec<Value> },
}

impl DualWrite {
    /// `SELECT key..., t.* FROM t WHERE (key) IN ((?..), ...) FOR UPDATE` for `n` keys: the
    /// rows' images after the write (the key first, to tell which still exist).
    pub fn images_sql(&self, n: usize) -> String {
        let cols = self.key.join(", ");
        format!(
            "SELECT {cols}, {t}.* FROM {t} WHERE ({cols}) IN ({}) FOR UPDATE",
            tuples(self.key.len(), n),
            t = self.table
        )
    }

    /// `REPLACE INTO t VALUES (?, ...), ...` for `n` rows of `width` columns.
    pub fn replace_sql(&self, width: usize, n: usize) -> String {
        format!("REPLACE INTO {} VALUES {}", self.table, tuples(width, n))
    }

    /// `DELETE FROM t WHERE (key) IN ((?..), ...)` for `n` keys.
    pub fn delete_sql(&self, n: usize) -> String {
        format!(
            "DELETE FROM {} WHERE ({}) IN ({})",
            self.table,
            self.key.join(", "),
            tuples(self.key.len(), n)
        )
    }
}

/// `(?, ?), (?, ?)`: `n` tuples of `width` placeholders.
pub fn tuples(width: usize, n: usize) -> String {
    let one = format!("({})", vec!["?"; width].join(", "));
    vec![one; n].join(", ")
}

/// A quoted identifier.
pub fn quote(id: &str) -> String {
    format!("`{}`", id.replace('`', "``"))
}

/// Does any table of the rules have slots moving?
pub fn any_moving(topo: &crate::config::Topology) -> bool {
    topo.tables.values().any(|r| match r {
        TableRule::HashSlot { map, .. } => map.is_moving(),
        TableRule::Directory(d) => !d.moves.is_empty(),
        TableRule::Range { map, .. } => map.is_moving(),
        _ => false,
    })
}

/// The routing column and the moves of a table, if it has any.
fn moves_of(p: &Planner<'_>, table: &str) -> Option<(String, Vec<Moving>)> {
    match p.topo.table(table) {
        Some(TableRule::HashSlot { column, map }) if map.is_moving() => {
            let apart = map.apart();
            let slots = map.moves().iter().map(|m| Moving {
                which: Which::Slots(m.first, m.last, apart.clone()),
                from: m.from,
                to: m.to,
                step: m.step,
            });
            let keys = map.key_moves().iter().map(|m| Moving {
                which: Which::Key(m.key.clone()),
                from: m.from,
                to: m.to,
                step: m.step,
            });
            let salt = map.salt();
            let buckets = map.salt_moves().iter().filter_map(|m| {
                let salt = salt?;
                Some(Moving {
                    which: Which::Buckets {
                        key: m.key.clone(),
                        by: salt.by.clone(),
                        buckets: salt.buckets,
                        first: m.first,
                        last: m.last,
                    },
                    from: m.from,
                    to: m.to,
                    step: m.step,
                })
            });
            Some((column.clone(), slots.chain(keys).chain(buckets).collect()))
        }
        Some(TableRule::Range { column, map }) if map.is_moving() => Some((
            column.clone(),
            map.moves()
                .iter()
                .map(|m| {
                    let (lo, hi) = map.bounds(m.index);
                    Moving {
                        which: Which::Range {
                            kind: map.kind,
                            lo: lo.cloned(),
                            hi: hi.cloned(),
                        },
                        from: m.from,
                        to: m.to,
                        step: m.step,
                    }
                })
                .collect(),
        )),
        Some(TableRule::Directory(d)) if !d.moves.is_empty() => Some((
            d.column.clone(),
            d.moves
                .iter()
                .map(|m| Moving {
                    which: Which::Key(m.key.clone()),
                    from: m.from,
                    to: m.to,
                    step: m.step,
                })
                .collect(),
        )),
        _ => None,
    }
}

/// The plan made right for the moves under way (see the module documentation).
pub(super) fn adjust(p: &Planner<'_>, plan: Plan) -> Plan {
    if !p.moving || !matches!(plan.source(), Plan::Route(_) | Plan::Scatter { .. }) {
        return plan;
    }
    let uses = collect_uses(p.stmt, p);
    if !uses.iter().any(|u| moves_of(p, &u.table).is_some()) {
        return plan;
    }
    match p.stmt {
        Statement::Query(q) if !q.locks.is_empty() => locking_read(p, plan, &uses),
        Statement::Query(_) => reads(p, plan, &uses),
        Statement::Explain { .. } => plan,
        Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) => {
            writes(p, plan, &uses)
        }
        _ => {
            let t = uses
                .iter()
                .find(|u| moves_of(p, &u.table).is_some())
                .map(|u| u.table.clone())
                .unwrap_or_default();
            refuse(format!(
                "rows of `{t}` are being moved (SHOW MIGRATIONS): this statement must wait until the move ends or is aborted"
            ))
        }
    }
}

pub(super) fn moving_msg(table: &str, what: &str) -> String {
    format!(
        "rows of `{table}` are being moved (SHOW MIGRATIONS): {what}; it can run once the move ends or is aborted"
    )
}

/// A use pinned to keys none of which is in `m`'s slots cannot see that range's rows (nor
/// the integer an integer column reads a key string as: `'012'` is 12).
fn sees(u: &Use, m: &Moving) -> bool {
    match &u.keys {
        Some(keys) => keys
            .iter()
            .any(|k| m.holds(k) || crate::value::integer_alias(k).is_some_and(|a| m.holds(&a))),
        None => true,
    }
}

/// A locking read (`FOR UPDATE`, `LOCK IN SHARE MODE`) takes its locks where the writes
/// run: on the source while it is authoritative, not on the copies reads moved to.
fn locking_read(p: &Planner<'_>, plan: Plan, uses: &[Use]) -> Plan {
    let mut from = None;
    let mut hold = None;
    for u in uses {
        let Some((_, moves)) = moves_of(p, &u.table) else {
            continue;
        };
        for m in moves.iter().filter(|m| sees(u, m)) {
            match (m.step, &u.keys) {
                (MoveStep::DualWrite | MoveStep::Cleanup | MoveStep::Capture, _) => {}
                // The source answers until the target has caught up; the lock would hold
                // up the catch-up, so it waits too (unless its transaction wrote there).
                (MoveStep::Hold, _) => hold = Some((u.table.clone(), m.to)),
                (MoveStep::Freeze, Some(_)) => {
                    let unless = match &plan {
                        Plan::Route(t) => Some(Box::new(Plan::Route(Target {
                            node: m.from,
                            ..t.clone()
                        }))),
                        _ => None,
                    };
                    return Plan::Frozen {
                        table: u.table.clone(),
                        unless,
                    };
                }
                (MoveStep::Freeze, None) => {
                    return Plan::Frozen {
                        table: u.table.clone(),
                        unless: None,
                    }
                }
                (MoveStep::ReadTarget, Some(_)) => from = Some(m.from),
                (MoveStep::ReadTarget, None) => {
                    return refuse(moving_msg(
                        &u.table,
                        "a locking read of it must pin its shard key while reads move",
                    ))
                }
            }
        }
    }
    match (from, plan) {
        (Some(node), Plan::Route(mut t)) => {
            t.node = node;
            Plan::Route(t)
        }
        (Some(_), _) => refuse(moving_msg(
            "the table",
            "a locking read over several nodes while reads move",
        )),
        (None, plan) => match hold {
            Some((table, target)) => Plan::Frozen {
                table,
                unless: Some(Box::new(Plan::Captured {
                    targets: vec![target],
                    write: Box::new(reads(p, plan, uses)),
                })),
            },
            None => reads(p, plan, uses),
        },
    }
}

fn reads(p: &Planner<'_>, mut plan: Plan, uses: &[Use]) -> Plan {
    let targets: Vec<&mut Target> = match plan.source_mut() {
        Plan::Route(t) => vec![t],
        Plan::Scatter { targets, .. } => targets.iter_mut().collect(),
        _ => return plan,
    };
    for t in targets {
        // table -> (its shard key, the ranges to leave out on this node)
        let mut hide: HashMap<String, (String, Vec<Moving>)> = HashMap::new();
        for u in uses {
            let Some((column, moves)) = moves_of(p, &u.table) else {
                continue;
            };
            for m in moves
                .iter()
                .filter(|m| m.shadow_node() == t.node && sees(u, m))
            {
                let e = hide
                    .entry(u.table.clone())
                    .or_insert_with(|| (column.to_string(), Vec::new()));
                if !e.1.contains(m) {
                    e.1.push(m.clone());
                }
            }
        }
        if hide.is_empty() {
            continue;
        }
        match hidden(&t.sql, &hide, p.parsed.mode) {
            Ok(sql) => t.sql = sql,
            Err(what) => {
                let table = hide.keys().next().cloned().unwrap_or_default();
                return refuse(moving_msg(&table, &what));
            }
        }
    }
    plan
}

/// `sql` with every reference to the tables of `hide` restricted to rows outside their
/// ranges: `NOT (CRC32(alias.key) % 1024 BETWEEN a AND b)` joined to the WHERE of the SELECT
/// that reads it (to the ON of a LEFT JOIN that reads it), by edits of the text (read in
/// `mode`); every other byte, its `?` included, stays. `Err` says what could not be.
pub fn hidden(
    sql: &str,
    hide: &HashMap<String, (String, Vec<Moving>)>,
    mode: crate::sql::lex::Mode,
) -> Result<String, String> {
    let parsed =
        sql::parse_in(sql, mode).map_err(|e| format!("the statement does not parse ({e})"))?;
    let text = Text::new(sql, mode)?;
    let mut v = Hide {
        hide,
        text: &text,
        edits: Edits::new(),
        done: 0,
        failed: None,
    };
    let _ = parsed.stmt.visit(&mut v);
    if let Some(f) = v.failed {
        return Err(f);
    }
    let mut seen = 0;
    let _ = sqlparser::ast::visit_relations(&parsed.stmt, |name| {
        if hide.contains_key(&table_name(name)) {
            seen += 1;
        }
        ControlFlow::<()>::Continue(())
    });
    if seen != v.done {
        return Err("a query that reads the table other than in a FROM or JOIN".into());
    }
    v.edits.apply_keeping_params(&text)
}

struct Hide<'h, 't> {
    hide: &'h HashMap<String, (String, Vec<Moving>)>,
    text: &'t Text<'t>,
    edits: Edits,
    done: usize,
    failed: Option<String>,
}

impl Hide<'_, '_> {
    /// The predicate for a table factor, if it is one of the hidden tables.
    fn predicate(&self, f: &TableFactor) -> Option<String> {
        let TableFactor::Table { name, alias, .. } = f else {
            return None;
        };
        let table = table_name(name);
        let (column, moves) = self.hide.get(&table)?;
        let qualifier = match alias {
            Some(a) => quote(&a.name.value),
            None => name
                .0
                .iter()
                .filter_map(|p| p.as_ident())
                .map(|i| quote(&i.value))
                .collect::<Vec<_>>()
                .join("."),
        };
        let parts: Vec<String> = moves
            .iter()
            .map(|m| format!("(NOT ({}))", m.predicate(Some(&qualifier), column)))
            .collect();
        Some(parts.join(" AND "))
    }

    fn fail(&mut self, why: &str) {
        self.failed.get_or_insert_with(|| why.to_string());
    }

    fn select(&mut self, s: &Select) {
        let mut wheres = Vec::new();
        for twj in &s.from {
            let outer = twj.joins.iter().any(|j| {
                matches!(
                    j.join_operator,
                    JoinOperator::Right(_)
                        | JoinOperator::RightOuter(_)
                        | JoinOperator::FullOuter(_)
                )
            });
            let mut found = 0;
            if let Some(e) = self.predicate(&twj.relation) {
                found += 1;
                wheres.push(e);
            }
            for j in &twj.joins {
                let Some(e) = self.predicate(&j.relation) else {
                    continue;
                };
                found += 1;
                match &j.join_operator {
                    JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => match c {
                        JoinConstraint::On(on) => match self.text.extent(on) {
                            Some((a, b)) => {
                                self.edits.insert(a, "(");
                                self.edits.insert(b, format!(") AND {e}"));
                                self.done += 1;
                            }
                            None => self.fail("a LEFT JOIN of it whose ON shardproxy cannot place"),
                        },
                        _ => self.fail("a LEFT JOIN of it without ON"),
                    },
                    _ => wheres.push(e),
                }
            }
            if found > 0 && outer {
                self.fail("a RIGHT or FULL JOIN with it");
            }
        }
        if wheres.is_empty() {
            return;
        }
        self.done += wheres.len();
        let at = self.text.offset(s.select_token.0.span.start);
        let clauses = match at.map(|at| self.text.clauses(at)) {
            Some(Ok(c)) => c,
            _ => return self.fail("a SELECT whose clauses shardproxy cannot place"),
        };
        if clauses.where_.is_some() != s.selection.is_some() {
            return self.fail("a SELECT whose clauses shardproxy cannot place");
        }
        self.edits.and_where(&clauses, &wheres.join(" AND "));
    }

    fn set_expr(&mut self, body: &SetExpr) {
        match body {
            SetExpr::Select(s) => self.select(s),
            SetExpr::SetOperation { left, right, .. } => {
                self.set_expr(left);
                self.set_expr(right);
            }
            // Nested queries are visited on their own.
            _ => {}
        }
    }
}

impl Visitor for Hide<'_, '_> {
    type Break = ();

    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        self.set_expr(&q.body);
        ControlFlow::Continue(())
    }
}

fn writes(p: &Planner<'_>, plan: Plan, uses: &[Use]) -> Plan {
    let written = match p.stmt {
        Statement::Insert(ins) => match &ins.table {
            TableObject::TableName(n) => table_name(n),
            _ => return plan,
        },
        Statement::Update(u) => match super::uses::factor_name(&u.table.relation) {
            Some((t, _)) => t,
            None => return plan,
        },
        Statement::Delete(d) => match &d.from {
            sqlparser::ast::FromTable::WithFromKeyword(t)
            | sqlparser::ast::FromTable::WithoutKeyword(t) => {
                match t
                    .first()
                    .and_then(|t| super::uses::factor_name(&t.relation))
                {
                    Some((t, _)) => t,
                    None => return plan,
                }
            }
        },
        _ => return plan,
    };
    // Every other table the statement reads must not see a moving range.
    for u in uses.iter().filter(|u| u.table != written) {
        if let Some((_, moves)) = moves_of(p, &u.table) {
            if moves.iter().any(|m| sees(u, m)) {
                return refuse(moving_msg(
                    &u.table,
                    "a write that reads the table where its keys are not pinned outside the moving slots",
                ));
            }
        }
    }
    let Some((column, moves)) = moves_of(p, &written) else {
        return plan;
    };
    // The planner traces the routing values of a write's rows (an INSERT's) or of the keys
    // its WHERE pins.
    let mine: Vec<Value> = p
        .values
        .borrow()
        .iter()
        .filter(|(t, _)| *t == written)
        .map(|(_, v)| v.clone())
        .collect();
    let keyed = matches!(p.stmt, Statement::Insert(_)) || !mine.is_empty();
    if keyed && !mine.iter().any(|v| moves.iter().any(|m| m.holds(v))) {
        // None of its rows is moving.
        return plan;
    }
    let seen: Vec<&Moving> = moves
        .iter()
        .filter(|m| !keyed || mine.iter().any(|v| m.holds(v)))
        .collect();
    if seen.iter().all(|m| m.step.captured_or_owned()) {
        return super::captured::captured(p, plan, &written, &column, &seen);
    }
    let one = mine.iter().find_map(|v| moves.iter().find(|m| m.holds(v)));
    if one.is_some_and(|m| !mine.iter().all(|v| m.holds(v))) {
        return refuse(moving_msg(
            &written,
            "a write whose rows are both among the moving rows and outside them: write them apart",
        ));
    }
    let (Some(m), Plan::Route(t), true) = (one, &plan, keyed) else {
        return refuse(moving_msg(
            &written,
            "a write to it must pin its routing key to the rows of one move, or to rows that are not moving",
        ));
    };
    match m.step {
        MoveStep::Cleanup | MoveStep::Capture | MoveStep::Hold => {
            super::captured::captured(p, plan.clone(), &written, &column, &[m])
        }
        MoveStep::DualWrite | MoveStep::ReadTarget | MoveStep::Freeze => {
            let schema = schema_of(p.stmt);
            let Some(key) = (p.ctx.primary_key)(schema.as_deref(), &written) else {
                return Plan::NeedKey {
                    schema,
                    table: written,
                    node: m.from,
                };
            };
            if key.is_empty() {
                return refuse(moving_msg(
                    &written,
                    "the table has no primary key, so the rows a write changes cannot be told apart",
                ));
            }
            match dual_write(p, t, m, &key) {
                // At the freeze only a transaction that wrote images already goes on
                // writing them (the freeze waits for it to end); others wait.
                Ok(d) if m.step == MoveStep::Freeze => Plan::Frozen {
                    table: written,
                    unless: Some(Box::new(Plan::DualWrite(Box::new(d)))),
                },
                Ok(d) => Plan::DualWrite(Box::new(d)),
                Err(why) => refuse(moving_msg(&written, &why)),
            }
        }
    }
}

/// The schema the statement names for its written table.
fn schema_of(stmt: &Statement) -> Option<String> {
    let name = match stmt {
        Statement::Insert(ins) => match &ins.table {
            TableObject::TableName(n) => n,
            _ => return None,
        },
        Statement::Update(u) => match &u.table.relation {
            TableFactor::Table { name, .. } => name,
            _ => return None,
        },
        Statement::Delete(d) => match &d.from {
            sqlparser::ast::FromTable::WithFromKeyword(t)
            | sqlparser::ast::FromTable::WithoutKeyword(t) => {
                match t.first().map(|t| &t.relation) {
                    Some(TableFactor::Table { name, .. }) => name,
                    _ => return None,
                }
            }
        },
        _ => return None,
    };
    crate::sql::schema_name(name)
}

pub(super) fn table_sql(name: &sqlparser::ast::ObjectName) -> String {
    name.0
        .iter()
        .filter_map(|p| p.as_ident())
        .map(|i| quote(&i.value))
        .collect::<Vec<_>>()
        .join(".")
}

/// The dual write of a routed write `t` (its final text: ids generated, columns named).
fn dual_write(
    p: &Planner<'_>,
    t: &Target,
    m: &Moving,
    key: &Arc<[String]>,
) -> Result<DualWrite, String> {
    let parsed = if t.sql == p.sql {
        None
    } else {
        Some(
            sql::parse_in(&t.sql, p.parsed.mode)
                .map_err(|e| format!("the statement does not parse ({e})"))?,
        )
    };
    let parsed = parsed.as_ref().unwrap_or(p.parsed);
    let text = Text::new(&t.sql, parsed.mode)?;
    let bare: Vec<String> = key
        .iter()
        .map(|k| k.trim_matches('`').replace("``", "`").to_ascii_lowercase())
        .collect();
    let (table, rows) = match &parsed.stmt {
        Statement::Insert(ins) => {
            let TableObject::TableName(name) = &ins.table else {
                return Err("an INSERT into a table function".into());
            };
            if ins.returning.is_some() {
                return Err("INSERT ... RETURNING".into());
            }
            let cols: Vec<String> = ins.columns.iter().map(table_name).collect();
            let pos: Vec<Option<usize>> = bare
                .iter()
                .map(|k| cols.iter().position(|c| c == k))
                .collect();
            let rows = match ins.source.as_ref().map(|s| s.body.as_ref()) {
                Some(SetExpr::Values(values)) => {
                    if pos.iter().all(Option::is_some) {
                        let mut keys = Vec::with_capacity(values.rows.len());
                        for row in &values.rows {
                            let mut k = Vec::with_capacity(pos.len());
                            for i in pos.iter().flatten() {
                                let v = row
                                    .content
                                    .get(*i)
                                    .and_then(|e| literal(generated(e), parsed, &t.params))
                                    .filter(|v| *v != Value::NULL)
                                    .ok_or(
                                        "an INSERT whose primary key is an expression or NULL",
                                    )?;
                                k.push(v);
                            }
                            keys.push(k);
                        }
                        Changed::Keys(keys)
                    } else if bare.len() == 1
                        && ins.on.is_none()
                        && !ins.ignore
                        && !ins.replace_into
                    {
                        Changed::Generated
                    } else {
                        return Err("an INSERT that leaves out its primary key, with IGNORE, REPLACE or ON DUPLICATE KEY UPDATE".into());
                    }
                }
                _ => return Err("an INSERT other than INSERT ... VALUES".into()),
            };
            (table_sql(name), rows)
        }
        Statement::Update(u) => {
            if u.returning.is_some() || u.from.is_some() || !u.table.joins.is_empty() {
                return Err("a multi-table UPDATE or UPDATE ... RETURNING".into());
            }
            let TableFactor::Table { name, alias, .. } = &u.table.relation else {
                return Err("an UPDATE of something other than a table".into());
            };
            for a in &u.assignments {
                let names = match &a.target {
                    sqlparser::ast::AssignmentTarget::ColumnName(n) => vec![n],
                    sqlparser::ast::AssignmentTarget::Tuple(ns) => ns.iter().collect(),
                };
                if names.iter().any(|n| bare.contains(&table_name(n))) {
                    return Err("an UPDATE of the primary key".into());
                }
            }
            let select = rows_read(
                &text,
                name,
                alias.as_ref(),
                key,
                u.selection.as_ref(),
                &u.order_by,
                u.limit.as_ref(),
            )?;
            (
                table_sql(name),
                select_params(
                    select,
                    (u.selection.as_ref(), &u.order_by, u.limit.as_ref()),
                    t,
                ),
            )
        }
        Statement::Delete(d) => {
            let from = match &d.from {
                sqlparser::ast::FromTable::WithFromKeyword(f)
                | sqlparser::ast::FromTable::WithoutKeyword(f) => f,
            };
            if d.returning.is_some() || !d.tables.is_empty() || d.using.is_some() || from.len() != 1
            {
                return Err("a multi-table DELETE or DELETE ... RETURNING".into());
            }
            let TableFactor::Table { name, alias, .. } = &from[0].relation else {
                return Err("a DELETE from something other than a table".into());
            };
            let select = rows_read(
                &text,
                name,
                alias.as_ref(),
                key,
                d.selection.as_ref(),
                &d.order_by,
                d.limit.as_ref(),
            )?;
            (
                table_sql(name),
                select_params(
                    select,
                    (d.selection.as_ref(), &d.order_by, d.limit.as_ref()),
                    t,
                ),
            )
        }
        _ => return Err("this statement".into()),
    };
    Ok(DualWrite {
        source: m.from,
        target: m.to,
        sql: t.sql.clone(),
        params: t.params.clone(),
        table,
        key: key.clone(),
        rows,
    })
}

/// A generated id's value: `LAST_INSERT_ID(n)` (the first row of an INSERT whose key the
/// proxy generates) is `n`.
fn generated(e: &Expr) -> &Expr {
    if let Expr::Function(f) = e {
        if f.name.to_string().eq_ignore_ascii_case("LAST_INSERT_ID") {
            if let sqlparser::ast::FunctionArguments::List(l) = &f.args {
                if let [sqlparser::ast::FunctionArg::Unnamed(
                    sqlparser::ast::FunctionArgExpr::Expr(inner),
                )] = l.args.as_slice()
                {
                    return inner;
                }
            }
        }
    }
    e
}

/// `SELECT key FROM t [alias] WHERE ... [ORDER BY ...] [LIMIT n] FOR UPDATE`, the WHERE,
/// ORDER BY and LIMIT as the statement's text has them (its `?` kept).
fn rows_read(
    text: &Text<'_>,
    name: &sqlparser::ast::ObjectName,
    alias: Option<&sqlparser::ast::TableAlias>,
    key: &[String],
    selection: Option<&Expr>,
    order_by: &[sqlparser::ast::OrderByExpr],
    limit: Option<&Expr>,
) -> Result<String, String> {
    let own = |e: &Expr| -> Result<&str, String> {
        text.extent(e)
            .map(|(a, b)| &text.sql[a..b])
            .ok_or_else(|| "a WHERE, ORDER BY or LIMIT whose text shardproxy cannot place".into())
    };
    let q = match alias {
        Some(a) => quote(&a.name.value),
        None => table_sql(name),
    };
    let cols: Vec<String> = key.iter().map(|k| format!("{q}.{k}")).collect();
    let mut s = format!("SELECT {} FROM {}", cols.join(", "), table_sql(name));
    if let Some(a) = alias {
        s.push_str(" AS ");
        s.push_str(&quote(&a.name.value));
    }
    if let Some(w) = selection {
        s.push_str(" WHERE ");
        s.push_str(own(w)?);
    }
    if !order_by.is_empty() {
        let mut o = Vec::with_capacity(order_by.len());
        for x in order_by {
            if x.options.nulls_first.is_some() {
                return Err("ORDER BY ... NULLS FIRST / LAST".into());
            }
            let dir = match x.options.sort {
                Some(sqlparser::ast::OrderBySort::Desc) => " DESC",
                Some(sqlparser::ast::OrderBySort::Asc) => " ASC",
                _ => "",
            };
            o.push(format!("{}{dir}", own(&x.expr)?));
        }
        s.push_str(" ORDER BY ");
        s.push_str(&o.join(", "));
    }
    if let Some(l) = limit {
        s.push_str(" LIMIT ");
        s.push_str(own(l)?);
    }
    s.push_str(" FOR UPDATE");
    Ok(s)
}

/// The locking read with the parameters of the statement's WHERE, ORDER BY and LIMIT: its
/// last ones (the SET's come first).
fn select_params(
    sql: String,
    parts: (Option<&Expr>, &[sqlparser::ast::OrderByExpr], Option<&Expr>),
    t: &Target,
) -> Changed {
    let mut mine = 0;
    let mut count = |e: &Expr| {
        if let Expr::Value(v) = e {
            if matches!(v.value, sqlparser::ast::Value::Placeholder(_)) {
                mine += 1;
            }
        }
        ControlFlow::<()>::Continue(())
    };
    if let Some(w) = parts.0 {
        let _ = sqlparser::ast::visit_expressions(w, &mut count);
    }
    for o in parts.1 {
        let _ = sqlparser::ast::visit_expressions(&o.expr, &mut count);
    }
    if let Some(l) = parts.2 {
        let _ = sqlparser::ast::visit_expressions(l, &mut count);
    }
    let total = t.params.len();
    let params = t.params[total.saturating_sub(mine)..].to_vec();
    Changed::Select { sql, params }
}
