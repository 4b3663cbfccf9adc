//! Gather ([`crate::plan::gather`]): the rows of each table not on the gathering node are
//! copied into a temporary table there, with the table's own definition, then the statement
//! runs there against the copies; the copies are dropped after, whatever happened.
//!
//! A node's rows arrive in the text protocol and go back as literals chosen by the column's
//! type: numbers as they came, dates and times quoted, binary strings as `X'..'` and text as
//! `_charset X'..'` in the character set the node sent it in, so no escaping and no SQL mode
//! can change a value on the way. Inside a transaction the reads join it like any read.

use mysql_common::packets::Column;
use mysql_common::value::Value;

use super::door::{Access, Door, NodeError, NodeResult, Prepared, Run, Sink, Stmt};
use super::inline::Carry;
use super::route;
use super::txn::Transactions;
use crate::error::MyError;
use crate::merge::Row;
use crate::plan::gather::{Gather, Ship};
use crate::sql::lex::Mode;
use crate::sql::write::quoted;

/// MySQL's ER_PARSE_ERROR: a node without JSON_TABLE (MariaDB before 10.6) answers it to
/// rows carried inside a statement.
pub(super) const ER_PARSE_ERROR: u16 = 1064;

/// An INSERT of copied rows is sent once it holds this many bytes.
const BATCH_BYTES: usize = 512 * 1024;

/// Runs a gathered statement (`cap`: rows the copies may hold in all).
pub async fn run<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    g: &Gather,
    cap: u64,
    access: Access,
) -> Result<(), NodeError> {
    let mut seen = Warned {
        inner: sink,
        warnings: 0,
    };
    // A binary-protocol answer comes from a statement prepared on the node and kept by its
    // text: rows carried in it go as a parameter, so that text stays the same.
    let mut inline = if seen.binary() {
        Inline::Param
    } else {
        Inline::Literal
    };
    let (r, made_temp) = loop {
        let made = copy_all(door, &g.ships, &[g.node], cap, inline).await;
        // The copies made as temporary tables (every one, when making them failed).
        let mut made_temp: Vec<&Ship> = g.ships.iter().collect();
        let mut carried = false;
        let r = match made.and_then(|inlined| {
            made_temp.retain(|s| !inlined.iter().any(|c| c.temp == s.temp));
            carried = !inlined.is_empty();
            with_inlined(g, inlined, door.state().mode)
        }) {
            Ok(carrying) => {
                let stmt = match &carrying {
                    Some((sql, params)) => Stmt::new(sql, params),
                    None => Stmt::new(&g.sql, &g.params),
                };
                route::single(door, &mut seen, g.node, stmt, access).await
            }
            Err(e) => Err(e),
        };
        // A node without JSON_TABLE (MariaDB before 10.6) cannot parse the rows carried
        // inside the statement, and answers before any row: made as tables instead.
        match r {
            Err(e) if carried && e.error.code == ER_PARSE_ERROR => {
                drop_temps(door, &made_temp, &[g.node], false).await?;
                inline = Inline::No;
            }
            r => break (r, made_temp),
        }
    };
    // Dropping the copies would empty the node's warnings (GROUP_CONCAT cut at
    // group_concat_max_len) before the client's SHOW WARNINGS reads them there: copies of a
    // statement with warnings stay until the next gathered statement replaces them, or the
    // session ends.
    if r.is_ok() && seen.warnings > 0 {
        return r;
    }
    drop_temps(door, &made_temp, &[g.node], r.is_ok())
        .await
        .and(r)
}

/// Whether a bound copy's few rows may travel inside the statement, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inline {
    /// Always a temporary table.
    No,
    /// Written in, as a literal.
    Literal,
    /// As a parameter of their own (a statement the node prepares and keeps by its text).
    Param,
}

/// A copy that travels inside the gathered statement instead of a temporary table.
pub struct Carried {
    /// Its temporary table's name, not made.
    temp: String,
    /// Where the gathered statement names it ([`crate::plan::bind::Bind::at`]).
    at: (usize, usize),
    /// The derived table of its rows, to stand there.
    rows: Carry,
}

