//! A SELECT whose rows come from several nodes: the SQL each node runs (with the columns the
//! merge needs added at the end) and the merge nodes ([`MergeSpec::tree`]: Project, Limit,
//! Aggregate, MergeSort) that turn the nodes' partial results into the one answer.

use mysql_common::value::Value;
use sqlparser::ast::{
    BinaryOperator, Distinct, Expr, GroupByExpr, LimitClause, OrderByKind, OrderBySort, Query,
    Select, SelectItem, SetExpr, UnaryOperator, Value as SqlValue,
};

use super::aggs::{agg_call, call, contains_agg, divides};
use super::Plan;
use crate::merge::value::{Dec, Num};
use crate::merge::{
    AggFn, Aggregate, ArithOp, CmpOp, Cond, DistinctKind, Grouping, InMemory, SortKey,
};
use crate::sql::text::{Clause, Clauses, Edits, Params, Text};
use crate::sql::{literal, Parsed};

/// The node query and the merge, or why it cannot be merged correctly.
pub struct Rewrite {
    pub node_sql: String,
    /// For a statement with bound values: the node query with the statement's `?` kept, and
    /// the index of each among its values, in order. A prepared statement's execution runs
    /// it so: the node prepares one statement for every execution, not one for each one's
    /// values.
    pub node_kept: Option<(String, Vec<usize>)>,
    pub merge: MergeSpec,
    /// The texts of a page found by its key, when the merge can be one (`super::key_page`).
    pub page: Option<(super::key_page::PageTexts, String)>,
}

impl Rewrite {
    /// The scatter's statement on each of `nodes`. A prepared statement's nodes get its `?`
    /// with their values (`params`), not the values written in: each node prepares one
    /// statement for every execution.
    pub fn targets(&self, nodes: &[usize], params: &[Value]) -> Vec<super::Target> {
        let kept = self.node_kept.as_ref().and_then(|(sql, bound)| {
            let values = bound
                .iter()
                .map(|i| params.get(*i).cloned())
                .collect::<Option<Vec<Value>>>()?;
            Some((sql, values))
        });
        let (sql, values) = kept.unwrap_or((&self.node_sql, Vec::new()));
        nodes
            .iter()
            .map(|&node| super::Target {
                node,
                sql: sql.clone(),
                params: values.clone(),
            })
            .collect()
    }
}

/// What the merge does after the nodes answered, as the rewrite finds it; [`MergeSpec::tree`]
/// makes the plan nodes of it.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct MergeSpec {
    /// Trailing columns added for the merge (sort keys, AVG's parts), removed before the
    /// client sees the rows.
    pub hidden: usize,
    /// `SELECT *`: column indexes count from the first hidden column.
    pub from_end: bool,
    pub group: Option<Grouping>,
    pub having: Option<Cond>,
    pub distinct: bool,
    pub order: Vec<SortKey>,
    pub offset: u64,
    pub limit: Option<u64>,
    /// The nodes return their groups sorted by the group keys (`order`), so groups are merged
    /// as they stream past instead of in a hash table.
    pub stream_groups: bool,
}

impl MergeSpec {
    /// Must every row be held in memory (grouping, DISTINCT), or can rows stream?
    pub fn buffers(&self) -> bool {
        (self.group.is_some() && !self.stream_groups) || self.distinct
    }

    /// The merge nodes over `source` (the leaf reading the nodes), outermost first: Project
    /// (helper columns cut), Limit, Aggregate (streamed or in memory), MergeSort (when the
    /// rows stream in order). A merge with none of these still reads through a Limit that
    /// takes all, so its rows count against the statement's cap.
    pub fn tree(self, source: Plan) -> Plan {
        let mut plan = source;
        if self.buffers() {
            plan = Plan::Aggregate {
                agg: Box::new(Aggregate::InMemory(InMemory {
                    grouping: self.group,
                    having: self.having,
                    distinct: self.distinct,
                    order: self.order,
                })),
                input: Box::new(plan),
            };
        } else {
            if !self.order.is_empty() {
                plan = Plan::MergeSort {
                    keys: self.order,
                    input: Box::new(plan),
                };
            }
            if let Some(grouping) = self.group {
                plan = Plan::Aggregate {
                    agg: Box::new(Aggregate::Streamed {
                        grouping,
                        having: self.having,
                    }),
                    input: Box::new(plan),
                };
            }
        }
        if self.offset > 0 || self.limit.is_some() || plan.input().is_none() {
            plan = Plan::Limit {
                offset: self.offset,
                limit: self.limit,
                input: Box::new(plan),
            };
        }
        if self.hidden > 0 {
            plan = Plan::Project {
                hidden: self.hidden,
                from_end: self.from_end,
                input: Box::new(plan),
            };
        }
        plan
    }
}

