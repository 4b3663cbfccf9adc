//! Editing a client's statement by the byte spans of its tokens: the proxy's rewrites keep
//! every byte of the client's text they do not change — literals above all, so no string
//! can end anywhere but where MariaDB ends it — and add only text of their own (names
//! through `crate::sql::write::quoted`, values through its literal writer) or spans copied
//! from the client's text.
//!
//! The tree sqlparser gives is for understanding a statement, not for printing it: its
//! spans are not exact (a call's span ends before its `)`), so the text of a part of the
//! tree is found here from the tokens ([`Text::extent`]) and checked by parsing it back to
//! the same tree.

use mysql_common::value::Value;
use sqlparser::ast::{Expr, Spanned};
use sqlparser::tokenizer::Token;

use super::dialect::ModeDialect;
use super::lex::{self, Kind, Mode, Tok};
use super::Offsets;

/// A statement's text with its tokens.
pub struct Text<'s> {
    pub sql: &'s str,
    pub toks: Vec<Tok>,
    pub mode: Mode,
    offsets: Offsets<'s>,
}

/// Bound values of the statement's `?` placeholders, written into the text by the literal
/// writer (strings in the session's `character_set_client`).
#[derive(Clone, Copy)]
pub struct Params<'a> {
    pub values: &'a [Value],
    pub charset: &'a str,
}

impl Params<'_> {
    pub const NONE: Params<'static> = Params {
        values: &[],
        charset: "utf8mb4",
    };
}

/// One clause of a SELECT: where its keyword starts and its body (after `BY` for GROUP BY
/// and ORDER BY) starts and ends (the end of its last token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clause {
    pub kw: usize,
    pub body: (usize, usize),
}

/// Where a SELECT's parts are in the text. Clauses after the SELECT's own (ORDER BY,
/// LIMIT, a locking clause) are the query's, found in the same scan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Clauses {
    /// The select list: from after the SELECT keyword to the end of its last token.
    pub projection: (usize, usize),
    pub from: Option<Clause>,
    pub where_: Option<Clause>,
    pub group_by: Option<Clause>,
    pub having: Option<Clause>,
    pub window: Option<Clause>,
    pub order_by: Option<Clause>,
    pub limit: Option<Clause>,
    /// `FOR UPDATE`, `LOCK IN SHARE MODE`, `INTO`, `PROCEDURE`, `OFFSET ... FETCH`: what
    /// follows the clauses above, kept as it is.
    pub tail: Option<Clause>,
    /// The end of the SELECT's last token.
    pub end: usize,
    /// A UNION / EXCEPT / INTERSECT follows: the SELECT is one part of a set operation.
    pub set_operation: bool,
}

impl Clauses {
    /// Where a clause that is not there would begin, were it added before the first of
    /// the later clauses present (or at the end).
    fn before_first(&self, later: &[Option<Clause>]) -> usize {
        later
            .iter()
            .flatten()
            .map(|c| c.kw)
            .min()
            .unwrap_or(self.end)
    }

    /// Where a WHERE would go: after the FROM clause.
    pub fn where_at(&self) -> usize {
        self.before_first(&[
            self.group_by,
            self.having,
            self.window,
            self.order_by,
            self.limit,
            self.tail,
        ])
    }

    /// Where a GROUP BY would go.
    pub fn group_at(&self) -> usize {
        self.before_first(&[
            self.having,
            self.window,
            self.order_by,
            self.limit,
            self.tail,
        ])
    }

    /// Where an ORDER BY would go.
    pub fn order_at(&self) -> usize {
        self.before_first(&[self.limit, self.tail])
    }

    /// Where a LIMIT would go.
    pub fn limit_at(&self) -> usize {
        self.before_first(&[self.tail])
    }

    /// `text` as a clause inserted at `at`: spaced from what follows, or from what precedes
    /// at the end.
    pub fn spaced(&self, at: usize, text: &str) -> String {
        if at >= self.end {
            format!(" {text}")
        } else {
            format!("{text} ")
        }
    }

    /// From a clause's keyword to the start of the next clause (or the end): the range
    /// that removes it.
    pub fn removal(&self, c: Clause) -> (usize, usize) {
        let all = [
            self.from,
            self.where_,
            self.group_by,
            self.having,
            self.window,
            self.order_by,
            self.limit,
            self.tail,
        ];
        let next = all
            .iter()
            .flatten()
            .map(|x| x.kw)
            .filter(|k| *k > c.kw)
            .min()
            .unwrap_or(self.end);
        (c.kw, next.max(c.body.1))
    }
}