/// The gathered statement and its parameters with each copy that travels inside it in its
/// place; `None`: as planned.
fn with_inlined(
    g: &Gather,
    mut inlined: Vec<Carried>,
    mode: Mode,
) -> Result<Option<(String, Vec<Value>)>, NodeError> {
    if inlined.is_empty() {
        return Ok(None);
    }
    // From the end, so that the spans before stay where they are.
    inlined.sort_by_key(|c| std::cmp::Reverse(c.at));
    let mut sql = g.sql.clone();
    let mut params = g.params.clone();
    for c in &inlined {
        sql = c
            .rows
            .place(&sql, &mut params, c.at, mode)
            .ok_or_else(|| NodeError {
                node: g.node,
                error: MyError::internal("shardproxy: a copy's place in the statement is lost"),
                broke: false,
            })?;
    }
    Ok(Some((sql, params)))
}

/// A sink that notes the warnings of what it passes on.
struct Warned<'k, K> {
    inner: &'k mut K,
    warnings: u16,
}

impl<K: Sink> Sink for Warned<'_, K> {
    fn binary(&self) -> bool {
        self.inner.binary()
    }
    fn multi_results(&self) -> bool {
        self.inner.multi_results()
    }
    fn columns(&mut self, cols: &[Column], status: mysql_common::constants::StatusFlags) {
        self.inner.columns(cols, status)
    }
    fn row(&mut self, row: &[Option<Value>], cols: &[Column]) {
        self.inner.row(row, cols)
    }
    fn raw_row(&mut self, payload: &[u8]) {
        self.inner.raw_row(payload)
    }
    fn end(&mut self, status: mysql_common::constants::StatusFlags, warnings: u16, more: bool) {
        self.warnings = self.warnings.saturating_add(warnings);
        self.inner.end(status, warnings, more)
    }
    fn ok(
        &mut self,
        ok: &super::door::OkInfo,
        status: mysql_common::constants::StatusFlags,
        more: bool,
    ) {
        self.warnings = self.warnings.saturating_add(ok.warnings);
        self.inner.ok(ok, status, more)
    }
    async fn flush_some(&mut self) -> std::io::Result<()> {
        self.inner.flush_some().await
    }
    fn written(&self) -> u64 {
        self.inner.written()
    }
}

/// Prepares a gathered statement on its node (empty copies stand in for the tables), for the
/// client's COM_STMT_PREPARE.
pub async fn prepare<D: Door>(door: &mut D, g: &Gather) -> Result<Prepared, NodeError> {
    let mut r = Ok(());
    for s in &g.ships {
        r = async {
            let create = temporary(s, &definition(door, s).await?)?;
            door.run_on(g.node, &create).await
        }
        .await;
        if r.is_err() {
            break;
        }
    }
    let r = match r {
        Ok(()) => door.prepare(g.node, &g.sql).await,
        Err(e) => Err(e),
    };
    drop_copies(door, &g.ships, &[g.node], r.is_ok())
        .await
        .and(r)
}

/// Runs the statement after it outside strict mode, the session's other modes kept.
const LENIENT: &str = "SET STATEMENT sql_mode = REPLACE(REPLACE(@@sql_mode, 'STRICT_TRANS_TABLES', ''), 'STRICT_ALL_TABLES', '') FOR ";

