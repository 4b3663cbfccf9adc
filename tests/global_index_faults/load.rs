//! The load of the tests: writers that keep a model of what they know of their rows, a
//! reader by email, and the check of what the nodes hold against the model.

use super::*;

/// A row as the nodes may hold it: `None` no row, `Some(None)` a row whose email is NULL.
pub type Cell = Option<Option<String>>;

/// What the clients know of one row: the states it may be in (one, when they saw the last
/// write to it commit), and the writes that say so.
#[derive(Clone, Debug)]
pub struct Fate {
    pub may: Vec<Cell>,
    pub by: String,
}

/// What the clients know of the rows they own, every email they ever wrote, and the emails
/// the rows were loaded with.
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub rows: BTreeMap<i64, Fate>,
    pub written: BTreeSet<String>,
    pub loaded: BTreeSet<String>,
}

impl Model {
    pub fn certain(&mut self, k: i64, cell: Cell, by: String) {
        self.rows.insert(
            k,
            Fate {
                may: vec![cell],
                by,
            },
        );
    }
}

pub fn lit(email: &Option<String>) -> String {
    email
        .as_ref()
        .map_or("NULL".to_string(), |e| format!("'{e}'"))
}

/// Shared by the writers, the reader and the test.
pub struct Ctl {
    pub stop: AtomicBool,
    pub phase: AtomicUsize,
    /// A proxy stopped by `SHARDPROXY_XA_HOLD`: whether the commit each writer has in flight
    /// at the kill is applied by recovery (`decided`) or not (`prepared`).
    pub at_kill: Option<bool>,
    /// The node killed: a statement that needed it while it was down changed nothing.
    pub down: Option<usize>,
    /// Per writer, per phase: operations begun and ended in that phase, and those that
    /// succeeded.
    pub done: Vec<[AtomicU64; PHASES]>,
    pub oks: Vec<[AtomicU64; PHASES]>,
    /// Emails some client saw committed (what the reader asks for).
    pub emails: StdMutex<Vec<String>>,
    pub reads: AtomicU64,
}

impl Ctl {
    pub fn new(at_kill: Option<bool>, down: Option<usize>, writers: &[Writer]) -> Arc<Ctl> {
        let counters = || (0..WRITERS).map(|_| std::array::from_fn(|_| AtomicU64::new(0)));
        let emails = writers
            .iter()
            .flat_map(|w| w.model.rows.values())
            .filter_map(|f| f.may[0].clone().flatten())
            .collect();
        Arc::new(Ctl {
            stop: AtomicBool::new(false),
            phase: AtomicUsize::new(UP),
            at_kill,
            down,
            done: counters().collect(),
            oks: counters().collect(),
            emails: StdMutex::new(emails),
            reads: AtomicU64::new(0),
        })
    }

    pub fn least(&self, of: &[[AtomicU64; PHASES]], phase: usize) -> u64 {
        of.iter().map(|p| p[phase].load(SeqCst)).min().unwrap_or(0)
    }

    pub fn total(&self, of: &[[AtomicU64; PHASES]], phase: usize) -> u64 {
        of.iter().map(|p| p[phase].load(SeqCst)).sum()
    }
}

/// One client operation: one autocommit statement, or the statements of a transaction.
pub struct Op {
    pub sql: Vec<String>,
    pub tx: bool,
    pub effects: Vec<(i64, Cell)>,
    pub needs: BTreeSet<usize>,
}

pub enum Outcome {
    Ok,
    Failed {
        before_commit: bool,
        io: bool,
        error: String,
    },
    Hung(String),
}

/// What happened to one operation.
pub struct Event {
    pub start: usize,
    pub end: usize,
    pub needs_down: bool,
    pub ok: bool,
    pub io: bool,
    pub hung: bool,
    pub what: String,
}

