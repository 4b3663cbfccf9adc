//! SQL understanding: parse with sqlparser's MySQL dialect, read literals and placeholders,
//! extract shard-key values from a WHERE clause.

pub mod dialect;
pub mod digest;
pub mod keys;
pub mod lex;
pub mod ranges;
pub mod raw;
pub mod replica_read;
pub mod seen;
pub mod text;
pub mod unique_keys;
pub mod uservars;
pub mod write;

use std::ops::ControlFlow;

use mysql_common::value::Value;
use sqlparser::ast::{
    Expr, ObjectName, Statement, UnaryOperator, Value as SqlValue, ValueWithSpan, VisitMut,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Location, Token, Tokenizer};

/// A parsed statement with its `?` placeholders numbered in text order.
#[derive(Debug)]
pub struct Parsed {
    pub stmt: Statement,
    /// Start locations of the `?` placeholders, sorted: the index is the parameter number.
    placeholders: Vec<(u64, u64)>,
    /// Long enough to nest expressions deeper than drop glue can safely recurse.
    deep: bool,
    /// How the text was read (the session's `sql_mode`): its edits are read the same way.
    pub mode: lex::Mode,
}

/// Statements up to this many bytes cannot nest expressions deep enough to exhaust a stack.
const SHALLOW_LEN: usize = 4096;

impl Drop for Parsed {
    fn drop(&mut self) {
        if self.deep {
            let stmt = std::mem::replace(
                &mut self.stmt,
                Statement::Commit {
                    chain: false,
                    end: false,
                    modifier: None,
                },
            );
            drop_iteratively(stmt);
        }
    }
}

/// Drops a statement without recursing along chains of binary operators (`a AND b AND ...`
/// is one left-deep tree as deep as the chain is long; the compiler's drop glue would recurse
/// once per level and overflow the stack).
fn drop_iteratively(stmt: Statement) {
    fn detach<V: VisitMut>(v: &mut V, pending: &mut Vec<Expr>) {
        let _ = sqlparser::ast::visit_expressions_mut(v, |e| {
            if let Expr::BinaryOp { left, right, .. } = e {
                pending.push(std::mem::replace(
                    left.as_mut(),
                    Expr::value(SqlValue::Null),
                ));
                pending.push(std::mem::replace(
                    right.as_mut(),
                    Expr::value(SqlValue::Null),
                ));
            }
            ControlFlow::<()>::Continue(())
        });
    }
    let mut pending = Vec::new();
    let mut stmt = stmt;
    detach(&mut stmt, &mut pending);
    drop(stmt);
    while let Some(mut e) = pending.pop() {
        detach(&mut e, &mut pending);
        drop(e);
    }
}

impl Parsed {
    pub fn param_count(&self) -> usize {
        self.placeholders.len()
    }

    /// Locations of the placeholders, in parameter order.
    pub fn placeholder_locations(&self) -> impl Iterator<Item = Location> + '_ {
        self.placeholders
            .iter()
            .map(|(line, column)| Location::new(*line, *column))
    }

    /// The parameter number of a placeholder token at `loc`.
    pub fn param_index(&self, loc: Location) -> Option<usize> {
        self.placeholders
            .binary_search(&(loc.line, loc.column))
            .ok()
    }
}

/// The schema a qualified name names (`shop` of `shop.t`), as written.
pub fn schema_name(name: &sqlparser::ast::ObjectName) -> Option<String> {
    name.0
        .len()
        .checked_sub(2)
        .and_then(|i| name.0.get(i))
        .and_then(|part| part.as_ident())
        .map(|i| i.value.clone())
}

/// How deep the parser nests (brackets, subqueries, operators of different precedence)
/// before it gives up. sqlparser's own default, 50, refused WHEREs of a few hundred terms
/// in 30 levels of brackets that MariaDB runs; its parser, visitors and printing grow their
/// stack as they recurse, so the bound is only against unbounded work (about 500 levels of
/// brackets).
pub const NESTING_LIMIT: usize = 1000;

