//! Backend nodes' pools: mysql_async pools per node (with and without CLIENT_FOUND_ROWS),
//! brought in line with each reloaded topology. A session's connections to them are
//! `crate::backend`'s.

use std::time::Duration;

use mysql_async::{Conn, Pool};

use crate::config::Topology;

/// How long acquiring a connection to a node may take before the statement fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

use crate::error::MyError;

/// Options of the connections sessions use: no statement cache of mysql_async's own, as the
/// session keeps its prepared-statement handles itself (`backend::session::NodeConn`) and an
/// eviction there would close a handle still in use; and always reset on the way back to the
/// pool (whatever the URL says), which deallocates the handles the session left on the node.
fn session_opts(opts: &mysql_async::Opts) -> mysql_async::OptsBuilder {
    mysql_async::OptsBuilder::from_opts(opts.clone())
        .stmt_cache_size(0)
        .pool_opts(opts.pool_opts().clone().with_reset_connection(true))
}

/// One node's pool, as the topology in force describes the node.
#[derive(Clone)]
struct Entry {
    name: String,
    url: String,
    pool: Option<Pool>,
    /// Connections with CLIENT_FOUND_ROWS (an UPDATE's affected rows count the rows it
    /// matched), for the clients that ask for it (mysql2, Connector/J do).
    found_rows: Option<Pool>,
    /// The last failure seen on this node, for SHOW NODES.
    last_error: Option<String>,
}

/// The pools of every node, indexed like `Topology::nodes` (indexes are stable across
/// reloads, see `Topology::align_to`).
pub struct Backends {
    entries: std::sync::RwLock<Vec<Entry>>,
}

impl Backends {
    pub fn new(topo: &Topology) -> Self {
        let b = Backends {
            entries: std::sync::RwLock::new(Vec::new()),
        };
        b.apply(topo);
        b
    }

    /// Brings the pools in line with a (new) topology: pools for new nodes, a fresh pool for
    /// a node whose URL changed, and retired nodes' pools drained. Connections sessions hold
    /// stay theirs until they give them back.
    pub fn apply(&self, topo: &Topology) {
        let mut retire = Vec::new();
        {
            let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
            for (i, n) in topo.nodes.iter().enumerate() {
                let fresh = || Entry {
                    name: n.name.clone(),
                    url: n.url.clone(),
                    pool: (!n.retired).then(|| Pool::new(session_opts(&n.opts))),
                    found_rows: (!n.retired)
                        .then(|| Pool::new(session_opts(&n.opts).client_found_rows(true))),
                    last_error: None,
                };
                match entries.get_mut(i) {
                    None => entries.push(fresh()),
                    Some(e) if n.retired => {
                        retire.extend(e.pool.take());
                        retire.extend(e.found_rows.take());
                    }
                    Some(e) if e.url != n.url || e.pool.is_none() => {
                        retire.extend(e.pool.take());
                        retire.extend(e.found_rows.take());
                        *e = fresh();
                    }
                    Some(_) => {}
                }
            }
        }
        for p in retire {
            tokio::spawn(async move {
                let _ = p.disconnect().await;
            });
        }
    }

    pub fn name(&self, node: usize) -> String {
        self.entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(node)
            .map(|e| e.name.clone())
            .unwrap_or_else(|| "?".into())
    }

    /// Remembers a failure on `node` (shown by the admin's SHOW NODES).
    pub fn note_error(&self, node: usize, message: &str) {
        if let Some(e) = self
            .entries
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(node)
        {
            e.last_error = Some(message.to_string());
        }
    }

    pub fn last_error(&self, node: usize) -> Option<String> {
        self.entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(node)
            .and_then(|e| e.last_error.clone())
    }

    /// Connections of `node`'s pool: (in use by sessions, idle in the pool).
    pub fn pool_usage(&self, node: usize) -> Option<(usize, usize)> {
        use std::sync::atomic::Ordering::Relaxed;
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        let e = entries.get(node)?;
        let mut usage = None;
        for p in [&e.pool, &e.found_rows].into_iter().flatten() {
            let m = p.metrics();
            let (u, i) = usage.unwrap_or((0, 0));
            usage = Some((
                u + m.connections_in_use.load(Relaxed),
                i + m.connections_in_pool.load(Relaxed),
            ));
        }
        usage
    }

    /// A connection to `node` from its pool.
    pub async fn connect(&self, node: usize) -> Result<Conn, MyError> {
        self.connect_with(node, false).await
    }

    /// A connection to `node`, with CLIENT_FOUND_ROWS if `found_rows`.
    pub async fn connect_with(&self, node: usize, found_rows: bool) -> Result<Conn, MyError> {
        let pool = self
            .entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(node)
            .and_then(|e| {
                if found_rows {
                    e.found_rows.clone()
                } else {
                    e.pool.clone()
                }
            })
            .ok_or_else(|| {
                MyError::new(1105, format!("shardproxy: node #{node} is not in service"))
            })?;
        let r = self.connect_to(node, &pool).await;
        if let Err(e) = &r {
            self.note_error(node, &e.message);
        }
        r
    }

    async fn connect_to(&self, node: usize, pool: &Pool) -> Result<Conn, MyError> {
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
    pub async fn disconnect(&self) {
        let pools: Vec<Pool> = self
            .entries
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
            .flat_map(|e| e.pool.take().into_iter().chain(e.found_rows.take()))
            .collect();
        for p in pools {
            let _ = p.disconnect().await;
        }
    }
}
