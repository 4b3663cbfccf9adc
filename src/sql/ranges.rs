//! The set of values a WHERE clause allows a column to take, as sorted intervals: `col = v`,
//! `IN`, `BETWEEN`, `<`, `<=`, `>`, `>=`, `<=>`, combined with `AND` / `OR`.
//!
//! Extraction is conservative: the set may be wider than the rows the clause really matches,
//! never narrower (routing by a too-narrow set would lose rows). Anything not understood
//! allows every value.

use std::cmp::Ordering;
use std::ops::Bound::{self, Excluded, Included, Unbounded};

use mysql_common::value::Value;
use sqlparser::ast::{BinaryOperator, Expr, InTarget};

use super::keys::KeyColumn;
use super::{literal, Parsed};

/// A set of keys: sorted, disjoint intervals, merged where they overlap or touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranges<K> {
    /// Each part is non-empty; parts are sorted and no two of them overlap or touch.
    parts: Vec<(Bound<K>, Bound<K>)>,
}

impl<K: Ord + Clone> Ranges<K> {
    /// Every key.
    pub fn all() -> Self {
        Ranges {
            parts: vec![(Unbounded, Unbounded)],
        }
    }

    /// No key.
    pub fn empty() -> Self {
        Ranges { parts: Vec::new() }
    }

    /// Exactly one key.
    pub fn point(k: K) -> Self {
        Ranges {
            parts: vec![(Included(k.clone()), Included(k))],
        }
    }

    /// The keys between two bounds; empty when no key lies between them (`lo > hi`, or
    /// `lo == hi` with either end excluded).
    pub fn from_bounds(lo: Bound<K>, hi: Bound<K>) -> Self {
        if nonempty(lo.as_ref(), hi.as_ref()) {
            Ranges {
                parts: vec![(lo, hi)],
            }
        } else {
            Ranges::empty()
        }
    }

    /// The union of any intervals (empty ones are dropped).
    fn from_parts(mut parts: Vec<(Bound<K>, Bound<K>)>) -> Self {
        parts.retain(|(lo, hi)| nonempty(lo.as_ref(), hi.as_ref()));
        parts.sort_by(|a, b| cmp_lo(a.0.as_ref(), b.0.as_ref()));
        let mut out: Vec<(Bound<K>, Bound<K>)> = Vec::with_capacity(parts.len());
        for (lo, hi) in parts {
            if let Some(last) = out.last_mut() {
                if touches(last.1.as_ref(), lo.as_ref()) {
                    if cmp_hi(hi.as_ref(), last.1.as_ref()) == Ordering::Greater {
                        last.1 = hi;
                    }
                    continue;
                }
            }
            out.push((lo, hi));
        }
        Ranges { parts: out }
    }

    pub fn is_all(&self) -> bool {
        matches!(self.parts.as_slice(), [(Unbounded, Unbounded)])
    }

    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Keys in both sets.
    pub fn intersect(&self, o: &Self) -> Self {
        if self.is_all() {
            return o.clone();
        }
        if o.is_all() {
            return self.clone();
        }
        let (a, b) = (&self.parts, &o.parts);
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        while let (Some((alo, ahi)), Some((blo, bhi))) = (a.get(i), b.get(j)) {
            let lo = if cmp_lo(alo.as_ref(), blo.as_ref()) == Ordering::Greater {
                alo
            } else {
                blo
            };
            let hi_order = cmp_hi(ahi.as_ref(), bhi.as_ref());
            let hi = if hi_order == Ordering::Less { ahi } else { bhi };
            if nonempty(lo.as_ref(), hi.as_ref()) {
                out.push((lo.clone(), hi.clone()));
            }
            // The part that ends first cannot meet any later part of the other set.
            match hi_order {
                Ordering::Less => i += 1,
                Ordering::Greater => j += 1,
                Ordering::Equal => {
                    i += 1;
                    j += 1;
                }
            }
        }
        // Parts of a merged set do not touch, so neither do their subsets: `out` is merged.
        Ranges { parts: out }
    }

