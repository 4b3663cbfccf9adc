//! What every session and both listeners share: the rules snapshot in force (and how a new
//! one is offered), the node pools, the metrics, the proxy's clock, the id generator and the
//! directory lookup caches.

pub mod epochs;
pub mod load;
pub mod migration;
pub mod views;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tracing::{info, warn};

use crate::config::Topology;
use crate::metrics::Metrics;
use crate::pools::Backends;

/// What every session shares: the current routing snapshot and the node pools.
/// Global index entries one statement has read: `(index table, value hash)` -> the shard
/// keys of the rows holding the value.
pub type IndexAnswers = HashMap<(String, Vec<u8>), Vec<mysql_common::value::Value>>;

pub struct Shared {
    topology: ArcSwap<Topology>,
    /// Client commands running, by when they began (`epochs`).
    pub epochs: epochs::Epochs,
    /// Collations' weights read from nodes, for global indexes.
    weights: std::sync::Mutex<HashMap<String, Arc<crate::routing::weights::Weights>>>,
    pub backends: Backends,
    pub server_version: String,
    /// Largest client packet accepted.
    pub max_packet: usize,
    next_conn_id: AtomicU32,
    /// Rules versions swapped in, and rules files refused (invalid, or not newer).
    pub reloads_applied: AtomicU64,
    pub reloads_refused: AtomicU64,
    /// Rules files whose version was not newer than the one running.
    pub reloads_ignored: AtomicU64,
    pub metrics: Arc<Metrics>,
    /// TLS for clients, from `[server] tls` when the proxy started.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// The proxy's clock (tier bounds, generated ids); tests and demos move it.
    pub clock: Clock,
    /// The id generator's state, kept across reloads so no id repeats.
    pub ids: crate::routing::keygen::Snowflake,
    /// Directory lookup caches by table, rebuilt (so emptied) on every reload.
    pub lookups: ArcSwap<HashMap<String, LookupCache>>,
    /// Statement shapes: their counters (SHOW PLANS) and text statements' cached plans.
    pub plans: crate::plan::cache::PlanCache,
    /// Tables' column order, read from their nodes (for an INSERT without a column list).
    pub columns: ColumnCache,
    /// Tables' primary-key columns, quoted (for writes to slots being moved).
    pub primary_keys: ColumnCache,
    /// Tables' unique keys, the primary key among them, each its columns lower-cased and
    /// joined by commas (for upserts of tables with global indexes).
    pub unique_keys: ColumnCache,
    /// Tables' rows over their nodes, as the nodes' statistics estimate them (to weigh
    /// copying a table to every node of another against gathering both on one).
    pub table_rows: moka::sync::Cache<(String, String), Arc<crate::plan::estimate::TableStats>>,
    /// Outer reads of bound joins that returned more than their plan takes, by database
    /// (`crate::exec::door::Door::overflowed`): kept as long as the statistics.
    pub overflowed: moka::sync::Cache<(String, String), ()>,
    /// This proxy's part in slot migrations: its heartbeat, fence and counters.
    pub migration: migration::Local,
    /// The admin statements' kept connections to the metadata schema.
    pub metadata_links: crate::metadata::link::Links,
    /// The moves that would even the load, planned once a window by [`load::watch`] (empty
    /// in `[balance] mode = "off"`); the auto balancer acts on them.
    pub suggested: tokio::sync::watch::Sender<Arc<crate::load::balance::Plan>>,
    /// Moves the auto balancer's guards hold, by table and slot (a range: its number), left
    /// out of the plans until the time given: the next plan moves what may move instead of
    /// naming the held move first in every window.
    pub held: std::sync::Mutex<HashMap<(String, u16), std::time::Instant>>,
    /// The range split or merge due by size, as the admin statement and why
    /// (`crate::migrate::upkeep`), for `SHOW BALANCE`.
    pub range_upkeep: std::sync::Mutex<Option<String>>,
    /// The true collations of merged statements' result columns, by the node statement's
    /// shape (`crate::exec::door::Door::collations`): kept [`COLLATIONS_TTL`], emptied by
    /// this proxy's DDL.
    pub collations: moka::sync::Cache<String, Arc<[u16]>>,
    /// Tables' `SHOW CREATE TABLE` texts a join whose outer rows are carried to the other
    /// table's nodes read (`crate::exec::spread`), by database and table: kept as long, and
    /// emptied alike.
    pub definitions: moka::sync::Cache<String, Arc<str>>,
    /// The views this proxy keeps (`crate::plan::views`), as the metadata last told.
    pub views: ArcSwap<crate::plan::views::Views>,
    /// Sequences' blocks of ids this proxy reserved, by table: (next, end).
    pub sequences: std::sync::Mutex<HashMap<String, (u64, u64)>>,
    /// Client connections being served (bounded by `[server] max_connections`).
    pub clients: Arc<std::sync::atomic::AtomicUsize>,
    /// This process's part of its XA ids, and the count of those it handed out.
    xa_instance: String,
    xa_next: AtomicU64,
    /// Client sessions by connection id (KILL).
    pub sessions: crate::sessions::Sessions,
    /// Clients in their handshake and failed logins, by address.
    pub logins: crate::logins::Logins,
    /// How the nodes' global `sql_mode` reads text (bit 1: NO_BACKSLASH_ESCAPES, bit 2:
    /// ANSI_QUOTES): the mode a session starts in, read from the default node at start.
    base_mode: std::sync::atomic::AtomicU8,
    /// Transactions' branch connections, for the detector of deadlocks across nodes.
    pub deadlocks: crate::exec::txn::branches::Registry,
    /// Held by an autocommit write with global indexes while it runs again after a
    /// deadlock: this proxy's retries then run one at a time and cannot meet each other in
    /// the same deadlock again.
    pub index_retries: Arc<tokio::sync::Mutex<()>>,
    /// A node refused a write READ COMMITTED (its `binlog_format` is STATEMENT): one-row
    /// upserts of tables with global indexes no longer try it first
    /// (`frontend::session::indexed`).
    pub statement_binlog: std::sync::atomic::AtomicBool,
    /// Nodes where this process made sure the XA decision table exists.
    decision_tables: std::sync::Mutex<std::collections::HashSet<usize>>,
}

