//! `REBALANCE [TABLE t | ALL] [DRY RUN] [RATE r]` and `DRAIN NODE n [DRY RUN] [RATE r]`:
//! the plan of slot moves that brings every node of each group of tables sharded alike to
//! its fair share by weight (`crate::routing::rebalance`), or that moves every slot off one
//! node (and no other node's). `DRY RUN` prints it as the `MIGRATE SLOTS` statements that
//! carry it out, with the rows each would copy; without it the plan is queued in the
//! metadata schema (`crate::metadata::rebalance`) and the migration driver runs it, each
//! move cut over on its own (`crate::migrate::queue`). `SHOW REBALANCE`, `PAUSE REBALANCE`,
//! `RESUME REBALANCE`, `ABORT REBALANCE` follow and steer it.
//!
//! A drained node's directory tenants are moved with its slots, each to the node with the
//! fewest of that table's entries: those named in the rules or the metadata, and those its
//! lookup table places there (each move ends with an entry, which wins over the lookup
//! table's row). Keys placed by a fallback that is not a slot map are not: `REMOVE NODE`
//! then refuses, naming what is left.

use std::collections::HashMap;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::meta::failed;
use super::words::{headers, unsupported, Answer};
use crate::backend::MyError;
use crate::config::{TableRule, Topology};
use crate::metadata::migrations::Migration;
use crate::metadata::rebalance as plans;
use crate::routing::rebalance::{self, PlannedMove};
use crate::routing::slot::{SlotMap, SLOTS};
use crate::shared::Shared;

/// The hash_slot tables in groups sharded alike (one slot map each), each group by name,
/// the group's first name first. Groups with slots moving are left out, with their names.
fn groups(t: &Topology) -> (Vec<(Vec<String>, &SlotMap)>, Vec<String>) {
    let mut names: Vec<&String> = t.tables.keys().collect();
    names.sort();
    let mut out: Vec<(Vec<String>, &SlotMap)> = Vec::new();
    let mut moving = Vec::new();
    for name in names {
        let Some(TableRule::HashSlot { map, .. }) = t.table(name) else {
            continue;
        };
        if map.is_moving() {
            moving.push(name.clone());
            continue;
        }
        match out.iter_mut().find(|(_, m)| m.same_reads(map)) {
            Some((g, _)) => g.push(name.clone()),
            None => out.push((vec![name.clone()], map)),
        }
    }
    (out, moving)
}

/// The nodes' weights: a retired node weighs nothing.
fn weights(t: &Topology) -> Vec<u32> {
    t.nodes
        .iter()
        .map(|n| if n.retired { 0 } else { n.weight })
        .collect()
}

/// The rows of `table` on `node`, from the node's statistics (InnoDB's estimate).
async fn rows_on(shared: &Shared, node: usize, table: &str) -> Option<u64> {
    let mut c = shared.backends.connect(node).await.ok()?;
    let sql = format!(
        "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = {}",
        crate::sql::write::text_literal(table)
    );
    c.query_text(&sql).await.ok()??.parse().ok()
}

/// A group's plan: its tables, each slot's node now, and the moves.
pub type GroupPlan = (Vec<String>, Vec<usize>, Vec<PlannedMove>);

/// Each group's plan by `plan`, from the node of each of its slots.
fn plan_groups(
    groups: Vec<(Vec<String>, &SlotMap)>,
    plan: impl Fn(&[usize]) -> Vec<PlannedMove>,
) -> Vec<GroupPlan> {
    groups
        .into_iter()
        .map(|(tables, map)| {
            let owner: Vec<usize> = (0..SLOTS as u16).map(|s| map.owner_of_slot(s)).collect();
            let moves = plan(&owner);
            (tables, owner, moves)
        })
        .collect()
}

