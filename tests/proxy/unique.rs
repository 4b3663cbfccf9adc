//! A UNIQUE key without the shard key (issue 26's hole): each node enforces it on its own
//! rows only, so the proxy names such a key where it is made, with a warning SHOW WARNINGS
//! shows, and `shardproxy check --nodes` lists the ones the nodes hold.

use std::process::Command;

use super::*;

#[tokio::test]
async fn a_unique_key_without_the_shard_key_is_named_where_it_is_made() {
    let c = cluster();
    let tables = sharded("t_uq") + &sharded("t_uk");
    let proxy = start_proxy(c, &tables);
    let mut p = proxy.conn().await;
    for t in ["t_uq", "t_uk"] {
        p.query_drop(format!("DROP TABLE IF EXISTS {t}"))
            .await
            .expect("drop");
    }
    // A table sharded by user_id with a UNIQUE email: made, with a warning naming the key.
    p.query_drop(
        "CREATE TABLE t_uq (user_id INT PRIMARY KEY, email VARCHAR(64), UNIQUE KEY (email))",
    )
    .await
    .expect("CREATE TABLE with a unique key without the shard key");
    assert_eq!(p.get_warnings(), 1);
    let said = warnings(&mut p).await;
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!((said[0].0.as_str(), said[0].1), ("Warning", 1235));
    assert!(
        said[0]
            .2
            .starts_with("UNIQUE KEY `email` (`email`) of `t_uq` is unique on each node only: it does not contain the shard key `user_id`"),
        "{said:?}"
    );
    let counts: Option<(u64, u64)> = p
        .query_first("SELECT @@warning_count, @@error_count")
        .await
        .expect("the counts");
    assert_eq!(counts, Some((1, 0)));
    // A warning, not an error.
    let errors: Vec<(String, u32, String)> = p.query("SHOW ERRORS").await.expect("SHOW ERRORS");
    assert!(errors.is_empty(), "{errors:?}");
    let n: Option<(u64,)> = p.query_first("SHOW COUNT(*) ERRORS").await.expect("count");
    assert_eq!(n, Some((0,)));
    assert_eq!(
        warnings(&mut p).await.len(),
        1,
        "the warning is still there"
    );
    // What it warns of: two nodes each take the same email.
    let (a, b) = (keys_on_node(&L, 0, 1)[0], keys_on_node(&L, 3, 1)[0]);
    p.query_drop(format!(
        "INSERT INTO t_uq VALUES ({a}, 'same@x'), ({b}, 'same@x')"
    ))
    .await
    .expect("the same email on two nodes");
    let n: Option<i64> = p
        .query_first("SELECT COUNT(*) FROM t_uq WHERE email = 'same@x'")
        .await
        .expect("count");
    assert_eq!(n, Some(2));

    // With the shard key in the key: enforced whole, no warning.
    p.query_drop(
        "CREATE TABLE t_uk (user_id INT, email VARCHAR(64), PRIMARY KEY (user_id), UNIQUE KEY (email, user_id))",
    )
    .await
    .expect("CREATE TABLE");
    assert_eq!(p.get_warnings(), 0);
    assert!(warnings(&mut p).await.is_empty());
    // One added later warns too.
    p.query_drop("ALTER TABLE t_uk ADD UNIQUE KEY ph (email)")
        .await
        .expect("ALTER TABLE");
    assert_eq!(p.get_warnings(), 1);
    let said = warnings(&mut p).await;
    assert!(
        said.len() == 1 && said[0].2.starts_with("UNIQUE KEY `ph` (`email`) of `t_uk`"),
        "{said:?}"
    );
    // The next statement that reads a table clears it, as it clears MariaDB's own.
    p.query_drop("SELECT COUNT(*) FROM t_uk")
        .await
        .expect("select");
    assert!(warnings(&mut p).await.is_empty());

    // `shardproxy check --nodes` lists the keys the nodes hold unique per node only.
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("rules.toml");
    std::fs::write(&file, rules_toml(c, &tables)).expect("write the rules");
    let out = Command::new(env!("CARGO_BIN_EXE_shardproxy"))
        .args(["check", "--nodes", "--config"])
        .arg(&file)
        .output()
        .expect("run shardproxy check");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(
            "unique per node: UNIQUE KEY `email` (`email`) of `t_uq` is unique on each node only"
        ),
        "{said}"
    );
    assert!(
        said.contains("unique per node: UNIQUE KEY `ph` (`email`) of `t_uk`"),
        "{said}"
    );
    assert!(
        !said.contains("`email_2`") && !said.contains("PRIMARY KEY (`user_id`) of"),
        "{said}"
    );
    assert!(
        !said.contains("UNIQUE KEY `email` (`email`, `user_id`)"),
        "{said}"
    );
    for t in ["t_uq", "t_uk"] {
        p.query_drop(format!("DROP TABLE {t}")).await.expect("drop");
    }
}

async fn warnings(p: &mut Conn) -> Vec<(String, u32, String)> {
    p.query("SHOW WARNINGS").await.expect("SHOW WARNINGS")
}
