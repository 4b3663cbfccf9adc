#!/usr/bin/env bash
# Reads across differently placed tables: one MariaDB holding every row directly vs. the proxy
# over four shard nodes, for a join with a broadcast table (a plain scatter, the yardstick), a
# join with a lookup table on one node (copied to each shard node first: "Shipped"), the same
# with a filter on the lookup table (its copy reads only those rows), and a GROUP_CONCAT over
# the join (no merge for it: both tables gathered on one node, the sharded side filtered).
#
#   bench/cross_node.sh
#
# Environment: ROWS sharded rows (default 200000), USERS lookup rows (default 10000), RUNS
# timed runs per query and target, the median reported (default 5), BIN a shardproxy binary
# instead of building this checkout, CARGO_TARGET_DIR honoured. Ports: shard nodes 3711-3714,
# direct node 3715, proxy 3717. The last line of output:
#   broadcast_ratio=R shipped_ratio=R shipped_filtered_ratio=R gathered_ratio=R (proxy / direct)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
readonly rows=${ROWS:-200000}
readonly users=${USERS:-10000}
readonly runs=${RUNS:-5}
readonly base_port=3711
readonly shard_count=4
readonly direct_port=$((base_port + shard_count))
readonly proxy_port=3717

die() {
    echo "cross_node.sh: $*" >&2
    exit 1
}

for v in rows users runs; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done

bench_traps

command -v mariadb >/dev/null 2>&1 || install_packages mariadb-server mariadb-client
command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"

bench_proxy_binary

work=$(mktemp -d /tmp/shardproxy-cross.XXXXXX)
echo "== starting $shard_count shard nodes and 1 direct node in $work"
"$repo/scripts/cluster.sh" start "$work" "$((shard_count + 1))" "$base_port"

node_sql() {
    local port=$1
    shift
    mariadb -h127.0.0.1 -P"$port" -uroot -proot --batch --skip-column-names shop -e "$*"
}

{
    echo 'version = 1'
    echo 'default_node = "ds0"'
    echo
    echo '[server]'
    echo "listen = \"127.0.0.1:$proxy_port\""
    echo 'users = [{ name = "app", password = "app" }]'
    echo
    echo '[nodes]'
    for ((i = 0; i < shard_count; i++)); do
        echo "ds$i = \"mysql://root:root@127.0.0.1:$((base_port + i))/shop\""
    done
    echo
    echo '[tables.t_order]'
    echo 'rule = "hash_slot"'
    echo 'column = "id"'
    slots=""
    for ((i = 0; i < shard_count; i++)); do
        slots+="${slots:+, }{ slots = \"$((i * 256))-$((i * 256 + 255))\", node = \"ds$i\" }"
    done
    echo "slots = [$slots]"
    echo
    echo '[tables.t_user]'
    echo 'rule = "single"'
    echo 'node = "ds0"'
    echo
    echo '[tables.t_cat]'
    echo 'rule = "broadcast"'
} >"$work/rules.toml"

bench_start_proxy "$bin" "$proxy_port" app app

order_ddl='CREATE TABLE t_order (id BIGINT PRIMARY KEY, user_id INT NOT NULL, cat INT NOT NULL, amount DECIMAL(12,2) NOT NULL, KEY (user_id))'
user_ddl='CREATE TABLE t_user (id INT PRIMARY KEY, tier INT NOT NULL, name VARCHAR(32) NOT NULL)'
cat_ddl='CREATE TABLE t_cat (id INT PRIMARY KEY, name VARCHAR(32) NOT NULL)'
gen_order="SELECT seq, seq % $users, seq % 20, (seq % 1000) / 10 FROM seq_1_to_$rows"
gen_user="SELECT seq - 1, (seq - 1) % 10, CONCAT('u', seq - 1) FROM seq_1_to_$users"
gen_cat="SELECT seq - 1, CONCAT('c', seq - 1) FROM seq_1_to_20"
echo "== loading $rows orders (each shard its own slots), $users users on ds0, 20 categories everywhere"
pids=()
for ((i = 0; i <= shard_count; i++)); do
    port=$((base_port + i))
    sql="$order_ddl; $cat_ddl; INSERT INTO t_cat $gen_cat;"
    if ((i == shard_count)); then
        sql+=" INSERT INTO t_order $gen_order; $user_ddl; INSERT INTO t_user $gen_user;"
    else
        sql+=" INSERT INTO t_order $gen_order WHERE (CRC32(seq) % 1024) DIV 256 = $i;"
        ((i == 0)) && sql+=" $user_ddl; INSERT INTO t_user $gen_user;"
    fi
    node_sql "$port" "$sql ANALYZE TABLE t_order" >/dev/null &
    pids+=($!)
done
for p in "${pids[@]}"; do
    wait "$p" || die "loading failed (see the error above)"
done

q_broadcast="SELECT c.name, COUNT(*), SUM(o.amount) FROM t_order o JOIN t_cat c ON c.id = o.cat GROUP BY c.name ORDER BY c.name"
q_shipped="SELECT u.tier, COUNT(*), SUM(o.amount) FROM t_order o JOIN t_user u ON u.id = o.user_id GROUP BY u.tier ORDER BY u.tier"
q_filtered="SELECT u.tier, COUNT(*), SUM(o.amount) FROM t_order o JOIN t_user u ON u.id = o.user_id WHERE u.tier = 3 GROUP BY u.tier"
q_gathered="SELECT u.tier, GROUP_CONCAT(DISTINCT o.cat ORDER BY o.cat) FROM t_order o JOIN t_user u ON u.id = o.user_id WHERE o.id <= $((rows / 10)) GROUP BY u.tier ORDER BY u.tier"

echo "== plans through the proxy"
for q in "$q_broadcast" "$q_shipped" "$q_filtered" "$q_gathered"; do
    "$bin" route --config "$work/rules.toml" "$q" | sed 's/^/  /' | cut -c1-200
done

# shellcheck disable=SC2034 # used through the nameref in median_time
client_proxy=(mariadb -h127.0.0.1 -P"$proxy_port" -uapp -papp --batch --skip-column-names shop)
# shellcheck disable=SC2034
client_direct=(mariadb -h127.0.0.1 -P"$direct_port" -uroot -proot --batch --skip-column-names shop)

# median_time TARGET SQL: the median wall time in seconds of RUNS runs, after checking that
# the proxy's answer equals the direct node's.
median_time() {
    local -n client=client_$1
    local sql=$2 i t0 t1
    local times=()
    for ((i = 0; i < runs; i++)); do
        t0=$(date +%s.%N)
        "${client[@]}" -e "$sql" >"$work/out.$1" || die "the query failed on $1: $sql"
        t1=$(date +%s.%N)
        times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')")
    done
    printf '%s\n' "${times[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

declare -A ratio
for name in broadcast shipped filtered gathered; do
    var=q_$name
    q=${!var}
    td=$(median_time direct "$q")
    tp=$(median_time proxy "$q")
    cmp -s "$work/out.direct" "$work/out.proxy" || die "the proxy's answer to the $name query differs from the direct node's"
    ratio[$name]=$(awk -v p="$tp" -v d="$td" 'BEGIN { printf "%.2f", p / d }')
    printf '%-10s direct %.3f s  proxy %.3f s  ratio %s\n' "$name" "$td" "$tp" "${ratio[$name]}"
done
echo "broadcast_ratio=${ratio[broadcast]} shipped_ratio=${ratio[shipped]} shipped_filtered_ratio=${ratio[filtered]} gathered_ratio=${ratio[gathered]}"
