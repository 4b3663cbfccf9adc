//! The read replicas' pools, and the check that keeps each replica's [`Health`]: every
//! `[replicas] check_ms`, the primary's `@@gtid_binlog_pos`, then the replica's `SHOW SLAVE
//! STATUS` (its threads and errors) and `@@gtid_slave_pos`, each on a connection of the check's own.
//! A check that does not answer within its timeout marks the replica unreachable; the
//! check's connections are opened again at the next one.

use std::collections::HashMap;
use std::time::Instant;

use super::*;
use crate::config::Node;
use crate::replica::gtid::Position;
use crate::replica::Seen;

impl Backends {
    /// Brings `e`'s replicas in line with `n`'s: a replica whose URL is unchanged keeps its
    /// pool and health; a new one gets both, and its check; one gone is retired (its check
    /// ends with it).
    pub(super) fn apply_replicas(&self, e: &mut Entry, n: &Node, max_lag_ms: u64) {
        let primary = match (&e.pool, n.retired) {
            (Some(p), false) => p.clone(),
            _ => {
                for r in e.replicas.drain(..) {
                    r.pool.retire();
                }
                return;
            }
        };
        let mut old: Vec<Option<ReplicaEntry>> = e.replicas.drain(..).map(Some).collect();
        for (i, r) in n.replicas.iter().enumerate() {
            let kept = old.get_mut(i).and_then(|o| {
                o.take_if(|o| o.url == r.url && !o.pool.retired.load(Ordering::Relaxed))
            });
            let entry = match kept {
                Some(k) => k,
                None => {
                    let pool = NodePool::new(&r.name, &r.opts, self.timeout_ms.clone(), true);
                    let health = Arc::new(Health::new(&r.name));
                    if let Ok(rt) = tokio::runtime::Handle::try_current() {
                        rt.spawn(check_loop(
                            primary.clone(),
                            pool.clone(),
                            health.clone(),
                            self.check_ms.clone(),
                        ));
                    }
                    ReplicaEntry {
                        url: r.url.clone(),
                        pool,
                        health,
                    }
                }
            };
            entry.health.set_max_lag(max_lag_ms);
            e.replicas.push(entry);
        }
        for r in old.into_iter().flatten() {
            r.pool.retire();
        }
    }

    /// The replicas of `node`, in the rules file's order.
    pub fn replicas(&self, node: usize) -> Vec<Arc<Health>> {
        self.entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(node)
            .map(|e| e.replicas.iter().map(|r| r.health.clone()).collect())
            .unwrap_or_default()
    }

    /// When the topology in force was applied (see `Backends::applied_at`).
    pub fn applied_at(&self) -> Instant {
        *self.applied_at.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every node's replicas.
    pub fn all_replicas(&self) -> Vec<Arc<Health>> {
        self.entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .flat_map(|e| e.replicas.iter().map(|r| r.health.clone()))
            .collect()
    }

    /// Does any node have replicas?
    pub fn any_replicas(&self) -> bool {
        self.entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|e| !e.replicas.is_empty())
    }

    /// The next turn of `node`'s round robin.
    pub fn next_turn(&self, node: usize) -> usize {
        self.entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(node)
            .map_or(0, |e| e.turn.fetch_add(1, Ordering::Relaxed))
    }

    /// A connection to replica `r` of `node` (as [`Backends::connect_with`]).
    pub async fn connect_replica(
        &self,
        node: usize,
        r: usize,
        found_rows: bool,
        sets: &[String],
    ) -> Result<Pooled, MyError> {
        let pool = self.pool_of(node, Some(r))?;
        self.take_from(&pool, found_rows, sets).await
    }

    /// `KILL QUERY id` on replica `r` of `node`, from a connection of its own.
    pub async fn kill_on_replica(&self, node: usize, r: usize, id: u32) -> Result<(), MyError> {
        let mut c = self.connect_replica(node, r, false, &[]).await?;
        c.query_drop(&format!("KILL QUERY {id}"))
            .await
            .map_err(|e| MyError::new(1105, format!("shardproxy: {e}")))
    }
}

