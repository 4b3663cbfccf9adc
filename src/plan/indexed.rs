//! Global secondary indexes in planning (`crate::config::indexes`).
//!
//! Reads: a plain SELECT whose WHERE pins an indexed column (`email = ?`, `email IN (...)`)
//! and not the shard key first reads the index ([`Plan::NeedIndex`]), then is planned again
//! with the shard keys found as if its WHERE pinned them: it goes to their nodes only (the
//! statement itself is unchanged, so its own WHERE still filters every row it reads).
//!
//! Writes: an INSERT, UPDATE of an indexed column or DELETE of a table with indexes becomes
//! [`Plan::Indexed`]: the client's write as planned, with the index entries it adds (an
//! INSERT's, from its values) or the locking read of the rows it changes (an UPDATE's or
//! DELETE's), which the session turns into index writes in the same transaction
//! (`crate::frontend::session` `indexed`).

use mysql_common::value::Value;
use sqlparser::ast::{
    AssignmentTarget, Delete, Expr, FromTable, Insert, SetExpr, Statement, TableObject, Update,
};

use super::key_update::{expr_text, mentions};
use super::tree::refuse;
use super::{uses, Plan, Planner};
use crate::config::indexes::GlobalIndex;
use crate::sql::keys::where_keys;
use crate::sql::text::Text;
use crate::sql::write::quoted;
use crate::sql::{self, literal, Offsets};

/// Index entries a read waits for: the shard keys of `hashes` in `index_table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexProbe {
    pub index_table: String,
    /// The base table's shard key column (the index table's column of that name).
    pub shard_column: String,
    pub hashes: Vec<Vec<u8>>,
    /// For a write or a locking read: inside a transaction the entries are read locked, as
    /// one MariaDB's UPDATE locks the range of a secondary index it reads by.
    pub write: bool,
}

/// An index entry a write adds: literals as the index table's INSERT writes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The index's name.
    pub index: String,
    pub hash: Vec<u8>,
    /// The indexed value's text, as a duplicate's 1062 shows it.
    pub shown: String,
    /// The indexed value, as a literal.
    pub value: String,
    /// The row's shard key, as a literal.
    pub key: String,
}

/// The locking read of the rows an UPDATE or DELETE of a table with indexes changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowsRead {
    /// `SELECT <shard key>, <each index's column>..., [(<its new value>)..., [(<the new
    /// shard key>)]] FROM ... WHERE ... FOR UPDATE`, bound values written in.
    pub sql: String,
    /// The indexes it reads, in its columns' order.
    pub indexes: Vec<String>,
    /// An UPDATE's: each index's new value follows the old ones.
    pub assigns: bool,
    /// An UPDATE of the shard key's: the row's new key comes last, and every index is read
    /// (each entry points at the key).
    pub new_key: bool,
}

/// What an INSERT that may change rows already there does: `REPLACE` deletes them,
/// `IGNORE` keeps them, `ON DUPLICATE KEY UPDATE` updates them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpsertKind {
    Replace,
    Ignore,
    Update,
}

/// REPLACE, INSERT IGNORE or INSERT ... ON DUPLICATE KEY UPDATE of a table with indexes:
/// which rows it changes is known only once it ran, so the rows of its shard keys (and of
/// the keys that hold the unique values it claims) are read before and after it, locked, and
/// their entries changed by the difference (`crate::frontend::session` `upsert`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upsert {
    pub kind: UpsertKind,
    /// Its rows' shard keys, literals.
    pub keys: Vec<String>,
    /// The entries its rows would add were they all new: the unique values it claims.
    pub claims: Vec<Entry>,
    /// The columns it names (lower-cased), and each row's values as literals (None: not a
    /// constant): where the table's own unique keys meet rows of other keys.
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Option<String>>>,
    /// A one-row ON DUPLICATE KEY UPDATE whose assignments do not name the shard key: its
    /// text before and after its shard key's value, bound values written in. Where its new
    /// row's key is free and its unique value another key's row holds, one MariaDB updates
    /// that row: the same statement with that row's key in place of its own does so on
    /// that row's node.
    pub redirect: Option<(String, String)>,
}