/// Creates each copy on every target node and fills it: a target's own rows with INSERT ...
/// SELECT there, other nodes' read once through the proxy and inserted on each target.
///
/// A copy bound by a join's keys, on one target, whose rows are few and travel as text
/// ([`super::inline`]), unless `inline` is [`Inline::No`], is not made: it is returned, to
/// be carried.
pub async fn copy_all<D: Door>(
    door: &mut D,
    ships: &[Ship],
    targets: &[usize],
    cap: u64,
    inline: Inline,
) -> Result<Vec<Carried>, NodeError> {
    // Inside a transaction a node's own rows are read in its branch, like the others'.
    door.enter(targets, Access::Read).await?;
    let mut copied = 0u64;
    let mut inlined = Vec::new();
    for s in ships {
        let (text, keys) = definition_and_keys(door, s).await?;
        let few = inline != Inline::No
            && keys
                .as_ref()
                .is_some_and(|k| k.len() <= super::inline::MAX_ROWS);
        if let (Some(b), Some(k)) = (&s.bind, &keys) {
            if k.past_limit() {
                door.overflowed(&b.keys);
            }
        }
        let bound = match (&s.bind, keys) {
            (Some(b), Some(keys)) => match &b.by_index {
                Some(ix) => super::bind::index_reads(door, b, ix, keys).await?,
                None => super::bind::reads_of(b, keys, &text),
            },
            _ => None,
        };
        let at = s.bind.as_ref().and_then(|b| b.at);
        if let (Some(reads), [_], Some(at), true) = (&bound, targets, at, few) {
            let param = inline == Inline::Param;
            if let Some(rows) = carry(door, s, reads, &text, cap, param, &mut copied).await? {
                inlined.push(Carried {
                    temp: s.temp.clone(),
                    at,
                    rows,
                });
                continue;
            }
        }
        let create = temporary(s, &text)?;
        if targets.len() > 1 {
            for &t in targets {
                door.run_on(t, &create).await?;
            }
        }
        let how = match (&bound, s.bind.as_ref().and_then(|b| b.by_index.as_ref())) {
            (Some(_), Some(_)) => "indexed",
            (Some(_), None) => "bound",
            (None, _) => "whole",
        };
        let before = copied;
        let reads = bound.as_deref().unwrap_or(&s.reads);
        if let [target] = targets {
            // One target (a gathered statement): its own rows make the copy there
            // (`CREATE ... SELECT`) while the other nodes' rows are read, all at once, then
            // inserted together.
            let mut own = reads.iter().filter(|(n, _)| n == target);
            let make = match own.next() {
                Some((_, select)) => format!("{LENIENT}{create} {select}"),
                None => create,
            };
            let mut at_once: Vec<(usize, Stmt<'_>)> = vec![(*target, Stmt::new(&make, &[]))];
            at_once.extend(
                reads
                    .iter()
                    .filter(|(n, _)| n != target)
                    .map(|(n, select)| (*n, Stmt::new(select, &[]))),
            );
            let mut out = Inserts::new(&s.temp, cap, &mut copied);
            read_into(door, &at_once, &mut out).await?;
            for (_, select) in own {
                let sql = format!("{LENIENT}INSERT INTO {} {select}", quoted(&s.temp));
                door.run_on(*target, &sql).await?;
            }
            for sql in out.finish() {
                door.run_on(*target, &sql).await?;
            }
            door.count_copied(how, copied - before);
            continue;
        }
        for (node, select) in reads {
            if targets.contains(node) {
                // Without strict mode for this statement: its SELECT's conversions (a
                // string compared with a number) warn, as the client's SELECT would, where
                // strict mode makes them errors of an INSERT.
                let sql = format!("{LENIENT}INSERT INTO {} {select}", quoted(&s.temp));
                door.run_on(*node, &sql).await?;
            }
            if targets.iter().all(|t| t == node) {
                continue;
            }
            let batches = read_rows(door, *node, select, &s.temp, cap, &mut copied).await?;
            for &t in targets.iter().filter(|t| *t != node) {
                for sql in &batches {
                    door.run_on(t, sql).await?;
                }
            }
        }
        door.count_copied(how, copied - before);
    }
    Ok(inlined)
}

/// A bound copy's rows read from every node (the gathering node's too) into the derived
/// table that stands in for the copy ([`super::inline`]), the rows a parameter of their own
/// when `param`; `None` when the table's columns or its rows cannot travel so, and a
/// temporary table must be made.
async fn carry<D: Door>(
    door: &mut D,
    s: &Ship,
    reads: &[(usize, String)],
    definition: &str,
    cap: u64,
    param: bool,
    copied: &mut u64,
) -> Result<Option<Carry>, NodeError> {
    let Some(shape) = super::inline::shape(definition) else {
        return Ok(None);
    };
    let stmts: Vec<(usize, Stmt<'_>)> = reads
        .iter()
        .map(|(n, select)| (*n, Stmt::new(select, &[])))
        .collect();
    let mut doc = super::inline::Doc::new(&shape);
    read_into(door, &stmts, &mut doc).await?;
    let rows = doc.rows() as u64;
    let Some(table) = doc.table(param) else {
        return Ok(None);
    };
    *copied += rows;
    if *copied > cap {
        return Err(too_many_rows(s.definition, cap));
    }
    door.count_copied("inline", rows);
    Ok(Some(table))
}

/// The error of a statement whose copies pass `max_rows_per_statement`.
fn too_many_rows(node: usize, cap: u64) -> NodeError {
    NodeError {
        node,
        error: MyError::new(
            crate::plan::ER_NOT_SUPPORTED_YET,
            format!(
                "shardproxy: this query copies more than {cap} rows to one node (max_rows_per_statement); narrow it"
            ),
        ),
        broke: false,
    }
}

/// What rows read from the nodes are collected into.
trait Collect {
    fn row(&mut self, node: usize, row: &Row, cols: &[Column]) -> Result<(), NodeError>;
}

impl Collect for super::inline::Doc<'_> {
    fn row(&mut self, _node: usize, row: &Row, cols: &[Column]) -> Result<(), NodeError> {
        super::inline::Doc::row(self, row, cols);
        Ok(())
    }
}

/// A copied table's `SHOW CREATE TABLE` text, read once for every node its copy is made
/// on, and, for a copy bound by a join's keys, those keys: both at once, the definition
/// read on another node of the table where the keys' node is the one planned for it (every
/// node of a table holds the same definition).
async fn definition_and_keys<D: Door>(
    door: &mut D,
    s: &Ship,
) -> Result<(String, Option<super::bind::Keys>), NodeError> {
    let other = |b: &crate::plan::bind::Bind| {
        if b.node == s.definition {
            b.map.nodes().into_iter().find(|n| *n != b.node)
        } else {
            Some(s.definition)
        }
    };
    let Some((b, at)) = s.bind.as_ref().and_then(|b| Some((b, other(b)?))) else {
        let text = definition(door, s).await?;
        let keys = match &s.bind {
            Some(b) => Some(super::bind::read_keys(door, b).await?),
            None => None,
        };
        return Ok((text, keys));
    };
    let show = show_create(s);
    let stmts = [
        (at, Stmt::new(&show, &[])),
        (b.node, Stmt::new(&b.keys, &[])),
    ];
    let results = door.start_all(&stmts, Run::TEXT_READ).await?;
    let mut ress = super::scatter::started(results).await?.into_iter();
    let (Some(def), Some(keys)) = (ress.next(), ress.next()) else {
        return Err(NodeError {
            node: at,
            error: MyError::internal("shardproxy: a started read is missing"),
            broke: false,
        });
    };
    // Both read to their end before either's error is the answer.
    let def = super::scatter::drain(def).await;
    let keys = super::bind::keys(keys).await;
    let rows = def?;
    let text = created(&rows);
    Ok((text, Some(keys?)))
}

fn show_create(s: &Ship) -> String {
    show_create_of(&s.table)
}

/// The statement reading `table`'s definition.
pub(super) fn show_create_of(table: &str) -> String {
    format!("SHOW CREATE TABLE {}", quoted(table))
}

/// A copied table's `SHOW CREATE TABLE` text.
async fn definition<D: Door>(door: &mut D, s: &Ship) -> Result<String, NodeError> {
    let rows = door.fetch(s.definition, &show_create(s)).await?;
    Ok(create_text(rows.first().and_then(|r| r.get(1))))
}

/// `SHOW CREATE TABLE`'s second column as text.
fn create_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    }
}

