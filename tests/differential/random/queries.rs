//! The random tester's query shapes over a setup's tables: plain rows, aggregates, GROUP BY /
//! HAVING, DISTINCT, two-table joins, subqueries (IN, EXISTS, scalar, derived tables),
//! UNION [ALL], and statements MariaDB rejects. Every answer is deterministic: an ORDER BY
//! ends with the primary keys (or names every output column of a grouped answer) before a
//! LIMIT, else the rows are compared as a multiset; where a group or MIN / MAX may return
//! any of several equal strings, that column is folded (see [`Query::fold`]).

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;

use super::grammar::{aggregate, any_expr, expr, having, pred, some_ty, Scope, Ty, E};
use super::schema::{Setup, Table};
use crate::judge::Compare;

/// A generated statement and how its answers are compared.
pub(crate) struct Query {
    pub(crate) sql: String,
    pub(crate) compare: Compare,
    /// Output columns compared as numbers with a tolerance (DOUBLE).
    pub(crate) tolerant: Vec<usize>,
    /// Output columns where any of several equal strings is a right answer: `(column,
    /// case-insensitive)`; trailing spaces never count (PAD SPACE collations).
    pub(crate) fold: Vec<(usize, bool)>,
    /// The shape, for the reports.
    pub(crate) shape: &'static str,
}

impl Query {
    /// Comparison settings for these outputs: DOUBLEs tolerant, strings folded where
    /// `grouped` (a group, DISTINCT, UNION or MIN / MAX picks one of equal strings).
    fn new(sql: String, compare: Compare, outs: &[E], grouped: bool, shape: &'static str) -> Query {
        let tolerant = (0..outs.len()).filter(|&i| outs[i].ty == Ty::Dbl).collect();
        let fold = (0..outs.len())
            .filter(|&i| grouped && outs[i].ty == Ty::Str)
            .map(|i| (i, outs[i].ci))
            .collect();
        Query {
            sql,
            compare,
            tolerant,
            fold,
            shape,
        }
    }
}

fn table<'a>(rng: &mut StdRng, setup: &'a Setup) -> &'a Table {
    setup.tables.choose(rng).expect("a setup has tables")
}

fn dir(rng: &mut StdRng) -> &'static str {
    ["", " ASC", " DESC"].choose(rng).copied().unwrap_or("")
}

/// ` LIMIT ...` in one of its three spellings.
fn limit(rng: &mut StdRng) -> String {
    let n = rng.gen_range(0..=15);
    let o = rng.gen_range(0..=40);
    match rng.gen_range(0..4) {
        0 => format!(" LIMIT {n}"),
        1 => format!(" LIMIT {o}, {n}"),
        2 => format!(" LIMIT {n} OFFSET {o}"),
        _ => format!(" LIMIT {}", rng.gen_range(1..=3)),
    }
}

fn where_clause(rng: &mut StdRng, scope: &Scope) -> String {
    if rng.gen_bool(0.25) {
        return String::new();
    }
    if rng.gen_bool(0.03) {
        return format!(" WHERE {}", deep_pred(rng, scope));
    }
    let depth = rng.gen_range(0..=3);
    format!(" WHERE {}", pred(rng, scope, depth))
}

/// 12 to 40 simple conditions nested as deep as they are many (`(p AND (q OR (r AND ...)))`),
/// NOT now and then: a WHERE as ORMs and report builders write them.
fn deep_pred(rng: &mut StdRng, scope: &Scope) -> String {
    let n = rng.gen_range(12..=40);
    let mut s = pred(rng, scope, 0);
    for _ in 1..n {
        let p = pred(rng, scope, 0);
        let op = if rng.gen_bool(0.5) { "AND" } else { "OR" };
        s = if rng.gen_bool(0.1) {
            format!("NOT ({p} {op} {s})")
        } else {
            format!("({p} {op} {s})")
        };
    }
    s
}

