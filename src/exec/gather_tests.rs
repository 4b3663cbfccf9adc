//! The gathered plan's execution through the fake door: what each node is sent.

use super::*;
use crate::exec::fake::{Canned, FakeDoor, RecordSink};
use crate::exec::shipped;
use crate::plan::gather::{Ship, Shipped};
use mysql_common::constants::ColumnType;

const CREATE_USER: &str = "CREATE TABLE `t_user` (\n  `user_id` int(11) NOT NULL,\n  `name` varchar(20) DEFAULT NULL,\n  `org` int(11) DEFAULT NULL,\n  PRIMARY KEY (`user_id`),\n  KEY `org` (`org`),\n  CONSTRAINT `fk_org` FOREIGN KEY (`org`) REFERENCES `t_org` (`id`)\n) ENGINE=InnoDB AUTO_INCREMENT=17 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci\n PARTITION BY HASH (`user_id`)\nPARTITIONS 4";

fn gather() -> Gather {
    Gather {
        node: 0,
        ships: vec![Ship {
            table: "t_user".into(),
            temp: "__sp_ship_0".into(),
            definition: 1,
            reads: vec![
                (1, "SELECT * FROM `t_user`".into()),
                (0, "SELECT * FROM `t_user`".into()),
            ],
            bind: None,
            estimate: None,
            unbound: None,
        }],
        sql: "SELECT * FROM t_order o JOIN `__sp_ship_0` AS t_user ON o.u = t_user.user_id".into(),
        params: Vec::new(),
        why: "test".into(),
    }
}

fn door() -> FakeDoor {
    let mut d = FakeDoor::new(2);
    d.answer(
        1,
        "SHOW CREATE TABLE",
        Canned::rows(&["Table", "Create Table"], &[&["t_user", CREATE_USER]]),
    );
    d.answer(
        1,
        "SELECT * FROM `t_user`",
        Canned::typed(
            &[
                ("user_id", ColumnType::MYSQL_TYPE_LONG),
                ("name", ColumnType::MYSQL_TYPE_VAR_STRING),
            ],
            &[&["1", "O'Brien \\ x"], &["2", "NULL"]],
        ),
    );
    d.answer(0, "JOIN", Canned::rows(&["n"], &[&["joined"]]));
    d
}

#[test]
fn a_definition_becomes_a_temporary_table() {
    let t = temporary_definition(CREATE_USER, "__sp_ship_0").expect("converts");
    assert!(
        t.starts_with("CREATE TEMPORARY TABLE `__sp_ship_0` (\n  `user_id`"),
        "{t}"
    );
    assert!(t.contains("KEY `org` (`org`)\n)"), "{t}");
    assert!(
        !t.contains("FOREIGN KEY") && !t.contains("PARTITION") && !t.contains("AUTO_INCREMENT="),
        "{t}"
    );
    assert!(
        t.ends_with("ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"),
        "{t}"
    );
    assert!(temporary_definition("CREATE ALGORITHM=UNDEFINED VIEW `v` AS select 1", "x").is_err());
    let hidden = "CREATE TABLE `h` (\n  `a` int(11) DEFAULT NULL,\n  `c` int(11) DEFAULT NULL INVISIBLE\n) ENGINE=InnoDB";
    assert!(temporary_definition(hidden, "x").is_err());
}

