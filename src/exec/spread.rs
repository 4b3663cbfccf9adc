//! A bound join's outer rows carried to the inner table's nodes ([`crate::plan::spread`]):
//! the outer rows and both tables' definitions read at once, and each row written into the
//! statement of the node its join value's slot names ([`super::inline`]). `super::spread`
//! then runs the statements and merges them as planned, or, where the rows cannot travel so,
//! the gathered plan (nothing has reached the client by then).

use std::sync::Arc;

use mysql_common::packets::Column;
use mysql_common::value::Value;

use super::door::{Door, NodeError, Run, Stmt};
use super::gather::{created, show_create_of};
use super::inline::{integer_column, shape, Carry, Doc};
use crate::error::MyError;
use crate::merge::Row;
use crate::plan::spread::Spread;
use crate::plan::Plan;

/// What one of the first stage's reads gave: its columns and rows.
type Read = (Option<Arc<[Column]>>, Vec<Row>);

/// The outer rows read, split by the node of their join value, and written into the
/// statements of `s.then` (as a parameter of their own when `param`: a statement the node
/// prepares and keeps by its text); `None` where they cannot travel so (the gathered plan
/// runs).
pub async fn spread_rows<D: Door>(
    door: &mut D,
    s: &Spread,
    cap: u64,
    param: bool,
) -> Result<Option<Plan>, NodeError> {
    // Definitions kept from an earlier statement decide before any read.
    let kept_outer = door.kept_definition(&s.outer);
    let kept_inner = door.kept_definition(&s.inner);
    let kept_shape = match kept_outer.as_deref().map(shape) {
        Some(None) => return no(NOT_TEXT),
        known => known.flatten(),
    };
    if let Some(why) = unfit(s, kept_outer.as_deref(), kept_inner.as_deref()) {
        return no(why);
    }
    let show_outer = show_create_of(&s.outer);
    let show_inner = show_create_of(&s.inner);
    let mut reads = vec![(s.node, s.read.as_str())];
    if kept_outer.is_none() {
        reads.push((s.definition, show_outer.as_str()));
    }
    if kept_inner.is_none() {
        reads.push((s.inner_definition, show_inner.as_str()));
    }
    let mut got = read_at_once(door, &reads).await?.into_iter();
    let (cols, rows) = got.next().ok_or_else(|| lost(s.node))?;
    // Each definition read now, kept for the next statements.
    let mut fresh = |kept: &Option<Arc<str>>, table: &str| -> Result<Option<String>, NodeError> {
        if kept.is_some() {
            return Ok(None);
        }
        let (_, rows) = got.next().ok_or_else(|| lost(s.node))?;
        let text = created(&rows);
        if !text.is_empty() {
            door.keep_definition(table, Some(&text));
        }
        Ok(Some(text))
    };
    let fresh_outer = fresh(&kept_outer, &s.outer)?;
    let fresh_inner = fresh(&kept_inner, &s.inner)?;
    if let Some(why) = unfit(s, fresh_outer.as_deref(), fresh_inner.as_deref()) {
        return no(why);
    }
    let shape = match (kept_shape, fresh_outer.as_deref().map(shape)) {
        (Some(kept), _) => kept,
        (None, Some(Some(read))) => read,
        _ => return no(NOT_TEXT),
    };
    let Some(cols) = cols else {
        return no("the outer rows' read gave no result set");
    };
    if !shape.fits(&cols) {
        // A definition kept from before a DDL made on the nodes directly: read again next
        // time.
        if fresh_outer.is_none() {
            door.keep_definition(&s.outer, None);
        }
        return no("the outer rows' columns are not the table's definition");
    }
    let mut named = cols
        .iter()
        .enumerate()
        .filter(|(_, c)| c.name_str().eq_ignore_ascii_case(&s.column));
    let (Some((at, _)), None) = (named.next(), named.next()) else {
        return no("the outer rows do not name the join column once");
    };
    if rows.len() > crate::plan::bind::INLINE_ROWS || rows.len() as u64 > cap {
        door.overflowed(&s.read);
        return no("too many outer rows");
    }
    let targets: Vec<usize> = match s.then.source() {
        Plan::Route(t) => vec![t.node],
        Plan::Scatter { targets, .. } => targets.iter().map(|t| t.node).collect(),
        _ => return no("the statement is neither a route nor a scatter"),
    };
    // Each row in the share of its value's node; a NULL value joins no row: anywhere.
    let mut shares: Vec<Vec<&Row>> = vec![Vec::new(); targets.len()];
    let mut nulls = Vec::new();
    for row in &rows {
        match row.get(at) {
            Some(None | Some(Value::NULL)) => nulls.push(row),
            Some(Some(v)) => {
                let Some(node) = node_of(s, v) else {
                    return no("a join value is not an integer on one node");
                };
                // A node the statement's own keys leave out: the row cannot meet its WHERE.
                if let Some(i) = targets.iter().position(|t| *t == node) {
                    shares[i].push(row);
                }
            }
            None => return no("a row is shorter than its columns"),
        }
    }
    let first = shares.iter().position(|r| !r.is_empty()).unwrap_or(0);
    shares[first].extend(nulls);
    let mut tables: Vec<Option<Carry>> = Vec::with_capacity(targets.len());
    for (i, share) in shares.iter().enumerate() {
        if share.is_empty() && i != first {
            tables.push(None);
            continue;
        }
        let mut doc = Doc::new(&shape);
        for row in share {
            doc.row(row, &cols);
        }
        match doc.table(param) {
            Some(t) => tables.push(Some(t)),
            None => return no("the outer rows cannot travel as text"),
        }
    }
    let mut then = s.then.clone();
    let mode = door.state().mode;
    let place = |t: &mut crate::plan::Target, at: (usize, usize), rows: &Carry| {
        rows.place(&t.sql, &mut t.params, at, mode)
            .map(|sql| t.sql = sql)
    };
    let placed = match then.source_mut() {
        Plan::Route(t) => match (s.at.first(), tables.first()) {
            (Some(at), Some(Some(table))) => place(t, *at, table),
            _ => None,
        },
        Plan::Scatter { targets, .. } => {
            // Only the nodes that got rows: another's answer is empty (or, under an
            // aggregate, the merge's identity), and one node always runs.
            let mut kept = Vec::new();
            for ((mut t, at), table) in targets.drain(..).zip(&s.at).zip(&tables) {
                if let Some(table) = table {
                    place(&mut t, *at, table).ok_or_else(|| lost(t.node))?;
                    kept.push(t);
                }
            }
            *targets = kept;
            Some(())
        }
        _ => None,
    };
    if placed.is_none() {
        return Err(lost(s.node));
    }
    door.count_copied("spread", rows.len() as u64);
    Ok(Some(then))
}

