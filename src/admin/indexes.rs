//! `CREATE [UNIQUE] GLOBAL INDEX name ON t [(column)] [UNIQUE] [RATE r]`, `DROP GLOBAL INDEX
//! name ON t`, `SHOW GLOBAL INDEXES`: global secondary indexes built online
//! (`crate::config::indexes`).
//!
//! CREATE, in order: the column's type read from a node (an integer, or a string, whose
//! collation's weights are read when it is not a binary one); the index table created on
//! the nodes of the base table; the index declared (rules file or metadata) as `write_only`
//! with its table's own slots (the base table's, or an even spread), so every write keeps
//! it from then on; a wait until no command begun under the older rules runs; the
//! backfill, node by node in chunks of the primary key read with shared locks, never
//! waiting for a write's (a concurrent write to those rows waits for the chunk's entries,
//! then keeps them itself; a row written after the chunk is kept by its write; a chunk
//! that meets a write's lock gives way and is read again), each chunk's entries checked once
//! written (a unique index that finds a second row with a value stops there, naming both);
//! every row read again the same way and its entry checked (a write that did not keep the
//! index shows); then `public`: reads use it, UNIQUE is enforced.
//! Run again after a failure, it resumes from the start (entries already there stay).
//! With a `[metadata]` schema the index is declared there for every proxy sharing it, and
//! the build waits until each of them has settled on it (`super::index_rules`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};

use super::index_rules::{apply, settle, Change};
use super::words::{headers, unsupported, Answer};
use crate::backend::MyError;
use crate::config::indexes::{hash_literal, GlobalIndex, IndexKind, HASH_COLUMN};
use crate::config::{TableRule, Topology};
use crate::routing::weights::{charset_of, check_sql, from_answers, probe_sql, Weights};
use crate::shared::Shared;
use crate::sql::write::quoted;

const USAGE: &str =
    "usage: CREATE [UNIQUE] GLOBAL INDEX name ON t [(column)] [RATE rows_per_sec] | DROP GLOBAL INDEX name ON t";

/// A column as `information_schema.COLUMNS` has it: name, data type, column type,
/// character set, collation, whether a row that leaves it out holds NULL.
type ColumnDef = (String, String, String, Option<String>, Option<String>, bool);

/// Rows a backfill chunk reads.
const CHUNK: usize = 1000;

/// How long CREATE waits for the commands begun under the older rules.
const SETTLE: Duration = Duration::from_secs(60);

/// What each running build has done, for SHOW GLOBAL INDEXES: `(table, index)` -> text.
static PROGRESS: Mutex<BTreeMap<(String, String), String>> = Mutex::new(BTreeMap::new());

fn progress(table: &str, name: &str, text: String) {
    if let Ok(mut p) = PROGRESS.lock() {
        p.insert((table.to_string(), name.to_string()), text);
    }
}

/// A node's error as the admin statement's, its code kept (a lock wait's 1205 is retried).
fn failed(what: &str, e: mysql_async::Error) -> MyError {
    let code = match &e {
        mysql_async::Error::Server(s) => s.code,
        _ => 1105,
    };
    MyError::new(code, format!("{what}: {e}"))
}

pub async fn show(t: &Topology) -> Result<Answer, MyError> {
    let shown = PROGRESS.lock().map(|p| p.clone()).unwrap_or_default();
    let mut rows = Vec::new();
    let mut tables: Vec<&String> = t.indexes.keys().collect();
    tables.sort();
    for table in tables {
        for ix in &t.indexes[table] {
            rows.push(vec![
                ix.table.clone(),
                ix.name.clone(),
                ix.column.clone(),
                if ix.unique { "yes" } else { "no" }.into(),
                match &ix.kind {
                    IndexKind::Integer => "integer".into(),
                    IndexKind::Bytes => "string".into(),
                    IndexKind::Collated(c) => format!("string, {c}"),
                },
                if ix.public { "public" } else { "write_only" }.into(),
                ix.index_table.clone(),
                shown
                    .get(&(ix.table.clone(), ix.name.clone()))
                    .cloned()
                    .unwrap_or_default(),
            ]);
        }
    }
    Ok(Answer::Rows {
        columns: headers(&[
            "table",
            "index",
            "column",
            "unique",
            "kind",
            "state",
            "index_table",
            "build",
        ]),
        rows,
    })
}

