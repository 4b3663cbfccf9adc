//! Prometheus metrics: what ops watch (statements by type and route, latency per node,
//! backend errors, connections held, rows merged, refusals by reason, reloads, the rules
//! version) and per-slot counters, the input for hot-spot detection.

use std::sync::Arc;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};
use tracing::{info, warn};

use crate::routing::slot::SLOTS;

pub struct Metrics {
    registry: Registry,
    pub statements: IntCounterVec,
    pub latency: HistogramVec,
    /// Reads sent to each replica.
    pub replica_reads: IntCounterVec,
    /// Reads that could have gone to a replica and went to the primary, by why.
    pub replica_declined: IntCounterVec,
    /// The nodes' replicas, for their lag and state (`crate::replica`).
    replicas: std::sync::Mutex<Vec<Arc<crate::replica::Health>>>,
    pub backend_errors: IntCounterVec,
    pub held: IntGaugeVec,
    pub rows_merged: IntCounter,
    pub refused: IntCounterVec,
    pub reloads: IntCounterVec,
    pub version: IntGauge,
    /// Ids a key generator refused to issue, by reason (clock_back, out_of_range).
    pub keygen_refused: IntCounterVec,
    /// Directory lookups: cache hits, misses (read from the lookup table), failures.
    pub lookups: IntCounterVec,
    /// Time-tier statements by how they ran (read, page, poll, write) and tier rows counted.
    pub tier_statements: IntCounterVec,
    /// Rows read through the proxy into gathered statements' copies, by how.
    pub copied_rows: IntCounterVec,
    /// Transactions ended, by how (commit, commit_xa, commit_in_turn, rollback, failed,
    /// unknown, rolled_back_by_error, dual_write_deadlock_retried) and prepared branches
    /// recovery finished.
    pub transactions: IntCounterVec,
    pub xa_recovered: IntCounterVec,
    /// Deadlocks across nodes the proxy broke.
    pub deadlocks: prometheus::IntCounter,
    /// Hot-slot moves this proxy's balancer queued (`[balance] mode = "auto"`).
    pub balance_moves: prometheus::IntCounter,
    /// Client commands that panicked (bugs; each ended its client's connection).
    pub panics: prometheus::IntCounter,
    /// Clients that hung up while a statement of theirs ran (its node statements killed).
    pub hangups: prometheus::IntCounter,
    /// Node connections pinned to their session by state the proxy does not track, by
    /// the statement's kind of state.
    pub pins: IntCounterVec,
    /// Slot migrations: passes of the driver over each step, steps that failed (tried
    /// again), migrations ended by outcome, rows copied and chunks that differed, row
    /// images a target did not take, and how long writes waited at cutovers.
    pub migration_step: IntCounterVec,
    pub migration_errors: IntCounter,
    pub migrations: IntCounterVec,
    pub migration_rows: IntCounterVec,
    pub shadow_failures: IntCounter,
    pub migration_freeze_seconds: prometheus::Histogram,
    /// Load per slot, node and key (`crate::load`), the input of hot-spot detection.
    pub load: crate::load::Load,
}

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric definition")
}