    /// Keys in either set.
    pub fn union(&self, o: &Self) -> Self {
        if self.is_all() || o.is_all() {
            return Ranges::all();
        }
        let mut parts = Vec::with_capacity(self.parts.len() + o.parts.len());
        parts.extend(self.parts.iter().cloned());
        parts.extend(o.parts.iter().cloned());
        Ranges::from_parts(parts)
    }

    /// Does the set hold any key between `lo` and `hi` (each end inclusive or exclusive as
    /// given)?
    pub fn overlaps(&self, lo: Bound<&K>, hi: Bound<&K>) -> bool {
        if !nonempty(lo, hi) {
            return false;
        }
        // Parts are sorted by their upper ends too: skip those that end before `lo`.
        let first = self
            .parts
            .partition_point(|(_, part_hi)| !nonempty(lo, part_hi.as_ref()));
        self.parts.get(first).is_some_and(|(part_lo, part_hi)| {
            let l = if cmp_lo(part_lo.as_ref(), lo) == Ordering::Greater {
                part_lo.as_ref()
            } else {
                lo
            };
            let h = if cmp_hi(part_hi.as_ref(), hi) == Ordering::Less {
                part_hi.as_ref()
            } else {
                hi
            };
            nonempty(l, h)
        })
    }

    /// The intervals, sorted, disjoint, none empty.
    pub fn parts(&self) -> &[(Bound<K>, Bound<K>)] {
        &self.parts
    }

    /// Every part a single point: the points (for equality routing), in order. The empty set
    /// gives `Some` of no points.
    pub fn points(&self) -> Option<Vec<K>> {
        self.parts
            .iter()
            .map(|(lo, hi)| match (lo, hi) {
                (Included(a), Included(b)) if a == b => Some(a.clone()),
                _ => None,
            })
            .collect()
    }
}

/// Orders lower ends: unbounded first, `[x` before `(x`.
fn cmp_lo<K: Ord>(a: Bound<&K>, b: Bound<&K>) -> Ordering {
    match (a, b) {
        (Unbounded, Unbounded) => Ordering::Equal,
        (Unbounded, _) => Ordering::Less,
        (_, Unbounded) => Ordering::Greater,
        (Included(x), Included(y)) | (Excluded(x), Excluded(y)) => x.cmp(y),
        (Included(x), Excluded(y)) => x.cmp(y).then(Ordering::Less),
        (Excluded(x), Included(y)) => x.cmp(y).then(Ordering::Greater),
    }
}

/// Orders upper ends: unbounded last, `x)` before `x]`.
fn cmp_hi<K: Ord>(a: Bound<&K>, b: Bound<&K>) -> Ordering {
    match (a, b) {
        (Unbounded, Unbounded) => Ordering::Equal,
        (Unbounded, _) => Ordering::Greater,
        (_, Unbounded) => Ordering::Less,
        (Included(x), Included(y)) | (Excluded(x), Excluded(y)) => x.cmp(y),
        (Included(x), Excluded(y)) => x.cmp(y).then(Ordering::Greater),
        (Excluded(x), Included(y)) => x.cmp(y).then(Ordering::Less),
    }
}

/// Does any key lie between these ends?
fn nonempty<K: Ord>(lo: Bound<&K>, hi: Bound<&K>) -> bool {
    match (lo, hi) {
        (Unbounded, _) | (_, Unbounded) => true,
        (Included(a), Included(b)) => a <= b,
        (Included(a) | Excluded(a), Included(b) | Excluded(b)) => a < b,
    }
}

/// Is there no gap between a part ending at `hi` and a part starting at `lo` (no earlier than
/// the first part starts)? `x)` and `(x` leave `x` out; any other ends at `x` meet.
fn touches<K: Ord>(hi: Bound<&K>, lo: Bound<&K>) -> bool {
    match (hi, lo) {
        (Unbounded, _) | (_, Unbounded) => true,
        (Excluded(a), Excluded(b)) => a > b,
        (Included(a) | Excluded(a), Included(b) | Excluded(b)) => a >= b,
    }
}

