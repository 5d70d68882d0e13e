"""Flink's lookup join: each left row queries an external table when it is processed.

``SELECT * FROM orders AS o [LEFT] JOIN customers FOR SYSTEM_TIME AS OF o.proc_time AS c
ON o.customer_id = c.id``: when an order is processed, Flink asks the database for the rows
with ``id = customer_id`` and joins with what the table holds *at that moment*; it keeps no
state of the table (unlike the processing-time temporal join). INNER drops an order that
finds nothing, LEFT pads NULLs, several rows found give several output rows.

``lookup_join(orders, LookupTable.sqlite("shop.db", "customers", cache=...), {"customer_id": "id"},
how="left")`` replays this on the stream's simulated processing time (``kit.stream(...,
proctime=Clock(...))``). Its columns: the left columns, the table's columns, then

==================  ==========  ================================================================
column              type        meaning
==================  ==========  ================================================================
``seq``             BIGINT      arrival of the left row (rows come in ``seq`` order, then the
                                table's rows ordered by all their columns)
``proctime``        TIMESTAMP   when the left row was processed and looked its key up
``cache``           STRING      ``'hit'``: answered from the cache; ``'miss'``: read from the
                                database; NULL without a cache or for a NULL key
``looked_up_at``    TIMESTAMP   when the answer was read from the database: before ``proctime``
                                on a hit, so a stale read shows (NULL for a NULL key)
==================  ==========  ================================================================

A table column named like a left or metadata column gets Calcite's suffix, as Flink's
``SELECT *`` does: ``id`` becomes ``id0`` (then ``id1``...). Customers cached for 10 s, Bob
renamed at 12:00:05 (``updates``)::

    order  customer_id  id  name    seq  proctime  cache  looked_up_at
    o1     2            2   Bob     0    12:00:00  miss   12:00:00
    o2     2            2   Bob     1    12:00:06  hit    12:00:00      <- stale
    o3     2            2   Robert  2    12:00:12  miss   12:00:12

``lookups(...)`` is the layer below, for SQL: one row per (left row, table row found), with
``seq``, the table's columns, ``match_index`` (0.. in that order), ``proctime``, ``cache``,
``looked_up_at``; a left row that finds nothing has no row (``misses=True``: one row with
NULL table columns), so SQL joins it back by ``seq`` and applies the rest of ``ON`` in Spark
(or passes ``carry=`` left columns to get them in front, as ``lookup_join`` does).

The cache is Flink's ``lookup.cache = 'PARTIAL'`` (``LookupCache``): entries per key,
expired ``expire_after_write`` after the database read, ``expire_after_access`` after the
last read or write (an entry is expired when that much time has passed: ``>=``), at most
``max_rows`` keys, least recently used evicted first (Flink's Guava cache evicts
approximately so), and a key that found nothing cached as empty when
``cache_missing_key``. Time is the stream's simulated processing time.

``updates``: changes to the table on that clock, rows ``at, op`` + the table's columns;
``+I``/``+U`` upsert and ``-D`` deletes *by the lookup key*: after it, the key's rows are
the update's row (none for ``-D``). A lookup first applies every update of its key with
``at <= proctime``. Updates live in the replay, never in the database, which is only read
(``LookupTable.sqlite`` opens it read-only): re-runs give the same answer.

Failures: the table's columns are read when the join is planned, so a database or a table
that is not there, or a ``connect`` Spark cannot send to its workers, is a ``KitError`` then.
What fails later, on the workers, as Spark runs the lookups (``connect()`` failing there, the
database file or the table gone, the connection closed, a value that does not fit the column
types) fails the query with a message naming the table and its database, a
``KitRuntimeError`` without a worker traceback (``kit.errors``).

Determinism: Flink caches per subtask; the kit answers as one subtask would (parallelism
1). The lookups run on the replay driver (``kit.replay.keyed``), a ``LookupJoinRunner`` per
key: without ``max_rows`` keys are independent (entries and updates are per key), each
key's rows in arrival order; with ``max_rows`` eviction couples the keys, and one runner
takes the whole stream in arrival order.

The semantics, without Spark (a dict as the database)::

>>> customers = {(2,): [(2, "Bob")]}
>>> replay = LookupReplay(lambda key: customers.get(key, []),
...                       LookupCache(expire_after_write=Duration.of_seconds(10)),
...                       [Update(5_000, "+U", (2,), (2, "Robert"))])
>>> for now in (0, 6_000, 12_000):
...     print(replay.lookup((2,), now))
Lookup(rows=[(2, 'Bob')], cache='miss', looked_up_at=0)
Lookup(rows=[(2, 'Bob')], cache='hit', looked_up_at=0)
Lookup(rows=[(2, 'Robert')], cache='miss', looked_up_at=12000)
"""