impl Metrics {
    pub fn new() -> Metrics {
        let m = Metrics {
            registry: Registry::new(),
            statements: counter_vec(
                "shardproxy_statements_total",
                "Client statements by type and route kind",
                &["type", "route"],
            ),
            replica_reads: counter_vec(
                "shardproxy_replica_reads_total",
                "Reads sent to each replica",
                &["replica"],
            ),
            replica_declined: counter_vec(
                "shardproxy_replica_declined_total",
                "Reads that could have gone to a replica and went to the primary, by why",
                &["reason"],
            ),
            replicas: Default::default(),
            latency: HistogramVec::new(
                HistogramOpts::new(
                    "shardproxy_node_statement_seconds",
                    "Time of statements on each node, as the proxy saw it",
                )
                .buckets(vec![
                    0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0,
                ]),
                &["node"],
            )
            .expect("valid metric definition"),
            backend_errors: counter_vec(
                "shardproxy_backend_errors_total",
                "Statements a node answered with an error or could not answer",
                &["node"],
            ),
            held: IntGaugeVec::new(
                Opts::new(
                    "shardproxy_backend_connections_held",
                    "Node connections held by client sessions",
                ),
                &["node"],
            )
            .expect("valid metric definition"),
            rows_merged: IntCounter::new(
                "shardproxy_rows_merged_total",
                "Rows read from nodes by merges (ordered, aggregate, paginated)",
            )
            .expect("valid metric definition"),
            refused: counter_vec(
                "shardproxy_refused_total",
                "Statements refused instead of answered wrongly, by reason",
                &["reason"],
            ),
            reloads: counter_vec(
                "shardproxy_reloads_total",
                "Rules reloads by outcome",
                &["outcome"],
            ),
            version: IntGauge::new("shardproxy_rules_version", "Version of the rules in force")
                .expect("valid metric definition"),
            keygen_refused: counter_vec(
                "shardproxy_keygen_refused_total",
                "Generated ids refused, by reason (clock_back: the clock stepped back)",
                &["reason"],
            ),
            lookups: counter_vec(
                "shardproxy_directory_lookups_total",
                "Directory keys resolved, by outcome (hit, read, failed)",
                &["outcome"],
            ),
            tier_statements: counter_vec(
                "shardproxy_tier_statements_total",
                "Statements over several tiers of time_tier tables, by mode",
                &["mode"],
            ),
            copied_rows: counter_vec(
                "shardproxy_copied_rows_total",
                "Rows read through the proxy into the temporary copies of gathered statements, by how the copy was read (bound: by a join's keys; indexed: so, through a global index of the copied table; inline: bound, and carried inside the statement instead of a temporary table; spread: an outer table's rows carried inside the statements of the nodes its join values name; whole: by the statement's own filter)",
                &["how"],
            ),
            transactions: counter_vec(
                "shardproxy_transactions_total",
                "Transactions that reached a node, by how they ended",
                &["outcome"],
            ),
            xa_recovered: counter_vec(
                "shardproxy_xa_recovered_total",
                "Prepared XA branches whose coordinator was gone, finished by recovery",
                &["outcome"],
            ),
            deadlocks: prometheus::IntCounter::new(
                "shardproxy_deadlocks_broken_total",
                "Deadlocks across nodes (seen by no node) that the proxy broke",
            )
            .expect("valid metric definition"),
            balance_moves: prometheus::IntCounter::new(
                "shardproxy_balance_moves_total",
                "Hot-slot moves this proxy's balancer queued ([balance] mode = \"auto\")",
            )
            .expect("valid metric definition"),
            pins: counter_vec(
                "shardproxy_session_pins_total",
                "Node connections pinned to their client session (not lent to others until it ends) by state the proxy does not track, by reason",
                &["reason"],
            ),
            hangups: prometheus::IntCounter::new(
                "shardproxy_client_hangups_total",
                "Clients that hung up while a statement of theirs ran: its statements on the nodes were killed",
            )
            .expect("valid metric definition"),
            panics: prometheus::IntCounter::new(
                "shardproxy_panics_total",
                "Client commands that panicked (a bug): each ended its own connection only",
            )
            .expect("valid metric definition"),
            migration_step: counter_vec(
                "shardproxy_migration_step_passes_total",
                "Passes of the migration driver over each step",
                &["step"],
            ),
            migration_errors: IntCounter::new(
                "shardproxy_migration_errors_total",
                "Migration steps that failed (and were tried again)",
            )
            .expect("valid metric definition"),
            migrations: counter_vec(
                "shardproxy_migrations_total",
                "Slot migrations ended, by outcome (done, aborted)",
                &["outcome"],
            ),
            migration_rows: counter_vec(
                "shardproxy_migration_rows_total",
                "Rows copied by backfills (copied), copied again from a source's binary log (recopied), and verify chunks that differed (chunk_differed)",
                &["kind"],
            ),
            shadow_failures: IntCounter::new(
                "shardproxy_migration_shadow_failures_total",
                "Row images of a dual write that a migration's target did not take",
            )
            .expect("valid metric definition"),
            migration_freeze_seconds: prometheus::Histogram::with_opts(
                HistogramOpts::new(
                    "shardproxy_migration_freeze_seconds",
                    "How long writes to moving slots waited at a cutover",
                )
                .buckets(vec![0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0]),
            )
            .expect("valid metric definition"),
            load: crate::load::Load::default(),
        };
        for c in [
            Box::new(m.statements.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(m.latency.clone()),
            Box::new(m.replica_reads.clone()),
            Box::new(m.replica_declined.clone()),
            Box::new(m.backend_errors.clone()),
            Box::new(m.held.clone()),
            Box::new(m.rows_merged.clone()),
            Box::new(m.refused.clone()),
            Box::new(m.reloads.clone()),
            Box::new(m.version.clone()),
            Box::new(m.keygen_refused.clone()),
            Box::new(m.lookups.clone()),
            Box::new(m.tier_statements.clone()),
            Box::new(m.copied_rows.clone()),
            Box::new(m.transactions.clone()),
            Box::new(m.xa_recovered.clone()),
            Box::new(m.deadlocks.clone()),
            Box::new(m.balance_moves.clone()),
            Box::new(m.panics.clone()),
            Box::new(m.hangups.clone()),
            Box::new(m.pins.clone()),
            Box::new(m.migration_step.clone()),
            Box::new(m.migration_errors.clone()),
            Box::new(m.migrations.clone()),
            Box::new(m.migration_rows.clone()),
            Box::new(m.shadow_failures.clone()),
            Box::new(m.migration_freeze_seconds.clone()),
        ] {
            let _ = m.registry.register(c);
        }
        m
    }

    /// The replicas whose lag and state `render` shows.
    pub fn set_replicas(&self, replicas: Vec<Arc<crate::replica::Health>>) {
        *self.replicas.lock().unwrap_or_else(|e| e.into_inner()) = replicas;
    }

    /// Counts a statement (and its bytes) against a slot of a table.
    pub fn slot_hit(&self, table: &str, slot: u16, bytes: usize) {
        self.slot_counters(table).hit(slot, bytes);
    }

    /// A table's slot counters (kept by whoever counts the same table often).
    pub fn slot_counters(&self, table: &str) -> Arc<crate::load::SlotLoad> {
        self.load.table(table)
    }

    /// The Prometheus text exposition of every metric (slots that saw no statement omitted).
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        let mut out = String::from_utf8_lossy(&buf).into_owned();
        self.render_replicas(&mut out);
        let tables = self.load.tables();
        for (name, help, pick) in [
            (
                "shardproxy_slot_statements_total",
                "Statements routed by key to each logical slot",
                crate::load::detect::STATEMENTS,
            ),
            (
                "shardproxy_slot_bytes_total",
                "Statement bytes routed by key to each logical slot",
                crate::load::detect::BYTES,
            ),
            (
                "shardproxy_slot_rows_total",
                "Rows returned or changed by the statements routed by key to each logical slot",
                crate::load::detect::ROWS,
            ),
            (
                "shardproxy_slot_seconds_total",
                "Time the statements routed by key to each logical slot took (their node time and the proxy's)",
                crate::load::detect::MICROS,
            ),
        ] {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} counter\n"));
            for t in &tables {
                for slot in 0..SLOTS as u16 {
                    let c = t.counts(slot);
                    if c[crate::load::detect::STATEMENTS] == 0 {
                        continue;
                    }
                    let label = format!("{{table=\"{}\",slot=\"{slot}\"}}", t.name());
                    if pick == crate::load::detect::MICROS {
                        let secs = c[pick] as f64 / 1e6;
                        out.push_str(&format!("{name}{label} {secs}\n"));
                    } else {
                        out.push_str(&format!("{name}{label} {}\n", c[pick]));
                    }
                }
            }
        }
        let hot = self.load.hot_slots();
        out.push_str("# HELP shardproxy_hot_slots Slots hot now (`[hot]`), by table\n# TYPE shardproxy_hot_slots gauge\n");
        for t in &tables {
            let n = hot.iter().filter(|(table, _)| &**table == t.name()).count();
            out.push_str(&format!(
                "shardproxy_hot_slots{{table=\"{}\"}} {n}\n",
                t.name()
            ));
        }
        out.push_str("# HELP shardproxy_node_load_ratio Each node's node time over the mean of the nodes', over the last `[hot] seconds`\n# TYPE shardproxy_node_load_ratio gauge\n");
        out.push_str("# HELP shardproxy_node_hot Whether the node is hot now (1) or not (0)\n# TYPE shardproxy_node_hot gauge\n");
        for n in self.load.last_nodes() {
            out.push_str(&format!(
                "shardproxy_node_load_ratio{{node=\"{}\"}} {}\nshardproxy_node_hot{{node=\"{}\"}} {}\n",
                n.name,
                n.of_mean,
                n.name,
                u8::from(n.hot_for.is_some())
            ));
        }
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// A coarse label for why a statement was refused.
pub fn refusal_reason(message: &str) -> &'static str {
    let m = message.to_ascii_lowercase();
    if m.contains("transaction") {
        "transaction_spans_nodes"
    } else if m.contains("shard key") && (m.contains("update") || m.contains("move rows")) {
        "shard_key_change"
    } else if m.contains("different nodes") || m.contains("across shards") {
        "cross_node_query"
    } else if m.contains("merge") {
        "unmergeable"
    } else if m.contains("parse") {
        "unparsable"
    } else if m.contains("max_rows_per_statement") {
        "row_cap"
    } else {
        "other"
    }
}

