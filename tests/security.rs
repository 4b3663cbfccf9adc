//! Security: every path a value takes to a node must keep it a value. The proxy keeps the
//! client's text byte for byte and writes the values it adds (bound parameters it inlines,
//! copied rows, keys) through one literal writer; here values that break naive escaping
//! (quotes, backslashes before quotes, NUL, `\' OR 1=1 -- `, `'; DROP TABLE t_canary; -- `,
//! multibyte and invalid UTF-8) go through one-node reads, scatter merges, range, directory
//! and time-tier tables, reads over copies, split INSERTs, INSERT ... SELECT, UPDATE /
//! DELETE, transactions over several nodes and a live slot move, in text (escaped as PyMySQL
//! escapes, and concatenated naively) and as bound parameters, under the default sql_mode,
//! `NO_BACKSLASH_ESCAPES` and `ANSI_QUOTES`. Every answer must equal one plain MariaDB's
//! holding the same rows, and `t_canary` must survive on every node. A client without
//! CLIENT_MULTI_STATEMENTS gets MariaDB's answer to stacked statements, and no second
//! statement runs anywhere.
//!
//! Cluster nodes 0..=2 are the proxy's `ds0..ds2`; node 3 is the reference (and holds the
//! metadata schema of the slot move). Each test has a database of its own on every node.
//! `SECURITY_ALL=1` prints every difference, not only the first 30.

mod common;

use std::time::{Duration, Instant};

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Row, Value};

const NODES: usize = 4;
const SHARDS: [usize; 3] = [0, 1, 2];
const REFERENCE: usize = 3;
const L3: [(u16, u16); 3] = [(0, 340), (341, 681), (682, 1023)];
const L2: [(u16, u16); 2] = [(0, 511), (512, 1023)];

/// Text values that end a naively escaped string early.
#[rustfmt::skip]
const NASTY: [&str; 16] = [
    "'", "\\", "\\'", "\\\\'", "\"", "''", "\0", "%", "_", "\\' OR 1=1 -- ",
    "'; DROP TABLE t_canary; -- ", "\\'; DROP TABLE t_canary; -- ", "é", "𝄞",
    "\\\"; DROP TABLE t_canary; -- ", "x\0' OR '1'='1",
];

/// Binary values, most of them not UTF-8.
#[rustfmt::skip]
const BINARY: [&[u8]; 6] = [
    b"\xff", b"\xc3", b"\x00\xff'\\", b"\xed\xa0\x80", b"\xbf\\'", b"\\\xff' OR 1=1 -- ",
];

fn cluster() -> &'static Cluster {
    Cluster::shared(NODES)
}

fn node_url(i: usize, db: &str) -> String {
    format!("mysql://root:root@127.0.0.1:{}/{db}", cluster().ports[i])
}

async fn connect(url: &str) -> Conn {
    Conn::new(Opts::from_url(url).expect("URL"))
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"))
}

/// Integer keys from `from` on that land on `node` of `layout`.
fn ids_on(layout: &Layout, node: usize, from: i64, count: usize) -> Vec<i64> {
    (from..)
        .filter(|k| node_of_key(layout, *k) == node)
        .take(count)
        .collect()
}

const CANARY: &str = "CREATE TABLE t_canary (x INT); INSERT INTO t_canary VALUES (1)";

/// A fresh database `db` on every node with `t_canary` (one row) and these tables.
async fn fresh_db(db: &str, ddl: &[&str]) -> Vec<Conn> {
    let mut nodes = Vec::new();
    for i in 0..NODES {
        let mut conn = connect(&node_url(i, "")).await;
        let init =
            format!("DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db}; USE {db}; {CANARY}");
        conn.query_drop(init).await.expect("a fresh database");
        for d in ddl {
            conn.query_drop(*d).await.expect(d);
        }
        nodes.push(conn);
    }
    nodes
}

