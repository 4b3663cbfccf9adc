//! A statement's text with some of its table references replaced by token spans: copied
//! tables by their temporary copies (`super::gather`), views by their definitions
//! (`super::views`). The rest of the text stays as the client wrote it.

use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, ObjectName, Query, Select, SelectItem, SetExpr, Spanned, Statement, TableFactor, Visit,
    Visitor,
};

use crate::sql::table_name;
use crate::sql::write::quoted;

/// The statement's text with each table reference `source` answers for (`Some(text)`)
/// replaced by that text, aliased by the name it had when it had no alias (`__sp_ship_0 AS
/// t_user`, `(SELECT ...) AS v`), so qualified columns keep meaning what they meant. Names the
/// WITH clauses give (`ctes`, lower-cased) are not tables. A top-level select item without an
/// alias whose text changed (a scalar subquery) gets its own text as alias, since MariaDB
/// names such a column by its text. `None` when a name cannot be located in the text.
pub(crate) fn renamed(
    sql: &str,
    stmt: &Statement,
    source: &dyn Fn(&ObjectName) -> Option<String>,
    ctes: &[String],
    mode: crate::sql::lex::Mode,
) -> Option<String> {
    struct Refs<'r> {
        source: &'r dyn Fn(&ObjectName) -> Option<String>,
        ctes: &'r [String],
        sql: &'r str,
        /// (start, end, replacement)
        edits: Vec<(usize, usize, String)>,
        failed: bool,
    }
    impl Visitor for Refs<'_> {
        type Break = ();
        fn pre_visit_table_factor(&mut self, f: &TableFactor) -> ControlFlow<()> {
            let TableFactor::Table { name, alias, .. } = f else {
                return ControlFlow::Continue(());
            };
            if name.0.len() == 1 && self.ctes.contains(&table_name(name)) {
                return ControlFlow::Continue(());
            }
            let Some(with) = (self.source)(name) else {
                return ControlFlow::Continue(());
            };
            let Some((a, b)) = span_of(self.sql, name) else {
                self.failed = true;
                return ControlFlow::Break(());
            };
            let with = match alias {
                Some(_) => with,
                None => {
                    // Aliased by its last part (`shop.v` is `v` to the statement's columns).
                    let last = name.0.last().and_then(|p| p.as_ident());
                    match last.and_then(|i| crate::sql::byte_offset(self.sql, i.span.start)) {
                        Some(at) if at >= a && at < b => format!("{with} AS {}", &self.sql[at..b]),
                        _ => {
                            self.failed = true;
                            return ControlFlow::Break(());
                        }
                    }
                }
            };
            self.edits.push((a, b, with));
            ControlFlow::Continue(())
        }
    }
    let mut refs = Refs {
        source,
        ctes,
        sql,
        edits: Vec::new(),
        failed: false,
    };
    let _ = stmt.visit(&mut refs);
    if refs.failed {
        return None;
    }
    let mut edits = refs.edits;
    // Unaliased top-level items whose text changed: named by their own text.
    if let Statement::Query(q) = stmt {
        if let Some(s) = naming_select(q) {
            for item in &s.projection {
                let SelectItem::UnnamedExpr(e) = item else {
                    continue;
                };
                if matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
                    continue;
                }
                let (a, b) = crate::sql::item_range(sql, e, mode)?;
                if a >= b || !edits.iter().any(|(x, y, _)| a <= *x && *y <= b) {
                    continue;
                }
                edits.push((b, b, format!(" AS {}", quoted(&sql[a..b]))));
            }
        }
    }
    edits.sort_by_key(|(a, b, _)| (*a, *b));
    if edits.windows(2).any(|w| w[0].1 > w[1].0) {
        return None;
    }
    let mut out = String::with_capacity(sql.len() + 32 * edits.len());
    let mut at = 0;
    for (a, b, with) in &edits {
        out.push_str(&sql[at..*a]);
        out.push_str(with);
        at = *b;
    }
    out.push_str(&sql[at..]);
    Some(out)
}

