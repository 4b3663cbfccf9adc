//! Reads of `information_schema` about one table (what a dump or an ORM asks per table:
//! `... FROM information_schema.COLUMNS WHERE table_schema = DATABASE() AND table_name =
//! 't'`) go to a node that holds that table: the default node has no row for a `single`
//! table placed on another node, and a dump that finds none leaves the table's rows out.

use sqlparser::ast::{BinaryOperator, Expr, Query, SetExpr};

use super::Planner;

/// The columns that name a table in the `information_schema` tables tools read.
const TABLE_COLUMNS: [&str; 3] = ["table_name", "event_object_table", "referenced_table_name"];

impl Planner<'_> {
    /// Where a read of `information_schema` alone runs: a node of the table its WHERE names
    /// (`table_name = 't'`), else the default node. `None` when the statement reads anything
    /// else.
    pub(super) fn catalog_node(&self, q: &Query) -> Option<usize> {
        let mut only_catalog = true;
        let mut any = false;
        let _ = sqlparser::ast::visit_relations(self.stmt, |name| {
            any = true;
            let schema = crate::sql::schema_name(name);
            if !schema.is_some_and(|s| s.eq_ignore_ascii_case("information_schema")) {
                only_catalog = false;
                return std::ops::ControlFlow::Break(());
            }
            std::ops::ControlFlow::Continue(())
        });
        if !any || !only_catalog {
            return None;
        }
        let SetExpr::Select(s) = q.body.as_ref() else {
            return Some(self.topo.default_node);
        };
        let mut named = Vec::new();
        if let Some(w) = &s.selection {
            tables_named(w, self.parsed, self.params, &mut named);
        }
        // A table the rules place: a node that holds it (the default node when it is one).
        let node = named.iter().find_map(|t| {
            let nodes = self.topo.table(t)?.all_nodes(self.topo);
            Some(if nodes.contains(&self.topo.default_node) {
                self.topo.default_node
            } else {
                *nodes.first()?
            })
        });
        Some(node.unwrap_or(self.topo.default_node))
    }
}

/// The table names the conjuncts of `e` compare a table-name column with (`table_name =
/// 't'`), lower-cased.
pub fn tables_named(
    e: &Expr,
    parsed: &crate::sql::Parsed,
    params: &[mysql_common::value::Value],
    out: &mut Vec<String>,
) {
    match e {
        Expr::Nested(x) => tables_named(x, parsed, params, out),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            tables_named(left, parsed, params, out);
            tables_named(right, parsed, params, out);
        }
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => {
            for (col, value) in [(left, right), (right, left)] {
                let name = match col.as_ref() {
                    Expr::Identifier(i) => &i.value,
                    Expr::CompoundIdentifier(parts) => match parts.last() {
                        Some(i) => &i.value,
                        None => continue,
                    },
                    _ => continue,
                };
                if !TABLE_COLUMNS.iter().any(|c| name.eq_ignore_ascii_case(c)) {
                    continue;
                }
                let v = crate::sql::literal(value, parsed, params);
                if let Some(mysql_common::value::Value::Bytes(b)) = v {
                    out.push(String::from_utf8_lossy(&b).to_ascii_lowercase());
                }
            }
        }
        _ => {}
    }
}
