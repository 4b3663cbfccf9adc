//! The admin's migration statements: `MIGRATE SLOTS a-b OF t TO node [RATE n] [AUTO]`,
//! `SHOW MIGRATIONS`, `CUTOVER [id]`, `ABORT [id]`. They write the migration's row in the
//! metadata schema; the proxy that holds the migration lock runs it
//! (`crate::migrate::driver`).

use mysql_async::Conn;

use super::meta::failed;
use super::words::{headers, parse_range, slot_range_before, unsupported, Answer};
use crate::backend::MyError;
use crate::config::{TableRule, Topology};
use crate::metadata::migrations::{self as store, Migration};
use crate::shared::migration::BLIND_LEASES;
use crate::shared::Shared;

async fn connect(shared: &Shared, t: &Topology) -> Result<Conn, MyError> {
    super::meta::connect(
        shared,
        t,
        "slot migrations need a [metadata] schema, where their state and every proxy's heartbeat are kept",
    )
    .await
}

/// `MIGRATE SLOTS a-b OF t TO node [RATE n] [AUTO]`.
pub async fn migrate(
    shared: &Shared,
    t: &Topology,
    words: &[String],
    text: &str,
) -> Result<Answer, MyError> {
    let usage = || unsupported("usage: MIGRATE SLOTS a-b OF t TO node [RATE rows_per_sec] [AUTO]");
    let after = |k: &str| {
        words
            .iter()
            .position(|x| x.eq_ignore_ascii_case(k))
            .and_then(|i| words.get(i + 1))
            .cloned()
    };
    let range = slot_range_before(text, "OF").ok_or_else(usage)?;
    let (a, b) = parse_range(&range).ok_or_else(usage)?;
    let table = after("OF").ok_or_else(usage)?.to_ascii_lowercase();
    let target = after("TO").ok_or_else(usage)?;
    let rate: u64 = match after("RATE") {
        Some(r) => r.parse().map_err(|_| usage())?,
        None => 0,
    };
    let auto = words.iter().any(|w| w.eq_ignore_ascii_case("AUTO"));
    let Some(TableRule::HashSlot { map, .. }) = t.table(&table) else {
        return Err(unsupported(format!("`{table}` is not a hash_slot table")));
    };
    let Some(to) = t.node_index(&target).filter(|i| !t.nodes[*i].retired) else {
        return Err(unsupported(format!("unknown node `{target}`")));
    };
    let (a, b) = (a as u16, b as u16);
    if let Some(m) = (a..=b).find_map(|s| map.moving(s)) {
        return Err(unsupported(format!(
            "slots {}-{} of `{table}` are already being moved",
            m.first, m.last
        )));
    }
    let from = map.owner_of_slot(a);
    if let Some(s) = (a..=b).find(|s| map.owner_of_slot(*s) != from) {
        return Err(unsupported(format!(
            "slots {a}-{b} of `{table}` are on several nodes (slot {s} is on `{}`, slot {a} on `{}`): move each node's slots apart",
            t.node_name(map.owner_of_slot(s)),
            t.node_name(from)
        )));
    }
    if from == to {
        return Err(unsupported(format!(
            "slots {a}-{b} of `{table}` are on `{target}` already"
        )));
    }
    if let Some(k) = map.key_moves().first() {
        return Err(unsupported(format!(
            "key '{}' of `{table}` is being moved (SHOW MIGRATIONS): wait for the move or ABORT it",
            String::from_utf8_lossy(&k.key)
        )));
    }
    let tables = alike(t, &table);
    let m = Migration::new(
        tables.join(","),
        a,
        b,
        None,
        t.node_name(from).to_string(),
        t.node_name(to).to_string(),
        rate,
        auto,
    );
    let id = start(shared, t, &m).await?;
    Ok(Answer::Done(format!(
        "migration {id} started: slots {a}-{b} of `{table}`{} from `{}` to `{target}` (SHOW MIGRATIONS)",
        also(&tables),
        t.node_name(from)
    )))
}

/// `table` and the hash_slot tables sharded alike with it (`group_of`) that are not moving
/// rows themselves: they move with it so joins on their shard keys stay on one node.
fn alike(t: &Topology, table: &str) -> Vec<String> {
    crate::shared::load::group_of(t, table)
        .into_iter()
        .enumerate()
        .filter(|(i, name)| {
            *i == 0
                || matches!(t.table(name), Some(TableRule::HashSlot { map, .. }) if !map.is_moving())
        })
        .map(|(_, name)| name)
        .collect()
}

