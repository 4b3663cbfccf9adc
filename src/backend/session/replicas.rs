//! Reads on a node's replicas (`crate::replica`): which of the session's statements may
//! read on one, which replica, and the session's writes it must hold first. A replica's
//! connection serves one statement and goes back to its pool when the command ends (kept
//! only for that statement's warnings, as a primary's would be).

use std::time::{Duration, Instant};

use super::*;
use crate::config::replicas::{Consistency, ReadPolicy};
use crate::exec::door::{Access, Door, Run};
use crate::replica::gtid::Gtid;
use crate::replica::{Health, Needs};

/// Why a replica read was not possible, for the metrics.
enum Declined {
    NoneInRotation,
    NotApplied,
    Failed,
}

impl Declined {
    fn word(&self) -> &'static str {
        match self {
            Declined::NoneInRotation => "none_in_rotation",
            Declined::NotApplied => "write_not_applied",
            Declined::Failed => "replica_failed",
        }
    }
}

impl NodeSession {
    /// Where the statement about to run may read.
    pub fn read_from(&mut self, r: ReadFrom) {
        self.read_from = r;
    }

    /// Outside any transaction, table locks or DDL: a read may leave the primary.
    pub(super) fn alone(&self) -> bool {
        self.state.autocommit
            && self.state.tx.is_none()
            && !self.state.ddl
            && self.state.locked.is_empty()
    }

    /// In a read-only transaction: begun READ ONLY, or after the session's SETs made its
    /// transactions so, begun or about to begin with this statement (autocommit off, as
    /// Connector/J's `setReadOnly(true)` then `setAutoCommit(false)` leave it: no BEGIN).
    pub(super) fn read_only_tx(&self) -> bool {
        let in_tx = self.state.tx.is_some() || (!self.state.autocommit && !self.state.ddl);
        self.state.read_only_tx() || (in_tx && session_read_only(&self.sets))
    }

    /// Writes of the statement starting on `nodes`: outside a transaction, a replica must
    /// be seen in sync after it ends; inside, its COMMIT names what to wait for.
    pub(super) fn wrote_on(&mut self, nodes: &[usize]) {
        let list = if self.state.tx.is_none() {
            &mut self.wrote
        } else {
            &mut self.tx_wrote
        };
        for n in nodes {
            if !list.contains(n) {
                list.push(*n);
            }
        }
    }

    /// Brings the session's connection to `node` to where a statement of `access` runs,
    /// opening one when it holds none: [`NodeSession::place`], then the primary.
    pub(super) async fn open_for(&mut self, node: usize, access: Access) -> Result<(), NodeError> {
        self.grow(node);
        self.drop_if_dead(node);
        self.place(node, access).await?;
        if self.conns[node].is_none() {
            self.open(node).await?;
        }
        Ok(())
    }

    /// Takes a replica's connection for a read that may go to one; gives back a replica's
    /// connection held for anything else (the primary is opened by the caller). A spare
    /// primary connection (kept for the last statement's warnings, which a read of a table
    /// clears anyway) makes way for a replica.
    pub(super) async fn place(&mut self, node: usize, access: Access) -> Result<(), NodeError> {
        self.grow(node);
        // The transaction's branch there, wherever it is, serves its every statement.
        if self.state.tx_nodes().any(|b| b == node) {
            return Ok(());
        }
        // A READ ONLY transaction takes each node's replica for its whole life.
        let reading = access == Access::Read && (self.alone() || self.read_only_tx());
        let on_replica = self.conns[node].as_ref().map(|c| c.replica.is_some());
        match on_replica {
            Some(true) if reading && self.read_from != ReadFrom::Primary => return Ok(()),
            Some(true) => self.give_back(node),
            Some(false) if reading && self.read_from == ReadFrom::Replica && !self.needed(node) => {
                self.give_back(node)
            }
            Some(false) => return Ok(()),
            None => {}
        }
        if reading && self.read_from == ReadFrom::Replica {
            if let Err(why) = self.open_replica(node).await {
                self.shared
                    .metrics
                    .replica_declined
                    .with_label_values(&[why.word()])
                    .inc();
            }
        }
        Ok(())
    }

