//! The targets that speak to the proxy as a client: a real `Session` (or the connection
//! phase alone) over an in-memory stream, with the fake node behind it.

use std::sync::{Arc, OnceLock};

use mysql_common::constants::CapabilityFlags;
use shardproxy::config::User;
use shardproxy::frontend::session::Session;
use shardproxy::packet::PacketIo;
use shardproxy::protocol::auth;
use shardproxy::protocol::handshake::{self, Gate, Greeting};
use shardproxy::protocol::stream::ClientStream;
use shardproxy::shared::Shared;

use crate::client::{self, Client};

/// The rules of every target (`@PORT@`: the fake node's port).
pub const RULES: &str = include_str!("../rules.toml");

/// What the session targets share across inputs: one runtime (current-thread: it runs the
/// session, the fake node and the pools' background tasks while an input is being run), the
/// fake node and the proxy's shared state (its pools keep their node connections between
/// inputs).
struct Env {
    rt: tokio::runtime::Runtime,
    shared: Arc<Shared>,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the fake node");
        let port = listener.local_addr().expect("its address").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let listener = {
            let _in = rt.enter();
            tokio::net::TcpListener::from_std(listener).expect("a tokio listener")
        };
        rt.spawn(crate::node::serve(listener));
        let text = RULES.replace("@PORT@", &port.to_string());
        let topo = shardproxy::config::parse(&text, "fuzz/rules.toml").expect("fuzz/rules.toml");
        Env {
            rt,
            shared: Arc::new(Shared::new(topo)),
        }
    })
}

/// Runs one client session to its end over `input` (what the client sends, from its
/// handshake response on).
fn run_session(what: &str, input: Vec<u8>) {
    let env = env();
    let before = env.shared.metrics.panics.get();
    let known = crate::no_panic(what, || {
        let conn_id = env.shared.next_conn_id();
        let session = Session::new(
            Client::logging_in(input),
            env.shared.clone(),
            conn_id,
            "fuzz".into(),
        );
        let _ = env.rt.block_on(session.run());
    });
    // The session counts each panic it caught under a command: any beyond the known ones
    // is a bug (the hook has failed on it already, unless it happened off this thread).
    let caught = env.shared.metrics.panics.get() - before;
    assert!(
        caught <= known as u64,
        "{what}: a client's command panicked"
    );
}

/// `packet`: `data` is the client's byte stream after its (fixed) login: packets as framed
/// on the wire, 3-byte length and sequence id each.
pub fn packet(data: &[u8]) {
    run_session("packet", data.to_vec());
}

/// The statements `stmt_execute` prepares (the first byte of an input picks one).
pub const STATEMENTS: &[&str] = &[
    "SELECT * FROM t_order WHERE user_id = ?",
    "SELECT order_id, status FROM t_order WHERE user_id IN (?, ?) ORDER BY order_id LIMIT ?",
    "INSERT INTO t_order (user_id, status) VALUES (?, ?), (?, ?)",
    "UPDATE t_account SET balance = balance + ? WHERE account_id BETWEEN ? AND ?",
    "DELETE FROM t_tenant_doc WHERE tenant_id = ? AND doc_id = ?",
    "SELECT txn_id, amount FROM t_txn WHERE txn_date >= ? AND txn_date < ? ORDER BY txn_date DESC LIMIT ?, ?",
    "SELECT * FROM t_txn WHERE serial_no = ?",
    "SELECT status, COUNT(*), SUM(amount) FROM t_order WHERE user_id = ? OR status = ? GROUP BY status",
    "SELECT * FROM t_user_dir WHERE uid = ?",
    "INSERT INTO t_seq (v) VALUES (?)",
    "UPDATE t_mv SET v = ? WHERE id = ?",
    "SELECT * FROM t_name WHERE name = ? OR name > ?",
    "SELECT * FROM t_day WHERE day = ?",
    "SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?",
];

