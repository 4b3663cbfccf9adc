//! Node connections and client connections: pools carrying nothing between clients, INSERT without a column list, connections given back between statements, sequence keys, max_connections, KILL, hang-ups, password hashes.

use super::*;

/// A client's node connections go back to their node's pool when it leaves, reset: the next
/// client that gets the same connection finds none of the last one's session state. Past the
/// URL's `pool_max` a statement waits, then fails naming the node.
#[test]
fn pooled_node_connections_carry_nothing_between_clients() {
    let c = cluster();
    block_on(async {
        let mut direct = c.direct(0).get_conn().await.expect("node 0");
        direct
            .query_drop("CREATE TABLE IF NOT EXISTS pool_probe (id INT PRIMARY KEY)")
            .await
            .expect("create pool_probe");
    });
    let rules = rules_toml(c, "").replace("/shop\"", "/shop?pool_min=1&pool_max=1\"");
    let proxy = start_proxy_with_rules(rules);
    block_on(async move {
        // `pool_probe` is in no rule: the default node, ds0, answers.
        let mut a = proxy.conn().await;
        a.query_drop("SELECT * FROM pool_probe")
            .await
            .expect("a reads");
        a.query_drop("SET @leak = 42").await.expect("a sets");
        // Between statements a session holds no connection: in a transaction it keeps one.
        a.query_drop("BEGIN").await.expect("a begins");
        a.query_drop("SELECT * FROM pool_probe")
            .await
            .expect("a reads in its transaction");
        let id_a: Option<u64> = a
            .query_first("SELECT @@pseudo_thread_id")
            .await
            .expect("a's node connection");

        let mut b = proxy.conn().await;
        let started = std::time::Instant::now();
        let (code, message) = server_error(b.query_drop("SELECT * FROM pool_probe").await);
        assert_eq!(code, 1105, "{message}");
        assert!(
            message.contains("ds0") && message.contains("in use"),
            "{message}"
        );
        assert!(started.elapsed() >= std::time::Duration::from_secs(4));

        a.disconnect().await.expect("a leaves");
        // The connection is reset in the background, then idle in the pool.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while proxy.shared.backends.pool_usage(0) != Some((0, 1)) {
            assert!(
                std::time::Instant::now() < deadline,
                "the connection did not go back to the pool: {:?}",
                proxy.shared.backends.pool_usage(0)
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        b.query_drop("SELECT * FROM pool_probe")
            .await
            .expect("b reads once a left");
        let id_b: Option<u64> = b
            .query_first("SELECT @@pseudo_thread_id")
            .await
            .expect("b's node connection");
        assert_eq!(id_a, id_b, "the pool's one connection was not reused");
        let leak: Option<Option<i64>> = b.query_first("SELECT @leak").await.expect("b reads @leak");
        assert_eq!(leak, Some(None), "a's user variable reached b");
        let db: Option<String> = b.query_first("SELECT DATABASE()").await.expect("db");
        assert_eq!(db.as_deref(), Some("shop"));
    });
}

/// `INSERT INTO t VALUES (...)` without a column list, as loaders and dump files write it:
/// rows go to their key's node (a multi-row INSERT split by node), REPLACE / IGNORE / ON
/// DUPLICATE KEY UPDATE and prepared statements too; a row of the wrong width gets MySQL's
/// 1136; after an ALTER through the proxy the new column order is used at once.
#[test]
fn inserts_without_a_column_list_reach_their_keys_node() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_nocols"));
    block_on(async move {
        let mut conn = proxy.conn().await;
        conn.query_drop("DROP TABLE IF EXISTS t_nocols")
            .await
            .expect("drop");
        conn.query_drop(
            "CREATE TABLE t_nocols (id INT NOT NULL, user_id BIGINT NOT NULL, v VARCHAR(20), PRIMARY KEY (user_id, id))",
        )
        .await
        .expect("create");
        let keys = spread_keys(2, 40);
        // One multi-row INSERT over all four nodes, the way mysqldump writes it.
        let rows: Vec<String> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| format!("({i},{k},'v{i}')"))
            .collect();
        let r = conn
            .query_iter(format!("INSERT INTO `t_nocols` VALUES {}", rows.join(",")))
            .await
            .expect("multi-row insert without columns");
        assert_eq!(r.affected_rows(), keys.len() as u64);
        drop(r);
        for node in 0..NODES {
            let got = direct_rows(c, node, "t_nocols").await;
            let mut want: Vec<(i64, String)> = keys
                .iter()
                .enumerate()
                .filter(|(_, k)| node_of_key(&L, **k) == node)
                .map(|(i, k)| (*k, format!("v{i}")))
                .collect();
            want.sort();
            assert_eq!(got, want, "node {node}");
        }
        // Prepared, REPLACE, IGNORE, ON DUPLICATE KEY UPDATE.
        let k = keys[1];
        conn.exec_drop("INSERT INTO t_nocols VALUES (?, ?, ?)", (100, k, "p"))
            .await
            .expect("prepared insert");
        conn.query_drop(format!("REPLACE INTO t_nocols VALUES (100, {k}, 'r')"))
            .await
            .expect("replace");
        conn.query_drop(format!(
            "INSERT IGNORE INTO t_nocols VALUES (100, {k}, 'ignored')"
        ))
        .await
        .expect("insert ignore");
        conn.query_drop(format!(
            "INSERT INTO t_nocols VALUES (100, {k}, 'x') ON DUPLICATE KEY UPDATE v = CONCAT(v, '+')"
        ))
        .await
        .expect("on duplicate key update");
        let v: Option<String> = conn
            .exec_first(
                "SELECT v FROM t_nocols WHERE user_id = ? AND id = 100",
                (k,),
            )
            .await
            .expect("read back");
        assert_eq!(v.as_deref(), Some("r+"));

        let (code, message) = server_error(
            conn.query_drop(format!(
                "INSERT INTO t_nocols VALUES (1, {k}, 'a'), (2, {k})"
            ))
            .await,
        );
        assert_eq!(code, 1136, "{message}");
        assert!(message.contains("row 2"), "{message}");
        // The connection stays usable, and a new column is seen right after the ALTER.
        conn.query_drop("ALTER TABLE t_nocols ADD COLUMN w INT NOT NULL DEFAULT 0")
            .await
            .expect("alter");
        conn.query_drop(format!("INSERT INTO t_nocols VALUES (200, {k}, 'w', 7)"))
            .await
            .expect("insert with the new column");
        let w: Option<i64> = conn
            .exec_first(
                "SELECT w FROM t_nocols WHERE user_id = ? AND id = 200",
                (k,),
            )
            .await
            .expect("read w");
        assert_eq!(w, Some(7));
    });
}

