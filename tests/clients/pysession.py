"""The session both Python drivers (PyMySQL, mysqlclient) run, as a DB-API 2.0 script.

The common script connects with autocommit on; `cross_node` then connects with the driver's
own default, autocommit off (both drivers default to it), where every statement is part of a
transaction, and does what applications do there: units of work that write several nodes
(shardproxy gives each node a branch and commits them in two phases), read them back before
COMMIT, roll back, and use savepoints.

Prints a transcript: values with their Python types, cursor.description (type code, length,
precision, scale, nullability) and error classes. run.sh compares it with MariaDB's.
"""

import os
import sys

COLUMNS = "id, k, name, price, created, data, big"
CREATE = """CREATE TABLE {t} (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL,
  name VARCHAR(32) NULL, price DECIMAL(10,2) NULL, created DATETIME(3) NULL, data BLOB NULL,
  big BIGINT UNSIGNED NULL)"""
ROWS = """(1, 10, 'alice', 9.99, '2024-01-02 03:04:05.678', x'00ff', 18446744073709551615),
  (2, 20, NULL, NULL, NULL, NULL, NULL), (3, 30, 'ünï', 0.50, '1999-12-31 23:59:59.000', '', 0),
  (4, 40, 'dave', 100.00, '2024-02-29 12:00:00.001', 'x', 1), (5, 50, 'eve', 5.00, NULL, NULL, 5),
  (6, 60, 'frank', 6.00, NULL, NULL, 6)"""


def env():
    return {
        "host": os.environ["SP_HOST"],
        "port": int(os.environ["SP_PORT"]),
        "user": os.environ["SP_USER"],
        "password": os.environ["SP_PASSWORD"],
        "db": os.environ["SP_DB"],
        "tls": os.environ.get("SP_TLS") == "1",
    }


def out(*parts):
    print(*parts, flush=True)


def value(v):
    return f"{type(v).__name__}:{v!r}"


def show(cur, meta=True):
    if cur.description is None:
        out("  (no result set)", "rowcount", cur.rowcount)
        return
    if meta:
        for d in cur.description:
            out("  column", tuple(d))
    for row in cur.fetchall():
        out("  row", ", ".join(value(v) for v in row))


