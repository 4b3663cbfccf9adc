#!/usr/bin/env bash
# TPC-H joins of tables sharded on different keys: the proxy over four shard nodes against one
# MariaDB holding every row, on the same TPC-H data (tpchgen-cli, scale factor SF). Placement
# as tests/differential/tpch.rs: lineitem and orders by order key, customer by customer key,
# part and partsupp by part key, supplier by supplier key (hash_slot, 256 slots a node),
# nation and region broadcast. The queries:
#   q3            TPC-H Q3 (customer, orders, lineitem), the spec's text: unqualified columns
#   q3_qualified  the same query with table aliases and JOIN ... ON (the same answer)
#   q10           TPC-H Q10 (customer, orders, lineitem, nation)
#   q5            TPC-H Q5 (customer, orders, lineitem, supplier, nation, region)
#   point_customer  SELECT ... FROM orders o JOIN customer c ON c.c_custkey = o.o_custkey
#                 WHERE o.o_orderkey = <k>, for QUERIES order keys in one client session
#   point_part    SELECT ... FROM lineitem l JOIN part p ON p.p_partkey = l.l_partkey
#                 WHERE l.l_orderkey = <k>, the same way
# For each: the plan (`shardproxy route`), one warm-up run each way whose answers must be
# equal (sorted first where the query fixes no order), then RUNS timed runs each way,
# alternating, and the median; the rows the proxy copied per execution
# (its metric shardproxy_copied_rows_total: bound, read by a join's keys into a temporary
# table; inline, so and carried inside the statement; whole, by the
# statement's own filter). A query the proxy refuses is reported with its error and the bench
# goes on; a wrong answer is reported (with the first differing lines), and the script exits 1
# at the end.
#
#   BIN=target/release/shardproxy bench/tpch_join.sh
#
# Environment: SF scale factor (default 0.1), QUERIES point joins per session (default 200),
# RUNS timed runs per query and target (default 3), BUFFER_POOL_MB every node's InnoDB buffer
# pool, set at start (default 1024: the direct node holds the whole data set in memory, about
# 200 MB at SF 0.1), TPCHGEN_CLI (default tests/clients/.venv/bin/tpchgen-cli, which
# tests/clients/install.sh installs, else PATH), BIN a shardproxy binary instead of building
# this checkout, CARGO_TARGET_DIR honoured. Ports: shard nodes 3741-3744, direct node 3745,
# proxy 3747, metrics 3748. The last line: for each query NAME,
#   NAME_direct_ms=F NAME_proxy_ms=F NAME_ratio=R NAME_copied_bound=N NAME_copied_inline=N NAME_copied_whole=N
# (ms per execution; copied rows per execution), or NAME=refused / NAME=wrong.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
readonly sf=${SF:-0.1}
readonly queries=${QUERIES:-200}
readonly runs=${RUNS:-3}
readonly buffer_pool_mb=${BUFFER_POOL_MB:-1024}
readonly base_port=3741
readonly shard_count=4
readonly direct_port=$((base_port + shard_count))
readonly proxy_port=3747
readonly metrics_port=3748

die() {
    echo "tpch_join.sh: $*" >&2
    exit 1
}

for v in queries runs buffer_pool_mb; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
if ! [[ $sf =~ ^[0-9]+(\.[0-9]+)?$ ]] || ! awk -v s="$sf" 'BEGIN { exit !(s > 0) }'; then
    die "SF must be a positive number, got '$sf'"
fi

if [[ -n ${TPCHGEN_CLI:-} ]]; then
    tpchgen=$TPCHGEN_CLI
elif [[ -x $repo/tests/clients/.venv/bin/tpchgen-cli ]]; then
    tpchgen=$repo/tests/clients/.venv/bin/tpchgen-cli
else
    tpchgen=$(command -v tpchgen-cli) ||
        die "tpchgen-cli not found: tests/clients/install.sh installs it into tests/clients/.venv, or set TPCHGEN_CLI"
