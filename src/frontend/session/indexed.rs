//! A write to a table with global secondary indexes ([`IndexedWrite`]), in one transaction:
//! the client's, or the proxy's own around an autocommit statement (two-phase commit when it
//! touched several nodes). In order: the rows an UPDATE or DELETE changes read with their
//! locks; their old entries removed; the new entries added (a unique index's duplicate is
//! MariaDB's 1062 for the index, before the row is written); the client's write. Inside the
//! client's transaction a failure goes back to a savepoint set before the first index
//! write, as MySQL undoes a failed statement; in autocommit the proxy's transaction is
//! rolled back. The client gets the write's OK once everything is done.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use mysql_common::packets::Column;
use mysql_common::value::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{Outcome, Session};
use crate::config::indexes::{hash_literal, GlobalIndex, HASH_COLUMN};
use crate::config::Topology;
use crate::error::{MyError, ER_LOCK_DEADLOCK};
use crate::exec::collect::{Collect, OkCapture};
use crate::exec::door::{Access, Door, OkInfo, Sink};
use crate::exec::txn::{self, Transactions, INDEX_SAVEPOINT};
use crate::plan::indexed::{Entry, IndexProbe, IndexedWrite, RowsRead};
use crate::plan::Plan;
use crate::routing::weights::Weights;
use crate::shared::IndexAnswers;
use crate::sql::write::{quoted, typed};

/// Entries per generated index statement.
pub(super) const BATCH: usize = 500;

/// How often an autocommit write with indexes runs again after a deadlock.
const DEADLOCK_RETRIES: u32 = 6;

/// MySQL's ER_DUP_ENTRY.
pub(super) const ER_DUP_ENTRY: u16 = 1062;

/// A write READ COMMITTED refused where `binlog_format` is STATEMENT.
const ER_BINLOG_STMT_MODE_AND_ROW_ENGINE: u16 = 1665;

/// How an upsert in the proxy's own transaction ended (`Session::upsert_in_tx`).
pub(super) enum Upserted {
    Done(OkInfo),
    /// READ COMMITTED did not hold what it read (see `Session::indexed`): roll back and run
    /// it again with gap locks.
    Again,
}

/// An entry a write removes: its hash, its shard key's literal, and the value's.
pub(super) type Removed = (Vec<u8>, String, String);

/// What a write does to its table's indexes.
#[derive(Default)]
pub(super) struct Changes {
    /// Entries to remove, by index name.
    pub(super) removes: BTreeMap<String, Vec<Removed>>,
    pub(super) adds: Vec<Entry>,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    pub(super) async fn indexed(&mut self, w: &IndexedWrite, binary: bool) -> Outcome {
        let st = self.nodes.state();
        let implicit = st.tx.is_none() && st.autocommit && !st.ddl;
        let mut attempt = 0;
        let mut lane = None;
        if implicit {
            self.shared.deadlocks.set_retryable(self.conn_id, true);
        }
        // An upsert in the proxy's own transaction, its rows of distinct keys, runs READ
        // COMMITTED first: its reads lock the rows they find, not the gaps where its rows
        // or values would go, which another such upsert's insert would meet in a deadlock
        // one MariaDB never has. What a gap lock would have kept out, a row that arrived
        // meanwhile, shows in what the write did; then it runs again as before
        // (`Upserted::Again`).
        let mut optimistic = implicit
            && !w.shared_keys
            && w.upsert.as_ref().is_some_and(distinct_keys)
            && !self.shared.statement_binlog.load(Ordering::Relaxed);
        let r = loop {
            if implicit {
                self.nodes.state_mut().begin("BEGIN");
                if optimistic {
                    self.nodes.state_mut().read_committed();
                }
            }
            let r = match &w.upsert {
                Some(u) => match self.upsert_in_tx(w, u, !implicit, binary, optimistic).await {
                    Ok(Upserted::Done(ok)) => Ok(ok),
                    Ok(Upserted::Again) => {
                        self.roll_back_own().await;
                        optimistic = false;
                        continue;
                    }
                    Err(e) if optimistic && e.code == ER_BINLOG_STMT_MODE_AND_ROW_ENGINE => {
                        self.shared.statement_binlog.store(true, Ordering::Relaxed);
                        self.roll_back_own().await;
                        optimistic = false;
                        continue;
                    }
                    Err(e) => Err(e),
                },
                None => self.indexed_in_tx(w, !implicit, binary).await,
            };
            match r {
                // The proxy's locking reads around the write can meet another such write's
                // in a deadlock one MariaDB would not have had: the proxy's own transaction,
                // rolled back whole, runs again (never once its commit began).
                // Two such writes retried at the same pace would meet again: the pause grows
                // (up to 320 ms), and this proxy's retries take turns.
                Err(e) if implicit && e.code == ER_LOCK_DEADLOCK && attempt < DEADLOCK_RETRIES => {
                    self.roll_back_own().await;
                    attempt += 1;
                    let pause = rand::random::<u64>() % (5u64 << attempt) + 1;
                    tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
                    if lane.is_none() {
                        lane = Some(self.shared.index_retries.clone().lock_owned().await);
                    }
                }
                Ok(ok) if implicit => break self.nodes.end(true).await.map(|_| ok),
                Ok(ok) => break Ok(ok),
                Err(e) => {
                    if implicit {
                        let _ = self.nodes.end(false).await;
                    }
                    break Err(e);
                }
            }
        };
        drop(lane);
        if implicit {
            self.shared.deadlocks.set_retryable(self.conn_id, false);
        }
        self.nodes.settle_tx().await;
        self.release_moves();
        let ok = r?;
        self.rows_written += ok.affected;
        let status = self.status();
        let (_, mut sink) = self.sink(binary);
        sink.ok(&ok, status, false);
        Ok(())
    }

