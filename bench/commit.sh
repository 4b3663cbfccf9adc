#!/usr/bin/env bash
# Commit latency: transactions of two UPDATEs on one node vs. on two nodes (two-phase commit,
# and best_effort), through the proxy, and on one MariaDB directly; prepared statements for
# every client count, and text queries for one client.
#
#   bench/commit.sh
#
# Environment: TIME seconds per run (default 10), ROUNDS (default 2; runs alternate so drift
# hits every target alike), CLIENTS (default "1 4"), BIN a shardproxy binary instead of
# building this checkout, CARGO_TARGET_DIR honoured. Nodes keep MariaDB's durable defaults
# (innodb_flush_log_at_trx_commit=1): every commit, prepare and XA commit is a log flush.
# Ports: shard nodes 3611-3612, direct node 3613, proxies 3617 (xa) and 3618 (best_effort).
# The last line of output:
#   xa_commit_ratio=R xa_tx_ratio=R best_effort_commit_ratio=R (two-node / one-node p50, 1 client)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
readonly time_s=${TIME:-10}
readonly rounds=${ROUNDS:-2}
readonly clients_list=${CLIENTS:-1 4}
readonly base_port=3611
readonly direct_port=3613
readonly proxy_port=3617
readonly effort_port=3618

die() {
    echo "commit.sh: $*" >&2
    exit 1
}

for v in time_s rounds; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done

bench_traps

command -v mariadb >/dev/null 2>&1 || install_packages mariadb-server mariadb-client
command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"

bench_binaries commit_latency

work=$(mktemp -d /tmp/shardproxy-commit.XXXXXX)
echo "== starting 2 shard nodes and 1 direct node in $work"
"$repo/scripts/cluster.sh" start "$work" 3 "$base_port"

rules() {
    local port=$1 mode=$2
    cat <<RULES
version = 1
default_node = "ds0"

[server]
listen = "127.0.0.1:$port"
users = [{ name = "app", password = "app" }]
transaction_mode = "$mode"

[nodes]
ds0 = "mysql://root:root@127.0.0.1:$base_port/shop"
ds1 = "mysql://root:root@127.0.0.1:$((base_port + 1))/shop"

[tables.t_acct]
rule = "hash_slot"
column = "id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
RULES
}

rules "$proxy_port" xa >"$work/rules.toml"
bench_start_proxy "$bin" "$proxy_port" app app
rules "$effort_port" best_effort >"$work/effort.toml"
"$bin" serve --config "$work/effort.toml" </dev/null >"$work/effort.log" 2>&1 &
bench_pids+=($!)
deadline=$((SECONDS + 30))
until mariadb -h127.0.0.1 -P"$effort_port" -uapp -papp -e 'select 1' >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "the best_effort proxy did not answer on $effort_port"
    sleep 0.2
done

create='CREATE TABLE t_acct (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)'
load='INSERT INTO t_acct SELECT seq, 1000000 FROM seq_1_to_2000'
mariadb -h127.0.0.1 -P"$proxy_port" -uapp -papp shop -e "$create"
for p in "$base_port" $((base_port + 1)); do
    # Each shard holds every id; the bench only touches ids of the shard's own slots.
    mariadb -h127.0.0.1 -P"$p" -uroot -proot shop -e "$load"
done
mariadb -h127.0.0.1 -P"$direct_port" -uroot -proot shop -e "$create; $load"

declare -A results
run() {
    local name=$1 url=$2 kind=$3 clients=$4 line
    line=$("$client" "$url" "$kind" "$clients" "$time_s")
    echo "  $name: $line"
    results[$name/$clients]+="$line"$'\n'
}

for ((r = 1; r <= rounds; r++)); do
    echo "== round $r of $rounds"
    for c in $clients_list; do
        run direct_one "mysql://root:root@127.0.0.1:$direct_port/shop" one "$c"
        run proxy_one "mysql://app:app@127.0.0.1:$proxy_port/shop" one "$c"
        run proxy_two_xa "mysql://app:app@127.0.0.1:$proxy_port/shop" two "$c"
        run proxy_two_best_effort "mysql://app:app@127.0.0.1:$effort_port/shop" two "$c"
    done
    # Text queries (PyMySQL, mysqlclient, ...): the branch's BEGIN rides with the statement.
    run direct_one_text "mysql://root:root@127.0.0.1:$direct_port/shop" one-text 1
    run proxy_one_text "mysql://app:app@127.0.0.1:$proxy_port/shop" one-text 1
    run proxy_two_xa_text "mysql://app:app@127.0.0.1:$proxy_port/shop" two-text 1
done

# The median over rounds of field $2 of target $1 (1 client).
median_of() {
    local name=$1 field=$2 c=${3:-1}
    printf '%s' "${results[$name/$c]}" | grep -o "$field=[0-9]*" | cut -d= -f2 | sort -n |
        awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : 0)}'
}

echo "== medians over $rounds rounds"
printf '%-24s %8s %10s %10s %10s %10s %8s\n' target clients commit_p50 commit_p99 tx_p50 tx_p99 tps
for c in $clients_list; do
    for t in direct_one proxy_one proxy_two_xa proxy_two_best_effort direct_one_text \
        proxy_one_text proxy_two_xa_text; do
        [[ -n ${results[$t/$c]:-} ]] || continue
        printf '%-24s %8s %10s %10s %10s %10s %8s\n' "$t" "$c" \
            "$(median_of $t commit_p50_us "$c")" "$(median_of $t commit_p99_us "$c")" \
            "$(median_of $t tx_p50_us "$c")" "$(median_of $t tx_p99_us "$c")" "$(median_of $t tps "$c")"
    done
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
one_c=$(median_of proxy_one commit_p50_us)
one_t=$(median_of proxy_one tx_p50_us)
echo "xa_commit_ratio=$(ratio "$(median_of proxy_two_xa commit_p50_us)" "$one_c")" \
    "xa_tx_ratio=$(ratio "$(median_of proxy_two_xa tx_p50_us)" "$one_t")" \
    "best_effort_commit_ratio=$(ratio "$(median_of proxy_two_best_effort commit_p50_us)" "$one_c")"
