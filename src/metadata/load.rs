//! The proxies' load, shared through the metadata schema (`shard_load`): once a second each
//! proxy replaces its rows with the window it just closed (its heaviest slots and every
//! node), and adds the other live proxies' last windows to its own before judging what is
//! hot, so thresholds hold for the cluster's load, not one proxy's share of it.

use mysql_async::prelude::Queryable;

use crate::load::detect::Counts;
use crate::load::Seconds;

/// Slots a proxy publishes a second at most: its heaviest by node time.
pub const MAX_SLOTS: usize = 256;

/// Replaces `proxy`'s rows with its window: every node, and its [`MAX_SLOTS`] heaviest slots
/// of those that reach `floor` in one measure (cold slots, which no sum of a few proxies
/// makes hot, are not written: most of a cluster's slots, most seconds).
pub async fn publish<C: Queryable>(
    c: &mut C,
    proxy: &str,
    w: &Seconds,
    floor: &Counts,
) -> mysql_async::Result<()> {
    let mut slots: Vec<(&(String, u16), &Counts)> = w
        .slots
        .iter()
        .filter(|(_, c)| c.iter().zip(floor).any(|(x, f)| x >= f))
        .collect();
    slots.sort_by(|a, b| (b.1[3], b.1[0]).cmp(&(a.1[3], a.1[0])).then(a.0.cmp(b.0)));
    slots.truncate(MAX_SLOTS);
    let mut params: Vec<mysql_async::Value> = Vec::with_capacity((slots.len() + w.nodes.len()) * 8);
    for ((t, s), c) in &slots {
        params.extend([
            proxy.into(),
            t.as_str().into(),
            i64::from(*s).into(),
            "".into(),
            c[0].into(),
            c[1].into(),
            c[2].into(),
            c[3].into(),
        ]);
    }
    for (n, c) in &w.nodes {
        params.extend([
            proxy.into(),
            "".into(),
            (-1i64).into(),
            n.as_str().into(),
            c[0].into(),
            0u64.into(),
            0u64.into(),
            c[1].into(),
        ]);
    }
    let rows = params.len() / 8;
    c.query_drop("START TRANSACTION").await?;
    let done = async {
        c.exec_drop("DELETE FROM shard_load WHERE proxy_id = ?", (proxy,))
            .await?;
        if rows > 0 {
            // One statement, one round trip, whatever the rows.
            let one = "(?, ?, ?, ?, ?, ?, ?, ?, NOW(3))";
            c.exec_drop(
                format!(
                    "INSERT INTO shard_load (proxy_id, table_name, slot, node_name, statements, \
                     rows_n, bytes, micros, at) VALUES {}",
                    vec![one; rows].join(", ")
                ),
                mysql_async::Params::Positional(params),
            )
            .await?;
        }
        c.query_drop("COMMIT").await
    }
    .await;
    if done.is_err() {
        let _ = c.query_drop("ROLLBACK").await;
    }
    done
}

/// The other proxies' last windows, summed: those written within `fresh_ms` (a proxy that
/// stopped publishing stops counting).
pub async fn others<C: Queryable>(
    c: &mut C,
    proxy: &str,
    fresh_ms: u64,
) -> mysql_async::Result<Seconds> {
    type Row = (String, i64, String, u64, u64, u64, u64);
    let rows: Vec<Row> = c
        .exec(
            "SELECT table_name, slot, node_name, statements, rows_n, bytes, micros FROM shard_load \
             WHERE proxy_id <> ? AND at > NOW(3) - INTERVAL ? MICROSECOND",
            (proxy, fresh_ms * 1000),
        )
        .await?;
    let mut out = Seconds::default();
    for (table, slot, node, s, r, b, us) in rows {
        if table.is_empty() {
            let n = out.nodes.entry(node).or_default();
            n[0] += s;
            n[1] += us;
        } else if let Ok(slot) = u16::try_from(slot) {
            let c = out.slots.entry((table, slot)).or_default();
            for (x, y) in c.iter_mut().zip([s, r, b, us]) {
                *x += y;
            }
        }
    }
    Ok(out)
}
