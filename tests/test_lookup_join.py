"""Flink's lookup join: the replay's cache and updates in pure Python, then on Spark with SQLite."""

import os
import re
import sqlite3
from contextlib import closing
from datetime import datetime, timedelta
from functools import partial

import pandas as pd
import pytest

import kit
from kit import Clock, Duration, KitError
from kit.errors import KitRuntimeError
from kit.joins.lookup import Lookup, LookupCache, LookupReplay, LookupTable, Update, lookup_join, lookups

T0 = datetime(2024, 1, 1, 12)
BOB, ROBERT = (2, "Bob"), (2, "Robert")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class Database:
    """A dict as the database, counting reads."""

    def __init__(self, rows):
        self.rows, self.reads = rows, 0

    def __call__(self, key):
        self.reads += 1
        return self.rows.get(key, [])


def replay(cache=None, updates=(), rows=None):
    db = Database({(2,): [BOB]} if rows is None else rows)
    return LookupReplay(db, cache, updates), db


def answers(r, lookups_at):
    """``(key, ms)`` lookups -> (rows, cache, looked_up_at) for each."""
    return [tuple(r.lookup(key, now)) for key, now in lookups_at]


# -- the semantics, without Spark ------------------------------------------------------

def test_without_cache_every_lookup_reads_the_database_and_sees_updates():
    r, db = replay(updates=[Update(5_000, "+U", (2,), ROBERT), Update(8_000, "-D", (2,), (2, None))])
    assert answers(r, [((2,), 0), ((2,), 4_999), ((2,), 5_000), ((2,), 8_000)]) == [
        ([BOB], None, 0), ([BOB], None, 4_999), ([ROBERT], None, 5_000), ([], None, 8_000)]
    assert db.reads == 2  # after an update the key's rows come from the update


def test_expire_after_write_reads_stale_rows_until_expiry():
    r, _ = replay(LookupCache(expire_after_write=Duration.of_seconds(10)), [Update(5_000, "+U", (2,), ROBERT)])
    assert answers(r, [((2,), 0), ((2,), 6_000), ((2,), 9_999), ((2,), 10_000), ((2,), 12_000)]) == [
        ([BOB], "miss", 0), ([BOB], "hit", 0), ([BOB], "hit", 0),  # stale: Robert since 5 s
        ([ROBERT], "miss", 10_000), ([ROBERT], "hit", 10_000)]


def test_expire_after_access_keeps_an_entry_alive_while_it_is_read():
    cache = LookupCache(expire_after_access=Duration.of_seconds(5))
    r, _ = replay(cache, [Update(1_000, "+U", (2,), ROBERT)])
    # read every 4 s: never 5 s idle, so Bob stays long after the update; then 5 s idle
    assert answers(r, [((2,), 0), ((2,), 4_000), ((2,), 8_000), ((2,), 12_000), ((2,), 17_000)]) == [
        ([BOB], "miss", 0), ([BOB], "hit", 0), ([BOB], "hit", 0), ([BOB], "hit", 0), ([ROBERT], "miss", 17_000)]
    # with expire_after_write too, whichever comes first
    r, _ = replay(LookupCache(expire_after_write=Duration.of_seconds(10), expire_after_access=Duration.of_seconds(5)),
                  [Update(1_000, "+U", (2,), ROBERT)])
    assert [c for _, c, _ in answers(r, [((2,), 0), ((2,), 4_000), ((2,), 8_000), ((2,), 12_000)])] == [
        "miss", "hit", "hit", "miss"]


def test_max_rows_evicts_the_least_recently_used_key():
    rows = {(k,): [(k, f"c{k}")] for k in (1, 2, 3)}
    r, db = replay(LookupCache(max_rows=2), rows=rows)
    # 1 and 2 cached; reading 1 makes 2 the least recently used; 3 evicts 2
    statuses = [c for _, c, _ in answers(r, [((1,), 0), ((2,), 1), ((1,), 2), ((3,), 3), ((1,), 4), ((2,), 5)])]
    assert statuses == ["miss", "miss", "hit", "miss", "hit", "miss"]
    assert db.reads == 4
    r, db = replay(LookupCache(max_rows=0), rows=rows)
    assert [c for _, c, _ in answers(r, [((1,), 0), ((1,), 1)])] == ["miss", "miss"]


