//! Global secondary indexes in planning (`super::indexed`): writes carry their entries,
//! reads wait for the index, DDL that would leave it wrong is refused.

use super::indexed::*;
use super::tests::{plan_in, refused};
use super::Plan;
use crate::config::test_topology;

fn topo() -> crate::config::Topology {
    test_topology(
        1,
        2,
        r#"
[tables.t]
rule = "hash_slot"
column = "id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
[tables.t.indexes.email]
unique = true
state = "public"
[tables.t_email_gsi]
rule = "hash_slot"
column = "v_hash"
slots = [{ slots = "0-1023", node = "ds1" }]
[tables.o]
rule = "hash_slot"
column = "id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
[tables.t_gen]
rule = "hash_slot"
column = "oid"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
key_generator = { column = "oid", kind = "snowflake" }
[tables.t_gen.indexes.email]
unique = true
state = "public"
[tables.t_gen_email_gsi]
rule = "hash_slot"
column = "v_hash"
slots = [{ slots = "0-1023", node = "ds1" }]
"#,
    )
}

/// A shard key the proxy generates: each entry points at the key its row was given.
#[test]
fn an_insert_whose_key_is_generated_carries_entries_for_the_generated_keys() {
    let t = topo();
    let p = plan_in(
        &t,
        "INSERT INTO t_gen (email, v) VALUES ('a@x', 1), ('b@x', 2)",
        &[],
    );
    let Plan::Indexed(w) = p else {
        panic!("not indexed: {p:?}")
    };
    assert_eq!(w.adds.len(), 2, "{:?}", w.adds);
    let sql = format!("{:?}", w.base);
    for e in &w.adds {
        assert!(
            e.key.chars().all(|c| c.is_ascii_digit()) && sql.contains(&e.key),
            "entry key {} is a generated id the rows carry: {sql}",
            e.key
        );
    }
    assert_ne!(w.adds[0].key, w.adds[1].key);
}

#[test]
fn ddl_that_would_leave_the_index_wrong_is_refused() {
    let t = topo();
    for sql in [
        "TRUNCATE TABLE t",
        "DROP TABLE t",
        "DROP TABLE IF EXISTS other, t",
        "RENAME TABLE t TO t2",
        "ALTER TABLE t RENAME TO t2",
        "TRUNCATE TABLE t_email_gsi",
        "DROP TABLE IF EXISTS t_email_gsi",
        "ALTER TABLE t_email_gsi ADD COLUMN x INT",
        "RENAME TABLE t_email_gsi TO other",
        "ALTER TABLE t MODIFY email VARCHAR(200) COLLATE utf8mb4_bin",
        "ALTER TABLE t CHANGE COLUMN `Email` mail VARCHAR(64)",
        "ALTER TABLE t DROP COLUMN email",
        "ALTER TABLE t MODIFY id BIGINT",
    ] {
        let p = plan_in(&t, sql, &[]);
        assert!(refused(&p).contains("global ind"), "{sql}: {p:?}");
    }
    for sql in [
        "ALTER TABLE t ADD COLUMN phone BIGINT",
        "ALTER TABLE t ADD INDEX (name)",
        "TRUNCATE TABLE other",
    ] {
        let p = plan_in(&t, sql, &[]);
        assert!(!matches!(p, Plan::Refuse { .. }), "{sql}: {p:?}");
    }
}

