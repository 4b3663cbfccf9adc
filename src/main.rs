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
    },
    /// Validate a rules file; exits non-zero with the reason when it is invalid.
    Check {
        #[arg(long)]
        config: PathBuf,
    },
    /// Print where a statement would run and the SQL each node would get.
    Route {
        #[arg(long)]
        config: PathBuf,
        /// The statement.
        sql: String,
    },
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
        Command::Check { config } => match config::load(&config)
            .map_err(|e| e.to_string())
            .and_then(|t| {
                // The TLS files are read when the proxy starts: check them now too.
                match &t.tls {
                    Some(tls) => shardproxy::frontend::stream::acceptor(&tls.cert, &tls.key)
                        .map(|_| t)
                        .map_err(|e| format!("{}: {e}", config.display())),
                    None => Ok(t),
                }
            }) {
            Ok(t) => {
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
        Command::Route { config, sql: text } => match config::load(&config) {
            Ok(t) => {
                let parsed = sql::parse(&text);
                let p = plan::plan(&text, parsed.as_ref().map_err(String::as_str), &[], &t);
                // A closed pipe (`| head`) ends the output quietly instead of panicking.
                let _ = write!(std::io::stdout(), "{}", p.describe(&t));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Serve { config } => {
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
                tokio::spawn(server::watch(
                    shared.clone(),
                    config.clone(),
                    std::time::Duration::from_secs(1),
                ));
                if let Ok(mut hup) =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
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
    }
}
