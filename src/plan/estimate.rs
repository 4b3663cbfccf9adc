//! Row estimates of a bound join ([`super::bind`]): how many rows the read of its outer
//! table returns, how many distinct join values they hold, and how many rows of the copied
//! table those values then read. They come from the nodes' statistics (InnoDB's rows of a
//! table, and the distinct values of each index's leading column, from `information_schema`:
//! read by a running proxy, kept a minute) and the statement's own conjuncts.
//!
//! A conjunct is weighed when it pins a column of the table that leads an index on its
//! nodes: `c = v` (or `c IS NULL`) keeps the rows one value of `c` holds, `c IN (v1, ..., vn)`
//! those of n values. Any other conjunct (a range, a LIKE, an expression) is not weighed:
//! the estimate is then an upper bound, and nothing is decided by it (binding is tried as
//! before, and falls back at run time past its limits). MariaDB's own optimizer does better
//! with index dives into ranges, but that is a statement on a node at every planning.
//!
//! What the estimates decide (`super::gather`): a join whose outer values are estimated
//! past [`super::bind::MAX_VALUES`] is not bound (the run would read the values only to find
//! too many, then copy the table whole): the copies are weighed or gathered as for any
//! unbound join. One whose outer rows are estimated past [`super::bind::INLINE_ROWS`] is
//! not spread (its rows could not travel inside the statements): it is gathered, bound.

use std::sync::Arc;

use sqlparser::ast::{BinaryOperator, Expr, InTarget, Query, SetExpr, UnaryOperator};

use super::bind::{Bind, INLINE_ROWS, MAX_VALUES};
use super::gather::own_conjuncts;
use super::{Plan, Planner};

/// A table's statistics over its nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Rows on every node of its rule, added up (a broadcast table's copies each count).
    pub rows: u64,
    /// For each column that leads an index (lower-cased): rows a node holds per distinct
    /// value, at least 1.
    pub per_value: Vec<(String, u64)>,
}

impl TableStats {
    /// Rows only: no index statistics.
    pub fn rows(rows: u64) -> Arc<TableStats> {
        Arc::new(TableStats {
            rows,
            per_value: Vec::new(),
        })
    }

    pub fn per_value(&self, column: &str) -> Option<u64> {
        self.per_value
            .iter()
            .find(|(c, _)| c.eq_ignore_ascii_case(column))
            .map(|(_, n)| *n)
    }
}

/// Rows a read keeps, estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    pub rows: u64,
    /// Every conjunct was weighed (else `rows` is an upper bound).
    pub weighed: bool,
}

/// The rows of `read` (a node holding `per_node` of the table's rows) that `conds`, the
/// table's own conjuncts, keep.
pub fn kept(stats: &TableStats, read: u64, per_node: u64, conds: &[&Expr]) -> Kept {
    let mut rows = read as f64;
    let mut weighed = true;
    for c in conds {
        match selectivity(stats, per_node, c) {
            Some(f) => rows *= f,
            None => weighed = false,
        }
    }
    let rows = if read == 0 {
        0
    } else {
        // Saturating: f64 to u64 clamps.
        rows.round().max(1.0) as u64
    };
    Kept { rows, weighed }
}

/// The share of a node's rows one conjunct keeps, if the statistics tell.
fn selectivity(stats: &TableStats, per_node: u64, e: &Expr) -> Option<f64> {
    let one = |col: &Expr| -> Option<f64> {
        let v = stats.per_value(column(col)?)?;
        Some((v as f64 / per_node.max(1) as f64).min(1.0))
    };
    match e {
        Expr::Nested(x) => selectivity(stats, per_node, x),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => {
            if constant(right) {
                one(left)
            } else if constant(left) {
                one(right)
            } else {
                None
            }
        }
        Expr::IsNull(x) => one(x),
        Expr::In {
            expr,
            target: InTarget::List(list),
            negated: false,
            ..
        } if list.iter().all(constant) => Some((one(expr)? * list.len() as f64).min(1.0)),
        _ => None,
    }
}