/// `n` select items: `(text, expression, alias)`.
fn select_items(rng: &mut StdRng, scope: &Scope, n: usize) -> Vec<(String, E, Option<String>)> {
    (0..n)
        .map(|i| {
            let e = if rng.gen_bool(0.5) {
                any_expr(rng, scope, 0)
            } else {
                let depth = rng.gen_range(1..=2);
                any_expr(rng, scope, depth)
            };
            let alias = if rng.gen_bool(0.7) {
                Some(format!("o{i}"))
            } else {
                None
            };
            let text = match &alias {
                Some(a) => format!("{} AS {a}", e.sql),
                None => e.sql.clone(),
            };
            (text, e, alias)
        })
        .collect()
}

fn list(items: &[(String, E, Option<String>)]) -> String {
    let v: Vec<&str> = items.iter().map(|(t, _, _)| t.as_str()).collect();
    v.join(", ")
}

fn exprs(items: &[(String, E, Option<String>)]) -> Vec<E> {
    items.iter().map(|(_, e, _)| e.clone()).collect()
}

/// A reference to output `i` in ORDER BY / GROUP BY: its position, alias or expression.
fn output_ref(rng: &mut StdRng, i: usize, item: &(String, E, Option<String>)) -> String {
    match (rng.gen_range(0..3), &item.2) {
        (0, _) => (i + 1).to_string(),
        (1, Some(a)) => a.clone(),
        _ => item.1.sql.clone(),
    }
}

/// ` ORDER BY` some outputs or expressions and then the primary keys (a total order), and
/// maybe a LIMIT; `None` half the time (compared unordered).
fn order_by_keys(
    rng: &mut StdRng,
    scope: &Scope,
    items: &[(String, E, Option<String>)],
) -> Option<String> {
    if rng.gen_bool(0.4) {
        return None;
    }
    let mut keys: Vec<String> = Vec::new();
    for _ in 0..rng.gen_range(0..=2) {
        let k = if !items.is_empty() && rng.gen_bool(0.6) {
            let i = rng.gen_range(0..items.len());
            output_ref(rng, i, &items[i])
        } else {
            any_expr(rng, scope, 1).sql
        };
        keys.push(format!("{k}{}", dir(rng)));
    }
    for k in scope.keys() {
        keys.push(format!("{k}{}", dir(rng)));
    }
    let mut s = format!(" ORDER BY {}", keys.join(", "));
    if rng.gen_bool(0.5) {
        s.push_str(&limit(rng));
    }
    Some(s)
}

/// ` ORDER BY` every output (grouped answers: no two rows are equal on all of them), and
/// maybe a LIMIT; `None` half the time.
fn order_by_outputs(rng: &mut StdRng, items: &[(String, E, Option<String>)]) -> Option<String> {
    if items.is_empty() || rng.gen_bool(0.5) {
        return None;
    }
    let mut idx: Vec<usize> = (0..items.len()).collect();
    idx.shuffle(rng);
    let keys: Vec<String> = idx
        .into_iter()
        .map(|i| format!("{}{}", output_ref(rng, i, &items[i]), dir(rng)))
        .collect();
    let mut s = format!(" ORDER BY {}", keys.join(", "));
    if rng.gen_bool(0.5) {
        s.push_str(&limit(rng));
    }
    Some(s)
}

fn ordered(order: &Option<String>) -> Compare {
    if order.is_some() {
        Compare::Ordered
    } else {
        Compare::Unordered
    }
}

/// A random statement over the setup's tables.
pub(crate) fn gen_query(rng: &mut StdRng, setup: &Setup) -> Query {
    match rng.gen_range(0..100) {
        0..=17 => plain(rng, setup),
        18..=27 => aggregates(rng, setup),
        28..=45 => grouped(rng, setup),
        46..=51 => distinct(rng, setup),
        52..=67 => join(rng, setup),
        68..=83 => subquery(rng, setup),
        84..=95 => union(rng, setup),
        _ => invalid(rng, setup),
    }
}

