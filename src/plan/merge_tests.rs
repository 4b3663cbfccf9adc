//! The merge nodes the planner puts over a scatter: ordered merges, aggregates rewritten for
//! the merge, grouped streams, wildcard positions.

use super::*;

use super::tests::*;

/// The merge nodes of a plan tree, flattened for the checks below.
#[derive(Debug, Default)]
pub(crate) struct Merge {
    pub hidden: usize,
    pub from_end: bool,
    pub offset: u64,
    pub limit: Option<u64>,
    /// The MergeSort's keys, or the in-memory sort's.
    pub order: Vec<crate::merge::SortKey>,
    pub group: Option<crate::merge::Grouping>,
    pub having: Option<crate::merge::Cond>,
    pub distinct: bool,
    /// Groups merged as they stream past, sorted.
    pub streamed: bool,
    /// Every row held and merged in memory.
    pub in_memory: bool,
}

pub(crate) fn merge_of(plan: &Plan) -> Merge {
    use crate::merge::Aggregate;
    let mut m = Merge::default();
    let mut p = plan;
    while let Some(input) = p.input() {
        match p {
            Plan::Project {
                hidden, from_end, ..
            } => (m.hidden, m.from_end) = (*hidden, *from_end),
            Plan::Limit { offset, limit, .. } => (m.offset, m.limit) = (*offset, *limit),
            Plan::MergeSort { keys, .. } => m.order = keys.clone(),
            Plan::Aggregate { agg, .. } => match agg.as_ref() {
                Aggregate::Streamed { grouping, having } => {
                    m.streamed = true;
                    m.group = Some(grouping.clone());
                    m.having = having.clone();
                }
                Aggregate::InMemory(a) => {
                    m.in_memory = true;
                    m.group = a.grouping.clone();
                    m.having = a.having.clone();
                    m.distinct = a.distinct;
                    m.order = a.order.clone();
                }
            },
            _ => {}
        }
        p = input;
    }
    m
}

/// Is `plan` a scatter with merge nodes above it?
pub(super) fn is_merged(plan: &Plan) -> bool {
    plan.input().is_some() && matches!(plan.source(), Plan::Scatter { .. })
}

fn merged(sql: &str) -> (String, Merge) {
    let plan = plan_of(sql);
    match plan.source() {
        Plan::Scatter { targets, .. } if is_merged(&plan) => {
            (targets[0].sql.clone(), merge_of(&plan))
        }
        _ => panic!("{sql}: {plan:?}"),
    }
}

#[test]
fn ordered_merges_push_offset_plus_count_to_the_nodes() {
    let (sql, m) =
        merged("SELECT order_id, status FROM t_order ORDER BY created DESC, 1 LIMIT 10, 20");
    assert_eq!(
        sql,
        "SELECT order_id, status, created AS __sp_h0 FROM t_order ORDER BY created DESC, 1 LIMIT 30"
    );
    assert_eq!(m.hidden, 1);
    assert_eq!(
        m.order,
        vec![
            crate::merge::SortKey {
                index: 2,
                desc: true,
                fixed: false,
            },
            crate::merge::SortKey {
                index: 0,
                desc: false,
                fixed: false,
            }
        ]
    );
    assert_eq!((m.offset, m.limit), (10, Some(20)));
    let (sql, m) = merged("SELECT * FROM t_order ORDER BY order_id LIMIT 5 OFFSET 2");
    assert_eq!(
        sql,
        "SELECT *, order_id AS __sp_h0 FROM t_order ORDER BY order_id LIMIT 7"
    );
    assert!(m.from_end);
    let p = plan_with(
        "SELECT order_id FROM t_order WHERE status = ? ORDER BY order_id LIMIT ?, ?",
        &[Value::Bytes(b"a\\b".to_vec()), Value::Int(1), Value::Int(2)],
    );
    // The nodes get the statement's `?` with their values (one statement each node prepares
    // for every execution); the LIMIT's are the merge's own number.
    let t = first_target(&p);
    assert_eq!(
        t.sql,
        "SELECT order_id FROM t_order WHERE status = ? ORDER BY order_id LIMIT 3"
    );
    assert_eq!(t.params, vec![Value::Bytes(b"a\\b".to_vec())]);
    // A `?` copied into a hidden column takes its place among the others, in order.
    let p = plan_with(
        "SELECT order_id FROM t_order WHERE status = ? ORDER BY user_id + ?, order_id LIMIT ?",
        &[Value::Bytes(b"s".to_vec()), Value::Int(7), Value::Int(2)],
    );
    let t = first_target(&p);
    assert_eq!(
        t.sql,
        "SELECT order_id, user_id + ? AS __sp_h0 FROM t_order WHERE status = ? ORDER BY user_id + ?, order_id LIMIT 2"
    );
    assert_eq!(
        t.params,
        vec![Value::Int(7), Value::Bytes(b"s".to_vec()), Value::Int(7)]
    );
}

