#!/usr/bin/env bash
# Merged fan-out SELECTs: one MariaDB node holding every row directly vs. the proxy over four
# shard nodes (ordered merge, ordered merge with a deep OFFSET, full ordered scan, GROUP BY);
# and the relay of one node's big answer (a `single` table read whole: nothing to merge).
#
#   bench/merge.sh
#
# Environment: ROWS (default 1000000), RUNS timed runs per query and target, the median is
# reported (default 3), BUFFER_POOL InnoDB buffer pool of every node (default 256M, so that the
# direct node's whole table is cached like the shards' are), BIN a shardproxy binary to
# measure instead of building this checkout (to compare commits), CARGO_TARGET_DIR honoured.
# Ports: shard nodes 3511-3514, direct node 3515, proxy 3517. Everything started here is
# stopped and removed on exit. The last line of output is
#   orderby_limit20_ratio=R scan_rows_per_s_proxy=N scan_rows_per_s_direct=N peak_rss_mib=M deep_offset_rows_read=N relay_ratio=R relay_proxy_cpu_s=S
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
readonly rows=${ROWS:-1000000}
readonly runs=${RUNS:-3}
readonly buffer_pool=${BUFFER_POOL:-256M}
readonly base_port=3511
readonly shard_count=4
readonly direct_port=$((base_port + shard_count))
readonly proxy_port=3517
readonly page=20

die() {
    echo "merge.sh: $*" >&2
    exit 1
}

for v in rows runs; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
[[ $buffer_pool =~ ^[1-9][0-9]*[KMG]?$ ]] || die "BUFFER_POOL must look like 256M, got '$buffer_pool'"
((rows >= 2 * page)) || die "ROWS must be at least $((2 * page)), got $rows"
# The deep page is LIMIT 100000, 20; with fewer rows (a quick trial run), the middle page.
deep_offset=100000
if ((rows < deep_offset + page)); then
    deep_offset=$((rows / 2))
fi
readonly deep_offset

bench_traps

command -v mariadb >/dev/null 2>&1 || install_packages mariadb-server mariadb-client
command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"

bench_proxy_binary

work=$(mktemp -d /tmp/shardproxy-merge.XXXXXX)

echo "== starting $shard_count shard nodes and 1 direct node in $work"
"$repo/scripts/cluster.sh" start "$work" "$((shard_count + 1))" "$base_port"

# Runs SQL on node port $1 as root, in database shop, tab-separated without column names.
node_sql() {
    local port=$1
    shift
    mariadb -h127.0.0.1 -P"$port" -uroot -proot --batch --skip-column-names shop -e "$*"
}

# Runs SQL through the proxy.
proxy_sql() {
    mariadb -h127.0.0.1 -P"$proxy_port" -uapp -papp --batch --skip-column-names shop -e "$*"
}

# cluster.sh gives each node a 32M buffer pool: the direct node's 1M-row table would not fit
# and, with O_DIRECT, every scan of it would read the disk while the four smaller shards stay
# cached. Give every node the same, larger pool (resized online).
for ((i = 0; i <= shard_count; i++)); do
    node_sql $((base_port + i)) "SET GLOBAL innodb_buffer_pool_size = $(numfmt --from=iec "$buffer_pool")"
done

# t_big sharded on id over the four shard nodes, 256 slots each. The row cap of a merge is set
# at least to ROWS: the full ordered scan reads every row from the nodes.
max_rows=$((rows > 1000000 ? rows : 1000000))
{
    echo 'version = 1'
    echo 'default_node = "ds0"'
    echo
    echo '[server]'
    echo "listen = \"127.0.0.1:$proxy_port\""
    echo 'users = [{ name = "app", password = "app" }]'
    echo "max_rows_per_statement = $max_rows"
    echo
    echo '[nodes]'
    for ((i = 0; i < shard_count; i++)); do
        echo "ds$i = \"mysql://root:root@127.0.0.1:$((base_port + i))/shop\""
    done
    echo
    echo '[tables.t_big]'
    echo 'rule = "hash_slot"'
    echo 'column = "id"'
    slots=""
    for ((i = 0; i < shard_count; i++)); do
        slots+="${slots:+, }{ slots = \"$((i * 256))-$((i * 256 + 255))\", node = \"ds$i\" }"
    done
    echo "slots = [$slots]"
    echo
    echo '[tables.t_one]'
    echo 'rule = "single"'
    echo 'node = "ds0"'
} >"$work/rules.toml"