/// The words of a CREATE or DROP: `(name, table, column, unique, rate)`.
fn parse(text: &str) -> Result<(String, String, Option<String>, bool, u64), MyError> {
    let usage = || unsupported(USAGE);
    let (head, column) = match (text.find('('), text.rfind(')')) {
        (Some(a), Some(b)) if a < b => (
            format!("{} {}", &text[..a], &text[b + 1..]),
            Some(text[a + 1..b].trim().trim_matches('`').to_ascii_lowercase()),
        ),
        _ => (text.to_string(), None),
    };
    let words = crate::sql::leading_words(&head, 16);
    let up: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let at = |k: &str| up.iter().position(|w| w == k);
    let index = at("INDEX").ok_or_else(usage)?;
    let on = at("ON").ok_or_else(usage)?;
    let name = words
        .get(index + 1)
        .filter(|_| on == index + 2)
        .ok_or_else(usage)?;
    let table = words.get(on + 1).ok_or_else(usage)?;
    let rate = match at("RATE") {
        Some(i) => words
            .get(i + 1)
            .and_then(|r| r.parse().ok())
            .ok_or_else(usage)?,
        None => 0,
    };
    let plain = |w: &str| w.trim_matches('`').to_ascii_lowercase();
    Ok((
        plain(name),
        plain(table),
        column,
        at("UNIQUE").is_some(),
        rate,
    ))
}

