//! A proxy's kept connections to its metadata schema, for the admin statements. Each such
//! statement used to open a connection of its own (two, with the driver's switch to the
//! local socket) and make sure of the schema's tables (about twenty statements) before its
//! own one or two: a monitor polling `SHOW MIGRATIONS` every 10 ms cost the metadata node a
//! fifth of a core while slots moved. Connections are now taken from a small pool over the
//! rules' metadata URL, and the schema is made sure of once per pool.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts};

/// The pool over the metadata URL the rules name now (a new one when the URL changes).
#[derive(Default)]
pub struct Links {
    now: Mutex<Option<Arc<Link>>>,
}

struct Link {
    url: String,
    pool: Pool,
    ensured: AtomicBool,
}

/// Idle connections kept at most, and for how long.
const KEPT: usize = 4;
const IDLE: Duration = Duration::from_secs(60);
/// Kept connections tried before a new one is opened.
const TRIES: usize = KEPT + 1;

impl Links {
    /// A connection to the schema at `url`, its tables made sure of. A connection returned
    /// (dropped) goes back to the pool reset (`COM_RESET_CONNECTION`: its transaction rolled
    /// back, its `GET_LOCK`s released).
    pub async fn conn(&self, url: &str) -> mysql_async::Result<Conn> {
        let link = self.link(url)?;
        let mut c = link.healthy().await?;
        if !link.ensured.load(Ordering::Acquire) {
            super::ensure_schema(&mut c).await?;
            link.ensured.store(true, Ordering::Release);
        }
        Ok(c)
    }

    fn link(&self, url: &str) -> mysql_async::Result<Arc<Link>> {
        let mut now = self.now.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = now.as_ref().filter(|l| l.url == url) {
            return Ok(l.clone());
        }
        let opts = OptsBuilder::from_opts(Opts::from_url(url)?).pool_opts(
            PoolOpts::default()
                .with_constraints(PoolConstraints::new(0, KEPT).unwrap_or_default())
                .with_inactive_connection_ttl(IDLE)
                .with_ttl_check_interval(IDLE),
        );
        let link = Arc::new(Link {
            url: url.to_string(),
            pool: Pool::new(opts),
            ensured: AtomicBool::new(false),
        });
        if let Some(old) = now.replace(link.clone()) {
            tokio::spawn(async move {
                let _ = old.pool.clone().disconnect().await;
            });
        }
        Ok(link)
    }
}

impl Link {
    /// A connection that answers a ping: a kept one may have died with its server.
    async fn healthy(&self) -> mysql_async::Result<Conn> {
        for _ in 0..TRIES {
            let mut c = self.pool.get_conn().await?;
            if c.ping().await.is_ok() {
                return Ok(c);
            }
        }
        let mut c = self.pool.get_conn().await?;
        c.ping().await?;
        Ok(c)
    }
}

/// A long-lived task's own connection to the schema at `url` (the balancer, the ranges'
/// upkeep, the load exchange): the one it keeps, or a new one when it has none (after a
/// failure, the task drops it); `None` while the schema cannot be reached.
pub async fn kept<'c>(conn: &'c mut Option<Conn>, url: &str) -> Option<&'c mut Conn> {
    if conn.is_none() {
        *conn = match Opts::from_url(url) {
            Ok(o) => Conn::new(o).await.ok(),
            Err(_) => None,
        };
    }
    conn.as_mut()
}
