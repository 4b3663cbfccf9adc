//! The moves that would even the nodes' load: hot slots from the nodes over `node_ratio`
//! times the mean to the coolest nodes, by the node time each slot was measured to take.
//! A move is planned only if it lowers the busier of its two nodes by at least half the
//! load it moves, and leaves its target no hotter than the busiest other node (within
//! [`MARGIN`], the measure's noise): a move that would only trade places is not made.
//!
//! A hot slot whose heaviest key carries nearly all its load ([`KEY_ALONE`]) has that key
//! moved alone, split out of its slot: the same relief for a fraction of the rows. A slot
//! whose move would not help has its heaviest key moved alone when that key carries at
//! least [`KEY_SPLIT`] of its load and that move helps. A slot neither helps (its key is
//! most of its node's load and would carry the hot spot along) is named as stuck. Pure;
//! `SHOW BALANCE` shows the plan.

/// How much hotter than the busiest other node a move may leave its target: load measured
/// over a few seconds differs by about this much from one window to the next.
pub const MARGIN: f64 = 0.1;
/// The share of its slot's statements at which a hot slot's heaviest key moves alone
/// instead of the slot.
pub const KEY_ALONE: f64 = 0.8;
/// The share at which the heaviest key of a slot that cannot move usefully is tried alone.
pub const KEY_SPLIT: f64 = 0.5;

/// A hot slot (of a group of tables sharded alike, named by its first table) and its load.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub table: String,
    pub slot: u16,
    pub node: usize,
    /// Node time a second, microseconds.
    pub micros: u64,
    /// Its heaviest key (text form) and that key's share of the slot's statements, a lower
    /// bound (`None`: no key is known well enough).
    pub key: Option<(Vec<u8>, f64)>,
    /// A range of a range table (`slot` is its number): it moves whole, or is split at one
    /// of `cuts` and its upper part moves.
    pub range: bool,
    /// A range's keys it may be split at, in key order, each with the share of the range's
    /// load from that key up.
    pub cuts: Vec<(Vec<u8>, f64)>,
}

/// One planned move, with the two nodes' load a second before and after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub table: String,
    pub slot: u16,
    /// A key moved alone, split out of the slot; `None`: the whole slot moves. For a range
    /// (`range`, `slot` its number): the key it is split at, its upper part moving.
    pub key: Option<Vec<u8>>,
    pub range: bool,
    pub from: usize,
    pub to: usize,
    pub micros: u64,
    pub from_load: (u64, u64),
    pub to_load: (u64, u64),
}

#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub moves: Vec<Move>,
    /// Hot slots on an overloaded node that no move helps.
    pub stuck: Vec<Candidate>,
}

/// A slot's part of its node's time: `slot` of the `keyed` time the proxy measured for all
/// the node's statements routed by key (node time and the proxy's own, queueing included),
/// scaled to the `node` time the node's statements took there. What the proxy adds is
/// spread over the slots like the node's work, so the slots' parts never add up to more
/// than their node's time.
pub fn node_share(slot: u64, keyed: u64, node: u64) -> u64 {
    if keyed <= node || keyed == 0 {
        return slot;
    }
    (slot as u128 * node as u128 / keyed as u128) as u64
}

