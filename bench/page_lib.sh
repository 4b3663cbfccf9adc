# shellcheck shell=bash
# What the deep-page benches (tier_page.sh, key_page.sh) measure alike: the rows the proxy's
# merge read for one query (its metric), the rows the nodes sent for it (their Rows_sent), and
# the median time of RUNS runs. Sourced after the caller sets metrics_port, runs, sent_ports
# (the nodes behind the proxy, an array) and defines node_sql PORT SQL and proxy_sql SQL.

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
