//! The rebalancer's plan for one slot map: which slot ranges move from which node to which,
//! so that every node holds its fair share.
//!
//! A node's fair share is its weight's share of the [`SLOTS`] slots: the whole part of
//! `SLOTS * weight / total`, and the slots left over one each to the nodes whose shares have
//! the largest fractions (ties to the node that holds more slots now, so fewer move). Every
//! node then ends within one slot of its exact share. A node of weight 0 (one being drained)
//! has a share of none.
//!
//! The plan moves exactly the slots nodes hold over their shares, each once: no plan moves
//! fewer. Each move goes from the most over-full node to the most under-full one and takes
//! contiguous slots where the source has them: a run long enough is cut at its end (one
//! range), else whole runs, longest first. Adding a fifth node of equal weight to four equal
//! nodes moves its 204 slots, 51 from each: what a consistent-hash ring with virtual nodes
//! buys, here with no ring and exact balance.

use super::slot::SLOTS;

/// One move of a plan: slots `first..=last`, all on `from`, to `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedMove {
    pub first: u16,
    pub last: u16,
    pub from: usize,
    pub to: usize,
}

impl PlannedMove {
    pub fn slots(&self) -> usize {
        usize::from(self.last - self.first) + 1
    }
}

/// Each node's fair share of the slots by `weights` (one per node), given the slots each
/// `held` now. `None` when every weight is 0.
pub fn shares(weights: &[u32], held: &[usize]) -> Option<Vec<usize>> {
    let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
    if total == 0 {
        return None;
    }
    let exact = |i: usize| SLOTS as u64 * u64::from(weights[i]);
    let mut share: Vec<usize> = (0..weights.len())
        .map(|i| (exact(i) / total) as usize)
        .collect();
    let left = SLOTS - share.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..weights.len()).filter(|i| weights[*i] > 0).collect();
    // Largest fraction first; then the node holding more now; then the lower index.
    order.sort_by(|a, b| {
        (exact(*b) % total)
            .cmp(&(exact(*a) % total))
            .then(held.get(*b).cmp(&held.get(*a)))
            .then(a.cmp(b))
    });
    for i in order.into_iter().take(left) {
        share[i] += 1;
    }
    Some(share)
}

/// The plan that brings the slot map `owner` (each slot's node) to the fair shares of
/// `weights` (one per node; `owner` names only nodes below `weights.len()`). Empty when the
/// map is balanced already, or every weight is 0.
pub fn plan(owner: &[usize], weights: &[u32]) -> Vec<PlannedMove> {
    moves(owner, weights, None)
}

/// The plan that moves every slot off `node` and no other: to the nodes most under their
/// shares by `weights` without it (its own weight counts as 0). Empty when no other node
/// has a weight.
pub fn drain(owner: &[usize], weights: &[u32], node: usize) -> Vec<PlannedMove> {
    let mut w = weights.to_vec();
    if let Some(x) = w.get_mut(node) {
        *x = 0;
    }
    moves(owner, &w, Some(node))
}

/// The moves to the shares of `weights`, from `only` (when given) or from the most
/// over-full node each time.
fn moves(owner: &[usize], weights: &[u32], only: Option<usize>) -> Vec<PlannedMove> {
    let n = weights.len();
    let mut owner = owner.to_vec();
    let mut held = vec![0usize; n];
    for o in &owner {
        if let Some(h) = held.get_mut(*o) {
            *h += 1;
        }
    }
    let Some(share) = shares(weights, &held) else {
        return Vec::new();
    };
    let mut surplus: Vec<i64> = (0..n).map(|i| held[i] as i64 - share[i] as i64).collect();
    let mut moves = Vec::new();
    loop {
        // The most over-full and the most under-full node (the lower index on a tie).
        let from = match only {
            Some(x) => Some(x).filter(|x| surplus.get(*x).is_some_and(|s| *s > 0)),
            None => (0..n)
                .filter(|i| surplus[*i] > 0)
                .max_by(|a, b| surplus[*a].cmp(&surplus[*b]).then(b.cmp(a))),
        };
        let to = (0..n)
            .filter(|i| surplus[*i] < 0)
            .min_by(|a, b| surplus[*a].cmp(&surplus[*b]).then(a.cmp(b)));
        let (Some(from), Some(to)) = (from, to) else {
            break;
        };
        let k = surplus[from].min(-surplus[to]) as usize;
        for (first, last) in take(&runs_of(&owner, from), k) {
            for s in first..=last {
                owner[usize::from(s)] = to;
            }
            moves.push(PlannedMove {
                first,
                last,
                from,
                to,
            });
        }
        surplus[from] -= k as i64;
        surplus[to] += k as i64;
    }
    moves
}