/// ` with `b`, `c` (sharded alike, ...)` for a group of tables, after its first.
fn also(tables: &[String]) -> String {
    if tables.len() < 2 {
        return String::new();
    }
    format!(
        " with {} (sharded alike, they move together)",
        tables[1..]
            .iter()
            .map(|x| format!("`{x}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Inserts the migration if no other runs; its id.
async fn start(shared: &Shared, t: &Topology, m: &Migration) -> Result<u64, MyError> {
    let mut c = connect(shared, t).await?;
    none_running(&mut c).await?;
    let id = store::insert(&mut c, m).await.map_err(failed)?;
    drop(c);
    Ok(id)
}

/// Refused (1235, naming it) while a rebalance plan or a migration is not finished.
pub(super) async fn none_running(c: &mut Conn) -> Result<(), MyError> {
    if let Some(p) = crate::metadata::rebalance::current(c)
        .await
        .map_err(failed)?
    {
        return Err(unsupported(format!(
            "rebalance {} ({}) is {}: its moves run first (SHOW REBALANCE)",
            p.id, p.what, p.state
        )));
    }
    if let Some(x) = store::active(c).await.map_err(failed)?.first() {
        return Err(unsupported(format!(
            "migration {} ({} of `{}`) is not finished: one migration runs at a time",
            x.id,
            x.what(),
            x.table
        )));
    }
    Ok(())
}

/// `MIGRATE KEY 'v' OF t TO node [RATE n] [AUTO]`: a directory table's tenant to a node,
/// afterwards its entry names that node; or a key of a hash_slot table (a hot key) split
/// out of its slot to a node of its own, with the tables sharded alike.
pub async fn migrate_key(
    shared: &Shared,
    t: &Topology,
    words: &[String],
) -> Result<Answer, MyError> {
    let usage = || {
        unsupported(
            "usage: MIGRATE KEY 'value' OF t [BUCKETS a-b] TO node [RATE rows_per_sec] [AUTO]",
        )
    };
    let after = |k: &str| {
        words
            .iter()
            .position(|x| x.eq_ignore_ascii_case(k))
            .and_then(|i| words.get(i + 1))
            .cloned()
    };
    let key = words.get(2).cloned().ok_or_else(usage)?;
    let table = after("OF").ok_or_else(usage)?.to_ascii_lowercase();
    let target = after("TO").ok_or_else(usage)?;
    let rate: u64 = match after("RATE") {
        Some(r) => r.parse().map_err(|_| usage())?,
        None => 0,
    };
    let auto = words.iter().any(|w| w.eq_ignore_ascii_case("AUTO"));
    let Some(to) = t.node_index(&target).filter(|i| !t.nodes[*i].retired) else {
        return Err(unsupported(format!("unknown node `{target}`")));
    };
    // After the key, which may be any word.
    let buckets = words
        .iter()
        .skip(3)
        .position(|w| w.eq_ignore_ascii_case("BUCKETS"))
        .map(|i| i + 3);
    if let Some(i) = buckets {
        let range: String = words[i + 1..]
            .iter()
            .take_while(|w| !w.eq_ignore_ascii_case("TO"))
            .map(String::as_str)
            .collect();
        return migrate_buckets(shared, t, &table, &key, &range, to, rate, auto).await;
    }
    let from = crate::migrate::placed(t, &table, &key)
        .await
        .map_err(unsupported)?;
    if from == to {
        return Err(unsupported(format!(
            "key '{key}' of `{table}` is on `{target}` already"
        )));
    }
    let tables = match t.table(&table) {
        Some(TableRule::HashSlot { map, .. }) => {
            if !map.moves().is_empty() {
                return Err(unsupported(format!(
                    "slots of `{table}` are being moved (SHOW MIGRATIONS): wait for the move or ABORT it"
                )));
            }
            alike(t, &table)
        }
        _ => vec![table.clone()],
    };
    let m = Migration::new(
        tables.join(","),
        0,
        0,
        Some(key.clone()),
        t.node_name(from).to_string(),
        t.node_name(to).to_string(),
        rate,
        auto,
    );
    let id = start(shared, t, &m).await?;
    Ok(Answer::Done(format!(
        "migration {id} started: key '{key}' of `{table}`{} from `{}` to `{target}` (SHOW MIGRATIONS)",
        also(&tables),
        t.node_name(from)
    )))
}

/// `MIGRATE KEY 'v' OF t BUCKETS a-b TO node ...`: a run of a salted key's buckets, all on
/// one node, to another.
#[allow(clippy::too_many_arguments)]
async fn migrate_buckets(
    shared: &Shared,
    t: &Topology,
    table: &str,
    key: &str,
    range: &str,
    to: usize,
    rate: u64,
    auto: bool,
) -> Result<Answer, MyError> {
    let run = crate::routing::parse_run(range)
        .and_then(|(a, b)| Some((u16::try_from(a).ok()?, u16::try_from(b).ok()?)));
    let Some((a, b)) = run else {
        return Err(unsupported(format!(
            "BUCKETS takes a range, `a-b` or `a`: not `{range}`"
        )));
    };
    if a > b {
        return Err(unsupported(format!(
            "buckets {a}-{b}: the first is after the last"
        )));
    }
    if let Some(TableRule::HashSlot { map, .. }) = t.table(table) {
        if map.is_moving() {
            return Err(unsupported(format!(
                "rows of `{table}` are being moved (SHOW MIGRATIONS): wait for the move or ABORT it"
            )));
        }
    }
    let from = crate::migrate::buckets_placed(t, table, key, a, b)
        .ok_or_else(|| unsupported(format!("key '{key}' of `{table}` is not salted")))?
        .map_err(unsupported)?;
    if from == to {
        return Err(unsupported(format!(
            "buckets {a}-{b} of key '{key}' of `{table}` are on `{}` already",
            t.node_name(to)
        )));
    }
    let m = Migration::new(
        table.to_string(),
        a,
        b,
        Some(key.to_string()),
        t.node_name(from).to_string(),
        t.node_name(to).to_string(),
        rate,
        auto,
    )
    .of_buckets();
    let id = start(shared, t, &m).await?;
    Ok(Answer::Done(format!(
        "migration {id} started: buckets {a}-{b} of key '{key}' of `{table}` from `{}` to `{}` (SHOW MIGRATIONS)",
        t.node_name(from),
        t.node_name(to)
    )))
}

/// `SHOW MIGRATIONS`.
pub async fn show(shared: &Shared, t: &Topology) -> Result<Answer, MyError> {
    let mut c = connect(shared, t).await?;
    let list = store::list(&mut c).await.map_err(failed)?;
    let lease = t.metadata.as_ref().map_or(10_000, |m| m.lease_ms);
    let live = store::live(&mut c, lease * u64::from(BLIND_LEASES))
        .await
        .map_err(failed)?;
    drop(c);
    let version = live.iter().map(|p| p.version).max().unwrap_or(0);
    let failures: u64 = live.iter().map(|p| p.failures).sum();
    let rows = list
        .iter()
        .map(|m: &Migration| {
            let acked = live.iter().filter(|p| p.version >= version).count();
            vec![
                m.id.to_string(),
                m.table.clone(),
                m.slots_text(),
                m.source.clone(),
                m.target.clone(),
                m.step.clone(),
                m.copied.to_string(),
                m.rows_estimate.to_string(),
                format!("{:.0}", m.rows_per_sec),
                m.chunks_verified.to_string(),
                m.chunks_differing.to_string(),
                failures.saturating_sub(m.failures_seen).to_string(),
                m.cleaned.to_string(),
                format!("{acked}/{}", live.len()),
                m.message.clone().unwrap_or_default(),
                m.capture.clone().unwrap_or_default(),
            ]
        })
        .collect();
    Ok(Answer::Rows {
        columns: headers(&[
            "id",
            "table",
            "slots",
            "source",
            "target",
            "step",
            "rows_copied",
            "rows_estimate",
            "rows_per_sec",
            "chunks_verified",
            "chunks_differing",
            "image_failures",
            "rows_cleaned",
            "proxies_acknowledged",
            "message",
            "capture",
        ]),
        rows,
    })
}

/// `CUTOVER [id]` and `ABORT [id]`: without an id, the one migration that can take it.
pub async fn command(
    shared: &Shared,
    t: &Topology,
    words: &[String],
    cutover: bool,
) -> Result<Answer, MyError> {
    let mut c = connect(shared, t).await?;
    let (from, to): (&[&str], &str) = if cutover {
        (&["ready"], "cutover")
    } else {
        (&store::ABORTABLE, "aborting")
    };
    let id = match words.get(1).map(|w| w.parse::<u64>()) {
        Some(Ok(id)) => id,
        Some(Err(_)) => {
            return Err(unsupported(
                "the migration id is a number (SHOW MIGRATIONS)",
            ))
        }
        None => {
            let active = store::active(&mut c).await.map_err(failed)?;
            let fit: Vec<&Migration> = active
                .iter()
                .filter(|m| from.contains(&m.step.as_str()))
                .collect();
            match fit.as_slice() {
                [one] => one.id,
                [] => {
                    return Err(unsupported(if cutover {
                        "no migration is ready for its cutover (SHOW MIGRATIONS)"
                    } else {
                        "no migration can be aborted (SHOW MIGRATIONS)"
                    }))
                }
                _ => return Err(unsupported("several migrations fit: name the id")),
            }
        }
    };
    if !cutover
        && store::transition(&mut c, id, &["queued"], "dropped")
            .await
            .map_err(failed)?
    {
        drop(c);
        return Ok(Answer::Done(format!(
            "migration {id}: dropped from its rebalance before it began"
        )));
    }
    if store::transition(&mut c, id, from, to)
        .await
        .map_err(failed)?
    {
        drop(c);
        return Ok(Answer::Done(if cutover {
            format!("migration {id}: cutover begins")
        } else {
            format!("migration {id}: aborting; the slots stay on their source")
        }));
    }
    let step = store::get(&mut c, id)
        .await
        .map_err(failed)?
        .map(|m| m.step);
    drop(c);
    Err(unsupported(match step {
        None => format!("no migration {id}"),
        Some(s) if cutover => format!("migration {id} is at `{s}`, not ready for its cutover"),
        Some(s) => format!(
            "migration {id} is at `{s}`: past its cutover the target owns the slots and it cannot be aborted"
        ),
    }))
}
