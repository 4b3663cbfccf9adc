//! Seeded random SELECTs over a sharded table with NULLs, duplicates, mixed-case strings,
//! negative and DECIMAL values (`DIFF_SEED=N` replays another seed).

use mysql_async::prelude::Queryable;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::common::{hash_slot_table, keys_on_node, node_of_key, start_proxy_on};
use crate::judge::{judge, must, Check, Compare, Pair, Tally};
use crate::{cluster, L, SHARDS};

/// The seed of `generated_queries` unless `DIFF_SEED` says otherwise.
const DEFAULT_SEED: u64 = 20_261_130;
/// Generated queries answered correctly with [`DEFAULT_SEED`] (checked only with that seed):
/// 105 of 300 before the cross-node merges, 298 with them. Raised as the merge work lands.
const GENERATED_MATCHED_FLOOR: usize = 298;
const GENERATED_ROWS: usize = 400;
const GENERATED_QUERIES: usize = 300;

/// The seed: `DIFF_SEED` (decimal or `0x` hex) or [`DEFAULT_SEED`].
fn seed() -> u64 {
    match std::env::var("DIFF_SEED") {
        Ok(s) => {
            let s = s.trim();
            let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => s.parse(),
            };
            parsed.unwrap_or_else(|e| panic!("DIFF_SEED={s:?} is not a u64: {e}"))
        }
        Err(_) => DEFAULT_SEED,
    }
}

const GEN_TABLE: &str = "CREATE TABLE t_gen (id BIGINT PRIMARY KEY, user_id INT NOT NULL, \
    grp VARCHAR(16) NULL, name VARCHAR(32) COLLATE utf8mb4_general_ci NULL, \
    amount DECIMAL(12,3) NULL, qty INT NULL, score DOUBLE NULL) DEFAULT CHARSET=utf8mb4";

const COLUMNS: [&str; 7] = ["id", "user_id", "grp", "name", "amount", "qty", "score"];
/// Columns a plain query may order by (before the `id` tiebreaker).
const SORTABLE: [&str; 6] = ["user_id", "grp", "name", "amount", "qty", "score"];
const NUMERIC: [&str; 5] = ["amount", "qty", "score", "user_id", "id"];
const GROUPS: [&str; 8] = ["abc", "ABC", "Abc", "b", "B", "", "x", "Zz"];
const NAMES: [&str; 11] = [
    "abc", "ABC", "Abc", "b", "B", "", "alpha", "Alpha", "zed", "O'Brien", "ünï",
];

pub(crate) fn sql_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// User ids spread over the four shards: 7 positive and 2 negative keys per node.
fn gen_users() -> Vec<i64> {
    let mut users = Vec::new();
    for node in 0..L.len() {
        users.extend(keys_on_node(&L, node, 7));
        users.extend(
            (1..)
                .map(|k: i64| -k)
                .filter(|k| node_of_key(&L, *k) == node)
                .take(2),
        );
    }
    users
}

/// A DECIMAL(12,3) literal: duplicates from a small pool, else random (negative too).
fn gen_amount(rng: &mut StdRng) -> String {
    if rng.gen_bool(0.3) {
        return ["0.000", "1.500", "-2.250", "100.000", "99999.999"]
            .choose(rng)
            .map(|s| s.to_string())
            .unwrap_or_default();
    }
    let milli: i64 = rng.gen_range(-99_999_999..=99_999_999);
    let sign = if milli < 0 { "-" } else { "" };
    format!("{sign}{}.{:03}", milli.abs() / 1000, milli.abs() % 1000)
}

fn gen_score(rng: &mut StdRng) -> String {
    if rng.gen_bool(0.3) {
        return ["0", "1.5", "-2.25", "0.1", "1e10"]
            .choose(rng)
            .map(|s| s.to_string())
            .unwrap_or_default();
    }
    let x: f64 = rng.gen_range(-1000.0..1000.0);
    format!("{:?}", (x * 10_000.0).round() / 10_000.0)
}

fn or_null(rng: &mut StdRng, p_null: f64, v: String) -> String {
    if rng.gen_bool(p_null) {
        "NULL".into()
    } else {
        v
    }
}

