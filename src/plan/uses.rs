//! Which tables a statement reads, and the shard-key values each one's WHERE pins.

use std::ops::ControlFlow;

use mysql_common::value::Value;
use sqlparser::ast::{
    BinaryOperator, Expr, GroupByExpr, InTarget, JoinConstraint, JoinOperator, ObjectName, Query,
    Select, SelectItem, SetExpr, Statement, TableFactor, Visit, Visitor,
};

use super::Planner;
use crate::routing::range::RangeKey;
use crate::sql::keys::where_keys;
use crate::sql::ranges::{where_ranges, Ranges};
use crate::sql::table_name;

/// One reference to a table in a statement.
#[derive(Debug, Clone)]
pub struct Use {
    /// Lower-cased table name.
    pub table: String,
    /// The alias it goes by in the query.
    pub alias: Option<String>,
    /// The key values its WHERE pins (`None`: any row).
    pub keys: Option<Vec<Value>>,
    /// For range and time_tier tables: the values of the routing column its WHERE allows.
    pub ranges: Option<Ranges<RangeKey>>,
    /// For a table with salted keys: the values its WHERE pins the salt column to.
    pub salt: Option<Vec<Value>>,
}

/// Where a table use can be read.
pub enum Placement {
    /// A broadcast table: on every node.
    Anywhere,
    /// Only on these nodes.
    Nodes(Vec<usize>),
}

/// The name and alias of a plain table factor.
pub fn factor_name(f: &TableFactor) -> Option<(String, Option<String>)> {
    match f {
        TableFactor::Table { name, alias, .. } => Some((
            table_name(name),
            alias.as_ref().map(|a| a.name.value.clone()),
        )),
        _ => None,
    }
}

struct Collector<'p, 'a> {
    planner: &'p Planner<'a>,
    /// Uses seen in a SELECT's FROM, with keys from that SELECT's WHERE.
    keyed: Vec<Use>,
    /// Pairs of `keyed` uses whose shard keys a join or WHERE equates (`o.user_id = i.user_id`).
    links: Vec<(usize, usize)>,
    /// Every relation name the statement mentions.
    all: Vec<String>,
    /// The SELECTs being visited, outermost first: the range of `keyed` their FROM holds,
    /// and whether it also holds something else (a derived table: columns not known).
    scopes: Vec<(std::ops::Range<usize>, bool)>,
    /// `o.key IN (SELECT p.key ...)` conjuncts seen: the outer use, and the subquery's
    /// SELECT (compared by address, when the visit reaches it).
    semi: Vec<(usize, *const Select)>,
}

impl Collector<'_, '_> {
    /// The latest use (innermost scope) whose shard key this qualified column names; for an
    /// unqualified column, the use MariaDB resolves it to (the innermost SELECT whose FROM
    /// has a table with that column), when every table in the way has a known column list
    /// and exactly one of them has the column.
    fn key_use(&self, e: &Expr) -> Option<usize> {
        if let Expr::Identifier(id) = e {
            return self.unqualified_use(&id.value);
        }
        if !matches!(e, Expr::CompoundIdentifier(_)) {
            return None;
        }
        self.keyed.iter().enumerate().rev().find_map(|(i, u)| {
            let (k, _) = self.planner.key_column(&u.table, u.alias.as_deref())?;
            k.matches(e).then_some(i)
        })
    }

    fn unqualified_use(&self, column: &str) -> Option<usize> {
        for (range, opaque) in self.scopes.iter().rev() {
            if *opaque {
                return None;
            }
            let mut found = None;
            for i in range.clone() {
                let cols = (self.planner.ctx.columns)(None, &self.keyed[i].table)?;
                if cols.iter().any(|c| c.eq_ignore_ascii_case(column)) {
                    if found.is_some() {
                        return None;
                    }
                    found = Some(i);
                }
            }
            if let Some(i) = found {
                let u = &self.keyed[i];
                let (k, _) = self.planner.key_column(&u.table, u.alias.as_deref())?;
                return k.column.eq_ignore_ascii_case(column).then_some(i);
            }
        }
        None
    }

    fn find_use(&self, table: &str, alias: Option<&str>) -> Option<usize> {
        self.keyed
            .iter()
            .rposition(|u| u.table == table && u.alias.as_deref() == alias)
    }
}

fn join_constraint(op: &JoinOperator) -> Option<&JoinConstraint> {
    use JoinOperator::*;
    match op {
        Join(c) | Inner(c) | Left(c) | LeftOuter(c) | Right(c) | RightOuter(c) | FullOuter(c)
        | Semi(c) | LeftSemi(c) | RightSemi(c) | Anti(c) | LeftAnti(c) | RightAnti(c)
        | StraightJoin(c) => Some(c),
        _ => None,
    }
}

