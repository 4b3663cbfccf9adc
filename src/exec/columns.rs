//! Columns: a table's column order, read from every node that holds it. An INSERT without a
//! column list gives its values by position; to find the shard key among them (and to tell
//! the nodes which column each value is) the proxy must know the order, and every node must
//! agree on it.

use std::sync::Arc;

use mysql_common::value::Value;

use super::door::Door;
use crate::config::Topology;
use crate::error::MyError;
use crate::plan::estimate::TableStats;

/// MySQL's ER_NO_SUCH_TABLE.
const ER_NO_SUCH_TABLE: u16 = 1146;

/// The query reading `table`'s visible columns in order, in `schema` (else the session's
/// database). Names compare without case, as the rules do.
pub fn columns_sql(schema: Option<&str>, table: &str) -> String {
    let schema = schema.map_or_else(|| "DATABASE()".to_string(), quote);
    format!(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {schema} \
         AND LOWER(TABLE_NAME) = LOWER({}) AND EXTRA NOT LIKE '%INVISIBLE%' \
         ORDER BY ORDINAL_POSITION",
        quote(table)
    )
}

/// A string literal.
fn quote(s: &str) -> String {
    crate::sql::write::text_literal(s)
}

/// Reads `table`'s columns from each node of its rule (the default node for a table in no
/// rule). A node without the table fails with MySQL's 1146; nodes that disagree, with 1235
/// naming both lists.
pub async fn read<D: Door>(
    door: &mut D,
    topo: &Topology,
    schema: Option<&str>,
    table: &str,
) -> Result<Arc<[String]>, MyError> {
    let nodes = topo.holders(table);
    let sql = columns_sql(schema, table);
    let mut first: Option<(usize, Vec<String>)> = None;
    for node in nodes {
        let rows = door.fetch(node, &sql).await?;
        let cols: Vec<String> = rows
            .into_iter()
            .filter_map(|r| r.into_iter().next())
            .map(|v| match v {
                Value::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
                other => {
                    String::from_utf8_lossy(&crate::value::text_form(&other).unwrap_or_default())
                        .into_owned()
                }
            })
            .collect();
        if cols.is_empty() {
            let name = match schema {
                Some(s) => format!("{s}.{table}"),
                None => table.to_string(),
            };
            return Err(MyError::new(
                ER_NO_SUCH_TABLE,
                format!(
                    "Table '{name}' doesn't exist (on node `{}`)",
                    door.name(node)
                ),
            ));
        }
        match &first {
            None => first = Some((node, cols)),
            Some((n, seen)) if *seen != cols => {
                return Err(MyError::unsupported(format!(
                    "an INSERT without a column list into `{table}`: its nodes disagree on its columns (`{}` has {}, `{}` has {}); name the columns",
                    door.name(*n),
                    seen.join(", "),
                    door.name(node),
                    cols.join(", ")
                )));
            }
            Some(_) => {}
        }
    }
    first
        .map(|(_, cols)| cols.into())
        .ok_or_else(|| MyError::internal(format!("shardproxy: `{table}` is on no node")))
}

/// The primary-key columns of `table` (quoted, in key order), read from `node`; empty when
/// the table has none.
pub async fn read_key<D: Door>(
    door: &mut D,
    node: usize,
    schema: Option<&str>,
    table: &str,
) -> Result<Arc<[String]>, MyError> {
    let schema = schema.map_or_else(|| "DATABASE()".to_string(), quote);
    let sql = format!(
        "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = {schema} \
         AND LOWER(TABLE_NAME) = LOWER({}) AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
        quote(table)
    );
    let rows = door.fetch(node, &sql).await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| r.into_iter().next())
        .map(|v| {
            let name = match v {
                Value::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
                other => {
                    String::from_utf8_lossy(&crate::value::text_form(&other).unwrap_or_default())
                        .into_owned()
                }
            };
            format!("`{}`", name.replace('`', "``"))
        })
        .collect())
}

/// The unique keys of `table`, its primary key among them, read from `node`: each its
/// columns, lower-cased, in key order, joined by commas.
pub async fn read_unique_keys<D: Door>(
    door: &mut D,
    node: usize,
    schema: Option<&str>,
    table: &str,
) -> Result<Arc<[String]>, MyError> {
    let schema = schema.map_or_else(|| "DATABASE()".to_string(), quote);
    let sql = format!(
        "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = {schema} \
         AND LOWER(TABLE_NAME) = LOWER({}) AND NON_UNIQUE = 0 \
         ORDER BY INDEX_NAME, SEQ_IN_INDEX",
        quote(table)
    );
    let text = |v: Value| {
        String::from_utf8_lossy(&crate::value::text_form(&v).unwrap_or_default()).to_lowercase()
    };
    let mut keys: Vec<(String, String)> = Vec::new();
    for row in door.fetch(node, &sql).await? {
        let mut row = row.into_iter();
        let (Some(index), Some(column)) = (row.next(), row.next()) else {
            continue;
        };
        let (index, column) = (text(index), text(column));
        match keys.last_mut() {
            Some((name, cols)) if *name == index => {
                cols.push(',');
                cols.push_str(&column);
            }
            _ => keys.push((index, column)),
        }
    }
    Ok(keys.into_iter().map(|(_, cols)| cols).collect())
}

