//! The metadata schema's tables and the query of its version, in one place for the rules'
//! store (`super`) and the migrations' (`super::migrations`).

/// The rules' tables: `route_config`, `shard_slot_map`, `directory_map`.
pub const RULES: [&str; 3] = [
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
];

/// The metadata's version: the highest row version of its tables.
pub const VERSION_SQL: &str =
    "SELECT GREATEST(COALESCE((SELECT MAX(version) FROM route_config), 0), \
     COALESCE((SELECT MAX(version) FROM shard_slot_map), 0), \
     COALESCE((SELECT MAX(version) FROM directory_map), 0))";

/// The migrations' tables: `shard_migrations`, `shard_proxies`.
pub const MIGRATIONS: [&str; 2] = [
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
        started DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
        updated DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3))",
    "CREATE TABLE IF NOT EXISTS shard_proxies (
        proxy_id VARCHAR(96) NOT NULL PRIMARY KEY,
        version BIGINT NOT NULL,
        quiet TINYINT NOT NULL DEFAULT 1,
        shadow_failures BIGINT NOT NULL DEFAULT 0,
        heartbeat DATETIME(3) NOT NULL)",
];
