"""stream_timeline draws every arrival, the watermark staircase and the late rows."""

import kit
from kit import Duration


def layers(chart):
    return chart.to_dict()["layer"]


def chart_rows(chart):
    spec = chart.to_dict()
    (values,) = spec["datasets"].values()
    return values


def test_timeline_of_out_of_order_clicks(spark):
    df = spark.createDataFrame([("a", 10), ("b", 30), ("a", 12), ("b", 31)], "k string, ts long")
    chart = kit.viz.stream_timeline(kit.stream(df, time="ts", watermark=Duration.of_millis(5)), key="k")
    rows = chart_rows(chart)
    assert [(r["seq"], r["ts"], r["watermark"], r["arrival"]) for r in rows] == [
        (0, 10, None, "on time"), (1, 30, 4, "on time"), (2, 12, 24, "late"), (3, 31, 24, "on time")]
    staircase, ring, points = layers(chart)
    assert staircase["mark"]["interpolate"] == "step-after"
    assert staircase["encoding"]["order"] == {"field": "seq", "type": "quantitative"}
    assert ring["transform"] == [{"filter": "datum.late"}]
    assert points["encoding"]["color"]["field"] == "k"
    assert points["encoding"]["shape"]["scale"]["range"] == ["circle", "cross"]
    assert "1 late row" in chart.to_dict()["title"]["subtitle"][0]


def test_timestamps_are_utc_and_stable(spark):
    clicks = kit.data.load("clicks")
    chart = kit.viz.stream_timeline(kit.stream(clicks, time="cTime"), key="user")
    rows = chart_rows(chart)
    assert rows[1]["cTime"] == "2024-01-01T12:00:00.000Z"
    assert rows[1]["watermark"] == "2024-01-01T11:59:59.999Z"
    assert rows[1]["watermark (UTC)"] == "2024-01-01 11:59:59.999"  # what the tooltip shows
    assert rows[0]["watermark (UTC)"] is None
    assert chart.to_json() == kit.viz.stream_timeline(kit.stream(clicks, time="cTime"), key="user").to_json()


def test_large_streams_are_cut_and_say_so(spark):
    df = spark.range(50).selectExpr("id AS ts")
    chart = kit.viz.stream_timeline(kit.stream(df, time="ts"), max_rows=20)
    assert len(chart_rows(chart)) == 20
    assert chart.to_dict()["title"]["text"] == "Event time vs arrival (first 20 arrivals)"
