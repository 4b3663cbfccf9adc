//! Shared harness for the integration tests (each test binary does `mod common;`).
//!
//! - [`Cluster::shared`] starts N MariaDB nodes once per test binary, from one template datadir
//!   made by `mariadb-install-db`. Every `mariadbd` runs under a small `sh` watchdog that kills
//!   it as soon as the test process is gone (statics are never dropped), and a reaper removes
//!   the temp dir afterwards.
//! - [`start_proxy`] runs a shardproxy over the cluster on its own thread and tokio runtime, so
//!   it serves every `#[tokio::test]` (each has its own runtime) and stops when dropped.
//! - Slot helpers find keys that land on a given node.
#![allow(dead_code)]

pub mod indexes;
pub mod moves;
pub mod replication;
pub mod workload;

use std::fmt::Debug;
use std::fs;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mysql_async::prelude::Queryable;
use mysql_async::{Pool, Value};
use shardproxy::config::Topology;
use shardproxy::routing::slot::slot_of;
use shardproxy::server::Server;
use shardproxy::shared::Shared;

/// How long a node may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a node may take to shut down on SIGTERM before it gets SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `mariadbd` (the arguments after PARENT and PIDFILE) and kills it with SIGKILL as soon as
/// process PARENT (the test binary) is gone. Exits when mariadbd exits.
const WATCHDOG: &str = r#"
trap '' INT HUP
parent=$1; pidfile=$2; shift 2
"$@" &
m=$!
echo "$m" > "$pidfile"
(
  while kill -0 "$parent" 2>/dev/null && kill -0 "$m" 2>/dev/null; do sleep 0.2; done
  kill -0 "$parent" 2>/dev/null || kill -9 "$m" 2>/dev/null
) &
w=$!
wait "$m"
kill "$w" 2>/dev/null
exit 0
"#;

/// Waits until process PARENT is gone, then until no node of DIR runs, then removes DIR.
const REAPER: &str = r#"
trap '' INT HUP
parent=$1; dir=$2
while kill -0 "$parent" 2>/dev/null; do sleep 0.5; done
i=0
while [ "$i" -lt 150 ]; do
  alive=0
  for f in "$dir"/node*.pid; do
    [ -f "$f" ] || continue
    p=$(cat "$f" 2>/dev/null)
    [ -n "$p" ] && kill -0 "$p" 2>/dev/null && alive=1
  done
  [ "$alive" -eq 0 ] && break
  sleep 0.2
  i=$((i + 1))
done
rm -rf "$dir"
"#;

/// Run as the first statements of the template datadir (mirrors scripts/cluster.sh).
const INIT_SQL: &str = "FLUSH PRIVILEGES;
ALTER USER 'root'@'localhost' IDENTIFIED BY 'root';
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY 'root';
ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY 'root';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY 'root';
ALTER USER 'root'@'%' IDENTIFIED BY 'root';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
DELETE FROM mysql.global_priv WHERE User = 'root' AND Host NOT IN ('localhost', '127.0.0.1', '%');
FLUSH PRIVILEGES;
";

/// N local MariaDB nodes, each with an empty database `shop` and user root/root.
pub struct Cluster {
    pub ports: Vec<u16>,
    /// The temp dir holding the datadirs (`nodeI/`), error logs (`nodeI.err`) and pid files.
    pub dir: PathBuf,
    mariadbd: PathBuf,
    /// The watchdog `sh` of each running node.
    watchdogs: Vec<Mutex<Option<Child>>>,
    /// Nodes write a ROW binary log (`binlog.*` in their datadirs); see [`Cluster::shared_binlog`].
    binlog: bool,
    _reaper: Child,
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();
static BINLOG_CLUSTER: OnceLock<Cluster> = OnceLock::new();

impl Cluster {
    /// The cluster of this test binary, started on first use with `n` nodes.
    pub fn shared(n: usize) -> &'static Cluster {
        Self::sized(CLUSTER.get_or_init(|| Cluster::start(n, false)), n)
    }

