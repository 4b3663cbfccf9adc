//! The random tester's expression grammar: typed scalar expressions, predicates and
//! aggregates over the columns in scope. Every expression is deterministic, and none can
//! fail on some rows only (no unsigned subtraction, no overflow: constants stay small), so
//! that a node evaluating rows the reference never reaches (past a LIMIT) errs exactly when
//! the reference does.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;

use super::schema::{Kind, Lit, Table};
use crate::generated::sql_string;

/// The type of an expression, as far as the comparison of answers cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Int,
    Dec,
    /// DOUBLE: compared with a tolerance once aggregated.
    Dbl,
    Str,
    Date,
    Dt,
}

impl Ty {
    fn of(kind: Kind) -> Ty {
        match kind {
            Kind::Int | Kind::UInt | Kind::Big | Kind::UBig => Ty::Int,
            Kind::Dec => Ty::Dec,
            Kind::Dbl => Ty::Dbl,
            Kind::Ci | Kind::Bin => Ty::Str,
            Kind::Date => Ty::Date,
            Kind::Dt => Ty::Dt,
        }
    }

    pub(crate) fn numeric(self) -> bool {
        matches!(self, Ty::Int | Ty::Dec | Ty::Dbl)
    }

    /// Types compared with each other without surprises.
    pub(crate) fn family(self) -> u8 {
        match self {
            Ty::Int | Ty::Dec | Ty::Dbl => 0,
            Ty::Str => 1,
            Ty::Date | Ty::Dt => 2,
        }
    }

    fn wider(a: Ty, b: Ty) -> Ty {
        match (a, b) {
            (Ty::Dbl, _) | (_, Ty::Dbl) => Ty::Dbl,
            (Ty::Dec, _) | (_, Ty::Dec) => Ty::Dec,
            _ => a,
        }
    }
}

/// An expression and what its value may be.
#[derive(Debug, Clone)]
pub(crate) struct E {
    pub(crate) sql: String,
    pub(crate) ty: Ty,
    /// May be unsigned: never subtracted, negated or multiplied by a negative number.
    pub(crate) uns: bool,
    /// A string compared case-insensitively: where a group or MIN / MAX picks one of several
    /// equal strings, any of them is right.
    pub(crate) ci: bool,
}

impl E {
    fn new(sql: String, ty: Ty) -> E {
        E {
            sql,
            ty,
            uns: false,
            ci: false,
        }
    }
}

/// A table in scope, with the name its columns are qualified with (none: bare names).
pub(crate) struct Src<'a> {
    pub(crate) t: &'a Table,
    pub(crate) alias: Option<String>,
}

/// The tables a clause may name.
pub(crate) struct Scope<'a> {
    pub(crate) srcs: Vec<Src<'a>>,
}

