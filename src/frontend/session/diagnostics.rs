//! The diagnostics area of an error the proxy raised itself (a refusal, a node it could not
//! reach), or of a warning it added to a statement that succeeded: no node connection holds
//! it, so `SHOW WARNINGS`, `SHOW ERRORS` and their counts are answered here, as MariaDB
//! answers them about its own errors. (The counts in
//! `@@warning_count` / `@@error_count` become values in the statement's text,
//! `crate::sql::seen`.)

use mysql_common::constants::{ColumnFlags, ColumnType};
use mysql_common::packets::Column;
use mysql_common::value::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{Outcome, Session};
use crate::error::MyError;
use crate::exec::door::Sink;

/// What a statement that reads the diagnostics area asks of it.
#[derive(Debug, PartialEq, Eq)]
enum Read {
    /// `SHOW WARNINGS` / `SHOW ERRORS` (`errors`), with the rows `LIMIT [offset,] count`
    /// leaves.
    List { skip: u64, take: u64, errors: bool },
    /// `SHOW COUNT(*) WARNINGS` / `SHOW COUNT(*) ERRORS`: the variable it reads.
    Count(&'static str),
    /// `GET DIAGNOSTICS`.
    Get,
}

const ERROR_COUNT: &str = "@@session.error_count";

fn read_of(sql: &str) -> Option<Read> {
    let w = crate::sql::leading_words(sql, 10);
    let is = |i: usize, k: &str| w.get(i).is_some_and(|x| x.eq_ignore_ascii_case(k));
    let end = |i: usize| w.len() == i || (w.len() == i + 1 && is(i, ";"));
    if is(0, "GET") && (is(1, "DIAGNOSTICS") || is(2, "DIAGNOSTICS")) {
        return Some(Read::Get);
    }
    if !is(0, "SHOW") {
        return None;
    }
    if is(1, "COUNT") && is(2, "(") && is(3, "*") && is(4, ")") && end(6) {
        if is(5, "WARNINGS") {
            return Some(Read::Count("@@session.warning_count"));
        }
        if is(5, "ERRORS") {
            return Some(Read::Count(ERROR_COUNT));
        }
        return None;
    }
    if !(is(1, "WARNINGS") || is(1, "ERRORS")) {
        return None;
    }
    let errors = is(1, "ERRORS");
    if end(2) {
        return Some(Read::List {
            skip: 0,
            take: u64::MAX,
            errors,
        });
    }
    let num = |i: usize| w.get(i).and_then(|x| x.parse::<u64>().ok());
    if !is(2, "LIMIT") {
        return None;
    }
    match (num(3), is(4, ","), num(5)) {
        (Some(take), false, _) if end(4) => Some(Read::List {
            skip: 0,
            take,
            errors,
        }),
        (Some(skip), true, Some(take)) if end(6) => Some(Read::List { skip, take, errors }),
        _ => None,
    }
}

/// A text column of `chars` characters, as MariaDB 10.11 describes SHOW WARNINGS' (utf8mb3).
fn text_column(name: &str, chars: u32) -> Column {
    Column::new(ColumnType::MYSQL_TYPE_VAR_STRING)
        .with_name(name.as_bytes())
        .with_character_set(33)
        .with_column_length(chars * 3)
        .with_flags(ColumnFlags::NOT_NULL_FLAG)
}

/// An unsigned number column, as MariaDB describes it.
fn number_column(name: &str, kind: ColumnType, length: u32, flags: ColumnFlags) -> Column {
    Column::new(kind)
        .with_name(name.as_bytes())
        .with_character_set(63)
        .with_column_length(length)
        .with_flags(
            flags | ColumnFlags::UNSIGNED_FLAG | ColumnFlags::BINARY_FLAG | ColumnFlags::NUM_FLAG,
        )
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// Answers a read of the diagnostics area after an error the proxy raised itself;
    /// `None` when the last statement left no such error or the statement is not one of
    /// these reads (a `SELECT @@warning_count` runs with the count as its value).
    pub(super) fn own_diagnostics(&mut self, sql: &str, binary: bool) -> Option<Outcome> {
        let own = self.last.own.clone()?;
        let read = read_of(sql)?;
        Some(self.write_own_diagnostics(&own.error, own.warning, read, binary))
    }

    /// `warning`: `e` is a warning the proxy added to a statement that succeeded.
    fn write_own_diagnostics(
        &mut self,
        e: &MyError,
        warning: bool,
        read: Read,
        binary: bool,
    ) -> Outcome {
        let (cols, rows) = match read {
            Read::Get => {
                return Err(MyError::unsupported(
                    "shardproxy: GET DIAGNOSTICS after a diagnostic the proxy raised itself (SHOW WARNINGS answers it)",
                ))
            }
            Read::Count(name) => (
                vec![number_column(
                    name,
                    ColumnType::MYSQL_TYPE_LONGLONG,
                    21,
                    ColumnFlags::empty(),
                )],
                vec![vec![Some(Value::UInt(u64::from(
                    !(warning && name == ERROR_COUNT),
                )))]],
            ),
            Read::List { skip, take, errors } => {
                let cols = vec![
                    text_column("Level", 7),
                    number_column(
                        "Code",
                        ColumnType::MYSQL_TYPE_LONG,
                        4,
                        ColumnFlags::NOT_NULL_FLAG,
                    ),
                    text_column("Message", 512),
                ];
                let level: &[u8] = if warning { b"Warning" } else { b"Error" };
                let row = vec![
                    Some(Value::Bytes(level.to_vec())),
                    Some(Value::UInt(u64::from(e.code))),
                    Some(Value::Bytes(e.message.clone().into_bytes())),
                ];
                // SHOW ERRORS lists no warning.
                let rows = if skip == 0 && take > 0 && !(warning && errors) {
                    vec![row]
                } else {
                    Vec::new()
                };
                (cols, rows)
            }
        };
        let status = self.status();
        let (_, mut sink) = self.sink(binary);
        sink.columns(&cols, status);
        for r in &rows {
            sink.row(r, &cols);
        }
        sink.end(status, 0, false);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reads_of_the_diagnostics_area() {
        let all = Read::List {
            skip: 0,
            take: u64::MAX,
            errors: false,
        };
        assert_eq!(read_of("SHOW WARNINGS"), Some(all));
        assert_eq!(
            read_of("show errors limit 0"),
            Some(Read::List {
                skip: 0,
                take: 0,
                errors: true
            })
        );
        assert_eq!(
            read_of("SHOW WARNINGS LIMIT 1, 5;"),
            Some(Read::List {
                skip: 1,
                take: 5,
                errors: false
            })
        );
        assert_eq!(
            read_of("SHOW COUNT(*) ERRORS"),
            Some(Read::Count("@@session.error_count"))
        );
        assert_eq!(
            read_of("show count ( * ) warnings"),
            Some(Read::Count("@@session.warning_count"))
        );
        assert_eq!(
            read_of("GET CURRENT DIAGNOSTICS @n = NUMBER"),
            Some(Read::Get)
        );
        assert_eq!(read_of("SHOW WARNINGS LIMIT x"), None);
        assert_eq!(read_of("SHOW TABLES"), None);
        assert_eq!(read_of("SELECT @@warning_count"), None);
    }
}
