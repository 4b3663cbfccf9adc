//! The plan tree: what [`crate::plan::plan`] answers for a statement (where it runs and how
//! its answers combine), the context planning reads, and how a plan describes itself
//! (`route`, PREVIEW, EXPLAIN).

use std::fmt;

use mysql_common::value::Value;

use super::tier::{TierMode, TierPlan};
use super::{gather, insert, moving};
use crate::config::Topology;
use crate::merge::{Aggregate, SortKey};

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
    /// `LOCK TABLES`: on every node holding one of the tables, each node's statement naming
    /// the tables it holds, in node order (so two sessions take their locks in one order);
    /// the locks of an earlier LOCK TABLES released first, as MySQL does.
    Lock {
        locks: Vec<(usize, String)>,
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
    /// A statement that names a table's columns by position or unqualified (an INSERT
    /// without a column list, a gathered read) whose column order is not known yet: read it
    /// from the table's nodes, then plan again.
    NeedColumns {
        schema: Option<String>,
        table: String,
    },
    /// A read across placements that may copy a sharded table to every node of another or
    /// gather both on one node, whose tables' row counts are not known yet: read the nodes'
    /// statistics (then cached), then plan again.
    NeedRows {
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
    /// A deep page of a merge, its start found by the sort key (the leaf of a merge tree:
    /// MergeSort and the page's Limit above it).
    KeyPage(Box<super::key_page::KeyPage>),
    /// A write to slots being moved: on the source, the changed rows' images to the target.
    DualWrite(Box<moving::DualWrite>),
    /// A write to slots whose moves copy changes from their sources' binary logs: it runs
    /// as `write` (on the sources; on a move's target, past its copies), counted as writing
    /// toward each of `targets` so that those moves' cutovers wait for it (and for its
    /// transaction) to end.
    Captured {
        targets: Vec<usize>,
        write: Box<Plan>,
    },
    /// A read no node answers over its own rows: tables copied to one node, run there.
    Gather(Box<gather::Gather>),
    /// Tables copied to every node a plan runs on, then the plan (reading them there).
    Shipped(Box<gather::Shipped>),
    /// A bound join's outer rows carried to the inner table's nodes, the statement run
    /// there and merged (the gathered plan where they cannot travel so).
    Spread(Box<super::spread::Spread>),
    /// An INSERT ... SELECT whose rows must move: the SELECT read, its rows inserted.
    InsertSelect(Box<insert::InsertSelect>),
    /// An UPDATE of a shard key: its rows read (a read planned of its own), then moved or
    /// updated by the session ([`crate::exec::key_update`]).
    KeyUpdate(Box<super::key_update::KeyUpdate>),
    /// A write to slots at the freeze step of their move: it waits for the next step, then
    /// is planned again; unless the session's transaction holds row images of the move
    /// already: then it runs `unless` (the freeze waits for that transaction to end).
    Frozen {
        table: String,
        unless: Option<Box<Plan>>,
    },
    /// A read whose WHERE pins a globally indexed column: read these index entries, then
    /// plan again (`crate::plan::indexed`).
    NeedIndex(Vec<super::indexed::IndexProbe>),
    /// A global index compares values by a collation whose weights are not read yet: read
    /// them from a node (then kept), then plan again.
    NeedWeights(String),
    /// A write to a table with global indexes: the client's write and the index writes it
    /// needs, run by the session in one transaction.
    Indexed(Box<super::indexed::IndexedWrite>),
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
    /// A table's statistics over all its nodes (rows, distinct values of indexed columns),
    /// if known.
    pub rows: &'a dyn Fn(&str) -> Option<std::sync::Arc<super::estimate::TableStats>>,
    /// An outer read of a bound join (its keys' query, or a spread's rows) that returned
    /// more than its plan takes lately: planned without that stage.
    pub overflowed: &'a dyn Fn(&str) -> bool,
    /// Unknown rows can be read from the nodes (`Plan::NeedRows`); offline they cannot,
    /// and a sharded table is never copied to every node of another.
    pub statistics: bool,
    /// Global index entries this statement has read.
    pub index: &'a IndexFn<'a>,
    /// A collation's weights, if read (`crate::routing::weights`).
    pub weights: &'a WeightsFn<'a>,
}

/// A weights probe: collation -> its weights, if read.
pub type WeightsFn<'a> =
    dyn Fn(&str) -> Option<std::sync::Arc<crate::routing::weights::Weights>> + 'a;

/// Why no id was generated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdError {
    /// The generator refused (a clock that stepped back, no generator): the statement fails.
    Refused(String),
    /// A sequence's block of ids reserved by this proxy is used up: reserve more, then plan
    /// again.
    NeedBlock,
}

/// An index probe: `(index table, value hash)` -> the shard keys of the rows holding the
/// value, if this statement has read them.
pub type IndexFn<'a> = dyn Fn(&str, &[u8]) -> Option<Vec<Value>> + 'a;

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
        rows: &|_: &str| None,
        overflowed: &|_: &str| false,
        statistics: false,
        index: &|_: &str, _: &[u8]| None,
        weights: &|_: &str| None,
    })
}

