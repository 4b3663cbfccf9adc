//! Views the proxy keeps itself: `CREATE VIEW v AS SELECT ...` over tables placed by the
//! rules cannot live on a node (each node holds some of the rows), so its definition is kept
//! in the metadata schema and every statement that reads `v` reads `(SELECT ...) AS v` in
//! its place: a derived table, planned like any other read over the view's tables. MariaDB
//! answers a view's SELECT as such a derived table would, MERGE or TEMPTABLE alike, so the
//! answer is the one a single server gives.
//!
//! What is parsed here: the view statements (`CREATE [OR REPLACE] ... VIEW`, `ALTER ...
//! VIEW`, `DROP VIEW`), read by the lexer so that the SELECT is kept as the client wrote it;
//! and the expansion of a statement's references to views, by token spans
//! (`super::rename`), repeated for views over views.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use sqlparser::ast::{
    Expr, FromTable, ObjectName, SelectItem, Statement, TableFactor, TableObject, TableWithJoins,
    Visit, Visitor,
};

use crate::sql::lex::{self, Kind, Mode, Tok};
use crate::sql::write::quoted;

/// How many views inside views a statement may reach (MariaDB has no lower bound short of
/// a view that names itself).
pub const MAX_DEPTH: usize = 32;

/// MariaDB's `ER_VIEW_RECURSIVE`.
pub const ER_VIEW_RECURSIVE: u16 = 1462;

/// One view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// As the client named it.
    pub name: String,
    /// Its column list, when it has one.
    pub columns: Vec<String>,
    /// The SELECT, as written.
    pub body: String,
    /// `ALGORITHM=... DEFINER=... SQL SECURITY ...`, as SHOW CREATE VIEW prints them.
    pub algorithm: String,
    pub definer: String,
    pub security: String,
    /// `CASCADED` or `LOCAL` for `WITH ... CHECK OPTION`.
    pub check: Option<String>,
    /// How its text is read (the `sql_mode` of the session that created it).
    pub mode: Mode,
    /// The `character_set_client` of the session that created it.
    pub charset: String,
}

impl View {
    /// The statement that makes it again (stored in the metadata, shown by SHOW CREATE VIEW).
    pub fn create_statement(&self) -> String {
        let mut s = format!(
            "CREATE ALGORITHM={} DEFINER={} SQL SECURITY {} VIEW {}",
            self.algorithm,
            self.definer,
            self.security,
            quoted(&self.name)
        );
        if !self.columns.is_empty() {
            let cols: Vec<String> = self.columns.iter().map(|c| quoted(c)).collect();
            s.push_str(&format!(" ({})", cols.join(",")));
        }
        s.push_str(" AS ");
        s.push_str(&self.body);
        if let Some(c) = &self.check {
            // After a newline: the body may end in a `--` comment.
            s.push_str(&format!("\nWITH {c} CHECK OPTION"));
        }
        s
    }

    /// The text that stands for the view in a statement: its SELECT as a derived table, its
    /// column list given by a WITH clause of its own.
    pub fn source(&self) -> String {
        // The newline ends a `--` or `#` comment at the end of the body.
        if self.columns.is_empty() {
            return format!("({}\n)", self.body);
        }
        if let Some(body) = self.aliased_body() {
            return format!("({body}\n)");
        }
        let cols: Vec<String> = self.columns.iter().map(|c| quoted(c)).collect();
        format!(
            "(WITH `__sp_view` ({}) AS ({}\n) SELECT * FROM `__sp_view`)",
            cols.join(", "),
            self.body
        )
    }

