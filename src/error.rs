//! The one error a client sees: a MySQL error code, its SQLSTATE and a message.
//!
//! Every layer (planning, execution, the node connections, the admin listener) fails with
//! [`MyError`]; the frontend writes it as an ERR packet. The codes the proxy raises itself are
//! named here.

use thiserror::Error;

/// ER_UNKNOWN_ERROR: the proxy's own failures (a node unreachable, a lookup failed).
pub const ER_UNKNOWN: u16 = 1105;
/// ER_NOT_SUPPORTED_YET: what the proxy cannot answer correctly.
pub const ER_NOT_SUPPORTED_YET: u16 = 1235;
/// ER_PARSE_ERROR.
pub const ER_PARSE_ERROR: u16 = 1064;
/// ER_LOCK_DEADLOCK: also the answer when a transaction's node connection was lost.
pub const ER_LOCK_DEADLOCK: u16 = 1213;
/// MySQL's ER_LOCK_WAIT_TIMEOUT.
pub const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;
/// ER_ERROR_DURING_COMMIT: a transaction over several nodes could not commit.
pub const ER_ERROR_DURING_COMMIT: u16 = 1180;
/// ER_ACCESS_DENIED_ERROR.
pub const ER_ACCESS_DENIED: u16 = 1045;
/// ER_HANDSHAKE_ERROR (bad handshake).
pub const ER_HANDSHAKE: u16 = 1043;
/// ER_UNKNOWN_COM_ERROR: an unknown or malformed command.
pub const ER_UNKNOWN_COM: u16 = 1047;
/// ER_WRONG_ARGUMENTS: malformed COM_STMT_EXECUTE parameters.
pub const ER_WRONG_ARGUMENTS: u16 = 1210;
/// ER_UNKNOWN_STMT_HANDLER.
pub const ER_UNKNOWN_STMT_HANDLER: u16 = 1243;
/// A table the node does not have.
pub const ER_NO_SUCH_TABLE: u16 = 1146;

/// A MySQL error for the client: code, SQLSTATE, message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("ERROR {code} ({state}): {message}")]
pub struct MyError {
    pub code: u16,
    pub state: String,
    pub message: String,
    /// A node raised it (its own code and message, relayed): the node connection's
    /// diagnostics area holds it. Otherwise the proxy raised it, and only the proxy can
    /// answer `SHOW WARNINGS` about it.
    pub from_node: bool,
}

impl MyError {
    pub fn new(code: u16, message: impl Into<String>) -> Self {
        MyError {
            code,
            state: sqlstate_of(code).to_string(),
            message: message.into(),
            from_node: false,
        }
    }

    /// ER_NOT_SUPPORTED_YET with the reason.
    pub fn unsupported(message: impl Into<String>) -> Self {
        MyError::new(ER_NOT_SUPPORTED_YET, message)
    }

    /// The proxy's own failure (1105).
    pub fn internal(message: impl Into<String>) -> Self {
        MyError::new(ER_UNKNOWN, message)
    }

    /// A node connection's failure: a server error keeps the node's own code, SQLSTATE and
    /// message; any other (connection, protocol) becomes 1105 naming the node.
    pub fn from_wire(node: &str, e: &crate::node::WireError) -> Self {
        match e {
            crate::node::WireError::Server {
                code,
                state,
                message,
            } => MyError {
                code: *code,
                state: state.clone(),
                message: message.clone(),
                from_node: true,
            },
            other => MyError::new(ER_UNKNOWN, format!("shardproxy: node `{node}`: {other}")),
        }
    }
}

/// The SQLSTATE MySQL uses for the codes the proxy raises itself.
pub fn sqlstate_of(code: u16) -> &'static str {
    match code {
        ER_ACCESS_DENIED => "28000",
        ER_PARSE_ERROR | 1149 | 1305 | ER_NOT_SUPPORTED_YET => "42000",
        1046 => "3D000",
        1136 => "21S01",
        1146 | 1051 | 4092 => "42S02",
        1050 => "42S01",
        // ER_DUP_ENTRY (a unique global index's duplicate), ER_DUP_KEY.
        1062 | 1022 => "23000",
        1060 => "42S21",
        ER_UNKNOWN_COM | ER_HANDSHAKE => "08S01",
        ER_LOCK_DEADLOCK => "40001",
        1927 => "70100",
        1153 => "08S01",
        _ => "HY000",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_get_mysqls_sqlstate() {
        assert_eq!(MyError::unsupported("x").state, "42000");
        assert_eq!(MyError::new(ER_ACCESS_DENIED, "x").state, "28000");
        assert_eq!(MyError::internal("x").state, "HY000");
        assert_eq!(MyError::new(1062, "x").state, "23000");
        let server = crate::node::WireError::Server {
            code: 1146,
            message: "Table 'shop.t' doesn't exist".into(),
            state: "42S02".into(),
        };
        let e = MyError::from_wire("ds0", &server);
        assert_eq!((e.code, e.state.as_str()), (1146, "42S02"));
        assert!(!server.breaks());
        let gone = crate::node::WireError::Io(std::io::ErrorKind::UnexpectedEof.into());
        assert!(gone.breaks());
        assert_eq!(MyError::from_wire("ds0", &gone).code, 1105);
    }
}
