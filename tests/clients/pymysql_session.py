"""PyMySQL's session through the proxy: text queries, parameters, executemany, a multi-statement
query with nextset(), begin/commit/rollback, ping and select_db, transactions over several nodes
with the driver's default autocommit off, TLS (SP_TLS=1)."""

import ssl

import pymysql
from pymysql.constants import CLIENT

import pysession as s


def connect(tls=False, multi=True, autocommit=True):
    """`autocommit=None`: the driver's default (off)."""
    e = s.env()
    kw = {} if autocommit is None else {"autocommit": autocommit}
    if tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        kw["ssl"] = ctx
    return pymysql.connect(
        host=e["host"], port=e["port"], user=e["user"], password=e["password"],
        database=e["db"], charset="utf8mb4", client_flag=CLIENT.MULTI_STATEMENTS if multi else 0, **kw,
    )


def transactions(conn, cur):
    conn.begin()
    cur.execute("UPDATE t_pymysql SET k = k + 100 WHERE id = %s", (1,))
    conn.rollback()
    conn.begin()
    cur.execute("UPDATE t_pymysql SET k = k + 1 WHERE id = %s", (3,))
    conn.commit()


def main():
    conn = connect()
    s.out("server_version:", "present" if conn.get_server_info() else "missing")
    cur = s.run(pymysql, conn, "t_pymysql", transactions)
    s.out("== multi-statement query")
    cur.execute("SELECT 1 AS a; SELECT 'two' AS b, NULL AS c; UPDATE t_pymysql SET k = 0 WHERE id = 9")
    s.show(cur)
    while cur.nextset():
        s.show(cur)
    s.out("== ping and select_db")
    conn.ping(reconnect=False)
    conn.select_db("mysql")
    cur.execute("SELECT DATABASE()")
    s.show(cur, meta=False)
    conn.close()
    s.out("== stacked statements without CLIENT_MULTI_STATEMENTS")
    conn = connect(multi=False)
    cur = conn.cursor()
    try:
        cur.execute("SELECT 1; SELECT 2")
        s.out("  no error")
    except pymysql.err.ProgrammingError as e:
        s.out("  ProgrammingError", e.args[0])
    cur.execute("SELECT 3")
    s.show(cur, meta=False)
    conn.close()
    s.cross_node(pymysql, connect, "t_pymysql")
    s.tls_check(connect)


main()
