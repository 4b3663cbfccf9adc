//! Pool hygiene: a node connection goes back to its pool as clean as it was taken, or is
//! reset first. One session changes the state of its node connections in every way a
//! client can (plain SETs, SETs in executable comments, prepared SETs, stacked statements,
//! SQL-level prepared statements, a compound statement, a procedure's CALL, temporary
//! tables, named locks, an open transaction, USE); sessions of another user that take the
//! same node connections afterwards (each node's pool holds one) see exactly what they saw
//! before it. Its own test binary: a cluster of two nodes of its own.

mod common;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::Value;

const L2: [(u16, u16); 2] = [(0, 511), (512, 1023)];

/// What a session sees of its node connection's state, read on the node by a point read.
const STATE: &str = "SELECT @@session.time_zone, @@session.sql_mode, @@character_set_client, \
     @@character_set_results, @@session.tx_isolation, @@autocommit, @@max_statement_time, \
     @hyg, @hyg2, DATABASE(), (SELECT COUNT(*) FROM t_hyg) FROM t_hyg WHERE user_id = ?";

/// One way to change a session's state: statements, `?` ones run prepared with the value.
struct Form {
    name: &'static str,
    steps: &'static [(&'static str, Option<&'static str>)],
}

const FORMS: &[Form] = &[
    Form {
        name: "plain SETs and USE",
        steps: &[
            ("SET time_zone = '+03:00'", None),
            ("SET sql_mode = 'ANSI_QUOTES'", None),
            ("SET NAMES latin1", None),
            ("SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE", None),
            ("SET max_statement_time = 5", None),
            ("SET @hyg = 42", None),
            ("SELECT @hyg2 := 7", None),
            ("USE mysql", None),
        ],
    },
    Form {
        name: "SETs in executable comments",
        steps: &[
            ("/*!40101 SET time_zone = '+03:00' */", None),
            ("/*!40101 SET sql_mode = 'ANSI_QUOTES' */", None),
            ("/*!40101 SET NAMES latin1 */", None),
            ("/*!40101 SET @hyg = 42 */", None),
            ("/*!40101 SET character_set_results = NULL */", None),
        ],
    },
    Form {
        name: "prepared SETs",
        steps: &[
            ("SET time_zone = ?", Some("+03:00")),
            ("SET sql_mode = ?", Some("ANSI_QUOTES")),
            ("SET @hyg = ?", Some("42")),
            ("SELECT @hyg2 := ?", Some("7")),
        ],
    },
    Form {
        name: "stacked statements",
        steps: &[(
            "SELECT 1; SET time_zone = '+03:00'; SET @hyg = 42; SET sql_mode = 'ANSI_QUOTES'; SELECT 2",
            None,
        )],
    },
    Form {
        name: "SQL-level prepared statements",
        steps: &[
            ("EXECUTE IMMEDIATE 'SET time_zone = ''+03:00'''", None),
            ("PREPARE s_hyg FROM 'SET sql_mode = ''ANSI_QUOTES'''", None),
            ("EXECUTE s_hyg", None),
        ],
    },
    Form {
        name: "a compound statement",
        steps: &[(
            "BEGIN NOT ATOMIC SET time_zone = '+03:00'; SET @hyg = 42; SET sql_mode = 'ANSI_QUOTES'; END",
            None,
        )],
    },
    Form {
        name: "a procedure's CALL",
        steps: &[("CALL p_hyg()", None)],
    },
    Form {
        name: "temporary tables, named locks, an open transaction",
        steps: &[
            ("CREATE TEMPORARY TABLE tmp_hyg (x INT)", None),
            ("SELECT GET_LOCK('hyg_lock', 0)", None),
            ("SET autocommit = 0", None),
            ("INSERT INTO t_hyg VALUES (999001, 'left open')", None),
            ("INSERT INTO t_hyg VALUES (999002, 'left open')", None),
        ],
    },
];