/// Why the definitions of the outer and the inner table (where known) keep the outer rows
/// from travelling: join columns that are not integers in both (an integer equals `'0012'`
/// in a string key, whose row lies on that text's slot). Whether the outer columns can
/// travel at all is their [`shape`]'s.
fn unfit(s: &Spread, outer: Option<&str>, inner: Option<&str>) -> Option<&'static str> {
    if outer.is_some_and(|o| !integer_column(o, &s.column))
        || inner.is_some_and(|p| !integer_column(p, &s.key))
    {
        return Some("the join's columns are not integers in both tables");
    }
    None
}

const NOT_TEXT: &str = "a column of the outer table cannot travel as text";

/// The gathered plan runs instead, for this reason.
fn no(why: &str) -> Result<Option<Plan>, NodeError> {
    tracing::debug!("shardproxy: outer rows not spread: {why}");
    Ok(None)
}

/// The node of the rows of the inner table a join value equals: its slot's, as an integer
/// key is routed; `None` where it is not an integer, or its rows are on several nodes (a
/// salted key).
fn node_of(s: &Spread, v: &Value) -> Option<usize> {
    let text = match v {
        Value::Bytes(b) => std::borrow::Cow::Borrowed(b),
        other => std::borrow::Cow::Owned(crate::value::text_form(other)?),
    };
    // As the key is written: a ZEROFILL column's `007` is the key 7.
    let n: i128 = std::str::from_utf8(&text).ok()?.parse().ok()?;
    match s
        .map
        .place_text(n.to_string().as_bytes())
        .nodes(None)
        .as_slice()
    {
        [one] => Some(*one),
        _ => None,
    }
}

fn lost(node: usize) -> NodeError {
    NodeError {
        node,
        error: MyError::internal("shardproxy: the outer rows' place in a statement is lost"),
        broke: false,
    }
}

