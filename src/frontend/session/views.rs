//! Views the proxy keeps (`crate::plan::views`), as a client meets them: `CREATE [OR
//! REPLACE] VIEW`, `ALTER VIEW` and `DROP VIEW` of a view over tables the rules place,
//! written to the metadata schema; `SHOW CREATE VIEW` (and `SHOW CREATE TABLE`) of one;
//! `SHOW [FULL] TABLES` listing them beside the default node's tables; and every other
//! statement read with its views expanded. A view over tables the rules do not name lives on
//! the default node as before.

use mysql_common::constants::{ColumnFlags, ColumnType};
use mysql_common::packets::Column;
use mysql_common::value::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{Outcome, Session};
use crate::error::MyError;
use crate::exec::door::{Access, Sink};
use crate::exec::txn::Transactions;
use crate::metadata::views as stored;
use crate::plan::views::{self, View, ViewDdl, ER_VIEW_SELECT_VARIABLE};
use crate::plan::{Plan, Target};
use crate::sql::lex::{Kind, Mode};
use crate::sql::write::quoted;

const ER_TABLE_EXISTS: u16 = 1050;
const ER_NO_SUCH_TABLE: u16 = 1146;
const ER_DUP_FIELDNAME: u16 = 1060;
const ER_VIEW_WRONG_LIST: u16 = 1353;
const ER_UNKNOWN_VIEW: u16 = 4092;
/// MariaDB's error for a WITH column list of another length than its SELECT's.
const ER_WITH_COL_WRONG_LIST: u16 = 4002;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// `sql` with the views it reads expanded; `None` when it names none.
    pub(super) fn expanded(&self, sql: &str) -> Result<Option<String>, MyError> {
        let views = self.shared.views.load();
        if views.is_empty() {
            return Ok(None);
        }
        views::expand(sql, self.mode(), &views, self.nodes.db())
            .map_err(|r| MyError::new(r.code, r.message))
    }

    /// A statement about views the proxy keeps, answered; `None` for any other. `first`:
    /// its first word.
    pub(super) async fn view_statement(&mut self, sql: &str, first: &str) -> Option<Outcome> {
        if first.eq_ignore_ascii_case("SHOW") {
            return self.show_views(sql).await;
        }
        if ["DESCRIBE", "DESC", "EXPLAIN"]
            .iter()
            .any(|w| first.eq_ignore_ascii_case(w))
        {
            return self.describe_view(sql).await;
        }
        if !["CREATE", "ALTER", "DROP"]
            .iter()
            .any(|w| first.eq_ignore_ascii_case(w))
        {
            return None;
        }
        // A dump's view, its clauses in executable comments, reads as the statement.
        let plain;
        let sql = if sql.contains("/*!") || sql.contains("/*M!") {
            plain = crate::sql::without_comments(sql, self.mode());
            plain.as_ref()
        } else {
            sql
        };
        let ddl = match views::ddl(sql, self.mode())? {
            Ok(d) => d,
            Err(why) if why == "variable" && self.keeps_view_named(sql) => {
                return Some(Err(MyError::new(
                    ER_VIEW_SELECT_VARIABLE,
                    "View's SELECT contains a variable or parameter",
                )))
            }
            // Malformed: the node's parser answers it.
            Err(_) => return None,
        };
        match ddl {
            ViewDdl::Create {
                view,
                schema,
                or_replace,
                if_not_exists,
                alter,
            } => {
                if !self.own_schema(schema.as_deref()) || !self.keeps(&view) {
                    return None;
                }
                Some(
                    self.create_view(*view, or_replace, if_not_exists, alter)
                        .await,
                )
            }
            ViewDdl::Drop { names, if_exists } => {
                let kept = self.shared.views.load();
                let (ours, others): (Vec<_>, Vec<_>) = names
                    .into_iter()
                    .partition(|(s, n)| self.own_schema(s.as_deref()) && kept.get(n).is_some());
                if ours.is_empty() {
                    return None;
                }
                Some(self.drop_views(ours, others, if_exists).await)
            }
        }
    }

    /// A kept connection to the metadata schema at `url`.
    async fn metadata_conn(&self, url: &str) -> Result<mysql_async::Conn, MyError> {
        self.shared.metadata_links.conn(url).await.map_err(failed)
    }

    /// Whether a qualified name's schema is the session's database.
    pub(super) fn own_schema(&self, schema: Option<&str>) -> bool {
        match (schema, self.nodes.db()) {
            (None, _) => true,
            (Some(s), Some(db)) => s.eq_ignore_ascii_case(db),
            (Some(_), None) => false,
        }
    }

    /// Whether the proxy keeps this view: it replaces one it keeps, or it reads a table the
    /// rules place (or a view the proxy keeps). A view over the default node's own tables
    /// lives there.
    fn keeps(&self, view: &View) -> bool {
        let kept = self.shared.views.load();
        // (A view named as a table the rules place: refused as MariaDB refuses it.)
        if kept.get(&view.name).is_some()
            || self
                .topo
                .tables
                .contains_key(&view.name.to_ascii_lowercase())
        {
            return true;
        }
        let Ok(body) = crate::sql::parse_in(&view.body, view.mode) else {
            return false;
        };
        let mut reads_placed = false;
        let _ = sqlparser::ast::visit_relations(&body.stmt, |name| {
            let t = crate::sql::table_name(name);
            if self.topo.tables.contains_key(&t) || kept.get(&t).is_some() {
                reads_placed = true;
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
        reads_placed
    }

    /// Whether `sql` (a malformed view statement) names a view the proxy keeps or would.
    fn keeps_view_named(&self, sql: &str) -> bool {
        let w = crate::sql::words(sql);
        let kept = self.shared.views.load();
        w.iter().any(|x| {
            self.topo.tables.contains_key(&x.to_ascii_lowercase()) || kept.get(x).is_some()
        })
    }

    async fn create_view(
        &mut self,
        mut view: View,
        or_replace: bool,
        if_not_exists: bool,
        alter: bool,
    ) -> Outcome {
        let topo = self.topo.clone();
        let Some(meta) = topo.metadata.clone() else {
            return Err(MyError::unsupported(format!(
                "shardproxy keeps a view over tables its rules place (`{}`) in its metadata schema, and the rules name none: add a [metadata] section",
                view.name
            )));
        };
        let key = view.name.to_ascii_lowercase();
        if topo.tables.contains_key(&key) || self.default_node_has(&view.name).await? {
            return Err(MyError::new(
                ER_TABLE_EXISTS,
                format!("Table '{}' already exists", view.name),
            ));
        }
        let mut seen: Vec<String> = Vec::new();
        for c in &view.columns {
            if seen.iter().any(|s| s.eq_ignore_ascii_case(c)) {
                return Err(MyError::new(
                    ER_DUP_FIELDNAME,
                    format!("Duplicate column name '{c}'"),
                ));
            }
            seen.push(c.clone());
        }
        if !view.columns.is_empty()
            && view.columns.len() != view.select_items().unwrap_or(view.columns.len())
        {
            return Err(MyError::new(
                ER_VIEW_WRONG_LIST,
                "View's SELECT and view's field list have different column counts",
            ));
        }
        view.mode = self.mode();
        view.charset = crate::exec::door::Door::state(&self.nodes).charset.clone();
        if view.definer.is_empty() {
            view.definer = format!("{}@`%`", quoted(&self.nodes.ctl().user()));
        }
        // Like any DDL: the open transaction commits first.
        self.nodes.ddl(true).await?;
        let checked = self.check_view(&view).await;
        self.nodes.ddl(false).await?;
        checked?;
        let mut c = self.metadata_conn(&meta.url).await?;
        {
            let mut tx = c
                .start_transaction(mysql_async::TxOpts::default())
                .await
                .map_err(failed)?;
            let existing = stored::lock_and_read(&mut tx, &key).await.map_err(failed)?;
            match (existing.is_some(), alter) {
                (true, false) if if_not_exists => {
                    self.write_ok();
                    return Ok(());
                }
                (true, false) if !or_replace => {
                    return Err(MyError::new(
                        ER_TABLE_EXISTS,
                        format!("Table '{}' already exists", view.name),
                    ))
                }
                (false, true) => {
                    return Err(MyError::new(
                        ER_NO_SUCH_TABLE,
                        format!(
                            "Table '{}.{}' doesn't exist",
                            self.nodes.db().unwrap_or_default(),
                            view.name
                        ),
                    ))
                }
                _ => {}
            }
            let row = stored::Stored {
                definition: view.create_statement(),
                sql_mode: mode_flags(view.mode),
                charset: view.charset.clone(),
            };
            stored::put(&mut tx, &key, Some(&row))
                .await
                .map_err(failed)?;
            tx.commit().await.map_err(failed)?;
        }
        self.shared.load_views(&mut c, true).await.map_err(failed)?;
        self.write_ok();
        Ok(())
    }

    /// The view reads as a table: its SELECT planned (a refusal is the view's), and run
    /// with no rows wanted where that copies nothing (unknown tables or columns, duplicate
    /// column names are found as MariaDB finds them at CREATE VIEW).
    async fn check_view(&mut self, view: &View) -> Outcome {
        let read = format!(
            "SELECT * FROM {} AS {} LIMIT 0",
            view.source(),
            quoted(&view.name)
        );
        let read = match self.expanded(&read)? {
            Some(x) => x,
            None => read,
        };
        let topo = self.topo.clone();
        let parsed = crate::sql::parse_in(&read, self.mode());
        let (plan, _) = self
            .plan_with_lookups(&read, parsed.as_ref().map_err(String::as_str), &[], &topo)
            .await;
        match &plan {
            Plan::Refuse { code, message } => return Err(MyError::new(*code, message.clone())),
            Plan::Gather(_) | Plan::Shipped(_) | Plan::Spread(_) => return Ok(()),
            _ => {}
        }
        let mut none = crate::exec::collect::Collect::new(0);
        match crate::exec::run(&plan, &topo, Access::Read, &mut self.nodes, &mut none).await {
            Err(e) if e.code == ER_WITH_COL_WRONG_LIST => Err(MyError::new(
                ER_VIEW_WRONG_LIST,
                "View's SELECT and view's field list have different column counts",
            )),
            other => other,
        }
    }

    /// Whether the default node has a table (or view) of its own by this name.
    async fn default_node_has(&mut self, name: &str) -> Result<bool, MyError> {
        let mut sql = String::from(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ",
        );
        crate::sql::write::text(&mut sql, name);
        let n = self.read_on_default(&sql).await?;
        let count = n.first().and_then(|r| r.first()).and_then(Option::as_ref);
        Ok(count.is_some_and(|v| match v {
            Value::Bytes(b) => b.as_slice() != b"0",
            Value::Int(i) => *i != 0,
            Value::UInt(u) => *u != 0,
            _ => true,
        }))
    }

    async fn read_on_default(&mut self, sql: &str) -> Result<Vec<crate::merge::Row>, MyError> {
        let topo = self.topo.clone();
        let plan = Plan::Route(Target {
            node: topo.default_node,
            sql: sql.to_string(),
            params: Vec::new(),
        });
        let mut out = crate::exec::collect::Collect::new(10_000);
        crate::exec::run(&plan, &topo, Access::Read, &mut self.nodes, &mut out).await?;
        Ok(out.rows)
    }

    async fn drop_views(
        &mut self,
        ours: Vec<(Option<String>, String)>,
        others: Vec<(Option<String>, String)>,
        if_exists: bool,
    ) -> Outcome {
        let topo = self.topo.clone();
        let Some(meta) = topo.metadata.clone() else {
            return Err(MyError::unsupported("shardproxy: no [metadata] for views"));
        };
        self.nodes.ddl(true).await?;
        let mut c = self.metadata_conn(&meta.url).await?;
        for (_, name) in &ours {
            let key = name.to_ascii_lowercase();
            let mut tx = c
                .start_transaction(mysql_async::TxOpts::default())
                .await
                .map_err(failed)?;
            if stored::lock_and_read(&mut tx, &key)
                .await
                .map_err(failed)?
                .is_some()
            {
                stored::put(&mut tx, &key, None).await.map_err(failed)?;
            }
            tx.commit().await.map_err(failed)?;
        }
        self.shared.load_views(&mut c, true).await.map_err(failed)?;
        // The others are the default node's, as a DROP VIEW of only them would be.
        let mut out = Ok(());
        if !others.is_empty() {
            let names: Vec<String> = others
                .iter()
                .map(|(s, n)| match s {
                    Some(s) => format!("{}.{}", quoted(s), quoted(n)),
                    None => quoted(n),
                })
                .collect();
            let sql = format!(
                "DROP VIEW {}{}",
                if if_exists { "IF EXISTS " } else { "" },
                names.join(", ")
            );
            let plan = Plan::Route(Target {
                node: topo.default_node,
                sql,
                params: Vec::new(),
            });
            let mut none = crate::exec::collect::Collect::new(0);
            out = crate::exec::run(&plan, &topo, Access::Write, &mut self.nodes, &mut none).await;
            if let Err(e) = &mut out {
                if e.code == ER_UNKNOWN_VIEW {
                    e.from_node = false;
                }
            }
        }
        self.nodes.ddl(false).await?;
        out?;
        self.write_ok();
        Ok(())
    }

    /// `SHOW CREATE VIEW v` / `SHOW CREATE TABLE v` of a kept view; `SHOW COLUMNS` of one.
    async fn show_views(&mut self, sql: &str) -> Option<Outcome> {
        let kept = self.shared.views.load_full();
        if kept.is_empty() {
            return None;
        }
        let toks = crate::sql::lex::statement_tokens(sql, self.mode());
        let toks: &[crate::sql::lex::Tok] = &toks;
        let is = |i: usize, w: &str| toks.get(i).is_some_and(|t| t.is(sql, w));
        if is(1, "CREATE") && (is(2, "VIEW") || is(2, "TABLE")) {
            let (schema, name) = name_at(sql, toks, 3)?;
            if !self.own_schema(schema.as_deref()) {
                return None;
            }
            let view = kept.get(&name)?.clone();
            return Some(self.write_create_view(&view));
        }
        let full = is(1, "FULL");
        let at = usize::from(full) + 1;
        if (is(at, "COLUMNS") || is(at, "FIELDS")) && (is(at + 1, "FROM") || is(at + 1, "IN")) {
            let (schema, name, mut next) = views::object_name(sql, toks, at + 2)?;
            let view = kept.get(&name)?.clone();
            if is(next, "FROM") || is(next, "IN") {
                let (_, db) = name_at(sql, toks.get(next + 1..next + 2)?, 0)?;
                if !self.own_schema(Some(&db)) {
                    return None;
                }
                next += 2;
            }
            if !self.own_schema(schema.as_deref()) {
                return None;
            }
            let tail = toks.get(next).map_or("", |t| &sql[t.start..]);
            let tail = tail.trim_end().trim_end_matches(';').to_string();
            return Some(self.view_columns(view, full, &tail).await);
        }
        None
    }

    /// `DESCRIBE v [col]` of a kept view: `SHOW COLUMNS FROM v [LIKE 'col']`.
    async fn describe_view(&mut self, sql: &str) -> Option<Outcome> {
        let kept = self.shared.views.load_full();
        if kept.is_empty() {
            return None;
        }
        let toks = crate::sql::lex::statement_tokens(sql, self.mode());
        let qualified = toks.get(2).is_some_and(|d| d.kind == Kind::Dot);
        let name_end = if qualified { 4 } else { 2 };
        // `DESCRIBE v` or `DESCRIBE v col`.
        if toks.len() > name_end + 1 {
            return None;
        }
        let (schema, name) = name_at(sql, toks.get(..name_end)?, 1)?;
        let view = kept
            .get(&name)
            .filter(|_| self.own_schema(schema.as_deref()))?
            .clone();
        let mut tail = String::new();
        if let Some(col) = toks.get(name_end) {
            tail.push_str("LIKE ");
            match col.kind {
                Kind::Str => tail.push_str(col.text(sql)),
                _ => {
                    let (_, c) = name_at(sql, std::slice::from_ref(col), 0)?;
                    crate::sql::write::text(&mut tail, &c);
                }
            }
        }
        Some(self.view_columns(view, false, &tail).await)
    }

    fn write_create_view(&mut self, view: &View) -> Outcome {
        let text = |name: &str| {
            Column::new(ColumnType::MYSQL_TYPE_VAR_STRING)
                .with_name(name.as_bytes())
                .with_character_set(33)
                .with_column_length(1024 * 3)
                .with_flags(ColumnFlags::NOT_NULL_FLAG)
        };
        let cols = [
            text("View"),
            text("Create View"),
            text("character_set_client"),
            text("collation_connection"),
        ];
        let row = vec![
            Some(Value::Bytes(view.name.clone().into_bytes())),
            Some(Value::Bytes(view.create_statement().into_bytes())),
            Some(Value::Bytes(view.charset.clone().into_bytes())),
            Some(Value::Bytes(
                views::default_collation(&view.charset).into_bytes(),
            )),
        ];
        let status = self.status();
        let (_, mut sink) = self.sink(false);
        sink.columns(&cols, status);
        sink.row(&row, &cols);
        sink.end(status, 0, false);
        Ok(())
    }
}

/// A failure of the metadata schema, as the admin statements answer one.
fn failed(e: mysql_async::Error) -> MyError {
    MyError::new(1105, format!("metadata: {e}"))
}

pub(super) fn refused_describe(view: &str) -> MyError {
    MyError::unsupported(format!(
        "shardproxy: the columns of `{view}`, a view it keeps, have the types MariaDB infers from its SELECT on one server, and no node holds every table it reads: SHOW CREATE VIEW gives the SELECT, and SELECT * FROM {view} LIMIT 0 its columns"
    ))
}

/// `[schema.]name` at `toks[i]`, the end of the statement after it.
pub(super) fn name_at(
    sql: &str,
    toks: &[crate::sql::lex::Tok],
    i: usize,
) -> Option<(Option<String>, String)> {
    let (schema, name, next) = views::object_name(sql, toks, i)?;
    (next == toks.len()).then_some((schema, name))
}

/// The `sql_mode` flags that change how a view's text reads.
fn mode_flags(m: Mode) -> String {
    let mut f = Vec::new();
    if m.ansi_quotes {
        f.push("ANSI_QUOTES");
    }
    if m.no_backslash_escapes {
        f.push("NO_BACKSLASH_ESCAPES");
    }
    f.join(",")
}
