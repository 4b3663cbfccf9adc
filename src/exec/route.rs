//! Route: one node answers, and its answer is relayed as it arrives. Also the two routes
//! with a choice of node: any reachable copy (broadcast reads) and the session's sticky node
//! (statements that name no table).

use mysql_common::value::Value;

use super::door::{Access, Door, NodeError, NodeResult, Run, Sink, Stmt};
use crate::error::MyError;

/// Runs `stmt` on `node` and relays every result of it.
pub async fn single<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    node: usize,
    stmt: Stmt<'_>,
    access: Access,
) -> Result<(), NodeError> {
    let run = Run {
        access,
        binary: sink.binary(),
    };
    // LAST_INSERT_ID(expr) in a query sets the id without an OK to report it.
    let sets_id = crate::sql::seen::sets_insert_id(stmt.sql, door.state().mode);
    let res = door.start(node, stmt, run).await?;
    let generated = relay(res, sink).await?;
    door.ran_on(node, generated != 0 || sets_id);
    Ok(())
}

/// Writes one node's answer to the client as it arrives: every result set of it (a CALL
/// returns several) when the client takes multiple results, each but the last flagged
/// SERVER_MORE_RESULTS_EXISTS; only the first otherwise. Returns the generated insert id.
pub async fn relay<R: NodeResult, K: Sink>(mut res: R, sink: &mut K) -> Result<u64, NodeError> {
    let status = res.status();
    let multi = sink.multi_results();
    let mut generated = 0;
    loop {
        let follows = if let Some(cols) = res.columns() {
            sink.columns(&cols, status);
            // Reading the last row also moves to the next result set, if there is one.
            res.relay_rows(sink).await?;
            let follows = res.pending();
            sink.end(status, res.warnings(), follows && multi);
            follows
        } else {
            let ok = res.ok();
            if generated == 0 {
                generated = ok.last_insert_id;
            }
            // Moves past this OK to the next result set, if there is one.
            let _ = res.next().await?;
            let follows = res.pending();
            sink.ok(&ok, status, follows && multi);
            follows
        };
        if !follows || !multi {
            break;
        }
    }
    res.finish().await?;
    Ok(generated)
}

/// Runs on the first reachable of `nodes` (the transaction's node first): for statements
/// any copy can answer. A copy whose connection broke before anything reached the client
/// hands over to the next.
pub async fn any_copy<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    mut nodes: Vec<usize>,
    sql: &str,
    params: &[Value],
    access: Access,
) -> Result<(), MyError> {
    if let Some(i) = door
        .tx_node()
        .and_then(|n| nodes.iter().position(|m| *m == n))
    {
        nodes[..=i].rotate_right(1);
    }
    let mut last = MyError::internal("shardproxy: no node in service");
    for node in nodes {
        if let Err(e) = door.reachable(node).await {
            last = e;
            continue;
        }
        let before = sink.written();
        match single(door, sink, node, Stmt::new(sql, params), access).await {
            Err(e) if e.broke && sink.written() == before => last = e.error,
            other => return other.map_err(MyError::from),
        }
    }
    Err(last)
}

/// Clears a connection's diagnostics area and leaves nothing in it: MariaDB clears it only
/// for a statement that reads a table (a derived one will do), or one that warns.
pub const CLEAR_DIAGNOSTICS: &str = "DO (SELECT 1 FROM (SELECT 1) AS t)";