/// The definition `SHOW CREATE TABLE`'s rows (as a result's rows) give.
pub(super) fn created(rows: &[Row]) -> String {
    create_text(rows.first().and_then(|r| r.get(1)).and_then(Option::as_ref))
}

/// The statement that makes the temporary table of `s` from its definition's `text`.
fn temporary(s: &Ship, text: &str) -> Result<String, NodeError> {
    let sql = temporary_definition(text, &s.temp).map_err(|why| NodeError {
        node: s.definition,
        error: MyError::new(
            crate::plan::ER_NOT_SUPPORTED_YET,
            format!(
                "shardproxy: cannot copy `{}` to run this query on one node: {why}",
                s.table
            ),
        ),
        broke: false,
    })?;
    // One left by an earlier statement (kept for its warnings) is replaced.
    Ok(sql.replacen(
        "CREATE TEMPORARY TABLE",
        "CREATE OR REPLACE TEMPORARY TABLE",
        1,
    ))
}

/// Drops the copies; `report`: a failure to drop is the statement's error (else the
/// statement's own error stands).
pub async fn drop_copies<D: Door>(
    door: &mut D,
    ships: &[Ship],
    targets: &[usize],
    report: bool,
) -> Result<(), NodeError> {
    let ships: Vec<&Ship> = ships.iter().collect();
    drop_temps(door, &ships, targets, report).await
}

