"""MATCH_RECOGNIZE on Spark: one partition per PARTITION BY key, matched in Python over Arrow.

``match_recognize(table, spec)`` groups the input by the PARTITION BY columns and runs
the matcher (``matcher.run_partition``) once per group with ``applyInPandas``; the
columns reach the matcher as numpy arrays, never as per-row pandas objects. Partitions
are independent, so the same plan scales out on a cluster.

Row order inside a partition is the ORDER BY, ties broken by arrival. For a
``kit.Stream`` (event time), Flink's CEP operator buffers rows until the watermark
passes them and drops those already behind it: a row is *late* when its time is at or
below the watermark it met (the goldens' tie rule). The kit drops them from matching as
Flink does, but returns them in ``MatchResult.late`` with the watermark that made them late.

Output (``MatchResult.rows``), ordered by partition, then match, then row:

- ONE ROW PER MATCH: the PARTITION BY columns, then the measures;
- ALL ROWS PER MATCH: the input columns (of the matched row; NULL for an empty match),
  then the measures.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import KitError
from ..stream import Stream
from .spec import ONE_ROW, MatchRecognize
from .types import measure_type

__all__ = ["match_recognize", "MatchResult", "SEMANTICS", "MatchRecognizeWarning"]

SEMANTICS = ("flink", "standard", "flink-2.3")
_SEQ = "_kit_seq"
_ALL = "_kit_all"  # the one group when there is no PARTITION BY
_ERROR = "_kit_error"  # a partition's run-time error, raised by Spark with its message


class MatchRecognizeWarning(UserWarning):
    """Something runs, but not the way a streaming job would want it (e.g. one partition)."""


@dataclass
class MatchResult:
    """What a MATCH_RECOGNIZE produced: ``rows`` (the query's output), ``late`` (rows of a
    stream dropped as late, with their ``watermark``; None for a batch input)."""

    rows: DataFrame
    late: Optional[DataFrame]
    spec: MatchRecognize = field(repr=False)
    semantics: str = "flink"


def _check(table, spec: MatchRecognize, semantics: str) -> tuple[DataFrame, Optional[Stream]]:
    if semantics not in SEMANTICS:
        raise KitError(f"semantics must be one of {', '.join(map(repr, SEMANTICS))}; got {semantics!r}")
    stream = table if isinstance(table, Stream) else None
    df = table.df if stream else table
    if not isinstance(df, DataFrame):
        raise KitError(f"MATCH_RECOGNIZE input must be a Spark DataFrame or a kit.Stream; got {type(table).__name__}")
    columns = df.columns
    for col in list(spec.partition_by) + [o.column for o in spec.order_by]:
        if col not in columns:
            raise KitError(f"column {col!r} of PARTITION BY / ORDER BY is not in the input; columns are {columns}")
    if not spec.order_by:
        raise KitError("MATCH_RECOGNIZE needs ORDER BY: patterns depend on the order of rows")
    if stream is not None and semantics != "standard":
        first = spec.order_by[0]
        if first.column != stream.time or not first.ascending:
            raise KitError(
                f"ORDER BY must start with the stream's time attribute {stream.time!r} ascending "
                f"(Flink's rule for streams); got {first.column!r} {'ASC' if first.ascending else 'DESC'}")
    return df, stream


def _coerce(values: list, dtype: T.DataType) -> pd.Series:
    """Values as a column Arrow accepts for ``dtype``, empty or not (integers truncate like Java)."""
    if isinstance(dtype, T.IntegralType):
        return pd.Series([None if v is None or v != v else int(v) for v in values], dtype=object)
    if isinstance(dtype, (T.FloatType, T.DoubleType)):
        return pd.Series([np.nan if v is None else float(v) for v in values], dtype="float64")
    if isinstance(dtype, T.TimestampType):
        return pd.Series(pd.to_datetime([v if v is None or not isinstance(v, (int, np.integer)) else
                                         pd.Timestamp(int(v), unit="ms") for v in values]))
    return pd.Series(values, dtype=object)


def match_recognize(table, spec: MatchRecognize, semantics: str = "flink",
                    aggregates: dict | None = None) -> MatchResult:
    """Run ``spec`` over ``table`` (a Spark DataFrame or a ``kit.Stream``)."""
    from .matcher import run_partition

    df, stream = _check(table, spec, semantics)
    late = None
    if stream is not None:
        late = df.filter("late").drop("late")
        df = df.filter("NOT late").drop("late", "watermark").withColumnRenamed("seq", _SEQ)
    else:
        df = df.withColumn(_SEQ, F.monotonically_increasing_id())
    if not spec.partition_by:
        warnings.warn("MATCH_RECOGNIZE without PARTITION BY runs as one partition on one core; "
                      "add PARTITION BY to match in parallel", MatchRecognizeWarning, stacklevel=2)
    input_schema = df.schema
    # a dry run on no rows raises the planning errors (greedy last, unknown variables,
    # unsupported features...) here, on the driver, instead of inside a Spark task
    run_partition({f.name: np.array([], dtype=object) for f in input_schema.fields if f.name != _SEQ},
                  spec, semantics, aggregates=aggregates, rowtime=stream.time if stream else None)
    measures = [(m.alias, measure_type(m.expr, input_schema, semantics, aggregates)) for m in spec.measures]
    one_row = spec.rows_per_match == ONE_ROW
    keep = list(spec.partition_by) if one_row else [c for c in df.columns if c != _SEQ]
    out_schema = T.StructType(
        [input_schema[c] for c in keep]
        + [T.StructField(name, dtype, True) for name, dtype in measures]
        + [T.StructField("_kit_order", T.LongType()), T.StructField(_ERROR, T.StringType())])
    order = [o.column for o in spec.order_by] + [_SEQ]
    ascending = [o.ascending for o in spec.order_by] + [True]
    rowtime = stream.time if stream is not None else None
    partition_by = list(spec.partition_by)

    def per_partition(pdf: pd.DataFrame) -> pd.DataFrame:
        pdf = pdf.sort_values(order, ascending=ascending, kind="stable", ignore_index=True)
        columns = {c: pdf[c].to_numpy() for c in pdf.columns if c not in (_SEQ, _ALL)}
        try:
            result = run_partition(columns, spec, semantics, aggregates=aggregates, rowtime=rowtime)
        except KitError as e:  # e.g. SKIP TO FIRST onto the match's first row: Flink fails the job
            where = ", ".join(f"{c}={pdf[c].iat[0]!r}" for c in partition_by)
            return pd.DataFrame({_ERROR: [f"{e} (partition {where or 'all rows'})"]},
                                columns=out_schema.fieldNames())
        out = {}
        if one_row:
            values = [list(r) for r in result.rows]
            for c in partition_by:
                out[c] = _coerce([pdf[c].iat[0]] * len(values), input_schema[c].dataType)
        else:
            index = [r[0] for r in result.rows]
            values = [list(r[1:]) for r in result.rows]
            for c in keep:
                col = pdf[c]
                out[c] = _coerce([None if i is None else col.iat[i] for i in index], input_schema[c].dataType)
        for j, (name, dtype) in enumerate(measures):
            out[name] = _coerce([v[j] for v in values], dtype)
        out["_kit_order"] = list(range(len(values)))  # emission order inside the partition
        out[_ERROR] = pd.Series([None] * len(values), dtype=object)
        return pd.DataFrame(out, columns=out_schema.fieldNames())

    grouped = df.groupBy(*partition_by) if partition_by else df.withColumn(_ALL, F.lit(0)).groupBy(_ALL)
    error = F.col(_ERROR)
    rows = (grouped.applyInPandas(per_partition, out_schema)
                   .filter(F.when(error.isNull(), F.lit(True)).otherwise(F.raise_error(error).cast("boolean")))
                   .orderBy(*partition_by, "_kit_order").drop("_kit_order", _ERROR))
    return MatchResult(rows, late, spec, semantics)