fn plain(rng: &mut StdRng, setup: &Setup) -> Query {
    let t = table(rng, setup);
    let alias = rng.gen_bool(0.2).then_some("t");
    let scope = Scope::one(t, alias);
    let from = match alias {
        Some(a) => format!("{} AS {a}", t.name),
        None => t.name.clone(),
    };
    let filter = where_clause(rng, &scope);
    if rng.gen_bool(0.1) {
        let order = order_by_keys(rng, &scope, &[]);
        let outs: Vec<E> = (0..t.cols.len())
            .map(|_| E {
                sql: String::new(),
                ty: Ty::Int,
                uns: false,
                ci: false,
            })
            .collect();
        let sql = format!(
            "SELECT * FROM {from}{filter}{}",
            order.clone().unwrap_or_default()
        );
        return Query::new(sql, ordered(&order), &outs, false, "plain *");
    }
    listed(rng, &scope, &from, &filter, "plain")
}

/// `SELECT` 1 to 4 items of `scope` `FROM from` `filter`, perhaps ordered.
fn listed(rng: &mut StdRng, scope: &Scope, from: &str, filter: &str, shape: &'static str) -> Query {
    let n = rng.gen_range(1..=4);
    let items = select_items(rng, scope, n);
    let order = order_by_keys(rng, scope, &items);
    let sql = format!(
        "SELECT {} FROM {from}{filter}{}",
        list(&items),
        order.clone().unwrap_or_default()
    );
    Query::new(sql, ordered(&order), &exprs(&items), false, shape)
}

fn agg_items(rng: &mut StdRng, scope: &Scope, first: usize) -> Vec<(String, E, Option<String>)> {
    (0..rng.gen_range(1..=3))
        .map(|i| {
            let e = aggregate(rng, scope);
            let alias = rng.gen_bool(0.5).then(|| format!("a{}", first + i));
            let text = match &alias {
                Some(a) => format!("{} AS {a}", e.sql),
                None => e.sql.clone(),
            };
            (text, e, alias)
        })
        .collect()
}

fn aggregates(rng: &mut StdRng, setup: &Setup) -> Query {
    let t = table(rng, setup);
    let scope = Scope::one(t, None);
    let items = agg_items(rng, &scope, 0);
    let filter = where_clause(rng, &scope);
    let sql = format!("SELECT {} FROM {}{filter}", list(&items), t.name);
    Query::new(sql, Compare::Unordered, &exprs(&items), true, "aggregates")
}

/// Grouping keys: columns most often, now and then an expression.
fn group_keys(rng: &mut StdRng, scope: &Scope) -> Vec<(String, E, Option<String>)> {
    (0..rng.gen_range(1..=2))
        .map(|i| {
            let e = if rng.gen_bool(0.7) {
                any_expr(rng, scope, 0)
            } else {
                any_expr(rng, scope, 1)
            };
            let alias = rng.gen_bool(0.4).then(|| format!("k{i}"));
            let text = match &alias {
                Some(a) => format!("{} AS {a}", e.sql),
                None => e.sql.clone(),
            };
            (text, e, alias)
        })
        .collect()
}

