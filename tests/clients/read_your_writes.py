"""PyMySQL writes a row, then reads it back at once, ITERATIONS times, through a proxy whose
nodes have lagging replicas (tests/replicas/ runs it). Every third write is a transaction
(BEGIN, INSERT, COMMIT), the others autocommit; ids start at SP_BASE.

SP_EXPECT=all: every read must see its write (read-your-writes); exits 1 at the first miss.
SP_EXPECT=some-missed: counts the reads that missed (consistency = "lag"); exits 1 when none
did. Prints one line: iterations, reads answered by a replica (a server id not in
SP_PRIMARY_IDS), misses.
"""

import os
import sys

import pymysql

import pysession as s


def main():
    e = s.env()
    n = int(os.environ["SP_ITERATIONS"])
    base = int(os.environ["SP_BASE"])
    primaries = {int(x) for x in os.environ["SP_PRIMARY_IDS"].split(",")}
    expect = os.environ["SP_EXPECT"]
    conn = pymysql.connect(
        host=e["host"], port=e["port"], user=e["user"], password=e["password"],
        database=e["db"], autocommit=True,
    )
    cur = conn.cursor()
    on_replica = missed = 0
    for i in range(n):
        rid, v = base + i, "p%d" % i
        if i % 3 == 2:
            conn.begin()
            cur.execute("INSERT INTO t VALUES (%s, %s)", (rid, v))
            conn.commit()
        else:
            cur.execute("INSERT INTO t VALUES (%s, %s)", (rid, v))
        cur.execute("SELECT @@server_id, v FROM t WHERE id = %s", (rid,))
        row = cur.fetchone()
        if row is None or row[1] != v:
            missed += 1
            if expect == "all":
                print("write %d (id %d) not read back: %r" % (i, rid, row))
                return 1
            continue
        if int(row[0]) not in primaries:
            on_replica += 1
    print("iterations %d on_replica %d missed %d" % (n, on_replica, missed))
    if expect == "some-missed" and missed == 0:
        print("no read missed its write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
