"""The kit's windows against real Flink 2.3's DataStream window operator
(tests/golden/flink-2.3/windows.json, made by tests/golden/make_windows.py): the order of
timers at one time (Flink's timer heap, shared by the keys of an operator),
``context.current_watermark()`` in a timer's firing, Flink's watermark values at the ends
(``watermark_ms``), and input columns named like the result's own."""

import json
from pathlib import Path
from unittest import mock

import pytest
from pyspark.sql import Row

import kit
from kit.time import Duration, Time
from kit.windows import assigners, compiled, triggers
from kit.windows.assigners import MIN_TIME
from kit.windows.functions import Contents, Sum
from kit.windows.operator import Element, WindowSpec, replay, run_key

GOLDEN = json.loads((Path(__file__).parent / "golden" / "flink-2.3" / "windows.json").read_text())
SCENARIOS = {s["name"]: s for s in GOLDEN["scenarios"]}
PROCESS = [s for s in GOLDEN["scenarios"] if s["function"] == "process"]
NAMES = {**{n: getattr(m, n) for m in (assigners, triggers) for n in m.__all__}, "Time": Time}


def _spec_parts(case):
    assigner = eval(case["assigner"], dict(NAMES))  # noqa: S307 -- test fixtures
    trigger = eval(case["trigger"], dict(NAMES)) if case["trigger"] else None  # noqa: S307
    return assigner, trigger


def _collector():
    """The golden program's ProcessWindowFunction: key, window, values, current_watermark()
    (made inside a function so Spark's workers get it by value, not by module)."""
    def collect(key, ctx, elements):
        w = ctx.window()
        return [(key, w.start, w.end, [e.v for e in elements], ctx.current_watermark())]
    return collect


collect = _collector()


def _per_key(rows):
    out = {}
    for r in rows:
        out.setdefault(r[0], []).append(list(r))
    return out


def _expected(case):
    return _per_key([[k, s, e, vs, wm] for k, (s, e), vs, wm in case["firings"]])


def _arrivals(case):
    """(key, Element) in arrival order, each with the watermark it met, and each one's own."""
    value, watermark, top, own, arrivals = Row("k", "ts", "v"), MIN_TIME, None, {}, []
    for seq, (k, ts, v) in enumerate(case["input"]):
        arrivals.append((k, Element(seq, ts, watermark, None, value(k, ts, v))))
        top = ts if top is None else max(top, ts)
        own[seq] = top - case["delay"] - 1
        watermark = max(watermark, own[seq])
    return arrivals, own


@pytest.mark.parametrize("case", PROCESS, ids=[c["name"] for c in PROCESS])
def test_the_whole_stream_replay_fires_as_flink(case):
    """One operator for every key, one timer heap: Flink's firings, per key in Flink's order,
    with the watermark the function read."""
    assigner, trigger = _spec_parts(case)
    spec = WindowSpec(assigner, trigger or assigner.default_trigger(), Contents("list"), ("process", collect))
    arrivals, own = _arrivals(case)
    results = replay(arrivals, spec, lambda e: own[e.seq])
    got = {k: [list(o) for f in r.firings for o in f.outputs] for k, r in results.items()}
    assert got == _expected(case)


def test_timers_at_one_time_fire_in_the_heaps_order_not_registration_order():
    """A key alone (its own heap, as run_key has it) fires like Flink's operator with one key."""
    case = SCENARIOS["timers_same_time_one_key"]
    assigner, trigger = _spec_parts(case)
    spec = WindowSpec(assigner, trigger, Contents("list"), ("process", collect))
    arrivals, _ = _arrivals(case)
    firings = run_key("a", [e for _, e in arrivals], spec).firings
    assert [list(o)[:4] for f in firings for o in f.outputs] == [r[:4] for r in _expected(case)["a"]]
    # at watermark 6 the four windows' timers at 5 fire as the heap leaves them
    assert [list(f.window.start for f in firings[:4])] == [[-15, -5, 0, -10]]


def _stream(case, spark, columns=("k", "ts", "v")):
    df = spark.createDataFrame([tuple(r) for r in case["input"]], f"{columns[0]} string, ts long, v long")
    return kit.stream(df.coalesce(1), time="ts", watermark=Duration.of_millis(case["delay"]))


def _windowed(case, spark, columns=("k", "ts", "v")):
    assigner, trigger = _spec_parts(case)
    windowed = _stream(case, spark, columns).key_by(columns[0]).window(assigner)
    return windowed.trigger(trigger) if trigger else windowed


OUTPUT = "k string, s long, e long, vs array<long>, wm long"


def _df_rows(result):
    return _per_key([[r.k, r.s, r.e, list(r.vs), r.wm] for r in result.df.collect()])


@pytest.mark.parametrize("name", ["watermark_in_timer_firing", "watermark_continuous_jump"])
def test_keys_replayed_alone_read_the_watermark_that_crossed_the_timer(spark, name):
    """Each key replayed on its own (as in a parallel run): current_watermark() inside a
    timer's firing is the watermark that crossed the timer, emitted after another key's
    arrival, not the one the key's next arrival met."""
    case = SCENARIOS[name]
    result = _windowed(case, spark).process(collect, output_type=OUTPUT)
    result.__dict__["_one_operator"] = False   # the per-key replay, as a large stream gets it
    assert _df_rows(result) == _expected(case)
    if name == "watermark_continuous_jump":   # the key alone, without the stream's watermarks
        spec = WindowSpec(*_spec_parts(case), Contents("list"), ("process", collect))
        alone = run_key("b", [e for k, e in _arrivals(case)[0] if k == "b"], spec).firings
        assert [o[-1] for f in alone for o in f.outputs] != [r[-1] for r in _expected(case)["b"]]