/// An expression that MariaDB reads as a column position in GROUP BY: a number, signed or
/// in brackets.
/// A `?` is written in as its value, so one bound to a number is like one.
fn position_like(e: &Expr, base: &Base<'_>) -> bool {
    match e {
        Expr::Value(v) => match &v.value {
            SqlValue::Number(..) => true,
            SqlValue::Placeholder(_) => base
                .parsed
                .param_index(v.span.start)
                .and_then(|i| base.params.values.get(i))
                .is_some_and(|v| {
                    matches!(
                        v,
                        Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Double(_)
                    )
                }),
            _ => false,
        },
        Expr::UnaryOp {
            op: UnaryOperator::Plus | UnaryOperator::Minus,
            expr,
        }
        | Expr::Nested(expr) => position_like(expr, base),
        _ => false,
    }
}

/// Normalised text of an expression, to find "the same expression" in two places.
fn norm(e: &Expr) -> String {
    e.to_string().replace('`', "").to_ascii_lowercase()
}

/// How a hidden column's text is written: the client's own expression, copied from its
/// text, or a call of an aggregate over such an expression (AVG's SUM and COUNT).
#[derive(Debug, Clone)]
enum Written {
    Own,
    Call(&'static str, Box<Expr>),
    /// `CAST(SUM(arg) AS DECIMAL(65,18))`: a sum at the precision MariaDB keeps inside SUM
    /// (a quotient's digits past its shown scale: `AggFn::SumExact`).
    ExactSum(Box<Expr>),
}

struct Builder<'a> {
    parsed: &'a Parsed,
    params: &'a [Value],
    /// Projection items: expression (None for a wildcard) and alias.
    items: Vec<(Option<Expr>, Option<String>)>,
    /// Columns added for the merge: the expression (to find "the same expression" again)
    /// and how its text is written.
    hidden: Vec<(Expr, Written)>,
    columns: Vec<AggFn>,
    grouping: bool,
    wildcard: bool,
    /// Beside a wildcard, the aliased items (whose positions the nodes' answer does not
    /// tell): an alias the merge compares by is its expression, a hidden column.
    aliased: Vec<(String, Expr)>,
    /// The FROM names one table: a bare column is that table's, wherever a wildcard puts it.
    one_table: bool,
    /// Arguments of DISTINCT aggregates: the nodes also group by them.
    distinct_args: Vec<Expr>,
}

