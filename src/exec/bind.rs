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

use std::collections::{BTreeMap, BTreeSet};

use mysql_common::collations::{Collation, CollationId};
use mysql_common::constants::ColumnType;
use mysql_common::packets::Column;
use mysql_common::value::Value;

use super::door::{Door, NodeError, NodeResult, Run, Stmt};
use super::inline::integer_column;
use crate::config::indexes::{hash_literal, IndexKind, HASH_COLUMN};
use crate::plan::bind::{Bind, ByIndex, MAX_VALUES, PER_READ};
use crate::sql::write::quoted;

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
    /// The rows read, a NULL's too: the read stops one past [`MAX_VALUES`], and a NULL
    /// among those rows leaves fewer values than there are.
    rows: usize,
}

impl Keys {
    /// More values than a read by keys takes (the read stopped before the last).
    pub fn past_limit(&self) -> bool {
        self.rows > MAX_VALUES
    }

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
    let rows = super::scatter::drain(res).await?;
    let read = rows.len();
    let values = rows
        .into_iter()
        // A NULL equals nothing: no row of the copy joins it.
        .filter_map(|row| match row.into_iter().next() {
            Some(Some(Value::Bytes(v))) => Some(v),
            _ => None,
        })
        .collect();
    Ok(Keys {
        col,
        values,
        rows: read,
    })
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
    if keys.past_limit() {
        return None;
    }
    let Keys { col, values, .. } = keys;
    let how = match col.as_ref().and_then(class) {
        Some(Class::Routed) if !integer_column(definition, &b.key) => Some(Class::Everywhere),
        how => how,
    };
    let (Some(col), Some(how)) = (col, how) else {
        return None;
    };
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

/// The reads of a copy bound through a global index of the copied table ([`ByIndex`]): the
/// outer values hashed as the indexed column compares them, their entries read from the
/// index table's nodes, and the copy read by the values on the nodes of the keys found only.
/// `None` (read as planned): over [`MAX_VALUES`] values, a value the index cannot hash, or
/// an outer column whose equality with the indexed one is not the index's (an integer index
/// joined to a string, a string joined in another collation): hashing by the index there
/// could miss a row the join's own comparison finds equal.
pub async fn index_reads<D: Door>(
    door: &mut D,
    b: &Bind,
    ix: &ByIndex,
    keys: Keys,
) -> Result<Option<Vec<(usize, String)>>, NodeError> {
    if keys.past_limit() {
        return Ok(None);
    }
    let Keys { col, values, .. } = keys;
    let Some(col) = col else {
        return Ok(None);
    };
    // A string column's own collation: the result's metadata gives the connection's.
    let collation = match ix.index.kind {
        IndexKind::Integer => None,
        _ => door
            .collations(b.node, &b.keys)
            .await
            .and_then(|c| c.first().copied()),
    };
    if !comparable(&ix.index.kind, &col, collation) {
        return Ok(None);
    }
    let charset = door.state().charset.clone();
    // The hashes, by the index node that holds their entries.
    let mut by_node: BTreeMap<usize, Vec<Vec<u8>>> = BTreeMap::new();
    for v in &values {
        let value = Value::Bytes(v.clone());
        let Ok(h) = ix
            .index
            .hash_of(&value, &charset, true, ix.weights.as_deref())
        else {
            return Ok(None);
        };
        let Some(place) = ix.map.place(&Value::Bytes(h.clone())) else {
            return Ok(None);
        };
        for node in place.nodes(None) {
            by_node.entry(node).or_default().push(h.clone());
        }
    }
    // The nodes of the keys the entries name.
    let mut nodes = BTreeSet::new();
    for (node, hashes) in by_node {
        for chunk in hashes.chunks(PER_READ) {
            let list: Vec<String> = chunk.iter().map(|h| hash_literal(h)).collect();
            let sql = format!(
                "SELECT {} FROM {} WHERE {} IN ({})",
                quoted(&ix.index.shard_column),
                quoted(&ix.index.index_table),
                quoted(HASH_COLUMN),
                list.join(", ")
            );
            for row in door.fetch(node, &sql).await? {
                match row.first().and_then(|k| b.map.place(k)) {
                    Some(p) => nodes.extend(p.nodes(None)),
                    None => return Ok(None),
                }
            }
        }
    }
    let literals: Vec<String> = values
        .iter()
        .map(|v| {
            let mut lit = String::new();
            crate::sql::write::typed(&mut lit, Some(&Value::Bytes(v.clone())), &col);
            lit
        })
        .collect();
    let mut out = Vec::new();
    for node in nodes {
        for chunk in literals.chunks(PER_READ) {
            out.push((node, format!("{}{})", b.head, chunk.join(","))));
        }
    }
    Ok(Some(out))
}

/// Whether equal values of the outer column `col` (of the collation `collation`, for a
/// string) and of a column indexed as `kind` are values of one hash.
fn comparable(kind: &IndexKind, col: &Column, collation: Option<u16>) -> bool {
    let string = matches!(
        col.column_type(),
        ColumnType::MYSQL_TYPE_VARCHAR
            | ColumnType::MYSQL_TYPE_VAR_STRING
            | ColumnType::MYSQL_TYPE_STRING
    );
    let name = || {
        let c = Collation::resolve(CollationId::from(collation?));
        (c.id() != CollationId::UNKNOWN_COLLATION_ID).then(|| c.collation().to_string())
    };
    match kind {
        IndexKind::Integer => class(col) == Some(Class::Routed),
        // Byte equality (less trailing spaces) where the join's is a binary collation's.
        IndexKind::Bytes => {
            string && (collation == Some(63) || name().is_some_and(|c| c.ends_with("_bin")))
        }
        IndexKind::Collated(c) => string && name().is_some_and(|o| o == *c),
    }
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
            by_index: None,
            outer: Default::default(),
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
    async fn a_null_among_the_values_read_does_not_hide_the_values_past_the_limit() {
        // The read stops one row past the limit: with a NULL among those rows, the values
        // are exactly the limit, and more were left unread.
        let mut rows: Vec<String> = (1..=MAX_VALUES).map(|v| v.to_string()).collect();
        rows.insert(7, "NULL".into());
        let rows: Vec<[&str; 1]> = rows.iter().map(|r| [r.as_str()]).collect();
        let rows: Vec<&[&str]> = rows.iter().map(|r| r.as_slice()).collect();
        let mut door = FakeDoor::new(2);
        door.answer(
            0,
            "SELECT DISTINCT",
            Canned::typed(&[("pid", ColumnType::MYSQL_TYPE_LONG)], &rows),
        );
        let got = reads(&mut door, &bind(), DEF).await.unwrap();
        assert_eq!(got, None, "read as planned");
    }

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

    /// [`bind`] through a unique index on `p.email` (binary collation), its table all on
    /// node 0.
    fn by_index() -> Bind {
        let index = crate::config::indexes::GlobalIndex {
            name: "email".into(),
            table: "p".into(),
            column: "email".into(),
            shard_column: "id".into(),
            unique: true,
            kind: IndexKind::Bytes,
            public: true,
            index_table: "p_email_gsi".into(),
            default_null: true,
        };
        Bind {
            head: "SELECT `p`.* FROM `p` AS `p` WHERE `p`.`email` IN (".into(),
            key: "email".into(),
            by_index: Some(ByIndex {
                index,
                map: SlotMap::from_assignment(Box::new([0u16; 1024])),
                weights: None,
            }),
            ..bind()
        }
    }

    /// A door whose outer values are `email`s in `collation` (their result's metadata says
    /// the connection's, utf8mb4_general_ci, as MariaDB's does).
    fn door_with(collation: u16, values: &[&str]) -> FakeDoor {
        let mut door = FakeDoor::new(2);
        door.answer(0, "SELECT DISTINCT", emails(values));
        door.collations = Some(vec![collation].into());
        door
    }

    fn emails(values: &[&str]) -> Canned {
        let col = Column::new(ColumnType::MYSQL_TYPE_VAR_STRING)
            .with_name(b"email")
            .with_character_set(45);
        Canned::Rows {
            cols: vec![col].into(),
            rows: values
                .iter()
                .map(|v| vec![Some(Value::Bytes(v.as_bytes().to_vec()))])
                .collect(),
            fail_after: None,
        }
    }

    /// Bound through the index: the values' entries read where their hashes are, the copy
    /// read on the node of the keys found only.
    #[tokio::test]
    async fn values_bound_through_an_index_read_the_copy_on_their_rows_nodes_only() {
        let b = by_index();
        let mut door = door_with(46, &["a@x", "b@x "]);
        door.answer(
            0,
            "FROM `p_email_gsi`",
            Canned::typed(&[("id", ColumnType::MYSQL_TYPE_LONG)], &[&["7"]]),
        );
        let keys = read_keys(&mut door, &b).await.unwrap();
        let ix = b.by_index.clone().expect("by index");
        let got = index_reads(&mut door, &b, &ix, keys)
            .await
            .unwrap()
            .expect("bound");
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, node_of("7"));
        assert!(
            got[0]
                .1
                .starts_with("SELECT `p`.* FROM `p` AS `p` WHERE `p`.`email` IN ("),
            "{got:?}"
        );
        // The index read asked for both values' hashes (the trailing space dropped).
        let asked = door
            .log()
            .iter()
            .find(|(_, sql)| sql.contains("p_email_gsi"))
            .map(|(n, sql)| (*n, sql.clone()))
            .expect("an index read");
        assert_eq!(asked.0, 0);
        assert!(
            asked
                .1
                .contains(&crate::config::indexes::hash_literal(b"a@x")),
            "{}",
            asked.1
        );
        assert!(
            asked
                .1
                .contains(&crate::config::indexes::hash_literal(b"b@x")),
            "{}",
            asked.1
        );

        // No entry: an empty copy, read nowhere.
        let mut door = door_with(46, &["nobody@x"]);
        door.answer(
            0,
            "FROM `p_email_gsi`",
            Canned::typed(&[("id", ColumnType::MYSQL_TYPE_LONG)], &[]),
        );
        let keys = read_keys(&mut door, &b).await.unwrap();
        let got = index_reads(&mut door, &b, &ix, keys).await.unwrap();
        assert_eq!(got, Some(Vec::new()));

        // Values whose equality in the join is a case-insensitive collation's (45,
        // utf8mb4_general_ci), or integers against a string index: read as planned.
        for canned in [
            emails(&["a@x"]),
            Canned::typed(&[("pid", ColumnType::MYSQL_TYPE_LONG)], &[&["12"]]),
        ] {
            let mut door = FakeDoor::new(2);
            door.answer(0, "SELECT DISTINCT", canned);
            door.collations = Some(vec![45].into());
            let keys = read_keys(&mut door, &b).await.unwrap();
            assert_eq!(index_reads(&mut door, &b, &ix, keys).await.unwrap(), None);
        }
    }
}
