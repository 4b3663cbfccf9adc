//! Plans made once and resolved at every execution: a point statement of a hash_slot or
//! range table (`SELECT ... FROM t WHERE key = ?`, an UPDATE or DELETE by key, a one-row
//! INSERT) routes to the node of one parameter's value. [`KeyRoute`] holds the table and
//! which parameter is its key; [`KeyRoute::resolve`] looks the node up in the snapshot the
//! execution took, so the plan stays right across reloads and slot moves.
//!
//! Found by [`analyze`] (on the statement with `?` placeholders: a prepared statement's own,
//! or a text statement's digest with its literals taken out), and trusted only once the full
//! planner, given the first execution's values, routed the statement to the same node with
//! its text unchanged ([`KeyRoute::agrees`]). Everything else is planned at every
//! execution, as before.

use mysql_common::value::Value;
use sqlparser::ast::{
    AssignmentTarget, Expr, FromTable, SetExpr, Statement, TableObject, Value as SqlValue,
};

use super::{Plan, Target};
use crate::config::{TableRule, Topology};
use crate::routing::slot::{MoveStep, Place};
use crate::sql::keys::{where_keys, KeyColumn};
use crate::sql::{self, Parsed};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRoute {
    pub table: String,
    /// The rule's kind and column when it was planned: a reload that changes either makes
    /// the plan invalid (resolve refuses, the statement is planned afresh).
    kind: &'static str,
    column: String,
    /// The parameter that holds the key.
    pub param: usize,
    /// The parameter that holds the salt column, on a table with a `salt`: a salted key's
    /// statement goes to its bucket's node.
    by: Option<usize>,
    /// A plain point read (a SELECT that locks nothing): while its slot moves it goes where
    /// the slot's reads go, as the full planner sends it; anything else is planned in full.
    read: bool,
}

/// Where one execution goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    pub node: usize,
    /// The key's slot (hash_slot tables), for the per-slot metrics.
    pub slot: Option<u16>,
    /// A write to a slot whose move copies its changes from the source's binary log: the
    /// move's target, toward which the write is counted while it (or its transaction)
    /// runs, as for the full planner's [`Plan::Captured`].
    pub captured: Option<usize>,
}

fn sentinel(i: usize) -> Value {
    Value::Bytes(format!("\0shardproxy-param-{i}\0").into_bytes())
}

fn sentinel_index(v: &Value) -> Option<usize> {
    let Value::Bytes(b) = v else { return None };
    let s = std::str::from_utf8(b).ok()?;
    s.strip_prefix("\0shardproxy-param-")?
        .strip_suffix('\0')?
        .parse()
        .ok()
}

