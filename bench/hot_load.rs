//! The client of bench/hot_spots.sh: an application's load through two proxies whose
//! balancer runs in `[balance] mode = "auto"`, in phases that move the hot spot: uniform
//! keys, then Zipf over keys, then a hot set (half of all statements on keys of a few slots
//! of one node), then one tenant (one key) suddenly taking half of all statements, then the
//! hot set wandering to another node's keys every WANDER seconds.
//! Every second it reads the load (`SHOW LOAD`, `SHOW HOT SLOTS`) and the balancer's plans
//! (`SHOW REBALANCE`) from the first proxy's admin interface. Per phase: when a slot was
//! first reported hot, when the first move was queued, the nodes' max/mean node time before
//! and after, the QPS, the errors, and what `SHOW BALANCE` says it cannot move at its end;
//! at the end the moves, any slot or key moved more than once, and any moved back to a node
//! it had left.
//!
//!   hot_load PROXY_A PROXY_B ADMIN_A ROWS CLIENTS PHASE_S WANDER_S WANDERS
//!
//! The last line:
//! `phases=N moves=N slots_moved_twice=N back_and_forth=N errors=N updates=N`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Pool};
use rand::{Rng, SeedableRng};

#[path = "admin_rows.rs"]
mod admin_rows;
use admin_rows::{answer, max_mean};

fn slot(k: i64) -> u16 {
    (crc32fast::hash(k.to_string().as_bytes()) % 1024) as u16
}

fn arg(i: usize) -> String {
    std::env::args().nth(i).unwrap_or_else(|| {
        eprintln!("usage: hot_load PROXY_A PROXY_B ADMIN_A ROWS CLIENTS PHASE_S WANDER_S WANDERS");
        std::process::exit(2)
    })
}

/// How a client picks its key, by phase.
#[derive(Clone, Debug)]
enum Pick {
    Uniform,
    Zipf,
    /// Half the statements on these keys, the rest uniform.
    HotSet(Vec<i64>),
}

/// A balancer's plan: the phase it was first seen in, when, and its last `SHOW REBALANCE`
/// row.
type Seen = (usize, f64, HashMap<String, String>);

/// One second of the load as the first proxy's admin interface saw it.
#[derive(Debug, Default, Clone)]
struct Second {
    at: f64,
    qps: u64,
    errors: u64,
    max_mean: f64,
    /// The slots reported hot.
    hot: Vec<u16>,
}

