//! Statements planned from their words, before (or without) a parse: session statements
//! (SET, BEGIN, USE, savepoints, ...), LOCK TABLES, and what an unparsed statement can
//! still be.

use mysql_common::value::Value;

use super::*;
use crate::config::{TableRule, Topology};
use crate::sql::{self};

/// `LOCK TABLES t1 READ, t2 AS a WRITE, ...`: the nodes holding any of the tables (a table in
/// no rule: the default node).
pub(super) fn lock_tables(sql: &str, topo: &Topology) -> Plan {
    use crate::sql::lex::{lex, Kind, Mode};
    let body = sql.trim().trim_end_matches(';').trim_end();
    let toks = lex(body, Mode::default()).toks;
    // Each item: `name [AS alias | alias] lock_type`, items separated by commas; kept as
    // written (a dump's `READ /*!32311 LOCAL */` too) for the nodes that hold its table.
    let mut per_node: std::collections::BTreeMap<usize, Vec<&str>> = Default::default();
    let mut start = toks.get(2).map(|t| t.start);
    let mut i = 2;
    while let Some(from) = start {
        let end = toks[i..]
            .iter()
            .position(|t| t.kind == Kind::Comma)
            .map(|p| i + p);
        let to = end.map_or(body.len(), |e| toks[e].start);
        let item = body[from..to].trim();
        let name_at = if toks.get(i + 1).is_some_and(|t| t.kind == Kind::Dot) {
            i + 2
        } else {
            i
        };
        let Some(name) = toks.get(name_at).map(|t| strip_quotes(t.text(body))) else {
            return refuse("LOCK TABLES without tables");
        };
        for n in topo.holders(&name) {
            per_node.entry(n).or_default().push(item);
        }
        match end {
            Some(e) => {
                i = e + 1;
                start = toks.get(i).map(|t| t.start);
            }
            None => start = None,
        }
    }
    if per_node.is_empty() {
        return refuse("LOCK TABLES without tables");
    }
    let head = toks.get(1).map_or("LOCK TABLES", |t| &body[..t.end]);
    Plan::Session(SessionOp::Lock {
        locks: per_node
            .into_iter()
            .map(|(n, items)| (n, format!("{head} {}", items.join(", "))))
            .collect(),
    })
}

/// `SHOW [EXTENDED] {INDEX | INDEXES | KEYS} {FROM | IN} [db.]t [...]`: the table's schema
/// as written and name, lower-cased (sqlparser reads no table in it), so it runs where the
/// table is, or is answered over its nodes (`crate::frontend`).
pub fn show_index_table(
    sql: &str,
    mode: crate::sql::lex::Mode,
) -> Option<(Option<String>, String)> {
    use crate::sql::lex::statement_tokens;
    let toks = statement_tokens(sql, mode);
    let is = |i: usize, w: &str| toks.get(i).is_some_and(|t| t.is(sql, w));
    let mut i = 1 + usize::from(is(1, "EXTENDED"));
    if !is(0, "SHOW") || !(is(i, "INDEX") || is(i, "INDEXES") || is(i, "KEYS")) {
        return None;
    }
    i += 1;
    if !(is(i, "FROM") || is(i, "IN")) {
        return None;
    }
    let (schema, name, _) = super::views::object_name(sql, &toks, i + 1)?;
    Some((schema, name.to_ascii_lowercase()))
}

/// `ALTER TABLE t DISABLE KEYS` / `ENABLE KEYS` (dump files wrap them in executable comments;
/// sqlparser does not read them): the table's name.
pub(super) fn alter_keys(sql: &str) -> Option<String> {
    let w = sql::words(sql);
    let n = w.len();
    let shape = (5..=6).contains(&n)
        && w[0] == "alter"
        && w[1] == "table"
        && (w[n - 2] == "disable" || w[n - 2] == "enable")
        && w[n - 1] == "keys";
    shape.then(|| w[n - 3].clone())
}

