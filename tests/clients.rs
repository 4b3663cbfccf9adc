//! Real drivers and tools through the proxy (issue #3).
//!
//! `tests/clients/run.sh` runs each client's scripted session against the proxy and against a
//! plain MariaDB node and compares the transcripts; these tests start the nodes and a proxy
//! (TLS on, sharded tables for every client) and run it. The protocol features the drivers
//! rely on are also checked here directly with mysql_async: binary-protocol values,
//! multi-statement queries, COM_RESET_CONNECTION, COM_CHANGE_USER, TLS for clients and TLS
//! to nodes.
//!
//! Nodes 0 and 1 are the proxy's shards (slots 0-767 and 768-1023, so the sessions' ids 1-10
//! land on both); node 2 is the plain MariaDB the transcripts are compared with.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Row, SslOpts, Value};

const SHARDS: [usize; 2] = [0, 1];
const DIRECT: usize = 2;
const L2: [(u16, u16); 2] = [(0, 767), (768, 1023)];
/// The sharded tables of the client sessions (each client has its own): name, shard key, and
/// the column a sequence generates (AUTO_INCREMENT ids the sessions leave out).
const TABLES: &[(&str, &str, Option<&str>)] = &[
    ("t_dump", "id", None),
    ("t_dump_user", "id", None),
    ("t_cli", "id", None),
    ("t_pymysql", "id", None),
    ("t_pymysql_acct", "id", None),
    ("t_mysqlclient", "id", None),
    ("t_mysqlclient_tx", "id", None),
    ("t_mysqlclient_acct", "id", None),
    // SQLAlchemy's users and their orders, sharded alike (an order lives with its user).
    ("t_sqlalchemy_user", "id", None),
    ("t_sqlalchemy_order", "user_id", Some("id")),
    ("t_node", "id", None),
    ("t_java", "id", None),
    ("t_rust", "id", None),
    ("t_multi", "id", None),
    // sysbench's default AUTO_INCREMENT ids.
    ("sbtest1", "id", Some("id")),
    ("sbtest2", "id", Some("id")),
];

fn cluster() -> &'static Cluster {
    Cluster::shared(3)
}

/// A self-signed certificate for 127.0.0.1 / localhost, as PEM files in `dir`.
fn write_cert(dir: &Path) -> (PathBuf, PathBuf) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("generate a certificate");
    let cert = dir.join("server.pem");
    let key = dir.join("server.key");
    std::fs::write(&cert, ck.cert.pem()).expect("write cert");
    std::fs::write(&key, ck.key_pair.serialize_pem()).expect("write key");
    (cert, key)
}

