//! What the global index tests share: the check that an index is exact.

use std::collections::BTreeMap;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use super::{rules_toml, Cluster};

/// The rules of a proxy over `cluster` with these `[tables.*]` sections and an admin
/// listener (users `ops` / `ops`), no metadata schema.
pub fn rules_with_admin(cluster: &Cluster, tables_toml: &str) -> String {
    rules_toml(cluster, tables_toml).replacen(
        "\n\n[nodes]\n",
        "\n\n[admin]\nlisten = \"127.0.0.1:0\"\nusers = [{ name = \"ops\", password = \"ops\" }]\n\n[nodes]\n",
        1,
    )
}

/// Every row with an email (on `nodes` nodes, `table`'s `user_id` and `email`) has exactly
/// one entry in `index_table`, on the node `place` names for its hash, pointing at the row's
/// key; no other entry exists; every row is on the node `row_node` names. For a binary
/// collation (`binary`) an entry's hash is its email's text less trailing spaces.
pub async fn exact_with(
    c: &Cluster,
    nodes: usize,
    table: &str,
    index_table: &str,
    binary: bool,
    place: &dyn Fn(&[u8]) -> usize,
    row_node: &dyn Fn(i64) -> usize,
) {
    let mut rows: BTreeMap<i64, String> = BTreeMap::new();
    let mut entries: Vec<(Vec<u8>, String, i64, usize)> = Vec::new();
    for i in 0..nodes {
        let pool = c.direct(i);
        let mut conn = pool.get_conn().await.expect("node");
        let r: Vec<(i64, Option<String>)> = conn
            .query(format!("SELECT user_id, email FROM {table}"))
            .await
            .expect("rows");
        for (k, e) in r {
            assert_eq!(row_node(k), i, "row {k} on the wrong node");
            if let Some(e) = e {
                rows.insert(k, e);
            }
        }
        let e: Vec<(Vec<u8>, String, i64)> = conn
            .query(format!("SELECT v_hash, email, user_id FROM {index_table}"))
            .await
            .expect("entries");
        entries.extend(e.into_iter().map(|(h, e, k)| (h, e, k, i)));
        drop(conn);
        pool.disconnect().await.ok();
    }
    for (hash, email, key, node) in &entries {
        if binary {
            assert_eq!(
                hash,
                email.trim_end_matches(' ').as_bytes(),
                "{email}'s hash"
            );
        }
        assert_eq!(place(hash), *node, "entry {email} on the wrong node");
        assert_eq!(
            rows.get(key),
            Some(email),
            "entry {email} -> {key} (on ds{node}): no such row with that email (the row holds {:?})",
            rows.get(key)
        );
    }
    let mut keys: Vec<i64> = entries.iter().map(|(_, _, k, _)| *k).collect();
    keys.sort_unstable();
    let before = keys.len();
    keys.dedup();
    assert_eq!(before, keys.len(), "a row with two entries");
    let missing: Vec<(&i64, &String)> = rows
        .iter()
        .filter(|(k, _)| keys.binary_search(k).is_err())
        .collect();
    assert!(missing.is_empty(), "rows without an entry: {missing:?}");
}

/// A connection to the reference: one MariaDB (node 0) holding every row in `database`.
pub async fn reference(c: &Cluster, database: &str) -> Conn {
    let pool = c.direct(0);
    let mut conn = pool.get_conn().await.expect("node 0");
    conn.query_drop(format!("CREATE DATABASE IF NOT EXISTS {database}"))
        .await
        .expect("reference database");
    conn.query_drop(format!("USE {database}"))
        .await
        .expect("use");
    conn
}

/// Runs `sql` through the proxy and on the reference: both succeed alike (the same affected
/// rows, warnings and info: `Rows matched: 1  Changed: 1  Warnings: 0`) or fail alike.
pub async fn both(p: &mut Conn, r: &mut Conn, sql: &str) -> Result<(), (u16, String)> {
    let a = p.query_drop(sql).await;
    let b = r.query_drop(sql).await;
    match (a, b) {
        (Ok(()), Ok(())) => {
            assert_eq!(
                (p.affected_rows(), p.get_warnings(), p.info()),
                (r.affected_rows(), r.get_warnings(), r.info()),
                "{sql}: the proxy's affected rows, warnings and info differ from one MariaDB's"
            );
            Ok(())
        }
        (Err(mysql_async::Error::Server(x)), Err(mysql_async::Error::Server(y))) => {
            assert_eq!(
                (x.code, &x.message, &x.state),
                (y.code, &y.message, &y.state),
                "{sql}: the proxy's error differs from one MariaDB's"
            );
            Err((x.code, x.message))
        }
        (a, b) => panic!("{sql}: the proxy answered {a:?}, one MariaDB {b:?}"),
    }
}

/// [`both`] for a statement both must refuse with 1062 (`what` it is).
pub async fn duplicate(p: &mut Conn, r: &mut Conn, sql: &str, what: &str) {
    let e = both(p, r, sql).await.expect_err(what);
    assert_eq!(e.0, 1062, "{what}: {e:?}");
}

/// The rows of `sql`, as text, through the proxy and on the reference: equal.
pub async fn same_rows(p: &mut Conn, r: &mut Conn, sql: &str) -> Vec<Vec<Option<String>>> {
    let text = |rows: Vec<Row>| -> Vec<Vec<Option<String>>> {
        rows.into_iter()
            .map(|row| {
                (0..row.len())
                    .map(|i| row.as_ref(i).and_then(text_of))
                    .collect()
            })
            .collect()
    };
    let a = text(
        p.query(sql)
            .await
            .unwrap_or_else(|e| panic!("proxy: {sql}: {e}")),
    );
    let b = text(
        r.query(sql)
            .await
            .unwrap_or_else(|e| panic!("reference: {sql}: {e}")),
    );
    assert_eq!(a, b, "{sql}");
    a
}

