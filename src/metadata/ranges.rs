//! Range tables' ranges in the metadata schema (`range_map`, a row per range, in key order):
//! each range's upper bound and node of record and, while it moves, where to and at which
//! step. A table's rows replace the rules file's `ranges` of it, so every proxy cuts and
//! places the table's keys by the same version: `SPLIT RANGE` and `MERGE RANGE` write a new
//! set of rows, a move's steps update its range's row.

use mysql_async::prelude::Queryable;

use crate::routing::range::RangeMap;

/// A `range_map` row. `below` is the range's upper bound as a TOML value (`1000`, `"M"`,
/// `"2024-01-01 00:00:00"`), `None` for the last range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeRow {
    pub table: String,
    pub seq: u32,
    pub below: Option<String>,
    pub node: String,
    pub state: String,
    pub target: Option<String>,
}

/// Every row, in table and range order, and their highest version.
pub async fn read<C: Queryable>(c: &mut C) -> mysql_async::Result<(Vec<RangeRow>, u64)> {
    type Row = (
        String,
        u32,
        Option<String>,
        String,
        String,
        Option<String>,
        u64,
    );
    let rows: Vec<Row> = c
        .query(
            "SELECT table_name, seq, below, node, state, target_node, version \
             FROM range_map ORDER BY table_name, seq",
        )
        .await?;
    let version = rows.iter().map(|r| r.6).max().unwrap_or(0);
    Ok((
        rows.into_iter()
            .map(|(table, seq, below, node, state, target, _)| RangeRow {
                table,
                seq,
                below,
                node,
                state,
                target,
            })
            .collect(),
        version,
    ))
}

/// A range to write: its number, upper bound (a TOML value) and node.
pub type NewRange = (u32, Option<String>, String);

/// `map`'s ranges (none moving) as rows to write, its nodes named by `name`.
pub fn rows_of(map: &RangeMap, name: &dyn Fn(usize) -> String) -> Result<Vec<NewRange>, String> {
    let mut rows = Vec::with_capacity(map.len());
    for (seq, (below, node)) in map.entries().into_iter().enumerate() {
        let below = match below {
            Some(k) => Some(
                map.bound_toml(&k)
                    .ok_or_else(|| format!("range bound {} cannot be written", map.show_key(&k)))?
                    .to_string(),
            ),
            None => None,
        };
        rows.push((seq as u32, below, name(node)));
    }
    Ok(rows)
}

/// Writes `rows` as `table`'s ranges, in a version of their own above `floor`, if the
/// metadata holds none of them yet or (with `base`) holds exactly `base`: a split or merge
/// made from a map another proxy changed meanwhile is not written. `None` when nothing was.
pub async fn write_map<C: Queryable>(
    c: &mut C,
    table: &str,
    base: Option<&[NewRange]>,
    rows: &[NewRange],
    floor: u64,
) -> mysql_async::Result<Option<u64>> {
    super::schema::lock_versions(c).await?;
    let r = write_locked(c, table, base, rows, floor).await;
    super::schema::unlock_versions(c).await;
    r
}

async fn write_locked<C: Queryable>(
    c: &mut C,
    table: &str,
    base: Option<&[NewRange]>,
    rows: &[NewRange],
    floor: u64,
) -> mysql_async::Result<Option<u64>> {
    let now: Vec<(u32, Option<String>, String, String)> = c
        .exec(
            "SELECT seq, below, node, state FROM range_map WHERE table_name = ? ORDER BY seq",
            (table,),
        )
        .await?;
    if !now.is_empty() {
        let same = base.is_some_and(|b| {
            b.len() == now.len()
                && b.iter()
                    .zip(&now)
                    .all(|((s, below, node), (s2, below2, node2, state))| {
                        s == s2 && below == below2 && node == node2 && state == "stable"
                    })
        });
        if !same {
            return Ok(None);
        }
    }
    let v: Option<u64> = c.query_first(super::schema::VERSION_SQL).await?;
    let v = v.unwrap_or(0).max(floor) + 1;
    c.query_drop("START TRANSACTION").await?;
    let written = async {
        c.exec_drop("DELETE FROM range_map WHERE table_name = ?", (table,))
            .await?;
        c.exec_batch(
            "INSERT INTO range_map (table_name, seq, below, node, state, target_node, version) \
             VALUES (?, ?, ?, ?, 'stable', NULL, ?)",
            rows.iter()
                .map(|(seq, below, node)| (table, seq, below, node, v)),
        )
        .await?;
        c.query_drop("COMMIT").await
    }
    .await;
    if let Err(e) = written {
        let _ = c.query_drop("ROLLBACK").await;
        return Err(e);
    }
    Ok(Some(v))
}

/// Seconds since `table`'s ranges last changed (a split, a merge, a move's step); `None`
/// when the metadata holds none of them.
pub async fn changed_secs_ago<C: Queryable>(
    c: &mut C,
    table: &str,
) -> mysql_async::Result<Option<f64>> {
    let v: Option<Option<f64>> = c
        .exec_first(
            "SELECT TIMESTAMPDIFF(MICROSECOND, MAX(changed), NOW(3)) / 1e6 FROM range_map \
             WHERE table_name = ?",
            (table,),
        )
        .await?;
    Ok(v.flatten())
}

