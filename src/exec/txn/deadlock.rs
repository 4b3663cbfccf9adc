//! Deadlocks across nodes: transaction A waits for a row lock B holds on one node while B
//! waits for one A holds on another. Each node sees only a lock wait, never the cycle, so
//! without the proxy both would wait for `innodb_lock_wait_timeout` (50 s by default).
//!
//! Sessions in a transaction with branches on several nodes register their branch
//! connections (node, connection id) here. While any are registered, this task asks those
//! nodes about once a second which transactions wait for which
//! (`information_schema.INNODB_LOCK_WAITS`, needs the PROCESS privilege), builds the
//! wait-for graph between the proxy's transactions, and breaks each cycle by killing the
//! waiting statement of its youngest member (`KILL QUERY`). That session gets 1213, as from
//! a node's own deadlock detection, and its transaction is rolled back on every node.
//!
//! InnoDB fills its `information_schema` transaction tables again only when they were last
//! read over 100 ms ago: a monitor that polls them faster than that on a node keeps them
//! stale there, and a cycle through that node then waits for the lock wait timeout.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use mysql_common::value::Value;
use tracing::{info, warn};

use super::cluster::Cluster;

/// How often waits are looked at while multi-node transactions exist.
pub const INTERVAL: Duration = Duration::from_millis(500);

/// In how many looks running a possible cycle through another proxy must be seen before it
/// is broken ([`foreign_suspects`]).
const SUSPECT_LOOKS: u32 = 4;

/// A wait on one node: `waiter` (a connection id) waits for a lock `holder` holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Wait {
    pub node: usize,
    pub waiter: u32,
    pub holder: u32,
    /// The waiting statement's query id on that node (0: not known): the one statement a
    /// kill must reach. A kill by connection that lands once the statement is over
    /// interrupts the connection's next one, which may be the proxy's retry of it, or
    /// another transaction's (the client got 1317).
    pub query: u64,
}

/// Each branch connection's session: (node, connection id) -> session.
fn owners(branches: &HashMap<u32, Vec<(usize, u32)>>) -> HashMap<(usize, u32), u32> {
    branches
        .iter()
        .flat_map(|(s, conns)| conns.iter().map(move |c| (*c, *s)))
        .collect()
}

/// The cycles of the wait-for graph between sessions, each broken once: the victim is the
/// youngest session of the cycle (the highest id), and the wait to kill is its own.
pub fn victims(branches: &HashMap<u32, Vec<(usize, u32)>>, waits: &[Wait]) -> Vec<Wait> {
    let owner = owners(branches);
    // Session -> (session it waits for, the wait).
    let mut edges: HashMap<u32, Vec<(u32, Wait)>> = HashMap::new();
    for w in waits {
        let (Some(a), Some(b)) = (
            owner.get(&(w.node, w.waiter)),
            owner.get(&(w.node, w.holder)),
        ) else {
            continue;
        };
        if a != b {
            edges.entry(*a).or_default().push((*b, *w));
        }
    }
    let mut out = Vec::new();
    let mut broken: HashSet<u32> = HashSet::new();
    let mut starts: Vec<u32> = edges.keys().copied().collect();
    starts.sort_unstable();
    for start in starts {
        if broken.contains(&start) {
            continue;
        }
        let mut seen = HashSet::from([start]);
        let mut path = Vec::new();
        if let Some(cycle) = cycle_back(start, start, &edges, &broken, &mut seen, &mut path) {
            if let Some((victim, wait)) = cycle.iter().max_by_key(|(s, _)| *s) {
                broken.insert(*victim);
                out.push(*wait);
            }
        }
    }
    out
}

