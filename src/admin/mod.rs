//! The ops' interface: a MySQL-protocol listener of its own, with its own users, so ops use
//! the `mariadb` CLI. It reads the rules in force and changes them by writing a new version of
//! the rules file, which is then loaded like any other reload.

mod index_rules;
mod indexes;
mod load;
mod meta;
mod migrations;
mod nodes;
mod ranges;
mod rebalance;
mod rules_file;
mod salt;
pub mod top;
pub mod watch;
mod words;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mysql_common::constants::{ColumnType, StatusFlags};
use mysql_common::packets::Column;
use mysql_common::value::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tracing::{debug, info, warn};

use crate::backend::MyError;
use crate::config::{TableRule, Topology};
use crate::packet::PacketIo;
use crate::protocol::handshake::{self, Gate, Greeting};
use crate::protocol::stream::ClientStream;
use crate::protocol::{auth, codec};
use crate::routing::slot::SLOTS;
use crate::shared::{Reload, Shared};
use crate::sql;

use self::rules_file::edit;
pub use self::words::Answer;
use self::words::{headers, parse_range, slot_range_from, unsupported};

const HELP: &str = "SHOW VERSION | SHOW RULES | SHOW TABLE RULE t | SHOW SLOTS [FOR t] | SHOW NODES | SHOW PLANS [n] | PREVIEW <sql> | RELOAD | SET SLOTS a-b NODE n FOR t | ADD NODE n 'mysql://...' [WEIGHT w] [REBALANCE] | REMOVE NODE n | REBALANCE [TABLE t | ALL] [DRY RUN] [RATE r] | DRAIN NODE n [DRY RUN] [RATE r] | SHOW REBALANCE | PAUSE REBALANCE | RESUME REBALANCE | ABORT REBALANCE | MIGRATE SLOTS a-b OF t TO n [RATE r] [AUTO] | MIGRATE KEY 'v' OF t [BUCKETS a-b] TO n [RATE r] [AUTO] | SALT KEY 'v' OF t [OVER n, ...] [RATE r] | SHOW RANGES [FOR t] | SPLIT RANGE k OF t | MERGE RANGE k OF t | MIGRATE RANGE k OF t TO n [RATE r] [AUTO] | SHOW MIGRATIONS | CUTOVER [id] | ABORT [id] | SHOW LOAD | SHOW HOT SLOTS [FOR t] | SHOW HOT KEYS [FOR t] | SHOW BALANCE | CREATE [UNIQUE] GLOBAL INDEX name ON t [(column)] [RATE r] | DROP GLOBAL INDEX name ON t | SHOW GLOBAL INDEXES";

/// Accepts operators until the task is dropped.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, rules: Option<PathBuf>) {
    if let Ok(a) = listener.local_addr() {
        info!(addr = %a, "admin interface listening");
    }
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                warn!("admin accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let rules = rules.clone();
        tokio::spawn(async move {
            if let Err(e) = session(stream, shared, rules, peer.ip().to_string()).await {
                debug!(%peer, "admin connection closed: {e}");
            }
        });
    }
}

async fn session<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    shared: Arc<Shared>,
    rules: Option<PathBuf>,
    peer: String,
) -> std::io::Result<()> {
    let mut io = PacketIo::new(ClientStream::Plain(stream), 1 << 20);
    let mut salt = auth::new_salt();
    let greeting = Greeting {
        server_version: &shared.server_version,
        conn_id: 0,
        tls: shared.tls.as_ref(),
    };
    let Some(hello) = handshake::greet(&mut io, &greeting, &salt).await? else {
        return Ok(());
    };
    {
        // The admin users in force now; the snapshot is not kept for the whole session.
        let topo = shared.topology();
        let gate = Gate {
            users: topo.admin.as_ref().map_or(&[], |a| a.users.as_slice()),
            peer: &peer,
            denied_to: " to the shardproxy admin interface",
            secure: io.get_ref().is_tls(),
            require_tls: topo.tls.as_ref().is_some_and(|t| t.require),
            logins: Some(&shared.logins),
        };
        let (plugin, response) = (hello.plugin, hello.response);
        if !handshake::check_password(&mut io, &gate, &mut salt, &hello.user, plugin, response)
            .await?
        {
            return Ok(());
        }
    }
    let status = StatusFlags::SERVER_STATUS_AUTOCOMMIT;
    io.write(&codec::ok(0, 0, status, 0, ""));
    io.flush().await?;
    info!(user = %hello.user, %peer, "operator logged in to the admin interface");
    loop {
        let Some(packet) = io.read().await? else {
            return Ok(());
        };
        let Some((&cmd, body)) = packet.split_first() else {
            continue;
        };
        match cmd {
            0x01 => return Ok(()),
            0x0E | 0x02 => io.write(&codec::ok(0, 0, status, 0, "")),
            0x03 => {
                let text = String::from_utf8_lossy(body).into_owned();
                match execute(&text, &shared, rules.as_deref()).await {
                    Ok(Answer::Rows { columns, rows }) => {
                        write_rows(&mut io, &columns, &rows, status)
                    }
                    Ok(Answer::Done(info)) => io.write(&codec::ok(0, 0, status, 0, &info)),
                    Err(e) => io.write(&codec::err(e.code, &e.state, &e.message)),
                }
            }
            other => io.write(&codec::err(
                1047,
                "08S01",
                &format!("Unknown command {other:#04x} on the admin interface"),
            )),
        }
        io.flush().await?;
    }
}

