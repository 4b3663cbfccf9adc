//! `shardproxy rebalance ...` and `shardproxy node ...`: the rebalancer's statements sent to
//! a proxy's admin interface (`REBALANCE`, `DRAIN NODE`, `ADD NODE ... REBALANCE`,
//! `REMOVE NODE`, `SHOW | PAUSE | RESUME | ABORT REBALANCE`), a `DRY RUN`'s moves printed as
//! a table, and a plan followed to its end: one bar for the whole plan, one per move under
//! way, then a summary line; the exit status says whether every move was done.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::cli::{connect, named_rows};

/// A row of an admin answer, by column name.
pub type Row = HashMap<String, String>;

/// How often a followed plan is looked at.
const POLL: Duration = Duration::from_millis(300);

/// The steps of a move under way (started, not finished).
const IN_FLIGHT: &str = "prepare dual_write backfill verify ready cutover cleanup aborting";

/// The `DRY RUN` answer's columns, in order.
const PLAN_COLUMNS: &str = "step statement tables from to slots est_rows";

/// The `SHOW REBALANCE` columns printed for each move (the plan's own are in a heading).
const MOVE_COLUMNS: &str =
    "seq migration tables slots source target step rows_copied rows_estimate rows_per_sec message";

/// What to ask the admin interface.
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// `REBALANCE [TABLE t | ALL] [DRY RUN] [RATE r]`.
    Rebalance { table: Option<String>, how: Run },
    /// `SHOW REBALANCE`, as a table.
    Show,
    /// `PAUSE REBALANCE`.
    Pause,
    /// `RESUME REBALANCE`.
    Resume,
    /// `ABORT REBALANCE`.
    Abort,
    /// The newest plan followed to its end.
    Follow,
    /// `ADD NODE n 'url' [WEIGHT w] [REBALANCE]` (followed: only with `REBALANCE`).
    AddNode {
        name: String,
        url: String,
        weight: Option<u32>,
        rebalance: bool,
        follow: bool,
    },
    /// `DRAIN NODE n [DRY RUN] [RATE r]`.
    Drain { name: String, how: Run },
    /// `REMOVE NODE n`.
    Remove { name: String },
}

/// How a plan is asked for: printed (`DRY RUN`) or queued, at a rate, and followed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Run {
    pub dry_run: bool,
    /// Rows per second each move may copy or delete.
    pub rate: Option<u64>,
    pub follow: bool,
}

impl Run {
    /// The statement's last words: ` DRY RUN`, ` RATE r`.
    fn words(&self) -> String {
        let dry = if self.dry_run { " DRY RUN" } else { "" };
        let rate = self.rate.map(|r| format!(" RATE {r}")).unwrap_or_default();
        format!("{dry}{rate}")
    }
}

/// `name` is one word of the admin language (what its statements' words are made of).
fn one_word(what: &str, name: &str) -> Result<(), String> {
    let part = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.') || !c.is_ascii();
    if !name.is_empty() && name.chars().all(part) {
        return Ok(());
    }
    Err(format!(
        "{what} `{name}` is not one word (letters, digits, `_`, `$`, `.`)"
    ))
}

impl Ask {
    /// The admin statement, or why it cannot be sent (checked before connecting).
    pub fn statement(&self) -> Result<String, String> {
        Ok(match self {
            Ask::Rebalance { table: None, how } => format!("REBALANCE ALL{}", how.words()),
            Ask::Rebalance {
                table: Some(t),
                how,
            } => {
                one_word("table", t)?;
                format!("REBALANCE TABLE {t}{}", how.words())
            }
            Ask::Show | Ask::Follow => "SHOW REBALANCE".to_string(),
            Ask::Pause => "PAUSE REBALANCE".to_string(),
            Ask::Resume => "RESUME REBALANCE".to_string(),
            Ask::Abort => "ABORT REBALANCE".to_string(),
            Ask::AddNode {
                name,
                url,
                weight,
                rebalance,
                ..
            } => {
                one_word("node name", name)?;
                if url.contains('\'') || url.contains('\\') {
                    return Err(format!(
                        "the URL `{url}` holds a single quote or a backslash, which ADD NODE does not take: percent-encode it (%27 for ', %5C for \\)"
                    ));
                }
                let weight = weight.map(|w| format!(" WEIGHT {w}")).unwrap_or_default();
                let then = if *rebalance { " REBALANCE" } else { "" };
                format!("ADD NODE {name} '{url}'{weight}{then}")
            }
            Ask::Drain { name, how } => {
                one_word("node name", name)?;
                format!("DRAIN NODE {name}{}", how.words())
            }
            Ask::Remove { name } => {
                one_word("node name", name)?;
                format!("REMOVE NODE {name}")
            }
        })
    }

