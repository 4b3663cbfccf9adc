//! Join plans kept for a text statement's shape (`crate::plan::template`): found for an
//! execution before it is parsed, and made after the first full planning of a signature.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};

use super::Session;
use crate::config::Topology;
use crate::plan::cache::{Entry, Kept};
use crate::plan::template::{self, Template};
use crate::plan::{Plan, Traced};
use crate::sql::digest::Digest;
use crate::sql::Parsed;

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Session<S> {
    /// The kept join plan of this execution, and the slots it is routed to by key, if its
    /// shape keeps one for its signature and no read it starts with overflowed lately.
    pub(super) fn kept_plan(
        &self,
        e: &Entry,
        d: &Digest,
        sql: &str,
        topo: &Topology,
    ) -> Option<(Plan, Vec<Traced>)> {
        let db = self.nodes.db();
        let charset = &crate::exec::door::Door::state(&self.nodes).charset;
        let epoch = self.shared.plans.epoch();
        let kept = e.kept_for(topo.version, db, charset, epoch, |tables| {
            template::signature(sql, d, topo, tables)
        })?;
        let (plan, traced) = kept.template.instantiate(sql, d)?;
        let overflowed = Template::overflow_reads(&plan).into_iter().any(|read| {
            self.shared
                .overflowed
                .contains_key(&crate::shared::column_key(db, read))
        });
        (!overflowed).then_some((plan, traced))
    }

    /// After a full planning of a text statement: keeps its plan for the executions of its
    /// signature when it is a read across placements whose literals the planner only
    /// carries and routes by (see `crate::plan::template`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn keep_plan(
        &self,
        e: &Entry,
        d: &Digest,
        sql: &str,
        parsed: &Parsed,
        plan: &Plan,
        traced: &[Traced],
        topo: &Arc<Topology>,
    ) {
        if e.unkept.load(std::sync::atomic::Ordering::Relaxed) || !template::kept_kind(plan) {
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
        let Some(sig) = template::signature(sql, d, topo, &tables) else {
            return;
        };
        let Some((text, markers)) = template::marked(sql, d, &sig) else {
            return;
        };
        let db = self.nodes.db().map(str::to_string);
        let charset = crate::exec::door::Door::state(&self.nodes).charset.clone();
        let Ok(marked) = crate::sql::parse_in(&text, self.mode()) else {
            e.keep(None);
            return;
        };
        // Planned with what the first planning read (columns, statistics): a plan that
        // still waits for something is not kept, this time.
        let made = self
            .shared
            .with_plan_ctx(topo, db.as_deref(), &charset, |ctx| {
                crate::plan::plan_traced(&text, Ok(&marked), &[], topo, ctx)
            });
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
        let t = Template::agreed(sql, d, sig, markers, made, (plan, traced));
        e.keep(t.map(|template| Kept {
            template,
            version: topo.version,
            db,
            charset,
            epoch: self.shared.plans.epoch(),
            made: std::time::Instant::now(),
            tables,
        }));
    }
}
