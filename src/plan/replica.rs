//! Which planned statements may read on a node's replicas (`crate::replica`), as far as the
//! statement and its plan decide: a SELECT that locks nothing, with no side effect, no
//! `/*+ primary */` comment and no table of `[replicas] primary_tables`
//! (`crate::sql::replica_read`), whose plan sends the client's statement to the nodes as it
//! is. The session's state (a transaction, its writes not yet applied, temporary tables)
//! decides the rest at run time. `route` and PREVIEW show the answer.

use sqlparser::ast::Statement;

use super::Plan;
use crate::config::replicas::{Consistency, ReadPolicy};
use crate::config::Topology;
use crate::sql::lex::Mode;
use crate::sql::Parsed;

/// Does the plan read the nodes with the client's statements as they are (one node, a
/// scatter, a broadcast copy, merges over those), and nothing of the proxy's own making
/// that must stay on the session's primary connections (a gathered join's copies)?
pub fn reads_as_sent(plan: &Plan) -> bool {
    match plan {
        Plan::Route(_) | Plan::Scatter { .. } | Plan::AnyCopy { .. } | Plan::KeyPage(_) => true,
        Plan::Project { input, .. }
        | Plan::Limit { input, .. }
        | Plan::Aggregate { input, .. }
        | Plan::MergeSort { input, .. } => reads_as_sent(input),
        _ => false,
    }
}

/// Why the primaries must answer `sql` (a statement of `kind`, the session's metrics word:
/// "select" for a query; `read`: it locks nothing) whatever the session's state, or `None`
/// when a replica may read it as far as its text decides. The session's routing and `route`
/// ask this one question.
pub fn primary_because(
    sql: &str,
    mode: Mode,
    primary_tables: &[String],
    read: bool,
    kind: &str,
) -> Option<&'static str> {
    if kind != "select" {
        return Some("not a SELECT");
    }
    if !read {
        return Some("a locking read");
    }
    if !crate::sql::replica_read::replica_read(sql, mode, primary_tables) {
        return Some(
            "a side effect, a /*+ primary */ comment or a table of [replicas] primary_tables",
        );
    }
    None
}

/// The line `route` and PREVIEW print about replicas for `sql` (parsed as `parsed`, planned
/// as `plan`), or `None` where no node has replicas.
pub fn describe(
    sql: &str,
    parsed: Result<&Parsed, &str>,
    plan: &Plan,
    topo: &Topology,
) -> Option<String> {
    if topo.nodes.iter().all(|n| n.replicas.is_empty()) {
        return None;
    }
    let primary = |why: &str| Some(format!("replicas: none, the primaries answer ({why})"));
    let (kind, read) = match parsed.map(|p| &p.stmt) {
        Ok(Statement::Query(q)) => ("select", q.locks.is_empty()),
        _ => ("other", false),
    };
    let tables = &topo.replicas.primary_tables;
    if let Some(why) = primary_because(sql, Mode::default(), tables, read, kind) {
        return primary(why);
    }
    if !reads_as_sent(plan) {
        return primary("the plan reads rows of its own making there");
    }
    let mut nodes = plan.nodes();
    nodes.sort_unstable();
    nodes.dedup();
    let (with, without): (Vec<_>, Vec<_>) = nodes
        .into_iter()
        .filter_map(|i| topo.nodes.get(i))
        .partition(|n| !n.replicas.is_empty());
    let names = |ns: &[&crate::config::Node]| {
        ns.iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if with.is_empty() {
        return primary("the nodes it reads have none");
    }
    let others = if without.is_empty() {
        String::new()
    } else {
        format!("; {} (no replicas) on the primary", names(&without))
    };
    let policy = match topo.replicas.policy {
        ReadPolicy::RoundRobin => "round_robin",
        ReadPolicy::LeastBusy => "least_busy",
    };
    let consistency = match topo.replicas.consistency {
        Consistency::ReadYourWrites => "read your writes",
        Consistency::Lag => "lag only",
    };
    Some(format!(
        "replicas: outside a transaction, on a replica of {} in rotation ({policy}, {consistency}, \
         max_lag_ms {}), else the primary{others}",
        names(&with),
        topo.replicas.max_lag_ms
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: &str = r#"
version = 1
default_node = "ds0"
[server]
listen = "127.0.0.1:0"
users = [{ name = "app", password = "app" }]
[nodes]
ds0 = { primary = "mysql://u:p@127.0.0.1:1/db", replicas = ["mysql://u:p@127.0.0.1:2/db"] }
ds1 = "mysql://u:p@127.0.0.1:3/db"
[tables.t]
rule = "hash_slot"
column = "id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
"#;

    fn line(rules: &str, sql: &str) -> Option<String> {
        let topo = crate::config::parse(rules, "test").expect("rules");
        let parsed = crate::sql::parse(sql);
        let parsed = parsed.as_ref().map_err(String::as_str);
        let today = chrono::NaiveDate::from_ymd_opt(2026, 12, 5).expect("a date");
        let plan = super::super::with_offline_ctx(&topo, today, |ctx| {
            super::super::plan(sql, parsed, &[], &topo, ctx)
        });
        describe(sql, parsed, &plan, &topo)
    }

    #[test]
    fn route_says_where_a_read_may_go_and_why_not() {
        // id 12: slot 205, ds0's; id 1: slot 951, ds1's.
        let on_replica = line(RULES, "SELECT v FROM t WHERE id = 12").expect("a line");
        assert!(
            on_replica.contains("on a replica of ds0 in rotation"),
            "{on_replica}"
        );
        assert!(!on_replica.contains("ds1"), "{on_replica}");
        let scatter = line(RULES, "SELECT v FROM t").expect("a line");
        assert!(scatter.contains("replica of ds0") && scatter.contains("ds1 (no replicas)"));
        for (sql, why) in [
            ("SELECT v FROM t WHERE id = 1", "have none"),
            ("SELECT v FROM t WHERE id = 12 FOR UPDATE", "a locking read"),
            ("SELECT /*+ primary */ v FROM t WHERE id = 12", "comment"),
            (
                "SELECT GET_LOCK('a', 1) FROM t WHERE id = 12",
                "side effect",
            ),
            ("UPDATE t SET v = 'x' WHERE id = 12", "not a SELECT"),
        ] {
            let l = line(RULES, sql).expect("a line");
            assert!(
                l.starts_with("replicas: none") && l.contains(why),
                "{sql}: {l}"
            );
        }
        let plain = RULES.replace(
            r#"{ primary = "mysql://u:p@127.0.0.1:1/db", replicas = ["mysql://u:p@127.0.0.1:2/db"] }"#,
            r#""mysql://u:p@127.0.0.1:1/db""#,
        );
        assert_eq!(line(&plain, "SELECT v FROM t WHERE id = 12"), None);
    }
}
