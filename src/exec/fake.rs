//! The logging fake door (tests only): records each node's SQL, replays canned answers, and
//! fails a chosen node (a server error, a connection that breaks, rows that stop midway, a
//! node that is down), so every primitive is tested without a server. Its session state
//! (transaction, sticky node, insert id) follows the real door's rules.

use std::collections::HashSet;
use std::io;
use std::sync::Arc;

use mysql_common::constants::{ColumnType, StatusFlags};
use mysql_common::packets::Column;
use mysql_common::value::Value;

use super::door::{Door, NodeError, NodeResult, OkInfo, Prepared, Run, Sink, Stmt};
use super::txn::state::SessionState;
use super::txn::Transactions;
use crate::config::TxMode;
use crate::error::MyError;
use crate::merge::Row;

/// A canned answer.
#[derive(Debug, Clone)]
pub enum Canned {
    Rows {
        cols: Arc<[Column]>,
        rows: Vec<Row>,
        /// After this many rows the stream fails (a node killed mid-result).
        fail_after: Option<usize>,
    },
    Ok(OkInfo),
    /// Several results (a CALL).
    Many(Vec<Canned>),
}

impl Canned {
    /// A result set of string columns (`None` for `"NULL"`).
    pub fn rows(names: &[&str], rows: &[&[&str]]) -> Canned {
        let cols: Vec<(&str, ColumnType)> = names
            .iter()
            .map(|n| (*n, ColumnType::MYSQL_TYPE_VAR_STRING))
            .collect();
        Canned::typed(&cols, rows)
    }

    /// A result set with column types (values given as their text).
    pub fn typed(cols: &[(&str, ColumnType)], rows: &[&[&str]]) -> Canned {
        let cols: Vec<Column> = cols
            .iter()
            .map(|(n, t)| Column::new(*t).with_name(n.as_bytes()))
            .collect();
        let rows = rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|v| (*v != "NULL").then(|| Value::Bytes(v.as_bytes().to_vec())))
                    .collect()
            })
            .collect();
        Canned::Rows {
            cols: cols.into(),
            rows,
            fail_after: None,
        }
    }

    pub fn ok(affected: u64, last_insert_id: u64) -> Canned {
        Canned::Ok(OkInfo {
            affected,
            last_insert_id,
            warnings: 0,
            info: String::new(),
        })
    }

    /// These rows, then the connection breaks after `n` of them.
    pub fn failing_after(self, n: usize) -> Canned {
        match self {
            Canned::Rows { cols, rows, .. } => Canned::Rows {
                cols,
                rows,
                fail_after: Some(n),
            },
            other => other,
        }
    }
}

/// Which statements an answer or a failure applies to: a node (or any) and a piece of the
/// SQL text.
#[derive(Debug, Clone)]
struct Rule<T> {
    node: Option<usize>,
    contains: String,
    what: T,
}

impl<T> Rule<T> {
    fn matches(&self, node: usize, sql: &str) -> bool {
        self.node.is_none_or(|n| n == node) && sql.contains(&self.contains)
    }
}

#[derive(Debug, Clone)]
enum Failure {
    /// A server error; the times it is still given (`None`: always).
    Server(
        u16,
        String,
        Option<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
    ),
    Broken,
}

impl Failure {
    /// It still applies.
    fn live(&self) -> bool {
        match self {
            Failure::Server(_, _, Some(left)) => left.load(std::sync::atomic::Ordering::SeqCst) > 0,
            _ => true,
        }
    }
}

