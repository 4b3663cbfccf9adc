#!/usr/bin/env bash
# sysbench oltp_point_select against three targets, in alternation:
#   direct  one MariaDB node,
#   relay   HAProxy in `mode tcp` in front of that same node: a pure byte relay, the yardstick
#           for what one extra hop costs,
#   proxy   shardproxy over four shard nodes,
#   proxy1  shardproxy over the relay's own node (every slot on it): the same statements,
#           routing and protocol work as `proxy`, with the MariaDB side of the relay,
# each with server-side prepared statements (--db-ps-mode=auto, the binary protocol) and with
# text queries (--db-ps-mode=disable).
#
#   bench/point_select.sh
#   PERF_DIR=/tmp bench/point_select.sh     # also profile the proxy (perf record -g)
#
# Environment: TABLE_SIZE (default 100000), THREADS (default 8), TIME seconds per run (default
# 10), ROUNDS (default 2), WARMUP seconds per target before the first round (default 3, 0 for
# none), PERF_DIR (unset: no profile; set: one extra, unmeasured proxy run per mode under
# `perf record -g`, writing PERF_DIR/perf-{prepared,text}.{data,txt}), SHARDS (shard nodes
# behind the proxy: 4 by default, 1 or 2 to see the proxy's own cost without the cost of
# more MariaDB servers on the same cores), NODE_OPTS (URL options of the proxy's nodes, e.g.
# prefer_socket=false to reach them over TCP as the relay does), RELAY_TO (direct, the
# default: the relay in front of the direct node; shards: in front of the shard nodes, each
# client connection to one of them in turn, so the relay pays for as many MariaDB servers as
# the proxy; most of its point selects then find no row), CARGO_TARGET_DIR, BIN (the proxy
# binary to measure; default: this checkout, built), BASE_BIN (a
# shardproxy binary built from another commit: a fifth target, base1, serves proxy1's rules
# from it, so `proxy1 / base1` is what a change cost on the hot path, in one run).
# Ports: shard nodes from 3411 (3411-3414 with four), the direct node next, relay 3416, proxy
# 3417, proxy1 3418, base1 3419. Everything started
# here is stopped and removed on exit. The output ends with one line per mode,
#   mode=prepared direct_qps=N relay_qps=N proxy_qps=N proxy_vs_relay=R relay_cpu_us=U proxy_cpu_us=U proxy1_qps=N proxy1_vs_relay=R proxy1_cpu_us=U
#   mode=text ...
# and last a summary line
#   prepared_vs_relay=R text_vs_relay=R same_node_prepared_vs_relay=R same_node_text_vs_relay=R
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
readonly table_size=${TABLE_SIZE:-100000}
readonly threads=${THREADS:-8}
readonly duration=${TIME:-10}
readonly rounds=${ROUNDS:-2}
readonly warmup=${WARMUP:-3}
readonly perf_dir=${PERF_DIR:-}
readonly base_port=3411
readonly shard_count=${SHARDS:-4}
readonly node_opts=${NODE_OPTS:-}
readonly relay_to=${RELAY_TO:-direct}
readonly direct_port=$((base_port + shard_count))
readonly relay_port=3416
readonly proxy_port=3417
readonly proxy1_port=3418
readonly base1_port=3419
readonly base_bin=${BASE_BIN:-}
readonly modes=(prepared text)
if [[ -n $base_bin ]]; then
    readonly targets=(direct relay proxy proxy1 base1)
else
    readonly targets=(direct relay proxy proxy1)
fi

die() {
    echo "point_select.sh: $*" >&2
    exit 1
}

for v in table_size threads duration rounds; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
[[ $warmup =~ ^[0-9]+$ ]] || die "warmup must be a non-negative integer, got '$warmup'"
case $relay_to in
direct | shards) ;;
*) die "RELAY_TO must be direct or shards, got '$relay_to'" ;;
esac
case $shard_count in
1 | 2 | 4) ;;
*) die "SHARDS must be 1, 2 or 4, got '$shard_count'" ;;
esac
readonly slots_per_shard=$((1024 / shard_count))

bench_traps

