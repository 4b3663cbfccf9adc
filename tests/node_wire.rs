//! The proxy's own node client (`shardproxy::node`) against a real MariaDB node: handshake
//! over TCP, the unix socket and TLS, both protocols, a node's skipped metadata, long data,
//! several results, reading what was left unread, reset, and a connection killed under it.

mod common;

use common::{block_on, Cluster};
use mysql_common::value::Value;
use shardproxy::node::conn::decode;
use shardproxy::node::stream::Tls;
use shardproxy::node::{Conn, ConnectOpts, Head, RowEvent, WireError};

fn cluster() -> &'static Cluster {
    Cluster::shared(1)
}

fn opts() -> ConnectOpts {
    ConnectOpts {
        host: "127.0.0.1".into(),
        port: cluster().ports[0],
        socket: None,
        user: "root".into(),
        pass: Some("root".into()),
        db: Some("shop".into()),
        tls: None,
        found_rows: false,
        timeout_ms: Default::default(),
        read_only: false,
    }
}

async fn connect() -> Conn {
    Conn::connect(&opts()).await.expect("connect to the node")
}

/// Every row of the current result set, decoded, up to its end.
async fn rows(conn: &mut Conn, head: Head, binary: bool) -> Vec<Vec<Option<Value>>> {
    let Head::Rows(cols) = head else {
        panic!("expected rows, got {head:?}");
    };
    let mut out = Vec::new();
    loop {
        match conn.read_row().await.expect("read a row") {
            RowEvent::Row(p) => out.push(decode(p, &cols, binary).expect("decode a row")),
            RowEvent::End(_) => return out,
        }
    }
}

fn bytes(s: &str) -> Option<Value> {
    Some(Value::Bytes(s.as_bytes().to_vec()))
}

#[test]
fn text_and_prepared_statements_answer_alike() {
    block_on(async {
        let mut c = connect().await;
        let head = c
            .query("SELECT 1 AS a, NULL AS b, 'x' AS c")
            .await
            .expect("query");
        assert_eq!(
            rows(&mut c, head, false).await,
            vec![vec![bytes("1"), Some(Value::NULL), bytes("x")]]
        );
        let mut stmt = c
            .prepare("SELECT ? + 1 AS a, CONCAT('v', ?) AS b")
            .await
            .expect("prepare");
        assert_eq!(stmt.params.len(), 2);
        assert_eq!(stmt.columns.len(), 2);
        // Twice: the second answer leaves the columns out (MariaDB's metadata cache), and the
        // rows must still decode against the statement's columns.
        assert!(
            c.caches_metadata(),
            "MariaDB offers MARIADB_CLIENT_CACHE_METADATA"
        );
        for i in 0..2i64 {
            let head = c
                .execute(&mut stmt, &[Value::Int(i), Value::Int(i)])
                .await
                .expect("execute");
            let got = rows(&mut c, head, true).await;
            assert_eq!(got.len(), 1);
            assert_eq!(got[0][1], bytes(&format!("v{i}")));
            assert_eq!(got[0][0], Some(Value::Int(i + 1)));
        }
        // An OK answer.
        let head = c.query("DO 1").await.expect("DO");
        assert!(matches!(head, Head::Ok(_)), "{head:?}");
        // A server error leaves the connection usable.
        let e = c.query("SELECT * FROM no_such_table").await.unwrap_err();
        assert!(matches!(&e, WireError::Server { code: 1146, .. }), "{e:?}");
        assert!(!e.breaks());
        c.ping().await.expect("ping after a server error");
    });
}

#[test]
fn a_wrong_password_is_the_nodes_own_error() {
    block_on(async {
        let mut o = opts();
        o.pass = Some("wrong".into());
        let Err(e) = Conn::connect(&o).await else {
            panic!("a wrong password was accepted");
        };
        assert!(matches!(&e, WireError::Server { code: 1045, .. }), "{e:?}");
    });
}