    /// The body with its column list as the aliases of its SELECT's items (of a UNION's
    /// first), where every item can be found in its text.
    fn aliased_body(&self) -> Option<String> {
        let parsed = crate::sql::parse_in(&self.body, self.mode).ok()?;
        let Statement::Query(q) = &parsed.stmt else {
            return None;
        };
        let s = super::rename::naming_select(q)?;
        if s.projection.len() != self.columns.len() {
            return None;
        }
        let body = self.body.as_str();
        let mut edits = Vec::new();
        for (item, col) in s.projection.iter().zip(&self.columns) {
            match item {
                SelectItem::UnnamedExpr(e) => {
                    let (_, b) = crate::sql::item_range(body, e, self.mode)?;
                    edits.push((b, b, format!(" AS {}", quoted(col))));
                }
                SelectItem::ExprWithAlias { alias, .. } => {
                    let a = crate::sql::byte_offset(body, alias.span.start)?;
                    let t = lex::lex(&body[a..], self.mode).toks.first().copied()?;
                    edits.push((a, a + t.end, quoted(col)));
                }
                _ => return None,
            }
        }
        edits.sort_by_key(|e| e.0);
        let mut out = String::with_capacity(body.len() + 16 * edits.len());
        let mut at = 0;
        for (a, b, with) in edits {
            if a < at {
                return None;
            }
            out.push_str(&body[at..a]);
            out.push_str(&with);
            at = b;
        }
        out.push_str(&body[at..]);
        Some(out)
    }

    /// How many columns its SELECT gives, where its items say (none is a `*`).
    pub fn select_items(&self) -> Option<usize> {
        let parsed = crate::sql::parse_in(&self.body, self.mode).ok()?;
        let Statement::Query(q) = &parsed.stmt else {
            return None;
        };
        let s = super::rename::naming_select(q)?;
        s.projection
            .iter()
            .all(|i| {
                matches!(
                    i,
                    SelectItem::UnnamedExpr(_) | SelectItem::ExprWithAlias { .. }
                )
            })
            .then_some(s.projection.len())
    }

    /// Whether the body reads the same under every `sql_mode`: no `"` quotes, no
    /// backslash in a string.
    fn reads_alike_in_every_mode(&self) -> bool {
        let lexed = lex::lex(&self.body, self.mode);
        lexed.toks.iter().all(|t| {
            let text = t.text(&self.body);
            match t.kind {
                Kind::Str => !text.starts_with('"') && !text.contains('\\'),
                Kind::Quoted => !text.starts_with('"'),
                _ => true,
            }
        })
    }
}

/// The views a proxy knows, by lower-cased name (the proxy names tables case-insensitively).
#[derive(Debug, Clone, Default)]
pub struct Views {
    by_name: HashMap<String, Arc<View>>,
    /// The metadata's version of them (`crate::metadata::views`).
    pub version: i64,
}

impl Views {
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<&Arc<View>> {
        self.by_name.get(&name.to_ascii_lowercase())
    }

    /// Every view, by name.
    pub fn all(&self) -> Vec<&Arc<View>> {
        let mut v: Vec<&Arc<View>> = self.by_name.values().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    pub fn insert(&mut self, view: View) {
        self.by_name
            .insert(view.name.to_ascii_lowercase(), Arc::new(view));
    }

    /// The views of stored definitions: `(CREATE VIEW text, its sql_mode flags, its
    /// character_set_client)`; a definition that no longer parses is left out and named in
    /// the second list.
    pub fn from_definitions(version: i64, defs: &[(String, Mode, String)]) -> (Views, Vec<String>) {
        let mut views = Views {
            version,
            ..Default::default()
        };
        let mut bad = Vec::new();
        for (text, mode, charset) in defs {
            match ddl(text, *mode) {
                Some(Ok(ViewDdl::Create { mut view, .. })) => {
                    view.charset = charset.clone();
                    views.insert(*view)
                }
                _ => bad.push(text.clone()),
            }
        }
        (views, bad)
    }

    /// Could `sql` name one of these views? (A cheap look at its bytes before any parsing.)
    pub fn may_be_named_in(&self, sql: &str) -> bool {
        self.by_name
            .keys()
            .any(|n| crate::sql::contains_ci(sql.as_bytes(), n.as_bytes()))
    }
}

/// A view statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViewDdl {
    /// `CREATE [OR REPLACE] VIEW [IF NOT EXISTS]`, or `ALTER VIEW` (`alter`).
    Create {
        view: Box<View>,
        schema: Option<String>,
        or_replace: bool,
        if_not_exists: bool,
        alter: bool,
    },
    /// `DROP VIEW [IF EXISTS] v [, w ...]`: `(schema, name)` each.
    Drop {
        names: Vec<(Option<String>, String)>,
        if_exists: bool,
    },
}

