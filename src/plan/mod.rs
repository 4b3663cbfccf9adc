//! Statement + rules snapshot -> [`Plan`]: where a statement runs and how its answers combine.
//! Pure: no I/O, unit-tested without a socket.

pub mod cache;
pub mod cached;
pub mod decompose;
pub mod gather;
pub mod insert;
pub mod moving;
mod select;
pub mod tier;
mod uses;

use std::fmt;

use mysql_common::value::Value;
use sqlparser::ast::{
    Delete, Expr, FromTable, GroupByExpr, ObjectName, ObjectType, Query, SetExpr, Statement, Update,
};

use crate::config::{TableRule, Topology};
use crate::merge::{Aggregate, SortKey};
use crate::routing::directory::Placed;
use crate::routing::range::RangeKey;
use crate::routing::slot::slot_of;
use crate::sql::keys::{where_keys, KeyColumn};
use crate::sql::ranges::Ranges;
use crate::sql::{self, Parsed};
pub use tier::{TierMode, TierPlan};
use uses::{collect_uses, Placement, Use};

/// MySQL's ER_NOT_SUPPORTED_YET: what the proxy cannot answer correctly.
pub const ER_NOT_SUPPORTED_YET: u16 = 1235;
/// MySQL's ER_PARSE_ERROR.
pub const ER_PARSE_ERROR: u16 = 1064;

/// One statement for one node.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub node: usize,
    pub sql: String,
    /// Bound parameter values for the statement's `?` placeholders (prepared statements).
    pub params: Vec<Value>,
}

/// How the OK packets of a statement that ran on several nodes combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OkMerge {
    /// Each node changed its own rows: affected rows add up.
    Sum,
    /// Each node holds a copy and changed it alike (broadcast, DDL): report one node's count.
    Copies,
}

/// Statements the proxy carries out on the session itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionOp {
    /// BEGIN / START TRANSACTION (the original text, replayed on the node the transaction
    /// first touches).
    Begin(String),
    Commit,
    Rollback,
    SetAutocommit(bool),
    /// `USE db`.
    Use(String),
    /// A session `SET` sent to every node the session holds and replayed on new ones.
    Set(String),
    /// `LOCK TABLES`: on every node holding one of the tables (the locks of an earlier LOCK
    /// TABLES released first, as MySQL does).
    Lock {
        sql: String,
        nodes: Vec<usize>,
    },
    /// `UNLOCK TABLES`: where the session holds locks.
    Unlock,
    /// `KILL [CONNECTION | QUERY] [ID] n`: of the proxy's session `n` (the ids clients see
    /// are the proxy's, not the nodes').
    Kill {
        id: u32,
        query_only: bool,
    },
    /// `SAVEPOINT x`, `ROLLBACK TO [SAVEPOINT] x`, `RELEASE SAVEPOINT x`: on every branch of
    /// the transaction (and replayed on branches it opens later).
    Savepoint {
        sql: String,
        name: String,
        kind: SavepointKind,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SavepointKind {
    Set,
    RollbackTo,
    Release,
}

/// A plan is a tree: the merge primitives ([`Plan::Project`], [`Plan::Limit`],
/// [`Plan::Aggregate`], [`Plan::MergeSort`], [`Plan::ValuesOrder`]) each own their `input`,
/// down to a leaf that reads the nodes ([`Plan::Scatter`], or a [`Plan::Tier`] read or
/// page); every other variant is a leaf that runs on its own. A merged scatter reads, from
/// the top: Project -> Limit -> Aggregate -> MergeSort -> Scatter, each node present only
/// when the statement needs it. A new primitive is a variant here, a line in
/// [`PlanDescription`], a file in `crate::exec` and its case in `crate::exec::run` (a merge
/// step: in `crate::exec::rows`).
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// One node; its answer is the answer.
    Route(Target),
    /// Several nodes in parallel: OK packets combined; result rows appended node after node
    /// (under a merge node: each node's rows are the merge's input).
    Scatter {
        targets: Vec<Target>,
        ok: OkMerge,
    },
    /// The client's columns: the `hidden` helper columns the merge below needed (sort keys,
    /// AVG's SUM and COUNT) cut from the end of every row. `from_end` (`SELECT *`): the
    /// number of visible columns is known only from the nodes' answer, so the column indexes
    /// of the nodes below count from the first helper column.
    Project {
        hidden: usize,
        from_end: bool,
        input: Box<Plan>,
    },
    /// OFFSET / LIMIT over the input's rows (the nodes were asked for `offset + limit` each);
    /// reading stops once the page is full.
    Limit {
        offset: u64,
        limit: Option<u64>,
        input: Box<Plan>,
    },
    /// Partial results (each node grouped its own rows) merged into the client's rows:
    /// grouping, HAVING, DISTINCT; streamed over sorted groups, or in memory.
    Aggregate {
        agg: Box<Aggregate>,
        input: Box<Plan>,
    },
    /// A k-way merge of the input's node results, each sorted by `keys`: one row per node
    /// held. Its input is a leaf.
    MergeSort {
        keys: Vec<SortKey>,
        input: Box<Plan>,
    },
    /// A split INSERT ... RETURNING: for each target of the scatter below, the VALUES
    /// positions of its rows; the rows are written back in VALUES order.
    ValuesOrder {
        positions: Vec<Vec<usize>>,
        input: Box<Plan>,
    },
    /// Reads only tables every one of `nodes` holds a copy of (broadcast): one reachable copy
    /// answers, so a node that is down does not fail it.
    AnyCopy {
        nodes: Vec<usize>,
        sql: String,
        params: Vec<Value>,
    },
    /// Touches no table: runs where the session ran last (its transaction's node, or the node
    /// that holds its `LAST_INSERT_ID()` and warnings), else on the default node.
    Sticky {
        sql: String,
        params: Vec<Value>,
    },
    Session(SessionOp),
    /// Answered with this MySQL error instead of a possibly wrong result.
    Refuse {
        code: u16,
        message: String,
    },
    /// A statement shardproxy cannot parse that names sharded or broadcast tables: `node`
    /// checks its syntax (a real syntax error gets the node's own 1064), otherwise it is
    /// refused with 1235 and `reason`.
    Unroutable {
        node: usize,
        sql: String,
        reason: String,
    },
    /// Keys of directory tables whose lookup-table entries the cache does not hold: read them
    /// (`(table, key)`), then plan again.
    NeedLookup(Vec<(String, Vec<u8>)>),
    /// An INSERT without a column list into a sharded table whose column order is not known
    /// yet: read it from the table's nodes, then plan again.
    NeedColumns {
        schema: Option<String>,
        table: String,
    },
    /// An INSERT whose generated ids come from a sequence, and this proxy's block of ids is
    /// used up: reserve a block of at least `count`, then plan again.
    NeedIds {
        table: String,
        count: u64,
    },
    /// A read or write of a time_tier table over several tiers.
    Tier(Box<TierPlan>),
    /// A write to slots being moved: on the source, the changed rows' images to the target.
    DualWrite(Box<moving::DualWrite>),
    /// A read no node answers over its own rows: tables copied to one node, run there.
    Gather(Box<gather::Gather>),
    /// Tables copied to every node a plan runs on, then the plan (reading them there).
    Shipped(Box<gather::Shipped>),
    /// An INSERT ... SELECT whose rows must move: the SELECT read, its rows inserted.
    InsertSelect(Box<insert::InsertSelect>),
    /// A write to slots at the freeze step of their move: it waits for the next step, then
    /// is planned again; unless the session's transaction holds row images of the move
    /// already: then it runs `unless` (the freeze waits for that transaction to end).
    Frozen {
        table: String,
        unless: Option<Box<Plan>>,
    },
    /// A write to slots being moved into a table whose primary key is not known yet: read it
    /// from `node`, then plan again.
    NeedKey {
        schema: Option<String>,
        table: String,
        node: usize,
    },
}

/// A lookup-cache probe: `(table, key)` -> the cached entry, if cached.
pub type LookupFn<'a> = dyn Fn(&str, &[u8]) -> Option<Option<usize>> + 'a;

