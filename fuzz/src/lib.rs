//! The bodies of shardproxy's fuzz targets, one function per target, so that the libFuzzer
//! binaries (`fuzz_targets/*.rs`) and the replay test (`tests/replay.rs`, plain `cargo test`)
//! run the same code on an input.
//!
//! Each function feeds its bytes to the proxy's own functions, where untrusted bytes enter:
//!
//! - [`packet`]: a client's byte stream after a fixed login, through a whole client session
//!   (`frontend::session::Session::run`: packet framing, command dispatch, every command),
//!   the session's node work going to an in-process fake node ([`node`]).
//! - [`handshake_response`]: a client's answer to the greeting, the auth switch and a
//!   COM_CHANGE_USER (`protocol::handshake::{greet, check_password}`,
//!   `protocol::auth::{parse_response, parse_change_user}`).
//! - [`stmt_execute`]: COM_STMT_EXECUTE and COM_STMT_SEND_LONG_DATA bodies for a statement
//!   prepared with N parameters, through the session (parameter decoding, then planning and
//!   running with the decoded values).
//! - [`plan`]: statement text (and parameter values) through what a COM_QUERY does before it
//!   reaches a node: executable comments, SET splitting, multi-statement splitting, digest,
//!   parse, plan, the plan cache's shape decision, against the fixed rules `rules.toml`.
//! - [`rules`]: rules-file text through `config::parse`, a reload of the result
//!   (`Shared::offer`) and plans of a few statements against it.
//!
//! A panic anywhere is a bug. The session catches a panic under a client's command (it ends
//! that client only) and counts it, and tokio catches a task's: so every panic is also
//! counted by a hook, and each target fails when the count moved.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

pub mod client;
pub mod node;
mod planning;
mod session;

pub use planning::{plan, rules};
pub use session::{handshake_response, packet, stmt_execute, RULES, SALT, STATEMENTS};

/// The statements of a COM_QUERY's text as MariaDB splits them in its default mode, each
/// without its `;`.
pub fn statements(sql: &str) -> Vec<&str> {
    shardproxy::sql::lex::statements(sql, shardproxy::sql::lex::Mode::default())
        .parts
        .iter()
        .map(|(a, b)| &sql[*a..*b])
        .collect()
}

/// A target's body: one input.
pub type Target = fn(&[u8]);

/// Every target, by the name of its fuzz binary.
pub const TARGETS: &[(&str, Target)] = &[
    ("packet", packet),
    ("handshake_response", handshake_response),
    ("stmt_execute", stmt_execute),
    ("plan", plan),
    ("rules", rules),
];

/// Panics found and reported but not fixed yet, by a part of their message: while fuzzing
/// (`cfg(fuzzing)`, set by cargo fuzz) they are counted apart and do not stop the run, so
/// that the fuzzer goes on to find others. Unless `FUZZ_STRICT` is set in the environment;
/// and never in the replay test, where their regressions (`regressions/`) fail until the bug
/// is fixed. Remove an entry once its bug is fixed.
pub const KNOWN: &[&str] = &[
    // None now. The two found so far (an execute's parameter type 0x11-0x14 / 0xF3, a lookup
    // ttl_secs over 1000 years) are fixed; regressions/ replays their inputs.
];

static PANICS: AtomicUsize = AtomicUsize::new(0);
static KNOWN_PANICS: AtomicUsize = AtomicUsize::new(0);
static HOOK: Once = Once::new();

/// The message of a panic.
fn message(info: &std::panic::PanicHookInfo<'_>) -> String {
    let p = info.payload();
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Counts every panic from now on (and still reports it as before: under libFuzzer the
/// previous hook aborts, which libFuzzer reports as a crash); a [`KNOWN`] one while fuzzing
/// is only counted.
fn count_panics() {
    HOOK.call_once(|| {
        let tolerate = cfg!(fuzzing) && std::env::var_os("FUZZ_STRICT").is_none();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let m = message(info);
            if tolerate && KNOWN.iter().any(|k| m.contains(k)) {
                if KNOWN_PANICS.fetch_add(1, Ordering::SeqCst) == 0 {
                    eprintln!("fuzz: a known panic, tolerated while fuzzing (FUZZ_STRICT=1 stops on it): {m}");
                }
                return;
            }
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
    });
}

/// Runs `f`, then fails if anything panicked meanwhile, even where the panic was caught.
/// Returns the known panics ([`KNOWN`]) it tolerated (one that reached `f` itself ends it).
fn no_panic(what: &str, f: impl FnOnce()) -> usize {
    count_panics();
    let before = PANICS.load(Ordering::SeqCst);
    let known = KNOWN_PANICS.load(Ordering::SeqCst);
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    let after = PANICS.load(Ordering::SeqCst);
    if let Err(panic) = ran {
        if after != before {
            std::panic::resume_unwind(panic);
        }
    }
    assert_eq!(
        after - before,
        0,
        "{what}: the proxy panicked (caught, see the message above)"
    );
    KNOWN_PANICS.load(Ordering::SeqCst) - known
}

/// Replays the committed inputs on any toolchain, without libFuzzer (`cargo test` in
/// `fuzz/`, or `cargo test --test fuzz_regressions` in the main crate): every seed (`seeds/<target>/`) and every regression (`regressions/<target>/`,
/// the minimized crashes found so far; their test fails until the bug is fixed) through its
/// target. `FUZZ_REPLAY=DIR` replays the inputs of `DIR/<target>/` too (e.g. `corpus`, the
/// working corpora), in the seeds' test.
#[cfg(test)]
mod replay {
    use std::path::{Path, PathBuf};

    /// `fuzz/`, whichever crate this test was built in.
    fn root() -> PathBuf {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        if dir.join("seeds").is_dir() {
            dir.to_path_buf()
        } else {
            dir.join("fuzz")
        }
    }

    fn inputs(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_file())
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
    }

    /// Runs every input of `dirs` through its target; the inputs that failed, and how many
    /// ran.
    fn replay(dirs: &[PathBuf]) -> (Vec<String>, usize) {
        // One replay at a time: the panic count is the process's.
        static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        let mut failed = Vec::new();
        let mut ran = 0;
        for (name, target) in super::TARGETS {
            for dir in dirs {
                for file in inputs(&dir.join(name)) {
                    let data = std::fs::read(&file).expect("read an input");
                    ran += 1;
                    eprintln!("{name}: {}", file.display());
                    let r = std::panic::catch_unwind(|| target(&data));
                    if r.is_err() {
                        failed.push(format!("{name}: {}", file.display()));
                    }
                }
            }
        }
        (failed, ran)
    }

    #[test]
    fn seeds_run_without_a_panic() {
        let root = root();
        let mut dirs = vec![root.join("seeds")];
        if let Some(extra) = std::env::var_os("FUZZ_REPLAY") {
            dirs.push(root.join(extra));
        }
        let (failed, ran) = replay(&dirs);
        assert!(
            ran > 0,
            "no seed found under {}",
            root.join("seeds").display()
        );
        assert!(
            failed.is_empty(),
            "inputs that panicked:\n{}",
            failed.join("\n")
        );
    }

    #[test]
    fn regressions_run_without_a_panic() {
        let root = root();
        let (failed, ran) = replay(&[root.join("regressions")]);
        assert!(ran > 0, "no regression found under {}", root.display());
        assert!(
            failed.is_empty(),
            "inputs that panicked:\n{}",
            failed.join("\n")
        );
    }
}