bench_start_proxy "$bin" "$proxy_port" app app

create='CREATE TABLE t_big (id BIGINT PRIMARY KEY, k INT NOT NULL, v VARCHAR(32) NOT NULL, KEY(k))'
echo "== creating t_big through the proxy (all 4 shard nodes) and on the direct node"
proxy_sql "$create" || die "CREATE TABLE through the proxy failed"
node_sql "$direct_port" "$create"

# Each shard node generates its own rows with the Sequence engine (seq_1_to_N) and keeps those
# of its slots; the direct node gets all of them. k = id % 1000: 1000 groups of ROWS/1000 rows.
gen="SELECT seq, seq % 1000, CONCAT('v', seq) FROM seq_1_to_$rows"
echo "== loading $rows rows: each shard node its own slots, the direct node all of them"
load_start=$(date +%s.%N)
load_pids=()
for ((i = 0; i < shard_count; i++)); do
    node_sql $((base_port + i)) "INSERT INTO t_big $gen WHERE (CRC32(seq) % 1024) DIV 256 = $i; ANALYZE TABLE t_big" >/dev/null &
    load_pids+=($!)
done
node_sql "$direct_port" "INSERT INTO t_big $gen; ANALYZE TABLE t_big" >/dev/null &
load_pids+=($!)
for p in "${load_pids[@]}"; do
    wait "$p" || die "loading t_big failed (see the error above)"
done
load_end=$(date +%s.%N)
printf 'loaded in %.1f s\n' "$(awk -v a="$load_start" -v b="$load_end" 'BEGIN { print b - a }')"
# t_one: the same rows as one `single` table on ds0 (and on the direct node, to compare).
one="CREATE TABLE t_one (id BIGINT PRIMARY KEY, k INT NOT NULL, v VARCHAR(32) NOT NULL); INSERT INTO t_one $gen"
node_sql "$base_port" "$one" &
one_pid=$!
node_sql "$direct_port" "$one"
wait "$one_pid" || die "loading t_one failed"
# Write the loaded pages out now, so that background flushing does not run during the queries.
for ((i = 0; i <= shard_count; i++)); do
    node_sql $((base_port + i)) 'FLUSH TABLES t_big FOR EXPORT; UNLOCK TABLES'
done
node_sql "$base_port" 'FLUSH TABLES t_one FOR EXPORT; UNLOCK TABLES'
node_sql "$direct_port" 'FLUSH TABLES t_one FOR EXPORT; UNLOCK TABLES'

# Check the data: every shard holds only rows of its own slots, the shards together hold
# ROWS rows, the proxy counts ROWS, the direct node holds ROWS.
total=0
deep_expected=0
for ((i = 0; i < shard_count; i++)); do
    port=$((base_port + i))
    counts=$(node_sql "$port" \
        "SELECT COUNT(*), COALESCE(SUM((CRC32(id) % 1024) DIV 256 <> $i), 0) FROM t_big")
    read -r n misplaced <<<"$counts"
    [[ $n =~ ^[0-9]+$ && $misplaced =~ ^[0-9]+$ ]] || die "unexpected answer from shard ds$i: '$counts'"
    echo "shard ds$i (port $port, slots $((i * 256))-$((i * 256 + 255))): $n rows, $misplaced misplaced"
    ((misplaced == 0)) || die "shard ds$i holds $misplaced rows of other shards' slots"
    total=$((total + n))
    deep_expected=$((deep_expected + (n < deep_offset + page ? n : deep_offset + page)))
