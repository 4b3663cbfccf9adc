//! Reads and writes of a time_tier table that reach several tiers.
//!
//! Each tier's SQL carries its serving range, and the older tier of an overlap window also
//! leaves out the primary keys the newer tier holds in the window (read just before), so the
//! tiers answer disjoint row sets and the usual merges count every row once. A page ordered by
//! the tier column first counts rows per segment of dates, then reads only the segments the
//! page falls in. Lookups by a unique poll column ask the tiers newest first.

use std::fmt;

use mysql_common::value::Value;
use sqlparser::ast::{OrderByKind, Query, SetExpr};

use super::{needs_merge, refuse, select, Plan, Planner};
use crate::config::Topology;
use crate::routing::range::{key_sql, RangeKey};
use crate::routing::time_tier::{Part, Segment, TierRule, Window};
use crate::sql::keys::where_keys;
use crate::sql::ranges::Ranges;

use super::uses::Use;

/// Stands in the node SQL where each tier's predicate goes.
pub const MARK: &str = "__sp_tier_pred__";

#[derive(Debug, Clone, PartialEq)]
pub struct TierPlan {
    pub table: String,
    /// The date column as the statement's SQL names it (`t`.`txn_date`).
    pub col_ref: String,
    /// The primary-key columns, qualified likewise, and bare (for the window reads).
    pub pk_refs: Vec<String>,
    pub pk: Vec<String>,
    pub column: String,
    /// The query's own date ranges as SQL on the bare column (`None`: no date condition):
    /// a window read needs only the keys the query could return.
    pub window_filter: Option<String>,
    pub parts: Vec<Part>,
    pub windows: Vec<Window>,
    pub mode: TierMode,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TierMode {
    /// Every part at once: rows appended, newest tier first, or (under merge nodes) the
    /// merge's input.
    Read { node_sql: String },
    /// `ORDER BY <tier column> ... LIMIT offset, limit`: count rows per segment (`count_tail`
    /// is ` FROM ... WHERE ...` with the mark), then read the page's segments only; the merge
    /// nodes above (MergeSort, the Limit of the same page) order and cut them.
    Page {
        node_sql: String,
        count_tail: String,
        segments: Vec<Segment>,
        offset: u64,
        limit: u64,
    },
    /// A lookup by a unique poll column: tiers newest first, the first with rows answers.
    PollFirst { sql: String, params: Vec<Value> },
    /// UPDATE / DELETE on every part (copies in a window included), affected rows summed; a
    /// part that fails transiently is retried.
    Write {
        sql: String,
        params: Vec<Value>,
        retries: u32,
        retry_ms: u64,
    },
}

use crate::sql::write::quoted as quote;

impl TierPlan {
    /// Reads the newer tier's primary keys in window `w`.
    pub fn window_sql(&self, w: &Window) -> String {
        let cols: Vec<String> = self.pk.iter().map(|c| quote(c)).collect();
        let filter = self
            .window_filter
            .as_ref()
            .map(|f| format!(" AND ({f})"))
            .unwrap_or_default();
        format!(
            "SELECT {} FROM {} WHERE {}{filter}",
            cols.join(", "),
            quote(&self.table),
            w.pred(&quote(&self.column))
        )
    }

    /// What the older tier of window `w` must leave out, given the newer tier's keys there.
    /// `charset`: what the keys were read in (the session's connection charset).
    pub fn exclusion(&self, w: &Window, keys: &[Vec<Value>], charset: &str) -> Option<String> {
        if keys.is_empty() {
            return None;
        }
        let tuple = |row: &Vec<Value>| -> String {
            let vals: Vec<String> = row
                .iter()
                .map(|v| crate::sql::write::literal(v, charset))
                .collect();
            if vals.len() == 1 {
                vals[0].clone()
            } else {
                format!("({})", vals.join(", "))
            }
        };
        let lhs = if self.pk_refs.len() == 1 {
            self.pk_refs[0].clone()
        } else {
            format!("({})", self.pk_refs.join(", "))
        };
        let list: Vec<String> = keys.iter().map(tuple).collect();
        Some(format!(
            "NOT ({} AND {lhs} IN ({}))",
            w.pred(&self.col_ref),
            list.join(", ")
        ))
    }