impl Builder<'_> {
    fn visible(&self) -> usize {
        self.items.len()
    }

    /// The column index of an expression the client wrote in ORDER BY / GROUP BY / HAVING:
    /// a position, an alias, the same expression as a select item, or a new hidden column.
    fn column_of(&mut self, e: &Expr, positional: bool) -> Result<usize, String> {
        if positional {
            if let Some(Value::Int(n)) = literal(e, self.parsed, self.params) {
                if self.wildcard {
                    return Err("a column position together with SELECT *".into());
                }
                return usize::try_from(n - 1)
                    .ok()
                    .filter(|i| *i < self.visible())
                    .ok_or_else(|| format!("unknown column position {n}"));
            }
        }
        if let Expr::Identifier(id) = e {
            if let Some(i) = self.items.iter().position(|(_, a)| {
                a.as_deref()
                    .is_some_and(|a| a.eq_ignore_ascii_case(&id.value))
            }) {
                return Ok(i);
            }
            if let Some((_, x)) = self
                .aliased
                .iter()
                .find(|(a, _)| a.eq_ignore_ascii_case(&id.value))
            {
                return self.column_of_expr(&x.clone());
            }
            // MariaDB looks a bare name up among the wildcard's columns first (`a.*` over a
            // join: `ORDER BY id` is a.id); as a hidden column of its own the nodes would
            // look it up among every table's, ambiguous where two have it.
            if self.wildcard && !self.one_table {
                return Err("a bare column name beside a table's * over a join".into());
            }
        }
        self.column_of_expr(e)
    }

    /// The column of an expression: the same expression as a select item, or a hidden
    /// column.
    fn column_of_expr(&mut self, e: &Expr) -> Result<usize, String> {
        let n = norm(e);
        if let Some(i) = self
            .items
            .iter()
            .position(|(x, _)| x.as_ref().is_some_and(|x| norm(x) == n))
        {
            return Ok(i);
        }
        if let Some(i) = self.hidden.iter().position(|(x, _)| norm(x) == n) {
            return Ok(self.visible() + i);
        }
        let f = match agg_call(e)? {
            Some((name, arg)) => self.agg_fn(&name, arg)?,
            None if contains_agg(e) => {
                return Err("an expression over aggregates in ORDER BY / HAVING".into())
            }
            None => AggFn::First,
        };
        Ok(self.add_hidden(e.clone(), Written::Own, f))
    }

    fn add_hidden(&mut self, e: Expr, written: Written, f: AggFn) -> usize {
        self.hidden.push((e, written));
        self.columns.push(f);
        self.visible() + self.hidden.len() - 1
    }

    fn agg_fn(&mut self, name: &str, arg: Option<Expr>) -> Result<AggFn, String> {
        Ok(match name {
            "COUNT" => AggFn::Count,
            "SUM" => match arg {
                Some(arg) if divides(&arg) => {
                    let exact = self.add_hidden(
                        call("SUM", arg.clone()),
                        Written::ExactSum(Box::new(arg)),
                        AggFn::Sum,
                    );
                    AggFn::SumExact { exact }
                }
                _ => AggFn::Sum,
            },
            "MIN" => AggFn::Min,
            "MAX" => AggFn::Max,
            "COUNT DISTINCT" | "SUM DISTINCT" | "AVG DISTINCT" => {
                let arg = arg.ok_or("DISTINCT *")?;
                let kind = match name {
                    "COUNT DISTINCT" => DistinctKind::Count,
                    "SUM DISTINCT" => DistinctKind::Sum,
                    _ => DistinctKind::Avg,
                };
                let parts = match arg {
                    Expr::Tuple(items) if kind == DistinctKind::Count => items,
                    other => vec![other],
                };
                let mut cols = Vec::with_capacity(parts.len());
                for part in parts {
                    let n = norm(&part);
                    let at = match self.hidden.iter().position(|(x, _)| norm(x) == n) {
                        Some(i) => self.visible() + i,
                        None => self.add_hidden(part.clone(), Written::Own, AggFn::First),
                    };
                    if !self.distinct_args.iter().any(|x| norm(x) == n) {
                        self.distinct_args.push(part);
                    }
                    cols.push(at);
                }
                let arg = cols.remove(0);
                AggFn::Distinct {
                    arg,
                    also: cols,
                    kind,
                }
            }
            "AVG" => {
                let arg = arg.ok_or("AVG(*)")?;
                let written = if divides(&arg) {
                    Written::ExactSum(Box::new(arg.clone()))
                } else {
                    Written::Call("SUM", Box::new(arg.clone()))
                };
                let sum = self.add_hidden(call("SUM", arg.clone()), written, AggFn::Sum);
                let count = self.add_hidden(
                    call("COUNT", arg.clone()),
                    Written::Call("COUNT", Box::new(arg)),
                    AggFn::Count,
                );
                AggFn::Avg { sum, count }
            }
            other => return Err(format!("{other}() over several nodes")),
        })
    }

    /// An item's expression over aggregates: like HAVING, but the item itself must not be
    /// matched as a column (it is the column being computed).
    fn cond_over_aggs(&mut self, e: &Expr) -> Result<Cond, String> {
        match e {
            Expr::Nested(x) => self.cond_over_aggs(x),
            Expr::BinaryOp { left, op, right }
                if matches!(
                    op,
                    BinaryOperator::Plus
                        | BinaryOperator::Minus
                        | BinaryOperator::Multiply
                        | BinaryOperator::Divide
                ) =>
            {
                let (l, r) = (Box::new(self.cond(left)?), Box::new(self.cond(right)?));
                let op = match op {
                    BinaryOperator::Plus => ArithOp::Add,
                    BinaryOperator::Minus => ArithOp::Sub,
                    BinaryOperator::Multiply => ArithOp::Mul,
                    _ => ArithOp::Div,
                };
                Ok(Cond::Arith(op, l, r))
            }
            _ => Err("this expression over aggregate functions over several nodes".into()),
        }
    }

    fn cond(&mut self, e: &Expr) -> Result<Cond, String> {
        Ok(match e {
            Expr::Nested(x) => self.cond(x)?,
            Expr::BinaryOp { left, op, right } => {
                let (l, r) = (Box::new(self.cond(left)?), Box::new(self.cond(right)?));
                match op {
                    BinaryOperator::And => Cond::And(l, r),
                    BinaryOperator::Or => Cond::Or(l, r),
                    BinaryOperator::Eq => Cond::Cmp(CmpOp::Eq, l, r),
                    BinaryOperator::NotEq => Cond::Cmp(CmpOp::NotEq, l, r),
                    BinaryOperator::Lt => Cond::Cmp(CmpOp::Lt, l, r),
                    BinaryOperator::LtEq => Cond::Cmp(CmpOp::LtEq, l, r),
                    BinaryOperator::Gt => Cond::Cmp(CmpOp::Gt, l, r),
                    BinaryOperator::GtEq => Cond::Cmp(CmpOp::GtEq, l, r),
                    BinaryOperator::Plus => Cond::Arith(ArithOp::Add, l, r),
                    BinaryOperator::Minus => Cond::Arith(ArithOp::Sub, l, r),
                    BinaryOperator::Multiply => Cond::Arith(ArithOp::Mul, l, r),
                    BinaryOperator::Divide => Cond::Arith(ArithOp::Div, l, r),
                    other => return Err(format!("operator {other} in HAVING over several nodes")),
                }
            }
            Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr,
            } => Cond::Not(Box::new(self.cond(expr)?)),
            Expr::IsNull(x) => Cond::IsNull(Box::new(self.cond(x)?), false),
            Expr::IsNotNull(x) => Cond::IsNull(Box::new(self.cond(x)?), true),
            other => match literal(other, self.parsed, self.params) {
                Some(Value::NULL) => Cond::Null,
                Some(Value::Int(i)) => Cond::Num(Num::Int(i128::from(i))),
                Some(Value::UInt(u)) => Cond::Num(Num::Int(i128::from(u))),
                Some(Value::Double(d)) => Cond::Num(Num::Float(d)),
                Some(Value::Bytes(b)) => match other {
                    Expr::Value(v) if matches!(v.value, SqlValue::Number(..)) => {
                        let s = String::from_utf8_lossy(&b);
                        Dec::parse(&s)
                            .map(|d| Cond::Num(Num::Dec(d)))
                            .ok_or("a number in HAVING")?
                    }
                    _ => Cond::Str(b),
                },
                Some(_) => return Err("a literal of this kind in HAVING".into()),
                None => Cond::Col(self.column_of(other, false)?),
            },
        })
    }
}

