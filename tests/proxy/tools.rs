//! The demo's tables as an ORM and a migration tool see them through the proxy (issue 29):
//! the demo's own rules (`rules/demo.toml`: hash, range, directory, time-tier, broadcast,
//! single and default-node tables over four nodes) and its data (`demo/*.sql`) loaded through
//! the proxy, then `tests/clients/alembic_check.py`: SQLAlchemy's `get_table_names()` lists
//! exactly the demo's tables, each table reflects, and Alembic's autogenerate against a
//! model of them finds nothing to change.

use std::path::PathBuf;
use std::process::Command;

use super::*;

const DB: &str = "toolsdb";

/// `rules/demo.toml` on this test's nodes and database: its [admin], [metrics] and
/// [metadata] sections left out, the proxy on a free port.
fn demo_rules(c: &Cluster) -> String {
    let text = std::fs::read_to_string(repo().join("rules/demo.toml")).expect("rules/demo.toml");
    let mut out = String::new();
    let mut skipping = false;
    for line in text.lines() {
        if line.starts_with('[') {
            skipping = ["[admin]", "[metrics]", "[metadata]"].contains(&line.trim());
        }
        if skipping || line.trim_start().starts_with('#') {
            continue;
        }
        let mut line = line.replace("127.0.0.1:3307", "127.0.0.1:0");
        for i in 0..NODES {
            line = line.replace(
                &format!("mysql://root:root@127.0.0.1:{}/shop", 3311 + i),
                &c.root_url(i, DB),
            );
        }
        out.push_str(&line);
        out.push('\n');
    }
    assert!(
        !out.contains(":331"),
        "rules/demo.toml names a node this test did not replace"
    );
    out
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn load(port: u16, file: &str) {
    let sql = std::fs::read(repo().join(file)).expect("a demo file");
    mariadb_feed(port, DB, &sql, &format!("loading {file} through the proxy"));
}

#[tokio::test]
async fn alembic_autogenerate_finds_the_demo_tables_as_the_model_has_them() {
    let c = cluster();
    emptied(c, &[DB]).await;
    let proxy = start_proxy_with_rules(demo_rules(c));
    load(proxy.port, "demo/shop.sql");
    load(proxy.port, "demo/tiers.sql");
    let venv = repo().join("tests/clients/.venv/bin/python");
    assert!(
        venv.exists(),
        "tests/clients/install.sh installs the Python packages this test runs"
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new(venv)
            .arg(repo().join("tests/clients/alembic_check.py"))
            .args(["--port", &proxy.port.to_string(), "--database", DB])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .expect("run alembic_check.py")
    })
    .await
    .expect("the check's task");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("compare_metadata") || said.contains("autogenerate"),
        "alembic_check.py said: {said}"
    );
    assert!(
        out.status.success(),
        "alembic_check.py through the proxy:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    dropped(c, &[DB]).await;
}
