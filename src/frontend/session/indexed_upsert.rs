//! REPLACE, INSERT IGNORE and INSERT ... ON DUPLICATE KEY UPDATE of a table with global
//! indexes ([`Upsert`]). Which rows such a write inserts, replaces, updates or leaves is known
//! only once a node ran it, so the proxy reads the rows it may touch before and after it, in
//! the same transaction and locked, and changes the entries by their difference:
//!
//! 1. The unique values its rows claim are read from their indexes, locked: a row of another
//!    shard key that holds one is a row the write may replace or update too (and so is one
//!    its table's own unique keys meet, below).
//! 2. The rows of those keys and of the write's own are read, locked (`before`).
//! 3. The client's write runs.
//! 4. The rows are read again (`after`). Two rows holding one value of a unique index are
//!    what one MariaDB would not have left: REPLACE deletes the row that held it, INSERT
//!    IGNORE the row it inserted (with MariaDB's 1062 warning); ON DUPLICATE KEY UPDATE,
//!    which would have updated that other row, is refused (1235) and undone.
//! 5. Entries in `before` and not in `after` are removed, those in `after` and not in `before`
//!    added.
//!
//! REPLACE and ON DUPLICATE KEY UPDATE meet rows by every unique key of the table. A unique
//! key that holds the shard key meets only rows of the write's keys; one on exactly the
//! column of a unique global index in use meets rows that index names. Any other (a primary
//! key without the shard key, a per-node `UNIQUE (email)` whose index is still being built)
//! meets the rows holding the write's values for it: those are read first, on every node,
//! locked, and their keys join the write's. Where the write gives such a key no constant
//! value, it is refused (1235).

use std::collections::BTreeMap;
use std::sync::Arc;

use mysql_common::packets::Column;
use mysql_common::value::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::indexed::{duplicate, remove_sql, Removed, Upserted, BATCH, ER_DUP_ENTRY};
use super::Session;
use crate::config::indexes::GlobalIndex;
use crate::config::Topology;
use crate::error::MyError;
use crate::exec::collect::OkCapture;
use crate::exec::door::{Access, Door, OkInfo};
use crate::exec::txn::{self, INDEX_SAVEPOINT};
use crate::plan::indexed::{Entry, IndexProbe, IndexedWrite, Upsert, UpsertKind};
use crate::routing::weights::Weights;
use crate::sql::write::{literal, quoted, typed};