/// The one table a statement names, or `None` when it names several (or none).
fn only_table(stmt: &Statement) -> Option<String> {
    let mut names = Vec::new();
    let _ = sqlparser::ast::visit_relations(stmt, |n| {
        names.push(sql::table_name(n));
        std::ops::ControlFlow::<()>::Continue(())
    });
    match names.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

/// The point-statement plan of `parsed`, if it is one.
pub fn analyze(parsed: &Parsed, topo: &Topology) -> Option<KeyRoute> {
    let table = only_table(&parsed.stmt)?;
    let rule = topo.table(&table)?;
    if !matches!(rule, TableRule::HashSlot { .. } | TableRule::Range { .. }) {
        return None;
    }
    let kind = rule.kind();
    if topo.key_generators.contains_key(&table) {
        return None;
    }
    let column = rule.column()?.to_string();
    let salt_by = match rule {
        TableRule::HashSlot { map, .. } => map.salt().map(|s| s.by.clone()),
        _ => None,
    };
    let params: Vec<Value> = (0..parsed.param_count()).map(sentinel).collect();
    let pinned = |col: &str, alias: &Option<String>, selection: Option<&Expr>| -> Option<usize> {
        let mut qualifiers = vec![table.clone()];
        qualifiers.extend(alias.as_ref().map(|a| a.to_ascii_lowercase()));
        let kc = KeyColumn {
            column: col.to_string(),
            qualifiers,
        };
        match where_keys(selection, &kc, parsed, &params)?.as_slice() {
            [one] => sentinel_index(one),
            _ => None,
        }
    };
    let mut by = None;
    let mut key = |alias: Option<String>, selection: Option<&Expr>| -> Option<usize> {
        by = salt_by
            .as_deref()
            .and_then(|b| pinned(b, &alias, selection));
        pinned(&column, &alias, selection)
    };
    let read = matches!(&parsed.stmt, Statement::Query(q) if q.locks.is_empty());
    // A write to a table with global indexes keeps them: planned in full every time.
    if !read && topo.indexes_of(&table).is_some() {
        return None;
    }
    let param = match &parsed.stmt {
        Statement::Query(q) => {
            let SetExpr::Select(s) = q.body.as_ref() else {
                return None;
            };
            if q.with.is_some() || s.from.len() != 1 || !s.from[0].joins.is_empty() {
                return None;
            }
            let (_, alias) = super::uses::factor_name(&s.from[0].relation)?;
            key(alias, s.selection.as_ref())?
        }
        Statement::Update(u) => {
            if !u.table.joins.is_empty() || u.from.is_some() {
                return None;
            }
            let assigns_key = u.assignments.iter().any(|a| match &a.target {
                AssignmentTarget::ColumnName(n) => {
                    let n = sql::table_name(n);
                    n == column || salt_by.as_deref() == Some(n.as_str())
                }
                AssignmentTarget::Tuple(_) => true,
            });
            if assigns_key {
                return None;
            }
            let (_, alias) = super::uses::factor_name(&u.table.relation)?;
            key(alias, u.selection.as_ref())?
        }
        Statement::Delete(d) => {
            let from = match &d.from {
                FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
            };
            if !d.tables.is_empty() || d.using.is_some() || from.len() != 1 {
                return None;
            }
            if !from[0].joins.is_empty() {
                return None;
            }
            let (_, alias) = super::uses::factor_name(&from[0].relation)?;
            key(alias, d.selection.as_ref())?
        }
        Statement::Insert(ins) => {
            let TableObject::TableName(_) = &ins.table else {
                return None;
            };
            if ins.on.is_some() {
                return None;
            }
            let source = ins.source.as_ref()?;
            let SetExpr::Values(values) = source.body.as_ref() else {
                return None;
            };
            let [row] = values.rows.as_slice() else {
                return None;
            };
            let placeholder = |name: &str| -> Option<usize> {
                let pos = ins
                    .columns
                    .iter()
                    .position(|c| sql::table_name(c) == name)?;
                match row.get(pos)? {
                    Expr::Value(v) if matches!(v.value, SqlValue::Placeholder(_)) => {
                        parsed.param_index(v.span.start)
                    }
                    _ => None,
                }
            };
            by = salt_by.as_deref().and_then(placeholder);
            placeholder(&column)?
        }
        _ => return None,
    };
    Some(KeyRoute {
        table,
        kind,
        column,
        param,
        by,
        read,
    })
}

impl KeyRoute {
    /// The node of this execution's key in `topo`; `None` when the table's rule is no longer
    /// the one planned for, or the key has no node (NULL, a value outside the rule's domain):
    /// then the statement is planned in full.
    pub fn resolve(&self, topo: &Topology, params: &[Value]) -> Option<Resolved> {
        let by = self.by.and_then(|i| params.get(i));
        self.resolve_with(topo, params.get(self.param)?, by)
    }

    /// [`KeyRoute::resolve`] given the key's value.
    pub fn resolve_value(&self, topo: &Topology, v: &Value) -> Option<Resolved> {
        self.resolve_with(topo, v, None)
    }

    /// [`KeyRoute::resolve`] given the key's value and, for a salted key, its salt column's.
    fn resolve_with(&self, topo: &Topology, v: &Value, by: Option<&Value>) -> Option<Resolved> {
        if matches!(v, Value::NULL) {
            return None;
        }
        let rule = topo.table(&self.table)?;
        if rule.kind() != self.kind || rule.column() != Some(self.column.as_str()) {
            return None;
        }
        // A global index declared since: its writes keep it, planned in full.
        if !self.read && topo.indexes_of(&self.table).is_some() {
            return None;
        }
        match rule {
            // A string an integer column reads as another integer (`'012'`) may be on two
            // nodes: planned in full.
            TableRule::HashSlot { .. } if crate::value::integer_alias(v).is_some() => None,
            TableRule::HashSlot { map, .. } => {
                let (node, slot) = match map.place(v)? {
                    Place::One(node, slot) => (node, slot),
                    // A salted key's statement pinned to one bucket, none moving; else
                    // planned in full.
                    Place::Salted(salt, buckets) if map.salt_moves().is_empty() => {
                        return Some(Resolved {
                            node: buckets.node(salt.bucket_of(by?)?),
                            slot: None,
                            captured: None,
                        });
                    }
                    Place::Salted(..) => return None,
                };
                let Some(slot) = slot else {
                    // A key split out of its slot: planned in full while it moves.
                    if map.key_moves().is_empty() {
                        return Some(Resolved {
                            node,
                            slot: None,
                            captured: None,
                        });
                    }
                    return None;
                };
                let captured = match map.moving(slot) {
                    None => None,
                    Some(_) if self.read => None,
                    // The write runs on the source alone, as with no move.
                    Some(m) if m.step == MoveStep::Capture => Some(m.to),
                    // Planned in full (`super::moving`): other steps' writes, and locking
                    // reads.
                    Some(_) => return None,
                };
                Some(Resolved {
                    node,
                    slot: Some(slot),
                    captured,
                })
            }
            TableRule::Range { map, .. } => {
                let i = map.index_of(&map.kind.key_of(v)?).min(map.len() - 1);
                // As a moving slot's (above): only plain reads and captured writes here.
                let captured = match map.moves().iter().find(|m| m.index == i) {
                    None => None,
                    Some(_) if self.read => None,
                    Some(m) if m.step == MoveStep::Capture => Some(m.to),
                    Some(_) => return None,
                };
                Some(Resolved {
                    node: map.nodes[i],
                    // A range's load is counted as a slot's, by its number.
                    slot: u16::try_from(i)
                        .ok()
                        .filter(|i| usize::from(*i) < crate::routing::slot::SLOTS),
                    captured,
                })
            }
            _ => None,
        }
    }

    /// Does the full planner's `plan` for this execution (`sql` with `params`) do what this
    /// plan would: run the statement as written on the node of its key?
    pub fn agrees(&self, plan: &Plan, topo: &Topology, sql: &str, params: &[Value]) -> bool {
        self.resolve(topo, params)
            .is_some_and(|r| routed_as(plan, r).is_some_and(|t| t.sql == sql && t.params == params))
    }

    /// [`KeyRoute::agrees`] for a text statement whose key literal has value `key`.
    pub fn agrees_text(&self, plan: &Plan, topo: &Topology, sql: &str, key: &Value) -> bool {
        self.resolve_value(topo, key).is_some_and(|r| {
            routed_as(plan, r).is_some_and(|t| t.sql == sql && t.params.is_empty())
        })
    }

    /// The plan as `route` and SHOW PLANS describe it.
    pub fn describe(&self) -> String {
        let salted = match self.by {
            Some(b) => format!(", a salted key's bucket by parameter {}", b + 1),
            None => String::new(),
        };
        format!(
            "route by `{}`.`{}` = parameter {} ({}{salted}), node resolved per execution",
            self.table,
            self.column,
            self.param + 1,
            self.kind
        )
    }
}

/// The statement `plan` runs on `r`'s node, when the plan is what `r` stands for: the
/// statement routed there (wrapped as a captured write when `r` is one).
fn routed_as(plan: &Plan, r: Resolved) -> Option<&Target> {
    let route = match (plan, r.captured) {
        (Plan::Captured { targets, write }, Some(to)) if targets[..] == [to] => write.as_ref(),
        (p, None) => p,
        _ => return None,
    };
    match route {
        Plan::Route(t) if t.node == r.node => Some(t),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_topology;
    use crate::routing::slot::slot_of;

    fn topo() -> Topology {
        test_topology(
            1,
            2,
            r#"
[tables.t]
rule = "hash_slot"
column = "id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
[tables.r]
rule = "range"
column = "k"
ranges = [{ below = 100, node = "ds0" }, { node = "ds1" }]
[tables.g]
rule = "hash_slot"
column = "id"
slots = [{ slots = "0-1023", node = "ds0" }]
key_generator = { column = "gid", kind = "snowflake" }
[tables.b]
rule = "broadcast"
"#,
        )
    }

    fn a(sql: &str) -> Option<KeyRoute> {
        analyze(&crate::sql::parse(sql).unwrap(), &topo())
    }

    #[test]
    fn a_salted_keys_statement_pinned_to_one_bucket_resolves_to_its_node() {
        // Key 7 salted by `id` over ds0-ds3, a bucket each: `CRC32(4)`, `CRC32(10)`,
        // `CRC32(7)`, `CRC32(3)` are buckets 0, 1, 2, 3 of 4.
        let t = crate::config::test_topology(
            2,
            4,
            "[tables.s]\nrule = \"hash_slot\"\ncolumn = \"tenant\"\n\
             slots = [{ slots = \"0-1023\", node = \"ds0\" }]\n\
             salt = { by = \"id\", buckets = 4 }\n\
             salted = { \"7\" = [\"ds0\", \"ds1\", \"ds2\", \"ds3\"] }\n",
        );
        let an = |sql: &str| analyze(&crate::sql::parse(sql).unwrap(), &t).unwrap();
        for sql in [
            "SELECT v FROM s WHERE tenant = ? AND id = ?",
            "UPDATE s SET v = v + 1 WHERE tenant = ? AND id = ?",
            "INSERT INTO s (tenant, id, v) VALUES (?, ?, 1)",
        ] {
            let k = an(sql);
            let on = |id: i64| {
                k.resolve(&t, &[Value::Int(7), Value::Int(id)])
                    .map(|r| r.node)
            };
            assert_eq!(
                [on(4), on(10), on(7), on(3)],
                [Some(0), Some(1), Some(2), Some(3)],
                "{sql}"
            );
            // Another key goes to its slot's node, whatever its `id`.
            assert_eq!(
                k.resolve(&t, &[Value::Int(8), Value::Int(7)])
                    .map(|r| r.node),
                Some(0)
            );
        }
        // Not pinned to a bucket: planned in full.
        let k = an("SELECT v FROM s WHERE tenant = ?");
        assert_eq!(k.resolve(&t, &[Value::Int(7)]), None);
        // A change of the salt column may move the row: planned in full.
        assert!(analyze(
            &crate::sql::parse("UPDATE s SET id = ? WHERE tenant = ?").unwrap(),
            &t
        )
        .is_none());
    }

    #[test]
    fn writes_to_a_table_with_a_global_index_are_planned_in_full_even_prepared_before_it() {
        let before = topo();
        let write = a("UPDATE t SET v = ? WHERE id = ?").expect("a key route");
        let read = a("SELECT v FROM t WHERE id = ?").expect("a key route");
        let after = test_topology(
            2,
            2,
            r#"
[tables.t]
rule = "hash_slot"
column = "id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
[tables.t.indexes.email]
[tables.t_email_gsi]
rule = "hash_slot"
column = "v_hash"
slots = [{ slots = "0-1023", node = "ds1" }]
"#,
        );
        let params = [Value::Int(1), Value::Int(2)];
        assert!(write.resolve(&before, &params).is_some());
        assert_eq!(
            write.resolve(&after, &params),
            None,
            "the index must be kept"
        );
        assert!(
            read.resolve(&after, &params[1..]).is_some(),
            "a read by the key"
        );
        let sql = "INSERT INTO t (id, email) VALUES (?, ?)";
        assert!(analyze(&crate::sql::parse(sql).unwrap(), &after).is_none());
    }

    #[test]
    fn point_statements_route_by_their_key_parameter() {
        for (sql, param) in [
            ("SELECT c FROM t WHERE id = ?", 0),
            ("SELECT c FROM t WHERE c = ? AND id = ?", 1),
            (
                "SELECT x.c FROM t AS x WHERE x.id = ? ORDER BY c LIMIT ?",
                0,
            ),
            ("SELECT SUM(v) FROM t WHERE id = ? GROUP BY c", 0),
            ("UPDATE t SET v = v + ? WHERE id = ?", 1),
            ("DELETE FROM t WHERE id = ?", 0),
            ("INSERT INTO t (c, id, v) VALUES (?, ?, ?)", 1),
            ("SELECT * FROM r WHERE k = ?", 0),
        ] {
            assert_eq!(a(sql).map(|k| k.param), Some(param), "{sql}");
        }
    }

    #[test]
    fn other_shapes_are_planned_at_every_execution() {
        for sql in [
            "SELECT c FROM t WHERE id = ? OR c = ?",
            "SELECT c FROM t WHERE id IN (?, ?)",
            "SELECT c FROM t WHERE id = -?",
            "SELECT c FROM t WHERE id = ? + 1",
            "SELECT c FROM t WHERE id = 5",
            "SELECT c FROM t WHERE c = ?",
            "SELECT c FROM t JOIN t AS u ON t.id = u.id WHERE t.id = ?",
            "SELECT c FROM t WHERE id = ? AND c IN (SELECT c FROM b)",
            "SELECT c FROM b WHERE id = ?",
            "UPDATE t SET id = ? WHERE id = ?",
            "INSERT INTO t (c, id) VALUES (?, ?), (?, ?)",
            "INSERT INTO t (c, id) VALUES (?, ?) ON DUPLICATE KEY UPDATE c = ?",
            "INSERT INTO t (c, id) SELECT c, id FROM t WHERE id = ?",
            "INSERT INTO g (c, id) VALUES (?, ?)",
            "SELECT c FROM t WHERE r.id = ?",
        ] {
            assert_eq!(a(sql), None, "{sql}");
        }
    }

    #[test]
    fn resolved_in_the_snapshot_of_each_execution() {
        let t = topo();
        let k = a("SELECT c FROM t WHERE id = ?").unwrap();
        let on = |v: i64| k.resolve(&t, &[Value::Int(v)]).unwrap().node;
        let (lo, hi) = (
            (1..)
                .find(|v| slot_of(&Value::Int(*v)).unwrap() < 512)
                .unwrap(),
            (1..)
                .find(|v| slot_of(&Value::Int(*v)).unwrap() >= 512)
                .unwrap(),
        );
        assert_eq!((on(lo), on(hi)), (0, 1));
        assert_eq!(k.resolve(&t, &[Value::NULL]), None);
        // A string an integer column reads as another integer: planned in full.
        assert_eq!(k.resolve(&t, &[Value::Bytes(b"012".to_vec())]), None);
        // The same key as a string routes alike (CRC32 of its text).
        assert_eq!(
            k.resolve(&t, &[Value::Bytes(lo.to_string().into_bytes())])
                .unwrap()
                .node,
            0
        );
        // All slots moved to ds1: the same plan now resolves there.
        let moved = test_topology(
            2,
            2,
            r#"
[tables.t]
rule = "hash_slot"
column = "id"
slots = [{ slots = "0-1023", node = "ds1" }]
"#,
        );
        assert_eq!(k.resolve(&moved, &[Value::Int(lo)]).unwrap().node, 1);
        // A rule of another kind or column: planned afresh.
        let changed = test_topology(
            3,
            2,
            r#"
[tables.t]
rule = "hash_slot"
column = "c"
slots = [{ slots = "0-1023", node = "ds1" }]
"#,
        );
        assert_eq!(k.resolve(&changed, &[Value::Int(lo)]), None);
        let r = a("SELECT * FROM r WHERE k = ?").unwrap();
        assert_eq!(r.resolve(&t, &[Value::Int(5)]).unwrap().node, 0);
        assert_eq!(r.resolve(&t, &[Value::Int(500)]).unwrap().node, 1);
    }

    /// `t` with slots 0-511 moving from ds0 to ds2 at `step`.
    fn moving(step: &str) -> Topology {
        test_topology(
            2,
            3,
            &format!(
                "[tables.t]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
                 slots = [{{ slots = \"0-511\", node = \"ds0\", to = \"ds2\", step = \"{step}\" }}, {{ slots = \"512-1023\", node = \"ds1\" }}]\n"
            ),
        )
    }

    /// A key in the moving slots.
    fn low_key() -> i64 {
        (1..)
            .find(|v| slot_of(&Value::Int(*v)).unwrap() < 512)
            .unwrap()
    }

    #[test]
    fn a_plain_read_of_a_moving_slot_goes_where_its_reads_go_and_nothing_else_is_cached() {
        let lo = low_key();
        let read = a("SELECT c FROM t WHERE id = ?").unwrap();
        let at = |t: &Topology| read.resolve(t, &[Value::Int(lo)]).map(|r| r.node);
        assert_eq!(
            at(&moving("dual_write")),
            Some(0),
            "reads stay on the source"
        );
        assert_eq!(
            at(&moving("read_target")),
            Some(2),
            "then move to the target"
        );
        for sql in [
            "SELECT c FROM t WHERE id = ? FOR UPDATE",
            "UPDATE t SET c = 1 WHERE id = ?",
            "DELETE FROM t WHERE id = ?",
        ] {
            let k = a(sql).unwrap_or_else(|| panic!("{sql}"));
            assert_eq!(
                k.resolve(&moving("dual_write"), &[Value::Int(lo)]),
                None,
                "{sql}"
            );
        }
    }

    #[test]
    fn a_point_write_to_a_captured_slot_runs_on_the_source_counted_toward_the_target() {
        let lo = low_key();
        let params = [Value::Int(lo)];
        let captured = moving("capture");
        for sql in [
            "UPDATE t SET c = c + 1 WHERE id = ?",
            "DELETE FROM t WHERE id = ?",
            "INSERT INTO t (id, c) VALUES (?, 1)",
        ] {
            let k = a(sql).unwrap_or_else(|| panic!("{sql}"));
            let r = k
                .resolve(&captured, &params)
                .unwrap_or_else(|| panic!("{sql}"));
            assert_eq!((r.node, r.captured), (0, Some(2)), "{sql}");
            let plan = super::super::tests::plan_in(&captured, sql, &params);
            assert!(k.agrees(&plan, &captured, sql, &params), "{sql}: {plan:?}");
            // At the hold, and in the dual-write steps, writes are planned in full.
            for step in ["hold", "dual_write", "freeze"] {
                assert_eq!(k.resolve(&moving(step), &params), None, "{sql} at {step}");
            }
            // A slot that is not moving: no count.
            let hi = (1..)
                .find(|v| slot_of(&Value::Int(*v)).unwrap() >= 512)
                .unwrap();
            let r = k.resolve(&captured, &[Value::Int(hi)]).unwrap();
            assert_eq!((r.node, r.captured), (1, None), "{sql}");
        }
        // A plain read of a captured slot is not counted.
        let read = a("SELECT c FROM t WHERE id = ?").unwrap();
        assert_eq!(read.resolve(&captured, &params).unwrap().captured, None);
        // The full plan must be the captured write toward that target, or it does not agree.
        let k = a("DELETE FROM t WHERE id = ?").unwrap();
        let sql = "DELETE FROM t WHERE id = ?";
        let wrong = Plan::Captured {
            targets: vec![1],
            write: Box::new(Plan::Route(Target {
                node: 0,
                sql: sql.into(),
                params: params.to_vec(),
            })),
        };
        assert!(!k.agrees(&wrong, &captured, sql, &params));
        let bare = Plan::Route(Target {
            node: 0,
            sql: sql.into(),
            params: params.to_vec(),
        });
        assert!(!k.agrees(&bare, &captured, sql, &params));
    }

    #[test]
    fn trusted_only_where_the_full_planner_agrees() {
        let t = topo();
        let sql = "SELECT c FROM t WHERE id = ?";
        let k = a(sql).unwrap();
        let params = [Value::Int(7)];
        let node = k.resolve(&t, &params).unwrap().node;
        let plan = super::super::tests::plan_in(&t, sql, &params);
        assert!(k.agrees(&plan, &t, sql, &params), "{plan:?}");
        let wrong = Plan::Route(Target {
            node: 1 - node,
            sql: sql.into(),
            params: params.to_vec(),
        });
        assert!(!k.agrees(&wrong, &t, sql, &params));
    }
}