/// The nodes of a table must agree on its columns before an INSERT without a column list is
/// routed by position.
#[test]
fn inserts_without_a_column_list_refuse_nodes_that_disagree() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_nocols_split"));
    block_on(async move {
        for node in 0..NODES {
            let (_pool, mut d) = direct_conn(c, node).await;
            d.query_drop("DROP TABLE IF EXISTS t_nocols_split")
                .await
                .expect("drop");
            let cols = if node == 2 {
                "v VARCHAR(20), user_id BIGINT NOT NULL PRIMARY KEY"
            } else {
                "user_id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20)"
            };
            d.query_drop(format!("CREATE TABLE t_nocols_split ({cols})"))
                .await
                .expect("create");
        }
        let mut conn = proxy.conn().await;
        let (code, message) = server_error(
            conn.query_drop("INSERT INTO t_nocols_split VALUES (1, 'a')")
                .await,
        );
        assert_eq!(code, 1235, "{message}");
        assert!(
            message.contains("disagree") && message.contains("ds2"),
            "{message}"
        );
        conn.query_drop("INSERT INTO t_nocols_split (user_id, v) VALUES (1, 'a')")
            .await
            .expect("with a column list it still works");
    });
}

/// Between statements outside a transaction a session keeps no node connection: each goes
/// back to its pool and serves other sessions, with none of this session's SETs on them.
#[test]
fn sessions_give_back_node_connections_between_statements() {
    let c = cluster();
    let rules =
        rules_toml(c, &sharded("t_mux")).replace("/shop\"", "/shop?pool_min=1&pool_max=1\"");
    let proxy = start_proxy_with_rules(rules);
    block_on(async move {
        let mut a = proxy.conn().await;
        a.query_drop("CREATE TABLE IF NOT EXISTS t_mux (user_id BIGINT PRIMARY KEY, v VARCHAR(8))")
            .await
            .expect("create");
        // A statement on every node: afterwards the session holds none.
        for node in 0..NODES {
            let k = key_on_node(&L, node);
            a.exec_drop("SELECT v FROM t_mux WHERE user_id = ?", (k,))
                .await
                .expect("point read");
        }
        // Connections go back once the answer is written, so the client may see its answer
        // a moment before the pool sees the connection: wait for it, within a bound.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let held: usize = (0..NODES)
                .map(|n| proxy.shared.backends.pool_usage(n).unwrap_or((0, 0)).0)
                .sum();
            if held == 0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{held} node connections still in use 5 s after four point reads"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }

        // A session SET lands on a connection; once a moves on, the next session that takes
        // that connection gets it without a's SET. a runs on ds0 first, so the SET and
        // the read of the node connection's id (`@@pseudo_thread_id`: CONNECTION_ID() is the
        // proxy's) run there.
        a.exec_drop(
            "SELECT v FROM t_mux WHERE user_id = ?",
            (key_on_node(&L, 0),),
        )
        .await
        .expect("read on ds0");
        a.query_drop("SET SESSION sql_mode = 'ANSI_QUOTES'")
            .await
            .expect("set");
        let id_a: Option<u64> = a
            .query_first("SELECT @@pseudo_thread_id")
            .await
            .expect("a's connection");
        let mode_a: Option<String> = a.query_first("SELECT @@sql_mode").await.expect("mode");
        assert_eq!(mode_a.as_deref(), Some("ANSI_QUOTES"));
        // a moves to a node other than the default one, which gives ds0's connection back.
        let k = key_on_node(&L, 1);
        a.exec_drop("SELECT v FROM t_mux WHERE user_id = ?", (k,))
            .await
            .expect("read on ds1");
        let mut b = proxy.conn().await;
        let id_b: Option<u64> = b
            .query_first("SELECT @@pseudo_thread_id")
            .await
            .expect("b's connection");
        assert_eq!(id_a, id_b, "ds0's one connection went from a to b");
        let mode_b: Option<String> = b.query_first("SELECT @@sql_mode").await.expect("mode");
        assert!(
            !mode_b.unwrap_or_default().contains("ANSI_QUOTES"),
            "a's SET reached b"
        );
        // And a, back on ds0, finds its SET again (on ds0's one connection, which a's read
        // waits for while b's session gives it back).
        b.disconnect().await.expect("b leaves");
        let mode_a: Option<String> = a.query_first("SELECT @@sql_mode").await.expect("mode");
        assert_eq!(mode_a.as_deref(), Some("ANSI_QUOTES"));
    });
}