    /// A connection to a replica of `node` in rotation that holds what the session wrote
    /// there (asked to wait for it at most `[replicas] wait_ms` when none is known to).
    async fn open_replica(&mut self, node: usize) -> Result<(), Declined> {
        let replicas = self.shared.backends.replicas(node);
        if replicas.is_empty() {
            return Err(Declined::NoneInRotation);
        }
        let topo = self.shared.topology();
        let cfg = &topo.replicas;
        let now = Instant::now();
        let max_lag = Duration::from_millis(cfg.max_lag_ms);
        // A replica in sync since before the rules changed may lack rows a move brought to
        // its node: it waits for its next check.
        let floor = self.shared.backends.applied_at();
        let usable: Vec<usize> = (0..replicas.len())
            .filter(|&i| replicas[i].usable(now, max_lag) && replicas[i].synced_after(floor))
            .collect();
        if usable.is_empty() {
            return Err(Declined::NoneInRotation);
        }
        // An earlier statement of this command (`INSERT ...; SELECT ...` in one packet)
        // wrote: it has ended, and is waited for as at the command's end.
        self.note_writes();
        let need = match cfg.consistency {
            Consistency::ReadYourWrites => self.needs.get(node).copied().flatten(),
            Consistency::Lag => None,
        };
        let (among, wait) = match need {
            None => (usable, None),
            Some(n) => {
                let holding: Vec<usize> = usable
                    .iter()
                    .copied()
                    .filter(|&i| n.met_by(&replicas[i]))
                    .collect();
                match n {
                    _ if !holding.is_empty() => (holding, None),
                    Needs::Gtid(g) if cfg.wait_ms > 0 => (usable, Some(g)),
                    _ => return Err(Declined::NotApplied),
                }
            }
        };
        let turn = self.shared.backends.next_turn(node);
        let r = choose(&replicas, &among, cfg.policy, turn);
        let health = &replicas[r];
        let mut c = match self
            .shared
            .backends
            .connect_replica(node, r, self.found_rows, &self.sets)
            .await
        {
            Ok(c) => c,
            Err(e) => {
                health.note_error(e.message);
                return Err(Declined::Failed);
            }
        };
        if let Err(e) = self.bring_to_state(node, &mut c).await {
            health.note_error(e.error.message);
            return Err(Declined::Failed);
        }
        if let Some(g) = wait {
            match wait_for(&mut c, g, cfg.wait_ms).await {
                Ok(true) => health.applied(g),
                Ok(false) => return Err(Declined::NotApplied),
                Err(e) => {
                    health.note_error(e.to_string());
                    return Err(Declined::Failed);
                }
            }
        }
        self.shared
            .metrics
            .replica_reads
            .with_label_values(&[&health.name])
            .inc();
        let mut nc = NodeConn::new(c);
        nc.replica = Some((r, health.reading()));
        self.conns[node] = Some(nc);
        self.held(node, 1);
        Ok(())
    }

    /// Runs `stmt` on the replica connection the session holds to `node` (see
    /// [`start_or_primary`]).
    pub(super) async fn start_on_replica<'a>(
        &'a mut self,
        node: usize,
        stmt: Stmt<'a>,
        run: Run,
    ) -> Result<NodeRes<'a>, NodeError> {
        self.state.last_node = Some(node);
        let labels = self.labels(node);
        let started = Instant::now();
        let status = Door::status(self);
        let ids = self.running_ids(std::iter::once(node));
        self.ctl.running(&ids);
        let to = Fallback {
            shared: &self.shared,
            node,
            found_rows: self.found_rows,
            db: self.db.as_deref(),
            sets: &self.sets,
        };
        let Some(conn) = self.conns.get_mut(node).and_then(Option::as_mut) else {
            return Err(vanished(node));
        };
        match start_or_primary(conn, stmt, run.binary, &to).await {
            Ok((head, known)) => Ok(NodeRes::new(
                conn,
                head,
                run.binary,
                known,
                node,
                labels,
                &self.casualties,
                started,
                status,
            )),
            Err(e) => Err(casualty(&self.casualties, node, &labels.name, e)),
        }
    }

    /// (node, replica, thread id) of the session's connections to `nodes`, for KILL.
    pub(super) fn running_ids(
        &self,
        nodes: impl Iterator<Item = usize>,
    ) -> Vec<(usize, Option<usize>, u32)> {
        nodes
            .filter_map(|n| {
                self.conns
                    .get(n)
                    .and_then(Option::as_ref)
                    .map(|c| (n, c.replica.as_ref().map(|(r, _)| *r), c.conn.id()))
            })
            .collect()
    }

    /// The command's writes outside a transaction: a replica must have been seen in sync
    /// after now before the session reads there (an autocommit statement's GTID is not in
    /// its own answer: MariaDB reports it with the connection's next statement).
    pub(super) fn note_writes(&mut self) {
        if self.state.tx.is_none() {
            self.tx_wrote.clear();
        }
        for node in 0..self.conns.len() {
            if let Some(c) = self.conns[node].as_mut().filter(|c| c.wrote_instead) {
                c.wrote_instead = false;
                if !self.wrote.contains(&node) {
                    self.wrote.push(node);
                }
            }
        }
        if self.wrote.is_empty() {
            return;
        }
        let now = Instant::now();
        for node in std::mem::take(&mut self.wrote) {
            self.need(node, Needs::Before(now));
        }
    }

    /// A statement the session's transaction ended with ran on `node`: a COMMIT names its
    /// GTID in its answer (`last_gtid`); an XA commit does not, reliably. (A read-only
    /// transaction's branch on a replica wrote nothing.)
    pub(super) fn committed(&mut self, node: usize, sql: &str) {
        let commit = sql.eq_ignore_ascii_case("COMMIT");
        if !commit && !sql.to_ascii_uppercase().contains("XA COMMIT") {
            return;
        }
        // A branch that wrote nothing commits nothing to wait for.
        if !self.tx_wrote.contains(&node) {
            return;
        }
        let gtid = self
            .conns
            .get_mut(node)
            .and_then(Option::as_mut)
            .and_then(|c| c.conn.take_last_gtid())
            .filter(|_| commit)
            .and_then(|g| Gtid::parse(&g));
        let need = gtid.map_or_else(|| Needs::Before(Instant::now()), Needs::Gtid);
        self.need(node, need);
    }

    fn need(&mut self, node: usize, need: Needs) {
        if node >= self.needs.len() {
            self.needs.resize(node + 1, None);
        }
        self.needs[node] = Some(need);
    }
}

