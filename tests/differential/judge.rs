//! Running a statement on the proxy and on the reference, and judging the two answers: matched,
//! refused (1235) or wrong; the tally of a run of many queries; and the judge's own tests.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use mysql_async::consts::ColumnType;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};

use crate::common::{Cluster, Proxy};
use crate::{cluster, ER_NOT_SUPPORTED_YET, REFERENCE};

// ---------------------------------------------------------------------------------------------
// Running a statement and judging the two answers

/// A result set: column names and types, and the rows as the server sent them.
#[derive(Debug, Clone)]
pub(crate) struct ResultSet {
    pub(crate) columns: Vec<(String, ColumnType)>,
    pub(crate) rows: Vec<Vec<Value>>,
}

pub(crate) type Answer = Result<ResultSet, mysql_async::Error>;

fn column_list(cols: Option<std::sync::Arc<[mysql_async::Column]>>) -> Vec<(String, ColumnType)> {
    cols.map(|cs| {
        cs.iter()
            .map(|c| (c.name_str().into_owned(), c.column_type()))
            .collect()
    })
    .unwrap_or_default()
}

/// Runs `sql` in the text protocol (COM_QUERY).
async fn run_text(conn: &mut Conn, sql: &str) -> Answer {
    let mut result = conn.query_iter(sql).await?;
    let columns = column_list(result.columns());
    let rows: Vec<Row> = result.collect().await?;
    result.drop_result().await?;
    Ok(ResultSet {
        columns,
        rows: rows.into_iter().map(Row::unwrap).collect(),
    })
}

/// Runs `sql` as a prepared statement without parameters (binary protocol).
async fn run_prepared(conn: &mut Conn, sql: &str) -> Answer {
    let mut result = conn.exec_iter(sql, ()).await?;
    let columns = column_list(result.columns());
    let rows: Vec<Row> = result.collect().await?;
    result.drop_result().await?;
    Ok(ResultSet {
        columns,
        rows: rows.into_iter().map(Row::unwrap).collect(),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compare {
    /// Same rows in the same order.
    Ordered,
    /// Same multiset of rows.
    Unordered,
    /// Both must run (or the proxy refuse); the answers may differ.
    Ambiguous,
}

/// How two answers are compared.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    pub(crate) compare: Compare,
    /// Output columns compared as numbers with a relative tolerance (SUM / AVG of DOUBLE).
    pub(crate) tolerant: Vec<usize>,
    /// Output columns compared case-insensitively (a GROUP BY / DISTINCT over a `_ci` column
    /// may return any member of a group of equal strings).
    pub(crate) caseless: Vec<usize>,
}

impl Check {
    pub(crate) fn exact(compare: Compare) -> Check {
        Check {
            compare,
            tolerant: Vec::new(),
            caseless: Vec::new(),
        }
    }
}

#[derive(Debug)]
pub(crate) enum Outcome {
    Matched,
    /// The proxy answered 1235 with this reason.
    Refused(String),
    /// Why the answers differ.
    Wrong(String),
}

fn describe_error(e: &mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Server(s) => format!("ERROR {} ({}): {}", s.code, s.state, s.message),
        other => format!("client error: {other}"),
    }
}

fn server_code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

/// Is this error one after which the connection is not usable any more?
fn breaks_connection(r: &Answer) -> bool {
    matches!(r, Err(e) if server_code(e).is_none())
}

pub(crate) fn judge(expected: &Answer, actual: &Answer, check: &Check) -> Outcome {
    match (expected, actual) {
        // The reference fails: the proxy must fail with the same code, or refuse (1235).
        (Err(a), Err(b)) if server_code(a) == server_code(b) => Outcome::Matched,
        (Err(_), Err(e)) if server_code(e) == Some(ER_NOT_SUPPORTED_YET) => match e {
            mysql_async::Error::Server(s) => Outcome::Refused(s.message.clone()),
            _ => unreachable!(),
        },
        (Err(a), Err(b)) => Outcome::Wrong(format!(
            "the reference failed ({}) and the proxy failed otherwise ({})",
            describe_error(a),
            describe_error(b)
        )),
        (Err(e), Ok(got)) => Outcome::Wrong(format!(
            "the reference failed ({}) but the proxy answered {} rows",
            describe_error(e),
            got.rows.len()
        )),
        (Ok(_), Err(e)) if server_code(e) == Some(ER_NOT_SUPPORTED_YET) => match e {
            mysql_async::Error::Server(s) => Outcome::Refused(s.message.clone()),
            _ => unreachable!(),
        },
        (Ok(_), Err(e)) => Outcome::Wrong(format!(
            "the reference answered but the proxy failed: {}",
            describe_error(e)
        )),
        (Ok(want), Ok(got)) => match compare_sets(want, got, check) {
            None => Outcome::Matched,
            Some(why) => Outcome::Wrong(why),
        },
    }
}

/// `None` when the result sets agree under `check`, else why not.
fn compare_sets(want: &ResultSet, got: &ResultSet, check: &Check) -> Option<String> {
    if check.compare == Compare::Ambiguous {
        return None;
    }
    if want.columns != got.columns {
        return Some(format!(
            "columns differ\n  expected: {}\n  actual:   {}",
            show_columns(&want.columns),
            show_columns(&got.columns)
        ));
    }
    let mut a: Vec<Vec<Value>> = want.rows.iter().map(|r| normalize(r, check)).collect();
    let mut b: Vec<Vec<Value>> = got.rows.iter().map(|r| normalize(r, check)).collect();
    if check.compare == Compare::Unordered {
        a.sort_by_cached_key(|r| sort_key(r, check));
        b.sort_by_cached_key(|r| sort_key(r, check));
    }
    let same = a.len() == b.len()
        && a.iter()
            .zip(&b)
            .all(|(x, y)| rows_equal(x, y, &check.tolerant));
    if same {
        return None;
    }
    let first_diff = a
        .iter()
        .zip(&b)
        .position(|(x, y)| !rows_equal(x, y, &check.tolerant))
        .unwrap_or(a.len().min(b.len()));
    Some(format!(
        "rows differ ({} expected, {} actual; {} first differs at row {first_diff})\n  expected: {}\n  actual:   {}",
        a.len(),
        b.len(),
        if check.compare == Compare::Unordered {
            "sorted,"
        } else {
            "in order,"
        },
        show_rows(&want.rows),
        show_rows(&got.rows)
    ))
}

fn normalize(row: &[Value], check: &Check) -> Vec<Value> {
    row.iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::Bytes(b) if check.caseless.contains(&i) => Value::Bytes(b.to_ascii_lowercase()),
            other => other.clone(),
        })
        .collect()
}