/// Plans at most `max` moves. `nodes` are the nodes in service with their node time a
/// second (microseconds); those `closed` take no slots (weight 0: being drained), though
/// their load counts in the mean.
pub fn plan(
    nodes: &[(usize, u64)],
    closed: &[usize],
    candidates: &[Candidate],
    ratio: f64,
    max: usize,
) -> Plan {
    let mut load: Vec<(usize, u64)> = nodes.to_vec();
    let mut out = Plan::default();
    if load.len() < 2 {
        return out;
    }
    let mean = load.iter().map(|(_, l)| *l as f64).sum::<f64>() / load.len() as f64;
    let mut hot: Vec<&Candidate> = candidates.iter().collect();
    // The heaviest first: fewest moves for the most load.
    hot.sort_by(|a, b| b.micros.cmp(&a.micros).then(a.slot.cmp(&b.slot)));
    for c in hot {
        if out.moves.len() >= max {
            break;
        }
        let Some(from) = load.iter().position(|(n, _)| *n == c.node) else {
            continue;
        };
        if (load[from].1 as f64) <= mean * ratio {
            continue;
        }
        let Some(to) = (0..load.len())
            .filter(|i| *i != from && !closed.contains(&load[*i].0))
            .min_by_key(|i| (load[*i].1, load[*i].0))
        else {
            continue;
        };
        let (f, t) = (load[from].1, load[to].1);
        // Does moving `w` of the load help: the busier of the two nodes lower by at least
        // half of it, the target no hotter than the busiest other node?
        let helps = |w: u64| {
            let w = w.min(f);
            // The busiest of the other nodes once it moved, the source included.
            let others = (0..load.len())
                .filter(|i| *i != to)
                .map(|i| if i == from { f - w } else { load[i].1 })
                .max()
                .unwrap_or(0);
            let gains = f.saturating_sub((f - w).max(t + w)) >= w / 2;
            let hottest = (t + w) as f64 > others as f64 * (1.0 + MARGIN);
            (w > 0 && gains && !hottest).then_some(w)
        };
        let key_load = |(k, share): &(Vec<u8>, f64)| (k.clone(), (c.micros as f64 * share) as u64);
        let chosen = match &c.key {
            // A range moves whole, or its part above the cut whose load evens the two nodes
            // best (half their difference), of the cuts that help.
            _ if c.range => helps(c.micros).map(|w| (None, w)).or_else(|| {
                let ideal = f.saturating_sub(t) / 2;
                c.cuts
                    .iter()
                    .filter_map(|cut| {
                        let (k, w) = key_load(cut);
                        helps(w).map(|w| (Some(k), w))
                    })
                    .min_by_key(|(_, w)| w.abs_diff(ideal))
            }),
            Some(k) if k.1 >= KEY_ALONE => {
                let (k, w) = key_load(k);
                helps(w).map(|w| (Some(k), w))
            }
            key => helps(c.micros).map(|w| (None, w)).or_else(|| {
                let (k, w) = key_load(key.as_ref().filter(|k| k.1 >= KEY_SPLIT)?);
                helps(w).map(|w| (Some(k), w))
            }),
        };
        let Some((key, w)) = chosen else {
            out.stuck.push(c.clone());
            continue;
        };
        out.moves.push(Move {
            table: c.table.clone(),
            slot: c.slot,
            key,
            range: c.range,
            from: c.node,
            to: load[to].0,
            micros: w,
            from_load: (f, f - w),
            to_load: (t, t + w),
        });
        load[from].1 = f - w;
        load[to].1 = t + w;
    }
    out
}

/// Where a range may be split, by the sampled keys of its load and their weights (any
/// order): each distinct key but the lowest (nothing would be left below it), in key order,
/// with the share of the weight from that key up. A key is never split from itself: a range
/// whose load is one key's has no cut (TiKV's load split retries such a range forever, tikv
/// #19572); a range of a few heavy keys is cut between them.
pub fn cuts<K: Ord + Clone>(samples: &[(K, u64)]) -> Vec<(K, f64)> {
    let mut keys: Vec<(K, u64)> = Vec::with_capacity(samples.len());
    let mut sorted: Vec<&(K, u64)> = samples.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (k, w) in sorted {
        match keys.last_mut() {
            Some(last) if last.0 == *k => last.1 += w,
            _ => keys.push((k.clone(), *w)),
        }
    }
    let total: u64 = keys.iter().map(|k| k.1).sum();
    if total == 0 {
        return Vec::new();
    }
    let mut above = total;
    let mut out = Vec::with_capacity(keys.len().saturating_sub(1));
    for (i, (k, w)) in keys.iter().enumerate() {
        if i > 0 {
            out.push((k.clone(), above as f64 / total as f64));
        }
        above -= w;
    }
    out
}