/// A statement sqlparser cannot read: forwarded if it names no configured table (the node
/// then answers, with its own syntax error where there is one), refused otherwise.
pub(super) fn unparsed(sql: &str, err: &str, params: &[Value], topo: &Topology) -> Plan {
    if let Some(table) = alter_keys(sql) {
        return Plan::Scatter {
            targets: topo
                .holders(&table)
                .into_iter()
                .map(|node| Target {
                    node,
                    sql: sql.to_string(),
                    params: params.to_vec(),
                })
                .collect(),
            ok: OkMerge::Copies,
        };
    }
    let mut nodes: Vec<usize> = Vec::new();
    let mut check_on = topo.default_node;
    for w in sql::words(sql) {
        match topo.table(&w) {
            None => {}
            Some(TableRule::Single { node }) => nodes.push(*node),
            Some(TableRule::HashSlot { map, .. }) => {
                check_on = map.nodes().first().copied().unwrap_or(check_on);
                nodes.push(usize::MAX);
            }
            Some(TableRule::Broadcast) => nodes.push(usize::MAX),
            Some(rule) => {
                check_on = rule.all_nodes(topo).first().copied().unwrap_or(check_on);
                nodes.push(usize::MAX);
            }
        }
    }
    nodes.sort_unstable();
    nodes.dedup();
    match nodes.as_slice() {
        [] => Plan::Sticky {
            sql: sql.to_string(),
            params: params.to_vec(),
        },
        [node] if *node != usize::MAX => Plan::Route(Target {
            node: *node,
            sql: sql.to_string(),
            params: params.to_vec(),
        }),
        _ => Plan::Unroutable {
            node: check_on,
            sql: sql.to_string(),
            reason: format!("shardproxy cannot parse this statement to route it ({err})"),
        },
    }
}

/// `BEGIN [WORK]` or `START TRANSACTION [READ ONLY | READ WRITE | WITH CONSISTENT
/// SNAPSHOT, ...]` as the proxy writes it itself: the transaction's first statement on
/// each node is the proxy's text, never the client's (it may go in one batch with the
/// savepoints to replay). `None` for anything else in it.
pub(super) fn begin_text(sql: &str) -> Option<String> {
    let lexed = sql::lex::lex(sql, Default::default());
    if lexed.error.is_some() {
        return None;
    }
    let mut toks = lexed
        .toks
        .iter()
        .filter(|t| t.kind != sql::lex::Kind::Semi)
        .map(|t| (t.kind, t.text(sql).to_ascii_uppercase()));
    let mut next = || toks.next();
    let word = |t: Option<(sql::lex::Kind, String)>| match t {
        Some((sql::lex::Kind::Word, w)) => Some(w),
        _ => None,
    };
    match word(next())?.as_str() {
        "BEGIN" => match next() {
            None => Some("BEGIN".into()),
            Some((sql::lex::Kind::Word, w)) if w == "WORK" && next().is_none() => {
                Some("BEGIN".into())
            }
            _ => None,
        },
        "START" if word(next())? == "TRANSACTION" => {
            let mut parts: Vec<&str> = Vec::new();
            loop {
                let part = match word(next()) {
                    None if parts.is_empty() => break,
                    Some(w) if w == "READ" => match word(next())?.as_str() {
                        "ONLY" => "READ ONLY",
                        "WRITE" => "READ WRITE",
                        _ => return None,
                    },
                    Some(w) if w == "WITH" => {
                        if word(next())? != "CONSISTENT" || word(next())? != "SNAPSHOT" {
                            return None;
                        }
                        "WITH CONSISTENT SNAPSHOT"
                    }
                    _ => return None,
                };
                parts.push(part);
                match next() {
                    None => break,
                    Some((sql::lex::Kind::Comma, _)) => {}
                    _ => return None,
                }
            }
            Some(if parts.is_empty() {
                "START TRANSACTION".into()
            } else {
                format!("START TRANSACTION {}", parts.join(", "))
            })
        }
        _ => None,
    }
}

pub(super) fn strip_quotes(s: &str) -> String {
    s.trim_matches('`').to_string()
}

