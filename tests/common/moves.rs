//! What the migration tests share: a proxy over ds0-ds2 with an admin listener and a
//! metadata schema on node 3, the operator's connection, a migration's row and its steps, a
//! loaded table, and a node's status counters (its deadlocks).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Pool};

use super::*;

/// The rules of a proxy over ds0-ds2 with `tables`, an admin listener and the metadata
/// schema `meta` on node 3.
pub fn rules(c: &Cluster, meta: &str, tables: &str) -> String {
    rules_on(c, 3, meta, &[("ds0", 0), ("ds1", 1), ("ds2", 2)], tables)
}

/// The rules of a proxy over `nodes` (names and cluster nodes) with `tables`, an admin
/// listener and the metadata schema `meta` on cluster node `meta_node`.
pub fn rules_on(
    c: &Cluster,
    meta_node: usize,
    meta: &str,
    nodes: &[(&str, usize)],
    tables: &str,
) -> String {
    let mut s = String::from(
        "version = 1\ndefault_node = \"ds0\"\n\n[server]\nlisten = \"127.0.0.1:0\"\n\
         users = [{ name = \"app\", password = \"app\" }]\n\n\
         [admin]\nlisten = \"127.0.0.1:0\"\nusers = [{ name = \"ops\", password = \"ops\" }]\n\n",
    );
    s.push_str(&format!(
        "[metadata]\nurl = \"{}\"\npoll_ms = 100\nlease_ms = 3000\n\n[nodes]\n",
        c.root_url(meta_node, meta)
    ));
    for (name, i) in nodes {
        s.push_str(&format!("{name} = \"{}\"\n", c.url(*i)));
    }
    s.push('\n');
    s.push_str(tables);
    s
}

/// A proxy serving `rules` from a file of its own (the metadata is merged over it).
pub fn watching(dir: &tempfile::TempDir, name: &str, rules: String) -> Proxy {
    let path = dir.path().join(format!("rules-{name}.toml"));
    std::fs::write(&path, rules).expect("write the rules");
    start_proxy_watching(&path)
}

pub async fn fresh_schema(c: &Cluster, meta: &str) {
    fresh_schema_on(c, 3, meta).await
}

/// The metadata schema `meta` on cluster node `node`, empty.
pub async fn fresh_schema_on(c: &Cluster, node: usize, meta: &str) {
    let pool = c.direct(node);
    let mut conn = pool.get_conn().await.expect("metadata node");
    conn.query_drop(format!("DROP DATABASE IF EXISTS {meta}"))
        .await
        .expect("drop");
    conn.query_drop(format!("CREATE DATABASE {meta}"))
        .await
        .expect("create");
    drop(conn);
    pool.disconnect().await.ok();
}

pub async fn ops(admin_port: u16) -> Conn {
    Conn::new(Opts::from_url(&format!("mysql://ops:ops@127.0.0.1:{admin_port}")).expect("url"))
        .await
        .expect("operator login")
}

/// The rows an admin statement answers, each by column name.
pub async fn named_rows(ops: &mut Conn, sql: &str) -> Vec<HashMap<String, String>> {
    let rows: Vec<mysql_async::Row> = ops.query(sql).await.expect(sql);
    rows.into_iter()
        .map(|r| {
            let cols: Vec<String> = r
                .columns_ref()
                .iter()
                .map(|c| c.name_str().to_string())
                .collect();
            let vals: Vec<String> = (0..cols.len())
                .map(|i| r.get::<Option<String>, _>(i).flatten().unwrap_or_default())
                .collect();
            cols.into_iter().zip(vals).collect()
        })
        .collect()
}

/// The migration's row in SHOW MIGRATIONS, by column name.
pub async fn migration(ops: &mut Conn, id: &str) -> HashMap<String, String> {
    named_rows(ops, "SHOW MIGRATIONS")
        .await
        .into_iter()
        .find(|m| m.get("id").map(String::as_str) == Some(id))
        .unwrap_or_else(|| panic!("no migration {id}"))
}

/// The statements a `DRY RUN` plans (`DRAIN NODE n DRY RUN`, `REBALANCE DRY RUN`), in order.
pub async fn dry_run(ops: &mut Conn, sql: &str) -> Vec<String> {
    ops.query_map(sql, |r: mysql_async::Row| {
        r.get::<String, _>(1).unwrap_or_default()
    })
    .await
    .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Waits until migration `id` reaches `step`.
pub async fn until_step(
    ops: &mut Conn,
    id: &str,
    step: &str,
    limit: Duration,
) -> HashMap<String, String> {
    let start = Instant::now();
    loop {
        let m = migration(ops, id).await;
        if m["step"] == step {
            return m;
        }
        assert!(
            start.elapsed() < limit,
            "migration {id} did not reach `{step}`: {m:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `table` created through `pool` on ds0/ds1 (gone from every node first) with `rows` rows
/// `(k, k)`.
pub async fn load(c: &Cluster, pool: &Pool, table: &str, rows: i64) {
    load_after_dropping(c, &[0, 1, 2], pool, table, rows).await
}

/// `table` gone from the cluster nodes `nodes` (dropped on each directly).
pub async fn drop_on(c: &Cluster, nodes: &[usize], table: &str) {
    for n in nodes {
        let p = c.direct(*n);
        p.get_conn()
            .await
            .expect("direct")
            .query_drop(format!("DROP TABLE IF EXISTS {table}"))
            .await
            .expect("drop on the node");
        p.disconnect().await.ok();
    }
}

/// `table` dropped from the cluster nodes `nodes`, then created through `pool` with `rows`
/// rows `(k, k)`.
pub async fn load_after_dropping(
    c: &Cluster,
    nodes: &[usize],
    pool: &Pool,
    table: &str,
    rows: i64,
) {
    drop_on(c, nodes, table).await;
    let mut conn = pool.get_conn().await.expect("proxy");
    conn.query_drop(format!(
        "CREATE TABLE {table} (id BIGINT PRIMARY KEY, v BIGINT NOT NULL)"
    ))
    .await
    .expect("create");
    for chunk in (1..=rows).collect::<Vec<_>>().chunks(1000) {
        let values: Vec<String> = chunk.iter().map(|k| format!("({k}, {k})")).collect();
        conn.query_drop(format!(
            "INSERT INTO {table} (id, v) VALUES {}",
            values.join(", ")
        ))
        .await
        .expect("load");
    }
}

/// Node `n`'s global status counter `name` (`Innodb_deadlocks`, `Com_update`).
pub async fn global_status(c: &Cluster, n: usize, name: &str) -> u64 {
    let pool = c.direct(n);
    let mut conn = pool.get_conn().await.expect("direct");
    let row: Option<(String, u64)> = conn
        .query_first(format!("SHOW GLOBAL STATUS LIKE '{name}'"))
        .await
        .expect("status");
    drop(conn);
    pool.disconnect().await.ok();
    row.map_or(0, |(_, v)| v)
}

/// Node `n`'s count of deadlocks InnoDB found.
pub async fn deadlocks_on(c: &Cluster, n: usize) -> u64 {
    global_status(c, n, "Innodb_deadlocks").await
}