command -v sysbench >/dev/null 2>&1 || install_packages sysbench
command -v mariadb >/dev/null 2>&1 || install_packages mariadb-server mariadb-client
command -v haproxy >/dev/null 2>&1 || [[ -x /usr/sbin/haproxy ]] || install_packages haproxy
haproxy_bin=$(command -v haproxy || echo /usr/sbin/haproxy)
[[ -x $haproxy_bin ]] || die "haproxy not found after installing it"
command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"
if [[ -n $perf_dir ]]; then
    command -v perf >/dev/null 2>&1 || die "PERF_DIR is set but perf is not installed (Debian: linux-perf)"
    mkdir -p "$perf_dir"
    perf_dir_abs=$(cd "$perf_dir" && pwd)
fi

bench_proxy_binary
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ $commit != unknown && -n $(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null) ]]; then
    commit+="+dirty"
fi

work=$(mktemp -d /tmp/shardproxy-bench.XXXXXX)

echo "== starting $shard_count shard nodes and 1 direct node in $work"
"$repo/scripts/cluster.sh" start "$work" "$((shard_count + 1))" "$base_port"

# sbtest1 sharded on id over the shard nodes, an equal share of the slots each.
{
    echo 'version = 1'
    echo 'default_node = "ds0"'
    echo
    echo '[server]'
    echo "listen = \"127.0.0.1:$proxy_port\""
    echo 'users = [{ name = "sbtest", password = "sbtest" }]'
    echo
    echo '[nodes]'
    for ((i = 0; i < shard_count; i++)); do
        echo "ds$i = \"mysql://root:root@127.0.0.1:$((base_port + i))/shop${node_opts:+?$node_opts}\""
    done
    echo
    echo '[tables.sbtest1]'
    echo 'rule = "hash_slot"'
    echo 'column = "id"'
    slots=""
    for ((i = 0; i < shard_count; i++)); do
        slots+="${slots:+, }{ slots = \"$((i * slots_per_shard))-$((i * slots_per_shard + slots_per_shard - 1))\", node = \"ds$i\" }"
    done
    echo "slots = [$slots]"
} >"$work/rules.toml"

bench_start_proxy "$bin" "$proxy_port" sbtest sbtest

# proxy1: a second proxy with the same table rule, every slot on the relay's node. It does the
# proxy's whole work per statement (plan cache, CRC32 slot, pool, relay of the rows) in front
# of the very MariaDB the relay uses, so proxy1 / relay is the proxy's own cost against a
# byte relay's, and proxy / proxy1 what four MariaDB servers on the same cores cost.
{
    echo 'version = 1'
    echo 'default_node = "ds0"'
    echo
    echo '[server]'
    echo "listen = \"127.0.0.1:$proxy1_port\""
    echo 'users = [{ name = "sbtest", password = "sbtest" }]'
    echo
    echo '[nodes]'
    echo "ds0 = \"mysql://root:root@127.0.0.1:$direct_port/shop${node_opts:+?$node_opts}\""
    echo
    echo '[tables.sbtest1]'
    echo 'rule = "hash_slot"'
    echo 'column = "id"'
    echo 'slots = [{ slots = "0-1023", node = "ds0" }]'
} >"$work/rules1.toml"
four_shards_pid=$proxy_pid
bench_start_proxy "$bin" "$proxy1_port" sbtest sbtest "$work/rules1.toml" "$work/proxy1.log"
proxy1_pid=$proxy_pid
bench_pids+=("$proxy1_pid")
base1_pid=""
if [[ -n $base_bin ]]; then
    [[ -x $base_bin ]] || die "BASE_BIN $base_bin is not an executable"
    sed "s/127.0.0.1:$proxy1_port/127.0.0.1:$base1_port/" "$work/rules1.toml" >"$work/rules1b.toml"
    bench_start_proxy "$base_bin" "$base1_port" sbtest sbtest "$work/rules1b.toml" "$work/base1.log"
    base1_pid=$proxy_pid
    bench_pids+=("$base1_pid")
fi
proxy_pid=$four_shards_pid

# The relay: HAProxy copying bytes between the client and the direct node, with its default
# threading (one thread per CPU) and no health checks. The timeouts only have to outlast a run.
cat >"$work/haproxy.cfg" <<EOF
global
    maxconn 4096

defaults
    mode tcp
    maxconn 4096
    timeout connect 5s
    timeout client 1h
    timeout server 1h

frontend relay
    bind 127.0.0.1:$relay_port
    default_backend direct

