//! The session's node connections as the [`Door`] every execution primitive goes through:
//! statements started on one node or several at once, the proxy's own queries, the session
//! statements replayed on each connection, KILL, and the metrics the primitives count.

use super::*;
use futures::future::join_all;

use crate::config::TxMode;
use crate::exec::door::{Door, Prepared, Run};

impl Door for NodeSession {
    type Res<'a> = NodeRes<'a>;

    async fn start<'a>(
        &'a mut self,
        node: usize,
        stmt: Stmt<'a>,
        run: Run,
    ) -> Result<NodeRes<'a>, NodeError> {
        self.reap();
        self.open_for(node, run.access).await?;
        // A read-only transaction's statements on a replica take the way below (its BEGIN),
        // the first one too when autocommit is off (the transaction begins with it).
        if self.alone()
            && self.conns[node]
                .as_ref()
                .is_some_and(|c| c.replica.is_some())
        {
            return self.start_on_replica(node, stmt, run).await;
        }
        // A statement that opens its node's branch carries the BEGIN in its packet (text:
        // `BEGIN; stmt`), or in the same write (a prepared read: were the BEGIN refused,
        // the read ran outside the transaction and its answer is dropped; a prepared write
        // could not be taken back, so it opens its branch first).
        let ahead = if run.binary && run.access == crate::exec::door::Access::Write {
            None
        } else {
            crate::exec::txn::begin_ahead(self, node, run.access)?
        };
        if ahead.is_none() {
            Transactions::enter(self, &[node], run.access).await?;
        }
        self.state.last_node = Some(node);
        if run.access == crate::exec::door::Access::Write {
            self.wrote_on(&[node]);
        }
        self.sync_registry();
        // With the BEGIN ahead, the branches the deadlock detector must know once it opened
        // (before the statement can wait on a lock).
        let with_new: Option<Vec<(usize, u32)>> = ahead
            .as_ref()
            .map(|_| self.conn_ids(self.state.tx_nodes().chain([node])));
        let labels = self.labels(node);
        let started = Instant::now();
        let status = Door::status(self);
        let again = ahead.is_none() && rerun::alone(&self.state);
        let metrics = &self.shared.metrics;
        let Some(conn) = self.conns.get_mut(node).and_then(Option::as_mut) else {
            return Err(vanished(node));
        };
        self.ctl.running(&[(node, None, conn.conn.id())]);
        pin_if_stateful(&mut conn.conn, stmt.sql, metrics);
        // The BEGIN sent ahead failed: the branch did not open, and the connection (an XA
        // START refused leaves it in a state of its own) is dropped, never reused.
        let mut begin_failed = false;
        // The detector knows the new branch before the statement can wait on a lock (it
        // is resynchronised if the BEGIN fails).
        if let Some(conns) = &with_new {
            self.registered = usize::MAX;
            self.shared.deadlocks.register(self.conn_id, conns.clone());
        }
        let r = match &ahead {
            None => rerun::start_rerunning(conn, stmt, run.binary, again, metrics).await,
            // A statement the node cannot prepare is the statement's error: nothing was sent
            // ahead of it, the branch stays unopened and the connection good.
            Some((begin, xa)) if run.binary => match conn.handle(stmt.sql).await.map(|_| ()) {
                Err(e) => Err(e),
                Ok(()) => match conn.exec_after(begin, stmt.sql, stmt.params).await {
                    Ok(Some(Ok(ran))) => {
                        self.state.began(node, *xa, false);
                        ran.map(|(head, cols)| (head, Some(cols)))
                    }
                    Ok(Some(Err(e))) | Err(e) => {
                        if !e.breaks() {
                            conn.conn.discard();
                            begin_failed = true;
                        }
                        Err(e)
                    }
                    // Long data (or a parameter count the node will refuse): BEGIN apart.
                    Ok(None) => match conn.conn.query_drop(begin).await {
                        Ok(()) => {
                            self.state.began(node, *xa, false);
                            start_on(conn, stmt, true).await
                        }
                        Err(e) => {
                            conn.conn.discard();
                            begin_failed = true;
                            Err(e)
                        }
                    },
                },
            },
            // A read goes in the same write as its BEGIN, each its own command (were the
            // BEGIN refused, the read ran outside the transaction and its answer is
            // dropped); a write could not be taken back, so its BEGIN goes first. Never one
            // text: node connections read no client text as several statements.
            Some((begin, xa)) if run.access != crate::exec::door::Access::Write => {
                match conn.conn.query_then_query(begin, stmt.sql).await {
                    Ok(Ahead::Ran(head)) => {
                        self.state.began(node, *xa, false);
                        head.map(|h| (h, None))
                    }
                    Ok(Ahead::FirstFailed(e)) => {
                        let _ = conn.conn.drain().await;
                        conn.conn.discard();
                        begin_failed = true;
                        Err(e)
                    }
                    Err(e) => {
                        conn.conn.discard();
                        begin_failed = true;
                        Err(e)
                    }
                }
            }
            Some((begin, xa)) => match conn.conn.query_drop(begin).await {
                Ok(()) => {
                    self.state.began(node, *xa, true);
                    conn.conn.query(stmt.sql).await.map(|h| (h, None))
                }
                Err(e) => {
                    conn.conn.discard();
                    begin_failed = true;
                    Err(e)
                }
            },
        };
        match r {
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
            Err(e) => {
                let e = deadlock_of(&self.shared.deadlocks, node, conn.conn.id(), e);
                let broke = begin_failed || e.breaks();
                Err(casualty_as(&self.casualties, node, &labels.name, e, broke))
            }
        }
    }

    async fn start_all<'a>(
        &'a mut self,
        stmts: &'a [(usize, Stmt<'a>)],
        run: Run,
    ) -> Result<Vec<Result<NodeRes<'a>, NodeError>>, NodeError> {
        self.reap();
        if let Some(max) = stmts.iter().map(|(n, _)| *n).max() {
            self.grow(max);
        }
        for (n, _) in stmts {
            self.drop_if_dead(*n);
        }
        // Each read's replica (or primary) first; the primaries missing then open at once.
        for (n, _) in stmts {
            self.place(*n, run.access).await?;
        }
        // Open missing connections in parallel.
        let missing: Vec<usize> = stmts
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| self.conns[*n].is_none())
            .collect();
        if !missing.is_empty() {
            let backends = &self.shared.backends;
            let opened = join_all(
                missing
                    .iter()
                    .map(|n| backends.connect_with(*n, self.found_rows, &self.sets)),
            )
            .await;
            for (n, r) in missing.iter().zip(opened) {
                let mut c = r.map_err(|error| NodeError {
                    node: *n,
                    error,
                    broke: true,
                })?;
                self.bring_to_state(*n, &mut c).await?;
                self.conns[*n] = Some(NodeConn::new(c));
                self.held(*n, 1);
            }
        }
        let nodes: Vec<usize> = stmts.iter().map(|(n, _)| *n).collect();
        Transactions::enter(self, &nodes, run.access).await?;
        if run.access == crate::exec::door::Access::Write {
            self.wrote_on(&nodes);
        }
        self.sync_registry();
        self.state.last_node = stmts.first().map(|(n, _)| *n);
        let status = Door::status(self);
        let again = rerun::alone(&self.state);
        // A replica's refusal goes to the primary outside a transaction only: inside a READ
        // ONLY one, a write's 1792 is the answer one MariaDB gives.
        let to_primary = self.alone();
        let labels: Vec<Arc<NodeLabels>> = stmts.iter().map(|(n, _)| self.labels(*n)).collect();
        let running = self.running_ids(stmts.iter().map(|(n, _)| *n));
        self.ctl.running(&running);
        // Each statement's connection, borrowed apart from the others.
        let mut slots: Vec<Option<&'a mut NodeConn>> = Vec::with_capacity(stmts.len());
        {
            let mut by_node: Vec<Option<&'a mut NodeConn>> =
                self.conns.iter_mut().map(Option::as_mut).collect();
            for (n, _) in stmts {
                slots.push(by_node.get_mut(*n).and_then(Option::take));
            }
        }
        let casualties = &self.casualties;
        let metrics = &self.shared.metrics;
        let registry = &self.shared.deadlocks;
        let (shared, found_rows, db, sets) = (
            &self.shared,
            self.found_rows,
            self.db.as_deref(),
            &self.sets,
        );
        let starts = slots.into_iter().zip(stmts.iter()).zip(labels).map(
            |((conn, (node, stmt)), labels)| {
                let node = *node;
                async move {
                    let Some(conn) = conn else {
                        return Err(NodeError {
                            node,
                            error: MyError::internal(
                                "shardproxy: a statement names one node twice",
                            ),
                            broke: false,
                        });
                    };
                    let started = Instant::now();
                    pin_if_stateful(&mut conn.conn, stmt.sql, metrics);
                    let ran = if conn.replica.is_some() && to_primary {
                        let to = replicas::Fallback {
                            shared,
                            node,
                            found_rows,
                            db,
                            sets,
                        };
                        replicas::start_or_primary(conn, *stmt, run.binary, &to).await
                    } else {
                        rerun::start_rerunning(conn, *stmt, run.binary, again, metrics).await
                    };
                    match ran {
                        Ok((head, known)) => Ok(NodeRes::new(
                            conn, head, run.binary, known, node, labels, casualties, started,
                            status,
                        )),
                        Err(e) => {
                            let e = deadlock_of(registry, node, conn.conn.id(), e);
                            Err(casualty(casualties, node, &labels.name, e))
                        }
                    }
                }
            },
        );
        Ok(join_all(starts).await)
    }

    async fn fetch(&mut self, node: usize, sql: &str) -> Result<Vec<Vec<Value>>, NodeError> {
        self.rows_of(node, sql).await
    }

    async fn fetch_outside(
        &mut self,
        node: usize,
        sql: &str,
    ) -> Result<Vec<Vec<Value>>, NodeError> {
        self.outside(node, &[sql], false).await
    }

    async fn run_on(&mut self, node: usize, sql: &str) -> Result<(), NodeError> {
        self.open(node).await?;
        if let Some(nc) = self.conns.get_mut(node).and_then(Option::as_mut) {
            nc.conn.mark_dirty();
        }
        self.run_own(node, sql).await
    }

    async fn fetch_outside_all(
        &mut self,
        node: usize,
        sqls: &[&str],
    ) -> Result<Vec<Vec<Value>>, NodeError> {
        // LAST_INSERT_ID(expr) and the like: reset before anyone else takes it.
        self.outside(node, sqls, true).await
    }

    async fn check_syntax(&mut self, node: usize, sql: &str) -> Result<(), NodeError> {
        self.open(node).await?;
        let Some(nc) = self.conns.get_mut(node).and_then(Option::as_mut) else {
            return Err(vanished(node));
        };
        let r = async {
            let stmt = nc.conn.prepare(sql).await?;
            nc.conn.close(stmt.id).await
        }
        .await;
        r.map_err(|e| {
            let err = self.node_error(node, &e);
            if err.broke {
                self.drop_conn(node);
            }
            err
        })
    }

    async fn prepare(&mut self, node: usize, sql: &str) -> Result<Prepared, NodeError> {
        self.open(node).await?;
        let Some(nc) = self.conns.get_mut(node).and_then(Option::as_mut) else {
            return Err(vanished(node));
        };
        match nc.handle(sql).await {
            Ok(stmt) => Ok(Prepared {
                params: stmt.params.clone(),
                columns: stmt.columns.to_vec(),
            }),
            Err(e) => {
                let err = self.node_error(node, &e);
                self.failed(node, &err.error.message, err.broke, err.error.code);
                Err(err)
            }
        }
    }

    async fn collations(&mut self, node: usize, sql: &str) -> Option<Arc<[u16]>> {
        let key = collations_key(self.db.as_deref().unwrap_or_default(), sql);
        if let Some(ids) = key.as_ref().and_then(|k| self.shared.collations.get(k)) {
            return Some(ids);
        }
        let probe = format!("SET STATEMENT character_set_results = NULL FOR {sql}");
        // Temporary copies exist on the session's connections only: probed there, and the
        // session's character set set again after (see `columns_outside`).
        let cols = if sql.contains(crate::plan::gather::TEMP_PREFIX) {
            let cols = self.prepare(node, &probe).await.ok()?.columns;
            self.names_again(node).await.ok()?;
            cols.into()
        } else {
            self.columns_outside(node, &probe).await.ok()?
        };
        if cols.is_empty() {
            return None;
        }
        let ids: Arc<[u16]> = cols.iter().map(|c| c.character_set()).collect();
        if let Some(key) = key {
            self.shared.collations.insert(key, ids.clone());
        }
        Some(ids)
    }

    async fn reachable(&mut self, node: usize) -> Result<(), MyError> {
        self.open(node).await.map_err(|e| e.error)
    }

    fn holds(&self, node: usize) -> bool {
        // A spare one the node closed holds nothing to read (it is replaced on use).
        self.conns
            .get(node)
            .and_then(Option::as_ref)
            .is_some_and(|c| !c.spare || c.conn.alive())
    }

    fn name(&self, node: usize) -> String {
        self.shared.backends.name(node)
    }

    fn state(&self) -> &SessionState {
        &self.state
    }

    fn state_mut(&mut self) -> &mut SessionState {
        &mut self.state
    }

    async fn use_db(&mut self, db: &str) -> Result<(), MyError> {
        let default = self.shared.topology().default_node;
        let node = self.sticky(false, default).unwrap_or(default);
        let stmt = use_stmt(db);
        // Checked on one node first so an unknown database fails cleanly. With no connection
        // open and that node unreachable, it is only remembered (and checked on the first
        // connection the session opens): a node that is down fails only what needs it.
        if self.open(node).await.is_ok() {
            self.run_own(node, &stmt).await?;
            self.used(node, db);
        }
        for n in 0..self.conns.len() {
            if n != node && self.conns[n].is_some() {
                self.run_own(n, &stmt).await?;
                self.used(n, db);
            }
        }
        self.db = Some(db.to_string());
        Ok(())
    }

    async fn set(&mut self, sql: &str) -> Result<(), MyError> {
        // The record it would make, bounded before anything runs: a SET refused after it ran
        // would leave connections unlike the record. A user variable's newer value replaces
        // the older (`crate::sql::uservars`).
        let key = crate::sql::uservars::record_key(sql);
        let kept = self
            .sets
            .iter()
            .filter(|s| crate::sql::uservars::record_key(s) != key);
        if kept.clone().count() >= 256 {
            return Err(MyError::unsupported(
                "more than 256 distinct session SET statements in one session",
            ));
        }
        // Every SET is replayed on each connection the session borrows: their text is
        // bounded as their number is (a user variable holding a large value included).
        const SETS_BYTES: usize = 4 << 20;
        if kept.map(String::len).sum::<usize>() + sql.len() > SETS_BYTES {
            return Err(MyError::unsupported(
                "session SET statements (user variables' values included) over 4 MiB in one session: shardproxy replays them on every node connection it lends the session",
            ));
        }
        // Checked where the session runs, then on every other open connection.
        let default = self.shared.topology().default_node;
        let first = self.sticky(false, default).unwrap_or(default);
        self.run_own(first, sql).await?;
        if let Err(e) = self.on_others(first, sql).await {
            // Some connections ran it, some did not: none is like the session's record.
            for c in self.conns.iter_mut().flatten() {
                c.conn.mark_dirty();
            }
            return Err(e);
        }
        self.sets
            .retain(|s| crate::sql::uservars::record_key(s) != key);
        self.sets.push(sql.to_string());
        for c in self.conns.iter_mut().flatten() {
            c.conn.set_sets(&self.sets);
        }
        self.read_text_state(first, sql)
            .await
            .map_err(|e| e.error)?;
        Ok(())
    }

    async fn kill(&mut self, id: u32, query_only: bool) -> Result<(), MyError> {
        let Some(target) = self.shared.sessions.get(id) else {
            return Err(MyError::new(1094, format!("Unknown thread id: {id}")));
        };
        if target.user() != self.ctl.user() {
            return Err(MyError::new(
                1095,
                format!("You are not owner of thread {id}"),
            ));
        }
        if !query_only {
            target.kill();
        }
        // Its statements stop on every node they run on (from connections of their own).
        for (node, replica, thread) in target.running_now() {
            let killed = match replica {
                None => self
                    .outside(node, &[&format!("KILL QUERY {thread}")], false)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.error),
                Some(r) => self.shared.backends.kill_on_replica(node, r, thread).await,
            };
            if let Err(e) = killed.map_err(|error| NodeError {
                node,
                error,
                broke: false,
            }) {
                // A statement that already ended there leaves nothing to kill.
                if e.error.code != 1094 {
                    warn!(node = %self.name(node), error = %e.error, "KILL QUERY for session {id} failed on a node");
                }
            }
        }
        if id == self.conn_id && !query_only {
            return Err(MyError::new(1927, "Connection was killed"));
        }
        Ok(())
    }

    fn tx_mode(&self) -> TxMode {
        self.shared.topology().tx_mode
    }

    fn new_xid(&self) -> String {
        self.shared.new_xid()
    }

    async fn run_each(&mut self, stmts: &[(usize, String)]) -> Vec<Result<(), NodeError>> {
        self.reap();
        let mut opened = Vec::with_capacity(stmts.len());
        for (n, _) in stmts {
            opened.push(self.open(*n).await.err());
        }
        let results = {
            let mut by_node: Vec<Option<&mut NodeConn>> =
                self.conns.iter_mut().map(Option::as_mut).collect();
            let conns: Vec<Option<&mut NodeConn>> = stmts
                .iter()
                .zip(&opened)
                .map(|((n, _), failed)| {
                    if failed.is_some() {
                        None
                    } else {
                        by_node.get_mut(*n).and_then(Option::take)
                    }
                })
                .collect();
            join_all(
                conns
                    .into_iter()
                    .zip(stmts)
                    .map(|(c, (_, sql))| async move {
                        match c {
                            // The proxy's own XA steps come two to a text.
                            Some(c) if sql.contains(';') => {
                                c.conn.query_batch(sql).await.map_err(Some)
                            }
                            Some(c) => {
                                // A COMMIT's answer names its transaction's GTID; what the
                                // connection was told before is another statement's.
                                c.conn.take_last_gtid();
                                c.conn.query_drop(sql).await.map_err(Some)
                            }
                            None => Err(None),
                        }
                    }),
            )
            .await
        };
        let mut out = Vec::with_capacity(stmts.len());
        for ((r, failed), (node, sql)) in results.into_iter().zip(opened).zip(stmts) {
            out.push(match (r, failed) {
                (Ok(()), _) => {
                    self.committed(*node, sql);
                    Ok(())
                }
                (Err(_), Some(e)) => Err(e),
                (Err(None), None) => Err(vanished(*node)),
                (Err(Some(e)), None) => {
                    let err = self.node_error(*node, &e);
                    self.failed(*node, &err.error.message, err.broke, err.error.code);
                    Err(err)
                }
            });
        }
        out
    }

    async fn decision_table(&mut self, node: usize) -> Result<String, NodeError> {
        self.open(node).await?;
        let db = self
            .conns
            .get(node)
            .and_then(Option::as_ref)
            .and_then(|c| c.conn.url_db());
        let Some(db) = db else {
            return Err(NodeError {
                node,
                error: MyError::unsupported(format!(
                    "a transaction that writes several nodes keeps its decision record in the database of node `{}`'s URL, and that URL names none",
                    self.shared.backends.name(node)
                )),
                broke: false,
            });
        };
        let table = crate::exec::txn::decisions_in(&db);
        if !self.shared.decision_table_ready(node) {
            self.outside(node, &[&crate::exec::txn::decisions_ddl(&table)], false)
                .await?;
            self.shared.decision_table_made(node);
        }
        Ok(table)
    }

    fn forget_decision_table(&mut self, node: usize) {
        self.shared.decision_table_gone(node);
    }

    fn discard(&mut self, node: usize) {
        if let Some(c) = self.conns.get_mut(node).and_then(Option::as_mut) {
            c.conn.discard();
        }
        self.drop_conn(node);
    }

    fn count_tx(&self, outcome: &str) {
        self.shared
            .metrics
            .transactions
            .with_label_values(&[outcome])
            .inc();
    }

    fn shadow_failed(&self, node: usize, error: &MyError) {
        use std::sync::atomic::Ordering;
        self.shared
            .migration
            .shadow_failures
            .fetch_add(1, Ordering::Relaxed);
        self.shared.metrics.shadow_failures.inc();
        warn!(
            conn = self.conn_id,
            node = %self.shared.topology().node_name(node),
            error = %error,
            "a dual write's row images did not reach the migration's target; its verify will copy them again"
        );
    }

    fn count_merged(&self, rows: u64) {
        self.shared.metrics.rows_merged.inc_by(rows);
    }

    fn count_tier(&self, mode: &str) {
        self.shared
            .metrics
            .tier_statements
            .with_label_values(&[mode])
            .inc();
    }

    fn count_lookups(&self, outcome: &str, n: u64) {
        self.shared
            .metrics
            .lookups
            .with_label_values(&[outcome])
            .inc_by(n);
    }

    fn overflowed(&self, read: &str) {
        self.shared.overflowed_store(self.db(), read);
    }

    fn count_copied(&self, how: &str, rows: u64) {
        self.shared
            .metrics
            .copied_rows
            .with_label_values(&[how])
            .inc_by(rows);
    }

    fn kept_definition(&self, table: &str) -> Option<Arc<str>> {
        self.shared.definitions.get(&self.definition_key(table))
    }

    fn keep_definition(&self, table: &str, text: Option<&str>) {
        let key = self.definition_key(table);
        match text {
            Some(t) => self.shared.definitions.insert(key, t.into()),
            None => self.shared.definitions.invalidate(&key),
        }
    }
}

