//! The client of bench/range.sh: half of all statements on the low keys of one range of a
//! range table, through two proxies whose balancer runs in `[balance] mode = "auto"`, which
//! splits that range and moves a part of it live. Phases: `before`, until the balancer's first
//! plan shows in `SHOW REBALANCE` (at most 120 s), `balancing`, until that plan is done (at
//! most 600 s), then `after` (PHASE_S s), in which the balancer may act again. Per phase: its seconds, mean QPS, the nodes' mean max/mean node time over its
//! last 10 s, its errors; at the end the table's rows and sum of `v` through the first proxy,
//! and `SHOW RANGES`.
//!
//!   range_load PROXY_A PROXY_B ADMIN_A ROWS HOT_FROM HOT_KEYS CLIENTS PHASE_S
//!
//! The last line: `before_qps=N balancing_qps=N after_qps=N before_max_mean=F
//! after_max_mean=F errors=N updates=N rows=N sum=N split=K`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Pool};
use rand::{Rng, SeedableRng};

#[path = "admin_rows.rs"]
mod admin_rows;
#[path = "phases.rs"]
mod phases;
use admin_rows::answer;
use phases::{print_rows, Counters, REBALANCE_COLUMNS};

const PHASES: [&str; 3] = ["before", "balancing", "after"];

fn num(i: usize, what: &str) -> i64 {
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| {
            eprintln!(
                "usage: range_load PROXY_A PROXY_B ADMIN_A ROWS HOT_FROM HOT_KEYS CLIENTS PHASE_S ({what})"
            );
            std::process::exit(2)
        })
}

fn arg(i: usize) -> String {
    std::env::args().nth(i).unwrap_or_else(|| {
        eprintln!(
            "usage: range_load PROXY_A PROXY_B ADMIN_A ROWS HOT_FROM HOT_KEYS CLIENTS PHASE_S"
        );
        std::process::exit(2)
    })
}

/// Waits for the balancer's first plan (`before` ends when it appears) and then for its end;
/// the move's `slots` (`range from 'K'`).
async fn balanced(
    ops: &mut Conn,
    counters: &Counters,
    spans: &mut Vec<(usize, Instant, Instant)>,
) -> Result<String, String> {
    let wait = Instant::now();
    loop {
        let rows = answer(ops, "SHOW REBALANCE").await;
        if rows
            .first()
            .is_some_and(|r| r["what"].starts_with("BALANCE"))
        {
            counters.phase.store(1, Ordering::Relaxed);
            spans.push((0, wait, Instant::now()));
            println!(
                "balancer's plan after {:.1}s: {}",
                wait.elapsed().as_secs_f64(),
                rows[0]["what"]
            );
            break;
        }
        if wait.elapsed() > Duration::from_secs(120) {
            print_rows(
                "SHOW BALANCE",
                &answer(ops, "SHOW BALANCE").await,
                "mode action slot_ms_per_s from_ms_per_s to_ms_per_s",
            );
            return Err("no balancing plan within 120s".into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let at = Instant::now();
    loop {
        let rows = answer(ops, "SHOW REBALANCE").await;
        let state = rows.first().map_or("", |r| r["plan_state"].as_str());
        if state == "done" {
            spans.push((1, at, Instant::now()));
            println!("plan done after {:.1}s", at.elapsed().as_secs_f64());
            print_rows("SHOW REBALANCE", &rows, REBALANCE_COLUMNS);
            return Ok(rows[0]["slots"].clone());
        }
        if state == "aborted" || at.elapsed() > Duration::from_secs(600) {
            print_rows("SHOW REBALANCE", &rows, REBALANCE_COLUMNS);
            return Err(format!("the plan is '{state}'"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (proxy_a, proxy_b, admin) = (arg(1), arg(2), arg(3));
    let rows = num(4, "ROWS");
    let hot_from = num(5, "HOT_FROM");
    let hot_keys = num(6, "HOT_KEYS");
    let clients = num(7, "CLIENTS") as usize;
    let phase_s = num(8, "PHASE_S") as u64;

    let counters = Arc::new(Counters::default());
    let pools = [
        Pool::new(Opts::from_url(&proxy_a).expect("proxy A")),
        Pool::new(Opts::from_url(&proxy_b).expect("proxy B")),
    ];
    let mut tasks = Vec::new();
    for c in 0..clients {
        let pool = pools[c % 2].clone();
        let counters = counters.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = pool.get_conn().await.expect("connect");
            let mut rng = rand::rngs::StdRng::seed_from_u64(c as u64);
            while !counters.stop.load(Ordering::Relaxed) {
                // Half on the hot keys, half on any row.
                let id = if rng.gen_bool(0.5) {
                    hot_from + rng.gen_range(0..hot_keys)
                } else {
                    rng.gen_range(1..=rows)
                };
                let write = rng.gen_bool(0.1);
                let r = if write {
                    conn.exec_drop("UPDATE t_log SET v = v + 1 WHERE id = ?", (id,))
                        .await
                } else {
                    conn.exec_drop("SELECT v FROM t_log WHERE id = ?", (id,))
                        .await
                };
                counters.count(r, write);
            }
        }));
    }
    let watcher = phases::watch(admin.clone(), counters.clone());

    let mut ops = Conn::new(Opts::from_url(&admin).expect("admin"))
        .await
        .expect("admin");
    let mut spans: Vec<(usize, Instant, Instant)> = Vec::new();
    eprintln!("== the load until the balancer's first plan, then until its end");
    let moved = balanced(&mut ops, &counters, &mut spans).await;
    phases::end(&counters, 2, phase_s, &moved, &mut spans, tasks, watcher).await;
    let summary = phases::summary(&PHASES, &counters, &spans);

    print_rows(
        "SHOW MIGRATIONS (every move of the run)",
        &answer(&mut ops, "SHOW MIGRATIONS").await,
        "id slots source target step",
    );
    print_rows(
        "SHOW RANGES",
        &answer(&mut ops, "SHOW RANGES FOR t_log").await,
        "range from below node state statements_per_s node_ms_per_s hot",
    );
    let mut conn = pools[0].get_conn().await.expect("proxy A");
    let (count, sum): (i64, i64) = conn
        .query_first("SELECT COUNT(*), CAST(COALESCE(SUM(v), 0) AS SIGNED) FROM t_log")
        .await
        .expect("count")
        .unwrap_or((0, 0));
    let split = moved
        .as_deref()
        .ok()
        .and_then(|s| s.strip_prefix("range from '"))
        .and_then(|s| s.strip_suffix('\''))
        .unwrap_or("-")
        .to_string();
    println!(
        "before_qps={} balancing_qps={} after_qps={} before_max_mean={:.2} after_max_mean={:.2} errors={} updates={} rows={count} sum={sum} split={split}",
        summary[0].0,
        summary[1].0,
        summary[2].0,
        summary[0].1,
        summary[2].1,
        counters.errors.load(Ordering::Relaxed),
        counters.updates.load(Ordering::Relaxed),
    );
    drop(conn);
    for p in pools {
        let _ = p.disconnect().await;
    }
    if moved.is_err() {
        std::process::exit(1);
    }
}