/// Writes the step of range `seq` of `table` (a migration's version `v`).
#[allow(clippy::too_many_arguments)]
pub async fn write_step<C: Queryable>(
    c: &mut C,
    table: &str,
    seq: u16,
    node: &str,
    state: &str,
    target: Option<&str>,
    v: u64,
) -> mysql_async::Result<()> {
    c.exec_drop(
        "UPDATE range_map SET node = ?, state = ?, target_node = ?, version = ? \
         WHERE table_name = ? AND seq = ?",
        (node, state, target, v, table, seq),
    )
    .await
}

/// The rows over the rules file (`doc`): each table's rows as its `ranges`, instead of the
/// file's.
pub fn merge(doc: &mut toml_edit::DocumentMut, rows: &[RangeRow]) -> Result<(), String> {
    for (a, b, _) in crate::routing::runs(rows.iter().map(|r| r.table.as_str())) {
        let mine = &rows[a..=b];
        let table = &mine[0].table;
        let Some(t) = doc["tables"]
            .get_mut(table.as_str())
            .and_then(toml_edit::Item::as_table_like_mut)
        else {
            return Err(format!(
                "metadata holds ranges of `{table}`, which is not a table of the rules"
            ));
        };
        if t.get("rule").and_then(toml_edit::Item::as_str) != Some("range") {
            return Err(format!(
                "metadata holds ranges of `{table}`, which is not a range table in the rules"
            ));
        }
        let mut list = toml_edit::Array::new();
        for (i, r) in mine.iter().enumerate() {
            if r.seq as usize != i {
                return Err(format!(
                    "metadata's ranges of `{table}` are not numbered 0 to {}",
                    mine.len() - 1
                ));
            }
            let mut e = toml_edit::InlineTable::new();
            if let Some(below) = &r.below {
                let v: toml_edit::Value = below.parse().map_err(|e| {
                    format!(
                        "metadata's range {} of `{table}` has bound {below}: {e}",
                        i + 1
                    )
                })?;
                e.insert("below", v);
            }
            e.insert("node", r.node.as_str().into());
            if r.state != "stable" {
                let to = r.target.as_deref().ok_or_else(|| {
                    format!(
                        "metadata's range {} of `{table}` moves with no target",
                        i + 1
                    )
                })?;
                e.insert("to", to.into());
                e.insert("step", r.state.as_str().into());
            }
            list.push(e);
        }
        t.insert("ranges", toml_edit::value(list));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TableRule;

    const FILE: &str = "version = 1\ndefault_node = \"ds0\"\n[server]\nlisten = \"127.0.0.1:3307\"\n\
         users = [{ name = \"app\", password = \"app\" }]\n[nodes]\n\
         ds0 = \"mysql://root:root@127.0.0.1:3311/shop\"\nds1 = \"mysql://root:root@127.0.0.1:3312/shop\"\n\
         ds2 = \"mysql://root:root@127.0.0.1:3313/shop\"\n\
         [tables.t_r]\nrule = \"range\"\ncolumn = \"d\"\n\
         ranges = [{ below = \"2024-01-01\", node = \"ds0\" }, { node = \"ds1\" }]\n";

    fn map_of(t: &crate::config::Topology) -> &RangeMap {
        match t.table("t_r") {
            Some(TableRule::Range { map, .. }) => map,
            _ => panic!("no range table"),
        }
    }

    #[test]
    fn a_split_written_as_rows_is_the_map_every_proxy_merges_over_its_file() {
        let t = crate::config::parse(FILE, "file").unwrap();
        let map = map_of(&t);
        let at = map.key_of_word("2024-07-01").unwrap();
        let split = map.split_at(&at).unwrap();
        let name = |n: usize| t.node_name(n).to_string();
        let rows: Vec<RangeRow> = rows_of(&split, &name)
            .unwrap()
            .into_iter()
            .map(|(seq, below, node)| RangeRow {
                table: "t_r".into(),
                seq,
                below,
                node,
                state: "stable".into(),
                target: None,
            })
            .collect();
        assert_eq!(rows[1].below.as_deref(), Some("\"2024-07-01 00:00:00\""));
        let merged = |rows: &[RangeRow]| {
            let r = super::super::Rows {
                version: 9,
                ranges: rows.to_vec(),
                ..Default::default()
            };
            let text = super::super::merge_into(FILE, &r).unwrap();
            crate::config::parse(&text, "merged").unwrap_or_else(|e| panic!("{e}\n{text}"))
        };
        let t2 = merged(&rows);
        assert_eq!(map_of(&t2), &split);
        // The new range moving to ds2: its node is its source, reads stay there.
        let mut moving = rows.clone();
        moving[1].state = "capture".into();
        moving[1].target = Some("ds2".into());
        let t3 = merged(&moving);
        let m = map_of(&t3);
        assert_eq!(m.moves().len(), 1);
        assert_eq!((m.moves()[0].index, m.nodes[1], m.owner(1)), (1, 1, 1));
        // Rows out of order, or over a table that is not a range table, are refused.
        let mut gap = rows.clone();
        gap.remove(1);
        let r = super::super::Rows {
            version: 9,
            ranges: gap,
            ..Default::default()
        };
        assert!(super::super::merge_into(FILE, &r).is_err());
    }
}
