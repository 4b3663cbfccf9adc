//! The views proxies keep (`schema::VIEWS`): read whole when their version changes, and
//! written one at a time under the table's lock.

use mysql_async::prelude::Queryable;

/// A stored view: its CREATE VIEW statement, the `sql_mode` flags its text is read in, and
/// the `character_set_client` it was created with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub definition: String,
    pub sql_mode: String,
    pub charset: String,
}

/// The highest version of the views (0 for none ever).
pub async fn version<C: Queryable>(c: &mut C) -> mysql_async::Result<i64> {
    let v: Option<i64> = c
        .query_first("SELECT COALESCE(MAX(version), 0) FROM shard_views")
        .await?;
    Ok(v.unwrap_or(0))
}

/// Every view there is, and the version they make.
pub async fn read<C: Queryable>(c: &mut C) -> mysql_async::Result<(i64, Vec<Stored>)> {
    let rows: Vec<(Option<String>, String, String, i64)> = c
        .query("SELECT definition, sql_mode, charset, version FROM shard_views")
        .await?;
    let version = rows.iter().map(|r| r.3).max().unwrap_or(0);
    let views = rows
        .into_iter()
        .filter_map(|(definition, sql_mode, charset, _)| {
            Some(Stored {
                definition: definition?,
                sql_mode,
                charset,
            })
        })
        .collect();
    Ok((version, views))
}

/// In a transaction on `c`: locks the views (every other writer waits) and answers the
/// stored definition of `name` (lower-cased), if it has one.
pub async fn lock_and_read<C: Queryable>(
    c: &mut C,
    name: &str,
) -> mysql_async::Result<Option<String>> {
    // Locks every row and the gaps between: the version taken below is unique.
    c.query_drop("SELECT COUNT(*) FROM shard_views FOR UPDATE")
        .await?;
    let d: Option<Option<String>> = c
        .exec_first("SELECT definition FROM shard_views WHERE name = ?", (name,))
        .await?;
    Ok(d.flatten())
}

/// In the transaction of [`lock_and_read`]: stores `name`'s definition (`None` drops it)
/// under the next version.
pub async fn put<C: Queryable>(
    c: &mut C,
    name: &str,
    stored: Option<&Stored>,
) -> mysql_async::Result<()> {
    let next: Option<i64> = c
        .query_first("SELECT COALESCE(MAX(version), 0) + 1 FROM shard_views")
        .await?;
    let (definition, sql_mode, charset) = match stored {
        Some(s) => (
            Some(s.definition.as_str()),
            s.sql_mode.as_str(),
            s.charset.as_str(),
        ),
        None => (None, "", "utf8mb4"),
    };
    c.exec_drop(
        "INSERT INTO shard_views (name, definition, sql_mode, charset, version) \
         VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE definition = VALUES(definition), \
         sql_mode = VALUES(sql_mode), charset = VALUES(charset), version = VALUES(version)",
        (name, definition, sql_mode, charset, next.unwrap_or(1)),
    )
    .await
}
