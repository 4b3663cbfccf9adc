//! The client of bench/migration.sh: an application's load (point reads and increments,
//! prepared, over every key) through the proxy, before, during and after a live migration
//! of slots it starts on the admin interface; per step, the load's rate and latencies, writes
//! to the moving slots apart from the others, and the backfill's rows per second. After the
//! move: `after` (its first 5 s) and `settled` (as long as the baseline, from 5 s on).
//!
//!   migration_load PROXY_URL ADMIN_URL TABLE ROWS CLIENTS BASELINE_S "MIGRATE ..."
//!
//! The last line: `backfill_rows_per_s=N cutover_max_write_ms_moving=F
//! cutover_max_write_ms_other=F qps_baseline=N qps_backfill=N qps_move=N qps_settled=N
//! p99_ms_baseline=F p99_ms_backfill=F`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Pool};
use rand::{Rng, SeedableRng};

/// One statement: when it started (ms since the bench began), how long it took, whether it
/// wrote, whether its key is in the moving slots.
#[derive(Clone, Copy)]
struct Op {
    at_ms: u64,
    us: u64,
    write: bool,
    moving: bool,
}

fn slot(k: i64) -> u16 {
    (crc32fast::hash(k.to_string().as_bytes()) % 1024) as u16
}

fn arg(i: usize) -> String {
    std::env::args().nth(i).unwrap_or_else(|| {
        eprintln!("usage: migration_load PROXY_URL ADMIN_URL TABLE ROWS CLIENTS BASELINE_S \"MIGRATE ...\"");
        std::process::exit(2)
    })
}