pub(crate) fn refuse(message: impl Into<String>) -> Plan {
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

    /// The nodes a write to moving slots is counted toward (a move's freeze waits for the
    /// writes toward its target); empty for other plans.
    pub fn moving_targets(&self) -> &[usize] {
        match self {
            Plan::DualWrite(d) => std::slice::from_ref(&d.target),
            Plan::Captured { targets, .. } => targets,
            Plan::Indexed(w) => w.base.moving_targets(),
            _ => &[],
        }
    }

    /// The client's own write under a [`Plan::Indexed`]; any other plan itself.
    pub fn unindexed(&self) -> &Plan {
        match self {
            Plan::Indexed(w) => &w.base,
            other => other,
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
            Plan::KeyPage(k) => k.nodes.clone(),
            Plan::Scatter { targets, .. } => targets.iter().map(|t| t.node).collect(),
            Plan::AnyCopy { nodes, .. } => nodes.iter().take(1).copied().collect(),
            Plan::DualWrite(d) => vec![d.source, d.target],
            Plan::Captured { write, .. } => write.nodes(),
            Plan::Indexed(w) => w.base.nodes(),
            Plan::Shipped(s) => {
                let mut v = s.nodes();
                for sh in &s.ships {
                    v.extend(sh.reads.iter().map(|(n, _)| *n));
                }
                v.sort_unstable();
                v.dedup();
                v
            }
            Plan::Spread(s) => s.nodes(),
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
pub(crate) fn keys_text(keys: &[SortKey], from_end: bool) -> String {
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
                    Plan::KeyPage(_) => " (less the rows before the key the page starts from)",
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
            Plan::KeyPage(k) => {
                let names: Vec<&str> = k.nodes.iter().map(|n| self.topo.node_name(*n)).collect();
                writeln!(
                    f,
                    "{lead}KeyPage on {}: rows {}..{} by {}{}, found by rank rounds (each node's key at its share of the offset, counts below the least), then about a page from each",
                    names.join(", "),
                    k.offset,
                    k.offset.saturating_add(k.limit),
                    k.key,
                    if k.desc { " DESC" } else { "" }
                )?;
                writeln!(f, "{pad}     rows: {}", k.texts.rows)?;
            }
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
                "Columns: `{table}` is named by column positions or unqualified columns: its column order is read from its nodes (then cached), and the statement planned again"
            ),
            Plan::NeedRows { table } => writeln!(
                f,
                "Rows: whether to copy tables to every node of another or to gather them on one node is chosen by their rows: `{table}`'s estimate is read from its nodes' statistics (then cached), and the statement planned again"
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
            Plan::Captured { targets, write } => {
                let to: Vec<String> = targets.iter().map(|t| name(*t).to_string()).collect();
                writeln!(
                    f,
                    "Captured: slots being moved to {}; the write runs where the rows are owned, past the copies a move's target holds, and the move copies its rows from the source's binary log",
                    to.join(", ")
                )?;
                self.node(f, write, 1, false)
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
                    if let Some(why) = &s.unbound {
                        writeln!(f, "     not bound by its join's values: {why}")?;
                    }
                    if let Some(b) = &s.bind {
                        writeln!(
                            f,
                            "     bound by {}: the values on {}: {}",
                            b.on,
                            name(b.node),
                            b.keys
                        )?;
                        match &b.by_index {
                            Some(ix) => writeln!(
                                f,
                                "     then their entries in the global index `{}` (`{}`), and on the nodes of the keys found: {}<values, {} a read>)",
                                ix.index.name,
                                ix.index.index_table,
                                b.head,
                                super::bind::PER_READ
                            )?,
                            None => writeln!(
                                f,
                                "     then on the nodes their slots name: {}<values, {} a read>)",
                                b.head,
                                super::bind::PER_READ
                            )?,
                        }
                        writeln!(
                            f,
                            "     (over {} values, or floating-point ones: read as planned)",
                            super::bind::MAX_VALUES
                        )?;
                        match &s.estimate {
                            Some(e) => writeln!(
                                f,
                                "     {}",
                                e.describe(&b.outer.written, &b.outer.column, &s.table)
                            )?,
                            None => writeln!(f, "     (no estimate: the nodes' statistics are read by a running proxy)")?,
                        }
                        if b.at.is_some() {
                            writeln!(
                                f,
                                "     (up to {} rows of a table without floating-point, binary, ENUM or SET columns: carried inside the statement as a JSON_TABLE, no temporary table)",
                                super::bind::INLINE_ROWS
                            )?;
                        }
                    }
                    for (n, sql) in &s.reads {
                        writeln!(f, "     {}: {sql}", name(*n))?;
                    }
                }
                writeln!(f, "  then on {}: {}", name(g.node), g.sql)
            }
            Plan::Spread(s) => {
                writeln!(
                    f,
                    "Spread: {} (the rows of `{}` carried to the nodes of `{}` inside the statement, the join made there)",
                    s.gather.why, s.outer, s.inner
                )?;
                writeln!(f, "  the rows on {}: {}", name(s.node), s.read)?;
                if let Some(e) = s.gather.ships.first().and_then(|sh| sh.estimate) {
                    writeln!(
                        f,
                        "     {} (carried while at most {})",
                        e.describe(&s.outer, &s.column, &s.inner),
                        super::bind::INLINE_ROWS
                    )?;
                }
                writeln!(
                    f,
                    "     each to the node of its `{}`'s slot, bound by {} (where `{}` and `{}` are integers and the rows are up to {} of a table without floating-point, binary, ENUM, SET or INVISIBLE columns: as a JSON_TABLE; else as below)",
                    s.column,
                    s.on,
                    s.column,
                    s.key,
                    super::bind::INLINE_ROWS
                )?;
                write!(f, "  then: {}", s.then.describe(self.topo))?;
                write!(
                    f,
                    "  else: {}",
                    Plan::Gather(Box::new(s.gather.clone())).describe(self.topo)
                )
            }
            Plan::Shipped(s) => {
                let names: Vec<&str> = s.nodes().iter().map(|n| name(*n)).collect();
                writeln!(
                    f,
                    "Shipped: {} (the other tables copied to each of {}, then run there as if broadcast)",
                    s.why,
                    names.join(", ")
                )?;
                if let Some(e) = &s.estimate {
                    writeln!(
                        f,
                        "  chosen by the nodes' statistics: the copies hold about {} row(s), gathering on one node would copy about {}",
                        e.ship, e.gather
                    )?;
                }
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
            Plan::NeedWeights(c) => writeln!(
                f,
                "Weights: the global index compares strings in {c}: its weights are read from a node once, then the statement planned again"
            ),
            Plan::NeedIndex(probes) => {
                for p in probes {
                    writeln!(
                        f,
                        "Index: the `{}` of {} value(s) read from the global index table `{}` (on the nodes their hashes name), then planned again with those keys",
                        p.shard_column,
                        p.hashes.len(),
                        p.index_table
                    )?;
                }
                Ok(())
            }
            Plan::Indexed(w) => {
                writeln!(
                    f,
                    "Indexed: `{}` has global indexes, kept in the statement's transaction (the proxy's own around an autocommit statement):",
                    w.table
                )?;
                if let Some(r) = &w.read {
                    writeln!(
                        f,
                        "  the rows it changes read first, locked: {}",
                        r.sql
                    )?;
                    writeln!(
                        f,
                        "  their entries in {} removed{}",
                        r.indexes.join(", "),
                        match (r.assigns, r.new_key) {
                            (_, true) => ", their new values' added, pointing at the new shard key",
                            (true, false) => ", their new values' added",
                            _ => "",
                        }
                    )?;
                }
                if !w.adds.is_empty() {
                    writeln!(f, "  {} index entr(ies) added first", w.adds.len())?;
                }
                if let Some(u) = &w.upsert {
                    writeln!(
                        f,
                        "  the rows of its {} key(s){}, read locked before and after it; their entries changed by the difference{}",
                        u.keys.len(),
                        if u.claims.is_empty() {
                            String::new()
                        } else {
                            format!(", and of the keys whose rows hold the {} unique value(s) it claims (read from their indexes)", u.claims.len())
                        },
                        match u.kind {
                            _ if u.claims.is_empty() => "",
                            super::indexed::UpsertKind::Replace => "; a row of another key left holding a unique value it wrote is deleted, as REPLACE deletes it",
                            super::indexed::UpsertKind::Ignore => "; a row it inserted holding a unique value another key's row holds is deleted, as IGNORE skips it",
                            super::indexed::UpsertKind::Update => "; a row it inserted holding a unique value another key's row holds is refused (1235)",
                        }
                    )?;
                }
                if w.shared_keys {
                    writeln!(
                        f,
                        "  rows share shard keys: a plain index's entry it removes is written again where a row of its key still holds the value"
                    )?;
                }
                writeln!(f, "  then the write:")?;
                self.node(f, &w.base, 1, false)
            }
            Plan::KeyUpdate(k) => {
                writeln!(
                    f,
                    "KeyUpdate: the rows of `{}` it matches are read with their new values (planned as a statement of its own: PREVIEW it), then each row whose new shard key belongs elsewhere is deleted on its node and inserted on the new one, the others updated by primary key, in one transaction:",
                    k.table
                )?;
                writeln!(f, "  {}", k.select)
            }
            Plan::Frozen { table, .. } => writeln!(
                f,
                "Frozen: the slots of `{table}` it writes are at the cutover of their move; it waits for the next step and is planned again"
            ),
            Plan::NeedKey { table, node, .. } => writeln!(
                f,
                "Key: the primary key of `{table}` is read from {} (then cached), and the statement planned again",
                name(*node)
            ),
            // Described by `node`.
            Plan::Scatter { .. }
            | Plan::Tier(_)
            | Plan::KeyPage(_)
            | Plan::Project { .. }
            | Plan::Limit { .. }
            | Plan::Aggregate { .. }
            | Plan::MergeSort { .. }
            | Plan::ValuesOrder { .. } => self.node(f, plan, 0, false),
        }
    }
}
