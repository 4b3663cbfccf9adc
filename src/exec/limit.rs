//! Limit: OFFSET and LIMIT applied to merged rows as they are written, helper columns (sort
//! keys, AVG's hidden SUM and COUNT) cut off. The nodes were asked for `offset + limit` rows
//! each; the page is cut here.

use mysql_common::packets::Column;

use super::door::{client_gone, NodeError, Sink};
use crate::merge::Row;

pub struct Limit {
    skip: u64,
    left: u64,
    /// Columns the client sees (the rest are helpers).
    visible: usize,
}

impl Limit {
    pub fn new(offset: u64, limit: Option<u64>, visible: usize) -> Self {
        Limit {
            skip: offset,
            left: limit.unwrap_or(u64::MAX),
            visible,
        }
    }

    /// The page holds no row at all.
    pub fn empty(&self) -> bool {
        self.left == 0
    }

    /// Writes the row unless it is skipped; `true` once the page is full.
    pub async fn emit<K: Sink>(
        &mut self,
        sink: &mut K,
        row: &Row,
        cols: &[Column],
    ) -> Result<bool, NodeError> {
        if self.skip > 0 {
            self.skip -= 1;
            return Ok(false);
        }
        sink.row(&row[..self.visible.min(row.len())], cols);
        sink.flush_some().await.map_err(client_gone)?;
        self.left = self.left.saturating_sub(1);
        Ok(self.left == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::fake::RecordSink;
    use mysql_common::value::Value;

    #[tokio::test]
    async fn skips_then_takes_and_cuts_helper_columns() {
        let mut sink = RecordSink::text();
        let cols = vec![Column::new(mysql_common::constants::ColumnType::MYSQL_TYPE_LONG); 2];
        let mut l = Limit::new(2, Some(2), 1);
        let mut calls = 0;
        for i in 0..6 {
            let row = vec![Some(Value::Int(i)), Some(Value::Int(100 + i))];
            calls += 1;
            if l.emit(&mut sink, &row, &cols).await.unwrap() {
                break;
            }
        }
        assert_eq!(sink.lines(), vec!["2", "3"]);
        assert_eq!(calls, 4, "full once the page is");
        assert!(Limit::new(0, Some(0), 1).empty());
    }
}
