//! Rebalance plans in the metadata schema: one `shard_rebalance` row per plan, its moves
//! `shard_migrations` rows with its id and their order (`seq`), `queued` until the
//! migration driver starts them (`crate::migrate::queue`), `dropped` if the plan is aborted
//! first. Any proxy's driver runs the queue from these rows, so a plan outlives the proxy
//! that planned it.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, TxOpts};

use super::migrations::{self, Migration, ACTIVE};

/// The states of a plan not finished.
pub const UNFINISHED: [&str; 3] = ["running", "paused", "aborting"];

/// A `shard_rebalance` row.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub id: u64,
    /// What made it: `REBALANCE ALL`, `DRAIN NODE ds1`, ...
    pub what: String,
    /// `running`, `paused`, `aborting`, `done`, `aborted`.
    pub state: String,
    /// Moves it runs at once, at most (each node in one move at a time).
    pub max_parallel: u32,
    pub message: Option<String>,
}

const PLAN_LOCK: &str = "SELECT GET_LOCK(CONCAT(DATABASE(), '.shardproxy_plan'), 10)";
const PLAN_UNLOCK: &str = "DO RELEASE_LOCK(CONCAT(DATABASE(), '.shardproxy_plan'))";

fn plans_where(filter: &str) -> String {
    format!("SELECT id, what, state, max_parallel, message FROM shard_rebalance {filter} ORDER BY id DESC LIMIT 1")
}

async fn one(c: &mut Conn, filter: &str) -> mysql_async::Result<Option<Plan>> {
    let row: Option<(u64, String, String, u32, Option<String>)> =
        c.query_first(plans_where(filter)).await?;
    Ok(row.map(|(id, what, state, max_parallel, message)| Plan {
        id,
        what,
        state,
        max_parallel,
        message,
    }))
}

/// The plan not finished, if one is.
pub async fn current(c: &mut Conn) -> mysql_async::Result<Option<Plan>> {
    one(c, "WHERE state IN ('running', 'paused', 'aborting')").await
}

/// The newest plan.
pub async fn latest(c: &mut Conn) -> mysql_async::Result<Option<Plan>> {
    one(c, "").await
}

/// A plan's moves, in their order.
pub async fn moves(c: &mut Conn, plan: u64) -> mysql_async::Result<Vec<Migration>> {
    migrations::of_plan(c, plan).await
}

/// Queues a plan of `moves` (each `queued`, in order): its id, or why not (another plan not
/// finished, or a migration running).
pub async fn enqueue(
    c: &mut Conn,
    what: &str,
    max_parallel: u32,
    moves: &[Migration],
) -> mysql_async::Result<Result<u64, String>> {
    let got: Option<Option<i64>> = c.query_first(PLAN_LOCK).await?;
    if got.flatten() != Some(1) {
        return Ok(Err("another rebalance is being planned: try again".into()));
    }
    let r = enqueue_locked(c, what, max_parallel, moves).await;
    let _ = c.query_drop(PLAN_UNLOCK).await;
    r
}

async fn enqueue_locked(
    c: &mut Conn,
    what: &str,
    max_parallel: u32,
    moves: &[Migration],
) -> mysql_async::Result<Result<u64, String>> {
    if let Some(p) = current(c).await? {
        return Ok(Err(format!(
            "rebalance {} ({}) is {}: SHOW REBALANCE, or ABORT REBALANCE first",
            p.id, p.what, p.state
        )));
    }
    if let Some(m) = migrations::active(c).await?.first() {
        return Ok(Err(format!(
            "migration {} ({} of `{}`) is not finished (SHOW MIGRATIONS)",
            m.id,
            m.what(),
            m.table
        )));
    }
    let mut tx = c.start_transaction(TxOpts::default()).await?;
    tx.exec_drop(
        "INSERT INTO shard_rebalance (what, state, max_parallel) VALUES (?, 'running', ?)",
        (what, max_parallel.max(1)),
    )
    .await?;
    let id: Option<u64> = tx.query_first("SELECT LAST_INSERT_ID()").await?;
    let id = id.unwrap_or(0);
    for (i, m) in moves.iter().enumerate() {
        let queued = Migration {
            step: "queued".into(),
            plan: Some(id),
            seq: Some(i as u32 + 1),
            ..m.clone()
        };
        migrations::insert(&mut tx, &queued).await?;
    }
    tx.commit().await?;
    Ok(Ok(id))
}

/// Moves the plan from one of `from` to `to`, with a message; whether it did.
pub async fn set_state(
    c: &mut Conn,
    id: u64,
    from: &[&str],
    to: &str,
    message: Option<&str>,
) -> mysql_async::Result<bool> {
    c.exec_drop(
        format!(
            "UPDATE shard_rebalance SET state = ?, message = ? WHERE id = ? AND state IN ({}) AND {}",
            migrations::literals(from),
            super::schema::FENCE
        ),
        (to, message, id),
    )
    .await?;
    Ok(c.affected_rows() > 0)
}

/// Is a move of the plan under way (started, not finished)?
pub fn in_flight(m: &Migration) -> bool {
    ACTIVE.contains(&m.step.as_str())
}
