//! The handshake and authentication of a client (and COM_CHANGE_USER, which authenticates
//! again): the greeting with a fresh salt, TLS upgrade, the password plugins.

use std::io;

use mysql_common::collations::{Collation, CollationId};
use mysql_common::constants::CapabilityFlags;
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::debug;

use super::Session;
use crate::error::{MyError, ER_ACCESS_DENIED, ER_HANDSHAKE, ER_UNKNOWN_COM};
use crate::frontend::auth;
use crate::frontend::packet::PacketIo;
use crate::frontend::stream::{ClientStream, Rewind};

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    pub(super) async fn authenticate(&mut self) -> io::Result<bool> {
        let salt = self.salt;
        let tls = self.shared.tls.clone();
        self.io.set_seq(0);
        self.io.write(&auth::handshake_packet(
            &self.shared.server_version,
            self.conn_id,
            &salt,
            tls.is_some(),
        ));
        self.io.flush().await?;
        let Some(mut payload) = self.io.read().await? else {
            return Ok(false);
        };
        let mut hello = auth::parse_response(&payload, tls.is_some());
        if let (Ok(auth::Hello::Ssl), Some(acceptor)) = (&hello, &tls) {
            self.upgrade(acceptor).await?;
            payload = match self.io.read().await? {
                Some(p) => p,
                None => return Ok(false),
            };
            hello = auth::parse_response(&payload, true);
            if matches!(hello, Ok(auth::Hello::Ssl)) {
                hello = Err("a second SSLRequest inside TLS".into());
            }
        }
        let hello = match hello {
            Ok(auth::Hello::Response(h)) => h,
            Ok(auth::Hello::Ssl) => return Ok(false),
            Err(m) => {
                self.write_err(&MyError::new(ER_HANDSHAKE, m));
                self.io.flush().await?;
                return Ok(false);
            }
        };
        let user = hello.user.clone();
        if !self
            .check_password(&user, hello.plugin.clone(), hello.response.clone())
            .await?
        {
            return Ok(false);
        }
        self.caps = hello.capabilities;
        self.multi_statements = self.caps.contains(CapabilityFlags::CLIENT_MULTI_STATEMENTS);
        // Backend connections speak utf8mb4; a client that asked for another character set
        // gets it on every node it reaches.
        self.base_sets = charset_sets(u16::from(hello.collation));
        self.reset(hello.db);
        self.write_ok();
        self.io.flush().await?;
        debug!(conn = self.conn_id, %user, "client authenticated");
        Ok(true)
    }

    /// Switches the client stream to TLS (after an SSLRequest).
    async fn upgrade(&mut self, acceptor: &tokio_rustls::TlsAcceptor) -> io::Result<()> {
        let seq = self.io.seq();
        let max = self.shared.max_packet;
        let old = std::mem::replace(&mut self.io, PacketIo::new(ClientStream::Gone, max));
        let (stream, buffered) = old.into_parts();
        let ClientStream::Plain(plain) = stream else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "SSLRequest on a stream that is already TLS",
            ));
        };
        let tls = acceptor.accept(Rewind::new(buffered, plain)).await?;
        self.io = PacketIo::new(ClientStream::Tls(Box::new(tls)), max);
        self.io.set_seq(seq);
        Ok(())
    }

    /// Verifies a password response (switching the client to mysql_native_password when it
    /// used a plugin this server does not verify); on failure the client got the error.
    async fn check_password(
        &mut self,
        user: &str,
        plugin: auth::Plugin,
        mut response: Vec<u8>,
    ) -> io::Result<bool> {
        let mut plugin = plugin;
        let mut salt = self.salt;
        let topo = self.shared.topology();
        if let Some(to) = auth::needs_switch(&topo.users, user, &plugin, &response) {
            // A fresh salt for the switch, kept for later COM_CHANGE_USERs.
            salt = auth::new_salt();
            self.salt = salt;
            self.io.write(&auth::switch_to(&to, &salt));
            self.io.flush().await?;
            response = match self.io.read().await? {
                Some(r) => r,
                None => return Ok(false),
            };
            plugin = to;
        }
        if auth::verify(&topo.users, user, &plugin, &salt, &response).is_none() {
            self.write_err(&MyError::new(
                ER_ACCESS_DENIED,
                format!(
                    "Access denied for user '{}'@'{}' (using password: {})",
                    user,
                    self.peer,
                    if response.is_empty() { "NO" } else { "YES" }
                ),
            ));
            self.io.flush().await?;
            return Ok(false);
        }
        if plugin == auth::Plugin::CachingSha2 && !response.is_empty() {
            self.io.write(&auth::FAST_AUTH_OK);
        }
        Ok(true)
    }

    /// COM_CHANGE_USER: authenticates the new user, then the session starts over as a fresh
    /// one (like COM_RESET_CONNECTION) in the database it names. A failed change ends the
    /// connection, as MySQL does.
    pub(super) async fn change_user(&mut self, body: &[u8]) -> io::Result<bool> {
        let cu = match auth::parse_change_user(body, self.caps) {
            Ok(cu) => cu,
            Err(m) => {
                self.write_err(&MyError::new(ER_UNKNOWN_COM, m));
                return Ok(true);
            }
        };
        if !self
            .check_password(&cu.user, cu.plugin.clone(), cu.response.clone())
            .await?
        {
            return Ok(false);
        }
        if let Some(c) = cu.collation {
            self.base_sets = charset_sets(c);
        }
        self.reset(cu.db);
        self.write_ok();
        debug!(conn = self.conn_id, user = %cu.user, "changed user");
        Ok(true)
    }
}

/// The SETs that give a backend connection (utf8mb4_general_ci) the client's character set
/// and collation. MySQL 8 collations (id 255 and up) are unknown to MariaDB, which answers
/// such a client in its default collation: only their character set is set.
fn charset_sets(collation: u16) -> Vec<String> {
    let c = Collation::resolve(CollationId::from(collation));
    if c.id() == CollationId::UNKNOWN_COLLATION_ID
        || collation == u16::from(auth::DEFAULT_COLLATION)
    {
        return Vec::new();
    }
    if collation < 255 {
        vec![format!(
            "SET NAMES {} COLLATE {}",
            c.charset(),
            c.collation()
        )]
    } else if c.charset() != "utf8mb4" {
        vec![format!("SET NAMES {}", c.charset())]
    } else {
        Vec::new()
    }
}