/// The plan's rows: one per move, as the statement that carries it out.
async fn answer(
    shared: &Shared,
    t: &Topology,
    plans: Vec<GroupPlan>,
    keys: &[KeyMove],
    moving: Vec<String>,
) -> Answer {
    let mut rows = Vec::new();
    let mut step = 0;
    // Each table's rows on each node, asked of the node once.
    let mut stats: HashMap<(usize, String), Option<u64>> = HashMap::new();
    for (tables, owner, plan) in plans {
        for m in plan {
            step += 1;
            // Rows spread over a node's slots as the hash spreads keys: evenly.
            let held = owner.iter().filter(|o| **o == m.from).count().max(1) as u64;
            let mut rows_est: Option<u64> = Some(0);
            for table in &tables {
                let key = (m.from, table.clone());
                let on_node = match stats.get(&key) {
                    Some(r) => *r,
                    None => {
                        let r = rows_on(shared, m.from, table).await;
                        stats.insert(key, r);
                        r
                    }
                };
                rows_est = match (rows_est, on_node) {
                    (Some(sum), Some(r)) => Some(sum + r * m.slots() as u64 / held),
                    _ => None,
                };
            }
            rows.push(vec![
                step.to_string(),
                format!(
                    "MIGRATE SLOTS {}-{} OF {} TO {}",
                    m.first,
                    m.last,
                    tables[0],
                    t.node_name(m.to)
                ),
                tables.join(","),
                t.node_name(m.from).to_string(),
                t.node_name(m.to).to_string(),
                m.slots().to_string(),
                rows_est
                    .map(|r| r.to_string())
                    .unwrap_or_else(|| "?".into()),
            ]);
        }
    }
    for k in keys {
        step += 1;
        rows.push(vec![
            step.to_string(),
            format!(
                "MIGRATE {} {} OF {}{} TO {}",
                if k.range.is_some() { "RANGE" } else { "KEY" },
                crate::sql::write::admin_word(&k.key),
                k.table,
                k.buckets
                    .map(|(a, b)| format!(" BUCKETS {a}-{b}"))
                    .unwrap_or_default(),
                t.node_name(k.to)
            ),
            k.table.clone(),
            t.node_name(k.from).to_string(),
            t.node_name(k.to).to_string(),
            "0".into(),
            "?".into(),
        ]);
    }
    for name in moving {
        rows.push(vec![
            "-".into(),
            format!("-- `{name}` has slots moving: planned once that move is done"),
            name,
            String::new(),
            String::new(),
            "0".into(),
            "0".into(),
        ]);
    }
    Answer::Rows {
        columns: headers(&[
            "step",
            "statement",
            "tables",
            "from",
            "to",
            "slots",
            "est_rows",
        ]),
        rows,
    }
}

/// The plan's moves as migrations to queue (cut over on their own, at `rate`).
fn queued(t: &Topology, plans: &[GroupPlan], keys: &[KeyMove], rate: u64) -> Vec<Migration> {
    let mut v = Vec::new();
    for (tables, _, moves) in plans {
        for m in moves {
            v.push(Migration::new(
                tables.join(","),
                m.first,
                m.last,
                None,
                t.node_name(m.from).to_string(),
                t.node_name(m.to).to_string(),
                rate,
                true,
            ));
        }
    }
    for k in keys {
        let m = |tables: String, (a, b): (u16, u16)| {
            Migration::new(
                tables,
                a,
                b,
                Some(k.key.clone()),
                t.node_name(k.from).to_string(),
                t.node_name(k.to).to_string(),
                rate,
                true,
            )
        };
        if let Some((index, lo)) = &k.range {
            v.push(Migration::of_range(
                k.table.clone(),
                *index,
                lo.clone(),
                t.node_name(k.from).to_string(),
                t.node_name(k.to).to_string(),
                rate,
                true,
            ));
            continue;
        }
        v.push(match k.buckets {
            // A salted key's buckets: of its own table.
            Some(run) => m(k.table.clone(), run).of_buckets(),
            // A hash_slot table's key moves with the tables sharded alike.
            None => m(crate::shared::load::group_of(t, &k.table).join(","), (0, 0)),
        });
    }
    v
}

async fn connect(shared: &Shared, t: &Topology) -> Result<Conn, MyError> {
    super::meta::connect(
        shared,
        t,
        "a rebalance runs as slot migrations, which need a [metadata] schema: add DRY RUN to see the plan",
    )
    .await
}