@pytest.mark.parametrize("case", PROCESS, ids=[c["name"] for c in PROCESS])
def test_the_spark_execution_fires_as_flink(spark, case):
    """A small stream runs as one operator: Flink's firings and order per key, and the
    ``watermark_ms`` column is the value the function read (Long.MIN_VALUE before any
    watermark, Long.MAX_VALUE at the end of input)."""
    result = _windowed(case, spark).process(collect, output_type=OUTPUT)
    rows = result.df.collect()
    assert _per_key([[r.k, r.s, r.e, list(r.vs), r.wm] for r in rows]) == _expected(case)
    assert [r.watermark_ms for r in rows] == [r.wm for r in rows]
    assert all((r.watermark is None) == (r.wm in (-2**63, 2**63 - 1)) for r in rows)
    ends = [(r.k, r.watermark, r.watermark_ms, r.fired_after) for r in rows if r.watermark is None]
    if case["name"] == "watermark_none_yet_and_end":   # an element's firing before any watermark
        assert ends == [("a", None, -2**63, 0)]
    if case["name"] == "watermark_none_yet_timer_at_end":   # the end of input
        assert ends == [("b", None, 2**63 - 1, None)]


@pytest.mark.parametrize("case", PROCESS, ids=[c["name"] for c in PROCESS])
def test_keys_replayed_apart_fire_in_flinks_order(spark, case):
    """Each key replayed alone, in Python and in the JVM twin (as a large stream gets it),
    with its own heap: Flink's firings in Flink's order per key, though other keys' timers
    moved the ties (kit/windows/timer_order.py puts them in one heap's order)."""
    result = _windowed(case, spark).process(collect, output_type=OUTPUT)
    result.__dict__["_one_operator"] = False
    rows = result.df.collect()
    assert _per_key([[r.k, r.s, r.e, list(r.vs), r.wm] for r in rows]) == _expected(case)
    assert [r.k for r in rows] == sorted(r.k for r in rows)   # the result: by key, each in Flink's order
    summed = _windowed(case, spark).aggregate(Sum("v"))
    with mock.patch("kit.windows.fast.eligible", return_value=False):
        rows = summed.df.collect()
    assert compiled.applies(summed) and not summed._one_operator
    assert _per_key([(r.key, r.window_start, r.window_end, r[3]) for r in rows]) == _per_key(
        [(k, s, e, sum(vs)) for k, (s, e), vs, _ in case["firings"]])


def test_the_jvm_operator_fires_timers_at_one_time_in_the_heaps_order(spark):
    """The JVM twin keeps its timers in the same heap: a built-in aggregate on the golden's
    sliding windows fires in Flink's order."""
    case = SCENARIOS["timers_same_time_one_key"]
    result = _windowed(case, spark).aggregate(Sum("v"))
    with mock.patch("kit.windows.fast.eligible", return_value=False):
        rows = result.df.collect()
    assert compiled.applies(result) and not result._one_operator   # the JVM's per-key replay ran
    expected = [(s, e, sum(vs)) for _, (s, e), vs, _ in case["firings"]]
    assert [(r.window_start, r.window_end, r[3]) for r in rows] == expected


COLUMN_CASES = [s for s in GOLDEN["scenarios"] if s["name"].startswith("column_named_")]
STREAM_OWN = ("seq", "watermark", "late", "proctime")


@pytest.mark.parametrize("case", COLUMN_CASES, ids=[c["fields"][0] for c in COLUMN_CASES])
def test_input_columns_named_like_the_results_own(spark, case):
    """A reduce over rows whose key column has one of the result's (or the stream's) own
    names: Flink's rows (it reserves no names); the kit's clashing column is renamed
    ``kit_<name>``, in the stream too, by the Python and the JVM replay alike."""
    name = case["fields"][0]
    result = _windowed(case, spark, case["fields"]).reduce(lambda a, b: Row(a[0], max(a[1], b[1]), a[2] + b[2]))
    df = result.df
    rows = df.collect()
    expected = _per_key(case["rows"])
    assert _per_key([[r[name], r.ts, r.v] for r in rows]) == expected
    if name in STREAM_OWN:   # the stream's own columns: its own renamed, the operators read each right
        assert result.stream.kit_columns.get(name, "kit_proctime") == "kit_" + name   # no clock: no proctime
        assert [r[name] for r in result.stream.df.collect()] == [k for k, _, _ in case["input"]]
        counted = _windowed(case, spark, case["fields"]).aggregate(Sum("v"))   # the JVM's replay
        with mock.patch("kit.windows.fast.eligible", return_value=False):
            sums = counted.df.collect()
        assert compiled.applies(counted)
        assert _per_key([(r.key, r[3]) for r in sums]) == _per_key([(k, v) for k, _, v in case["rows"]])
    own = {"key", "window_start", "window_end", "firing", "pane", "cause", "timer", "watermark", "watermark_ms",
           "proctime", "fired_after", "contents"}
    if name in own:
        assert result.kit_columns[name] == "kit_" + name and "kit_" + name in df.columns
    assert [c for c in df.columns if c == name] == [name]
    if name == "fate":   # elements(): the input's columns, then the kit's seq and fate
        elements = result.elements()
        assert elements.columns == [name, "ts", "v", "seq", "kit_fate"] and result.kit_columns["fate"] == "kit_fate"
        assert {r.kit_fate for r in elements.collect()} == {"fired"}
