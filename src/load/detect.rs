//! Which slots and nodes are hot, from one-second windows of their load: a slot is hot once
//! one of its measures stays at or over its `[hot]` threshold for `seconds` consecutive
//! windows, and cool again once every measure stays under half its threshold as long; in
//! between it keeps its state (hysteresis). A node is judged the same way by its node time
//! against the mean of the nodes'. Pure: the windows come from [`super::Load::tick`].

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::config::hot::HotSection;

/// One slot's load in one window: statements, rows, bytes and node time in microseconds.
pub type Counts = [u64; 4];
pub const STATEMENTS: usize = 0;
pub const ROWS: usize = 1;
pub const BYTES: usize = 2;
pub const MICROS: usize = 3;

/// A slot of a table (the name shared with the table's counters: a window holds no copy).
pub type SlotId = (Arc<str>, u16);

/// One second's load: each slot that saw statements, and each node's statements and node
/// time (microseconds), by node name.
#[derive(Debug, Clone, Default)]
pub struct Window {
    pub slots: HashMap<SlotId, Counts>,
    pub nodes: Vec<(String, [u64; 2])>,
}

/// Windows kept at most; the ring keeps only the last `[hot] seconds` of them, which the
/// reports average over.
pub const RING: usize = 60;

/// Where a measure stands against its thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Over,
    Between,
    Under,
}

/// A slot's or node's run of windows.
#[derive(Debug, Clone, Default)]
pub struct Streak {
    /// Consecutive windows over the hot threshold.
    pub over: u32,
    /// Consecutive windows under the cool threshold.
    pub under: u32,
    /// The window (counted from the first) since which it has been hot.
    pub hot_since: Option<u64>,
}

impl Streak {
    /// Counts one window at `level`; true when the hot state changed.
    fn step(&mut self, level: Level, seconds: u32, now: u64) -> bool {
        match level {
            Level::Over => {
                self.over += 1;
                self.under = 0;
            }
            Level::Under => {
                self.under += 1;
                self.over = 0;
            }
            Level::Between => {
                self.over = 0;
                self.under = 0;
            }
        }
        match self.hot_since {
            None if self.over >= seconds => {
                self.hot_since = Some(now + 1 - u64::from(seconds));
                true
            }
            Some(_) if self.under >= seconds => {
                self.hot_since = None;
                true
            }
            _ => false,
        }
    }
}

/// What one window changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub hot: Vec<SlotId>,
    pub cool: Vec<SlotId>,
    pub hot_nodes: Vec<String>,
    pub cool_nodes: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Tracker {
    ring: VecDeque<Window>,
    slots: HashMap<SlotId, Streak>,
    nodes: HashMap<String, Streak>,
    /// Windows seen.
    now: u64,
}

fn slot_level(c: &Counts, hot: &HotSection) -> Level {
    let limits = [
        hot.slot_statements,
        hot.slot_rows,
        hot.slot_bytes,
        hot.slot_node_ms.saturating_mul(1000),
    ];
    if c.iter().zip(limits).any(|(v, l)| *v >= l) {
        Level::Over
    } else if c.iter().zip(limits).all(|(v, l)| v.saturating_mul(2) < l) {
        Level::Under
    } else {
        Level::Between
    }
}

fn node_level(micros: u64, mean: f64, hot: &HotSection) -> Level {
    let min = hot.node_min_ms as f64 * 1000.0;
    let m = micros as f64;
    let cool = mean * (1.0 + (hot.node_ratio - 1.0) / 2.0);
    if m >= min && m > mean * hot.node_ratio {
        Level::Over
    } else if m < min / 2.0 || m <= cool {
        Level::Under
    } else {
        Level::Between
    }
}