    fn dry_run(&self) -> bool {
        matches!(self, Ask::Rebalance { how, .. } | Ask::Drain { how, .. } if how.dry_run)
    }

    /// Follow the plan the statement queues?
    fn follows(&self) -> bool {
        match self {
            Ask::Rebalance { how, .. } | Ask::Drain { how, .. } => how.follow && !how.dry_run,
            Ask::AddNode {
                follow, rebalance, ..
            } => *follow && *rebalance,
            _ => false,
        }
    }
}

/// Runs `ask` against the admin interface at `admin` (`mysql://user:password@host:port`).
/// An error when the statement is refused, or a followed plan is aborted or leaves a move
/// not done.
pub async fn run(admin: &str, ask: Ask) -> Result<(), String> {
    let sql = ask.statement()?;
    let mut c = connect(admin).await?;
    let r = match &ask {
        Ask::Show => named_rows(&mut c, &sql).await.map(|rows| {
            println!("{}", show_text(&rows));
        }),
        Ask::Follow => follow(&mut c, None, None).await,
        _ if ask.dry_run() => named_rows(&mut c, &sql).await.map(|rows| {
            println!("{}", dry_run_text(&rows));
        }),
        _ => {
            let queued_at = Instant::now();
            match c.query_drop(&sql).await {
                Err(e) => Err(e.to_string()),
                Ok(()) => {
                    let info = c.info().to_string();
                    println!("{info}");
                    match plan_id_in(&info) {
                        Some(id) if ask.follows() => {
                            follow(&mut c, Some(id), Some(queued_at)).await
                        }
                        _ => Ok(()),
                    }
                }
            }
        }
    };
    let _ = c.disconnect().await;
    r
}

/// The plan id in a queued plan's message (`rebalance 3 queued (...)`, also after `ADD
/// NODE`'s own words and a `;`).
pub fn plan_id_in(info: &str) -> Option<u64> {
    let words: Vec<&str> = info.split_whitespace().collect();
    words.windows(3).find_map(|w| match w {
        ["rebalance", id, "queued"] => id.parse().ok(),
        _ => None,
    })
}

/// The slots a move's `slots` column names: `a-b` is b-a+1, `a` one, a key (`key 'v'`) none.
pub fn slots_of(s: &str) -> u64 {
    let s = s.trim();
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    match (a.trim().parse::<u64>(), b.trim().parse::<u64>()) {
        (Ok(a), Ok(b)) if b >= a => b - a + 1,
        _ => 0,
    }
}

fn num(r: &Row, k: &str) -> u64 {
    r.get(k)
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map_or(0, |v| v as u64)
}

fn col<'a>(r: &'a Row, k: &str) -> &'a str {
    r.get(k).map_or("", String::as_str)
}

/// Is a move at `step` under way?
pub fn in_flight(step: &str) -> bool {
    IN_FLIGHT.split(' ').any(|s| s == step)
}

/// A plan's state, from its `SHOW REBALANCE` rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    pub plan: String,
    pub what: String,
    pub state: String,
    pub moves: usize,
    pub done: usize,
    pub in_flight: usize,
    pub queued: usize,
    /// Slots the plan moves, and those of its moves done.
    pub slots: u64,
    pub slots_done: u64,
    pub rows_copied: u64,
    /// The rows it copies: each move's estimate (or its rows copied, if more); a move not
    /// started has none yet, so its slots count at the rows per slot of those that have.
    pub rows_estimate: u64,
}

impl Totals {
    /// Has the plan ended (`done` or `aborted`)?
    pub fn ended(&self) -> bool {
        matches!(self.state.as_str(), "done" | "aborted")
    }

    pub fn not_done(&self) -> usize {
        self.moves - self.done
    }
}

