#!/usr/bin/env bash
# Start the demo: four local MariaDB nodes, the proxy in front of them, and the demo data.
#
#   ./scripts/demo.sh          build, start everything, load demo/shop.sql through the proxy
#   ./scripts/demo.sh stop     stop the proxy and the nodes
#
# Environment:
#   SHARDPROXY_DEMO_DIR   where nodes, logs and pid files live (default /tmp/shardproxy-demo)
#   SHARDPROXY_PROFILE    release (default) or debug
#   CARGO_TARGET_DIR      where cargo builds (default target/ in the repo)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"
readonly demo_dir=${SHARDPROXY_DEMO_DIR:-/tmp/shardproxy-demo}
readonly profile=${SHARDPROXY_PROFILE:-release}
readonly config=$repo/rules/demo.toml
readonly proxy_port=3307
readonly node_count=4
readonly node_baseport=3311
readonly proxy_timeout=30

die() {
    echo "demo.sh: $*" >&2
    exit 1
}


# Prints the pid of the running proxy, if proxy.pid names a live shardproxy process.
running_proxy_pid() {
    local pidfile=$demo_dir/proxy.pid pid
    [[ -f $pidfile ]] || return 1
    pid=$(<"$pidfile")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    proc_alive "$pid" || return 1
    [[ $(cat "/proc/$pid/comm" 2>/dev/null || true) == shardproxy ]] || return 1
    echo "$pid"
}

stop_proxy() {
    local pid i
    if pid=$(running_proxy_pid); then
        echo "demo.sh: stopping proxy (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do
            proc_alive "$pid" || break
            sleep 0.1
        done
        if proc_alive "$pid"; then
            echo "demo.sh: proxy still alive after 10s, sending SIGKILL" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$demo_dir/proxy.pid"
}

install_mariadb_if_missing() {
    if command -v mariadbd >/dev/null 2>&1 || [[ -x /usr/sbin/mariadbd ]]; then
        return 0
    fi
    install_packages mariadb-server mariadb-client
}

build() {
    command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"
    case $profile in
    release)
        echo "demo.sh: building shardproxy (release): about 14 minutes on a fresh 2-core machine, seconds once built"
        (cd "$repo" && cargo build --release)
        ;;
    debug)
        echo "demo.sh: building shardproxy (debug): about 5 minutes on a fresh 2-core machine, seconds once built"
        (cd "$repo" && cargo build)
        ;;
    *)
        die "SHARDPROXY_PROFILE must be release or debug, got '$profile'"
        ;;
    esac
}

# True when something accepts TCP connections on 127.0.0.1:$1.
port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

proxy_answers() {
    mariadb -h127.0.0.1 -P"$proxy_port" -uapp -papp -e 'select 1' >/dev/null 2>&1
}

start_proxy() {
    local bin=$1 pid deadline
    stop_proxy
    if port_in_use "$proxy_port"; then
        die "port $proxy_port is already in use by another process (not the proxy started by this script)"
    fi
    echo "demo.sh: starting proxy on 127.0.0.1:$proxy_port (log: $demo_dir/proxy.log)"
    # The proxy serves a copy: admin changes (SET SLOTS, ADD NODE) rewrite the file it serves,
    # and they belong to this demo, not to the repository's example.
    [[ -f $demo_dir/rules.toml ]] || cp "$config" "$demo_dir/rules.toml"
    (
        cd "$repo" || exit 1
        setsid nohup "$bin" serve --config "$demo_dir/rules.toml" </dev/null >>"$demo_dir/proxy.log" 2>&1 &
        echo "$!" >"$demo_dir/proxy.pid"
    )
    pid=$(<"$demo_dir/proxy.pid")
    deadline=$((SECONDS + proxy_timeout))
    until proxy_answers; do
        if ! proc_alive "$pid"; then
            echo "demo.sh: the proxy exited; tail of $demo_dir/proxy.log:" >&2
            tail -n 30 "$demo_dir/proxy.log" >&2 || true
            exit 1
        fi
        if ((SECONDS >= deadline)); then
            echo "demo.sh: the proxy did not answer on port $proxy_port within ${proxy_timeout}s; tail of $demo_dir/proxy.log:" >&2
            tail -n 30 "$demo_dir/proxy.log" >&2 || true
            exit 1
        fi
        sleep 0.2
    done
}