/// `(schema, table)` -> the table's columns in order, as its nodes agree on them (the schema
/// is "" where the session had none). Emptied on reload and after DDL through the proxy; an
/// entry lives [`COLUMNS_TTL`] at most, so a change made on the nodes directly is seen.
pub type ColumnCache = moka::sync::Cache<(String, String), Arc<[String]>>;

/// How long a table's column order is trusted without being read again.
pub const COLUMNS_TTL: Duration = Duration::from_secs(60);

/// 12 hex digits that tell this process's XA ids from any other proxy's: the start time's
/// nanoseconds, the process id and a random number mixed.
fn xa_instance() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    format!("{:012x}", h.finish() & 0xFFFF_FFFF_FFFF)
}

/// How long a statement shape's column collations are trusted: a collation changed on the
/// nodes directly, or through another proxy, is seen within this.
pub const COLLATIONS_TTL: Duration = Duration::from_secs(10);

/// How long a table's row estimate is used before it is read again.
const ROWS_TTL: Duration = Duration::from_secs(60);

fn column_cache() -> ColumnCache {
    moka::sync::Cache::builder()
        .max_capacity(10_000)
        .time_to_live(COLUMNS_TTL)
        .build()
}

/// A directory table's cache of lookup-table entries: key -> node (`None`: not in the table).
pub type LookupCache = moka::sync::Cache<Vec<u8>, Option<usize>>;

pub fn column_key(schema: Option<&str>, table: &str) -> (String, String) {
    (schema.unwrap_or_default().to_string(), table.to_string())
}

fn lookup_caches(topo: &Topology) -> HashMap<String, LookupCache> {
    topo.tables
        .iter()
        .filter_map(|(name, rule)| match rule {
            crate::config::TableRule::Directory(d) => d.lookup.as_ref().map(|l| {
                let cache = moka::sync::Cache::builder()
                    .max_capacity(l.cache_size)
                    .time_to_live(Duration::from_secs(l.ttl_secs))
                    .build();
                (name.clone(), cache)
            }),
            _ => None,
        })
        .collect()
}

/// Wall-clock time plus an offset that tests and demos set (`serve --now`).
#[derive(Debug, Default)]
pub struct Clock {
    offset_ms: AtomicI64,
}

impl Clock {
    pub fn now_ms(&self) -> i64 {
        crate::routing::keygen::system_ms() + self.offset_ms.load(Ordering::Relaxed)
    }

    /// Makes "now" this Unix millisecond (the clock keeps running from there).
    pub fn set_now_ms(&self, ms: i64) {
        self.offset_ms
            .store(ms - crate::routing::keygen::system_ms(), Ordering::Relaxed);
    }

    /// Moves the clock by `ms` (negative: back).
    pub fn shift_ms(&self, ms: i64) {
        self.offset_ms.fetch_add(ms, Ordering::Relaxed);
    }

