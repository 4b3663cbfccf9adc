//! Load per slot, per node and per key, as the proxy sees it: every statement routed by key
//! counts against its slot (statements, rows, bytes of its text, and the time it took: the
//! node time, since a slot of slow scans is hotter than one of point reads), and every
//! node's time comes from its statements' latencies. Once a second [`Load::tick`] closes the
//! window and [`detect::Tracker`] says which slots and nodes are hot; while a slot is hot its
//! statements' keys feed a space-saving sketch ([`sketch`]) that names its heaviest keys.
//!
//! The counters a statement touches are four relaxed atomic adds on its slot's line, and a
//! flag read; a key is looked at only while its slot is hot.

pub mod balance;
pub mod detect;
pub mod sketch;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::config::hot::HotSection;
use crate::routing::slot::SLOTS;
use detect::{Changes, Counts, SlotId, Tracker, Window};
use sketch::Sketch;

/// One table's per-slot counters.
#[derive(Debug)]
pub struct SlotLoad {
    table: Arc<str>,
    /// This window's counts: statements, rows, bytes, microseconds.
    now: Box<[[AtomicU64; 4]]>,
    /// Counts of the windows closed (what the metrics add this window's to).
    closed: Mutex<Box<[Counts]>>,
    /// Hot slots: their statements' keys go to the sketch.
    hot: Box<[AtomicBool]>,
    keys: Mutex<HashMap<u16, Sketch>>,
}

impl SlotLoad {
    fn new(table: &str) -> Self {
        SlotLoad {
            table: table.into(),
            now: (0..SLOTS).map(|_| Default::default()).collect(),
            closed: Mutex::new(vec![[0; 4]; SLOTS].into_boxed_slice()),
            hot: (0..SLOTS).map(|_| AtomicBool::new(false)).collect(),
            keys: Mutex::new(HashMap::new()),
        }
    }

    pub fn name(&self) -> &str {
        &self.table
    }

    /// Counts a statement (and its bytes) against a slot, before it runs.
    pub fn hit(&self, slot: u16, bytes: usize) {
        let c = &self.now[usize::from(slot) % SLOTS];
        c[0].fetch_add(1, Relaxed);
        c[2].fetch_add(bytes as u64, Relaxed);
    }

    /// Counts what a statement on a slot cost once it ran: the rows it returned or
    /// changed and the time it took; `key` (called only while the slot is hot) is the key
    /// that routed it there.
    pub fn spent(
        &self,
        slot: u16,
        rows: u64,
        took: Duration,
        key: impl FnOnce() -> Option<Vec<u8>>,
    ) {
        let s = usize::from(slot) % SLOTS;
        let c = &self.now[s];
        if rows > 0 {
            c[1].fetch_add(rows, Relaxed);
        }
        c[3].fetch_add(u64::try_from(took.as_micros()).unwrap_or(u64::MAX), Relaxed);
        if self.hot[s].load(Relaxed) {
            if let Some(k) = key() {
                let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(sk) = keys.get_mut(&(s as u16)) {
                    sk.offer(&k);
                }
            }
        }
    }

    /// Statements, rows, bytes and microseconds counted against a slot since the start.
    pub fn counts(&self, slot: u16) -> Counts {
        let s = usize::from(slot) % SLOTS;
        let closed = self.closed.lock().unwrap_or_else(|e| e.into_inner())[s];
        let mut out = closed;
        for (o, a) in out.iter_mut().zip(self.now[s].iter()) {
            *o += a.load(Relaxed);
        }
        out
    }

    /// Closes this window: each slot that saw a statement, with its counts.
    fn close(&self, into: &mut HashMap<SlotId, Counts>) {
        let mut closed = self.closed.lock().unwrap_or_else(|e| e.into_inner());
        for (s, c) in self.now.iter().enumerate() {
            if c[0].load(Relaxed) == 0 && c[3].load(Relaxed) == 0 {
                continue;
            }
            let got: Counts = std::array::from_fn(|i| c[i].swap(0, Relaxed));
            for (t, g) in closed[s].iter_mut().zip(got) {
                *t += g;
            }
            into.insert((self.table.clone(), s as u16), got);
        }
    }
}

/// One second of load as proxies share it (`crate::metadata::load`): each slot's counts by
/// table and slot, each node's statements and node time (microseconds) by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seconds {
    pub slots: HashMap<(String, u16), Counts>,
    pub nodes: HashMap<String, [u64; 2]>,
}