/// `table`'s statistics over every node of its rule ([`Stats`]). A node without the table
/// counts none, and so does a node that cannot answer: the statistics only weigh a plan, and
/// a statement that does not need that node must not fail for it.
pub async fn stats<D: Door>(
    door: &mut D,
    topo: &Topology,
    table: &str,
) -> Result<TableStats, MyError> {
    let sql = Stats::sql(table);
    let mut all = Stats::default();
    for node in topo.holders(table) {
        let Ok(rows) = door.fetch(node, &sql).await else {
            continue;
        };
        all.add(rows.into_iter().map(|r| {
            let mut r = r.into_iter();
            (r.next(), r.next(), r.next())
        }));
    }
    Ok(all.done())
}

/// A table's statistics added up over its nodes: its rows
/// (`information_schema.TABLES.TABLE_ROWS`, InnoDB's estimate, no scan) and, for each column
/// that leads an index, the rows per distinct value (`information_schema.STATISTICS`'s
/// CARDINALITY, over the nodes that report one; 1 for a column that is a unique index of its
/// own, whatever a stale cardinality says).
#[derive(Debug, Default)]
pub struct Stats {
    rows: u64,
    /// Per column: the rows of the nodes that gave a cardinality, those cardinalities, and
    /// whether it is unique.
    columns: Vec<(String, u64, u64, bool)>,
}

impl Stats {
    /// What a node is asked: `(NULL, rows, NULL)`, then `(column, cardinality, 0 when a
    /// unique index is that column alone)` for each column that leads an index.
    pub fn sql(table: &str) -> String {
        let name = quote(table);
        format!(
            "SELECT NULL, TABLE_ROWS, NULL FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() AND LOWER(TABLE_NAME) = LOWER({name}) UNION ALL \
             SELECT LOWER(s.COLUMN_NAME), MAX(s.CARDINALITY), MIN(s.NON_UNIQUE OR EXISTS \
             (SELECT 1 FROM information_schema.STATISTICS n WHERE n.TABLE_SCHEMA = s.TABLE_SCHEMA \
             AND n.TABLE_NAME = s.TABLE_NAME AND n.INDEX_NAME = s.INDEX_NAME AND n.SEQ_IN_INDEX = 2)) \
             FROM information_schema.STATISTICS s WHERE s.TABLE_SCHEMA = DATABASE() \
             AND LOWER(s.TABLE_NAME) = LOWER({name}) AND s.SEQ_IN_INDEX = 1 \
             GROUP BY LOWER(s.COLUMN_NAME)"
        )
    }

    /// One node's answer to [`Stats::sql`].
    pub fn add(
        &mut self,
        answer: impl IntoIterator<Item = (Option<Value>, Option<Value>, Option<Value>)>,
    ) {
        let number = |v: Option<Value>| -> Option<u64> {
            let t = crate::value::text_form(&v?)?;
            String::from_utf8_lossy(&t).trim().parse::<u64>().ok()
        };
        let mut here = 0u64;
        let mut cards: Vec<(String, u64, bool)> = Vec::new();
        for (column, n, non_unique) in answer {
            match column.and_then(|c| crate::value::text_form(&c)) {
                None => here = number(n).unwrap_or(0),
                Some(c) => {
                    let unique = number(non_unique) == Some(0);
                    if let Some(n) = number(n).filter(|n| *n > 0 || unique) {
                        cards.push((String::from_utf8_lossy(&c).into_owned(), n, unique));
                    }
                }
            }
        }
        self.rows = self.rows.saturating_add(here);
        for (c, n, unique) in cards {
            match self.columns.iter_mut().find(|(name, ..)| *name == c) {
                Some((_, r, k, u)) => {
                    *r = r.saturating_add(here);
                    *k = k.saturating_add(n);
                    *u = *u || unique;
                }
                None => self.columns.push((c, here, n, unique)),
            }
        }
    }

