//! The shared metadata source: table rules (`route_config`) and slot maps (`shard_slot_map`,
//! one row per slot) as rows in a MySQL schema that several proxies poll. Their highest row
//! version is the rules version; a newer one is merged over the rules file's own tables,
//! validated like a file, and offered like any reload (`crate::admin::watch`), so proxies
//! converge within one poll. The schema's other tables, the migrations and the proxies'
//! heartbeats: [`migrations`].

pub mod indexes;
pub mod lease;
pub mod link;
pub mod load;
pub mod migrations;
pub mod ranges;
pub mod rebalance;
pub mod salted;
pub mod schema;
pub mod views;

use self::schema::VERSION_SQL;
pub use self::schema::{lock_versions, unlock_versions};

use mysql_async::prelude::Queryable;
use mysql_async::{Pool, TxOpts};

use crate::config::{TableRule, Topology};
use crate::routing::slot::SLOTS;

/// A `route_config` row: table, rule, column, node.
pub type RuleRow = (String, String, Option<String>, Option<String>);

/// Everything the schema holds.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Rows {
    pub version: u64,
    pub rules: Vec<RuleRow>,
    pub slots: Vec<SlotRow>,
    /// `directory_map` rows: a directory table's key placed on a node (an entry), or moving.
    pub keys: Vec<KeyRow>,
    /// `shard_nodes` rows: nodes added (or removed) through the admin interface.
    pub nodes: Vec<NodeRow>,
    /// `salted_map` rows: the buckets of salted keys.
    pub salted: Vec<salted::SaltRow>,
    /// `range_map` rows: range tables' ranges.
    pub ranges: Vec<ranges::RangeRow>,
    /// `shard_indexes` rows: global secondary indexes.
    pub indexes: Vec<indexes::IndexRow>,
}

/// A `shard_nodes` row: a node over the rules files' own of that name, or its removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    pub name: String,
    pub url: String,
    pub weight: Option<u32>,
    pub removed: bool,
}

/// A `directory_map` row: a key's node and, while it moves, where to and at which step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRow {
    pub table: String,
    pub key: String,
    pub node: String,
    pub state: String,
    pub target: Option<String>,
}

/// A `shard_slot_map` row: the slot's owner of record and, while it moves, where to and at
/// which step (`state`: `stable`, or a [`crate::routing::slot::MoveStep`]'s name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRow {
    pub table: String,
    pub slot: u16,
    pub node: String,
    pub state: String,
    pub target: Option<String>,
}

/// Versions stay below this (BIGINT's largest), so the next one can always be written and
/// compared: a row claiming more is refused, never wrapped.
pub const MAX_VERSION: u64 = i64::MAX as u64;

pub async fn version(pool: &Pool) -> mysql_async::Result<u64> {
    let mut c = pool.get_conn().await?;
    let v: Option<Option<u64>> = c.query_first(VERSION_SQL).await?;
    Ok(v.flatten().unwrap_or(0))
}

