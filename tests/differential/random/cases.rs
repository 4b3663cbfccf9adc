//! What the random tester found: small hand-made setups, the regression cases re-run on every
//! run ([`REGRESSIONS`]), and the defects not fixed yet ([`KNOWN`]).
//!
//! To keep a new difference: minimise it with `random_repro` (`random/repro.rs`), add its
//! tables to [`SETUPS`] (or name the seed, `seed:N`), its statement to [`REGRESSIONS`], and,
//! while the proxy still gets it wrong, a [`KNOWN`] entry naming the defect.

use crate::common::hash_slot_table;
use crate::judge::Compare;

/// A small hand-made set of tables: the `[tables.*]` rules and the statements that create
/// and fill them (run on the reference and through the proxy). Columns are named after
/// their type as in the random tables (`bin_*` utf8mb4_bin, `ci_*` utf8mb4_general_ci).
pub(crate) struct FixedSetup {
    pub(crate) name: &'static str,
    pub(crate) rules: Rules,
    pub(crate) load: &'static [&'static str],
}

/// The rules of a setup.
pub(crate) enum Rules {
    /// Tables hash_slot by a column over two nodes (slots 0-511 on ds0, 512-1023 on ds1):
    /// `(table, column)`.
    TwoNodes(&'static [(&'static str, &'static str)]),
    /// `[tables.*]` rules as written.
    Text(&'static str),
}

impl Rules {
    pub(crate) fn toml(&self) -> String {
        match self {
            Rules::TwoNodes(tables) => tables
                .iter()
                .map(|(t, c)| hash_slot_table(t, c, &[(0, 511), (512, 1023)]))
                .collect(),
            Rules::Text(t) => t.to_string(),
        }
    }
}

pub(crate) const SETUPS: &[FixedSetup] = &[
    // 'a', 'A' on ds0; 'B', 'b' on ds1: byte order and case-insensitive order disagree
    // across the nodes.
    FixedSetup {
        name: "bin_strings",
        rules: Rules::TwoNodes(&[("rqr_bin", "id")]),
        load: &[
            "CREATE TABLE rqr_bin (id INT PRIMARY KEY, bin_s VARCHAR(10) COLLATE utf8mb4_bin)",
            "INSERT INTO rqr_bin VALUES (1, 'B'), (2, 'b'), (10, 'a'), (11, 'A')",
        ],
    },
    // Sharded by a utf8mb4_general_ci string: 'abc' (slot 450) on ds0, 'ABC' (840) and
    // 'Abc' (802) on ds1, all three equal under the collation.
    FixedSetup {
        name: "ci_string_key",
        rules: Rules::TwoNodes(&[("rqr_cik", "ci_k")]),
        load: &[
            "CREATE TABLE rqr_cik (id INT PRIMARY KEY, ci_k VARCHAR(10) COLLATE utf8mb4_general_ci NOT NULL)",
            "INSERT INTO rqr_cik VALUES (1, 'abc'), (2, 'ABC'), (3, 'Abc')",
        ],
    },
    // Two tables sharded by id over two nodes; strings some of which are not numbers.
    FixedSetup {
        name: "two_sharded",
        rules: Rules::TwoNodes(&[("rqr_str", "id"), ("rqr_key", "id")]),
        load: &[
            "CREATE TABLE rqr_str (id INT PRIMARY KEY, ci_s VARCHAR(10))",
            "INSERT INTO rqr_str VALUES (1, 'abc'), (2, '5'), (10, 'x'), (11, 'zzz')",
            "CREATE TABLE rqr_key (id INT PRIMARY KEY)",
            "INSERT INTO rqr_key VALUES (1), (2), (10), (11)",
        ],
    },
    // A broadcast table and a single table on ds3 (not ds0).
    FixedSetup {
        name: "single_and_broadcast",
        rules: Rules::Text(
            "[tables.rqr_s]\nrule = \"single\"\nnode = \"ds3\"\n\n\
            [tables.rqr_bc]\nrule = \"broadcast\"\n",
        ),
        load: &[
            "CREATE TABLE rqr_s (id INT PRIMARY KEY, int_v INT)",
            "INSERT INTO rqr_s VALUES (1, 10), (2, 20)",
            "CREATE TABLE rqr_bc (id INT PRIMARY KEY, int_w INT)",
            "INSERT INTO rqr_bc VALUES (1, 5), (3, 7)",
        ],
    },
    // Doubles on two nodes by id.
    FixedSetup {
        name: "doubles",
        rules: Rules::TwoNodes(&[("rqr_dbl", "id")]),
        load: &[
            "CREATE TABLE rqr_dbl (id INT PRIMARY KEY, dbl_d DOUBLE)",
            "INSERT INTO rqr_dbl VALUES (1, 1.0), (2, 2.0), (10, 2.0)",
        ],
    },
    // Integers on two nodes by id.
    FixedSetup {
        name: "decimal_division",
        rules: Rules::TwoNodes(&[("rqr_div", "id")]),
        load: &[
            "CREATE TABLE rqr_div (id INT PRIMARY KEY)",
            "INSERT INTO rqr_div VALUES (1), (2), (10)",
        ],
    },
    // DATETIMEs on two nodes by id, two of them at midnight.
    FixedSetup {
        name: "datetimes",
        rules: Rules::TwoNodes(&[("rqr_dt", "id")]),
        load: &[
            "CREATE TABLE rqr_dt (id INT PRIMARY KEY, dt_v DATETIME)",
            "INSERT INTO rqr_dt VALUES (1, '2020-01-01 00:00:00'), (2, '2020-01-01 00:00:00'), \
             (10, '2020-01-02 10:00:00'), (11, '2019-12-31 23:00:00')",
        ],
    },
];

/// A difference found once, kept: `sql` runs on every run (text and prepared) over the
/// tables of `setup` (`seed:N`: `schema::gen_setup(N)`; else a [`SETUPS`] name).
pub(crate) struct Regression {
    pub(crate) setup: &'static str,
    pub(crate) sql: &'static str,
    pub(crate) compare: Compare,
    /// Output columns compared with a tolerance (DOUBLE).
    pub(crate) tolerant: &'static [usize],
    /// Output columns where any of several equal strings is right: `(column,
    /// case-insensitive)`.
    pub(crate) fold: &'static [(usize, bool)],
    /// Parameters as SQL literals (`1, 'abc'`): the statement then runs prepared with them
    /// bound to its `?`; empty: it runs in the text and binary protocols without.
    pub(crate) params: &'static str,
}

/// A case with parameters bound to its `?`.
const fn with_params(
    setup: &'static str,
    sql: &'static str,
    params: &'static str,
    compare: Compare,
) -> Regression {
    Regression {
        setup,
        sql,
        compare,
        tolerant: &[],
        fold: &[],
        params,
    }
}

const fn case(setup: &'static str, sql: &'static str, compare: Compare) -> Regression {
    Regression {
        setup,
        sql,
        compare,
        tolerant: &[],
        fold: &[],
        params: "",
    }
}

pub(crate) const REGRESSIONS: &[Regression] = &[
    // utf8mb4_bin strings merged as utf8mb4_general_ci ones.
    case(
        "bin_strings",
        "SELECT bin_s, id FROM rqr_bin ORDER BY bin_s, id",
        Compare::Ordered,
    ),
    case(
        "bin_strings",
        "SELECT bin_s FROM rqr_bin ORDER BY bin_s DESC LIMIT 1",
        Compare::Ordered,
    ),
    case(
        "bin_strings",
        "SELECT MAX(bin_s), MIN(bin_s) FROM rqr_bin",
        Compare::Ordered,
    ),
    case(
        "bin_strings",
        "SELECT DISTINCT bin_s FROM rqr_bin",
        Compare::Unordered,
    ),
    case(
        "bin_strings",
        "SELECT bin_s, COUNT(*) FROM rqr_bin GROUP BY bin_s",
        Compare::Unordered,
    ),
    case(
        "bin_strings",
        "SELECT COUNT(DISTINCT bin_s) FROM rqr_bin",
        Compare::Ordered,
    ),
    // A utf8mb4_general_ci shard key: equal keys on several nodes.
    case(
        "ci_string_key",
        "SELECT id FROM rqr_cik WHERE ci_k = 'abc'",
        Compare::Unordered,
    ),
    case(
        "ci_string_key",
        "SELECT COUNT(*) FROM rqr_cik a JOIN rqr_cik b ON a.ci_k = b.ci_k",
        Compare::Ordered,
    ),
    // A gathered read's copy (INSERT ... SELECT) fails on a conversion MariaDB only warns of.
    case(
        "two_sharded",
        "SELECT COUNT(*) FROM rqr_str WHERE ci_s = 5 AND id IN (SELECT id FROM rqr_key)",
        Compare::Ordered,
    ),
    // MariaDB rejects a HAVING naming a column that is neither grouped nor selected.
    case(
        "two_sharded",
        "SELECT LENGTH(ci_s) AS k0, COUNT(*) FROM rqr_str GROUP BY k0 HAVING LENGTH(ci_s) = 3",
        Compare::Unordered,
    ),
    case(
        "two_sharded",
        "SELECT (id - 5) AS k0, MAX(id) FROM rqr_key GROUP BY (id - 5) HAVING (id - 5) > 0",
        Compare::Unordered,
    ),
    // A DATETIME at midnight in a merged HAVING (binary protocol).
    case(
        "datetimes",
        "SELECT dt_v, COUNT(*) FROM rqr_dt GROUP BY dt_v HAVING dt_v = '2020-01-01 00:00:00'",
        Compare::Unordered,
    ),
    // Prepared with parameters: the columns' names, and DISTINCT aggregates of one.
    with_params(
        "two_sharded",
        "SELECT ci_s, ? FROM rqr_str ORDER BY id",
        "'x'",
        Compare::Ordered,
    ),
    with_params(
        "two_sharded",
        "SELECT MAX(id + ?) FROM rqr_str",
        "1",
        Compare::Ordered,
    ),
    with_params(
        "two_sharded",
        "SELECT COUNT(DISTINCT ?) FROM rqr_str",
        "62",
        Compare::Ordered,
    ),
    with_params(
        "two_sharded",
        "SELECT id % 2, SUM(DISTINCT ?) AS a1 FROM rqr_str GROUP BY id % 2",
        "2",
        Compare::Unordered,
    ),
    // Prepared statements over a broadcast table and a single table on another node.
    case(
        "single_and_broadcast",
        "SELECT b.int_v FROM rqr_bc a LEFT JOIN rqr_s b ON a.id = b.id",
        Compare::Unordered,
    ),
    case(
        "single_and_broadcast",
        "SELECT int_w FROM rqr_bc UNION ALL SELECT int_v FROM rqr_s",
        Compare::Unordered,
    ),
    // A DOUBLE with fixed decimals, averaged and summed over two nodes.
    case(
        "doubles",
        "SELECT AVG(ROUND(dbl_d, 1)), AVG(FLOOR(dbl_d)), SUM(ROUND(dbl_d, 1)) FROM rqr_dbl",
        Compare::Ordered,
    ),
    // A DECIMAL quotient summed and averaged over two nodes.
    case(
        "decimal_division",
        "SELECT SUM(id / 3) FROM rqr_div WHERE id IN (1, 10)",
        Compare::Ordered,
    ),
    case(
        "decimal_division",
        "SELECT AVG(id / 3) FROM rqr_div",
        Compare::Ordered,
    ),
    // Found by seed 17: the reference's own defect (see KNOWN).
    case(
        "seed:17",
        "SELECT CHAR_LENGTH(o.ci_5) FROM rq17_d o WHERE o.id <> ALL (SELECT s.uint_2 FROM rq17_c s) \
         AND o.dt_6 IN ('2021-01-01 23:59:59', '2020-01-01 00:00:00', '2020-06-15 12:00:00', NULL)",
        Compare::Unordered,
    ),
    // Found by seed 3088: the reference's own defect (see KNOWN).
    case(
        "seed:3088",
        "SELECT DISTINCT 1 FROM rq3088_c LIMIT 31, 8",
        Compare::Ordered,
    ),
    // Found by seed 1040: the reference's own defect (see KNOWN), kept so that a fix in
    // MariaDB or a change of the merge shows.
    case(
        "seed:1040",
        "SELECT LEAST(uint_3, id) AS k0, SUM(DISTINCT (uint_3 + 3)), AVG((1.5 - 2)) \
         FROM rq1040_a WHERE ci_4 LIKE '' GROUP BY k0 HAVING MIN(ci_4) IS NOT NULL \
         ORDER BY k0 DESC",
        Compare::Ordered,
    ),
];

/// A difference as the [`KNOWN`] matchers see it.
pub(crate) struct Diff<'a> {
    pub(crate) sql: &'a str,
    /// The judge's account of the difference.
    pub(crate) why: &'a str,
    /// Run prepared with `?` parameters bound.
    pub(crate) params: bool,
    /// The `[tables.*]` rules the statement ran under.
    pub(crate) rules: &'a str,
}

/// A defect not fixed yet: a difference it matches counts as `known`, not as a failure.
/// Each entry names its defect; remove it once the defect is fixed (a run then fails where
/// the defect is still there). Keep the matchers narrow: what they match is not checked.
pub(crate) struct Known {
    pub(crate) defect: &'static str,
    pub(crate) matches: fn(&Diff) -> bool,
}

pub(crate) const KNOWN: &[Known] = &[
    Known {
        // A row's slot is the CRC32 of its key's exact bytes, so keys equal under the key's
        // collation live on different nodes: 'abc' and 'ABC' under a `_ci` collation, 'abc'
        // and 'abc ' under any PAD SPACE one (utf8mb4_bin too). `k = 'abc'` is routed to one
        // node and a join on the key is run per node. Matched: a row difference in a
        // statement naming the `ci_*` or `bin_*` shard key of a hash_slot or directory table.
        defect: "hash_slot / directory key of a string column: keys its collation equates",
        matches: |d| d.why.starts_with("rows differ") && names_a_key(d.sql, &string_keys(d.rules)),
    },
    Known {
        // A prepared statement's parameters are written into the SQL the nodes get as
        // literals, so a column named by its expression shows the values (`MAX(id + 1)`,
        // `_utf8mb4 X'78'` where MariaDB shows `MAX(id + ?)`, `?`), and a column's type is
        // the literal's (`CASE ... THEN id ELSE ? END` is BIGINT in MariaDB's prepared
        // statement, INT with `ELSE 5`). Matched: only the column metadata differs, in a
        // statement run with parameters.
        defect: "prepared statement's parameters written as literals: column names and types",
        matches: |d| d.params && d.why.starts_with("columns differ"),
    },
    Known {
        // Not the proxy's: MariaDB 10.11 answers `-6 <> ALL (SELECT x FROM u)` (x an INT
        // UNSIGNED column holding a NULL) as TRUE on the reference's tables, and as
        // NULL (rightly) over the proxy's temporary copies of the same rows. Matched: a
        // `<> ALL` subquery where only the reference has rows.
        defect: "reference (MariaDB) takes a negative <> ALL (unsigned column with NULL) as TRUE",
        matches: |d| d.sql.contains("<> ALL (") && d.why.contains("only the proxy has 0 row(s)"),
    },
    Known {
        // Not the proxy's: MariaDB 10.11 itself (the reference) loses the NULL group of
        // `SELECT LEAST(u, id) AS k, SUM(DISTINCT u) FROM t GROUP BY k HAVING MIN(s) IS NOT
        // NULL ORDER BY k DESC` (seed 1040: with `ORDER BY k` ASC it returns that group).
        // Matched: the proxy has exactly one row more, a NULL key, in such a statement.
        defect: "reference (MariaDB) drops the NULL group under DISTINCT aggregate + HAVING + DESC",
        matches: |d| {
            d.sql.contains("(DISTINCT ")
                && d.sql.contains(" HAVING ")
                && d.sql.contains(" DESC")
                && d.why.contains("only the reference has 0 row(s)")
                && d.why.contains("only the proxy has 1 row(s): (NULL")
        },
    },
    Known {
        // A `range` rule over text compares keys as a `_ci` collation does (upper-cased,
        // trailing spaces cut: README, "range"), so over a `utf8mb4_bin` key it places 'abc'
        // with 'ABC' and prunes `k BETWEEN '' AND 'alpha'` to the ranges below 'ALPHA',
        // missing 'Zz'. Matched: a row difference in a statement naming the `bin_*` key of a
        // range table.
        defect: "range rule over a _bin string key compares as _ci",
        matches: |d| {
            d.why.starts_with("rows differ") && names_a_key(d.sql, &bin_range_keys(d.rules))
        },
    },
    Known {
        // Not the proxy's: MariaDB 10.11 (the reference) answers a correlated `(SELECT
        // COUNT(*) FROM s WHERE s.bin_x = o.ci_y)` (a `_bin` column compared with a `_ci`
        // one: the `_bin` collation decides) differently for the same row depending on the
        // rest of the statement: its subquery cache keys the outer value in the `_ci`
        // collation, so 'b' reuses the count of 'B' (seeds 116, 145: a row whose count is 7,
        // or 5, alone, is 19, or 1, under ORDER BY; the proxy's nodes, running the same text
        // over fewer outer rows, answer 7 and 5). Matched: a row difference in a statement
        // with such a subquery.
        defect: "reference (MariaDB) subquery cache equates _ci values in a _bin = _ci comparison",
        matches: |d| {
            let mixed = |a: &str, b: &str| {
                d.sql.match_indices(a).any(|(at, _)| {
                    let rest = &d.sql[at + a.len()..];
                    let digits =
                        rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
                    rest[digits..].starts_with(b)
                })
            };
            d.why.starts_with("rows differ")
                && d.sql.contains("(SELECT COUNT(*) FROM ")
                && (mixed("s.bin_", " = o.ci_") || mixed("s.ci_", " = o.bin_"))
        },
    },
    Known {
        // Not the proxy's: MariaDB 10.11 (the reference) answers `SELECT DISTINCT 1 FROM t
        // LIMIT 31, 8` with one row when t has more than 31 rows (none with 3 rows): the
        // offset is taken from the rows before DISTINCT. The proxy answers none, rightly.
        // Matched: a DISTINCT list naming no column, the reference's one row missing.
        defect: "reference (MariaDB) applies LIMIT's offset before DISTINCT of a constant",
        matches: |d| {
            let list = d
                .sql
                .strip_prefix("SELECT DISTINCT ")
                .and_then(|rest| rest.split_once(" FROM "))
                .map(|(list, _)| list);
            list.is_some_and(|l| !names_a_column(l))
                && d.sql.contains(" LIMIT ")
                && d.why.contains("only the reference has 1 row(s)")
                && d.why.contains("only the proxy has 0 row(s)")
        },
    },
];

/// Does `text` name a column of the random or hand-made tables (`id`, `ci_3`, `bin_s`)?
/// String literals do not count.
fn names_a_column(text: &str) -> bool {
    let mut bare = String::new();
    for (i, part) in text.split('\'').enumerate() {
        if i % 2 == 0 {
            bare.push_str(part);
            bare.push(' ');
        }
    }
    names(&bare, "id")
        || bare
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w.contains('_') && w.starts_with(|c: char| c.is_ascii_lowercase()))
}

