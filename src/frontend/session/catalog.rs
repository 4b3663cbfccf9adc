//! The proxy's own answers about the database as a whole: `SHOW [FULL] TABLES` and `SHOW
//! TABLE STATUS` list every table once, whichever nodes hold it (a `single` table on another
//! node than the default, a table only the rules' nodes have), with the views the proxy
//! keeps. Each node answers the client's own statement (its LIKE or WHERE filters there) and
//! the answers are united by name, in name order, as one server lists them; a sharded
//! table's status is summed over its nodes.

use std::collections::HashSet;
use std::sync::Arc;

use mysql_common::packets::Column;
use mysql_common::value::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::views::name_at;
use super::{Outcome, Session};
use crate::error::MyError;
use crate::exec::door::{Access, Sink};
use crate::merge::Row;
use crate::plan::{Plan, Target};
use crate::sql::lex::{Kind, Mode};

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// `SHOW [FULL] TABLES [FROM db] [LIKE 'p' | WHERE ...]` of the session's database,
    /// answered over every node; `None` for any other `SHOW`.
    pub(super) async fn show_tables(&mut self, sql: &str) -> Option<Outcome> {
        let mode = self.mode();
        let toks = crate::sql::lex::statement_tokens(sql, mode);
        let toks: &[crate::sql::lex::Tok] = &toks;
        let is = |i: usize, w: &str| toks.get(i).is_some_and(|t| t.is(sql, w));
        if !is(0, "SHOW") {
            return None;
        }
        if let Some((schema, name)) = crate::plan::show_index_table(sql, mode) {
            if !self.own_schema(schema.as_deref()) {
                return None;
            }
            return self.show_index(sql, &name).await;
        }
        let full = is(1, "FULL");
        let status = is(1, "TABLE") && is(2, "STATUS");
        let mut i = if status { 3 } else { usize::from(full) + 1 };
        if !status {
            if !is(i, "TABLES") {
                return None;
            }
            i += 1;
        }
        if is(i, "FROM") || is(i, "IN") {
            let db = toks.get(i + 1)?;
            let (_, db) = name_at(sql, std::slice::from_ref(db), 0)?;
            if !self.own_schema(Some(&db)) {
                return None;
            }
            i += 2;
        }
        let pattern = if is(i, "LIKE") {
            let t = toks.get(i + 1).filter(|t| t.kind == Kind::Str)?;
            i += 2;
            Some(string_value(t.text(sql), mode)?)
        } else {
            None
        };
        // A WHERE filters each node's rows; the views are listed only without one.
        let filtered = is(i, "WHERE");
        if i != toks.len() && !filtered {
            return None;
        }
        if status {
            return Some(
                self.status_everywhere(sql, pattern.as_deref(), filtered)
                    .await,
            );
        }
        Some(
            self.tables_everywhere(sql, full, pattern.as_deref(), filtered)
                .await,
        )
    }

    /// `SELECT <columns> FROM information_schema.<TABLES, COLUMNS, STATISTICS, ...> [WHERE
    /// ...] [ORDER BY ...]` naming no table in its WHERE (a listing: one naming a table runs
    /// where that table is, `crate::plan::catalog`): run on every node, a row per table (per
    /// column, index part, ...) as its table's rule places it, TABLES' counts and sizes
    /// summed where it is sharded. `None` for any other statement; 1235 for a listing of a
    /// form the proxy cannot merge (joins, grouping, LIMIT, subqueries, expressions). Of
    /// `SELECT`s only.
    pub(super) async fn tables_listing(&mut self, sql: &str) -> Option<Outcome> {
        if !crate::sql::contains_ci(sql.as_bytes(), b"information_schema") {
            return None;
        }
        let parsed = crate::sql::parse_in(sql, self.mode()).ok()?;
        let listing = listing_of(&parsed)?;
        let (catalog, order) = match listing {
            Ok(l) => l,
            Err(why) => {
                return Some(Err(MyError::unsupported(format!(
                    "shardproxy: a listing of information_schema {why}: the nodes' rows cannot be merged into one database's"
                ))))
            }
        };
        Some(self.merged_listing(sql, catalog, &order).await)
    }

    /// A listing of information_schema (as [`Self::tables_listing`] answers) asked to be
    /// prepared: refused with the reason, since one node's answer would leave tables out.
    pub(super) fn prepared_listing(&self, sql: &str) -> Option<MyError> {
        if !crate::sql::contains_ci(sql.as_bytes(), b"information_schema") {
            return None;
        }
        let parsed = crate::sql::parse_in(sql, self.mode()).ok()?;
        let _listing = listing_of(&parsed)?;
        Some(MyError::unsupported(
            "shardproxy: a listing of information_schema over every node is answered to a text query, not a prepared statement (one node's answer would leave tables out)",
        ))
    }

    async fn merged_listing(
        &mut self,
        sql: &str,
        catalog: &Catalog,
        order: &[(ListKey, bool)],
    ) -> Outcome {
        let topo = self.topo.clone();
        let db = self.nodes.db().unwrap_or_default().to_string();
        // Each row's schema and table, as two columns after the client's.
        let text = crate::sql::text::Text::new(sql, self.mode()).map_err(MyError::unsupported)?;
        let select = text.toks.first().map_or(0, |t| t.start);
        let end = text
            .clauses(select)
            .map_err(MyError::unsupported)?
            .projection
            .1;
        // Then the columns the ORDER BY names (selected or not), to sort by.
        let sort_names: Vec<&str> = order
            .iter()
            .filter_map(|(k, _)| match k {
                ListKey::Name(n) => Some(n.as_str()),
                ListKey::Position(_) => None,
            })
            .collect();
        let mut hidden: Vec<String> = catalog
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| format!(", {k} AS __sp_k{i}"))
            .collect();
        for (i, n) in sort_names.iter().enumerate() {
            hidden.push(format!(", {} AS __sp_o{i}", crate::sql::write::quoted(n)));
        }
        let node_sql = format!("{}{}{}", &sql[..end], hidden.concat(), &sql[end..]);
        let node_sql = self
            .catalog_with_views(&node_sql)
            .await?
            .unwrap_or(node_sql);
        let (all_cols, answers) = self.on_every_node(&node_sql).await?;
        let extra = catalog.keys.len() + sort_names.len();
        let visible = all_cols.len().saturating_sub(extra);
        let keys_end = visible + catalog.keys.len();
        let (schema, table) = (visible, visible + 1);
        let cols: Arc<[Column]> = all_cols[..visible].to_vec().into();
        let by_org = |name: &str| {
            cols.iter()
                .position(|c| c.org_name_str().eq_ignore_ascii_case(name))
        };
        let text = |r: &Row, i: usize| match r.get(i) {
            Some(Some(Value::Bytes(b))) => b.clone(),
            _ => Vec::new(),
        };
        let key = |r: &Row| joined(r, visible..keys_end);
        // The session's database: a row per key by its table's rule. Other schemas (mysql,
        // information_schema): the same on every node, the first node's row.
        let (mut ours, mut others): (Vec<(usize, Vec<Row>)>, Vec<Row>) = (Vec::new(), Vec::new());
        let mut seen = HashSet::new();
        for (node, rows) in answers {
            let mut mine = Vec::new();
            for r in rows {
                if String::from_utf8_lossy(&text(&r, schema)).eq_ignore_ascii_case(&db) {
                    if !internal(&text(&r, table)) {
                        mine.push(r);
                    }
                } else if seen.insert(key(&r)) {
                    others.push(r);
                }
            }
            ours.push((node, mine));
        }
        let at = |n: &str| by_org(if n == "Rows" { "TABLE_ROWS" } else { n });
        let table_of = |r: &Row| String::from_utf8_lossy(&text(r, table)).to_ascii_lowercase();
        let sum: Option<&ColumnAt> = catalog.sums.then_some(&at);
        let mut rows = combined(&topo, ours, &key, &table_of, sum);
        rows.append(&mut others);
        if !order.is_empty() {
            let mut keys = Vec::with_capacity(order.len());
            let mut named = keys_end;
            for (key, desc) in order {
                let index = match key {
                    ListKey::Position(p) => p.checked_sub(1).filter(|i| *i < visible),
                    ListKey::Name(_) => {
                        named += 1;
                        Some(named - 1)
                    }
                };
                let Some(index) = index else {
                    return Err(MyError::unsupported(
                        "shardproxy: a listing of information_schema ordered by a position it does not have",
                    ));
                };
                keys.push(crate::merge::SortKey {
                    index,
                    desc: *desc,
                    fixed: true,
                });
            }
            let classes = crate::merge::classes(&all_cols);
            rows.sort_by(|a, b| crate::merge::cmp_rows(a, b, &keys, &classes));
        }
        for r in &mut rows {
            r.truncate(visible);
        }
        self.write_rows(&cols, &rows);
        Ok(())
    }

    /// `sql` on every node, the default node first: its answer's columns, and each node's
    /// rows.
    pub(super) async fn on_every_node(
        &mut self,
        sql: &str,
    ) -> Result<(Arc<[Column]>, Vec<(usize, Vec<Row>)>), MyError> {
        let nodes = self.topo.all_nodes();
        self.on_nodes(sql, nodes).await
    }

    /// `sql` on each of `nodes`, the default node first: as [`Self::on_every_node`].
    pub(super) async fn on_nodes(
        &mut self,
        sql: &str,
        mut nodes: Vec<usize>,
    ) -> Result<(Arc<[Column]>, Vec<(usize, Vec<Row>)>), MyError> {
        let topo = self.topo.clone();
        nodes.sort_by_key(|n| (*n != topo.default_node, *n));
        let mut cols = None;
        let mut answers = Vec::with_capacity(nodes.len());
        for node in nodes {
            let plan = Plan::Route(Target {
                node,
                sql: sql.to_string(),
                params: Vec::new(),
            });
            let mut out = crate::exec::collect::Collect::new(u64::MAX);
            crate::exec::run(&plan, &topo, Access::Read, &mut self.nodes, &mut out).await?;
            if out.over || out.bad {
                return Err(MyError::internal(format!(
                    "shardproxy: `{}` gave no whole answer on {}",
                    sql.trim(),
                    topo.node_name(node)
                )));
            }
            if cols.is_none() {
                cols = out.cols;
            }
            answers.push((node, out.rows));
        }
        let cols = cols.ok_or_else(|| MyError::internal("shardproxy: no node answered"))?;
        Ok((cols, answers))
    }

    /// `SHOW TABLE STATUS`: one row per table, as its rule places it: a sharded table's
    /// rows and sizes summed over its nodes, a broadcast table's from one copy, a `single`
    /// table's from its node, any other table's from the default node (or the node that
    /// has it); the kept views as MariaDB lists views.
    async fn status_everywhere(
        &mut self,
        sql: &str,
        pattern: Option<&str>,
        filtered: bool,
    ) -> Outcome {
        let topo = self.topo.clone();
        let (cols, answers) = self.on_every_node(sql).await?;
        let at = |name: &str| {
            cols.iter()
                .position(|c| c.name_str().eq_ignore_ascii_case(name))
        };
        let mut out = per_table(&topo, answers, &first_bytes, &at);
        out.retain(|r| !internal(&first_bytes(r)));
        if !filtered {
            for v in self.shared.views.load().all() {
                if pattern.is_some_and(|p| !like(v.name.as_bytes(), p.as_bytes()))
                    || out.iter().any(|r| first_bytes(r) == v.name.as_bytes())
                {
                    continue;
                }
                let mut row: Row = vec![None; cols.len()];
                row[0] = Some(Value::Bytes(v.name.clone().into_bytes()));
                if let Some(c) = at("Comment") {
                    row[c] = Some(Value::Bytes(b"VIEW".to_vec()));
                }
                out.push(row);
            }
        }
        out.sort_by_key(first_bytes);
        self.write_rows(&cols, &out);
        Ok(())
    }

    /// `SHOW INDEX FROM t [...]` of a table on several nodes: each node's rows united by
    /// index and column position, its `Cardinality` summed as `SHOW TABLE STATUS` sums
    /// rows; `None` for a table on one node (it runs there, `crate::plan`).
    async fn show_index(&mut self, sql: &str, table: &str) -> Option<Outcome> {
        let topo = self.topo.clone();
        let rule = topo.table(table)?;
        let held = rule.all_nodes(&topo);
        if held.len() < 2 || matches!(rule, crate::routing::TableRule::Broadcast) {
            return None;
        }
        let out = async {
            let (cols, answers) = self.on_nodes(sql, held).await?;
            let at = |name: &str| {
                cols.iter()
                    .position(|c| c.name_str().eq_ignore_ascii_case(name))
            };
            let (Some(key), Some(seq)) = (at("Key_name"), at("Seq_in_index")) else {
                return Err(MyError::internal(
                    "shardproxy: SHOW INDEX answered without Key_name and Seq_in_index",
                ));
            };
            let id = |r: &Row| joined(r, [key, seq]);
            let rows = combined(
                &topo,
                answers,
                &id,
                &|_| table.to_ascii_lowercase(),
                Some(&at),
            );
            self.write_rows(&cols, &rows);
            Ok(())
        }
        .await;
        Some(out)
    }

    pub(super) fn write_rows(&mut self, cols: &[Column], rows: &[Row]) {
        let status = self.status();
        let (_, mut sink) = self.sink(false);
        sink.columns(cols, status);
        for r in rows {
            sink.row(r, cols);
        }
        sink.end(status, 0, false);
    }

    async fn tables_everywhere(
        &mut self,
        sql: &str,
        full: bool,
        pattern: Option<&str>,
        filtered: bool,
    ) -> Outcome {
        // The default node first: its column names (`Tables_in_<its database>`) stand.
        let (cols, answers) = self.on_every_node(sql).await?;
        // A table missing on some of its rule's nodes is a fault ops must see.
        let have: Vec<(usize, Vec<String>)> = answers
            .iter()
            .map(|(n, rows)| {
                let names = rows
                    .iter()
                    .map(|r| String::from_utf8_lossy(&first_bytes(r)).into_owned())
                    .filter(|t| !crate::exec::proxy_table(t))
                    .collect();
                (*n, names)
            })
            .collect();
        for fault in crate::config::misplaced(&self.topo, &have) {
            tracing::warn!(conn = self.conn_id, "{fault}");
        }
        let mut seen = HashSet::new();
        let mut rows: Vec<Row> = answers
            .into_iter()
            .flat_map(|(_, rows)| rows)
            .filter(|r| {
                let name = first_bytes(r);
                !internal(&name) && seen.insert(name)
            })
            .collect();
        if !filtered {
            for v in self.shared.views.load().all() {
                if pattern.is_some_and(|p| !like(v.name.as_bytes(), p.as_bytes()))
                    || !seen.insert(v.name.as_bytes().to_vec())
                {
                    continue;
                }
                let mut row = vec![Some(Value::Bytes(v.name.clone().into_bytes()))];
                if full {
                    row.push(Some(Value::Bytes(b"VIEW".to_vec())));
                }
                if row.len() == cols.len() {
                    rows.push(row);
                }
            }
        }
        rows.sort_by_key(first_bytes);
        self.write_rows(&cols, &rows);
        Ok(())
    }
}