/// What a statement that a replica failed needs to run on the primary instead.
pub(super) struct Fallback<'s> {
    pub(super) shared: &'s Shared,
    pub(super) node: usize,
    pub(super) found_rows: bool,
    pub(super) db: Option<&'s str>,
    pub(super) sets: &'s [String],
}

/// Starts `stmt` on `conn`. A replica's connection that fails before the statement's first
/// answer (lost, timed out, or refusing it as read-only: a function that writes, 1792 in
/// the read-only transactions of every replica connection, or 1290 by `read_only`) is
/// replaced where it stands by a primary's, brought to the session's state, and the
/// statement runs there: nothing of it reached the client.
pub(super) async fn start_or_primary(
    conn: &mut NodeConn,
    stmt: Stmt<'_>,
    binary: bool,
    to: &Fallback<'_>,
) -> Result<(Head, Option<Arc<[Column]>>), WireError> {
    let metrics = &to.shared.metrics;
    let first = rerun::start_rerunning(conn, stmt, binary, false, metrics).await;
    let e = match first {
        Err(e)
            if e.breaks()
                || matches!(
                    e,
                    WireError::Server {
                        code: 1290 | 1792,
                        ..
                    }
                ) =>
        {
            e
        }
        other => return other,
    };
    let Some((_, reading)) = conn.replica.as_ref() else {
        return Err(e);
    };
    reading.health().note_error(e.to_string());
    metrics
        .replica_declined
        .with_label_values(&[Declined::Failed.word()])
        .inc();
    let mut p = to
        .shared
        .backends
        .connect_with(to.node, to.found_rows, to.sets)
        .await
        .map_err(|m| WireError::Server {
            code: m.code,
            state: "HY000".into(),
            message: m.message,
        })?;
    super::bring(&mut p, to.db, to.sets).await?;
    if !e.breaks() {
        // Refused, not lost: the replica's connection goes back to its pool. The statement
        // writes (a read-only refusal): on the primary, it is the session's write there.
        drop(std::mem::replace(conn, NodeConn::new(p)));
        conn.wrote_instead = true;
    } else {
        conn.conn.discard();
        *conn = NodeConn::new(p);
    }
    rerun::start_rerunning(conn, stmt, binary, false, metrics).await
}

/// Do the session's SETs make its transactions read-only (`SET SESSION TRANSACTION READ
/// ONLY`, as MySQL Connector/J's `setReadOnly(true)` sends it; `SET SESSION
/// transaction_read_only = 1`)? The last such SET decides. (`SET TRANSACTION` without
/// SESSION is for the next transaction alone: not a session SET.)
pub(super) fn session_read_only(sets: &[String]) -> bool {
    session_access_mode(sets) == Some(true)
}

