//! The plan cache: one entry per statement shape (its digest, literals taken out), bounded,
//! shared by every session. An entry holds the shape's counters (executions, rows, errors,
//! time), shown by the admin's SHOW PLANS, and for text statements the shape's cached plan
//! once the first execution proved it ([`super::cached::KeyRoute`]), so a repeated shape
//! skips the parser. Prepared statements keep their own plan (made at PREPARE) and share the
//! counters of their shape.
//!
//! Entries are not tied to a rules version: a cached plan resolves its node in each
//! execution's snapshot and refuses itself when the table's rule changed kind or column,
//! then the statement is planned in full.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::cached::KeyRoute;
use super::Plan;
use crate::config::Topology;
use crate::sql::digest::{Digest, Literal};

/// How many shapes the cache holds (least used evicted first).
pub const CAPACITY: u64 = 10_000;
/// Longer shapes (a multi-row INSERT of a dump, say) get no entry: no point statement is that
/// long, and the cache's memory stays bounded (at most `CAPACITY` x this many bytes of text).
pub const MAX_DIGEST: usize = crate::sql::digest::MAX_LEN;

/// What a text statement's shape runs as, once decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextPlan {
    /// Routed by one literal (the `param`-th of the statement's literals).
    Key {
        route: KeyRoute,
        read: bool,
        kind: &'static str,
    },
    /// Planned in full at every execution.
    Full,
}

impl TextPlan {
    /// Does the statement only read?
    pub fn reads(&self) -> bool {
        matches!(self, TextPlan::Key { read: true, .. })
    }
}

#[derive(Debug)]
pub struct Entry {
    pub digest: String,
    /// How its last full planning routed it ("single", "scatter", ...), for SHOW PLANS.
    pub route: std::sync::Mutex<String>,
    pub text_plan: OnceLock<TextPlan>,
    /// The slot counters of the cached plan's table.
    pub slots: OnceLock<Arc<crate::load::SlotLoad>>,
    pub executions: AtomicU64,
    pub cached_executions: AtomicU64,
    pub rows: AtomicU64,
    pub errors: AtomicU64,
    pub micros: AtomicU64,
    /// The shape's join plans kept for its executions' signatures (newest last), and whether
    /// its plans were found not to be kept so (their markers did not give the plan back).
    pub kept: std::sync::Mutex<Vec<Arc<Kept>>>,
    unkept: std::sync::Mutex<Option<std::time::Instant>>,
}

/// How many signatures of one shape keep a plan (the oldest dropped past them).
pub const KEPT_PER_SHAPE: usize = 16;
/// How many join plans are kept in all (a spread plan holds two slot maps: some kB each).
pub const KEPT_TOTAL: usize = 2_000;

/// The join plans kept in the process.
static KEPT_NOW: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One kept plan in [`KEPT_NOW`], from its making to its drop.
#[derive(Debug)]
pub struct Counted(());

impl Counted {
    pub fn new() -> Counted {
        KEPT_NOW.fetch_add(1, Relaxed);
        Counted(())
    }
}

impl Default for Counted {
    fn default() -> Self {
        Counted::new()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        KEPT_NOW.fetch_sub(1, Relaxed);
    }
}

/// How long a kept join plan serves before it is made afresh: the nodes' statistics and the
/// column lists that weighed it are read again a minute apart, so what it was planned by is
/// at most a minute and a half old.
pub const KEPT_FOR: Duration = Duration::from_secs(30);

/// A join plan kept for a shape, with what it was planned under.
#[derive(Debug)]
pub struct Kept {
    pub template: super::template::Template,
    /// The rules' version, the session's database and character set, and the cache's
    /// epoch (a DDL starts a new one) it was planned under, and when.
    pub version: u64,
    pub db: Option<String>,
    pub charset: String,
    pub epoch: u64,
    pub made: std::time::Instant,
    /// The hash_slot tables its signature reads nodes from.
    pub tables: Vec<String>,
    /// Made for the shape's prepared statements (their plans hold `?` and bound values).
    pub prepared: bool,
    pub counted: Counted,
}

