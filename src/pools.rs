//! Backend nodes' pools of the proxy's own node connections (`crate::node`), with and
//! without CLIENT_FOUND_ROWS, brought in line with each reloaded topology. A session's
//! connections taken from them are `crate::backend`'s.
//!
//! A pool opens at most the node URL's `pool_max` connections (mysql_async's URL option
//! and default, 100), on demand, and closes those idle over a minute beyond `pool_min`. A connection taken is the taker's until it is dropped. It carries what
//! the proxy knows of its session state on the node: the database, the session SETs applied
//! in order, the prepared-statement handles. A connection given back with nothing else on it
//! goes back to the pool as it is (a session holds a node connection only while it needs
//! it, `crate::backend::session`, so connections change hands often); one marked dirty
//! (state the proxy does not track: temporary tables, locks, an open transaction, or any
//! change of the session's state the node flagged in its answers,
//! SERVER_SESSION_STATE_CHANGED under `session_track_state_change`, that was not the
//! proxy's own doing) is reset on the node first (COM_RESET_CONNECTION: transaction rolled back,
//! handles, variables and temporary tables gone); one with an answer left unread, or broken,
//! is closed. An idle connection the node closed meanwhile is noticed without a round trip
//! when it is taken again, and a fresh one is opened instead.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OnceCell, OwnedSemaphorePermit, Semaphore};

use crate::config::Topology;
use crate::error::MyError;
use crate::replica::Health;

pub mod replicas;
use crate::node::stream::Tls;
use crate::node::{Conn, ConnectOpts, Statement};

/// How long the proxy's own chores on a connection may take (tidying one given back,
/// killing a timed-out query).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a connection beyond the pool's `pool_min` may stay idle.
const IDLE_TTL: Duration = Duration::from_secs(60);

/// A connection of a node's pool, open and counted against its `pool_max`, with the state
/// the proxy put on it.
struct Open {
    conn: Conn,
    /// Statements prepared on it, by their text.
    handles: HashMap<String, Statement>,
    /// The session SETs applied on it since it was opened or reset, in order.
    sets: Vec<String>,
    /// It carries state the proxy does not track: reset before anyone else takes it.
    dirty: bool,
    /// Its `LAST_INSERT_ID()` when the proxy last read it (0 when opened or reset).
    insert_id: u64,
}

impl Open {
    fn new(conn: Conn) -> Self {
        Open {
            conn,
            handles: HashMap::new(),
            sets: Vec::new(),
            dirty: false,
            insert_id: 0,
        }
    }

    /// COM_RESET_CONNECTION, then the URL's database again (a reset keeps the current one).
    async fn reset(&mut self, url_db: Option<&str>) -> Result<(), crate::node::WireError> {
        self.handles.clear();
        self.sets.clear();
        self.conn.reset().await?;
        self.dirty = false;
        self.insert_id = 0;
        if self.conn.db() != url_db {
            match url_db {
                Some(db) => {
                    let sql = format!("USE `{}`", db.replace('`', "``"));
                    self.conn.query_drop(&sql).await?;
                    self.conn.set_db(Some(db.to_string()));
                }
                None => self.conn.set_db(None),
            }
        }
        Ok(())
    }
}

/// One node's pool, as one version of the topology describes the node.
pub struct NodePool {
    name: String,
    opts: mysql_async::Opts,
    /// The TLS settings of the URL, built on first use.
    tls: OnceCell<Result<Option<Tls>, String>>,
    /// The node's unix socket, learnt from `@@socket` on the first TCP connection to a
    /// loopback address (as mysql_async's `prefer_socket` does).
    socket: Mutex<Option<String>>,
    /// Held by the connect that learns the socket: a burst of first connects waits for it
    /// instead of each opening a TCP connection it drops (the node counted twice as many).
    learning: tokio::sync::Mutex<bool>,
    /// Idle connections: without and with CLIENT_FOUND_ROWS.
    idle: Mutex<[Vec<Open>; 2]>,
    open: Arc<Semaphore>,
    max: usize,
    /// Idle connections kept however long they idle (the URL's `pool_min`).
    min: usize,
    in_use: AtomicUsize,
    retired: std::sync::atomic::AtomicBool,
    /// `[server] node_timeout_secs`, in ms (0: none), shared with its connections.
    timeout_ms: Arc<std::sync::atomic::AtomicU64>,
    /// A replica's pool: its connections' transactions are READ ONLY.
    read_only: bool,
}

