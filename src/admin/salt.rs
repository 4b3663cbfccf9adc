//! `SALT KEY 'v' OF t [OVER n1, n2, ...] [RATE r]`: a key too hot for one node salted while
//! it serves. Its table's `salt` picks a row's bucket; the key is salted with every bucket
//! on the node its rows are on (a version of its own: nothing moves, rows and reads stay
//! there), then a rebalance plan moves each other node's run of buckets there, one move at
//! a time, through the live migration (copy, verify, the source's binary log, cutover,
//! cleanup). The key's node keeps the first run of buckets.

use super::meta::{connect, failed};
use super::words::{unsupported, Answer};
use crate::backend::MyError;
use crate::config::{TableRule, Topology};
use crate::metadata::migrations::Migration;
use crate::routing::salt::Buckets;
use crate::shared::Shared;

const USAGE: &str = "usage: SALT KEY 'value' OF t [OVER node, node, ...] [RATE rows_per_sec]";

/// The buckets `first..=last` of `n` that each node of `over` holds (as the rules spread a
/// `salted` list), in list order; nodes given no bucket are left out.
pub fn runs(n: u16, over: &[usize]) -> Vec<(usize, u16, u16)> {
    crate::routing::runs(Buckets::spread(over, n).0)
        .into_iter()
        .map(|(a, b, node)| (node, a as u16, b as u16))
        .collect()
}

pub async fn salt_key(shared: &Shared, t: &Topology, text: &str) -> Result<Answer, MyError> {
    let words = crate::sql::leading_words(text, 300);
    let usage = || unsupported(USAGE);
    // After the key, which may be any word.
    let pos = |k: &str| {
        words
            .iter()
            .skip(3)
            .position(|x| x.eq_ignore_ascii_case(k))
            .map(|i| i + 3)
    };
    let key = words.get(2).cloned().ok_or_else(usage)?;
    let table = pos("OF")
        .and_then(|i| words.get(i + 1))
        .ok_or_else(usage)?
        .to_ascii_lowercase();
    let rate: u64 = match pos("RATE") {
        Some(i) => words
            .get(i + 1)
            .and_then(|r| r.parse().ok())
            .ok_or_else(usage)?,
        None => 0,
    };
    let Some(TableRule::HashSlot { map, .. }) = t.table(&table) else {
        return Err(unsupported(format!("`{table}` is not a hash_slot table")));
    };
    let Some(salt) = map.salt() else {
        return Err(unsupported(format!(
            "`{table}` has no `salt = {{ by = \"...\", buckets = N }}` in its rules: it says which column spreads a salted key's rows"
        )));
    };
    if map.salted().contains_key(key.as_bytes()) {
        return Err(unsupported(format!(
            "key '{key}' of `{table}` is salted already"
        )));
    }
    if map.is_split(key.as_bytes()) {
        return Err(unsupported(format!(
            "key '{key}' of `{table}` is split out of its slot or moving: salt it where its slot is"
        )));
    }
    if map.is_moving() {
        return Err(unsupported(format!(
            "rows of `{table}` are being moved (SHOW MIGRATIONS): salt once that move is done"
        )));
    }
    let from = crate::migrate::placed(t, &table, &key)
        .await
        .map_err(unsupported)?;
    // The nodes: those named after OVER, else every node with a weight; the key's own first.
    let mut over = vec![from];
    let named: Vec<&String> = match pos("OVER") {
        Some(i) => words[i + 1..]
            .iter()
            .take_while(|w| !w.eq_ignore_ascii_case("RATE"))
            .filter(|w| w.as_str() != ",")
            .collect(),
        None => Vec::new(),
    };
    if named.is_empty() {
        over.extend((0..t.nodes.len()).filter(|i| !t.nodes[*i].retired && t.nodes[*i].weight > 0));
    }
    for name in named {
        let Some(i) = t.node_index(name).filter(|i| !t.nodes[*i].retired) else {
            return Err(unsupported(format!("unknown node `{name}`")));
        };
        over.push(i);
    }
    let mut seen = Vec::new();
    over.retain(|n| {
        let new = !seen.contains(n);
        seen.push(*n);
        new
    });
    if over.len() < 2 {
        return Err(unsupported(format!(
            "key '{key}' of `{table}` would stay on `{}` alone: name other nodes after OVER",
            t.node_name(from)
        )));
    }
    if over.len() > usize::from(salt.buckets) {
        over.truncate(usize::from(salt.buckets));
    }
    let moves: Vec<Migration> = runs(salt.buckets, &over)
        .into_iter()
        .filter(|(node, _, _)| *node != from)
        .map(|(node, first, last)| {
            Migration::new(
                table.clone(),
                first,
                last,
                Some(key.clone()),
                t.node_name(from).to_string(),
                t.node_name(node).to_string(),
                rate,
                true,
            )
            .of_buckets()
        })
        .collect();
    let mut c = connect(
        shared,
        t,
        "salting a key needs a [metadata] schema, where its buckets and their moves are kept",
    )
    .await?;
    super::migrations::none_running(&mut c).await?;
    let fresh = crate::metadata::salted::insert(
        &mut c,
        &table,
        &key,
        t.node_name(from),
        salt.buckets,
        t.version,
    )
    .await
    .map_err(failed)?;
    if !fresh {
        return Err(unsupported(format!(
            "key '{key}' of `{table}` is salted already in the metadata schema (its version is on its way)"
        )));
    }
    let what = format!("SALT KEY '{key}' OF {table}");
    let id = crate::metadata::rebalance::enqueue(&mut c, &what, 1, &moves)
        .await
        .map_err(failed)?
        .map_err(|why| {
            unsupported(format!(
                "key '{key}' of `{table}` is salted with every bucket on `{}`, but its moves were not queued: {why}",
                t.node_name(from)
            ))
        })?;
    Ok(Answer::Done(format!(
        "key '{key}' of `{table}` salted by `{}` over {} buckets on {}; rebalance {id} moves {} runs of its buckets off `{}`, one at a time (SHOW REBALANCE)",
        salt.by,
        salt.buckets,
        over.iter()
            .map(|n| format!("`{}`", t.node_name(*n)))
            .collect::<Vec<_>>()
            .join(", "),
        moves.len(),
        t.node_name(from)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_node_takes_an_equal_run_of_buckets_as_the_rules_expand_them() {
        assert_eq!(
            runs(8, &[2, 0, 1, 3]),
            vec![(2, 0, 1), (0, 2, 3), (1, 4, 5), (3, 6, 7)]
        );
        assert_eq!(runs(4, &[1, 0, 2]), vec![(1, 0, 1), (0, 2, 2), (2, 3, 3)]);
        // The same placement the rules file gives a `salted` list.
        let t = crate::config::test_topology(
            2,
            3,
            "[tables.t]\nrule = \"hash_slot\"\ncolumn = \"k\"\n\
             slots = [{ slots = \"0-1023\", node = \"ds0\" }]\n\
             salt = { by = \"id\", buckets = 4 }\nsalted = { \"7\" = [\"ds1\", \"ds0\", \"ds2\"] }\n",
        );
        let Some(TableRule::HashSlot { map, .. }) = t.table("t") else {
            panic!("hash_slot")
        };
        assert_eq!(map.salted()[b"7".as_slice()].0, vec![1, 1, 0, 2]);
    }
}
