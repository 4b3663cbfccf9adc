use super::*;

fn create(sql: &str) -> View {
    match ddl(sql, Mode::default()) {
        Some(Ok(ViewDdl::Create { view, .. })) => *view,
        other => panic!("{sql}: {other:?}"),
    }
}

fn views(defs: &[&str]) -> Views {
    let mut v = Views::default();
    for d in defs {
        v.insert(create(d));
    }
    v
}

fn expanded(v: &Views, sql: &str) -> Result<Option<String>, Refused> {
    expand(sql, Mode::default(), v, Some("shop"))
}

#[test]
fn view_statements_are_read_with_their_select_as_written() {
    let v = create(
        "CREATE OR REPLACE ALGORITHM = merge DEFINER=`root`@`localhost` SQL SECURITY INVOKER \
         VIEW shop.`v 1` (`a`, b) AS  SELECT g, COUNT(*) -- n\n FROM t GROUP BY g WITH LOCAL CHECK OPTION ;",
    );
    assert_eq!(v.name, "v 1");
    assert_eq!(v.columns, ["a", "b"]);
    assert_eq!(v.body, "SELECT g, COUNT(*) -- n\n FROM t GROUP BY g");
    assert_eq!(v.algorithm, "MERGE");
    assert_eq!(v.definer, "`root`@`localhost`");
    assert_eq!(v.security, "INVOKER");
    assert_eq!(v.check.as_deref(), Some("LOCAL"));
    // What is stored makes the same view again.
    assert_eq!(create(&v.create_statement()), v);
    match ddl("create view if not exists v as select 1", Mode::default()) {
        Some(Ok(ViewDdl::Create {
            if_not_exists: true,
            or_replace: false,
            alter: false,
            schema: None,
            ..
        })) => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        ddl("ALTER VIEW v AS SELECT 2", Mode::default()),
        Some(Ok(ViewDdl::Create { alter: true, .. }))
    ));
    assert_eq!(
        ddl("DROP VIEW IF EXISTS v, shop.w CASCADE", Mode::default()),
        Some(Ok(ViewDdl::Drop {
            names: vec![(None, "v".into()), (Some("shop".into()), "w".into())],
            if_exists: true
        }))
    );
    // Not view statements.
    for sql in [
        "CREATE TABLE view (a int)",
        "SELECT * FROM view",
        "DROP TABLE v",
        "CREATE DEFINER=root TRIGGER x BEFORE INSERT ON t FOR EACH ROW SET @a = 1",
        "ALTER TABLE t ADD COLUMN view INT",
    ] {
        assert_eq!(ddl(sql, Mode::default()), None, "{sql}");
    }
    // Malformed, or what MariaDB refuses in a view.
    for sql in [
        "CREATE VIEW v",
        "CREATE VIEW v AS",
        "CREATE VIEW v (a AS SELECT 1",
        "CREATE VIEW v AS SELECT ?",
        "CREATE VIEW v AS SELECT @x",
        "CREATE VIEW v AS SELECT 1; DROP TABLE t",
        "CREATE VIEW v AS DELETE FROM t",
        "DROP VIEW v w",
    ] {
        assert!(matches!(ddl(sql, Mode::default()), Some(Err(_))), "{sql}");
    }
}

#[test]
fn a_view_is_read_as_its_select() {
    let v = views(&["CREATE VIEW v AS SELECT g, COUNT(*) AS n FROM t GROUP BY g"]);
    assert_eq!(
        expanded(&v, "SELECT * FROM v WHERE n > 1")
            .unwrap()
            .as_deref(),
        Some("SELECT * FROM (SELECT g, COUNT(*) AS n FROM t GROUP BY g\n) AS v WHERE n > 1")
    );
    assert_eq!(
        expanded(&v, "SELECT x.g FROM shop.V x JOIN c ON c.g = x.g")
            .unwrap()
            .as_deref(),
        Some("SELECT x.g FROM (SELECT g, COUNT(*) AS n FROM t GROUP BY g\n) x JOIN c ON c.g = x.g")
    );
    // Another schema's `v`, a CTE named v, a column named v: not the view.
    for sql in [
        "SELECT * FROM other.v",
        "WITH v AS (SELECT 1) SELECT * FROM v",
        "SELECT v FROM t",
        "SELECT 1",
    ] {
        assert_eq!(expanded(&v, sql).unwrap(), None, "{sql}");
    }
    // An unaliased item whose text changed keeps its name.
    assert_eq!(
        expanded(&v, "SELECT (SELECT MAX(n) FROM v) FROM t").unwrap().as_deref(),
        Some("SELECT (SELECT MAX(n) FROM (SELECT g, COUNT(*) AS n FROM t GROUP BY g\n) AS v) AS `(SELECT MAX(n) FROM v)` FROM t")
    );
}

