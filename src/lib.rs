//! shardproxy: a sharding proxy that speaks the MySQL wire protocol.
//!
//! The flow of one statement: `frontend` (protocol, session) -> `plan` (statement + rules
//! snapshot -> plan) -> the session runs it on `backend` pools -> results relayed or merged.

pub mod admin;
pub mod backend;
pub mod config;
pub mod frontend;
pub mod merge;
pub mod plan;
pub mod routing;
pub mod server;
pub mod sql;
