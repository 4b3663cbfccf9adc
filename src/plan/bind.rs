//! A copied table read by a join's keys: when a gathered statement joins a hash_slot table
//! `p` to a table `o` whose rows stay on the gathering node by `p.key = o.col`, the copy of
//! `p` needs only the rows whose key is among the values `o` holds. Those values are read
//! first on the gathering node (`SELECT DISTINCT o.col FROM o WHERE <o's own filter>`), and
//! `p` is read from the nodes its slots name by `p.key IN (...)`, a batch per node; the
//! statement then runs on the gathering node as before, against a copy of the rows it can
//! join (`crate::exec::gather`). Vitess binds the outer rows' keys into the inner route the
//! same way; here MariaDB still evaluates the join and every expression, the proxy only
//! chooses which rows it copies.
//!
//! Only where no row of `p` the filter leaves out could reach the result: the equality is a
//! conjunct of the WHERE, of an inner join's ON, or of the ON of the LEFT JOIN `p` is the
//! right side of (a row of `p` with no equal `o.col` is dropped or NULL-extended), with both
//! sides written as qualified columns. A value that is not an integer (whose equality a
//! collation or a conversion could decide otherwise than the slot of its text), or more
//! values than [`MAX_VALUES`], and the copy reads `p` as before.

use std::ops::ControlFlow;

use sqlparser::ast::{
    BinaryOperator, Expr, InTarget, JoinConstraint, JoinOperator, Query, Select, SelectItem,
    SetExpr, Statement, TableFactor, Visit, Visitor,
};

use std::sync::Arc;

use super::gather::{last_part, qualifier_of, quoted, select_filter, Pushdown};
use super::uses::and_parts;
use super::Planner;
use crate::config::indexes::GlobalIndex;
use crate::routing::slot::SlotMap;
use crate::routing::weights::Weights;
use crate::routing::TableRule;
use crate::sql::table_name;
use crate::sql::text::Text;

/// Values of the outer side above which the copy reads the table as before.
pub const MAX_VALUES: usize = 10_000;
/// Values in one read's IN list.
pub const PER_READ: usize = 1_000;
/// Rows of a bound copy that may travel inside the statement (`crate::exec::inline`).
pub const INLINE_ROWS: usize = 5_000;

/// How a copied table's rows are chosen by the values of a join key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// The gathering node, where the outer table's rows are, and the query that reads the
    /// distinct values of its join column there (at most one past [`MAX_VALUES`]).
    pub node: usize,
    pub keys: String,
    /// The copied table's read up to its key's IN list (`... AND p.key IN (`).
    pub head: String,
    /// Where the copied table's slots are read.
    pub map: SlotMap,
    /// The join, for `route` and PREVIEW: `p.product_id = o.product_id`.
    pub on: String,
    /// The copied table's shard key column (its type, read at run time, decides the routing).
    pub key: String,
    /// Where the gathered statement names the copy (`` `__sp_ship_0` ``), when its one
    /// reference is a bare table name (no index hint or partition): a copy of few rows can
    /// then travel inside the statement instead (`crate::exec::inline`).
    pub at: Option<(usize, usize)>,
    /// The join binds a column of the copied table that a global index in use maps to its
    /// shard keys: the copy is read only on the nodes of the keys the outer values' entries
    /// name.
    pub by_index: Option<ByIndex>,
    /// The outer table's side of the join.
    pub outer: Outer,
}

/// The outer side of a bound join: the table whose values choose the copy's rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outer {
    /// The table, lower-cased, and as the statement writes it.
    pub table: String,
    pub written: String,
    /// Its qualifier in the statement (its alias, or its name).
    pub qualifier: String,
    /// Its column the join binds, as the statement names it.
    pub column: String,
    /// Its own conjuncts, bound values written in: ` WHERE ...`, or empty.
    pub filter: String,
}

/// A copy bound through a global index of the copied table (see [`Bind::by_index`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByIndex {
    pub index: GlobalIndex,
    /// Where the index table's entries are.
    pub map: SlotMap,
    /// The weights of the column's collation, for a string compared by one.
    pub weights: Option<Arc<Weights>>,
}

