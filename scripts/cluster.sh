#!/usr/bin/env bash
# Manage N local MariaDB nodes on 127.0.0.1, without systemd.
#
#   scripts/cluster.sh start DIR N BASEPORT   start nodes 0..N-1 on ports BASEPORT..BASEPORT+N-1
#   scripts/cluster.sh stop DIR               stop every node whose pid file is in DIR
#
# Layout under DIR:
#   template/     datadir made once by mariadb-install-db (root password "root")
#   nodeI/        datadir of node I (a copy of template/)
#   nodeI.pid     pid file, nodeI.sock socket, nodeI.err error log, nodeI.out stdout/stderr
#
# Every node accepts root/root over TCP from 127.0.0.1 and has an empty database `shop`.
# BINLOG=1 in the environment: nodes keep a ROW binary log (moves copy changes from it).
set -euo pipefail

readonly START_TIMEOUT=60
readonly STOP_TIMEOUT=30

usage() {
    cat >&2 <<'EOF'
usage: scripts/cluster.sh start DIR N BASEPORT
       scripts/cluster.sh stop DIR
EOF
    exit 2
}

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

die() {
    echo "cluster.sh: $*" >&2
    exit 1
}

# Find a MariaDB program on PATH or in /usr/sbin (where Debian puts mariadbd).
find_prog() {
    local name=$1
    if command -v "$name" >/dev/null 2>&1; then
        command -v "$name"
    elif [[ -x /usr/sbin/$name ]]; then
        echo "/usr/sbin/$name"
    elif [[ -x /usr/bin/$name ]]; then
        echo "/usr/bin/$name"
    else
        return 1
    fi
}

is_uint() {
    [[ $1 =~ ^[0-9]+$ ]]
}


# True when the pid in file $1 is a live mariadbd process.
pidfile_alive() {
    local pidfile=$1 pid comm
    [[ -f $pidfile ]] || return 1
    pid=$(<"$pidfile")
    is_uint "$pid" || return 1
    proc_alive "$pid" || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
    [[ $comm == mariadbd ]]
}

abs_dir() {
    mkdir -p "$1"
    (cd "$1" && pwd)
}

make_template() {
    local dir=$1 install_db=$2
    local template=$dir/template
    local tmp=$dir/template.tmp
    local extra=$dir/template-init.sql

    if [[ -f $template/.shardproxy-template-ok ]]; then
        return 0
    fi
    echo "cluster.sh: creating template datadir $template"
    rm -rf "$template" "$tmp"
    mkdir -p "$tmp"
    # mariadb-install-db requires the extra file to begin with FLUSH PRIVILEGES, so that the
    # grant tables it has just filled are loaded before these statements use them.
    # TCP clients come from 127.0.0.1 (and --skip-name-resolve is on), so root@127.0.0.1 and
    # root@% get the password too; the passwordless root@<hostname> and root@::1 accounts that
    # "normal" authentication creates are removed.
    cat >"$extra" <<'EOF'
FLUSH PRIVILEGES;
ALTER USER 'root'@'localhost' IDENTIFIED BY 'root';
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY 'root';
ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY 'root';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY 'root';
ALTER USER 'root'@'%' IDENTIFIED BY 'root';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
DELETE FROM mysql.global_priv WHERE User = 'root' AND Host NOT IN ('localhost', '127.0.0.1', '%');
FLUSH PRIVILEGES;
EOF
    if ! "$install_db" --no-defaults --user=root --datadir="$tmp" \
        --auth-root-authentication-method=normal --skip-test-db \
        --extra-file="$extra" >"$dir/template.log" 2>&1; then
        tail -n 30 "$dir/template.log" >&2
        die "mariadb-install-db failed (full log: $dir/template.log)"
    fi
    rm -f "$extra"
    touch "$tmp/.shardproxy-template-ok"
    mv "$tmp" "$template"
}

# Prints the datadir of the server answering on port $2 (no output if none answers).
node_datadir() {
    local client=$1 port=$2
    "$client" -h127.0.0.1 -P"$port" -uroot -proot -N -B -e 'select @@datadir' 2>/dev/null || true
}

tail_err() {
    local file=$1
    echo "--- tail of $file ---" >&2
    tail -n 30 "$file" >&2 2>/dev/null || echo "(no log)" >&2
}