/// A parser of `sql` in `dialect`, nesting up to [`NESTING_LIMIT`].
pub fn parser<'a>(
    dialect: &'a dyn sqlparser::dialect::Dialect,
    sql: &str,
) -> Result<Parser<'a>, sqlparser::parser::ParserError> {
    Parser::new(dialect)
        .with_recursion_limit(NESTING_LIMIT)
        .try_with_sql(sql)
}

/// Parses exactly one statement (a trailing `;` is allowed), read as MariaDB's default
/// `sql_mode` reads it.
pub fn parse(sql: &str) -> Result<Parsed, String> {
    parse_in(sql, lex::Mode::default())
}

/// Parses exactly one statement as `mode` reads it.
pub fn parse_in(sql: &str, mode: lex::Mode) -> Result<Parsed, String> {
    let mut stmts = parser(&dialect::ModeDialect(mode), sql)
        .and_then(|mut p| p.parse_statements())
        .map_err(|e| e.to_string())?;
    if stmts.len() != 1 {
        return Err(format!(
            "expected one statement, found {} (multiple statements in one query are not supported)",
            stmts.len()
        ));
    }
    let stmt = stmts.remove(0);
    let mut placeholders = Vec::new();
    let _ = sqlparser::ast::visit_expressions(&stmt, |e| {
        if let Expr::Value(ValueWithSpan {
            value: SqlValue::Placeholder(_),
            span,
        }) = e
        {
            placeholders.push((span.start.line, span.start.column));
        }
        ControlFlow::<()>::Continue(())
    });
    placeholders.sort_unstable();
    placeholders.dedup();
    Ok(Parsed {
        stmt,
        placeholders,
        deep: sql.len() > SHALLOW_LEN,
        mode,
    })
}

/// The first tokens of a statement as written (identifiers unquoted), comments and whitespace
/// skipped. Used for the statements the proxy answers itself and for those sqlparser cannot
/// parse. Only the leading part of the text is scanned, so it stays cheap on every statement.
pub fn leading_words(sql: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let b = sql.as_bytes();
    let mut i = 0;
    while out.len() < n {
        i = skip_blanks(b, i);
        let Some(&c) = b.get(i) else {
            break;
        };
        if c == b'`' || c == b'"' || c == b'\'' {
            // Its text unquoted: a doubled quote is one, and in a string a backslash takes
            // the next character as it is.
            let mut word: Vec<u8> = Vec::new();
            i += 1;
            while i < b.len() {
                if b[i] == c && b.get(i + 1) == Some(&c) {
                    word.push(c);
                    i += 2;
                } else if b[i] == c {
                    break;
                } else if b[i] == b'\\' && c != b'`' && i + 1 < b.len() {
                    word.push(b[i + 1]);
                    i += 2;
                } else {
                    word.push(b[i]);
                    i += 1;
                }
            }
            out.push(String::from_utf8_lossy(&word).into_owned());
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == b'_' || c == b'@' || c == b'$' || c >= 0x80 {
            let start = i;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric()
                    || matches!(b[i], b'_' | b'@' | b'$' | b'.')
                    || b[i] >= 0x80)
            {
                i += 1;
            }
            out.push(sql[start..i].to_string());
        } else if c == b':' && b.get(i + 1) == Some(&b'=') {
            out.push(":=".into());
            i += 2;
        } else {
            // One punctuation character (multi-byte characters were taken above).
            out.push((c as char).to_string());
            i += 1;
        }
    }
    out
}

/// All identifier-like words of a statement, lower-cased (for routing statements that
/// sqlparser cannot parse: does it mention a configured table?).
/// The version MySQL's executable comments are compared with: the proxy's own, 5.7.99
/// (`Shared::server_version`).
pub const VERSION_ID: u32 = 50799;