/// A conjunct `a.x = b.y`, as (qualifier, column) pairs.
fn equality(e: &Expr) -> Option<((String, String), (String, String))> {
    let Expr::BinaryOp {
        left,
        op: BinaryOperator::Eq,
        right,
    } = e
    else {
        return None;
    };
    let col = |e: &Expr| match e {
        Expr::CompoundIdentifier(p) if p.len() == 2 => {
            Some((p[0].value.clone(), p[1].value.clone()))
        }
        Expr::Nested(x) => match x.as_ref() {
            Expr::CompoundIdentifier(p) if p.len() == 2 => {
                Some((p[0].value.clone(), p[1].value.clone()))
            }
            _ => None,
        },
        _ => None,
    };
    Some((col(left)?, col(right)?))
}

fn same(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// `c` ties the table qualified `qi` by its key `column` to another FROM item's column:
/// `qi.column = x.col` either way round; (x, col).
fn tie(c: &Expr, qi: &str, column: &str) -> Option<(String, String)> {
    let (a, b) = equality(c)?;
    let (mine, other) = if same(&a.0, qi) { (a, b) } else { (b, a) };
    (same(&mine.0, qi) && !same(&other.0, qi) && same(&mine.1, column)).then_some(other)
}

/// How the SELECT's FROM writes `table` (its last name part).
fn written_name(s: &Select, table: &str) -> Option<String> {
    s.from.iter().find_map(|twj| {
        std::iter::once(&twj.relation)
            .chain(twj.joins.iter().map(|j| &j.relation))
            .find_map(|f| match f {
                TableFactor::Table { name, .. } if table_name(name) == table => last_part(name),
                _ => None,
            })
    })
}

/// The FROM's tables (not inside a nested join): (table, qualifier, its join).
type Factors<'s> = Vec<(String, String, Option<&'s JoinOperator>)>;

/// The outer column `table` (in the FROM as `qi`) is joined to by its key `column`, and the
/// join as written, when the equality is a conjunct every joined row of `table` satisfies.
/// Returns ((outer qualifier, outer column, `qi`), the join).
fn joined(
    s: &Select,
    factors: &Factors<'_>,
    table: &str,
    qi: &str,
    column: &str,
) -> Option<((String, String, String), String)> {
    // The conjuncts a row of `table` in the result satisfies.
    let mut conds: Vec<&Expr> = Vec::new();
    if let Some(w) = &s.selection {
        and_parts(w, &mut conds);
    }
    for (t, _, op) in factors {
        use JoinOperator::*;
        match op {
            Some(
                Join(JoinConstraint::On(e))
                | Inner(JoinConstraint::On(e))
                | StraightJoin(JoinConstraint::On(e)),
            ) => and_parts(e, &mut conds),
            Some(Left(JoinConstraint::On(e)) | LeftOuter(JoinConstraint::On(e))) if t == table => {
                and_parts(e, &mut conds)
            }
            _ => {}
        }
    }
    conds.iter().find_map(|c| {
        let (qa, col) = tie(c, qi, column)?;
        Some(((qa, col, qi.to_string()), c.to_string()))
    })
}

/// `table` alone in a subquery's FROM: its qualifier.
fn only_table<'q>(q: &'q Query, table: &str) -> Option<(String, &'q Select)> {
    let SetExpr::Select(s) = q.body.as_ref() else {
        return None;
    };
    let [twj] = s.from.as_slice() else {
        return None;
    };
    if !twj.joins.is_empty() {
        return None;
    }
    match &twj.relation {
        TableFactor::Table { name, alias, .. } if table_name(name) == table => {
            Some((qualifier_of(name, alias.as_ref())?, s))
        }
        _ => None,
    }
}

