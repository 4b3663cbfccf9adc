//! The once-a-second tick of the load windows (`crate::load`): each node's statements and
//! node time read off its latency histogram, the windows closed, and what turned hot or cool
//! logged; unless `[balance] mode = "off"` the moves that would even the load are logged
//! when they change, and `SHOW BALANCE` shows them ([`suggest`]); each window's plan goes
//! to `Shared::suggested`, from which `crate::migrate::balance` makes them in mode "auto".

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use super::Shared;
use crate::config::hot::BalanceMode;
use crate::config::{TableRule, Topology};
use crate::load::balance::{self, Candidate, Plan};
use crate::load::detect::MICROS;

/// Moves a suggestion holds at most.
pub const MAX_MOVES: usize = 4;
/// Sights of a hot slot's keys before its heaviest key's share is trusted.
const MIN_SIGHTS: u64 = 100;
/// Sampled keys of a hot range before its split point is trusted.
const MIN_SAMPLES: usize = 16;

/// Ticks the load windows every second until the process ends.
pub async fn watch(shared: Arc<Shared>) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut said: Vec<String> = Vec::new();
    let mut meta: Option<mysql_async::Conn> = None;
    let mut failing = false;
    loop {
        every.tick().await;
        let topo = shared.topology();
        let nodes = topo
            .nodes
            .iter()
            .filter(|n| !n.retired)
            .map(|n| {
                let h = shared.metrics.latency.with_label_values(&[&n.name]);
                let micros = (h.get_sample_sum() * 1e6) as u64;
                (n.name.clone(), [h.get_sample_count(), micros])
            })
            .collect();
        let load = &shared.metrics.load;
        let own = load.close(nodes);
        let mut w = own.clone();
        // With a metadata schema, the cluster's load: the other proxies' last seconds added.
        if let Some(m) = &topo.metadata {
            let shared_load =
                tokio::time::timeout(EXCHANGE_TIMEOUT, exchange(&shared, &m.url, &mut meta, &own))
                    .await
                    .unwrap_or_else(|_| Err("no answer within 500 ms".into()));
            match shared_load {
                Ok(others) => {
                    load.add(&mut w, &others);
                    failing = false;
                }
                Err(e) => {
                    if !failing {
                        warn!(error = %e, "load: the other proxies' load is not known; judging this proxy's alone");
                    }
                    failing = true;
                    meta = None;
                }
            }
        } else {
            meta = None;
        }
        let changes = load.judge(w, &topo.hot);
        for (table, slot) in &changes.hot {
            warn!(table = %table, slot, "hot slot");
        }
        for (table, slot) in &changes.cool {
            info!(table = %table, slot, "slot cool again");
        }
        for node in &changes.hot_nodes {
            warn!(node, "hot node");
        }
        for node in &changes.cool_nodes {
            info!(node, "node cool again");
        }
        let plan = match topo.balance.mode {
            BalanceMode::Off => Plan::default(),
            _ => suggest(&shared, &topo),
        };
        let now = statements(&topo, &plan);
        if now != said && !now.is_empty() {
            warn!(moves = %now.join("; "), "balance suggests");
        }
        said = now;
        // Every window's plan, even an unchanged one: the balancer counts windows.
        shared.suggested.send_replace(Arc::new(plan));
    }
}

/// How long the exchange of a second's load with the other proxies may take.
const EXCHANGE_TIMEOUT: Duration = Duration::from_millis(500);
/// Another proxy's second counts while it is at most this old.
const FRESH_MS: u64 = 3000;

/// Publishes this proxy's second (`own`) in the metadata schema and reads the other live
/// proxies' last ones.
async fn exchange(
    shared: &Shared,
    url: &str,
    conn: &mut Option<mysql_async::Conn>,
    own: &crate::load::detect::Window,
) -> Result<crate::load::Seconds, String> {
    let Some(c) = crate::metadata::link::kept(conn, url).await else {
        return Err("the metadata schema cannot be reached".into());
    };
    let me = shared.instance();
    // A slot counts for the others from an eighth of a threshold: eight proxies' sums.
    let h = &shared.topology().hot;
    let floor = [
        h.slot_statements / 8,
        h.slot_rows / 8,
        h.slot_bytes / 8,
        h.slot_node_ms * 1000 / 8,
    ]
    .map(|x| x.max(1));
    crate::metadata::load::publish(c, me, &crate::load::Seconds::of(own), &floor)
        .await
        .map_err(|e| e.to_string())?;
    crate::metadata::load::others(c, me, FRESH_MS)
        .await
        .map_err(|e| e.to_string())
}

