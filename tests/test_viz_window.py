"""window_timeline: lanes per key, window bars, firing marks, fates, the watermark panel."""

import pandas as pd

import kit
from kit.time import Duration
from kit.windows import EventTimeSessionWindows, TumblingEventTimeWindows


def _layers(chart):
    return {tuple(sorted(layer.data.columns)) if hasattr(layer.data, "columns") else None: layer
            for layer in chart.vconcat[0].layer}


def test_window_timeline_draws_windows_firings_and_late_elements(spark):
    pdf = pd.DataFrame({"user": ["a", "b", "a", "a"], "ts": [1000, 2000, 12000, 500]})
    stream = kit.stream(pdf, time="ts", watermark=Duration.of_seconds(0))
    result = stream.key_by("user").window(TumblingEventTimeWindows.of(Duration.of_seconds(10))).process(
        lambda key, ctx, elements: [(len(list(elements)),)], output_type="n bigint")
    chart = kit.viz.window_timeline(result)
    top, bottom = chart.vconcat
    bars, points, marks, labels = top.layer
    assert sorted(map(tuple, bars.data[["lane", "window_start", "window_end"]].values.tolist())) == [
        ("a", 0, 10000), ("a", 10000, 20000), ("b", 0, 10000)]
    assert dict(zip(points.data["seq"], points.data["fate"])) == {0: "fired", 1: "fired", 2: "fired", 3: "late"}
    assert sorted(marks.data["firing"]) == ["on-time"] * 3 and list(labels.data["label"]) == ["0", "0", "0"]
    assert "1 late element (×)" in str(chart.to_dict()["vconcat"][0]["title"])
    assert list(bottom.data["seq"]) == [0, 1, 2, 3]


def test_sessions_show_the_merged_window(spark):
    pdf = pd.DataFrame({"user": ["a"] * 3, "ts": [1000, 7000, 4000]})
    stream = kit.stream(pdf, time="ts", watermark=Duration.of_seconds(10))
    result = stream.key_by("user").window(EventTimeSessionWindows.with_gap(Duration.of_seconds(3))).reduce(
        lambda x, y: x)
    bars = kit.viz.window_timeline(result).vconcat[0].layer[0]
    assert bars.data[["window_start", "window_end"]].values.tolist() == [[1000, 10000]]