/// `sql` as its tokens, without its comments: an executable comment's body stays (`/*!50001
/// CREATE ALGORITHM=UNDEFINED */ /*!50013 DEFINER=... */ /*!50001 VIEW v AS ... */`, the
/// way a dump writes a view, reads `CREATE ALGORITHM=UNDEFINED DEFINER=... VIEW v AS ...`),
/// a plain comment goes; tokens that touched still touch, others are one space apart. As
/// it is when it has no comment.
pub fn without_comments(sql: &str, mode: lex::Mode) -> std::borrow::Cow<'_, str> {
    if !sql.contains("/*") && !sql.contains('#') && !sql.contains("--") {
        return std::borrow::Cow::Borrowed(sql.trim());
    }
    let toks = lex::statement_tokens(sql, mode);
    let mut out = String::with_capacity(sql.len());
    let mut last: Option<usize> = None;
    for t in &toks {
        if last.is_some_and(|end| end < t.start) {
            out.push(' ');
        }
        out.push_str(t.text(sql));
        last = Some(t.end);
    }
    std::borrow::Cow::Owned(out)
}

/// Whether a statement reads the catalog by its first word (`SHOW`, `DESCRIBE`, `DESC`,
/// `EXPLAIN`, `HELP`): it writes nothing, whatever tables it names.
pub fn reads_catalog(sql: &str) -> bool {
    first_word(sql).is_some_and(|w| {
        ["SHOW", "DESCRIBE", "DESC", "EXPLAIN", "HELP"]
            .iter()
            .any(|k| w.eq_ignore_ascii_case(k))
    })
}

/// A statement that is one MySQL executable comment, `/*!NNNNN body */` or `/*! body */`
/// (dump files wrap their SETs, `ALTER TABLE ... DISABLE KEYS` and more in them), whose
/// version the proxy's satisfies: its body, which MySQL runs as the statement. `None` for
/// anything else (including MariaDB's `/*M!...*/` and versions above the proxy's, which then
/// go on as they are).
pub fn executable_comment(sql: &str) -> Option<&str> {
    let body = skip_comments(sql).strip_prefix("/*!")?.trim_end();
    let body = body.strip_suffix("*/")?;
    if body.contains("*/") {
        return None;
    }
    let digits = body.bytes().take_while(u8::is_ascii_digit).count();
    let (version, inner) = body.split_at(digits);
    if !version.is_empty() {
        let v: u32 = version.parse().ok()?;
        if !(5..=6).contains(&version.len()) || v > VERSION_ID {
            return None;
        }
    }
    let inner = inner.trim();
    (!inner.is_empty()).then_some(inner)
}

/// `sql` after its leading whitespace and comments (`/* */`, `-- `, `#`, and MariaDB's
/// `/*M! */`, which MySQL ignores), stopping at an executable `/*! */`. The mariadb CLI sends
/// a dump's `/*M!999999\- enable the sandbox mode */` line and the statement after it as
/// one.
fn skip_comments(sql: &str) -> &str {
    let mut rest = sql;
    loop {
        rest = rest.trim_start();
        if rest.starts_with("/*!") {
            return rest;
        }
        if let Some(after) = rest.strip_prefix("/*") {
            match after.find("*/") {
                Some(end) => rest = &after[end + 2..],
                None => return rest,
            }
        } else if rest.starts_with("-- ") || rest.starts_with("--\n") || rest.starts_with('#') {
            match rest.find('\n') {
                Some(end) => rest = &rest[end + 1..],
                None => return "",
            }
        } else {
            return rest;
        }
    }
}

