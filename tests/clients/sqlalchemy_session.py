"""SQLAlchemy 2.0's ORM through the proxy, on PyMySQL and on mysqlclient: declarative models
of users and their orders (both sharded, an order on its user's node: t_sqlalchemy_order is
sharded by user_id like t_sqlalchemy_user by id, and its foreign key holds on every node),
create_all, Session.add_all of 40 users with their orders in one commit, queries through the
relationship (lazy loads, selectinload, joinedload, an explicit join with aggregates), an
update moving an amount between users on different nodes, deletes (ORM cascade and bulk), a
rollback that leaves nothing, a nested transaction (SAVEPOINT) and a duplicate key.

An ORM session always works inside a transaction (the drivers' autocommit is off, SQLAlchemy
sends no BEGIN: the first statement opens it), so every unit of work here spans both shards.
Order ids are AUTO_INCREMENT on MariaDB and a sequence key_generator through the proxy: they
are never printed (their values differ by design), only the rows they name.
"""

import logging
import sys
from decimal import Decimal

from sqlalchemy import (BigInteger, ForeignKey, Numeric, String, create_engine, delete, func,
                        select, update)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import (DeclarativeBase, Mapped, Session, joinedload, mapped_column,
                            relationship, selectinload)

import pysession as s

USERS = 40


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "t_sqlalchemy_user"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(32))
    balance: Mapped[Decimal] = mapped_column(Numeric(12, 2))
    orders: Mapped[list["Order"]] = relationship(
        back_populates="user", cascade="all, delete-orphan", order_by="Order.item"
    )


class Order(Base):
    __tablename__ = "t_sqlalchemy_order"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("t_sqlalchemy_user.id"))
    item: Mapped[str] = mapped_column(String(32))
    amount: Mapped[Decimal] = mapped_column(Numeric(10, 2))
    user: Mapped[User] = relationship(back_populates="orders")


def out(*parts):
    s.out(*parts)


def user_line(u):
    orders = ", ".join(f"{o.item}={o.amount}" for o in u.orders)
    return f"  user {u.id} {u.name} balance={u.balance} orders=[{orders}]"


def totals(session, label):
    users = session.scalar(select(func.count()).select_from(User))
    balance = session.scalar(select(func.sum(User.balance)))
    orders = session.scalar(select(func.count(Order.id)))
    amount = session.scalar(select(func.sum(Order.amount)))
    out(f"  {label}: users={users} balance={balance} orders={orders} amount={amount}")


def new_users(ids):
    return [
        User(
            id=i,
            name=f"user{i:02d}",
            balance=Decimal(i * 10),
            orders=[
                Order(item=f"item{i:02d}-{j}", amount=Decimal(f"{i}.{j}5"))
                for j in range(i % 3 + 1)
            ],
        )
        for i in ids
    ]


