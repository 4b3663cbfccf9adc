//! Where a global index is declared: the rules file of a proxy without a `[metadata]`
//! schema, or the schema (`crate::metadata::indexes`) that every proxy sharing it merges
//! over its own file. Either way the change is checked as the rules it makes before it is
//! written, then loaded here; and a build waits until every proxy runs it and no command
//! planned under the older rules still runs anywhere.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::backend::MyError;
use crate::config::indexes::HASH_COLUMN;
use crate::config::Topology;
use crate::metadata::indexes::IndexRow;
use crate::metadata::{Rows, SlotRow};
use crate::shared::{Reload, Shared};

fn failed(e: impl std::fmt::Display) -> MyError {
    MyError::new(1105, format!("metadata: {e}"))
}

/// The rules file's own key for table `name` (its case as written).
pub(super) fn table_key(doc: &toml_edit::DocumentMut, name: &str) -> String {
    doc.get("tables")
        .and_then(|t| t.as_table_like())
        .and_then(|t| {
            t.iter()
                .map(|(k, _)| k.to_string())
                .find(|k| k.eq_ignore_ascii_case(name))
        })
        .unwrap_or_else(|| name.to_string())
}

/// What a change of an index writes: its section (`None`: dropped) and, for a new index,
/// its table's slots (a node name per slot).
pub(super) struct Change<'a> {
    pub table: &'a str,
    pub name: &'a str,
    pub index_table: &'a str,
    pub definition: Option<toml_edit::InlineTable>,
    pub owners: Option<Vec<String>>,
}

/// Writes `c` where this proxy's rules come from and loads it here; the version in force.
pub(super) async fn apply(
    shared: &Shared,
    t: &Topology,
    path: &Path,
    c: &Change<'_>,
) -> Result<u64, MyError> {
    match &t.metadata {
        None => {
            super::rules_file::edit(shared, path, |doc| in_file(doc, c))?;
            Ok(shared.topology().version)
        }
        Some(meta) => through_metadata(shared, &meta.url, path, c).await,
    }
}

fn in_file(doc: &mut toml_edit::DocumentMut, c: &Change<'_>) {
    let key = table_key(doc, c.table);
    match &c.definition {
        Some(def) => {
            // A table the file lacks fails the rules' check, as it should.
            let _ = crate::metadata::indexes::put(
                &mut doc["tables"][key.as_str()],
                c.name,
                def.clone().into_table(),
            );
        }
        None => {
            if let Some(list) = doc["tables"][key.as_str()]["indexes"].as_table_like_mut() {
                list.remove(c.name);
                if list.is_empty() {
                    if let Some(tt) = doc["tables"][key.as_str()].as_table_like_mut() {
                        tt.remove("indexes");
                    }
                }
            }
            let it = table_key(doc, c.index_table);
            if let Some(tables) = doc["tables"].as_table_like_mut() {
                tables.remove(&it);
            }
        }
    }
    if let Some(owners) = &c.owners {
        let mut list = toml_edit::Array::new();
        for (a, b, n) in runs(owners) {
            let mut e = toml_edit::InlineTable::new();
            e.insert("slots", format!("{a}-{b}").into());
            e.insert("node", n.into());
            list.push(e);
        }
        let it = &mut doc["tables"][c.index_table];
        it["rule"] = toml_edit::value("hash_slot");
        it["column"] = toml_edit::value(HASH_COLUMN);
        it["slots"] = toml_edit::value(list);
    }
}

/// Slot owners as runs `(first, last, node)`.
fn runs(owners: &[String]) -> Vec<(usize, usize, &str)> {
    let mut out: Vec<(usize, usize, &str)> = Vec::new();
    for (slot, n) in owners.iter().enumerate() {
        match out.last_mut() {
            Some(last) if last.2 == n.as_str() && last.1 + 1 == slot => last.1 = slot,
            _ => out.push((slot, slot, n.as_str())),
        }
    }
    out
}

async fn through_metadata(
    shared: &Shared,
    url: &str,
    path: &Path,
    c: &Change<'_>,
) -> Result<u64, MyError> {
    let pool = mysql_async::Pool::new(mysql_async::Opts::from_url(url).map_err(failed)?);
    let row = IndexRow {
        table: c.table.to_string(),
        name: c.name.to_string(),
        definition: c.definition.as_ref().map(|d| d.to_string()),
    };
    let checked = async {
        crate::metadata::create_schema(&pool)
            .await
            .map_err(failed)?;
        let mut rows: Rows = crate::metadata::read(&pool).await.map_err(failed)?;
        rows.indexes
            .retain(|r| !(r.table == row.table && r.name == row.name));
        rows.indexes.push(row.clone());
        if let Some(owners) = &c.owners {
            rows.rules.retain(|r| r.0 != c.index_table);
            rows.rules.push((
                c.index_table.to_string(),
                "hash_slot".into(),
                Some(HASH_COLUMN.into()),
                None,
            ));
            rows.slots.retain(|s| s.table != c.index_table);
            rows.slots
                .extend(owners.iter().enumerate().map(|(slot, n)| SlotRow {
                    table: c.index_table.to_string(),
                    slot: slot as u16,
                    node: n.clone(),
                    state: "stable".into(),
                    target: None,
                }));
        }
        if row.definition.is_none() {
            rows.rules.retain(|r| r.0 != c.index_table);
            rows.slots.retain(|s| s.table != c.index_table);
        }
        super::rules_file::check_merged(path, &rows)
    }
    .await;
    if let Err(e) = checked {
        pool.disconnect().await.ok();
        return Err(e);
    }
    let running = shared.topology().version;
    let written =
        crate::metadata::write_index(url, &row, c.index_table, c.owners.as_deref(), running)
            .await
            .map_err(failed);
    let outcome = match written {
        Ok(_) => {
            super::watch::poll_once(shared, &pool, path, &crate::config::masked_url(url)).await
        }
        Err(e) => {
            pool.disconnect().await.ok();
            return Err(e);
        }
    };
    pool.disconnect().await.ok();
    match outcome {
        Ok(Some(Reload::Refused(reason))) => Err(MyError::new(1105, reason)),
        Err(e) => Err(MyError::new(1105, e)),
        Ok(_) => Ok(shared.topology().version),
    }
}

/// Waits, at most `bound`, until no command planned under rules older than `version` runs:
/// on this proxy, or on every live proxy sharing the metadata (each says so in its
/// heartbeat). `Err` says who still does.
pub(super) async fn settle(
    shared: &Shared,
    t: &Topology,
    version: u64,
    bound: Duration,
) -> Result<(), String> {
    let Some(meta) = &t.metadata else {
        return shared
            .epochs
            .barrier(bound)
            .await
            .map_err(|n| format!("{n} statement(s) begun under the older rules still run"));
    };
    let pool =
        mysql_async::Pool::new(mysql_async::Opts::from_url(&meta.url).map_err(|e| e.to_string())?);
    let started = Instant::now();
    let r = loop {
        let mut c = match pool.get_conn().await {
            Ok(c) => c,
            Err(e) => break Err(format!("metadata: {e}")),
        };
        match crate::metadata::migrations::unsettled(&mut c, version, meta.lease_ms + 1000).await {
            Ok(late) if late.is_empty() => break Ok(()),
            Ok(late) if started.elapsed() > bound => {
                break Err(format!(
                "proxies {} still run statements begun under rules older than version {version}",
                late.join(", ")
            ))
            }
            Ok(_) => {}
            Err(e) => break Err(format!("metadata: {e}")),
        }
        drop(c);
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    pool.disconnect().await.ok();
    r
}