/// Keys of `n` different slots whose slot lies in `slots` (a node's range), from the top of
/// the key space.
fn hot_set(rows: i64, slots: std::ops::RangeInclusive<u16>, n: usize) -> Vec<i64> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for k in (1..=rows).rev() {
        let s = slot(k);
        if slots.contains(&s) && !seen.contains(&s) {
            seen.push(s);
            out.push(k);
            if out.len() == n {
                break;
            }
        }
    }
    out
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (proxy_a, proxy_b, admin) = (arg(1), arg(2), arg(3));
    let rows: i64 = arg(4).parse().expect("ROWS");
    let clients: usize = arg(5).parse().expect("CLIENTS");
    let phase_s: u64 = arg(6).parse().expect("PHASE_S");
    let wander_s: u64 = arg(7).parse().expect("WANDER_S");
    let wanders: usize = arg(8).parse().expect("WANDERS");

    // Zipf (s = 1.1) over the keys, by a cumulative table; rank r is key (r * 7919) % rows + 1
    // so the heavy keys fall in scattered slots.
    let cdf: Arc<Vec<f64>> = {
        let mut acc = 0.0;
        let mut v = Vec::with_capacity(rows as usize);
        for r in 1..=rows {
            acc += 1.0 / (r as f64).powf(1.1);
            v.push(acc);
        }
        Arc::new(v)
    };
    // Slot ranges of ds0-ds3 in the bench's rules.
    let node_slots = |n: u16| n * 256..=n * 256 + 255;
    let mut phases: Vec<(String, Pick, u64)> = vec![
        ("uniform".into(), Pick::Uniform, phase_s),
        ("zipf".into(), Pick::Zipf, phase_s),
        (
            "hot_set_ds1".into(),
            Pick::HotSet(hot_set(rows, node_slots(1), 6)),
            phase_s * 2,
        ),
        (
            "tenant_ds2".into(),
            Pick::HotSet(hot_set(rows, node_slots(2), 1)),
            phase_s,
        ),
    ];
    for w in 0..wanders {
        let n = [2u16, 3, 0, 1][w % 4];
        phases.push((
            format!("wander_ds{n}"),
            Pick::HotSet(hot_set(rows, node_slots(n), 6)),
            wander_s,
        ));
    }
    let pick: Arc<Mutex<Pick>> = Arc::new(Mutex::new(Pick::Uniform));
    let stop = Arc::new(AtomicBool::new(false));
    let (done, errors, updates) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let first_errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let phase_no = Arc::new(AtomicUsize::new(0));
    let pools = [
        Pool::new(Opts::from_url(&proxy_a).expect("proxy A")),
        Pool::new(Opts::from_url(&proxy_b).expect("proxy B")),
    ];
    let mut tasks = Vec::new();
    for c in 0..clients {
        let pool = pools[c % 2].clone();
        let (pick, stop, done, errors, updates, first_errors, cdf) = (
            pick.clone(),
            stop.clone(),
            done.clone(),
            errors.clone(),
            updates.clone(),
            first_errors.clone(),
            cdf.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut conn = pool.get_conn().await.expect("connect");
            let mut rng = rand::rngs::StdRng::seed_from_u64(c as u64);
            while !stop.load(Ordering::Relaxed) {
                let p = pick.lock().expect("pick").clone();
                let k = match p {
                    Pick::Uniform => rng.gen_range(1..=rows),
                    Pick::Zipf => {
                        let x = rng.gen::<f64>() * cdf[cdf.len() - 1];
                        let r = cdf.partition_point(|v| *v < x) as i64 + 1;
                        (r * 7919) % rows + 1
                    }
                    Pick::HotSet(keys) => {
                        if rng.gen_bool(0.5) {
                            keys[rng.gen_range(0..keys.len())]
                        } else {
                            rng.gen_range(1..=rows)
                        }
                    }
                };
                let write = rng.gen_bool(0.1);
                let r = if write {
                    conn.exec_drop("UPDATE t_hot SET v = v + 1 WHERE id = ?", (k,))
                        .await
                } else {
                    conn.exec_drop("SELECT v FROM t_hot WHERE id = ?", (k,))
                        .await
                };
                match r {
                    Ok(()) => {
                        done.fetch_add(1, Ordering::Relaxed);
                        if write {
                            updates.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(e) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        let mut f = first_errors.lock().expect("errors");
                        if f.len() < 5 {
                            f.push(e.to_string());
                        }
                    }
                }
            }
        }));
    }

    // The watcher: a second of load, and each new plan of the balancer.
    let start = Instant::now();
    let seconds: Arc<Mutex<Vec<(usize, Second)>>> = Arc::default();
    let plans: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let watcher = {
        let (stop, done, errors, seconds, plans, phase_no) = (
            stop.clone(),
            done.clone(),
            errors.clone(),
            seconds.clone(),
            plans.clone(),
            phase_no.clone(),
        );
        tokio::spawn(async move {
            let mut c = Conn::new(Opts::from_url(&admin).expect("admin"))
                .await
                .expect("admin");
            let (mut last_done, mut last_errors) = (0, 0);
            let mut every = tokio::time::interval(Duration::from_secs(1));
            loop {
                every.tick().await;
                // A second cut short by the end is not a second of load.
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let (d, e) = (done.load(Ordering::Relaxed), errors.load(Ordering::Relaxed));
                let max_mean = max_mean(&mut c).await;
                let hot = answer(&mut c, "SHOW HOT SLOTS").await;
                let s = Second {
                    at: start.elapsed().as_secs_f64(),
                    qps: d - last_done,
                    errors: e - last_errors,
                    max_mean,
                    hot: hot
                        .iter()
                        .filter(|r| r["state"].starts_with("hot"))
                        .filter_map(|r| r["slot"].parse().ok())
                        .collect(),
                };
                (last_done, last_errors) = (d, e);
                let p = phase_no.load(Ordering::Relaxed);
                seconds.lock().expect("seconds").push((p, s));
                let plan = answer(&mut c, "SHOW REBALANCE").await;
                if let Some(r) = plan.first() {
                    let mut known = plans.lock().expect("plans");
                    match known.iter_mut().find(|(_, _, k)| k["plan"] == r["plan"]) {
                        Some(k) => k.2 = r.clone(),
                        None => known.push((p, start.elapsed().as_secs_f64(), r.clone())),
                    }
                }
            }
        })
    };

    let mut bounds = Vec::new();
    let mut unmoved: Vec<(String, String)> = Vec::new();
    let mut ops = Conn::new(Opts::from_url(&arg(3)).expect("admin"))
        .await
        .expect("admin");
    for (i, (name, p, secs)) in phases.iter().enumerate() {
        *pick.lock().expect("pick") = p.clone();
        phase_no.store(i, Ordering::Relaxed);
        let from = start.elapsed().as_secs_f64();
        eprintln!("== phase {name} for {secs}s");
        tokio::time::sleep(Duration::from_secs(*secs)).await;
        bounds.push((name.clone(), from, start.elapsed().as_secs_f64()));
        // What the balancer says it cannot move, as the phase ends.
        for r in answer(&mut ops, "SHOW BALANCE").await {
            if r["action"].starts_with("--") {
                unmoved.push((name.clone(), r["action"].clone()));
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("client");
    }
    watcher.await.expect("watcher");

    let seconds = seconds.lock().expect("seconds").clone();
    let plans = plans.lock().expect("plans").clone();
    println!(
        "{:<12} {:>5} {:>9} {:>10} {:>7} {:>9} {:>9} {:>8} {:>8} {:>7}",
        "phase",
        "secs",
        "first_hot",
        "first_move",
        "moves",
        "mm_start",
        "mm_end",
        "qps",
        "qps_min",
        "errors"
    );
    for (i, (name, from, to)) in bounds.iter().enumerate() {
        let mine: Vec<&Second> = seconds
            .iter()
            .filter(|(p, _)| *p == i)
            .map(|(_, s)| s)
            .collect();
        // When the phase's own hot spot was first reported: a slot of its hot set, or (Zipf)
        // any slot.
        let target: Option<Vec<u16>> = match &phases[i].1 {
            Pick::HotSet(keys) => Some(keys.iter().map(|k| slot(*k)).collect()),
            _ => None,
        };
        let first_hot = mine
            .iter()
            .find(|s| match &target {
                Some(t) => s.hot.iter().any(|h| t.contains(h)),
                None => !s.hot.is_empty(),
            })
            .map(|s| s.at - from);
        let moves: Vec<&Seen> = plans
            .iter()
            .filter(|(p, _, r)| *p == i && r["what"].starts_with("BALANCE"))
            .collect();
        let first_move = moves.first().map(|(_, at, _)| at - from);
        // max/mean node time over the phase's first 10 s after its first 3, and its last 10.
        let avg =
            |v: &[&&Second]| v.iter().map(|s| s.max_mean).sum::<f64>() / v.len().max(1) as f64;
        let early: Vec<&&Second> = mine
            .iter()
            .filter(|s| s.at - from >= 3.0 && s.at - from < 13.0)
            .collect();
        let late: Vec<&&Second> = mine.iter().filter(|s| to - s.at < 10.0).collect();
        let qps: Vec<u64> = mine.iter().map(|s| s.qps).collect();
        let mean_qps = qps.iter().sum::<u64>() / qps.len().max(1) as u64;
        println!(
            "{:<12} {:>5.0} {:>9} {:>10} {:>7} {:>9.2} {:>9.2} {:>8} {:>8} {:>7}",
            name,
            to - from,
            first_hot.map_or("-".into(), |t| format!("{t:.1}s")),
            first_move.map_or("-".into(), |t| format!("{t:.1}s")),
            moves.len(),
            avg(&early),
            avg(&late),
            mean_qps,
            qps.iter().skip(1).min().copied().unwrap_or(0),
            mine.iter().map(|s| s.errors).sum::<u64>()
        );
    }
    for (phase, said) in &unmoved {
        println!("unmoved at the end of {phase}: {said}");
    }
    // Each slot's or key's moves in order: (source, target).
    let mut moved: HashMap<String, Vec<(String, String)>> = HashMap::new();
    for (_, at, r) in &plans {
        if r["what"].starts_with("BALANCE") {
            println!(
                "move at {:>6.1}s: {} of {} {} -> {} ({}) {}",
                at, r["slots"], r["tables"], r["source"], r["target"], r["plan_state"], r["what"]
            );
            moved
                .entry(format!("{}/{}", r["tables"], r["slots"]))
                .or_default()
                .push((r["source"].clone(), r["target"].clone()));
        }
    }
    let twice = moved.values().filter(|m| m.len() > 1).count();
    // A move to a node the slot or key had been moved off.
    let back = moved
        .values()
        .map(|m| {
            (1..m.len())
                .filter(|i| m[..*i].iter().any(|(from, _)| *from == m[*i].1))
                .count()
        })
        .sum::<usize>();
    for e in first_errors.lock().expect("errors").iter() {
        println!("error: {e}");
    }
    println!(
        "phases={} moves={} slots_moved_twice={} back_and_forth={} errors={} updates={}",
        bounds.len(),
        plans
            .iter()
            .filter(|(_, _, r)| r["what"].starts_with("BALANCE"))
            .count(),
        twice,
        back,
        errors.load(Ordering::Relaxed),
        updates.load(Ordering::Relaxed)
    );
}