def run(mod, conn, table, transactions):
    """The common session. `transactions(conn, cur)` runs the driver's own transaction API."""
    t = table
    cur = conn.cursor()
    cur.execute("SELECT VERSION()")
    out("version:", "present" if cur.fetchone()[0] else "missing")
    cur.execute(f"DROP TABLE IF EXISTS {t}")
    cur.execute(CREATE.format(t=t))
    out("== multi-row insert")
    n = cur.execute(f"INSERT INTO {t} ({COLUMNS}) VALUES {ROWS}")
    out("  affected", n, "rowcount", cur.rowcount)
    out("== text query routed by key")
    cur.execute(f"SELECT {COLUMNS} FROM {t} WHERE id = 1")
    show(cur)
    out("== parameters routed by key (NULLs)")
    cur.execute(f"SELECT {COLUMNS} FROM {t} WHERE id = %s", (2,))
    show(cur)
    cur.execute(f"SELECT name, price FROM {t} WHERE id = %s AND name = %s", (3, "ünï"))
    show(cur)
    out("== executemany")
    cur.executemany(
        f"INSERT INTO {t} (id, k, name, price) VALUES (%s, %s, %s, %s)",
        [(7, 70, "g", "7.50"), (8, 80, None, None), (9, 90, "i'q\"uote", "0.01")],
    )
    out("  rowcount", cur.rowcount)
    out("== fanned out")
    cur.execute(f"SELECT COUNT(*) AS n, SUM(k) AS total, MIN(price), MAX(created) FROM {t}")
    show(cur)
    cur.execute(f"SELECT {COLUMNS} FROM {t} ORDER BY id")
    show(cur)
    cur.execute(f"SELECT id FROM {t} WHERE k >= %s ORDER BY k DESC LIMIT 3", (30,))
    show(cur, meta=False)
    out("== transactions")
    transactions(conn, cur)
    cur.execute(f"SELECT id, k FROM {t} WHERE id IN (1, 3) ORDER BY id")
    show(cur, meta=False)
    out("== duplicate key")
    try:
        cur.execute(f"INSERT INTO {t} (id, k) VALUES (%s, %s)", (5, 0))
        out("  no error")
    except mod.IntegrityError as e:
        out("  IntegrityError", e.args[0], e.args[1])
    except mod.Error as e:
        out("  wrong class", type(e).__name__, e.args)
    out("== warnings")
    cur.execute(f"INSERT IGNORE INTO {t} (id, k) VALUES (5, 0)")
    cur.execute("SHOW WARNINGS")
    show(cur)
    out("== database")
    cur.execute("SELECT DATABASE()")
    show(cur, meta=False)
    out("== last insert id (a table the rules do not name: the default node)")
    cur.execute(f"DROP TABLE IF EXISTS {t}_auto")
    cur.execute(f"CREATE TABLE {t}_auto (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    cur.execute(f"INSERT INTO {t}_auto (v) VALUES (1), (2)")
    out("  lastrowid", cur.lastrowid)
    cur.execute(f"INSERT INTO {t} (id, k) VALUES (%s, %s)", (10, 100))
    cur.execute("SELECT LAST_INSERT_ID()")
    show(cur, meta=False)
    out("== stored procedure: several result sets from one CALL")
    cur.execute(f"DROP PROCEDURE IF EXISTS p_{t}")
    cur.execute(
        f"CREATE PROCEDURE p_{t}(IN x INT) BEGIN SELECT x AS a; "
        f"SELECT x + 1 AS b, 'two' AS c; SELECT id FROM {t}_auto ORDER BY id; END"
    )
    cur.callproc(f"p_{t}", (41,))
    show(cur)
    while cur.nextset():
        show(cur)
    cur.execute("SELECT 'after the call' AS x")
    show(cur, meta=False)
    return cur


def tls_check(connect):
    """With SP_TLS=1: a TLS connection works and really is TLS (stderr only: MariaDB's test
    node has no TLS, so this is not part of the compared transcript)."""
    if not env()["tls"]:
        return
    conn = connect(tls=True)
    cur = conn.cursor()
    cur.execute("SELECT 1")
    assert cur.fetchone()[0] == 1
    print("tls: ok", file=sys.stderr)
    conn.close()


def cross_node(mod, connect, table):
    """Units of work over several nodes on a connection with the driver's default autocommit
    (off), as applications run them. The ids land on both shards of tests/clients.rs (1, 4,
    5, 8, 9 on one, 2, 3, 6, 7, 10 on the other). `connect(autocommit=None)` connects with
    the driver's default; `connect()` with autocommit on (another client, watching)."""
    t = f"{table}_acct"
    out("== autocommit off (the driver's default): transactions over several nodes")
    conn = connect(autocommit=None)
    watcher = connect()
    cur = conn.cursor()
    wcur = watcher.cursor()
    out("  get_autocommit", conn.get_autocommit())

    def balances(c=cur):
        c.execute(f"SELECT id, owner, balance FROM {t} ORDER BY id")
        show(c, meta=False)

    def totals(c):
        c.execute(f"SELECT COUNT(*), SUM(balance) FROM {t}")
        show(c, meta=False)

    cur.execute(f"DROP TABLE IF EXISTS {t}")
    cur.execute(
        f"CREATE TABLE {t} (id BIGINT NOT NULL PRIMARY KEY, owner VARCHAR(32) NOT NULL, "
        "balance DECIMAL(12,2) NOT NULL)"
    )
    out("-- one unit of work writes both nodes, reads its own writes, commits")
    cur.executemany(
        f"INSERT INTO {t} (id, owner, balance) VALUES (%s, %s, %s)",
        [(1, "alice", "100.00"), (2, "bob", "50.00"), (4, "carol", "10.00"), (3, "dave", "0.00")],
    )
    out("  executemany rowcount", cur.rowcount)
    n = cur.execute(
        f"INSERT INTO {t} VALUES (5, 'erin', 30.00), (6, 'frank', 60.00), (8, 'gina', 8.00)"
    )
    out("  insert without a column list: affected", n)
    # Moving an amount between two rows on different nodes.
    n = cur.execute(f"UPDATE {t} SET balance = balance - %s WHERE id = %s", ("25.00", 1))
    out("  debit affected", n)
    n = cur.execute(f"UPDATE {t} SET balance = balance + %s WHERE id = %s", ("25.00", 2))
    out("  credit affected", n)
    n = cur.execute(f"UPDATE {t} SET balance = balance + 1 WHERE balance < %s", ("20.00",))
    out("  update on every node: affected", n)
    out("  inside the transaction:")
    balances()
    totals(cur)
    cur.execute(f"SELECT owner FROM {t} WHERE id IN (%s, %s) ORDER BY owner", (1, 2))
    show(cur, meta=False)
    out("  another connection before COMMIT:")
    totals(wcur)
    conn.commit()
    out("  another connection after COMMIT:")
    balances(wcur)
    totals(wcur)

    out("-- a unit of work over both nodes rolled back leaves nothing")
    cur.executemany(
        f"INSERT INTO {t} (id, owner, balance) VALUES (%s, %s, %s)",
        [(7, "hank", "7.00"), (9, "ivy", "9.00")],
    )
    cur.execute(f"UPDATE {t} SET balance = balance - 75 WHERE id = %s", (1,))
    cur.execute(f"UPDATE {t} SET balance = balance + 75 WHERE id = %s", (3,))
    n = cur.execute(f"DELETE FROM {t} WHERE id IN (%s, %s)", (6, 8))
    out("  delete affected", n)
    out("  inside the transaction:")
    balances()
    conn.rollback()
    out("  after ROLLBACK:")
    balances()
    totals(wcur)

    out("-- savepoints inside a transaction over both nodes")
    cur.execute(f"UPDATE {t} SET balance = balance + 1000 WHERE id = %s", (1,))
    cur.execute(f"UPDATE {t} SET balance = balance + 1000 WHERE id = %s", (2,))
    cur.execute("SAVEPOINT before_more")
    cur.execute(f"UPDATE {t} SET balance = 0 WHERE id IN (%s, %s)", (1, 2))
    # A node the transaction had not touched yet: its branch opens after the savepoint.
    cur.execute(f"INSERT INTO {t} (id, owner, balance) VALUES (%s, %s, %s)", (10, "jack", "10.00"))
    cur.execute(f"SELECT COUNT(*), SUM(balance) FROM {t} WHERE id IN (1, 2, 10)")
    show(cur, meta=False)
    cur.execute("ROLLBACK TO SAVEPOINT before_more")
    out("  after ROLLBACK TO SAVEPOINT:")
    balances()
    cur.execute("SAVEPOINT second")
    cur.execute(f"INSERT INTO {t} (id, owner, balance) VALUES (%s, %s, %s)", (7, "hank", "7.00"))
    cur.execute(f"DELETE FROM {t} WHERE id = %s", (5,))
    cur.execute("RELEASE SAVEPOINT second")
    try:
        cur.execute("ROLLBACK TO SAVEPOINT second")
        out("  ROLLBACK TO a released savepoint: no error")
    except mod.Error as e:
        out("  ROLLBACK TO a released savepoint:", type(e).__name__, e.args[0])
    conn.commit()
    out("  after COMMIT, from another connection:")
    balances(wcur)

    out("-- a duplicate key inside a transaction over both nodes fails that statement only")
    cur.execute(f"UPDATE {t} SET balance = balance + 5 WHERE id = %s", (4,))
    cur.execute(f"UPDATE {t} SET balance = balance + 5 WHERE id = %s", (3,))
    try:
        cur.execute(
            f"INSERT INTO {t} (id, owner, balance) VALUES (%s, %s, %s)", (1, "again", "1.00")
        )
        out("  no error")
    except mod.IntegrityError as e:
        out("  IntegrityError", e.args[0])
    cur.execute(f"UPDATE {t} SET balance = balance + 5 WHERE id = %s", (8,))
    cur.execute(f"INSERT INTO {t} (id, owner, balance) VALUES (%s, %s, %s)", (9, "ivy", "9.00"))
    conn.commit()
    balances(wcur)
    totals(wcur)
    out("  get_autocommit", conn.get_autocommit())
    watcher.close()
    conn.close()
