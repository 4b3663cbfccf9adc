//! The server side of the MySQL protocol, on mysql_common's packet types.

pub mod auth;
pub mod codec;
pub mod handshake;
pub mod session;
pub mod sink;
pub mod split;
pub mod stream;