/// What planning needs besides the statement and the rules: the day (relative tier bounds),
/// the lookup-table cache and the key generator.
pub struct PlanCtx<'a> {
    pub today: chrono::NaiveDate,
    /// `(table, key)` -> `Some(Some(node))` an entry, `Some(None)` known absent, `None` not
    /// cached.
    pub lookup: &'a LookupFn<'a>,
    /// The next generated id for a row of `table` whose shard key is in `slot`.
    pub next_id: &'a dyn Fn(&str, u16) -> Result<u64, IdError>,
    /// `(schema named in the statement, table)` -> the table's columns in order, if known
    /// (the session's database stands in for an unnamed schema).
    pub columns: &'a ColumnsFn<'a>,
    /// The same for a table's primary-key columns (quoted), if known.
    pub primary_key: &'a ColumnsFn<'a>,
    /// The session's `character_set_client`: bound strings are written in it.
    pub charset: &'a str,
}

/// Why no id was generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdError {
    /// The generator refused (a clock that stepped back, no generator): the statement fails.
    Refused(String),
    /// A sequence's block of ids reserved by this proxy is used up: reserve more, then plan
    /// again.
    NeedBlock,
}

/// A column-order probe: `(schema, table)` -> the table's columns, if cached.
pub type ColumnsFn<'a> = dyn Fn(Option<&str>, &str) -> Option<std::sync::Arc<[String]>> + 'a;

/// Runs `f` with a planning context for explaining plans outside a running proxy (`shardproxy
/// route`): the given day, no cached lookups (directory keys show as lookups to make), ids
/// from a generator of its own.
pub fn with_offline_ctx<R>(
    topo: &Topology,
    today: chrono::NaiveDate,
    f: impl FnOnce(&PlanCtx<'_>) -> R,
) -> R {
    let ids = crate::routing::keygen::Snowflake::new();
    let lookup = |_: &str, _: &[u8]| None;
    let columns = |_: Option<&str>, _: &str| None;
    let next_id = |table: &str, slot: u16| match topo.key_generators.get(table) {
        Some(g) if g.sequence.is_some() => Err(IdError::NeedBlock),
        Some(g) => ids
            .next(&g.layout, slot, &crate::routing::keygen::system_ms)
            .map_err(|e| IdError::Refused(e.to_string())),
        None => Err(IdError::Refused(format!("`{table}` has no key_generator"))),
    };
    f(&PlanCtx {
        today,
        lookup: &lookup,
        next_id: &next_id,
        columns: &columns,
        primary_key: &columns,
        charset: "utf8mb4",
    })
}

fn refuse(message: impl Into<String>) -> Plan {
    Plan::Refuse {
        code: ER_NOT_SUPPORTED_YET,
        message: message.into(),
    }
}

impl Plan {
    /// The input of a merge node; `None` for a leaf.
    pub fn input(&self) -> Option<&Plan> {
        match self {
            Plan::Project { input, .. }
            | Plan::Limit { input, .. }
            | Plan::Aggregate { input, .. }
            | Plan::MergeSort { input, .. }
            | Plan::ValuesOrder { input, .. } => Some(input),
            _ => None,
        }
    }

    /// The leaf under the merge nodes (the plan itself when it is a leaf): where the rows
    /// come from.
    pub fn source(&self) -> &Plan {
        let mut p = self;
        while let Some(i) = p.input() {
            p = i;
        }
        p
    }

    /// [`Plan::source`], to change the leaf's statements.
    pub fn source_mut(&mut self) -> &mut Plan {
        match self {
            Plan::Project { input, .. }
            | Plan::Limit { input, .. }
            | Plan::Aggregate { input, .. }
            | Plan::MergeSort { input, .. }
            | Plan::ValuesOrder { input, .. } => input.source_mut(),
            leaf => leaf,
        }
    }

    /// The nodes this plan touches (empty for session operations and refusals).
    pub fn nodes(&self) -> Vec<usize> {
        match self {
            Plan::Route(t) => vec![t.node],
            Plan::Project { .. }
            | Plan::Limit { .. }
            | Plan::Aggregate { .. }
            | Plan::MergeSort { .. }
            | Plan::ValuesOrder { .. } => self.source().nodes(),
            Plan::Tier(t) => t.parts.iter().map(|p| p.node).collect(),
            Plan::Scatter { targets, .. } => targets.iter().map(|t| t.node).collect(),
            Plan::AnyCopy { nodes, .. } => nodes.iter().take(1).copied().collect(),
            Plan::DualWrite(d) => vec![d.source, d.target],
            Plan::Shipped(s) => {
                let mut v = s.nodes();
                for sh in &s.ships {
                    v.extend(sh.reads.iter().map(|(n, _)| *n));
                }
                v.sort_unstable();
                v.dedup();
                v
            }
            Plan::Gather(g) => {
                let mut v = vec![g.node];
                for s in &g.ships {
                    v.extend(s.reads.iter().map(|(n, _)| *n));
                }
                v.sort_unstable();
                v.dedup();
                v
            }
            _ => Vec::new(),
        }
    }

    /// The plan as `shardproxy route` and the admin's PREVIEW print it.
    pub fn describe<'a>(&'a self, topo: &'a Topology) -> PlanDescription<'a> {
        PlanDescription { plan: self, topo }
    }
}

/// Human-readable plan, as `shardproxy route` prints it.
pub struct PlanDescription<'a> {
    plan: &'a Plan,
    topo: &'a Topology,
}

impl fmt::Display for PlanDescription<'_> {
    /// The plan as a tree of the primitives that run it (`crate::exec`), outermost first,
    /// each node's SQL under the primitive that sends it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.node(f, self.plan, 0, false)
    }
}

/// Sort keys as the plan prints them: columns of the node rows, from 1 (`SELECT *`,
/// `from_end`: helper columns, counted after the columns the nodes expand `*` to).
fn keys_text(keys: &[SortKey], from_end: bool) -> String {
    let key = |k: &SortKey| {
        let dir = if k.desc { " DESC" } else { "" };
        if from_end && !k.fixed {
            format!("helper {}{dir}", k.index + 1)
        } else {
            format!("column {}{dir}", k.index + 1)
        }
    };
    keys.iter().map(key).collect::<Vec<_>>().join(", ")
}