#[derive(Default)]
pub struct FakeDoor {
    nodes: usize,
    answers: Vec<Rule<Canned>>,
    failures: Vec<Rule<Failure>>,
    down: HashSet<usize>,
    log: Vec<(usize, String)>,
    /// Statements the proxy ran for itself outside the session (lookups).
    pub outside: Vec<(usize, String)>,
    state: SessionState,
    pub merged: u64,
    pub tier_counts: Vec<String>,
    pub lookups: Vec<(String, u64)>,
    /// `[server] transaction_mode`.
    pub mode: TxMode,
    xids: std::sync::atomic::AtomicU64,
    /// Nodes whose connection the door was told to close, in order.
    pub discarded: Vec<usize>,
    /// Transactions ended, by how.
    pub tx_counts: std::sync::Mutex<Vec<String>>,
    /// Rows copied into gathered statements' copies, by how they were read.
    pub copied: std::sync::Mutex<Vec<(String, u64)>>,
    /// Outer reads reported as past their plan's limit ([`Door::overflowed`]).
    pub overflowed: std::sync::Mutex<Vec<String>>,
    /// Nodes where a migration's row images could not be written.
    pub shadow_failures: std::sync::Mutex<Vec<usize>>,
    /// Nodes whose connection the session holds (`Door::holds`).
    pub held: HashSet<usize>,
    /// What `Door::collations` answers (the schema's collation of each result column);
    /// the statements it was asked about.
    pub collations: Option<Arc<[u16]>>,
    pub collations_asked: Vec<(usize, String)>,
    /// Tables' definitions kept ([`Door::kept_definition`]).
    pub definitions: std::sync::Mutex<std::collections::HashMap<String, Arc<str>>>,
    /// The bound values each statement was sent with, as [`FakeDoor::log`] lists them.
    pub bound: Vec<Vec<Value>>,
}

impl FakeDoor {
    pub fn new(nodes: usize) -> Self {
        FakeDoor {
            nodes,
            ..Default::default()
        }
    }

    /// `node` answers statements containing `contains` with `canned` (first rule wins).
    pub fn answer(&mut self, node: usize, contains: &str, canned: Canned) {
        self.answers.push(Rule {
            node: Some(node),
            contains: contains.into(),
            what: canned,
        });
    }

    /// Every node answers statements containing `contains` with `canned`.
    pub fn answer_any(&mut self, contains: &str, canned: Canned) {
        self.answers.push(Rule {
            node: None,
            contains: contains.into(),
            what: canned,
        });
    }

    /// `node` fails statements containing `contains` with a server error.
    pub fn fail_on(&mut self, node: usize, contains: &str, code: u16, message: &str) {
        self.failures.push(Rule {
            node: Some(node),
            contains: contains.into(),
            what: Failure::Server(code, message.into(), None),
        });
    }

    /// `node` fails the first `times` statements containing `contains` with a server error.
    pub fn fail_times(
        &mut self,
        node: usize,
        contains: &str,
        code: u16,
        message: &str,
        times: usize,
    ) {
        self.failures.push(Rule {
            node: Some(node),
            contains: contains.into(),
            what: Failure::Server(
                code,
                message.into(),
                Some(std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(
                    times,
                ))),
            ),
        });
    }

    /// `node`'s connection breaks on statements containing `contains`.
    pub fn break_on(&mut self, node: usize, contains: &str) {
        self.failures.push(Rule {
            node: Some(node),
            contains: contains.into(),
            what: Failure::Broken,
        });
    }

    /// `node` accepts no connection.
    pub fn down(&mut self, node: usize) {
        self.down.insert(node);
    }

    /// `(node, sql)` of every statement run in the session, in order.
    pub fn log(&self) -> Vec<(usize, String)> {
        self.log.clone()
    }

    /// The SQL each of `nodes` ran, in order.
    pub fn sql_on(&self, node: usize) -> Vec<String> {
        self.log
            .iter()
            .filter(|(n, _)| *n == node)
            .map(|(_, s)| s.clone())
            .collect()
    }

    fn check(&self, node: usize, sql: &str) -> Result<(), NodeError> {
        if node >= self.nodes || self.down.contains(&node) {
            return Err(NodeError {
                node,
                error: MyError::internal(format!("shardproxy: node `ds{node}` is unavailable")),
                broke: true,
            });
        }
        match self
            .failures
            .iter()
            .find(|f| f.matches(node, sql) && f.what.live())
        {
            Some(Rule {
                what: Failure::Server(code, message, left),
                ..
            }) => {
                if let Some(left) = left {
                    left.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                }
                Err(NodeError {
                    node,
                    error: MyError::new(*code, message.clone()),
                    broke: false,
                })
            }
            Some(Rule {
                what: Failure::Broken,
                ..
            }) => Err(broken(node)),
            None => Ok(()),
        }
    }

    fn canned(&self, node: usize, sql: &str) -> Canned {
        self.answers
            .iter()
            .find(|a| a.matches(node, sql))
            .map(|a| a.what.clone())
            .unwrap_or_else(|| Canned::ok(0, 0))
    }

    /// Fails `sql` on `node` if a rule says so, with the real door's consequences for the
    /// session (a broken connection loses its transaction, a deadlock ends it).
    fn check_in_session(&mut self, node: usize, sql: &str) -> Result<(), NodeError> {
        let r = self.check(node, sql);
        if let Err(e) = &r {
            if e.broke {
                self.state.lost(node);
            } else {
                self.state.failed(node, e.error.code);
            }
        }
        r
    }

    fn run_one(&mut self, node: usize, stmt: Stmt<'_>) -> Result<FakeRes, NodeError> {
        self.log.push((node, stmt.sql.to_string()));
        self.bound.push(stmt.params.to_vec());
        self.check_in_session(node, stmt.sql)?;
        let canned = self.canned(node, stmt.sql);
        let results = match canned {
            Canned::Many(v) => v,
            one => vec![one],
        };
        Ok(FakeRes {
            node,
            results,
            at: 0,
            row: 0,
            status: self.status(),
        })
    }
}

