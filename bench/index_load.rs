//! The client of `bench/global_index.sh`: runs one kind of statement against a server (the
//! proxy, or a node directly) from CLIENTS connections for SECONDS, as prepared statements,
//! and prints what it got.
//!
//!   index_load URL KIND TABLE CLIENTS SECONDS ROWS RUN
//!
//! The table (`user_id BIGINT PRIMARY KEY, email VARCHAR(100), phone BIGINT, name
//! VARCHAR(50)`) holds ids 1..=ROWS, each with email `u<id>@example.com` and phone
//! `5550000000 + id`. KIND:
//! - `email`: `SELECT * FROM TABLE WHERE email = ?`, a random id's email;
//! - `phone`: `SELECT * FROM TABLE WHERE phone = ?`, a random id's phone;
//! - `insert`: `INSERT INTO TABLE (user_id, email, phone, name) VALUES (?,?,?,?)` (autocommit)
//!   with fresh ids, from `ROWS + 1 + RUN * 100000000` on, email `n<id>@example.com`;
//! - `update`: `UPDATE TABLE SET email = ? WHERE user_id = ?` (autocommit), a random id of
//!   1..=ROWS, a fresh email `w<RUN>_<client>_<n>@example.com`;
//! - `name_email`: `UPDATE TABLE SET name = ? WHERE email = ?` (autocommit), a random id's
//!   email `u<id>@example.com` (so before any `update` or `replace` run: those change emails),
//!   a fresh name `m<RUN>_<client>_<n>`;
//! - `name_phone`: `UPDATE TABLE SET name = ? WHERE phone = ?` (autocommit), a random id's
//!   phone, a fresh name as for `name_email`;
//! - `replace`: `REPLACE INTO TABLE (user_id, email, phone, name) VALUES (?,?,?,?)`
//!   (autocommit), a random id of 1..=ROWS with its phone and name `name<id>`, a fresh email
//!   `r<id>-<RUN>-<client>-<n>@example.com`.
//!
//! RUN numbers the caller's runs, so that no two runs write the same id, email or name. Every
//! answer is checked: a read must return exactly the one row of its id, an INSERT or UPDATE
//! must change one row (its new value is fresh: a row it matched is changed), a REPLACE must
//! replace one (2 affected rows: the old row out, the new in). A server's error is counted by its code (the client goes on); any other error
//! ends the client; the first message of each code goes to stderr. Prints one line:
//!   kind=K table=T clients=N queries=Q qps=F p50_us=.. p99_us=.. errors=E wrong=W codes=C
//! (`codes`: `-`, or `code:count,...`; `wrong`: answers that were not the row asked for, or a
//! write's affected rows other than 1, 2 for a REPLACE).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};

type Member = (i64, String, i64, Option<String>);

fn pct(v: &mut [u64], p: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Email,
    Phone,
    Insert,
    Update,
    NameEmail,
    NamePhone,
    Replace,
}

/// What one client saw.
#[derive(Default)]
struct Seen {
    micros: Vec<u64>,
    codes: BTreeMap<u16, u64>,
    /// The first message of each error code.
    messages: BTreeMap<u16, String>,
    wrong: u64,
}

/// Whether `rows` is exactly the row of `id` as loaded.
fn is_row(rows: &[Member], id: i64) -> bool {
    matches!(rows, [(k, e, p, _)] if *k == id && *e == format!("u{id}@example.com")
        && *p == 5_550_000_000 + id)
}