pub async fn read(pool: &Pool) -> mysql_async::Result<Rows> {
    let mut c = pool.get_conn().await?;
    let mut tx = c.start_transaction(TxOpts::default()).await?;
    let rules: Vec<(RuleRow, u64)> = tx
        .query_map(
            "SELECT table_name, rule, column_name, node, version FROM route_config",
            |(t, r, c, n, v)| ((t, r, c, n), v),
        )
        .await?;
    let slots: Vec<(String, u16, String, String, Option<String>, u64)> = tx
        .query("SELECT table_name, slot_id, node, state, target_node, version FROM shard_slot_map ORDER BY table_name, slot_id")
        .await?;
    let keys: Vec<(String, String, String, String, Option<String>, u64)> = tx
        .query("SELECT table_name, key_value, node, state, target_node, version FROM directory_map ORDER BY table_name, key_value")
        .await?;
    let nodes: Vec<(String, String, Option<u32>, i64, u64)> = tx
        .query("SELECT name, url, weight, removed, version FROM shard_nodes ORDER BY name")
        .await?;
    let (salted, salted_version) = salted::read(&mut tx).await?;
    let (ranges, ranges_version) = ranges::read(&mut tx).await?;
    let (index_rows, indexes_version) = indexes::read(&mut tx).await?;
    tx.commit().await?;
    let version = rules
        .iter()
        .map(|r| r.1)
        .chain(slots.iter().map(|s| s.5))
        .chain(keys.iter().map(|k| k.5))
        .chain(nodes.iter().map(|n| n.4))
        .chain([salted_version, ranges_version, indexes_version])
        .max()
        .unwrap_or(0);
    Ok(Rows {
        version,
        rules: rules.into_iter().map(|(r, _)| r).collect(),
        slots: slots
            .into_iter()
            .map(|(table, slot, node, state, target, _)| SlotRow {
                table,
                slot,
                node,
                state,
                target,
            })
            .collect(),
        keys: keys
            .into_iter()
            .map(|(table, key, node, state, target, _)| KeyRow {
                table,
                key,
                node,
                state,
                target,
            })
            .collect(),
        nodes: nodes
            .into_iter()
            .map(|(name, url, weight, removed, _)| NodeRow {
                name,
                url,
                weight,
                removed: removed != 0,
            })
            .collect(),
        salted,
        ranges,
        indexes: index_rows,
    })
}

/// The rules file with the metadata's tables over its own and the metadata's version.
pub fn merge_into(file_text: &str, rows: &Rows) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = file_text
        .parse()
        .map_err(|e| format!("invalid TOML: {e}"))?;
    doc["version"] = toml_edit::value(i64::try_from(rows.version).unwrap_or(i64::MAX));
    if doc.get("tables").is_none() {
        doc["tables"] = toml_edit::table();
    }
    if !rows.nodes.is_empty() && doc.get("nodes").is_none() {
        doc["nodes"] = toml_edit::table();
    }
    for n in &rows.nodes {
        let Some(nodes) = doc["nodes"].as_table_like_mut() else {
            return Err("the rules file's `nodes` is not a table".into());
        };
        if n.removed {
            nodes.remove(&n.name);
            continue;
        }
        // The replicas the file gives the node stay its own (the metadata has no word on
        // them: a drain's weight must not drop them).
        let replicas = nodes
            .get(&n.name)
            .and_then(|i| i.as_table_like())
            .and_then(|t| t.get("replicas"))
            .and_then(|r| r.as_value())
            .cloned();
        let item = match (n.weight, replicas) {
            (None, None) => toml_edit::value(n.url.as_str()),
            (w, replicas) => {
                let mut it = toml_edit::InlineTable::new();
                it.insert("url", n.url.as_str().into());
                if let Some(w) = w {
                    it.insert("weight", i64::from(w).into());
                }
                if let Some(r) = replicas {
                    it.insert("replicas", r);
                }
                toml_edit::value(it)
            }
        };
        nodes.insert(&n.name, item);
    }
    for (table, rule, column, node) in &rows.rules {
        let mut t = toml_edit::Table::new();
        t.insert("rule", toml_edit::value(rule.as_str()));
        if let Some(c) = column {
            t.insert("column", toml_edit::value(c.as_str()));
        }
        if let Some(n) = node {
            t.insert("node", toml_edit::value(n.as_str()));
        }
        if rule == "hash_slot" {
            // Slot rows in order, compressed to ranges; validation catches gaps and overlaps.
            let mut slots = toml_edit::Array::new();
            let mine: Vec<&SlotRow> = rows.slots.iter().filter(|s| &s.table == table).collect();
            let same = |a: &SlotRow, b: &SlotRow| {
                a.node == b.node && a.state == b.state && a.target == b.target
            };
            let mut i = 0;
            while i < mine.len() {
                let mut j = i;
                while j + 1 < mine.len()
                    && mine[j + 1].slot == mine[j].slot + 1
                    && same(mine[j + 1], mine[i])
                {
                    j += 1;
                }
                let mut it = toml_edit::InlineTable::new();
                it.insert("slots", format!("{}-{}", mine[i].slot, mine[j].slot).into());
                it.insert("node", mine[i].node.as_str().into());
                if let (Some(to), false) = (&mine[i].target, mine[i].state == "stable") {
                    it.insert("to", to.as_str().into());
                    it.insert("step", mine[i].state.as_str().into());
                }
                slots.push(it);
                i = j + 1;
            }
            t.insert("slots", toml_edit::value(slots));
        }
        // Over the file's own section of the same rule: its other keys (a key_generator)
        // stay; a section of another rule is replaced whole.
        let same_rule = doc["tables"]
            .get(table.as_str())
            .and_then(|x| x.get("rule"))
            .and_then(|r| r.as_str())
            == Some(rule.as_str());
        match doc["tables"]
            .get_mut(table.as_str())
            .and_then(toml_edit::Item::as_table_like_mut)
        {
            Some(old) if same_rule => {
                for (k, v) in t.iter() {
                    old.insert(k, v.clone());
                }
            }
            _ => doc["tables"][table.as_str()] = toml_edit::Item::Table(t),
        }
    }
    // Directory keys: an entry each, or a move; over the file's own directory tables.
    for k in &rows.keys {
        let Some(t) = doc["tables"]
            .get_mut(k.table.as_str())
            .and_then(toml_edit::Item::as_table_like_mut)
        else {
            return Err(format!(
                "metadata places key '{}' of `{}`, which is not a directory table of the rules",
                k.key, k.table
            ));
        };
        match (&k.target, k.state.as_str()) {
            (Some(to), state) if state != "stable" => {
                let mut it = toml_edit::InlineTable::new();
                it.insert("key", k.key.as_str().into());
                it.insert("node", k.node.as_str().into());
                it.insert("to", to.as_str().into());
                it.insert("step", state.into());
                if t.get("moving").is_none() {
                    t.insert("moving", toml_edit::value(toml_edit::Array::new()));
                }
                if let Some(a) = t.get_mut("moving").and_then(|m| m.as_array_mut()) {
                    a.push(it);
                }
            }
            _ => {
                if t.get("entries").is_none() {
                    t.insert("entries", toml_edit::value(toml_edit::InlineTable::new()));
                }
                if let Some(e) = t.get_mut("entries").and_then(|e| e.as_inline_table_mut()) {
                    e.insert(k.key.as_str(), k.node.as_str().into());
                }
            }
        }
    }
    salted::merge(&mut doc, &rows.salted)?;
    ranges::merge(&mut doc, &rows.ranges)?;
    indexes::merge(&mut doc, &rows.indexes)?;
    Ok(doc.to_string())
}

