//! The rules file: one TOML file is the whole configuration. [`load`] parses and validates it
//! into a [`Topology`], the immutable routing snapshot a statement plans against.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use serde::Deserialize;

use crate::routing::directory::{DirectoryRule, Lookup};
use crate::routing::keygen::IdLayout;
use crate::routing::range::{KeyKind, RangeMap};
use crate::routing::slot::{Move, MoveStep, SlotMap, SLOTS};
use crate::routing::time_tier::{BoundSpec, Tier, TierRule};

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
struct RulesFile {
    version: u64,
    default_node: String,
    server: ServerSection,
    admin: Option<AdminSection>,
    metrics: Option<MetricsSection>,
    metadata: Option<MetadataSection>,
    nodes: BTreeMap<String, String>,
    #[serde(default)]
    tables: BTreeMap<String, TableSection>,
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
}

fn default_poll_ms() -> u64 {
    1000
}

fn default_lease_ms() -> u64 {
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
struct ServerSection {
    listen: String,
    users: Vec<User>,
    /// Rows a merge may read from the nodes (or hold, when it groups) for one statement.
    #[serde(default = "default_max_rows")]
    max_rows_per_statement: u64,
    /// TLS for clients: `tls = { cert = "server.pem", key = "server.key" }`.
    tls: Option<TlsSection>,
    /// How long a node may send nothing while the proxy waits for its answer (a hung node)
    /// before the statement fails and the node's query is killed; 0: no bound.
    #[serde(default = "default_node_timeout")]
    node_timeout_secs: u64,
    /// How long a statement waits for a node connection (a free place in the node's pool,
    /// then the connect) before it fails naming the node.
    #[serde(default = "default_node_wait")]
    node_wait_secs: u64,
    /// Client connections served at once; past it a client gets MySQL's 1040.
    #[serde(default = "default_max_connections")]
    max_connections: usize,
    /// Clients from one address in their handshake at once (not logged in yet); 0: no
    /// limit. Past it a new one gets 1040 before its greeting.
    #[serde(default = "default_max_handshakes_per_ip")]
    max_handshakes_per_ip: usize,
    /// How long a client may send nothing between commands before it is disconnected (MySQL's
    /// `wait_timeout`); 0: never.
    #[serde(default = "default_idle_timeout")]
    idle_timeout_secs: u64,
    /// The largest packet a client may send, in bytes (MySQL's `max_allowed_packet`).
    #[serde(default = "default_max_allowed_packet")]
    max_allowed_packet: usize,
    /// How a transaction that touched several nodes commits: "xa" (two-phase) or
    /// "best_effort" (each node in turn).
    #[serde(default)]
    transaction_mode: TxMode,
    /// The start of every XA transaction id this proxy family writes; recovery finishes
    /// only the prepared branches that carry it.
    #[serde(default = "default_xa_prefix")]
    xa_prefix: String,
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

fn default_xa_prefix() -> String {
    "shardproxy".into()
}

fn default_max_handshakes_per_ip() -> usize {
    128
}

fn default_max_allowed_packet() -> usize {
    64 << 20
}

fn default_idle_timeout() -> u64 {
    28_800
}

fn default_max_connections() -> usize {
    4096
}

fn default_node_timeout() -> u64 {
    30
}

fn default_node_wait() -> u64 {
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

fn default_max_rows() -> u64 {
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
struct UserSection {
    name: String,
    password: Option<String>,
    password_hash: Option<String>,
    password_env: Option<String>,
    #[serde(default)]
    require_tls: bool,
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
struct TableSection {
    rule: String,
    column: Option<String>,
    slots: Option<Vec<SlotEntry>>,
    node: Option<String>,
    /// range: `[{ below = 1000, node = "ds0" }, { node = "ds1" }]`
    ranges: Option<Vec<RangeEntry>>,
    /// directory: `{ "42" = "ds1" }`
    entries: Option<BTreeMap<String, String>>,
    /// directory: keys being moved, `[{ key = "42", node = "ds0", to = "ds3", step = "dual_write" }]`.
    moving: Option<Vec<KeyMoveEntry>>,
    lookup: Option<LookupSection>,
    fallback: Option<Box<TableSection>>,
    /// time_tier
    tiers: Option<Vec<TierSection>>,
    primary_key: Option<Vec<String>>,
    poll_columns: Option<Vec<String>>,
    poll_unique: Option<bool>,
    poll_retries: Option<u32>,
    poll_retry_ms: Option<u64>,
    key_generator: Option<KeyGenSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeEntry {
    below: Option<toml::Value>,
    node: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LookupSection {
    node: String,
    table: String,
    key_column: String,
    node_column: String,
    #[serde(default = "default_cache_size")]
    cache_size: u64,
    #[serde(default = "default_ttl_secs")]
    ttl_secs: u64,
}

fn default_cache_size() -> u64 {
    100_000
}

fn default_ttl_secs() -> u64 {
    60
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TierSection {
    name: String,
    node: String,
    lower: Option<String>,
    /// Accepted for clarity; must equal the tier above's `lower` (tiers are contiguous).
    upper: Option<String>,
    #[serde(default)]
    overlap_days: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyGenSection {
    column: String,
    kind: String,
    /// `YYYY-MM-DD` (UTC midnight); default 2024-01-01.
    epoch: Option<String>,
    #[serde(default)]
    worker: u16,
    #[serde(default)]
    worker_bits: u8,
    /// kind = "sequence": the node holding the sequence table (default: default_node).
    node: Option<String>,
    /// kind = "sequence": ids a proxy reserves at a time (default 1000).
    block: Option<u64>,
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
struct KeyMoveEntry {
    key: String,
    node: String,
    to: String,
    step: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SlotEntry {
    slots: String,
    node: String,
    /// A range being moved (`crate::migrate`): to this node, at `step`.
    to: Option<String>,
    step: Option<String>,
}

/// One backend node.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub url: String,
    pub opts: mysql_async::Opts,
    /// Removed by a reload: kept so node indexes stay stable, never routed to.
    pub retired: bool,
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
            TableRule::HashSlot { column, map } => format!(
                "hash_slot on `{column}`: {}",
                map.runs()
                    .iter()
                    .map(|(a, b, n)| format!("{a}-{b} -> {}", name(*n)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
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
    pub nodes: Vec<Node>,
    pub default_node: usize,
    /// Keyed by lower-cased table name.
    pub tables: HashMap<String, TableRule>,
    /// Generated key columns, keyed by lower-cased table name.
    pub key_generators: HashMap<String, KeyGenerator>,
}

impl Topology {
    pub fn table(&self, name: &str) -> Option<&TableRule> {
        if let Some(rule) = self.tables.get(name) {
            return Some(rule);
        }
        self.tables.get(&name.to_ascii_lowercase())
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

/// Reads, parses and validates a rules file.
pub fn load(path: &Path) -> Result<Topology, ConfigError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        origin: origin.clone(),
        message: format!("cannot read the file: {e}"),
    })?;
    parse(&text, &origin)
}

/// Parses and validates rules-file text; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<Topology, ConfigError> {
    let err = |message: String| ConfigError {
        origin: origin.to_string(),
        message,
    };
    let file: RulesFile = toml::from_str(text).map_err(|e| err(format!("invalid TOML: {e}")))?;

    if file.nodes.is_empty() {
        return Err(err("[nodes] names no node".into()));
    }
    let mut nodes = Vec::with_capacity(file.nodes.len());
    for (name, url) in &file.nodes {
        // The URL kept (shown masked, compared on reload) is the file's, `${VAR}` and all.
        let expanded = expand_env(url).map_err(|e| err(format!("node `{name}`: {e}")))?;
        let opts = mysql_async::Opts::from_url(&expanded).map_err(|e| {
            err(format!(
                "node `{name}`: invalid MySQL URL `{}`: {}",
                masked_url(url),
                masked_url(&e.to_string())
            ))
        })?;
        nodes.push(Node {
            name: name.clone(),
            url: url.clone(),
            opts,
            retired: false,
        });
    }
    let node_index = |name: &str| nodes.iter().position(|n| n.name == name);
    let known = || {
        nodes
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };

    let default_node = node_index(&file.default_node).ok_or_else(|| {
        err(format!(
            "default_node `{}` is not in [nodes] (known: {})",
            file.default_node,
            known()
        ))
    })?;

    if let Some(a) = &file.admin {
        a.listen.parse::<std::net::SocketAddr>().map_err(|e| {
            err(format!(
                "[admin] listen `{}` is not an address: {e}",
                a.listen
            ))
        })?;
        if a.users.is_empty() {
            return Err(err(
                "[admin] users is empty: no operator could log in".into()
            ));
        }
        if let Some(u) = a
            .users
            .iter()
            .find(|u| file.server.users.iter().any(|s| s.name == u.name))
        {
            return Err(err(format!(
                "user `{}` is both an application user and an admin user: keep them apart",
                u.name
            )));
        }
    }
    let mut file = file;
    if let Some(m) = file.metadata.as_mut() {
        m.url = expand_env(&m.url).map_err(|e| err(format!("[metadata] url: {e}")))?;
    }
    for (what, listen, allow) in [
        (
            "[admin]",
            file.admin.as_ref().map(|a| a.listen.clone()),
            file.admin.as_ref().is_some_and(|a| a.allow_remote),
        ),
        (
            "[metrics]",
            file.metrics.as_ref().map(|m| m.listen.clone()),
            file.metrics.as_ref().is_some_and(|m| m.allow_remote),
        ),
    ] {
        let Some(listen) = listen else { continue };
        if let Ok(addr) = listen.parse::<std::net::SocketAddr>() {
            if !addr.ip().is_loopback() && !allow {
                return Err(err(format!(
                    "{what} listen `{listen}` is not a loopback address: the ops' interface is reachable from the network only with `allow_remote = true` in {what}"
                )));
            }
        }
    }
    if let Some(m) = &file.metadata {
        mysql_async::Opts::from_url(&m.url).map_err(|e| {
            err(format!(
                "[metadata] url `{}` is not a MySQL URL: {}",
                masked_url(&m.url),
                masked_url(&e.to_string())
            ))
        })?;
        if m.poll_ms == 0 {
            return Err(err("[metadata] poll_ms must be at least 1".into()));
        }
    }
    if let Some(m) = &file.metrics {
        m.listen.parse::<std::net::SocketAddr>().map_err(|e| {
            err(format!(
                "[metrics] listen `{}` is not an address: {e}",
                m.listen
            ))
        })?;
    }
    let prefix = &file.server.xa_prefix;
    if prefix.is_empty()
        || prefix.len() > 24
        || !prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(err(format!(
            "[server] xa_prefix `{prefix}`: 1 to 24 letters, digits, `_` or `-`"
        )));
    }
    if file.server.max_allowed_packet < 1024 {
        return Err(err(
            "[server] max_allowed_packet must be at least 1024 bytes".into(),
        ));
    }
    if file.server.node_wait_secs == 0 {
        return Err(err("[server] node_wait_secs must be at least 1".into()));
    }
    if file.server.max_connections == 0 {
        return Err(err("[server] max_connections must be at least 1".into()));
    }
    if file.server.max_rows_per_statement == 0 {
        return Err(err(
            "[server] max_rows_per_statement must be at least 1".into()
        ));
    }
    if file.server.users.is_empty() {
        return Err(err("[server] users is empty: no client could log in".into()));
    }
    file.server
        .listen
        .parse::<std::net::SocketAddr>()
        .map_err(|e| {
            err(format!(
                "[server] listen `{}` is not an address: {e}",
                file.server.listen
            ))
        })?;

    let mut tables = HashMap::new();
    let mut key_generators = HashMap::new();
    let ctx = RuleCtx {
        node_index: &node_index,
        known: &known,
    };
    for (table, section) in &file.tables {
        let terr = |message: String| err(format!("table `{table}`: {message}"));
        let rule = table_rule(section, None, &ctx).map_err(terr)?;
        if let Some(g) = &section.key_generator {
            let gen = key_generator(g, &rule, &ctx, &file.default_node).map_err(terr)?;
            key_generators.insert(table.to_ascii_lowercase(), gen);
        }
        if tables.insert(table.to_ascii_lowercase(), rule).is_some() {
            return Err(terr(
                "named twice (table names are case-insensitive)".into(),
            ));
        }
    }

    Ok(Topology {
        version: file.version,
        origin: origin.to_string(),
        listen: file.server.listen,
        users: file.server.users,
        max_rows_per_statement: file.server.max_rows_per_statement,
        node_timeout: (file.server.node_timeout_secs > 0)
            .then(|| std::time::Duration::from_secs(file.server.node_timeout_secs)),
        node_wait: std::time::Duration::from_secs(file.server.node_wait_secs),
        max_connections: file.server.max_connections,
        max_handshakes_per_ip: file.server.max_handshakes_per_ip,
        max_allowed_packet: file.server.max_allowed_packet,
        idle_timeout: (file.server.idle_timeout_secs > 0)
            .then(|| std::time::Duration::from_secs(file.server.idle_timeout_secs)),
        tx_mode: file.server.transaction_mode,
        xa_prefix: file.server.xa_prefix,
        tls: file.server.tls,
        admin: file.admin,
        metrics: file.metrics,
        metadata: file.metadata,
        nodes,
        default_node,
        tables,
        key_generators,
    })
}

struct RuleCtx<'a> {
    node_index: &'a dyn Fn(&str) -> Option<usize>,
    known: &'a dyn Fn() -> String,
}

impl RuleCtx<'_> {
    fn node(&self, name: &str) -> Result<usize, String> {
        (self.node_index)(name).ok_or_else(|| {
            format!(
                "node `{name}` is not in [nodes] (known: {})",
                (self.known)()
            )
        })
    }
}

/// One table's rule; `column` is set for a directory's fallback, which routes by the
/// directory's column.
fn table_rule(
    section: &TableSection,
    column: Option<&str>,
    ctx: &RuleCtx<'_>,
) -> Result<TableRule, String> {
    let rule_name = section.rule.as_str();
    let mut present: Vec<&str> = Vec::new();
    for (set, key) in [
        (section.column.is_some(), "column"),
        (section.slots.is_some(), "slots"),
        (section.node.is_some(), "node"),
        (section.ranges.is_some(), "ranges"),
        (section.entries.is_some(), "entries"),
        (section.lookup.is_some(), "lookup"),
        (section.fallback.is_some(), "fallback"),
        (section.tiers.is_some(), "tiers"),
        (section.primary_key.is_some(), "primary_key"),
        (section.poll_columns.is_some(), "poll_columns"),
        (section.poll_unique.is_some(), "poll_unique"),
        (section.poll_retries.is_some(), "poll_retries"),
        (section.poll_retry_ms.is_some(), "poll_retry_ms"),
        (section.key_generator.is_some(), "key_generator"),
    ] {
        if set {
            present.push(key);
        }
    }
    let allowed: &[&str] = match rule_name {
        "hash_slot" => &["column", "slots", "key_generator"],
        "range" => &["column", "ranges", "key_generator"],
        "directory" => &[
            "column",
            "entries",
            "moving",
            "lookup",
            "fallback",
            "key_generator",
        ],
        "time_tier" => &[
            "column",
            "tiers",
            "primary_key",
            "poll_columns",
            "poll_unique",
            "poll_retries",
            "poll_retry_ms",
        ],
        "broadcast" => &[],
        "single" => &["node"],
        other => {
            return Err(format!(
                "unknown rule \"{other}\" (expected hash_slot, range, directory, time_tier, broadcast or single)"
            ))
        }
    };
    if let Some(k) = present.iter().find(|k| !allowed.contains(k)) {
        return Err(format!(
            "key `{k}` does not apply to rule \"{rule_name}\"{}",
            if column.is_some() {
                " (in `fallback`)"
            } else {
                ""
            }
        ));
    }
    let need_column = || -> Result<String, String> {
        if let Some(c) = column {
            return Ok(c.to_string());
        }
        section
            .column
            .as_ref()
            .filter(|c| !c.is_empty())
            .map(|c| c.to_ascii_lowercase())
            .ok_or_else(|| format!("rule \"{rule_name}\" needs `column`"))
    };
    Ok(match rule_name {
        "hash_slot" => {
            let column = need_column()?;
            let entries = section
                .slots
                .as_ref()
                .ok_or_else(|| "rule \"hash_slot\" needs `slots`".to_string())?;
            let map = slot_map(entries, ctx.node_index, ctx.known)?;
            TableRule::HashSlot { column, map }
        }
        "broadcast" => TableRule::Broadcast,
        "single" => {
            let name = section
                .node
                .as_ref()
                .ok_or_else(|| "rule \"single\" needs `node`".to_string())?;
            TableRule::Single {
                node: ctx.node(name)?,
            }
        }
        "range" => {
            let column = need_column()?;
            let ranges = section
                .ranges
                .as_ref()
                .filter(|r| !r.is_empty())
                .ok_or_else(|| "rule \"range\" needs `ranges`".to_string())?;
            let first_bound = ranges
                .iter()
                .find_map(|r| r.below.as_ref())
                .ok_or_else(|| {
                    "`ranges` needs at least two ranges (every one but the last with `below`)"
                        .to_string()
                })?;
            let kind = KeyKind::of_bound(first_bound)?;
            let mut entries = Vec::with_capacity(ranges.len());
            for r in ranges {
                let below = match &r.below {
                    Some(b) => Some(kind.bound(b)?),
                    None => None,
                };
                entries.push((below, ctx.node(&r.node)?));
            }
            TableRule::Range {
                column,
                map: RangeMap::new(kind, entries)?,
            }
        }
        "directory" => {
            let column = need_column()?;
            let mut entries = HashMap::new();
            for (k, n) in section.entries.iter().flatten() {
                entries.insert(k.as_bytes().to_vec(), ctx.node(n)?);
            }
            let lookup = match &section.lookup {
                None => None,
                Some(l) => {
                    if l.cache_size == 0 {
                        return Err("lookup cache_size must be at least 1".into());
                    }
                    // The cache refuses (panics on) a time to live over 1000 years.
                    if l.ttl_secs > 31_536_000_000 {
                        return Err(
                            "lookup ttl_secs must be at most 31536000000 (1000 years)".into()
                        );
                    }
                    for (what, v) in [
                        ("table", &l.table),
                        ("key_column", &l.key_column),
                        ("node_column", &l.node_column),
                    ] {
                        if v.is_empty() {
                            return Err(format!("lookup `{what}` is empty"));
                        }
                    }
                    Some(Lookup {
                        node: ctx.node(&l.node)?,
                        table: l.table.clone(),
                        key_column: l.key_column.clone(),
                        node_column: l.node_column.clone(),
                        cache_size: l.cache_size,
                        ttl_secs: l.ttl_secs,
                    })
                }
            };
            let mut moves = Vec::new();
            for m in section.moving.iter().flatten() {
                let step = MoveStep::parse(&m.step).ok_or_else(|| {
                    format!(
                        "key \"{}\": unknown step `{}` (dual_write, read_target, freeze, cleanup)",
                        m.key, m.step
                    )
                })?;
                let (from, to) = (ctx.node(&m.node)?, ctx.node(&m.to)?);
                if from == to {
                    return Err(format!("key \"{}\" moves to the node that holds it", m.key));
                }
                if moves
                    .iter()
                    .any(|x: &crate::routing::directory::KeyMove| x.key == m.key.as_bytes())
                {
                    return Err(format!("key \"{}\" is moving twice", m.key));
                }
                moves.push(crate::routing::directory::KeyMove {
                    key: m.key.as_bytes().to_vec(),
                    from,
                    to,
                    step,
                });
            }
            if entries.is_empty() && lookup.is_none() && moves.is_empty() {
                return Err("rule \"directory\" needs `entries` or a `lookup` table".into());
            }
            let fb = section.fallback.as_ref().ok_or_else(|| {
                "rule \"directory\" needs `fallback` (e.g. { rule = \"hash_slot\", slots = [...] }) for the keys it does not list".to_string()
            })?;
            if !matches!(fb.rule.as_str(), "hash_slot" | "range" | "single") {
                return Err(format!(
                    "a directory's fallback is hash_slot, range or single, not \"{}\"",
                    fb.rule
                ));
            }
            if fb.column.is_some() {
                return Err(
                    "the fallback routes by the directory's `column`: leave out its own".into(),
                );
            }
            let fallback = table_rule(fb, Some(&column), ctx)?;
            TableRule::Directory(Box::new(DirectoryRule {
                column,
                entries,
                lookup,
                moves,
                fallback: Box::new(fallback),
            }))
        }
        "time_tier" => {
            let column = need_column()?;
            let tiers_in = section
                .tiers
                .as_ref()
                .ok_or_else(|| "rule \"time_tier\" needs `tiers`".to_string())?;
            let mut tiers = Vec::with_capacity(tiers_in.len());
            for (i, t) in tiers_in.iter().enumerate() {
                let lower = t.lower.as_deref().map(BoundSpec::parse).transpose()?;
                if let Some(u) = &t.upper {
                    let above = i.checked_sub(1).and_then(|j| tiers_in[j].lower.as_ref());
                    let same =
                        above.is_some_and(|a| BoundSpec::parse(a).ok() == BoundSpec::parse(u).ok());
                    if !same {
                        return Err(format!(
                            "tier `{}`: `upper` \"{u}\" must equal the `lower` of the tier above (tiers are contiguous; the first has no upper)",
                            t.name
                        ));
                    }
                }
                tiers.push(Tier {
                    name: t.name.clone(),
                    node: ctx.node(&t.node)?,
                    lower,
                    overlap_days: t.overlap_days,
                });
            }
            let rule = TierRule {
                column,
                primary_key: section
                    .primary_key
                    .iter()
                    .flatten()
                    .map(|c| c.to_ascii_lowercase())
                    .collect(),
                tiers,
                poll_columns: section
                    .poll_columns
                    .iter()
                    .flatten()
                    .map(|c| c.to_ascii_lowercase())
                    .collect(),
                poll_unique: section.poll_unique.unwrap_or(false),
                poll_retries: section.poll_retries.unwrap_or(2),
                poll_retry_ms: section.poll_retry_ms.unwrap_or(100),
            };
            rule.validate()?;
            rule.bounds(chrono::Utc::now().date_naive())?;
            TableRule::TimeTier(Box::new(rule))
        }
        other => return Err(format!("unknown rule \"{other}\"")),
    })
}

fn key_generator(
    g: &KeyGenSection,
    rule: &TableRule,
    ctx: &RuleCtx<'_>,
    default_node: &str,
) -> Result<KeyGenerator, String> {
    let column = g.column.to_ascii_lowercase();
    if rule.column().is_none() {
        return Err("key_generator needs a sharded table (a rule with a column)".into());
    }
    let sequence = match g.kind.as_str() {
        "snowflake" => {
            if g.node.is_some() || g.block.is_some() {
                return Err("key_generator `node` and `block` are for kind = \"sequence\"".into());
            }
            None
        }
        "sequence" => {
            let block = g.block.unwrap_or(1000);
            if !(1..=1_000_000).contains(&block) {
                return Err("key_generator block is 1 to 1000000".into());
            }
            Some(SequenceGen {
                node: ctx.node(g.node.as_deref().unwrap_or(default_node))?,
                block,
            })
        }
        other => {
            return Err(format!(
                "key_generator kind \"{other}\" is unknown (expected \"snowflake\" or \"sequence\")"
            ))
        }
    };
    if g.worker_bits > 8 {
        return Err("key_generator worker_bits is at most 8 (of the 12 sequence bits)".into());
    }
    if u32::from(g.worker) >= (1u32 << g.worker_bits) {
        return Err(format!(
            "key_generator worker {} does not fit in {} worker_bits",
            g.worker, g.worker_bits
        ));
    }
    let epoch = g.epoch.as_deref().unwrap_or("2024-01-01");
    let day = chrono::NaiveDate::parse_from_str(epoch, "%Y-%m-%d")
        .map_err(|_| format!("key_generator epoch \"{epoch}\" is not YYYY-MM-DD"))?;
    let epoch_ms = day
        .and_hms_opt(0, 0, 0)
        .map(|t| t.and_utc().timestamp_millis())
        .unwrap_or(0);
    Ok(KeyGenerator {
        column,
        layout: IdLayout {
            epoch_ms,
            worker: g.worker,
            worker_bits: g.worker_bits,
        },
        sequence,
    })
}

fn parse_slot_range(text: &str) -> Result<(usize, usize), String> {
    let bad = || format!("slot range \"{text}\" is not `N` or `A-B` with 0 <= A <= B <= 1023");
    let (a, b) = match text.split_once('-') {
        Some((a, b)) => (a.trim(), b.trim()),
        None => (text.trim(), text.trim()),
    };
    let a: usize = a.parse().map_err(|_| bad())?;
    let b: usize = b.parse().map_err(|_| bad())?;
    if a > b || b >= SLOTS {
        return Err(bad());
    }
    Ok((a, b))
}

fn slot_map(
    entries: &[SlotEntry],
    node_index: &dyn Fn(&str) -> Option<usize>,
    known: &dyn Fn() -> String,
) -> Result<SlotMap, String> {
    let mut owner: Vec<Option<usize>> = vec![None; SLOTS];
    let mut moves = Vec::new();
    for entry in entries {
        let node = node_index(&entry.node).ok_or_else(|| {
            format!(
                "slots \"{}\" name node `{}`, which is not in [nodes] (known: {})",
                entry.slots,
                entry.node,
                known()
            )
        })?;
        let (a, b) = parse_slot_range(&entry.slots)?;
        match (&entry.to, &entry.step) {
            (None, None) => {}
            (Some(to), Some(step)) => {
                let to = node_index(to).ok_or_else(|| {
                    format!(
                        "slots \"{}\" move to node `{to}`, which is not in [nodes] (known: {})",
                        entry.slots,
                        known()
                    )
                })?;
                let step = MoveStep::parse(step).ok_or_else(|| {
                    format!(
                        "slots \"{}\": unknown step `{step}` (dual_write, read_target, freeze, cleanup)",
                        entry.slots
                    )
                })?;
                if to == node {
                    return Err(format!(
                        "slots \"{}\" move to the node that holds them",
                        entry.slots
                    ));
                }
                moves.push(Move {
                    first: a as u16,
                    last: b as u16,
                    from: node,
                    to,
                    step,
                });
            }
            _ => {
                return Err(format!(
                    "slots \"{}\": `to` and `step` go together (a range being moved)",
                    entry.slots
                ))
            }
        }
        for (slot, o) in owner.iter_mut().enumerate().take(b + 1).skip(a) {
            if o.is_some() {
                return Err(format!(
                    "slot {slot} is assigned twice (again in \"{}\")",
                    entry.slots
                ));
            }
            *o = Some(node);
        }
    }
    let missing: Vec<usize> = (0..SLOTS).filter(|s| owner[*s].is_none()).collect();
    if let Some(first) = missing.first() {
        let mut last = *first;
        while missing.contains(&(last + 1)) {
            last += 1;
        }
        return Err(format!(
            "{} of the 1024 slots are not assigned, first {first}-{last}: every slot must be covered exactly once",
            missing.len()
        ));
    }
    let mut dense = Box::new([0u16; SLOTS]);
    for (slot, o) in owner.into_iter().enumerate() {
        dense[slot] = o.unwrap_or_default() as u16;
    }
    Ok(SlotMap::from_assignment(dense).with_moves(moves))
}

/// A topology for unit tests: `nodes` nodes `ds0`, `ds1`, ... (default node ds0) and the
/// given `[tables.*]` TOML.
#[cfg(test)]
pub fn test_topology(version: u64, nodes: usize, tables: &str) -> Topology {
    let mut s = format!(
        "version = {version}\ndefault_node = \"ds0\"\n[server]\nlisten = \"127.0.0.1:3307\"\n\
         users = [{{ name = \"app\", password = \"app\" }}]\n[nodes]\n"
    );
    for i in 0..nodes {
        s.push_str(&format!(
            "ds{i} = \"mysql://root:root@127.0.0.1:{}/shop\"\n",
            3311 + i
        ));
    }
    s.push_str(tables);
    match parse(&s, "test.toml") {
        Ok(t) => t,
        Err(e) => panic!("test rules do not parse: {e:?}\n{s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
version = 3
default_node = "ds0"
[server]
listen = "127.0.0.1:3307"
users = [{ name = "app", password = "app" }]
[nodes]
ds0 = "mysql://root:root@127.0.0.1:3311/shop"
ds1 = "mysql://root:root@127.0.0.1:3312/shop"
"#;

    fn with(tables: &str) -> Result<Topology, ConfigError> {
        parse(&format!("{BASE}{tables}"), "rules/test.toml")
    }

    #[test]
    fn a_valid_file_loads() {
        let t = with(
            r#"
[tables.T_Order]
rule = "hash_slot"
column = "User_Id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
[tables.t_country]
rule = "broadcast"
[tables.t_merchant]
rule = "single"
node = "ds1"
"#,
        )
        .unwrap();
        assert_eq!(t.version, 3);
        assert_eq!(t.default_node, 0);
        match t.table("t_order").unwrap() {
            TableRule::HashSlot { column, map } => {
                assert_eq!(column, "user_id");
                assert_eq!(map.node_of_slot(600), 1);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(t.table("T_COUNTRY"), Some(&TableRule::Broadcast));
        assert_eq!(t.table("t_merchant"), Some(&TableRule::Single { node: 1 }));
    }

    fn error_of(tables: &str) -> String {
        with(tables).unwrap_err().to_string()
    }

    #[test]
    fn secrets_need_not_be_written_in_the_file() {
        // Names of this test's own (std's environment lock orders Rust readers and writers).
        std::env::set_var("SHARDPROXY_TEST_NODE_PW", "n0de");
        std::env::set_var("SHARDPROXY_TEST_APP_PW", "s3cret");
        let text = BASE
            .replace(
                r#"users = [{ name = "app", password = "app" }]"#,
                r#"users = [{ name = "app", password_env = "SHARDPROXY_TEST_APP_PW" },
         { name = "ro", password_hash = "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19" }]"#,
            )
            .replace(
                "root:root@127.0.0.1:3311",
                "root:${SHARDPROXY_TEST_NODE_PW}@127.0.0.1:3311",
            );
        let t = parse(&text, "rules/test.toml").unwrap();
        assert_eq!(t.users[0].password, "s3cret");
        assert_eq!(t.users[1].password, "");
        assert_eq!(
            t.users[1].hash.map(|h| h[0]),
            Some(0x24),
            "PASSWORD('password') = *2470C0..."
        );
        assert_eq!(t.nodes[0].opts.pass(), Some("n0de"));
        assert!(
            t.nodes[0].url.contains("${SHARDPROXY_TEST_NODE_PW}"),
            "the URL shown and compared is the file's"
        );
        for (bad, says) in [
            (
                r#"{ name = "x", password = "a", password_hash = "*00" }"#,
                "exactly one of",
            ),
            (
                r#"{ name = "x", password_hash = "2470C0" }"#,
                "40 hex digits",
            ),
            (
                r#"{ name = "x", password_env = "SHARDPROXY_TEST_UNSET" }"#,
                "not set",
            ),
            // An empty password would let anyone in as that user.
            (r#"{ name = "x", password = "" }"#, "empty password"),
            (
                r#"{ name = "x", password_env = "SHARDPROXY_TEST_EMPTY_PW" }"#,
                "which is empty",
            ),
        ] {
            std::env::set_var("SHARDPROXY_TEST_EMPTY_PW", "");
            let text = BASE.replace(r#"{ name = "app", password = "app" }"#, bad);
            let e = parse(&text, "rules/test.toml").unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let text = BASE.replace(
            "root:root@127.0.0.1:3312",
            "root:${SHARDPROXY_TEST_UNSET}@x",
        );
        let e = parse(&text, "rules/test.toml").unwrap_err().to_string();
        assert!(
            e.contains("SHARDPROXY_TEST_UNSET") && e.contains("ds1"),
            "{e}"
        );
        // A URL printed in an error has its password masked.
        let text = BASE.replace(
            "root:root@127.0.0.1:3312",
            "root:t0psecret@127.0.0.1:3312?no_such_option=1",
        );
        let e = parse(&text, "rules/test.toml").unwrap_err().to_string();
        assert!(e.contains("ds1") && !e.contains("t0psecret"), "{e}");
    }

    #[test]
    fn ops_listeners_stay_on_loopback_unless_told() {
        let admin = "[admin]\nlisten = \"0.0.0.0:3308\"\nusers = [{ name = \"ops\", password = \"ops\" }]\n";
        let e = with(admin).unwrap_err().to_string();
        assert!(e.contains("allow_remote"), "{e}");
        assert!(with(&format!("{admin}allow_remote = true\n")).is_ok());
        let metrics = "[metrics]\nlisten = \"10.0.0.1:9108\"\n";
        assert!(with(metrics)
            .unwrap_err()
            .to_string()
            .contains("allow_remote"));
        assert!(with("[metrics]\nlisten = \"127.0.0.1:9108\"\n").is_ok());
    }

    #[test]
    fn reloads_keep_node_indexes() {
        let old = with("[tables.t]\nrule = \"single\"\nnode = \"ds1\"\n").unwrap();
        let new = parse(
            &BASE
                .replace(
                    "ds0 = ",
                    "ds9 = \"mysql://root:root@127.0.0.1:3319/shop\"\nds0 = ",
                )
                .replace("ds1 = \"mysql://root:root@127.0.0.1:3312/shop\"\n", ""),
            "x.toml",
        )
        .unwrap();
        // Parsed alone, nodes are ds0, ds9; aligned to the old ds0, ds1 they become
        // ds0, ds1 (retired), ds9.
        let aligned = new.align_to(&old);
        let names: Vec<(&str, bool)> = aligned
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.retired))
            .collect();
        assert_eq!(names, vec![("ds0", false), ("ds1", true), ("ds9", false)]);
        assert_eq!(aligned.all_nodes(), vec![0, 2]);
        assert_eq!(aligned.default_node, 0);
    }

    #[test]
    fn overlapping_slots_are_refused() {
        let e = error_of(
            r#"
[tables.t_order]
rule = "hash_slot"
column = "user_id"
slots = [{ slots = "0-600", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
"#,
        );
        assert_eq!(
            e,
            "rules/test.toml: table `t_order`: slot 512 is assigned twice (again in \"512-1023\")"
        );
    }

    #[test]
    fn missing_slots_are_refused() {
        let e = error_of(
            r#"
[tables.t_order]
rule = "hash_slot"
column = "user_id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "600-1023", node = "ds1" }]
"#,
        );
        assert!(e.contains("table `t_order`"), "{e}");
        assert!(
            e.contains("88 of the 1024 slots are not assigned, first 512-599"),
            "{e}"
        );
    }

    #[test]
    fn unknown_nodes_are_refused() {
        let e = error_of(
            r#"
[tables.t_order]
rule = "hash_slot"
column = "user_id"
slots = [{ slots = "0-1023", node = "ds9" }]
"#,
        );
        assert!(
            e.contains("node `ds9`, which is not in [nodes] (known: ds0, ds1)"),
            "{e}"
        );
        let e = error_of("[tables.t_m]\nrule = \"single\"\nnode = \"dsx\"\n");
        assert!(
            e.contains("table `t_m`: node `dsx` is not in [nodes]"),
            "{e}"
        );
    }

    #[test]
    fn bad_slot_ranges_and_rules_are_refused() {
        let e = error_of(
            "[tables.t]\nrule = \"hash_slot\"\ncolumn = \"id\"\nslots = [{ slots = \"0-1024\", node = \"ds0\" }]\n",
        );
        assert!(e.contains("slot range \"0-1024\""), "{e}");
        let e = error_of("[tables.t]\nrule = \"modulo\"\n");
        assert!(e.contains("table `t`: unknown rule \"modulo\""), "{e}");
        let e = error_of("[tables.t]\nrule = \"hash_slot\"\nslots = []\n");
        assert!(e.contains("needs `column`"), "{e}");
        let e = error_of("[tables.t]\nrule = \"broadcast\"\nnode = \"ds0\"\n");
        assert!(e.contains("key `node` does not apply"), "{e}");
    }

    #[test]
    fn toml_errors_and_bad_defaults_are_refused() {
        let e = parse("version = ", "x.toml").unwrap_err().to_string();
        assert!(e.starts_with("x.toml: invalid TOML"), "{e}");
        let e = parse(
            &BASE.replace("\"ds0\"\n[server]", "\"ds7\"\n[server]"),
            "x.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("default_node `ds7` is not in [nodes]"), "{e}");
        let e = parse(&BASE.replace("ds1 = ", "ds1 = \"nope\"\nds2 = "), "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("node `ds1`: invalid MySQL URL"), "{e}");
    }

    #[test]
    fn the_wait_for_a_node_connection_is_bounded() {
        let t = parse(BASE, "x.toml").unwrap();
        assert_eq!(
            t.node_wait,
            std::time::Duration::from_secs(5),
            "the default"
        );
        let t = parse(
            &BASE.replace("[server]", "[server]\nnode_wait_secs = 30"),
            "x.toml",
        )
        .unwrap();
        assert_eq!(t.node_wait, std::time::Duration::from_secs(30));
        let e = parse(
            &BASE.replace("[server]", "[server]\nnode_wait_secs = 0"),
            "x.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("node_wait_secs must be at least 1"), "{e}");
    }

    #[test]
    fn a_lookup_cache_ttl_the_cache_would_refuse_is_refused() {
        let rules = |ttl: u64| {
            format!(
                "{BASE}[tables.t]\nrule = \"directory\"\ncolumn = \"k\"\nlookup = {{ node = \"ds0\", table = \"d\", key_column = \"k\", node_column = \"n\", ttl_secs = {ttl} }}\nfallback = {{ rule = \"single\", node = \"ds0\" }}\n"
            )
        };
        assert!(parse(&rules(31_536_000_000), "x.toml").is_ok());
        let e = parse(&rules(31_536_000_001), "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ttl_secs must be at most"), "{e}");
    }
}
