//! UNIQUE keys the nodes enforce each on its own rows only. A table sharded by `user_id`
//! with `UNIQUE KEY (email)` keeps one email once per node, not once in the table: a second
//! row with the same email on another node is accepted where one MariaDB answers `1062
//! Duplicate entry`. A unique key that contains the shard key is enforced whole (rows with
//! the same key values have the same shard key, so they are on the same node), and so is a
//! one-column key with a unique global index in use (`super::indexes`). Others are named
//! where ops look: `shardproxy check --nodes` lists them, and a CREATE or ALTER TABLE
//! through the proxy that makes one answers with a warning saying what to declare.

use super::shape::Topology;
use crate::sql::write::quoted;

/// A unique key of a table, as a node lists it (`information_schema.STATISTICS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UniqueKey {
    pub table: String,
    /// `PRIMARY` for the primary key.
    pub name: String,
    /// Its columns in order (an expression part, which MySQL 8 allows, as an empty name).
    pub columns: Vec<String>,
}

/// Why `key` of `table` is unique on each node only, or `None` when the nodes enforce it for
/// the whole table: its rule spreads rows by a column the key does not contain. A primary
/// key on the column whose ids the proxy generates (snowflake or sequence, unique across
/// nodes by construction) is not reported.
pub fn per_node_only(
    topo: &Topology,
    table: &str,
    name: &str,
    columns: &[String],
) -> Option<String> {
    let rule = topo.table(table)?;
    let shard = rule.column()?;
    if columns.iter().any(|c| c.eq_ignore_ascii_case(shard)) {
        return None;
    }
    let generated = topo
        .key_generators
        .get(&table.to_ascii_lowercase())
        .is_some_and(|g| matches!(columns, [c] if c.eq_ignore_ascii_case(&g.column)));
    let primary = name.eq_ignore_ascii_case("PRIMARY");
    if primary && generated {
        return None;
    }
    // A unique global index on the key's one column holds it over every node.
    let global = topo.indexes_of(table).and_then(|l| {
        l.iter()
            .find(|i| i.unique && matches!(columns, [c] if c.eq_ignore_ascii_case(&i.column)))
    });
    if global.is_some_and(|i| i.public) {
        return None;
    }
    let cols: Vec<String> = columns.iter().map(|c| quoted(c)).collect();
    let key = if primary {
        format!("PRIMARY KEY ({})", cols.join(", "))
    } else {
        format!("UNIQUE KEY {} ({})", quoted(name), cols.join(", "))
    };
    Some(format!(
        "{key} of {} is unique on each node only: it does not contain the shard key {} of the {} rule, so another node accepts a row with the same value ({})",
        quoted(table),
        quoted(shard),
        rule.kind(),
        match (global, columns) {
            (Some(i), _) => format!(
                "its unique global index {} is being built: until it is in use, values are checked on each node",
                quoted(&i.name)
            ),
            (None, [c]) => format!(
                "declare a unique global index for it: CREATE UNIQUE GLOBAL INDEX {} ON {} on the admin interface, or make the key contain {}",
                quoted(c),
                quoted(table),
                quoted(shard)
            ),
            (None, _) => format!(
                "a global index holds one column: make the key contain {}, or keep the values unique in the application",
                quoted(shard)
            ),
        }
    ))
}

