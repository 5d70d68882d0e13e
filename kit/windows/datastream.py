"""The DataStream window API (PyFlink's names) on a ``kit.Stream``, run on Spark.

    clicks = kit.stream(df, time="cTime", watermark=Duration.of_seconds(5))
    result = (clicks.key_by("user")
                    .window(TumblingEventTimeWindows.of(Time.hours(1)))
                    .allowed_lateness(Time.minutes(1))
                    .side_output_late_data(OutputTag("late"))
                    .aggregate(CountAggregate(), output_type="cnt bigint"))
    result.df                               # one row per emitted value (below)
    result.get_side_output(OutputTag("late"))

Each key's elements are replayed through the reference ``WindowOperator``
(``operator.py``) in arrival order: the JVM spreads the keys over tasks and sorts each
task's rows by key and arrival, and one ``mapInArrow`` per task runs the replay driver
(``kit.replay.keyed``), which steps each key's ``KeyedWindow`` element by element, the
values as plain Python values (``window_all``: one task) -- or, when every part of the
window is built in, its Java twin replays them (``compiled.py``), with the same rows.
Timers of two clocks (``operator.timer_clocks``: e.g. ``ProcessingTimeTrigger`` on
event-time windows, whose state the watermark cleans up) fire in an order that every key's
arrivals decide, so such a window replays the whole stream in one task instead, through
one ``WholeStreamWindow`` (a small keyed stream too: one task either way).
``result.df`` columns:

=================  ===========================================================
``key``            the ``key_by`` value (a struct for several columns); absent
                   for ``window_all``
``window_start``   window bounds, typed like the time column (NULL for
``window_end``     GlobalWindows; near the ends of the time's range: below)
<result columns>   the function's output (``reduce``: the element's columns)
``firing``         ``early`` (before the window's end), ``on-time`` (the first
                   firing at or after it), ``late`` (later ones)
``pane``           0, 1, ... per window (a merged session starts again at 0)
``cause``          ``element``, ``event-time timer``, ``processing-time timer``
``timer``          the timer's time (NULL for an element)
``watermark``      the watermark at the firing (NULL: none yet, or the end of
                   input's ``Long.MAX_VALUE``)
``watermark_ms``   the same as Flink's ``currentWatermark()`` gives it, BIGINT ms:
                   ``Long.MIN_VALUE`` (-9223372036854775808) before any
                   watermark, ``Long.MAX_VALUE`` (9223372036854775807) at the end
                   of input
``proctime``       the processing time at the firing (NULL without a clock, and
                   at the end of input, where the clock stops)
``fired_after``    the arrival (``seq``) after which it fired; NULL: end of input
``contents``       how many elements the firing saw
=================  ===========================================================

Times near the ends of their range. A BIGINT time takes Flink's whole range, in Java's
``long`` arithmetic: near ``Long.MAX_VALUE`` a window's end overflows (``window_end <
window_start``: the window is over as soon as the watermark rises, and a later element of
it gets the fate ``no window``, as Flink drops it without a trace), near ``Long.MIN_VALUE``
its start does, and the watermark stops at ``Long.MIN_VALUE``. A TIMESTAMP time takes what
a TIMESTAMP holds and PySpark's ``collect()`` gives back, ``0001-01-02 00:00:00 ..
9999-12-31 23:59:59.999`` (``TIMESTAMPS``; ``datetime.fromtimestamp`` fails on 0001-01-01): a
window bound, timer or watermark beyond it (the hour from 9999-12-31 23:00 ends in year 10000)
fails the query, naming the firing and the range, as an input time on 0001-01-01 does.

``result.late`` (= the late side output) has the dropped elements with their ``seq``
and the ``watermark`` that made them late; ``result.elements()`` every element with its
``fate`` (see ``operator.FATES``): nothing is lost silently.

Flink reserves no column names: where an output column has the name of one of the columns
above, the kit's is renamed ``kit_<name>`` (``kit_kit_<name>`` if that is taken too), and so
are ``seq`` and ``fate`` of ``late`` / ``elements()`` against the input's columns;
``result.kit_columns`` maps each of the kit's names to the one in this result. Input
columns named like the stream's own (``seq``, ``watermark``, ``late``, ``proctime``) are
read as the input's; the stream's own are its ``kit_columns`` (``kit.stream``).

Rows are in key order, each key's in the order Flink emits them (``_order``); Flink
interleaves the keys, which ``fired_after`` and ``cause`` place on the stream.

Timers. Each clock's timers sit in one heap per operator, ordered by time alone, as in
Flink's ``HeapPriorityQueueSet`` (``operator.TimerHeap``): timers at the same time fire in the
order the heap leaves them, and every key of the operator moves them. A stream replayed as
one operator (``window_all``, timers of two clocks, a small stream in Python) fires them in
Flink's order at parallelism 1; keys replayed apart (in parallel, or by the JVM twin) each
keep a heap of their own, and where one key fires two windows at one time in one batch
(continuous and user triggers), ``timer_order`` puts them in the one heap's order
afterwards. Inside a function or trigger run by
an event-time timer, ``context.current_watermark()`` is the watermark that crossed the timer,
as in Flink: a key replayed alone learns it from a first replay that finds the timers (a
process function or a user trigger only: they are the ones that can read it).
"""

