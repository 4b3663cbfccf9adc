//! Salted keys (`crate::routing::salt`): a read by the key alone reads every bucket's node,
//! one that pins the salt column reads its bucket's; each row is written to its bucket's.

use super::tests::{plan_in, refused};
use super::*;
use crate::config::test_topology;

/// `t_s` on `id`, salted by `v` over 8 buckets: key 10 on ds0-ds3 (bucket `b` on `ds{b % 4}`);
/// `t_u` alike but for the salting. `CRC32(v) % 8` for v = 4, 10, 7, 3: buckets 0, 1, 2, 3.
fn topo() -> Topology {
    test_topology(
        2,
        4,
        "[tables.t_s]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
         slots = [{ slots = \"0-511\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds1\" }]\n\
         salt = { by = \"v\", buckets = 8 }\n\
         salted = { \"10\" = [\"ds0\", \"ds1\", \"ds2\", \"ds3\"] }\n\
         [tables.t_u]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
         slots = [{ slots = \"0-511\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds1\" }]\n",
    )
}

fn nodes(p: &Plan) -> Vec<usize> {
    match p.source() {
        Plan::Route(t) => vec![t.node],
        other => super::moving_tests::scattered(other)
            .into_iter()
            .map(|(n, _)| n)
            .collect(),
    }
}

#[test]
fn a_salted_key_is_read_on_its_buckets_nodes() {
    let t = topo();
    for (sql, params, want) in [
        ("SELECT * FROM t_s WHERE id = 10", vec![], vec![0, 1, 2, 3]),
        (
            "SELECT * FROM t_s WHERE id = ?",
            vec![Value::Int(10)],
            vec![0, 1, 2, 3],
        ),
        ("SELECT * FROM t_s WHERE id = 10 AND v = 7", vec![], vec![2]),
        (
            "SELECT * FROM t_s WHERE id = ? AND v IN (?, ?)",
            vec![Value::Int(10), Value::Int(3), Value::Int(10)],
            vec![1, 3],
        ),
        (
            "UPDATE t_s SET x = 1 WHERE id = 10",
            vec![],
            vec![0, 1, 2, 3],
        ),
        ("DELETE FROM t_s WHERE v = 4 AND id = 10", vec![], vec![0]),
        // A key that is not salted stays on its slot's node (slot 481).
        (
            "SELECT * FROM t_s WHERE id = 13 AND v = 7",
            vec![],
            vec![nodes(&plan_in(&t, "SELECT * FROM t_u WHERE id = 13", &[]))[0]],
        ),
    ] {
        assert_eq!(nodes(&plan_in(&t, sql, &params)), want, "{sql}");
    }
}

#[test]
fn a_salted_keys_rows_are_written_to_their_buckets_nodes() {
    let t = topo();
    let p = plan_in(
        &t,
        "INSERT INTO t_s (id, v) VALUES (10, 4), (10, 10), (10, 7), (10, 3), (10, 1)",
        &[],
    );
    let split = super::moving_tests::scattered(p.source());
    assert_eq!(
        split,
        vec![
            (0, "INSERT INTO t_s (id, v) VALUES (10, 4)".to_string()),
            (1, "INSERT INTO t_s (id, v) VALUES (10, 10)".to_string()),
            (2, "INSERT INTO t_s (id, v) VALUES (10, 7)".to_string()),
            (
                3,
                "INSERT INTO t_s (id, v) VALUES (10, 3), (10, 1)".to_string()
            ),
        ]
    );
    let p = plan_in(
        &t,
        "INSERT INTO t_s SET id = ?, v = ?",
        &[Value::Int(10), Value::Int(7)],
    );
    assert_eq!(nodes(&p), vec![2]);
    // Without its salt column a salted key's row has no bucket.
    for sql in [
        "INSERT INTO t_s (id) VALUES (10)",
        "INSERT INTO t_s (id, v) VALUES (10, NULL)",
        "INSERT INTO t_s (id, v) VALUES (10, 1 + 1)",
        "INSERT INTO t_s SET id = 10",
    ] {
        let p = plan_in(&t, sql, &[]);
        assert!(refused(&p).contains("is salted"), "{sql}: {p:?}");
    }
    // Other keys need no salt column.
    assert_eq!(
        nodes(&plan_in(&t, "INSERT INTO t_s (id) VALUES (13)", &[])).len(),
        1
    );
}

#[test]
fn a_salted_table_is_not_joined_node_by_node() {
    let t = topo();
    for sql in [
        "SELECT * FROM t_s a JOIN t_s b ON a.id = b.id WHERE a.id = 10",
        "SELECT * FROM t_s JOIN t_u ON t_u.id = t_s.id",
    ] {
        let p = plan_in(&t, sql, &[]);
        assert!(
            !matches!(p.source(), Plan::Scatter { .. } | Plan::Route(_)),
            "{sql}: {p:?}"
        );
    }
}

#[test]
fn a_change_of_the_salt_column_moves_the_row_between_buckets() {
    let t = topo();
    let p = plan_in(&t, "UPDATE t_s SET v = 7 WHERE id = 10 AND v = 4", &[]);
    let Plan::KeyUpdate(k) = p else {
        panic!("expected a key update, got {p:?}")
    };
    assert_eq!((k.shard, k.by), (0, Some(1)));
}