/// Which clause a keyword at depth 0 opens.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    Projection,
    From,
    Where,
    Group,
    Having,
    Window,
    Order,
    Limit,
    Tail,
}

impl<'s> Text<'s> {
    /// The text read in `mode`; `Err` when it cannot be read to its end.
    pub fn new(sql: &'s str, mode: Mode) -> Result<Self, String> {
        let lexed = lex::lex(sql, mode);
        if let Some(e) = lexed.error {
            return Err(format!("an unterminated {} in the statement", e.what));
        }
        Ok(Text {
            sql,
            toks: lexed.toks,
            mode,
            offsets: Offsets::new(sql),
        })
    }

    /// The byte offset of a tokenizer location in this text.
    pub fn offset(&self, loc: sqlparser::tokenizer::Location) -> Option<usize> {
        self.offsets.at(loc)
    }

    /// The index of the token starting at byte `at`.
    fn tok_at(&self, at: usize) -> Option<usize> {
        self.toks.binary_search_by_key(&at, |t| t.start).ok()
    }

    /// The index of the first token starting at or after byte `at`.
    fn first_from(&self, at: usize) -> usize {
        self.toks.partition_point(|t| t.start < at)
    }

    /// The clauses of the SELECT whose keyword is the token starting at byte `select`.
    pub fn clauses(&self, select: usize) -> Result<Clauses, String> {
        let sql = self.sql;
        let first = self
            .tok_at(select)
            .filter(|i| self.toks[*i].is(sql, "SELECT"))
            .ok_or("the SELECT is not where the statement's tree says")?;
        let mut c = Clauses::default();
        let toks = &self.toks;
        let mut slot = Slot::Projection;
        let mut body_start = toks[first].end;
        let mut kw = toks[first].start;
        let mut last_end = toks[first].end;
        let mut depth = 0i64;
        let mut i = first + 1;
        let close = |c: &mut Clauses, slot: Slot, kw: usize, start: usize, end: usize| {
            let clause = Clause {
                kw,
                body: (start, end.max(start)),
            };
            let place = match slot {
                Slot::Projection => {
                    c.projection = clause.body;
                    return Ok(());
                }
                Slot::From => &mut c.from,
                Slot::Where => &mut c.where_,
                Slot::Group => &mut c.group_by,
                Slot::Having => &mut c.having,
                Slot::Window => &mut c.window,
                Slot::Order => &mut c.order_by,
                Slot::Limit => &mut c.limit,
                Slot::Tail => &mut c.tail,
            };
            if place.is_some() {
                return Err("a clause written twice".to_string());
            }
            *place = Some(clause);
            Ok(())
        };
        while i < toks.len() {
            let t = toks[i];
            match t.kind {
                Kind::LParen => depth += 1,
                Kind::RParen if depth == 0 => break,
                Kind::RParen => depth -= 1,
                Kind::Semi if depth == 0 => break,
                Kind::Word if depth == 0 => {
                    let next_is = |k: &str| toks.get(i + 1).is_some_and(|n| n.is(sql, k));
                    let word = t.text(sql).to_ascii_uppercase();
                    let opens = match word.as_str() {
                        "UNION" | "EXCEPT" | "INTERSECT" | "MINUS" => {
                            c.set_operation = true;
                            break;
                        }
                        "FROM" if slot == Slot::Projection => Some((Slot::From, 1)),
                        "WHERE" if slot < Slot::Where => Some((Slot::Where, 1)),
                        "GROUP" if next_is("BY") && slot < Slot::Group => Some((Slot::Group, 2)),
                        "HAVING" if slot < Slot::Having => Some((Slot::Having, 1)),
                        "WINDOW" if slot < Slot::Window => Some((Slot::Window, 1)),
                        "ORDER" if next_is("BY") && slot < Slot::Order => Some((Slot::Order, 2)),
                        "LIMIT" if slot < Slot::Limit => Some((Slot::Limit, 1)),
                        "FOR" if next_is("UPDATE") || next_is("SHARE") => Some((Slot::Tail, 0)),
                        "LOCK" if next_is("IN") => Some((Slot::Tail, 0)),
                        "INTO" if slot == Slot::Projection => {
                            return Err("SELECT ... INTO before its FROM".into())
                        }
                        "INTO" | "PROCEDURE" if slot != Slot::Tail => Some((Slot::Tail, 0)),
                        "OFFSET" | "FETCH" if slot < Slot::Limit => Some((Slot::Tail, 0)),
                        // Index hints (`USE INDEX FOR ORDER BY (i)`) name clauses they are
                        // not.
                        "FOR" if next_is("ORDER") || next_is("GROUP") => {
                            i += 3;
                            last_end = toks.get(i - 1).map_or(last_end, |x| x.end);
                            continue;
                        }
                        _ => None,
                    };
                    if let Some((next, words)) = opens {
                        if slot != Slot::Tail || next != Slot::Tail {
                            close(&mut c, slot, kw, body_start, last_end)?;
                            slot = next;
                            kw = t.start;
                            i += words;
                            body_start = toks.get(i).map_or(t.end, |x| x.start);
                            if words > 0 {
                                last_end = toks.get(i - 1).map_or(t.end, |x| x.end);
                            }
                            continue;
                        }
                    }
                }
                _ => {}
            }
            last_end = t.end;
            i += 1;
        }
        close(&mut c, slot, kw, body_start, last_end)?;
        c.end = last_end;
        Ok(c)
    }