/// Queues the plan for the driver; what is answered.
pub async fn enqueue(
    shared: &Shared,
    t: &Topology,
    what: &str,
    plans: &[GroupPlan],
    keys: &[KeyMove],
    rate: u64,
) -> Result<Answer, MyError> {
    let moves = queued(t, plans, keys, rate);
    if moves.is_empty() {
        return Ok(Answer::Done(format!(
            "{what}: every node holds its share already, nothing to move"
        )));
    }
    let slots: usize = plans
        .iter()
        .flat_map(|(_, _, m)| m.iter().map(PlannedMove::slots))
        .sum();
    let parallel = t.metadata.as_ref().map_or(2, |m| m.max_parallel_moves);
    let mut c = connect(shared, t).await?;
    let r = plans::enqueue(&mut c, what, parallel, &moves)
        .await
        .map_err(failed)?;
    drop(c);
    let id = r.map_err(unsupported)?;
    Ok(Answer::Done(format!(
        "rebalance {id} queued ({what}): {} moves, {slots} slots{}, up to {parallel} at once (SHOW REBALANCE)",
        moves.len(),
        if keys.is_empty() {
            String::new()
        } else {
            format!(" and {} keys, bucket runs or ranges", keys.len())
        }
    )))
}

/// `RATE r` among the words, in rows per second (0: unthrottled).
fn rate(words: &[String]) -> Result<u64, MyError> {
    match words.iter().position(|w| w == "RATE") {
        None => Ok(0),
        Some(i) => words
            .get(i + 1)
            .and_then(|r| r.parse().ok())
            .ok_or_else(|| unsupported("RATE takes rows per second, a whole number")),
    }
}

/// `REBALANCE [TABLE t | ALL] [DRY RUN] [RATE r]` (`words` upper-cased).
pub async fn rebalance(shared: &Shared, t: &Topology, words: &[String]) -> Result<Answer, MyError> {
    let dry = dry_run(words);
    let only = match words.get(1).map(String::as_str) {
        Some("TABLE") => Some(
            words
                .get(2)
                .ok_or_else(|| unsupported("usage: REBALANCE [TABLE t | ALL] [DRY RUN]"))?
                .to_ascii_lowercase(),
        ),
        _ => None,
    };
    if let Some(table) = &only {
        if !matches!(t.table(table), Some(TableRule::HashSlot { .. })) {
            return Err(unsupported(format!("`{table}` is not a hash_slot table")));
        }
    }
    let rate = rate(words)?;
    let w = weights(t);
    let (groups, moving) = groups(t);
    let groups = groups
        .into_iter()
        .filter(|(g, _)| only.as_ref().is_none_or(|x| g.contains(x)))
        .collect();
    let plans = plan_groups(groups, |owner| rebalance::plan(owner, &w));
    let moving: Vec<String> = moving
        .into_iter()
        .filter(|x| only.as_ref().is_none_or(|o| o == x))
        .collect();
    if !dry {
        if let Some(m) = moving.first() {
            return Err(unsupported(format!(
                "slots of `{m}` are being moved (SHOW MIGRATIONS): rebalance once that move is done"
            )));
        }
        let what = match &only {
            Some(x) => format!("REBALANCE TABLE {x}"),
            None => "REBALANCE ALL".into(),
        };
        return enqueue(shared, t, &what, &plans, &[], rate).await;
    }
    Ok(answer(shared, t, plans, &[], moving).await)
}

/// `ADD NODE n ... REBALANCE`: the moves that give the new node its share, queued.
pub async fn for_added(shared: &Shared, t: &Topology, name: &str) -> Result<Answer, MyError> {
    let w = weights(t);
    let (groups, moving) = groups(t);
    if let Some(m) = moving.first() {
        return Err(unsupported(format!(
            "node `{name}` is added, but slots of `{m}` are being moved: REBALANCE once that move is done"
        )));
    }
    let plans = plan_groups(groups, |owner| rebalance::plan(owner, &w));
    enqueue(shared, t, &format!("ADD NODE {name}"), &plans, &[], 0).await
}

/// A directory key, a split key or a run of a salted key's buckets to move off a drained
/// node.
#[derive(Debug, Clone)]
pub struct KeyMove {
    table: String,
    key: String,
    from: usize,
    to: usize,
    /// Buckets `a..=b` of a salted key.
    buckets: Option<(u16, u16)>,
    /// A range of a range table: its number and lowest key (the admin's word, `None` for
    /// the first range); `key` is a key of it.
    range: Option<(u16, Option<String>)>,
}