impl PlanDescription<'_> {
    /// One node: its line (under its parent, `depth` levels in), its details, then its input
    /// one level deeper. `from_end`: a Project above counts helper columns from the end.
    fn node(
        &self,
        f: &mut fmt::Formatter<'_>,
        plan: &Plan,
        depth: usize,
        from_end: bool,
    ) -> fmt::Result {
        let mut from_end = from_end;
        let lead = match depth {
            0 => String::new(),
            d => format!("{}└─ ", "   ".repeat(d - 1)),
        };
        let pad = "   ".repeat(depth);
        match plan {
            Plan::Project {
                hidden,
                from_end: counted_from_end,
                ..
            } => {
                let end = if *counted_from_end {
                    " (SELECT *: counted from the end of the nodes' columns)"
                } else {
                    ""
                };
                writeln!(f, "{lead}Project: {hidden} helper column(s) cut{end}")?;
                from_end = *counted_from_end;
            }
            Plan::Limit {
                offset,
                limit,
                input,
            } => {
                let take = limit.map_or_else(|| "all".to_string(), |l| l.to_string());
                let paged = match input.source() {
                    Plan::Tier(t) if matches!(t.mode, TierMode::Page { .. }) => {
                        " (less the rows before the segments the tier page reads)"
                    }
                    _ => "",
                };
                writeln!(f, "{lead}Limit: skip {offset}{paged}, take {take}")?;
            }
            Plan::Aggregate { agg, .. } => match agg.as_ref() {
                Aggregate::Streamed { grouping, having } => {
                    let having = if having.is_some() {
                        ", HAVING after the merge"
                    } else {
                        ""
                    };
                    let keys: Vec<String> = grouping
                        .keys
                        .iter()
                        .map(|k| format!("column {}", k + 1))
                        .collect();
                    writeln!(
                        f,
                        "{lead}Aggregate, streamed: groups on {} merged as they arrive sorted{having}",
                        keys.join(", ")
                    )?;
                }
                Aggregate::InMemory(m) => {
                    let mut steps = Vec::new();
                    if let Some(g) = &m.grouping {
                        steps.push(if g.keys.is_empty() {
                            "aggregates merged".to_string()
                        } else {
                            let keys: Vec<String> =
                                g.keys.iter().map(|k| format!("column {}", k + 1)).collect();
                            format!("groups merged on {}", keys.join(", "))
                        });
                    }
                    if m.having.is_some() {
                        steps.push("HAVING".into());
                    }
                    if m.distinct {
                        steps.push("DISTINCT".into());
                    }
                    if !m.order.is_empty() {
                        steps.push(format!("sorted by {}", keys_text(&m.order, from_end)));
                    } else if m.grouping.as_ref().is_some_and(|g| !g.keys.is_empty()) {
                        steps.push("sorted by the group keys".into());
                    }
                    writeln!(
                        f,
                        "{lead}Aggregate, in memory (capped by max_rows_per_statement): {}",
                        steps.join(", ")
                    )?;
                }
            },
            Plan::MergeSort { keys, .. } => writeln!(
                f,
                "{lead}MergeSort: k-way merge by {}, one row per node held",
                keys_text(keys, from_end)
            )?,
            Plan::ValuesOrder { .. } => writeln!(
                f,
                "{lead}ValuesOrder: RETURNING rows put back in VALUES order"
            )?,
            Plan::Scatter { targets, ok } => {
                let how = match ok {
                    _ if depth > 0 => "rows to merge",
                    OkMerge::Sum => "rows appended, affected rows summed",
                    OkMerge::Copies => "the same statement on every copy, one copy's count",
                };
                writeln!(f, "{lead}Scatter to {} nodes ({how})", targets.len())?;
                for t in targets {
                    writeln!(f, "{pad}     {}: {}", self.topo.node_name(t.node), t.sql)?;
                }
            }
            Plan::Tier(t) => t.describe(self.topo, f, &lead, &pad, depth > 0)?,
            leaf => self.leaf(f, leaf)?,
        }
        match plan.input() {
            Some(input) => self.node(f, input, depth + 1, from_end),
            None => Ok(()),
        }
    }

    /// A plan that is one primitive on its own.
    fn leaf(&self, f: &mut fmt::Formatter<'_>, plan: &Plan) -> fmt::Result {
        let name = |n: usize| self.topo.node_name(n);
        match plan {
            Plan::Route(t) => {
                writeln!(f, "Route to {}", name(t.node))?;
                writeln!(f, "  {}", t.sql)
            }
            Plan::AnyCopy { nodes, sql, .. } => {
                let names: Vec<&str> = nodes.iter().map(|n| name(*n)).collect();
                writeln!(
                    f,
                    "AnyCopy: one copy of a broadcast table, the first reachable of {}",
                    names.join(", ")
                )?;
                writeln!(f, "  {sql}")
            }
            Plan::Sticky { sql, .. } => {
                writeln!(
                    f,
                    "Sticky: no table; the session's current node (default {})",
                    name(self.topo.default_node)
                )?;
                writeln!(f, "  {sql}")
            }
            Plan::Session(op) => writeln!(f, "SessionOp: {op:?}"),
            Plan::Refuse { code, message } => writeln!(f, "Refused: ERROR {code}: {message}"),
            Plan::Unroutable { node, reason, .. } => writeln!(
                f,
                "Refused: ERROR 1235: {reason} (unless {} finds a syntax error in it)",
                name(*node)
            ),
            Plan::NeedIds { table, count } => writeln!(
                f,
                "Ids: {count} id(s) of `{table}`'s sequence, reserved in a block from its node, then planned again"
            ),
            Plan::NeedColumns { table, .. } => writeln!(
                f,
                "Columns: an INSERT without a column list into `{table}`: its column order is read from its nodes (then cached), and the statement planned again with the columns named"
            ),
            Plan::NeedLookup(keys) => {
                writeln!(
                    f,
                    "Lookup: {} key(s) read from directory lookup tables (through the cache), then planned again:",
                    keys.len()
                )?;
                for (t, k) in keys {
                    writeln!(f, "  `{t}` key {}", String::from_utf8_lossy(k))?;
                }
                Ok(())
            }
            Plan::DualWrite(d) => {
                writeln!(
                    f,
                    "DualWrite: slots being moved; runs on {} (its answer is the client's), the changed rows' images to {}",
                    name(d.source),
                    name(d.target)
                )?;
                writeln!(f, "  {}", d.sql)?;
                match &d.rows {
                    moving::Changed::Select { sql, .. } => writeln!(f, "  rows found first by: {sql}"),
                    moving::Changed::Keys(k) => writeln!(f, "  rows by primary key: {} row(s)", k.len()),
                    moving::Changed::Generated => {
                        writeln!(f, "  rows by the AUTO_INCREMENT ids the node generates")
                    }
                }
            }
            Plan::Gather(g) => {
                writeln!(
                    f,
                    "Gather on {}: {} (tables copied to one node, the statement run there)",
                    name(g.node),
                    g.why
                )?;
                for s in &g.ships {
                    writeln!(f, "  copy `{}` into temporary table {}:", s.table, s.temp)?;
                    for (n, sql) in &s.reads {
                        writeln!(f, "     {}: {sql}", name(*n))?;
                    }
                }
                writeln!(f, "  then on {}: {}", name(g.node), g.sql)
            }
            Plan::Shipped(s) => {
                let names: Vec<&str> = s.nodes().iter().map(|n| name(*n)).collect();
                writeln!(
                    f,
                    "Shipped: {} (the other tables copied to each of {}, then run there as if broadcast)",
                    s.why,
                    names.join(", ")
                )?;
                for sh in &s.ships {
                    writeln!(f, "  copy `{}` into temporary table {}:", sh.table, sh.temp)?;
                    for (n, sql) in &sh.reads {
                        writeln!(f, "     {}: {sql}", name(*n))?;
                    }
                }
                write!(f, "  then: {}", s.then.describe(self.topo))
            }
            Plan::InsertSelect(i) => {
                writeln!(
                    f,
                    "InsertSelect: this SELECT is read first (planned as a statement of its own: PREVIEW it), then its rows inserted into `{}` as one INSERT ... VALUES (planned as an INSERT):",
                    i.table
                )?;
                writeln!(f, "  {}", i.select)
            }
            Plan::Frozen { table, .. } => writeln!(
                f,
                "Frozen: the slots of `{table}` it writes are at the cutover of their move; it waits for the next step and is planned again"
            ),
            Plan::NeedKey { table, node, .. } => writeln!(
                f,
                "Key: a write to slots of `{table}` being moved: its primary key is read from {} (then cached), and the statement planned again",
                name(*node)
            ),
            // Described by `node`.
            Plan::Scatter { .. }
            | Plan::Tier(_)
            | Plan::Project { .. }
            | Plan::Limit { .. }
            | Plan::Aggregate { .. }
            | Plan::MergeSort { .. }
            | Plan::ValuesOrder { .. } => self.node(f, plan, 0, false),
        }
    }
}

/// Plans one statement. `parsed` is the parse of `sql` (or the parser's error).
pub fn plan(
    sql: &str,
    parsed: Result<&Parsed, &str>,
    params: &[Value],
    topo: &Topology,
    ctx: &PlanCtx<'_>,
) -> Plan {
    plan_traced(sql, parsed, params, topo, ctx).0
}