#[test]
fn views_over_views_and_column_lists() {
    let v = views(&[
        "CREATE VIEW a (x, y) AS SELECT id, name AS `n``m` FROM t",
        "CREATE VIEW b AS SELECT x FROM a WHERE y <> 'z'",
        "CREATE VIEW c (x, y) AS SELECT * FROM t",
    ]);
    // The column list becomes the items' aliases.
    assert_eq!(
        expanded(&v, "SELECT * FROM b").unwrap().as_deref(),
        Some(
            "SELECT * FROM (SELECT x FROM (SELECT id AS `x`, name AS `y` FROM t\n) AS a WHERE y <> 'z'\n) AS b"
        )
    );
    // Where the items cannot say (a `*`), a WITH clause of its own does.
    assert_eq!(
        expanded(&v, "SELECT x FROM c").unwrap().as_deref(),
        Some(
            "SELECT x FROM (WITH `__sp_view` (`x`, `y`) AS (SELECT * FROM t\n) SELECT * FROM `__sp_view`) AS c"
        )
    );
    // A view that reaches itself.
    let r = views(&[
        "CREATE VIEW p AS SELECT * FROM q",
        "CREATE VIEW q AS SELECT * FROM p",
    ]);
    assert_eq!(
        expanded(&r, "SELECT * FROM p").unwrap_err().code,
        ER_VIEW_RECURSIVE
    );
}

#[test]
fn writes_to_a_view_are_refused_and_reads_of_one_in_a_write_expanded() {
    let v = views(&["CREATE VIEW v AS SELECT id FROM t"]);
    for sql in [
        "INSERT INTO v VALUES (1)",
        "UPDATE v SET id = 2",
        "UPDATE t JOIN v USING (id) SET t.id = 3",
        "DELETE FROM v",
        "DELETE v FROM v JOIN t USING (id)",
    ] {
        let e = expanded(&v, sql).unwrap_err();
        assert_eq!(e.code, crate::error::ER_NOT_SUPPORTED_YET, "{sql}");
    }
    assert_eq!(
        expanded(&v, "DELETE FROM t WHERE id IN (SELECT id FROM v)")
            .unwrap()
            .as_deref(),
        Some("DELETE FROM t WHERE id IN (SELECT id FROM (SELECT id FROM t\n) AS v)")
    );
    assert_eq!(
        expanded(&v, "INSERT INTO t SELECT id + 10 FROM v")
            .unwrap()
            .as_deref(),
        Some("INSERT INTO t SELECT id + 10 FROM (SELECT id FROM t\n) AS v")
    );
}

#[test]
fn a_view_read_under_another_quoting_is_refused_only_where_it_reads_differently() {
    let ansi = Mode {
        ansi_quotes: true,
        ..Default::default()
    };
    let v = views(&[
        "CREATE VIEW plain AS SELECT id, 'x' AS s FROM t",
        "CREATE VIEW quoted AS SELECT id, \"x\" AS s FROM t",
    ]);
    assert!(expand("SELECT * FROM plain", ansi, &v, None)
        .unwrap()
        .is_some());
    assert!(expand("SELECT * FROM quoted", ansi, &v, None).is_err());
    assert!(expand("SELECT * FROM quoted", Mode::default(), &v, None)
        .unwrap()
        .is_some());
}

#[test]
fn columns_qualified_by_schema_and_view_name_the_derived_table() {
    let v = views(&["CREATE VIEW v AS SELECT id FROM t"]);
    assert_eq!(
        expanded(
            &v,
            "SELECT shop.v.id, `shop`.`v`.id FROM shop.v WHERE shop.v.id > 1"
        )
        .unwrap()
        .as_deref(),
        Some("SELECT v.id, `v`.id FROM (SELECT id FROM t\n) AS v WHERE v.id > 1")
    );
}
