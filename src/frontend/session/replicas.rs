//! Which of a session's statements may read on a replica (`crate::replica`): a read that
//! the planner sends to nodes as it is, with no side effect and no `/*+ primary */` comment,
//! of no table `[replicas] primary_tables` names. Whether the session's state lets it
//! (a transaction, locks, its writes not yet applied) the node session decides.

use tokio::io::{AsyncRead, AsyncWrite};

use super::Session;
use crate::backend::session::ReadFrom;
use crate::plan::replica::{primary_because, reads_as_sent};
use crate::plan::Plan;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Where the statement `sql` of `kind`, planned as `plan` (`None`: routed to one node
    /// by a cached plan), may read. `sql` `None`: a statement of the proxy's own making for
    /// the client's (a user variable's assignment read back, an UPDATE's read of its rows),
    /// which stays on the primary.
    pub(super) fn read_from(
        &self,
        plan: Option<&Plan>,
        read: bool,
        kind: &str,
        sql: Option<&str>,
    ) -> ReadFrom {
        let Some(sql) = sql else {
            return ReadFrom::Primary;
        };
        let topo = &self.topo;
        if !topo.nodes.iter().any(|n| !n.replicas.is_empty()) {
            return ReadFrom::Primary;
        }
        let tables = &topo.replicas.primary_tables;
        let reads_rows = primary_because(sql, self.mode(), tables, read, kind).is_none();
        match plan {
            None if reads_rows => ReadFrom::Replica,
            Some(p) if reads_rows && reads_as_sent(p) => ReadFrom::Replica,
            // Names no table: whatever the session holds may answer it (SHOW WARNINGS
            // reads the last statement's, on a replica when that read there).
            Some(Plan::Sticky { .. }) if reads_rows || kind == "show" => ReadFrom::Held,
            _ => ReadFrom::Primary,
        }
    }
}
