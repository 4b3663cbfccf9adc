//! The random tester's tables: random columns, rows and a random placement rule per table,
//! all drawn from the seed alone (the queries draw from a generator of their own), so that a
//! seed names the same tables and rows however the query grammar changes. A regression case
//! (`super::REGRESSIONS`) names its setup by that seed: change what this file draws only
//! together with those cases.

use std::fmt::Write as _;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::generated::sql_string;

/// A column's SQL type. Columns are named after it (`int_2`, `ci_3`, ...), so that a query
/// shows the types it works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Int,
    UInt,
    Big,
    UBig,
    Dec,
    Dbl,
    /// VARCHAR with utf8mb4_general_ci.
    Ci,
    /// VARCHAR with utf8mb4_bin.
    Bin,
    Date,
    Dt,
}

impl Kind {
    const ALL: [Kind; 10] = [
        Kind::Int,
        Kind::UInt,
        Kind::Big,
        Kind::UBig,
        Kind::Dec,
        Kind::Dbl,
        Kind::Ci,
        Kind::Bin,
        Kind::Date,
        Kind::Dt,
    ];

    fn sql(self) -> &'static str {
        match self {
            Kind::Int => "INT",
            Kind::UInt => "INT UNSIGNED",
            Kind::Big => "BIGINT",
            Kind::UBig => "BIGINT UNSIGNED",
            Kind::Dec => "DECIMAL(12,3)",
            Kind::Dbl => "DOUBLE",
            Kind::Ci => "VARCHAR(24) COLLATE utf8mb4_general_ci",
            Kind::Bin => "VARCHAR(24) COLLATE utf8mb4_bin",
            Kind::Date => "DATE",
            Kind::Dt => "DATETIME",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Kind::Int => "int",
            Kind::UInt => "uint",
            Kind::Big => "big",
            Kind::UBig => "ubig",
            Kind::Dec => "dec",
            Kind::Dbl => "dbl",
            Kind::Ci => "ci",
            Kind::Bin => "bin",
            Kind::Date => "date",
            Kind::Dt => "dt",
        }
    }

    pub(crate) fn unsigned(self) -> bool {
        matches!(self, Kind::UInt | Kind::UBig)
    }

    pub(crate) fn integer(self) -> bool {
        matches!(self, Kind::Int | Kind::UInt | Kind::Big | Kind::UBig)
    }

    pub(crate) fn string(self) -> bool {
        matches!(self, Kind::Ci | Kind::Bin)
    }
}

/// A value as the rows hold it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lit {
    Null,
    /// A number in SQL text (`-12`, `1.500`, `1e10`).
    Num(String),
    /// A string, date or datetime, unquoted.
    Str(String),
}

