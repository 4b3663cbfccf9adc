#!/usr/bin/env bash
# sysbench oltp_point_select: one MariaDB node directly vs. the proxy over four shard nodes.
#
#   bench/point_select.sh
#
# Environment: TABLE_SIZE (default 100000), THREADS (default 8), TIME in seconds (default 30).
# Ports: shard nodes 3411-3414, direct node 3415, proxy 3417. Everything started here is
# stopped and removed on exit. The last line of output is
#   direct_qps=N proxy_qps=N ratio=R
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
readonly table_size=${TABLE_SIZE:-100000}
readonly threads=${THREADS:-8}
readonly duration=${TIME:-30}
readonly base_port=3411
readonly shard_count=4
readonly direct_port=$((base_port + shard_count))
readonly proxy_port=3417

die() {
    echo "point_select.sh: $*" >&2
    exit 1
}

for v in table_size threads duration; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done

bench_traps


command -v sysbench >/dev/null 2>&1 || install_packages sysbench
command -v mariadb >/dev/null 2>&1 || install_packages mariadb-server mariadb-client
command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"

echo "== building shardproxy (release): about 14 minutes on a fresh 2-core machine, seconds once built"
(cd "$repo" && cargo build --release)
bin=$repo/target/release/shardproxy
[[ -x $bin ]] || die "$bin not found after the build"

work=$(mktemp -d /tmp/shardproxy-bench.XXXXXX)

echo "== starting $shard_count shard nodes and 1 direct node in $work"
"$repo/scripts/cluster.sh" start "$work" "$((shard_count + 1))" "$base_port"

# sbtest1 sharded on id over the four shard nodes, 256 slots each.
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
        echo "ds$i = \"mysql://root:root@127.0.0.1:$((base_port + i))/shop\""
    done
    echo
    echo '[tables.sbtest1]'
    echo 'rule = "hash_slot"'
    echo 'column = "id"'
    slots=""
    for ((i = 0; i < shard_count; i++)); do
        slots+="${slots:+, }{ slots = \"$((i * 256))-$((i * 256 + 255))\", node = \"ds$i\" }"
    done
    echo "slots = [$slots]"
} >"$work/rules.toml"

bench_start_proxy "$bin" "$proxy_port" sbtest sbtest

# --auto-inc=off: sysbench then inserts explicit ids; with AUTO_INCREMENT its INSERTs would
# not name the shard key. The same table definition is used on the direct node.
sb_common=(oltp_point_select --db-driver=mysql --mysql-host=127.0.0.1 --mysql-db=shop
    --tables=1 --table-size="$table_size" --auto-inc=off)
sb_direct=(--mysql-port="$direct_port" --mysql-user=root --mysql-password=root)
sb_proxy=(--mysql-port="$proxy_port" --mysql-user=sbtest --mysql-password=sbtest)

echo "== prepare: direct node (127.0.0.1:$direct_port)"
sysbench "${sb_common[@]}" "${sb_direct[@]}" prepare

echo "== prepare: through the proxy (127.0.0.1:$proxy_port)"
if ! sysbench "${sb_common[@]}" "${sb_proxy[@]}" prepare; then
    die "sysbench prepare through the proxy failed (see the output above)"
fi

# Check the proxy's split on the shard nodes themselves: together they hold every row once,
# and each holds only rows of its own slots.
total=0
for ((i = 0; i < shard_count; i++)); do
    port=$((base_port + i))
    lo=$((i * 256))
    hi=$((i * 256 + 255))
    counts=$(mariadb -h127.0.0.1 -P"$port" -uroot -proot -N -B shop -e \
        "SELECT COUNT(*), COALESCE(SUM(CRC32(id) % 1024 NOT BETWEEN $lo AND $hi), 0) FROM sbtest1")
    read -r rows misplaced <<<"$counts"
    [[ $rows =~ ^[0-9]+$ && $misplaced =~ ^[0-9]+$ ]] || die "unexpected answer from shard ds$i: '$counts'"
    echo "shard ds$i (port $port, slots $lo-$hi): $rows rows, $misplaced misplaced"
    ((misplaced == 0)) || die "shard ds$i holds $misplaced rows of other shards' slots"
    total=$((total + rows))
done
((total == table_size)) || die "the shard nodes hold $total rows in all, expected $table_size"

# Prints the "queries: N (Q per sec.)" figure Q of a sysbench run's output file.
qps_of() {
    local q
    q=$(sed -n 's/^ *queries: *[0-9]* *(\([0-9.]*\) per sec\.)$/\1/p' "$1")
    [[ -n $q ]] || die "no 'queries:' line in $1"
    echo "$q"
}

sb_run=(--threads="$threads" --time="$duration" --report-interval=0 run)

echo "== run: direct node, $threads threads, ${duration}s"
sysbench "${sb_common[@]}" "${sb_direct[@]}" "${sb_run[@]}" | tee "$work/direct.txt"
direct_qps=$(qps_of "$work/direct.txt")

echo "== run: through the proxy, $threads threads, ${duration}s"
sysbench "${sb_common[@]}" "${sb_proxy[@]}" "${sb_run[@]}" | tee "$work/proxy.txt"
proxy_qps=$(qps_of "$work/proxy.txt")

ratio=$(awk -v d="$direct_qps" -v p="$proxy_qps" 'BEGIN { printf "%.2f", (d > 0 ? p / d : 0) }')
machine="$(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"

bench_cleanup
echo
echo "date=$(date +%F) machine=\"$machine\" threads=$threads table_size=$table_size time=${duration}s"
echo "direct_qps=$direct_qps proxy_qps=$proxy_qps ratio=$ratio"