    /// A second cluster of this test binary, apart from [`Cluster::shared`], whose nodes write
    /// a binary log: `--log-bin=<datadir>/binlog --binlog-format=ROW --server-id=<i+1>`
    /// (also after a restart).
    pub fn shared_binlog(n: usize) -> &'static Cluster {
        Self::sized(BINLOG_CLUSTER.get_or_init(|| Cluster::start(n, true)), n)
    }

    fn sized(c: &'static Cluster, n: usize) -> &'static Cluster {
        assert_eq!(
            c.ports.len(),
            n,
            "this test binary's cluster was started with {} nodes",
            c.ports.len()
        );
        c
    }

    fn start(n: usize, binlog: bool) -> Cluster {
        assert!(n >= 1, "a cluster needs at least one node");
        let t0 = Instant::now();
        let mariadbd = find_prog("mariadbd");
        let install_db = find_prog("mariadb-install-db");
        let dir = tempfile::Builder::new()
            .prefix("shardproxy-it-")
            .tempdir()
            .expect("create a temp dir")
            .keep();
        // Removes the temp dir once this process and its nodes are gone (so it is never
        // waited for: it outlives this process).
        let reaper = Command::new("sh")
            .arg("-c")
            .arg(REAPER)
            .arg("sh")
            .arg(std::process::id().to_string())
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the temp dir reaper");

        // Every node offers TLS (a client may still connect without): a self-signed
        // certificate for 127.0.0.1.
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
            .expect("generate a node certificate");
        fs::write(dir.join("node-cert.pem"), ck.cert.pem()).expect("write node cert");
        fs::write(dir.join("node-key.pem"), ck.key_pair.serialize_pem()).expect("write node key");
        let template = cached_template(&install_db, &mariadbd);
        for i in 0..n {
            let status = Command::new("cp")
                .arg("-a")
                .arg(&template)
                .arg(dir.join(format!("node{i}")))
                .status()
                .expect("run cp");
            assert!(status.success(), "copying the template datadir failed");
        }

        let t_copied = t0.elapsed();
        let mut cluster = Cluster {
            ports: free_ports(n),
            dir,
            mariadbd,
            watchdogs: (0..n).map(|_| Mutex::new(None)).collect(),
            binlog,
            _reaper: reaper,
        };
        // Start every node, then wait for them all: they boot in parallel. A port taken in the
        // meantime by someone else gets one more try on a new port.
        for i in 0..n {
            cluster.spawn_node(i);
        }
        for i in 0..n {
            if let Err(e) = cluster.wait_ready(i) {
                if e.contains("Address already in use") || e.contains("Bind on TCP/IP port") {
                    cluster.ports[i] = free_ports(1)[0];
                    cluster.spawn_node(i);
                    cluster.wait_ready(i).unwrap_or_else(|e| panic!("{e}"));
                } else {
                    panic!("{e}");
                }
            }
        }
        let urls: Vec<String> = (0..n).map(|i| cluster.root_url(i, "")).collect();
        let dirs: Vec<PathBuf> = (0..n).map(|i| cluster.datadir(i)).collect();
        block_on(async move {
            for (url, datadir) in urls.iter().zip(dirs) {
                let mut conn =
                    mysql_async::Conn::new(mysql_async::Opts::from_url(url).expect("node URL"))
                        .await
                        .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
                // The server answering is ours, not some other one on the same port.
                let answer: Option<String> = conn
                    .query_first("SELECT @@datadir")
                    .await
                    .expect("SELECT @@datadir");
                let answer = answer.unwrap_or_default();
                let real = |p: &Path| fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
                assert_eq!(
                    real(Path::new(answer.trim_end_matches('/'))),
                    real(&datadir),
                    "{url} is served by another MariaDB"
                );
                conn.query_drop(
                    "CREATE DATABASE IF NOT EXISTS shop CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
                )
                .await
                .expect("CREATE DATABASE shop");
                conn.disconnect().await.ok();
            }
        });
        eprintln!(
            "test cluster: {n} MariaDB nodes on ports {:?} in {} (datadirs ready {:.1}s, all up {:.1}s)",
            cluster.ports,
            cluster.dir.display(),
            t_copied.as_secs_f64(),
            t0.elapsed().as_secs_f64()
        );
        cluster
    }

    pub fn len(&self) -> usize {
        self.ports.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    fn datadir(&self, i: usize) -> PathBuf {
        self.dir.join(format!("node{i}"))
    }

    fn err_log(&self, i: usize) -> PathBuf {
        self.dir.join(format!("node{i}.err"))
    }

    fn pid_file(&self, i: usize) -> PathBuf {
        self.dir.join(format!("node{i}.pid"))
    }

    pub fn root_url(&self, i: usize, db: &str) -> String {
        format!("mysql://root:root@127.0.0.1:{}/{db}", self.ports[i])
    }

    /// `mysql://root:root@127.0.0.1:PORT/shop` of node `i`.
    pub fn url(&self, i: usize) -> String {
        self.root_url(i, "shop")
    }

    /// A pool straight to node `i` (database `shop`), bypassing the proxy.
    pub fn direct(&self, i: usize) -> Pool {
        Pool::new(mysql_async::Opts::from_url(&self.url(i)).expect("node URL"))
    }

    fn spawn_node(&self, i: usize) {
        let datadir = self.datadir(i);
        let out = fs::File::create(self.dir.join(format!("node{i}.out"))).expect("node stdout");
        let _ = fs::remove_file(self.pid_file(i));
        let log_bin = if self.binlog {
            vec![
                format!("--log-bin={}", datadir.join("binlog").display()),
                "--binlog-format=ROW".to_string(),
                format!("--server-id={}", i + 1),
            ]
        } else {
            vec!["--skip-log-bin".to_string()]
        };
        let child = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("sh")
            .arg(std::process::id().to_string())
            .arg(self.pid_file(i))
            .arg(&self.mariadbd)
            .arg("--no-defaults")
            .arg("--user=root")
            .arg(format!("--datadir={}", datadir.display()))
            .arg(format!("--port={}", self.ports[i]))
            .arg(format!("--socket={}", datadir.join("sock").display()))
            .arg(format!(
                "--pid-file={}",
                datadir.join("mariadbd.pid").display()
            ))
            .arg(format!("--log-error={}", self.err_log(i).display()))
            .arg("--bind-address=127.0.0.1")
            .arg("--innodb-buffer-pool-size=32M")
            .arg("--innodb-log-file-size=16M")
            .arg("--innodb-flush-log-at-trx-commit=2")
            .arg("--skip-name-resolve")
            .arg("--character-set-server=utf8mb4")
            .arg("--collation-server=utf8mb4_general_ci")
            .arg("--max-connections=500")
            .args(log_bin)
            .arg(format!(
                "--ssl-cert={}",
                self.dir.join("node-cert.pem").display()
            ))
            .arg(format!(
                "--ssl-key={}",
                self.dir.join("node-key.pem").display()
            ))
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup"))
            .stderr(out)
            .spawn()
            .expect("spawn mariadbd");
        *self.watchdogs[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
    }

    /// Waits until node `i` answers with a MySQL handshake; the error carries its log.
    fn wait_ready(&self, i: usize) -> Result<(), String> {
        let port = self.ports[i];
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if handshake_on(port) {
                return Ok(());
            }
            let exited = self.watchdogs[i]
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_mut()
                .map(|c| matches!(c.try_wait(), Ok(Some(_))))
                .unwrap_or(true);
            if exited {
                return Err(format!(
                    "MariaDB node {i} (port {port}) exited during start-up\n{}",
                    self.log_tail(i)
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "MariaDB node {i} (port {port}) did not accept connections within {}s\n{}",
                    START_TIMEOUT.as_secs(),
                    self.log_tail(i)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log_tail(&self, i: usize) -> String {
        let path = self.err_log(i);
        let text = fs::read_to_string(&path).unwrap_or_else(|e| format!("(no log: {e})"));
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        format!("--- tail of {} ---\n{tail}", path.display())
    }

    /// Stops node `i` (SIGTERM, a clean shutdown) and waits until it is gone.
    pub fn stop_node(&self, i: usize) {
        let mut guard = self.watchdogs[i].lock().unwrap_or_else(|p| p.into_inner());
        let Some(mut child) = guard.take() else {
            panic!("node {i} is not running");
        };
        let pid = fs::read_to_string(self.pid_file(i)).expect("node pid file");
        let pid = pid.trim().to_string();
        let _ = Command::new("kill").arg("-TERM").arg(&pid).status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    let _ = Command::new("kill").arg("-KILL").arg(&pid).status();
                    let _ = child.wait();
                    break;
                }
            }
        }
        let _ = fs::remove_file(self.pid_file(i));
    }

    /// Kills node `i` (SIGKILL: no shutdown, InnoDB recovers at the next start) and waits
    /// until it is gone.
    pub fn kill_node(&self, i: usize) {
        let mut guard = self.watchdogs[i].lock().unwrap_or_else(|p| p.into_inner());
        let Some(mut child) = guard.take() else {
            panic!("node {i} is not running");
        };
        let pid = fs::read_to_string(self.pid_file(i)).expect("node pid file");
        let _ = Command::new("kill").arg("-KILL").arg(pid.trim()).status();
        let _ = child.wait();
        let _ = fs::remove_file(self.pid_file(i));
    }

    /// Freezes node `i` (SIGSTOP: its sockets stay open, it answers nothing, as a hung
    /// server) until the guard is dropped (SIGCONT).
    pub fn pause_node(&self, i: usize) -> Paused {
        let pid = fs::read_to_string(self.pid_file(i)).expect("node pid file");
        let pid = pid.trim().to_string();
        let status = Command::new("kill")
            .arg("-STOP")
            .arg(&pid)
            .status()
            .expect("run kill -STOP");
        assert!(status.success(), "kill -STOP {pid} failed");
        Paused { pid }
    }

    /// Starts node `i` again on its port and datadir, and waits until it accepts connections.
    pub fn start_node(&self, i: usize) {
        assert!(
            self.watchdogs[i]
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_none(),
            "node {i} is already running"
        );
        self.spawn_node(i);
        self.wait_ready(i).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Is a MySQL server greeting on this port (protocol 10 handshake, not an error packet)?
fn handshake_on(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = [0u8; 5];
    s.read_exact(&mut buf).is_ok() && buf[4] == 10
}

/// The template datadir, made by `mariadb-install-db` once per MariaDB build and cached under
/// the target dir (a `.shardproxy-template-ok` marker says it is complete), so that a test
/// binary only copies it.
fn cached_template(install_db: &Path, mariadbd: &Path) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    INIT_SQL.hash(&mut h);
    for prog in [install_db, mariadbd] {
        prog.hash(&mut h);
        if let Ok(m) = fs::metadata(prog) {
            m.len().hash(&mut h);
            m.modified().ok().hash(&mut h);
        }
    }
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let cached = root.join(format!("mariadb-template-{:016x}", h.finish()));
    let marker = ".shardproxy-template-ok";
    if cached.join(marker).is_file() {
        return cached;
    }
    fs::create_dir_all(&root).expect("create CARGO_TARGET_TMPDIR");
    let work = tempfile::Builder::new()
        .prefix("mariadb-template-building-")
        .tempdir_in(&root)
        .expect("temp dir for the template");
    let datadir = work.path().join("data");
    make_template(install_db, work.path(), &datadir);
    fs::write(datadir.join(marker), b"").expect("template marker");
    // Another test binary may have finished the same template meanwhile: either is good.
    if let Err(e) = fs::rename(&datadir, &cached) {
        if !cached.join(marker).is_file() {
            panic!("cannot move the template to {}: {e}", cached.display());
        }
    }
    cached
}

fn make_template(install_db: &Path, dir: &Path, template: &Path) {
    let extra = dir.join("init.sql");
    fs::write(&extra, INIT_SQL).expect("write init.sql");
    let log = dir.join("template.log");
    let log_file = fs::File::create(&log).expect("template.log");
    let mut cmd = Command::new(install_db);
    cmd.arg("--no-defaults");
    if is_root() {
        cmd.arg("--user=root");
    }
    let status = cmd
        .arg(format!("--datadir={}", template.display()))
        .arg("--auth-root-authentication-method=normal")
        .arg("--skip-test-db")
        .arg(format!("--extra-file={}", extra.display()))
        // Passed on to the bootstrap server: a small redo log makes a small template.
        .arg("--innodb-log-file-size=16M")
        .arg("--innodb-buffer-pool-size=32M")
        .arg("--skip-log-bin")
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().expect("dup"))
        .stderr(log_file)
        .status()
        .expect("run mariadb-install-db");
    if !status.success() {
        panic!(
            "mariadb-install-db failed ({status}):\n{}",
            fs::read_to_string(&log).unwrap_or_default()
        );
    }
}

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

fn find_prog(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("{name} not found on PATH or in /usr/sbin: install mariadb-server")
        })
}

/// `n` distinct free loopback ports, never 3306. Taken below the kernel's ephemeral range when
/// there is room, so that no client socket grabs a node's port while the node is down.
pub fn free_ports(n: usize) -> Vec<u16> {
    let low = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|p| p.parse::<u32>().ok())
        })
        .unwrap_or(32768);
    let mut ports: Vec<u16> = Vec::with_capacity(n);
    if low > 12_000 {
        let span = low - 11_000;
        let mut seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
            ^ std::process::id().wrapping_mul(2_654_435_761);
        let mut tries = 0;
        while ports.len() < n && tries < 1000 {
            tries += 1;
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let port = (10_000 + (seed >> 8) % span) as u16;
            if port == 3306 || ports.contains(&port) {
                continue;
            }
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                ports.push(port);
            }
        }
    }
    let mut held = Vec::new();
    while ports.len() < n {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
        let port = l.local_addr().expect("local addr").port();
        held.push(l);
        if port != 3306 && !ports.contains(&port) {
            ports.push(port);
        }
    }
    ports
}