/// A column HAVING names outside its aggregates and subqueries that MariaDB cannot resolve:
/// it looks among the select list (aliases and bare columns) and the GROUP BY's bare columns
/// only (`GROUP BY (id - 5) HAVING (id - 5) > 0` is 1054 Unknown column 'id' in 'HAVING').
/// The merge would resolve it by adding the column to the nodes' select list, answering
/// what MariaDB rejects.
fn unresolved_in_having(
    h: &Expr,
    items: &[(Option<Expr>, Option<String>)],
    group: &[Expr],
) -> Option<String> {
    use sqlparser::ast::Spanned;
    let bare = |e: &Expr| match e {
        Expr::Identifier(i) => Some(i.value.clone()),
        Expr::CompoundIdentifier(p) => p.last().map(|i| i.value.clone()),
        _ => None,
    };
    let known = |name: &str| {
        items.iter().any(|(e, alias)| {
            alias
                .as_deref()
                .is_some_and(|a| a.eq_ignore_ascii_case(name))
                || e.as_ref()
                    .and_then(bare)
                    .is_some_and(|c| c.eq_ignore_ascii_case(name))
        }) || group
            .iter()
            .filter_map(bare)
            .any(|c| c.eq_ignore_ascii_case(name))
    };
    // Where aggregates and subqueries are (their columns are the nodes' to resolve).
    let mut inside: Vec<(u64, u64, u64, u64)> = Vec::new();
    let key =
        |s: sqlparser::tokenizer::Span| (s.start.line, s.start.column, s.end.line, s.end.column);
    let _ = sqlparser::ast::visit_expressions(h, |e| {
        let opaque = matches!(e, Expr::Subquery(_) | Expr::Exists { .. })
            || matches!(agg_call(e), Ok(Some(_)));
        if opaque {
            inside.push(key(e.span()));
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    let within = |s: sqlparser::tokenizer::Span| {
        let (l, c, _, _) = key(s);
        inside
            .iter()
            .any(|&(l0, c0, l1, c1)| (l0, c0) <= (l, c) && (l, c) < (l1, c1))
    };
    let mut found = None;
    let _ = sqlparser::ast::visit_expressions(h, |e| {
        if let Some(name) = bare(e) {
            if !within(e.span()) && !known(&name) {
                found = Some(name);
                return std::ops::ControlFlow::Break(());
            }
        }
        std::ops::ControlFlow::Continue(())
    });
    found
}

fn count_value(e: &Expr, parsed: &Parsed, params: &[Value]) -> Result<u64, String> {
    match literal(e, parsed, params) {
        Some(Value::Int(i)) if i >= 0 => Ok(i as u64),
        Some(Value::UInt(u)) => Ok(u),
        Some(Value::Bytes(b)) => String::from_utf8_lossy(&b)
            .trim()
            .parse()
            .map_err(|_| "LIMIT takes integers".to_string()),
        _ => Err("LIMIT takes integers".into()),
    }
}

/// [`rewrite`] of the client's own statement text `sql`, as its tree `q` reads it.
pub fn rewrite_text(
    q: &Query,
    sql: &str,
    parsed: &Parsed,
    params: Params<'_>,
) -> Result<Rewrite, String> {
    let SetExpr::Select(s) = q.body.as_ref() else {
        return Err("this query form over several nodes".into());
    };
    let text = Text::new(sql, parsed.mode)?;
    let base = Base::new(&text, s, parsed, params)?;
    rewrite(q, &base)
}

/// Plans the merge of a SELECT over several nodes; `Err` says why it cannot be merged.
pub fn rewrite(q: &Query, base: &Base<'_>) -> Result<Rewrite, String> {
    let (parsed, params) = (base.parsed, base.params.values);
    let SetExpr::Select(s) = q.body.as_ref() else {
        return Err(match q.body.as_ref() {
            SetExpr::SetOperation { .. } => "UNION / INTERSECT / EXCEPT over several nodes".into(),
            _ => "this query form over several nodes".into(),
        });
    };
    if q.with.is_some() || q.fetch.is_some() || s.into.is_some() {
        return Err("WITH / FETCH / SELECT INTO over several nodes".into());
    }
    if s.select_modifiers
        .as_ref()
        .is_some_and(|m| m.sql_calc_found_rows)
    {
        return Err("SQL_CALC_FOUND_ROWS over several nodes".into());
    }
    let distinct = match &s.distinct {
        None | Some(Distinct::All) => false,
        Some(Distinct::Distinct) => true,
        Some(_) => return Err("DISTINCT ON over several nodes".into()),
    };
    let group_exprs: Vec<Expr> = match &s.group_by {
        GroupByExpr::Expressions(e, m) if m.is_empty() => e.clone(),
        _ => return Err("GROUP BY ALL / WITH ROLLUP over several nodes".into()),
    };

    let mut b = Builder {
        parsed,
        params,
        items: Vec::new(),
        hidden: Vec::new(),
        columns: Vec::new(),
        grouping: false,
        wildcard: false,
        aliased: Vec::new(),
        one_table: s.from.len() == 1 && s.from.iter().all(|t| t.joins.is_empty()),
        distinct_args: Vec::new(),
    };
    // Select items: which are aggregates.
    let mut item_aggs: Vec<Option<(String, Option<Expr>)>> = Vec::new();
    for item in &s.projection {
        match item {
            SelectItem::UnnamedExpr(e) => {
                b.items.push((Some(e.clone()), None));
                item_aggs.push(agg_call(e)?);
            }
            SelectItem::ExprWithAlias { expr, alias } => {
                b.items
                    .push((Some(expr.clone()), Some(alias.value.clone())));
                item_aggs.push(agg_call(expr)?);
            }
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                b.wildcard = true;
                b.items.push((None, None));
                item_aggs.push(None);
            }
            _ => return Err("this select item form over several nodes".into()),
        }
    }
    // An item over aggregates (`100 * SUM(a) / SUM(b)`) groups too, with no aggregate of
    // its own in the list: each node's rows would be appended otherwise.
    b.grouping = !group_exprs.is_empty()
        || item_aggs.iter().any(Option::is_some)
        || b.items
            .iter()
            .any(|(e, _)| e.as_ref().is_some_and(contains_agg));
    if b.wildcard && (b.grouping || s.having.is_some()) {
        return Err("SELECT * with GROUP BY or aggregates over several nodes".into());
    }
    if b.wildcard {
        // Wildcards (`*`, `o.*, i.*`) and the items beside them: the nodes' answer tells how
        // many columns the wildcards expand to, not where an item stands. Hidden columns are
        // counted from the end, and what the merge compares is one of them (an alias, its
        // item's expression); a position counts in the expanded list.
        b.aliased = b
            .items
            .iter()
            .filter_map(|(e, a)| Some((a.clone()?, e.clone()?)))
            .collect();
        b.items.clear();
    }
    b.columns = vec![AggFn::First; b.items.len()];
    for (i, a) in item_aggs.into_iter().enumerate() {
        if let Some((name, arg)) = a {
            b.columns[i] = b.agg_fn(&name, arg)?;
        }
    }
    // Expressions over aggregates: computed after the merge from their aggregates.
    for i in 0..b.items.len() {
        let expr = b.items[i].0.clone();
        if let Some(e) = expr.filter(|e| agg_call(e).ok().flatten().is_none() && contains_agg(e)) {
            b.columns[i] = AggFn::Expr(b.cond_over_aggs(&e)?);
        }
    }
    let mut keys = Vec::new();
    for g in &group_exprs {
        keys.push(b.column_of(g, true)?);
    }
    if let Some(h) = &s.having {
        if let Some(name) = unresolved_in_having(h, &b.items, &group_exprs) {
            // Gathered instead, the statement as written: its node gives MariaDB's verdict.
            return Err(format!(
                "the column `{name}` in HAVING, neither selected nor grouped,"
            ));
        }
    }
    let having = match &s.having {
        Some(h) if b.grouping => Some(b.cond(h)?),
        Some(_) => return Err("HAVING without GROUP BY over several nodes".into()),
        None => None,
    };
    let mut order = Vec::new();
    if let Some(ob) = &q.order_by {
        let OrderByKind::Expressions(exprs) = &ob.kind else {
            return Err("ORDER BY ALL over several nodes".into());
        };
        if ob.interpolate.is_some() {
            return Err("ORDER BY ... INTERPOLATE".into());
        }
        for o in exprs {
            if o.options.nulls_first.is_some() || o.with_fill.is_some() {
                return Err("NULLS FIRST / LAST or WITH FILL".into());
            }
            let desc = match o.options.sort {
                None | Some(OrderBySort::Asc) => false,
                Some(OrderBySort::Desc) => true,
                Some(_) => return Err("this ORDER BY form".into()),
            };
            // A position in the expanded `SELECT *` list: only the nodes' answer knows its
            // width, but position n is column n - 1 of their rows.
            if b.wildcard {
                if let Some(Value::Int(n)) = literal(&o.expr, parsed, params) {
                    let index = usize::try_from(n - 1)
                        .map_err(|_| format!("unknown column position {n}"))?;
                    order.push(SortKey {
                        index,
                        desc,
                        fixed: true,
                    });
                    continue;
                }
            }
            let index = b.column_of(&o.expr, true)?;
            order.push(SortKey {
                index,
                desc,
                fixed: false,
            });
        }
    }
    let (offset, limit) = match &q.limit_clause {
        None => (0, None),
        Some(LimitClause::LimitOffset {
            limit,
            offset,
            limit_by,
        }) => {
            if !limit_by.is_empty() {
                return Err("LIMIT BY".into());
            }
            let off = match offset {
                Some(o) => count_value(&o.value, parsed, params)?,
                None => 0,
            };
            let lim = match limit {
                Some(l) => Some(count_value(l, parsed, params)?),
                None => None,
            };
            (off, lim)
        }
        Some(LimitClause::OffsetCommaLimit { offset, limit }) => (
            count_value(offset, parsed, params)?,
            Some(count_value(limit, parsed, params)?),
        ),
    };

    // Groups stream when the nodes can return them in the order the client wants them in
    // (MariaDB sorts GROUP BY results by the keys anyway): no hash table, no cap.
    let stream_groups = !keys.is_empty()
        && b.distinct_args.is_empty()
        && !distinct
        && (order.is_empty() || order.iter().map(|k| k.index).eq(keys.iter().copied()));
    if stream_groups && order.is_empty() {
        order = keys.iter().map(|&i| SortKey::ascending(i)).collect();
    }
    let merge = MergeSpec {
        hidden: b.hidden.len(),
        stream_groups,
        from_end: b.wildcard,
        group: b.grouping.then(|| Grouping {
            keys: keys.clone(),
            columns: b.columns.clone(),
        }),
        having,
        distinct,
        order,
        offset,
        limit,
    };
    base.agrees(s)?;
    let node_sql = node_query(base, &b, &merge, false)?.0;
    let node_kept = if base.params.values.is_empty() {
        None
    } else {
        Some(node_query(base, &b, &merge, true)?)
    };
    let page = match q.order_by.as_ref().map(|o| &o.kind) {
        Some(OrderByKind::Expressions(items)) if items.len() == 1 => {
            super::key_page::texts(base, &merge, &items[0].expr, |x, m| {
                node_query(x, &b, m, false).map(|(sql, _)| sql)
            })
        }
        _ => None,
    };
    Ok(Rewrite {
        node_sql,
        node_kept,
        merge,
        page,
    })
}

/// The client's text of a SELECT over several nodes, where its clauses are, and the edits
/// made to it before the merge's (a time tier's predicate in its WHERE).
pub struct Base<'a> {
    pub text: &'a Text<'a>,
    pub clauses: Clauses,
    pub edits: Edits,
    pub parsed: &'a Parsed,
    pub params: Params<'a>,
}

impl<'a> Base<'a> {
    /// The text of the SELECT `s` of the statement `text` holds.
    pub fn new(
        text: &'a Text<'a>,
        s: &Select,
        parsed: &'a Parsed,
        params: Params<'a>,
    ) -> Result<Self, String> {
        let at = text
            .offset(s.select_token.0.span.start)
            .ok_or("the SELECT's place in the text")?;
        let clauses = text.clauses(at)?;
        if clauses.set_operation {
            return Err("UNION / INTERSECT / EXCEPT over several nodes".into());
        }
        Ok(Base {
            text,
            clauses,
            edits: Edits::new(),
            parsed,
            params,
        })
    }

    /// Do the clauses found in the text match the tree's? A text read otherwise than the
    /// tree was would be edited in the wrong places.
    fn agrees(&self, s: &Select) -> Result<(), String> {
        let c = &self.clauses;
        let groups = matches!(&s.group_by, GroupByExpr::Expressions(e, _) if !e.is_empty());
        if c.where_.is_some() != s.selection.is_some()
            || c.group_by.is_some() != groups
            || c.having.is_some() != s.having.is_some()
            || c.from.is_some() == s.from.is_empty()
        {
            return Err("a statement whose clauses shardproxy cannot place in its text".into());
        }
        Ok(())
    }

    /// The client's text of `e`, its `?` written as their values: its extent in the text,
    /// or the GROUP BY / ORDER BY item it is.
    fn own(&self, e: &Expr) -> Result<String, String> {
        let (a, b) = self.own_range(e)?;
        self.text.render(a, b, self.params)
    }

    /// [`Base::own`] with its `?` kept, their indices among the bound values noted in
    /// `bound` (`None`: written as their values).
    fn own_noting(&self, e: &Expr, bound: Option<&mut Vec<usize>>) -> Result<String, String> {
        match bound {
            Some(bound) => {
                let (a, b) = self.own_range(e)?;
                Ok(self.text.render_kept(a, b, bound))
            }
            None => self.own(e),
        }
    }

    fn own_range(&self, e: &Expr) -> Result<(usize, usize), String> {
        let t = self.text;
        let range = t.extent(e).or_else(|| {
            [self.clauses.group_by, self.clauses.order_by]
                .into_iter()
                .flatten()
                .flat_map(|c| t.list_items(c.body))
                .map(|(a, b)| t.without_direction(a, b))
                .find(|(a, b)| t.parses_as(&t.sql[*a..*b], e))
        });
        range.ok_or_else(|| format!("`{e}`, whose text shardproxy cannot place"))
    }
}

/// The SQL each node runs: the client's SELECT text with the hidden columns appended,
/// HAVING made `TRUE OR (...)` when groups are merged (removed if it has a subquery), the DISTINCT aggregates' arguments grouped, and
/// ORDER BY / LIMIT as the merge needs them (LIMIT covering offset + count, no offset);
/// every other byte as the client sent it, the `?` written as their values, or (`keep`)
/// kept, with the index of each among the bound values.
fn node_query(
    base: &Base<'_>,
    b: &Builder<'_>,
    m: &MergeSpec,
    keep: bool,
) -> Result<(String, Vec<usize>), String> {
    let c = &base.clauses;
    let mut e = base.edits.clone();
    let mut add = String::new();
    let mut bound = Vec::new();
    let own = |x: &Expr, bound: &mut Vec<usize>| base.own_noting(x, keep.then_some(bound));
    for (i, (expr, written)) in b.hidden.iter().enumerate() {
        add.push_str(", ");
        match written {
            Written::Own => add.push_str(&own(expr, &mut bound)?),
            Written::Call(f, arg) => {
                add.push_str(f);
                add.push('(');
                add.push_str(&own(arg, &mut bound)?);
                add.push(')');
            }
            Written::ExactSum(arg) => {
                add.push_str("CAST(SUM(");
                add.push_str(&own(arg, &mut bound)?);
                add.push_str(") AS DECIMAL(65,18))");
            }
        }
        add.push_str(&format!(" AS __sp_h{i}"));
    }
    if !add.is_empty() {
        e.insert_kept(c.projection.1, add, std::mem::take(&mut bound));
    }
    if m.group.is_some() {
        if let Some(h) = c.having {
            let (from, to) = h.body;
            let sql = base.text.sql;
            let subquery = base
                .text
                .toks
                .iter()
                .any(|t| t.start >= from && t.end <= to && t.is(sql, "SELECT"));
            if subquery {
                let (a, z) = c.removal(h);
                e.replace(a, z, "");
            } else {
                // Kept for the node to resolve its names (MariaDB rejects a column neither
                // grouped nor selected, 1054), never to filter: the groups are whole only
                // after the merge. `TRUE OR` keeps every group and evaluates nothing.
                e.insert(from, "TRUE OR (");
                e.insert(to, ")");
            }
        }
    }
    if !b.distinct_args.is_empty() {
        let mut parts = Vec::with_capacity(b.distinct_args.len());
        for d in &b.distinct_args {
            let own = own(d, &mut bound)?;
            // A number written alone (`76`, `(76)`, `- 8`) would group by that column
            // position; `+ 0` makes it the constant it is in the aggregate.
            parts.push(if position_like(d, base) {
                format!("{own} + 0")
            } else {
                own
            });
        }
        let list = parts.join(", ");
        let args = std::mem::take(&mut bound);
        match c.group_by {
            Some(g) => e.insert_kept(g.body.1, format!(", {list}"), args),
            None => e.insert_kept(
                c.group_at(),
                c.spaced(c.group_at(), &format!("GROUP BY {list}")),
                args,
            ),
        }
    }
    let remove = |e: &mut Edits, clause: Option<Clause>| {
        if let Some(x) = clause {
            let (a, z) = c.removal(x);
            e.replace(a, z, "");
        }
    };
    if m.buffers() {
        remove(&mut e, c.order_by);
        remove(&mut e, c.limit);
    } else if m.stream_groups {
        // Every node sorts its groups by the keys, by position in its select list.
        let keys: Vec<String> = m
            .order
            .iter()
            .map(|k| format!("{} {}", k.index + 1, if k.desc { "DESC" } else { "ASC" }))
            .collect();
        let order = format!("ORDER BY {}", keys.join(", "));
        match c.order_by {
            Some(o) => e.replace(o.kw, o.body.1, order),
            None => e.insert(c.order_at(), c.spaced(c.order_at(), &order)),
        }
        remove(&mut e, c.limit);
    } else if let Some(l) = m.limit {
        let n = m.offset.checked_add(l).ok_or("LIMIT overflows")?;
        let limit = format!("LIMIT {n}");
        match c.limit {
            Some(x) => e.replace(x.kw, x.body.1, limit),
            None => e.insert(c.limit_at(), c.spaced(c.limit_at(), &limit)),
        }
    } else {
        remove(&mut e, c.limit);
    }
    if keep {
        e.apply_kept(base.text)
    } else {
        Ok((e.apply(base.text, base.params)?, Vec::new()))
    }
}
