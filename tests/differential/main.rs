//! Differential tests: the same data in one plain MariaDB (the reference) and, sharded, behind
//! the proxy must answer every query the proxy supports identically; a query the proxy cannot
//! answer correctly must be refused with MySQL error 1235 (ER_NOT_SUPPORTED_YET). Any other
//! outcome is WRONG and fails the test.
//!
//! This binary's cluster has 5 nodes: nodes 0-3 are the proxy's shards `ds0`..`ds3` (sharded
//! tables: `hash_slot` on `user_id`, slots 0-255 ds0, 256-511 ds1, 512-767 ds2, 768-1023 ds3);
//! node 4 is the reference, which the proxy's rules never name.
//!
//! - `shardingsphere_corpus`: Apache ShardingSphere's `db` scenario (`tests/corpus/shardingsphere-db/`), every
//!   query in the text and in the binary (prepared) protocol.
//! - `what_generated_queries_found_...`: the defects random queries found, as fixed cases.
//! - `generated_queries`: seeded random SELECTs over a sharded table with NULLs, duplicates,
//!   mixed-case strings, negative and DECIMAL values (`DIFF_SEED=N` replays another seed).
//! - `an_update_of_the_shard_key_...`: rows moved between nodes by UPDATE, against the reference.
//! - `random_queries_answer_like_one_mariadb`: random tables (types, placements) and random
//!   SELECTs over them, seeded (`RANDOM_SEED`, `RANDOM_SEEDS`, `RANDOM_QUERIES`; see `random.rs`).
//! - `views_over_sharded_tables_...`: views kept by the proxy, read and made like the reference's.
//! - `joins_by_the_other_tables_key_...`: joins whose copy is read by the join's keys, rows
//!   copied counted.
//! - `deep_pages_by_the_key_...`: `ORDER BY <primary key> LIMIT o, n` found by the key, rows read
//!   from the nodes counted.

#[path = "../common/mod.rs"]
mod common;
mod corpus;
mod defects;
mod estimates;
mod generated;
mod joins;
mod judge;
mod key_update;
mod pages;
mod random;
mod salted;
mod tpch;
mod views;

use common::*;

const NODES: usize = 5;
/// The cluster nodes behind the proxy, as `ds0`..`ds3`.
const SHARDS: [usize; 4] = [0, 1, 2, 3];
/// The plain MariaDB holding every row.
const REFERENCE: usize = 4;
const L: [(u16, u16); 4] = FOUR_NODES;
const ER_NOT_SUPPORTED_YET: u16 = 1235;

fn cluster() -> &'static Cluster {
    Cluster::shared(NODES)
}