/// The moves that would even the nodes' load now, by the load measured over the last
/// `[hot] seconds`: the hot slots of hash_slot tables (a group of tables sharded alike
/// counted as one, named by its first table), from nodes over `node_ratio` times the mean.
pub fn suggest(shared: &Shared, topo: &Topology) -> Plan {
    let load = &shared.metrics.load;
    let nodes: Vec<(usize, u64)> = load
        .nodes(&topo.hot)
        .into_iter()
        .filter_map(|n| Some((topo.node_index(&n.name)?, n.micros)))
        .collect();
    let all = load.slots(&topo.hot, usize::MAX);
    // The time of each node's statements routed by key, as the proxy saw them (node time
    // and the proxy's own, queueing included): a slot's share of it is its share of the
    // node's time.
    let mut keyed: HashMap<usize, u64> = HashMap::new();
    for s in &all {
        match topo.table(&s.table) {
            Some(TableRule::HashSlot { map, .. }) => {
                *keyed.entry(map.owner_of_slot(s.slot)).or_default() += s.rate[MICROS];
            }
            Some(TableRule::Range { map, .. }) if usize::from(s.slot) < map.len() => {
                *keyed.entry(map.owner(usize::from(s.slot))).or_default() += s.rate[MICROS];
            }
            _ => {}
        }
    }
    let share = |node: usize, micros: u64| {
        let node_time = nodes.iter().find(|(n, _)| *n == node).map_or(0, |n| n.1);
        balance::node_share(micros, keyed.get(&node).copied().unwrap_or(0), node_time)
    };
    // Each hot slot's heaviest key, once seen often enough to tell its share.
    let heaviest: HashMap<(String, u16), (Vec<u8>, f64)> = load
        .keys(None, 1)
        .into_iter()
        .filter(|k| k.total >= MIN_SIGHTS)
        .map(|k| {
            let share = k.count.saturating_sub(k.error) as f64 / k.total as f64;
            ((k.table, k.slot), (k.key, share))
        })
        .collect();
    let mut candidates: Vec<Candidate> = Vec::new();
    let held: Vec<(String, u16)> = {
        let mut h = shared.held.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        h.retain(|_, until| *until > now);
        h.keys().cloned().collect()
    };
    for s in all {
        if s.hot_for.is_none() {
            continue;
        }
        let map = match topo.table(&s.table) {
            Some(TableRule::HashSlot { map, .. }) => map,
            Some(TableRule::Range { map, .. }) => {
                let i = usize::from(s.slot);
                if i < map.len() && !map.is_moving() {
                    candidates.push(Candidate {
                        table: s.table.clone(),
                        slot: s.slot,
                        node: map.owner(i),
                        micros: share(map.owner(i), s.rate[MICROS]),
                        key: None,
                        range: true,
                        cuts: range_cuts(load, map, &s.table, s.slot),
                    });
                }
                continue;
            }
            _ => continue,
        };
        if map.moving(s.slot).is_some() {
            continue;
        }
        // The group's first table names it.
        let mut group = group_of(topo, &s.table);
        group.sort();
        let name = group.swap_remove(0);
        let node = map.owner_of_slot(s.slot);
        let micros = share(node, s.rate[MICROS]);
        // A key split out already is not its slot's load.
        let key = heaviest
            .get(&(s.table.clone(), s.slot))
            .filter(|(k, _)| !map.is_split(k))
            .cloned();
        match candidates
            .iter_mut()
            .find(|c| c.table == name && c.slot == s.slot)
        {
            Some(c) => {
                c.micros += micros;
                if c.key.is_none() {
                    c.key = key;
                }
            }
            None => candidates.push(Candidate {
                table: name,
                slot: s.slot,
                node,
                micros,
                key,
                range: false,
                cuts: Vec::new(),
            }),
        }
    }
    // A node of weight 0 is being drained: it takes no slots.
    let closed: Vec<usize> = nodes
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| topo.nodes[*n].weight == 0)
        .collect();
    // What the auto balancer's guards hold is left out: the plan moves what may move.
    candidates.retain(|c| !held.contains(&(c.table.clone(), c.slot)));
    balance::plan(&nodes, &closed, &candidates, topo.hot.node_ratio, MAX_MOVES)
}

