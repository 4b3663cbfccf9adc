//! Lookup: directory keys the lookup cache lacks are read from their tables' lookup tables
//! (on a connection of their own, outside the session's transaction) into the cache, before
//! the statement is planned again. A failure fails the statement: a row's node is never
//! guessed.

use std::collections::HashMap;

use mysql_common::value::Value;

use super::door::Door;
use crate::config::{TableRule, Topology};
use crate::error::MyError;

/// Entries read for one table: key -> node (`None`: not in the lookup table).
pub type Entries = Vec<(Vec<u8>, Option<usize>)>;

/// Reads these `(table, key)` entries; returns them by table, for the caller to cache.
pub async fn read<D: Door>(
    door: &mut D,
    topo: &Topology,
    mut keys: Vec<(String, Vec<u8>)>,
) -> Result<Vec<(String, Entries)>, MyError> {
    keys.sort();
    keys.dedup();
    let mut by_table: Vec<(String, Vec<Vec<u8>>)> = Vec::new();
    for (t, k) in keys {
        match by_table.last_mut() {
            Some((lt, ks)) if *lt == t => ks.push(k),
            _ => by_table.push((t, vec![k])),
        }
    }
    let mut out = Vec::new();
    for (table, keys) in by_table {
        let Some(TableRule::Directory(d)) = topo.table(&table) else {
            continue;
        };
        let Some(l) = &d.lookup else { continue };
        let name = door.name(l.node);
        let rows = door
            .fetch_outside(l.node, &l.query(&keys))
            .await
            .map_err(|e| {
                MyError::internal(format!(
                    "shardproxy: the lookup table `{}` of `{table}` on `{name}` cannot be read, so the row's node is unknown: {}",
                    l.table, e.error.message
                ))
            })?;
        let mut found: HashMap<Vec<u8>, usize> = HashMap::new();
        for row in rows {
            let key = match row.first() {
                Some(Value::Bytes(b)) => b.clone(),
                Some(v @ (Value::Int(_) | Value::UInt(_))) => {
                    crate::value::text_form(v).unwrap_or_default()
                }
                _ => continue,
            };
            let node_name = match row.get(1) {
                Some(Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
                _ => {
                    return Err(MyError::internal(format!(
                    "shardproxy: the lookup table `{}` of `{table}` has no node name for key {}",
                    l.table,
                    String::from_utf8_lossy(&key)
                )))
                }
            };
            let node = topo
                .node_index(&node_name)
                .filter(|n| !topo.nodes[*n].retired);
            let Some(node) = node else {
                return Err(MyError::internal(format!(
                    "shardproxy: the lookup table `{}` of `{table}` sends key {} to `{node_name}`, which is not a node in service",
                    l.table,
                    String::from_utf8_lossy(&key)
                )));
            };
            found.insert(key, node);
        }
        door.count_lookups("read", keys.len() as u64);
        let entries: Entries = keys
            .into_iter()
            .map(|k| {
                let n = found.get(&k).copied();
                (k, n)
            })
            .collect();
        out.push((table, entries));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::fake::{Canned, FakeDoor};
    use crate::plan::rules_tests::topo;

    #[tokio::test]
    async fn entries_are_read_outside_the_session_and_absent_keys_remembered() {
        let t = topo();
        let mut door = FakeDoor::new(3);
        door.answer(
            0,
            "tenant_dir",
            Canned::rows(&["tenant_id", "node"], &[&["7", "ds1"]]),
        );
        let keys = vec![
            ("t_looked".to_string(), b"7".to_vec()),
            ("t_looked".to_string(), b"8".to_vec()),
        ];
        let found = read(&mut door, &t, keys).await.unwrap();
        assert_eq!(
            found,
            vec![(
                "t_looked".to_string(),
                vec![(b"7".to_vec(), Some(1)), (b"8".to_vec(), None)]
            )]
        );
        assert!(door.log().is_empty(), "not on the session's connections");
        assert_eq!(door.outside.len(), 1);
        assert!(
            door.outside[0].1.contains("IN ('7', '8')"),
            "{}",
            door.outside[0].1
        );
    }

    #[tokio::test]
    async fn an_unreadable_lookup_table_or_an_unknown_node_fails_the_statement() {
        let t = topo();
        let keys = vec![("t_looked".to_string(), b"7".to_vec())];
        let mut door = FakeDoor::new(3);
        door.fail_on(
            0,
            "tenant_dir",
            1146,
            "Table 'shop.tenant_dir' doesn't exist",
        );
        let e = read(&mut door, &t, keys.clone()).await.unwrap_err();
        assert!(e.message.contains("cannot be read"), "{}", e.message);
        let mut door = FakeDoor::new(3);
        door.answer(
            0,
            "tenant_dir",
            Canned::rows(&["tenant_id", "node"], &[&["7", "ds9"]]),
        );
        let e = read(&mut door, &t, keys).await.unwrap_err();
        assert!(e.message.contains("not a node in service"), "{}", e.message);
    }
}
