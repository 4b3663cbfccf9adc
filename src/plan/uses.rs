//! Which tables a statement reads, and the shard-key values each one's WHERE pins.

use std::ops::ControlFlow;

use mysql_common::value::Value;
use sqlparser::ast::{
    Expr, ObjectName, Select, SelectItem, Statement, TableFactor, Visit, Visitor,
};

use super::Planner;
use crate::sql::keys::where_keys;
use crate::sql::table_name;

/// One reference to a table in a statement.
#[derive(Debug, Clone)]
pub struct Use {
    /// Lower-cased table name.
    pub table: String,
    /// The key values its WHERE pins (`None`: any row).
    pub keys: Option<Vec<Value>>,
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
    /// Every relation name the statement mentions.
    all: Vec<String>,
}

impl Visitor for Collector<'_, '_> {
    type Break = ();

    fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<()> {
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
                    self.keyed.push(Use { table, keys });
                }
            }
        }
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
    let mut c = Collector {
        planner,
        keyed: Vec::new(),
        all: Vec::new(),
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
                keys: None,
            });
        }
    }
    uses
}

/// The uses other than the first one of `table` (the write target itself).
pub fn without_first(mut uses: Vec<Use>, table: &str) -> Vec<Use> {
    if let Some(i) = uses.iter().position(|u| u.table == table) {
        uses.remove(i);
    }
    uses
}

const AGGREGATES: &[&str] = &[
    "COUNT",
    "SUM",
    "MIN",
    "MAX",
    "AVG",
    "GROUP_CONCAT",
    "BIT_AND",
    "BIT_OR",
    "BIT_XOR",
    "STD",
    "STDDEV",
    "STDDEV_POP",
    "STDDEV_SAMP",
    "VARIANCE",
    "VAR_POP",
    "VAR_SAMP",
    "JSON_ARRAYAGG",
    "JSON_OBJECTAGG",
];

/// Does the projection compute an aggregate or a window function (outside subqueries)?
pub fn has_aggregate(projection: &[SelectItem]) -> bool {
    struct Finder {
        depth: usize,
        found: bool,
    }
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_query(&mut self, _q: &sqlparser::ast::Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _q: &sqlparser::ast::Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if self.depth == 0 {
                if let Expr::Function(f) = e {
                    let name = table_name(&f.name).to_ascii_uppercase();
                    if f.over.is_some() || AGGREGATES.contains(&name.as_str()) {
                        self.found = true;
                        return ControlFlow::Break(());
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut f = Finder {
        depth: 0,
        found: false,
    };
    for item in projection {
        let _ = item.visit(&mut f);
        if f.found {
            return true;
        }
    }
    false
}
