#!/usr/bin/env bash
# Read replicas under a read-only load: sysbench oltp_read_only through the proxy over two
# shard nodes, in one run, on the same data and for the same time:
#   none      the two primaries alone (a rules file without replicas),
#   replicas  the same primaries with two GTID replicas each (`replicas = [...]` in [nodes]):
#             2 primaries + 4 replicas, six MariaDB servers.
# sysbench runs with --skip-trx: each of its statements is an autocommit read, which the
# proxy may send to a replica (without it, every event is BEGIN ... COMMIT and every read a
# transaction's, on the primary). Per phase: QPS, latency, errors, the SELECTs each MariaDB
# server ran (its Com_select) and where the CPU went; for the replicas phase also the proxy's
# reads per replica (shardproxy_replica_reads_total), the reads it kept on the primary and
# why (shardproxy_replica_declined_total), and SHOW NODES at the end.
#
#   bench/replicas.sh
#   POLICY=least_busy bench/replicas.sh
#
# Environment: TABLE_SIZE rows per table (default 100000), TABLES (default 1), THREADS
# (default 8), TIME seconds per phase (default 30), WARMUP seconds per phase before it is
# measured (default 5), POLICY the `[replicas] policy` (round_robin, the default, or
# least_busy), BIN a shardproxy binary instead of building this checkout, CARGO_TARGET_DIR
# honoured. Every node keeps a ROW binary log (`BINLOG=1 scripts/cluster.sh`, server ids
# 1-6); the replicas replicate by GTID (MASTER_USE_GTID=slave_pos) from before sysbench
# creates its tables, so they get every row by replication. The script checks each replica
# holds its primary's rows, and each primary only rows of its own slots.
# Ports: ds0 3751, ds1 3752, ds0's replicas 3753-3754, ds1's 3755-3756, proxy 3757, metrics
# 3758, admin 3759. Everything started here is stopped and removed on exit. The last line:
#   none_qps=N replicas_qps=N replicas_vs_none=R errors=N replica_reads=ds0/r1:N,ds0/r2:N,ds1/r1:N,ds1/r2:N declined=N
# and the script exits 1 if sysbench met errors, or a replica was never read.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
readonly table_size=${TABLE_SIZE:-100000}
readonly tables=${TABLES:-1}
readonly threads=${THREADS:-8}
readonly duration=${TIME:-30}
readonly warmup=${WARMUP:-5}
readonly policy=${POLICY:-round_robin}
readonly base_port=3751
readonly shard_count=2
readonly replicas_per=2
readonly node_count=$((shard_count * (1 + replicas_per)))
readonly proxy_port=3757
readonly metrics_port=3758
readonly admin_port=3759
readonly phases=(none replicas)

die() {
    echo "replicas.sh: $*" >&2
    exit 1
}

for v in table_size tables threads duration; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
[[ $warmup =~ ^[0-9]+$ ]] || die "warmup must be a non-negative integer, got '$warmup'"
case $policy in
round_robin | least_busy) ;;
*) die "POLICY must be round_robin or least_busy, got '$policy'" ;;
esac

bench_traps

command -v sysbench >/dev/null 2>&1 || install_packages sysbench
command -v mariadb >/dev/null 2>&1 || install_packages mariadb-server mariadb-client
command -v curl >/dev/null 2>&1 || install_packages curl
command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"

bench_proxy_binary
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ $commit != unknown && -n $(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null) ]]; then
    commit+="+dirty"
fi

# Node layout: ds$i's primary is node $i, its replica r$j (1-based) node
# shard_count + i * replicas_per + j - 1.
replica_node() {
    echo $((shard_count + $1 * replicas_per + $2 - 1))
}

work=$(mktemp -d /tmp/shardproxy-replicas.XXXXXX)
echo "== starting $shard_count primaries and $((shard_count * replicas_per)) replicas in $work (ROW binary log on each)"
BINLOG=1 "$repo/scripts/cluster.sh" start "$work" "$node_count" "$base_port"

# node_sql N SQL...: runs SQL on node N (database shop), tab-separated, no header.
node_sql() {
    local n=$1
    shift
    mariadb -h127.0.0.1 -P$((base_port + n)) -uroot -proot -N -B shop -e "$*"
}