from __future__ import annotations

import sqlite3
import sys
import weakref
from collections import OrderedDict, deque
from contextlib import closing
from dataclasses import dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import Callable, NamedTuple
from urllib.parse import unquote, urlsplit

import pandas as pd
import pyarrow as pa
from pyspark import cloudpickle
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from ..arrow import column
from ..errors import KitError, raising
from ..replay.keyed import KeyedOperator, ValueState, replay, spread
from ..spark import replay_tasks
from ..stream import Stream, epoch_ms, rows_of
from ..time import Duration, to_duration

__all__ = ["LookupCache", "LookupTable", "LookupReplay", "LookupJoinRunner", "Lookup", "Update", "lookup_join",
           "lookups"]

_META = ("seq", "match_index", "proctime", "cache", "looked_up_at")
_OPS = ("+I", "+U", "-D")
_BATCH_ROWS = 10_000
_ERROR = "_kit_error"


@dataclass(frozen=True)
class LookupCache:
    """Flink's partial lookup cache (``lookup.partial-cache.*``), on the simulated clock."""

    expire_after_write: Duration | None = None
    expire_after_access: Duration | None = None
    max_rows: int | None = None
    cache_missing_key: bool = True

    def __post_init__(self):
        for name in ("expire_after_write", "expire_after_access"):
            d = getattr(self, name)
            if d is not None:
                d = to_duration(d, "LookupCache", name, like="Duration")
                object.__setattr__(self, name, d)
            if d is not None and d.millis < 0:
                raise KitError(f"{name} must be a Duration >= 0 ms or None, e.g. Duration.of_minutes(10); got {d!r}")
        if self.max_rows is not None and not (type(self.max_rows) is int and self.max_rows >= 0):
            raise KitError(f"max_rows (cached keys) must be an int >= 0 or None; got {self.max_rows!r}")
        if not isinstance(self.cache_missing_key, bool):
            raise KitError(f"cache_missing_key must be True or False; got {self.cache_missing_key!r}")
        if self.expire_after_write is self.expire_after_access is self.max_rows is None:
            raise KitError("a LookupCache needs expire_after_write, expire_after_access or max_rows "
                           "(0 or more): Flink refuses a cache that never evicts")

    def __repr__(self) -> str:
        given = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if getattr(self, f.name) != f.default]
        return f"LookupCache({', '.join(given)})"


@dataclass(frozen=True, eq=False)
class LookupTable:
    """A table in a DB-API 2.0 database, looked up by key.

    - ``connect``: a picklable zero-argument callable returning a connection (it runs in the
      Spark workers); ``LookupTable.sqlite(path, table)`` builds one for a SQLite file.
    - ``cache``: a ``LookupCache``, or None: every lookup reads the database.
    - ``updates``: a Spark or pandas DataFrame of changes (see the module doc).
    - ``schema``: the table's Spark types (``"id BIGINT, name STRING"``); default for
      SQLite: from the declared column types.
    """

    connect: Callable = field(repr=False)
    table: str
    cache: LookupCache | None = None
    updates: object = field(default=None, repr=False)
    schema: str | None = None

    def __post_init__(self):
        if not callable(self.connect):
            raise KitError(f"connect must be a function returning a DB-API connection; got {self.connect!r}")
        if not isinstance(self.table, str) or not self.table:
            raise KitError(f"table must be a table name; got {self.table!r}")
        if self.cache is not None and not isinstance(self.cache, LookupCache):
            raise KitError(f"cache must be a LookupCache or None; got {self.cache!r}")

    @property
    def columns(self) -> list:
        """The table's column names (asks the database)."""
        return _describe(self).fieldNames()

    @staticmethod
    def sqlite(path, table: str, cache: LookupCache | None = None, updates=None,
               schema: str | None = None) -> "LookupTable":
        """``table`` of the SQLite file at ``path``, opened read-only."""
        uri = Path(path).absolute().as_uri() + "?mode=ro"
        return LookupTable(partial(sqlite3.connect, uri, uri=True), table, cache, updates, schema)