/// Exactly compared columns first, so that rows differing only in the last bits of a tolerant
/// column still sort alike.
/// Each value whole: a string's bytes (Value's Debug form shows only the first 8, so rows
/// sharing such a prefix sorted apart on the two sides and compared as different).
fn sort_key(row: &[Value], check: &Check) -> Vec<Vec<u8>> {
    let exact = (0..row.len()).filter(|i| !check.tolerant.contains(i));
    let tolerant = (0..row.len()).filter(|i| check.tolerant.contains(i));
    exact
        .chain(tolerant)
        .map(|i| match &row[i] {
            Value::Bytes(b) => {
                let mut k = vec![1];
                k.extend_from_slice(b);
                k
            }
            other => {
                let mut k = vec![0];
                k.extend_from_slice(format!("{other:?}").as_bytes());
                k
            }
        })
        .collect()
}

fn rows_equal(a: &[Value], b: &[Value], tolerant: &[usize]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).enumerate().all(|(i, (x, y))| {
            x == y
                || tolerant.contains(&i)
                    && match (as_f64(x), as_f64(y)) {
                        (Some(p), Some(q)) => close(p, q),
                        _ => false,
                    }
        })
}

fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Bytes(b) => std::str::from_utf8(b).ok()?.trim().parse().ok(),
        Value::Double(d) => Some(*d),
        Value::Float(f) => Some(f64::from(*f)),
        Value::Int(i) => Some(*i as f64),
        Value::UInt(u) => Some(*u as f64),
        _ => None,
    }
}

/// Equal within a relative 1e-9 (the last bits of a DOUBLE sum depend on summation order).
fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

fn show_value(v: &Value) -> String {
    match v {
        Value::NULL => "NULL".into(),
        Value::Bytes(b) => format!("'{}'", String::from_utf8_lossy(b)),
        other => format!("{other:?}"),
    }
}

fn show_rows(rows: &[Vec<Value>]) -> String {
    let text: Vec<String> = rows
        .iter()
        .map(|r| {
            let vals: Vec<String> = r.iter().map(show_value).collect();
            format!("({})", vals.join(", "))
        })
        .collect();
    truncate(&format!("[{}]", text.join(", ")), 600)
}

