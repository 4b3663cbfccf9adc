//! The listener: accepts clients and runs one session task per connection.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::config::Topology;
use crate::frontend::session::Session;
use crate::shared::Shared;

/// Watches a rules file and reloads it when it changes (checked every `every`).
pub async fn watch(shared: Arc<Shared>, path: PathBuf, every: Duration) {
    let stamp = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .map(|m| (m.modified().ok(), m.len()))
    };
    let mut last = stamp(&path);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = stamp(&path);
        if now != last {
            last = now;
            shared.reload_file(&path);
        }
    }
}

/// A bound proxy, ready to serve.
pub struct Server {
    listener: TcpListener,
    admin: Option<TcpListener>,
    metrics: Option<SocketAddr>,
    rules: Option<PathBuf>,
    shared: Arc<Shared>,
}

impl Server {
    pub async fn bind(topo: Topology) -> anyhow::Result<Server> {
        let addr = topo.listen.clone();
        Self::bind_to(topo, &addr).await
    }

    /// Binds clients to an explicit address instead of the rules file's (tests use port 0);
    /// the admin interface, if the rules have one, on its own address.
    pub async fn bind_to(topo: Topology, addr: &str) -> anyhow::Result<Server> {
        let listener = listen(addr)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
        let admin = match &topo.admin {
            Some(a) => Some(
                TcpListener::bind(&a.listen)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot listen on {} (admin): {e}", a.listen))?,
            ),
            None => None,
        };
        let metrics_addr = topo.metrics.as_ref().map(|m| m.listen.clone());
        let tls = match &topo.tls {
            Some(t) => Some(crate::protocol::stream::acceptor(&t.cert, &t.key)?),
            None => None,
        };
        let mut shared = Shared::new(topo);
        shared.tls = tls;
        let shared = Arc::new(shared);
        let metrics = match metrics_addr {
            Some(a) => Some(crate::metrics::serve(&a, shared.metrics.clone())?),
            None => None,
        };
        Ok(Server {
            listener,
            admin,
            metrics,
            rules: None,
            shared,
        })
    }

    /// The rules file this proxy serves: admin changes write new versions of it.
    pub fn with_rules_file(mut self, path: PathBuf) -> Self {
        self.rules = Some(path);
        self
    }

    /// Where `GET /metrics` answers, when the rules have a `[metrics]` section.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics
    }

    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|l| l.local_addr().ok())
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// Accepts clients until the task is dropped.
    pub async fn serve(mut self) -> anyhow::Result<()> {
        info!(addr = %self.local_addr()?, "shardproxy listening");
        open_files_for(&self.shared.topology());
        if let Some(admin) = self.admin.take() {
            tokio::spawn(crate::admin::serve(
                admin,
                self.shared.clone(),
                self.rules.clone(),
            ));
        }
        {
            let shared = self.shared.clone();
            tokio::spawn(async move { shared.learn_base_mode().await });
        }
        tokio::spawn(crate::exec::txn::recovery::run(self.shared.clone()));
        tokio::spawn(crate::exec::txn::deadlock::run(self.shared.clone()));
        tokio::spawn(crate::migrate::driver::run(self.shared.clone()));
        tokio::spawn(crate::shared::load::watch(self.shared.clone()));
        tokio::spawn(crate::migrate::balance::run(self.shared.clone()));
        tokio::spawn(crate::migrate::upkeep::run(self.shared.clone()));
        // The views are known before the first client's statement (within a bound: a
        // metadata node that does not answer leaves them to the next poll).
        let _ =
            tokio::time::timeout(std::time::Duration::from_secs(5), self.shared.poll_views()).await;
        tokio::spawn(crate::shared::views::watch(self.shared.clone()));
        if let (Some(_), Some(file)) = (&self.shared.topology().metadata, &self.rules) {
            crate::admin::watch::first_sync(
                &self.shared,
                file.clone(),
                std::time::Duration::from_secs(5),
            )
            .await;
            tokio::spawn(crate::admin::watch::watch(
                self.shared.clone(),
                file.clone(),
            ));
        }
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
            let Some(slot) = ClientSlot::take(&shared) else {
                too_many(stream, "Too many connections");
                warn!(%peer, "refused a client: [server] max_connections reached");
                continue;
            };
            // Clients of one address still in their handshake are bounded: sockets that never
            // log in cannot fill max_connections for everyone.
            let limit = shared.topology().max_handshakes_per_ip;
            let Some(handshaking) = shared.logins.begin(&peer.ip().to_string(), limit) else {
                too_many(
                    stream,
                    "Too many connections (from this host, not logged in yet)",
                );
                warn!(%peer, limit, "refused a client: [server] max_handshakes_per_ip reached");
                drop(slot);
                continue;
            };
            let id = shared.next_conn_id();
            // The session's socket, shared with its watch for the client hanging up while a
            // statement runs (the session itself is busy with the statement then).
            let stream = crate::protocol::stream::SharedTcp::new(stream);
            let watch = Some(stream.handle());
            tokio::spawn(async move {
                let _slot = slot;
                if let Err(e) = Session::new(stream, shared, id, peer.ip().to_string())
                    .watching(watch)
                    .handshaking(handshaking)
                    .run()
                    .await
                {
                    tracing::debug!(conn = id, %peer, "connection closed: {e}");
                }
            });
        }
    }
}