/// The set of values of `col` a WHERE clause allows; `Ranges::all()` when it does not
/// constrain it. `key` maps a SQL value to its key (`None`: cannot be compared safely, so the
/// predicate is treated as allowing everything). NULL compared with `=`, `<`, `IN`, ...
/// matches nothing; `IS NULL` and `<=> NULL` allow everything (NULL has no key).
pub fn where_ranges<K: Ord + Clone>(
    selection: Option<&Expr>,
    col: &KeyColumn,
    parsed: &Parsed,
    params: &[Value],
    key: &dyn Fn(&Value) -> Option<K>,
) -> Ranges<K> {
    let cx = Cx {
        col,
        parsed,
        params,
        key,
    };
    match selection {
        Some(e) => expr_ranges(e, &cx),
        None => Ranges::all(),
    }
}

struct Cx<'a, K> {
    col: &'a KeyColumn,
    parsed: &'a Parsed,
    params: &'a [Value],
    key: &'a dyn Fn(&Value) -> Option<K>,
}

/// What a constant operand contributes to a comparison.
enum Operand<K> {
    /// Not a constant, or a value the key function cannot place.
    Unknown,
    Null,
    Key(K),
}

impl<K> Cx<'_, K> {
    fn operand(&self, e: &Expr) -> Operand<K> {
        match literal(e, self.parsed, self.params) {
            None => Operand::Unknown,
            Some(Value::NULL) => Operand::Null,
            Some(v) => match (self.key)(&v) {
                Some(k) => Operand::Key(k),
                None => Operand::Unknown,
            },
        }
    }
}

// Expressions nest as deep as the client writes them; chains of one operator are flattened
// below, and recursion through anything else grows the stack instead of overflowing it.
#[recursive::recursive]
fn expr_ranges<K: Ord + Clone>(expr: &Expr, cx: &Cx<'_, K>) -> Ranges<K> {
    match expr {
        Expr::Nested(inner) => expr_ranges(inner, cx),
        Expr::BinaryOp {
            op: BinaryOperator::And,
            ..
        } => {
            let mut acc = Ranges::all();
            for term in chain(expr, &BinaryOperator::And) {
                let r = expr_ranges(term, cx);
                if !r.is_all() {
                    acc = acc.intersect(&r);
                }
                if acc.is_empty() {
                    break;
                }
            }
            acc
        }
        Expr::BinaryOp {
            op: BinaryOperator::Or,
            ..
        } => {
            let mut parts = Vec::new();
            for term in chain(expr, &BinaryOperator::Or) {
                let r = expr_ranges(term, cx);
                if r.is_all() {
                    return r;
                }
                parts.extend(r.parts);
            }
            Ranges::from_parts(parts)
        }
        Expr::BinaryOp { left, op, right } => comparison(left, op, right, cx),
        Expr::In {
            expr,
            target: InTarget::List(list),
            negated: false,
            ..
        } if cx.col.matches(expr) => {
            let mut parts = Vec::with_capacity(list.len());
            for e in list {
                match cx.operand(e) {
                    Operand::Unknown => return Ranges::all(),
                    // `col IN (.., NULL)`: that element is never equal.
                    Operand::Null => {}
                    Operand::Key(k) => parts.push((Included(k.clone()), Included(k))),
                }
            }
            Ranges::from_parts(parts)
        }
        Expr::Between {
            expr,
            negated: false,
            low,
            high,
        } if cx.col.matches(expr) => match (cx.operand(low), cx.operand(high)) {
            (Operand::Unknown, _) | (_, Operand::Unknown) => Ranges::all(),
            (Operand::Null, _) | (_, Operand::Null) => Ranges::empty(),
            (Operand::Key(lo), Operand::Key(hi)) => Ranges::from_bounds(Included(lo), Included(hi)),
        },
        _ => Ranges::all(),
    }
}