# slave_field N FIELD: FIELD of node N's SHOW SLAVE STATUS.
slave_field() {
    mariadb -h127.0.0.1 -P$((base_port + $1)) -uroot -proot -e 'SHOW SLAVE STATUS\G' |
        sed -n "s/^ *$2: *//p"
}

# Replication before any table exists: the replicas get sysbench's tables and rows from their
# primary's binary log, from its start (the `shop` database cluster.sh created is in it too).
echo "== GTID replication: each primary to its $replicas_per replicas"
for ((i = 0; i < shard_count; i++)); do
    for ((j = 1; j <= replicas_per; j++)); do
        r=$(replica_node "$i" "$j")
        node_sql "$r" "STOP SLAVE; RESET SLAVE ALL; RESET MASTER; SET GLOBAL gtid_slave_pos = '';
            CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$((base_port + i)), MASTER_USER='root',
                MASTER_PASSWORD='root', MASTER_CONNECT_RETRY=1, MASTER_USE_GTID=slave_pos;
            SET GLOBAL read_only = 1; START SLAVE;"
    done
done
for ((i = 0; i < shard_count; i++)); do
    for ((j = 1; j <= replicas_per; j++)); do
        r=$(replica_node "$i" "$j")
        deadline=$((SECONDS + 30))
        until [[ $(slave_field "$r" Slave_IO_Running) == Yes && $(slave_field "$r" Slave_SQL_Running) == Yes ]]; do
            ((SECONDS < deadline)) || die "ds$i/r$j (port $((base_port + r))) is not replicating after 30s:" \
                "$(slave_field "$r" Last_IO_Error) $(slave_field "$r" Last_SQL_Error)"
            sleep 0.2
        done
        echo "ds$i/r$j: 127.0.0.1:$((base_port + r)) replicating from 127.0.0.1:$((base_port + i))"
    done
done

# The rules: sbtest1.. hash_slot on id over ds0-ds1 (bench_shard_rules), the admin interface;
# the replicas phase's rules are the same with each node's replicas and a [replicas] section.
sharded=()
for ((t = 1; t <= tables; t++)); do
    sharded+=("sbtest$t:id")