pub async fn create_schema(pool: &Pool) -> mysql_async::Result<()> {
    let mut c = pool.get_conn().await?;
    ensure_schema(&mut c).await
}

/// Creates the schema's tables, and the columns an older schema lacks.
pub async fn ensure_schema<C: Queryable>(c: &mut C) -> mysql_async::Result<()> {
    let views = [schema::VIEWS, schema::LOAD];
    for ddl in schema::RULES
        .iter()
        .chain(schema::MIGRATIONS.iter())
        .chain(views.iter())
    {
        c.query_drop(*ddl).await?;
    }
    for (table, column, definition) in schema::ADDED_COLUMNS {
        let has: Option<u64> = c
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() \
                 AND TABLE_NAME = ? AND COLUMN_NAME = ?",
                (table, column),
            )
            .await?;
        if has == Some(0) {
            // Names and definitions are this file's constants, not input.
            let added = c
                .query_drop(format!(
                    "ALTER TABLE {table} ADD COLUMN {column} {definition}"
                ))
                .await;
            match added {
                // Another proxy added it meanwhile (1060: duplicate column name).
                Err(mysql_async::Error::Server(e)) if e.code == 1060 => {}
                other => other?,
            }
        }
    }
    Ok(())
}

/// Writes a table's slot map as one new version of the metadata, in one transaction: the
/// version above both the metadata's and `floor` (the running rules'), returned. With
/// `missing_only`, nothing is written (`None`) when the metadata has the table's slots
/// already (looked at under the version lock, so a move's rows are never written over).
pub async fn write_slots(
    url: &str,
    table: &str,
    column: &str,
    owners: &[String],
    floor: u64,
    missing_only: bool,
) -> mysql_async::Result<Option<u64>> {
    let pool = Pool::new(mysql_async::Opts::from_url(url)?);
    create_schema(&pool).await?;
    let mut c = pool.get_conn().await?;
    lock_versions(&mut c).await?;
    let r = async {
        if missing_only {
            let n: Option<u64> = c
                .exec_first(
                    "SELECT COUNT(*) FROM shard_slot_map WHERE table_name = ?",
                    (table,),
                )
                .await?;
            if n.unwrap_or(0) == SLOTS as u64 {
                return Ok(None);
            }
        }
        let now: Option<Option<u64>> = c.query_first(VERSION_SQL).await?;
        let version = now.flatten().unwrap_or(0).max(floor) + 1;
        slots_in_one_version(&mut c, table, column, owners, version).await?;
        Ok(Some(version))
    }
    .await;
    unlock_versions(&mut c).await;
    drop(c);
    pool.disconnect().await?;
    r
}