/// What a session of user `other` sees on every node, and of the temporary table and lock.
async fn seen(proxy: &Proxy, keys: &[i64]) -> Vec<String> {
    let url = format!("mysql://other:other@127.0.0.1:{}/shop", proxy.port);
    let opts = mysql_async::Opts::from_url(&url).expect("URL");
    let mut b = mysql_async::Conn::new(opts)
        .await
        .expect("connect as other");
    let mut out = Vec::new();
    for k in keys {
        let row: Option<mysql_async::Row> = b.exec_first(STATE, (k,)).await.expect("state");
        let row = row.expect("a row");
        let values: Vec<String> = (0..row.len())
            .map(|i| match row.as_ref(i) {
                Some(Value::NULL) | None => "NULL".to_string(),
                Some(Value::Bytes(x)) => String::from_utf8_lossy(x).into_owned(),
                Some(v) => format!("{v:?}"),
            })
            .collect();
        out.push(values.join(" | "));
    }
    let tmp = b.query_drop("SELECT COUNT(*) FROM tmp_hyg").await;
    out.push(format!(
        "tmp_hyg: {:?}",
        tmp.map_err(|e| match e {
            mysql_async::Error::Server(s) => s.code,
            _ => 0,
        })
    ));
    let free: Option<i64> = b
        .query_first("SELECT IS_FREE_LOCK('hyg_lock')")
        .await
        .expect("IS_FREE_LOCK");
    out.push(format!("hyg_lock free: {free:?}"));
    b.disconnect().await.ok();
    out
}

/// The tests here share a cluster; one changes its nodes' global sql_mode.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn connections_go_back_as_clean_as_they_came() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::shared(2);
    let rules = rules_toml(c, &hash_slot_table("t_hyg", "user_id", &L2))
        .replace("/shop\"", "/shop?pool_min=1&pool_max=1\"")
        .replace(
            "users = [{ name = \"app\", password = \"app\" }]",
            "users = [{ name = \"app\", password = \"app\" }, { name = \"other\", password = \"other\" }]",
        );
    assert!(rules.contains("\"other\""));
    let proxy = start_proxy_with_rules(rules);
    let keys = [key_on_node(&L2, 0), key_on_node(&L2, 1)];
    block_on(async move {
        let mut setup = proxy.conn().await;
        for sql in [
            "DROP TABLE IF EXISTS t_hyg",
            "CREATE TABLE t_hyg (user_id BIGINT PRIMARY KEY, v VARCHAR(20))",
            "DROP PROCEDURE IF EXISTS p_hyg",
            "CREATE PROCEDURE p_hyg() BEGIN SET time_zone = '+03:00'; \
             SET sql_mode = 'ANSI_QUOTES'; SET @hyg = 42; CREATE TEMPORARY TABLE tmp_hyg (x INT); END",
        ] {
            setup.query_drop(sql).await.expect(sql);
        }
        setup
            .exec_drop(
                "INSERT INTO t_hyg VALUES (?, 'a'), (?, 'b')",
                (keys[0], keys[1]),
            )
            .await
            .expect("rows");
        setup.disconnect().await.ok();
        let before = seen(&proxy, &keys).await;
        assert!(
            before[0].contains("SYSTEM") && !before[0].contains("ANSI_QUOTES"),
            "{before:?}"
        );

        // What the proxy tracks itself (its SETs replayed, USE, prepared handles, reads,
        // writes, transactions) never passes for a change of the node's: the connections
        // go on serving other sessions without a reset.
        let mut plain = proxy.conn().await;
        let one_node = format!("UPDATE t_hyg SET v = 'a' WHERE user_id = {}", keys[0]);
        for sql in [
            "SET NAMES utf8mb4",
            "SET time_zone = '+01:00'",
            "USE shop",
            "UPDATE t_hyg SET v = 'c' WHERE v = 'a'",
            "BEGIN",
            one_node.as_str(),
            "COMMIT",
            "SELECT COUNT(*) FROM t_hyg",
        ] {
            plain.query_drop(sql).await.expect(sql);
        }
        for k in keys {
            let _: Option<String> = plain
                .exec_first("SELECT v FROM t_hyg WHERE user_id = ?", (k,))
                .await
                .expect("prepared read");
        }
        plain.disconnect().await.ok();
        let pinned = proxy
            .shared
            .metrics
            .pins
            .with_label_values(&["session_state"])
            .get();
        assert_eq!(
            pinned, 0,
            "plain statements were taken for changes of state"
        );

        for form in FORMS {
            let mut a = proxy.conn().await;
            let mut refused = Vec::new();
            for (sql, param) in form.steps {
                let r = match param {
                    Some(v) => a.exec_drop(*sql, (*v,)).await,
                    None => a.query_drop(*sql).await,
                };
                // The proxy may refuse a form (1235), as long as what it runs stays clean.
                if let Err(e) = r {
                    refused.push(format!("{sql}: {e}"));
                }
            }
            // The session goes on: a read on every node by key, then it leaves.
            for k in keys {
                let _: Option<String> = a
                    .exec_first("SELECT v FROM t_hyg WHERE user_id = ?", (k,))
                    .await
                    .unwrap_or(None);
            }
            a.disconnect().await.ok();
            let after = seen(&proxy, &keys).await;
            assert_eq!(
                after, before,
                "after {} (refused: {refused:?}), a session of another user saw another state",
                form.name
            );
        }
    });
}