/// Where a hot range may be split, by the keys of its statements sampled since it turned
/// hot: each cut as the admin writes its key, with the share of the load from it up. None
/// until [`MIN_SAMPLES`] of its keys were sampled.
fn range_cuts(
    load: &crate::load::Load,
    map: &crate::routing::range::RangeMap,
    table: &str,
    range: u16,
) -> Vec<(Vec<u8>, f64)> {
    let (lo, hi) = map.bounds(usize::from(range));
    let samples: Vec<_> = load
        .sample(table, range)
        .into_iter()
        .filter_map(|k| {
            let key = map.key_of_word(std::str::from_utf8(&k).ok()?).ok()?;
            // Keys of the range as it is now (the sample may be older than a split).
            let inside = lo.is_none_or(|lo| key >= *lo) && hi.is_none_or(|hi| key < *hi);
            inside.then_some((key, 1))
        })
        .collect();
    if samples.len() < MIN_SAMPLES {
        return Vec::new();
    }
    balance::cuts(&samples)
        .into_iter()
        .filter(|(k, _)| map.bound_toml(k).is_some())
        .map(|(k, share)| (map.word(&k).into_bytes(), share))
        .collect()
}

/// The hash_slot tables sharded alike with `table` (they move together), `table` first and
/// the others by name.
pub fn group_of(topo: &Topology, table: &str) -> Vec<String> {
    let mut out = vec![table.to_string()];
    let Some(TableRule::HashSlot { map, .. }) = topo.table(table) else {
        return out;
    };
    let mut others: Vec<String> = topo
        .tables
        .iter()
        .filter(|(name, r)| {
            !name.eq_ignore_ascii_case(table)
                && matches!(r, TableRule::HashSlot { map: m, .. } if m.same_reads(map))
        })
        .map(|(name, _)| name.clone())
        .collect();
    others.sort();
    out.extend(others);
    out
}

/// A plan's moves as the admin statements that make them.
pub fn statements(topo: &Topology, plan: &Plan) -> Vec<String> {
    plan.moves
        .iter()
        .flat_map(|m| move_statements(topo, m))
        .collect()
}

/// The admin statements that make a move (a range split and moved: two).
pub fn move_statements(topo: &Topology, m: &crate::load::balance::Move) -> Vec<String> {
    // Quoted as the admin interface reads it back.
    let word = |k: &[u8]| crate::sql::write::admin_word(&String::from_utf8_lossy(k));
    let to = |m: &crate::load::balance::Move| topo.node_name(m.to).to_string();
    match (&m.key, topo.table(&m.table)) {
        (Some(k), Some(TableRule::Range { .. })) if m.range => vec![
            format!("SPLIT RANGE {} OF {}", word(k), m.table),
            format!("MIGRATE RANGE {} OF {} TO {}", word(k), m.table, to(m)),
        ],
        (None, Some(TableRule::Range { map, .. })) if m.range => vec![format!(
            "MIGRATE RANGE {} OF {} TO {}",
            word(map.word_in(usize::from(m.slot)).as_bytes()),
            m.table,
            to(m)
        )],
        (Some(k), _) => vec![format!(
            "MIGRATE KEY {} OF {} TO {}",
            word(k),
            m.table,
            to(m)
        )],
        (None, _) => vec![format!(
            "MIGRATE SLOTS {}-{} OF {} TO {}",
            m.slot,
            m.slot,
            m.table,
            to(m)
        )],
    }
}
