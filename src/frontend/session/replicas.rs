//! Which of a session's statements may read on a replica (`crate::replica`): a read that
//! the planner sends to nodes as it is, with no side effect and no `/*+ primary */` comment,
//! of no table `[replicas] primary_tables` names. Whether the session's state lets it
//! (a transaction, locks, its writes not yet applied) the node session decides.

use tokio::io::{AsyncRead, AsyncWrite};

use super::Session;
use crate::backend::session::ReadFrom;
use crate::plan::Plan;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Where the statement `sql` of `kind`, planned as `plan` (`None`: routed to one node
    /// by a cached plan), may read.
    pub(super) fn read_from(
        &self,
        plan: Option<&Plan>,
        read: bool,
        kind: &str,
        sql: &str,
    ) -> ReadFrom {
        let topo = &self.topo;
        if !topo.nodes.iter().any(|n| !n.replicas.is_empty()) {
            return ReadFrom::Primary;
        }
        let reads_rows = read
            && kind == "select"
            && crate::sql::replica_read::replica_read(
                sql,
                self.mode(),
                &topo.replicas.primary_tables,
            );
        match plan {
            None if reads_rows => ReadFrom::Replica,
            Some(
                Plan::Route(_)
                | Plan::Scatter { .. }
                | Plan::AnyCopy { .. }
                | Plan::Project { .. }
                | Plan::Limit { .. }
                | Plan::Aggregate { .. }
                | Plan::MergeSort { .. }
                | Plan::KeyPage(_),
            ) if reads_rows => ReadFrom::Replica,
            // Names no table: whatever the session holds may answer it (SHOW WARNINGS
            // reads the last statement's, on a replica when that read there).
            Some(Plan::Sticky { .. }) if reads_rows || kind == "show" => ReadFrom::Held,
            _ => ReadFrom::Primary,
        }
    }
}
