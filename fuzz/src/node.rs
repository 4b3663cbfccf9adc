//! A fake MariaDB node on 127.0.0.1, for the session targets: every node of `rules.toml` is
//! it. It speaks the server side of the protocol with the proxy's own writers (`PacketIo`,
//! `protocol::auth::handshake_packet`, `protocol::codec`) and answers every statement at
//! once, the way a node with empty tables would: a query that reads gets a result set of the
//! columns its select list names and no row (a syntax error when sqlparser cannot read it:
//! its columns are not known), anything else an OK; COM_STMT_PREPARE gets one parameter per
//! `?`.
//! Several statements in one COM_QUERY get one answer each, as from MariaDB. The proxy's own
//! reads of the catalog and of sequences get rows: every table has the columns of
//! [`COLUMNS`] and the primary key `id`, and a sequence hands out a block.

use std::collections::HashMap;

use mysql_common::constants::{ColumnType, StatusFlags};
use mysql_common::packets::Column;
use shardproxy::packet::PacketIo;
use shardproxy::protocol::{auth, codec};
use sqlparser::ast::{Expr, SelectItem, SetExpr, Statement};
use tokio::net::{TcpListener, TcpStream};

const STATUS: StatusFlags = StatusFlags::SERVER_STATUS_AUTOCOMMIT;

/// Accepts node connections from the proxy's pools until the process ends.
pub async fn serve(listener: TcpListener) {
    let mut id = 100u32;
    while let Ok((stream, _)) = listener.accept().await {
        id = id.wrapping_add(1);
        tokio::spawn(connection(stream, id));
    }
}