fi
[[ -x $tpchgen ]] || die "$tpchgen is not executable"

bench_traps
command -v mariadb >/dev/null 2>&1 || install_packages mariadb-server mariadb-client
command -v curl >/dev/null 2>&1 || install_packages curl
[[ -n ${BIN:-} ]] || command -v cargo >/dev/null 2>&1 ||
    die "cargo not found: install the Rust toolchain (https://rustup.rs), or set BIN, and retry"
bench_proxy_binary

work=$(mktemp -d /tmp/shardproxy-tpch.XXXXXX)
echo "== generating TPC-H at SF $sf and starting $shard_count shard nodes and 1 direct node in $work"
started=$SECONDS
"$tpchgen" -s "$sf" --output-dir "$work/tbl" >"$work/tpchgen.log" 2>&1 &
gen_pid=$!
bench_pids+=("$gen_pid")
"$repo/scripts/cluster.sh" start "$work" "$((shard_count + 1))" "$base_port"
wait "$gen_pid" || {
    cat "$work/tpchgen.log" >&2
    die "tpchgen-cli failed"
}
bench_pids=()

node_sql() {
    local port=$1
    shift
    mariadb -h127.0.0.1 -P"$port" -uroot -proot --local-infile=1 --batch --skip-column-names shop -e "$*"
}

# table:shard key of the sharded tables; the broadcast ones.
readonly sharded=(lineitem:l_orderkey orders:o_orderkey customer:c_custkey part:p_partkey
    partsupp:ps_partkey supplier:s_suppkey)
readonly broadcast=(nation region)

bench_shard_rules "$shard_count" "$base_port" "$proxy_port" "$metrics_port" "${sharded[@]}" "${broadcast[@]/#/broadcast:}" >"$work/rules.toml"

bench_start_proxy "$bin" "$proxy_port" app app

# Every node the same buffer pool (cluster.sh starts them with 32 MB, which makes loading
# lineitem ten times slower), and the schema of tests/corpus/tpch/schema.sql.
schema=$(grep -v '^--' "$repo/tests/corpus/tpch/schema.sql")
for ((i = 0; i <= shard_count; i++)); do
    node_sql "$((base_port + i))" "SET GLOBAL innodb_buffer_pool_size = $((buffer_pool_mb * 1048576)); $schema"
done

# The direct node loads the .tbl files (LOAD DATA LOCAL: fields end with '|', lines with
# '|\n'). Then each shard node's rows are written out by the direct node, by the same slot
# as the proxy's hash_slot (SELECT ... WHERE (CRC32(key) % 1024) DIV 256 = i INTO OUTFILE),
# and loaded into the shard node: each shard node parses a quarter of the rows, not all of
# them (twice as fast as loading everything into a staging table and INSERT ... SELECT).
echo "== loading SF $sf: every row on the direct node, each shard node its slots' rows"
all_tables=(region nation part supplier partsupp customer orders lineitem)
table_list=$(IFS=,; echo "${all_tables[*]}")
load="SET unique_checks = 0;"
for t in "${all_tables[@]}"; do
    load+=" LOAD DATA LOCAL INFILE '$work/tbl/$t.tbl' INTO TABLE $t FIELDS TERMINATED BY '|' LINES TERMINATED BY '|\n';"
done
node_sql "$direct_port" "$load ANALYZE TABLE $table_list" >/dev/null ||
    die "loading the direct node failed (see the error above)"