backend direct
$(if [[ $relay_to == shards ]]; then
    echo "    balance roundrobin"
    for ((i = 0; i < shard_count; i++)); do
        echo "    server ds$i 127.0.0.1:$((base_port + i))"
    done
else
    echo "    server direct 127.0.0.1:$direct_port"
fi)
EOF
echo "== starting the relay (HAProxy, mode tcp) on 127.0.0.1:$relay_port -> $([[ $relay_to == shards ]] && echo "the $shard_count shard nodes, round robin" || echo "127.0.0.1:$direct_port")"
if (exec 3<>"/dev/tcp/127.0.0.1/$relay_port") 2>/dev/null; then
    die "port $relay_port is already in use by another process"
fi
"$haproxy_bin" -c -f "$work/haproxy.cfg" >"$work/relay.log" 2>&1 ||
    die "haproxy rejected $work/haproxy.cfg: $(tail -n 5 "$work/relay.log")"
"$haproxy_bin" -f "$work/haproxy.cfg" -db </dev/null >>"$work/relay.log" 2>&1 &
relay_pid=$!
bench_pids+=("$relay_pid")
deadline=$((SECONDS + 30))
until mariadb -h127.0.0.1 -P"$relay_port" -uroot -proot -e 'select 1' >/dev/null 2>&1; do
    proc_alive "$relay_pid" || die "haproxy exited during start-up: $(tail -n 5 "$work/relay.log")"
    ((SECONDS < deadline)) || die "the relay did not answer on port $relay_port within 30s"
    sleep 0.2
done

# --auto-inc=off: sysbench then inserts explicit ids; with AUTO_INCREMENT its INSERTs would
# not name the shard key. The same table definition is used on the direct node.
sb_common=(oltp_point_select --db-driver=mysql --mysql-host=127.0.0.1 --mysql-db=shop
    --tables=1 --table-size="$table_size" --auto-inc=off)
declare -A sb_conn=(
    [direct]="--mysql-port=$direct_port --mysql-user=root --mysql-password=root"
    [relay]="--mysql-port=$relay_port --mysql-user=root --mysql-password=root"
    [proxy]="--mysql-port=$proxy_port --mysql-user=sbtest --mysql-password=sbtest"
    [proxy1]="--mysql-port=$proxy1_port --mysql-user=sbtest --mysql-password=sbtest"
    [base1]="--mysql-port=$base1_port --mysql-user=sbtest --mysql-password=sbtest"
)
declare -A ps_mode=([prepared]=auto [text]=disable)

# The process between sysbench and MariaDB for each target, and the MariaDB nodes behind it.
shard_pids=""
for ((i = 0; i < shard_count; i++)); do
    shard_pids+="${shard_pids:+ }$(<"$work/node$i.pid")"
done
direct_pid=$(<"$work/node$shard_count.pid")
declare -A middle_pid=([direct]="" [relay]=$relay_pid [proxy]=$proxy_pid [proxy1]=$proxy1_pid [base1]=$base1_pid)
relay_nodes=$direct_pid
[[ $relay_to == shards ]] && relay_nodes=$shard_pids
declare -A node_pids=([direct]=$direct_pid [relay]=$relay_nodes [proxy]=$shard_pids [proxy1]=$direct_pid [base1]=$direct_pid)
# Every long-running process of the bench, whichever target a run measures.
readonly bench_procs="$shard_pids $direct_pid $relay_pid $proxy_pid $proxy1_pid${base1_pid:+ $base1_pid}"

# sb TARGET ARGS...: sysbench oltp_point_select against TARGET.
sb() {
    local target=$1
    shift
    # shellcheck disable=SC2086 # sb_conn holds the target's options, split on purpose
    sysbench "${sb_common[@]}" ${sb_conn[$target]} "$@"
}

echo "== prepare: direct node (127.0.0.1:$direct_port)"
sb direct prepare

echo "== prepare: through the proxy (127.0.0.1:$proxy_port)"
if ! sb proxy prepare; then
    die "sysbench prepare through the proxy failed (see the output above)"
fi