async fn slots_in_one_version(
    c: &mut mysql_async::Conn,
    table: &str,
    column: &str,
    owners: &[String],
    version: u64,
) -> mysql_async::Result<()> {
    let mut tx = c.start_transaction(TxOpts::default()).await?;
    tx.exec_drop(
        "INSERT INTO route_config (table_name, rule, column_name, node, version) VALUES (?, 'hash_slot', ?, NULL, ?) \
         ON DUPLICATE KEY UPDATE rule = 'hash_slot', column_name = VALUES(column_name), node = NULL, version = VALUES(version)",
        (table, column, version),
    )
    .await?;
    tx.exec_drop("DELETE FROM shard_slot_map WHERE table_name = ?", (table,))
        .await?;
    for chunk in owners.iter().enumerate().collect::<Vec<_>>().chunks(256) {
        let values: Vec<String> = chunk
            .iter()
            .map(|(slot, node)| {
                format!(
                    "({}, {slot}, {}, 'stable', NULL, {version})",
                    crate::sql::write::text_literal(table),
                    crate::sql::write::text_literal(node)
                )
            })
            .collect();
        tx.query_drop(format!(
            "INSERT INTO shard_slot_map (table_name, slot_id, node, state, target_node, version) VALUES {}",
            values.join(", ")
        ))
        .await?;
    }
    tx.commit().await
}

/// Writes a node's row (added, or `removed`) as one new version of the metadata, above its
/// own and `floor` (the running rules'); the version.
pub async fn write_node(url: &str, node: &NodeRow, floor: u64) -> mysql_async::Result<u64> {
    let pool = Pool::new(mysql_async::Opts::from_url(url)?);
    let mut c = pool.get_conn().await?;
    ensure_schema(&mut c).await?;
    lock_versions(&mut c).await?;
    let r = async {
        let now: Option<Option<u64>> = c.query_first(VERSION_SQL).await?;
        let version = now.flatten().unwrap_or(0).max(floor) + 1;
        c.exec_drop(
            "INSERT INTO shard_nodes (name, url, weight, removed, version) VALUES (?, ?, ?, ?, ?) \
             ON DUPLICATE KEY UPDATE url = VALUES(url), weight = VALUES(weight), \
             removed = VALUES(removed), version = VALUES(version)",
            (&node.name, &node.url, node.weight, node.removed, version),
        )
        .await?;
        Ok(version)
    }
    .await;
    unlock_versions(&mut c).await;
    drop(c);
    pool.disconnect().await?;
    r
}