impl Entry {
    /// The plan kept for an execution under these, if any.
    pub fn kept_for(
        &self,
        prepared: bool,
        version: u64,
        db: Option<&str>,
        charset: &str,
        epoch: u64,
        sig: impl Fn(&[String]) -> Option<Vec<super::template::Sig>>,
    ) -> Option<Arc<Kept>> {
        if self.unkept() {
            return None;
        }
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let mut sigs: Vec<(&[String], Option<Vec<super::template::Sig>>)> = Vec::new();
        for k in kept.iter().rev() {
            if k.prepared != prepared
                || k.version != version
                || k.db.as_deref() != db
                || k.charset != charset
                || k.epoch != epoch
                || k.made.elapsed() > KEPT_FOR
            {
                continue;
            }
            let i = match sigs.iter().position(|(t, _)| *t == k.tables.as_slice()) {
                Some(i) => i,
                None => {
                    sigs.push((&k.tables, sig(&k.tables)));
                    sigs.len() - 1
                }
            };
            if sigs[i].1.as_ref() == Some(&k.template.sig) {
                return Some(k.clone());
            }
        }
        None
    }

    /// Does the shape keep any join plan (cheaper to ask than the signature)?
    pub fn keeps_any(&self) -> bool {
        !self
            .kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// Were this shape's plans found lately not to be kept (their markers did not give
    /// the plan back)? Tried again after [`KEPT_FOR`].
    pub fn unkept(&self) -> bool {
        let at = self.unkept.lock().unwrap_or_else(|e| e.into_inner());
        at.is_some_and(|t| t.elapsed() <= KEPT_FOR)
    }

    /// Drops the plans that have served their time.
    pub(crate) fn prune(&self) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|k| k.made.elapsed() <= KEPT_FOR);
    }

    /// Keeps a join plan (`None`: this shape's plans are not kept so, for a while); the
    /// caller asks [`PlanCache::room`] first.
    pub fn keep(&self, k: Option<Kept>) {
        let Some(k) = k else {
            *self.unkept.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(std::time::Instant::now());
            return;
        };
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|o| {
            o.made.elapsed() <= KEPT_FOR
                && !(o.template.sig == k.template.sig
                    && o.prepared == k.prepared
                    && o.db == k.db
                    && o.charset == k.charset
                    && o.tables == k.tables)
        });
        if kept.len() >= KEPT_PER_SHAPE {
            kept.remove(0);
        }
        kept.push(Arc::new(k));
    }
}

impl Entry {
    /// Counts one execution.
    pub fn count(&self, rows: u64, failed: bool, took: Duration, cached: bool) {
        self.executions.fetch_add(1, Relaxed);
        if cached {
            self.cached_executions.fetch_add(1, Relaxed);
        }
        self.rows.fetch_add(rows, Relaxed);
        if failed {
            self.errors.fetch_add(1, Relaxed);
        }
        self.micros
            .fetch_add(u64::try_from(took.as_micros()).unwrap_or(u64::MAX), Relaxed);
    }

    pub fn set_route(&self, route: &str) {
        let mut r = self.route.lock().unwrap_or_else(|e| e.into_inner());
        if *r != route {
            *r = route.to_string();
        }
    }

    /// The plan as SHOW PLANS prints it.
    pub fn plan(&self) -> String {
        match self.text_plan.get() {
            Some(TextPlan::Key { route, .. }) => format!("cached: {}", route.describe()),
            _ => {
                let r = self.route.lock().unwrap_or_else(|e| e.into_inner());
                let kept = self.kept.lock().map(|k| k.len()).unwrap_or(0);
                if kept > 0 {
                    format!("{r} (join plans kept for {kept} signature(s) of its literals)")
                } else {
                    format!("{r} (planned per execution)")
                }
            }
        }
    }
}