/// A statement that names no table: where the session ran last (its transaction's node, or
/// the node holding its `LAST_INSERT_ID()` when it asks for it); with nothing tying the
/// session to a node yet (a driver's connect-time `SELECT @@max_allowed_packet`), any
/// reachable node answers, the default first, so a default node that is down refuses nobody.
pub async fn sticky<D: Door, K: Sink>(
    door: &mut D,
    sink: &mut K,
    sql: &str,
    params: &[Value],
    default: usize,
    all: Vec<usize>,
    access: Access,
) -> Result<(), MyError> {
    // Named locks are one lock for every session only on one server: the default node's.
    if crate::sql::uservars::names_a_lock(sql) {
        return single(door, sink, default, Stmt::new(sql, params), access)
            .await
            .map_err(MyError::from);
    }
    let asks_insert_id = {
        let lower = sql.to_ascii_lowercase();
        lower.contains("last_insert_id") || lower.contains("@@identity")
    };
    match door.sticky(asks_insert_id, default) {
        Some(node) => {
            // The diagnostics area of a connection the session did not keep is another
            // statement's (the pool's last user's, the proxy's own SETs): cleared first, as
            // the session's own clean last statement left it.
            if crate::sql::seen::reads_diagnostics(sql)
                && !(door.state().diagnostics && door.holds(node))
            {
                door.fetch(node, CLEAR_DIAGNOSTICS).await?;
            }
            single(door, sink, node, Stmt::new(sql, params), access)
                .await
                .map_err(MyError::from)
        }
        None => {
            let mut nodes = all;
            nodes.retain(|n| *n != default);
            nodes.insert(0, default);
            any_copy(door, sink, nodes, sql, params, access).await
        }
    }
}