    pub fn done(self) -> TableStats {
        let per_value = self
            .columns
            .into_iter()
            .map(|(c, r, k, unique)| {
                let v = if unique { 1 } else { (r / k.max(1)).max(1) };
                (c, v)
            })
            .collect();
        TableStats {
            rows: self.rows,
            per_value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_topology;
    use crate::exec::fake::{Canned, FakeDoor};

    fn topo() -> Topology {
        test_topology(
            1,
            3,
            "[tables.t]\nrule = \"hash_slot\"\ncolumn = \"k\"\n\
             slots = [{ slots = \"0-511\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds2\" }]\n",
        )
    }

    fn cols(names: &[&str]) -> Canned {
        let rows: Vec<Vec<&str>> = names.iter().map(|n| vec![*n]).collect();
        let rows: Vec<&[&str]> = rows.iter().map(Vec::as_slice).collect();
        Canned::rows(&["COLUMN_NAME"], &rows)
    }

    #[tokio::test]
    async fn statistics_add_up_over_the_nodes() {
        let t = topo();
        let mut door = FakeDoor::new(3);
        let on = |rows: &str, user: &str| {
            Canned::rows(
                &["NULL", "TABLE_ROWS"],
                &[
                    &["NULL", rows],
                    &["user_id", user],
                    &["order_id", rows],
                    &["k", "0"],
                ],
            )
        };
        door.answer(0, "information_schema.STATISTICS", on("3000", "100"));
        door.answer(2, "information_schema.STATISTICS", on("1000", "100"));
        let got = stats(&mut door, &t, "t").await.unwrap();
        assert_eq!(got.rows, 4000);
        // 4,000 rows over 200 users; order_id unique whatever its stale cardinality says;
        // no cardinality known for `k`.
        assert_eq!(got.per_value("user_id"), Some(20));
        assert_eq!(got.per_value("order_id"), Some(1));
        assert_eq!(got.per_value("k"), None);
        let asked: Vec<usize> = door.log().iter().map(|(n, _)| *n).collect();
        assert_eq!(asked, vec![0, 2]);
        assert!(door.log()[0].1.contains("TABLE_SCHEMA = DATABASE()"));

        // A node down counts none.
        door.down(2);
        let got = stats(&mut door, &t, "t").await.unwrap();
        assert_eq!(got.rows, 3000);
    }

    #[tokio::test]
    async fn every_node_of_the_table_is_asked_and_they_must_agree() {
        let t = topo();
        let mut door = FakeDoor::new(3);
        door.answer_any("information_schema.COLUMNS", cols(&["id", "k", "v"]));
        let got = read(&mut door, &t, None, "t").await.unwrap();
        assert_eq!(&*got, ["id", "k", "v"]);
        let asked: Vec<usize> = door.log().iter().map(|(n, _)| *n).collect();
        assert_eq!(asked, vec![0, 2], "the nodes of its slot map, once each");
        assert!(door.log()[0].1.contains("TABLE_SCHEMA = DATABASE()"));

        // A schema named in the statement, quoted as a literal.
        let mut door = FakeDoor::new(3);
        door.answer_any("information_schema.COLUMNS", cols(&["id"]));
        read(&mut door, &t, Some("sh'op"), "t").await.unwrap();
        assert!(door.log()[0]
            .1
            .contains("TABLE_SCHEMA = _utf8mb4 X'7368276F70'"));

        // ds2 has another column order: refused, naming both.
        let mut door = FakeDoor::new(3);
        door.answer(0, "information_schema.COLUMNS", cols(&["id", "k", "v"]));
        door.answer(2, "information_schema.COLUMNS", cols(&["id", "v", "k"]));
        let e = read(&mut door, &t, None, "t").await.unwrap_err();
        assert_eq!(e.code, 1235);
        assert!(
            e.message.contains("ds0") && e.message.contains("id, v, k"),
            "{}",
            e.message
        );
    }

    #[tokio::test]
    async fn a_missing_table_or_a_failing_node_fails_the_statement() {
        let t = topo();
        let mut door = FakeDoor::new(3);
        door.answer_any("information_schema.COLUMNS", cols(&[]));
        let e = read(&mut door, &t, None, "t").await.unwrap_err();
        assert_eq!((e.code, e.state.as_str()), (1146, "42S02"));
        assert!(e.message.contains("ds0"), "{}", e.message);

        let mut door = FakeDoor::new(3);
        door.answer_any("information_schema.COLUMNS", cols(&["id"]));
        door.down(2);
        assert!(read(&mut door, &t, None, "t").await.is_err());
        // A table in no rule lives on the default node.
        let mut door = FakeDoor::new(3);
        door.answer_any("information_schema.COLUMNS", cols(&["a"]));
        read(&mut door, &t, None, "plain").await.unwrap();
        assert_eq!(door.log().len(), 1);
        assert_eq!(door.log()[0].0, 0);
    }
}
