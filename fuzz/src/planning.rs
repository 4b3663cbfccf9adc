//! The targets that never reach a node: statement text through what a COM_QUERY (or a
//! prepared statement) goes through before it runs, and rules-file text.

use std::cell::Cell;
use std::sync::{Arc, OnceLock};

use mysql_common::value::Value;
use shardproxy::config::Topology;
use shardproxy::plan::{self, IdError, Plan, PlanCtx};
use shardproxy::sql::lex::Mode;
use shardproxy::sql::{self, digest};

/// The rules of [`plan`]: `rules.toml` (no node is ever reached).
fn topology() -> &'static Topology {
    static TOPO: OnceLock<Topology> = OnceLock::new();
    TOPO.get_or_init(|| {
        let text = crate::session::RULES.replace("@PORT@", "3306");
        shardproxy::config::parse(&text, "fuzz/rules.toml").expect("fuzz/rules.toml")
    })
}

/// The day every target plans on (relative tier bounds).
fn today() -> chrono::NaiveDate {
    chrono::NaiveDate::from_ymd_opt(2026, 12, 1).unwrap_or_default()
}

/// Plans with a context like a running proxy's once its caches are warm (as
/// `src/plan/tests.rs` does): lookup entries `7 -> ds1` and `8` absent, a sequence block of
/// two ids, the columns and primary keys of some tables known.
fn with_ctx<R>(f: impl FnOnce(&PlanCtx<'_>) -> R) -> R {
    let lookup = |_: &str, k: &[u8]| match k {
        b"7" => Some(Some(1)),
        b"8" => Some(None),
        _ => None,
    };
    let n = Cell::new(1000u64);
    let next_id = |table: &str, slot: u16| {
        let next = n.get() + 1;
        n.set(next);
        if table == "t_seq" {
            return if next <= 1002 {
                Ok(next)
            } else {
                Err(IdError::NeedBlock)
            };
        }
        Ok(next * 10_000 + u64::from(slot))
    };
    let columns = |_: Option<&str>, t: &str| -> Option<Arc<[String]>> {
        let cols: &[&str] = match t {
            "t_order" => &["order_id", "user_id", "status", "amount"],
            "t_order_item" => &["item_id", "order_id", "user_id"],
            "t_merchant" => &["id", "name", "kind"],
            "t_user" => &["id", "name", "tier"],
            "t_seq" => &["id", "v"],
            _ => return None,
        };
        Some(cols.iter().map(|c| c.to_string()).collect())
    };
    let primary_key = |_: Option<&str>, t: &str| -> Option<Arc<[String]>> {
        match t {
            "t_mv" => Some(vec!["`id`".to_string()].into()),
            "t_txn" => Some(vec!["`txn_id`".to_string()].into()),
            _ => None,
        }
    };
    f(&PlanCtx {
        today: today(),
        lookup: &lookup,
        next_id: &next_id,
        columns: &columns,
        primary_key: &primary_key,
        charset: "utf8mb4",
        // Both choices reachable: a small table among large ones.
        rows: &|t: &str| {
            Some(shardproxy::plan::estimate::TableStats::rows(
                if t == "t_seq" { 100 } else { 1_000_000 },
            ))
        },
        overflowed: &|_: &str| false,
        statistics: true,
        index: &|_: &str, _: &[u8]| None,
        weights: &|_: &str| None,
    })
}

/// Parameter values from bytes: each a tag byte, then its value's bytes.
fn params(mut b: &[u8]) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some((&tag, rest)) = b.split_first() {
        b = rest;
        let mut take = |n: usize| {
            let n = n.min(b.len());
            let (v, rest) = b.split_at(n);
            b = rest;
            v
        };
        let int = |v: &[u8]| {
            let mut a = [0u8; 8];
            a[..v.len()].copy_from_slice(v);
            a
        };
        out.push(match tag % 8 {
            0 => Value::NULL,
            1 => Value::Int(i64::from_le_bytes(int(take(8)))),
            2 => Value::UInt(u64::from_le_bytes(int(take(8)))),
            3 => Value::Double(f64::from_le_bytes(int(take(8)))),
            4 => {
                let d = take(7);
                let g = |i: usize| d.get(i).copied().unwrap_or(0);
                Value::Date(
                    u16::from_le_bytes([g(0), g(1)]),
                    g(2),
                    g(3),
                    g(4),
                    g(5),
                    g(6),
                    0,
                )
            }
            5 => Value::Int(i64::from(take(1).first().copied().unwrap_or(0))),
            _ => {
                let n = take(1).first().copied().unwrap_or(0);
                Value::Bytes(take(usize::from(n)).to_vec())
            }
        });
    }
    out
}