/// `rows` random rows as multi-row INSERTs of up to 50 rows.
fn gen_inserts(rng: &mut StdRng, users: &[i64], rows: usize) -> Vec<String> {
    let mut ids: Vec<i64> = (0..rows as i64).map(|i| i * 7 - 1000).collect();
    ids.shuffle(rng);
    let mut tuples = Vec::with_capacity(rows);
    for id in ids {
        let user = *users.choose(rng).expect("users");
        let grp_v = sql_string(GROUPS.choose(rng).expect("groups"));
        let grp = or_null(rng, 0.1, grp_v);
        let name_v = sql_string(NAMES.choose(rng).expect("names"));
        let name = or_null(rng, 0.15, name_v);
        let amount_v = gen_amount(rng);
        let amount = or_null(rng, 0.1, amount_v);
        let qty_v = rng.gen_range(-3..=12).to_string();
        let qty = or_null(rng, 0.1, qty_v);
        let score_v = gen_score(rng);
        let score = or_null(rng, 0.1, score_v);
        tuples.push(format!(
            "({id}, {user}, {grp}, {name}, {amount}, {qty}, {score})"
        ));
    }
    tuples
        .chunks(50)
        .map(|c| {
            format!(
                "INSERT INTO t_gen (id, user_id, grp, name, amount, qty, score) VALUES {}",
                c.join(", ")
            )
        })
        .collect()
}

struct GenQuery {
    sql: String,
    check: Check,
}

/// A random WHERE clause (with its leading space), or nothing.
fn gen_where(rng: &mut StdRng, users: &[i64]) -> String {
    let mut conds: Vec<String> = Vec::new();
    match rng.gen_range(0..10) {
        0..=2 => {}
        3 | 4 => {
            // One key: one node. Now and then a key no row has.
            let k = if rng.gen_bool(0.1) {
                987_654
            } else {
                *users.choose(rng).expect("users")
            };
            conds.push(format!("user_id = {k}"));
        }
        5 | 6 => {
            let n = rng.gen_range(1..=5);
            let ks: Vec<String> = users
                .choose_multiple(rng, n)
                .map(|k| k.to_string())
                .collect();
            conds.push(format!("user_id IN ({})", ks.join(", ")));
        }
        _ => {}
    }
    if conds.is_empty() || rng.gen_bool(0.4) {
        let filters = rng.gen_range(1..=2);
        for _ in 0..filters {
            let f = match rng.gen_range(0..14) {
                0 => format!("qty > {}", rng.gen_range(-3..10)),
                1 => {
                    let a = rng.gen_range(-3..8);
                    format!("qty BETWEEN {a} AND {}", a + rng.gen_range(0..6))
                }
                2 => format!("amount < {}", gen_amount(rng)),
                3 => "amount IS NULL".into(),
                4 => format!("grp = {}", sql_string(GROUPS.choose(rng).expect("groups"))),
                5 => "grp IS NOT NULL".into(),
                6 => "name LIKE 'a%'".into(),
                7 => format!("name = {}", sql_string(NAMES.choose(rng).expect("names"))),
                8 => format!("score >= {}", rng.gen_range(-500..500)),
                9 => "score IS NULL".into(),
                10 => format!("id % 3 = {}", rng.gen_range(0..3)),
                11 => "(qty < 2 OR grp = 'b')".into(),
                12 => format!("name > {}", sql_string(NAMES.choose(rng).expect("names"))),
                _ => "amount > 0 AND score < 0".into(),
            };
            conds.push(f);
        }
    }
    if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    }
}

fn direction(rng: &mut StdRng) -> &'static str {
    ["", " ASC", " DESC"].choose(rng).copied().unwrap_or("")
}

/// ` LIMIT ...` in one of MySQL's three spellings.
fn gen_limit(rng: &mut StdRng) -> String {
    let n = rng.gen_range(0..=20);
    let o = rng.gen_range(0..=60);
    match rng.gen_range(0..3) {
        0 => format!(" LIMIT {n}"),
        1 => format!(" LIMIT {o}, {n}"),
        _ => format!(" LIMIT {n} OFFSET {o}"),
    }
}

/// One aggregate over the table: `(expression, compared with a tolerance)`.
fn gen_aggregate(rng: &mut StdRng) -> (String, bool) {
    match rng.gen_range(0..6) {
        0 => ("COUNT(*)".into(), false),
        1 => {
            let col = COLUMNS.choose(rng).expect("columns");
            (format!("COUNT({col})"), false)
        }
        k => {
            let f = ["SUM", "MIN", "MAX", "AVG"][k - 2];
            let col = NUMERIC.choose(rng).expect("numeric");
            let tolerant = *col == "score" && (f == "SUM" || f == "AVG");
            (format!("{f}({col})"), tolerant)
        }
    }
}