/// [`plan`], with the `(table, slot)` pairs the statement was routed to by key.
pub fn plan_traced(
    sql: &str,
    parsed: Result<&Parsed, &str>,
    params: &[Value],
    topo: &Topology,
    ctx: &PlanCtx<'_>,
) -> (Plan, Vec<(String, u16)>) {
    if let Some(p) = session_statement(sql, topo) {
        return (p, Vec::new());
    }
    let parsed = match parsed {
        Ok(p) => p,
        Err(e) => return (unparsed(sql, e, params, topo), Vec::new()),
    };
    let planner = Planner {
        slots: Default::default(),
        missing: Default::default(),
        values: Default::default(),
        moving: moving::any_moving(topo),
        sql,
        stmt: &parsed.stmt,
        parsed,
        params,
        topo,
        ctx,
        copies: Vec::new(),
    };
    let plan = planner.plan();
    let mut missing = planner.missing.take();
    missing.sort();
    missing.dedup();
    if !missing.is_empty() && !matches!(plan, Plan::Refuse { .. }) {
        return (Plan::NeedLookup(missing), Vec::new());
    }
    let mut slots = planner.slots.take();
    slots.sort_unstable();
    slots.dedup();
    let plan = moving::adjust(&planner, plan);
    (one_node_only(sql, planner.parsed.mode, plan, topo), slots)
}

/// A statement that assigns user variables (`@v := e`, `INTO @v`) runs on one node, whose
/// values the session then reads back; one that calls a named-lock function runs on the
/// default node, which holds every session's named locks (`crate::sql::uservars`).
/// Anywhere else it is refused: each node would assign, or lock, on its own.
fn one_node_only(sql: &str, mode: sql::lex::Mode, plan: Plan, topo: &Topology) -> Plan {
    let locks = sql::uservars::names_a_lock(sql);
    let assigned = sql::uservars::assigned_in(sql, mode);
    if !locks && assigned.is_empty() {
        return plan;
    }
    let one_node = match &plan {
        Plan::Route(t) => !locks || t.node == topo.default_node,
        Plan::AnyCopy { .. } => !locks,
        Plan::Sticky { .. }
        | Plan::Refuse { .. }
        | Plan::Unroutable { .. }
        | Plan::Session(_)
        | Plan::NeedLookup(_)
        | Plan::NeedColumns { .. }
        | Plan::NeedIds { .. }
        | Plan::NeedKey { .. } => true,
        _ => false,
    };
    if one_node {
        plan
    } else if locks {
        refuse("shardproxy: this statement calls a named-lock function (GET_LOCK, RELEASE_LOCK, ...) where it does not run on the default node, which holds every session's named locks: call it in a statement that reads no sharded table")
    } else {
        refuse(format!(
            "shardproxy: this statement assigns user variables (@{}) but does not run on one node, so each node would assign its own value: use SET @v = (SELECT ...)",
            assigned.join(", @")
        ))
    }
}

/// `LOCK TABLES t1 READ, t2 AS a WRITE, ...`: the nodes holding any of the tables (a table in
/// no rule: the default node).
fn lock_tables(sql: &str, topo: &Topology) -> Plan {
    let mut nodes = Vec::new();
    // Each item: `name [AS alias | alias] lock_type`, items separated by commas.
    let list = sql
        .trim()
        .split_once(|c: char| c.is_whitespace())
        .and_then(|(_, rest)| rest.trim_start().split_once(|c: char| c.is_whitespace()))
        .map(|(_, items)| items)
        .unwrap_or_default();
    for item in list.split(',') {
        let mut words = sql::words(item).into_iter();
        let Some(first) = words.next() else {
            continue;
        };
        // `db.t`: the words are `db`, `t`.
        let name = match words.next() {
            Some(t) if item.contains('.') => t,
            _ => first,
        };
        match topo.table(&name) {
            Some(rule) => nodes.extend(rule.all_nodes(topo)),
            None => nodes.push(topo.default_node),
        }
    }
    if nodes.is_empty() {
        return refuse("LOCK TABLES without tables");
    }
    nodes.sort_unstable();
    nodes.dedup();
    Plan::Session(SessionOp::Lock {
        sql: sql.trim().to_string(),
        nodes,
    })
}

/// `ALTER TABLE t DISABLE KEYS` / `ENABLE KEYS` (dump files wrap them in executable comments;
/// sqlparser does not read them): the table's name.
fn alter_keys(sql: &str) -> Option<String> {
    let w = sql::words(sql);
    let n = w.len();
    let shape = (5..=6).contains(&n)
        && w[0] == "alter"
        && w[1] == "table"
        && (w[n - 2] == "disable" || w[n - 2] == "enable")
        && w[n - 1] == "keys";
    shape.then(|| w[n - 3].clone())
}

/// A statement sqlparser cannot read: forwarded if it names no configured table (the node
/// then answers, with its own syntax error where there is one), refused otherwise.
fn unparsed(sql: &str, err: &str, params: &[Value], topo: &Topology) -> Plan {
    if let Some(table) = alter_keys(sql) {
        let nodes = match topo.table(&table) {
            Some(rule) => rule.all_nodes(topo),
            None => vec![topo.default_node],
        };
        return Plan::Scatter {
            targets: nodes
                .into_iter()
                .map(|node| Target {
                    node,
                    sql: sql.to_string(),
                    params: params.to_vec(),
                })
                .collect(),
            ok: OkMerge::Copies,
        };
    }
    let mut nodes: Vec<usize> = Vec::new();
    let mut check_on = topo.default_node;
    for w in sql::words(sql) {
        match topo.table(&w) {
            None => {}
            Some(TableRule::Single { node }) => nodes.push(*node),
            Some(TableRule::HashSlot { map, .. }) => {
                check_on = map.nodes().first().copied().unwrap_or(check_on);
                nodes.push(usize::MAX);
            }
            Some(TableRule::Broadcast) => nodes.push(usize::MAX),
            Some(rule) => {
                check_on = rule.all_nodes(topo).first().copied().unwrap_or(check_on);
                nodes.push(usize::MAX);
            }
        }
    }
    nodes.sort_unstable();
    nodes.dedup();
    match nodes.as_slice() {
        [] => Plan::Sticky {
            sql: sql.to_string(),
            params: params.to_vec(),
        },
        [node] if *node != usize::MAX => Plan::Route(Target {
            node: *node,
            sql: sql.to_string(),
            params: params.to_vec(),
        }),
        _ => Plan::Unroutable {
            node: check_on,
            sql: sql.to_string(),
            reason: format!("shardproxy cannot parse this statement to route it ({err})"),
        },
    }
}

/// `BEGIN [WORK]` or `START TRANSACTION [READ ONLY | READ WRITE | WITH CONSISTENT
/// SNAPSHOT, ...]` as the proxy writes it itself: the transaction's first statement on
/// each node is the proxy's text, never the client's (it may go in one batch with the
/// savepoints to replay). `None` for anything else in it.
fn begin_text(sql: &str) -> Option<String> {
    let lexed = sql::lex::lex(sql, Default::default());
    if lexed.error.is_some() {
        return None;
    }
    let mut toks = lexed
        .toks
        .iter()
        .filter(|t| t.kind != sql::lex::Kind::Semi)
        .map(|t| (t.kind, t.text(sql).to_ascii_uppercase()));
    let mut next = || toks.next();
    let word = |t: Option<(sql::lex::Kind, String)>| match t {
        Some((sql::lex::Kind::Word, w)) => Some(w),
        _ => None,
    };
    match word(next())?.as_str() {
        "BEGIN" => match next() {
            None => Some("BEGIN".into()),
            Some((sql::lex::Kind::Word, w)) if w == "WORK" && next().is_none() => {
                Some("BEGIN".into())
            }
            _ => None,
        },
        "START" if word(next())? == "TRANSACTION" => {
            let mut parts: Vec<&str> = Vec::new();
            loop {
                let part = match word(next()) {
                    None if parts.is_empty() => break,
                    Some(w) if w == "READ" => match word(next())?.as_str() {
                        "ONLY" => "READ ONLY",
                        "WRITE" => "READ WRITE",
                        _ => return None,
                    },
                    Some(w) if w == "WITH" => {
                        if word(next())? != "CONSISTENT" || word(next())? != "SNAPSHOT" {
                            return None;
                        }
                        "WITH CONSISTENT SNAPSHOT"
                    }
                    _ => return None,
                };
                parts.push(part);
                match next() {
                    None => break,
                    Some((sql::lex::Kind::Comma, _)) => {}
                    _ => return None,
                }
            }
            Some(if parts.is_empty() {
                "START TRANSACTION".into()
            } else {
                format!("START TRANSACTION {}", parts.join(", "))
            })
        }
        _ => None,
    }
}

