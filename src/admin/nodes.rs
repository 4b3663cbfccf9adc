//! `ADD NODE n 'mysql://...' [WEIGHT w] [REBALANCE]` and `REMOVE NODE n`. With a metadata
//! schema the node's row goes there (`shard_nodes`), so every proxy learns of the node before
//! any slot map names it; without one, the rules file is edited. `REBALANCE` queues the
//! moves that give the new node its share (`super::rebalance`). `REMOVE NODE` is refused
//! while anything still names the node: slots, directory entries or keys its lookup table
//! places there, a single or range or tier table, the default node, a move or plan under way.

use std::path::Path;

use super::meta::failed;
use super::words::{unsupported, Answer};
use crate::backend::MyError;
use crate::config::{TableRule, Topology};
use crate::metadata::NodeRow;
use crate::shared::{Reload, Shared};

/// `ADD NODE n 'url' [WEIGHT w] [REBALANCE]` (`w` as written, `up` upper-cased).
pub async fn add(
    shared: &Shared,
    t: &Topology,
    w: &[String],
    up: &[String],
    rules: Option<&Path>,
) -> Result<Answer, MyError> {
    let usage = || unsupported("usage: ADD NODE n 'mysql://...' [WEIGHT w] [REBALANCE]");
    let name = w.get(2).ok_or_else(usage)?.clone();
    let url = w.get(3).ok_or_else(usage)?.clone();
    if t.node_index(&name).is_some_and(|i| !t.nodes[i].retired) {
        return Err(unsupported(format!("node `{name}` exists already")));
    }
    // `${NAME}` is the rules file's own: from the admin interface it would send the
    // proxy's environment to whatever host the URL names.
    if url.contains("${") {
        return Err(unsupported(
            "ADD NODE takes a URL as it is: `${NAME}` (an environment variable) is read only where ops write it in the rules file",
        ));
    }
    let mut weight: Option<u32> = None;
    let mut then_rebalance = false;
    let mut i = 4;
    while let Some(word) = up.get(i) {
        match word.as_str() {
            "WEIGHT" => {
                weight = Some(
                    w.get(i + 1)
                        .and_then(|v| v.parse::<u32>().ok())
                        .ok_or_else(|| unsupported("WEIGHT takes a whole number from 0"))?,
                );
                i += 2;
            }
            "REBALANCE" => {
                then_rebalance = true;
                i += 1;
            }
            _ => return Err(usage()),
        }
    }
    let path = rules.ok_or_else(|| unsupported("this proxy was not started from a rules file"))?;
    let row = NodeRow {
        name: name.clone(),
        url: url.clone(),
        weight,
        removed: false,
    };
    let added = match t.metadata.as_ref() {
        Some(meta) => through_metadata(shared, &meta.url, path, row).await?,
        None => {
            if then_rebalance {
                return Err(unsupported(
                    "a rebalance runs as slot migrations, which need a [metadata] schema",
                ));
            }
            return super::rules_file::edit(shared, path, |doc| {
                doc["nodes"][name.as_str()] = match weight {
                    None => toml_edit::value(url.clone()),
                    Some(wt) => {
                        let mut node = toml_edit::InlineTable::new();
                        node.insert("url", url.as_str().into());
                        node.insert("weight", i64::from(wt).into());
                        toml_edit::value(node)
                    }
                };
            });
        }
    };
    if !then_rebalance {
        return Ok(Answer::Done(added));
    }
    let now = shared.topology();
    match super::rebalance::for_added(shared, &now, &name).await? {
        Answer::Done(queued) => Ok(Answer::Done(format!("{added}; {queued}"))),
        rows => Ok(rows),
    }
}

/// A node's row written to the metadata once the rules it makes are valid, then loaded here.
async fn through_metadata(
    shared: &Shared,
    meta_url: &str,
    path: &Path,
    row: NodeRow,
) -> Result<String, MyError> {
    let pool = mysql_async::Pool::new(mysql_async::Opts::from_url(meta_url).map_err(failed)?);
    let checked = async {
        crate::metadata::create_schema(&pool)
            .await
            .map_err(failed)?;
        let mut rows = crate::metadata::read(&pool).await.map_err(failed)?;
        rows.nodes.retain(|n| n.name != row.name);
        rows.nodes.push(row.clone());
        super::rules_file::check_merged(path, &rows)
    }
    .await;
    if let Err(e) = checked {
        pool.disconnect().await.ok();
        return Err(e);
    }
    let running = shared.topology().version;
    let version = crate::metadata::write_node(meta_url, &row, running)
        .await
        .map_err(failed)?;
    let origin = crate::config::masked_url(meta_url);
    let outcome = super::watch::poll_once(shared, &pool, path, &origin).await;
    pool.disconnect().await.ok();
    let verb = if row.removed { "removed" } else { "added" };
    match outcome {
        Ok(Some(Reload::Applied { to, .. })) => Ok(format!(
            "node `{}` {verb}: metadata version {to} written and applied",
            row.name
        )),
        Ok(Some(Reload::Refused(reason))) => Err(MyError::new(1105, reason)),
        Ok(_) => Ok(format!(
            "node `{}` {verb}: metadata version {version} written",
            row.name
        )),
        Err(e) => Err(MyError::new(1105, e)),
    }
}

