#!/usr/bin/env bash
# Deep pages of a hash-sharded table by its primary key: the key page (rounds of one key and
# one count per node, then about a page per node) vs. the plain ordered merge of the same
# rows (sorted by `id + 0`, which the key page does not take), vs. one MariaDB holding
# every row.
#
#   bench/key_page.sh
#
# Environment: ROWS (default 400000), RUNS timed runs per query, median reported (default 5),
# OFFSET of the deep page (default 100000).
# Ports: hash nodes 3621-3624, direct node 3625, proxy 3627, metrics 3628.
# Everything started here is stopped and removed on exit. The last line of output is
#   key_rows_read=N merge_rows_read=N key_rows_sent=N merge_rows_sent=N key_ratio=R merge_ratio=R
# (rows read = rows the proxy's merge consumed for one deep page; rows sent = rows the nodes
# sent for it, the rounds' keys and counts included; ratio = proxy median time / direct
# median time).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
readonly rows=${ROWS:-400000}
readonly runs=${RUNS:-5}
readonly offset=${OFFSET:-100000}
readonly base_port=3621
readonly direct_port=3625
readonly proxy_port=3627
readonly metrics_port=3628
readonly page=20

die() {
    echo "key_page.sh: $*" >&2
    exit 1
}

# shellcheck source=bench/page_lib.sh
source "$repo/bench/page_lib.sh"
page_setup keypage 5

{
    echo 'version = 1'
    echo 'default_node = "ds0"'
    echo '[server]'
    echo "listen = \"127.0.0.1:$proxy_port\""
    echo 'users = [{ name = "app", password = "app" }]'
    echo '[metrics]'
    echo "listen = \"127.0.0.1:$metrics_port\""
    echo '[nodes]'
    for ((i = 0; i < 4; i++)); do
        echo "ds$i = \"mysql://root:root@127.0.0.1:$((base_port + i))/shop\""
    done
    echo '[tables.t_page]'
    echo 'rule = "hash_slot"'
    echo 'column = "id"'
    echo 'slots = [{ slots = "0-255", node = "ds0" }, { slots = "256-511", node = "ds1" }, { slots = "512-767", node = "ds2" }, { slots = "768-1023", node = "ds3" }]'
} >"$work/rules.toml"

bench_start_proxy "$bin" "$proxy_port" app app

ddl='(id BIGINT NOT NULL PRIMARY KEY, v INT NOT NULL, s VARCHAR(16) NOT NULL)'
proxy_sql "CREATE TABLE t_page $ddl"
node_sql "$direct_port" "CREATE TABLE t_page $ddl"

src="(SELECT seq * 3 AS id, (seq * 7919) % 100000 AS v, CONCAT('row', seq) AS s FROM seq_1_to_$rows) x"
echo "== loading $rows rows, hashed and direct"
loads=()
for ((i = 0; i < 4; i++)); do
    node_sql $((base_port + i)) "INSERT INTO t_page SELECT id, v, s FROM $src WHERE CRC32(id) % 1024 DIV 256 = $i" &
    loads+=($!)
done
node_sql "$direct_port" "INSERT INTO t_page SELECT id, v, s FROM $src" &
loads+=($!)
for pid in "${loads[@]}"; do
    wait "$pid" || die "loading the rows failed"
done
for ((i = 0; i < 5; i++)); do
    node_sql $((base_port + i)) "ANALYZE TABLE t_page" >/dev/null
done

total=$(proxy_sql "SELECT COUNT(*) FROM t_page")
[[ $total == "$rows" ]] || die "the nodes answer $total rows, expected $rows"

key_q="SELECT id, v, s FROM t_page ORDER BY id LIMIT $offset, $page"
merge_q="SELECT id, v, s FROM t_page ORDER BY id + 0 LIMIT $offset, $page"

want=$(node_sql "$direct_port" "$key_q")
[[ $(proxy_sql "$key_q") == "$want" ]] || die "the key page differs from the direct node's"
[[ $(proxy_sql "$merge_q") == "$want" ]] || die "the ordered merge differs from the direct node's"

sent_ports=("$base_port" $((base_port + 1)) $((base_port + 2)) $((base_port + 3)))
key_rows=$(rows_read "$key_q")
merge_rows=$(rows_read "$merge_q")
base_sent=$(rows_sent "SELECT id FROM t_page WHERE id < 0")
key_sent=$(($(rows_sent "$key_q") - base_sent))
merge_sent=$(($(rows_sent "$merge_q") - base_sent))
t_direct=$(median_time node_sql "$direct_port" "$key_q")
t_key=$(median_time proxy_sql "$key_q")
t_merge=$(median_time proxy_sql "$merge_q")
key_ratio=$(echo "scale=2; $t_key / $t_direct" | bc -l)
merge_ratio=$(echo "scale=2; $t_merge / $t_direct" | bc -l)

echo
echo "$(date -u +%F) $(nproc) cores, $(mariadb --version | awk '{print $5}' | tr -d ,), ROWS=$rows OFFSET=$offset RUNS=$runs"
printf '%-36s %10s %12s %12s\n' query "median s" "rows merged" "nodes sent"
printf '%-36s %10s %12s %12s\n' "direct (one MariaDB)" "$t_direct" "-" "-"
printf '%-36s %10s %12s %12s\n' "proxy, key page" "$t_key" "$key_rows" "$key_sent"
printf '%-36s %10s %12s %12s\n' "proxy, ordered merge (id + 0)" "$t_merge" "$merge_rows" "$merge_sent"
echo "key_rows_read=$key_rows merge_rows_read=$merge_rows key_rows_sent=$key_sent merge_rows_sent=$merge_sent key_ratio=$key_ratio merge_ratio=$merge_ratio"
