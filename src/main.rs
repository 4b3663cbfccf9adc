use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use shardproxy::{config, plan, server, sql};

/// A sharding proxy that speaks the MySQL wire protocol.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve clients with the rules in FILE.
    Serve {
        #[arg(long)]
        config: PathBuf,
        /// Run the proxy's clock from this day (YYYY-MM-DD, UTC midnight): relative tier
        /// bounds and generated ids follow it. Only in a build with the `test-hooks` feature:
        /// a proxy serving with a clock in the past would generate snowflake ids that were
        /// given out already.
        #[cfg(feature = "test-hooks")]
        #[arg(long, value_parser = parse_day)]
        now: Option<chrono::NaiveDate>,
    },
    /// Validate a rules file; exits non-zero with the reason when it is invalid.
    Check {
        #[arg(long)]
        config: PathBuf,
        /// Also connect to every node and report tables missing on some of their rule's
        /// nodes (or, named by no rule, missing on the default node); non-zero when any is.
        /// Lists too the unique keys each node enforces on its own rows only (without the
        /// shard key), which do not fail the check.
        #[arg(long)]
        nodes: bool,
    },
    /// Move slots between nodes through a proxy's admin interface, and follow the move.
    Migrate {
        /// The admin interface (`[admin]` of a proxy with a `[metadata]` schema).
        #[arg(long, default_value = "mysql://ops:ops@127.0.0.1:3308")]
        admin: String,
        #[command(subcommand)]
        what: MigrateCommand,
    },
    /// Rebalance the slots of hash_slot tables by the nodes' weights (REBALANCE) through a
    /// proxy's admin interface; or show, pause, resume, abort or follow the plan.
    Rebalance {
        /// The admin interface (`[admin]` of a proxy with a `[metadata]` schema).
        #[arg(long, global = true, default_value = ADMIN)]
        admin: String,
        /// Only the tables sharded like this one (default: all).
        #[arg(long)]
        table: Option<String>,
        /// Print the moves, queue nothing.
        #[arg(long, conflicts_with = "follow")]
        dry_run: bool,
        /// Rows per second each move may copy or delete (default: as fast as it can).
        #[arg(long)]
        rate: Option<u64>,
        /// Follow the plan with progress bars until it ends.
        #[arg(long)]
        follow: bool,
        #[command(subcommand)]
        what: Option<RebalanceCommand>,
    },
    /// Add, drain or remove a node through a proxy's admin interface.
    Node {
        /// The admin interface (`[admin]` of a proxy with a `[metadata]` schema).
        #[arg(long, global = true, default_value = ADMIN)]
        admin: String,
        #[command(subcommand)]
        what: NodeCommand,
    },
    /// A live view of a proxy's load: nodes, hot slots, hot keys and the balance it
    /// suggests, from its admin interface, redrawn every second.
    Top {
        /// The admin interface (`[admin]` of the proxy).
        #[arg(long, default_value = ADMIN)]
        admin: String,
        /// Seconds between redraws.
        #[arg(long, default_value_t = 1)]
        interval: u64,
        /// Print one screen and exit.
        #[arg(long)]
        once: bool,
    },
    /// Print where a statement would run and the SQL each node would get.
    Route {
        #[arg(long)]
        config: PathBuf,
        /// Plan as on this day (YYYY-MM-DD), for relative time_tier bounds.
        #[arg(long, value_parser = parse_day)]
        now: Option<chrono::NaiveDate>,
        /// The statement.
        sql: String,
    },
}

