//! The rules file's shape (its sections, as serde reads them) and what it becomes: the
//! [`Topology`] every statement plans against, its nodes, users and table rules.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::Deserialize;

use crate::routing::keygen::IdLayout;

pub use crate::routing::TableRule;

/// A rules file that cannot be used; the message names the file, the table and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub origin: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.origin, self.message)
    }
}

impl std::error::Error for ConfigError {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RulesFile {
    pub(super) version: u64,
    pub(super) default_node: String,
    pub(super) server: ServerSection,
    pub(super) admin: Option<AdminSection>,
    pub(super) metrics: Option<MetricsSection>,
    pub(super) metadata: Option<MetadataSection>,
    #[serde(default)]
    pub(super) hot: super::hot::HotSection,
    #[serde(default)]
    pub(super) balance: super::hot::BalanceSection,
    #[serde(default)]
    pub(super) replicas: super::replicas::ReplicasSection,
    pub(super) nodes: BTreeMap<String, NodeSection>,
    #[serde(default)]
    pub(super) tables: BTreeMap<String, TableSection>,
}

/// A node of `[nodes]`: its URL, or `{ url = "...", weight = w, replicas = ["...", ...] }`
/// (`primary` is another name for `url`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum NodeSection {
    Url(String),
    Weighted(WeightedNode),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WeightedNode {
    #[serde(alias = "primary")]
    url: String,
    /// Its share of a rebalanced slot map against the other nodes' (default 1; 0: it is to
    /// hold no slots, as a node being drained).
    #[serde(default = "default_weight")]
    weight: u32,
    /// Read replicas of the node (`crate::replica`): URLs.
    #[serde(default)]
    replicas: Vec<String>,
}

fn default_weight() -> u32 {
    1
}

impl NodeSection {
    pub(super) fn url(&self) -> &str {
        match self {
            NodeSection::Url(u) | NodeSection::Weighted(WeightedNode { url: u, .. }) => u,
        }
    }

    pub(super) fn weight(&self) -> u32 {
        match self {
            NodeSection::Url(_) => 1,
            NodeSection::Weighted(n) => n.weight,
        }
    }

    pub(super) fn replicas(&self) -> &[String] {
        match self {
            NodeSection::Url(_) => &[],
            NodeSection::Weighted(n) => &n.replicas,
        }
    }
}

/// A metadata schema that several proxies share: table rules and slot maps as rows, polled.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MetadataSection {
    /// `mysql://user:password@host:port/schema`
    pub url: String,
    #[serde(default = "default_poll_ms")]
    pub poll_ms: u64,
    /// How long a proxy may go without writing its heartbeat to the metadata schema before
    /// it stops writing slots being moved (and, after six leases, every hash_slot table).
    #[serde(default = "default_lease_ms")]
    pub lease_ms: u64,
    /// How many moves of a rebalance plan run at once (each node in one move at a time).
    #[serde(default = "default_max_parallel_moves")]
    pub max_parallel_moves: u32,
    /// How a move's target gets the writes made while its rows move.
    #[serde(default)]
    pub capture: Capture,
    /// A move's backfill slows down while the application's statements
    /// on its two nodes take more than this many percent longer than before it began
    /// (`crate::migrate::pace`); 0: only the move's RATE holds it.
    #[serde(default = "default_copy_slowdown_pct")]
    pub copy_slowdown_pct: u32,
}

pub(super) fn default_copy_slowdown_pct() -> u32 {
    15
}

/// `[metadata] capture`: where a move's target gets the writes made meanwhile.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Capture {
    /// From the source's binary log where it keeps one in ROW format with full row images
    /// (the writes run on the source alone), else by dual writes.
    #[default]
    Auto,
    /// Always by dual writes: each write's row images to the target, synchronously.
    Images,
}

pub(super) fn default_max_parallel_moves() -> u32 {
    2
}

pub(super) fn default_poll_ms() -> u64 {
    1000
}

pub(super) fn default_lease_ms() -> u64 {
    10_000
}

/// Where Prometheus scrapes `GET /metrics`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    pub listen: String,
    /// Listen on an address other than loopback (refused without it).
    #[serde(default)]
    pub allow_remote: bool,
}