/// A proxy over the two shard nodes with TLS on; the temp dir holds its certificate.
fn start(dir: &Path) -> Proxy {
    let (cert, key) = write_cert(dir);
    let mut tables = String::new();
    for &(t, column, generated) in TABLES {
        tables.push_str(&hash_slot_table(t, column, &L2));
        if let Some(g) = generated {
            tables.insert_str(
                tables.trim_end().len(),
                &format!("\nkey_generator = {{ column = \"{g}\", kind = \"sequence\" }}"),
            );
        }
    }
    let rules = rules_toml_on(cluster(), &SHARDS, &tables);
    let users = "users = [{ name = \"app\", password = \"app\" }]\n";
    assert!(
        rules.contains(users),
        "rules_toml_on changed its [server] lines"
    );
    let rules = rules.replacen(
        users,
        &format!(
            "{users}tls = {{ cert = {:?}, key = {:?} }}\n",
            cert.display().to_string(),
            key.display().to_string()
        ),
        1,
    );
    start_proxy_with_rules(rules)
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_client_runs_its_session_through_the_proxy_as_on_mariadb() {
    // The sessions' multi-row inserts (ids 1-6) reach both shards, and so do the Python
    // sessions' transactions (their transfer moves an amount from id 1 to id 2).
    let shards: std::collections::BTreeSet<usize> = (1..=6).map(|k| node_of_key(&L2, k)).collect();
    assert_eq!(shards.len(), 2);
    assert_ne!(node_of_key(&L2, 1), node_of_key(&L2, 2));
    let dir = tempfile::tempdir().expect("temp dir");
    let proxy = start(dir.path());
    let c = cluster();
    // CLIENTS_OUT keeps the transcripts somewhere that outlives the test (CI, debugging).
    let out = std::env::var_os("CLIENTS_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.path().join("transcripts"));
    let started = Instant::now();
    let status = Command::new(repo().join("tests/clients/run.sh"))
        .env("PROXY_HOST", "127.0.0.1")
        .env("PROXY_PORT", proxy.port.to_string())
        .env("PROXY_USER", "app")
        .env("PROXY_PASSWORD", "app")
        .env("PROXY_TLS", "1")
        .env("DIRECT_HOST", "127.0.0.1")
        .env("DIRECT_PORT", c.ports[DIRECT].to_string())
        .env("DIRECT_USER", "root")
        .env("DIRECT_PASSWORD", "root")
        .env("CLIENTS_DB", "shop")
        .env("CLIENTS_OUT", &out)
        .status()
        .expect("run tests/clients/run.sh");
    eprintln!(
        "tests/clients/run.sh took {:.1}s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        status.success(),
        "tests/clients/run.sh failed ({status}); its output above names the client and the difference"
    );
    // The transactions of these sessions wrote both shards: two-phase commits happened, and
    // none failed or ended in doubt.
    let ran = std::env::var("CLIENTS").unwrap_or_default();
    let ran: Vec<&str> = ran.split_whitespace().collect();
    let tx = |outcome: &str| {
        proxy
            .shared
            .metrics
            .transactions
            .with_label_values(&[outcome])
            .get()
    };
    eprintln!(
        "transactions through the proxy: commit {}, commit_xa {}, rollback {}, failed {}, unknown {}, rolled_back_by_error {}",
        tx("commit"),
        tx("commit_xa"),
        tx("rollback"),
        tx("failed"),
        tx("unknown"),
        tx("rolled_back_by_error")
    );
    let cross_node = ["pymysql", "mysqlclient", "sqlalchemy", "sysbench"];
    if ran.is_empty() || ran.iter().any(|c| cross_node.contains(c)) {
        assert!(
            tx("commit_xa") > 0,
            "no transaction committed in two phases"
        );
    }
    assert_eq!((tx("failed"), tx("unknown")), (0, 0));
}

fn opts(port: u16, user: &str, password: &str) -> OptsBuilder {
    OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some(user))
        .pass(Some(password))
        .db_name(Some("shop"))
}

fn proxy_opts(proxy: &Proxy) -> OptsBuilder {
    opts(proxy.port, "app", "app")
}

fn direct_opts() -> OptsBuilder {
    opts(cluster().ports[DIRECT], "root", "root")
}

/// The binary-protocol values of one row, read through `conn` with a prepared statement.
async fn typed_rows(conn: &mut Conn, table: &str) -> Vec<Vec<Value>> {
    let rows: Vec<Row> = conn
        .exec(
            format!("SELECT id, d, dt, t, b, n, u, f, dbl, y, dd FROM {table} WHERE id IN (?, ?) ORDER BY id"),
            (1u64, u64::MAX),
        )
        .await
        .expect("prepared select");
    rows.into_iter().map(Row::unwrap).collect()
}

async fn create_typed(conn: &mut Conn, table: &str) {
    conn.query_drop(format!("DROP TABLE IF EXISTS {table}"))
        .await
        .expect("drop");
    conn.query_drop(format!(
        "CREATE TABLE {table} (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, d DECIMAL(30,10), \
         dt DATETIME(6), t TIME(3), b BLOB, n VARCHAR(10), u BIGINT UNSIGNED, f FLOAT, \
         dbl DOUBLE, y YEAR, dd DATE)"
    ))
    .await
    .expect("create");
    let blob: Vec<u8> = (0..=255u8).chain(0..=255u8).collect();
    conn.exec_drop(
        format!("INSERT INTO {table} (id, d, dt, t, b, n, u, f, dbl, y, dd) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        vec![
            Value::UInt(1),
            Value::Bytes(b"-12345678901234567890.0123456789".to_vec()),
            Value::Date(2024, 2, 29, 23, 59, 58, 123_456),
            Value::Time(true, 1, 2, 3, 4, 567_000),
            Value::Bytes(blob),
            Value::NULL,
            Value::UInt(u64::MAX),
            Value::Float(1.5),
            Value::Double(-2.25e300),
            Value::Int(2155),
            Value::Date(1000, 1, 1, 0, 0, 0, 0),
            Value::UInt(u64::MAX),
            Value::NULL,
            Value::NULL,
            Value::NULL,
            Value::Bytes(Vec::new()),
            Value::Bytes("é".as_bytes().to_vec()),
            Value::UInt(0),
            Value::NULL,
            Value::NULL,
            Value::NULL,
            Value::NULL,
        ],
    )
    .await
    .expect("prepared multi-row insert");
}

#[tokio::test]
async fn binary_protocol_values_round_trip_exactly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let proxy = start(dir.path());
    let mut p = Conn::new(proxy_opts(&proxy)).await.expect("proxy");
    let mut d = Conn::new(direct_opts()).await.expect("direct");
    create_typed(&mut p, "t_rust").await;
    create_typed(&mut d, "t_rust").await;
    // The two rows are on different shards.
    assert_ne!(node_of_key(&L2, 1), node_of(&L2, &Value::UInt(u64::MAX)));
    let via_proxy = typed_rows(&mut p, "t_rust").await;
    let direct = typed_rows(&mut d, "t_rust").await;
    assert_eq!(via_proxy, direct);
    assert_eq!(via_proxy.len(), 2);
    let row = &via_proxy[0];
    assert_eq!(
        row[1],
        Value::Bytes(b"-12345678901234567890.0123456789".to_vec())
    );
    assert_eq!(row[2], Value::Date(2024, 2, 29, 23, 59, 58, 123_456));
    assert_eq!(row[3], Value::Time(true, 1, 2, 3, 4, 567_000));
    assert_eq!(row[4], Value::Bytes((0..=255u8).chain(0..=255u8).collect()));
    assert_eq!(row[5], Value::NULL);
    assert_eq!(row[6], Value::UInt(u64::MAX));
    assert_eq!(via_proxy[1][0], Value::UInt(u64::MAX));
    assert_eq!(via_proxy[1][1], Value::NULL);
    // Text protocol: the same values as text, and the same column metadata.
    let sql = "SELECT id, d, dt, t, b, n, u, f, dbl, y, dd FROM t_rust ORDER BY id";
    let pt: Vec<Row> = p.query(sql).await.expect("text via proxy");
    let dt: Vec<Row> = d.query(sql).await.expect("text direct");
    let meta = |rows: &[Row]| -> Vec<String> {
        rows[0]
            .columns_ref()
            .iter()
            .map(|c| {
                format!(
                    "{} {:?} {} {} {} {:?}",
                    c.name_str(),
                    c.column_type(),
                    c.character_set(),
                    c.column_length(),
                    c.decimals(),
                    c.flags()
                )
            })
            .collect()
    };
    assert_eq!(meta(&pt), meta(&dt));
    let vals = |rows: Vec<Row>| -> Vec<Vec<Value>> { rows.into_iter().map(Row::unwrap).collect() };
    assert_eq!(vals(pt), vals(dt));
    p.disconnect().await.ok();
    d.disconnect().await.ok();
}

