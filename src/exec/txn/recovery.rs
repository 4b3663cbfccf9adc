//! XA recovery: finishes the prepared branches of transactions whose coordinator is gone (a
//! proxy killed between PREPARE and COMMIT, a connection lost at COMMIT).
//!
//! Every proxy runs it, about once a second, over every node: `XA RECOVER` lists the
//! prepared branches; those of this proxy family (format [`XA_FORMAT`], gtrid starting
//! with `[server] xa_prefix` and `:`) that stay prepared for [`GRACE`] are decided by the
//! record on the node their branch qualifier names (see [`crate::exec::txn`]): `rollback`
//! is inserted unless a record is there, waiting on the row lock of a decision in flight,
//! and the branch is committed or rolled back as the record then says. Any number of proxies
//! can do this at once: the insert is idempotent and a branch finished twice answers
//! XAER_NOTA.
//!
//! Decision records older than an hour are deleted once no node lists their gtrid as
//! prepared (checked with every node answering).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_common::value::Value;
use tracing::{info, warn};

use super::cluster::Cluster;
use crate::exec::txn::state::{xid_sql, XA_FORMAT};
use crate::exec::txn::{decide_sql, decisions_ddl, decisions_in, outcome_is_commit};
use crate::node::WireError;
use crate::pools::Pooled;
use crate::value::{integer, text_form};

/// How often every node is asked.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// How long a branch stays prepared before recovery decides it (its coordinator writes the
/// decision record at the same time as it prepares).
pub const GRACE: Duration = Duration::from_secs(2);
/// How often old decision records are deleted.
const CLEANUP_EVERY: Duration = Duration::from_secs(600);

/// A prepared branch as `XA RECOVER` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Prepared {
    pub format: u32,
    pub gtrid: String,
    pub bqual: String,
}

/// The rows of `XA RECOVER` (formatID, gtrid_length, bqual_length, data), parsed.
pub fn parse_recover(rows: &[Vec<Option<Value>>]) -> Vec<Prepared> {
    rows.iter()
        .filter_map(|r| {
            let number = |v: &Option<Value>| integer::<usize>(v.as_ref()?);
            let format = u32::try_from(number(r.first()?)?).ok()?;
            let g = number(r.get(1)?)?;
            let b = number(r.get(2)?)?;
            let data = match r.get(3)? {
                Some(v @ (Value::Bytes(_) | Value::Int(_) | Value::UInt(_))) => text_form(v)?,
                _ => return None,
            };
            let gtrid = String::from_utf8(data.get(..g)?.to_vec()).ok()?;
            let bqual = String::from_utf8(data.get(g..g + b)?.to_vec()).ok()?;
            Some(Prepared {
                format,
                gtrid,
                bqual,
            })
        })
        .collect()
}

/// Runs recovery until the process ends.
pub async fn run(shared: Arc<dyn Cluster>) {
    let mut seen: HashMap<(usize, String), Instant> = HashMap::new();
    let mut last_cleanup = Instant::now();
    loop {
        tokio::time::sleep(INTERVAL).await;
        let all_answered = pass(&*shared, &mut seen).await;
        if all_answered && last_cleanup.elapsed() >= CLEANUP_EVERY {
            last_cleanup = Instant::now();
            cleanup(&*shared, &seen).await;
        }
    }
}

/// One round over every node; `true` when every node answered.
pub async fn pass(shared: &dyn Cluster, seen: &mut HashMap<(usize, String), Instant>) -> bool {
    let topo = shared.topology();
    let prefix = format!("{}:", topo.xa_prefix);
    let mut still: HashSet<(usize, String)> = HashSet::new();
    let mut all = true;
    for (node, n) in topo.nodes.iter().enumerate() {
        if n.retired {
            continue;
        }
        let listed = async {
            let mut c = shared
                .backends()
                .connect(node)
                .await
                .map_err(|e| e.message)?;
            let rows = c
                .query_rows("XA RECOVER")
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((c, parse_recover(&rows)))
        }
        .await;
        let (mut conn, branches) = match listed {
            Ok(x) => x,
            Err(e) => {
                all = false;
                tracing::debug!(node = %n.name, "XA recovery could not list the node: {e}");
                continue;
            }
        };
        for p in branches {
            let ours = p.gtrid.starts_with(&prefix)
                && p.gtrid
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b':'));
            if p.format != XA_FORMAT || !ours {
                continue;
            }
            let key = (node, p.gtrid.clone());
            still.insert(key.clone());
            let first = *seen.entry(key).or_insert_with(Instant::now);
            if first.elapsed() < GRACE {
                continue;
            }
            if let Err(e) = finish(shared, &mut conn, node, &p).await {
                // Said once a minute per branch, not at every round.
                if first
                    .elapsed()
                    .as_secs()
                    .saturating_sub(GRACE.as_secs())
                    .is_multiple_of(60)
                {
                    warn!(node = %n.name, gtrid = %p.gtrid, "XA recovery could not finish a prepared branch yet (tried every second): {e}");
                }
            }
        }
    }
    seen.retain(|k, _| still.contains(k));
    all
}