/// The column a conjunct names (the qualifier was checked by the caller).
fn column(e: &Expr) -> Option<&str> {
    match e {
        Expr::Identifier(i) => Some(&i.value),
        Expr::CompoundIdentifier(p) => p.last().map(|i| i.value.as_str()),
        Expr::Nested(x) => column(x),
        _ => None,
    }
}

fn constant(e: &Expr) -> bool {
    match e {
        Expr::Value(_) | Expr::TypedString(_) => true,
        Expr::Nested(x) => constant(x),
        Expr::UnaryOp {
            op: UnaryOperator::Minus | UnaryOperator::Plus,
            expr,
        } => constant(expr),
        _ => false,
    }
}

/// What a bound copy is estimated to read, shown by `route` and PREVIEW.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindEstimate {
    /// Rows of the outer table its read returns.
    pub outer: u64,
    /// Distinct join values among them: the keys the copy is read by.
    pub keys: u64,
    /// The outer read's every conjunct was weighed.
    pub weighed: bool,
    /// Rows of the copied table its keys read, where an index of its nodes leads with the
    /// column they are matched to.
    pub bound: Option<u64>,
    /// Rows of the copied table on the nodes it is read from (before its own filter).
    pub whole: u64,
}

impl BindEstimate {
    /// Too many values to bind by (the run would fall back to the whole copy).
    pub fn past_values(&self) -> bool {
        self.weighed && self.keys > MAX_VALUES as u64
    }

    /// Too many rows to carry inside the statements of a spread.
    pub fn past_carrying(&self) -> bool {
        self.weighed && self.outer > INLINE_ROWS as u64
    }

    /// For `route` and PREVIEW: the outer table `outer` (its join column `column`), the
    /// copied one `table`.
    pub fn describe(&self, outer: &str, column: &str, table: &str) -> String {
        let bound = if self.weighed {
            ""
        } else {
            " (at most: a conjunct of its read the statistics do not weigh)"
        };
        let then = match self.bound {
            Some(n) => format!("{n} row(s)"),
            None => "rows (how many a value: unknown, no index leads with its column)".into(),
        };
        format!(
            "estimated by the nodes' statistics: {} row(s) of `{outer}`{bound} holding {} value(s) of `{column}`, then {then} of `{table}` by them, of {} on its nodes",
            self.outer, self.keys, self.whole
        )
    }
}