/// A semi-join of the outer SELECT `s` to `table` by its key `column`, as a conjunct of its
/// WHERE: `o.col IN (SELECT p.key FROM p ...)` (not NOT IN: with a NULL key among the
/// subquery's rows a value it misses is NULL, not false, and the copy would leave the NULL
/// out), or `[NOT] EXISTS (SELECT ... FROM p WHERE p.key = o.col AND ...)` (true or false
/// by the rows whose key equals `o.col` alone). Either way no row of `table` whose key is
/// not among the outer values can change the answer. The same shape as [`joined`].
fn semi(
    s: &Select,
    factors: &Factors<'_>,
    table: &str,
    column: &str,
) -> Option<((String, String, String), String)> {
    let mut conds: Vec<&Expr> = Vec::new();
    and_parts(s.selection.as_ref()?, &mut conds);
    let outer_named = |q: &str| factors.iter().any(|(_, fq, _)| same(fq, q));
    conds.iter().find_map(|c| match c {
        Expr::In {
            expr,
            target: InTarget::Subquery(subquery),
            negated: false,
            ..
        } => {
            let (qi, sub) = only_table(subquery, table)?;
            let [SelectItem::UnnamedExpr(item)] = sub.projection.as_slice() else {
                return None;
            };
            let key = match item {
                Expr::Identifier(k) => k.value.clone(),
                Expr::CompoundIdentifier(p) if p.len() == 2 && same(&p[0].value, &qi) => {
                    p[1].value.clone()
                }
                _ => return None,
            };
            if !same(&key, column) {
                return None;
            }
            // The outer column: qualified, or unqualified with one table in the FROM.
            let (qa, col) = match expr.as_ref() {
                Expr::CompoundIdentifier(p) if p.len() == 2 && outer_named(&p[0].value) => {
                    (p[0].value.clone(), p[1].value.clone())
                }
                Expr::Identifier(c)
                    if factors.len() == 1 && s.from.len() == 1 && s.from[0].joins.is_empty() =>
                {
                    (factors[0].1.clone(), c.value.clone())
                }
                _ => return None,
            };
            let on = format!("{qa}.{col} IN (SELECT {qi}.{key} ...)");
            Some(((qa, col, qi), on))
        }
        Expr::Exists { subquery, .. } => {
            let (qi, sub) = only_table(subquery, table)?;
            let mut inner: Vec<&Expr> = Vec::new();
            and_parts(sub.selection.as_ref()?, &mut inner);
            inner.iter().find_map(|e| {
                let (qa, col) = tie(e, &qi, column).filter(|(qa, _)| outer_named(qa))?;
                Some(((qa, col, qi.clone()), format!("EXISTS (... WHERE {e} ...)")))
            })
        }
        _ => None,
    })
}

/// Is every reference to `table` in `stmt` a bare name: no index hint, partition, sample or
/// arguments, nothing a derived table in its place could not carry?
fn bare(stmt: &Statement, table: &str) -> bool {
    struct Refs<'t> {
        table: &'t str,
    }
    impl Visitor for Refs<'_> {
        type Break = ();
        fn pre_visit_table_factor(&mut self, f: &TableFactor) -> ControlFlow<()> {
            match f {
                TableFactor::Table {
                    name,
                    args,
                    with_hints,
                    version,
                    with_ordinality,
                    partitions,
                    json_path,
                    sample,
                    index_directives,
                    inheritance,
                    ..
                } if table_name(name) == self.table => {
                    let bare = args.is_none()
                        && with_hints.is_empty()
                        && version.is_none()
                        && !with_ordinality
                        && partitions.is_empty()
                        && json_path.is_none()
                        && sample.is_none()
                        && index_directives.is_empty()
                        && inheritance.is_none();
                    if bare {
                        ControlFlow::Continue(())
                    } else {
                        ControlFlow::Break(())
                    }
                }
                _ => ControlFlow::Continue(()),
            }
        }
    }
    stmt.visit(&mut Refs { table }).is_continue()
}

/// A statement renamed to read copies, lexed once: checked and searched without parsing it
/// again (it is made at every execution of a gathered or spread statement).
pub(super) struct Renamed {
    pub sql: String,
    toks: Vec<crate::sql::lex::Tok>,
}

impl Renamed {
    /// `sql`, when it lexes and holds `params` placeholders, as the statement it was renamed
    /// from did (token spans replaced by quoted names and aliases keep both).
    pub(super) fn check(sql: String, mode: crate::sql::lex::Mode, params: usize) -> Option<Self> {
        let lexed = crate::sql::lex::lex(&sql, mode);
        if lexed.error.is_some() {
            return None;
        }
        let placeholders = lexed
            .toks
            .iter()
            .filter(|t| t.kind == crate::sql::lex::Kind::Param)
            .count();
        (placeholders == params).then_some(Renamed {
            sql,
            toks: lexed.toks,
        })
    }

    /// Where it names the copy `temp`, when it does so exactly once, as a quoted name.
    pub(super) fn named_at(&self, temp: &str) -> Option<(usize, usize)> {
        let name = quoted(temp);
        let mut at = self
            .toks
            .iter()
            .filter(|t| t.kind == crate::sql::lex::Kind::Quoted && t.text(&self.sql) == name)
            .map(|t| (t.start, t.end));
        let first = at.next()?;
        at.next().is_none().then_some(first)
    }
}