    /// The proxy's own transaction around a write rolled back, for the write to run again.
    async fn roll_back_own(&mut self) {
        let _ = self.nodes.end(false).await;
        self.nodes.settle_tx().await;
        self.last.warn_next = None;
    }

    async fn indexed_in_tx(
        &mut self,
        w: &IndexedWrite,
        in_client_tx: bool,
        binary: bool,
    ) -> Result<OkInfo, MyError> {
        let topo = self.topo.clone();
        let indexes = topo.indexes_of(&w.table).unwrap_or_default().to_vec();
        let charset = self.nodes.state().charset.clone();
        let mut changes = Changes {
            adds: w.adds.clone(),
            ..Default::default()
        };
        let mut base = std::borrow::Cow::Borrowed(&w.base);
        if let Some(read) = &w.read {
            let rows = self.own_rows(&read.sql, &topo, &w.table).await?;
            // The rows it changes are read and locked (and by an index, their entries): the
            // write runs on their nodes alone.
            if let Some(narrow) = narrowed(&topo, w, &rows.rows) {
                base = std::borrow::Cow::Owned(narrow);
            }
            let cols = rows.cols.clone().unwrap_or_default();
            let mut named: Vec<(&GlobalIndex, Option<Arc<Weights>>)> = Vec::new();
            for n in &read.indexes {
                let Some(ix) = indexes.iter().find(|i| i.name == *n) else {
                    continue;
                };
                let w = match ix.collation() {
                    Some(c) => Some(self.weights_for(c).await?),
                    None => None,
                };
                named.push((ix, w));
            }
            for row in &rows.rows {
                row_changes(row, &cols, &named, read, &charset, &mut changes)?;
            }
        }
        // Every node the write and its index writes touch goes back to one savepoint.
        let mut nodes = base.nodes();
        for ix in &indexes {
            nodes.extend(index_nodes(&topo, ix, &changes));
        }
        nodes.sort_unstable();
        nodes.dedup();
        let guarded = in_client_tx
            && txn::savepoint_named(&mut self.nodes, &nodes, INDEX_SAVEPOINT)
                .await
                .map_err(MyError::from)?;
        let r = self
            .index_writes_then(w, &base, &indexes, &changes, binary)
            .await;
        if r.is_err() && guarded {
            txn::undo_named(&mut self.nodes, &nodes, INDEX_SAVEPOINT).await;
        }
        r
    }

