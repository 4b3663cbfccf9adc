//! The connection phase both listeners run, the proxy's (`session::handshake`) and the admin
//! interface's: the greeting, the TLS upgrade (both offer it with `[server] tls`), the
//! handshake response, then the password check (TLS required where the listener or the user
//! says so; a failure logged and answered later each time, `crate::logins`) with its auth
//! switch and caching_sha2 fast-auth OK. `crate::protocol::auth` builds and parses the packets and checks the scrambles.
//!
//! Two steps, so each listener takes its users once the client has answered: [`greet`], then
//! [`check_password`] (which COM_CHANGE_USER runs again). The caller writes the final OK.

use std::io;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;

use super::auth::{self, ClientHello};
use super::codec;
use super::stream::{ClientStream, Rewind};
use crate::config::User;
use crate::error::{sqlstate_of, ER_ACCESS_DENIED, ER_HANDSHAKE};
use crate::packet::PacketIo;

/// What a listener's greeting offers.
pub struct Greeting<'a> {
    pub server_version: &'a str,
    /// The connection id the client is told (0 on the admin interface).
    pub conn_id: u32,
    /// TLS offered to the client (`CLIENT_SSL`); `None` on the admin interface.
    pub tls: Option<&'a TlsAcceptor>,
}

/// Who may log in, and how a refusal names the place refused.
pub struct Gate<'a> {
    pub users: &'a [User],
    /// The client's host, as MySQL names it in errors.
    pub peer: &'a str,
    /// Follows "Access denied for user 'u'@'host'": empty for the proxy,
    /// `" to the shardproxy admin interface"` for the admin listener.
    pub denied_to: &'a str,
    /// The client's connection is encrypted.
    pub secure: bool,
    /// The listener takes no client without TLS (`[server] tls` with `require = true`).
    pub require_tls: bool,
    /// Failed logins by address: each answered later than the last (none in unit tests).
    pub logins: Option<&'a crate::logins::Logins>,
}

/// Greets the client with `salt`, upgrades to TLS when it sends an SSLRequest and TLS is
/// offered, and reads its handshake response. `None` when the connection is over: the client
/// left, or its response was malformed (it got ER_HANDSHAKE).
pub async fn greet<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut PacketIo<ClientStream<S>>,
    greeting: &Greeting<'_>,
    salt: &[u8; 20],
) -> io::Result<Option<ClientHello>> {
    let tls = greeting.tls;
    io.set_seq(0);
    io.write(&auth::handshake_packet(
        greeting.server_version,
        greeting.conn_id,
        salt,
        tls.is_some(),
    ));
    io.flush().await?;
    let Some(mut payload) = io.read().await? else {
        return Ok(None);
    };
    let mut hello = auth::parse_response(&payload, tls.is_some());
    if let (Ok(auth::Hello::Ssl), Some(acceptor)) = (&hello, tls) {
        upgrade(io, acceptor).await?;
        payload = match io.read().await? {
            Some(p) => p,
            None => return Ok(None),
        };
        hello = auth::parse_response(&payload, true);
        if matches!(hello, Ok(auth::Hello::Ssl)) {
            hello = Err("a second SSLRequest inside TLS".into());
        }
    }
    match hello {
        Ok(auth::Hello::Response(h)) => Ok(Some(h)),
        Ok(auth::Hello::Ssl) => Ok(None),
        Err(m) => {
            io.write(&codec::err(ER_HANDSHAKE, sqlstate_of(ER_HANDSHAKE), &m));
            io.flush().await?;
            Ok(None)
        }
    }
}

/// Switches the client stream to TLS (after an SSLRequest).
async fn upgrade<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut PacketIo<ClientStream<S>>,
    acceptor: &TlsAcceptor,
) -> io::Result<()> {
    let seq = io.seq();
    let max = io.max_request();
    let old = std::mem::replace(
        io,
        PacketIo::with_read_buffer(ClientStream::Gone, max, crate::packet::CLIENT_READ_BUF),
    );
    let (stream, buffered) = old.into_parts();
    let ClientStream::Plain(plain) = stream else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "SSLRequest on a stream that is already TLS",
        ));
    };
    let tls = acceptor.accept(Rewind::new(buffered, plain)).await?;
    *io = PacketIo::with_read_buffer(
        ClientStream::Tls(Box::new(tls)),
        max,
        crate::packet::CLIENT_READ_BUF,
    );
    io.set_seq(seq);
    Ok(())
}

