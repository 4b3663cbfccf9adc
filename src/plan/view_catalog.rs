//! The views the proxy keeps, as the catalog shows them: rows of `information_schema.TABLES`
//! and `information_schema.VIEWS` for them (a read of either becomes a read of the node's
//! rows and the kept views' rows, so the node's own WHERE, ORDER BY and column list apply to
//! both), and `LOCK TABLES` of a view as locks of the tables it reads (as MariaDB locks a
//! view's tables). What `mariadb-dump` asks of a database with views, and tools after it.

use sqlparser::ast::TableFactor;

use super::views::{View, Views};
use crate::sql::lex::{statement_tokens, Kind, Mode, Tok};
use crate::sql::write::{quoted, text};

/// The `information_schema` tables a kept view has rows in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogTable {
    Tables,
    Views,
}

impl CatalogTable {
    pub fn name(self) -> &'static str {
        match self {
            CatalogTable::Tables => "TABLES",
            CatalogTable::Views => "VIEWS",
        }
    }
}

/// Where `sql` reads `information_schema.TABLES` or `information_schema.VIEWS`: the byte
/// span of each such name, which table it is, and whether an alias follows it.
pub fn catalog_reads(sql: &str, mode: Mode) -> Vec<(usize, usize, CatalogTable, bool)> {
    let toks = statement_tokens(sql, mode);
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        let named = |t: &Tok, w: &str| {
            matches!(t.kind, Kind::Word | Kind::Quoted)
                && t.text(sql).trim_matches('`').eq_ignore_ascii_case(w)
        };
        if !named(t, "information_schema") || toks.get(i + 1).is_none_or(|d| d.kind != Kind::Dot) {
            continue;
        }
        let Some(name) = toks.get(i + 2) else {
            continue;
        };
        let which = if named(name, "TABLES") {
            CatalogTable::Tables
        } else if named(name, "VIEWS") {
            CatalogTable::Views
        } else {
            continue;
        };
        // `information_schema.TABLES.TABLE_NAME` is a column, not the table.
        if toks.get(i + 3).is_some_and(|d| d.kind == Kind::Dot) {
            continue;
        }
        let aliased = toks.get(i + 3).is_some_and(|n| match n.kind {
            Kind::Quoted => true,
            Kind::Word => !FOLLOWERS.iter().any(|w| n.is(sql, w)),
            _ => false,
        });
        out.push((t.start, name.end, which, aliased));
    }
    out
}

/// Words that may follow a table's name and are not its alias.
const FOLLOWERS: [&str; 23] = [
    "WHERE",
    "ORDER",
    "GROUP",
    "LIMIT",
    "JOIN",
    "LEFT",
    "RIGHT",
    "INNER",
    "CROSS",
    "STRAIGHT_JOIN",
    "NATURAL",
    "ON",
    "USING",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "HAVING",
    "WINDOW",
    "FOR",
    "LOCK",
    "INTO",
    "PROCEDURE",
    "FULL",
];

/// The rows of `views` in the catalog table `which` of the node, whose columns are `cols`
/// (in order): `SELECT * FROM information_schema.X UNION ALL SELECT <a view's row> ...`, to
/// stand in a statement where it read `information_schema.X`.
pub fn with_view_rows(which: CatalogTable, cols: &[String], views: &[&View], db: &str) -> String {
    let mut s = format!("(SELECT * FROM information_schema.{}", which.name());
    for v in views {
        s.push_str(" UNION ALL SELECT ");
        for (i, c) in cols.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            match value_of(which, c, v, db) {
                Some(x) => text(&mut s, &x),
                // A NULL of the column's own type (a bare NULL would make a BIGINT
                // UNSIGNED column of the union a DECIMAL).
                None => s.push_str(&format!(
                    "(SELECT {} FROM information_schema.{} WHERE 0)",
                    quoted(c),
                    which.name()
                )),
            }
        }
    }
    s.push(')');
    s
}