done
admin_section="
[admin]
listen = \"127.0.0.1:$admin_port\"
users = [{ name = \"ops\", password = \"ops\" }]"
{
    bench_shard_rules "$shard_count" "$base_port" "$proxy_port" "$metrics_port" "${sharded[@]}"
    echo "$admin_section"
} >"$work/rules-none.toml"
node_lines=()
for ((i = 0; i < shard_count; i++)); do
    urls=""
    for ((j = 1; j <= replicas_per; j++)); do
        urls+="${urls:+, }\"mysql://root:root@127.0.0.1:$((base_port + $(replica_node "$i" "$j")))/shop\""
    done
    node_lines+=(-e "s|^ds$i = \"\(.*\)\"\$|ds$i = { url = \"\1\", replicas = [$urls] }|")
done
{
    bench_shard_rules "$shard_count" "$base_port" "$proxy_port" "$metrics_port" "${sharded[@]}" |
        sed "${node_lines[@]}"
    echo "$admin_section"
    cat <<RULES

[replicas]
max_lag_ms = 1000
policy = "$policy"
consistency = "read_your_writes"
check_ms = 200
RULES
} >"$work/rules-replicas.toml"
grep -q 'replicas = \[' "$work/rules-replicas.toml" || die "no replicas in $work/rules-replicas.toml"

# --auto-inc=off: sysbench inserts explicit ids; with AUTO_INCREMENT its INSERTs would not
# name the shard key. --skip-trx: no BEGIN / COMMIT around an event's statements.
sb() {
    sysbench oltp_read_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$proxy_port" \
        --mysql-user=app --mysql-password=app --mysql-db=shop --tables="$tables" \
        --table-size="$table_size" --auto-inc=off "$@"
}

bench_start_proxy "$bin" "$proxy_port" app app "$work/rules-none.toml"

echo "== prepare through the proxy: $tables table(s) of $table_size rows"
sb prepare || die "sysbench prepare through the proxy failed (see the output above)"

# Each primary holds only rows of its own slots, the two every row once; each replica its
# primary's rows, once it has applied all its primary logged.
readonly slots_per_shard=$((1024 / shard_count))
for ((t = 1; t <= tables; t++)); do
    total=0
    for ((i = 0; i < shard_count; i++)); do
        lo=$((i * slots_per_shard))
        hi=$((lo + slots_per_shard - 1))
        read -r rows misplaced < <(node_sql "$i" \
            "SELECT COUNT(*), COALESCE(SUM(CRC32(id) % 1024 NOT BETWEEN $lo AND $hi), 0) FROM sbtest$t")
        [[ $rows =~ ^[0-9]+$ && $misplaced =~ ^[0-9]+$ ]] || die "unexpected answer from ds$i"
        ((misplaced == 0)) || die "ds$i holds $misplaced rows of sbtest$t of other nodes' slots"
        total=$((total + rows))
    done
    ((total == table_size)) || die "the primaries hold $total rows of sbtest$t, expected $table_size"
done
for ((i = 0; i < shard_count; i++)); do
    pos=$(node_sql "$i" 'SELECT @@gtid_binlog_pos')
    for ((j = 1; j <= replicas_per; j++)); do
        r=$(replica_node "$i" "$j")
        caught=$(node_sql "$r" "SELECT MASTER_GTID_WAIT('$pos', 120)")
        [[ $caught == 0 ]] || die "ds$i/r$j did not reach its primary's position $pos within 120s" \
            "(slave pos $(node_sql "$r" 'SELECT @@gtid_slave_pos'))"
        line=""
        for ((t = 1; t <= tables; t++)); do
            want=$(node_sql "$i" "SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT(id, c, pad, k))), 0) FROM sbtest$t")
            got=$(node_sql "$r" "SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT(id, c, pad, k))), 0) FROM sbtest$t")
            [[ $got == "$want" ]] || die "ds$i/r$j's sbtest$t is '$got' (rows, checksum), its primary's '$want'"
            line+=" sbtest$t ${got%%$'\t'*} rows"
        done
        echo "ds$i/r$j: at $pos, as its primary:$line"
    done
done

hz=$(getconf CLK_TCK)
readonly hz
ncpu=$(nproc)
readonly ncpu
primary_pids=()
replica_pids=()
for ((n = 0; n < node_count; n++)); do
    if ((n < shard_count)); then
        primary_pids+=("$(<"$work/node$n.pid")")
    else
        replica_pids+=("$(<"$work/node$n.pid")")
    fi
done

# Prints the share of the machine (all CPUs) TICKS clock ticks are over SECONDS.
machine_pct() {
    awk -v t="$1" -v hz="$hz" -v n="$ncpu" -v s="$2" 'BEGIN { v = (s > 0 ? 100 * t / (hz * n * s) : 0); printf "%.0f%%", (v < 0 ? 0 : v) }'
}

# Prints A / B with two decimals.
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'
}

# Prints each node's Com_select so far, space-separated, node 0 first.
selects() {
    local n out=""
    for ((n = 0; n < node_count; n++)); do
        out+="${out:+ }$(node_sql "$n" "SHOW GLOBAL STATUS LIKE 'Com_select'" | cut -f2)"
    done
    echo "$out"
}

# Prints metric NAME's samples as LABEL=VALUE lines (LABEL the value of its one label).
metric() {
    curl -s "http://127.0.0.1:$metrics_port/metrics" |
        sed -n "s/^$1{[a-z_]*=\"\([^\"]*\)\"} \([0-9.e+]*\)\$/\1=\2/p"
}

# SHOW NODES' replica rows: node, health, replication, lag_ms, reads (tab-separated).
replica_rows() {
    mariadb -h127.0.0.1 -P"$admin_port" -uops -pops -N -B -e 'SHOW NODES' |
        awk -F'\t' '$1 ~ /\/r[0-9]+$/ { print $1 "\t" $3 "\t" $8 "\t" $9 "\t" $10 }'
}

declare -A res
# run_phase PHASE: the proxy on PHASE's rules (already running for the first), a warm-up,
# then TIME seconds of sysbench, measured. Sets res[PHASE.*].
run_phase() {
    local phase=$1 out=$work/run-$1.txt s0 s1 m0 m1 c0 c1 p0 p1 r0 r1 x0 x1 a0 a1 t0 t1 secs
    local -a before after
    if [[ -z $proxy_pid ]]; then
        bench_start_proxy "$bin" "$proxy_port" app app "$work/rules-$phase.toml"
    fi
    if [[ $phase == replicas ]]; then
        # Every replica in rotation (checked, in sync) before the load starts.
        local deadline=$((SECONDS + 30)) up
        while :; do
            up=$(replica_rows | awk -F'\t' '$2 == "up"' | wc -l)
            ((up == shard_count * replicas_per)) && break
            ((SECONDS < deadline)) || die "only $up replicas in rotation after 30s: $(replica_rows)"
            sleep 0.2
        done
    fi
    if ((warmup > 0)); then
        sb --skip-trx=on --threads="$threads" --time="$warmup" --report-interval=0 \
            --mysql-ignore-errors=all run >"$work/warmup-$phase.txt" 2>&1 ||
            die "sysbench warm-up of $phase failed: $(tail -n 5 "$work/warmup-$phase.txt")"
    fi
    declare -A reads0=()
    local line
    while IFS= read -r line; do
        [[ -n $line ]] && reads0[${line%%=*}]=${line#*=}
    done < <(metric shardproxy_replica_reads_total)
    read -ra before <<<"$(selects)"
    x0=$(metric shardproxy_replica_declined_total | awk -F= '{ s += $2 } END { print s + 0 }')
    a0=$(grep -cE ' (WARN|ERROR) ' "$work/proxy.log" || true)
    s0=$(cpu_ticks "$proxy_pid")
    p0=$(cpu_ticks "${primary_pids[@]}")
    r0=$(cpu_ticks "${replica_pids[@]}")
    m0=$(machine_busy_ticks)
    c0=$(children_ticks)
    t0=$EPOCHREALTIME
    if ! sb --skip-trx=on --threads="$threads" --time="$duration" --report-interval=0 \
        --mysql-ignore-errors=all run >"$out" 2>&1; then
        tail -n 20 "$out" >&2
        die "sysbench run of phase $phase failed"
    fi
    t1=$EPOCHREALTIME
    m1=$(machine_busy_ticks)
    c1=$(children_ticks)
    r1=$(cpu_ticks "${replica_pids[@]}")
    p1=$(cpu_ticks "${primary_pids[@]}")
    s1=$(cpu_ticks "$proxy_pid")
    read -ra after <<<"$(selects)"
    x1=$(metric shardproxy_replica_declined_total | awk -F= '{ s += $2 } END { print s + 0 }')
    a1=$(grep -cE ' (WARN|ERROR) ' "$work/proxy.log" || true)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
    res[$phase.qps]=$(sb_field "$out" qps)
    res[$phase.queries]=$(sb_field "$out" queries)
    res[$phase.avg]=$(sb_field "$out" avg_ms)
    res[$phase.p95]=$(sb_field "$out" p95_ms)
    res[$phase.errors]=$(sb_field "$out" errors)
    res[$phase.reconnects]=$(sb_field "$out" reconnects)
    res[$phase.log]=$((a1 - a0))
    res[$phase.declined]=$(awk -v a="$x0" -v b="$x1" 'BEGIN { print b - a }')
    res[$phase.cpu]="proxy $(machine_pct $((s1 - s0)) "$secs"), primaries $(machine_pct $((p1 - p0)) "$secs"),"
    res[$phase.cpu]+=" replicas $(machine_pct $((r1 - r0)) "$secs"), sysbench $(machine_pct $((c1 - c0)) "$secs"),"
    res[$phase.others]=$(machine_pct $((m1 - m0 - (s1 - s0) - (p1 - p0) - (r1 - r0) - (c1 - c0))) "$secs")
    res[$phase.cpu]+=" others ${res[$phase.others]}"
    local n i j sel=""
    for ((n = 0; n < node_count; n++)); do
        if ((n < shard_count)); then
            sel+="${sel:+ }ds$n=$((after[n] - before[n]))"
        else
            i=$(((n - shard_count) / replicas_per))
            j=$(((n - shard_count) % replicas_per + 1))
            sel+=" ds$i/r$j=$((after[n] - before[n]))"
        fi
    done
    res[$phase.selects]=$sel
    local reads="" name
    while IFS= read -r line; do
        [[ -n $line ]] || continue
        name=${line%%=*}
        reads+="${reads:+,}$name:$(awk -v a="${reads0[$name]:-0}" -v b="${line#*=}" 'BEGIN { printf "%d", b - a }')"
    done < <(metric shardproxy_replica_reads_total | sort)
    res[$phase.reads]=${reads:--}
    if [[ $phase == replicas ]]; then
        res[$phase.nodes]=$(replica_rows)
        res[$phase.why]=$(metric shardproxy_replica_declined_total | tr '\n' ' ')
    fi
    printf '%-9s %10s %8s %8s %7s %10s %9s %7s\n' "$phase" "${res[$phase.qps]}" "${res[$phase.avg]}" \
        "${res[$phase.p95]}" "${res[$phase.errors]}" "${res[$phase.reconnects]}" "${res[$phase.log]}" \
        "${res[$phase.others]}"
    bench_stop_proxy
    mv "$work/proxy.log" "$work/proxy-$phase.log"
}

idle_before=$(cpu_idle_pct)
echo "== measuring (CPU ${idle_before}% idle over the last 2 s): oltp_read_only --skip-trx," \
    "$threads threads, ${warmup}s warm-up and ${duration}s per phase"
echo "(others, below: CPU used by processes outside the bench during a phase, in % of the machine)"
printf '%-9s %10s %8s %8s %7s %10s %9s %7s\n' phase QPS avg_ms p95_ms errors reconnects log_warn others
for phase in "${phases[@]}"; do
    run_phase "$phase"
done

machine="$(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
bench_cleanup

echo
echo "date=$(date +%F) machine=\"$machine\" commit=$commit threads=$threads tables=$tables" \
    "table_size=$table_size time=${duration}s warmup=${warmup}s policy=$policy cpu_idle_before=${idle_before}%"
for phase in "${phases[@]}"; do
    echo "$phase: ${res[$phase.qps]} QPS (${res[$phase.queries]} queries), avg ${res[$phase.avg]} ms," \
        "p95 ${res[$phase.p95]} ms, errors ${res[$phase.errors]}, reconnects ${res[$phase.reconnects]}," \
        "proxy log WARN/ERROR lines ${res[$phase.log]}"
    echo "  CPU (of the machine): ${res[$phase.cpu]}"
    echo "  SELECTs per server (Com_select): ${res[$phase.selects]}"
done
echo "  reads per replica (shardproxy_replica_reads_total): ${res[replicas.reads]//,/ }"
echo "  kept on the primary (shardproxy_replica_declined_total): ${res[replicas.declined]}" \
    "(since start: ${res[replicas.why]:-none})"
echo "  SHOW NODES at the end (node, health, replication, lag_ms, reads):"
while IFS= read -r line; do
    echo "    $line"
done <<<"${res[replicas.nodes]}"

errors=$((${res[none.errors]} + ${res[replicas.errors]}))
echo "none_qps=${res[none.qps]} replicas_qps=${res[replicas.qps]}" \
    "replicas_vs_none=$(ratio "${res[replicas.qps]}" "${res[none.qps]}") errors=$errors" \
    "replica_reads=${res[replicas.reads]} declined=${res[replicas.declined]}"
((errors == 0)) || die "sysbench met $errors errors (ignored and counted)"
unread=0
for ((i = 0; i < shard_count; i++)); do
    for ((j = 1; j <= replicas_per; j++)); do
        [[ ,${res[replicas.reads]}, =~ ,ds$i/r$j:[1-9][0-9]*, ]] || unread=$((unread + 1))
    done
done
((unread == 0)) || die "$unread replica(s) served no read"
