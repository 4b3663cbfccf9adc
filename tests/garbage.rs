//! Garbage from a client: after a real login, thousands of random and cut-off packets
//! (COM_QUERY bytes, COM_STMT_EXECUTE bodies for a prepared statement, long data, unknown
//! commands, COM_FIELD_LIST, COM_SET_OPTION). Each gets a MySQL answer, the connection stays
//! usable, and the proxy keeps serving others: no panic, no hang.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;
use mysql_async::prelude::Queryable;
use mysql_common::io::ParseBuf;
use mysql_common::packets::HandshakePacket;
use mysql_common::proto::MyDeserialize;

const L2: [(u16, u16); 2] = [(0, 511), (512, 1023)];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A raw MySQL client: packets in and out, nothing interpreted.
struct Raw {
    s: TcpStream,
    seq: u8,
}

impl Raw {
    fn read(&mut self) -> Vec<u8> {
        let mut head = [0u8; 4];
        self.s
            .read_exact(&mut head)
            .expect("a packet header (the proxy hung up or hung)");
        let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
        self.seq = head[3].wrapping_add(1);
        let mut body = vec![0u8; len];
        self.s.read_exact(&mut body).expect("a packet body");
        body
    }

    fn write(&mut self, payload: &[u8]) {
        let len = payload.len();
        let mut p = vec![len as u8, (len >> 8) as u8, (len >> 16) as u8, self.seq];
        p.extend_from_slice(payload);
        self.s.write_all(&p).expect("write a packet");
        self.seq = self.seq.wrapping_add(1);
    }

    /// A command: sequence 0.
    fn command(&mut self, payload: &[u8]) {
        self.seq = 0;
        self.write(payload);
    }

    /// Reads one whole answer: OK, ERR, or a result set (without CLIENT_DEPRECATE_EOF: two
    /// EOFs, or an ERR in the rows), or a prepare answer. Returns its first byte.
    fn answer(&mut self) -> u8 {
        let first = self.read();
        match first.first() {
            Some(0x00) if first.len() >= 12 && first.len() < 16 => {
                // COM_STMT_PREPARE_OK: params and columns follow, each list with an EOF.
                let params = u16::from_le_bytes([first[5], first[6]]);
                let cols = u16::from_le_bytes([first[7], first[8]]);
                for n in [params, cols] {
                    if n > 0 {
                        for _ in 0..=n {
                            self.read();
                        }
                    }
                }
                0x00
            }
            Some(&b @ (0x00 | 0xFF)) => b,
            Some(0xFE) if first.len() < 9 => 0xFE,
            _ => {
                // Column count, columns, EOF, rows, EOF (or ERR).
                loop {
                    let p = self.read();
                    if p.first() == Some(&0xFE) && p.len() < 9 {
                        break;
                    }
                }
                loop {
                    let p = self.read();
                    if matches!(p.first(), Some(0xFF)) || (p.first() == Some(&0xFE) && p.len() < 9)
                    {
                        break;
                    }
                }
                0x01
            }
        }
    }
}

fn login(port: u16) -> Raw {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut raw = Raw { s, seq: 0 };
    let greeting = raw.read();
    let hs = HandshakePacket::deserialize((), &mut ParseBuf(&greeting)).expect("greeting");
    let nonce = hs.nonce();
    let scramble = mysql_common::scramble::scramble_native(&nonce, b"app").expect("scramble");
    // PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH | CONNECT_WITH_DB | TRANSACTIONS |
    // MULTI_RESULTS.
    let caps: u32 = 0x0200 | 0x8000 | 0x0008_0000 | 0x0008 | 0x2000 | 0x0002_0000;
    let mut p = Vec::new();
    p.extend_from_slice(&caps.to_le_bytes());
    p.extend_from_slice(&(16u32 << 20).to_le_bytes());
    p.push(45);
    p.extend_from_slice(&[0u8; 23]);
    p.extend_from_slice(b"app\0");
    p.push(20);
    p.extend_from_slice(&scramble);
    p.extend_from_slice(b"shop\0");
    p.extend_from_slice(b"mysql_native_password\0");
    raw.write(&p);
    let ok = raw.read();
    assert_eq!(ok.first(), Some(&0x00), "login: {ok:?}");
    raw
}

