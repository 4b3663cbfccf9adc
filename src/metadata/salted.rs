//! Salted keys' buckets in the metadata schema (`salted_map`, a row per bucket): the node of
//! each bucket of a salted key and, while buckets move, where to and at which step. Merged
//! over the rules file's `salted` and `salted_moving` of the key's table, whose `salt` the
//! file keeps.

use mysql_async::prelude::Queryable;

/// A `salted_map` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaltRow {
    pub table: String,
    pub key: String,
    pub bucket: u16,
    pub node: String,
    pub state: String,
    pub target: Option<String>,
}

/// Every row, in table, key and bucket order, and their highest version.
pub async fn read<C: Queryable>(c: &mut C) -> mysql_async::Result<(Vec<SaltRow>, u64)> {
    type Row = (String, String, u16, String, String, Option<String>, u64);
    let rows: Vec<Row> = c
        .query(
            "SELECT table_name, key_value, bucket, node, state, target_node, version \
             FROM salted_map ORDER BY table_name, key_value, bucket",
        )
        .await?;
    let version = rows.iter().map(|r| r.6).max().unwrap_or(0);
    Ok((
        rows.into_iter()
            .map(|(table, key, bucket, node, state, target, _)| SaltRow {
                table,
                key,
                bucket,
                node,
                state,
                target,
            })
            .collect(),
        version,
    ))
}

/// Salts a key: a row per bucket, each on `node` (where the key's rows are), in a version of
/// its own (above `floor`). Refused (`false`) if the key has rows already.
pub async fn insert<C: Queryable>(
    c: &mut C,
    table: &str,
    key: &str,
    node: &str,
    buckets: u16,
    floor: u64,
) -> mysql_async::Result<bool> {
    super::schema::lock_versions(c).await?;
    let r = insert_locked(c, table, key, node, buckets, floor).await;
    super::schema::unlock_versions(c).await;
    r
}

async fn insert_locked<C: Queryable>(
    c: &mut C,
    table: &str,
    key: &str,
    node: &str,
    buckets: u16,
    floor: u64,
) -> mysql_async::Result<bool> {
    if is_salted(c, table, key).await? {
        return Ok(false);
    }
    let v: Option<u64> = c.query_first(super::schema::VERSION_SQL).await?;
    let v = v.unwrap_or(0).max(floor) + 1;
    let rows = (0..buckets).map(|b| (table, key, b, node, v));
    c.exec_batch(
        "INSERT INTO salted_map (table_name, key_value, bucket, node, state, target_node, version) \
         VALUES (?, ?, ?, ?, 'stable', NULL, ?)",
        rows,
    )
    .await?;
    Ok(true)
}

/// Is this key of `table` salted (its bucket rows written)?
pub async fn is_salted<C: Queryable>(
    c: &mut C,
    table: &str,
    key: &str,
) -> mysql_async::Result<bool> {
    let n: Option<u64> = c
        .exec_first(
            "SELECT COUNT(*) FROM salted_map WHERE table_name = ? AND key_value = ?",
            (table, key),
        )
        .await?;
    Ok(n.unwrap_or(0) > 0)
}

/// Writes the step of buckets `first..=last` of a salted key (a migration's version `v`).
#[allow(clippy::too_many_arguments)]
pub async fn write_step<C: Queryable>(
    c: &mut C,
    table: &str,
    key: &str,
    first: u16,
    last: u16,
    node: &str,
    state: &str,
    target: Option<&str>,
    v: u64,
) -> mysql_async::Result<()> {
    c.exec_drop(
        "UPDATE salted_map SET node = ?, state = ?, target_node = ?, version = ? \
         WHERE table_name = ? AND key_value = ? AND bucket BETWEEN ? AND ?",
        (node, state, target, v, table, key, first, last),
    )
    .await
}

