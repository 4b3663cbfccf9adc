//! shardproxy: a sharding proxy that speaks the MySQL wire protocol.
//!
//! The flow of one statement: `frontend` (protocol, session) -> `plan` (statement + rules
//! snapshot -> plan) -> `exec` runs it through the door to the nodes (`backend::session`, the
//! session's node connections over the node `pools`) -> results relayed or merged into the
//! client's sink.

pub mod admin;
pub mod backend;
pub mod config;
pub mod error;
pub mod exec;
pub mod frontend;
pub mod hooks;
pub mod load;
pub mod logins;
pub mod merge;
pub mod metadata;
pub mod metrics;
pub mod migrate;
pub mod node;
pub mod packet;
pub mod plan;
pub mod pools;
pub mod protocol;
pub mod replica;
pub mod routing;
pub mod server;
pub mod sessions;
pub mod shared;
pub mod sql;
pub mod value;