/// `col op v` or `v op col`.
fn comparison<K: Ord + Clone>(
    left: &Expr,
    op: &BinaryOperator,
    right: &Expr,
    cx: &Cx<'_, K>,
) -> Ranges<K> {
    use BinaryOperator::{Eq, Gt, GtEq, Lt, LtEq, Spaceship};
    if !matches!(op, Eq | Spaceship | Lt | LtEq | Gt | GtEq) {
        return Ranges::all();
    }
    // Read as `col op value`: `5 < col` is `col > 5`.
    let (value, op) = if cx.col.matches(left) {
        (right, op.clone())
    } else if cx.col.matches(right) {
        let flipped = match op {
            Lt => Gt,
            LtEq => GtEq,
            Gt => Lt,
            GtEq => LtEq,
            other => other.clone(),
        };
        (left, flipped)
    } else {
        return Ranges::all();
    };
    match (cx.operand(value), op) {
        (Operand::Unknown, _) => Ranges::all(),
        // `col <=> NULL` is `col IS NULL`: NULL has no key, so any node may hold such rows.
        (Operand::Null, Spaceship) => Ranges::all(),
        (Operand::Null, _) => Ranges::empty(),
        (Operand::Key(k), Eq | Spaceship) => Ranges::point(k),
        (Operand::Key(k), Lt) => Ranges::from_bounds(Unbounded, Excluded(k)),
        (Operand::Key(k), LtEq) => Ranges::from_bounds(Unbounded, Included(k)),
        (Operand::Key(k), Gt) => Ranges::from_bounds(Excluded(k), Unbounded),
        (Operand::Key(k), GtEq) => Ranges::from_bounds(Included(k), Unbounded),
        (Operand::Key(_), _) => Ranges::all(),
    }
}