/// AUTO_INCREMENT shard keys: `key_generator = { kind = "sequence" }` gives small ids from a
/// sequence row on a node, reserved in blocks per proxy. Two proxies never give the same id,
/// ids start past the rows already there, each row lands on its id's node, LAST_INSERT_ID()
/// and the OK packet name the first id, and a NULL key (or no column at all) is generated.
#[test]
fn auto_increment_keys_come_from_a_sequence_shared_by_proxies() {
    let c = cluster();
    let table = hash_slot_table("t_auto", "id", &L).trim_end().to_string()
        + "\nkey_generator = { column = \"id\", kind = \"sequence\", block = 5 }\n";
    let rules = rules_toml(c, &table);
    let p1 = start_proxy_with_rules(rules.clone());
    let p2 = start_proxy_with_rules(rules);
    block_on(async move {
        let mut a = p1.conn().await;
        a.query_drop("DROP TABLE IF EXISTS t_auto")
            .await
            .expect("drop");
        a.query_drop(
            "CREATE TABLE t_auto (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10))",
        )
        .await
        .expect("create");
        // A row already there (a restored dump): the sequence starts after it.
        let (_pool, mut d) = direct_conn(c, node_of_key(&L, 20)).await;
        d.query_drop("INSERT INTO t_auto VALUES (20, 'old')")
            .await
            .expect("direct insert");
        let r = a
            .query_iter("INSERT INTO t_auto (v) VALUES ('a'), ('b'), ('c')")
            .await
            .expect("insert without the key");
        assert_eq!(r.affected_rows(), 3);
        assert_eq!(
            r.last_insert_id(),
            Some(21),
            "the OK packet names the first id"
        );
        drop(r);
        let first: Option<u64> = a
            .query_first("SELECT LAST_INSERT_ID()")
            .await
            .expect("LAST_INSERT_ID");
        assert_eq!(first, Some(21));

        // The second proxy reserves its own block; a NULL key without a column list.
        let mut b = p2.conn().await;
        b.query_drop("INSERT INTO t_auto VALUES (NULL, 'x')")
            .await
            .expect("NULL key through the other proxy");
        let xid: Option<u64> = b
            .query_first("SELECT LAST_INSERT_ID()")
            .await
            .expect("LAST_INSERT_ID");
        assert_eq!(xid, Some(26), "past the first proxy's block of 5");
        // The first proxy finishes its block, then takes the next one.
        a.exec_drop(
            "INSERT INTO t_auto (v) VALUES (?), (?), (?)",
            ("d", "e", "f"),
        )
        .await
        .expect("prepared insert without the key");

        let rows: Vec<(i64, String)> = a
            .query("SELECT id, v FROM t_auto ORDER BY id")
            .await
            .expect("read back");
        let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
        // 24 and 25 were drawn by the planning that found the block short: skipped, never
        // reused (gaps, as AUTO_INCREMENT has).
        assert_eq!(ids, vec![20, 21, 22, 23, 26, 31, 32, 33]);
        for (id, _) in &rows {
            let node = node_of_key(&L, *id);
            let (_pool, mut d) = direct_conn(c, node).await;
            let here: Option<i64> = d
                .exec_first("SELECT COUNT(*) FROM t_auto WHERE id = ?", (id,))
                .await
                .expect("direct count");
            assert_eq!(here, Some(1), "id {id} is on its node {node}");
        }
    });
}

