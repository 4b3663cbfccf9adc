//! The proxy's own client side of the MySQL protocol, to the nodes, on `mysql_common`'s
//! packet types (as the frontend is): connect and authenticate (`mysql_native_password`,
//! `caching_sha2_password`, TLS), run text statements, prepare and execute, and read results
//! packet by packet, so a single node's rows can be relayed to the client as they came.
//!
//! Why not mysql_async, which the proxy used before: it decodes every row into values and
//! offers no way to read the packets themselves, so a relay had to decode and encode each
//! row again; and its pool hides the connection state the proxy must control (resets, the
//! per-connection statement handles, the statement being read). mysql_async still serves the
//! metadata schema and the tests, where none of that matters.
//!
//! `conn` is one connection; `stream` the socket under it (TCP, unix, TLS); the pools of
//! these connections are `crate::pools`.

pub mod conn;
pub mod stream;

pub use conn::{Conn, ConnectOpts, Head, RowEvent, Statement, WireError};