/// The rows over the rules file (`doc`): each salted key's buckets as its `salted` list, and
/// its moving buckets (runs of one move) as `salted_moving` entries, instead of the file's.
pub fn merge(doc: &mut toml_edit::DocumentMut, rows: &[SaltRow]) -> Result<(), String> {
    let mut i = 0;
    while i < rows.len() {
        let (table, key) = (&rows[i].table, &rows[i].key);
        let mut j = i;
        while j < rows.len() && rows[j].table == *table && rows[j].key == *key {
            j += 1;
        }
        let mine = &rows[i..j];
        i = j;
        let Some(t) = doc["tables"]
            .get_mut(table.as_str())
            .and_then(toml_edit::Item::as_table_like_mut)
        else {
            return Err(format!(
                "metadata salts key '{key}' of `{table}`, which is not a table of the rules"
            ));
        };
        let buckets = t
            .get("salt")
            .and_then(|s| s.get("buckets"))
            .and_then(toml_edit::Item::as_integer)
            .ok_or_else(|| {
                format!("metadata salts key '{key}' of `{table}`, whose rules have no `salt`")
            })?;
        if mine.len() as i64 != buckets
            || mine.iter().enumerate().any(|(b, r)| r.bucket as usize != b)
        {
            return Err(format!(
                "metadata holds {} buckets of salted key '{key}' of `{table}`, whose `salt` has {buckets}",
                mine.len()
            ));
        }
        let mut nodes = toml_edit::Array::new();
        for r in mine {
            nodes.push(r.node.as_str());
        }
        if t.get("salted").is_none() {
            t.insert("salted", toml_edit::value(toml_edit::InlineTable::new()));
        }
        let Some(e) = t.get_mut("salted").and_then(|e| e.as_table_like_mut()) else {
            return Err(format!("the rules' `salted` of `{table}` is not a table"));
        };
        e.insert(key.as_str(), toml_edit::value(nodes));
        if t.get("salted_moving")
            .is_some_and(|m| m.as_array().is_none())
        {
            return Err(format!(
                "the rules' `salted_moving` of `{table}` must be an inline array, `[{{ key = ... }}]`, for the metadata's moves to join it"
            ));
        }
        // The file's own moves of this key give way to the metadata's.
        if let Some(a) = t.get_mut("salted_moving").and_then(|m| m.as_array_mut()) {
            a.retain(|e| {
                e.as_inline_table()
                    .and_then(|x| x.get("key"))
                    .and_then(|k| k.as_str())
                    != Some(key.as_str())
            });
        }
        for (a, e, (node, state, target)) in
            crate::routing::runs(mine.iter().map(|r| (&r.node, &r.state, &r.target)))
        {
            if let (Some(to), false) = (target, state == "stable") {
                let mut it = toml_edit::InlineTable::new();
                it.insert("key", key.as_str().into());
                it.insert(
                    "buckets",
                    format!("{}-{}", mine[a].bucket, mine[e].bucket).into(),
                );
                it.insert("node", node.as_str().into());
                it.insert("to", to.as_str().into());
                it.insert("step", state.as_str().into());
                if t.get("salted_moving").is_none() {
                    t.insert("salted_moving", toml_edit::value(toml_edit::Array::new()));
                }
                if let Some(a) = t.get_mut("salted_moving").and_then(|m| m.as_array_mut()) {
                    a.push(it);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(bucket: u16, node: &str, state: &str, target: Option<&str>) -> SaltRow {
        SaltRow {
            table: "t".into(),
            key: "7".into(),
            bucket,
            node: node.into(),
            state: state.into(),
            target: target.map(String::from),
        }
    }

    #[test]
    fn bucket_rows_merge_as_the_salted_list_and_its_moves() {
        let file = "[tables.t]\nrule = \"hash_slot\"\ncolumn = \"k\"\n\
                    slots = [{ slots = \"0-1023\", node = \"ds0\" }]\n\
                    salt = { by = \"id\", buckets = 4 }\n";
        let mut doc: toml_edit::DocumentMut = file.parse().expect("toml");
        let rows = [
            row(0, "ds0", "stable", None),
            row(1, "ds0", "stable", None),
            row(2, "ds0", "capture", Some("ds1")),
            row(3, "ds0", "capture", Some("ds1")),
        ];
        merge(&mut doc, &rows).expect("merged");
        let t = &doc["tables"]["t"];
        assert_eq!(
            t["salted"].to_string().trim(),
            "{ 7 = [\"ds0\", \"ds0\", \"ds0\", \"ds0\"] }"
        );
        let moving = t["salted_moving"].to_string();
        assert!(
            moving.contains("buckets = \"2-3\"") && moving.contains("step = \"capture\""),
            "{moving}"
        );
        // A key whose bucket rows are not all there is refused, not guessed.
        let mut doc: toml_edit::DocumentMut = file.parse().expect("toml");
        assert!(merge(&mut doc, &rows[..3]).is_err());
        // A `salted` written as a table of its own takes the key as well.
        let mut doc: toml_edit::DocumentMut =
            format!("{file}[tables.t.salted]\n\"8\" = [\"ds1\"]\n")
                .parse()
                .expect("toml");
        merge(&mut doc, &rows).expect("merged");
        let out = doc.to_string();
        let t = crate::config::test_topology(1, 2, &out);
        let Some(crate::config::TableRule::HashSlot { map, .. }) = t.table("t") else {
            panic!("hash_slot: {out}")
        };
        assert_eq!(map.salted()[b"7".as_slice()].0, vec![0, 0, 0, 0], "{out}");
        assert_eq!(map.salted()[b"8".as_slice()].0, vec![1, 1, 1, 1], "{out}");
        assert_eq!(map.salt_moves().len(), 1, "{out}");
    }
}
