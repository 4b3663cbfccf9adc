# shellcheck shell=bash
# Shell helpers shared by scripts/ and bench/ (sourced, not run). The sourcing script defines
# die().

# True when process $1 exists and is not a zombie.
proc_alive() {
    local pid=$1 stat
    kill -0 "$pid" 2>/dev/null || return 1
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

# Stops process $1: SIGTERM, up to 10 s to exit, then SIGKILL.
stop_pid() {
    local pid=$1 i
    [[ -n $pid ]] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        proc_alive "$pid" || return 0
        sleep 0.1
    done
    echo "${0##*/}: pid $pid still alive after 10s, sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
}

# apt-get install of the packages named, with sudo when not root.
install_packages() {
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 || die "missing $*, and sudo is not available to install them"
        sudo=(sudo)
    fi
    echo "${0##*/}: installing $* with apt-get"
    "${sudo[@]}" apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"
}

# The benches' exit handling. A bench sets `work` (its temporary cluster directory) and
# `proxy_pid` (the proxy it started), adds any other process it starts to `bench_pids`, and
# calls bench_traps once: on any exit those processes and the proxy are stopped, the cluster
# stopped and removed, once; a failed run first shows the proxy log's tail.

bench_stop_proxy() {
    [[ -n $proxy_pid ]] || return 0
    stop_pid "$proxy_pid"
    wait "$proxy_pid" 2>/dev/null || true
    proxy_pid=""
}

bench_cleanup() {
    local pid
    ((bench_cleaned)) && return 0
    bench_cleaned=1
    for pid in "${bench_pids[@]}"; do
        stop_pid "$pid"
        wait "$pid" 2>/dev/null || true
    done
    bench_pids=()
    bench_stop_proxy
    if [[ -n $work && -d $work ]]; then
        "$(dirname "${BASH_SOURCE[0]}")/cluster.sh" stop "$work" >/dev/null || true
        rm -rf "$work"
    fi
}

bench_on_exit() {
    local rc=$?
    if ((rc != 0)) && ((!bench_cleaned)) && [[ -n $work && -f $work/proxy.log ]]; then
        echo "--- tail of the proxy log ---" >&2
        tail -n 30 "$work/proxy.log" >&2 || true
    fi
    bench_cleanup
}

bench_traps() {
    work=""
    proxy_pid=""
    bench_pids=()
    bench_cleaned=0
    trap bench_on_exit EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# cargo_target_dir: prints where cargo puts this checkout's builds, as cargo itself says
# (CARGO_TARGET_DIR, CARGO_BUILD_TARGET_DIR, a `target-dir` in a .cargo/config.toml, else
# target/ in the repo). Uses the caller's `repo` and `die`.
cargo_target_dir() {
    local dir
    # shellcheck disable=SC2154 # repo: the calling script's
    dir=$(cd "$repo" && cargo metadata --format-version 1 --no-deps 2>/dev/null |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    [[ -n $dir ]] || die "cargo metadata did not say where cargo builds $repo"
    echo "$dir"
}

# bench_proxy_binary: sets `bin` to $BIN when given, else builds this checkout (release,
# wherever cargo builds) and sets it to the built proxy; the caller's `die` if it is not
# there. Uses the caller's `repo`.
bench_proxy_binary() {
    local target_dir
    if [[ -n ${BIN:-} ]]; then
        bin=$BIN
    else
        echo "== building shardproxy (release): about 14 minutes on a fresh 2-core machine, seconds once built"
        # shellcheck disable=SC2154 # repo: the calling script's
        (cd "$repo" && cargo build --release)
        target_dir=$(cargo_target_dir)
        bin=$target_dir/release/shardproxy
    fi
    [[ -x $bin ]] || die "$bin not found"
}

# bench_binaries EXAMPLE: builds this checkout's proxy (unless BIN names one) and the bench
# client EXAMPLE (release, wherever cargo builds), and sets `bin` and `client` to them;
# the caller's `die` if either is not there. Uses the caller's `repo`.
bench_binaries() {
    local example=$1 target_dir
    target_dir=$(cargo_target_dir)
    echo "== building shardproxy and the bench client (release)"
    if [[ -n ${BIN:-} ]]; then
        (cd "$repo" && cargo build --release --example "$example")
    else
        (cd "$repo" && cargo build --release --bin shardproxy --example "$example")
    fi
    bin=${BIN:-$target_dir/release/shardproxy}
    client=$target_dir/release/examples/$example
    [[ -x $bin ]] || die "$bin not found"
    [[ -x $client ]] || die "$client not found"
}

# bench_start_proxy BIN PORT USER PASSWORD [RULES LOG]: serves RULES (default
# $work/rules.toml) with BIN (log in LOG, default $work/proxy.log; pid in proxy_pid) and waits
# up to 30 s until USER can run a query on PORT.
bench_start_proxy() {
    local bin=$1 port=$2 user=$3 password=$4 rules=${5:-$work/rules.toml} log=${6:-$work/proxy.log} deadline
    echo "== starting the proxy on 127.0.0.1:$port"
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        die "port $port is already in use by another process"
    fi
    "$bin" serve --config "$rules" </dev/null >"$log" 2>&1 &
    proxy_pid=$!
    deadline=$((SECONDS + 30))
    until mariadb -h127.0.0.1 -P"$port" -u"$user" -p"$password" -e 'select 1' >/dev/null 2>&1; do
        proc_alive "$proxy_pid" || die "the proxy exited during start-up"
        ((SECONDS < deadline)) || die "the proxy did not answer on port $port within 30s"
        sleep 0.2
    done
}

# bench_shard_rules SHARDS BASE_PORT PROXY_PORT METRICS_PORT TABLE:COLUMN... [broadcast:TABLE...]:
# prints a rules file: user app/app on PROXY_PORT, metrics on METRICS_PORT, nodes ds0.. on
# BASE_PORT.. (database shop), each TABLE hash_slot by COLUMN in equal slot ranges over the
# nodes, each broadcast:TABLE on every node.
bench_shard_rules() {
    local shards=$1 base=$2 proxy=$3 metrics=$4 slots="" i t
    shift 4
    for ((i = 0; i < shards; i++)); do
        slots+="${slots:+, }{ slots = \"$((i * 1024 / shards))-$(((i + 1) * 1024 / shards - 1))\", node = \"ds$i\" }"
    done
    printf 'version = 1\ndefault_node = "ds0"\n\n[server]\nlisten = "127.0.0.1:%s"\n' "$proxy"
    printf 'users = [{ name = "app", password = "app" }]\n\n[metrics]\nlisten = "127.0.0.1:%s"\n\n[nodes]\n' "$metrics"
    for ((i = 0; i < shards; i++)); do
        echo "ds$i = \"mysql://root:root@127.0.0.1:$((base + i))/shop\""
    done
    for t in "$@"; do
        echo
        if [[ $t == broadcast:* ]]; then
            printf '[tables.%s]\nrule = "broadcast"\n' "${t#broadcast:}"
        else
            printf '[tables.%s]\nrule = "hash_slot"\ncolumn = "%s"\nslots = [%s]\n' "${t%%:*}" "${t##*:}" "$slots"
        fi
    done
}

# The benches' CPU accounting, from /proc (the caller's `die` when a process has gone).

# Prints the CPU time (utime + stime, in clock ticks) the processes PIDS... have used so far.
cpu_ticks() {
    local pid stat sum=0
    for pid in "$@"; do
        stat=$(<"/proc/$pid/stat") || die "process $pid has gone"
        stat=${stat##*) }
        sum=$((sum + $(awk '{ print $12 + $13 }' <<<"$stat")))
    done
    echo "$sum"
}

# Prints the CPU time this shell's finished children (sysbench, once waited for) have used.
children_ticks() {
    local stat
    stat=$(<"/proc/$$/stat")
    stat=${stat##*) }
    awk '{ print $14 + $15 }' <<<"$stat"
}

# Prints the busy clock ticks of the whole machine so far: all CPUs, from /proc/stat (user,
# nice, system, irq, softirq; with tick-based accounting a tick in an interrupt is charged to
# the task it interrupted too, so these add up with the tasks' utime + stime).
machine_busy_ticks() {
    awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8; exit }' /proc/stat
}

# Prints how idle the machine was over the next 2 s, in % (others' work on the same cores
# skews a bench's figures).
cpu_idle_pct() {
    local a b
    a=$(head -n 1 /proc/stat)
    sleep 2
    b=$(head -n 1 /proc/stat)
    awk -v a="$a" -v b="$b" 'BEGIN {
        n = split(a, x); split(b, y); t = 0
        for (i = 2; i <= n; i++) t += y[i] - x[i]
        idle = (y[5] - x[5]) + (y[6] - x[6])
        printf "%.0f", (t > 0 ? 100 * idle / t : 0) }'
}

# Prints sysbench output OUT's figure FIELD (queries, qps, avg_ms, p95_ms, errors, reconnects).
sb_field() {
    local file=$1 field=$2 v
    case $field in
    queries) v=$(sed -n 's/^ *queries: *\([0-9]*\) *([0-9.]* per sec\.)$/\1/p' "$file") ;;
    qps) v=$(sed -n 's/^ *queries: *[0-9]* *(\([0-9.]*\) per sec\.)$/\1/p' "$file") ;;
    avg_ms) v=$(sed -n 's/^ *avg: *\([0-9.]*\)$/\1/p' "$file") ;;
    p95_ms) v=$(sed -n 's/^ *95th percentile: *\([0-9.]*\)$/\1/p' "$file") ;;
    errors) v=$(sed -n 's/^ *ignored errors: *\([0-9]*\) .*/\1/p' "$file") ;;
    reconnects) v=$(sed -n 's/^ *reconnects: *\([0-9]*\) .*/\1/p' "$file") ;;
    esac
    [[ -n $v ]] || die "no '$field' figure in $file"
    echo "$v"
}
