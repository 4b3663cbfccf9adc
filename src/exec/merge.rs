//! A scatter whose rows are merged: the source (nodes appended, or a [`MergeSort`] over
//! them), then [`StreamGroups`] or the in-memory [`buffered`] steps, then [`Limit`]. Rows
//! read from the nodes count against the statement's cap.

use super::aggregate::{buffered, StreamGroups};
use super::door::{Access, Door, NodeError, NodeResult, Run, Sink, Stmt};
use super::limit::Limit;
use super::merge_sort::MergeSort;
use super::scatter::{not_a_node, started};
use crate::error::MyError;
use crate::merge::{classes, MergeSpec, Row};

/// Reads node rows, counting them against the cap.
pub struct Reader {
    pub read: u64,
    cap: u64,
}

impl Reader {
    pub async fn next<R: NodeResult>(&mut self, res: &mut R) -> Result<Option<Row>, NodeError> {
        match res.next().await? {
            Some(row) => {
                self.read += 1;
                if self.read > self.cap {
                    return Err(not_a_node(MyError::unsupported(format!(
                        "shardproxy: this statement would read more than {} rows from the nodes (max_rows_per_statement); narrow it or page with a key instead of a deep OFFSET",
                        self.cap
                    ))));
                }
                Ok(Some(row))
            }
            None => Ok(None),
        }
    }
}

/// Runs `stmts` and writes their rows merged as `spec` says; `cap`: the most rows the
/// statement may read from the nodes.
pub async fn merged<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    stmts: &[(usize, Stmt<'_>)],
    spec: &MergeSpec,
    cap: u64,
    access: Access,
) -> Result<(), NodeError> {
    let run = Run {
        access,
        binary: sink.binary(),
    };
    let status = door.status();
    let first_node = stmts.first().map(|(n, _)| *n);
    let results = door.start_all(stmts, run).await?;
    let mut ress = started(results).await?;
    let mut reader = Reader { read: 0, cap };
    let outcome = merge_streams(&mut ress, sink, spec, cap, status, &mut reader).await;
    let mut warnings = 0u16;
    let mut failed = None;
    for res in ress {
        warnings = warnings.saturating_add(res.warnings());
        if let Err(e) = res.finish().await {
            failed.get_or_insert(e);
        }
    }
    door.count_merged(reader.read);
    if let Some(n) = first_node {
        door.ran_on(n, false);
    }
    outcome?;
    if let Some(e) = failed {
        return Err(e);
    }
    sink.end(status, warnings, false);
    Ok(())
}

async fn merge_streams<R: NodeResult, K: Sink>(
    ress: &mut [R],
    sink: &mut K,
    spec: &MergeSpec,
    cap: u64,
    status: mysql_common::constants::StatusFlags,
    reader: &mut Reader,
) -> Result<(), NodeError> {
    let Some(cols) = ress.iter().find_map(|r| r.columns()) else {
        return Err(not_a_node(MyError::unsupported(
            "shardproxy: the nodes returned no result set to merge",
        )));
    };
    let binary = sink.binary();
    let spec = spec.resolve(cols.len());
    let visible = cols.len().saturating_sub(spec.hidden);
    let cap_rows = usize::try_from(cap).unwrap_or(usize::MAX);
    if spec.buffers() {
        let mut rows = Vec::new();
        for res in ress.iter_mut() {
            while let Some(row) = reader.next(res).await? {
                rows.push(row);
            }
        }
        let rows = buffered(rows, &spec, &cols, binary, cap_rows)?;
        sink.columns(&cols[..visible], status);
        let mut all = Limit::new(0, None, visible);
        for row in rows {
            all.emit(sink, &row, &cols).await?;
        }
        return Ok(());
    }
    sink.columns(&cols[..visible], status);
    let mut page = Limit::new(spec.offset, spec.limit, visible);
    if page.empty() {
        return Ok(());
    }
    if spec.order.is_empty() {
        // Append, node after node.
        for res in ress.iter_mut() {
            while let Some(row) = reader.next(res).await? {
                if page.emit(sink, &row, &cols).await? {
                    return Ok(());
                }
            }
        }
        return Ok(());
    }
    let classes = classes(&cols);
    let mut sorted = MergeSort::open(ress, &spec.order, reader).await?;
    let mut groups = spec
        .stream_groups
        .then(|| StreamGroups::new(&spec, cap_rows));
    loop {
        let Some(row) = sorted.next(ress, &classes, reader).await? else {
            if let Some(g) = groups.as_mut() {
                if let Some(row) = g.finish(&cols, &classes, binary)? {
                    page.emit(sink, &row, &cols).await?;
                }
            }
            return Ok(());
        };
        let row = match groups.as_mut() {
            Some(g) => match g.push(row, &cols, &classes, binary)? {
                Some(done) => done,
                None => continue,
            },
            None => row,
        };
        if page.emit(sink, &row, &cols).await? {
            return Ok(());
        }
    }
}
