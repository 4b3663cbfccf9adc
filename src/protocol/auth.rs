//! Connection phase: the initial handshake with a fresh 20-byte salt, the SSLRequest, and
//! password verification for mysql_native_password and caching_sha2_password (clients that
//! offer another plugin are switched to mysql_native_password); COM_CHANGE_USER parsing.

use mysql_common::constants::{CapabilityFlags, StatusFlags};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthSwitchRequest, HandshakePacket, HandshakeResponse};
use mysql_common::proto::MySerialize;
use mysql_common::scramble::{scramble_native, scramble_sha256};
use rand::Rng;

use crate::config::User;

/// What this server offers; the session uses the intersection with the client's flags.
/// `CLIENT_SSL` only when TLS is configured.
pub fn server_capabilities(tls: bool) -> CapabilityFlags {
    let mut caps = CapabilityFlags::CLIENT_LONG_PASSWORD
        | CapabilityFlags::CLIENT_FOUND_ROWS
        | CapabilityFlags::CLIENT_LONG_FLAG
        | CapabilityFlags::CLIENT_CONNECT_WITH_DB
        | CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_MULTI_STATEMENTS
        | CapabilityFlags::CLIENT_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | CapabilityFlags::CLIENT_CONNECT_ATTRS
        | CapabilityFlags::CLIENT_SESSION_TRACK
        | CapabilityFlags::CLIENT_IGNORE_SPACE;
    if tls {
        caps |= CapabilityFlags::CLIENT_SSL;
    }
    caps
}

pub const NATIVE: &[u8] = b"mysql_native_password";
pub const CACHING_SHA2: &[u8] = b"caching_sha2_password";
/// caching_sha2_password's "fast authentication succeeded" (an AuthMoreData packet).
pub const FAST_AUTH_OK: [u8; 2] = [0x01, 0x03];
/// utf8mb4_general_ci
pub const DEFAULT_COLLATION: u8 = 45;

/// A per-connection random salt of printable bytes (never NUL).
pub fn new_salt() -> [u8; 20] {
    let mut rng = rand::thread_rng();
    let mut s = [0u8; 20];
    for b in s.iter_mut() {
        *b = rng.gen_range(0x21u8..0x7F);
    }
    s
}

pub fn handshake_packet(server_version: &str, conn_id: u32, salt: &[u8; 20], tls: bool) -> Vec<u8> {
    let mut part1 = [0u8; 8];
    part1.copy_from_slice(&salt[..8]);
    let mut part2 = salt[8..].to_vec();
    part2.push(0);
    let p = HandshakePacket::new(
        10,
        server_version.as_bytes(),
        conn_id,
        part1,
        Some(part2),
        server_capabilities(tls),
        DEFAULT_COLLATION,
        StatusFlags::SERVER_STATUS_AUTOCOMMIT,
        Some(NATIVE),
    );
    let mut b = Vec::with_capacity(128);
    p.serialize(&mut b);
    b
}

/// The authentication method a client's response was computed with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plugin {
    /// mysql_native_password (also a client naming no plugin).
    Native,
    /// caching_sha2_password: the proxy knows each password, so the scramble is always checked
    /// directly (the "fast" path); full authentication (RSA or cleartext) is never needed.
    CachingSha2,
    /// Anything else: the client is switched to mysql_native_password.
    Other(String),
}

impl Plugin {
    fn from_name(name: Option<&[u8]>) -> Plugin {
        match name {
            None | Some(b"") => Plugin::Native,
            Some(n) if n == NATIVE => Plugin::Native,
            Some(n) if n == CACHING_SHA2 => Plugin::CachingSha2,
            Some(n) => Plugin::Other(String::from_utf8_lossy(n).into_owned()),
        }
    }
}

/// The parts of a client's handshake response the session needs.
#[derive(Debug, Clone)]
pub struct ClientHello {
    pub capabilities: CapabilityFlags,
    pub user: String,
    pub db: Option<String>,
    pub collation: u8,
    pub plugin: Plugin,
    pub response: Vec<u8>,
}

