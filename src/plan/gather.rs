//! A read no node can answer over its own rows (tables placed apart joined on any column,
//! subqueries across nodes, UNION, GROUP_CONCAT, `COUNT(DISTINCT a, b)` over several nodes):
//! the rows of each table not on one chosen node are copied into temporary tables there, and
//! the whole statement runs on that node against the copies. MariaDB itself answers it, with
//! its own semantics for every expression; the proxy only moves rows.
//!
//! Each copied table gets a temporary table with the source's own definition (`SHOW CREATE
//! TABLE`), so types, collations and indexes are the table's. The statement names the copy
//! under the table's own name as alias (`__sp_ship_0 AS t_user`), so qualified columns keep
//! meaning what they meant. A table's copy reads only the rows its single use can match when
//! a conjunct of the use's WHERE (or of its inner or LEFT join's ON) names that table's
//! columns only, with literals: every copied row counts against `max_rows_per_statement`.

use std::ops::ControlFlow;

use mysql_common::value::Value;
use sqlparser::ast::{
    visit_relations, BinaryOperator, Expr, InTarget, JoinConstraint, JoinOperator, ObjectName,
    Query, Select, SetExpr, Statement, TableFactor, Visit, Visitor,
};

use super::bind::Renamed;
use super::estimate::kept;
use super::uses::{and_parts, Placement, Use};

use super::{refuse, Plan, Planner, Target};
use crate::routing::TableRule;
use crate::sql::table_name;
use crate::sql::text::{Params, Text};

/// A statement run on one node after copying tables there.
#[derive(Debug, Clone, PartialEq)]
pub struct Gather {
    /// Where the statement runs.
    pub node: usize,
    /// Tables copied there first.
    pub ships: Vec<Ship>,
    /// The statement, its copied tables renamed to their copies.
    pub sql: String,
    pub params: Vec<Value>,
    /// Why no node could answer over its own rows (for `route`).
    pub why: String,
}

/// One table's rows copied into a temporary table on the gathering node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ship {
    /// The table as the statement names it.
    pub table: String,
    /// The temporary table on the gathering node.
    pub temp: String,
    /// Where its definition is read (`SHOW CREATE TABLE`).
    pub definition: usize,
    /// The nodes holding its rows, each with the SELECT that reads them.
    pub reads: Vec<(usize, String)>,
    /// Where a join's keys choose its rows: read by them instead, when they allow.
    pub bind: Option<super::bind::Bind>,
    /// What binding it was estimated to read (kept where the estimate chose not to bind).
    pub estimate: Option<super::estimate::BindEstimate>,
    /// Why it is not read by its join's values although the join allows it.
    pub unbound: Option<String>,
}

/// What the names of the copies begin with.
pub const TEMP_PREFIX: &str = "__sp_ship_";

/// The temporary table of the `i`-th copied table.
pub fn temp_name(i: usize) -> String {
    format!("{TEMP_PREFIX}{i}")
}

pub use crate::sql::write::quoted;

