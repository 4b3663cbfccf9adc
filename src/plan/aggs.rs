//! Which calls of a select list are aggregates, and of which kind: what a merge over
//! several nodes can recompute ([`agg_call`]) and what it cannot (the rest, window
//! functions).

use sqlparser::ast::{
    BinaryOperator, DuplicateTreatment, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArguments, Ident, Query,
};

const AGGS: &[&str] = &["COUNT", "SUM", "MIN", "MAX", "AVG"];
const OTHER_AGGS: &[&str] = &[
    "GROUP_CONCAT",
    "BIT_AND",
    "BIT_OR",
    "BIT_XOR",
    "STD",
    "STDDEV",
    "STDDEV_POP",
    "STDDEV_SAMP",
    "VARIANCE",
    "VAR_POP",
    "VAR_SAMP",
    "JSON_ARRAYAGG",
    "JSON_OBJECTAGG",
];

pub(super) fn func_name(f: &Function) -> String {
    crate::sql::table_name(&f.name).to_ascii_uppercase()
}

/// A plain `COUNT(*)`, `COUNT(x)`, `SUM(x)`, `MIN(x)`, `MAX(x)` or `AVG(x)` call: its name
/// and argument (`None` for `*`); `COUNT/SUM/AVG(DISTINCT x)` are named `COUNT DISTINCT` etc.
pub(super) fn agg_call(e: &Expr) -> Result<Option<(String, Option<Expr>)>, String> {
    let Expr::Function(f) = e else {
        return Ok(None);
    };
    let name = func_name(f);
    if f.over.is_some() {
        return Err(format!("window function {name}() over several nodes"));
    }
    if OTHER_AGGS.contains(&name.as_str()) {
        return Err(format!("{name}() over several nodes"));
    }
    if !AGGS.contains(&name.as_str()) {
        return Ok(None);
    }
    let FunctionArguments::List(list) = &f.args else {
        return Err(format!("{name}() with this argument form"));
    };
    // MIN/MAX (DISTINCT x) equal MIN/MAX (x).
    let name = if matches!(list.duplicate_treatment, Some(DuplicateTreatment::Distinct))
        && matches!(name.as_str(), "COUNT" | "SUM" | "AVG")
    {
        format!("{name} DISTINCT")
    } else {
        name
    };
    // COUNT(DISTINCT a, b, ...): its arguments as one tuple.
    if name == "COUNT DISTINCT"
        && f.filter.is_none()
        && list.clauses.is_empty()
        && list.args.len() > 1
    {
        let mut items = Vec::with_capacity(list.args.len());
        for a in &list.args {
            match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) if !contains_agg(e) => {
                    items.push(e.clone())
                }
                _ => return Err(format!("{name}() with this argument form")),
            }
        }
        return Ok(Some((name, Some(Expr::Tuple(items)))));
    }
    if f.filter.is_some() || !list.clauses.is_empty() || list.args.len() != 1 {
        return Err(format!("{name}() with this argument form"));
    }
    match &list.args[0] {
        FunctionArg::Unnamed(FunctionArgExpr::Wildcard) if name == "COUNT" => {
            Ok(Some((name, None)))
        }
        FunctionArg::Unnamed(FunctionArgExpr::Expr(a)) => {
            if contains_agg(a) {
                return Err("nested aggregate functions".into());
            }
            Ok(Some((name, Some(a.clone()))))
        }
        _ => Err(format!("{name}() with this argument form")),
    }
}

/// Does the expression call an aggregate or a window function (outside subqueries)?
pub(super) fn contains_agg(e: &Expr) -> bool {
    let mut depth = 0usize;
    let mut found = false;
    struct V<'a> {
        depth: &'a mut usize,
        found: &'a mut bool,
    }
    impl sqlparser::ast::Visitor for V<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, _q: &Query) -> std::ops::ControlFlow<()> {
            *self.depth += 1;
            std::ops::ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _q: &Query) -> std::ops::ControlFlow<()> {
            *self.depth -= 1;
            std::ops::ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &Expr) -> std::ops::ControlFlow<()> {
            if *self.depth == 0 {
                if let Expr::Function(f) = e {
                    let n = func_name(f);
                    if f.over.is_some()
                        || AGGS.contains(&n.as_str())
                        || OTHER_AGGS.contains(&n.as_str())
                    {
                        *self.found = true;
                        return std::ops::ControlFlow::Break(());
                    }
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let _ = sqlparser::ast::Visit::visit(
        e,
        &mut V {
            depth: &mut depth,
            found: &mut found,
        },
    );
    found
}

/// Does `e` divide (`/`)? MariaDB shows a quotient at its scale plus
/// `div_precision_increment` but sums it at nine digits more: partial sums rounded to the
/// shown scale would add up to another total.
pub(super) fn divides(e: &Expr) -> bool {
    let mut found = false;
    let _ = sqlparser::ast::visit_expressions(e, |x| {
        if matches!(
            x,
            Expr::BinaryOp {
                op: BinaryOperator::Divide,
                ..
            }
        ) {
            found = true;
            return std::ops::ControlFlow::Break(());
        }
        std::ops::ControlFlow::Continue(())
    });
    found
}

pub(super) fn call(name: &str, arg: Expr) -> Expr {
    Expr::Function(Function {
        name: sqlparser::ast::ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(sqlparser::ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))],
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}