/// The ops' MySQL-protocol interface: its own address and its own users.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AdminSection {
    pub listen: String,
    pub users: Vec<User>,
    /// Listen on an address other than loopback (refused without it).
    #[serde(default)]
    pub allow_remote: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ServerSection {
    pub(super) listen: String,
    pub(super) users: Vec<User>,
    /// Rows a merge may read from the nodes (or hold, when it groups) for one statement.
    #[serde(default = "default_max_rows")]
    pub(super) max_rows_per_statement: u64,
    /// TLS for clients: `tls = { cert = "server.pem", key = "server.key" }`.
    pub(super) tls: Option<TlsSection>,
    /// How long a node may send nothing while the proxy waits for its answer (a hung node)
    /// before the statement fails and the node's query is killed; 0: no bound.
    #[serde(default = "default_node_timeout")]
    pub(super) node_timeout_secs: u64,
    /// How long a statement waits for a node connection (a free place in the node's pool,
    /// then the connect) before it fails naming the node.
    #[serde(default = "default_node_wait")]
    pub(super) node_wait_secs: u64,
    /// Client connections served at once; past it a client gets MySQL's 1040.
    #[serde(default = "default_max_connections")]
    pub(super) max_connections: usize,
    /// Clients from one address in their handshake at once (not logged in yet); 0: no
    /// limit. Past it a new one gets 1040 before its greeting.
    #[serde(default = "default_max_handshakes_per_ip")]
    pub(super) max_handshakes_per_ip: usize,
    /// How long a client may send nothing between commands before it is disconnected (MySQL's
    /// `wait_timeout`); 0: never.
    #[serde(default = "default_idle_timeout")]
    pub(super) idle_timeout_secs: u64,
    /// The largest packet a client may send, in bytes (MySQL's `max_allowed_packet`).
    #[serde(default = "default_max_allowed_packet")]
    pub(super) max_allowed_packet: usize,
    /// How a transaction that touched several nodes commits: "xa" (two-phase) or
    /// "best_effort" (each node in turn).
    #[serde(default)]
    pub(super) transaction_mode: TxMode,
    /// The start of every XA transaction id this proxy family writes; recovery finishes
    /// only the prepared branches that carry it.
    #[serde(default = "default_xa_prefix")]
    pub(super) xa_prefix: String,
}

/// `[server] transaction_mode`.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TxMode {
    /// Two-phase commit (XA) when a transaction wrote more than one node.
    #[default]
    Xa,
    /// Each node commits in turn, without XA: a failure between two commits leaves the
    /// transaction applied on some nodes only.
    BestEffort,
}

pub(super) fn default_xa_prefix() -> String {
    "shardproxy".into()
}

pub(super) fn default_max_handshakes_per_ip() -> usize {
    128
}

pub(super) fn default_max_allowed_packet() -> usize {
    64 << 20
}

pub(super) fn default_idle_timeout() -> u64 {
    28_800
}

pub(super) fn default_max_connections() -> usize {
    4096
}

pub(super) fn default_node_timeout() -> u64 {
    30
}

pub(super) fn default_node_wait() -> u64 {
    5
}

/// PEM files of the certificate chain clients are shown and its private key.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
    /// `require = true`: a client that connects without TLS is refused before it logs in
    /// (MySQL's `require_secure_transport`), on the admin listener too.
    #[serde(default)]
    pub require: bool,
}

pub(super) fn default_max_rows() -> u64 {
    1_000_000
}

/// An application user the frontend accepts.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(try_from = "UserSection")]
pub struct User {
    pub name: String,
    /// The password (`password`, or read from the environment variable `password_env`);
    /// empty for a user without one, and for one given by its hash.
    pub password: String,
    /// `password_hash = "*HEX"`: SHA1(SHA1(password)), as MySQL's `PASSWORD('x')` prints
    /// it. Such a user logs in with mysql_native_password (a client asking for
    /// caching_sha2_password is switched to it).
    pub hash: Option<[u8; 20]>,
    /// `require_tls = true`: this user logs in only over TLS (MySQL's `REQUIRE SSL`).
    pub require_tls: bool,
}

