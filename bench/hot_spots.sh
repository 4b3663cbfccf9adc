#!/usr/bin/env bash
# Hot spots found and moved by the proxies themselves (issue 28): 4 data nodes, a metadata
# node, two proxies with `[balance] mode = "auto"` and CLIENTS clients split between them,
# 90% prepared point reads and 10% increments, in phases: uniform keys (PHASE s), Zipf over
# keys (PHASE s), a hot set of 6 keys in 6 slots of ds1 taking half of all statements
# (2 x PHASE s), one key of ds2 (a tenant) suddenly taking half of all statements (PHASE s),
# then the hot set wandering to another node every WANDER s, WANDERS times.
# Prints per phase when a slot was first reported hot and when the first move was queued,
# the nodes' max/mean node time at its start and end, its QPS and errors; every move; and
# checks the exact state after (every row once, the increments all there).
#
#   bench/hot_spots.sh
#
# Environment: ROWS (default 200000), CLIENTS (default 16), PHASE seconds (default 30),
# WANDER seconds (default 60), WANDERS (default 3), COOLDOWN (`[balance] cooldown_secs`,
# default 120), BIN a shardproxy binary instead of building this checkout,
# CARGO_TARGET_DIR honoured.
# Ports: data nodes 3641-3644, metadata node 3645, proxies 3647 and 3648, admin 3649 and 3650.
# The client's summary line:
#   phases=N moves=N slots_moved_twice=N back_and_forth=N errors=N updates=N
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
readonly rows=${ROWS:-200000}
readonly clients=${CLIENTS:-16}
readonly phase=${PHASE:-30}
readonly wander=${WANDER:-60}
readonly wanders=${WANDERS:-3}
readonly cooldown=${COOLDOWN:-120}
readonly base_port=3641
readonly meta_port=3645
readonly proxy_ports=(3647 3648)
readonly admin_ports=(3649 3650)

die() {
    echo "hot_spots.sh: $*" >&2
    exit 1
}

for v in rows clients phase wander cooldown; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
[[ $wanders =~ ^[0-9]+$ ]] || die "WANDERS must be a number, got '$wanders'"

bench_traps

command -v mariadb >/dev/null 2>&1 || install_packages mariadb-server mariadb-client
command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"

bench_binaries hot_load

work=$(mktemp -d /tmp/shardproxy-hot.XXXXXX)
echo "== starting 4 data nodes and 1 metadata node in $work"
"$repo/scripts/cluster.sh" start "$work" 5 "$base_port"
mariadb -h127.0.0.1 -P"$meta_port" -uroot -proot -e 'CREATE DATABASE IF NOT EXISTS meta'

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

# Each proxy sees about half of every slot's statements.
[hot]
seconds = 5
slot_statements = 400
slot_node_ms = 100

[balance]
mode = "auto"
cooldown_secs = $cooldown
max_moves_per_hour = 30

[nodes]
ds0 = "mysql://root:root@127.0.0.1:$base_port/shop"
ds1 = "mysql://root:root@127.0.0.1:$((base_port + 1))/shop"
ds2 = "mysql://root:root@127.0.0.1:$((base_port + 2))/shop"
ds3 = "mysql://root:root@127.0.0.1:$((base_port + 3))/shop"

[tables.t_hot]
rule = "hash_slot"
column = "id"
slots = [{ slots = "0-255", node = "ds0" }, { slots = "256-511", node = "ds1" }, { slots = "512-767", node = "ds2" }, { slots = "768-1023", node = "ds3" }]
RULES
}

rules "${proxy_ports[0]}" "${admin_ports[0]}" >"$work/rules-a.toml"
rules "${proxy_ports[1]}" "${admin_ports[1]}" >"$work/rules-b.toml"
bench_start_proxy "$bin" "${proxy_ports[1]}" app app "$work/rules-b.toml" "$work/proxy-b.log"
bench_pids+=("$proxy_pid")
bench_start_proxy "$bin" "${proxy_ports[0]}" app app "$work/rules-a.toml" "$work/proxy.log"

echo "== loading $rows rows"
mariadb -h127.0.0.1 -P"${proxy_ports[0]}" -uapp -papp shop -e \
    'CREATE TABLE t_hot (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, pad VARCHAR(100) NOT NULL)'
for n in 0 1 2 3; do
    # Each node loads its own slots' rows directly.
    mariadb -h127.0.0.1 -P$((base_port + n)) -uroot -proot shop -e \
        "INSERT INTO t_hot SELECT seq, 0, REPEAT('x', 100) FROM seq_1_to_$rows WHERE CRC32(seq) % 1024 DIV 256 = $n"
done

echo "== $clients clients through two proxies: uniform ${phase}s, zipf ${phase}s, hot set $((phase * 2))s, tenant ${phase}s, $wanders wanders of ${wander}s"
"$client" "mysql://app:app@127.0.0.1:${proxy_ports[0]}/shop" "mysql://app:app@127.0.0.1:${proxy_ports[1]}/shop" \
    "mysql://ops:ops@127.0.0.1:${admin_ports[0]}" "$rows" "$clients" "$phase" "$wander" "$wanders" | tee "$work/client.txt"

# The exact state: every row once over the nodes, every acknowledged increment there.
updates=$(sed -n 's/.* updates=\([0-9]*\).*/\1/p' "$work/client.txt")
count=0
sum=0
for n in 0 1 2 3; do
    read -r c s < <(mariadb -h127.0.0.1 -P$((base_port + n)) -uroot -proot shop -N -e 'SELECT COUNT(*), COALESCE(SUM(v), 0) FROM t_hot')
    count=$((count + c))
    sum=$((sum + s))
done
echo "rows_on_nodes=$count (expected $rows) increments_on_nodes=$sum (acknowledged $updates)"
((count == rows)) || die "the nodes hold $count rows, not $rows"
((sum == updates)) || die "the nodes hold $sum increments, $updates were acknowledged"
