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

use sqlparser::ast::{BinaryOperator, Expr, JoinConstraint, JoinOperator, Query, SetExpr};

use super::gather::{and_parts, last_part, qualifier_of, quoted, select_filter, Pushdown};
use super::Planner;
use crate::routing::slot::SlotMap;
use crate::routing::TableRule;
use crate::sql::table_name;
use crate::sql::text::Text;

/// Values of the outer side above which the copy reads the table as before.
pub const MAX_VALUES: usize = 10_000;
/// Values in one read's IN list.
pub const PER_READ: usize = 1_000;

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

/// How the SELECT's FROM writes `table` (its last name part).
fn written_name(s: &sqlparser::ast::Select, table: &str) -> Option<String> {
    s.from.iter().find_map(|twj| {
        std::iter::once(&twj.relation)
            .chain(twj.joins.iter().map(|j| &j.relation))
            .find_map(|f| match f {
                sqlparser::ast::TableFactor::Table { name, .. } if table_name(name) == table => {
                    last_part(name)
                }
                _ => None,
            })
    })
}

impl Planner<'_> {
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
        if !map.moves().is_empty() {
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
                if let sqlparser::ast::TableFactor::Table { name, alias, .. } = f {
                    let qualifier = qualifier_of(name, alias.as_ref())?;
                    factors.push((table_name(name), qualifier, op));
                }
            }
        }
        let (_, qi, _) = factors.iter().find(|(t, _, _)| t == table)?.clone();
        // The conjuncts a row of `table` in the result satisfies.
        let mut conds: Vec<&Expr> = Vec::new();
        if let Some(w) = &s.selection {
            and_parts(w, &mut conds);
        }
        for (t, _, op) in &factors {
            use JoinOperator::*;
            match op {
                Some(
                    Join(JoinConstraint::On(e))
                    | Inner(JoinConstraint::On(e))
                    | StraightJoin(JoinConstraint::On(e)),
                ) => and_parts(e, &mut conds),
                Some(Left(JoinConstraint::On(e)) | LeftOuter(JoinConstraint::On(e)))
                    if t == table =>
                {
                    and_parts(e, &mut conds)
                }
                _ => {}
            }
        }
        let same = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
        let (outer, on) = conds.iter().find_map(|c| {
            let (a, b) = equality(c)?;
            let (mine, other) = if same(&a.0, &qi) { (a, b) } else { (b, a) };
            (same(&mine.0, &qi) && !same(&other.0, &qi) && same(&mine.1, column))
                .then(|| (other, c.to_string()))
        })?;
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
            q = quoted(&qi),
            k = quoted(column),
        );
        Some(Bind {
            node,
            keys,
            head,
            map: map.clone(),
            on,
            key: column.clone(),
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
        let Plan::Gather(g) = p else {
            return None;
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