impl Planner<'_> {
    /// The statement gathered on one node, or refused with `why` when it cannot be.
    pub(super) fn gather(&self, q: &Query, uses: &[Use], why: String) -> Plan {
        let no = |reason: &str| {
            refuse(format!(
                "{why}; shardproxy could copy the rows to one node instead, but not {reason}"
            ))
        };
        if !q.locks.is_empty() || has_into(q) {
            return no("for a locking read or SELECT ... INTO");
        }
        let ctes = cte_names(self.stmt);
        // Every table the statement names, as written (first spelling), with its rule.
        let mut tables: Vec<(String, String)> = Vec::new();
        let mut qualified = false;
        let _ = visit_relations(self.stmt, |name: &ObjectName| {
            let t = table_name(name);
            if ctes.contains(&t) {
                return ControlFlow::<()>::Continue(());
            }
            if name.0.len() > 1 {
                qualified = true;
            }
            if !tables.iter().any(|(l, _)| *l == t) {
                let written = last_part(name).unwrap_or_else(|| t.clone());
                tables.push((t, written));
            }
            ControlFlow::Continue(())
        });
        if qualified {
            return no("with a table named with its database");
        }

        // Where each table's rows are (broadcast tables: everywhere, nothing to copy).
        let mut placed: Vec<(String, String, Vec<usize>)> = Vec::new();
        for (t, written) in &tables {
            let nodes = match self.topo.table(t) {
                Some(TableRule::Broadcast) => continue,
                Some(TableRule::TimeTier(_)) => {
                    return no(&format!("the time_tier table `{t}` (its tiers overlap)"))
                }
                Some(rule) if moving(rule) => {
                    return no(&format!("`{t}` while its rows move between nodes"))
                }
                None => vec![self.topo.default_node],
                Some(rule) => {
                    let mut ns: Vec<usize> = Vec::new();
                    let mut any = false;
                    for u in uses.iter().filter(|u| u.table == *t) {
                        any = true;
                        match self.placement(u) {
                            Placement::Nodes(n) => ns.extend(n),
                            Placement::Anywhere => ns.extend(rule.all_nodes(self.topo)),
                        }
                    }
                    if !any {
                        ns = rule.all_nodes(self.topo);
                    }
                    ns.sort_unstable();
                    ns.dedup();
                    ns
                }
            };
            placed.push((t.clone(), written.clone(), nodes));
        }
        if !self.copies.is_empty() {
            // Already planning with copies on every node: that did not decompose.
            return refuse(why);
        }
        // Column lists first, where the statement names columns without a table: with them
        // the planner knows which table each names (`WHERE l_orderkey = o_orderkey` may join
        // on equal shard keys after all), and which conjuncts a copy can filter by.
        if unqualified_columns(self.stmt) {
            if let Some((t, _)) = tables
                .iter()
                .find(|(t, _)| (self.ctx.columns)(None, t).is_none())
            {
                return Plan::NeedColumns {
                    schema: None,
                    table: t.clone(),
                };
            }
        }
        // Gathered where most of it is, each copy read by its join's keys: one copy on one
        // node, of the rows the join can use. Cheaper than copying a table to every node of
        // another (below) when every copy can be read so.
        let bound = match gathering_node(&placed) {
            Some(node) => {
                let copied: Vec<&(String, String, Vec<usize>)> = placed
                    .iter()
                    .filter(|(_, _, n)| n.as_slice() != [node])
                    .collect();
                let mut ships = match self.ships(&copied) {
                    Ok(s) => s,
                    Err(wait) => return *wait,
                };
                for (s, (t, written, nodes)) in ships.iter_mut().zip(copied.iter().map(|c| &**c)) {
                    s.bind = self.bind(q, t, written, node, &placed);
                    let Some(b) = &s.bind else { continue };
                    s.estimate = match self.bind_estimate(q, b, t, nodes.len()) {
                        Ok(e) => e,
                        Err(wait) => return *wait,
                    };
                    // Past its values, estimated or seen lately: the run would read them
                    // only to copy the table whole.
                    s.unbound = if (self.ctx.overflowed)(&b.keys) {
                        Some(format!(
                            "its values' read returned more than {} at a recent execution",
                            super::bind::MAX_VALUES
                        ))
                    } else {
                        s.estimate.filter(|e| e.past_values()).map(|e| {
                            format!(
                                "{} value(s) estimated, over {}",
                                e.keys,
                                super::bind::MAX_VALUES
                            )
                        })
                    };
                    if s.unbound.is_some() {
                        s.bind = None;
                    }
                }
                Some((node, ships))
            }
            None => None,
        };
        let all_bound = bound
            .as_ref()
            .is_some_and(|(_, s)| !s.is_empty() && s.iter().all(|s| s.bind.is_some()));
        if !all_bound {
            match self.ship_to_anchor(q, &placed, &ctes, &why) {
                Ok(Some(plan)) => return plan,
                Ok(None) => {}
                Err(wait) => return *wait,
            }
        }
        let Some((node, ships)) = bound else {
            return no("without a table to gather");
        };
        let renames = renames(&ships);
        let Some(sql) = renamed(self.sql, self.stmt, &renames, &ctes, self.parsed.mode) else {
            return no("where the table names cannot be located in the statement's text");
        };
        let mode = self.parsed.mode;
        let Some(sql) = Renamed::check(sql, mode, self.parsed.param_count()) else {
            return no("where renaming its tables changed the statement");
        };
        let mut ships = ships;
        for s in &mut ships {
            let bare = self.bare(&s.table.to_ascii_lowercase());
            if let Some(b) = s.bind.as_mut().filter(|_| bare) {
                b.at = sql.named_at(&s.temp);
            }
        }
        let sql = sql.sql;
        let g = Gather {
            node,
            ships,
            sql,
            params: self.params.to_vec(),
            why,
        };
        match self.spread(q, &g, &placed) {
            Some(s) => Plan::Spread(Box::new(s)),
            None => Plan::Gather(Box::new(g)),
        }
    }

    /// The copies of these tables (`(table, as written, nodes holding its rows)`), each read
    /// with the filter its use allows; `Err`: the plan that must come first (a column list).
    fn ships(&self, copied: &[&(String, String, Vec<usize>)]) -> Result<Vec<Ship>, Box<Plan>> {
        let mut ships = Vec::new();
        // The filters are the client's own text of its conjuncts; a text that cannot be read
        // gives none (each copy then holds every row).
        let text = crate::sql::text::Text::new(self.sql, self.parsed.mode).ok();
        for (t, written, nodes) in copied.iter().map(|c| (&c.0, &c.1, &c.2)) {
            let columns = (self.ctx.columns)(None, t);
            let filter = match pushdown(
                self.stmt,
                t,
                columns.as_deref(),
                text.as_ref(),
                self.bound(),
            ) {
                Pushdown::Filter(alias, cond) => Some((alias, cond)),
                Pushdown::None => None,
                Pushdown::NeedColumns => {
                    return Err(Box::new(Plan::NeedColumns {
                        schema: None,
                        table: t.clone(),
                    }))
                }
            };
            let select = match &filter {
                Some((alias, cond)) => format!(
                    "SELECT {} FROM {} AS {} WHERE {cond}",
                    quoted(alias).to_string() + ".*",
                    quoted(written),
                    quoted(alias)
                ),
                None => format!("SELECT * FROM {}", quoted(written)),
            };
            let definition = nodes
                .first()
                .copied()
                .or_else(|| {
                    self.topo
                        .table(t)
                        .and_then(|r| r.all_nodes(self.topo).first().copied())
                })
                .unwrap_or(self.topo.default_node);
            ships.push(Ship {
                table: written.clone(),
                temp: temp_name(ships.len()),
                definition,
                reads: nodes.iter().map(|&n| (n, select.clone())).collect(),
                bind: None,
                estimate: None,
                unbound: None,
            });
        }
        Ok(ships)
    }

    /// The cheaper way when it is right: keep the largest group of tables the query joins on
    /// equal shard keys (sharded alike) where it is, copy every other table, when each sits on
    /// one node (a lookup table), to each of its nodes, and run the statement there as if
    /// those were broadcast tables (scattered and merged, or routed). The sharded rows never
    /// move. `Ok(None)`: no such plan; the statement is gathered on one node.
    fn ship_to_anchor(
        &self,
        q: &Query,
        placed: &[(String, String, Vec<usize>)],
        ctes: &[String],
        why: &str,
    ) -> Result<Option<Plan>, Box<Plan>> {
        let (uses, links) = super::uses::collect_linked(self.stmt, self);
        let group = super::uses::groups(uses.len(), &links);
        // Candidates: hash_slot tables in the outermost FROM; the best keeps the most uses.
        let mut best: Option<(usize, Vec<String>, Option<Estimate>)> = None;
        for (t, alias) in super::decompose::top_tables(q) {
            if !matches!(self.topo.table(&t), Some(TableRule::HashSlot { .. })) {
                continue;
            }
            let Some(i) = uses.iter().position(|u| u.table == t && u.alias == alias) else {
                continue;
            };
            let kept: Vec<usize> = (0..uses.len()).filter(|&j| group[j] == group[i]).collect();
            let mut copies: Vec<String> = Vec::new();
            let mut split = false;
            for (name, _, _) in placed {
                let inside = kept.iter().any(|&j| uses[j].table == *name);
                let outside = (0..uses.len()).any(|j| uses[j].table == *name && !kept.contains(&j));
                if inside && outside {
                    split = true;
                }
                if !inside {
                    copies.push(name.clone());
                }
            }
            if split || copies.is_empty() {
                continue;
            }
            // A table on one node (a lookup table) is copied to every node of the anchor
            // whatever its size. A sharded one (even where the statement pins it to one
            // node: one tenant's rows may be many) only when the nodes' statistics say its
            // copies hold fewer rows than gathering everything on one node would move.
            let sharded_copy = placed.iter().any(|(name, _, nodes)| {
                copies.contains(name)
                    && (nodes.len() > 1
                        || self.topo.table(name).is_some_and(|r| {
                            matches!(r, TableRule::HashSlot { .. } | TableRule::Range { .. })
                        }))
            });
            let mut estimate = None;
            if sharded_copy {
                let targets = placed
                    .iter()
                    .find(|(name, _, _)| *name == t)
                    .map_or(1, |(_, _, n)| n.len());
                let Some(e) = self.weigh(q, placed, &copies, targets)? else {
                    continue;
                };
                if e.ship >= e.gather {
                    continue;
                }
                estimate = Some(e);
            }
            if best.as_ref().is_none_or(|(n, _, _)| kept.len() > *n) {
                best = Some((kept.len(), copies, estimate));
            }
        }
        let Some((_, copies, estimate)) = best else {
            return Ok(None);
        };
        let sub = self.again(self.topo, copies.clone(), self.spreading);
        let plan = sub.select(q);
        if !sub.missing.borrow().is_empty() || !sub.missing_index.borrow().is_empty() {
            return Ok(None);
        }
        if !matches!(plan.source(), Plan::Route(_) | Plan::Scatter { .. }) {
            return Ok(None);
        }
        let copied: Vec<&(String, String, Vec<usize>)> = placed
            .iter()
            .filter(|(t, _, _)| copies.contains(t))
            .collect();
        let ships = self.ships(&copied)?;
        let renames = renames(&ships);
        let rename = |t: &mut Target| -> Option<()> {
            let parsed = crate::sql::parse_in(&t.sql, self.parsed.mode).ok()?;
            let sql = renamed(&t.sql, &parsed.stmt, &renames, ctes, self.parsed.mode)?;
            let again = crate::sql::parse_in(&sql, self.parsed.mode).ok()?;
            (again.param_count() == parsed.param_count()).then_some(())?;
            t.sql = sql;
            Some(())
        };
        let mut plan = plan;
        let ok = match plan.source_mut() {
            Plan::Route(t) => rename(t).is_some(),
            Plan::Scatter { targets, .. } => targets.iter_mut().all(|t| rename(t).is_some()),
            _ => unreachable!("checked above: a route or a scatter"),
        };
        let Some(sql) = renamed(self.sql, self.stmt, &renames, ctes, self.parsed.mode) else {
            return Ok(None);
        };
        if !ok {
            return Ok(None);
        }
        self.slots.borrow_mut().extend(sub.slots.take());
        Ok(Some(Plan::Shipped(Box::new(Shipped {
            ships,
            then: plan,
            sql,
            why: why.to_string(),
            estimate,
        }))))
    }

    /// The rows copying `copies` to each of `targets` nodes would move, against gathering
    /// every placed table on one node, by the tables' estimated rows (each table's share on
    /// the nodes it is read from); `Err(NeedRows)` while an estimate is not known, `None`
    /// where none can be read (offline).
    fn weigh(
        &self,
        q: &Query,
        placed: &[(String, String, Vec<usize>)],
        copies: &[String],
        targets: usize,
    ) -> Result<Option<Estimate>, Box<Plan>> {
        let gathering = gathering_node(placed);
        let mut e = Estimate::default();
        for (t, _, nodes) in placed {
            let Some(stats) = self.stats(t)? else {
                return Ok(None);
            };
            let on_one = self.per_node(t, &stats);
            // Rows on the nodes this statement reads it from, its own conjuncts in the
            // outermost SELECT weighed (as its copy's read filters them).
            let conds = match q.body.as_ref() {
                SetExpr::Select(s) => {
                    match own_conjuncts(s, t, (self.ctx.columns)(None, t).as_deref()) {
                        Some(Some((_, c))) => c,
                        _ => Vec::new(),
                    }
                }
                _ => Vec::new(),
            };
            let read = kept(
                &stats,
                on_one.saturating_mul(nodes.len() as u64),
                on_one,
                &conds,
            )
            .rows;
            let per_node = read / (nodes.len().max(1) as u64);
            if copies.contains(t) {
                e.ship = e.ship.saturating_add(read.saturating_mul(targets as u64));
            }
            let stays = gathering.is_some_and(|g| nodes.contains(&g));
            e.gather = e
                .gather
                .saturating_add(read - if stays { per_node } else { 0 });
        }
        Ok(Some(e))
    }
}