#[tokio::test]
async fn a_multi_statement_query_answers_one_result_per_statement() {
    let dir = tempfile::tempdir().expect("temp dir");
    let proxy = start(dir.path());
    let mut p = Conn::new(proxy_opts(&proxy)).await.expect("proxy");
    p.query_drop(
        "DROP TABLE IF EXISTS t_multi; CREATE TABLE t_multi (id BIGINT PRIMARY KEY, v VARCHAR(10))",
    )
    .await
    .expect("DDL batch");
    let mut r = p
        .query_iter("INSERT INTO t_multi (id, v) VALUES (1, 'a'), (2, 'b'), (3, 'c'); SELECT COUNT(*) FROM t_multi; SELECT 'x;y' AS s; UPDATE t_multi SET v = 'z' WHERE id = 2")
        .await
        .expect("batch");
    let mut first_affected = None;
    let mut row_sets: Vec<Vec<Row>> = Vec::new();
    while !r.is_empty() {
        let rows: Vec<Row> = r.collect().await.expect("one result");
        first_affected.get_or_insert(r.affected_rows());
        if !rows.is_empty() {
            row_sets.push(rows);
        }
    }
    drop(r);
    // mysql_async folds an OK-only result that follows a result set into it, so the two row
    // sets and the effects of the two writes are what is checked.
    assert_eq!(first_affected, Some(3));
    assert_eq!(row_sets.len(), 2);
    assert_eq!(row_sets[0][0].get::<i64, _>(0), Some(3));
    assert_eq!(row_sets[1][0].get::<String, _>(0).as_deref(), Some("x;y"));
    let v: Option<String> = p
        .query_first("SELECT v FROM t_multi WHERE id = 2")
        .await
        .expect("read back");
    assert_eq!(
        v.as_deref(),
        Some("z"),
        "the last statement of the batch ran"
    );
    // An error ends the batch: the statements after it do not run.
    let e = p
        .query_drop("INSERT INTO t_multi (id, v) VALUES (4, 'd'); INSERT INTO t_multi (id, v) VALUES (1, 'dup'); INSERT INTO t_multi (id, v) VALUES (5, 'e')")
        .await;
    assert_eq!(server_error(e).0, 1062);
    let ids: Vec<i64> = p
        .query("SELECT id FROM t_multi ORDER BY id")
        .await
        .expect("ids");
    assert_eq!(ids, vec![1, 2, 3, 4]);
    // The connection is usable afterwards.
    let one: Option<i64> = p.query_first("SELECT 1").await.expect("after");
    assert_eq!(one, Some(1));
    p.disconnect().await.ok();
}

