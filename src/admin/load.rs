//! `SHOW LOAD`, `SHOW HOT SLOTS [FOR t]`, `SHOW HOT KEYS [FOR t]` and `SHOW BALANCE`: the
//! load this proxy measured (`crate::load`) over the last `[hot] seconds`, a second at a
//! time, and the moves that would even it out (`crate::shared::load::suggest`).

use super::words::{headers, Answer};
use crate::config::hot::BalanceMode;
use crate::config::{TableRule, Topology};
use crate::load::detect::{BYTES, MICROS, ROWS, STATEMENTS};
use crate::shared::Shared;

/// Slots `SHOW HOT SLOTS` lists besides the hot ones.
const SLOT_ROWS: usize = 20;
/// Keys `SHOW HOT KEYS` lists per hot slot.
const KEY_ROWS: usize = 10;

fn ms(micros: u64) -> String {
    format!("{:.1}", micros as f64 / 1000.0)
}

fn state(hot_for: Option<u64>) -> String {
    match hot_for {
        Some(s) => format!("hot for {s}s"),
        None => "-".into(),
    }
}

/// `SHOW LOAD`: each node's statements and node time a second, against the mean.
pub fn show_load(shared: &Shared, t: &Topology) -> Answer {
    let load = &shared.metrics.load;
    let hot = load.hot_slots();
    let rows = load
        .nodes(&t.hot)
        .into_iter()
        .map(|n| {
            let index = t.node_index(&n.name);
            let hot_slots = hot
                .iter()
                .filter(|(table, slot)| {
                    matches!(t.table(table), Some(TableRule::HashSlot { map, .. })
                        if Some(map.owner_of_slot(*slot)) == index)
                })
                .count();
            vec![
                n.name,
                n.statements.to_string(),
                ms(n.micros),
                format!("{:.2}", n.of_mean),
                hot_slots.to_string(),
                state(n.hot_for),
            ]
        })
        .collect();
    Answer::Rows {
        columns: headers(&[
            "node",
            "statements_per_s",
            "node_ms_per_s",
            "of_mean",
            "hot_slots",
            "state",
        ]),
        rows,
    }
}

/// `SHOW HOT SLOTS [FOR t]`: the hot slots, then the busiest others.
pub fn show_slots(shared: &Shared, t: &Topology, table: Option<&str>) -> Answer {
    let rows = shared
        .metrics
        .load
        .slots(&t.hot, usize::MAX)
        .into_iter()
        .filter(|s| table.is_none_or(|name| name.eq_ignore_ascii_case(&s.table)))
        .enumerate()
        .filter(|(i, s)| s.hot_for.is_some() || *i < SLOT_ROWS)
        .map(|(_, s)| {
            let node = match t.table(&s.table) {
                Some(TableRule::HashSlot { map, .. }) => {
                    t.node_name(map.owner_of_slot(s.slot)).to_string()
                }
                _ => "?".into(),
            };
            vec![
                s.table,
                s.slot.to_string(),
                node,
                s.rate[STATEMENTS].to_string(),
                s.rate[ROWS].to_string(),
                s.rate[BYTES].to_string(),
                ms(s.rate[MICROS]),
                state(s.hot_for),
            ]
        })
        .collect();
    Answer::Rows {
        columns: headers(&[
            "table",
            "slot",
            "node",
            "statements_per_s",
            "rows_per_s",
            "bytes_per_s",
            "ms_per_s",
            "state",
        ]),
        rows,
    }
}

/// `SHOW HOT KEYS [FOR t]`: each hot slot's heaviest keys since it became hot.
pub fn show_keys(shared: &Shared, table: Option<&str>) -> Answer {
    let rows = shared
        .metrics
        .load
        .keys(table, KEY_ROWS)
        .into_iter()
        .map(|k| {
            let share = if k.total > 0 {
                100.0 * k.count as f64 / k.total as f64
            } else {
                0.0
            };
            vec![
                k.table,
                k.slot.to_string(),
                String::from_utf8_lossy(&k.key).into_owned(),
                k.count.to_string(),
                k.error.to_string(),
                format!("{share:.1}"),
            ]
        })
        .collect();
    Answer::Rows {
        columns: headers(&["table", "slot", "key", "statements", "error", "pct_of_slot"]),
        rows,
    }
}