print_help() {
    local bin=$1
    local rel=${bin#"$repo"/}
    cat <<EOF

The demo is running: 4 MariaDB nodes (127.0.0.1:3311-3314) behind shardproxy on 127.0.0.1:$proxy_port.

Connect:
  mariadb -h127.0.0.1 -P$proxy_port -uapp -papp shop

Try:
  SELECT * FROM t_order WHERE user_id = 7;                       -- one shard
  SELECT status, COUNT(*), SUM(amount) FROM t_order GROUP BY status ORDER BY status;   -- all shards, merged
  SELECT order_id, user_id, created_at FROM t_order ORDER BY created_at DESC LIMIT 5;  -- merge-sorted
  SELECT * FROM t_order_item WHERE user_id = 7;                  -- same shard as user 7's orders
  SELECT * FROM t_country;                                       -- broadcast table, read from one node
  SELECT * FROM t_merchant;                                      -- single table on ds1
  SELECT * FROM t_user WHERE user_id = 7;                        -- unlisted table, default node ds0
  INSERT INTO t_order (user_id, status) VALUES (7, 'created'); SELECT LAST_INSERT_ID();  -- snowflake id
  SELECT * FROM t_account WHERE account_id BETWEEN 990 AND 1010;  -- range rule: ds0 and ds1
  SELECT COUNT(*) FROM t_tenant_doc WHERE tenant_id = 42;         -- directory: tenant 42 on ds3
  SELECT txn_id, txn_date FROM t_txn ORDER BY txn_date DESC LIMIT 300, 10;   -- tier-aware page
  SELECT YEAR(txn_date) y, COUNT(*), SUM(amount) FROM t_txn GROUP BY y ORDER BY y;  -- across tiers
  SELECT * FROM t_txn WHERE serial_no = 'TX000042';               -- poll: newest tier first

See where a statement goes:
  $rel route --config rules/demo.toml "SELECT * FROM t_order WHERE user_id = 7"
  $rel route --config rules/demo.toml "SELECT * FROM t_txn ORDER BY txn_date DESC LIMIT 300, 10"

Operate it (admin interface; the rules it serves: $demo_dir/rules.toml):
  mariadb -h127.0.0.1 -P3308 -uops -pops -e 'SHOW RULES; SHOW SLOTS FOR t_order; SHOW NODES'
  mariadb -h127.0.0.1 -P3308 -uops -pops -e "PREVIEW SELECT COUNT(*) FROM t_order"

Move slots to another node while it serves (dual writes, backfill, verify, cutover, cleanup):
  $rel migrate slots 0-255 --table t_order --to ds3 --auto
  mariadb -h127.0.0.1 -P3308 -uops -pops -e 'SHOW MIGRATIONS'

Logs: $demo_dir/proxy.log, $demo_dir/node*.err
Stop: ./scripts/demo.sh stop
EOF
}

cmd_start() {
    local bin
    install_mariadb_if_missing
    build
    bin=$(cargo_target_dir)/$profile/shardproxy
    [[ -x $bin ]] || die "$bin not found after the build"

    mkdir -p "$demo_dir"
    BINLOG=1 "$repo/scripts/cluster.sh" start "$demo_dir" "$node_count" "$node_baseport"
    # The metadata schema of rules/demo.toml ([metadata]) lives on ds0's server.
    mariadb -h127.0.0.1 -P"$node_baseport" -uroot -proot -e 'CREATE DATABASE IF NOT EXISTS shardproxy_meta'
    start_proxy "$bin"

    echo "demo.sh: loading demo/shop.sql and demo/tiers.sql through the proxy"
    mariadb -h127.0.0.1 -P"$proxy_port" -uapp -papp shop <"$repo/demo/shop.sql"
    mariadb -h127.0.0.1 -P"$proxy_port" -uapp -papp shop <"$repo/demo/tiers.sql"
    print_help "$bin"
}

cmd_stop() {
    stop_proxy
    "$repo/scripts/cluster.sh" stop "$demo_dir"
}

case ${1:-start} in
start) cmd_start ;;
stop) cmd_stop ;;
*)
    echo "usage: ./scripts/demo.sh [start|stop]" >&2
    exit 2
    ;;
esac