async fn session_state(c: &mut Conn) -> (Option<String>, Option<u64>, Option<String>) {
    c.query_first("SELECT @v, @@session.sql_select_limit, DATABASE()")
        .await
        .expect("session state")
        .expect("a row")
}

#[tokio::test]
async fn reset_connection_and_change_user_start_a_fresh_session() {
    let dir = tempfile::tempdir().expect("temp dir");
    let proxy = start(dir.path());
    let mut c = Conn::new(proxy_opts(&proxy)).await.expect("proxy");
    let fresh = session_state(&mut c).await;
    assert_eq!(fresh.0, None);
    c.query_drop("SET @v = 'kept?'").await.expect("user var");
    c.query_drop("SET SESSION sql_select_limit = 5")
        .await
        .expect("SET");
    let stmt = c.prep("SELECT ?").await.expect("prepare");
    assert_eq!(
        session_state(&mut c).await,
        (Some("kept?".into()), Some(5), Some("shop".into()))
    );
    c.reset().await.expect("COM_RESET_CONNECTION");
    assert_eq!(session_state(&mut c).await, fresh);
    // Prepared statements are gone after a reset (mysql_async re-prepares its cached ones).
    drop(stmt);

    c.query_drop("SET @v = 'again'").await.expect("user var");
    c.query_drop("BEGIN").await.expect("begin");
    c.change_user(
        mysql_async::ChangeUserOpts::default()
            .with_user(Some("app".into()))
            .with_pass(Some("app".into()))
            .with_db_name(Some("mysql".into())),
    )
    .await
    .expect("COM_CHANGE_USER");
    let after = session_state(&mut c).await;
    assert_eq!(after.0, None, "user variables are reset");
    assert_eq!(after.2.as_deref(), Some("mysql"));
    // A wrong password is refused (and the connection is over, as with MySQL).
    let bad = c
        .change_user(
            mysql_async::ChangeUserOpts::default()
                .with_user(Some("app".into()))
                .with_pass(Some("wrong".into())),
        )
        .await;
    assert!(bad.is_err(), "a wrong password in COM_CHANGE_USER");
}

#[tokio::test]
async fn tls_clients_and_plain_clients_are_both_served() {
    let dir = tempfile::tempdir().expect("temp dir");
    let proxy = start(dir.path());
    let ssl = SslOpts::default()
        .with_danger_accept_invalid_certs(true)
        .with_danger_skip_domain_validation(true);
    let mut t = Conn::new(proxy_opts(&proxy).ssl_opts(Some(ssl)))
        .await
        .expect("TLS connection to the proxy");
    let big = "x".repeat(100_000);
    let back: Option<String> = t
        .exec_first("SELECT ?", (big.clone(),))
        .await
        .expect("a large value over TLS");
    assert_eq!(back.as_deref(), Some(big.as_str()));
    let mut p = Conn::new(Opts::from(proxy_opts(&proxy)))
        .await
        .expect("plain connection to the same proxy");
    let one: Option<i64> = p.query_first("SELECT 1").await.expect("plain");
    assert_eq!(one, Some(1));
    t.disconnect().await.ok();
    p.disconnect().await.ok();
    // A proxy without TLS refuses an SSLRequest with a clear error.
    let plain = start_proxy_on(cluster(), &SHARDS, "");
    let ssl = SslOpts::default().with_danger_accept_invalid_certs(true);
    let e = Conn::new(proxy_opts(&plain).ssl_opts(Some(ssl))).await;
    assert!(e.is_err(), "TLS against a proxy without [server] tls");
}