#[test]
fn writes_carry_their_entries_and_reads_wait_for_the_index() {
    let t = topo();
    let Plan::Indexed(w) = plan_in(
        &t,
        "INSERT INTO t (id, email) VALUES (1, 'A@x  '), (2, NULL)",
        &[],
    ) else {
        panic!("not indexed")
    };
    assert_eq!(w.adds.len(), 1, "{:?}", w.adds);
    assert_eq!(w.adds[0].hash, b"A@x".to_vec());
    let Plan::Indexed(w) = plan_in(&t, "UPDATE t SET email = LOWER(email) WHERE id > 5", &[])
    else {
        panic!("not indexed")
    };
    let read = w.read.expect("a read of the rows");
    assert!(
        read.sql.ends_with("FROM `t` WHERE id > 5 FOR UPDATE"),
        "{}",
        read.sql
    );
    assert!(read.assigns);
    // An UPDATE of other columns is the client's alone.
    assert!(!matches!(
        plan_in(&t, "UPDATE t SET name = 'x' WHERE id > 5", &[]),
        Plan::Indexed(_)
    ));
    match plan_in(&t, "SELECT * FROM t WHERE email = 'a@x'", &[]) {
        Plan::NeedIndex(p) => assert_eq!(p[0].hashes, vec![b"a@x".to_vec()]),
        other => panic!("{other:?}"),
    }
    // Inside a join, too.
    let join = "SELECT t.id, o.v FROM t JOIN o ON o.id = t.id WHERE t.email IN ('a@x', 'b@x')";
    match plan_in(&t, join, &[]) {
        Plan::NeedIndex(p) => assert_eq!(p[0].hashes.len(), 2),
        other => panic!("{other:?}"),
    }
    // A read by the shard key needs no index; a locking read, and an UPDATE of other
    // columns, read it as a write (locked inside a transaction).
    assert!(matches!(
        plan_in(&t, "SELECT * FROM t WHERE id = 1 AND email = 'a@x'", &[]),
        Plan::Route(_)
    ));
    for (sql, write) in [
        ("SELECT * FROM t WHERE email = 'a@x'", false),
        ("SELECT * FROM t WHERE email = 'a@x' FOR UPDATE", true),
        ("UPDATE t SET name = 'n' WHERE email = 'a@x'", true),
    ] {
        match plan_in(&t, sql, &[]) {
            Plan::NeedIndex(p) => assert_eq!(p[0].write, write, "{sql}"),
            other => panic!("{sql}: {other:?}"),
        }
    }
    // An UPDATE of the column, or a DELETE, reads its rows locked first instead.
    for sql in [
        "UPDATE t SET email = 'b@x' WHERE email = 'a@x'",
        "DELETE FROM t WHERE email = 'a@x'",
    ] {
        assert!(matches!(plan_in(&t, sql, &[]), Plan::Indexed(_)), "{sql}");
    }
    // Upserts: their rows' keys and the values they claim, for the reads around them.
    for (sql, kind) in [
        ("REPLACE INTO t (id, email) VALUES (1, 'a'), (2, NULL)", UpsertKind::Replace),
        (
            "INSERT INTO t (id, email) VALUES (1, 'a'), (2, NULL) ON DUPLICATE KEY UPDATE email = 'b'",
            UpsertKind::Update,
        ),
        ("INSERT IGNORE INTO t SET id = 1, email = 'a'", UpsertKind::Ignore),
    ] {
        let Plan::Indexed(w) = plan_in(&t, sql, &[]) else {
            panic!("{sql}: not indexed")
        };
        let u = w.upsert.expect("an upsert");
        assert_eq!(u.kind, kind, "{sql}");
        assert!(w.adds.is_empty(), "{sql}: adds only what it claims");
        assert_eq!(u.claims.len(), 1, "{sql}");
        assert!(u.keys.len() == 1 || u.keys == ["1", "2"], "{sql}: {:?}", u.keys);
    }
    for sql in [
        "INSERT INTO t (id, email) VALUES (1, 'a') RETURNING id",
        "REPLACE INTO t (id, email) VALUES (1, CONCAT('a', 'b'))",
        "UPDATE t SET email = UUID() WHERE id = 1",
        "UPDATE t SET email = 'a' WHERE id = 1 LIMIT 1",
    ] {
        let p = plan_in(&t, sql, &[]);
        assert!(refused(&p).contains("global indexes"), "{sql}: {p:?}");
    }
    // INSERT ... SELECT: its rows are read, then inserted as an INSERT ... VALUES,
    // which keeps the index.
    let sql = "INSERT INTO t (id, email) SELECT id + 100, email FROM t";
    assert!(matches!(plan_in(&t, sql, &[]), Plan::InsertSelect(_)));
}