class Update(NamedTuple):
    """A change to the table: at ``at`` (epoch ms) the rows of ``key`` become ``row`` (``-D``: none)."""

    at: int
    op: str
    key: tuple
    row: tuple


class Lookup(NamedTuple):
    """The answer to one lookup: the rows, ``'hit'``/``'miss'``/None, and when they were read (ms)."""

    rows: list
    cache: str | None
    looked_up_at: int | None


class _Entry:
    __slots__ = ("rows", "written", "accessed")

    def __init__(self, rows, now):
        self.rows, self.written, self.accessed = rows, now, now


class LookupReplay:
    """One subtask's lookups: ``lookup(key, now)`` in non-decreasing ``now`` per key.

    ``query(key)`` reads the database (a list of row tuples); ``updates`` (``Update``s)
    override it per key once their time has come; ``cache`` is a ``LookupCache`` or None.
    """

    def __init__(self, query: Callable[[tuple], list], cache: LookupCache | None = None, updates=()):
        self.query, self.cache = query, cache
        self._entries: OrderedDict = OrderedDict()  # key -> _Entry, least recently used first
        self._pending: dict = {}  # key -> its updates not applied yet, by time
        for u in sorted(updates, key=lambda u: u.at):
            self._pending.setdefault(u.key, deque()).append(u)
        self._changed: dict = {}  # key -> its rows after the updates applied so far

    def lookup(self, key: tuple, now: int) -> Lookup:
        if None in key:  # SQL's = never matches NULL: nothing to look up
            return Lookup([], None, None)
        pending = self._pending.get(key)
        while pending and pending[0].at <= now:
            u = pending.popleft()
            self._changed[key] = [] if u.op == "-D" else [u.row]
        cache = self.cache
        if cache is None:
            return Lookup(self._read(key), None, now)
        entry = self._entries.get(key)
        if entry is not None and not self._expired(entry, now):
            entry.accessed = now
            self._entries.move_to_end(key)
            return Lookup(entry.rows, "hit", entry.written)
        self._entries.pop(key, None)
        rows = self._read(key)
        if rows or cache.cache_missing_key:
            self._entries[key] = _Entry(rows, now)
            if cache.max_rows is not None:  # as Guava: drop expired entries, then the least recently used
                for k in [k for k, e in self._entries.items() if self._expired(e, now)]:
                    del self._entries[k]
                while len(self._entries) > cache.max_rows:
                    self._entries.popitem(last=False)
        return Lookup(rows, "miss", now)

    def _read(self, key: tuple) -> list:
        return self._changed[key] if key in self._changed else list(self.query(key))

    def _expired(self, entry: _Entry, now: int) -> bool:
        w, a = self.cache.expire_after_write, self.cache.expire_after_access
        return (w is not None and now - entry.written >= w.millis) or (a is not None and now - entry.accessed >= a.millis)


