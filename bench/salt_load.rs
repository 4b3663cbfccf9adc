//! The client of bench/salt.sh: one tenant taking half of all statements, through two
//! proxies whose balancer runs in `[balance] mode = "suggest"`, salted live by the
//! `SALT KEY` statement `SHOW BALANCE` offers for it. Phases: `before` (PHASE_S s), then it
//! waits for `SHOW BALANCE` to offer a `SALT KEY` (at most 30 s), runs it on the first proxy's
//! admin interface and keeps the load on until `SHOW REBALANCE` says the plan is done
//! (`salting`, at most 600 s), then `after` (PHASE_S s). Every second it reads `SHOW LOAD`
//! from the first proxy's admin interface. Per phase: its seconds, mean QPS, the nodes' mean
//! max/mean node time over its last 10 s, its errors; at the end the hot tenant's and the
//! table's rows and sum of `v` through the first proxy.
//!
//!   salt_load PROXY_A PROXY_B ADMIN_A TENANTS ROWS_PER HOT HOT_ROWS CLIENTS PHASE_S
//!
//! The last line: `before_qps=N salting_qps=N after_qps=N before_max_mean=F
//! after_max_mean=F errors=N updates=N hot_rows=N hot_sum=N`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Pool, Row};
use rand::{Rng, SeedableRng};

#[path = "admin_rows.rs"]
mod admin_rows;
#[path = "phases.rs"]
mod phases;
use admin_rows::answer;
use phases::{print_rows, Counters, REBALANCE_COLUMNS};

const PHASES: [&str; 3] = ["before", "salting", "after"];
/// The phase index while it waits for `SHOW BALANCE`: counted in no phase.
const SEEKING: usize = PHASES.len();

fn arg(i: usize) -> String {
    std::env::args().nth(i).unwrap_or_else(|| {
        eprintln!(
            "usage: salt_load PROXY_A PROXY_B ADMIN_A TENANTS ROWS_PER HOT HOT_ROWS CLIENTS PHASE_S"
        );
        std::process::exit(2)
    })
}

fn num(i: usize, what: &str) -> i64 {
    arg(i)
        .parse()
        .unwrap_or_else(|_| panic!("{what} must be a number"))
}

