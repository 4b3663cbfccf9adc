//! Statement + rules snapshot -> [`Plan`]: where a statement runs and how its answers combine.
//! Pure: no I/O, unit-tested without a socket.

mod appended;
pub(crate) use appended::needs_merge;
mod aggs;
pub mod bind;
pub mod cache;
pub mod cached;
mod captured;
pub mod catalog;
pub mod decompose;
pub mod estimate;
pub mod gather;
pub mod indexed;
pub mod insert;
pub mod key_page;
pub mod key_update;
mod moved;
pub mod moving;
mod rename;
pub mod replica;
mod salt;
mod select;
pub mod spread;
pub mod template;
pub mod tier;
pub mod tree;
mod uses;
pub mod view_catalog;
pub mod views;
mod words;

pub use words::show_index_table;

use mysql_common::value::Value;
use sqlparser::ast::{
    Delete, Expr, FromTable, ObjectName, ObjectType, Query, SetExpr, Statement, Update,
};

use crate::config::{TableRule, Topology};
use crate::routing::directory::Placed;
use crate::routing::range::{RangeKey, RangeMap};
use crate::routing::slot::Place;
use crate::sql::keys::{where_keys, KeyColumn};
use crate::sql::ranges::Ranges;
use crate::sql::{self, Parsed};
pub use tier::{TierMode, TierPlan};
pub use tree::*;
use uses::{collect_uses, Placement, Use};
use words::*;

/// Plans one statement. `parsed` is the parse of `sql` (or the parser's error).
pub fn plan(
    sql: &str,
    parsed: Result<&Parsed, &str>,
    params: &[Value],
    topo: &Topology,
    ctx: &PlanCtx<'_>,
) -> Plan {
    plan_traced(sql, parsed, params, topo, ctx).0
}

/// A slot a statement was routed to by a key (one of the keys, where several share it):
/// what the load of slots and keys is counted against (`crate::load`).
#[derive(Debug, Clone)]
pub struct Traced {
    pub table: String,
    pub slot: u16,
    pub key: Value,
}

/// [`plan`], with the slots the statement was routed to by key.
pub fn plan_traced(
    sql: &str,
    parsed: Result<&Parsed, &str>,
    params: &[Value],
    topo: &Topology,
    ctx: &PlanCtx<'_>,
) -> (Plan, Vec<Traced>) {
    if let Some(p) = session_statement(sql, topo) {
        return (p, Vec::new());
    }
    let parsed = match parsed {
        Ok(p) => p,
        Err(e) => return (unparsed(sql, e, params, topo), Vec::new()),
    };
    let planner = Planner {
        slots: Default::default(),
        missing: Default::default(),
        values: Default::default(),
        moving: moving::any_moving(topo),
        sql,
        stmt: &parsed.stmt,
        parsed,
        params,
        topo,
        ctx,
        copies: Vec::new(),
        missing_index: Default::default(),
        missing_weights: Default::default(),
        row_keys: Default::default(),
        spreading: false,
    };
    let plan = planner.plan();
    let mut missing = planner.missing.take();
    missing.sort();
    missing.dedup();
    if !missing.is_empty() && !matches!(plan, Plan::Refuse { .. }) {
        return (Plan::NeedLookup(missing), Vec::new());
    }
    if let Some(c) = planner.missing_weights.take().into_iter().next() {
        return (Plan::NeedWeights(c), Vec::new());
    }
    let probes = planner.missing_index.take();
    if !probes.is_empty() && !matches!(plan, Plan::Refuse { .. }) {
        return (Plan::NeedIndex(probes), Vec::new());
    }
    let mut slots = planner.slots.take();
    slots.sort_by(|a, b| (&a.table, a.slot).cmp(&(&b.table, b.slot)));
    slots.dedup_by(|a, b| a.table == b.table && a.slot == b.slot);
    let plan = moving::adjust(&planner, plan);
    // After the moves' adjustment: the client's write under the index writes is the one a
    // move sees (its row images, its capture), or it would land on the source alone.
    let plan = indexed::wrap(&planner, plan);
    (one_node_only(sql, planner.parsed.mode, plan, topo), slots)
}

