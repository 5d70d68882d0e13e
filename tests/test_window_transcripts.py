"""Window transcripts (tests/transcripts/windows.yaml): the reference operator replaying the
whole stream, and the Spark execution (per key + timer placement), both against the
expected firings, late elements and fates of each scenario."""

from pathlib import Path

import pandas as pd
import pytest
import yaml
from pyspark.sql import Row
from pyspark.sql import functions as F

import kit
from kit.time import Duration, Time
from kit.windows import assigners, evictors, triggers
from kit.windows.assigners import MAX_TIME, MIN_TIME
from kit.windows.datastream import OutputTag, WindowedStream, _count_window
from kit.windows.functions import Contents
from kit.windows.operator import Element, WindowSpec, replay

SCENARIOS = list(yaml.safe_load_all((Path(__file__).parent / "transcripts" / "windows.yaml").read_text()))
NAMES = {**{n: getattr(m, n) for m in (assigners, triggers, evictors) for n in m.__all__},
         "Time": Time, "Duration": Duration}


def _eval(text):
    return None if text is None else eval(text, dict(NAMES))  # noqa: S307 -- test fixtures


def _inputs(case):
    rows = []
    for item in case["input"]:
        if isinstance(item, dict):
            rows.append((item["key"], item["ts"], item.get("v", item["ts"]), item.get("pt")))
        else:
            rows.append((item[0], item[1], item[2] if len(item) > 2 else item[1], None))
    return rows


def _collector():
    """The window function of every scenario: the values in the window, in state order
    (made inside a function so Spark's workers get it by value, not by module)."""
    def collect(key, ctx, elements):
        return [([e.v for e in elements],)]
    return collect


def _windowed(case, stream=None):
    keys = ("key",)
    if "count_window" in case:
        windowed = _count_window(WindowedStream(stream, keys, assigners.GlobalWindows.create()), *case["count_window"])
    else:
        windowed = WindowedStream(stream, keys, _eval(case["assigner"]))
    if case.get("trigger"):
        windowed = windowed.trigger(_eval(case["trigger"]))
    if case.get("evictor"):
        windowed = windowed.evictor(_eval(case["evictor"]))
    if case.get("lateness"):
        windowed = windowed.allowed_lateness(case["lateness"])
    return windowed


def _expected(case):
    out = {}
    for f in case["firings"]:
        row = {k: f[k] for k in ("window", "values", "kind", "pane", "cause", "after", "watermark")}
        if "proctime" in f:
            row["proctime"] = f["proctime"]
        out.setdefault(f["key"], []).append(row)
    return out


def _plain_watermark(w):
    return None if w in (MIN_TIME, MAX_TIME) else w


@pytest.mark.parametrize("case", SCENARIOS, ids=[c["name"] for c in SCENARIOS])
def test_reference_replay(case):
    windowed = _windowed(case)
    spec = WindowSpec(windowed.assigner, windowed._trigger or windowed.assigner.default_trigger(),
                      Contents("list"), ("process", _collector()), windowed._evictor, windowed._lateness)
    delay = case["delay"]
    arrivals, watermark = [], MIN_TIME
    for seq, (key, ts, v, pt) in enumerate(_inputs(case)):
        arrivals.append((key, Element(seq, ts, watermark, pt, Row(key=key, ts=ts, v=v))))
        watermark = max(watermark, ts - delay - 1)
    results = replay(arrivals, spec, lambda e: e.timestamp - delay - 1)
    got = {}
    for key, result in results.items():
        for f in result.firings:
            row = {"window": None if f.window.start is None else [f.window.start, f.window.end],
                   "values": f.outputs[0][0], "kind": f.kind, "pane": f.pane, "cause": f.cause,
                   "after": f.fired_after, "watermark": _plain_watermark(f.watermark)}
            expected_keys = {r.get("key") for r in case["firings"] if "proctime" in r}
            if key in expected_keys:
                row["proctime"] = f.proctime
            got.setdefault(key, []).append(row)
    assert got == _expected(case)
    assert sorted(seq for r in results.values() for seq, _ in r.late) == case["late"]
    if "fates" in case:
        assert {seq: fate for r in results.values() for seq, fate in r.fates.items()} == case["fates"]


# one scenario per path of the Spark execution (every scenario would take minutes): several
# keys and timer placement, lateness, processing time, merging sessions, evictors, count windows
ON_SPARK = ("timers fire after the arrival whose watermark passes them, for every key",
            "allowed lateness refires the window with its full contents, then drops it",
            "processing-time windows fire when the clock passes them; at the end they stay pending",
            "a late element bridging two fired sessions fires a new merged window",
            "CountEvictor before the function rewrites the state",
            "with slide > size, elements between windows belong to no window")


def test_spark_execution_equals_the_transcripts(spark):
    assert set(ON_SPARK) <= {c["name"] for c in SCENARIOS}
    for case in [c for c in SCENARIOS if c["name"] in ON_SPARK]:
        rows = _inputs(case)
        has_clock = any(pt is not None for *_, pt in rows)
        pdf = pd.DataFrame({"key": [r[0] for r in rows], "ts": [r[1] for r in rows], "v": [r[2] for r in rows]})
        if has_clock:
            pdf["pt"] = pd.to_datetime([r[3] for r in rows], unit="ms")
        stream = kit.stream(pdf, time="ts", watermark=Duration.of_millis(case["delay"]),
                            proctime="pt" if has_clock else None)
        tag = OutputTag("late")
        windowed = _windowed(case, stream).side_output_late_data(tag)
        result = windowed.process(_collector(), output_type="vals array<bigint>")
        firings = result.df.select("key", "window_start", "window_end", "vals", "firing", "pane", "cause",
                                   "fired_after", "watermark", F.unix_millis("proctime").alias("pt")).collect()
        got = {}
        for r in firings:
            row = {"window": None if r.window_start is None else [r.window_start, r.window_end],
                   "values": list(r.vals), "kind": r.firing, "pane": r.pane, "cause": r.cause,
                   "after": r.fired_after, "watermark": r.watermark}
            if any(f["key"] == r.key and "proctime" in f for f in case["firings"]):
                row["proctime"] = r.pt
            got.setdefault(r.key, []).append(row)
        assert got == _expected(case), case["name"]
        assert [r.seq for r in result.get_side_output(tag).collect()] == case["late"], case["name"]
        if "fates" in case:
            assert {r.seq: r.fate for r in result.elements().collect()} == case["fates"], case["name"]


def test_first_at_least_finds_the_first_arrival_at_or_above_each_threshold(spark):
    """The timer placement's lookup: ties count (a value equal to the threshold reaches it),
    the first arrival wins over a later, higher one, NULLs reach nothing, and a threshold
    no arrival reaches gives None -- across input partitions."""
    from kit.windows.placement import first_at_least
    values = [5, None, 12, 9, 12, 20, 3]
    arrivals = spark.createDataFrame([(i, v, 100 + i) for i, v in enumerate(values)],
                                     "seq long, v long, pt long").repartition(3)
    hits = first_at_least(arrivals, {"v": [12, 5, 9, 10, 12, 21, 4, 20]})
    assert {t: None if h is None else (h.seq, h.pt) for (_, t), h in hits.items()} == {
        4: (0, 100), 5: (0, 100), 9: (2, 102), 10: (2, 102), 12: (2, 102), 20: (5, 105), 21: None}
    assert first_at_least(arrivals, {"v": []}) == {}