#[derive(Subcommand)]
enum MigrateCommand {
    /// Start moving slots A-B of a hash_slot table to a node, and follow it with progress
    /// bars until it is done (or verified, when it waits for its cutover).
    Slots {
        /// The slot range, `A-B` (or one slot).
        range: String,
        #[arg(long)]
        table: String,
        #[arg(long)]
        to: String,
        /// Rows per second the backfill and the cleanup may copy or delete (default: as
        /// fast as they can).
        #[arg(long)]
        rate: Option<u64>,
        /// Cut over as soon as the verify is clean (else: `shardproxy migrate cutover`).
        #[arg(long)]
        auto: bool,
        /// Start it and return at once.
        #[arg(long)]
        no_follow: bool,
    },
    /// Start moving a directory table's key (a tenant) to a node, and follow it.
    Key {
        /// The key's value, as the directory's column holds it.
        key: String,
        #[arg(long)]
        table: String,
        #[arg(long)]
        to: String,
        #[arg(long)]
        rate: Option<u64>,
        #[arg(long)]
        auto: bool,
        #[arg(long)]
        no_follow: bool,
    },
    /// List the migrations (SHOW MIGRATIONS).
    Show,
    /// Follow a migration until it ends.
    Follow { id: u64 },
    /// Cut a verified migration over (without an id: the one that is ready).
    Cutover { id: Option<u64> },
    /// Abort a migration before its cutover: its slots stay on their source.
    Abort { id: Option<u64> },
}

#[derive(Subcommand)]
enum RebalanceCommand {
    /// The newest plan, one row per move (SHOW REBALANCE).
    Show,
    /// Start no more moves; those under way finish (PAUSE REBALANCE).
    Pause,
    /// Go on with a paused plan (RESUME REBALANCE).
    Resume,
    /// Abort the plan: moves under way go back unless past their cutover, the rest are
    /// dropped (ABORT REBALANCE).
    Abort,
    /// Follow the newest plan with progress bars until it ends.
    Follow,
}

#[derive(Subcommand)]
enum NodeCommand {
    /// Add a node (ADD NODE NAME 'URL' [WEIGHT w] [REBALANCE]).
    Add {
        name: String,
        /// The node's `mysql://user:password@host:port/db` (no single quote or backslash:
        /// percent-encode them).
        url: String,
        /// Its weight: its share of the slots (default 1).
        #[arg(long)]
        weight: Option<u32>,
        /// Queue the moves that give it its share.
        #[arg(long)]
        rebalance: bool,
        /// Follow those moves with progress bars until they end.
        #[arg(long, requires = "rebalance")]
        follow: bool,
    },
    /// Move every slot and directory key off a node (DRAIN NODE NAME [DRY RUN] [RATE r]).
    Drain {
        name: String,
        /// Print the moves, queue nothing.
        #[arg(long, conflicts_with = "follow")]
        dry_run: bool,
        /// Rows per second each move may copy or delete.
        #[arg(long)]
        rate: Option<u64>,
        /// Follow the plan with progress bars until it ends.
        #[arg(long)]
        follow: bool,
    },
    /// Remove a node that holds nothing any more (REMOVE NODE NAME).
    Remove { name: String },
}

/// The admin interface asked when `--admin` is not given.
const ADMIN: &str = "mysql://ops:ops@127.0.0.1:3308";