from __future__ import annotations

import copy
import datetime as _dt
import warnings
from decimal import Decimal
from functools import cached_property

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from .. import sparksql
from ..arrow import column
from ..errors import KitError, fail_sql
from ..replay.keyed import replay as replay_keys, run_task
from ..spark import replay_tasks
from ..stream import FIRST_DAY_MS, Arrivals, Stream, kit_name
from ..time import millis
from .assigners import MAX_TIME, MIN_TIME, GlobalWindows, WindowAssigner
from .evictors import CountEvictor, Evictor
from . import compiled, fast
from .functions import Contents, SqlAggregate
from .keyed import ELEMENT, WholeStreamWindow, keyed_windows
from .operator import WindowSpec, timer_clocks
from .placement import first_at_least_columns, fires_on_timers, place_timers
from .timer_order import in_flink_order
from .triggers import CountTrigger, PurgingTrigger, Trigger

__all__ = ["DataStream", "OutputTag", "KeyedStream", "WindowedStream", "WindowResult", "WindowWarning", "declared_output",
           "row_values"]

_METADATA = ("firing", "pane", "cause", "timer", "watermark", "proctime", "fired_after", "contents")
# result.df's own columns (``watermark_ms`` is made from ``watermark`` and ``fired_after``)
_FIRING_COLUMNS = ("key", "window_start", "window_end", *_METADATA, "watermark_ms")


class WindowWarning(UserWarning):
    """It runs, but not as a parallel streaming job would want (e.g. ``window_all``)."""


class OutputTag:
    """``OutputTag("late-data")``: names a side output."""

    def __init__(self, tag_id: str, type_info=None):
        if not isinstance(tag_id, str) or not tag_id:
            raise KitError(f"OutputTag needs a non-empty name; got {tag_id!r}")
        self.tag_id, self.type_info = tag_id, type_info

    def __eq__(self, other):
        return isinstance(other, OutputTag) and other.tag_id == self.tag_id

    def __hash__(self):
        return hash(self.tag_id)

    def __repr__(self):
        return f"OutputTag({self.tag_id!r})"


class DataStream(Stream):
    """A ``kit.Stream`` with PyFlink's window API (``kit.stream(df, ...)`` makes one):
    ``key_by(...).window(...)``, ``window_all(...)``, ``count_window_all(n)``."""

    def key_by(self, *columns: str) -> "KeyedStream":
        """``KeyedStream``: windows per value of ``columns`` (``.window(...)``, ``.count_window(n)``)."""
        return KeyedStream(self, tuple(columns))

    def window_all(self, assigner: WindowAssigner) -> "WindowedStream":
        """Windows over the whole stream (Flink runs them with parallelism 1)."""
        _timestamped(self)
        return WindowedStream(self, (), assigner)

    def count_window_all(self, size: int, slide: int = 0) -> "WindowedStream":
        return _count_window(self.window_all(GlobalWindows.create()), size, slide)


class KeyedStream:
    """``stream.key_by(*columns)``: elements with the same values go to the same windows."""

    def __init__(self, stream, keys: tuple):
        if not keys:
            raise KitError("key_by needs at least one column name")
        for k in keys:
            if not isinstance(k, str) or k not in stream.source.columns:
                raise KitError(f"key_by: {k!r} is not a column; columns are {stream.source.columns}")
        self.stream, self.keys = stream, keys

    def window(self, assigner: WindowAssigner) -> "WindowedStream":
        _timestamped(self.stream)
        return WindowedStream(self.stream, self.keys, assigner)

    def count_window(self, size: int, slide: int = 0) -> "WindowedStream":
        """``GlobalWindows`` firing every ``size`` elements (purging), or, with ``slide``, the
        last ``size`` elements every ``slide`` elements (``CountEvictor`` + ``CountTrigger``)."""
        return _count_window(self.window(GlobalWindows.create()), size, slide)


def _timestamped(stream) -> None:
    """A KitError for a stream without event time, as Flink's WindowOperator fails on an
    element with no timestamp (the kit's windows read it even for processing-time and count
    windows)."""
    if stream.time is None:
        raise KitError("Record has Long.MIN_VALUE timestamp (= no timestamp marker). Is the time characteristic "
                       "set to 'ProcessingTime', or did you forget to call "
                       "'DataStream.assignTimestampsAndWatermarks(...)'? The stream has no event time: "
                       "kit.stream(df, time=<column>, ...) gives it one")