impl Tracker {
    /// Takes one second's window.
    pub fn push(&mut self, w: Window, hot: &HotSection) -> Changes {
        let now = self.now;
        self.now += 1;
        let mut changes = Changes::default();
        for (id, c) in &w.slots {
            let level = slot_level(c, hot);
            if level == Level::Under && !self.slots.contains_key(id) {
                continue;
            }
            let s = self.slots.entry(id.clone()).or_default();
            if s.step(level, hot.seconds, now) {
                match s.hot_since {
                    Some(_) => changes.hot.push(id.clone()),
                    None => changes.cool.push(id.clone()),
                }
            }
        }
        // A slot that saw nothing this second is under every threshold.
        for (id, s) in self.slots.iter_mut() {
            if !w.slots.contains_key(id) && s.step(Level::Under, hot.seconds, now) {
                changes.cool.push(id.clone());
            }
        }
        // A cool slot with no run over its threshold needs no streak.
        self.slots
            .retain(|_, s| s.hot_since.is_some() || s.over > 0);
        if !w.nodes.is_empty() {
            let mean = w.nodes.iter().map(|(_, n)| n[1] as f64).sum::<f64>() / w.nodes.len() as f64;
            for (name, n) in &w.nodes {
                let s = self.nodes.entry(name.clone()).or_default();
                if s.step(node_level(n[1], mean, hot), hot.seconds, now) {
                    if s.hot_since.is_some() {
                        changes.hot_nodes.push(name.clone());
                    } else {
                        changes.cool_nodes.push(name.clone());
                    }
                }
            }
            self.nodes
                .retain(|name, _| w.nodes.iter().any(|(n, _)| n == name));
        }
        changes.hot.sort();
        changes.cool.sort();
        self.ring.push_back(w);
        while self.ring.len() > RING.min(hot.seconds.max(1) as usize) {
            self.ring.pop_front();
        }
        changes
    }

    /// Windows seen.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The hot slots, each with the window it became hot in.
    pub fn hot_slots(&self) -> Vec<(SlotId, u64)> {
        let mut out: Vec<(SlotId, u64)> = self
            .slots
            .iter()
            .filter_map(|(id, s)| s.hot_since.map(|t| (id.clone(), t)))
            .collect();
        out.sort();
        out
    }

    /// Is the slot hot now?
    pub fn is_hot(&self, id: &SlotId) -> bool {
        self.slots.get(id).is_some_and(|s| s.hot_since.is_some())
    }

    /// The node's streak (hot since when), if it was in the last window.
    pub fn node(&self, name: &str) -> Option<&Streak> {
        self.nodes.get(name)
    }

    /// The last `n` windows, newest last.
    pub fn last(&self, n: usize) -> impl Iterator<Item = &Window> {
        self.ring.iter().skip(self.ring.len().saturating_sub(n))
    }

    /// Each slot's load a second over the last `n` windows (slots with any), summed over
    /// the windows and divided by `n`.
    pub fn slot_rates(&self, n: usize) -> HashMap<SlotId, Counts> {
        let n = n.max(1);
        let mut out: HashMap<SlotId, Counts> = HashMap::new();
        for w in self.last(n) {
            for (id, c) in &w.slots {
                let e = out.entry(id.clone()).or_default();
                for i in 0..4 {
                    e[i] += c[i];
                }
            }
        }
        let windows = self.ring.len().clamp(1, n) as u64;
        for c in out.values_mut() {
            for v in c.iter_mut() {
                *v /= windows;
            }
        }
        out
    }