impl Planner<'_> {
    /// Whether the bound copy of `table` may travel inside the statement (see [`Bind::at`]).
    pub(super) fn bare(&self, table: &str) -> bool {
        bare(self.stmt, table)
    }

    /// How the copy of `table` (as the statement writes it: `written`) can be read by the
    /// keys its join binds, the statement gathered on `node`; `placed`: each table's nodes.
    pub(super) fn bind(
        &self,
        q: &Query,
        table: &str,
        written: &str,
        node: usize,
        placed: &[(String, String, Vec<usize>)],
    ) -> Option<Bind> {
        let Some(TableRule::HashSlot { column, map }) = self.topo.table(table) else {
            return None;
        };
        if map.is_moving() {
            return None;
        }
        let SetExpr::Select(s) = q.body.as_ref() else {
            return None;
        };
        let once = |t: &str| super::gather::references(self.stmt, t) == 1;
        if !once(table) {
            return None;
        }
        // Every table of the FROM (not inside a nested join): (table, qualifier, its join).
        let mut factors: Vec<(String, String, Option<&JoinOperator>)> = Vec::new();
        for twj in &s.from {
            let all = std::iter::once((&twj.relation, None)).chain(
                twj.joins
                    .iter()
                    .map(|j| (&j.relation, Some(&j.join_operator))),
            );
            for (f, op) in all {
                if let TableFactor::Table { name, alias, .. } = f {
                    let qualifier = qualifier_of(name, alias.as_ref())?;
                    factors.push((table_name(name), qualifier, op));
                }
            }
        }
        let tied = |column: &str| match factors.iter().find(|(t, _, _)| t == table) {
            Some((_, qi, _)) => joined(s, &factors, table, qi, column),
            None => semi(s, &factors, table, column),
        };
        // By the shard key, else by a column a global index in use maps to it.
        let mut by_index = None;
        let (outer, on, column) = match tied(column) {
            Some((outer, on)) => (outer, on, column.clone()),
            None => {
                let (ix, (outer, on)) = self
                    .topo
                    .indexes_of(table)?
                    .iter()
                    .filter(|ix| ix.public)
                    .find_map(|ix| Some((ix, tied(&ix.column)?)))?;
                let Some(TableRule::HashSlot { map: at, .. }) = self.topo.table(&ix.index_table)
                else {
                    return None;
                };
                if at.is_moving() {
                    return None;
                }
                let weights = self.index_weights(ix)?;
                by_index = Some(ByIndex {
                    index: ix.clone(),
                    map: at.clone(),
                    weights,
                });
                (outer, on, ix.column.clone())
            }
        };
        // The outer table: on the gathering node alone (or on every node), read once.
        let (ta, qa, _) = factors.iter().find(|(_, q, _)| same(q, &outer.0))?;
        if !once(ta) {
            return None;
        }
        let there = match placed.iter().find(|(t, _, _)| t == ta) {
            Some((_, _, nodes)) => nodes.as_slice() == [node],
            None => matches!(self.topo.table(ta), Some(TableRule::Broadcast)),
        };
        if !there {
            return None;
        }
        let text = Text::new(self.sql, self.parsed.mode).ok()?;
        let columns = (self.ctx.columns)(None, ta);
        let filter = match select_filter(s, ta, columns.as_deref(), &text, self.bound()) {
            Some(Some((_, c))) if !c.is_empty() => format!(" WHERE {}", c.join(" AND ")),
            _ => String::new(),
        };
        // As the statement writes it (a broadcast table is not among `placed`).
        let written_a = placed
            .iter()
            .find(|(t, _, _)| t == ta)
            .map(|(_, w, _)| w.clone())
            .or_else(|| written_name(s, ta))
            .unwrap_or_else(|| ta.clone());
        let keys = format!(
            "SELECT DISTINCT {qa}.{c} FROM {} AS {qa}{filter} LIMIT {}",
            quoted(&written_a),
            MAX_VALUES + 1,
            qa = quoted(qa),
            c = quoted(&outer.1),
        );
        let own = match super::gather::pushdown(
            self.stmt,
            table,
            (self.ctx.columns)(None, table).as_deref(),
            Some(&text),
            self.bound(),
        ) {
            Pushdown::Filter(_, cond) => format!("{cond} AND "),
            _ => String::new(),
        };
        let head = format!(
            "SELECT {q}.* FROM {} AS {q} WHERE {own}{q}.{k} IN (",
            quoted(written),
            q = quoted(&outer.2),
            k = quoted(&column),
        );
        Some(Bind {
            node,
            keys,
            head,
            map: map.clone(),
            on,
            key: column,
            at: None,
            by_index,
            outer: Outer {
                table: ta.clone(),
                written: written_a,
                qualifier: qa.clone(),
                column: outer.1.clone(),
                filter,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{node_of, plan_of, plan_with};
    use super::*;
    use crate::plan::Plan;
    use mysql_common::value::Value;

    /// The copy of `table`'s binding, in a gathered plan.
    fn bind_of<'p>(p: &'p Plan, table: &str) -> Option<&'p Bind> {
        let g = match p {
            Plan::Gather(g) => g,
            Plan::Spread(s) => &s.gather,
            _ => return None,
        };
        g.ships.iter().find(|s| s.table == table)?.bind.as_ref()
    }

    #[test]
    fn a_join_by_the_other_tables_key_reads_its_copy_by_the_outer_values() {
        let p = plan_of(
            "SELECT o.order_id, i.x FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = 5",
        );
        let b = bind_of(&p, "t_item").unwrap_or_else(|| panic!("not bound: {p:?}"));
        assert_eq!(b.node, node_of(5));
        assert_eq!(
            b.keys,
            "SELECT DISTINCT `o`.`order_id` FROM `t_order` AS `o` WHERE (o.user_id = 5) LIMIT 10001"
        );
        assert_eq!(
            b.head,
            "SELECT `i`.* FROM `t_item` AS `i` WHERE `i`.`user_id` IN ("
        );
        // Bound values are written into the outer filter; the join may sit in the WHERE, and
        // the copied table's own conjuncts stay in its read.
        let p = plan_with(
            "SELECT o.order_id FROM t_order o, t_item i WHERE o.order_id = i.user_id AND o.user_id = ? AND i.qty > 2",
            &[Value::Int(5)],
        );
        let b = bind_of(&p, "t_item").unwrap_or_else(|| panic!("not bound: {p:?}"));
        assert!(b.keys.contains("WHERE (o.user_id = 5)"), "{}", b.keys);
        assert_eq!(
            b.head,
            "SELECT `i`.* FROM `t_item` AS `i` WHERE (i.qty > 2) AND `i`.`user_id` IN ("
        );
        // The right side of a LEFT JOIN: a row without a match is NULL-extended anyway.
        let p = plan_of(
            "SELECT o.order_id FROM t_order o LEFT JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = 5",
        );
        assert!(bind_of(&p, "t_item").is_some(), "{p:?}");
    }

    #[test]
    fn semi_joins_by_the_other_tables_key_read_their_copy_by_the_outer_values() {
        for sql in [
            "SELECT o.order_id FROM t_order o WHERE o.user_id = 5 AND o.order_id IN (SELECT i.user_id FROM t_item i WHERE i.qty > 2)",
            // Unqualified, one table outside.
            "SELECT order_id FROM t_order WHERE user_id = 5 AND order_id IN (SELECT user_id FROM t_item)",
            "SELECT o.order_id FROM t_order o WHERE o.user_id = 5 AND EXISTS (SELECT 1 FROM t_item i WHERE i.qty > 2 AND i.user_id = o.order_id)",
            // NOT EXISTS: false or true by the rows of that key alone.
            "SELECT o.order_id FROM t_order o WHERE NOT EXISTS (SELECT * FROM t_item i WHERE o.order_id = i.user_id) AND o.user_id = 5",
        ] {
            let p = plan_of(sql);
            let b = bind_of(&p, "t_item").unwrap_or_else(|| panic!("{sql}: not bound: {p:?}"));
            assert_eq!(b.node, node_of(5), "{sql}");
            assert!(b.keys.starts_with("SELECT DISTINCT `"), "{}", b.keys);
            assert!(b.keys.contains("`order_id` FROM `t_order`"), "{}", b.keys);
            assert!(b.head.ends_with("`user_id` IN ("), "{}", b.head);
        }
        let p = plan_of(
            "SELECT o.order_id FROM t_order o WHERE o.user_id = 5 AND o.order_id IN (SELECT i.user_id FROM t_item i WHERE i.qty > 2)",
        );
        let b = bind_of(&p, "t_item").expect("bound");
        assert_eq!(
            b.head,
            "SELECT `i`.* FROM `t_item` AS `i` WHERE (i.qty > 2) AND `i`.`user_id` IN ("
        );
    }

    #[test]
    fn semi_joins_whose_answer_the_other_keys_can_change_are_not_bound() {
        for sql in [
            // A NULL key among the subquery's rows makes a missed value NULL, not false.
            "SELECT o.order_id FROM t_order o WHERE o.user_id = 5 AND o.order_id NOT IN (SELECT i.user_id FROM t_item i)",
            // In the select list, NULL and false differ.
            "SELECT o.order_id IN (SELECT i.user_id FROM t_item i) FROM t_order o WHERE o.user_id = 5",
            // Not a conjunct.
            "SELECT o.order_id FROM t_order o WHERE o.user_id = 5 AND (o.qty > 3 OR o.order_id IN (SELECT i.user_id FROM t_item i))",
            // Unqualified beside a derived table: the column may be the derived table's.
            "SELECT d.k FROM t_order, (SELECT 7 AS k) d WHERE user_id = 5 AND k IN (SELECT user_id FROM t_item)",
            // Not the key, or not tied to the outer row by it.
            "SELECT o.order_id FROM t_order o WHERE o.user_id = 5 AND o.order_id IN (SELECT i.qty FROM t_item i)",
            "SELECT o.order_id FROM t_order o WHERE o.user_id = 5 AND EXISTS (SELECT 1 FROM t_item i WHERE i.user_id > o.order_id)",
            "SELECT o.order_id FROM t_order o WHERE o.user_id = 5 AND EXISTS (SELECT 1 FROM t_item i WHERE i.user_id = o.order_id OR i.qty = 1)",
        ] {
            let p = plan_of(sql);
            assert!(bind_of(&p, "t_item").is_none(), "{sql}: {p:?}");
        }
    }

    #[test]
    fn a_bare_reference_is_where_its_rows_may_travel_inside_the_statement() {
        let p = plan_of(
            "SELECT o.order_id, i.x FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = 5",
        );
        let g = match &p {
            Plan::Gather(g) => g,
            Plan::Spread(s) => &s.gather,
            _ => panic!("{p:?}"),
        };
        let at = bind_of(&p, "t_item").and_then(|b| b.at).expect("placed");
        assert_eq!(&g.sql[at.0..at.1], "`__sp_ship_0`");
        assert!(g.sql[at.1..].starts_with(" i ON"), "{}", g.sql);
        // An index hint or a partition would not apply to a derived table.
        for sql in [
            "SELECT o.order_id FROM t_order o JOIN t_item i FORCE INDEX (PRIMARY) ON i.user_id = o.order_id WHERE o.user_id = 5",
            "SELECT o.order_id FROM t_order o JOIN t_item PARTITION (p0) i ON i.user_id = o.order_id WHERE o.user_id = 5",
        ] {
            let p = plan_of(sql);
            let b = bind_of(&p, "t_item").unwrap_or_else(|| panic!("{sql}: not bound: {p:?}"));
            assert_eq!(b.at, None, "{sql}");
        }
    }

    #[test]
    fn a_renamed_statement_is_checked_by_its_tokens() {
        let mode = crate::sql::lex::Mode::default();
        let r = Renamed::check(
            "SELECT '?' FROM `__sp_ship_0` o WHERE o.a = ? /* ? */".into(),
            mode,
            1,
        )
        .expect("one placeholder, outside the string and the comment");
        assert_eq!(r.named_at("__sp_ship_0"), Some((16, 29)));
        assert_eq!(r.named_at("__sp_ship_1"), None);
        // Named twice: no one place to carry rows into.
        let r = Renamed::check("SELECT * FROM `x` JOIN `x` y".into(), mode, 0).unwrap();
        assert_eq!(r.named_at("x"), None);
        // A placeholder lost or gained, or a quote left open.
        assert!(Renamed::check("SELECT ? FROM t".into(), mode, 2).is_none());
        assert!(Renamed::check("SELECT 'a FROM t".into(), mode, 0).is_none());
    }

    #[test]
    fn a_copy_whose_rows_the_join_keeps_whole_is_not_bound() {
        // The copied table preserved by the LEFT JOIN: its rows without a match count.
        for sql in [
            "SELECT * FROM t_item i LEFT JOIN t_order o ON i.user_id = o.order_id AND o.user_id = 5",
            // Not its shard key; an expression, not a column.
            "SELECT * FROM t_order o JOIN t_item i ON i.qty = o.order_id WHERE o.user_id = 5",
            "SELECT * FROM t_order o JOIN t_item i ON i.user_id = o.order_id + 1 WHERE o.user_id = 5",
            // The table twice.
            "SELECT * FROM t_order o JOIN t_item i ON i.user_id = o.order_id JOIN t_item j ON j.user_id = o.user_id WHERE o.user_id = 5",
        ] {
            let p = plan_of(sql);
            assert!(bind_of(&p, "t_item").is_none(), "{sql}: {p:?}");
        }
    }
}
