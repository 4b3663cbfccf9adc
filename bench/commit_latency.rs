//! The client of `bench/commit.sh`: runs transactions of two UPDATEs against a server (the
//! proxy, or a node directly) and prints the latency of their COMMIT and of the whole
//! transaction.
//!
//!   commit_latency URL KIND CLIENTS SECONDS
//!
//! KIND: `one` (both rows on the slot range of the first node: slots 0-511) or `two` (one row
//! on each: slots 0-511 and 512-1023), as prepared statements; `one-text` / `two-text` send
//! the UPDATEs as text queries. The table `t_acct (id BIGINT PRIMARY KEY, balance
//! BIGINT)` must hold ids 1..=2000. Each client uses rows of its own, so nothing waits on a
//! lock. Prints one line:
//!   kind=K clients=N tps=T commit_p50_us=.. commit_p99_us=.. tx_p50_us=.. tx_p99_us=..

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

fn slot(k: i64) -> u32 {
    crc32fast::hash(k.to_string().as_bytes()) % 1024
}

fn pct(v: &mut [u64], p: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, kind, clients, seconds] = args.as_slice() else {
        anyhow::bail!("usage: commit_latency URL one|two CLIENTS SECONDS");
    };
    let clients: usize = clients.parse()?;
    let seconds: u64 = seconds.parse()?;
    let (two, text) = match kind.as_str() {
        "one" => (false, false),
        "two" => (true, false),
        "one-text" => (false, true),
        "two-text" => (true, true),
        other => anyhow::bail!("KIND must be one, two, one-text or two-text, got {other}"),
    };
    let low: Vec<i64> = (1..=2000).filter(|k| slot(*k) < 512).collect();
    let high: Vec<i64> = (1..=2000).filter(|k| slot(*k) >= 512).collect();
    let opts = mysql_async::Opts::from_url(url)?;
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (a, b) = if two {
            (low[c], high[c])
        } else {
            (low[2 * c], low[2 * c + 1])
        };
        let opts = opts.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = mysql_async::Conn::new(opts).await?;
            let stop = Instant::now() + Duration::from_secs(seconds);
            let (mut commit, mut whole) = (Vec::new(), Vec::new());
            while Instant::now() < stop {
                let t0 = Instant::now();
                conn.query_drop("BEGIN").await?;
                if text {
                    conn.query_drop(format!(
                        "UPDATE t_acct SET balance = balance - 1 WHERE id = {a}"
                    ))
                    .await?;
                    conn.query_drop(format!(
                        "UPDATE t_acct SET balance = balance + 1 WHERE id = {b}"
                    ))
                    .await?;
                } else {
                    conn.exec_drop("UPDATE t_acct SET balance = balance - 1 WHERE id = ?", (a,))
                        .await?;
                    conn.exec_drop("UPDATE t_acct SET balance = balance + 1 WHERE id = ?", (b,))
                        .await?;
                }
                let t1 = Instant::now();
                conn.query_drop("COMMIT").await?;
                commit.push(t1.elapsed().as_micros() as u64);
                whole.push(t0.elapsed().as_micros() as u64);
            }
            conn.disconnect().await?;
            Ok::<_, anyhow::Error>((commit, whole))
        }));
    }
    let (mut commit, mut whole) = (Vec::new(), Vec::new());
    for t in tasks {
        let (c, w) = t.await??;
        commit.extend(c);
        whole.extend(w);
    }
    let tps = whole.len() as f64 / seconds as f64;
    println!(
        "kind={kind} clients={clients} tps={tps:.0} commit_p50_us={} commit_p99_us={} tx_p50_us={} tx_p99_us={}",
        pct(&mut commit, 0.5),
        pct(&mut commit, 0.99),
        pct(&mut whole, 0.5),
        pct(&mut whole, 0.99)
    );
    Ok(())
}