done
((total == rows)) || die "the shard nodes hold $total rows in all, expected $rows"
proxy_count=$(proxy_sql 'SELECT COUNT(*) FROM t_big') || die "SELECT COUNT(*) through the proxy failed"
((proxy_count == rows)) || die "SELECT COUNT(*) through the proxy says $proxy_count, expected $rows"
direct_count=$(node_sql "$direct_port" 'SELECT COUNT(*) FROM t_big')
((direct_count == rows)) || die "the direct node holds $direct_count rows, expected $rows"
echo "SELECT COUNT(*) FROM t_big: $proxy_count through the proxy, $direct_count on the direct node"

q_limit="SELECT id, k, v FROM t_big ORDER BY k, id LIMIT $page"
q_scan="SELECT id, k, v FROM t_big ORDER BY k, id"
q_deep="SELECT id, k, v FROM t_big ORDER BY k, id LIMIT $deep_offset, $page"
q_group="SELECT k, COUNT(*), SUM(id) FROM t_big GROUP BY k"
q_relay="SELECT id, k, v FROM t_one ORDER BY id"

echo "== query plans (EXPLAIN) on the direct node and on shard ds0"
for q in "$q_limit" "$q_scan" "$q_deep" "$q_group"; do
    echo "$q"
    node_sql "$direct_port" "EXPLAIN $q" | sed 's/^/  direct: /'
    node_sql "$base_port" "EXPLAIN $q" | sed 's/^/  ds0:    /'
done

# The mariadb client for each target. --quick streams rows instead of buffering the whole
# result in the client, for both targets alike.
# shellcheck disable=SC2034 # used through the nameref in run_once
client_proxy=(mariadb -h127.0.0.1 -P"$proxy_port" -uapp -papp --batch --skip-column-names --quick shop)
# shellcheck disable=SC2034
client_direct=(mariadb -h127.0.0.1 -P"$direct_port" -uroot -proot --batch --skip-column-names --quick shop)

# run_once TARGET SQL OUT: runs SQL on TARGET ("proxy" or "direct") writing its rows to OUT,
# prints the wall time in seconds.
run_once() {
    local target=$1 sql=$2 out=$3 t0 t1
    local -n cmd=client_$target
    t0=$(date +%s.%N)
    "${cmd[@]}" -e "$sql" >"$out" || die "$target: '$sql' failed"
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }'
}

# median of the numbers given as arguments.
median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
        if (NR % 2) printf "%.4f", v[(NR + 1) / 2]; else printf "%.4f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# status_sum NAME PORT...: global status variable NAME summed over the nodes on PORT...
status_sum() {
    local name=$1 port sum=0 v
    shift
    for port in "$@"; do
        v=$(node_sql "$port" "SHOW GLOBAL STATUS LIKE '$name'" | awk '{ print $2 }')
        [[ $v =~ ^[0-9]+$ ]] || die "no status $name on port $port"
        sum=$((sum + v))
    done
    echo "$sum"
}

shard_ports=()
for ((i = 0; i < shard_count; i++)); do
    shard_ports+=($((base_port + i)))
done

# status_overhead NAME PORT...: what a SHOW GLOBAL STATUS adds to NAME itself.
status_overhead() {
    local name=$1 a b
    shift
    a=$(status_sum "$name" "$@")
    b=$(status_sum "$name" "$@")
    echo $((b - a))
}

