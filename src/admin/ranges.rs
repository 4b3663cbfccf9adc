//! The admin's statements over a range table's ranges, while it serves:
//! - `SPLIT RANGE k OF t`: a range starts at key `k`, cut from the range holding it and on
//!   the same node (nothing moves: the map changes, in a version of its own);
//! - `MERGE RANGE k OF t`: the range starting at `k` joins the one before it, both on one node;
//! - `MIGRATE RANGE k OF t TO n [RATE r] [AUTO]`: the range holding `k` moves to node `n`
//!   through the live migration (copy, verify, capture or dual writes, cutover, cleanup);
//! - `SHOW RANGES [FOR t]`: each range, its node, its move, its load.
//!
//! The ranges live in the metadata schema from the first of these on (`range_map`), over the
//! rules file's, so every proxy cuts the table's keys the same way.

use super::meta::{connect, failed};
use super::words::{headers, unsupported, Answer};
use crate::backend::MyError;
use crate::config::{TableRule, Topology};
use crate::metadata::migrations::{self as store, Migration};
use crate::metadata::ranges as meta;
use crate::routing::range::RangeMap;
use crate::shared::Shared;

const MISSING: &str =
    "changing a table's ranges needs a [metadata] schema, where the ranges and their moves are kept";

/// The table and key words of `VERB RANGE k OF t ...`, and the table's map.
fn target<'t>(
    t: &'t Topology,
    words: &[String],
    usage: &str,
) -> Result<(String, String, &'t RangeMap), MyError> {
    let key = words.get(2).cloned().ok_or_else(|| unsupported(usage))?;
    // After the key, which may be any word.
    let of = words
        .iter()
        .skip(3)
        .position(|w| w.eq_ignore_ascii_case("OF"))
        .map(|i| i + 3)
        .ok_or_else(|| unsupported(usage))?;
    let table = words
        .get(of + 1)
        .ok_or_else(|| unsupported(usage))?
        .trim_matches('`')
        .to_ascii_lowercase();
    match t.table(&table) {
        Some(TableRule::Range { map, .. }) => Ok((table, key, map)),
        _ => Err(unsupported(format!("`{table}` is not a range table"))),
    }
}

/// Writes `new` over `old` as `table`'s ranges and has this proxy apply them at once.
async fn write(
    shared: &Shared,
    t: &Topology,
    table: &str,
    old: &RangeMap,
    new: &RangeMap,
) -> Result<u64, MyError> {
    let name = |n: usize| t.node_name(n).to_string();
    let base = meta::rows_of(old, &name).map_err(unsupported)?;
    let rows = meta::rows_of(new, &name).map_err(unsupported)?;
    let mut c = connect(shared, t, MISSING).await?;
    // Not while moves are queued or run: a queued move names its range by its number.
    super::migrations::none_running(&mut c).await?;
    let v = meta::write_map(&mut c, table, Some(&base), &rows, t.version)
        .await
        .map_err(failed)?
        .ok_or_else(|| {
            unsupported(format!(
                "the ranges of `{table}` changed in the metadata schema meanwhile (another proxy?): try again once this proxy runs them"
            ))
        })?;
    shared.migration.poll_now();
    Ok(v)
}

/// `SPLIT RANGE k OF t`.
pub async fn split(shared: &Shared, t: &Topology, words: &[String]) -> Result<Answer, MyError> {
    let (table, word, map) = target(t, words, "usage: SPLIT RANGE key OF t")?;
    let k = map.key_of_word(&word).map_err(unsupported)?;
    let new = map.split_at(&k).map_err(unsupported)?;
    let v = write(shared, t, &table, map, &new).await?;
    let i = new.index_of(&k);
    let name = |n: usize| t.node_name(n).to_string();
    Ok(Answer::Done(format!(
        "`{table}` split at {}: {} and {} (version {v})",
        map.show_key(&k),
        new.describe_range(i.saturating_sub(1), &name),
        new.describe_range(i, &name),
    )))
}

/// `MERGE RANGE k OF t`.
pub async fn merge(shared: &Shared, t: &Topology, words: &[String]) -> Result<Answer, MyError> {
    let (table, word, map) = target(t, words, "usage: MERGE RANGE key OF t")?;
    let k = map.key_of_word(&word).map_err(unsupported)?;
    let new = map.merge_at(&k).map_err(unsupported)?;
    let v = write(shared, t, &table, map, &new).await?;
    let i = new.index_of(&k);
    Ok(Answer::Done(format!(
        "`{table}`'s ranges merged at {}: {} (version {v})",
        map.show_key(&k),
        new.describe_range(i, &|n| t.node_name(n).to_string())
    )))
}

