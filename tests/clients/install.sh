#!/usr/bin/env bash
# Installs what tests/clients/run.sh needs, skipping what is already there:
#   Debian: mariadb-client, sysbench, libmariadb-java, a JDK (javac), node and npm,
#           python3 with venv, and libmariadb-dev pkg-config build-essential python3-dev
#           (mysqlclient compiles against them);
#   PyPI:   requirements.txt (PyMySQL, mysqlclient, SQLAlchemy, Alembic, and tpchgen-cli for the
#           TPC-H differential test) into tests/clients/.venv;
#   npm:    node/package-lock.json into node/node_modules (npm ci).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
die() {
    echo "install.sh: $*" >&2
    exit 1
}
# shellcheck source=scripts/lib.sh
source "$repo/scripts/lib.sh"

want=()
command -v mariadb >/dev/null 2>&1 || want+=(mariadb-client)
command -v sysbench >/dev/null 2>&1 || want+=(sysbench)
command -v javac >/dev/null 2>&1 || want+=(default-jdk-headless)
compgen -G '/usr/share/java/mariadb-java-client*.jar' >/dev/null || want+=(libmariadb-java)
command -v node >/dev/null 2>&1 || want+=(nodejs)
command -v npm >/dev/null 2>&1 || want+=(npm)
command -v python3 >/dev/null 2>&1 || want+=(python3)
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then want+=(python3-venv); fi
pkg-config --exists libmariadb 2>/dev/null || want+=(libmariadb-dev pkg-config)
command -v cc >/dev/null 2>&1 || want+=(build-essential)
if command -v python3 >/dev/null 2>&1; then
    inc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null || true)
    [[ -n $inc && -f $inc/Python.h ]] || want+=(python3-dev)
else
    want+=(python3-dev)
fi
if ((${#want[@]} > 0)); then
    install_packages "${want[@]}"
fi

venv=$here/.venv
if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv" || die "python3 -m venv failed"
fi
if ! "$venv/bin/python" -c 'import pymysql, MySQLdb, sqlalchemy, alembic' >/dev/null 2>&1 ||
    [[ ! -x $venv/bin/tpchgen-cli ]]; then
    "$venv/bin/pip" install --disable-pip-version-check -q -r "$here/requirements.txt" ||
        die "pip install -r tests/clients/requirements.txt failed"
fi

if [[ ! -d $here/node/node_modules/mysql2 ]]; then
    (cd "$here/node" && npm ci --no-audit --no-fund) || die "npm ci in tests/clients/node failed"
fi
echo "install.sh: clients ready: mariadb $(mariadb --version | awk '{print $5}' | tr -d ,)," \
    "$(sysbench --version), python $("$venv/bin/python" -c 'from importlib.metadata import version as v; print("PyMySQL", v("PyMySQL"), "mysqlclient", v("mysqlclient"), "SQLAlchemy", v("SQLAlchemy"))')," \
    "node $(node --version) mysql2 $(node -p 'require(process.argv[1]).version' "$here/node/node_modules/mysql2/package.json"), $(javac -version 2>&1)"
