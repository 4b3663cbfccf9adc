//! What the global index tests share: the check that an index is exact.

use std::collections::BTreeMap;

use mysql_async::prelude::Queryable;

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
