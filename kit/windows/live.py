"""DataStream windows on a live stream: the same ``WindowOperator`` on the live driver.

    live = kit.live(spark.readStream.schema("user string, cTime timestamp").json("clicks/"),
                    time="cTime", watermark=Duration.of_seconds(5))
    run = (live.key_by("user").window(TumblingEventTimeWindows.of(Time.hours(1)))
               .allowed_lateness(Time.minutes(10)).aggregate(Count(alias="clicks"))
               .start("runs/hourly"))
    run.process_all_available()
    run.df        # the firings so far
    run.late      # the elements dropped as late
    run.replay()  # the recorded arrivals replayed by kit.stream: the same firings

Each key's ``WindowOperator`` steps through the rows of each micro-batch (``LiveWindow``),
its state kept by Spark's state store between batches (``kit.live.driver``), and after each
step the firings and late elements it made leave as rows. Every row of a micro-batch meets
the same watermark, the one after all earlier batches (Spark moves it between batches;
Flink after each element): a window fires in the first batch whose watermark reaches its
end, before that batch's rows. ``run.df``'s columns are ``WindowResult.df``'s (window
bounds typed like the time column), with ``batch`` (the micro-batch that fired it) instead
of ``proctime`` and ``fired_after``; ``run.late`` has the late elements' columns, their
``watermark`` and ``batch``; ``run.bad`` the rows without an event time, which no window
saw (Flink fails the job on one; a live query goes on).

Processing-time windows and triggers run live on the micro-batches' processing time (each
row arrives at its batch's: ``kit.live.driver.LiveRun``): a window fires in the first batch
at or after its end, with data or not, so the firings lag by up to the trigger interval
(``start(trigger=...)``, default one second: Spark runs a batch at every trigger in this
mode) and the batch's own time; ``arrivals`` record each arrival's ``_pt`` and the replay
runs on them, its clock going on to the last committed batch's time. An event-time window
with a processing-time trigger (early firings) runs so too, its key looking at each batch's
watermark while a window waits for it. ``window_all`` and the elements' fates
(``elements()``) are the replay's only. The firings' order across keys within one batch is
Spark's; ``df`` sorts them by key, each key's in its order.

    batch (time)   rows (key)   TumblingProcessingTimeWindows.of(1 s)
    0 (10.2 s)     a a          window [10 s, 11 s) opened
    1 (11.3 s)     -            fires: a, 2 rows (a batch without data)
"""

from __future__ import annotations

import copy

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import KitError
from ..live.driver import LiveRun
from ..live.query import LiveQuery
from ..live.stream import LiveStream
from ..replay.keyed import ValueState
from ..time import WatermarkStrategy
from .assigners import MIN_TIME
from .datastream import DataStream, KeyedStream, WindowResult, declared_output, row_values
from .operator import Element, WindowOperator, timer_clocks

__all__ = ["LiveDataStream", "LiveWindow", "LiveWindowResult", "LiveWindowQuery"]


class LiveDataStream(LiveStream):
    """A ``LiveStream`` with PyFlink's window API (``kit.live(df, ...)`` makes one)."""

    def key_by(self, *columns: str) -> KeyedStream:
        """``KeyedStream``: windows per value of ``columns`` (``.window(...)``)."""
        return KeyedStream(self, tuple(columns))

    def window_result(self, windowed, spec, output_type) -> "LiveWindowResult":
        """What a window's function gives on this stream (``WindowedStream`` asks)."""
        return LiveWindowResult(windowed, spec, output_type)


class LiveWindow(WindowOperator):
    """The ``WindowOperator`` on the live driver's rows (the element's values, ``_ts``,
    ``_wm``, ``_arr``): after each element and each timer it outputs the new firings and
    late elements as tagged rows, and forgets them (a live key's state stays bounded). With
    processing-time timers, each element carries its ``_pt``."""
    state = WindowOperator.state + (ValueState("seq"), ValueState("order"))

    def __init__(self, spec, values: list, emit):
        super().__init__(spec)
        self.element_row, self.emit = Row(*values), emit
        self.processing = "processing" in timer_clocks(spec)

    def process_element(self, row, ctx):
        op = self.operator(ctx)
        seq = ctx.state("seq")
        n = seq.value() or 0
        seq.update(n + 1)
        *values, ts, wm, pt, arr = row
        e = Element(n, ts, MIN_TIME if wm is None else wm, pt if self.processing else None, self.element_row(*values))
        self.step(op, e, ctx)
        self._flush(op, ctx, {n: (arr, values)})

    def on_timer(self, timestamp, ctx):
        super().on_timer(timestamp, ctx)
        self._flush(self.operator(ctx), ctx, {})

    def _flush(self, op, ctx, element: dict):
        """The new firings (numbered in the key's order) and late elements (``element``:
        seq -> the arrival and its values) as rows, then gone from the operator."""
        order = ctx.state("order")
        n = order.value() or 0
        for out in self.emit(op, element, n):
            ctx.output(out)
        order.update(n + sum(len(f.outputs) for f in op.result.firings))
        op.result.firings.clear()
        op.result.late.clear()
        op.seen.clear()
        op.fired_seqs.clear()
        op.evicted_seqs.clear()
        op.dropped_seqs.clear()