def _count_window(windowed, size, slide=0):
    if not isinstance(size, int) or size <= 0:
        raise KitError(f"count_window(size): size must be an integer > 0; got {size!r}")
    if not isinstance(slide, int) or slide < 0:
        raise KitError(f"count_window(size, slide): slide must be an integer >= 0; got {slide!r}")
    if slide == 0:
        return windowed.trigger(PurgingTrigger.of(CountTrigger.of(size)))
    return windowed.evictor(CountEvictor.of(size)).trigger(CountTrigger.of(slide))


class WindowedStream:
    """``key_by(...).window(assigner)`` or ``window_all(assigner)``, then optional
    ``trigger``, ``evictor``, ``allowed_lateness``, ``side_output_late_data``, then a function
    (``reduce``, ``aggregate``, ``process``, ``apply``, ``fold``) giving a ``WindowResult``.

    Unlike PyFlink, each call returns a new WindowedStream; chaining works the same. The
    original is unchanged, so re-running a notebook cell does not stack settings and one
    windowed stream can be configured two ways::

        hourly = keyed.window(TumblingEventTimeWindows.of(Time.hours(1)))
        early = hourly.trigger(CountTrigger.of(100))    # hourly keeps its EventTimeTrigger
    """

    def __init__(self, stream, keys: tuple, assigner: WindowAssigner):
        if not isinstance(assigner, WindowAssigner):
            raise KitError(f"window(...) needs a window assigner such as TumblingEventTimeWindows.of(...); "
                           f"got {assigner!r}")
        self.stream, self.keys, self.assigner = stream, keys, assigner
        self._trigger, self._evictor, self._lateness, self._late_tag = None, None, 0, None

    def trigger(self, trigger: Trigger) -> "WindowedStream":
        if not isinstance(trigger, Trigger):
            raise KitError(f"trigger(...) needs a Trigger (e.g. CountTrigger.of(3)); got {trigger!r}")
        if self.assigner.merging and not trigger.can_merge():
            raise KitError(f"A merging window assigner cannot be used with a trigger that does not support "
                           f"merging: {trigger!r} (implement can_merge() and on_merge())")
        return self._with(_trigger=trigger)

    def evictor(self, evictor: Evictor) -> "WindowedStream":
        if not isinstance(evictor, Evictor):
            raise KitError(f"evictor(...) needs an Evictor (e.g. CountEvictor.of(2)); got {evictor!r}")
        return self._with(_evictor=evictor)

    def allowed_lateness(self, lateness) -> "WindowedStream":
        """How long after a window's end its late elements still fire it: a Time, Duration or
        timedelta, or an int of milliseconds, as PyFlink's ``allowed_lateness(time_ms: int)``
        takes it (the one time here PyFlink gives as a bare number)."""
        ms = millis(lateness, "allowed_lateness", "lateness", bare_ms=True,
                    kinds="a Time, Duration, timedelta or an int of milliseconds")
        if ms < 0:
            raise KitError(f"allowed_lateness must be >= 0 ms; got {ms}")
        return self._with(_lateness=ms)

    def side_output_late_data(self, output_tag: OutputTag) -> "WindowedStream":
        if not isinstance(output_tag, OutputTag):
            raise KitError(f"side_output_late_data needs an OutputTag; got {output_tag!r}")
        return self._with(_late_tag=output_tag)

    def _with(self, **setting) -> "WindowedStream":
        changed = copy.copy(self)
        vars(changed).update(setting)
        return changed

    # ---------------------------------------------------------------- functions

    def reduce(self, reduce_function, window_function=None, output_type=None) -> "WindowResult":
        return self._result(Contents("reduce", reduce_function), window_function, output_type)

    def aggregate(self, aggregate_function, window_function=None, accumulator_type=None,
                  output_type=None) -> "WindowResult":
        return self._result(Contents("aggregate", aggregate_function), window_function, output_type)

    def fold(self, initial_value, fold_function, window_function=None, output_type=None) -> "WindowResult":
        if self.assigner.merging:
            raise KitError("Fold cannot be used with a merging WindowAssigner.")
        return self._result(Contents("fold", fold_function, initial_value), window_function, output_type)

    def process(self, process_function, output_type=None) -> "WindowResult":
        return self._result(Contents("list"), process_function, output_type, kind="process")

    def apply(self, window_function, output_type=None) -> "WindowResult":
        return self._result(Contents("list"), window_function, output_type, kind="apply")

    def _result(self, contents, function, output_type, kind=None):
        if function is not None:
            if kind is None:
                kind = "process" if hasattr(function, "process") else "apply"
            if not self.keys:
                kind += "_all"
        spec = WindowSpec(self.assigner, self._trigger or self.assigner.default_trigger(), contents,
                          None if function is None else (kind, function), self._evictor, self._lateness)
        make = getattr(self.stream, "window_result", WindowResult)   # a live stream makes its own
        return make(self, spec, output_type)


