//! Hot reload by version: a newer valid rules file is swapped in while traffic flows; an
//! invalid or older one is refused and the running rules stay.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{scrape, start_proxy_watching, Cluster, Proxy};
use mysql_async::prelude::Queryable;
use mysql_async::Row;

fn rules(c: &Cluster, version: u64, nodes: usize, slots: &str) -> String {
    let mut s = format!(
        "version = {version}\ndefault_node = \"ds0\"\n\n[server]\nlisten = \"127.0.0.1:0\"\n\
         users = [{{ name = \"app\", password = \"app\" }}]\n\n[nodes]\n"
    );
    for i in 0..nodes {
        s.push_str(&format!("ds{i} = \"{}\"\n", c.url(i)));
    }
    s.push_str(&format!(
        "\n[tables.t_rl]\nrule = \"hash_slot\"\ncolumn = \"id\"\nslots = {slots}\n"
    ));
    s
}

/// Replaces the file at once, as an editor or a deploy tool does (write, then rename).
fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write the rules");
    std::fs::rename(&tmp, path).expect("rename the rules into place");
}

async fn wait_for_version(p: &Proxy, version: u64) {
    let start = Instant::now();
    while p.shared.topology().version != version {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "version {version} was not applied (running {})",
            p.shared.topology().version
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `SELECT COUNT(*) FROM <from_where>` on `node` directly.
async fn count_direct(c: &Cluster, node: usize, from_where: &str) -> i64 {
    let pool = c.direct(node);
    let mut conn = pool.get_conn().await.expect("direct connection");
    let n: Option<i64> = conn
        .query_first(format!("SELECT COUNT(*) FROM {from_where}"))
        .await
        .expect("direct count");
    drop(conn);
    pool.disconnect().await.ok();
    n.unwrap_or(0)
}

async fn count_on(c: &Cluster, node: usize, id: i64) -> i64 {
    count_direct(c, node, &format!("t_rl WHERE id = {id}")).await
}

#[tokio::test]
async fn newer_rules_are_swapped_in_and_bad_ones_refused() {
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("rules.toml");
    let all_on = |node: usize| format!("[{{ slots = \"0-1023\", node = \"ds{node}\" }}]");
    write_atomically(&path, &rules(c, 1, 2, &all_on(0)));
    let p = start_proxy_watching(&path);
    let mut conn = p.conn().await;
    conn.query_drop("CREATE TABLE t_rl (id BIGINT PRIMARY KEY, v INT NOT NULL)")
        .await
        .expect("CREATE TABLE on every node");
    // The node that joins later has the table too.
    let pool = c.direct(2);
    pool.get_conn()
        .await
        .expect("direct")
        .query_drop("CREATE TABLE IF NOT EXISTS t_rl (id BIGINT PRIMARY KEY, v INT NOT NULL)")
        .await
        .expect("CREATE TABLE on ds2");
    pool.disconnect().await.ok();

    conn.query_drop("INSERT INTO t_rl (id, v) VALUES (1, 1)")
        .await
        .expect("insert under v1");
    assert_eq!(count_on(c, 0, 1).await, 1);

    // v2 moves every slot to ds1: the same session's next write follows it.
    write_atomically(&path, &rules(c, 2, 2, &all_on(1)));
    wait_for_version(&p, 2).await;
    conn.query_drop("INSERT INTO t_rl (id, v) VALUES (2, 2)")
        .await
        .expect("insert under v2");
    assert_eq!((count_on(c, 0, 2).await, count_on(c, 1, 2).await), (0, 1));

    // An invalid file (overlapping slots) and an older version are refused; v2 stays.
    let refused = p
        .shared
        .reloads_refused
        .load(std::sync::atomic::Ordering::Relaxed);
    write_atomically(
        &path,
        &rules(
            c,
            3,
            2,
            "[{ slots = \"0-600\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds1\" }]",
        ),
    );
    let start = Instant::now();
    while p
        .shared
        .reloads_refused
        .load(std::sync::atomic::Ordering::Relaxed)
        == refused
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the invalid file was not refused"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ignored = p
        .shared
        .reloads_ignored
        .load(std::sync::atomic::Ordering::Relaxed);
    write_atomically(&path, &rules(c, 1, 2, &all_on(0)));
    while p
        .shared
        .reloads_ignored
        .load(std::sync::atomic::Ordering::Relaxed)
        == ignored
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the older file was not ignored"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(p.shared.topology().version, 2);
    conn.query_drop("INSERT INTO t_rl (id, v) VALUES (3, 3)")
        .await
        .expect("insert, v2 still");
    assert_eq!(count_on(c, 1, 3).await, 1);

    // v4 adds a node and gives it every slot: its pool opens and takes the writes.
    write_atomically(&path, &rules(c, 4, 3, &all_on(2)));
    wait_for_version(&p, 4).await;
    conn.query_drop("INSERT INTO t_rl (id, v) VALUES (4, 4)")
        .await
        .expect("insert under v4");
    assert_eq!(count_on(c, 2, 4).await, 1);
    conn.disconnect().await.ok();
}

#[tokio::test]
async fn twenty_slot_map_changes_under_load_fail_no_statement() {
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("rules.toml");
    let split = |v: u64| {
        // Alternate which half of the slots each node serves.
        if v.is_multiple_of(2) {
            "[{ slots = \"0-511\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds1\" }]"
        } else {
            "[{ slots = \"0-511\", node = \"ds1\" }, { slots = \"512-1023\", node = \"ds0\" }]"
        }
    };
    write_atomically(
        &path,
        &rules(c, 100, 2, split(100)).replace("t_rl", "t_rl_load"),
    );
    let p = start_proxy_watching(&path);
    let mut setup = p.conn().await;
    setup
        .query_drop("CREATE TABLE t_rl_load (id BIGINT PRIMARY KEY, v INT NOT NULL)")
        .await
        .expect("CREATE TABLE");
    setup.disconnect().await.ok();

    // Writers insert distinct ids and read each back, while the map changes 20 times.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..3i64 {
        let url = p.url("shop");
        let stop = stop.clone();
        let shared = p.shared.clone();
        writers.push(tokio::spawn(async move {
            let mut conn = mysql_async::Conn::new(mysql_async::Opts::from_url(&url).expect("url"))
                .await
                .expect("connect");
            let mut ids = Vec::new();
            let mut n = 0i64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let id = w * 1_000_000 + n;
                n += 1;
                let before = shared.topology().version;
                conn.exec_drop("INSERT INTO t_rl_load (id, v) VALUES (?, ?)", (id, w))
                    .await
                    .unwrap_or_else(|e| panic!("insert {id} failed during reloads: {e}"));
                let after = shared.topology().version;
                let _: Vec<(i64, i64)> = conn
                    .query("SELECT id, v FROM t_rl_load WHERE v = 1 LIMIT 5")
                    .await
                    .unwrap_or_else(|e| panic!("read failed during reloads: {e}"));
                // The version in force for the whole write, when no reload landed during it.
                ids.push((id, (before == after).then_some(before)));
            }
            conn.disconnect().await.ok();
            ids
        }));
    }
    for v in 101..=120u64 {
        write_atomically(
            &path,
            &rules(c, v, 2, split(v)).replace("t_rl", "t_rl_load"),
        );
        wait_for_version(&p, v).await;
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut written = Vec::new();
    for w in writers {
        written.extend(w.await.expect("writer"));
    }
    assert!(
        written.len() > 20,
        "too few writes to mean anything: {}",
        written.len()
    );
    // Every row was written exactly once, on one node.
    let mut total = 0i64;
    for node in 0..2 {
        let pool = c.direct(node);
        let n: Option<i64> = pool
            .get_conn()
            .await
            .expect("direct")
            .query_first("SELECT COUNT(*) FROM t_rl_load")
            .await
            .expect("count");
        total += n.unwrap_or(0);
        pool.disconnect().await.ok();
    }
    assert_eq!(
        total as usize,
        written.len(),
        "rows lost or duplicated across reloads"
    );
    // Every row written under one version sits on the node that version named for its slot.
    let mut checked = 0;
    for (id, version) in &written {
        let Some(v) = version else { continue };
        let slot = shardproxy::routing::slot::slot_of(&mysql_async::Value::Int(*id)).expect("slot");
        let first_half = slot < 512;
        // Even versions: 0-511 on ds0; odd versions: 0-511 on ds1.
        let node = usize::from(first_half != v.is_multiple_of(2));
        let pool = c.direct(node);
        let n: Option<i64> = pool
            .get_conn()
            .await
            .expect("direct")
            .query_first(format!("SELECT COUNT(*) FROM t_rl_load WHERE id = {id}"))
            .await
            .expect("count");
        pool.disconnect().await.ok();
        assert_eq!(
            n,
            Some(1),
            "row {id} written under version {v} is not on ds{node}"
        );
        checked += 1;
        if checked >= 200 {
            break;
        }
    }
    assert!(checked > 0, "no write ran entirely under one version");
    assert_eq!(
        p.shared
            .reloads_applied
            .load(std::sync::atomic::Ordering::Relaxed),
        20
    );
}

/// A proxy over ds0 and ds1 watching its rules file in `dir`, with `table` on `slots`, an
/// admin listener (user `ops`, password `ops_password`) and a metrics listener.
fn with_admin(
    c: &Cluster,
    dir: &tempfile::TempDir,
    table: &str,
    slots: &str,
    ops_password: &str,
) -> (std::path::PathBuf, Proxy) {
    let path = dir.path().join("rules.toml");
    let text = rules(c, 1, 2, slots).replace("t_rl", table).replace(
        "[nodes]",
        &format!("[admin]\nlisten = \"127.0.0.1:0\"\nusers = [{{ name = \"ops\", password = \"{ops_password}\" }}]\n\n[metrics]\nlisten = \"127.0.0.1:0\"\n\n[nodes]"),
    );
    write_atomically(&path, &text);
    let p = start_proxy_watching(&path);
    (path, p)
}

#[tokio::test]
async fn the_admin_interface_reads_and_changes_the_rules() {
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, p) = with_admin(
        c,
        &dir,
        "t_adm",
        "[{ slots = \"0-1023\", node = \"ds0\" }]",
        "ops-secret",
    );
    let admin_port = p.admin_port.expect("an admin port");
    let admin_url = |user: &str, pw: &str| format!("mysql://{user}:{pw}@127.0.0.1:{admin_port}");

    // Application users cannot log in to the admin interface.
    let denied =
        mysql_async::Conn::new(mysql_async::Opts::from_url(&admin_url("app", "app")).expect("url"))
            .await;
    common::expect_code(denied, 1045, "an application user on the admin interface");

    let mut ops = mysql_async::Conn::new(
        mysql_async::Opts::from_url(&admin_url("ops", "ops-secret")).expect("url"),
    )
    .await
    .expect("operator login");
    let version: Vec<(String, String, String, String)> =
        ops.query("SHOW VERSION").await.expect("SHOW VERSION");
    assert_eq!(version[0].0, "1");
    let rules_rows: Vec<(String, String, String, String)> =
        ops.query("SHOW RULES").await.expect("SHOW RULES");
    assert_eq!(
        rules_rows,
        vec![(
            "t_adm".into(),
            "hash_slot".into(),
            "id".into(),
            "ds0".into()
        )]
    );
    let plan: Vec<String> = ops
        .query("PREVIEW SELECT * FROM t_adm WHERE id = 5")
        .await
        .expect("PREVIEW");
    assert!(plan[0].starts_with("Route to ds"), "{plan:?}");
    assert!(
        plan.last().is_some_and(|l| l.contains("planned once")),
        "{plan:?}"
    );

    // A change writes a new version of the file and applies it.
    ops.query_drop("SET SLOTS 512-1023 NODE ds1 FOR t_adm")
        .await
        .expect("SET SLOTS");
    assert_eq!(p.shared.topology().version, 2);
    let slots: Vec<(String, String, String, String, String, String)> =
        ops.query("SHOW SLOTS FOR t_adm").await.expect("SHOW SLOTS");
    let runs: Vec<(String, String, String)> = slots.into_iter().map(|r| (r.1, r.2, r.3)).collect();
    assert_eq!(
        runs,
        vec![
            ("0".into(), "511".into(), "ds0".into()),
            ("512".into(), "1023".into(), "ds1".into())
        ]
    );
    let on_disk = std::fs::read_to_string(&path).expect("read the rules back");
    assert!(on_disk.contains("version = 2"), "{on_disk}");
    assert!(
        on_disk.contains("users = [{ name = \"ops\""),
        "the file lost its other keys: {on_disk}"
    );
    crate::common::expect_code(
        ops.query_drop("SET SLOTS 0-10 NODE ds7 FOR t_adm").await,
        1235,
        "SET SLOTS to an unknown node",
    );
    ops.query_drop(format!("ADD NODE ds2 '{}'", c.url(2)))
        .await
        .expect("ADD NODE");
    assert_eq!(p.shared.topology().version, 3);
    let nodes = common::moves::named_rows(&mut ops, "SHOW NODES").await;
    assert_eq!(nodes.len(), 3);
    assert!(nodes.iter().all(|n| n["health"] == "up"), "{nodes:?}");
    assert!(
        nodes.iter().all(|n| n["url"].contains(":***@")),
        "passwords shown: {nodes:?}"
    );

    // Applications cannot reach admin statements through their own port.
    let mut app = p.conn().await;
    assert!(app
        .query_drop("SET SLOTS 0-10 NODE ds0 FOR t_adm")
        .await
        .is_err());
    assert_eq!(p.shared.topology().version, 3);
    // A client's own error on a node is not the node's fault: SHOW NODES stays clean.
    assert!(app.query_drop("SHOW NODES").await.is_err());
    let nodes = common::moves::named_rows(&mut ops, "SHOW NODES").await;
    assert!(
        nodes.iter().all(|n| n["last_error"].is_empty()),
        "a client's syntax error shown as a node's last_error: {nodes:?}"
    );

    // The metrics endpoint reports what happened.
    app.query_drop("CREATE TABLE IF NOT EXISTS t_adm (id BIGINT PRIMARY KEY)")
        .await
        .expect("CREATE TABLE");
    app.query_drop("INSERT INTO t_adm (id) VALUES (5)")
        .await
        .expect("INSERT");
    expect_refused(&mut app).await;
    let text = scrape(p.metrics_port.expect("a metrics port")).await;
    for needle in [
        "shardproxy_rules_version 3",
        "shardproxy_reloads_total{outcome=\"applied\"} 2",
        "shardproxy_statements_total{route=\"single\",type=\"insert\"} 1",
        "shardproxy_statements_total{route=\"broadcast\",type=\"ddl\"} 1",
        "shardproxy_refused_total{reason=\"shard_key_change\"} 1",
        "shardproxy_node_statement_seconds_count{node=\"ds",
        "shardproxy_backend_connections_held{node=\"ds",
        &format!(
            "shardproxy_slot_statements_total{{table=\"t_adm\",slot=\"{}\"}} 1",
            shardproxy::routing::slot::slot_of(&mysql_async::Value::Int(5)).expect("a slot")
        ),
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }

    // SHOW PLANS: a repeated point select, its first execution planned in full and the
    // rest on its cached plan.
    for _ in 0..3 {
        let got: Option<i64> = app
            .query_first("SELECT id FROM t_adm WHERE id = 5")
            .await
            .expect("SELECT");
        assert_eq!(got, Some(5));
    }
    let plans: Vec<Row> = ops.query("SHOW PLANS 50").await.expect("SHOW PLANS");
    let row = plans
        .iter()
        .find(|r| r.get::<String, _>(0).as_deref() == Some("SELECT id FROM t_adm WHERE id = ?"))
        .unwrap_or_else(|| panic!("no plan for the point select in {plans:?}"));
    let field = |i: usize| row.get::<String, _>(i).unwrap_or_default();
    assert!(
        field(1).starts_with("cached: route by `t_adm`.`id`"),
        "{}",
        field(1)
    );
    assert_eq!(
        (field(2), field(3), field(4)),
        ("3".into(), "2".into(), "3".into())
    );
    app.disconnect().await.ok();
    ops.disconnect().await.ok();
}

