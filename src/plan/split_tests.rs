//! Keys split out of their slot (`MIGRATE KEY` on a hash_slot table): routed to their own
//! node, left out of their slot's moves, and moved like a directory's tenant.

use super::tests::{plan_in, refused};
use super::*;
use crate::config::test_topology;

/// `t_s` on `id`: slots 0-511 on ds0 (or moving to ds3 at `slot_step`), 512-1023 on ds1;
/// key 10 (slot 481) placed by `keys`. `t_u` has the same slots and no split key.
fn topo(slot_step: Option<&str>, keys: &str) -> Topology {
    let low = match slot_step {
        Some(step) => {
            format!("{{ slots = \"0-511\", node = \"ds0\", to = \"ds3\", step = \"{step}\" }}")
        }
        None => "{ slots = \"0-511\", node = \"ds0\" }".into(),
    };
    test_topology(
        2,
        4,
        &format!(
            "[tables.t_s]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
             slots = [{low}, {{ slots = \"512-1023\", node = \"ds1\" }}]\n{keys}\n\
             [tables.t_u]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
             slots = [{low}, {{ slots = \"512-1023\", node = \"ds1\" }}]\n"
        ),
    )
}

fn node(p: &Plan) -> usize {
    match p.source() {
        Plan::Route(t) => t.node,
        other => panic!("expected a route, got {other:?}"),
    }
}

/// Each node of a scatter and its statement.
fn scattered(p: &Plan) -> Vec<(usize, String)> {
    super::moving_tests::scattered(p.source())
}

#[test]
fn a_split_key_is_read_and_written_on_its_own_node() {
    assert_eq!(crate::routing::slot::slot_of(&Value::Int(10)), Some(481));
    let t = topo(None, "entries = { \"10\" = \"ds2\" }");
    for (sql, params) in [
        ("SELECT * FROM t_s WHERE id = 10", vec![]),
        ("SELECT * FROM t_s WHERE id = '10'", vec![]),
        ("SELECT * FROM t_s WHERE id = ?", vec![Value::Int(10)]),
        ("UPDATE t_s SET v = 1 WHERE id = 10", vec![]),
        ("INSERT INTO t_s VALUES (10, 1)", vec![]),
    ] {
        assert_eq!(node(&plan_in(&t, sql, &params)), 2, "{sql}");
    }
    // Its slot's other keys stay with the slot.
    let other = (11..)
        .find(|k| crate::routing::slot::slot_of(&Value::Int(*k)) == Some(481))
        .unwrap_or(0);
    let sql = format!("SELECT * FROM t_s WHERE id = {other}");
    assert_eq!(node(&plan_in(&t, &sql, &[])), 0);
    // A read of every row reads its node too; a read of two keys, both nodes.
    let all: Vec<usize> = scattered(&plan_in(&t, "SELECT COUNT(*) FROM t_s", &[]))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(all, vec![0, 1, 2]);
    let two = plan_in(
        &t,
        &format!("DELETE FROM t_s WHERE id IN (10, {other})"),
        &[],
    );
    let two: Vec<usize> = scattered(&two).into_iter().map(|(n, _)| n).collect();
    assert_eq!(two, vec![0, 2]);
}

#[test]
fn tables_with_other_split_keys_are_not_joined_on_each_node() {
    let t = topo(None, "entries = { \"10\" = \"ds2\" }");
    // Joined node by node, ds2's `t_s` row 10 would meet no `t_u` row.
    let p = plan_in(&t, "SELECT * FROM t_s JOIN t_u ON t_u.id = t_s.id", &[]);
    assert!(
        !matches!(p.source(), Plan::Scatter { .. } | Plan::Route(_)),
        "{p:?}"
    );
}

#[test]
fn a_slot_range_moves_without_its_split_keys() {
    // Slots 0-511 move to ds3; key 10 stays on ds3 itself, where the target's copies are
    // left out of reads: its rows must not be.
    let t = topo(Some("dual_write"), "entries = { \"10\" = \"ds3\" }");
    assert_eq!(
        node(&plan_in(&t, "UPDATE t_s SET v = 1 WHERE id = 10", &[])),
        3
    );
    let on3 = scattered(&plan_in(&t, "SELECT COUNT(*) FROM t_s", &[]))
        .into_iter()
        .find(|(n, _)| *n == 3)
        .map(|(_, sql)| sql);
    assert_eq!(
        on3.as_deref(),
        Some(
            "SELECT COUNT(*) FROM t_s WHERE (NOT ((CRC32(`t_s`.`id`) % 1024 BETWEEN 0 AND 511 AND CAST(`t_s`.`id` AS BINARY) NOT IN ('10'))))"
        )
    );
    // The slot's other keys are written on both ends.
    let p = plan_in(&t, "UPDATE t_s SET v = 1 WHERE id = 11", &[]);
    assert!(matches!(p.source(), Plan::DualWrite(_)), "{p:?}");
}

#[test]
fn a_split_key_moves_like_a_directory_tenant() {
    let t = topo(
        None,
        "moving = [{ key = \"10\", node = \"ds0\", to = \"ds2\", step = \"dual_write\" }]",
    );
    let p = plan_in(&t, "UPDATE t_s SET v = 1 WHERE id = 10", &[]);
    let Plan::DualWrite(d) = p.source() else {
        panic!("a dual write: {p:?}")
    };
    assert_eq!((d.source, d.target), (0, 2));
    assert_eq!(
        node(&plan_in(&t, "SELECT * FROM t_s WHERE id = 10", &[])),
        0
    );
    let on2 = scattered(&plan_in(&t, "SELECT COUNT(*) FROM t_s", &[]))
        .into_iter()
        .find(|(n, _)| *n == 2)
        .map(|(_, sql)| sql);
    assert_eq!(
        on2.as_deref(),
        Some(
            "SELECT COUNT(*) FROM t_s WHERE (NOT ((`t_s`.`id` = '10' AND CAST(`t_s`.`id` AS BINARY) = '10')))"
        )
    );
    // A write over the key and others cannot be made right while it moves.
    let m = refused(&plan_in(&t, "DELETE FROM t_s WHERE id IN (10, 11)", &[])).to_string();
    assert!(!m.is_empty());
}
