#!/usr/bin/env bash
# A global secondary index: what a read by it costs against the scatter it replaces, what
# keeping it costs a write, and how fast CREATE GLOBAL INDEX builds it, in one run.
#
#   bench/global_index.sh
#
# Four shard nodes behind the proxy hold t_member and t_plain (user_id BIGINT PRIMARY KEY,
# email UNIQUE, phone KEY, name), both hash_slot by user_id, ROWS rows each loaded through the
# proxy (email u<id>@example.com, phone 5550000000+id); a fifth node holds t_member whole
# (the yardstick: one MariaDB). Then `CREATE UNIQUE GLOBAL INDEX email ON t_member` on the
# admin interface, timed. Then, CLIENTS connections for TIME seconds each (prepared
# statements, random ids, every answer checked by bench/index_load.rs), each after WARMUP
# unmeasured seconds of the same load:
#   email          SELECT * FROM t_member WHERE email = ?   (by the index: index node, row node)
#   phone          SELECT * FROM t_member WHERE phone = ?   (a scatter: same selectivity)
#   direct_email   the email read on the fifth node, no proxy
#   insert_member  autocommit INSERT (user_id, email, phone, name), fresh ids, into t_member
#   insert_plain   the same into t_plain (no global index)
#   name_member    autocommit UPDATE t_member SET name = ? WHERE email = ?, a random id's email,
#                  fresh names (by the index: index node, row node)
#   name_phone     the same WHERE phone = ? (a scatter: same selectivity)
#   update_member  autocommit UPDATE t_member SET email = ? WHERE user_id = ?, fresh emails
#   update_plain   the same on t_plain
#   replace_member autocommit REPLACE INTO t_member (user_id, email, phone, name) of a random
#                  existing id, a fresh email (the old row out, the new in)
#   replace_plain  the same into t_plain
# (the name phases run before update_member and replace_member, which change emails: an
# email u<id>@example.com must still name its row)
# For each: QPS, latency, the node statements per query as the proxy counts them
# (shardproxy_node_statement_seconds_count: the statements whose rows or OK it relays or
# reads) and as the nodes count them (Questions: every statement, the proxy's BEGIN / XA /
# COMMIT too), the CPU per query of the proxy and of the nodes, and the client statements
# by route (shardproxy_statements_total). At the end every row of t_member must have exactly
# its entry in the index table.
#
# Environment: ROWS (default 100000), CLIENTS (8), TIME seconds per phase (20), WARMUP
# seconds (3, 0 for none), BIN a shardproxy binary instead of building this checkout,
# CARGO_TARGET_DIR honoured. Nodes keep MariaDB's durable defaults (every COMMIT, XA PREPARE
# and XA COMMIT flushes the log). Ports: shard nodes 3761-3764, direct node 3765, proxy 3767,
# admin 3768, metrics 3769. Everything started here is stopped and removed on exit. The
# last line of output:
#   rows=N clients=N time=N build_s=F build_rows_per_s=N email_qps=N phone_qps=N
#   email_vs_phone=R direct_email_qps=N email_vs_direct=R email_node_stmts=F ...
#   insert_ratio=R name_qps=N name_phone_qps=N name_vs_phone=R name_node_stmts=F ...
#   update_ratio=R replace_member_qps=N replace_plain_qps=N replace_ratio=R errors=N wrong=N
#   index_exact=yes|no
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
readonly rows=${ROWS:-100000}
readonly clients=${CLIENTS:-8}
readonly duration=${TIME:-20}
readonly warmup=${WARMUP:-3}
readonly shard_count=4
readonly base_port=3761
readonly direct_port=3765
readonly proxy_port=3767
readonly admin_port=3768
readonly metrics_port=3769
readonly phases=(email phone direct_email insert_member insert_plain name_member name_phone
    update_member update_plain replace_member replace_plain)

die() {
    echo "global_index.sh: $*" >&2
    exit 1
}

for v in rows clients duration; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, got '${!v}'"
done
[[ $warmup =~ ^[0-9]+$ ]] || die "WARMUP must be a non-negative integer, got '$warmup'"

bench_traps

command -v mariadb >/dev/null 2>&1 || install_packages mariadb-server mariadb-client
command -v curl >/dev/null 2>&1 || install_packages curl
command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"

bench_binaries index_load
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ $commit != unknown && -n $(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null) ]]; then
    commit+="+dirty"
fi

work=$(mktemp -d /tmp/shardproxy-gsi.XXXXXX)
echo "== starting $shard_count shard nodes and 1 direct node in $work"
"$repo/scripts/cluster.sh" start "$work" $((shard_count + 1)) "$base_port"