fn write_rows<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut PacketIo<S>,
    columns: &[String],
    rows: &[Vec<String>],
    status: StatusFlags,
) {
    io.write(&codec::column_count(columns.len()));
    for name in columns {
        let c = Column::new(ColumnType::MYSQL_TYPE_VAR_STRING)
            .with_name(name.as_bytes())
            .with_org_name(name.as_bytes())
            .with_character_set(45)
            .with_column_length(1024);
        io.write(&codec::column_def(&c));
    }
    io.write(&codec::eof(status, 0));
    for r in rows {
        let values: Vec<Option<Value>> = r
            .iter()
            .map(|s| Some(Value::Bytes(s.clone().into_bytes())))
            .collect();
        io.write_with(|out| codec::text_row(&values, out));
    }
    io.write(&codec::eof(status, 0));
}

use crate::config::masked_url as masked;

fn rule_summary(t: &Topology, rule: &TableRule) -> (String, String, String) {
    match rule {
        TableRule::HashSlot { column, map } => {
            let nodes: Vec<String> = map
                .nodes()
                .iter()
                .map(|n| t.node_name(*n).to_string())
                .collect();
            ("hash_slot".into(), column.clone(), nodes.join(","))
        }
        TableRule::Broadcast => (
            "broadcast".into(),
            String::new(),
            t.all_nodes()
                .iter()
                .map(|n| t.node_name(*n).to_string())
                .collect::<Vec<_>>()
                .join(","),
        ),
        TableRule::Single { node } => (
            "single".into(),
            String::new(),
            t.node_name(*node).to_string(),
        ),
        other => (
            other.kind().into(),
            other.column().unwrap_or_default().to_string(),
            other
                .all_nodes(t)
                .iter()
                .map(|n| t.node_name(*n).to_string())
                .collect::<Vec<_>>()
                .join(","),
        ),
    }
}

/// A table's statistics read from its nodes (in their URLs' databases), for PREVIEW.
async fn preview_stats(
    shared: &Shared,
    t: &Topology,
    table: &str,
) -> crate::plan::estimate::TableStats {
    let sql = crate::exec::columns::Stats::sql(table);
    let mut all = crate::exec::columns::Stats::default();
    for node in t.holders(table) {
        // A node that cannot answer counts none, as for a session.
        let Ok(mut c) = shared.backends.connect(node).await else {
            continue;
        };
        let Ok(rows) = c.query_rows(&sql).await else {
            continue;
        };
        all.add(rows.into_iter().map(|r| {
            let mut r = r.into_iter();
            (r.next().flatten(), r.next().flatten(), r.next().flatten())
        }));
    }
    all.done()
}