fn show_columns(cols: &[(String, ColumnType)]) -> String {
    let text: Vec<String> = cols.iter().map(|(n, t)| format!("{n} {t:?}")).collect();
    truncate(&text.join(", "), 400)
}

/// `s` cut to `max` bytes (at a character boundary).
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &s[..end], s.len())
}

/// Outcomes of one run of many queries.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) matched: usize,
    /// `(id, reason)`
    pub(crate) refused: Vec<(String, String)>,
    /// `(id, sql, why)`
    pub(crate) wrong: Vec<(String, String, String)>,
}

impl Tally {
    pub(crate) fn add(&mut self, id: &str, sql: &str, outcome: Outcome) {
        match outcome {
            Outcome::Matched => self.matched += 1,
            Outcome::Refused(reason) => self.refused.push((id.to_string(), reason)),
            Outcome::Wrong(why) => {
                self.wrong
                    .push((id.to_string(), sql.to_string(), why.to_string()))
            }
        }
    }

    pub(crate) fn line(&self, name: &str) -> String {
        format!(
            "{name}: matched={} refused={} wrong={}",
            self.matched,
            self.refused.len(),
            self.wrong.len()
        )
    }

    pub(crate) fn wrong_report(&self, limit: usize) -> String {
        let mut s = String::new();
        for (id, sql, why) in self.wrong.iter().take(limit) {
            let _ = writeln!(
                s,
                "  WRONG {id}: {sql}\n    {}",
                why.replace('\n', "\n    ")
            );
        }
        if self.wrong.len() > limit {
            let _ = writeln!(s, "  ... and {} more", self.wrong.len() - limit);
        }
        s
    }

    /// Refusal reasons with how often each was given, most frequent first.
    pub(crate) fn reason_histogram(&self) -> String {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, reason) in &self.refused {
            *counts.entry(reason.as_str()).or_default() += 1;
        }
        let mut v: Vec<(&str, usize)> = counts.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let mut s = String::new();
        for (reason, n) in v {
            let _ = writeln!(s, "  {n:4} x {}", truncate(reason, 200));
        }
        s
    }
}

/// Connections to the proxy and to the reference; a connection broken by a client-side error
/// (an I/O error, a malformed packet) is replaced before the next query.
pub(crate) struct Pair<'a> {
    proxy: &'a Proxy,
    pub(crate) p: Conn,
    pub(crate) r: Conn,
}

impl<'a> Pair<'a> {
    pub(crate) async fn new(proxy: &'a Proxy, cluster: &Cluster) -> Pair<'a> {
        Pair {
            proxy,
            p: proxy.conn().await,
            r: reference_conn(cluster).await,
        }
    }

    /// Both answers to `sql`, reference first.
    pub(crate) async fn both(&mut self, sql: &str, prepared: bool) -> (Answer, Answer) {
        let (want, got) = if prepared {
            (
                run_prepared(&mut self.r, sql).await,
                run_prepared(&mut self.p, sql).await,
            )
        } else {
            (
                run_text(&mut self.r, sql).await,
                run_text(&mut self.p, sql).await,
            )
        };
        if breaks_connection(&want) {
            self.r = reference_conn(cluster()).await;
        }
        if breaks_connection(&got) {
            self.p = self.proxy.conn().await;
        }
        (want, got)
    }
}

async fn reference_conn(cluster: &Cluster) -> Conn {
    Conn::new(mysql_async::Opts::from_url(&cluster.url(REFERENCE)).expect("reference URL"))
        .await
        .expect("connect to the reference node")
}

/// Runs a statement that must succeed (set-up), with a clear message where it does not.
pub(crate) async fn must(conn: &mut Conn, sql: &str, where_: &str) {
    if let Err(e) = conn.query_drop(sql).await {
        panic!("set-up statement failed on {where_}: {e}\n  {sql}");
    }
}

/// Prints the tally line, the refusals (those also in `same_as`, a run printed before, only
/// counted) and every wrong answer.
pub(crate) fn print_tally(name: &str, t: &Tally, same_as: Option<&Tally>) {
    eprintln!("{}", t.line(name));
    let mut repeated = 0;
    for (id, reason) in &t.refused {
        if same_as.is_some_and(|o| o.refused.iter().any(|(i, r)| i == id && r == reason)) {
            repeated += 1;
            continue;
        }
        eprintln!("  refused {id}: {}", truncate(reason, 200));
    }
    if repeated > 0 {
        eprintln!("  ({repeated} refused exactly as in the text protocol, not listed again)");
    }
    if !t.wrong.is_empty() {
        eprint!("{}", t.wrong_report(usize::MAX));
    }
}

// ---------------------------------------------------------------------------------------------
// The judge itself, without a server

fn rs(columns: &[&str], rows: &[&[&str]]) -> ResultSet {
    ResultSet {
        columns: columns
            .iter()
            .map(|c| (c.to_string(), ColumnType::MYSQL_TYPE_VAR_STRING))
            .collect(),
        rows: rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|v| match *v {
                        "NULL" => Value::NULL,
                        s => Value::Bytes(s.as_bytes().to_vec()),
                    })
                    .collect()
            })
            .collect(),
    }
}