/// A write to a table with global indexes (see the module).
#[derive(Debug, Clone, PartialEq)]
pub struct IndexedWrite {
    pub table: String,
    /// The table as the proxy's own statements name it (schema-qualified when the client's
    /// write was), quoted.
    pub target: String,
    /// The schema the client's write named, if any.
    pub schema: Option<String>,
    /// Rows may share a shard key (it is not the table's whole primary key): an entry of a
    /// plain index stands for every row of its key holding its value, so one a write
    /// removes is written again when such a row is left.
    pub shared_keys: bool,
    /// The client's write, as planned without indexes.
    pub base: Plan,
    pub adds: Vec<Entry>,
    pub read: Option<RowsRead>,
    pub upsert: Option<Upsert>,
}

/// Functions an UPDATE's new value must not call: the read of the new value and the write
/// would each get their own.
const UNSTABLE: [&str; 12] = [
    "rand",
    "uuid",
    "uuid_short",
    "sys_guid",
    "now",
    "sysdate",
    "current_timestamp",
    "localtime",
    "localtimestamp",
    "unix_timestamp",
    "utc_timestamp",
    "nextval",
];

impl Planner<'_> {
    /// The shard keys of the rows a read's WHERE pins by a public index of `table`, when it
    /// pins no shard key: `None` when no index applies, or when the index must be read
    /// first (noted in `missing_index`). A locking read's entries are read locked inside a
    /// transaction.
    pub(super) fn index_keys(
        &self,
        table: &str,
        alias: Option<&str>,
        selection: Option<&Expr>,
    ) -> Option<Vec<Value>> {
        let Statement::Query(q) = self.stmt else {
            return None;
        };
        self.keys_by_index(table, alias, selection, !q.locks.is_empty())
    }

    /// [`Planner::index_keys`] for an UPDATE's own rows, when it changes no indexed column
    /// (one that does, and a DELETE, read their rows locked first and run where those are:
    /// `crate::frontend::session` `indexed`).
    pub(super) fn write_keys(
        &self,
        table: &str,
        alias: Option<&str>,
        selection: Option<&Expr>,
    ) -> Option<Vec<Value>> {
        let Statement::Update(u) = self.stmt else {
            return None;
        };
        let indexes = self.topo.indexes_of(table)?;
        let sets_indexed = u.assignments.iter().any(|a| match &a.target {
            AssignmentTarget::ColumnName(n) => {
                let n = sql::table_name(n);
                indexes.iter().any(|ix| ix.column == n)
            }
            AssignmentTarget::Tuple(_) => true,
        });
        if sets_indexed || !u.table.joins.is_empty() || u.from.is_some() {
            return None;
        }
        self.keys_by_index(table, alias, selection, true)
    }

    /// The weights `ix`'s hashes need (`Some(None)`: none, not a collated string); `None`
    /// when they must be read first (noted in `missing_weights`).
    pub(super) fn index_weights(
        &self,
        ix: &GlobalIndex,
    ) -> Option<Option<std::sync::Arc<crate::routing::weights::Weights>>> {
        match ix.collation() {
            None => Some(None),
            Some(c) => match (self.ctx.weights)(c) {
                Some(w) => Some(Some(w)),
                None => {
                    self.missing_weights.borrow_mut().push(c.to_string());
                    None
                }
            },
        }
    }

    fn keys_by_index(
        &self,
        table: &str,
        alias: Option<&str>,
        selection: Option<&Expr>,
        write: bool,
    ) -> Option<Vec<Value>> {
        for ix in self.topo.indexes_of(table)?.iter().filter(|i| i.public) {
            let column = self.qualified(table, alias, &ix.column);
            let Some(values) = where_keys(selection, &column, self.parsed, self.params) else {
                continue;
            };
            // Values that are equal only in the column's collation (`'a'` and `'a '`) can
            // leave an AND of two of them empty by their texts: no index for that.
            if values.is_empty() {
                continue;
            }
            let weights = self.index_weights(ix)?;
            let hashes: Result<Vec<Vec<u8>>, String> = values
                .iter()
                .filter(|v| !matches!(v, Value::NULL))
                .map(|v| ix.hash_of(v, self.ctx.charset, true, weights.as_deref()))
                .collect();
            let Ok(mut hashes) = hashes else { continue };
            hashes.sort();
            hashes.dedup();
            let mut keys = Vec::new();
            let mut missing = Vec::new();
            for h in hashes {
                match (self.ctx.index)(&ix.index_table, &h) {
                    Some(found) => keys.extend(found),
                    None => missing.push(h),
                }
            }
            if !missing.is_empty() {
                self.missing_index.borrow_mut().push(IndexProbe {
                    index_table: ix.index_table.clone(),
                    shard_column: ix.shard_column.clone(),
                    hashes: missing,
                    write,
                });
                return None;
            }
            return Some(keys);
        }
        None
    }
}