/// Rows a read across placements would copy one way and the other, by the nodes'
/// statistics: shown by `route` and PREVIEW.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Estimate {
    /// Copying the tables to every node of the anchor.
    pub ship: u64,
    /// Gathering every table on one node.
    pub gather: u64,
}

/// Tables copied to every node a plan runs on, then the plan, whose statements read the
/// copies as broadcast tables.
#[derive(Debug, Clone, PartialEq)]
pub struct Shipped {
    pub ships: Vec<Ship>,
    /// A route or a scatter: the copies go to each of its nodes.
    pub then: Plan,
    /// The client's statement reading the copies (prepared against empty copies for a
    /// COM_STMT_PREPARE's metadata).
    pub sql: String,
    /// Why no node could answer over its own rows as the tables are placed.
    pub why: String,
    /// Where a sharded table is copied: the rows that weighed for it.
    pub estimate: Option<Estimate>,
}

impl Shipped {
    /// Where the copies go: the nodes `then` runs on.
    pub fn nodes(&self) -> Vec<usize> {
        self.then.nodes()
    }
}

/// `(table, its copy)` for each copied table, to rename the statement's references.
fn renames(ships: &[Ship]) -> Vec<(String, String)> {
    ships
        .iter()
        .map(|s| (s.table.to_ascii_lowercase(), s.temp.clone()))
        .collect()
}