/// The `x IN (SELECT ...)` conjuncts of a WHERE's AND tree (not NOT IN). Each node answers
/// such a conjunct over its own rows: where the subquery selects a key sharded alike with
/// `x`'s, the rows equal to `x` are on `x`'s node, and a row missing elsewhere (a NULL key on
/// another node, which would make a miss NULL instead of false) only matters outside a
/// conjunct of the WHERE, where false and NULL drop the row alike.
fn semi_joins(e: &Expr) -> Vec<(&Expr, &Query)> {
    conjuncts(e)
        .into_iter()
        .filter_map(|c| match c {
            Expr::In {
                expr,
                target: InTarget::Subquery(subquery),
                negated: false,
                ..
            } => Some((expr.as_ref(), subquery.as_ref())),
            _ => None,
        })
        .collect()
}

/// A subquery's SELECT when its rows are its table's own, whatever else each node holds: no
/// grouping (groups of another column span nodes), HAVING, LIMIT or WITH, one select item.
fn plain_select(q: &Query) -> Option<&Select> {
    ungrouped_select(q).filter(|s| s.top.is_none() && s.projection.len() == 1)
}

/// A query that is one SELECT without WITH, LIMIT, GROUP BY or HAVING: each node's rows of
/// it are its own rows' (before what its select list computes).
pub(super) fn ungrouped_select(q: &Query) -> Option<&Select> {
    if q.with.is_some() || q.limit_clause.is_some() || q.fetch.is_some() {
        return None;
    }
    let SetExpr::Select(s) = q.body.as_ref() else {
        return None;
    };
    let grouped =
        !matches!(&s.group_by, GroupByExpr::Expressions(g, m) if g.is_empty() && m.is_empty());
    (!grouped && s.having.is_none()).then_some(s.as_ref())
}

/// The `a = b` conjuncts of an AND tree.
fn equalities<'e>(e: &'e Expr, out: &mut Vec<(&'e Expr, &'e Expr)>) {
    for c in conjuncts(e) {
        if let Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } = c
        {
            out.push((left, right));
        }
    }
}

/// The conjuncts of an AND tree, their parentheses taken off (`((a AND b))` too).
fn conjuncts(e: &Expr) -> Vec<&Expr> {
    let mut out = Vec::new();
    split_and(e, true, &mut out);
    out
}

/// The AND conjuncts of `e` (through parentheses).
pub(super) fn and_parts<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    split_and(e, false, out)
}

/// The AND conjuncts of `e`, in order, through the parentheses around an AND (and around
/// anything, with `any_parens`). A loop, not recursion: a WHERE may nest thousands deep.
fn split_and<'e>(e: &'e Expr, any_parens: bool, out: &mut Vec<&'e Expr>) {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And,
                right,
            } => {
                stack.push(right);
                stack.push(left);
            }
            Expr::Nested(x)
                if any_parens
                    || matches!(
                        x.as_ref(),
                        Expr::BinaryOp {
                            op: BinaryOperator::And,
                            ..
                        }
                    ) =>
            {
                stack.push(x)
            }
            e => out.push(e),
        }
    }
}

impl Visitor for Collector<'_, '_> {
    type Break = ();

    fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<()> {
        let first = self.keyed.len();
        let mut opaque = false;
        for twj in &select.from {
            let factors =
                std::iter::once(&twj.relation).chain(twj.joins.iter().map(|j| &j.relation));
            opaque |= factors.into_iter().any(|f| factor_name(f).is_none());
        }
        for twj in &select.from {
            let factors =
                std::iter::once(&twj.relation).chain(twj.joins.iter().map(|j| &j.relation));
            for f in factors {
                if let Some((table, alias)) = factor_name(f) {
                    let keys =
                        self.planner
                            .key_column(&table, alias.as_deref())
                            .and_then(|(k, _)| {
                                where_keys(
                                    select.selection.as_ref(),
                                    &k,
                                    self.planner.parsed,
                                    self.planner.params,
                                )
                            });
                    // No shard key pinned: a global index may pin the rows' keys.
                    let keys = keys.or_else(|| {
                        self.planner
                            .index_keys(&table, alias.as_deref(), select.selection.as_ref())
                    });
                    let ranges =
                        self.planner
                            .key_column(&table, alias.as_deref())
                            .and_then(|(k, rule)| {
                                let kind = rule.key_kind()?;
                                Some(where_ranges(
                                    select.selection.as_ref(),
                                    &k,
                                    self.planner.parsed,
                                    self.planner.params,
                                    &|v| kind.key_of(v),
                                ))
                            });
                    let salt = self.planner.salt_values(
                        &table,
                        alias.as_deref(),
                        select.selection.as_ref(),
                    );
                    self.keyed.push(Use {
                        table,
                        alias,
                        keys,
                        ranges,
                        salt,
                    });
                }
            }
        }
        self.scopes.push((first..self.keyed.len(), opaque));
        // Equalities between shard keys, in WHERE and in JOIN ... ON / USING.
        let mut eqs: Vec<(&Expr, &Expr)> = Vec::new();
        if let Some(w) = &select.selection {
            equalities(w, &mut eqs);
        }
        for twj in &select.from {
            for j in &twj.joins {
                if let Some(JoinConstraint::On(on)) = join_constraint(&j.join_operator) {
                    equalities(on, &mut eqs);
                }
            }
        }
        for (l, r) in eqs {
            if let (Some(a), Some(b)) = (self.key_use(l), self.key_use(r)) {
                if a != b {
                    self.links.push((a, b));
                }
            }
        }
        // The subquery of an outer `key IN (SELECT key ...)`: its own use of the key.
        let mine = first..self.keyed.len();
        let of_outer: Vec<usize> = self
            .semi
            .iter()
            .filter(|(_, at)| std::ptr::eq(*at, select))
            .map(|(a, _)| *a)
            .collect();
        if let (false, [SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }]) =
            (of_outer.is_empty(), select.projection.as_slice())
        {
            if let Some(b) = self.key_use(e).filter(|b| mine.contains(b)) {
                for a in of_outer {
                    self.links.push((a, b));
                }
            }
        }
        if let Some(w) = &select.selection {
            for (e, q) in semi_joins(w) {
                if let (Some(a), Some(inner)) = (self.key_use(e), plain_select(q)) {
                    self.semi.push((a, inner as *const Select));
                }
            }
        }
        // JOIN ... USING (shard_key): the joined table with the tables before it.
        for twj in &select.from {
            let mut before: Vec<usize> = Vec::new();
            let names = std::iter::once((&twj.relation, None)).chain(
                twj.joins
                    .iter()
                    .map(|j| (&j.relation, join_constraint(&j.join_operator))),
            );
            for (f, constraint) in names {
                let Some((table, alias)) = factor_name(f) else {
                    continue;
                };
                let Some(me) = self.find_use(&table, alias.as_deref()) else {
                    continue;
                };
                if let Some(JoinConstraint::Using(cols)) = constraint {
                    if let Some((k, _)) = self.planner.key_column(&table, alias.as_deref()) {
                        if cols.iter().any(|c| table_name(c) == k.column) {
                            for &b in &before {
                                self.links.push((me, b));
                            }
                        }
                    }
                }
                before.push(me);
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_select(&mut self, _select: &Select) -> ControlFlow<()> {
        self.scopes.pop();
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, relation: &ObjectName) -> ControlFlow<()> {
        self.all.push(table_name(relation));
        ControlFlow::Continue(())
    }
}

/// Every table reference of the statement; those in a SELECT's FROM carry the keys of that
/// SELECT's WHERE, the others (write targets, names outside a FROM) carry none.
pub fn collect_uses(stmt: &Statement, planner: &Planner<'_>) -> Vec<Use> {
    collect_linked(stmt, planner).0
}

/// [`collect_uses`], with the pairs of uses whose shard keys the query equates.
pub fn collect_linked(stmt: &Statement, planner: &Planner<'_>) -> (Vec<Use>, Vec<(usize, usize)>) {
    let mut c = Collector {
        planner,
        keyed: Vec::new(),
        links: Vec::new(),
        all: Vec::new(),
        scopes: Vec::new(),
        semi: Vec::new(),
    };
    let _ = stmt.visit(&mut c);
    let mut uses = c.keyed;
    let mut covered: Vec<String> = uses.iter().map(|u| u.table.clone()).collect();
    for name in c.all {
        if let Some(i) = covered.iter().position(|n| *n == name) {
            covered.swap_remove(i);
        } else {
            uses.push(Use {
                table: name,
                alias: None,
                keys: None,
                ranges: None,
                salt: None,
            });
        }
    }
    (uses, c.links)
}

/// For each of `n` uses, the group it is in when the linked pairs (equal shard keys) join
/// groups: two uses with the same number sit on one node for every row they join.
pub fn groups(n: usize, links: &[(usize, usize)]) -> Vec<usize> {
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    for &(a, b) in links {
        if a < n && b < n {
            let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
            parent[ra] = rb;
        }
    }
    (0..n).map(|i| root(&mut parent, i)).collect()
}

/// The uses other than the first one of `table` (the write target itself).
pub fn without_first(mut uses: Vec<Use>, table: &str) -> Vec<Use> {
    if let Some(i) = uses.iter().position(|u| u.table == table) {
        uses.remove(i);
    }
    uses
}

/// Does the projection compute an aggregate or a window function (outside subqueries)?
pub fn has_aggregate(projection: &[SelectItem]) -> bool {
    projection.iter().any(|item| match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
            super::aggs::contains_agg(e)
        }
        _ => false,
    })
}