/// A connection taken from a pool: given back when dropped.
pub struct Pooled {
    open: Option<Open>,
    /// Its place among the pool's `pool_max`: a connection in use (or being tidied for the
    /// next user) holds one; an idle connection none, so a session waiting for one takes
    /// the next connection given back, in the order they came.
    permit: Option<OwnedSemaphorePermit>,
    pool: Arc<NodePool>,
    found_rows: bool,
    /// Closed when dropped, never reused (its state is unknown: an XA branch left
    /// prepared, a rollback that failed).
    discard: bool,
}

impl Pooled {
    fn open(&self) -> &Open {
        match &self.open {
            Some(o) => o,
            None => unreachable!("a pooled connection is only empty while dropped"),
        }
    }

    fn open_mut(&mut self) -> &mut Open {
        match &mut self.open {
            Some(o) => o,
            None => unreachable!("a pooled connection is only empty while dropped"),
        }
    }

    /// The connection and its prepared-statement handles.
    pub fn with_handles(&mut self) -> (&mut Conn, &mut HashMap<String, Statement>) {
        let o = self.open_mut();
        (&mut o.conn, &mut o.handles)
    }

    /// The session SETs applied on it, in order.
    pub fn sets(&self) -> &[String] {
        &self.open().sets
    }

    pub fn set_sets(&mut self, sets: &[String]) {
        let o = self.open_mut();
        o.sets.clear();
        o.sets.extend_from_slice(sets);
    }

    /// It now carries state the proxy does not track (reset when given back).
    pub fn mark_dirty(&mut self) {
        self.open_mut().dirty = true;
    }

    pub fn is_dirty(&self) -> bool {
        self.open().dirty
    }

    /// Its `LAST_INSERT_ID()` as the proxy last read it (sessions lend connections to each
    /// other: what a statement did to it tells only against what was there before).
    pub fn insert_id(&self) -> u64 {
        self.open().insert_id
    }

    pub fn set_insert_id(&mut self, id: u64) {
        self.open_mut().insert_id = id;
    }

    /// Closes the connection when it is dropped instead of giving it back: a prepared XA
    /// branch on it stays prepared on the node, and a transaction it was in is rolled
    /// back by the node.
    pub fn discard(&mut self) {
        self.discard = true;
    }

    /// The database the node URL names.
    pub fn url_db(&self) -> Option<String> {
        self.pool.opts.db_name().map(str::to_string)
    }

    /// On the URL's database (a connection given back by a session may be on the session's):
    /// for the proxy's own statements outside any session.
    pub async fn ensure_url_db(&mut self) -> Result<(), crate::node::WireError> {
        let url_db = self.url_db();
        if self.db() == url_db.as_deref() {
            return Ok(());
        }
        match url_db {
            Some(db) => {
                self.query_drop(&format!("USE `{}`", db.replace('`', "``")))
                    .await?;
                self.set_db(Some(db));
                Ok(())
            }
            None => self.reset_state().await,
        }
    }

    /// Back to the state of a fresh connection (COM_RESET_CONNECTION, the URL's database).
    pub async fn reset_state(&mut self) -> Result<(), crate::node::WireError> {
        let url_db = self.pool.opts.db_name().map(str::to_string);
        self.open_mut().reset(url_db.as_deref()).await
    }
}

impl std::ops::Deref for Pooled {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        &self.open().conn
    }
}

