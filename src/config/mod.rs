//! The rules file: one TOML file is the whole configuration. [`load`] parses and validates it
//! into a [`Topology`], the immutable routing snapshot a statement plans against.

use std::collections::HashMap;
use std::path::Path;

use crate::routing::directory::{DirectoryRule, KeyMove, Lookup};
use crate::routing::keygen::IdLayout;
use crate::routing::range::{KeyKind, RangeMap, RangeMove};
use crate::routing::salt::{BucketMove, Buckets, Salt, MAX_BUCKETS};
use crate::routing::slot::{Move, MoveStep, SlotMap, SLOTS};
use crate::routing::time_tier::{BoundSpec, Tier, TierRule};

pub use crate::routing::TableRule;

pub mod hot;
pub mod indexes;
mod placement;
pub mod replicas;
mod shape;
#[cfg(test)]
mod tests;
pub mod unique;

pub use placement::misplaced;
pub use shape::*;

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
    for (name, section) in &file.nodes {
        let url = section.url();
        // The URL kept (shown masked, compared on reload) is the file's, `${VAR}` and all.
        let expanded = expand_env(url).map_err(|e| err(format!("node `{name}`: {e}")))?;
        let opts = mysql_async::Opts::from_url(&expanded).map_err(|e| {
            err(format!(
                "node `{name}`: invalid MySQL URL `{}`: {}",
                masked_url(url),
                masked_url(&e.to_string())
            ))
        })?;
        let mut replicas = Vec::new();
        for (i, url) in section.replicas().iter().enumerate() {
            let rname = format!("{name}/r{}", i + 1);
            let expanded = expand_env(url).map_err(|e| err(format!("replica `{rname}`: {e}")))?;
            let opts = mysql_async::Opts::from_url(&expanded).map_err(|e| {
                err(format!(
                    "replica `{rname}`: invalid MySQL URL `{}`: {}",
                    masked_url(url),
                    masked_url(&e.to_string())
                ))
            })?;
            replicas.push(Replica {
                name: rname,
                url: url.clone(),
                opts,
            });
        }
        nodes.push(Node {
            name: name.clone(),
            url: url.to_string(),
            opts,
            retired: false,
            weight: section.weight(),
            replicas,
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
        if m.max_parallel_moves == 0 {
            return Err(err(
                "[metadata] max_parallel_moves must be at least 1".into()
            ));
        }
    }
    file.hot.check().map_err(err)?;
    file.replicas.check().map_err(err)?;
    file.balance.check().map_err(err)?;
    if file.balance.mode == hot::BalanceMode::Auto && file.metadata.is_none() {
        return Err(err(
            "[balance] mode = \"auto\" moves slots through the rebalancer's queue, which needs a [metadata] schema".into(),
        ));
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
    let mut indexes = HashMap::new();
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
        if let Some(sections) = &section.indexes {
            let list = indexes::table_indexes(table, &rule, sections).map_err(terr)?;
            if !list.is_empty() {
                indexes.insert(table.to_ascii_lowercase(), list);
            }
        }
        if tables.insert(table.to_ascii_lowercase(), rule).is_some() {
            return Err(terr(
                "named twice (table names are case-insensitive)".into(),
            ));
        }
    }
    indexes::check_index_tables(&tables, &indexes).map_err(err)?;

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
        hot: file.hot,
        balance: file.balance,
        replicas: file.replicas,
        nodes,
        default_node,
        tables,
        key_generators,
        indexes,
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

/// Keys (text forms) placed on a node of their own.
type KeyPlaces = HashMap<Vec<u8>, usize>;

/// A table's keys placed on a node of their own (`entries`: a directory's tenants, a
/// hash_slot table's keys split out of their slot) and keys being moved (`moving`).
fn split_keys(
    section: &TableSection,
    ctx: &RuleCtx<'_>,
) -> Result<(KeyPlaces, Vec<KeyMove>), String> {
    let mut entries = HashMap::new();
    for (k, n) in section.entries.iter().flatten() {
        entries.insert(k.as_bytes().to_vec(), ctx.node(n)?);
    }
    let mut moves: Vec<KeyMove> = Vec::new();
    for m in section.moving.iter().flatten() {
        let step = MoveStep::parse(&m.step).ok_or_else(|| {
            format!(
                "key \"{}\": unknown step `{}` (dual_write, read_target, freeze, capture, hold, cleanup)",
                m.key, m.step
            )
        })?;
        let (from, to) = (ctx.node(&m.node)?, ctx.node(&m.to)?);
        if from == to {
            return Err(format!("key \"{}\" moves to the node that holds it", m.key));
        }
        if moves.iter().any(|x| x.key == m.key.as_bytes()) {
            return Err(format!("key \"{}\" is moving twice", m.key));
        }
        moves.push(KeyMove {
            key: m.key.as_bytes().to_vec(),
            from,
            to,
            step,
        });
    }
    Ok((entries, moves))
}
/// Salted keys (text forms), each with its buckets' nodes.
type SaltedKeys = HashMap<Vec<u8>, Buckets>;

/// A hash_slot table's salting scheme and its salted keys, each with a node per bucket.
fn salting(
    section: &TableSection,
    column: &str,
    split: &KeyPlaces,
    moving: &[KeyMove],
    ctx: &RuleCtx<'_>,
) -> Result<(Option<Salt>, SaltedKeys, Vec<BucketMove>), String> {
    let Some(s) = &section.salt else {
        if section.salted.is_some() || section.salted_moving.is_some() {
            return Err("`salted` needs `salt = { by = \"...\", buckets = N }`".into());
        }
        return Ok((None, HashMap::new(), Vec::new()));
    };
    if s.column
        .as_ref()
        .is_some_and(|c| !c.eq_ignore_ascii_case(column))
    {
        return Err(format!(
            "`salt.column` must be the table's shard column `{column}`"
        ));
    }
    let by = s.by.to_ascii_lowercase();
    if by.is_empty() || by == column {
        return Err(format!(
            "`salt.by` must name a column other than the shard column `{column}`"
        ));
    }
    if !(2..=MAX_BUCKETS).contains(&s.buckets) {
        return Err(format!("`salt.buckets` must be 2 to {MAX_BUCKETS}"));
    }
    let mut salted = HashMap::new();
    for (k, nodes) in section.salted.iter().flatten() {
        let key = k.as_bytes().to_vec();
        if split.contains_key(&key) || moving.iter().any(|m| m.key == key) {
            return Err(format!(
                "key \"{k}\" is salted and also split out or moving"
            ));
        }
        if nodes.is_empty() || nodes.len() > usize::from(s.buckets) {
            return Err(format!(
                "salted key \"{k}\" needs 1 to {} nodes (one per bucket at most)",
                s.buckets
            ));
        }
        let nodes = nodes
            .iter()
            .map(|n| ctx.node(n))
            .collect::<Result<Vec<usize>, String>>()?;
        salted.insert(key, Buckets::spread(&nodes, s.buckets));
    }
    let mut moves: Vec<BucketMove> = Vec::new();
    for m in section.salted_moving.iter().flatten() {
        let key = m.key.as_bytes().to_vec();
        let what = format!("buckets {} of salted key \"{}\"", m.buckets, m.key);
        let Some(owners) = salted.get(&key) else {
            return Err(format!("{what}: the key is not in `salted`"));
        };
        let Some((first, last)) = crate::routing::parse_run(&m.buckets) else {
            return Err(format!("{what}: not a bucket range (\"a-b\" or \"a\")"));
        };
        if first > last || last >= usize::from(s.buckets) {
            return Err(format!("{what}: buckets run 0 to {}", s.buckets - 1));
        }
        let (first, last) = (first as u16, last as u16);
        let step =
            MoveStep::parse(&m.step).ok_or_else(|| format!("{what}: unknown step `{}`", m.step))?;
        let (from, to) = (ctx.node(&m.node)?, ctx.node(&m.to)?);
        if from == to {
            return Err(format!("{what} move to the node that holds them"));
        }
        if (first..=last).any(|b| owners.0[usize::from(b)] != from) {
            return Err(format!(
                "{what} move from `{}`, which `salted` does not give them",
                m.node
            ));
        }
        if moves
            .iter()
            .any(|x| x.key == key && x.first <= last && first <= x.last)
        {
            return Err(format!("{what} are moving twice"));
        }
        moves.push(BucketMove {
            key,
            first,
            last,
            from,
            to,
            step,
        });
    }
    Ok((
        Some(Salt {
            by,
            buckets: s.buckets,
        }),
        salted,
        moves,
    ))
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
        (section.moving.is_some(), "moving"),
        (section.lookup.is_some(), "lookup"),
        (section.fallback.is_some(), "fallback"),
        (section.tiers.is_some(), "tiers"),
        (section.primary_key.is_some(), "primary_key"),
        (section.poll_columns.is_some(), "poll_columns"),
        (section.poll_unique.is_some(), "poll_unique"),
        (section.poll_retries.is_some(), "poll_retries"),
        (section.poll_retry_ms.is_some(), "poll_retry_ms"),
        (section.key_generator.is_some(), "key_generator"),
        (section.salt.is_some(), "salt"),
        (section.salted.is_some(), "salted"),
        (section.salted_moving.is_some(), "salted_moving"),
        (section.indexes.is_some(), "indexes"),
    ] {
        if set {
            present.push(key);
        }
    }
    let allowed: &[&str] = match rule_name {
        "hash_slot" if column.is_none() => {
            &[
                "column",
                "slots",
                "entries",
                "moving",
                "key_generator",
                "salt",
                "salted",
                "salted_moving",
                "indexes",
            ]
        }
        "hash_slot" => &["column", "slots", "key_generator"],
        "range" if column.is_none() => &["column", "ranges", "key_generator", "indexes"],
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
            let (keys, moves) = split_keys(section, ctx)?;
            let (salt, salted, salt_moves) = salting(section, &column, &keys, &moves, ctx)?;
            let map = slot_map(entries, ctx.node_index, ctx.known)?
                .with_keys(keys, moves)
                .with_salt(salt, salted, salt_moves);
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
            let mut moves = Vec::new();
            for (index, r) in ranges.iter().enumerate() {
                let below = match &r.below {
                    Some(b) => Some(kind.bound(b)?),
                    None => None,
                };
                let from = ctx.node(&r.node)?;
                match (&r.to, &r.step) {
                    (None, None) => {}
                    (Some(to), Some(step)) => moves.push(RangeMove {
                        index,
                        from,
                        to: ctx.node(to)?,
                        step: MoveStep::parse(step).ok_or_else(|| {
                            format!("range {}: unknown step \"{step}\"", index + 1)
                        })?,
                    }),
                    _ => {
                        return Err(format!(
                            "range {}: a moving range needs both `to` and `step`",
                            index + 1
                        ))
                    }
                }
                entries.push((below, from));
            }
            TableRule::Range {
                column,
                map: RangeMap::new(kind, entries)?.with_moves(moves)?,
            }
        }
        "directory" => {
            let column = need_column()?;
            let (entries, moves) = split_keys(section, ctx)?;
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
    let (a, b) = crate::routing::parse_run(text).ok_or_else(bad)?;
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
                        "slots \"{}\": unknown step `{step}` (dual_write, read_target, freeze, capture, hold, cleanup)",
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
