//! The listener: accepts clients and runs one session task per connection.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::backend::Backends;
use crate::config::Topology;
use crate::frontend::session::Session;

/// What every session shares: the current routing snapshot and the node pools.
pub struct Shared {
    topology: ArcSwap<Topology>,
    pub backends: Backends,
    pub server_version: String,
    /// Largest client packet accepted.
    pub max_packet: usize,
    next_conn_id: AtomicU32,
}

impl Shared {
    pub fn new(topo: Topology) -> Self {
        let backends = Backends::new(&topo);
        Shared {
            topology: ArcSwap::from_pointee(topo),
            backends,
            server_version: format!("5.7.99-shardproxy-{}", env!("CARGO_PKG_VERSION")),
            max_packet: 64 << 20,
            next_conn_id: AtomicU32::new(1),
        }
    }

    /// The routing snapshot in force; a statement takes it once and keeps it to the end.
    pub fn topology(&self) -> Arc<Topology> {
        self.topology.load_full()
    }
}

/// A bound proxy, ready to serve.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl Server {
    pub async fn bind(topo: Topology) -> anyhow::Result<Server> {
        let listener = TcpListener::bind(&topo.listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", topo.listen))?;
        Ok(Server {
            listener,
            shared: Arc::new(Shared::new(topo)),
        })
    }

    /// Binds to an explicit address instead of the rules file's (tests use port 0).
    pub async fn bind_to(topo: Topology, addr: &str) -> anyhow::Result<Server> {
        let listener = TcpListener::bind(addr).await?;
        Ok(Server {
            listener,
            shared: Arc::new(Shared::new(topo)),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Accepts clients until the task is dropped.
    pub async fn serve(self) -> anyhow::Result<()> {
        info!(addr = %self.local_addr()?, "shardproxy listening");
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    warn!("accept failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let shared = self.shared.clone();
            let id = shared.next_conn_id.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                if let Err(e) = Session::new(stream, shared, id, peer.ip().to_string())
                    .run()
                    .await
                {
                    tracing::debug!(conn = id, %peer, "connection closed: {e}");
                }
            });
        }
    }
}