/// Aggregates for a select list starting at output column `first`; aliased now and then.
fn gen_aggregates(rng: &mut StdRng, first: usize) -> (Vec<String>, Vec<usize>) {
    let n = rng.gen_range(1..=4);
    let mut items = Vec::new();
    let mut tolerant = Vec::new();
    for i in 0..n {
        let (mut e, tol) = gen_aggregate(rng);
        if tol {
            tolerant.push(first + i);
        }
        if rng.gen_bool(0.3) {
            e.push_str(&format!(" AS a{i}"));
        }
        items.push(e);
    }
    (items, tolerant)
}

fn gen_query(rng: &mut StdRng, users: &[i64]) -> GenQuery {
    let filter = gen_where(rng, users);
    match rng.gen_range(0..10) {
        // Plain rows, ordered or not.
        0..=3 => {
            let cols = if rng.gen_bool(0.1) {
                "*".to_string()
            } else {
                let n = rng.gen_range(1..=COLUMNS.len());
                let picked: Vec<&str> = COLUMNS.choose_multiple(rng, n).copied().collect();
                picked.join(", ")
            };
            let mut sql = format!("SELECT {cols} FROM t_gen{filter}");
            let ordered = rng.gen_bool(0.6);
            if ordered {
                let n = rng.gen_range(0..=2);
                let mut keys: Vec<String> = SORTABLE
                    .choose_multiple(rng, n)
                    .map(|c| format!("{c}{}", direction(rng)))
                    .collect();
                keys.push(format!("id{}", direction(rng)));
                sql.push_str(&format!(" ORDER BY {}", keys.join(", ")));
                if rng.gen_bool(0.5) {
                    sql.push_str(&gen_limit(rng));
                }
            }
            GenQuery {
                sql,
                check: Check::exact(if ordered {
                    Compare::Ordered
                } else {
                    Compare::Unordered
                }),
            }
        }
        // Aggregates over the whole (filtered) table: one row.
        4 | 5 => {
            let (items, tolerant) = gen_aggregates(rng, 0);
            GenQuery {
                sql: format!("SELECT {} FROM t_gen{filter}", items.join(", ")),
                check: Check {
                    compare: Compare::Unordered,
                    tolerant,
                    caseless: Vec::new(),
                },
            }
        }
        // GROUP BY, maybe HAVING, maybe a total ORDER BY and LIMIT.
        6 | 7 => {
            let group: &[&str] = [&["grp"][..], &["grp", "qty"], &["user_id"], &["qty"]]
                .choose(rng)
                .copied()
                .unwrap_or(&["grp"]);
            let (aggs, tolerant) = gen_aggregates(rng, group.len());
            let mut sql = format!(
                "SELECT {}, {} FROM t_gen{filter} GROUP BY {}",
                group.join(", "),
                aggs.join(", "),
                group.join(", ")
            );
            if rng.gen_bool(0.3) {
                sql.push_str(" HAVING COUNT(*) > 1");
            }
            let ordered = rng.gen_bool(0.5);
            if ordered {
                let mut keys: Vec<String> = Vec::new();
                if rng.gen_bool(0.25) {
                    keys.push(format!("COUNT(*){}", direction(rng)));
                }
                keys.extend(group.iter().map(|c| format!("{c}{}", direction(rng))));
                sql.push_str(&format!(" ORDER BY {}", keys.join(", ")));
                if rng.gen_bool(0.4) {
                    sql.push_str(&gen_limit(rng));
                }
            }
            GenQuery {
                sql,
                check: Check {
                    compare: if ordered {
                        Compare::Ordered
                    } else {
                        Compare::Unordered
                    },
                    tolerant,
                    caseless: group.iter().position(|c| *c == "grp").into_iter().collect(),
                },
            }
        }
        // DISTINCT rows.
        8 => {
            let cols: &[&str] = [
                &["grp"][..],
                &["grp", "qty"],
                &["qty"],
                &["user_id"],
                &["grp", "user_id"],
            ]
            .choose(rng)
            .copied()
            .unwrap_or(&["grp"]);
            let mut sql = format!("SELECT DISTINCT {} FROM t_gen{filter}", cols.join(", "));
            let ordered = rng.gen_bool(0.5);
            if ordered {
                let keys: Vec<String> = cols
                    .iter()
                    .map(|c| format!("{c}{}", direction(rng)))
                    .collect();
                sql.push_str(&format!(" ORDER BY {}", keys.join(", ")));
                if rng.gen_bool(0.4) {
                    sql.push_str(&gen_limit(rng));
                }
            }
            GenQuery {
                sql,
                check: Check {
                    compare: if ordered {
                        Compare::Ordered
                    } else {
                        Compare::Unordered
                    },
                    tolerant: Vec::new(),
                    caseless: cols.iter().position(|c| *c == "grp").into_iter().collect(),
                },
            }
        }
        // COUNT(DISTINCT ...), with other aggregates now and then.
        _ => {
            let col = ["grp", "qty", "user_id", "amount"]
                .choose(rng)
                .copied()
                .unwrap_or("grp");
            // Now and then over a pair of columns (a row counts once per distinct pair, and
            // not at all when either is NULL).
            let mut items = vec![if rng.gen_bool(0.4) {
                let other = ["grp", "qty", "user_id", "amount"]
                    .iter()
                    .copied()
                    .filter(|c| *c != col)
                    .collect::<Vec<_>>()
                    .choose(rng)
                    .copied()
                    .unwrap_or("qty");
                format!("COUNT(DISTINCT {col}, {other})")
            } else {
                format!("COUNT(DISTINCT {col})")
            }];
            let mut tolerant = Vec::new();
            if rng.gen_bool(0.4) {
                let (more, tol) = gen_aggregates(rng, 1);
                items.extend(more);
                tolerant = tol;
            }
            GenQuery {
                sql: format!("SELECT {} FROM t_gen{filter}", items.join(", ")),
                check: Check {
                    compare: Compare::Unordered,
                    tolerant,
                    caseless: Vec::new(),
                },
            }
        }
    }
}

