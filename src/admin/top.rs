//! `shardproxy top`: a live terminal view of a proxy's load, from its admin interface:
//! `SHOW LOAD`, `SHOW HOT SLOTS`, `SHOW HOT KEYS` and `SHOW BALANCE`, redrawn every interval.

use std::fmt::Write as _;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Row};

/// Rows of each listing shown.
const ROWS: usize = 12;

/// An admin answer as text: its column names and its rows.
async fn ask(c: &mut Conn, sql: &str) -> Result<(Vec<String>, Vec<Vec<String>>), String> {
    let mut result = c.query_iter(sql).await.map_err(|e| format!("{sql}: {e}"))?;
    let columns: Vec<String> = result
        .columns_ref()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    let rows: Vec<Row> = result.collect().await.map_err(|e| format!("{sql}: {e}"))?;
    let rows = rows
        .into_iter()
        .map(|r| {
            (0..r.len())
                .map(|i| {
                    r.get_opt::<Option<String>, _>(i)
                        .and_then(Result::ok)
                        .flatten()
                        .unwrap_or_default()
                })
                .collect()
        })
        .collect();
    Ok((columns, rows))
}

/// `rows` under `columns`, each column as wide as its widest cell.
fn table(out: &mut String, title: &str, columns: &[String], rows: &[Vec<String>], empty: &str) {
    let _ = writeln!(out, "{title}");
    if rows.is_empty() {
        let _ = writeln!(out, "  {empty}\n");
        return;
    }
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| {
            rows.iter()
                .take(ROWS)
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .chain([columns[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let mut l = String::from(" ");
        for (i, w) in widths.iter().enumerate() {
            let c = cells.get(i).map_or("", String::as_str);
            let _ = write!(l, " {c:<w$}");
        }
        l.trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(columns));
    for r in rows.iter().take(ROWS) {
        let _ = writeln!(out, "{}", line(r));
    }
    if rows.len() > ROWS {
        let _ = writeln!(out, "  ... {} more", rows.len() - ROWS);
    }
    let _ = writeln!(out);
}

/// One screen: the four listings.
async fn screen(c: &mut Conn) -> Result<String, String> {
    let mut out = String::new();
    let (cols, rows) = ask(c, "SHOW LOAD").await?;
    table(
        &mut out,
        "NODES (a second, over the last [hot] seconds)",
        &cols,
        &rows,
        "no node load yet",
    );
    let (cols, rows) = ask(c, "SHOW HOT SLOTS").await?;
    table(
        &mut out,
        "SLOTS (hot first)",
        &cols,
        &rows,
        "no statement routed by key yet",
    );
    let (cols, rows) = ask(c, "SHOW HOT KEYS").await?;
    table(&mut out, "HOT KEYS", &cols, &rows, "no hot slot");
    let (cols, rows) = ask(c, "SHOW BALANCE").await?;
    table(&mut out, "BALANCE", &cols, &rows, "nothing to move");
    Ok(out)
}

/// Draws the view every `interval` until interrupted, or once (`once`: for scripts).
pub async fn run(admin: &str, interval: Duration, once: bool) -> Result<(), String> {
    let opts = Opts::from_url(admin).map_err(|e| format!("admin URL `{admin}`: {e}"))?;
    let mut c = Conn::new(opts)
        .await
        .map_err(|e| format!("cannot reach the admin interface: {e}"))?;
    loop {
        let s = screen(&mut c).await?;
        if once {
            print!("{s}");
            return Ok(());
        }
        // Home and clear, then the screen.
        print!("\x1b[H\x1b[2J{s}");
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        tokio::time::sleep(interval).await;
    }
}