/// The access mode the session's last SET of it chose: `Some(true)` read only,
/// `Some(false)` read write, `None` never set.
fn session_access_mode(sets: &[String]) -> Option<bool> {
    use crate::sql::lex::{lex, Kind};
    for s in sets.iter().rev() {
        let toks = lex(s, Default::default()).toks;
        let words: Vec<String> = toks
            .iter()
            .filter(|t| !matches!(t.kind, Kind::Op | Kind::Dot | Kind::Comma))
            .map(|t| {
                let w = t.text(s).trim_start_matches('@').to_ascii_uppercase();
                match w.split_once('.') {
                    Some(("SESSION" | "LOCAL", var)) if t.kind == Kind::Var => var.to_string(),
                    _ => w,
                }
            })
            .collect();
        let w: Vec<&str> = words.iter().map(String::as_str).collect();
        match w.as_slice() {
            ["SET", "SESSION", "TRANSACTION", rest @ ..] => {
                let mode = rest
                    .windows(2)
                    .rfind(|p| p[0] == "READ" && matches!(p[1], "ONLY" | "WRITE"));
                if let Some(p) = mode {
                    return Some(p[1] == "ONLY");
                }
            }
            ["SET", scope, var, value]
                if matches!(*scope, "SESSION" | "LOCAL")
                    && matches!(*var, "TX_READ_ONLY" | "TRANSACTION_READ_ONLY") =>
            {
                return Some(matches!(*value, "1" | "ON" | "TRUE"));
            }
            ["SET", var, value] if matches!(*var, "TX_READ_ONLY" | "TRANSACTION_READ_ONLY") => {
                return Some(matches!(*value, "1" | "ON" | "TRUE"));
            }
            _ => {}
        }
    }
    None
}

/// One of `among` (indexes into `replicas`) by the policy.
fn choose(replicas: &[Arc<Health>], among: &[usize], policy: ReadPolicy, turn: usize) -> usize {
    let first = among.get(turn % among.len().max(1)).copied().unwrap_or(0);
    match policy {
        ReadPolicy::RoundRobin => first,
        ReadPolicy::LeastBusy => among
            .iter()
            .copied()
            .min_by_key(|&i| (replicas[i].busy(), i != first))
            .unwrap_or(first),
    }
}

/// `MASTER_GTID_WAIT` on a replica's connection for `g`, at most `wait_ms`: whether it
/// holds `g` now.
async fn wait_for(c: &mut Pooled, g: Gtid, wait_ms: u64) -> Result<bool, WireError> {
    let mut sql = String::from("SELECT MASTER_GTID_WAIT(");
    crate::sql::write::text(&mut sql, &g.to_string());
    sql.push_str(", ");
    crate::sql::write::value(&mut sql, &Value::Double(wait_ms as f64 / 1000.0), "utf8mb4");
    sql.push(')');
    let before = c.state_changed();
    let rows = c.query_rows(&sql).await;
    if !before {
        c.take_state_changed();
    }
    let answer = rows?
        .into_iter()
        .next()
        .and_then(|r| r.into_iter().next().flatten());
    Ok(matches!(answer, Some(Value::Bytes(b)) if b == b"0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_session_set_of_the_access_mode_decides() {
        let sets = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(session_read_only(&sets(&[
            "set session transaction read only"
        ])));
        assert!(session_read_only(&sets(&[
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED, READ ONLY"
        ])));
        assert!(session_read_only(&sets(&[
            "SET @@session.transaction_read_only = 1"
        ])));
        assert!(session_read_only(&sets(&["SET tx_read_only = ON"])));
        assert!(!session_read_only(&sets(&[
            "SET SESSION TRANSACTION READ ONLY",
            "SET SESSION TRANSACTION READ WRITE"
        ])));
        assert!(!session_read_only(&sets(&[
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"
        ])));
        assert!(!session_read_only(&sets(&[
            "SET @@session.transaction_read_only = 0"
        ])));
        assert!(!session_read_only(&sets(&["SET @x = 1"])));
        // READ WRITE said, which a replica connection's READ ONLY must not be undone by.
        let rw = |s: &[&str]| session_access_mode(&sets(s));
        assert_eq!(rw(&["SET SESSION TRANSACTION READ WRITE"]), Some(false));
        assert_eq!(
            rw(&["SET @@session.transaction_read_only = 0"]),
            Some(false)
        );
        assert_eq!(rw(&["SET SESSION TRANSACTION READ ONLY"]), Some(true));
        assert_eq!(rw(&["SET @x = 1"]), None);
    }

    #[test]
    fn a_replica_is_chosen_in_turn_or_by_its_reads() {
        let hs: Vec<Arc<Health>> = (0..3)
            .map(|i| Arc::new(Health::new(&format!("ds0/r{i}"))))
            .collect();
        let among = [0, 2];
        let picks: Vec<usize> = (0..4)
            .map(|t| choose(&hs, &among, ReadPolicy::RoundRobin, t))
            .collect();
        assert_eq!(picks, [0, 2, 0, 2]);
        let _busy = hs[0].reading();
        assert_eq!(choose(&hs, &among, ReadPolicy::LeastBusy, 0), 2);
        assert_eq!(choose(&hs, &among, ReadPolicy::LeastBusy, 1), 2);
        drop(_busy);
        assert_eq!(choose(&hs, &among, ReadPolicy::LeastBusy, 1), 2);
        assert_eq!(choose(&hs, &among, ReadPolicy::LeastBusy, 0), 0);
    }
}