    /// Part `i`'s predicate, with its window exclusion (`exclusions[w]`) if any.
    pub fn part_pred(&self, i: usize, exclusions: &[Option<String>]) -> String {
        let part = &self.parts[i];
        match part
            .exclude
            .and_then(|w| exclusions.get(w))
            .and_then(Option::as_ref)
        {
            Some(x) => format!("({}) AND {x}", part.pred),
            None => format!("({})", part.pred),
        }
    }

    /// The per-segment count query of part `i` (segments in page order).
    pub fn count_sql(&self, tail: &str, i: usize, pred: &str, segments: &[Segment]) -> String {
        let mut case = String::from("CASE");
        for (s, seg) in segments.iter().enumerate() {
            if seg.parts.contains(&i) {
                case.push_str(&format!(" WHEN {} THEN {s}", seg.pred(&self.col_ref)));
            }
        }
        case.push_str(" ELSE -1 END");
        format!(
            "SELECT {case} AS __sp_seg, COUNT(*){} GROUP BY __sp_seg",
            fill(tail, pred)
        )
    }

    /// The plan node's line (`lead` before it) and its details (`pad` before them);
    /// `merged`: merge nodes sit above it.
    pub fn describe(
        &self,
        topo: &Topology,
        f: &mut fmt::Formatter<'_>,
        lead: &str,
        pad: &str,
        merged: bool,
    ) -> fmt::Result {
        let tiers: Vec<String> = self
            .parts
            .iter()
            .map(|p| topo.node_name(p.node).to_string())
            .collect();
        let how = match &self.mode {
            TierMode::Read { .. } if merged => "rows to merge".to_string(),
            TierMode::Read { .. } => "rows appended, newest tier first".to_string(),
            TierMode::Page { offset, limit, .. } => format!(
                "page by the tier column: rows counted per date segment, then only the segments holding rows {offset}..{} read",
                offset.saturating_add(*limit)
            ),
            TierMode::PollFirst { .. } => {
                "unique poll: tiers asked newest first, the first with rows answers".into()
            }
            TierMode::Write { retries, .. } => {
                format!("write on every tier, affected rows summed, {retries} retries per tier")
            }
        };
        let primitive = match &self.mode {
            TierMode::Read { .. } => "TierRead",
            TierMode::Page { .. } => "TierPage",
            TierMode::PollFirst { .. } => "Poll",
            TierMode::Write { .. } => "TierWrite",
        };
        writeln!(
            f,
            "{lead}{primitive}: time_tier `{}` over {} ({how})",
            self.table,
            tiers.join(", ")
        )?;
        let filtered = matches!(self.mode, TierMode::Read { .. } | TierMode::Page { .. });
        for (i, p) in self.parts.iter().enumerate() {
            if !filtered {
                // Polls and writes send the statement as it is to each tier, in this order.
                writeln!(f, "{pad}  {}", topo.node_name(p.node))?;
                continue;
            }
            let excl = match p.exclude.and_then(|w| self.windows.get(w)) {
                Some(w) => format!(
                    " minus the keys {} holds in [{}, {})",
                    topo.node_name(w.node),
                    w.lo,
                    w.hi
                ),
                None => String::new(),
            };
            writeln!(
                f,
                "{pad}  {}: {}{excl}",
                topo.node_name(p.node),
                self.parts[i].pred
            )?;
        }
        match &self.mode {
            TierMode::Read { node_sql, .. } | TierMode::Page { node_sql, .. } => {
                writeln!(f, "{pad}  sql: {node_sql}")
            }
            TierMode::PollFirst { sql, .. } | TierMode::Write { sql, .. } => {
                writeln!(f, "{pad}  sql: {sql}")
            }
        }
    }
}

/// The ranges as a predicate on `col`; `None` for all values.
fn ranges_sql(col: &str, r: &Ranges<RangeKey>) -> Option<String> {
    use std::ops::Bound;
    if r.is_all() {
        return None;
    }
    if r.is_empty() {
        return Some("1 = 0".into());
    }
    let parts: Vec<String> = r
        .parts()
        .iter()
        .map(|(lo, hi)| {
            let mut c = Vec::new();
            match lo {
                Bound::Included(k) => c.push(format!("{col} >= {}", key_sql(k))),
                Bound::Excluded(k) => c.push(format!("{col} > {}", key_sql(k))),
                Bound::Unbounded => {}
            }
            match hi {
                Bound::Included(k) => c.push(format!("{col} <= {}", key_sql(k))),
                Bound::Excluded(k) => c.push(format!("{col} < {}", key_sql(k))),
                Bound::Unbounded => {}
            }
            if c.is_empty() {
                "1 = 1".to_string()
            } else {
                c.join(" AND ")
            }
        })
        .collect();
    Some(format!("({})", parts.join(") OR (")))
}

/// `sql` with the tier predicate in place of the mark.
pub fn fill(sql: &str, pred: &str) -> String {
    sql.replacen(MARK, pred, 1)
}

/// The tier's predicate joined to the WHERE in the text: `(where) AND mark`, or `WHERE
/// mark` where it has none.
fn with_mark(base: &mut select::Base<'_>) {
    base.edits.and_where(&base.clauses, MARK);
}

pub(super) fn plan_select(p: &Planner<'_>, q: &Query, u: &Use, rule: &TierRule) -> Plan {
    let b = match p.tier_bounds(rule) {
        Ok(b) => b,
        Err(e) => return refuse(format!("time_tier `{}`: {e}", u.table)),
    };
    let all = Ranges::all();
    let ranges = u.ranges.as_ref().unwrap_or(&all);
    let qual = u.alias.clone().unwrap_or_else(|| u.table.clone());
    let col_ref = format!("{}.{}", quote(&qual), quote(&rule.column));
    let layout = rule.layout(&b, ranges, &col_ref);
    match layout.parts.as_slice() {
        [] => return p.on(rule.tiers[0].node),
        [one] => return p.on(one.node),
        _ => {}
    }
    if p.sql.contains(MARK) {
        return refuse(format!("a statement containing `{MARK}`"));
    }
    let tier_plan = |mode: TierMode| -> Plan {
        Plan::Tier(Box::new(TierPlan {
            table: u.table.clone(),
            col_ref: col_ref.clone(),
            pk_refs: rule
                .primary_key
                .iter()
                .map(|c| format!("{}.{}", quote(&qual), quote(c)))
                .collect(),
            pk: rule.primary_key.clone(),
            column: rule.column.clone(),
            window_filter: ranges_sql(&quote(&rule.column), ranges),
            parts: layout.parts.clone(),
            windows: layout.windows.clone(),
            mode,
        }))
    };
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return refuse(format!(
            "this query form over several tiers of `{}`",
            u.table
        ));
    };
    // Poll: one value of a unique poll column and no date: newest tier first.
    if ranges.is_all() && rule.poll_unique && needs_merge(q).is_none() {
        for c in &rule.poll_columns {
            let k = p.qualified(&u.table, u.alias.as_deref(), c);
            if let Some(keys) = where_keys(sel.selection.as_ref(), &k, p.parsed, p.params) {
                if keys.len() == 1 {
                    return tier_plan(TierMode::PollFirst {
                        sql: p.sql.to_string(),
                        params: p.params.to_vec(),
                    });
                }
            }
        }
    }
    let in_from = sel.from.iter().any(|twj| {
        std::iter::once(&twj.relation)
            .chain(twj.joins.iter().map(|j| &j.relation))
            .any(|f| {
                super::uses::factor_name(f).is_some_and(|(t, a)| {
                    t == u.table
                        && a.map(|a| a.to_ascii_lowercase())
                            == u.alias.as_ref().map(|a| a.to_ascii_lowercase())
                })
            })
    });
    if !in_from {
        return refuse(format!(
            "`{}` read in a subquery over several tiers; shardproxy adds each tier's range to the outer query's WHERE only",
            u.table
        ));
    }
    let text = match crate::sql::text::Text::new(p.sql, p.parsed.mode) {
        Ok(t) => t,
        Err(e) => return refuse(format!("{e} over several tiers of `{}`", u.table)),
    };
    let mut base = match select::Base::new(&text, sel, p.parsed, p.bound()) {
        Ok(b) => b,
        Err(e) => return refuse(format!("{e} over several tiers of `{}`", u.table)),
    };
    with_mark(&mut base);
    let key = p.qualified(&u.table, u.alias.as_deref(), &rule.column);
    if let Some(page) = page_mode(q, &base, &key, &layout.segments) {
        return match page {
            Ok((mode, merge)) => merge.tree(tier_plan(mode)),
            Err(reason) => refuse(format!("{reason} over several tiers of `{}`", u.table)),
        };
    }
    if needs_merge(q).is_none() {
        return match base.edits.apply(&text, base.params) {
            Ok(node_sql) => tier_plan(TierMode::Read { node_sql }),
            Err(e) => refuse(format!("{e} over several tiers of `{}`", u.table)),
        };
    }
    match select::rewrite(q, &base) {
        Ok(rw) => rw.merge.tree(tier_plan(TierMode::Read {
            node_sql: rw.node_sql,
        })),
        Err(reason) => refuse(format!(
            "{reason} over several tiers of `{}` needs a merge that shardproxy cannot do correctly",
            u.table
        )),
    }
}