impl std::ops::DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut Conn {
        &mut self.open_mut().conn
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool.in_use.fetch_sub(1, Ordering::Relaxed);
        let Some(mut open) = self.open.take() else {
            return;
        };
        if open.conn.timed_out() {
            // The node may still run the query: kill it from a connection of its own.
            let pool = self.pool.clone();
            let id = open.conn.id();
            drop(open);
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let kill = async {
                        let mut c = pool.connect(false).await.ok()?;
                        c.query_drop(&format!("KILL QUERY {id}")).await.ok()
                    };
                    if tokio::time::timeout(CONNECT_TIMEOUT, kill).await.is_err() {
                        tracing::warn!(node = %pool.name, id, "could not kill a timed-out query");
                    }
                });
            }
            return;
        }
        if self.discard || open.conn.is_broken() || self.pool.retired.load(Ordering::Relaxed) {
            return;
        }
        let pool = self.pool.clone();
        let flavour = usize::from(self.found_rows);
        let in_tx = |o: &Open| {
            o.conn
                .status()
                .contains(mysql_common::constants::StatusFlags::SERVER_STATUS_IN_TRANS)
        };
        // A change of the session's state the node flagged and nobody answered for.
        if open.conn.state_changed() {
            open.dirty = true;
        }
        if open.conn.is_clean() && !open.dirty && !in_tx(&open) {
            pool.give_back(flavour, open);
            return;
        }
        // An answer left unread (a merge that stopped early) is read to its end, and state
        // the proxy does not track is reset, off the session's path; whatever takes longer
        // than the connect timeout closes the connection. Outside a runtime (a test's
        // teardown) the connection just closes.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            // The connection keeps its place until it is idle again.
            let permit = self.permit.take();
            rt.spawn(async move {
                let _permit = permit;
                let url_db = pool.opts.db_name();
                let tidy = tokio::time::timeout(CONNECT_TIMEOUT, async {
                    open.conn.drain().await?;
                    if open.dirty || in_tx(&open) || open.conn.take_state_changed() {
                        open.reset(url_db).await?;
                    }
                    Ok::<_, crate::node::WireError>(())
                })
                .await;
                if matches!(tidy, Ok(Ok(()))) && !pool.retired.load(Ordering::Relaxed) {
                    pool.give_back(flavour, open);
                }
            });
        }
    }
}

impl NodePool {
    fn new(
        name: &str,
        opts: &mysql_async::Opts,
        timeout_ms: Arc<std::sync::atomic::AtomicU64>,
        read_only: bool,
    ) -> Arc<Self> {
        let max = opts.pool_opts().constraints().max().max(1);
        Arc::new(NodePool {
            name: name.to_string(),
            opts: opts.clone(),
            tls: OnceCell::new(),
            socket: Mutex::new(opts.socket().map(str::to_string)),
            learning: tokio::sync::Mutex::new(false),
            idle: Mutex::new([Vec::new(), Vec::new()]),
            open: Arc::new(Semaphore::new(max)),
            max,
            min: opts.pool_opts().constraints().min(),
            in_use: AtomicUsize::new(0),
            retired: false.into(),
            timeout_ms,
            read_only,
        })
    }

    /// A connection back to the idle list; the ones idle longer than [`IDLE_TTL`] beyond
    /// the pool's `pool_min` are closed (after a burst the node keeps few connections).
    fn give_back(&self, flavour: usize, mut open: Open) {
        open.conn.idle_since = std::time::Instant::now();
        let mut idle = self.idle_lock();
        idle[flavour].push(open);
        let total: usize = idle.iter().map(Vec::len).sum();
        let mut surplus = total.saturating_sub(self.min);
        for list in idle.iter_mut() {
            // Oldest first: the list is pushed at its end.
            while surplus > 0
                && list
                    .first()
                    .is_some_and(|o| o.conn.idle_since.elapsed() > IDLE_TTL)
            {
                list.remove(0);
                surplus -= 1;
            }
        }
    }