@dataclass(frozen=True)
class LookupJoin:
    """``[LEFT] JOIN table FOR SYSTEM_TIME AS OF o.proctime ON o.a = t.b`` as ``kit.sql`` runs
    it: ``views()`` gives the left rows and the rows they found, both with ``__kit_v`` (the
    left row's ``seq``); Spark joins them with the rest of ``ON``."""

    left: Stream
    table: LookupTable
    keys: tuple                       # ((left column, table column), ...)
    how: str = "inner"

    def views(self) -> tuple[DataFrame, DataFrame]:
        from .versioned import VERSION
        left = self.left.df.select(*self.left.source.columns, F.col("seq").alias(VERSION))
        found = lookups(self.left, self.table, [a for a, _ in self.keys], [b for _, b in self.keys])
        return left, found.select(*[c for c in found.columns if c not in _META], F.col("seq").alias(VERSION))


def lookup_join(left: Stream, table: LookupTable, on, how: str = "inner") -> DataFrame:
    """Flink's ``[LEFT] JOIN table FOR SYSTEM_TIME AS OF left.proctime ON left.a = table.b``.

    ``on``: ``{left column: table column}`` or ``[(left column, table column), ...]``;
    ``how``: ``"inner"`` or ``"left"``. Columns and order: see the module doc.
    """
    if how not in ("inner", "left"):
        raise KitError(f"how must be 'inner' or 'left'; got {how!r}")
    pairs = list(on.items()) if isinstance(on, dict) else list(on or ())
    if not pairs or not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs):
        raise KitError(f"on must map left columns to table columns, e.g. {{'customer_id': 'id'}}; got {on!r}")
    carry = [c for c in left.source.columns if c not in ("seq", "watermark", "late", "proctime")]
    found = lookups(left, table, [a for a, _ in pairs], [b for _, b in pairs], misses=how == "left", carry=carry)
    table_columns = [c for c in found.columns[len(carry):] if c not in _META]
    return found.orderBy("seq", "match_index").select(*carry, *table_columns, "seq", "proctime", "cache",
                                                      "looked_up_at")