pub struct PlanCache {
    entries: moka::sync::Cache<String, Arc<Entry>>,
    /// Moved on by a DDL: the join plans kept before it are not used.
    epoch: AtomicU64,
    /// When the kept plans of every shape were last pruned ([`PlanCache::room`]).
    pruned: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Default for PlanCache {
    fn default() -> Self {
        PlanCache {
            entries: moka::sync::Cache::builder().max_capacity(CAPACITY).build(),
            epoch: AtomicU64::new(0),
            pruned: std::sync::Mutex::new(None),
        }
    }
}

impl PlanCache {
    /// The epoch kept join plans must have been made in.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Relaxed)
    }

    /// After a DDL: a table's columns or indexes may have changed under the kept plans.
    pub fn forget_kept(&self) {
        self.epoch.fetch_add(1, Relaxed);
    }

    /// Is there room for one more kept join plan? Past [`KEPT_TOTAL`] in all, those of
    /// every shape that served their time are dropped (a shape no longer run holds its
    /// plans until then), at most once per [`KEPT_FOR`]; a statement finding no room is not
    /// planned again with markers.
    pub fn room(&self) -> bool {
        if KEPT_NOW.load(Relaxed) < KEPT_TOTAL {
            return true;
        }
        {
            let mut last = self.pruned.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|t| t.elapsed() < KEPT_FOR) {
                return false;
            }
            *last = Some(std::time::Instant::now());
        }
        for (_, e) in self.entries.iter() {
            e.prune();
        }
        KEPT_NOW.load(Relaxed) < KEPT_TOTAL
    }

    /// The entry of a shape, made on first sight; `None` for a shape longer than
    /// [`MAX_DIGEST`].
    pub fn entry(&self, digest: &str) -> Option<Arc<Entry>> {
        if digest.len() > MAX_DIGEST {
            return None;
        }
        if let Some(e) = self.entries.get(digest) {
            return Some(e);
        }
        let e = self.entries.get_with(digest.to_string(), || {
            Arc::new(Entry {
                digest: digest.to_string(),
                route: std::sync::Mutex::new(String::new()),
                text_plan: OnceLock::new(),
                slots: OnceLock::new(),
                executions: AtomicU64::new(0),
                cached_executions: AtomicU64::new(0),
                rows: AtomicU64::new(0),
                errors: AtomicU64::new(0),
                micros: AtomicU64::new(0),
                kept: std::sync::Mutex::new(Vec::new()),
                unkept: std::sync::Mutex::new(None),
            })
        });
        Some(e)
    }

    /// The `n` shapes that took the most time, most first.
    pub fn top(&self, n: usize) -> Vec<Arc<Entry>> {
        let mut all: Vec<Arc<Entry>> = self.entries.iter().map(|(_, e)| e).collect();
        all.sort_by_key(|e| std::cmp::Reverse(e.micros.load(Relaxed)));
        all.truncate(n);
        all
    }

    pub fn len(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.entry_count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a text statement's shape runs as from now on: routed by one of its literals when the
/// digest plans as a point statement and `plan`, the full plan of this execution, agrees.
/// `None`: this execution cannot tell (its key has no node: a value outside a range rule's
/// domain), the next one decides.
pub fn text_plan(
    d: &Digest,
    plan: &Plan,
    topo: &Topology,
    sql: &str,
    read: bool,
    kind: &'static str,
) -> Option<TextPlan> {
    let Ok(shape) = crate::sql::parse(&d.text) else {
        return Some(TextPlan::Full);
    };
    if shape.param_count() != d.literals.len() {
        return Some(TextPlan::Full);
    }
    let Some(route) = super::cached::analyze(&shape, topo) else {
        return Some(TextPlan::Full);
    };
    let key = d.literals.get(route.param).and_then(Literal::value)?;
    route.resolve_value(topo, &key)?;
    Some(if route.agrees_text(plan, topo, sql, &key) {
        TextPlan::Key { route, read, kind }
    } else {
        TextPlan::Full
    })
}

/// How the plan cache treats `sql` (whose full plan is `plan`), for `route` and PREVIEW.
pub fn describe(sql: &str, plan: &Plan, topo: &Topology) -> String {
    let Some(d) = crate::sql::digest::digest(sql) else {
        return "plan cache: none (the statement has a shape digests do not cover)".into();
    };
    match text_plan(&d, plan, topo, sql, true, "select") {
        Some(TextPlan::Key { route, .. }) => format!(
            "plan cache: shape `{}` planned once: {}",
            d.text,
            route.describe().replace("parameter", "literal")
        ),
        Some(TextPlan::Full) if super::template::kept_kind(plan) => {
            let kept = crate::sql::parse(sql)
                .ok()
                .and_then(|p| super::template::tables(&p.stmt, topo))
                .is_some();
            if kept {
                format!(
                    "plan cache: shape `{}` planned once for each signature of its literals (the nodes of their slots), kept half a minute",
                    d.text
                )
            } else {
                format!("plan cache: shape `{}` planned at every execution (a range, directory or time-tier table, a global index, or a slot move)", d.text)
            }
        }
        Some(TextPlan::Full) => {
            format!("plan cache: shape `{}` planned at every execution", d.text)
        }
        None => format!(
            "plan cache: shape `{}` decided by its first execution whose key has a node",
            d.text
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shape_whose_plans_were_not_kept_is_tried_again_later() {
        let c = PlanCache::default();
        let e = c.entry("SELECT o.a FROM o JOIN p ON p.k = o.k").unwrap();
        assert!(!e.unkept());
        e.keep(None);
        assert!(e.unkept());
        let long_ago = std::time::Instant::now().checked_sub(KEPT_FOR + Duration::from_secs(1));
        *e.unkept.lock().unwrap() = long_ago;
        assert!(!e.unkept(), "still not kept after {KEPT_FOR:?}");
    }

    #[test]
    fn a_text_shape_is_decided_by_an_execution_whose_key_has_a_node() {
        let topo = crate::config::test_topology(
            1,
            2,
            "[tables.r]\nrule = \"range\"\ncolumn = \"k\"\n\
             ranges = [{ below = 100, node = \"ds0\" }, { node = \"ds1\" }]\n",
        );
        let decide = |sql: &str| {
            let d = crate::sql::digest::digest(sql).unwrap();
            let plan = super::super::tests::plan_in(&topo, sql, &[]);
            text_plan(&d, &plan, &topo, sql, true, "select")
        };
        // Not a number in an integer range rule: this execution cannot tell.
        assert_eq!(decide("SELECT v FROM r WHERE k = 'abc'"), None);
        assert!(matches!(
            decide("SELECT v FROM r WHERE k = '150'"),
            Some(TextPlan::Key { .. })
        ));
        assert_eq!(decide("SELECT v FROM r WHERE v = 3"), Some(TextPlan::Full));
    }

    #[test]
    fn shapes_share_an_entry_and_the_slowest_come_first() {
        let c = PlanCache::default();
        let entry = |d: &str| c.entry(d).unwrap();
        let a = entry("SELECT c FROM t WHERE id=?");
        a.count(1, false, Duration::from_micros(30), true);
        entry("SELECT c FROM t WHERE id=?").count(1, true, Duration::from_micros(30), false);
        entry("DELETE FROM t").count(5, false, Duration::from_micros(100), false);
        assert!(
            c.entry(&"(?, ?), ".repeat(1000)).is_none(),
            "too long to keep"
        );
        assert_eq!(a.executions.load(Relaxed), 2);
        assert_eq!(a.cached_executions.load(Relaxed), 1);
        assert_eq!(a.errors.load(Relaxed), 1);
        let top = c.top(5);
        assert_eq!(top[0].digest, "DELETE FROM t");
        assert_eq!(top[1].micros.load(Relaxed), 60);
        assert_eq!(c.top(1).len(), 1);
    }
}