/// `SHOW BALANCE`: the moves that would even the nodes' load now, as the admin statements
/// that make them (a slot, or a hot key split out of its slot), with the load a second of
/// each side before and after; and the hot slots no move helps.
pub fn show_balance(shared: &Shared, t: &Topology) -> Answer {
    let columns = headers(&[
        "mode",
        "action",
        "slot_ms_per_s",
        "from_ms_per_s",
        "to_ms_per_s",
    ]);
    let mode = match t.balance.mode {
        BalanceMode::Off => "off",
        BalanceMode::Suggest => "suggest",
        BalanceMode::Auto => "auto",
    };
    if t.balance.mode == BalanceMode::Off {
        return Answer::Rows {
            columns,
            rows: Vec::new(),
        };
    }
    let plan = crate::shared::load::suggest(shared, t);
    let mut rows: Vec<Vec<String>> = plan
        .moves
        .iter()
        .map(|m| {
            vec![
                mode.into(),
                crate::shared::load::move_statements(t, m).join("; "),
                ms(m.micros),
                format!("{} -> {}", ms(m.from_load.0), ms(m.from_load.1)),
                format!("{} -> {}", ms(m.to_load.0), ms(m.to_load.1)),
            ]
        })
        .collect();
    let keys = shared.metrics.load.keys(None, 1);
    let loads: Vec<(usize, u64)> = shared
        .metrics
        .load
        .nodes(&t.hot)
        .into_iter()
        .filter_map(|n| Some((t.node_index(&n.name)?, n.micros)))
        .filter(|(i, _)| t.nodes.get(*i).is_some_and(|n| !n.retired && n.weight > 0))
        .collect();
    // A range split or merged by size (`crate::migrate::upkeep`).
    if let Some(s) = shared
        .range_upkeep
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
    {
        rows.push(vec![
            mode.into(),
            s,
            String::new(),
            String::new(),
            String::new(),
        ]);
    }
    for c in &plan.stuck {
        // Its heaviest key, from the sketch of any of the group's tables.
        let heaviest = keys
            .iter()
            .filter(|k| k.slot == c.slot && k.total > 0)
            .max_by_key(|k| k.count);
        rows.push(stuck_row(mode, t, c, heaviest, &loads));
    }
    Answer::Rows { columns, rows }
}

/// A hot slot no move helps: the `SALT KEY` statement that would spread its heaviest key over
/// enough nodes, with the numbers, where its table can be salted; else why not.
fn stuck_row(
    mode: &str,
    t: &Topology,
    c: &crate::load::balance::Candidate,
    heaviest: Option<&crate::load::HotKey>,
    loads: &[(usize, u64)],
) -> Vec<String> {
    let node = t.node_name(c.node);
    if c.range {
        return vec![
            mode.into(),
            format!(
                "-- range {} of {} on {node} is most of its node's load and no split of it moves half: its load is one key's, or its keys were not seen often enough yet (a range table cannot salt a key)",
                c.slot, c.table
            ),
            ms(c.micros),
            String::new(),
            String::new(),
        ];
    }
    let said = format!(
        "slot {} of {} on {node} is most of its node's load: moving it, or its heaviest key alone, moves the hot spot",
        c.slot, c.table
    );
    let Some(k) = heaviest else {
        return vec![
            mode.into(),
            format!("-- {said}"),
            ms(c.micros),
            String::new(),
            String::new(),
        ];
    };
    let share = k.count as f64 / k.total as f64;
    let key = String::from_utf8_lossy(&k.key).into_owned();
    let salt = match t.table(&k.table) {
        Some(TableRule::HashSlot { map, .. }) => map.salt().map(|s| s.buckets),
        _ => None,
    };
    let key_micros = (c.micros as f64 * share) as u64;
    let before = loads
        .iter()
        .find(|(n, _)| *n == c.node)
        .map_or(0, |(_, l)| *l);
    let over = salt.map(|b| crate::load::balance::salt_over(key_micros, c.node, loads, b));
    match over.filter(|o| o.len() > 1) {
        Some(over) => {
            let each = key_micros / over.len() as u64;
            let names: Vec<&str> = over[1..].iter().map(|n| t.node_name(*n)).collect();
            vec![
                mode.into(),
                format!(
                    "SALT KEY {} OF {} OVER {} -- its key {key} has {:.0}% of the slot's statements, {} ms/s of {node}'s time: over {} nodes about {} ms/s each",
                    crate::sql::write::admin_word(&key),
                    k.table,
                    names.join(", "),
                    100.0 * share,
                    ms(key_micros),
                    over.len(),
                    ms(each)
                ),
                ms(c.micros),
                format!("{} -> {}", ms(before), ms(before.saturating_sub(key_micros) + each)),
                String::new(),
            ]
        }
        None => vec![
            mode.into(),
            format!(
                "-- {said}; its heaviest key, {key} of `{}`, has {:.0}% of its statements: it needs salting (`salt = {{ by = \"<column>\", buckets = N }}` on `{}`, then SALT KEY)",
                k.table,
                100.0 * share,
                k.table
            ),
            ms(c.micros),
            String::new(),
            String::new(),
        ],
    }
}