/// `stmt_execute`: the first byte picks a statement of [`STATEMENTS`], which the session
/// prepares (the fake node counts its parameters, as MariaDB would). The rest is a list of
/// commands on it, each `kind, len, body[len]` (the last one's body may be shorter):
/// kind % 4 is 0 or 1 for COM_STMT_EXECUTE, 2 for COM_STMT_SEND_LONG_DATA, 3 for
/// COM_STMT_RESET; the body follows the statement id (for an execute: flags, iteration count,
/// NULL bitmap, new-params-bound flag, types, values; for long data: parameter number and
/// data).
pub fn stmt_execute(data: &[u8]) {
    let Some((&pick, mut rest)) = data.split_first() else {
        return;
    };
    let sql = STATEMENTS[usize::from(pick) % STATEMENTS.len()];
    let mut input = Vec::new();
    client::command(0x16, sql.as_bytes(), &mut input);
    // The session's first statement id.
    let id = 1u32.to_le_bytes();
    while let [kind, len, more @ ..] = rest {
        let n = usize::from(*len).min(more.len());
        let (body, tail) = more.split_at(n);
        rest = tail;
        let cmd = match kind % 4 {
            0 | 1 => 0x17,
            2 => 0x18,
            _ => 0x1A,
        };
        let mut payload = id.to_vec();
        payload.extend_from_slice(body);
        client::command(cmd, &payload, &mut input);
    }
    run_session("stmt_execute", input);
}

/// The salt of the `handshake_response` greeting (fixed, so that seeds can hold scrambles
/// that verify).
pub const SALT: [u8; 20] = *b"fuzz-salt-0123456789";

/// The users `handshake_response` logs in against: a plain password, none, a stored hash
/// (`PASSWORD('password')`).
pub fn users() -> Vec<User> {
    let mut hashed = User::plain("ro", "");
    let hex = "2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19";
    let mut hash = [0u8; 20];
    for (i, b) in hash.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or(0);
    }
    hashed.hash = Some(hash);
    vec![
        User::plain("app", "secret"),
        User::plain("nopw", ""),
        hashed,
    ]
}

/// `handshake_response`: what a client sends after the greeting (framed packets): its
/// handshake response (or an SSLRequest, refused: no TLS here), an auth switch response if
/// the server asks for one, then a COM_CHANGE_USER, authenticated too when it parses. The
/// first packet's payload also goes to `auth::parse_response` with TLS offered, and every
/// payload after a 0x11 byte to `auth::parse_change_user` with every capability.
pub fn handshake_response(data: &[u8]) {
    let env = env();
    crate::no_panic("handshake_response", || {
        env.rt.block_on(connection_phase(data));
    });
}

async fn connection_phase(data: &[u8]) {
    let users = users();
    let gate = Gate {
        users: &users,
        peer: "10.0.0.1",
        denied_to: "",
        secure: false,
        require_tls: false,
        logins: None,
    };
    let mut io = PacketIo::new(ClientStream::Plain(Client::new(data.to_vec())), 1 << 16);
    let greeting = Greeting {
        server_version: "5.7.99-fuzz",
        conn_id: 7,
        tls: None,
    };
    let mut salt = SALT;
    if let Some(payload) = first_payload(data) {
        let _ = auth::parse_response(payload, true);
        if let Some((0x11, body)) = payload.split_first().map(|(c, b)| (*c, b)) {
            let _ = auth::parse_change_user(body, CapabilityFlags::all());
            let _ = auth::parse_change_user(body, CapabilityFlags::empty());
        }
    }
    let Ok(Some(hello)) = handshake::greet(&mut io, &greeting, &salt).await else {
        return;
    };
    let ok = handshake::check_password(
        &mut io,
        &gate,
        &mut salt,
        &hello.user,
        hello.plugin.clone(),
        hello.response.clone(),
    )
    .await;
    if !matches!(ok, Ok(true)) {
        return;
    }
    // The caller's OK, as the session writes it.
    io.write(&shardproxy::protocol::codec::ok(
        0,
        0,
        mysql_common::constants::StatusFlags::SERVER_STATUS_AUTOCOMMIT,
        0,
        "",
    ));
    if io.flush().await.is_err() {
        return;
    }
    // The session's COM_CHANGE_USER: parsed with the capabilities the login settled.
    let Ok(Some(p)) = io.read().await else {
        return;
    };
    let Some((&0x11, body)) = p.split_first() else {
        return;
    };
    if let Ok(cu) = auth::parse_change_user(body, hello.capabilities) {
        let _ =
            handshake::check_password(&mut io, &gate, &mut salt, &cu.user, cu.plugin, cu.response)
                .await;
        let _ = io.flush().await;
    }
}

/// The payload of the first packet framed in `data`, if whole.
fn first_payload(data: &[u8]) -> Option<&[u8]> {
    let len = usize::from(*data.first()?)
        | usize::from(*data.get(1)?) << 8
        | usize::from(*data.get(2)?) << 16;
    data.get(4..4 + len)
}
