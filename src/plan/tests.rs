use super::merge_tests::{is_merged, merge_of};
use super::*;
use crate::config::parse as parse_rules;
use crate::routing::slot::slot_of;

pub(crate) fn topo() -> Topology {
    parse_rules(
        r#"
version = 1
default_node = "ds0"
[server]
listen = "127.0.0.1:3307"
users = [{ name = "app", password = "app" }]
[nodes]
ds0 = "mysql://root:root@127.0.0.1:3311/shop"
ds1 = "mysql://root:root@127.0.0.1:3312/shop"
[tables.t_order]
rule = "hash_slot"
column = "user_id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
[tables.t_item]
rule = "hash_slot"
column = "user_id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
[tables.t_country]
rule = "broadcast"
[tables.t_merchant]
rule = "single"
node = "ds1"
[tables.t_seq]
rule = "hash_slot"
column = "id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
key_generator = { column = "id", kind = "sequence" }
"#,
        "test.toml",
    )
    .unwrap()
}

pub(crate) fn node_of(key: i64) -> usize {
    let slot = slot_of(&Value::Int(key)).unwrap();
    usize::from(slot >= 512)
}

/// Two keys that land on different nodes.
pub(crate) fn keys_on_both() -> (i64, i64) {
    let a = (1..).find(|k| node_of(*k) == 0).unwrap();
    let b = (1..).find(|k| node_of(*k) == 1).unwrap();
    (a, b)
}

pub(super) fn plan_of(sql: &str) -> Plan {
    plan_with(sql, &[])
}

pub(super) fn plan_with(sql: &str, params: &[Value]) -> Plan {
    let t = topo();
    plan_in(&t, sql, params)
}

thread_local! {
    /// Tables' statistics [`plan_in`] gives (else a million rows, t_seq's 100; no index).
    static STATS: std::cell::RefCell<Vec<(String, estimate::TableStats)>> = Default::default();
    /// Outer reads [`plan_in`] says returned more than their plans took.
    static OVERFLOWED: std::cell::RefCell<Vec<String>> = Default::default();
}

/// `f` planned with these outer reads known to return more than their plans take.
pub(super) fn with_overflowed<R>(reads: &[String], f: impl FnOnce() -> R) -> R {
    OVERFLOWED.with(|o| *o.borrow_mut() = reads.to_vec());
    let r = f();
    OVERFLOWED.with(|o| o.borrow_mut().clear());
    r
}

/// `f` planned with these tables' statistics.
pub(super) fn with_stats<R>(stats: &[(&str, estimate::TableStats)], f: impl FnOnce() -> R) -> R {
    let given = stats
        .iter()
        .map(|(t, s)| (t.to_string(), s.clone()))
        .collect();
    STATS.with(|s| *s.borrow_mut() = given);
    let r = f();
    STATS.with(|s| s.borrow_mut().clear());
    r
}

/// Plans on 2025-06-30 with lookup entries `7 -> ds1`, `8` absent, ids counting from 1000,
/// and the columns of `t_order` known (`order_id, user_id, status`; in schema `shop` too).
pub(crate) fn plan_in(t: &Topology, sql: &str, params: &[Value]) -> Plan {
    plan_traced_in(t, sql, params).0
}

/// [`plan_in`], with the slots the statement was routed to by key.
pub(crate) fn plan_traced_in(t: &Topology, sql: &str, params: &[Value]) -> (Plan, Vec<Traced>) {
    let parsed = crate::sql::parse(sql);
    let lookup = |_: &str, k: &[u8]| match k {
        b"7" => Some(Some(1)),
        b"8" => Some(None),
        _ => None,
    };
    let n = std::cell::Cell::new(1000u64);
    let next_id = |table: &str, slot: u16| {
        if table == "t_seq" {
            // A sequence whose block holds two ids: 7 and 8.
            let next = n.get() + 1;
            n.set(next);
            return if next <= 1002 {
                Ok(next - 1001 + 7)
            } else {
                Err(IdError::NeedBlock)
            };
        }
        n.set(n.get() + 1);
        Ok(n.get() * 10_000 + u64::from(slot))
    };
    let columns = |schema: Option<&str>, t: &str| match (t, schema) {
        ("t_order", None | Some("shop")) => {
            Some(vec!["order_id".to_string(), "user_id".into(), "status".into()].into())
        }
        ("t_merchant", None) => Some(vec!["id".to_string(), "name".into(), "kind".into()].into()),
        ("t_s", None) => Some(vec!["id".to_string(), "v".into()].into()),
        ("t_item", None) => {
            Some(vec!["item_id".to_string(), "order_id".into(), "user_id".into()].into())
        }
        _ => None,
    };
    let primary_key = |_: Option<&str>, t: &str| match t {
        "t_mv" | "t_page" | "t_s" | "t_r" => Some(vec!["`id`".to_string()].into()),
        "t_order" => Some(vec!["`order_id`".to_string()].into()),
        "t_gen" => Some(vec!["`oid`".to_string()].into()),
        "t_dir" => Some(vec!["`id`".to_string()].into()),
        "t_nopk" => Some(Vec::<String>::new().into()),
        _ => None,
    };
    let ctx = PlanCtx {
        today: chrono::NaiveDate::from_ymd_opt(2025, 6, 30).unwrap(),
        lookup: &lookup,
        next_id: &next_id,
        columns: &columns,
        primary_key: &primary_key,
        charset: "utf8mb4",
        rows: &|t: &str| {
            let given = STATS.with(|s| s.borrow().iter().find(|(n, _)| n == t).cloned());
            Some(given.map_or_else(
                || estimate::TableStats::rows(if t == "t_seq" { 100 } else { 1_000_000 }),
                |(_, s)| std::sync::Arc::new(s),
            ))
        },
        overflowed: &|read: &str| OVERFLOWED.with(|o| o.borrow().iter().any(|r| r == read)),
        statistics: true,
        index: &|_: &str, _: &[u8]| None,
        weights: &|_: &str| None,
    };
    plan_traced(
        sql,
        parsed.as_ref().map_err(String::as_str),
        params,
        t,
        &ctx,
    )
}

