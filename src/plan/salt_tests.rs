//! Salted keys (`crate::routing::salt`): a read by the key alone reads every bucket's node,
//! one that pins the salt column reads its bucket's; each row is written to its bucket's.

use super::tests::{plan_in, refused};
use super::*;
use crate::config::test_topology;

/// `t_s` on `id`, salted by `v` over 4 buckets: key 10 on ds0-ds3 (bucket `b` on `dsb`);
/// `t_u` alike but for the salting. `CRC32(v) % 4` for v = 4, 10, 7, 3: buckets 0, 1, 2, 3.
fn topo() -> Topology {
    test_topology(
        2,
        4,
        "[tables.t_s]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
         slots = [{ slots = \"0-511\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds1\" }]\n\
         salt = { by = \"v\", buckets = 4 }\n\
         salted = { \"10\" = [\"ds0\", \"ds1\", \"ds2\", \"ds3\"] }\n\
         [tables.t_u]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
         slots = [{ slots = \"0-511\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds1\" }]\n",
    )
}

fn nodes(p: &Plan) -> Vec<usize> {
    match p.source() {
        Plan::Route(t) => vec![t.node],
        Plan::Captured { write, .. } => nodes(write),
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

/// `t_s` with key 10 salted on ds0 alone, its buckets 2-3 moving to ds1 at `step`.
fn moving(step: &str) -> Topology {
    test_topology(
        2,
        4,
        &format!(
            "[tables.t_s]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
             slots = [{{ slots = \"0-511\", node = \"ds0\" }}, {{ slots = \"512-1023\", node = \"ds1\" }}]\n\
             salt = {{ by = \"v\", buckets = 4 }}\n\
             salted = {{ \"10\" = [\"ds0\"] }}\n\
             salted_moving = [{{ key = \"10\", buckets = \"2-3\", node = \"ds0\", to = \"ds1\", step = \"{step}\" }}]\n"
        ),
    )
}

#[test]
fn buckets_moving_are_read_where_their_step_says_and_their_copies_are_hidden() {
    let hidden = "CRC32(`t_s`.`v`) % 4 BETWEEN 2 AND 3";
    // Before the cutover every bucket is read on ds0: the copies on ds1 are not read.
    let p = plan_in(&moving("capture"), "SELECT * FROM t_s WHERE id = 10", &[]);
    assert_eq!(nodes(&p), vec![0]);
    // After it, buckets 2-3 are read on ds1, and ds0's left-overs are hidden.
    let p = plan_in(&moving("cleanup"), "SELECT * FROM t_s WHERE id = 10", &[]);
    let s = super::moving_tests::scattered(p.source());
    assert_eq!(s.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1]);
    assert!(s[0].1.contains(hidden), "{}", s[0].1);
    assert!(!s[1].1.contains("CRC32"), "{}", s[1].1);
    // A read pinned to bucket 2 (`v = 7`) reads ds1 alone once it owns it.
    let p = plan_in(
        &moving("cleanup"),
        "SELECT * FROM t_s WHERE id = 10 AND v = 7",
        &[],
    );
    assert_eq!(nodes(&p), vec![1]);
}

#[test]
fn writes_to_a_salted_key_whose_buckets_move_run_where_the_rows_are_owned() {
    // At the capture the source owns every bucket: the write runs there, counted toward ds1.
    let p = plan_in(
        &moving("capture"),
        "UPDATE t_s SET x = 1 WHERE id = 10",
        &[],
    );
    let Plan::Captured { targets, write } = &p else {
        panic!("expected a captured write, got {p:?}")
    };
    assert_eq!((targets.as_slice(), nodes(write)), (&[1usize][..], vec![0]));
    // After the cutover: on both, ds0's copies of buckets 2-3 left alone.
    let p = plan_in(
        &moving("cleanup"),
        "UPDATE t_s SET x = 1 WHERE id = 10",
        &[],
    );
    let s = super::moving_tests::scattered(p.source());
    assert_eq!(s.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1]);
    assert!(
        s[0].1
            .contains("CRC32(`t_s`.`v`) % 4 BETWEEN 2 AND 3)) IS NOT TRUE"),
        "{}",
        s[0].1
    );
    // A row of a moving bucket inserted at the capture goes to the source.
    let p = plan_in(
        &moving("capture"),
        "INSERT INTO t_s (id, v) VALUES (10, 7)",
        &[],
    );
    assert_eq!(nodes(&p), vec![0]);
    let p = plan_in(
        &moving("cleanup"),
        "INSERT INTO t_s (id, v) VALUES (10, 7)",
        &[],
    );
    assert_eq!(nodes(&p), vec![1]);
}
