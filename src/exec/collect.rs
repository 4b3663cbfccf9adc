//! A sink that keeps a result in memory (the rows of an INSERT ... SELECT's SELECT, to be
//! inserted), up to a number of rows.

use std::io;
use std::sync::Arc;

use mysql_common::constants::StatusFlags;
use mysql_common::packets::Column;
use mysql_common::value::Value;

use super::door::{OkInfo, Sink};
use crate::merge::Row;

/// The columns and rows of the first result set, in the text protocol.
pub struct Collect {
    pub cols: Option<Arc<[Column]>>,
    pub rows: Vec<Row>,
    cap: u64,
    /// More rows came than `cap`, or a row that could not be read: the result is not whole.
    pub over: bool,
    pub bad: bool,
    /// Asks for rows in the binary protocol (a statement with parameters runs prepared).
    binary: bool,
}

impl Collect {
    pub fn new(cap: u64) -> Self {
        Collect {
            cols: None,
            rows: Vec::new(),
            cap,
            over: false,
            bad: false,
            binary: false,
        }
    }

    /// The same, asking for rows in the binary protocol when `on`.
    pub fn binary(mut self, on: bool) -> Self {
        self.binary = on;
        self
    }

    fn keep(&mut self, row: Row) {
        if self.rows.len() as u64 >= self.cap {
            self.over = true;
        } else {
            self.rows.push(row);
        }
    }
}

impl Sink for Collect {
    fn binary(&self) -> bool {
        self.binary
    }

    fn multi_results(&self) -> bool {
        false
    }

    fn columns(&mut self, cols: &[Column], _status: StatusFlags) {
        if self.cols.is_none() {
            self.cols = Some(cols.to_vec().into());
        }
    }

    fn row(&mut self, row: &[Option<Value>], _cols: &[Column]) {
        self.keep(row.to_vec());
    }

    fn raw_row(&mut self, payload: &[u8]) {
        let Some(cols) = self.cols.clone() else {
            self.bad = true;
            return;
        };
        match crate::node::conn::decode(payload, &cols, self.binary) {
            Ok(row) => self.keep(row),
            Err(_) => self.bad = true,
        }
    }

    fn end(&mut self, _status: StatusFlags, _warnings: u16, _more: bool) {}

    fn ok(&mut self, _ok: &OkInfo, _status: StatusFlags, _more: bool) {}

    async fn flush_some(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn written(&self) -> u64 {
        self.rows.len() as u64
    }
}