/// One writer: its own keys (the loaded ones `k % WRITERS == id`, and new ones from
/// `1_000_000 * (id + 1)`), kept across proxies.
pub struct Writer {
    pub id: usize,
    pub table: &'static str,
    pub model: Model,
    pub live: Vec<i64>,
    pub next: i64,
    pub n: u64,
    pub events: Vec<Event>,
}

impl Writer {
    pub fn all(table: &'static str, loaded: i64) -> Vec<Writer> {
        (0..WRITERS)
            .map(|id| {
                let mut model = Model::default();
                for k in (1..=loaded).filter(|k| *k as usize % WRITERS == id) {
                    model.certain(k, Some(preloaded(k)), "loaded".into());
                    model.loaded.extend(preloaded(k));
                }
                let mut w = Writer {
                    id,
                    table,
                    model,
                    live: Vec::new(),
                    next: 1_000_000 * (id as i64 + 1),
                    n: 0,
                    events: Vec::new(),
                };
                w.live = w.model.rows.keys().copied().collect();
                w
            })
            .collect()
    }

    pub fn new_key(&mut self) -> i64 {
        self.next += 1;
        self.model.certain(self.next, None, "never written".into());
        self.next
    }

    pub fn new_email(&mut self, tag: u64) -> Option<String> {
        if (self.n + tag).is_multiple_of(13) {
            return None;
        }
        let e = format!("w{}-{}-{tag}@x", self.id, self.n);
        self.model.written.insert(e.clone());
        Some(e)
    }

    /// The email of a live key (certain, present).
    pub fn email_of(&self, k: i64) -> Option<String> {
        self.model.rows[&k].may[0].clone().expect("a live row")
    }

    pub fn pick(&self, i: usize) -> i64 {
        self.live[(self.n as usize * 7919 + i) % self.live.len()]
    }

    pub fn insert(&mut self, op: &mut Op, rows: u64) {
        let mut values = Vec::new();
        for tag in 0..rows {
            let (k, e) = (self.new_key(), self.new_email(tag));
            op.needs.insert(node_of_key(&L3, k));
            op.needs.extend(e.as_deref().map(email_node));
            values.push(format!("({k}, {}, 'w')", lit(&e)));
            op.effects.push((k, Some(e)));
        }
        op.sql.push(format!(
            "INSERT INTO {} (user_id, email, name) VALUES {}",
            self.table,
            values.join(", ")
        ));
    }

    pub fn update(&mut self, op: &mut Op, k: i64, tag: u64) {
        let old = self.email_of(k);
        let e = self.new_email(tag + 5);
        op.needs.insert(node_of_key(&L3, k));
        op.needs.extend(old.as_deref().map(email_node));
        op.needs.extend(e.as_deref().map(email_node));
        op.sql.push(format!(
            "UPDATE {} SET email = {} WHERE user_id = {k}",
            self.table,
            lit(&e)
        ));
        op.effects.push((k, Some(e)));
    }

    pub fn next_op(&mut self) -> Op {
        self.n += 1;
        let mut op = Op {
            sql: Vec::new(),
            tx: false,
            effects: Vec::new(),
            needs: BTreeSet::new(),
        };
        let live = self.live.len();
        match self.n % 8 {
            2 | 3 if live > 0 => self.update(&mut op, self.pick(0), 0),
            4 if live > 0 => {
                op.tx = true;
                self.insert(&mut op, 1);
                self.update(&mut op, self.pick(0), 1);
            }
            5 if live > 1 => {
                op.tx = true;
                let (a, b) = (self.pick(0), self.pick(1));
                self.update(&mut op, a, 0);
                self.update(&mut op, b, 1);
            }
            6 if live > 50 => {
                let k = self.pick(0);
                op.needs.insert(node_of_key(&L3, k));
                op.needs.extend(self.email_of(k).as_deref().map(email_node));
                op.sql
                    .push(format!("DELETE FROM {} WHERE user_id = {k}", self.table));
                op.effects.push((k, None));
            }
            7 => self.insert(&mut op, 2),
            _ => self.insert(&mut op, 1),
        }
        op
    }

