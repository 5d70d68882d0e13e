"""The documented example tables, and seeded generators for large inputs.

Every table with documented rows in the seed documents is a CSV file in ``data/`` (one
file per table, file order = arrival order; ``data/README.md`` says where each comes from).
``load`` gives it as a Spark DataFrame typed by the table's schema, ``pandas`` as a pandas
DataFrame with the same types:

>>> from kit import data
>>> data.pandas("words")
    word
0  Hello
1  World
2  Hello
>>> data.TABLES["words"].schema
'word STRING'

``ticker_walk`` and ``click_stream`` build large inputs on Spark from ``spark.range``. Their
randomness comes from hashes of ``(seed, row id)`` only (``xxhash64``, never ``rand``), so a
seed gives the same rows however Spark partitions the work.
"""

from __future__ import annotations

import decimal
import re
import types
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from .errors import KitError
from .spark import spark as _spark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["DATA_DIR", "TABLES", "Table", "names", "load", "pandas", "ticker_walk", "click_stream"]

DATA_DIR = Path(__file__).resolve().parent.parent / "data"

_TICKER = "symbol STRING, rowtime TIMESTAMP, price BIGINT, tax BIGINT"
_NAV = "symbol STRING, rowtime TIMESTAMP, price BIGINT"
_CLICKS = "`user` STRING, url STRING, cTime TIMESTAMP"


@dataclass(frozen=True)
class Table:
    """One documented table: ``data/<file>``, its Spark DDL schema and where it comes from."""

    name: str
    file: str
    schema: str
    description: str


def _registry(*tables: Table) -> types.MappingProxyType:
    return types.MappingProxyType({t.name: t for t in tables})


TABLES = _registry(
    Table("ticker", "ticker.csv", _TICKER,
          "Seed 001 §示例: the V-shape Ticker, ACME, 11 rows 1 s apart (golden mr_a_vshape)"),
    Table("ticker_aggregation", "ticker_aggregation.csv", _TICKER,
          "Seed 001 §Aggregations: AVG(A.price) < 15, ACME, 12 rows (golden mr_b_aggregation)"),
    Table("ticker_greedy_reluctant", "ticker_greedy_reluctant.csv", _TICKER,
          "Seed 001 §贪婪量词和勉强量词: B* vs B*?, XYZ, 6 rows "
          "(golden mr_c_greedy_reluctant)"),
    Table("ticker_within", "ticker_within.csv", _TICKER,
          "Seed 001 §时间约束: WITHIN '1' HOUR, ACME, 11 rows 20 min apart "
          "(golden mr_d_within)"),
    Table("ticker_output_mode", "ticker_output_mode.csv", _TICKER,
          "Seed 001 §输出方式: ONE ROW PER MATCH, XYZ, 4 rows (golden mr_e_output_mode)"),
    Table("ticker_after_match", "ticker_after_match.csv", _TICKER,
          "Seed 001 §匹配后的策略: the four AFTER MATCH SKIP strategies, XYZ, 7 rows "
          "(golden mr_f_after_match)"),
    Table("ticker_navigation", "ticker_navigation.csv", _NAV,
          "Seed 001 §引用模式变量 and §Logical Offsets: prices #1..#5 = 10 15 20 31 35 "
          "(symbol and rowtime filled in)"),
    Table("ticker_navigation_abc", "ticker_navigation_abc.csv", _NAV,
          "Seed 001 §Logical Offsets, PATTERN (A B? C) with B: prices 10 15 20 "
          "(symbol and rowtime filled in)"),
    Table("ticker_navigation_ac", "ticker_navigation_ac.csv", _NAV,
          "Seed 001 §Logical Offsets, PATTERN (A B? C) without B: prices 10 20 "
          "(symbol and rowtime filled in)"),
    Table("clicks", "clicks.csv", _CLICKS,
          "Seed 003 clicks (Mary, Bob, Liz; 12:00-14:59), 11 rows = golden tumble_clicks "
          "and groupby_changelog 'all 11 clicks'"),
    Table("clicks_groupby_figure", "clicks_groupby_figure.csv", _CLICKS,
          "Seed 003 §连续查询, GROUP BY user figure: the four clicks the text names "
          "(golden groupby_changelog 'docs figure: first 4 clicks')"),
    Table("clicks_hourly_figure", "clicks_hourly_figure.csv", _CLICKS,
          "Seed 003 §连续查询, hourly TUMBLE figure as the text counts it (4 rows of 2 users "
          "in 12:00-12:59:59): clicks without Liz 12:03 (derived)"),
    Table("currency_rates", "currency_rates.csv",
          "update_time TIMESTAMP, currency STRING, rate DECIMAL(10, 4)",
          "Seed 002 versioned table: EUR/GBP rates, 7 versions out of order "
          "(golden temporal_join rates)"),
    Table("orders", "orders.csv",
          "order_time TIMESTAMP, order_id STRING, currency STRING, amount BIGINT",
          "Seed 002 probe side: 9 orders 09:59-12:00, EUR/GBP/USD (golden temporal_join orders)"),
    Table("words", "words.csv", "word STRING",
          "Seed 004 E.g.2 word-frequency cascade input: Hello World Hello "
          "(golden word_freq_changelog)"),
    Table("shop_sales", "shop_sales.csv", "product_id STRING, category STRING, sales BIGINT",
          "Seed 004 E.g.3 Top-N per category input, 10 rows (golden topn_changelog)"),
)