/// The byte span of a (possibly qualified) name in `sql`, closing quote included.
fn span_of(sql: &str, name: &ObjectName) -> Option<(usize, usize)> {
    let span = Spanned::span(name);
    let a = crate::sql::byte_offset(sql, span.start)?;
    let mut b = crate::sql::byte_offset(sql, span.end)?;
    // A quoted name's span may stop before its closing quote.
    let bytes = sql.as_bytes();
    if matches!(bytes.get(b), Some(b'`' | b'"')) && b > a {
        let last_open = name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .and_then(|i| crate::sql::byte_offset(sql, i.span.start));
        if let Some(open) = last_open.filter(|o| matches!(bytes.get(*o), Some(b'`' | b'"'))) {
            let mode = crate::sql::lex::Mode {
                ansi_quotes: bytes[open] == b'"',
                ..Default::default()
            };
            let first = crate::sql::lex::lex(&sql[open..], mode)
                .toks
                .first()
                .copied();
            if first.is_some_and(|t| open + t.end == b + 1) {
                b += 1;
            }
        }
    }
    Some((a, b))
}

/// The SELECT whose items name the result's columns: the body's, or a UNION's first.
pub(crate) fn naming_select(q: &Query) -> Option<&Select> {
    let mut body = q.body.as_ref();
    loop {
        match body {
            SetExpr::Select(s) => return Some(s),
            SetExpr::SetOperation { left, .. } => body = left,
            SetExpr::Query(q) => body = q.body.as_ref(),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rename(sql: &str) -> Option<String> {
        let p = crate::sql::parse(sql).expect("parses");
        let copy = |n: &ObjectName| (table_name(n) == "t_order").then(|| quoted("__sp_ship_0"));
        renamed(sql, &p.stmt, &copy, &[], Default::default())
    }

    #[test]
    fn renames_keep_the_clients_text() {
        assert_eq!(
            rename("select (select count(*) from t_order) , code from t_country").as_deref(),
            Some("select (select count(*) from `__sp_ship_0` AS t_order) AS `(select count(*) from t_order)` , code from t_country")
        );
        assert_eq!(
            rename("SELECT ((SELECT MAX(x) FROM `t_order` o) + 1), 'a)' FROM t_country").as_deref(),
            Some("SELECT ((SELECT MAX(x) FROM `__sp_ship_0` o) + 1) AS `((SELECT MAX(x) FROM ``t_order`` o) + 1)`, 'a)' FROM t_country")
        );
        assert_eq!(
            rename("SELECT t_order.*, o2.x FROM t_order JOIN t_order o2 USING (id)").as_deref(),
            Some("SELECT t_order.*, o2.x FROM `__sp_ship_0` AS t_order JOIN `__sp_ship_0` o2 USING (id)")
        );
    }

    #[test]
    fn a_qualified_name_is_aliased_by_its_last_part() {
        assert_eq!(
            rename("SELECT shop.t_order.id FROM shop.`t_order` WHERE 1").as_deref(),
            Some("SELECT shop.t_order.id FROM `__sp_ship_0` AS `t_order` WHERE 1")
        );
        // A CTE of the same name is not the table; a qualified name is never a CTE.
        assert_eq!(
            {
                let sql = "WITH t_order AS (SELECT 1) SELECT * FROM t_order, shop.t_order";
                let p = crate::sql::parse(sql).expect("parses");
                let copy =
                    |n: &ObjectName| (table_name(n) == "t_order").then(|| quoted("__sp_ship_0"));
                renamed(sql, &p.stmt, &copy, &["t_order".into()], Default::default())
            }
            .as_deref(),
            Some("WITH t_order AS (SELECT 1) SELECT * FROM t_order, `__sp_ship_0` AS t_order")
        );
    }
}
