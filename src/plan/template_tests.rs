//! Kept join plans (`template`): a plan kept from one execution, given another's literals of
//! the same signature, is exactly the plan the planner makes for them.

use super::template::{marked, signature, tables, Sig, Template};
use super::tests::{keys_on_both, node_of, plan_traced_in, topo};
use super::Plan;
use crate::sql::digest::digest;

/// The template of `sql`'s plan (its first execution), if one is kept.
fn kept(sql: &str) -> Option<Template> {
    let t = topo();
    let d = digest(sql)?;
    let parsed = crate::sql::parse(sql).ok()?;
    let tables = tables(&parsed.stmt, &t)?;
    let sig = signature(sql, &d, &t, &tables)?;
    let (text, markers) = marked(sql, &d, &sig)?;
    let first = plan_traced_in(&t, sql, &[]);
    let made = plan_traced_in(&t, &text, &[]);
    Template::agreed(sql, &d, sig, markers, made, (&first.0, &first.1))
}

/// For each of `shapes` (a statement of `{a}` and `{b}`), kept from a first execution, every
/// other execution of the same signature is planned alike; returns how many there were.
fn holds(shape: &str) -> usize {
    let t = topo();
    let fill = |a: i64, b: i64| {
        shape
            .replace("{a}", &a.to_string())
            .replace("{b}", &b.to_string())
    };
    let mut served = 0;
    let (x, y) = keys_on_both();
    for (a0, b0) in [(x, y), (y, x), (x, x), (y, y)] {
        let first = fill(a0, b0);
        let tables = tables(&crate::sql::parse(&first).unwrap().stmt, &t).unwrap();
        // (Pinned to one node, a statement is no read across placements.)
        let Some(template) = kept(&first) else {
            continue;
        };
        for a in 1..60 {
            for b in [1, 2, 5, 9, 33] {
                let sql = fill(a, b);
                let d = digest(&sql).unwrap();
                if signature(&sql, &d, &t, &tables).as_ref() != Some(&template.sig) {
                    continue;
                }
                served += 1;
                let (plan, traced) = template.instantiate(&sql, &d).unwrap();
                let (want, want_traced) = plan_traced_in(&t, &sql, &[]);
                assert_eq!(plan, want, "{sql}, kept from {first}");
                assert_eq!(traced.len(), want_traced.len(), "{sql}");
                for (x, y) in traced.iter().zip(&want_traced) {
                    assert_eq!(
                        (&x.table, x.slot, &x.key),
                        (&y.table, y.slot, &y.key),
                        "{sql}"
                    );
                }
            }
        }
    }
    served
}

#[test]
fn a_kept_join_plan_is_the_plan_of_every_execution_of_its_signature() {
    for shape in [
        // Spread to the inner table's nodes, under a merge.
        "SELECT o.order_id, i.x FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = {a} ORDER BY o.order_id",
        // A LIMIT is served as written; a string compared to a column carried through.
        "SELECT o.order_id, i.x FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = {a} AND o.status = 'new{b}' ORDER BY o.order_id LIMIT 5",
        // The inner table pinned too.
        "SELECT o.order_id, i.x FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = {a} AND i.user_id = {b}",
        // Gathered with a single table's rows; an IN list.
        "SELECT o.order_id, m.name FROM t_order o JOIN t_merchant m ON m.id = o.status WHERE o.user_id IN ({a}, {b}) AND m.kind = {b}",
        // Aggregates over a spread join.
        "SELECT COUNT(*), SUM(i.x) FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = {a} AND i.x > {b}",
    ] {
        assert!(holds(shape) > 20, "{shape}: too few executions of its signatures");
    }
}

#[test]
fn literals_that_decide_more_than_a_node_are_served_as_written() {
    let t = topo();
    let sql = "SELECT o.order_id FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = 5 AND o.status = -3 AND i.x = 1.5 ORDER BY o.order_id LIMIT 10, 20";
    let d = digest(sql).unwrap();
    let sig = signature(sql, &d, &t, &["t_order".to_string()]).unwrap();
    let exact: Vec<_> = sig
        .iter()
        .filter_map(|s| match s {
            Sig::Exact(t) => Some(t.as_str()),
            Sig::Slot { .. } => None,
        })
        .collect();
    assert_eq!(exact, ["3", "1.5", "10", "20"]);
    assert_eq!(
        sig[0],
        Sig::Slot {
            string: false,
            nodes: vec![node_of(5)]
        }
    );
    // The markers are in the literals' slots, so the marked statement routes alike.
    let (text, markers) = marked(sql, &d, &sig).unwrap();
    let m = markers[0].as_deref().unwrap();
    assert!(text.contains(&format!("o.user_id = {m} AND")), "{text}");
    assert_eq!(
        crate::routing::slot::slot_of_text(m.as_bytes()),
        crate::routing::slot::slot_of_text(b"5")
    );
    assert!(text.ends_with("LIMIT 10, 20"), "{text}");
}

#[test]
fn only_tables_routed_by_slot_broadcast_or_single_keep_plans() {
    let t = topo();
    let names = |sql: &str| tables(&crate::sql::parse(sql).unwrap().stmt, &t);
    assert_eq!(
        names("SELECT * FROM t_order o JOIN t_country c ON c.id = o.status JOIN t_merchant m ON m.id = o.status"),
        Some(vec!["t_order".to_string()])
    );
    let ranged = crate::config::test_topology(
        1,
        2,
        "[tables.t_order]\nrule = \"hash_slot\"\ncolumn = \"user_id\"\nslots = [{ slots = \"0-1023\", node = \"ds0\" }]\n\
         [tables.t_item]\nrule = \"range\"\ncolumn = \"user_id\"\n\
         ranges = [{ below = 100, node = \"ds0\" }, { node = \"ds1\" }]\n",
    );
    let sql = "SELECT o.order_id FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = 5";
    assert_eq!(tables(&crate::sql::parse(sql).unwrap().stmt, &ranged), None);
}

#[test]
fn a_plan_the_markers_do_not_give_back_is_not_kept() {
    // Not a read across placements: nothing to keep.
    assert!(kept("SELECT * FROM t_order WHERE user_id = 5").is_none());
    // A kept one gives back its own plan.
    let sql = "SELECT o.order_id, i.x FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = 5";
    let t = kept(sql).unwrap();
    let d = digest(sql).unwrap();
    let (p, _) = t.instantiate(sql, &d).unwrap();
    assert!(matches!(p, Plan::Spread(_)), "{p:?}");
    assert_eq!(p, plan_traced_in(&topo(), sql, &[]).0);
}