/// A statement the proxy cannot parse that names sharded tables: `node` parses it without
/// running it, so a real syntax error is the node's own; otherwise it is refused.
pub async fn unroutable<D: Door>(
    door: &mut D,
    node: usize,
    sql: &str,
    reason: &str,
) -> Result<(), MyError> {
    door.check_syntax(node, sql).await?;
    Err(MyError::unsupported(reason))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::fake::{Canned, Event, FakeDoor, RecordSink};

    #[tokio::test]
    async fn a_route_relays_its_node_answer_and_remembers_the_node() {
        let mut door = FakeDoor::new(3);
        door.answer(
            1,
            "SELECT",
            Canned::rows(&["id", "v"], &[&["7", "a"], &["8", "b"]]),
        );
        let mut sink = RecordSink::text();
        single(
            &mut door,
            &mut sink,
            1,
            Stmt::new("SELECT id, v FROM t", &[]),
            Access::Read,
        )
        .await
        .unwrap();
        assert_eq!(door.log(), vec![(1, "SELECT id, v FROM t".to_string())]);
        assert_eq!(
            sink.events,
            vec![
                Event::Columns(vec!["id".into(), "v".into()]),
                Event::Row(vec![Some("7".into()), Some("a".into())]),
                Event::Row(vec![Some("8".into()), Some("b".into())]),
                Event::End {
                    warnings: 0,
                    more: false
                },
            ]
        );
        assert_eq!(door.sticky(false, 0), Some(1));
    }

    #[tokio::test]
    async fn an_insert_id_is_asked_where_it_was_generated() {
        let mut door = FakeDoor::new(3);
        door.answer(2, "INSERT", Canned::ok(1, 77));
        door.answer_any("SELECT", Canned::rows(&["LAST_INSERT_ID()"], &[&["77"]]));
        let mut sink = RecordSink::text();
        single(
            &mut door,
            &mut sink,
            2,
            Stmt::new("INSERT INTO t VALUES (1)", &[]),
            Access::Write,
        )
        .await
        .unwrap();
        single(
            &mut door,
            &mut sink,
            0,
            Stmt::new("SELECT 1 FROM t0", &[]),
            Access::Read,
        )
        .await
        .unwrap();
        sticky(
            &mut door,
            &mut sink,
            "SELECT LAST_INSERT_ID()",
            &[],
            0,
            vec![0, 1, 2],
            Access::Read,
        )
        .await
        .unwrap();
        assert_eq!(door.log().last().unwrap().0, 2);
        sticky(
            &mut door,
            &mut sink,
            "SELECT 1",
            &[],
            0,
            vec![0, 1, 2],
            Access::Read,
        )
        .await
        .unwrap();
        assert_eq!(door.log().last().unwrap().0, 2, "the last statement's node");
    }

    #[tokio::test]
    async fn show_warnings_on_a_connection_not_kept_sees_a_clean_slate() {
        let mut door = FakeDoor::new(2);
        door.answer_any("SHOW", Canned::rows(&["Level", "Code", "Message"], &[]));
        door.answer_any("DO (", Canned::ok(0, 0));
        let mut sink = RecordSink::text();
        door.state_mut().last_node = Some(1);
        sticky(
            &mut door,
            &mut sink,
            "SHOW WARNINGS",
            &[],
            0,
            vec![0, 1],
            Access::Read,
        )
        .await
        .unwrap();
        assert_eq!(
            door.log(),
            vec![
                (1, CLEAR_DIAGNOSTICS.to_string()),
                (1, "SHOW WARNINGS".to_string())
            ],
            "its last statement left nothing, the lent connection's area is cleared"
        );
        // The last statement left warnings on the connection the session kept: asked as is.
        door.state_mut().diagnostics = true;
        door.held.insert(1);
        sticky(
            &mut door,
            &mut sink,
            "SHOW WARNINGS",
            &[],
            0,
            vec![0, 1],
            Access::Read,
        )
        .await
        .unwrap();
        assert_eq!(door.log().len(), 3);
        assert_eq!(door.log()[2], (1, "SHOW WARNINGS".to_string()));
    }

    #[tokio::test]
    async fn any_copy_skips_unreachable_and_broken_copies() {
        let mut door = FakeDoor::new(3);
        door.down(0);
        door.break_on(1, "SELECT");
        door.answer(2, "SELECT", Canned::rows(&["c"], &[&["x"]]));
        let mut sink = RecordSink::text();
        any_copy(
            &mut door,
            &mut sink,
            vec![0, 1, 2],
            "SELECT c FROM b",
            &[],
            Access::Read,
        )
        .await
        .unwrap();
        assert_eq!(
            door.log(),
            vec![(1, "SELECT c FROM b".into()), (2, "SELECT c FROM b".into())]
        );
        assert_eq!(sink.rows().len(), 1);
    }

    #[tokio::test]
    async fn a_server_error_is_the_answer_not_a_reason_to_ask_another_copy() {
        let mut door = FakeDoor::new(2);
        door.fail_on(0, "SELECT", 1146, "Table 'shop.b' doesn't exist");
        let mut sink = RecordSink::text();
        let e = any_copy(
            &mut door,
            &mut sink,
            vec![0, 1],
            "SELECT c FROM b",
            &[],
            Access::Read,
        )
        .await
        .unwrap_err();
        assert_eq!(e.code, 1146);
        assert_eq!(door.log().len(), 1);
    }

    #[tokio::test]
    async fn unroutable_statements_get_the_nodes_syntax_error_or_1235() {
        let mut door = FakeDoor::new(1);
        let e = unroutable(&mut door, 0, "SELEC 1 FROM t", "cannot parse")
            .await
            .unwrap_err();
        assert_eq!(e.code, 1235);
        door.fail_on(0, "SELEC", 1064, "You have an error in your SQL syntax");
        let e = unroutable(&mut door, 0, "SELEC 1 FROM t", "cannot parse")
            .await
            .unwrap_err();
        assert_eq!(e.code, 1064);
    }

    #[tokio::test]
    async fn every_result_of_a_call_is_relayed_to_clients_that_take_them() {
        let mut door = FakeDoor::new(1);
        door.answer(
            0,
            "CALL",
            Canned::Many(vec![
                Canned::rows(&["a"], &[&["1"]]),
                Canned::rows(&["b"], &[&["2"]]),
                Canned::ok(0, 0),
            ]),
        );
        let mut sink = RecordSink::text();
        sink.multi = true;
        single(
            &mut door,
            &mut sink,
            0,
            Stmt::new("CALL p()", &[]),
            Access::Write,
        )
        .await
        .unwrap();
        let ends: Vec<&Event> = sink
            .events
            .iter()
            .filter(|e| matches!(e, Event::End { .. } | Event::Ok { .. }))
            .collect();
        assert_eq!(
            ends,
            vec![
                &Event::End {
                    warnings: 0,
                    more: true
                },
                &Event::End {
                    warnings: 0,
                    more: true
                },
                &Event::Ok {
                    affected: 0,
                    last_insert_id: 0,
                    more: false
                },
            ]
        );
    }
}
