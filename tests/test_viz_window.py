"""window_timeline: lanes per key, window spans, firing marks where they fired, fates,
late elements marked, the watermark panel, bounded data."""

import altair as alt
import pandas as pd
import pytest

import kit
from kit.time import Duration, Time
from kit.windows.assigners import (EventTimeSessionWindows, GlobalWindows, SlidingEventTimeWindows,
                                   TumblingEventTimeWindows)
from kit.windows.triggers import CountTrigger


def _by_mark(layer_chart):
    """{mark type: [layers]} of a layered panel (layers within layers too, in order, each
    with its data: altair moves the data the layers of a layer share up to it)."""
    out = {}
    for layer in layer_chart.layer:
        if layer.data is alt.Undefined:
            layer = layer.properties(data=layer_chart.data)
        if hasattr(layer, "layer"):
            for mark, layers in _by_mark(layer).items():
                out.setdefault(mark, []).extend(layers)
        else:
            out.setdefault(layer.mark.type, []).append(layer)
    return out


def _counter():
    # made here, not at module level: the workers unpickle it by value
    return lambda key, ctx, elements: [(len(list(elements)),)]


def test_lanes_windows_firings_and_late_elements(spark):
    # a@1 b@2 a@12 a@0.5 (late: the watermark is 11.999 s) a@25 a@13 (late too)
    pdf = pd.DataFrame({"user": ["a", "b", "a", "a", "a", "a"], "ts": [1000, 2000, 12000, 500, 25000, 13000]})
    stream = kit.stream(pdf, time="ts", watermark=Duration.of_seconds(0))
    result = stream.key_by("user").window(TumblingEventTimeWindows.of(Duration.of_seconds(10))).process(
        _counter(), output_type="n bigint")
    chart = kit.viz.window_timeline(result)
    top, bottom = chart.vconcat
    layers = _by_mark(top)
    (bars,) = layers["bar"]
    assert bars.data[["lane", "window_start", "window_end", "status"]].values.tolist() == [
        ["a", 0, 10000, "fired"], ["a", 10000, 20000, "fired"], ["a", 20000, 30000, "fired"],
        ["b", 0, 10000, "fired"]]
    points, marks = layers["point"]
    assert dict(zip(points.data["seq"], points.data["fate"])) == {
        0: "fired", 1: "fired", 2: "fired", 3: "late", 4: "fired", 5: "late"}
    # a late element: a red × in a red ring, bigger than the other points
    assert points.to_dict()["encoding"]["size"] == {
        "condition": {"test": 'datum.element == "late (dropped)"', "value": 200}, "value": 80}
    # on-time firings at the windows' ends, labelled with their pane; the last at the end of input
    assert marks.data[["lane", "at", "firing", "label", "watermark_text", "fired_after", "result"]].values.tolist() == [
        ["a", 10000, "on-time", "0", "11999", "2", "n=1"], ["a", 20000, "on-time", "0", "24999", "4", "n=1"],
        ["a", 30000, "on-time", "0", "end of input", "end of input", "n=1"],
        ["b", 10000, "on-time", "0", "11999", "2", "n=1"]]
    spec = chart.to_dict()
    assert spec["title"]["text"] == "TumblingEventTimeWindows.of(Time.seconds(10)), EventTimeTrigger.create()"
    assert spec["title"]["subtitle"] == [
        "4 firings; 2 late elements dropped; watermark WatermarkStrategy.for_monotonous_timestamps()"]
    assert spec["vconcat"][0]["layer"][0]["encoding"]["y"]["sort"] == ["a", "b"]
    assert list(bottom.data["seq"]) == [0, 1, 2, 3, 4, 5]
    assert list(bottom.data["watermark"].fillna(-1)) == [-1, 999, 1999, 11999, 11999, 24999]