/// Runs a future to completion on a fresh runtime on its own thread (usable from sync code
/// called inside a test's runtime).
pub fn block_on<F>(f: F) -> F::Output
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime")
            .block_on(f)
    })
    .join()
    .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// A node frozen by [`Cluster::pause_node`]; it runs again when this is dropped.
pub struct Paused {
    pid: String,
}

impl Drop for Paused {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg("-CONT").arg(&self.pid).status();
    }
}

/// A shardproxy serving the cluster on its own thread; stops when dropped.
pub struct Proxy {
    pub port: u16,
    /// The admin interface's port, when the rules have an `[admin]` section.
    pub admin_port: Option<u16>,
    /// The metrics endpoint's port, when the rules have a `[metrics]` section.
    pub metrics_port: Option<u16>,
    pub topo: Topology,
    pub rules: String,
    /// The proxy's shared state (rules snapshot in force, reload counters).
    pub shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// `mysql://app:app@127.0.0.1:PORT/DB`.
    pub fn url(&self, db: &str) -> String {
        format!("mysql://app:app@127.0.0.1:{}/{db}", self.port)
    }

    /// A pool to the proxy, database `shop`.
    pub fn pool(&self) -> Pool {
        Pool::new(mysql_async::Opts::from_url(&self.url("shop")).expect("proxy URL"))
    }

