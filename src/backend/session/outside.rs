//! What the session asks of a node on a connection of its own, outside its transaction and
//! state (lookups, reservations, the columns of a statement prepared apart), and the
//! character set it sets again on its own connection after such a probe.

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

    /// The session's character-set SETs (the handshake's `SET NAMES x COLLATE y`, the
    /// client's own) run again on its connection to `node`: after a prepared `SET STATEMENT
    /// character_set_results = ...` MariaDB 10.11 describes later prepared statements in the
    /// character set's default collation until they are.
    pub(super) async fn names_again(&mut self, node: usize) -> Result<(), NodeError> {
        let sets: Vec<String> = self
            .sets
            .iter()
            .filter(|s| {
                let u = s.to_ascii_uppercase();
                u.starts_with("SET NAMES")
                    || u.starts_with("SET CHARACTER SET")
                    || u.starts_with("SET CHARSET")
                    || u.contains("CHARACTER_SET_")
                    || u.contains("COLLATION_")
            })
            .cloned()
            .collect();
        for s in sets {
            self.run_own(node, &s).await?;
        }
        Ok(())
    }
}
