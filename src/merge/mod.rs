//! Merging the partial results of a statement that ran on several nodes into the answer one
//! MySQL server holding all the rows would give. Pure functions over rows; the session feeds
//! them from the nodes' result streams.

pub mod value;

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use mysql_common::constants::ColumnType;
use mysql_common::packets::Column;
use mysql_common::value::Value;

pub use value::Class;
use value::{class_of, compare, key_of, num_of, summed, Dec, Num};

use crate::value::{format_float, text_form};

/// A row as read from a node: one value per column, `None` for NULL.
pub type Row = Vec<Option<Value>>;

/// One ORDER BY key: a column of the node rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey {
    pub index: usize,
    pub desc: bool,
    /// A column position the client wrote (`ORDER BY 2`): an index into the rows as the nodes
    /// send them, never moved by [`resolve_keys`].
    pub fixed: bool,
}

impl SortKey {
    /// Column `index`, ascending: how groups come sorted by their keys.
    pub fn ascending(index: usize) -> SortKey {
        SortKey {
            index,
            desc: false,
            fixed: false,
        }
    }
}

/// How one column of the node rows is re-aggregated.
#[derive(Debug, Clone, PartialEq)]
pub enum AggFn {
    /// A group key, or a plain column: the first value seen.
    First,
    Count,
    Sum,
    /// SUM of an expression with a division: the column holds each node's sum, rounded to
    /// the quotient's scale, and gives the result type; column `exact` the same sum at
    /// the precision MariaDB keeps inside SUM (`CAST(SUM(..) AS DECIMAL(65,18))`). A DECIMAL
    /// result is the exact sums added, then rounded once, as one MariaDB's SUM is; any
    /// other type is the column's own sums added.
    SumExact {
        exact: usize,
    },
    Min,
    Max,
    /// AVG: the column itself holds each node's average (kept for its type); the merged value
    /// is the sum of column `sum` over the sum of column `count`.
    Avg {
        sum: usize,
        count: usize,
    },
    /// An expression over aggregates (`SUM(a) / COUNT(b)`), computed from other merged
    /// columns; the column itself holds each node's value and gives the result type.
    Expr(Cond),
    /// COUNT / SUM / AVG (DISTINCT x): the nodes group by x too, column `arg` carries x, and
    /// the merge collects each group's distinct values. `COUNT(DISTINCT x, y, ...)`: columns
    /// `also` carry y, ...; a row counts once per distinct tuple, and not when any is NULL.
    Distinct {
        arg: usize,
        also: Vec<usize>,
        kind: DistinctKind,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistinctKind {
    Count,
    Sum,
    Avg,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Grouping {
    /// Columns whose values form the group (empty: one group, as for `SELECT COUNT(*)`).
    pub keys: Vec<usize>,
    /// One entry per node-row column.
    pub columns: Vec<AggFn>,
}

/// A HAVING condition over merged rows.
#[derive(Debug, Clone, PartialEq)]
pub enum Cond {
    Col(usize),
    Num(Num),
    Str(Vec<u8>),
    Null,
    Cmp(CmpOp, Box<Cond>, Box<Cond>),
    Arith(ArithOp, Box<Cond>, Box<Cond>),
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
    Not(Box<Cond>),
    IsNull(Box<Cond>, bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
}

/// How an aggregate merge ([`crate::plan::Plan::Aggregate`]) folds the nodes' partial
/// results into the client's rows.
#[derive(Debug, Clone, PartialEq)]
pub enum Aggregate {
    /// The input arrives sorted by the group keys (a MergeSort below): each group is folded
    /// once the next begins, so one group is held at a time; HAVING after each.
    Streamed {
        grouping: Grouping,
        having: Option<Cond>,
    },
    /// Every input row held (bounded by the statement's row cap), then grouped, HAVING,
    /// DISTINCT and sorted in memory.
    InMemory(InMemory),
}

/// The steps of an in-memory merge, in this order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InMemory {
    pub grouping: Option<Grouping>,
    pub having: Option<Cond>,
    /// SELECT DISTINCT: identical visible rows (by the columns' collations) appear once.
    pub distinct: bool,
    /// The sort after the merge; empty: by the group keys, as MariaDB returns groups.
    pub order: Vec<SortKey>,
}

/// `keys` made absolute for rows whose helper columns start at `base` (`SELECT *`: the
/// number of visible columns is known only from the nodes' answer); a position the client
/// wrote (`fixed`) stays as it is.
pub fn resolve_keys(keys: &[SortKey], base: usize) -> Vec<SortKey> {
    keys.iter()
        .map(|k| SortKey {
            index: if k.fixed { k.index } else { k.index + base },
            ..k.clone()
        })
        .collect()
}

/// A merge that cannot be completed correctly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeError(pub String);

/// `cols` with each string column's collation the one `ids` gives (the schema's, where the
/// result metadata gives the connection's); the others as they are. Unchanged when the
/// counts differ.
pub fn with_collations(cols: &Arc<[Column]>, ids: &[u16]) -> Arc<[Column]> {
    if ids.len() != cols.len() {
        return cols.clone();
    }
    cols.iter()
        .zip(ids)
        .map(|(c, id)| {
            let string = matches!(class_of(c), Class::Binary { .. } | Class::Folded { .. });
            if string && c.character_set() != 63 && *id != c.character_set() {
                c.clone().with_character_set(*id)
            } else {
                c.clone()
            }
        })
        .collect()
}

/// Per-column comparison classes.
pub fn classes(cols: &[Column]) -> Vec<Class> {
    cols.iter().map(class_of).collect()
}

pub fn cmp_rows(a: &Row, b: &Row, order: &[SortKey], classes: &[Class]) -> Ordering {
    for k in order {
        let class = classes
            .get(k.index)
            .copied()
            .unwrap_or(Class::Binary { pad: false });
        let o = compare(
            a.get(k.index).unwrap_or(&None),
            b.get(k.index).unwrap_or(&None),
            class,
        );
        let o = if k.desc { o.reverse() } else { o };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

fn row_key(row: &Row, cols: &[usize], classes: &[Class]) -> Vec<u8> {
    let mut k = Vec::new();
    for &i in cols {
        let class = classes
            .get(i)
            .copied()
            .unwrap_or(Class::Binary { pad: false });
        let part = key_of(row.get(i).unwrap_or(&None), class);
        k.extend_from_slice(&(part.len() as u32).to_le_bytes());
        k.extend_from_slice(&part);
    }
    k
}

/// One DISTINCT aggregate's values in a group: key -> the value as a number (for SUM/AVG).
type DistinctSet = HashMap<Vec<u8>, Option<Num>>;

/// Accumulated state of one group.
struct Acc {
    row: Row,
    nums: Vec<Option<Num>>,
    /// Distinct values (tuples) of the DISTINCT aggregates' arguments, by their columns.
    sets: HashMap<(usize, Vec<usize>), DistinctSet>,
}

fn collect_distinct(
    acc: &mut Acc,
    g: &Grouping,
    row: &Row,
    classes: &[Class],
    cols: &[Column],
    cap: usize,
) -> Result<(), MergeError> {
    for f in &g.columns {
        if let AggFn::Distinct { arg, also, .. } = f {
            let v = row.get(*arg).cloned().unwrap_or(None);
            if v.is_none() || v == Some(Value::NULL) {
                continue;
            }
            let class = classes.get(*arg).copied().unwrap_or(Class::Float);
            let ty = cols
                .get(*arg)
                .map_or(ColumnType::MYSQL_TYPE_DOUBLE, Column::column_type);
            let mut key = key_of(&v, class);
            if !also.is_empty() {
                // A tuple: each part behind its length, so ("ab", "c") and ("a", "bc") differ.
                let mut framed = Vec::with_capacity(key.len() * (also.len() + 1) + 16);
                let mut null = false;
                let mut push = |part: Vec<u8>| {
                    framed.extend_from_slice(&(part.len() as u64).to_le_bytes());
                    framed.extend_from_slice(&part);
                };
                push(key);
                for a in also {
                    let w = row.get(*a).cloned().unwrap_or(None);
                    if w.is_none() || w == Some(Value::NULL) {
                        null = true;
                        break;
                    }
                    push(key_of(&w, classes.get(*a).copied().unwrap_or(Class::Float)));
                }
                if null {
                    continue;
                }
                key = framed;
            }
            let set = acc.sets.entry((*arg, also.clone())).or_default();
            if set.len() >= cap {
                return Err(MergeError(format!(
                    "more than {cap} distinct values to merge in memory (max_rows_per_statement)"
                )));
            }
            set.entry(key).or_insert_with(|| {
                v.as_ref()
                    .filter(|v| **v != Value::NULL)
                    .and_then(|v| summed(v, class, ty))
            });
        }
    }
    Ok(())
}

fn as_num(v: &Option<Value>, class: Class) -> Option<Num> {
    v.as_ref()
        .filter(|v| **v != Value::NULL)
        .and_then(|v| num_of(v, class))
}

/// Re-aggregates node rows group by group. Rows are the nodes' partial results (each node
/// grouped its own rows); the output has one row per group, in first-seen order.
pub fn aggregate(
    rows: impl IntoIterator<Item = Row>,
    g: &Grouping,
    cols: &[Column],
    binary: bool,
    cap: usize,
) -> Result<Vec<Row>, MergeError> {
    let classes = classes(cols);
    let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut groups: Vec<Acc> = Vec::new();
    for row in rows {
        let key = row_key(&row, &g.keys, &classes);
        let gi = match index.get(&key) {
            Some(i) => *i,
            None => {
                if groups.len() >= cap {
                    return Err(MergeError(format!(
                        "more than {cap} groups to merge in memory (max_rows_per_statement)"
                    )));
                }
                let nums = row
                    .iter()
                    .enumerate()
                    .map(|(i, v)| as_num(v, classes.get(i).copied().unwrap_or(Class::Float)))
                    .collect();
                index.insert(key, groups.len());
                let mut acc = Acc {
                    row,
                    nums,
                    sets: HashMap::new(),
                };
                let first = acc.row.clone();
                collect_distinct(&mut acc, g, &first, &classes, cols, cap)?;
                groups.push(acc);
                continue;
            }
        };
        let acc = &mut groups[gi];
        collect_distinct(acc, g, &row, &classes, cols, cap)?;
        for (i, f) in g.columns.iter().enumerate() {
            let class = classes.get(i).copied().unwrap_or(Class::Float);
            let v = row.get(i).cloned().unwrap_or(None);
            match f {
                AggFn::First | AggFn::Avg { .. } | AggFn::Expr(_) | AggFn::Distinct { .. } => {}
                AggFn::Count | AggFn::Sum | AggFn::SumExact { .. } => {
                    let n = as_num(&v, class);
                    acc.nums[i] = match (acc.nums[i], n) {
                        (Some(a), Some(b)) => Some(a.checked_add(b).ok_or_else(|| {
                            MergeError("a SUM or COUNT overflowed while merging".into())
                        })?),
                        (a, b) => a.or(b),
                    };
                }
                AggFn::Min | AggFn::Max => {
                    let better = match (&acc.row[i], &v) {
                        // A node with no rows in this group sends NULL: never a MIN or MAX.
                        (_, None) | (_, Some(Value::NULL)) => false,
                        (None, Some(x)) => *x != Value::NULL,
                        (Some(Value::NULL), Some(x)) => *x != Value::NULL,
                        (cur, new) => {
                            let o = compare(new, cur, class);
                            if *f == AggFn::Min {
                                o == Ordering::Less
                            } else {
                                o == Ordering::Greater
                            }
                        }
                    };
                    if better {
                        acc.row[i] = v;
                    }
                }
            }
        }
    }
    // Finalise: sums and counts from their accumulators, averages from their parts.
    let mut out = Vec::with_capacity(groups.len());
    for mut acc in groups {
        for (i, f) in g.columns.iter().enumerate() {
            let col = &cols[i];
            match f {
                AggFn::Count | AggFn::Sum => {
                    acc.row[i] = acc.nums[i].map(|n| encode_num(n, col, binary));
                }
                AggFn::SumExact { exact } => {
                    let decimal = matches!(
                        col.column_type(),
                        ColumnType::MYSQL_TYPE_NEWDECIMAL | ColumnType::MYSQL_TYPE_DECIMAL
                    );
                    let n = match acc.nums.get(*exact).copied().flatten() {
                        Some(exact) if decimal => Some(exact),
                        _ => acc.nums[i],
                    };
                    acc.row[i] = n.map(|n| encode_num(n, col, binary));
                }
                AggFn::Avg { sum, count } => {
                    let total = acc.nums.get(*sum).copied().flatten();
                    let n = match acc.nums.get(*count).copied().flatten() {
                        Some(Num::Int(n)) => n,
                        _ => 0,
                    };
                    acc.row[i] = match total {
                        Some(_) if n == 0 => None,
                        None => None,
                        Some(t) => Some(avg(t, n, col, binary)?),
                    };
                }
                AggFn::Distinct { arg, also, kind } => {
                    let values = acc.sets.get(&(*arg, also.clone()));
                    // SUM and AVG(DISTINCT) count each number once, as MariaDB's are sets
                    // of the numbers: the strings 'true' and 'false' are both 0.
                    let mut nums: Vec<Num> = values
                        .map(|vs| vs.values().flatten().copied().collect())
                        .unwrap_or_default();
                    nums.sort_by(|a, b| a.compare(*b));
                    nums.dedup_by(|a, b| a.compare(*b) == Ordering::Equal);
                    let n = match kind {
                        DistinctKind::Count => values.map(HashMap::len).unwrap_or(0),
                        _ => nums.len(),
                    };
                    let sum = nums.iter().try_fold(None::<Num>, |t, v| {
                        Some(Some(match t {
                            None => *v,
                            Some(t) => t.checked_add(*v)?,
                        }))
                    });
                    acc.row[i] = match kind {
                        DistinctKind::Count => Some(encode_num(Num::Int(n as i128), col, binary)),
                        DistinctKind::Sum => match sum {
                            Some(Some(t)) => Some(encode_num(t, col, binary)),
                            Some(None) => None,
                            None if n == 0 => None,
                            None => {
                                return Err(MergeError(
                                    "a SUM(DISTINCT) overflowed while merging".into(),
                                ))
                            }
                        },
                        DistinctKind::Avg => match sum {
                            Some(Some(t)) if n > 0 => Some(avg(t, n as i128, col, binary)?),
                            Some(_) => None,
                            None if n == 0 => None,
                            None => {
                                return Err(MergeError(
                                    "an AVG(DISTINCT) overflowed while merging".into(),
                                ))
                            }
                        },
                    };
                }
                _ => {}
            }
        }
        // Expressions over aggregates, from the merged values.
        for (i, f) in g.columns.iter().enumerate() {
            if let AggFn::Expr(c) = f {
                acc.row[i] = match eval(c, &acc.row, &classes) {
                    CVal::Num(n) => Some(encode_num(n, &cols[i], binary)),
                    CVal::Str(s, _) => Some(Value::Bytes(s)),
                    CVal::Null => None,
                };
            }
        }
        out.push(acc.row);
    }
    Ok(out)
}

fn avg(total: Num, n: i128, col: &Column, binary: bool) -> Result<Value, MergeError> {
    match class_of(col) {
        Class::Float => Ok(encode_num(
            Num::Float(total.to_f64() / n as f64),
            col,
            binary,
        )),
        _ => {
            let d = match total {
                Num::Int(i) => Dec::from_int(i),
                Num::Dec(d) => d,
                Num::Float(f) => return Ok(encode_num(Num::Float(f / n as f64), col, binary)),
            };
            let scale = u32::from(col.decimals());
            let q = d
                .div_round(n, scale)
                .ok_or_else(|| MergeError("an AVG overflowed while merging".into()))?;
            Ok(encode_num(Num::Dec(q), col, binary))
        }
    }
}

/// A column's `decimals` from which on a DOUBLE's are not fixed.
const NOT_FIXED_DEC: u32 = 31;

/// A merged number in the column's type, in the protocol the client reads.
fn encode_num(n: Num, col: &Column, binary: bool) -> Value {
    let ty = col.column_type();
    let is_int_col = matches!(
        ty,
        ColumnType::MYSQL_TYPE_TINY
            | ColumnType::MYSQL_TYPE_SHORT
            | ColumnType::MYSQL_TYPE_INT24
            | ColumnType::MYSQL_TYPE_LONG
            | ColumnType::MYSQL_TYPE_LONGLONG
    );
    let is_float_col = matches!(
        ty,
        ColumnType::MYSQL_TYPE_DOUBLE | ColumnType::MYSQL_TYPE_FLOAT
    );
    if binary {
        if is_int_col {
            return match n {
                Num::Int(i) => i64::try_from(i)
                    .map(Value::Int)
                    .unwrap_or_else(|_| Value::UInt(u64::try_from(i).unwrap_or(u64::MAX))),
                other => Value::Int(other.to_f64() as i64),
            };
        }
        if is_float_col {
            return Value::Double(n.to_f64());
        }
    }
    let dec = u32::from(col.decimals());
    let text = if is_float_col {
        // A DOUBLE of fixed decimals (AVG(ROUND(d, 1)) has 5) is written with exactly
        // those, as the node writes it; 31 and above mean none fixed.
        if dec < NOT_FIXED_DEC {
            format!("{:.*}", dec as usize, n.to_f64())
        } else {
            format_float(n.to_f64())
        }
    } else {
        match n {
            Num::Int(i) if dec > 0 && !is_int_col => Dec::from_int(i).format(dec),
            Num::Int(i) => i.to_string(),
            Num::Dec(d) => d.format(dec),
            Num::Float(f) => format_float(f),
        }
    };
    Value::Bytes(text.into_bytes())
}

fn empty_aggregates(g: &Grouping, cols: &[Column], binary: bool) -> Row {
    g.columns
        .iter()
        .zip(cols)
        .map(|(f, col)| match f {
            AggFn::Count
            | AggFn::Distinct {
                kind: DistinctKind::Count,
                ..
            } => Some(encode_num(Num::Int(0), col, binary)),
            _ => None,
        })
        .collect()
}

/// Keeps the first of rows equal on `cols`.
pub fn distinct(rows: Vec<Row>, cols: &[usize], classes: &[Class]) -> Vec<Row> {
    let mut seen = std::collections::HashSet::new();
    rows.into_iter()
        .filter(|r| seen.insert(row_key(r, cols, classes)))
        .collect()
}

#[derive(Debug, Clone, PartialEq)]
enum CVal {
    Null,
    Num(Num),
    /// A string, with the comparison class of the column it came from (`None`: a literal).
    Str(Vec<u8>, Option<Class>),
}

fn eval(c: &Cond, row: &Row, classes: &[Class]) -> CVal {
    match c {
        Cond::Col(i) => match row.get(*i).cloned().flatten() {
            None | Some(Value::NULL) => CVal::Null,
            Some(v) => {
                let class = classes.get(*i).copied().unwrap_or(Class::Float);
                match class {
                    Class::Integer | Class::Decimal | Class::Float => {
                        num_of(&v, class).map(CVal::Num).unwrap_or(CVal::Null)
                    }
                    _ => match v {
                        Value::Bytes(b) => CVal::Str(b, Some(class)),
                        other => CVal::Str(text_form(&other).unwrap_or_default(), Some(class)),
                    },
                }
            }
        },
        Cond::Num(n) => CVal::Num(*n),
        Cond::Str(s) => CVal::Str(s.clone(), None),
        Cond::Null => CVal::Null,
        Cond::Arith(op, a, b) => {
            let (CVal::Num(x), CVal::Num(y)) =
                (to_num(eval(a, row, classes)), to_num(eval(b, row, classes)))
            else {
                return CVal::Null;
            };
            let op = match op {
                ArithOp::Add => '+',
                ArithOp::Sub => '-',
                ArithOp::Mul => '*',
                ArithOp::Div => '/',
            };
            x.arith(op, y).map(CVal::Num).unwrap_or(CVal::Null)
        }
        Cond::Cmp(op, a, b) => {
            let (x, y) = (eval(a, row, classes), eval(b, row, classes));
            let o = match (&x, &y) {
                (CVal::Null, _) | (_, CVal::Null) => return CVal::Null,
                (CVal::Str(p, cp), CVal::Str(q, cq)) => value::compare_text(p, q, cp.or(*cq)),
                _ => match (to_num(x), to_num(y)) {
                    (CVal::Num(p), CVal::Num(q)) => p.compare(q),
                    _ => return CVal::Null,
                },
            };
            let t = match op {
                CmpOp::Eq => o == Ordering::Equal,
                CmpOp::NotEq => o != Ordering::Equal,
                CmpOp::Lt => o == Ordering::Less,
                CmpOp::LtEq => o != Ordering::Greater,
                CmpOp::Gt => o == Ordering::Greater,
                CmpOp::GtEq => o != Ordering::Less,
            };
            CVal::Num(Num::Int(i128::from(t)))
        }
        Cond::And(a, b) => match (truth(&eval(a, row, classes)), truth(&eval(b, row, classes))) {
            (Some(false), _) | (_, Some(false)) => CVal::Num(Num::Int(0)),
            (Some(true), Some(true)) => CVal::Num(Num::Int(1)),
            _ => CVal::Null,
        },
        Cond::Or(a, b) => match (truth(&eval(a, row, classes)), truth(&eval(b, row, classes))) {
            (Some(true), _) | (_, Some(true)) => CVal::Num(Num::Int(1)),
            (Some(false), Some(false)) => CVal::Num(Num::Int(0)),
            _ => CVal::Null,
        },
        Cond::Not(a) => match truth(&eval(a, row, classes)) {
            Some(t) => CVal::Num(Num::Int(i128::from(!t))),
            None => CVal::Null,
        },
        Cond::IsNull(a, negated) => {
            let is_null = eval(a, row, classes) == CVal::Null;
            CVal::Num(Num::Int(i128::from(is_null != *negated)))
        }
    }
}

fn to_num(v: CVal) -> CVal {
    match v {
        CVal::Str(s, _) => {
            let text = String::from_utf8_lossy(&s);
            num_of(&Value::Bytes(text.trim().as_bytes().to_vec()), Class::Float)
                .map(CVal::Num)
                .unwrap_or(CVal::Num(Num::Int(0)))
        }
        other => other,
    }
}

fn truth(v: &CVal) -> Option<bool> {
    match v {
        CVal::Null => None,
        CVal::Num(n) => Some(n.to_f64() != 0.0),
        CVal::Str(..) => match to_num(v.clone()) {
            CVal::Num(n) => Some(n.to_f64() != 0.0),
            _ => None,
        },
    }
}

/// Does the merged row satisfy HAVING?
pub fn having(c: &Cond, row: &Row, classes: &[Class]) -> bool {
    truth(&eval(c, row, classes)) == Some(true)
}

/// Everything after the rows are in memory: aggregate, HAVING, DISTINCT (over the first
/// `visible` columns), sort. Rows come out in the merge's order; the page is cut above it.
pub fn finish_buffered(
    rows: Vec<Row>,
    m: &InMemory,
    visible: usize,
    cols: &[Column],
    binary: bool,
    cap: usize,
) -> Result<Vec<Row>, MergeError> {
    let classes = classes(cols);
    let mut rows = match &m.grouping {
        // Aggregates without GROUP BY answer one row even over no rows (COUNT 0, others NULL);
        // nodes that grouped by a DISTINCT argument may have sent none.
        Some(g) if g.keys.is_empty() && rows.is_empty() => vec![empty_aggregates(g, cols, binary)],
        Some(g) => aggregate(rows, g, cols, binary, cap)?,
        None => rows,
    };
    if let Some(h) = &m.having {
        rows.retain(|r| having(h, r, &classes));
    }
    if m.distinct {
        rows = distinct(rows, &(0..visible).collect::<Vec<_>>(), &classes);
    }
    let order: Vec<SortKey> = if m.order.is_empty() {
        // MariaDB returns GROUP BY results sorted by the group keys.
        m.grouping
            .as_ref()
            .map(|g| {
                g.keys
                    .iter()
                    .map(|&index| SortKey {
                        index,
                        desc: false,
                        fixed: false,
                    })
                    .collect()
            })
            .unwrap_or_default()
    } else {
        m.order.clone()
    };
    if !order.is_empty() {
        rows.sort_by(|a, b| cmp_rows(a, b, &order, &classes));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests;