def lookups(left: Stream, table: LookupTable, left_keys, table_keys, misses: bool = False,
            carry=()) -> DataFrame:
    """One row per (left row, table row it found): the left columns ``carry``, ``seq``, the
    table's columns (renamed like ``lookup_join``'s if they clash), ``match_index``,
    ``proctime``, ``cache``, ``looked_up_at``; unordered. ``misses``: also one row, with
    NULL table columns and ``match_index``, for each left row that found nothing."""
    left_keys = [left_keys] if isinstance(left_keys, str) else list(left_keys)
    table_keys = [table_keys] if isinstance(table_keys, str) else list(table_keys)
    carry = list(carry)
    if not isinstance(left, Stream):
        raise KitError(f"the left input must be a kit.stream(...); got {type(left).__name__}")
    left.require_own_names("a lookup join (its left input)")
    if left.proctime is None:
        raise KitError("a lookup join runs on processing time: give the stream proctime=Clock(...) or a column")
    if not left_keys or len(left_keys) != len(table_keys):
        raise KitError(f"give one table column per left column; got {left_keys} and {table_keys}")
    rows = left.unordered()
    unknown = [c for c in left_keys + carry if c not in rows.columns]
    if unknown:
        raise KitError(f"left column(s) {unknown} are not in the stream; its columns are {rows.columns}")
    clash = [c for c in carry if c in _META]
    if clash:
        raise KitError(f"left column(s) {clash} clash with the lookup's metadata columns; rename them first")
    schema = _describe(table)
    names = schema.fieldNames()
    unknown = [c for c in table_keys if c not in names]
    if unknown:
        raise KitError(f"column(s) {unknown} are not in table {table.table!r}; its columns are {names}")
    updates = _updates(table, names, table_keys)
    named = _named(table)
    try:  # sent pickled, so that failing to send it or to load it there is said as the kit says things
        sent = cloudpickle.dumps(table.connect)
    except Exception as e:
        raise KitError(f"{named}: connect cannot be sent to the Spark workers ({_cause(e)}); give a function "
                       "that opens a new connection, e.g. functools.partial(sqlite3.connect, path)") from None

    keyed = rows.select(*carry, "seq", F.unix_millis(F.col("proctime").cast("timestamp")).alias("_pt"),
                        *[F.col(c).alias(f"_k{i}") for i, c in enumerate(left_keys)])
    out = T.StructType([keyed.schema[c] for c in carry] + [T.StructField("seq", T.LongType())]
                       + [T.StructField(n, f.dataType) for n, f in zip(_uniquify(names, carry + list(_META)), schema)]
                       + [T.StructField("match_index", T.IntegerType()), T.StructField("proctime", T.TimestampType()),
                          T.StructField("cache", T.StringType()), T.StructField("looked_up_at", T.TimestampType())])
    with_error = T.StructType(out.fields + [T.StructField(_ERROR, T.StringType())])
    arrow = to_arrow_schema(with_error, timezone="UTC")
    name, cache, width = table.table, table.cache, len(names)
    types = ", ".join(f"{f.name} {f.dataType.simpleString().upper()}" for f in schema)

    def batch(found: list) -> pa.RecordBatch:
        try:
            arrays = [column(list(v), f.dataType, arrow.field(f.name).type) for v, f in zip(zip(*found), out)]
        except (ArithmeticError, TypeError, ValueError) as e:
            raise KitError(f"{named}: a row it holds does not fit the column types {types} ({_cause(e)}); give "
                           "schema='name TYPE, ...' with the types of its values") from e
        return pa.RecordBatch.from_arrays(arrays + [pa.nulls(len(found), pa.string())], schema=arrow)

    def failed(message: str) -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays([pa.nulls(1, f.type) for f in arrow][:-1] + [pa.array([message])],
                                          schema=arrow)

    def output(table, found: list):
        """A task's rows found, in batches; or, the database having failed the lookups, the
        query failing with the kit's message."""
        found = list(found)
        if found and type(found[-1]) is _Failed:
            yield failed(found[-1].message)
            return
        try:
            for i in range(0, len(found), _BATCH_ROWS):
                yield batch(found[i:i + _BATCH_ROWS])
        except KitError as e:
            yield failed(str(e))

    def session(table):
        return _Session(sent, named, name, names, table_keys)

    key_columns = [f"_k{i}" for i in range(len(left_keys))]
    coupled = cache is not None and cache.max_rows is not None   # eviction couples the keys: one pass
    by_key = {}
    for u in updates:
        by_key.setdefault(u.key, []).append(u)

    def operator(key, shared):
        return LookupJoinRunner(shared, cache, updates if coupled else by_key.get(tuple(key), ()), len(carry),
                                width if misses else None)

    keys = [] if coupled else key_columns
    tasks = spread(keyed, keys, replay_tasks(keyed.sparkSession, rows_of([left])), "seq")
    return raising(replay(tasks, keys, operator, with_error, [*carry, "seq", "_pt", *key_columns], output,
                          task=session), _ERROR)


class _Failed(NamedTuple):
    message: str


class _Session:
    """One task's reads of the table: its connection, opened at the first read and closed
    once the task lets go of it; ``error``: the message the reads stopped at."""

    def __init__(self, sent: bytes, named: str, table: str, columns: list, keys: list):
        self.sent, self.named, self.table, self.columns, self.keys = sent, named, table, columns, keys
        self.query, self.error = None, None

    def read(self, key: tuple) -> list:
        if self.query is None:
            conn = _connected(self.sent, self.named)
            weakref.finalize(self, conn.close)
            self.query = _query(conn, self.table, self.columns, self.keys, self.named)
        return self.query(key)