    /// One connection to the proxy, database `shop`.
    pub async fn conn(&self) -> mysql_async::Conn {
        mysql_async::Conn::new(mysql_async::Opts::from_url(&self.url("shop")).expect("proxy URL"))
            .await
            .expect("connect to the proxy")
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The rules file of a proxy over `cluster` with these `[tables.*]` sections.
pub fn rules_toml(cluster: &Cluster, tables_toml: &str) -> String {
    let mut s = String::from(
        "version = 1\ndefault_node = \"ds0\"\n\n[server]\nlisten = \"127.0.0.1:0\"\n\
         users = [{ name = \"app\", password = \"app\" }]\n\n[nodes]\n",
    );
    for i in 0..cluster.len() {
        s.push_str(&format!("ds{i} = \"{}\"\n", cluster.url(i)));
    }
    s.push('\n');
    s.push_str(tables_toml);
    s
}

/// Starts a proxy over `cluster` whose rules name these `[tables.*]` sections.
pub fn start_proxy(cluster: &Cluster, tables_toml: &str) -> Proxy {
    start_proxy_with_rules(rules_toml(cluster, tables_toml))
}

/// A slot layout: node `i` owns slots `layout[i].0 ..= layout[i].1`.
pub type Layout = [(u16, u16)];

/// Four nodes, 256 slots each.
pub const FOUR_NODES: [(u16, u16); 4] = [(0, 255), (256, 511), (512, 767), (768, 1023)];

/// The `slots = [...]` value of a layout (`ds0`, `ds1`, ...).
pub fn slots_toml(layout: &Layout) -> String {
    let entries: Vec<String> = layout
        .iter()
        .enumerate()
        .map(|(i, (a, b))| format!("{{ slots = \"{a}-{b}\", node = \"ds{i}\" }}"))
        .collect();
    format!("[{}]", entries.join(", "))
}

/// A `[tables.NAME]` section sharding NAME by `column` with this layout.
pub fn hash_slot_table(name: &str, column: &str, layout: &Layout) -> String {
    format!(
        "[tables.{name}]\nrule = \"hash_slot\"\ncolumn = \"{column}\"\nslots = {}\n\n",
        slots_toml(layout)
    )
}

/// The node of a shard-key value under a layout.
pub fn node_of(layout: &Layout, value: &Value) -> usize {
    let slot = slot_of(value).expect("NULL has no slot");
    layout
        .iter()
        .position(|(a, b)| (*a..=*b).contains(&slot))
        .unwrap_or_else(|| panic!("slot {slot} is not in the layout"))
}

/// The node of an integer key under a layout.
pub fn node_of_key(layout: &Layout, key: i64) -> usize {
    node_of(layout, &Value::Int(key))
}

/// The first `count` positive integer keys that land on `node`.
pub fn keys_on_node(layout: &Layout, node: usize, count: usize) -> Vec<i64> {
    assert!(node < layout.len(), "node {node} is not in the layout");
    (1..)
        .filter(|k| node_of_key(layout, *k) == node)
        .take(count)
        .collect()
}

/// An integer key whose slot maps to `node`.
pub fn key_on_node(layout: &Layout, node: usize) -> i64 {
    keys_on_node(layout, node, 1)[0]
}

/// The server error of a failed statement: `(code, message)`; panics on success or on a
/// non-server error.
pub fn server_error<T: Debug>(r: Result<T, mysql_async::Error>) -> (u16, String) {
    match r {
        Ok(v) => panic!("expected a MySQL error, the statement succeeded: {v:?}"),
        Err(mysql_async::Error::Server(e)) => (e.code, e.message),
        Err(other) => panic!("expected a MySQL server error, got: {other}"),
    }
}

/// Asserts that a statement failed with MySQL error `code`; returns the message.
pub fn expect_code<T: Debug>(r: Result<T, mysql_async::Error>, code: u16, what: &str) -> String {
    let (got, message) = server_error(r);
    assert_eq!(
        got, code,
        "{what}: expected error {code}, got {got}: {message}"
    );
    message
}

/// The rules file of a proxy over some nodes of `cluster`: cluster node `nodes[i]` is `ds{i}`.
/// Nodes left out are never named by the rules (e.g. the reference node of the differential
/// tests).
pub fn rules_toml_on(cluster: &Cluster, nodes: &[usize], tables_toml: &str) -> String {
    let mut s = String::from(
        "version = 1\ndefault_node = \"ds0\"\n\n[server]\nlisten = \"127.0.0.1:0\"\n\
         users = [{ name = \"app\", password = \"app\" }]\n\n[nodes]\n",
    );
    for (i, node) in nodes.iter().enumerate() {
        s.push_str(&format!("ds{i} = \"{}\"\n", cluster.url(*node)));
    }
    s.push('\n');
    s.push_str(tables_toml);
    s
}

/// Starts a proxy over cluster nodes `nodes` (named `ds0`, `ds1`, ... in that order) whose
/// rules name these `[tables.*]` sections.
pub fn start_proxy_on(cluster: &Cluster, nodes: &[usize], tables_toml: &str) -> Proxy {
    start_proxy_with_rules(rules_toml_on(cluster, nodes, tables_toml))
}

/// Starts a proxy serving this whole rules file (its `[server] listen` is ignored: the proxy
/// binds a free loopback port).
pub fn start_proxy_with_rules(rules: String) -> Proxy {
    spawn_proxy(rules, None)
}

/// Starts a proxy serving the rules file at `path` and reloading it when it changes (checked
/// every 50 ms), as `shardproxy serve` does.
pub fn start_proxy_watching(path: &Path) -> Proxy {
    let rules = fs::read_to_string(path).expect("read the rules file");
    spawn_proxy(rules, Some(path.to_path_buf()))
}

fn spawn_proxy(rules: String, watch: Option<PathBuf>) -> Proxy {
    let topo = shardproxy::config::parse(&rules, "tests/common (generated)")
        .unwrap_or_else(|e| panic!("{e}\n--- rules ---\n{rules}"));
    let (port_tx, port_rx) =
        std::sync::mpsc::channel::<(u16, Option<u16>, Option<u16>, Arc<Shared>)>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server_topo = topo.clone();
    let thread = std::thread::Builder::new()
        .name("shardproxy-under-test".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("proxy runtime");
            rt.block_on(async move {
                let mut server = Server::bind_to(server_topo, "127.0.0.1:0")
                    .await
                    .expect("bind the proxy");
                let port = server.local_addr().expect("proxy address").port();
                if let Some(path) = watch {
                    tokio::spawn(shardproxy::server::watch(
                        server.shared(),
                        path.clone(),
                        Duration::from_millis(50),
                    ));
                    server = server.with_rules_file(path);
                }
                let admin = server.admin_addr().map(|a| a.port());
                let metrics = server.metrics_addr().map(|a| a.port());
                port_tx
                    .send((port, admin, metrics, server.shared()))
                    .expect("report the proxy port");
                tokio::select! {
                    r = server.serve() => {
                        if let Err(e) = r {
                            eprintln!("shardproxy under test stopped: {e}");
                        }
                    }
                    _ = stop_rx => {}
                }
            });
            rt.shutdown_timeout(Duration::from_secs(2));
        })
        .expect("spawn the proxy thread");
    let (port, admin_port, metrics_port, shared) = port_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the proxy did not bind");
    Proxy {
        port,
        admin_port,
        metrics_port,
        topo,
        rules,
        shared,
        stop: Some(stop_tx),
        thread: Some(thread),
    }
}

/// `shardproxy serve` as a process of its own (so it can be killed), on a free port.
pub struct ProxyProcess {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl ProxyProcess {
    /// Serves `rules` (its `127.0.0.1:0` listen address becomes a free port) with these
    /// environment variables (test hooks).
    pub fn start(rules: &str, env: &[(&str, &str)]) -> ProxyProcess {
        Self::start_limited(rules, env, None)
    }

