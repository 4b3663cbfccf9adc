//! A bound join run where the inner rows are: when a gathered statement joins a hash_slot
//! table `p` by its key to a column of a table `o` whose rows are on one node
//! ([`super::bind`]), the rows of `o` its own filter keeps are read once and each is carried,
//! inside the statement, to the node that holds the rows of `p` its join value can equal (the
//! node of that value's slot). Each of those nodes joins its share of `o` to its own rows of
//! `p`, and their answers are merged as a scatter's. Two stages one after another (the outer
//! rows; the statement on the inner table's nodes) where the gathered plan takes three (the
//! keys; the inner rows; the statement), and the join itself is MariaDB's on every node.
//!
//! The statement is planned as if `o` were sharded by its join column with the slots of `p`:
//! its rows split so are then exactly a table sharded alike and joined on equal shard keys,
//! and the planner's own checks decide whether it decomposes (where a row of one node could
//! meet a row of another, or a merge is not one it does, the statement stays gathered). Only
//! where the bound copy could travel inside the gathered statement (a bare reference, no
//! global index in the binding), `o` and `p` are the only tables not on every node, and `o`
//! is read once.
//!
//! At run time, where the rows cannot travel so (a join value that is not an integer in
//! both tables, a column type JSON_TABLE cannot carry, more than
//! [`super::bind::INLINE_ROWS`] rows), the gathered plan runs instead
//! (`crate::exec::spread`).

use sqlparser::ast::Query;

use super::bind::Renamed;
use super::gather::{cte_names, quoted, renamed, Gather};
use super::{Plan, Planner};
use crate::routing::slot::SlotMap;
use crate::routing::TableRule;

/// A statement whose outer rows are carried to the inner table's nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Spread {
    /// The same statement gathered on one node: run where the rows cannot travel so.
    pub gather: Gather,
    /// The outer table, as the statement writes it; where its rows are and the read of
    /// them (its own filter; at most one row past [`super::bind::INLINE_ROWS`]).
    pub outer: String,
    pub node: usize,
    pub read: String,
    /// Where its definition is read (`SHOW CREATE TABLE`), another node when one holds it.
    pub definition: usize,
    /// Its column the join binds, as the statement names it.
    pub column: String,
    /// The inner table, as the statement writes it, a node holding it, and its shard key.
    pub inner: String,
    pub inner_definition: usize,
    pub key: String,
    /// The inner table's slots: each outer row goes to the node of its join value's slot.
    pub map: SlotMap,
    /// The join, for `route` and PREVIEW.
    pub on: String,
    /// The statement on the inner table's nodes (a route or a scatter under its merges),
    /// the outer table named by [`SPREAD_NAME`].
    pub then: Plan,
    /// Where each target of `then`'s leaf names the outer rows, in the targets' order.
    pub at: Vec<(usize, usize)>,
}

/// The name a node's statement gives the outer rows until they are written in.
pub const SPREAD_NAME: &str = "__sp_ship_spread";

impl Spread {
    /// Every node the statement may touch.
    pub fn nodes(&self) -> Vec<usize> {
        let mut v = self.then.nodes();
        v.extend([self.node, self.definition, self.inner_definition]);
        v.extend(
            self.gather
                .ships
                .iter()
                .flat_map(|s| s.reads.iter().map(|(n, _)| *n)),
        );
        v.push(self.gather.node);
        v.sort_unstable();
        v.dedup();
        v
    }
}