pub async fn create(
    shared: &Shared,
    t: &Topology,
    text: &str,
    rules: Option<&Path>,
) -> Result<Answer, MyError> {
    let (name, table, column, unique, rate) = parse(text)?;
    let column = column.unwrap_or_else(|| name.clone());
    let path = rules.ok_or_else(|| unsupported("this proxy was not started from a rules file"))?;
    let rule = t
        .table(&table)
        .ok_or_else(|| unsupported(format!("`{table}` has no rule in this proxy's rules")))?;
    let shard = rule
        .column()
        .ok_or_else(|| unsupported(format!("`{table}` is not sharded by a column")))?
        .to_ascii_lowercase();
    let runs = match rule {
        TableRule::HashSlot { map, .. } if map.is_moving() => {
            return Err(unsupported(format!(
                "slots of `{table}` are being moved (SHOW MIGRATIONS): create the index once that move is done"
            )))
        }
        TableRule::HashSlot { map, .. } => map
            .runs()
            .into_iter()
            .map(|(a, b, n)| (usize::from(a), usize::from(b), n))
            .collect(),
        TableRule::Range { map, .. } => crate::routing::runs(
            crate::routing::salt::Buckets::spread(&map.nodes(), crate::routing::slot::SLOTS as u16).0,
        ),
        other => {
            return Err(unsupported(format!(
                "global indexes are kept for hash_slot and range tables only, not \"{}\"",
                other.kind()
            )))
        }
    };
    let existing = t
        .indexes_of(&table)
        .and_then(|l| l.iter().find(|i| i.name == name))
        .cloned();
    if let Some(ix) = &existing {
        if ix.public {
            return Err(unsupported(format!(
                "the global index `{name}` of `{table}` exists and is in use"
            )));
        }
        if ix.column != column || ix.unique != unique {
            return Err(unsupported(format!(
                "the global index `{name}` of `{table}` is being built on `{}`{}: DROP GLOBAL INDEX it first",
                ix.column,
                if ix.unique { " (unique)" } else { "" }
            )));
        }
    }
    let base_nodes = rule.all_nodes(t);
    let Some(&first) = base_nodes.first() else {
        return Err(unsupported(format!("`{table}` is on no node")));
    };
    let mut c = Conn::new(t.nodes[first].opts.clone())
        .await
        .map_err(|e| failed(t.node_name(first), e))?;
    let cols: Vec<ColumnDef> = c
        .exec_map(
            "SELECT LOWER(COLUMN_NAME), LOWER(DATA_TYPE), COLUMN_TYPE, CHARACTER_SET_NAME, COLLATION_NAME, \
             IS_NULLABLE = 'YES' AND (COLUMN_DEFAULT IS NULL OR COLUMN_DEFAULT = 'NULL') \
             FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? \
             AND LOWER(COLUMN_NAME) IN (?, ?)",
            (&table, &column, &shard),
            |(name, data, ty, cs, co, null): (String, String, String, Option<String>, Option<String>, i64)| {
                (name, data, ty, cs, co, null != 0)
            },
        )
        .await
        .map_err(|e| failed(t.node_name(first), e))?;
    std::mem::drop(c);
    let def = |c: &str| cols.iter().find(|x| x.0 == c);
    let (Some(col), Some(key)) = (def(&column), def(&shard)) else {
        return Err(unsupported(format!(
            "`{table}` on {} has no column `{column}` (or no shard key `{shard}`)",
            t.node_name(first)
        )));
    };
    let kind = kind_of(&column, &col.1, col.4.as_deref())?;
    // A collation other than a binary one: its weights, if the proxy can use them.
    let weights = match &kind {
        IndexKind::Collated(c) => Some(read_weights(t, first, c).await?),
        _ => None,
    };
    let typed = |c: &ColumnDef| match (&c.3, &c.4) {
        (Some(cs), Some(co)) => format!("{} CHARACTER SET {cs} COLLATE {co}", c.2),
        _ => c.2.clone(),
    };
    let ix = GlobalIndex {
        name: name.clone(),
        table: table.clone(),
        column: column.clone(),
        shard_column: shard.clone(),
        unique,
        kind: kind.clone(),
        public: false,
        index_table: format!("{table}_{name}_gsi"),
        default_null: col.5,
    };
    // The index table first: writes keep it from the moment the rules name it.
    for &n in &base_nodes {
        let mut c = Conn::new(t.nodes[n].opts.clone())
            .await
            .map_err(|e| failed(t.node_name(n), e))?;
        c.query_drop(ix.create_sql(&typed(col), &typed(key)))
            .await
            .map_err(|e| failed(t.node_name(n), e))?;
    }
    // Its section: write_only until built, then public.
    let mut def = toml_edit::InlineTable::new();
    def.insert("column", column.as_str().into());
    def.insert("unique", unique.into());
    def.insert(
        "kind",
        match kind {
            IndexKind::Integer => "integer",
            IndexKind::Bytes | IndexKind::Collated(_) => "string",
        }
        .into(),
    );
    if let IndexKind::Collated(c) = &kind {
        def.insert("collation", c.as_str().into());
    }
    if col.5 {
        def.insert("default_null", true.into());
    }
    def.insert("state", "write_only".into());
    let change = |definition, owners| Change {
        table: &table,
        name: &name,
        index_table: &ix.index_table,
        definition,
        owners,
    };
    let version = if existing.is_none() {
        let owners: Vec<String> = runs
            .iter()
            .flat_map(|(a, b, n)| (*a..=*b).map(move |_| t.node_name(*n).to_string()))
            .collect();
        apply(shared, t, path, &change(Some(def.clone()), Some(owners))).await?
    } else {
        shared.topology().version
    };
    let now = shared.topology();
    let Some(ix) = now
        .indexes_of(&table)
        .and_then(|l| l.iter().find(|i| i.name == name))
        .cloned()
    else {
        return Err(MyError::internal(format!(
            "the rules in force do not name the index `{name}` of `{table}`"
        )));
    };
    progress(
        &table,
        &name,
        "waiting for statements begun under the older rules".into(),
    );
    if let Err(why) = settle(shared, &now, version, SETTLE).await {
        progress(&table, &name, format!("stopped: {why}"));
        return Err(unsupported(format!(
            "{why} after {}s; the index stays write_only: run CREATE GLOBAL INDEX again to go on",
            SETTLE.as_secs()
        )));
    }
    let built = pass(&now, &ix, rate, weights.as_deref(), Pass::Fill).await;
    let rows = match built {
        Ok(rows) => rows,
        Err(e) => {
            progress(&table, &name, format!("stopped: {}", e.message));
            return Err(e);
        }
    };
    // Every row read again, its entry checked: a write that did not keep the index shows.
    pass(&now, &ix, rate, weights.as_deref(), Pass::Verify)
        .await
        .inspect_err(|e| {
            progress(&table, &name, format!("stopped: {}", e.message));
        })?;
    def.insert("state", "public".into());
    apply(shared, &now, path, &change(Some(def), None)).await?;
    progress(&table, &name, format!("built: {rows} row(s) indexed"));
    Ok(Answer::Done(format!(
        "global index `{name}` of `{table}` built over {rows} row(s) and in use"
    )))
}

/// How the column's values compare.
fn kind_of(column: &str, data_type: &str, collation: Option<&str>) -> Result<IndexKind, MyError> {
    match data_type {
        "tinyint" | "smallint" | "mediumint" | "int" | "bigint" => Ok(IndexKind::Integer),
        "char" | "varchar" | "binary" | "varbinary" => match collation {
            None => Ok(IndexKind::Bytes),
            Some(c) if c.ends_with("_bin") => Ok(IndexKind::Bytes),
            Some(c) => Ok(IndexKind::Collated(c.to_ascii_lowercase())),
        },
        other => Err(unsupported(format!(
            "`{column}` is {other}: global indexes are kept on integer and string columns"
        ))),
    }
}

