//! Where a statement may read: the frontend's word to the node session
//! (`super::replicas`).

/// Where the session's current statement may read; set by the frontend for each
/// statement, back to `Primary` when the command ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadFrom {
    /// The node's primary: writes, locking reads, transactions, statements with side
    /// effects, the proxy's own reads.
    #[default]
    Primary,
    /// A replica in rotation that holds the session's writes there, else the primary.
    Replica,
    /// Whatever connection the session holds to the node (a statement that names no table
    /// and may read the last one's diagnostics: SHOW WARNINGS), else the primary.
    Held,
}