impl<'a> Planner<'a> {
    /// A planner of the same statement, afresh, over `topo`, reading `copies` as broadcast
    /// tables; `spreading`: not gathered again.
    pub(super) fn again<'b>(
        &self,
        topo: &'b crate::config::Topology,
        copies: Vec<String>,
        spreading: bool,
    ) -> Planner<'b>
    where
        'a: 'b,
    {
        Planner {
            slots: Default::default(),
            missing: Default::default(),
            values: Default::default(),
            moving: self.moving,
            ctx: self.ctx,
            sql: self.sql,
            stmt: self.stmt,
            parsed: self.parsed,
            params: self.params,
            topo,
            copies,
            missing_index: Default::default(),
            missing_weights: Default::default(),
            row_keys: Default::default(),
            spreading,
        }
    }

    /// The gathered statement `g` run where its bound copy's rows are, when it can be
    /// (module docs); `placed`: each table not on every node, with its nodes.
    pub(super) fn spread(
        &self,
        q: &Query,
        g: &Gather,
        placed: &[(String, String, Vec<usize>)],
    ) -> Option<Spread> {
        if self.spreading || g.ships.len() != 1 {
            return None;
        }
        let ship = &g.ships[0];
        let b = ship.bind.as_ref()?;
        // More rows than travel inside a statement, by the estimate: gathered.
        if ship.estimate.is_some_and(|e| e.past_carrying()) {
            return None;
        }
        if b.by_index.is_some() || b.at.is_none() || placed.len() != 2 {
            return None;
        }
        let o = &b.outer;
        let inner = placed.iter().find(|(t, _, _)| *t != o.table)?;
        if !placed
            .iter()
            .any(|(t, _, n)| *t == o.table && n.as_slice() == [b.node])
            || !self.bare(&o.table)
        {
            return None;
        }
        let Some(TableRule::HashSlot { map, .. }) = self.topo.table(&inner.0) else {
            return None;
        };
        let read = format!(
            "SELECT {q}.* FROM {} AS {q}{} LIMIT {}",
            quoted(&o.written),
            o.filter,
            super::bind::INLINE_ROWS + 1,
            q = quoted(&o.qualifier),
        );
        // Those rows read lately were more than travel inside the statements.
        if (self.ctx.overflowed)(&read) {
            return None;
        }
        // The world in which the outer table is sharded like the inner one by its join
        // column: what its rows are once each is carried to its value's node.
        let mut topo = self.topo.clone();
        topo.tables.insert(
            o.table.clone(),
            TableRule::HashSlot {
                column: o.column.to_ascii_lowercase(),
                map: map.clone(),
            },
        );
        topo.indexes.remove(&o.table);
        topo.key_generators.remove(&o.table);
        let sub = self.again(&topo, Vec::new(), true);
        let mut then = sub.select(q);
        if !sub.missing.borrow().is_empty()
            || !sub.missing_index.borrow().is_empty()
            || !sub.missing_weights.borrow().is_empty()
        {
            return None;
        }
        let ctes = cte_names(self.stmt);
        let renames = [(o.table.clone(), SPREAD_NAME.to_string())];
        let mode = self.parsed.mode;
        let mut at = Vec::new();
        let nodes = map.nodes();
        // The targets of a scatter share one statement: renamed once.
        let mut last: Option<(String, String, (usize, usize))> = None;
        let mut place = |t: &mut super::Target| -> Option<()> {
            if !nodes.contains(&t.node) {
                return None;
            }
            let (sql, here) = match &last {
                Some((was, sql, here)) if *was == t.sql => (sql.clone(), *here),
                _ => {
                    // The client's statement as it was (a route) is parsed already.
                    let parsed;
                    let (stmt, params) = if t.sql == self.sql {
                        (self.stmt, self.parsed.param_count())
                    } else {
                        parsed = crate::sql::parse_in(&t.sql, mode).ok()?;
                        (&parsed.stmt, parsed.param_count())
                    };
                    let sql = renamed(&t.sql, stmt, &renames, &ctes, mode)?;
                    let sql = Renamed::check(sql, mode, params)?;
                    let here = sql.named_at(SPREAD_NAME)?;
                    last = Some((t.sql.clone(), sql.sql.clone(), here));
                    (sql.sql, here)
                }
            };
            at.push(here);
            t.sql = sql;
            Some(())
        };
        match then.source_mut() {
            Plan::Route(t) => place(t)?,
            Plan::Scatter { targets, .. } => {
                for t in targets.iter_mut() {
                    place(t)?;
                }
            }
            _ => return None,
        }
        // Each definition on a node the statement reads anyway, beside the outer rows'
        // read where one holds it (a node down fails only what needs it).
        let used = then.nodes();
        let pick = |table: &str, not: &[usize]| {
            let all = self.topo.holders(table);
            let used: Vec<usize> = std::iter::once(b.node)
                .chain(used.iter().copied())
                .filter(|n| all.contains(n))
                .collect();
            used.iter()
                .copied()
                .find(|n| !not.contains(n))
                .or_else(|| used.first().copied())
                .or_else(|| all.first().copied())
        };
        let definition = pick(&o.table, &[b.node])?;
        let inner_definition = pick(&inner.0, &[b.node, definition])?;
        Some(Spread {
            gather: g.clone(),
            outer: o.written.clone(),
            node: b.node,
            read,
            definition,
            column: o.column.clone(),
            inner: inner.1.clone(),
            inner_definition,
            key: b.key.clone(),
            map: map.clone(),
            on: b.on.clone(),
            then,
            at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{keys_on_both, node_of, plan_of};
    use super::*;

    fn spread_of(sql: &str) -> Spread {
        match plan_of(sql) {
            Plan::Spread(s) => *s,
            other => panic!("{sql}: not spread: {other:?}"),
        }
    }

    /// The statements of the leaf, by node.
    fn leaf(p: &Plan) -> Vec<(usize, String)> {
        match p.source() {
            Plan::Route(t) => vec![(t.node, t.sql.clone())],
            Plan::Scatter { targets, .. } => {
                targets.iter().map(|t| (t.node, t.sql.clone())).collect()
            }
            other => panic!("not a route or a scatter: {other:?}"),
        }
    }

    #[test]
    fn a_bound_join_runs_on_the_inner_tables_nodes_with_the_outer_rows_inside() {
        let s = spread_of(
            "SELECT o.order_id, i.x FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = 5 ORDER BY o.order_id",
        );
        assert_eq!(s.node, node_of(5));
        assert_ne!(
            s.definition, s.node,
            "the definition is read beside the rows"
        );
        assert_eq!(
            s.read,
            "SELECT `o`.* FROM `t_order` AS `o` WHERE (o.user_id = 5) LIMIT 5001"
        );
        assert_eq!((s.column.as_str(), s.key.as_str()), ("order_id", "user_id"));
        assert!(matches!(s.then, Plan::MergeSort { .. }), "{:?}", s.then);
        let nodes = leaf(&s.then);
        assert_eq!(nodes.len(), 2);
        assert_eq!(s.at.len(), 2);
        for ((_, sql), at) in nodes.iter().zip(&s.at) {
            assert_eq!(&sql[at.0..at.1], "`__sp_ship_spread`", "{sql}");
            assert!(sql[at.1..].starts_with(" o JOIN t_item i"), "{sql}");
        }
        // The gathered plan stays, for rows that cannot travel so.
        assert!(s.gather.ships[0].bind.is_some());
        // Aggregates merge as a scatter's; a LEFT JOIN keeping the outer rows, a semi-join.
        let s = spread_of(
            "SELECT COUNT(*), SUM(i.x) FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = 5",
        );
        assert!(matches!(s.then, Plan::Aggregate { .. }), "{:?}", s.then);
        for sql in [
            "SELECT o.order_id FROM t_order o LEFT JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = 5",
            "SELECT o.order_id FROM t_order o WHERE o.user_id = 5 AND EXISTS (SELECT 1 FROM t_item i WHERE i.user_id = o.order_id)",
            "SELECT o.order_id FROM t_order o WHERE o.user_id = 5 AND o.order_id IN (SELECT i.user_id FROM t_item i WHERE i.x > 2)",
        ] {
            assert_eq!(leaf(&spread_of(sql).then).len(), 2, "{sql}");
        }
    }

    #[test]
    fn a_key_of_the_inner_table_pins_the_node_its_outer_rows_can_join() {
        let (a, b) = keys_on_both();
        let s = spread_of(&format!(
            "SELECT o.order_id, i.x FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = {a} AND i.user_id = {b}"
        ));
        assert_eq!(s.node, node_of(a));
        assert_eq!(
            leaf(&s.then).iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            vec![node_of(b)]
        );
    }

    #[test]
    fn what_the_nodes_cannot_answer_over_their_share_stays_gathered() {
        for sql in [
            // A merge shardproxy does not do.
            "SELECT GROUP_CONCAT(i.x) FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = 5",
            // A third table on one node: it is not on the inner table's nodes.
            "SELECT o.order_id FROM t_order o JOIN t_item i ON i.user_id = o.order_id JOIN t_merchant m ON m.id = o.status WHERE o.user_id = 5",
            // The outer rows' table referenced with an index hint: a derived table takes none.
            "SELECT o.order_id FROM t_order o FORCE INDEX (PRIMARY) JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = 5",
            // The outer table twice.
            "SELECT o.order_id FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = 5 AND o.order_id IN (SELECT order_id FROM t_order WHERE user_id = 5)",
        ] {
            let p = plan_of(sql);
            assert!(!matches!(p, Plan::Spread(_)), "{sql}: {p:?}");
        }
    }
}