class LiveWindowResult:
    """``...window(...).aggregate(...)`` on a live stream: ``start(path)`` runs it."""

    def __init__(self, windowed, spec, output_type):
        stream = windowed.stream
        if not windowed.keys:
            raise KitError("live mode runs keyed windows: key_by(...) first (window_all is the replay's)")
        self.stream, self.keys, self.spec = stream, windowed.keys, spec
        self.processing = "processing" in timer_clocks(spec)   # Spark's processing-time mode
        self.values = list(stream.source.columns)
        output = declared_output(spec, stream.source.schema, output_type)
        if output is None:
            raise KitError("live mode cannot run the function ahead to see its columns: pass "
                           "output_type='name type, ...'")
        clash = [c for c in output.fieldNames() if c in _OWN or c.startswith("_")]
        if clash:
            raise KitError(f"output column(s) {clash} have the name of a column live mode adds {list(_OWN)} or "
                           "start with '_': rename them (the replay renames its own to kit_<name> instead)")
        self.output, self.windowed = output, windowed

    def start(self, path: str, trigger: str | None = None, sink=None) -> "LiveWindowQuery":
        """Starts the query; its rows and checkpoint go under ``path`` (``kit.live.query``).
        ``trigger``: None (a batch as soon as the last is done; with processing-time timers,
        every second), ``"available_now"`` (what the source has now, then stop; not with
        processing-time timers: Spark's batches go on for them) or an interval such as
        ``"10 seconds"``. ``sink``: a ``kit.DbApiSink`` that each batch's firings go to too
        (``batch_rows``)."""
        processing = self.processing
        if processing and trigger == "available_now":
            raise KitError("trigger='available_now' never stops with processing-time timers (Spark runs a batch "
                           "at every trigger for them, data or not): start with an interval such as '1 second' "
                           "and stop() the query")
        return LiveWindowQuery(self, path, "1 second" if processing and trigger is None else trigger, sink)


def _named(part) -> str:
    """A part of the window as text that names it the same in every run (its type, not its
    address, where its repr has one)."""
    text = repr(part)
    if " at 0x" not in text:
        return text
    return getattr(part, "__qualname__", None) or type(part).__qualname__


_OWN = ("key", "window_start", "window_end", "firing", "pane", "cause", "timer", "watermark", "contents", "order",
        "batch")


def _firing_fields(result: LiveWindowResult) -> list:
    schema = result.stream.source.schema
    keys = [schema[k] for k in result.keys]
    key = keys[0].dataType if len(keys) == 1 else T.StructType(keys)
    long = T.LongType()
    return ([T.StructField("key", key), T.StructField("window_start", long), T.StructField("window_end", long)]
            + list(result.output.fields)
            + [T.StructField(c, T.StringType() if c in ("firing", "cause") else long)
               for c in ("firing", "pane", "cause", "timer", "watermark", "contents", "order")])


