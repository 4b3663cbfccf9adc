//! Backend nodes as a session reaches them: its connections to the nodes' pools
//! (`crate::pools`), the door of `crate::exec` (`session`).

pub mod session;

pub use crate::error::MyError;