/// `plan`: statement text, then optionally a NUL byte and parameter values (see [`params`]).
/// The text goes where a COM_QUERY's goes (`frontend::session::query`): the executable
/// comment unwrapped, a SET with autocommit split, a batch split into statements; each
/// statement digested, parsed and planned, its plan described, the plan cache's decision on
/// its shape taken; and as a prepared statement: its digest, its point route and whether the
/// full plan agrees with it.
pub fn plan(data: &[u8]) {
    crate::no_panic("plan", || {
        let (text, values) = match data.iter().position(|b| *b == 0) {
            Some(at) => (&data[..at], params(&data[at + 1..])),
            None => (data, Vec::new()),
        };
        let text = String::from_utf8_lossy(text);
        let topo = topology();
        let _ = sql::leading_words(&text, 8);
        let _ = sql::words(&text);
        let stmt = sql::executable_comment(&text).unwrap_or(&text);
        if let Some(parts) = shardproxy::frontend::split::set_with_autocommit(stmt, Mode::default())
        {
            for part in parts {
                plan_one(&part, &[], topo);
            }
            return;
        }
        if text.contains(';') {
            let parts = crate::statements(&text);
            if parts.len() > 1 {
                for part in parts.iter().take(8) {
                    let part = sql::executable_comment(part).unwrap_or(part);
                    plan_one(part, &values, topo);
                }
                return;
            }
        }
        plan_one(stmt, &values, topo);
    });
}

fn plan_one(text: &str, values: &[Value], topo: &Topology) {
    let d = digest::digest(text);
    if let Some(d) = &d {
        for l in &d.literals {
            let _ = l.value();
        }
    }
    let parsed = sql::parse(text);
    let (p, _slots) = with_ctx(|ctx| {
        plan::plan_traced(
            text,
            parsed.as_ref().map_err(String::as_str),
            values,
            topo,
            ctx,
        )
    });
    let _ = p.nodes();
    let _ = p.describe(topo).to_string();
    let _ = plan::cache::describe(text, &p, topo);
    if let Some(d) = &d {
        let _ = plan::cache::text_plan(d, &p, topo, text, true, "select");
    }
    // As a prepared statement.
    let _ = digest::digest_prepared(text);
    if let Ok(parsed) = &parsed {
        if let Some(route) = plan::cached::analyze(parsed, topo) {
            let _ = route.describe();
            if route.resolve(topo, values).is_some() {
                let _ = route.agrees(&p, topo, text, values);
            }
        }
    }
    // What `shardproxy route` prints: the same statement planned offline.
    if matches!(
        p,
        Plan::NeedLookup(_) | Plan::NeedColumns { .. } | Plan::NeedIds { .. }
    ) {
        let offline = plan::with_offline_ctx(topo, today(), |ctx| {
            plan::plan(
                text,
                parsed.as_ref().map_err(String::as_str),
                values,
                topo,
                ctx,
            )
        });
        let _ = offline.describe(topo).to_string();
    }
}

/// The rules `rules` reloads over: `rules.toml` at version 0, so that any version offered is
/// newer.
fn base() -> &'static Topology {
    static BASE: OnceLock<Topology> = OnceLock::new();
    BASE.get_or_init(|| {
        let text = crate::session::RULES.replace("@PORT@", "3306").replacen(
            "version = 1",
            "version = 0",
            1,
        );
        shardproxy::config::parse(&text, "fuzz/rules.toml").expect("fuzz/rules.toml")
    })
}

/// `rules`: a rules file's text through `config::parse` (what `shardproxy check` and every
/// reload run). A file that validates is described table by table, offered to a running
/// proxy's shared state as a reload (`Shared::offer`: aligned to the running node list, the
/// pools and lookup caches rebuilt), and a few statements are planned against each of its
/// first tables.
pub fn rules(data: &[u8]) {
    crate::no_panic("rules", || {
        // A rules file is read as UTF-8 text (`config::load`).
        let Ok(text) = std::str::from_utf8(data) else {
            return;
        };
        let Ok(topo) = shardproxy::config::parse(text, "fuzz.toml") else {
            return;
        };
        let mut names: Vec<&String> = topo.tables.keys().collect();
        names.sort();
        for n in &names {
            if let Some(r) = topo.tables.get(*n) {
                let _ = r.describe(&topo);
                let _ = r.all_nodes(&topo);
            }
        }
        let _ = topo.all_nodes();
        for n in names.iter().take(6) {
            let column = topo
                .tables
                .get(*n)
                .and_then(|r| r.column())
                .unwrap_or("id")
                .to_string();
            for sql in [
                format!("SELECT * FROM `{n}` WHERE `{column}` = 7"),
                format!("SELECT * FROM `{n}` WHERE `{column}` IN (1, 'h', '2024-01-01') ORDER BY `{column}` DESC LIMIT 3, 2"),
                format!("SELECT COUNT(*) FROM `{n}` WHERE `{column}` BETWEEN 5 AND 5000"),
                format!("INSERT INTO `{n}` (`{column}`, v) VALUES (7, 1), ('2025-06-30', 2)"),
                format!("UPDATE `{n}` SET v = 1 WHERE `{column}` > '2023-12-31'"),
                format!("DELETE FROM `{n}` WHERE `{column}` = 42"),
            ] {
                let parsed = sql::parse(&sql);
                let p = plan::with_offline_ctx(&topo, today(), |ctx| {
                    plan::plan(
                        &sql,
                        parsed.as_ref().map_err(String::as_str),
                        &[],
                        &topo,
                        ctx,
                    )
                });
                let _ = p.describe(&topo).to_string();
            }
        }
        let shared = shardproxy::shared::Shared::new(base().clone());
        let _ = shared.offer(topo);
    });
}