mkdir "$work/split"
pids=()
for ((i = 0; i < shard_count; i++)); do
    (
        out="" in="SET unique_checks = 0;"
        for t in "${broadcast[@]}"; do
            in+=" LOAD DATA LOCAL INFILE '$work/tbl/$t.tbl' INTO TABLE $t FIELDS TERMINATED BY '|' LINES TERMINATED BY '|\n';"
        done
        for tk in "${sharded[@]}"; do
            t=${tk%%:*}
            f=$work/split/$t.$i.tbl
            out+=" SELECT * FROM $t WHERE (CRC32(${tk##*:}) % 1024) DIV 256 = $i INTO OUTFILE '$f' FIELDS TERMINATED BY '|';"
            in+=" LOAD DATA LOCAL INFILE '$f' INTO TABLE $t FIELDS TERMINATED BY '|';"
        done
        node_sql "$direct_port" "$out"
        node_sql "$((base_port + i))" "$in ANALYZE TABLE $table_list" >/dev/null
    ) &
    pids+=($!)
done
for p in "${pids[@]}"; do
    wait "$p" || die "loading a shard node failed (see the error above)"
done
rm -rf "$work/split"

# Each sharded table's rows: the shard nodes together hold the direct node's count.
count_sql=""
for tk in "${sharded[@]}" "${broadcast[@]}"; do
    t=${tk%%:*}
    count_sql+="${count_sql:+ UNION ALL }SELECT '$t', COUNT(*) FROM $t"
done
node_sql "$direct_port" "$count_sql" >"$work/count.direct"
for ((i = 0; i < shard_count; i++)); do
    node_sql "$((base_port + i))" "$count_sql"
done >"$work/count.shards"
while read -r t n; do
    if [[ " ${broadcast[*]} " == *" $t "* ]]; then
        m=$(awk -v t="$t" -v n="$n" '$1 == t && $2 != n { bad++ } END { print bad + 0 }' "$work/count.shards")
        ((m == 0)) || die "a shard node does not hold all $n rows of $t"
    else
        m=$(awk -v t="$t" '$1 == t { s += $2 } END { print s + 0 }' "$work/count.shards")
        ((m == n)) || die "the shard nodes hold $m rows of $t, the direct node $n"
    fi
done <"$work/count.direct"
echo "loaded in $((SECONDS - started)) s (with the data generated and the nodes started):" \
    "$(awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 }' "$work/count.direct")"

# The queries: name, then its SQL in $work/NAME.sql (one statement, or QUERIES for a
# session), then how to compare: ordered (the ORDER BY fixes the rows' order, ties aside) or
# sorted (no ORDER BY over the whole answer).
declare -A sql
sql[q3]="select l_orderkey, sum(l_extendedprice * (1 - l_discount)) as revenue, o_orderdate, o_shippriority from customer, orders, lineitem where c_mktsegment = 'BUILDING' and c_custkey = o_custkey and l_orderkey = o_orderkey and o_orderdate < date '1995-03-15' and l_shipdate > date '1995-03-15' group by l_orderkey, o_orderdate, o_shippriority order by revenue desc, o_orderdate limit 10"
sql[q3_qualified]="select l.l_orderkey, sum(l.l_extendedprice * (1 - l.l_discount)) as revenue, o.o_orderdate, o.o_shippriority from customer c join orders o on c.c_custkey = o.o_custkey join lineitem l on l.l_orderkey = o.o_orderkey where c.c_mktsegment = 'BUILDING' and o.o_orderdate < date '1995-03-15' and l.l_shipdate > date '1995-03-15' group by l.l_orderkey, o.o_orderdate, o.o_shippriority order by revenue desc, o.o_orderdate limit 10"
sql[q10]="select c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) as revenue, c_acctbal, n_name, c_address, c_phone, c_comment from customer, orders, lineitem, nation where c_custkey = o_custkey and l_orderkey = o_orderkey and o_orderdate >= date '1993-10-01' and o_orderdate < date '1993-10-01' + interval '3' month and l_returnflag = 'R' and c_nationkey = n_nationkey group by c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment order by revenue desc limit 20"
sql[q5]="select n_name, sum(l_extendedprice * (1 - l_discount)) as revenue from customer, orders, lineitem, supplier, nation, region where c_custkey = o_custkey and l_orderkey = o_orderkey and l_suppkey = s_suppkey and c_nationkey = s_nationkey and s_nationkey = n_nationkey and n_regionkey = r_regionkey and r_name = 'ASIA' and o_orderdate >= date '1994-01-01' and o_orderdate < date '1994-01-01' + interval '1' year group by n_name order by revenue desc"
sql[point_customer]="SELECT o.o_orderkey, o.o_orderdate, c.c_name, c.c_acctbal FROM orders o JOIN customer c ON c.c_custkey = o.o_custkey WHERE o.o_orderkey ="
sql[point_part]="SELECT l.l_orderkey, l.l_linenumber, p.p_name FROM lineitem l JOIN part p ON p.p_partkey = l.l_partkey WHERE l.l_orderkey ="
names=(q3 q3_qualified q10 q5 point_customer point_part)
declare -A compare=([q3]=ordered [q3_qualified]=ordered [q10]=ordered [q5]=ordered
    [point_customer]=ordered [point_part]=sorted)