impl User {
    /// A user with this password in plain text.
    pub fn plain(name: &str, password: &str) -> User {
        User {
            require_tls: false,
            name: name.to_string(),
            password: password.to_string(),
            hash: None,
        }
    }

    pub fn has_password(&self) -> bool {
        !self.password.is_empty() || self.hash.is_some()
    }
}

/// A user as the rules file writes it: exactly one of `password`, `password_hash`,
/// `password_env`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UserSection {
    pub(super) name: String,
    pub(super) password: Option<String>,
    pub(super) password_hash: Option<String>,
    pub(super) password_env: Option<String>,
    #[serde(default)]
    pub(super) require_tls: bool,
}

impl TryFrom<UserSection> for User {
    type Error = String;

    fn try_from(u: UserSection) -> Result<User, String> {
        let require_tls = u.require_tls;
        let mut user = User::try_from_section(u)?;
        user.require_tls = require_tls;
        Ok(user)
    }
}

impl User {
    fn try_from_section(u: UserSection) -> Result<User, String> {
        let name = u.name;
        match (u.password, u.password_hash, u.password_env) {
            (Some(p), None, None) if p.is_empty() => Err(format!(
                "user `{name}`: an empty password would let anyone log in as `{name}`; give it a password"
            )),
            (Some(p), None, None) => Ok(User::plain(&name, &p)),
            (None, Some(h), None) => {
                let hex = h.strip_prefix('*').unwrap_or("");
                let bytes: Option<Vec<u8>> = (hex.len() == 40)
                    .then(|| {
                        (0..20)
                            .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
                            .collect()
                    })
                    .flatten();
                match bytes.and_then(|b| <[u8; 20]>::try_from(b).ok()) {
                    Some(hash) => Ok(User {
                        name,
                        password: String::new(),
                        hash: Some(hash),
                        require_tls: false,
                    }),
                    None => Err(format!(
                        "user `{name}`: password_hash must be `*` and 40 hex digits, as SELECT PASSWORD('...') prints it"
                    )),
                }
            }
            (None, None, Some(var)) => match std::env::var(&var) {
                Ok(p) if p.is_empty() => Err(format!(
                    "user `{name}`: password_env names `{var}`, which is empty: an empty password would let anyone log in as `{name}`"
                )),
                Ok(p) => Ok(User::plain(&name, &p)),
                Err(_) => Err(format!(
                    "user `{name}`: password_env names `{var}`, which is not set in the proxy's environment"
                )),
            },
            _ => Err(format!(
                "user `{name}`: give exactly one of password, password_hash, password_env"
            )),
        }
    }
}

