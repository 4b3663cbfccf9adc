#!/usr/bin/env bash
# A join by the other table's shard key (issue 24's orders/products): `orders` sharded by
# user_id, `products` sharded by product_id over four nodes, against one MariaDB holding
# every row. For each of QUERIES users, in one client session each way:
#   SELECT o.order_id, p.name, p.price * o.qty FROM orders o JOIN products p
#     ON p.product_id = o.product_id WHERE o.user_id = <u>
# The answers must be equal; prints the time per query both ways, their ratio, and the rows
# the proxy copied (bound: read by the join's keys into a temporary table; inline: so, and
# carried inside the statement; spread: the orders carried inside the statements of the
# products' nodes; whole: as before).
#
#   bench/join_keys.sh
#
# JOIN=lines joins each user's orders to their order lines instead (LINES per order, default
# 5, `order_lines` sharded by order_id): a join whose inner rows outnumber the outer ones.
# PROTOCOL=prepared runs the queries as one prepared statement (`?` for the user) through
# Node's mysql2 (`bench/prepared.js`; `tests/clients/install.sh` installs it) instead of the
# mariadb client's text queries.
#
# Environment: ORDERS (default 100000), PRODUCTS (default 200000), USERS (default 5000),
# QUERIES (default 200), JOIN (products or lines), LINES (default 5), PROTOCOL (text or
# prepared), BIN a shardproxy binary instead of building this checkout,
# CARGO_TARGET_DIR honoured. Ports: shard nodes 3731-3734, direct node 3735, proxy 3737,
# metrics 3738. The last line:
#   per_query_ms_direct=F per_query_ms_proxy=F ratio=R copied_bound=N copied_inline=N copied_spread=N copied_whole=N
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
readonly orders=${ORDERS:-100000}
readonly products=${PRODUCTS:-200000}
readonly users=${USERS:-5000}
readonly queries=${QUERIES:-200}
readonly join=${JOIN:-products}
readonly lines=${LINES:-5}
readonly protocol=${PROTOCOL:-text}
readonly base_port=3731
readonly shard_count=4
readonly direct_port=$((base_port + shard_count))
readonly proxy_port=3737
readonly metrics_port=3738

die() {
    echo "join_keys.sh: $*" >&2
    exit 1
}

[[ $join == products || $join == lines ]] || die "JOIN must be products or lines, got '$join'"
[[ $protocol == text || $protocol == prepared ]] || die "PROTOCOL must be text or prepared, got '$protocol'"
if [[ $protocol == prepared ]] && ! { command -v node >/dev/null 2>&1 && [[ -d $repo/tests/clients/node/node_modules/mysql2 ]]; }; then
    die "PROTOCOL=prepared needs Node and mysql2: run tests/clients/install.sh"
fi
for v in orders products users queries lines; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done

bench_traps
command -v mariadb >/dev/null 2>&1 || install_packages mariadb-server mariadb-client
command -v curl >/dev/null 2>&1 || install_packages curl
command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"
bench_proxy_binary

work=$(mktemp -d /tmp/shardproxy-join.XXXXXX)
echo "== starting $shard_count shard nodes and 1 direct node in $work"
"$repo/scripts/cluster.sh" start "$work" "$((shard_count + 1))" "$base_port"

node_sql() {
    local port=$1
    shift
    mariadb -h127.0.0.1 -P"$port" -uroot -proot --batch --skip-column-names shop -e "$*"
}

bench_shard_rules "$shard_count" "$base_port" "$proxy_port" "$metrics_port" orders:user_id products:product_id order_lines:order_id >"$work/rules.toml"

bench_start_proxy "$bin" "$proxy_port" app app