/// MariaDB's `ER_VIEW_SELECT_VARIABLE`.
pub const ER_VIEW_SELECT_VARIABLE: u16 = 1351;

/// Reads a view statement; `None` for any other statement, `Some(Err(reason))` for one that
/// is malformed (MariaDB's parser answers it).
pub fn ddl(sql: &str, mode: Mode) -> Option<Result<ViewDdl, String>> {
    let toks = lex::statement_tokens(sql, mode);
    let toks: &[Tok] = &toks;
    let first = toks.first()?;
    if first.is(sql, "DROP") {
        return (toks.get(1)?.is(sql, "VIEW")).then(|| drop_view(sql, &toks[2..]));
    }
    let alter = first.is(sql, "ALTER");
    if !alter && !first.is(sql, "CREATE") {
        return None;
    }
    // The words before VIEW: OR REPLACE, ALGORITHM = x, DEFINER = u, SQL SECURITY x.
    let at_view = toks.iter().position(|t| t.is(sql, "VIEW"))?;
    let head = &toks[1..at_view];
    if head.iter().any(|t| {
        t.is(sql, "TABLE") || t.is(sql, "INDEX") || t.is(sql, "TRIGGER") || t.is(sql, "EVENT")
    }) {
        return None;
    }
    if !head_is_view_options(sql, head) {
        return None;
    }
    Some(create_view(sql, toks, at_view, mode, alter))
}

/// Whether the words between CREATE/ALTER and VIEW are a view's options.
fn head_is_view_options(sql: &str, head: &[Tok]) -> bool {
    let mut i = 0;
    while i < head.len() {
        let t = &head[i];
        if t.is(sql, "OR") && head.get(i + 1).is_some_and(|n| n.is(sql, "REPLACE")) {
            i += 2;
        } else if t.is(sql, "ALGORITHM") || t.is(sql, "DEFINER") {
            // `= value`, the value one or more tokens up to the next option.
            i += 1;
            if head.get(i).is_some_and(|n| n.text(sql) == "=") {
                i += 1;
            }
            while i < head.len()
                && !(head[i].is(sql, "SQL")
                    || head[i].is(sql, "DEFINER")
                    || head[i].is(sql, "ALGORITHM"))
            {
                i += 1;
            }
        } else if t.is(sql, "SQL") && head.get(i + 1).is_some_and(|n| n.is(sql, "SECURITY")) {
            i += 3;
        } else {
            return false;
        }
    }
    true
}

/// The text of the option `word` (`ALGORITHM`, `DEFINER`) in `head`, after its `=`.
fn option_text(sql: &str, head: &[Tok], word: &str) -> Option<String> {
    let at = head.iter().position(|t| t.is(sql, word))?;
    let mut i = at + 1;
    if head.get(i).is_some_and(|n| n.text(sql) == "=") {
        i += 1;
    }
    let start = head.get(i)?.start;
    let mut end = head[i].end;
    i += 1;
    while i < head.len()
        && !(head[i].is(sql, "SQL") || head[i].is(sql, "DEFINER") || head[i].is(sql, "ALGORITHM"))
    {
        end = head[i].end;
        i += 1;
    }
    Some(sql[start..end].to_string())
}