fn pct(v: &mut [u64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i] as f64 / 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let proxy = arg(1);
    let admin = arg(2);
    let table = arg(3);
    let rows: i64 = arg(4).parse().expect("ROWS");
    let clients: usize = arg(5).parse().expect("CLIENTS");
    let baseline: u64 = arg(6).parse().expect("BASELINE_S");
    let migrate = arg(7);
    let (first, last) = {
        let r = migrate
            .split_whitespace()
            .nth(2)
            .expect("MIGRATE SLOTS a-b OF ...");
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        (a.parse::<u16>().expect("a"), b.parse::<u16>().expect("b"))
    };
    let pool = Pool::new(Opts::from_url(&proxy).expect("proxy url"));
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let ops: Arc<Mutex<Vec<Op>>> = Arc::default();
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (pool, stop, ops, errors, table) = (
            pool.clone(),
            stop.clone(),
            ops.clone(),
            errors.clone(),
            table.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut conn = pool.get_conn().await.expect("connect");
            let mut rng = rand::rngs::StdRng::seed_from_u64(c as u64);
            let read = format!("SELECT v FROM {table} WHERE id = ?");
            let write = format!("UPDATE {table} SET v = v + 1 WHERE id = ?");
            let mut mine = Vec::with_capacity(1 << 16);
            while !stop.load(Ordering::Relaxed) {
                let k = rng.gen_range(1..=rows);
                let w = rng.gen_bool(0.5);
                let t0 = Instant::now();
                let r = if w {
                    conn.exec_drop(write.as_str(), (k,)).await
                } else {
                    conn.exec_drop(read.as_str(), (k,)).await
                };
                let s = slot(k);
                mine.push(Op {
                    at_ms: t0.duration_since(start).as_millis() as u64,
                    us: t0.elapsed().as_micros() as u64,
                    write: w,
                    moving: (first..=last).contains(&s),
                });
                if let Err(e) = r {
                    errors.lock().expect("errors").push(e.to_string());
                }
            }
            ops.lock().expect("ops").extend(mine);
        }));
    }
    // The steps as the admin interface shows them.
    let mut ops_conn = Conn::new(Opts::from_url(&admin).expect("admin url"))
        .await
        .expect("admin");
    tokio::time::sleep(Duration::from_secs(baseline)).await;
    ops_conn.query_drop(&migrate).await.expect("MIGRATE");
    let info = ops_conn.info().to_string();
    let id: String = info.split_whitespace().nth(1).unwrap_or("1").to_string();
    let mut steps: Vec<(u64, String)> = vec![(0, "baseline".into())];
    let (mut copied, mut backfill_ms) = (0u64, 0u64);
    let mut backfill_from = None;
    loop {
        let rows: Vec<(String, String, String)> = ops_conn
            .query_map("SHOW MIGRATIONS", |r: mysql_async::Row| {
                (
                    r.get::<String, _>("id").unwrap_or_default(),
                    r.get::<String, _>("step").unwrap_or_default(),
                    r.get::<String, _>("rows_copied").unwrap_or_default(),
                )
            })
            .await
            .expect("SHOW MIGRATIONS");
        let Some((_, step, c)) = rows.into_iter().find(|r| r.0 == id) else {
            panic!("no migration {id}");
        };
        let now = start.elapsed().as_millis() as u64;
        if steps.last().map(|s| &s.1) != Some(&step) {
            if step == "backfill" {
                backfill_from = Some(now);
            } else if let Some(f) = backfill_from.take() {
                backfill_ms = now - f;
            }
            steps.push((now, step.clone()));
        }
        copied = c.parse().unwrap_or(copied);
        if step == "done" || step == "aborted" {
            break;
        }
        // Every 10 ms about the cutover, whose boundaries the stall's figure needs; every
        // 100 ms through the long copy and cleanup, so the watching costs little itself.
        let every = if step == "backfill" || step == "cleanup" {
            100
        } else {
            10
        };
        tokio::time::sleep(Duration::from_millis(every)).await;
    }
    let done = start.elapsed().as_millis() as u64;
    // The five seconds after the move (the source's purge of the deleted rows runs on), then
    // as long as the baseline: the new placement's own rate, which a move's cost is not.
    tokio::time::sleep(Duration::from_secs(5)).await;
    steps.push((done, "after".into()));
    steps.push((start.elapsed().as_millis() as u64, "settled".into()));
    tokio::time::sleep(Duration::from_secs(baseline)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("client");
    }
    let end = start.elapsed().as_millis() as u64;
    let ops = ops.lock().expect("ops").clone();
    let errors = errors.lock().expect("errors").clone();

    // Each op in the step that was current when it started.
    let mut by: BTreeMap<usize, (String, u64, u64, Vec<Op>)> = BTreeMap::new();
    for (i, (t, s)) in steps.iter().enumerate() {
        let until = steps.get(i + 1).map_or(end, |n| n.0);
        by.insert(i, (s.clone(), *t, until, Vec::new()));
    }
    for op in &ops {
        let i = steps.iter().rposition(|(t, _)| *t <= op.at_ms).unwrap_or(0);
        if let Some(e) = by.get_mut(&i) {
            e.3.push(*op);
        }
    }
    println!(
        "{:<12} {:>7} {:>8} {:>9} {:>9} {:>12} {:>12} {:>12}",
        "step",
        "secs",
        "qps",
        "read_p99",
        "write_p99",
        "mv_write_p99",
        "mv_write_max",
        "ot_write_max"
    );
    let (mut qps_base, mut qps_fill, mut p99_base, mut p99_fill) = (0.0, 0.0, 0.0, 0.0);
    let mut qps_settled = 0.0;
    let (mut stall_moving, mut stall_other) = (0.0f64, 0.0f64);
    // Every step of the move, from its first to `done`.
    let (mut move_ops, mut move_secs) = (0usize, 0.0f64);
    for (name, from, until, v) in by.values() {
        let secs = (until.saturating_sub(*from)) as f64 / 1000.0;
        if secs <= 0.0 {
            continue;
        }
        let mut reads: Vec<u64> = v.iter().filter(|o| !o.write).map(|o| o.us).collect();
        let mut writes: Vec<u64> = v.iter().filter(|o| o.write).map(|o| o.us).collect();
        let mut mv: Vec<u64> = v
            .iter()
            .filter(|o| o.write && o.moving)
            .map(|o| o.us)
            .collect();
        let ot_max = v
            .iter()
            .filter(|o| o.write && !o.moving)
            .map(|o| o.us)
            .max()
            .unwrap_or(0) as f64
            / 1000.0;
        let mv_max = mv.iter().copied().max().unwrap_or(0) as f64 / 1000.0;
        let qps = v.len() as f64 / secs;
        let all_p99 = {
            let mut a: Vec<u64> = v.iter().map(|o| o.us).collect();
            pct(&mut a, 0.99)
        };
        if !matches!(name.as_str(), "baseline" | "after" | "settled") {
            (move_ops, move_secs) = (move_ops + v.len(), move_secs + secs);
        }
        match name.as_str() {
            "baseline" => (qps_base, p99_base) = (qps, all_p99),
            "backfill" => (qps_fill, p99_fill) = (qps, all_p99),
            "settled" => qps_settled = qps,
            "cutover" => (stall_moving, stall_other) = (mv_max, ot_max),
            _ => {}
        }
        println!(
            "{:<12} {:>7.1} {:>8.0} {:>9.2} {:>9.2} {:>12.2} {:>12.2} {:>12.2}",
            name,
            secs,
            qps,
            pct(&mut reads, 0.99),
            pct(&mut writes, 0.99),
            pct(&mut mv, 0.99),
            mv_max,
            ot_max
        );
    }
    let rps = if backfill_ms > 0 {
        copied as f64 * 1000.0 / backfill_ms as f64
    } else {
        0.0
    };
    println!("client errors: {}", errors.len());
    for e in errors.iter().take(5) {
        println!("  {e}");
    }
    let qps_move = move_ops as f64 / move_secs.max(0.001);
    println!(
        "backfill_rows_per_s={rps:.0} cutover_max_write_ms_moving={stall_moving:.1} cutover_max_write_ms_other={stall_other:.1} qps_baseline={qps_base:.0} qps_backfill={qps_fill:.0} qps_move={qps_move:.0} qps_settled={qps_settled:.0} p99_ms_baseline={p99_base:.2} p99_ms_backfill={p99_fill:.2}"
    );
    pool.disconnect().await.ok();
}