def session_on(driver):
    e = s.env()
    url = (
        f"mysql+{driver}://{e['user']}:{e['password']}@{e['host']}:{e['port']}/{e['db']}"
        "?charset=utf8mb4"
    )
    engine = create_engine(url, pool_size=2)
    out(f"== SQLAlchemy {driver}")
    with engine.connect() as c:
        # MariaDB >= 10.5: the ORM inserts many rows in one INSERT ... RETURNING.
        d = engine.dialect
        out("  is_mariadb", d.is_mariadb, "insert_returning", d.insert_returning)
        out("  autocommit", c.connection.dbapi_connection.get_autocommit())
    Base.metadata.drop_all(engine)
    Base.metadata.create_all(engine)

    out("-- add_all: users with their orders, one commit")
    with Session(engine) as session:
        session.add_all(new_users(range(1, USERS + 1)))
        session.commit()
    with Session(engine) as session:
        totals(session, "committed")
        out("-- lazy loads through the relationship (one node each)")
        for uid in (1, 2, 3, 4):
            u = session.get(User, uid)
            out(user_line(u))
            o = u.orders[0]
            out(f"    first order's user: {o.user.name}")
        out("-- selectinload over both nodes")
        q = select(User).options(selectinload(User.orders)).where(User.id <= 8).order_by(User.id)
        for u in session.scalars(q):
            out(user_line(u))
        out("-- joinedload (a join on the shard keys, per node, merged)")
        q = (
            select(User)
            .options(joinedload(User.orders))
            .where(User.id.in_([5, 6, 7, 8, 9, 10]))
            .order_by(User.name)
        )
        for u in session.scalars(q).unique():
            out(user_line(u))
        out("-- an explicit join through the relationship, aggregated")
        q = (
            select(User.name, func.count(Order.id), func.sum(Order.amount))
            .join(User.orders)
            .where(Order.amount > 10)
            .group_by(User.name)
            .order_by(func.sum(Order.amount).desc(), User.name)
            .limit(5)
        )
        for name, n, total in session.execute(q):
            out(f"  {name} orders={n} total={total}")
        q = (
            select(Order.item, User.name)
            .join(Order.user)
            .where(User.name.in_(["user11", "user12"]))
            .order_by(Order.item)
        )
        for item, name in session.execute(q):
            out(f"  {item} of {name}")

    out("-- update: an amount moved between users on different nodes, an order added")
    with Session(engine) as session:
        a, b = session.get(User, 1), session.get(User, 2)
        a.balance -= Decimal("7.50")
        b.balance += Decimal("7.50")
        b.orders.append(Order(item="item02-extra", amount=Decimal("2.02")))
        session.execute(
            update(Order).where(Order.user_id.in_([3, 4])).values(amount=Order.amount + 100)
        )
        session.commit()
    with Session(engine) as session:
        for uid in (1, 2, 3, 4):
            out(user_line(session.get(User, uid)))
        totals(session, "after update")

    out("-- delete: a user with its orders (ORM cascade), orders in bulk")
    with Session(engine) as session:
        session.delete(session.get(User, 5))
        session.delete(session.get(User, 6))
        r = session.execute(
            delete(Order).where(Order.user_id.in_([7, 8]), Order.item.like("%-0"))
        )
        out("  bulk delete rowcount", r.rowcount)
        session.commit()
    with Session(engine) as session:
        out("  users 5, 6:", session.get(User, 5), session.get(User, 6))
        for uid in (7, 8):
            out(user_line(session.get(User, uid)))
        totals(session, "after delete")

    out("-- a unit of work over both nodes rolled back leaves nothing")
    with Session(engine) as session:
        session.add_all(new_users(range(41, 47)))
        # Held in variables: the session's identity map does not keep unmodified objects alive.
        u1, u2 = session.get(User, 1), session.get(User, 2)
        u1.balance += 1000
        u2.orders.clear()
        session.delete(session.get(User, 9))
        session.flush()
        totals(session, "inside the transaction")
        session.rollback()
        totals(session, "after rollback")
        n = session.scalar(select(func.count()).select_from(User).where(User.id > USERS))
        out("  users 41-46:", n)
        for uid in (1, 2, 9):
            out(user_line(session.get(User, uid)))

    out("-- a nested transaction (SAVEPOINT) rolled back, the outer one committed")
    with Session(engine) as session:
        u10, u11 = session.get(User, 10), session.get(User, 11)
        u10.balance += 1
        u11.balance += 1
        nested = session.begin_nested()
        session.add_all(new_users([47, 48]))
        u10.balance += 500
        u11.orders.clear()
        session.flush()
        totals(session, "inside the savepoint")
        nested.rollback()
        with session.begin_nested():
            kept = Order(item="kept", amount=Decimal(1))
            session.add(User(id=49, name="user49", balance=Decimal(0), orders=[kept]))
        session.commit()
    with Session(engine) as session:
        for uid in (10, 11, 47, 48, 49):
            u = session.get(User, uid)
            out(user_line(u) if u else f"  user {uid} absent")
        totals(session, "after the nested transactions")

    out("-- a duplicate key: IntegrityError, the session rolls back")
    with Session(engine) as session:
        u12 = session.get(User, 12)
        u12.balance += 1
        session.add(User(id=13, name="again", balance=Decimal(0)))
        try:
            session.commit()
            out("  no error")
        except IntegrityError as e:
            out("  IntegrityError", e.orig.args[0])
            session.rollback()
        out(user_line(session.get(User, 12)))
        out(user_line(session.get(User, 13)))
    with Session(engine) as session:
        out("-- every user, as the ORM reads them")
        q = select(User).options(selectinload(User.orders)).order_by(User.id)
        for u in session.scalars(q):
            out(user_line(u))
        totals(session, "final")
    Base.metadata.drop_all(engine)
    engine.dispose()


def main():
    # Every statement SQLAlchemy sends, on stderr (not compared; run.sh shows its tail on failure).
    logging.basicConfig(stream=sys.stderr, format="%(message)s")
    logging.getLogger("sqlalchemy.engine").setLevel(logging.INFO)
    for driver in ("pymysql", "mysqldb"):
        session_on(driver)
    print("sqlalchemy: done", file=sys.stderr)


main()