proxy_vm() {
    awk -v k="$1:" '$1 == k { print $2 }' "/proc/$proxy_pid/status"
}
proxy_cpu_ticks() {
    local stat
    stat=$(<"/proc/$proxy_pid/stat")
    stat=${stat##*) }
    awk '{ print $12 + $13 }' <<<"$stat"
}

declare -A med expect_lines
expect_lines[limit]=$page
expect_lines[scan]=$rows
expect_lines[deep]=$page
expect_lines[group]=1000
expect_lines[relay]=$rows
if ((rows < 1000)); then expect_lines[group]=$rows; fi

# measure NAME SQL: one untimed run per target whose output is checked (line count, and the
# proxy's rows equal the direct node's rows), then RUNS timed runs alternating direct and
# proxy, output to /dev/null. Sets med[NAME.direct], med[NAME.proxy].
measure() {
    local name=$1 sql=$2 target n r sum_d sum_p
    local -a times_direct=() times_proxy=()
    for target in direct proxy; do
        run_once "$target" "$sql" "$work/$name.$target.out" >/dev/null
        n=$(wc -l <"$work/$name.$target.out")
        ((n == expect_lines[$name])) || die "$name: $target returned $n rows, expected ${expect_lines[$name]}"
    done
    if [[ $name == group ]]; then
        # One MariaDB returns groups sorted by k; the order of merged groups is not specified.
        sum_d=$(sort "$work/$name.direct.out" | md5sum)
        sum_p=$(sort "$work/$name.proxy.out" | md5sum)
    else
        sum_d=$(md5sum <"$work/$name.direct.out")
        sum_p=$(md5sum <"$work/$name.proxy.out")
    fi
    [[ $sum_d == "$sum_p" ]] || die "$name: the proxy's rows differ from the direct node's (see $work/$name.*.out)"
    rm -f "$work/$name.direct.out" "$work/$name.proxy.out"
    for ((r = 0; r < runs; r++)); do
        times_direct+=("$(run_once direct "$sql" /dev/null)")
        times_proxy+=("$(run_once proxy "$sql" /dev/null)")
    done
    med[$name.direct]=$(median "${times_direct[@]}")
    med[$name.proxy]=$(median "${times_proxy[@]}")
    printf '%-6s direct: %s s   proxy: %s s   (median of %d)\n' "$name" \
        "${times_direct[*]}" "${times_proxy[*]}" "$runs"
}

idle_before=$(cpu_idle_pct)
echo "== measuring (CPU ${idle_before}% idle over the last 2 s): 1 checked run, then $runs timed runs per query and target"
rss_before=$(proxy_vm VmRSS)
hwm_before=$(proxy_vm VmHWM)
measure limit "$q_limit"

# Peak RSS during the full scan: reset the proxy's high-water mark (writing 5 to clear_refs),
# so that VmHWM afterwards is the peak of the scan alone.
hwm_reset=yes
echo 5 >"/proc/$proxy_pid/clear_refs" 2>/dev/null || hwm_reset=no
rss_scan_before=$(proxy_vm VmRSS)
cpu0=$(proxy_cpu_ticks)
measure scan "$q_scan"
cpu1=$(proxy_cpu_ticks)
hwm_scan=$(proxy_vm VmHWM)
proxy_cpu_per_scan=$(awk -v t=$((cpu1 - cpu0)) -v hz="$(getconf CLK_TCK)" -v n=$((runs + 1)) \
    'BEGIN { printf "%.2f", t / hz / n }')

# Rows the nodes send for the deep OFFSET: Rows_sent (and Rows_read) summed over the shard
# nodes around one run through the proxy, and on the direct node around one run there. Each
# client session also costs the nodes a row or so of its own (the proxy's backend connection
# set-up, the CLI's start-up query): that is measured with a query that returns no rows and
# subtracted.
# rows_moved TARGET SQL: prints "SENT READ", the change of Rows_sent and Rows_read on the
# target's nodes while SQL runs once on TARGET.
rows_moved() {
    local target=$1 sql=$2 s0 s1 r0 r1 ov_sent ov_read
    local -a ports=("$direct_port")
    [[ $target == proxy ]] && ports=("${shard_ports[@]}")
    # A SHOW GLOBAL STATUS counts its own row: measure that with nothing in between.
    ov_sent=$(status_overhead Rows_sent "${ports[@]}")
    ov_read=$(status_overhead Rows_read "${ports[@]}")
    s0=$(status_sum Rows_sent "${ports[@]}")
    r0=$(status_sum Rows_read "${ports[@]}")
    run_once "$target" "$sql" /dev/null >/dev/null
    s1=$(status_sum Rows_sent "${ports[@]}")
    r1=$(status_sum Rows_read "${ports[@]}")
    echo "$((s1 - s0 - ov_sent)) $((r1 - r0 - ov_read))"
}
q_none="SELECT id, k, v FROM t_big WHERE k < 0"
read -r base_sent base_read <<<"$(rows_moved proxy "$q_none")"
read -r deep_sent_shards deep_read_shards <<<"$(rows_moved proxy "$q_deep")"
deep_sent_shards=$((deep_sent_shards - base_sent))
deep_read_shards=$((deep_read_shards - base_read))
read -r base_sent_d base_read_d <<<"$(rows_moved direct "$q_none")"
read -r deep_sent_direct deep_read_direct <<<"$(rows_moved direct "$q_deep")"
deep_sent_direct=$((deep_sent_direct - base_sent_d))
deep_read_direct=$((deep_read_direct - base_read_d))
echo "session overhead subtracted: $base_sent rows sent / $base_read read by the shard nodes per proxy session, $base_sent_d / $base_read_d by the direct node per CLI session"
measure deep "$q_deep"
measure group "$q_group"
cpu0=$(proxy_cpu_ticks)
measure relay "$q_relay"
cpu1=$(proxy_cpu_ticks)
proxy_cpu_per_relay=$(awk -v t=$((cpu1 - cpu0)) -v hz="$(getconf CLK_TCK)" -v n=$((runs + 1)) \
    'BEGIN { printf "%.2f", t / hz / n }')
rss_after=$(proxy_vm VmRSS)
hwm_after=$(proxy_vm VmHWM)

ratio() {
    awk -v p="$1" -v d="$2" 'BEGIN { printf "%.2f", (d > 0 ? p / d : 0) }'
}
kib_to_mib() {
    awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'
}
scan_rps_proxy=$(awk -v n="$rows" -v s="${med[scan.proxy]}" 'BEGIN { printf "%.0f", n / s }')
scan_rps_direct=$(awk -v n="$rows" -v s="${med[scan.direct]}" 'BEGIN { printf "%.0f", n / s }')
peak_rss_mib=$(kib_to_mib "$hwm_scan")
machine="$(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"

bench_cleanup
echo
echo "date=$(date +%F) machine=\"$machine\" rows=$rows runs=$runs buffer_pool=$buffer_pool cpu_idle_before=${idle_before}%"
printf '%-58s %10s %10s %6s\n' "query (wall time, median of $runs, mariadb CLI)" "direct s" "proxy s" "ratio"
for name in limit scan deep group relay; do
    case $name in
    limit) q=$q_limit ;;
    scan) q=$q_scan ;;
    deep) q=$q_deep ;;
    group) q=$q_group ;;
    relay) q=$q_relay ;;
    esac
    printf '%-58s %10s %10s %6s\n' "${q#SELECT }" "${med[$name.direct]}" "${med[$name.proxy]}" \
        "$(ratio "${med[$name.proxy]}" "${med[$name.direct]}")"