fn server_err(code: u16) -> mysql_async::Error {
    mysql_async::Error::Server(mysql_async::ServerError {
        code,
        message: format!("error {code}"),
        state: "42000".into(),
    })
}

#[test]
fn judge_tells_matched_refused_and_wrong() {
    let ordered = Check::exact(Compare::Ordered);
    let unordered = Check::exact(Compare::Unordered);
    let ab = rs(&["c"], &[&["a"], &["b"]]);
    let ba = rs(&["c"], &[&["b"], &["a"]]);
    let is = |o: Outcome, want: &str| {
        let got = match &o {
            Outcome::Matched => "matched",
            Outcome::Refused(_) => "refused",
            Outcome::Wrong(_) => "wrong",
        };
        assert_eq!(got, want, "{o:?}");
    };
    is(judge(&Ok(ab.clone()), &Ok(ab.clone()), &ordered), "matched");
    is(judge(&Ok(ab.clone()), &Ok(ba.clone()), &ordered), "wrong");
    is(
        judge(&Ok(ab.clone()), &Ok(ba.clone()), &unordered),
        "matched",
    );
    // A multiset: a duplicate row is a difference.
    let aab = rs(&["c"], &[&["a"], &["a"], &["b"]]);
    is(judge(&Ok(ab.clone()), &Ok(aab), &unordered), "wrong");
    // Column names count, the values being equal or not.
    let renamed = rs(&["d"], &[&["a"], &["b"]]);
    is(judge(&Ok(ab.clone()), &Ok(renamed), &unordered), "wrong");
    // NULL is not ''.
    let null = rs(&["c"], &[&["NULL"], &["b"]]);
    let empty = rs(&["c"], &[&[""], &["b"]]);
    is(judge(&Ok(null), &Ok(empty), &unordered), "wrong");
    // Errors.
    is(
        judge(&Ok(ab.clone()), &Err(server_err(1235)), &ordered),
        "refused",
    );
    is(
        judge(&Ok(ab.clone()), &Err(server_err(1064)), &ordered),
        "wrong",
    );
    // Two errors match by their code; the proxy may refuse where the reference fails.
    is(
        judge(&Err(server_err(1054)), &Err(server_err(1054)), &ordered),
        "matched",
    );
    is(
        judge(&Err(server_err(1054)), &Err(server_err(1105)), &ordered),
        "wrong",
    );
    is(
        judge(&Err(server_err(1054)), &Err(server_err(1235)), &ordered),
        "refused",
    );
    is(
        judge(&Err(server_err(1054)), &Ok(ab.clone()), &ordered),
        "wrong",
    );
    // Ambiguous: both ran.
    is(
        judge(
            &Ok(ab),
            &Ok(rs(&["x"], &[])),
            &Check::exact(Compare::Ambiguous),
        ),
        "matched",
    );
    // Case-insensitive columns and DOUBLE tolerance only where asked.
    let upper = rs(&["g", "s"], &[&["ABC", "0.30000000000000004"]]);
    let lower = rs(&["g", "s"], &[&["abc", "0.3"]]);
    is(
        judge(&Ok(upper.clone()), &Ok(lower.clone()), &unordered),
        "wrong",
    );
    let loose = Check {
        compare: Compare::Unordered,
        tolerant: vec![1],
        caseless: vec![0],
    };
    is(judge(&Ok(upper), &Ok(lower), &loose), "matched");
    let far = rs(&["g", "s"], &[&["abc", "0.31"]]);
    is(
        judge(&Ok(rs(&["g", "s"], &[&["abc", "0.3"]])), &Ok(far), &loose),
        "wrong",
    );
}
