//! Runs an UPDATE of a shard key ([`KeyUpdate`]): reads the matching rows with their new
//! values, locked, then deletes each row that moves from its node and inserts it on its new
//! one, and updates each row that stays by its primary key, all in one transaction (the
//! client's, or the proxy's own around an autocommit statement). Answers as MariaDB's
//! UPDATE does: `Rows matched: M  Changed: C`, the affected rows those changed (or matched,
//! for a client with CLIENT_FOUND_ROWS, whose node connections count so too).

use std::collections::BTreeMap;
use std::sync::Arc;

use mysql_common::packets::Column;
use mysql_common::value::Value;

use super::collect::Collect;
use super::door::{Access, Door, NodeError, NodeResult, OkInfo, Run, Sink, Stmt};
use super::txn::Transactions;
use crate::config::{TableRule, Topology};
use crate::error::MyError;
use crate::plan::key_update::KeyUpdate;
use crate::plan::Plan;
use crate::sql::write::{quoted, typed};

/// Rows per generated DELETE or INSERT.
const BATCH: usize = 500;

/// Runs `k`, whose rows `read` (its SELECT, planned) reads, and answers the client.
pub async fn run<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    topo: &Topology,
    k: &KeyUpdate,
    read: &Plan,
) -> Result<(), MyError> {
    let st = door.state();
    let implicit = st.tx.is_none() && st.autocommit && !st.ddl;
    if implicit {
        door.state_mut().begin("BEGIN");
    }
    let r = apply(door, topo, k, read, !implicit).await;
    match r {
        Ok(ok) => {
            if implicit {
                door.end(true).await?;
            }
            sink.ok(&ok, door.status(), false);
            Ok(())
        }
        Err(e) => {
            if implicit {
                let _ = door.end(false).await;
            }
            door.settle_tx().await;
            Err(e)
        }
    }
}

/// What each read row becomes.
#[derive(Default)]
struct Writes {
    /// Rows that stay, by node: their UPDATE by primary key.
    updates: BTreeMap<usize, Vec<String>>,
    /// Rows that move: their keys' tuples by old node, their new rows' tuples by new node.
    deletes: BTreeMap<usize, Vec<String>>,
    inserts: BTreeMap<usize, Vec<String>>,
    moved: u64,
}

async fn apply<D: Door>(
    door: &mut D,
    topo: &Topology,
    k: &KeyUpdate,
    read: &Plan,
    in_client_tx: bool,
) -> Result<OkInfo, MyError> {
    let cap = topo.max_rows_per_statement;
    let mut rows = Collect::new(cap);
    // A locking read: its branches take the locks; the writes below open them for writing.
    super::run(read, topo, Access::Read, door, &mut rows).await?;
    if rows.over || rows.bad {
        return Err(MyError::unsupported(format!(
            "shardproxy: this UPDATE of the shard key of `{}` matches more than {cap} rows (max_rows_per_statement) or {} MiB; update them in parts",
            k.table,
            super::held::HELD_BYTES >> 20
        )));
    }
    let matched = rows.rows.len() as u64;
    let Some(cols) = rows.cols.clone() else {
        return Ok(answer(matched, 0, 0, 0));
    };
    let w = plan_writes(topo, k, &cols, &rows.rows)?;
    drop(rows);
    let mut nodes: Vec<usize> = w
        .updates
        .keys()
        .chain(w.deletes.keys())
        .chain(w.inserts.keys())
        .copied()
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    // Inside the client's transaction a failed statement is undone, not the transaction.
    let guarded = in_client_tx && super::txn::savepoint_on(door, &nodes).await?;
    match write(door, k, &w).await {
        Ok((affected, changed, warnings)) => Ok(answer(
            matched,
            changed + w.moved,
            affected + w.moved,
            warnings,
        )),
        Err(e) => {
            if guarded {
                super::txn::undo_statement(door, &nodes).await;
            }
            Err(e.into())
        }
    }
}

fn answer(matched: u64, changed: u64, affected: u64, warnings: u16) -> OkInfo {
    OkInfo {
        affected,
        last_insert_id: 0,
        warnings,
        info: format!("Rows matched: {matched}  Changed: {changed}  Warnings: {warnings}"),
    }
}

