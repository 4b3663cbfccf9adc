//! Salted keys in the planner (`crate::routing::salt`): the salt column's values a WHERE pins
//! narrow a salted key's rows to their buckets' nodes.

use mysql_common::value::Value;
use sqlparser::ast::Expr;

use super::Planner;
use crate::config::TableRule;
use crate::sql::keys::where_keys;

impl Planner<'_> {
    /// The values `selection` pins the salt column of `table` to, when the table has salted
    /// keys (`None`: any value, or no salted key to narrow).
    pub(super) fn salt_values(
        &self,
        table: &str,
        alias: Option<&str>,
        selection: Option<&Expr>,
    ) -> Option<Vec<Value>> {
        let by = self.topo.table(table).and_then(TableRule::salt_column)?;
        let by = self.qualified(table, alias, by);
        where_keys(selection, &by, self.parsed, self.params)
    }
}
