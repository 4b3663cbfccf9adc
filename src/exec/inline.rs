//! A copy bound by a join's keys ([`crate::plan::bind`]) that holds few rows travels inside
//! the gathered statement instead of through a temporary table: the rows read from the
//! nodes become a JSON document, and the statement names, where it named the copy,
//!
//! ```sql
//! (SELECT * FROM JSON_TABLE(_utf8mb4 X'5b5b...', '$[*]' COLUMNS (`product_id` int(11)
//!   PATH '$[0]' ERROR ON ERROR, `name` varchar(64) CHARACTER SET utf8mb4 COLLATE
//!   utf8mb4_general_ci PATH '$[1]' ERROR ON ERROR, ...)) AS `__sp_rows` LIMIT
//!   18446744073709551615)
//! ```
//!
//! Each column is declared with its table's own type, character set and collation (read
//! from `SHOW CREATE TABLE`), so its values compare, sort, convert and describe themselves
//! as the table's would. A temporary table costs three statements on the gathering node
//! (create, insert, drop) and their round trips, more than the query itself for a point
//! join. The LIMIT keeps MariaDB from merging the derived table into the query: it is
//! materialized once, with an index on the columns the query joins it by
//! (`derived_with_keys`), where a bare JSON_TABLE is scanned once for every outer row.
//!
//! Only where the values' text is exactly the value: integers, decimals, dates and times,
//! and text in a character set other than `binary` (sent by the node in UTF-8). Floating
//! point (whose text may round), bits, binary strings, ENUM, SET and the rest make a
//! temporary table as before; so do more than [`MAX_ROWS`] rows or [`MAX_BYTES`] of JSON.

use mysql_common::packets::Column;
use mysql_common::value::Value;

use crate::merge::Row;
use crate::sql::lex::{statement_tokens, Kind, Mode};
use crate::sql::write::quoted;

/// Rows above which a bound copy is made a temporary table (an indexed one).
pub const MAX_ROWS: usize = crate::plan::bind::INLINE_ROWS;
/// The JSON document's bytes above which a bound copy is made a temporary table: written
/// in hex, the statement stays near the copies' own INSERT batches (512 KiB), under any
/// `max_allowed_packet` a node is likely to have.
pub const MAX_BYTES: usize = 256 * 1024;

/// A column of the copied table, as `JSON_TABLE` declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Col {
    name: String,
    /// `int(11) unsigned`, `varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`.
    decl: String,
    /// Text (its values must arrive as UTF-8).
    text: bool,
}

/// The copied table's columns, every one of a type whose values travel as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    cols: Vec<Col>,
}

const INTEGERS: [&str; 5] = ["tinyint", "smallint", "mediumint", "int", "bigint"];
const TEXTS: [&str; 6] = [
    "char",
    "varchar",
    "tinytext",
    "text",
    "mediumtext",
    "longtext",
];
const OTHERS: [&str; 6] = ["decimal", "date", "datetime", "time", "timestamp", "year"];