pub fn words(sql: &str) -> Vec<String> {
    let Ok(tokens) = Tokenizer::new(&MySqlDialect {}, sql).tokenize() else {
        return sql
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .filter(|w| !w.is_empty())
            .map(|w| w.to_ascii_lowercase())
            .collect();
    };
    tokens
        .into_iter()
        .filter_map(|t| match t {
            Token::Word(w) => Some(w.value.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// The last part of a possibly qualified name (`shop.t_order` -> `t_order`), lower-cased.
pub fn table_name(name: &ObjectName) -> String {
    name.0
        .last()
        .and_then(|p| p.as_ident())
        .map(|i| i.value.to_ascii_lowercase())
        .unwrap_or_default()
}

/// The value of a literal or placeholder expression, as the MySQL value it stands for.
/// `None` when the expression is not a constant (a column, a function call, ...).
#[recursive::recursive]
pub fn literal(expr: &Expr, parsed: &Parsed, params: &[Value]) -> Option<Value> {
    match expr {
        Expr::Value(v) => match &v.value {
            SqlValue::Placeholder(_) => {
                let idx = parsed.param_index(v.span.start)?;
                params.get(idx).cloned()
            }
            other => sql_value(other),
        },
        Expr::Nested(inner) => literal(inner, parsed, params),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match literal(expr, parsed, params)? {
            Value::Int(i) => i.checked_neg().map(Value::Int),
            Value::UInt(u) if u <= i64::MAX as u64 + 1 => {
                Some(Value::Int((u as i64).wrapping_neg()))
            }
            Value::Bytes(b) if is_decimal(&b) => {
                let mut out = b"-".to_vec();
                out.extend_from_slice(&b);
                Some(Value::Bytes(out))
            }
            Value::Double(d) => Some(Value::Double(-d)),
            _ => None,
        },
        Expr::UnaryOp {
            op: UnaryOperator::Plus,
            expr,
        } => literal(expr, parsed, params),
        Expr::Prefixed { prefix, value } => introduced(&prefix.value, value),
        _ => None,
    }
}

/// A string with a character set introducer (`_utf8mb4 X'64'`, `_utf8mb4'd'`: how the
/// proxy's own literal writer spells strings) as the bytes a quoted string of that text
/// has: for the UTF-8 sets and `_binary` as written, for single-byte sets only when ASCII
/// (their other bytes are other characters in UTF-8).
fn introduced(charset: &str, value: &Expr) -> Option<Value> {
    let Expr::Value(v) = value else {
        return None;
    };
    let bytes = match &v.value {
        SqlValue::SingleQuotedString(s) | SqlValue::DoubleQuotedString(s) => raw::bytes(s),
        SqlValue::HexStringLiteral(h) => hex(h)?,
        _ => return None,
    };
    let charset = charset.to_ascii_lowercase();
    match charset.as_str() {
        "_utf8mb4" | "_utf8mb3" | "_utf8" | "_binary" => Some(Value::Bytes(bytes)),
        "_latin1" | "_ascii" if bytes.is_ascii() => Some(Value::Bytes(bytes)),
        _ => None,
    }
}

fn hex(h: &str) -> Option<Vec<u8>> {
    if !h.len().is_multiple_of(2) {
        return None;
    }
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
        .collect()
}

fn is_decimal(b: &[u8]) -> bool {
    !b.is_empty() && b.iter().all(|c| c.is_ascii_digit() || *c == b'.')
}

/// The value of a number literal as written: an integer, or a decimal kept as its text.
pub fn number_value(n: &str) -> Option<Value> {
    if let Ok(i) = n.parse::<i64>() {
        Some(Value::Int(i))
    } else if let Ok(u) = n.parse::<u64>() {
        Some(Value::UInt(u))
    } else if is_decimal(n.as_bytes()) {
        // MySQL keeps a decimal literal's text: CRC32(3.50) hashes "3.50".
        Some(Value::Bytes(n.as_bytes().to_vec()))
    } else {
        None
    }
}

fn sql_value(v: &SqlValue) -> Option<Value> {
    match v {
        SqlValue::Number(n, _) => number_value(n),
        SqlValue::SingleQuotedString(s) | SqlValue::DoubleQuotedString(s) => {
            Some(Value::Bytes(raw::bytes(s)))
        }
        SqlValue::Null => Some(Value::NULL),
        SqlValue::Boolean(b) => Some(Value::Int(i64::from(*b))),
        _ => None,
    }
}

/// Byte offset of a tokenizer location (1-based line and character column). For many
/// locations in one text (each row of a large INSERT), build one [`Offsets`].
pub fn byte_offset(sql: &str, loc: Location) -> Option<usize> {
    Offsets::new(sql).at(loc)
}

/// Tokenizer locations to byte offsets in one text: its line starts, and whether it is ASCII
/// (then a column is a byte count), found once.
pub struct Offsets<'s> {
    sql: &'s str,
    ascii: bool,
    lines: Vec<usize>,
}

impl<'s> Offsets<'s> {
    pub fn new(sql: &'s str) -> Self {
        let mut lines = vec![0];
        lines.extend(sql.match_indices('\n').map(|(i, _)| i + 1));
        Offsets {
            sql,
            ascii: sql.is_ascii(),
            lines,
        }
    }

    pub fn at(&self, loc: Location) -> Option<usize> {
        if loc.line == 0 || loc.column == 0 {
            return None;
        }
        let line_start = *self.lines.get(usize::try_from(loc.line - 1).ok()?)?;
        let col = usize::try_from(loc.column - 1).ok()?;
        let rest = &self.sql[line_start..];
        if self.ascii {
            return (col <= rest.len()).then_some(line_start + col);
        }
        match rest.char_indices().nth(col) {
            Some((i, _)) => Some(line_start + i),
            None if col == rest.chars().count() => Some(self.sql.len()),
            None => None,
        }
    }
}

/// Does `hay` contain `needle`, ASCII case ignored? The needle's first byte is found by
/// `memchr` (both cases), so the checks every statement gets cost a vector scan where a
/// compare at every position cost a call each.
pub fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else {
        return true;
    };
    let (lower, upper) = (first.to_ascii_lowercase(), first.to_ascii_uppercase());
    let mut at = 0;
    while let Some(i) = memchr::memchr2(lower, upper, &hay[at..]) {
        let start = at + i;
        if hay
            .get(start + 1..start + needle.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(rest))
        {
            return true;
        }
        at = start + 1;
    }
    false
}

/// A statement as the proxy's logs may print it: one that may hold a password
/// (`IDENTIFIED BY`, `SET PASSWORD`, `PASSWORD(...)`, a `CHANGE MASTER` / replication
/// source's) is shown by its first words only.
pub fn redacted(sql: &str) -> std::borrow::Cow<'_, str> {
    let b = sql.as_bytes();
    let secret = [&b"IDENTIFIED"[..], b"PASSWORD", b"MASTER_", b"SOURCE_"]
        .iter()
        .any(|w| contains_ci(b, w));
    if !secret {
        return std::borrow::Cow::Borrowed(sql);
    }
    std::borrow::Cow::Owned(format!(
        "{} ... (not logged: it may hold a password)",
        leading_words(sql, 2).join(" ")
    ))
}

/// The statement's first word (after blanks and comments), as [`leading_words`] would give
/// it, without allocating.
pub fn first_word(sql: &str) -> Option<&str> {
    let b = sql.as_bytes();
    let start = skip_blanks(b, 0);
    let c = *b.get(start)?;
    if !(c.is_ascii_alphanumeric() || c == b'_' || c == b'@' || c == b'$' || c >= 0x80) {
        // A quoted name, punctuation: not a keyword.
        return None;
    }
    let end = b[start..]
        .iter()
        .position(|&x| {
            !(x.is_ascii_alphanumeric() || matches!(x, b'_' | b'@' | b'$' | b'.') || x >= 0x80)
        })
        .map_or(b.len(), |n| start + n);
    sql.get(start..end)
}

/// Where the next token starts at or after `i`: blanks and comments skipped.
pub(crate) fn skip_blanks(b: &[u8], mut i: usize) -> usize {
    while let Some(&c) = b.get(i) {
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'#' || (c == b'-' && b.get(i + 1) == Some(&b'-')) {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
        } else {
            break;
        }
    }
    i
}

/// The index of the quote that closes the string or quoted name opening at `b[open]` (a
/// backslash escapes in strings, not in backquoted names), or the text's end.
pub fn quote_end(b: &[u8], open: usize) -> usize {
    quote_end_in(b, open, lex::Mode::default())
}

/// [`quote_end`] as `mode` reads text: a backslash escapes only without
/// `NO_BACKSLASH_ESCAPES`.
pub fn quote_end_in(b: &[u8], open: usize, mode: lex::Mode) -> usize {
    let q = b[open];
    let mut i = open + 1;
    while i < b.len() && b[i] != q {
        if b[i] == b'\\' && q != b'`' && !mode.no_backslash_escapes {
            i += 1;
        }
        i += 1;
    }
    i.min(b.len())
}

/// Where `word` (any case) ends just before `at`, blanks between: its start.
fn word_before(sql: &str, at: usize, word: &str) -> Option<usize> {
    let before = sql.get(..at)?.trim_end();
    let start = before.len().checked_sub(word.len())?;
    let w = before.get(start..)?;
    let bounded = before[..start]
        .chars()
        .next_back()
        .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '$'));
    (w.eq_ignore_ascii_case(word) && bounded).then_some(start)
}

