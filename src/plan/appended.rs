//! Whether the rows a SELECT gets from several nodes answer it when appended, or need a
//! merge (and which clause says so).

use sqlparser::ast::{GroupByExpr, Query, SetExpr};

/// Why a SELECT whose rows come from several nodes cannot be answered by appending them.
pub(crate) fn needs_merge(q: &Query) -> Option<&'static str> {
    if q.order_by.is_some() {
        return Some("ORDER BY");
    }
    if q.limit_clause.is_some() || q.fetch.is_some() {
        return Some("LIMIT");
    }
    let s = match q.body.as_ref() {
        SetExpr::Select(s) => s,
        SetExpr::Query(inner) => return needs_merge(inner),
        SetExpr::SetOperation { .. } => return Some("UNION / INTERSECT / EXCEPT"),
        _ => return Some("this query form"),
    };
    if matches!(
        s.distinct,
        Some(sqlparser::ast::Distinct::Distinct | sqlparser::ast::Distinct::On(_))
    ) {
        return Some("DISTINCT");
    }
    match &s.group_by {
        GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty() => {}
        _ => return Some("GROUP BY"),
    }
    if s.having.is_some() {
        return Some("HAVING");
    }
    if s.into.is_some() {
        return Some("SELECT ... INTO");
    }
    if s.select_modifiers
        .as_ref()
        .is_some_and(|m| m.sql_calc_found_rows)
    {
        return Some("SQL_CALC_FOUND_ROWS");
    }
    if super::uses::has_aggregate(&s.projection) {
        return Some("an aggregate or window function");
    }
    None
}