declare -A execs=([q3]=1 [q3_qualified]=1 [q10]=1 [q5]=1 [point_customer]=$queries [point_part]=$queries)
for n in q3 q3_qualified q10 q5; do
    echo "${sql[$n]};" >"$work/$n.sql"
done

# QUERIES order keys that exist, spread evenly over the orders (TPC-H's keys are sparse).
orders_count=$(node_sql "$direct_port" "SELECT COUNT(*) FROM orders")
((orders_count >= queries)) || die "QUERIES=$queries is more than the $orders_count orders at SF $sf"
node_sql "$direct_port" "SELECT o_orderkey FROM (SELECT o_orderkey, ROW_NUMBER() OVER (ORDER BY o_orderkey) AS rn FROM orders) t WHERE (rn - 1) % $((orders_count / queries)) = 0 ORDER BY o_orderkey LIMIT $queries" >"$work/keys"
for n in point_customer point_part; do
    while read -r k; do
        echo "${sql[$n]} $k;"
    done <"$work/keys" >"$work/$n.sql"
done

copied() {
    curl -s "http://127.0.0.1:$metrics_port/metrics" |
        awk -v how="$1" '$1 == "shardproxy_copied_rows_total{how=\"" how "\"}" { print $2 }' |
        awk '{ s += $1 } END { print s + 0 }'
}

# shellcheck disable=SC2034 # used through the nameref in run_once
client_proxy=(mariadb -h127.0.0.1 -P"$proxy_port" -uapp -papp --batch --skip-column-names shop)
# shellcheck disable=SC2034
client_direct=(mariadb -h127.0.0.1 -P"$direct_port" -uroot -proot --batch --skip-column-names shop)

# run_once TARGET NAME: runs $work/NAME.sql on TARGET in one client session, its answers in
# $work/out.TARGET, its errors in $work/err.TARGET; prints the wall time in seconds. Fails as
# the client does.
run_once() {
    local -n client=client_$1
    local t0 t1
    t0=$(date +%s.%N)
    "${client[@]}" <"$work/$2.sql" >"$work/out.$1" 2>"$work/err.$1" || return 1
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
}

# error_text FILE: the client's error line in FILE (the mariadb client also echoes the statement).
error_text() {
    grep -m1 '^ERROR' "$1" || tr '\n' ' ' <"$1"
}

median() {
    printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

declare -A result
wrong=0
echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the queries;" \
    "$(mariadb --version | sed 's/.*Distrib \([^,]*\),.*/MariaDB \1/'); checkout at $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown);" \
    "proxy $bin built $(date -r "$bin" '+%F %T')"