/// What a client sent in answer to the handshake.
#[derive(Debug, Clone)]
pub enum Hello {
    /// An SSLRequest: the TLS handshake follows, then the real response.
    Ssl,
    Response(ClientHello),
}

pub fn parse_response(payload: &[u8], tls: bool) -> Result<Hello, String> {
    if payload.len() == 32 {
        let caps = u32::from_le_bytes([payload[0], payload[1], payload[2], payload[3]]);
        if caps & CapabilityFlags::CLIENT_SSL.bits() == 0 {
            return Err("malformed handshake response".into());
        }
        if !tls {
            return Err("this server does not offer TLS; connect without SSL".into());
        }
        return Ok(Hello::Ssl);
    }
    let resp: HandshakeResponse<'_> = ParseBuf(payload)
        .parse(())
        .map_err(|e| format!("malformed handshake response: {e}"))?;
    let plugin = Plugin::from_name(resp.auth_plugin().as_ref().map(|p| p.as_bytes()));
    Ok(Hello::Response(ClientHello {
        capabilities: resp.capabilities() & server_capabilities(tls),
        user: String::from_utf8_lossy(resp.user()).into_owned(),
        db: resp
            .db_name()
            .filter(|d| !d.is_empty())
            .map(|d| String::from_utf8_lossy(d).into_owned()),
        collation: resp.collation(),
        plugin,
        response: resp.scramble_buf().to_vec(),
    }))
}

/// A COM_CHANGE_USER request (after the command byte).
#[derive(Debug, Clone)]
pub struct ChangeUser {
    pub user: String,
    pub response: Vec<u8>,
    pub db: Option<String>,
    pub collation: Option<u16>,
    pub plugin: Plugin,
}

pub fn parse_change_user(body: &[u8], caps: CapabilityFlags) -> Result<ChangeUser, String> {
    fn cstr<'a>(b: &mut &'a [u8]) -> Result<&'a [u8], String> {
        let end = b
            .iter()
            .position(|c| *c == 0)
            .ok_or("malformed COM_CHANGE_USER: unterminated string")?;
        let (s, rest) = b.split_at(end);
        *b = &rest[1..];
        Ok(s)
    }
    let mut b = body;
    let user = String::from_utf8_lossy(cstr(&mut b)?).into_owned();
    let response = if caps.contains(CapabilityFlags::CLIENT_SECURE_CONNECTION) {
        let (&len, rest) = b
            .split_first()
            .ok_or("malformed COM_CHANGE_USER: no auth response")?;
        let len = usize::from(len);
        if rest.len() < len {
            return Err("malformed COM_CHANGE_USER: truncated auth response".into());
        }
        b = &rest[len..];
        rest[..len].to_vec()
    } else {
        cstr(&mut b)?.to_vec()
    };
    let db = if b.is_empty() {
        None
    } else {
        Some(String::from_utf8_lossy(cstr(&mut b)?).into_owned()).filter(|d| !d.is_empty())
    };
    let mut collation = None;
    let mut plugin = Plugin::Native;
    if b.len() >= 2 {
        collation = Some(u16::from_le_bytes([b[0], b[1]]));
        b = &b[2..];
        if caps.contains(CapabilityFlags::CLIENT_PLUGIN_AUTH) && !b.is_empty() {
            let name = match b.iter().position(|c| *c == 0) {
                Some(end) => &b[..end],
                None => b,
            };
            plugin = Plugin::from_name(Some(name));
        }
    }
    Ok(ChangeUser {
        user,
        response,
        db,
        collation,
        plugin,
    })
}

/// An AuthSwitchRequest to `plugin` (caching_sha2_password or else mysql_native_password)
/// with this salt.
pub fn switch_to(plugin: &Plugin, salt: &[u8; 20]) -> Vec<u8> {
    let name = match plugin {
        Plugin::CachingSha2 => CACHING_SHA2,
        _ => NATIVE,
    };
    let mut data = salt.to_vec();
    data.push(0);
    let mut b = Vec::with_capacity(48);
    AuthSwitchRequest::new(name, data).serialize(&mut b);
    b
}