class LookupJoinRunner(KeyedOperator):
    """Flink's ``LookupJoinRunner`` for one key of the replay (the whole stream, when
    ``max_rows`` eviction couples the keys): each left row looks its key up when it is
    processed, through the key's ``LookupReplay`` (its cache entries and ``updates``, in
    state). A row is the ``carry`` values, ``seq``, the processing time (ms), the key
    values; it outputs ``(*carry, seq, *table row, match_index, proctime, cache,
    looked_up_at)`` per table row found (``width``: with NULL table columns when none),
    or, the task's ``session`` failing, the message (its lookups stop there)."""
    state = (ValueState("lookups"),)

    def __init__(self, session: _Session, cache: LookupCache | None, updates, carry: int, width: int | None):
        self.session, self.cache, self.updates, self.carry, self.width = session, cache, updates, carry, width

    def process_element(self, row, ctx):
        session = self.session
        if session.error is not None:
            return
        lookups = ctx.state("lookups").value()
        if lookups is None:
            lookups = LookupReplay(session.read, self.cache, self.updates)
            ctx.state("lookups").update(lookups)
        head, now = row[:self.carry + 1], row[self.carry + 1]
        try:
            result = lookups.lookup(row[self.carry + 2:], now)
        except KitError as e:
            session.error = str(e)
            ctx.output(_Failed(session.error))
            return
        meta = (now, result.cache, result.looked_up_at)
        for m, found in enumerate(result.rows):
            ctx.output((*head, *found, m, *meta))
        if self.width is not None and not result.rows:
            ctx.output((*head, *[None] * self.width, None, *meta))


def _uniquify(names: list, taken: list) -> list:
    """``names`` with Calcite's suffix (``id0``, ``id1``...) on those already in ``taken``."""
    used, out = set(taken) | set(names), []
    for n in names:
        if n in taken:
            i = 0
            while f"{n}{i}" in used:
                i += 1
            n = f"{n}{i}"
            used.add(n)
        out.append(n)
    return out


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _driver(conn):
    """The DB-API module of a connection (its ``paramstyle`` and ``Error``)."""
    return sys.modules[type(conn).__module__.split(".")[0]]


def _query(conn, table: str, columns: list, keys: list, named: str) -> Callable[[tuple], list]:
    """A function: key values -> the table's rows with them, ordered by every column; a
    failed read is a KitError on behalf of ``named`` (the table, as messages name it)."""
    style = _driver(conn).paramstyle
    mark = {"qmark": lambda i: "?", "numeric": lambda i: f":{i + 1}", "named": lambda i: f":k{i}",
            "format": lambda i: "%s", "pyformat": lambda i: f"%(k{i})s"}[style]
    listed = ", ".join(map(_quote, columns))
    where = " AND ".join(f"{_quote(k)} = {mark(i)}" for i, k in enumerate(keys))
    sql = f"SELECT {listed} FROM {_quote(table)} WHERE {where} ORDER BY {listed}"

    def run(key: tuple) -> list:
        try:
            cursor = conn.cursor()
            cursor.execute(sql, {f"k{i}": v for i, v in enumerate(key)} if style in ("named", "pyformat") else key)
            return [tuple(r) for r in cursor.fetchall()]
        except Exception as e:
            raise KitError(f"{named}: a lookup on a Spark worker failed ({_cause(e)}); the table must stay in the "
                           "database, and the connection open, until the query has run") from e
    return run


def _connected(sent: bytes, named: str):
    """A connection on a Spark worker, from ``connect`` as ``sent`` pickled; failing, a
    KitError on behalf of ``named``."""
    try:
        connect = cloudpickle.loads(sent)
    except Exception as e:
        raise KitError(f"{named}: connect cannot be loaded on a Spark worker ({_cause(e)}); define it in a module "
                       "every worker can import, or use functools.partial(sqlite3.connect, path)") from e
    try:
        return connect()
    except Exception as e:
        raise KitError(f"{named}: connect() failed on a Spark worker ({_cause(e)}); it runs on every worker, so "
                       "the database must be reachable from each of them (SQLite: a path they can all read) "
                       "until the query has run") from e


def _named(table: LookupTable) -> str:
    """How messages name ``table``: its name and its database (a SQLite file's path)."""
    connect = table.connect
    function = connect.func if isinstance(connect, partial) else connect
    if function is sqlite3.connect and connect.args:
        path = str(connect.args[0])
        where = f"SQLite file {unquote(urlsplit(path).path) if path.startswith('file:') else path}"
    else:
        where = f"connect={getattr(function, '__qualname__', type(function).__qualname__)}"
    return f"lookup table {table.table!r} ({where})"