/// The operands of a chain of one operator (`a AND b AND c`, parenthesized or not), without
/// recursing: a chain of 100k terms is one tree 100k levels deep.
fn chain<'e>(expr: &'e Expr, op: &BinaryOperator) -> Vec<&'e Expr> {
    let mut out = Vec::new();
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        match e {
            Expr::BinaryOp { left, op: o, right } if o == op => {
                stack.push(right);
                stack.push(left);
            }
            // Parentheses change nothing (a term that is not of the chain is read through
            // them anyway).
            Expr::Nested(inner) => stack.push(inner),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::parse;
    use sqlparser::ast::{SetExpr, Statement};

    fn int_key(v: &Value) -> Option<i64> {
        match v {
            Value::Int(i) => Some(*i),
            Value::UInt(u) => i64::try_from(*u).ok(),
            Value::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        }
    }

    fn ranges(sql: &str, params: &[Value]) -> Ranges<i64> {
        let p = parse(sql).unwrap();
        let Statement::Query(q) = &p.stmt else {
            panic!("not a query")
        };
        let SetExpr::Select(s) = q.body.as_ref() else {
            panic!("not a select")
        };
        let col = KeyColumn {
            column: "k".into(),
            qualifiers: vec!["t".into(), "a".into()],
        };
        where_ranges(s.selection.as_ref(), &col, &p, params, &int_key)
    }

    fn w(cond: &str) -> Ranges<i64> {
        ranges(&format!("SELECT * FROM t WHERE {cond}"), &[])
    }

    fn pts(v: &[i64]) -> Ranges<i64> {
        v.iter()
            .fold(Ranges::empty(), |acc, p| acc.union(&Ranges::point(*p)))
    }

    fn r(lo: Bound<i64>, hi: Bound<i64>) -> Ranges<i64> {
        Ranges::from_bounds(lo, hi)
    }

    #[test]
    fn constructors_and_predicates() {
        assert!(Ranges::<i64>::all().is_all());
        assert!(!Ranges::<i64>::all().is_empty());
        assert!(Ranges::<i64>::empty().is_empty());
        assert!(!Ranges::<i64>::empty().is_all());
        assert_eq!(Ranges::point(3).points(), Some(vec![3]));
        assert_eq!(Ranges::<i64>::empty().points(), Some(vec![]));
        assert_eq!(Ranges::<i64>::all().points(), None);
        assert!(r(Included(5), Included(4)).is_empty());
        assert!(r(Included(5), Excluded(5)).is_empty());
        assert!(r(Excluded(5), Included(5)).is_empty());
        assert!(r(Excluded(5), Excluded(5)).is_empty());
        assert_eq!(r(Included(5), Included(5)), Ranges::point(5));
        assert!(r(Unbounded, Unbounded).is_all());
        assert!(!r(Unbounded, Excluded(0)).is_all());
        assert_eq!(
            r(Included(1), Excluded(3)).parts(),
            &[(Included(1), Excluded(3))]
        );
        assert_eq!(r(Included(1), Included(2)).points(), None);
    }

    #[test]
    fn union_merges_overlapping_and_touching_parts() {
        let a = r(Included(1), Excluded(5));
        assert_eq!(
            a.union(&r(Included(5), Included(9))),
            r(Included(1), Included(9))
        );
        assert_eq!(
            r(Included(1), Included(5)).union(&r(Excluded(5), Included(9))),
            r(Included(1), Included(9))
        );
        // `[1, 5)` and `(5, 9]` leave 5 out.
        let gap = a.union(&r(Excluded(5), Included(9)));
        assert_eq!(gap.parts().len(), 2);
        assert!(!gap.overlaps(Included(&5), Included(&5)));
        assert_eq!(
            a.union(&r(Included(3), Unbounded)),
            r(Included(1), Unbounded)
        );
        assert!(a.union(&Ranges::all()).is_all());
        assert_eq!(a.union(&Ranges::empty()), a);
        assert_eq!(pts(&[3, 1, 2, 1]).points(), Some(vec![1, 2, 3]));
        // A part swallowed by an earlier, longer one.
        assert_eq!(
            r(Included(0), Included(10)).union(&pts(&[2, 4, 11])),
            r(Included(0), Included(10)).union(&Ranges::point(11))
        );
        assert!(r(Unbounded, Included(3))
            .union(&r(Included(2), Unbounded))
            .is_all());
    }

    #[test]
    fn intersect_keeps_common_keys() {
        let a = r(Included(1), Excluded(5)).union(&r(Included(10), Included(20)));
        assert_eq!(
            a.intersect(&r(Included(3), Included(12))),
            r(Included(3), Excluded(5)).union(&r(Included(10), Included(12)))
        );
        assert!(a.intersect(&r(Included(5), Excluded(10))).is_empty());
        assert_eq!(
            a.intersect(&r(Included(5), Included(10))),
            Ranges::point(10)
        );
        assert_eq!(a.intersect(&Ranges::all()), a);
        assert!(a.intersect(&Ranges::empty()).is_empty());
        assert_eq!(pts(&[1, 2, 3]).intersect(&pts(&[2, 3, 4])), pts(&[2, 3]));
        assert_eq!(
            r(Unbounded, Included(7)).intersect(&r(Excluded(2), Unbounded)),
            r(Excluded(2), Included(7))
        );
    }

    #[test]
    fn overlaps_respects_inclusive_and_exclusive_ends() {
        let a = r(Included(1), Excluded(5)).union(&r(Excluded(10), Included(20)));
        assert!(!a.overlaps(Included(&5), Included(&5)));
        assert!(a.overlaps(Included(&4), Included(&4)));
        assert!(a.overlaps(Unbounded, Included(&1)));
        assert!(!a.overlaps(Unbounded, Excluded(&1)));
        assert!(!a.overlaps(Included(&5), Included(&10)));
        assert!(a.overlaps(Included(&5), Excluded(&11)));
        assert!(!a.overlaps(Excluded(&20), Unbounded));
        assert!(a.overlaps(Included(&20), Unbounded));
        assert!(a.overlaps(Unbounded, Unbounded));
        assert!(!a.overlaps(Included(&3), Excluded(&3)));
        assert!(!Ranges::<i64>::empty().overlaps(Unbounded, Unbounded));
        assert!(Ranges::<i64>::all().overlaps(Included(&7), Included(&7)));
    }

    #[test]
    fn equality_in_both_orientations() {
        assert_eq!(w("k = 7"), Ranges::point(7));
        assert_eq!(w("7 = K"), Ranges::point(7));
        assert_eq!(w("t.k = 7"), Ranges::point(7));
        assert_eq!(w("(k) = -7"), Ranges::point(-7));
        assert_eq!(w("k = '42'"), Ranges::point(42));
        assert_eq!(w("k <=> 3"), Ranges::point(3));
        assert_eq!(w("3 <=> k"), Ranges::point(3));
    }

    #[test]
    fn in_lists() {
        assert_eq!(w("k IN (3, 1, 2, 1)"), pts(&[1, 2, 3]));
        assert_eq!(w("k IN (3, 1, 2, 1)").points(), Some(vec![1, 2, 3]));
        assert!(w("k NOT IN (1)").is_all());
        assert!(w("k IN (1, x)").is_all());
        assert!(w("k IN (SELECT id FROM u)").is_all());
        assert!(w("x IN (1, 2)").is_all());
    }

    #[test]
    fn comparisons_in_both_orientations() {
        assert_eq!(w("k < 5"), r(Unbounded, Excluded(5)));
        assert_eq!(w("k <= 5"), r(Unbounded, Included(5)));
        assert_eq!(w("k > 5"), r(Excluded(5), Unbounded));
        assert_eq!(w("k >= 5"), r(Included(5), Unbounded));
        assert_eq!(w("5 < k"), r(Excluded(5), Unbounded));
        assert_eq!(w("5 <= k"), r(Included(5), Unbounded));
        assert_eq!(w("5 > k"), r(Unbounded, Excluded(5)));
        assert_eq!(w("5 >= k"), r(Unbounded, Included(5)));
        assert_eq!(w("a.k > -3"), r(Excluded(-3), Unbounded));
    }

    #[test]
    fn between() {
        assert_eq!(w("k BETWEEN 3 AND 9"), r(Included(3), Included(9)));
        assert!(w("k BETWEEN 9 AND 3").is_empty());
        assert!(w("k NOT BETWEEN 3 AND 9").is_all());
        assert!(w("k BETWEEN 3 AND x").is_all());
        assert!(w("k BETWEEN 3 AND 'x'").is_all());
        assert!(w("k BETWEEN NULL AND 9").is_empty());
        assert!(w("x BETWEEN 3 AND 9").is_all());
        assert_eq!(
            w("k BETWEEN 3 AND 9 AND x = 1"),
            r(Included(3), Included(9))
        );
    }

    #[test]
    fn and_intersects_or_unions() {
        assert_eq!(w("k >= 3 AND k < 9"), r(Included(3), Excluded(9)));
        assert_eq!(w("k > 3 AND x = 1"), r(Excluded(3), Unbounded));
        assert!(w("k = 1 AND k = 2").is_empty());
        assert!(w("k < 1 AND k > 2").is_empty());
        assert_eq!(
            w("k < 1 OR k > 2"),
            r(Unbounded, Excluded(1)).union(&r(Excluded(2), Unbounded))
        );
        assert!(w("k < 1 OR x = 2").is_all());
        assert!(w("k <= 5 OR k >= 5").is_all());
        assert_eq!(w("(k = 1 OR k = 5) AND k > 2"), Ranges::point(5));
        assert_eq!(
            w("(k BETWEEN 1 AND 3 OR k BETWEEN 7 AND 9) AND (k >= 2 AND k < 8)"),
            r(Included(2), Included(3)).union(&r(Included(7), Excluded(8)))
        );
        assert_eq!(w("k = 1 AND x = 2 OR k = 3 AND y = 4"), pts(&[1, 3]));
        assert_eq!(w("((k = 1)) OR (k = 2 OR (k = 3))"), pts(&[1, 2, 3]));
    }

    #[test]
    fn unusable_conditions_allow_everything() {
        assert!(ranges("SELECT * FROM t", &[]).is_all());
        assert!(w("k != 5").is_all());
        assert!(w("k <> 5").is_all());
        assert!(w("NOT k = 5").is_all());
        assert!(w("NOT (k > 5)").is_all());
        assert!(w("k + 1 = 5").is_all());
        assert!(w("abs(k) = 5").is_all());
        assert!(w("k = x").is_all());
        assert!(w("k = k").is_all());
        assert!(w("x = 5").is_all());
        assert!(w("other.k = 5").is_all());
        assert!(w("k LIKE '5%'").is_all());
        assert!(w("k IS NOT NULL").is_all());
        assert!(w("k = 5 XOR k = 6").is_all());
        assert!(w("k = 5 OR NOT k = 6").is_all());
    }

    #[test]
    fn null_literals_match_nothing_but_is_null_is_kept() {
        assert!(w("k = NULL").is_empty());
        assert!(w("NULL = k").is_empty());
        assert!(w("k < NULL").is_empty());
        assert!(w("k >= NULL").is_empty());
        assert!(w("k IN (NULL)").is_empty());
        assert_eq!(w("k IN (1, NULL, 2)"), pts(&[1, 2]));
        assert!(w("k IS NULL").is_all());
        assert!(w("k <=> NULL").is_all());
        assert!(w("k = NULL OR k IS NULL").is_all());
        assert_eq!(w("k = NULL OR k = 4"), Ranges::point(4));
    }

    #[test]
    fn values_the_key_cannot_place_allow_everything() {
        assert!(w("k = 'abc'").is_all());
        assert!(w("k = 3.5").is_all());
        assert!(w("k < 3.5").is_all());
        assert!(w("k IN (1, 'abc')").is_all());
        // A conjunct still narrows.
        assert_eq!(w("k = 'abc' AND k < 5"), r(Unbounded, Excluded(5)));
        assert!(w("k = 'abc' OR k < 5").is_all());
    }

    #[test]
    fn placeholders_take_bound_values() {
        let p = [
            Value::Bytes(b"s".to_vec()),
            Value::Int(5),
            Value::Bytes(b"9".to_vec()),
        ];
        assert_eq!(
            ranges("SELECT * FROM t WHERE x = ? AND k BETWEEN ? AND ?", &p),
            r(Included(5), Included(9))
        );
        assert_eq!(
            ranges("SELECT * FROM t WHERE ? < k", &[Value::UInt(8)]),
            r(Excluded(8), Unbounded)
        );
        assert!(ranges("SELECT * FROM t WHERE k = ?", &[Value::NULL]).is_empty());
        assert!(ranges("SELECT * FROM t WHERE k = ?", &[Value::Double(1.5)]).is_all());
        // A missing parameter is not a value.
        assert!(ranges("SELECT * FROM t WHERE k = ?", &[]).is_all());
        assert_eq!(
            ranges(
                "SELECT * FROM t WHERE k IN (?, ?)",
                &[Value::Int(2), Value::Int(1)]
            )
            .points(),
            Some(vec![1, 2])
        );
    }

    #[test]
    fn update_and_delete_selections_work_too() {
        let p = parse("DELETE FROM t WHERE k >= 10 AND k < 20").unwrap();
        let Statement::Delete(d) = &p.stmt else {
            panic!("not a delete")
        };
        let col = KeyColumn {
            column: "k".into(),
            qualifiers: vec!["t".into()],
        };
        assert_eq!(
            where_ranges(d.selection.as_ref(), &col, &p, &[], &int_key),
            r(Included(10), Excluded(20))
        );
    }

    #[test]
    fn chains_of_100k_terms_do_not_overflow_the_stack() {
        let n = 100_000;
        let mut and = String::from("SELECT * FROM t WHERE k >= 0");
        for i in 0..n {
            and.push_str(&format!(" AND k < {}", n + 10 - i));
        }
        assert_eq!(ranges(&and, &[]), r(Included(0), Excluded(11)));
        let mut or = String::from("SELECT * FROM t WHERE k = 0");
        for i in 1..n {
            or.push_str(&format!(" OR k = {i}"));
        }
        let got = ranges(&or, &[]);
        assert_eq!(got.parts().len(), n as usize);
        assert_eq!(got.points().map(|p| p.len()), Some(n as usize));
        // Terms on other columns (shorter: parsing dominates the test's time).
        let mut mixed = String::from("SELECT * FROM t WHERE x = 0");
        for i in 0..n / 10 {
            mixed.push_str(&format!(" AND y = {i}"));
        }
        mixed.push_str(" AND k IN (1, 2)");
        assert_eq!(ranges(&mixed, &[]), pts(&[1, 2]));
    }
}