#[test]
fn the_unix_socket_and_tls_connect() {
    block_on(async {
        let mut o = opts();
        o.socket = Some(
            cluster()
                .dir
                .join("node0/sock")
                .to_string_lossy()
                .into_owned(),
        );
        let mut c = Conn::connect(&o).await.expect("connect over the socket");
        let head = c.query("SELECT DATABASE()").await.expect("query");
        assert_eq!(rows(&mut c, head, false).await, vec![vec![bytes("shop")]]);

        // TLS, accepting the node's self-signed certificate as the URL says.
        let url = format!(
            "mysql://root:root@127.0.0.1:{}/shop?require_ssl=true&verify_ca=false",
            cluster().ports[0]
        );
        let url_opts = mysql_async::Opts::from_url(&url).expect("url");
        let mut o = opts();
        o.tls = Tls::of(&url_opts).await.expect("TLS settings");
        assert!(o.tls.is_some());
        let mut c = Conn::connect(&o).await.expect("connect with TLS");
        let head = c
            .query("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            .await
            .expect("query");
        let got = rows(&mut c, head, false).await;
        let cipher = match &got[0][1] {
            Some(Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("{other:?}"),
        };
        assert!(!cipher.is_empty(), "the connection is not encrypted");

        // Verified against the built-in roots, the self-signed certificate is refused.
        let url = format!(
            "mysql://root:root@127.0.0.1:{}/shop?require_ssl=true",
            cluster().ports[0]
        );
        let mut o = opts();
        o.tls = Tls::of(&mysql_async::Opts::from_url(&url).expect("url"))
            .await
            .expect("TLS settings");
        let Err(e) = Conn::connect(&o).await else {
            panic!("an unverifiable node certificate was accepted");
        };
        assert!(e.breaks(), "{e:?}");
    });
}

#[test]
fn parameters_past_a_packet_go_as_long_data() {
    block_on(async {
        let mut c = connect().await;
        let mut stmt = c
            .prepare("SELECT LENGTH(?), LENGTH(?), MD5(?) = MD5(REPEAT('a', 9437184))")
            .await
            .expect("prepare");
        // 3 x 9 MiB: more than one 16 MiB packet, so each goes as COM_STMT_SEND_LONG_DATA.
        let big = Value::Bytes(vec![b'a'; 9 << 20]);
        let head = c
            .execute(&mut stmt, &[big.clone(), big.clone(), big])
            .await
            .expect("execute");
        let got = rows(&mut c, head, true).await;
        assert_eq!(
            got,
            vec![vec![
                Some(Value::Int(9 << 20)),
                Some(Value::Int(9 << 20)),
                Some(Value::Int(1))
            ]]
        );
    });
}

#[test]
fn several_results_and_what_is_left_unread() {
    block_on(async {
        let mut c = connect().await;
        c.query_drop("DROP PROCEDURE IF EXISTS wire_two")
            .await
            .expect("drop");
        c.query_drop("CREATE PROCEDURE wire_two() BEGIN SELECT 1; SELECT 2, 3; END")
            .await
            .expect("create");
        let head = c.query("CALL wire_two()").await.expect("call");
        let Head::Rows(cols) = head else {
            panic!("{head:?}")
        };
        assert_eq!(cols.len(), 1);
        assert!(matches!(c.read_row().await, Ok(RowEvent::Row(_))));
        let RowEvent::End(end) = c.read_row().await.expect("end") else {
            panic!("a second row")
        };
        assert!(end.more());
        let head = c.next_head(None).await.expect("second result");
        assert_eq!(
            rows(&mut c, head, false).await,
            vec![vec![bytes("2"), bytes("3")]]
        );
        // The CALL's own OK closes it.
        let head = c.next_head(None).await.expect("the CALL's OK");
        let Head::Ok(ok) = head else {
            panic!("{head:?}")
        };
        assert!(!ok.more());

        // Stop reading midway: the next command reads the rest first.
        let head = c
            .query("SELECT seq FROM seq_1_to_10000")
            .await
            .expect("query");
        assert!(matches!(head, Head::Rows(_)));
        assert!(matches!(c.read_row().await, Ok(RowEvent::Row(_))));
        let head = c.query("SELECT 7").await.expect("next query");
        assert_eq!(rows(&mut c, head, false).await, vec![vec![bytes("7")]]);
        assert!(c.is_clean());
    });
}

#[test]
fn reset_forgets_the_session() {
    block_on(async {
        let mut c = connect().await;
        c.query_drop("SET @wire = 5").await.expect("set");
        c.query_drop("USE mysql").await.expect("use");
        let stmt = c.prepare("SELECT 1").await.expect("prepare");
        c.reset().await.expect("reset");
        // The database stays (the pools put their connections back on the URL's).
        let head = c.query("SELECT DATABASE()").await.expect("query");
        assert_eq!(rows(&mut c, head, false).await, vec![vec![bytes("mysql")]]);
        let head = c.query("SELECT @wire").await.expect("query");
        assert_eq!(
            rows(&mut c, head, false).await,
            vec![vec![Some(Value::NULL)]]
        );
        let mut stale = stmt;
        let e = c.execute(&mut stale, &[]).await.unwrap_err();
        assert!(matches!(&e, WireError::Server { code: 1243, .. }), "{e:?}");
    });
}

#[test]
fn a_killed_connection_is_broken() {
    block_on(async {
        let mut victim = connect().await;
        let mut killer = connect().await;
        killer
            .query_drop(&format!("KILL {}", victim.id()))
            .await
            .expect("kill");
        // The node may answer the next command with an error before it closes, or just
        // close; the kill takes effect soon after KILL returns.
        let mut failed = false;
        for _ in 0..100 {
            if victim.query_drop("SELECT 1").await.is_err() {
                failed = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(failed, "a killed connection kept answering");
        let e = victim.ping().await.unwrap_err();
        assert!(e.breaks(), "{e:?}");
        assert!(victim.is_broken());
        assert!(!victim.alive());
    });
}

#[tokio::test]
async fn a_statement_sent_ahead_of_an_execute_in_one_write() {
    use shardproxy::node::conn::Ahead;
    let mut conn = connect().await;
    let mut stmt = conn.prepare("SELECT ? + 1").await.expect("prepare");
    // The first succeeds: the execute's result follows, inside the transaction it opened.
    let Some(Ahead::Ran(head)) = conn
        .query_then_execute("BEGIN", &mut stmt, &[Value::Int(41)])
        .await
        .expect("sent")
    else {
        panic!("no result")
    };
    let head = head.expect("execute");
    assert_eq!(
        rows(&mut conn, head, true).await,
        vec![vec![Some(Value::Int(42))]]
    );
    assert!(conn
        .status()
        .contains(mysql_common::constants::StatusFlags::SERVER_STATUS_IN_TRANS));
    conn.query_drop("ROLLBACK").await.expect("rollback");
    // The first fails: its error, the execute's answer left to drain, the connection usable.
    let Some(Ahead::FirstFailed(e)) = conn
        .query_then_execute("XA END 'never-started'", &mut stmt, &[Value::Int(1)])
        .await
        .expect("sent")
    else {
        panic!("the first statement did not fail")
    };
    assert!(matches!(e, WireError::Server { .. }), "{e}");
    conn.drain().await.expect("drain the execute's answer");
    let head = conn.query("SELECT 7").await.expect("usable");
    assert_eq!(rows(&mut conn, head, false).await.len(), 1);
}