/// The waits of retryable sessions that may close a cycle through another proxy's
/// transaction, which this proxy cannot see whole: the session waits on one node for a
/// connection it does not know, while on another node a connection it does not know waits
/// for one of the session's branches. Such a session's transaction, rolled back and run
/// again, costs its client only time; a false alarm (two unrelated waits) costs the same.
pub fn foreign_suspects(
    branches: &HashMap<u32, Vec<(usize, u32)>>,
    retryable: &HashSet<u32>,
    waits: &[Wait],
) -> Vec<Wait> {
    let owner = owners(branches);
    let known = |node: usize, conn: u32| owner.contains_key(&(node, conn));
    let mut out = Vec::new();
    for w in waits {
        let Some(s) = owner.get(&(w.node, w.waiter)) else {
            continue;
        };
        if !retryable.contains(s) || known(w.node, w.holder) {
            continue;
        }
        let waited_on = waits.iter().any(|o| {
            o.node != w.node
                && !known(o.node, o.waiter)
                && owner.get(&(o.node, o.holder)) == Some(s)
        });
        if waited_on {
            out.push(*w);
        }
    }
    out
}

/// A path of waits from `at` back to `start` (each session with the wait it is in), if any.
fn cycle_back(
    start: u32,
    at: u32,
    edges: &HashMap<u32, Vec<(u32, Wait)>>,
    broken: &HashSet<u32>,
    seen: &mut HashSet<u32>,
    path: &mut Vec<(u32, Wait)>,
) -> Option<Vec<(u32, Wait)>> {
    for (next, wait) in edges.get(&at).into_iter().flatten() {
        if broken.contains(next) {
            continue;
        }
        path.push((at, *wait));
        if *next == start {
            return Some(path.clone());
        }
        if seen.insert(*next) {
            if let Some(c) = cycle_back(start, *next, edges, broken, seen, path) {
                return Some(c);
            }
        }
        path.pop();
    }
    None
}

fn id<T: std::str::FromStr>(v: &Option<Value>) -> Option<T> {
    crate::value::integer(v.as_ref()?)
}

const WAITS: &str = "SELECT r.trx_mysql_thread_id, b.trx_mysql_thread_id, p.QUERY_ID \
     FROM information_schema.INNODB_LOCK_WAITS w \
     JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id \
     JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id \
     LEFT JOIN information_schema.PROCESSLIST p ON p.ID = r.trx_mysql_thread_id";

/// MariaDB's ER_NO_SUCH_QUERY: the statement a kill by query id named is over.
const ER_NO_SUCH_QUERY: &str = "1957";

