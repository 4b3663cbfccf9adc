#!/usr/bin/env bash
# A tenant too hot for one node, salted live (SALT KEY): 4 data nodes keeping a ROW binary log,
# a metadata node, two proxies with `[balance] mode = "suggest"` and CLIENTS clients split
# between them, 90% prepared point reads and 10% increments by (tenant_id, id), half of them
# on one tenant of ds2 (HOT_ROWS rows), the rest on the other TENANTS - 1 tenants (ROWS_PER
# rows each). After PHASE s the client takes the `SALT KEY` statement `SHOW BALANCE` offers
# for the hot tenant, runs it, and keeps the load on while its buckets (`salt = { by = "id",
# buckets = 8 }`) move live to other nodes, then PHASE s more. Prints per phase (before,
# salting, after) its QPS, the nodes' max/mean node time over its last 10 s and its errors,
# then checks the exact state on the nodes (every row once, the increments all there, the
# hot tenant over several nodes, and the same through the proxy).
#
#   bench/salt.sh
#
# Environment: TENANTS (default 1000), ROWS_PER rows per tenant (default 100), HOT_ROWS the
# hot tenant's rows (default 40000), CLIENTS (default 16), PHASE seconds (default 30), BIN a
# shardproxy binary instead of building this checkout, CARGO_TARGET_DIR honoured.
# Ports: data nodes 3661-3664, metadata node 3665, proxies 3667 and 3668, admin 3669 and 3670.
# The client's summary line:
#   before_qps=N salting_qps=N after_qps=N before_max_mean=F after_max_mean=F errors=N updates=N hot_rows=N hot_sum=N
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh disable=SC1091 # followed with shellcheck -x
source "$repo/scripts/lib.sh"
readonly tenants=${TENANTS:-1000}
readonly rows_per=${ROWS_PER:-100}
readonly hot_rows=${HOT_ROWS:-40000}
readonly clients=${CLIENTS:-16}
readonly phase=${PHASE:-30}
readonly base_port=3661
readonly meta_port=3665
readonly proxy_ports=(3667 3668)
readonly admin_ports=(3669 3670)

die() {
    echo "salt.sh: $*" >&2
    exit 1
}

for v in tenants rows_per hot_rows clients phase; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
((tenants >= 2)) || die "TENANTS must be at least 2, got $tenants"

bench_traps

command -v mariadb >/dev/null 2>&1 || install_packages mariadb-server mariadb-client
command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"

bench_binaries salt_load

work=$(mktemp -d /tmp/shardproxy-salt.XXXXXX)
echo "== starting 4 data nodes and 1 metadata node in $work"
# The salted key's buckets move through their source's binary log.
BINLOG=1 "$repo/scripts/cluster.sh" start "$work" 5 "$base_port"
mariadb -h127.0.0.1 -P"$meta_port" -uroot -proot -e 'CREATE DATABASE IF NOT EXISTS meta'

# node N SQL...: runs SQL on data node N (database shop), tab-separated, no header.
node() {
    local n=$1
    shift
    mariadb -h127.0.0.1 -P$((base_port + n)) -uroot -proot shop -N -e "$*"
}

# The hot tenant: the first whose slot is ds2's (512-767).
hot=$(node 2 "SELECT MIN(seq) FROM seq_1_to_$tenants WHERE CRC32(seq) % 1024 DIV 256 = 2")
[[ $hot =~ ^[1-9][0-9]*$ ]] || die "no tenant of 1-$tenants is in ds2's slots"
readonly hot

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

# Suggest only: auto mode never salts.
[balance]
mode = "suggest"

[nodes]
ds0 = "mysql://root:root@127.0.0.1:$base_port/shop"
ds1 = "mysql://root:root@127.0.0.1:$((base_port + 1))/shop"
ds2 = "mysql://root:root@127.0.0.1:$((base_port + 2))/shop"
ds3 = "mysql://root:root@127.0.0.1:$((base_port + 3))/shop"

[tables.t_tenant]
rule = "hash_slot"
column = "tenant_id"
slots = [{ slots = "0-255", node = "ds0" }, { slots = "256-511", node = "ds1" }, { slots = "512-767", node = "ds2" }, { slots = "768-1023", node = "ds3" }]
salt = { by = "id", buckets = 8 }
RULES
}

