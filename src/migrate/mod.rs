//! Live migration of slot ranges between nodes (`MIGRATE SLOTS a-b OF t TO node`).
//!
//! A move goes through steps, each a new version of the slot map in the metadata schema
//! that every proxy applies ([`crate::routing::slot::MoveStep`]): `dual_write` (writes run
//! on the source and their row images go to the target, `crate::exec::dual_write`), the
//! backfill and the verify (run by one proxy, [`copy`]), `read_target`, `freeze` (writes
//! wait a moment), then the target owns the slots and the source's copies are deleted
//! (`cleanup`). [`driver`] runs the steps; a step advances only once every live proxy has
//! applied the one before ([`crate::metadata::migrations`]' heartbeats). The races this must survive, and why it
//! does, are in `docs/design.md`.
//!
//! This proxy's part, its heartbeat (a proxy that cannot write it for its lease is fenced:
//! its writes to moving slots fail rather than go astray) and its counters, is state every
//! session reads: [`crate::shared::migration::Local`].

pub mod balance;
pub mod binlog;
mod capture;
pub mod cli;
pub mod copy;
pub mod driver;
pub mod pace;
pub mod plan_cli;
pub mod queue;
mod step;
pub mod upkeep;

use crate::config::Topology;
use crate::routing::range::{RangeKey, RangeMap};

/// The bounds of range `index` of `map`, if its lowest key is still `lo` (the admin's word
/// for it, `None` for the first range): a move names its range by both.
pub fn range_of(
    map: &RangeMap,
    index: u16,
    lo: Option<&str>,
) -> Option<(Option<RangeKey>, Option<RangeKey>)> {
    let i = usize::from(index);
    if i >= map.len() {
        return None;
    }
    let (a, b) = map.bounds(i);
    let same = match (a, lo) {
        (None, None) => true,
        (Some(a), Some(w)) => map.key_of_word(w).ok().as_ref() == Some(a),
        _ => false,
    };
    same.then(|| (a.cloned(), b.cloned()))
}

/// The node holding buckets `first..=last` of a salted key of a hash_slot table, if the key
/// is salted there: an error if they are on several nodes or already moving.
pub fn buckets_placed(
    topo: &Topology,
    table: &str,
    key: &str,
    first: u16,
    last: u16,
) -> Option<Result<usize, String>> {
    let Some(crate::config::TableRule::HashSlot { map, .. }) = topo.table(table) else {
        return None;
    };
    let owners = map.bucket_owners(key.as_bytes())?;
    let what = format!("buckets {first}-{last} of salted key '{key}' of `{table}`");
    if map
        .salt_moves()
        .iter()
        .any(|m| m.key == key.as_bytes() && m.first <= last && first <= m.last)
    {
        return Some(Err(format!("{what} are already moving")));
    }
    let run = owners.get(usize::from(first)..=usize::from(last));
    Some(match run {
        Some([n, rest @ ..]) if rest.iter().all(|x| x == n) => Ok(*n),
        Some(_) => Err(format!("{what} are on several nodes")),
        None => Err(format!("{what}: no such buckets")),
    })
}

/// The node that holds a directory table's `key` now: its entry, the lookup table's row
/// (read from the lookup table's node), or the fallback rule's node; a hash_slot table's:
/// the key's own node if it was split out of its slot, else its slot's. A key already
/// moving, or in a slot being moved, is an error.
pub async fn placed(topo: &Topology, table: &str, key: &str) -> Result<usize, String> {
    use crate::config::TableRule;
    use crate::routing::directory::Placed;
    let d = match topo.table(table) {
        Some(TableRule::Directory(d)) => d,
        Some(TableRule::HashSlot { map, .. }) => {
            if map.key_moves().iter().any(|m| m.key == key.as_bytes()) {
                return Err(format!("key '{key}' of `{table}` is already moving"));
            }
            let slot = crate::routing::slot::slot_of_text(key.as_bytes());
            if map.split_node(key.as_bytes()).is_none() && map.moving(slot).is_some() {
                return Err(format!(
                    "key '{key}' of `{table}` is in slot {slot}, which is being moved (SHOW MIGRATIONS)"
                ));
            }
            return match map.place_text(key.as_bytes()) {
                crate::routing::slot::Place::One(n, _) => Ok(n),
                crate::routing::slot::Place::Salted(..) => Err(format!(
                    "key '{key}' of `{table}` is salted: its rows are spread over buckets on several nodes"
                )),
            };
        }
        _ => {
            return Err(format!(
                "`{table}` is neither a directory nor a hash_slot table"
            ))
        }
    };
    if d.moves.iter().any(|m| m.key == key.as_bytes()) {
        return Err(format!("key '{key}' of `{table}` is already moving"));
    }
    let v = mysql_common::value::Value::Bytes(key.as_bytes().to_vec());
    let mut read = None;
    if let (Some(l), None) = (&d.lookup, d.entries.get(key.as_bytes())) {
        let opts = topo.nodes[l.node].opts.clone();
        let mut c = mysql_async::Conn::new(opts)
            .await
            .map_err(|e| format!("the lookup table's node: {e}"))?;
        let rows: Vec<(Vec<u8>, String)> =
            mysql_async::prelude::Queryable::query(&mut c, l.query(&[key.as_bytes().to_vec()]))
                .await
                .map_err(|e| format!("the lookup table: {e}"))?;
        let _ = c.disconnect().await;
        read = Some(match rows.first() {
            Some((_, node)) => Some(topo.node_index(node).ok_or_else(|| {
                format!("the lookup table names node `{node}`, not in the rules")
            })?),
            None => None,
        });
    }
    let looked = |_: &[u8]| read;
    match d.place(&v, &looked) {
        Placed::Node(n) => Ok(n),
        Placed::Unknown => Err(format!(
            "key '{key}' of `{table}`: the lookup table could not be read"
        )),
        Placed::Fallback => match d.fallback.as_ref() {
            TableRule::HashSlot { map, .. } => crate::routing::slot::slot_of(&v)
                .map(|s| map.owner_of_slot(s))
                .ok_or_else(|| "a NULL key".to_string()),
            TableRule::Single { node } => Ok(*node),
            TableRule::Range { map, .. } => map
                .kind
                .key_of(&v)
                .map(|k| map.node_of(&k))
                .ok_or_else(|| format!("key '{key}' is not in the fallback's ranges' domain")),
            other => Err(format!("a {} fallback", other.kind())),
        },
    }
}