/// Writes an index's row (`definition` `None`: dropped) as one new version above the
/// metadata's and `floor`, with its index table's rule and slots (`owners`, a node name per
/// slot) when given, or without them when dropped; the version.
pub async fn write_index(
    url: &str,
    row: &indexes::IndexRow,
    index_table: &str,
    owners: Option<&[String]>,
    floor: u64,
) -> mysql_async::Result<u64> {
    let pool = mysql_async::Pool::new(mysql_async::Opts::from_url(url)?);
    let mut c = pool.get_conn().await?;
    ensure_schema(&mut c).await?;
    lock_versions(&mut c).await?;
    let r = async {
        let now: Option<Option<u64>> = c.query_first(VERSION_SQL).await?;
        let version = now.flatten().unwrap_or(0).max(floor) + 1;
        if let Some(owners) = owners {
            slots_in_one_version(&mut c, index_table, crate::config::indexes::HASH_COLUMN, owners, version)
                .await?;
        }
        c.exec_drop(
            "INSERT INTO shard_indexes (table_name, index_name, definition, version) VALUES (?, ?, ?, ?) \
             ON DUPLICATE KEY UPDATE definition = VALUES(definition), version = VALUES(version)",
            (&row.table, &row.name, &row.definition, version),
        )
        .await?;
        if row.definition.is_none() {
            c.exec_drop("DELETE FROM shard_slot_map WHERE table_name = ?", (index_table,))
                .await?;
            c.exec_drop("DELETE FROM route_config WHERE table_name = ?", (index_table,))
                .await?;
        }
        Ok(version)
    }
    .await;
    unlock_versions(&mut c).await;
    drop(c);
    pool.disconnect().await?;
    r
}

