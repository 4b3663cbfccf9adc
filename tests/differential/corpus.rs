//! Apache ShardingSphere's `db` scenario (`tests/corpus/shardingsphere-db/`): every query in
//! the text and in the binary (prepared) protocol, and the cross-node forms over its tables.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::common::{hash_slot_table, start_proxy_on};
use crate::judge::{judge, must, print_tally, Check, Compare, Pair, Tally};
use crate::{cluster, L, REFERENCE, SHARDS};

/// Corpus queries the proxy must answer correctly in the text protocol: 45 of 128 with
/// single-node routes and plain appends only, 121 once the cross-node merges (ORDER BY, LIMIT,
/// aggregates, GROUP BY, DISTINCT, co-located joins) landed, 127 with gathered reads
/// (GROUP_CONCAT over several nodes, `SELECT *, o.*`). Raised as the merge work lands, so
/// that a regression from answered back to refused shows.
const CORPUS_MATCHED_FLOOR: usize = 127;
/// The same floor for the corpus run as prepared statements (binary protocol). Raised with the
/// merge work like [`CORPUS_MATCHED_FLOOR`].
const CORPUS_PREPARED_MATCHED_FLOOR: usize = 127;

fn corpus_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/corpus/shardingsphere-db/"
    ))
}

fn read_corpus_file(name: &str) -> String {
    let dir = corpus_dir();
    let path = dir.join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the differential corpus file {}: {e}\n\
             The corpus lives in the repository, in `tests/corpus/shardingsphere-db/`.",
            path.display()
        )
    })
}

/// The statements of a SQL file: `--` comment lines and blank lines skipped, a statement ends
/// with a line ending in `;` (the `;` is dropped).
pub(crate) fn sql_statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with("--") {
            continue;
        }
        if !cur.is_empty() {
            cur.push('\n');
        }
        cur.push_str(line);
        if t.ends_with(';') {
            let stmt = cur.trim().trim_end_matches(';').trim().to_string();
            if !stmt.is_empty() {
                out.push(stmt);
            }
            cur.clear();
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

struct CorpusQuery {
    id: String,
    compare: Compare,
    /// Rows the query returns on MariaDB 10.11 (a check that the corpus loaded).
    rows: usize,
    sql: String,
}

fn corpus_queries(text: &str) -> Vec<CorpusQuery> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.splitn(5, '\t').collect();
            assert_eq!(f.len(), 5, "queries.tsv: malformed line: {l}");
            let compare = match f[1] {
                "ordered" => Compare::Ordered,
                "unordered" | "single" => Compare::Unordered,
                "ambiguous" => Compare::Ambiguous,
                other => panic!("queries.tsv: unknown compare `{other}` in: {l}"),
            };
            CorpusQuery {
                id: f[0].to_string(),
                compare,
                rows: f[2]
                    .parse()
                    .unwrap_or_else(|_| panic!("queries.tsv: bad row count in: {l}")),
                sql: f[4].trim().to_string(),
            }
        })
        .collect()
}

fn corpus_rules() -> String {
    let mut s = String::new();
    for t in ["t_order", "t_order_item"] {
        s.push_str(&hash_slot_table(t, "user_id", &L));
    }
    for t in ["t_country", "t_product_category"] {
        let _ = write!(s, "[tables.{t}]\nrule = \"broadcast\"\n\n");
    }
    for (t, node) in [
        ("t_user", "ds0"),
        ("t_product", "ds0"),
        ("t_merchant", "ds1"),
        ("t_product_detail", "ds1"),
    ] {
        let _ = write!(s, "[tables.{t}]\nrule = \"single\"\nnode = \"{node}\"\n\n");
    }
    s
}

