#!/usr/bin/env bash
# Deep pages of a time-tier table: the tier-aware page (counts per tier, then only the tier the
# page is in) vs. the plain ordered merge of the same rows sharded by hash, vs. one MariaDB
# holding every row.
#
#   bench/tier_page.sh
#
# Environment: ROWS (default 300000), RUNS timed runs per query, median reported (default 5),
# OFFSET of the deep page (default 100000).
# Ports: tier nodes 3611-3613 (hot, warm, cold), direct node 3614, proxy 3617, metrics 3618.
# Everything started here is stopped and removed on exit. The last line of output is
#   tier_rows_read=N merge_rows_read=N tier_rows_sent=N merge_rows_sent=N tier_ratio=R merge_ratio=R
# (rows read = rows the proxy's merge consumed for one deep page; rows sent = rows the nodes
# sent for it, counts and window keys included; ratio = proxy median time / direct median
# time).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
readonly rows=${ROWS:-300000}
readonly runs=${RUNS:-5}
readonly offset=${OFFSET:-100000}
readonly base_port=3611
readonly direct_port=3614
readonly proxy_port=3617
readonly metrics_port=3618
readonly page=20

die() {
    echo "tier_page.sh: $*" >&2
    exit 1
}

# shellcheck source=bench/page_lib.sh
source "$repo/bench/page_lib.sh"
page_setup tier 4

# t_txn by tiers: hot from 365 days ago (2-day overlap window), warm from 1095 days ago
# (2-day window), cold the rest. t_txn_h: the same rows sharded by hash over the same nodes.
{
    echo 'version = 1'
    echo 'default_node = "ds0"'
    echo '[server]'
    echo "listen = \"127.0.0.1:$proxy_port\""
    echo 'users = [{ name = "app", password = "app" }]'
    echo '[metrics]'
    echo "listen = \"127.0.0.1:$metrics_port\""
    echo '[nodes]'
    for ((i = 0; i < 3; i++)); do
        echo "ds$i = \"mysql://root:root@127.0.0.1:$((base_port + i))/shop\""
    done
    echo '[tables.t_txn]'
    echo 'rule = "time_tier"'
    echo 'column = "txn_date"'
    echo 'primary_key = ["txn_id"]'
    echo 'tiers = [{ name = "hot", node = "ds0", lower = "now-365d", overlap_days = 2 }, { name = "warm", node = "ds1", lower = "now-1095d", overlap_days = 2 }, { name = "cold", node = "ds2" }]'
    echo '[tables.t_txn_h]'
    echo 'rule = "hash_slot"'
    echo 'column = "txn_id"'
    echo 'slots = [{ slots = "0-341", node = "ds0" }, { slots = "342-682", node = "ds1" }, { slots = "683-1023", node = "ds2" }]'
} >"$work/rules.toml"

bench_start_proxy "$bin" "$proxy_port" app app

ddl='(txn_id BIGINT NOT NULL PRIMARY KEY, txn_date DATETIME NOT NULL, amount DECIMAL(12,2) NOT NULL, KEY (txn_date))'
proxy_sql "CREATE TABLE t_txn $ddl; CREATE TABLE t_txn_h $ddl"
node_sql "$direct_port" "CREATE TABLE t_txn $ddl"

