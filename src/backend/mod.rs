//! Backend nodes: one mysql_async pool per node, and backend errors mapped to MySQL errors.

use std::time::Duration;

use mysql_async::{Conn, Pool};

use crate::config::Topology;

/// How long acquiring a connection to a node may take before the statement fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A MySQL error for the client: code, SQLSTATE, message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MyError {
    pub code: u16,
    pub state: String,
    pub message: String,
}

impl MyError {
    pub fn new(code: u16, message: impl Into<String>) -> Self {
        MyError {
            code,
            state: crate::frontend::codec::sqlstate_of(code).to_string(),
            message: message.into(),
        }
    }

    /// A backend error: a server error keeps the node's own code, SQLSTATE and message; any
    /// other failure (connection, protocol) becomes 1105 naming the node.
    pub fn from_backend(node: &str, e: &mysql_async::Error) -> Self {
        match e {
            mysql_async::Error::Server(s) => MyError {
                code: s.code,
                state: s.state.clone(),
                message: s.message.clone(),
            },
            other => MyError::new(1105, format!("shardproxy: node `{node}`: {other}")),
        }
    }

    /// Did the failure leave the backend connection unusable?
    pub fn breaks_connection(e: &mysql_async::Error) -> bool {
        !matches!(e, mysql_async::Error::Server(_))
    }
}

/// The pools of every node, indexed like `Topology::nodes`.
pub struct Backends {
    pools: Vec<Pool>,
    names: Vec<String>,
}

impl Backends {
    pub fn new(topo: &Topology) -> Self {
        Backends {
            pools: topo
                .nodes
                .iter()
                .map(|n| Pool::new(n.opts.clone()))
                .collect(),
            names: topo.nodes.iter().map(|n| n.name.clone()).collect(),
        }
    }

    pub fn name(&self, node: usize) -> &str {
        self.names.get(node).map(String::as_str).unwrap_or("?")
    }

    /// A connection to `node` from its pool.
    pub async fn connect(&self, node: usize) -> Result<Conn, MyError> {
        let pool = self
            .pools
            .get(node)
            .ok_or_else(|| MyError::new(1105, format!("shardproxy: no node #{node}")))?;
        match tokio::time::timeout(CONNECT_TIMEOUT, pool.get_conn()).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(MyError::new(
                1105,
                format!("shardproxy: node `{}` is unavailable: {e}", self.name(node)),
            )),
            Err(_) => Err(MyError::new(
                1105,
                format!(
                    "shardproxy: node `{}` did not accept a connection within {}s",
                    self.name(node),
                    CONNECT_TIMEOUT.as_secs()
                ),
            )),
        }
    }

    /// Closes every pool (at shutdown).
    pub async fn disconnect(self) {
        for p in self.pools {
            let _ = p.disconnect().await;
        }
    }
}
