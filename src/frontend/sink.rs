//! Result writing: what execution produces, as MySQL packets to the client (text or binary
//! rows), buffered and flushed as rows stream.

use std::io;

use mysql_common::constants::StatusFlags;
use mysql_common::packets::Column;
use mysql_common::value::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::codec;
use crate::exec::door::{OkInfo, Sink};
use crate::packet::PacketIo;

pub struct ClientSink<'a, S> {
    pub io: &'a mut PacketIo<S>,
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
        let status = self.flags(status, more);
        self.io.write(&codec::eof(status, warnings));
    }

    fn ok(&mut self, ok: &OkInfo, status: StatusFlags, more: bool) {
        let status = self.flags(status, more);
        self.io.write(&codec::ok(
            ok.affected,
            ok.last_insert_id,
            status,
            ok.warnings,
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