/// Verifies a password response (switching the client to mysql_native_password when it used
/// a plugin this server does not verify, or asking again for a missing scramble; the switch
/// carries a fresh salt, left in `salt` for later COM_CHANGE_USERs). On success a
/// caching_sha2 client got its fast-auth OK; on failure the client got ER_ACCESS_DENIED.
pub async fn check_password<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut PacketIo<S>,
    gate: &Gate<'_>,
    salt: &mut [u8; 20],
    user: &str,
    plugin: auth::Plugin,
    mut response: Vec<u8>,
) -> io::Result<bool> {
    if gate.require_tls && !gate.secure {
        const ER_SECURE_TRANSPORT_REQUIRED: u16 = 3159;
        io.write(&codec::err(
            ER_SECURE_TRANSPORT_REQUIRED,
            "HY000",
            "Connections using insecure transport are prohibited while --require_secure_transport=ON.",
        ));
        io.flush().await?;
        tracing::warn!(peer = gate.peer, %user, "refused a login without TLS (tls.require)");
        return Ok(false);
    }
    let mut plugin = plugin;
    if let Some(to) = auth::needs_switch(gate.users, user, &plugin, &response) {
        *salt = auth::new_salt();
        io.write(&auth::switch_to(&to, salt));
        io.flush().await?;
        response = match io.read().await? {
            Some(r) => r,
            None => return Ok(false),
        };
        plugin = to;
    }
    let tls_lacking = !gate.secure && gate.users.iter().any(|u| u.name == user && u.require_tls);
    if tls_lacking || auth::verify(gate.users, user, &plugin, salt, &response).is_none() {
        tracing::warn!(
            peer = gate.peer,
            %user,
            listener = if gate.denied_to.is_empty() { "clients" } else { "admin" },
            "failed login{}",
            if tls_lacking { " (the user requires TLS)" } else { "" }
        );
        if let Some(l) = gate.logins {
            tokio::time::sleep(l.failed(gate.peer)).await;
        }
        io.write(&codec::err(
            ER_ACCESS_DENIED,
            crate::error::sqlstate_of(ER_ACCESS_DENIED),
            &format!(
                "Access denied for user '{user}'@'{}'{} (using password: {})",
                gate.peer,
                gate.denied_to,
                if response.is_empty() { "NO" } else { "YES" }
            ),
        ));
        io.flush().await?;
        return Ok(false);
    }
    if plugin == auth::Plugin::CachingSha2 && !response.is_empty() {
        io.write(&auth::FAST_AUTH_OK);
    }
    if let Some(l) = gate.logins {
        l.succeeded(gate.peer);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use mysql_common::constants::CapabilityFlags;
    use mysql_common::io::ParseBuf;
    use mysql_common::packets::{AuthPlugin, HandshakePacket, HandshakeResponse};
    use mysql_common::proto::MySerialize;
    use mysql_common::scramble::{scramble_native, scramble_sha256};

    use super::*;

    const ADMIN: &str = " to the shardproxy admin interface";

    /// Runs a login on the server side of a pipe while the client answers the greeting with
    /// `client(salt)` and an AuthSwitchRequest with the native scramble of `switch_password`.
    /// The login's outcome and every packet the client read after its response.
    async fn login(
        denied_to: &str,
        client: impl FnOnce(&[u8; 20]) -> Vec<u8>,
        switch_password: &[u8],
    ) -> (bool, Vec<Vec<u8>>) {
        let (a, b) = tokio::io::duplex(1 << 16);
        let users = vec![User::plain("ops", "secret")];
        let denied_to = denied_to.to_string();
        let server = tokio::spawn(async move {
            let mut io = PacketIo::new(ClientStream::Plain(a), 1 << 20);
            let mut salt = auth::new_salt();
            let greeting = Greeting {
                server_version: "5.7.99-test",
                conn_id: 7,
                tls: None,
            };
            let Some(hello) = greet(&mut io, &greeting, &salt).await.unwrap() else {
                return false;
            };
            let gate = Gate {
                users: &users,
                peer: "10.0.0.1",
                denied_to: &denied_to,
                secure: false,
                require_tls: false,
                logins: None,
            };
            let (user, plugin, response) = (hello.user, hello.plugin, hello.response);
            let ok = check_password(&mut io, &gate, &mut salt, &user, plugin, response)
                .await
                .unwrap();
            io.flush().await.unwrap();
            ok
        });
        let mut io = PacketIo::new(b, 1 << 20);
        let greeting = io.read().await.unwrap().unwrap();
        let hp: HandshakePacket<'_> = ParseBuf(&greeting).parse(()).unwrap();
        assert_eq!(hp.connection_id(), 7);
        let mut salt = [0u8; 20];
        salt.copy_from_slice(&hp.nonce());
        io.write(&client(&salt));
        io.flush().await.unwrap();
        let mut seen = Vec::new();
        while let Some(p) = io.read().await.unwrap() {
            if p.first() == Some(&0xFE) {
                // AuthSwitchRequest: 0xFE, plugin name, NUL, the salt to scramble with, NUL.
                let name_end = p.iter().position(|c| *c == 0).unwrap();
                let mut fresh = [0u8; 20];
                fresh.copy_from_slice(&p[name_end + 1..name_end + 21]);
                assert_ne!(fresh, salt, "the switch carries a fresh salt");
                io.write(&scramble_native(&fresh, switch_password).unwrap());
                io.flush().await.unwrap();
            }
            seen.push(p);
        }
        (server.await.unwrap(), seen)
    }

    fn response(plugin: &[u8], scramble: Vec<u8>) -> Vec<u8> {
        let caps = CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_PLUGIN_AUTH;
        let mut b = Vec::new();
        HandshakeResponse::new(
            Some(scramble),
            (5, 7, 99),
            Some(&b"ops"[..]),
            None::<&[u8]>,
            Some(AuthPlugin::from_bytes(plugin)),
            caps,
            None,
            1 << 20,
        )
        .serialize(&mut b);
        b
    }

    #[tokio::test]
    async fn caching_sha2_logs_in_with_the_fast_auth_ok() {
        let (ok, seen) = login(
            ADMIN,
            |salt| {
                response(
                    auth::CACHING_SHA2,
                    scramble_sha256(salt, b"secret").unwrap().to_vec(),
                )
            },
            b"",
        )
        .await;
        assert!(ok);
        assert_eq!(seen, vec![auth::FAST_AUTH_OK.to_vec()]);
    }

    #[tokio::test]
    async fn an_unverified_plugin_is_switched_to_native_with_a_fresh_salt() {
        let ed = |_: &[u8; 20]| response(b"client_ed25519", vec![1; 64]);
        let (ok, seen) = login("", ed, b"secret").await;
        assert!(ok);
        assert_eq!(seen.len(), 1, "only the switch, no fast-auth OK for native");
        assert!(seen[0].starts_with(b"\xFEmysql_native_password\0"));
        let (ok, seen) = login(ADMIN, ed, b"wrong").await;
        assert!(!ok);
        let message =
            format!("Access denied for user 'ops'@'10.0.0.1'{ADMIN} (using password: YES)");
        assert_eq!(seen[1], codec::err(1045, "28000", &message));
    }

    #[tokio::test]
    async fn a_wrong_password_is_denied_in_the_listeners_words() {
        for denied_to in ["", ADMIN] {
            let (ok, seen) = login(
                denied_to,
                |salt| {
                    response(
                        auth::NATIVE,
                        scramble_native(salt, b"wrong").unwrap().to_vec(),
                    )
                },
                b"",
            )
            .await;
            assert!(!ok);
            let message =
                format!("Access denied for user 'ops'@'10.0.0.1'{denied_to} (using password: YES)");
            assert_eq!(seen, vec![codec::err(1045, "28000", &message)]);
        }
    }

    #[tokio::test]
    async fn a_malformed_response_gets_er_handshake_with_the_listeners_sqlstate() {
        let (ok, seen) = login(ADMIN, |_| b"\x01\x02".to_vec(), b"").await;
        assert!(!ok);
        assert_eq!(seen.len(), 1);
        assert_eq!(&seen[0][..3], &[0xFF, 0x13, 0x04]);
        assert_eq!(&seen[0][3..9], b"#08S01");
    }
}
