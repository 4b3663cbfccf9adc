//! The client of bench/many_clients.sh: many connections to one MySQL endpoint at once.
//!
//!   many_clients URL active CLIENTS STATEMENTS KEYS
//!     CLIENTS connections, all connected before any runs; then each runs STATEMENTS
//!     statements by key (a prepared point read, an UPDATE, a text point read, in turn) on
//!     keys below KEYS. Prints `clients=N served=N errors=N secs=S qps=Q` and the first
//!     errors.
//!   many_clients URL idle CLIENTS SECS
//!     CLIENTS connections opened (each logged in and asked `SELECT 1`), held idle for SECS
//!     seconds, then closed. Prints `clients=N connected=N errors=N connect_secs=S` once all
//!     are open (the caller reads the proxy's memory meanwhile), then `closed`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

/// How long a client may take to connect and log in.
const CONNECT: Duration = Duration::from_secs(60);

fn usage() -> ! {
    eprintln!("usage: many_clients URL active CLIENTS STATEMENTS KEYS | URL idle CLIENTS SECS");
    std::process::exit(2)
}

fn num(s: Option<&String>) -> u64 {
    s.and_then(|s| s.parse().ok()).unwrap_or_else(|| usage())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let url = args.first().unwrap_or_else(|| usage()).clone();
    let opts = mysql_async::Opts::from_url(&url).unwrap_or_else(|e| {
        eprintln!("many_clients: bad URL: {e}");
        std::process::exit(2)
    });
    match args.get(1).map(String::as_str) {
        Some("active") => {
            active(
                opts,
                num(args.get(2)),
                num(args.get(3)),
                num(args.get(4)).max(1),
            )
            .await
        }
        Some("idle") => idle(opts, num(args.get(2)), num(args.get(3))).await,
        _ => usage(),
    }
}

async fn active(opts: mysql_async::Opts, clients: u64, statements: u64, keys: u64) {
    let all_in = Arc::new(tokio::sync::Barrier::new(clients as usize + 1));
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (opts, all_in) = (opts.clone(), all_in.clone());
        tasks.push(tokio::spawn(async move {
            let conn = tokio::time::timeout(CONNECT, mysql_async::Conn::new(opts)).await;
            all_in.wait().await;
            let mut conn = match conn {
                Ok(c) => c.map_err(|e| format!("connect: {e}"))?,
                Err(_) => return Err(format!("not connected within {CONNECT:?}")),
            };
            for i in 0..statements {
                let key = (c * 7919 + i * 104_729) % keys;
                let r = match i % 3 {
                    0 => {
                        conn.exec_drop("SELECT n FROM t_many WHERE user_id = ?", (key,))
                            .await
                    }
                    1 => {
                        conn.exec_drop("UPDATE t_many SET n = n + 1 WHERE user_id = ?", (key,))
                            .await
                    }
                    _ => {
                        conn.query_drop(format!("SELECT n FROM t_many WHERE user_id = {key}"))
                            .await
                    }
                };
                r.map_err(|e| format!("statement {i}: {e}"))?;
            }
            conn.disconnect()
                .await
                .map_err(|e| format!("disconnect: {e}"))
        }));
    }
    all_in.wait().await;
    let started = Instant::now();
    let mut errors = Vec::new();
    for t in tasks {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => errors.push(e),
            Err(e) => errors.push(format!("panic: {e}")),
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let served = clients - errors.len() as u64;
    println!(
        "clients={clients} served={served} errors={} secs={secs:.2} qps={:.0}",
        errors.len(),
        (served * statements) as f64 / secs
    );
    for e in errors.iter().take(3) {
        println!("  error: {e}");
    }
}

async fn idle(opts: mysql_async::Opts, clients: u64, secs: u64) {
    let started = Instant::now();
    let mut conns = Vec::with_capacity(clients as usize);
    let mut errors = Vec::new();
    // Opened 200 at a time: a burst of 10,000 handshakes at once only measures the backlog.
    let mut next = 0;
    while next < clients {
        let batch = (clients - next).min(200);
        let opened = futures::future::join_all((0..batch).map(|_| {
            let opts = opts.clone();
            async move {
                let open = async {
                    let mut c = mysql_async::Conn::new(opts).await?;
                    c.query_drop("SELECT 1").await?;
                    Ok::<_, mysql_async::Error>(c)
                };
                match tokio::time::timeout(CONNECT, open).await {
                    Ok(r) => r.map_err(|e| e.to_string()),
                    Err(_) => Err(format!("not connected within {CONNECT:?}")),
                }
            }
        }))
        .await;
        for r in opened {
            match r {
                Ok(c) => conns.push(c),
                Err(e) => errors.push(e),
            }
        }
        next += batch;
    }
    println!(
        "clients={clients} connected={} errors={} connect_secs={:.1}",
        conns.len(),
        errors.len(),
        started.elapsed().as_secs_f64()
    );
    for e in errors.iter().take(3) {
        println!("  error: {e}");
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    drop(conns);
    println!("closed");
}
