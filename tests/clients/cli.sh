#!/usr/bin/env bash
# The mariadb CLI's session: -e batches, `source` of a file with --column-type-info (every
# column's type, collation, length, decimals and flags), a duplicate key, caching_sha2_password,
# and (SP_TLS=1) --ssl. Prints a transcript; the environment comes from run.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

m() {
    mariadb --protocol=TCP -h"$SP_HOST" -P"$SP_PORT" -u"$SP_USER" -p"$SP_PASSWORD" "$SP_DB" "$@"
}

echo "== server version"
version=$(m -N -e 'SELECT VERSION()')
[[ -n $version ]] && echo "version: present"
echo "version: $version" >&2

echo "== -e batch: DDL, multi-row insert, routed reads"
m --table -e "DROP TABLE IF EXISTS t_cli;
CREATE TABLE t_cli (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL, name VARCHAR(32) NULL,
  price DECIMAL(10,2) NULL, created DATETIME(3) NULL, data BLOB NULL, big BIGINT UNSIGNED NULL);
INSERT INTO t_cli (id, k, name, price, created, data, big) VALUES (1, 10, 'alice', 9.99, '2024-01-02 03:04:05.678', x'00ff', 18446744073709551615),
  (2, 20, NULL, NULL, NULL, NULL, NULL), (3, 30, 'ünï', 0.50, '1999-12-31 23:59:59.000', '', 0),
  (4, 40, 'dave', 100.00, '2024-02-29 12:00:00.001', 'x', 1), (5, 50, 'eve', 5.00, NULL, NULL, 5),
  (6, 60, 'frank', 6.00, NULL, NULL, 6);
SELECT id, name, price FROM t_cli WHERE id = 4;
SELECT id, name FROM t_cli WHERE id IN (1, 2, 3, 5) ORDER BY id;"

echo "== source with column metadata"
m --column-type-info --table -e "source $here/cli_session.sql"

echo "== duplicate key"
if m -e "INSERT INTO t_cli (id, k) VALUES (5, 0)" 2>"$SP_OUT/cli.dup.$SP_TARGET"; then
    echo "duplicate insert succeeded"
fi
sed 's/ at line [0-9]*//' "$SP_OUT/cli.dup.$SP_TARGET"

echo "== a dump file restored (mariadb-dump's format: executable comments, LOCK TABLES, DISABLE KEYS, INSERT without a column list)"
m < "$here/dump_session.sql"
m --table -e "SELECT * FROM t_dump ORDER BY id; SELECT * FROM t_dump_user ORDER BY id;
SELECT COUNT(*), SUM(amount) FROM t_dump"

echo "== caching_sha2_password offered by the client"
m --default-auth=caching_sha2_password -N -e "SELECT 'authenticated'"
if mariadb --protocol=TCP -h"$SP_HOST" -P"$SP_PORT" -u"$SP_USER" -p"wrong-$SP_PASSWORD" \
    --default-auth=caching_sha2_password -N -e "SELECT 1" "$SP_DB" 2>"$SP_OUT/cli.bad.$SP_TARGET"; then
    echo "a wrong password was accepted"
fi
sed -n 's/^ERROR \([0-9]*\) (\([0-9A-Z]*\)).*/ERROR \1 (\2)/p' "$SP_OUT/cli.bad.$SP_TARGET"

if [[ ${SP_TLS:-0} == 1 ]]; then
    # Not in the transcript (the direct server has no TLS): fails the session if TLS is not used.
    status=$(m --ssl -e 'status; SELECT COUNT(*) FROM t_cli')
    grep -q '^SSL:.*Cipher in use' <<<"$status" || {
        echo "mariadb --ssl did not use TLS: $status" >&2
        exit 1
    }
    echo "tls: $(grep '^SSL:' <<<"$status")" >&2
fi