/// What still names node `n`: one phrase each.
async fn holdings(t: &Topology, n: usize) -> Vec<String> {
    let mut names: Vec<&String> = t.tables.keys().collect();
    names.sort();
    let mut held = Vec::new();
    if t.default_node == n {
        held.push("it is the rules' default_node".to_string());
    }
    for name in names {
        let Some(rule) = t.table(name) else { continue };
        match rule {
            TableRule::Broadcast => {}
            TableRule::HashSlot { map, .. } => {
                let slots = (0..crate::routing::slot::SLOTS as u16)
                    .filter(|s| {
                        map.owner_of_slot(*s) == n || map.moving(*s).is_some_and(|m| m.to == n)
                    })
                    .count();
                if slots > 0 {
                    held.push(format!("{slots} slots of `{name}`"));
                }
                let keys = map.split_keys().values().filter(|x| **x == n).count()
                    + map
                        .key_moves()
                        .iter()
                        .filter(|m| m.from == n || m.to == n)
                        .count();
                if keys > 0 {
                    held.push(format!("{keys} keys of `{name}` split out of their slots"));
                }
                let salted = map.salted().values().filter(|b| b.0.contains(&n)).count();
                if salted > 0 {
                    held.push(format!(
                        "buckets of {salted} salted keys of `{name}` (DRAIN NODE moves them)"
                    ));
                }
            }
            TableRule::Directory(d) => {
                let entries = d.entries.values().filter(|x| **x == n).count();
                if entries > 0 {
                    held.push(format!("{entries} directory keys of `{name}`"));
                }
                if d.fallback.all_nodes(t).contains(&n) {
                    held.push(format!("the fallback of `{name}`"));
                }
                if let Some(l) = &d.lookup {
                    if l.node == n {
                        held.push(format!("the lookup table of `{name}`"));
                    }
                    match super::rebalance::placed_by_lookup(t, d, n).await {
                        Ok(k) if k.is_empty() => {}
                        Ok(k) => {
                            held.push(format!("{} keys of `{name}` in its lookup table", k.len()))
                        }
                        Err(e) => held.push(format!(
                            "perhaps keys of `{name}` (its lookup table could not be read: {e})"
                        )),
                    }
                }
            }
            other => {
                if other.all_nodes(t).contains(&n) {
                    held.push(format!("`{name}` ({})", other.kind()));
                }
            }
        }
    }
    held
}

/// `REMOVE NODE n`.
pub async fn remove(
    shared: &Shared,
    t: &Topology,
    w: &[String],
    rules: Option<&Path>,
) -> Result<Answer, MyError> {
    let name = w
        .get(2)
        .ok_or_else(|| unsupported("usage: REMOVE NODE n"))?
        .clone();
    let Some(n) = t.node_index(&name).filter(|i| !t.nodes[*i].retired) else {
        return Err(unsupported(format!("unknown node `{name}`")));
    };
    let held = holdings(t, n).await;
    if !held.is_empty() {
        return Err(unsupported(format!(
            "node `{name}` still holds {}: DRAIN NODE {name} first",
            held.join(", ")
        )));
    }
    let path = rules.ok_or_else(|| unsupported("this proxy was not started from a rules file"))?;
    let Some(meta) = t.metadata.as_ref() else {
        return super::rules_file::edit(shared, path, |doc| {
            if let Some(nodes) = doc["nodes"].as_table_like_mut() {
                nodes.remove(&name);
            }
        });
    };
    // A move or plan under way may yet name the node.
    let mut c = super::meta::connect(shared, t, "").await?;
    let active = crate::metadata::migrations::active(&mut c)
        .await
        .map_err(failed)?;
    let plan = crate::metadata::rebalance::current(&mut c)
        .await
        .map_err(failed)?;
    drop(c);
    if let Some(m) = active.iter().find(|m| m.source == name || m.target == name) {
        return Err(unsupported(format!(
            "migration {} moves {} of `{}` from `{}` to `{}`: wait for it (SHOW MIGRATIONS)",
            m.id,
            m.what(),
            m.table,
            m.source,
            m.target
        )));
    }
    if let Some(p) = plan {
        return Err(unsupported(format!(
            "rebalance {} ({}) is {}: wait for it (SHOW REBALANCE)",
            p.id, p.what, p.state
        )));
    }
    let row = NodeRow {
        name,
        url: t.nodes[n].url.clone(),
        weight: None,
        removed: true,
    };
    Ok(Answer::Done(
        through_metadata(shared, &meta.url, path, row).await?,
    ))
}

/// SHOW NODES' rows of node `i`'s replicas: in rotation or why not, replication as last
/// checked, lag (how stale a read there may be), reads sent there.
pub(super) fn replica_rows(shared: &Shared, t: &Topology, i: usize) -> Vec<Vec<String>> {
    let now = std::time::Instant::now();
    let max = std::time::Duration::from_millis(t.replicas.max_lag_ms);
    let urls = t
        .nodes
        .get(i)
        .map(|n| n.replicas.as_slice())
        .unwrap_or_default();
    shared
        .backends
        .replicas(i)
        .iter()
        .zip(urls)
        .map(|(h, r)| {
            let lag = h.lag(now);
            let health = match lag {
                _ if h.usable(now, max) => "up".to_string(),
                Some(l) => format!(
                    "out of rotation: {} ms behind (max_lag_ms {})",
                    l.as_millis(),
                    t.replicas.max_lag_ms
                ),
                None => format!("out of rotation: {}", h.seen().word()),
            };
            vec![
                h.name.clone(),
                crate::config::masked_url(&r.url),
                health,
                format!("replica of {}", t.nodes[i].name),
                h.busy().to_string(),
                String::new(),
                h.error().unwrap_or_default(),
                match h.position() {
                    at if at.is_empty() => h.seen().word().to_string(),
                    at => format!("{} at {at}", h.seen().word()),
                },
                lag.map(|l| l.as_millis().to_string()).unwrap_or_default(),
                h.reads().to_string(),
            ]
        })
        .collect()
}
