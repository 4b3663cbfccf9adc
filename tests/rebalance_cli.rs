//! `shardproxy node ...` and `shardproxy rebalance ...`, the built binary run against a
//! proxy's admin interface: a node added with `--rebalance --follow` gets its share of a
//! loaded table's slots and rows, the summary line names the plan done and its average rate,
//! a dry run then finds nothing to move, and the node cannot be removed while it holds
//! slots. Its own test binary (its own cluster): nodes 0-1 are ds0/ds1, node 2 is added as
//! ds2, node 3 holds the metadata schema.

mod common;

use std::collections::HashMap;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::moves::*;
use common::workload::count_on;
use common::*;
use mysql_async::prelude::Queryable;
use shardproxy::config::TableRule;

const META: usize = 3;
const NEW: usize = 2;

/// What a run of the CLI left: its exit status, stdout and stderr.
struct Ran {
    ok: bool,
    out: String,
    err: String,
}

impl Ran {
    fn both(&self) -> String {
        format!("--- stdout ---\n{}\n--- stderr ---\n{}", self.out, self.err)
    }
}

/// Runs the built `shardproxy` with `args` (killed after `limit`), off the runtime.
async fn cli(args: Vec<String>, limit: Duration) -> Ran {
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shardproxy"))
            .args(&args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run shardproxy");
        let read = |mut p: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = p.read_to_string(&mut s);
                s
            })
        };
        let out = read(Box::new(child.stdout.take().expect("stdout")));
        let err = read(Box::new(child.stderr.take().expect("stderr")));
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait for shardproxy") {
                break Some(s);
            }
            if start.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let ran = Ran {
            ok: status.is_some_and(|s| s.success()),
            out: out.join().unwrap_or_default(),
            err: err.join().unwrap_or_default(),
        };
        assert!(
            status.is_some(),
            "shardproxy {args:?} ran over {limit:?}\n{}",
            ran.both()
        );
        ran
    })
    .await
    .expect("the CLI's thread")
}

fn args(a: &[&str], admin: &str) -> Vec<String> {
    a.iter()
        .map(|s| s.to_string())
        .chain(["--admin".to_string(), admin.to_string()])
        .collect()
}

/// The average rate in a summary line (`... average 1234 rows/s`).
fn average_in(text: &str) -> Option<f64> {
    let at = text.find("average ")? + "average ".len();
    let rest = &text[at..];
    let n = rest.split_whitespace().next()?;
    n.trim_start_matches('<').parse().ok()
}

