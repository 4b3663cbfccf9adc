//! The builder of a merge tree's streams: [`check`] that a plan is a merge tree the streams
//! run, and [`build`] them bottom-up over the leaf's node results.

use super::aggregate::{InMemory, Streamed};
use super::input::{Ctx, Parts};
use super::limit::Limit;
use super::merge_sort::MergeSort;
use super::project::Project;
use super::Rows;
use crate::exec::door::NodeResult;
use crate::merge::{resolve_keys, Aggregate};
use crate::plan::Plan;

/// Why `plan` is not a merge tree this module runs: merge nodes over a Scatter or a tier
/// read / page, a MergeSort right above that leaf.
pub fn check(plan: &Plan) -> Result<(), &'static str> {
    let mut p = plan;
    loop {
        match p {
            Plan::Project { input, .. }
            | Plan::Limit { input, .. }
            | Plan::Aggregate { input, .. } => p = input,
            Plan::MergeSort { input, .. } => {
                return match input.as_ref() {
                    Plan::Scatter { .. } | Plan::Tier(_) | Plan::KeyPage(_) => check(input),
                    _ => Err("a MergeSort over another merge"),
                }
            }
            Plan::Scatter { .. } | Plan::KeyPage(_) => return Ok(()),
            Plan::Tier(t) => {
                return match t.mode {
                    crate::plan::TierMode::Read { .. } | crate::plan::TierMode::Page { .. } => {
                        Ok(())
                    }
                    _ => Err("a tier poll or write under a merge"),
                }
            }
            _ => return Err("a merge over something that reads no rows"),
        }
    }
}

/// The streams of `plan`'s merge nodes over the leaf's `parts` (the tree passed [`check`]).
pub fn build<R: NodeResult>(plan: &Plan, parts: Parts<R>, cx: &Ctx) -> Rows<R> {
    match plan {
        Plan::Project { input, .. } => Rows::Project(Box::new(Project {
            input: build(input, parts, cx),
            visible: cx.visible,
        })),
        Plan::Limit {
            offset,
            limit,
            input,
        } => Rows::Limit(Box::new(Limit::new(
            build(input, parts, cx),
            offset.saturating_sub(cx.before),
            *limit,
        ))),
        Plan::Aggregate { agg, input } => {
            let input = build(input, parts, cx);
            match agg.as_ref() {
                Aggregate::Streamed { grouping, having } => Rows::Streamed(Box::new(
                    Streamed::new(input, grouping.clone(), having.clone(), cx, cx.cap_rows()),
                )),
                Aggregate::InMemory(m) => {
                    let mut m = m.clone();
                    m.order = resolve_keys(&m.order, cx.base);
                    Rows::InMemory(Box::new(InMemory::new(input, m, cx, cx.cap_rows())))
                }
            }
        }
        Plan::MergeSort { keys, .. } => Rows::MergeSort(MergeSort::new(
            parts,
            resolve_keys(keys, cx.base),
            cx.classes.clone(),
        )),
        _ => Rows::Parts(parts),
    }
}