/// A collation's weights read on node `n`, checked (`crate::routing::weights`).
async fn read_weights(t: &Topology, n: usize, collation: &str) -> Result<Arc<Weights>, MyError> {
    let cs = charset_of(collation);
    let mut c = Conn::new(t.nodes[n].opts.clone())
        .await
        .map_err(|e| failed(t.node_name(n), e))?;
    let probe: Vec<(u32, Vec<u8>)> = c
        .query(probe_sql(cs, collation))
        .await
        .map_err(|e| failed(t.node_name(n), e))?;
    let row: Option<Row> = c
        .query_first(check_sql(cs, collation))
        .await
        .map_err(|e| failed(t.node_name(n), e))?;
    let check: Vec<Vec<u8>> = row
        .map(|r| {
            (0..r.len())
                .map(|i| match r.as_ref(i) {
                    Some(Value::Bytes(b)) => b.clone(),
                    _ => Vec::new(),
                })
                .collect()
        })
        .unwrap_or_default();
    let w = from_answers(collation, probe, check).map_err(|e| {
        unsupported(format!(
            "{e}; a column in a binary collation (`{cs}_bin`) can be indexed"
        ))
    })?;
    Ok(Arc::new(w))
}

/// The base table's primary key on a node (its columns, quoted).
async fn primary_key(c: &mut Conn, table: &str) -> Result<Vec<String>, mysql_async::Error> {
    let cols: Vec<String> = c
        .exec(
            "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND CONSTRAINT_NAME = 'PRIMARY' \
             ORDER BY ORDINAL_POSITION",
            (table,),
        )
        .await?;
    Ok(cols.iter().map(|c| quoted(c)).collect())
}

fn literal(v: &Value) -> String {
    crate::sql::write::literal(v, "utf8mb4")
}

/// Writes every row's entry, node by node; the rows indexed.
/// What a pass over the base table's rows does with their entries.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Writes them (an entry there already stays), then checks them.
    Fill,
    /// Checks them only.
    Verify,
}