/// Transaction control, SET and USE, recognised by their first words so that every form
/// (even ones sqlparser cannot parse) is handled by the session.
pub(super) fn session_statement(sql: &str, topo: &Topology) -> Option<Plan> {
    let w = sql::leading_words(sql, 4);
    let is = |i: usize, k: &str| w.get(i).is_some_and(|x| x.eq_ignore_ascii_case(k));
    if is(0, "LOCK") && (is(1, "TABLES") || is(1, "TABLE")) {
        return Some(lock_tables(sql, topo));
    }
    // The global read lock of one database is every node's (`mariadb-dump
    // --lock-all-tables`): taken in node order like LOCK TABLES, released by UNLOCK TABLES.
    let all = sql::leading_words(sql.trim().trim_end_matches(';'), 6);
    let words: Vec<String> = all.iter().map(|w| w.to_ascii_uppercase()).collect();
    if words == ["FLUSH", "TABLES", "WITH", "READ", "LOCK"] {
        let body = sql.trim().trim_end_matches(';').trim_end().to_string();
        return Some(Plan::Session(SessionOp::Lock {
            locks: topo
                .all_nodes()
                .into_iter()
                .map(|n| (n, body.clone()))
                .collect(),
        }));
    }
    if is(0, "UNLOCK") && (is(1, "TABLES") || is(1, "TABLE")) && w.len() == 2 {
        return Some(Plan::Session(SessionOp::Unlock));
    }
    if is(0, "BEGIN") && w.len() == 1
        || is(0, "BEGIN") && is(1, "WORK")
        || is(0, "START") && is(1, "TRANSACTION")
    {
        return Some(match begin_text(sql) {
            Some(text) => Plan::Session(SessionOp::Begin(text)),
            None => Plan::Refuse {
                code: 1064,
                message: format!(
                    "You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version for the right syntax to use near '{}'",
                    sql.trim().chars().take(80).collect::<String>()
                ),
            },
        });
    }
    if is(0, "COMMIT") {
        return Some(Plan::Session(SessionOp::Commit));
    }
    if is(0, "KILL") {
        let all = sql::leading_words(sql.trim().trim_end_matches(';'), 8);
        let query_only = all.iter().any(|x| x.eq_ignore_ascii_case("QUERY"));
        let rest: Vec<&String> = all[1..]
            .iter()
            .filter(|x| {
                !["QUERY", "CONNECTION", "HARD", "SOFT"]
                    .iter()
                    .any(|k| x.eq_ignore_ascii_case(k))
            })
            .collect();
        return Some(match rest.as_slice() {
            [n] => match n.parse::<u32>() {
                Ok(id) => Plan::Session(SessionOp::Kill { id, query_only }),
                Err(_) => refuse("KILL takes a connection id (a number)"),
            },
            [k, _] if k.eq_ignore_ascii_case("ID") => refuse(
                "KILL QUERY ID <query id> names a node's query: kill the session's statement with KILL QUERY <connection id>",
            ),
            _ => refuse("KILL USER is not supported through shardproxy: KILL <connection id>"),
        });
    }
    if is(0, "ROLLBACK") && !w.iter().any(|x| x.eq_ignore_ascii_case("TO")) {
        return Some(Plan::Session(SessionOp::Rollback));
    }
    let kind = if is(0, "SAVEPOINT") {
        Some(SavepointKind::Set)
    } else if is(0, "ROLLBACK") {
        Some(SavepointKind::RollbackTo)
    } else if is(0, "RELEASE") && is(1, "SAVEPOINT") {
        Some(SavepointKind::Release)
    } else {
        None
    };
    if let Some(kind) = kind {
        let body = sql.trim().trim_end_matches(';').trim_end();
        let all = sql::leading_words(body, 8);
        if let Some(name) = all.last().filter(|_| all.len() >= 2) {
            return Some(Plan::Session(SessionOp::Savepoint {
                sql: body.to_string(),
                name: strip_quotes(name).to_ascii_lowercase(),
                kind,
            }));
        }
    }
    if is(0, "USE") {
        return w
            .get(1)
            .map(|db| Plan::Session(SessionOp::Use(strip_quotes(db))));
    }
    if is(0, "SET") {
        let all = sql::leading_words(sql, 64);
        let upper: Vec<String> = all.iter().map(|x| x.to_ascii_uppercase()).collect();
        if upper
            .iter()
            .any(|x| x == "GLOBAL" || x.starts_with("@@GLOBAL"))
        {
            return Some(refuse(
                "SET GLOBAL through shardproxy would change one node only: set it on each node",
            ));
        }
        let names_autocommit = upper
            .iter()
            .any(|x| x == "AUTOCOMMIT" || x.ends_with(".AUTOCOMMIT") || x == "@@AUTOCOMMIT");
        if names_autocommit {
            if upper.iter().any(|x| x == ",") {
                return Some(refuse(
                    "SET autocommit together with other variables: send it as its own statement",
                ));
            }
            let value = upper
                .iter()
                .position(|x| x == "=" || x == ":=")
                .and_then(|i| upper.get(i + 1));
            return Some(match value.map(String::as_str) {
                Some("1" | "ON" | "TRUE") => Plan::Session(SessionOp::SetAutocommit(true)),
                Some("0" | "OFF" | "FALSE") => Plan::Session(SessionOp::SetAutocommit(false)),
                _ => refuse("SET autocommit takes 0, 1, ON or OFF"),
            });
        }
        return Some(Plan::Session(SessionOp::Set(sql.trim().to_string())));
    }
    None
}