/// Checks one replica until its pool or its primary's is retired.
async fn check_loop(
    primary: Arc<NodePool>,
    replica: Arc<NodePool>,
    health: Arc<Health>,
    check_ms: Arc<std::sync::atomic::AtomicU64>,
) {
    let mut pconn: Option<Conn> = None;
    let mut rconn: Option<Conn> = None;
    loop {
        if primary.retired.load(Ordering::Relaxed) || replica.retired.load(Ordering::Relaxed) {
            return;
        }
        let period = Duration::from_millis(check_ms.load(Ordering::Relaxed).max(10));
        let limit = period.max(Duration::from_millis(500));
        let began = Instant::now();
        let primary_pos = tokio::time::timeout(limit, async {
            let c = opened(&primary, &mut pconn).await?;
            let row = c
                .query_named("SELECT @@gtid_binlog_pos AS pos, @@server_id AS id")
                .await
                .map_err(|e| e.to_string())?
                .unwrap_or_default();
            let get = |k: &str| row.get(k).cloned().flatten().unwrap_or_default();
            let (text, id) = (get("pos"), get("id"));
            let pos = Position::parse(&text)
                .ok_or_else(|| format!("a GTID position `{text}` not understood"))?;
            let id: u32 = id
                .parse()
                .map_err(|_| format!("a server_id `{id}` not understood"))?;
            Ok::<_, String>((pos, id))
        })
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} ms", limit.as_millis())));
        match primary_pos {
            Err(e) => {
                pconn = None;
                // Nothing is known in sync from here on: the replica's lag grows.
                health.note_error(format!("its primary: {e}"));
            }
            Ok((ppos, primary_id)) => {
                let seen = tokio::time::timeout(limit, async {
                    let c = opened(&replica, &mut rconn).await?;
                    let mut status = c
                        .query_named("SHOW SLAVE STATUS")
                        .await
                        .map_err(|e| e.to_string())?;
                    if let Some(row) = status.as_mut() {
                        let at = c
                            .query_text("SELECT @@gtid_slave_pos")
                            .await
                            .map_err(|e| e.to_string())?;
                        row.insert("Gtid_Slave_Pos".into(), at);
                    }
                    Ok::<_, String>(status)
                })
                .await
                .unwrap_or_else(|_| Err(format!("no answer within {} ms", limit.as_millis())));
                match seen {
                    Err(e) => {
                        rconn = None;
                        health.failed(Seen::Unreachable, e);
                    }
                    Ok(None) => {
                        health.failed(Seen::NotReplica, "SHOW SLAVE STATUS is empty".into())
                    }
                    Ok(Some(row)) => {
                        let (at, seen, error) = read_status(&row);
                        match source_differs(&row, primary_id) {
                            Some(why) if seen != Seen::Broken => {
                                health.failed(Seen::Elsewhere, why)
                            }
                            _ => health.checked(began, &ppos, at, seen, error),
                        }
                    }
                }
            }
        }
        tokio::time::sleep_until((began + period).into()).await;
    }
}

/// The check's connection to `pool`'s server, opened when it has none.
async fn opened<'a>(pool: &NodePool, c: &'a mut Option<Conn>) -> Result<&'a mut Conn, String> {
    if c.as_ref().is_some_and(|c| c.is_broken() || !c.alive()) {
        *c = None;
    }
    if c.is_none() {
        *c = Some(pool.connect(false).await?);
    }
    c.as_mut().ok_or_else(|| "no connection".to_string())
}

