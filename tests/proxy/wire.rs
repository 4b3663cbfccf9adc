//! What goes over the wire: values in the binary protocol, column definitions as the node sends them, the mariadb CLI.

use super::*;

/// Differences between the column definitions the proxy sent and the node's own.
fn column_diffs(proxy: &Row, direct: &Row) -> Vec<String> {
    let p = proxy.columns_ref();
    let d = direct.columns_ref();
    if p.len() != d.len() {
        return vec![format!("{} columns, the node sends {}", p.len(), d.len())];
    }
    let mut diffs = Vec::new();
    for (a, b) in p.iter().zip(d) {
        let name = b.name_str();
        let facets = [
            ("name", a.name_str().into_owned(), name.clone().into_owned()),
            (
                "type",
                format!("{:?}", a.column_type()),
                format!("{:?}", b.column_type()),
            ),
            (
                "flags",
                format!("{:?}", a.flags()),
                format!("{:?}", b.flags()),
            ),
            (
                "charset",
                a.character_set().to_string(),
                b.character_set().to_string(),
            ),
            (
                "length",
                a.column_length().to_string(),
                b.column_length().to_string(),
            ),
            (
                "decimals",
                a.decimals().to_string(),
                b.decimals().to_string(),
            ),
            (
                "table",
                a.table_str().into_owned(),
                b.table_str().into_owned(),
            ),
            (
                "org_name",
                a.org_name_str().into_owned(),
                b.org_name_str().into_owned(),
            ),
        ];
        for (facet, via, direct) in facets {
            if via != direct {
                diffs.push(format!("`{name}` {facet}: proxy {via}, node {direct}"));
            }
        }
    }
    diffs
}

/// Differences between the values the proxy sent and the node's own.
fn value_diffs(proxy: Row, direct: Row) -> Vec<String> {
    let names: Vec<String> = direct
        .columns_ref()
        .iter()
        .map(|c| c.name_str().into_owned())
        .collect();
    let (p, d) = (proxy.unwrap(), direct.unwrap());
    if p.len() != d.len() {
        return vec![format!("{} values, the node sends {}", p.len(), d.len())];
    }
    names
        .iter()
        .zip(p.iter().zip(&d))
        .filter(|(_, (a, b))| a != b)
        .map(|(n, (a, b))| format!("`{n}`: proxy {a:?}, node {b:?}"))
        .collect()
}

/// Creates TABLE (sharded) through the proxy with one column of each type and two rows, on ds1
/// and ds3; returns their keys.
async fn types_table(conn: &mut Conn, table: &str) -> [(i64, usize); 2] {
    conn.query_drop(format!(
        "CREATE TABLE {table} (
            user_id BIGINT NOT NULL PRIMARY KEY,
            d DECIMAL(20,6),
            dt DATETIME(6),
            da DATE,
            tm TIME(6),
            b BLOB,
            n INT NULL,
            u BIGINT UNSIGNED,
            ti TINYINT,
            dbl DOUBLE,
            s VARCHAR(64) CHARACTER SET utf8mb4,
            f FLOAT,
            bin VARBINARY(16),
            e ENUM('red', 'green')
        )"
    ))
    .await
    .expect("CREATE TABLE");
    let blob_hex: String = (0u8..=255).map(|b| format!("{b:02X}")).collect();
    let k1 = key_on_node(&L, 1);
    let k3 = key_on_node(&L, 3);
    conn.query_drop(format!(
        "INSERT INTO {table} (user_id, d, dt, da, tm, b, n, u, ti, dbl, s, f, bin, e) VALUES
         ({k1}, 12345678901234.123456, '2024-02-29 23:59:59.123456', '2024-02-29',
          '-25:03:04.500000', UNHEX('{blob_hex}'), NULL, 18446744073709551615, -128,
          3.141592653589793, 'héllo wörld 日本 😀', 1.5, UNHEX('00FF00'), 'green'),
         ({k3}, -0.000001, '1970-01-01 00:00:00.000001', '1000-01-01',
          '12:34:56.000001', '', 7, 0, 127,
          -1.5e300, '', -0.25, '', 'red')"
    ))
    .await
    .expect("INSERT");
    assert_eq!(conn.affected_rows(), 2);
    [(k1, 1), (k3, 3)]
}

