#!/usr/bin/env bash
# Run the cargo fuzz targets of fuzz/ for a bounded time each, one process at a time.
#
#   scripts/fuzz.sh                    every target, FUZZ_SECS seconds each
#   scripts/fuzz.sh plan rules         only these targets
#   scripts/fuzz.sh --list             the targets and what each feeds
#
# Environment:
#   FUZZ_SECS         seconds per target (default 60)
#   FUZZ_SANITIZER    cargo fuzz's --sanitizer: none (default: the crate has no unsafe code,
#                     the fuzzers look for panics, and run ~2x faster without ASan) or address
#   FUZZ_TOOLCHAIN    the nightly toolchain cargo fuzz builds with (default nightly)
#   CARGO_BUILD_JOBS  build jobs (default 2)
#   FUZZ_ARGS         more libFuzzer flags for every target (e.g. "-seed=1")
#   FUZZ_STRICT       set: stop on the panics listed in fuzz/src/lib.rs KNOWN too (found and
#                     reported, not fixed yet; by default a run goes on past them)
#
# Each target starts from its committed seeds (fuzz/seeds/TARGET/) and grows its working
# corpus in fuzz/corpus/TARGET/ (git-ignored, kept between runs), with the dictionary
# fuzz/dicts/TARGET.dict where there is one. libFuzzer's log goes to
# fuzz/logs/TARGET.log. A crash is written to fuzz/artifacts/TARGET/: minimize it with
# `cargo +nightly fuzz tmin -s none TARGET FILE` and copy it to fuzz/regressions/TARGET/,
# where `cd fuzz && cargo test` replays it (with the seeds) on any toolchain.
#
# Prints per target the executions, the corpus reached and the crashes found; exits 1 if any
# target crashed (or did not run), 2 on a usage error.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
readonly fuzz=$repo/fuzz
readonly secs=${FUZZ_SECS:-60}
readonly sanitizer=${FUZZ_SANITIZER:-none}
readonly toolchain=${FUZZ_TOOLCHAIN:-nightly}
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}

# name, -max_len, what it feeds
readonly targets=(
    "packet 4096 a client's byte stream after a fixed login, through a whole session (fake node)"
    "handshake_response 1024 the handshake response, auth switch response and COM_CHANGE_USER"
    "stmt_execute 1024 COM_STMT_EXECUTE / SEND_LONG_DATA bodies for a prepared statement"
    "plan 2048 statement text (+ parameters): digest, split, parse, plan, plan-cache shape"
    "rules 8192 rules-file text: parse and validate, reload, plans against the result"
)

die() {
    echo "fuzz.sh: $*" >&2
    exit 1
}

usage() {
    echo "usage: scripts/fuzz.sh [--list] [TARGET...]" >&2
    exit 2
}

# The -max_len of target $1; fails for an unknown target.
max_len_of() {
    local t name len
    for t in "${targets[@]}"; do
        read -r name len _ <<<"$t"
        if [[ $name == "$1" ]]; then
            echo "$len"
            return 0
        fi
    done
    return 1
}