/// [`drop_copies`] of some copies.
async fn drop_temps<D: Door>(
    door: &mut D,
    ships: &[&Ship],
    targets: &[usize],
    report: bool,
) -> Result<(), NodeError> {
    if ships.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = ships.iter().map(|s| quoted(&s.temp)).collect();
    let sql = format!("DROP TEMPORARY TABLE IF EXISTS {}", names.join(", "));
    let mut first = Ok(());
    for &t in targets {
        let r = door.run_on(t, &sql).await;
        if first.is_ok() {
            first = r;
        }
    }
    match first {
        Err(e) if report => Err(e),
        _ => Ok(()),
    }
}

/// The rows `select` reads on `node`, as INSERTs into `temp`.
async fn read_rows<D: Door>(
    door: &mut D,
    node: usize,
    select: &str,
    temp: &str,
    cap: u64,
    copied: &mut u64,
) -> Result<Vec<String>, NodeError> {
    let mut out = Inserts::new(temp, cap, copied);
    read_into(door, &[(node, Stmt::new(select, &[]))], &mut out).await?;
    Ok(out.finish())
}

/// Reads each statement's rows into `out`: all at once where their nodes are distinct,
/// else one after the other.
async fn read_into<D: Door>(
    door: &mut D,
    stmts: &[(usize, Stmt<'_>)],
    out: &mut impl Collect,
) -> Result<(), NodeError> {
    let run = Run::TEXT_READ;
    let mut nodes: Vec<usize> = stmts.iter().map(|(n, _)| *n).collect();
    nodes.sort_unstable();
    nodes.dedup();
    if nodes.len() == stmts.len() && stmts.len() > 1 {
        let results = door.start_all(stmts, run).await?;
        let ress = super::scatter::started(results).await?;
        let mut failed = None;
        for (res, (node, _)) in ress.into_iter().zip(stmts) {
            if failed.is_none() {
                if let Err(e) = drain_into(res, *node, out).await {
                    failed = Some(e);
                }
            } else {
                let _ = res.finish().await;
            }
        }
        return failed.map_or(Ok(()), Err);
    }
    for (node, stmt) in stmts {
        let res = door.start(*node, *stmt, run).await?;
        drain_into(res, *node, out).await?;
    }
    Ok(())
}

/// One started read's rows into `out`, and its end.
async fn drain_into<R: NodeResult>(
    mut res: R,
    node: usize,
    out: &mut impl Collect,
) -> Result<(), NodeError> {
    let Some(cols) = res.columns() else {
        return res.finish().await;
    };
    loop {
        match res.next().await {
            Ok(Some(row)) => {
                if let Err(e) = out.row(node, &row, &cols) {
                    let _ = res.finish().await;
                    return Err(e);
                }
            }
            Ok(None) => break,
            Err(e) => {
                let _ = res.finish().await;
                return Err(e);
            }
        }
    }
    res.finish().await
}

/// Copied rows as INSERTs into a temporary table, each sent once it holds [`BATCH_BYTES`];
/// bounded in rows (`cap`, over every copy of the statement) and in bytes held.
struct Inserts<'a> {
    head: String,
    out: Vec<String>,
    sql: String,
    held: usize,
    cap: u64,
    copied: &'a mut u64,
}

impl Collect for Inserts<'_> {
    fn row(&mut self, node: usize, row: &Row, cols: &[Column]) -> Result<(), NodeError> {
        Inserts::row(self, node, row, cols)
    }
}

