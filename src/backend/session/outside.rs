//! What the session asks of a node on a connection of its own, outside its transaction and
//! state: lookups, reservations, and the columns of a statement prepared apart.

use super::*;

impl NodeSession {
    /// A pooled connection to `node`, not the session's.
    async fn pooled(&self, node: usize) -> Result<crate::pools::Pooled, NodeError> {
        self.shared
            .backends
            .connect(node)
            .await
            .map_err(|error| broken_at(node, error))
    }

    /// Statements on a pooled connection of their own to `node`, outside the session, on
    /// the URL's database: the rows of the last. `dirty`: they leave state on it.
    pub(super) async fn outside(
        &self,
        node: usize,
        sqls: &[&str],
        dirty: bool,
    ) -> Result<Vec<Vec<Value>>, NodeError> {
        let mut conn = self.pooled(node).await?;
        if dirty {
            conn.mark_dirty();
        }
        let r = async {
            conn.ensure_url_db().await?;
            let mut last = Vec::new();
            for sql in sqls {
                last = conn.query_rows(sql).await?;
            }
            Ok::<_, WireError>(last)
        }
        .await;
        r.map(|rows| rows.into_iter().map(typed).collect())
            .map_err(|e| self.node_error(node, &e))
    }

    /// The columns of `sql` prepared (not run) on a connection of its own to `node`,
    /// outside the session, which is reset before anyone takes it again (a prepared `SET
    /// STATEMENT character_set_results = ...` leaves MariaDB 10.11 describing the columns of
    /// later statements on that connection in another collation).
    pub(super) async fn columns_outside(
        &self,
        node: usize,
        sql: &str,
    ) -> Result<Arc<[Column]>, NodeError> {
        let mut conn = self.pooled(node).await?;
        conn.mark_dirty();
        let r = async {
            conn.ensure_url_db().await?;
            let h = conn.prepare(sql).await?;
            let cols = h.columns.clone();
            conn.close(h.id).await?;
            Ok::<_, WireError>(cols)
        }
        .await;
        r.map_err(|e| self.node_error(node, &e))
    }
}
