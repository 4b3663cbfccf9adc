//! Kept join plans (`template`): a plan kept from one execution, given another's literals of
//! the same signature, is exactly the plan the planner makes for them.

use super::template::{markers, signature, tables, Kind, Lits, Sig, Template};
use super::tests::{keys_on_both, node_of, plan_traced_in, topo};
use super::Plan;
use crate::sql::digest::digest;
use mysql_common::value::Value;

/// The template of `sql`'s plan (its first execution), if one is kept.
fn kept(sql: &str) -> Option<Template> {
    let t = topo();
    let d = digest(sql)?;
    let lits = Lits::of_text(sql, &d)?;
    let parsed = crate::sql::parse(sql).ok()?;
    let tables = tables(&parsed.stmt, &t)?;
    let sig = signature(sql, &lits, &t, &tables)?;
    let m = markers(&lits, &sig, "utf8mb4")?;
    let text = m.marked_text(sql, &lits)?;
    let first = plan_traced_in(&t, sql, &[]);
    let made = plan_traced_in(&t, &text, &[]);
    Template::agreed(&lits, sig, m, made, (&first.0, &first.1))
}

/// The template of a prepared `sql`'s plan for `params`, if one is kept.
fn kept_prepared(sql: &str, params: &[Value]) -> Option<Template> {
    let t = topo();
    let lits = Lits::of_params(sql, crate::sql::lex::Mode::default(), params, "utf8mb4")?;
    let parsed = crate::sql::parse(sql).ok()?;
    let tables = tables(&parsed.stmt, &t)?;
    let sig = signature(sql, &lits, &t, &tables)?;
    let m = markers(&lits, &sig, "utf8mb4")?;
    let first = plan_traced_in(&t, sql, params);
    let made = plan_traced_in(&t, sql, &m.marked_params(params));
    Template::agreed(&lits, sig, m, made, (&first.0, &first.1))
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
                let lits = Lits::of_text(&sql, &d).unwrap();
                if signature(&sql, &lits, &t, &tables).as_ref() != Some(&template.sig) {
                    continue;
                }
                served += 1;
                let (plan, traced) = template.instantiate(&lits).unwrap();
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
    let lits = Lits::of_text(sql, &d).unwrap();
    let sig = signature(sql, &lits, &t, &["t_order".to_string()]).unwrap();
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
            kind: Kind::Int,
            nodes: vec![node_of(5)]
        }
    );
    // The markers are in the literals' slots, so the marked statement routes alike.
    let m = markers(&lits, &sig, "utf8mb4").unwrap();
    let text = m.marked_text(sql, &lits).unwrap();
    let Some(Some(marker)) = m.values.first() else {
        panic!("no marker: {m:?}")
    };
    assert!(
        text.contains(&format!("o.user_id = {} AND", marker.as_sql(false))),
        "{text}"
    );
    assert_eq!(
        crate::routing::slot::slot_of(marker),
        crate::routing::slot::slot_of(&Value::Int(5))
    );
    // A string that is an integer's other text is keyed as the integer: served as written.
    let sql = "SELECT o.order_id FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = '012'";
    let d = digest(sql).unwrap();
    let lits = Lits::of_text(sql, &d).unwrap();
    let sig = signature(sql, &lits, &t, &["t_order".to_string()]).unwrap();
    assert_eq!(sig, [Sig::Exact("'012'".into())]);
    // A number and a string written alike are not one signature.
    let of = |sql: &str| {
        let d = digest(sql).unwrap();
        signature(sql, &Lits::of_text(sql, &d).unwrap(), &t, &[]).unwrap()
    };
    assert_ne!(
        of("SELECT o.order_id FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.status = 1.5"),
        of("SELECT o.order_id FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.status = '1.5'"),
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
    let (p, _) = t.instantiate(&Lits::of_text(sql, &d).unwrap()).unwrap();
    assert!(matches!(p, Plan::Spread(_)), "{p:?}");
    assert_eq!(p, plan_traced_in(&topo(), sql, &[]).0);
}

