//! Planning over range, directory and time_tier rules, and generated keys.

use super::tests::plan_in;
use super::*;
use crate::config::parse as parse_rules;

pub(crate) fn topo() -> Topology {
    parse_rules(
        r#"
version = 1
default_node = "ds0"
[server]
listen = "127.0.0.1:3307"
users = [{ name = "app", password = "app" }]
[nodes]
ds0 = "mysql://root:root@127.0.0.1:3311/shop"
ds1 = "mysql://root:root@127.0.0.1:3312/shop"
ds2 = "mysql://root:root@127.0.0.1:3313/shop"
[tables.t_user]
rule = "range"
column = "id"
ranges = [{ below = 1000, node = "ds0" }, { below = 2000, node = "ds1" }, { node = "ds2" }]
[tables.t_day]
rule = "range"
column = "d"
ranges = [{ below = "2024-01-01", node = "ds0" }, { node = "ds1" }]
[tables.t_tenant]
rule = "directory"
column = "tenant_id"
entries = { "42" = "ds2" }
fallback = { rule = "range", ranges = [{ below = 100, node = "ds0" }, { node = "ds1" }] }
[tables.t_looked]
rule = "directory"
column = "tenant_id"
lookup = { node = "ds0", table = "tenant_dir", key_column = "tenant_id", node_column = "node" }
fallback = { rule = "single", node = "ds0" }
[tables.t_txn]
rule = "time_tier"
column = "txn_date"
primary_key = ["id"]
tiers = [
  { name = "hot", node = "ds0", lower = "now-365d", overlap_days = 2 },
  { name = "warm", node = "ds1", lower = "2020-01-01", upper = "now-365d" },
  { name = "cold", node = "ds2" },
]
poll_columns = ["serial_no"]
poll_unique = true
[tables.t_order]
rule = "hash_slot"
column = "user_id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
key_generator = { column = "order_id", kind = "snowflake" }
"#,
        "test.toml",
    )
    .unwrap()
}

fn p(sql: &str) -> Plan {
    plan_in(&topo(), sql, &[])
}

fn nodes(sql: &str) -> Vec<usize> {
    let mut n = p(sql).nodes();
    n.sort_unstable();
    n
}

#[test]
fn range_rules_prune_to_the_ranges_a_where_touches() {
    assert_eq!(nodes("SELECT * FROM t_user WHERE id = 5"), vec![0]);
    assert_eq!(nodes("SELECT * FROM t_user WHERE id = 1000"), vec![1]);
    assert_eq!(
        nodes("SELECT * FROM t_user WHERE id IN (5, 2500)"),
        vec![0, 2]
    );
    assert_eq!(
        nodes("SELECT * FROM t_user WHERE id BETWEEN 999 AND 1000"),
        vec![0, 1]
    );
    assert_eq!(nodes("SELECT * FROM t_user WHERE id >= 2000"), vec![2]);
    assert_eq!(
        nodes("SELECT * FROM t_user WHERE id < 1000 OR id > 5000"),
        vec![0, 2]
    );
    assert_eq!(
        nodes("SELECT * FROM t_user WHERE id > 10 AND id <= 1500"),
        vec![0, 1]
    );
    assert_eq!(
        nodes("SELECT * FROM t_user WHERE name = 'x'"),
        vec![0, 1, 2]
    );
    assert_eq!(
        nodes("SELECT * FROM t_day WHERE d >= '2024-03-01'"),
        vec![1]
    );
    assert_eq!(
        nodes("SELECT * FROM t_day WHERE d BETWEEN '2023-12-31' AND '2024-01-01 10:00:00'"),
        vec![0, 1]
    );
    // Writes too.
    assert_eq!(
        nodes("UPDATE t_user SET name = 'x' WHERE id = 1500"),
        vec![1]
    );
    assert_eq!(nodes("DELETE FROM t_user WHERE id > 1999"), vec![2]);
}