/// Each unique key of `keys` (as the nodes list them, the same key from several nodes once)
/// that is unique on each node only, in table and key order.
pub fn per_node_only_keys(topo: &Topology, keys: &[UniqueKey]) -> Vec<String> {
    let mut keys: Vec<&UniqueKey> = keys.iter().collect();
    keys.sort_by_key(|k| (k.table.to_ascii_lowercase(), k.name.to_ascii_lowercase()));
    keys.dedup_by(|a, b| {
        a.table.eq_ignore_ascii_case(&b.table) && a.name.eq_ignore_ascii_case(&b.name)
    });
    keys.iter()
        .filter_map(|k| per_node_only(topo, &k.table, &k.name, &k.columns))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_topology;

    fn key(table: &str, name: &str, columns: &[&str]) -> UniqueKey {
        UniqueKey {
            table: table.into(),
            name: name.into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
        }
    }

    #[test]
    fn a_unique_key_without_the_shard_key_is_unique_per_node_only() {
        let topo = test_topology(
            1,
            2,
            "[tables.t_u]\nrule = \"hash_slot\"\ncolumn = \"user_id\"\n\
             slots = [{ slots = \"0-511\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds1\" }]\n\
             [tables.b]\nrule = \"broadcast\"\n",
        );
        let keys = [
            key("t_u", "PRIMARY", &["user_id"]),
            key("t_u", "email", &["email"]),
            // The same key as another node lists it: once.
            key("T_U", "EMAIL", &["email"]),
            key("t_u", "by_user", &["email", "User_Id"]),
            key("b", "email", &["email"]),
            key("plain", "email", &["email"]),
            key("t_u", "code", &["code"]),
        ];
        let said = per_node_only_keys(&topo, &keys);
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(
            said[0].starts_with("UNIQUE KEY `code` (`code`) of `t_u` is unique on each node only: it does not contain the shard key `user_id` of the hash_slot rule"),
            "{said:?}"
        );
        assert!(
            said[1].starts_with("UNIQUE KEY `email` (`email`) of `t_u`"),
            "{said:?}"
        );
    }

    #[test]
    fn a_key_with_a_unique_global_index_in_use_is_whole() {
        let rules = |state: &str| {
            format!(
                "[tables.t_u]\nrule = \"hash_slot\"\ncolumn = \"user_id\"\n\
                 slots = [{{ slots = \"0-1023\", node = \"ds0\" }}]\n\
                 [tables.t_u.indexes.email]\nunique = true\nstate = \"{state}\"\n\
                 [tables.t_u_email_gsi]\nrule = \"hash_slot\"\ncolumn = \"v_hash\"\n\
                 slots = [{{ slots = \"0-1023\", node = \"ds0\" }}]\n"
            )
        };
        let email = ["email".to_string()];
        let topo = test_topology(1, 1, &rules("public"));
        assert_eq!(per_node_only(&topo, "t_u", "email", &email), None);
        let two = ["email".to_string(), "name".to_string()];
        assert!(per_node_only(&topo, "t_u", "en", &two).is_some());
        let topo = test_topology(1, 1, &rules("write_only"));
        let said = per_node_only(&topo, "t_u", "email", &email).unwrap_or_default();
        assert!(said.contains("being built"), "{said}");
        let topo = test_topology(1, 1, &rules("public").replace("unique = true", ""));
        let said = per_node_only(&topo, "t_u", "email", &email).unwrap_or_default();
        assert!(
            said.contains("CREATE UNIQUE GLOBAL INDEX `email` ON `t_u`"),
            "{said}"
        );
    }

    #[test]
    fn a_primary_key_is_reported_unless_the_proxy_generates_its_ids() {
        let rules = "[tables.t_o]\nrule = \"hash_slot\"\ncolumn = \"user_id\"\n\
             slots = [{ slots = \"0-1023\", node = \"ds0\" }]\n";
        let topo = test_topology(1, 1, rules);
        let said = per_node_only(&topo, "t_o", "PRIMARY", &["order_id".to_string()]);
        assert!(
            said.as_deref()
                .is_some_and(|s| s.starts_with("PRIMARY KEY (`order_id`) of `t_o`")),
            "{said:?}"
        );
        let topo = test_topology(
            1,
            1,
            &format!("{rules}key_generator = {{ column = \"order_id\", kind = \"snowflake\" }}\n"),
        );
        assert_eq!(
            per_node_only(&topo, "t_o", "PRIMARY", &["order_id".to_string()]),
            None
        );
    }
}