def names() -> list[str]:
    """The table names, grouped by seed (001, 003, 002, 004)."""
    return list(TABLES)


def _table(name: str) -> Table:
    try:
        return TABLES[name]
    except (KeyError, TypeError):
        raise KitError(f"unknown table {name!r}; valid names: {', '.join(TABLES)}") from None


def _columns(schema: str) -> list[tuple[str, str]]:
    """``"a STRING, b DECIMAL(10, 4)"`` -> ``[("a", "STRING"), ("b", "DECIMAL")]``."""
    return re.findall(r"`?(\w+)`?\s+([A-Z]+)(?:\([\d,\s]*\))?\s*(?:,|$)", schema)


def _typed(column: pd.Series, sql_type: str) -> pd.Series:
    if sql_type == "STRING":
        return column
    if sql_type == "BIGINT":
        return column.astype("int64")
    if sql_type == "TIMESTAMP":
        return pd.to_datetime(column, format="ISO8601").astype("datetime64[ns]")
    if sql_type == "DECIMAL":
        return column.map(decimal.Decimal)
    raise KitError(f"no CSV reader for column type {sql_type} (column {column.name!r})")


def pandas(name: str) -> pd.DataFrame:
    """Table ``name`` as a pandas DataFrame in file order, typed like its schema.

    STRING -> object (str), BIGINT -> int64, TIMESTAMP -> datetime64[ns] (UTC, naive),
    DECIMAL -> object (``decimal.Decimal``).

    >>> pandas("ticker_output_mode")
      symbol             rowtime  price  tax
    0    XYZ 2018-09-17 10:00:02     10    1
    1    XYZ 2018-09-17 10:00:03     12    2
    2    XYZ 2018-09-17 10:00:04     13    1
    3    XYZ 2018-09-17 10:00:05     11    2
    """
    table = _table(name)
    path = DATA_DIR / table.file
    if not path.is_file():
        raise KitError(
            f"table {name!r}: {path} is missing; the kit reads data/ next to the kit/ "
            "package, so install it from a source checkout (pip install -e .)"
        )
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    columns = _columns(table.schema)
    if list(raw.columns) != [c for c, _ in columns]:
        raise KitError(f"{path}: header {list(raw.columns)} does not match {table.schema!r}")
    return pd.DataFrame({c: _typed(raw[c], t) for c, t in columns})


def load(name: str) -> DataFrame:
    """Table ``name`` as a Spark DataFrame with its schema, rows in file order.

    >>> load("words").show()
    +-----+
    | word|
    +-----+
    |Hello|
    |World|
    |Hello|
    +-----+
    <BLANKLINE>
    """
    return _spark().createDataFrame(pandas(name), _table(name).schema)


# ---------------------------------------------------------------------------- generators


def _require(ok: bool, name: str, value, allowed: str) -> None:
    """Raise a KitError naming the parameter and its allowed range unless ``ok``."""
    if not ok:
        raise KitError(f"{name} must be {allowed}, got {value!r}")