# The rules: both tables hash_slot by user_id in four equal slot ranges, an admin interface
# (CREATE GLOBAL INDEX edits this file) and no [metadata] (a build needs one proxy).
{
    bench_shard_rules "$shard_count" "$base_port" "$proxy_port" "$metrics_port" \
        t_member:user_id t_plain:user_id
    printf '\n[admin]\nlisten = "127.0.0.1:%s"\n' "$admin_port"
    printf 'users = [{ name = "ops", password = "ops" }]\n'
} >"$work/rules.toml"
bench_start_proxy "$bin" "$proxy_port" app app

proxy_sql() { mariadb -h127.0.0.1 -P"$proxy_port" -uapp -papp -N -B shop -e "$1"; }
node_sql() { mariadb -h127.0.0.1 -P"$1" -uroot -proot -N -B shop -e "$2"; }
admin_sql() { mariadb -h127.0.0.1 -P"$admin_port" -uops -pops -e "$1"; }

table_sql() {
    echo "CREATE TABLE $1 (user_id BIGINT PRIMARY KEY, email VARCHAR(100) NOT NULL," \
        "phone BIGINT NOT NULL, name VARCHAR(50), UNIQUE KEY (email), KEY (phone))" \
        "DEFAULT CHARSET=utf8mb4"
}

# Multi-row INSERTs of 1000 rows into table $1: ids 1..rows.
inserts() {
    awk -v n="$rows" -v t="$1" 'BEGIN {
        for (i = 1; i <= n; i += 1000) {
            printf "INSERT INTO %s (user_id, email, phone, name) VALUES ", t
            for (j = i; j < i + 1000 && j <= n; j++)
                printf "%s(%d,\047u%d@example.com\047,%.0f,\047name%d\047)", (j > i ? "," : ""), j, j, 5550000000 + j, j
            print ";"
        } }'
}

echo "== loading $rows rows into t_member and t_plain through the proxy, and t_member on the direct node"
for t in t_member t_plain; do
    proxy_sql "$(table_sql "$t")"
    inserts "$t" | mariadb -h127.0.0.1 -P"$proxy_port" -uapp -papp shop ||
        die "loading $t through the proxy failed"
    n=$(proxy_sql "SELECT COUNT(*) FROM $t")
    [[ $n == "$rows" ]] || die "$t holds $n rows through the proxy, expected $rows"
done
node_sql "$direct_port" "$(table_sql t_member); INSERT INTO t_member SELECT seq,
    CONCAT('u', seq, '@example.com'), 5550000000 + seq, CONCAT('name', seq) FROM seq_1_to_$rows"
for ((i = 0; i < shard_count; i++)); do
    echo "  shard ds$i: $(node_sql $((base_port + i)) "SELECT COUNT(*) FROM t_member") rows of t_member"
done