rules "${proxy_ports[0]}" "${admin_ports[0]}" >"$work/rules-a.toml"
rules "${proxy_ports[1]}" "${admin_ports[1]}" >"$work/rules-b.toml"
# shellcheck disable=SC2154 # bin: set by bench_binaries
bench_start_proxy "$bin" "${proxy_ports[1]}" app app "$work/rules-b.toml" "$work/proxy-b.log"
bench_pids+=("$proxy_pid")
bench_start_proxy "$bin" "${proxy_ports[0]}" app app "$work/rules-a.toml" "$work/proxy.log"

readonly rows=$(((tenants - 1) * rows_per + hot_rows))
echo "== loading $rows rows: tenant $hot (ds2) $hot_rows rows, $((tenants - 1)) others $rows_per rows each"
mariadb -h127.0.0.1 -P"${proxy_ports[0]}" -uapp -papp shop -e \
    'CREATE TABLE t_tenant (tenant_id BIGINT NOT NULL, id BIGINT PRIMARY KEY, v BIGINT NOT NULL, pad VARCHAR(100) NOT NULL, KEY (tenant_id))'
for n in 0 1 2 3; do
    # Each node loads its own slots' tenants directly: tenant t's ids follow the hot tenant's.
    node "$n" "INSERT INTO t_tenant SELECT t.seq, $hot_rows + (t.seq - 1) * $rows_per + r.seq, 0, REPEAT('x', 100)
        FROM seq_1_to_$tenants AS t JOIN seq_1_to_$rows_per AS r
        WHERE t.seq <> $hot AND CRC32(t.seq) % 1024 DIV 256 = $n"
done
node 2 "INSERT INTO t_tenant SELECT $hot, seq, 0, REPEAT('x', 100) FROM seq_1_to_$hot_rows"

echo "== $clients clients through two proxies: before ${phase}s, salting tenant $hot, after ${phase}s"
# shellcheck disable=SC2154 # client: set by bench_binaries
"$client" "mysql://app:app@127.0.0.1:${proxy_ports[0]}/shop" "mysql://app:app@127.0.0.1:${proxy_ports[1]}/shop" \
    "mysql://ops:ops@127.0.0.1:${admin_ports[0]}" "$tenants" "$rows_per" "$hot" "$hot_rows" "$clients" "$phase" |
    tee "$work/client.txt"

# The exact state: every row once over the nodes, every acknowledged increment there, the hot
# tenant over several nodes, the proxy's count and sum of it the nodes'.
said() {
    sed -n "s/.* $1=\([0-9]*\).*/\1/p" "$work/client.txt"
}
updates=$(said updates)
proxy_hot_rows=$(said hot_rows)
proxy_hot_sum=$(said hot_sum)
[[ -n $updates && -n $proxy_hot_rows && -n $proxy_hot_sum ]] || die "the client printed no summary line"
count=0
sum=0
hot_count=0
hot_sum=0
hot_nodes=0
for n in 0 1 2 3; do
    read -r c s < <(node "$n" 'SELECT COUNT(*), COALESCE(SUM(v), 0) FROM t_tenant')
    count=$((count + c))
    sum=$((sum + s))
    read -r c s lo hi < <(node "$n" "SELECT COUNT(*), COALESCE(SUM(v), 0), COALESCE(MIN(CRC32(id) % 8), '-'),
        COALESCE(MAX(CRC32(id) % 8), '-') FROM t_tenant WHERE tenant_id = $hot")
    buckets=$lo-$hi
    ((c > 0)) || buckets=none
    echo "ds$n: tenant $hot rows=$c sum=$s buckets=$buckets"
    hot_count=$((hot_count + c))
    hot_sum=$((hot_sum + s))
    ((c == 0)) || hot_nodes=$((hot_nodes + 1))
done
echo "rows_on_nodes=$count (expected $rows) increments_on_nodes=$sum (acknowledged $updates)"
echo "hot_rows_on_nodes=$hot_count (expected $hot_rows, through the proxy $proxy_hot_rows) hot_sum_on_nodes=$hot_sum (through the proxy $proxy_hot_sum) hot_nodes=$hot_nodes"
((count == rows)) || die "the nodes hold $count rows, not $rows"
((sum == updates)) || die "the nodes hold $sum increments, $updates were acknowledged"
((hot_count == hot_rows)) || die "the nodes hold $hot_count rows of tenant $hot, not $hot_rows"
((proxy_hot_rows == hot_count)) || die "the proxy counts $proxy_hot_rows rows of tenant $hot, the nodes hold $hot_count"
((proxy_hot_sum == hot_sum)) || die "the proxy sums tenant $hot's v to $proxy_hot_sum, the nodes to $hot_sum"
((hot_nodes >= 2)) || die "tenant $hot is on $hot_nodes node(s): it was not salted"
