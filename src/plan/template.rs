//! Plans of reads across placements (a gathered, shipped or spread join) kept for their
//! statement's shape, so that a repeated join is not planned at every execution.
//!
//! A text statement's literals flow through such a plan as text: each node statement is the
//! client's, renamed by token spans, and the outer rows' read writes the client's own
//! conjuncts. What else a literal decides is where rows are: a value compared to a shard key
//! picks its slot's node. So a plan made for one execution holds for another of the same
//! shape whose every literal reads as a literal of its kind whose slot is on the same node of
//! each table sharded by slot, once the literals' texts are put in.
//!
//! Where the literals are in the plan is found by planning the statement once more with each
//! literal replaced by a marker: a number or a string of its own, chosen in the literal's
//! slot, that nothing else in the statement writes. The plan with the markers is kept when,
//! given the first execution's literals in place of its markers, it is exactly the plan the
//! planner made for them (nodes, merges, texts and all). Literals that are not plain
//! integers or plain strings, or that stand after LIMIT, OFFSET, a sign or a type word, are
//! not marked: the kept plan serves only their own text.
//!
//! A prepared statement's bound values are taken alike ([`Lits::of_params`]): an integer, a
//! whole double (a JavaScript driver's number) or a string is marked by a value of its kind,
//! found in the plan's lists of bound values and, written by the literal writer, where the
//! plan writes values in (the outer rows' read); any other value is served only as bound.
//!
//! Only statements of tables sharded by slot without keys placed apart or salted, broadcast
//! and single tables: a range, directory or time-tier table is routed by comparing values,
//! not by a slot.

use mysql_common::value::Value;

use super::gather::{Gather, Ship};
use super::{Plan, Traced};
use crate::config::Topology;
use crate::routing::slot::slot_of;
use crate::routing::TableRule;
use crate::sql::digest::{Digest, Literal};

/// A traced slot's key: the literal whose value it is, or the slot and value as planned.
type TracedKey = Result<usize, (u16, Value)>;

/// What is done to each text of a plan, with the byte ranges into it the plan keeps.
type Each<'a> = dyn FnMut(&mut String, &mut [&mut (usize, usize)]) + 'a;

/// How one literal takes part in a kept plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sig {
    /// Served only as written (a bound value: as it was bound).
    Exact(String),
    /// Replaced by a marker: any value of its kind whose slot is on these nodes (one per
    /// table of the statement sharded by slot) takes the same plan.
    Slot { kind: Kind, nodes: Vec<usize> },
}

/// The kinds of values a marker stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    UInt,
    /// A whole double below 10^15 (what a driver binds a number as), keyed by its integer.
    Double,
    /// A string that is not an integer's other text (`'012'` is keyed as 12).
    Str,
}

/// One execution's literals (a text statement's) or bound values (a prepared one's).
#[derive(Debug)]
pub struct Lits<'a> {
    /// Where each stands in the statement (a prepared one's: its `?`).
    spans: Vec<(usize, usize)>,
    /// Its value, where it can be told without the parser.
    values: Vec<Option<Value>>,
    /// Its text as a plan holds it: a literal's as the client wrote it (a string's content
    /// between its quotes), a bound value's as the literal writer writes it.
    texts: Vec<std::borrow::Cow<'a, str>>,
    /// A text statement's literals as written, quotes and all (what a literal served as
    /// written is told by: `1.5` and `'1.5'` share a shape).
    written: Vec<&'a str>,
    /// Bound values, each of a kind (a text literal's kind is its text's).
    bound: bool,
}

