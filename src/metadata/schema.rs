//! The metadata schema's tables and the query of its version, in one place for the rules'
//! store (`super`) and the migrations' (`super::migrations`).

use mysql_async::prelude::Queryable;

/// The rules' tables: `route_config`, `shard_slot_map`, `directory_map`, `shard_nodes`,
/// `salted_map`, `range_map`.
pub const RULES: [&str; 7] = [
    "CREATE TABLE IF NOT EXISTS route_config (
        table_name VARCHAR(64) NOT NULL PRIMARY KEY,
        rule VARCHAR(16) NOT NULL,
        column_name VARCHAR(64) NULL,
        node VARCHAR(64) NULL,
        version BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS shard_slot_map (
        table_name VARCHAR(64) NOT NULL,
        slot_id INT NOT NULL,
        node VARCHAR(64) NOT NULL,
        state VARCHAR(16) NOT NULL DEFAULT 'stable',
        target_node VARCHAR(64) NULL,
        version BIGINT NOT NULL,
        PRIMARY KEY (table_name, slot_id))",
    "CREATE TABLE IF NOT EXISTS directory_map (
        table_name VARCHAR(64) NOT NULL,
        key_value VARCHAR(255) NOT NULL,
        node VARCHAR(64) NOT NULL,
        state VARCHAR(16) NOT NULL DEFAULT 'stable',
        target_node VARCHAR(64) NULL,
        version BIGINT NOT NULL,
        PRIMARY KEY (table_name, key_value))",
    // Nodes added or removed through the admin interface: over the rules files' own, so
    // every proxy knows a node before a slot map names it.
    "CREATE TABLE IF NOT EXISTS shard_nodes (
        name VARCHAR(64) NOT NULL PRIMARY KEY,
        url TEXT NOT NULL,
        weight INT NULL,
        removed TINYINT NOT NULL DEFAULT 0,
        version BIGINT NOT NULL)",
    // A salted key's buckets (`SALT KEY`): each bucket's node and, while it moves, where to
    // and at which step.
    "CREATE TABLE IF NOT EXISTS salted_map (
        table_name VARCHAR(64) NOT NULL,
        key_value VARCHAR(255) NOT NULL,
        bucket SMALLINT NOT NULL,
        node VARCHAR(64) NOT NULL,
        state VARCHAR(16) NOT NULL DEFAULT 'stable',
        target_node VARCHAR(64) NULL,
        version BIGINT NOT NULL,
        PRIMARY KEY (table_name, key_value, bucket))",
    // A range table's ranges in order (`crate::metadata::ranges`): each one's upper bound as
    // a TOML value (NULL for the last).
    "CREATE TABLE IF NOT EXISTS range_map (
        table_name VARCHAR(64) NOT NULL,
        seq INT NOT NULL,
        below VARCHAR(300) NULL,
        node VARCHAR(64) NOT NULL,
        state VARCHAR(16) NOT NULL DEFAULT 'stable',
        target_node VARCHAR(64) NULL,
        version BIGINT NOT NULL,
        changed DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
        PRIMARY KEY (table_name, seq))",
    // Global secondary indexes (`crate::metadata::indexes`): each one's rules section as a
    // TOML inline table, NULL once dropped (so the version only grows).
    "CREATE TABLE IF NOT EXISTS shard_indexes (
        table_name VARCHAR(64) NOT NULL,
        index_name VARCHAR(64) NOT NULL,
        definition TEXT NULL,
        version BIGINT NOT NULL,
        PRIMARY KEY (table_name, index_name))",
];

/// The metadata's version: the highest row version of its tables.
pub const VERSION_SQL: &str =
    "SELECT GREATEST(COALESCE((SELECT MAX(version) FROM route_config), 0), \
     COALESCE((SELECT MAX(version) FROM shard_slot_map), 0), \
     COALESCE((SELECT MAX(version) FROM directory_map), 0), \
     COALESCE((SELECT MAX(version) FROM shard_nodes), 0), \
     COALESCE((SELECT MAX(version) FROM salted_map), 0), \
     COALESCE((SELECT MAX(version) FROM range_map), 0), \
     COALESCE((SELECT MAX(version) FROM shard_indexes), 0))";

/// The named lock every writer of a new version holds from reading the highest version to
/// its commit: two writers never take the same number.
pub const VERSION_LOCK: &str = "SELECT GET_LOCK(CONCAT(DATABASE(), '.shardproxy_version'), 30)";
pub const VERSION_UNLOCK: &str = "DO RELEASE_LOCK(CONCAT(DATABASE(), '.shardproxy_version'))";

/// The condition every write of a migration's or a plan's state carries: on a connection of
/// the driver (which sets `@shardproxy_token` to its lease's token), the lease must still be
/// its own; an admin's connection leaves the variable NULL. A driver that lost its lease (it
/// was paused past it, another proxy took over) changes nothing.
pub const FENCE: &str = "(@shardproxy_token IS NULL OR @shardproxy_token = (SELECT token FROM shard_driver WHERE id = 1))";