/// A page by the tier column: no grouping, ORDER BY starting with the column, a constant
/// LIMIT; the tier source and the merge above it (the page's own offset and limit). `None`
/// when the query is not one.
fn page_mode(
    q: &Query,
    base: &select::Base<'_>,
    key: &crate::sql::keys::KeyColumn,
    newest_first: &[Segment],
) -> Option<Result<(TierMode, select::MergeSpec), String>> {
    let first = match &q.order_by {
        Some(ob) => match &ob.kind {
            OrderByKind::Expressions(e) => e.first()?,
            _ => return None,
        },
        None => return None,
    };
    if !key.matches(&first.expr)
        || q.limit_clause.is_none()
        || !q.locks.is_empty()
        || q.fetch.is_some()
        || needs_merge_beyond_order(q)
    {
        return None;
    }
    let with_limit = match select::rewrite(q, base) {
        Ok(r) => r,
        Err(e) => return Some(Err(e)),
    };
    let mut unlimited = q.clone();
    unlimited.limit_clause = None;
    let rw = match select::rewrite(&unlimited, base) {
        Ok(r) => r,
        Err(e) => return Some(Err(e)),
    };
    let limit = with_limit.merge.limit?;
    let desc = rw.merge.order.first().is_some_and(|k| k.desc);
    // ` FROM ... WHERE ... AND mark`, as the client wrote its FROM and WHERE.
    let c = &base.clauses;
    let from = c.from?;
    let end = c.where_.map_or_else(|| c.where_at(), |w| w.body.1);
    let tail = match base
        .edits
        .apply_within(base.text, from.kw, end, base.params)
    {
        Ok(t) => t,
        Err(e) => return Some(Err(e)),
    };
    let count_tail = format!(" {}", tail.trim_end());
    // Descending dates read the newest segment first; ascending ones the oldest (NULL dates,
    // which MySQL sorts first ascending and last descending, sit at the oldest end).
    let mut segments = newest_first.to_vec();
    if !desc {
        segments.reverse();
    }
    let offset = with_limit.merge.offset;
    let merge = select::MergeSpec {
        offset,
        limit: Some(limit),
        ..rw.merge
    };
    Some(Ok((
        TierMode::Page {
            node_sql: rw.node_sql,
            count_tail,
            segments,
            offset,
            limit,
        },
        merge,
    )))
}

/// Grouping, aggregates, DISTINCT or HAVING: not a plain page of rows.
fn needs_merge_beyond_order(q: &Query) -> bool {
    let mut plain = q.clone();
    plain.order_by = None;
    plain.limit_clause = None;
    needs_merge(&plain).is_some()
}

pub(super) fn plan_write(p: &Planner<'_>, table: &str, rule: &TierRule, nodes: &[usize]) -> Plan {
    let parts: Vec<Part> = rule
        .tiers
        .iter()
        .enumerate()
        .filter(|(_, t)| nodes.contains(&t.node))
        .map(|(i, t)| Part {
            tier: i,
            node: t.node,
            pred: String::new(),
            exclude: None,
        })
        .collect();
    Plan::Tier(Box::new(TierPlan {
        table: table.to_string(),
        col_ref: String::new(),
        pk_refs: Vec::new(),
        pk: rule.primary_key.clone(),
        column: rule.column.clone(),
        window_filter: None,
        parts,
        windows: Vec::new(),
        mode: TierMode::Write {
            sql: p.sql.to_string(),
            params: p.params.to_vec(),
            retries: rule.poll_retries,
            retry_ms: rule.poll_retry_ms,
        },
    }))
}
