//! Sequence: a block of ids from a table's sequence, for a generated key of kind
//! "sequence" (AUTO_INCREMENT-like: small, increasing, unique across proxies).
//!
//! The sequence is a row of `shardproxy_sequences (name, next_id)` in the database of the
//! generator's node URL. A proxy reserves a block with one `UPDATE ... SET next_id =
//! LAST_INSERT_ID(next_id + n)` (the row lock orders proxies; each gets a range no other
//! gets) and hands its ids out itself. The row is created on first use just past the largest
//! key the table's nodes hold, so rows already there (a restored dump) are never collided
//! with.

use mysql_common::value::Value;

use super::door::Door;
use crate::config::Topology;
use crate::error::MyError;

/// The table holding the sequences, on each generator's node.
pub const TABLE: &str = "shardproxy_sequences";

use crate::sql::write::{quoted as ident, text_literal as quote};

fn number(rows: &[Vec<Value>]) -> Option<u64> {
    crate::value::integer(rows.first()?.first()?)
}

/// Reserves at least `count` ids of `table`'s sequence: `[first, end)`.
pub async fn reserve<D: Door>(
    door: &mut D,
    topo: &Topology,
    table: &str,
    count: u64,
) -> Result<(u64, u64), MyError> {
    let Some((g, seq)) = topo
        .key_generators
        .get(table)
        .and_then(|g| g.sequence.map(|s| (g, s)))
    else {
        return Err(MyError::internal(format!(
            "shardproxy: `{table}` has no sequence key_generator"
        )));
    };
    let n = count.max(seq.block);
    let name = quote(table);
    let create = format!(
        "CREATE TABLE IF NOT EXISTS {TABLE} (name VARCHAR(191) NOT NULL PRIMARY KEY, \
         next_id BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB"
    );
    let current = format!("SELECT next_id FROM {TABLE} WHERE name = {name}");
    let found = door
        .fetch_outside_all(seq.node, &[create.as_str(), current.as_str()])
        .await?;
    if found.is_empty() {
        // First use: start past the largest key any node of the table holds.
        let mut max = 0u64;
        let nodes = topo.holders(table);
        let sql = format!(
            "SELECT COALESCE(MAX({}), 0) FROM {}",
            ident(&g.column),
            ident(table)
        );
        for node in nodes {
            let rows = door.fetch(node, &sql).await?;
            max = max.max(number(&rows).unwrap_or(0));
        }
        let insert = format!(
            "INSERT IGNORE INTO {TABLE} (name, next_id) VALUES ({name}, {})",
            max + 1
        );
        door.fetch_outside_all(seq.node, &[insert.as_str()]).await?;
    }
    let take =
        format!("UPDATE {TABLE} SET next_id = LAST_INSERT_ID(next_id + {n}) WHERE name = {name}");
    let rows = door
        .fetch_outside_all(seq.node, &[take.as_str(), "SELECT LAST_INSERT_ID()"])
        .await?;
    let end = number(&rows).filter(|end| *end > n).ok_or_else(|| {
        MyError::internal(format!(
            "shardproxy: the sequence of `{table}` on `{}` gave no block",
            door.name(seq.node)
        ))
    })?;
    Ok((end - n, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_topology;
    use crate::exec::fake::{Canned, FakeDoor};

    fn topo() -> Topology {
        test_topology(
            1,
            2,
            "[tables.t]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
             slots = [{ slots = \"0-511\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds1\" }]\n\
             key_generator = { column = \"id\", kind = \"sequence\", node = \"ds1\", block = 100 }\n",
        )
    }

    #[tokio::test]
    async fn a_new_sequence_starts_past_the_tables_largest_key() {
        let t = topo();
        let mut door = FakeDoor::new(2);
        door.answer(0, "MAX(`id`)", Canned::rows(&["m"], &[&["41"]]));
        door.answer(1, "MAX(`id`)", Canned::rows(&["m"], &[&["7"]]));
        door.answer(1, "SELECT next_id", Canned::rows(&["next_id"], &[]));
        door.answer(1, "LAST_INSERT_ID()", Canned::rows(&["id"], &[&["142"]]));
        let (first, end) = reserve(&mut door, &t, "t", 5).await.unwrap();
        assert_eq!((first, end), (42, 142), "a block of 100 from 42");
        let outside: Vec<&str> = door.outside.iter().map(|(_, s)| s.as_str()).collect();
        assert!(
            door.outside.iter().all(|(n, _)| *n == 1),
            "on the sequence's node"
        );
        assert!(
            outside.iter().any(|s| s.contains("VALUES ('t', 42)")),
            "{outside:?}"
        );
        assert!(
            outside
                .iter()
                .any(|s| s.contains("LAST_INSERT_ID(next_id + 100)")),
            "{outside:?}"
        );
    }

    #[tokio::test]
    async fn an_existing_sequence_is_advanced_by_the_larger_of_block_and_need() {
        let t = topo();
        let mut door = FakeDoor::new(2);
        door.answer(1, "SELECT next_id", Canned::rows(&["next_id"], &[&["500"]]));
        door.answer(1, "LAST_INSERT_ID()", Canned::rows(&["id"], &[&["750"]]));
        let (first, end) = reserve(&mut door, &t, "t", 250).await.unwrap();
        assert_eq!((first, end), (500, 750));
        assert!(door.log().is_empty(), "the table's nodes are not asked");
        // A node that is down fails the reservation.
        let mut door = FakeDoor::new(2);
        door.down(1);
        assert!(reserve(&mut door, &t, "t", 1).await.is_err());
    }
}