# Check the proxy's split on the shard nodes themselves: together they hold every row once,
# and each holds only rows of its own slots.
total=0
for ((i = 0; i < shard_count; i++)); do
    port=$((base_port + i))
    lo=$((i * slots_per_shard))
    hi=$((lo + slots_per_shard - 1))
    counts=$(mariadb -h127.0.0.1 -P"$port" -uroot -proot -N -B shop -e \
        "SELECT COUNT(*), COALESCE(SUM(CRC32(id) % 1024 NOT BETWEEN $lo AND $hi), 0) FROM sbtest1")
    read -r rows misplaced <<<"$counts"
    [[ $rows =~ ^[0-9]+$ && $misplaced =~ ^[0-9]+$ ]] || die "unexpected answer from shard ds$i: '$counts'"
    echo "shard ds$i (port $port, slots $lo-$hi): $rows rows, $misplaced misplaced"
    ((misplaced == 0)) || die "shard ds$i holds $misplaced rows of other shards' slots"
    total=$((total + rows))
done
((total == table_size)) || die "the shard nodes hold $total rows in all, expected $table_size"

# Prints the system (kernel) part, stime, of process $1's CPU time so far.
sys_ticks() {
    local stat
    stat=$(<"/proc/$1/stat") || die "process $1 has gone"
    stat=${stat##*) }
    awk '{ print $13 }' <<<"$stat"
}

hz=$(getconf CLK_TCK)
readonly hz
ncpu=$(nproc)
readonly ncpu

# Prints µs of CPU per query for TICKS clock ticks over QUERIES queries.
us_per_query() {
    awk -v t="$1" -v hz="$hz" -v q="$2" 'BEGIN { printf "%.1f", (q > 0 ? t / hz * 1e6 / q : 0) }'
}

# Prints the median of its arguments.
median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
        END { if (NR % 2) printf "%.1f", v[(NR + 1) / 2]; else printf "%.1f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Prints A / B with two decimals.
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'
}

# Results, keyed MODE.TARGET: space-separated lists with one entry per round.
declare -A res_qps res_mid res_sys res_nodes
others_all=""

# run_one MODE TARGET SECONDS OUT: one sysbench run with its output in OUT. Sets run_qps,
# run_mid (µs of CPU per query of the middle process, "-" for the direct target), run_sys
# (the kernel's share of the middle process's CPU, "-" for direct), run_nodes
# (the same for the MariaDB nodes behind it), run_avg and run_p95 (latency in ms), and
# run_others: the share of the machine's CPU capacity that processes outside the bench (not
# sysbench, the proxy, the relay or any of the five nodes) used during the run: another
# engineer's build, say.
run_one() {
    local mode=$1 target=$2 secs=$3 out=$4 m0=0 m1=0 ms0=0 ms1=0 n0 n1 a0 a1 c0 c1 b0 b1 t0 t1 queries
    # shellcheck disable=SC2086 # middle_pid and node_pids are pid lists, split on purpose
    {
        [[ -z ${middle_pid[$target]} ]] || m0=$(cpu_ticks ${middle_pid[$target]})
        [[ -z ${middle_pid[$target]} ]] || ms0=$(sys_ticks ${middle_pid[$target]})
        n0=$(cpu_ticks ${node_pids[$target]})
    }
    # shellcheck disable=SC2086
    a0=$(cpu_ticks $bench_procs)
    c0=$(children_ticks)
    b0=$(machine_busy_ticks)
    t0=$EPOCHREALTIME
    if ! sb "$target" --db-ps-mode="${ps_mode[$mode]}" --threads="$threads" --time="$secs" \
        --report-interval=0 run >"$out" 2>&1; then
        tail -n 20 "$out" >&2
        die "sysbench $mode run against $target failed"
    fi
    t1=$EPOCHREALTIME
    b1=$(machine_busy_ticks)
    c1=$(children_ticks)
    # shellcheck disable=SC2086
    a1=$(cpu_ticks $bench_procs)
    # shellcheck disable=SC2086
    {
        [[ -z ${middle_pid[$target]} ]] || m1=$(cpu_ticks ${middle_pid[$target]})
        [[ -z ${middle_pid[$target]} ]] || ms1=$(sys_ticks ${middle_pid[$target]})
        n1=$(cpu_ticks ${node_pids[$target]})
    }
    queries=$(sb_field "$out" queries)
    run_qps=$(sb_field "$out" qps)
    run_avg=$(sb_field "$out" avg_ms)
    run_p95=$(sb_field "$out" p95_ms)
    run_mid=-
    run_sys=-
    if [[ -n ${middle_pid[$target]} ]]; then
        run_mid=$(us_per_query $((m1 - m0)) "$queries")
        run_sys=$(awk -v s=$((ms1 - ms0)) -v t=$((m1 - m0)) 'BEGIN { printf "%.0f", (t > 0 ? 100 * s / t : 0) }')
    fi
    run_nodes=$(us_per_query $((n1 - n0)) "$queries")
    run_others=$(awk -v t=$((b1 - b0 - (c1 - c0) - (a1 - a0))) -v hz="$hz" \
        -v n="$ncpu" -v s="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
        'BEGIN { v = (s > 0 ? 100 * t / (hz * n * s) : 0); printf "%.0f%%", (v < 0 ? 0 : v) }')
}

if ((warmup > 0)); then
    echo "== warm-up: ${warmup}s per target (not measured)"
    for target in "${targets[@]}"; do
        run_one prepared "$target" "$warmup" "$work/warmup-$target.txt"
    done
fi

idle_before=$(cpu_idle_pct)
echo "== measuring (CPU ${idle_before}% idle over the last 2 s): $rounds rounds of" \
    "{${modes[*]}} x {${targets[*]}}, $threads threads, ${duration}s per run"
echo "(others = CPU used by processes outside the bench during the run, in % of the machine)"
run_fmt='%-5s %-8s %-6s %10s %12s %10s %12s %8s %8s %7s\n'
# shellcheck disable=SC2059 # run_fmt is the format
printf "$run_fmt" round mode target QPS middle_us/q mid_sys% nodes_us/q avg_ms p95_ms others
for ((r = 1; r <= rounds; r++)); do
    for mode in "${modes[@]}"; do
        for target in "${targets[@]}"; do
            run_one "$mode" "$target" "$duration" "$work/run-$r-$mode-$target.txt"
            # shellcheck disable=SC2059
            printf "$run_fmt" "$r" "$mode" "$target" "$run_qps" "$run_mid" "$run_sys" "$run_nodes" "$run_avg" "$run_p95" "$run_others"
            key=$mode.$target
            res_qps[$key]+="${res_qps[$key]:+ }$run_qps"
            res_mid[$key]+="${res_mid[$key]:+ }$run_mid"
            res_sys[$key]+="${res_sys[$key]:+ }$run_sys"
            res_nodes[$key]+="${res_nodes[$key]:+ }$run_nodes"
            others_all+="${others_all:+ }$run_others"
        done
    done
done

# The profile: one more proxy run per mode, TIME + 2 s long, with perf recording the proxy for
# TIME s from 1 s in. Its figures are not in the medians (perf's sampling costs CPU too).
# perf_report MODE: the top 25 symbols by self time and the kernel / user-space split.
perf_report() {
    local mode=$1 data=$perf_dir_abs/perf-$1.data report=$work/perf-$1.report
    perf report -i "$data" --no-children --sort symbol -g none --stdio >"$report" 2>/dev/null ||
        die "perf report failed on $data"
    {
        echo "# shardproxy during sysbench oltp_point_select --db-ps-mode=${ps_mode[$mode]}," \
            "$threads threads; perf record -g -p PID over ${duration}s; commit $commit, $(date +%F)"
        echo "# perf report --no-children --sort symbol: self time by symbol, top 25"
        awk '!/^#/ && NF { sub(/[[:space:]]+-[[:space:]]+-[[:space:]]*$/, ""); print; if (++n == 25) exit }' "$report"
        echo "# share of the samples: [k] kernel, [.] user space"
        awk '$2 == "[k]" { k += $1 } $2 == "[.]" { u += $1 }
            END { printf "kernel %.1f%%  user %.1f%%\n", k, u }' "$report"
    } >"$perf_dir_abs/perf-$mode.txt"
}
# untrack PID: drops PID from bench_pids once it has been waited for.
untrack() {
    local pid kept=()
    for pid in "${bench_pids[@]}"; do
        [[ $pid == "$1" ]] || kept+=("$pid")
    done
    bench_pids=("${kept[@]}")
}
perf_ok=""
if [[ -n $perf_dir ]]; then
    echo "== profiling the proxy: one ${duration}s perf record -g per mode (not measured)"
    perf_ok=yes
    for mode in "${modes[@]}"; do
        (sleep 1 && exec perf record -g -p "$proxy_pid" -o "$perf_dir_abs/perf-$mode.data" \
            -- sleep "$duration") >"$work/perf-$mode.log" 2>&1 &
        perf_pid=$!
        bench_pids+=("$perf_pid")
        run_one "$mode" proxy "$((duration + 2))" "$work/perf-run-$mode.txt"
        if wait "$perf_pid"; then
            perf_report "$mode"
            echo "$mode: $perf_dir_abs/perf-$mode.txt (and perf-$mode.data)"
        else
            echo "point_select.sh: perf record failed for $mode (not permitted here?):" >&2
            tail -n 5 "$work/perf-$mode.log" >&2
            perf_ok=""
        fi
        untrack "$perf_pid"
    done
fi

machine="$(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
haproxy_version=$("$haproxy_bin" -v | sed -n '1s/^HAProxy version \([^ ]*\).*/\1/p')

bench_cleanup

declare -A med_qps med_mid med_sys med_nodes
for mode in "${modes[@]}"; do
    for target in "${targets[@]}"; do
        key=$mode.$target
        # shellcheck disable=SC2086 # space-separated lists, split on purpose
        {
            med_qps[$key]=$(median ${res_qps[$key]})
            med_nodes[$key]=$(median ${res_nodes[$key]})
            if [[ $target == direct ]]; then
                med_mid[$key]=-
                med_sys[$key]=-
            else
                med_mid[$key]=$(median ${res_mid[$key]})
                med_sys[$key]=$(median ${res_sys[$key]})
            fi
        }
    done
done

echo
echo "date=$(date +%F) machine=\"$machine\" commit=$commit haproxy=$haproxy_version threads=$threads" \
    "table_size=$table_size time=${duration}s rounds=$rounds cpu_idle_before=${idle_before}%" \
    "others_per_run=${others_all// /,}"
echo "medians of $rounds runs; middle = haproxy (relay) or shardproxy (proxy), mid_sys% = its kernel share, nodes = the MariaDB" \
    "node(s) behind; CPU in µs per query"
printf '%-8s %-6s %10s %8s %9s %11s %9s %10s   %s\n' mode target QPS vs_relay vs_direct middle_us/q mid_sys% nodes_us/q "QPS of each run"
for mode in "${modes[@]}"; do
    for target in "${targets[@]}"; do
        key=$mode.$target
        printf '%-8s %-6s %10s %8s %9s %11s %9s %10s   %s\n' "$mode" "$target" "${med_qps[$key]}" \
            "$(ratio "${med_qps[$key]}" "${med_qps[$mode.relay]}")" \
            "$(ratio "${med_qps[$key]}" "${med_qps[$mode.direct]}")" \
            "${med_mid[$key]}" "${med_sys[$key]}" "${med_nodes[$key]}" "${res_qps[$key]}"
    done
done
if [[ -n $perf_ok ]]; then
    echo "profiles: $perf_dir_abs/perf-prepared.txt $perf_dir_abs/perf-text.txt"
fi
for mode in "${modes[@]}"; do
    echo "mode=$mode direct_qps=${med_qps[$mode.direct]} relay_qps=${med_qps[$mode.relay]}" \
        "proxy_qps=${med_qps[$mode.proxy]} proxy_vs_relay=$(ratio "${med_qps[$mode.proxy]}" "${med_qps[$mode.relay]}")" \
        "relay_cpu_us=${med_mid[$mode.relay]} proxy_cpu_us=${med_mid[$mode.proxy]}" \
        "proxy1_qps=${med_qps[$mode.proxy1]} proxy1_vs_relay=$(ratio "${med_qps[$mode.proxy1]}" "${med_qps[$mode.relay]}")" \
        "proxy1_cpu_us=${med_mid[$mode.proxy1]}"
done
if [[ -n $base_bin ]]; then
    for mode in "${modes[@]}"; do
        echo "mode=$mode base1_qps=${med_qps[$mode.base1]} base1_cpu_us=${med_mid[$mode.base1]}" \
            "proxy1_vs_base1=$(ratio "${med_qps[$mode.proxy1]}" "${med_qps[$mode.base1]}")"
    done
fi
echo "prepared_vs_relay=$(ratio "${med_qps[prepared.proxy]}" "${med_qps[prepared.relay]}")" \
    "text_vs_relay=$(ratio "${med_qps[text.proxy]}" "${med_qps[text.relay]}")" \
    "same_node_prepared_vs_relay=$(ratio "${med_qps[prepared.proxy1]}" "${med_qps[prepared.relay]}")" \
    "same_node_text_vs_relay=$(ratio "${med_qps[text.proxy1]}" "${med_qps[text.relay]}")"