fn broken(node: usize) -> NodeError {
    NodeError {
        node,
        error: MyError::internal(format!(
            "shardproxy: node `ds{node}`: Input/output error: connection reset"
        )),
        broke: true,
    }
}

/// A canned answer being read.
pub struct FakeRes {
    node: usize,
    results: Vec<Canned>,
    at: usize,
    row: usize,
    status: StatusFlags,
}

impl NodeResult for FakeRes {
    fn columns(&self) -> Option<Arc<[Column]>> {
        match self.results.get(self.at) {
            Some(Canned::Rows { cols, .. }) if !cols.is_empty() => Some(cols.clone()),
            _ => None,
        }
    }

    async fn next(&mut self) -> Result<Option<Row>, NodeError> {
        match self.results.get(self.at) {
            Some(Canned::Rows {
                rows, fail_after, ..
            }) => {
                if fail_after.is_some_and(|n| self.row >= n) {
                    return Err(broken(self.node));
                }
                if let Some(r) = rows.get(self.row) {
                    self.row += 1;
                    return Ok(Some(r.clone()));
                }
                self.at += 1;
                self.row = 0;
                Ok(None)
            }
            Some(_) => {
                self.at += 1;
                Ok(None)
            }
            None => Ok(None),
        }
    }

    fn ok(&self) -> OkInfo {
        match self.results.get(self.at) {
            Some(Canned::Ok(ok)) => ok.clone(),
            _ => OkInfo::default(),
        }
    }

    fn warnings(&self) -> u16 {
        0
    }

    fn pending(&self) -> bool {
        self.at < self.results.len()
    }

    fn status(&self) -> StatusFlags {
        self.status
    }

    async fn finish(self) -> Result<(), NodeError> {
        Ok(())
    }
}

impl Door for FakeDoor {
    type Res<'a> = FakeRes;

