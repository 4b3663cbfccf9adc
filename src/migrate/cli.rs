//! `shardproxy migrate ...`: the migration statements sent to a proxy's admin interface, and
//! a migration followed to its end with progress bars for the backfill and the verify.

use std::collections::HashMap;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};

use super::copy::CHUNK;

/// What to ask the admin interface.
#[derive(Debug, Clone)]
pub enum Ask {
    /// `MIGRATE SLOTS a-b | KEY 'v' OF t TO node [RATE n] [AUTO]`, then follow it.
    Start {
        what: Moved,
        table: String,
        to: String,
        rate: Option<u64>,
        auto: bool,
        follow: bool,
    },
    Show,
    Cutover(Option<u64>),
    Abort(Option<u64>),
    Follow(u64),
}

/// What a migration moves.
#[derive(Debug, Clone)]
pub enum Moved {
    /// A slot range, `a-b` (or one slot).
    Slots(String),
    /// A directory table's key.
    Key(String),
}

/// A connection to the admin interface at `admin` (`mysql://user:password@host:port`).
pub(super) async fn connect(admin: &str) -> Result<Conn, String> {
    let opts = Opts::from_url(admin).map_err(|e| format!("admin URL `{admin}`: {e}"))?;
    Conn::new(opts)
        .await
        .map_err(|e| format!("cannot reach the admin interface: {e}"))
}

/// Runs `ask` against the admin interface at `admin` (`mysql://user:password@host:port`).
pub async fn run(admin: &str, ask: Ask) -> Result<(), String> {
    let mut c = connect(admin).await?;
    let say = |e: mysql_async::Error| e.to_string();
    match ask {
        Ask::Start {
            what,
            table,
            to,
            rate,
            auto,
            follow: f,
        } => {
            let mut sql = match what {
                Moved::Key(k) => {
                    format!(
                        "MIGRATE KEY {} OF {table} TO {to}",
                        crate::sql::write::admin_word(&k)
                    )
                }
                Moved::Slots(range) => format!("MIGRATE SLOTS {range} OF {table} TO {to}"),
            };
            if let Some(r) = rate {
                sql.push_str(&format!(" RATE {r}"));
            }
            if auto {
                sql.push_str(" AUTO");
            }
            c.query_drop(&sql).await.map_err(say)?;
            let info = c.info().to_string();
            println!("{info}");
            let id = info
                .split_whitespace()
                .nth(1)
                .and_then(|w| w.parse::<u64>().ok());
            match (f, id) {
                (true, Some(id)) => follow(&mut c, id).await,
                _ => Ok(()),
            }
        }
        Ask::Show => {
            let rows = rows(&mut c).await?;
            for m in rows {
                println!(
                    "{:>4} {:<16} {:<9} {} -> {:<6} {:<11} copied {}/{} verified {} differing {} {}",
                    m["id"],
                    m["table"],
                    m["slots"],
                    m["source"],
                    m["target"],
                    m["step"],
                    m["rows_copied"],
                    m["rows_estimate"],
                    m["chunks_verified"],
                    m["chunks_differing"],
                    m["message"]
                );
            }
            Ok(())
        }
        Ask::Cutover(id) | Ask::Abort(id) => {
            let verb = if matches!(ask, Ask::Cutover(_)) {
                "CUTOVER"
            } else {
                "ABORT"
            };
            let sql = match id {
                Some(id) => format!("{verb} {id}"),
                None => verb.to_string(),
            };
            c.query_drop(&sql).await.map_err(say)?;
            println!("{}", c.info());
            Ok(())
        }
        Ask::Follow(id) => follow(&mut c, id).await,
    }
}

async fn rows(c: &mut Conn) -> Result<Vec<HashMap<String, String>>, String> {
    named_rows(c, "SHOW MIGRATIONS").await
}

/// The rows `sql` answers, each by column name (a NULL as the empty string).
pub(super) async fn named_rows(
    c: &mut Conn,
    sql: &str,
) -> Result<Vec<HashMap<String, String>>, String> {
    let rows: Vec<mysql_async::Row> = c.query(sql).await.map_err(|e| e.to_string())?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let cols: Vec<String> = r
                .columns_ref()
                .iter()
                .map(|c| c.name_str().to_string())
                .collect();
            cols.into_iter()
                .enumerate()
                .map(|(i, name)| {
                    let v: Option<String> = r.get::<Option<String>, _>(i).flatten();
                    (name, v.unwrap_or_default())
                })
                .collect()
        })
        .collect())
}

fn bar(m: &MultiProgress, what: &str) -> ProgressBar {
    let b = m.add(ProgressBar::new(0));
    let style =
        ProgressStyle::with_template(&format!("{what:>8} [{{bar:40}}] {{pos}}/{{len}} {{msg}}"))
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
    b.set_style(style);
    b
}

/// Shows migration `id` until it ends (or waits for its CUTOVER).
async fn follow(c: &mut Conn, id: u64) -> Result<(), String> {
    let m = MultiProgress::new();
    let copy = bar(&m, "backfill");
    let verify = bar(&m, "verify");
    let mut last_step = String::new();
    loop {
        let all = rows(c).await?;
        let Some(row) = all.iter().find(|r| r["id"] == id.to_string()) else {
            return Err(format!("no migration {id}"));
        };
        let num = |k: &str| row.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let estimate = num("rows_estimate");
        copy.set_length(estimate.max(num("rows_copied")));
        copy.set_position(num("rows_copied"));
        copy.set_message(format!("{} rows/s", row["rows_per_sec"]));
        let chunks = estimate.div_ceil(CHUNK as u64).max(1);
        verify.set_length(chunks.max(num("chunks_verified")));
        verify.set_position(num("chunks_verified"));
        verify.set_message(format!("{} differed", row["chunks_differing"]));
        let step = row["step"].clone();
        if step != last_step {
            let _ = m.println(format!("migration {id}: {step} {}", row["message"]));
            last_step = step.clone();
        }
        match step.as_str() {
            "done" => {
                copy.finish();
                verify.finish();
                let what = if row["slots"].starts_with("key") {
                    row["slots"].clone()
                } else {
                    format!("slots {}", row["slots"])
                };
                println!(
                    "migration {id} done: {what} of `{}` on `{}`",
                    row["table"], row["target"]
                );
                return Ok(());
            }
            "aborted" => {
                copy.abandon();
                verify.abandon();
                return Err(format!("migration {id} aborted: {}", row["message"]));
            }
            "ready" => {
                verify.finish();
                println!(
                    "migration {id} is verified and waits for its cutover: shardproxy migrate cutover {id}"
                );
                return Ok(());
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