/// The maximal runs of consecutive slots `node` holds in `owner`.
fn runs_of(owner: &[usize], node: usize) -> Vec<(u16, u16)> {
    let mut runs: Vec<(u16, u16)> = Vec::new();
    for (s, o) in owner.iter().enumerate() {
        if *o != node {
            continue;
        }
        let s = s as u16;
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == s => *last = s,
            _ => runs.push((s, s)),
        }
    }
    runs
}

/// `k` slots out of `runs` in as few ranges as it can: the end of the shortest run that
/// holds them all, else whole runs, longest first, and the rest from the shortest run that
/// holds it.
fn take(runs: &[(u16, u16)], mut k: usize) -> Vec<(u16, u16)> {
    let len = |r: &(u16, u16)| usize::from(r.1 - r.0) + 1;
    let mut left: Vec<(u16, u16)> = runs.to_vec();
    let mut out = Vec::new();
    while k > 0 && !left.is_empty() {
        let fit = left
            .iter()
            .enumerate()
            .filter(|(_, r)| len(r) >= k)
            .min_by_key(|(_, r)| len(r))
            .map(|(i, _)| i);
        if let Some(i) = fit {
            let (_, last) = left[i];
            out.push((last - (k as u16 - 1), last));
            break;
        }
        let i = (0..left.len())
            .max_by_key(|i| (len(&left[*i]), std::cmp::Reverse(*i)))
            .unwrap_or(0);
        let r = left.remove(i);
        k -= len(&r);
        out.push(r);
    }
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` nodes holding equal contiguous ranges (the first ones one slot more).
    fn even(n: usize) -> Vec<usize> {
        (0..SLOTS).map(|s| s * n / SLOTS).collect()
    }

    fn apply(owner: &[usize], plan: &[PlannedMove]) -> Vec<usize> {
        let mut o = owner.to_vec();
        for m in plan {
            for s in m.first..=m.last {
                assert_eq!(
                    o[usize::from(s)],
                    m.from,
                    "{m:?} moves a slot its source lacks"
                );
                o[usize::from(s)] = m.to;
            }
        }
        o
    }

    fn counts(owner: &[usize], n: usize) -> Vec<usize> {
        let mut c = vec![0; n];
        for o in owner {
            c[*o] += 1;
        }
        c
    }

    /// The plan's result holds every node within one slot of its exact share, and the plan
    /// moves exactly the surplus.
    fn check(owner: &[usize], weights: &[u32]) -> Vec<PlannedMove> {
        let p = plan(owner, weights);
        let after = counts(&apply(owner, &p), weights.len());
        let total: u32 = weights.iter().sum();
        for (i, c) in after.iter().enumerate() {
            let exact = SLOTS as f64 * f64::from(weights[i]) / f64::from(total);
            assert!(
                (*c as f64 - exact).abs() < 1.0,
                "node {i}: {c} slots for a share of {exact:.2} ({after:?})"
            );
        }
        let before = counts(owner, weights.len());
        let surplus: usize = (0..weights.len())
            .map(|i| before[i].saturating_sub(after[i]))
            .sum();
        let moved: usize = p.iter().map(PlannedMove::slots).sum();
        assert_eq!(moved, surplus, "{p:?}");
        p
    }

    #[test]
    fn a_fifth_equal_node_takes_its_share_from_each_of_the_four() {
        let mut owner = even(4);
        let p = check(&owner, &[1, 1, 1, 1, 1]);
        assert_eq!(p.len(), 4, "{p:?}");
        assert!(p.iter().all(|m| m.to == 4 && m.slots() == 51), "{p:?}");
        assert_eq!(p.iter().map(PlannedMove::slots).sum::<usize>(), 204);
        // About a fifth of all slots, so about a fifth of all rows.
        owner = apply(&owner, &p);
        assert_eq!(counts(&owner, 5), vec![205, 205, 205, 205, 204]);
        // Balanced: nothing more to do.
        assert!(plan(&owner, &[1, 1, 1, 1, 1]).is_empty());
    }

    #[test]
    fn a_drained_node_gives_every_slot_evenly_to_the_others() {
        let owner = even(4);
        let p = check(&owner, &[1, 0, 1, 1]);
        assert!(p.iter().all(|m| m.from == 1), "{p:?}");
        let after = counts(&apply(&owner, &p), 4);
        assert_eq!(after[1], 0);
        assert_eq!(after.iter().sum::<usize>(), SLOTS);
        // 256 slots in three ranges, one to each.
        assert_eq!(p.len(), 3, "{p:?}");
    }

    #[test]
    fn a_drain_moves_the_drained_nodes_slots_only() {
        // ds0 is over its share once ds2 weighs 2, yet only ds1's slots move.
        let owner: Vec<usize> = (0..SLOTS).map(|s| s * 2 / SLOTS).collect();
        let p = drain(&owner, &[1, 1, 2], 1);
        assert!(p.iter().all(|m| m.from == 1), "{p:?}");
        let after = counts(&apply(&owner, &p), 3);
        assert_eq!(after, vec![512, 0, 512], "{p:?}");
        // A plan moves ds0's surplus too.
        assert!(plan(&owner, &[1, 0, 2]).iter().any(|m| m.from == 0));
        assert!(drain(&owner, &[0, 1, 0], 1).is_empty());
    }

    #[test]
    fn weights_give_shares_in_proportion() {
        let p = check(&even(3), &[2, 1, 1]);
        assert!(!p.is_empty());
        assert_eq!(
            counts(&apply(&even(3), &p), 3),
            vec![512, 256, 256],
            "{p:?}"
        );
        assert!(plan(&even(4), &[0, 0, 0, 0]).is_empty());
    }

    #[test]
    fn scattered_maps_come_out_balanced_with_the_fewest_slots_moved() {
        // A small deterministic generator: no dependence on a seed's library.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for _ in 0..200 {
            let n = 1 + next(7) as usize;
            let weights: Vec<u32> = (0..n).map(|_| next(4) as u32).collect();
            if weights.iter().all(|w| *w == 0) {
                continue;
            }
            // Runs of random length on random nodes.
            let mut owner = Vec::with_capacity(SLOTS);
            while owner.len() < SLOTS {
                let node = next(n as u64) as usize;
                let len = 1 + next(200) as usize;
                owner.extend(std::iter::repeat_n(node, len.min(SLOTS - owner.len())));
            }
            let p = check(&owner, &weights);
            for m in &p {
                assert!(m.from != m.to && weights[m.to] > 0, "{m:?}");
            }
        }
    }

    #[test]
    fn a_run_long_enough_is_cut_at_its_end() {
        assert_eq!(take(&[(0, 9), (20, 24), (40, 99)], 5), vec![(20, 24)]);
        assert_eq!(take(&[(0, 9), (20, 24), (40, 99)], 4), vec![(21, 24)]);
        assert_eq!(take(&[(0, 9), (20, 24)], 12), vec![(0, 9), (23, 24)]);
    }
}
