//! Prepared statements: COM_STMT_PREPARE (prepared on a node that holds the statement's
//! table, to answer with its parameter and column metadata), SEND_LONG_DATA, EXECUTE (the
//! parameters decoded, then planned and run like a text statement with bound values), and
//! COM_FIELD_LIST.

use std::collections::HashMap;
use std::time::Instant;

use mysql_common::constants::{ColumnFlags, ColumnType};
use mysql_common::io::ParseBuf;
use mysql_common::value::{BinValue, Value, ValueDeserializer};
use tokio::io::{AsyncRead, AsyncWrite};

use super::query::{is_read, statement_kind};
use super::{Outcome, Prepared, Session};
use crate::config::Topology;
use crate::error::{
    MyError, ER_NO_SUCH_TABLE, ER_PARSE_ERROR, ER_UNKNOWN_STMT_HANDLER, ER_WRONG_ARGUMENTS,
};
use crate::exec::door::{Access, Door, NodeResult, Run, Stmt};
use crate::protocol::codec;
use crate::sql::{self, Parsed};
use crate::value::text_form;

/// Prepared statements a client may hold at once (MariaDB's default
/// max_prepared_stmt_count).
const MAX_PREPARED: usize = 16_382;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    pub(super) async fn prepare(&mut self, sql: String) -> Outcome {
        // A client's prepared statements are held for it: as many as MariaDB's default
        // max_prepared_stmt_count, with its error past that.
        if self.stmts.len() >= MAX_PREPARED {
            return Err(MyError::new(
                1461,
                format!(
                    "Can't create more than max_prepared_stmt_count statements (current value: {MAX_PREPARED})"
                ),
            ));
        }
        // A listing of information_schema over every node is merged in the text protocol
        // only; the kept views' rows are in the catalog from here on.
        if let Some(e) = self
            .prepared_listing(&sql)
            .or_else(|| self.prepared_view_columns(&sql))
        {
            return Err(e);
        }
        let sql = match self.catalog_with_views(&sql).await? {
            Some(x) => x,
            None => sql,
        };
        // Views are read as their SELECTs from here on (as MariaDB does at PREPARE).
        let sql = match self.expanded(&sql)? {
            Some(x) => x,
            None => sql,
        };
        let topo = self.topo.clone();
        let parsed = sql::parse_in(&sql, self.mode());
        let sticky = self.sticky_node();
        let node = match &parsed {
            Ok(p) => prepare_node(p, &topo).unwrap_or(sticky),
            Err(_) => sticky,
        };
        let stmt = match self.nodes.prepare(node, &sql).await {
            Ok(stmt) => stmt,
            // Tables on different nodes: prepared where a gathered run would take place.
            Err(e) if e.error.code == ER_NO_SUCH_TABLE => {
                let gathered = match &parsed {
                    Ok(p) => self.gathered(&sql, p, &topo).await,
                    Err(_) => None,
                };
                match gathered {
                    Some(g) => crate::exec::gather::prepare(&mut self.nodes, &g).await?,
                    None => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        };
        let num_params = stmt.params.len();
        // If our parser saw a different number of placeholders than the server, its reading of
        // the statement cannot be trusted for routing: route it as unparsed.
        let parsed = match parsed {
            Ok(p) if p.param_count() == num_params => Ok(p),
            Ok(_) => Err("placeholder count differs from the server's".to_string()),
            Err(e) => Err(e),
        };
        let id = self.next_stmt;
        self.next_stmt = self.next_stmt.wrapping_add(1).max(1);
        let route = parsed
            .as_ref()
            .ok()
            .and_then(|p| crate::plan::cached::analyze(p, &topo));
        let read = is_read(parsed.as_ref().ok(), &sql);
        let kind = statement_kind(parsed.as_ref().ok(), &sql);
        let entry = crate::sql::digest::digest_prepared(&sql)
            .and_then(|d| self.shared.plans.entry(&d.text));
        let columns = stmt.columns;
        let params = stmt.params;
        // COM_STMT_PREPARE_OK
        let mut head = vec![0x00];
        head.extend_from_slice(&id.to_le_bytes());
        head.extend_from_slice(&(columns.len() as u16).to_le_bytes());
        head.extend_from_slice(&(num_params as u16).to_le_bytes());
        head.push(0);
        head.extend_from_slice(&0u16.to_le_bytes());
        self.io.write(&head);
        let status = self.status();
        if num_params > 0 {
            for p in &params {
                self.io.write(&codec::column_def(p));
            }
            self.io.write(&codec::eof(status, 0));
        }
        if !columns.is_empty() {
            for c in columns.iter() {
                self.io.write(&codec::column_def(c));
            }
            self.io.write(&codec::eof(status, 0));
        }
        let special = crate::sql::uservars::special_in(&sql, self.mode());
        self.stmts.insert(
            id,
            Prepared {
                sql: sql.into(),
                parsed,
                num_params,
                types: Vec::new(),
                long_data: HashMap::new(),
                long_data_over: false,
                route,
                trusted: false,
                read,
                kind,
                entry,
                slots: None,
                special,
            },
        );
        Ok(())
    }

    /// The statement's plan with NULL parameters, when it runs gathered on one node (the
    /// column lists it asks for read first).
    async fn gathered(
        &mut self,
        sql: &str,
        parsed: &sql::Parsed,
        topo: &Topology,
    ) -> Option<crate::plan::gather::Gather> {
        let nulls = vec![Value::NULL; parsed.param_count()];
        let db = self.nodes.db().map(str::to_string);
        let charset = crate::exec::door::Door::state(&self.nodes).charset.clone();
        for _ in 0..12 {
            let plan = self
                .shared
                .with_plan_ctx(topo, db.as_deref(), &charset, |ctx| {
                    crate::plan::plan(sql, Ok(parsed), &nulls, topo, ctx)
                });
            match plan {
                crate::plan::Plan::Gather(g) => return Some(*g),
                crate::plan::Plan::Spread(s) => return Some(s.gather),
                // Prepared on one of its nodes against empty copies, for the metadata.
                crate::plan::Plan::Shipped(s) => {
                    let s = *s;
                    return Some(crate::plan::gather::Gather {
                        node: *s.nodes().first()?,
                        ships: s.ships,
                        sql: s.sql,
                        params: Vec::new(),
                        why: s.why,
                    });
                }
                crate::plan::Plan::NeedColumns { schema, table } => {
                    let schema = schema.as_deref();
                    let cols = crate::exec::columns::read(&mut self.nodes, topo, schema, &table)
                        .await
                        .ok()?;
                    self.shared
                        .columns_store(schema.or(db.as_deref()), &table, cols);
                }
                crate::plan::Plan::NeedRows { table } => {
                    let n = crate::exec::columns::stats(&mut self.nodes, topo, &table)
                        .await
                        .ok()?;
                    self.shared.rows_store(db.as_deref(), &table, n);
                }
                _ => return None,
            }
        }
        None
    }

    pub(super) fn long_data(&mut self, body: &[u8]) {
        if body.len() < 6 {
            return;
        }
        let id = u32::from_le_bytes([body[0], body[1], body[2], body[3]]);
        let param = usize::from(u16::from_le_bytes([body[4], body[5]]));
        let max = self.shared.max_packet;
        if let Some(s) = self.stmts.get_mut(&id) {
            if param < s.num_params {
                // Held until the execute: at most max_allowed_packet in all, as MariaDB
                // bounds a parameter's long data; past it the execute fails.
                let held: usize = s.long_data.values().map(Vec::len).sum();
                if held + body.len() - 6 > max {
                    s.long_data.clear();
                    s.long_data_over = true;
                    return;
                }
                s.long_data
                    .entry(param)
                    .or_default()
                    .extend_from_slice(&body[6..]);
            }
        }
    }

    /// COM_STMT_EXECUTE. As for a text statement (`Session::query`), what the client may
    /// ask about its last statement is kept by what this one leaves.
    pub(super) async fn execute(&mut self, body: &[u8]) -> Outcome {
        let sql = body
            .get(..4)
            .and_then(|id| {
                self.stmts
                    .get(&u32::from_le_bytes([id[0], id[1], id[2], id[3]]))
            })
            .map(|s| s.sql.clone());
        let Some(sql) = sql else {
            return self.execute_statement(body).await;
        };
        if crate::sql::seen::reads_diagnostics(&sql) {
            let last = self.last.clone();
            let out = match self.own_diagnostics(&sql, true) {
                Some(out) => out,
                None => self.execute_statement(body).await,
            };
            self.last = last;
            return out;
        }
        let out = self.execute_statement(body).await;
        self.after_statement(&sql);
        out
    }

    async fn execute_statement(&mut self, body: &[u8]) -> Outcome {
        if body.len() < 9 {
            return Err(MyError::new(
                ER_WRONG_ARGUMENTS,
                "Incorrect arguments to mysqld_stmt_execute",
            ));
        }
        let id = u32::from_le_bytes([body[0], body[1], body[2], body[3]]);
        let mode = self.mode();
        let Some(stmt) = self.stmts.get_mut(&id) else {
            return Err(MyError::new(
                ER_UNKNOWN_STMT_HANDLER,
                format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute"),
            ));
        };
        if std::mem::take(&mut stmt.long_data_over) {
            stmt.long_data.clear();
            return Err(MyError::new(
                1153,
                "Got a packet bigger than 'max_allowed_packet' bytes (the long data of a parameter)",
            ));
        }
        let params = decode_params(stmt, &body[9..]).map_err(|m| {
            MyError::new(
                ER_WRONG_ARGUMENTS,
                format!("Incorrect arguments to mysqld_stmt_execute: {m}"),
            )
        })?;
        stmt.long_data.clear();
        if stmt.special {
            let sql = stmt.sql.clone();
            if let Some(out) = self.user_variables_or_locks(&sql, &params, true).await {
                return out;
            }
            return Err(MyError::internal(
                "shardproxy: a statement prepared as setting user variables no longer does",
            ));
        }
        let started = Instant::now();
        let topo = self.topo.clone();
        let bytes = stmt.sql.len() + body.len();
        // Planned at PREPARE: the key parameter's node in this command's snapshot.
        // A proxy fenced from sharded writes plans them in full (and refuses them there).
        // LAST_INSERT_ID() and the like become their values: planned for this execution.
        if let Some(text) = self.last.answer(&stmt.sql, mode) {
            let (read, kind) = (stmt.read, stmt.kind);
            let parsed = sql::parse_in(&text, self.mode());
            let (plan, slots) = self
                .plan_with_lookups(
                    &text,
                    parsed.as_ref().map_err(String::as_str),
                    &params,
                    &topo,
                )
                .await;
            self.account(&plan, kind, bytes, &slots);
            let before = self.rows_written;
            let out = self
                .run_statement(&plan, true, read, kind, Some(&text))
                .await;
            self.spent(&slots, self.rows_written - before, started.elapsed());
            return out;
        }
        let fenced = !stmt.read && self.shared.migration.blind(&topo);
        let cached = match stmt.route.as_ref().filter(|_| stmt.trusted && !fenced) {
            Some(route) => route.resolve(&topo, &params).inspect(|r| {
                if let Some(slot) = r.slot {
                    let shared = &self.shared;
                    stmt.slots
                        .get_or_insert_with(|| shared.metrics.slot_counters(&route.table))
                        .hit(slot, bytes);
                }
            }),
            None => None,
        };
        if let Some(r) = cached {
            let (read, kind, entry, sql) =
                (stmt.read, stmt.kind, stmt.entry.clone(), stmt.sql.clone());
            // A write to a captured slot is counted toward its move's target; planned in
            // full below if the rules changed meanwhile (its slot then counted twice).
            if r.captured
                .is_none_or(|to| self.count_toward(&[to], true, topo.version))
            {
                self.count_single(kind);
                let (out, rows) = self
                    .run_routed(r.node, Stmt::new(&sql, &params), true, read, kind)
                    .await;
                if r.captured.is_some() {
                    self.release_moves();
                }
                let took = started.elapsed();
                if let Some(slot) = r.slot {
                    // The counters and the key's place, as kept with the statement (no
                    // reference count taken per execution).
                    let stmt = self.stmts.get(&id);
                    let param = stmt.and_then(|s| s.route.as_ref()).map(|r| r.param);
                    if let Some(c) = stmt.and_then(|s| s.slots.as_ref()) {
                        c.spent(slot, rows, took, || {
                            param.and_then(|p| params.get(p)).and_then(text_form)
                        });
                    }
                }
                if let Some(e) = entry {
                    e.count(rows, out.is_err(), took, true);
                }
                return out;
            }
        }
        // Out of the map while it plans (planning may read lookup tables), back after.
        let Some(mut prep) = self.stmts.remove(&id) else {
            return Err(MyError::new(
                ER_UNKNOWN_STMT_HANDLER,
                "prepared statement vanished",
            ));
        };
        // A join's plan kept for this execution's signature (the shapes of MariaDB's default
        // mode, as for text statements). Its values are looked at only for a shape that
        // keeps plans, or for a plan to keep.
        let charset = crate::exec::door::Door::state(&self.nodes).charset.clone();
        let default_mode = mode.is_default();
        let kept = match &prep.entry {
            Some(e) if default_mode && e.keeps_any() => {
                super::kept::Execution::prepared(&prep.sql, mode, &params, &charset)
                    .and_then(|x| self.kept_plan(e, &x, &topo))
            }
            _ => None,
        };
        let was_kept = kept.is_some();
        let (plan, slots) = match kept {
            Some(k) => k,
            None => {
                self.plan_with_lookups(
                    &prep.sql,
                    prep.parsed.as_ref().map_err(String::as_str),
                    &params,
                    &topo,
                )
                .await
            }
        };
        if default_mode && !was_kept && crate::plan::template::kept_kind(&plan) {
            let x = super::kept::Execution::prepared(&prep.sql, mode, &params, &charset);
            if let (Some(e), Ok(p), Some(x)) = (&prep.entry, &prep.parsed, x) {
                self.keep_plan(e, &x, p, (&plan, &slots), &topo);
            }
        }
        if !prep.trusted {
            // The first execution whose key has a node proves the plan made at PREPARE, or
            // drops it (a NULL key says nothing either way).
            if let Some(route) = &prep.route {
                if route.resolve(&topo, &params).is_some() {
                    if route.agrees(&plan, &topo, &prep.sql, &params) {
                        prep.trusted = true;
                    } else {
                        prep.route = None;
                    }
                }
            }
        }
        let (read, kind, entry) = (prep.read, prep.kind, prep.entry.clone());
        let text = prep.sql.clone();
        self.stmts.insert(id, prep);
        let route = self.account(&plan, kind, bytes, &slots);
        let before = self.rows_written;
        let out = self
            .run_statement(&plan, true, read, kind, Some(&text))
            .await;
        self.spent(&slots, self.rows_written - before, started.elapsed());
        if let Some(e) = entry {
            e.set_route(route);
            e.count(
                self.rows_written - before,
                out.is_err(),
                started.elapsed(),
                was_kept,
            );
        }
        out
    }

    /// COM_FIELD_LIST (deprecated, still sent by the mariadb CLI for completion): the
    /// table's column definitions, read from the node that holds it.
    pub(super) async fn field_list(&mut self, body: &[u8]) -> Outcome {
        let end = body.iter().position(|b| *b == 0).unwrap_or(body.len());
        let table = String::from_utf8_lossy(&body[..end]).into_owned();
        let topo = self.topo.clone();
        let sql = format!("SELECT * FROM `{}` LIMIT 0", table.replace('`', "``"));
        let parsed =
            sql::parse_in(&sql, self.mode()).map_err(|e| MyError::new(ER_PARSE_ERROR, e))?;
        let node = prepare_node(&parsed, &topo).unwrap_or_else(|| self.sticky_node());
        let run = Run {
            access: Access::Read,
            binary: false,
        };
        let cols = {
            let res = self.nodes.start(node, Stmt::new(&sql, &[]), run).await?;
            let cols = res.columns();
            res.finish().await?;
            cols
        };
        for c in cols.iter().flat_map(|c| c.iter()) {
            let mut def = codec::column_def(c);
            def.push(0xFB); // no default value
            self.io.write(&def);
        }
        let status = self.status();
        self.io.write(&codec::eof(status, 0));
        Ok(())
    }

    /// The node the session runs on: its transaction's, its last statement's, or the
    /// default.
    fn sticky_node(&self) -> usize {
        let default = self.topo.default_node;
        self.nodes.sticky(false, default).unwrap_or(default)
    }
}

/// The node a statement is prepared on (to learn its parameter and column metadata): the
/// first node that holds every table it names (a broadcast table and a single table on
/// another node than the default one: the single table's node), else a node holding the
/// first table it names.
fn prepare_node(parsed: &Parsed, topo: &Topology) -> Option<usize> {
    use crate::config::TableRule;
    let mut first = None;
    let mut common: Option<Vec<usize>> = None;
    let _ = sqlparser::ast::visit_relations(&parsed.stmt, |n| {
        let holders = match topo.table(&sql::table_name(n)) {
            Some(TableRule::Broadcast) => topo.all_nodes(),
            None => vec![topo.default_node],
            Some(r) => r.all_nodes(topo),
        };
        let preferred = match topo.table(&sql::table_name(n)) {
            Some(TableRule::Broadcast) | None => Some(topo.default_node),
            Some(_) => holders.first().copied(),
        };
        first = first.or(preferred);
        common = Some(match common.take() {
            None => holders,
            Some(c) => c.into_iter().filter(|x| holders.contains(x)).collect(),
        });
        std::ops::ControlFlow::<()>::Continue(())
    });
    match common {
        Some(c) if first.is_some_and(|f| c.contains(&f)) => first,
        Some(c) if !c.is_empty() => c.first().copied(),
        _ => first,
    }
}

/// Decodes COM_STMT_EXECUTE parameters (after statement id, flags and iteration count).
fn decode_params(stmt: &mut Prepared, mut rest: &[u8]) -> Result<Vec<Value>, String> {
    let n = stmt.num_params;
    if n == 0 {
        return Ok(Vec::new());
    }
    let bitmap_len = n.div_ceil(8);
    if rest.len() < bitmap_len + 1 {
        return Err("truncated parameter block".into());
    }
    let bitmap = rest[..bitmap_len].to_vec();
    let new_bound = rest[bitmap_len];
    rest = &rest[bitmap_len + 1..];
    if new_bound == 1 {
        if rest.len() < 2 * n {
            return Err("truncated parameter types".into());
        }
        // Types only a server's own storage uses: mysql_common cannot decode them as
        // parameters (it panicked), and no client sends them.
        if let Some(t) = (0..n)
            .map(|i| rest[2 * i])
            .find(|t| matches!(t, 0x11..=0x14 | 0xF3))
        {
            return Err(format!("parameter type {t:#04x} is not a parameter type"));
        }
        stmt.types = (0..n)
            .map(|i| {
                let ty =
                    ColumnType::try_from(rest[2 * i]).unwrap_or(ColumnType::MYSQL_TYPE_VAR_STRING);
                let flags = if rest[2 * i + 1] & 0x80 != 0 {
                    ColumnFlags::UNSIGNED_FLAG
                } else {
                    ColumnFlags::empty()
                };
                (ty, flags)
            })
            .collect();
        rest = &rest[2 * n..];
    }
    if stmt.types.len() != n {
        return Err("parameter types were never sent".into());
    }
    let mut buf = ParseBuf(rest);
    let mut values = Vec::with_capacity(n);
    for i in 0..n {
        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
            values.push(Value::NULL);
        } else if let Some(data) = stmt.long_data.get(&i) {
            values.push(Value::Bytes(data.clone()));
        } else {
            let v: ValueDeserializer<BinValue> = buf
                .parse(stmt.types[i])
                .map_err(|e| format!("parameter {}: {e}", i + 1))?;
            values.push(v.0);
        }
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::prepare_node;
    use crate::config::test_topology;

    #[test]
    fn a_statement_is_prepared_where_every_table_it_names_is() {
        let t = test_topology(
            1,
            2,
            "[tables.b]\nrule = \"broadcast\"\n[tables.s]\nrule = \"single\"\nnode = \"ds1\"\n\
             [tables.h]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
             slots = [{ slots = \"0-511\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds1\" }]\n",
        );
        let at = |sql: &str| prepare_node(&crate::sql::parse(sql).unwrap(), &t);
        assert_eq!(
            at("SELECT * FROM b JOIN s ON b.id = s.id WHERE b.id = ?"),
            Some(1)
        );
        assert_eq!(at("SELECT * FROM s JOIN b ON b.id = s.id"), Some(1));
        assert_eq!(at("SELECT * FROM b WHERE id = ?"), Some(0));
        assert_eq!(at("SELECT * FROM h WHERE id = ?"), Some(0));
        // No node holds both: the first table's node.
        assert_eq!(
            at("SELECT * FROM s JOIN unknown_t u ON u.id = s.id"),
            Some(1)
        );
    }
}
