//! Statements that leave state on a node connection the proxy does not track: the
//! connection is pinned to its session (reset before anyone else takes it).

use crate::pools::Pooled;

/// Does the statement leave state on its node connection that the proxy does not track
/// (temporary tables, named locks, SQL-level prepared
/// statements, a procedure's doings, FOUND_ROWS of SQL_CALC_FOUND_ROWS, XA)? Then the
/// connection stays with the session and is reset when given back: the reason, for the
/// pins metric. Conservative: an `@` in a string literal counts too. (`LAST_INSERT_ID(expr)`
/// does not: the proxy reads the id back and answers for it, `crate::sql::seen`.)
fn leaves_state(sql: &str) -> Option<&'static str> {
    let b = sql.as_bytes();
    let lead = crate::sql::first_word(sql);
    // User variables are not among them: the session reads back every value assigned and
    // keeps it as a `SET` of its own, on every connection it borrows, and the record of
    // each connection's SETs gets it reset before another session takes it
    // (`crate::sql::uservars`).
    const LEADS: [(&str, &str); 9] = [
        ("CALL", "procedure"),
        ("PREPARE", "sql_prepare"),
        ("EXECUTE", "sql_prepare"),
        ("DEALLOCATE", "sql_prepare"),
        ("HANDLER", "handler"),
        ("XA", "xa"),
        ("LOCK", "lock_tables"),
        ("FLUSH", "flush"),
        ("BACKUP", "backup_lock"),
    ];
    if let Some(w) = lead {
        if let Some((_, why)) = LEADS.iter().find(|(k, _)| w.eq_ignore_ascii_case(k)) {
            return Some(why);
        }
    }
    const MARKERS: [(&[u8], &str); 3] = [
        (b"TEMPORARY", "temporary_table"),
        (b"GET_LOCK", "named_lock"),
        (b"SQL_CALC_FOUND_ROWS", "calc_found_rows"),
    ];
    MARKERS
        .iter()
        .find(|(m, _)| crate::sql::contains_ci(b, m))
        .map(|(_, why)| *why)
}

/// Marks the connection pinned to its session when `sql` leaves state on it the proxy does
/// not track, counting the pin once per connection.
pub(super) fn pin_if_stateful(conn: &mut Pooled, sql: &str, metrics: &crate::metrics::Metrics) {
    if let Some(why) = leaves_state(sql) {
        if !conn.is_dirty() {
            metrics.pins.with_label_values(&[why]).inc();
        }
        conn.mark_dirty();
    }
}

#[cfg(test)]
mod state_tests {
    use super::leaves_state;

    #[test]
    fn statements_that_leave_untracked_state_are_told_apart() {
        for sql in [
            "CREATE TEMPORARY TABLE tt (a INT)",
            "DO GET_LOCK('a', 1)",
            "SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1",
            "call p()",
            "PREPARE s FROM 'SELECT 1'",
            "LOCK TABLES t WRITE",
            "FLUSH TABLES WITH READ LOCK",
            "XA START 'x'",
        ] {
            assert!(leaves_state(sql).is_some(), "{sql}");
        }
        for sql in [
            "SELECT c FROM sbtest1 WHERE id=?",
            "SELECT @@version, @@session.sql_mode",
            "SELECT @x, @`y` FROM t WHERE a = @z",
            "SELECT @x := 1",
            "SELECT c INTO @v FROM t",
            "SELECT LAST_INSERT_ID()",
            "SELECT LAST_INSERT_ID( )",
            "INSERT INTO t (id) VALUES (LAST_INSERT_ID(5))",
            "UPDATE t SET v = v + 1 WHERE id = 3",
            "DELETE FROM t WHERE id = 1",
        ] {
            assert!(leaves_state(sql).is_none(), "{sql}");
        }
    }
}