#[test]
fn range_inserts_split_by_range() {
    match p("INSERT INTO t_user (id, name) VALUES (1, 'a'), (1500, 'b'), (7, 'c')") {
        Plan::Scatter { targets, .. } => {
            assert_eq!(targets.len(), 2);
            assert_eq!(targets[0].node, 0);
            assert_eq!(
                targets[0].sql,
                "INSERT INTO t_user (id, name) VALUES (1, 'a'), (7, 'c')"
            );
            assert_eq!(targets[1].node, 1);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        p("INSERT INTO t_user (id, name) VALUES ('abc', 'a')"),
        Plan::Refuse { .. }
    ));
}

#[test]
fn directory_entries_then_fallback() {
    assert_eq!(
        nodes("SELECT * FROM t_tenant WHERE tenant_id = 42"),
        vec![2]
    );
    assert_eq!(nodes("SELECT * FROM t_tenant WHERE tenant_id = 5"), vec![0]);
    assert_eq!(
        nodes("SELECT * FROM t_tenant WHERE tenant_id = 500"),
        vec![1]
    );
    assert_eq!(
        nodes("SELECT * FROM t_tenant WHERE tenant_id IN (42, 5)"),
        vec![0, 2]
    );
    assert_eq!(nodes("SELECT * FROM t_tenant"), vec![0, 1, 2]);
    assert_eq!(
        p("INSERT INTO t_tenant (tenant_id, v) VALUES (42, 1)").nodes(),
        vec![2]
    );
}

#[test]
fn directory_lookups_use_the_cache_or_ask_for_the_keys() {
    // 7 -> ds1 and 8 absent are cached; 9 is not.
    assert_eq!(nodes("SELECT * FROM t_looked WHERE tenant_id = 7"), vec![1]);
    assert_eq!(nodes("SELECT * FROM t_looked WHERE tenant_id = 8"), vec![0]);
    match p("SELECT * FROM t_looked WHERE tenant_id IN (7, 9)") {
        Plan::NeedLookup(keys) => assert_eq!(keys, vec![("t_looked".to_string(), b"9".to_vec())]),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        p("INSERT INTO t_looked (tenant_id) VALUES (9)"),
        Plan::NeedLookup(_)
    ));
}

/// The tier source of `sql`'s plan (under its merge nodes, if any).
pub(crate) fn tier(sql: &str) -> TierPlan {
    match p(sql).source() {
        Plan::Tier(t) => (**t).clone(),
        other => panic!("expected a tier plan for {sql}, got {other:?}"),
    }
}

/// The whole plan of a read of `t_txn` over several tiers.
pub(crate) fn tier_plan(sql: &str) -> Plan {
    p(sql)
}

/// Whether merge nodes sit above `sql`'s tier source.
fn tier_merged(sql: &str) -> bool {
    let plan = p(sql);
    matches!(plan.source(), Plan::Tier(_)) && plan.input().is_some()
}

