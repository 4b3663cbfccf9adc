//! A bound copy that travels inside the gathered statement ([`super::inline`]), through
//! the fake door: what each node is sent.

use mysql_common::constants::ColumnType;

use super::door::Access;
use super::fake::{Canned, FakeDoor, RecordSink};
use super::gather::run;
use crate::plan::bind::Bind;
use crate::plan::gather::{Gather, Ship};
use crate::routing::slot::SlotMap;

const CREATE: &str = "CREATE TABLE `t_user` (\n  `user_id` int(11) NOT NULL,\n  `name` varchar(20) DEFAULT NULL,\n  PRIMARY KEY (`user_id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci";

const SQL: &str = "SELECT * FROM t_order o JOIN `__sp_ship_0` AS t_user ON o.u = t_user.user_id";

/// A statement gathered on node 0, `t_user` (all on node 1) copied by the keys of `o.u`.
fn gather() -> Gather {
    let at = SQL.find('`').map(|a| (a, a + "`__sp_ship_0`".len()));
    Gather {
        node: 0,
        ships: vec![Ship {
            table: "t_user".into(),
            temp: "__sp_ship_0".into(),
            definition: 1,
            reads: vec![(1, "SELECT * FROM `t_user`".into())],
            bind: Some(Bind {
                node: 0,
                keys: "SELECT DISTINCT `o`.`u` FROM `t_order` AS `o` LIMIT 10001".into(),
                head: "SELECT `t_user`.* FROM `t_user` AS `t_user` WHERE `t_user`.`user_id` IN ("
                    .into(),
                map: SlotMap::from_assignment(Box::new([1u16; 1024])),
                on: "t_user.user_id = o.u".into(),
                key: "user_id".into(),
                at,
                by_index: None,
                outer: Default::default(),
            }),
            estimate: None,
            unbound: None,
        }],
        sql: SQL.into(),
        params: vec![],
        why: "test".into(),
    }
}

fn door(create: &str) -> FakeDoor {
    let mut d = FakeDoor::new(2);
    d.answer(
        0,
        "SELECT DISTINCT",
        Canned::typed(
            &[("u", ColumnType::MYSQL_TYPE_LONG)],
            &[&["7"], &["8"], &["NULL"]],
        ),
    );
    d.answer(
        1,
        "SHOW CREATE TABLE",
        Canned::rows(&["Table", "Create Table"], &[&["t_user", create]]),
    );
    d.answer(
        1,
        "IN (",
        Canned::typed(
            &[
                ("user_id", ColumnType::MYSQL_TYPE_LONG),
                ("name", ColumnType::MYSQL_TYPE_VAR_STRING),
            ],
            &[&["7", "O'Brien \"x\""], &["8", "NULL"]],
        ),
    );
    d.answer(0, "JOIN", Canned::rows(&["n"], &[&["joined"]]));
    d
}

/// The gathering node's statements made the copy a temporary table and joined it.
fn made_a_temporary_table(on0: &[String]) {
    for made in [
        "CREATE OR REPLACE TEMPORARY TABLE `__sp_ship_0`",
        "JOIN `__sp_ship_0` AS t_user",
    ] {
        assert!(on0.iter().any(|s| s.contains(made)), "{made}: {on0:?}");
    }
}

#[tokio::test]
async fn a_bound_copy_of_few_rows_travels_inside_the_statement() {
    let mut d = door(CREATE);
    let mut sink = RecordSink::text();
    run(&mut d, &mut sink, &gather(), 100, Access::Read)
        .await
        .expect("runs");
    assert_eq!(sink.rows(), vec![vec![Some("joined".to_string())]]);
    assert_eq!(
        d.sql_on(1),
        vec![
            "SHOW CREATE TABLE `t_user`",
            "SELECT `t_user`.* FROM `t_user` AS `t_user` WHERE `t_user`.`user_id` IN (7,8)",
        ]
    );
    // No temporary table made, filled or dropped on the gathering node: the keys, then the
    // statement with the rows in the copy's place.
    let on0 = d.sql_on(0);
    assert_eq!(on0.len(), 2, "{on0:?}");
    assert!(on0[0].starts_with("SELECT DISTINCT"), "{on0:?}");
    let json = br#"[["7","O'Brien \"x\""],["8",null]]"#;
    let mut doc = String::new();
    crate::sql::write::string(&mut doc, json, "utf8mb4");
    assert_eq!(
        on0[1],
        format!(
            "SELECT * FROM t_order o JOIN (SELECT * FROM JSON_TABLE({doc}, '$[*]' COLUMNS (`user_id` int(11) PATH '$[0]' ERROR ON ERROR, `name` varchar(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci PATH '$[1]' ERROR ON ERROR)) AS `__sp_rows` LIMIT 18446744073709551615) AS t_user ON o.u = t_user.user_id"
        )
    );
}

#[tokio::test]
async fn a_table_whose_values_cannot_travel_as_text_gets_its_temporary_table() {
    let create = CREATE.replace("`name` varchar(20)", "`name` double");
    let mut d = door(&create);
    let mut sink = RecordSink::text();
    run(&mut d, &mut sink, &gather(), 100, Access::Read)
        .await
        .expect("runs");
    let on0 = d.sql_on(0);
    made_a_temporary_table(&on0);
    assert_eq!(
        on0.last().map(String::as_str),
        Some("DROP TEMPORARY TABLE IF EXISTS `__sp_ship_0`")
    );
}