/// An index with the weights its hashes need.
type Named<'a> = (&'a GlobalIndex, Option<Arc<Weights>>);

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    pub(super) async fn upsert_in_tx(
        &mut self,
        w: &IndexedWrite,
        u: &Upsert,
        in_client_tx: bool,
        binary: bool,
        optimistic: bool,
    ) -> Result<Upserted, MyError> {
        let topo = self.topo.clone();
        let indexes = topo.indexes_of(&w.table).unwrap_or_default().to_vec();
        let mut named: Vec<Named> = Vec::new();
        for ix in &indexes {
            let weights = match ix.collation() {
                Some(c) => Some(self.weights_for(c).await?),
                None => None,
            };
            named.push((ix, weights));
        }
        // Every node of the table and its index tables goes back to one savepoint.
        let mut nodes = topo.holders(&w.table);
        for ix in &indexes {
            nodes.extend(topo.holders(&ix.index_table));
        }
        nodes.sort_unstable();
        nodes.dedup();
        let guarded = in_client_tx
            && txn::savepoint_named(&mut self.nodes, &nodes, INDEX_SAVEPOINT)
                .await
                .map_err(MyError::from)?;
        let r = self
            .upsert_steps(w, u, &named, &topo, binary, optimistic)
            .await;
        if r.is_err() && guarded {
            txn::undo_named(&mut self.nodes, &nodes, INDEX_SAVEPOINT).await;
        }
        r
    }

    async fn upsert_steps(
        &mut self,
        w: &IndexedWrite,
        u: &Upsert,
        named: &[Named<'_>],
        topo: &Arc<Topology>,
        binary: bool,
        optimistic: bool,
    ) -> Result<Upserted, MyError> {
        let charset = self.nodes.state().charset.clone();
        let mut keys = u.keys.clone();
        // (INSERT IGNORE changes no row there: the rows of its keys are all it may touch.)
        if u.kind != UpsertKind::Ignore {
            let indexes: Vec<GlobalIndex> = named.iter().map(|(ix, _)| (*ix).clone()).collect();
            let met = self.met_by_own_keys(w, u, &indexes, topo).await?;
            // READ COMMITTED checks only a write that meets the rows of its own key.
            if optimistic && !met.is_empty() {
                return Ok(Upserted::Again);
            }
            keys.extend(met);
        }
        let probes: Vec<IndexProbe> = named
            .iter()
            .filter(|(ix, _)| ix.unique && ix.public)
            .filter_map(|(ix, _)| {
                let hashes: Vec<Vec<u8>> = u
                    .claims
                    .iter()
                    .filter(|e| e.index == ix.name)
                    .map(|e| e.hash.clone())
                    .collect();
                (!hashes.is_empty()).then(|| IndexProbe {
                    index_table: ix.index_table.clone(),
                    shard_column: ix.shard_column.clone(),
                    hashes,
                    write: true,
                })
            })
            .collect();
        let mut holders: Vec<String> = Vec::new();
        if !probes.is_empty() {
            let held = Box::pin(self.read_index(&probes, topo, true)).await?;
            holders.extend(held.values().flatten().map(|k| literal(k, &charset)));
            holders.sort_unstable();
            holders.dedup();
            if optimistic && holders.iter().any(|h| !u.keys.contains(h)) {
                return Ok(Upserted::Again);
            }
            keys.extend(holders.iter().cloned());
        }
        keys.sort_unstable();
        keys.dedup();
        let (before, found) = self.images(w, named, &keys, &charset).await?;
        // Which of several rows updated or skipped a row it found, its count cannot tell.
        if optimistic && found > 0 && u.rows.len() > 1 && u.kind != UpsertKind::Replace {
            return Ok(Upserted::Again);
        }
        crate::hooks::upsert_read(&w.table).await;
        let redirected = match self.redirect(w, u, &holders, topo).await? {
            // The row one MariaDB would update, updated by its own key on its node.
            Some(sql) => Some(self.unindexed_write(&sql, topo).await?),
            None => None,
        };
        let mut ok = match redirected {
            Some(ok) => ok,
            None => self.base_write(w, &w.base, binary).await?,
        };
        if optimistic && !as_read(u.kind, u.rows.len() as u64, found, ok.affected) {
            return Ok(Upserted::Again);
        }
        let (mut after, _) = self.images(w, named, &keys, &charset).await?;
        // Rows the write left holding one unique value with another.
        let mut gone = Vec::new();
        // (A unique index being built refuses nothing yet: one MariaDB's rows per node.)
        for (ix, _) in named.iter().filter(|(ix, _)| ix.unique && ix.public) {
            let mut holders: BTreeMap<&[u8], Vec<&Entry>> = BTreeMap::new();
            for e in after.iter().filter(|e| e.index == ix.name) {
                holders.entry(&e.hash).or_default().push(e);
            }
            for (hash, list) in holders.into_iter().filter(|(_, l)| l.len() > 1) {
                let held_before = |e: &&Entry| {
                    before
                        .iter()
                        .any(|b| b.index == ix.name && b.hash == hash && b.key == e.key)
                };
                let (old, new): (Vec<&Entry>, Vec<&Entry>) =
                    list.into_iter().partition(held_before);
                let (&[old], &[new]) = (old.as_slice(), new.as_slice()) else {
                    return Err(MyError::unsupported(format!(
                        "shardproxy: rows of this write to `{}` would hold one value of the unique global index `{}` ({:?}), which it cannot tell apart as one MariaDB would (write them one at a time)",
                        w.table, ix.name, after_shown(&after, ix, hash)
                    )));
                };
                match u.kind {
                    UpsertKind::Replace => {
                        gone.push((*ix, old.clone()));
                        ok.affected += 1;
                    }
                    UpsertKind::Ignore => {
                        gone.push((*ix, new.clone()));
                        ok.affected = ok.affected.saturating_sub(1);
                        self.last.warn_next = Some(duplicate(ix, &new.shown));
                    }
                    UpsertKind::Update => {
                        return Err(MyError::unsupported(format!(
                            "shardproxy: ON DUPLICATE KEY UPDATE of `{}` whose row of another shard key holds {:?} by the unique global index `{}`: one MariaDB would update that row, which shardproxy does not (update it by its key)",
                            w.table, new.shown, ix.name
                        )))
                    }
                }
            }
        }
        if !gone.is_empty() {
            for (ix, e) in &gone {
                let sql = format!(
                    "DELETE FROM {} WHERE {} = {} AND {} = {}",
                    w.target,
                    quoted(&ix.shard_column),
                    e.key,
                    quoted(&ix.column),
                    e.value
                );
                // Its entries are changed below, with the others.
                self.unindexed_write(&sql, topo).await?;
            }
            after = self.images(w, named, &keys, &charset).await?.0;
        }
        match self.apply_difference(named, &before, &after, topo).await {
            // Another row took the value after it was read free.
            Err(e) if optimistic && e.code == ER_DUP_ENTRY => Ok(Upserted::Again),
            r => r.map(|_| Upserted::Done(ok)),
        }
    }

    /// One of the proxy's own writes to the indexed table, without its index writes (the
    /// upsert changes the entries by the rows' difference); its OK.
    async fn unindexed_write(
        &mut self,
        sql: &str,
        topo: &Arc<Topology>,
    ) -> Result<OkInfo, MyError> {
        let plan = self.plan_own(sql, topo).await;
        let mut ok = OkCapture::default();
        crate::exec::run(
            plan.unindexed(),
            topo,
            Access::Write,
            &mut self.nodes,
            &mut ok,
        )
        .await?;
        Ok(ok.ok.unwrap_or_default())
    }

    /// An ON DUPLICATE KEY UPDATE of one row whose key is free and whose unique value the row
    /// of one other key holds (`holders`): the statement with that key in its row's place
    /// ([`Upsert::redirect`]), which updates that row as one MariaDB would.
    async fn redirect(
        &mut self,
        w: &IndexedWrite,
        u: &Upsert,
        holders: &[String],
        topo: &Arc<Topology>,
    ) -> Result<Option<String>, MyError> {
        let (Some((before, after)), [holder], [own]) = (&u.redirect, holders, u.keys.as_slice())
        else {
            return Ok(None);
        };
        if holder == own {
            return Ok(None);
        }
        let Some(shard) = topo.indexes_of(&w.table).and_then(|l| l.first()) else {
            return Ok(None);
        };
        // A row of its own key takes the update first (its primary key), as in one MariaDB.
        let sql = format!(
            "SELECT 1 FROM {} WHERE {} = {own} LIMIT 1 FOR UPDATE",
            w.target,
            quoted(&shard.shard_column)
        );
        if !self.own_rows(&sql, topo, &w.table).await?.rows.is_empty() {
            return Ok(None);
        }
        Ok(Some(format!("{before}{holder}{after}")))
    }

    /// Entries in `before` and not `after` removed, those in `after` and not `before` added.
    /// A unique index's entries compare with their value's text (one row holds each); a
    /// plain index's by hash and key, which several rows of a key may share.
    async fn apply_difference(
        &mut self,
        named: &[Named<'_>],
        before: &[Entry],
        after: &[Entry],
        topo: &Arc<Topology>,
    ) -> Result<(), MyError> {
        let same = |ix: &GlobalIndex, a: &Entry, b: &Entry| {
            a.index == b.index
                && a.hash == b.hash
                && a.key == b.key
                && (!ix.unique || a.value == b.value)
        };
        for (ix, _) in named {
            let of = |l: &'_ [Entry]| -> Vec<Entry> {
                l.iter().filter(|e| e.index == ix.name).cloned().collect()
            };
            let (b, a) = (of(before), of(after));
            let mut removes: Vec<Removed> = Vec::new();
            for e in b.iter().filter(|e| !a.iter().any(|x| same(ix, x, e))) {
                if !removes.iter().any(|r| r.0 == e.hash && r.1 == e.key) {
                    removes.push((e.hash.clone(), e.key.clone(), e.value.clone()));
                }
            }
            for part in removes.chunks(BATCH) {
                self.index_statement(&remove_sql(ix, part), topo).await?;
            }
            let mut adds: Vec<&Entry> = Vec::new();
            for e in a.iter().filter(|e| !b.iter().any(|x| same(ix, x, e))) {
                if !adds.iter().any(|x| x.hash == e.hash && x.key == e.key) {
                    adds.push(e);
                }
            }
            // A plain index's entry removed above that another row of its key still holds.
            if !ix.unique {
                for e in a
                    .iter()
                    .filter(|e| removes.iter().any(|r| r.0 == e.hash && r.1 == e.key))
                {
                    if !adds.iter().any(|x| x.hash == e.hash && x.key == e.key) {
                        adds.push(e);
                    }
                }
            }
            self.add_entries(ix, &adds, topo).await?;
        }
        Ok(())
    }

    /// The entries the rows of `keys` hold, read locked, and how many rows there were.
    async fn images(
        &mut self,
        w: &IndexedWrite,
        named: &[Named<'_>],
        keys: &[String],
        charset: &str,
    ) -> Result<(Vec<Entry>, u64), MyError> {
        let Some((first, _)) = named.first() else {
            return Ok((Vec::new(), 0));
        };
        let topo = self.topo.clone();
        let mut out = Vec::new();
        let mut found = 0;
        for part in keys.chunks(BATCH) {
            let mut list = vec![quoted(&first.shard_column)];
            list.extend(named.iter().map(|(ix, _)| quoted(&ix.column)));
            let sql = format!(
                "SELECT {} FROM {} WHERE {} IN ({}) FOR UPDATE",
                list.join(", "),
                w.target,
                quoted(&first.shard_column),
                part.join(", ")
            );
            let rows = self.own_rows(&sql, &topo, &w.table).await?;
            let cols = rows.cols.as_deref().unwrap_or_default();
            for row in &rows.rows {
                entries_of(row, cols, named, charset, &mut out)?;
            }
            found += rows.rows.len() as u64;
        }
        Ok((out, found))
    }

    /// The shard keys of rows a REPLACE or ON DUPLICATE KEY UPDATE may meet by a unique key
    /// of the table's own that leaves out the shard key (a primary key `order_id` of orders
    /// sharded by `user_id`, a per-node `UNIQUE (email)` not yet kept by its global index):
    /// read by those keys' values, locked, on every node.
    async fn met_by_own_keys(
        &mut self,
        w: &IndexedWrite,
        u: &Upsert,
        indexes: &[GlobalIndex],
        topo: &Arc<Topology>,
    ) -> Result<Vec<String>, MyError> {
        let Some(first) = indexes.first() else {
            return Ok(Vec::new());
        };
        let node = topo
            .holders(&w.table)
            .first()
            .copied()
            .unwrap_or(topo.default_node);
        let db = w.schema.clone().or(self.nodes.db().map(str::to_string));
        let cache_key = crate::shared::column_key(db.as_deref(), &w.table);
        let unique = match self.shared.unique_keys.get(&cache_key) {
            Some(k) => k,
            None => {
                let k = crate::exec::columns::read_unique_keys(
                    &mut self.nodes,
                    node,
                    w.schema.as_deref(),
                    &w.table,
                )
                .await?;
                self.shared.unique_keys.insert(cache_key, k.clone());
                k
            }
        };
        let shard = first.shard_column.to_lowercase();
        let mut found = Vec::new();
        for key in unique
            .iter()
            .map(|k| k.split(',').map(str::to_string).collect::<Vec<_>>())
        {
            if key.is_empty() || key.contains(&shard) {
                continue;
            }
            // A unique global index in use on exactly this column names its holders.
            if let [c] = key.as_slice() {
                if indexes
                    .iter()
                    .any(|ix| ix.unique && ix.public && ix.column.to_lowercase() == *c)
                {
                    continue;
                }
            }
            let no = |why: String| {
                MyError::unsupported(format!(
                    "shardproxy: {} into `{}`, which has global indexes: its unique key ({}) leaves out the shard key `{}`, and {why}, so the rows of other keys it may replace or update cannot be read first",
                    if u.kind == UpsertKind::Replace { "REPLACE" } else { "INSERT ... ON DUPLICATE KEY UPDATE" },
                    w.table,
                    key.join(", "),
                    first.shard_column
                ))
            };
            let mut at = Vec::new();
            for c in &key {
                match u.columns.iter().position(|x| x == c) {
                    Some(i) => at.push(i),
                    None => return Err(no(format!("the write names no `{c}`"))),
                }
            }
            let mut tuples = Vec::new();
            for (n, row) in u.rows.iter().enumerate() {
                let mut values = Vec::new();
                for i in &at {
                    match row.get(*i).and_then(Option::as_ref) {
                        Some(v) => values.push(v.as_str()),
                        None => return Err(no(format!("row {} gives it an expression", n + 1))),
                    }
                }
                // A NULL meets no row.
                if !values.contains(&"NULL") {
                    tuples.push(format!("({})", values.join(", ")));
                }
            }
            let columns: Vec<String> = key.iter().map(|c| quoted(c)).collect();
            for part in tuples.chunks(BATCH) {
                let sql = format!(
                    "SELECT {} FROM {} WHERE ({}) IN ({}) FOR UPDATE",
                    quoted(&first.shard_column),
                    w.target,
                    columns.join(", "),
                    part.join(", ")
                );
                let rows = self.own_rows(&sql, topo, &w.table).await?;
                let cols = rows.cols.as_deref().unwrap_or_default();
                for row in &rows.rows {
                    if let (Some(v), Some(col)) = (row.first(), cols.first()) {
                        let mut k = String::new();
                        typed(&mut k, v.as_ref(), col);
                        found.push(k);
                    }
                }
            }
        }
        Ok(found)
    }
}

/// The entries one read row (`key, each index's value...`) holds.
fn entries_of(
    row: &[Option<Value>],
    cols: &[Column],
    named: &[Named<'_>],
    charset: &str,
    out: &mut Vec<Entry>,
) -> Result<(), MyError> {
    let (Some(key), Some(key_col)) = (row.first(), cols.first()) else {
        return Err(MyError::internal(
            "shardproxy: an index read without the shard key",
        ));
    };
    let mut key_lit = String::new();
    typed(&mut key_lit, key.as_ref(), key_col);
    for (i, (ix, weights)) in named.iter().enumerate() {
        let (Some(v), Some(col)) = (row.get(1 + i).cloned().flatten(), cols.get(1 + i)) else {
            continue;
        };
        if matches!(v, Value::NULL) {
            continue;
        }
        let hash = ix
            .hash_of(&v, charset, false, weights.as_deref())
            .map_err(|e| {
                MyError::unsupported(format!(
                    "shardproxy: the global index `{}` of `{}` cannot hold a value: {e}",
                    ix.name, ix.table
                ))
            })?;
        let mut value = String::new();
        typed(&mut value, Some(&v), col);
        out.push(Entry {
            index: ix.name.clone(),
            shown: String::from_utf8_lossy(&crate::value::text_form(&v).unwrap_or_default())
                .into_owned(),
            hash,
            value,
            key: key_lit.clone(),
        });
    }
    Ok(())
}

/// Did an upsert of `rows` rows of distinct keys that met no row of another key (READ
/// COMMITTED: see `Session::indexed`) change only the rows of its keys read before it
/// (`found` of them), by the rows it reports? A row of its keys or of another unique value
/// that arrived after that read counts in them: a REPLACE deleted it (one more), an ON
/// DUPLICATE KEY UPDATE or INSERT IGNORE that should have inserted updated or skipped it.
/// (Several rows of which some were found do not get here.)
fn as_read(kind: UpsertKind, rows: u64, found: u64, affected: u64) -> bool {
    match kind {
        UpsertKind::Replace => affected == rows + found,
        UpsertKind::Update | UpsertKind::Ignore => {
            (rows == 1 && found > 0) || (found == 0 && affected == rows)
        }
    }
}

/// The text of the value `hash` stands for in `ix`, as `after` holds it.
fn after_shown(after: &[Entry], ix: &GlobalIndex, hash: &[u8]) -> String {
    after
        .iter()
        .find(|e| e.index == ix.name && e.hash == hash)
        .map(|e| e.shown.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upserts_count_tells_a_row_that_arrived_after_its_read() {
        use UpsertKind::*;
        // REPLACE: each row inserted, each row found deleted first.
        assert!(as_read(Replace, 1, 0, 1));
        assert!(as_read(Replace, 1, 1, 2));
        assert!(!as_read(Replace, 1, 0, 2), "a row of its key arrived");
        assert!(as_read(Replace, 3, 1, 4));
        assert!(!as_read(Replace, 3, 1, 5), "another arrived");
        // ON DUPLICATE KEY UPDATE, INSERT IGNORE: a row not found must be inserted.
        for kind in [Update, Ignore] {
            assert!(as_read(kind, 1, 0, 1));
            assert!(
                !as_read(kind, 1, 0, 2),
                "{kind:?}: updated a row that arrived"
            );
            assert!(!as_read(kind, 1, 0, 0), "{kind:?}: met a row that arrived");
            assert!(as_read(kind, 1, 1, 0), "{kind:?}: its own row, locked");
            assert!(as_read(kind, 2, 0, 2));
            assert!(!as_read(kind, 2, 0, 1), "{kind:?}: one of two met a row");
        }
    }
}