def _cause(error: Exception) -> str:
    """``error`` in one line: its type and the first line of its message."""
    text = str(error).strip().split("\n")[0]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _describe(table: LookupTable) -> T.StructType:
    """The table's columns with Spark types; fails if the database or the table is not there."""
    try:
        conn = table.connect()
    except Exception as e:
        raise KitError(f"{_named(table)}: cannot connect ({_cause(e)}); check that the database is there and "
                       "connect() opens it") from e
    with closing(conn):
        try:
            cursor = conn.cursor()
            cursor.execute(f"SELECT * FROM {_quote(table.table)} WHERE 1 = 0")
        except Exception as e:
            raise KitError(f"table {table.table!r} is not in the database or cannot be read ({_cause(e)}); check "
                           "the name and that connect() gives an open connection") from e
        names = [d[0] for d in cursor.description]
        if table.schema is not None:
            try:
                schema = T.StructType.fromDDL(table.schema)
            except PySparkException as e:
                raise KitError(f"schema {table.schema!r} of {table.table!r} is not Spark DDL ('name TYPE, ...'): "
                               f"{_cause(e).split(' SQLSTATE')[0]}") from None
            if schema.fieldNames() != names:
                raise KitError(f"schema {table.schema!r} must name the table's columns in order: {names}")
            return schema
        if not isinstance(conn, sqlite3.Connection):
            raise KitError(f"give the types of {table.table!r}'s columns {names}: schema='name TYPE, ...'")
        declared = {r[1]: r[2] for r in conn.execute(f"PRAGMA table_info({_quote(table.table)})")}
        return T.StructType([T.StructField(n, _sqlite_type(table.table, n, declared[n])) for n in names])


def _sqlite_type(table: str, name: str, declared: str) -> T.DataType:
    """SQLite's type affinity rules, as Spark types (TIMESTAMP/DATETIME read as TIMESTAMP)."""
    d = declared.upper()
    for words, spark_type in ((("INT",), T.LongType()), (("CHAR", "CLOB", "TEXT"), T.StringType()),
                              (("BLOB",), T.BinaryType()), (("REAL", "FLOA", "DOUB"), T.DoubleType()),
                              (("TIMESTAMP", "DATETIME"), T.TimestampType())):
        if any(w in d for w in words):
            return spark_type
    if not d:
        raise KitError(f"column {name!r} of {table!r} has no declared type; pass schema='name TYPE, ...'")
    return T.DoubleType()  # SQLite's NUMERIC affinity


def _updates(table: LookupTable, names: list, keys: list) -> list:
    """The table's updates as ``Update``s (they are few: collected to the driver)."""
    df = table.updates
    if df is None:
        return []
    missing = [c for c in ("at", "op", *names) if c not in df.columns]
    if missing:
        raise KitError(f"updates need columns at, op and the table's {names}; missing {missing}")
    if isinstance(df, DataFrame):
        if not isinstance(df.schema["at"].dataType, (T.TimestampType, T.TimestampNTZType)):
            raise KitError(f"updates column 'at' must be TIMESTAMP; it is {df.schema['at'].dataType.simpleString()}")
        records = df.select(F.unix_millis(F.col("at").cast("timestamp")), "op", *names).collect()
    else:  # pandas: no Spark job
        at = pd.to_datetime(df["at"])
        if at.dt.tz is not None:
            at = at.dt.tz_convert("UTC").dt.tz_localize(None)
        records = zip([None if pd.isna(t) else epoch_ms(t) for t in at], df["op"].tolist(),
                      *[df[c].tolist() for c in names])
    index = [names.index(k) for k in keys]
    out = []
    for i, r in enumerate(records):
        if r[0] is None or r[1] not in _OPS:
            raise KitError(f"update {i} ({r}): 'at' must be set and 'op' one of {list(_OPS)}")
        row = tuple(r[2:])
        out.append(Update(r[0], r[1], tuple(row[j] for j in index), row))
    return out
