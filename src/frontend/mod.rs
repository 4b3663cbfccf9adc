//! Client sessions: each client connection's session (commands, statements, prepared
//! statements, its node connections through `crate::backend`), the sink that writes its
//! answers, and the splitter of a COM_QUERY's statements. The protocol's server side they
//! speak is `crate::protocol`.

pub mod session;
pub mod sink;
pub mod split;
