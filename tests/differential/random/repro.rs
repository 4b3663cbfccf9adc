//! The random tester's repro tool: statements of a file run on both sides, every answer
//! printed in full, for minimising a difference (`random_repro`, ignored: run it by name).

use mysql_async::prelude::Queryable;
use mysql_async::Value;

use super::{
    both, created_tables, cut, drop_everywhere, load, parse_params, proxy_for, show_row,
    sort_exactly, Fixture, Mode,
};
use crate::judge::{judge, must, Answer, Check, Compare, Outcome, Pair};
use crate::{cluster, SHARDS};

/// Statements of a file (`RANDOM_REPRO=path`) on both sides, every answer printed in full:
/// for minimising a difference. The file has sections `-- rules` (the `[tables.*]` TOML),
/// `-- load` (statements run on both sides) and `-- queries`, statements ending with `;` at
/// the end of a line; or `-- seed N` in place of rules and load (that seed's tables).
#[tokio::test]
#[ignore = "a tool: RANDOM_REPRO=file"]
async fn random_repro() {
    let path = std::env::var("RANDOM_REPRO").expect("RANDOM_REPRO=path of a repro file");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut section = "";
    let (mut rules, mut loads) = (String::new(), String::new());
    // Statements and, from a `-- params: 1, 'abc'` line after one, its parameters.
    let mut queries: Vec<(String, Option<Vec<Value>>)> = Vec::new();
    let mut pending = String::new();
    let mut seed: Option<u64> = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("-- ") {
            let name = name.trim();
            if let Some(n) = name.strip_prefix("seed ") {
                seed = Some(n.trim().parse().expect("-- seed N"));
            } else if let Some(p) = name.strip_prefix("params:") {
                if let Some(last) = queries.last_mut() {
                    last.1 = Some(parse_params(p));
                }
            } else if ["rules", "load", "queries"].contains(&name) {
                section = ["rules", "load", "queries"]
                    .into_iter()
                    .find(|s| *s == name)
                    .unwrap_or("");
            }
            continue;
        }
        match section {
            "rules" => rules.push_str(line),
            "load" => loads.push_str(line),
            "queries" => {
                pending.push_str(line);
                if line.trim_end().ends_with(';') {
                    let sql = pending.trim().trim_end_matches(';').to_string();
                    queries.push((sql, None));
                    pending.clear();
                    continue;
                }
            }
            _ => continue,
        }
        match section {
            "rules" => rules.push('\n'),
            "load" => loads.push('\n'),
            _ => pending.push('\n'),
        }
    }
    let statements = |s: &str| -> Vec<String> {
        s.split(";\n")
            .map(|x| x.trim().trim_end_matches(';').to_string())
            .filter(|x| !x.is_empty())
            .collect()
    };
    let fx = match seed {
        Some(n) => Fixture::seed(n),
        None => {
            let load = statements(&loads);
            Fixture {
                id: path.clone(),
                rules: rules.clone(),
                tables: created_tables(&load),
                describe: String::new(),
                load,
                random: None,
            }
        }
    };
    let proxy = proxy_for(&fx);
    let mut pair = Pair::new(&proxy, cluster()).await;
    load(&mut pair, &fx).await;
    // RANDOM_REPRO_LOG=1: what the proxy sent each node (the nodes' general log).
    let log = std::env::var("RANDOM_REPRO_LOG").is_ok_and(|v| v == "1");
    for (sql, params) in &queries {
        let modes = match params {
            Some(p) => vec![Mode::Params(sql.clone(), p.clone())],
            None => vec![Mode::Text, Mode::Prepared],
        };
        for mode in &modes {
            if log {
                general_log(true).await;
            }
            let (mut want, mut got) = both(&mut pair, &proxy, sql, mode).await;
            let show = |a: &Answer| match a {
                Ok(rs) => {
                    let rows: Vec<String> = rs.rows.iter().take(60).map(|r| show_row(r)).collect();
                    format!("{} row(s): {}", rs.rows.len(), rows.join(" "))
                }
                Err(e) => format!("error: {e}"),
            };
            eprintln!(
                "{}{sql}\n  reference: {}\n  proxy:     {}",
                match mode {
                    Mode::Text => String::new(),
                    Mode::Prepared => "(prepared) ".to_string(),
                    Mode::Params(_, p) => format!("(parameters {p:?}) "),
                },
                show(&want),
                show(&got)
            );
            let in_order = judge(&want, &got, &Check::exact(Compare::Ordered));
            sort_exactly(&mut want, &[]);
            sort_exactly(&mut got, &[]);
            let unordered = judge(&want, &got, &Check::exact(Compare::Ordered));
            eprintln!(
                "  as a multiset: {}\n  in order: {}",
                outcome_word(&unordered),
                outcome_word(&in_order)
            );
            if log {
                general_log(false).await;
                if matches!(mode, Mode::Text) {
                    if let Ok(r) = pair.r.query_iter(sql.as_str()).await {
                        let cols: Vec<String> = r
                            .columns()
                            .map(|cs| {
                                cs.iter()
                                    .map(|c| format!("{}:{}", c.name_str(), c.character_set()))
                                    .collect()
                            })
                            .unwrap_or_default();
                        let _ = r.drop_result().await;
                        eprintln!("  reference column collation ids: {}", cols.join(" "));
                    }
                }
            }
        }
    }
    drop_everywhere(&mut pair, &fx).await;
}

/// Turns the shard nodes' general log on (emptied first) or prints it and turns it off.
async fn general_log(on: bool) {
    let c = cluster();
    for node in SHARDS {
        let pool = c.direct(node);
        let mut conn = pool.get_conn().await.expect("connect to a shard");
        if on {
            for sql in [
                "SET GLOBAL log_output = 'TABLE'",
                "TRUNCATE mysql.general_log",
                "SET GLOBAL general_log = 1",
            ] {
                must(&mut conn, sql, "a shard").await;
            }
        } else {
            must(&mut conn, "SET GLOBAL general_log = 0", "a shard").await;
            let rows: Vec<(String, String)> = conn
                .query(
                    "SELECT command_type, CONVERT(argument USING utf8mb4) FROM mysql.general_log \
                     WHERE command_type IN ('Query', 'Execute', 'Prepare') \
                     AND argument NOT LIKE '%general_log%' ORDER BY event_time",
                )
                .await
                .expect("read the general log");
            for (kind, text) in rows {
                eprintln!("    ds{node} {kind}: {}", cut(&text, 600));
            }
        }
        drop(conn);
        pool.disconnect().await.ok();
    }
}

fn outcome_word(o: &Outcome) -> String {
    match o {
        Outcome::Matched => "matched".into(),
        Outcome::Refused(r) => format!("refused ({r})"),
        Outcome::Wrong(why) => format!("DIFFERENT: {}", cut(why, 300)),
    }
}
