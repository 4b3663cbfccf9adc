//! Hot spots found from live load (issue 28's detection): two keys of one node hammered
//! through the proxy, one by text and one prepared, turn their slots hot within seconds;
//! `SHOW HOT SLOTS`, `SHOW HOT KEYS`, `SHOW LOAD` and `SHOW BALANCE` name them, the metrics
//! count them, nothing moves in "suggest" mode, and the slots cool once the load stops.

use std::time::Instant;

use super::*;
use common::moves::named_rows;

/// The proxy's admin URL, and a connection to it.
async fn admin_of(proxy: &Proxy) -> (String, Conn) {
    let admin = format!(
        "mysql://ops:ops@127.0.0.1:{}",
        proxy.admin_port.expect("admin port")
    );
    let ops = Conn::new(mysql_async::Opts::from_url(&admin).expect("admin URL"))
        .await
        .expect("admin");
    (admin, ops)
}

fn hot_slot(rows: &[std::collections::HashMap<String, String>], slot: u16) -> bool {
    rows.iter()
        .any(|r| r["slot"] == slot.to_string() && r["state"].starts_with("hot"))
}

#[tokio::test]
async fn hot_slots_and_keys_are_found_in_seconds_and_suggested_not_moved() {
    let c = cluster();
    let rules =
        "[admin]\nlisten = \"127.0.0.1:0\"\nusers = [{ name = \"ops\", password = \"ops\" }]\n\n\
                 [hot]\nseconds = 2\nslot_statements = 150\nnode_min_ms = 5\n\n\
                 [balance]\nmode = \"suggest\"\n\n"
            .to_string()
            + &sharded("t_hot");
    let proxy = start_proxy(c, &rules);
    let mut p = proxy.conn().await;
    p.query_drop("DROP TABLE IF EXISTS t_hot")
        .await
        .expect("drop");
    p.query_drop("CREATE TABLE t_hot (user_id BIGINT PRIMARY KEY, v VARCHAR(20))")
        .await
        .expect("create");
    // Two keys of ds1 in different slots, and a key on each other node.
    let on1 = keys_on_node(&L, 1, 64);
    let a = on1[0];
    let b = *on1
        .iter()
        .find(|k| slot_of(&Value::Int(**k)) != slot_of(&Value::Int(a)))
        .expect("two slots");
    let (slot_a, slot_b) = (
        slot_of(&Value::Int(a)).expect("slot"),
        slot_of(&Value::Int(b)).expect("slot"),
    );
    let others: Vec<i64> = [0, 2, 3].iter().map(|n| key_on_node(&L, *n)).collect();
    for k in [a, b].iter().chain(&others) {
        p.query_drop(format!("INSERT INTO t_hot VALUES ({k}, 'v{k}')"))
            .await
            .expect("insert");
    }
    let (admin, mut ops) = admin_of(&proxy).await;
    let version = proxy.shared.topology().version;

    // The load: key a by text, key b prepared, the others now and then.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = Vec::new();
    for (i, k) in [a, b].into_iter().enumerate() {
        let (pool, stop) = (proxy.pool(), stop.clone());
        let others = others.clone();
        load.push(tokio::spawn(async move {
            let mut conn = pool.get_conn().await.expect("load conn");
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let key = if n % 50 == 49 {
                    others[(n as usize / 50) % 3]
                } else {
                    k
                };
                let row: Option<(i64, String)> = if i == 0 {
                    conn.query_first(format!(
                        "SELECT user_id, v FROM t_hot WHERE user_id = {key}"
                    ))
                    .await
                    .expect("text read")
                } else {
                    conn.exec_first("SELECT user_id, v FROM t_hot WHERE user_id = ?", (key,))
                        .await
                        .expect("prepared read")
                };
                assert_eq!(row, Some((key, format!("v{key}"))));
                n += 1;
            }
            n
        }));
    }

    // Both slots hot within 10 seconds of the load's start.
    let started = Instant::now();
    let slots = loop {
        let rows = named_rows(&mut ops, "SHOW HOT SLOTS FOR t_hot").await;
        if hot_slot(&rows, slot_a) && hot_slot(&rows, slot_b) {
            break rows;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "not hot after 10 s: {rows:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let row = slots
        .iter()
        .find(|r| r["slot"] == slot_a.to_string())
        .expect("slot a");
    assert_eq!(row["table"], "t_hot");
    assert_eq!(row["node"], "ds1");
    assert!(
        row["statements_per_s"].parse::<u64>().expect("rate") >= 150,
        "{row:?}"
    );
    assert!(
        row["rows_per_s"].parse::<u64>().expect("rate") >= 150,
        "{row:?}"
    );
    assert!(row["ms_per_s"].parse::<f64>().expect("ms") > 0.0, "{row:?}");
    // The light slots are listed, not hot.
    assert!(slots.iter().any(|r| r["state"] == "-"), "{slots:?}");

    // Their keys: the text key and the prepared one, each nearly all of its slot.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let keys = named_rows(&mut ops, "SHOW HOT KEYS FOR t_hot").await;
    for (k, slot) in [(a, slot_a), (b, slot_b)] {
        let top = keys
            .iter()
            .find(|r| r["slot"] == slot.to_string())
            .unwrap_or_else(|| panic!("slot {slot} has keys: {keys:?}"));
        assert_eq!(top["key"], k.to_string(), "{keys:?}");
        assert!(
            top["pct_of_slot"].parse::<f64>().expect("pct") > 90.0,
            "{keys:?}"
        );
    }

    // ds1 carries most of the load: hot, and the node's listing says so.
    let nodes = loop {
        let nodes = named_rows(&mut ops, "SHOW LOAD").await;
        if nodes
            .iter()
            .any(|r| r["node"] == "ds1" && r["state"].starts_with("hot"))
        {
            break nodes;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "ds1 not hot: {nodes:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let ds1 = nodes.iter().find(|r| r["node"] == "ds1").expect("ds1");
    assert_eq!(ds1["hot_slots"], "2", "{nodes:?}");
    assert!(
        ds1["of_mean"].parse::<f64>().expect("ratio") > 1.5,
        "{nodes:?}"
    );

    // The suggestion: one of the two keys, nearly all of its slot's load, split out of its
    // slot to another node; nothing moves.
    let balance = named_rows(&mut ops, "SHOW BALANCE").await;
    let moves: Vec<&String> = balance
        .iter()
        .map(|r| &r["action"])
        .filter(|a| a.starts_with("MIGRATE "))
        .collect();
    assert_eq!(moves.len(), 1, "{balance:?}");
    assert!(
        [a, b]
            .iter()
            .any(|k| moves[0].starts_with(&format!("MIGRATE KEY '{k}' OF t_hot TO ds"))),
        "{balance:?}"
    );
    assert!(!moves[0].ends_with("ds1"), "{balance:?}");
    // The other slot stays: alone it is nearly all of ds1's load now, and so is its key,
    // which is named.
    let stuck: Vec<&String> = balance
        .iter()
        .map(|r| &r["action"])
        .filter(|a| a.starts_with("-- slot"))
        .collect();
    assert_eq!(stuck.len(), 1, "{balance:?}");
    assert!(
        stuck[0].contains(&format!("its heaviest key, {a} of `t_hot`"))
            || stuck[0].contains(&format!("its heaviest key, {b} of `t_hot`")),
        "{balance:?}"
    );
    assert!(balance.iter().all(|r| r["mode"] == "suggest"));
    assert_eq!(
        proxy.shared.topology().version,
        version,
        "suggest mode moved something"
    );
    let text = proxy.shared.metrics.render();
    assert!(
        text.contains("shardproxy_hot_slots{table=\"t_hot\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("shardproxy_node_hot{node=\"ds1\"} 1"),
        "{text}"
    );

    // `shardproxy top --once` prints the same.
    let top = std::process::Command::new(env!("CARGO_BIN_EXE_shardproxy"))
        .args(["top", "--once", "--admin", &admin])
        .output()
        .expect("shardproxy top");
    let screen = String::from_utf8_lossy(&top.stdout);
    assert!(
        top.status.success(),
        "{screen} {}",
        String::from_utf8_lossy(&top.stderr)
    );
    assert!(
        screen.contains("NODES") && screen.contains("HOT KEYS"),
        "{screen}"
    );
    assert!(
        screen.contains(&format!(" {a} ")) || screen.contains(&format!(" {a}\n")),
        "{screen}"
    );
    assert!(screen.contains("MIGRATE KEY"), "{screen}");

    // The load stops: the slots cool, and their keys are forgotten.
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for l in load {
        assert!(l.await.expect("load task") > 100);
    }
    let stopped = Instant::now();
    loop {
        let rows = named_rows(&mut ops, "SHOW HOT SLOTS FOR t_hot").await;
        if !hot_slot(&rows, slot_a) && !hot_slot(&rows, slot_b) {
            break;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(10),
            "still hot: {rows:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(named_rows(&mut ops, "SHOW HOT KEYS").await.is_empty());
    p.query_drop("DROP TABLE t_hot").await.expect("drop");
}

/// The rules of the reload test: `[hot]` with this slot threshold, `[balance]` in `mode`
/// (`salt`: the table may have keys salted by `v`).
fn hot_rules(c: &Cluster, version: u64, slot_statements: u64, mode: &str, salt: bool) -> String {
    let mut table = sharded("t_hot_rl");
    if salt {
        table = table.trim_end().to_string() + "\nsalt = { by = \"v\", buckets = 4 }\n\n";
    }
    rules_toml(
        c,
        &format!(
            "[admin]\nlisten = \"127.0.0.1:0\"\nusers = [{{ name = \"ops\", password = \"ops\" }}]\n\n\
             [hot]\nseconds = 2\nslot_statements = {slot_statements}\nslot_node_ms = 100000\nnode_min_ms = 1\n\n\
             [balance]\nmode = \"{mode}\"\n\n{table}"
        ),
    )
    .replacen("version = 1", &format!("version = {version}"), 1)
}

#[tokio::test]
async fn thresholds_changed_by_reload_apply_to_the_next_windows() {
    let c = cluster();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, hot_rules(c, 1, 1_000_000, "suggest", false)).expect("rules");
    let proxy = start_proxy_watching(&path);
    let mut p = proxy.conn().await;
    p.query_drop("DROP TABLE IF EXISTS t_hot_rl")
        .await
        .expect("drop");
    p.query_drop("CREATE TABLE t_hot_rl (user_id BIGINT PRIMARY KEY, v INT)")
        .await
        .expect("create");
    let k = keys_on_node(&L, 2, 1)[0];
    let s = slot_of(&Value::Int(k)).expect("slot");
    p.query_drop(format!("INSERT INTO t_hot_rl VALUES ({k}, 1)"))
        .await
        .expect("insert");
    let (_, mut ops) = admin_of(&proxy).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (pool, stop) = (proxy.pool(), stop.clone());
        tokio::spawn(async move {
            let mut conn = pool.get_conn().await.expect("load conn");
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _: Option<i64> = conn
                    .exec_first("SELECT v FROM t_hot_rl WHERE user_id = ?", (k,))
                    .await
                    .expect("read");
            }
        })
    };
    // Far under a million statements a second: busy, not hot.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rows = named_rows(&mut ops, "SHOW HOT SLOTS FOR t_hot_rl").await;
    assert!(rows.iter().any(|r| r["slot"] == s.to_string()), "{rows:?}");
    assert!(!hot_slot(&rows, s), "{rows:?}");
    // The threshold lowered by a reload: hot within the next windows.
    std::fs::write(&path, hot_rules(c, 2, 50, "suggest", false)).expect("rules v2");
    let reloaded = Instant::now();
    loop {
        let rows = named_rows(&mut ops, "SHOW HOT SLOTS FOR t_hot_rl").await;
        if hot_slot(&rows, s) {
            break;
        }
        assert!(
            reloaded.elapsed() < Duration::from_secs(10),
            "not hot 10 s after the reload (rules version {}): {rows:?}",
            proxy.shared.topology().version
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // `[balance] mode = "off"` by reload: detection goes on, nothing is suggested. Before,
    // the slot (all of ds2's load) is named as one no move helps.
    let balance = loop {
        let balance = named_rows(&mut ops, "SHOW BALANCE").await;
        if !balance.is_empty() {
            break balance;
        }
        assert!(
            reloaded.elapsed() < Duration::from_secs(15),
            "nothing in SHOW BALANCE"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(balance[0]["mode"], "suggest", "{balance:?}");
    assert!(
        balance[0]["action"].starts_with(&format!("-- slot {s} of t_hot_rl on ds2")),
        "{balance:?}"
    );
    assert!(
        balance[0]["action"].contains("needs salting"),
        "{balance:?}"
    );
    // With a `salt` on the table, the key is offered to be salted over the coolest nodes.
    std::fs::write(&path, hot_rules(c, 3, 50, "suggest", true)).expect("rules v3");
    let reloaded = Instant::now();
    loop {
        let balance = named_rows(&mut ops, "SHOW BALANCE").await;
        if balance.first().is_some_and(|r| {
            r["action"].starts_with(&format!("SALT KEY '{k}' OF t_hot_rl OVER ds"))
        }) {
            assert!(
                balance[0]["action"].contains("% of the slot's statements"),
                "{balance:?}"
            );
            break;
        }
        assert!(
            reloaded.elapsed() < Duration::from_secs(15),
            "no SALT KEY in SHOW BALANCE: {balance:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    std::fs::write(&path, hot_rules(c, 4, 50, "off", true)).expect("rules v4");
    let reloaded = Instant::now();
    while proxy.shared.topology().version != 4 {
        assert!(
            reloaded.elapsed() < Duration::from_secs(10),
            "v4 not applied"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(named_rows(&mut ops, "SHOW BALANCE").await.is_empty());
    assert!(hot_slot(
        &named_rows(&mut ops, "SHOW HOT SLOTS FOR t_hot_rl").await,
        s
    ));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    load.await.expect("load");
    p.query_drop("DROP TABLE t_hot_rl").await.expect("drop");
}
