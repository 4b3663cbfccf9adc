//! What the bench clients share: an admin statement's rows as maps of column to text.

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
