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
//! Only statements of tables sharded by slot without keys placed apart or salted, broadcast
//! and single tables: a range, directory or time-tier table is routed by comparing values,
//! not by a slot.

use mysql_common::value::Value;

use super::gather::{Gather, Ship};
use super::{Plan, Traced};
use crate::config::Topology;
use crate::routing::slot::{slot_of, slot_of_text};
use crate::routing::TableRule;
use crate::sql::digest::{Digest, Literal};

/// A traced slot's key: the literal whose value it is, or the slot and value as planned.
type TracedKey = Result<usize, (u16, Value)>;

/// What is done to each text of a plan, with the byte ranges into it the plan keeps.
type Each<'a> = dyn FnMut(&mut String, &mut [&mut (usize, usize)]) + 'a;

/// How one literal takes part in a kept plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sig {
    /// Served only as written.
    Exact(String),
    /// A plain integer or string, replaced by a marker: any one of its kind whose slot is on
    /// these nodes (one per table of the statement sharded by slot) takes the same plan.
    Slot { string: bool, nodes: Vec<usize> },
}

/// A shape's plan with markers, for the executions of one signature.
#[derive(Debug, Clone)]
pub struct Template {
    pub sig: Vec<Sig>,
    plan: Plan,
    /// Each literal's marker (`None`: served as written).
    markers: Vec<Option<String>>,
    /// The slots it was routed to by key: the table, and the literal whose value it was (or
    /// the value itself, where no marker was it).
    traced: Vec<(String, TracedKey)>,
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

/// Does the literal at `span` read as itself only (after LIMIT or OFFSET, a sign, a type
/// word or an introducer)?
fn exact_context(sql: &str, span: (usize, usize), prev: Option<(usize, usize)>) -> bool {
    let before = sql[..span.0].trim_end();
    // `_utf8mb4'x'`, `X'41'`, `N'x'`: a word glued to the literal.
    if sql[..span.0]
        .bytes()
        .last()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return true;
    }
    if before.ends_with(['-', '+', '~']) {
        return true;
    }
    let word_before = |text: &str| {
        let w = text.rsplit(|c: char| !c.is_ascii_alphanumeric() && c != '_');
        w.into_iter().next().unwrap_or("").to_ascii_uppercase()
    };
    let word = word_before(before);
    if matches!(
        word.as_str(),
        "LIMIT" | "OFFSET" | "DATE" | "TIME" | "TIMESTAMP" | "INTERVAL" | "BINARY" | "COLLATE"
    ) {
        return true;
    }
    // `LIMIT 10, 20`: the count after the offset.
    if let (Some(rest), Some(p)) = (before.strip_suffix(','), prev) {
        if rest.trim_end().len() == p.1 {
            return word_before(sql[..p.0].trim_end()) == "LIMIT";
        }
    }
    false
}