for n in "${names[@]}"; do
    echo
    echo "== $n (${execs[$n]} statement(s) a run, compared ${compare[$n]})"
    "$bin" route --config "$work/rules.toml" "$(head -n1 "$work/$n.sql" | sed 's/;$//')" |
        sed 's/^/  /' | cut -c1-200
    # The warm-up, and the answers compared.
    run_once direct "$n" >/dev/null || die "the $n query failed on the direct node: $(error_text "$work/err.direct")"
    if ! run_once proxy "$n" >/dev/null; then
        proc_alive "$proxy_pid" || die "the proxy exited during the $n query: $(error_text "$work/err.proxy")"
        echo "$n: REFUSED by the proxy: $(error_text "$work/err.proxy")"
        result[$n]="${n}=refused"
        continue
    fi
    if cmp -s "$work/out.direct" "$work/out.proxy"; then
        how="equal"
    elif sort "$work/out.direct" | cmp -s - <(sort "$work/out.proxy"); then
        if [[ ${compare[$n]} == sorted ]]; then
            how="equal once sorted (no ORDER BY over the whole answer)"
        else
            how="the same rows in another order: ties in the ORDER BY"
        fi
    else
        echo "$n: WRONG ANSWER from the proxy; first differences (< direct, > proxy):"
        diff "$work/out.direct" "$work/out.proxy" | head -n 10 | cut -c1-200 || true
        result[$n]="${n}=wrong"
        wrong=1
        continue
    fi
    echo "answers: $(wc -l <"$work/out.direct") rows, $how"
    b0=$(copied bound)
    i0=$(copied inline)
    w0=$(copied whole)
    td=() tp=() refused=""
    for ((r = 0; r < runs; r++)); do
        t=$(run_once direct "$n") || die "the $n query failed on the direct node: $(error_text "$work/err.direct")"
        td+=("$t")
        if ! t=$(run_once proxy "$n"); then
            proc_alive "$proxy_pid" || die "the proxy exited during the $n query: $(error_text "$work/err.proxy")"
            refused=$(error_text "$work/err.proxy")
            break
        fi
        tp+=("$t")
    done
    if [[ -n $refused ]]; then
        echo "$n: REFUSED by the proxy in a timed run: $refused"
        result[$n]="${n}=refused"
        continue
    fi
    b1=$(copied bound)
    i1=$(copied inline)
    w1=$(copied whole)
    result[$n]=$(awk -v n="$n" -v d="$(median "${td[@]}")" -v p="$(median "${tp[@]}")" \
        -v e="${execs[$n]}" -v runs="$runs" -v b=$((b1 - b0)) -v i=$((i1 - i0)) -v w=$((w1 - w0)) 'BEGIN {
        dm = 1000 * d / e; pm = 1000 * p / e; be = b / (runs * e); ie = i / (runs * e); we = w / (runs * e)
        printf "%s_direct_ms=%.2f %s_proxy_ms=%.2f %s_ratio=%.2f %s_copied_bound=%.1f %s_copied_inline=%.1f %s_copied_whole=%.1f",
            n, dm, n, pm, n, pm / dm, n, be, n, ie, n, we
    }')
    awk -v d="$(median "${td[@]}")" -v p="$(median "${tp[@]}")" -v e="${execs[$n]}" \
        -v runs="$runs" -v b=$((b1 - b0)) -v i=$((i1 - i0)) -v w=$((w1 - w0)) -v all="${td[*]} / ${tp[*]}" 'BEGIN {
        printf "median of %d: direct %.2f ms, proxy %.2f ms (%.2fx) per %s; rows copied per %s: %.1f bound into a table, %.1f bound inside the statement, %.1f whole\n",
            runs, 1000 * d / e, 1000 * p / e, p / d, (e > 1 ? "query" : "run"), (e > 1 ? "query" : "run"),
            b / (runs * e), i / (runs * e), w / (runs * e)
        printf "runs (s, direct / proxy): %s\n", all
    }'
done

echo
line="sf=$sf"
for n in "${names[@]}"; do
    line+=" ${result[$n]}"
done
echo "$line"
((wrong == 0)) || die "the proxy answered at least one query wrongly (above)"