    /// The index writes, then the client's write; its OK.
    async fn index_writes_then(
        &mut self,
        w: &IndexedWrite,
        base: &Plan,
        indexes: &[GlobalIndex],
        changes: &Changes,
        binary: bool,
    ) -> Result<OkInfo, MyError> {
        let topo = self.topo.clone();
        for (name, removes) in &changes.removes {
            let Some(ix) = indexes.iter().find(|i| i.name == *name) else {
                continue;
            };
            for part in removes.chunks(BATCH) {
                let sql = remove_sql(ix, part);
                self.index_statement(&sql, &topo).await?;
            }
        }
        for ix in indexes {
            let adds: Vec<&Entry> = changes.adds.iter().filter(|e| e.index == ix.name).collect();
            self.add_entries(ix, &adds, &topo).await?;
        }
        let ok = self.base_write(w, base, binary).await?;
        if w.shared_keys {
            self.keep_shared(w, indexes, changes).await?;
        }
        Ok(ok)
    }

    /// `adds`, entries of `ix`: a unique index in use answers a value another row holds
    /// with MariaDB's 1062 for the index.
    pub(super) async fn add_entries(
        &mut self,
        ix: &GlobalIndex,
        adds: &[&Entry],
        topo: &Arc<Topology>,
    ) -> Result<(), MyError> {
        for part in adds.chunks(BATCH) {
            let sql = add_sql(ix, part);
            if let Err(e) = self.index_statement(&sql, topo).await {
                if e.code != ER_DUP_ENTRY {
                    return Err(e);
                }
                let shown = self.duplicate_in(ix, part, topo).await;
                return Err(duplicate(ix, &shown));
            }
        }
        Ok(())
    }

    /// The client's write (`base`: as planned, or run where its rows are); its OK.
    pub(super) async fn base_write(
        &mut self,
        w: &IndexedWrite,
        base: &Plan,
        binary: bool,
    ) -> Result<OkInfo, MyError> {
        let topo = self.topo.clone();
        // A client's prepared write runs prepared, its values bound.
        let mut ok = OkCapture {
            binary,
            ..Default::default()
        };
        if let Plan::KeyUpdate(k) = base {
            // Inside the transaction begun here: run as in the client's.
            let read = self.plan_own(&k.select, &topo).await;
            if let Plan::Refuse { code, message } = &read {
                return Err(MyError::new(*code, message.clone()));
            }
            crate::exec::key_update::run(&mut self.nodes, &mut ok, &topo, k, &read).await?;
        } else {
            crate::exec::run(base, &topo, Access::Write, &mut self.nodes, &mut ok).await?;
        }
        match ok.ok {
            Some(info) if !ok.rows => Ok(info),
            _ => Err(MyError::internal(format!(
                "shardproxy: a write to `{}`, which has global indexes, answered with rows",
                w.table
            ))),
        }
    }

