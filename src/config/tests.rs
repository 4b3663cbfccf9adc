use super::*;

const BASE: &str = r#"
version = 3
default_node = "ds0"
[server]
listen = "127.0.0.1:3307"
users = [{ name = "app", password = "app" }]
[nodes]
ds0 = "mysql://root:root@127.0.0.1:3311/shop"
ds1 = "mysql://root:root@127.0.0.1:3312/shop"
"#;

fn with(tables: &str) -> Result<Topology, ConfigError> {
    parse(&format!("{BASE}{tables}"), "rules/test.toml")
}

#[test]
fn a_valid_file_loads() {
    let t = with(
        r#"
[tables.T_Order]
rule = "hash_slot"
column = "User_Id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
[tables.t_country]
rule = "broadcast"
[tables.t_merchant]
rule = "single"
node = "ds1"
"#,
    )
    .unwrap();
    assert_eq!(t.version, 3);
    assert_eq!(t.default_node, 0);
    match t.table("t_order").unwrap() {
        TableRule::HashSlot { column, map } => {
            assert_eq!(column, "user_id");
            assert_eq!(map.node_of_slot(600), 1);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(t.table("T_COUNTRY"), Some(&TableRule::Broadcast));
    assert_eq!(t.table("t_merchant"), Some(&TableRule::Single { node: 1 }));
}

fn error_of(tables: &str) -> String {
    with(tables).unwrap_err().to_string()
}

#[test]
fn secrets_need_not_be_written_in_the_file() {
    // Names of this test's own (std's environment lock orders Rust readers and writers).
    std::env::set_var("SHARDPROXY_TEST_NODE_PW", "n0de");
    std::env::set_var("SHARDPROXY_TEST_APP_PW", "s3cret");
    let text = BASE
        .replace(
            r#"users = [{ name = "app", password = "app" }]"#,
            r#"users = [{ name = "app", password_env = "SHARDPROXY_TEST_APP_PW" },
     { name = "ro", password_hash = "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19" }]"#,
        )
        .replace(
            "root:root@127.0.0.1:3311",
            "root:${SHARDPROXY_TEST_NODE_PW}@127.0.0.1:3311",
        );
    let t = parse(&text, "rules/test.toml").unwrap();
    assert_eq!(t.users[0].password, "s3cret");
    assert_eq!(t.users[1].password, "");
    assert_eq!(
        t.users[1].hash.map(|h| h[0]),
        Some(0x24),
        "PASSWORD('password') = *2470C0..."
    );
    assert_eq!(t.nodes[0].opts.pass(), Some("n0de"));
    assert!(
        t.nodes[0].url.contains("${SHARDPROXY_TEST_NODE_PW}"),
        "the URL shown and compared is the file's"
    );
    for (bad, says) in [
        (
            r#"{ name = "x", password = "a", password_hash = "*00" }"#,
            "exactly one of",
        ),
        (
            r#"{ name = "x", password_hash = "2470C0" }"#,
            "40 hex digits",
        ),
        (
            r#"{ name = "x", password_env = "SHARDPROXY_TEST_UNSET" }"#,
            "not set",
        ),
        // An empty password would let anyone in as that user.
        (r#"{ name = "x", password = "" }"#, "empty password"),
        (
            r#"{ name = "x", password_env = "SHARDPROXY_TEST_EMPTY_PW" }"#,
            "which is empty",
        ),
    ] {
        std::env::set_var("SHARDPROXY_TEST_EMPTY_PW", "");
        let text = BASE.replace(r#"{ name = "app", password = "app" }"#, bad);
        let e = parse(&text, "rules/test.toml").unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
    let text = BASE.replace(
        "root:root@127.0.0.1:3312",
        "root:${SHARDPROXY_TEST_UNSET}@x",
    );
    let e = parse(&text, "rules/test.toml").unwrap_err().to_string();
    assert!(
        e.contains("SHARDPROXY_TEST_UNSET") && e.contains("ds1"),
        "{e}"
    );
    // A URL printed in an error has its password masked.
    let text = BASE.replace(
        "root:root@127.0.0.1:3312",
        "root:t0psecret@127.0.0.1:3312?no_such_option=1",
    );
    let e = parse(&text, "rules/test.toml").unwrap_err().to_string();
    assert!(e.contains("ds1") && !e.contains("t0psecret"), "{e}");
}

#[test]
fn ops_listeners_stay_on_loopback_unless_told() {
    let admin =
        "[admin]\nlisten = \"0.0.0.0:3308\"\nusers = [{ name = \"ops\", password = \"ops\" }]\n";
    let e = with(admin).unwrap_err().to_string();
    assert!(e.contains("allow_remote"), "{e}");
    assert!(with(&format!("{admin}allow_remote = true\n")).is_ok());
    let metrics = "[metrics]\nlisten = \"10.0.0.1:9108\"\n";
    assert!(with(metrics)
        .unwrap_err()
        .to_string()
        .contains("allow_remote"));
    assert!(with("[metrics]\nlisten = \"127.0.0.1:9108\"\n").is_ok());
}

#[test]
fn reloads_keep_node_indexes() {
    let old = with("[tables.t]\nrule = \"single\"\nnode = \"ds1\"\n").unwrap();
    let new = parse(
        &BASE
            .replace(
                "ds0 = ",
                "ds9 = \"mysql://root:root@127.0.0.1:3319/shop\"\nds0 = ",
            )
            .replace("ds1 = \"mysql://root:root@127.0.0.1:3312/shop\"\n", ""),
        "x.toml",
    )
    .unwrap();
    // Parsed alone, nodes are ds0, ds9; aligned to the old ds0, ds1 they become
    // ds0, ds1 (retired), ds9.
    let aligned = new.align_to(&old);
    let names: Vec<(&str, bool)> = aligned
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.retired))
        .collect();
    assert_eq!(names, vec![("ds0", false), ("ds1", true), ("ds9", false)]);
    assert_eq!(aligned.all_nodes(), vec![0, 2]);
    assert_eq!(aligned.default_node, 0);
}

#[test]
fn overlapping_slots_are_refused() {
    let e = error_of(
        r#"
[tables.t_order]
rule = "hash_slot"
column = "user_id"
slots = [{ slots = "0-600", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
"#,
    );
    assert_eq!(
        e,
        "rules/test.toml: table `t_order`: slot 512 is assigned twice (again in \"512-1023\")"
    );
}

#[test]
fn missing_slots_are_refused() {
    let e = error_of(
        r#"
[tables.t_order]
rule = "hash_slot"
column = "user_id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "600-1023", node = "ds1" }]
"#,
    );
    assert!(e.contains("table `t_order`"), "{e}");
    assert!(
        e.contains("88 of the 1024 slots are not assigned, first 512-599"),
        "{e}"
    );
}

#[test]
fn unknown_nodes_are_refused() {
    let e = error_of(
        r#"
[tables.t_order]
rule = "hash_slot"
column = "user_id"
slots = [{ slots = "0-1023", node = "ds9" }]
"#,
    );
    assert!(
        e.contains("node `ds9`, which is not in [nodes] (known: ds0, ds1)"),
        "{e}"
    );
    let e = error_of("[tables.t_m]\nrule = \"single\"\nnode = \"dsx\"\n");
    assert!(
        e.contains("table `t_m`: node `dsx` is not in [nodes]"),
        "{e}"
    );
}

#[test]
fn bad_slot_ranges_and_rules_are_refused() {
    let e = error_of(
        "[tables.t]\nrule = \"hash_slot\"\ncolumn = \"id\"\nslots = [{ slots = \"0-1024\", node = \"ds0\" }]\n",
    );
    assert!(e.contains("slot range \"0-1024\""), "{e}");
    let e = error_of("[tables.t]\nrule = \"modulo\"\n");
    assert!(e.contains("table `t`: unknown rule \"modulo\""), "{e}");
    let e = error_of("[tables.t]\nrule = \"hash_slot\"\nslots = []\n");
    assert!(e.contains("needs `column`"), "{e}");
    let e = error_of("[tables.t]\nrule = \"broadcast\"\nnode = \"ds0\"\n");
    assert!(e.contains("key `node` does not apply"), "{e}");
}

#[test]
fn toml_errors_and_bad_defaults_are_refused() {
    let e = parse("version = ", "x.toml").unwrap_err().to_string();
    assert!(e.starts_with("x.toml: invalid TOML"), "{e}");
    let e = parse(
        &BASE.replace("\"ds0\"\n[server]", "\"ds7\"\n[server]"),
        "x.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("default_node `ds7` is not in [nodes]"), "{e}");
    let e = parse(&BASE.replace("ds1 = ", "ds1 = \"nope\"\nds2 = "), "x.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("node `ds1`: invalid MySQL URL"), "{e}");
}

#[test]
fn the_wait_for_a_node_connection_is_bounded() {
    let t = parse(BASE, "x.toml").unwrap();
    assert_eq!(
        t.node_wait,
        std::time::Duration::from_secs(5),
        "the default"
    );
    let t = parse(
        &BASE.replace("[server]", "[server]\nnode_wait_secs = 30"),
        "x.toml",
    )
    .unwrap();
    assert_eq!(t.node_wait, std::time::Duration::from_secs(30));
    let e = parse(
        &BASE.replace("[server]", "[server]\nnode_wait_secs = 0"),
        "x.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("node_wait_secs must be at least 1"), "{e}");
}

#[test]
fn a_lookup_cache_ttl_the_cache_would_refuse_is_refused() {
    let rules = |ttl: u64| {
        format!(
            "{BASE}[tables.t]\nrule = \"directory\"\ncolumn = \"k\"\nlookup = {{ node = \"ds0\", table = \"d\", key_column = \"k\", node_column = \"n\", ttl_secs = {ttl} }}\nfallback = {{ rule = \"single\", node = \"ds0\" }}\n"
        )
    };
    assert!(parse(&rules(31_536_000_000), "x.toml").is_ok());
    let e = parse(&rules(31_536_000_001), "x.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("ttl_secs must be at most"), "{e}");
}

#[test]
fn a_node_may_carry_a_weight() {
    let t = parse(
        &BASE.replace(
            "ds1 = \"mysql://root:root@127.0.0.1:3312/shop\"",
            "ds1 = { url = \"mysql://root:root@127.0.0.1:3312/shop\", weight = 3 }\nds2 = { url = \"mysql://root:root@127.0.0.1:3313/shop\" }",
        ),
        "rules/test.toml",
    )
    .unwrap();
    let weights: Vec<(String, u32)> = t.nodes.iter().map(|n| (n.name.clone(), n.weight)).collect();
    assert_eq!(
        weights,
        vec![("ds0".into(), 1), ("ds1".into(), 3), ("ds2".into(), 1)]
    );
    assert_eq!(t.nodes[1].url, "mysql://root:root@127.0.0.1:3312/shop");
    // A misspelt key is refused, not read as weight 1.
    assert!(parse(
        &BASE.replace(
            "ds1 = \"mysql://root:root@127.0.0.1:3312/shop\"",
            "ds1 = { url = \"mysql://root:root@127.0.0.1:3312/shop\", wieght = 3 }",
        ),
        "rules/test.toml",
    )
    .is_err());
}

#[test]
fn hot_thresholds_default_and_are_checked() {
    let t = with("").unwrap();
    assert_eq!(t.hot, hot::HotSection::default());
    assert_eq!(t.hot.seconds, 5);
    assert_eq!(t.balance.mode, hot::BalanceMode::Suggest);
    let t = with("[hot]\nseconds = 3\nslot_statements = 50\n[balance]\nmode = \"off\"\n").unwrap();
    assert_eq!((t.hot.seconds, t.hot.slot_statements), (3, 50));
    assert_eq!(t.hot.slot_node_ms, 300);
    assert_eq!(t.balance.mode, hot::BalanceMode::Off);
    for (bad, said) in [
        ("[hot]\nseconds = 0\n", "seconds must be 1 to 60"),
        ("[hot]\nnode_ratio = 1.0\n", "node_ratio must be over 1.0"),
        ("[hot]\nslot_rows = 0\n", "slot thresholds must be over 0"),
        ("[hot]\nkeys = 0\n", "keys must be 1 to 1000"),
        ("[hot]\nsecond = 3\n", "unknown field `second`"),
        (
            "[balance]\nrange_split_rows = 1000\nrange_merge_rows = 600\n",
            "must be at most half of range_split_rows",
        ),
        (
            "[balance]\nrange_check_secs = 0\n",
            "range_check_secs must be at least 1",
        ),
        (
            "[balance]\nmode = \"sometimes\"\n",
            "unknown variant `sometimes`",
        ),
        ("[balance]\nmode = \"auto\"\n", "needs a [metadata] schema"),
    ] {
        let e = error_of(bad);
        assert!(e.contains(said), "{bad}: {e}");
    }
}

#[test]
fn a_hash_slot_table_takes_split_keys_and_a_fallback_none() {
    let t = with(
        "[tables.t]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
         slots = [{ slots = \"0-1023\", node = \"ds0\" }]\nentries = { \"7\" = \"ds1\" }\n\
         moving = [{ key = \"8\", node = \"ds0\", to = \"ds1\", step = \"read_target\" }]\n",
    )
    .expect("split keys");
    let Some(TableRule::HashSlot { map, .. }) = t.table("t") else {
        panic!("hash_slot")
    };
    assert_eq!(
        map.node_of_row(&mysql_common::value::Value::Int(7), None),
        Some(1)
    );
    assert_eq!(
        map.node_of_row(&mysql_common::value::Value::Int(8), None),
        Some(1)
    );
    assert_eq!(
        map.node_of_row(&mysql_common::value::Value::Int(9), None),
        Some(0)
    );
    let e = error_of(
        "[tables.t]\nrule = \"directory\"\ncolumn = \"id\"\nentries = { \"1\" = \"ds0\" }\n\
         fallback = { rule = \"hash_slot\", slots = [{ slots = \"0-1023\", node = \"ds0\" }], entries = { \"2\" = \"ds1\" } }\n",
    );
    assert!(e.contains("`entries` does not apply"), "{e}");
}

#[test]
fn a_hash_slot_table_takes_salted_keys_with_their_buckets_nodes() {
    use mysql_common::value::Value;
    let head = "[tables.t]\nrule = \"hash_slot\"\ncolumn = \"tenant\"\n\
                slots = [{ slots = \"0-1023\", node = \"ds0\" }]\n";
    let t = with(&format!(
        "{head}salt = {{ by = \"ID\", buckets = 4 }}\nsalted = {{ \"7\" = [\"ds0\", \"ds1\"] }}\n"
    ))
    .expect("salted keys");
    let Some(TableRule::HashSlot { map, .. }) = t.table("t") else {
        panic!("hash_slot")
    };
    assert_eq!(map.salt().map(|s| s.by.as_str()), Some("id"));
    // Buckets 0-1 on ds0, 2-3 on ds1; `CRC32(10) % 4` is 1, `CRC32(7) % 4` is 2.
    assert_eq!(map.salted()[b"7".as_slice()].0, vec![0, 0, 1, 1]);
    assert_eq!(
        map.node_of_row(&Value::Int(7), Some(&Value::Int(10))),
        Some(0)
    );
    assert_eq!(
        map.node_of_row(&Value::Int(7), Some(&Value::Int(7))),
        Some(1)
    );
    assert_eq!(map.node_of_row(&Value::Int(7), None), None);
    assert_eq!(map.node_of_row(&Value::Int(8), None), Some(0));
    for (bad, said) in [
        (
            "salted = { \"7\" = [\"ds0\"] }\n".to_string(),
            "`salted` needs `salt",
        ),
        (
            "salt = { by = \"tenant\", buckets = 4 }\n".into(),
            "other than the shard column",
        ),
        (
            "salt = { column = \"x\", by = \"id\", buckets = 4 }\n".into(),
            "must be the table's shard column",
        ),
        (
            "salt = { by = \"id\", buckets = 1 }\n".into(),
            "must be 2 to 256",
        ),
        (
            "salt = { by = \"id\", buckets = 2 }\nsalted = { \"7\" = [\"ds0\", \"ds1\", \"ds0\"] }\n"
                .into(),
            "needs 1 to 2 nodes",
        ),
        (
            "salt = { by = \"id\", buckets = 2 }\nsalted = { \"7\" = [\"ds9\"] }\n".into(),
            "ds9",
        ),
        (
            "salt = { by = \"id\", buckets = 2 }\nsalted = { \"7\" = [\"ds0\"] }\n\
             entries = { \"7\" = \"ds1\" }\n"
                .into(),
            "salted and also split out",
        ),
    ] {
        let e = error_of(&format!("{head}{bad}"));
        assert!(e.contains(said), "{bad}: {e}");
    }
    let e = error_of(
        "[tables.t]\nrule = \"directory\"\ncolumn = \"id\"\nentries = { \"1\" = \"ds0\" }\n\
         fallback = { rule = \"hash_slot\", slots = [{ slots = \"0-1023\", node = \"ds0\" }], salt = { by = \"x\", buckets = 2 } }\n",
    );
    assert!(e.contains("`salt` does not apply"), "{e}");
}

#[test]
fn a_node_may_have_replicas_and_reads_their_settings() {
    let t = parse(
        &(BASE.replace(
            "ds1 = \"mysql://root:root@127.0.0.1:3312/shop\"",
            "ds1 = { primary = \"mysql://root:root@127.0.0.1:3312/shop\", replicas = [\"mysql://root:root@127.0.0.1:3322/shop\", \"mysql://root:root@127.0.0.1:3332/shop\"] }",
        ) + "\n[replicas]\nmax_lag_ms = 500\npolicy = \"least_busy\"\nconsistency = \"lag\"\nprimary_tables = [\"ledger\"]\n"),
        "rules/test.toml",
    )
    .unwrap();
    let ds1 = &t.nodes[1];
    assert_eq!(ds1.url, "mysql://root:root@127.0.0.1:3312/shop");
    let names: Vec<&str> = ds1.replicas.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["ds1/r1", "ds1/r2"]);
    assert!(t.nodes[0].replicas.is_empty());
    assert_eq!(t.replicas.max_lag_ms, 500);
    assert_eq!(t.replicas.policy, super::replicas::ReadPolicy::LeastBusy);
    assert_eq!(t.replicas.consistency, super::replicas::Consistency::Lag);
    assert!(t.replicas.primary_only("LEDGER"));
    // A lag bound under two checks would take every replica out between them.
    let e = parse(
        &(BASE.to_string() + "\n[replicas]\nmax_lag_ms = 300\ncheck_ms = 200\n"),
        "rules/test.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("at least twice check_ms"), "{e}");
    let e = parse(
        &BASE.replace(
            "ds1 = \"mysql://root:root@127.0.0.1:3312/shop\"",
            "ds1 = { url = \"mysql://root:root@127.0.0.1:3312/shop\", replicas = [\"nonsense\"] }",
        ),
        "rules/test.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("replica `ds1/r1`"), "{e}");
}
