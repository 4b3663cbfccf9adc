//! Routing rules: value -> node.

pub mod directory;
pub mod keygen;
pub mod range;
pub mod slot;
pub mod time_tier;