    async fn start<'a>(
        &'a mut self,
        node: usize,
        stmt: Stmt<'a>,
        run: Run,
    ) -> Result<FakeRes, NodeError> {
        if self.down.contains(&node) {
            return Err(self.check(node, "").unwrap_err());
        }
        Transactions::enter(self, &[node], run.access).await?;
        self.state.last_node = Some(node);
        self.run_one(node, stmt)
    }

    async fn start_all<'a>(
        &'a mut self,
        stmts: &'a [(usize, Stmt<'a>)],
        run: Run,
    ) -> Result<Vec<Result<FakeRes, NodeError>>, NodeError> {
        if let Some((n, _)) = stmts.iter().find(|(n, _)| self.down.contains(n)) {
            return Err(self.check(*n, "").unwrap_err());
        }
        let nodes: Vec<usize> = stmts.iter().map(|(n, _)| *n).collect();
        Transactions::enter(self, &nodes, run.access).await?;
        self.state.last_node = stmts.first().map(|(n, _)| *n);
        Ok(stmts.iter().map(|(n, s)| self.run_one(*n, *s)).collect())
    }

    async fn fetch(&mut self, node: usize, sql: &str) -> Result<Vec<Vec<Value>>, NodeError> {
        let mut res = self.run_one(node, Stmt::new(sql, &[]))?;
        let mut out = Vec::new();
        while let Some(r) = res.next().await? {
            out.push(r.into_iter().map(|v| v.unwrap_or(Value::NULL)).collect());
        }
        Ok(out)
    }

    async fn fetch_outside(
        &mut self,
        node: usize,
        sql: &str,
    ) -> Result<Vec<Vec<Value>>, NodeError> {
        self.outside.push((node, sql.to_string()));
        self.check(node, sql)?;
        let mut res = FakeRes {
            node,
            results: vec![self.canned(node, sql)],
            at: 0,
            row: 0,
            status: StatusFlags::empty(),
        };
        let mut out = Vec::new();
        while let Some(r) = res.next().await? {
            out.push(r.into_iter().map(|v| v.unwrap_or(Value::NULL)).collect());
        }
        Ok(out)
    }

    async fn run_on(&mut self, node: usize, sql: &str) -> Result<(), NodeError> {
        let res = self.run_one(node, Stmt::new(sql, &[]))?;
        res.finish().await
    }

    async fn fetch_outside_all(
        &mut self,
        node: usize,
        sqls: &[&str],
    ) -> Result<Vec<Vec<Value>>, NodeError> {
        let mut last = Vec::new();
        for sql in sqls {
            last = self.fetch_outside(node, sql).await?;
        }
        Ok(last)
    }

    async fn check_syntax(&mut self, node: usize, sql: &str) -> Result<(), NodeError> {
        self.check(node, sql)
    }

    async fn prepare(&mut self, node: usize, sql: &str) -> Result<Prepared, NodeError> {
        self.check(node, sql)?;
        Ok(Prepared::default())
    }

    async fn collations(&mut self, node: usize, sql: &str) -> Option<Arc<[u16]>> {
        self.collations_asked.push((node, sql.to_string()));
        self.collations.clone()
    }

    async fn reachable(&mut self, node: usize) -> Result<(), MyError> {
        self.check(node, "").map_err(|e| e.error)
    }

    fn holds(&self, node: usize) -> bool {
        self.held.contains(&node)
    }

    fn name(&self, node: usize) -> String {
        format!("ds{node}")
    }

    fn state(&self) -> &SessionState {
        &self.state
    }

    fn state_mut(&mut self) -> &mut SessionState {
        &mut self.state
    }

    async fn use_db(&mut self, db: &str) -> Result<(), MyError> {
        let node = self.sticky(false, 0).unwrap_or(0);
        self.log.push((node, format!("USE `{db}`")));
        self.check(node, "USE").map_err(|e| e.error)
    }

    async fn set(&mut self, sql: &str) -> Result<(), MyError> {
        let node = self.sticky(false, 0).unwrap_or(0);
        self.log.push((node, sql.to_string()));
        self.check(node, sql).map_err(|e| e.error)
    }

    async fn kill(&mut self, id: u32, query_only: bool) -> Result<(), MyError> {
        self.log.push((
            usize::MAX,
            format!("KILL {}{id}", if query_only { "QUERY " } else { "" }),
        ));
        Ok(())
    }

    fn tx_mode(&self) -> TxMode {
        self.mode
    }

    fn new_xid(&self) -> String {
        let n = self.xids.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        format!("sp:test:{n}")
    }

    async fn run_each(&mut self, stmts: &[(usize, String)]) -> Vec<Result<(), NodeError>> {
        let mut out = Vec::with_capacity(stmts.len());
        for (node, sql) in stmts {
            self.log.push((*node, sql.clone()));
            out.push(self.check_in_session(*node, sql));
        }
        out
    }

    async fn decision_table(&mut self, node: usize) -> Result<String, NodeError> {
        let table = super::txn::decisions_in("db");
        let ddl = super::txn::decisions_ddl(&table);
        self.outside.push((node, ddl.clone()));
        self.check(node, &ddl)?;
        Ok(table)
    }

    fn forget_decision_table(&mut self, node: usize) {
        self.outside
            .push((node, "-- forget the decision table".into()));
    }

    fn discard(&mut self, node: usize) {
        self.discarded.push(node);
    }

    fn count_tx(&self, outcome: &str) {
        self.tx_counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(outcome.to_string());
    }

    fn shadow_failed(&self, node: usize, _error: &MyError) {
        self.shadow_failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(node);
    }

    fn count_merged(&self, _rows: u64) {}

    fn count_tier(&self, _mode: &str) {}

    fn count_lookups(&self, _outcome: &str, _n: u64) {}

    fn overflowed(&self, read: &str) {
        self.overflowed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(read.to_string());
    }

    fn count_copied(&self, how: &str, rows: u64) {
        self.copied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((how.to_string(), rows));
    }

    fn kept_definition(&self, table: &str) -> Option<Arc<str>> {
        self.definitions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(table)
            .cloned()
    }

    fn keep_definition(&self, table: &str, text: Option<&str>) {
        let mut kept = self.definitions.lock().unwrap_or_else(|e| e.into_inner());
        match text {
            Some(t) => kept.insert(table.to_string(), t.into()),
            None => kept.remove(table),
        };
    }
}