    /// Today in UTC, by this clock.
    pub fn today(&self) -> chrono::NaiveDate {
        chrono::DateTime::from_timestamp_millis(self.now_ms())
            .map(|t| t.date_naive())
            .unwrap_or_default()
    }
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reload {
    Applied {
        from: u64,
        to: u64,
    },
    /// Same or older version: the running rules stay (not an error: every proxy sees each
    /// version once, and an unchanged file is re-read after a touch).
    Ignored {
        running: u64,
        offered: u64,
    },
    Refused(String),
}

impl Shared {
    /// A directory key's cached lookup-table entry (see [`crate::plan::PlanCtx::lookup`]).
    pub fn lookup_cached(&self, table: &str, key: &[u8]) -> Option<Option<usize>> {
        self.lookups.load().get(table)?.get(key)
    }

    /// Remembers lookup-table answers for a directory table.
    pub fn lookup_store(
        &self,
        table: &str,
        entries: impl IntoIterator<Item = (Vec<u8>, Option<usize>)>,
    ) {
        if let Some(cache) = self.lookups.load().get(table) {
            for (k, v) in entries {
                cache.insert(k, v);
            }
        }
    }

    /// The next generated id for a row of `table` in `slot`.
    pub fn next_id(
        &self,
        topo: &Topology,
        table: &str,
        slot: u16,
    ) -> Result<u64, crate::plan::IdError> {
        use crate::plan::IdError;
        let g = topo
            .key_generators
            .get(table)
            .ok_or_else(|| IdError::Refused(format!("`{table}` has no key_generator")))?;
        if g.sequence.is_some() {
            let mut blocks = self.sequences.lock().unwrap_or_else(|e| e.into_inner());
            return match blocks.get_mut(table) {
                Some(b) if b.0 < b.1 => {
                    b.0 += 1;
                    Ok(b.0 - 1)
                }
                _ => Err(IdError::NeedBlock),
            };
        }
        self.ids
            .next(&g.layout, slot, &|| self.clock.now_ms())
            .map_err(|e| {
                let reason = match e {
                    crate::routing::keygen::IdError::ClockBack { .. } => "clock_back",
                    crate::routing::keygen::IdError::OutOfRange => "out_of_range",
                };
                self.metrics
                    .keygen_refused
                    .with_label_values(&[reason])
                    .inc();
                tracing::warn!(table, "key generator refused: {e}");
                IdError::Refused(format!("key_generator of `{table}`: {e}"))
            })
    }

    /// Takes a block of ids `[first, end)` reserved from `table`'s sequence (replacing what
    /// was left of the last block: those ids are skipped, never reused).
    pub fn sequence_store(&self, table: &str, first: u64, end: u64) {
        self.sequences
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(table.to_string(), (first, end));
    }