/// Slot owners of a hash_slot table by node name, with `a..=b` moved to `target`.
pub fn owners_with(
    t: &Topology,
    rule: &TableRule,
    a: usize,
    b: usize,
    target: usize,
) -> Vec<String> {
    let TableRule::HashSlot { map, .. } = rule else {
        return Vec::new();
    };
    (0..SLOTS)
        .map(|s| {
            let n = if (a..=b).contains(&s) {
                target
            } else {
                map.owner_of_slot(s as u16)
            };
            t.node_name(n).to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_merge_over_the_file_tables() {
        let file = "version = 3\n[tables.t_keep]\nrule = \"broadcast\"\n";
        let row = |slot: u16, node: &str| SlotRow {
            table: "t".into(),
            slot,
            node: node.into(),
            state: "stable".into(),
            target: None,
        };
        let mut slots: Vec<SlotRow> = (0..512).map(|s| row(s, "ds0")).collect();
        slots.extend((512..1024).map(|s| row(s, "ds1")));
        let rows = Rows {
            version: 9,
            rules: vec![("t".into(), "hash_slot".into(), Some("id".into()), None)],
            slots,
            keys: vec![],
            nodes: vec![],
            salted: vec![],
            ranges: vec![],
            indexes: vec![],
        };
        let out = merge_into(file, &rows).unwrap();
        assert!(out.contains("version = 9"), "{out}");
        // A section of the same rule keeps its other keys; another rule's is replaced.
        let file2 = "version = 3\n[tables.t]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
             slots = [{ slots = \"0-1023\", node = \"ds0\" }]\n\
             key_generator = { column = \"oid\", kind = \"snowflake\" }\n";
        let kept = merge_into(file2, &rows).unwrap();
        assert!(kept.contains("key_generator"), "{kept}");
        assert!(kept.contains("\"512-1023\", node = \"ds1\""), "{kept}");
        let file3 = "version = 3\n[tables.t]\nrule = \"single\"\nnode = \"ds0\"\n";
        let replaced = merge_into(file3, &rows).unwrap();
        assert!(!replaced.contains("\"single\""), "{replaced}");
        assert!(out.contains("[tables.t_keep]"), "{out}");
        assert!(
            out.contains(
                "{ slots = \"0-511\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds1\" }"
            ),
            "{out}"
        );
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;

    #[test]
    fn node_rows_add_weigh_and_remove_nodes_over_the_files() {
        let file = "version = 1\ndefault_node = \"ds0\"\n[server]\nlisten = \"127.0.0.1:3307\"\n\
             users = [{ name = \"app\", password = \"app\" }]\n[nodes]\n\
             ds0 = \"mysql://root:root@127.0.0.1:3311/shop\"\nds1 = \"mysql://root:root@127.0.0.1:3312/shop\"\n";
        let node = |name: &str, weight: Option<u32>, removed: bool| NodeRow {
            name: name.into(),
            url: "mysql://root:root@127.0.0.1:3313/shop".into(),
            weight,
            removed,
        };
        let rows = Rows {
            version: 4,
            nodes: vec![node("ds2", Some(3), false), node("ds1", None, true)],
            ..Default::default()
        };
        let merged = merge_into(file, &rows).unwrap();
        let t = crate::config::parse(&merged, "merged").unwrap_or_else(|e| panic!("{e}\n{merged}"));
        let names: Vec<(&str, u32)> = t
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.weight))
            .collect();
        assert_eq!(names, vec![("ds0", 1), ("ds2", 3)], "{merged}");
        // A node's replicas in the file stay when a row weighs it (a drain).
        let file = file.replace(
            "ds0 = \"mysql://root:root@127.0.0.1:3311/shop\"",
            "ds0 = { url = \"mysql://root:root@127.0.0.1:3311/shop\", replicas = [\"mysql://root:root@127.0.0.1:3321/shop\"] }",
        );
        let rows = Rows {
            version: 5,
            nodes: vec![node("ds0", Some(0), false)],
            ..Default::default()
        };
        let merged = merge_into(&file, &rows).unwrap();
        let t = crate::config::parse(&merged, "merged").unwrap_or_else(|e| panic!("{e}\n{merged}"));
        assert_eq!(
            (t.nodes[0].weight, t.nodes[0].replicas.len()),
            (0, 1),
            "{merged}"
        );
    }

    #[test]
    fn directory_keys_merge_as_entries_and_moves() {
        let file = "version = 1\ndefault_node = \"ds0\"\n[server]\nlisten = \"127.0.0.1:3307\"\n\
             users = [{ name = \"app\", password = \"app\" }]\n[nodes]\n\
             ds0 = \"mysql://root:root@127.0.0.1:3311/shop\"\nds1 = \"mysql://root:root@127.0.0.1:3312/shop\"\n\
             ds2 = \"mysql://root:root@127.0.0.1:3313/shop\"\n\
             [tables.t_ten]\nrule = \"directory\"\ncolumn = \"tenant_id\"\nentries = { \"7\" = \"ds1\" }\n\
             fallback = { rule = \"hash_slot\", slots = [{ slots = \"0-511\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds1\" }] }\n";
        let key = |state: &str, target: Option<&str>| KeyRow {
            table: "t_ten".into(),
            key: "42".into(),
            node: "ds0".into(),
            state: state.into(),
            target: target.map(str::to_string),
        };
        let rows = Rows {
            version: 5,
            keys: vec![key("dual_write", Some("ds2"))],
            ..Default::default()
        };
        let merged = merge_into(file, &rows).unwrap();
        let t = crate::config::parse(&merged, "merged").unwrap_or_else(|e| panic!("{e}\n{merged}"));
        let Some(crate::config::TableRule::Directory(d)) = t.table("t_ten") else {
            panic!("no directory")
        };
        assert_eq!(d.moves.len(), 1, "{merged}");
        assert_eq!(t.version, 5);
        let rows = Rows {
            version: 6,
            keys: vec![KeyRow {
                node: "ds2".into(),
                ..key("stable", None)
            }],
            ..Default::default()
        };
        let merged = merge_into(file, &rows).unwrap();
        let t = crate::config::parse(&merged, "merged").unwrap_or_else(|e| panic!("{e}\n{merged}"));
        let Some(crate::config::TableRule::Directory(d)) = t.table("t_ten") else {
            panic!("no directory")
        };
        assert!(d.moves.is_empty());
        assert_eq!(
            d.entries.get(b"42".as_slice()).copied(),
            t.node_index("ds2")
        );
    }
}