/// What a primitive wrote, as a test reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Columns(Vec<String>),
    Row(Vec<Option<String>>),
    /// A row packet passed on as a node sent it.
    Raw(Vec<u8>),
    End {
        warnings: u16,
        more: bool,
    },
    Ok {
        affected: u64,
        last_insert_id: u64,
        more: bool,
    },
}

/// A sink that records what it is given.
pub struct RecordSink {
    pub binary: bool,
    pub multi: bool,
    pub events: Vec<Event>,
}

impl RecordSink {
    pub fn text() -> Self {
        RecordSink {
            binary: false,
            multi: false,
            events: Vec::new(),
        }
    }

    /// The rows written, as text.
    pub fn rows(&self) -> Vec<Vec<Option<String>>> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Row(r) => Some(r.clone()),
                _ => None,
            })
            .collect()
    }

    /// Was a result set ended (an EOF written), as if complete?
    pub fn ended(&self) -> bool {
        self.events.iter().any(|e| matches!(e, Event::End { .. }))
    }

    /// The rows written, each as `a,b,c` (NULL for NULL).
    pub fn lines(&self) -> Vec<String> {
        self.rows()
            .into_iter()
            .map(|r| {
                r.into_iter()
                    .map(|v| v.unwrap_or_else(|| "NULL".into()))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect()
    }
}

fn text(v: &Value) -> String {
    crate::value::text_form(v)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|| "NULL".into())
}

impl Sink for RecordSink {
    fn binary(&self) -> bool {
        self.binary
    }

    fn multi_results(&self) -> bool {
        self.multi
    }

    fn columns(&mut self, cols: &[Column], _status: StatusFlags) {
        self.events.push(Event::Columns(
            cols.iter()
                .map(|c| String::from_utf8_lossy(c.name_ref()).into_owned())
                .collect(),
        ));
    }

    fn row(&mut self, row: &[Option<Value>], _cols: &[Column]) {
        self.events.push(Event::Row(
            row.iter().map(|v| v.as_ref().map(text)).collect(),
        ));
    }

    fn raw_row(&mut self, payload: &[u8]) {
        self.events.push(Event::Raw(payload.to_vec()));
    }

    fn end(&mut self, _status: StatusFlags, warnings: u16, more: bool) {
        self.events.push(Event::End { warnings, more });
    }

    fn ok(&mut self, ok: &OkInfo, _status: StatusFlags, more: bool) {
        self.events.push(Event::Ok {
            affected: ok.affected,
            last_insert_id: ok.last_insert_id,
            more,
        });
    }

    async fn flush_some(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn written(&self) -> u64 {
        self.events.len() as u64
    }
}