def test_early_and_late_firings_sit_where_they_fired(spark):
    # CountTrigger(2): fired by the second element, at that element's time; with lateness a late
    # element refires the window at its own time
    pdf = pd.DataFrame({"k": ["x"] * 4, "ts": [1000, 3000, 12000, 4000]})
    stream = kit.stream(pdf, time="ts", watermark=Duration.of_seconds(0))
    counted = stream.key_by("k").window(TumblingEventTimeWindows.of(Duration.of_seconds(10))).trigger(
        CountTrigger.of(2)).process(_counter(), output_type="n bigint")
    chart = kit.viz.window_timeline(counted)
    marks = _by_mark(chart.vconcat[0])["point"][1]
    assert marks.data[["at", "firing", "pane", "cause", "contents"]].values.tolist() == [
        [3000, "early", 0, "element", 2]]
    bars = _by_mark(chart.vconcat[0])["bar"][0]
    # the window of 12 s never fired (one element short): drawn hollow and dashed
    assert bars.data[["window_start", "status"]].values.tolist() == [[0, "fired"], [10000, "never fired"]]
    enc = bars.to_dict()["encoding"]
    assert enc["fill"]["scale"] == {"domain": ["fired", "never fired"],
                                    "range": ["rgba(107, 143, 191, 0.4)", "transparent"]}
    assert enc["strokeDash"]["scale"]["range"] == [[1, 0], [4, 2]]

    lenient = stream.key_by("k").window(TumblingEventTimeWindows.of(Duration.of_seconds(10))).allowed_lateness(
        Duration.of_seconds(5)).process(_counter(), output_type="n bigint")
    marks = _by_mark(kit.viz.window_timeline(lenient).vconcat[0])["point"][1]
    assert marks.data[["at", "firing", "label", "contents"]].values.tolist() == [
        [10000, "on-time", "0", 2], [4000, "late", "1", 3], [20000, "on-time", "0", 1]]


def test_sessions_show_the_merged_window(spark):
    pdf = pd.DataFrame({"user": ["a"] * 3, "ts": [1000, 7000, 4000]})
    stream = kit.stream(pdf, time="ts", watermark=Duration.of_seconds(10))
    result = stream.key_by("user").window(EventTimeSessionWindows.with_gap(Duration.of_seconds(3))).reduce(
        lambda x, y: x)
    bars = _by_mark(kit.viz.window_timeline(result).vconcat[0])["bar"][0]
    assert bars.data[["window_start", "window_end", "firings"]].values.tolist() == [[1000, 10000, 1]]


def test_global_windows_span_their_elements_and_timestamps_are_utc_text(spark):
    pdf = pd.DataFrame({"k": ["x"] * 3, "t": pd.to_datetime(["2024-01-01 12:00", "2024-01-01 12:05",
                                                            "2024-01-01 12:07"])})
    stream = kit.stream(pdf, time="t", watermark=Duration.of_minutes(1))
    result = stream.key_by("k").window(GlobalWindows.create()).trigger(CountTrigger.of(2)).process(
        _counter(), output_type="n bigint")
    top = _by_mark(kit.viz.window_timeline(result).vconcat[0])
    bars = top["bar"][0].data
    assert bars[["window_start", "window", "firings"]].values.tolist() == [
        ["2024-01-01T12:00:00.000Z", "GlobalWindow", 1]]
    points, marks = top["point"]
    assert list(points.data["fate"]) == ["fired", "fired", "pending"]
    assert marks.data[["at", "firing", "window"]].values.tolist() == [
        ["2024-01-01T12:05:00.000Z", "early", "GlobalWindow"]]


def test_keys_and_rows_are_bounded(spark):
    pdf = pd.DataFrame({"user": [f"u{i}" for i in range(6)] * 2, "ts": range(0, 12000, 1000)})
    stream = kit.stream(pdf, time="ts", watermark=Duration.of_seconds(0))
    result = stream.key_by("user").window(TumblingEventTimeWindows.of(Duration.of_seconds(5))).process(
        _counter(), output_type="n bigint")
    chart = kit.viz.window_timeline(result, max_keys=2, max_rows=3)
    top, bottom = chart.vconcat
    layers = _by_mark(top)
    assert sorted(set(layers["point"][0].data["lane"])) == ["u0", "u1"]
    assert len(layers["point"][0].data) <= 3 and len(layers["point"][1].data) <= 3
    assert len(bottom.data) == 3
    assert "the first 2 keys of more" in chart.to_dict()["title"]["subtitle"][0]
    # no key: one lane
    everyone = stream.window_all(TumblingEventTimeWindows.of(Duration.of_seconds(5))).process(
        lambda ctx, elements: [(len(list(elements)),)], output_type="n bigint")
    assert set(_by_mark(kit.viz.window_timeline(everyone).vconcat[0])["bar"][0].data["lane"]) == {"all"}