/// `SELECT keys, aggregates FROM ... GROUP BY keys [HAVING] [ORDER BY] [LIMIT]` over `scope`.
fn grouped_over(
    rng: &mut StdRng,
    scope: &Scope,
    from: &str,
    filter: Option<String>,
    shape: &'static str,
) -> Query {
    let keys = group_keys(rng, scope);
    let aggs = agg_items(rng, scope, keys.len());
    let filter = filter.unwrap_or_else(|| where_clause(rng, scope));
    let show_keys = rng.gen_bool(0.9);
    let mut items: Vec<(String, E, Option<String>)> = Vec::new();
    if show_keys {
        items.extend(keys.iter().cloned());
    }
    items.extend(aggs.iter().cloned());
    let group: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            if show_keys {
                output_ref(rng, i, k)
            } else {
                k.1.sql.clone()
            }
        })
        .collect();
    let mut sql = format!(
        "SELECT {} FROM {from}{filter} GROUP BY {}",
        list(&items),
        group.join(", ")
    );
    if rng.gen_bool(0.3) {
        let key_exprs = exprs(&keys);
        sql.push_str(&format!(" HAVING {}", having(rng, scope, &key_exprs)));
    }
    // Ordered by every key (groups differ on them), maybe after an aggregate.
    let order = if show_keys && rng.gen_bool(0.5) {
        let mut ks: Vec<String> = Vec::new();
        if rng.gen_bool(0.3) {
            let i = keys.len() + rng.gen_range(0..aggs.len());
            ks.push(format!("{}{}", output_ref(rng, i, &items[i]), dir(rng)));
        }
        for (i, k) in keys.iter().enumerate() {
            ks.push(format!("{}{}", output_ref(rng, i, k), dir(rng)));
        }
        let mut s = format!(" ORDER BY {}", ks.join(", "));
        if rng.gen_bool(0.5) {
            s.push_str(&limit(rng));
        }
        Some(s)
    } else {
        None
    };
    sql.push_str(&order.clone().unwrap_or_default());
    Query::new(sql, ordered(&order), &exprs(&items), true, shape)
}

fn grouped(rng: &mut StdRng, setup: &Setup) -> Query {
    let t = table(rng, setup);
    let scope = Scope::one(t, None);
    grouped_over(rng, &scope, &t.name, None, "group by")
}

fn distinct(rng: &mut StdRng, setup: &Setup) -> Query {
    let t = table(rng, setup);
    let scope = Scope::one(t, None);
    let items: Vec<(String, E, Option<String>)> = (0..rng.gen_range(1..=2))
        .map(|i| {
            let e = {
                let d = rng.gen_range(0..=1);
                any_expr(rng, &scope, d)
            };
            (format!("{} AS d{i}", e.sql), e, Some(format!("d{i}")))
        })
        .collect();
    let filter = where_clause(rng, &scope);
    let order = order_by_outputs(rng, &items);
    let sql = format!(
        "SELECT DISTINCT {} FROM {}{filter}{}",
        list(&items),
        t.name,
        order.clone().unwrap_or_default()
    );
    Query::new(sql, ordered(&order), &exprs(&items), true, "distinct")
}

/// `t1 a <join> t2 b ON a.x = b.y ...` (or `t1 a, t2 b` and its condition for the WHERE),
/// the scope of both, and the shape's name.
fn join_from<'a>(
    rng: &mut StdRng,
    setup: &'a Setup,
) -> (String, Option<String>, Scope<'a>, &'static str) {
    let t1 = table(rng, setup);
    let t2 = table(rng, setup);
    let scope = Scope {
        srcs: vec![
            super::grammar::Src {
                t: t1,
                alias: Some("a".into()),
            },
            super::grammar::Src {
                t: t2,
                alias: Some("b".into()),
            },
        ],
    };
    // Columns of one type family on both sides, the same type most often.
    let left = Scope::one(t1, Some("a"));
    let right = Scope::one(t2, Some("b"));
    let a = left.column(rng, None).expect("a table has columns");
    let b = if rng.gen_bool(0.7) {
        right.column(rng, Some(a.ty))
    } else {
        None
    }
    .or_else(|| {
        let fam: Vec<Ty> = [Ty::Int, Ty::Dec, Ty::Dbl, Ty::Str, Ty::Date, Ty::Dt]
            .into_iter()
            .filter(|t| t.family() == a.ty.family())
            .collect();
        let ty = fam.choose(rng).copied().unwrap_or(a.ty);
        right.column(rng, Some(ty))
    })
    .unwrap_or_else(|| E {
        sql: "b.id".into(),
        ty: Ty::Int,
        uns: false,
        ci: false,
    });
    let mut on = format!("{} = {}", a.sql, b.sql);
    if rng.gen_bool(0.2) {
        on.push_str(&format!(" AND {}", pred(rng, &right, 0)));
    }
    let (kind, shape) = match rng.gen_range(0..10) {
        0..=4 => (["JOIN", "INNER JOIN"][rng.gen_range(0..2)], "inner join"),
        5..=7 => ("LEFT JOIN", "left join"),
        8 => ("RIGHT JOIN", "right join"),
        _ => ("", "comma join"),
    };
    // USING a column both tables have by name (`id` at least) now and then.
    let common: Vec<&str> = t1
        .cols
        .iter()
        .filter(|c| t2.cols.iter().any(|d| d.name == c.name))
        .map(|c| c.name.as_str())
        .collect();
    if kind.is_empty() {
        (
            format!("{} a, {} b", t1.name, t2.name),
            Some(on),
            scope,
            shape,
        )
    } else if rng.gen_bool(0.15) {
        let col = common.choose(rng).copied().unwrap_or("id");
        let from = format!("{} a {kind} {} b USING ({col})", t1.name, t2.name);
        (from, None, scope, shape)
    } else {
        let from = format!("{} a {kind} {} b ON {on}", t1.name, t2.name);
        (from, None, scope, shape)
    }
}