impl Planner<'_> {
    /// A table's statistics: `Ok(None)` offline, `Err(NeedRows)` while not read yet.
    pub(super) fn stats(&self, table: &str) -> Result<Option<Arc<TableStats>>, Box<Plan>> {
        match (self.ctx.rows)(table) {
            Some(s) => Ok(Some(s)),
            None if self.ctx.statistics => Err(Box::new(Plan::NeedRows {
                table: table.to_string(),
            })),
            None => Ok(None),
        }
    }

    /// Rows of `table` a node holds, by its statistics.
    pub(super) fn per_node(&self, table: &str, stats: &TableStats) -> u64 {
        let nodes = self
            .topo
            .table(table)
            .map_or(1, |r| r.all_nodes(self.topo).len())
            .max(1) as u64;
        stats.rows / nodes
    }

    /// The estimate of the copy of `table` bound by `b`, read from `nodes` nodes.
    pub(super) fn bind_estimate(
        &self,
        q: &Query,
        b: &Bind,
        table: &str,
        nodes: usize,
    ) -> Result<Option<BindEstimate>, Box<Plan>> {
        let (Some(outer), Some(inner)) = (self.stats(&b.outer.table)?, self.stats(table)?) else {
            return Ok(None);
        };
        // The outer read's own conjuncts, as its read has them.
        let SetExpr::Select(s) = q.body.as_ref() else {
            return Ok(None);
        };
        let columns = (self.ctx.columns)(None, &b.outer.table);
        let conds = match own_conjuncts(s, &b.outer.table, columns.as_deref()) {
            Some(Some((_, c))) => c,
            _ => Vec::new(),
        };
        // The outer table's rows are on one node.
        let per_node = self.per_node(&b.outer.table, &outer);
        let read = kept(&outer, per_node, per_node, &conds);
        let keys = match outer.per_value(&b.outer.column) {
            Some(v) => read.rows.min((per_node / v.max(1)).max(1)),
            None => read.rows,
        };
        let whole = self
            .per_node(table, &inner)
            .saturating_mul(nodes.max(1) as u64);
        let bound = inner
            .per_value(&b.key)
            .map(|v| keys.saturating_mul(v).min(whole));
        Ok(Some(BindEstimate {
            outer: read.rows,
            keys,
            weighed: read.weighed,
            bound,
            whole,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conds(sql: &str) -> Vec<Expr> {
        let p = crate::sql::parse(&format!("SELECT * FROM t WHERE {sql}")).expect("parses");
        let sqlparser::ast::Statement::Query(q) = &p.stmt else {
            panic!()
        };
        let sqlparser::ast::SetExpr::Select(s) = q.body.as_ref() else {
            panic!()
        };
        let mut parts = Vec::new();
        super::super::uses::and_parts(s.selection.as_ref().expect("a WHERE"), &mut parts);
        parts.into_iter().cloned().collect()
    }

    #[test]
    fn pinned_indexed_columns_are_weighed_and_others_bound_the_estimate_from_above() {
        let stats = TableStats {
            rows: 400_000,
            per_value: vec![("user_id".into(), 20), ("status".into(), 25_000)],
        };
        let est = |sql: &str| {
            let c = conds(sql);
            let c: Vec<&Expr> = c.iter().collect();
            kept(&stats, 100_000, 100_000, &c)
        };
        let k = |rows, weighed| Kept { rows, weighed };
        assert_eq!(est("o.user_id = 5"), k(20, true));
        assert_eq!(est("5 = user_id"), k(20, true));
        assert_eq!(est("(o.user_id = ?)"), k(20, true));
        assert_eq!(est("o.user_id IN (1, 2, -3)"), k(60, true));
        assert_eq!(est("o.user_id IS NULL"), k(20, true));
        assert_eq!(est("o.status = 'paid' AND o.user_id = 5"), k(5, true));
        // Never below one row.
        assert_eq!(
            est("o.user_id = 5 AND o.user_id = 6 AND o.user_id = 7"),
            k(1, true)
        );
        // A range, a column without an index, a comparison of two columns: not weighed.
        assert_eq!(est("o.user_id > 5"), k(100_000, false));
        assert_eq!(est("o.qty = 5"), k(100_000, false));
        assert_eq!(
            est("o.user_id = o.qty AND o.status = 'x'"),
            k(25_000, false)
        );
        assert_eq!(est("o.user_id NOT IN (1)"), k(100_000, false));
        // An IN list of many values keeps at most every row.
        let many: Vec<String> = (0..10_000).map(|i| i.to_string()).collect();
        assert_eq!(
            est(&format!("o.user_id IN ({})", many.join(","))),
            k(100_000, true)
        );
        // Nothing to read.
        let c = conds("o.user_id = 5");
        assert_eq!(kept(&stats, 0, 0, &[&c[0]]), k(0, true));
    }

    fn stats(per_value: &[(&str, u64)]) -> TableStats {
        TableStats {
            rows: 1_000_000,
            per_value: per_value.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
        }
    }

    /// The plan of the join by `t_item`'s key with `t_order`'s user holding `per_user` rows
    /// (500,000 on each of the two nodes), `t_item`'s key 3 rows a value.
    fn join(per_user: u64, filter: &str) -> Plan {
        let sql = format!(
            "SELECT o.order_id, i.item_id FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE {filter}"
        );
        let given = [
            ("t_order", stats(&[("user_id", per_user), ("order_id", 1)])),
            ("t_item", stats(&[("user_id", 3)])),
        ];
        super::super::tests::with_stats(&given, || super::super::tests::plan_of(&sql))
    }

    /// The plan as `route` and PREVIEW show it.
    fn described(p: &Plan) -> String {
        p.describe(&super::super::tests::topo()).to_string()
    }

    fn copy_of(p: &Plan) -> &super::super::gather::Ship {
        match p {
            Plan::Gather(g) => &g.ships[0],
            Plan::Spread(s) => &s.gather.ships[0],
            other => panic!("not gathered: {other:?}"),
        }
    }

    #[test]
    fn a_join_is_bound_spread_or_copied_whole_by_its_estimated_rows() {
        // A user's 20 orders: 20 values, 60 items by them; carried to the items' nodes.
        let p = join(20, "o.user_id = 5");
        assert!(matches!(p, Plan::Spread(_)), "{p:?}");
        let e = copy_of(&p).estimate.expect("estimated");
        assert_eq!(
            e,
            BindEstimate {
                outer: 20,
                keys: 20,
                weighed: true,
                bound: Some(60),
                whole: 1_000_000,
            }
        );
        let shown = described(&p);
        assert!(
            shown.contains("estimated by the nodes' statistics: 20 row(s) of `t_order` holding 20 value(s) of `order_id`, then 60 row(s) of `t_item` by them, of 1000000 on its nodes"),
            "{shown}"
        );
        // 8,000 orders: bound, but too many to carry inside the statements: gathered.
        let p = join(8_000, "o.user_id = 5");
        assert!(matches!(p, Plan::Gather(_)), "{p:?}");
        assert!(copy_of(&p).bind.is_some(), "{p:?}");
        // 50,000 orders hold more values than a bound read takes: not bound. Their copy to
        // each node of the items (50,000 twice) is weighed against gathering the items.
        let p = join(50_000, "o.user_id = 5");
        let Plan::Shipped(sh) = &p else {
            panic!("{p:?}")
        };
        assert_eq!(
            sh.estimate,
            Some(super::super::gather::Estimate {
                ship: 100_000,
                gather: 500_000
            })
        );
        // Where no copy to each node is cheaper, gathered on one node, unbound.
        let p = join(400_000, "o.user_id = 5");
        assert!(copy_of(&p).bind.is_none(), "{p:?}");
        let shown = described(&p);
        assert!(
            shown.contains("not bound by its join's values: 400000 value(s) estimated, over 10000"),
            "{shown}"
        );
        // A range the statistics do not weigh: bound and spread as before, the estimate an
        // upper bound.
        let p = join(50_000, "o.user_id = 5 AND o.order_id > 7");
        assert!(matches!(p, Plan::Spread(_)), "{p:?}");
        let e = copy_of(&p).estimate.expect("estimated");
        assert!(!e.weighed && e.outer == 50_000, "{e:?}");
        let shown = described(&p);
        assert!(shown.contains("(at most: a conjunct"), "{shown}");
    }

    #[test]
    fn reads_seen_past_their_limits_are_not_tried_again() {
        let sql = "SELECT o.order_id, i.item_id FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = 5";
        let Plan::Spread(s) = super::super::tests::plan_of(sql) else {
            panic!("not spread")
        };
        let keys = s.gather.ships[0].bind.as_ref().expect("bound").keys.clone();
        let plan = |seen: &[String]| {
            super::super::tests::with_overflowed(seen, || super::super::tests::plan_of(sql))
        };
        // The rows seen past what travels: gathered, still bound.
        let p = plan(std::slice::from_ref(&s.read));
        assert!(
            matches!(&p, Plan::Gather(g) if g.ships[0].bind.is_some()),
            "{p:?}"
        );
        // The values seen past a read by keys: not bound either.
        let p = plan(&[s.read.clone(), keys]);
        let shown = described(&p);
        assert!(
            shown.contains("not bound by its join's values: its values' read returned more than 10000 at a recent execution"),
            "{shown}"
        );
    }
}