#[tokio::test]
async fn copies_then_runs_then_drops() {
    let mut d = door();
    let mut sink = RecordSink::text();
    run(&mut d, &mut sink, &gather(), 100, Access::Read)
        .await
        .expect("runs");
    assert_eq!(sink.rows(), vec![vec![Some("joined".to_string())]]);
    let on0 = d.sql_on(0);
    assert_eq!(on0.len(), 4, "{on0:?}");
    // The gathering node's own rows make the copy there, the other node's come through
    // the proxy.
    assert!(
        on0[0].starts_with(&format!(
            "{LENIENT}CREATE OR REPLACE TEMPORARY TABLE `__sp_ship_0`"
        )),
        "{on0:?}"
    );
    assert!(
        on0[0].ends_with("COLLATE=utf8mb4_general_ci SELECT * FROM `t_user`"),
        "{on0:?}"
    );
    assert_eq!(
        on0[1],
        "INSERT INTO `__sp_ship_0` VALUES (1,_utf8mb4 X'4F27427269656E205C2078'),(2,NULL)"
    );
    assert!(on0[2].contains("JOIN `__sp_ship_0` AS t_user"), "{on0:?}");
    assert_eq!(on0[3], "DROP TEMPORARY TABLE IF EXISTS `__sp_ship_0`");
    assert_eq!(
        d.sql_on(1),
        vec!["SHOW CREATE TABLE `t_user`", "SELECT * FROM `t_user`"]
    );
}

/// A copy bound by the join's keys: the keys (on the gathering node) and the definition
/// (on another) are read at once, then only the rows of those keys; a node with none of
/// them is not read, and the gathering node's own rows make the copy.
#[tokio::test]
async fn a_bound_copy_reads_its_keys_and_definition_together_then_their_rows() {
    let mut d = door();
    d.answer(
        0,
        "SELECT DISTINCT",
        Canned::typed(&[("u", ColumnType::MYSQL_TYPE_LONG)], &[&["7"], &["NULL"]]),
    );
    let mut g = gather();
    g.ships[0].bind = Some(crate::plan::bind::Bind {
        node: 0,
        keys: "SELECT DISTINCT `o`.`u` FROM `t_order` AS `o` LIMIT 10001".into(),
        head: "SELECT `t_user`.* FROM `t_user` AS `t_user` WHERE `t_user`.`user_id` IN (".into(),
        map: crate::routing::slot::SlotMap::from_assignment(Box::new([0u16; 1024])),
        on: "t_user.user_id = o.u".into(),
        key: "user_id".into(),
        at: None,
        by_index: None,
        outer: Default::default(),
    });
    let mut sink = RecordSink::text();
    run(&mut d, &mut sink, &g, 100, Access::Read)
        .await
        .expect("runs");
    assert_eq!(d.sql_on(1), vec!["SHOW CREATE TABLE `t_user`"]);
    let on0 = d.sql_on(0);
    assert_eq!(on0.len(), 4, "{on0:?}");
    assert!(on0[0].starts_with("SELECT DISTINCT"), "{on0:?}");
    assert!(
        on0[1].ends_with(
            " SELECT `t_user`.* FROM `t_user` AS `t_user` WHERE `t_user`.`user_id` IN (7)"
        ),
        "{on0:?}"
    );
    assert!(on0[2].contains("JOIN `__sp_ship_0`"), "{on0:?}");
    assert_eq!(on0[3], "DROP TEMPORARY TABLE IF EXISTS `__sp_ship_0`");
}

/// The other nodes' rows are read from all of them at once and inserted in one INSERT.
#[tokio::test]
async fn rows_of_several_nodes_go_in_one_insert() {
    let mut d = FakeDoor::new(3);
    d.answer(
        1,
        "SHOW CREATE TABLE",
        Canned::rows(&["Table", "Create Table"], &[&["t_user", CREATE_USER]]),
    );
    for (node, id) in [(1, "1"), (2, "2")] {
        d.answer(
            node,
            "SELECT * FROM `t_user`",
            Canned::typed(&[("user_id", ColumnType::MYSQL_TYPE_LONG)], &[&[id]]),
        );
    }
    d.answer(0, "JOIN", Canned::rows(&["n"], &[&["joined"]]));
    let mut g = gather();
    g.ships[0].reads = vec![
        (1, "SELECT * FROM `t_user`".into()),
        (2, "SELECT * FROM `t_user`".into()),
    ];
    run(&mut d, &mut RecordSink::text(), &g, 100, Access::Read)
        .await
        .expect("runs");
    let inserts: Vec<String> = d
        .sql_on(0)
        .into_iter()
        .filter(|s| s.starts_with("INSERT"))
        .collect();
    assert_eq!(inserts, vec!["INSERT INTO `__sp_ship_0` VALUES (1),(2)"]);
}