impl Seconds {
    /// A window of this proxy's, as it is shared.
    pub fn of(w: &Window) -> Seconds {
        Seconds {
            slots: w
                .slots
                .iter()
                .map(|((t, s), c)| ((t.to_string(), *s), *c))
                .collect(),
            nodes: w.nodes.iter().cloned().collect(),
        }
    }
}

/// The whole proxy's load.
#[derive(Debug, Default)]
pub struct Load {
    tables: RwLock<HashMap<String, Arc<SlotLoad>>>,
    tracker: Mutex<Tracker>,
    /// Each node's statements and node time (microseconds) at the last tick, by name.
    nodes_before: Mutex<HashMap<String, [u64; 2]>>,
    /// `[hot] seconds` at the last tick (what the metrics average over).
    seconds: std::sync::atomic::AtomicU32,
}

/// A slot's load a second, and since when it has been hot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRate {
    pub table: String,
    pub slot: u16,
    pub rate: Counts,
    /// Seconds it has been hot.
    pub hot_for: Option<u64>,
}

/// A node's load a second.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRate {
    pub name: String,
    pub statements: u64,
    pub micros: u64,
    /// Its node time over the mean of the nodes'.
    pub of_mean: f64,
    pub hot_for: Option<u64>,
}

/// A heavy key of a hot slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotKey {
    pub table: String,
    pub slot: u16,
    pub key: Vec<u8>,
    /// Sights of the key since its slot became hot (at most `error` of them may be other
    /// keys'), of `total` sights of the slot's keys.
    pub count: u64,
    pub error: u64,
    pub total: u64,
}

impl Load {
    /// A table's slot counters (kept by whoever counts the same table often).
    pub fn table(&self, table: &str) -> Arc<SlotLoad> {
        if let Some(t) = self
            .tables
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(table)
        {
            return t.clone();
        }
        let mut w = self.tables.write().unwrap_or_else(|e| e.into_inner());
        w.entry(table.to_string())
            .or_insert_with(|| Arc::new(SlotLoad::new(table)))
            .clone()
    }

    /// The tables counted so far, by name.
    pub fn tables(&self) -> Vec<Arc<SlotLoad>> {
        let mut all: Vec<Arc<SlotLoad>> = self
            .tables
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        all.sort_by(|a, b| a.table.cmp(&b.table));
        all
    }

    /// Closes the second: `nodes` are each node's statements and node time (microseconds)
    /// since the start, by name. Returns what changed.
    pub fn tick(&self, nodes: Vec<(String, [u64; 2])>, hot: &HotSection) -> Changes {
        let w = self.close(nodes);
        self.judge(w, hot)
    }

    /// This proxy's second, closed: each slot's counts, each node's statements and node time
    /// since the last close (`nodes`: since the start, by name).
    pub fn close(&self, nodes: Vec<(String, [u64; 2])>) -> Window {
        let mut w = Window::default();
        for t in self.tables() {
            t.close(&mut w.slots);
        }
        {
            let mut before = self.nodes_before.lock().unwrap_or_else(|e| e.into_inner());
            for (name, now) in nodes {
                let was = before.insert(name.clone(), now).unwrap_or(now);
                w.nodes.push((
                    name,
                    [now[0].saturating_sub(was[0]), now[1].saturating_sub(was[1])],
                ));
            }
        }
        w
    }

    /// `w` with the other proxies' last second added (`crate::metadata::load`).
    pub fn add(&self, w: &mut Window, others: &Seconds) {
        for ((table, slot), c) in &others.slots {
            let id = (self.table(table).table.clone(), *slot);
            let mine = w.slots.entry(id).or_default();
            for (x, y) in mine.iter_mut().zip(c) {
                *x += y;
            }
        }
        for (name, c) in &others.nodes {
            match w.nodes.iter_mut().find(|(n, _)| n == name) {
                Some((_, mine)) => {
                    mine[0] += c[0];
                    mine[1] += c[1];
                }
                None => w.nodes.push((name.clone(), *c)),
            }
        }
    }

    /// Steps the detection by one window (this proxy's, or the cluster's): what turned hot
    /// or cool.
    pub fn judge(&self, w: Window, hot: &HotSection) -> Changes {
        self.seconds.store(hot.seconds, Relaxed);
        let changes = self
            .tracker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(w, hot);
        for (table, slot) in &changes.hot {
            let t = self.table(table);
            t.keys
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(*slot, Sketch::new(hot.keys));
            t.hot[usize::from(*slot) % SLOTS].store(true, Relaxed);
        }
        for (table, slot) in &changes.cool {
            let t = self.table(table);
            t.hot[usize::from(*slot) % SLOTS].store(false, Relaxed);
            t.keys
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(slot);
        }
        changes
    }