    fn idle_lock(&self) -> std::sync::MutexGuard<'_, [Vec<Open>; 2]> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
        let closing = std::mem::take(&mut *self.idle_lock());
        drop(closing);
    }

    /// An idle connection of the flavour, still alive (dead ones are closed on the way):
    /// the last given back whose SETs are `sets`, else the last given back.
    fn take_idle(&self, flavour: usize, sets: &[String]) -> Option<Open> {
        let mut idle = self.idle_lock();
        let list = &mut idle[flavour];
        loop {
            let at = list
                .iter()
                .rposition(|o| o.sets == sets)
                .or_else(|| list.len().checked_sub(1))?;
            let o = list.remove(at);
            // Every one is checked without a round trip (a read that would block), however
            // briefly it idled: a node killed and started again within a second left its
            // connections of a moment before dead, and the first statement after the
            // restart took one of them and failed (Broken pipe) though the node was back.
            if o.conn.alive() {
                // Counted in use before the idle list is let go: `usage` reads both under
                // the lock and never counts this connection twice.
                self.in_use.fetch_add(1, Ordering::Relaxed);
                return Some(o);
            }
        }
    }

    /// A connection: an idle one, else a new one once the pool has room (closing an idle
    /// one of the other flavour to make it).
    async fn get(self: &Arc<Self>, found_rows: bool, sets: &[String]) -> Result<Pooled, String> {
        let flavour = usize::from(found_rows);
        // A place first (waiters are served in turn), then an idle connection, else a new
        // one: the connections open never outnumber the places.
        let permit = self
            .open
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| "the pool is closed".to_string())?;
        let open = match self.take_idle(flavour, sets) {
            Some(o) => o,
            None => {
                // One of the other flavour idles in the way: it is closed to make room.
                drop(self.idle_lock()[1 - flavour].pop());
                let o = Open::new(self.connect(found_rows).await?);
                self.in_use.fetch_add(1, Ordering::Relaxed);
                o
            }
        };
        Ok(Pooled {
            open: Some(open),
            permit: Some(permit),
            pool: self.clone(),
            found_rows,
            discard: false,
        })
    }

    async fn connect(&self, found_rows: bool) -> Result<Conn, String> {
        let tls = self.tls.get_or_init(|| Tls::of(&self.opts)).await.clone()?;
        let mut opts = ConnectOpts {
            host: self.opts.ip_or_hostname().to_string(),
            port: self.opts.tcp_port(),
            socket: None,
            user: self.opts.user().unwrap_or_default().to_string(),
            pass: self.opts.pass().map(str::to_string),
            db: self.opts.db_name().map(str::to_string),
            tls,
            found_rows,
            timeout_ms: self.timeout_ms.clone(),
            read_only: self.read_only,
        };
        let learn =
            self.opts.prefer_socket() && self.opts.socket().is_none() && loopback(&opts.host);
        let known = || {
            self.socket
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        };
        let mut learning = None;
        if learn && known().is_none() {
            let guard = self.learning.lock().await;
            // Tried once: later connects go by TCP when the node has no usable socket.
            if !*guard {
                learning = Some(guard);
            }
        }
        let socket = known();
        if let Some(path) = socket {
            opts.socket = Some(path);
            match Conn::connect(&opts).await {
                Ok(c) => return Ok(c),
                // A socket named in the URL is the only way; a learnt one may be stale.
                Err(e) if self.opts.socket().is_some() => return Err(e.to_string()),
                Err(_) => opts.socket = None,
            }
        }
        let mut conn = Conn::connect(&opts).await.map_err(|e| e.to_string())?;
        if let Some(mut tried) = learning {
            *tried = true;
            if let Ok(path) = conn.query_text("SELECT @@socket").await {
                let path = path.filter(|p| !p.is_empty() && std::path::Path::new(p).exists());
                if let Some(path) = path {
                    opts.socket = Some(path.clone());
                    if let Ok(c) = Conn::connect(&opts).await {
                        *self.socket.lock().unwrap_or_else(|e| e.into_inner()) = Some(path);
                        return Ok(c);
                    }
                }
            }
        }
        Ok(conn)
    }
}

fn loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<IpAddr>()
            .map(|ip| ip.is_loopback())
            .unwrap_or(false)
}

/// One node's pool, as the topology in force describes the node.
#[derive(Clone)]
struct Entry {
    name: String,
    url: String,
    pool: Option<Arc<NodePool>>,
    /// The last failure seen on this node, for SHOW NODES.
    last_error: Option<String>,
    /// Its read replicas, in the rules file's order.
    replicas: Vec<ReplicaEntry>,
    /// The next replica in turn (round robin).
    turn: Arc<AtomicUsize>,
}

/// One replica of a node (its pool and check: `replicas`).
#[derive(Clone)]
struct ReplicaEntry {
    url: String,
    pool: Arc<NodePool>,
    health: Arc<Health>,
}

/// The pools of every node, indexed like `Topology::nodes` (indexes are stable across
/// reloads, see `Topology::align_to`).
pub struct Backends {
    entries: std::sync::RwLock<Vec<Entry>>,
    /// `[server] node_timeout_secs` of the topology in force, in ms (0: none).
    timeout_ms: Arc<std::sync::atomic::AtomicU64>,
    /// `[server] node_wait_secs` of the topology in force, in ms.
    wait_ms: std::sync::atomic::AtomicU64,
    /// `[replicas] check_ms` of the topology in force.
    check_ms: Arc<std::sync::atomic::AtomicU64>,
    /// When the topology in force was applied: a replica serves reads only once it was
    /// seen in sync after that (a moved slot's rows reached its new node before).
    applied_at: Mutex<std::time::Instant>,
}

impl Backends {
    pub fn new(topo: &Topology) -> Self {
        let b = Backends {
            entries: std::sync::RwLock::new(Vec::new()),
            timeout_ms: Default::default(),
            wait_ms: Default::default(),
            check_ms: Default::default(),
            applied_at: Mutex::new(std::time::Instant::now()),
        };
        b.apply(topo);
        b
    }

