//! Deep pages found by their key: `SELECT ... FROM t ORDER BY k LIMIT o, n` over several
//! nodes, `k` the table's one-column primary key. A plain merge reads `o + n` rows from every
//! node and skips `o` of them; a key page finds where the page starts by the key instead
//! (`crate::exec::key_page`): each node is asked for its key at the local offset `o / N`, the
//! least of those (`v`) is a key at most `o` rows into the answer, each node counts its rows
//! before `v`, and their sum is how many rows of the answer come before `v`. That repeats from
//! `v` until what is left to skip is about a page; then each node reads from the last `v` only
//! what is left plus the page, and the merge above skips the rest. Exact with any placement
//! of the rows (the key is unique, so no tie can straddle `v`); rows read from the nodes:
//! a key and a count per node per round, then about a page and the left skip per node.

use sqlparser::ast::{Expr, OrderByKind, Query, SetExpr, TableFactor};

use super::select::{Base, MergeSpec};
use super::tier::MARK;
use super::{Plan, Planner};
use crate::routing::TableRule;

/// From this offset on a page is found by its key: below it, reading `o + n` rows per node
/// costs less than the rounds.
pub const PAGE_FROM: u64 = 1000;

/// The node texts a key page runs, each with [`MARK`] where the key's bounds go.
#[derive(Debug, Clone, PartialEq)]
pub struct PageTexts {
    /// The node's SELECT as the merge needs it (helper columns, the client's ORDER BY),
    /// without its LIMIT.
    pub rows: String,
    /// `SELECT <key>` over the same FROM and WHERE, in the same order, without LIMIT.
    pub keys: String,
    /// `SELECT COUNT(*)` over the same FROM and WHERE.
    pub count: String,
}

/// A page of a merge found by its key (the module's documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyPage {
    pub nodes: Vec<usize>,
    pub texts: PageTexts,
    /// The key as the texts name it.
    pub key: String,
    pub desc: bool,
    pub offset: u64,
    pub limit: u64,
}

/// The texts of a key page over `base`, when the merge is one a key page can take: one sort
/// key, rows streamed (no grouping, no DISTINCT), a LIMIT with an offset of at least
/// [`PAGE_FROM`], nothing after the LIMIT. `render` writes the node query of a merge.
pub(super) fn texts(
    base: &Base<'_>,
    merge: &MergeSpec,
    key: &Expr,
    render: impl FnOnce(&Base<'_>, &MergeSpec) -> Result<String, String>,
) -> Option<(PageTexts, String)> {
    let c = &base.clauses;
    if merge.order.len() != 1
        || merge.buffers()
        || merge.stream_groups
        || merge.group.is_some()
        || merge.limit.is_none()
        || merge.offset < PAGE_FROM
        || c.tail.is_some()
        || c.order_by.is_none()
        // Its counts must count rows: no HAVING (MariaDB's, without GROUP BY, filters by
        // the select list) and no window.
        || c.group_by.is_some()
        || c.having.is_some()
        || c.window.is_some()
        || base.text.sql.contains(MARK)
    {
        return None;
    }
    let (a, b) = base.text.extent(key)?;
    let key_text = base.text.render(a, b, base.params).ok()?;
    let mut edits = base.edits.clone();
    edits.and_where(c, MARK);
    let marked = Base {
        text: base.text,
        clauses: c.clone(),
        edits,
        parsed: base.parsed,
        params: base.params,
    };
    let unlimited = MergeSpec {
        limit: None,
        offset: 0,
        ..merge.clone()
    };
    let rows = render(&marked, &unlimited).ok()?;
    let projected = |items: &str, order: bool| {
        let mut e = marked.edits.clone();
        e.replace(c.projection.0, c.projection.1, format!(" {items}"));
        let drop: Vec<_> = if order {
            vec![c.limit]
        } else {
            vec![c.order_by, c.limit]
        };
        for x in drop.into_iter().flatten() {
            let (a, z) = c.removal(x);
            e.replace(a, z, "");
        }
        e.apply(base.text, base.params).ok()
    };
    let keys = projected(&key_text, true)?;
    let count = projected("COUNT(*)", false)?;
    Some((PageTexts { rows, keys, count }, key_text))
}

impl Planner<'_> {
    /// The merge `merge` over `nodes` as a key page, when the query reads one hash_slot
    /// table and sorts by its one-column primary key (read first when not known: `NeedKey`).
    pub(super) fn key_page(
        &self,
        q: &Query,
        table: &str,
        nodes: &[usize],
        merge: &MergeSpec,
        page: Option<(PageTexts, String)>,
    ) -> Option<Plan> {
        let (texts, key) = page?;
        // While slots move, a plain scatter leaves out the copies (`super::moving`).
        match self.topo.table(table) {
            Some(TableRule::HashSlot { map, .. }) if !map.is_moving() => {}
            _ => return None,
        }
        let SetExpr::Select(s) = q.body.as_ref() else {
            return None;
        };
        let [from] = s.from.as_slice() else {
            return None;
        };
        let TableFactor::Table { name, .. } = &from.relation else {
            return None;
        };
        if !from.joins.is_empty() {
            return None;
        }
        let column = match q.order_by.as_ref().map(|o| &o.kind) {
            Some(OrderByKind::Expressions(items)) => match items.as_slice() {
                [one] => match &one.expr {
                    Expr::Identifier(i) => i.value.clone(),
                    Expr::CompoundIdentifier(parts) => parts.last()?.value.clone(),
                    _ => return None,
                },
                _ => return None,
            },
            _ => return None,
        };
        // `ORDER BY id` names a select item's alias before a column.
        let aliased = s.projection.iter().any(|item| {
            matches!(item, sqlparser::ast::SelectItem::ExprWithAlias { alias, .. }
                if alias.value.eq_ignore_ascii_case(&column))
        });
        if aliased {
            return None;
        }
        let schema = crate::sql::schema_name(name);
        let Some(pk) = (self.ctx.primary_key)(schema.as_deref(), table) else {
            return Some(Plan::NeedKey {
                schema,
                table: table.to_string(),
                node: *nodes.first()?,
            });
        };
        let [only] = pk.as_ref() else {
            return None;
        };
        let bare = only.trim_matches('`').replace("``", "`");
        if !bare.eq_ignore_ascii_case(&column) {
            return None;
        }
        let page = KeyPage {
            nodes: nodes.to_vec(),
            texts,
            key,
            desc: merge.order[0].desc,
            offset: merge.offset,
            limit: merge.limit?,
        };
        Some(merge.clone().tree(Plan::KeyPage(Box::new(page))))
    }
}
