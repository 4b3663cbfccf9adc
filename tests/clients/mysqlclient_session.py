"""mysqlclient (MySQLdb)'s session through the proxy: the common script, autocommit(False) with
commit and rollback, a server-side cursor (SSCursor), a multi-statement query."""

import MySQLdb
import MySQLdb.cursors

import pysession as s


def connect(tls=False):
    e = s.env()
    kw = {}
    if tls:
        kw["ssl"] = {"ca": None}
        kw["ssl_mode"] = "REQUIRED"
    return MySQLdb.connect(
        host=e["host"], port=e["port"], user=e["user"], password=e["password"],
        database=e["db"], charset="utf8mb4", autocommit=True, **kw,
    )


def transactions(conn, cur):
    conn.autocommit(False)
    cur.execute("UPDATE t_mysqlclient SET k = k + 100 WHERE id = %s", (1,))
    conn.rollback()
    cur.execute("UPDATE t_mysqlclient SET k = k + 1 WHERE id = %s", (3,))
    conn.commit()
    conn.autocommit(True)


def main():
    conn = connect()
    s.out("server_version:", "present" if conn.get_server_info() else "missing")
    cur = s.run(MySQLdb, conn, "t_mysqlclient", transactions)
    s.out("== server-side cursor")
    ss = conn.cursor(MySQLdb.cursors.SSCursor)
    ss.execute("SELECT id, name FROM t_mysqlclient ORDER BY id")
    for d in ss.description:
        s.out("  column", tuple(d))
    n = 0
    while True:
        row = ss.fetchone()
        if row is None:
            break
        n += 1
        s.out("  row", ", ".join(s.value(v) for v in row))
    ss.close()
    s.out("  streamed", n)
    s.out("== multi-statement query")
    cur.execute("SELECT 1 AS a; SELECT 'two' AS b, NULL AS c")
    s.show(cur)
    while cur.nextset():
        s.show(cur)
    conn.ping()
    conn.close()
    s.tls_check(connect)


main()