/// Why a replica's `SHOW SLAVE STATUS` row says it does not replicate the primary whose
/// `@@server_id` is `primary`: the server it last reached (`Master_Server_Id`) is another,
/// or none yet. A GTID position alone cannot tell: two primaries of one replication domain
/// number their transactions alike. So a replica must replicate its primary directly, and
/// each primary have a server_id of its own.
fn source_differs(row: &HashMap<String, Option<String>>, primary: u32) -> Option<String> {
    let id = row.get("Master_Server_Id").cloned().flatten();
    match id.as_deref().map(str::parse::<u32>) {
        Some(Ok(id)) if id == primary => None,
        Some(Ok(0)) | None => Some(format!(
            "its replication has reached no primary yet (Master_Server_Id 0; its primary's \
             server_id is {primary})"
        )),
        Some(Ok(id)) => Some(format!(
            "it replicates the server with server_id {id}, its primary's is {primary}: \
             a replica must replicate its node's primary directly"
        )),
        Some(Err(_)) => Some(format!(
            "Master_Server_Id `{}` not understood",
            id.unwrap_or_default()
        )),
    }
}

/// A replica's position, threads and error from its `SHOW SLAVE STATUS` row.
fn read_status(row: &HashMap<String, Option<String>>) -> (Position, Seen, Option<String>) {
    let get = |k: &str| row.get(k).cloned().flatten().unwrap_or_default();
    let at = Position::parse(&get("Gtid_Slave_Pos")).unwrap_or_default();
    let running = get("Slave_IO_Running") == "Yes" && get("Slave_SQL_Running") == "Yes";
    // The SQL thread's error stops it; the IO thread's counts once it gave up (while it
    // retries, `Connecting`, the lag alone decides).
    let failed =
        |thread: &str, errno: &str| get(thread) == "No" && !matches!(get(errno).as_str(), "" | "0");
    let errors: Vec<String> = [
        ("Slave_IO_Running", "Last_IO_Errno", "Last_IO_Error"),
        ("Slave_SQL_Running", "Last_SQL_Errno", "Last_SQL_Error"),
    ]
    .iter()
    .filter(|(t, n, _)| failed(t, n))
    .map(|(_, n, m)| format!("{} {}", get(n), get(m)))
    .collect();
    let seen = if !errors.is_empty() {
        Seen::Broken
    } else if running {
        Seen::Replicating
    } else {
        Seen::Stopped
    };
    (at, seen, (!errors.is_empty()).then(|| errors.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_of_another_server_is_told_by_its_source_server_id() {
        let row = |id: Option<&str>| -> HashMap<String, Option<String>> {
            id.map(|v| ("Master_Server_Id".to_string(), Some(v.to_string())))
                .into_iter()
                .collect()
        };
        assert_eq!(source_differs(&row(Some("2")), 2), None);
        let why = source_differs(&row(Some("1")), 2).expect("another source");
        assert!(why.contains("server_id 1") && why.contains("is 2"), "{why}");
        assert!(source_differs(&row(Some("0")), 2).is_some());
        assert!(source_differs(&row(None), 2).is_some());
        assert!(source_differs(&row(Some("x")), 2).is_some());
    }

    #[test]
    fn a_slave_status_row_is_read_by_its_names() {
        let row = |io: &str, sql: &str, errno: &str| -> HashMap<String, Option<String>> {
            [
                ("Gtid_Slave_Pos", "0-1-7"),
                ("Slave_IO_Running", io),
                ("Slave_SQL_Running", sql),
                ("Last_SQL_Errno", errno),
                ("Last_SQL_Error", "Duplicate entry"),
                ("Last_IO_Errno", "0"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect()
        };
        let (at, seen, err) = read_status(&row("Yes", "Yes", "0"));
        assert_eq!(at.to_string(), "0-1-7");
        assert_eq!((seen, err), (Seen::Replicating, None));
        assert_eq!(read_status(&row("No", "No", "0")).1, Seen::Stopped);
        let (_, seen, err) = read_status(&row("Yes", "No", "1062"));
        assert_eq!(seen, Seen::Broken);
        assert_eq!(err.as_deref(), Some("1062 Duplicate entry"));
        // An error of a thread still running (retrying) is not a broken replica.
        assert_eq!(read_status(&row("Yes", "Yes", "1062")).1, Seen::Replicating);
    }
}