# Rows spread over 6 years back from today (UTC); rows in each overlap window are on the
# newer tier only, on both, or on the older only (seq % 3), as a late ETL leaves them.
date_expr="UTC_DATE() - INTERVAL (seq % 2190) DAY + INTERVAL ((seq * 7919) % 86400) SECOND"
hot="UTC_DATE() - INTERVAL 365 DAY"
warm="UTC_DATE() - INTERVAL 1095 DAY"
win_h="d >= $hot - INTERVAL 2 DAY AND d < $hot"
win_w="d >= $warm - INTERVAL 2 DAY AND d < $warm"
src="(SELECT seq, $date_expr AS d, (seq * 37) % 100000 / 100 AS a FROM seq_1_to_$rows) s"
echo "== loading $rows rows on the tiers, hashed and direct"
# (Waits name the loads' pids: a bare `wait` would also wait for the proxy.)
loads=()
node_sql "$base_port" "INSERT INTO t_txn SELECT seq, d, a FROM $src WHERE d >= $hot OR ($win_h AND seq % 3 < 2)" &
loads+=($!)
node_sql $((base_port + 1)) "INSERT INTO t_txn SELECT seq, d, a FROM $src WHERE (d >= $warm AND d < $hot - INTERVAL 2 DAY) OR ($win_h AND seq % 3 > 0) OR ($win_w AND seq % 3 < 2)" &
loads+=($!)
node_sql $((base_port + 2)) "INSERT INTO t_txn SELECT seq, d, a FROM $src WHERE d < $warm - INTERVAL 2 DAY OR ($win_w AND seq % 3 > 0)" &
loads+=($!)
node_sql "$direct_port" "INSERT INTO t_txn SELECT seq, d, a FROM $src" &
loads+=($!)
for pid in "${loads[@]}"; do
    wait "$pid" || die "loading the rows failed"
done
loads=()
for ((i = 0; i < 3; i++)); do
    lo=$((i * 342))
    hi=$((i == 2 ? 1023 : i * 342 + 341))
    node_sql $((base_port + i)) "INSERT INTO t_txn_h SELECT seq, d, a FROM $src WHERE CRC32(seq) % 1024 BETWEEN $lo AND $hi" &
    loads+=($!)
done
for pid in "${loads[@]}"; do
    wait "$pid" || die "loading the hashed rows failed"
done
for ((i = 0; i < 4; i++)); do
    node_sql $((base_port + i)) "ANALYZE TABLE t_txn" >/dev/null
done

total=$(proxy_sql "SELECT COUNT(*) FROM t_txn")
[[ $total == "$rows" ]] || die "the tiers answer $total rows, expected $rows"

tier_q="SELECT txn_id, txn_date, amount FROM t_txn ORDER BY txn_date DESC, txn_id DESC LIMIT $offset, $page"
hash_q="SELECT txn_id, txn_date, amount FROM t_txn_h ORDER BY txn_date DESC, txn_id DESC LIMIT $offset, $page"

want=$(node_sql "$direct_port" "$tier_q")
[[ $(proxy_sql "$tier_q") == "$want" ]] || die "the tier-aware page differs from the direct node's"
[[ $(proxy_sql "$hash_q") == "$want" ]] || die "the ordered-merge page differs from the direct node's"

sent_ports=("$base_port" $((base_port + 1)) $((base_port + 2)))
tier_rows=$(rows_read "$tier_q")
merge_rows=$(rows_read "$hash_q")
base_sent=$(rows_sent "SELECT txn_id FROM t_txn_h WHERE txn_id < 0")
tier_sent=$(($(rows_sent "$tier_q") - base_sent))
merge_sent=$(($(rows_sent "$hash_q") - base_sent))
t_direct=$(median_time node_sql "$direct_port" "$tier_q")
t_tier=$(median_time proxy_sql "$tier_q")
t_merge=$(median_time proxy_sql "$hash_q")
tier_ratio=$(echo "scale=2; $t_tier / $t_direct" | bc -l)
merge_ratio=$(echo "scale=2; $t_merge / $t_direct" | bc -l)

echo
echo "$(date -u +%F) $(nproc) cores, $(mariadb --version | awk '{print $5}' | tr -d ,), ROWS=$rows OFFSET=$offset RUNS=$runs"
printf '%-36s %10s %12s %12s\n' query "median s" "rows merged" "nodes sent"
printf '%-36s %10s %12s %12s\n' "direct (one MariaDB)" "$t_direct" "-" "-"
printf '%-36s %10s %12s %12s\n' "proxy, tier-aware page" "$t_tier" "$tier_rows" "$tier_sent"
printf '%-36s %10s %12s %12s\n' "proxy, ordered merge (hash table)" "$t_merge" "$merge_rows" "$merge_sent"
echo "tier_rows_read=$tier_rows merge_rows_read=$merge_rows tier_rows_sent=$tier_sent merge_rows_sent=$merge_sent tier_ratio=$tier_ratio merge_ratio=$merge_ratio"