/// The table an INSERT, UPDATE or DELETE writes (lower-cased), its alias, and the schema
/// the statement names it in.
fn written(stmt: &Statement) -> Option<(String, Option<String>, Option<String>)> {
    let of = |f: &sqlparser::ast::TableFactor| {
        let (t, a) = uses::factor_name(f)?;
        let schema = match f {
            sqlparser::ast::TableFactor::Table { name, .. } => sql::schema_name(name),
            _ => None,
        };
        Some((t, a, schema))
    };
    match stmt {
        Statement::Insert(ins) => match &ins.table {
            TableObject::TableName(n) => Some((sql::table_name(n), None, sql::schema_name(n))),
            _ => None,
        },
        Statement::Update(u) => of(&u.table.relation),
        Statement::Delete(d) => {
            let from = match &d.from {
                FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
            };
            from.first().and_then(|f| of(&f.relation))
        }
        _ => None,
    }
}

/// `plan` of a write to a table with global indexes, as [`Plan::Indexed`] (or refused where
/// the index cannot be kept); any other plan as it is.
pub(super) fn wrap(p: &Planner<'_>, plan: Plan) -> Plan {
    if let Some(refused) = ddl_guard(p) {
        return refused;
    }
    let Some((table, alias, schema)) = written(p.stmt) else {
        return plan;
    };
    let Some(indexes) = p.topo.indexes_of(&table) else {
        return plan;
    };
    // The row's new shard key, when the write is an UPDATE of it.
    let mut moves_key = false;
    let base = match plan {
        Plan::Frozen {
            table,
            unless: Some(then),
        } => {
            return Plan::Frozen {
                table,
                unless: Some(Box::new(wrap(p, *then))),
            }
        }
        Plan::KeyUpdate(k) => {
            moves_key = k.assigned.contains(&k.shard);
            Plan::KeyUpdate(k)
        }
        Plan::Route(_)
        | Plan::Scatter { .. }
        | Plan::ValuesOrder { .. }
        | Plan::DualWrite(_)
        | Plan::Captured { .. } => plan,
        other => return other,
    };
    let no = |why: String| refuse(format!("{why}: `{table}` has global indexes (not yet)"));
    // An INSERT's entries are hashed here: the weights of their collations first.
    if matches!(p.stmt, Statement::Insert(_)) {
        if let Some(c) = indexes
            .iter()
            .filter_map(GlobalIndex::collation)
            .find(|c| (p.ctx.weights)(c).is_none())
        {
            return Plan::NeedWeights(c.to_string());
        }
    }
    let shard = &indexes[0].shard_column;
    // Whether rows may share a shard key matters to the entries a write removes.
    let mut shared_keys = false;
    if !matches!(p.stmt, Statement::Insert(_)) && indexes.iter().any(|ix| !ix.unique) {
        match (p.ctx.primary_key)(schema.as_deref(), &table) {
            Some(pk) => shared_keys = pk.len() != 1 || pk[0] != quoted(shard),
            None => {
                let node = p
                    .topo
                    .table(&table)
                    .and_then(|r| r.all_nodes(p.topo).first().copied())
                    .unwrap_or(p.topo.default_node);
                return Plan::NeedKey {
                    schema,
                    table,
                    node,
                };
            }
        }
    }
    let (mut adds, mut read, mut upsert) = (Vec::new(), None, None);
    match p.stmt {
        Statement::Insert(ins) => match insert_entries(p, ins, indexes) {
            Ok((entries, None)) => adds = entries,
            Ok((mut claims, Some(mut u))) => {
                // Only a unique index in use makes a row another key's row holds a conflict.
                claims.retain(|e| {
                    indexes
                        .iter()
                        .any(|i| i.name == e.index && i.unique && i.public)
                });
                u.claims = claims;
                upsert = Some(u)
            }
            Err(why) => return no(why),
        },
        Statement::Update(u) => {
            match update_read(p, u, &table, alias.as_deref(), indexes, moves_key) {
                Ok(Some(r)) => read = Some(r),
                Ok(None) => return base,
                Err(why) => return no(why),
            }
        }
        Statement::Delete(d) => match delete_read(p, d, &table, alias.as_deref(), indexes) {
            Ok(r) => read = Some(r),
            Err(why) => return no(why),
        },
        _ => return base,
    }
    let target = match &schema {
        Some(s) => format!("{}.{}", quoted(s), quoted(&table)),
        None => quoted(&table),
    };
    Plan::Indexed(Box::new(IndexedWrite {
        table,
        target,
        schema,
        shared_keys,
        base,
        adds,
        read,
        upsert,
    }))
}