/// Does the statement name a column without its table?
fn unqualified_columns(stmt: &Statement) -> bool {
    sqlparser::ast::visit_expressions(stmt, |e: &Expr| {
        if matches!(e, Expr::Identifier(_)) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .is_break()
}

/// Does a rule's table have rows being moved (copies on two nodes)?
fn moving(rule: &TableRule) -> bool {
    match rule {
        TableRule::HashSlot { map, .. } => map.is_moving(),
        TableRule::Directory(d) => !d.moves.is_empty() || moving(&d.fallback),
        _ => false,
    }
}

/// The node that holds the most tables whole (then: a part of the most), the lowest first.
fn gathering_node(placed: &[(String, String, Vec<usize>)]) -> Option<usize> {
    let mut candidates: Vec<usize> = placed.iter().flat_map(|(_, _, n)| n.clone()).collect();
    candidates.sort_unstable();
    candidates.dedup();
    candidates.into_iter().max_by_key(|&n| {
        let whole = placed
            .iter()
            .filter(|(_, _, ns)| ns.as_slice() == [n])
            .count();
        let part = placed.iter().filter(|(_, _, ns)| ns.contains(&n)).count();
        (whole, part, std::cmp::Reverse(n))
    })
}

fn has_into(q: &Query) -> bool {
    match q.body.as_ref() {
        SetExpr::Select(s) => s.into.is_some(),
        _ => false,
    }
}

/// The statement's text with each reference to a copied table renamed to its copy
/// (`super::rename::renamed`).
pub(super) fn renamed(
    sql: &str,
    stmt: &Statement,
    renames: &[(String, String)],
    ctes: &[String],
    mode: crate::sql::lex::Mode,
) -> Option<String> {
    let copy = |name: &ObjectName| {
        let t = table_name(name);
        renames
            .iter()
            .find(|(l, _)| *l == t)
            .map(|(_, temp)| quoted(temp))
    };
    super::rename::renamed(sql, stmt, &copy, ctes, mode)
}

/// The names WITH clauses give (lower-cased): relations by those names are not tables.
pub fn cte_names(stmt: &Statement) -> Vec<String> {
    struct Ctes(Vec<String>);
    impl Visitor for Ctes {
        type Break = ();
        fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
            if let Some(w) = &q.with {
                for c in &w.cte_tables {
                    self.0.push(c.alias.name.value.to_ascii_lowercase());
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut c = Ctes(Vec::new());
    let _ = stmt.visit(&mut c);
    c.0
}

/// The filter for the copy of `table` when the statement uses it once, in a place where rows
/// failing a conjunct of its WHERE (or its join's ON) cannot matter: `(alias, conjuncts)`.
pub(super) enum Pushdown {
    None,
    /// `(alias, conjuncts)`
    Filter(String, String),
    /// The table is alone in its FROM: which of its WHERE's unqualified columns are its own
    /// (not an outer query's) takes its column list.
    NeedColumns,
}

/// The name a FROM item's columns are qualified with: its alias, else its table's name as
/// written (its last part).
pub(super) fn qualifier_of(
    name: &ObjectName,
    alias: Option<&sqlparser::ast::TableAlias>,
) -> Option<String> {
    alias
        .map(|a| a.name.value.clone())
        .or_else(|| last_part(name))
}

/// The last part of a name, as written.
pub(super) fn last_part(name: &ObjectName) -> Option<String> {
    name.0
        .last()
        .and_then(|p| p.as_ident())
        .map(|i| i.value.clone())
}

/// How many times the statement names `table`.
pub(super) fn references(stmt: &Statement, table: &str) -> usize {
    let mut count = 0;
    let _ = visit_relations(stmt, |n: &ObjectName| {
        if table_name(n) == table {
            count += 1;
        }
        ControlFlow::<()>::Continue(())
    });
    count
}

pub(super) fn pushdown(
    stmt: &Statement,
    table: &str,
    columns: Option<&[String]>,
    text: Option<&Text<'_>>,
    params: Params<'_>,
) -> Pushdown {
    let Some(text) = text else {
        return Pushdown::None;
    };
    if references(stmt, table) != 1 {
        return Pushdown::None;
    }
    struct Find<'t, 's> {
        table: &'t str,
        columns: Option<&'t [String]>,
        text: &'t Text<'s>,
        params: Params<'t>,
        found: Option<Option<(String, Vec<String>)>>,
    }
    impl Visitor for Find<'_, '_> {
        type Break = ();
        fn pre_visit_select(&mut self, s: &Select) -> ControlFlow<()> {
            if let Some(f) = select_filter(s, self.table, self.columns, self.text, self.params) {
                self.found = Some(f);
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    let mut find = Find {
        table,
        columns,
        text,
        params,
        found: None,
    };
    let _ = stmt.visit(&mut find);
    match find.found {
        Some(Some((alias, conds))) if !conds.is_empty() => {
            Pushdown::Filter(alias, conds.join(" AND "))
        }
        Some(None) => Pushdown::NeedColumns,
        _ => Pushdown::None,
    }
}

/// The use of `table` in this SELECT's FROM (not inside a nested join), its qualifier, and
/// the conjuncts that filter its rows alone, each as the client wrote it, its `?` written as
/// their values (a conjunct whose text cannot be placed is left out).
/// `Some(None)`: it is alone in its FROM and its columns are not known.
pub(super) fn select_filter(
    s: &Select,
    table: &str,
    columns: Option<&[String]>,
    text: &Text<'_>,
    params: Params<'_>,
) -> Option<Option<(String, Vec<String>)>> {
    Some(own_conjuncts(s, table, columns)?.map(|(qualifier, conds)| {
        let conds = conds
            .into_iter()
            .filter_map(|e| {
                let (a, b) = text.extent(e)?;
                text.render(a, b, params).ok().map(|c| format!("({c})"))
            })
            .collect();
        (qualifier, conds)
    }))
}

/// [`select_filter`]'s conjuncts, as expressions.
pub(super) fn own_conjuncts<'s>(
    s: &'s Select,
    table: &str,
    columns: Option<&[String]>,
) -> Option<Option<(String, Vec<&'s Expr>)>> {
    for twj in &s.from {
        let factors = std::iter::once((&twj.relation, None)).chain(
            twj.joins
                .iter()
                .map(|j| (&j.relation, Some(&j.join_operator))),
        );
        let mut nullable_later = false;
        for (k, (f, op)) in factors.enumerate() {
            let TableFactor::Table { name, alias, .. } = f else {
                continue;
            };
            if table_name(name) != table {
                continue;
            }
            let qualifier = qualifier_of(name, alias.as_ref())?;
            // NULL-extended by a later RIGHT JOIN, or by an outer join it is the right of.
            for j in twj.joins.iter().skip(k) {
                if matches!(
                    j.join_operator,
                    JoinOperator::Right(_)
                        | JoinOperator::RightOuter(_)
                        | JoinOperator::FullOuter(_)
                ) {
                    nullable_later = true;
                }
            }
            // An unqualified column the table has is the table's own (an outer query's
            // only where no table of this FROM has it: `WHERE l_orderkey = o_orderkey`;
            // another table of this FROM with it too makes the statement ambiguous, refused
            // by the node). Alone in its FROM, its columns are read first.
            let only = s.from.len() == 1 && twj.joins.is_empty() && s.selection.is_some();
            if only && columns.is_none() {
                return Some(None);
            }
            let own: &[String] = columns.unwrap_or_default();
            let mut conds = Vec::new();
            let own_on = |op: Option<&'s JoinOperator>| -> Option<&'s Expr> {
                use JoinOperator::*;
                match op? {
                    Join(JoinConstraint::On(e))
                    | Inner(JoinConstraint::On(e))
                    | Left(JoinConstraint::On(e))
                    | LeftOuter(JoinConstraint::On(e))
                    | StraightJoin(JoinConstraint::On(e)) => Some(e),
                    _ => None,
                }
            };
            let outer_right = matches!(
                op,
                Some(
                    JoinOperator::Left(_)
                        | JoinOperator::LeftOuter(_)
                        | JoinOperator::Right(_)
                        | JoinOperator::RightOuter(_)
                        | JoinOperator::FullOuter(_)
                )
            );
            if !nullable_later && !outer_right {
                if let Some(w) = &s.selection {
                    conjuncts_of(w, &qualifier, own, &mut conds);
                }
            }
            if !matches!(
                op,
                Some(
                    JoinOperator::Right(_)
                        | JoinOperator::RightOuter(_)
                        | JoinOperator::FullOuter(_)
                )
            ) {
                if let Some(on) = own_on(op) {
                    conjuncts_of(on, &qualifier, &[], &mut conds);
                }
            }
            return Some(Some((qualifier, conds)));
        }
    }
    None
}

/// The AND conjuncts of `e` that read only columns qualified by `qualifier` (or its `own`
/// unqualified ones), with literals and bound values.
fn conjuncts_of<'s>(e: &'s Expr, qualifier: &str, own: &[String], out: &mut Vec<&'s Expr>) {
    let mut parts = Vec::new();
    and_parts(e, &mut parts);
    out.extend(
        parts
            .into_iter()
            .filter(|e| alone(e, &Scope { qualifier, own }) && names_a_column(e)),
    );
}

fn names_a_column(e: &Expr) -> bool {
    let mut found = false;
    let _ = sqlparser::ast::visit_expressions(e, |x: &Expr| {
        if matches!(x, Expr::CompoundIdentifier(_) | Expr::Identifier(_)) {
            found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::<()>::Continue(())
    });
    found
}

/// An expression of the table's columns, literals and plain operators only (no
/// function, subquery, variable or placeholder: the same value on every node).
struct Scope<'q> {
    qualifier: &'q str,
    /// Its columns, when the table is alone in its FROM (unqualified names of these are
    /// its own); else none.
    own: &'q [String],
}

fn alone(e: &Expr, q: &Scope<'_>) -> bool {
    match e {
        Expr::CompoundIdentifier(parts) => {
            parts.len() == 2 && parts[0].value.eq_ignore_ascii_case(q.qualifier)
        }
        Expr::Identifier(i) => q.own.iter().any(|c| c.eq_ignore_ascii_case(&i.value)),
        // A bound value is written as its literal ([`conjuncts_of`]).
        Expr::Value(_) => true,
        Expr::TypedString(_) => true,
        Expr::Nested(x)
        | Expr::IsNull(x)
        | Expr::IsNotNull(x)
        | Expr::IsTrue(x)
        | Expr::IsFalse(x) => alone(x, q),
        Expr::UnaryOp { expr, .. } => alone(expr, q),
        Expr::BinaryOp { left, op, right } => {
            !matches!(op, BinaryOperator::Custom(_)) && alone(left, q) && alone(right, q)
        }
        Expr::Between {
            expr, low, high, ..
        } => alone(expr, q) && alone(low, q) && alone(high, q),
        Expr::In {
            expr,
            target: InTarget::List(list),
            ..
        } => alone(expr, q) && list.iter().all(|x| alone(x, q)),
        Expr::Like {
            expr,
            pattern,
            escape_char: None,
            ..
        } => alone(expr, q) && alone(pattern, q),
        Expr::Interval(i) => alone(&i.value, q),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::ast::SelectItem;

    #[test]
    fn unaliased_items_are_named_by_their_text() {
        let name = |sql: &str, i: usize| {
            let p = crate::sql::parse(sql).expect("parses");
            let Statement::Query(q) = &p.stmt else {
                panic!()
            };
            let SetExpr::Select(s) = q.body.as_ref() else {
                panic!()
            };
            let SelectItem::UnnamedExpr(e) = &s.projection[i] else {
                panic!()
            };
            crate::sql::item_name(sql, e, Default::default())
        };
        assert_eq!(name("SELECT COUNT(*), a FROM t", 0), None);
        assert_eq!(
            name("SELECT a, count(distinct a,b)  FROM t", 1).as_deref(),
            Some("count(distinct a,b)")
        );
        assert_eq!(
            name("SELECT sum( a ) , 'x,)' FROM t", 0).as_deref(),
            Some("sum( a )")
        );
        assert_eq!(
            name("select ( (select max(a) from t) )", 0).as_deref(),
            Some("( (select max(a) from t) )")
        );
        assert_eq!(name("SELECT 1, a FROM t", 0), None);
        // An EXISTS's span starts at its subquery.
        assert_eq!(
            name(
                "SELECT a, EXISTS (SELECT 1 FROM t), not  exists(select 2) FROM u",
                1
            )
            .as_deref(),
            None,
            "named as sqlparser prints it: no alias needed"
        );
        assert_eq!(
            name(
                "SELECT a, exists (SELECT 1 FROM t), not  exists(select 2) FROM u",
                1
            )
            .as_deref(),
            Some("exists (SELECT 1 FROM t)")
        );
        assert_eq!(
            name(
                "SELECT a, EXISTS (SELECT 1 FROM t), not  exists(select 2) FROM u",
                2
            )
            .as_deref(),
            Some("not  exists(select 2)")
        );
    }
}
