//! Shard-key values from a WHERE clause: `col = v`, `col IN (...)`, and `AND` / `OR` of them.

use mysql_common::value::Value;
use sqlparser::ast::{BinaryOperator, Expr, InTarget};

use super::{literal, Parsed};
use crate::value::text_form;

/// Which column is the shard key, and by which names its table may be qualified.
#[derive(Debug, Clone)]
pub struct KeyColumn {
    /// Lower-cased column name.
    pub column: String,
    /// Lower-cased names the table goes by in this query: its name and its alias.
    pub qualifiers: Vec<String>,
}

impl KeyColumn {
    /// Is `expr` a reference to this column (`col`, `t.col`, `schema.t.col`)?
    #[recursive::recursive]
    pub fn matches(&self, expr: &Expr) -> bool {
        match expr {
            Expr::Identifier(id) => id.value.eq_ignore_ascii_case(&self.column),
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                let col = &parts[parts.len() - 1];
                let table = &parts[parts.len() - 2];
                col.value.eq_ignore_ascii_case(&self.column)
                    && self
                        .qualifiers
                        .iter()
                        .any(|q| table.value.eq_ignore_ascii_case(q))
            }
            Expr::Nested(inner) => self.matches(inner),
            _ => false,
        }
    }
}

/// The key values a WHERE clause pins the column to; `None` when it does not pin it (the
/// statement may touch any row). An empty list means no row can match (`a = 1 AND a = 2`).
pub fn where_keys(
    selection: Option<&Expr>,
    key: &KeyColumn,
    parsed: &Parsed,
    params: &[Value],
) -> Option<Vec<Value>> {
    selection.and_then(|e| expr_keys(e, key, parsed, params))
}

// Expressions can nest as deep as the client writes them (a chain of 100k ANDs is one
// left-deep tree): recursion grows the stack instead of overflowing it.
#[recursive::recursive]
fn expr_keys(
    expr: &Expr,
    key: &KeyColumn,
    parsed: &Parsed,
    params: &[Value],
) -> Option<Vec<Value>> {
    match expr {
        Expr::Nested(inner) => expr_keys(inner, key, parsed, params),
        Expr::BinaryOp { left, op, right } => match op {
            BinaryOperator::Eq => {
                if key.matches(left) {
                    literal(right, parsed, params).map(|v| vec![v])
                } else if key.matches(right) {
                    literal(left, parsed, params).map(|v| vec![v])
                } else {
                    None
                }
            }
            BinaryOperator::And => {
                let l = expr_keys(left, key, parsed, params);
                let r = expr_keys(right, key, parsed, params);
                match (l, r) {
                    (Some(a), Some(b)) => Some(intersect(a, b)),
                    (Some(a), None) | (None, Some(a)) => Some(a),
                    (None, None) => None,
                }
            }
            BinaryOperator::Or => {
                let mut l = expr_keys(left, key, parsed, params)?;
                let r = expr_keys(right, key, parsed, params)?;
                l.extend(r);
                Some(dedup(l))
            }
            _ => None,
        },
        Expr::In {
            expr,
            target: InTarget::List(list),
            negated: false,
            ..
        } if key.matches(expr) => {
            let values: Option<Vec<Value>> =
                list.iter().map(|e| literal(e, parsed, params)).collect();
            values.map(dedup)
        }
        _ => None,
    }
}

fn same(a: &Value, b: &Value) -> bool {
    text_form(a) == text_form(b)
}

fn intersect(a: Vec<Value>, b: Vec<Value>) -> Vec<Value> {
    a.into_iter()
        .filter(|x| b.iter().any(|y| same(x, y)))
        .collect()
}

fn dedup(values: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(values.len());
    for v in values {
        if !out.iter().any(|o| same(o, &v)) {
            out.push(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::parse;
    use sqlparser::ast::{SetExpr, Statement};

    fn keys(sql: &str, params: &[Value]) -> Option<Vec<Value>> {
        let p = parse(sql).unwrap();
        let Statement::Query(q) = &p.stmt else {
            panic!("not a query")
        };
        let SetExpr::Select(s) = q.body.as_ref() else {
            panic!("not a select")
        };
        let key = KeyColumn {
            column: "user_id".into(),
            qualifiers: vec!["t_order".into(), "o".into()],
        };
        where_keys(s.selection.as_ref(), &key, &p, params)
    }

    fn ints(v: &[i64]) -> Option<Vec<Value>> {
        Some(v.iter().map(|i| Value::Int(*i)).collect())
    }

    #[test]
    fn equality_and_in() {
        assert_eq!(
            keys("SELECT * FROM t_order WHERE user_id = 7", &[]),
            ints(&[7])
        );
        assert_eq!(
            keys("SELECT * FROM t_order WHERE 7 = USER_ID", &[]),
            ints(&[7])
        );
        assert_eq!(
            keys("SELECT * FROM t_order o WHERE o.user_id IN (1, 2, 2)", &[]),
            ints(&[1, 2])
        );
        assert_eq!(
            keys("SELECT * FROM t_order WHERE user_id = 'x'", &[]),
            Some(vec![Value::Bytes(b"x".to_vec())])
        );
    }

    #[test]
    fn and_intersects_or_unions() {
        assert_eq!(
            keys(
                "SELECT * FROM t_order WHERE user_id = 1 AND status = 'a'",
                &[]
            ),
            ints(&[1])
        );
        assert_eq!(
            keys(
                "SELECT * FROM t_order WHERE (user_id = 1 OR user_id = 2) AND x > 3",
                &[]
            ),
            ints(&[1, 2])
        );
        assert_eq!(
            keys(
                "SELECT * FROM t_order WHERE user_id IN (1,2,3) AND user_id IN (2,3,4)",
                &[]
            ),
            ints(&[2, 3])
        );
        assert_eq!(
            keys(
                "SELECT * FROM t_order WHERE user_id = 1 AND user_id = 2",
                &[]
            ),
            Some(vec![])
        );
        assert_eq!(
            keys("SELECT * FROM t_order WHERE user_id = 1 OR x = 2", &[]),
            None
        );
    }

    #[test]
    fn unusable_conditions_pin_nothing() {
        assert_eq!(keys("SELECT * FROM t_order", &[]), None);
        assert_eq!(keys("SELECT * FROM t_order WHERE user_id > 5", &[]), None);
        assert_eq!(
            keys("SELECT * FROM t_order WHERE user_id NOT IN (1)", &[]),
            None
        );
        assert_eq!(
            keys("SELECT * FROM t_order WHERE user_id = x + 1", &[]),
            None
        );
        assert_eq!(
            keys("SELECT * FROM t_order WHERE other.user_id = 1", &[]),
            None
        );
        assert_eq!(
            keys("SELECT * FROM t_order WHERE user_id IN (1, y)", &[]),
            None
        );
    }

    #[test]
    fn placeholders_take_bound_values() {
        assert_eq!(
            keys(
                "SELECT * FROM t_order WHERE status = ? AND user_id IN (?, ?)",
                &[Value::Bytes(b"s".to_vec()), Value::Int(5), Value::Int(6)]
            ),
            ints(&[5, 6])
        );
    }
}