/// The plugin to switch a client to before verifying, if any: one the server does not verify
/// goes to mysql_native_password; a client that named a plugin the server verifies but sent
/// no scramble for a user with a password (libmariadb does so when the plugin differs from
/// the server's default) is asked again with that plugin.
pub fn needs_switch(
    users: &[User],
    user: &str,
    plugin: &Plugin,
    response: &[u8],
) -> Option<Plugin> {
    let u = users.iter().find(|u| u.name == user);
    match plugin {
        Plugin::Other(_) => Some(Plugin::Native),
        // Only the native hash is known: caching_sha2's scramble cannot be checked with it.
        Plugin::CachingSha2 if u.is_some_and(|u| u.hash.is_some()) => Some(Plugin::Native),
        p if response.is_empty() && u.is_some_and(User::has_password) => Some(p.clone()),
        _ => None,
    }
}

/// Checks an auth response computed with `plugin` against the users; the matching user or
/// `None`. `Plugin::Other` never verifies (the client must be switched first).
pub fn verify<'u>(
    users: &'u [User],
    user: &str,
    plugin: &Plugin,
    salt: &[u8; 20],
    response: &[u8],
) -> Option<&'u User> {
    let u = users.iter().find(|u| u.name == user)?;
    // Some clients end the response with a NUL for an empty password.
    let empty = response.is_empty() || response == [0];
    let ok = if let Some(hash) = &u.hash {
        matches!(plugin, Plugin::Native) && native_matches_hash(salt, response, hash)
    } else if u.password.is_empty() {
        empty && !matches!(plugin, Plugin::Other(_))
    } else {
        match plugin {
            Plugin::Native => scramble_native(salt, u.password.as_bytes())
                .is_some_and(|expected| constant_time_eq(&expected, response)),
            Plugin::CachingSha2 => scramble_sha256(salt, u.password.as_bytes())
                .is_some_and(|expected| constant_time_eq(&expected, response)),
            Plugin::Other(_) => false,
        }
    };
    ok.then_some(u)
}