# The files of directory $1 (0 when there is none), and their total bytes.
corpus_size() {
    local dir=$1 files=0 bytes=0 f
    if [[ -d $dir ]]; then
        for f in "$dir"/*; do
            [[ -f $f ]] || continue
            files=$((files + 1))
            bytes=$((bytes + $(stat -c %s "$f")))
        done
    fi
    echo "$files $bytes"
}

artifacts_of() {
    local dir=$fuzz/artifacts/$1
    [[ -d $dir ]] || return 0
    find "$dir" -maxdepth 1 -type f -printf '%f\n' | sort
}

if ! [[ $secs =~ ^[0-9]+$ ]] || ((secs == 0)); then
    die "FUZZ_SECS must be a positive number of seconds, not '$secs'"
fi

selected=()
for arg in "$@"; do
    case $arg in
    --list)
        for t in "${targets[@]}"; do
            read -r name len what <<<"$t"
            printf '%-20s -max_len=%-5s %s\n' "$name" "$len" "$what"
        done
        exit 0
        ;;
    -h | --help) usage ;;
    -*) usage ;;
    *)
        max_len_of "$arg" >/dev/null || die "unknown target '$arg' (scripts/fuzz.sh --list)"
        selected+=("$arg")
        ;;
    esac
done
if ((${#selected[@]} == 0)); then
    for t in "${targets[@]}"; do
        read -r name _ <<<"$t"
        selected+=("$name")
    done
fi

command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"
if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing the $toolchain toolchain"
    rustup toolchain install "$toolchain" --profile minimal || die "cannot install the $toolchain toolchain"
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz"
    cargo install cargo-fuzz --locked || die "cannot install cargo-fuzz"
fi

cd "$repo"
# Built once, then each binary is run as built (`cargo fuzz run` would build again first, and
# a source change meanwhile would fuzz the targets at different versions).
echo "== building the fuzz targets (cargo +$toolchain fuzz build -s $sanitizer, in fuzz/target)"
cargo "+$toolchain" fuzz build -s "$sanitizer" || die "building the fuzz targets failed"
triple=$(rustup run "$toolchain" rustc -vV | sed -n 's/^host: //p')
bin_dir=$fuzz/target/$triple/release

mkdir -p "$fuzz/logs"
extra=()
if [[ -n ${FUZZ_ARGS:-} ]]; then
    read -r -a extra <<<"$FUZZ_ARGS"
fi
results=()
failed=0
for t in "${selected[@]}"; do
    len=$(max_len_of "$t")
    log=$fuzz/logs/$t.log
    mkdir -p "$fuzz/corpus/$t" "$fuzz/artifacts/$t"
    before=$(artifacts_of "$t")
    echo "== $t: ${secs}s, -max_len=$len (log: fuzz/logs/$t.log)"
    rc=0
    [[ -x $bin_dir/$t ]] || die "$bin_dir/$t was not built"
    dict=()
    if [[ -f $fuzz/dicts/$t.dict ]]; then
        dict=(-dict="dicts/$t.dict")
    fi
    (cd "$fuzz" && "$bin_dir/$t" "corpus/$t" "seeds/$t" -artifact_prefix="artifacts/$t/" \
        -max_total_time="$secs" -max_len="$len" -timeout=20 -print_final_stats=1 \
        "${dict[@]}" "${extra[@]}") >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    read -r files bytes <<<"$(corpus_size "$fuzz/corpus/$t")"
    new=$(comm -13 <(echo "$before") <(artifacts_of "$t") | sed '/^$/d')
    crashes=$(printf '%s' "$new" | grep -c . || true)
    if ((rc != 0)) && ((crashes == 0)); then
        # Stopped without a test unit (a build error, an out-of-memory before the first run).
        crashes=1
        new="(no artifact: exit status $rc, see fuzz/logs/$t.log)"
    fi
    if grep -q "^fuzz: a known panic" "$log"; then
        echo "   $(grep -m 1 "^fuzz: a known panic" "$log")"
    fi
    if ((crashes > 0)); then
        failed=1
        echo "   crashed: $(echo "$new" | tr '\n' ' ')"
        grep -m 5 -E "panicked at|ERROR: libFuzzer|SUMMARY" "$log" | sed 's/^/   /' || true
    fi
    results+=("$(printf '%-20s %6s %12s %8s %7s %10s %7s' "$t" "$secs" "${execs:-?}" "${rate:-?}" "$files" "$bytes" "$crashes")")
done

echo
echo "== fuzz results ($(date -u +%Y-%m-%d), $(rustup run "$toolchain" rustc --version), sanitizer $sanitizer)"
printf '%-20s %6s %12s %8s %7s %10s %7s\n' target secs executions exec/s corpus bytes crashes
for r in "${results[@]}"; do
    echo "$r"
done
if ((failed)); then
    echo "fuzz.sh: crashes found: see fuzz/artifacts/ and fuzz/logs/" >&2
    exit 1
fi
