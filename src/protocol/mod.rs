//! The server side of the MySQL protocol, shared by the two listeners (client sessions in
//! `crate::frontend`, the admin interface in `crate::admin`): the handshake and its password
//! plugins, the codec of the answers' packets, and the client's stream (TCP or TLS).

pub mod auth;
pub mod codec;
pub mod handshake;
pub mod stream;