async fn expect_refused(app: &mut mysql_async::Conn) {
    common::expect_code(
        app.query_drop("UPDATE t_adm SET id = 6 WHERE id = 5 LIMIT 1")
            .await,
        1235,
        "UPDATE of the shard key with LIMIT",
    );
}

#[tokio::test]
async fn two_proxies_on_one_metadata_schema_converge() {
    let c = Cluster::shared(3);
    // The metadata schema lives on node 2, beside the data nodes it describes.
    let pool = c.direct(2);
    pool.get_conn()
        .await
        .expect("direct")
        .query_drop("CREATE DATABASE IF NOT EXISTS shardproxy_meta")
        .await
        .expect("CREATE DATABASE");
    pool.disconnect().await.ok();
    let meta_url = c.url(2).replace("/shop", "/shardproxy_meta");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut proxies = Vec::new();
    for name in ["a", "b"] {
        let path = dir.path().join(format!("rules-{name}.toml"));
        let text = rules(c, 1, 2, "[{ slots = \"0-1023\", node = \"ds0\" }]")
            .replace("t_rl", "t_meta")
            .replace(
                "[nodes]",
                &format!(
                    "[admin]\nlisten = \"127.0.0.1:0\"\nusers = [{{ name = \"ops\", password = \"ops\" }}]\n\n\
                     [metadata]\nurl = \"{meta_url}\"\npoll_ms = 100\n\n[nodes]"
                ),
            );
        write_atomically(&path, &text);
        proxies.push(start_proxy_watching(&path));
    }
    // Proxy a's operator moves half the slots; the change goes to the metadata tables.
    let mut ops = mysql_async::Conn::new(
        mysql_async::Opts::from_url(&format!(
            "mysql://ops:ops@127.0.0.1:{}",
            proxies[0].admin_port.expect("admin port")
        ))
        .expect("url"),
    )
    .await
    .expect("operator login");
    ops.query_drop("SET SLOTS 512-1023 NODE ds1 FOR t_meta")
        .await
        .expect("SET SLOTS through the metadata");
    assert_eq!(proxies[0].shared.topology().version, 2);
    // Proxy b converges within one poll interval (plus scheduling slack).
    wait_for_version(&proxies[1], 2).await;
    for p in &proxies {
        let t = p.shared.topology();
        match t.table("t_meta") {
            Some(shardproxy::config::TableRule::HashSlot { map, .. }) => {
                assert_eq!(t.node_name(map.node_of_slot(100)), "ds0");
                assert_eq!(t.node_name(map.node_of_slot(600)), "ds1");
            }
            other => panic!("t_meta is {other:?}"),
        }
    }
    // Rows written straight into the schema by ops' own tooling converge the same way.
    let pool = c.direct(2);
    let mut direct = pool.get_conn().await.expect("direct");
    direct
        .query_drop("UPDATE shardproxy_meta.shard_slot_map SET node = 'ds1', version = 3 WHERE table_name = 't_meta' AND slot_id < 512")
        .await
        .expect("update the slot rows");
    drop(direct);
    pool.disconnect().await.ok();
    for p in &proxies {
        wait_for_version(p, 3).await;
        let t = p.shared.topology();
        match t.table("t_meta") {
            Some(shardproxy::config::TableRule::HashSlot { map, .. }) => {
                assert_eq!(map.nodes(), vec![t.node_index("ds1").expect("ds1")]);
            }
            other => panic!("t_meta is {other:?}"),
        }
    }
    // An invalid metadata version (a slot left unassigned) is refused by both; 3 stays.
    let pool = c.direct(2);
    let mut direct = pool.get_conn().await.expect("direct");
    // In one transaction: a proxy polling between a bump alone and the delete would take
    // version 4 whole, and then never see an invalid one (it failed so in CI on a loaded
    // machine).
    direct.query_drop("BEGIN").await.expect("begin");
    direct
        .query_drop(
            "UPDATE shardproxy_meta.shard_slot_map SET version = 4 WHERE table_name = 't_meta'",
        )
        .await
        .expect("bump");
    direct
        .query_drop("DELETE FROM shardproxy_meta.shard_slot_map WHERE table_name = 't_meta' AND slot_id = 7")
        .await
        .expect("delete a slot row");
    direct.query_drop("COMMIT").await.expect("commit");
    drop(direct);
    pool.disconnect().await.ok();
    // Each proxy refuses it at its next poll (waited for, not slept on: a loaded machine
    // polls late).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    for p in &proxies {
        while p
            .shared
            .reloads_refused
            .load(std::sync::atomic::Ordering::Relaxed)
            == 0
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the invalid metadata version was not refused within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(p.shared.topology().version, 3);
    }
    ops.disconnect().await.ok();
}

