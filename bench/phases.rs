//! What the phased bench clients share (bench/salt.sh, bench/range.sh): the load's counters,
//! a watcher that records each second's QPS, errors and the nodes' max/mean node time (from
//! the first proxy's `SHOW LOAD`) under the phase it fell in, and the per-phase summary.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::{Conn, Opts};

use super::admin_rows::max_mean;

/// Error texts kept per phase.
const KEPT_ERRORS: usize = 3;

/// One second of the load as the first proxy's admin interface saw it.
#[derive(Debug, Default, Clone)]
pub struct Second {
    pub qps: u64,
    pub errors: u64,
    pub max_mean: f64,
}

/// The load's counters, shared by the clients and the watcher.
#[derive(Debug, Default)]
pub struct Counters {
    pub stop: AtomicBool,
    pub done: AtomicU64,
    pub errors: AtomicU64,
    pub updates: AtomicU64,
    /// The phase now (an index into the client's phases; past them: in none).
    pub phase: AtomicUsize,
    first_errors: Mutex<Vec<(usize, String)>>,
    seconds: Mutex<Vec<(usize, Second)>>,
}

impl Counters {
    /// A statement's outcome (`write`: it was an increment).
    pub fn count(&self, r: Result<(), mysql_async::Error>, write: bool) {
        match r {
            Ok(()) => {
                self.done.fetch_add(1, Ordering::Relaxed);
                if write {
                    self.updates.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                let p = self.phase.load(Ordering::Relaxed);
                let mut f = self.first_errors.lock().expect("errors");
                if f.iter().filter(|(q, _)| *q == p).count() < KEPT_ERRORS {
                    f.push((p, e.to_string()));
                }
            }
        }
    }
}

/// Records a second of load until `stop`, each under the phase it fell in.
pub fn watch(admin: String, c: Arc<Counters>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut conn = Conn::new(Opts::from_url(&admin).expect("admin"))
            .await
            .expect("admin");
        let (mut last_done, mut last_errors) = (0, 0);
        let mut every = tokio::time::interval(Duration::from_secs(1));
        loop {
            every.tick().await;
            // A second cut short by the end is not a second of load.
            if c.stop.load(Ordering::Relaxed) {
                break;
            }
            let (d, e) = (
                c.done.load(Ordering::Relaxed),
                c.errors.load(Ordering::Relaxed),
            );
            let p = c.phase.load(Ordering::Relaxed);
            let max_mean = max_mean(&mut conn).await;
            let s = Second {
                qps: d - last_done,
                errors: e - last_errors,
                max_mean,
            };
            (last_done, last_errors) = (d, e);
            c.seconds.lock().expect("seconds").push((p, s));
        }
    })
}

/// The last phase (`phase`), `secs` seconds long, once the one before ended well (else
/// `failed` is said); then the load stops and the clients and the watcher end.
pub async fn end(
    c: &Counters,
    phase: usize,
    secs: u64,
    before: &Result<String, String>,
    spans: &mut Vec<(usize, Instant, Instant)>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    watcher: tokio::task::JoinHandle<()>,
) {
    match before {
        Ok(_) => {
            c.phase.store(phase, Ordering::Relaxed);
            let from = Instant::now();
            eprintln!("== last phase for {secs}s");
            tokio::time::sleep(Duration::from_secs(secs)).await;
            spans.push((phase, from, Instant::now()));
        }
        Err(e) => println!("failed: {e}"),
    }
    c.stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("client");
    }
    watcher.await.expect("watcher");
}

/// Prints each phase's seconds, mean QPS, max/mean node time over its last 10 s and errors
/// (with its first error texts); returns each phase's (QPS, max/mean).
pub fn summary(
    names: &[&str],
    c: &Counters,
    spans: &[(usize, Instant, Instant)],
) -> Vec<(u64, f64)> {
    let seconds = c.seconds.lock().expect("seconds").clone();
    let first_errors = c.first_errors.lock().expect("errors").clone();
    println!(
        "{:<9} {:>5} {:>8} {:>9} {:>7}",
        "phase", "secs", "qps", "max_mean", "errors"
    );
    let mut out = Vec::new();
    for (p, name) in names.iter().enumerate() {
        let mine: Vec<&Second> = seconds
            .iter()
            .filter(|(q, _)| *q == p)
            .map(|(_, s)| s)
            .collect();
        let qps = mine.iter().map(|s| s.qps).sum::<u64>() / mine.len().max(1) as u64;
        let last = &mine[mine.len().saturating_sub(10)..];
        let max_mean = last.iter().map(|s| s.max_mean).sum::<f64>() / last.len().max(1) as f64;
        out.push((qps, max_mean));
        let Some((_, from, to)) = spans.iter().find(|(q, _, _)| *q == p) else {
            continue;
        };
        println!(
            "{:<9} {:>5.0} {:>8} {:>9.2} {:>7}",
            name,
            (*to - *from).as_secs_f64(),
            qps,
            max_mean,
            mine.iter().map(|s| s.errors).sum::<u64>()
        );
        for (_, e) in first_errors.iter().filter(|(q, _)| *q == p) {
            println!("  error: {e}");
        }
    }
    out
}

/// Prints `rows`, each as `column=value` for the `columns` named (space-separated).
pub fn print_rows(what: &str, rows: &[HashMap<String, String>], columns: &str) {
    println!("{what}: {} rows", rows.len());
    for r in rows {
        let cells: Vec<String> = columns
            .split(' ')
            .map(|c| format!("{c}={}", r.get(c).map_or("", String::as_str)))
            .collect();
        println!("  {}", cells.join(" "));
    }
}

pub const REBALANCE_COLUMNS: &str = "plan plan_state what slots source target step message";
