//! Whether a query over sharded tables (with broadcast tables) answers correctly when each
//! node runs it over its own rows and the answers are merged at the top.
//!
//! That holds only when the top-level SELECT's rows partition over the nodes: every row comes
//! from one node's sharded rows. It fails when a sharded table is read only in a subquery
//! (`SELECT (SELECT COUNT(*) FROM t_order) FROM t_country` counts each node's rows alone), on
//! the NULL-extended side of an outer join whose other side is broadcast (each node
//! NULL-extends every broadcast row its own shard has no match for), in a derived table that
//! groups, limits or deduplicates (each node groups its own rows), in a WITH, or in a UNION.
//! Sharded tables read in subqueries are fine when the planner's links tie them to a top-level
//! one by equal shard keys (an equality, or `key IN (SELECT key ...)` as a conjunct of a
//! WHERE: the rows they need sit on the same node); the planner checks that.

use std::ops::ControlFlow;

use sqlparser::ast::{
    visit_relations, JoinOperator, Query, Select, SetExpr, TableFactor, TableWithJoins, Visit,
};

use crate::sql::table_name;

/// A sharded table read at the top level of the query: its name and alias.
pub type Anchor = (String, Option<String>);

/// The sharded tables the top-level rows come from, or why the query does not decompose.
/// `sharded`: is this (lower-cased) table placed on some nodes only?
pub fn anchors(q: &Query, sharded: &dyn Fn(&str) -> bool) -> Result<Vec<Anchor>, String> {
    if let Some(with) = &q.with {
        if reads_sharded(with, sharded) {
            return Err("a WITH over a sharded table".into());
        }
    }
    let mut out = Vec::new();
    match q.body.as_ref() {
        SetExpr::Select(s) => select_anchors(s, sharded, &mut out)?,
        body => {
            if reads_sharded(body, sharded) {
                return Err(
                    "UNION / INTERSECT / EXCEPT or a parenthesized query over a sharded table"
                        .into(),
                );
            }
        }
    }
    if out.is_empty() {
        return Err("a sharded table read only in a subquery".into());
    }
    Ok(out)
}