/// The entries an INSERT's rows add; for an upsert, those they claim, and the upsert
/// (its claims still to fill in).
fn insert_entries(
    p: &Planner<'_>,
    ins: &Insert,
    indexes: &[GlobalIndex],
) -> Result<(Vec<Entry>, Option<Upsert>), String> {
    if ins.returning.is_some() {
        return Err("INSERT ... RETURNING".into());
    }
    let kind = if ins.replace_into {
        Some(UpsertKind::Replace)
    } else if ins.on.is_some() {
        Some(UpsertKind::Update)
    } else if ins.ignore {
        Some(UpsertKind::Ignore)
    } else {
        None
    };
    // INSERT ... SET: one row, its columns named by the assignments.
    let set_row: Vec<Expr>;
    let (columns, rows): (Vec<String>, Vec<&[Expr]>) =
        match ins.source.as_ref().map(|s| s.body.as_ref()) {
            Some(SetExpr::Values(values)) => (
                ins.columns.iter().map(sql::table_name).collect(),
                values.rows.iter().map(|r| r.content.as_slice()).collect(),
            ),
            None => {
                let mut names = Vec::new();
                let mut exprs = Vec::new();
                for a in &ins.assignments {
                    let AssignmentTarget::ColumnName(n) = &a.target else {
                        return Err("INSERT ... SET with a tuple".into());
                    };
                    names.push(sql::table_name(n));
                    exprs.push(a.value.clone());
                }
                set_row = exprs;
                (names, vec![set_row.as_slice()])
            }
            // (An INSERT ... SELECT whose rows move is planned as one of VALUES.)
            Some(_) => return Err("INSERT ... SELECT into the table's own nodes".into()),
        };
    let position = |c: &str| columns.iter().position(|n| n == c);
    let shard = &indexes[0].shard_column;
    // Each row's key as the INSERT was routed by (a generated one too), else as written.
    let key_at = position(shard);
    let routed = p.row_keys.borrow().clone();
    if key_at.is_none() && routed.is_none() {
        return Err(format!(
            "an INSERT ... SET that does not name the shard key `{shard}`"
        ));
    }
    let charset = p.ctx.charset;
    let constant = |e: Option<&Expr>| e.and_then(|e| literal(e, p.parsed, p.params));
    let key_of = |i: usize, row: &[Expr]| match routed.as_ref().and_then(|k| k.get(i)) {
        Some(v) => Some(v.clone()),
        None => key_at.and_then(|at| constant(row.get(at))),
    };
    let mut keys = Vec::new();
    let mut values = Vec::new();
    if kind.is_some() {
        for (i, row) in rows.iter().enumerate() {
            let Some(key) = key_of(i, row) else {
                return Err(format!(
                    "row {}: `{shard}` must be a constant, not an expression",
                    i + 1
                ));
            };
            keys.push(crate::sql::write::literal(&key, charset));
            values.push(
                row.iter()
                    .map(|e| constant(Some(e)).map(|v| crate::sql::write::literal(&v, charset)))
                    .collect(),
            );
        }
    }
    let mut out = Vec::new();
    for ix in indexes {
        let Some(at) = position(&ix.column) else {
            // Left out: its default, NULL, has no entry.
            if ix.default_null {
                continue;
            }
            return Err(format!(
                "an INSERT that leaves out `{}`, the column of the global index `{}`, whose default is not NULL (name it)",
                ix.column, ix.name
            ));
        };
        for (i, row) in rows.iter().enumerate() {
            let (Some(key), Some(v)) = (key_of(i, row), constant(row.get(at))) else {
                return Err(format!(
                    "row {}: `{}` and `{shard}` must be constants, not expressions",
                    i + 1,
                    ix.column
                ));
            };
            if matches!(v, Value::NULL) {
                continue;
            }
            let weights = ix.collation().and_then(|c| (p.ctx.weights)(c));
            let hash = ix
                .hash_of(&v, charset, false, weights.as_deref())
                .map_err(|e| format!("row {}: {e}", i + 1))?;
            out.push(Entry {
                index: ix.name.clone(),
                shown: String::from_utf8_lossy(&crate::value::text_form(&v).unwrap_or_default())
                    .into_owned(),
                hash,
                value: crate::sql::write::literal(&v, charset),
                key: crate::sql::write::literal(&key, charset),
            });
        }
    }
    let redirect = match (&ins.on, rows.as_slice()) {
        (Some(sqlparser::ast::OnInsert::DuplicateKeyUpdate(assigns)), [row])
            if !assigns.iter().any(|a| mentions(&a.value, shard)) =>
        {
            key_at.and_then(|at| row.get(at)).and_then(|e| {
                let text = Text::new(p.sql, p.parsed.mode).ok()?;
                let (a, b) = text.extent(e)?;
                let before = text.render(0, a, p.bound()).ok()?;
                let after = text.render(b, p.sql.len(), p.bound()).ok()?;
                Some((before, after))
            })
        }
        _ => None,
    };
    Ok((
        out,
        kind.map(|kind| Upsert {
            kind,
            keys,
            claims: Vec::new(),
            columns,
            rows: values,
            redirect,
        }),
    ))
}

