"""mysqlclient (MySQLdb)'s session through the proxy: the common script, autocommit(False) with
commit and rollback, a server-side cursor (SSCursor), a multi-statement query, transactions over
several nodes with the driver's default autocommit off."""

import MySQLdb
import MySQLdb.cursors

import pysession as s


def connect(tls=False, autocommit=True):
    """`autocommit=None`: the driver's default (off)."""
    e = s.env()
    kw = {} if autocommit is None else {"autocommit": autocommit}
    if tls:
        kw["ssl"] = {"ca": None}
        kw["ssl_mode"] = "REQUIRED"
    return MySQLdb.connect(
        host=e["host"], port=e["port"], user=e["user"], password=e["password"],
        database=e["db"], charset="utf8mb4", **kw,
    )


def transactions(conn, cur):
    conn.autocommit(False)
    cur.execute("UPDATE t_mysqlclient SET k = k + 100 WHERE id = %s", (1,))
    conn.rollback()
    cur.execute("UPDATE t_mysqlclient SET k = k + 1 WHERE id = %s", (3,))
    conn.commit()
    conn.autocommit(True)


def driver_default_autocommit():
    """mysqlclient's own default (autocommit off): DDL on a sharded table commits and runs on
    every node, then one-node transactions with commit and rollback."""
    s.out("== autocommit off (the driver's default): DDL, then transactions")
    conn = connect(autocommit=None)
    cur = conn.cursor()
    s.out("  get_autocommit", conn.get_autocommit())
    cur.execute("DROP TABLE IF EXISTS t_mysqlclient_tx")
    cur.execute("CREATE TABLE t_mysqlclient_tx (id BIGINT PRIMARY KEY, v INT)")
    cur.execute("INSERT INTO t_mysqlclient_tx (id, v) VALUES (%s, %s)", (1, 1))
    conn.rollback()
    cur.execute("INSERT INTO t_mysqlclient_tx (id, v) VALUES (%s, %s)", (2, 2))
    conn.commit()
    cur.execute("ALTER TABLE t_mysqlclient_tx ADD COLUMN w INT NULL")
    cur.execute("INSERT INTO t_mysqlclient_tx (id, v, w) VALUES (%s, %s, %s)", (3, 3, 3))
    conn.commit()
    cur.execute("SELECT id, v, w FROM t_mysqlclient_tx ORDER BY id")
    s.show(cur)
    conn.close()


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
    driver_default_autocommit()
    s.cross_node(MySQLdb, connect, "t_mysqlclient")
    s.tls_check(connect)


main()
