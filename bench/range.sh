#!/usr/bin/env bash
# A hot range of a range table split and a part of it moved, by the balancer itself: 4 data
# nodes keeping a ROW binary log, a metadata node, two proxies with `[balance] mode = "auto"`
# and CLIENTS clients split between them, 90% prepared point reads
# and 10% increments by id, half of them on the HOT_KEYS lowest keys of ds2's range, the
# rest on any of the ROWS rows (ROWS / 4 a range). The phases: before, until the balancer's
# first plan shows; balancing, until it is done; after, PHASE s more, in which the balancer
# may act again. Prints per phase its QPS, the nodes' max/mean node time over its last 10 s
# and its errors, every move of the run and the ranges at the end, then checks the exact
# state on the nodes (every row once, every acknowledged increment there, the same through
# the proxy).
#
#   bench/range.sh
#
# Environment: ROWS (default 400000), HOT_KEYS (default 20000), CLIENTS (default 16), PHASE
# seconds after the first balancing plan (default 60), BIN a shardproxy binary instead of
# building this checkout, CARGO_TARGET_DIR honoured.
# Ports: data nodes 3671-3674, metadata node 3675, proxies 3677 and 3678, admin 3679 and 3680.
# The client's summary line:
#   before_qps=N balancing_qps=N after_qps=N before_max_mean=F after_max_mean=F errors=N updates=N rows=N sum=N split=K
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh disable=SC1091 # followed with shellcheck -x
source "$repo/scripts/lib.sh"
readonly rows=${ROWS:-400000}
readonly hot_keys=${HOT_KEYS:-20000}
readonly clients=${CLIENTS:-16}
readonly phase=${PHASE:-60}
readonly base_port=3671
readonly meta_port=3675
readonly proxy_ports=(3677 3678)
readonly admin_ports=(3679 3680)

die() {
    echo "range.sh: $*" >&2
    exit 1
}

for v in rows hot_keys clients phase; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
readonly per=$((rows / 4))
((hot_keys < per)) || die "HOT_KEYS ($hot_keys) must be under a range's rows ($per)"

bench_traps

command -v mariadb >/dev/null 2>&1 || install_packages mariadb-server mariadb-client
command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"

bench_binaries range_load

work=$(mktemp -d /tmp/shardproxy-range.XXXXXX)
echo "== starting 4 data nodes and 1 metadata node in $work"
BINLOG=1 "$repo/scripts/cluster.sh" start "$work" 5 "$base_port"
mariadb -h127.0.0.1 -P"$meta_port" -uroot -proot -e 'CREATE DATABASE IF NOT EXISTS meta'

# node N SQL...: runs SQL on data node N (database shop), tab-separated, no header.
node() {
    local n=$1
    shift
    mariadb -h127.0.0.1 -P$((base_port + n)) -uroot -proot shop -N -e "$*"
}

# rules PROXY_PORT ADMIN_PORT: one proxy's rules file.
rules() {
    cat <<RULES
version = 1
default_node = "ds0"

[server]
listen = "127.0.0.1:$1"
users = [{ name = "app", password = "app" }]

[admin]
listen = "127.0.0.1:$2"
users = [{ name = "ops", password = "ops" }]

[metadata]
url = "mysql://root:root@127.0.0.1:$meta_port/meta"
poll_ms = 500

[hot]
seconds = 5
slot_statements = 400
slot_node_ms = 100

[balance]
mode = "auto"

[nodes]
ds0 = "mysql://root:root@127.0.0.1:$base_port/shop"
ds1 = "mysql://root:root@127.0.0.1:$((base_port + 1))/shop"
ds2 = "mysql://root:root@127.0.0.1:$((base_port + 2))/shop"
ds3 = "mysql://root:root@127.0.0.1:$((base_port + 3))/shop"

[tables.t_log]
rule = "range"
column = "id"
ranges = [{ below = $((per + 1)), node = "ds0" }, { below = $((2 * per + 1)), node = "ds1" }, { below = $((3 * per + 1)), node = "ds2" }, { node = "ds3" }]
RULES
}

rules "${proxy_ports[0]}" "${admin_ports[0]}" >"$work/rules-a.toml"
rules "${proxy_ports[1]}" "${admin_ports[1]}" >"$work/rules-b.toml"
# shellcheck disable=SC2154 # bin: set by bench_binaries
bench_start_proxy "$bin" "${proxy_ports[1]}" app app "$work/rules-b.toml" "$work/proxy-b.log"
bench_pids+=("$proxy_pid")
bench_start_proxy "$bin" "${proxy_ports[0]}" app app "$work/rules-a.toml" "$work/proxy.log"

echo "== loading $rows rows, $per a range"
mariadb -h127.0.0.1 -P"${proxy_ports[0]}" -uapp -papp shop -e \
    'CREATE TABLE t_log (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, pad VARCHAR(100) NOT NULL)'
for n in 0 1 2 3; do
    node "$n" "INSERT INTO t_log SELECT $((n * per)) + seq, 0, REPEAT('x', 100) FROM seq_1_to_$per"
done

readonly hot_from=$((2 * per + 1))
echo "== $clients clients through two proxies, half on keys $hot_from-$((hot_from + hot_keys - 1)) of ds2: before, balancing, after ${phase}s"
# shellcheck disable=SC2154 # client: set by bench_binaries
"$client" "mysql://app:app@127.0.0.1:${proxy_ports[0]}/shop" "mysql://app:app@127.0.0.1:${proxy_ports[1]}/shop" \
    "mysql://ops:ops@127.0.0.1:${admin_ports[0]}" "$rows" "$hot_from" "$hot_keys" "$clients" "$phase" |
    tee "$work/client.txt"

said() {
    sed -n "s/.* $1=\([0-9]*\).*/\1/p" "$work/client.txt"
}
updates=$(said updates)
proxy_rows=$(said rows)
proxy_sum=$(said sum)
[[ -n $updates && -n $proxy_rows && -n $proxy_sum ]] || die "the client printed no summary line"
count=0
sum=0
for n in 0 1 2 3; do
    read -r c s lo hi < <(node "$n" "SELECT COUNT(*), COALESCE(SUM(v), 0), COALESCE(MIN(id), '-'), COALESCE(MAX(id), '-') FROM t_log")
    echo "ds$n: rows=$c ids=$lo-$hi increments=$s"
    count=$((count + c))
    sum=$((sum + s))
done
echo "rows_on_nodes=$count (expected $rows, through the proxy $proxy_rows) increments_on_nodes=$sum (acknowledged $updates, through the proxy $proxy_sum)"
((count == rows)) || die "the nodes hold $count rows, not $rows"
((sum == updates)) || die "the nodes hold $sum increments, $updates were acknowledged"
((proxy_rows == count && proxy_sum == sum)) || die "the proxy reads $proxy_rows rows and $proxy_sum increments"
