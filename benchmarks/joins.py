"""Event-time temporal join (seed 002): orders LEFT JOIN rates FOR SYSTEM_TIME AS OF the order time.

Input: orders (one every 10 ms, up to 5 s out of order, 100 currencies) and 100,000 rate
versions spread over the same time (1,000 per currency, up to 5 s out of order), both in
arrival order as single Parquet files of small row groups. Both inputs have a 5 s watermark
delay, so no row is late and the kit takes its as-of fast path (after one pass over each
input to check that). Baselines, same data, same run:

- Spark native, two ways: the textbook as-of -- one union of both inputs, one window per
  currency ordered by time (versions before orders on ties), ``last(rate) ignore nulls`` --
  and the fastest we know, the kit's own technique without its checks: each rate valid
  from its time to the next one, cut into time buckets of one width, the orders meeting
  theirs by one broadcast join on currency and bucket, so they are neither moved nor sorted;
- pandas ``merge_asof`` on one core (sorting both inputs included; reading them is not).

Each Spark run writes to the ``noop`` sink; ``same result`` compares the number of orders
that found a rate and the sum of those rates.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from pyspark.sql import Window
from pyspark.sql import functions as F

import kit
from kit.time import Duration, WatermarkStrategy

from .windows import _side_by_side

VERSIONS, CURRENCIES = 100_000, 100
QUERY = """SELECT o.order_id, o.order_time, o.currency, o.amount, r.rate
FROM orders o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency"""


def _inputs(folder: Path, rows: int):
    orders, rates = folder / f"orders_{rows}.parquet", folder / f"rates_{rows}_{VERSIONS}.parquet"
    spark = kit.spark()
    start = "TIMESTAMP '2024-01-01 00:00:00'"
    if not orders.exists():
        (spark.range(rows).select(
            F.col("id").alias("order_id"),
            F.expr(f"{start} + make_dt_interval(0, 0, 0, (id * 10 - pmod(hash(id), 5000)) / 1000.0)").alias("order_time"),
            F.concat(F.lit("C"), F.expr(f"pmod(hash(id, 1), {CURRENCIES})")).alias("currency"),
            F.expr("pmod(hash(id, 2), 1000)").alias("amount"))
         .coalesce(1).write.option("parquet.block.size", 16 << 20).parquet(str(orders)))
    if not rates.exists():
        step = rows * 10 // VERSIONS
        (spark.range(VERSIONS).select(
            F.expr(f"{start} + make_dt_interval(0, 0, 0, (id * {step} - pmod(hash(id), 5000)) / 1000.0)").alias("update_time"),
            F.concat(F.lit("C"), F.col("id") % CURRENCIES).alias("currency"),
            (F.lit(1.0) + F.expr("pmod(hash(id, 3), 1000)") / 1000.0).alias("rate"))
         .coalesce(1).write.parquet(str(rates)))
    return orders, rates


def _native(orders, rates):
    both = (orders.select("currency", F.col("order_time").alias("t"), F.lit(0).alias("side"), "order_id", "amount",
                          F.lit(None).cast("double").alias("rate"))
            .unionByName(rates.select("currency", F.col("update_time").alias("t"), F.lit(1).alias("side"),
                                      F.lit(None).cast("long").alias("order_id"),
                                      F.lit(None).cast("long").alias("amount"), "rate")))
    upto = Window.partitionBy("currency").orderBy("t", F.col("side").desc()).rowsBetween(Window.unboundedPreceding, 0)
    return (both.withColumn("rate", F.last("rate", ignorenulls=True).over(upto)).where("side = 0")
                .select("order_id", F.col("t").alias("order_time"), "currency", "amount", "rate"))


def _native_spans(orders, rates):
    """Each rate valid from its time to the next one of its currency (the last one: to the
    end), cut into time buckets of one width (the mean distance between rates of a currency);
    each order meets its bucket's spans by one broadcast join on currency and bucket."""
    r = rates.select("currency", F.unix_millis("update_time").alias("t"), "rate")
    low, high, n, currencies = r.agg(F.min("t"), F.max("t"), F.count("*"), F.count_distinct("currency")).first()
    w = -(-(high - low + 1) * currencies // n)
    r = r.withColumn("to", F.lead("t").over(Window.partitionBy("currency").orderBy("t")))
    spans = r.where(F.col("to").isNull() | (F.col("to") > F.col("t"))).select(
        F.col("currency").alias("c2"), F.col("t").alias("st"), F.coalesce("to", F.lit(2 ** 63 - 1)).alias("to"),
        F.col("rate").alias("srate"), F.explode(F.sequence(F.floor(F.col("t") / w), F.when(
            F.col("to").isNull(), F.lit(high // w)).otherwise(F.floor((F.col("to") - 1) / w)))).alias("sb"))
    o = (orders.withColumn("ts", F.unix_millis("order_time"))
         .withColumn("b", F.least(F.floor(F.col("ts") / w), F.lit(high // w))))
    met = o.join(F.broadcast(spans), (F.col("currency") == F.col("c2")) & (F.col("b") == F.col("sb"))
                 & (F.col("st") <= F.col("ts")) & (F.col("ts") < F.col("to")), "left")
    return met.select("order_id", "order_time", "currency", "amount", F.col("srate").alias("rate"))


def _checksum(df):
    row = df.agg(F.count("rate").alias("n"), F.round(F.sum("rate"), 3).alias("s")).first()
    return (row.n, row.s)


def temporal_join(folder: Path, rows: int | None = None):
    """Rows of the results table: 1M and 10M orders (or ``rows``), kit vs native vs pandas."""
    folder.mkdir(parents=True, exist_ok=True)
    spark = kit.spark()
    delay = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5))
    out = []
    for n in ([rows] if rows else [1_000_000, 10_000_000]):
        orders_path, rates_path = _inputs(folder, n)
        orders, rates = spark.read.parquet(str(orders_path)), spark.read.parquet(str(rates_path))

        def kit_join():
            o = kit.stream(orders, time="order_time", watermark=delay)
            r = kit.stream(rates, time="update_time", watermark=delay, primary_key="currency")
            return kit.sql(QUERY, orders=o, rates=r)

        kit_s, native_s, spans_s = _side_by_side(kit_join, lambda: _native(orders, rates),
                                                 lambda: _native_spans(orders, rates))
        same = _checksum(kit_join()) == _checksum(_native(orders, rates)) == _checksum(_native_spans(orders, rates))
        left, right = pd.read_parquet(orders_path), pd.read_parquet(rates_path)
        start = time.process_time()
        merged = pd.merge_asof(left.sort_values("order_time", kind="mergesort"),
                               right.sort_values("update_time", kind="mergesort"),
                               left_on="order_time", right_on="update_time", by="currency")
        pandas_s = time.process_time() - start
        same_pandas = (int(merged.rate.notna().sum()), round(float(merged.rate.sum()), 3)) == _checksum(kit_join())
        label = f"event-time LEFT temporal join, {n:,} orders x {VERSIONS:,} versions, {CURRENCIES} currencies"
        out.append([label, f"{kit_s:.2f} s", "Spark native as-of (union + window last ignore nulls)",
                    f"{native_s:.2f} s", f"{kit_s / native_s:.2f}", same])
        out.append([label, f"{kit_s:.2f} s", "Spark native as-of by time buckets (one broadcast join, no checks)",
                    f"{spans_s:.2f} s", f"{kit_s / spans_s:.2f}", same])
        out.append([label, f"{kit_s:.2f} s", "pandas merge_asof, one core (CPU time, sorting included)",
                    f"{pandas_s:.2f} s", f"{kit_s / pandas_s:.2f}", same_pandas])
    return out