pub fn text_of(v: &mysql_async::Value) -> Option<String> {
    match v {
        mysql_async::Value::NULL => None,
        mysql_async::Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        other => Some(format!("{other:?}")),
    }
}

/// [`exact_with`] on 3 nodes, with the table and its index table placed as `topo` says
/// (their slots moved), for a binary collation.
pub async fn exact_placed(
    c: &Cluster,
    table: &str,
    index_table: &str,
    topo: &shardproxy::config::Topology,
) {
    let Some(shardproxy::config::TableRule::HashSlot { map, .. }) = topo.table(index_table) else {
        panic!("`{index_table}` is not a hash_slot table");
    };
    let place = |h: &[u8]| {
        map.place(&mysql_async::Value::Bytes(h.to_vec()))
            .and_then(|p| p.row_node(None))
            .expect("a node for the hash")
    };
    let Some(shardproxy::config::TableRule::HashSlot { map: rows, .. }) = topo.table(table) else {
        panic!("`{table}` is not a hash_slot table");
    };
    let row = |k: i64| {
        rows.place(&mysql_async::Value::Int(k))
            .and_then(|p| p.row_node(None))
            .expect("a node for the key")
    };
    exact_with(c, 3, table, index_table, true, &place, &row).await
}

/// One writer's load on its own keys: inserts, email changes, shard-key changes, deletes,
/// REPLACE, ON DUPLICATE KEY UPDATE and INSERT IGNORE, in autocommit and in two-statement
/// transactions, until `stop`; the errors it met.
pub async fn writer(
    p: mysql_async::Pool,
    table: String,
    id: i64,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<String> {
    use std::sync::atomic::Ordering;
    let mut conn = p.get_conn().await.expect("writer connection");
    let mut live: Vec<i64> = Vec::new();
    let mut errors = Vec::new();
    let base = 100_000 * id;
    let mut n = 0i64;
    while !stop.load(Ordering::SeqCst) && errors.is_empty() {
        n += 1;
        let r = match n % 9 {
            0 | 1 => {
                let k = base + n;
                live.push(k);
                conn.query_drop(format!("INSERT INTO {table} VALUES ({k}, 'w{k}@x', 'w')"))
                    .await
            }
            2 if !live.is_empty() => {
                let k = live[(n as usize * 7) % live.len()];
                conn.query_drop(format!(
                    "UPDATE {table} SET email = 'w{k}-{n}@x' WHERE user_id = {k}"
                ))
                .await
            }
            3 if live.len() > 2 => {
                let k = live.remove((n as usize * 3) % live.len());
                conn.query_drop(format!("DELETE FROM {table} WHERE user_id = {k}"))
                    .await
            }
            4 if live.len() > 2 => {
                let (a, b) = (live[0], live[live.len() - 1]);
                let tx = async {
                    conn.query_drop("START TRANSACTION").await?;
                    conn.query_drop(format!(
                        "UPDATE {table} SET email = 'x{a}-{n}@x' WHERE user_id = {a}"
                    ))
                    .await?;
                    conn.query_drop(format!(
                        "UPDATE {table} SET email = NULL WHERE user_id = {b}"
                    ))
                    .await?;
                    conn.query_drop("COMMIT").await
                };
                tx.await
            }
            // The shard key changed: the row (and its entry's key) moves.
            5 if !live.is_empty() => {
                let at = (n as usize * 5) % live.len();
                let (k, to) = (live[at], base + 50_000 + n);
                let r = conn
                    .query_drop(format!(
                        "UPDATE {table} SET user_id = {to} WHERE user_id = {k}"
                    ))
                    .await;
                match r {
                    Ok(()) => live[at] = to,
                    // Not while the table's own slots move (a shard key UPDATE's limit).
                    Err(mysql_async::Error::Server(ref e))
                        if e.code == 1235 && e.message.contains("slots of the table move") =>
                    {
                        continue
                    }
                    Err(_) => {}
                }
                r
            }
            // Upserts: of a row there, and of one new.
            6 if !live.is_empty() => {
                let k = live[(n as usize * 11) % live.len()];
                conn.query_drop(format!(
                    "REPLACE INTO {table} VALUES ({k}, 'r{k}-{n}@x', 'r')"
                ))
                .await
            }
            7 if !live.is_empty() => {
                let k = live[(n as usize * 13) % live.len()];
                conn.query_drop(format!(
                    "INSERT INTO {table} VALUES ({k}, 'd{k}@x', 'd') ON DUPLICATE KEY UPDATE email = 'd{k}-{n}@x'"
                ))
                .await
            }
            // (One row each: a write over moving and staying rows waits for the move's end.)
            8 if n % 2 == 0 => {
                let k = base + n;
                live.push(k);
                conn.query_drop(format!(
                    "INSERT IGNORE INTO {table} VALUES ({k}, 'i{k}@x', 'i')"
                ))
                .await
            }
            8 => {
                conn.query_drop(format!(
                    "INSERT IGNORE INTO {table} VALUES ({}, 'ignored{n}@x', 'i')",
                    live[0]
                ))
                .await
            }
            _ => {
                conn.query_drop(format!(
                    "SELECT * FROM {table} WHERE email = 'w{}@x'",
                    base + 1
                ))
                .await
            }
        };
        if let Err(e) = r {
            errors.push(format!("writer {id}, op {n}: {e}"));
        }
    }
    errors
}