/// A session sql_mode: its name, the SET that makes it (none: the server's default), and
/// how clients escape literals in it.
#[derive(Clone, Copy)]
struct Mode(&'static str, Option<&'static str>, &'static [Style]);

const DEFAULT: Mode = Mode("default", None, &[Style::Backslash, Style::DoubleQuoted]);
const NBE_SET: &str = "SET sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')";
const NBE: Mode = Mode("NO_BACKSLASH_ESCAPES", Some(NBE_SET), &[Style::Doubling]);
const ANSI_SET: &str = "SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')";
const ANSI: Mode = Mode("ANSI_QUOTES", Some(ANSI_SET), &[Style::Backslash]);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Style {
    /// `'...'` with PyMySQL's (and mysql_real_escape_string's) backslash escapes.
    Backslash,
    /// `"..."` with the same escapes (not under ANSI_QUOTES).
    DoubleQuoted,
    /// `'...'` with quotes doubled and nothing else (NO_BACKSLASH_ESCAPES).
    Doubling,
    /// `'...'` around the raw value: whatever MariaDB makes of it, the proxy must make too.
    Naive,
}

/// `bytes` as a client writes the literal (`_binary'...'` for a binary value).
fn lit(style: Style, bytes: &[u8], binary: bool) -> Vec<u8> {
    let q = b"'\""[usize::from(style == Style::DoubleQuoted)];
    let mut out: Vec<u8> = if binary { b"_binary".into() } else { vec![] };
    out.push(q);
    for &c in bytes {
        match (style, c) {
            (Style::Naive, _) => out.push(c),
            (Style::Doubling, b'\'') => out.extend_from_slice(b"''"),
            (Style::Doubling, _) => out.push(c),
            (_, 0) => out.extend_from_slice(b"\\0"),
            (_, b'\n') => out.extend_from_slice(b"\\n"),
            (_, b'\r') => out.extend_from_slice(b"\\r"),
            (_, 0x1a) => out.extend_from_slice(b"\\Z"),
            (_, b'\\' | b'\'' | b'"') => out.extend_from_slice(&[b'\\', c]),
            _ => out.push(c),
        }
    }
    out.push(q);
    out
}

/// `template` with each `$n` replaced by `value(n)` and `#n` by `ids[n]`, in one pass.
fn expand(template: &str, ids: &[i64], mut value: impl FnMut(usize) -> Vec<u8>) -> Vec<u8> {
    let (t, mut out, mut i) = (template.as_bytes(), Vec::new(), 0);
    while i < t.len() {
        let n = t.get(i + 1).filter(|d| d.is_ascii_digit());
        match (t[i], n.map(|d| usize::from(d - b'0'))) {
            (b'$', Some(n)) => out.extend(value(n)),
            (b'#', Some(n)) => out.extend(ids[n].to_string().bytes()),
            (c, _) => {
                out.push(c);
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    out
}

/// `template` with the literals of `lits`.
fn fill(template: &str, lits: &[Vec<u8>], ids: &[i64]) -> Vec<u8> {
    expand(template, ids, |n| lits[n].clone())
}

/// `template` with `?` for each `$n`, its value bound (in order).
fn bind(template: &str, vals: &[Vec<u8>], ids: &[i64]) -> (String, Vec<Value>) {
    let mut params = Vec::new();
    let sql = expand(template, ids, |n| {
        params.push(Value::Bytes(vals[n].clone()));
        b"?".to_vec()
    });
    (String::from_utf8(sql).expect("UTF-8"), params)
}

/// Affected rows and rows of a statement, or its error (code 0: a client error).
type Answer = Result<(u64, Vec<Vec<Value>>), (u16, String)>;

fn failure(e: mysql_async::Error) -> (u16, String) {
    match e {
        mysql_async::Error::Server(s) => (s.code, s.message),
        other => (0, other.to_string()),
    }
}

type Started<'a, P> = Result<mysql_async::QueryResult<'a, 'static, P>, mysql_async::Error>;

/// The whole answer of a statement started on a connection.
async fn answer<P: mysql_async::prelude::Protocol>(started: Started<'_, P>) -> Answer {
    let mut r = started.map_err(failure)?;
    let rows: Vec<Row> = r.collect().await.map_err(failure)?;
    let affected = r.affected_rows();
    r.drop_result().await.map_err(failure)?;
    Ok((affected, rows.into_iter().map(Row::unwrap).collect()))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

fn show_bytes(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => format!("'{}'", s.escape_debug()),
        Err(_) => format!("x'{}'", hex(b)),
    }
}

fn show_value(v: &Value) -> String {
    match v {
        Value::NULL => "NULL".into(),
        Value::Bytes(b) => show_bytes(b),
        other => format!("{other:?}"),
    }
}

fn show_row(r: &[Value]) -> String {
    format!(
        "({})",
        r.iter().map(show_value).collect::<Vec<_>>().join(", ")
    )
}

/// An answer, showing the rows `other` lacks (or, the same rows in another order, its
/// rows from the first that differs).
fn show_answer(a: &Answer, other: &Answer) -> String {
    let Ok((affected, rows)) = a else {
        return format!("{a:?}");
    };
    let shown = |rows: &[Vec<Value>]| rows.iter().map(|r| show_row(r)).collect::<Vec<_>>();
    let (mine, theirs) = (shown(rows), other.as_ref().map_or(vec![], |o| shown(&o.1)));
    let (mut pool, mut only) = (theirs.clone(), Vec::new());
    for r in &mine {
        match pool.iter().position(|x| x == r) {
            Some(at) => drop(pool.remove(at)),
            None => only.push(r.clone()),
        }
    }
    let (what, shown) = if only.is_empty() {
        let at = (0..mine.len()).find(|i| theirs.get(*i) != Some(&mine[*i]));
        let from = mine[at.unwrap_or(0)..].to_vec();
        ("in order from the first that differs", from)
    } else {
        ("only here", only)
    };
    let (n, more) = (rows.len(), if shown.len() > 8 { " ..." } else { "" });
    let shown = shown[..shown.len().min(8)].join(" ");
    format!("{n} rows, {affected} affected; {what}: {shown}{more}")
}

/// A proxy session and a reference session in the same sql_mode, and each node directly.
struct Pair {
    p: Conn,
    r: Conn,
    proxy_url: String,
    mode: Mode,
    nodes: Vec<Conn>,
    statements: usize,
    fails: Vec<String>,
    /// Tables whose whole contents already differed (reported once).
    diverged: Vec<&'static str>,
}

impl Pair {
    async fn open(proxy_port: u16, db: &str, mode: Mode) -> Pair {
        let proxy_url = format!("mysql://app:app@127.0.0.1:{proxy_port}/{db}");
        let urls: Vec<String> = (0..NODES).map(|i| node_url(i, db)).collect();
        let nodes = futures::future::join_all(urls.iter().map(|u| connect(u))).await;
        let mut pair = Pair {
            p: connect(&proxy_url).await,
            r: connect(&node_url(REFERENCE, db)).await,
            proxy_url,
            mode: DEFAULT,
            nodes,
            statements: 0,
            fails: Vec::new(),
            diverged: Vec::new(),
        };
        pair.switch(mode).await;
        pair
    }

    /// Both sessions from the server's default sql_mode to `mode`.
    async fn switch(&mut self, mode: Mode) {
        self.mode = mode;
        for c in [&mut self.r, &mut self.p] {
            for q in ["SET sql_mode = DEFAULT"].into_iter().chain(mode.1) {
                c.query_drop(q).await.expect(q);
            }
        }
    }

    async fn text(&mut self, what: &str, sql: &[u8], ordered: bool) -> bool {
        let want = answer(self.r.query_iter(sql).await).await;
        let got = answer(self.p.query_iter(sql).await).await;
        let shown: String = String::from_utf8_lossy(sql).escape_debug().collect();
        self.judge(what, shown, (want, got), ordered).await
    }

    async fn exec(&mut self, what: &str, sql: &str, params: Vec<Value>, ordered: bool) -> bool {
        let shown = format!("{sql} with {}", show_row(&params));
        let want = answer(self.r.exec_iter(sql, params.clone()).await).await;
        let got = answer(self.p.exec_iter(sql, params).await).await;
        self.judge(what, shown, (want, got), ordered).await
    }

    /// Statement `t` of round `r`: in text, its values written in `style`, or prepared
    /// (`None`), its values bound.
    async fn step(&mut self, what: &str, t: &str, style: Option<Style>, r: &Round, o: bool) {
        if let Some(st) = style {
            let sql = fill(t, &lits_of(st, &r.0), &r.1);
            self.text(&format!("{what}, {st:?} text"), &sql, o).await;
        } else {
            let (sql, params) = bind(t, &r.0, &r.1);
            self.exec(&format!("{what}, prepared"), &sql, params, o)
                .await;
        }
    }

    async fn judge(&mut self, what: &str, sql: String, wg: (Answer, Answer), o: bool) -> bool {
        let (want, got) = wg;
        self.statements += 1;
        let sorted = |a: &Answer| -> Answer {
            let mut a = a.clone();
            if let (Ok((_, rows)), false) = (&mut a, o) {
                rows.sort_by_key(|r| show_row(r));
            }
            a
        };
        let same = match (sorted(&want), sorted(&got)) {
            (Ok(a), Ok(b)) => a == b,
            (Err(a), Err(b)) => a.0 == b.0,
            _ => false,
        };
        if !same {
            let (w, g) = (show_answer(&want, &got), show_answer(&got, &want));
            let m = self.mode.0;
            let line = format!("[{m}] {what}: {sql}\n    reference: {w}\n    proxy:     {g}");
            self.fails.push(line);
        }
        if matches!(got, Err((0, _))) {
            // The proxy connection broke: a new one, in the same mode.
            self.p = connect(&self.proxy_url).await;
            self.switch(self.mode).await;
        }
        same
    }

    /// `t_canary` is whole on every node.
    async fn canary(&mut self, what: &str) {
        for (i, node) in self.nodes.iter_mut().enumerate() {
            let r: Result<Option<i64>, _> = node.query_first("SELECT COUNT(*) FROM t_canary").await;
            if !matches!(r, Ok(Some(1))) {
                let m = self.mode.0;
                let line = format!("[{m}] after {what}: t_canary on node {i}: {r:?}");
                self.fails.push(line);
                let again = format!("DROP TABLE IF EXISTS t_canary; {CANARY}");
                node.query_drop(again).await.expect("a new canary");
            }
        }
    }

    /// Every table of the suite holds the same rows (a table that differs is reported the
    /// first time only), and the canaries live.
    async fn tables(&mut self, what: &str) {
        for t in ["t_h", "t_h2", "t_s", "t_r", "t_d", "t_tt"] {
            let (q, before) = (format!("SELECT * FROM {t}"), self.fails.len());
            let what = format!("{what}: {t}");
            if !self.text(&what, q.as_bytes(), false).await {
                if self.diverged.contains(&t) {
                    self.fails.truncate(before);
                }
                self.diverged.push(t);
            }
        }
        self.canary(what).await;
    }

    fn finish(self, name: &str) {
        let (m, n, all) = (self.mode.0, self.fails.len(), self.statements);
        eprintln!("{name} [{m}]: {all} statements compared, {n} differ");
        if std::env::var_os("SECURITY_ALL").is_some() {
            eprintln!("{}", self.fails.join("\n"));
        }
        let first = self.fails[..n.min(30)].join("\n");
        let msg = format!("{name} [{m}]: {n} of {all} statements differ from one MariaDB");
        assert!(n == 0, "{msg} (first 30):\n{first}");
    }
}

// ---------------------------------------------------------------------------------------------
// The suite's tables: hash_slot, single, broadcast, range (text key), directory (text key,
// a lookup table, a file entry, the fallback), time_tier (text primary key)

const DDL: [&str; 8] = [
    "CREATE TABLE t_h (id INT PRIMARY KEY, v VARCHAR(40), b VARBINARY(40))",
    "CREATE TABLE t_h2 (id INT PRIMARY KEY, v VARCHAR(40), w INT)",
    "CREATE TABLE t_s (id INT PRIMARY KEY, v VARCHAR(40), label VARCHAR(40))",
    "CREATE TABLE t_bc (v VARCHAR(40) PRIMARY KEY, note VARCHAR(40))",
    "CREATE TABLE t_r (k VARCHAR(40) PRIMARY KEY, v VARCHAR(40), n INT)",
    "CREATE TABLE t_d (tenant VARCHAR(40), id INT, v VARCHAR(40), PRIMARY KEY (tenant, id))",
    "CREATE TABLE tenant_dir (tenant VARCHAR(40) PRIMARY KEY, node VARCHAR(16) NOT NULL)",
    "CREATE TABLE t_tt (k VARCHAR(60) PRIMARY KEY, d DATETIME NOT NULL, v VARCHAR(40), KEY (d))",
];

fn suite_rules(db: &str) -> String {
    let tables = format!(
        r#"{}{}
[tables.t_s]
rule = "single"
node = "ds1"
[tables.t_bc]
rule = "broadcast"
[tables.t_r]
rule = "range"
column = "k"
ranges = [{{ below = "H", node = "ds0" }}, {{ below = "p", node = "ds1" }}, {{ node = "ds2" }}]
[tables.t_d]
rule = "directory"
column = "tenant"
entries = {{ "acme" = "ds2", "\\' OR 1=1 -- " = "ds1" }}
lookup = {{ node = "ds0", table = "tenant_dir", key_column = "tenant", node_column = "node", cache_size = 1000, ttl_secs = 60 }}
fallback = {{ rule = "hash_slot", slots = {} }}
[tables.t_tt]
rule = "time_tier"
column = "d"
primary_key = ["k"]
tiers = [{{ name = "hot", node = "ds0", lower = "now-365d", overlap_days = 3 }}, {{ name = "warm", node = "ds1", lower = "2020-01-01", overlap_days = 2 }}, {{ name = "cold", node = "ds2" }}]
poll_columns = ["v"]
"#,
        hash_slot_table("t_h", "id", &L3),
        hash_slot_table("t_h2", "id", &L3),
        slots_toml(&L3)
    );
    rules_toml_on(cluster(), &SHARDS, &tables).replace("/shop\"", &format!("/{db}\""))
}

/// The node of a text range key: bounds "H" and "p", compared case-insensitively.
fn range_node(k: &str) -> usize {
    let up = k.to_ascii_uppercase();
    usize::from(up.as_str() >= "H") + usize::from(up.as_str() >= "P")
}

/// The tiers of a date (today is 2025-06-30): hot from 2024-06-30 (its window from
/// 2024-06-27), warm from 2020-01-01 (window from 2019-12-30), cold; a window's rows are on
/// both tiers (the ETL copied them, and has not deleted them yet).
fn tiers_of(d: &str) -> Vec<usize> {
    let bounds = ["2024-06-30", "2024-06-27", "2020-01-01", "2019-12-30"];
    let above = bounds.iter().filter(|b| d < **b).count();
    [vec![0], vec![0, 1], vec![1], vec![1, 2], vec![2]][above].clone()
}

/// Seed ids: t_h's rows of value i are `seed[n][i]` on node n; t_h2's further on.
fn seed_ids() -> Vec<Vec<i64>> {
    (0..3).map(|n| ids_on(&L3, n, 1, 64)).collect()
}

/// Database `db` with the suite's rows (each on its node(s), and once on the reference),
/// and a proxy over it whose clock says 2025-06-30.
async fn setup(db: &str) -> Proxy {
    let mut nodes = fresh_db(db, &DDL).await;
    let b = |s: &str| Value::Bytes(s.as_bytes().to_vec());
    let mut rows: Vec<(&str, Vec<usize>, Vec<Value>)> = Vec::new();
    let mut add = |t: &'static str, on: Vec<usize>, row: Vec<Value>| rows.push((t, on, row));
    let seed = seed_ids();
    for (i, s) in NASTY.iter().enumerate() {
        let (v, n) = (b(s), Value::Int(i as i64));
        let bin = Value::Bytes(BINARY[i % BINARY.len()].to_vec());
        for (node, bv) in [(0, v.clone()), (1, bin), (2, Value::NULL)] {
            add("t_h", vec![node], vec![seed[node][i].into(), v.clone(), bv]);
        }
        for (node, at) in [(i % 3, 16), ((i + 1) % 3, 32)] {
            let row = vec![seed[node][at + i].into(), v.clone(), n.clone()];
            add("t_h2", vec![node], row);
        }
        let label = b(NASTY[(i + 3) % NASTY.len()]);
        let row = vec![Value::Int(i as i64 + 1), v.clone(), label];
        add("t_s", vec![1], row);
        add("t_bc", vec![0, 1, 2], vec![v.clone(), b(&format!("n{i}"))]);
        let k = format!("{s}#0");
        if s.is_ascii() {
            let row = vec![b(&k), v.clone(), n.clone()];
            add("t_r", vec![range_node(&k)], row);
        }
        // Tenants: even ones in the lookup table, one a file entry, the rest by the fallback.
        let node = if *s == "\\' OR 1=1 -- " {
            1
        } else if i % 2 == 0 {
            let row = vec![v.clone(), b(&format!("ds{}", i % 3))];
            add("tenant_dir", vec![0], row);
            i % 3
        } else {
            node_of(&L3, &v)
        };
        for id in [1, 2] {
            let row = vec![v.clone(), id.into(), b(&format!("{s}{id}"))];
            add("t_d", vec![node], row);
        }
        let dates = "2025-01-15 10,2024-06-28 10,2022-03-01 10,2019-12-31 08,2015-05-05 00";
        for (j, d) in dates.split(',').enumerate() {
            let d = format!("{d}:{i:02}:00");
            let row = vec![b(&format!("{s}#{j}")), b(&d), v.clone()];
            add("t_tt", tiers_of(&d), row);
        }
    }
    for k in ["apple", "Mango", "zebra", "H", "p"] {
        add("t_r", vec![range_node(k)], vec![b(k), b("plain"), 0.into()]);
    }
    for (table, on, row) in rows {
        let marks = vec!["?"; row.len()].join(", ");
        let sql = format!("INSERT INTO {table} VALUES ({marks})");
        // The lookup table is the proxy's, not data.
        let reference = Some(REFERENCE).filter(|_| table != "tenant_dir");
        for n in on.into_iter().chain(reference) {
            let r = nodes[n].exec_drop(&sql, row.clone()).await;
            r.unwrap_or_else(|e| panic!("seed {table} on node {n}: {e}"));
        }
    }
    let proxy = start_proxy_with_rules(suite_rules(db));
    let now = chrono::NaiveDate::from_ymd_opt(2025, 6, 30).and_then(|d| d.and_hms_opt(12, 0, 0));
    let now = now.expect("date").and_utc().timestamp_millis();
    proxy.shared.clock.set_now_ms(now);
    proxy
}

// ---------------------------------------------------------------------------------------------
// The suite. Templates: `$0` the round's nasty value, `$1` another, `$2` a binary value,
// `$3` a key of the range and tier tables, `$4` a tenant no lookup knows, `$5`..`$7` new
// keys; `#n` ids. A read is `o` (compared in order) or `u`, `t` for text only; a write step
// is `T` (text), `O` (text, compared in order), `P` (prepared), `A` / `B` (text / prepared,
// ASCII values only: text range keys are ASCII, by design).

fn round(i: usize) -> Vec<Vec<u8>> {
    let s = NASTY[i];
    let t = NASTY[(i + 5) % NASTY.len()];
    let mut v: Vec<Vec<u8>> = vec![s.into(), t.into(), BINARY[i % BINARY.len()].into()];
    v.extend(["#0", "?", "#w", "#w1", "#w2"].map(|x| format!("{s}{x}").into_bytes()));
    v
}

const READS: [&str; 32] = [
    // 1. One node.
    "u  SELECT id, v, b FROM t_h WHERE id = #0 AND v = $0",
    "u  SELECT id, v FROM t_h WHERE id IN (#0, #1) AND (v = $0 OR v = $1)",
    "u  SELECT $0 AS x, $2 AS y, id FROM t_h WHERE id = #2",
    "u  SELECT COUNT(*) FROM t_h WHERE id = #1 AND b = $2",
    // 2. Scatter: ORDER BY ... LIMIT, GROUP BY, aggregates, DISTINCT.
    "o  SELECT id, v, b FROM t_h WHERE v = $0 ORDER BY id LIMIT 2",
    "o  SELECT id FROM t_h WHERE v = $0 OR b = $2 ORDER BY id DESC LIMIT 1, 5",
    "u  SELECT v, COUNT(*), AVG(id), MAX(b) FROM t_h WHERE v <> $0 GROUP BY v",
    "u  SELECT COUNT(*), AVG(id), SUM(v = $0), COUNT(DISTINCT v) FROM t_h WHERE v >= $1 OR v = $0",
    "u  SELECT DISTINCT v FROM t_h WHERE v IN ($0, $1)",
    "u  SELECT id FROM t_h WHERE v LIKE $0",
    "o  SELECT v, COUNT(*) AS n FROM t_h WHERE v = $0 GROUP BY v HAVING n > 1 ORDER BY v",
    "o  SELECT CONCAT(v, $1) AS c, id FROM t_h WHERE v = $0 ORDER BY c, id LIMIT 3",
    "o  SELECT \"v\", id FROM t_h WHERE \"v\" = $0 ORDER BY \"v\" DESC, id LIMIT 2",
    // 3. Range and time-tier tables.
    "u  SELECT k, v, n FROM t_r WHERE k = $3",
    "o  SELECT k FROM t_r WHERE k >= $0 AND k < 'q' ORDER BY k",
    "u  SELECT COUNT(*), MAX(k) FROM t_r WHERE v = $0 OR k BETWEEN $0 AND $1",
    "u  SELECT k, d FROM t_tt WHERE v = $0 AND d >= '2024-06-01' AND d < '2024-07-15'",
    "u  SELECT k, d FROM t_tt WHERE v = $0",
    "o  SELECT k, d FROM t_tt WHERE v <> $0 ORDER BY d DESC, k LIMIT 5, 4",
    "u  SELECT YEAR(d) AS y, COUNT(*) FROM t_tt WHERE v = $0 OR k = $3 GROUP BY y",
    "u  SELECT k FROM t_tt WHERE k IN ($3, $4) AND d < '2020-06-01'",
    // 4. Directory lookups by the value.
    "u  SELECT tenant, id, v FROM t_d WHERE tenant = $0",
    "u  SELECT tenant, COUNT(*) FROM t_d WHERE tenant IN ($0, $1) GROUP BY tenant",
    "u  SELECT id FROM t_d WHERE tenant = $4",
    // 5. Reads over copies: joins on other columns, outer join, UNION, subquery, window, ...
    "u  SELECT a.id, b.id FROM t_h a JOIN t_h2 b ON a.v = b.v WHERE a.v = $0",
    "u  SELECT h.id, s.label FROM t_h h JOIN t_s s ON s.v = h.v WHERE h.v = $0 OR s.label = $1",
    "u  SELECT bc.v, h.id FROM t_bc bc LEFT JOIN t_h h ON h.v = bc.v AND h.b <> $2 WHERE bc.v IN ($0, $1)",
    "u  SELECT h.id, bc.note FROM t_h h JOIN t_bc bc ON bc.v = h.v WHERE h.v = $0",
    "u  SELECT v FROM t_h WHERE v = $0 UNION SELECT v FROM t_s WHERE v = $1",
    "u  SELECT id FROM t_h WHERE v IN (SELECT v FROM t_h2 WHERE v = $0 OR v = $1)",
    "u  SELECT id, ROW_NUMBER() OVER (ORDER BY id) FROM t_h WHERE v = $0 OR v = $1",
    "ot SELECT GROUP_CONCAT(v ORDER BY id SEPARATOR $1) FROM t_h WHERE v <> $0",
];

const WRITES: [&str; 30] = [
    // 6. A multi-row INSERT split over the nodes; INSERT ... SELECT.
    "T INSERT INTO t_h (id, v, b) VALUES (#0, $0, $2), (#1, $1, $0), (#2, $0, NULL)",
    "P INSERT INTO t_h (id, v, b) VALUES (#3, $0, $2), (#4, $1, $1), (#5, $0, $0)",
    "T INSERT INTO t_h (id, v, b) SELECT id + 500000, v, _binary'x' FROM t_h2 WHERE v = $0",
    "T INSERT INTO t_s (id, v, label) SELECT id + 600000, v, $1 FROM t_h WHERE v = $0 AND id < 100000",
    "T INSERT INTO t_d (tenant, id, v) VALUES ($0, 1000, $1), ($4, 1001, $0)",
    "T INSERT INTO t_tt (k, d, v) VALUES ($6, '2023-05-05 05:05:05', $0), ($7, '2025-02-02 02:02:02', $1)",
    "A INSERT INTO t_r (k, v, n) VALUES ($5, $0, 7)",
    // 7. UPDATE / DELETE by the value.
    "T UPDATE t_h SET b = $2, v = $1 WHERE v = $0 AND id >= 100000",
    "T UPDATE t_h SET v = $0 WHERE id = #1 AND v = $1",
    "P UPDATE t_h SET v = $1 WHERE id = #3 AND v = $0",
    "P UPDATE t_h SET b = $0 WHERE v = $1 AND id >= 100000",
    "T UPDATE t_d SET v = $0 WHERE tenant = $4",
    "P DELETE FROM t_d WHERE tenant = $0 AND v = $1",
    "T UPDATE t_tt SET v = $1 WHERE k = $6",
    "P UPDATE t_tt SET v = $0 WHERE k = $7",
    "P DELETE FROM t_tt WHERE k = $6 AND v = $1",
    "A UPDATE t_r SET v = $1, n = n + 1 WHERE k = $5 OR v = $0",
    "B UPDATE t_r SET v = $0 WHERE k = $5",
    "T DELETE FROM t_h WHERE v = $1 AND b = $2 AND id >= 100000",
    // 8. A transaction over several nodes (XA), committed; one rolled back.
    "T BEGIN",
    "T INSERT INTO t_h (id, v, b) VALUES (#6, $0, $2), (#7, $0, $0), (#8, $1, NULL)",
    "P UPDATE t_h SET b = $2 WHERE v = $0 AND id >= 100000",
    "P INSERT INTO t_h (id, v, b) SELECT id + 700000, v, $2 FROM t_h2 WHERE v = $0",
    "O SELECT id, v, b FROM t_h WHERE v = $0 OR b = $2 ORDER BY id",
    "T INSERT INTO t_d (tenant, id, v) VALUES ($0, 2000, $1), ($4, 2001, $1)",
    "T COMMIT",
    "T BEGIN",
    "T UPDATE t_h SET v = $1 WHERE v = $0",
    "T DELETE FROM t_d WHERE tenant = $0",
    "T ROLLBACK",
];

/// A round's values (`$n`) and ids (`#n`).
type Round = (Vec<Vec<u8>>, Vec<i64>);

fn lits_of(style: Style, vals: &[Vec<u8>]) -> Vec<Vec<u8>> {
    (0..vals.len())
        .map(|n| lit(style, &vals[n], n == 2))
        .collect()
}

async fn read_round(pair: &mut Pair, i: usize) {
    let seed = seed_ids();
    let r: Round = (round(i), vec![seed[0][i], seed[1][i], seed[2][i]]);
    let mut styles = pair.mode.2.to_vec();
    // Naively concatenated too, unless a value holds `;` (this client may stack statements).
    if !r.0.iter().any(|v| v.contains(&b';')) {
        styles.push(Style::Naive);
    }
    for read in READS {
        let (ordered, text_only, t) = (read.starts_with('o'), &read[1..2] == "t", &read[3..]);
        for &st in &styles {
            // A naive literal may comment the ORDER BY out.
            pair.step("read", t, Some(st), &r, ordered && st != Style::Naive)
                .await;
        }
        if !text_only {
            pair.step("read", t, None, &r, ordered).await;
        }
    }
    pair.canary(&format!("reads of value {i}")).await;
}

async fn write_round(pair: &mut Pair, i: usize) {
    let w: Vec<Vec<i64>> = (0..3).map(|n| ids_on(&L3, n, 100_000, 48)).collect();
    let r: Round = (round(i), (0..9).map(|j| w[j % 3][i * 3 + j / 3]).collect());
    for step in WRITES {
        let (kind, t) = (step.as_bytes()[0], &step[2..]);
        if !matches!(kind, b'A' | b'B') || NASTY[i].is_ascii() {
            let style = Some(pair.mode.2[0]).filter(|_| !matches!(kind, b'P' | b'B'));
            pair.step("write", t, style, &r, kind == b'O').await;
        }
    }
    pair.tables(&format!("writes of value {i}")).await;
}

async fn suite(db: &str, mode: Mode) {
    let proxy = setup(db).await;
    let mut pair = Pair::open(proxy.port, db, mode).await;
    pair.tables("setup").await;
    for i in 0..NASTY.len() {
        read_round(&mut pair, i).await;
    }
    for i in 0..NASTY.len() {
        write_round(&mut pair, i).await;
    }
    pair.finish(db);
}

#[tokio::test]
async fn values_keep_their_meaning_in_the_default_mode() {
    suite("sec_default", DEFAULT).await;
}

#[tokio::test]
async fn values_keep_their_meaning_without_backslash_escapes() {
    suite("sec_nbe", NBE).await;
}

#[tokio::test]
async fn values_keep_their_meaning_with_ansi_quotes() {
    suite("sec_ansi", ANSI).await;
}

// ---------------------------------------------------------------------------------------------
// Stacked statements from a client without CLIENT_MULTI_STATEMENTS

/// A client speaking the protocol itself, without CLIENT_MULTI_STATEMENTS (mysql_async always
/// sets it), logging in with mysql_native_password.
struct Raw {
    io: shardproxy::packet::PacketIo<tokio::net::TcpStream>,
}

/// What a COM_QUERY got: the number of result sets and OKs it answered, or an error.
type Said = Result<usize, (u16, String)>;

impl Raw {
    /// Logs in with mysql_native_password; CLIENT_MULTI_RESULTS, not MULTI_STATEMENTS.
    async fn login(port: u16, user: &str, password: &str, db: &str) -> Raw {
        use mysql_common::constants::CapabilityFlags as C;
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await;
        let io = shardproxy::packet::PacketIo::new(stream.expect("connect"), 64 << 20);
        let mut raw = Raw { io };
        let hs = raw.read().await;
        let hp: mysql_common::packets::HandshakePacket<'_> = mysql_common::io::ParseBuf(&hs)
            .parse(())
            .expect("handshake");
        let scramble = mysql_common::scramble::scramble_native(&hp.nonce(), password.as_bytes());
        let caps = C::CLIENT_PROTOCOL_41 | C::CLIENT_SECURE_CONNECTION | C::CLIENT_PLUGIN_AUTH;
        let caps = caps | C::CLIENT_CONNECT_WITH_DB | C::CLIENT_MULTI_RESULTS;
        // HandshakeResponse41: caps, max packet, collation, zeros, user, scramble, db, plugin.
        let mut p = caps.bits().to_le_bytes().to_vec();
        p.extend((16u32 << 20).to_le_bytes());
        p.push(45); // utf8mb4_general_ci
        p.extend([0; 23]);
        p.extend(user.as_bytes());
        p.extend([0, 20]);
        p.extend(scramble.expect("scramble"));
        p.extend(db.as_bytes());
        p.extend(b"\0mysql_native_password\0");
        raw.io.write(&p);
        raw.io.flush().await.expect("send the handshake response");
        let ok = raw.read().await;
        assert_eq!(
            ok[0],
            0,
            "login on {port}: {:?}",
            String::from_utf8_lossy(&ok)
        );
        raw
    }

    async fn read(&mut self) -> Vec<u8> {
        self.io.read().await.ok().flatten().expect("a packet")
    }

    /// Sends a COM_QUERY and reads every result of it (OKs, and result sets: column
    /// definitions, EOF, rows, EOF) up to one without SERVER_MORE_RESULTS_EXISTS.
    async fn query(&mut self, sql: &str) -> Said {
        use mysql_common::io::ReadMysqlExt;
        self.io.set_seq(0);
        self.io.write(&[b"\x03", sql.as_bytes()].concat());
        self.io.flush().await.expect("send a query");
        let (mut results, mut eofs, mut in_set) = (0, 0, false);
        loop {
            let p = self.read().await;
            let status = match p[0] {
                0xFF => {
                    let msg = &p[if p.get(3) == Some(&b'#') { 9 } else { 3 }..];
                    let msg = String::from_utf8_lossy(msg).into_owned();
                    return Err((u16::from_le_bytes([p[1], p[2]]), msg));
                }
                0x00 if !in_set => {
                    let mut rest = &p[1..];
                    rest.read_lenenc_int().expect("affected rows");
                    rest.read_lenenc_int().expect("insert id");
                    u16::from_le_bytes([rest[0], rest[1]])
                }
                0xFE if in_set && p.len() < 9 => {
                    eofs += 1;
                    if eofs < 2 {
                        continue;
                    }
                    u16::from_le_bytes([p[3], p[4]])
                }
                _ => {
                    in_set = true;
                    continue;
                }
            };
            (results, eofs, in_set) = (results + 1, 0, false);
            if status & 0x0008 == 0 {
                return Ok(results);
            }
        }
    }
}

/// Stacked forms: comments, executable comments, strings holding `;`, a backslash before a
/// quote (one string by default, two statements without backslash escapes), compound
/// statements, statements the proxy handles itself.
const STACKED: [&str; 40] = [
    "SELECT 1; CREATE TABLE t_stacked (x INT)",
    "SELECT 1; CREATE TABLE t_stacked (x INT); SELECT 1 begin",
    "SELECT 1;\n\n  CREATE TABLE t_stacked (x INT)",
    "SELECT 1 /* ; */; CREATE TABLE t_stacked (x INT)",
    "SELECT 1 -- ;\n; CREATE TABLE t_stacked (x INT)",
    "SELECT 1 # ;\n; CREATE TABLE t_stacked (x INT)",
    "SELECT 1 -- x\n; CREATE TABLE t_stacked (x INT) -- ;",
    "SELECT 1 --;\n; CREATE TABLE t_stacked (x INT)",
    "SELECT 1 /*! ; */",
    "SELECT 1 /*! ; */ ; CREATE TABLE t_stacked (x INT)",
    "SELECT 1 /*! ; CREATE TABLE t_stacked (x INT) */",
    "SELECT 1 /*!50000 ; CREATE TABLE t_stacked (x INT) */",
    "SELECT 1 /*M!100000 ; CREATE TABLE t_stacked (x INT) */",
    "/*!40101 SET NAMES utf8mb4 */; CREATE TABLE t_stacked (x INT)",
    "/*!40101 SET NAMES utf8mb4; CREATE TABLE t_stacked (x INT) */",
    "SELECT 'a;b'; CREATE TABLE t_stacked (x INT)",
    "SELECT 'a;b', \"c;d\", `e;f` FROM (SELECT 1 AS `e;f`) x; CREATE TABLE t_stacked (x INT)",
    "SELECT 'a\\'; CREATE TABLE t_stacked (x INT); -- '",
    "SELECT \"a\\\"; CREATE TABLE t_stacked (x INT); -- \"",
    "SELECT 'x\\\\'; CREATE TABLE t_stacked (x INT); -- '",
    "SELECT 'a''; CREATE TABLE t_stacked (x INT); -- '",
    "SELECT _utf8mb4'é;𝄞'; CREATE TABLE t_stacked (x INT)",
    "SET @a = 'x;y'; CREATE TABLE t_stacked (x INT)",
    "SET autocommit = 1, @a = 'x;'; CREATE TABLE t_stacked (x INT)",
    "SET autocommit = 1, @a = '\\'; CREATE TABLE t_stacked (x INT); -- '",
    "USE sec_stack; CREATE TABLE t_stacked (x INT)",
    "BEGIN; CREATE TABLE t_stacked (x INT)",
    "START TRANSACTION; CREATE TABLE t_stacked (x INT); COMMIT",
    "COMMIT; CREATE TABLE t_stacked (x INT)",
    "SELECT * FROM t_sh WHERE id = 1; CREATE TABLE t_stacked (x INT)",
    "INSERT INTO t_sh (id, v) VALUES (1, 'a;'); CREATE TABLE t_stacked (x INT)",
    "PREPARE s FROM 'SELECT 1'; CREATE TABLE t_stacked (x INT)",
    "BEGIN NOT ATOMIC SELECT 1; END; CREATE TABLE t_stacked (x INT)",
    "SELECT 1; BEGIN NOT ATOMIC CREATE TABLE t_stacked (x INT); END",
    "BEGIN NOT ATOMIC SELECT 'END; CREATE TABLE t_stacked (x INT); -- '; END",
    "IF 1 THEN SELECT 1; END IF; CREATE TABLE t_stacked (x INT)",
    "WHILE 0 DO SELECT 1; END WHILE; CREATE TABLE t_stacked (x INT)",
    "CREATE PROCEDURE p_stacked() BEGIN SELECT 1; END; CREATE TABLE t_stacked (x INT)",
    "SELECT 1 AS `begin`; CREATE TABLE t_stacked (x INT); SELECT 1 end",
    "SET sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES'); CREATE TABLE t_stacked (x INT)",
];

/// Anything a second statement did on a node: t_stacked or p_stacked made, a row inserted,
/// the canary dropped.
const RAN: &str =
    "SELECT (SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 't_stacked') \
    + (SELECT COUNT(*) FROM information_schema.routines WHERE routine_name = 'p_stacked') \
    + (SELECT COUNT(*) FROM t_sh) + 1 - (SELECT COUNT(*) FROM t_canary)";

#[tokio::test]
async fn stacked_statements_get_mariadbs_answer_and_never_run() {
    let db = "sec_stack";
    let ddl = "CREATE TABLE t_sh (id INT PRIMARY KEY, v VARCHAR(20))";
    let mut nodes = fresh_db(db, &[ddl]).await;
    let rules = rules_toml_on(cluster(), &SHARDS, &hash_slot_table("t_sh", "id", &L3));
    let proxy = start_proxy_with_rules(rules.replace("/shop\"", &format!("/{db}\"")));
    // Outcomes that differ, and the same error with another message (printed only).
    let (mut fails, mut notes, mut compared) = (Vec::new(), Vec::new(), 0);
    for mode in [DEFAULT, NBE, ANSI] {
        let m = mode.0;
        let mut p = Raw::login(proxy.port, "app", "app", db).await;
        let mut r = Raw::login(cluster().ports[REFERENCE], "root", "root", db).await;
        if let Some(set) = mode.1 {
            assert_eq!(r.query(set).await, Ok(1), "{set} on the reference");
            assert_eq!(p.query(set).await, Ok(1), "{set} through the proxy");
        }
        for sql in STACKED {
            compared += 1;
            let (want, got) = (r.query(sql).await, p.query(sql).await);
            let line = format!("[{m}] {sql:?}\n    reference: {want:?}\n    proxy:     {got:?}");
            match (&want, &got) {
                (Err(a), Err(b)) if a.0 == b.0 && want != got => notes.push(line),
                _ if want != got => fails.push(line),
                _ => {}
            }
            // Nothing after the first statement ran, anywhere.
            for (i, n) in nodes.iter_mut().enumerate() {
                let ran: Option<i64> = n.query_first(RAN).await.expect("RAN");
                if ran != Some(0) {
                    fails.push(format!("[{m}] {sql:?}: a statement ran on node {i}"));
                    let undo = "DROP TABLE IF EXISTS t_stacked; DROP PROCEDURE IF EXISTS p_stacked; DELETE FROM t_sh";
                    n.query_drop(undo).await.expect("clean up");
                }
            }
        }
    }
    // Nor can a prepared statement hold two.
    let mut p = connect(&proxy.url(db)).await;
    let mut r = connect(&node_url(REFERENCE, db)).await;
    for sql in STACKED {
        compared += 1;
        let code = |s: Result<mysql_async::Statement, _>| s.map(drop).map_err(|e| failure(e).0);
        let (want, got) = (code(r.prep(sql).await), code(p.prep(sql).await));
        if want != got {
            fails.push(format!("prepare {sql:?}: {want:?}, proxy {got:?}"));
        }
    }
    let (n, notes, fails) = (fails.len(), notes.join("\n"), fails.join("\n"));
    eprintln!(
        "stacked: {compared} compared, {n} differ; the same error, another message:\n{notes}"
    );
    assert!(n == 0, "{n} of {compared} differ:\n{fails}");
}

// ---------------------------------------------------------------------------------------------
// Slots moving while values are written and read

/// One round of writes and reads during the move: `#0` a key, `#1` another (loaded), `#2` a
/// key to delete, `#3` / `#4` new keys; the step runs every `n`th round.
const MOVING: [(usize, &str); 11] = [
    (1, "P INSERT INTO t_mv (id, v, b) VALUES (#0, $0, $2) ON DUPLICATE KEY UPDATE v = VALUES(v), b = VALUES(b)"),
    (1, "T UPDATE t_mv SET v = $1, b = $0 WHERE id = #1"),
    (1, "T SELECT id, v, b FROM t_mv WHERE id = #1 AND v = $1"),
    (1, "P SELECT id, v, b FROM t_mv WHERE id = #0"),
    (3, "T DELETE FROM t_mv WHERE id = #2 AND v = $0"),
    (5, "T INSERT INTO t_mv (id, v, b) VALUES (#3, $1, $2) ON DUPLICATE KEY UPDATE v = VALUES(v), b = $0"),
    (7, "T SELECT COUNT(*), MIN(id) FROM t_mv WHERE v = $0 OR b = $2"),
    (10, "T BEGIN"),
    (10, "P UPDATE t_mv SET v = $0, b = $2 WHERE id = #1"),
    (10, "T INSERT INTO t_mv (id, v, b) VALUES (#4, $0, $1)"),
    (10, "T COMMIT"),
];

#[tokio::test]
async fn values_survive_a_live_slot_move() {
    let (db, meta) = ("sec_move", "sec_meta");
    let ddl = "CREATE TABLE t_mv (id INT PRIMARY KEY, v VARCHAR(40), b VARBINARY(40))";
    let mut nodes = fresh_db(db, &[ddl]).await;
    let fresh_meta = format!("DROP DATABASE IF EXISTS {meta}; CREATE DATABASE {meta}");
    nodes[REFERENCE].query_drop(fresh_meta).await.expect("meta");
    // 2,000 rows on ds0 / ds1 and the reference, as hex literals.
    let mut rows: Vec<Vec<String>> = vec![Vec::new(); 3];
    for id in 1..=2000i64 {
        let (v, b) = (NASTY[id as usize % 16].as_bytes(), BINARY[id as usize % 6]);
        let row = format!("({id}, _utf8mb4 X'{}', _binary X'{}')", hex(v), hex(b));
        rows[node_of_key(&L2, id)].push(row.clone());
        rows[2].push(row);
    }
    for (n, rs) in [0, 1, REFERENCE].into_iter().zip(&rows) {
        for chunk in rs.chunks(500) {
            let sql = format!("INSERT INTO t_mv (id, v, b) VALUES {}", chunk.join(", "));
            nodes[n].query_drop(sql).await.expect("seed t_mv");
        }
    }
    let admin =
        "[admin]\nlisten = \"127.0.0.1:0\"\nusers = [{ name = \"ops\", password = \"ops\" }]\n\n";
    let metadata = format!(
        "{admin}[metadata]\nurl = \"{}\"\npoll_ms = 100\nlease_ms = 2000\n\n[nodes]\n",
        node_url(REFERENCE, meta)
    );
    let rules = rules_toml_on(cluster(), &SHARDS, &hash_slot_table("t_mv", "id", &L2))
        .replace("/shop\"", &format!("/{db}\""))
        .replace("[nodes]\n", &metadata);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, rules).expect("write the rules");
    let proxy = start_proxy_watching(&path);
    let mut pair = Pair::open(proxy.port, db, DEFAULT).await;
    let admin_port = proxy.admin_port.expect("admin");
    let mut ops = connect(&format!("mysql://ops:ops@127.0.0.1:{admin_port}")).await;
    let migrate = "MIGRATE SLOTS 0-511 OF t_mv TO ds2 RATE 3000 AUTO";
    ops.query_drop(migrate).await.expect(migrate);
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut steps: Vec<String> = Vec::new();
    let mut j = 0usize;
    loop {
        let mode = [DEFAULT, NBE, ANSI][j % 3];
        pair.switch(mode).await;
        let (style, j64) = (mode.2[j % mode.2.len()], j as i64);
        let keys = [
            1 + j64 * 7919 % 2600,
            1 + j64 * 104_729 % 2000,
            1 + j64 * 31 % 2000,
        ];
        let r: Round = (
            round(j % NASTY.len()),
            [&keys[..], &[2000 + j64, 5000 + j64]].concat(),
        );
        for (_, step) in MOVING.iter().filter(|(n, _)| j.is_multiple_of(*n)) {
            let style = Some(style).filter(|_| !step.starts_with('P'));
            pair.step("moving", &step[2..], style, &r, false).await;
        }
        if j.is_multiple_of(10) {
            pair.canary(&format!("moving round {j}")).await;
            let rows: Vec<Row> = ops.query("SHOW MIGRATIONS").await.expect("SHOW MIGRATIONS");
            let col = |r: &Row, name: &str| {
                let at = r.columns_ref().iter().position(|c| c.name_str() == name)?;
                r.get::<Option<String>, _>(at).flatten()
            };
            let step = rows.iter().find(|r| col(r, "id").as_deref() == Some("1"));
            let step = step.and_then(|r| col(r, "step")).unwrap_or_default();
            if steps.last() != Some(&step) {
                steps.push(step.clone());
            }
            if step == "done" {
                break;
            }
            let late = Instant::now() > deadline;
            assert!(!late, "the move took over 90 s: {steps:?}");
        }
        j += 1;
    }
    eprintln!("slot move: {j} rounds of writes, steps seen {steps:?}");
    pair.switch(DEFAULT).await;
    let all = b"SELECT * FROM t_mv";
    pair.text("after the move", all, false).await;
    // Each node holds exactly the reference's rows of its slots, byte for byte.
    for (n, slots) in [(0, "< 0"), (1, "> 511"), (2, "<= 511")] {
        let q = format!("SELECT * FROM t_mv WHERE CRC32(id) % 1024 {slots} ORDER BY id");
        let want = answer(pair.nodes[REFERENCE].query_iter(q).await).await;
        let got = answer(
            pair.nodes[n]
                .query_iter("SELECT * FROM t_mv ORDER BY id")
                .await,
        )
        .await;
        if want != got {
            let (w, g) = (show_answer(&want, &got), show_answer(&got, &want));
            let line = format!("after the move, ds{n}'s rows\n    reference: {w}\n    ds{n}: {g}");
            pair.fails.push(line);
        }
    }
    pair.canary("the move").await;
    pair.finish(db);
}