impl<'a> Inserts<'a> {
    fn new(temp: &str, cap: u64, copied: &'a mut u64) -> Self {
        Inserts {
            head: format!("INSERT INTO {} VALUES ", quoted(temp)),
            out: Vec::new(),
            sql: String::new(),
            held: 0,
            cap,
            copied,
        }
    }

    fn row(&mut self, node: usize, row: &Row, cols: &[Column]) -> Result<(), NodeError> {
        *self.copied += 1;
        if *self.copied > self.cap {
            return Err(too_many_rows(node, self.cap));
        }
        if self.sql.is_empty() {
            self.sql.push_str(&self.head);
        } else {
            self.sql.push(',');
        }
        tuple(row, cols, &mut self.sql);
        if self.sql.len() >= BATCH_BYTES {
            self.held += self.sql.len();
            self.out.push(std::mem::take(&mut self.sql));
            // The batches wait for the reads to end (the door serves one statement at a
            // time): bounded in bytes as the copy is in rows.
            if self.held > super::held::HELD_BYTES {
                return Err(NodeError {
                    node,
                    error: super::held::too_many_bytes(
                        "this query's copies to one node would hold",
                    ),
                    broke: false,
                });
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Vec<String> {
        if !self.sql.is_empty() {
            self.out.push(std::mem::take(&mut self.sql));
        }
        self.out
    }
}

/// A row as a `(...)` tuple of literals ([`literal`]).
pub fn tuple(row: &Row, cols: &[Column], out: &mut String) {
    out.push('(');
    for (i, v) in row.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match cols.get(i) {
            Some(c) => crate::sql::write::typed(out, v.as_ref(), c),
            None => out.push_str("NULL"),
        }
    }
    out.push(')');
}

/// `SHOW CREATE TABLE`'s text as a temporary table named `temp`: no foreign keys and no
/// partitions (a temporary table can have neither), no AUTO_INCREMENT start.
pub fn temporary_definition(create: &str, temp: &str) -> Result<String, String> {
    let Some(rest) = create.strip_prefix("CREATE TABLE ") else {
        return Err("it is not a base table (a view or a sequence)".into());
    };
    let open = rest
        .find(" (\n")
        .ok_or_else(|| "its definition is not in the form SHOW CREATE TABLE prints".to_string())?;
    let body_and_tail = &rest[open + 3..];
    let close = body_and_tail
        .find("\n)")
        .ok_or_else(|| "its definition is not in the form SHOW CREATE TABLE prints".to_string())?;
    let body = &body_and_tail[..close];
    // `SELECT *` leaves INVISIBLE columns out: their copies would read NULL.
    if super::inline::has_invisible(body) {
        return Err("it has INVISIBLE columns, which its rows are read without".into());
    }
    let mut tail = body_and_tail[close + 2..].to_string();
    let lines: Vec<&str> = body
        .split('\n')
        .map(|l| l.trim_end().trim_end_matches(','))
        .filter(|l| {
            let t = l.trim_start();
            !(t.contains("FOREIGN KEY")
                && (t.starts_with("CONSTRAINT") || t.starts_with("FOREIGN KEY")))
        })
        .collect();
    for cut in [
        "\n PARTITION BY",
        "\nPARTITION BY",
        " PARTITION BY",
        "/*!50100 PARTITION BY",
    ] {
        if let Some(i) = tail.find(cut) {
            tail.truncate(i);
        }
    }
    if let Some(i) = tail.find(" AUTO_INCREMENT=") {
        let end = tail[i + 16..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(tail.len(), |e| i + 16 + e);
        tail.replace_range(i..end, "");
    }
    Ok(format!(
        "CREATE TEMPORARY TABLE {} (\n{}\n){}",
        quoted(temp),
        lines.join(",\n"),
        tail
    ))
}

#[cfg(test)]
#[path = "gather_tests.rs"]
mod tests;