/// The first node's statement of a scatter.
fn first_target(p: &Plan) -> &Target {
    match p.source() {
        Plan::Scatter { targets, .. } => &targets[0],
        other => panic!("not a scatter: {other:?}"),
    }
}

#[test]
fn aggregates_are_rewritten_for_the_merge() {
    use crate::merge::AggFn;
    let (sql, m) = merged(
        "SELECT status, COUNT(*) AS c, AVG(amount) FROM t_order GROUP BY status HAVING c > 1 ORDER BY c DESC LIMIT 3",
    );
    assert_eq!(
        sql,
        "SELECT status, COUNT(*) AS c, AVG(amount), SUM(amount) AS __sp_h0, COUNT(amount) AS __sp_h1 FROM t_order GROUP BY status HAVING TRUE OR (c > 1)"
    );
    // The node keeps the HAVING for its names only (MariaDB's 1054 for a column neither
    // grouped nor selected); one with a subquery is left out.
    let (sql, _) =
        merged("SELECT status, COUNT(*) FROM t_order GROUP BY status HAVING COUNT(*) > (SELECT 1)");
    assert!(!sql.contains("HAVING"), "{sql}");
    let g = m.group.unwrap();
    assert_eq!(g.keys, vec![0]);
    assert_eq!(
        g.columns,
        vec![
            AggFn::First,
            AggFn::Count,
            AggFn::Avg { sum: 3, count: 4 },
            AggFn::Sum,
            AggFn::Count
        ]
    );
    assert!(m.having.is_some());
    assert_eq!(m.limit, Some(3));
}

#[test]
fn joins_on_equal_shard_keys_of_tables_sharded_alike_run_on_each_node() {
    let (a, _) = keys_on_both();
    let p = plan_of("SELECT * FROM t_order o JOIN t_item i ON o.user_id = i.user_id AND o.order_id = i.order_id");
    assert!(
        matches!(&p, Plan::Scatter { targets, .. } if targets.len() == 2),
        "{p:?}"
    );
    let p = plan_of("SELECT * FROM t_order JOIN t_item USING (user_id)");
    assert!(
        matches!(&p, Plan::Scatter { targets, .. } if targets.len() == 2),
        "{p:?}"
    );
    // One side pinned: the join runs whole on that node.
    let p = plan_of(&format!(
        "SELECT * FROM t_order o LEFT JOIN t_item i ON i.user_id = o.user_id WHERE o.user_id = {a}"
    ));
    assert_eq!(p.nodes(), vec![0]);
    // A correlated subquery on the shard key is co-located too.
    let p = plan_of(
        "SELECT o.order_id FROM t_order o WHERE EXISTS (SELECT 1 FROM t_item i WHERE i.user_id = o.user_id) ORDER BY o.order_id LIMIT 3",
    );
    assert!(is_merged(&p), "{p:?}");
    // A semi-join by the shard keys: each node's rows of a key are all of that key's.
    let p = plan_of(
        "SELECT o.order_id FROM t_order o WHERE o.user_id IN (SELECT i.user_id FROM t_item i WHERE i.qty > 2) ORDER BY o.order_id",
    );
    assert!(is_merged(&p), "{p:?}");
    for sql in [
        // NOT IN: a NULL key on another node makes a miss NULL, which NOT turns to NULL.
        "SELECT o.order_id FROM t_order o WHERE o.user_id NOT IN (SELECT i.user_id FROM t_item i)",
        // Outside a conjunct of the WHERE, a miss's NULL and false differ.
        "SELECT o.order_id FROM t_order o WHERE o.status = 'x' OR o.user_id IN (SELECT i.user_id FROM t_item i)",
        "SELECT o.user_id IN (SELECT i.user_id FROM t_item i) FROM t_order o",
        // Groups of another column span the nodes.
        "SELECT o.order_id FROM t_order o WHERE o.user_id IN (SELECT i.user_id FROM t_item i GROUP BY i.qty)",
        // Another column than the key.
        "SELECT o.order_id FROM t_order o WHERE o.user_id IN (SELECT i.order_id FROM t_item i)",
    ] {
        assert!(gathered(&plan_of(sql)).contains("different nodes"), "{sql}");
    }
    // Not on the shard keys: gathered.
    let p = plan_of("SELECT * FROM t_order o JOIN t_item i ON o.order_id = i.order_id");
    assert!(gathered(&p).contains("different nodes"));
    let p = plan_of("SELECT * FROM t_order o JOIN t_item i ON o.user_id = i.order_id");
    assert!(gathered(&p).contains("different nodes"));
}

