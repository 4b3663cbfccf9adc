//! The connection phase of a node connection: the greeting, TLS, the authentication
//! plugins the proxy speaks to nodes (mysql_native_password, caching_sha2_password with its
//! fast path and its full authentication).

use super::*;

impl Conn {
    /// The greeting, TLS when the node's URL asks for it, the login.
    pub(super) async fn handshake(&mut self, opts: &ConnectOpts) -> Result<(), WireError> {
        self.read().await?;
        if self.buf.first() == Some(&0xFF) {
            return Err(server_error(&self.buf, CapabilityFlags::empty()));
        }
        let hello = ParseBuf(&self.buf)
            .parse::<HandshakePacket<'_>>(())
            .map_err(|e| protocol(format!("a malformed handshake: {e}")))?;
        let mut nonce = hello.scramble_1_ref().to_vec();
        nonce.extend_from_slice(hello.scramble_2_ref().unwrap_or(&[]));
        nonce.resize(20, 0);
        let mariadb = hello.maria_db_server_version_parsed();
        let version = mariadb
            .or_else(|| hello.server_version_parsed())
            .unwrap_or((0, 0, 0));
        let mut wanted = CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_LONG_PASSWORD
            | CapabilityFlags::CLIENT_LONG_FLAG
            | CapabilityFlags::CLIENT_TRANSACTIONS
            // No CLIENT_MULTI_STATEMENTS: a text the proxy forwards is one statement to the
            // node whatever its bytes; only the proxy's own batches turn them on, for one
            // command ([`Conn::query_batch`]).
            | CapabilityFlags::CLIENT_MULTI_RESULTS
            | CapabilityFlags::CLIENT_PS_MULTI_RESULTS
            | CapabilityFlags::CLIENT_DEPRECATE_EOF
            | CapabilityFlags::CLIENT_SESSION_TRACK
            | CapabilityFlags::CLIENT_PLUGIN_AUTH;
        if opts.db.is_some() {
            wanted |= CapabilityFlags::CLIENT_CONNECT_WITH_DB;
        }
        if opts.found_rows {
            wanted |= CapabilityFlags::CLIENT_FOUND_ROWS;
        }
        let tls = opts.tls.as_ref().filter(|_| !self.io.get_mut().is_unix());
        if tls.is_some() {
            wanted |= CapabilityFlags::CLIENT_SSL;
        }
        self.caps = hello.capabilities() & wanted;
        self.id = hello.connection_id();
        self.status = hello.status_flags();
        if opts.found_rows && !self.caps.contains(CapabilityFlags::CLIENT_FOUND_ROWS) {
            return Err(protocol("the node does not offer CLIENT_FOUND_ROWS"));
        }
        // MariaDB's own capabilities, announced where MySQL has CLIENT_LONG_PASSWORD.
        let mariadb_caps = if mariadb.is_some()
            && !hello
                .capabilities()
                .contains(CapabilityFlags::CLIENT_LONG_PASSWORD)
        {
            hello.mariadb_ext_capabilities() & MariadbCapabilities::MARIADB_CLIENT_CACHE_METADATA
        } else {
            MariadbCapabilities::empty()
        };
        self.cache_metadata =
            mariadb_caps.contains(MariadbCapabilities::MARIADB_CLIENT_CACHE_METADATA);
        let mut plugin = match hello.auth_plugin() {
            Some(AuthPlugin::CachingSha2Password) => AuthPlugin::CachingSha2Password,
            _ => AuthPlugin::MysqlNativePassword,
        };
        if let Some(tls) = tls {
            if !self.caps.contains(CapabilityFlags::CLIENT_SSL) {
                return Err(protocol(
                    "the node does not offer SSL, and its URL says require_ssl=true",
                ));
            }
            let mut req = Vec::new();
            SslRequest::new(self.caps, MAX_PACKET, UTF8MB4_GENERAL_CI)
                .with_mariadb_capabilities(mariadb_caps)
                .serialize(&mut req);
            self.io.write(&req);
            self.io.flush().await?;
            self.upgrade(tls).await?;
        }
        let pass = opts.pass.as_deref();
        let data = plugin.gen_data(pass, &nonce);
        let mut response = Vec::new();
        HandshakeResponse::new(
            data.as_deref(),
            version,
            Some(opts.user.as_bytes()),
            opts.db.as_deref().map(str::as_bytes),
            Some(plugin.borrow()),
            self.caps,
            None,
            MAX_PACKET,
        )
        .with_mariadb_ext_capabilities(mariadb_caps)
        .serialize(&mut response);
        self.io.write(&response);
        self.io.flush().await?;
        let mut switched = false;
        loop {
            self.read().await?;
            match self.buf.first() {
                Some(0x00) => {
                    if let Ok(ok) = ParseBuf(&self.buf)
                        .parse::<OkPacketDeserializer<'_, CommonOkPacket>>(self.caps)
                    {
                        self.status = ok.into_inner().status_flags();
                    }
                    return Ok(());
                }
                Some(0xFF) => return Err(server_error(&self.buf, self.caps)),
                Some(0xFE) if !switched => {
                    switched = true;
                    let switch = ParseBuf(&self.buf)
                        .parse::<AuthSwitchRequest<'_>>(())
                        .map_err(|e| protocol(format!("a malformed auth switch: {e}")))?;
                    nonce = switch.plugin_data().to_vec();
                    if nonce.last() == Some(&0) {
                        nonce.pop();
                    }
                    plugin = match switch.auth_plugin() {
                        AuthPlugin::CachingSha2Password => AuthPlugin::CachingSha2Password,
                        AuthPlugin::MysqlNativePassword => AuthPlugin::MysqlNativePassword,
                        other => {
                            return Err(protocol(format!(
                                "the node asks for the `{}` authentication plugin; shardproxy \
                                 speaks mysql_native_password and caching_sha2_password to nodes",
                                String::from_utf8_lossy(other.as_bytes())
                            )))
                        }
                    };
                    let mut out = Vec::new();
                    if let Some(d) = plugin.gen_data(pass, &nonce) {
                        d.serialize(&mut out);
                    }
                    self.io.write(&out);
                    self.io.flush().await?;
                }
                // caching_sha2_password: fast auth done, the OK follows.
                Some(0x01) if self.buf.get(1) == Some(&0x03) => {}
                // caching_sha2_password: full authentication, the password itself.
                Some(0x01) if self.buf.get(1) == Some(&0x04) => {
                    let mut secret = pass.unwrap_or_default().as_bytes().to_vec();
                    secret.push(0);
                    let stream = self.io.get_mut();
                    if stream.is_tls() || stream.is_unix() {
                        self.io.write(&secret);
                    } else if !loopback(&opts.host) {
                        // The key would come over the same network: whoever sits on it
                        // could send its own and read the password.
                        return Err(protocol(
                            "the node asks for the password itself (caching_sha2_password full \
                             authentication) over plain TCP: shardproxy sends it only over TLS \
                             (`?require_ssl=true` in the node's URL), a socket or loopback; or give the \
                             proxy's node user mysql_native_password",
                        ));
                    } else {
                        // Plain TCP on loopback: encrypted with the node's RSA public key.
                        self.io.write(&[0x02]);
                        self.io.flush().await?;
                        self.read().await?;
                        let key = self.buf.get(1..).unwrap_or_default().to_vec();
                        if nonce.is_empty() {
                            return Err(protocol("caching_sha2_password without a nonce"));
                        }
                        for (i, b) in secret.iter_mut().enumerate() {
                            *b ^= nonce[i % nonce.len()];
                        }
                        let encrypted = std::panic::catch_unwind(|| {
                            mysql_common::crypto::encrypt(&secret, &key)
                        })
                        .map_err(|_| protocol("the node's RSA public key is not usable"))?;
                        self.io.write(&encrypted);
                    }
                    self.io.flush().await?;
                }
                _ => {
                    return Err(protocol(format!(
                        "an unexpected packet during authentication (0x{:02x})",
                        self.buf.first().copied().unwrap_or(0)
                    )))
                }
            }
        }
    }

    /// Upgrades the socket to TLS (after the SSLRequest).
    async fn upgrade(&mut self, tls: &Tls) -> Result<(), WireError> {
        let seq = self.io.seq();
        let io = std::mem::replace(&mut self.io, PacketIo::new(Stream::Gone, usize::MAX));
        let (stream, _) = io.into_parts();
        let Stream::Tcp(tcp) = stream else {
            return Err(protocol("TLS over a non-TCP stream"));
        };
        let secure = tls
            .connector
            .connect(tls.server_name.clone(), tcp)
            .await
            .map_err(|e| WireError::Io(io::Error::other(format!("TLS: {e}"))))?;
        self.io = PacketIo::new(Stream::Tls(Box::new(secure)), usize::MAX);
        self.io.set_seq(seq);
        Ok(())
    }
}

/// Is `host` this machine (a loopback address or `localhost`)?
fn loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_matches(|c| c == '[' || c == ']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