#[test]
fn a_kept_prepared_join_plan_is_the_plan_of_every_execution_of_its_signature() {
    let t = topo();
    let (x, y) = keys_on_both();
    for sql in [
        "SELECT o.order_id, i.x FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = ? ORDER BY o.order_id",
        "SELECT o.order_id, m.name FROM t_order o JOIN t_merchant m ON m.id = o.status WHERE o.user_id IN (?, ?) AND m.kind = ? ORDER BY o.order_id LIMIT ?",
    ] {
        let n = sql.matches('?').count();
        let mut served = 0;
        // Bound as integers, as strings, as doubles (what a JavaScript driver binds).
        let bind = |vals: &[i64], how: usize| -> Vec<Value> {
            vals.iter()
                .map(|v| match how {
                    0 => Value::Int(*v),
                    1 => Value::Bytes(v.to_string().into_bytes()),
                    _ => Value::Double(*v as f64),
                })
                .collect()
        };
        for how in 0..3 {
            let first = bind(&[x, y, y, 3][..n], how);
            let Some(template) = kept_prepared(sql, &first) else {
                panic!("not kept: {sql} {first:?}");
            };
            let tables = tables(&crate::sql::parse(sql).unwrap().stmt, &t).unwrap();
            for a in 1..200 {
                let params = bind(&[a, a * 7 + 1, a * 13 + 2, 3][..n], how);
                let lits =
                    Lits::of_params(sql, crate::sql::lex::Mode::default(), &params, "utf8mb4")
                        .unwrap();
                if signature(sql, &lits, &t, &tables).as_ref() != Some(&template.sig) {
                    continue;
                }
                served += 1;
                let (plan, _) = template.instantiate(&lits).unwrap();
                assert_eq!(plan, plan_traced_in(&t, sql, &params).0, "{sql} {params:?}");
            }
        }
        assert!(served > 15, "{sql}: {served} executions of its signatures");
    }
}

#[test]
fn a_kept_plan_serves_its_signature_until_its_time_is_up() {
    use super::cache::{Counted, Kept, PlanCache, KEPT_FOR};
    let sql = "SELECT o.order_id, i.x FROM t_order o JOIN t_item i ON i.user_id = o.order_id WHERE o.user_id = 5";
    let t = topo();
    let d = digest(sql).unwrap();
    let lits = Lits::of_text(sql, &d).unwrap();
    let template = kept(sql).unwrap();
    let tables = vec!["t_order".to_string(), "t_item".to_string()];
    let cache = PlanCache::default();
    let e = cache.entry(&d.text).unwrap();
    let keep = |made| {
        e.keep(Some(Kept {
            template: template.clone(),
            version: t.version,
            db: None,
            charset: "utf8mb4".into(),
            epoch: cache.epoch(),
            made,
            tables: tables.clone(),
            prepared: false,
            counted: Counted::new(),
        }))
    };
    let find = |epoch| {
        e.kept_for(false, t.version, None, "utf8mb4", epoch, |tables| {
            signature(sql, &lits, &t, tables)
        })
    };
    keep(std::time::Instant::now());
    assert!(find(cache.epoch()).is_some());
    // Not for a prepared statement, another database's session, or after a DDL.
    assert!(e
        .kept_for(true, t.version, None, "utf8mb4", cache.epoch(), |tables| {
            signature(sql, &lits, &t, tables)
        })
        .is_none());
    assert!(e
        .kept_for(
            false,
            t.version,
            Some("other"),
            "utf8mb4",
            cache.epoch(),
            |tables| { signature(sql, &lits, &t, tables) }
        )
        .is_none());
    cache.forget_kept();
    assert!(find(cache.epoch()).is_none());
    // Past its time it serves no more, and is dropped.
    let past = std::time::Instant::now()
        .checked_sub(KEPT_FOR + std::time::Duration::from_secs(1))
        .unwrap();
    keep(past);
    assert!(e.keeps_any());
    e.prune();
    assert!(!e.keeps_any());
}