    /// Brings the pools in line with a (new) topology: pools for new nodes, a fresh pool for
    /// a node whose URL changed, and retired nodes' pools drained. Connections sessions hold
    /// stay theirs until they give them back (then they close).
    pub fn apply(&self, topo: &Topology) {
        let ms = topo
            .node_timeout
            .map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
        self.timeout_ms.store(ms, Ordering::Relaxed);
        let wait = u64::try_from(topo.node_wait.as_millis()).unwrap_or(u64::MAX);
        self.wait_ms.store(wait, Ordering::Relaxed);
        self.check_ms
            .store(topo.replicas.check_ms, Ordering::Relaxed);
        *self.applied_at.lock().unwrap_or_else(|e| e.into_inner()) = std::time::Instant::now();
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        for (i, n) in topo.nodes.iter().enumerate() {
            let fresh = || Entry {
                name: n.name.clone(),
                url: n.url.clone(),
                pool: (!n.retired)
                    .then(|| NodePool::new(&n.name, &n.opts, self.timeout_ms.clone(), false)),
                last_error: None,
                replicas: Vec::new(),
                turn: Arc::new(AtomicUsize::new(0)),
            };
            match entries.get_mut(i) {
                None => entries.push(fresh()),
                Some(e) if n.retired => {
                    if let Some(p) = e.pool.take() {
                        p.retire();
                    }
                }
                Some(e) if e.url != n.url || e.pool.is_none() => {
                    if let Some(p) = e.pool.take() {
                        p.retire();
                    }
                    *e = fresh();
                }
                Some(_) => {}
            }
            if let Some(e) = entries.get_mut(i) {
                self.apply_replicas(e, n, topo.replicas.max_lag_ms);
            }
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
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        let p = entries.get(node)?.pool.as_ref()?;
        let idle = p.idle_lock();
        let n = idle.iter().map(Vec::len).sum();
        Some((p.in_use.load(Ordering::Relaxed), n))
    }

    /// A connection to `node` from its pool.
    pub async fn connect(&self, node: usize) -> Result<Pooled, MyError> {
        self.connect_with(node, false, &[]).await
    }

    /// A connection to `node`, with CLIENT_FOUND_ROWS if `found_rows`; an idle one that has
    /// exactly the session SETs `sets` applied if there is one.
    pub async fn connect_with(
        &self,
        node: usize,
        found_rows: bool,
        sets: &[String],
    ) -> Result<Pooled, MyError> {
        let pool = self.pool_of(node, None)?;
        let r = self.take_from(&pool, found_rows, sets).await;
        if let Err(e) = &r {
            self.note_error(node, &e.message);
        }
        r
    }

    /// The pool of `node`'s primary, or of its replica `replica`.
    fn pool_of(&self, node: usize, replica: Option<usize>) -> Result<Arc<NodePool>, MyError> {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        let e = entries.get(node);
        match replica {
            None => e.and_then(|e| e.pool.clone()),
            Some(r) => e.and_then(|e| e.replicas.get(r)).map(|r| r.pool.clone()),
        }
        .ok_or_else(|| {
            let what = replica.map_or_else(String::new, |r| format!("replica {} of ", r + 1));
            MyError::new(
                1105,
                format!("shardproxy: {what}node #{node} is not in service"),
            )
        })
    }

    /// A connection from `pool` within `node_wait_secs`.
    async fn take_from(
        &self,
        pool: &Arc<NodePool>,
        found_rows: bool,
        sets: &[String],
    ) -> Result<Pooled, MyError> {
        let wait = Duration::from_millis(self.wait_ms.load(Ordering::Relaxed).max(1));
        match tokio::time::timeout(wait, pool.get(found_rows, sets)).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(MyError::new(
                1105,
                format!("shardproxy: node `{}` is unavailable: {e}", pool.name),
            )),
            Err(_) => Err(MyError::new(
                1105,
                format!(
                    "shardproxy: node `{}` did not accept a connection within {}s (node_wait_secs){}",
                    pool.name,
                    wait.as_secs(),
                    if pool.open.available_permits() == 0 {
                        format!(" (all {} of its pool's connections are in use)", pool.max)
                    } else {
                        String::new()
                    }
                ),
            )),
        }
    }

    /// Closes every pool (at shutdown).
    pub async fn disconnect(&self) {
        let pools: Vec<Arc<NodePool>> = self
            .entries
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
            .filter_map(|e| e.pool.take())
            .collect();
        for p in pools {
            p.retire();
        }
    }
}