/// What an UPDATE or DELETE's read is made of: the text of its WHERE (and FROM).
struct Source {
    from: String,
    qualifier: String,
    filter: String,
}

fn source(
    p: &Planner<'_>,
    name: &sqlparser::ast::TableFactor,
    table: &str,
    alias: Option<&str>,
    selection: Option<&Expr>,
) -> Result<Source, String> {
    let sqlparser::ast::TableFactor::Table { name, .. } = name else {
        return Err("a write to something other than a table".into());
    };
    let text = Text::new(p.sql, p.parsed.mode).map_err(|e| format!("a text not read ({e})"))?;
    let offsets = Offsets::new(p.sql);
    let filter = match selection {
        None => String::new(),
        Some(w) => match expr_text(p, &text, &offsets, w) {
            Some(w) => format!(" WHERE {w}"),
            None => return Err("a WHERE that cannot be located in the text".into()),
        },
    };
    let target = match sql::schema_name(name) {
        Some(s) => format!("{}.{}", quoted(&s), quoted(table)),
        None => quoted(table),
    };
    Ok(Source {
        from: match alias {
            Some(a) => format!("{target} AS {}", quoted(a)),
            None => target,
        },
        qualifier: quoted(alias.unwrap_or(table)),
        filter,
    })
}

fn update_read(
    p: &Planner<'_>,
    u: &Update,
    table: &str,
    alias: Option<&str>,
    indexes: &[GlobalIndex],
    moves_key: bool,
) -> Result<Option<RowsRead>, String> {
    let target = |a: &sqlparser::ast::Assignment| match &a.target {
        AssignmentTarget::ColumnName(n) => Some(sql::table_name(n)),
        AssignmentTarget::Tuple(_) => None,
    };
    let shard = &indexes[0].shard_column;
    // Each index read, with its new value (None: the column's own, unchanged).
    let mut touched: Vec<(&GlobalIndex, Option<&Expr>)> = Vec::new();
    let mut new_key: Option<&Expr> = None;
    for (i, a) in u.assignments.iter().enumerate() {
        let Some(name) = target(a) else {
            return Err("an UPDATE with a tuple assignment".into());
        };
        if moves_key && name == *shard {
            new_key = Some(&a.value);
        }
        let Some(ix) = indexes.iter().find(|ix| ix.column == name) else {
            continue;
        };
        if touched.iter().any(|(t, _)| t.column == name) {
            return Err(format!("an UPDATE that sets `{name}` twice"));
        }
        // MariaDB assigns left to right: the value may read a column set before it.
        if let Some(before) = u.assignments[..i]
            .iter()
            .filter_map(target)
            .find(|c| mentions(&a.value, c))
        {
            return Err(format!(
                "an UPDATE that sets `{name}` from `{before}`, which it sets before"
            ));
        }
        touched.push((ix, Some(&a.value)));
    }
    if let Some(e) = new_key {
        // Every entry points at the key: each index is read, changed or not.
        for ix in indexes {
            if !touched.iter().any(|(t, _)| t.name == ix.name) {
                touched.push((ix, None));
            }
        }
        if calls_unstable(e) {
            return Err(format!(
                "an UPDATE that sets `{shard}` by a function whose value changes between calls"
            ));
        }
    }
    if touched.is_empty() {
        return Ok(None);
    }
    if let Some((ix, _)) = touched.iter().find(|(_, e)| e.is_some_and(calls_unstable)) {
        return Err(format!(
            "an UPDATE that sets `{}` by a function whose value changes between calls",
            ix.column
        ));
    }
    if !u.table.joins.is_empty() || u.from.is_some() {
        return Err("a multi-table UPDATE of an indexed column".into());
    }
    if u.limit.is_some() || !u.order_by.is_empty() {
        return Err("an UPDATE of an indexed column with ORDER BY or LIMIT".into());
    }
    let s = source(p, &u.table.relation, table, alias, u.selection.as_ref())?;
    let text = Text::new(p.sql, p.parsed.mode).map_err(|e| format!("a text not read ({e})"))?;
    let offsets = Offsets::new(p.sql);
    let column = |c: &str| format!("{}.{}", s.qualifier, quoted(c));
    let mut list = vec![column(shard)];
    list.extend(touched.iter().map(|(ix, _)| column(&ix.column)));
    let own = |e: &Expr| {
        expr_text(p, &text, &offsets, e)
            .map(|v| format!("({v})"))
            .ok_or_else(|| "an assignment that cannot be located in the text".to_string())
    };
    for (ix, e) in &touched {
        list.push(match e {
            Some(e) => own(e)?,
            None => column(&ix.column),
        });
    }
    if let Some(e) = new_key {
        list.push(own(e)?);
    }
    Ok(Some(RowsRead {
        sql: format!(
            "SELECT {} FROM {}{} FOR UPDATE",
            list.join(", "),
            s.from,
            s.filter
        ),
        indexes: touched.iter().map(|(ix, _)| ix.name.clone()).collect(),
        assigns: true,
        new_key: new_key.is_some(),
    }))
}