    /// Where rows share a shard key, the entries of plain indexes the write removed that
    /// rows left behind still hold (their key and value), written again.
    async fn keep_shared(
        &mut self,
        w: &IndexedWrite,
        indexes: &[GlobalIndex],
        changes: &Changes,
    ) -> Result<(), MyError> {
        let topo = self.topo.clone();
        let charset = self.nodes.state().charset.clone();
        for (name, removes) in &changes.removes {
            let Some(ix) = indexes.iter().find(|i| i.name == *name && !i.unique) else {
                continue;
            };
            let weights = match ix.collation() {
                Some(c) => Some(self.weights_for(c).await?),
                None => None,
            };
            for part in removes.chunks(BATCH) {
                let list = |pick: &dyn Fn(&Removed) -> &String| {
                    let mut l: Vec<&str> = part.iter().map(|r| pick(r).as_str()).collect();
                    l.sort_unstable();
                    l.dedup();
                    l.join(", ")
                };
                let sql = format!(
                    "SELECT {}, {} FROM {} WHERE {} IN ({}) AND {} IN ({}) FOR UPDATE",
                    quoted(&ix.shard_column),
                    quoted(&ix.column),
                    w.target,
                    quoted(&ix.shard_column),
                    list(&|r| &r.1),
                    quoted(&ix.column),
                    list(&|r| &r.2),
                );
                let rows = self.own_rows(&sql, &topo, &w.table).await?;
                let named = [(ix, weights.clone())];
                let mut held = Changes::default();
                let cols = rows.cols.as_deref().unwrap_or_default();
                // Each row read as a DELETE's: its entry is one it would remove.
                let as_delete = RowsRead {
                    sql: String::new(),
                    indexes: vec![ix.name.clone()],
                    assigns: false,
                    new_key: false,
                };
                for row in &rows.rows {
                    row_changes(row, cols, &named, &as_delete, &charset, &mut held)?;
                }
                let removed: Vec<&Removed> = part.iter().collect();
                let again: Vec<Entry> = held
                    .removes
                    .remove(&ix.name)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|(h, k, _)| removed.iter().any(|r| r.0 == *h && r.1 == *k))
                    .map(|(hash, key, value)| Entry {
                        index: ix.name.clone(),
                        shown: String::new(),
                        hash,
                        value,
                        key,
                    })
                    .collect();
                if !again.is_empty() {
                    let refs: Vec<&Entry> = again.iter().collect();
                    self.index_statement(&add_sql(ix, &refs), &topo).await?;
                }
            }
        }
        Ok(())
    }

    /// The rows of one of the proxy's own reads of `table`, whole.
    pub(super) async fn own_rows(
        &mut self,
        sql: &str,
        topo: &Arc<Topology>,
        table: &str,
    ) -> Result<Collect, MyError> {
        let plan = self.plan_own(sql, topo).await;
        if let Plan::Refuse { code, message } = &plan {
            return Err(MyError::new(*code, message.clone()));
        }
        let cap = topo.max_rows_per_statement;
        let mut rows = Collect::new(cap);
        crate::exec::run(&plan, topo, Access::Write, &mut self.nodes, &mut rows).await?;
        if rows.over || rows.bad {
            return Err(MyError::unsupported(format!(
                "shardproxy: this write changes more than {cap} rows of `{table}` (max_rows_per_statement), whose global index entries it must read first; change them in parts"
            )));
        }
        Ok(rows)
    }

    /// One statement of the proxy's on an index table, planned as a client's would be (its
    /// slots may be moving).
    pub(super) async fn index_statement(
        &mut self,
        sql: &str,
        topo: &Arc<Topology>,
    ) -> Result<(), MyError> {
        let plan = self.plan_own(sql, topo).await;
        let mut ok = OkCapture::default();
        crate::exec::run(&plan, topo, Access::Write, &mut self.nodes, &mut ok).await
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// A collation's weights: kept by the proxy, or read from the default node now.
    pub(super) async fn weights_for(&mut self, collation: &str) -> Result<Arc<Weights>, MyError> {
        if let Some(w) = self.shared.weights_of(collation) {
            return Ok(w);
        }
        let topo = self.topo.clone();
        let w = crate::exec::weights::read(&mut self.nodes, &topo, topo.default_node, collation)
            .await?;
        Ok(self.shared.weights_store(w))
    }

    /// Which value of `part` a unique index's 1062 was about, as MariaDB names a duplicate
    /// for the table's own key: one given twice in the write, or one another row holds.
    async fn duplicate_in(
        &mut self,
        ix: &GlobalIndex,
        part: &[&Entry],
        topo: &Arc<Topology>,
    ) -> String {
        for (i, e) in part.iter().enumerate() {
            if part[..i].iter().any(|o| o.hash == e.hash && o.key != e.key) {
                return e.shown.clone();
            }
        }
        let probe = IndexProbe {
            index_table: ix.index_table.clone(),
            shard_column: ix.shard_column.clone(),
            hashes: part.iter().map(|e| e.hash.clone()).collect(),
            write: false,
        };
        if let Ok(found) =
            Box::pin(self.read_index(std::slice::from_ref(&probe), topo, false)).await
        {
            if let Some(e) = part.iter().find(|e| {
                found
                    .get(&(ix.index_table.clone(), e.hash.clone()))
                    .is_some_and(|keys| !keys.is_empty())
            }) {
                return e.shown.clone();
            }
        }
        part.first().map(|e| e.shown.clone()).unwrap_or_default()
    }

    /// The shard keys of the values `probes` name, from their index tables (on the nodes
    /// their hashes name, inside the session's transaction if it has one; `lock`ed for a
    /// write): an entry for every hash, empty for a value no row holds.
    pub(super) async fn read_index(
        &mut self,
        probes: &[IndexProbe],
        topo: &Arc<Topology>,
        lock: bool,
    ) -> Result<IndexAnswers, MyError> {
        let mut out = IndexAnswers::new();
        let cap = topo.max_rows_per_statement;
        for p in probes {
            for part in p.hashes.chunks(BATCH) {
                let mut list = String::new();
                for (i, h) in part.iter().enumerate() {
                    if i > 0 {
                        list.push_str(", ");
                    }
                    list.push_str(&hash_literal(h));
                }
                let sql = format!(
                    "SELECT {}, {} FROM {} WHERE {} IN ({list}){}",
                    quoted(HASH_COLUMN),
                    quoted(&p.shard_column),
                    quoted(&p.index_table),
                    quoted(HASH_COLUMN),
                    if lock { " FOR UPDATE" } else { "" }
                );
                let plan = self.plan_own(&sql, topo).await;
                if let Plan::Refuse { code, message } = &plan {
                    return Err(MyError::new(*code, message.clone()));
                }
                let mut rows = Collect::new(cap);
                crate::exec::run(&plan, topo, Access::Read, &mut self.nodes, &mut rows).await?;
                if rows.over || rows.bad {
                    return Err(MyError::unsupported(format!(
                        "shardproxy: the global index table `{}` holds more than {cap} entries for these values (max_rows_per_statement)",
                        p.index_table
                    )));
                }
                for h in part {
                    out.entry((p.index_table.clone(), h.clone())).or_default();
                }
                let key_col = rows.cols.as_ref().and_then(|c| c.get(1).cloned());
                for row in rows.rows {
                    if let (Some(Some(Value::Bytes(h))), Some(Some(k))) = (row.first(), row.get(1))
                    {
                        out.entry((p.index_table.clone(), h.clone()))
                            .or_default()
                            .push(as_number(k.clone(), key_col.as_ref()));
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Does each row of the upsert have a key of its own (one row per key: the table's shard
/// key is its primary key)?
fn distinct_keys(u: &crate::plan::indexed::Upsert) -> bool {
    let mut keys: Vec<&String> = u.keys.iter().collect();
    keys.sort_unstable();
    keys.dedup();
    !keys.is_empty() && keys.len() == u.keys.len() && u.keys.len() == u.rows.len()
}

/// A key an index table's text answer gave as bytes, as the number its integer column
/// holds: written into the proxy's own statements as `355`, never `'355'`, which
/// compares with the shard key as a string (a scan of the node's rows, every one locked).
fn as_number(v: Value, col: Option<&Column>) -> Value {
    use mysql_common::constants::{ColumnFlags, ColumnType::*};
    let (Value::Bytes(b), Some(col)) = (&v, col) else {
        return v;
    };
    if !matches!(
        col.column_type(),
        MYSQL_TYPE_TINY
            | MYSQL_TYPE_SHORT
            | MYSQL_TYPE_INT24
            | MYSQL_TYPE_LONG
            | MYSQL_TYPE_LONGLONG
    ) {
        return v;
    }
    let text = std::str::from_utf8(b).unwrap_or_default();
    let unsigned = col.flags().contains(ColumnFlags::UNSIGNED_FLAG);
    match (unsigned, text.parse::<i64>(), text.parse::<u64>()) {
        (false, Ok(i), _) => Value::Int(i),
        (true, _, Ok(u)) => Value::UInt(u),
        _ => v,
    }
}

/// A write over several nodes narrowed to the nodes of `rows`' keys (each row's shard key
/// first), which its locking read found: no other row can match it before it commits (the
/// read locked what it scanned on every node it ran on, and the entries of the values it
/// read by, which a row taking the value must write). `None`: run as planned.
fn narrowed(topo: &Topology, w: &IndexedWrite, rows: &[Vec<Option<Value>>]) -> Option<Plan> {
    let Plan::Scatter { targets, ok } = &w.base else {
        return None;
    };
    let Some(crate::config::TableRule::HashSlot { map, .. }) = topo.table(&w.table) else {
        return None;
    };
    if targets.len() < 2 || map.is_moving() {
        return None;
    }
    let mut nodes = std::collections::BTreeSet::new();
    for row in rows {
        let key = row.first()?.as_ref()?;
        nodes.extend(map.place(key)?.nodes(None));
    }
    let mut kept: Vec<_> = targets
        .iter()
        .filter(|t| nodes.contains(&t.node))
        .cloned()
        .collect();
    // No row: one node answers "0 rows affected".
    if kept.is_empty() {
        kept.extend(targets.first().cloned());
    }
    Some(Plan::Scatter {
        targets: kept,
        ok: *ok,
    })
}

/// MariaDB's 1062 for a unique index's value `shown`, as its message shows it: in utf8mb3,
/// a character past U+FFFF as `?`.
pub(super) fn duplicate(ix: &GlobalIndex, shown: &str) -> MyError {
    let shown: String = shown
        .chars()
        .map(|c| if u32::from(c) > 0xFFFF { '?' } else { c })
        .collect();
    MyError::new(
        ER_DUP_ENTRY,
        format!("Duplicate entry '{shown}' for key '{}'", ix.name),
    )
}

/// The nodes that hold the entries a write removes or adds in `ix`.
fn index_nodes(topo: &Topology, ix: &GlobalIndex, c: &Changes) -> Vec<usize> {
    let Some(crate::config::TableRule::HashSlot { map, .. }) = topo.table(&ix.index_table) else {
        return Vec::new();
    };
    let removes = c
        .removes
        .get(&ix.name)
        .into_iter()
        .flatten()
        .map(|(h, _, _)| h);
    let adds = c
        .adds
        .iter()
        .filter(|e| e.index == ix.name)
        .map(|e| &e.hash);
    let mut out = Vec::new();
    for h in removes.chain(adds) {
        if let Some(p) = map.place(&Value::Bytes(h.clone())) {
            out.extend(p.nodes(None));
        }
    }
    // A move of the index table's slots writes its target too.
    out.extend(map.moves().iter().map(|m| m.to));
    out
}

/// What one read row (`key, old values..., [new values..., [new key]]`) does to the
/// indexes.
pub(super) fn row_changes(
    row: &[Option<Value>],
    cols: &[Column],
    indexes: &[(&GlobalIndex, Option<Arc<Weights>>)],
    read: &RowsRead,
    charset: &str,
    out: &mut Changes,
) -> Result<(), MyError> {
    let n = indexes.len();
    let (Some(key), Some(key_col)) = (row.first(), cols.first()) else {
        return Err(MyError::internal(
            "shardproxy: an index read without the shard key",
        ));
    };
    let mut key_lit = String::new();
    typed(&mut key_lit, key.as_ref(), key_col);
    // The key the row has after the write.
    let mut new_key = key_lit.clone();
    if read.new_key {
        let (Some(v), Some(col)) = (row.get(1 + 2 * n), cols.get(1 + 2 * n)) else {
            return Err(MyError::internal(
                "shardproxy: an index read without the new shard key",
            ));
        };
        new_key.clear();
        typed(&mut new_key, v.as_ref(), col);
    }
    let moved = new_key != key_lit;
    let hash = |(ix, w): &(&GlobalIndex, Option<Arc<Weights>>),
                v: Option<&Value>|
     -> Result<Option<Vec<u8>>, MyError> {
        match v {
            None | Some(Value::NULL) => Ok(None),
            Some(v) => ix
                .hash_of(v, charset, false, w.as_deref())
                .map(Some)
                .map_err(|e| {
                    MyError::unsupported(format!(
                        "shardproxy: the global index `{}` of `{}` cannot hold a value: {e}",
                        ix.name, ix.table
                    ))
                }),
        }
    };
    let literal = |v: Option<&Value>, col: Option<&Column>| {
        let mut s = String::new();
        if let Some(col) = col {
            typed(&mut s, v, col);
        }
        s
    };
    for (i, named) in indexes.iter().enumerate() {
        let ix = named.0;
        let old = row.get(1 + i).cloned().flatten();
        let old_hash = hash(named, old.as_ref())?;
        let mut remove = |h: Vec<u8>| {
            out.removes.entry(ix.name.clone()).or_default().push((
                h,
                key_lit.clone(),
                literal(old.as_ref(), cols.get(1 + i)),
            ))
        };
        if !read.assigns {
            if let Some(h) = old_hash {
                remove(h);
            }
            continue;
        }
        let new = row.get(1 + n + i).cloned().flatten();
        if new == old && !moved {
            continue;
        }
        if let Some(h) = old_hash {
            remove(h);
        }
        if let Some(h) = hash(named, new.as_ref())? {
            let text = new
                .as_ref()
                .and_then(crate::value::text_form)
                .unwrap_or_default();
            out.adds.push(Entry {
                index: ix.name.clone(),
                shown: String::from_utf8_lossy(&text).into_owned(),
                hash: h,
                value: literal(new.as_ref(), cols.get(1 + n + i)),
                key: new_key.clone(),
            });
        }
    }
    Ok(())
}

/// `DELETE FROM <index table> WHERE v_hash IN (...) AND (v_hash, key) IN (...)`.
pub(super) fn remove_sql(ix: &GlobalIndex, part: &[Removed]) -> String {
    let mut hashes = String::new();
    let mut pairs = String::new();
    for (i, (h, k, _)) in part.iter().enumerate() {
        if i > 0 {
            hashes.push_str(", ");
            pairs.push_str(", ");
        }
        hashes.push_str(&hash_literal(h));
        pairs.push('(');
        pairs.push_str(&hash_literal(h));
        pairs.push_str(", ");
        pairs.push_str(k);
        pairs.push(')');
    }
    format!(
        "DELETE FROM {} WHERE {} IN ({hashes}) AND ({}, {}) IN ({pairs})",
        quoted(&ix.index_table),
        quoted(HASH_COLUMN),
        quoted(HASH_COLUMN),
        quoted(&ix.shard_column)
    )
}

/// `INSERT [IGNORE] INTO <index table> (v_hash, column, key) VALUES ...`: a unique index in
/// use refuses a duplicate; one not built yet, or a plain one, keeps the first entry.
pub(super) fn add_sql(ix: &GlobalIndex, part: &[&Entry]) -> String {
    let mut sql = format!(
        "INSERT {}INTO {} ({}, {}, {}) VALUES ",
        if ix.unique && ix.public {
            ""
        } else {
            "IGNORE "
        },
        quoted(&ix.index_table),
        quoted(HASH_COLUMN),
        quoted(&ix.column),
        quoted(&ix.shard_column)
    );
    for (i, e) in part.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        sql.push_str(&hash_literal(&e.hash));
        sql.push_str(", ");
        sql.push_str(&e.value);
        sql.push_str(", ");
        sql.push_str(&e.key);
        sql.push(')');
    }
    sql
}

#[cfg(test)]
mod tests {
    use super::*;
    use mysql_common::constants::{ColumnFlags, ColumnType};

    #[test]
    fn an_integer_key_read_as_text_is_written_as_the_number() {
        let bigint = Column::new(ColumnType::MYSQL_TYPE_LONGLONG);
        let unsigned =
            Column::new(ColumnType::MYSQL_TYPE_LONGLONG).with_flags(ColumnFlags::UNSIGNED_FLAG);
        let text = Column::new(ColumnType::MYSQL_TYPE_VAR_STRING);
        let b = |s: &str| Value::Bytes(s.as_bytes().to_vec());
        assert_eq!(as_number(b("355"), Some(&bigint)), Value::Int(355));
        assert_eq!(as_number(b("-7"), Some(&bigint)), Value::Int(-7));
        assert_eq!(
            as_number(b("18446744073709551615"), Some(&unsigned)),
            Value::UInt(u64::MAX)
        );
        assert_eq!(as_number(b("355"), Some(&text)), b("355"), "a string key");
        assert_eq!(as_number(b("355"), None), b("355"));
        assert_eq!(
            crate::sql::write::literal(&as_number(b("355"), Some(&bigint)), "utf8mb4"),
            "355"
        );
    }
}