fn parse_day(s: &str) -> Result<chrono::NaiveDate, String> {
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .map_err(|e| format!("`{s}` is not YYYY-MM-DD: {e}"))
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Check { config, nodes } => match config::load(&config)
            .map_err(|e| e.to_string())
            .and_then(|t| {
                // The TLS files are read when the proxy starts: check them now too.
                match &t.tls {
                    Some(tls) => shardproxy::protocol::stream::acceptor(&tls.cert, &tls.key)
                        .map(|_| t)
                        .map_err(|e| format!("{}: {e}", config.display())),
                    None => Ok(t),
                }
            }) {
            Ok(t) => {
                let mut names: Vec<&String> = t.tables.keys().collect();
                names.sort();
                for n in names {
                    if let Some(r) = t.tables.get(n) {
                        println!("  {n}: {}", r.describe(&t));
                    }
                }
                if nodes {
                    let faults = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(rt) => rt.block_on(tables_on_nodes(&t)),
                        Err(e) => Err(format!("cannot start the runtime: {e}")),
                    };
                    if let Ok((_, per_node)) = &faults {
                        for line in per_node {
                            println!("  unique per node: {line}");
                        }
                    }
                    match faults.map(|(f, _)| f) {
                        Ok(f) if f.is_empty() => {
                            println!("  every node holds the tables its rules place there")
                        }
                        Ok(f) => {
                            for line in &f {
                                println!("  fault: {line}");
                            }
                            eprintln!("error: {} table placement fault(s)", f.len());
                            return ExitCode::FAILURE;
                        }
                        Err(e) => {
                            eprintln!("error: {e}");
                            return ExitCode::FAILURE;
                        }
                    }
                }
                println!(
                    "{}: ok (version {}, {} nodes, {} tables)",
                    config.display(),
                    t.version,
                    t.nodes.len(),
                    t.tables.len()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Migrate { admin, what } => {
            use shardproxy::migrate::cli::{self, Ask, Moved};
            let ask = match what {
                MigrateCommand::Slots {
                    range,
                    table,
                    to,
                    rate,
                    auto,
                    no_follow,
                } => Ask::Start {
                    what: Moved::Slots(range),
                    table,
                    to,
                    rate,
                    auto,
                    follow: !no_follow,
                },
                MigrateCommand::Key {
                    key,
                    table,
                    to,
                    rate,
                    auto,
                    no_follow,
                } => Ask::Start {
                    what: Moved::Key(key),
                    table,
                    to,
                    rate,
                    auto,
                    follow: !no_follow,
                },
                MigrateCommand::Show => Ask::Show,
                MigrateCommand::Follow { id } => Ask::Follow(id),
                MigrateCommand::Cutover { id } => Ask::Cutover(id),
                MigrateCommand::Abort { id } => Ask::Abort(id),
            };
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("error: cannot start the runtime: {e}");
                    return ExitCode::FAILURE;
                }
            };
            match rt.block_on(cli::run(&admin, ask)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Rebalance {
            admin,
            table,
            dry_run,
            rate,
            follow,
            what,
        } => {
            use shardproxy::migrate::plan_cli::{Ask, Run};
            if what.is_some() && (table.is_some() || dry_run || rate.is_some() || follow) {
                eprintln!(
                    "error: --table, --dry-run, --rate and --follow go with `shardproxy rebalance` alone, not with its subcommands"
                );
                return ExitCode::from(2);
            }
            let ask = match what {
                None => Ask::Rebalance {
                    table,
                    how: Run {
                        dry_run,
                        rate,
                        follow,
                    },
                },
                Some(RebalanceCommand::Show) => Ask::Show,
                Some(RebalanceCommand::Pause) => Ask::Pause,
                Some(RebalanceCommand::Resume) => Ask::Resume,
                Some(RebalanceCommand::Abort) => Ask::Abort,
                Some(RebalanceCommand::Follow) => Ask::Follow,
            };
            plan_cli(&admin, ask)
        }
        Command::Top {
            admin,
            interval,
            once,
        } => {
            let every = std::time::Duration::from_secs(interval.max(1));
            client(shardproxy::admin::top::run(&admin, every, once))
        }
        Command::Node { admin, what } => {
            use shardproxy::migrate::plan_cli::{Ask, Run};
            let ask = match what {
                NodeCommand::Add {
                    name,
                    url,
                    weight,
                    rebalance,
                    follow,
                } => Ask::AddNode {
                    name,
                    url,
                    weight,
                    rebalance,
                    follow,
                },
                NodeCommand::Drain {
                    name,
                    dry_run,
                    rate,
                    follow,
                } => Ask::Drain {
                    name,
                    how: Run {
                        dry_run,
                        rate,
                        follow,
                    },
                },
                NodeCommand::Remove { name } => Ask::Remove { name },
            };
            plan_cli(&admin, ask)
        }
        Command::Route {
            config,
            now,
            sql: text,
        } => match config::load(&config) {
            Ok(t) => {
                let parsed = sql::parse(&text);
                let today = now.unwrap_or_else(|| chrono::Utc::now().date_naive());
                let p = plan::with_offline_ctx(&t, today, |ctx| {
                    plan::plan(&text, parsed.as_ref().map_err(String::as_str), &[], &t, ctx)
                });
                let mut shown =
                    format!("{}{}", p.describe(&t), plan::cache::describe(&text, &p, &t));
                let parsed = parsed.as_ref().map_err(String::as_str);
                if let Some(line) = plan::replica::describe(&text, parsed, &p, &t) {
                    shown.push('\n');
                    shown.push_str(&line);
                }
                // A closed pipe (`| head`) ends the output quietly instead of panicking.
                let _ = writeln!(std::io::stdout(), "{shown}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        #[cfg(feature = "test-hooks")]
        Command::Serve { config, now } => serve(config, now),
        #[cfg(not(feature = "test-hooks"))]
        Command::Serve { config } => serve(config, None),
    }
}

/// `rebalance ...` and `node ...`: `ask` sent to the admin interface at `admin`.
fn plan_cli(admin: &str, ask: shardproxy::migrate::plan_cli::Ask) -> ExitCode {
    client(shardproxy::migrate::plan_cli::run(admin, ask))
}

/// A client of the admin interface run to its end on a runtime of its own: its error on
/// stderr, and the exit code.
fn client(work: impl std::future::Future<Output = Result<(), String>>) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(work) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `serve`: the proxy on the rules in `config` until interrupted; `now` starts its clock at
/// that day (test builds only).
fn serve(config: PathBuf, now: Option<chrono::NaiveDate>) -> ExitCode {
    let topo = match config::load(&config) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async move {
        let srv = server::Server::bind(topo)
            .await?
            .with_rules_file(config.clone());
        // Rules changes are picked up while traffic flows: when the file changes, and
        // at once on SIGHUP.
        let shared = srv.shared();
        if let Some(day) = now {
            let ms = day
                .and_hms_opt(0, 0, 0)
                .map(|t| t.and_utc().timestamp_millis())
                .unwrap_or(0);
            shared.clock.set_now_ms(ms);
            tracing::info!("the proxy's clock starts at {day}");
        }
        tokio::spawn(server::watch(
            shared.clone(),
            config.clone(),
            std::time::Duration::from_secs(1),
        ));
        if let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        {
            let path = config.clone();
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    shared.reload_file(&path);
                }
            });
        }
        tokio::select! {
            r = srv.serve() => r,
            _ = tokio::signal::ctrl_c() => {
                tracing::info!("interrupted, shutting down");
                Ok(())
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Every node's tables, asked over its URL, and the faults in where they are
/// (`config::misplaced`). A node that cannot be asked fails the check.
/// The faults in where the nodes hold the tables, and the unique keys the nodes enforce each
/// on its own rows only (`config::unique`).
async fn tables_on_nodes(t: &config::Topology) -> Result<(Vec<String>, Vec<String>), String> {
    use mysql_async::prelude::Queryable;
    let mut have = Vec::new();
    let mut unique: Vec<config::unique::UniqueKey> = Vec::new();
    for node in t.all_nodes() {
        let n = &t.nodes[node];
        let mut conn = mysql_async::Conn::new(n.opts.clone())
            .await
            .map_err(|e| format!("{}: {e}", n.name))?;
        let rows: Vec<(String, String)> = conn
            .query("SHOW FULL TABLES")
            .await
            .map_err(|e| format!("{}: {e}", n.name))?;
        let parts: Vec<(String, String, Option<String>)> = conn
            .query(
                "SELECT TABLE_NAME, INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS \
                 WHERE TABLE_SCHEMA = DATABASE() AND NON_UNIQUE = 0 \
                 ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX",
            )
            .await
            .map_err(|e| format!("{}: {e}", n.name))?;
        let _ = conn.disconnect().await;
        for (table, name, column) in parts {
            let column = column.unwrap_or_default();
            match unique.last_mut() {
                Some(k) if k.table == table && k.name == name => k.columns.push(column),
                _ => unique.push(config::unique::UniqueKey {
                    table,
                    name,
                    columns: vec![column],
                }),
            }
        }
        let names = rows
            .into_iter()
            .map(|r| r.0)
            .filter(|x| !shardproxy::exec::proxy_table(x))
            .collect();
        have.push((node, names));
    }
    Ok((
        config::misplaced(t, &have),
        config::unique::per_node_only_keys(t, &unique),
    ))
}