/// One row per table from every node's rows about tables (`name` tells a row's table), as
/// its rule places it: a sharded table's counts and sizes summed over its nodes
/// ([`summed`]), a broadcast table's from one copy, a `single` table's from its node, any
/// other table's from the default node (or the node that has it). In the order tables first
/// appear, the default node's first.
pub(super) fn per_table(
    topo: &crate::config::Topology,
    answers: Vec<(usize, Vec<Row>)>,
    name: &dyn Fn(&Row) -> Vec<u8>,
    at: &dyn Fn(&str) -> Option<usize>,
) -> Vec<Row> {
    let table = |r: &Row| String::from_utf8_lossy(&name(r)).to_ascii_lowercase();
    combined(topo, answers, name, &table, Some(at))
}

/// One row per `key` from every node's rows, as the rule of the row's table (`table`) places
/// it: a `single` table's from its node, a sharded or broadcast table's from the default node
/// when it holds the table (else the first node that does), summed over its nodes where `sum`
/// names the status columns to add; any other table's from the default node (or the node
/// that has it). In the order keys first appear, the default node's first.
fn combined(
    topo: &crate::config::Topology,
    answers: Vec<(usize, Vec<Row>)>,
    key: &dyn Fn(&Row) -> Vec<u8>,
    table: &dyn Fn(&Row) -> String,
    sum: Option<&ColumnAt>,
) -> Vec<Row> {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut by_key: std::collections::HashMap<Vec<u8>, Vec<(usize, Row)>> = Default::default();
    for (node, rows) in answers {
        for r in rows {
            let k = key(&r);
            if !by_key.contains_key(&k) {
                keys.push(k.clone());
            }
            by_key.entry(k).or_default().push((node, r));
        }
    }
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        let Some(found) = by_key.remove(&k) else {
            continue;
        };
        let Some(t) = found.first().map(|f| table(&f.1)) else {
            continue;
        };
        let row = match (topo.table(&t), sum) {
            (Some(crate::routing::TableRule::Single { node }), _) => pick(found, |n| n == *node),
            (Some(crate::routing::TableRule::Broadcast), _) | (Some(_), None) => {
                pick(found, |n| n == topo.default_node)
            }
            (Some(rule), Some(at)) => {
                let held = rule.all_nodes(topo);
                let parts: Vec<Row> = found
                    .into_iter()
                    .filter(|(node, _)| held.contains(node))
                    .map(|f| f.1)
                    .collect();
                summed(parts, at)
            }
            (None, _) => pick(found, |n| n == topo.default_node),
        };
        out.extend(row);
    }
    out
}