    /// What the outcome says of the op's rows.
    pub fn settle(&mut self, op: &Op, outcome: &Outcome, ev: &Event, ctl: &Ctl) {
        let applied = match outcome {
            Outcome::Ok => Some((true, "committed: its OK was seen")),
            Outcome::Failed {
                before_commit: true,
                ..
            } => Some((false, "not applied: it failed before its COMMIT")),
            Outcome::Failed { io: true, .. } if ev.end == FAULT && ctl.at_kill.is_some() => {
                Some(if ctl.at_kill == Some(true) {
                    (true, "committed by recovery: held after its decision")
                } else {
                    (false, "rolled back by recovery: held after PREPARE")
                })
            }
            Outcome::Failed { .. } if ev.start == FAULT && ev.end == FAULT && ev.needs_down => {
                Some((false, "not applied: it needed the node down all along"))
            }
            _ => None,
        };
        for (k, cell) in &op.effects {
            let f = self.model.rows.get_mut(k).expect("a key of this writer");
            match applied {
                Some((true, why)) => {
                    f.may = vec![cell.clone()];
                    f.by = format!("{} ({why})", ev.what);
                }
                Some((false, why)) => f.by.push_str(&format!("; then {} ({why})", ev.what)),
                None => {
                    if !f.may.contains(cell) {
                        f.may.push(cell.clone());
                    }
                    f.by.push_str(&format!("; then {} (outcome unknown)", ev.what));
                }
            }
        }
        let keys: Vec<i64> = op.effects.iter().map(|(k, _)| *k).collect();
        self.live.retain(|k| !keys.contains(k));
        for k in keys {
            let f = &self.model.rows[&k];
            if f.may.len() == 1 && f.may[0].is_some() {
                self.live.push(k);
            }
        }
    }
}

pub async fn one(conn: &mut Conn, sql: &str) -> Result<(), Outcome> {
    match tokio::time::timeout(STEP, conn.query_drop(sql)).await {
        Err(_) => Err(Outcome::Hung(format!(
            "{sql}: no answer in {}s",
            STEP.as_secs()
        ))),
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Outcome::Failed {
            before_commit: false,
            io: !matches!(e, mysql_async::Error::Server(_)),
            error: format!("{sql}: {e}"),
        }),
    }
}

/// Runs an op; a transaction that fails before its COMMIT is rolled back.
pub async fn exec(conn: &mut Conn, op: &Op) -> Outcome {
    if !op.tx {
        return one(conn, &op.sql[0]).await.err().unwrap_or(Outcome::Ok);
    }
    let before = std::iter::once("START TRANSACTION").chain(op.sql.iter().map(String::as_str));
    for sql in before {
        match one(conn, sql).await {
            Ok(()) => {}
            Err(Outcome::Failed { io, error, .. }) => {
                if !io {
                    if let Err(Outcome::Hung(h)) = one(conn, "ROLLBACK").await {
                        return Outcome::Hung(h);
                    }
                }
                return Outcome::Failed {
                    before_commit: true,
                    io,
                    error,
                };
            }
            Err(o) => return o,
        }
    }
    one(conn, "COMMIT").await.err().unwrap_or(Outcome::Ok)
}

/// A writer's load until `stop`, or until its connection is gone or a statement hangs.
pub async fn write(mut w: Writer, mut conn: Conn, ctl: Arc<Ctl>) -> Writer {
    while !ctl.stop.load(SeqCst) {
        let op = w.next_op();
        let start = ctl.phase.load(SeqCst);
        let outcome = exec(&mut conn, &op).await;
        let end = ctl.phase.load(SeqCst);
        let (ok, io, hung, error) = match &outcome {
            Outcome::Ok => (true, false, false, String::new()),
            Outcome::Failed { io, error, .. } => (false, *io, false, error.clone()),
            Outcome::Hung(h) => (false, false, true, h.clone()),
        };
        let ev = Event {
            start,
            end,
            needs_down: ctl.down.is_some_and(|d| op.needs.contains(&d)),
            ok,
            io,
            hung,
            what: format!(
                "writer {} op {} [{}] (nodes {:?}){}",
                w.id,
                w.n,
                op.sql.join("; "),
                op.needs,
                if ok {
                    String::new()
                } else {
                    format!(": {error}")
                }
            ),
        };
        w.settle(&op, &outcome, &ev, &ctl);
        if start == end {
            ctl.done[w.id][start].fetch_add(1, SeqCst);
            if ok {
                ctl.oks[w.id][start].fetch_add(1, SeqCst);
            }
        }
        if ok {
            let mut emails = ctl.emails.lock().expect("emails");
            emails.extend(op.effects.iter().filter_map(|(_, c)| c.clone().flatten()));
        }
        w.events.push(ev);
        if io || hung {
            break;
        }
    }
    w
}