    /// The byte range of the text `e` was parsed from, checked: it parses back (in the
    /// text's mode) to an expression equal to `e`. `None` when no such range is found near
    /// the tree's spans.
    pub fn extent(&self, e: &Expr) -> Option<(usize, usize)> {
        let (lo, hi) = self.span_bounds(e)?;
        let ts = self.first_from(lo);
        // The last token that starts before the span's end.
        let te = self.toks.partition_point(|t| t.start < hi).checked_sub(1)?;
        if ts >= self.toks.len() || te < ts {
            return None;
        }
        let mut tries = 0;
        // Starts: the span's, then up to three tokens before it (an opening parenthesis,
        // a unary operator, a call's name).
        for back in 0..=3usize {
            let Some(s) = ts.checked_sub(back) else {
                break;
            };
            // Ends: from the span's last token on, where the parentheses balance.
            let mut depth = 0i64;
            for (k, t) in self.toks.iter().enumerate().skip(s) {
                match t.kind {
                    Kind::LParen => depth += 1,
                    Kind::RParen => depth -= 1,
                    Kind::Semi => break,
                    _ => {}
                }
                if depth < 0 || k > te + 48 {
                    break;
                }
                if k < te || depth != 0 {
                    continue;
                }
                tries += 1;
                if tries > 96 {
                    return None;
                }
                let (a, b) = (self.toks[s].start, t.end);
                if self.parses_as(&self.sql[a..b], e) {
                    return Some((a, b));
                }
            }
        }
        None
    }

    /// The smallest and largest byte the tree's spans of `e` and its parts name.
    fn span_bounds(&self, e: &Expr) -> Option<(usize, usize)> {
        let mut lo = usize::MAX;
        let mut hi = 0usize;
        let mut note = |span: sqlparser::tokenizer::Span| {
            if span.start.line == 0 {
                return;
            }
            if let (Some(a), Some(b)) = (self.offsets.at(span.start), self.offsets.at(span.end)) {
                lo = lo.min(a);
                hi = hi.max(b);
            }
        };
        note(e.span());
        let _ = sqlparser::ast::visit_expressions(e, |x: &Expr| {
            note(x.span());
            std::ops::ControlFlow::<()>::Continue(())
        });
        (lo < hi).then_some((lo, hi))
    }