/// Plans made once (a prepared point select at PREPARE, a repeated text shape at its first
/// execution) resolve their node in each execution's snapshot: after a reload moves the
/// key's slot, the same prepared statement and the same text shape read the new node,
/// without preparing again.
#[tokio::test]
async fn cached_plans_follow_the_slot_map_across_reloads() {
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("rules.toml");
    let all_on = |node: usize| format!("[{{ slots = \"0-1023\", node = \"ds{node}\" }}]");
    let table = |t: String| t.replace("t_rl", "t_rl_plans");
    write_atomically(&path, &table(rules(c, 10, 2, &all_on(0))));
    let p = start_proxy_watching(&path);
    let mut conn = p.conn().await;
    conn.query_drop("CREATE TABLE t_rl_plans (id BIGINT PRIMARY KEY, v INT NOT NULL)")
        .await
        .expect("CREATE TABLE on every node");
    // The same key with a different value on each node: the answer names the node.
    for node in 0..2 {
        let pool = c.direct(node);
        let mut d = pool.get_conn().await.expect("direct");
        d.query_drop(format!("INSERT INTO t_rl_plans (id, v) VALUES (7, {node})"))
            .await
            .expect("direct insert");
        drop(d);
        pool.disconnect().await.ok();
    }
    let stmt = conn
        .prep("SELECT v FROM t_rl_plans WHERE id = ?")
        .await
        .expect("PREPARE");
    for _ in 0..3 {
        let v: Option<i64> = conn.exec_first(&stmt, (7,)).await.expect("EXECUTE");
        assert_eq!(v, Some(0), "prepared, under v10");
        let v: Option<i64> = conn
            .query_first("SELECT v FROM t_rl_plans WHERE id = 7")
            .await
            .expect("text");
        assert_eq!(v, Some(0), "text, under v10");
    }
    write_atomically(&path, &table(rules(c, 11, 2, &all_on(1))));
    wait_for_version(&p, 11).await;
    for _ in 0..3 {
        let v: Option<i64> = conn.exec_first(&stmt, (7,)).await.expect("EXECUTE");
        assert_eq!(v, Some(1), "the same prepared statement, under v11");
        let v: Option<i64> = conn
            .query_first("SELECT v FROM t_rl_plans WHERE id =   7")
            .await
            .expect("text");
        assert_eq!(v, Some(1), "the same text shape, under v11");
    }
    // Both forms share one shape in the plan cache; all but the first executions of each
    // ran on the cached plan.
    let e = p
        .shared
        .plans
        .entry("SELECT v FROM t_rl_plans WHERE id = ?")
        .expect("an entry");
    use std::sync::atomic::Ordering::Relaxed;
    assert_eq!(e.executions.load(Relaxed), 12);
    assert_eq!(e.cached_executions.load(Relaxed), 10, "{}", e.plan());
    assert!(
        e.plan().starts_with("cached: route by `t_rl_plans`.`id`"),
        "{}",
        e.plan()
    );
    conn.disconnect().await.ok();
}

