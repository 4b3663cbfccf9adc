//! `[hot]` and `[balance]`: when a slot or a node counts as hot (`crate::load`), and what
//! the proxy does about it. Every value is read again on reload.

use serde::Deserialize;

/// `[hot]`: a slot is hot once one of its measures stays at or over its threshold for
/// `seconds` consecutive one-second windows, and cool again once every measure stays under
/// half its threshold as long (the gap between the two is the hysteresis: a load sitting at
/// the threshold does not flap). A node is hot when its node time stays over `node_ratio`
/// times the mean of the nodes' (and over `node_min_ms`) as long, cool under the midpoint.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HotSection {
    #[serde(default = "default_seconds")]
    pub seconds: u32,
    /// Statements a second routed by key to one slot of one table.
    #[serde(default = "default_slot_statements")]
    pub slot_statements: u64,
    /// Milliseconds a second the slot's statements took (a slot of slow scans is hotter
    /// than one of point reads at the same rate; 500 is half a core).
    #[serde(default = "default_slot_node_ms")]
    pub slot_node_ms: u64,
    /// Rows a second its statements returned or changed.
    #[serde(default = "default_slot_rows")]
    pub slot_rows: u64,
    /// Bytes a second of its statements' text.
    #[serde(default = "default_slot_bytes")]
    pub slot_bytes: u64,
    #[serde(default = "default_node_ratio")]
    pub node_ratio: f64,
    /// A node under this much node time a second is never hot, whatever the mean.
    #[serde(default = "default_node_min_ms")]
    pub node_min_ms: u64,
    /// Counters of the heavy-key sketch kept for each hot slot.
    #[serde(default = "default_keys")]
    pub keys: usize,
}

impl Default for HotSection {
    fn default() -> Self {
        HotSection {
            seconds: default_seconds(),
            slot_statements: default_slot_statements(),
            slot_node_ms: default_slot_node_ms(),
            slot_rows: default_slot_rows(),
            slot_bytes: default_slot_bytes(),
            node_ratio: default_node_ratio(),
            node_min_ms: default_node_min_ms(),
            keys: default_keys(),
        }
    }
}

impl HotSection {
    /// What is wrong with it, if anything.
    pub fn check(&self) -> Result<(), String> {
        if self.seconds == 0 || self.seconds > 60 {
            return Err("[hot] seconds must be 1 to 60".into());
        }
        if !(self.node_ratio > 1.0 && self.node_ratio.is_finite()) {
            return Err("[hot] node_ratio must be over 1.0".into());
        }
        if self.keys == 0 || self.keys > 1000 {
            return Err("[hot] keys must be 1 to 1000".into());
        }
        if [
            self.slot_statements,
            self.slot_node_ms,
            self.slot_rows,
            self.slot_bytes,
        ]
        .contains(&0)
        {
            return Err("[hot] slot thresholds must be over 0".into());
        }
        Ok(())
    }
}

fn default_seconds() -> u32 {
    5
}
fn default_slot_statements() -> u64 {
    2000
}
fn default_slot_node_ms() -> u64 {
    300
}
fn default_slot_rows() -> u64 {
    200_000
}
fn default_slot_bytes() -> u64 {
    32 << 20
}
fn default_node_ratio() -> f64 {
    1.5
}
fn default_node_min_ms() -> u64 {
    100
}
fn default_keys() -> usize {
    32
}

/// `[balance] mode`: what the proxy does with hot slots.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BalanceMode {
    /// Detects and reports only.
    Off,
    /// Also plans the moves that would even the nodes' load, shown by `SHOW BALANCE` and
    /// logged, and moves nothing.
    #[default]
    Suggest,
    /// Also makes them, one at a time, through the rebalancer's queue (needs `[metadata]`).
    Auto,
}

/// `[balance]`: what is done about hot slots, and the guards of `mode = "auto"`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BalanceSection {
    #[serde(default)]
    pub mode: BalanceMode,
    /// A slot moved (by anyone) less than this long ago is not moved by the balancer.
    #[serde(default = "default_cooldown_secs")]
    pub cooldown_secs: u64,
    /// Moves the balancer may start in any hour.
    #[serde(default = "default_max_moves_per_hour")]
    pub max_moves_per_hour: u32,
    /// A range of a range table holding more rows than this (its node's estimate) is split
    /// at its middle key.
    #[serde(default = "default_range_split_rows")]
    pub range_split_rows: u64,
    /// Two neighbouring ranges on one node, cold and holding fewer rows than this together,
    /// are merged (at most half of `range_split_rows`, so a merge is never split again).
    #[serde(default = "default_range_merge_rows")]
    pub range_merge_rows: u64,
    /// How often the ranges' sizes are looked at, seconds.
    #[serde(default = "default_range_check_secs")]
    pub range_check_secs: u64,
}

impl BalanceSection {
    pub fn check(&self) -> Result<(), String> {
        if self.range_check_secs == 0 {
            return Err("[balance] range_check_secs must be at least 1".into());
        }
        if self.range_split_rows < 2 {
            return Err("[balance] range_split_rows must be at least 2".into());
        }
        if self.range_merge_rows > self.range_split_rows / 2 {
            return Err(format!(
                "[balance] range_merge_rows ({}) must be at most half of range_split_rows ({}): a merged range would be split again",
                self.range_merge_rows, self.range_split_rows
            ));
        }
        Ok(())
    }
}

impl Default for BalanceSection {
    fn default() -> Self {
        BalanceSection {
            mode: BalanceMode::default(),
            cooldown_secs: default_cooldown_secs(),
            max_moves_per_hour: default_max_moves_per_hour(),
            range_split_rows: default_range_split_rows(),
            range_merge_rows: default_range_merge_rows(),
            range_check_secs: default_range_check_secs(),
        }
    }
}

fn default_range_split_rows() -> u64 {
    4_000_000
}
fn default_range_merge_rows() -> u64 {
    500_000
}
fn default_range_check_secs() -> u64 {
    30
}

fn default_cooldown_secs() -> u64 {
    600
}
fn default_max_moves_per_hour() -> u32 {
    6
}