done
echo "full ordered scan: $scan_rps_direct rows/s direct, $scan_rps_proxy rows/s through the proxy; proxy CPU ${proxy_cpu_per_scan} s per scan"
echo "relay of one node's $rows rows (t_one, single): proxy CPU ${proxy_cpu_per_relay} s per read"
echo "proxy memory: VmRSS $(kib_to_mib "$rss_before") MiB before the queries (VmHWM $(kib_to_mib "$hwm_before")), $(kib_to_mib "$rss_scan_before") MiB before the scans; peak during the scans $peak_rss_mib MiB (high-water mark reset: $hwm_reset); VmRSS $(kib_to_mib "$rss_after") MiB and VmHWM $(kib_to_mib "$hwm_after") MiB at the end"
deep_check=as-expected
((deep_sent_shards == deep_expected)) || deep_check=UNEXPECTED
echo "deep OFFSET $deep_offset LIMIT $page: shard nodes sent $deep_sent_shards rows ($deep_check: $deep_expected, LIMIT $((deep_offset + page)) on each) and read $deep_read_shards; the direct node sent $deep_sent_direct and read $deep_read_direct"
echo "orderby_limit20_ratio=$(ratio "${med[limit.proxy]}" "${med[limit.direct]}") scan_rows_per_s_proxy=$scan_rps_proxy scan_rows_per_s_direct=$scan_rps_direct peak_rss_mib=$peak_rss_mib deep_offset_rows_read=$deep_sent_shards relay_ratio=$(ratio "${med[relay.proxy]}" "${med[relay.direct]}") relay_proxy_cpu_s=$proxy_cpu_per_relay"