/// The tables (name, alias) in the outermost SELECT's FROM and its joins (nested joins
/// included, derived tables not).
pub fn top_tables(q: &Query) -> Vec<Anchor> {
    fn of(f: &TableFactor, out: &mut Vec<Anchor>) {
        match f {
            TableFactor::Table { name, alias, .. } => out.push((
                table_name(name),
                alias.as_ref().map(|a| a.name.value.clone()),
            )),
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => {
                of(&table_with_joins.relation, out);
                for j in &table_with_joins.joins {
                    of(&j.relation, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let SetExpr::Select(s) = q.body.as_ref() {
        for twj in &s.from {
            of(&twj.relation, &mut out);
            for j in &twj.joins {
                of(&j.relation, &mut out);
            }
        }
    }
    out
}

/// Does this part of the statement name a sharded table anywhere?
fn reads_sharded<V: Visit>(v: &V, sharded: &dyn Fn(&str) -> bool) -> bool {
    visit_relations(v, |name| {
        if sharded(&table_name(name)) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .is_break()
}

fn select_anchors(
    s: &Select,
    sharded: &dyn Fn(&str) -> bool,
    out: &mut Vec<Anchor>,
) -> Result<(), String> {
    for twj in &s.from {
        joined_anchors(twj, sharded, out)?;
    }
    Ok(())
}

/// The anchors of one FROM item and its joins; `Ok(true)` when it holds any.
fn joined_anchors(
    twj: &TableWithJoins,
    sharded: &dyn Fn(&str) -> bool,
    out: &mut Vec<Anchor>,
) -> Result<bool, String> {
    let mut left = factor_anchors(&twj.relation, sharded, out)?;
    for j in &twj.joins {
        let right = factor_anchors(&j.relation, sharded, out)?;
        use JoinOperator::*;
        let bad = match &j.join_operator {
            Left(_) | LeftOuter(_) | LeftSemi(_) | LeftAnti(_) | OuterApply => right && !left,
            Right(_) | RightOuter(_) | RightSemi(_) | RightAnti(_) => left && !right,
            FullOuter(_) => left || right,
            _ => false,
        };
        if bad {
            return Err(
                "a sharded table on the NULL-extended side of an outer join with a broadcast table"
                    .into(),
            );
        }
        left |= right;
    }
    Ok(left)
}

fn factor_anchors(
    f: &TableFactor,
    sharded: &dyn Fn(&str) -> bool,
    out: &mut Vec<Anchor>,
) -> Result<bool, String> {
    match f {
        TableFactor::Table { name, alias, .. } => {
            let t = table_name(name);
            if !sharded(&t) {
                return Ok(false);
            }
            out.push((t, alias.as_ref().map(|a| a.name.value.clone())));
            Ok(true)
        }
        TableFactor::Derived { subquery, .. } => {
            if !reads_sharded(subquery.as_ref(), sharded) {
                return Ok(false);
            }
            if !plain(subquery) {
                return Err(
                    "a derived table over a sharded table that groups, aggregates, deduplicates or limits"
                        .into(),
                );
            }
            let SetExpr::Select(s) = subquery.body.as_ref() else {
                return Err(
                    "a derived table over a sharded table that is not a plain SELECT".into(),
                );
            };
            let before = out.len();
            select_anchors(s, sharded, out)?;
            if out.len() == before {
                return Err("a sharded table read only in a subquery".into());
            }
            Ok(true)
        }
        TableFactor::NestedJoin {
            table_with_joins, ..
        } => joined_anchors(table_with_joins, sharded, out),
        other => {
            if reads_sharded(other, sharded) {
                Err("a sharded table inside this table expression".into())
            } else {
                Ok(false)
            }
        }
    }
}

/// A subquery whose rows are the union of what each node computes over its own rows: a
/// single SELECT without grouping, aggregates, DISTINCT, LIMIT or WITH.
fn plain(q: &Query) -> bool {
    super::uses::ungrouped_select(q)
        .is_some_and(|s| s.distinct.is_none() && !super::uses::has_aggregate(&s.projection))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::ast::Statement;
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::parser::Parser;

    fn check(sql: &str) -> Result<Vec<Anchor>, String> {
        let stmt = Parser::parse_sql(&MySqlDialect {}, sql)
            .expect("parses")
            .remove(0);
        let Statement::Query(q) = stmt else {
            panic!("not a query")
        };
        anchors(&q, &|t| t == "t_order" || t == "t_item")
    }

    #[test]
    fn top_level_sharded_tables_anchor() {
        let a = check("SELECT * FROM t_order o JOIN t_country c ON o.c = c.code").expect("ok");
        assert_eq!(a, vec![("t_order".to_string(), Some("o".to_string()))]);
        assert!(check("SELECT * FROM t_order o LEFT JOIN t_country c ON o.c = c.code").is_ok());
        assert!(check(
            "SELECT * FROM t_order o LEFT JOIN t_item i ON o.user_id = i.user_id JOIN t_country c ON c.code = o.c"
        )
        .is_ok());
        assert!(check("SELECT * FROM (SELECT * FROM t_order WHERE x > 1) d").is_ok());
        assert!(check("SELECT * FROM t_country c, t_order o WHERE c.code = o.c").is_ok());
    }

    #[test]
    fn what_each_node_cannot_answer_alone() {
        for sql in [
            "SELECT (SELECT COUNT(*) FROM t_order) FROM t_country",
            "SELECT * FROM t_country WHERE code IN (SELECT c FROM t_order)",
            "SELECT * FROM t_country WHERE NOT EXISTS (SELECT 1 FROM t_order)",
            "SELECT * FROM t_country c LEFT JOIN t_order o ON o.c = c.code",
            "SELECT * FROM t_order o RIGHT JOIN t_country c ON o.c = c.code",
            "SELECT * FROM t_country c LEFT JOIN (t_order o JOIN t_item i ON o.user_id = i.user_id) ON o.c = c.code",
            "SELECT * FROM (SELECT c, COUNT(*) n FROM t_order GROUP BY c) d",
            "SELECT * FROM (SELECT DISTINCT c FROM t_order) d",
            "SELECT * FROM (SELECT * FROM t_order LIMIT 3) d",
            "SELECT * FROM (SELECT SUM(a) s FROM t_order) d",
            "WITH x AS (SELECT * FROM t_order) SELECT * FROM x",
            "SELECT c FROM t_order UNION ALL SELECT code FROM t_country",
            "SELECT c FROM t_order UNION SELECT c FROM t_order",
        ] {
            assert!(check(sql).is_err(), "{sql} must not decompose");
        }
    }

    #[test]
    fn broadcast_only_parts_do_not_matter() {
        assert!(check(
            "SELECT * FROM t_order o WHERE o.c IN (SELECT code FROM t_country) AND EXISTS (SELECT 1 FROM t_country)"
        )
        .is_ok());
        assert!(check(
            "WITH x AS (SELECT code FROM t_country) SELECT * FROM t_order o JOIN x ON x.code = o.c"
        )
        .is_ok());
        assert!(check(
            "SELECT * FROM (SELECT code, COUNT(*) FROM t_country GROUP BY code) d, t_order"
        )
        .is_ok());
    }
}