#[tokio::test]
async fn a_failure_anywhere_still_drops_the_copies() {
    let mut d = door();
    d.fail_on(0, "JOIN", 1054, "Unknown column 'x'");
    let mut sink = RecordSink::text();
    let e = run(&mut d, &mut sink, &gather(), 100, Access::Read)
        .await
        .expect_err("fails");
    assert_eq!(e.error.code, 1054);
    assert_eq!(
        d.sql_on(0).last().map(String::as_str),
        Some("DROP TEMPORARY TABLE IF EXISTS `__sp_ship_0`")
    );

    let mut d = door();
    d.fail_on(
        1,
        "SELECT * FROM `t_user`",
        1146,
        "Table 't_user' doesn't exist",
    );
    let e = run(
        &mut d,
        &mut RecordSink::text(),
        &gather(),
        100,
        Access::Read,
    )
    .await
    .expect_err("fails");
    assert_eq!(e.error.code, 1146);
    assert!(!d.sql_on(0).iter().any(|s| s.contains("JOIN")));
    assert_eq!(
        d.sql_on(0).last().map(String::as_str),
        Some("DROP TEMPORARY TABLE IF EXISTS `__sp_ship_0`")
    );
}

#[tokio::test]
async fn shipped_copies_go_to_every_node_of_the_plan() {
    use crate::plan::{OkMerge, Plan, Target};
    let mut d = door();
    d.answer(1, "JOIN", Canned::rows(&["n"], &[&["on ds1"]]));
    let ship = gather().ships.remove(0);
    let target = |node| Target {
        node,
        sql: "SELECT n FROM t_order o JOIN `__sp_ship_0` AS t_user ON o.u = t_user.user_id".into(),
        params: Vec::new(),
    };
    let s = Shipped {
        ships: vec![ship],
        then: Plan::Scatter {
            targets: vec![target(0), target(1)],
            ok: OkMerge::Sum,
        },
        sql: String::new(),
        why: "test".into(),
        estimate: None,
    };
    let topo = crate::plan::rules_tests::topo();
    let mut sink = RecordSink::text();
    shipped(&mut d, &mut sink, &s, &topo, Access::Read)
        .await
        .expect("runs");
    let mut rows = sink.rows();
    rows.sort();
    assert_eq!(
        rows,
        vec![
            vec![Some("joined".to_string())],
            vec![Some("on ds1".to_string())]
        ]
    );
    // Each node's own rows are copied there; the other's go through the proxy once.
    let on1 = d.sql_on(1);
    assert!(
        on1.contains(&format!(
            "{LENIENT}INSERT INTO `__sp_ship_0` SELECT * FROM `t_user`"
        )),
        "{on1:?}"
    );
    assert_eq!(
        on1.iter()
            .filter(|s| s.as_str() == "SELECT * FROM `t_user`")
            .count(),
        1
    );
    let on0 = d.sql_on(0);
    assert!(
        on0.contains(&format!(
            "{LENIENT}INSERT INTO `__sp_ship_0` SELECT * FROM `t_user`"
        )),
        "{on0:?}"
    );
    assert!(
        on0.iter()
            .any(|s| s.starts_with("INSERT INTO `__sp_ship_0` VALUES (1,")),
        "{on0:?}"
    );
    for log in [&on0, &on1] {
        assert_eq!(
            log.last().map(String::as_str),
            Some("DROP TEMPORARY TABLE IF EXISTS `__sp_ship_0`")
        );
    }
}

#[tokio::test]
async fn copies_count_against_the_row_cap() {
    let mut d = door();
    let e = run(&mut d, &mut RecordSink::text(), &gather(), 1, Access::Read)
        .await
        .expect_err("over the cap");
    assert!(
        e.error.message.contains("max_rows_per_statement"),
        "{}",
        e.error.message
    );
    assert!(!d.sql_on(0).iter().any(|s| s.contains("JOIN")));
}