/// Reads by email (text and prepared) until `stop`: what a read answered wrongly.
pub async fn read(mut conn: Conn, table: &'static str, ctl: Arc<Ctl>) -> Vec<String> {
    let mut bad = Vec::new();
    let mut i = 0usize;
    while !ctl.stop.load(SeqCst) {
        i += 1;
        let email = {
            let e = ctl.emails.lock().expect("emails");
            e[i.wrapping_mul(7919) % e.len()].clone()
        };
        let start = ctl.phase.load(SeqCst);
        let r = if i.is_multiple_of(2) {
            let sql = format!("SELECT user_id, email FROM {table} WHERE email = ?");
            tokio::time::timeout(STEP, conn.exec(sql, (email.clone(),))).await
        } else {
            let sql = format!("SELECT user_id, email FROM {table} WHERE email = '{email}'");
            tokio::time::timeout(STEP, conn.query(sql)).await
        };
        let up = start == UP && ctl.phase.load(SeqCst) == UP;
        match r {
            Err(_) => {
                bad.push(format!("a read of {email} had no answer in {STEP:?}"));
                break;
            }
            Ok(Ok(rows)) => {
                ctl.reads.fetch_add(1, SeqCst);
                let rows: Vec<(i64, Option<String>)> = rows;
                if rows.len() > 1 || rows.iter().any(|(_, e)| e.as_deref() != Some(&email)) {
                    bad.push(format!("a read of {email} answered {rows:?}"));
                }
            }
            Ok(Err(mysql_async::Error::Server(e))) if up => {
                bad.push(format!("a read of {email} failed with every node up: {e}"));
            }
            Ok(Err(mysql_async::Error::Server(_))) => {}
            Ok(Err(e)) => {
                if ctl.down.is_some() {
                    bad.push(format!("the reader's connection broke: {e}"));
                }
                break;
            }
        }
    }
    bad
}

pub type Running = (
    Vec<tokio::task::JoinHandle<Writer>>,
    tokio::task::JoinHandle<Vec<String>>,
);

pub async fn start_load(
    writers: Vec<Writer>,
    conn: impl Fn() -> futures::future::BoxFuture<'static, Conn>,
    table: &'static str,
    ctl: &Arc<Ctl>,
) -> Running {
    let mut tasks = Vec::new();
    for w in writers {
        tasks.push(tokio::spawn(write(w, conn().await, ctl.clone())));
    }
    let reader = tokio::spawn(read(conn().await, table, ctl.clone()));
    (tasks, reader)
}

/// Stops the load; the writers back (in order) and what the reader saw wrong.
pub async fn stop_load(ctl: &Ctl, (tasks, reader): Running) -> (Vec<Writer>, Vec<String>) {
    ctl.stop.store(true, SeqCst);
    let mut writers = Vec::new();
    for t in tasks {
        let w = tokio::time::timeout(STEP * 2, t)
            .await
            .expect("a writer did not stop")
            .expect("a writer panicked");
        writers.push(w);
    }
    let bad = tokio::time::timeout(STEP * 2, reader)
        .await
        .expect("the reader did not stop")
        .expect("the reader panicked");
    (writers, bad)
}