    /// Each node's statements and node time (microseconds) a second over the last `n`
    /// windows, by name, in the order of the last window.
    pub fn node_rates(&self, n: usize) -> Vec<(String, [u64; 2])> {
        let Some(last) = self.ring.back() else {
            return Vec::new();
        };
        let windows: Vec<&Window> = self.last(n.max(1)).collect();
        last.nodes
            .iter()
            .map(|(name, _)| {
                let mut sum = [0u64; 2];
                for w in &windows {
                    if let Some((_, c)) = w.nodes.iter().find(|(m, _)| m == name) {
                        sum[0] += c[0];
                        sum[1] += c[1];
                    }
                }
                let k = windows.len() as u64;
                (name.clone(), [sum[0] / k, sum[1] / k])
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hot() -> HotSection {
        HotSection {
            seconds: 3,
            slot_statements: 100,
            ..HotSection::default()
        }
    }

    fn window(slot_statements: &[(u16, u64)], nodes: &[(&str, u64)]) -> Window {
        Window {
            slots: slot_statements
                .iter()
                .map(|(s, n)| (("t".into(), *s), [*n, 0, 0, 0]))
                .collect(),
            nodes: nodes
                .iter()
                .map(|(name, us)| (name.to_string(), [0, *us]))
                .collect(),
        }
    }

    #[test]
    fn a_slot_is_hot_after_the_consecutive_seconds_and_not_before() {
        let mut t = Tracker::default();
        let h = hot();
        assert!(t.push(window(&[(7, 150)], &[]), &h).hot.is_empty());
        assert!(t.push(window(&[(7, 150)], &[]), &h).hot.is_empty());
        let c = t.push(window(&[(7, 150)], &[]), &h);
        assert_eq!(c.hot, vec![("t".into(), 7)]);
        assert_eq!(t.hot_slots(), vec![(("t".into(), 7), 0)]);
    }

    #[test]
    fn one_quiet_second_restarts_the_count() {
        let mut t = Tracker::default();
        let h = hot();
        for n in [150, 150, 10, 150, 150] {
            assert!(t.push(window(&[(7, n)], &[]), &h).hot.is_empty());
        }
        assert_eq!(t.push(window(&[(7, 150)], &[]), &h).hot.len(), 1);
    }

    #[test]
    fn a_load_at_the_threshold_does_not_flap() {
        let mut t = Tracker::default();
        let h = hot();
        for _ in 0..3 {
            t.push(window(&[(7, 120)], &[]), &h);
        }
        assert!(t.is_hot(&("t".into(), 7)));
        // Around the threshold (over it, then between half and it): stays hot.
        for n in [90, 110, 60, 95, 100, 70, 99] {
            let c = t.push(window(&[(7, n)], &[]), &h);
            assert!(c.cool.is_empty() && c.hot.is_empty(), "{n}: {c:?}");
        }
        // Under half for the consecutive seconds: cool.
        assert!(t.push(window(&[(7, 40)], &[]), &h).cool.is_empty());
        assert!(t.push(window(&[], &[]), &h).cool.is_empty());
        assert_eq!(t.push(window(&[(7, 49)], &[]), &h).cool.len(), 1);
        assert!(!t.is_hot(&("t".into(), 7)));
    }

    #[test]
    fn node_time_over_the_ratio_of_the_mean_makes_a_node_hot() {
        let mut t = Tracker::default();
        let h = hot(); // ratio 1.5, at least 100 ms a second
        let even = [("a", 300_000), ("b", 300_000), ("c", 300_000)];
        let skewed = [("a", 700_000), ("b", 100_000), ("c", 100_000)];
        for _ in 0..5 {
            assert!(t.push(window(&[], &even), &h).hot_nodes.is_empty());
        }
        t.push(window(&[], &skewed), &h);
        t.push(window(&[], &skewed), &h);
        assert_eq!(t.push(window(&[], &skewed), &h).hot_nodes, vec!["a"]);
        // Idle nodes are never hot, however uneven.
        let idle = [("a", 9_000), ("b", 10), ("c", 10)];
        let mut cooled = Vec::new();
        for _ in 0..3 {
            cooled.extend(t.push(window(&[], &idle), &h).cool_nodes);
        }
        assert_eq!(cooled, vec!["a"]);
        for _ in 0..5 {
            assert!(t.push(window(&[], &idle), &h).hot_nodes.is_empty());
        }
    }

    #[test]
    fn rates_average_the_last_windows() {
        let mut t = Tracker::default();
        let h = hot();
        for n in [10, 20, 30, 40] {
            t.push(window(&[(1, n)], &[("a", n * 1000)]), &h);
        }
        assert_eq!(t.slot_rates(2)[&("t".into(), 1)][STATEMENTS], 35);
        assert_eq!(t.node_rates(2), vec![("a".to_string(), [0, 35_000])]);
    }
}