/// Runs one admin statement.
pub async fn execute(text: &str, shared: &Shared, rules: Option<&Path>) -> Result<Answer, MyError> {
    let t = shared.topology();
    let w = sql::leading_words(text, 12);
    let up: Vec<String> = w.iter().map(|x| x.to_ascii_uppercase()).collect();
    let is = |i: usize, k: &str| up.get(i).is_some_and(|x| x == k);
    if is(0, "SELECT") {
        // What clients ask on connect: `SELECT @@version_comment LIMIT 1`,
        // `SELECT @@max_allowed_packet, @@wait_timeout`, ...
        if let Some(vars) = system_variables(text) {
            let columns = vars.clone();
            let row = vars
                .iter()
                .map(
                    |v| match v.trim_start_matches("@@").to_ascii_lowercase().as_str() {
                        "version_comment" => "shardproxy admin interface".to_string(),
                        "version" => shared.server_version.clone(),
                        "max_allowed_packet" => (1u32 << 20).to_string(),
                        "wait_timeout" | "interactive_timeout" => "28800".into(),
                        "autocommit" => "1".into(),
                        _ => String::new(),
                    },
                )
                .collect();
            return Ok(Answer::Rows {
                columns,
                rows: vec![row],
            });
        }
        return Err(unsupported(format!("the admin interface answers: {HELP}")));
    }
    if is(0, "HELP") {
        return Ok(Answer::Rows {
            columns: headers(&["statement"]),
            rows: HELP.split(" | ").map(|s| vec![s.to_string()]).collect(),
        });
    }
    if is(0, "SHOW") && is(1, "VERSION") {
        return Ok(Answer::Rows {
            columns: headers(&["version", "source", "nodes", "tables"]),
            rows: vec![vec![
                t.version.to_string(),
                t.origin.clone(),
                t.all_nodes().len().to_string(),
                t.tables.len().to_string(),
            ]],
        });
    }
    if is(0, "SHOW") && is(1, "RULES") {
        let mut names: Vec<&String> = t.tables.keys().collect();
        names.sort();
        let rows = names
            .into_iter()
            .filter_map(|n| {
                let (rule, column, nodes) = rule_summary(&t, t.tables.get(n)?);
                Some(vec![n.clone(), rule, column, nodes])
            })
            .collect();
        return Ok(Answer::Rows {
            columns: headers(&["table", "rule", "column", "nodes"]),
            rows,
        });
    }
    if is(0, "SHOW") && is(1, "TABLE") && is(2, "RULE") {
        let name = w
            .get(3)
            .ok_or_else(|| unsupported("SHOW TABLE RULE needs a table"))?;
        let rule = t.table(name);
        let mut rows = vec![vec!["table".to_string(), name.to_ascii_lowercase()]];
        match rule {
            None => rows.push(vec![
                "rule".into(),
                format!(
                    "not configured: lives on the default node {}",
                    t.node_name(t.default_node)
                ),
            ]),
            Some(r) => {
                let (kind, column, nodes) = rule_summary(&t, r);
                rows.push(vec!["rule".into(), kind]);
                if !column.is_empty() {
                    rows.push(vec!["column".into(), column]);
                }
                rows.push(vec!["nodes".into(), nodes]);
                if !matches!(r, TableRule::HashSlot { .. }) {
                    rows.push(vec!["routing".into(), r.describe(&t)]);
                }
                if let TableRule::HashSlot { map, .. } = r {
                    for (a, b, n) in map.runs() {
                        rows.push(vec![format!("slots {a}-{b}"), t.node_name(n).to_string()]);
                    }
                }
            }
        }
        return Ok(Answer::Rows {
            columns: headers(&["property", "value"]),
            rows,
        });
    }
    if is(0, "SHOW") && is(1, "SLOTS") {
        let only = if is(2, "FOR") {
            w.get(3).map(|s| s.to_ascii_lowercase())
        } else {
            None
        };
        let mut names: Vec<&String> = t.tables.keys().collect();
        names.sort();
        let mut rows = Vec::new();
        for n in names {
            if only.as_ref().is_some_and(|o| o != n) {
                continue;
            }
            if let Some(TableRule::HashSlot { map, .. }) = t.tables.get(n) {
                for (a, b, node, m) in map.runs_with_moves() {
                    rows.push(vec![
                        n.clone(),
                        a.to_string(),
                        b.to_string(),
                        t.node_name(node).to_string(),
                        m.map_or("stable", |m| m.step.name()).to_string(),
                        m.map(|m| t.node_name(m.to).to_string()).unwrap_or_default(),
                    ]);
                }
            }
        }
        if rows.is_empty() && only.is_some() {
            return Err(unsupported("no hash_slot table by that name"));
        }
        return Ok(Answer::Rows {
            columns: headers(&[
                "table",
                "first_slot",
                "last_slot",
                "node",
                "state",
                "moving_to",
            ]),
            rows,
        });
    }
    if is(0, "SHOW") && is(1, "PLANS") {
        // SHOW PLANS [n]: the statement shapes that took the most time.
        let n = w.get(2).and_then(|x| x.parse::<usize>().ok()).unwrap_or(20);
        use std::sync::atomic::Ordering::Relaxed;
        let rows = shared
            .plans
            .top(n)
            .into_iter()
            .map(|e| {
                let execs = e.executions.load(Relaxed);
                let micros = e.micros.load(Relaxed);
                vec![
                    e.digest.clone(),
                    e.plan(),
                    execs.to_string(),
                    e.cached_executions.load(Relaxed).to_string(),
                    e.rows.load(Relaxed).to_string(),
                    e.errors.load(Relaxed).to_string(),
                    format!("{:.3}", micros as f64 / 1000.0),
                    (micros / execs.max(1)).to_string(),
                ]
            })
            .collect();
        return Ok(Answer::Rows {
            columns: headers(&[
                "digest",
                "plan",
                "executions",
                "cached",
                "rows",
                "errors",
                "total_ms",
                "avg_us",
            ]),
            rows,
        });
    }
    if is(0, "SHOW") && is(1, "NODES") {
        let mut rows = Vec::new();
        for (i, n) in t.nodes.iter().enumerate() {
            let health = if n.retired {
                "retired".to_string()
            } else {
                match tokio::time::timeout(Duration::from_secs(2), async {
                    let mut c = shared.backends.connect(i).await?;
                    c.ping().await.map_err(|e| MyError::from_wire(&n.name, &e))
                })
                .await
                {
                    Ok(Ok(())) => "up".into(),
                    Ok(Err(e)) => format!("down: {}", e.message),
                    Err(_) => "down: no answer within 2s".into(),
                }
            };
            let role = if i == t.default_node { "default" } else { "" };
            let (in_use, idle) = shared.backends.pool_usage(i).unwrap_or((0, 0));
            rows.push(vec![
                n.name.clone(),
                masked(&n.url),
                health,
                role.to_string(),
                in_use.to_string(),
                idle.to_string(),
                shared.backends.last_error(i).unwrap_or_default(),
                String::new(),
                String::new(),
                String::new(),
            ]);
            rows.extend(nodes::replica_rows(shared, &t, i));
        }
        return Ok(Answer::Rows {
            columns: headers(&[
                "node",
                "url",
                "health",
                "role",
                "pool_in_use",
                "pool_idle",
                "last_error",
                "replication",
                "lag_ms",
                "reads",
            ]),
            rows,
        });
    }
    if is(0, "PREVIEW") {
        let rest = text.trim_start();
        let stmt = rest.get(7..).unwrap_or("").trim();
        if stmt.is_empty() {
            return Err(unsupported("PREVIEW needs a statement"));
        }
        let parsed = sql::parse(stmt);
        let plan = || {
            shared.with_plan_ctx(&t, None, "utf8mb4", |ctx| {
                crate::plan::plan(stmt, parsed.as_ref().map_err(String::as_str), &[], &t, ctx)
            })
        };
        let mut p = plan();
        // The statistics a choice weighs, read as a session would (a few tables at most).
        for _ in 0..8 {
            let crate::plan::Plan::NeedRows { table } = &p else {
                break;
            };
            let stats = preview_stats(shared, &t, table).await;
            shared.rows_store(None, table, stats);
            p = plan();
        }
        let mut text = format!(
            "{}{}",
            p.describe(&t),
            crate::plan::cache::describe(stmt, &p, &t)
        );
        let parsed = parsed.as_ref().map_err(String::as_str);
        if let Some(line) = crate::plan::replica::describe(stmt, parsed, &p, &t) {
            text.push('\n');
            text.push_str(&line);
        }
        let rows = text.lines().map(|l| vec![l.to_string()]).collect();
        return Ok(Answer::Rows {
            columns: headers(&["plan"]),
            rows,
        });
    }
    let path = || rules.ok_or_else(|| unsupported("this proxy was not started from a rules file"));
    if is(0, "RELOAD") {
        return match shared.reload_file(path()?) {
            Reload::Applied { to, .. } => Ok(Answer::Done(format!("rules version {to} applied"))),
            Reload::Ignored { running, offered } => Ok(Answer::Done(format!(
                "rules file version {offered} is not newer than {running}: nothing to do"
            ))),
            Reload::Refused(reason) => Err(MyError::new(1105, reason)),
        };
    }
    if (is(0, "CREATE") && (is(1, "GLOBAL") || (is(1, "UNIQUE") && is(2, "GLOBAL"))))
        || (is(0, "DROP") && is(1, "GLOBAL"))
    {
        return if is(0, "CREATE") {
            indexes::create(shared, &t, text, rules).await
        } else {
            indexes::drop(shared, &t, text, rules).await
        };
    }
    if is(0, "SHOW") && is(1, "GLOBAL") && is(2, "INDEXES") {
        return indexes::show(&t).await;
    }
    if is(0, "REBALANCE") {
        return rebalance::rebalance(shared, &t, &up).await;
    }
    if is(0, "DRAIN") && is(1, "NODE") {
        let name = w
            .get(2)
            .ok_or_else(|| unsupported("usage: DRAIN NODE n [DRY RUN] [RATE r]"))?;
        return rebalance::drain(shared, &t, &up, name).await;
    }
    if is(0, "MIGRATE") && is(1, "SLOTS") {
        return migrations::migrate(shared, &t, &w, text).await;
    }
    if is(0, "MIGRATE") && is(1, "KEY") {
        return migrations::migrate_key(shared, &t, &w).await;
    }
    if is(0, "MIGRATE") && is(1, "RANGE") {
        return ranges::migrate(shared, &t, &w).await;
    }
    if is(0, "SPLIT") && is(1, "RANGE") {
        return ranges::split(shared, &t, &w).await;
    }
    if is(0, "MERGE") && is(1, "RANGE") {
        return ranges::merge(shared, &t, &w).await;
    }
    if is(0, "SHOW") && is(1, "RANGES") {
        let only = if is(2, "FOR") {
            Some(
                w.get(3)
                    .map(|x| x.trim_matches('`'))
                    .ok_or_else(|| unsupported("usage: SHOW RANGES [FOR t]"))?,
            )
        } else {
            None
        };
        return ranges::show(shared, &t, only);
    }
    if is(0, "SALT") && is(1, "KEY") {
        return salt::salt_key(shared, &t, text).await;
    }
    if is(0, "SHOW") && is(1, "LOAD") {
        return Ok(load::show_load(shared, &t));
    }
    if is(0, "SHOW") && is(1, "HOT") && (is(2, "SLOTS") || is(2, "KEYS")) {
        let table = if is(3, "FOR") {
            Some(w.get(4).map(|x| x.trim_matches('`')).ok_or_else(|| {
                unsupported("usage: SHOW HOT SLOTS [FOR t] | SHOW HOT KEYS [FOR t]")
            })?)
        } else {
            None
        };
        return Ok(if is(2, "SLOTS") {
            load::show_slots(shared, &t, table)
        } else {
            load::show_keys(shared, table)
        });
    }
    if is(0, "SHOW") && is(1, "BALANCE") {
        return Ok(load::show_balance(shared, &t));
    }
    if is(0, "SHOW") && is(1, "REBALANCE") {
        return rebalance::show(shared, &t).await;
    }
    if (is(0, "PAUSE") || is(0, "RESUME") || is(0, "ABORT")) && is(1, "REBALANCE") {
        return rebalance::steer(shared, &t, &up[0]).await;
    }
    if is(0, "SHOW") && is(1, "MIGRATIONS") {
        return migrations::show(shared, &t).await;
    }
    if is(0, "CUTOVER") || is(0, "ABORT") {
        return migrations::command(shared, &t, &w, is(0, "CUTOVER")).await;
    }
    if is(0, "SET") && is(1, "SLOTS") {
        // SET SLOTS a-b NODE n FOR t (the words split `0-511`, so the range is read from
        // the text).
        let after = |k: &str| {
            w.iter()
                .position(|x| x.eq_ignore_ascii_case(k))
                .and_then(|i| w.get(i + 1))
                .cloned()
        };
        let (Some(range), Some(node), Some(table)) =
            (slot_range_from(text), after("NODE"), after("FOR"))
        else {
            return Err(unsupported("usage: SET SLOTS a-b NODE n FOR t"));
        };
        let table = table.to_ascii_lowercase();
        let Some(TableRule::HashSlot { map, .. }) = t.table(&table) else {
            return Err(unsupported(format!("`{table}` is not a hash_slot table")));
        };
        if map.is_moving() {
            return Err(unsupported(format!(
                "slots of `{table}` are being moved (SHOW MIGRATIONS): wait for the move or ABORT it"
            )));
        }
        let Some(target) = t.node_index(&node).filter(|i| !t.nodes[*i].retired) else {
            return Err(unsupported(format!("unknown node `{node}`")));
        };
        let (a, b) =
            parse_range(&range).ok_or_else(|| unsupported(format!("bad slot range `{range}`")))?;
        // A source of metadata rows: the change is one new version of them, in one
        // transaction; every proxy polling the schema picks it up.
        if let (Some(meta), Some(rule)) = (t.metadata.as_ref(), t.table(&table)) {
            let TableRule::HashSlot { column, .. } = rule else {
                return Err(unsupported(format!("`{table}` is not a hash_slot table")));
            };
            let owners = crate::metadata::owners_with(&t, rule, a, b, target);
            if t.version.saturating_add(1) >= crate::metadata::MAX_VERSION {
                return Err(unsupported(format!(
                    "the rules' version {} has no successor below {}",
                    t.version,
                    crate::metadata::MAX_VERSION
                )));
            }
            let version =
                crate::metadata::write_slots(&meta.url, &table, column, &owners, t.version, false)
                    .await
                    .map_err(|e| MyError::new(1105, format!("metadata write failed: {e}")))?
                    .unwrap_or(t.version);
            let pool = mysql_async::Pool::new(
                mysql_async::Opts::from_url(&meta.url)
                    .map_err(|e| MyError::new(1105, e.to_string()))?,
            );
            let outcome = watch::poll_once(shared, &pool, path()?, &masked(&meta.url)).await;
            pool.disconnect().await.ok();
            return match outcome {
                Ok(Some(Reload::Applied { to, .. })) => Ok(Answer::Done(format!(
                    "metadata version {to} written and applied"
                ))),
                Ok(Some(Reload::Refused(reason))) => Err(MyError::new(1105, reason)),
                Ok(_) => Ok(Answer::Done(format!("metadata version {version} written"))),
                Err(e) => Err(MyError::new(1105, e)),
            };
        }
        let mut owner: Vec<usize> = (0..SLOTS).map(|s| map.node_of_slot(s as u16)).collect();
        for o in owner.iter_mut().take(b + 1).skip(a) {
            *o = target;
        }
        let mut slots = toml_edit::Array::new();
        let mut start = 0;
        for s in 1..=SLOTS {
            if s == SLOTS || owner[s] != owner[start] {
                let mut it = toml_edit::InlineTable::new();
                it.insert("slots", format!("{start}-{}", s - 1).into());
                it.insert("node", t.node_name(owner[start]).into());
                slots.push(it);
                start = s;
            }
        }
        return edit(shared, path()?, |doc| {
            doc["tables"][table.as_str()]["slots"] = toml_edit::value(slots);
        });
    }
    if is(0, "ADD") && is(1, "NODE") {
        return nodes::add(shared, &t, &w, &up, rules).await;
    }
    if is(0, "REMOVE") && is(1, "NODE") {
        return nodes::remove(shared, &t, &w, rules).await;
    }
    Err(unsupported(format!(
        "unknown admin statement; the admin interface answers: {HELP}"
    )))
}