/// Where a status column (by its `SHOW TABLE STATUS` name) is in a row.
type ColumnAt<'a> = dyn Fn(&str) -> Option<usize> + 'a;

/// A key of a listing's ORDER BY: a select-list position or a column's name.
pub(super) enum ListKey {
    Position(usize),
    Name(String),
}

/// An `information_schema` table a listing may read: its name, the columns that tell its
/// rows apart (the schema's and the table's first), and whether its rows carry counts to add
/// up over a sharded table's nodes (TABLES' rows and sizes, STATISTICS' cardinality).
pub(super) struct Catalog {
    name: &'static str,
    keys: &'static [&'static str],
    sums: bool,
}

const CATALOGS: [Catalog; 9] = [
    Catalog {
        name: "tables",
        keys: &["TABLE_SCHEMA", "TABLE_NAME"],
        sums: true,
    },
    Catalog {
        name: "columns",
        keys: &["TABLE_SCHEMA", "TABLE_NAME", "COLUMN_NAME"],
        sums: false,
    },
    Catalog {
        name: "statistics",
        keys: &["TABLE_SCHEMA", "TABLE_NAME", "INDEX_NAME", "SEQ_IN_INDEX"],
        sums: true,
    },
    Catalog {
        name: "key_column_usage",
        keys: &[
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "CONSTRAINT_NAME",
            "COLUMN_NAME",
        ],
        sums: false,
    },
    Catalog {
        name: "table_constraints",
        keys: &["TABLE_SCHEMA", "TABLE_NAME", "CONSTRAINT_NAME"],
        sums: false,
    },
    Catalog {
        name: "referential_constraints",
        keys: &["CONSTRAINT_SCHEMA", "TABLE_NAME", "CONSTRAINT_NAME"],
        sums: false,
    },
    Catalog {
        name: "triggers",
        keys: &["EVENT_OBJECT_SCHEMA", "EVENT_OBJECT_TABLE", "TRIGGER_NAME"],
        sums: false,
    },
    Catalog {
        name: "views",
        keys: &["TABLE_SCHEMA", "TABLE_NAME"],
        sums: false,
    },
    // A routine is no table: its row from the default node, else the first node that has
    // it (a procedure created on one node only is listed once all the same).
    Catalog {
        name: "routines",
        keys: &["ROUTINE_SCHEMA", "ROUTINE_NAME", "ROUTINE_TYPE"],
        sums: false,
    },
];