@pytest.mark.parametrize("cache_missing_key, expected", [
    (True, [([], "miss", 0), ([], "hit", 0), ([(3, "Carol")], "miss", 10_000)]),
    (False, [([], "miss", 0), ([(3, "Carol")], "miss", 6_000), ([(3, "Carol")], "hit", 6_000)]),
])
def test_cache_missing_key(cache_missing_key, expected):
    cache = LookupCache(expire_after_write=Duration.of_seconds(10), cache_missing_key=cache_missing_key)
    r, _ = replay(cache, [Update(5_000, "+I", (3,), (3, "Carol"))])
    assert answers(r, [((3,), 0), ((3,), 6_000), ((3,), 10_000)]) == expected


def test_null_key_is_not_looked_up():
    r, db = replay(LookupCache(max_rows=5))
    assert r.lookup((None,), 0) == Lookup([], None, None) and db.reads == 0


def test_cache_parameters_are_checked_and_repr_reads_like_the_constructor():
    cache = LookupCache(expire_after_write=Duration.of_minutes(10), max_rows=100)
    assert repr(cache) == "LookupCache(expire_after_write=Duration.of_minutes(10), max_rows=100)"
    with pytest.raises(KitError, match="needs expire_after_write, expire_after_access or max_rows"):
        LookupCache()
    with pytest.raises(KitError, match="expire_after_access must be a Duration >= 0 ms"):
        LookupCache(expire_after_access=Duration.of_millis(-1))
    with pytest.raises(KitError, match="max_rows .* must be an int >= 0"):
        LookupCache(max_rows=-1)
    with pytest.raises(KitError, match="cache_missing_key must be True or False"):
        LookupCache(max_rows=1, cache_missing_key="no")


# -- on Spark, with a SQLite file ---------------------------------------------------------

@pytest.fixture
def shop(tmp_path):
    path = tmp_path / "shop.db"
    with closing(sqlite3.connect(path)) as c:
        c.execute("CREATE TABLE customers (id INTEGER, name TEXT, city TEXT)")
        c.executemany("INSERT INTO customers VALUES (?, ?, ?)",
                      [(2, "Bob", "Oslo"), (1, "Ann", "Rome"), (1, "Ann", "Nice")])
        c.commit()
    return path


def orders(spark, customers, partitions=1, step=Duration.of_seconds(3)):
    """Order i (``id`` 10+i) of customer ``customers[i]`` is processed at 12:00 + i * step."""
    df = spark.createDataFrame([(10 + i, c, i) for i, c in enumerate(customers)], "id long, customer_id long, ts long")
    return kit.stream(df.repartition(partitions) if partitions > 1 else df, time="ts", order="ts",
                      proctime=Clock(T0, step))


def renamed_bob(seconds=5):
    return pd.DataFrame({"at": [at(seconds)], "op": ["+U"], "id": [2], "name": ["Robert"], "city": ["Oslo"]})


def rows(df):
    return [tuple(r) for r in df.collect()]


def test_without_cache_a_lookup_sees_the_table_as_it_is_then(spark, shop):
    table = LookupTable.sqlite(shop, "customers", updates=renamed_bob())
    out = lookup_join(orders(spark, [2, 2, 2]), table, {"customer_id": "id"})
    assert out.columns == ["id", "customer_id", "ts", "id0", "name", "city", "seq", "proctime", "cache",
                           "looked_up_at"]
    assert rows(out) == [
        (10, 2, 0, 2, "Bob", "Oslo", 0, at(0), None, at(0)),
        (11, 2, 1, 2, "Bob", "Oslo", 1, at(3), None, at(3)),
        (12, 2, 2, 2, "Robert", "Oslo", 2, at(6), None, at(6))]


