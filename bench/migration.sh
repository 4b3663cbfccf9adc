#!/usr/bin/env bash
# Live slot migration under load: an application's point reads and increments (prepared, 16
# clients, every key) through the proxy for BASELINE seconds, then while half of the table's
# slots move to a third node (MIGRATE SLOTS 0-511 ... AUTO), then 5 s after and BASELINE
# seconds more ("settled": the new placement's own rate). Prints per step the
# load's QPS and p99s, writes to the moving slots apart, the longest write during the cutover
# (moving slots and the others), and the backfill's rows per second.
#
#   bench/migration.sh
#
# Environment: ROWS (default 200000), CLIENTS (default 16), BASELINE seconds (default 10),
# RATE backfill rows/s (default 20000; 0: unthrottled), BINLOG (default 1: the nodes keep a ROW
# binary log; 0: none), CAPTURE (`[metadata] capture`: auto, the default, copies the move's
# changes from the source's binary log where it has one; images: dual writes), PACE
# (`[metadata] copy_slowdown_pct`, default 15; 0: the copy keeps to RATE alone), BIN a
# shardproxy binary instead of
# building this checkout, CARGO_TARGET_DIR honoured. Nodes keep MariaDB's durable defaults.
# Ports: data nodes 3621-3623, metadata node 3624, proxy 3627, admin 3628.
# The client's summary line (the proxy's own account of the cutover follows it):
#   backfill_rows_per_s=N cutover_max_write_ms_moving=F cutover_max_write_ms_other=F qps_baseline=N qps_backfill=N qps_move=N qps_settled=N p99_ms_baseline=F p99_ms_backfill=F
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
readonly rows=${ROWS:-200000}
readonly clients=${CLIENTS:-16}
readonly baseline=${BASELINE:-10}
readonly rate=${RATE:-20000}
readonly binlog=${BINLOG:-1}
readonly capture=${CAPTURE:-auto}
readonly pace=${PACE:-15}
readonly base_port=3621
readonly meta_port=3624
readonly proxy_port=3627
readonly admin_port=3628

die() {
    echo "migration.sh: $*" >&2
    exit 1
}

for v in rows clients baseline; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
[[ $rate =~ ^[0-9]+$ ]] || die "RATE must be a number, got '$rate'"
[[ $binlog == 0 || $binlog == 1 ]] || die "BINLOG must be 0 or 1, got '$binlog'"
[[ $capture == auto || $capture == images ]] || die "CAPTURE must be auto or images, got '$capture'"

bench_traps

command -v mariadb >/dev/null 2>&1 || install_packages mariadb-server mariadb-client
command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"

bench_binaries migration_load

work=$(mktemp -d /tmp/shardproxy-migration.XXXXXX)
echo "== starting 3 data nodes and 1 metadata node in $work"
BINLOG=$binlog "$repo/scripts/cluster.sh" start "$work" 4 "$base_port"
mariadb -h127.0.0.1 -P"$meta_port" -uroot -proot -e 'CREATE DATABASE IF NOT EXISTS meta'

cat >"$work/rules.toml" <<RULES
version = 1
default_node = "ds0"

[server]
listen = "127.0.0.1:$proxy_port"
users = [{ name = "app", password = "app" }]

[admin]
listen = "127.0.0.1:$admin_port"
users = [{ name = "ops", password = "ops" }]

[metadata]
url = "mysql://root:root@127.0.0.1:$meta_port/meta"
poll_ms = 500
capture = "$capture"
copy_slowdown_pct = $pace

[nodes]
ds0 = "mysql://root:root@127.0.0.1:$base_port/shop"
ds1 = "mysql://root:root@127.0.0.1:$((base_port + 1))/shop"
ds2 = "mysql://root:root@127.0.0.1:$((base_port + 2))/shop"

[tables.t_mig]
rule = "hash_slot"
column = "id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
RULES
bench_start_proxy "$bin" "$proxy_port" app app

echo "== loading $rows rows"
mariadb -h127.0.0.1 -P"$proxy_port" -uapp -papp shop -e 'CREATE TABLE t_mig (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, pad VARCHAR(100) NOT NULL)'
for p in "$base_port" $((base_port + 1)); do
    # Each shard loads its own slots' rows directly (the proxy's INSERT path is not what is
    # measured here).
    mariadb -h127.0.0.1 -P"$p" -uroot -proot shop -e \
        "INSERT INTO t_mig SELECT seq, 0, REPEAT('x', 100) FROM seq_1_to_$rows WHERE (CRC32(seq) % 1024 < 512) = ($p = $base_port)"
done

migrate="MIGRATE SLOTS 0-511 OF t_mig TO ds2"
((rate > 0)) && migrate+=" RATE $rate"
migrate+=" AUTO"
echo "== $clients clients: ${baseline}s of baseline, then: $migrate"
"$client" "mysql://app:app@127.0.0.1:$proxy_port/shop" "mysql://ops:ops@127.0.0.1:$admin_port" \
    t_mig "$rows" "$clients" "$baseline" "$migrate"
# The proxy's own account of the cutover (the writes' stall, and for a captured move when
# the hold was acknowledged and when the target had the log's end).
sed 's/\x1b\[[0-9;]*m//g' "$work/proxy.log" | grep -oE '(acked_ms|stall_ms)=.*' || true
# How the move's target got the writes made meanwhile (binlog or images).
echo "capture=$(mariadb -h127.0.0.1 -P"$admin_port" -uops -pops -N -e 'SHOW MIGRATIONS' | awk -F'\t' '{print $NF}' | head -1)"