    /// Runs `f` with the planning context of this proxy (its clock, lookup caches, ids,
    /// tables' columns) for a session whose current database is `db`.
    pub fn with_plan_ctx<R>(
        &self,
        topo: &Topology,
        db: Option<&str>,
        charset: &str,
        f: impl FnOnce(&crate::plan::PlanCtx<'_>) -> R,
    ) -> R {
        self.with_index_answers(topo, db, charset, &IndexAnswers::new(), f)
    }

    /// [`Shared::with_plan_ctx`], with the global index entries a statement has read.
    pub fn with_index_answers<R>(
        &self,
        topo: &Topology,
        db: Option<&str>,
        charset: &str,
        answers: &IndexAnswers,
        f: impl FnOnce(&crate::plan::PlanCtx<'_>) -> R,
    ) -> R {
        let index = |t: &str, h: &[u8]| answers.get(&(t.to_string(), h.to_vec())).cloned();
        let weights = |c: &str| self.weights_of(c);
        let lookup = |t: &str, k: &[u8]| self.lookup_cached(t, k);
        let next_id = |t: &str, slot: u16| self.next_id(topo, t, slot);
        let columns =
            |schema: Option<&str>, t: &str| self.columns.get(&column_key(schema.or(db), t));
        let primary_key =
            |schema: Option<&str>, t: &str| self.primary_keys.get(&column_key(schema.or(db), t));
        let rows = |t: &str| self.table_rows.get(&column_key(db, t));
        let overflowed = |read: &str| self.overflowed.contains_key(&column_key(db, read));
        let ctx = crate::plan::PlanCtx {
            today: self.clock.today(),
            lookup: &lookup,
            next_id: &next_id,
            columns: &columns,
            primary_key: &primary_key,
            charset,
            rows: &rows,
            overflowed: &overflowed,
            statistics: true,
            index: &index,
            weights: &weights,
        };
        f(&ctx)
    }

    /// A collation's weights, if read.
    pub fn weights_of(&self, collation: &str) -> Option<Arc<crate::routing::weights::Weights>> {
        self.weights.lock().ok()?.get(collation).cloned()
    }

    /// Keeps a collation's weights (they do not change while its nodes run).
    pub fn weights_store(
        &self,
        w: crate::routing::weights::Weights,
    ) -> Arc<crate::routing::weights::Weights> {
        let w = Arc::new(w);
        if let Ok(mut m) = self.weights.lock() {
            m.insert(w.collation.clone(), w.clone());
        }
        w
    }

    /// Remembers a table's statistics (read from its nodes), for a session whose current
    /// database is `db`.
    pub fn rows_store(
        &self,
        db: Option<&str>,
        table: &str,
        stats: crate::plan::estimate::TableStats,
    ) {
        self.table_rows
            .insert(column_key(db, table), Arc::new(stats));
    }

    /// Remembers an outer read that returned more rows than its plan takes, in the
    /// session's database and under none (where PREVIEW, which has none, finds it).
    pub fn overflowed_store(&self, db: Option<&str>, read: &str) {
        if read.len() <= crate::sql::digest::MAX_LEN {
            self.overflowed.insert(column_key(db, read), ());
            self.overflowed.insert(column_key(None, read), ());
        }
    }

    /// Remembers a table's columns (read from its nodes).
    pub fn columns_store(&self, schema: Option<&str>, table: &str, cols: Arc<[String]>) {
        self.columns.insert(column_key(schema, table), cols);
    }

    pub fn new(topo: Topology) -> Self {
        let backends = Backends::new(&topo);
        let metrics = Arc::new(Metrics::new());
        metrics.set_replicas(backends.all_replicas());
        metrics
            .version
            .set(i64::try_from(topo.version).unwrap_or(i64::MAX));
        let lookups = ArcSwap::from_pointee(lookup_caches(&topo));
        let max_packet = topo.max_allowed_packet;
        Shared {
            clock: Clock::default(),
            ids: crate::routing::keygen::Snowflake::new(),
            lookups,
            topology: ArcSwap::from_pointee(topo),
            epochs: Default::default(),
            weights: Default::default(),
            backends,
            server_version: format!("5.7.99-shardproxy-{}", env!("CARGO_PKG_VERSION")),
            max_packet,
            next_conn_id: AtomicU32::new(1),
            reloads_applied: AtomicU64::new(0),
            reloads_refused: AtomicU64::new(0),
            reloads_ignored: AtomicU64::new(0),
            metrics,
            tls: None,
            plans: Default::default(),
            columns: column_cache(),
            primary_keys: column_cache(),
            unique_keys: column_cache(),
            table_rows: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(ROWS_TTL)
                .build(),
            overflowed: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(ROWS_TTL)
                .build(),
            migration: Default::default(),
            metadata_links: Default::default(),
            suggested: tokio::sync::watch::Sender::new(Arc::default()),
            range_upkeep: std::sync::Mutex::new(None),
            held: std::sync::Mutex::new(HashMap::new()),
            views: Default::default(),
            collations: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(COLLATIONS_TTL)
                .build(),
            definitions: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(COLLATIONS_TTL)
                .build(),
            sequences: Default::default(),
            clients: Default::default(),
            xa_instance: xa_instance(),
            xa_next: AtomicU64::new(1),
            decision_tables: Default::default(),
            deadlocks: Default::default(),
            index_retries: Default::default(),
            statement_binlog: Default::default(),
            sessions: Default::default(),
            logins: Default::default(),
            base_mode: Default::default(),
        }
    }

    /// This process's name among the proxies of a family (XA ids, heartbeats).
    pub fn instance(&self) -> &str {
        &self.xa_instance
    }

    /// A new XA transaction id: `prefix:instance:n`, at most 64 bytes (the prefix is at most
    /// 24), unique across the proxies of a family (their instance parts differ).
    /// The mode a session's text is read in before it sets its own `sql_mode`.
    pub fn base_mode(&self) -> crate::sql::lex::Mode {
        let bits = self.base_mode.load(Ordering::Relaxed);
        crate::sql::lex::Mode {
            no_backslash_escapes: bits & 1 != 0,
            ansi_quotes: bits & 2 != 0,
        }
    }

    /// Reads the default node's global `sql_mode`: what sessions start in.
    pub async fn learn_base_mode(&self) {
        let node = self.topology().default_node;
        let Ok(mut c) = self.backends.connect(node).await else {
            return;
        };
        let Ok(text) = c.query_text("SELECT @@GLOBAL.sql_mode").await else {
            return;
        };
        let text = text.unwrap_or_default();
        let m = crate::sql::lex::Mode::of_sql_mode(&text);
        let bits = u8::from(m.no_backslash_escapes) | (u8::from(m.ansi_quotes) << 1);
        self.base_mode.store(bits, Ordering::Relaxed);
        if !m.is_default() {
            info!(sql_mode = %text, "the nodes' sql_mode changes how text is read: sessions start in it");
        }
    }

    pub fn new_xid(&self) -> String {
        let n = self.xa_next.fetch_add(1, Ordering::Relaxed);
        format!("{}:{}:{n:x}", self.topology().xa_prefix, self.xa_instance)
    }

    pub fn decision_table_ready(&self, node: usize) -> bool {
        self.decision_tables
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&node)
    }

    pub fn decision_table_made(&self, node: usize) {
        self.decision_tables
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(node);
    }

    pub fn decision_table_gone(&self, node: usize) {
        self.decision_tables
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&node);
    }