def test_cached_lookup_is_stale_until_the_entry_expires(spark, shop):
    table = LookupTable.sqlite(shop, "customers", LookupCache(expire_after_write=Duration.of_seconds(10)),
                               updates=renamed_bob())
    out = lookup_join(orders(spark, [2, 2, 2, 2, 2]), table, [("customer_id", "id")])
    assert rows(out.select("seq", "name", "cache", "looked_up_at")) == [
        (0, "Bob", "miss", at(0)), (1, "Bob", "hit", at(0)), (2, "Bob", "hit", at(0)),  # Robert since 12:00:05
        (3, "Bob", "hit", at(0)), (4, "Robert", "miss", at(12))]
    with closing(sqlite3.connect(shop)) as c:  # the updates never reach the file
        assert c.execute("SELECT name FROM customers WHERE id = 2").fetchall() == [("Bob",)]


def test_inner_and_left_join_with_several_matches(spark, shop):
    table = LookupTable.sqlite(shop, "customers")
    stream = orders(spark, [1, 9, 2, None])
    left = lookup_join(stream, table, {"customer_id": "id"}, how="left")
    assert rows(left.select("id", "id0", "name", "city", "seq", "cache")) == [
        (10, 1, "Ann", "Nice", 0, None), (10, 1, "Ann", "Rome", 0, None),  # table rows ordered by their columns
        (11, None, None, None, 1, None), (12, 2, "Bob", "Oslo", 2, None), (13, None, None, None, 3, None)]
    inner = lookup_join(stream, table, {"customer_id": "id"})
    assert rows(inner.select("id", "city")) == [(10, "Nice"), (10, "Rome"), (12, "Oslo")]


def test_sql_lookup_join_with_the_rest_of_on_applied_to_each_row_found(spark, shop):
    table = LookupTable.sqlite(shop, "customers", LookupCache(expire_after_write=Duration.of_seconds(10)),
                               updates=renamed_bob())
    query = ("SELECT o.id, c.name, c.city FROM orders AS o {} JOIN customers FOR SYSTEM_TIME AS OF o.proctime AS c "
             "ON o.customer_id = c.id AND c.city <> 'Rome'")
    stream = orders(spark, [2, 1, 9, 2, 2, 2])                     # at 12:00:00, :03, :06, :09, :12, :15
    left = kit.sql(query.format("LEFT"), orders=stream, customers=table)
    assert sorted(rows(left), key=str) == sorted([
        (10, "Bob", "Oslo"), (11, "Ann", "Nice"), (12, None, None), (13, "Bob", "Oslo"),   # :09 still cached
        (14, "Robert", "Oslo"), (15, "Robert", "Oslo")], key=str)
    inner = kit.sql(query.format(""), orders=stream, customers=table)
    assert sorted(r[0] for r in rows(inner)) == [10, 11, 13, 14, 15]
    with pytest.raises(kit.SqlError, match="column 84: Temporal table join currently only supports 'FOR "
                                           "SYSTEM_TIME AS OF' left table's proctime field"):
        kit.sql(query.format("").replace("o.proctime", "o.ts"), orders=stream, customers=table)


def test_lookups_gives_one_row_per_match_for_sql(spark, shop):
    table = LookupTable.sqlite(shop, "customers", LookupCache(max_rows=10))
    found = lookups(orders(spark, [1, 9, 1]), table, "customer_id", "id")
    assert found.columns == ["seq", "id", "name", "city", "match_index", "proctime", "cache", "looked_up_at"]
    assert rows(found.orderBy("seq", "match_index")) == [
        (0, 1, "Ann", "Nice", 0, at(0), "miss", at(0)), (0, 1, "Ann", "Rome", 1, at(0), "miss", at(0)),
        (2, 1, "Ann", "Nice", 0, at(6), "hit", at(0)), (2, 1, "Ann", "Rome", 1, at(6), "hit", at(0))]
    missed = lookups(orders(spark, [9]), table, ["customer_id"], ["id"], misses=True)
    assert rows(missed) == [(0, None, None, None, None, at(0), "miss", at(0))]