    /// The comma-separated items of a list from byte `a` to `b` (a GROUP BY's, an ORDER
    /// BY's), each as the range of its tokens.
    pub fn list_items(&self, (a, b): (usize, usize)) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut depth = 0i64;
        let mut item: Option<(usize, usize)> = None;
        for t in self.toks.iter().skip(self.first_from(a)) {
            if t.start >= b {
                break;
            }
            match t.kind {
                Kind::LParen => depth += 1,
                Kind::RParen => depth -= 1,
                Kind::Comma if depth == 0 => {
                    out.extend(item.take());
                    continue;
                }
                _ => {}
            }
            item = Some(item.map_or((t.start, t.end), |(s, _)| (s, t.end)));
        }
        out.extend(item);
        out
    }

    /// An ORDER BY item's range without its trailing `ASC` / `DESC`.
    pub fn without_direction(&self, a: usize, b: usize) -> (usize, usize) {
        let last = self.toks.partition_point(|t| t.start < b);
        match last.checked_sub(1).map(|i| (i, self.toks[i])) {
            Some((i, t)) if t.start > a && (t.is(self.sql, "ASC") || t.is(self.sql, "DESC")) => {
                (a, self.toks[i - 1].end)
            }
            _ => (a, b),
        }
    }

    /// Does `text` parse, in this text's mode, to exactly `e`?
    pub fn parses_as(&self, text: &str, e: &Expr) -> bool {
        let dialect = ModeDialect(self.mode);
        let Ok(mut p) = super::parser(&dialect, text) else {
            return false;
        };
        match p.parse_expr() {
            Ok(x) => x == *e && p.peek_token().token == Token::EOF,
            Err(_) => false,
        }
    }

    /// The text from byte `a` to `b` as written, its `?` kept: the index of each among the
    /// statement's bound values appended to `bound`, in order.
    pub fn render_kept(&self, a: usize, b: usize, bound: &mut Vec<usize>) -> String {
        self.note_params(a, b, bound);
        self.sql[a..b.max(a)].to_string()
    }

    /// Appends the index of each `?` from byte `a` to `b` among the statement's.
    fn note_params(&self, a: usize, b: usize, bound: &mut Vec<usize>) {
        let before = self.toks[..self.first_from(a)]
            .iter()
            .filter(|t| t.kind == Kind::Param)
            .count();
        let within = self.toks[self.first_from(a)..]
            .iter()
            .take_while(|t| t.start < b)
            .filter(|t| t.kind == Kind::Param)
            .count();
        bound.extend(before..before + within);
    }

    /// The text from byte `a` to `b` with each `?` in it written as its bound value.
    pub fn render(&self, a: usize, b: usize, params: Params<'_>) -> Result<String, String> {
        let mut out = String::with_capacity(b.saturating_sub(a) + 16);
        self.copy(&mut out, a, b, Some(params))?;
        Ok(out)
    }

    /// Appends the text from `a` to `b`, each `?` written as its value (the n-th `?` of
    /// the whole text takes the n-th value).
    fn copy(
        &self,
        out: &mut String,
        a: usize,
        b: usize,
        params: Option<Params<'_>>,
    ) -> Result<(), String> {
        let Some(params) = params else {
            out.push_str(&self.sql[a..b.max(a)]);
            return Ok(());
        };
        let mut at = a;
        let first = self.first_from(a);
        for (n, t) in self.toks.iter().enumerate().skip(first) {
            if t.start >= b {
                break;
            }
            if t.kind != Kind::Param {
                continue;
            }
            let index = self.toks[..n]
                .iter()
                .filter(|x| x.kind == Kind::Param)
                .count();
            let v = params
                .values
                .get(index)
                .ok_or("a placeholder without a bound value")?;
            out.push_str(&self.sql[at..t.start]);
            super::write::value(out, v, params.charset);
            at = t.end;
        }
        out.push_str(&self.sql[at..b.max(at)]);
        Ok(())
    }

    /// How many `?` placeholders the text holds.
    pub fn placeholders(&self) -> usize {
        self.toks.iter().filter(|t| t.kind == Kind::Param).count()
    }
}

/// Changes to a text: ranges replaced (or, empty, insertions), applied in order of their
/// place; insertions at one place keep the order they were made in.
#[derive(Debug, Default, Clone)]
pub struct Edits {
    list: Vec<(usize, usize, String)>,
    /// For an edit whose text keeps the statement's `?` ([`Edits::insert_kept`]): their
    /// indices among its bound values, by the edit's place in `list`.
    kept: Vec<(usize, Vec<usize>)>,
}

impl Edits {
    pub fn new() -> Self {
        Edits::default()
    }

    pub fn replace(&mut self, a: usize, b: usize, text: impl Into<String>) {
        self.list.push((a, b, text.into()));
    }

    pub fn insert(&mut self, at: usize, text: impl Into<String>) {
        self.list.push((at, at, text.into()));
    }