#[allow(clippy::too_many_arguments)]
async fn client(
    opts: mysql_async::Opts,
    kind: Kind,
    table: String,
    c: u64,
    seconds: u64,
    rows: i64,
    run: u64,
    clients: u64,
) -> anyhow::Result<Seen> {
    let mut conn = mysql_async::Conn::new(opts).await?;
    let sql = match kind {
        Kind::Email => format!("SELECT * FROM {table} WHERE email = ?"),
        Kind::Phone => format!("SELECT * FROM {table} WHERE phone = ?"),
        Kind::Insert => {
            format!("INSERT INTO {table} (user_id, email, phone, name) VALUES (?, ?, ?, ?)")
        }
        Kind::Update => format!("UPDATE {table} SET email = ? WHERE user_id = ?"),
        Kind::NameEmail => format!("UPDATE {table} SET name = ? WHERE email = ?"),
        Kind::NamePhone => format!("UPDATE {table} SET name = ? WHERE phone = ?"),
        Kind::Replace => {
            format!("REPLACE INTO {table} (user_id, email, phone, name) VALUES (?, ?, ?, ?)")
        }
    };
    let stmt = conn.prep(sql).await?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(run * 1000 + c);
    let mut seen = Seen::default();
    let stop = Instant::now() + Duration::from_secs(seconds);
    let mut n: u64 = 0;
    while Instant::now() < stop {
        let id: i64 = rng.gen_range(1..=rows);
        let t0 = Instant::now();
        let r: Result<bool, mysql_async::Error> = match kind {
            Kind::Email => conn
                .exec::<Member, _, _>(&stmt, (format!("u{id}@example.com"),))
                .await
                .map(|r| is_row(&r, id)),
            Kind::Phone => conn
                .exec::<Member, _, _>(&stmt, (5_550_000_000 + id,))
                .await
                .map(|r| is_row(&r, id)),
            Kind::Insert => {
                let id = rows + 1 + (run * 100_000_000 + n * clients + c) as i64;
                conn.exec_drop(
                    &stmt,
                    (
                        id,
                        format!("n{id}@example.com"),
                        5_550_000_000 + id,
                        format!("name{id}"),
                    ),
                )
                .await
                .map(|()| conn.affected_rows() == 1)
            }
            Kind::Update => conn
                .exec_drop(&stmt, (format!("w{run}_{c}_{n}@example.com"), id))
                .await
                .map(|()| conn.affected_rows() == 1),
            Kind::NameEmail => conn
                .exec_drop(
                    &stmt,
                    (format!("m{run}_{c}_{n}"), format!("u{id}@example.com")),
                )
                .await
                .map(|()| conn.affected_rows() == 1),
            Kind::NamePhone => conn
                .exec_drop(&stmt, (format!("m{run}_{c}_{n}"), 5_550_000_000 + id))
                .await
                .map(|()| conn.affected_rows() == 1),
            Kind::Replace => conn
                .exec_drop(
                    &stmt,
                    (
                        id,
                        format!("r{id}-{run}-{c}-{n}@example.com"),
                        5_550_000_000 + id,
                        format!("name{id}"),
                    ),
                )
                .await
                .map(|()| conn.affected_rows() == 2),
        };
        n += 1;
        match r {
            Ok(right) => {
                seen.micros.push(t0.elapsed().as_micros() as u64);
                if !right {
                    seen.wrong += 1;
                }
            }
            Err(mysql_async::Error::Server(e)) => {
                *seen.codes.entry(e.code).or_default() += 1;
                seen.messages.entry(e.code).or_insert(e.message);
            }
            Err(e) => return Err(e.into()),
        }
    }
    conn.disconnect().await?;
    Ok(seen)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, kind, table, clients, seconds, rows, run] = args.as_slice() else {
        anyhow::bail!(
            "usage: index_load URL email|phone|insert|update|name_email|name_phone|replace \
             TABLE CLIENTS SECONDS ROWS RUN"
        );
    };
    let kind = match kind.as_str() {
        "email" => Kind::Email,
        "phone" => Kind::Phone,
        "insert" => Kind::Insert,
        "update" => Kind::Update,
        "name_email" => Kind::NameEmail,
        "name_phone" => Kind::NamePhone,
        "replace" => Kind::Replace,
        other => anyhow::bail!(
            "KIND must be email, phone, insert, update, name_email, name_phone or replace, \
             got {other}"
        ),
    };
    let clients: u64 = clients.parse()?;
    let seconds: u64 = seconds.parse()?;
    let rows: i64 = rows.parse()?;
    let run: u64 = run.parse()?;
    anyhow::ensure!(
        clients > 0 && seconds > 0 && rows > 0,
        "CLIENTS, SECONDS and ROWS must be > 0"
    );
    let opts = mysql_async::Opts::from_url(url)?;
    let mut tasks = Vec::new();
    for c in 0..clients {
        tasks.push(tokio::spawn(client(
            opts.clone(),
            kind,
            table.clone(),
            c,
            seconds,
            rows,
            run,
            clients,
        )));
    }
    let mut all = Seen::default();
    for t in tasks {
        let s = t.await??;
        all.micros.extend(s.micros);
        all.wrong += s.wrong;
        for (code, n) in s.codes {
            *all.codes.entry(code).or_default() += n;
        }
        for (code, m) in s.messages {
            all.messages.entry(code).or_insert(m);
        }
    }
    let errors: u64 = all.codes.values().sum();
    for (code, m) in &all.messages {
        eprintln!(
            "index_load: {kind} {table}: error {code}, first seen: {m}",
            kind = args[2]
        );
    }
    let codes = if all.codes.is_empty() {
        "-".to_string()
    } else {
        all.codes
            .iter()
            .map(|(c, n)| format!("{c}:{n}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let queries = all.micros.len();
    println!(
        "kind={} table={table} clients={clients} queries={queries} qps={:.0} p50_us={} p99_us={} errors={errors} wrong={} codes={codes}",
        args[2],
        queries as f64 / seconds as f64,
        pct(&mut all.micros, 0.5),
        pct(&mut all.micros, 0.99),
        all.wrong,
    );
    Ok(())
}