# -------------------------------------------------------------------- running on Spark


def declared_output(spec: WindowSpec, schema: T.StructType, output_type) -> T.StructType | None:
    """The columns of a window's outputs, where known before it runs: ``output_type`` (a DDL
    string or StructType), a reduce's (the input's ``schema``), a built-in aggregate's."""
    output = _schema(output_type)
    if output is None and spec.function is None and spec.contents.kind == "reduce":
        output = schema
    elif output is None and spec.function is None and isinstance(getattr(spec.contents, "_agg", None), SqlAggregate):
        output = spec.contents._agg.output_type(schema)
    return output


def _schema(output_type):
    if output_type is None or isinstance(output_type, T.StructType):
        return output_type
    if isinstance(output_type, str):
        try:
            return T._parse_datatype_string(output_type)
        except Exception:
            from ..spark import spark
            return spark().createDataFrame([], output_type).schema
    raise KitError(f"output_type must be a Spark DDL string such as 'user string, cnt bigint' or a "
                   f"StructType; got {output_type!r}")


_PY_TYPES = ((bool, T.BooleanType()), (int, T.LongType()), (float, T.DoubleType()), (str, T.StringType()),
             (_dt.datetime, T.TimestampType()), (_dt.date, T.DateType()), (Decimal, T.DecimalType(38, 18)),
             (bytes, T.BinaryType()))


def _infer(value) -> T.StructType:
    """Columns for an output value: a Row or dict by name, a tuple as f0, f1, ..., else ``result``."""
    if isinstance(value, Row) and hasattr(value, "__fields__"):
        items = list(value.asDict().items())
    elif isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, (tuple, list)):
        items = [(f"f{i}", v) for i, v in enumerate(value)]
    else:
        items = [("result", value)]
    fields = []
    for name, v in items:
        dtype = next((t for py, t in _PY_TYPES if isinstance(v, py)), None)
        if dtype is None:
            raise KitError(f"cannot tell the Spark type of output column {name!r} from {v!r}; pass "
                           "output_type='name type, ...'")
        fields.append(T.StructField(str(name), dtype, True))
    return T.StructType(fields)


def row_values(value, schema: T.StructType) -> list:
    """An output value (a Row, dict, tuple or single value) as the list of ``schema``'s columns."""
    names = schema.fieldNames()
    if isinstance(value, Row) and hasattr(value, "__fields__"):
        d = value.asDict()
        return [d.get(n) for n in names]
    if isinstance(value, dict):
        return [value.get(n) for n in names]
    if isinstance(value, (tuple, list)):
        if len(value) != len(names):
            raise KitError(f"a window function returned {value!r} ({len(value)} fields) but the output "
                           f"has {len(names)} columns: {names}")
        return list(value)
    if len(names) != 1:
        raise KitError(f"a window function returned the single value {value!r} but the output has "
                       f"{len(names)} columns: {names}")
    return [value]


