//! Routing rules: value -> node.

pub mod slot;
