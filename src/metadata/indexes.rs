//! Global secondary indexes in the metadata schema (`shard_indexes`, a row per index): its
//! rules section as a TOML inline table, merged over the rules file's tables as
//! `[tables.<table>.indexes.<name>]` for every proxy; NULL once dropped. The index table's
//! own rule and slots are `route_config` and `shard_slot_map` rows like any table's.

use mysql_async::prelude::Queryable;

/// A `shard_indexes` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexRow {
    pub table: String,
    pub name: String,
    /// `{ column = "email", unique = true, ... }`; `None`: dropped.
    pub definition: Option<String>,
}

/// Every row, in table and index order, and their highest version.
pub async fn read<C: Queryable>(c: &mut C) -> mysql_async::Result<(Vec<IndexRow>, u64)> {
    let rows: Vec<(String, String, Option<String>, u64)> = c
        .query(
            "SELECT table_name, index_name, definition, version FROM shard_indexes \
             ORDER BY table_name, index_name",
        )
        .await?;
    let version = rows.iter().map(|r| r.3).max().unwrap_or(0);
    Ok((
        rows.into_iter()
            .map(|(table, name, definition, _)| IndexRow {
                table,
                name,
                definition,
            })
            .collect(),
        version,
    ))
}

/// The rows over the rules `doc`'s tables: an index's section put in (over one of the same
/// name), a dropped one's taken out.
pub fn merge(doc: &mut toml_edit::DocumentMut, rows: &[IndexRow]) -> Result<(), String> {
    for r in rows {
        // The table's section, named in any case.
        let key = doc
            .get("tables")
            .and_then(|t| t.as_table_like())
            .and_then(|t| {
                t.iter()
                    .map(|(k, _)| k.to_string())
                    .find(|k| k.eq_ignore_ascii_case(&r.table))
            });
        let Some(table) = key
            .as_deref()
            .and_then(|k| doc["tables"].as_table_like_mut().and_then(|t| t.get_mut(k)))
        else {
            if r.definition.is_none() {
                continue;
            }
            return Err(format!(
                "metadata has the global index `{}` of `{}`, which has no rule",
                r.name, r.table
            ));
        };
        match &r.definition {
            None => {
                if let Some(list) = table.get_mut("indexes").and_then(|i| i.as_table_like_mut()) {
                    list.remove(&r.name);
                }
            }
            Some(def) => {
                let parsed: toml_edit::DocumentMut = format!("x = {def}")
                    .parse()
                    .map_err(|e| format!("global index `{}` of `{}`: {e}", r.name, r.table))?;
                let Some(inline) = parsed.get("x").and_then(|x| x.as_inline_table()) else {
                    return Err(format!(
                        "global index `{}` of `{}`: its definition is not an inline table",
                        r.name, r.table
                    ));
                };
                put(table, &r.name, inline.clone().into_table())
                    .map_err(|e| format!("`{}`: {e}", r.table))?;
            }
        }
    }
    Ok(())
}

/// Puts `section` as the index `name` of the rules' table `table` (`[tables.t]`), a
/// standard table under its `indexes` (an `indexes` made by indexing would be an inline
/// table, where a standard one is silently dropped).
pub fn put(
    table: &mut toml_edit::Item,
    name: &str,
    section: toml_edit::Table,
) -> Result<(), String> {
    let Some(t) = table.as_table_like_mut() else {
        return Err("not a table".into());
    };
    if t.get("indexes").is_none() {
        let mut list = toml_edit::Table::new();
        list.set_implicit(true);
        t.insert("indexes", toml_edit::Item::Table(list));
    }
    let Some(list) = t.get_mut("indexes").and_then(|i| i.as_table_like_mut()) else {
        return Err("its `indexes` is not a table".into());
    };
    list.insert(name, toml_edit::Item::Table(section));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_rows_merge_over_the_tables_and_a_dropped_one_goes() {
        let mut doc: toml_edit::DocumentMut = "[tables.t]\nrule = \"hash_slot\"\n\
             [tables.t.indexes.old]\nunique = true\n"
            .parse()
            .unwrap();
        let rows = vec![
            IndexRow {
                table: "t".into(),
                name: "email".into(),
                definition: Some(
                    "{ column = \"email\", unique = true, state = \"write_only\" }".into(),
                ),
            },
            IndexRow {
                table: "t".into(),
                name: "old".into(),
                definition: None,
            },
            IndexRow {
                table: "gone".into(),
                name: "x".into(),
                definition: None,
            },
        ];
        merge(&mut doc, &rows).unwrap();
        let t = &doc["tables"]["t"]["indexes"];
        assert_eq!(t["email"]["state"].as_str(), Some("write_only"));
        assert_eq!(t["email"]["unique"].as_bool(), Some(true));
        assert!(t.get("old").is_none(), "{doc}");
        let orphan = vec![IndexRow {
            table: "nope".into(),
            name: "x".into(),
            definition: Some("{ }".into()),
        }];
        assert!(merge(&mut doc, &orphan).is_err());
        // A table without indexes in the file gets its section.
        let mut doc: toml_edit::DocumentMut = "[tables.u]\nrule = \"hash_slot\"\n".parse().unwrap();
        let rows = vec![IndexRow {
            table: "u".into(),
            name: "email".into(),
            definition: Some("{ column = \"email\" }".into()),
        }];
        merge(&mut doc, &rows).unwrap();
        let text = doc.to_string();
        assert!(text.contains("[tables.u.indexes.email]"), "{text}");
    }
}