/// The node a row with routing value `v` belongs on (`by`: its salt column, for a salted
/// key).
fn node_of(
    topo: &Topology,
    table: &str,
    v: Option<&Value>,
    by: Option<&Value>,
) -> Result<usize, MyError> {
    let no = |why: &str| {
        MyError::unsupported(format!(
            "shardproxy: the new shard key of a row of `{table}` {why}"
        ))
    };
    let v = match v {
        None | Some(Value::NULL) => return Err(no("is NULL, which places it on no node")),
        Some(v) => v,
    };
    match topo.table(table) {
        Some(TableRule::HashSlot { map, .. }) => map.node_of_row(v, by).ok_or_else(|| {
            no("is salted, and the row's salt column is NULL, which places it in no bucket")
        }),
        Some(TableRule::Range { map, .. }) => map
            .kind
            .key_of(v)
            .map(|key| map.node_of(&key))
            .ok_or_else(|| no("is outside its ranges")),
        _ => Err(no("has a rule that places no single row")),
    }
}

fn plan_writes(
    topo: &Topology,
    k: &KeyUpdate,
    cols: &Arc<[Column]>,
    rows: &[Vec<Option<Value>>],
) -> Result<Writes, MyError> {
    let width = k.columns.len();
    let lit = |out: &mut String, row: &[Option<Value>], i: usize| match cols.get(i) {
        Some(c) => typed(out, row.get(i).and_then(Option::as_ref), c),
        None => out.push_str("NULL"),
    };
    let key_tuple = |row: &[Option<Value>]| {
        let mut s = String::from("(");
        for (n, i) in k.key.iter().enumerate() {
            if n > 0 {
                s.push_str(", ");
            }
            lit(&mut s, row, *i);
        }
        s.push(')');
        s
    };
    // Where in a read row a column's new value is: after the table's columns if the SET
    // assigns it, else the column itself.
    let set_at = |i: usize| k.assigned.iter().position(|a| *a == i).map(|j| width + j);
    let new_key = set_at(k.shard).unwrap_or(k.shard);
    let mut w = Writes::default();
    for row in rows {
        let at = |i: Option<usize>| i.and_then(|i| row.get(i)).and_then(Option::as_ref);
        let new_by = k.by.map(|b| set_at(b).unwrap_or(b));
        let old = node_of(topo, &k.table, at(Some(k.shard)), at(k.by))?;
        let new = node_of(topo, &k.table, at(Some(new_key)), at(new_by))?;
        if new == old {
            let mut s = format!("UPDATE {} SET ", k.target);
            for (j, a) in k.assigned.iter().enumerate() {
                if j > 0 {
                    s.push_str(", ");
                }
                s.push_str(&quoted(&k.columns[*a]));
                s.push_str(" = ");
                lit(&mut s, row, width + j);
            }
            s.push_str(" WHERE (");
            s.push_str(&key_names(k));
            s.push_str(") = ");
            s.push_str(&key_tuple(row));
            w.updates.entry(old).or_default().push(s);
            continue;
        }
        w.moved += 1;
        w.deletes.entry(old).or_default().push(key_tuple(row));
        let mut t = String::from("(");
        for i in 0..width {
            if i > 0 {
                t.push_str(", ");
            }
            lit(&mut t, row, set_at(i).unwrap_or(i));
        }
        t.push(')');
        w.inserts.entry(new).or_default().push(t);
    }
    Ok(w)
}