fn create_view(
    sql: &str,
    toks: &[Tok],
    at_view: usize,
    mode: Mode,
    alter: bool,
) -> Result<ViewDdl, String> {
    let head = &toks[1..at_view];
    let or_replace = head.iter().any(|t| t.is(sql, "REPLACE"));
    let algorithm = option_text(sql, head, "ALGORITHM")
        .map(|a| a.to_ascii_uppercase())
        .unwrap_or_else(|| "UNDEFINED".into());
    if !["UNDEFINED", "MERGE", "TEMPTABLE"].contains(&algorithm.as_str()) {
        return Err(format!("unknown ALGORITHM {algorithm}"));
    }
    let definer = option_text(sql, head, "DEFINER").unwrap_or_default();
    let security = head
        .iter()
        .position(|t| t.is(sql, "SECURITY"))
        .and_then(|i| head.get(i + 1))
        .map(|t| t.text(sql).to_ascii_uppercase())
        .unwrap_or_else(|| "DEFINER".into());
    if !["DEFINER", "INVOKER"].contains(&security.as_str()) {
        return Err(format!("unknown SQL SECURITY {security}"));
    }
    let mut i = at_view + 1;
    let word = |i: usize, w: &str| toks.get(i).is_some_and(|t| t.is(sql, w));
    let if_not_exists = word(i, "IF") && word(i + 1, "NOT") && word(i + 2, "EXISTS");
    if if_not_exists {
        i += 3;
    }
    let (schema, name, next) = object_name(sql, toks, i).ok_or("a view name")?;
    i = next;
    let mut columns = Vec::new();
    if toks.get(i).is_some_and(|t| t.kind == Kind::LParen) {
        i += 1;
        loop {
            let t = toks.get(i).ok_or("a column list")?;
            columns.push(ident(sql, t).ok_or("a column name")?);
            match toks.get(i + 1).map(|t| t.kind) {
                Some(Kind::Comma) => i += 2,
                Some(Kind::RParen) => {
                    i += 2;
                    break;
                }
                _ => return Err("a column list".into()),
            }
        }
    }
    if !word(i, "AS") {
        return Err("AS SELECT ...".into());
    }
    let mut end = toks.len();
    let mut check = None;
    let n = toks.len();
    if n >= 3 && toks[n - 1].is(sql, "OPTION") && toks[n - 2].is(sql, "CHECK") {
        let (w, kind) =
            if n >= 4 && (toks[n - 3].is(sql, "CASCADED") || toks[n - 3].is(sql, "LOCAL")) {
                (n - 4, toks[n - 3].text(sql).to_ascii_uppercase())
            } else {
                (n - 3, "CASCADED".to_string())
            };
        if toks[w].is(sql, "WITH") {
            check = Some(kind);
            end = w;
        }
    }
    let body_toks = toks
        .get(i + 1..end)
        .filter(|b| !b.is_empty())
        .ok_or("a SELECT")?;
    let body = sql[body_toks[0].start..body_toks[body_toks.len() - 1].end].to_string();
    // One SELECT (or UNION, WITH), nothing after it: what is inlined where the view is read.
    match crate::sql::parse_in(&body, mode) {
        Ok(p) if matches!(p.stmt, Statement::Query(_)) => {}
        _ => return Err("a SELECT".into()),
    }
    if body_toks.iter().any(|t| t.kind == Kind::Param)
        || body_toks
            .iter()
            .any(|t| t.kind == Kind::Var && !t.text(sql).starts_with("@@"))
    {
        return Err("variable".into());
    }
    Ok(ViewDdl::Create {
        view: Box::new(View {
            name,
            columns,
            body,
            algorithm,
            definer,
            security,
            check,
            mode,
            charset: "utf8mb4".into(),
        }),
        schema,
        or_replace,
        if_not_exists,
        alter,
    })
}

fn drop_view(sql: &str, toks: &[Tok]) -> Result<ViewDdl, String> {
    let word = |i: usize, w: &str| toks.get(i).is_some_and(|t| t.is(sql, w));
    let mut i = 0;
    let if_exists = word(0, "IF") && word(1, "EXISTS");
    if if_exists {
        i = 2;
    }
    let mut names = Vec::new();
    loop {
        let (schema, name, next) = object_name(sql, toks, i).ok_or("a view name")?;
        names.push((schema, name));
        i = next;
        if toks.get(i).is_some_and(|t| t.kind == Kind::Comma) {
            i += 1;
            continue;
        }
        break;
    }
    if word(i, "RESTRICT") || word(i, "CASCADE") {
        i += 1;
    }
    if i != toks.len() {
        return Err("the end of DROP VIEW".into());
    }
    Ok(ViewDdl::Drop { names, if_exists })
}