impl<'a> Lits<'a> {
    /// A text statement's literals, as its digest found them.
    pub fn of_text(sql: &'a str, d: &Digest) -> Option<Lits<'a>> {
        let mut texts = Vec::with_capacity(d.spans.len());
        let mut written = Vec::with_capacity(d.spans.len());
        for &(a, b) in &d.spans {
            written.push(sql.get(a..b)?);
            let quoted = sql.as_bytes().get(a) == Some(&b'\'');
            let (a, b) = if quoted { (a + 1, b - 1) } else { (a, b) };
            texts.push(std::borrow::Cow::Borrowed(sql.get(a..b)?));
        }
        let values = d
            .literals
            .iter()
            .map(|l| match l {
                Literal::Number(n) if n.bytes().all(|b| b.is_ascii_digit()) => l.value(),
                Literal::Number(_) => None,
                Literal::Str(_) => l.value(),
            })
            .collect();
        Some(Lits {
            spans: d.spans.clone(),
            values,
            texts,
            written,
            bound: false,
        })
    }

    /// A prepared statement's bound values (`sql` lexed in `mode`; the literal writer's
    /// character set `charset`).
    pub fn of_params(
        sql: &str,
        mode: crate::sql::lex::Mode,
        params: &[Value],
        charset: &str,
    ) -> Option<Lits<'static>> {
        let spans: Vec<(usize, usize)> = crate::sql::lex::statement_tokens(sql, mode)
            .iter()
            .filter(|t| t.kind == crate::sql::lex::Kind::Param)
            .map(|t| (t.start, t.end))
            .collect();
        if spans.len() != params.len() {
            return None;
        }
        let texts = params
            .iter()
            .map(|v| {
                let mut out = String::new();
                crate::sql::write::value(&mut out, v, charset);
                std::borrow::Cow::Owned(out)
            })
            .collect();
        Some(Lits {
            spans,
            values: params.iter().cloned().map(Some).collect(),
            texts,
            written: Vec::new(),
            bound: true,
        })
    }

    /// The kind of the `i`-th value a marker can stand for, if any.
    fn kind(&self, i: usize) -> Option<Kind> {
        let v = self.values.get(i)?.as_ref()?;
        match v {
            Value::Int(_) => Some(Kind::Int),
            Value::UInt(_) if self.bound => Some(Kind::UInt),
            Value::Double(d) if self.bound && d.fract() == 0.0 && d.abs() < 1e15 => {
                Some(Kind::Double)
            }
            Value::Bytes(_) if crate::value::integer_alias(v).is_none() => Some(Kind::Str),
            _ => None,
        }
    }

    /// The `i`-th value's part in a signature, without its nodes.
    fn exact(&self, i: usize) -> String {
        if self.bound {
            format!("{:?}", self.values.get(i))
        } else {
            self.written
                .get(i)
                .map(|t| t.to_string())
                .unwrap_or_default()
        }
    }
}

