//! The views the proxy keeps, as tools read their shape: `DESCRIBE v` and `SHOW [FULL]
//! COLUMNS FROM v` (the types MariaDB infers from the SELECT, asked of a node that holds
//! every table the view reads), their rows in `information_schema.TABLES` and `VIEWS`, and
//! `LOCK TABLES` of a view (`crate::plan::view_catalog`). What `mariadb-dump` asks of a
//! database with views.

use std::sync::Arc;

use mysql_common::constants::{ColumnFlags, ColumnType};
use mysql_common::packets::Column;
use mysql_common::value::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{Outcome, Session};
use crate::error::MyError;
use crate::exec::door::Door;
use crate::plan::view_catalog::{self, CatalogTable};
use crate::plan::views::View;
use crate::sql::write::quoted;

/// The temporary table a view's columns are described from, on a connection of its own.
const DESCRIBED: &str = "`__sp_view_columns`";

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// `sql` reading `information_schema.TABLES` or `VIEWS` with the kept views' rows
    /// beside the node's; `None` when it reads neither or no view is kept.
    pub(super) async fn catalog_with_views(
        &mut self,
        sql: &str,
    ) -> Result<Option<String>, MyError> {
        let kept = self.shared.views.load_full();
        if kept.is_empty() || !crate::sql::contains_ci(sql.as_bytes(), b"information_schema") {
            return Ok(None);
        }
        let reads = view_catalog::catalog_reads(sql, self.mode());
        if reads.is_empty() {
            return Ok(None);
        }
        let db = self.nodes.db().unwrap_or_default().to_string();
        let views = kept.all();
        let views: Vec<&View> = views.iter().map(|v| v.as_ref()).collect();
        let mut derived = Vec::new();
        for which in [CatalogTable::Tables, CatalogTable::Views] {
            if !reads.iter().any(|r| r.2 == which) {
                continue;
            }
            // The node's columns of the catalog table, in order (they differ by version),
            // read and kept as a table's columns are.
            let key = crate::shared::column_key(Some("information_schema"), which.name());
            let cols = match self.shared.columns.get(&key) {
                Some(cols) => cols,
                None => {
                    let topo = self.topo.clone();
                    let schema = Some("information_schema");
                    let cols =
                        crate::exec::columns::read(&mut self.nodes, &topo, schema, which.name())
                            .await?;
                    self.shared
                        .columns_store(schema, which.name(), cols.clone());
                    cols
                }
            };
            derived.push((
                which,
                view_catalog::with_view_rows(which, &cols, &views, &db),
            ));
        }
        let text = |w: CatalogTable| {
            derived
                .iter()
                .find(|d| d.0 == w)
                .map(|d| d.1.clone())
                .unwrap_or_default()
        };
        Ok(Some(view_catalog::rewrite(sql, &reads, &text)))
    }

    /// `LOCK TABLES` naming kept views, each view's item as locks of its tables.
    pub(super) fn locks_with_views(&self, sql: &str) -> Option<String> {
        let kept = self.shared.views.load();
        if kept.is_empty() {
            return None;
        }
        view_catalog::lock_views(sql, self.mode(), &kept)
    }

    /// `DESCRIBE v` or `SHOW COLUMNS FROM v` of a kept view asked to be prepared: refused
    /// with the reason (the node would not know the view).
    pub(super) fn prepared_view_columns(&self, sql: &str) -> Option<MyError> {
        let kept = self.shared.views.load();
        let first = crate::sql::first_word(sql)?;
        if kept.is_empty()
            || !["DESCRIBE", "DESC", "EXPLAIN", "SHOW"]
                .iter()
                .any(|w| first.eq_ignore_ascii_case(w))
        {
            return None;
        }
        let words = crate::sql::words(sql);
        let show = first.eq_ignore_ascii_case("SHOW");
        let columns = show && words.iter().any(|w| w == "columns" || w == "fields");
        // `DESCRIBE v [col]`, `DESCRIBE db.v [col]` (not `EXPLAIN SELECT ... FROM v`).
        let named_at = |i: usize| words.get(i).is_some_and(|w| kept.get(w).is_some());
        let describe = !show
            && words.len() <= 4
            && (named_at(1) || (named_at(2) && self.own_schema(words.get(1).map(String::as_str))));
        let view = words.iter().find(|w| kept.get(w).is_some())?;
        (columns || describe).then(|| {
            MyError::unsupported(format!(
                "shardproxy: the columns of `{view}`, a view it keeps, are shown to a text query, not a prepared statement"
            ))
        })
    }

    /// `SHOW [FULL] COLUMNS FROM v <tail>` of a kept view: its SELECT made into a temporary
    /// table, with no rows, on a node that holds every table it reads, on a connection of
    /// its own (reset after), and that table's columns shown with the client's LIKE or
    /// WHERE (`tail`). A view over tables no one node holds together is refused.
    pub(super) async fn view_columns(
        &mut self,
        view: Arc<View>,
        full: bool,
        tail: &str,
    ) -> Outcome {
        // The view's SELECT itself where it can take a LIMIT 0 (a column's DEFAULT shows as
        // it does for the view; a derived table's columns have none), else read as a
        // derived table.
        let source = view.source();
        let inner = source
            .strip_prefix('(')
            .and_then(|s| s.strip_suffix(')'))
            .unwrap_or(&source);
        let inner = self.expanded(inner)?.unwrap_or_else(|| inner.to_string());
        let limited = crate::sql::parse_in(&inner, view.mode).is_ok_and(|p| {
            matches!(&p.stmt, sqlparser::ast::Statement::Query(q)
                if q.limit_clause.is_none() && q.fetch.is_none() && q.locks.is_empty())
        });
        let read = if limited {
            format!("{inner} LIMIT 0")
        } else {
            format!("SELECT * FROM ({inner}) AS {} LIMIT 0", quoted(&view.name))
        };
        let topo = self.topo.clone();
        let parsed = crate::sql::parse_in(&read, self.mode()).map_err(MyError::unsupported)?;
        // The nodes that hold every table the SELECT reads (a WITH clause's names are none).
        let ctes = crate::plan::gather::cte_names(&parsed.stmt);
        let mut common: Option<Vec<usize>> = None;
        let _ = sqlparser::ast::visit_relations(&parsed.stmt, |name| {
            let table = crate::sql::table_name(name);
            if ctes.contains(&table.to_ascii_lowercase()) {
                return std::ops::ControlFlow::<()>::Continue(());
            }
            let held = topo.holders(&table);
            let now = match common.take() {
                None => held,
                Some(c) => c.into_iter().filter(|n| held.contains(n)).collect(),
            };
            common = Some(now);
            std::ops::ControlFlow::<()>::Continue(())
        });
        let node = match common {
            None => topo.default_node,
            Some(c) if c.contains(&topo.default_node) => topo.default_node,
            Some(c) => match c.first() {
                Some(n) => *n,
                None => return Err(super::views::refused_describe(&view.name)),
            },
        };
        let create = format!("CREATE TEMPORARY TABLE {DESCRIBED} AS {read}");
        let show = format!(
            "SHOW {}COLUMNS FROM {DESCRIBED} {tail}",
            if full { "FULL " } else { "" }
        );
        let drop = format!("DROP TEMPORARY TABLE IF EXISTS {DESCRIBED}");
        let rows = self
            .nodes
            .fetch_outside_all(node, &[drop.as_str(), create.as_str(), show.as_str()])
            .await?;
        let names: &[&str] = if full {
            &[
                "Field",
                "Type",
                "Collation",
                "Null",
                "Key",
                "Default",
                "Extra",
                "Privileges",
                "Comment",
            ]
        } else {
            &["Field", "Type", "Null", "Key", "Default", "Extra"]
        };
        let cols: Vec<Column> = names
            .iter()
            .map(|n| {
                // As MariaDB describes them: Type and Default are TEXT.
                let kind = if ["Type", "Default"].contains(n) {
                    ColumnType::MYSQL_TYPE_BLOB
                } else {
                    ColumnType::MYSQL_TYPE_VAR_STRING
                };
                let c = Column::new(kind)
                    .with_name(n.as_bytes())
                    .with_org_name(n.as_bytes())
                    .with_character_set(33)
                    .with_column_length(64 * 3);
                if ["Default", "Collation"].contains(n) {
                    c
                } else {
                    c.with_flags(ColumnFlags::NOT_NULL_FLAG)
                }
            })
            .collect();
        let rows: Vec<crate::merge::Row> = rows
            .into_iter()
            .map(|r| {
                r.into_iter()
                    .map(|v| match v {
                        Value::NULL => None,
                        v => Some(v),
                    })
                    .collect()
            })
            .collect();
        self.write_rows(&cols, &rows);
        Ok(())
    }
}
