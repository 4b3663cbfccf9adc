//! This proxy's copy of the views kept in the metadata schema (`crate::plan::views`):
//! loaded before it serves clients, polled every `poll_ms`, and read again at once after a
//! view statement of its own.

use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use super::Shared;
use crate::metadata::views as stored;
use crate::plan::views::Views;

impl Shared {
    /// Reads the views again when their version changed (or `always`).
    pub async fn load_views<C: mysql_async::prelude::Queryable>(
        &self,
        c: &mut C,
        always: bool,
    ) -> mysql_async::Result<()> {
        if !always && stored::version(c).await? == self.views.load().version {
            return Ok(());
        }
        let (version, rows) = stored::read(c).await?;
        let defs: Vec<_> = rows
            .into_iter()
            .map(|s| {
                let mode = crate::sql::lex::Mode::of_sql_mode(&s.sql_mode);
                (s.definition, mode, s.charset)
            })
            .collect();
        let (views, bad) = Views::from_definitions(version, &defs);
        for b in bad {
            warn!("metadata: a stored view no longer reads as one, left out: {b}");
        }
        self.views.store(Arc::new(views));
        Ok(())
    }

    /// One look at the metadata's views (none without a metadata schema).
    pub async fn poll_views(&self) {
        let Some(meta) = self.topology().metadata.clone() else {
            if !self.views.load().is_empty() {
                self.views.store(Arc::new(Views::default()));
            }
            return;
        };
        let loaded = async {
            let mut c = self.metadata_links.conn(&meta.url).await?;
            self.load_views(&mut c, false).await
        };
        if let Err(e) = loaded.await {
            warn!(
                "metadata {}: views not read: {e}",
                crate::config::masked_url(&meta.url)
            );
        }
    }
}

/// Keeps `shared`'s views in step with the metadata, every `poll_ms` of its rules.
pub async fn watch(shared: Arc<Shared>) {
    loop {
        let every = shared
            .topology()
            .metadata
            .as_ref()
            .map_or(1000, |m| m.poll_ms);
        tokio::time::sleep(Duration::from_millis(every)).await;
        shared.poll_views().await;
    }
}