/// Past `[server] max_connections` a client gets MySQL's 1040 instead of the handshake; a
/// client leaving makes room again.
#[test]
fn clients_past_max_connections_get_1040() {
    let c = cluster();
    let rules = rules_toml(c, "").replace(
        "users = [{ name = \"app\", password = \"app\" }]",
        "users = [{ name = \"app\", password = \"app\" }]\nmax_connections = 2",
    );
    let proxy = start_proxy_with_rules(rules);
    block_on(async move {
        let opts = || mysql_async::Opts::from_url(&proxy.url("shop")).expect("url");
        let mut a = Conn::new(opts()).await.expect("first client");
        let b = Conn::new(opts()).await.expect("second client");
        let (code, message) = server_error(Conn::new(opts()).await);
        assert_eq!(code, 1040, "{message}");
        a.query_drop("SELECT 1")
            .await
            .expect("the first still works");
        b.disconnect().await.expect("second leaves");
        // The slot is given back when its session ends.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut third = loop {
            match Conn::new(opts()).await {
                Ok(conn) => break conn,
                Err(e) => {
                    assert!(std::time::Instant::now() < deadline, "no room again: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
        };
        third.query_drop("SELECT 1").await.expect("served");
    });
}

#[tokio::test]
async fn a_split_insert_returning_answers_in_values_order() {
    let c = cluster();
    let proxy = start_proxy(c, &sharded("t_ret"));
    let mut conn = proxy.conn().await;
    conn.query_drop("CREATE TABLE t_ret (user_id BIGINT PRIMARY KEY, v VARCHAR(8))")
        .await
        .expect("create");
    // Keys on nodes 3, 0, 2, 0, 1, 3: the nodes answer in another order.
    let mut used = [0usize; 4];
    let keys: Vec<i64> = [3, 0, 2, 0, 1, 3]
        .iter()
        .map(|n| {
            used[*n] += 1;
            keys_on_node(&L, *n, 2)[used[*n] - 1]
        })
        .collect();
    let values: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("({k}, 'r{i}')"))
        .collect();
    let sql = format!(
        "INSERT INTO t_ret (user_id, v) VALUES {} RETURNING user_id, v",
        values.join(", ")
    );
    let rows: Vec<(i64, String)> = conn.query(&sql).await.expect("INSERT ... RETURNING");
    let want: Vec<(i64, String)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (*k, format!("r{i}")))
        .collect();
    assert_eq!(
        rows, want,
        "RETURNING rows in VALUES order, as from one MariaDB"
    );
    // Prepared, too.
    conn.query_drop("DELETE FROM t_ret").await.expect("delete");
    let marks = vec!["(?, ?)"; keys.len()].join(", ");
    let params: Vec<mysql_async::Value> = keys
        .iter()
        .enumerate()
        .flat_map(|(i, k)| [(*k).into(), format!("r{i}").into()])
        .collect();
    let rows: Vec<(i64, String)> = conn
        .exec(
            format!("INSERT INTO t_ret (user_id, v) VALUES {marks} RETURNING user_id, v"),
            params,
        )
        .await
        .expect("prepared INSERT ... RETURNING");
    assert_eq!(rows, want);
}