fn join(rng: &mut StdRng, setup: &Setup) -> Query {
    let (from, on_where, scope, shape) = join_from(rng, setup);
    // A comma join's condition is in the WHERE, with the other conditions.
    let mut conds: Vec<String> = on_where.into_iter().collect();
    if rng.gen_bool(0.6) {
        conds.push({
            let d = rng.gen_range(0..=2);
            pred(rng, &scope, d)
        });
    }
    let filter = if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    };
    if rng.gen_bool(0.35) {
        return grouped_over(rng, &scope, &from, Some(filter), shape);
    }
    listed(rng, &scope, &from, &filter, shape)
}

/// A predicate with a subquery on `inner` (alias `s`) for the outer table (alias `o`).
fn subquery_pred(rng: &mut StdRng, outer: &Scope, inner_t: &Table) -> String {
    let inner = Scope::one(inner_t, Some("s"));
    let o = outer.column(rng, None).expect("a table has columns");
    let s = inner
        .column(rng, Some(o.ty))
        .or_else(|| inner.column(rng, None))
        .expect("a table has columns");
    let inner_filter = if rng.gen_bool(0.5) {
        format!(" WHERE {}", {
            let d = rng.gen_range(0..=1);
            pred(rng, &inner, d)
        })
    } else {
        String::new()
    };
    let and_filter = if rng.gen_bool(0.5) {
        format!(" AND {}", {
            let d = rng.gen_range(0..=1);
            pred(rng, &inner, d)
        })
    } else {
        String::new()
    };
    let not = if rng.gen_bool(0.3) { "NOT " } else { "" };
    match rng.gen_range(0..6) {
        0 | 1 => format!(
            "{} {not}IN (SELECT {} FROM {} s{inner_filter})",
            o.sql, s.sql, inner_t.name
        ),
        2 | 3 => format!(
            "{not}EXISTS (SELECT 1 FROM {} s WHERE {} = {}{and_filter})",
            inner_t.name, s.sql, o.sql
        ),
        4 => {
            let f = ["MIN", "MAX", "COUNT", "AVG"]
                .choose(rng)
                .copied()
                .unwrap_or("MAX");
            let op = ["=", "<", ">", "<=", ">=", "<>"]
                .choose(rng)
                .copied()
                .unwrap_or("<");
            format!(
                "{} {op} (SELECT {f}({}) FROM {} s{inner_filter})",
                o.sql, s.sql, inner_t.name
            )
        }
        _ => {
            let q = ["ANY", "ALL"].choose(rng).copied().unwrap_or("ANY");
            let op = ["=", "<", ">", "<>"].choose(rng).copied().unwrap_or("<");
            format!(
                "{} {op} {q} (SELECT {} FROM {} s{inner_filter})",
                o.sql, s.sql, inner_t.name
            )
        }
    }
}