impl Lit {
    pub(crate) fn sql(&self) -> String {
        match self {
            Lit::Null => "NULL".into(),
            Lit::Num(n) => n.clone(),
            Lit::Str(s) => sql_string(s),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Column {
    pub(crate) name: String,
    pub(crate) kind: Kind,
    pub(crate) nullable: bool,
}

/// Where a table's rows live. Nodes are the proxy's `ds0`..`ds3`.
#[derive(Debug, Clone)]
pub(crate) enum Rule {
    /// `(first slot, last slot, node)`, covering 0-1023.
    Hash {
        col: usize,
        slots: Vec<(u16, u16, usize)>,
    },
    /// `(exclusive upper bound, node)`; the last has no bound.
    Range {
        col: usize,
        ranges: Vec<(Option<Lit>, usize)>,
    },
    Broadcast,
    Single {
        node: usize,
    },
    /// Explicit `key -> node` entries and a hash_slot fallback.
    Directory {
        col: usize,
        entries: Vec<(String, usize)>,
        slots: Vec<(u16, u16, usize)>,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Table {
    pub(crate) name: String,
    /// The first column, `id`, is the primary key.
    pub(crate) cols: Vec<Column>,
    pub(crate) rule: Rule,
    pub(crate) rows: Vec<Vec<Lit>>,
}

impl Table {
    pub(crate) fn create_sql(&self) -> String {
        let cols: Vec<String> = self
            .cols
            .iter()
            .map(|c| {
                format!(
                    "{} {} {}",
                    c.name,
                    c.kind.sql(),
                    if c.nullable { "NULL" } else { "NOT NULL" }
                )
            })
            .collect();
        format!(
            "CREATE TABLE {} ({}, PRIMARY KEY (id)) DEFAULT CHARSET=utf8mb4",
            self.name,
            cols.join(", ")
        )
    }

    /// The `[tables.NAME]` section of the rules file.
    fn rules_toml(&self) -> String {
        let slots = |slots: &[(u16, u16, usize)]| {
            let v: Vec<String> = slots
                .iter()
                .map(|(a, b, n)| format!("{{ slots = \"{a}-{b}\", node = \"ds{n}\" }}"))
                .collect();
            format!("[{}]", v.join(", "))
        };
        let mut s = format!("[tables.{}]\n", self.name);
        match &self.rule {
            Rule::Hash { col, slots: sl } => {
                let _ = write!(
                    s,
                    "rule = \"hash_slot\"\ncolumn = \"{}\"\nslots = {}\n",
                    self.cols[*col].name,
                    slots(sl)
                );
            }
            Rule::Range { col, ranges } => {
                let v: Vec<String> = ranges
                    .iter()
                    .map(|(below, n)| match below {
                        Some(Lit::Num(b)) => format!("{{ below = {b}, node = \"ds{n}\" }}"),
                        Some(Lit::Str(b)) => format!("{{ below = \"{b}\", node = \"ds{n}\" }}"),
                        _ => format!("{{ node = \"ds{n}\" }}"),
                    })
                    .collect();
                let _ = write!(
                    s,
                    "rule = \"range\"\ncolumn = \"{}\"\nranges = [{}]\n",
                    self.cols[*col].name,
                    v.join(", ")
                );
            }
            Rule::Broadcast => s.push_str("rule = \"broadcast\"\n"),
            Rule::Single { node } => {
                let _ = write!(s, "rule = \"single\"\nnode = \"ds{node}\"\n");
            }
            Rule::Directory {
                col,
                entries,
                slots: sl,
            } => {
                let e: Vec<String> = entries
                    .iter()
                    .map(|(k, n)| format!("\"{k}\" = \"ds{n}\""))
                    .collect();
                let _ = write!(
                    s,
                    "rule = \"directory\"\ncolumn = \"{}\"\nentries = {{ {} }}\n\
                     fallback = {{ rule = \"hash_slot\", slots = {} }}\n",
                    self.cols[*col].name,
                    e.join(", "),
                    slots(sl)
                );
            }
        }
        s.push('\n');
        s
    }

    /// The rule in a few words, for the reports.
    pub(crate) fn rule_text(&self) -> String {
        let node_list = |slots: &[(u16, u16, usize)]| {
            let v: Vec<String> = slots
                .iter()
                .map(|(a, b, n)| format!("{a}-{b}:ds{n}"))
                .collect();
            v.join(" ")
        };
        match &self.rule {
            Rule::Hash { col, slots } => {
                format!("hash_slot({}) {}", self.cols[*col].name, node_list(slots))
            }
            Rule::Range { col, ranges } => {
                let v: Vec<String> = ranges
                    .iter()
                    .map(|(b, n)| match b {
                        Some(b) => format!("<{}:ds{n}", b.sql()),
                        None => format!("rest:ds{n}"),
                    })
                    .collect();
                format!("range({}) {}", self.cols[*col].name, v.join(" "))
            }
            Rule::Broadcast => "broadcast".into(),
            Rule::Single { node } => format!("single ds{node}"),
            Rule::Directory {
                col,
                entries,
                slots,
            } => {
                let e: Vec<String> = entries.iter().map(|(k, n)| format!("{k}:ds{n}")).collect();
                format!(
                    "directory({}) {} fallback {}",
                    self.cols[*col].name,
                    e.join(" "),
                    node_list(slots)
                )
            }
        }
    }

    /// The rows as multi-row INSERTs: without a column list, with one in table order, or
    /// with one in another order.
    pub(crate) fn inserts(&self, rng: &mut StdRng) -> Vec<String> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < self.rows.len() {
            let n = rng.gen_range(10..=60).min(self.rows.len() - at);
            let chunk = &self.rows[at..at + n];
            at += n;
            let mut order: Vec<usize> = (0..self.cols.len()).collect();
            let head = match rng.gen_range(0..3) {
                0 => String::new(),
                1 => format!(" ({})", self.names(&order)),
                _ => {
                    order.shuffle(rng);
                    format!(" ({})", self.names(&order))
                }
            };
            let tuples: Vec<String> = chunk
                .iter()
                .map(|r| {
                    let v: Vec<String> = order.iter().map(|&i| r[i].sql()).collect();
                    format!("({})", v.join(", "))
                })
                .collect();
            out.push(format!(
                "INSERT INTO {}{head} VALUES {}",
                self.name,
                tuples.join(", ")
            ));
        }
        out
    }

    fn names(&self, order: &[usize]) -> String {
        let v: Vec<&str> = order.iter().map(|&i| self.cols[i].name.as_str()).collect();
        v.join(", ")
    }

    /// The table in a few lines, for the reports: definition, rule.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{};  -- {} rows, {}",
            self.create_sql(),
            self.rows.len(),
            self.rule_text()
        )
    }
}

/// The tables of one seed.
pub(crate) struct Setup {
    pub(crate) seed: u64,
    pub(crate) tables: Vec<Table>,
}

impl Setup {
    pub(crate) fn rules_toml(&self) -> String {
        self.tables.iter().map(Table::rules_toml).collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Values

/// Strings: case variants, accents, empty, quotes, LIKE wildcards, numbers in text, a
/// trailing space.
const WORDS: [&str; 26] = [
    "abc", "ABC", "Abc", "aBc", "b", "B", "", "x", "X", "Zz", "zz", "alpha", "Alpha", "ALPHA",
    "O'Brien", "o'brien", "ünï", "ÜNÏ", "a b", "a_c", "50%", "100", "-5", "1e3", "0", "abc ",
];
/// ASCII strings without a trailing space, for range keys.
const ASCII_WORDS: [&str; 18] = [
    "abc", "ABC", "Abc", "b", "B", "x", "X", "Zz", "zz", "alpha", "Alpha", "O'Brien", "a b", "a_c",
    "100", "-5", "0", "mid",
];
const DATES: [&str; 12] = [
    "2019-12-31",
    "2020-01-01",
    "2020-01-02",
    "2020-02-29",
    "2020-03-01",
    "2020-06-15",
    "2020-12-31",
    "2021-01-01",
    "1970-01-01",
    "1000-01-01",
    "9999-12-31",
    "2024-07-04",
];
const TIMES: [&str; 5] = ["00:00:00", "12:00:00", "23:59:59", "08:30:15", "00:00:01"];

fn pick<T: Copy>(rng: &mut StdRng, xs: &[T]) -> T {
    *xs.choose(rng).expect("a non-empty pool")
}

fn random_date(rng: &mut StdRng) -> String {
    if rng.gen_bool(0.6) {
        return pick(rng, &DATES).to_string();
    }
    format!(
        "{}-{:02}-{:02}",
        rng.gen_range(2019..=2021),
        rng.gen_range(1..=12),
        rng.gen_range(1..=28)
    )
}

/// A value of `kind`; `ascii` keeps strings to ASCII without trailing spaces.
fn gen_value(rng: &mut StdRng, kind: Kind, ascii: bool) -> Lit {
    let small = |rng: &mut StdRng, lo: i64| rng.gen_range(lo..=30).to_string();
    let num = |s: String| Lit::Num(s);
    let r: f64 = rng.gen();
    match kind {
        Kind::Int if r < 0.7 => num(small(rng, -10)),
        Kind::Int if r < 0.8 => {
            num(pick(rng, &[i32::MIN as i64, i32::MAX as i64, 0, -1, 1_000_000]).to_string())
        }
        Kind::Int => num(rng.gen_range(-100_000..=100_000).to_string()),
        Kind::UInt if r < 0.7 => num(small(rng, 0)),
        Kind::UInt if r < 0.8 => {
            num(pick(rng, &[0u64, 4_294_967_295, 2_147_483_648, 1]).to_string())
        }
        Kind::UInt => num(rng.gen_range(0..=200_000).to_string()),
        Kind::Big if r < 0.7 => num(small(rng, -10)),
        Kind::Big if r < 0.8 => num(pick(
            rng,
            &[
                -1_000_000_000_000_000i64,
                1_000_000_000_000_000,
                4_294_967_296,
                -4_294_967_296,
            ],
        )
        .to_string()),
        Kind::Big => num(rng
            .gen_range(-1_000_000_000_000i64..=1_000_000_000_000)
            .to_string()),
        Kind::UBig if r < 0.7 => num(small(rng, 0)),
        Kind::UBig if r < 0.8 => {
            num(pick(rng, &[0u64, 1_000_000_000_000_000, 4_294_967_296]).to_string())
        }
        Kind::UBig => num(rng.gen_range(0..=1_000_000_000_000u64).to_string()),
        Kind::Dec if r < 0.3 => num(small(rng, -10)),
        Kind::Dec if r < 0.6 => num(pick(
            rng,
            &["0.000", "1.500", "-2.250", "10.125", "-0.001", "99999.999"],
        )
        .to_string()),
        Kind::Dec => {
            let milli: i64 = rng.gen_range(-99_999_999..=99_999_999);
            let sign = if milli < 0 { "-" } else { "" };
            num(format!(
                "{sign}{}.{:03}",
                milli.abs() / 1000,
                milli.abs() % 1000
            ))
        }
        Kind::Dbl if r < 0.3 => num(small(rng, -10)),
        Kind::Dbl if r < 0.6 => {
            num(pick(rng, &["0", "1.5", "-2.25", "0.1", "0.2", "1e10", "3"]).to_string())
        }
        Kind::Dbl => {
            let x: f64 = rng.gen_range(-1000.0..1000.0);
            num(format!("{:?}", (x * 10_000.0).round() / 10_000.0))
        }
        Kind::Ci | Kind::Bin if ascii => Lit::Str(pick(rng, &ASCII_WORDS).to_string()),
        Kind::Ci | Kind::Bin => Lit::Str(pick(rng, &WORDS).to_string()),
        Kind::Date => Lit::Str(random_date(rng)),
        Kind::Dt => Lit::Str(format!("{} {}", random_date(rng), pick(rng, &TIMES))),
    }
}

// ---------------------------------------------------------------------------------------------
// Placement

/// `parts` contiguous slot ranges over 0-1023 on distinct random nodes.
fn gen_slots(rng: &mut StdRng) -> Vec<(u16, u16, usize)> {
    let parts = rng.gen_range(2..=4);
    let mut nodes = [0, 1, 2, 3];
    nodes.shuffle(rng);
    let mut cuts: Vec<u16> = Vec::new();
    while cuts.len() < parts - 1 {
        let c = rng.gen_range(1..1024);
        if !cuts.contains(&c) {
            cuts.push(c);
        }
    }
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut lo = 0;
    for (i, c) in cuts.iter().chain(std::iter::once(&1024)).enumerate() {
        out.push((lo, c - 1, nodes[i]));
        lo = *c;
    }
    out
}

fn gen_rule(rng: &mut StdRng, cols: &mut [Column]) -> Rule {
    let candidates = |cols: &[Column], ok: fn(Kind) -> bool| -> Vec<usize> {
        (0..cols.len()).filter(|&i| ok(cols[i].kind)).collect()
    };
    match rng.gen_range(0..10) {
        0..=3 => {
            let keys = candidates(cols, |k| k.integer() || k.string() || k == Kind::Date);
            let col = pick(rng, &keys);
            cols[col].nullable = false;
            Rule::Hash {
                col,
                slots: gen_slots(rng),
            }
        }
        4 | 5 => {
            let keys = candidates(cols, |k| k.integer() || k.string() || k == Kind::Date);
            let col = pick(rng, &keys);
            cols[col].nullable = false;
            let kind = cols[col].kind;
            let pool: Vec<Lit> = if kind.string() {
                ["0", "5", "B", "M", "T"]
                    .iter()
                    .map(|s| Lit::Str(s.to_string()))
                    .collect()
            } else if kind == Kind::Date {
                ["2019-06-01", "2020-01-01", "2020-06-15", "2021-01-01"]
                    .iter()
                    .map(|s| Lit::Str(s.to_string()))
                    .collect()
            } else {
                let lows: &[i64] = if kind.unsigned() {
                    &[1, 5, 10, 20, 1000]
                } else {
                    &[-5, 0, 5, 10, 20, 1000]
                };
                lows.iter().map(|n| Lit::Num(n.to_string())).collect()
            };
            let n = rng.gen_range(1..=3);
            let mut idx: Vec<usize> = (0..pool.len()).collect();
            idx.shuffle(rng);
            let mut idx: Vec<usize> = idx.into_iter().take(n).collect();
            idx.sort_unstable();
            let mut ranges: Vec<(Option<Lit>, usize)> = idx
                .into_iter()
                .map(|i| (Some(pool[i].clone()), rng.gen_range(0..4)))
                .collect();
            ranges.push((None, rng.gen_range(0..4)));
            Rule::Range { col, ranges }
        }
        6 => Rule::Broadcast,
        7 | 8 => Rule::Single {
            node: rng.gen_range(0..4),
        },
        _ => {
            let keys = candidates(cols, |k| k.integer() || k.string());
            let col = pick(rng, &keys);
            cols[col].nullable = false;
            Rule::Directory {
                col,
                entries: Vec::new(),
                slots: gen_slots(rng),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tables

fn gen_table(rng: &mut StdRng, name: String) -> Table {
    let id_kind = pick(rng, &[Kind::Int, Kind::Big, Kind::UBig]);
    let mut kinds = vec![
        pick(rng, &[Kind::Int, Kind::UInt, Kind::Big, Kind::UBig]),
        pick(rng, &[Kind::Ci, Kind::Bin]),
    ];
    for _ in 0..rng.gen_range(1..=4) {
        kinds.push(pick(rng, &Kind::ALL));
    }
    kinds.shuffle(rng);
    let mut cols = vec![Column {
        name: "id".into(),
        kind: id_kind,
        nullable: false,
    }];
    for (i, k) in kinds.into_iter().enumerate() {
        cols.push(Column {
            name: format!("{}_{}", k.prefix(), i + 1),
            kind: k,
            nullable: rng.gen_bool(0.6),
        });
    }
    let mut rule = gen_rule(rng, &mut cols);
    let ascii_col = match &rule {
        Rule::Range { col, .. } => Some(*col),
        _ => None,
    };

    let n = rng.gen_range(120..=300usize);
    let mut ids: Vec<i64> = if id_kind.unsigned() {
        (0..n as i64).map(|i| i * 5).collect()
    } else {
        (0..n as i64).map(|i| i * 3 - n as i64).collect()
    };
    ids.shuffle(rng);
    let rows: Vec<Vec<Lit>> = ids
        .into_iter()
        .map(|id| {
            let mut row = vec![Lit::Num(id.to_string())];
            for (i, c) in cols.iter().enumerate().skip(1) {
                if c.nullable && rng.gen_bool(0.15) {
                    row.push(Lit::Null);
                } else {
                    row.push(gen_value(rng, c.kind, ascii_col == Some(i)));
                }
            }
            row
        })
        .collect();

    if let Rule::Directory { col, entries, .. } = &mut rule {
        // One or two keys the rows use get a node of their own.
        for _ in 0..rng.gen_range(1..=2) {
            let row = &rows[rng.gen_range(0..rows.len())];
            if let Lit::Num(k) | Lit::Str(k) = &row[*col] {
                let safe = k.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-');
                if safe && !entries.iter().any(|(e, _)| e == k) {
                    entries.push((k.clone(), rng.gen_range(0..4)));
                }
            }
        }
        if entries.is_empty() {
            entries.push(("7".into(), rng.gen_range(0..4)));
        }
    }
    Table {
        name,
        cols,
        rule,
        rows,
    }
}

/// The tables of seed `seed`: 3 or 4, named `rq<seed>_a`, `rq<seed>_b`, ...
pub(crate) fn gen_setup(seed: u64) -> Setup {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = rng.gen_range(3..=4);
    let tables = (0..n)
        .map(|i| gen_table(&mut rng, format!("rq{seed}_{}", (b'a' + i as u8) as char)))
        .collect();
    Setup { seed, tables }
}