class WindowResult:
    """What a windowed transformation produced: ``df`` (the firings, see the module doc;
    the result also answers DataFrame methods like ``show`` and ``toPandas``), ``late``
    (the late side output) and ``elements()`` (every element and its fate). One replay of
    each key gives all three, kept once computed (the firings by the fast path, when it
    applies, need no replay) while the result or one of these frames lives: ``x.df`` read
    after ``x`` is dropped reads what was kept. ``proctime_end``: the processing time (ms)
    the clock runs to at the end of input, when it went on after the last arrival (a live
    run's record: its last micro-batch's time; the whole stream then runs in one operator,
    which places the firings after the last arrival itself); None: the last arrival's."""

    def __init__(self, windowed: WindowedStream, spec: WindowSpec, output_type, proctime_end: int | None = None):
        self.windowed, self.spec, self.proctime_end = windowed, spec, proctime_end
        stream = windowed.stream
        self.stream, self.keys = stream, windowed.keys
        self.values = [c for c in stream.source.columns]
        self.inner = {c: stream.inner(c) for c in self.values}   # each's name in the stream's frames
        self.time_type = stream.source.schema[stream.time].dataType
        both = len(timer_clocks(spec)) > 1
        self._whole_stream = (both or proctime_end is not None) and bool(self.keys)
        if not self.keys:
            warnings.warn("window_all runs every element in one group on one core, as Flink runs it "
                          "with parallelism 1; key_by(...) first to run in parallel", WindowWarning, stacklevel=3)
        elif both:
            warnings.warn(f"{spec.trigger!r} on {spec.assigner!r} has timers of both clocks, whose order every "
                          "key's arrivals decide: the whole stream runs in one group on one core", WindowWarning,
                          stacklevel=3)
        output = declared_output(spec, stream.source.schema, output_type)
        if output is None:
            output = self._infer_output()
        self.output = output
        # the kit's own columns, renamed where an output column (df) or an input column (late,
        # elements()) has their name: kit_<name> (kit_kit_<name> ...), as Flink reserves none
        self.kit_columns = {c: kit_name(c, set(output.fieldNames())) for c in _FIRING_COLUMNS}
        self.kit_columns.update({c: kit_name(c, set(self.values)) for c in ("seq", "fate")})
        # the fast path names its working columns after the keys, the outputs and the firing's
        # own columns (``contents``, ``pane``...), with ``_`` first for its own (``_at``,
        # ``_max``...; none starts ``_kit_``, as kit.sql's outputs do), and reads the stream's own
        # columns by name: not on a clash of these (a key named ``key`` or ``window_start`` is none)
        self._clashes = bool(set(_FIRING_COLUMNS) & set(output.fieldNames()) or set(_METADATA) & set(self.keys)) \
            or any(stream.inner(c) != c or c.startswith("_") and not c.startswith("_kit_")
                   for c in [*self.values, *output.fieldNames()])
        self._df, self._tagged = None, {}

    # ------------------------------------------------------------ public

    @property
    def df(self) -> DataFrame:
        if self._df is None:
            self._df = fast.holding(self._firings(), self)
        return self._df

    @property
    def late(self) -> DataFrame:
        """The elements dropped as late: their columns, ``seq`` and the ``watermark`` then."""
        late = self._in_arrival_order("late")
        if not isinstance(self.time_type, T.IntegralType):   # the last column: the watermark
            late = late.selectExpr(*map(sparksql.name, late.columns[:-1]),
                                   _timestamp("_watermark", "concat('the late element seq=', _seq)") + " AS _watermark")
        return fast.holding(late.toDF(*self.values, self.kit_columns["seq"], kit_name("watermark", set(self.values))),
                            self)

    def get_side_output(self, output_tag: OutputTag) -> DataFrame:
        if output_tag != self.windowed._late_tag:
            raise KitError(f"no side output {output_tag!r}: this window declared "
                           f"{self.windowed._late_tag!r} with side_output_late_data(...)")
        return self.late

    def elements(self) -> DataFrame:
        """Every input element with its ``seq`` and ``fate``: fired, late, evicted, expired,
        pending or no window."""
        return fast.holding(self._in_arrival_order("element").toDF(*self.values, self.kit_columns["seq"],
                                                                   self.kit_columns["fate"]), self)

    def _in_arrival_order(self, kind: str) -> DataFrame:
        return self._one(self._replayed(kind)).sortWithinPartitions("_seq")

    def _one(self, replayed: DataFrame) -> DataFrame:
        """``replayed`` (rows of the replay) in one partition: as it is when the replay ran as
        one task (no shuffle: later sorts, distincts and windows over it need none either)."""
        return replayed.coalesce(1) if self._tasks == 1 else replayed.repartition(1)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.df, name)

    def __repr__(self):
        return f"WindowResult({self.spec.assigner!r}, {self.spec.trigger!r})"

    # ------------------------------------------------------------ the replay

    def _time_columns(self) -> list:
        """``_ts``, ``_wm``, ``_pt``: event time, watermark met and processing time, in ms."""
        s = self.stream
        return [s.millis(s.time).alias("_ts"), s.millis("watermark").alias("_wm"),
                (F.unix_millis("proctime") if s.proctime is not None else F.lit(None).cast("long")).alias("_pt")]

    def _inner(self, columns) -> list:
        """Input columns by their names in the stream's frames (``Stream.inner``)."""
        return [self.inner[c] for c in columns]

    def _key_type(self):
        fields = [self.stream.source.schema[k] for k in self.keys]
        return fields[0].dataType if len(fields) == 1 else T.StructType(fields)

    def _columns(self) -> dict:
        """Each kind of row the replay emits (``firing``, ``late``, ``element``) and its columns."""
        src, long = self.stream.source.schema, T.LongType()
        firing = ([T.StructField("key", self._key_type())] if self.keys else []) + [   # bounds in ms
            T.StructField("window_start", long), T.StructField("window_end", long)]
        firing += [T.StructField(_out(i), f.dataType, f.nullable) for i, f in enumerate(self.output.fields)]
        firing += [T.StructField(c, T.StringType() if c in ("firing", "cause") else long)
                                        for c in _METADATA + ("_order", "_floor")]
        # by their inner names: the input's may be "seq", or "_seq"
        element = [T.StructField(self.inner[c], src[c].dataType, src[c].nullable) for c in self.values] + [
            T.StructField("_seq", long)]
        return {"firing": firing, "late": element + [T.StructField("_watermark", long)],
                "element": element + [T.StructField("_fate", T.StringType())]}

    def _replayed(self, kind: str, keep: bool = True) -> DataFrame:
        """The rows of one ``kind`` with its own columns. In Python every key is replayed
        once for all three kinds, and the tagged rows are kept once computed: the timer
        placement reads the firings twice, and ``df``, ``late`` and ``elements()`` read the
        same replay. The JVM replays for one kind at a time (it costs less than keeping every
        element's row), and only the firings are kept, unless ``keep`` is False (they are
        read once: no timer to place). What is kept is released with the result and its
        frames (``fast.kept_for``, ``fast.holding``)."""
        columns = self._columns()
        if kind not in self._tagged:
            df, covered = self._run(columns, kind=kind)
            if kind == "firing" and keep or len(covered) > 1:
                df = fast.kept_for(self, df)
            self._tagged.update(dict.fromkeys(covered, df))
        return sparksql.select(self._tagged[kind].where(f"_kind = '{kind}'"),
            *[f"{_column(kind, i)} AS {sparksql.name(f.name)}" for i, f in enumerate(columns[kind])])

    def _run(self, columns: dict, engine: str = "auto", kind: str | None = None) -> tuple:
        """Replay each key: its firings, late elements and elements' fates as rows tagged by
        ``_kind``, each kind in its own columns (``_column(kind, i)``, NULL in other rows).
        The JVM spreads the keys over tasks and sorts each task's rows by key and arrival;
        one ``mapInArrow`` per task replays its keys one after the other -- or, for a window
        of built-in parts (``engine="auto"``), the JVM operator does (``compiled.py``), giving
        only the rows of ``kind`` when one is named. Returns the rows and the kinds they hold."""
        spec, keys, values, output = self.spec, list(self.keys), self.values, self.output
        inner = self.inner.__getitem__
        fields = [T.StructField("_kind", T.StringType())] + [
            T.StructField(_column(kind, i), f.dataType) for kind, kind_fields in columns.items()
            for i, f in enumerate(kind_fields)]
        arrow = to_arrow_schema(T.StructType(fields), timezone="UTC")

        whole_stream = self._one_operator
        end = None if whole_stream else self._end
        crossings = None if whole_stream or engine == "python-first" else self._crossings
        crossing = None if crossings is None else (lambda t: crossings.get(t, MAX_TIME))

        inner_keys, row = [inner(k) for k in keys], [inner(c) for c in values] + ELEMENT

        def tagged(table, replayed):
            """``(key, elements, KeyResult)`` of each key as rows tagged by kind."""
            rows = {kind: [] for kind in columns}
            for key, elements, result in replayed:
                head = [key if len(keys) == 1 else dict(zip(keys, key))] if keys else []
                for f in result.firings:
                    placed = whole_stream and f.watermark == MAX_TIME   # the end of input: no clock
                    meta = [f.kind, f.pane, f.cause, f.timer,
                            None if f.watermark in (MIN_TIME, MAX_TIME) else f.watermark,
                            None if placed else f.proctime, f.fired_after, len(f.seqs)]
                    for value in f.outputs:
                        rows["firing"].append(head + [f.window.start, f.window.end] + row_values(value, output)
                                              + meta + [len(rows["firing"]), f.floor])
                late = dict(result.late)
                for e in elements:
                    values_of = list(e.value)
                    if e.seq in late:
                        rows["late"].append(values_of + [e.seq, late[e.seq]])
                    rows["element"].append(values_of + [e.seq, result.fates[e.seq]])
            for kind, kind_rows in rows.items():
                if kind_rows:
                    yield _batch(kind, kind_rows, arrow, fields)

        schema, kinds = T.StructType(fields), list(columns) if kind is None else [kind]
        if whole_stream:   # in arrival order, with the watermark each arrival emits
            s, scan = self.stream, self._arrivals
            rows = (scan.rows(self._inner(values), own=True) if scan is not None else
                    s.unordered().select(*self._inner(values), "seq", *self._time_columns(),
                                         s.own_watermark().alias("_own")))
            whole = WholeStreamWindow(spec, Row(*values), [values.index(k) for k in keys], self.proctime_end)
            return (replay_keys(self._one(rows).sortWithinPartitions("seq"), [], lambda key: whole, schema,
                                row + ["_own"], tagged), list(columns))
        compiled_run = compiled.run(self, self._spread, fields, kinds) if engine == "auto" else None
        if compiled_run is not None:
            return compiled_run, kinds
        per_key = keyed_windows(values, spec, lambda *result: [result], end=end, crossing=crossing)
        return replay_keys(self._spread(values), inner_keys, per_key, schema, row, tagged), list(columns)

    @cached_property
    def _crossings(self) -> dict | None:
        """For a key replayed alone whose function or trigger may read the watermark in an
        event-time timer's firing (a process function, a user trigger): ``{t: watermark}``,
        the watermark that crossed each timer threshold ``t`` (``max(timer, floor)``), found
        as the placement finds it (``placement.place_timers``) after a first replay of the keys
        that only tells the thresholds. None when nothing reads it (no second replay)."""
        spec = self.spec
        reads = (spec.function is not None and spec.function[0].startswith("process")
                 or type(spec.trigger).__module__ != Trigger.__module__)
        if not reads or not fires_on_timers(spec.trigger) or "event" not in timer_clocks(spec):
            return None
        columns = self._columns()
        names = [f.name for f in columns["firing"]]
        first, _ = self._run(columns, engine="python-first", kind="firing")
        cause, timer, floor = (_column("firing", names.index(c)) for c in ("cause", "timer", "_floor"))
        wanted = first.where(f"_kind = 'firing' AND {cause} = 'event-time timer'").selectExpr(
            f"greatest({timer}, coalesce({floor}, {timer})) AS t").distinct().toArrow().column("t")
        if not len(wanted):
            return {}
        s = self.stream
        arrivals = self._arrivals if self._arrivals is not None else s.unordered().select(
            "seq", s.own_watermark().alias("own"), s.millis("watermark").alias("before"),
            F.lit(None).cast("long").alias("pt"))
        grid, hits = first_at_least_columns(arrivals, {"own": wanted.to_numpy()})["own"]
        crossed = pc.max_element_wise(hits.column("before"), hits.column("own"), skip_nulls=True)   # NULL: none
        return {t: w for t, w in zip(grid.tolist(), crossed.to_pylist()) if w is not None}

    @cached_property
    def _end(self) -> tuple | None:
        """``(seq, proctime)`` of the stream's last arrival (ms): a key replayed alone whose
        last element came before it runs its clock to that time at the end of input (the
        arrivals after its own move it; after the last arrival nothing does); None when the
        window has no processing-time timers, or the stream no clock."""
        s = self.stream
        if "processing" not in timer_clocks(self.spec) or s.proctime is None:
            return None
        scan = self._arrivals
        if scan is not None:
            return scan.count - 1, scan.last_proctime
        count, last = s.unordered().agg(F.count(F.lit(1)), F.max(F.unix_millis("proctime"))).first()
        return count - 1, last

    @cached_property
    def _arrivals(self) -> Arrivals | None:
        """The stream's arrival scan in the JVM, read by the replay and the timer placement
        (None: Spark SQL's scan)."""
        return self.stream.arrivals

    def _spread(self, values: list, sort: bool = True) -> DataFrame:
        """``values``, ``seq``, ``_ts``, ``_wm``, ``_pt`` of every arrival, spread over tasks by
        key (``kit.spark.replay_tasks``: one task for a small stream), each task's held in
        memory by the replay (``sort``: sorted by key and arrival)."""
        scan, keys, values = self._arrivals, self._inner(self.keys), self._inner(values)
        df = (scan.rows(values) if scan is not None
              else self.stream.unordered().select(*values, "seq", *self._time_columns()))
        df = df.repartition(self._tasks, *keys) if self._tasks > 1 else df.coalesce(1)   # small: no shuffle
        return df.sortWithinPartitions(*keys, "seq") if sort else df

    @cached_property
    def _one_operator(self) -> bool:
        """Whether the whole stream runs in one operator, in arrival order, its timer
        firings placed by the replay itself: timers of both clocks (their order depends on
        every key's arrivals), or a small keyed stream (one task either way) that the Python
        replay takes, which then needs no jobs to place its timers."""
        return self._whole_stream or (bool(self.keys) and self._tasks == 1 and not compiled.applies(self))

    @cached_property
    def _tasks(self) -> int:
        """How many tasks the replay runs as (``kit.spark.replay_tasks``; one for the whole
        stream in one operator)."""
        if self._whole_stream or not self.keys:
            return 1
        scan = self._arrivals
        return replay_tasks(self.stream.source.sparkSession, scan.count if scan is not None else None)

    def _firings(self, engine: str = "auto") -> DataFrame:
        """The firings, by the fast path when it applies (``engine="auto"``), else by
        replaying each key (``"reference"``)."""
        fast_path = engine == "fast" or (engine == "auto" and fast.eligible(self.spec) and not self._clashes)
        df = fast.firings(self) if fast_path else None   # None: a time beyond the fast path's range
        fast_path = df is not None
        if not fast_path and fires_on_timers(self.spec.trigger) and not self._one_operator:   # else: placed
            df = in_flink_order(self, place_timers(self._replayed("firing"), self.stream, self._arrivals))
        elif not fast_path:
            df = self._replayed("firing", keep=False)
        # per key, in the order the operator emitted, in one partition: a fast path's small last
        # stage, and a replay run as one task, with no shuffle; else the replay stays parallel
        in_input_order = fast_path and fast.in_input_order(self)
        one = df.coalesce(1) if in_input_order else df.repartition(1) if fast_path else self._one(df)
        # read in input order, on-time windows fire as the one watermark passes their ends: a
        # key's firings in start order are in _order already, and a long sorts faster than a struct
        df = one.sortWithinPartitions(*(["key"] if self.keys else []), "window_start" if in_input_order else "_order")
        times = ["proctime"]   # ms; for a TIMESTAMP time the others too
        if not isinstance(self.time_type, T.IntegralType):
            times += ["timer", "watermark", "window_start", "window_end"]
        firing = ("concat('the firing of ', " + ("'key ', CAST(key AS STRING), ', ', " if self.keys else "")
                  + "'window [', window_start, ', ', window_end, ') ms')")
        outputs = {(f.name if fast_path else _out(i)): f.name for i, f in enumerate(self.output.fields)}
        exprs, names = [], []
        for c in df.columns:
            if c in ("_order", "_floor"):
                continue
            exprs.append(_timestamp(c, firing) if c in times else sparksql.name(c))
            names.append(outputs[c] if c in outputs else self.kit_columns[c])
            if c == "watermark":   # Flink's value: Long.MIN_VALUE before any, Long.MAX_VALUE at the end
                exprs.append(f"CASE WHEN watermark IS NOT NULL THEN watermark WHEN fired_after IS NULL "
                             f"THEN {MAX_TIME} ELSE {MIN_TIME} END")
                names.append(self.kit_columns["watermark_ms"])
        return sparksql.select(df, *[f"{e} AS {sparksql.name(n)}" for e, n in zip(exprs, names)])

    def _infer_output(self) -> T.StructType:
        """Run the operator on the driver over the first rows to see what the function returns."""
        sample = (self.stream.unordered().select("*", *self._time_columns()).orderBy("seq").limit(1000)
                  .orderBy(*self._inner(self.keys), "seq").toArrow())
        keys, values, inner = list(self.keys), self.values, self.inner.__getitem__
        operator = keyed_windows(values, self.spec, lambda key, elements, result: result.firings)
        for firings in run_task(sample, [inner(k) for k in keys], operator, [inner(c) for c in values] + ELEMENT):
            for f in firings:
                if f.outputs:
                    return _infer(f.outputs[0])
        raise KitError("cannot tell the output columns: the window function produced nothing on the "
                       "first 1000 elements; pass output_type='name type, ...'")


