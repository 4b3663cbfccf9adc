//! `UPDATE t SET shard_key = ...` in a session: the read of its rows planned like any
//! statement (lookups, routing), then run with the writes ([`crate::exec::key_update`]).

use tokio::io::{AsyncRead, AsyncWrite};

use super::{Outcome, Session};
use crate::error::MyError;
use crate::plan::key_update::KeyUpdate;
use crate::plan::Plan;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    pub(super) async fn key_update(&mut self, k: &KeyUpdate, binary: bool) -> Outcome {
        let topo = self.topo.clone();
        let read = self.plan_own(&k.select, &topo).await;
        match &read {
            Plan::KeyUpdate(_) | Plan::InsertSelect(_) | Plan::Session(_) => {
                return Err(MyError::internal(format!(
                    "shardproxy: the read of an UPDATE of the shard key of `{}` did not plan as a read",
                    k.table
                )))
            }
            // Refused as a read: the UPDATE is refused for the same reason.
            Plan::Refuse { .. } | Plan::Unroutable { .. } => {
                return Box::pin(self.run_statement(&read, binary, true, "select", None)).await
            }
            _ => {}
        }
        let (door, mut sink) = self.sink(binary);
        let r = crate::exec::key_update::run(door, &mut sink, &topo, k, &read).await;
        let rows = sink.rows;
        self.rows_written += rows;
        r
    }
}