fn key_names(k: &KeyUpdate) -> String {
    k.key
        .iter()
        .map(|i| quoted(&k.columns[*i]))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs the writes (the deletes before the inserts, so a row that moves back where a key
/// was freed finds it free); the affected and changed rows of the updates, and warnings.
async fn write<D: Door>(
    door: &mut D,
    k: &KeyUpdate,
    w: &Writes,
) -> Result<(u64, u64, u16), NodeError> {
    let (mut affected, mut changed, mut warnings) = (0u64, 0u64, 0u16);
    for (node, stmts) in &w.updates {
        for sql in stmts {
            let ok = one(door, *node, sql).await?;
            affected += ok.affected;
            changed += changed_of(&ok).unwrap_or(ok.affected);
            warnings = warnings.saturating_add(ok.warnings);
        }
    }
    let columns: Vec<String> = k.columns.iter().map(|c| quoted(c)).collect();
    for (node, keys) in &w.deletes {
        for chunk in keys.chunks(BATCH) {
            let sql = format!(
                "DELETE FROM {} WHERE ({}) IN ({})",
                k.target,
                key_names(k),
                chunk.join(", ")
            );
            let ok = one(door, *node, &sql).await?;
            warnings = warnings.saturating_add(ok.warnings);
        }
    }
    for (node, tuples) in &w.inserts {
        for chunk in tuples.chunks(BATCH) {
            let sql = format!(
                "INSERT INTO {} ({}) VALUES {}",
                k.target,
                columns.join(", "),
                chunk.join(", ")
            );
            let ok = one(door, *node, &sql).await?;
            warnings = warnings.saturating_add(ok.warnings);
        }
    }
    Ok((affected, changed, warnings))
}

async fn one<D: Door>(door: &mut D, node: usize, sql: &str) -> Result<OkInfo, NodeError> {
    let run = Run {
        access: Access::Write,
        binary: false,
    };
    let res = door.start(node, Stmt::new(sql, &[]), run).await?;
    let ok = res.ok();
    res.finish().await?;
    door.ran_on(node, false);
    Ok(ok)
}

/// `Changed: N` of an UPDATE's info (`Rows matched: 1  Changed: 0  Warnings: 0`).
fn changed_of(ok: &OkInfo) -> Option<u64> {
    let at = ok.info.find("Changed: ")? + "Changed: ".len();
    ok.info[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_topology;
    use crate::exec::fake::{Canned, Event, FakeDoor, RecordSink};
    use mysql_common::constants::ColumnType;

    const SELECT: &str = "SELECT `t`.`id`, `t`.`v`, (id + 100) FROM `t` WHERE v > 0 FOR UPDATE";

    fn topo() -> Topology {
        test_topology(
            1,
            2,
            "[tables.t]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
             slots = [{ slots = \"0-511\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds1\" }]\n",
        )
    }

    fn node(topo: &Topology, k: i64) -> usize {
        node_of(topo, "t", Some(&Value::Int(k)), None).unwrap()
    }

    /// Keys on ds0: one whose key + 100 stays on ds0, one whose key + 100 goes to ds1.
    fn keys(topo: &Topology) -> (i64, i64) {
        let on0 = |k: &i64| node(topo, *k) == 0;
        let stays = (1..).find(|k| on0(k) && node(topo, k + 100) == 0).unwrap();
        let moves = (1..).find(|k| on0(k) && node(topo, k + 100) == 1).unwrap();
        (stays, moves)
    }

    fn update() -> KeyUpdate {
        KeyUpdate {
            table: "t".into(),
            target: "`t`".into(),
            select: SELECT.into(),
            columns: vec!["id".into(), "v".into()],
            key: vec![0],
            assigned: vec![0],
            shard: 0,
            by: None,
        }
    }

    fn door(stays: i64, moves: i64) -> FakeDoor {
        let mut d = FakeDoor::new(2);
        let (s, m) = (stays.to_string(), moves.to_string());
        let (s2, m2) = ((stays + 100).to_string(), (moves + 100).to_string());
        d.answer(
            0,
            "SELECT `t`.`id`",
            Canned::typed(
                &[
                    ("id", ColumnType::MYSQL_TYPE_LONGLONG),
                    ("v", ColumnType::MYSQL_TYPE_LONG),
                    ("(id + 100)", ColumnType::MYSQL_TYPE_LONGLONG),
                ],
                &[&[&s, "1", &s2], &[&m, "2", &m2]],
            ),
        );
        d.answer(1, "SELECT `t`.`id`", Canned::rows(&["id", "v", "x"], &[]));
        d.answer(
            0,
            "UPDATE `t`",
            Canned::Ok(OkInfo {
                affected: 1,
                last_insert_id: 0,
                warnings: 0,
                info: "Rows matched: 1  Changed: 1  Warnings: 0".into(),
            }),
        );
        d.answer(0, "DELETE FROM `t`", Canned::ok(1, 0));
        d.answer(1, "INSERT INTO `t`", Canned::ok(1, 0));
        d
    }

    #[tokio::test]
    async fn rows_that_move_are_deleted_and_inserted_and_the_rest_updated_in_one_transaction() {
        let t = topo();
        let (stays, moves) = keys(&t);
        let mut d = door(stays, moves);
        let mut sink = RecordSink::text();
        let read = crate::plan::tests::scatter_of(SELECT, 2);
        run(&mut d, &mut sink, &t, &update(), &read).await.unwrap();
        let on0 = d.sql_on(0);
        let on1 = d.sql_on(1);
        let at = |log: &[String], s: &str| {
            log.iter()
                .position(|x| x.starts_with(s))
                .unwrap_or_else(|| panic!("no `{s}` in {log:?}"))
        };
        assert!(at(&on0, "BEGIN") < at(&on0, "SELECT `t`.`id`"), "{on0:?}");
        let update_sql = format!(
            "UPDATE `t` SET `id` = {} WHERE (`id`) = ({stays})",
            stays + 100
        );
        let delete_sql = format!("DELETE FROM `t` WHERE (`id`) IN (({moves}))");
        assert!(at(&on0, &update_sql) < at(&on0, &delete_sql), "{on0:?}");
        let insert_sql = format!("INSERT INTO `t` (`id`, `v`) VALUES ({}, 2)", moves + 100);
        at(&on1, &insert_sql);
        // Two nodes wrote: a two-phase commit, the client's OK after it.
        assert!(on1.iter().any(|s| s.contains("XA PREPARE")), "{on1:?}");
        assert!(!on1.iter().any(|s| s.contains("SAVEPOINT")), "{on1:?}");
        assert!(at(&on0, &delete_sql) < at(&on0, "COMMIT"), "{on0:?}");
        assert_eq!(
            sink.events,
            vec![Event::Ok {
                affected: 2,
                last_insert_id: 0,
                more: false
            }]
        );
        assert!(
            d.state().tx.is_none(),
            "the statement's own transaction ended"
        );
    }

    #[tokio::test]
    async fn a_failed_insert_rolls_the_whole_statement_back() {
        let t = topo();
        let (stays, moves) = keys(&t);
        let mut d = door(stays, moves);
        d.fail_on(1, "INSERT INTO `t`", 1062, "Duplicate entry");
        let mut sink = RecordSink::text();
        let read = crate::plan::tests::scatter_of(SELECT, 2);
        let e = run(&mut d, &mut sink, &t, &update(), &read)
            .await
            .unwrap_err();
        assert_eq!(e.code, 1062);
        let on0 = d.sql_on(0);
        assert!(on0.iter().any(|s| s.starts_with("ROLLBACK")), "{on0:?}");
        assert!(!on0.iter().any(|s| s == "COMMIT"), "{on0:?}");
        assert!(sink.events.is_empty(), "{:?}", sink.events);
        assert!(d.state().tx.is_none());
    }

    #[tokio::test]
    async fn inside_the_clients_transaction_a_failure_goes_back_to_the_statement_savepoint() {
        let t = topo();
        let (stays, moves) = keys(&t);
        let mut d = door(stays, moves);
        d.fail_on(1, "INSERT INTO `t`", 1062, "Duplicate entry");
        d.begin("BEGIN").await.unwrap();
        let read = crate::plan::tests::scatter_of(SELECT, 2);
        let e = run(&mut d, &mut RecordSink::text(), &t, &update(), &read)
            .await
            .unwrap_err();
        assert_eq!(e.code, 1062);
        for n in [0, 1] {
            let log = d.sql_on(n);
            let set = log
                .iter()
                .position(|s| s == "SAVEPOINT shardproxy_stmt")
                .unwrap_or_else(|| panic!("no savepoint on {n}: {log:?}"));
            let back = log
                .iter()
                .position(|s| s == "ROLLBACK TO SAVEPOINT shardproxy_stmt")
                .unwrap_or_else(|| panic!("no rollback to it on {n}: {log:?}"));
            assert!(set < back);
        }
        assert!(d.state().tx.is_some(), "the client's transaction goes on");
    }

    #[tokio::test]
    async fn a_new_key_that_is_null_fails_before_any_write() {
        let t = topo();
        let mut d = FakeDoor::new(2);
        d.answer_any(
            "SELECT `t`.`id`",
            Canned::rows(&["id", "v", "x"], &[&["1", "1", "NULL"]]),
        );
        let read = crate::plan::tests::scatter_of(SELECT, 2);
        let e = run(&mut d, &mut RecordSink::text(), &t, &update(), &read)
            .await
            .unwrap_err();
        assert_eq!(e.code, crate::error::ER_NOT_SUPPORTED_YET);
        for n in [0, 1] {
            assert!(
                !d.sql_on(n).iter().any(|s| s.starts_with("UPDATE")
                    || s.starts_with("DELETE")
                    || s.starts_with("INSERT")),
                "{:?}",
                d.sql_on(n)
            );
        }
    }
}
