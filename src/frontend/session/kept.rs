//! Join plans kept for a statement's shape (`crate::plan::template`): found for an
//! execution before it is parsed (a text statement) or planned, and made after the first
//! full planning of a signature.

use std::sync::Arc;

use mysql_common::value::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::Session;
use crate::config::Topology;
use crate::plan::cache::{Entry, Kept};
use crate::plan::template::{self, Lits, Template};
use crate::plan::{Plan, Traced};
use crate::sql::Parsed;

/// One execution as the kept plans see it: the statement's text, and its literals (a text
/// statement's) or its bound values (a prepared one's).
pub(super) struct Execution<'a> {
    pub sql: &'a str,
    pub lits: Lits<'a>,
    /// A prepared statement's bound values (empty for a text statement).
    pub params: &'a [Value],
    pub prepared: bool,
}

impl<'a> Execution<'a> {
    /// A text statement, by its digest.
    pub fn text(sql: &'a str, d: &crate::sql::digest::Digest) -> Option<Execution<'a>> {
        Some(Execution {
            sql,
            lits: Lits::of_text(sql, d)?,
            params: &[],
            prepared: false,
        })
    }

    /// A prepared statement's execution.
    pub fn prepared(
        sql: &'a str,
        mode: crate::sql::lex::Mode,
        params: &'a [Value],
        charset: &str,
    ) -> Option<Execution<'a>> {
        Some(Execution {
            sql,
            lits: Lits::of_params(sql, mode, params, charset)?,
            params,
            prepared: true,
        })
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// The kept join plan of this execution, and the slots it is routed to by key, if its
    /// shape keeps one for its signature and no read it starts with overflowed lately.
    pub(super) fn kept_plan(
        &self,
        e: &Entry,
        x: &Execution<'_>,
        topo: &Topology,
    ) -> Option<(Plan, Vec<Traced>)> {
        let db = self.nodes.db();
        let charset = &crate::exec::door::Door::state(&self.nodes).charset;
        let epoch = self.shared.plans.epoch();
        let kept = e.kept_for(x.prepared, topo.version, db, charset, epoch, |tables| {
            template::signature(x.sql, &x.lits, topo, tables)
        })?;
        let (plan, traced) = kept.template.instantiate(&x.lits)?;
        let overflowed = Template::overflow_reads(&plan).into_iter().any(|read| {
            self.shared
                .overflowed
                .contains_key(&crate::shared::column_key(db, read))
        });
        (!overflowed).then_some((plan, traced))
    }

    /// After a full planning: keeps its plan for the executions of its signature when it
    /// is a read across placements whose literals the planner only carries and routes by
    /// (see `crate::plan::template`).
    pub(super) fn keep_plan(
        &self,
        e: &Entry,
        x: &Execution<'_>,
        parsed: &Parsed,
        (plan, traced): (&Plan, &[Traced]),
        topo: &Arc<Topology>,
    ) {
        if e.unkept() || !template::kept_kind(plan) || !self.shared.plans.room() {
            return;
        }
        let sqlparser::ast::Statement::Query(q) = &parsed.stmt else {
            return;
        };
        if !q.locks.is_empty() {
            return;
        }
        let Some(tables) = template::tables(&parsed.stmt, topo) else {
            return;
        };
        let db = self.nodes.db().map(str::to_string);
        let charset = crate::exec::door::Door::state(&self.nodes).charset.clone();
        let Some(sig) = template::signature(x.sql, &x.lits, topo, &tables) else {
            return;
        };
        let Some(markers) = template::markers(&x.lits, &sig, &charset) else {
            return;
        };
        // Planned with what the first planning read (columns, statistics).
        let made = if x.prepared {
            let params = markers.marked_params(x.params);
            self.shared
                .with_plan_ctx(topo, db.as_deref(), &charset, |ctx| {
                    crate::plan::plan_traced(x.sql, Ok(parsed), &params, topo, ctx)
                })
        } else {
            let Some(text) = markers.marked_text(x.sql, &x.lits) else {
                return;
            };
            let Ok(marked) = crate::sql::parse_in(&text, self.mode()) else {
                e.keep(None);
                return;
            };
            self.shared
                .with_plan_ctx(topo, db.as_deref(), &charset, |ctx| {
                    crate::plan::plan_traced(&text, Ok(&marked), &[], topo, ctx)
                })
        };
        // A plan that still waits for something is not kept, this time.
        if matches!(
            made.0,
            Plan::NeedLookup(_)
                | Plan::NeedIndex(_)
                | Plan::NeedWeights(_)
                | Plan::NeedColumns { .. }
                | Plan::NeedRows { .. }
                | Plan::NeedIds { .. }
                | Plan::NeedKey { .. }
        ) {
            return;
        }
        let t = Template::agreed(&x.lits, sig, markers, made, (plan, traced));
        e.keep(t.map(|template| Kept {
            template,
            version: topo.version,
            db,
            charset,
            epoch: self.shared.plans.epoch(),
            made: std::time::Instant::now(),
            tables,
            prepared: x.prepared,
            counted: crate::plan::cache::Counted::new(),
        }));
    }
}