/// Every row of the base table, node by node, in chunks of its primary key read with
/// shared locks; each chunk's entries written and checked ([`Pass`]); the rows read.
async fn pass(
    t: &Topology,
    ix: &GlobalIndex,
    rate: u64,
    weights: Option<&Weights>,
    mode: Pass,
) -> Result<u64, MyError> {
    let base = t
        .table(&ix.table)
        .map(|r| r.all_nodes(t))
        .unwrap_or_default();
    let mut index_conns: BTreeMap<usize, Conn> = BTreeMap::new();
    let mut done = 0u64;
    let started = Instant::now();
    for &n in &base {
        let node = t.node_name(n).to_string();
        let mut c = Conn::new(t.nodes[n].opts.clone())
            .await
            .map_err(|e| failed(&node, e))?;
        let pk = primary_key(&mut c, &ix.table)
            .await
            .map_err(|e| failed(&node, e))?;
        if pk.is_empty() {
            return Err(unsupported(format!(
                "`{}` on {node} has no primary key: its rows cannot be read in chunks to build the index",
                ix.table
            )));
        }
        let mut cursor: Option<Vec<Value>> = None;
        loop {
            // A chunk whose rows a write holds, or whose entries wait on a write's locks,
            // gives way: rolled back and read again a moment later, so the build never
            // holds a write up for long nor deadlocks with one across two nodes.
            let mut tries = 0u32;
            let rows = loop {
                let r = chunk(
                    &mut c,
                    &mut index_conns,
                    t,
                    ix,
                    &pk,
                    cursor.as_deref(),
                    weights,
                    mode,
                )
                .await;
                match r {
                    Ok(rows) => break rows,
                    Err(e) => {
                        let _ = c.query_drop("ROLLBACK").await;
                        if !matches!(e.code, 1205 | 1213) || tries >= GIVE_WAY {
                            return Err(e);
                        }
                        tries += 1;
                        tokio::time::sleep(Duration::from_millis(10 * u64::from(tries.min(20))))
                            .await;
                    }
                }
            };
            let Some(last) = rows.last() else {
                break;
            };
            cursor = Some(
                (0..pk.len())
                    .map(|i| last.as_ref(i).cloned().unwrap_or(Value::NULL))
                    .collect(),
            );
            done += rows.len() as u64;
            let doing = match mode {
                Pass::Fill => "backfilling",
                Pass::Verify => "verifying",
            };
            progress(
                &ix.table,
                &ix.name,
                format!("{doing}: {done} row(s) read, now on {node}"),
            );
            if rate > 0 {
                let due = Duration::from_secs_f64(done as f64 / rate as f64);
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }
    Ok(done)
}

/// How many times a chunk gives way to writes before the build stops.
const GIVE_WAY: u32 = 500;

/// One chunk of a [`pass`] in its own transaction on the base node `c`: its rows read (with
/// shared locks, not waiting for a write's), their entries written and checked; the rows.
#[allow(clippy::too_many_arguments)]
async fn chunk(
    c: &mut Conn,
    index_conns: &mut BTreeMap<usize, Conn>,
    t: &Topology,
    ix: &GlobalIndex,
    pk: &[String],
    cursor: Option<&[Value]>,
    weights: Option<&Weights>,
    mode: Pass,
) -> Result<Vec<Row>, MyError> {
    let Some(TableRule::HashSlot { map, .. }) = t.table(&ix.index_table) else {
        return Err(MyError::internal(format!(
            "`{}` has no hash_slot rule",
            ix.index_table
        )));
    };
    let node = "the base table's node";
    c.query_drop("START TRANSACTION")
        .await
        .map_err(|e| failed(node, e))?;
    let after = match cursor {
        None => String::new(),
        Some(v) => format!(
            " WHERE ({}) > ({})",
            pk.join(", "),
            v.iter().map(literal).collect::<Vec<_>>().join(", ")
        ),
    };
    let sql = format!(
        "SELECT {}, {}, {} FROM {}{after} ORDER BY {} LIMIT {CHUNK} LOCK IN SHARE MODE NOWAIT",
        pk.join(", "),
        quoted(&ix.shard_column),
        quoted(&ix.column),
        quoted(&ix.table),
        pk.join(", ")
    );
    let rows: Vec<Row> = c.query(sql).await.map_err(|e| failed(node, e))?;
    // Entries by the index node their hash names: (hash, value, key).
    let mut by_node: BTreeMap<usize, Vec<(Vec<u8>, Value, Value)>> = BTreeMap::new();
    for r in &rows {
        let key = r.as_ref(pk.len()).cloned().unwrap_or(Value::NULL);
        let v = r.as_ref(pk.len() + 1).cloned().unwrap_or(Value::NULL);
        if v == Value::NULL {
            continue;
        }
        let h = ix
            .hash_of(&v, "utf8mb4", false, weights)
            .map_err(|e| unsupported(format!("a row of `{}`: {e}", ix.table)))?;
        let Some(at) = map
            .place(&Value::Bytes(h.clone()))
            .and_then(|p| p.row_node(None))
        else {
            return Err(MyError::internal(
                "an index hash without a node".to_string(),
            ));
        };
        by_node.entry(at).or_default().push((h, v, key));
    }
    for (at, entries) in &by_node {
        if !index_conns.contains_key(at) {
            let mut conn = Conn::new(t.nodes[*at].opts.clone())
                .await
                .map_err(|e| failed(t.node_name(*at), e))?;
            // A write holding an entry's lock makes the chunk give way, not wait.
            conn.query_drop("SET SESSION innodb_lock_wait_timeout = 1")
                .await
                .map_err(|e| failed(t.node_name(*at), e))?;
            index_conns.insert(*at, conn);
        }
        let Some(ic) = index_conns.get_mut(at) else {
            continue;
        };
        check_entries(ic, ix, entries, mode)
            .await
            .map_err(|e| match e {
                Check::Failed(e) => failed(t.node_name(*at), e),
                Check::Duplicate(m) => MyError::new(1062, m),
                Check::Missing(m) => MyError::new(1105, m),
            })?;
    }
    c.query_drop("COMMIT").await.map_err(|e| failed(node, e))?;
    Ok(rows)
}

enum Check {
    Failed(mysql_async::Error),
    Duplicate(String),
    Missing(String),
}

/// Writes entries on one index node (an entry there already stays) unless verifying, then
/// checks that each is there pointing at its row: a unique index's value held by another
/// row is a duplicate. One missing is written again (its row's write came and went between
/// the two statements); when verifying, looked for again a little later (a write's commit
/// on the index node may trail its commit on the row's), then it is an error.
async fn check_entries(
    ic: &mut Conn,
    ix: &GlobalIndex,
    entries: &[(Vec<u8>, Value, Value)],
    mode: Pass,
) -> Result<(), Check> {
    let tuples: Vec<String> = entries
        .iter()
        .map(|(h, v, k)| format!("({}, {}, {})", hash_literal(h), literal(v), literal(k)))
        .collect();
    let hashes: Vec<String> = entries.iter().map(|(h, _, _)| hash_literal(h)).collect();
    let mut missing = Vec::new();
    for attempt in 0..5 {
        if mode == Pass::Fill {
            ic.query_drop(format!(
                "INSERT IGNORE INTO {} ({}, {}, {}) VALUES {}",
                quoted(&ix.index_table),
                quoted(HASH_COLUMN),
                quoted(&ix.column),
                quoted(&ix.shard_column),
                tuples.join(", ")
            ))
            .await
            .map_err(Check::Failed)?;
        } else if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let found: Vec<(Vec<u8>, Vec<u8>)> = ic
            .query(format!(
                "SELECT {}, CAST({} AS BINARY) FROM {} WHERE {} IN ({})",
                quoted(HASH_COLUMN),
                quoted(&ix.shard_column),
                quoted(&ix.index_table),
                quoted(HASH_COLUMN),
                hashes.join(", ")
            ))
            .await
            .map_err(Check::Failed)?;
        let text = |v: &Value| crate::value::text_form(v).unwrap_or_default();
        missing.clear();
        for (h, v, k) in entries {
            let keys: Vec<&Vec<u8>> = found
                .iter()
                .filter(|(fh, _)| fh == h)
                .map(|(_, k)| k)
                .collect();
            if keys.contains(&&text(k)) {
                continue;
            }
            if ix.unique && !keys.is_empty() {
                return Err(Check::Duplicate(format!(
                    "the unique global index `{}` cannot be built: `{}` = '{}' is held by rows with `{}` = {} and {}; the index stays write_only",
                    ix.name,
                    ix.column,
                    String::from_utf8_lossy(&text(v)),
                    ix.shard_column,
                    String::from_utf8_lossy(keys[0]),
                    String::from_utf8_lossy(&text(k)),
                )));
            }
            missing.push(String::from_utf8_lossy(&text(k)).into_owned());
        }
        if missing.is_empty() {
            return Ok(());
        }
    }
    Err(Check::Missing(format!(
        "rows of `{}` with `{}` = {} have no entry in the global index `{}` once built (a write that did not keep it: a proxy without the index in its rules?); the index stays write_only: run CREATE GLOBAL INDEX again",
        ix.table,
        ix.shard_column,
        missing.join(", "),
        ix.name
    )))
}

pub async fn drop(
    shared: &Shared,
    t: &Topology,
    text: &str,
    rules: Option<&Path>,
) -> Result<Answer, MyError> {
    let (name, table, _, _, _) = parse(text)?;
    let path = rules.ok_or_else(|| unsupported("this proxy was not started from a rules file"))?;
    let Some(ix) = t
        .indexes_of(&table)
        .and_then(|l| l.iter().find(|i| i.name == name))
        .cloned()
    else {
        return Err(unsupported(format!(
            "`{table}` has no global index `{name}`"
        )));
    };
    let nodes = t
        .table(&ix.index_table)
        .map(|r| r.all_nodes(t))
        .unwrap_or_default();
    let version = apply(
        shared,
        t,
        path,
        &Change {
            table: &table,
            name: &name,
            index_table: &ix.index_table,
            definition: None,
            owners: None,
        },
    )
    .await?;
    // Statements that still keep the index finish before its table goes.
    if let Err(why) = settle(shared, t, version, SETTLE).await {
        return Err(unsupported(format!(
            "the index is dropped from the rules, but {why}: its table `{}` is kept; drop it by hand once they are done",
            ix.index_table
        )));
    }
    for n in nodes {
        if let Ok(mut c) = Conn::new(t.nodes[n].opts.clone()).await {
            let _ = c
                .query_drop(format!("DROP TABLE IF EXISTS {}", quoted(&ix.index_table)))
                .await;
        }
    }
    if let Ok(mut p) = PROGRESS.lock() {
        p.remove(&(table.clone(), name.clone()));
    }
    Ok(Answer::Done(format!(
        "global index `{name}` of `{table}` dropped, and its table `{}`",
        ix.index_table
    )))
}
