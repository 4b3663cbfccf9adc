//! The admin statements' connection to the metadata schema (its tables made sure of), and
//! how its failures are answered.

use mysql_async::Conn;

use super::words::unsupported;
use crate::backend::MyError;
use crate::config::Topology;

pub(super) fn failed(e: impl std::fmt::Display) -> MyError {
    MyError::new(1105, format!("metadata: {e}"))
}

/// A connection to the rules' metadata schema; without one, 1235 saying `missing`.
pub(super) async fn connect(t: &Topology, missing: &str) -> Result<Conn, MyError> {
    let Some(meta) = t.metadata.as_ref() else {
        return Err(unsupported(missing));
    };
    let opts = mysql_async::Opts::from_url(&meta.url).map_err(failed)?;
    let mut c = Conn::new(opts).await.map_err(failed)?;
    crate::metadata::ensure_schema(&mut c)
        .await
        .map_err(failed)?;
    Ok(c)
}
