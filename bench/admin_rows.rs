//! What the bench clients share: an admin statement's rows as maps of column to text, and
//! the nodes' load spread from `SHOW LOAD`.

use std::collections::HashMap;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

/// The rows `sql` answers on the admin interface (none if it fails), each column by name.
pub async fn answer(c: &mut Conn, sql: &str) -> Vec<HashMap<String, String>> {
    let got: Vec<Row> = c.query(sql).await.unwrap_or_default();
    got.into_iter()
        .map(|r| {
            let names: Vec<String> = r
                .columns_ref()
                .iter()
                .map(|c| c.name_str().into_owned())
                .collect();
            names
                .into_iter()
                .enumerate()
                .map(|(i, n)| {
                    (
                        n,
                        r.get_opt::<Option<String>, _>(i)
                            .and_then(Result::ok)
                            .flatten()
                            .unwrap_or_default(),
                    )
                })
                .collect()
        })
        .collect()
}

/// The busiest node's node time over the mean's, from `SHOW LOAD` (0 with no load).
pub async fn max_mean(c: &mut Conn) -> f64 {
    let ms: Vec<f64> = answer(c, "SHOW LOAD")
        .await
        .iter()
        .filter_map(|r| r.get("node_ms_per_s")?.parse().ok())
        .collect();
    let mean = ms.iter().sum::<f64>() / ms.len().max(1) as f64;
    let max = ms.iter().cloned().fold(0.0, f64::max);
    if mean > 0.0 {
        max / mean
    } else {
        0.0
    }
}