fn subquery(rng: &mut StdRng, setup: &Setup) -> Query {
    if rng.gen_bool(0.2) {
        return derived(rng, setup);
    }
    let t = table(rng, setup);
    let inner_t = table(rng, setup);
    let scope = Scope::one(t, Some("o"));
    let mut conds = vec![subquery_pred(rng, &scope, inner_t)];
    if rng.gen_bool(0.4) {
        conds.push({
            let d = rng.gen_range(0..=1);
            pred(rng, &scope, d)
        });
    }
    let filter = format!(" WHERE {}", conds.join(" AND "));
    let from = format!("{} o", t.name);
    if rng.gen_bool(0.25) {
        let items = agg_items(rng, &scope, 0);
        let sql = format!("SELECT {} FROM {from}{filter}", list(&items));
        return Query::new(
            sql,
            Compare::Unordered,
            &exprs(&items),
            true,
            "subquery aggregate",
        );
    }
    let n = rng.gen_range(1..=3);
    let mut items = select_items(rng, &scope, n);
    if rng.gen_bool(0.3) {
        // A correlated scalar subquery in the select list.
        let inner = Scope::one(inner_t, Some("s"));
        let o = scope.column(rng, None).expect("columns");
        let s = inner
            .column(rng, Some(o.ty))
            .or_else(|| inner.column(rng, None))
            .expect("columns");
        let e = E {
            sql: format!(
                "(SELECT COUNT(*) FROM {} s WHERE {} = {})",
                inner_t.name, s.sql, o.sql
            ),
            ty: Ty::Int,
            uns: true,
            ci: false,
        };
        items.push((format!("{} AS sc", e.sql), e, Some("sc".into())));
    }
    let order = order_by_keys(rng, &scope, &items);
    let sql = format!(
        "SELECT {} FROM {from}{filter}{}",
        list(&items),
        order.clone().unwrap_or_default()
    );
    Query::new(sql, ordered(&order), &exprs(&items), false, "subquery")
}

/// A derived table (maybe limited in a total order) grouped outside.
fn derived(rng: &mut StdRng, setup: &Setup) -> Query {
    let t = table(rng, setup);
    let scope = Scope::one(t, None);
    let n = rng.gen_range(1..=3);
    let items: Vec<E> = (0..n).map(|_| any_expr(rng, &scope, 1)).collect();
    let inner_list: Vec<String> = items
        .iter()
        .enumerate()
        .map(|(i, e)| format!("{} AS c{i}", e.sql))
        .collect();
    let filter = where_clause(rng, &scope);
    let inner_limit = if rng.gen_bool(0.3) {
        format!(" ORDER BY id{} LIMIT {}", dir(rng), rng.gen_range(0..=40))
    } else {
        String::new()
    };
    let inner = format!(
        "SELECT {}, id FROM {}{filter}{inner_limit}",
        inner_list.join(", "),
        t.name
    );
    let key = rng.gen_range(0..n);
    let mut outs = vec![items[key].clone(), count_e()];
    let mut sel = vec![format!("d.c{key}"), "COUNT(*)".to_string()];
    let num: Vec<usize> = (0..n).filter(|&i| items[i].ty.numeric()).collect();
    if let Some(&i) = num.choose(rng) {
        sel.push(format!("SUM(d.c{i})"));
        let ty = if items[i].ty == Ty::Dbl {
            Ty::Dbl
        } else {
            Ty::Dec
        };
        outs.push(E {
            sql: String::new(),
            ty,
            uns: false,
            ci: false,
        });
    }
    let order = rng
        .gen_bool(0.5)
        .then(|| format!(" ORDER BY d.c{key}{}", dir(rng)));
    let sql = if rng.gen_bool(0.4) {
        format!(
            "WITH d AS ({inner}) SELECT {} FROM d GROUP BY d.c{key}{}",
            sel.join(", "),
            order.clone().unwrap_or_default()
        )
    } else {
        format!(
            "SELECT {} FROM ({inner}) AS d GROUP BY d.c{key}{}",
            sel.join(", "),
            order.clone().unwrap_or_default()
        )
    };
    Query::new(sql, ordered(&order), &outs, true, "derived table")
}