/// A MySQL URL with its password hidden (`mysql://user:***@host/db`), for what the proxy
/// prints.
pub fn masked_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// `${NAME}` in a node or metadata URL becomes the environment variable NAME (node passwords
/// need not be written in the rules file).
pub fn expand_env(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            return Err("an unclosed `${` (write `${NAME}` for an environment variable)".into());
        };
        let name = &after[..end];
        match std::env::var(name) {
            Ok(v) => out.push_str(&v),
            Err(_) => return Err(format!("the environment variable `{name}` is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TableSection {
    pub(super) rule: String,
    pub(super) column: Option<String>,
    pub(super) slots: Option<Vec<SlotEntry>>,
    pub(super) node: Option<String>,
    /// range: `[{ below = 1000, node = "ds0" }, { node = "ds1" }]`
    pub(super) ranges: Option<Vec<RangeEntry>>,
    /// directory: `{ "42" = "ds1" }`
    pub(super) entries: Option<BTreeMap<String, String>>,
    /// directory: keys being moved, `[{ key = "42", node = "ds0", to = "ds3", step = "dual_write" }]`.
    pub(super) moving: Option<Vec<KeyMoveEntry>>,
    pub(super) lookup: Option<LookupSection>,
    pub(super) fallback: Option<Box<TableSection>>,
    /// time_tier
    pub(super) tiers: Option<Vec<TierSection>>,
    pub(super) primary_key: Option<Vec<String>>,
    pub(super) poll_columns: Option<Vec<String>>,
    pub(super) poll_unique: Option<bool>,
    pub(super) poll_retries: Option<u32>,
    pub(super) poll_retry_ms: Option<u64>,
    pub(super) key_generator: Option<KeyGenSection>,
    /// hash_slot: `{ by = "id", buckets = 8 }`, how keys listed in `salted` spread.
    pub(super) salt: Option<SaltSection>,
    /// hash_slot: `{ "42" = ["ds0", "ds1", "ds2", "ds3"] }`, salted keys and the nodes of
    /// their buckets (in order, an equal run of buckets on each: bucket `b` of `n` on the list's
    /// node `b * len / n`).
    pub(super) salted: Option<BTreeMap<String, Vec<String>>>,
    /// hash_slot: buckets of salted keys being moved,
    /// `[{ key = "42", buckets = "2-3", node = "ds0", to = "ds1", step = "capture" }]`.
    pub(super) salted_moving: Option<Vec<BucketMoveEntry>>,
    /// Global secondary indexes, by name (`super::indexes`).
    pub(super) indexes: Option<BTreeMap<String, super::indexes::IndexSection>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BucketMoveEntry {
    pub(super) key: String,
    /// `"a-b"` or `"a"`.
    pub(super) buckets: String,
    pub(super) node: String,
    pub(super) to: String,
    pub(super) step: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SaltSection {
    /// The shard column (optional: it must be the table's own).
    pub(super) column: Option<String>,
    pub(super) by: String,
    pub(super) buckets: u16,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RangeEntry {
    pub(super) below: Option<toml::Value>,
    pub(super) node: String,
    /// A range being moved (`MIGRATE RANGE`, written by the metadata): to this node, at
    /// `step`; `node` is its source.
    pub(super) to: Option<String>,
    pub(super) step: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LookupSection {
    pub(super) node: String,
    pub(super) table: String,
    pub(super) key_column: String,
    pub(super) node_column: String,
    #[serde(default = "default_cache_size")]
    pub(super) cache_size: u64,
    #[serde(default = "default_ttl_secs")]
    pub(super) ttl_secs: u64,
}

pub(super) fn default_cache_size() -> u64 {
    100_000
}

pub(super) fn default_ttl_secs() -> u64 {
    60
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TierSection {
    pub(super) name: String,
    pub(super) node: String,
    pub(super) lower: Option<String>,
    /// Accepted for clarity; must equal the tier above's `lower` (tiers are contiguous).
    pub(super) upper: Option<String>,
    #[serde(default)]
    pub(super) overlap_days: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct KeyGenSection {
    pub(super) column: String,
    pub(super) kind: String,
    /// `YYYY-MM-DD` (UTC midnight); default 2024-01-01.
    pub(super) epoch: Option<String>,
    #[serde(default)]
    pub(super) worker: u16,
    #[serde(default)]
    pub(super) worker_bits: u8,
    /// kind = "sequence": the node holding the sequence table (default: default_node).
    pub(super) node: Option<String>,
    /// kind = "sequence": ids a proxy reserves at a time (default 1000).
    pub(super) block: Option<u64>,
}

/// A generated key column of a sharded table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyGenerator {
    /// Lower-cased column.
    pub column: String,
    /// kind = "snowflake": the ids' layout.
    pub layout: IdLayout,
    /// kind = "sequence": where the sequence lives and how many ids a proxy reserves.
    pub sequence: Option<SequenceGen>,
}

/// Ids from a sequence row on a node (`shardproxy_sequences`), reserved in blocks per proxy:
/// unique across proxies, increasing within one, small (AUTO_INCREMENT-like).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SequenceGen {
    pub node: usize,
    pub block: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct KeyMoveEntry {
    pub(super) key: String,
    pub(super) node: String,
    pub(super) to: String,
    pub(super) step: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SlotEntry {
    pub(super) slots: String,
    pub(super) node: String,
    /// A range being moved (`crate::migrate`): to this node, at `step`.
    pub(super) to: Option<String>,
    pub(super) step: Option<String>,
}

/// One backend node.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub url: String,
    pub opts: mysql_async::Opts,
    /// Removed by a reload: kept so node indexes stay stable, never routed to.
    pub retired: bool,
    /// Its weight in a rebalanced slot map (`crate::routing::rebalance`).
    pub weight: u32,
    /// Its read replicas, in the rules file's order.
    pub replicas: Vec<Replica>,
}

/// A read replica of a node.
#[derive(Debug, Clone)]
pub struct Replica {
    /// `<node>/r<n>`, n from 1 in the rules file's order.
    pub name: String,
    /// As the rules file has it (`${VAR}` and all).
    pub url: String,
    pub opts: mysql_async::Opts,
}

/// What only a whole topology answers about a rule: its nodes (a broadcast is on every
/// node) and its description (node names).
impl TableRule {
    /// Every node that may hold rows of the table.
    pub fn all_nodes(&self, topo: &Topology) -> Vec<usize> {
        let mut v = match self {
            TableRule::HashSlot { map, .. } => map.nodes(),
            TableRule::Range { map, .. } => map.nodes(),
            TableRule::Single { node } => vec![*node],
            TableRule::Broadcast => topo.all_nodes(),
            TableRule::Directory(d) => {
                if d.lookup.is_some() {
                    // The lookup table may name any node.
                    topo.all_nodes()
                } else {
                    let mut v = d.fallback.all_nodes(topo);
                    v.extend(d.entry_nodes());
                    v
                }
            }
            TableRule::TimeTier(t) => t.tiers.iter().map(|t| t.node).collect(),
        };
        v.sort_unstable();
        v.dedup();
        v
    }

    /// A one-line description for `route`, SHOW TABLE RULE and logs.
    pub fn describe(&self, topo: &Topology) -> String {
        let name = |i: usize| topo.node_name(i).to_string();
        match self {
            TableRule::HashSlot { column, map } => {
                let mut split: Vec<String> = map
                    .split_keys()
                    .iter()
                    .map(|(k, n)| format!("key {} -> {}", String::from_utf8_lossy(k), name(*n)))
                    .collect();
                split.extend(map.salted().iter().map(|(k, b)| {
                    let mut ns: Vec<String> = b.0.iter().map(|n| name(*n)).collect();
                    ns.dedup();
                    format!(
                        "key {} salted by `{}` over {} buckets -> {}",
                        String::from_utf8_lossy(k),
                        map.salt().map(|s| s.by.as_str()).unwrap_or_default(),
                        b.0.len(),
                        ns.join("/")
                    )
                }));
                split.sort();
                format!(
                    "hash_slot on `{column}`: {}{}",
                    map.runs()
                        .iter()
                        .map(|(a, b, n)| format!("{a}-{b} -> {}", name(*n)))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if split.is_empty() {
                        String::new()
                    } else {
                        format!("; split out: {}", split.join(", "))
                    }
                )
            }
            TableRule::Range { column, map } => {
                format!("range on `{column}`: {}", map.describe(&name))
            }
            TableRule::Single { node } => format!("single on {}", name(*node)),
            TableRule::Broadcast => "broadcast (a copy on every node)".into(),
            TableRule::Directory(d) => format!(
                "directory on `{}`: {} ({})",
                d.column,
                d.describe(&name),
                d.fallback.describe(topo)
            ),
            TableRule::TimeTier(t) => {
                format!("time_tier on `{}`: {}", t.column, t.describe(&name))
            }
        }
    }
}

/// The whole routing state: one immutable snapshot with a version.
#[derive(Debug, Clone)]
pub struct Topology {
    pub version: u64,
    pub origin: String,
    pub listen: String,
    pub users: Vec<User>,
    /// Rows a merge may read from the nodes for one statement before it fails.
    pub max_rows_per_statement: u64,
    /// `[server] node_timeout_secs` (None: no bound).
    pub node_timeout: Option<std::time::Duration>,
    /// `[server] node_wait_secs`.
    pub node_wait: std::time::Duration,
    /// `[server] max_connections`.
    pub max_connections: usize,
    /// `[server] max_handshakes_per_ip` (0: no limit).
    pub max_handshakes_per_ip: usize,
    /// `[server] idle_timeout_secs` (None: no bound).
    pub idle_timeout: Option<std::time::Duration>,
    /// `[server] max_allowed_packet` (read when the proxy starts).
    pub max_allowed_packet: usize,
    /// `[server] transaction_mode`.
    pub tx_mode: TxMode,
    /// `[server] xa_prefix`.
    pub xa_prefix: String,
    /// TLS for clients (read when the proxy starts).
    pub tls: Option<TlsSection>,
    pub admin: Option<AdminSection>,
    pub metrics: Option<MetricsSection>,
    pub metadata: Option<MetadataSection>,
    /// `[hot]`: when a slot or node is hot.
    pub hot: super::hot::HotSection,
    /// `[balance]`: what is done about it.
    pub balance: super::hot::BalanceSection,
    /// `[replicas]`: how reads use the nodes' replicas.
    pub replicas: super::replicas::ReplicasSection,
    pub nodes: Vec<Node>,
    pub default_node: usize,
    /// Keyed by lower-cased table name.
    pub tables: HashMap<String, TableRule>,
    /// Generated key columns, keyed by lower-cased table name.
    pub key_generators: HashMap<String, KeyGenerator>,
    /// Global secondary indexes, keyed by the lower-cased base table.
    pub indexes: HashMap<String, Vec<super::indexes::GlobalIndex>>,
}

impl Topology {
    pub fn table(&self, name: &str) -> Option<&TableRule> {
        if let Some(rule) = self.tables.get(name) {
            return Some(rule);
        }
        self.tables.get(&name.to_ascii_lowercase())
    }

    /// The global secondary indexes of a table, if it has any.
    pub fn indexes_of(&self, table: &str) -> Option<&[super::indexes::GlobalIndex]> {
        self.indexes
            .get(table)
            .or_else(|| self.indexes.get(&table.to_ascii_lowercase()))
            .map(Vec::as_slice)
    }

    /// The global secondary index whose entries `table` holds, if it is an index table.
    pub fn index_in(&self, table: &str) -> Option<&super::indexes::GlobalIndex> {
        let t = table.to_ascii_lowercase();
        self.indexes
            .values()
            .flatten()
            .find(|ix| ix.index_table == t)
    }

    /// The nodes that hold a table, in order: its rule's nodes, or the default node for a
    /// table no rule names.
    pub fn holders(&self, table: &str) -> Vec<usize> {
        match self.table(table) {
            Some(rule) => rule.all_nodes(self),
            None => vec![self.default_node],
        }
    }

    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    pub fn node_name(&self, idx: usize) -> &str {
        self.nodes.get(idx).map(|n| n.name.as_str()).unwrap_or("?")
    }

    /// Every node in service.
    pub fn all_nodes(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|i| !self.nodes[*i].retired)
            .collect()
    }

    /// This topology with its nodes numbered as in `old`: a node keeps its index across
    /// reloads (sessions and pools are indexed by it), new nodes come after, removed ones stay
    /// as retired placeholders.
    pub fn align_to(mut self, old: &Topology) -> Topology {
        let mut nodes: Vec<Node> = Vec::with_capacity(old.nodes.len().max(self.nodes.len()));
        let mut remap = vec![0usize; self.nodes.len()];
        let mut taken = vec![false; self.nodes.len()];
        for o in &old.nodes {
            match self.nodes.iter().position(|n| n.name == o.name) {
                Some(i) => {
                    remap[i] = nodes.len();
                    taken[i] = true;
                    nodes.push(self.nodes[i].clone());
                }
                None => nodes.push(Node {
                    retired: true,
                    ..o.clone()
                }),
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if !taken[i] {
                remap[i] = nodes.len();
                nodes.push(n.clone());
            }
        }
        self.default_node = remap
            .get(self.default_node)
            .copied()
            .unwrap_or(self.default_node);
        let at = |i: usize| remap.get(i).copied().unwrap_or(i);
        for rule in self.tables.values_mut() {
            rule.remap(&at);
        }
        self.nodes = nodes;
        self
    }
}