/// Decides one prepared branch by its record and finishes it on `conn` (its node).
async fn finish(
    shared: &dyn Cluster,
    conn: &mut Pooled,
    node: usize,
    p: &Prepared,
) -> Result<(), String> {
    let topo = shared.topology();
    let Some(decider) = topo.nodes.iter().position(|n| n.name == p.bqual) else {
        return Err(format!(
            "its decision record is on node `{}`, which the rules do not name",
            p.bqual
        ));
    };
    let mut d = shared
        .backends()
        .connect(decider)
        .await
        .map_err(|e| e.message)?;
    d.mark_dirty();
    let Some(db) = d.url_db() else {
        return Err(format!("node `{}`'s URL names no database", p.bqual));
    };
    let table = decisions_in(&db);
    let decided = async {
        d.query_drop(&decisions_ddl(&table)).await?;
        let mut rows = Vec::new();
        for sql in decide_sql(&table, &p.gtrid) {
            rows = d.query_rows(&sql).await?;
        }
        Ok::<_, WireError>(rows)
    }
    .await
    .map_err(|e| e.to_string())?;
    let typed: Vec<Vec<Value>> = decided
        .into_iter()
        .map(|r| r.into_iter().map(|v| v.unwrap_or(Value::NULL)).collect())
        .collect();
    let commit = outcome_is_commit(&typed);
    let x = xid_sql(&p.gtrid, &p.bqual);
    let sql = if commit {
        format!("XA COMMIT {x}")
    } else {
        format!("XA ROLLBACK {x}")
    };
    let outcome = match conn.query_drop(&sql).await {
        Ok(()) => {
            if commit {
                "commit"
            } else {
                "rollback"
            }
        }
        // Finished meanwhile (its coordinator, another proxy), or a branch that changed
        // nothing.
        Err(WireError::Server {
            code: 1397 | 1402, ..
        }) => "already",
        Err(e) => return Err(e.to_string()),
    };
    shared
        .metrics()
        .xa_recovered
        .with_label_values(&[outcome])
        .inc();
    info!(
        node = %topo.nodes[node].name,
        gtrid = %p.gtrid,
        outcome,
        "XA recovery finished a prepared branch whose coordinator was gone"
    );
    Ok(())
}

/// Deletes decision records older than an hour that no node lists as prepared.
async fn cleanup(shared: &dyn Cluster, prepared: &HashMap<(usize, String), Instant>) {
    let topo = shared.topology();
    let keep: Vec<String> = prepared
        .keys()
        .map(|(_, g)| crate::sql::write::token_literal(g))
        .collect();
    for (node, n) in topo.nodes.iter().enumerate() {
        if n.retired || !shared.decision_table_ready(node) {
            continue;
        }
        let r = async {
            let mut c = shared
                .backends()
                .connect(node)
                .await
                .map_err(|e| e.message)?;
            let Some(db) = c.url_db() else {
                return Ok(());
            };
            let table = decisions_in(&db);
            let mut sql = format!("DELETE FROM {table} WHERE at < NOW(6) - INTERVAL 1 HOUR");
            if !keep.is_empty() {
                sql.push_str(&format!(" AND gtrid NOT IN ({})", keep.join(",")));
            }
            c.query_drop(&sql).await.map_err(|e| e.to_string())
        }
        .await;
        if let Err(e) = r {
            warn!(node = %n.name, "could not delete old XA decision records: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Option<Value> {
        Some(Value::Bytes(s.as_bytes().to_vec()))
    }

    #[test]
    fn xa_recover_rows_are_split_into_gtrid_and_bqual() {
        let rows = vec![
            vec![b("21328"), b("14"), b("3"), b("shardproxy:a:1ds0")],
            vec![b("1"), b("3"), b("0"), b("foo")],
            vec![b("1"), b("9"), b("0"), b("short")],
        ];
        let p = parse_recover(&rows);
        assert_eq!(
            p,
            vec![
                Prepared {
                    format: 21328,
                    gtrid: "shardproxy:a:1".into(),
                    bqual: "ds0".into()
                },
                Prepared {
                    format: 1,
                    gtrid: "foo".into(),
                    bqual: String::new()
                }
            ]
        );
    }
}