#[tokio::test]
async fn random_packets_get_answers_and_leave_the_connection_usable() {
    let c = Cluster::shared(2);
    let proxy = start_proxy(c, &hash_slot_table("t_garbage", "id", &L2));
    let mut setup = proxy.conn().await;
    setup
        .query_drop("CREATE TABLE t_garbage (id BIGINT PRIMARY KEY, v VARCHAR(16))")
        .await
        .expect("create");
    let port = proxy.port;
    let checked = tokio::task::spawn_blocking(move || {
        let mut raw = login(port);
        // A statement to execute with random parameter blocks.
        let mut prep = vec![0x16];
        prep.extend_from_slice(b"SELECT v FROM t_garbage WHERE id = ? AND v <> ?");
        raw.command(&prep);
        assert_eq!(raw.answer(), 0x00, "prepare");
        let mut rng = Rng(0x6a7b_a9e0_0001_0002);
        let mut answers = [0usize; 256];
        for i in 0..2000 {
            let n = rng.below(64);
            let body = rng.bytes(n);
            let payload: Vec<u8> = match i % 7 {
                // COM_QUERY with random bytes (rarely valid SQL).
                0 => [&[0x03u8][..], &body].concat(),
                // COM_STMT_EXECUTE of statement 1, random flags and parameter block.
                1 | 2 => [&[0x17u8, 1, 0, 0, 0][..], &body].concat(),
                // COM_STMT_EXECUTE of an unknown statement.
                3 => [&[0x17u8][..], &body].concat(),
                // COM_FIELD_LIST, COM_SET_OPTION with random arguments.
                4 => [&[0x04u8][..], &body].concat(),
                5 => [&[0x1Bu8][..], &body[..body.len().min(2)]].concat(),
                // Commands the proxy does not know.
                _ => {
                    let cmd = [
                        0x05u8, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0D, 0x0F, 0x10, 0x1D, 0x20, 0x7F,
                        0xFF,
                    ][rng.below(13)];
                    [&[cmd][..], &body].concat()
                }
            };
            raw.command(&payload);
            answers[usize::from(raw.answer())] += 1;
            // COM_STMT_SEND_LONG_DATA has no answer: some of it before the next execute.
            if i % 11 == 0 {
                let mut ld = vec![0x18, 1, 0, 0, 0];
                let n = rng.below(10);
                ld.extend_from_slice(&rng.bytes(n));
                raw.command(&ld);
            }
        }
        // Still usable: a valid query answers rows.
        raw.command(b"\x03SELECT 1");
        assert_eq!(raw.answer(), 0x01, "SELECT 1 after the garbage");
        answers
    })
    .await
    .expect("the garbage client");
    assert!(checked[0xFF] > 700, "errors: {}", checked[0xFF]);
    // Other clients were served all along.
    let one: Option<i64> = setup.query_first("SELECT 1").await.expect("another client");
    assert_eq!(one, Some(1));
}

#[tokio::test]
#[cfg_attr(
    not(feature = "test-hooks"),
    ignore = "needs a test hook: cargo test --features test-hooks (scripts/test.sh)"
)]
async fn a_panic_under_one_client_ends_that_client_only_with_an_error() {
    let c = Cluster::shared(2);
    let rules = rules_toml(c, &hash_slot_table("t_garbage2", "id", &L2));
    let proxy = ProxyProcess::start(&rules, &[("SHARDPROXY_TEST_PANIC", "1")]);
    let pool = proxy.pool();
    let mut bystander = pool.get_conn().await.expect("bystander");
    let mut victim = pool.get_conn().await.expect("victim");
    let r = victim.query_drop("/* shardproxy: test panic */").await;
    let (code, message) = server_error(r);
    assert_eq!(code, 1105, "{message}");
    assert!(message.contains("internal error"), "{message}");
    assert!(
        victim.query_drop("SELECT 1").await.is_err(),
        "the connection is closed"
    );
    // The proxy and its other clients go on.
    let one: Option<i64> = bystander.query_first("SELECT 1").await.expect("bystander");
    assert_eq!(one, Some(1));
    let mut fresh = pool.get_conn().await.expect("a new client");
    let one: Option<i64> = fresh.query_first("SELECT 1").await.expect("a new client");
    assert_eq!(one, Some(1));
}

