//! The driving proxy's lease (`shard_driver`, one row): which proxy runs the migrations and
//! the rebalance queue, until when, and its token. A proxy takes the lease only once it has
//! expired, which adds one to the token; the holder renews it well inside its length. Every
//! write of a migration's or a plan's state made on the driver's connections carries its
//! token ([`super::schema::FENCE`]), so a driver that was paused past its lease (a stopped
//! process, a partition that kept its connections open) and wakes up changes nothing.

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

/// Takes the lease for `lease_ms` if it is free or expired: its token.
pub async fn take(c: &mut Conn, me: &str, lease_ms: u64) -> mysql_async::Result<Option<u64>> {
    c.query_drop(
        "INSERT IGNORE INTO shard_driver (id, holder, token, expires) VALUES (1, '', 0, NOW(3) - INTERVAL 1 SECOND)",
    )
    .await?;
    c.exec_drop(
        "UPDATE shard_driver SET holder = ?, token = token + 1, \
         expires = NOW(3) + INTERVAL ? MICROSECOND WHERE id = 1 AND expires < NOW(3)",
        (me, lease_ms * 1000),
    )
    .await?;
    if c.affected_rows() == 0 {
        return Ok(None);
    }
    let row: Option<(String, u64)> = c
        .query_first("SELECT holder, token FROM shard_driver WHERE id = 1")
        .await?;
    let token = row.filter(|(h, _)| h == me).map(|(_, t)| t);
    if let Some(t) = token {
        // This connection's writes of the migrations' state carry the token.
        c.exec_drop("SET @shardproxy_token = ?", (t,)).await?;
    }
    Ok(token)
}

/// Renews the lease held with `token` for `lease_ms` from now; whether it is still held.
pub async fn renew(c: &mut Conn, token: u64, lease_ms: u64) -> mysql_async::Result<bool> {
    c.exec_drop(
        "UPDATE shard_driver SET expires = NOW(3) + INTERVAL ? MICROSECOND WHERE id = 1 AND token = ?",
        (lease_ms * 1000, token),
    )
    .await?;
    let now: Option<u64> = c
        .query_first("SELECT token FROM shard_driver WHERE id = 1")
        .await?;
    Ok(now == Some(token))
}

/// Gives the lease back (another proxy may take it at once).
pub async fn release(c: &mut Conn, token: u64) -> mysql_async::Result<()> {
    c.exec_drop(
        "UPDATE shard_driver SET expires = NOW(3) - INTERVAL 1 SECOND WHERE id = 1 AND token = ?",
        (token,),
    )
    .await
}

/// Who holds the lease and for how much longer (ms, negative: expired), for SHOW
/// REBALANCE.
pub async fn holder(c: &mut Conn) -> mysql_async::Result<Option<(String, u64, i64)>> {
    c.query_first(
        "SELECT holder, token, TIMESTAMPDIFF(MICROSECOND, NOW(3), expires) DIV 1000 FROM shard_driver WHERE id = 1",
    )
    .await
}

/// Marks `c` as a connection of the driver holding `token`.
pub async fn carry(c: &mut Conn, token: u64) -> mysql_async::Result<()> {
    c.exec_drop("SET @shardproxy_token = ?", (token,)).await
}