fn strip_quotes(s: &str) -> String {
    s.trim_matches('`').to_string()
}

/// Transaction control, SET and USE, recognised by their first words so that every form
/// (even ones sqlparser cannot parse) is handled by the session.
fn session_statement(sql: &str, topo: &Topology) -> Option<Plan> {
    let w = sql::leading_words(sql, 4);
    let is = |i: usize, k: &str| w.get(i).is_some_and(|x| x.eq_ignore_ascii_case(k));
    if is(0, "LOCK") && (is(1, "TABLES") || is(1, "TABLE")) {
        return Some(lock_tables(sql, topo));
    }
    if is(0, "UNLOCK") && (is(1, "TABLES") || is(1, "TABLE")) && w.len() == 2 {
        return Some(Plan::Session(SessionOp::Unlock));
    }
    if is(0, "BEGIN") && w.len() == 1
        || is(0, "BEGIN") && is(1, "WORK")
        || is(0, "START") && is(1, "TRANSACTION")
    {
        return Some(match begin_text(sql) {
            Some(text) => Plan::Session(SessionOp::Begin(text)),
            None => Plan::Refuse {
                code: 1064,
                message: format!(
                    "You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version for the right syntax to use near '{}'",
                    sql.trim().chars().take(80).collect::<String>()
                ),
            },
        });
    }
    if is(0, "COMMIT") {
        return Some(Plan::Session(SessionOp::Commit));
    }
    if is(0, "KILL") {
        let all = sql::leading_words(sql.trim().trim_end_matches(';'), 8);
        let query_only = all.iter().any(|x| x.eq_ignore_ascii_case("QUERY"));
        let rest: Vec<&String> = all[1..]
            .iter()
            .filter(|x| {
                !["QUERY", "CONNECTION", "HARD", "SOFT"]
                    .iter()
                    .any(|k| x.eq_ignore_ascii_case(k))
            })
            .collect();
        return Some(match rest.as_slice() {
            [n] => match n.parse::<u32>() {
                Ok(id) => Plan::Session(SessionOp::Kill { id, query_only }),
                Err(_) => refuse("KILL takes a connection id (a number)"),
            },
            [k, _] if k.eq_ignore_ascii_case("ID") => refuse(
                "KILL QUERY ID <query id> names a node's query: kill the session's statement with KILL QUERY <connection id>",
            ),
            _ => refuse("KILL USER is not supported through shardproxy: KILL <connection id>"),
        });
    }
    if is(0, "ROLLBACK") && !w.iter().any(|x| x.eq_ignore_ascii_case("TO")) {
        return Some(Plan::Session(SessionOp::Rollback));
    }
    let kind = if is(0, "SAVEPOINT") {
        Some(SavepointKind::Set)
    } else if is(0, "ROLLBACK") {
        Some(SavepointKind::RollbackTo)
    } else if is(0, "RELEASE") && is(1, "SAVEPOINT") {
        Some(SavepointKind::Release)
    } else {
        None
    };
    if let Some(kind) = kind {
        let body = sql.trim().trim_end_matches(';').trim_end();
        let all = sql::leading_words(body, 8);
        if let Some(name) = all.last().filter(|_| all.len() >= 2) {
            return Some(Plan::Session(SessionOp::Savepoint {
                sql: body.to_string(),
                name: strip_quotes(name).to_ascii_lowercase(),
                kind,
            }));
        }
    }
    if is(0, "USE") {
        return w
            .get(1)
            .map(|db| Plan::Session(SessionOp::Use(strip_quotes(db))));
    }
    if is(0, "SET") {
        let all = sql::leading_words(sql, 64);
        let upper: Vec<String> = all.iter().map(|x| x.to_ascii_uppercase()).collect();
        if upper
            .iter()
            .any(|x| x == "GLOBAL" || x.starts_with("@@GLOBAL"))
        {
            return Some(refuse(
                "SET GLOBAL through shardproxy would change one node only: set it on each node",
            ));
        }
        let names_autocommit = upper
            .iter()
            .any(|x| x == "AUTOCOMMIT" || x.ends_with(".AUTOCOMMIT") || x == "@@AUTOCOMMIT");
        if names_autocommit {
            if upper.iter().any(|x| x == ",") {
                return Some(refuse(
                    "SET autocommit together with other variables: send it as its own statement",
                ));
            }
            let value = upper
                .iter()
                .position(|x| x == "=" || x == ":=")
                .and_then(|i| upper.get(i + 1));
            return Some(match value.map(String::as_str) {
                Some("1" | "ON" | "TRUE") => Plan::Session(SessionOp::SetAutocommit(true)),
                Some("0" | "OFF" | "FALSE") => Plan::Session(SessionOp::SetAutocommit(false)),
                _ => refuse("SET autocommit takes 0, 1, ON or OFF"),
            });
        }
        return Some(Plan::Session(SessionOp::Set(sql.trim().to_string())));
    }
    None
}

struct Planner<'a> {
    /// Slots the statement was routed to by key: (table, slot), for the per-slot metrics.
    slots: std::cell::RefCell<Vec<(String, u16)>>,
    /// Directory keys the lookup cache does not know yet.
    missing: std::cell::RefCell<Vec<(String, Vec<u8>)>>,
    /// The routing values the statement was routed by, for hash_slot and directory tables:
    /// (table, value), for the moves under way (`moving`).
    values: std::cell::RefCell<Vec<(String, Value)>>,
    /// Rows of some table are being moved (the values are traced only then).
    moving: bool,
    ctx: &'a PlanCtx<'a>,
    sql: &'a str,
    /// The statement being planned (the parsed one, or the one inside its EXPLAIN).
    stmt: &'a Statement,
    parsed: &'a Parsed,
    params: &'a [Value],
    topo: &'a Topology,
    /// Tables this plan copies to every node it runs on first: read as broadcast tables.
    copies: Vec<String>,
}