/// A client that hangs up while its statement runs (the process killed) gets that statement
/// stopped on its node, not left to run out there.
#[tokio::test]
async fn a_client_that_hangs_up_mid_statement_has_its_node_statement_killed() {
    let c = cluster();
    let proxy = start_proxy(c, "");
    let mut node0 = c.direct(0).get_conn().await.expect("node 0");
    let running = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP(30) AS hangup_probe%'";
    let mut client = tokio::process::Command::new("mariadb")
        .arg("-h127.0.0.1")
        .arg(format!("-P{}", proxy.port))
        .args([
            "-uapp",
            "-papp",
            "shop",
            "-e",
            "SELECT SLEEP(30) AS hangup_probe",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run the mariadb client");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let n: Option<i64> = node0.query_first(running).await.expect("processlist");
        if n == Some(1) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the statement never reached ds0"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.kill().await.expect("kill the client");
    let hung_up = std::time::Instant::now();
    loop {
        let n: Option<i64> = node0.query_first(running).await.expect("processlist");
        if n == Some(0) {
            break;
        }
        assert!(
            hung_up.elapsed() < Duration::from_secs(5),
            "ds0 still runs the statement of a client gone {:?} ago",
            hung_up.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(proxy.shared.metrics.hangups.get(), 1);
}

#[tokio::test]
async fn kill_stops_the_proxys_own_sessions_never_a_nodes_connection() {
    let c = cluster();
    let rules = rules_toml(c, &sharded("t_kill")).replace(
        "users = [{ name = \"app\", password = \"app\" }]",
        "users = [{ name = \"app\", password = \"app\" }, { name = \"other\", password = \"other\" }]",
    );
    let proxy = start_proxy_with_rules(rules);
    let mut a = proxy.conn().await;
    let mut b = proxy.conn().await;
    let a_id = a.id();
    assert_ne!(a_id, b.id());
    // CONNECTION_ID() is the id KILL takes, the handshake's, text or prepared, whichever
    // node connection the statement ran on.
    a.query_drop("CREATE TABLE IF NOT EXISTS t_kill (user_id BIGINT PRIMARY KEY, v INT)")
        .await
        .expect("create");
    for node in 0..NODES {
        let k = key_on_node(&L, node);
        a.query_drop(format!("REPLACE INTO t_kill VALUES ({k}, {node})"))
            .await
            .expect("a row on the node");
        let text: Option<(u32, i64)> = a
            .query_first(format!(
                "SELECT CONNECTION_ID(), v FROM t_kill WHERE user_id = {k}"
            ))
            .await
            .expect("CONNECTION_ID()");
        assert_eq!(
            text,
            Some((a_id, node as i64)),
            "CONNECTION_ID() on ds{node}"
        );
    }
    let prepared: Option<u32> = a
        .exec_first("SELECT connection_id() + ?", (0,))
        .await
        .expect("prepared CONNECTION_ID()");
    assert_eq!(prepared, Some(a_id));
    // KILL QUERY: a's running statement stops on its node, a's connection goes on.
    let sleeping = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let r: Result<Option<i64>, _> = a.query_first("SELECT SLEEP(30)").await;
        (a, r, started.elapsed())
    });
    // Once the SLEEP runs on a node (its processlist shows it), not after a guessed pause.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    'running: loop {
        for n in 0..NODES {
            let (_pool, mut direct) = direct_conn(c, n).await;
            let running: Option<i64> = direct
                .query_first(
                    "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(30)'",
                )
                .await
                .expect("processlist");
            if running.unwrap_or(0) > 0 {
                break 'running;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the SLEEP never ran on a node"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    b.query_drop(format!("KILL QUERY {a_id}"))
        .await
        .expect("KILL QUERY");
    let (mut a, r, took) = sleeping.await.expect("a");
    assert!(
        took < Duration::from_secs(10),
        "the killed query ran {took:?}"
    );
    // MariaDB answers a killed SLEEP with 1 (interrupted) or error 1317.
    match r {
        Ok(v) => assert_eq!(v, Some(1), "SLEEP interrupted"),
        Err(e) => assert!(e.to_string().contains("1317"), "{e}"),
    }
    let one: Option<i64> = a.query_first("SELECT 1").await.expect("a goes on");
    assert_eq!(one, Some(1));
    // Ids the proxy does not know, and sessions of other users, are refused as MySQL does.
    expect_code(b.query_drop("KILL 4000000").await, 1094, "an unknown id");
    let mut other = mysql_async::Conn::new(
        mysql_async::Opts::from_url(&format!(
            "mysql://other:other@127.0.0.1:{}/shop",
            proxy.port
        ))
        .expect("url"),
    )
    .await
    .expect("other user");
    expect_code(
        other.query_drop(format!("KILL {a_id}")).await,
        1095,
        "another user's session",
    );
    // KILL (CONNECTION): a's session ends.
    b.query_drop(format!("KILL CONNECTION {a_id}"))
        .await
        .expect("KILL CONNECTION");
    // No wait: once KILL has answered, a's next statement fails.
    assert!(
        a.query_drop("SELECT 1").await.is_err(),
        "a killed session still answers"
    );
    // A session killing itself is told so and closed.
    let b_id = b.id();
    expect_code(
        b.query_drop(format!("KILL {b_id}")).await,
        1927,
        "KILL of itself",
    );
    assert!(b.query_drop("SELECT 1").await.is_err());
}

#[tokio::test]
async fn a_user_given_by_its_password_hash_logs_in() {
    use sha1::{Digest, Sha1};
    let c = cluster();
    let hash: Vec<u8> = Sha1::digest(Sha1::digest(b"only-a-hash")).to_vec();
    let hex: String = hash.iter().map(|b| format!("{b:02X}")).collect();
    let rules = rules_toml(c, &sharded("t_hash_user")).replace(
        "users = [{ name = \"app\", password = \"app\" }]",
        &format!("users = [{{ name = \"app\", password_hash = \"*{hex}\" }}]"),
    );
    let proxy = start_proxy_with_rules(rules);
    let url = |pw: &str| format!("mysql://app:{pw}@127.0.0.1:{}/shop", proxy.port);
    let mut conn =
        mysql_async::Conn::new(mysql_async::Opts::from_url(&url("only-a-hash")).unwrap())
            .await
            .expect("the right password");
    let one: Option<i64> = conn.query_first("SELECT 1").await.expect("query");
    assert_eq!(one, Some(1));
    let wrong = mysql_async::Conn::new(mysql_async::Opts::from_url(&url("nope")).unwrap()).await;
    match wrong {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1045),
        other => panic!("a wrong password logged in or failed oddly: {other:?}"),
    }
}