impl<'a> Scope<'a> {
    pub(crate) fn one(t: &'a Table, alias: Option<&str>) -> Scope<'a> {
        Scope {
            srcs: vec![Src {
                t,
                alias: alias.map(str::to_string),
            }],
        }
    }

    /// Every column: `(reference, kind, table, column index)`.
    pub(crate) fn columns(&self) -> Vec<(String, Kind, &'a Table, usize)> {
        let mut v = Vec::new();
        for s in &self.srcs {
            for (i, c) in s.t.cols.iter().enumerate() {
                let r = match &s.alias {
                    Some(a) => format!("{a}.{}", c.name),
                    None => c.name.clone(),
                };
                v.push((r, c.kind, s.t, i));
            }
        }
        v
    }

    /// A column as an expression, of type `ty` (any type for `None`); `None` when the scope
    /// has none.
    pub(crate) fn column(&self, rng: &mut StdRng, ty: Option<Ty>) -> Option<E> {
        let cols: Vec<_> = self
            .columns()
            .into_iter()
            .filter(|(_, k, _, _)| ty.is_none_or(|t| Ty::of(*k) == t))
            .collect();
        let (r, k, _, _) = cols.choose(rng)?;
        Some(E {
            sql: r.clone(),
            ty: Ty::of(*k),
            uns: k.unsigned(),
            ci: *k == Kind::Ci,
        })
    }

    /// The primary key of every table in scope.
    pub(crate) fn keys(&self) -> Vec<String> {
        self.srcs
            .iter()
            .map(|s| match &s.alias {
                Some(a) => format!("{a}.id"),
                None => "id".into(),
            })
            .collect()
    }

    /// A value some row holds in a column of type `ty`, now and then another one.
    pub(crate) fn literal(&self, rng: &mut StdRng, ty: Ty) -> String {
        if rng.gen_bool(0.75) {
            let cols: Vec<_> = self
                .columns()
                .into_iter()
                .filter(|(_, k, _, _)| Ty::of(*k) == ty)
                .collect();
            if let Some((_, _, t, i)) = cols.choose(rng) {
                let row = &t.rows[rng.gen_range(0..t.rows.len())];
                if row[*i] != Lit::Null {
                    return row[*i].sql();
                }
            }
        }
        fresh_literal(rng, ty)
    }
}

/// A literal of type `ty` from a small pool.
pub(crate) fn fresh_literal(rng: &mut StdRng, ty: Ty) -> String {
    match ty {
        Ty::Int => rng.gen_range(-12..=35).to_string(),
        Ty::Dec => ["0.5", "1.500", "-2.25", "10.125", "3", "-0.001"]
            .choose(rng)
            .map(|s| s.to_string())
            .unwrap_or_default(),
        Ty::Dbl => ["0.1", "1.5", "-2.25", "1e10", "2", "0"]
            .choose(rng)
            .map(|s| s.to_string())
            .unwrap_or_default(),
        Ty::Str => sql_string(
            [
                "abc", "ABC", "b", "", "zz", "alpha", "ünï", "a_c", "100", "M", "0",
            ]
            .choose(rng)
            .copied()
            .unwrap_or(""),
        ),
        Ty::Date => sql_string(
            [
                "2020-01-01",
                "2020-06-15",
                "2019-12-31",
                "2021-01-01",
                "2000-01-01",
            ]
            .choose(rng)
            .copied()
            .unwrap_or("2020-01-01"),
        ),
        Ty::Dt => sql_string(
            [
                "2020-01-01 00:00:00",
                "2020-06-15 12:00:00",
                "2021-01-01 23:59:59",
            ]
            .choose(rng)
            .copied()
            .unwrap_or("2020-01-01 00:00:00"),
        ),
    }
}

/// A small non-negative integer constant.
fn small(rng: &mut StdRng) -> i64 {
    rng.gen_range(1..=5)
}

/// An expression of type `ty`, at most `depth` operators deep.
pub(crate) fn expr(rng: &mut StdRng, scope: &Scope, ty: Ty, depth: u32) -> E {
    let base = |rng: &mut StdRng| {
        scope
            .column(rng, Some(ty))
            .unwrap_or_else(|| E::new(fresh_literal(rng, ty), ty))
    };
    if depth == 0 || rng.gen_bool(0.45) {
        return base(rng);
    }
    match ty {
        Ty::Int | Ty::Dec | Ty::Dbl => num_expr(rng, scope, ty, depth),
        Ty::Str => str_expr(rng, scope, depth),
        Ty::Date | Ty::Dt => date_expr(rng, scope, ty, depth),
    }
}

/// An expression of a random type.
pub(crate) fn any_expr(rng: &mut StdRng, scope: &Scope, depth: u32) -> E {
    match scope.column(rng, None) {
        Some(c) if depth == 0 || rng.gen_bool(0.4) => c,
        Some(c) => expr(rng, scope, c.ty, depth),
        None => expr(rng, scope, Ty::Int, depth),
    }
}

/// `b`, or a small non-negative constant where `a` and `b` differ in signedness (mixing an
/// unsigned operand with a signed one may make the result unsigned, and a negative value
/// of it an error).
fn same_signedness(rng: &mut StdRng, a: &E, b: E) -> E {
    if a.uns == b.uns {
        b
    } else {
        E {
            sql: small(rng).to_string(),
            ty: Ty::Int,
            uns: a.uns,
            ci: false,
        }
    }
}

/// A numeric expression (its type may widen: `int + 1.5` is DECIMAL).
fn num_expr(rng: &mut StdRng, scope: &Scope, ty: Ty, depth: u32) -> E {
    let a = expr(rng, scope, ty, depth - 1);
    let e = |sql: String, ty: Ty, uns: bool| E {
        sql,
        ty,
        uns,
        ci: false,
    };
    match rng.gen_range(0..14) {
        0 => {
            let k = if a.uns {
                small(rng)
            } else {
                rng.gen_range(-5..=5)
            };
            e(format!("({} + {k})", a.sql), a.ty, a.uns)
        }
        1 if !a.uns => e(format!("({} - {})", a.sql, small(rng)), a.ty, false),
        2 => {
            let k = if a.uns {
                small(rng)
            } else {
                rng.gen_range(-3..=5)
            };
            e(format!("({} * {k})", a.sql), a.ty, a.uns)
        }
        3 => e(format!("ABS({})", a.sql), a.ty, a.uns),
        4 if !a.uns => e(format!("-({})", a.sql), a.ty, false),
        5 => {
            let k = [2, 3, 5, 7].choose(rng).copied().unwrap_or(3);
            e(format!("({} % {k})", a.sql), a.ty, a.uns)
        }
        6 => {
            // An unsigned operand makes the sum unsigned: only with another unsigned one
            // (a negative signed one would make it fail on some rows).
            let b = expr(rng, scope, ty, depth - 1);
            let uns = a.uns;
            if a.uns != b.uns {
                e(format!("({} + {})", a.sql, small(rng)), a.ty, a.uns)
            } else if !uns && rng.gen_bool(0.5) {
                e(
                    format!("({} - {})", a.sql, b.sql),
                    Ty::wider(a.ty, b.ty),
                    false,
                )
            } else {
                e(
                    format!("({} + {})", a.sql, b.sql),
                    Ty::wider(a.ty, b.ty),
                    uns,
                )
            }
        }
        7 => {
            let lit = scope.literal(rng, ty);
            let uns = a.uns && !lit.starts_with('-');
            e(format!("COALESCE({}, {lit})", a.sql), a.ty, uns)
        }
        8 => {
            let p = pred(rng, scope, depth - 1);
            let b = expr(rng, scope, ty, depth - 1);
            let b = same_signedness(rng, &a, b);
            e(
                format!("CASE WHEN {p} THEN {} ELSE {} END", a.sql, b.sql),
                Ty::wider(a.ty, b.ty),
                a.uns,
            )
        }
        9 => {
            let s = expr(rng, scope, Ty::Str, depth - 1);
            let f = ["LENGTH", "CHAR_LENGTH"]
                .choose(rng)
                .copied()
                .unwrap_or("LENGTH");
            e(format!("{f}({})", s.sql), Ty::Int, true)
        }
        10 => {
            let d = expr(rng, scope, Ty::Date, depth - 1);
            let f = ["YEAR", "MONTH", "DAYOFMONTH"]
                .choose(rng)
                .copied()
                .unwrap_or("YEAR");
            e(format!("{f}({})", d.sql), Ty::Int, true)
        }
        11 => match rng.gen_range(0..4) {
            0 => e(
                format!("ROUND({}, {})", a.sql, rng.gen_range(0..=2)),
                a.ty,
                a.uns,
            ),
            1 => e(format!("FLOOR({})", a.sql), a.ty, a.uns),
            2 => e(format!("({} DIV {})", a.sql, small(rng)), Ty::Int, a.uns),
            _ => {
                let ty = if a.ty == Ty::Dbl { Ty::Dbl } else { Ty::Dec };
                e(format!("({} / {})", a.sql, small(rng)), ty, a.uns)
            }
        },
        12 => {
            let s = expr(rng, scope, Ty::Str, depth - 1);
            e(format!("CAST({} AS SIGNED)", s.sql), Ty::Int, false)
        }
        _ => {
            let b = expr(rng, scope, a.ty, depth - 1);
            let b = same_signedness(rng, &a, b);
            let f = ["GREATEST", "LEAST"]
                .choose(rng)
                .copied()
                .unwrap_or("LEAST");
            e(format!("{f}({}, {})", a.sql, b.sql), a.ty, a.uns)
        }
    }
}

fn str_expr(rng: &mut StdRng, scope: &Scope, depth: u32) -> E {
    let a = expr(rng, scope, Ty::Str, depth - 1);
    let s = |sql: String, ci: bool| E {
        sql,
        ty: Ty::Str,
        uns: false,
        ci,
    };
    match rng.gen_range(0..9) {
        0 => {
            let b = expr(rng, scope, Ty::Str, depth - 1);
            s(format!("CONCAT({}, {})", a.sql, b.sql), a.ci && b.ci)
        }
        1 => {
            let lit = fresh_literal(rng, Ty::Str);
            s(format!("CONCAT({}, {lit})", a.sql), a.ci)
        }
        2 => {
            let f = ["UPPER", "LOWER"].choose(rng).copied().unwrap_or("UPPER");
            s(format!("{f}({})", a.sql), a.ci)
        }
        3 => {
            let k = rng.gen_range(1..=3);
            match rng.gen_range(0..3) {
                0 => s(format!("SUBSTRING({}, 1, {k})", a.sql), a.ci),
                1 => s(format!("LEFT({}, {k})", a.sql), a.ci),
                _ => s(format!("RIGHT({}, {k})", a.sql), a.ci),
            }
        }
        4 => match rng.gen_range(0..2) {
            0 => s(format!("TRIM({})", a.sql), a.ci),
            _ => s(format!("REPLACE({}, 'b', 'X')", a.sql), a.ci),
        },
        5 => {
            let lit = scope.literal(rng, Ty::Str);
            s(format!("COALESCE({}, {lit})", a.sql), a.ci)
        }
        6 => {
            let p = pred(rng, scope, depth - 1);
            let lit = fresh_literal(rng, Ty::Str);
            s(format!("CASE WHEN {p} THEN {} ELSE {lit} END", a.sql), a.ci)
        }
        7 => {
            let n = expr(rng, scope, Ty::Int, depth - 1);
            s(format!("CAST({} AS CHAR)", n.sql), true)
        }
        _ => {
            let d = expr(rng, scope, Ty::Date, depth - 1);
            s(format!("DATE_FORMAT({}, '%Y-%m')", d.sql), true)
        }
    }
}

fn date_expr(rng: &mut StdRng, scope: &Scope, ty: Ty, depth: u32) -> E {
    let a = expr(rng, scope, ty, depth - 1);
    match rng.gen_range(0..4) {
        0 => E::new(
            format!(
                "DATE_ADD({}, INTERVAL {} DAY)",
                a.sql,
                rng.gen_range(-40..=40)
            ),
            ty,
        ),
        1 => E::new(
            format!(
                "DATE_SUB({}, INTERVAL {} MONTH)",
                a.sql,
                rng.gen_range(0..=13)
            ),
            ty,
        ),
        2 if ty == Ty::Date => {
            let dt = expr(rng, scope, Ty::Dt, depth - 1);
            E::new(format!("DATE({})", dt.sql), Ty::Date)
        }
        _ => {
            let lit = if ty == Ty::Date {
                "DATE '2020-01-01'"
            } else {
                "TIMESTAMP '2020-01-01 00:00:00'"
            };
            E::new(format!("COALESCE({}, {lit})", a.sql), ty)
        }
    }
}

/// A type some column in scope has (numbers most often).
pub(crate) fn some_ty(rng: &mut StdRng, scope: &Scope) -> Ty {
    scope.column(rng, None).map(|c| c.ty).unwrap_or(Ty::Int)
}

const CMP: [&str; 7] = ["=", "<>", "<", "<=", ">", ">=", "<=>"];

/// A predicate, at most `depth` AND / OR / NOT deep.
pub(crate) fn pred(rng: &mut StdRng, scope: &Scope, depth: u32) -> String {
    if depth > 0 && rng.gen_bool(0.35) {
        let a = pred(rng, scope, depth - 1);
        return match rng.gen_range(0..5) {
            0 | 1 => format!("({a} AND {})", pred(rng, scope, depth - 1)),
            2 | 3 => format!("({a} OR {})", pred(rng, scope, depth - 1)),
            _ => format!("NOT ({a})"),
        };
    }
    let ty = some_ty(rng, scope);
    let leaf = rng.gen_range(0..=1).min(depth);
    let e = expr(rng, scope, ty, leaf);
    match rng.gen_range(0..12) {
        0..=3 => {
            let op = CMP.choose(rng).copied().unwrap_or("=");
            let rhs = if rng.gen_bool(0.25) {
                // Another column of the same family, now and then a type apart.
                let t2 = if rng.gen_bool(0.8) {
                    ty
                } else {
                    some_ty(rng, scope)
                };
                expr(rng, scope, t2, 0).sql
            } else {
                scope.literal(rng, ty)
            };
            format!("{} {op} {rhs}", e.sql)
        }
        4 => {
            let (a, b) = (scope.literal(rng, ty), scope.literal(rng, ty));
            let not = if rng.gen_bool(0.25) { "NOT " } else { "" };
            format!("{} {not}BETWEEN {a} AND {b}", e.sql)
        }
        5 | 6 => {
            let n = rng.gen_range(1..=5);
            let mut items: Vec<String> = (0..n).map(|_| scope.literal(rng, ty)).collect();
            if rng.gen_bool(0.1) {
                items.push("NULL".into());
            }
            let not = if rng.gen_bool(0.25) { "NOT " } else { "" };
            format!("{} {not}IN ({})", e.sql, items.join(", "))
        }
        7 | 8 => {
            let not = if rng.gen_bool(0.5) { "NOT " } else { "" };
            format!("{} IS {not}NULL", e.sql)
        }
        _ => {
            let s = expr(rng, scope, Ty::Str, leaf);
            let pat = [
                "'a%'", "'%b%'", "'A_c'", "'%'", "''", "'_'", "'%c'", "'ü%'", "'50\\%'", "'O''%'",
            ]
            .choose(rng)
            .copied()
            .unwrap_or("'a%'");
            let not = if rng.gen_bool(0.25) { "NOT " } else { "" };
            format!("{} {not}LIKE {pat}", s.sql)
        }
    }
}

/// An aggregate over the scope; its [`E::ty`] is the result's (DOUBLE where the sum of
/// doubles or strings is taken).
pub(crate) fn aggregate(rng: &mut StdRng, scope: &Scope) -> E {
    let distinct = |rng: &mut StdRng| if rng.gen_bool(0.3) { "DISTINCT " } else { "" };
    let int = |sql: String| E {
        sql,
        ty: Ty::Int,
        uns: true,
        ci: false,
    };
    match rng.gen_range(0..20) {
        0 | 1 => int("COUNT(*)".into()),
        2 | 3 => {
            let a = any_expr(rng, scope, 1);
            int(format!("COUNT({}{})", distinct(rng), a.sql))
        }
        4 => {
            let a = any_expr(rng, scope, 0);
            let b = any_expr(rng, scope, 0);
            int(format!("COUNT(DISTINCT {}, {})", a.sql, b.sql))
        }
        5..=8 => {
            let f = ["SUM", "AVG"].choose(rng).copied().unwrap_or("SUM");
            let ty = [Ty::Int, Ty::Dec, Ty::Dbl]
                .choose(rng)
                .copied()
                .unwrap_or(Ty::Int);
            let a = expr(rng, scope, ty, 1);
            let rty = if a.ty == Ty::Dbl { Ty::Dbl } else { Ty::Dec };
            E::new(format!("{f}({}{})", distinct(rng), a.sql), rty)
        }
        9..=12 => {
            let f = ["MIN", "MAX"].choose(rng).copied().unwrap_or("MIN");
            let a = any_expr(rng, scope, 1);
            E {
                sql: format!("{f}({}{})", distinct(rng), a.sql),
                ..a
            }
        }
        13 => {
            // SUM / AVG of strings and dates: MariaDB converts them to numbers.
            let f = ["SUM", "AVG"].choose(rng).copied().unwrap_or("SUM");
            let ty = [Ty::Str, Ty::Date].choose(rng).copied().unwrap_or(Ty::Str);
            let a = expr(rng, scope, ty, 0);
            E::new(format!("{f}({}{})", distinct(rng), a.sql), Ty::Dbl)
        }
        14 => {
            // An aggregate of a constant, DISTINCT or not.
            let f = ["COUNT", "SUM", "AVG", "MIN", "MAX"]
                .choose(rng)
                .copied()
                .unwrap_or("COUNT");
            let k = rng.gen_range(-3..=80);
            let ty = if f == "AVG" { Ty::Dec } else { Ty::Int };
            E::new(format!("{f}({}{k})", distinct(rng)), ty)
        }
        15 => {
            let a = expr(rng, scope, Ty::Int, 0);
            let f = ["BIT_OR", "BIT_AND", "BIT_XOR"]
                .choose(rng)
                .copied()
                .unwrap_or("BIT_OR");
            E::new(format!("{f}({})", a.sql), Ty::Int)
        }
        16 => {
            let a = expr(rng, scope, Ty::Int, 0);
            E {
                sql: format!(
                    "GROUP_CONCAT(DISTINCT {0} ORDER BY {0} SEPARATOR ',')",
                    a.sql
                ),
                ty: Ty::Str,
                uns: false,
                ci: false,
            }
        }
        17 => {
            let a = expr(rng, scope, Ty::Dec, 0);
            E::new(format!("(SUM({0}) / COUNT({0}))", a.sql), Ty::Dec)
        }
        18 => {
            let a = expr(rng, scope, Ty::Int, 0);
            E::new(format!("(MAX({0}) - MIN({0}))", a.sql), Ty::Int)
        }
        _ => {
            let a = expr(rng, scope, Ty::Int, 0);
            E::new(format!("COALESCE(SUM({}), 0) + COUNT(*)", a.sql), Ty::Dec)
        }
    }
}

/// A HAVING condition: on an aggregate, or on a grouping key.
pub(crate) fn having(rng: &mut StdRng, scope: &Scope, keys: &[E]) -> String {
    match rng.gen_range(0..5) {
        0 => format!("COUNT(*) > {}", rng.gen_range(0..=4)),
        1 => {
            let a = expr(rng, scope, Ty::Int, 0);
            format!("SUM({}) > {}", a.sql, rng.gen_range(-20..=60))
        }
        2 => {
            let a = any_expr(rng, scope, 0);
            format!("MIN({}) IS NOT NULL", a.sql)
        }
        3 if !keys.is_empty() => {
            let k = keys
                .choose(rng)
                .cloned()
                .unwrap_or_else(|| E::new("1".into(), Ty::Int));
            format!(
                "{} {} {}",
                k.sql,
                CMP[rng.gen_range(0..6)],
                scope.literal(rng, k.ty)
            )
        }
        _ => format!("COUNT(*) BETWEEN 1 AND {}", rng.gen_range(1..=8)),
    }
}