impl NodeSession {
    /// A table's key among the kept definitions: the session's database and its name.
    fn definition_key(&self, table: &str) -> String {
        format!(
            "{}\0{}",
            self.db.as_deref().unwrap_or_default(),
            table.to_ascii_lowercase()
        )
    }
}

/// What a statement's result collations are kept by: its database and shape, its literals
/// and `?` alike (a prepared statement's node statement has its values written in and its
/// carried rows as a `?`: one shape for every execution). A statement with no shape (past
/// the digest's length) is kept by its text only when that is no longer: rows carried inside
/// a statement would make a key of up to their 256 KiB at every execution.
fn collations_key(db: &str, sql: &str) -> Option<String> {
    let shape = match crate::sql::digest::digest_prepared(sql) {
        Some(d) => d.text,
        None if sql.len() <= crate::sql::digest::MAX_LEN => sql.to_string(),
        None => return None,
    };
    Some(format!("{db}\0{shape}"))
}

#[cfg(test)]
mod tests {
    use super::collations_key;

    #[test]
    fn collations_are_kept_by_the_statements_shape_and_never_by_a_long_text() {
        let node_sql = |user: u32| {
            format!("SELECT o.id FROM (SELECT * FROM JSON_TABLE(CONVERT(? USING utf8mb4), '$[*]' COLUMNS (`id` int(11) PATH '$[0]' ERROR ON ERROR)) AS `__sp_rows` LIMIT 18446744073709551615) o WHERE o.u = {user} ORDER BY o.id")
        };
        let key = collations_key("shop", &node_sql(37));
        assert!(key.is_some());
        assert_eq!(key, collations_key("shop", &node_sql(74)));
        assert_ne!(key, collations_key("other", &node_sql(37)));
        // Text statements: by their literals' shape, as before.
        assert_eq!(
            collations_key("shop", "SELECT a FROM t WHERE b = 'x' ORDER BY a"),
            collations_key("shop", "SELECT a FROM t WHERE b = 'yy' ORDER BY a"),
        );
        // No shape, and longer than one: not kept.
        let long = format!("SELECT {} FROM t ORDER BY a", "a, ".repeat(2_000) + "a");
        assert_eq!(collations_key("shop", &long), None);
        let unterminated = "SELECT 'a FROM t ORDER BY a";
        assert!(collations_key("shop", unterminated).is_some());
    }
}
