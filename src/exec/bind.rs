//! The reads of a copy bound by a join's keys ([`crate::plan::bind`]): the outer side's
//! distinct values read on the gathering node, and the copied table read by `key IN (...)`,
//! [`PER_READ`] values a read, each written by the literal writer in its column's type.
//!
//! Integer values go to the node their slot names, as the proxy routes `WHERE key IN (..)`.
//! Strings, decimals, dates and times go to every node of the table: their equality is the
//! collation's or the type's (`'ab' = 'AB '`), not their text's slot, and the IN list keeps it
//! (the column's collation decides, as in the join). Anything else (floating point, whose text
//! may not be the value; over [`MAX_VALUES`] values): `None`, and the copy reads the table as
//! planned without them.

use std::collections::BTreeMap;

use mysql_common::constants::ColumnType;
use mysql_common::packets::Column;
use mysql_common::value::Value;

use super::door::{Door, NodeError, NodeResult, Run, Stmt};
use super::inline::integer_column;
use crate::plan::bind::{Bind, MAX_VALUES, PER_READ};

/// How a key column's values choose the nodes to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Each by its slot.
    Routed,
    /// Every node of the table.
    Everywhere,
}

fn class(c: &Column) -> Option<Class> {
    use ColumnType::*;
    match c.column_type() {
        MYSQL_TYPE_TINY | MYSQL_TYPE_SHORT | MYSQL_TYPE_INT24 | MYSQL_TYPE_LONG
        | MYSQL_TYPE_LONGLONG => Some(Class::Routed),
        MYSQL_TYPE_VARCHAR
        | MYSQL_TYPE_VAR_STRING
        | MYSQL_TYPE_STRING
        | MYSQL_TYPE_DECIMAL
        | MYSQL_TYPE_NEWDECIMAL
        | MYSQL_TYPE_DATE
        | MYSQL_TYPE_DATETIME
        | MYSQL_TYPE_TIMESTAMP
        | MYSQL_TYPE_TIME
        | MYSQL_TYPE_YEAR => Some(Class::Everywhere),
        _ => None,
    }
}

/// The outer side's distinct key values, as its node sent them, and their column.
pub struct Keys {
    col: Option<Column>,
    values: Vec<Vec<u8>>,
}