#[tokio::test]
async fn node_connections_use_tls_when_the_node_url_asks_for_it() {
    // The node of this second proxy is the first proxy, which speaks TLS (and whose
    // certificate is self-signed): with require_ssl=true mysql_async refuses a server that
    // does not offer TLS, so an answer proves the node connection is encrypted.
    let dir = tempfile::tempdir().expect("temp dir");
    let front = start(dir.path());
    let url = format!(
        "mysql://app:app@127.0.0.1:{}/shop?require_ssl=true&verify_ca=false&verify_identity=false",
        front.port
    );
    let rules = format!(
        "version = 1\ndefault_node = \"ds0\"\n\n[server]\nlisten = \"127.0.0.1:0\"\n\
         users = [{{ name = \"app\", password = \"app\" }}]\n\n[nodes]\nds0 = \"{url}\"\n"
    );
    let outer = start_proxy_with_rules(rules);
    let mut c = Conn::new(proxy_opts(&outer)).await.expect("outer proxy");
    let v: Option<String> = c
        .exec_first("SELECT CONCAT(?, 'b')", ("a",))
        .await
        .expect("a statement over a TLS node connection");
    assert_eq!(v.as_deref(), Some("ab"));
    c.disconnect().await.ok();
    // The same node without TLS configured refuses such a URL's connections cleanly.
    let plain = start_proxy_on(cluster(), &SHARDS, "");
    let url = format!(
        "mysql://app:app@127.0.0.1:{}/shop?require_ssl=true&verify_ca=false",
        plain.port
    );
    let rules = format!(
        "version = 1\ndefault_node = \"ds0\"\n\n[server]\nlisten = \"127.0.0.1:0\"\n\
         users = [{{ name = \"app\", password = \"app\" }}]\n\n[nodes]\nds0 = \"{url}\"\n"
    );
    let outer = start_proxy_with_rules(rules);
    let r = async {
        let mut c = Conn::new(proxy_opts(&outer)).await?;
        c.query_drop("SELECT 1").await?;
        c.disconnect().await
    }
    .await;
    let (code, message) = server_error(r);
    assert_eq!(code, 1105, "{message}");
    assert!(message.contains("SSL"), "{message}");
}

/// A client speaking the protocol packet by packet, for the commands drivers send that
/// mysql_async has no call for.
struct Raw {
    io: shardproxy::packet::PacketIo<tokio::net::TcpStream>,
}

impl Raw {
    /// Connects and logs in with caching_sha2_password in the first response (the way MySQL 8
    /// drivers do): the proxy must answer "fast auth OK" (0x01 0x03), then OK.
    async fn login(port: u16, password: &str) -> (Raw, Vec<u8>) {
        use mysql_common::constants::CapabilityFlags as C;
        use mysql_common::packets::{AuthPlugin, HandshakePacket, HandshakeResponse};
        use mysql_common::proto::MySerialize;
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        let mut raw = Raw {
            io: shardproxy::packet::PacketIo::new(stream, 64 << 20),
        };
        let hs = raw.read().await;
        let hp: HandshakePacket<'_> = mysql_common::io::ParseBuf(&hs)
            .parse(())
            .expect("handshake");
        let scramble =
            mysql_common::scramble::scramble_sha256(&hp.nonce(), password.as_bytes()).unwrap();
        let caps = C::CLIENT_PROTOCOL_41
            | C::CLIENT_SECURE_CONNECTION
            | C::CLIENT_PLUGIN_AUTH
            | C::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
            | C::CLIENT_CONNECT_WITH_DB
            | C::CLIENT_MULTI_STATEMENTS
            | C::CLIENT_MULTI_RESULTS
            | C::CLIENT_LONG_PASSWORD
            | C::CLIENT_TRANSACTIONS;
        let resp = HandshakeResponse::new(
            Some(&scramble[..]),
            (5, 7, 0),
            Some(&b"app"[..]),
            Some(&b"shop"[..]),
            Some(AuthPlugin::CachingSha2Password),
            caps,
            None,
            16 << 20,
        );
        let mut b = Vec::new();
        resp.serialize(&mut b);
        raw.io.write(&b);
        raw.io.flush().await.expect("send response");
        let first = raw.read().await;
        (raw, first)
    }

    async fn read(&mut self) -> Vec<u8> {
        self.io
            .read()
            .await
            .expect("read a packet")
            .expect("the proxy closed the connection")
    }

