//! The literal writer against a real MariaDB: random values (bytes with quotes,
//! backslashes, NUL, `%`, `_`, multibyte and invalid UTF-8; integers at their ends;
//! doubles; dates and times) written by every function of `shardproxy::sql::write` are read
//! back by a node under the default `sql_mode`, `NO_BACKSLASH_ESCAPES` and `ANSI_QUOTES`
//! (and both): each must stay one literal (a marker after it comes back as the next
//! column) and hold the value the client bound (equal, by `<=>` and by its bytes, to the
//! same value bound as a parameter of a prepared statement). The seed is printed; set
//! `LITERALS_SEED` to replay one, `LITERALS_CASES` for more cases.

mod common;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::Value;
use mysql_common::constants::ColumnType;
use mysql_common::packets::Column;
use rand::{Rng, SeedableRng};
use shardproxy::sql::write;

const MODES: [&str; 4] = [
    "",
    "NO_BACKSLASH_ESCAPES",
    "ANSI_QUOTES",
    "NO_BACKSLASH_ESCAPES,ANSI_QUOTES",
];

/// Bytes built to break naive quoting, mixed with random ones.
fn nasty_bytes(rng: &mut impl Rng) -> Vec<u8> {
    const PIECES: [&[u8]; 14] = [
        b"'",
        b"\\",
        b"\\'",
        b"''",
        b"\"",
        b"\0",
        b"%",
        b"_",
        b"--",
        b"/*",
        b";",
        "é".as_bytes(),
        "𝄞".as_bytes(),
        b"\xff\xfe",
    ];
    let n = rng.gen_range(0..12);
    let mut out = Vec::new();
    for _ in 0..n {
        if rng.gen_bool(0.6) {
            out.extend_from_slice(PIECES[rng.gen_range(0..PIECES.len())]);
        } else {
            out.push(rng.gen());
        }
    }
    out
}

/// A random value of every kind a client can bind.
fn value(rng: &mut impl Rng) -> Value {
    match rng.gen_range(0..7) {
        0 => Value::NULL,
        1 => Value::Int(match rng.gen_range(0..3) {
            0 => i64::MIN,
            1 => i64::MAX,
            _ => rng.gen(),
        }),
        2 => Value::UInt(if rng.gen_bool(0.3) {
            u64::MAX
        } else {
            rng.gen()
        }),
        3 => {
            let sign = if rng.gen_bool(0.5) { 1.0 } else { -1.0 };
            Value::Double(sign * rng.gen::<f64>() * 10f64.powi(rng.gen_range(-30..30)))
        }
        4 => Value::Date(
            rng.gen_range(1000..9999),
            rng.gen_range(1..13),
            rng.gen_range(1..29),
            rng.gen_range(0..24),
            rng.gen_range(0..60),
            rng.gen_range(0..60),
            rng.gen_range(0..1_000_000),
        ),
        5 => Value::Time(
            rng.gen(),
            rng.gen_range(0..30),
            rng.gen_range(0..24),
            rng.gen_range(0..60),
            rng.gen_range(0..60),
            rng.gen_range(0..1_000_000),
        ),
        _ => Value::Bytes(nasty_bytes(rng)),
    }
}

/// `SELECT lit, 'end'` reads two columns, the second the marker: `lit` ended where the
/// writer meant. Returns the first column (text protocol).
async fn read_back(conn: &mut mysql_async::Conn, lit: &str, what: &str) -> Value {
    let sql = format!("SELECT {lit}, 'end'");
    let row: Option<mysql_async::Row> = conn
        .query_first(&sql)
        .await
        .unwrap_or_else(|e| panic!("{what}: {sql}: {e}"));
    let row = row.unwrap_or_else(|| panic!("{what}: {sql}: no row"));
    assert_eq!(row.len(), 2, "{what}: {sql}: the literal did not stay one");
    assert_eq!(
        row.as_ref(1),
        Some(&Value::Bytes(b"end".to_vec())),
        "{what}: {sql}: the marker moved"
    );
    row.as_ref(0).cloned().unwrap_or(Value::NULL)
}

/// Does `lit` equal the bound `v` on the node, by `<=>` and by the bytes of its text?
async fn same_as_bound(conn: &mut mysql_async::Conn, lit: &str, v: &Value, what: &str) {
    let sql = format!("SELECT {lit} <=> ?, HEX({lit}), HEX(?)");
    let row: Option<(i64, Option<String>, Option<String>)> = conn
        .exec_first(&sql, (v.clone(), v.clone()))
        .await
        .unwrap_or_else(|e| panic!("{what}: {sql} with {v:?}: {e}"));
    let (eq, lit_hex, bound_hex) = row.unwrap_or_else(|| panic!("{what}: no row"));
    assert_eq!(eq, 1, "{what}: {lit} <=> {v:?} is not 1");
    if !matches!(v, Value::Double(_) | Value::Float(_)) {
        assert_eq!(
            lit_hex, bound_hex,
            "{what}: {lit} holds other bytes than {v:?}"
        );
    }
}