/// The newest plan's totals from `SHOW REBALANCE`'s rows (None: no plan yet).
pub fn totals(rows: &[Row]) -> Option<Totals> {
    let first = rows.first()?;
    let mut t = Totals {
        plan: col(first, "plan").to_string(),
        what: col(first, "what").to_string(),
        state: col(first, "plan_state").to_string(),
        moves: rows.len(),
        ..Totals::default()
    };
    // Rows per slot among the moves with an estimate, for the slots of those without.
    let (mut known_rows, mut known_slots, mut unknown_slots) = (0u64, 0u64, 0u64);
    for r in rows {
        let step = col(r, "step");
        let slots = slots_of(col(r, "slots"));
        let copied = num(r, "rows_copied");
        let estimate = num(r, "rows_estimate").max(copied);
        t.slots += slots;
        t.rows_copied += copied;
        match step {
            "done" => {
                t.done += 1;
                t.slots_done += slots;
            }
            "queued" => t.queued += 1,
            s if in_flight(s) => t.in_flight += 1,
            _ => {}
        }
        if step == "dropped" {
            continue;
        }
        if estimate == 0 && step == "queued" {
            unknown_slots += slots;
        } else {
            t.rows_estimate += estimate;
            if slots > 0 {
                known_rows += estimate;
                known_slots += slots;
            }
        }
    }
    if known_slots > 0 {
        t.rows_estimate +=
            (known_rows as u128 * unknown_slots as u128 / known_slots as u128) as u64;
    }
    Some(t)
}

/// Rows per second over `elapsed` (at least a millisecond).
pub fn average_rate(rows: u64, elapsed: Duration) -> f64 {
    rows as f64 / elapsed.as_secs_f64().max(0.001)
}

/// A rate as text: never `0` for a rate above zero.
pub fn fmt_rate(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 1.0 {
        format!("{r:.1}")
    } else if r >= 0.01 {
        format!("{r:.2}")
    } else if r > 0.0 {
        "<0.01".to_string()
    } else {
        "0".to_string()
    }
}

/// A duration as `4.2s`, `3m07s` or `2h05m`.
pub fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1}s")
    } else if s < 3600.0 {
        let s = s as u64;
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        let m = s as u64 / 60;
        format!("{}h{:02}m", m / 60, m % 60)
    }
}

/// The time left at `rate` rows per second (None: no rate yet).
pub fn eta(t: &Totals, rate: f64) -> Option<Duration> {
    if rate <= 0.0 {
        return None;
    }
    let left = t.rows_estimate.saturating_sub(t.rows_copied);
    Some(Duration::from_secs_f64(left as f64 / rate))
}

/// What was seen of a plan while followed: since when, and its rows copied then.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Watched {
    pub elapsed: Duration,
    /// Rows copied before it was followed (0 for a plan queued by this command).
    pub baseline: u64,
}

/// The line printed when a plan ends: its state, moves done and not, rows copied, the time
/// it was followed and the average rate over it (unknown for a plan that had ended before).
pub fn summary(t: &Totals, watched: Option<Watched>) -> String {
    let head = format!(
        "rebalance {} ({}) {}: {} moves done, {} not done; ",
        t.plan,
        t.what,
        t.state,
        t.done,
        t.not_done()
    );
    let tail = match watched {
        None => format!(
            "{} rows copied (it had ended before it was followed: its time is unknown)",
            t.rows_copied
        ),
        Some(w) => {
            let took = fmt_duration(w.elapsed);
            let seen = t.rows_copied.saturating_sub(w.baseline);
            if t.rows_copied == 0 {
                format!("no rows copied, in {took}")
            } else if seen == 0 {
                format!(
                    "{} rows copied, all before it was followed ({took} followed)",
                    t.rows_copied
                )
            } else if w.baseline > 0 {
                format!(
                    "{} rows copied, {seen} of them in the {took} followed: average {} rows/s",
                    t.rows_copied,
                    fmt_rate(average_rate(seen, w.elapsed))
                )
            } else {
                format!(
                    "{} rows copied in {took}: average {} rows/s",
                    t.rows_copied,
                    fmt_rate(average_rate(seen, w.elapsed))
                )
            }
        }
    };
    head + &tail
}

/// Ok when the plan ended `done` with every move done; else why not (a non-zero exit).
pub fn outcome(t: &Totals) -> Result<(), String> {
    if t.state == "aborted" {
        Err(format!(
            "rebalance {} was aborted: {} of {} moves not done",
            t.plan,
            t.not_done(),
            t.moves
        ))
    } else if t.not_done() > 0 {
        Err(format!(
            "rebalance {} ended {}: {} of {} moves not done (SHOW REBALANCE; REBALANCE again)",
            t.plan,
            t.state,
            t.not_done(),
            t.moves
        ))
    } else {
        Ok(())
    }
}