/// Where an unaliased select item is in the statement's text (byte range), read as `mode`
/// reads it: from its start (parentheses before it included: a subquery's span starts
/// inside them) to the comma or clause keyword that ends it at its own nesting depth.
/// MariaDB names an unaliased column by that text. `None` where the text holds a comment
/// or does not nest as expected.
pub fn item_range(sql: &str, e: &Expr, mode: lex::Mode) -> Option<(usize, usize)> {
    let mut a = byte_offset(sql, sqlparser::ast::Spanned::span(e).start)?;
    loop {
        let before = sql[..a].trim_end();
        if before.ends_with('(') {
            a = before.len() - 1;
        } else {
            break;
        }
    }
    // An EXISTS's span is its subquery's: its keywords are before it.
    if let Expr::Exists { negated, .. } = e {
        a = word_before(sql, a, "EXISTS")?;
        if *negated {
            a = word_before(sql, a, "NOT")?;
        }
    }
    const ENDS: [&str; 14] = [
        "FROM",
        "INTO",
        "WHERE",
        "GROUP",
        "HAVING",
        "ORDER",
        "LIMIT",
        "UNION",
        "EXCEPT",
        "INTERSECT",
        "WINDOW",
        "FOR",
        "LOCK",
        "AS",
    ];
    let lexed = lex::lex(sql, mode);
    let first = lexed.toks.partition_point(|t| t.start < a);
    let mut depth = 0usize;
    let mut end = None;
    let mut prev_end = a;
    for (n, t) in lexed.toks[first..].iter().enumerate() {
        // Only blanks between the item's tokens: a comment makes its name uncertain.
        if !sql.get(prev_end..t.start)?.trim().is_empty() {
            return None;
        }
        match t.kind {
            lex::Kind::LParen => depth += 1,
            lex::Kind::RParen if depth == 0 => break,
            lex::Kind::RParen => depth -= 1,
            lex::Kind::Comma | lex::Kind::Semi if depth == 0 => break,
            lex::Kind::Word if depth == 0 && n > 0 && ENDS.iter().any(|k| t.is(sql, k)) => break,
            _ => {}
        }
        end = Some(t.end);
        prev_end = t.end;
    }
    if lexed.error.is_some() && end.is_none() {
        return None;
    }
    let b = end?;
    (a < b).then_some((a, b))
}

