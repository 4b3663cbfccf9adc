//! The client's side of a fuzzed connection: its bytes, in memory.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use mysql_common::constants::CapabilityFlags;
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthPlugin, HandshakePacket, HandshakeResponse};
use mysql_common::proto::{MyDeserialize, MySerialize};
use mysql_common::scramble::scramble_native;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A client that sends `input`, then closes its side; what the server writes is dropped
/// (with `FUZZ_TRACE` set in the environment, each packet is printed to stderr first).
pub struct Client {
    input: Vec<u8>,
    at: usize,
    trace: bool,
    /// Logs in as [`LOGIN_USER`] first, answering the greeting's salt, once it comes.
    login: bool,
}

impl Client {
    /// A client whose every byte is `input` (its handshake response included, if any).
    pub fn new(input: Vec<u8>) -> Client {
        Client {
            input,
            at: 0,
            trace: std::env::var_os("FUZZ_TRACE").is_some(),
            login: false,
        }
    }

    /// A client that answers the server's greeting with the login of [`LOGIN_USER`] to
    /// database `shop` (its scramble made from the greeting's salt), then sends `input`.
    pub fn logging_in(input: Vec<u8>) -> Client {
        Client {
            login: true,
            ..Client::new(input)
        }
    }

    /// The greeting in `buf` (one framed packet): puts the login that answers it before the
    /// input.
    fn answer_greeting(&mut self, buf: &[u8]) {
        let Some(payload) = buf.get(4..) else {
            return;
        };
        let Ok(greeting) = HandshakePacket::deserialize((), &mut ParseBuf(payload)) else {
            return;
        };
        self.login = false;
        let scramble = scramble_native(&greeting.nonce(), LOGIN_PASSWORD.as_bytes())
            .map(|s| s.to_vec())
            .unwrap_or_default();
        let payload = handshake_response(
            LOGIN_USER,
            Some("shop"),
            b"mysql_native_password",
            scramble,
            login_capabilities(),
        );
        let mut login = Vec::new();
        frame(1, &payload, &mut login);
        self.input.splice(self.at..self.at, login);
    }
}

/// The user the session targets log in as, and its password (`rules.toml`).
pub const LOGIN_USER: &str = "app";
pub const LOGIN_PASSWORD: &str = "fuzz";

/// Prints the packets of one write: sequence id, length, the start of the payload.
fn trace(mut buf: &[u8]) {
    while buf.len() >= 4 {
        let len = usize::from(buf[0]) | usize::from(buf[1]) << 8 | usize::from(buf[2]) << 16;
        let end = (4 + len).min(buf.len());
        let payload = &buf[4..end];
        let shown: String = String::from_utf8_lossy(&payload[..payload.len().min(120)])
            .chars()
            .map(|c| if c.is_control() { '.' } else { c })
            .collect();
        eprintln!("  server> seq {} len {len}: {shown}", buf[3]);
        buf = &buf[end..];
    }
}

impl AsyncRead for Client {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = buf.remaining().min(self.input.len() - self.at);
        let at = self.at;
        buf.put_slice(&self.input[at..at + n]);
        self.at += n;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Client {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.trace {
            trace(buf);
        }
        if self.login {
            self.answer_greeting(buf);
        }
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// One packet on the wire: 3-byte length, sequence id, payload (under 16 MiB).
pub fn frame(seq: u8, payload: &[u8], out: &mut Vec<u8>) {
    let len = payload.len().min(0xFF_FFFE);
    out.extend_from_slice(&[len as u8, (len >> 8) as u8, (len >> 16) as u8, seq]);
    out.extend_from_slice(&payload[..len]);
}

/// A command packet (sequence 0).
pub fn command(cmd: u8, body: &[u8], out: &mut Vec<u8>) {
    let mut payload = Vec::with_capacity(body.len() + 1);
    payload.push(cmd);
    payload.extend_from_slice(body);
    frame(0, &payload, out);
}

/// The capabilities the fixed login asks for (the server keeps those it offers).
pub fn login_capabilities() -> CapabilityFlags {
    CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_LONG_PASSWORD
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_MULTI_STATEMENTS
        | CapabilityFlags::CLIENT_MULTI_RESULTS
        | CapabilityFlags::CLIENT_CONNECT_WITH_DB
}

/// A handshake response payload (protocol 4.1) for `user` with this auth response.
pub fn handshake_response(
    user: &str,
    db: Option<&str>,
    plugin: &[u8],
    scramble: Vec<u8>,
    caps: CapabilityFlags,
) -> Vec<u8> {
    let mut b = Vec::new();
    HandshakeResponse::new(
        Some(scramble),
        (5, 7, 99),
        Some(user.as_bytes()),
        db.map(str::as_bytes),
        Some(AuthPlugin::from_bytes(plugin)),
        caps,
        None,
        1 << 24,
    )
    .serialize(&mut b);
    b
}