/// A statement that assigns user variables (`@v := e`, `INTO @v`) runs on one node, whose
/// values the session then reads back; one that calls a named-lock function runs on the
/// default node, which holds every session's named locks (`crate::sql::uservars`).
/// Anywhere else it is refused: each node would assign, or lock, on its own.
fn one_node_only(sql: &str, mode: sql::lex::Mode, plan: Plan, topo: &Topology) -> Plan {
    let locks = sql::uservars::names_a_lock(sql);
    let assigned = sql::uservars::assigned_in(sql, mode);
    if !locks && assigned.is_empty() {
        return plan;
    }
    let one_node = match &plan {
        Plan::Route(t) => !locks || t.node == topo.default_node,
        Plan::AnyCopy { .. } => !locks,
        Plan::Sticky { .. }
        | Plan::Refuse { .. }
        | Plan::Unroutable { .. }
        | Plan::Session(_)
        | Plan::NeedLookup(_)
        | Plan::NeedColumns { .. }
        | Plan::NeedRows { .. }
        | Plan::NeedIds { .. }
        | Plan::NeedKey { .. } => true,
        _ => false,
    };
    if one_node {
        plan
    } else if locks {
        refuse("shardproxy: this statement calls a named-lock function (GET_LOCK, RELEASE_LOCK, ...) where it does not run on the default node, which holds every session's named locks: call it in a statement that reads no sharded table")
    } else {
        refuse(format!(
            "shardproxy: this statement assigns user variables (@{}) but does not run on one node, so each node would assign its own value: use SET @v = (SELECT ...)",
            assigned.join(", @")
        ))
    }
}

struct Planner<'a> {
    /// Slots the statement was routed to by key: (table, slot), for the per-slot metrics.
    slots: std::cell::RefCell<Vec<Traced>>,
    /// Directory keys the lookup cache does not know yet.
    missing: std::cell::RefCell<Vec<(String, Vec<u8>)>>,
    /// The routing values the statement was routed by, for hash_slot and directory tables:
    /// (table, value), for the moves under way (`moving`).
    values: std::cell::RefCell<Vec<(String, Value)>>,
    /// Rows of some table are being moved (the values are traced only then).
    moving: bool,
    ctx: &'a PlanCtx<'a>,
    sql: &'a str,
    /// The statement being planned (the parsed one, or the one inside its EXPLAIN).
    stmt: &'a Statement,
    parsed: &'a Parsed,
    params: &'a [Value],
    topo: &'a Topology,
    /// Tables this plan copies to every node it runs on first: read as broadcast tables.
    copies: Vec<String>,
    /// Global index entries to read before the statement can be planned.
    missing_index: std::cell::RefCell<Vec<indexed::IndexProbe>>,
    /// Collations whose weights a global index needs, not read yet.
    missing_weights: std::cell::RefCell<Vec<String>>,
    /// An INSERT's rows' shard keys as routed, generated ones included (for the entries
    /// of the table's global indexes).
    row_keys: std::cell::RefCell<Option<Vec<Value>>>,
    /// Planning the statement over the nodes a bound join's outer rows are carried to
    /// (`spread`): it is not gathered again.
    spreading: bool,
}