/// `rows` as an aligned text table under `headers` (words); a column of numbers is
/// right-aligned.
pub fn table(headers: &str, rows: &[Vec<String>]) -> String {
    let headers: Vec<&str> = headers.split_whitespace().collect();
    let n = headers.len();
    let mut width: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    let mut numeric = vec![true; n];
    for r in rows {
        for (i, cell) in r.iter().enumerate().take(n) {
            width[i] = width[i].max(cell.chars().count());
            if !cell.is_empty() && cell.parse::<f64>().is_err() {
                numeric[i] = false;
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> = cells
            .into_iter()
            .take(n)
            .enumerate()
            .map(|(i, c)| {
                let w = width[i];
                if i + 1 == n {
                    c.to_string()
                } else if numeric[i] {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string()
    };
    let mut out = vec![line(headers.clone())];
    out.extend(
        rows.iter()
            .map(|r| line(r.iter().map(String::as_str).collect())),
    );
    out.join("\n")
}

fn cells(rows: &[Row], columns: &str) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| {
            columns
                .split_whitespace()
                .map(|c| col(r, c).to_string())
                .collect()
        })
        .collect()
}

/// A `DRY RUN`'s moves as a table, with their sum; or that nothing would move.
pub fn dry_run_text(rows: &[Row]) -> String {
    let moves: Vec<&Row> = rows.iter().filter(|r| col(r, "step") != "-").collect();
    let slots: u64 = moves.iter().map(|r| num(r, "slots")).sum();
    let unknown = moves
        .iter()
        .any(|r| col(r, "est_rows").parse::<u64>().is_err());
    let est: u64 = moves.iter().map(|r| num(r, "est_rows")).sum();
    let sum = if moves.is_empty() && rows.is_empty() {
        "no move: every node holds its share already (DRY RUN: nothing queued)".to_string()
    } else if moves.is_empty() {
        "no move now: the tables above have slots moving (DRY RUN: nothing queued)".to_string()
    } else {
        format!(
            "{} moves, {slots} slots, ~{est}{} rows to copy (DRY RUN: nothing queued)",
            moves.len(),
            if unknown { "+" } else { "" }
        )
    };
    if rows.is_empty() {
        return sum;
    }
    format!("{}\n{sum}", table(PLAN_COLUMNS, &cells(rows, PLAN_COLUMNS)))
}

/// `SHOW REBALANCE` as a heading (the plan), a table (its moves) and their sum.
pub fn show_text(rows: &[Row]) -> String {
    let Some(t) = totals(rows) else {
        return "no rebalance has been planned".to_string();
    };
    format!(
        "rebalance {} ({}): {}\n{}\n{} moves: {} done, {} under way, {} queued; slots {}/{}; rows {}/~{}",
        t.plan,
        t.what,
        t.state,
        table(MOVE_COLUMNS, &cells(rows, MOVE_COLUMNS)),
        t.moves,
        t.done,
        t.in_flight,
        t.queued,
        t.slots_done,
        t.slots,
        t.rows_copied,
        t.rows_estimate
    )
}

/// The overall bar's position and length: slots done of the plan's slots (moves, for a
/// plan of directory keys only).
fn overall_position(t: &Totals) -> (u64, u64) {
    if t.slots > 0 {
        (t.slots_done, t.slots)
    } else {
        (t.done as u64, t.moves as u64)
    }
}

/// The overall bar's message: rows, rate, time left, moves under way.
fn overall_message(t: &Totals, rate: f64) -> String {
    format!(
        "{}, rows {}/~{}, {} rows/s, ETA {}, {} under way",
        if t.slots > 0 { "slots" } else { "moves" },
        t.rows_copied,
        // Moves not started have no estimate yet.
        if t.rows_estimate == 0 && t.queued > 0 {
            "?".to_string()
        } else {
            t.rows_estimate.to_string()
        },
        fmt_rate(rate),
        eta(t, rate).map_or_else(|| "?".to_string(), fmt_duration),
        t.in_flight
    )
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// A move as it is named in lines and bars: `#2 205-255 ds0->ds2`.
fn move_name(r: &Row) -> String {
    format!(
        "#{} {} {}->{}",
        col(r, "seq"),
        col(r, "slots"),
        col(r, "source"),
        col(r, "target")
    )
}

/// The line told when a move ends: `move #2 205-255 ds0->ds2: done, 1234 rows copied`, and
/// its message unless it is done (a done move's may be the plan's).
pub fn move_line(r: &Row) -> String {
    let (step, msg) = (col(r, "step"), col(r, "message"));
    let copied = col(r, "rows_copied");
    let mut line = format!("move {}: {step}, {copied} rows copied", move_name(r));
    if step != "done" && !msg.is_empty() {
        line.push_str(&format!(" ({msg})"));
    }
    line
}

/// Follows plan `want` (None: the newest) until it ends, with a bar for the plan and one per
/// move under way; `queued_at`: when this command queued it.
async fn follow(c: &mut Conn, want: Option<u64>, queued_at: Option<Instant>) -> Result<(), String> {
    let m = MultiProgress::new();
    let mut overall: Option<ProgressBar> = None;
    let mut bars: HashMap<String, ProgressBar> = HashMap::new();
    let mut steps: HashMap<String, String> = HashMap::new();
    let mut plan = want.map(|id| id.to_string());
    // Since when, and from how many rows copied, the plan is watched.
    let mut since: Option<(Instant, u64)> = queued_at.map(|t| (t, 0));
    let mut first = true;
    let mut state = String::new();
    loop {
        let rows = named_rows(c, "SHOW REBALANCE").await?;
        let Some(t) = totals(&rows) else {
            return Err("no rebalance has been planned".to_string());
        };
        match &plan {
            Some(p) if *p != t.plan => {
                return Err(format!(
                    "rebalance {p} is no longer the newest plan: rebalance {} ({}) is {}",
                    t.plan, t.what, t.state
                ));
            }
            Some(_) => {}
            None => plan = Some(t.plan.clone()),
        }
        if first {
            if since.is_none() && !t.ended() {
                since = Some((Instant::now(), t.rows_copied));
            }
            m.suspend(|| println!("rebalance {} ({}): {}", t.plan, t.what, t.state));
        }
        // Drawn first, so above the moves' bars; made whole before it is drawn.
        let bar = overall.get_or_insert_with(|| {
            let (pos, len) = overall_position(&t);
            let b = ProgressBar::new(len)
                .with_style(style("{prefix} [{bar:40.cyan/blue}] {pos}/{len} {msg}"))
                .with_prefix(format!("rebalance {}", t.plan))
                .with_position(pos)
                .with_message(overall_message(&t, 0.0));
            m.add(b)
        });
        // A move first seen in a plan this command queued was queued before.
        let fresh = queued_at.is_some() || !first;
        for r in &rows {
            let id = col(r, "migration").to_string();
            let step = col(r, "step");
            let before = steps.insert(id.clone(), step.to_string());
            let before = before.unwrap_or_else(|| if fresh { "queued" } else { step }.into());
            if before != step && !in_flight(step) && step != "queued" {
                m.suspend(|| println!("{}", move_line(r)));
            }
            if in_flight(step) {
                let copied = num(r, "rows_copied");
                let len = num(r, "rows_estimate").max(copied);
                let msg = format!("{step}, {} rows/s", col(r, "rows_per_sec"));
                let b = bars.entry(id).or_insert_with(|| {
                    let b = ProgressBar::new(len)
                        .with_style(style("  {prefix:<28} [{bar:30}] {pos}/{len} {msg}"))
                        .with_prefix(move_name(r))
                        .with_position(copied)
                        .with_message(msg.clone());
                    m.add(b)
                });
                b.set_length(len);
                b.set_position(copied);
                b.set_message(msg);
            } else if let Some(b) = bars.remove(&id) {
                b.finish_and_clear();
                m.remove(&b);
            }
        }
        // A change of the plan's own state once its moves' are told (an ended plan's is
        // in the summary).
        if !first && t.state != state && !t.ended() {
            m.suspend(|| println!("rebalance {}: {}", t.plan, t.state));
        }
        state = t.state.clone();
        first = false;
        let watched = since.map(|(at, baseline)| Watched {
            elapsed: at.elapsed(),
            baseline,
        });
        let rate = watched.map_or(0.0, |w| {
            average_rate(t.rows_copied.saturating_sub(w.baseline), w.elapsed)
        });
        let (pos, len) = overall_position(&t);
        bar.set_length(len);
        bar.set_position(pos);
        bar.set_message(overall_message(&t, rate));
        if t.ended() {
            // The summary line says what the bars did.
            for b in bars.values().chain([&*bar]) {
                b.finish_and_clear();
                m.remove(b);
            }
            println!("{}", summary(&t, watched));
            return outcome(&t);
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row from `k=v|k=v|...`.
    fn row(text: &str) -> Row {
        let pairs = text.split('|').filter_map(|kv| kv.split_once('='));
        pairs.map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// A `SHOW REBALANCE` row of plan 3 (ADD NODE ds2).
    fn mv(seq: u32, slots: &str, step: &str, copied: u64, est: u64, state: &str) -> Row {
        row(&format!(
            "plan=3|what=ADD NODE ds2|plan_state={state}|seq={seq}|migration={}|tables=t|\
             slots={slots}|source=ds0|target=ds2|step={step}|rows_copied={copied}|\
             rows_estimate={est}|rows_per_sec=120|message=",
            10 + seq
        ))
    }

    fn plan(rows: &[Row]) -> Totals {
        totals(rows).expect("a plan")
    }

    fn watched(secs: u64, baseline: u64) -> Option<Watched> {
        let elapsed = Duration::from_secs(secs);
        Some(Watched { elapsed, baseline })
    }

    fn run(dry_run: bool, rate: Option<u64>, follow: bool) -> Run {
        Run {
            dry_run,
            rate,
            follow,
        }
    }

    fn rebalance(table: Option<&str>, dry_run: bool, rate: Option<u64>, follow: bool) -> Ask {
        let (table, how) = (table.map(str::to_string), run(dry_run, rate, follow));
        Ask::Rebalance { table, how }
    }

    fn add(url: &str, weight: Option<u32>, rebalance: bool, follow: bool) -> Ask {
        let (name, url) = ("ds4".to_string(), url.to_string());
        Ask::AddNode {
            name,
            url,
            weight,
            rebalance,
            follow,
        }
    }

    fn drain(dry_run: bool, rate: Option<u64>, follow: bool) -> Ask {
        let (name, how) = ("ds1".to_string(), run(dry_run, rate, follow));
        Ask::Drain { name, how }
    }

    #[test]
    fn slots_are_counted_from_a_range() {
        let counted = ["205-255", "0-1023", "7", " 10 - 12 "].map(slots_of);
        assert_eq!(counted, [51, 1024, 1, 3]);
        assert_eq!(["key 'v'", "9-3", "", "x-y"].map(slots_of), [0; 4]);
    }

    #[test]
    fn totals_sum_the_moves_and_guess_the_rows_of_those_not_started() {
        let t = plan(&[
            mv(1, "0-99", "done", 1000, 1000, "running"),
            mv(2, "100-199", "backfill", 300, 900, "running"),
            mv(3, "200-399", "queued", 0, 0, "running"),
            mv(4, "key 'v'", "queued", 0, 0, "running"),
        ]);
        assert_eq!(
            (t.plan.as_str(), t.what.as_str(), t.state.as_str()),
            ("3", "ADD NODE ds2", "running")
        );
        assert_eq!((t.moves, t.done, t.in_flight, t.queued), (4, 1, 1, 2));
        assert_eq!((t.slots, t.slots_done, t.rows_copied), (400, 100, 1300));
        // 1900 rows over the 200 slots with an estimate: the 200 slots without are worth 1900.
        assert_eq!(t.rows_estimate, 3800);
        assert!(!t.ended());
        assert_eq!(totals(&[]), None);
        // A move that copied past its estimate counts what it copied.
        let t = plan(&[mv(1, "0-9", "verify", 150, 100, "running")]);
        assert_eq!((t.rows_estimate, t.in_flight), (150, 1));
    }

    #[test]
    fn the_exit_status_wants_the_plan_done_and_every_move_done() {
        let aborted = plan(&[
            mv(1, "0-99", "done", 500, 500, "aborted"),
            mv(2, "100-199", "aborted", 20, 500, "aborted"),
            mv(3, "200-299", "dropped", 0, 0, "aborted"),
        ]);
        assert!(aborted.ended());
        assert_eq!(
            (aborted.done, aborted.not_done(), aborted.rows_copied),
            (1, 2, 520)
        );
        // A dropped move copies nothing.
        assert_eq!(aborted.rows_estimate, 1000);
        let e = outcome(&aborted).expect_err("aborted");
        assert!(e.contains("was aborted: 2 of 3 moves not done"), "{e}");
        let done = plan(&[
            mv(1, "0-9", "done", 5, 5, "done"),
            mv(2, "10-19", "done", 5, 5, "done"),
        ]);
        assert_eq!(outcome(&done), Ok(()));
        let partly = plan(&[
            mv(1, "0-9", "done", 5, 5, "done"),
            mv(2, "10-19", "aborted", 1, 5, "done"),
        ]);
        let e = outcome(&partly).expect_err("a move not done");
        assert!(e.contains("ended done: 1 of 2 moves not done"), "{e}");
    }

    #[test]
    fn the_summary_gives_the_average_rate_over_the_whole_run() {
        let t = plan(&[
            mv(1, "0-169", "done", 2000, 1900, "done"),
            mv(2, "512-682", "done", 1000, 1000, "done"),
        ]);
        assert_eq!(
            summary(&t, watched(12, 0)),
            "rebalance 3 (ADD NODE ds2) done: 2 moves done, 0 not done; 3000 rows copied in 12.0s: average 250 rows/s"
        );
        // A slow run still shows a rate above zero.
        let slow = plan(&[mv(1, "0-0", "done", 1, 1, "done")]);
        let s = summary(&slow, watched(1000, 0));
        assert!(
            s.ends_with("1 rows copied in 16m40s: average <0.01 rows/s"),
            "{s}"
        );
        // A run that ends at once: its time counts as a millisecond at least.
        let s = summary(&t, watched(0, 0));
        assert!(s.ends_with("average 3000000 rows/s"), "{s}");
    }

    #[test]
    fn the_summary_of_a_plan_followed_late_rates_only_what_it_saw() {
        let t = plan(&[mv(1, "0-9", "done", 1000, 1000, "done")]);
        let s = summary(&t, watched(2, 600));
        assert!(
            s.ends_with("1000 rows copied, 400 of them in the 2.0s followed: average 200 rows/s"),
            "{s}"
        );
        let s = summary(&t, watched(2, 1000));
        assert!(
            s.ends_with("1000 rows copied, all before it was followed (2.0s followed)"),
            "{s}"
        );
        assert!(summary(&t, None).contains("ended before it was followed"));
        let none = plan(&[mv(1, "0-9", "done", 0, 0, "done")]);
        assert!(summary(&none, watched(2, 0)).ends_with("no rows copied, in 2.0s"));
    }

    #[test]
    fn rates_durations_and_time_left() {
        let rates = [0.0, 0.004, 0.5, 12.34, 1234.5].map(fmt_rate);
        assert_eq!(rates, ["0", "<0.01", "0.50", "12.3", "1234"]);
        let took = [4.2, 187.0, 7500.0].map(|s| fmt_duration(Duration::from_secs_f64(s)));
        assert_eq!(took, ["4.2s", "3m07s", "2h05m"]);
        assert_eq!(average_rate(500, Duration::from_secs(2)), 250.0);
        let t = Totals {
            rows_copied: 100,
            rows_estimate: 600,
            ..Totals::default()
        };
        assert_eq!(eta(&t, 50.0), Some(Duration::from_secs(10)));
        assert_eq!(eta(&t, 0.0), None);
    }

    #[test]
    fn the_plan_id_is_read_from_the_queued_message() {
        let queued = "rebalance 3 queued (REBALANCE ALL): 4 moves, 205 slots, up to 2 at once (SHOW REBALANCE)";
        assert_eq!(plan_id_in(queued), Some(3));
        let added = "node `ds2` added; rebalance 12 queued (ADD NODE ds2): 2 moves, 341 slots, up to 2 at once";
        assert_eq!(plan_id_in(added), Some(12));
        let nothing = "REBALANCE ALL: every node holds its share already, nothing to move";
        assert_eq!(plan_id_in(nothing), None);
    }

    #[test]
    fn statements_are_built_as_the_admin_interface_reads_them() {
        let cases = [
            (rebalance(None, false, None, true), "REBALANCE ALL"),
            (
                rebalance(Some("t_order"), true, Some(5000), false),
                "REBALANCE TABLE t_order DRY RUN RATE 5000",
            ),
            (Ask::Show, "SHOW REBALANCE"),
            (Ask::Follow, "SHOW REBALANCE"),
            (Ask::Pause, "PAUSE REBALANCE"),
            (Ask::Resume, "RESUME REBALANCE"),
            (Ask::Abort, "ABORT REBALANCE"),
            (
                add("mysql://u:p@h:3306/shop", Some(2), true, true),
                "ADD NODE ds4 'mysql://u:p@h:3306/shop' WEIGHT 2 REBALANCE",
            ),
            (
                add("mysql://h/shop", None, false, false),
                "ADD NODE ds4 'mysql://h/shop'",
            ),
            (drain(false, Some(10), false), "DRAIN NODE ds1 RATE 10"),
            (drain(true, None, false), "DRAIN NODE ds1 DRY RUN"),
            (Ask::Remove { name: "ds1".into() }, "REMOVE NODE ds1"),
        ];
        for (ask, sql) in cases {
            assert_eq!(ask.statement(), Ok(sql.to_string()), "{ask:?}");
        }
    }

    #[test]
    fn a_url_with_a_quote_or_backslash_and_names_of_many_words_are_refused() {
        for url in ["mysql://u:it's@h/shop", "mysql://u:a\\b@h/shop"] {
            let e = add(url, None, false, false).statement().expect_err(url);
            assert!(e.contains("single quote or a backslash"), "{e}");
        }
        for name in ["", "ds 4", "ds4;", "ds-4", "`x`"] {
            let e = Ask::Remove { name: name.into() }
                .statement()
                .expect_err(name);
            assert!(e.contains("not one word"), "{e}");
        }
        let e = rebalance(Some("t x"), false, None, false)
            .statement()
            .expect_err("a table");
        assert!(e.contains("table `t x` is not one word"), "{e}");
    }

    #[test]
    fn only_a_queued_plan_is_followed() {
        assert!(add("mysql://h/shop", None, true, true).follows());
        assert!(!add("mysql://h/shop", None, false, true).follows());
        assert!(drain(false, None, true).follows());
        assert!(!drain(true, None, true).follows());
        assert!(rebalance(None, false, None, true).follows());
        assert!(drain(true, None, false).dry_run() && rebalance(None, true, None, false).dry_run());
        assert!(!Ask::Show.follows() && !Ask::Show.dry_run());
    }

    #[test]
    fn tables_are_aligned_with_numbers_on_the_right() {
        let cells = |v: [&str; 4]| v.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        let rows = [
            cells(["1", "MIGRATE SLOTS 0-9 OF t TO ds2", "10", ""]),
            cells(["12", "x", "205", "last"]),
        ];
        assert_eq!(
            table("step statement slots msg", &rows),
            "step  statement                      slots  msg\n   1  MIGRATE SLOTS 0-9 OF t TO ds2     10\n  12  x                                205  last"
        );
    }

    #[test]
    fn a_dry_run_prints_its_moves_or_that_there_is_none() {
        assert!(dry_run_text(&[]).starts_with("no move: every node holds its share"));
        let planned = |step: &str, slots: &str, est: &str| {
            row(&format!(
                "step={step}|statement=MIGRATE SLOTS 0-9 OF t TO ds2|tables=t|from=ds0|to=ds2|\
                 slots={slots}|est_rows={est}"
            ))
        };
        let text = dry_run_text(&[planned("1", "10", "100"), planned("2", "5", "?")]);
        assert!(text.starts_with("step  statement"), "{text}");
        assert!(
            text.ends_with("\n2 moves, 15 slots, ~100+ rows to copy (DRY RUN: nothing queued)"),
            "{text}"
        );
        let waiting = dry_run_text(&[planned("-", "0", "0")]);
        assert!(
            waiting.ends_with(
                "\nno move now: the tables above have slots moving (DRY RUN: nothing queued)"
            ),
            "{waiting}"
        );
    }

    #[test]
    fn show_prints_the_plan_its_moves_and_their_sum() {
        assert_eq!(show_text(&[]), "no rebalance has been planned");
        let text = show_text(&[
            mv(1, "0-99", "done", 1000, 1000, "running"),
            mv(2, "100-199", "backfill", 300, 900, "running"),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert_eq!(lines[0], "rebalance 3 (ADD NODE ds2): running");
        assert!(lines[1].starts_with("seq  migration  tables"), "{text}");
        assert_eq!(
            lines[4],
            "2 moves: 1 done, 1 under way, 0 queued; slots 100/200; rows 1300/~1900"
        );
    }

    #[test]
    fn a_move_that_ends_is_told_with_its_message_unless_done() {
        let mut gone = mv(2, "100-199", "aborted", 30, 900, "aborting");
        gone.insert("message".into(), "slots changed".into());
        let said = "move #2 100-199 ds0->ds2: aborted, 30 rows copied (slots changed)";
        assert_eq!(move_line(&gone), said);
        let mut done = mv(1, "0-99", "done", 80, 80, "done");
        done.insert("message".into(), "2 moves done".into());
        assert_eq!(
            move_line(&done),
            "move #1 0-99 ds0->ds2: done, 80 rows copied"
        );
    }
}
