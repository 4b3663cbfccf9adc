//! COM_QUERY: a text statement (or a batch of them) parsed, planned against the command's
//! rules snapshot, counted, and run by `crate::exec`.

use std::sync::Arc;
use std::time::Instant;

use mysql_common::value::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::debug;

use super::{Outcome, Session};
use crate::backend::session::ReadFrom;
use crate::config::Topology;
use crate::error::{MyError, ER_PARSE_ERROR};
use crate::exec::door::{Access, Stmt};
use crate::plan::cache::TextPlan;
use crate::plan::{self, OkMerge, Plan, SessionOp, Traced};
use crate::sql::digest::{digest, Literal};
use crate::sql::{self, uservars, Parsed};
use crate::value::text_form;

/// How long a write to slots at the freeze step of their move waits for the next step.
const FROZEN_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// How the session's `sql_mode` reads text.
    pub(super) fn mode(&self) -> crate::sql::lex::Mode {
        crate::exec::door::Door::state(&self.nodes).mode
    }

    /// One COM_QUERY: a statement, or several when the client allows them.
    pub(super) async fn com_query(&mut self, sql: &str) -> Outcome {
        crate::hooks::panic_if_asked(sql);
        let mode = self.mode();
        match super::super::split::batch(sql, mode, self.multi_statements)? {
            super::super::split::Batch::Many(parts) => {
                self.batch(parts).await;
                Ok(())
            }
            super::super::split::Batch::One => self.query(sql).await,
        }
    }

    /// A COM_QUERY of several statements: one result each, all but the last flagged
    /// SERVER_MORE_RESULTS_EXISTS; the first error ends the batch (and is written here).
    async fn batch(&mut self, parts: Vec<&str>) {
        let last = parts.len().saturating_sub(1);
        for (i, part) in parts.iter().enumerate() {
            self.more_results = i < last;
            let r = self.query(part).await;
            self.more_results = false;
            if let Err(e) = r {
                self.write_err(&e);
                return;
            }
        }
    }

    /// One statement. `LAST_INSERT_ID()`, `ROW_COUNT()` and `FOUND_ROWS()` in it become
    /// what the proxy saw (`crate::sql::seen`); a statement that reads the diagnostics area
    /// leaves what the client may ask about as it was.
    async fn query(&mut self, sql: &str) -> Outcome {
        // `/*!40101 SET NAMES utf8mb4 */`: MySQL runs the body.
        let sql = sql::executable_comment(sql).unwrap_or(sql);
        let answered = self.last.answer(sql, self.mode());
        let sql = answered.as_deref().unwrap_or(sql);
        if crate::sql::seen::reads_diagnostics(sql) {
            let last = self.last.clone();
            let out = match self.own_diagnostics(sql, false) {
                Some(out) => out,
                None => self.statement(sql).await,
            };
            self.last = last;
            return out;
        }
        let out = self.statement(sql).await;
        self.after_statement(sql);
        out
    }

    /// What a statement's text tells of what it left: an id it set itself
    /// (`LAST_INSERT_ID(expr)`), a count of found rows only its node knows.
    pub(super) fn after_statement(&mut self, sql: &str) {
        if crate::sql::seen::sets_insert_id(sql, self.mode()) {
            self.last.sets_id = true;
        }
        if crate::sql::seen::calcs_found_rows(sql) {
            self.last.seen.found_rows = None;
        }
    }

    async fn statement(&mut self, sql: &str) -> Outcome {
        // What the proxy answers itself, about the database as a whole
        // (`super::catalog`) and the views it keeps (`super::views`), told by the first
        // word. (Called from here, not through one more async layer: the session's future
        // is as deep as the compiler lays out.)
        let first = sql::first_word(sql);
        if let Some(first) = first {
            let own = if first.eq_ignore_ascii_case("SELECT") {
                self.tables_listing(sql).await
            } else if first.eq_ignore_ascii_case("SHOW") {
                match self.show_tables(sql).await {
                    Some(out) => Some(out),
                    None => self.view_statement(sql, first).await,
                }
            } else {
                match self.table_maintenance(sql, first).await {
                    Some(out) => Some(out),
                    None => self.view_statement(sql, first).await,
                }
            };
            if let Some(out) = own {
                return out;
            }
        } else if sql.contains("/*!") {
            // Only executable comments: a dump's view (`/*!50001 CREATE ALGORITHM=UNDEFINED
            // */ /*!50013 DEFINER=... */ /*!50001 VIEW v AS ... */`).
            let toks = crate::sql::lex::statement_tokens(sql, self.mode());
            if let Some(first) = toks.first().map(|t| t.text(sql)) {
                if let Some(out) = self.view_statement(sql, first).await {
                    return out;
                }
            }
        }
        // The kept views' rows in information_schema, and their tables in LOCK TABLES.
        let first = first.unwrap_or_default();
        let cataloged = if first.eq_ignore_ascii_case("SELECT") {
            self.catalog_with_views(sql).await?
        } else if first.eq_ignore_ascii_case("LOCK") {
            self.locks_with_views(sql)
        } else {
            None
        };
        let sql = cataloged.as_deref().unwrap_or(sql);
        let expanded = self.expanded(sql)?;
        let sql = expanded.as_deref().unwrap_or(sql);
        // (A SET of user variables and autocommit is the first's: each part in its turn.)
        if let Some(out) = self.user_variables_or_locks(sql, &[], false).await {
            return out;
        }
        if let Some(parts) = super::super::split::set_with_autocommit(sql, self.mode()) {
            return self.set_parts(parts).await;
        }
        let started = Instant::now();
        let topo = self.topo.clone();
        // The cache's shapes are read in MariaDB's default mode: another session mode plans
        // every statement in full.
        let digest = if self.mode().is_default() {
            digest(sql)
        } else {
            None
        };
        let entry = digest
            .as_ref()
            .and_then(|d| self.shared.plans.entry(&d.text));
        if let (Some(d), Some(e)) = (&digest, &entry) {
            let fenced = self.shared.migration.blind(&topo);
            if let Some(TextPlan::Key { route, read, kind }) =
                e.text_plan.get().filter(|tp| !fenced || tp.reads())
            {
                let key = d.literals.get(route.param).and_then(Literal::value);
                if let Some(r) = key
                    .as_ref()
                    .and_then(|k| route.resolve_value(&topo, k))
                    .filter(|r| {
                        r.captured
                            .is_none_or(|to| self.count_toward(&[to], true, topo.version))
                    })
                {
                    debug!(
                        conn = self.conn_id,
                        sql = %sql::redacted(sql),
                        node = r.node,
                        "query (cached plan)"
                    );
                    self.count_single(kind);
                    if let Some(slot) = r.slot {
                        e.slots
                            .get_or_init(|| self.shared.metrics.slot_counters(&route.table))
                            .hit(slot, sql.len());
                    }
                    let (out, rows) = self
                        .run_routed(r.node, Stmt::new(sql, &[]), false, *read, kind)
                        .await;
                    if r.captured.is_some() {
                        self.release_moves();
                    }
                    let took = started.elapsed();
                    if let (Some(slot), Some(c)) = (r.slot, e.slots.get()) {
                        c.spent(slot, rows, took, || key.as_ref().and_then(text_form));
                    }
                    e.count(rows, out.is_err(), took, true);
                    return out;
                }
            }
        }
        // A join's plan kept for this execution's signature: not parsed nor planned.
        if let (Some(d), Some(e)) = (&digest, entry.as_ref().filter(|e| e.keeps_any())) {
            let kept =
                super::kept::Execution::text(sql, d).and_then(|x| self.kept_plan(e, &x, &topo));
            if let Some((plan, slots)) = kept {
                debug!(conn = self.conn_id, sql = %sql::redacted(sql), "query (kept join plan)");
                let route = self.account(&plan, "select", sql.len(), &slots);
                e.set_route(route);
                let before = self.rows_written;
                let out = self
                    .run_statement(&plan, false, true, "select", Some(sql))
                    .await;
                let rows = self.rows_written - before;
                self.spent(&slots, rows, started.elapsed());
                e.count(rows, out.is_err(), started.elapsed(), true);
                return out;
            }
        }
        let parsed = sql::parse_in(sql, self.mode());
        let (plan, slots) = self
            .plan_with_lookups(sql, parsed.as_ref().map_err(String::as_str), &[], &topo)
            .await;
        if let (Some(d), Some(e), Ok(p), true) = (
            &digest,
            &entry,
            &parsed,
            crate::plan::template::kept_kind(&plan),
        ) {
            if let Some(x) = super::kept::Execution::text(sql, d) {
                self.keep_plan(e, &x, p, (&plan, &slots), &topo);
            }
        }
        let read = is_read(parsed.as_ref().ok(), sql);
        if tracing::enabled!(tracing::Level::DEBUG) {
            let shown = sql::redacted(sql);
            if matches!(shown, std::borrow::Cow::Borrowed(_)) {
                debug!(conn = self.conn_id, %sql, ?plan, "query");
            } else {
                debug!(conn = self.conn_id, sql = %shown, "query");
            }
        }
        let kind = statement_kind(parsed.as_ref().ok(), sql);
        let route = self.account(&plan, kind, sql.len(), &slots);
        if let (Some(d), Some(e)) = (&digest, &entry) {
            e.set_route(route);
            if e.text_plan.get().is_none() {
                if let Some(tp) = crate::plan::cache::text_plan(d, &plan, &topo, sql, read, kind) {
                    let _ = e.text_plan.set(tp);
                }
            }
        }
        let before = self.rows_written;
        if kind == "ddl" {
            self.last.warn_next = parsed
                .as_ref()
                .ok()
                .and_then(|p| unique_per_node(&p.stmt, &topo));
        }
        let out = self
            .run_statement(&plan, false, read, kind, Some(sql))
            .await;
        self.last.warn_next = None;
        if kind == "ddl" {
            // A column's collation, or a table's definition, may have changed.
            self.shared.collations.invalidate_all();
            self.shared.definitions.invalidate_all();
            self.shared.plans.forget_kept();
        }
        let rows = self.rows_written - before;
        self.spent(&slots, rows, started.elapsed());
        if let Some(e) = &entry {
            e.count(rows, out.is_err(), started.elapsed(), false);
        }
        out
    }

    /// A statement (text, or prepared with `params`) that sets user variables or calls a
    /// named-lock function, run as [`Session::set_user_variables`] or
    /// [`Session::one_node_statement`] say; `None` for any other.
    pub(super) async fn user_variables_or_locks(
        &mut self,
        sql: &str,
        params: &[Value],
        binary: bool,
    ) -> Option<Outcome> {
        let mode = self.mode();
        if let Some(parts) = uservars::set_parts_in(sql, mode) {
            return Some(self.set_user_variables(parts, params).await);
        }
        let assigned = uservars::assigned_in(sql, mode);
        if !assigned.is_empty() || uservars::names_a_lock(sql) {
            return Some(self.one_node_statement(sql, assigned, params, binary).await);
        }
        None
    }

    /// `SET @a = e1, @b = e2`: each value read as `SELECT e` (planned like any read, so a
    /// subquery over a sharded table is merged over its nodes; a prepared SET's parameters
    /// bound to their expressions), in order, and kept as a `SET @a = <literal>` the
    /// session replays on every node connection it borrows (`crate::sql::uservars`). The
    /// SET's other assignments (`sql_mode = ...`) run in their turn as SETs of their own.
    async fn set_user_variables(
        &mut self,
        parts: Vec<uservars::SetPart>,
        params: &[Value],
    ) -> Outcome {
        let topo = self.topo.clone();
        let mut rest = params;
        for part in parts {
            let (name, expr) = match part {
                uservars::SetPart::User { name, expr } => (name, expr),
                uservars::SetPart::Other(text) => {
                    if uservars::placeholders_in(&text, self.mode()) > 0 {
                        return Err(MyError::unsupported(format!(
                            "shardproxy: a parameter in `{text}` of a prepared SET: set it in a statement of its own"
                        )));
                    }
                    self.set_part(&format!("SET {text}"), &topo).await?;
                    continue;
                }
            };
            let n = uservars::placeholders_in(&expr, self.mode()).min(rest.len());
            let (mine, after) = rest.split_at(n);
            rest = after;
            let select = format!("SELECT {expr}");
            let parsed = sql::parse_in(&select, self.mode());
            let (plan, _) = self
                .plan_with_lookups(
                    &select,
                    parsed.as_ref().map_err(String::as_str),
                    mine,
                    &topo,
                )
                .await;
            if matches!(plan, Plan::InsertSelect(_) | Plan::Session(_)) {
                return Err(MyError::internal(format!(
                    "shardproxy: the value of @{name} did not plan as a read"
                )));
            }
            let mut value = crate::exec::collect::Collect::new(1).binary(!mine.is_empty());
            crate::exec::run(&plan, &topo, Access::Read, &mut self.nodes, &mut value).await?;
            let set = match (&value.cols, value.rows.first()) {
                (Some(cols), Some(row)) if cols.len() == 1 && !value.bad => {
                    uservars::set_literal(&name, row.first().and_then(Option::as_ref), &cols[0])
                }
                _ => {
                    return Err(MyError::internal(format!(
                        "shardproxy: the value of @{name} could not be read"
                    )))
                }
            };
            crate::exec::session_op::apply_quietly(&mut self.nodes, &SessionOp::Set(set)).await?;
        }
        self.write_ok();
        Ok(())
    }

    /// A statement that must run on one node (the planner refuses it elsewhere:
    /// `crate::plan::plan_traced`): one that assigns user variables (`@v := e`, `INTO @v`),
    /// whose values are then read back there and kept like a `SET`'s; one that calls a
    /// named-lock function, whose locks live on the default node for every session
    /// (`crate::exec::route::sticky` sends it there). Never served by a cached plan.
    async fn one_node_statement(
        &mut self,
        sql: &str,
        assigned: Vec<String>,
        params: &[Value],
        binary: bool,
    ) -> Outcome {
        let topo = self.topo.clone();
        let parsed = sql::parse_in(sql, self.mode());
        let (plan, slots) = self
            .plan_with_lookups(sql, parsed.as_ref().map_err(String::as_str), params, &topo)
            .await;
        let read = is_read(parsed.as_ref().ok(), sql);
        let kind = statement_kind(parsed.as_ref().ok(), sql);
        self.account(&plan, kind, sql.len(), &slots);
        let (started, before) = (Instant::now(), self.rows_written);
        let ran = self.run_statement(&plan, binary, read, kind, None).await;
        self.spent(&slots, self.rows_written - before, started.elapsed());
        if assigned.is_empty() {
            return ran;
        }
        if let Err(e) = ran {
            // It may have assigned some before it failed: whatever each connection the
            // session holds has now is read back, so none goes back to the pool holding a
            // value its record of SETs does not tell (a broken one is closed anyway).
            // (Where the session ran last stays the failed statement's: SHOW WARNINGS.)
            let last = crate::exec::door::Door::state(&self.nodes).last_node;
            for node in topo.all_nodes() {
                if crate::exec::door::Door::holds(&self.nodes, node) {
                    let _ = self.read_back(node, &assigned, &topo).await;
                }
            }
            crate::exec::door::Door::state_mut(&mut self.nodes).last_node = last;
            return Err(e);
        }
        match crate::exec::door::Door::state(&self.nodes).last_node {
            Some(node) => self.read_back(node, &assigned, &topo).await,
            None => Ok(()),
        }
    }

    /// The values of `names` on the session's connection to `node`, kept as its `SET`s.
    async fn read_back(&mut self, node: usize, names: &[String], topo: &Arc<Topology>) -> Outcome {
        let back = plan::Plan::Route(plan::Target {
            node,
            sql: uservars::read_back(names),
            params: Vec::new(),
        });
        let mut values = crate::exec::collect::Collect::new(1);
        crate::exec::run(&back, topo, Access::Read, &mut self.nodes, &mut values).await?;
        let (Some(cols), Some(row)) = (&values.cols, values.rows.first()) else {
            return Err(MyError::internal(
                "shardproxy: the user variables the statement assigned could not be read back",
            ));
        };
        for (i, name) in names.iter().enumerate() {
            let Some(col) = cols.get(i) else { break };
            let set = uservars::set_literal(name, row.get(i).and_then(Option::as_ref), col);
            crate::exec::session_op::apply_quietly(&mut self.nodes, &SessionOp::Set(set)).await?;
        }
        Ok(())
    }

    /// Counts a statement routed by a cached plan, as [`Session::account`] does (its slot is
    /// counted by the caller, which keeps the table's slot counters).
    pub(super) fn count_single(&mut self, kind: &'static str) {
        if let Some((_, c)) = self.single_counters.iter().find(|(k, _)| *k == kind) {
            c.inc();
            return;
        }
        let c = self
            .shared
            .metrics
            .statements
            .with_label_values(&[kind, "single"]);
        c.inc();
        self.single_counters.push((kind, c));
    }

    /// Runs a statement's plan. DDL first commits the open transaction and runs outside any
    /// transaction, as MySQL does: drivers that turn autocommit off (PyMySQL, mysqlclient)
    /// still create and alter sharded tables.
    pub(super) async fn run_statement(
        &mut self,
        plan: &Plan,
        binary: bool,
        read: bool,
        kind: &str,
        sql: Option<&str>,
    ) -> Outcome {
        // Where it may read holds for this statement only.
        let from = self.read_from(Some(plan), read, kind, sql);
        self.nodes.read_from(from);
        let out = self.run_planned(plan, binary, read, kind).await;
        self.nodes.read_from(ReadFrom::Primary);
        out
    }

    async fn run_planned(&mut self, plan: &Plan, binary: bool, read: bool, kind: &str) -> Outcome {
        if let Plan::KeyUpdate(k) = plan {
            return self.key_update(k, binary).await;
        }
        if let Plan::Indexed(w) = plan {
            return self.indexed(w, binary).await;
        }
        if let Plan::InsertSelect(is) = plan {
            return self.insert_select(is, binary).await;
        }
        let access = Access::of(read);
        let topo = self.topo.clone();
        let ddl = kind == "ddl" && !matches!(plan, Plan::Refuse { .. });
        // MariaDB clears the diagnostics area for a statement that reads tables or warns:
        // one that names none (SET, SELECT @@x, BEGIN) leaves the last one's warnings, and
        // their connection, to SHOW WARNINGS.
        let keeps_diagnostics = matches!(plan, Plan::Sticky { .. } | Plan::Session(_));
        let kept = keeps_diagnostics.then(|| (self.last.diagnostics, self.last.own.clone()));
        if ddl {
            crate::exec::txn::Transactions::ddl(&mut self.nodes, true).await?;
        }
        let r = {
            let (door, mut sink) = self.sink(binary);
            let r = crate::exec::run(plan, &topo, access, door, &mut sink).await;
            let rows = sink.rows;
            self.rows_written += rows;
            r
        };
        self.release_moves();
        // (Unless it left warnings of its own, which replace them.)
        if let (Some((diagnostics, own)), Ok(_)) = (kept, &r) {
            if !self.last.diagnostics {
                self.last.diagnostics = diagnostics;
                self.last.own = own;
            }
        }
        if ddl {
            // Whatever it did, on whichever nodes: tables' columns are read again.
            self.shared.columns.invalidate_all();
            self.shared.primary_keys.invalidate_all();
            self.shared.unique_keys.invalidate_all();
            crate::exec::txn::Transactions::ddl(&mut self.nodes, false).await?;
        }
        r
    }

    /// INSERT ... SELECT whose rows must move between nodes: the SELECT is planned and read
    /// like any read (into memory, up to `max_rows_per_statement` rows), then its rows are
    /// inserted as one INSERT ... VALUES, planned like the client's own (split by node, keys
    /// generated). Inside a transaction both run in it; in autocommit the read and the
    /// INSERT are two statements, as an application copying rows would run them.
    async fn insert_select(
        &mut self,
        is: &crate::plan::insert::InsertSelect,
        binary: bool,
    ) -> Outcome {
        let topo = self.topo.clone();
        let plan = self.plan_own(&is.select, &topo).await;
        if matches!(plan, Plan::InsertSelect(_)) {
            return Err(MyError::internal(
                "shardproxy: the SELECT of an INSERT ... SELECT planned as an INSERT".to_string(),
            ));
        }
        let cap = topo.max_rows_per_statement;
        let mut read = crate::exec::collect::Collect::new(cap);
        crate::exec::run(&plan, &topo, Access::Read, &mut self.nodes, &mut read).await?;
        if read.over || read.bad {
            return Err(MyError::new(
                crate::error::ER_NOT_SUPPORTED_YET,
                format!(
                    "shardproxy: the SELECT of this INSERT ... SELECT into `{}` returns more than {cap} rows (max_rows_per_statement) or {} MiB; copy the rows in parts",
                    is.table,
                    crate::exec::held::HELD_BYTES >> 20
                ),
            ));
        }
        let (Some(cols), false) = (read.cols.as_ref(), read.rows.is_empty()) else {
            let status = self.status();
            let (_, mut sink) = self.sink(binary);
            let ok = crate::exec::door::OkInfo {
                info: "Records: 0  Duplicates: 0  Warnings: 0".to_string(),
                ..Default::default()
            };
            crate::exec::door::Sink::ok(&mut sink, &ok, status, false);
            return Ok(());
        };
        let mut sql = is.head.trim_end().to_string();
        sql.push_str(" VALUES ");
        for (i, row) in read.rows.iter().enumerate() {
            if i > 0 {
                sql.push(',');
            }
            crate::exec::gather::tuple(row, cols, &mut sql);
        }
        sql.push_str(&is.tail);
        drop(read);
        let plan = self.plan_own(&sql, &topo).await;
        if matches!(plan, Plan::InsertSelect(_)) {
            return Err(MyError::internal(
                "shardproxy: an INSERT ... SELECT's rows planned as another INSERT ... SELECT"
                    .to_string(),
            ));
        }
        Box::pin(self.run_statement(&plan, binary, false, "insert", None)).await
    }

    /// Runs a statement on the node a cached plan resolved; returns the outcome and the rows
    /// written.
    pub(super) async fn run_routed(
        &mut self,
        node: usize,
        stmt: Stmt<'_>,
        binary: bool,
        read: bool,
        kind: &str,
    ) -> (Outcome, u64) {
        let from = self.read_from(None, read, kind, Some(stmt.sql));
        self.nodes.read_from(from);
        let access = Access::of(read);
        let (door, mut sink) = self.sink(binary);
        let r = crate::exec::route::single(door, &mut sink, node, stmt, access)
            .await
            .map_err(MyError::from);
        let rows = sink.rows;
        self.rows_written += rows;
        self.nodes.read_from(ReadFrom::Primary);
        (r, rows)
    }

    /// A SET of several assignments, autocommit among them: each assignment on its own, one OK.
    async fn set_parts(&mut self, parts: Vec<String>) -> Outcome {
        let topo = self.topo.clone();
        for part in parts {
            self.set_part(&part, &topo).await?;
        }
        self.write_ok();
        Ok(())
    }

    /// One assignment of a SET, as its own `SET` statement `part`: a session SET (autocommit,
    /// a variable, NAMES), refused as the planner refuses it (GLOBAL).
    async fn set_part(&mut self, part: &str, topo: &Arc<Topology>) -> Outcome {
        let parsed = sql::parse_in(part, self.mode());
        let charset = crate::exec::door::Door::state(&self.nodes).charset.clone();
        let (plan, _) = self.shared.with_plan_ctx(topo, None, &charset, |ctx| {
            plan::plan_traced(
                part,
                parsed.as_ref().map_err(String::as_str),
                &[],
                topo,
                ctx,
            )
        });
        match plan {
            Plan::Session(SessionOp::Use(_)) => Err(MyError::new(ER_PARSE_ERROR, "USE inside SET")),
            Plan::Session(op) => crate::exec::session_op::apply_quietly(&mut self.nodes, &op).await,
            Plan::Refuse { code, message } => Err(MyError::new(code, message)),
            _ => Err(MyError::unsupported(format!(
                "shardproxy: `{part}` is not a session SET"
            ))),
        }
    }

    /// Plans a statement; directory keys the lookup caches lack are read from their lookup
    /// tables first, then it is planned again. A lookup failure fails the statement.
    /// A statement of the proxy's own making from the client's (the read of an INSERT ...
    /// SELECT or of a shard-key UPDATE, the INSERT of its rows), without parameters,
    /// planned as a client's would be.
    pub(super) async fn plan_own(&mut self, sql: &str, topo: &Arc<Topology>) -> Plan {
        let parsed = sql::parse_in(sql, self.mode());
        let (plan, _) = self
            .plan_with_lookups(sql, parsed.as_ref().map_err(String::as_str), &[], topo)
            .await;
        plan
    }

    pub(super) async fn plan_with_lookups(
        &mut self,
        sql: &str,
        parsed: Result<&Parsed, &str>,
        params: &[Value],
        topo: &Arc<Topology>,
    ) -> (Plan, Vec<Traced>) {
        let mut read_once = false;
        // A reload between the read and the planning empties the caches: a few reads each.
        let mut columns_read = 0;
        let mut rows_read = 0;
        let mut key_read = 0;
        let mut reservations = 0;
        let mut topo = topo.clone();
        let frozen_until = Instant::now() + FROZEN_WAIT;
        // Global index entries read for this statement (never cached: writes change them).
        let mut answers = crate::shared::IndexAnswers::new();
        let mut index_read = 0;
        loop {
            let db = self.nodes.db().map(str::to_string);
            let charset = crate::exec::door::Door::state(&self.nodes).charset.clone();
            let (plan, slots) =
                self.shared
                    .with_index_answers(&topo, db.as_deref(), &charset, &answers, |ctx| {
                        plan::plan_traced(sql, parsed, params, &topo, ctx)
                    });
            let topo = &mut topo;
            let write = !is_read(parsed.ok(), sql);
            let sharded = write
                && (!slots.is_empty()
                    || matches!(
                        plan.source(),
                        Plan::Scatter {
                            ok: OkMerge::Sum,
                            ..
                        }
                    ));
            if let Some(e) = self.shared.migration.fence(topo, &plan, sharded) {
                let refusal = Plan::Refuse {
                    code: e.code,
                    message: e.message,
                };
                return (refusal, Vec::new());
            }
            // What the plan waits for, read or reserved through the door; a failure fails
            // the statement.
            let fetched: Result<(), crate::error::MyError> = match plan {
                Plan::NeedLookup(keys) if !read_once => {
                    read_once = true;
                    let found = crate::exec::lookup::read(&mut self.nodes, topo, keys).await;
                    if found.is_err() {
                        crate::exec::door::Door::count_lookups(&self.nodes, "failed", 1);
                    }
                    found.map(|found| {
                        for (table, entries) in found {
                            self.shared.lookup_store(&table, entries);
                        }
                    })
                }
                // The entries of a global index the read pins (new ones at most twice: an
                // index read may pin another index's).
                Plan::NeedIndex(probes) if index_read < 3 => {
                    index_read += 1;
                    // A write's, or a locking read's, inside a transaction: locked there, so
                    // no row takes or leaves the value before the statement is done.
                    let st = crate::exec::door::Door::state(&self.nodes);
                    let in_tx = st.tx.is_some() || !st.autocommit;
                    let lock = in_tx && probes.iter().any(|p| p.write);
                    Box::pin(self.read_index(&probes, topo, lock))
                        .await
                        .map(|found| answers.extend(found))
                }
                Plan::NeedWeights(collation) if index_read < 3 => {
                    index_read += 1;
                    self.weights_for(&collation).await.map(|_| ())
                }
                // Another session may use up a fresh block before this one plans again.
                Plan::NeedIds { table, count } if reservations < 3 => {
                    reservations += 1;
                    crate::exec::sequence::reserve(&mut self.nodes, topo, &table, count)
                        .await
                        .map(|(first, end)| self.shared.sequence_store(&table, first, end))
                }
                // A gathered read may want the columns of each table it copies.
                Plan::NeedColumns { schema, table } if columns_read < 12 => {
                    columns_read += 1;
                    let schema = schema.as_deref();
                    crate::exec::columns::read(&mut self.nodes, topo, schema, &table)
                        .await
                        .map(|cols| {
                            self.shared
                                .columns_store(schema.or(db.as_deref()), &table, cols)
                        })
                }
                // Which copies a read across placements makes, weighed by the tables' rows.
                Plan::NeedRows { table } if rows_read < 12 => {
                    rows_read += 1;
                    crate::exec::columns::stats(&mut self.nodes, topo, &table)
                        .await
                        .map(|n| self.shared.rows_store(db.as_deref(), &table, n))
                }
                Plan::NeedKey {
                    schema,
                    table,
                    node,
                } if key_read < 3 => {
                    key_read += 1;
                    let schema = schema.as_deref();
                    crate::exec::columns::read_key(&mut self.nodes, node, schema, &table)
                        .await
                        .map(|cols| {
                            self.shared.primary_keys.insert(
                                crate::shared::column_key(schema.or(db.as_deref()), &table),
                                cols,
                            )
                        })
                }
                // A transaction that wrote images of the move goes on writing them.
                Plan::Frozen {
                    unless: Some(then), ..
                } if crate::exec::door::Door::state(&self.nodes)
                    .tx
                    .as_ref()
                    .is_some_and(|t| t.branches.iter().any(|b| b.shadow)) =>
                {
                    if let Plan::DualWrite(d) = then.unindexed() {
                        // Counted already if it holds images toward this target.
                        if !self.dual_write.iter().any(|r| r.target() == d.target) {
                            self.dual_write
                                .push(crate::shared::Running::new(self.shared.clone(), d.target));
                        }
                    }
                    return (*then, slots);
                }
                // A transaction that wrote rows of captured moves goes on: their holds wait
                // for it (it is counted toward their targets until it ends).
                Plan::Frozen {
                    unless: Some(then), ..
                } if matches!(then.unindexed(), Plan::Captured { targets, .. }
                    if self.captured && self.counted_toward(targets)) =>
                {
                    self.captured = true;
                    return (*then, slots);
                }
                // Writes to slots at the cutover of their move wait for the next step.
                Plan::Frozen { .. } if Instant::now() < frozen_until => {
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                    self.topo = self.shared.topology();
                    *topo = self.topo.clone();
                    Ok(())
                }
                ref moving if !moving.moving_targets().is_empty() => {
                    let captured = matches!(moving.unindexed(), Plan::Captured { .. });
                    if !self.count_toward(moving.moving_targets(), captured, topo.version) {
                        self.topo = self.shared.topology();
                        *topo = self.topo.clone();
                        continue;
                    }
                    return (plan, slots);
                }
                other => return (other, slots),
            };
            if let Err(e) = fetched {
                let refusal = Plan::Refuse {
                    code: e.code,
                    message: e.message,
                };
                return (refusal, Vec::new());
            }
        }
    }

    /// Counts a statement in the metrics: by type and route, and per slot it was routed to.
    /// Returns the route's name.
    pub(super) fn account(
        &self,
        plan: &Plan,
        kind: &str,
        bytes: usize,
        slots: &[Traced],
    ) -> &'static str {
        let m = &self.shared.metrics;
        let route = match plan {
            Plan::Route(_) | Plan::Sticky { .. } => "single",
            Plan::AnyCopy { .. } => "broadcast",
            Plan::Scatter {
                ok: OkMerge::Copies,
                ..
            } => "broadcast",
            Plan::Scatter { .. } => "scatter",
            Plan::Tier(_) => "tiers",
            Plan::KeyPage(_) => "scatter",
            Plan::Project { .. }
            | Plan::Limit { .. }
            | Plan::Aggregate { .. }
            | Plan::MergeSort { .. }
            | Plan::ValuesOrder { .. } => match plan.source() {
                Plan::Tier(_) => "tiers",
                _ => "scatter",
            },
            Plan::NeedLookup(_) | Plan::NeedIndex(_) | Plan::NeedWeights(_) => "lookup",
            Plan::Indexed(w) => return self.account(&w.base, kind, bytes, slots),
            Plan::NeedColumns { .. }
            | Plan::NeedRows { .. }
            | Plan::NeedIds { .. }
            | Plan::NeedKey { .. } => "lookup",
            Plan::Session(_) => "session",
            Plan::DualWrite(_) | Plan::Frozen { .. } => "dual_write",
            Plan::Captured { .. } => "captured",
            Plan::Gather(_) => "gather",
            Plan::Shipped(_) => "shipped",
            Plan::Spread(_) => "spread",
            Plan::InsertSelect(_) => "insert_select",
            Plan::KeyUpdate(_) => "key_update",
            Plan::Refuse { message, .. }
            | Plan::Unroutable {
                reason: message, ..
            } => {
                m.refused
                    .with_label_values(&[crate::metrics::refusal_reason(message)])
                    .inc();
                "refused"
            }
        };
        m.statements.with_label_values(&[kind, route]).inc();
        for t in slots {
            m.slot_hit(&t.table, t.slot, bytes);
        }
        route
    }

    /// Counts what a statement cost against the slots it was routed to by key: the rows it
    /// returned or changed, and the time it took, shared evenly among them.
    pub(super) fn spent(&self, slots: &[Traced], rows: u64, took: std::time::Duration) {
        if slots.is_empty() {
            return;
        }
        let n = slots.len() as u32;
        let (rows, took) = (rows / u64::from(n), took / n);
        for t in slots {
            self.shared
                .metrics
                .slot_counters(&t.table)
                .spent(t.slot, rows, took, || text_form(&t.key));
        }
    }
}