TIMESTAMPS = (FIRST_DAY_MS, 253_402_300_799_999)   # ms: 0001-01-02 00:00:00 .. 9999-12-31 23:59:59.999


def _timestamp(column: str, row: str) -> str:
    """``column`` (epoch ms) as a TIMESTAMP (Spark SQL text, not named); a time beyond
    ``TIMESTAMPS`` fails the query, naming the time and ``row`` (a string expression's text)."""
    ms = sparksql.name(column)
    beyond = fail_sql(f"{sparksql.string(column + ' ')}, CAST({ms} AS STRING), ' ms of ', {row}, "
                      + sparksql.string(" is beyond the TIMESTAMP range 0001-01-02 00:00:00 .. 9999-12-31 "
                                        "23:59:59.999 (Spark's, and Python's datetime): give the stream a BIGINT "
                                        "time column (epoch milliseconds), on which the kit follows Flink over the "
                                        "whole BIGINT range"))
    low, high = TIMESTAMPS
    return (f"CASE WHEN {ms} IS NULL OR {ms} BETWEEN {low} AND {high} THEN timestamp_millis({ms}) "
            f"ELSE CAST({beyond} AS TIMESTAMP) END")


def _out(i: int) -> str:
    """The replay's name for output column ``i`` (renamed in ``df``: it may have a kit column's name)."""
    return f"_out{i}"


def _column(kind: str, i: int) -> str:
    """The replay's name for column ``i`` of a kind of row (user column names may clash)."""
    return f"_{kind}{i}"


def _batch(kind: str, rows: list, arrow: pa.Schema, fields: list) -> pa.RecordBatch:
    """Rows of one kind as a batch of the tagged schema: its own columns, NULL in the others."""
    n = len(rows)
    mine = {_column(kind, i): values for i, values in enumerate(zip(*rows))}
    return pa.RecordBatch.from_arrays(
        [pa.array([kind] * n, pa.string()) if f.name == "_kind"
         else column(list(mine[f.name]), f.dataType, arrow.field(f.name).type, nan_is_null=False) if f.name in mine
         else pa.nulls(n, arrow.field(f.name).type) for f in fields], schema=arrow)