    /// The hot slots, then the slots over half a threshold, then the busiest others, up to
    /// `limit` in all, each with its load a second over the last `hot.seconds` windows.
    pub fn slots(&self, hot: &HotSection, limit: usize) -> Vec<SlotRate> {
        let tracker = self.tracker.lock().unwrap_or_else(|e| e.into_inner());
        let now = tracker.now();
        let hot_since: HashMap<SlotId, u64> = tracker.hot_slots().into_iter().collect();
        let mut all: Vec<SlotRate> = tracker
            .slot_rates(hot.seconds as usize)
            .into_iter()
            .map(|((table, slot), rate)| {
                let hot_for = hot_since.get(&(table.clone(), slot)).map(|t| now - t);
                SlotRate {
                    table: table.to_string(),
                    slot,
                    rate,
                    hot_for,
                }
            })
            .collect();
        // A hot slot idle in the last windows is still listed, as it is still hot.
        for ((table, slot), t) in &hot_since {
            if !all.iter().any(|r| *r.table == **table && r.slot == *slot) {
                all.push(SlotRate {
                    table: table.to_string(),
                    slot: *slot,
                    rate: [0; 4],
                    hot_for: Some(now - t),
                });
            }
        }
        all.sort_by(|a, b| {
            (
                b.hot_for.is_some(),
                b.rate[detect::MICROS],
                b.rate[0],
                &a.table,
                a.slot,
            )
                .cmp(&(
                    a.hot_for.is_some(),
                    a.rate[detect::MICROS],
                    a.rate[0],
                    &b.table,
                    b.slot,
                ))
        });
        let hot_count = all.iter().filter(|r| r.hot_for.is_some()).count();
        all.truncate(limit.max(hot_count));
        all
    }

    /// The hot slots now.
    pub fn hot_slots(&self) -> Vec<SlotId> {
        let tracker = self.tracker.lock().unwrap_or_else(|e| e.into_inner());
        tracker.hot_slots().into_iter().map(|(id, _)| id).collect()
    }

    /// [`Load::nodes`] over as many windows as the last tick's `[hot] seconds`.
    pub fn last_nodes(&self) -> Vec<NodeRate> {
        self.node_rates(self.seconds.load(Relaxed).max(1) as usize)
    }

    /// Each node's load a second over the last `hot.seconds` windows.
    pub fn nodes(&self, hot: &HotSection) -> Vec<NodeRate> {
        self.node_rates(hot.seconds as usize)
    }

    fn node_rates(&self, seconds: usize) -> Vec<NodeRate> {
        let tracker = self.tracker.lock().unwrap_or_else(|e| e.into_inner());
        let rates = tracker.node_rates(seconds);
        let mean = rates.iter().map(|(_, r)| r[1] as f64).sum::<f64>() / rates.len().max(1) as f64;
        rates
            .into_iter()
            .map(|(name, r)| NodeRate {
                hot_for: tracker
                    .node(&name)
                    .and_then(|s| s.hot_since)
                    .map(|t| tracker.now() - t),
                of_mean: if mean > 0.0 { r[1] as f64 / mean } else { 0.0 },
                statements: r[0],
                micros: r[1],
                name,
            })
            .collect()
    }

    /// A uniform sample of the keys of hot slot `slot` of `table` seen since it turned hot
    /// (empty when it is not hot).
    pub fn sample(&self, table: &str, slot: u16) -> Vec<Vec<u8>> {
        let Some(t) = self
            .tables
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(table)
            .cloned()
        else {
            return Vec::new();
        };
        let keys = t.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.get(&slot)
            .map(|sk| sk.sample().iter().map(|k| k.to_vec()).collect())
            .unwrap_or_default()
    }

    /// The heaviest keys of each hot slot (of `table` only, when named), most first.
    pub fn keys(&self, table: Option<&str>, per_slot: usize) -> Vec<HotKey> {
        let mut out = Vec::new();
        for t in self.tables() {
            if table.is_some_and(|name| !name.eq_ignore_ascii_case(&t.table)) {
                continue;
            }
            let keys = t.keys.lock().unwrap_or_else(|e| e.into_inner());
            let mut slots: Vec<&u16> = keys.keys().collect();
            slots.sort();
            for slot in slots {
                let sk = &keys[slot];
                for c in sk.top(per_slot) {
                    out.push(HotKey {
                        table: t.table.to_string(),
                        slot: *slot,
                        key: c.key.to_vec(),
                        count: c.count,
                        error: c.error,
                        total: sk.total,
                    });
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