impl Metrics {
    /// `shardproxy_replica_lag_seconds` (absent while a replica's lag is unknown) and
    /// `shardproxy_replica_up` (1 in rotation, 0 not) of each replica.
    fn render_replicas(&self, out: &mut String) {
        use std::fmt::Write;
        let replicas = self
            .replicas
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if replicas.is_empty() {
            return;
        }
        let now = std::time::Instant::now();
        out.push_str("# HELP shardproxy_replica_lag_seconds How stale a read on the replica may be: since it was last seen holding all its primary had logged
# TYPE shardproxy_replica_lag_seconds gauge
");
        for h in &replicas {
            if let Some(lag) = h.lag(now) {
                let _ = writeln!(
                    out,
                    "shardproxy_replica_lag_seconds{{replica=\"{}\"}} {}",
                    h.name,
                    lag.as_secs_f64()
                );
            }
        }
        out.push_str(
            "# HELP shardproxy_replica_up Whether the replica is in rotation (1) or not (0)
# TYPE shardproxy_replica_up gauge
",
        );
        for h in &replicas {
            let _ = writeln!(
                out,
                "shardproxy_replica_up{{replica=\"{}\"}} {}",
                h.name,
                u8::from(h.in_rotation(now))
            );
        }
    }
}

/// Serves `GET /metrics` on `addr` from a thread of its own (so a slow scraper never holds a
/// runtime worker).
pub fn serve(addr: &str, metrics: Arc<Metrics>) -> anyhow::Result<std::net::SocketAddr> {
    let server = tiny_http::Server::http(addr)
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr} (metrics): {e}"))?;
    let local = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| anyhow::anyhow!("metrics listener is not an IP socket"))?;
    info!(%local, "metrics at http://{local}/metrics");
    std::thread::Builder::new()
        .name("shardproxy-metrics".into())
        .spawn(move || {
            for req in server.incoming_requests() {
                let resp = if req.url() == "/metrics" || req.url().starts_with("/metrics?") {
                    let header = tiny_http::Header::from_bytes(
                        &b"Content-Type"[..],
                        &b"text/plain; version=0.0.4; charset=utf-8"[..],
                    );
                    let mut r = tiny_http::Response::from_string(metrics.render());
                    if let Ok(h) = header {
                        r = r.with_header(h);
                    }
                    r
                } else {
                    tiny_http::Response::from_string("not found; see /metrics\n")
                        .with_status_code(404)
                };
                if let Err(e) = req.respond(resp) {
                    warn!("metrics response failed: {e}");
                }
            }
        })?;
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_busy_slots_only() {
        let m = Metrics::new();
        m.statements.with_label_values(&["select", "single"]).inc();
        m.slot_hit("t_order", 7, 40);
        m.slot_hit("t_order", 7, 2);
        m.slot_counters("t_order")
            .spent(7, 3, std::time::Duration::from_millis(5), || None);
        let text = m.render();
        assert!(
            text.contains("shardproxy_statements_total{route=\"single\",type=\"select\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("shardproxy_slot_statements_total{table=\"t_order\",slot=\"7\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("shardproxy_slot_bytes_total{table=\"t_order\",slot=\"7\"} 42"),
            "{text}"
        );
        assert!(
            text.contains("shardproxy_slot_rows_total{table=\"t_order\",slot=\"7\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("shardproxy_slot_seconds_total{table=\"t_order\",slot=\"7\"} 0.005"),
            "{text}"
        );
        assert!(
            text.contains("shardproxy_hot_slots{table=\"t_order\"} 0"),
            "{text}"
        );
        assert!(!text.contains("slot=\"8\""), "{text}");
    }

    #[test]
    fn refusals_are_labelled() {
        assert_eq!(
            refusal_reason("a write on node `ds2` would make this transaction span"),
            "transaction_spans_nodes"
        );
        assert_eq!(
            refusal_reason("UPDATE of the shard key `user_id` of `t` would move rows"),
            "shard_key_change"
        );
        assert_eq!(
            refusal_reason("UNION ... needs a merge that shardproxy does not do yet"),
            "unmergeable"
        );
    }
}