    /// Offers a new rules snapshot: swapped in atomically if its version is newer (running
    /// statements keep the snapshot they took), otherwise ignored. Node indexes stay stable
    /// and the pools follow the new node list.
    pub fn offer(&self, new: Topology) -> Reload {
        let current = self.topology();
        if new.version <= current.version {
            return Reload::Ignored {
                running: current.version,
                offered: new.version,
            };
        }
        let aligned = new.align_to(&current);
        self.backends.apply(&aligned);
        self.metrics.set_replicas(self.backends.all_replicas());
        let to = aligned.version;
        let caches = lookup_caches(&aligned);
        self.topology.store(Arc::new(aligned));
        self.lookups.store(Arc::new(caches));
        self.columns.invalidate_all();
        self.primary_keys.invalidate_all();
        self.unique_keys.invalidate_all();
        self.table_rows.invalidate_all();
        self.overflowed.invalidate_all();
        self.reloads_applied.fetch_add(1, Ordering::Relaxed);
        self.metrics.reloads.with_label_values(&["applied"]).inc();
        self.metrics
            .version
            .set(i64::try_from(to).unwrap_or(i64::MAX));
        Reload::Applied {
            from: current.version,
            to,
        }
    }

    /// Reads, validates and offers a rules file, and says what happened in the log.
    pub fn reload_file(&self, path: &Path) -> Reload {
        let outcome = match crate::config::load(path) {
            Ok(t) => self.offer(t),
            Err(e) => Reload::Refused(e.to_string()),
        };
        match &outcome {
            Reload::Applied { from, to } => {
                info!(file = %path.display(), "rules reloaded: version {from} -> {to}")
            }
            Reload::Ignored { running, offered } => {
                self.reloads_ignored.fetch_add(1, Ordering::Relaxed);
                self.metrics.reloads.with_label_values(&["ignored"]).inc();
                info!(
                    file = %path.display(),
                    "rules file ignored: its version {offered} is not newer than the running version {running}"
                )
            }
            Reload::Refused(reason) => {
                self.reloads_refused.fetch_add(1, Ordering::Relaxed);
                self.metrics.reloads.with_label_values(&["refused"]).inc();
                warn!("rules reload refused, the running rules stay: {reason}")
            }
        }
        outcome
    }

    /// A fresh connection id (the greeting's thread id).
    pub fn next_conn_id(&self) -> u32 {
        self.next_conn_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The routing snapshot in force; a statement takes it once and keeps it to the end.
    pub fn topology(&self) -> Arc<Topology> {
        self.topology.load_full()
    }
}

impl crate::exec::txn::cluster::Cluster for Shared {
    fn backends(&self) -> &Backends {
        &self.backends
    }
    fn topology(&self) -> Arc<Topology> {
        Shared::topology(self)
    }
    fn metrics(&self) -> &Metrics {
        &self.metrics
    }
    fn deadlocks(&self) -> &crate::exec::txn::branches::Registry {
        &self.deadlocks
    }
    fn decision_table_ready(&self, node: usize) -> bool {
        Shared::decision_table_ready(self, node)
    }
}

/// Counts a dual write toward a target node while it runs (see
/// [`migration::Local::dual_writes`]).
pub struct Running(Arc<Shared>, usize);

impl Running {
    pub fn new(shared: Arc<Shared>, target: usize) -> Self {
        shared.migration.dual_writes.begin(target);
        Running(shared, target)
    }

    /// The node its images go to.
    pub fn target(&self) -> usize {
        self.1
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.migration.dual_writes.end(self.1);
    }
}
