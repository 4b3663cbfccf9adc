#!/usr/bin/env bash
# The test suite: `./scripts/test.sh` (extra arguments go to `cargo test`).
#
# The integration tests under tests/ start their own MariaDB nodes; they look for `mariadbd`
# and `mariadb-install-db` on PATH or in /usr/sbin. This script only makes sure MariaDB is
# installed, and that the clients tests/clients.rs drives are (tests/clients/install.sh: the
# mariadb CLI, sysbench, PyMySQL, mysqlclient, mysql2, Connector/J), then runs `cargo test`
# with the `test-hooks` feature (src/hooks.rs: the tests that stop or break the proxy on
# purpose; without it they are ignored and say so).
# The benchmark is separate: bench/point_select.sh.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo

die() {
    echo "test.sh: $*" >&2
    exit 1
}

have_mariadb() {
    { command -v mariadbd >/dev/null 2>&1 || [[ -x /usr/sbin/mariadbd ]]; } &&
        { command -v mariadb-install-db >/dev/null 2>&1 || [[ -x /usr/sbin/mariadb-install-db ]]; } &&
        command -v mariadb >/dev/null 2>&1
}

if ! have_mariadb; then
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 || die "MariaDB is missing and sudo is not available: install mariadb-server and mariadb-client"
        sudo=(sudo)
    fi
    echo "test.sh: installing mariadb-server and mariadb-client with apt-get"
    "${sudo[@]}" apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y mariadb-server mariadb-client
    have_mariadb || die "mariadbd, mariadb-install-db or mariadb still missing after apt-get install"
fi

"$repo/tests/clients/install.sh" || die "installing the clients of tests/clients failed"

command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (https://rustup.rs) and retry"

# Debian installs mariadbd in /usr/sbin, which is not on a normal user's PATH.
case ":$PATH:" in
*:/usr/sbin:*) ;;
*) export PATH=$PATH:/usr/sbin ;;
esac

cd "$repo"
export RUST_BACKTRACE=1
exec cargo test --features test-hooks "$@"