    /// As [`ProxyProcess::start`], with the process's open-file limit set to `(soft, hard)`
    /// first (`ulimit`), as a service manager or a shell may leave it.
    pub fn start_limited(
        rules: &str,
        env: &[(&str, &str)],
        open_files: Option<(u64, u64)>,
    ) -> ProxyProcess {
        let port = free_ports(1)[0];
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("rules.toml");
        fs::write(
            &path,
            rules.replace("127.0.0.1:0", &format!("127.0.0.1:{port}")),
        )
        .expect("write rules");
        let bin = env!("CARGO_BIN_EXE_shardproxy");
        let mut cmd = match open_files {
            None => Command::new(bin),
            Some((soft, hard)) => {
                let mut c = Command::new("bash");
                c.arg("-c")
                    .arg(r#"h=$1 s=$2 b=$3; shift 3; ulimit -Sn "$s" && ulimit -Hn "$h" && exec "$b" "$@""#)
                    .arg("bash")
                    .arg(hard.to_string())
                    .arg(soft.to_string())
                    .arg(bin);
                c
            }
        };
        cmd.arg("serve").arg("--config").arg(&path);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn shardproxy");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "shardproxy did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        ProxyProcess {
            child,
            port,
            _dir: dir,
        }
    }

    pub fn pool(&self) -> Pool {
        Pool::new(
            mysql_async::Opts::from_url(&format!("mysql://app:app@127.0.0.1:{}/shop", self.port))
                .expect("url"),
        )
    }

    /// The process's resident memory, in KiB (`VmRSS` of /proc).
    pub fn rss_kib(&self) -> u64 {
        let status = fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the proxy's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .expect("VmRSS in /proc status")
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }

    /// Sends `signal` (`STOP`, `CONT`, ...) to the process.
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{signal} {}", self.child.id());
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How long a direct client needs right now to connect to node `i` and run a statement: the
/// machine's own share of any latency bound a test puts on the proxy, measured at that
/// moment (a loaded 2-core machine can take long over it).
pub async fn direct_round_trip(c: &Cluster, i: usize) -> Duration {
    let started = Instant::now();
    let mut conn =
        mysql_async::Conn::new(mysql_async::Opts::from_url(&c.url(i)).expect("node URL"))
            .await
            .expect("a direct connection to the node");
    conn.query_drop("SELECT 1")
        .await
        .expect("SELECT 1 on the node");
    let took = started.elapsed();
    conn.disconnect().await.ok();
    took
}

/// Waits until a transaction waits for a row lock in node `i`'s InnoDB (the condition a
/// test would otherwise guess with a pause); fails with `what` after 10 s.
pub async fn lock_wait_on(c: &Cluster, i: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut d = c.direct(i).get_conn().await.expect("direct");
    loop {
        let waiting: Option<i64> = d
            .query_first(
                "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'",
            )
            .await
            .expect("INNODB_TRX");
        if waiting.unwrap_or(0) > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{what}");
        // InnoDB refills its INNODB_TRX cache only when it was last read over 100 ms ago:
        // polled faster, the table never shows the new wait.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

/// GET /metrics over a plain TCP connection.
pub async fn scrape(port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to the metrics endpoint");
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .await
        .expect("send the request");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read the answer");
    assert!(
        out.starts_with("HTTP/1.1 200") || out.starts_with("HTTP/1.0 200"),
        "{out}"
    );
    out
}
