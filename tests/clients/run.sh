#!/usr/bin/env bash
# Runs every client's scripted session against a running proxy and, when a plain MariaDB is
# given, against it too, and compares the two transcripts line by line.
#
#   PROXY_PORT=3307 tests/clients/run.sh                 # the demo proxy (app/app, db shop)
#   PROXY_PORT=3307 DIRECT_PORT=3311 DIRECT_USER=root DIRECT_PASSWORD=root tests/clients/run.sh cli node
#
# Environment: PROXY_HOST (127.0.0.1), PROXY_PORT, PROXY_USER (app), PROXY_PASSWORD (app),
# PROXY_TLS (1: the proxy has [server] tls, check TLS clients too), DIRECT_HOST, DIRECT_PORT,
# DIRECT_USER, DIRECT_PASSWORD (no DIRECT_PORT: no comparison), CLIENTS_DB (shop),
# CLIENTS_OUT (where transcripts go; a temp dir by default).
# Arguments (or CLIENTS, space-separated): the clients to run (default: all). A client that is not installed fails the run:
# tests/clients/install.sh installs them all (Python packages into tests/clients/.venv).
#
# The proxy's rules must shard t_cli, t_dump, t_dump_user, t_pymysql, t_pymysql_acct,
# t_mysqlclient, t_mysqlclient_tx, t_mysqlclient_acct, t_sqlalchemy_user, t_node, t_java,
# sbtest1 and sbtest2 by `id`, and t_sqlalchemy_order by `user_id` with the same slot map as
# t_sqlalchemy_user; sbtest1, sbtest2 and t_sqlalchemy_order need a key_generator on `id`
# (the tables are created by the sessions; tests/clients.rs does this).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly here
all=(cli sysbench pymysql mysqlclient sqlalchemy node java)
if (($# > 0)); then
    clients=("$@")
elif [[ -n ${CLIENTS:-} ]]; then
    read -ra clients <<<"$CLIENTS"
else
    clients=("${all[@]}")
fi

: "${PROXY_PORT:?set PROXY_PORT to the port of the proxy}"
PROXY_HOST=${PROXY_HOST:-127.0.0.1}
PROXY_USER=${PROXY_USER:-app}
PROXY_PASSWORD=${PROXY_PASSWORD:-app}
PROXY_TLS=${PROXY_TLS:-0}
DIRECT_HOST=${DIRECT_HOST:-127.0.0.1}
DIRECT_PORT=${DIRECT_PORT:-}
DIRECT_USER=${DIRECT_USER:-root}
DIRECT_PASSWORD=${DIRECT_PASSWORD:-}
CLIENTS_DB=${CLIENTS_DB:-shop}
out=${CLIENTS_OUT:-$(mktemp -d /tmp/shardproxy-clients.XXXXXX)}
mkdir -p "$out"
export PYTHONDONTWRITEBYTECODE=1
# The drivers install.sh put in tests/clients/.venv, else the python3 on PATH.
py=python3
[[ -x $here/.venv/bin/python ]] && py=$here/.venv/bin/python

# Sets cmd to the command running one client's session (its transcript on stdout).
session_cmd() {
    case $1 in
    cli) cmd=("$here/cli.sh") ;;
    sysbench) cmd=("$here/sysbench.sh") ;;
    pymysql) cmd=("$py" "$here/pymysql_session.py") ;;
    mysqlclient) cmd=("$py" "$here/mysqlclient_session.py") ;;
    sqlalchemy) cmd=("$py" "$here/sqlalchemy_session.py") ;;
    node) cmd=(node "$here/node/session.js") ;;
    java) cmd=(java -cp "$out/java:$(java_jar)" Session) ;;
    *) return 1 ;;
    esac
}

java_jar() {
    local j
    for j in /usr/share/java/mariadb-java-client.jar /usr/share/java/mariadb-java-client-*.jar; do
        [[ -f $j ]] && { echo "$j"; return 0; }
    done
    return 1
}