/// A kept view's value in a catalog table's column (`None`: NULL), as MariaDB shows a view
/// there. `IS_UPDATABLE` is `NO`: writes through a kept view are refused.
fn value_of(which: CatalogTable, col: &str, v: &View, db: &str) -> Option<String> {
    let c = col.to_ascii_uppercase();
    Some(match (which, c.as_str()) {
        (_, "TABLE_CATALOG") => "def".into(),
        (_, "TABLE_SCHEMA") => db.into(),
        (_, "TABLE_NAME") => v.name.clone(),
        (CatalogTable::Tables, "TABLE_TYPE") => "VIEW".into(),
        (CatalogTable::Tables, "TABLE_COMMENT") => "VIEW".into(),
        (CatalogTable::Views, "VIEW_DEFINITION") => v.body.clone(),
        (CatalogTable::Views, "CHECK_OPTION") => v.check.clone().unwrap_or_else(|| "NONE".into()),
        (CatalogTable::Views, "IS_UPDATABLE") => "NO".into(),
        (CatalogTable::Views, "DEFINER") => v.definer.replace('`', ""),
        (CatalogTable::Views, "SECURITY_TYPE") => v.security.clone(),
        (CatalogTable::Views, "CHARACTER_SET_CLIENT") => v.charset.clone(),
        (CatalogTable::Views, "COLLATION_CONNECTION") => {
            super::views::default_collation(&v.charset)
        }
        (CatalogTable::Views, "ALGORITHM") => v.algorithm.clone(),
        _ => return None,
    })
}

/// `sql` with each span of `reads` replaced by `derived(which)` (an alias added where the
/// statement gave none, so its columns are still qualified by the table's name).
pub fn rewrite(
    sql: &str,
    reads: &[(usize, usize, CatalogTable, bool)],
    derived: &dyn Fn(CatalogTable) -> String,
) -> String {
    let mut out = String::with_capacity(sql.len() + 256);
    let mut at = 0;
    for (start, end, which, aliased) in reads {
        out.push_str(&sql[at..*start]);
        out.push_str(&derived(*which));
        // Where the statement's alias follows, it names the derived table.
        if !*aliased {
            out.push_str(" AS ");
            out.push_str(&quoted(which.name()));
        }
        at = *end;
    }
    out.push_str(&sql[at..]);
    out
}

/// The tables a view reads, through the views it reads: `(name, alias)` as its SELECT
/// names them. `None` when its text no longer parses.
pub fn base_tables(view: &View, views: &Views) -> Option<Vec<(String, Option<String>)>> {
    let mut out = Vec::new();
    collect(view, views, &mut out, 0)?;
    Some(out)
}