#[test]
fn time_tier_reads_pick_tiers_and_modes() {
    // Today is 2025-06-30: hot from 2024-06-30 (window from 2024-06-28), warm from 2020-01-01.
    assert_eq!(
        nodes("SELECT * FROM t_txn WHERE txn_date >= '2025-01-01'"),
        vec![0]
    );
    assert_eq!(
        nodes("SELECT * FROM t_txn WHERE txn_date BETWEEN '2021-01-01' AND '2021-12-31'"),
        vec![1]
    );
    let t = tier("SELECT * FROM t_txn WHERE txn_date >= '2024-06-29'");
    assert_eq!(
        t.parts.iter().map(|x| x.node).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert_eq!(t.windows.len(), 1);
    assert!(matches!(t.mode, TierMode::Read { .. }));
    assert!(!tier_merged(
        "SELECT * FROM t_txn WHERE txn_date >= '2024-06-29'"
    ));
    // The window read asks only for the keys the query's dates allow.
    assert_eq!(
        t.window_sql(&t.windows[0]),
        "SELECT `id` FROM `t_txn` WHERE `txn_date` >= '2024-06-28' AND `txn_date` < '2024-06-30' \
         AND ((`txn_date` >= '2024-06-29 00:00:00.000000'))"
    );
    assert_eq!(
        t.exclusion(&t.windows[0], &[vec![Value::Int(5)], vec![Value::Int(9)]], "utf8mb4")
            .as_deref(),
        Some("NOT (`t_txn`.`txn_date` >= '2024-06-28' AND `t_txn`.`txn_date` < '2024-06-30' AND `t_txn`.`id` IN (5, 9))")
    );
    let t = tier("SELECT * FROM t_txn WHERE account = 3");
    assert_eq!(t.parts.len(), 3);
    match &t.mode {
        TierMode::Read { node_sql, .. } => assert_eq!(
            node_sql,
            "SELECT * FROM t_txn WHERE (account = 3) AND __sp_tier_pred__"
        ),
        other => panic!("{other:?}"),
    }
    let t = tier("SELECT COUNT(*), SUM(amount) FROM t_txn");
    assert!(matches!(t.mode, TierMode::Read { .. }));
    assert!(tier_merged("SELECT COUNT(*), SUM(amount) FROM t_txn"));
    let t =
        tier("SELECT * FROM t_txn WHERE account = 3 ORDER BY txn_date DESC, id DESC LIMIT 40, 20");
    match &t.mode {
        TierMode::Page {
            offset,
            limit,
            segments,
            count_tail,
            ..
        } => {
            assert_eq!((*offset, *limit), (40, 20));
            // hot, hot/warm window, warm, cold, NULL dates.
            assert_eq!(segments.len(), 5);
            assert!(segments.last().unwrap().null);
            assert_eq!(
                count_tail,
                " FROM t_txn WHERE (account = 3) AND __sp_tier_pred__"
            );
        }
        other => panic!("{other:?}"),
    }
    // Ascending: oldest first, NULL dates first.
    match tier("SELECT * FROM t_txn ORDER BY txn_date LIMIT 5").mode {
        TierMode::Page { segments, .. } => assert!(segments[0].null),
        other => panic!("{other:?}"),
    }
    // Ordered by another column: the ordered merge.
    assert!(matches!(
        tier("SELECT * FROM t_txn ORDER BY amount LIMIT 5").mode,
        TierMode::Read { .. }
    ));
    assert!(tier_merged("SELECT * FROM t_txn ORDER BY amount LIMIT 5"));
    assert!(matches!(
        tier("SELECT * FROM t_txn WHERE serial_no = 'S1'").mode,
        TierMode::PollFirst { .. }
    ));
    // Several serials may sit on several tiers: all tiers, de-duplicated.
    assert!(matches!(
        tier("SELECT * FROM t_txn WHERE serial_no IN ('S1', 'S2')").mode,
        TierMode::Read { .. }
    ));
}

#[test]
fn time_tier_writes() {
    assert_eq!(
        p("INSERT INTO t_txn (id, txn_date) VALUES (1, '2025-03-01')").nodes(),
        vec![0]
    );
    assert_eq!(
        p("INSERT INTO t_txn (id, txn_date) VALUES (1, '2024-06-29 23:00:00')").nodes(),
        vec![1]
    );
    assert_eq!(
        p("INSERT INTO t_txn (id, txn_date) VALUES (1, '2019-05-01')").nodes(),
        vec![2]
    );
    assert!(matches!(
        p("INSERT INTO t_txn (id, txn_date) VALUES (1, NOW())"),
        Plan::Refuse { .. }
    ));
    let t = tier("UPDATE t_txn SET status = 'x' WHERE serial_no = 'S1'");
    assert_eq!(t.parts.len(), 3);
    assert!(matches!(t.mode, TierMode::Write { retries: 2, .. }));
    // Inside the hot/warm window both copies change.
    let t = tier("DELETE FROM t_txn WHERE txn_date = '2024-06-29'");
    assert_eq!(
        t.parts.iter().map(|x| x.node).collect::<Vec<_>>(),
        vec![0, 1]
    );
    assert_eq!(
        nodes("DELETE FROM t_txn WHERE txn_date = '2025-06-01'"),
        vec![0]
    );
    assert!(matches!(
        p("UPDATE t_txn SET txn_date = '2025-01-01' WHERE id = 1"),
        Plan::Refuse { .. }
    ));
}

#[test]
fn generated_keys_are_added_to_inserts() {
    match p("INSERT INTO t_order (user_id, note) VALUES (5, 'a')") {
        Plan::Route(t) => {
            let slot = crate::routing::slot::slot_of(&Value::Int(5)).unwrap();
            assert_eq!(
                t.sql,
                format!(
                    "INSERT INTO t_order (user_id, note, `order_id`) VALUES (5, 'a', LAST_INSERT_ID({}))",
                    1001 * 10_000 + u64::from(slot)
                )
            );
        }
        other => panic!("{other:?}"),
    }
    // A key the client gives is kept.
    match p("INSERT INTO t_order (order_id, user_id) VALUES (9, 5)") {
        Plan::Route(t) => assert_eq!(
            t.sql,
            "INSERT INTO t_order (order_id, user_id) VALUES (9, 5)"
        ),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        p("INSERT INTO t_order SET user_id = 5"),
        Plan::Refuse { .. }
    ));
}

