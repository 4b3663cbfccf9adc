//! SQL text read as MariaDB reads it: where strings, quoted names, comments and statements
//! begin and end under the session's `sql_mode` (`NO_BACKSLASH_ESCAPES`, `ANSI_QUOTES`), with
//! the byte span of every token. The proxy keeps the client's text and edits it by these
//! spans (`crate::sql::text`), and splits a multi-statement query by them
//! ([`statements`]); it never prints a statement back from a parsed tree.
//!
//! MariaDB's lexer is the reference: a backslash escapes the next byte in a string unless
//! `NO_BACKSLASH_ESCAPES`; a quote doubled inside its string or name stands for itself;
//! `"` opens a name under `ANSI_QUOTES` and a string otherwise; `#` and `-- ` (two dashes
//! and a blank or control character) comment to the end of the line; `/* */` comments,
//! except `/*!...*/` and `/*M!...*/`, whose body is SQL (the proxy reads it as SQL whatever
//! its version: it only ever makes the proxy more careful).

/// What of the session's `sql_mode` changes how text is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Mode {
    /// `NO_BACKSLASH_ESCAPES`: a backslash is an ordinary character in strings.
    pub no_backslash_escapes: bool,
    /// `ANSI_QUOTES` (also part of `ANSI`): `"` quotes names, not strings.
    pub ansi_quotes: bool,
}

impl Mode {
    /// The mode of an `@@sql_mode` value (`STRICT_TRANS_TABLES,ANSI_QUOTES,...`).
    pub fn of_sql_mode(sql_mode: &str) -> Mode {
        let mut m = Mode::default();
        for part in sql_mode.split(',') {
            let p = part.trim();
            if p.eq_ignore_ascii_case("NO_BACKSLASH_ESCAPES") {
                m.no_backslash_escapes = true;
            } else if p.eq_ignore_ascii_case("ANSI_QUOTES") || p.eq_ignore_ascii_case("ANSI") {
                m.ansi_quotes = true;
            }
        }
        m
    }

    /// MariaDB's default reading (backslash escapes, `"` strings).
    pub fn is_default(&self) -> bool {
        *self == Mode::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A keyword or unquoted name (also a word starting with digits, `1abc`).
    Word,
    /// A quoted name: `` `x` ``, or `"x"` under `ANSI_QUOTES`.
    Quoted,
    /// A string literal, quotes included (an introducer or `X` / `N` before it is a word).
    Str,
    Number,
    /// `@x`, `@'x'`, `@@x`, `@@session.x`.
    Var,
    /// A `?` placeholder.
    Param,
    LParen,
    RParen,
    Comma,
    Semi,
    Dot,
    /// Any other punctuation, one byte (`=`, `<`, `:`, ...).
    Op,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tok {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

impl Tok {
    pub fn text<'s>(&self, sql: &'s str) -> &'s str {
        sql.get(self.start..self.end).unwrap_or("")
    }

    /// Is this the unquoted word `kw` (ASCII case ignored)?
    pub fn is(&self, sql: &str, kw: &str) -> bool {
        self.kind == Kind::Word && self.text(sql).eq_ignore_ascii_case(kw)
    }
}

/// Where reading stopped short: an unterminated string, name or comment at `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unterminated {
    pub what: &'static str,
    pub at: usize,
}

/// The tokens of a text, up to where it could not be read (`error`).
#[derive(Debug, Clone, Default)]
pub struct Lexed {
    pub toks: Vec<Tok>,
    pub error: Option<Unterminated>,
}

fn word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

/// `--` starts a comment when a blank or control character (or the end) follows it.
fn dash_comment(b: &[u8], i: usize) -> bool {
    b.get(i) == Some(&b'-')
        && b.get(i + 1) == Some(&b'-')
        && b.get(i + 2).is_none_or(|c| *c <= b' ')
}