fn collect(
    view: &View,
    views: &Views,
    out: &mut Vec<(String, Option<String>)>,
    depth: usize,
) -> Option<()> {
    if depth > super::views::MAX_DEPTH {
        return None;
    }
    let parsed = crate::sql::parse_in(&view.body, view.mode).ok()?;
    let ctes = super::gather::cte_names(&parsed.stmt);
    // Tables with their aliases, from the table factors.
    struct Factors(Vec<(String, Option<String>)>);
    impl sqlparser::ast::Visitor for Factors {
        type Break = ();
        fn pre_visit_table_factor(&mut self, f: &TableFactor) -> std::ops::ControlFlow<()> {
            if let TableFactor::Table { name, alias, .. } = f {
                self.0.push((
                    crate::sql::table_name(name),
                    alias.as_ref().map(|a| a.name.value.clone()),
                ));
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut factors = Factors(Vec::new());
    let _ = sqlparser::ast::Visit::visit(&parsed.stmt, &mut factors);
    for (name, alias) in factors.0 {
        // A CTE's name is no table.
        if ctes.contains(&name.to_ascii_lowercase()) {
            continue;
        }
        match views.get(&name) {
            Some(inner) => collect(inner, views, out, depth + 1)?,
            None => {
                if !out.contains(&(name.clone(), alias.clone())) {
                    out.push((name, alias));
                }
            }
        }
    }
    Some(())
}

/// `LOCK TABLES` naming kept views: each view's item replaced by items locking the tables
/// it reads (aliases as its SELECT gives them), with the item's lock type. `None` when it
/// names none.
pub fn lock_views(sql: &str, mode: Mode, views: &Views) -> Option<String> {
    let sql = sql.trim_end().trim_end_matches(';').trim_end();
    let toks = statement_tokens(sql, mode);
    if !(toks.first()?.is(sql, "LOCK")
        && toks
            .get(1)
            .is_some_and(|t| t.is(sql, "TABLES") || t.is(sql, "TABLE")))
    {
        return None;
    }
    // Each item: its text, and the table and alias it locks.
    let mut items: Vec<(String, Option<String>, String)> = Vec::new();
    let mut of_views: Vec<(&View, &str)> = Vec::new();
    let mut i = 2;
    while i < toks.len() {
        let end = toks[i..]
            .iter()
            .position(|t| t.kind == Kind::Comma)
            .map_or(toks.len(), |p| i + p);
        let to = toks.get(end).map_or(sql.len(), |t| t.start);
        let item = sql[toks[i].start..to].trim();
        let (_, name, next) = super::views::object_name(sql, &toks, i)?;
        // Past the name and an alias: the lock type, as written.
        let mut k = next;
        let mut alias = None;
        if toks.get(k).is_some_and(|t| t.is(sql, "AS")) {
            alias = super::views::object_name(sql, &toks, k + 1).map(|a| a.1);
            k += 2;
        } else if toks.get(k).is_some_and(|t| {
            t.kind == Kind::Quoted
                || t.kind == Kind::Word
                    && !["READ", "WRITE", "LOW_PRIORITY"]
                        .iter()
                        .any(|w| t.is(sql, w))
        }) {
            alias = super::views::object_name(sql, &toks, k).map(|a| a.1);
            k += 1;
        }
        let kind = toks.get(k).map_or("READ", |t| sql[t.start..to].trim());
        match views.get(&name) {
            Some(view) => of_views.push((view.as_ref(), kind)),
            None => items.push((name.to_ascii_lowercase(), alias, item.to_string())),
        }
        i = end + 1;
    }
    if of_views.is_empty() {
        return None;
    }
    // A table a view reads that the statement locks itself (or another view reads) is
    // locked once, as MariaDB locks it once.
    for (view, kind) in of_views {
        for (table, alias) in base_tables(view, views)? {
            let key = table.to_ascii_lowercase();
            if items.iter().any(|(t, a, _)| *t == key && *a == alias) {
                continue;
            }
            let mut x = quoted(&table);
            if let Some(a) = &alias {
                x.push_str(" AS ");
                x.push_str(&quoted(a));
            }
            x.push(' ');
            x.push_str(kind);
            items.push((key, alias, x));
        }
    }
    let items: Vec<&str> = items.iter().map(|i| i.2.as_str()).collect();
    let head = &sql[toks[0].start..toks[1].end];
    Some(format!("{head} {}", items.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn views(defs: &[&str]) -> Views {
        let defs: Vec<(String, Mode, String)> = defs
            .iter()
            .map(|d| (d.to_string(), Mode::default(), "utf8mb4".to_string()))
            .collect();
        Views::from_definitions(1, &defs).0
    }

    #[test]
    fn catalog_reads_find_the_table_not_its_columns() {
        let sql = "SELECT engine, table_type FROM INFORMATION_SCHEMA.TABLES WHERE table_schema = DATABASE() AND table_name = 'va'";
        let r = catalog_reads(sql, Mode::default());
        assert_eq!(r.len(), 1);
        assert_eq!(&sql[r[0].0..r[0].1], "INFORMATION_SCHEMA.TABLES");
        assert!(!r[0].3, "WHERE is no alias");
        let sql = "SELECT v.DEFINER FROM `information_schema`.`VIEWS` v ORDER BY 1";
        let r = catalog_reads(sql, Mode::default());
        assert_eq!((r[0].2, r[0].3), (CatalogTable::Views, true));
        assert!(catalog_reads(
            "SELECT information_schema.TABLES.TABLE_NAME FROM t",
            Mode::default()
        )
        .is_empty());
        assert!(
            catalog_reads("SELECT * FROM information_schema.COLUMNS", Mode::default()).is_empty()
        );
    }

    #[test]
    fn a_view_has_a_row_in_tables_and_views_as_mariadb_shows_one() {
        let vs = views(&["CREATE ALGORITHM=UNDEFINED DEFINER=`app`@`%` SQL SECURITY DEFINER VIEW `va` AS SELECT id FROM t"]);
        let v = vs.get("va").unwrap();
        let cols: Vec<String> = [
            "TABLE_CATALOG",
            "TABLE_SCHEMA",
            "TABLE_NAME",
            "TABLE_TYPE",
            "ENGINE",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            with_view_rows(CatalogTable::Tables, &cols, &[v.as_ref()], "shop"),
            "(SELECT * FROM information_schema.TABLES UNION ALL SELECT 'def', 'shop', 'va', 'VIEW', (SELECT `ENGINE` FROM information_schema.TABLES WHERE 0))"
        );
        let cols: Vec<String> = [
            "TABLE_NAME",
            "CHECK_OPTION",
            "DEFINER",
            "SECURITY_TYPE",
            "COLLATION_CONNECTION",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            with_view_rows(CatalogTable::Views, &cols, &[v.as_ref()], "shop"),
            "(SELECT * FROM information_schema.VIEWS UNION ALL SELECT 'va', 'NONE', _utf8mb4 X'6170704025', 'DEFINER', 'utf8mb4_general_ci')"
        );
        let sql = "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'shop'";
        let out = rewrite(sql, &catalog_reads(sql, Mode::default()), &|w| {
            format!("(X{})", w.name())
        });
        assert_eq!(
            out,
            "SELECT TABLE_NAME FROM (XTABLES) AS `TABLES` WHERE TABLE_SCHEMA = 'shop'"
        );
        let sql = "SELECT t.TABLE_NAME FROM information_schema.TABLES t";
        let out = rewrite(sql, &catalog_reads(sql, Mode::default()), &|w| {
            format!("(X{})", w.name())
        });
        assert_eq!(out, "SELECT t.TABLE_NAME FROM (XTABLES) t");
    }

    #[test]
    fn locking_a_view_locks_the_tables_it_reads() {
        let vs = views(&[
            "CREATE ALGORITHM=UNDEFINED DEFINER=`app`@`%` SQL SECURITY DEFINER VIEW `va` AS SELECT o.id FROM t_order o JOIN t_user ON t_user.id = o.user_id",
            "CREATE ALGORITHM=UNDEFINED DEFINER=`app`@`%` SQL SECURITY DEFINER VIEW `vb` AS SELECT * FROM va",
            "CREATE ALGORITHM=UNDEFINED DEFINER=`app`@`%` SQL SECURITY DEFINER VIEW `vc` AS WITH top AS (SELECT id FROM t_user) SELECT id FROM top",
        ]);
        assert_eq!(
            lock_views("LOCK TABLES `a` READ /*!32311 LOCAL */,`vb` READ /*!32311 LOCAL */", Mode::default(), &vs)
                .as_deref(),
            Some("LOCK TABLES `a` READ /*!32311 LOCAL */, `t_order` AS `o` READ /*!32311 LOCAL */, `t_user` READ /*!32311 LOCAL */")
        );
        assert_eq!(
            lock_views("LOCK TABLES va AS x WRITE", Mode::default(), &vs).as_deref(),
            Some("LOCK TABLES `t_order` AS `o` WRITE, `t_user` WRITE")
        );
        assert_eq!(lock_views("LOCK TABLES a READ", Mode::default(), &vs), None);
        // A WITH clause's name is no table to lock.
        assert_eq!(
            lock_views("LOCK TABLES vc READ", Mode::default(), &vs).as_deref(),
            Some("LOCK TABLES `t_user` READ")
        );
        // A table the statement locks itself is locked once.
        assert_eq!(
            lock_views("LOCK TABLES t_user READ, va READ;", Mode::default(), &vs).as_deref(),
            Some("LOCK TABLES t_user READ, `t_order` AS `o` READ")
        );
    }
}