/// The keys a directory table's lookup table places on `node` and no entry overrides (nor
/// a move under way), in their text form; keys whose text is not UTF-8 are left out (a
/// move names its key as text): `REMOVE NODE` still counts them.
pub async fn placed_by_lookup(
    t: &Topology,
    d: &crate::routing::directory::DirectoryRule,
    node: usize,
) -> Result<Vec<Vec<u8>>, String> {
    let Some(l) = &d.lookup else {
        return Ok(Vec::new());
    };
    let mut c = Conn::new(t.nodes[l.node].opts.clone())
        .await
        .map_err(|e| e.to_string())?;
    let rows: Result<Vec<mysql_async::Row>, _> = c.query(l.keys_on(t.node_name(node))).await;
    let _ = c.disconnect().await;
    let mut keys: Vec<Vec<u8>> = rows
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter_map(|r| r.as_ref(0).and_then(crate::value::text_form))
        .filter(|k| !d.entries.contains_key(k) && !d.moves.iter().any(|m| m.key == *k))
        .collect();
    keys.sort();
    keys.dedup();
    Ok(keys)
}

/// The lookup-placed keys of every directory table on `node` ([`placed_by_lookup`]).
async fn lookup_keys(t: &Topology, node: usize) -> Result<HashMap<String, Vec<Vec<u8>>>, MyError> {
    let mut out = HashMap::new();
    for name in t.tables.keys() {
        let Some(TableRule::Directory(d)) = t.table(name) else {
            continue;
        };
        let keys = placed_by_lookup(t, d, node).await.map_err(|e| {
            unsupported(format!(
                "the lookup table of `{name}` could not be read, so its keys on `{}` are not known: {e}",
                t.node_name(node)
            ))
        })?;
        out.insert(name.clone(), keys);
    }
    Ok(out)
}

/// The directory tenants on `node` (its entries, then the keys its lookup table places
/// there: `looked`), each to the node (with a weight) holding the fewest of that table's
/// entries; then the keys of hash_slot tables split out of their slots onto `node`, each
/// back to its slot's node (or, that being `node`, to the node holding fewest split keys).
fn key_moves(
    t: &Topology,
    node: usize,
    w: &[u32],
    looked: &HashMap<String, Vec<Vec<u8>>>,
) -> Vec<KeyMove> {
    let mut v = tenant_moves(t, node, w, looked);
    let mut names: Vec<&String> = t.tables.keys().collect();
    names.sort();
    let mut done: Vec<String> = Vec::new();
    for name in names {
        let Some(TableRule::HashSlot { map, .. }) = t.table(name) else {
            continue;
        };
        // A group of tables sharded alike moves its keys once, named by its first table.
        if done.contains(name) {
            continue;
        }
        done.extend(crate::shared::load::group_of(t, name));
        let (mut count, keys) = placed_on(map.split_keys(), node, w.len());
        for key in keys {
            let Ok(text) = std::str::from_utf8(key) else {
                continue;
            };
            let slot = map.node_of_slot(crate::routing::slot::slot_of_text(key));
            let to = if slot != node && w.get(slot).is_some_and(|x| *x > 0) {
                Some(slot)
            } else {
                (0..w.len())
                    .filter(|i| *i != node && w[*i] > 0)
                    .min_by_key(|i| (count[*i], *i))
            };
            let Some(to) = to else {
                break;
            };
            count[to] += 1;
            v.push(KeyMove {
                table: name.clone(),
                key: text.to_string(),
                from: node,
                to,
                buckets: None,
                range: None,
            });
        }
    }
    v.extend(bucket_moves(t, node, w));
    v.extend(range_moves(t, node, w));
    v
}