# Why a client cannot run here (nothing when it can); builds what it needs.
missing() {
    case $1 in
    cli) command -v mariadb >/dev/null || echo "the mariadb CLI (Debian mariadb-client)" ;;
    sysbench) command -v sysbench >/dev/null || echo "sysbench (Debian sysbench)" ;;
    pymysql) "$py" -c 'import pymysql' 2>/dev/null || echo "PyMySQL (tests/clients/install.sh)" ;;
    mysqlclient) "$py" -c 'import MySQLdb' 2>/dev/null || echo "mysqlclient (tests/clients/install.sh)" ;;
    sqlalchemy) "$py" -c 'import sqlalchemy, pymysql' 2>/dev/null || echo "SQLAlchemy and PyMySQL (tests/clients/install.sh)" ;;
    node)
        command -v node >/dev/null || { echo "node (Debian nodejs)"; return; }
        [[ -d $here/node/node_modules/mysql2 ]] || echo "mysql2 (cd tests/clients/node && npm ci)"
        ;;
    java)
        command -v javac >/dev/null || { echo "javac (Debian default-jdk-headless)"; return; }
        java_jar >/dev/null || { echo "MariaDB Connector/J (Debian libmariadb-java)"; return; }
        mkdir -p "$out/java"
        javac -d "$out/java" -cp "$(java_jar)" "$here/java/Session.java" >"$out/javac.log" 2>&1 ||
            echo "a compilable Session.java (javac: $(cat "$out/javac.log"))"
        ;;
    *) echo "a client named $1 (known: ${all[*]})" ;;
    esac
}

run_session() { # client target host port user password tls
    local client=$1 target=$2 cmd=()
    session_cmd "$client"
    SP_TARGET=$target SP_HOST=$3 SP_PORT=$4 SP_USER=$5 SP_PASSWORD=$6 SP_TLS=$7 SP_DB=$CLIENTS_DB \
        SP_OUT=$out timeout 300 "${cmd[@]}" >"$out/$client.$target.txt" 2>"$out/$client.$target.err"
}

failed=()
started=$SECONDS
for client in "${clients[@]}"; do
    t0=$SECONDS
    why=$(missing "$client")
    if [[ -n $why ]]; then
        echo "FAIL $client: not installed: $why" >&2
        failed+=("$client")
        continue
    fi
    ok=1
    if ! run_session "$client" proxy "$PROXY_HOST" "$PROXY_PORT" "$PROXY_USER" "$PROXY_PASSWORD" "$PROXY_TLS"; then
        echo "FAIL $client: the session through the proxy failed" >&2
        ok=0
    fi
    if ((ok)) && [[ -n $DIRECT_PORT && $client != sysbench ]]; then
        if ! run_session "$client" direct "$DIRECT_HOST" "$DIRECT_PORT" "$DIRECT_USER" "$DIRECT_PASSWORD" 0; then
            echo "FAIL $client: the session against MariaDB directly failed" >&2
            ok=0
        elif ! diff -u "$out/$client.direct.txt" "$out/$client.proxy.txt" >"$out/$client.diff"; then
            echo "FAIL $client: the transcript through the proxy differs from MariaDB's (- direct, + proxy):" >&2
            cat "$out/$client.diff" >&2
            ok=0
        fi
    fi
    if ((ok)); then
        echo "ok   $client ($((SECONDS - t0))s, $(wc -l <"$out/$client.proxy.txt") transcript lines)"
    else
        for f in "$out/$client".*.err; do
            [[ -s $f ]] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }
        done
        echo "--- $out/$client.proxy.txt (tail)" >&2
        tail -n 20 "$out/$client.proxy.txt" >&2
        failed+=("$client")
    fi
done
echo "clients: ${#clients[@]} run in $((SECONDS - started))s, transcripts in $out"
if ((${#failed[@]} > 0)); then
    echo "clients failed: ${failed[*]}" >&2
    exit 1
fi