/// A name of a character set or collation, as `SHOW CREATE TABLE` writes it.
fn charset_word(w: &str) -> Option<String> {
    (!w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .then(|| w.to_ascii_lowercase())
}

/// The table's default character set and collation, from the definition's last line
/// (`) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci`).
fn table_default(create: &str) -> Option<(String, Option<String>)> {
    let last = create.lines().rev().find(|l| l.starts_with(')'))?;
    let after = |key: &str| {
        let at = last.find(key)? + key.len();
        let w: String = last[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        charset_word(&w)
    };
    Some((after("DEFAULT CHARSET=")?, after(" COLLATE=")))
}

/// A backquoted name at the start of `s` (backquotes doubled inside), and the rest.
fn name(s: &str) -> Option<(String, &str)> {
    let mut rest = s.strip_prefix('`')?;
    let mut out = String::new();
    loop {
        let at = rest.find('`')?;
        out.push_str(&rest[..at]);
        rest = &rest[at + 1..];
        match rest.strip_prefix('`') {
            Some(r) => {
                out.push('`');
                rest = r;
            }
            None => return Some((out, rest)),
        }
    }
}

/// A column line's type word, lower-cased (`int(11)`, `decimal(10,2)`), and its base
/// (`int`, `decimal`).
fn type_word(word: &str) -> (String, String) {
    let ty = word.trim_end_matches(',').to_ascii_lowercase();
    let base = ty.split('(').next().unwrap_or_default().to_string();
    (ty, base)
}

/// Does `create` (`SHOW CREATE TABLE`'s text) declare `column` (a name compares without
/// case, as MariaDB's column names do) an integer?
pub fn integer_column(create: &str, column: &str) -> bool {
    create
        .lines()
        .filter_map(|l| name(l.trim_start()))
        .any(|(n, rest)| {
            n.eq_ignore_ascii_case(column)
                && rest
                    .split(' ')
                    .find(|w| !w.is_empty())
                    .is_some_and(|w| INTEGERS.contains(&type_word(w).1.as_str()))
        })
}

/// One column's line of `SHOW CREATE TABLE`, given the table's default character set.
fn column(line: &str, default: &(String, Option<String>)) -> Option<Col> {
    let (name, rest) = name(line.trim_start())?;
    let mut words = rest.split(' ').filter(|w| !w.is_empty()).peekable();
    let (ty, base) = type_word(words.next()?);
    if !ty
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"(),".contains(&b))
    {
        return None;
    }
    let base = base.as_str();
    let text = TEXTS.contains(&base);
    let integer = INTEGERS.contains(&base);
    if !text && !integer && !OTHERS.contains(&base) {
        return None;
    }
    let mut decl = ty.clone();
    let (mut charset, mut collate) = (None, None);
    while let Some(w) = words.peek().map(|w| w.trim_end_matches(',')) {
        if w.eq_ignore_ascii_case("unsigned") || w.eq_ignore_ascii_case("zerofill") {
            if !integer && base != "decimal" {
                return None;
            }
            decl.push(' ');
            decl.push_str(&w.to_ascii_lowercase());
            words.next();
        } else if w.eq_ignore_ascii_case("CHARACTER") {
            words.next();
            if !words.next()?.eq_ignore_ascii_case("SET") {
                return None;
            }
            charset = Some(charset_word(words.next()?.trim_end_matches(','))?);
        } else if w.eq_ignore_ascii_case("COLLATE") {
            words.next();
            collate = Some(charset_word(words.next()?.trim_end_matches(','))?);
        } else {
            break;
        }
    }
    if text {
        // A column without its own character set has the table's, and its collation.
        let (cs, coll) = match charset {
            Some(cs) => (cs, collate),
            None => (default.0.clone(), collate.or_else(|| default.1.clone())),
        };
        if cs == "binary" {
            return None;
        }
        decl.push_str(" CHARACTER SET ");
        decl.push_str(&cs);
        if let Some(c) = coll {
            decl.push_str(" COLLATE ");
            decl.push_str(&c);
        }
    } else if charset.is_some() || collate.is_some() {
        return None;
    }
    Some(Col { name, decl, text })
}

/// The columns of a table from its `SHOW CREATE TABLE` text, when every one can travel
/// inside a statement.
pub fn shape(create: &str) -> Option<Shape> {
    let default = table_default(create)?;
    // `SELECT *` leaves INVISIBLE columns out, and a statement may still name them.
    if has_invisible(create) {
        return None;
    }
    let cols = create
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with(')'))
        .filter(|l| l.trim_start().starts_with('`'))
        .map(|l| column(l, &default))
        .collect::<Option<Vec<Col>>>()?;
    (!cols.is_empty()).then_some(Shape { cols })
}

impl Shape {
    /// Do the columns a node described for a read of the table's rows (`SELECT t.*`) agree
    /// with this definition: the same names in order, each of the type, sign and fractional
    /// digits it declares? A definition kept a while ([`super::door::Door::kept_definition`])
    /// that a DDL made on the nodes directly has changed is caught so, but for a changed
    /// length or collation.
    pub fn fits(&self, cols: &[Column]) -> bool {
        self.cols.len() == cols.len()
            && self
                .cols
                .iter()
                .zip(cols)
                .all(|(s, c)| c.name_str() == s.name.as_str() && declared_as(&s.decl, c))
    }
}