/// Does `sql` name `word` as a whole identifier?
fn names(sql: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    sql.match_indices(word).any(|(at, _)| {
        let before = sql[..at].chars().next_back();
        let after = sql[at + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// `(table, key column)` of every range table keyed by a `bin_*` column.
fn bin_range_keys(rules: &str) -> Vec<(String, String)> {
    keys_of(rules, &["range"], &["bin_"])
}

/// `(table, key column)` of every hash_slot or directory table keyed by a `ci_*` or `bin_*`
/// column.
fn string_keys(rules: &str) -> Vec<(String, String)> {
    keys_of(rules, &["hash_slot", "directory"], &["ci_", "bin_"])
}

/// `(table, key column)` of every table of `rules` whose rule is one of `kinds` and whose
/// key column's name starts with one of `prefixes`.
fn keys_of(rules: &str, kinds: &[&str], prefixes: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut table: Option<String> = None;
    let mut kind = false;
    for line in rules.lines().map(str::trim) {
        if let Some(t) = line.strip_prefix("[tables.") {
            table = Some(t.trim_end_matches(']').to_string());
            kind = false;
        } else if let Some(r) = line.strip_prefix("rule = \"") {
            kind = kinds.contains(&r.trim_end_matches('"'));
        } else if let Some(c) = line.strip_prefix("column = \"") {
            let c = c.trim_end_matches('"');
            let named = prefixes.iter().any(|p| c.starts_with(p));
            if let (Some(t), true, true) = (&table, kind, named) {
                out.push((t.clone(), c.to_string()));
            }
        }
    }
    out
}

/// Does the statement name one of `keys`' tables and its key column?
fn names_a_key(sql: &str, keys: &[(String, String)]) -> bool {
    keys.iter()
        .any(|(table, key)| names(sql, table) && names(sql, key))
}

#[test]
fn the_known_matchers_read_rules_and_names() {
    let rules = "[tables.t1]\nrule = \"hash_slot\"\ncolumn = \"ci_2\"\nslots = []\n\n\
                 [tables.t2]\nrule = \"range\"\ncolumn = \"ci_1\"\n\n\
                 [tables.t3]\nrule = \"range\"\ncolumn = \"bin_1\"\n\n\
                 [tables.t4]\nrule = \"directory\"\ncolumn = \"bin_4\"\n";
    assert_eq!(
        string_keys(rules),
        vec![
            ("t1".to_string(), "ci_2".to_string()),
            ("t4".to_string(), "bin_4".to_string())
        ]
    );
    assert_eq!(
        bin_range_keys(rules),
        vec![("t3".to_string(), "bin_1".to_string())]
    );
    assert!(names("SELECT ci_2 FROM t1", "ci_2"));
    assert!(!names("SELECT ci_22 FROM t1", "ci_2"));
    assert!(!names("SELECT xci_2 FROM t1", "ci_2"));
    assert!(names("SELECT a.ci_2 FROM t1 a", "ci_2"));
    assert!(!names_a_column("DATE('2020-01-01 00:00:00') AS d0"));
    assert!(!names_a_column("1 AS d0, 'a_b'"));
    assert!(names_a_column("ci_3 AS d0"));
    assert!(names_a_column("(id + 1) AS d0"));
}