@pytest.mark.parametrize("cache", [LookupCache(max_rows=1), LookupCache(expire_after_access=Duration.of_seconds(7))])
def test_spark_answers_as_one_subtask_in_arrival_order_whatever_the_partitioning(spark, shop, cache):
    # max_rows: one pass over the stream; expiry only: keys spread over tasks
    customers = [2, 1, 2, 2, 1, 1, 2, 9, 2, 1]
    r = LookupReplay(Database({(1,): [(1, "Ann", "Nice"), (1, "Ann", "Rome")], (2,): [(2, "Bob", "Oslo")]}),
                     cache, [Update(4_000, "+U", (2,), (2, "Robert", "Oslo"))])
    expected = []
    for seq, c in enumerate(customers):
        found = r.lookup((c,), seq * 3_000)
        looked_up_at = T0 + timedelta(milliseconds=found.looked_up_at)
        expected += [(seq, name, city, found.cache, looked_up_at) for _, name, city in found.rows or [(None,) * 3]]
    assert [c for *_, c, _ in expected].count("hit") >= 3
    table = LookupTable.sqlite(shop, "customers", cache, updates=renamed_bob(4))
    before = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        spark.conf.set("spark.sql.shuffle.partitions", "7")
        out = lookup_join(orders(spark, customers, partitions=3), table, {"customer_id": "id"}, how="left")
        assert rows(out.select("seq", "name", "city", "cache", "looked_up_at")) == expected
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


def test_errors_say_what_to_fix(spark, shop):
    table = LookupTable.sqlite(shop, "customers")
    no_proctime = kit.stream(spark.createDataFrame([(1, 0)], "customer_id long, ts long"), time="ts")
    with pytest.raises(KitError, match="runs on processing time: give the stream proctime=Clock"):
        lookup_join(no_proctime, table, {"customer_id": "id"})
    stream = orders(spark, [1])
    with pytest.raises(KitError, match=r"left column\(s\) \['cust'\] are not in the stream"):
        lookup_join(stream, table, {"cust": "id"})
    with pytest.raises(KitError, match=r"column\(s\) \['cid'\] are not in table 'customers'; its columns are"):
        lookup_join(stream, table, {"customer_id": "cid"})
    with pytest.raises(KitError, match="table 'clients' is not in the database"):
        lookup_join(stream, LookupTable.sqlite(shop, "clients"), {"customer_id": "id"})
    with pytest.raises(KitError, match="how must be 'inner' or 'left'"):
        lookup_join(stream, table, {"customer_id": "id"}, how="right")
    bad_op = pd.DataFrame({"at": [at(1)], "op": ["+X"], "id": [1], "name": ["A"], "city": ["B"]})
    with pytest.raises(KitError, match="'op' one of"):
        lookup_join(stream, LookupTable.sqlite(shop, "customers", updates=bad_op), {"customer_id": "id"})
    with pytest.raises(KitError, match=r"missing \['city'\]"):
        lookup_join(stream, LookupTable.sqlite(shop, "customers", updates=bad_op.drop(columns="city")),
                    {"customer_id": "id"})


# -- failures on the workers: the kit's message, no worker traceback -----------------------

def on_workers(action):
    """A ``connect`` for a SQLite file that, on a Spark worker (not in this process), does
    ``action(connection)`` first; local functions travel to the workers by value."""
    driver = os.getpid()

    def connect(path):
        conn = sqlite3.connect(path)
        if os.getpid() != driver:
            action(conn)
        return conn
    return connect


def run_failure(out):
    """The error ``out.collect()`` raises: the kit's message alone."""
    with pytest.raises(KitRuntimeError) as info:
        out.collect()
    error = info.value
    assert not re.search(r"Traceback|java\.|at org\.apache|File \"", str(error)), str(error)
    return str(error)