/// `MIGRATE RANGE k OF t TO n [RATE r] [AUTO]`: the range holding `k`.
pub async fn migrate(shared: &Shared, t: &Topology, words: &[String]) -> Result<Answer, MyError> {
    const USAGE: &str = "usage: MIGRATE RANGE key OF t TO node [RATE rows_per_sec] [AUTO]";
    let (table, word, map) = target(t, words, USAGE)?;
    let after = |k: &str| {
        words
            .iter()
            .skip(3)
            .position(|x| x.eq_ignore_ascii_case(k))
            .and_then(|i| words.get(i + 4))
            .cloned()
    };
    let target = after("TO").ok_or_else(|| unsupported(USAGE))?;
    let rate: u64 = match after("RATE") {
        Some(r) => r.parse().map_err(|_| unsupported(USAGE))?,
        None => 0,
    };
    let auto = words.iter().skip(3).any(|w| w.eq_ignore_ascii_case("AUTO"));
    let Some(to) = t.node_index(&target).filter(|i| !t.nodes[*i].retired) else {
        return Err(unsupported(format!("unknown node `{target}`")));
    };
    let k = map.key_of_word(&word).map_err(unsupported)?;
    let i = map.index_of(&k);
    let Ok(index) = u16::try_from(i) else {
        return Err(unsupported(format!(
            "`{table}` has more ranges than a move can name (65,536): merge some first"
        )));
    };
    if map.is_moving() {
        return Err(unsupported(format!(
            "a range of `{table}` is being moved (SHOW MIGRATIONS): one at a time"
        )));
    }
    let from = map.owner(i);
    let what = map.describe_range(i, &|n| t.node_name(n).to_string());
    if from == to {
        return Err(unsupported(format!("{what}: on `{target}` already")));
    }
    let lo = map.bounds(i).0.map(|k| map.word(k));
    let m = Migration::of_range(
        table.clone(),
        index,
        lo,
        t.node_name(from).to_string(),
        target.clone(),
        rate,
        auto,
    );
    let mut c = connect(shared, t, MISSING).await?;
    super::migrations::none_running(&mut c).await?;
    let id = store::insert(&mut c, &m).await.map_err(failed)?;
    Ok(Answer::Done(format!(
        "migration {id} started: range {what} of `{table}` to `{target}` (SHOW MIGRATIONS)"
    )))
}

/// `SHOW RANGES [FOR t]`: every range table's ranges, with this proxy's load of each.
pub fn show(shared: &Shared, t: &Topology, only: Option<&str>) -> Result<Answer, MyError> {
    let mut names: Vec<&String> = t.tables.keys().collect();
    names.sort();
    let mut rows = Vec::new();
    for n in names {
        if only.is_some_and(|o| !o.eq_ignore_ascii_case(n)) {
            continue;
        }
        let Some(TableRule::Range { map, .. }) = t.tables.get(n) else {
            continue;
        };
        // This proxy's load a second of each range, over the last `[hot] seconds`.
        let rates = shared.metrics.load.slots(&t.hot, usize::MAX);
        let load = |i: usize| {
            rates
                .iter()
                .find(|r| r.table == *n && usize::from(r.slot) == i)
                .map_or((0, 0, false), |r| {
                    (
                        r.rate[0],
                        r.rate[crate::load::detect::MICROS],
                        r.hot_for.is_some(),
                    )
                })
        };
        for i in 0..map.len() {
            let (lo, hi) = map.bounds(i);
            let show = |k: Option<&crate::routing::range::RangeKey>, inf: &str| {
                k.map_or(inf.to_string(), |k| map.show_key(k))
            };
            let m = map.moves().iter().find(|m| m.index == i);
            let (stmts, micros, hot) = load(i);
            rows.push(vec![
                n.clone(),
                i.to_string(),
                show(lo, "-inf"),
                show(hi, "+inf"),
                t.node_name(map.owner(i)).to_string(),
                m.map_or("stable", |m| m.step.name()).to_string(),
                m.map(|m| t.node_name(m.to).to_string()).unwrap_or_default(),
                stmts.to_string(),
                format!("{:.1}", micros as f64 / 1000.0),
                if hot { "hot" } else { "" }.to_string(),
            ]);
        }
    }
    if rows.is_empty() && only.is_some() {
        return Err(unsupported("no range table by that name"));
    }
    Ok(Answer::Rows {
        columns: headers(&[
            "table",
            "range",
            "from",
            "below",
            "node",
            "state",
            "moving_to",
            "statements_per_s",
            "node_ms_per_s",
            "hot",
        ]),
        rows,
    })
}
