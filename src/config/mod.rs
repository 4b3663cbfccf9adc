//! The rules file: one TOML file is the whole configuration. [`load`] parses and validates it
//! into a [`Topology`], the immutable routing snapshot a statement plans against.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use serde::Deserialize;

use crate::routing::slot::{SlotMap, SLOTS};

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
}

fn default_poll_ms() -> u64 {
    1000
}

/// Where Prometheus scrapes `GET /metrics`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    pub listen: String,
}

/// The ops' MySQL-protocol interface: its own address and its own users.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AdminSection {
    pub listen: String,
    pub users: Vec<User>,
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
}

/// PEM files of the certificate chain clients are shown and its private key.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

fn default_max_rows() -> u64 {
    1_000_000
}

/// An application user the frontend accepts.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct User {
    pub name: String,
    pub password: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableSection {
    rule: String,
    column: Option<String>,
    slots: Option<Vec<SlotEntry>>,
    node: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SlotEntry {
    slots: String,
    node: String,
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

/// How one table is placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableRule {
    /// `CRC32(column) % 1024` picks a slot, the map picks the node.
    HashSlot { column: String, map: SlotMap },
    /// A full copy on every node: writes go everywhere, reads to one.
    Broadcast,
    /// The whole table on one node.
    Single { node: usize },
}

impl TableRule {
    pub fn kind(&self) -> &'static str {
        match self {
            TableRule::HashSlot { .. } => "hash_slot",
            TableRule::Broadcast => "broadcast",
            TableRule::Single { .. } => "single",
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
    /// TLS for clients (read when the proxy starts).
    pub tls: Option<TlsSection>,
    pub admin: Option<AdminSection>,
    pub metrics: Option<MetricsSection>,
    pub metadata: Option<MetadataSection>,
    pub nodes: Vec<Node>,
    pub default_node: usize,
    /// Keyed by lower-cased table name.
    pub tables: HashMap<String, TableRule>,
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
        let at = |i: usize| remap.get(i).copied().unwrap_or(i);
        self.default_node = at(self.default_node);
        for rule in self.tables.values_mut() {
            match rule {
                TableRule::HashSlot { map, .. } => *map = map.remap(&at),
                TableRule::Single { node } => *node = at(*node),
                TableRule::Broadcast => {}
            }
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
        let opts = mysql_async::Opts::from_url(url)
            .map_err(|e| err(format!("node `{name}`: invalid MySQL URL `{url}`: {e}")))?;
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
    if let Some(m) = &file.metadata {
        mysql_async::Opts::from_url(&m.url).map_err(|e| {
            err(format!(
                "[metadata] url `{}` is not a MySQL URL: {e}",
                m.url
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
    for (table, section) in &file.tables {
        let terr = |message: String| err(format!("table `{table}`: {message}"));
        let forbid = |present: bool, key: &str| {
            if present {
                Err(terr(format!(
                    "key `{key}` does not apply to rule \"{}\"",
                    section.rule
                )))
            } else {
                Ok(())
            }
        };
        let rule = match section.rule.as_str() {
            "hash_slot" => {
                forbid(section.node.is_some(), "node")?;
                let column = section
                    .column
                    .as_ref()
                    .filter(|c| !c.is_empty())
                    .ok_or_else(|| terr("rule \"hash_slot\" needs `column`".into()))?;
                let entries = section
                    .slots
                    .as_ref()
                    .ok_or_else(|| terr("rule \"hash_slot\" needs `slots`".into()))?;
                let map = slot_map(entries, &node_index, &known).map_err(terr)?;
                TableRule::HashSlot {
                    column: column.to_ascii_lowercase(),
                    map,
                }
            }
            "broadcast" => {
                forbid(section.column.is_some(), "column")?;
                forbid(section.slots.is_some(), "slots")?;
                forbid(section.node.is_some(), "node")?;
                TableRule::Broadcast
            }
            "single" => {
                forbid(section.column.is_some(), "column")?;
                forbid(section.slots.is_some(), "slots")?;
                let name = section
                    .node
                    .as_ref()
                    .ok_or_else(|| terr("rule \"single\" needs `node`".into()))?;
                let node = node_index(name).ok_or_else(|| {
                    terr(format!(
                        "node `{name}` is not in [nodes] (known: {})",
                        known()
                    ))
                })?;
                TableRule::Single { node }
            }
            other => {
                return Err(terr(format!(
                    "unknown rule \"{other}\" (expected hash_slot, broadcast or single)"
                )))
            }
        };
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
        tls: file.server.tls,
        admin: file.admin,
        metrics: file.metrics,
        metadata: file.metadata,
        nodes,
        default_node,
        tables,
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
    Ok(SlotMap::from_assignment(dense))
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
}