fn count_e() -> E {
    E {
        sql: "COUNT(*)".into(),
        ty: Ty::Int,
        uns: true,
        ci: false,
    }
}

fn union(rng: &mut StdRng, setup: &Setup) -> Query {
    let t1 = table(rng, setup);
    let t2 = table(rng, setup);
    let s1 = Scope::one(t1, None);
    let s2 = Scope::one(t2, None);
    let n = rng.gen_range(1..=2);
    let mut outs: Vec<E> = Vec::new();
    let mut first: Vec<String> = Vec::new();
    let mut second: Vec<String> = Vec::new();
    for i in 0..n {
        let ty = some_ty(rng, &s1);
        let a = {
            let d = rng.gen_range(0..=1);
            expr(rng, &s1, ty, d)
        };
        let b = {
            let d = rng.gen_range(0..=1);
            expr(rng, &s2, ty, d)
        };
        first.push(format!("{} AS u{i}", a.sql));
        second.push(b.sql.clone());
        outs.push(E {
            sql: format!("u{i}"),
            ci: a.ci || b.ci,
            ..a
        });
    }
    let all = if rng.gen_bool(0.5) { " ALL" } else { "" };
    let body = format!(
        "SELECT {} FROM {}{} UNION{all} SELECT {} FROM {}{}",
        first.join(", "),
        t1.name,
        where_clause(rng, &s1),
        second.join(", "),
        t2.name,
        where_clause(rng, &s2)
    );
    if rng.gen_bool(0.2) {
        let sql = format!("SELECT COUNT(*), COUNT(DISTINCT u0) FROM ({body}) AS un");
        return Query::new(
            sql,
            Compare::Unordered,
            &[count_e(), count_e()],
            true,
            "union count",
        );
    }
    let order = rng.gen_bool(0.5).then(|| {
        let keys: Vec<String> = (0..n).map(|i| format!("u{i}{}", dir(rng))).collect();
        let mut s = format!(" ORDER BY {}", keys.join(", "));
        if rng.gen_bool(0.5) {
            s.push_str(&limit(rng));
        }
        s
    });
    let sql = format!("{body}{}", order.clone().unwrap_or_default());
    let shape = if all.is_empty() { "union" } else { "union all" };
    Query::new(sql, ordered(&order), &outs, true, shape)
}

/// A statement MariaDB rejects: the proxy must reject it with the same error (or 1235).
fn invalid(rng: &mut StdRng, setup: &Setup) -> Query {
    let t = table(rng, setup);
    let t2 = table(rng, setup);
    let sql = match rng.gen_range(0..8) {
        7 => {
            let col = t.cols.choose(rng).map_or("id", |c| c.name.as_str());
            format!("SELECT id FROM {} WHERE {col} NOT NULL", t.name)
        }
        0 => format!("SELECT id, nope_col FROM {}", t.name),
        1 => format!("SELECT * FROM {}_missing", t.name),
        2 => format!("SELECT id FROM {} WHERE COUNT(*) > 1", t.name),
        3 => format!(
            "SELECT id FROM {} a JOIN {} b ON a.id = b.id",
            t.name, t2.name
        ),
        4 => format!("SELECT id FROM {} GROUP BY", t.name),
        5 => format!("SELECT (SELECT id FROM {}) FROM {}", t2.name, t.name),
        _ => format!("SELECT COUNT(*) FROM {} WHERE SUM(id) > 0", t.name),
    };
    Query::new(sql, Compare::Unordered, &[], false, "invalid")
}