impl<'a> Planner<'a> {
    /// The statement's bound values, for the proxy's literal writer.
    fn bound(&self) -> crate::sql::text::Params<'a> {
        crate::sql::text::Params {
            values: self.params,
            charset: self.ctx.charset,
        }
    }

    fn plan(&self) -> Plan {
        match self.stmt {
            Statement::Query(q) => self.select(q),
            Statement::Insert(ins) => insert::plan_insert(self, ins),
            Statement::Update(u) => self.update(u),
            Statement::Delete(d) => self.delete(d),
            Statement::CreateTable(c) => self.ddl(&[&c.name]),
            Statement::AlterTable(a) => self.ddl(&[&a.name]),
            Statement::CreateIndex(c) => self.ddl(&[&c.table_name]),
            Statement::Truncate(t) => {
                let names: Vec<&ObjectName> = t.table_names.iter().map(|n| &n.name).collect();
                self.ddl(&names)
            }
            Statement::Drop {
                object_type: ObjectType::Table,
                names,
                ..
            } => self.ddl(&names.iter().collect::<Vec<_>>()),
            Statement::Drop {
                object_type: ObjectType::Index,
                table: Some(table),
                ..
            } => self.ddl(&[table]),
            Statement::CreateDatabase { .. }
            | Statement::Drop {
                object_type: ObjectType::Schema | ObjectType::Database,
                ..
            } => self.everywhere(OkMerge::Copies),
            Statement::ShowCreate { obj_name, .. } => self.read_one(&[sql::table_name(obj_name)]),
            Statement::Explain { statement, .. } => {
                let inner = Planner {
                    slots: Default::default(),
                    missing: Default::default(),
                    values: Default::default(),
                    moving: self.moving,
                    sql: self.sql,
                    stmt: statement.as_ref(),
                    parsed: self.parsed,
                    params: self.params,
                    topo: self.topo,
                    ctx: self.ctx,
                    copies: Vec::new(),
                }
                .plan();
                match inner {
                    Plan::Route(t) => self.on(t.node),
                    Plan::Sticky { .. } => self.sticky(),
                    Plan::Refuse { .. } => inner,
                    _ => refuse("EXPLAIN of a statement that runs on several nodes: see `shardproxy route` for its plan, and EXPLAIN it on one node"),
                }
            }
            other => self.generic(other),
        }
    }

    fn trace(&self, table: &str, slot: u16) {
        self.slots.borrow_mut().push((table.to_string(), slot));
    }

    fn trace_value(&self, table: &str, v: &Value) {
        if self.moving {
            self.values
                .borrow_mut()
                .push((table.to_string(), v.clone()));
        }
    }

    fn target(&self, node: usize) -> Target {
        Target {
            node,
            sql: self.sql.to_string(),
            params: self.params.to_vec(),
        }
    }

    fn on(&self, node: usize) -> Plan {
        Plan::Route(self.target(node))
    }

    fn sticky(&self) -> Plan {
        Plan::Sticky {
            sql: self.sql.to_string(),
            params: self.params.to_vec(),
        }
    }

    fn on_nodes(&self, nodes: &[usize], ok: OkMerge) -> Plan {
        match nodes {
            [one] => self.on(*one),
            many => Plan::Scatter {
                targets: many.iter().map(|n| self.target(*n)).collect(),
                ok,
            },
        }
    }

    fn everywhere(&self, ok: OkMerge) -> Plan {
        self.on_nodes(&self.topo.all_nodes(), ok)
    }

    /// Nodes holding the rows with these shard-key values (NULL matches nothing).
    fn nodes_for_keys(&self, table: &str, rule: &TableRule, keys: Option<&[Value]>) -> Vec<usize> {
        self.nodes_for(table, rule, keys, None)
    }

    /// Nodes holding the rows whose routing column has one of `keys` (when known) or lies in
    /// `ranges` (range and time_tier tables).
    fn nodes_for(
        &self,
        table: &str,
        rule: &TableRule,
        keys: Option<&[Value]>,
        ranges: Option<&Ranges<RangeKey>>,
    ) -> Vec<usize> {
        let mut nodes: Vec<usize> = match (rule, keys) {
            (TableRule::HashSlot { map, .. }, Some(values)) => values
                .iter()
                .filter_map(|v| {
                    let s = slot_of(v)?;
                    self.trace_value(table, v);
                    Some(s)
                })
                .map(|s| {
                    self.trace(table, s);
                    map.node_of_slot(s)
                })
                .collect(),
            (TableRule::Range { map, .. }, Some(values)) => {
                let mut out = Vec::new();
                for v in values {
                    if matches!(v, Value::NULL) {
                        continue;
                    }
                    match map.kind.key_of(v) {
                        Some(k) => out.push(map.node_of(&k)),
                        // Not comparable in the column's domain: any range may hold it.
                        None => return map.nodes(),
                    }
                }
                out
            }
            (TableRule::Range { map, .. }, None) => match ranges {
                Some(r) => map.nodes_for(r),
                None => map.nodes(),
            },
            (TableRule::Directory(d), Some(values)) => {
                let mut out = Vec::new();
                for v in values {
                    if matches!(v, Value::NULL) {
                        continue;
                    }
                    self.trace_value(table, v);
                    let looked_up = |k: &[u8]| (self.ctx.lookup)(table, k);
                    match d.place(v, &looked_up) {
                        Placed::Node(n) => out.push(n),
                        Placed::Fallback => out.extend(self.nodes_for_keys(
                            table,
                            &d.fallback,
                            Some(std::slice::from_ref(v)),
                        )),
                        Placed::Unknown => {
                            if let Some(k) = crate::value::text_form(v) {
                                self.missing.borrow_mut().push((table.to_string(), k));
                            }
                            out.extend(rule.all_nodes(self.topo));
                        }
                    }
                }
                out
            }
            (TableRule::TimeTier(t), _) => match self.tier_bounds(t) {
                Ok(b) => {
                    let all = Ranges::all();
                    t.layout(&b, ranges.unwrap_or(&all), "")
                        .parts
                        .iter()
                        .map(|p| p.node)
                        .collect()
                }
                Err(_) => rule.all_nodes(self.topo),
            },
            (TableRule::Single { node }, _) => vec![*node],
            (TableRule::Broadcast, _) => self.topo.all_nodes(),
            (_, None) => rule.all_nodes(self.topo),
        };
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// The tier bounds on the planning day.
    fn tier_bounds(
        &self,
        t: &crate::routing::time_tier::TierRule,
    ) -> Result<Vec<Option<chrono::NaiveDate>>, String> {
        t.bounds(self.ctx.today)
    }

    /// The node a row goes to, given its routing-column value (INSERT).
    fn node_of_value(&self, table: &str, rule: &TableRule, v: &Value) -> Result<usize, String> {
        let column = rule.column().unwrap_or_default();
        let constant = || {
            format!(
                "the {} column `{column}` of `{table}` must be a constant, not NULL or an expression",
                rule.kind()
            )
        };
        if matches!(v, Value::NULL) {
            return Err(constant());
        }
        match rule {
            TableRule::HashSlot { map, .. } => {
                let slot = slot_of(v).ok_or_else(constant)?;
                self.trace(table, slot);
                self.trace_value(table, v);
                Ok(map.node_of_slot(slot))
            }
            TableRule::Range { map, .. } => {
                let k = map.kind.key_of(v).ok_or_else(|| {
                    format!(
                        "`{table}`.`{column}` value {} cannot be placed in its ranges (not a {:?} value)",
                        String::from_utf8_lossy(&crate::value::text_form(v).unwrap_or_default()),
                        map.kind
                    )
                })?;
                Ok(map.node_of(&k))
            }
            TableRule::Directory(d) => {
                self.trace_value(table, v);
                let looked_up = |k: &[u8]| (self.ctx.lookup)(table, k);
                match d.place(v, &looked_up) {
                    Placed::Node(n) => Ok(n),
                    Placed::Fallback => self.node_of_value(table, &d.fallback, v),
                    Placed::Unknown => {
                        if let Some(k) = crate::value::text_form(v) {
                            self.missing.borrow_mut().push((table.to_string(), k));
                        }
                        Ok(self.topo.default_node)
                    }
                }
            }
            TableRule::TimeTier(t) => {
                let b = self.tier_bounds(t)?;
                let k = crate::routing::range::KeyKind::Date.key_of(v).ok_or_else(|| {
                    format!(
                        "the tier column `{column}` of `{table}` must be a date or datetime constant"
                    )
                })?;
                Ok(t.tiers[t.tier_of(&b, &k)].node)
            }
            TableRule::Single { node } => Ok(*node),
            TableRule::Broadcast => Ok(self.topo.default_node),
        }
    }

    fn key_column(&self, table: &str, alias: Option<&str>) -> Option<(KeyColumn, &'a TableRule)> {
        let rule = self.topo.table(table)?;
        let column = match rule {
            TableRule::HashSlot { column, .. } | TableRule::Range { column, .. } => column,
            TableRule::Directory(d) => &d.column,
            TableRule::TimeTier(t) => &t.column,
            _ => return None,
        };
        Some((self.qualified(table, alias, column), rule))
    }

    /// A column of `table` as this query may name it.
    fn qualified(&self, table: &str, alias: Option<&str>, column: &str) -> KeyColumn {
        let mut qualifiers = vec![table.to_string()];
        if let Some(a) = alias {
            qualifiers.push(a.to_ascii_lowercase());
        }
        KeyColumn {
            column: column.to_string(),
            qualifiers,
        }
    }

    fn placement(&self, u: &Use) -> Placement {
        if self.copies.contains(&u.table) {
            return Placement::Anywhere;
        }
        match self.topo.table(&u.table) {
            None => Placement::Nodes(vec![self.topo.default_node]),
            Some(TableRule::Broadcast) => Placement::Anywhere,
            Some(rule) => Placement::Nodes(self.nodes_for(
                &u.table,
                rule,
                u.keys.as_deref(),
                u.ranges.as_ref(),
            )),
        }
    }

    /// Where a statement reading these table uses can run as a whole: `Ok(node)` when every
    /// table it reads is on that one node (or everywhere); `Err` with the tables otherwise.
    fn common_node(&self, uses: &[Use]) -> Result<Option<usize>, String> {
        let mut node: Option<usize> = None;
        for u in uses {
            match self.placement(u) {
                Placement::Anywhere => {}
                Placement::Nodes(ns) => {
                    // An empty set means no row can match: any node of the table answers.
                    let n = match ns.as_slice() {
                        [] => self
                            .topo
                            .table(&u.table)
                            .and_then(|r| r.all_nodes(self.topo).first().copied())
                            .unwrap_or(self.topo.default_node),
                        [one] => *one,
                        _ => return Err(u.table.clone()),
                    };
                    match node {
                        None => node = Some(n),
                        Some(m) if m == n => {}
                        Some(_) => return Err(u.table.clone()),
                    }
                }
            }
        }
        Ok(node)
    }

    fn select(&self, q: &Query) -> Plan {
        let (uses, links) = uses::collect_linked(self.stmt, self);
        if uses.is_empty() {
            return self.sticky();
        }
        match self.common_node(&uses) {
            Ok(Some(n)) => return self.on(n),
            Ok(None) => return self.any_copy(),
            Err(_) => {}
        }
        // Rows from several nodes: one sharded table (with broadcast tables), or tables
        // sharded alike and joined on their shard keys (each node joins its own rows).
        let multi: Vec<usize> = (0..uses.len())
            .filter(|&i| !matches!(self.placement(&uses[i]), Placement::Anywhere))
            .collect();
        if multi.len() != 1 && matches!(q.body.as_ref(), SetExpr::SetOperation { .. }) {
            return self.gather(
                q,
                &uses,
                "UNION / INTERSECT / EXCEPT over tables on several nodes".into(),
            );
        }
        let nodes = match multi.as_slice() {
            [one] => match self.placement(&uses[*one]) {
                Placement::Nodes(ns) => ns,
                Placement::Anywhere => self.topo.all_nodes(),
            },
            _ => match self.colocated(&uses, &links, &multi) {
                Some(ns) => ns,
                None => {
                    let names: Vec<&str> = multi.iter().map(|&i| uses[i].table.as_str()).collect();
                    return self.gather(
                        q,
                        &uses,
                        format!(
                            "this query needs rows of {} from different nodes (not joined on equal shard keys of tables sharded alike)",
                            names.join(", ")
                        ),
                    );
                }
            },
        };
        let first = &uses[multi[0]];
        if nodes.len() == 1 {
            return self.on(nodes[0]);
        }
        let sharded = |t: &str| multi.iter().any(|&i| uses[i].table == t);
        if let Err(reason) = decompose::anchors(q, &sharded) {
            return self.gather(
                q,
                &uses,
                format!(
                    "{reason}: each node would answer over its own rows of `{}` only",
                    first.table
                ),
            );
        }
        if let Some(TableRule::TimeTier(rule)) = self.topo.table(&first.table) {
            if multi.len() != 1 {
                return refuse(format!(
                    "the time_tier table `{}` joined with another table on several nodes; shardproxy cannot run it",
                    first.table
                ));
            }
            return tier::plan_select(self, q, first, rule);
        }
        if needs_merge(q).is_none() {
            return self.on_nodes(&nodes, OkMerge::Sum);
        }
        let rewrite = match select::rewrite_text(q, self.sql, self.parsed, self.bound()) {
            Ok(r) => r,
            Err(reason) => {
                return self.gather(
                    q,
                    &uses,
                    format!(
                        "{reason} over `{}` needs a merge that shardproxy does not do (pinning the shard key `{}` to one node avoids the copy)",
                        first.table,
                        self.shard_column(&first.table)
                    ),
                )
            }
        };
        let scatter = Plan::Scatter {
            targets: nodes
                .iter()
                .map(|&node| Target {
                    node,
                    sql: rewrite.node_sql.clone(),
                    params: Vec::new(),
                })
                .collect(),
            ok: OkMerge::Sum,
        };
        rewrite.merge.tree(scatter)
    }

    /// Nodes for a query over several sharded tables, when that is correct: all use the same
    /// slot map and the query equates their shard keys, so matching rows sit on one node.
    fn colocated(
        &self,
        uses: &[Use],
        links: &[(usize, usize)],
        multi: &[usize],
    ) -> Option<Vec<usize>> {
        let Some(TableRule::HashSlot { map, .. }) = self.topo.table(&uses[multi[0]].table) else {
            return None;
        };
        for &i in multi {
            match self.topo.table(&uses[i].table) {
                Some(TableRule::HashSlot { map: m, .. }) if m.same_reads(map) => {}
                _ => return None,
            }
        }
        let group = uses::groups(uses.len(), links);
        if multi.iter().any(|&i| group[i] != group[multi[0]]) {
            return None;
        }
        let rule = self.topo.table(&uses[multi[0]].table)?;
        let mut nodes: Option<Vec<usize>> = None;
        for &i in multi {
            if let Some(keys) = &uses[i].keys {
                let ns = self.nodes_for_keys(&uses[i].table, rule, Some(keys));
                nodes = Some(match nodes {
                    None => ns,
                    Some(prev) => prev.into_iter().filter(|n| ns.contains(n)).collect(),
                });
            }
        }
        let all = map.nodes();
        Some(match nodes {
            None => all,
            Some(ns) if ns.is_empty() => all.into_iter().take(1).collect(),
            Some(ns) => ns,
        })
    }

    fn shard_column(&self, table: &str) -> String {
        self.topo
            .table(table)
            .and_then(TableRule::column)
            .unwrap_or_default()
            .to_string()
    }

    /// A read of broadcast tables only: any copy answers, the default node's first.
    fn any_copy(&self) -> Plan {
        let mut nodes = self.topo.all_nodes();
        if let Some(i) = nodes.iter().position(|n| *n == self.topo.default_node) {
            nodes[..=i].rotate_right(1);
        }
        Plan::AnyCopy {
            nodes,
            sql: self.sql.to_string(),
            params: self.params.to_vec(),
        }
    }

    /// Where the target table of an UPDATE / DELETE is written, given its WHERE.
    fn write_target(
        &self,
        table: &str,
        alias: Option<&str>,
        selection: Option<&Expr>,
        limited: bool,
        extra: &[Use],
    ) -> Plan {
        // Other tables the statement reads (subqueries, joins) must be readable where the
        // write runs.
        let rule = self.topo.table(table);
        let nodes: Vec<usize> = match rule {
            None => vec![self.topo.default_node],
            Some(TableRule::Broadcast) => self.topo.all_nodes(),
            Some(r @ TableRule::Single { .. }) => self.nodes_for_keys(table, r, None),
            Some(r) => {
                let key = self.key_column(table, alias).map(|(k, _)| k);
                let keys = key
                    .as_ref()
                    .and_then(|k| where_keys(selection, k, self.parsed, self.params));
                let ranges = match (r.key_kind(), &key) {
                    (Some(kind), Some(k)) => Some(crate::sql::ranges::where_ranges(
                        selection,
                        k,
                        self.parsed,
                        self.params,
                        &|v| kind.key_of(v),
                    )),
                    _ => None,
                };
                let ns = self.nodes_for(table, r, keys.as_deref(), ranges.as_ref());
                if ns.is_empty() {
                    // No row can match; run on one node for a correct "0 rows affected".
                    r.all_nodes(self.topo).into_iter().take(1).collect()
                } else {
                    ns
                }
            }
        };
        for u in extra {
            match self.placement(u) {
                Placement::Anywhere => {}
                Placement::Nodes(ns) if ns.len() == 1 && nodes == ns => {}
                Placement::Nodes(_) => {
                    return refuse(format!(
                        "this statement writes `{table}` using `{}`, which is not on the same node; shardproxy cannot run it across nodes",
                        u.table
                    ))
                }
            }
        }
        if let Some(TableRule::TimeTier(t)) = rule {
            if nodes.len() > 1 {
                if limited {
                    return refuse(format!(
                        "ORDER BY / LIMIT in an UPDATE or DELETE of `{table}` over several tiers would apply per tier; limit it to one tier by `{}`",
                        t.column
                    ));
                }
                return tier::plan_write(self, table, t, &nodes);
            }
        }
        if nodes.len() > 1 && limited && !matches!(rule, Some(TableRule::Broadcast)) {
            return refuse(format!(
                "ORDER BY / LIMIT in an UPDATE or DELETE of `{table}` on several nodes would apply per node; pin the shard key to one node"
            ));
        }
        let ok = if matches!(rule, Some(TableRule::Broadcast)) {
            OkMerge::Copies
        } else {
            OkMerge::Sum
        };
        self.on_nodes(&nodes, ok)
    }

    fn update(&self, u: &Update) -> Plan {
        let uses = collect_uses(self.stmt, self);
        if !u.table.joins.is_empty() || u.from.is_some() {
            return self.multi_table_write(&uses, "UPDATE");
        }
        let (table, alias) = match uses::factor_name(&u.table.relation) {
            Some(x) => x,
            None => return refuse("UPDATE of something other than a table"),
        };
        if let Some(column) = self.topo.table(&table).and_then(TableRule::column) {
            for a in &u.assignments {
                let targets = match &a.target {
                    sqlparser::ast::AssignmentTarget::ColumnName(n) => vec![n],
                    sqlparser::ast::AssignmentTarget::Tuple(ns) => ns.iter().collect(),
                };
                if targets.iter().any(|n| sql::table_name(n) == *column) {
                    return refuse(format!(
                        "UPDATE of the shard key `{column}` of `{table}` would move rows to another node; DELETE and INSERT them instead"
                    ));
                }
            }
        }
        let extra = uses::without_first(uses, &table);
        self.write_target(
            &table,
            alias.as_deref(),
            u.selection.as_ref(),
            u.limit.is_some() || !u.order_by.is_empty(),
            &extra,
        )
    }

    fn delete(&self, d: &Delete) -> Plan {
        let uses = collect_uses(self.stmt, self);
        let from = match &d.from {
            FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
        };
        if !d.tables.is_empty() || d.using.is_some() || from.len() != 1 || !from[0].joins.is_empty()
        {
            return self.multi_table_write(&uses, "DELETE");
        }
        let (table, alias) = match uses::factor_name(&from[0].relation) {
            Some(x) => x,
            None => return refuse("DELETE from something other than a table"),
        };
        let extra = uses::without_first(uses, &table);
        self.write_target(
            &table,
            alias.as_deref(),
            d.selection.as_ref(),
            d.limit.is_some() || !d.order_by.is_empty(),
            &extra,
        )
    }

    /// A write naming several tables runs whole on one node, or not at all.
    fn multi_table_write(&self, uses: &[Use], what: &str) -> Plan {
        if uses
            .iter()
            .any(|u| matches!(self.topo.table(&u.table), Some(TableRule::Broadcast)))
        {
            return refuse(format!(
                "multi-table {what} involving a broadcast table: write each table on its own"
            ));
        }
        match self.common_node(uses) {
            Ok(Some(n)) => self.on(n),
            Ok(None) => self.on(self.topo.default_node),
            Err(t) => refuse(format!(
                "multi-table {what} needs rows of `{t}` from several nodes; pin the shard keys to one node"
            )),
        }
    }

    /// DDL: sharded and broadcast tables change on every node, others on their node.
    fn ddl(&self, names: &[&ObjectName]) -> Plan {
        let mut target: Option<Vec<usize>> = None;
        for name in names {
            let table = sql::table_name(name);
            let nodes = match self.topo.table(&table) {
                None => vec![self.topo.default_node],
                Some(TableRule::Single { node }) => vec![*node],
                // Every node, so a rule change can move rows anywhere the table exists.
                Some(_) => self.topo.all_nodes(),
            };
            match &target {
                None => target = Some(nodes),
                Some(t) if *t == nodes => {}
                Some(_) => {
                    return refuse(
                        "this DDL names tables placed on different nodes: run it once per table",
                    )
                }
            }
        }
        let nodes = target.unwrap_or_else(|| vec![self.topo.default_node]);
        self.on_nodes(&nodes, OkMerge::Copies)
    }

    /// Metadata reads (SHOW CREATE TABLE, DESCRIBE): one node holding the table answers.
    fn read_one(&self, tables: &[String]) -> Plan {
        let node = tables
            .iter()
            .find_map(|t| match self.topo.table(t) {
                None => None,
                Some(TableRule::Single { node }) => Some(*node),
                Some(TableRule::Broadcast) => Some(self.topo.default_node),
                Some(r) => r.all_nodes(self.topo).first().copied(),
            })
            .unwrap_or(self.topo.default_node);
        self.on(node)
    }

    /// Any other statement: SHOW / DESCRIBE read one copy; other statements naming a sharded or
    /// broadcast table are refused; the rest run on their table's node.
    fn generic(&self, stmt: &Statement) -> Plan {
        let mut names: Vec<String> = Vec::new();
        let _ = sqlparser::ast::visit_relations(stmt, |n| {
            names.push(sql::table_name(n));
            std::ops::ControlFlow::<()>::Continue(())
        });
        let first = sql::leading_words(self.sql, 1);
        let is_read = first.first().is_some_and(|w| {
            ["SHOW", "DESCRIBE", "DESC", "EXPLAIN", "HELP"]
                .iter()
                .any(|k| w.eq_ignore_ascii_case(k))
        });
        if names.is_empty() {
            return self.sticky();
        }
        if is_read {
            return self.read_one(&names);
        }
        let uses: Vec<Use> = names
            .into_iter()
            .map(|table| Use {
                table,
                alias: None,
                keys: None,
                ranges: None,
            })
            .collect();
        if let Some(u) = uses.iter().find(|u| {
            !matches!(
                self.topo.table(&u.table),
                None | Some(TableRule::Single { .. })
            )
        }) {
            return refuse(format!(
                "this kind of statement on the sharded or broadcast table `{}` is not supported through shardproxy",
                u.table
            ));
        }
        match self.common_node(&uses) {
            Ok(Some(n)) => self.on(n),
            Ok(None) => self.sticky(),
            Err(t) => refuse(format!(
                "this statement names tables on different nodes (`{t}`); shardproxy cannot run it"
            )),
        }
    }
}