#[tokio::test]
async fn rows_that_travel_inside_the_statement_count_against_the_cap() {
    let mut d = door(CREATE);
    let mut sink = RecordSink::text();
    let e = run(&mut d, &mut sink, &gather(), 1, Access::Read)
        .await
        .expect_err("two rows past a cap of one");
    assert_eq!(e.error.code, 1235, "{e:?}");
    assert!(!d.sql_on(0).iter().any(|s| s.contains("JOIN")));
}

/// A node without JSON_TABLE (MariaDB before 10.6) answers 1064 before any row: the copy is
/// made as a temporary table and the statement run again, once.
#[tokio::test]
async fn a_node_that_cannot_parse_the_carried_rows_gets_a_temporary_table() {
    let mut d = door(CREATE);
    d.fail_on(
        0,
        "JSON_TABLE",
        1064,
        "You have an error in your SQL syntax",
    );
    let mut sink = RecordSink::text();
    run(&mut d, &mut sink, &gather(), 100, Access::Read)
        .await
        .expect("runs");
    assert_eq!(sink.rows(), vec![vec![Some("joined".to_string())]]);
    let on0 = d.sql_on(0);
    assert_eq!(
        on0.iter().filter(|s| s.contains("JSON_TABLE")).count(),
        1,
        "{on0:?}"
    );
    made_a_temporary_table(&on0);
}

/// The client's own syntax error is its answer, not tried twice.
#[tokio::test]
async fn a_statement_that_fails_without_carried_rows_is_not_run_again() {
    let mut d = door(
        CREATE
            .replace("`name` varchar(20)", "`name` double")
            .as_str(),
    );
    d.fail_on(0, "JOIN", 1064, "You have an error in your SQL syntax");
    let mut sink = RecordSink::text();
    let e = run(&mut d, &mut sink, &gather(), 100, Access::Read)
        .await
        .expect_err("the node's error");
    assert_eq!(e.error.code, 1064);
    let on0 = d.sql_on(0);
    assert_eq!(
        on0.iter().filter(|s| s.contains("JOIN")).count(),
        1,
        "{on0:?}"
    );
}

/// The keys' node is the one planned for the definition: the definition is read on another
/// node of the table, at the same time as the keys.
#[tokio::test]
async fn the_definition_is_read_beside_the_keys_on_another_node() {
    let mut d = door(CREATE);
    d.answer(
        0,
        "IN (",
        Canned::typed(
            &[
                ("user_id", ColumnType::MYSQL_TYPE_LONG),
                ("name", ColumnType::MYSQL_TYPE_VAR_STRING),
            ],
            &[],
        ),
    );
    let mut g = gather();
    g.ships[0].definition = 0;
    if let Some(b) = g.ships[0].bind.as_mut() {
        let mut nodes = Box::new([0u16; 1024]);
        for (s, n) in nodes.iter_mut().enumerate() {
            *n = u16::from(s >= 512);
        }
        b.map = SlotMap::from_assignment(nodes);
    }
    let mut sink = RecordSink::text();
    run(&mut d, &mut sink, &g, 100, Access::Read)
        .await
        .expect("runs");
    assert_eq!(d.sql_on(1)[0], "SHOW CREATE TABLE `t_user`");
    let on0 = d.sql_on(0);
    assert!(!on0.iter().any(|s| s.starts_with("SHOW CREATE")), "{on0:?}");
    assert!(on0.iter().any(|s| s.contains("JSON_TABLE")), "{on0:?}");
}

/// A prepared statement's answer (binary rows) comes from a statement the node prepares and
/// keeps by its text: its rows go as a parameter, so that text stays the same.
#[tokio::test]
async fn a_binary_answer_gets_its_rows_as_a_parameter() {
    let mut d = door(CREATE);
    let mut sink = RecordSink {
        binary: true,
        ..RecordSink::text()
    };
    run(&mut d, &mut sink, &gather(), 100, Access::Read)
        .await
        .expect("runs");
    let on0: Vec<(usize, String)> = d.log().into_iter().filter(|(n, _)| *n == 0).collect();
    assert_eq!(on0.len(), 2, "{on0:?}");
    let at = d.log().len() - 1;
    let (node, sql) = &d.log()[at];
    assert_eq!(*node, 0);
    assert_eq!(
        sql.as_str(),
        SQL.replace("`__sp_ship_0`", &carried_as_parameter())
    );
    assert_eq!(
        d.bound[at],
        vec![mysql_common::value::Value::Bytes(
            br#"[["7","O'Brien \"x\""],["8",null]]"#.to_vec()
        )]
    );
    made_no_temporary_table(&d.sql_on(0));
}

/// The derived table of `t_user`'s rows, read from a parameter.
fn carried_as_parameter() -> String {
    "(SELECT * FROM JSON_TABLE(CONVERT(? USING utf8mb4), '$[*]' COLUMNS (`user_id` int(11) PATH '$[0]' ERROR ON ERROR, `name` varchar(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci PATH '$[1]' ERROR ON ERROR)) AS `__sp_rows` LIMIT 18446744073709551615)".into()
}

fn made_no_temporary_table(on0: &[String]) {
    assert!(!on0.iter().any(|s| s.contains("TEMPORARY")), "{on0:?}");
}