#[tokio::test]
async fn generated_queries() {
    let seed = seed();
    eprintln!("generated: seed={seed} (set DIFF_SEED={seed} to replay)");
    let mut rng = StdRng::seed_from_u64(seed);
    let users = gen_users();

    let c = cluster();
    let proxy = start_proxy_on(c, &SHARDS, &hash_slot_table("t_gen", "user_id", &L));
    let mut pair = Pair::new(&proxy, c).await;

    for sql in ["DROP TABLE IF EXISTS t_gen", GEN_TABLE] {
        must(&mut pair.p, sql, "the proxy").await;
        must(&mut pair.r, sql, "the reference").await;
    }
    for sql in gen_inserts(&mut rng, &users, GENERATED_ROWS) {
        must(&mut pair.p, &sql, "the proxy").await;
        must(&mut pair.r, &sql, "the reference").await;
    }
    // Every row landed once: on the reference, and on exactly one shard.
    let on_ref: Option<i64> = pair
        .r
        .query_first("SELECT COUNT(*) FROM t_gen")
        .await
        .expect("count on the reference");
    assert_eq!(on_ref, Some(GENERATED_ROWS as i64), "rows on the reference");
    let mut on_shards = 0;
    for node in SHARDS {
        let pool = c.direct(node);
        let mut conn = pool.get_conn().await.expect("connect to a shard");
        let n: Option<i64> = conn
            .query_first("SELECT COUNT(*) FROM t_gen")
            .await
            .expect("count on a shard");
        on_shards += n.unwrap_or(0);
        drop(conn);
        pool.disconnect().await.ok();
    }
    assert_eq!(on_shards, GENERATED_ROWS as i64, "rows on the shards");

    let mut tally = Tally::default();
    for i in 0..GENERATED_QUERIES {
        let q = gen_query(&mut rng, &users);
        let (want, got) = pair.both(&q.sql, false).await;
        tally.add(&format!("#{i}"), &q.sql, judge(&want, &got, &q.check));
    }

    eprintln!("{}", tally.line("generated"));
    if !tally.refused.is_empty() {
        eprint!("refusal reasons:\n{}", tally.reason_histogram());
    }
    if !tally.wrong.is_empty() {
        eprint!("{}", tally.wrong_report(10));
    }
    assert!(
        tally.wrong.is_empty(),
        "{} (seed {seed}): {} wrong answers (the first 10 are listed above)",
        tally.line("generated"),
        tally.wrong.len()
    );
    if seed == DEFAULT_SEED {
        assert!(
            tally.matched >= GENERATED_MATCHED_FLOOR,
            "generated: only {} queries matched with the default seed, the floor is {GENERATED_MATCHED_FLOOR}",
            tally.matched
        );
    }
}