#[tokio::test]
async fn shardingsphere_corpus() {
    let schema = read_corpus_file("schema.sql");
    let data = read_corpus_file("data.sql");
    let queries = corpus_queries(&read_corpus_file("queries.tsv"));
    assert!(!queries.is_empty(), "queries.tsv holds no query");

    let c = cluster();
    let proxy = start_proxy_on(c, &SHARDS, &corpus_rules());
    assert!(
        !proxy.rules.contains(&format!(":{}/", c.ports[REFERENCE])),
        "the proxy's rules must not name the reference node"
    );
    let mut pair = Pair::new(&proxy, c).await;

    // The same statements through the proxy (DDL to every node, rows routed) and on the
    // reference.
    let statements: Vec<String> = sql_statements(&schema)
        .into_iter()
        .chain(sql_statements(&data))
        .collect();
    for sql in &statements {
        must(&mut pair.p, sql, "the proxy").await;
        must(&mut pair.r, sql, "the reference").await;
    }

    let mut text = Tally::default();
    let mut again = Tally::default();
    let mut prepared = Tally::default();
    let mut row_count_mismatch: Vec<String> = Vec::new();
    for q in &queries {
        let check = Check::exact(q.compare);
        let (want, got) = pair.both(&q.sql, false).await;
        if let Ok(w) = &want {
            if w.rows.len() != q.rows {
                row_count_mismatch.push(format!(
                    "{}: the reference returned {} rows, queries.tsv says {}",
                    q.id,
                    w.rows.len(),
                    q.rows
                ));
            }
        }
        text.add(&q.id, &q.sql, judge(&want, &got, &check));

        // Again: a shape seen before may run on its cached plan now.
        let (want, got) = pair.both(&q.sql, false).await;
        again.add(&q.id, &q.sql, judge(&want, &got, &check));

        let (want, got) = pair.both(&q.sql, true).await;
        prepared.add(&q.id, &q.sql, judge(&want, &got, &check));
    }

    let (cross, cross_prepared) = cross_node(&mut pair).await;

    print_tally("corpus", &text, None);
    print_tally("corpus (again, plan cache)", &again, Some(&text));
    print_tally("corpus (prepared)", &prepared, Some(&text));
    let cached: u64 = proxy
        .shared
        .plans
        .top(usize::MAX)
        .iter()
        .map(|e| {
            e.cached_executions
                .load(std::sync::atomic::Ordering::Relaxed)
        })
        .sum();
    println!("corpus: {cached} executions ran on a cached plan");
    print_tally("cross-node", &cross, None);
    print_tally("cross-node (prepared)", &cross_prepared, None);

    assert!(
        row_count_mismatch.is_empty(),
        "the reference does not hold the corpus as expected:\n{}",
        row_count_mismatch.join("\n")
    );
    let mut failures = Vec::new();
    if !text.wrong.is_empty() || !again.wrong.is_empty() || !prepared.wrong.is_empty() {
        failures.push(format!(
            "{} wrong answers in the text protocol ({} when repeated), {} as prepared statements (listed above)",
            text.wrong.len(),
            again.wrong.len(),
            prepared.wrong.len()
        ));
    }
    for (name, t) in [
        ("cross-node", &cross),
        ("cross-node (prepared)", &cross_prepared),
    ] {
        if !t.wrong.is_empty() || !t.refused.is_empty() {
            failures.push(format!(
                "{name}: {} wrong, {} refused of the forms the proxy must answer (listed above)",
                t.wrong.len(),
                t.refused.len()
            ));
        }
    }
    if again.matched != text.matched {
        failures.push(format!(
            "corpus: {} queries matched at first, {} when repeated",
            text.matched, again.matched
        ));
    }
    if text.matched < CORPUS_MATCHED_FLOOR {
        failures.push(format!(
            "corpus: only {} queries matched, the floor is {CORPUS_MATCHED_FLOOR}",
            text.matched
        ));
    }
    if prepared.matched < CORPUS_PREPARED_MATCHED_FLOOR {
        failures.push(format!(
            "corpus (prepared): only {} queries matched, the floor is {CORPUS_PREPARED_MATCHED_FLOOR}",
            prepared.matched
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Queries over the corpus tables whose tables are placed apart, or that no node can answer
/// over its own rows: each must match the reference (the proxy gathers them on one node) in
/// both protocols. `t_user`, `t_product` sit on ds0, `t_merchant`, `t_product_detail` on ds1,
/// `t_order` and `t_order_item` are sharded by `user_id`, the rest broadcast.
const CROSS_NODE: &[(&str, Compare, &str)] = &[
    // A sharded table read in a subquery of a broadcast one (each node alone counts its own).
    ("scalar-subquery", Compare::Unordered, "SELECT (SELECT COUNT(*) FROM t_order) AS n, country_id FROM t_country"),
    ("unaliased-subquery", Compare::Unordered, "SELECT (SELECT COUNT(*) FROM t_order), country_id FROM t_country"),
    ("not-in", Compare::Ordered, "SELECT country_id FROM t_country WHERE country_id NOT IN (SELECT merchant_id FROM t_order WHERE merchant_id IS NOT NULL) ORDER BY country_id"),
    ("exists-broadcast", Compare::Ordered, "SELECT c.country_id FROM t_country c WHERE EXISTS (SELECT 1 FROM t_order o WHERE o.merchant_id = c.country_id) ORDER BY 1"),
    ("left-join-broadcast", Compare::Ordered, "SELECT COUNT(*), COUNT(o.order_id) FROM t_country c LEFT JOIN t_order o ON o.merchant_id = c.country_id"),
    ("right-join", Compare::Ordered, "SELECT c.country_id, o.order_id FROM t_order o RIGHT JOIN t_country c ON o.merchant_id = c.country_id ORDER BY c.country_id, o.order_id"),
    ("derived-group", Compare::Ordered, "SELECT * FROM (SELECT status, COUNT(*) c FROM t_order GROUP BY status) d ORDER BY status"),
    ("derived-limit", Compare::Ordered, "SELECT * FROM (SELECT order_id FROM t_order ORDER BY order_id LIMIT 3) d ORDER BY order_id"),
    ("with", Compare::Ordered, "WITH x AS (SELECT user_id, COUNT(*) n FROM t_order GROUP BY user_id) SELECT MAX(n), COUNT(*) FROM x"),
    // Tables on different nodes.
    ("sharded-join-single", Compare::Ordered, "SELECT o.order_id, m.merchant_name FROM t_order o JOIN t_merchant m ON o.merchant_id = m.merchant_id ORDER BY o.order_id"),
    ("single-join-single", Compare::Ordered, "SELECT u.user_name, m.merchant_name FROM t_user u JOIN t_merchant m ON m.merchant_id = u.user_id AND m.country_id = 1 WHERE u.user_id < 12 ORDER BY u.user_id"),
    ("left-join-single", Compare::Ordered, "SELECT u.user_id, COUNT(o.order_id) AS n FROM t_user u LEFT JOIN t_order o ON o.user_id = u.user_id AND o.status = 'init' GROUP BY u.user_id ORDER BY u.user_id"),
    ("not-on-shard-key", Compare::Ordered, "SELECT o.status, SUM(i.quantity), COUNT(*) FROM t_order o JOIN t_order_item i ON i.order_id = o.order_id GROUP BY o.status ORDER BY o.status"),
    ("scalar-from-single", Compare::Ordered, "SELECT order_id FROM t_order WHERE user_id = (SELECT MAX(user_id) FROM t_user) ORDER BY order_id"),
    // Semi-joins of the tables sharded alike by their key: answered on each node; NOT IN
    // and a grouped subquery gathered.
    ("in-colocated", Compare::Ordered, "SELECT o.order_id, o.status FROM t_order o WHERE o.user_id IN (SELECT i.user_id FROM t_order_item i WHERE i.order_id % 3 = 0 AND i.user_id < 15) ORDER BY o.order_id"),
    ("in-colocated-count", Compare::Ordered, "SELECT COUNT(*), MAX(order_id) FROM t_order WHERE status = 'init' AND user_id IN (SELECT user_id FROM t_order_item)"),
    ("not-in-colocated", Compare::Ordered, "SELECT o.order_id FROM t_order o WHERE o.user_id NOT IN (SELECT i.user_id FROM t_order_item i WHERE i.order_id % 3 = 0 AND i.user_id < 15) ORDER BY o.order_id"),
    ("in-colocated-grouped", Compare::Ordered, "SELECT o.order_id FROM t_order o WHERE o.user_id IN (SELECT MIN(i.user_id) FROM t_order_item i GROUP BY i.product_id) ORDER BY o.order_id"),
    ("in-single", Compare::Ordered, "SELECT COUNT(*) FROM t_order WHERE merchant_id IN (SELECT merchant_id FROM t_merchant WHERE country_id = 1)"),
    ("correlated", Compare::Ordered, "SELECT m.merchant_id, (SELECT COUNT(*) FROM t_order o WHERE o.merchant_id = m.merchant_id) AS n FROM t_merchant m ORDER BY m.merchant_id"),
    ("three-placements", Compare::Ordered, "SELECT p.product_name, d.description, SUM(i.quantity) q FROM t_order_item i JOIN t_product p ON p.product_id = i.product_id JOIN t_product_detail d ON d.product_id = p.product_id GROUP BY p.product_name, d.description ORDER BY q DESC, p.product_name, d.description"),
    // UNION, GROUP_CONCAT, COUNT(DISTINCT a, b) over several nodes.
    ("union", Compare::Ordered, "SELECT user_id FROM t_user UNION SELECT user_id FROM t_order ORDER BY user_id LIMIT 5"),
    ("union-all", Compare::Ordered, "SELECT COUNT(*) FROM (SELECT user_id FROM t_order UNION ALL SELECT user_id FROM t_order_item) x"),
    ("union-broadcast", Compare::Unordered, "SELECT country_id FROM t_country UNION ALL SELECT merchant_id FROM t_order WHERE user_id = 10"),
    ("group-concat", Compare::Ordered, "SELECT status, GROUP_CONCAT(order_id ORDER BY order_id DESC SEPARATOR ';') AS ids FROM t_order GROUP BY status ORDER BY status"),
    ("group-concat-distinct", Compare::Ordered, "SELECT GROUP_CONCAT(DISTINCT status ORDER BY status) FROM t_order"),
    ("count-distinct-pair", Compare::Ordered, "SELECT COUNT(DISTINCT user_id, status) AS n FROM t_order"),
    ("count-distinct-unaliased", Compare::Ordered, "SELECT count(distinct user_id, status), COUNT(DISTINCT status) FROM t_order WHERE order_id > 0"),
];

async fn cross_node(pair: &mut Pair<'_>) -> (Tally, Tally) {
    let (mut text, mut prepared) = (Tally::default(), Tally::default());
    for (id, compare, sql) in CROSS_NODE {
        let check = Check::exact(*compare);
        let (want, got) = pair.both(sql, false).await;
        text.add(id, sql, judge(&want, &got, &check));
        let (want, got) = pair.both(sql, true).await;
        prepared.add(id, sql, judge(&want, &got, &check));
    }
    // GROUP_CONCAT cut at group_concat_max_len, on the gathering node too.
    for (conn, who) in [(&mut pair.p, "the proxy"), (&mut pair.r, "the reference")] {
        must(conn, "SET SESSION group_concat_max_len = 12", who).await;
    }
    let sql = "SELECT GROUP_CONCAT(order_id ORDER BY order_id) FROM t_order";
    let (want, got) = pair.both(sql, false).await;
    text.add(
        "group-concat-max-len",
        sql,
        judge(&want, &got, &Check::exact(Compare::Ordered)),
    );
    // ... with MariaDB's warning for the cut, as SHOW WARNINGS reads it.
    let sql = "SHOW WARNINGS";
    let (want, got) = pair.both(sql, false).await;
    assert!(
        want.as_ref().is_ok_and(|w| w.rows.len() == 1),
        "the reference warns of the cut GROUP_CONCAT: {want:?}"
    );
    text.add(
        "group-concat-warning",
        sql,
        judge(&want, &got, &Check::exact(Compare::Ordered)),
    );
    for (conn, who) in [(&mut pair.p, "the proxy"), (&mut pair.r, "the reference")] {
        must(conn, "SET SESSION group_concat_max_len = DEFAULT", who).await;
    }
    (text, prepared)
}