/// MySQL's answer to a client it will not take: 1040, an error packet where the handshake
/// would be.
fn too_many(stream: tokio::net::TcpStream, message: &'static str) {
    tokio::spawn(async move {
        let mut io = crate::packet::PacketIo::new(stream, 1024);
        io.set_seq(0);
        io.write(&crate::protocol::codec::err(1040, "08004", message));
        let _ = io.flush().await;
    });
}

/// Descriptors the proxy needs besides its clients' and its node connections (listeners,
/// logs, the metadata and recovery connections, connects in flight).
const SPARE_FILES: u64 = 256;

/// Raises the process's open-file limit to what `[server] max_connections` and the node pools
/// need, up to the hard limit (as Go's runtime does for every program, and MariaDB by its
/// `open_files_limit`): a client past the limit is not refused but waits in the listen queue,
/// unaccepted, so a soft limit of 1,024 (the usual default) quietly capped the proxy near a
/// thousand clients. Warns when even the hard limit is short.
fn open_files_for(topo: &crate::config::Topology) {
    let pools: u64 = topo
        .nodes
        .iter()
        .filter(|n| !n.retired)
        .map(|n| n.opts.pool_opts().constraints().max() as u64)
        .sum();
    let need = topo.max_connections as u64 + pools + SPARE_FILES;
    match rlimit::increase_nofile_limit(need) {
        Ok(have) if have < need => warn!(
            limit = have,
            need,
            "the open-file limit is below [server] max_connections + the node pools' pool_max \
             + {SPARE_FILES}: clients past it wait unaccepted; raise the hard limit \
             (ulimit -Hn, LimitNOFILE=) or lower max_connections"
        ),
        Ok(have) => tracing::debug!(limit = have, need, "open-file limit"),
        Err(e) => warn!("could not read or raise the open-file limit: {e}"),
    }
}

/// Connections the kernel completes before the proxy accepts them: a burst of a thousand
/// clients connecting at once overflowed the 128 the listener got by default, and the
/// clients whose handshake the kernel dropped waited on a connection the proxy never saw.
/// (The kernel caps it at `net.core.somaxconn`.)
const LISTEN_BACKLOG: u32 = 4096;

/// The clients' listener on `addr`.
async fn listen(addr: &str) -> std::io::Result<TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        let socket = if a.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(a).and_then(|()| socket.listen(LISTEN_BACKLOG)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to listen on")
    }))
}

/// A client connection counted against `[server] max_connections` while it lives.
struct ClientSlot(Arc<std::sync::atomic::AtomicUsize>);

impl ClientSlot {
    fn take(shared: &Shared) -> Option<Self> {
        use std::sync::atomic::Ordering;
        let max = shared.topology().max_connections;
        let clients = shared.clients.clone();
        clients
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| ClientSlot(clients))
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}