/// mysql_native_password against the stored SHA1(SHA1(password)): the response is
/// SHA1(password) XOR SHA1(salt + hash), so XOR gives SHA1(password) back, whose SHA1 must be
/// the hash.
fn native_matches_hash(salt: &[u8; 20], response: &[u8], hash: &[u8; 20]) -> bool {
    use sha1::{Digest, Sha1};
    if response.len() != 20 {
        return false;
    }
    let mask = Sha1::new().chain_update(salt).chain_update(hash).finalize();
    let stage1: Vec<u8> = response
        .iter()
        .zip(mask.iter())
        .map(|(a, b)| a ^ b)
        .collect();
    let again = Sha1::digest(&stage1);
    constant_time_eq(&again, hash)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use mysql_common::packets::HandshakePacket;

    #[test]
    fn salts_differ_and_are_printable() {
        let a = new_salt();
        let b = new_salt();
        assert_ne!(a, b);
        assert!(a.iter().all(|c| (0x21..0x7F).contains(c)));
    }

    #[test]
    fn handshake_round_trips_and_native_auth_verifies() {
        let salt = new_salt();
        let bytes = handshake_packet("5.7.99-shardproxy", 9, &salt, false);
        let hp: HandshakePacket<'_> = ParseBuf(&bytes).parse(()).unwrap();
        assert_eq!(hp.connection_id(), 9);
        assert_eq!(&hp.nonce()[..], &salt[..]);
        let users = vec![User::plain("app", "secret")];
        let n = Plugin::Native;
        let good = scramble_native(&salt, b"secret").unwrap();
        assert!(verify(&users, "app", &n, &salt, &good).is_some());
        let bad = scramble_native(&salt, b"wrong").unwrap();
        assert!(verify(&users, "app", &n, &salt, &bad).is_none());
        assert!(verify(&users, "nobody", &n, &salt, &good).is_none());
        assert!(verify(&users, "app", &n, &salt, &[]).is_none());
        assert!(!hp.capabilities().contains(CapabilityFlags::CLIENT_SSL));
    }

    #[test]
    fn a_user_given_by_its_hash_logs_in_with_native_only() {
        use sha1::{Digest, Sha1};
        let salt = new_salt();
        let hash: [u8; 20] = Sha1::digest(Sha1::digest(b"secret")).into();
        let users = vec![User {
            name: "app".into(),
            password: String::new(),
            hash: Some(hash),
            require_tls: false,
        }];
        let n = Plugin::Native;
        let good = scramble_native(&salt, b"secret").unwrap();
        assert!(verify(&users, "app", &n, &salt, &good).is_some());
        let bad = scramble_native(&salt, b"secreT").unwrap();
        assert!(verify(&users, "app", &n, &salt, &bad).is_none());
        assert!(verify(&users, "app", &n, &salt, &[]).is_none());
        // caching_sha2 cannot be checked against the native hash: switch to native.
        let c = Plugin::CachingSha2;
        let sha = scramble_sha256(&salt, b"secret").unwrap();
        assert!(verify(&users, "app", &c, &salt, &sha).is_none());
        assert_eq!(needs_switch(&users, "app", &c, &sha), Some(Plugin::Native));
        assert_eq!(needs_switch(&users, "app", &n, &good), None);
    }

    #[test]
    fn caching_sha2_scrambles_verify_and_others_do_not() {
        let salt = new_salt();
        let users = vec![User::plain("app", "secret"), User::plain("open", "")];
        let c = Plugin::CachingSha2;
        let good = scramble_sha256(&salt, b"secret").unwrap();
        assert!(verify(&users, "app", &c, &salt, &good).is_some());
        let bad = scramble_sha256(&salt, b"Secret").unwrap();
        assert!(verify(&users, "app", &c, &salt, &bad).is_none());
        // A native scramble is not accepted as a sha2 one, nor an unknown plugin's data.
        let native = scramble_native(&salt, b"secret").unwrap();
        assert!(verify(&users, "app", &c, &salt, &native).is_none());
        let other = Plugin::Other("client_ed25519".into());
        assert!(verify(&users, "app", &other, &salt, &good).is_none());
        assert!(verify(&users, "open", &c, &salt, &[]).is_some());
        assert!(verify(&users, "open", &other, &salt, &[]).is_none());
    }

    #[test]
    fn ssl_request_is_told_apart_and_refused_without_tls() {
        let mut p = (CapabilityFlags::CLIENT_SSL | CapabilityFlags::CLIENT_PROTOCOL_41)
            .bits()
            .to_le_bytes()
            .to_vec();
        p.resize(32, 0);
        assert!(matches!(parse_response(&p, true), Ok(Hello::Ssl)));
        assert!(parse_response(&p, false)
            .unwrap_err()
            .contains("does not offer TLS"));
        p[..4].copy_from_slice(&0u32.to_le_bytes());
        assert!(parse_response(&p, true).is_err());
    }

    #[test]
    fn change_user_parses_and_truncation_is_an_error() {
        let caps = CapabilityFlags::CLIENT_SECURE_CONNECTION | CapabilityFlags::CLIENT_PLUGIN_AUTH;
        let mut b = b"bob\0".to_vec();
        b.push(3);
        b.extend_from_slice(b"abc");
        b.extend_from_slice(b"shop\0");
        b.extend_from_slice(&45u16.to_le_bytes());
        b.extend_from_slice(b"caching_sha2_password\0");
        let cu = parse_change_user(&b, caps).unwrap();
        assert_eq!(cu.user, "bob");
        assert_eq!(cu.response, b"abc");
        assert_eq!(cu.db.as_deref(), Some("shop"));
        assert_eq!(cu.collation, Some(45));
        assert_eq!(cu.plugin, Plugin::CachingSha2);
        for cut in 0..b.len() - 30 {
            // Every truncation inside user / response / database fails or parses, never panics.
            let _ = parse_change_user(&b[..cut], caps);
        }
        assert!(parse_change_user(b"bob", caps).is_err());
        assert!(parse_change_user(b"bob\0\x09ab", caps).is_err());
    }
}