/// The first row's two numbers (a NULL is 0).
async fn pair(c: &mut Conn, sql: &str) -> (i64, i64) {
    let row: Row = c
        .query_first(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .unwrap_or_else(|| panic!("{sql}: no row"));
    let at = |i: usize| {
        row.get_opt::<Option<String>, _>(i)
            .and_then(Result::ok)
            .flatten()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (at(0), at(1))
}

/// Salts the hot key as `SHOW BALANCE` offers it, and waits until its plan is done; what went
/// wrong if it could not.
/// `started` is set when the statement runs (the `salting` phase begins).
async fn salt(
    ops: &mut Conn,
    counters: &Counters,
    started: &mut Option<Instant>,
) -> Result<(), String> {
    let seek = Instant::now();
    let action = loop {
        let balance = answer(ops, "SHOW BALANCE").await;
        if let Some(r) = balance.iter().find(|r| r["action"].starts_with("SALT KEY")) {
            break r["action"].clone();
        }
        if seek.elapsed() > Duration::from_secs(30) {
            print_rows(
                "SHOW BALANCE",
                &balance,
                "mode action slot_ms_per_s from_ms_per_s to_ms_per_s",
            );
            return Err("SHOW BALANCE offered no SALT KEY within 30s".into());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    println!(
        "offered after {:.1}s: {action}",
        seek.elapsed().as_secs_f64()
    );
    let statement = action.split(" -- ").next().unwrap_or_default().trim();
    counters.phase.store(1, Ordering::Relaxed);
    let at = Instant::now();
    *started = Some(at);
    ops.query_drop(statement)
        .await
        .map_err(|e| format!("{statement}: {e}"))?;
    println!("ran: {statement}");
    println!("answer: {}", ops.info());
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rows = answer(ops, "SHOW REBALANCE").await;
        let state = rows.first().map_or("", |r| r["plan_state"].as_str());
        if state == "done" {
            println!("plan done after {:.1}s", at.elapsed().as_secs_f64());
            print_rows("SHOW REBALANCE", &rows, REBALANCE_COLUMNS);
            return Ok(());
        }
        if state == "aborted" || at.elapsed() > Duration::from_secs(600) {
            print_rows("SHOW REBALANCE", &rows, REBALANCE_COLUMNS);
            return Err(format!(
                "the plan is '{state}' after {:.0}s",
                at.elapsed().as_secs_f64()
            ));
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (proxy_a, proxy_b, admin) = (arg(1), arg(2), arg(3));
    let tenants = num(4, "TENANTS");
    let rows_per = num(5, "ROWS_PER");
    let hot = num(6, "HOT");
    let hot_rows = num(7, "HOT_ROWS");
    let clients = num(8, "CLIENTS") as usize;
    let phase_s = num(9, "PHASE_S") as u64;
    assert!(
        tenants >= 2 && (1..=tenants).contains(&hot),
        "HOT must be one of the TENANTS"
    );

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
                // Half on the hot tenant, half on any other, each on one of its rows.
                let (t, id) = if rng.gen_bool(0.5) {
                    (hot, rng.gen_range(1..=hot_rows))
                } else {
                    let mut t = rng.gen_range(1..tenants);
                    if t >= hot {
                        t += 1;
                    }
                    (
                        t,
                        hot_rows + (t - 1) * rows_per + rng.gen_range(1..=rows_per),
                    )
                };
                let write = rng.gen_bool(0.1);
                let r = if write {
                    conn.exec_drop(
                        "UPDATE t_tenant SET v = v + 1 WHERE tenant_id = ? AND id = ?",
                        (t, id),
                    )
                    .await
                } else {
                    conn.exec_drop(
                        "SELECT v FROM t_tenant WHERE tenant_id = ? AND id = ?",
                        (t, id),
                    )
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
    // Each phase run: its index, and its start and end.
    let mut spans: Vec<(usize, Instant, Instant)> = Vec::new();
    let from = Instant::now();
    eprintln!("== phase before for {phase_s}s");
    tokio::time::sleep(Duration::from_secs(phase_s)).await;
    spans.push((0, from, Instant::now()));
    counters.phase.store(SEEKING, Ordering::Relaxed);
    eprintln!("== waiting for SHOW BALANCE to offer a SALT KEY, then salting");
    let mut salting_from = None;
    let salted = salt(&mut ops, &counters, &mut salting_from).await;
    if let Some(from) = salting_from {
        spans.push((1, from, Instant::now()));
    }
    let salted = salted.map(|()| String::new());
    phases::end(&counters, 2, phase_s, &salted, &mut spans, tasks, watcher).await;
    let summary = phases::summary(&PHASES, &counters, &spans);

    let mut conn = pools[0].get_conn().await.expect("proxy A");
    let (hot_count, hot_sum) = pair(
        &mut conn,
        &format!("SELECT COUNT(*), SUM(v) FROM t_tenant WHERE tenant_id = {hot}"),
    )
    .await;
    let (all_count, all_sum) = pair(&mut conn, "SELECT COUNT(*), SUM(v) FROM t_tenant").await;
    println!("through proxy A: tenant {hot} rows={hot_count} sum={hot_sum}; t_tenant rows={all_count} sum={all_sum}");
    println!(
        "before_qps={} salting_qps={} after_qps={} before_max_mean={:.2} after_max_mean={:.2} errors={} updates={} hot_rows={} hot_sum={}",
        summary[0].0,
        summary[1].0,
        summary[2].0,
        summary[0].1,
        summary[2].1,
        counters.errors.load(Ordering::Relaxed),
        counters.updates.load(Ordering::Relaxed),
        hot_count,
        hot_sum
    );
    drop(conn);
    for p in pools {
        let _ = p.disconnect().await;
    }
    if salted.is_err() {
        std::process::exit(1);
    }
}
