//! TPC-H at scale factor 0.01 (data from tpchgen-cli, queries in `tests/corpus/tpch/`): all 22
//! queries in both protocols.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::common::{hash_slot_table, start_proxy_on};
use crate::corpus::sql_statements;
use crate::generated::sql_string;
use crate::judge::{judge, must, print_tally, Check, Compare, Pair, Tally};
use crate::{cluster, L, SHARDS};

/// The TPC-H tables' placement: lineitem and orders sharded alike by order key, customer by
/// customer key, part and partsupp by part key, supplier by supplier key, nation and region
/// on every node. Most of the 22 queries join tables placed apart.
fn tpch_rules() -> String {
    let mut s = String::new();
    for (t, c) in [
        ("lineitem", "l_orderkey"),
        ("orders", "o_orderkey"),
        ("customer", "c_custkey"),
        ("part", "p_partkey"),
        ("partsupp", "ps_partkey"),
        ("supplier", "s_suppkey"),
    ] {
        s.push_str(&hash_slot_table(t, c, &L));
    }
    for t in ["nation", "region"] {
        let _ = write!(s, "[tables.{t}]\nrule = \"broadcast\"\n\n");
    }
    s
}

/// tpchgen-cli: `TPCHGEN_CLI`, else tests/clients/.venv (tests/clients/install.sh installs
/// it there), else PATH.
fn tpchgen() -> PathBuf {
    if let Ok(p) = std::env::var("TPCHGEN_CLI") {
        return PathBuf::from(p);
    }
    let venv = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/.venv/bin/tpchgen-cli"
    ));
    if venv.exists() {
        venv
    } else {
        PathBuf::from("tpchgen-cli")
    }
}

/// One `.tbl` file as multi-row INSERTs without a column list (every value a string
/// literal, as a loader writes them), `batch` rows each.
fn tbl_inserts(table: &str, text: &str, batch: usize) -> Vec<String> {
    let rows: Vec<String> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let fields: Vec<String> = l.trim_end_matches('|').split('|').map(sql_string).collect();
            format!("({})", fields.join(","))
        })
        .collect();
    rows.chunks(batch)
        .map(|c| format!("INSERT INTO {table} VALUES {}", c.join(",")))
        .collect()
}

#[tokio::test]
async fn tpch_queries() {
    let dir = tempfile::Builder::new()
        .prefix("shardproxy-tpch-")
        .tempdir()
        .expect("a temp dir for the TPC-H data");
    let gen = tpchgen();
    let out = std::process::Command::new(&gen)
        .args(["-s", "0.01", "--output-dir"])
        .arg(dir.path())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} ({e}): tests/clients/install.sh installs tpchgen-cli into tests/clients/.venv, or set TPCHGEN_CLI",
                gen.display()
            )
        });
    assert!(
        out.status.success(),
        "tpchgen-cli failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir_path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus/tpch/"));
    let read = |name: &str| {
        std::fs::read_to_string(dir_path.join(name))
            .unwrap_or_else(|e| panic!("cannot read tests/corpus/tpch/{name}: {e}"))
    };
    // id, compare, sql
    let queries: Vec<(String, Compare, String)> = read("queries.tsv")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.splitn(3, '\t').collect();
            assert!(
                f.len() == 3 && f[1] == "ordered",
                "tpch/queries.tsv: malformed line: {l}"
            );
            (f[0].to_string(), Compare::Ordered, f[2].trim().to_string())
        })
        .collect();
    assert_eq!(
        queries.len(),
        22,
        "tests/corpus/tpch/queries.tsv holds the 22 queries"
    );

    let c = cluster();
    let proxy = start_proxy_on(c, &SHARDS, &tpch_rules());
    let mut pair = Pair::new(&proxy, c).await;
    for sql in sql_statements(&read("schema.sql")) {
        must(&mut pair.p, &sql, "the proxy").await;
        must(&mut pair.r, &sql, "the reference").await;
    }
    let started = std::time::Instant::now();
    for t in [
        "region", "nation", "part", "supplier", "partsupp", "customer", "orders", "lineitem",
    ] {
        let text = std::fs::read_to_string(dir.path().join(format!("{t}.tbl")))
            .unwrap_or_else(|e| panic!("tpchgen-cli wrote no {t}.tbl: {e}"));
        for sql in tbl_inserts(t, &text, 1000) {
            must(&mut pair.p, &sql, "the proxy").await;
            must(&mut pair.r, &sql, "the reference").await;
        }
    }
    eprintln!("tpch: loaded in {:.1}s", started.elapsed().as_secs_f64());

    let (mut text, mut prepared) = (Tally::default(), Tally::default());
    for (id, compare, sql) in &queries {
        let check = Check::exact(*compare);
        let t0 = std::time::Instant::now();
        let (want, got) = pair.both(sql, false).await;
        let rows = want.as_ref().map_or(0, |w| w.rows.len());
        text.add(id, sql, judge(&want, &got, &check));
        let t1 = std::time::Instant::now();
        let (want, got) = pair.both(sql, true).await;
        prepared.add(id, sql, judge(&want, &got, &check));
        eprintln!(
            "tpch {id}: {rows} rows, {:.2}s text, {:.2}s prepared (both sides)",
            (t1 - t0).as_secs_f64(),
            t1.elapsed().as_secs_f64()
        );
    }
    print_tally("tpch", &text, None);
    print_tally("tpch (prepared)", &prepared, None);
    let mut failures = Vec::new();
    for (name, t) in [("tpch", &text), ("tpch (prepared)", &prepared)] {
        if t.matched != queries.len() {
            failures.push(format!(
                "{name}: {} of {} matched, {} refused, {} wrong (listed above)",
                t.matched,
                queries.len(),
                t.refused.len(),
                t.wrong.len()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
