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
    /// The rows' size so far, and its bound ([`super::held::HELD_BYTES`]).
    bytes: usize,
    max_bytes: usize,
    /// More rows came than `cap` (or more bytes than HELD_BYTES), or a row that could not be
    /// read: the result is not whole.
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
            bytes: 0,
            max_bytes: super::held::HELD_BYTES,
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
        self.bytes += super::held::row_bytes(&row);
        if self.rows.len() as u64 >= self.cap || self.bytes > self.max_bytes {
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

/// A sink that keeps a write's OK packet (to be sent once what the proxy wraps around the
/// write is done) and notes whether rows came instead.
#[derive(Default)]
pub struct OkCapture {
    pub ok: Option<OkInfo>,
    pub rows: bool,
    /// The write runs prepared, its parameters bound (a client's prepared statement).
    pub binary: bool,
}

impl Sink for OkCapture {
    fn binary(&self) -> bool {
        self.binary
    }

    fn multi_results(&self) -> bool {
        false
    }

    fn columns(&mut self, _cols: &[Column], _status: StatusFlags) {
        self.rows = true;
    }

    fn row(&mut self, _row: &[Option<Value>], _cols: &[Column]) {}

    fn raw_row(&mut self, _payload: &[u8]) {}

    fn end(&mut self, _status: StatusFlags, _warnings: u16, _more: bool) {}

    fn ok(&mut self, ok: &OkInfo, _status: StatusFlags, _more: bool) {
        self.ok = Some(ok.clone());
    }

    async fn flush_some(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn written(&self) -> u64 {
        u64::from(self.ok.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_kept_up_to_a_count_and_a_size() {
        let row = |n: usize| vec![Some(Value::Bytes(vec![b'x'; n])), None];
        let mut c = Collect::new(3);
        for _ in 0..3 {
            c.keep(row(10));
        }
        assert!(!c.over);
        c.keep(row(10));
        assert!(c.over, "a fourth row past a cap of 3");
        let mut c = Collect::new(1000);
        c.max_bytes = 1000;
        c.keep(row(900));
        assert!(!c.over);
        c.keep(row(200));
        assert!(c.over, "past the bytes bound");
        assert_eq!(c.rows.len(), 1);
        assert_eq!(crate::exec::held::row_bytes(&row(900)), 900 + 48);
    }
}