cmd_start() {
    [[ $# -eq 3 ]] || usage
    local dir=$1 n=$2 baseport=$3
    if ! is_uint "$n" || ((10#$n < 1)); then
        die "N must be a positive integer, got '$n'"
    fi
    is_uint "$baseport" || die "BASEPORT must be a port number, got '$baseport'"
    n=$((10#$n))
    baseport=$((10#$baseport))
    ((baseport >= 1024 && baseport + n - 1 <= 65535)) ||
        die "ports $baseport..$((baseport + n - 1)) are outside 1024..65535"
    if ((baseport <= 3306 && 3306 <= baseport + n - 1)); then
        die "refusing to use port 3306 (the default MySQL/MariaDB port); choose another BASEPORT"
    fi

    if ! find_prog mariadbd >/dev/null; then
        install_packages mariadb-server mariadb-client
    fi
    local mariadbd install_db client
    mariadbd=$(find_prog mariadbd) || die "mariadbd not found after installing mariadb-server"
    install_db=$(find_prog mariadb-install-db) || die "mariadb-install-db not found"
    client=$(find_prog mariadb) || die "mariadb client not found (install mariadb-client)"

    dir=$(abs_dir "$dir")
    make_template "$dir" "$install_db"

    # Start every node first, then wait for them all: they boot in parallel.
    local i port pidfile
    local -a started_pids=()
    for ((i = 0; i < n; i++)); do
        port=$((baseport + i))
        pidfile=$dir/node$i.pid
        started_pids[i]=""
        if pidfile_alive "$pidfile"; then
            echo "cluster.sh: node $i already running (pid $(<"$pidfile"))"
            continue
        fi
        rm -f "$pidfile" "$dir/node$i.sock"
        if [[ ! -d $dir/node$i ]]; then
            cp -a "$dir/template" "$dir/node$i"
        fi
        # BINLOG=1: a ROW binary log, so that moves copy their changes from it.
        local binlog=()
        if [[ ${BINLOG:-0} == 1 ]]; then
            binlog=(--log-bin="$dir/node$i/binlog" --binlog-format=ROW --server-id=$((i + 1)))
        fi
        setsid nohup "$mariadbd" --no-defaults --user=root \
            --datadir="$dir/node$i" \
            --port="$port" \
            --socket="$dir/node$i.sock" \
            --bind-address=127.0.0.1 \
            --innodb-buffer-pool-size=32M \
            --pid-file="$pidfile" \
            --log-error="$dir/node$i.err" \
            --skip-name-resolve \
            --character-set-server=utf8mb4 \
            --collation-server=utf8mb4_general_ci \
            --max-connections=1000 \
            "${binlog[@]}" \
            </dev/null >"$dir/node$i.out" 2>&1 &
        started_pids[i]=$!
    done

    # A node is up when the server answering on its port reports its own datadir: this tells it
    # apart from some other server that already holds the port.
    local deadline pid answer
    for ((i = 0; i < n; i++)); do
        port=$((baseport + i))
        pid=${started_pids[i]}
        deadline=$((SECONDS + START_TIMEOUT))
        while :; do
            answer=$(node_datadir "$client" "$port")
            answer=${answer%/}
            if [[ $answer == "$dir/node$i" ]]; then
                break
            fi
            if [[ -n $answer ]]; then
                echo "cluster.sh: port $port is already served by another MariaDB (datadir $answer)" >&2
                tail_err "$dir/node$i.err"
                exit 1
            fi
            if [[ -n $pid ]] && ! proc_alive "$pid"; then
                echo "cluster.sh: node $i (port $port) exited during start-up" >&2
                tail_err "$dir/node$i.err"
                exit 1
            fi
            if ((SECONDS >= deadline)); then
                echo "cluster.sh: node $i (port $port) did not answer within ${START_TIMEOUT}s" >&2
                tail_err "$dir/node$i.err"
                exit 1
            fi
            sleep 0.2
        done
        "$client" -h127.0.0.1 -P"$port" -uroot -proot \
            -e 'CREATE DATABASE IF NOT EXISTS shop CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci'
    done

    for ((i = 0; i < n; i++)); do
        echo "node $i: mysql://root:root@127.0.0.1:$((baseport + i))/shop"
    done
}

cmd_stop() {
    [[ $# -eq 1 ]] || usage
    local dir=$1
    [[ -d $dir ]] || {
        echo "cluster.sh: $dir does not exist, nothing to stop"
        return 0
    }

    local pidfile pid
    local -a pids=() pidfiles=()
    shopt -s nullglob
    for pidfile in "$dir"/node*.pid; do
        if pidfile_alive "$pidfile"; then
            pid=$(<"$pidfile")
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
            pidfiles+=("$pidfile")
        else
            rm -f "$pidfile"
        fi
    done
    shopt -u nullglob

    if ((${#pids[@]} == 0)); then
        echo "cluster.sh: no running nodes in $dir"
        return 0
    fi

    local deadline=$((SECONDS + STOP_TIMEOUT)) alive
    while :; do
        alive=0
        for pid in "${pids[@]}"; do
            if proc_alive "$pid"; then
                alive=1
            fi
        done
        ((alive)) || break
        if ((SECONDS >= deadline)); then
            for pid in "${pids[@]}"; do
                if proc_alive "$pid"; then
                    echo "cluster.sh: pid $pid still alive after ${STOP_TIMEOUT}s, sending SIGKILL" >&2
                    kill -KILL "$pid" 2>/dev/null || true
                fi
            done
            sleep 0.5
            break
        fi
        sleep 0.2
    done
    rm -f "${pidfiles[@]}"
    echo "cluster.sh: stopped ${#pids[@]} node(s) in $dir"
}

main() {
    [[ $# -ge 1 ]] || usage
    local cmd=$1
    shift
    case $cmd in
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    *) usage ;;
    esac
}

main "$@"