#[tokio::test]
async fn an_idle_client_and_an_oversized_packet_are_disconnected_with_mysqls_errors() {
    let c = Cluster::shared(2);
    let rules = rules_toml(c, &hash_slot_table("t_garbage3", "id", &L2)).replace(
        "users = [{ name = \"app\", password = \"app\" }]",
        "users = [{ name = \"app\", password = \"app\" }]\nidle_timeout_secs = 1\nmax_allowed_packet = 65536",
    );
    let proxy = start_proxy_with_rules(rules);
    // A packet over max_allowed_packet: 1153, and the connection ends (its rest is unread).
    let port = proxy.port;
    let (first, after) = tokio::task::spawn_blocking(move || {
        let mut raw = login(port);
        let mut q = vec![0x03];
        q.extend_from_slice(b"SELECT '");
        q.extend(std::iter::repeat_n(b'x', 70_000));
        q.push(b'\'');
        raw.command(&q);
        let answer = raw.read();
        let mut rest = [0u8; 1];
        let after = raw.s.read(&mut rest).unwrap_or(0);
        (answer, after)
    })
    .await
    .expect("raw client");
    assert_eq!(first.first(), Some(&0xFF), "an error packet");
    assert_eq!(u16::from_le_bytes([first[1], first[2]]), 1153);
    assert_eq!(after, 0, "the connection is closed");
    // A client idle past idle_timeout_secs is disconnected; a busy one is not.
    let mut idle = proxy.conn().await;
    let mut busy = proxy.conn().await;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        busy.query_drop("SELECT 1")
            .await
            .expect("a busy client stays");
    }
    assert!(
        idle.query_drop("SELECT 1").await.is_err(),
        "the idle client was kept"
    );
}

/// What a client makes the proxy hold after login is bounded: long data past
/// max_allowed_packet fails the execute with MariaDB's 1153 (the data is dropped as it
/// arrives, the connection stays usable), and session SETs replayed on every node
/// connection stop at 4 MiB with 1235 before anything of the refused one runs.
#[tokio::test]
async fn long_data_and_session_sets_are_bounded() {
    let c = Cluster::shared(2);
    let rules = rules_toml(c, &hash_slot_table("t_garbage4", "id", &L2)).replace(
        "users = [{ name = \"app\", password = \"app\" }]",
        "users = [{ name = \"app\", password = \"app\" }]\nmax_allowed_packet = 65536",
    );
    let proxy = start_proxy_with_rules(rules);
    let port = proxy.port;
    let (first, second) = tokio::task::spawn_blocking(move || {
        let mut raw = login(port);
        let mut q = vec![0x16];
        q.extend_from_slice(b"SELECT LENGTH(?)");
        raw.command(&q);
        let ok = raw.read();
        assert_eq!(ok.first(), Some(&0x00), "prepared: {ok:?}");
        let id = [ok[1], ok[2], ok[3], ok[4]];
        // The rest of the PREPARE answer: one parameter and one column, each with an EOF.
        for _ in 0..4 {
            raw.read();
        }
        // 40 KiB of long data twice: 80 KiB past the 64 KiB bound, each packet under it.
        for _ in 0..2 {
            let mut p = vec![0x18];
            p.extend_from_slice(&id);
            p.extend_from_slice(&0u16.to_le_bytes());
            p.extend(std::iter::repeat_n(b'x', 40 * 1024));
            raw.command(&p);
        }
        let execute = |raw: &mut Raw, value: &[u8]| {
            let mut p = vec![0x17];
            p.extend_from_slice(&id);
            p.push(0);
            p.extend_from_slice(&1u32.to_le_bytes());
            // Null bitmap, new-params-bound, the parameter's type (VAR_STRING), its value
            // (none where long data stands for it).
            p.extend_from_slice(&[0, 1, 0xFD, 0]);
            p.extend_from_slice(value);
            raw.command(&p);
            raw.read()
        };
        let first = execute(&mut raw, &[]);
        // The next execute, its value inline, runs: its first packet says what it is.
        let second = execute(&mut raw, &[3, b'a', b'b', b'c']);
        (first, second)
    })
    .await
    .expect("raw client");
    assert_eq!(first.first(), Some(&0xFF), "an error packet: {first:?}");
    assert_eq!(u16::from_le_bytes([first[1], first[2]]), 1153);
    assert_ne!(
        second.first(),
        Some(&0xFF),
        "the next execute (no long data now) runs"
    );

    let mut conn = proxy.conn().await;
    let big = "x".repeat(60_000);
    let mut refused = None;
    for i in 0..100 {
        if let Err(e) = conn
            .exec_drop(format!("SET @v{i} = ?"), (big.as_str(),))
            .await
        {
            refused = Some((i, e));
            break;
        }
    }
    let (at, e) = refused.expect("SETs over 4 MiB were all kept");
    // Each is kept as `SET @v = _utf8mb4 X'..'`, 120 KB: some 34 fit.
    assert!(at > 30, "refused after {at} SETs of 60 KB: {e}");
    assert!(
        matches!(&e, mysql_async::Error::Server(s) if s.code == 1235),
        "{e}"
    );
    let v: Option<Option<String>> = conn
        .query_first(format!("SELECT @v{at}"))
        .await
        .expect("the session goes on");
    assert_eq!(v, Some(None), "the refused SET did not run");
    let n: Option<i64> = conn
        .query_first("SELECT LENGTH(@v0)")
        .await
        .expect("earlier SETs kept");
    assert_eq!(n, Some(60_000));
}