/// Why a SELECT whose rows come from several nodes cannot be answered by appending them.
pub(crate) fn needs_merge(q: &Query) -> Option<&'static str> {
    if q.order_by.is_some() {
        return Some("ORDER BY");
    }
    if q.limit_clause.is_some() || q.fetch.is_some() {
        return Some("LIMIT");
    }
    let s = match q.body.as_ref() {
        SetExpr::Select(s) => s,
        SetExpr::Query(inner) => return needs_merge(inner),
        SetExpr::SetOperation { .. } => return Some("UNION / INTERSECT / EXCEPT"),
        _ => return Some("this query form"),
    };
    if matches!(
        s.distinct,
        Some(sqlparser::ast::Distinct::Distinct | sqlparser::ast::Distinct::On(_))
    ) {
        return Some("DISTINCT");
    }
    match &s.group_by {
        GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty() => {}
        _ => return Some("GROUP BY"),
    }
    if s.having.is_some() {
        return Some("HAVING");
    }
    if s.into.is_some() {
        return Some("SELECT ... INTO");
    }
    if s.select_modifiers
        .as_ref()
        .is_some_and(|m| m.sql_calc_found_rows)
    {
        return Some("SQL_CALC_FOUND_ROWS");
    }
    if uses::has_aggregate(&s.projection) {
        return Some("an aggregate or window function");
    }
    None
}

#[cfg(test)]
pub(crate) mod random_tests;
#[cfg(test)]
pub(crate) mod rules_tests;
#[cfg(test)]
pub(crate) mod tests;