/// The statements of a COM_QUERY that holds several.
/// The statement's type, for the metrics.
pub(super) fn statement_kind(parsed: Option<&Parsed>, sql: &str) -> &'static str {
    use sqlparser::ast::Statement as S;
    match parsed.map(|p| &p.stmt) {
        Some(S::Query(_)) => "select",
        Some(S::Insert(_)) => "insert",
        Some(S::Update(_)) => "update",
        Some(S::Delete(_)) => "delete",
        Some(
            S::CreateTable(_)
            | S::AlterTable(_)
            | S::CreateIndex(_)
            | S::Drop { .. }
            | S::Truncate(_),
        ) => "ddl",
        _ => match sql::leading_words(sql, 1)
            .first()
            .map(|w| w.to_ascii_uppercase())
            .as_deref()
        {
            Some("SET" | "USE" | "BEGIN" | "START" | "COMMIT" | "ROLLBACK") => "session",
            Some("SHOW" | "DESCRIBE" | "DESC" | "EXPLAIN") => "show",
            _ => "other",
        },
    }
}

/// Is this a statement that only reads (may run outside the session's transaction node)?
pub(super) fn is_read(parsed: Option<&Parsed>, sql: &str) -> bool {
    // SHOW, DESCRIBE and EXPLAIN read the catalog: a transaction that asked two nodes
    // (an ORM reflecting tables) commits them as reads, with no two-phase commit.
    match parsed {
        Some(p) => match &p.stmt {
            sqlparser::ast::Statement::Query(q) => q.locks.is_empty(),
            _ => sql::reads_catalog(sql),
        },
        None => sql::reads_catalog(sql),
    }
}

/// The warning a DDL statement gets when it declares a unique key its table's nodes enforce
/// each on its own rows only (`crate::config::unique`).
fn unique_per_node(
    stmt: &sqlparser::ast::Statement,
    topo: &crate::config::Topology,
) -> Option<MyError> {
    let said: Vec<String> = crate::sql::unique_keys::declared(stmt)
        .iter()
        .filter_map(|k| crate::config::unique::per_node_only(topo, &k.table, &k.name, &k.columns))
        .collect();
    (!said.is_empty()).then(|| MyError::new(crate::plan::ER_NOT_SUPPORTED_YET, said.join("; ")))
}