/// A listing's ORDER BY.
type Order = Vec<(ListKey, bool)>;

/// Whether `parsed` lists one of [`CATALOGS`] without naming a table: `None` when it is not
/// such a listing; `Some(Err(why))` when it is one the proxy cannot merge; else which, and
/// its ORDER BY.
fn listing_of(
    parsed: &crate::sql::Parsed,
) -> Option<Result<(&'static Catalog, Order), &'static str>> {
    use sqlparser::ast::{
        Expr, GroupByExpr, OrderByKind, SelectItem, SetExpr, Statement, TableFactor,
    };
    let Statement::Query(q) = &parsed.stmt else {
        return None;
    };
    let SetExpr::Select(s) = q.body.as_ref() else {
        return None;
    };
    let [from] = s.from.as_slice() else {
        return None;
    };
    let TableFactor::Table { name, .. } = &from.relation else {
        return None;
    };
    let schema = crate::sql::schema_name(name);
    if !schema.is_some_and(|x| x.eq_ignore_ascii_case("information_schema")) {
        return None;
    }
    let table = crate::sql::table_name(name);
    let catalog = CATALOGS.iter().find(|c| c.name == table)?;
    if let Some(w) = &s.selection {
        let mut named = Vec::new();
        crate::plan::catalog::tables_named(w, parsed, &[], &mut named);
        if !named.is_empty() {
            return None;
        }
    }
    struct Queries(usize);
    impl sqlparser::ast::Visitor for Queries {
        type Break = ();
        fn pre_visit_query(&mut self, _: &sqlparser::ast::Query) -> std::ops::ControlFlow<()> {
            self.0 += 1;
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut queries = Queries(0);
    let _ = sqlparser::ast::Visit::visit(&parsed.stmt, &mut queries);
    let queries = queries.0 - 1;
    let grouped = !matches!(&s.group_by, GroupByExpr::Expressions(e, _) if e.is_empty());
    let plain = s.projection.iter().all(|i| match i {
        SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => true,
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
            matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_))
        }
        _ => false,
    });
    let why = if !from.joins.is_empty() || q.with.is_some() || queries > 0 {
        Some("with joins or subqueries")
    } else if grouped || s.having.is_some() || s.distinct.is_some() || !plain {
        Some("with expressions, aggregates, grouping or DISTINCT")
    } else if q.limit_clause.is_some() || q.fetch.is_some() {
        Some("with LIMIT")
    } else {
        None
    };
    if let Some(why) = why {
        return Some(Err(why));
    }
    let mut order = Vec::new();
    if let Some(ob) = &q.order_by {
        let OrderByKind::Expressions(exprs) = &ob.kind else {
            return Some(Err("with ORDER BY ALL"));
        };
        for o in exprs {
            let desc = matches!(o.options.sort, Some(sqlparser::ast::OrderBySort::Desc));
            let alias_at = |name: &str| {
                s.projection.iter().position(|i| {
                    matches!(i, SelectItem::ExprWithAlias { alias, .. } if alias.value.eq_ignore_ascii_case(name))
                })
            };
            let key = match &o.expr {
                Expr::Identifier(i) => match alias_at(&i.value) {
                    Some(p) => ListKey::Position(p + 1),
                    None => ListKey::Name(i.value.clone()),
                },
                Expr::CompoundIdentifier(p) => match p.last() {
                    Some(i) => ListKey::Name(i.value.clone()),
                    None => return Some(Err("ordered by an expression")),
                },
                Expr::Value(v) => match &v.value {
                    sqlparser::ast::Value::Number(n, _) => match n.parse() {
                        Ok(p) => ListKey::Position(p),
                        Err(_) => return Some(Err("ordered by an expression")),
                    },
                    _ => return Some(Err("ordered by an expression")),
                },
                _ => return Some(Err("ordered by an expression")),
            };
            order.push((key, desc));
        }
    }
    Some(Ok((catalog, order)))
}