impl<'a> Planner<'a> {
    /// The statement's bound values, for the proxy's literal writer.
    fn bound(&self) -> crate::sql::text::Params<'a> {
        crate::sql::text::Params {
            values: self.params,
            charset: self.ctx.charset,
        }
    }

    fn plan(&self) -> Plan {
        match self.stmt {
            Statement::Query(q) => self.select(q),
            Statement::Insert(ins) => insert::plan_insert(self, ins),
            Statement::Update(u) => self.update(u),
            Statement::Delete(d) => self.delete(d),
            Statement::CreateTable(c) => self.ddl(&[&c.name]),
            Statement::AlterTable(a) => self.ddl(&[&a.name]),
            Statement::CreateIndex(c) => self.ddl(&[&c.table_name]),
            Statement::Truncate(t) => {
                let names: Vec<&ObjectName> = t.table_names.iter().map(|n| &n.name).collect();
                self.ddl(&names)
            }
            Statement::Drop {
                object_type: ObjectType::Table,
                names,
                ..
            } => self.ddl(&names.iter().collect::<Vec<_>>()),
            Statement::Drop {
                object_type: ObjectType::Index,
                table: Some(table),
                ..
            } => self.ddl(&[table]),
            Statement::CreateDatabase { .. }
            | Statement::Drop {
                object_type: ObjectType::Schema | ObjectType::Database,
                ..
            } => self.everywhere(OkMerge::Copies),
            Statement::ShowCreate { obj_name, .. } => self.read_one(&[sql::table_name(obj_name)]),
            Statement::Explain { statement, .. } => {
                let inner = Planner {
                    slots: Default::default(),
                    missing: Default::default(),
                    values: Default::default(),
                    moving: self.moving,
                    sql: self.sql,
                    stmt: statement.as_ref(),
                    parsed: self.parsed,
                    params: self.params,
                    topo: self.topo,
                    ctx: self.ctx,
                    copies: Vec::new(),
                    missing_index: Default::default(),
                    missing_weights: Default::default(),
                    row_keys: Default::default(),
                    spreading: self.spreading,
                }
                .plan();
                match inner {
                    Plan::Route(t) => self.on(t.node),
                    Plan::Sticky { .. } => self.sticky(),
                    Plan::Refuse { .. } => inner,
                    _ => refuse("EXPLAIN of a statement that runs on several nodes: see `shardproxy route` for its plan, and EXPLAIN it on one node"),
                }
            }
            other => self.generic(other),
        }
    }

    fn trace(&self, table: &str, slot: u16, key: &Value) {
        self.slots.borrow_mut().push(Traced {
            table: table.to_string(),
            slot,
            key: key.clone(),
        });
    }

    /// The node reads of key `k` (of value `v`) go to in a range table, its range's load
    /// counted as a slot's, by its number.
    fn range_node(&self, table: &str, map: &RangeMap, k: &RangeKey, v: &Value) -> usize {
        self.trace_value(table, v);
        let i = map.index_of(k).min(map.len() - 1);
        if i < crate::routing::slot::SLOTS {
            self.trace(table, i as u16, v);
        }
        map.nodes[i]
    }

    fn trace_value(&self, table: &str, v: &Value) {
        if self.moving {
            self.values
                .borrow_mut()
                .push((table.to_string(), v.clone()));
        }
    }

    fn target(&self, node: usize) -> Target {
        Target {
            node,
            sql: self.sql.to_string(),
            params: self.params.to_vec(),
        }
    }

    fn on(&self, node: usize) -> Plan {
        Plan::Route(self.target(node))
    }

    fn sticky(&self) -> Plan {
        Plan::Sticky {
            sql: self.sql.to_string(),
            params: self.params.to_vec(),
        }
    }

    fn on_nodes(&self, nodes: &[usize], ok: OkMerge) -> Plan {
        match nodes {
            [one] => self.on(*one),
            many => Plan::Scatter {
                targets: many.iter().map(|n| self.target(*n)).collect(),
                ok,
            },
        }
    }

    fn everywhere(&self, ok: OkMerge) -> Plan {
        self.on_nodes(&self.topo.all_nodes(), ok)
    }

    /// Nodes holding the rows with these shard-key values (NULL matches nothing).
    fn nodes_for_keys(&self, table: &str, rule: &TableRule, keys: Option<&[Value]>) -> Vec<usize> {
        self.nodes_for(table, rule, keys, None, None)
    }

    /// Nodes holding the rows whose routing column has one of `keys` (when known) or lies in
    /// `ranges` (range and time_tier tables); of a salted key, those whose salt column has
    /// one of `by` (when known).
    fn nodes_for(
        &self,
        table: &str,
        rule: &TableRule,
        keys: Option<&[Value]>,
        ranges: Option<&Ranges<RangeKey>>,
        by: Option<&[Value]>,
    ) -> Vec<usize> {
        let mut nodes: Vec<usize> = match (rule, keys) {
            (TableRule::HashSlot { map, .. }, Some(values)) => {
                let mut out = Vec::new();
                for v in values {
                    let Some(place) = map.place(v) else { continue };
                    self.trace_value(table, v);
                    if let Place::One(_, Some(s)) = place {
                        self.trace(table, s, v);
                    }
                    out.extend(place.nodes(by));
                    // Compared with an integer column, `'012'` is 12: its rows are on 12's
                    // (and a move of 12's slot sees the statement).
                    if let Some(a) = crate::value::integer_alias(v) {
                        self.trace_value(table, &a);
                        out.extend(map.place(&a).map(|p| p.nodes(by)).unwrap_or_default());
                    }
                }
                out
            }
            (TableRule::Range { map, .. }, Some(values)) => {
                let mut out = Vec::new();
                for v in values {
                    if matches!(v, Value::NULL) {
                        continue;
                    }
                    match map.kind.key_of(v) {
                        Some(k) => out.push(self.range_node(table, map, &k, v)),
                        // Not comparable in the column's domain: any range may hold it.
                        None => return map.nodes(),
                    }
                }
                out
            }
            (TableRule::Range { map, .. }, None) => match ranges {
                Some(r) => map.nodes_for(r),
                None => map.nodes(),
            },
            (TableRule::Directory(d), Some(values)) => {
                let mut out = Vec::new();
                for v in values {
                    if matches!(v, Value::NULL) {
                        continue;
                    }
                    self.trace_value(table, v);
                    let looked_up = |k: &[u8]| (self.ctx.lookup)(table, k);
                    match d.place(v, &looked_up) {
                        Placed::Node(n) => out.push(n),
                        Placed::Fallback => out.extend(self.nodes_for_keys(
                            table,
                            &d.fallback,
                            Some(std::slice::from_ref(v)),
                        )),
                        Placed::Unknown => {
                            if let Some(k) = crate::value::text_form(v) {
                                self.missing.borrow_mut().push((table.to_string(), k));
                            }
                            out.extend(rule.all_nodes(self.topo));
                        }
                    }
                }
                out
            }
            (TableRule::TimeTier(t), _) => match self.tier_bounds(t) {
                Ok(b) => {
                    let all = Ranges::all();
                    t.layout(&b, ranges.unwrap_or(&all), "")
                        .parts
                        .iter()
                        .map(|p| p.node)
                        .collect()
                }
                Err(_) => rule.all_nodes(self.topo),
            },
            (TableRule::Single { node }, _) => vec![*node],
            (TableRule::Broadcast, _) => self.topo.all_nodes(),
            (_, None) => rule.all_nodes(self.topo),
        };
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// The tier bounds on the planning day.
    fn tier_bounds(
        &self,
        t: &crate::routing::time_tier::TierRule,
    ) -> Result<Vec<Option<chrono::NaiveDate>>, String> {
        t.bounds(self.ctx.today)
    }

    /// The node a row goes to, given its routing-column value (INSERT).
    fn node_of_value(
        &self,
        table: &str,
        rule: &TableRule,
        v: &Value,
        by: Option<&Value>,
    ) -> Result<usize, String> {
        let column = rule.column().unwrap_or_default();
        let constant = || {
            format!(
                "the {} column `{column}` of `{table}` must be a constant, not NULL or an expression",
                rule.kind()
            )
        };
        if matches!(v, Value::NULL) {
            return Err(constant());
        }
        match rule {
            TableRule::HashSlot { map, .. } => {
                let place = map.place(v).ok_or_else(constant)?;
                if let Place::One(_, Some(s)) = place {
                    self.trace(table, s, v);
                }
                self.trace_value(table, v);
                place.row_node(by).ok_or_else(|| {
                    format!(
                        "the key {} of `{table}` is salted: its rows must set the salt column `{}` to a constant, not NULL or an expression",
                        String::from_utf8_lossy(&crate::value::text_form(v).unwrap_or_default()),
                        map.salt().map(|s| s.by.as_str()).unwrap_or_default()
                    )
                })
            }
            TableRule::Range { map, .. } => {
                let k = map.kind.key_of(v).ok_or_else(|| {
                    format!(
                        "`{table}`.`{column}` value {} cannot be placed in its ranges (not a {:?} value)",
                        String::from_utf8_lossy(&crate::value::text_form(v).unwrap_or_default()),
                        map.kind
                    )
                })?;
                Ok(self.range_node(table, map, &k, v))
            }
            TableRule::Directory(d) => {
                self.trace_value(table, v);
                let looked_up = |k: &[u8]| (self.ctx.lookup)(table, k);
                match d.place(v, &looked_up) {
                    Placed::Node(n) => Ok(n),
                    Placed::Fallback => self.node_of_value(table, &d.fallback, v, None),
                    Placed::Unknown => {
                        if let Some(k) = crate::value::text_form(v) {
                            self.missing.borrow_mut().push((table.to_string(), k));
                        }
                        Ok(self.topo.default_node)
                    }
                }
            }
            TableRule::TimeTier(t) => {
                let b = self.tier_bounds(t)?;
                let k = crate::routing::range::KeyKind::Date.key_of(v).ok_or_else(|| {
                    format!(
                        "the tier column `{column}` of `{table}` must be a date or datetime constant"
                    )
                })?;
                Ok(t.tiers[t.tier_of(&b, &k)].node)
            }
            TableRule::Single { node } => Ok(*node),
            TableRule::Broadcast => Ok(self.topo.default_node),
        }
    }

    fn key_column(&self, table: &str, alias: Option<&str>) -> Option<(KeyColumn, &'a TableRule)> {
        let rule = self.topo.table(table)?;
        let column = match rule {
            TableRule::HashSlot { column, .. } | TableRule::Range { column, .. } => column,
            TableRule::Directory(d) => &d.column,
            TableRule::TimeTier(t) => &t.column,
            _ => return None,
        };
        Some((self.qualified(table, alias, column), rule))
    }

    /// A column of `table` as this query may name it.
    fn qualified(&self, table: &str, alias: Option<&str>, column: &str) -> KeyColumn {
        let mut qualifiers = vec![table.to_string()];
        if let Some(a) = alias {
            qualifiers.push(a.to_ascii_lowercase());
        }
        KeyColumn {
            column: column.to_string(),
            qualifiers,
        }
    }

    fn placement(&self, u: &Use) -> Placement {
        if self.copies.contains(&u.table) {
            return Placement::Anywhere;
        }
        match self.topo.table(&u.table) {
            None => Placement::Nodes(vec![self.topo.default_node]),
            Some(TableRule::Broadcast) => Placement::Anywhere,
            Some(rule) => Placement::Nodes(self.nodes_for(
                &u.table,
                rule,
                u.keys.as_deref(),
                u.ranges.as_ref(),
                u.salt.as_deref(),
            )),
        }
    }

    /// Where a statement reading these table uses can run as a whole: `Ok(node)` when every
    /// table it reads is on that one node (or everywhere); `Err` with the tables otherwise.
    fn common_node(&self, uses: &[Use]) -> Result<Option<usize>, String> {
        let mut node: Option<usize> = None;
        for u in uses {
            match self.placement(u) {
                Placement::Anywhere => {}
                Placement::Nodes(ns) => {
                    // An empty set means no row can match: any node of the table answers.
                    let n = match ns.as_slice() {
                        [] => self
                            .topo
                            .table(&u.table)
                            .and_then(|r| r.all_nodes(self.topo).first().copied())
                            .unwrap_or(self.topo.default_node),
                        [one] => *one,
                        _ => return Err(u.table.clone()),
                    };
                    match node {
                        None => node = Some(n),
                        Some(m) if m == n => {}
                        Some(_) => return Err(u.table.clone()),
                    }
                }
            }
        }
        Ok(node)
    }

    fn select(&self, q: &Query) -> Plan {
        if let Some(node) = self.catalog_node(q) {
            return self.on(node);
        }
        let (uses, links) = uses::collect_linked(self.stmt, self);
        if uses.is_empty() {
            return self.sticky();
        }
        match self.common_node(&uses) {
            Ok(Some(n)) => return self.on(n),
            Ok(None) => return self.any_copy(),
            Err(_) => {}
        }
        // Rows from several nodes: one sharded table (with broadcast tables), or tables
        // sharded alike and joined on their shard keys (each node joins its own rows).
        let multi: Vec<usize> = (0..uses.len())
            .filter(|&i| !matches!(self.placement(&uses[i]), Placement::Anywhere))
            .collect();
        if multi.len() != 1 && matches!(q.body.as_ref(), SetExpr::SetOperation { .. }) {
            return self.gather(
                q,
                &uses,
                "UNION / INTERSECT / EXCEPT over tables on several nodes".into(),
            );
        }
        let nodes = match multi.as_slice() {
            [one] => match self.placement(&uses[*one]) {
                Placement::Nodes(ns) => ns,
                Placement::Anywhere => self.topo.all_nodes(),
            },
            _ => match self.colocated(&uses, &links, &multi) {
                Some(ns) => ns,
                None => {
                    let names: Vec<&str> = multi.iter().map(|&i| uses[i].table.as_str()).collect();
                    return self.gather(
                        q,
                        &uses,
                        format!(
                            "this query needs rows of {} from different nodes (not joined on equal shard keys of tables sharded alike)",
                            names.join(", ")
                        ),
                    );
                }
            },
        };
        let first = &uses[multi[0]];
        if nodes.len() == 1 {
            return self.on(nodes[0]);
        }
        let sharded = |t: &str| multi.iter().any(|&i| uses[i].table == t);
        if let Err(reason) = decompose::anchors(q, &sharded) {
            return self.gather(
                q,
                &uses,
                format!(
                    "{reason}: each node would answer over its own rows of `{}` only",
                    first.table
                ),
            );
        }
        if let Some(TableRule::TimeTier(rule)) = self.topo.table(&first.table) {
            if multi.len() != 1 {
                return refuse(format!(
                    "the time_tier table `{}` joined with another table on several nodes; shardproxy cannot run it",
                    first.table
                ));
            }
            return tier::plan_select(self, q, first, rule);
        }
        if needs_merge(q).is_none() {
            return self.on_nodes(&nodes, OkMerge::Sum);
        }
        let mut rewrite = match select::rewrite_text(q, self.sql, self.parsed, self.bound()) {
            Ok(r) => r,
            Err(reason) => {
                return self.gather(
                    q,
                    &uses,
                    format!(
                        "{reason} over `{}` needs a merge that shardproxy does not do (pinning the shard key `{}` to one node avoids the copy)",
                        first.table,
                        self.shard_column(&first.table)
                    ),
                )
            }
        };
        if uses.len() == 1 {
            let page = rewrite.page.take();
            if let Some(p) = self.key_page(q, &first.table, &nodes, &rewrite.merge, page) {
                return p;
            }
        }
        let scatter = Plan::Scatter {
            targets: rewrite.targets(&nodes, self.params),
            ok: OkMerge::Sum,
        };
        rewrite.merge.tree(scatter)
    }

    /// Nodes for a query over several sharded tables, when that is correct: all use the same
    /// slot map and the query equates their shard keys, so matching rows sit on one node.
    fn colocated(
        &self,
        uses: &[Use],
        links: &[(usize, usize)],
        multi: &[usize],
    ) -> Option<Vec<usize>> {
        let Some(TableRule::HashSlot { map, .. }) = self.topo.table(&uses[multi[0]].table) else {
            return None;
        };
        for &i in multi {
            match self.topo.table(&uses[i].table) {
                Some(TableRule::HashSlot { map: m, .. }) if m.joins_alike(map) => {}
                _ => return None,
            }
        }
        let group = uses::groups(uses.len(), links);
        if multi.iter().any(|&i| group[i] != group[multi[0]]) {
            return None;
        }
        let rule = self.topo.table(&uses[multi[0]].table)?;
        let mut nodes: Option<Vec<usize>> = None;
        for &i in multi {
            if let Some(keys) = &uses[i].keys {
                let ns = self.nodes_for_keys(&uses[i].table, rule, Some(keys));
                nodes = Some(match nodes {
                    None => ns,
                    Some(prev) => prev.into_iter().filter(|n| ns.contains(n)).collect(),
                });
            }
        }
        let all = map.nodes();
        Some(match nodes {
            None => all,
            Some(ns) if ns.is_empty() => all.into_iter().take(1).collect(),
            Some(ns) => ns,
        })
    }

    fn shard_column(&self, table: &str) -> String {
        self.topo
            .table(table)
            .and_then(TableRule::column)
            .unwrap_or_default()
            .to_string()
    }

    /// A read of broadcast tables only: any copy answers, the default node's first.
    fn any_copy(&self) -> Plan {
        let mut nodes = self.topo.all_nodes();
        if let Some(i) = nodes.iter().position(|n| *n == self.topo.default_node) {
            nodes[..=i].rotate_right(1);
        }
        Plan::AnyCopy {
            nodes,
            sql: self.sql.to_string(),
            params: self.params.to_vec(),
        }
    }

    /// Where the target table of an UPDATE / DELETE is written, given its WHERE.
    fn write_target(
        &self,
        table: &str,
        alias: Option<&str>,
        selection: Option<&Expr>,
        limited: bool,
        extra: &[Use],
    ) -> Plan {
        // Other tables the statement reads (subqueries, joins) must be readable where the
        // write runs.
        let rule = self.topo.table(table);
        let nodes: Vec<usize> = match rule {
            None => vec![self.topo.default_node],
            Some(TableRule::Broadcast) => self.topo.all_nodes(),
            Some(r @ TableRule::Single { .. }) => self.nodes_for_keys(table, r, None),
            Some(r) => {
                let key = self.key_column(table, alias).map(|(k, _)| k);
                let keys = key
                    .as_ref()
                    .and_then(|k| where_keys(selection, k, self.parsed, self.params))
                    // No shard key pinned: a global index may pin the rows' keys.
                    .or_else(|| self.write_keys(table, alias, selection));
                let ranges = match (r.key_kind(), &key) {
                    (Some(kind), Some(k)) => Some(crate::sql::ranges::where_ranges(
                        selection,
                        k,
                        self.parsed,
                        self.params,
                        &|v| kind.key_of(v),
                    )),
                    _ => None,
                };
                let by = self.salt_values(table, alias, selection);
                let ns = self.nodes_for(table, r, keys.as_deref(), ranges.as_ref(), by.as_deref());
                if ns.is_empty() {
                    // No row can match; run on one node for a correct "0 rows affected".
                    r.all_nodes(self.topo).into_iter().take(1).collect()
                } else {
                    ns
                }
            }
        };
        for u in extra {
            match self.placement(u) {
                Placement::Anywhere => {}
                Placement::Nodes(ns) if ns.len() == 1 && nodes == ns => {}
                Placement::Nodes(_) => {
                    return refuse(format!(
                        "this statement writes `{table}` using `{}`, which is not on the same node; shardproxy cannot run it across nodes",
                        u.table
                    ))
                }
            }
        }
        if let Some(TableRule::TimeTier(t)) = rule {
            if nodes.len() > 1 {
                if limited {
                    return refuse(format!(
                        "ORDER BY / LIMIT in an UPDATE or DELETE of `{table}` over several tiers would apply per tier; limit it to one tier by `{}`",
                        t.column
                    ));
                }
                return tier::plan_write(self, table, t, &nodes);
            }
        }
        if nodes.len() > 1 && limited && !matches!(rule, Some(TableRule::Broadcast)) {
            return refuse(format!(
                "ORDER BY / LIMIT in an UPDATE or DELETE of `{table}` on several nodes would apply per node; pin the shard key to one node"
            ));
        }
        let ok = if matches!(rule, Some(TableRule::Broadcast)) {
            OkMerge::Copies
        } else {
            OkMerge::Sum
        };
        self.on_nodes(&nodes, ok)
    }

    fn update(&self, u: &Update) -> Plan {
        let uses = collect_uses(self.stmt, self);
        if !u.table.joins.is_empty() || u.from.is_some() {
            return self.multi_table_write(&uses, "UPDATE");
        }
        let (table, alias) = match uses::factor_name(&u.table.relation) {
            Some(x) => x,
            None => return refuse("UPDATE of something other than a table"),
        };
        if let Some(column) = self.topo.table(&table).and_then(TableRule::column) {
            // A salted key's row changing its salt column may change its bucket's node.
            let by = self.topo.table(&table).and_then(TableRule::salt_column);
            for a in &u.assignments {
                let targets = match &a.target {
                    sqlparser::ast::AssignmentTarget::ColumnName(n) => vec![n],
                    sqlparser::ast::AssignmentTarget::Tuple(ns) => ns.iter().collect(),
                };
                if targets.iter().any(|n| {
                    let n = sql::table_name(n);
                    n == *column || by == Some(n.as_str())
                }) {
                    return key_update::plan(self, u, &table, alias.as_deref(), column);
                }
            }
        }
        let extra = uses::without_first(uses, &table);
        self.write_target(
            &table,
            alias.as_deref(),
            u.selection.as_ref(),
            u.limit.is_some() || !u.order_by.is_empty(),
            &extra,
        )
    }

    fn delete(&self, d: &Delete) -> Plan {
        let uses = collect_uses(self.stmt, self);
        let from = match &d.from {
            FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
        };
        if !d.tables.is_empty() || d.using.is_some() || from.len() != 1 || !from[0].joins.is_empty()
        {
            return self.multi_table_write(&uses, "DELETE");
        }
        let (table, alias) = match uses::factor_name(&from[0].relation) {
            Some(x) => x,
            None => return refuse("DELETE from something other than a table"),
        };
        let extra = uses::without_first(uses, &table);
        self.write_target(
            &table,
            alias.as_deref(),
            d.selection.as_ref(),
            d.limit.is_some() || !d.order_by.is_empty(),
            &extra,
        )
    }

    /// A write naming several tables runs whole on one node, or not at all.
    fn multi_table_write(&self, uses: &[Use], what: &str) -> Plan {
        if uses
            .iter()
            .any(|u| matches!(self.topo.table(&u.table), Some(TableRule::Broadcast)))
        {
            return refuse(format!(
                "multi-table {what} involving a broadcast table: write each table on its own"
            ));
        }
        match self.common_node(uses) {
            Ok(Some(n)) => self.on(n),
            Ok(None) => self.on(self.topo.default_node),
            Err(t) => refuse(format!(
                "multi-table {what} needs rows of `{t}` from several nodes; pin the shard keys to one node"
            )),
        }
    }

    /// DDL: sharded and broadcast tables change on every node, others on their node.
    fn ddl(&self, names: &[&ObjectName]) -> Plan {
        let mut target: Option<Vec<usize>> = None;
        for name in names {
            let table = sql::table_name(name);
            let nodes = match self.topo.table(&table) {
                None => vec![self.topo.default_node],
                Some(TableRule::Single { node }) => vec![*node],
                // Every node, so a rule change can move rows anywhere the table exists.
                Some(_) => self.topo.all_nodes(),
            };
            match &target {
                None => target = Some(nodes),
                Some(t) if *t == nodes => {}
                Some(_) => {
                    return refuse(
                        "this DDL names tables placed on different nodes: run it once per table",
                    )
                }
            }
        }
        let nodes = target.unwrap_or_else(|| vec![self.topo.default_node]);
        self.on_nodes(&nodes, OkMerge::Copies)
    }

    /// Metadata reads (SHOW CREATE TABLE, DESCRIBE): one node holding the table answers.
    fn read_one(&self, tables: &[String]) -> Plan {
        let node = tables
            .iter()
            .find_map(|t| match self.topo.table(t) {
                None => None,
                Some(TableRule::Single { node }) => Some(*node),
                Some(TableRule::Broadcast) => Some(self.topo.default_node),
                Some(r) => r.all_nodes(self.topo).first().copied(),
            })
            .unwrap_or(self.topo.default_node);
        self.on(node)
    }

    /// Any other statement: SHOW / DESCRIBE read one copy; other statements naming a sharded or
    /// broadcast table are refused; the rest run on their table's node.
    fn generic(&self, stmt: &Statement) -> Plan {
        let mut names: Vec<String> = Vec::new();
        let _ = sqlparser::ast::visit_relations(stmt, |n| {
            names.push(sql::table_name(n));
            std::ops::ControlFlow::<()>::Continue(())
        });
        let is_read = sql::reads_catalog(self.sql);
        if names.is_empty() && is_read {
            names.extend(words::show_index_table(self.sql, sql::lex::Mode::default()).map(|t| t.1));
        }
        if names.is_empty() {
            return self.sticky();
        }
        if is_read {
            return self.read_one(&names);
        }
        let uses: Vec<Use> = names
            .into_iter()
            .map(|table| Use {
                table,
                alias: None,
                keys: None,
                ranges: None,
                salt: None,
            })
            .collect();
        if let Some(u) = uses.iter().find(|u| {
            !matches!(
                self.topo.table(&u.table),
                None | Some(TableRule::Single { .. })
            )
        }) {
            return refuse(format!(
                "this kind of statement on the sharded or broadcast table `{}` is not supported through shardproxy",
                u.table
            ));
        }
        match self.common_node(&uses) {
            Ok(Some(n)) => self.on(n),
            Ok(None) => self.sticky(),
            Err(t) => refuse(format!(
                "this statement names tables on different nodes (`{t}`); shardproxy cannot run it"
            )),
        }
    }
}

#[cfg(test)]
mod indexed_tests;
#[cfg(test)]
mod merge_tests;
#[cfg(test)]
mod moving_tests;
#[cfg(test)]
pub(crate) mod random_tests;
#[cfg(test)]
mod range_move_tests;
#[cfg(test)]
pub(crate) mod rules_tests;
#[cfg(test)]
mod salt_tests;
#[cfg(test)]
mod session_tests;
#[cfg(test)]
mod ship_tests;
#[cfg(test)]
mod split_tests;
#[cfg(test)]
mod template_tests;
#[cfg(test)]
pub(crate) mod tests;