/// The plan's rows: (statement, from, to, slots, estimated rows).
async fn plan_of(
    ops: &mut mysql_async::Conn,
    stmt: &str,
) -> Vec<(String, String, String, usize, String)> {
    let rows: Vec<Row> = ops
        .query(stmt)
        .await
        .unwrap_or_else(|e| panic!("{stmt}: {e}"));
    rows.into_iter()
        .map(|r| {
            let s = |i: usize| r.get::<Option<String>, _>(i).flatten().unwrap_or_default();
            (s(1), s(3), s(4), s(5).parse().unwrap_or(0), s(6))
        })
        .collect()
}

/// Rows of `t_rb` on `node` whose slot (`CRC32(id) % 1024`, as the proxy hashes an integer
/// key's text) is in `first..=last`.
async fn rows_in_slots(c: &Cluster, node: usize, first: u16, last: u16) -> i64 {
    let from_where = format!("t_rb WHERE CRC32(id) % 1024 BETWEEN {first} AND {last}");
    count_direct(c, node, &from_where).await
}

#[tokio::test]
async fn the_rebalancer_plans_a_new_nodes_share_and_a_drain() {
    let c = Cluster::shared(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let (path, p) = with_admin(
        c,
        &dir,
        "t_rb",
        "[{ slots = \"0-511\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds1\" }]",
        "ops",
    );
    let mut app = p.conn().await;
    app.query_drop("DROP TABLE IF EXISTS t_rb")
        .await
        .expect("drop");
    app.query_drop("CREATE TABLE t_rb (id BIGINT PRIMARY KEY, v INT)")
        .await
        .expect("create");
    for chunk in (1..=6000).collect::<Vec<i64>>().chunks(500) {
        let values: Vec<String> = chunk.iter().map(|k| format!("({k}, 0)")).collect();
        app.query_drop(format!("INSERT INTO t_rb VALUES {}", values.join(",")))
            .await
            .expect("load");
    }
    for n in 0..2 {
        let pool = c.direct(n);
        let mut conn = pool.get_conn().await.expect("direct");
        conn.query_drop("ANALYZE TABLE t_rb")
            .await
            .expect("analyze");
        drop(conn);
        pool.disconnect().await.ok();
    }
    let admin = format!("mysql://ops:ops@127.0.0.1:{}", p.admin_port.expect("admin"));
    let mut ops = mysql_async::Conn::new(mysql_async::Opts::from_url(&admin).expect("url"))
        .await
        .expect("operator login");

    // Balanced already.
    assert!(plan_of(&mut ops, "REBALANCE ALL DRY RUN").await.is_empty());
    // A third node of equal weight: its share, 341 slots, from both, in one range each,
    // from the most over-full first.
    ops.query_drop(format!("ADD NODE ds2 '{}'", c.url(2)))
        .await
        .expect("ADD NODE");
    let plan = plan_of(&mut ops, "REBALANCE TABLE t_rb DRY RUN").await;
    assert_eq!(plan.len(), 2, "{plan:?}");
    assert_eq!((plan[0].1.as_str(), plan[0].3), ("ds1", 171), "{plan:?}");
    assert_eq!((plan[1].1.as_str(), plan[1].3), ("ds0", 170), "{plan:?}");
    assert!(plan.iter().all(|m| m.2 == "ds2"), "{plan:?}");
    // Each statement runs as written, and its estimate is the statistics' share of the rows
    // those slots hold.
    for (stmt, from, _, _, est) in &plan {
        let range = stmt
            .strip_prefix("MIGRATE SLOTS ")
            .and_then(|r| r.split(' ').next())
            .expect("a slot range");
        let (a, b) = range.split_once('-').expect("a-b");
        let (a, b): (u16, u16) = (a.parse().expect("a"), b.parse().expect("b"));
        assert!(stmt.ends_with("OF t_rb TO ds2"), "{stmt}");
        let node = if from == "ds0" { 0 } else { 1 };
        let real = rows_in_slots(c, node, a, b).await as f64;
        let est: f64 = est.parse().expect("an estimate");
        assert!(
            (est - real).abs() <= real * 0.3,
            "{stmt}: estimated {est} rows, the slots hold {real}"
        );
    }
    // Weights: ds2 at 2 takes half.
    let t = std::fs::read_to_string(&path).expect("rules");
    let t = t.replace(
        &format!("ds2 = \"{}\"", c.url(2)),
        &format!("ds2 = {{ url = \"{}\", weight = 2 }}", c.url(2)),
    );
    assert!(t.contains("weight = 2"), "{t}");
    write_atomically(&path, &t.replace("version = 2", "version = 3"));
    wait_for_version(&p, 3).await;
    let plan = plan_of(&mut ops, "REBALANCE DRY RUN").await;
    assert_eq!(plan.iter().map(|m| m.3).sum::<usize>(), 512, "{plan:?}");
    // A node added with a weight of 0 is to hold nothing: the plan stays as it was.
    ops.query_drop(format!("ADD NODE ds3 '{}' WEIGHT 0", c.url(2)))
        .await
        .expect("ADD NODE ... WEIGHT 0");
    let t = std::fs::read_to_string(&path).expect("rules");
    assert!(
        t.contains(&format!("ds3 = {{ url = \"{}\", weight = 0 }}", c.url(2))),
        "{t}"
    );
    let again = plan_of(&mut ops, "REBALANCE DRY RUN").await;
    assert_eq!(again, plan, "a node of weight 0 changed the plan");
    common::expect_code(
        ops.query_drop(format!("ADD NODE ds5 '{}' WEIGHT -1", c.url(2)))
            .await,
        1235,
        "a negative weight",
    );
    // A drain: every slot of ds1 to the others, by their weights.
    let plan = plan_of(&mut ops, "DRAIN NODE ds1 DRY RUN").await;
    assert!(plan.iter().all(|m| m.1 == "ds1"), "{plan:?}");
    assert_eq!(plan.iter().map(|m| m.3).sum::<usize>(), 512, "{plan:?}");
    // A plan runs as slot migrations, which need a metadata schema: without one it is
    // refused, saying so.
    let (code, message) = common::server_error(ops.query_drop("REBALANCE").await);
    assert_eq!(code, 1235);
    assert!(message.contains("[metadata]"), "{message}");
    common::expect_code(
        ops.query_drop("DRAIN NODE ds9 DRY RUN").await,
        1235,
        "a drain of an unknown node",
    );
    drop(app);
}
