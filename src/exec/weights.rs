//! A collation's weights read from a node through the door (`crate::routing::weights`): the
//! weight of every BMP character in one statement, then the check that the collation weighs
//! strings as their characters one after another.

use mysql_common::value::Value;

use super::collect::Collect;
use super::door::{Access, Door};
use crate::config::Topology;
use crate::error::MyError;
use crate::plan::{Plan, Target};
use crate::routing::weights::{charset_of, check_sql, from_answers, probe_sql, Weights};

fn bytes(v: Option<&Option<Value>>) -> Vec<u8> {
    match v {
        Some(Some(Value::Bytes(b))) => b.clone(),
        _ => Vec::new(),
    }
}

/// The weights of `collation`, read on `node`.
pub async fn read<D: Door>(
    door: &mut D,
    topo: &Topology,
    node: usize,
    collation: &str,
) -> Result<Weights, MyError> {
    let charset = charset_of(collation);
    let mut rows = Collect::new(0x1_0000);
    let probe = Plan::Route(Target {
        node,
        sql: probe_sql(charset, collation),
        params: Vec::new(),
    });
    super::run(&probe, topo, Access::Read, door, &mut rows).await?;
    let probed: Vec<(u32, Vec<u8>)> = rows
        .rows
        .iter()
        .filter_map(|r| {
            let cp = String::from_utf8(bytes(r.first())).ok()?.parse().ok()?;
            Some((cp, bytes(r.get(1))))
        })
        .collect();
    let mut check = Collect::new(1);
    let sql = Plan::Route(Target {
        node,
        sql: check_sql(charset, collation),
        params: Vec::new(),
    });
    super::run(&sql, topo, Access::Read, door, &mut check).await?;
    let checked: Vec<Vec<u8>> = check
        .rows
        .first()
        .map(|r| r.iter().map(|v| bytes(Some(v))).collect())
        .unwrap_or_default();
    from_answers(collation, probed, checked).map_err(|e| {
        MyError::unsupported(format!("shardproxy: a global index by {collation}: {e}"))
    })
}