/// Is `c` a column of the type `decl` (`int(11) unsigned`, `decimal(10,2)`,
/// `datetime(3)`, `varchar(9) CHARACTER SET ...`) declares?
fn declared_as(decl: &str, c: &Column) -> bool {
    use mysql_common::constants::{ColumnFlags, ColumnType::*};
    let word = decl.split(' ').next().unwrap_or_default();
    let (base, args) = match word.split_once('(') {
        Some((b, a)) => (b, a.trim_end_matches(')')),
        None => (word, ""),
    };
    let ty = c.column_type();
    let kind = match base {
        "tinyint" => ty == MYSQL_TYPE_TINY,
        "smallint" => ty == MYSQL_TYPE_SHORT,
        "mediumint" => ty == MYSQL_TYPE_INT24,
        "int" => ty == MYSQL_TYPE_LONG,
        "bigint" => ty == MYSQL_TYPE_LONGLONG,
        "decimal" => matches!(ty, MYSQL_TYPE_NEWDECIMAL | MYSQL_TYPE_DECIMAL),
        "char" => ty == MYSQL_TYPE_STRING,
        "varchar" => matches!(ty, MYSQL_TYPE_VAR_STRING | MYSQL_TYPE_VARCHAR),
        "tinytext" | "text" | "mediumtext" | "longtext" => matches!(
            ty,
            MYSQL_TYPE_BLOB | MYSQL_TYPE_TINY_BLOB | MYSQL_TYPE_MEDIUM_BLOB | MYSQL_TYPE_LONG_BLOB
        ),
        "date" => matches!(ty, MYSQL_TYPE_DATE | MYSQL_TYPE_NEWDATE),
        "datetime" => matches!(ty, MYSQL_TYPE_DATETIME | MYSQL_TYPE_DATETIME2),
        "time" => matches!(ty, MYSQL_TYPE_TIME | MYSQL_TYPE_TIME2),
        "timestamp" => matches!(ty, MYSQL_TYPE_TIMESTAMP | MYSQL_TYPE_TIMESTAMP2),
        "year" => ty == MYSQL_TYPE_YEAR,
        _ => false,
    };
    let unsigned = decl.split(' ').any(|w| w == "unsigned");
    let signed_alike = unsigned == c.flags().contains(ColumnFlags::UNSIGNED_FLAG);
    // The fractional digits: a DECIMAL's scale, a temporal type's precision.
    let digits = match base {
        "decimal" => args.split(',').nth(1).unwrap_or("0").parse::<u8>().ok(),
        "datetime" | "time" | "timestamp" if args.is_empty() => Some(0),
        "datetime" | "time" | "timestamp" => args.parse::<u8>().ok(),
        _ => None,
    };
    kind && (signed_alike || !INTEGERS.contains(&base) && base != "decimal")
        && digits.is_none_or(|d| d == c.decimals())
}

/// Does a definition (`SHOW CREATE TABLE`'s text, or its body) have INVISIBLE columns?
pub fn has_invisible(create: &str) -> bool {
    create
        .lines()
        .any(|l| l.trim_start().starts_with('`') && l.contains(" INVISIBLE"))
}

/// Is `col` (as a node described it) text in UTF-8?
fn utf8(col: &Column) -> bool {
    let cs = crate::sql::write::column_charset(col);
    cs.eq_ignore_ascii_case("utf8mb4") || cs.eq_ignore_ascii_case("utf8mb3") || cs == "utf8"
}

/// Rows read for a bound copy, as the JSON document of a `JSON_TABLE`: an array of rows,
/// each an array of strings (NULL as `null`). `None` once they cannot travel so.
pub struct Doc<'s> {
    shape: &'s Shape,
    json: Option<Vec<u8>>,
    rows: usize,
}

impl<'s> Doc<'s> {
    pub fn new(shape: &'s Shape) -> Self {
        Doc {
            shape,
            json: Some(b"[".to_vec()),
            rows: 0,
        }
    }