class LiveWindowQuery(LiveQuery):
    """A started live window (``LiveWindowResult.start``): ``df``, ``late``, ``bad``,
    ``arrivals``, ``replay()``, and ``LiveQuery``'s ``process_all_available()``, ``stop()``,
    ``status`` (with Flink's ``watermark`` now)."""

    def __init__(self, result: LiveWindowResult, path: str, trigger, sink=None):
        self.result = result
        stream, keys, values, output = result.stream, list(result.keys), result.values, result.output
        firing = _firing_fields(result)
        late = [stream.source.schema[c] for c in values] + [T.StructField("_arr", T.LongType()),
                                                             T.StructField("watermark", T.LongType())]
        # one output column set for both kinds: the kind, then firing's, then late's
        self._fields = [T.StructField("_what", T.StringType())] + firing + [
            T.StructField(f"_late{i}", f.dataType) for i, f in enumerate(late)]
        width, one = len(firing), len(keys) == 1

        def emit(op, element, order):
            for f in op.result.firings:
                for value in f.outputs:
                    yield ("firing", op.key if one else dict(zip(keys, op.key)), f.window.start,
                           f.window.end, *row_values(value, output), f.kind, f.pane, f.cause, f.timer,
                           None if f.watermark == MIN_TIME else f.watermark, len(f.seqs), order,
                           *[None] * len(late))
                    order += 1
            for seq, watermark in op.result.late:
                arr, vals = element[seq]
                yield ("late", *[None] * width, *vals, arr, watermark)

        self.run = LiveRun(stream.time, stream.watermark, tuple(keys), tuple(stream.recorded),
                           (*values, "_ts", "_wm", "_pt", "_arr"), stream.malformed, result.processing)
        tagged = self.run.process(stream.raw, LiveWindow(result.spec, values, emit), T.StructType(self._fields))
        names = {f"_o{i}": f.name for i, f in enumerate(self._fields)}
        arrival = [F.col(f"_c{i}").alias(c) for i, c in enumerate(values)] + ["_arr", "_ts", "_wm", "_pt"]
        reason = stream.reason(f"_c{len(values)}" if stream.malformed else None)
        tables = {"arrival": arrival, "bad": [*arrival[:len(values)], "_arr", reason],
                  "firing": [F.col(o).alias(n) for o, n in names.items() if n in {f.name for f in firing}],
                  "late": [F.col(o).alias(n) for o, n in names.items() if n.startswith("_late")]}
        spec = result.spec
        query = {"columns": ", ".join(f.simpleString() for f in stream.source.schema.fields), "time": stream.time,
                 "watermark": repr(stream.watermark), "keys": ", ".join(keys), "window": repr(spec.assigner),
                 "trigger": _named(spec.trigger), "evictor": _named(spec.evictor),
                 "allowed_lateness": spec.allowed_lateness, "function": _named(spec.function and spec.function[1]),
                 "contents": f"{spec.contents.kind} {_named(getattr(spec.contents, '_agg', None))}",
                 "output": output.simpleString()}
        super().__init__(tagged.withColumn("_kind", F.when(F.col("_kind") == "output", F.col("_o0"))
                                           .otherwise(F.col("_kind"))), path, tables, trigger, query, sink)

    # ------------------------------------------------------------ what the batches wrote

    @property
    def df(self) -> DataFrame:
        """The firings of the committed batches: in key order, each key's as they fired (as
        ``WindowResult.df`` has them)."""
        return self._firings(self.table("firing"))

    def batch_rows(self, batch: int) -> DataFrame:
        """The firings of micro-batch ``batch``, as a sink receives them (``df``'s columns)."""
        return self._firings(self.table("firing", batch))

    def _firings(self, rows: DataFrame) -> DataFrame:
        rows = rows.orderBy("key", "order")
        times = ("window_start", "window_end", "timer", "watermark") if self._timestamps else ()
        return rows.select(*[F.timestamp_millis(c).alias(c) if c in times else F.col(c)
                             for c in rows.columns if c != "order"])

    @property
    def late(self) -> DataFrame:
        """The elements dropped as late: their columns, the ``watermark`` then, ``batch``."""
        rows = self.table("late").orderBy("batch", "_late" + str(len(self.result.values)))
        values = self.result.values
        watermark = F.col(f"_late{len(values) + 1}")
        return rows.select(*[F.col(f"_late{i}").alias(c) for i, c in enumerate(values)],
                           (F.timestamp_millis(watermark) if self._timestamps else watermark).alias("watermark"),
                           "batch")

    def replay(self):
        """The recorded arrivals replayed by ``kit.stream`` through the same window: a
        ``WindowResult`` whose firings before the end of input are ``df``'s. Each arrival
        emits the watermark the next one met (the last: the one of the last committed
        micro-batch: the live operators fired no timer past it). Its stream is ``record``'s:
        the input's columns, ``batch``, ``_arr`` (the arrival order) and ``_emits``; with
        processing-time timers, ``_proctime`` (each arrival's batch time), the clock running
        on to the last committed batch's time at the end."""
        processing = self.run.processing
        record = self.record([*self.result.values, *["_pt"] * processing], self._timestamps)
        if processing:
            record = record.withColumn("_proctime", F.timestamp_millis("_pt")).drop("_pt")
        stream = DataStream.of(record, time=self.run.time, order=["batch", "_arr"],
                               watermark=WatermarkStrategy.from_column("_emits"),
                               proctime="_proctime" if processing else None)
        windowed = copy.copy(self.result.windowed)
        windowed.stream = stream
        return WindowResult(windowed, self.result.spec, self.result.output,
                            self.applied_proctime() if processing else None)

    @property
    def _timestamps(self) -> bool:
        return not isinstance(self.result.stream.source.schema[self.run.time].dataType, T.IntegralType)