#[test]
fn every_literal_reads_back_as_its_value_in_every_mode() {
    let seed: u64 = std::env::var("LITERALS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    let cases: usize = std::env::var("LITERALS_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    eprintln!("literals: seed {seed} (LITERALS_SEED), {cases} cases per mode");
    let c = Cluster::shared(1);
    let pool = c.direct(0);
    block_on(async move {
        let mut conn = pool.get_conn().await.expect("a node");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut checked = 0usize;
        for mode in MODES {
            conn.exec_drop("SET SESSION sql_mode = ?", (mode,))
                .await
                .expect("sql_mode");
            for case in 0..cases {
                let what = format!("seed {seed}, mode '{mode}', case {case}");
                // Bound values, as the proxy inlines them (the session's charset).
                let v = value(&mut rng);
                let lit = write::literal(&v, "utf8mb4");
                read_back(&mut conn, &lit, &what).await;
                same_as_bound(&mut conn, &lit, &v, &what).await;
                // Bytes in each character set: binary ones come back as they are.
                let bytes = nasty_bytes(&mut rng);
                let mut lit = String::new();
                write::string(&mut lit, &bytes, "binary");
                assert_eq!(
                    read_back(&mut conn, &lit, &what).await,
                    Value::Bytes(bytes.clone()),
                    "{what}: {lit}"
                );
                let mut lit = String::new();
                write::string(&mut lit, &bytes, "latin1");
                let hex: Option<String> = conn
                    .query_first(format!("SELECT HEX({lit})"))
                    .await
                    .expect("latin1");
                let want: String = bytes.iter().map(|b| format!("{b:02X}")).collect();
                assert_eq!(hex.as_deref(), Some(want.as_str()), "{what}: {lit}");
                // Text the proxy holds (range bounds, keys of moves) and its own names.
                let text = String::from_utf8_lossy(&nasty_bytes(&mut rng)).replace('\0', "");
                for lit in [write::text_literal(&text), write::token_literal(&text)] {
                    let back = read_back(&mut conn, &lit, &what).await;
                    if !text.is_empty() || lit != "X''" {
                        assert_eq!(
                            back,
                            Value::Bytes(text.clone().into_bytes()),
                            "{what}: {lit}"
                        );
                    }
                }
                // Values a node sent, as copies write them back, by column type.
                let typed = [
                    (ColumnType::MYSQL_TYPE_VAR_STRING, 45u16, bytes.clone()),
                    (ColumnType::MYSQL_TYPE_BLOB, 63, bytes.clone()),
                    (
                        ColumnType::MYSQL_TYPE_NEWDECIMAL,
                        63,
                        format!("{}.{}", rng.gen::<i32>(), rng.gen::<u16>()).into_bytes(),
                    ),
                    (
                        ColumnType::MYSQL_TYPE_DATETIME,
                        63,
                        b"2024-02-29 23:59:59.123456".to_vec(),
                    ),
                ];
                for (ty, cs, b) in typed {
                    let col = Column::new(ty).with_character_set(cs);
                    let mut lit = String::new();
                    write::typed(&mut lit, Some(&Value::Bytes(b.clone())), &col);
                    let hex: Option<String> = conn
                        .query_first(format!("SELECT HEX(CAST({lit} AS BINARY))"))
                        .await
                        .unwrap_or_else(|e| panic!("{what}: {lit}: {e}"));
                    let want: String = b.iter().map(|x| format!("{x:02X}")).collect();
                    if ty == ColumnType::MYSQL_TYPE_BLOB || ty == ColumnType::MYSQL_TYPE_DATETIME {
                        assert_eq!(hex.as_deref(), Some(want.as_str()), "{what}: {lit}");
                    }
                }
                // What the writer makes, the validator of stored cursors takes.
                let tuple = format!(
                    "({}, {})",
                    write::literal(&value(&mut rng), "utf8mb4"),
                    write::literal(&Value::Bytes(bytes), "binary")
                );
                assert!(write::is_literal_tuple(&tuple), "{what}: {tuple}");
                checked += 1;
            }
        }
        eprintln!("literals: {checked} cases, 0 failures");
        conn.disconnect().await.ok();
    });
}
