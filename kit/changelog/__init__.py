"""A changelog on Spark: the rows a dynamic table's operator emits, one per change.

Every operator of a continuous query reads and writes the same shape of DataFrame:

==========  ============  ==============================================================
column      type          meaning
==========  ============  ==============================================================
``_op``     STRING        Flink's row kind: ``+I`` insert, ``-U`` update before, ``+U``
                          update after, ``-D`` delete
(values)    any           the operator's output columns, in order (``Changelog.columns``)
``seq``     BIGINT        the arrival (0, 1, ...) of the query's input that caused the change
``_n``      ARRAY<INT>    the change's place among those one arrival caused: each operator
                          appends the index of an output among the outputs of one input
                          message, so ``(seq, _n)`` (arrays compare element by element)
                          is the order in which a single-task Flink job emits them
``_pt``     BIGINT        processing time (ms since the epoch) at that arrival, or NULL
``_wm``     BIGINT        only when ``marked``: the watermark (ms) in force when that
                          arrival came, or NULL (as the stream's own rows have it)
==========  ============  ==============================================================

Rows are in no particular order: ``ordered`` sorts them. A source stream's arrivals are all
``+I`` with ``_n = []``.

Applying a changelog up to arrival ``k`` gives the table then: ``+I``/``+U`` add a row,
``-U``/``-D`` take one away (``snapshot``). The seed's definition of a continuous query is
that this equals the query run as a batch over the input rows with ``seq <= k``.

    seq  _op  user  cnt          snapshot(at=2)
    0    +I   Mary  1            user  cnt
    1    +I   Bob   1            Bob   1
    2    -U   Mary  1            Mary  2
    2    +U   Mary  2
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .. import sparksql

__all__ = ["INSERT", "UPDATE_BEFORE", "UPDATE_AFTER", "DELETE", "KINDS", "ADDS", "INSERT_ONLY", "ALL",
           "Changelog", "Options", "AggCall", "META", "weight", "ordered", "snapshot", "mode_text"]

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = "+I", "-U", "+U", "-D"
KINDS = (INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE)
ADDS = (INSERT, UPDATE_AFTER)            # the kinds that add a row; the others take one away
INSERT_ONLY = frozenset({INSERT})
ALL = frozenset(KINDS)
META = ("_op", "seq", "_n", "_pt")       # the columns every changelog has beside its values
_MODE_NAMES = {INSERT: "I", UPDATE_BEFORE: "UB", UPDATE_AFTER: "UA", DELETE: "D"}


@dataclass(frozen=True)
class Changelog:
    """An operator's output: ``df`` (see the module doc), its value ``columns``, the row
    kinds it may hold (``mode``: Flink's changelog mode, inferred by the planner from the
    operators, not from the rows) and the columns that identify a row of the table it
    describes (``upsert_key``: a group aggregate's keys; None when there are none).
    ``in_order``: its partitions, read one after the other, give its rows in ``(seq, _n)``
    order (a stream's arrivals, a fold in one task): an operator that needs them so reads
    them without a sort. ``ticks``: for the changes of a mini-batch aggregate, the mini-batch
    watermarks they passed, ``(seq, _pt)``: one right after arrival ``seq``, at the start of
    the interval ``_pt`` (``aggregate.ticks``); a mini-batch aggregate over them flushes there.
    ``marked``: ``df`` also has ``_wm`` (the operator carried each arrival's watermark out, so
    ``DynamicTable.changelog()`` needs no join with the arrivals for it). ``expired``: with a
    state TTL, the keys whose state the operator found expired (its keys, ``seq``,
    ``last_write_pt``, ``pt``: Flink forgets them without a trace), where it reports them."""
    df: DataFrame
    columns: tuple
    mode: frozenset = INSERT_ONLY
    upsert_key: tuple | None = None
    in_order: bool = False
    ticks: DataFrame | None = None
    marked: bool = False
    expired: DataFrame | None = None

    def with_df(self, df: DataFrame, **changes) -> "Changelog":
        """The same changelog over another ``df`` (neither ``in_order``, ``marked`` nor
        ``expired`` unless said)."""
        return replace(self, df=df, **{"in_order": False, "marked": False, "expired": None, **changes})

    @property
    def insert_only(self) -> bool:
        return self.mode == INSERT_ONLY


@dataclass(frozen=True)
class AggCall:
    """One aggregate of a group aggregation: ``function`` (``COUNT``, ``SUM``, ``AVG``,
    ``MIN``, ``MAX``) over column ``arg`` (None: ``COUNT(*)``), ``distinct`` for
    ``COUNT(DISTINCT arg)`` etc.; ``name`` is its output column and ``type`` its Spark SQL
    type, Flink's for the function (``kit.aggregate_types.result_type``: ``int`` for the SUM and the AVG of an
    INT) or wider (Spark's own: ``bigint``, ``double``). ``retract=False``: the function ignores retractions (Flink's
    non-retracting MAX / MIN, which its planner picks over an input that only moves the
    function's way: a MAX of counts; ``kit.sql.planner.physical.ignores_retractions``)."""
    function: str
    arg: str | None
    name: str
    type: str
    distinct: bool = False
    retract: bool = True


@dataclass(frozen=True)
class Options:
    """The query configuration the operators follow (Flink's option names in ``kit.sql.options``).

    - ``ttl_ms``: ``table.exec.state.ttl`` (0: state is kept forever), on processing time;
    - ``update_before``: whether consumers need ``-U`` messages (a retract sink, or an
      aggregate downstream); when False an operator sends ``+U`` alone;
    - ``mini_batch``: ``(allow_latency_ms, size)`` when ``table.exec.mini-batch.enabled``, else None;
    - ``agg_phase``: ``table.optimizer.agg-phase-strategy`` (``AUTO``, ``ONE_PHASE``, ``TWO_PHASE``);
    - ``distinct_split``: bucket count when ``table.optimizer.distinct-agg.split.enabled``, else None;
    - ``tasks``: Spark tasks to spread keys over (``kit.spark.replay_tasks`` of the input).
    """
    ttl_ms: int = 0
    update_before: bool = True
    mini_batch: tuple | None = None
    agg_phase: str = "AUTO"
    distinct_split: int | None = None
    tasks: int = 1
    extra: dict = field(default_factory=dict)


def weight(op_column: str = "_op"):
    """+1 for a row kind that adds a row, -1 for one that takes it away."""
    return F.when(F.col(op_column).isin(*ADDS), F.lit(1)).otherwise(F.lit(-1))


def ordered(df: DataFrame) -> DataFrame:
    """``df`` in changelog order: by arrival, then by place among one arrival's changes."""
    return df.orderBy("seq", "_n")


def snapshot(log: Changelog, at: int | None = None, one: bool = False) -> DataFrame:
    """The table after arrival ``at`` (None: after the last): each distinct row as many
    times as it was added and not taken away; columns ``log.columns``, sorted by them (so
    every deployment and partitioning gives the same rows in the same order); ``one``:
    counted and sorted in one partition (no shuffle: a seed-sized changelog)."""
    df = log.df if at is None else log.df.where(F.col("seq") <= at)
    df = df.coalesce(1) if one else df
    cols = [sparksql.name(c) for c in log.columns]
    counted = df.groupBy(*[F.col(c) for c in cols]).agg(F.sum(weight()).alias("_count")).where("_count > 0")
    rows = counted.selectExpr(*cols, "explode(array_repeat(true, CAST(_count AS INT))) AS _one").drop("_one")
    return rows.orderBy(*[F.col(c).asc_nulls_first() for c in cols])


def mode_text(mode: frozenset) -> str:
    """``mode`` as Flink's EXPLAIN CHANGELOG_MODE writes it: ``[I,UB,UA,D]``."""
    return "[" + ",".join(_MODE_NAMES[k] for k in KINDS if k in mode) + "]"


def from_stream(s, columns: list | None = None, names: list | None = None, numbered: bool = True) -> Changelog:
    """A stream's arrivals as an insert-only changelog: ``+I`` per row (``columns``: the
    source's by default; named ``names``, e.g. to keep clear of the changelog's own
    ``_op``/``_pt``), ``seq``, ``_n = []`` and ``_pt`` (the arrival's processing time).
    ``numbered=False``: the same columns over the source with no arrival scan, ``seq`` and
    ``_pt`` NULL (``Stream.columns_only``), for a pass that numbers the arrivals itself."""
    columns = list(s.source.columns if columns is None else columns)
    names = list(columns if names is None else names)
    pt = "unix_millis(proctime)" if s.proctime is not None and numbered else "CAST(NULL AS BIGINT)"
    df = s.df if numbered else s.columns_only(columns)
    df = df.selectExpr("'+I' AS _op", *[f"{sparksql.name(c)} AS {sparksql.name(n)}" for c, n in zip(columns, names)],
                       "seq" if numbered else "CAST(NULL AS BIGINT) AS seq", "CAST(array() AS ARRAY<INT>) AS _n",
                       f"{pt} AS _pt")
    return Changelog(df, tuple(names), in_order=True)   # the stream's chunks in turn, each in arrival order