fn delete_read(
    p: &Planner<'_>,
    d: &Delete,
    table: &str,
    alias: Option<&str>,
    indexes: &[GlobalIndex],
) -> Result<RowsRead, String> {
    let from = match &d.from {
        FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
    };
    if !d.tables.is_empty() || d.using.is_some() || from.len() != 1 || !from[0].joins.is_empty() {
        return Err("a multi-table DELETE".into());
    }
    if d.limit.is_some() || !d.order_by.is_empty() {
        return Err("a DELETE with ORDER BY or LIMIT".into());
    }
    let s = source(p, &from[0].relation, table, alias, d.selection.as_ref())?;
    let mut list = vec![format!(
        "{}.{}",
        s.qualifier,
        quoted(&indexes[0].shard_column)
    )];
    list.extend(
        indexes
            .iter()
            .map(|ix| format!("{}.{}", s.qualifier, quoted(&ix.column))),
    );
    Ok(RowsRead {
        sql: format!(
            "SELECT {} FROM {}{} FOR UPDATE",
            list.join(", "),
            s.from,
            s.filter
        ),
        indexes: indexes.iter().map(|ix| ix.name.clone()).collect(),
        assigns: false,
        new_key: false,
    })
}

/// DDL that would leave a global index wrong, refused: TRUNCATE or DROP of an indexed table
/// (its entries would stay, a unique value taken by rows no longer there), RENAME of one,
/// an ALTER that names an indexed column (its type or collation is what the hashes follow).
fn ddl_guard(p: &Planner<'_>) -> Option<Plan> {
    use sqlparser::ast::ObjectType;
    let indexed = |name: &sqlparser::ast::ObjectName| {
        let t = sql::table_name(name);
        p.topo.indexes_of(&t).map(|l| (t, l))
    };
    // An index table's entries are the index: emptied, dropped or changed by DDL, reads by
    // the column would miss rows.
    let entries_of = |name: &sqlparser::ast::ObjectName| {
        let t = sql::table_name(name);
        p.topo.index_in(&t).map(|ix| (t, ix))
    };
    let index_table = |t: &str, ix: &GlobalIndex, what: &str| {
        refuse(format!(
            "{what} of `{t}`, the table of the global index `{}` of `{}`: DROP GLOBAL INDEX {} ON {} on the admin interface first",
            ix.name, ix.table, ix.name, ix.table
        ))
    };
    let named: Vec<(&sqlparser::ast::ObjectName, &str)> = match p.stmt {
        Statement::Truncate(tr) => tr
            .table_names
            .iter()
            .map(|n| (&n.name, "TRUNCATE"))
            .collect(),
        Statement::Drop {
            object_type: ObjectType::Table,
            names,
            ..
        } => names.iter().map(|n| (n, "DROP TABLE")).collect(),
        Statement::RenameTable(renames) => renames
            .iter()
            .map(|r| (&r.old_name, "RENAME TABLE"))
            .collect(),
        Statement::AlterTable(a) => vec![(&a.name, "ALTER TABLE")],
        _ => Vec::new(),
    };
    if let Some(refused) = named
        .iter()
        .find_map(|(n, what)| entries_of(n).map(|(t, ix)| index_table(&t, ix, what)))
    {
        return Some(refused);
    }
    let drop_first = |t: &str, what: &str| {
        refuse(format!(
            "{what} of `{t}`, which has global indexes: DROP GLOBAL INDEX each on the admin interface first (SHOW GLOBAL INDEXES)"
        ))
    };
    match p.stmt {
        Statement::Truncate(tr) => tr
            .table_names
            .iter()
            .find_map(|n| indexed(&n.name))
            .map(|(t, _)| drop_first(&t, "TRUNCATE")),
        Statement::Drop {
            object_type: ObjectType::Table,
            names,
            ..
        } => names
            .iter()
            .find_map(indexed)
            .map(|(t, _)| drop_first(&t, "DROP TABLE")),
        Statement::RenameTable(renames) => renames
            .iter()
            .find_map(|r| indexed(&r.old_name))
            .map(|(t, _)| drop_first(&t, "RENAME TABLE")),
        Statement::AlterTable(a) => {
            let (t, list) = indexed(&a.name)?;
            if a.operations
                .iter()
                .any(|op| matches!(op, sqlparser::ast::AlterTableOperation::RenameTable { .. }))
            {
                return Some(drop_first(&t, "ALTER TABLE ... RENAME"));
            }
            let words: Vec<String> = a
                .operations
                .iter()
                .flat_map(|op| {
                    op.to_string()
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .map(str::to_ascii_lowercase)
                        .collect::<Vec<_>>()
                })
                .collect();
            let shard = &list[0].shard_column;
            let named = list
                .iter()
                .map(|i| &i.column)
                .chain(std::iter::once(shard))
                .find(|c| words.iter().any(|w| w == *c))?;
            Some(refuse(format!(
                "ALTER TABLE of `{t}` naming `{named}`, which a global index of it holds (its type and collation are what the index compares by): DROP GLOBAL INDEX first, then CREATE it again"
            )))
        }
        _ => None,
    }
}

/// Does `e` call a function whose value differs from one call to the next?
fn calls_unstable(e: &Expr) -> bool {
    let mut found = false;
    let _ = sqlparser::ast::visit_expressions(e, |x| {
        if let Expr::Function(f) = x {
            let name = f.name.to_string().to_ascii_lowercase();
            if UNSTABLE.contains(&name.as_str()) {
                found = true;
                return std::ops::ControlFlow::Break(());
            }
        }
        std::ops::ControlFlow::Continue(())
    });
    found
}