def _millis(start) -> int:
    """Epoch milliseconds of ``start`` (a naive time means UTC)."""
    ts = pd.Timestamp(start)
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    return ts.value // 1_000_000


def _ids(rows: int, partitions: int | None):
    _require(isinstance(rows, int) and rows >= 0, "rows", rows, "an int >= 0")
    _require(partitions is None or (isinstance(partitions, int) and partitions >= 1),
             "partitions", partitions, "None or an int >= 1")
    return _spark().range(0, rows, 1, partitions)


def _hash(seed: int, salt: str):
    """A 64-bit hash of (seed, salt, id): the only source of randomness here."""
    from pyspark.sql import functions as F

    return F.xxhash64(F.lit(seed), F.lit(salt), F.col("id"))


def ticker_walk(rows: int, symbols: int = 100, seed: int = 0, start="2024-01-01 00:00:00",
                step_seconds: float = 1, partitions: int | None = None) -> DataFrame:
    """A Ticker-shaped random walk: ``symbol STRING, rowtime TIMESTAMP, price BIGINT, tax BIGINT``.

    Row ``id`` (0 .. rows-1) belongs to symbol ``s = id % symbols`` at step
    ``k = id div symbols``, so every symbol ticks once per ``step_seconds``:

    - ``symbol = "S" + s`` zero-padded (``S00`` .. ``S99`` for 100 symbols);
    - ``rowtime = start + k * step_seconds``;
    - ``level = base(s) + sum of step(s, 1..k)`` with ``base(s)`` in [100, 200) and each
      ``step`` in {-5 .. +5}, equally likely;
    - ``price = |level - 1| + 1`` (the walk reflected at 1, so prices stay >= 1);
    - ``tax`` in {1, 2, 3}.

    Steps of up to 5 let a rise beat the price before the last drop, so the V-shape query
    of seed 001 matches about every 40 rows.
    ``partitions`` sets ``spark.range``'s partitions; the rows do not depend on it. The
    DataFrame is not sorted; arrival order is ``(rowtime, symbol)``.

    >>> ticker_walk(6, symbols=2).orderBy("symbol", "rowtime").show()
    +------+-------------------+-----+---+
    |symbol|            rowtime|price|tax|
    +------+-------------------+-----+---+
    |    S0|2024-01-01 00:00:00|  165|  3|
    |    S0|2024-01-01 00:00:01|  169|  2|
    |    S0|2024-01-01 00:00:02|  172|  2|
    |    S1|2024-01-01 00:00:00|  152|  2|
    |    S1|2024-01-01 00:00:01|  155|  2|
    |    S1|2024-01-01 00:00:02|  153|  3|
    +------+-------------------+-----+---+
    <BLANKLINE>
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    _require(isinstance(symbols, int) and symbols >= 1, "symbols", symbols, "an int >= 1")
    _require(step_seconds >= 0.001, "step_seconds", step_seconds, ">= 0.001 (1 ms)")
    ids = _ids(rows, partitions)  # starts the session, which column expressions need
    step_ms = round(step_seconds * 1000)
    width = len(str(symbols - 1))
    sym, k = F.col("id") % symbols, F.expr(f"id div {symbols}")
    step = F.when(k == 0, 0).otherwise(F.pmod(_hash(seed, "step"), 11) - 5)
    so_far = Window.partitionBy("s").orderBy("k").rowsBetween(Window.unboundedPreceding, 0)
    walk = F.sum("step").over(so_far)
    base = 100 + F.pmod(F.xxhash64(F.lit(seed), F.lit("base"), F.col("s")), 100)
    return (
        ids.select("id", sym.alias("s"), k.alias("k"), step.alias("step"))
        .select(
            F.format_string(f"S%0{width}d", "s").alias("symbol"),
            F.timestamp_millis(F.lit(_millis(start)) + F.col("k") * step_ms).alias("rowtime"),
            (F.abs(base + walk - 1) + 1).cast("bigint").alias("price"),
            (F.pmod(_hash(seed, "tax"), 3) + 1).cast("bigint").alias("tax"),
        )
    )


def click_stream(rows: int, users: int = 1000, seed: int = 0, start="2024-01-01 00:00:00",
                 rate_per_second: float = 1000, max_disorder_seconds: float = 5,
                 late_fraction: float = 0.01, late_seconds: float = 60,
                 partitions: int | None = None) -> DataFrame:
    """Clicks with bounded disorder and some late rows: ``user, url, cTime, arrival``.

    Columns ``user STRING, url STRING, cTime TIMESTAMP, arrival BIGINT``. Arrival ``a``
    (0 .. rows-1, unique and dense: the arrival order) happens at clock time
    ``t(a) = start + D + floor(a * 1000 / rate_per_second)`` ms, where ``D = max_disorder_seconds``
    (so on-time event times are never before ``start``). With ``L = late_seconds``, each row
    draws from hashes of ``(seed, a)``:

    - ``j(a)``, uniform in ``[0, D)`` (whole milliseconds);
    - ``late(a)``, true with probability ``late_fraction``;
    - ``cTime = t(a) - j(a)`` when on time, ``cTime = t(a) - j(a) - D - L`` when late;
    - ``user = "u" + n`` zero-padded, ``n`` uniform in ``[0, users)``;
    - ``url``: ``./home``, ``./cart``, ``./checkout`` (1/8 each) or ``./prod?id=1..100`` (5/8).

    Against a bounded-out-of-orderness watermark of delay ``D`` (``max cTime seen - D - 1 ms``,
    taken over the rows arrived before):

    - an on-time row is never late: every earlier event time is at most ``t(a)``, so the
      watermark is at most ``t(a) - D - 1 ms``, below ``cTime``;
    - a late row is late once some on-time row ``b`` arrived with ``t(a) - t(b) <= L - D``
      (its ``cTime > t(b) - D`` lifts the watermark above ``t(a) - L - 2D``): every late row
      except, possibly, those before the first on-time row or at rates below one row per
      ``L - D`` seconds. With ``L <= D`` late rows need not be late.

    >>> click_stream(4, users=100).show(truncate=False)
    +----+------------+-----------------------+-------+
    |user|url         |cTime                  |arrival|
    +----+------------+-----------------------+-------+
    |u71 |./prod?id=80|2024-01-01 00:00:01.623|0      |
    |u05 |./home      |2024-01-01 00:00:02.291|1      |
    |u86 |./prod?id=1 |2024-01-01 00:00:01.814|2      |
    |u72 |./checkout  |2024-01-01 00:00:01.553|3      |
    +----+------------+-----------------------+-------+
    <BLANKLINE>
    """
    from pyspark.sql import functions as F

    _require(isinstance(users, int) and users >= 1, "users", users, "an int >= 1")
    _require(rate_per_second > 0, "rate_per_second", rate_per_second, "> 0")
    _require(max_disorder_seconds >= 0, "max_disorder_seconds", max_disorder_seconds, ">= 0")
    _require(0 <= late_fraction <= 1, "late_fraction", late_fraction, "in [0, 1]")
    _require(late_seconds >= 0, "late_seconds", late_seconds, ">= 0")
    ids = _ids(rows, partitions)  # starts the session, which column expressions need
    disorder_ms, late_ms = round(max_disorder_seconds * 1000), round(late_seconds * 1000)
    per_row = F.col("id") * 1000 / F.lit(float(rate_per_second))
    clock = F.lit(_millis(start) + disorder_ms) + F.floor(per_row)
    jitter = F.pmod(_hash(seed, "disorder"), disorder_ms) if disorder_ms else F.lit(0)
    late = F.pmod(_hash(seed, "late"), 1_000_000) < round(late_fraction * 1_000_000)
    event = clock - jitter - F.when(late, disorder_ms + late_ms).otherwise(0)
    page = F.pmod(_hash(seed, "url"), 8)
    url = (F.when(page == 0, "./home").when(page == 1, "./cart").when(page == 2, "./checkout")
           .otherwise(F.format_string("./prod?id=%d", F.pmod(_hash(seed, "product"), 100) + 1)))
    width = len(str(users - 1))
    return ids.select(
        F.format_string(f"u%0{width}d", F.pmod(_hash(seed, "user"), users)).alias("user"),
        url.alias("url"),
        F.timestamp_millis(event.cast("bigint")).alias("cTime"),
        F.col("id").alias("arrival"),
    )