/// Nodes whose global sql_mode reads backslashes as plain characters: a session that never
/// set its own mode is read the same way, from its first statement (the proxy reads the
/// default node's mode when it starts). `'\'` is then a whole string; read with escapes it
/// would run on past the quote.
#[test]
fn sessions_start_in_the_nodes_sql_mode() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let c = Cluster::shared(2);
    /// Puts the nodes' global sql_mode back, also when the test fails.
    struct Restore(Vec<(mysql_async::Pool, String)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let modes = std::mem::take(&mut self.0);
            block_on(async move {
                for (pool, mode) in modes {
                    if let Ok(mut conn) = pool.get_conn().await {
                        let _ = conn.exec_drop("SET GLOBAL sql_mode = ?", (mode,)).await;
                    }
                }
            });
        }
    }
    let mut restore = Restore(Vec::new());
    for i in 0..2 {
        let pool = c.direct(i);
        let p = pool.clone();
        let mode = block_on(async move {
            let mut conn = p.get_conn().await.expect("a node");
            let mode: Option<String> = conn
                .query_first("SELECT @@GLOBAL.sql_mode")
                .await
                .expect("sql_mode");
            conn.query_drop(
                "SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',NO_BACKSLASH_ESCAPES')",
            )
            .await
            .expect("SET GLOBAL");
            mode.unwrap_or_default()
        });
        restore.0.push((pool, mode));
    }
    let proxy = start_proxy(c, &hash_slot_table("t_hyg_mode", "user_id", &L2));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !proxy.shared.base_mode().no_backslash_escapes {
        assert!(
            std::time::Instant::now() < deadline,
            "the proxy did not read the nodes' sql_mode"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let keys = [key_on_node(&L2, 0), key_on_node(&L2, 1)];
    block_on(async move {
        let mut conn = proxy.conn().await;
        for sql in [
            "DROP TABLE IF EXISTS t_hyg_mode",
            "CREATE TABLE t_hyg_mode (user_id BIGINT PRIMARY KEY, v VARCHAR(20))",
        ] {
            conn.query_drop(sql).await.expect(sql);
        }
        conn.query_drop(format!(
            "INSERT INTO t_hyg_mode VALUES ({}, '\\'), ({}, 'x')",
            keys[0], keys[1]
        ))
        .await
        .expect("rows, one a backslash");
        // A key read after the string: with escapes it would be inside it, and the
        // statement scattered or refused.
        let n: Option<i64> = conn
            .query_first(format!(
                "SELECT COUNT(*) FROM t_hyg_mode WHERE v = '\\' OR user_id = {}",
                keys[1]
            ))
            .await
            .expect("read in the nodes' mode");
        assert_eq!(n, Some(2));
        let v: Option<String> = conn
            .query_first(format!(
                "SELECT v FROM t_hyg_mode WHERE v = '\\' AND user_id = {}",
                keys[0]
            ))
            .await
            .expect("a point read by a key after the string");
        assert_eq!(v.as_deref(), Some("\\"));
        conn.disconnect().await.ok();
    });
    drop(restore);
}