async fn connection(stream: TcpStream, id: u32) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut io = PacketIo::new(stream, usize::MAX);
    io.set_seq(0);
    io.write(&auth::handshake_packet(
        "5.7.99-fake-node",
        id,
        &[b'x'; 20],
        false,
    ));
    io.flush().await?;
    if io.read().await?.is_none() {
        return Ok(());
    }
    io.write(&codec::ok(0, 0, STATUS, 0, ""));
    io.flush().await?;
    // Prepared statements by id: their text.
    let mut stmts: HashMap<u32, String> = HashMap::new();
    let mut next = 1u32;
    let trace = std::env::var_os("FUZZ_TRACE").is_some();
    while let Some(p) = io.read().await? {
        let Some((&cmd, body)) = p.split_first() else {
            continue;
        };
        if trace {
            let shown: String = String::from_utf8_lossy(&body[..body.len().min(120)])
                .chars()
                .map(|c| if c.is_control() { '.' } else { c })
                .collect();
            eprintln!("  node {id}< {cmd:#04x} {shown}");
        }
        match cmd {
            0x01 => return Ok(()),
            0x03 => {
                let sql = String::from_utf8_lossy(body);
                let parts = crate::statements(&sql);
                let last = parts.len().saturating_sub(1);
                if parts.is_empty() {
                    io.write(&codec::ok(0, 0, STATUS, 0, ""));
                }
                for (i, part) in parts.iter().enumerate() {
                    let status = if i < last {
                        STATUS | StatusFlags::SERVER_MORE_RESULTS_EXISTS
                    } else {
                        STATUS
                    };
                    if let Some((names, values)) = catalog(part) {
                        result(&mut io, status, &names, &values, false);
                    } else if reads(part) {
                        match result_columns(part) {
                            Some(names) => empty(&mut io, status, &names),
                            None => {
                                io.write(&syntax_error());
                                break;
                            }
                        }
                    } else {
                        io.write(&codec::ok(1, 0, status, 0, ""));
                    }
                }
            }
            0x16 => {
                let sql = String::from_utf8_lossy(body);
                let params = placeholders(&sql);
                let columns = match catalog(&sql) {
                    Some((names, _)) => names.len(),
                    None if reads(&sql) => match result_columns(&sql) {
                        Some(names) => names.len(),
                        None => {
                            io.write(&syntax_error());
                            io.flush().await?;
                            continue;
                        }
                    },
                    None => 0,
                };
                let sid = next;
                next = next.wrapping_add(1).max(1);
                stmts.insert(sid, sql.into_owned());
                let mut head = vec![0x00];
                head.extend_from_slice(&sid.to_le_bytes());
                head.extend_from_slice(&(columns as u16).to_le_bytes());
                head.extend_from_slice(&(params as u16).to_le_bytes());
                head.push(0);
                head.extend_from_slice(&0u16.to_le_bytes());
                io.write(&head);
                for n in [params, columns] {
                    if n > 0 {
                        for _ in 0..n {
                            io.write(&codec::column_def(&named("c")));
                        }
                        io.write(&codec::eof(STATUS, 0));
                    }
                }
            }
            0x17 => {
                let sid = body
                    .get(..4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                match sid.and_then(|s| stmts.get(&s)) {
                    Some(sql) => match catalog(sql) {
                        Some((names, values)) => result(&mut io, STATUS, &names, &values, true),
                        None if reads(sql) => match result_columns(sql) {
                            Some(names) => empty(&mut io, STATUS, &names),
                            None => io.write(&syntax_error()),
                        },
                        None => io.write(&codec::ok(1, 0, STATUS, 0, "")),
                    },
                    None => io.write(&codec::err(1243, "HY000", "Unknown prepared statement")),
                }
            }
            // COM_STMT_SEND_LONG_DATA, COM_STMT_CLOSE: no answer.
            0x18 => continue,
            0x19 => {
                if let Some(b) = body.get(..4) {
                    stmts.remove(&u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                }
                continue;
            }
            0x1F => {
                stmts.clear();
                io.write(&codec::ok(0, 0, STATUS, 0, ""));
            }
            _ => io.write(&codec::ok(0, 0, STATUS, 0, "")),
        }
        io.flush().await?;
    }
    Ok(())
}

/// The columns of every table on this node.
pub const COLUMNS: &[&str] = &[
    "id",
    "user_id",
    "order_id",
    "item_id",
    "status",
    "amount",
    "account_id",
    "balance",
    "tenant_id",
    "doc_id",
    "uid",
    "name",
    "day",
    "txn_id",
    "txn_date",
    "serial_no",
    "merchant_id",
    "kind",
    "code",
    "v",
];

/// The proxy's reads of the catalog and of its sequence table: column names and rows.
/// Known by how they start, and only when their select list has as many columns as the
/// answer (a client's statement that starts the same way is answered as any other).
fn catalog(sql: &str) -> Option<(Vec<&'static str>, Vec<Vec<String>>)> {
    let sql = sql.trim();
    if let Some(table) = sql.strip_prefix("SHOW CREATE TABLE ") {
        let cols: Vec<String> = COLUMNS
            .iter()
            .map(|c| format!("  `{c}` varchar(64) DEFAULT NULL"))
            .collect();
        let create = format!(
            "CREATE TABLE {table} (\n{},\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
            cols.join(",\n")
        );
        return Some((
            vec!["Table", "Create Table"],
            vec![vec![table.to_string(), create]],
        ));
    }
    let (name, values): (&'static str, &[&str]) =
        if sql.starts_with("SELECT COLUMN_NAME FROM information_schema.COLUMNS ") {
            ("COLUMN_NAME", COLUMNS)
        } else if sql.starts_with("SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE ") {
            ("COLUMN_NAME", &["id"])
        } else if sql == "SELECT LAST_INSERT_ID()" {
            ("LAST_INSERT_ID()", &["5000"])
        } else if sql.starts_with("SELECT next_id FROM shardproxy_sequences ") {
            ("next_id", &["1"])
        } else if sql.starts_with("SELECT COALESCE(MAX(") {
            ("m", &["0"])
        } else {
            return None;
        };
    if result_columns(sql).map(|c| c.len()) != Some(1) {
        return None;
    }
    let rows = values.iter().map(|v| vec![v.to_string()]).collect();
    Some((vec![name], rows))
}

fn named(name: &str) -> Column {
    Column::new(ColumnType::MYSQL_TYPE_VAR_STRING)
        .with_name(name.as_bytes())
        .with_org_name(name.as_bytes())
        .with_character_set(45)
}

/// A result set of string columns, in the text or the binary protocol.
fn result<S>(
    io: &mut PacketIo<S>,
    status: StatusFlags,
    names: &[&str],
    rows: &[Vec<String>],
    binary: bool,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let columns: Vec<Column> = names.iter().map(|n| named(n)).collect();
    io.write(&codec::column_count(names.len()));
    for c in &columns {
        io.write(&codec::column_def(c));
    }
    io.write(&codec::eof(STATUS, 0));
    for r in rows {
        let values: Vec<Option<mysql_common::value::Value>> = r
            .iter()
            .map(|v| Some(mysql_common::value::Value::Bytes(v.as_bytes().to_vec())))
            .collect();
        let mut row = Vec::new();
        if binary {
            codec::binary_row(&values, &columns, &mut row);
        } else {
            codec::text_row(&values, &mut row);
        }
        io.write(&row);
    }
    io.write(&codec::eof(status, 0));
}

/// The result of a read over empty tables: its columns, no row (in either protocol: there is
/// no row to encode).
fn empty<S>(io: &mut PacketIo<S>, status: StatusFlags, names: &[String])
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    result(io, status, &names, &[], false);
}

/// What the node says to a statement it cannot read.
fn syntax_error() -> Vec<u8> {
    codec::err(
        1064,
        "42000",
        "You have an error in your SQL syntax (the fake node cannot read it)",
    )
}

/// The columns a read answers with, named as MariaDB names them: the select list's items,
/// `*` as the [`COLUMNS`] of each table of the FROM clause (one column for what is not a
/// query: SHOW ...). `None` when sqlparser cannot read it.
pub fn result_columns(sql: &str) -> Option<Vec<String>> {
    match shardproxy::sql::parse(sql) {
        Ok(p) => Some(match &p.stmt {
            Statement::Query(q) => body_columns(&q.body),
            _ => vec!["c".to_string()],
        }),
        Err(_)
            if shardproxy::sql::leading_words(sql, 1)
                .first()
                .is_some_and(|w| {
                    !w.eq_ignore_ascii_case("SELECT") && !w.eq_ignore_ascii_case("WITH") && w != "("
                }) =>
        {
            Some(vec!["c".to_string()])
        }
        Err(_) => None,
    }
}

fn body_columns(body: &SetExpr) -> Vec<String> {
    let every = || COLUMNS.iter().map(|c| c.to_string());
    match body {
        SetExpr::Select(s) => {
            let tables: usize = s.from.iter().map(|t| 1 + t.joins.len()).sum();
            let mut out = Vec::new();
            for item in &s.projection {
                match item {
                    SelectItem::UnnamedExpr(e) => out.push(expr_name(e)),
                    SelectItem::ExprWithAlias { alias, .. } => out.push(alias.value.clone()),
                    SelectItem::ExprWithAliases { aliases, .. } => {
                        out.extend(aliases.iter().map(|a| a.value.clone()))
                    }
                    SelectItem::QualifiedWildcard(..) => out.extend(every()),
                    SelectItem::Wildcard(_) => {
                        for _ in 0..tables.max(1) {
                            out.extend(every());
                        }
                    }
                }
            }
            if out.is_empty() {
                out.push("c".to_string());
            }
            out
        }
        SetExpr::Query(q) => body_columns(&q.body),
        SetExpr::SetOperation { left, .. } => body_columns(left),
        _ => vec!["c".to_string()],
    }
}

fn expr_name(e: &Expr) -> String {
    match e {
        Expr::Identifier(i) => i.value.clone(),
        Expr::CompoundIdentifier(parts) => {
            parts.last().map(|i| i.value.clone()).unwrap_or_default()
        }
        other => other.to_string(),
    }
}

/// Does the statement answer with rows?
fn reads(sql: &str) -> bool {
    let first = shardproxy::sql::leading_words(sql, 2);
    let word = first
        .iter()
        .map(|w| w.to_ascii_uppercase())
        .find(|w| w != "(");
    matches!(
        word.as_deref(),
        Some("SELECT" | "SHOW" | "WITH" | "DESCRIBE" | "DESC" | "EXPLAIN" | "VALUES" | "TABLE")
    ) || sql
        .trim_start()
        .to_ascii_uppercase()
        .starts_with("XA RECOVER")
}

/// `?` outside quotes and comments: the parameters MariaDB would count.
pub fn placeholders(sql: &str) -> usize {
    let b = sql.as_bytes();
    let (mut i, mut n) = (0, 0);
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"' | b'`') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    if b[i] == b'\\' && q != b'`' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            b'?' => n += 1,
            _ => {}
        }
        i += 1;
    }
    n
}