/// Each range of a range table on `node`, to the node (with a weight) holding the fewest
/// of that table's ranges.
fn range_moves(t: &Topology, node: usize, w: &[u32]) -> Vec<KeyMove> {
    let mut names: Vec<&String> = t.tables.keys().collect();
    names.sort();
    let mut v = Vec::new();
    for name in names {
        let Some(TableRule::Range { map, .. }) = t.table(name) else {
            continue;
        };
        let mut count = vec![0usize; w.len()];
        for i in 0..map.len() {
            if let Some(c) = count.get_mut(map.owner(i)) {
                *c += 1;
            }
        }
        for i in (0..map.len()).filter(|i| map.owner(*i) == node) {
            let Some(to) = (0..w.len())
                .filter(|n| *n != node && w[*n] > 0)
                .min_by_key(|n| (count[*n], *n))
            else {
                break;
            };
            count[to] += 1;
            v.push(KeyMove {
                table: name.clone(),
                key: map.word_in(i),
                from: node,
                to,
                buckets: None,
                range: Some((i as u16, map.bounds(i).0.map(|k| map.word(k)))),
            });
        }
    }
    v
}

/// Each run of a salted key's buckets on `node`, to the node (with a weight) holding the
/// fewest of that key's buckets.
fn bucket_moves(t: &Topology, node: usize, w: &[u32]) -> Vec<KeyMove> {
    let mut names: Vec<&String> = t.tables.keys().collect();
    names.sort();
    let mut v = Vec::new();
    for name in names {
        let Some(TableRule::HashSlot { map, .. }) = t.table(name) else {
            continue;
        };
        let mut keys: Vec<&Vec<u8>> = map.salted().keys().collect();
        keys.sort();
        for key in keys {
            let (Ok(text), Some(mut owners)) = (std::str::from_utf8(key), map.bucket_owners(key))
            else {
                continue;
            };
            for (b, e, at) in crate::routing::runs(owners.clone()) {
                if at != node {
                    continue;
                }
                let held = |i: usize| owners.iter().filter(|n| **n == i).count();
                let Some(to) = (0..w.len())
                    .filter(|i| *i != node && w[*i] > 0)
                    .min_by_key(|i| (held(*i), *i))
                else {
                    return v;
                };
                for o in &mut owners[b..=e] {
                    *o = to;
                }
                v.push(KeyMove {
                    table: name.clone(),
                    key: text.to_string(),
                    from: node,
                    to,
                    buckets: Some((b as u16, e as u16)),
                    range: None,
                });
            }
        }
    }
    v
}

/// How many of `entries` (key -> node) each of `nodes` nodes holds, and the keys on `node`
/// in order.
fn placed_on(
    entries: &HashMap<Vec<u8>, usize>,
    node: usize,
    nodes: usize,
) -> (Vec<usize>, Vec<&Vec<u8>>) {
    let mut count = vec![0usize; nodes];
    for n in entries.values() {
        if let Some(c) = count.get_mut(*n) {
            *c += 1;
        }
    }
    let mut keys: Vec<&Vec<u8>> = entries
        .iter()
        .filter(|(_, n)| **n == node)
        .map(|(k, _)| k)
        .collect();
    keys.sort();
    (count, keys)
}

/// The directory tenants of [`key_moves`].
fn tenant_moves(
    t: &Topology,
    node: usize,
    w: &[u32],
    looked: &HashMap<String, Vec<Vec<u8>>>,
) -> Vec<KeyMove> {
    let mut names: Vec<&String> = t.tables.keys().collect();
    names.sort();
    let mut v = Vec::new();
    for name in names {
        let Some(TableRule::Directory(d)) = t.table(name) else {
            continue;
        };
        let (mut count, mut keys) = placed_on(&d.entries, node, w.len());
        keys.extend(looked.get(name.as_str()).into_iter().flatten());
        for key in keys {
            let Ok(key) = std::str::from_utf8(key) else {
                continue;
            };
            let Some(to) = (0..w.len())
                .filter(|i| *i != node && w[*i] > 0)
                .min_by_key(|i| (count[*i], *i))
            else {
                break;
            };
            count[to] += 1;
            v.push(KeyMove {
                table: name.clone(),
                key: key.to_string(),
                from: node,
                to,
                buckets: None,
                range: None,
            });
        }
    }
    v
}