def test_processing_time_windows_are_drawn_on_the_processing_clock(spark):
    from datetime import datetime

    from kit.time import Clock
    from kit.windows.assigners import TumblingProcessingTimeWindows

    pdf = pd.DataFrame({"k": ["x"] * 4, "ts": [5000, 1000, 9000, 2000]})
    stream = kit.stream(pdf, time="ts", proctime=Clock(datetime(2024, 1, 1, 12), Duration.of_seconds(20)))
    result = stream.key_by("k").window(TumblingProcessingTimeWindows.of(Duration.of_minutes(1))).process(
        _counter(), output_type="n bigint")
    top = _by_mark(kit.viz.window_timeline(result).vconcat[0])
    points = top["point"][0].data
    assert list(points["proctime"]) == ["2024-01-01T12:00:00.000Z", "2024-01-01T12:00:20.000Z",
                                        "2024-01-01T12:00:40.000Z", "2024-01-01T12:01:00.000Z"]
    bars = top["bar"][0].data
    assert bars["window_start"].tolist() == ["2024-01-01T12:00:00.000Z", "2024-01-01T12:01:00.000Z"]


def test_windows_that_never_fired_are_bounded(spark):
    # a 100 s window sliding by 1 s: each element is in 100 windows, none of which fires
    pdf = pd.DataFrame({"k": ["x"] * 3, "ts": [1000, 2000, 3000]})
    stream = kit.stream(pdf, time="ts", watermark=Duration.of_seconds(0))
    from kit.windows.assigners import SlidingEventTimeWindows
    result = stream.key_by("k").window(SlidingEventTimeWindows.of(Duration.of_seconds(100), Duration.of_seconds(1))) \
        .trigger(CountTrigger.of(5)).process(_counter(), output_type="n bigint")
    bars = _by_mark(kit.viz.window_timeline(result, max_rows=50).vconcat[0])["bar"][0].data
    assert len(bars) == 50 and set(bars["status"]) == {"never fired"}


def _legend_domain(layer, channel="fill"):
    return layer.to_dict()["encoding"][channel]["scale"]["domain"]


def test_overlapping_sliding_windows_get_rows_of_their_own(spark):
    # notebook 01's clicks, 1 h windows sliding by 30 min: each click is in two windows
    minutes = [0, 0, 2, 3, 55, 61, 90, 119, 120, 150, 165]
    pdf = pd.DataFrame({"user": ["Mary", "Bob", "Mary", "Liz", "Mary", "Bob", "Liz", "Liz", "Mary", "Bob", "Bob"],
                        "cTime": pd.Timestamp("2024-01-01 12:00") + pd.to_timedelta(minutes, unit="min")})
    stream = kit.stream(pdf, time="cTime", watermark=Duration.of_minutes(5))
    result = stream.key_by("user").window(SlidingEventTimeWindows.of(Time.hours(1), Time.minutes(30))).process(
        _counter(), output_type="n bigint")
    top = kit.viz.window_timeline(result).vconcat[0]
    bars = _by_mark(top)["bar"][0].data
    for lane, windows in bars.groupby("lane"):
        spans = list(zip(windows["window_start"], windows["window_end"], windows["row"]))
        for i, (s1, e1, r1) in enumerate(spans):
            for s2, e2, r2 in spans[i + 1:]:
                if s1 < e2 and s2 < e1:
                    assert r1 != r2, f"{lane}: windows [{s1}, {e1}) and [{s2}, {e2}) overlap in row {r1}"
    # size / slide = 2 rows, windows one after the other in the same row (a new one starts as one ends)
    assert set(bars["row"]) == {0, 1} and not bars["shared"].any()
    mary = bars[bars["lane"] == "Mary"]
    assert mary[["window_start", "row"]].values.tolist() == [
        ["2024-01-01T11:30:00.000Z", 0], ["2024-01-01T12:00:00.000Z", 1], ["2024-01-01T12:30:00.000Z", 0],
        ["2024-01-01T13:30:00.000Z", 0], ["2024-01-01T14:00:00.000Z", 1]]
    offset = _by_mark(top)["bar"][0].to_dict()["encoding"]["yOffset"]
    assert offset["field"] == "slot" and offset["scale"]["domain"] == ["window row 0", "window row 1", "elements"]
    # every firing sits on its window's row
    marks = _by_mark(top)["point"][1].data
    assert set(marks["slot"]) == {"window row 0", "window row 1"}
    # tumbling windows: one row
    tumbling = stream.key_by("user").window(TumblingEventTimeWindows.of(Time.hours(1))).process(
        _counter(), output_type="n bigint")
    assert set(_by_mark(kit.viz.window_timeline(tumbling).vconcat[0])["bar"][0].data["row"]) == {0}