/// Why a read copies tables (on one node, or to each node of its sharded tables): no node
/// could answer over its own rows.
pub(super) fn gathered(p: &Plan) -> &str {
    match p {
        Plan::Gather(g) => &g.why,
        Plan::Shipped(s) => &s.why,
        other => panic!("expected a read over copies, got {other:?}"),
    }
}

pub(super) fn refused(p: &Plan) -> &str {
    match p {
        Plan::Refuse {
            code: 1235,
            message,
        } => message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn point_reads_go_to_the_keys_node() {
    let (a, b) = keys_on_both();
    assert_eq!(
        plan_of(&format!("SELECT * FROM t_order WHERE user_id = {a}")).nodes(),
        vec![0]
    );
    assert_eq!(
        plan_of(&format!(
            "SELECT * FROM t_order WHERE user_id = {b} ORDER BY x LIMIT 3"
        ))
        .nodes(),
        vec![1]
    );
    assert_eq!(
        plan_with("SELECT * FROM t_order WHERE user_id = ?", &[Value::Int(b)]).nodes(),
        vec![1]
    );
}

#[test]
fn scans_fan_out_and_what_cannot_merge_is_gathered() {
    let p = plan_of("SELECT * FROM t_order WHERE status = 'x'");
    assert!(matches!(&p, Plan::Scatter { targets, .. } if targets.len() == 2));
    let (a, b) = keys_on_both();
    assert_eq!(
        plan_of(&format!(
            "SELECT * FROM t_order WHERE user_id IN ({a}, {b})"
        ))
        .nodes(),
        vec![0, 1]
    );
    for sql in [
        "SELECT * FROM t_order ORDER BY order_id",
        "SELECT * FROM t_order LIMIT 5",
        "SELECT COUNT(*) FROM t_order",
        "SELECT status FROM t_order GROUP BY status",
        "SELECT DISTINCT status FROM t_order",
    ] {
        assert!(is_merged(&plan_of(sql)), "{sql}");
    }
    for (sql, why) in [
        (
            "SELECT user_id FROM t_order UNION SELECT user_id FROM t_order",
            "UNION",
        ),
        (
            "SELECT COUNT(DISTINCT status, user_id), SUM(DISTINCT status, user_id) FROM t_order",
            "argument form",
        ),
        ("SELECT ROUND(SUM(a), 2) FROM t_order", "over aggregate"),
        ("SELECT GROUP_CONCAT(status) FROM t_order", "GROUP_CONCAT"),
        ("SELECT status, ROW_NUMBER() OVER () FROM t_order", "window"),
        ("SELECT * FROM t_order GROUP BY status", "SELECT *"),
    ] {
        let p = plan_of(sql);
        assert!(gathered(&p).contains(why), "{sql}: {p:?}");
    }
}

#[test]
fn joins_run_whole_on_one_node_or_are_gathered() {
    let (a, _) = keys_on_both();
    let p = plan_of(&format!(
        "SELECT * FROM t_order o JOIN t_item i ON o.order_id = i.order_id WHERE o.user_id = {a} AND i.user_id = {a}"
    ));
    assert_eq!(p.nodes(), vec![0]);
    let p = plan_of("SELECT * FROM t_order o JOIN t_item i ON o.order_id = i.order_id");
    assert!(gathered(&p).contains("different nodes"));
    // A broadcast table joins anywhere.
    let p = plan_of("SELECT * FROM t_order o JOIN t_country c ON o.country = c.code");
    assert_eq!(p.nodes(), vec![0, 1]);
    // A single table on ds1 with an unconfigured table on ds0: gathered.
    let p = plan_of("SELECT * FROM t_merchant m JOIN t_user u ON m.id = u.id");
    assert!(gathered(&p).contains("different nodes"));
    assert_eq!(plan_of("SELECT * FROM t_merchant").nodes(), vec![1]);
    assert_eq!(plan_of("SELECT * FROM t_country").nodes(), vec![0]);
    assert!(
        matches!(plan_of("SELECT * FROM t_country"), Plan::AnyCopy { nodes, .. } if nodes == vec![0, 1])
    );
    assert_eq!(plan_of("SELECT * FROM t_user").nodes(), vec![0]);
}

#[test]
fn multi_row_insert_is_split_by_node() {
    let (a, b) = keys_on_both();
    let sql = format!(
        "INSERT INTO t_order (order_id, user_id, note) VALUES (1, {a}, 'x\\'y'), (2, {b}, 'b'), (3, {a}, 'c')"
    );
    match plan_of(&sql) {
        Plan::Scatter { targets, ok, .. } => {
            assert_eq!(ok, OkMerge::Sum);
            assert_eq!(targets.len(), 2);
            assert_eq!(targets[0].node, 0);
            assert_eq!(
                targets[0].sql,
                format!("INSERT INTO t_order (order_id, user_id, note) VALUES (1, {a}, 'x\\'y'), (3, {a}, 'c')")
            );
            assert_eq!(targets[1].node, 1);
            assert_eq!(
                targets[1].sql,
                format!("INSERT INTO t_order (order_id, user_id, note) VALUES (2, {b}, 'b')")
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn prepared_insert_split_keeps_each_rows_parameters() {
    let (a, b) = keys_on_both();
    let sql = "INSERT INTO t_order (order_id, user_id) VALUES (?, ?), (?, ?) ON DUPLICATE KEY UPDATE note = ?";
    let params = [
        Value::Int(1),
        Value::Int(b),
        Value::Int(2),
        Value::Int(a),
        Value::Bytes(b"n".to_vec()),
    ];
    match plan_with(sql, &params) {
        Plan::Scatter { targets, .. } => {
            // The first row's node comes first (it answers LAST_INSERT_ID() afterwards).
            assert_eq!(targets[1].node, 0);
            assert_eq!(
                targets[1].sql,
                "INSERT INTO t_order (order_id, user_id) VALUES (?, ?) ON DUPLICATE KEY UPDATE note = ?"
            );
            assert_eq!(
                targets[1].params,
                vec![Value::Int(2), Value::Int(a), Value::Bytes(b"n".to_vec())]
            );
            assert_eq!(targets[0].node, 1);
            assert_eq!(
                targets[0].params,
                vec![Value::Int(1), Value::Int(b), Value::Bytes(b"n".to_vec())]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn inserts_without_a_column_list_name_the_tables_columns() {
    let (a, b) = keys_on_both();
    // One row: its key's node, with the columns named.
    let Plan::Route(t) = plan_of(&format!("INSERT INTO t_order VALUES (1, {b}, 'x')")) else {
        panic!()
    };
    assert_eq!(t.node, 1);
    assert_eq!(
        t.sql,
        format!("INSERT INTO t_order (`order_id`, `user_id`, `status`) VALUES (1, {b}, 'x')")
    );
    // A dump's multi-row INSERT of a quoted, qualified table: split by node.
    let sql = format!("INSERT INTO `shop`.`t_order` VALUES (1,{a},'x'),(2,{b},'y'),(3,{a},'z')");
    let Plan::Scatter { targets, .. } = plan_of(&sql) else {
        panic!("{:?}", plan_of(&sql))
    };
    let mut got: Vec<(usize, String)> = targets.into_iter().map(|t| (t.node, t.sql)).collect();
    got.sort();
    let named = "INSERT INTO `shop`.`t_order` (`order_id`, `user_id`, `status`) VALUES ";
    assert_eq!(
        got,
        vec![
            (0, format!("{named}(1,{a},'x'), (3,{a},'z')")),
            (1, format!("{named}(2,{b},'y')"))
        ]
    );
    // REPLACE, IGNORE, ON DUPLICATE KEY UPDATE and placeholders keep their meaning.
    for sql in [
        "REPLACE INTO t_order VALUES (?, ?, ?)",
        "INSERT IGNORE INTO t_order VALUES (?, ?, ?)",
        "INSERT INTO t_order VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE status = VALUES(status)",
    ] {
        let params = [Value::Int(1), Value::Int(b), Value::Bytes(b"s".to_vec())];
        let Plan::Route(t) = plan_with(sql, &params) else {
            panic!("{sql}: {:?}", plan_with(sql, &params))
        };
        assert_eq!(t.node, 1, "{sql}");
        assert!(
            t.sql.contains("(`order_id`, `user_id`, `status`)"),
            "{}",
            t.sql
        );
        assert_eq!(t.params, params.to_vec(), "{sql}");
    }
    // A row with another number of values: MySQL's own error.
    assert!(matches!(
        plan_of("INSERT INTO t_order VALUES (1, 2, 'x'), (3, 4)"),
        Plan::Refuse { code: 1136, ref message } if message.contains("row 2")
    ));
    // Columns not known yet: read them first.
    assert_eq!(
        plan_of("INSERT INTO shop.t_item VALUES (1, 2)"),
        Plan::NeedColumns {
            schema: Some("shop".into()),
            table: "t_item".into()
        }
    );
    assert_eq!(
        plan_of("INSERT INTO other.t_order VALUES (1, 2, 3)"),
        Plan::NeedColumns {
            schema: Some("other".into()),
            table: "t_order".into()
        }
    );
    // Unsharded tables go as they came.
    let Plan::Route(t) = plan_of("INSERT INTO t_merchant VALUES (1, 'm')") else {
        panic!()
    };
    assert_eq!(t.sql, "INSERT INTO t_merchant VALUES (1, 'm')");
}

#[test]
fn a_sequence_generates_the_shard_key_and_routes_by_it() {
    // The context's sequence hands out 7 and 8, then needs a new block.
    let (n7, n8) = (node_of(7), node_of(8));
    let plan = plan_of("INSERT INTO t_seq (v) VALUES ('a'), ('b')");
    let mut got: Vec<(usize, String)> = match plan {
        Plan::Route(t) => vec![(t.node, t.sql)],
        Plan::Scatter { targets, .. } => targets.into_iter().map(|t| (t.node, t.sql)).collect(),
        other => panic!("{other:?}"),
    };
    got.sort();
    let mut want = vec![
        (
            n7,
            "INSERT INTO t_seq (v, `id`) VALUES ('a', LAST_INSERT_ID(7))".to_string(),
        ),
        (
            n8,
            "INSERT INTO t_seq (v, `id`) VALUES ('b', 8)".to_string(),
        ),
    ];
    if n7 == n8 {
        want = vec![(
            n7,
            "INSERT INTO t_seq (v, `id`) VALUES ('a', LAST_INSERT_ID(7)), ('b', 8)".into(),
        )];
    }
    want.sort();
    assert_eq!(got, want);
    // More rows than the block holds: reserve first.
    assert_eq!(
        plan_of("INSERT INTO t_seq (v) VALUES ('a'), ('b'), ('c')"),
        Plan::NeedIds {
            table: "t_seq".into(),
            count: 3
        }
    );
    // A NULL key is generated, as AUTO_INCREMENT does.
    let Plan::Route(t) = plan_of("INSERT INTO t_seq (id, v) VALUES (NULL, 'x')") else {
        panic!()
    };
    assert_eq!(t.node, n7);
    assert_eq!(
        t.sql,
        "INSERT INTO t_seq (id, v) VALUES (LAST_INSERT_ID(7), 'x')"
    );
    // A NULL bound to a placeholder is refused with the way out.
    assert!(refused(&plan_with(
        "INSERT INTO t_seq (id, v) VALUES (?, 'x')",
        &[Value::NULL]
    ))
    .contains("leave the column out"));
    // An explicit key is kept.
    let Plan::Route(t) = plan_of("INSERT INTO t_seq (id, v) VALUES (8, 'x')") else {
        panic!()
    };
    assert_eq!(t.node, n8);
    assert_eq!(t.sql, "INSERT INTO t_seq (id, v) VALUES (8, 'x')");
}

#[test]
fn inserts_need_a_constant_shard_key() {
    assert!(refused(&plan_of("INSERT INTO t_order (order_id) VALUES (1)")).contains("shard key"));
    assert!(refused(&plan_of(
        "INSERT INTO t_order (order_id, user_id) VALUES (1, NULL)"
    ))
    .contains("constant"));
    // INSERT ... SELECT: the SELECT is read, then its rows inserted as VALUES.
    match plan_of("INSERT IGNORE INTO t_order (order_id, user_id) SELECT id, 2 FROM t_merchant WHERE id > 1 ON DUPLICATE KEY UPDATE status = 'x'") {
        Plan::InsertSelect(i) => {
            assert_eq!(i.head, "INSERT IGNORE INTO t_order (order_id, user_id) ");
            assert_eq!(i.select, "SELECT id, 2 FROM t_merchant WHERE id > 1");
            assert_eq!(i.tail, " ON DUPLICATE KEY UPDATE status = 'x'");
        }
        other => panic!("expected an InsertSelect, got {other:?}"),
    }
    // Bound values are the SELECT's, written into its text; one outside it is refused.
    match plan_with(
        "INSERT INTO t_order (order_id, user_id) SELECT id, ? FROM t_merchant WHERE n = ?",
        &[Value::Int(1), Value::Bytes(b"\\' OR 1=1 -- ".to_vec())],
    ) {
        Plan::InsertSelect(i) => assert_eq!(
            i.select,
            "SELECT id, 1 FROM t_merchant WHERE n = _utf8mb4 X'5C27204F5220313D31202D2D20'"
        ),
        other => panic!("expected an InsertSelect, got {other:?}"),
    }
    assert!(refused(&plan_with(
        "INSERT INTO t_order (order_id, user_id) SELECT id, 2 FROM t_merchant ON DUPLICATE KEY UPDATE status = ?",
        &[Value::Int(1)]
    ))
    .contains("placeholders"));
    let (_, b) = keys_on_both();
    assert_eq!(
        plan_of(&format!(
            "INSERT INTO t_order SET order_id = 1, user_id = {b}"
        ))
        .nodes(),
        vec![1]
    );
}

#[test]
fn broadcast_writes_go_everywhere_reporting_one_copy() {
    match plan_of("INSERT INTO t_country (code, name) VALUES ('FR', 'France')") {
        Plan::Scatter { targets, ok, .. } => {
            assert_eq!(ok, OkMerge::Copies);
            assert_eq!(targets.len(), 2);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn updates_and_deletes() {
    let (a, _) = keys_on_both();
    assert_eq!(
        plan_of(&format!(
            "UPDATE t_order SET status = 'x' WHERE user_id = {a}"
        ))
        .nodes(),
        vec![0]
    );
    assert!(matches!(
        plan_of("UPDATE t_order SET status = 'x'"),
        Plan::Scatter {
            ok: OkMerge::Sum,
            ..
        }
    ));
    // An UPDATE of the shard key reads its rows with their new values, locked, on the
    // nodes its WHERE names, then moves them.
    match plan_with(
        "UPDATE t_order AS o SET status = ?, user_id = user_id + 1 WHERE (o.order_id IN (1, ?))",
        &[Value::Bytes(b"it's".to_vec()), Value::Int(2)],
    ) {
        Plan::KeyUpdate(k) => {
            assert_eq!(
                k.select,
                "SELECT `o`.`order_id`, `o`.`user_id`, `o`.`status`, (_utf8mb4 X'69742773'), (user_id + 1) FROM `t_order` AS `o` WHERE (o.order_id IN (1, 2)) FOR UPDATE"
            );
            assert_eq!(
                (k.key.clone(), k.assigned.clone(), k.shard),
                (vec![0], vec![2, 1], 1)
            );
        }
        other => panic!("{other:?}"),
    }
    for (sql, why) in [
        (
            "UPDATE t_order SET user_id = 5, status = user_id WHERE order_id = 1",
            "changes before it",
        ),
        (
            "UPDATE t_order SET user_id = 5 WHERE order_id = 1 ORDER BY order_id LIMIT 1",
            "LIMIT",
        ),
        ("UPDATE t_order SET user_id = 5, user_id = 6", "twice"),
        ("UPDATE t_merchant SET id = 5", "single"),
    ] {
        let plan = plan_of(sql);
        if sql.contains("t_merchant") {
            // A single table's key places nothing: an ordinary UPDATE.
            assert!(matches!(plan, Plan::Route(_)), "{sql}: {plan:?}");
            continue;
        }
        assert!(refused(&plan).contains(why), "{sql}: {plan:?}");
    }
    assert_eq!(
        plan_of(&format!("DELETE FROM t_order WHERE user_id = {a}")).nodes(),
        vec![0]
    );
    assert!(matches!(
        plan_of("DELETE FROM t_order WHERE status = 'x'"),
        Plan::Scatter { .. }
    ));
    assert!(refused(&plan_of("DELETE FROM t_order LIMIT 1")).contains("LIMIT"));
    assert_eq!(
        plan_of("DELETE FROM t_merchant WHERE id = 1").nodes(),
        vec![1]
    );
}

#[test]
fn ddl_on_sharded_and_broadcast_tables_runs_everywhere() {
    for sql in [
        "CREATE TABLE t_order (order_id BIGINT PRIMARY KEY, user_id INT)",
        "ALTER TABLE t_order ADD COLUMN x INT",
        "DROP TABLE IF EXISTS t_order",
        "CREATE INDEX ix ON t_order (user_id)",
        "TRUNCATE TABLE t_country",
    ] {
        assert_eq!(plan_of(sql).nodes(), vec![0, 1], "{sql}");
    }
    assert_eq!(plan_of("CREATE TABLE t_merchant (id INT)").nodes(), vec![1]);
    assert_eq!(plan_of("CREATE TABLE t_other (id INT)").nodes(), vec![0]);
}

#[test]
fn table_locks_and_key_toggles_go_where_the_tables_are() {
    // Each node locks the tables it holds: t_order is on ds0 and ds1, t_merchant on ds1.
    assert_eq!(
        plan_of("LOCK TABLES `t_order` WRITE, t_merchant AS m READ"),
        Plan::Session(SessionOp::Lock {
            locks: vec![
                (0, "LOCK TABLES `t_order` WRITE".into()),
                (
                    1,
                    "LOCK TABLES `t_order` WRITE, t_merchant AS m READ".into()
                ),
            ]
        })
    );
    assert_eq!(
        plan_of("lock table shop.t_merchant write"),
        Plan::Session(SessionOp::Lock {
            locks: vec![(1, "lock table shop.t_merchant write".into())]
        })
    );
    // A dump's: every table where it is, the executable comments kept.
    assert_eq!(
        plan_of(
            "LOCK TABLES `t_merchant` READ /*!32311 LOCAL */,`t_other` READ /*!32311 LOCAL */;"
        ),
        Plan::Session(SessionOp::Lock {
            locks: vec![
                (0, "LOCK TABLES `t_other` READ /*!32311 LOCAL */".into()),
                (1, "LOCK TABLES `t_merchant` READ /*!32311 LOCAL */".into()),
            ]
        })
    );
    assert_eq!(plan_of("UNLOCK TABLES"), Plan::Session(SessionOp::Unlock));
    // The global read lock: every node's.
    assert_eq!(
        plan_of("flush tables with read lock;"),
        Plan::Session(SessionOp::Lock {
            locks: vec![
                (0, "flush tables with read lock".into()),
                (1, "flush tables with read lock".into())
            ]
        })
    );
    // A dump's DISABLE / ENABLE KEYS: every node of the table.
    let Plan::Scatter { targets, ok, .. } = plan_of("ALTER TABLE `t_order` DISABLE KEYS") else {
        panic!()
    };
    assert_eq!(ok, OkMerge::Copies);
    assert_eq!(
        targets.iter().map(|t| t.node).collect::<Vec<_>>(),
        vec![0, 1]
    );
    let Plan::Scatter { targets, .. } = plan_of("ALTER TABLE t_merchant ENABLE KEYS") else {
        panic!()
    };
    assert_eq!(targets.iter().map(|t| t.node).collect::<Vec<_>>(), vec![1]);
}

/// Runs `f` where the stack is as small as a runtime worker's.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn deeply_nested_conditions_do_not_overflow_the_stack() {
    let (a, _) = keys_on_both();
    let chain = vec![format!("user_id = {a}"); 50_000].join(" AND ");
    let sql = format!("SELECT * FROM t_order WHERE {chain}");
    let p = on_small_stack(move || plan_of(&sql).nodes());
    assert_eq!(p, vec![0]);
    let nested = format!(
        "SELECT * FROM t_order WHERE {}user_id = 1{}",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    let p = on_small_stack(move || plan_of(&nested));
    assert!(matches!(p, Plan::Unroutable { .. }), "not unroutable");
}

#[test]
fn long_and_deep_conditions_mariadb_runs_are_planned() {
    // 255 AND / OR terms in brackets 30 deep (about 4.5 KB), and 400 levels of brackets:
    // MariaDB runs both; sqlparser's default nesting limit refused them.
    let mut w = String::from("user_id = 1");
    for i in 0..254 {
        let op = if i % 3 == 0 { "OR" } else { "AND" };
        w = if i % 8 == 0 {
            format!("({w}) {op} status <> 'x{i}'")
        } else {
            format!("{w} {op} order_id > {i}")
        };
    }
    let long = format!("SELECT * FROM t_order WHERE {w}");
    let deep = format!(
        "SELECT * FROM t_order WHERE {}user_id = 1{}",
        "(".repeat(400),
        ")".repeat(400)
    );
    for sql in [long, deep] {
        let p = on_small_stack(move || plan_of(&sql));
        assert!(
            !matches!(p, Plan::Unroutable { .. } | Plan::Refuse { .. }),
            "{p:?}"
        );
    }
}

/// The plan of a merged scatter over `t_order` (for the merge primitives' tests), with its
/// Scatter leaf sent to nodes `0..nodes`.
pub(crate) fn merge_plan_of(sql: &str, nodes: usize) -> Plan {
    let mut plan = plan_of(&sql.replace(" FROM t", " FROM t_order"));
    assert!(is_merged(&plan), "{sql}: {plan:?}");
    if let Plan::Scatter { targets, .. } = plan.source_mut() {
        let sql = targets[0].sql.clone();
        *targets = (0..nodes)
            .map(|node| Target {
                node,
                sql: sql.clone(),
                params: Vec::new(),
            })
            .collect();
    }
    plan
}

/// A Scatter of `sql` to nodes `0..nodes` (the leaf of a merge tree in the primitives' tests).
pub(crate) fn scatter_of(sql: &str, nodes: usize) -> Plan {
    Plan::Scatter {
        targets: (0..nodes)
            .map(|node| Target {
                node,
                sql: sql.to_string(),
                params: Vec::new(),
            })
            .collect(),
        ok: OkMerge::Sum,
    }
}

/// The reads that fill the copy of `table` in a plan over copies.
fn copy_reads<'p>(p: &'p Plan, table: &str) -> &'p [(usize, String)] {
    let ships = match p {
        Plan::Gather(g) => &g.ships,
        Plan::Shipped(s) => &s.ships,
        other => panic!("expected a read over copies, got {other:?}"),
    };
    match ships.iter().find(|s| s.table == table) {
        Some(s) => &s.reads,
        None => panic!("`{table}` is not copied: {p:?}"),
    }
}

#[test]
fn unqualified_shard_keys_join_where_mariadb_resolves_them() {
    // `user_id` in the subquery is t_item's (its FROM has the column): the same key as the
    // outer row's, so each node answers over its own rows.
    let p = plan_of(
        "SELECT order_id FROM t_order WHERE EXISTS (SELECT 1 FROM t_item WHERE user_id = t_order.user_id)",
    );
    assert!(matches!(&p, Plan::Scatter { .. }), "{p:?}");
    // Both tables have `user_id`: the name is ambiguous (MariaDB refuses it), no join on keys.
    let p = plan_of("SELECT 1 FROM t_order o JOIN t_item i ON user_id = i.user_id");
    assert!(gathered(&p).contains("different nodes"), "{p:?}");
    // A table whose columns are not known may hold the name: no join on keys either.
    let p = plan_of(
        "SELECT 1 FROM t_order o WHERE EXISTS (SELECT 1 FROM t_item i JOIN t_user u ON u.id = i.order_id WHERE user_id = o.user_id)",
    );
    assert!(!matches!(&p, Plan::Scatter { .. }), "{p:?}");
}

#[test]
fn an_item_over_aggregates_alone_still_groups_the_nodes_rows() {
    let p = plan_of(
        "SELECT 100.00 * SUM(CASE WHEN status = 'x' THEN a ELSE 0 END) / SUM(a) FROM t_order",
    );
    assert!(is_merged(&p), "expected a merged scatter, got {p:?}");
    let m = merge_of(&p);
    assert!(m.group.is_some(), "{m:?}");
}

#[test]
fn gathered_reads_copy_what_is_not_on_the_node() {
    // t_order (sharded) joined with t_user (unconfigured: ds0) and t_merchant (single: ds1):
    // both copied to each node of t_order, where the statement runs as over broadcast tables.
    let p = plan_of(
        "SELECT o.order_id, m.name FROM t_order o JOIN t_merchant m ON m.id = o.merchant AND m.kind = 'big' JOIN t_user u ON u.id = o.user_id WHERE o.status = 'paid' AND m.id > 3 AND u.id + o.a > 1",
    );
    let Plan::Shipped(s) = &p else {
        panic!("expected copies to t_order's nodes, got {p:?}")
    };
    assert_eq!(s.nodes(), vec![0, 1]);
    let copied: Vec<&str> = s.ships.iter().map(|s| s.table.as_str()).collect();
    assert_eq!(copied, vec!["t_merchant", "t_user"], "{s:?}");
    // Each copy reads the rows its own conjuncts allow; a conjunct over two tables stays.
    assert_eq!(
        copy_reads(&p, "t_merchant"),
        vec![(
            1,
            "SELECT `m`.* FROM `t_merchant` AS `m` WHERE (m.id > 3) AND (m.kind = 'big')"
                .to_string()
        )]
    );
    let Plan::Scatter { targets, .. } = &s.then else {
        panic!("expected a scatter over the copies, got {:?}", s.then)
    };
    assert_eq!(
        targets[0].sql,
        "SELECT o.order_id, m.name FROM t_order o JOIN `__sp_ship_0` m ON m.id = o.merchant AND m.kind = 'big' JOIN `__sp_ship_1` u ON u.id = o.user_id WHERE o.status = 'paid' AND m.id > 3 AND u.id + o.a > 1"
    );

    // Without a sharded table at the top, everything is gathered on the node holding most:
    // t_merchant (ds1) copied to ds0, where t_user is.
    let p = plan_of(
        "SELECT m.name FROM t_merchant m JOIN t_user u ON u.id = m.owner WHERE m.kind = 'big'",
    );
    let Plan::Gather(g) = &p else {
        panic!("expected a gathered read, got {p:?}")
    };
    assert_eq!(g.node, 0);
    assert_eq!(
        g.sql,
        "SELECT m.name FROM `__sp_ship_0` m JOIN t_user u ON u.id = m.owner WHERE m.kind = 'big'"
    );
    assert_eq!(
        copy_reads(&p, "t_merchant"),
        vec![(
            1,
            "SELECT `m`.* FROM `t_merchant` AS `m` WHERE (m.kind = 'big')".to_string()
        )]
    );

    // The NULL-extended side of a LEFT JOIN keeps its WHERE conjuncts to itself (a copy
    // filtered by `i.x IS NULL` would NULL-extend rows that had a match); its ON ones go.
    let p = plan_of(
        "SELECT * FROM t_merchant m LEFT JOIN t_item i ON i.merchant = m.id AND i.qty > 1 WHERE i.x IS NULL",
    );
    let item = copy_reads(&p, "t_item");
    assert!(
        item.iter()
            .all(|(_, sql)| sql.ends_with("WHERE (i.qty > 1)")),
        "{item:?}"
    );

    // A sharded table in a subquery of a broadcast one: not scattered, gathered.
    let p = plan_of("SELECT (SELECT COUNT(*) FROM t_order) FROM t_country");
    assert!(gathered(&p).contains("only in a subquery"), "{p:?}");
    let p = plan_of("SELECT * FROM t_country c LEFT JOIN t_order o ON o.country = c.code");
    assert!(gathered(&p).contains("NULL-extended"), "{p:?}");
    // A WITH name is not a table to copy; a table twice is copied once, unfiltered.
    let p = plan_of(
        "WITH x AS (SELECT user_id FROM t_order WHERE a = 1) SELECT * FROM x JOIN t_merchant m ON m.id = x.user_id JOIN t_order o2 ON o2.user_id = m.id",
    );
    let Plan::Gather(g) = &p else {
        panic!("expected a gathered read, got {p:?}")
    };
    assert!(g.ships.iter().all(|s| s.table != "x"), "{g:?}");
    let order = copy_reads(&p, "t_order");
    assert!(
        order
            .iter()
            .all(|(_, sql)| sql == "SELECT * FROM `t_order`"),
        "{order:?}"
    );

    // Unqualified columns of a table alone in its FROM are its own only if it has them: the
    // outer query's `id` stays in the statement (TPC-H writes correlations this way).
    let p = plan_of(
        "SELECT id FROM t_merchant WHERE EXISTS (SELECT 1 FROM t_order WHERE user_id = id AND status = 'paid')",
    );
    let order = copy_reads(&p, "t_order");
    assert!(
        order
            .iter()
            .all(|(_, sql)| sql.ends_with("WHERE (status = 'paid')")),
        "{order:?}"
    );
    // Without its column list the planner asks for it first.
    let p =
        plan_of("SELECT id FROM t_merchant m WHERE EXISTS (SELECT 1 FROM t_user WHERE x = m.id)");
    assert!(
        matches!(&p, Plan::NeedColumns { table, .. } if table == "t_user"),
        "{p:?}"
    );

    // What a copy cannot answer for: refused.
    for (sql, why) in [
        (
            "SELECT * FROM t_order o JOIN t_merchant m ON m.id = o.merchant FOR UPDATE",
            "locking read",
        ),
        (
            "SELECT * FROM t_order o JOIN other.t_merchant m ON m.id = o.merchant",
            "database",
        ),
    ] {
        assert!(refused(&plan_of(sql)).contains(why), "{sql}");
    }
}

#[test]
fn user_variable_assignments_and_named_locks_run_on_one_node_or_are_refused() {
    let (a, b) = keys_on_both();
    let refused = |sql: &str| matches!(plan_of(sql), Plan::Refuse { code: 1235, .. });
    // Assignments: on one node (read back there by the session), else refused.
    assert_eq!(
        plan_of(&format!(
            "SELECT @r := amount FROM t_order WHERE user_id = {b}"
        ))
        .nodes(),
        vec![1]
    );
    assert!(!refused("SELECT @r := 1"));
    assert!(!refused("SELECT @r := c FROM t_country"));
    assert!(refused("SELECT @r := amount FROM t_order"));
    assert!(refused("SELECT amount INTO @r FROM t_order LIMIT 1"));
    // Named locks: on the default node only.
    assert!(!refused("SELECT GET_LOCK('x', 1)"));
    assert!(!refused(&format!(
        "SELECT GET_LOCK('x', 1) FROM t_order WHERE user_id = {a}"
    )));
    assert!(refused(&format!(
        "SELECT GET_LOCK('x', 1) FROM t_order WHERE user_id = {b}"
    )));
    assert!(refused("SELECT RELEASE_LOCK('x') FROM t_country"));
    // Neither: as before.
    assert!(!refused(
        "SELECT amount FROM t_order WHERE note = '@r := 1'"
    ));
}