/// Whether a table is one the proxy keeps for itself (`crate::exec::proxy_table`): no
/// listing shows it (a dump would carry it, a migration tool would drop it).
fn internal(name: &[u8]) -> bool {
    std::str::from_utf8(name).is_ok_and(crate::exec::proxy_table)
}

/// The text of a row's columns at `at`, each ended by a 0 byte: a key telling rows apart.
fn joined(r: &Row, at: impl IntoIterator<Item = usize>) -> Vec<u8> {
    let mut k = Vec::new();
    for i in at {
        if let Some(Some(Value::Bytes(b))) = r.get(i) {
            k.extend_from_slice(b);
        }
        k.push(0);
    }
    k
}

/// The first column's bytes (a table's name).
fn first_bytes(r: &Row) -> Vec<u8> {
    match r.first() {
        Some(Some(Value::Bytes(b))) => b.clone(),
        _ => Vec::new(),
    }
}

/// The row of the node `wanted` says, else the first.
fn pick(found: Vec<(usize, Row)>, wanted: impl Fn(usize) -> bool) -> Option<Row> {
    let mut first = None;
    for (node, row) in found {
        if wanted(node) {
            return Some(row);
        }
        first.get_or_insert(row);
    }
    first
}

/// One status row of a table from its nodes' rows: counts and sizes summed, the average row
/// length recomputed, the next AUTO_INCREMENT the highest, times the earliest creation and
/// the latest update; the rest the first node's.
fn summed(parts: Vec<Row>, at: &dyn Fn(&str) -> Option<usize>) -> Option<Row> {
    let mut it = parts.into_iter();
    let mut out = it.next()?;
    let num = |r: &Row, i: usize| -> Option<u64> {
        match r.get(i) {
            Some(Some(Value::Bytes(b))) => std::str::from_utf8(b).ok()?.parse().ok(),
            Some(Some(Value::UInt(u))) => Some(*u),
            Some(Some(Value::Int(i))) => u64::try_from(*i).ok(),
            _ => None,
        }
    };
    let put = |r: &mut Row, i: usize, v: u64| r[i] = Some(Value::Bytes(v.to_string().into_bytes()));
    for r in it {
        for name in [
            "Rows",
            "Data_length",
            "Index_length",
            "Data_free",
            "Max_index_length",
            // An index's distinct values: exact for a unique key (and one led by the shard
            // key), an upper bound for others, as one server's estimate is an estimate.
            "Cardinality",
        ] {
            if let Some(i) = at(name) {
                if let (Some(a), Some(b)) = (num(&out, i), num(&r, i)) {
                    put(&mut out, i, a.saturating_add(b));
                }
            }
        }
        if let Some(i) = at("Auto_increment") {
            if let Some(b) = num(&r, i) {
                if num(&out, i).is_none_or(|a| b > a) {
                    put(&mut out, i, b);
                }
            }
        }
        for (name, later) in [("Create_time", false), ("Update_time", true)] {
            if let Some(i) = at(name) {
                let (a, b) = (out[i].clone(), r.get(i).cloned().flatten());
                let take = match (&a, &b) {
                    (None, Some(_)) => true,
                    (Some(Value::Bytes(x)), Some(Value::Bytes(y))) => (y > x) == later && y != x,
                    _ => false,
                };
                if take {
                    out[i] = b;
                }
            }
        }
    }
    if let (Some(rows), Some(data), Some(avg)) =
        (at("Rows"), at("Data_length"), at("Avg_row_length"))
    {
        if let (Some(n), Some(d)) = (num(&out, rows), num(&out, data)) {
            put(&mut out, avg, d.checked_div(n).unwrap_or(0));
        }
    }
    Some(out)
}