/// `[schema.]name` at `toks[i]`: `(schema, name, the index after it)`.
pub fn object_name(sql: &str, toks: &[Tok], i: usize) -> Option<(Option<String>, String, usize)> {
    let first = ident(sql, toks.get(i)?)?;
    if toks.get(i + 1).is_some_and(|t| t.kind == Kind::Dot) {
        let second = ident(sql, toks.get(i + 2)?)?;
        return Some((Some(first), second, i + 3));
    }
    Some((None, first, i + 1))
}

/// A name token's name: unquoted, a doubled quote read as one.
fn ident(sql: &str, t: &Tok) -> Option<String> {
    let text = t.text(sql);
    match t.kind {
        Kind::Word => Some(text.to_string()),
        Kind::Quoted => {
            let q = text.chars().next()?;
            let inner = text.get(1..text.len().checked_sub(1)?)?;
            Some(inner.replace(&format!("{q}{q}"), &q.to_string()))
        }
        _ => None,
    }
}

/// Why a statement naming views cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub code: u16,
    pub message: String,
}

/// `sql` with every view it reads replaced by the view's SELECT (views inside views too);
/// `Ok(None)` when it names no view of `views` in the session's database `db`.
pub fn expand(
    sql: &str,
    mode: Mode,
    views: &Views,
    db: Option<&str>,
) -> Result<Option<String>, Refused> {
    if views.is_empty() || !views.may_be_named_in(sql) {
        return Ok(None);
    }
    let mut text = sql.to_string();
    for depth in 0..=MAX_DEPTH {
        let Ok(parsed) = crate::sql::parse_in(&text, mode) else {
            // The client's own text: its node gives the verdict. (An expansion that no
            // longer parses is the view's fault.)
            return match depth {
                0 => Ok(None),
                _ => Err(refused(
                    "the statement does not parse once its views are expanded",
                )),
            };
        };
        let ctes = super::gather::cte_names(&parsed.stmt);
        let of_view = |name: &ObjectName| -> Option<&Arc<View>> {
            if name.0.len() == 1 && ctes.contains(&crate::sql::table_name(name)) {
                return None;
            }
            let schema = crate::sql::schema_name(name);
            if name.0.len() > 2
                || schema.is_some_and(|s| db.is_some_and(|d| !s.eq_ignore_ascii_case(d)))
            {
                return None;
            }
            views.get(&crate::sql::table_name(name))
        };
        if let Some(v) = written_view(&parsed.stmt, &of_view) {
            return Err(refused(&format!(
                "a write to the view `{}`, which shardproxy keeps itself: write to its tables",
                v.name
            )));
        }
        let named = named_views(&parsed.stmt, &of_view);
        if named.is_empty() {
            return Ok((depth > 0).then_some(text));
        }
        if depth == MAX_DEPTH {
            return Err(Refused {
                code: ER_VIEW_RECURSIVE,
                message: format!(
                    "`{}` contains view recursion",
                    named.first().map(|v| v.name.as_str()).unwrap_or_default()
                ),
            });
        }
        if let Some(v) = named
            .iter()
            .find(|v| v.mode != mode && !v.reads_alike_in_every_mode())
        {
            return Err(refused(&format!(
                "the view `{}` was created under another sql_mode's quoting (ANSI_QUOTES, NO_BACKSLASH_ESCAPES) and its text reads differently in this session's",
                v.name
            )));
        }
        let source = |name: &ObjectName| of_view(name).map(|v| v.source());
        text = super::rename::renamed(&text, &parsed.stmt, &source, &ctes, mode)
            .ok_or_else(|| refused("where the view names cannot be located in its text"))?;
        if let Some(d) = db {
            text = unqualified_columns(&text, mode, views, d)
                .ok_or_else(|| refused("where a column's qualifier cannot be located"))?;
        }
    }
    Err(refused("views nested too deep"))
}

