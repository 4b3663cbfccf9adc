//! Session side of directory lookups and time_tier plans: reading lookup tables before
//! planning, the window reads that de-duplicate overlapping tiers, per-segment counts for
//! pages, newest-first polling and retried writes over tiers.

use std::time::Duration;

use super::*;
use crate::config::TableRule;
use crate::plan::tier::{fill, TierMode, TierPlan};
use crate::routing::time_tier::pick_page;

/// Errors worth retrying on a tier: lost or refused connections, deadlocks, lock waits.
fn transient(e: &MyError) -> bool {
    matches!(
        e.code,
        1105 | 1205 | 1213 | 1040 | 1053 | 1927 | 2006 | 2013
    )
}

fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        Value::UInt(u) => Some(*u),
        Value::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::UInt(u) => i64::try_from(*u).ok(),
        Value::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Plans a statement; directory keys the lookup caches lack are read from their lookup
    /// tables first, then it is planned again. A lookup failure fails the statement.
    pub(super) async fn plan_with_lookups(
        &mut self,
        sql: &str,
        parsed: Result<&Parsed, &str>,
        params: &[Value],
        topo: &Arc<Topology>,
    ) -> (Plan, Vec<(String, u16)>) {
        let mut read_once = false;
        loop {
            let (plan, slots) = self.shared.with_plan_ctx(topo, |ctx| {
                plan::plan_traced(sql, parsed, params, topo, ctx)
            });
            match plan {
                Plan::NeedLookup(keys) if !read_once => {
                    read_once = true;
                    if let Err(e) = self.read_lookups(topo, keys).await {
                        self.shared
                            .metrics
                            .lookups
                            .with_label_values(&["failed"])
                            .inc();
                        return (
                            Plan::Refuse {
                                code: e.code,
                                message: e.message,
                            },
                            Vec::new(),
                        );
                    }
                }
                other => return (other, slots),
            }
        }
    }

    /// Reads these keys' entries from their tables' lookup tables into the caches.
    async fn read_lookups(
        &mut self,
        topo: &Topology,
        mut keys: Vec<(String, Vec<u8>)>,
    ) -> Result<(), MyError> {
        keys.sort();
        keys.dedup();
        let mut by_table: Vec<(String, Vec<Vec<u8>>)> = Vec::new();
        for (t, k) in keys {
            match by_table.last_mut() {
                Some((lt, ks)) if *lt == t => ks.push(k),
                _ => by_table.push((t, vec![k])),
            }
        }
        for (table, keys) in by_table {
            let Some(TableRule::Directory(d)) = topo.table(&table) else {
                continue;
            };
            let Some(l) = &d.lookup else { continue };
            let name = self.shared.backends.name(l.node).to_string();
            let sql = l.query(&keys);
            let mut conn = self.shared.backends.connect(l.node).await.map_err(|e| {
                MyError::new(
                    1105,
                    format!(
                        "shardproxy: the lookup table `{}` of `{table}` on `{name}` cannot be read, so the row's node is unknown: {}",
                        l.table, e.message
                    ),
                )
            })?;
            let rows: Vec<mysql_async::Row> = conn.query(sql).await.map_err(|e| {
                MyError::new(
                    1105,
                    format!(
                        "shardproxy: the lookup table `{}` of `{table}` on `{name}` cannot be read, so the row's node is unknown: {e}",
                        l.table
                    ),
                )
            })?;
            let mut found: HashMap<Vec<u8>, usize> = HashMap::new();
            for row in rows {
                let vals = row.unwrap_raw();
                let key = match vals.first() {
                    Some(Some(Value::Bytes(b))) => b.clone(),
                    Some(Some(v @ (Value::Int(_) | Value::UInt(_)))) => {
                        crate::routing::slot::text_form(v).unwrap_or_default()
                    }
                    _ => continue,
                };
                let node_name = match vals.get(1) {
                    Some(Some(Value::Bytes(b))) => String::from_utf8_lossy(b).into_owned(),
                    _ => {
                        return Err(MyError::new(
                            1105,
                            format!(
                                "shardproxy: the lookup table `{}` of `{table}` has no node name for key {}",
                                l.table,
                                String::from_utf8_lossy(&key)
                            ),
                        ))
                    }
                };
                let node = topo
                    .node_index(&node_name)
                    .filter(|n| !topo.nodes[*n].retired);
                let Some(node) = node else {
                    return Err(MyError::new(
                        1105,
                        format!(
                            "shardproxy: the lookup table `{}` of `{table}` sends key {} to `{node_name}`, which is not a node in service",
                            l.table,
                            String::from_utf8_lossy(&key)
                        ),
                    ));
                };
                found.insert(key, node);
            }
            self.shared
                .metrics
                .lookups
                .with_label_values(&["read"])
                .inc_by(keys.len() as u64);
            let entries: Vec<(Vec<u8>, Option<usize>)> = keys
                .into_iter()
                .map(|k| {
                    let n = found.get(&k).copied();
                    (k, n)
                })
                .collect();
            self.shared.lookup_store(&table, entries);
        }
        Ok(())
    }

    /// Rows of a query the proxy runs for itself (binary protocol: typed values).
    async fn fetch_rows(&mut self, node: usize, sql: String) -> Result<Vec<Vec<Value>>, MyError> {
        self.on_conn(node, move |c| {
            Box::pin(async move {
                let rows: Vec<mysql_async::Row> = c.exec(sql, ()).await?;
                Ok(rows
                    .into_iter()
                    .map(|r| {
                        r.unwrap_raw()
                            .into_iter()
                            .map(|v| v.unwrap_or(Value::NULL))
                            .collect()
                    })
                    .collect())
            })
        })
        .await
    }

    /// Each window's exclusion for its older tier: the newer tier's keys there.
    async fn tier_exclusions(&mut self, t: &TierPlan) -> Result<Vec<Option<String>>, MyError> {
        let mut out = Vec::with_capacity(t.windows.len());
        for w in &t.windows {
            let rows = self.fetch_rows(w.node, t.window_sql(w)).await?;
            if rows.len() as u64 > self.topo.max_rows_per_statement {
                return Err(MyError::new(
                    1235,
                    format!(
                        "shardproxy: the overlap window [{}, {}) of `{}` holds {} rows on its newer tier, more than max_rows_per_statement; narrow the query's date range",
                        w.lo,
                        w.hi,
                        t.table,
                        rows.len()
                    ),
                ));
            }
            out.push(t.exclusion(w, &rows));
        }
        Ok(out)
    }

    pub(super) async fn tier(&mut self, t: TierPlan, binary: bool, read: bool) -> Outcome {
        let mode = match &t.mode {
            TierMode::Read { .. } => "read",
            TierMode::Page { .. } => "page",
            TierMode::PollFirst { .. } => "poll",
            TierMode::Write { .. } => "write",
        };
        self.shared
            .metrics
            .tier_statements
            .with_label_values(&[mode])
            .inc();
        match &t.mode {
            TierMode::Read { node_sql, merge } => {
                let excl = self.tier_exclusions(&t).await?;
                let targets: Vec<Target> = (0..t.parts.len())
                    .map(|i| Target {
                        node: t.parts[i].node,
                        sql: fill(node_sql, &t.part_pred(i, &excl)),
                        params: Vec::new(),
                    })
                    .collect();
                self.scatter(targets, OkMerge::Sum, merge.clone(), binary, read)
                    .await
            }
            TierMode::Page {
                node_sql,
                count_tail,
                segments,
                merge,
                offset,
                limit,
            } => {
                self.tier_page(
                    &t, node_sql, count_tail, segments, merge, *offset, *limit, binary, read,
                )
                .await
            }
            TierMode::PollFirst { sql, params } => {
                self.tier_poll(&t, sql, params, binary, read).await
            }
            TierMode::Write {
                sql,
                params,
                retries,
                retry_ms,
            } => {
                self.tier_write(&t, sql, params, *retries, *retry_ms, binary)
                    .await
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn tier_page(
        &mut self,
        t: &TierPlan,
        node_sql: &str,
        count_tail: &str,
        segments: &[crate::routing::time_tier::Segment],
        merge: &MergeSpec,
        offset: u64,
        limit: u64,
        binary: bool,
        read: bool,
    ) -> Outcome {
        let excl = self.tier_exclusions(t).await?;
        let preds: Vec<String> = (0..t.parts.len()).map(|i| t.part_pred(i, &excl)).collect();
        // Count rows per segment, one part at a time in page order, until the segments
        // counted so far hold the whole page.
        let mut counts: Vec<Vec<Option<u64>>> =
            segments.iter().map(|s| vec![None; s.parts.len()]).collect();
        let mut order: Vec<usize> = Vec::new();
        for s in segments {
            for p in &s.parts {
                if !order.contains(p) {
                    order.push(*p);
                }
            }
        }
        let need = offset.saturating_add(limit);
        let known = |counts: &Vec<Vec<Option<u64>>>| -> (usize, u64) {
            let mut n = 0;
            let mut total = 0u64;
            for c in counts {
                if c.iter().any(Option::is_none) {
                    break;
                }
                total += c.iter().map(|x| x.unwrap_or(0)).sum::<u64>();
                n += 1;
            }
            (n, total)
        };
        for p in order {
            if known(&counts).1 >= need {
                break;
            }
            let sql = t.count_sql(count_tail, p, &preds[p], segments);
            let rows = self.fetch_rows(t.parts[p].node, sql).await?;
            for row in rows {
                let (Some(seg), Some(n)) =
                    (row.first().and_then(as_i64), row.get(1).and_then(as_u64))
                else {
                    continue;
                };
                let Ok(seg) = usize::try_from(seg) else {
                    continue;
                };
                if let Some(j) = segments
                    .get(seg)
                    .and_then(|s| s.parts.iter().position(|x| *x == p))
                {
                    counts[seg][j] = Some(n);
                }
            }
            for (s, seg) in segments.iter().enumerate() {
                if let Some(j) = seg.parts.iter().position(|x| *x == p) {
                    counts[s][j].get_or_insert(0);
                }
            }
        }
        let (n_known, _) = known(&counts);
        let known_counts: Vec<Vec<u64>> = counts[..n_known]
            .iter()
            .map(|c| c.iter().map(|x| x.unwrap_or(0)).collect())
            .collect();
        let mut spec = merge.clone();
        spec.limit = Some(limit);
        let targets = match pick_page(&segments[..n_known], &known_counts, offset, limit) {
            None => {
                // Past the last row: an empty page with the query's columns.
                spec.offset = 0;
                vec![Target {
                    node: t.parts[0].node,
                    sql: format!("{} LIMIT 0", fill(node_sql, &preds[0])),
                    params: Vec::new(),
                }]
            }
            Some(pick) => {
                spec.offset = pick.skip;
                let range: Vec<String> = segments[pick.first..=pick.last]
                    .iter()
                    .map(|s| format!("({})", s.pred(&t.col_ref)))
                    .collect();
                let range = range.join(" OR ");
                pick.reads
                    .iter()
                    .map(|&(p, off, cnt)| Target {
                        node: t.parts[p].node,
                        sql: format!(
                            "{} LIMIT {off}, {cnt}",
                            fill(node_sql, &format!("{} AND ({range})", preds[p]))
                        ),
                        params: Vec::new(),
                    })
                    .collect()
            }
        };
        self.scatter(targets, OkMerge::Sum, Some(spec), binary, read)
            .await
    }

    /// Newest tier first; the first whose answer has rows is the answer.
    async fn tier_poll(
        &mut self,
        t: &TierPlan,
        sql: &str,
        params: &[Value],
        binary: bool,
        read: bool,
    ) -> Outcome {
        for (k, part) in t.parts.iter().enumerate() {
            let node = part.node;
            let target = Target {
                node,
                sql: sql.to_string(),
                params: params.to_vec(),
            };
            if k + 1 == t.parts.len() {
                return self.single(target, binary, read).await;
            }
            self.enter_tx(node, read).await?;
            self.last_node = Some(node);
            let name = self.shared.backends.name(node).to_string();
            self.conn(node).await?;
            let status = self.status();
            let multi_results = self
                .caps
                .contains(mysql_common::constants::CapabilityFlags::CLIENT_MULTI_RESULTS);
            let Some(conn) = self.conns.get_mut(node).and_then(Option::as_mut) else {
                return Err(MyError::new(1105, "shardproxy: connection vanished"));
            };
            let outcome: mysql_async::Result<bool> = async {
                let mut res = start(conn, &target, binary).await?;
                let Some(cols) = res.columns() else {
                    relay(&mut self.io, res, binary, status, multi_results).await?;
                    return Ok(true);
                };
                let Some(first) = res.next().await? else {
                    res.finish().await?;
                    return Ok(false);
                };
                self.io.write(&codec::column_count(cols.len()));
                for c in cols.iter() {
                    self.io.write(&codec::column_def(c));
                }
                self.io.write(&codec::eof(status, 0));
                write_row(&mut self.io, first, &cols, binary);
                while let Some(row) = res.next().await? {
                    write_row(&mut self.io, row, &cols, binary);
                    self.io.maybe_flush().await?;
                }
                let warnings = res.warnings();
                self.io.write(&codec::eof(status, warnings));
                res.finish().await?;
                Ok(true)
            }
            .await;
            match outcome {
                Ok(true) => return Ok(()),
                Ok(false) => continue,
                Err(e) => {
                    self.shared.backends.note_error(node, &e.to_string());
                    if MyError::breaks_connection(&e) {
                        self.drop_conn(node);
                    }
                    return Err(MyError::from_backend(&name, &e));
                }
            }
        }
        Err(MyError::new(1105, "shardproxy: no tier to ask"))
    }

    /// The statement on every part, affected rows summed; a part failing transiently is
    /// retried `retries` times `retry_ms` apart.
    async fn tier_write(
        &mut self,
        t: &TierPlan,
        sql: &str,
        params: &[Value],
        retries: u32,
        retry_ms: u64,
        binary: bool,
    ) -> Outcome {
        if self.tx.is_some() || !self.autocommit {
            return Err(MyError::new(
                1235,
                format!(
                    "this write touches {} tiers of `{}` inside a transaction; shardproxy does not support transactions across nodes yet",
                    t.parts.len(),
                    t.table
                ),
            ));
        }
        let mut affected = 0u64;
        let mut warnings = 0u16;
        let mut done: Vec<String> = Vec::new();
        for part in &t.parts {
            let node = part.node;
            let name = self.shared.backends.name(node).to_string();
            let mut attempt = 0u32;
            loop {
                let target = Target {
                    node,
                    sql: sql.to_string(),
                    params: params.to_vec(),
                };
                let r = self
                    .on_conn(node, move |c| {
                        Box::pin(async move {
                            let res = start(c, &target, binary).await?;
                            let (a, _, w, _) = res.ok_info();
                            res.finish().await?;
                            Ok((a, w))
                        })
                    })
                    .await;
                match r {
                    Ok((a, w)) => {
                        affected += a;
                        warnings = warnings.saturating_add(w);
                        done.push(name.clone());
                        break;
                    }
                    Err(e) if transient(&e) && attempt < retries => {
                        attempt += 1;
                        self.shared
                            .metrics
                            .tier_statements
                            .with_label_values(&["write_retry"])
                            .inc();
                        warn!(
                            conn = self.conn_id,
                            node = %name,
                            attempt,
                            "tier write failed transiently, retrying: {}",
                            e.message
                        );
                        tokio::time::sleep(Duration::from_millis(retry_ms)).await;
                    }
                    Err(mut e) => {
                        if !done.is_empty() {
                            e.message = format!(
                                "{} (tier node `{name}`; already applied on {})",
                                e.message,
                                done.join(", ")
                            );
                        }
                        return Err(e);
                    }
                }
            }
        }
        self.last_node = t.parts.first().map(|p| p.node);
        self.write_ok(affected, 0, warnings, "");
        Ok(())
    }
}
