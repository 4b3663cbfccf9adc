//! Whether the nodes hold the tables where the rules place them: a table that exists on
//! some of its rule's nodes and not on others (a DDL that failed half-way, a node restored
//! from an old backup), or a table no rule names that only a node other than the default
//! holds (the proxy reads such a table on the default node), is a fault ops must see.
//! `shardproxy check --nodes` and every `SHOW TABLES` through the proxy report them.

use super::shape::Topology;

/// The faults in where the tables are: `have` is each asked node's tables (names as the
/// node lists them). A table no asked node holds is no fault (the rules may name a table
/// before it is created). One line per fault, in table order.
pub fn misplaced(topo: &Topology, have: &[(usize, Vec<String>)]) -> Vec<String> {
    let asked: Vec<usize> = have.iter().map(|h| h.0).collect();
    let holds = |node: usize, table: &str| {
        have.iter()
            .any(|(n, names)| *n == node && names.iter().any(|x| x.eq_ignore_ascii_case(table)))
    };
    let mut tables: Vec<String> = have
        .iter()
        .flat_map(|h| h.1.iter().map(|n| n.to_ascii_lowercase()))
        .collect();
    tables.sort();
    tables.dedup();
    let names = |nodes: &[usize]| {
        nodes
            .iter()
            .map(|n| topo.node_name(*n))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    for t in tables {
        let on: Vec<usize> = asked.iter().copied().filter(|n| holds(*n, &t)).collect();
        match topo.table(&t) {
            Some(rule) => {
                let placed = rule.all_nodes(topo);
                let lacking: Vec<usize> = placed
                    .iter()
                    .copied()
                    .filter(|n| asked.contains(n) && !on.contains(n))
                    .collect();
                if !lacking.is_empty() {
                    out.push(format!(
                        "table `{t}` is missing on {} (its rule places it on {}; it exists on {})",
                        names(&lacking),
                        names(&placed),
                        names(&on)
                    ));
                }
            }
            None => {
                let default = topo.default_node;
                if asked.contains(&default) && !on.contains(&default) {
                    out.push(format!(
                        "table `{t}` is on {} but not on the default node {}, where the proxy reads a table no rule names",
                        names(&on),
                        topo.node_name(default)
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_topology;

    #[test]
    fn a_table_missing_on_one_of_its_nodes_is_reported() {
        let topo = test_topology(
            1,
            3,
            "[tables.h]\nrule = \"hash_slot\"\ncolumn = \"id\"\n\
             slots = [{ slots = \"0-511\", node = \"ds0\" }, { slots = \"512-1023\", node = \"ds1\" }]\n\
             [tables.s]\nrule = \"single\"\nnode = \"ds2\"\n\
             [tables.b]\nrule = \"broadcast\"\n",
        );
        let have = |lists: [&[&str]; 3]| -> Vec<(usize, Vec<String>)> {
            lists
                .iter()
                .enumerate()
                .map(|(i, l)| (i, l.iter().map(|s| s.to_string()).collect()))
                .collect()
        };
        // Where the rules want them: nothing to say.
        let fine = have([&["h", "b", "plain"], &["h", "b"], &["s", "b"]]);
        assert!(
            misplaced(&topo, &fine).is_empty(),
            "{:?}",
            misplaced(&topo, &fine)
        );
        // A table not created yet anywhere: nothing either.
        let none = have([&[], &[], &[]]);
        assert!(misplaced(&topo, &none).is_empty());
        let bad = have([&["H", "b"], &["b"], &["s", "plain"]]);
        assert_eq!(
            misplaced(&topo, &bad),
            [
                "table `b` is missing on ds2 (its rule places it on ds0, ds1, ds2; it exists on ds0, ds1)",
                "table `h` is missing on ds1 (its rule places it on ds0, ds1; it exists on ds0)",
                "table `plain` is on ds2 but not on the default node ds0, where the proxy reads a table no rule names",
            ]
        );
    }
}