#[tokio::test]
async fn a_node_added_from_the_cli_gets_its_share_followed_to_a_summary() {
    let c = Cluster::shared(4);
    let meta = "rbcli_meta";
    let table = "t_cli";
    let rows = 3_000;
    fresh_schema(c, meta).await;
    let two = [("ds0", 0), ("ds1", 1)];
    let tables = format!(
        "[tables.{table}]\nrule = \"hash_slot\"\ncolumn = \"id\"\nslots = [{{ slots = \"0-511\", node = \"ds0\" }}, \
         {{ slots = \"512-1023\", node = \"ds1\" }}]\n"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let p = watching(&dir, "a", rules_on(c, META, meta, &two, &tables));
    let pool = p.pool();
    // Gone from ds2 too (load drops it on nodes 0-2), so ds2 starts empty.
    load(c, &pool, table, rows).await;
    let admin = format!(
        "mysql://ops:ops@127.0.0.1:{}",
        p.admin_port.expect("an admin listener")
    );

    // A URL the admin statement cannot quote is refused before anything is sent.
    let bad = cli(
        args(
            &["node", "add", "ds9", "mysql://root:it's@127.0.0.1/shop"],
            &admin,
        ),
        Duration::from_secs(30),
    )
    .await;
    assert!(!bad.ok, "{}", bad.both());
    assert!(
        bad.err.contains("single quote or a backslash"),
        "{}",
        bad.both()
    );

    let url = c.url(NEW);
    let added = cli(
        args(
            &["node", "add", "ds2", &url, "--rebalance", "--follow"],
            &admin,
        ),
        Duration::from_secs(300),
    )
    .await;
    assert!(
        added.ok,
        "node add --rebalance --follow failed\n{}",
        added.both()
    );
    let text = added.both();
    eprintln!("shardproxy node add ds2 ... --rebalance --follow:\n{text}");
    assert!(text.contains("queued (ADD NODE ds2)"), "{text}");
    let summary = added
        .out
        .lines()
        .find(|l| l.starts_with("rebalance ") && l.contains(" done: "))
        .unwrap_or_else(|| panic!("no summary line\n{text}"));
    assert!(
        summary.contains("(ADD NODE ds2) done:") && summary.contains(", 0 not done;"),
        "{summary}"
    );
    let rate = average_in(summary).unwrap_or_else(|| panic!("no average rate: {summary}"));
    assert!(rate > 0.0, "{summary}");
    assert!(!summary.contains(" 0 rows copied"), "{summary}");

    // Balanced now: a dry run plans no move.
    let dry = cli(
        args(&["rebalance", "--dry-run"], &admin),
        Duration::from_secs(60),
    )
    .await;
    assert!(dry.ok, "{}", dry.both());
    assert!(dry.out.contains("no move"), "{}", dry.both());
    assert!(!dry.out.contains("MIGRATE SLOTS"), "{}", dry.both());

    // The plan as a table, every move done on ds2.
    let show = cli(
        args(&["rebalance", "show"], &admin),
        Duration::from_secs(60),
    )
    .await;
    assert!(show.ok, "{}", show.both());
    assert!(
        show.out.contains("(ADD NODE ds2): done") && show.out.contains("0 under way, 0 queued"),
        "{}",
        show.both()
    );
    // Following a plan that has ended prints its summary at once.
    let late = cli(
        args(&["rebalance", "follow"], &admin),
        Duration::from_secs(60),
    )
    .await;
    assert!(late.ok, "{}", late.both());
    assert!(late.out.contains("(ADD NODE ds2) done:"), "{}", late.both());

    // ds2 holds slots: it cannot be removed.
    let removed = cli(
        args(&["node", "remove", "ds2"], &admin),
        Duration::from_secs(60),
    )
    .await;
    assert!(
        !removed.ok,
        "REMOVE NODE ds2 was not refused\n{}",
        removed.both()
    );
    assert!(removed.err.contains("DRAIN NODE ds2"), "{}", removed.both());

    // The rows lie where the slot map says, a third of the slots on ds2.
    let start = Instant::now();
    let owner = loop {
        let t = p.shared.topology();
        if let Some(TableRule::HashSlot { map, .. }) = t.table(table) {
            if map.moves().is_empty() && t.node_index("ds2").is_some() {
                let owner: Vec<String> = (0..1024u16)
                    .map(|s| t.node_name(map.owner_of_slot(s)).to_string())
                    .collect();
                if owner.iter().any(|o| o == "ds2") {
                    break owner;
                }
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the proxy never gave ds2 slots"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let on_ds2 = owner.iter().filter(|o| *o == "ds2").count();
    assert!((341..=342).contains(&on_ds2), "ds2 holds {on_ds2} slots");
    let mut held = HashMap::new();
    for (name, i) in [("ds0", 0), ("ds1", 1), ("ds2", NEW)] {
        let direct = c.direct(i);
        let mut conn = direct.get_conn().await.expect("direct");
        let slots: Vec<(u16, i64)> = conn
            .query(format!(
                "SELECT CRC32(id) % 1024, COUNT(*) FROM {table} GROUP BY 1"
            ))
            .await
            .expect("rows per slot");
        drop(conn);
        direct.disconnect().await.ok();
        for (s, n) in slots {
            assert_eq!(
                owner[s as usize], name,
                "{n} rows of slot {s} lie on `{name}`, the slot map gives it to `{}`",
                owner[s as usize]
            );
            *held.entry(name).or_insert(0i64) += n;
        }
    }
    assert_eq!(held.values().sum::<i64>(), rows, "{held:?}");
    let ds2 = count_on(c, NEW, table, "1 = 1").await;
    assert!(ds2 > 0, "no rows on ds2: {held:?}");
    assert_eq!(Some(&ds2), held.get("ds2"));
    pool.disconnect().await.ok();
}
