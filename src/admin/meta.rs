//! The admin statements' connection to the metadata schema (its tables made sure of), and
//! how its failures are answered.

use mysql_async::Conn;

use super::words::unsupported;
use crate::backend::MyError;
use crate::config::Topology;
use crate::shared::Shared;

pub(super) fn failed(e: impl std::fmt::Display) -> MyError {
    MyError::new(1105, format!("metadata: {e}"))
}

/// A connection to the rules' metadata schema, kept by this proxy (dropped, it goes back);
/// without a schema, 1235 saying `missing`.
pub(super) async fn connect(shared: &Shared, t: &Topology, missing: &str) -> Result<Conn, MyError> {
    let Some(meta) = t.metadata.as_ref() else {
        return Err(unsupported(missing));
    };
    shared.metadata_links.conn(&meta.url).await.map_err(failed)
}