    /// Adds a row the node described by `cols`; past the bounds, or where the row is not
    /// the table's columns in order, the rows cannot travel in the statement.
    pub fn row(&mut self, row: &Row, cols: &[Column]) {
        let Some(json) = self.json.as_mut() else {
            return;
        };
        self.rows += 1;
        let fits = self.rows <= MAX_ROWS
            && json.len() <= MAX_BYTES
            && cols.len() == self.shape.cols.len()
            && row.len() == cols.len()
            && self
                .shape
                .cols
                .iter()
                .zip(cols)
                .all(|(s, c)| c.name_str() == s.name.as_str());
        if !fits || !write_row(json, self.rows > 1, row, cols, &self.shape.cols) {
            self.json = None;
        }
    }

    /// The derived table of the rows, `None` when they cannot travel in the statement.
    /// With `param` (a statement a node prepares and keeps by its text, whose text must not
    /// change with its rows) the document is not written in: the table reads it from a `?`
    /// and it is returned as that parameter's value, every character past ASCII written as
    /// a `\u` escape, so that whatever character set the connection takes a string
    /// parameter in leaves it as it is (`CONVERT(? USING utf8mb4)`: a JSON document in
    /// latin1 cannot hold the escape of a character latin1 has not).
    pub fn table(self, param: bool) -> Option<Carry> {
        let mut json = self.json?;
        json.push(b']');
        let mut out = String::with_capacity(json.len() * 2 + 200);
        out.push_str("(SELECT * FROM JSON_TABLE(");
        let param = if param {
            out.push_str("CONVERT(? USING utf8mb4)");
            Some(Value::Bytes(ascii(&json)?))
        } else {
            crate::sql::write::string(&mut out, &json, "utf8mb4");
            None
        };
        out.push_str(", '$[*]' COLUMNS (");
        for (i, c) in self.shape.cols.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&quoted(&c.name));
            out.push(' ');
            out.push_str(&c.decl);
            // A value a node cannot convert is the statement's error, never a NULL (MySQL's
            // JSON_TABLE makes it NULL by default; MariaDB converts as an INSERT would).
            out.push_str(&format!(" PATH '$[{i}]' ERROR ON ERROR"));
        }
        // The largest LIMIT: no row is left out, and the derived table is not merged.
        out.push_str(")) AS `__sp_rows` LIMIT 18446744073709551615)");
        Some(Carry { table: out, param })
    }

    /// The rows added.
    pub fn rows(&self) -> usize {
        self.rows
    }
}

/// Writes one row's values as a JSON array; false where a value cannot travel as text.
fn write_row(json: &mut Vec<u8>, comma: bool, row: &Row, cols: &[Column], shape: &[Col]) -> bool {
    if comma {
        json.push(b',');
    }
    json.push(b'[');
    for (i, ((v, c), s)) in row.iter().zip(cols).zip(shape).enumerate() {
        if i > 0 {
            json.push(b',');
        }
        let bytes = match v {
            None | Some(mysql_common::value::Value::NULL) => {
                json.extend_from_slice(b"null");
                continue;
            }
            Some(mysql_common::value::Value::Bytes(b)) => std::borrow::Cow::Borrowed(b),
            Some(other) => match crate::value::text_form(other) {
                Some(b) => std::borrow::Cow::Owned(b),
                None => return false,
            },
        };
        let Ok(text) = std::str::from_utf8(&bytes) else {
            return false;
        };
        if (s.text && !utf8(c)) || (!s.text && !text.is_ascii()) {
            return false;
        }
        if serde_json::to_writer(&mut *json, text).is_err() {
            return false;
        }
    }
    json.push(b']');
    true
}

/// `sql` with the span `at` (where it names the copy) replaced by `table`.
pub fn placed(sql: &str, at: (usize, usize), table: &str) -> Option<String> {
    let (a, b) = at;
    let (head, tail) = (sql.get(..a)?, sql.get(b..)?);
    Some(format!("{head}{table}{tail}"))
}

/// Rows carried inside a statement: the derived table that stands where it named the copy,
/// and the value of its `?` when they travel as a parameter ([`Doc::table`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Carry {
    pub table: String,
    pub param: Option<Value>,
}