    /// [`Edits::insert`] of a text that keeps `?` of the statement's, whose indices among its
    /// bound values are `bound`, in order ([`Text::render_kept`]).
    pub fn insert_kept(&mut self, at: usize, text: impl Into<String>, bound: Vec<usize>) {
        self.kept.push((self.list.len(), bound));
        self.insert(at, text);
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// `pred` joined to the SELECT's WHERE (`(where) AND pred`), or a WHERE of its own
    /// where it has none, placed before the clauses that follow.
    pub fn and_where(&mut self, c: &Clauses, pred: &str) {
        match c.where_ {
            Some(w) => {
                self.insert(w.body.0, "(");
                self.insert(w.body.1, format!(") AND {pred}"));
            }
            None => {
                let at = c.where_at();
                self.insert(at, c.spaced(at, &format!("WHERE {pred}")));
            }
        }
    }

    /// The text with these edits, the `?` of the kept text written as their values
    /// (`params`); `Err` when two edits overlap or a `?` has no value. Blanks left at the
    /// end (before a clause removed there) are cut: outside a string, which cannot be open
    /// at the end, they mean nothing.
    pub fn apply(&self, text: &Text<'_>, params: Params<'_>) -> Result<String, String> {
        let mut s = self.edit(text, 0, text.sql.len(), Some(params), None)?;
        s.truncate(s.trim_end().len());
        Ok(s)
    }

    /// The text with these edits, its `?` kept (the statement runs with its parameters).
    pub fn apply_keeping_params(&self, text: &Text<'_>) -> Result<String, String> {
        let mut s = self.edit(text, 0, text.sql.len(), None, None)?;
        s.truncate(s.trim_end().len());
        Ok(s)
    }

    /// The text with these edits, its `?` kept, and the index among the statement's bound
    /// values of each `?` it holds, in order: those of the text it keeps and of the edits'
    /// texts ([`Edits::insert_kept`]), none of what an edit replaced.
    pub fn apply_kept(&self, text: &Text<'_>) -> Result<(String, Vec<usize>), String> {
        let mut bound = Vec::new();
        let mut s = self.edit(text, 0, text.sql.len(), None, Some(&mut bound))?;
        s.truncate(s.trim_end().len());
        Ok((s, bound))
    }

    /// [`Edits::apply`] to the text from byte `from` to `to` only: the edits inside it
    /// (an insertion at either end included), none crossing its ends.
    pub fn apply_within(
        &self,
        text: &Text<'_>,
        from: usize,
        to: usize,
        params: Params<'_>,
    ) -> Result<String, String> {
        self.edit(text, from, to, Some(params), None)
    }

    /// The text from `from` to `to` with the edits, its `?` written as `params` or kept
    /// (noting in `bound` the index of each kept, if asked).
    fn edit(
        &self,
        text: &Text<'_>,
        from: usize,
        to: usize,
        params: Option<Params<'_>>,
        mut bound: Option<&mut Vec<usize>>,
    ) -> Result<String, String> {
        let mut order: Vec<usize> = (0..self.list.len())
            .filter(|&i| {
                let (a, b, _) = &self.list[i];
                *b >= from && *a <= to && !(*a == to && *b > to) && !(*b == from && *a < from)
            })
            .collect();
        order.sort_by_key(|&i| (self.list[i].0, self.list[i].1 > self.list[i].0, i));
        let mut out = String::with_capacity(to.saturating_sub(from) + 64);
        let mut at = from;
        for i in order {
            let (a, b, ref s) = self.list[i];
            if a < at || b < a || b > to {
                return Err("the proxy's edits of the statement overlap".into());
            }
            text.copy(&mut out, at, a, params)?;
            out.push_str(s);
            if let Some(bound) = bound.as_deref_mut() {
                text.note_params(at, a, bound);
                if let Some((_, of)) = self.kept.iter().find(|(k, _)| *k == i) {
                    bound.extend(of);
                }
            }
            at = b;
        }
        text.copy(&mut out, at, to, params)?;
        if let Some(bound) = bound {
            text.note_params(at, to, bound);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::ast::{SelectItem, SetExpr, Statement};

    fn select(sql: &str) -> (Text<'_>, Clauses) {
        let t = Text::new(sql, Mode::default()).unwrap();
        let at = t.toks.iter().find(|x| x.is(sql, "SELECT")).unwrap().start;
        let c = t.clauses(at).unwrap();
        (t, c)
    }

    fn body(sql: &str, c: Option<Clause>) -> Option<&str> {
        c.map(|c| &sql[c.body.0..c.body.1])
    }

    #[test]
    fn clauses_are_found_at_their_own_depth() {
        let sql = "SELECT a, (SELECT MAX(x) FROM u WHERE u.k = t.k) m, EXTRACT(YEAR FROM d) \
                   FROM t USE INDEX FOR ORDER BY (i) JOIN s ON s.a = t.a \
                   WHERE a IN (SELECT b FROM v GROUP BY b) AND c = 'ORDER BY' \
                   GROUP BY a, m HAVING COUNT(*) > 1 ORDER BY a DESC LIMIT 10, 5 FOR UPDATE;";
        let (_, c) = select(sql);
        assert_eq!(
            &sql[c.projection.0..c.projection.1],
            " a, (SELECT MAX(x) FROM u WHERE u.k = t.k) m, EXTRACT(YEAR FROM d)"
        );
        assert_eq!(
            body(sql, c.from),
            Some("t USE INDEX FOR ORDER BY (i) JOIN s ON s.a = t.a")
        );
        assert_eq!(
            body(sql, c.where_),
            Some("a IN (SELECT b FROM v GROUP BY b) AND c = 'ORDER BY'")
        );
        assert_eq!(body(sql, c.group_by), Some("a, m"));
        assert_eq!(body(sql, c.having), Some("COUNT(*) > 1"));
        assert_eq!(body(sql, c.order_by), Some("a DESC"));
        assert_eq!(body(sql, c.limit), Some("10, 5"));
        assert_eq!(body(sql, c.tail), Some("FOR UPDATE"));
        assert_eq!(&sql[c.end - 6..c.end], "UPDATE");
        let (_, c) = select("SELECT 1");
        assert_eq!(c.from, None);
        assert_eq!(c.where_at(), 8);
        let (_, c) = select("SELECT a FROM t UNION SELECT b FROM u");
        assert!(c.set_operation);
        // A subquery's clauses end at its parenthesis.
        let sql = "SELECT * FROM (SELECT a FROM t WHERE b = 1) d";
        let t = Text::new(sql, Mode::default()).unwrap();
        let c = t.clauses(15).unwrap();
        assert_eq!(body(sql, c.where_), Some("b = 1"));
    }

    fn items(sql: &str) -> Vec<Expr> {
        let p = crate::sql::parse(sql).unwrap();
        let Statement::Query(q) = &p.stmt else {
            panic!()
        };
        let SetExpr::Select(s) = q.body.as_ref() else {
            panic!()
        };
        let mut out: Vec<Expr> = s
            .projection
            .iter()
            .filter_map(|i| match i {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    Some(e.clone())
                }
                _ => None,
            })
            .collect();
        out.extend(s.selection.clone());
        out
    }

    #[test]
    fn an_expressions_text_is_found_whole_and_checked() {
        let sql = "SELECT count(*), SUM(DISTINCT x), (item_id), o.s REGEXP 'in''it', \
                   CONCAT('%%', 'a\\'b', ?), - (a + 1), CASE WHEN a THEN 1 END \
                   FROM t WHERE o.user_id IN (10, 11) AND v NOT LIKE 'x%'";
        let t = Text::new(sql, Mode::default()).unwrap();
        let texts: Vec<&str> = items(sql)
            .iter()
            .map(|e| {
                let (a, b) = t.extent(e).unwrap_or_else(|| panic!("{e}"));
                &sql[a..b]
            })
            .collect();
        assert_eq!(
            texts,
            vec![
                "count(*)",
                "SUM(DISTINCT x)",
                "(item_id)",
                "o.s REGEXP 'in''it'",
                "CONCAT('%%', 'a\\'b', ?)",
                "- (a + 1)",
                "CASE WHEN a THEN 1 END",
                "o.user_id IN (10, 11) AND v NOT LIKE 'x%'",
            ]
        );
    }

    #[test]
    fn edits_keep_every_other_byte_and_write_bound_values() {
        let sql = "SELECT v FROM t WHERE v = ? AND w = '\\\\\\'' LIMIT ?";
        let t = Text::new(sql, Mode::default()).unwrap();
        let (_, c) = select(sql);
        let mut e = Edits::new();
        let limit = c.limit.unwrap();
        e.replace(limit.body.0, limit.body.1, "7");
        e.insert(c.projection.1, ", w AS __sp_h0");
        let values = [Value::Bytes(b"\\' OR 1=1 -- ".to_vec()), Value::Int(3)];
        let out = e
            .apply(
                &t,
                Params {
                    values: &values,
                    charset: "utf8mb4",
                },
            )
            .unwrap();
        assert_eq!(
            out,
            "SELECT v, w AS __sp_h0 FROM t WHERE v = _utf8mb4 X'5C27204F5220313D31202D2D20' AND w = '\\\\\\'' LIMIT 7"
        );
        // Overlaps are refused, a missing value too.
        let mut bad = Edits::new();
        bad.replace(0, 10, "");
        bad.replace(5, 12, "");
        assert!(bad.apply(&t, Params::NONE).is_err());
        assert!(Edits::new().apply(&t, Params::NONE).is_err());
    }
}