def test_a_database_gone_before_the_query_runs_fails_it_naming_the_table(spark, shop):
    out = lookup_join(orders(spark, [1, 2]), LookupTable.sqlite(shop, "customers"), {"customer_id": "id"})
    query = kit.sql("SELECT o.id, c.name FROM orders AS o JOIN customers FOR SYSTEM_TIME AS OF o.proctime AS c "
                    "ON o.customer_id = c.id", orders=orders(spark, [1]),
                    customers=LookupTable.sqlite(shop, "customers"))
    shop.unlink()
    for result in (out, query):
        assert re.match(rf"lookup table 'customers' \(SQLite file {re.escape(str(shop))}\): "
                        r"connect\(\) failed on a Spark worker \(OperationalError: unable to open database file\); "
                        "it runs on every worker, so the database must be reachable", run_failure(result))


def test_a_table_dropped_or_a_connection_closed_on_the_workers_fails_the_query(spark, shop):
    out = lookup_join(orders(spark, [1]), LookupTable.sqlite(shop, "customers"), {"customer_id": "id"})
    with closing(sqlite3.connect(shop)) as c:
        c.execute("DROP TABLE customers")
    message = run_failure(out)
    assert message.startswith(f"lookup table 'customers' (SQLite file {shop}): a lookup on "
                              "a Spark worker failed (OperationalError: no such table: customers); the table must "
                              "stay in the database, and the connection open, until the query has run")
    with closing(sqlite3.connect(shop)) as c:
        c.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    closed = LookupTable(partial(on_workers(sqlite3.Connection.close), shop), "customers")
    assert re.search(r"lookup table 'customers' \(connect=on_workers\.<locals>\.connect\): a lookup on a Spark "
                     r"worker failed \(ProgrammingError: Cannot operate on a closed database\.\)",
                     run_failure(lookup_join(orders(spark, [1]), closed, {"customer_id": "id"})))


def test_connect_failing_on_the_workers_or_not_reaching_them(spark, shop, tmp_path, monkeypatch):
    def unreachable(conn):
        raise ConnectionRefusedError("database host unreachable")
    table = LookupTable(partial(on_workers(unreachable), shop), "customers")
    assert ("connect() failed on a Spark worker (ConnectionRefusedError: database host unreachable)"
            in run_failure(lookup_join(orders(spark, [1]), table, {"customer_id": "id"})))
    (tmp_path / "only_here.py").write_text(
        f"import sqlite3\n\ndef connect():\n    return sqlite3.connect({str(shop)!r})\n")
    monkeypatch.syspath_prepend(str(tmp_path))                 # this process can import it, the workers cannot
    from only_here import connect
    table = LookupTable(connect, "customers")
    assert ("lookup table 'customers' (connect=connect): connect cannot be loaded on a Spark worker "
            "(ModuleNotFoundError: No module named 'only_here'); define it in a module every worker can import"
            in run_failure(lookup_join(orders(spark, [1]), table, {"customer_id": "id"})))
    conn = sqlite3.connect(shop)
    with pytest.raises(KitError, match=r"connect cannot be sent to the Spark workers \(TypeError: cannot pickle "
                                       r"'sqlite3.Connection' object\); give a function that opens a new connection"):
        lookup_join(orders(spark, [1]), LookupTable(lambda: conn, "customers"), {"customer_id": "id"})
    conn.close()


def test_values_that_do_not_fit_the_schema_fail_the_query_naming_the_types(spark, shop):
    table = LookupTable.sqlite(shop, "customers", schema="id BIGINT, name BIGINT, city STRING")
    assert ("does not fit the column types id BIGINT, name BIGINT, city STRING (ValueError: invalid literal for "
            "int() with base 10: 'Ann'); give schema='name TYPE, ...' with the types of its values"
            in run_failure(lookup_join(orders(spark, [1]), table, {"customer_id": "id"})))
    with pytest.raises(KitError, match=r"schema 'id BIGINT, name' of 'customers' is not Spark DDL \('name TYPE, "
                                       r"\.\.\.'\): ParseException: \[PARSE_SYNTAX_ERROR\]"):
        lookup_join(orders(spark, [1]), LookupTable.sqlite(shop, "customers", schema="id BIGINT, name"),
                    {"customer_id": "id"})
