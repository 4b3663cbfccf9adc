//! Planning random text never panics: statements of SQL pieces in random order, random
//! bytes and cut-off statements. The generators serve the splitter's same test
//! (`crate::frontend::split`).

use mysql_common::value::Value;

use super::tests::{plan_in, topo};

/// A small deterministic generator (xorshift64*), so a failing input can be replayed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// `n` statements of SQL pieces in random order (most of them nonsense, some valid, many
/// half valid), each with up to three parameter values, from `seed`.
pub fn piece_statements(seed: u64, n: usize) -> Vec<(String, Vec<Value>)> {
    const PIECES: &[&str] = &[
        "SELECT",
        "*",
        "FROM",
        "t_order",
        "t_item",
        "t_country",
        "t_merchant",
        "t_seq",
        "WHERE",
        "user_id",
        "order_id",
        "=",
        "?",
        "1",
        "-7",
        "1e400",
        "'a'",
        "'",
        "\"",
        "`",
        "(",
        ")",
        ",",
        "AND",
        "OR",
        "NOT",
        "IN",
        "ORDER BY",
        "DESC",
        "LIMIT",
        "OFFSET",
        "INSERT INTO",
        "VALUES",
        "UPDATE",
        "SET",
        "DELETE",
        "JOIN",
        "ON",
        "GROUP BY",
        "HAVING",
        "COUNT(*)",
        "COUNT(DISTINCT",
        "SUM(",
        "AVG(",
        "MAX(",
        "/*!40101",
        "*/",
        "/*",
        "-- x\n",
        "#",
        "\n",
        "NULL",
        "BETWEEN",
        "UNION",
        "SAVEPOINT",
        "KILL",
        "XA",
        "BEGIN",
        "COMMIT",
        "ROLLBACK",
        "TO",
        "LOCK TABLES",
        "READ",
        "UNLOCK",
        "autocommit",
        "0",
        "é",
        "\\",
        ";",
        "RETURNING",
        "ON DUPLICATE KEY UPDATE",
        "REPLACE",
        "IGNORE",
        "CREATE TABLE",
        "ALTER TABLE",
        "DISABLE KEYS",
        "USE",
        "shop.",
        "@x",
        ":=",
        "@@x",
        "LAST_INSERT_ID(",
        "FOR UPDATE",
        "CAST(",
        "AS",
        "SIGNED",
        "DATE '2024-01-01'",
    ];
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let k = 1 + rng.below(24);
            let sql: Vec<&str> = (0..k).map(|_| PIECES[rng.below(PIECES.len())]).collect();
            let params: Vec<Value> = (0..rng.below(4)).map(|i| Value::Int(i as i64)).collect();
            (sql.join(" "), params)
        })
        .collect()
}

/// `n` texts from `seed`: random bytes (read as UTF-8 lossily) and a statement cut off
/// anywhere, in turn.
pub fn noise(seed: u64, n: usize) -> Vec<String> {
    let mut rng = Rng(seed);
    let base = "SELECT * FROM t_order WHERE user_id IN (1, 2) AND order_id = 'x' /*!40101 */";
    (0..n)
        .map(|i| {
            if i % 2 == 0 {
                let bytes: Vec<u8> = (0..rng.below(80)).map(|_| rng.next() as u8).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            } else {
                let cut = rng.below(base.len() + 1);
                base.get(..cut).unwrap_or(base).to_string()
            }
        })
        .collect()
}

/// Statements made of SQL pieces in random order: planning any of them answers a plan or a
/// refusal, never a panic.
#[test]
fn planning_random_statements_never_panics() {
    let t = topo();
    for (sql, params) in piece_statements(0x5eed_1234_abcd_0001, 20_000) {
        let _ = plan_in(&t, &sql, &params);
        let _ = crate::sql::digest::digest(&sql);
        let _ = crate::sql::executable_comment(&sql);
    }
}

/// Random bytes and cut-off text in place of SQL: no panic either.
#[test]
fn planning_random_bytes_never_panics() {
    let t = topo();
    for sql in noise(0xdead_beef_0bad_f00d, 5_000) {
        let _ = plan_in(&t, &sql, &[]);
        let _ = crate::sql::digest::digest(&sql);
        let _ = crate::sql::leading_words(&sql, 8);
    }
}
