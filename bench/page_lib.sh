# shellcheck shell=bash
# What the deep-page benches (tier_page.sh, key_page.sh) share: their set-up (page_setup:
# the settings checked, the packages, the release build, the nodes started) and their
# measures: the rows the proxy's merge read for one query (its metric), the rows the nodes
# sent for it (their Rows_sent), and the median time of RUNS runs. Sourced after the caller
# sets repo, rows, runs, offset, page, base_port, proxy_port, metrics_port and defines die;
# sent_ports (the nodes behind the proxy, an array) before the measures.

# Checks the settings, installs what is missing, builds the release proxy (bin) and starts
# $2 nodes from base_port in a new temp dir named after $1 (work).
page_setup() {
    local name=$1 nodes=$2 v i
    for v in rows runs offset; do
        [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
    done
    ((rows > offset + page)) || die "ROWS must exceed OFFSET + $page"
    bench_traps
    command -v mariadb >/dev/null 2>&1 || install_packages mariadb-server mariadb-client
    command -v curl >/dev/null 2>&1 || install_packages curl
    command -v bc >/dev/null 2>&1 || install_packages bc
    command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"
    echo "== building shardproxy (release): about 14 minutes on a fresh 2-core machine, seconds once built"
    (cd "$repo" && cargo build --release)
    bin=$repo/target/release/shardproxy
    [[ -x $bin ]] || die "$bin not found after the build"
    work=$(mktemp -d "/tmp/shardproxy-$name.XXXXXX")
    echo "== starting $nodes nodes in $work"
    "$repo/scripts/cluster.sh" start "$work" "$nodes" "$base_port"
    for ((i = 0; i < nodes; i++)); do
        node_sql $((base_port + i)) "SET GLOBAL innodb_buffer_pool_size = 268435456"
    done
}

node_sql() {
    local port=$1
    shift
    mariadb -h127.0.0.1 -P"$port" -uroot -proot --batch --skip-column-names shop -e "$*"
}

proxy_sql() {
    mariadb -h127.0.0.1 -P"$proxy_port" -uapp -papp --batch --skip-column-names --quick shop -e "$*"
}

rows_merged() {
    curl -s "http://127.0.0.1:$metrics_port/metrics" | awk '$1 == "shardproxy_rows_merged_total" { print $2 }'
}

rows_read() {
    local before after
    before=$(rows_merged)
    proxy_sql "$1" >/dev/null
    after=$(rows_merged)
    echo $((after - before))
}

median_time() {
    local i t start
    local -a times=()
    for ((i = 0; i < runs; i++)); do
        start=$(date +%s.%N)
        "$@" >/dev/null
        t=$(echo "$(date +%s.%N) - $start" | bc -l)
        times+=("$t")
    done
    printf '%s\n' "${times[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

# A status counter summed over the nodes behind the proxy.
status_sum() {
    local var=$1 total=0 port v
    for port in "${sent_ports[@]}"; do
        v=$(node_sql "$port" "SHOW GLOBAL STATUS LIKE '$var'" | awk '{ print $2 }')
        total=$((total + v))
    done
    echo "$total"
}

# Rows the nodes sent for one run of $1 (less what a session that returns nothing costs
# them: subtract rows_sent of such a query).
rows_sent() {
    local s0 s1
    s0=$(status_sum Rows_sent)
    proxy_sql "$1" >/dev/null
    s1=$(status_sum Rows_sent)
    echo $((s1 - s0))
}
