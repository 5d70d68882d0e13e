"""stream_timeline draws every arrival, the watermark staircase and the late rows; its legend
lists the marks drawn; a misspelled column is named with the columns there are."""

import pytest

import kit
from kit import Duration
from kit.errors import KitError
from kit.viz.marks import DASHED, LATE_COLOR, RING_X


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
    assert [(r["seq"], r["ts"], r["watermark"], r["mark"]) for r in rows] == [
        (0, 10, None, "on time"), (1, 30, 4, "on time"), (2, 12, 24, "late row"), (3, 31, 24, "on time")]
    staircase, points, late = layers(chart)
    assert staircase["mark"]["interpolate"] == "step-after" and staircase["mark"]["strokeDash"] == [4, 3]
    assert staircase["encoding"]["order"] == {"field": "seq", "type": "quantitative"}
    assert points["transform"] == [{"filter": "!datum.late"}]
    assert points["encoding"]["color"]["field"] == "k"
    assert late["transform"] == [{"filter": "datum.late"}]
    # the legend: the dashed staircase and the late row as drawn, a red × in a red ring
    for channel, values in (("shape", [DASHED, RING_X]), ("stroke", ["#555555", LATE_COLOR]),
                            ("fill", ["transparent", LATE_COLOR])):
        assert late["encoding"][channel]["scale"] == {"domain": ["watermark", "late row"], "range": values}
    assert staircase["encoding"]["stroke"]["scale"]["domain"] == ["watermark", "late row"]
    title = chart.to_dict()["title"]
    assert title["text"] == "Event time vs arrival"
    assert title["subtitle"] == ["WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(5)); 1 late row"]


def test_the_legend_lists_only_what_is_there(spark):
    df = spark.createDataFrame([("a", 10), ("b", 30), ("a", 32)], "k string, ts long")
    in_order = layers(kit.viz.stream_timeline(kit.stream(df, time="ts"), key="k"))
    assert in_order[2]["encoding"]["shape"]["scale"]["domain"] == ["watermark"]       # no late row
    one = spark.createDataFrame([("a", 10)], "k string, ts long")
    alone = layers(kit.viz.stream_timeline(kit.stream(one, time="ts")))
    assert "legend" not in alone[2]["encoding"]["shape"] or alone[2]["encoding"]["shape"]["legend"] is None


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
    title = chart.to_dict()["title"]
    assert title["text"] == "Event time vs arrival"
    assert title["subtitle"][0].startswith("the first 20 of 50 arrivals; ")


def test_a_misspelled_column_is_named_with_the_columns_there_are(spark):
    stream = kit.stream(kit.data.load("clicks"), time="cTime")
    with pytest.raises(KitError) as error:
        kit.viz.stream_timeline(stream, key="usr")
    assert str(error.value) == (
        "stream_timeline: key='usr' is not a column of the stream (did you mean 'user'?); "
        "its columns are: user, url, cTime, seq, watermark, late")
    with pytest.raises(KitError, match=r"key must be a column name \(a str\); got \['user'\]"):
        kit.viz.stream_timeline(stream, key=["user"])
    with pytest.raises(KitError, match="draws a kit.Stream .* got DataFrame"):
        kit.viz.stream_timeline(stream.source, key="user")
    with pytest.raises(KitError, match="max_rows must be a positive int; got 0"):
        kit.viz.stream_timeline(stream, max_rows=0)


def test_the_title_can_be_given(spark):
    stream = kit.stream(kit.data.load("clicks"), time="cTime", watermark=Duration.of_minutes(3))
    title = kit.viz.stream_timeline(stream, key="user", title="delay 3 min").to_dict()["title"]
    assert title["text"] == "delay 3 min"
    assert title["subtitle"] == ["WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_minutes(3)); "
                                 "0 late rows"]
    with pytest.raises(KitError, match="title must be a str"):
        kit.viz.stream_timeline(stream, title=("a", "b"))
