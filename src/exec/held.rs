//! How much of rows one statement may hold in the proxy's memory, and what a row costs.

/// The most bytes of rows one statement may hold in the proxy's memory (a merge that must
/// read every row before answering, copies on their way to a node, the rows of an INSERT
/// ... SELECT): the row cap (max_rows_per_statement) bounds their number, this their size.
pub const HELD_BYTES: usize = 256 << 20;

/// What a row costs in memory, roughly: its values' bytes and a word or three each.
pub fn row_bytes(row: &crate::merge::Row) -> usize {
    row.iter()
        .map(|v| match v {
            Some(mysql_common::value::Value::Bytes(b)) => b.len() + 24,
            _ => 24,
        })
        .sum()
}

/// The error of a statement whose rows would hold more than [`HELD_BYTES`].
pub fn too_many_bytes(what: &str) -> crate::error::MyError {
    crate::error::MyError::unsupported(format!(
        "shardproxy: {what} more than {} MiB of rows in memory; narrow the statement",
        HELD_BYTES >> 20
    ))
}
