//! Connection phase: the initial handshake with a fresh 20-byte salt, and
//! mysql_native_password verification (clients that offer another plugin are switched to it).

use mysql_common::constants::{CapabilityFlags, StatusFlags};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{AuthPlugin, AuthSwitchRequest, HandshakePacket, HandshakeResponse};
use mysql_common::proto::MySerialize;
use mysql_common::scramble::scramble_native;
use rand::Rng;

use crate::config::User;

/// What this server offers; the session uses the intersection with the client's flags.
pub fn server_capabilities() -> CapabilityFlags {
    CapabilityFlags::CLIENT_LONG_PASSWORD
        | CapabilityFlags::CLIENT_LONG_FLAG
        | CapabilityFlags::CLIENT_CONNECT_WITH_DB
        | CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | CapabilityFlags::CLIENT_CONNECT_ATTRS
        | CapabilityFlags::CLIENT_IGNORE_SPACE
}

pub const NATIVE: &[u8] = b"mysql_native_password";
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

pub fn handshake_packet(server_version: &str, conn_id: u32, salt: &[u8; 20]) -> Vec<u8> {
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
        server_capabilities(),
        DEFAULT_COLLATION,
        StatusFlags::SERVER_STATUS_AUTOCOMMIT,
        Some(NATIVE),
    );
    let mut b = Vec::with_capacity(128);
    p.serialize(&mut b);
    b
}

/// The parts of a client's handshake response the session needs.
#[derive(Debug, Clone)]
pub struct ClientHello {
    pub capabilities: CapabilityFlags,
    pub user: String,
    pub db: Option<String>,
    pub collation: u8,
    /// The auth response, if it was computed with mysql_native_password.
    pub native_response: Option<Vec<u8>>,
}

pub fn parse_response(payload: &[u8]) -> Result<ClientHello, String> {
    if payload.len() == 32 {
        return Err("this server does not offer TLS; connect without SSL".into());
    }
    let resp: HandshakeResponse<'_> = ParseBuf(payload)
        .parse(())
        .map_err(|e| format!("malformed handshake response: {e}"))?;
    let native = match resp.auth_plugin() {
        None | Some(AuthPlugin::MysqlNativePassword) => true,
        Some(_) => false,
    };
    Ok(ClientHello {
        capabilities: resp.capabilities() & server_capabilities(),
        user: String::from_utf8_lossy(resp.user()).into_owned(),
        db: resp
            .db_name()
            .filter(|d| !d.is_empty())
            .map(|d| String::from_utf8_lossy(d).into_owned()),
        collation: resp.collation(),
        native_response: native.then(|| resp.scramble_buf().to_vec()),
    })
}

/// An AuthSwitchRequest to mysql_native_password with the same salt.
pub fn switch_request(salt: &[u8; 20]) -> Vec<u8> {
    let mut data = salt.to_vec();
    data.push(0);
    let mut b = Vec::with_capacity(48);
    AuthSwitchRequest::new(NATIVE, data).serialize(&mut b);
    b
}

/// Checks a mysql_native_password response against the users; the matching user or `None`.
pub fn verify<'u>(
    users: &'u [User],
    user: &str,
    salt: &[u8; 20],
    response: &[u8],
) -> Option<&'u User> {
    let u = users.iter().find(|u| u.name == user)?;
    let ok = if u.password.is_empty() {
        response.is_empty()
    } else {
        match scramble_native(salt, u.password.as_bytes()) {
            Some(expected) => constant_time_eq(&expected, response),
            None => false,
        }
    };
    ok.then_some(u)
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
        let bytes = handshake_packet("5.7.99-shardproxy", 9, &salt);
        let hp: HandshakePacket<'_> = ParseBuf(&bytes).parse(()).unwrap();
        assert_eq!(hp.connection_id(), 9);
        assert_eq!(&hp.nonce()[..], &salt[..]);
        let users = vec![User {
            name: "app".into(),
            password: "secret".into(),
        }];
        let good = scramble_native(&salt, b"secret").unwrap();
        assert!(verify(&users, "app", &salt, &good).is_some());
        let bad = scramble_native(&salt, b"wrong").unwrap();
        assert!(verify(&users, "app", &salt, &bad).is_none());
        assert!(verify(&users, "nobody", &salt, &good).is_none());
        assert!(verify(&users, "app", &salt, &[]).is_none());
    }
}