#[test]
fn groups_stream_when_the_nodes_can_sort_them() {
    let (sql, m) = merged("SELECT status, COUNT(*) FROM t_order GROUP BY status LIMIT 2");
    assert_eq!(
        sql,
        "SELECT status, COUNT(*) FROM t_order GROUP BY status ORDER BY 1 ASC"
    );
    assert!(m.streamed && !m.in_memory);
    // Ordered by something else: the groups are hashed and sorted after the merge.
    let (_, m) = merged("SELECT status, COUNT(*) FROM t_order GROUP BY status ORDER BY 2");
    assert!(!m.streamed && m.in_memory);
    // DISTINCT aggregates make the nodes group by their argument too.
    let (sql, m) = merged("SELECT status, COUNT(DISTINCT user_id) FROM t_order GROUP BY status");
    assert_eq!(
        sql,
        "SELECT status, COUNT(DISTINCT user_id), user_id AS __sp_h0 FROM t_order GROUP BY status, user_id"
    );
    assert!(m.in_memory);
    // A DISTINCT constant: the nodes must not group by it as a column position.
    for (arg, by) in [
        ("76", "76 + 0"),
        ("- 8", "- 8 + 0"),
        ("(7)", "(7) + 0"),
        ("'a'", "'a'"),
    ] {
        let (sql, _) = merged(&format!("SELECT SUM(DISTINCT {arg}) FROM t_order"));
        assert_eq!(
            sql,
            format!("SELECT SUM(DISTINCT {arg}), {arg} AS __sp_h0 FROM t_order GROUP BY {by}")
        );
    }
    // COUNT(DISTINCT a, b): the nodes group by both; the merge counts distinct pairs.
    let (sql, m) = merged("SELECT COUNT(DISTINCT status, user_id) FROM t_order");
    assert_eq!(
        sql,
        "SELECT COUNT(DISTINCT status, user_id), status AS __sp_h0, user_id AS __sp_h1 FROM t_order GROUP BY status, user_id"
    );
    let g = m.group.as_ref().expect("grouped");
    assert_eq!(
        g.columns[0],
        crate::merge::AggFn::Distinct {
            arg: 1,
            also: vec![2],
            kind: crate::merge::DistinctKind::Count
        }
    );
}

#[test]
fn wildcard_positions_are_columns_of_the_nodes_rows() {
    let (sql, m) = merged("SELECT * FROM t_order o ORDER BY o.order_id, 2 DESC");
    assert_eq!(
        sql,
        "SELECT *, o.order_id AS __sp_h0 FROM t_order o ORDER BY o.order_id, 2 DESC"
    );
    assert_eq!(
        m.order[1],
        crate::merge::SortKey {
            index: 1,
            desc: true,
            fixed: true
        }
    );
    // With 5 columns from the nodes: the hidden key is column 5, position 2 stays column 1.
    let r = crate::merge::resolve_keys(&m.order, 6 - m.hidden);
    assert_eq!((r[0].index, r[1].index), (5, 1));
    let (_, m) = merged("SELECT DISTINCT * FROM t_order ORDER BY order_id");
    assert!(m.distinct && m.from_end);
}

#[test]
fn items_beside_a_wildcard_are_compared_by_hidden_columns_at_the_end() {
    // An alias is its item's expression, hidden; a position counts in the expanded list.
    let (sql, m) =
        merged("SELECT o.*, o.user_id * 2 AS dbl FROM t_order o ORDER BY dbl DESC, 1 LIMIT 3");
    assert_eq!(
        sql,
        "SELECT o.*, o.user_id * 2 AS dbl, o.user_id * 2 AS __sp_h0 FROM t_order o ORDER BY dbl DESC, 1 LIMIT 3"
    );
    assert!(m.from_end);
    assert_eq!(m.hidden, 1);
    let r = crate::merge::resolve_keys(&m.order, 5 - m.hidden);
    assert_eq!((r[0].index, r[0].desc, r[1].index), (4, true, 0));
    // Over a join on equal shard keys: qualified names merge; a bare one, which MariaDB
    // looks up among the wildcard's columns first (`o.*`: o's status), is not a hidden
    // column's to resolve.
    let (sql, _) = merged(
        "SELECT o.*, i.order_id AS item FROM t_order o JOIN t_item i ON i.user_id = o.user_id ORDER BY o.status",
    );
    assert!(sql.ends_with("o.status AS __sp_h0 FROM t_order o JOIN t_item i ON i.user_id = o.user_id ORDER BY o.status"), "{sql}");
    let p = plan_of(
        "SELECT o.*, i.order_id AS item FROM t_order o JOIN t_item i ON i.user_id = o.user_id ORDER BY status",
    );
    assert!(!is_merged(&p), "{p:?}");
    // One table: a bare name is its own.
    let (sql, _) = merged("SELECT *, 1 AS one FROM t_order ORDER BY status");
    assert_eq!(
        sql,
        "SELECT *, 1 AS one, status AS __sp_h0 FROM t_order ORDER BY status"
    );
}