/// After recovery: no branch prepared; every row as the clients know it (certain ones
/// exactly, the others in a state their writes could leave) and no row nobody wrote; every
/// email read through the proxy answers exactly the row holding it; the index exact.
pub async fn check(c: &Cluster, pool: &Pool, table: &str, models: &[&Model], what: &str) {
    until_none_prepared(c, what).await;
    let t0 = Instant::now();
    let mut held: BTreeMap<i64, Option<String>> = BTreeMap::new();
    for i in 0..3 {
        let mut d = direct(c, i).await;
        let rows: Vec<(i64, Option<String>)> = d
            .query(format!("SELECT user_id, email FROM {table}"))
            .await
            .expect("rows");
        held.extend(rows);
        d.disconnect().await.ok();
    }
    let mut owned = BTreeSet::new();
    let mut written = BTreeSet::new();
    let mut loaded = BTreeSet::new();
    for m in models {
        written.extend(m.written.iter().cloned());
        loaded.extend(m.loaded.iter().map(String::as_str));
        for (k, fate) in &m.rows {
            owned.insert(*k);
            let actual: Cell = held.get(k).cloned();
            assert!(
                fate.may.contains(&actual),
                "{what}: row {k} is {actual:?} on ds{} (None: no row), but may only be one of {:?}: {}",
                node_of_key(&L3, *k),
                fate.may,
                fate.by
            );
        }
    }
    let stray: Vec<_> = held.keys().filter(|k| !owned.contains(k)).collect();
    assert!(stray.is_empty(), "{what}: rows no client wrote: {stray:?}");
    let mut by_email: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for (k, e) in &held {
        if let Some(e) = e {
            by_email.entry(e).or_default().push(*k);
        }
    }
    let mut conn = pool.get_conn().await.expect("a connection to the proxy");
    // Every email ever written, one prepared read each.
    for e in &written {
        let want: Vec<(i64, String)> = by_email
            .get(e.as_str())
            .map(|ks| ks.iter().map(|k| (*k, e.clone())).collect())
            .unwrap_or_default();
        let got: Vec<(i64, String)> = tokio::time::timeout(
            STEP,
            conn.exec(
                format!("SELECT user_id, email FROM {table} WHERE email = ? ORDER BY user_id"),
                (e,),
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("{what}: a read of {e} hung"))
        .unwrap_or_else(|err| panic!("{what}: a read of {e}: {err}"));
        assert_eq!(
            got, want,
            "{what}: the read by {e} through the proxy (the nodes hold it in {want:?})"
        );
    }
    // And every email held or loaded, a hundred at a time.
    let all: BTreeSet<&str> = by_email.keys().copied().chain(loaded).collect();
    let all: Vec<&str> = all.into_iter().collect();
    for part in all.chunks(100) {
        let list: Vec<String> = part.iter().map(|e| format!("'{e}'")).collect();
        let got: Vec<(i64, String)> = conn
            .query(format!(
                "SELECT user_id, email FROM {table} WHERE email IN ({}) ORDER BY user_id",
                list.join(", ")
            ))
            .await
            .unwrap_or_else(|err| panic!("{what}: a read by IN: {err}"));
        let mut want: Vec<(i64, String)> = part
            .iter()
            .flat_map(|e| {
                by_email
                    .get(e)
                    .into_iter()
                    .flatten()
                    .map(|k| (*k, e.to_string()))
            })
            .collect();
        want.sort();
        assert_eq!(got, want, "{what}: a read by {} emails", part.len());
    }
    drop(conn);
    exact(c, table).await;
    eprintln!(
        "{what}: {} rows, {} emails read one by one, checked in {:?}",
        held.len(),
        written.len(),
        t0.elapsed()
    );
}

pub fn process_conn(pool: Pool) -> impl Fn() -> futures::future::BoxFuture<'static, Conn> {
    move || {
        let pool = pool.clone();
        Box::pin(async move { pool.get_conn().await.expect("a connection to the proxy") })
    }
}