#[tokio::test]
async fn binary_protocol_values_round_trip() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_types_v"));
    let mut conn = proxy.conn().await;
    let rows = types_table(&mut conn, "t_types_v").await;
    let mut problems = Vec::new();
    for (k, node) in rows {
        let (_pool, mut d) = direct_conn(c, node).await;
        let sql = "SELECT * FROM t_types_v WHERE user_id = ?";
        let via: Vec<Row> = conn
            .exec(sql, (k,))
            .await
            .expect("prepared SELECT via proxy");
        let direct: Vec<Row> = d.exec(sql, (k,)).await.expect("prepared SELECT direct");
        assert_eq!(via.len(), 1, "prepared SELECT key {k}");
        assert_eq!(direct.len(), 1);
        for (p, d) in via.into_iter().zip(direct) {
            problems.extend(
                value_diffs(p, d)
                    .into_iter()
                    .map(|e| format!("prepared SELECT key {k}: {e}")),
            );
        }
        let sql = format!("SELECT * FROM t_types_v WHERE user_id = {k}");
        let via: Vec<Row> = conn.query(&sql).await.expect("text SELECT via proxy");
        let direct: Vec<Row> = d.query(&sql).await.expect("text SELECT direct");
        assert_eq!(via.len(), 1, "text SELECT key {k}");
        for (p, d) in via.into_iter().zip(direct) {
            problems.extend(
                value_diffs(p, d)
                    .into_iter()
                    .map(|e| format!("text SELECT key {k}: {e}")),
            );
        }
    }

    // Spot checks against known values (not only "same as the node").
    let row: Row = conn
        .exec_first(
            "SELECT d, dt, da, tm, b, n, u, ti, dbl, s FROM t_types_v WHERE user_id = ?",
            (rows[0].0,),
        )
        .await
        .expect("SELECT")
        .expect("a row");
    let expected = [
        Value::Bytes(b"12345678901234.123456".to_vec()),
        Value::Date(2024, 2, 29, 23, 59, 59, 123_456),
        Value::Date(2024, 2, 29, 0, 0, 0, 0),
        Value::Time(true, 1, 1, 3, 4, 500_000),
        Value::Bytes((0u8..=255).collect()),
        Value::NULL,
        Value::UInt(u64::MAX),
        Value::Int(-128),
        Value::Double(std::f64::consts::PI),
        Value::Bytes("héllo wörld 日本 😀".as_bytes().to_vec()),
    ];
    for (i, (got, want)) in row.unwrap().iter().zip(&expected).enumerate() {
        if got != want {
            problems.push(format!("spot check #{i}: got {got:?}, expected {want:?}"));
        }
    }

    // Rows from several nodes in the binary protocol.
    let via: Vec<Row> = conn
        .exec("SELECT * FROM t_types_v WHERE ti <> ?", (0,))
        .await
        .expect("prepared fan-out SELECT");
    let mut via: Vec<Vec<Value>> = via.into_iter().map(Row::unwrap).collect();
    via.sort_by_key(|r| r[0].as_sql(false));
    let mut direct = Vec::new();
    for (_, node) in rows {
        let (_pool, mut d) = direct_conn(c, node).await;
        let rows: Vec<Row> = d
            .exec("SELECT * FROM t_types_v WHERE ti <> ?", (0,))
            .await
            .expect("direct");
        direct.extend(rows.into_iter().map(Row::unwrap));
    }
    direct.sort_by_key(|r| r[0].as_sql(false));
    if via != direct {
        problems.push(format!(
            "prepared fan-out SELECT: proxy {via:?}, nodes {direct:?}"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    conn.disconnect().await.ok();
}

/// Drivers decode values by the column definitions (charset 63 = binary, length, flags): the
/// proxy must hand over the node's own, in both protocols.
#[tokio::test]
async fn column_definitions_match_the_node() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_types_m"));
    let mut conn = proxy.conn().await;
    let rows = types_table(&mut conn, "t_types_m").await;
    let mut problems = Vec::new();
    for (k, node) in rows {
        let (_pool, mut d) = direct_conn(c, node).await;
        let sql = "SELECT * FROM t_types_m WHERE user_id = ?";
        let via: Vec<Row> = conn
            .exec(sql, (k,))
            .await
            .expect("prepared SELECT via proxy");
        let direct: Vec<Row> = d.exec(sql, (k,)).await.expect("prepared SELECT direct");
        assert_eq!(via.len(), 1, "prepared SELECT key {k}");
        problems.extend(
            column_diffs(&via[0], &direct[0])
                .into_iter()
                .map(|e| format!("prepared SELECT key {k}: {e}")),
        );
        let sql = format!("SELECT * FROM t_types_m WHERE user_id = {k}");
        let via: Vec<Row> = conn.query(&sql).await.expect("text SELECT via proxy");
        let direct: Vec<Row> = d.query(&sql).await.expect("text SELECT direct");
        assert_eq!(via.len(), 1, "text SELECT key {k}");
        problems.extend(
            column_diffs(&via[0], &direct[0])
                .into_iter()
                .map(|e| format!("text SELECT key {k}: {e}")),
        );
    }
    assert!(
        problems.is_empty(),
        "{} column definition facets differ from the node's:\n{}",
        problems.len(),
        problems.join("\n")
    );
    conn.disconnect().await.ok();
}

// ---------------------------------------------------------------------------------------------

async fn cli(port: u16, args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new("mariadb")
        .arg("-h127.0.0.1")
        .arg(format!("-P{port}"))
        .arg("-uapp")
        .arg("-papp")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("run the mariadb client");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn mariadb_cli_through_the_proxy() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_cli"));
    let port = proxy.port;
    let k1 = key_on_node(&L, 1);
    let k2 = key_on_node(&L, 2);

    let (ok, out, err) = cli(port, &["shop", "-e", "SELECT 1 + 1 AS two, 'x' AS s"]).await;
    assert!(ok, "mariadb -e failed: {err}");
    assert_eq!(out, "two\ts\n2\tx\n", "stderr: {err}");

    let (ok, _, err) = cli(
        port,
        &[
            "shop",
            "-e",
            "CREATE TABLE t_cli (user_id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(16) NOT NULL)",
        ],
    )
    .await;
    assert!(ok, "CREATE TABLE with the CLI failed: {err}");
    let insert = format!("INSERT INTO t_cli (user_id, v) VALUES ({k1}, 'one'), ({k2}, 'two')");
    let (ok, _, err) = cli(port, &["shop", "-e", &insert]).await;
    assert!(ok, "INSERT with the CLI failed: {err}");

    let select = format!("SELECT user_id, v FROM t_cli WHERE user_id = {k2}");
    let (ok, out, err) = cli(
        port,
        &["--batch", "--skip-column-names", "shop", "-e", &select],
    )
    .await;
    assert!(ok, "SELECT with the CLI failed: {err}");
    assert_eq!(out, format!("{k2}\ttwo\n"));

    let (ok, out, err) = cli(
        port,
        &[
            "--batch",
            "--skip-column-names",
            "shop",
            "-e",
            "SELECT v FROM t_cli WHERE v <> ''; SELECT DATABASE()",
        ],
    )
    .await;
    assert!(ok, "fan-out SELECT with the CLI failed: {err}");
    let mut lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.pop(), Some("shop"), "output: {out}");
    lines.sort_unstable();
    assert_eq!(lines, vec!["one", "two"], "output: {out}");

    let (ok, _, err) = cli(port, &["shop", "-e", "SELEC 1"]).await;
    assert!(!ok, "a syntax error exited 0");
    assert!(err.contains("ERROR 1064"), "stderr: {err}");

    let (ok, _, err) = cli(port, &["-papp-wrong", "shop", "-e", "SELECT 1"]).await;
    assert!(!ok, "a wrong password exited 0");
    assert!(err.contains("ERROR 1045"), "stderr: {err}");
}
