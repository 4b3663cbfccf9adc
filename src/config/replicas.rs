//! `[replicas]`: how reads use the nodes' read replicas (`replicas = [...]` of a node in
//! `[nodes]`). Read again on reload.

use serde::Deserialize;

/// Which replica of a node an eligible read goes to.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ReadPolicy {
    /// Each in turn, among those in rotation.
    #[default]
    RoundRobin,
    /// The one with the fewest of the proxy's reads running on it.
    LeastBusy,
}

/// What a read on a replica may miss.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Consistency {
    /// A session reads its own writes: after its write commits on a node, its reads there
    /// go to a replica only once that replica has applied the write.
    #[default]
    ReadYourWrites,
    /// Only the lag bound holds: a session's read may miss its own write of a moment before.
    Lag,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReplicasSection {
    /// A replica not known to hold every transaction its primary committed this many
    /// milliseconds ago is out of rotation until it is again.
    #[serde(default = "default_max_lag_ms")]
    pub max_lag_ms: u64,
    #[serde(default)]
    pub policy: ReadPolicy,
    #[serde(default)]
    pub consistency: Consistency,
    /// How long a replica may wait (`MASTER_GTID_WAIT`) for a session's write before the
    /// read goes to the primary instead.
    #[serde(default = "default_wait_ms")]
    pub wait_ms: u64,
    /// How often each replica's position and replication threads are read.
    #[serde(default = "default_check_ms")]
    pub check_ms: u64,
    /// Tables whose reads always go to the primary.
    #[serde(default)]
    pub primary_tables: Vec<String>,
}

fn default_max_lag_ms() -> u64 {
    1000
}

fn default_wait_ms() -> u64 {
    100
}

fn default_check_ms() -> u64 {
    200
}

impl Default for ReplicasSection {
    fn default() -> Self {
        ReplicasSection {
            max_lag_ms: default_max_lag_ms(),
            policy: ReadPolicy::default(),
            consistency: Consistency::default(),
            wait_ms: default_wait_ms(),
            check_ms: default_check_ms(),
            primary_tables: Vec::new(),
        }
    }
}

impl ReplicasSection {
    /// What is wrong with it, if anything.
    pub fn check(&self) -> Result<(), String> {
        if self.check_ms < 10 || self.check_ms > 10_000 {
            return Err("[replicas] check_ms must be 10 to 10000".into());
        }
        // The lag is known to within a check: a bound under two checks would take every
        // replica out between them.
        if self.max_lag_ms < 2 * self.check_ms {
            return Err(format!(
                "[replicas] max_lag_ms must be at least twice check_ms ({} ms)",
                2 * self.check_ms
            ));
        }
        if self.wait_ms > 10_000 {
            return Err("[replicas] wait_ms must be at most 10000".into());
        }
        Ok(())
    }

    /// Are `table`'s reads kept on the primary?
    pub fn primary_only(&self, table: &str) -> bool {
        self.primary_tables
            .iter()
            .any(|t| t.eq_ignore_ascii_case(table))
    }
}