impl Carry {
    /// The statement `sql` (its `?` bound to `params`) with the rows standing at `at`: the
    /// rows' own parameter, if any, takes its place among the others by where it stands.
    /// Several copies are placed from the statement's end, so that the spans before stay
    /// where they are.
    pub fn place(
        &self,
        sql: &str,
        params: &mut Vec<Value>,
        at: (usize, usize),
        mode: Mode,
    ) -> Option<String> {
        let placed = placed(sql, at, &self.table)?;
        if let Some(v) = &self.param {
            // A statement without bound values has no `?` of its own.
            let before = if params.is_empty() {
                0
            } else {
                statement_tokens(sql, mode)
                    .iter()
                    .take_while(|t| t.start < at.0)
                    .filter(|t| t.kind == Kind::Param)
                    .count()
            };
            params.insert(before.min(params.len()), v.clone());
        }
        Some(placed)
    }
}

/// A JSON document (UTF-8) in ASCII: each character past it as `\u` escapes (two for one
/// past the BMP). Outside strings a document is ASCII already.
fn ascii(json: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(json).ok()?;
    let mut out = Vec::with_capacity(json.len() + 16);
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c as u8);
            continue;
        }
        let mut units = [0u16; 2];
        for u in c.encode_utf16(&mut units) {
            out.extend_from_slice(format!("\\u{u:04x}").as_bytes());
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mysql_common::constants::ColumnType;
    use mysql_common::value::Value;

    const CREATE: &str = "CREATE TABLE `products` (
  `product_id` int(11) NOT NULL,
  `a``b` bigint(20) unsigned DEFAULT 3 COMMENT 'x, y',
  `name` varchar(64) DEFAULT NULL,
  `code` char(3) CHARACTER SET latin1 COLLATE latin1_bin NOT NULL DEFAULT 'a',
  `price` decimal(10,2) DEFAULT NULL,
  `at` datetime(3) DEFAULT current_timestamp(3) ON UPDATE current_timestamp(3),
  `v` int(11) GENERATED ALWAYS AS (`product_id` + 1) VIRTUAL,
  PRIMARY KEY (`product_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci";

    fn decls(s: &Shape) -> Vec<(&str, &str)> {
        s.cols
            .iter()
            .map(|c| (c.name.as_str(), c.decl.as_str()))
            .collect()
    }

    #[test]
    fn columns_are_declared_with_the_tables_types_and_collations() {
        let s = shape(CREATE).expect("shape");
        assert_eq!(
            decls(&s),
            vec![
                ("product_id", "int(11)"),
                ("a`b", "bigint(20) unsigned"),
                (
                    "name",
                    "varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"
                ),
                ("code", "char(3) CHARACTER SET latin1 COLLATE latin1_bin"),
                ("price", "decimal(10,2)"),
                ("at", "datetime(3)"),
                ("v", "int(11)"),
            ]
        );
        // A column's own charset without a collation: that charset's default.
        let s = shape(
            "CREATE TABLE `t` (\n  `c` varchar(3) CHARACTER SET latin1 DEFAULT NULL\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        )
        .expect("shape");
        assert_eq!(decls(&s), vec![("c", "varchar(3) CHARACTER SET latin1")]);
    }

    #[test]
    fn a_table_with_a_column_whose_text_is_not_its_value_keeps_its_temporary_table() {
        for col in [
            "`f` float DEFAULT NULL",
            "`d` double DEFAULT NULL",
            "`b` varbinary(10) DEFAULT NULL",
            "`b` blob DEFAULT NULL",
            "`e` enum('a','b') DEFAULT NULL",
            "`s` set('a','b') DEFAULT NULL",
            "`x` bit(1) DEFAULT NULL",
            "`c` varchar(3) CHARACTER SET binary DEFAULT NULL",
            "`g` point DEFAULT NULL",
            "`h` int(11) DEFAULT NULL INVISIBLE",
        ] {
            let create = format!(
                "CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  {col},\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
            );
            assert_eq!(shape(&create), None, "{col}");
        }
        assert_eq!(shape(""), None);
    }

    fn col(name: &str, ty: ColumnType, charset: u16) -> Column {
        Column::new(ty)
            .with_name(name.as_bytes())
            .with_character_set(charset)
    }

    #[test]
    fn a_definition_fits_the_columns_a_node_describes_of_its_type_sign_and_digits() {
        use mysql_common::constants::ColumnFlags;
        let s = shape(CREATE).expect("shape");
        let typed = |name: &str, ty: ColumnType, decimals: u8, unsigned: bool| {
            let c = Column::new(ty)
                .with_name(name.as_bytes())
                .with_decimals(decimals);
            if unsigned {
                c.with_flags(ColumnFlags::UNSIGNED_FLAG)
            } else {
                c
            }
        };
        use ColumnType::*;
        let cols = |price: u8, at: ColumnType, sign: bool| {
            vec![
                typed("product_id", MYSQL_TYPE_LONG, 0, false),
                typed("a`b", MYSQL_TYPE_LONGLONG, 0, sign),
                typed("name", MYSQL_TYPE_VAR_STRING, 39, false),
                typed("code", MYSQL_TYPE_STRING, 39, false),
                typed("price", MYSQL_TYPE_NEWDECIMAL, price, false),
                typed("at", at, 3, false),
                typed("v", MYSQL_TYPE_LONG, 0, false),
            ]
        };
        assert!(s.fits(&cols(2, MYSQL_TYPE_DATETIME, true)));
        // Another scale, type or sign; a column more or less.
        assert!(!s.fits(&cols(3, MYSQL_TYPE_DATETIME, true)));
        assert!(!s.fits(&cols(2, MYSQL_TYPE_TIMESTAMP, true)));
        assert!(!s.fits(&cols(2, MYSQL_TYPE_DATETIME, false)));
        assert!(!s.fits(&cols(2, MYSQL_TYPE_DATETIME, true)[1..]));
    }

    /// A table of an integer and a utf8mb4 text, and the columns a node describes it by.
    fn id_and_name() -> (Shape, [Column; 2]) {
        let s = shape(
            "CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  `n` varchar(9) DEFAULT NULL\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        )
        .expect("shape");
        let cols = [
            col("id", ColumnType::MYSQL_TYPE_LONG, 63),
            col("n", ColumnType::MYSQL_TYPE_VAR_STRING, 45),
        ];
        (s, cols)
    }

    #[test]
    fn rows_become_a_json_table_of_strings_and_nulls() {
        let (s, cols) = id_and_name();
        let mut d = Doc::new(&s);
        d.row(
            &vec![
                Some(Value::Bytes(b"1".to_vec())),
                Some(Value::Bytes(b"a\"'\\".to_vec())),
            ],
            &cols,
        );
        d.row(&vec![Some(Value::Bytes(b"2".to_vec())), None], &cols);
        assert_eq!(d.rows(), 2);
        let t = d.table(false).expect("inline");
        assert_eq!(t.param, None);
        let t = t.table;
        let json = br#"[["1","a\"'\\"],["2",null]]"#;
        let mut hex = String::new();
        crate::sql::write::string(&mut hex, json, "utf8mb4");
        assert_eq!(
            t,
            format!("(SELECT * FROM JSON_TABLE({hex}, '$[*]' COLUMNS (`id` int(11) PATH '$[0]' ERROR ON ERROR, `n` varchar(9) CHARACTER SET utf8mb4 PATH '$[1]' ERROR ON ERROR)) AS `__sp_rows` LIMIT 18446744073709551615)")
        );
        // No rows: an empty table.
        assert!(Doc::new(&s).table(false).is_some());
    }

    #[test]
    fn rows_that_cannot_travel_as_text_keep_the_temporary_table() {
        let s = shape(
            "CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  `n` varchar(9) DEFAULT NULL\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        )
        .expect("shape");
        let id = col("id", ColumnType::MYSQL_TYPE_LONG, 63);
        let row = |n: &[u8]| {
            vec![
                Some(Value::Bytes(b"1".to_vec())),
                Some(Value::Bytes(n.to_vec())),
            ]
        };
        // Text sent in latin1, or bytes that are no UTF-8.
        let mut d = Doc::new(&s);
        d.row(
            &row(b"x"),
            &[id.clone(), col("n", ColumnType::MYSQL_TYPE_VAR_STRING, 8)],
        );
        assert!(d.table(false).is_none());
        let mut d = Doc::new(&s);
        d.row(
            &row(b"\xff"),
            &[id.clone(), col("n", ColumnType::MYSQL_TYPE_VAR_STRING, 45)],
        );
        assert!(d.table(false).is_none());
        // Not the table's columns (an invisible one left out of `*`, or another order).
        let mut d = Doc::new(&s);
        d.row(
            &row(b"x"),
            &[col("n", ColumnType::MYSQL_TYPE_VAR_STRING, 45), id.clone()],
        );
        assert!(d.table(false).is_none());
        // Too many rows.
        let cols = [id, col("n", ColumnType::MYSQL_TYPE_VAR_STRING, 45)];
        let mut d = Doc::new(&s);
        for _ in 0..=MAX_ROWS {
            d.row(&row(b"x"), &cols);
        }
        assert!(d.table(false).is_none());
    }

    #[test]
    fn the_copy_is_replaced_where_the_statement_names_it() {
        let sql = "SELECT p.name FROM `o` AS o JOIN `__sp_ship_0` AS p ON p.id = o.pid";
        let at = sql
            .find("`__sp_ship_0`")
            .map(|a| (a, a + 13))
            .expect("named");
        assert_eq!(
            placed(sql, at, "(SELECT 1)").as_deref(),
            Some("SELECT p.name FROM `o` AS o JOIN (SELECT 1) AS p ON p.id = o.pid")
        );
        assert_eq!(placed(sql, (500, 510), "x"), None);
    }

    #[test]
    fn rows_as_a_parameter_are_ascii_and_take_their_place_among_the_others() {
        let (s, cols) = id_and_name();
        let mut d = Doc::new(&s);
        d.row(
            &vec![
                Some(Value::Bytes(b"1".to_vec())),
                Some(Value::Bytes("é€😀\"".as_bytes().to_vec())),
            ],
            &cols,
        );
        let rows = d.table(true).expect("inline");
        // Past ASCII as escapes, a character past the BMP as its two halves.
        assert_eq!(
            rows.param,
            Some(Value::Bytes(
                br#"[["1","\u00e9\u20ac\ud83d\ude00\""]]"#.to_vec()
            ))
        );
        assert!(rows.table.starts_with(
            "(SELECT * FROM JSON_TABLE(CONVERT(? USING utf8mb4), '$[*]' COLUMNS (`id` int(11)"
        ));
        let mode = Mode::default();
        // Among the statement's own `?` (one before it, one in a string that is none, one
        // after), by where it stands.
        let sql =
            "SELECT ?, '?' FROM `o` AS o JOIN `__sp_ship_0` AS p ON p.id = o.pid WHERE o.u = ?";
        let at = sql
            .find("`__sp_ship_0`")
            .map(|a| (a, a + 13))
            .expect("named");
        let mut params = vec![Value::Int(1), Value::Int(2)];
        let placed = rows.place(sql, &mut params, at, mode).expect("placed");
        assert!(placed.contains("JOIN (SELECT * FROM JSON_TABLE(CONVERT(? USING utf8mb4)"));
        assert_eq!(params.len(), 3);
        assert_eq!(params[0], Value::Int(1));
        assert_eq!(Some(&params[1]), rows.param.as_ref());
        assert_eq!(params[2], Value::Int(2));
        // Without parameters of its own: the rows' alone.
        let bare = "SELECT 1 FROM `o` AS o JOIN `__sp_ship_0` AS p ON p.id = o.pid";
        let at_bare = bare
            .find("`__sp_ship_0`")
            .map(|a| (a, a + 13))
            .expect("named");
        let mut params = Vec::new();
        assert!(rows.place(bare, &mut params, at_bare, mode).is_some());
        assert_eq!(params.len(), 1);
        // Written in: the parameters are left as they are.
        let literal = Doc::new(&s).table(false).expect("inline");
        let mut params = vec![Value::Int(1)];
        assert!(literal.place(sql, &mut params, at, mode).is_some());
        assert_eq!(params, vec![Value::Int(1)]);
    }
}
