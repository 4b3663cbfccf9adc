//! A statement that ran alone (autocommit, outside any transaction) and was ended by a
//! node's deadlock detection is sent again. The node rolled its own transaction back whole:
//! nothing of it committed and no row of it reached the client, so running it again is
//! running it a little later. One MariaDB gives such a statement 1213 only when another
//! client's transaction closed the cycle; behind the proxy the other side may be the proxy's
//! own work (a move's copies), which the client must never see as an error.

use std::sync::Arc;
use std::time::Duration;

use mysql_common::packets::Column;

use super::{start_on, NodeConn};
use crate::exec::door::Stmt;
use crate::exec::txn::state::SessionState;
use crate::metrics::Metrics;
use crate::node::{Head, WireError};

/// How many times a statement is sent again before its deadlock is the client's.
const RERUNS: u32 = 5;

/// Is a statement run in `st` alone (autocommit, outside any transaction)? Inside one, the
/// deadlock rolled back the client's earlier statements too: the transaction is theirs.
pub(super) fn alone(st: &SessionState) -> bool {
    st.tx.is_none() && st.autocommit && !st.ddl
}

/// Is `sql` a data change that can be sent again after a deadlock? Not a CALL (a procedure
/// commits as it goes) nor a statement that assigns a user variable (`@v := ..` keeps what
/// the failed run assigned). Looked at only once a deadlock ended it.
fn data_change(sql: &str) -> bool {
    crate::sql::first_word(sql).is_some_and(|w| {
        ["INSERT", "REPLACE", "UPDATE", "DELETE"]
            .iter()
            .any(|k| w.eq_ignore_ascii_case(k))
    }) && !sql.contains(":=")
}

/// [`start_on`], sent again (after 2, 4, 8 .. ms) while the node answers 1213, when the
/// statement ran `alone` and is a data change.
pub(super) async fn start_rerunning(
    nc: &mut NodeConn,
    stmt: Stmt<'_>,
    binary: bool,
    alone: bool,
    metrics: &Metrics,
) -> Result<(Head, Option<Arc<[Column]>>), WireError> {
    let mut tries = 0;
    loop {
        match start_on(nc, stmt, binary).await {
            Err(WireError::Server { code: 1213, .. })
                if alone && tries < RERUNS && data_change(stmt.sql) =>
            {
                tries += 1;
                metrics
                    .transactions
                    .with_label_values(&["autocommit_deadlock_rerun"])
                    .inc();
                tokio::time::sleep(Duration::from_millis(1 << tries)).await;
            }
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{alone, data_change};
    use crate::exec::txn::state::SessionState;

    #[test]
    fn only_a_data_change_run_alone_is_sent_again() {
        let reruns = |st: &SessionState, sql: &str| alone(st) && data_change(sql);
        let on_its_own = SessionState::default();
        for sql in [
            "UPDATE t SET v = v + 1 WHERE k > 3",
            "/* app */ delete FROM t WHERE v % 7 = 3",
            "INSERT INTO t VALUES (1, 'a@b.c')",
            "REPLACE INTO t VALUES (1, 2)",
        ] {
            assert!(reruns(&on_its_own, sql), "{sql}");
        }
        for sql in [
            "CALL p()",
            "UPDATE t SET v = (@n := @n + 1)",
            "SELECT * FROM t FOR UPDATE",
            "SET @a = 1",
        ] {
            assert!(!reruns(&on_its_own, sql), "{sql}");
        }
        let off = SessionState {
            autocommit: false,
            ..Default::default()
        };
        assert!(!reruns(&off, "UPDATE t SET v = 1"));
        let mut open = SessionState::default();
        open.begin("BEGIN");
        assert!(!reruns(&open, "UPDATE t SET v = 1"));
    }
}