/// Each statement on its node, those on distinct nodes at once, each read to its end
/// before any error is the answer.
async fn read_at_once<D: Door>(
    door: &mut D,
    reads: &[(usize, &str)],
) -> Result<Vec<Read>, NodeError> {
    let n = reads.len();
    let mut out: Vec<Option<Read>> = vec![None; n];
    let mut left: Vec<usize> = (0..n).collect();
    while !left.is_empty() {
        let mut round: Vec<usize> = Vec::new();
        for &i in &left {
            if !round.iter().any(|&j| reads[j].0 == reads[i].0) {
                round.push(i);
            }
        }
        left.retain(|i| !round.contains(i));
        let stmts: Vec<(usize, Stmt<'_>)> = round
            .iter()
            .map(|&i| (reads[i].0, Stmt::new(reads[i].1, &[])))
            .collect();
        let results = door.start_all(&stmts, Run::TEXT_READ).await?;
        let mut first_err = None;
        for (&i, res) in round.iter().zip(super::scatter::started(results).await?) {
            let cols = super::door::NodeResult::columns(&res);
            match super::scatter::drain(res).await {
                Ok(rows) => out[i] = Some((cols, rows)),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(i, r)| r.ok_or_else(|| lost(reads[i].0)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Topology;
    use crate::exec::door::Access;
    use crate::exec::fake::{Canned, FakeDoor, RecordSink};
    use crate::plan::tests::{keys_on_both, node_of};
    use mysql_common::constants::ColumnType;

    const ORDERS: &str = "CREATE TABLE `t_order` (\n  `order_id` bigint(20) NOT NULL,\n  `user_id` int(11) NOT NULL,\n  `item` int(11) DEFAULT NULL,\n  PRIMARY KEY (`order_id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

    fn items(key: &str) -> String {
        format!("CREATE TABLE `t_item` (\n  `user_id` {key} NOT NULL,\n  `x` int(11) DEFAULT NULL,\n  PRIMARY KEY (`user_id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")
    }

    /// A spread plan of a join of the orders to the items by the items' key (the plans'
    /// test rules: two nodes), and the topology.
    fn planned() -> (Spread, Topology) {
        let topo = crate::plan::tests::topo();
        let sql = "SELECT o.order_id, i.x FROM t_order o JOIN t_item i ON i.user_id = o.item WHERE o.user_id = 5";
        match crate::plan::tests::plan_in(&topo, sql, &[]) {
            Plan::Spread(s) => (*s, topo),
            other => panic!("not spread: {other:?}"),
        }
    }

    /// A door whose outer rows join items `keys` (a NULL among them), the item key `key`.
    fn door(s: &Spread, keys: &[&str], key: &str) -> FakeDoor {
        let mut d = FakeDoor::new(2);
        let rows: Vec<Vec<String>> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| vec![(100 + i).to_string(), "5".into(), k.to_string()])
            .collect();
        let rows: Vec<Vec<&str>> = rows
            .iter()
            .map(|r| r.iter().map(String::as_str).collect())
            .collect();
        let rows: Vec<&[&str]> = rows.iter().map(Vec::as_slice).collect();
        let (int, big) = (ColumnType::MYSQL_TYPE_LONG, ColumnType::MYSQL_TYPE_LONGLONG);
        d.answer(
            s.node,
            "SELECT `o`.*",
            Canned::typed(&[("order_id", big), ("user_id", int), ("item", int)], &rows),
        );
        d.answer_any(
            "SHOW CREATE TABLE `t_order`",
            Canned::rows(&["Table", "Create Table"], &[&["t_order", ORDERS]]),
        );
        d.answer_any(
            "SHOW CREATE TABLE `t_item`",
            Canned::rows(&["Table", "Create Table"], &[&["t_item", &items(key)]]),
        );
        d.answer_any(
            "JSON_TABLE",
            Canned::rows(&["order_id", "x"], &[&["1", "2"]]),
        );
        d
    }

    /// The outer rows' join values each statement carried (written in, or as its one
    /// parameter), by node.
    fn carried(d: &FakeDoor) -> Vec<(usize, Vec<String>)> {
        d.log()
            .into_iter()
            .zip(&d.bound)
            .filter(|((_, sql), _)| sql.contains("JSON_TABLE"))
            .map(|((n, sql), bound)| {
                let hex = sql
                    .split("X'")
                    .nth(1)
                    .and_then(|h| h.split('\'').next())
                    .unwrap_or_default();
                let bytes: Vec<u8> = match bound.as_slice() {
                    [Value::Bytes(json)] => json.clone(),
                    _ => (0..hex.len() / 2)
                        .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
                        .collect(),
                };
                let json: Vec<Vec<Option<String>>> =
                    serde_json::from_slice(&bytes).unwrap_or_default();
                (
                    n,
                    json.into_iter()
                        .map(|r| r[2].clone().unwrap_or("NULL".into()))
                        .collect(),
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn each_outer_row_goes_to_the_node_of_its_join_value_and_nowhere_else() {
        let (s, topo) = planned();
        let (a, b) = keys_on_both();
        let (a, b) = (a.to_string(), b.to_string());
        // Two rows of one value, one of the other, a NULL: with the first node's rows.
        let mut d = door(&s, &[&b, &a, "NULL", &b], "int(11)");
        let mut sink = RecordSink::text();
        crate::exec::spread(&mut d, &mut sink, &s, &topo, Access::Read)
            .await
            .expect("runs");
        assert_eq!(
            carried(&d),
            vec![
                (0, vec![a.clone(), "NULL".into()]),
                (1, vec![b.clone(), b.clone()])
            ]
        );
        assert_eq!(sink.rows().len(), 2, "each node's answer");
        // A zero-filled value is its key's: `007` goes where 7 does.
        let (s7, n7) = ("7", node_of(7));
        let mut d = door(&s, &["007", s7], "int(11)");
        let mut sink = RecordSink::text();
        crate::exec::spread(&mut d, &mut sink, &s, &topo, Access::Read)
            .await
            .expect("runs");
        assert_eq!(carried(&d), vec![(n7, vec!["007".into(), "7".into()])]);
        // Only one node has rows: the other is not asked.
        assert!(d.sql_on(1 - n7).iter().all(|q| !q.contains("JSON_TABLE")));
        // No outer row: one node answers (an empty join, or an aggregate's identity).
        let mut d = door(&s, &[], "int(11)");
        let mut sink = RecordSink::text();
        crate::exec::spread(&mut d, &mut sink, &s, &topo, Access::Read)
            .await
            .expect("runs");
        assert_eq!(carried(&d).len(), 1);
    }

    /// A prepared statement's execution: the node prepares the statement and keeps it by its
    /// text, so the rows go as its parameter and the text is the same whatever they are.
    #[tokio::test]
    async fn a_binary_execution_carries_the_rows_as_a_parameter() {
        let (s, topo) = planned();
        let (a, b) = keys_on_both();
        let (a, b) = (a.to_string(), b.to_string());
        let mut texts = Vec::new();
        for keys in [
            vec![b.as_str(), a.as_str()],
            vec![a.as_str(), b.as_str(), &b],
        ] {
            let mut d = door(&s, &keys, "int(11)");
            let mut sink = RecordSink {
                binary: true,
                ..RecordSink::text()
            };
            crate::exec::spread(&mut d, &mut sink, &s, &topo, Access::Read)
                .await
                .expect("runs");
            let mut got = carried(&d);
            got.sort();
            let mut want: Vec<(usize, Vec<String>)> = vec![
                (
                    0,
                    keys.iter()
                        .filter(|k| **k == a)
                        .map(|k| k.to_string())
                        .collect(),
                ),
                (
                    1,
                    keys.iter()
                        .filter(|k| **k == b)
                        .map(|k| k.to_string())
                        .collect(),
                ),
            ];
            want.sort();
            assert_eq!(got, want);
            let joins: Vec<(usize, String)> = d
                .log()
                .into_iter()
                .filter(|(_, q)| q.contains("JSON_TABLE(CONVERT(? USING utf8mb4)"))
                .collect();
            assert_eq!(joins.len(), 2, "{:?}", d.log());
            texts.push(joins);
        }
        assert_eq!(texts[0], texts[1], "the same statements whatever the rows");
    }

    #[tokio::test]
    async fn definitions_read_once_are_kept_and_one_the_rows_contradict_is_dropped() {
        let (s, topo) = planned();
        let shows = |d: &FakeDoor| {
            d.log()
                .iter()
                .filter(|(_, q)| q.starts_with("SHOW CREATE"))
                .count()
        };
        let mut d = door(&s, &["1"], "int(11)");
        let mut sink = RecordSink::text();
        crate::exec::spread(&mut d, &mut sink, &s, &topo, Access::Read)
            .await
            .expect("runs");
        assert_eq!(shows(&d), 2);
        crate::exec::spread(&mut d, &mut sink, &s, &topo, Access::Read)
            .await
            .expect("runs again");
        assert_eq!(shows(&d), 2, "kept: {:?}", d.log());
        assert_eq!(carried(&d).len(), 2);
        // A column changed on the nodes directly since: the rows say BIGINT, the kept
        // definition INT. The gathered plan answers, and the definition is read again.
        d.keep_definition("t_order", Some(&ORDERS.replace("bigint(20)", "int(11)")));
        d.answer_any("SELECT DISTINCT", Canned::rows(&["item"], &[&["1"]]));
        d.answer_any("SELECT `i`.*", Canned::rows(&["user_id", "x"], &[]));
        crate::exec::spread(&mut d, &mut sink, &s, &topo, Access::Read)
            .await
            .expect("runs gathered");
        let spread = |d: &FakeDoor| {
            d.log()
                .iter()
                .filter(|(_, q)| q.contains("JOIN t_item"))
                .count()
        };
        assert_eq!(spread(&d), 2, "not spread: {:?}", d.log());
        assert!(d.log().iter().any(|(_, q)| q.contains("SELECT DISTINCT")));
        assert!(d.kept_definition("t_order").is_none());
        // Known not to travel (a FLOAT): gathered without reading the rows first.
        d.keep_definition(
            "t_order",
            Some(&ORDERS.replace("`item` int(11)", "`item` int(11),\n  `f` float")),
        );
        let before = d.log().len();
        crate::exec::spread(&mut d, &mut sink, &s, &topo, Access::Read)
            .await
            .expect("runs gathered");
        assert!(
            !d.log()[before..]
                .iter()
                .any(|(_, q)| q.contains("SELECT `o`.*")),
            "{:?}",
            d.log()
        );
    }

    #[tokio::test]
    async fn an_inner_key_that_is_not_an_integer_runs_the_gathered_plan() {
        // '0012' = 12 there, and lies on the slot of its own text.
        let (s, topo) = planned();
        let mut d = door(&s, &["12"], "varchar(10)");
        d.answer_any("SELECT DISTINCT", Canned::rows(&["item"], &[&["12"]]));
        d.answer_any("SELECT `i`.*", Canned::rows(&["user_id", "x"], &[]));
        let mut sink = RecordSink::text();
        crate::exec::spread(&mut d, &mut sink, &s, &topo, Access::Read)
            .await
            .expect("runs");
        // The join made on the inner table's nodes names it; the gathered one its copy.
        let log = d.log();
        assert!(
            !log.iter().any(|(_, q)| q.contains("JOIN t_item")),
            "{log:?}"
        );
        assert!(
            log.iter().any(|(_, q)| q.contains("SELECT DISTINCT")),
            "{log:?}"
        );
    }

    #[tokio::test]
    async fn outer_rows_and_values_past_their_plans_limits_are_reported() {
        let (s, topo) = planned();
        let many: Vec<String> = (0..=crate::plan::bind::MAX_VALUES)
            .map(|i| i.to_string())
            .collect();
        let keys: Vec<&str> = many[..=crate::plan::bind::INLINE_ROWS]
            .iter()
            .map(String::as_str)
            .collect();
        let mut d = door(&s, &keys, "int(11)");
        let values: Vec<[&str; 1]> = many.iter().map(|v| [v.as_str()]).collect();
        let values: Vec<&[&str]> = values.iter().map(|v| v.as_slice()).collect();
        d.answer_any("SELECT DISTINCT", Canned::rows(&["item"], &values));
        d.answer_any(
            "SELECT * FROM `t_item`",
            Canned::rows(&["user_id", "x"], &[]),
        );
        d.answer_any("__sp_ship_0", Canned::rows(&["order_id", "x"], &[]));
        let mut sink = RecordSink::text();
        crate::exec::spread(&mut d, &mut sink, &s, &topo, Access::Read)
            .await
            .expect("runs");
        // The rows could not travel, the values could not bind: the table read whole, and
        // both reads reported, so that the next plans do not try them.
        let bind = s.gather.ships[0].bind.as_ref().expect("bound");
        let reported = d.overflowed.lock().unwrap().clone();
        assert_eq!(reported, vec![s.read.clone(), bind.keys.clone()]);
        assert!(d.log().iter().any(|(_, q)| q == "SELECT * FROM `t_item`"));
    }
}