#[test]
fn check_refuses_bad_new_rules() {
    let base = r#"
version = 1
default_node = "ds0"
[server]
listen = "127.0.0.1:3307"
users = [{ name = "app", password = "app" }]
[nodes]
ds0 = "mysql://root:root@127.0.0.1:3311/shop"
ds1 = "mysql://root:root@127.0.0.1:3312/shop"
"#;
    let err = |tables: &str| {
        parse_rules(&format!("{base}{tables}"), "t.toml")
            .err()
            .map(|e| e.message)
            .unwrap_or_default()
    };
    assert!(err("[tables.a]\nrule = \"range\"\ncolumn = \"id\"\nranges = [{ below = 10, node = \"ds0\" }, { below = 5, node = \"ds1\" }, { node = \"ds0\" }]").contains("strictly increase"));
    assert!(!err("[tables.a]\nrule = \"range\"\ncolumn = \"id\"\nranges = [{ below = 10, node = \"ds0\" }, { below = 20, node = \"ds1\" }]").is_empty());
    assert!(
        err("[tables.a]\nrule = \"directory\"\ncolumn = \"t\"\nentries = { \"1\" = \"ds1\" }")
            .contains("fallback")
    );
    assert!(err("[tables.a]\nrule = \"time_tier\"\ncolumn = \"d\"\ntiers = [{ name = \"hot\", node = \"ds0\", lower = \"now-30d\", overlap_days = 1 }, { name = \"cold\", node = \"ds1\" }]").contains("primary_key"));
    assert!(err("[tables.a]\nrule = \"time_tier\"\ncolumn = \"d\"\ntiers = [{ name = \"hot\", node = \"ds0\", lower = \"2030-01-01\" }, { name = \"cold\", node = \"ds1\", lower = \"2031-01-01\" }]").contains("last tier"));
    assert!(err("[tables.a]\nrule = \"time_tier\"\ncolumn = \"d\"\ntiers = [{ name = \"hot\", node = \"ds0\", lower = \"2000-01-01\" }, { name = \"warm\", node = \"ds1\", lower = \"2001-01-01\" }, { name = \"cold\", node = \"ds0\" }]").contains("tier"));
    assert!(err("[tables.a]\nrule = \"hash_slot\"\ncolumn = \"u\"\nslots = [{ slots = \"0-1023\", node = \"ds0\" }]\nkey_generator = { column = \"u\", kind = \"sequence\", block = 0 }").contains("block"));
    assert!(err(
        "[tables.a]\nrule = \"broadcast\"\nkey_generator = { column = \"u\", kind = \"sequence\" }"
    )
    .contains("key_generator"));
    assert!(err("[tables.a]\nrule = \"hash_slot\"\ncolumn = \"u\"\nslots = [{ slots = \"0-1023\", node = \"ds0\" }]\nkey_generator = { column = \"u\", kind = \"sequence\", node = \"nope\" }").contains("nope"));
    assert!(
        err("[tables.a]\nrule = \"single\"\nnode = \"ds0\"\nranges = []")
            .contains("does not apply")
    );
}
