//! The handshake and authentication of a client (and COM_CHANGE_USER, which authenticates
//! again) over the connection phase `crate::protocol::handshake` runs for both listeners:
//! what a login sets up in the session (capabilities, character set, database).

use std::io;

use mysql_common::collations::{Collation, CollationId};
use mysql_common::constants::CapabilityFlags;
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::debug;

use super::Session;
use crate::error::{MyError, ER_UNKNOWN_COM};
use crate::protocol::auth;
use crate::protocol::handshake::{self, Gate, Greeting};

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    pub(super) async fn authenticate(&mut self) -> io::Result<bool> {
        let greeting = Greeting {
            server_version: &self.shared.server_version,
            conn_id: self.conn_id,
            tls: self.shared.tls.as_ref(),
        };
        let Some(hello) = handshake::greet(&mut self.io, &greeting, &self.salt).await? else {
            return Ok(false);
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
        self.nodes.ctl().set_user(&user);
        self.write_ok();
        self.io.flush().await?;
        debug!(conn = self.conn_id, %user, "client authenticated");
        Ok(true)
    }

    /// Verifies a password response against the users in force (see
    /// [`handshake::check_password`]); on failure the client got the error.
    async fn check_password(
        &mut self,
        user: &str,
        plugin: auth::Plugin,
        response: Vec<u8>,
    ) -> io::Result<bool> {
        let topo = self.shared.topology();
        let gate = Gate {
            users: &topo.users,
            peer: &self.peer,
            denied_to: "",
            secure: self.io.get_ref().is_tls(),
            require_tls: topo.tls.as_ref().is_some_and(|t| t.require),
            logins: Some(&self.shared.logins),
        };
        handshake::check_password(&mut self.io, &gate, &mut self.salt, user, plugin, response).await
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
        self.nodes.ctl().set_user(&cu.user);
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