/// The column name MariaDB gives an unaliased select item, when the statement's text and
/// sqlparser's rendering of it differ (`count(distinct a)` prints as `count(DISTINCT a)`):
/// a query rebuilt from the tree aliases the item with it to keep the client's column name.
/// `None` for columns and literals (named by their column or value) and where the text is
/// not found or too long for an alias.
pub fn item_name(sql: &str, e: &Expr, mode: lex::Mode) -> Option<String> {
    if matches!(
        e,
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Value(_)
    ) {
        return None;
    }
    let (a, b) = item_range(sql, e, mode)?;
    let text = sql.get(a..b)?;
    (text.len() <= 250 && text != e.to_string()).then(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executable_comments_give_their_body_when_the_version_allows() {
        assert_eq!(
            executable_comment("/*!40101 SET NAMES utf8mb4 */"),
            Some("SET NAMES utf8mb4")
        );
        assert_eq!(executable_comment("/*! SET @a = 1 */ "), Some("SET @a = 1"));
        assert_eq!(
            executable_comment("/*!50799 DO 1*/"),
            Some("DO 1"),
            "the proxy's own version"
        );
        // The CLI sends the sandbox line of a dump with the statement after it.
        assert_eq!(
            executable_comment(
                "/*M!999999 enable the sandbox mode */ \n-- a dump\n\n/*!40101 SET @OLD=@@CHARACTER_SET_CLIENT */"
            ),
            Some("SET @OLD=@@CHARACTER_SET_CLIENT")
        );
        assert_eq!(
            executable_comment("/*!80000 SET x = 1 */"),
            None,
            "newer than 5.7.99"
        );
        assert_eq!(
            executable_comment("/*M!100100 SET x = 1 */"),
            None,
            "MariaDB's own"
        );
        assert_eq!(
            executable_comment("/*!40101 SET a=1 */ /*!40101 SET b=2 */"),
            None
        );
        assert_eq!(executable_comment("SELECT 1 /*!40101 , 2 */"), None);
        assert_eq!(executable_comment("/* plain */ SELECT 1"), None);
        assert_eq!(executable_comment("/*!40101 */"), None);
    }

    #[test]
    fn a_dumps_view_reads_without_its_comments() {
        let m = lex::Mode::default();
        assert_eq!(
            without_comments(
                "/*!50001 CREATE ALGORITHM=UNDEFINED */\n/*!50013 DEFINER=`app`@`%` SQL SECURITY DEFINER */\n/*!50001 VIEW `v` AS SELECT a.id, 'x /* y */' FROM a /* plain */ WHERE a.id>1 */",
                m
            ),
            "CREATE ALGORITHM=UNDEFINED DEFINER=`app`@`%` SQL SECURITY DEFINER VIEW `v` AS SELECT a.id, 'x /* y */' FROM a WHERE a.id>1"
        );
        assert_eq!(without_comments(" SELECT 1 ", m), "SELECT 1");
    }

    #[test]
    fn placeholders_are_numbered_in_text_order() {
        let p = parse("SELECT * FROM t WHERE a = ? AND b IN (?, ?) LIMIT ?").unwrap();
        assert_eq!(p.param_count(), 4);
        let p = parse("INSERT INTO t (a, b) VALUES (?, ?), (?, ?)").unwrap();
        assert_eq!(p.param_count(), 4);
    }

    #[test]
    fn literals_read_as_mysql_values() {
        let p = parse("SELECT 1").unwrap();
        let lit = |sql: &str| {
            let e = Parser::new(&MySqlDialect {})
                .try_with_sql(sql)
                .unwrap()
                .parse_expr()
                .unwrap();
            literal(&e, &p, &[])
        };
        assert_eq!(lit("42"), Some(Value::Int(42)));
        assert_eq!(lit("-7"), Some(Value::Int(-7)));
        assert_eq!(lit("'abc'"), Some(Value::Bytes(b"abc".to_vec())));
        // Strings as the proxy's literal writer spells them.
        assert_eq!(lit("_utf8mb4 X'64'"), Some(Value::Bytes(b"d".to_vec())));
        assert_eq!(
            lit("_utf8mb3 X'C3A9'"),
            Some(Value::Bytes("é".as_bytes().to_vec()))
        );
        assert_eq!(lit("_binary X''"), Some(Value::Bytes(Vec::new())));
        assert_eq!(lit("_latin1 'ab'"), Some(Value::Bytes(b"ab".to_vec())));
        // Not the same bytes in UTF-8, and a bare X'' is a number in a numeric column.
        assert_eq!(lit("_latin1 X'E9'"), None);
        assert_eq!(lit("X'64'"), None);
        assert_eq!(lit("3.50"), Some(Value::Bytes(b"3.50".to_vec())));
        assert_eq!(lit("18446744073709551615"), Some(Value::UInt(u64::MAX)));
        assert_eq!(lit("NULL"), Some(Value::NULL));
        assert_eq!(lit("a + 1"), None);
    }

    #[test]
    fn statements_that_may_hold_a_password_are_not_logged() {
        for sql in [
            "CREATE USER u IDENTIFIED BY 'pw'",
            "SET PASSWORD FOR u = PASSWORD('pw')",
            "alter user u identified via mysql_native_password using 'x'",
            "CHANGE MASTER TO MASTER_PASSWORD = 'pw'",
        ] {
            let shown = redacted(sql);
            assert!(!shown.contains("pw") && !shown.contains("'x'"), "{shown}");
        }
        assert_eq!(redacted("SELECT 1"), "SELECT 1");
    }

    #[test]
    fn more_than_one_statement_is_refused() {
        assert!(parse("SELECT 1; SELECT 2").is_err());
        assert!(parse("SELECT 1;").is_ok());
    }

    #[test]
    fn leading_words_skip_comments() {
        assert_eq!(
            leading_words("/* hi */ set  names utf8mb4", 2),
            vec!["set".to_string(), "names".to_string()]
        );
        assert_eq!(
            leading_words("-- c\nSET @@session.autocommit:=0, `x`", 9),
            vec!["SET", "@@session.autocommit", ":=", "0", ",", "x"]
        );
        assert_eq!(leading_words("USE `my db`", 2), vec!["USE", "my db"]);
        // Quotes inside quotes, as SQL writes them.
        assert_eq!(
            leading_words("MIGRATE KEY 'o''k' OF `t``x` TO 'a\\'b'", 7),
            vec!["MIGRATE", "KEY", "o'k", "OF", "t`x", "TO", "a'b"]
        );
        for k in ["42", "o'k", "a\\b", "''", "\\'"] {
            assert_eq!(leading_words(&write::admin_word(k), 1), vec![k.to_string()]);
        }
    }

    #[test]
    fn first_word_is_leading_words_first() {
        for sql in [
            "/* hi */ set  names utf8mb4",
            "-- c\nSET @@session.autocommit:=0",
            "# c\n  Show warnings",
            "\t@@x",
            "(SELECT 1)",
            "`t`",
            "",
            "   ",
            "/* unterminated",
        ] {
            let want = leading_words(sql, 1)
                .into_iter()
                .next()
                .filter(|w| {
                    w.chars()
                        .next()
                        .is_some_and(|c| c.is_alphanumeric() || "_@$".contains(c))
                })
                .filter(|_| !sql.trim_start().starts_with('`'));
            assert_eq!(first_word(sql).map(str::to_string), want, "{sql:?}");
        }
    }

    #[test]
    fn contains_ci_finds_a_word_in_any_case() {
        assert!(contains_ci(
            b"select SQL_calc_FOUND_rows 1",
            b"SQL_CALC_FOUND_ROWS"
        ));
        assert!(contains_ci(b"SELECT @@Identity", b"@@identity"));
        assert!(contains_ci(b"sss_count", b"s_count"));
        assert!(!contains_ci(b"SELECT row_coun", b"row_count"));
        assert!(!contains_ci(b"", b"x"));
        assert!(contains_ci(b"abc", b""));
    }
}