/// The `@@variables` of a `SELECT @@a, @@b [LIMIT n]`, as written.
fn system_variables(text: &str) -> Option<Vec<String>> {
    let parsed = sql::parse(text).ok()?;
    let sqlparser::ast::Statement::Query(q) = &parsed.stmt else {
        return None;
    };
    let sqlparser::ast::SetExpr::Select(s) = q.body.as_ref() else {
        return None;
    };
    if !s.from.is_empty() {
        return None;
    }
    s.projection
        .iter()
        .map(|item| match item {
            sqlparser::ast::SelectItem::UnnamedExpr(e) => {
                let t = e.to_string();
                t.starts_with("@@").then_some(t)
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            masked("mysql://root:secret@127.0.0.1:3311/shop"),
            "mysql://root:***@127.0.0.1:3311/shop"
        );
        assert_eq!(masked("mysql://root@h/db"), "mysql://root@h/db");
    }

    #[test]
    fn slot_ranges() {
        assert_eq!(parse_range("0-511"), Some((0, 511)));
        assert_eq!(parse_range("7"), Some((7, 7)));
        assert_eq!(parse_range("9-3"), None);
        assert_eq!(parse_range("0-1024"), None);
        assert_eq!(
            slot_range_from("set slots 0 - 511 node ds1 for t").as_deref(),
            Some("0-511")
        );
    }
}
