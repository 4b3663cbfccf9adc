//! Result writing: what execution produces, as MySQL packets to the client (text or binary
//! rows), buffered and flushed as rows stream.

use std::io;

use mysql_common::constants::StatusFlags;
use mysql_common::packets::Column;
use mysql_common::value::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::exec::door::{OkInfo, Sink};
use crate::packet::PacketIo;
use crate::protocol::codec;
use crate::sql::seen::Seen;

/// What the client's last statement left that it may ask about (`crate::sql::seen`), as
/// written to it.
#[derive(Debug, Clone, Default)]
pub struct Last {
    pub seen: Seen,
    /// The insert id its result reported (0: none): the session's `LAST_INSERT_ID()` is read
    /// from the node that ran it before the connection goes back (an id given explicitly
    /// is reported too, but does not change `LAST_INSERT_ID()`).
    pub reported_id: u64,
    /// It set `LAST_INSERT_ID(expr)` itself.
    pub sets_id: bool,
    /// It left warnings or an error: `SHOW WARNINGS` asks its node connection.
    pub diagnostics: bool,
    /// It failed with an error the proxy raised itself, or succeeded with a warning the
    /// proxy added: `SHOW WARNINGS` and the counts are answered from it.
    pub own: Option<Own>,
    /// A warning the proxy adds to the next OK it writes (a DDL's unique key that the
    /// nodes enforce each on its own rows only, `crate::config::unique`).
    pub warn_next: Option<crate::error::MyError>,
}

/// A diagnostic the proxy raised itself, which no node connection holds.
#[derive(Debug, Clone)]
pub struct Own {
    pub error: crate::error::MyError,
    /// A warning the proxy added to a statement that succeeded, not the statement's error.
    pub warning: bool,
}

impl Last {
    /// A fresh session's: nothing run yet, and `CONNECTION_ID()` its own id.
    pub fn new(connection_id: u32) -> Self {
        Last {
            seen: Seen {
                connection_id,
                ..Seen::default()
            },
            ..Last::default()
        }
    }

    /// The client is told of `e`: its diagnostics area is the node connection's when a
    /// node raised it, else the proxy's own.
    pub fn failed(&mut self, e: &crate::error::MyError) {
        self.seen.row_count = -1;
        self.warn_next = None;
        if e.from_node {
            self.diagnostics = true;
            self.own = None;
        } else {
            self.diagnostics = false;
            self.own = Some(Own {
                error: e.clone(),
                warning: false,
            });
        }
    }

    /// `sql` with what the session may ask about itself answered (`crate::sql::seen`).
    pub fn answer(&self, sql: &str, mode: crate::sql::lex::Mode) -> Option<String> {
        let own = self.own.as_ref().map(|o| crate::sql::seen::Own {
            warnings: 1,
            errors: u8::from(!o.warning),
        });
        crate::sql::seen::answer(sql, &self.seen, own, mode)
    }
}

pub struct ClientSink<'a, S> {
    pub io: &'a mut PacketIo<S>,
    pub last: &'a mut Last,
    /// `rows` when the result being written began.
    pub rows_before: u64,
    /// Rows in the binary protocol (COM_STMT_EXECUTE).
    pub binary: bool,
    pub multi_results: bool,
    /// More results of the same COM_QUERY follow this statement's (a multi-statement batch).
    pub more_results: bool,
    /// Rows written (the plan counters).
    pub rows: u64,
}

impl<S> ClientSink<'_, S> {
    fn flags(&self, status: StatusFlags, more: bool) -> StatusFlags {
        if more || self.more_results {
            status | StatusFlags::SERVER_MORE_RESULTS_EXISTS
        } else {
            status
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Sink for ClientSink<'_, S> {
    fn binary(&self) -> bool {
        self.binary
    }

    fn multi_results(&self) -> bool {
        self.multi_results
    }

    fn columns(&mut self, cols: &[Column], status: StatusFlags) {
        let status = self.flags(status, false);
        self.rows_before = self.rows;
        self.io.write(&codec::column_count(cols.len()));
        for c in cols {
            self.io.write(&codec::column_def(c));
        }
        self.io.write(&codec::eof(status, 0));
    }

    fn row(&mut self, row: &[Option<Value>], cols: &[Column]) {
        self.rows += 1;
        let binary = self.binary;
        self.io.write_with(|out| {
            if binary {
                codec::binary_row(row, cols, out)
            } else {
                codec::text_row(row, out)
            }
        });
    }

    fn raw_row(&mut self, payload: &[u8]) {
        self.rows += 1;
        self.io.write(payload);
    }

    fn end(&mut self, status: StatusFlags, warnings: u16, more: bool) {
        self.last.own = None;
        self.last.seen.row_count = -1;
        self.last.seen.found_rows = Some(self.rows - self.rows_before);
        self.last.diagnostics = warnings > 0;
        let status = self.flags(status, more);
        self.io.write(&codec::eof(status, warnings));
    }

    fn ok(&mut self, ok: &OkInfo, status: StatusFlags, more: bool) {
        self.last.own = None;
        self.last.seen.row_count = ok.affected as i64;
        self.last.diagnostics = ok.warnings > 0;
        let mut warnings = ok.warnings;
        match self.last.warn_next.take() {
            // The node's warnings stay the statement's (SHOW WARNINGS asks the node): the
            // proxy's goes to the log instead of a count SHOW WARNINGS would not match.
            Some(w) if ok.warnings > 0 => {
                tracing::warn!(warning = %w.message, "a DDL's warning not added to the node's")
            }
            Some(w) => {
                warnings = 1;
                self.last.own = Some(Own {
                    error: w,
                    warning: true,
                });
            }
            None => {}
        }
        if ok.last_insert_id != 0 {
            self.last.reported_id = ok.last_insert_id;
        }
        let status = self.flags(status, more);
        self.io.write(&codec::ok(
            ok.affected,
            ok.last_insert_id,
            status,
            warnings,
            &ok.info,
        ));
    }

    async fn flush_some(&mut self) -> io::Result<()> {
        self.io.maybe_flush().await
    }

    fn written(&self) -> u64 {
        self.io.packets()
    }
}