/// `DRAIN NODE n [DRY RUN]` (`words` upper-cased, `name` as written).
pub async fn drain(
    shared: &Shared,
    t: &Topology,
    words: &[String],
    name: &str,
) -> Result<Answer, MyError> {
    let Some(node) = t.node_index(name).filter(|i| !t.nodes[*i].retired) else {
        return Err(unsupported(format!("unknown node `{name}`")));
    };
    let rate = rate(words)?;
    let w = weights(t);
    if (0..w.len()).all(|i| i == node || w[i] == 0) {
        return Err(unsupported(format!(
            "`{name}` is the only node with a weight: its slots have nowhere to go"
        )));
    }
    let (groups, moving) = groups(t);
    let plans = plan_groups(groups, |owner| rebalance::drain(owner, &w, node));
    let looked = lookup_keys(t, node).await?;
    let keys = key_moves(t, node, &w, &looked);
    if !dry_run(words) {
        if let Some(m) = moving.first() {
            return Err(unsupported(format!(
                "slots of `{m}` are being moved (SHOW MIGRATIONS): drain once that move is done"
            )));
        }
        return enqueue(
            shared,
            t,
            &format!("DRAIN NODE {name}"),
            &plans,
            &keys,
            rate,
        )
        .await;
    }
    Ok(answer(shared, t, plans, &keys, moving).await)
}

/// `SHOW REBALANCE`: the newest plan, one row per move.
pub async fn show(shared: &Shared, t: &Topology) -> Result<Answer, MyError> {
    let mut c = connect(shared, t).await?;
    let plan = plans::latest(&mut c).await.map_err(failed)?;
    let moves = match &plan {
        Some(p) => plans::moves(&mut c, p.id).await.map_err(failed)?,
        None => Vec::new(),
    };
    let driver = match crate::metadata::lease::holder(&mut c)
        .await
        .map_err(failed)?
    {
        Some((who, token, left)) if left > 0 => format!("{who} (token {token})"),
        _ => String::new(),
    };
    drop(c);
    let rows = match &plan {
        None => Vec::new(),
        Some(p) => moves
            .iter()
            .map(|m| {
                vec![
                    p.id.to_string(),
                    p.what.clone(),
                    p.state.clone(),
                    m.seq.unwrap_or(0).to_string(),
                    m.id.to_string(),
                    m.table.clone(),
                    m.slots_text(),
                    m.source.clone(),
                    m.target.clone(),
                    m.step.clone(),
                    m.copied.to_string(),
                    m.rows_estimate.to_string(),
                    format!("{:.0}", m.rows_per_sec),
                    m.message.clone().or(p.message.clone()).unwrap_or_default(),
                    driver.clone(),
                ]
            })
            .collect(),
    };
    Ok(Answer::Rows {
        columns: headers(&[
            "plan",
            "what",
            "plan_state",
            "seq",
            "migration",
            "tables",
            "slots",
            "source",
            "target",
            "step",
            "rows_copied",
            "rows_estimate",
            "rows_per_sec",
            "message",
            "driver",
        ]),
        rows,
    })
}

/// `PAUSE REBALANCE`, `RESUME REBALANCE`, `ABORT REBALANCE` (`verb` upper-cased).
pub async fn steer(shared: &Shared, t: &Topology, verb: &str) -> Result<Answer, MyError> {
    let (from, to, done): (&[&str], &str, &str) = match verb {
        "PAUSE" => (
            &["running"],
            "paused",
            "paused: moves under way finish, no other starts (RESUME REBALANCE)",
        ),
        "RESUME" => (&["paused"], "running", "running again"),
        _ => (
            &["running", "paused"],
            "aborting",
            "aborting: moves under way abort cleanly unless past their cutover, the others are dropped",
        ),
    };
    let mut c = connect(shared, t).await?;
    let Some(plan) = plans::current(&mut c).await.map_err(failed)? else {
        drop(c);
        return Err(unsupported("no rebalance is under way (SHOW REBALANCE)"));
    };
    let changed = plans::set_state(&mut c, plan.id, from, to, None)
        .await
        .map_err(failed)?;
    drop(c);
    if !changed {
        return Err(unsupported(format!(
            "rebalance {} is {}: it cannot be {}",
            plan.id,
            plan.state,
            match verb {
                "PAUSE" => "paused",
                "RESUME" => "resumed",
                _ => "aborted",
            }
        )));
    }
    Ok(Answer::Done(format!("rebalance {} {done}", plan.id)))
}

fn dry_run(words: &[String]) -> bool {
    words.windows(2).any(|p| p[0] == "DRY" && p[1] == "RUN")
}