/// Runs the detector until the process ends.
pub async fn run(shared: Arc<dyn Cluster>) {
    let mut refused: HashSet<usize> = HashSet::new();
    // Possible cycles through another proxy, by how many looks running each was seen in.
    let mut suspects: HashMap<Wait, u32> = HashMap::new();
    loop {
        tokio::time::sleep(INTERVAL).await;
        let branches = shared.deadlocks().snapshot();
        let retryable = shared.deadlocks().retryable();
        // A cycle across nodes needs two transactions, one of them on several nodes (the
        // other may be another proxy's, seen only for a retryable session).
        if !branches.values().any(|b| b.len() > 1) || (branches.len() < 2 && retryable.is_empty()) {
            suspects.clear();
            continue;
        }
        let nodes: HashSet<usize> = branches.values().flatten().map(|(n, _)| *n).collect();
        let mut waits = Vec::new();
        for node in nodes {
            let rows = async {
                let mut c = shared
                    .backends()
                    .connect(node)
                    .await
                    .map_err(|e| e.message)?;
                c.query_rows(WAITS).await.map_err(|e| e.to_string())
            }
            .await;
            match rows {
                Ok(rows) => {
                    refused.remove(&node);
                    waits.extend(rows.iter().filter_map(|r| {
                        Some(Wait {
                            node,
                            waiter: id(r.first()?)?,
                            holder: id(r.get(1)?)?,
                            query: r.get(2).and_then(id).unwrap_or(0),
                        })
                    }));
                }
                Err(e) => {
                    if refused.insert(node) {
                        warn!(node = %shared.backends().name(node), "cannot see lock waits, so deadlocks across nodes there end only by lock wait timeout (the node account needs PROCESS): {e}");
                    }
                }
            }
        }
        let mut broken = victims(&branches, &waits);
        // A possible cycle through another proxy is broken once seen in SUSPECT_LOOKS looks
        // running (about 2 s): shorter waits are more likely two unrelated ones (a false
        // alarm costs the statement a retry, and six end it with 1213), and a true cycle
        // would otherwise wait `node_timeout_secs`.
        let seen = foreign_suspects(&branches, &retryable, &waits);
        suspects = seen
            .into_iter()
            .map(|w| (w, suspects.get(&w).copied().unwrap_or(0) + 1))
            .collect();
        for (w, looks) in &suspects {
            if *looks >= SUSPECT_LOOKS
                && !broken
                    .iter()
                    .any(|b| b.node == w.node && b.waiter == w.waiter)
            {
                broken.push(*w);
            }
        }
        for w in broken {
            shared
                .deadlocks()
                .victims
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert((w.node, w.waiter));
            let killed = async {
                let mut c = shared
                    .backends()
                    .connect(w.node)
                    .await
                    .map_err(|e| e.message)?;
                let kill = match w.query {
                    0 => format!("KILL QUERY {}", w.waiter),
                    q => format!("KILL QUERY ID {q}"),
                };
                c.query_drop(&kill).await.map_err(|e| e.to_string())
            }
            .await;
            match killed {
                Ok(()) => {
                    shared.metrics().deadlocks.inc();
                    info!(node = %shared.backends().name(w.node), conn = w.waiter,
                        "broke a deadlock across nodes: the waiting statement of the youngest transaction was killed");
                }
                Err(e) => {
                    shared.deadlocks().take_victim(w.node, w.waiter);
                    // Over meanwhile (a node's own detection, a lock timeout): no cycle left.
                    if !e.contains(ER_NO_SUCH_QUERY) {
                        warn!("could not break a deadlock across nodes: {e}");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(node: usize, waiter: u32, holder: u32) -> Wait {
        Wait {
            node,
            waiter,
            holder,
            query: 0,
        }
    }

    #[test]
    fn a_cycle_across_two_nodes_loses_its_youngest_member() {
        // Session 1: conns 10 (node 0), 11 (node 1); session 2: 20 (node 0), 21 (node 1).
        let b = HashMap::from([(1, vec![(0, 10), (1, 11)]), (2, vec![(0, 20), (1, 21)])]);
        // 1 waits for 2 on node 1; 2 waits for 1 on node 0.
        let waits = [w(1, 11, 21), w(0, 20, 10)];
        assert_eq!(victims(&b, &waits), vec![w(0, 20, 10)]);
        // One wait alone is no deadlock.
        assert!(victims(&b, &waits[..1]).is_empty());
        // Waits on connections the proxy does not know are left to the node.
        assert!(victims(&b, &[w(1, 11, 99), w(0, 99, 10)]).is_empty());
    }

    #[test]
    fn a_retryable_session_between_two_unknown_connections_is_a_suspect() {
        // Session 1 (retryable): 10 on node 0, 11 on node 1. Another proxy's transaction:
        // 98 on node 0, 99 on node 1.
        let b = HashMap::from([(1, vec![(0, 10), (1, 11)])]);
        let r = HashSet::from([1]);
        // 1 waits for 99 on node 1; 98 waits for 1 on node 0.
        let waits = [w(1, 11, 99), w(0, 98, 10)];
        assert_eq!(foreign_suspects(&b, &r, &waits), vec![w(1, 11, 99)]);
        // Not retryable (a client's own transaction): left to the lock wait timeout.
        assert!(foreign_suspects(&b, &HashSet::new(), &waits).is_empty());
        // Only waiting, or only waited on: no cycle.
        assert!(foreign_suspects(&b, &r, &waits[..1]).is_empty());
        assert!(foreign_suspects(&b, &r, &waits[1..]).is_empty());
        // Waited on only on the node where it waits: one node sees that cycle itself.
        assert!(foreign_suspects(&b, &r, &[w(1, 11, 99), w(1, 98, 11)]).is_empty());
    }

    #[test]
    fn a_three_way_cycle_is_broken_once() {
        let b = HashMap::from([
            (1, vec![(0, 10), (1, 11)]),
            (2, vec![(1, 21), (2, 22)]),
            (3, vec![(2, 32), (0, 30)]),
        ]);
        // 1 -> 2 (node 1), 2 -> 3 (node 2), 3 -> 1 (node 0).
        let waits = [w(1, 11, 21), w(2, 22, 32), w(0, 30, 10)];
        assert_eq!(victims(&b, &waits), vec![w(0, 30, 10)]);
    }
}