    async fn command(&mut self, cmd: u8, body: &[u8]) {
        self.io.set_seq(0);
        let mut p = vec![cmd];
        p.extend_from_slice(body);
        self.io.write(&p);
        self.io.flush().await.expect("send a command");
    }

    /// Reads packets up to and including the next EOF (0xFE, short) or ERR.
    async fn until_eof(&mut self) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        loop {
            let p = self.read().await;
            let end = (p.first() == Some(&0xFE) && p.len() < 9) || p.first() == Some(&0xFF);
            v.push(p);
            if end {
                return v;
            }
        }
    }
}

/// The status flags of an OK packet.
fn ok_status(p: &[u8]) -> u16 {
    assert_eq!(p.first(), Some(&0x00), "not an OK packet: {p:?}");
    use mysql_common::io::ReadMysqlExt;
    let mut rest = &p[1..];
    rest.read_lenenc_int().expect("affected rows");
    rest.read_lenenc_int().expect("insert id");
    u16::from_le_bytes([rest[0], rest[1]])
}

#[tokio::test]
async fn field_list_stmt_reset_set_option_and_caching_sha2_on_the_wire() {
    const MORE: u16 = 0x0008; // SERVER_MORE_RESULTS_EXISTS
    let dir = tempfile::tempdir().expect("temp dir");
    let proxy = start(dir.path());

    let (_bad, first) = Raw::login(proxy.port, "wrong").await;
    assert_eq!(
        first.first(),
        Some(&0xFF),
        "a wrong sha2 scramble is refused"
    );
    let (mut raw, first) = Raw::login(proxy.port, "app").await;
    assert_eq!(first, vec![0x01, 0x03], "fast auth OK");
    assert_eq!(raw.read().await.first(), Some(&0x00), "then OK");

    // Two statements in one COM_QUERY: two OKs, the first flagged "more results".
    raw.command(
        0x03,
        b"DROP TABLE IF EXISTS t_raw; CREATE TABLE t_raw (id INT PRIMARY KEY, v VARCHAR(8) DEFAULT 'x')",
    )
    .await;
    let a = raw.read().await;
    assert_ne!(ok_status(&a) & MORE, 0);
    let b = raw.read().await;
    assert_eq!(ok_status(&b) & MORE, 0);

    // COM_FIELD_LIST: the table's column definitions, then EOF.
    raw.command(0x04, b"t_raw\0").await;
    let defs = raw.until_eof().await;
    let names: Vec<String> = defs[..defs.len() - 1]
        .iter()
        .map(|d| {
            let c: mysql_common::packets::Column = mysql_common::io::ParseBuf(d)
                .parse(())
                .expect("a column definition");
            c.name_str().into_owned()
        })
        .collect();
    assert_eq!(names, vec!["id", "v"]);

    // COM_STMT_RESET drops the long data sent before it.
    raw.command(0x16, b"SELECT ? AS a").await;
    let prep = raw.read().await;
    assert_eq!(prep[0], 0x00, "prepare OK: {prep:?}");
    let id = [prep[1], prep[2], prep[3], prep[4]];
    raw.until_eof().await; // parameter definitions
    raw.until_eof().await; // column definitions
    let mut long = id.to_vec();
    long.extend_from_slice(&[0, 0]);
    long.extend_from_slice(b"abc");
    raw.command(0x18, &long).await; // COM_STMT_SEND_LONG_DATA: no answer
    raw.command(0x1A, &id).await; // COM_STMT_RESET
    assert_eq!(raw.read().await.first(), Some(&0x00));
    let mut exec = id.to_vec();
    exec.extend_from_slice(&[0, 1, 0, 0, 0]); // flags, iteration count
    exec.extend_from_slice(&[0, 1, 0xFD, 0]); // null bitmap, new-params-bound, VAR_STRING
    exec.extend_from_slice(b"\x02zz");
    raw.command(0x17, &exec).await;
    let head = raw.until_eof().await; // column count, definition, EOF
    assert_eq!(head.len(), 3, "{head:?}");
    let rows = raw.until_eof().await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows[0].ends_with(b"\x02zz"), "{:?}", rows[0]);

    // COM_SET_OPTION: multi-statements off, answered with EOF; a batch is then one statement
    // (an error from the node), and the connection stays usable.
    raw.command(0x1B, &[1, 0]).await;
    assert_eq!(raw.read().await.first(), Some(&0xFE));
    raw.command(0x03, b"SELECT 1; SELECT 2").await;
    assert_eq!(raw.read().await.first(), Some(&0xFF));
    raw.command(0x1B, &[7, 0]).await;
    assert_eq!(raw.read().await.first(), Some(&0xFF), "unknown option");
    raw.command(0x99, b"").await;
    assert_eq!(raw.read().await.first(), Some(&0xFF), "unknown command");
    raw.command(0x11, b"\xff").await;
    assert_eq!(
        raw.read().await.first(),
        Some(&0xFF),
        "malformed COM_CHANGE_USER"
    );
    raw.command(0x17, &[1, 0]).await;
    assert_eq!(
        raw.read().await.first(),
        Some(&0xFF),
        "truncated COM_STMT_EXECUTE"
    );
    raw.command(0x0E, b"").await;
    assert_eq!(
        raw.read().await.first(),
        Some(&0x00),
        "COM_PING after errors"
    );
    raw.command(0x01, b"").await;
}