/// The signature of an execution: each literal's part, by the nodes of its slot in each of
/// `tables` (`None` where a literal's value cannot be told without the parser).
pub fn signature(sql: &str, d: &Digest, topo: &Topology, tables: &[String]) -> Option<Vec<Sig>> {
    let maps: Vec<_> = tables
        .iter()
        .map(|t| match topo.table(t) {
            Some(TableRule::HashSlot { map, .. }) => Some(map),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let mut sig = Vec::with_capacity(d.literals.len());
    for (i, (lit, span)) in d.literals.iter().zip(&d.spans).enumerate() {
        let text = sql.get(span.0..span.1)?;
        let prev = i.checked_sub(1).and_then(|p| d.spans.get(p)).copied();
        let markable = match lit {
            Literal::Number(n) => n.bytes().all(|b| b.is_ascii_digit()),
            Literal::Str(s) => s.is_some(),
        };
        if !markable || exact_context(sql, *span, prev) {
            sig.push(Sig::Exact(text.to_string()));
            continue;
        }
        let slot = slot_of(&lit.value()?)?;
        sig.push(Sig::Slot {
            string: matches!(lit, Literal::Str(_)),
            nodes: maps.iter().map(|m| m.node_of_slot(slot)).collect(),
        });
    }
    Some(sig)
}

/// The markers for the first execution's literals (in their slots), and its text with them
/// in place of the literals.
pub fn marked(sql: &str, d: &Digest, sig: &[Sig]) -> Option<(String, Vec<Option<String>>)> {
    let mut out = String::with_capacity(sql.len() + 16 * sig.len());
    let mut markers = Vec::with_capacity(sig.len());
    let mut at = 0;
    for (i, ((lit, span), s)) in d.literals.iter().zip(&d.spans).zip(sig).enumerate() {
        let Sig::Slot { string, .. } = s else {
            markers.push(None);
            continue;
        };
        let slot = slot_of(&lit.value()?)?;
        let marker = marker(i, *string, slot)?;
        out.push_str(sql.get(at..span.0)?);
        if *string {
            out.push('\'');
            out.push_str(&marker);
            out.push('\'');
        } else {
            out.push_str(&marker);
        }
        at = span.1;
        markers.push(Some(marker));
    }
    out.push_str(sql.get(at..)?);
    Some((out, markers))
}

/// A marker of the `i`-th literal in `slot`: a 19-digit integer or a string no statement
/// writes by chance.
fn marker(i: usize, string: bool, slot: u16) -> Option<String> {
    let i = u64::try_from(i).ok()?;
    (0..100_000u64)
        .map(|n| {
            if string {
                format!("shardproxy_marker_{i}_{n}_")
            } else {
                (8_100_000_000_000_000_000u64 + i * 10_000_000_000 + n).to_string()
            }
        })
        .find(|m| slot_of_text(m.as_bytes()) == slot)
}

/// What replaces each marker in an execution: the literal's text, as the client wrote it.
fn replacements<'a>(
    sql: &'a str,
    d: &Digest,
    markers: &'a [Option<String>],
) -> Option<Vec<(&'a str, &'a str)>> {
    markers
        .iter()
        .zip(&d.spans)
        .filter_map(|(m, span)| {
            let m = m.as_deref()?;
            // A string's marker stands inside its quotes, as the literal's content does.
            let span = if sql.as_bytes().get(span.0) == Some(&b'\'') {
                (span.0 + 1, span.1 - 1)
            } else {
                *span
            };
            Some(sql.get(span.0..span.1).map(|t| (m, t)))
        })
        .collect()
}

impl Template {
    /// The template of `marked_plan` (made from the first execution's text with `markers`),
    /// if it gives back exactly `plan` and `traced` for that execution.
    pub fn agreed(
        sql: &str,
        d: &Digest,
        sig: Vec<Sig>,
        markers: Vec<Option<String>>,
        (marked_plan, marked_traced): (Plan, Vec<Traced>),
        (plan, traced): (&Plan, &[Traced]),
    ) -> Option<Template> {
        if !kept_kind(plan) {
            return None;
        }
        let marked_traced = marked_traced
            .into_iter()
            .map(|t| {
                let key = crate::value::text_form(&t.key);
                let lit = markers
                    .iter()
                    .position(|m| m.as_deref().map(str::as_bytes) == key.as_deref());
                (t.table, lit.ok_or((t.slot, t.key)))
            })
            .collect();
        let t = Template {
            sig,
            plan: marked_plan,
            markers,
            traced: marked_traced,
        };
        let (again, again_traced) = t.instantiate(sql, d)?;
        let same_traced = again_traced.len() == traced.len()
            && again_traced
                .iter()
                .zip(traced)
                .all(|(a, b)| a.table == b.table && a.slot == b.slot && a.key == b.key);
        (again == *plan && same_traced).then_some(t)
    }

    /// The plan of an execution of the same signature, and the slots it is routed to by key.
    pub fn instantiate(&self, sql: &str, d: &Digest) -> Option<(Plan, Vec<Traced>)> {
        let subs = replacements(sql, d, &self.markers)?;
        let mut plan = self.plan.clone();
        texts(&mut plan, &mut |s, at| replace(s, &subs, at));
        let mut traced = Vec::with_capacity(self.traced.len());
        for (table, key) in &self.traced {
            let (slot, key) = match key {
                Ok(i) => {
                    let v = d.literals.get(*i)?.value()?;
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