/// The statement's tables sharded by slot, when every table it names can have its plan
/// kept (see the module docs); `None` otherwise.
pub fn tables(stmt: &sqlparser::ast::Statement, topo: &Topology) -> Option<Vec<String>> {
    let mut names = Vec::new();
    let mut fit = true;
    let _ = sqlparser::ast::visit_relations(stmt, |n| {
        let name = crate::sql::table_name(n);
        if topo.indexes_of(&name).is_some() {
            fit = false;
        }
        match topo.table(&name) {
            Some(TableRule::HashSlot { map, .. }) => {
                let plain = !map.is_moving()
                    && map.salt().is_none()
                    && map.salted().is_empty()
                    && map.split_keys().is_empty()
                    && map.key_moves().is_empty();
                fit &= plain;
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            Some(TableRule::Broadcast | TableRule::Single { .. }) | None => {}
            Some(_) => fit = false,
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    fit.then_some(names)
}

/// The word that ends `text` (empty if none).
fn word_before(text: &str) -> &str {
    let mut words = text.rsplit(|c: char| !c.is_ascii_alphanumeric() && c != '_');
    words.next().unwrap_or("")
}

/// Does the literal at `span` read as itself only (after LIMIT or OFFSET, a sign, a type
/// word or an introducer, or `ORDER BY 2`'s column number)?
fn exact_context(sql: &str, span: (usize, usize), prev: Option<(usize, usize)>) -> bool {
    let Some(head) = sql.get(..span.0) else {
        return true;
    };
    let before = head.trim_end();
    // `_utf8mb4'x'`, `X'41'`, `N'x'`: a word glued to the literal.
    if head
        .bytes()
        .last()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return true;
    }
    if before.ends_with(['-', '+', '~']) {
        return true;
    }
    let word = word_before(before);
    let exact_after = [
        "LIMIT",
        "OFFSET",
        "BY",
        "DATE",
        "TIME",
        "TIMESTAMP",
        "INTERVAL",
        "BINARY",
        "COLLATE",
    ];
    if exact_after.iter().any(|w| w.eq_ignore_ascii_case(word)) {
        return true;
    }
    // `LIMIT 10, 20`: the count after the offset.
    if let (Some(rest), Some(p)) = (before.strip_suffix(','), prev) {
        if rest.trim_end().len() == p.1 {
            return sql
                .get(..p.0)
                .is_none_or(|h| word_before(h.trim_end()).eq_ignore_ascii_case("LIMIT"));
        }
    }
    false
}

/// The signature of an execution: each literal's part, by the nodes of its slot in each of
/// `tables`.
pub fn signature(
    sql: &str,
    lits: &Lits<'_>,
    topo: &Topology,
    tables: &[String],
) -> Option<Vec<Sig>> {
    let maps: Vec<_> = tables
        .iter()
        .map(|t| match topo.table(t) {
            Some(TableRule::HashSlot { map, .. }) => Some(map),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let mut sig = Vec::with_capacity(lits.spans.len());
    for (i, span) in lits.spans.iter().enumerate() {
        let prev = i.checked_sub(1).and_then(|p| lits.spans.get(p)).copied();
        let kind = lits.kind(i).filter(|_| !exact_context(sql, *span, prev));
        let slot = lits.values[i].as_ref().and_then(slot_of);
        match (kind, slot) {
            (Some(kind), Some(slot)) => sig.push(Sig::Slot {
                kind,
                nodes: maps.iter().map(|m| m.node_of_slot(slot)).collect(),
            }),
            _ => sig.push(Sig::Exact(lits.exact(i))),
        }
    }
    Some(sig)
}

/// The markers of an execution of signature `sig`: for each marked literal, a value of its
/// kind in its slot, and the text a plan holds it as.
pub fn markers(lits: &Lits<'_>, sig: &[Sig], charset: &str) -> Option<Markers> {
    let mut m = Markers::default();
    for (i, s) in sig.iter().enumerate() {
        let Sig::Slot { kind, .. } = s else {
            m.values.push(None);
            m.texts.push(None);
            continue;
        };
        let slot = slot_of(lits.values.get(i)?.as_ref()?)?;
        let v = marker(i, *kind, slot)?;
        let text = if lits.bound {
            let mut out = String::new();
            crate::sql::write::value(&mut out, &v, charset);
            out
        } else {
            String::from_utf8(crate::value::text_form(&v)?).ok()?
        };
        m.values.push(Some(v));
        m.texts.push(Some(text));
    }
    Some(m)
}

/// Each literal's marker, as a value and as the text a plan holds it as.
#[derive(Debug, Clone, Default)]
pub struct Markers {
    pub values: Vec<Option<Value>>,
    texts: Vec<Option<String>>,
}

impl Markers {
    /// A text statement with its marked literals replaced by their markers.
    pub fn marked_text(&self, sql: &str, lits: &Lits<'_>) -> Option<String> {
        let mut out = String::with_capacity(sql.len() + 16 * self.texts.len());
        let mut at = 0;
        for (span, (t, v)) in lits.spans.iter().zip(self.texts.iter().zip(&self.values)) {
            let Some(t) = t else { continue };
            out.push_str(sql.get(at..span.0)?);
            if matches!(v, Some(Value::Bytes(_))) {
                out.push('\'');
                out.push_str(t);
                out.push('\'');
            } else {
                out.push_str(t);
            }
            at = span.1;
        }
        out.push_str(sql.get(at..)?);
        Some(out)
    }

    /// A prepared statement's values with its marked ones replaced by their markers.
    pub fn marked_params(&self, params: &[Value]) -> Vec<Value> {
        params
            .iter()
            .zip(&self.values)
            .map(|(p, m)| m.clone().unwrap_or_else(|| p.clone()))
            .collect()
    }
}

/// A marker of the `i`-th literal in `slot`: a number or a string no statement writes by
/// chance.
fn marker(i: usize, kind: Kind, slot: u16) -> Option<Value> {
    let i = u64::try_from(i).ok()?;
    (0..100_000u64)
        .map(|n| match kind {
            Kind::Int => i64::try_from(8_100_000_000_000_000_000u64 + i * 10_000_000_000 + n)
                .map_or(Value::NULL, Value::Int),
            Kind::UInt => Value::UInt(8_100_000_000_000_000_000u64 + i * 10_000_000_000 + n),
            Kind::Double => Value::Double((410_000_000_000_000 + i * 1_000_000_000 + n) as f64),
            Kind::Str => Value::Bytes(format!("shardproxy_marker_{i}_{n}_").into_bytes()),
        })
        .find(|m| slot_of(m) == Some(slot))
}

/// A shape's plan with markers, for the executions of one signature.
#[derive(Debug, Clone)]
pub struct Template {
    pub sig: Vec<Sig>,
    plan: Plan,
    /// Each literal's marker (`None`: served as written).
    markers: Markers,
    /// The slots it was routed to by key: the table, and the literal whose value it was (or
    /// the slot and value as planned, where no marker was it).
    traced: Vec<(String, TracedKey)>,
}

impl Template {
    /// The template of `marked_plan` (planned with `markers` in place of the first
    /// execution's `lits`), if it gives back exactly `plan` and `traced` for that execution.
    pub fn agreed(
        lits: &Lits<'_>,
        sig: Vec<Sig>,
        markers: Markers,
        (marked_plan, marked_traced): (Plan, Vec<Traced>),
        (plan, traced): (&Plan, &[Traced]),
    ) -> Option<Template> {
        if !kept_kind(plan) {
            return None;
        }
        let marked_traced = marked_traced
            .into_iter()
            .map(|t| {
                let lit = markers
                    .values
                    .iter()
                    .position(|m| m.as_ref() == Some(&t.key));
                (t.table, lit.ok_or((t.slot, t.key)))
            })
            .collect();
        let t = Template {
            sig,
            plan: marked_plan,
            markers,
            traced: marked_traced,
        };
        let (again, again_traced) = t.instantiate(lits)?;
        let same_traced = again_traced.len() == traced.len()
            && again_traced
                .iter()
                .zip(traced)
                .all(|(a, b)| a.table == b.table && a.slot == b.slot && a.key == b.key);
        (again == *plan && same_traced).then_some(t)
    }

    /// The plan of an execution of the same signature, and the slots it is routed to by key.
    pub fn instantiate(&self, lits: &Lits<'_>) -> Option<(Plan, Vec<Traced>)> {
        let mut subs = Vec::new();
        let mut values = Vec::new();
        for (i, (t, v)) in self
            .markers
            .texts
            .iter()
            .zip(&self.markers.values)
            .enumerate()
        {
            if let (Some(t), Some(v)) = (t, v) {
                subs.push((t.as_str(), lits.texts.get(i)?.as_ref()));
                values.push((v, lits.values.get(i)?.as_ref()?));
            }
        }
        let mut plan = self.plan.clone();
        texts(&mut plan, &mut |s, at| replace(s, &subs, at));
        if lits.bound {
            bound_values(&mut plan, &mut |params| {
                for p in params.iter_mut() {
                    if let Some((_, v)) = values.iter().find(|(m, _)| *m == p) {
                        *p = (*v).clone();
                    }
                }
            });
        }
        let mut traced = Vec::with_capacity(self.traced.len());
        for (table, key) in &self.traced {
            let (slot, key) = match key {
                Ok(i) => {
                    let v = lits.values.get(*i)?.clone()?;
                    (slot_of(&v)?, v)
                }
                Err((slot, v)) => (*slot, v.clone()),
            };
            traced.push(Traced {
                table: table.clone(),
                slot,
                key,
            });
        }
        traced.sort_by(|a, b| (&a.table, a.slot).cmp(&(&b.table, b.slot)));
        traced.dedup_by(|a, b| a.table == b.table && a.slot == b.slot);
        Some((plan, traced))
    }

    /// The reads whose recent overflow makes the planner choose otherwise (the kept plan is
    /// then not used: the statement is planned in full).
    pub fn overflow_reads(plan: &Plan) -> Vec<&str> {
        fn ships(g: &[Ship]) -> Vec<&str> {
            g.iter()
                .filter_map(|s| s.bind.as_ref().map(|b| b.keys.as_str()))
                .collect()
        }
        match plan {
            Plan::Spread(s) => {
                let mut v = ships(&s.gather.ships);
                v.push(s.read.as_str());
                v
            }
            Plan::Gather(g) => ships(&g.ships),
            Plan::Shipped(s) => ships(&s.ships),
            _ => Vec::new(),
        }
    }
}

/// The plans kept: reads across placements.
pub fn kept_kind(plan: &Plan) -> bool {
    matches!(plan, Plan::Spread(_) | Plan::Gather(_) | Plan::Shipped(_))
}

/// `s` with each marker replaced, the byte ranges `at` into it moved alike.
fn replace(s: &mut String, subs: &[(&str, &str)], at: &mut [&mut (usize, usize)]) {
    let mut found: Vec<(usize, usize, &str)> = Vec::new();
    for (m, text) in subs {
        let mut from = 0;
        while let Some(p) = s[from..].find(m) {
            found.push((from + p, m.len(), text));
            from += p + m.len();
        }
    }
    if found.is_empty() {
        return;
    }
    found.sort_unstable_by_key(|f| f.0);
    let mut out = String::with_capacity(s.len() + 32);
    let mut last = 0;
    let shift = |p: usize| -> usize {
        let mut q = p;
        for (start, len, text) in &found {
            if *start + *len <= p {
                q = (q + text.len()).saturating_sub(*len);
            }
        }
        q
    };
    for r in at.iter_mut() {
        **r = (shift(r.0), shift(r.1));
    }
    for (start, len, text) in &found {
        out.push_str(&s[last..*start]);
        out.push_str(text);
        last = start + len;
    }
    out.push_str(&s[last..]);
    *s = out;
}

/// Every text of a plan of reads across placements, each with the byte ranges into it the
/// plan keeps. Texts of other plans are left: a marker left there makes the plan disagree.
fn texts(plan: &mut Plan, f: &mut Each<'_>) {
    match plan {
        Plan::Route(t) => f(&mut t.sql, &mut []),
        Plan::Scatter { targets, .. } => {
            for t in targets {
                f(&mut t.sql, &mut []);
            }
        }
        Plan::Project { input, .. }
        | Plan::Limit { input, .. }
        | Plan::Aggregate { input, .. }
        | Plan::MergeSort { input, .. }
        | Plan::ValuesOrder { input, .. } => texts(input, f),
        Plan::Gather(g) => gather_texts(g, f),
        Plan::Shipped(s) => {
            ship_texts(&mut s.ships, f);
            f(&mut s.sql, &mut []);
            texts(&mut s.then, f);
        }
        Plan::Spread(s) => {
            gather_texts(&mut s.gather, f);
            f(&mut s.read, &mut []);
            f(&mut s.on, &mut []);
            let mut at = s.at.iter_mut();
            match s.then.source_mut() {
                Plan::Route(t) => {
                    let mut here: Vec<&mut (usize, usize)> = at.next().into_iter().collect();
                    f(&mut t.sql, &mut here);
                }
                Plan::Scatter { targets, .. } => {
                    for t in targets {
                        let mut here: Vec<&mut (usize, usize)> = at.next().into_iter().collect();
                        f(&mut t.sql, &mut here);
                    }
                }
                _ => {}
            }
        }
        _ => {}
    }
}

/// Every list of bound values of a plan of reads across placements.
fn bound_values(plan: &mut Plan, f: &mut dyn FnMut(&mut Vec<Value>)) {
    match plan {
        Plan::Route(t) => f(&mut t.params),
        Plan::Scatter { targets, .. } => {
            for t in targets {
                f(&mut t.params);
            }
        }
        Plan::Project { input, .. }
        | Plan::Limit { input, .. }
        | Plan::Aggregate { input, .. }
        | Plan::MergeSort { input, .. }
        | Plan::ValuesOrder { input, .. } => bound_values(input, f),
        Plan::Gather(g) => f(&mut g.params),
        Plan::Shipped(s) => bound_values(&mut s.then, f),
        Plan::Spread(s) => {
            f(&mut s.gather.params);
            bound_values(&mut s.then, f);
        }
        _ => {}
    }
}

fn gather_texts(g: &mut Gather, f: &mut Each<'_>) {
    let mut at: Vec<&mut (usize, usize)> = g
        .ships
        .iter_mut()
        .filter_map(|s| s.bind.as_mut().and_then(|b| b.at.as_mut()))
        .collect();
    f(&mut g.sql, &mut at);
    ship_texts(&mut g.ships, f);
}

fn ship_texts(ships: &mut [Ship], f: &mut Each<'_>) {
    for s in ships {
        for (_, read) in &mut s.reads {
            f(read, &mut []);
        }
        if let Some(b) = &mut s.bind {
            f(&mut b.keys, &mut []);
            f(&mut b.head, &mut []);
            f(&mut b.on, &mut []);
            f(&mut b.outer.filter, &mut []);
        }
    }
}