/// The nodes to salt a key over (`SALT KEY ... OVER`): a key taking `key` µs of node time a
/// second on `node`, with the nodes' loads `loads` (weighted nodes only), goes to its own node
/// and the coolest others, as many as it takes for each run of its buckets to carry no more
/// than the mean node's load: at least two, at most `buckets` and the nodes there are.
pub fn salt_over(key: u64, node: usize, loads: &[(usize, u64)], buckets: u16) -> Vec<usize> {
    let mean = loads.iter().map(|(_, l)| *l as f64).sum::<f64>() / loads.len().max(1) as f64;
    let most = loads.len().min(usize::from(buckets)).max(2);
    let need = if mean > 0.0 {
        ((key as f64 / mean).ceil() as usize).clamp(2, most)
    } else {
        2
    };
    let mut others: Vec<(usize, u64)> = loads.iter().copied().filter(|(n, _)| *n != node).collect();
    others.sort_by_key(|(n, l)| (*l, *n));
    let mut over = vec![node];
    over.extend(others.into_iter().take(need - 1).map(|(n, _)| n));
    over
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(slot: u16, node: usize, micros: u64) -> Candidate {
        Candidate {
            table: "t".into(),
            slot,
            node,
            micros,
            key: None,
            range: false,
            cuts: Vec::new(),
        }
    }

    #[test]
    fn hot_slots_go_from_the_hottest_node_to_the_coolest() {
        // Node 0 carries 900 ms a second, three others 100: its two hot slots go to two
        // different nodes, the heavier first.
        let nodes = [(0, 900_000), (1, 100_000), (2, 100_000), (3, 120_000)];
        let p = plan(&nodes, &[], &[c(5, 0, 300_000), c(9, 0, 350_000)], 1.5, 4);
        let moved: Vec<(u16, usize, usize)> =
            p.moves.iter().map(|m| (m.slot, m.from, m.to)).collect();
        assert_eq!(moved, vec![(9, 0, 1), (5, 0, 2)]);
        assert_eq!(p.moves[0].from_load, (900_000, 550_000));
        assert_eq!(p.moves[0].to_load, (100_000, 450_000));
        assert!(p.stuck.is_empty());
    }

    #[test]
    fn a_node_being_drained_takes_no_slot() {
        // ds1 is the coolest but weighs 0: the slot goes to the next coolest.
        let nodes = [(0, 900_000), (1, 0), (2, 100_000)];
        let p = plan(&nodes, &[1], &[c(5, 0, 300_000)], 1.5, 4);
        assert_eq!(p.moves.len(), 1);
        assert_eq!(p.moves[0].to, 2);
    }

    #[test]
    fn a_slot_that_is_its_nodes_whole_load_is_stuck_not_moved() {
        let nodes = [(0, 800_000), (1, 100_000), (2, 100_000)];
        let p = plan(&nodes, &[], &[c(5, 0, 750_000)], 1.5, 4);
        assert!(p.moves.is_empty());
        assert_eq!(p.stuck, vec![c(5, 0, 750_000)]);
    }

    #[test]
    fn no_move_makes_its_target_the_hottest_node() {
        // Moving the 500 ms slot would lower the peak from 1000 to 600 ms: on the target,
        // then hotter than its source.
        let nodes = [(0, 1_000_000), (1, 100_000), (2, 150_000), (3, 150_000)];
        let p = plan(&nodes, &[], &[c(5, 0, 500_000)], 1.5, 4);
        assert!(p.moves.is_empty(), "{p:?}");
        assert_eq!(p.stuck, vec![c(5, 0, 500_000)]);
        // The same slot where the target stays below the source: moved.
        let nodes = [(0, 1_200_000), (1, 100_000), (2, 150_000), (3, 150_000)];
        assert_eq!(
            plan(&nodes, &[], &[c(5, 0, 500_000)], 1.5, 4).moves.len(),
            1
        );
    }

    #[test]
    fn a_slots_part_of_its_nodes_time_never_exceeds_it() {
        // The proxy saw 900 ms of keyed statements on a node that spent 600: each slot
        // gets two thirds of what the proxy saw.
        assert_eq!(node_share(450_000, 900_000, 600_000), 300_000);
        // Where the node spent more (statements not routed by key), the slot's own.
        assert_eq!(node_share(450_000, 500_000, 600_000), 450_000);
        assert_eq!(node_share(0, 0, 0), 0);
    }

    #[test]
    fn a_move_that_gains_little_is_not_made() {
        // ds0 carries one hot slot and a little more than the coolest node: moving the
        // slot there would lower the pair's peak by 20 of 600 ms (3%), trading places.
        let nodes = [(0, 600_000), (1, 100_000), (2, 80_000)];
        let p = plan(&nodes, &[], &[c(5, 0, 500_000)], 1.5, 4);
        assert!(p.moves.is_empty(), "{p:?}");
        assert_eq!(p.stuck.len(), 1);
    }

    #[test]
    fn nothing_moves_when_the_nodes_are_even_or_the_cap_is_reached() {
        let even = [(0, 300_000), (1, 290_000), (2, 310_000)];
        assert_eq!(
            plan(&even, &[], &[c(5, 2, 200_000)], 1.5, 4),
            Plan::default()
        );
        let skewed = [(0, 900_000), (1, 0), (2, 0)];
        let p = plan(&skewed, &[], &[c(1, 0, 200_000), c(2, 0, 200_000)], 1.5, 1);
        assert_eq!(p.moves.len(), 1);
    }

    #[test]
    fn after_the_moves_no_target_is_hotter_than_its_source_was_left() {
        let nodes = [(0, 1_000_000), (1, 600_000), (2, 50_000)];
        let cands: Vec<Candidate> = (0..10).map(|s| c(s, 0, 90_000)).collect();
        let p = plan(&nodes, &[], &cands, 1.2, 10);
        for m in &p.moves {
            assert!(m.to_load.1 < m.from_load.0, "{m:?}");
        }
        // Moves stop once node 0 is no longer over 1.2 x the mean (550 ms).
        let left = nodes[0].1 - p.moves.iter().map(|m| m.micros).sum::<u64>();
        assert!(left as f64 <= 550_000.0 * 1.2 + 90_000.0, "{left}");
    }

    fn keyed(slot: u16, node: usize, micros: u64, share: f64) -> Candidate {
        Candidate {
            key: Some((b"42".to_vec(), share)),
            ..c(slot, node, micros)
        }
    }

    #[test]
    fn a_key_that_is_nearly_all_its_slots_load_moves_alone() {
        let nodes = [(0, 900_000), (1, 100_000), (2, 100_000), (3, 120_000)];
        let p = plan(&nodes, &[], &[keyed(5, 0, 300_000, 0.9)], 1.5, 4);
        assert_eq!(p.moves.len(), 1, "{p:?}");
        assert_eq!(p.moves[0].key.as_deref(), Some(&b"42"[..]));
        assert_eq!(p.moves[0].micros, 270_000);
        assert_eq!(p.moves[0].from_load, (900_000, 630_000));
        // A key with less of its slot's load: the slot moves.
        let p = plan(&nodes, &[], &[keyed(5, 0, 300_000, 0.6)], 1.5, 4);
        assert_eq!(p.moves[0].key, None);
        assert_eq!(p.moves[0].micros, 300_000);
    }

    #[test]
    fn a_slot_too_heavy_to_move_has_its_heaviest_key_moved_alone() {
        // The slot would make its target the hottest node (see above); its key's 60% does
        // not.
        let nodes = [(0, 1_000_000), (1, 100_000), (2, 150_000), (3, 150_000)];
        let p = plan(&nodes, &[], &[keyed(5, 0, 500_000, 0.6)], 1.5, 4);
        assert_eq!(p.moves.len(), 1, "{p:?}");
        assert_eq!(p.moves[0].key.as_deref(), Some(&b"42"[..]));
        assert_eq!(p.moves[0].to_load, (100_000, 400_000));
        // Under half of the slot: not tried alone.
        let p = plan(&nodes, &[], &[keyed(5, 0, 500_000, 0.4)], 1.5, 4);
        assert!(p.moves.is_empty() && p.stuck.len() == 1, "{p:?}");
    }

    #[test]
    fn a_key_too_hot_for_any_node_is_stuck() {
        let nodes = [(0, 800_000), (1, 100_000), (2, 100_000)];
        let p = plan(&nodes, &[], &[keyed(5, 0, 750_000, 0.95)], 1.5, 4);
        assert!(p.moves.is_empty(), "{p:?}");
        assert_eq!(p.stuck.len(), 1);
    }

    #[test]
    fn a_key_is_salted_over_its_node_and_as_many_cool_nodes_as_its_load_needs() {
        let loads = [(0, 900), (1, 100), (2, 300), (3, 200)];
        // 750 of node 0's 900: the mean is 375, so two nodes take it, the coolest beside.
        assert_eq!(salt_over(750, 0, &loads, 8), vec![0, 1]);
        // Three times the mean: three nodes, the coolest first.
        assert_eq!(salt_over(1125, 0, &loads, 8), vec![0, 1, 3]);
        // Never more nodes than buckets or nodes, never fewer than two.
        assert_eq!(salt_over(9000, 0, &loads, 3), vec![0, 1, 3]);
        assert_eq!(salt_over(9000, 0, &loads, 64), vec![0, 1, 3, 2]);
        assert_eq!(salt_over(10, 2, &loads, 8), vec![2, 1]);
    }

    fn range(slot: u16, node: usize, micros: u64, cuts: &[(&[u8], f64)]) -> Candidate {
        Candidate {
            range: true,
            cuts: cuts.iter().map(|(k, s)| (k.to_vec(), *s)).collect(),
            ..c(slot, node, micros)
        }
    }

    #[test]
    fn a_range_too_hot_to_move_whole_is_split_where_the_moved_part_evens_the_nodes() {
        // Moving the whole 600 ms range would make its target the hottest node; of its cuts,
        // the one whose part above evens ds0 (800) and ds1 (100) best moves: 350 ms ideally.
        let cuts: [(&[u8], f64); 3] = [(b"3000", 0.8), (b"5000", 0.5), (b"7000", 0.2)];
        let nodes = [(0, 800_000), (1, 100_000), (2, 150_000)];
        let p = plan(&nodes, &[], &[range(3, 0, 600_000, &cuts)], 1.5, 4);
        assert_eq!(p.moves.len(), 1, "{p:?}");
        let m = &p.moves[0];
        assert!(m.range);
        assert_eq!((m.key.as_deref(), m.to), (Some(&b"5000"[..]), 1));
        assert_eq!(m.to_load, (100_000, 400_000));
        // Where halving would make the target the hottest node, a smaller part moves.
        let nodes = [(0, 625_000), (1, 125_000), (2, 125_000), (3, 125_000)];
        let cuts: [(&[u8], f64); 3] = [(b"3000", 0.5), (b"3500", 0.4), (b"6000", 0.1)];
        let p = plan(&nodes, &[], &[range(2, 0, 625_000, &cuts)], 1.5, 4);
        assert_eq!(p.moves[0].key.as_deref(), Some(&b"3500"[..]), "{p:?}");
        // A range that can move whole does.
        let nodes = [(0, 800_000), (1, 100_000), (2, 150_000)];
        let p = plan(&nodes, &[], &[range(3, 0, 300_000, &cuts)], 1.5, 4);
        assert_eq!(p.moves[0].key, None);
        // One key's load, which no cut divides: stuck.
        let p = plan(&nodes, &[], &[range(3, 0, 750_000, &[])], 1.5, 4);
        assert!(p.moves.is_empty() && p.stuck.len() == 1, "{p:?}");
    }

    #[test]
    fn a_range_is_cut_between_its_sampled_keys_with_the_load_above_each() {
        // Load skewed to the low keys.
        let samples = [(1, 40), (2, 30), (3, 10), (7, 10), (9, 10)];
        assert_eq!(cuts(&samples), vec![(2, 0.6), (3, 0.3), (7, 0.2), (9, 0.1)]);
        // Unsorted, with repeats.
        let samples = [(9, 5), (1, 5), (9, 5), (5, 5)];
        assert_eq!(cuts(&samples), vec![(5, 0.75), (9, 0.5)]);
        // One key: no cut.
        assert!(cuts(&[(4, 100), (4, 3)]).is_empty());
        assert!(cuts::<i32>(&[]).is_empty());
    }
}