orders_ddl='CREATE TABLE orders (order_id BIGINT PRIMARY KEY, user_id INT NOT NULL, product_id INT NOT NULL, qty INT NOT NULL, KEY (user_id))'
products_ddl='CREATE TABLE products (product_id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, price DECIMAL(10,2) NOT NULL)'
gen_orders="SELECT seq AS order_id, seq % $users AS user_id, (seq * 7919) % $products + 1 AS product_id, seq % 5 + 1 AS qty FROM seq_1_to_$orders"
gen_products="SELECT seq AS product_id, CONCAT('product ', seq) AS name, (seq % 1000) / 10 + 1 AS price FROM seq_1_to_$products"
lines_ddl='CREATE TABLE order_lines (line_id BIGINT PRIMARY KEY, order_id BIGINT NOT NULL, sku INT NOT NULL, amount DECIMAL(10,2) NOT NULL, KEY (order_id))'
gen_lines="SELECT seq AS line_id, (seq - 1) DIV $lines + 1 AS order_id, seq % 997 AS sku, (seq % 500) / 10 AS amount FROM seq_1_to_$((orders * lines))"
echo "== loading $orders orders by user_id and $products products by product_id"
pids=()
for ((i = 0; i <= shard_count; i++)); do
    port=$((base_port + i))
    sql="$orders_ddl; $products_ddl; $lines_ddl;"
    if ((i == shard_count)); then
        sql+=" INSERT INTO orders $gen_orders; INSERT INTO products $gen_products;"
        [[ $join == lines ]] && sql+=" INSERT INTO order_lines $gen_lines;"
    else
        sql+=" INSERT INTO orders SELECT * FROM ($gen_orders) g WHERE (CRC32(g.user_id) % 1024) DIV 256 = $i;"
        sql+=" INSERT INTO products SELECT * FROM ($gen_products) g WHERE (CRC32(g.product_id) % 1024) DIV 256 = $i;"
        [[ $join == lines ]] && sql+=" INSERT INTO order_lines SELECT * FROM ($gen_lines) g WHERE (CRC32(g.order_id) % 1024) DIV 256 = $i;"
    fi
    node_sql "$port" "$sql ANALYZE TABLE orders, products, order_lines" >/dev/null &
    pids+=($!)
done
for p in "${pids[@]}"; do
    wait "$p" || die "loading failed (see the error above)"
done

if [[ $join == products ]]; then
    q="SELECT o.order_id, p.name, p.price * o.qty FROM orders o JOIN products p ON p.product_id = o.product_id WHERE o.user_id ="
    order="ORDER BY o.order_id"
else
    q="SELECT o.order_id, l.line_id, l.sku, l.amount * o.qty FROM orders o JOIN order_lines l ON l.order_id = o.order_id WHERE o.user_id ="
    order="ORDER BY o.order_id, l.line_id"
fi
echo "== the plan through the proxy"
"$bin" route --config "$work/rules.toml" "$q 42" | sed 's/^/  /' | cut -c1-200
for ((i = 0; i < queries; i++)); do
    echo "$q $(((i * 37) % users)) $order;"
done >"$work/queries.sql"

copied() {
    curl -s "http://127.0.0.1:$metrics_port/metrics" |
        awk -v how="$1" '$1 == "shardproxy_copied_rows_total{how=\"" how "\"}" { print $2 }' |
        awk '{ s += $1 } END { print s + 0 }'
}

# run TARGET: seconds for the whole session of queries; its answers in $work/out.TARGET.
run() {
    local t0 t1
    local -a client
    if [[ $1 == direct ]]; then
        client=(mariadb -h127.0.0.1 -P"$direct_port" -uroot -proot)
    else
        client=(mariadb -h127.0.0.1 -P"$proxy_port" -uapp -papp)
    fi
    if [[ $protocol == prepared ]]; then
        # The mariadb client's arguments, taken back: port, user, password.
        node "$repo/bench/prepared.js" "${client[2]#-P}" "${client[3]#-u}" "${client[4]#-p}" \
            "$q ? $order" "$users" "$queries" "$work/out.$1" || die "the queries failed on $1"
        return
    fi
    t0=$(date +%s.%N)
    "${client[@]}" --batch --skip-column-names shop <"$work/queries.sql" >"$work/out.$1" ||
        die "the queries failed on $1"
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
}

# A warm-up of both, then the timed sessions.
run direct >/dev/null
run proxy >/dev/null
cmp -s "$work/out.direct" "$work/out.proxy" || die "the proxy's answers differ from the direct node's"
b0=$(copied bound)
i0=$(copied inline)
s0=$(copied spread)
w0=$(copied whole)
td=$(run direct)
tp=$(run proxy)
b1=$(copied bound)
i1=$(copied inline)
s1=$(copied spread)
w1=$(copied whole)
awk -v d="$td" -v p="$tp" -v n="$queries" -v b=$((b1 - b0)) -v i=$((i1 - i0)) -v s=$((s1 - s0)) -v w=$((w1 - w0)) 'BEGIN {
    printf "per query: direct %.2f ms, proxy %.2f ms (%.2fx); rows copied per query: %.1f by keys into a table, %.1f by keys inside the statement, %.1f carried to the nodes of the joined rows, %.1f whole\n",
        1000 * d / n, 1000 * p / n, p / d, b / n, i / n, s / n, w / n
    printf "per_query_ms_direct=%.2f per_query_ms_proxy=%.2f ratio=%.2f copied_bound=%d copied_inline=%d copied_spread=%d copied_whole=%d\n",
        1000 * d / n, 1000 * p / n, p / d, b, i, s, w
}'