impl Keys {
    /// How many distinct values (NULLs left out).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// Reads the keys' query (`Bind::keys`) to its end from its started result.
pub async fn keys<R: NodeResult>(res: R) -> Result<Keys, NodeError> {
    let col = res.columns().and_then(|c| c.first().cloned());
    let values = super::scatter::drain(res)
        .await?
        .into_iter()
        // A NULL equals nothing: no row of the copy joins it.
        .filter_map(|row| match row.into_iter().next() {
            Some(Some(Value::Bytes(v))) => Some(v),
            _ => None,
        })
        .collect();
    Ok(Keys { col, values })
}

/// The keys' query run on its node.
pub async fn read_keys<D: Door>(door: &mut D, b: &Bind) -> Result<Keys, NodeError> {
    let res = door
        .start(b.node, Stmt::new(&b.keys, &[]), Run::TEXT_READ)
        .await?;
    keys(res).await
}

/// The reads that fill the copy, one per node and batch of values; `None`: read as planned.
/// `definition`: the copied table's `SHOW CREATE TABLE`. An integer value goes to its slot's
/// node only when the table's key is an integer column too: a string key `'0012'` equals
/// `12` and lies on the slot of its own text.
pub fn reads_of(b: &Bind, keys: Keys, definition: &str) -> Option<Vec<(usize, String)>> {
    let Keys { col, values } = keys;
    let how = match col.as_ref().and_then(class) {
        Some(Class::Routed) if !integer_column(definition, &b.key) => Some(Class::Everywhere),
        how => how,
    };
    let (Some(col), Some(how)) = (col, how) else {
        return None;
    };
    if values.len() > MAX_VALUES {
        return None;
    }
    let mut by_node: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for v in values {
        let mut lit = String::new();
        crate::sql::write::typed(&mut lit, Some(&Value::Bytes(v.clone())), &col);
        match how {
            Class::Routed => {
                for node in b.map.place_text(&v).nodes(None) {
                    by_node.entry(node).or_default().push(lit.clone());
                }
            }
            Class::Everywhere => {
                for node in b.map.nodes() {
                    by_node.entry(node).or_default().push(lit.clone());
                }
            }
        }
    }
    let mut out = Vec::new();
    for (node, vs) in by_node {
        for chunk in vs.chunks(PER_READ) {
            out.push((node, format!("{}{})", b.head, chunk.join(","))));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::fake::{Canned, FakeDoor};
    use crate::routing::slot::slot_of_text;

    /// The keys read on their node, then the reads they make.
    async fn reads(
        door: &mut FakeDoor,
        b: &Bind,
        definition: &str,
    ) -> Result<Option<Vec<(usize, String)>>, NodeError> {
        Ok(reads_of(b, read_keys(door, b).await?, definition))
    }
    use crate::routing::slot::SlotMap;

    fn bind() -> Bind {
        let mut nodes = Box::new([0u16; 1024]);
        for (s, n) in nodes.iter_mut().enumerate() {
            *n = u16::from(s >= 512);
        }
        Bind {
            node: 0,
            keys: "SELECT DISTINCT `o`.`pid` FROM `o` AS `o` LIMIT 10001".into(),
            head: "SELECT `p`.* FROM `p` AS `p` WHERE `p`.`id` IN (".into(),
            map: SlotMap::from_assignment(nodes),
            on: "p.id = o.pid".into(),
            key: "id".into(),
            at: None,
        }
    }

    const DEF: &str = "CREATE TABLE `p` (\n  `id` int(11) NOT NULL,\n  `v` varchar(8) DEFAULT NULL,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB";

    #[test]
    fn an_integer_key_column_is_told_from_others() {
        assert!(integer_column(DEF, "id"));
        assert!(!integer_column(DEF, "v"));
        assert!(!integer_column(DEF, "missing"));
        assert!(integer_column("  `k` bigint unsigned NOT NULL,", "k"));
        assert!(!integer_column("  `k` interval_thing NOT NULL,", "k"));
    }

    /// An integer value against a string key: every node, not the value's slot.
    #[tokio::test]
    async fn integer_values_for_a_string_key_go_to_every_node() {
        let mut door = FakeDoor::new(2);
        door.answer(
            0,
            "SELECT DISTINCT",
            Canned::typed(&[("pid", ColumnType::MYSQL_TYPE_LONG)], &[&["12"]]),
        );
        let def = DEF.replace("`id` int(11)", "`id` varchar(8)");
        let got = reads(&mut door, &bind(), &def)
            .await
            .unwrap()
            .expect("bound");
        assert_eq!(got.iter().map(|(n, _)| *n).collect::<Vec<_>>(), vec![0, 1]);
    }

    fn node_of(k: &str) -> usize {
        usize::from(slot_of_text(k.as_bytes()) >= 512)
    }

    #[tokio::test]
    async fn integer_keys_go_to_their_slots_nodes_and_nulls_to_none() {
        let mut door = FakeDoor::new(2);
        door.answer(
            0,
            "SELECT DISTINCT",
            Canned::typed(
                &[("pid", ColumnType::MYSQL_TYPE_LONG)],
                &[&["1"], &["2"], &["NULL"], &["3"], &["-4"]],
            ),
        );
        let got = reads(&mut door, &bind(), DEF)
            .await
            .unwrap()
            .expect("bound");
        let mut want: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
        for k in ["1", "2", "3", "-4"] {
            want.entry(node_of(k)).or_default().push(k);
        }
        let want: Vec<(usize, String)> = want
            .into_iter()
            .map(|(n, ks)| {
                (
                    n,
                    format!(
                        "SELECT `p`.* FROM `p` AS `p` WHERE `p`.`id` IN ({})",
                        ks.join(",")
                    ),
                )
            })
            .collect();
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn string_keys_go_to_every_node_as_literals_and_doubles_are_not_bound() {
        let mut door = FakeDoor::new(2);
        door.answer(
            0,
            "SELECT DISTINCT",
            Canned::typed(
                &[("pid", ColumnType::MYSQL_TYPE_VAR_STRING)],
                &[&["ab"], &["O'x"]],
            ),
        );
        let got = reads(&mut door, &bind(), DEF)
            .await
            .unwrap()
            .expect("bound");
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].1, got[1].1);
        assert!(!got[0].1.contains("O'x"), "{got:?}");
        let mut door = FakeDoor::new(2);
        door.answer(
            0,
            "SELECT DISTINCT",
            Canned::typed(&[("pid", ColumnType::MYSQL_TYPE_DOUBLE)], &[&["0.1"]]),
        );
        assert_eq!(reads(&mut door, &bind(), DEF).await.unwrap(), None);
    }

    #[tokio::test]
    async fn no_outer_row_reads_nothing() {
        let mut door = FakeDoor::new(2);
        door.answer(
            0,
            "SELECT DISTINCT",
            Canned::typed(&[("pid", ColumnType::MYSQL_TYPE_LONG)], &[]),
        );
        assert_eq!(
            reads(&mut door, &bind(), DEF).await.unwrap(),
            Some(Vec::new())
        );
    }
}