echo "== CREATE UNIQUE GLOBAL INDEX email ON t_member (admin interface)"
t0=$EPOCHREALTIME
admin_sql "CREATE UNIQUE GLOBAL INDEX email ON t_member" || die "CREATE UNIQUE GLOBAL INDEX failed"
t1=$EPOCHREALTIME
build_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
build_rate=$(awk -v s="$build_s" -v n="$rows" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
echo "  built in ${build_s}s: $build_rate rows/s"
admin_sql "SHOW GLOBAL INDEXES" | tee "$work/indexes.txt"
grep -q public "$work/indexes.txt" || die "the index is not public after CREATE"
entries=0
for ((i = 0; i < shard_count; i++)); do
    entries=$((entries + $(node_sql $((base_port + i)) "SELECT COUNT(*) FROM t_member_email_gsi")))
done
((entries == rows)) || die "the index holds $entries entries, expected $rows"

shard_pids=()
for ((i = 0; i < shard_count; i++)); do
    shard_pids+=("$(<"$work/node$i.pid")")
done
direct_pid=$(<"$work/node$shard_count.pid")
hz=$(getconf CLK_TCK)
readonly hz
ncpu=$(nproc)
readonly ncpu

# Prints the proxy's metrics of interest as NAME{LABELS} VALUE lines.
metrics() {
    curl -sf "http://127.0.0.1:$metrics_port/metrics" |
        grep -E '^(shardproxy_node_statement_seconds_count|shardproxy_statements_total)\{' || true
}

# Prints the Questions counter of every node (the shards, then the direct node), one a line.
questions() {
    local p
    for ((p = base_port; p <= direct_port; p++)); do
        node_sql "$p" "SHOW GLOBAL STATUS LIKE 'Questions'" | cut -f2
    done
}

# Prints A / B with two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

# Prints µs of CPU per query for TICKS clock ticks over QUERIES queries.
us_per_query() {
    awk -v t="$1" -v hz="$hz" -v q="$2" 'BEGIN { printf "%.0f", (q > 0 ? t / hz * 1e6 / q : 0) }'
}

# The value of key $2 in client line $1.
field() { sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" <<<"$1"; }

# load URL KIND TABLE SECS RUN: one run of the client (RUN numbers it: no two runs write the
# same ids or emails); prints its line.
load() {
    "$client" "$1" "$2" "$3" "$clients" "$4" "$rows" "$5"
}
run_no=0

declare -A res
proxy_url="mysql://app:app@127.0.0.1:$proxy_port/shop"
direct_url="mysql://root:root@127.0.0.1:$direct_port/shop"

# run_phase NAME: warm-up, then the measured run with the counters read around it.
run_phase() {
    local name=$1 url=$proxy_url kind table=t_member line q0 q1 p0 p1 n0 n1 c0 c1 b0 b1 t0 t1
    local queries secs i
    [[ $name == direct_* ]] && url=$direct_url
    [[ $name == *_plain ]] && table=t_plain
    case $name in
    *email) kind=email ;;
    phone) kind=phone ;;
    insert_*) kind=insert ;;
    update_*) kind=update ;;
    name_member) kind=name_email ;;
    name_phone) kind=name_phone ;;
    replace_*) kind=replace ;;
    esac
    if ((warmup > 0)); then
        run_no=$((run_no + 1))
        load "$url" "$kind" "$table" "$warmup" "$run_no" >"$work/warmup-$name.txt" ||
            die "the warm-up of $name failed: $(cat "$work/warmup-$name.txt")"
    fi
    run_no=$((run_no + 1))
    metrics >"$work/m0-$name.txt"
    mapfile -t q0 < <(questions)
    p0=$(cpu_ticks "$proxy_pid")
    n0=$(cpu_ticks "${shard_pids[@]}" "$direct_pid")
    c0=$(children_ticks)
    b0=$(machine_busy_ticks)
    t0=$EPOCHREALTIME
    line=$(load "$url" "$kind" "$table" "$duration" "$run_no") || die "the client of $name failed"
    t1=$EPOCHREALTIME
    b1=$(machine_busy_ticks)
    c1=$(children_ticks)
    n1=$(cpu_ticks "${shard_pids[@]}" "$direct_pid")
    p1=$(cpu_ticks "$proxy_pid")
    mapfile -t q1 < <(questions)
    metrics >"$work/m1-$name.txt"
    queries=$(($(field "$line" queries) + $(field "$line" errors)))
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
    res[$name.qps]=$(field "$line" qps)
    res[$name.p50]=$(field "$line" p50_us)
    res[$name.p99]=$(field "$line" p99_us)
    res[$name.errors]=$(field "$line" errors)
    res[$name.wrong]=$(field "$line" wrong)
    res[$name.codes]=$(field "$line" codes)
    # Node statements per query as the proxy counts them, and the nodes (less the one
    # SHOW GLOBAL STATUS of each node's second reading).
    res[$name.stmts]=$(awk -v q="$queries" '
        /^shardproxy_node_statement_seconds_count/ { if (FILENAME == ARGV[1]) a += $2; else b += $2 }
        END { printf "%.2f", (q > 0 ? (b - a) / q : 0) }' "$work/m0-$name.txt" "$work/m1-$name.txt")
    local qs=0 spread=""
    for ((i = 0; i <= shard_count; i++)); do
        qs=$((qs + q1[i] - q0[i] - 1))
        spread+="${spread:+/}$((q1[i] - q0[i] - 1))"
    done
    res[$name.questions]=$(awk -v s="$qs" -v q="$queries" 'BEGIN { printf "%.2f", (q > 0 ? s / q : 0) }')
    res[$name.spread]=$spread
    res[$name.routes]=$(awk '
        /^shardproxy_statements_total/ { if (FILENAME == ARGV[1]) a[$1] = $2; else b[$1] = $2 }
        END { for (k in b) if (b[k] - a[k] > 0) { r = k; gsub(/.*\{|\}/, "", r); gsub(/"/, "", r)
            printf "%s%s:%d", (n++ ? " " : ""), r, b[k] - a[k] } }' \
        "$work/m0-$name.txt" "$work/m1-$name.txt")
    res[$name.proxy_us]=-
    [[ $url == "$proxy_url" ]] && res[$name.proxy_us]=$(us_per_query $((p1 - p0)) "$queries")
    res[$name.nodes_us]=$(us_per_query $((n1 - n0)) "$queries")
    res[$name.others]=$(awk -v t=$((b1 - b0 - (c1 - c0) - (p1 - p0) - (n1 - n0))) -v hz="$hz" \
        -v n="$ncpu" -v s="$secs" \
        'BEGIN { v = (s > 0 ? 100 * t / (hz * n * s) : 0); printf "%.0f%%", (v < 0 ? 0 : v) }')
    printf '%-14s %7s %8s %8s %6s %5s %10s %13s %9s %9s %6s\n' "$name" "${res[$name.qps]}" \
        "${res[$name.p50]}" "${res[$name.p99]}" "${res[$name.errors]}" "${res[$name.wrong]}" \
        "${res[$name.stmts]}" "${res[$name.questions]}" "${res[$name.proxy_us]}" \
        "${res[$name.nodes_us]}" "${res[$name.others]}"
}

idle_before=$(cpu_idle_pct)
echo "== measuring (CPU ${idle_before}% idle over the last 2 s, load average" \
    "$(cut -d' ' -f1-3 /proc/loadavg)): $clients clients, ${warmup}s warm-up and ${duration}s per phase"
echo "(node_stmts/q: proxy's count of node statements; questions/q: the nodes' own count;"
echo " others: CPU used by processes outside the bench during the phase, in % of the machine)"
printf '%-14s %7s %8s %8s %6s %5s %10s %13s %9s %9s %6s\n' phase QPS p50_us p99_us errors wrong \
    node_stmts/q questions/q proxy_us/q nodes_us/q others
for phase in "${phases[@]}"; do
    run_phase "$phase"
done

echo "== checking the index: every row of t_member has exactly its entry"
for ((i = 0; i < shard_count; i++)); do
    node_sql $((base_port + i)) "SELECT email, user_id FROM t_member"
done | sort >"$work/rows.txt"
for ((i = 0; i < shard_count; i++)); do
    node_sql $((base_port + i)) "SELECT email, user_id FROM t_member_email_gsi"
done | sort >"$work/entries.txt"
index_exact=yes
if ! cmp -s "$work/rows.txt" "$work/entries.txt"; then
    index_exact=no
    echo "  rows without their entry, or entries without their row (first 10):"
    diff "$work/rows.txt" "$work/entries.txt" | grep '^[<>]' | head -n 10
fi
echo "  $(wc -l <"$work/rows.txt") rows, $(wc -l <"$work/entries.txt") entries: exact=$index_exact"

machine="$(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
bench_cleanup

echo
echo "date=$(date +%F) machine=\"$machine\" commit=$commit rows=$rows clients=$clients" \
    "time=${duration}s warmup=${warmup}s cpu_idle_before=${idle_before}%"
echo "build: ${build_s}s for $rows rows ($build_rate rows/s)"
errors=0
wrong=0
for phase in "${phases[@]}"; do
    echo "$phase: ${res[$phase.qps]} QPS, p50 ${res[$phase.p50]} µs, p99 ${res[$phase.p99]} µs," \
        "errors ${res[$phase.errors]} (${res[$phase.codes]}), wrong answers ${res[$phase.wrong]}"
    echo "  node statements per query: ${res[$phase.stmts]} (proxy's count)," \
        "${res[$phase.questions]} (nodes' Questions; ds0/ds1/ds2/ds3/direct: ${res[$phase.spread]})"
    echo "  client statements by route: ${res[$phase.routes]:--}"
    errors=$((errors + res[$phase.errors]))
    wrong=$((wrong + res[$phase.wrong]))
done

q() { echo "${res[$1.qps]}"; }
echo "rows=$rows clients=$clients time=$duration build_s=$build_s build_rows_per_s=$build_rate" \
    "email_qps=$(q email) phone_qps=$(q phone) email_vs_phone=$(ratio "$(q email)" "$(q phone)")" \
    "direct_email_qps=$(q direct_email) email_vs_direct=$(ratio "$(q email)" "$(q direct_email)")" \
    "email_node_stmts=${res[email.stmts]} phone_node_stmts=${res[phone.stmts]}" \
    "email_questions=${res[email.questions]} phone_questions=${res[phone.questions]}" \
    "insert_member_qps=$(q insert_member) insert_plain_qps=$(q insert_plain)" \
    "insert_ratio=$(ratio "$(q insert_member)" "$(q insert_plain)")" \
    "name_qps=$(q name_member) name_phone_qps=$(q name_phone)" \
    "name_vs_phone=$(ratio "$(q name_member)" "$(q name_phone)")" \
    "name_node_stmts=${res[name_member.stmts]} name_phone_node_stmts=${res[name_phone.stmts]}" \
    "name_questions=${res[name_member.questions]} name_phone_questions=${res[name_phone.questions]}" \
    "update_member_qps=$(q update_member) update_plain_qps=$(q update_plain)" \
    "update_ratio=$(ratio "$(q update_member)" "$(q update_plain)")" \
    "replace_member_qps=$(q replace_member) replace_plain_qps=$(q replace_plain)" \
    "replace_ratio=$(ratio "$(q replace_member)" "$(q replace_plain)")" \
    "errors=$errors wrong=$wrong index_exact=$index_exact"
((errors == 0 && wrong == 0)) || die "the client met $errors errors and $wrong wrong answers"
[[ $index_exact == yes ]] || die "the index does not match t_member's rows"