/// `text` with each column qualified by schema and view (`shop.v.id`) qualified by the view
/// alone: the view is a derived table now, named `v`.
fn unqualified_columns(text: &str, mode: Mode, views: &Views, db: &str) -> Option<String> {
    if !crate::sql::contains_ci(text.as_bytes(), db.as_bytes()) {
        return Some(text.to_string());
    }
    let parsed = crate::sql::parse_in(text, mode).ok()?;
    let mut cuts = Vec::new();
    let _ = sqlparser::ast::visit_expressions(&parsed.stmt, |e| {
        if let Expr::CompoundIdentifier(parts) = e {
            if parts.len() == 3
                && parts[0].value.eq_ignore_ascii_case(db)
                && views.get(&parts[1].value).is_some()
            {
                cuts.push((parts[0].span.start, parts[1].span.start));
            }
        }
        ControlFlow::<()>::Continue(())
    });
    if cuts.is_empty() {
        return Some(text.to_string());
    }
    let mut spans = Vec::new();
    for (a, b) in cuts {
        spans.push((
            crate::sql::byte_offset(text, a)?,
            crate::sql::byte_offset(text, b)?,
        ));
    }
    spans.sort_unstable();
    spans.dedup();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (a, b) in spans {
        if a < at || b < a {
            return None;
        }
        out.push_str(&text[at..a]);
        at = b;
    }
    out.push_str(&text[at..]);
    Some(out)
}

fn refused(why: &str) -> Refused {
    Refused {
        code: crate::error::ER_NOT_SUPPORTED_YET,
        message: format!("shardproxy: {why}"),
    }
}

/// The views the statement reads, where `of_view` knows them.
fn named_views<'v>(
    stmt: &Statement,
    of_view: &dyn Fn(&ObjectName) -> Option<&'v Arc<View>>,
) -> Vec<&'v Arc<View>> {
    struct Named<'f, 'v> {
        of_view: &'f dyn Fn(&ObjectName) -> Option<&'v Arc<View>>,
        out: Vec<&'v Arc<View>>,
    }
    impl Visitor for Named<'_, '_> {
        type Break = ();
        fn pre_visit_table_factor(&mut self, f: &TableFactor) -> ControlFlow<()> {
            if let TableFactor::Table { name, .. } = f {
                if let Some(v) = (self.of_view)(name) {
                    self.out.push(v);
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut n = Named {
        of_view,
        out: Vec::new(),
    };
    let _ = stmt.visit(&mut n);
    n.out
}

/// A view the statement writes to (the table of an INSERT, an UPDATE's or a DELETE's
/// tables), which the proxy cannot do through its definition.
fn written_view<'v>(
    stmt: &Statement,
    of_view: &dyn Fn(&ObjectName) -> Option<&'v Arc<View>>,
) -> Option<&'v Arc<View>> {
    let in_joins = |tables: &[TableWithJoins]| {
        tables.iter().find_map(|t| {
            std::iter::once(&t.relation)
                .chain(t.joins.iter().map(|j| &j.relation))
                .find_map(|f| match f {
                    TableFactor::Table { name, .. } => of_view(name),
                    _ => None,
                })
        })
    };
    match stmt {
        Statement::Insert(i) => match &i.table {
            TableObject::TableName(name) => of_view(name),
            _ => None,
        },
        Statement::Update(u) => in_joins(std::slice::from_ref(&u.table)),
        Statement::Delete(d) => {
            let from = match &d.from {
                FromTable::WithFromKeyword(f) | FromTable::WithoutKeyword(f) => f.as_slice(),
            };
            d.tables
                .iter()
                .find_map(of_view)
                .or_else(|| in_joins(from))
                .or_else(|| d.using.as_deref().and_then(in_joins))
        }
        _ => None,
    }
}

#[cfg(test)]
#[path = "views_tests.rs"]
mod tests;

/// A character set's default collation, as SHOW CREATE VIEW and information_schema.VIEWS
/// name the connection's.
pub fn default_collation(charset: &str) -> String {
    match charset {
        "binary" => "binary".into(),
        "latin1" => "latin1_swedish_ci".into(),
        "utf8" => "utf8mb3_general_ci".into(),
        cs => format!("{cs}_general_ci"),
    }
}