/// The end of the quoted run opening at `b[open]` (one past its closing quote), or `None`
/// when it is not closed. A doubled quote stands for itself; a backslash escapes the next
/// byte where `backslash`.
fn quoted_end(b: &[u8], open: usize, backslash: bool) -> Option<usize> {
    let q = b[open];
    let mut i = open + 1;
    while i < b.len() {
        let c = b[i];
        if c == b'\\' && backslash {
            i += 2;
            continue;
        }
        if c == q {
            if b.get(i + 1) == Some(&q) {
                i += 2;
                continue;
            }
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

/// The tokens of one statement, its trailing `;` left out.
pub fn statement_tokens(sql: &str, mode: Mode) -> Vec<Tok> {
    let mut toks = lex(sql, mode).toks;
    while toks.last().is_some_and(|t| t.kind == Kind::Semi) {
        toks.pop();
    }
    toks
}

/// Reads `sql` as MariaDB would under `mode`.
pub fn lex(sql: &str, mode: Mode) -> Lexed {
    let b = sql.as_bytes();
    let mut out = Lexed {
        toks: Vec::with_capacity(b.len() / 4 + 4),
        error: None,
    };
    let mut i = 0;
    // Inside an executable comment: its `*/` closes it.
    let mut in_exec = false;
    let push = |out: &mut Lexed, kind, start, end| out.toks.push(Tok { kind, start, end });
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() || c == 0x0b {
            i += 1;
            continue;
        }
        if c == b'#' || dash_comment(b, i) {
            i = memchr::memchr(b'\n', &b[i..]).map_or(b.len(), |n| i + n + 1);
            continue;
        }
        if c == b'*' && in_exec && b.get(i + 1) == Some(&b'/') {
            in_exec = false;
            i += 2;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let exec = match (b.get(i + 2), b.get(i + 3)) {
                (Some(b'!'), _) => Some(i + 3),
                (Some(b'M'), Some(b'!')) => Some(i + 4),
                _ => None,
            };
            match exec {
                Some(body) if !in_exec => {
                    in_exec = true;
                    // The version digits, if any, are not SQL.
                    i = body + b[body..].iter().take_while(|c| c.is_ascii_digit()).count();
                }
                _ => match memchr::memmem::find(&b[i + 2..], b"*/") {
                    Some(n) => i = i + 2 + n + 2,
                    None => {
                        out.error = Some(Unterminated {
                            what: "comment",
                            at: i,
                        });
                        return out;
                    }
                },
            }
            continue;
        }
        let start = i;
        let (kind, end) = match c {
            b'\'' | b'"' | b'`' => {
                let name = c == b'`' || (c == b'"' && mode.ansi_quotes);
                match quoted_end(b, i, !name && !mode.no_backslash_escapes) {
                    Some(e) => (if name { Kind::Quoted } else { Kind::Str }, e),
                    None => {
                        out.error = Some(Unterminated {
                            what: if name { "quoted name" } else { "string" },
                            at: i,
                        });
                        return out;
                    }
                }
            }
            b'@' => {
                let mut j = i + 1;
                let sys = b.get(j) == Some(&b'@');
                if sys {
                    j += 1;
                }
                match b.get(j) {
                    Some(q @ (b'\'' | b'"' | b'`')) if !sys => {
                        let backslash = *q != b'`' && !mode.no_backslash_escapes;
                        match quoted_end(b, j, backslash) {
                            Some(e) => (Kind::Var, e),
                            None => {
                                out.error = Some(Unterminated {
                                    what: "variable name",
                                    at: i,
                                });
                                return out;
                            }
                        }
                    }
                    _ => {
                        while j < b.len() && (word_byte(b[j]) || (sys && b[j] == b'.')) {
                            j += 1;
                        }
                        (Kind::Var, j)
                    }
                }
            }
            b'?' => (Kind::Param, i + 1),
            b'(' => (Kind::LParen, i + 1),
            b')' => (Kind::RParen, i + 1),
            b',' => (Kind::Comma, i + 1),
            b';' => (Kind::Semi, i + 1),
            b'.' if b.get(i + 1).is_some_and(u8::is_ascii_digit)
                && !out
                    .toks
                    .last()
                    .is_some_and(|t| matches!(t.kind, Kind::Word | Kind::Quoted) && t.end == i) =>
            {
                (Kind::Number, number_end(b, i))
            }
            b'.' => (Kind::Dot, i + 1),
            c if c.is_ascii_digit() => {
                let mut j = i;
                while j < b.len() && word_byte(b[j]) {
                    j += 1;
                }
                if b[i..j].iter().all(u8::is_ascii_digit) {
                    (Kind::Number, number_end(b, i))
                } else if b[i..j].iter().all(u8::is_ascii_alphanumeric)
                    && (exponent(&b[i..j]) || hex_number(&b[i..j]))
                {
                    (Kind::Number, number_end(b, i).max(j))
                } else {
                    (Kind::Word, j)
                }
            }
            c if word_byte(c) => {
                let mut j = i;
                while j < b.len() && word_byte(b[j]) {
                    j += 1;
                }
                (Kind::Word, j)
            }
            _ => (Kind::Op, i + 1),
        };
        push(&mut out, kind, start, end);
        i = end;
    }
    out
}

fn exponent(w: &[u8]) -> bool {
    let Some(e) = w.iter().position(|c| *c == b'e' || *c == b'E') else {
        return false;
    };
    e > 0 && w[..e].iter().all(u8::is_ascii_digit) && w[e + 1..].iter().all(u8::is_ascii_digit)
}

fn hex_number(w: &[u8]) -> bool {
    w.len() > 2
        && w[0] == b'0'
        && matches!(w[1], b'x' | b'b')
        && w[2..].iter().all(u8::is_ascii_hexdigit)
}

/// The end of a number starting at `i`: digits, a fraction, an exponent with its sign.
fn number_end(b: &[u8], i: usize) -> usize {
    let digits = |mut j: usize| {
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        j
    };
    let mut j = digits(i);
    if b.get(j) == Some(&b'.') {
        j = digits(j + 1);
    }
    if matches!(b.get(j), Some(b'e' | b'E')) {
        let k = if matches!(b.get(j + 1), Some(b'+' | b'-')) {
            j + 2
        } else {
            j + 1
        };
        if b.get(k).is_some_and(u8::is_ascii_digit) {
            j = digits(k);
        }
    }
    j
}

/// The statements of a query text, as byte ranges without their `;`, blank ones left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub parts: Vec<(usize, usize)>,
    /// The text could not be read to its end (an unterminated string or comment): the
    /// parts after the last `;` read are one, as it is.
    pub unterminated: bool,
    /// A compound statement (a stored program's `BEGIN ... END` body) made the proxy find
    /// its end by counting blocks: MariaDB's own parser is the judge of such text.
    pub compound: bool,
}

/// Splits a query into its statements where MariaDB would: at each `;` outside strings,
/// names, comments and parentheses, and outside the body of a compound statement (`CREATE
/// PROCEDURE ... BEGIN ...; ...; END`, `BEGIN NOT ATOMIC ... END`, a top-level `IF ... END
/// IF`).
pub fn statements(sql: &str, mode: Mode) -> Split {
    let lexed = lex(sql, mode);
    let toks = &lexed.toks;
    let mut split = Split {
        parts: Vec::new(),
        unterminated: lexed.error.is_some(),
        compound: false,
    };
    let mut i = 0;
    while i < toks.len() {
        let first = i;
        let compound = starts_compound(sql, &toks[i..]);
        split.compound |= compound;
        let mut depth = 0i64;
        let mut blocks = 0i64;
        while i < toks.len() {
            let t = toks[i];
            match t.kind {
                Kind::LParen => depth += 1,
                Kind::RParen => depth -= 1,
                Kind::Semi if depth <= 0 && blocks <= 0 => break,
                Kind::Word if compound => {
                    let at_start = i == first
                        || matches!(toks[i - 1].kind, Kind::Semi)
                        || (toks[i - 1].kind == Kind::Op && toks[i - 1].text(sql) == ":")
                        || ["BEGIN", "THEN", "ELSE", "DO", "LOOP", "REPEAT"]
                            .iter()
                            .any(|k| toks[i - 1].is(sql, k));
                    let w = t.text(sql);
                    let opens = w.eq_ignore_ascii_case("BEGIN")
                        || w.eq_ignore_ascii_case("CASE")
                        || (at_start
                            && ["IF", "LOOP", "WHILE", "REPEAT", "FOR"]
                                .iter()
                                .any(|k| w.eq_ignore_ascii_case(k)));
                    if opens {
                        blocks += 1;
                    } else if w.eq_ignore_ascii_case("END") {
                        blocks -= 1;
                        // `END IF`, `END LOOP`, ...: the word after names the block.
                        if toks.get(i + 1).is_some_and(|n| {
                            ["IF", "LOOP", "WHILE", "REPEAT", "FOR", "CASE"]
                                .iter()
                                .any(|k| n.is(sql, k))
                        }) {
                            i += 1;
                        }
                    }
                }
                _ => {}
            }
            i += 1;
        }
        let end = toks.get(i).map_or(sql.len(), |t| t.start);
        let start = toks[first].start;
        if i > first {
            split.parts.push((start, end));
        }
        // Past the `;`.
        i += 1;
    }
    if let Some(e) = lexed.error {
        // The unread rest belongs to the last statement (or is one of its own).
        let from = split
            .parts
            .last()
            .filter(|_| toks.last().is_some_and(|t| t.kind != Kind::Semi))
            .map(|p| p.0);
        match from {
            Some(start) => {
                if let Some(last) = split.parts.last_mut() {
                    *last = (start, sql.len());
                }
            }
            None => split.parts.push((e.at, sql.len())),
        }
    }
    split
}

/// Does the statement starting at `toks[0]` hold a compound body: `CREATE [OR REPLACE]
/// [DEFINER = ...] [AGGREGATE] PROCEDURE | FUNCTION | TRIGGER | EVENT | PACKAGE`, `BEGIN NOT
/// ATOMIC`, a labelled block, or a top-level `IF` / `CASE` / `LOOP` / `WHILE` / `REPEAT` /
/// `FOR`?
fn starts_compound(sql: &str, toks: &[Tok]) -> bool {
    let Some(first) = toks.first() else {
        return false;
    };
    let is = |i: usize, k: &str| toks.get(i).is_some_and(|t| t.is(sql, k));
    if ["IF", "CASE", "LOOP", "WHILE", "REPEAT", "FOR"]
        .iter()
        .any(|k| first.is(sql, k))
    {
        // `IF(...)` is not a statement; `FOR` alone neither.
        return toks.get(1).is_some_and(|t| t.kind != Kind::LParen) || first.is(sql, "LOOP");
    }
    if is(0, "BEGIN") {
        return is(1, "NOT") && is(2, "ATOMIC");
    }
    if matches!(first.kind, Kind::Word | Kind::Quoted)
        && toks
            .get(1)
            .is_some_and(|t| t.kind == Kind::Op && t.text(sql) == ":")
    {
        return true;
    }
    if !is(0, "CREATE") {
        return false;
    }
    // Up to the object kind: OR REPLACE, DEFINER = user[@host], AGGREGATE, DEFINITELY NOT
    // a table (a CREATE TABLE ... SELECT holds no body).
    for t in toks.iter().skip(1).take(12) {
        let w = t.text(sql);
        if ["PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "PACKAGE"]
            .iter()
            .any(|k| t.is(sql, k))
        {
            return true;
        }
        if t.kind == Kind::Word
            && [
                "TABLE", "VIEW", "INDEX", "DATABASE", "SCHEMA", "USER", "ROLE", "SEQUENCE",
            ]
            .iter()
            .any(|k| w.eq_ignore_ascii_case(k))
        {
            return false;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(sql: &str, mode: Mode) -> Vec<(Kind, &str)> {
        lex(sql, mode)
            .toks
            .iter()
            .map(|t| (t.kind, t.text(sql)))
            .collect()
    }

    fn parts(sql: &str, mode: Mode) -> Vec<&str> {
        statements(sql, mode)
            .parts
            .iter()
            .map(|(a, b)| &sql[*a..*b])
            .collect()
    }

    const NBE: Mode = Mode {
        no_backslash_escapes: true,
        ansi_quotes: false,
    };
    const ANSI: Mode = Mode {
        no_backslash_escapes: false,
        ansi_quotes: true,
    };

    #[test]
    fn strings_end_where_mariadb_ends_them() {
        let d = Mode::default();
        assert_eq!(
            kinds(r"SELECT '\\\'; DROP TABLE t; -- '", d),
            vec![
                (Kind::Word, "SELECT"),
                (Kind::Str, r"'\\\'; DROP TABLE t; -- '")
            ]
        );
        // Without backslash escapes the string ends at the second quote.
        let k = kinds(r"SELECT 'a\'; DROP TABLE t; -- '", NBE);
        assert_eq!(k[1], (Kind::Str, r"'a\'"));
        assert_eq!(k[2], (Kind::Semi, ";"));
        assert_eq!(
            kinds("SELECT 'it''s', \"q\"\"d\"", d)[1..],
            [
                (Kind::Str, "'it''s'"),
                (Kind::Comma, ","),
                (Kind::Str, "\"q\"\"d\"")
            ]
        );
        assert_eq!(kinds("SELECT \"a\"", ANSI)[1], (Kind::Quoted, "\"a\""));
        assert_eq!(kinds("SELECT `a``b`", d)[1], (Kind::Quoted, "`a``b`"));
        assert!(lex("SELECT 'open", d).error.is_some());
    }

    #[test]
    fn comments_are_skipped_and_executable_comments_read() {
        let d = Mode::default();
        let k = kinds("SELECT 1 -- x ; y\n, 2 # z ;\n, 3 /* ; */ , 4--5", d);
        let texts: Vec<&str> = k.iter().map(|x| x.1).collect();
        assert_eq!(
            texts,
            vec!["SELECT", "1", ",", "2", ",", "3", ",", "4", "-", "-", "5"]
        );
        let k = kinds("SELECT 1 /*!50000 ; DROP TABLE t */", d);
        assert!(k.iter().any(|x| x.0 == Kind::Semi));
        let k = kinds("/*M!100100 SET x = 1 */", d);
        assert_eq!(k[0], (Kind::Word, "SET"));
        assert!(lex("SELECT 1 /* open", d).error.is_some());
    }

    #[test]
    fn variables_numbers_and_placeholders() {
        let d = Mode::default();
        assert_eq!(
            kinds(
                "@a, @'x y', @@session.sql_mode, ?, 1.5e-3, .5, t.c, 0x1F, 1abc",
                d
            ),
            vec![
                (Kind::Var, "@a"),
                (Kind::Comma, ","),
                (Kind::Var, "@'x y'"),
                (Kind::Comma, ","),
                (Kind::Var, "@@session.sql_mode"),
                (Kind::Comma, ","),
                (Kind::Param, "?"),
                (Kind::Comma, ","),
                (Kind::Number, "1.5e-3"),
                (Kind::Comma, ","),
                (Kind::Number, ".5"),
                (Kind::Comma, ","),
                (Kind::Word, "t"),
                (Kind::Dot, "."),
                (Kind::Word, "c"),
                (Kind::Comma, ","),
                (Kind::Number, "0x1F"),
                (Kind::Comma, ","),
                (Kind::Word, "1abc"),
            ]
        );
    }

    #[test]
    fn statements_split_at_top_level_semicolons() {
        let d = Mode::default();
        assert_eq!(
            parts(
                "SELECT 1; CREATE TABLE t_stacked (x INT); SELECT 1 begin",
                d
            ),
            vec![
                "SELECT 1",
                "CREATE TABLE t_stacked (x INT)",
                "SELECT 1 begin"
            ]
        );
        assert_eq!(
            parts("SELECT 'a;b', `c;d`; ", d),
            vec!["SELECT 'a;b', `c;d`"]
        );
        assert_eq!(parts("SELECT 1; -- only a comment", d), vec!["SELECT 1"]);
        assert_eq!(parts(r"SELECT '\\'; DROP TABLE t", d).len(), 2);
        assert_eq!(parts(r"SELECT 'a\'; DROP TABLE t; -- '", d).len(), 1);
        assert_eq!(parts(r"SELECT 'a\'; DROP TABLE t; -- '", NBE).len(), 2);
        assert_eq!(parts("BEGIN; SELECT 1", d), vec!["BEGIN", "SELECT 1"]);
        let s = statements("SELECT 1; SELECT 'open", d);
        assert!(s.unterminated);
        assert_eq!(s.parts.len(), 2);
        let s = statements("SELECT 'open; SELECT 2", d);
        assert_eq!(s.parts.len(), 1);
    }

    #[test]
    fn compound_bodies_stay_whole() {
        let d = Mode::default();
        let p = "CREATE PROCEDURE p() BEGIN DECLARE x INT DEFAULT 0; IF x THEN SELECT 1; END IF; \
                 SELECT CASE WHEN x THEN 1 END; lbl: LOOP LEAVE lbl; END LOOP; END";
        assert_eq!(parts(&format!("{p}; SELECT 2"), d), vec![p, "SELECT 2"]);
        let a = "BEGIN NOT ATOMIC SELECT 1; SELECT 2; END";
        assert_eq!(parts(a, d), vec![a]);
        let t = "CREATE DEFINER=`a`@`%` TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.x = 1";
        assert_eq!(parts(&format!("{t}; SELECT 3"), d), vec![t, "SELECT 3"]);
        let i = "IF 1 THEN SELECT 1; ELSE SELECT 2; END IF";
        assert_eq!(parts(i, d), vec![i]);
        assert!(statements(i, d).compound);
        assert!(!statements("SELECT IF(1, 2, 3); SELECT 2", d).compound);
    }
}
