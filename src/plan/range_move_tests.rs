//! Plans over a range table while one of its ranges moves (`MIGRATE RANGE`): the same rules
//! as a moving slot's, the moving rows told apart by their key's range.

use super::tests::plan_in;
use super::*;
use crate::config::test_topology;

/// `t_r` on `id`: `[-inf, 100)` on ds0, `[100, 200)` moving from ds1 to ds2 at `step`,
/// `[200, +inf)` on ds1.
fn topo(step: &str) -> crate::config::Topology {
    test_topology(
        2,
        3,
        &format!(
            "[tables.t_r]\nrule = \"range\"\ncolumn = \"id\"\n\
             ranges = [{{ below = 100, node = \"ds0\" }}, {{ below = 200, node = \"ds1\", to = \"ds2\", step = \"{step}\" }}, {{ node = \"ds1\" }}]\n"
        ),
    )
}

fn route(p: &Plan) -> (usize, &str) {
    match p {
        Plan::Route(t) => (t.node, t.sql.as_str()),
        other => panic!("expected a route, got {other:?}"),
    }
}

#[test]
fn a_captured_range_move_writes_its_source_counted_toward_its_target() {
    let t = topo("capture");
    let Plan::Captured { targets, write } =
        plan_in(&t, "UPDATE t_r SET v = v + 1 WHERE id = 150", &[])
    else {
        panic!("captured")
    };
    assert_eq!(targets, [2]);
    assert_eq!(route(&write).0, 1);
    let p = plan_in(
        &t,
        "INSERT INTO t_r (id, v) VALUES (?, 1)",
        &[Value::Int(120)],
    );
    assert!(
        matches!(p, Plan::Captured { ref targets, .. } if targets[..] == [2]),
        "{p:?}"
    );
    // Keys of other ranges: as with no move.
    assert_eq!(
        route(&plan_in(&t, "UPDATE t_r SET v = 1 WHERE id = 250", &[])),
        (1, "UPDATE t_r SET v = 1 WHERE id = 250")
    );
    assert_eq!(
        route(&plan_in(&t, "SELECT v FROM t_r WHERE id = 50", &[])).0,
        0
    );
    // A point read stays on the source; a scatter reads each range where reads go: not
    // on the target, whose copies are not the answer yet.
    assert_eq!(
        route(&plan_in(&t, "SELECT v FROM t_r WHERE id = 150", &[])).0,
        1
    );
    let Plan::Scatter { targets, .. } = plan_in(&t, "SELECT * FROM t_r WHERE v > 1", &[]) else {
        panic!("a scatter")
    };
    let nodes: Vec<usize> = targets.iter().map(|x| x.node).collect();
    assert_eq!(nodes, [0, 1]);
    // A write over any rows: the same nodes, counted toward the target.
    let Plan::Captured { targets, write } = plan_in(&t, "DELETE FROM t_r WHERE v = 3", &[]) else {
        panic!("captured")
    };
    assert_eq!(targets, [2]);
    assert!(matches!(write.as_ref(), Plan::Scatter { targets, .. } if targets.len() == 2));
    // At the cleanup the target answers for the range, and the source, which holds other
    // ranges, has the copies left out.
    let t = topo("cleanup");
    let Plan::Scatter { targets, .. } = plan_in(&t, "SELECT * FROM t_r WHERE v > 1", &[]) else {
        panic!("a scatter")
    };
    let on = |n: usize| targets.iter().find(|x| x.node == n).map(|x| x.sql.clone());
    assert_eq!(on(2).as_deref(), Some("SELECT * FROM t_r WHERE v > 1"));
    assert_eq!(
        on(1).as_deref(),
        Some(
            "SELECT * FROM t_r WHERE (v > 1) AND (NOT ((`t_r`.`id` >= 100 AND `t_r`.`id` < 200)))"
        )
    );
    let Plan::Scatter { targets, .. } = plan_in(&t, "DELETE FROM t_r WHERE v = 3", &[]) else {
        panic!("a scatter")
    };
    let on1 = targets.iter().find(|x| x.node == 1).map(|x| x.sql.as_str());
    assert_eq!(
        on1,
        Some("DELETE FROM t_r WHERE (v = 3) AND ((`t_r`.`id` >= 100 AND `t_r`.`id` < 200)) IS NOT TRUE")
    );
}

#[test]
fn a_range_move_by_row_images_dual_writes_its_keys_and_refuses_unpinned_writes() {
    let t = topo("dual_write");
    let p = plan_in(&t, "UPDATE t_r SET v = 2 WHERE id = 150", &[]);
    let Plan::DualWrite(d) = p else {
        panic!("a dual write: {p:?}")
    };
    assert_eq!((d.source, d.target), (1, 2));
    // An INSERT whose rows are in and out of the moving range: written apart.
    let m = super::tests::refused(&plan_in(
        &t,
        "INSERT INTO t_r (id, v) VALUES (150, 1), (250, 1)",
        &[],
    ))
    .to_string();
    assert!(m.contains("both among the moving rows and outside"), "{m}");
    let m = super::tests::refused(&plan_in(&t, "DELETE FROM t_r WHERE v = 3", &[])).to_string();
    assert!(m.contains("must pin its routing key"), "{m}");
    // From read_target on, the range's reads are the target's; at cleanup, everything.
    let t = topo("read_target");
    assert_eq!(
        route(&plan_in(&t, "SELECT v FROM t_r WHERE id = 150", &[])).0,
        2
    );
    let t = topo("cleanup");
    assert_eq!(
        route(&plan_in(&t, "UPDATE t_r SET v = 1 WHERE id = 150", &[])).0,
        2
    );
}

#[test]
fn a_cached_point_statement_of_a_moving_range_resolves_as_the_planner_does() {
    let t = topo("capture");
    let parsed = crate::sql::parse("UPDATE t_r SET v = v + 1 WHERE id = ?").unwrap();
    let k = super::cached::analyze(&parsed, &t).expect("a point statement");
    let r = k.resolve(&t, &[Value::Int(150)]).expect("resolved");
    assert_eq!((r.node, r.slot, r.captured), (1, Some(1), Some(2)));
    let r = k.resolve(&t, &[Value::Int(250)]).expect("resolved");
    assert_eq!((r.node, r.slot, r.captured), (1, Some(2), None));
    // Other steps' writes are planned in full.
    assert!(k.resolve(&topo("dual_write"), &[Value::Int(150)]).is_none());
}