/// The migrations' tables: `shard_migrations`, `shard_proxies`, `shard_rebalance`,
/// `shard_driver` (the driving proxy's lease, one row).
pub const MIGRATIONS: [&str; 4] = [
    "CREATE TABLE IF NOT EXISTS shard_migrations (
        id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
        table_name VARCHAR(1024) NOT NULL,
        first_slot INT NOT NULL,
        last_slot INT NOT NULL,
        source VARCHAR(64) NOT NULL,
        target VARCHAR(64) NOT NULL,
        step VARCHAR(16) NOT NULL,
        rate INT NOT NULL DEFAULT 0,
        auto_cutover TINYINT NOT NULL DEFAULT 0,
        copied BIGINT NOT NULL DEFAULT 0,
        rows_estimate BIGINT NOT NULL DEFAULT 0,
        key_value VARCHAR(255) NULL,
        rows_per_sec DOUBLE NOT NULL DEFAULT 0,
        cursor_key TEXT NULL,
        chunks_verified BIGINT NOT NULL DEFAULT 0,
        chunks_differing BIGINT NOT NULL DEFAULT 0,
        failures_seen BIGINT NOT NULL DEFAULT 0,
        cleaned BIGINT NOT NULL DEFAULT 0,
        message TEXT NULL,
        driver VARCHAR(96) NULL,
        plan_id BIGINT NULL,
        seq INT NULL,
        capture VARCHAR(16) NULL,
        binlog_pos VARCHAR(600) NULL,
        salted_buckets TINYINT NOT NULL DEFAULT 0,
        range_move TINYINT NOT NULL DEFAULT 0,
        started DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
        updated DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3))",
    "CREATE TABLE IF NOT EXISTS shard_proxies (
        proxy_id VARCHAR(96) NOT NULL PRIMARY KEY,
        version BIGINT NOT NULL,
        quiet TINYINT NOT NULL DEFAULT 1,
        busy VARCHAR(1024) NOT NULL DEFAULT '',
        shadow_failures BIGINT NOT NULL DEFAULT 0,
        settled BIGINT NOT NULL DEFAULT 0,
        heartbeat DATETIME(3) NOT NULL)",
    // A rebalance plan: its moves are `shard_migrations` rows with its id, `queued` until
    // the driver starts them.
    "CREATE TABLE IF NOT EXISTS shard_rebalance (
        id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
        what VARCHAR(255) NOT NULL,
        state VARCHAR(16) NOT NULL,
        max_parallel INT NOT NULL DEFAULT 2,
        message TEXT NULL,
        started DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
        updated DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3))",
    "CREATE TABLE IF NOT EXISTS shard_driver (
        id TINYINT NOT NULL PRIMARY KEY,
        holder VARCHAR(96) NOT NULL,
        token BIGINT NOT NULL,
        expires DATETIME(3) NOT NULL)",
];

/// Each proxy's last second of load (`crate::metadata::load`): a row per slot of a table it
/// routed statements to, and a row per node (`table_name` empty, `slot` -1).
pub const LOAD: &str = "CREATE TABLE IF NOT EXISTS shard_load (
        proxy_id VARCHAR(96) NOT NULL,
        table_name VARCHAR(64) NOT NULL,
        slot INT NOT NULL,
        node_name VARCHAR(64) NOT NULL DEFAULT '',
        statements BIGINT NOT NULL,
        rows_n BIGINT NOT NULL,
        bytes BIGINT NOT NULL,
        micros BIGINT NOT NULL,
        at DATETIME(3) NOT NULL,
        PRIMARY KEY (proxy_id, table_name, slot, node_name))";

/// Views the proxy keeps (`crate::plan::views`): one row per name ever created, its
/// `definition` NULL once dropped, so `version` (unique, taken under the table's lock) only
/// grows and its maximum tells a proxy that something changed.
pub const VIEWS: &str = "CREATE TABLE IF NOT EXISTS shard_views (
        name VARCHAR(64) NOT NULL PRIMARY KEY,
        definition LONGTEXT NULL,
        sql_mode VARCHAR(64) NOT NULL DEFAULT '',
        charset VARCHAR(32) NOT NULL DEFAULT 'utf8mb4',
        version BIGINT NOT NULL)";

/// Columns added since a table was first released: (table, column, its definition), added
/// to a schema that lacks them.
pub const ADDED_COLUMNS: [(&str, &str, &str); 8] = [
    ("shard_proxies", "busy", "VARCHAR(1024) NOT NULL DEFAULT ''"),
    ("shard_proxies", "settled", "BIGINT NOT NULL DEFAULT 0"),
    ("shard_migrations", "plan_id", "BIGINT NULL"),
    ("shard_migrations", "seq", "INT NULL"),
    ("shard_migrations", "capture", "VARCHAR(16) NULL"),
    ("shard_migrations", "binlog_pos", "VARCHAR(600) NULL"),
    (
        "shard_migrations",
        "salted_buckets",
        "TINYINT NOT NULL DEFAULT 0",
    ),
    (
        "shard_migrations",
        "range_move",
        "TINYINT NOT NULL DEFAULT 0",
    ),
];

/// Takes the lock of version writers (see [`VERSION_LOCK`]); [`unlock_versions`]
/// (or the connection's end) gives it back.
pub async fn lock_versions<C: Queryable>(c: &mut C) -> mysql_async::Result<()> {
    let got: Option<Option<i64>> = c.query_first(VERSION_LOCK).await?;
    if got.flatten() != Some(1) {
        return Err(mysql_async::Error::Other(
            "the metadata's version lock was not granted within 30 s".into(),
        ));
    }
    Ok(())
}

pub async fn unlock_versions<C: Queryable>(c: &mut C) {
    let _ = c.query_drop(VERSION_UNLOCK).await;
}