/// TLS can be required: with `tls = { ..., require = true }` a plain client gets MySQL's
/// 3159 before it logs in, on the admin listener too, while TLS clients are served; a user
/// with `require_tls = true` logs in only over TLS (1045 in plain), on a proxy where TLS is
/// optional for others.
#[tokio::test]
async fn tls_can_be_required_of_a_listener_or_of_a_user() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (cert, key) = write_cert(dir.path());
    let users = "users = [{ name = \"app\", password = \"app\" }]\n";
    let tls = |require: bool| {
        format!(
            "tls = {{ cert = {:?}, key = {:?}, require = {require} }}\n",
            cert.display().to_string(),
            key.display().to_string()
        )
    };
    let ssl = || {
        SslOpts::default()
            .with_danger_accept_invalid_certs(true)
            .with_danger_skip_domain_validation(true)
    };
    let rules = rules_toml_on(cluster(), &SHARDS, "").replacen(
        users,
        &format!(
            "{users}{}\n[admin]\nlisten = \"127.0.0.1:0\"\nusers = [{{ name = \"ops\", password = \"ops\" }}]\n\n",
            tls(true)
        ),
        1,
    );
    let strict = start_proxy_with_rules(rules.replacen("\n\n[admin]", "\n[admin]", 1));
    let e = Conn::new(Opts::from(proxy_opts(&strict)))
        .await
        .expect_err("a plain client where TLS is required");
    assert!(e.to_string().contains("3159"), "{e}");
    let mut t = Conn::new(proxy_opts(&strict).ssl_opts(Some(ssl())))
        .await
        .expect("a TLS client where TLS is required");
    let one: Option<i64> = t.query_first("SELECT 1").await.expect("served");
    assert_eq!(one, Some(1));
    t.disconnect().await.ok();
    let admin_port = strict.admin_port.expect("the admin listener");
    let admin = |ssl: Option<SslOpts>| {
        OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(admin_port)
            .user(Some("ops"))
            .pass(Some("ops"))
            .ssl_opts(ssl)
    };
    let e = Conn::new(admin(None))
        .await
        .expect_err("a plain operator where TLS is required");
    assert!(e.to_string().contains("3159"), "{e}");
    Conn::new(admin(Some(ssl())))
        .await
        .expect("an operator over TLS")
        .disconnect()
        .await
        .ok();

    // TLS required of one user only.
    let rules = rules_toml_on(cluster(), &SHARDS, "").replacen(
        users,
        &format!(
            "users = [{{ name = \"app\", password = \"app\" }}, {{ name = \"sec\", password = \"sec\", require_tls = true }}]\n{}",
            tls(false)
        ),
        1,
    );
    let lax = start_proxy_with_rules(rules);
    let sec = |ssl: Option<SslOpts>| {
        proxy_opts(&lax)
            .user(Some("sec"))
            .pass(Some("sec"))
            .ssl_opts(ssl)
    };
    let e = Conn::new(sec(None))
        .await
        .expect_err("a TLS-only user in plain");
    assert!(e.to_string().contains("1045"), "{e}");
    Conn::new(sec(Some(ssl())))
        .await
        .expect("the TLS-only user over TLS")
        .disconnect()
        .await
        .ok();
    Conn::new(Opts::from(proxy_opts(&lax)))
        .await
        .expect("another user in plain")
        .disconnect()
        .await
        .ok();
}
