//! Copying a sharded table to every node of another, or gathering both on one node: chosen
//! by the tables' estimated rows (the test context: `t_seq` 100 rows, every other table
//! 1,000,000).

use super::tests::{plan_of, topo};
use super::Plan;

#[test]
fn a_small_sharded_table_is_copied_to_every_node_of_a_large_one() {
    // t_seq (sharded by id) joined by a column of t_order that is not t_order's key: its 100
    // rows go to both of t_order's nodes (200 rows) instead of half of t_order's to one.
    let p = plan_of("SELECT o.order_id, s.v FROM t_order o JOIN t_seq s ON s.id = o.order_id");
    let Plan::Shipped(s) = &p else {
        panic!("expected t_seq copied to t_order's nodes, got {p:?}")
    };
    assert_eq!(s.nodes(), vec![0, 1]);
    let e = s.estimate.expect("weighed");
    assert_eq!((e.ship, e.gather), (200, 500_050), "{e:?}");
    let shown = p.describe(&topo()).to_string();
    assert!(
        shown.contains("about 200 row(s), gathering on one node would copy about 500050"),
        "{shown}"
    );
}

#[test]
fn two_large_tables_are_gathered_rather_than_one_copied_to_every_node() {
    let p =
        plan_of("SELECT o.order_id, i.v FROM t_order o JOIN t_item i ON i.user_id = o.order_id");
    assert!(matches!(p, Plan::Gather(_)), "{p:?}");
}

#[test]
fn without_the_tables_rows_the_plan_asks_for_them_and_offline_gathers() {
    let t = topo();
    let sql = "SELECT o.order_id, s.v FROM t_order o JOIN t_seq s ON s.id = o.order_id";
    let parsed = crate::sql::parse(sql);
    let today = chrono::NaiveDate::from_ymd_opt(2025, 6, 30).unwrap();
    let plan = |statistics: bool| {
        super::with_offline_ctx(&t, today, |ctx| {
            let ctx = super::PlanCtx { statistics, ..*ctx };
            super::plan(sql, parsed.as_ref().map_err(String::as_str), &[], &t, &ctx)
        })
    };
    let p = plan(true);
    assert!(matches!(&p, Plan::NeedRows { .. }), "{p:?}");
    let shown = p.describe(&t).to_string();
    assert!(shown.starts_with("Rows: "), "{shown}");
    // Offline (`route`): the nodes' statistics cannot be read, the tables are gathered.
    assert!(matches!(plan(false), Plan::Gather(_)), "{:?}", plan(false));
}

#[test]
fn a_copy_is_filtered_by_its_own_unqualified_columns_among_other_tables() {
    // t_merchant's `kind` and t_order's `status`, unqualified in a comma join: each copy or
    // read keeps its own; `kind` is t_merchant's alone.
    let p = plan_of(
        "SELECT order_id, name FROM t_order, t_merchant WHERE id = order_id AND kind = 'big' AND status = 'paid'",
    );
    let Plan::Shipped(s) = &p else {
        panic!("expected t_merchant copied to t_order's nodes, got {p:?}")
    };
    let reads = &s.ships[0].reads;
    assert_eq!(
        reads[0].1, "SELECT `t_merchant`.* FROM `t_merchant` AS `t_merchant` WHERE (kind = 'big')",
        "{reads:?}"
    );
}