def test_window_rows_past_the_limit_are_shared():
    from kit.viz.window import MAX_WINDOW_ROWS, _window_rows

    windows = pd.DataFrame({"lane": ["k"] * 12, "window_start": range(12), "window_end": range(100, 112)})
    rows, shared = _window_rows(windows)
    assert rows == list(range(MAX_WINDOW_ROWS)) + list(range(12 - MAX_WINDOW_ROWS))
    assert shared == [False] * MAX_WINDOW_ROWS + [True] * (12 - MAX_WINDOW_ROWS)


def test_legends_list_only_what_is_drawn_and_the_title_can_be_given(spark):
    pdf = pd.DataFrame({"user": ["a", "b", "a", "a"], "ts": [1000, 2000, 12000, 500]})   # a@0.5 is late
    stream = kit.stream(pdf, time="ts", watermark=Duration.of_seconds(0))
    late = stream.key_by("user").window(TumblingEventTimeWindows.of(Duration.of_seconds(10))).process(
        _counter(), output_type="n bigint")
    chart = kit.viz.window_timeline(late, title="size 10 s, delay 0 s")
    top = _by_mark(chart.vconcat[0])
    assert _legend_domain(top["bar"][0]) == ["fired"]                       # no window left unfired
    assert _legend_domain(top["point"][0]) == ["fired", "late (dropped)"]
    assert _legend_domain(top["point"][1]) == ["on-time"]                   # no early or late firing
    # the late element's symbol is the ⊗ the words say: a ring with an × inside, in red
    from kit.viz.marks import LATE_COLOR, RING_X
    fates = top["point"][0].to_dict()["encoding"]
    assert fates["shape"]["scale"]["range"][1] == RING_X and fates["fill"]["scale"]["range"][1] == LATE_COLOR
    spec = chart.to_dict()
    assert spec["title"]["text"] == "size 10 s, delay 0 s"
    assert spec["title"]["subtitle"][0].startswith("3 firings; 1 late element dropped")
    # the watermark panel's legend: the staircase, and the grey arrivals of keys not drawn above
    bottom = _by_mark(chart.vconcat[1])
    assert bottom["point"][0].to_dict()["encoding"]["fill"]["legend"]["values"] == ["watermark"]

    on_time = stream.key_by("user").window(TumblingEventTimeWindows.of(Duration.of_seconds(10))).allowed_lateness(
        5000).process(_counter(), output_type="n bigint")
    top = _by_mark(kit.viz.window_timeline(on_time, max_keys=1).vconcat[0])
    assert _legend_domain(top["point"][0]) == ["fired"]
    assert _legend_domain(top["point"][1]) == ["on-time", "late"]
    bottom = _by_mark(kit.viz.window_timeline(on_time, max_keys=1).vconcat[1])
    assert bottom["point"][0].to_dict()["encoding"]["fill"]["legend"]["values"] == ["watermark", "other key"]


def test_wrong_arguments_are_named(spark):
    from kit.errors import KitError

    pdf = pd.DataFrame({"user": ["a"], "ts": [1000]})
    stream = kit.stream(pdf, time="ts")
    result = stream.key_by("user").window(TumblingEventTimeWindows.of(Time.seconds(10))).process(
        _counter(), output_type="n bigint")
    with pytest.raises(KitError, match="window_timeline draws a WindowResult .* got DataStream"):
        kit.viz.window_timeline(stream)
    with pytest.raises(KitError, match="title must be a str"):
        kit.viz.window_timeline(result, title=3)
    with pytest.raises(KitError, match="max_keys must be a positive int; got 0"):
        kit.viz.window_timeline(result, max_keys=0)