/// The value of a string literal token (quotes off, escapes read as `mode` reads them).
fn string_value(text: &str, mode: Mode) -> Option<String> {
    let q = text.chars().next()?;
    let inner = text.get(1..text.len().checked_sub(1)?)?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && !mode.no_backslash_escapes {
            match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                '0' => out.push('\0'),
                // `\%` and `\_` stay escaped for LIKE.
                e @ ('%' | '_') => {
                    out.push('\\');
                    out.push(e);
                }
                e => out.push(e),
            }
        } else if c == q && chars.peek() == Some(&q) {
            chars.next();
            out.push(q);
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// SQL LIKE, case-sensitive as MariaDB matches table names (`lower_case_table_names=0`):
/// `%` any run, `_` one character, `\` escapes.
fn like(s: &[u8], p: &[u8]) -> bool {
    let s = String::from_utf8_lossy(s).chars().collect::<Vec<_>>();
    let p = String::from_utf8_lossy(p).chars().collect::<Vec<_>>();
    fn go(s: &[char], p: &[char]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some('%') => (0..=s.len()).any(|i| go(&s[i..], &p[1..])),
            Some('_') => !s.is_empty() && go(&s[1..], &p[1..]),
            Some('\\') if p.len() > 1 => s.first() == Some(&p[1]) && go(&s[1..], &p[2..]),
            Some(c) => s.first() == Some(c) && go(&s[1..], &p[1..]),
        }
    }
    go(&s, &p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_matches_as_show_tables_does() {
        assert!(like(b"v_orders", b"v\\_%"));
        assert!(!like(b"vxorders", b"v\\_%"));
        assert!(like(b"abc", b"a_c"));
        assert!(!like(b"Abc", b"a%"));
        assert!(like(b"", b"%"));
    }

    #[test]
    fn string_values_keep_like_escapes() {
        assert_eq!(
            string_value("'v\\_%'", Mode::default()).as_deref(),
            Some("v\\_%")
        );
        assert_eq!(
            string_value("'it''s'", Mode::default()).as_deref(),
            Some("it's")
        );
    }
}
