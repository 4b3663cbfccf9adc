#!/usr/bin/env bash
# Many clients over few node connections: CLIENTS busy clients (default 1000), all connected
# at once, each running STATEMENTS statements by key (prepared point read, UPDATE, text point
# read, in turn) through a proxy over 4 nodes whose pools hold at most POOL_MAX connections
# each (default 100, mysql_async's and the proxy's default); then IDLE idle clients (default
# 10000) held for HOLD seconds. Prints what was served, the nodes' peak connections
# (Max_used_connections, from a fresh start) and the proxy's resident memory (VmRSS before,
# during the idle hold, and its peak VmHWM).
#
#   bench/many_clients.sh
#
# Environment: CLIENTS, STATEMENTS (default 30), IDLE, HOLD (default 5), POOL_MAX, BIN a
# shardproxy binary instead of building this checkout, CARGO_TARGET_DIR honoured.
# Ports: nodes 3711-3714, proxy 3717. Needs `ulimit -n` above IDLE + 200 (raised here when the
# hard limit allows).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
readonly clients=${CLIENTS:-1000}
readonly statements=${STATEMENTS:-30}
readonly idle_clients=${IDLE:-10000}
readonly hold=${HOLD:-5}
readonly pool_max=${POOL_MAX:-100}
readonly base_port=3711
readonly proxy_port=3717
readonly keys=100000

die() {
    echo "many_clients.sh: $*" >&2
    exit 1
}

for v in clients statements idle_clients hold pool_max; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
want_fds=$((idle_clients + clients + 500))
if (($(ulimit -n) < want_fds)); then
    ulimit -n "$want_fds" 2>/dev/null || die "ulimit -n is $(ulimit -n) and cannot be raised to $want_fds"
fi

bench_traps

command -v mariadb >/dev/null 2>&1 || install_packages mariadb-server mariadb-client
command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"

bench_binaries many_clients

work=$(mktemp -d /tmp/shardproxy-many.XXXXXX)
echo "== starting 4 nodes in $work"
"$repo/scripts/cluster.sh" start "$work" 4 "$base_port"

slots='[{ slots = "0-255", node = "ds0" }, { slots = "256-511", node = "ds1" }, { slots = "512-767", node = "ds2" }, { slots = "768-1023", node = "ds3" }]'
{
    cat <<RULES
version = 1
default_node = "ds0"

[server]
listen = "127.0.0.1:$proxy_port"
users = [{ name = "app", password = "app" }]
max_connections = $((idle_clients + clients + 100))
max_handshakes_per_ip = 0

[nodes]
RULES
    for i in 0 1 2 3; do
        echo "ds$i = \"mysql://root:root@127.0.0.1:$((base_port + i))/shop?pool_max=$pool_max\""
    done
    cat <<RULES

[tables.t_many]
rule = "hash_slot"
column = "user_id"
slots = $slots
RULES
} >"$work/rules.toml"
bench_start_proxy "$bin" "$proxy_port" app app

mariadb -h127.0.0.1 -P"$proxy_port" -uapp -papp shop \
    -e 'CREATE TABLE t_many (user_id BIGINT PRIMARY KEY, n INT NOT NULL)'
for ((i = 0; i < 4; i++)); do
    # Each node holds every key; the proxy only reads and writes the keys of its slots.
    mariadb -h127.0.0.1 -P$((base_port + i)) -uroot -proot shop \
        -e "INSERT INTO t_many SELECT seq, 0 FROM seq_0_to_$((keys - 1)); FLUSH STATUS"
done

rss() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$proxy_pid/status"; }
node_peaks() {
    local i out=""
    for ((i = 0; i < 4; i++)); do
        out+=" $(mariadb -h127.0.0.1 -P$((base_port + i)) -uroot -proot -N \
            -e "SHOW GLOBAL STATUS LIKE 'Max_used_connections'" | awk '{ print $2 }')"
    done
    echo "${out# }"
}

url="mysql://app:app@127.0.0.1:$proxy_port/shop"
rss_start=$(rss VmRSS)
echo "== $clients busy clients, $statements statements each, pool_max=$pool_max per node"
active_line=$("$client" "$url" active "$clients" "$statements" "$keys")
echo "  $active_line"
active_peaks=$(node_peaks)
echo "  node connections at most (per node, the proxy's own and the bench's included): $active_peaks"
rss_active=$(rss VmHWM)

echo "== $idle_clients idle clients, held ${hold}s"
"$client" "$url" idle "$idle_clients" "$hold" >"$work/idle.out" &
idle_pid=$!
bench_pids+=("$idle_pid")
deadline=$((SECONDS + 300))
until grep -q '^clients=' "$work/idle.out" 2>/dev/null; do
    proc_alive "$idle_pid" || break
    ((SECONDS < deadline)) || die "the idle clients did not connect within 300s"
    sleep 0.5
done
sleep 1
rss_idle=$(rss VmRSS)
idle_peaks=$(node_peaks)
wait "$idle_pid" || die "the idle client failed: $(cat "$work/idle.out")"
idle_line=$(head -1 "$work/idle.out")
echo "  $idle_line"
sed -n '2,4p' "$work/idle.out" | grep error || true
rss_peak=$(rss VmHWM)

echo "== proxy memory (kB): at start $rss_start, peak with $clients busy $rss_active," \
    "with $idle_clients idle $rss_idle, peak $rss_peak"
echo "   node connections at most after the idle clients: $idle_peaks"
echo "result: $active_line | $idle_line | rss_kb_start=$rss_start rss_kb_busy_peak=$rss_active rss_kb_idle=$rss_idle node_max_used=${idle_peaks// /,}"
