"""version_timeline: version segments, links to the version joined, emission marks at the
watermark that emitted each row, late arrivals, state cleanups, the legend, bounded data."""

import json
from pathlib import Path

import pandas as pd
import pytest

import kit
from kit import Duration, WatermarkStrategy
from kit.errors import KitError
from kit.joins.versioned import temporal_join
from kit.viz.joins import CLEANED, DEDUPLICATED, EMITTED, EXPIRED_RIGHT, JOINED, KEPT, LATE, LINK, PADDED, VERSION
from kit.viz.marks import HOURGLASS, RING, X

GOLDEN = json.loads((Path(__file__).parents[2] / "shared/golden/flink-2.3/temporal_join.json").read_text())
SQL0 = WatermarkStrategy.for_sql_delay(Duration(0))
END = "2024-01-01T12:12:06.000Z"       # the right edge: 12:00 + 2 * (12:00 - 09:59) / 20


def _iso(hhmm):
    return f"2024-01-01T{hhmm}:00.000Z"


@pytest.fixture(scope="module")
def golden(spark):
    """The golden's orders and rates, with the rates' watermark delay 60 min (covers their
    disorder) and 0 (three late versions); the charts of both (LEFT joins)."""
    rates = pd.DataFrame(GOLDEN["rates_file_order"], columns=GOLDEN["rates_columns"])
    rates["update_time"] = pd.to_datetime(rates.update_time)
    rates["rate"] = rates.rate.astype(float)
    orders = pd.DataFrame(GOLDEN["orders_file_order"], columns=GOLDEN["orders_columns"])
    orders["order_time"] = pd.to_datetime(orders.order_time)
    o = kit.stream(orders, time="order_time", watermark=SQL0)
    joins = {}
    for delay in (60, 0):
        r = kit.stream(rates, time="update_time", primary_key="currency",
                       watermark=WatermarkStrategy.for_sql_delay(Duration.of_minutes(delay)))
        joins[delay] = temporal_join(o, r, on="currency", how="left")
    return {"orders": o, "joins": joins, "charts": {d: kit.viz.version_timeline(j) for d, j in joins.items()}}


def _layers(chart):
    """{layer name: layer} of the top panel (altair suffixes names with ``_0`` in a vconcat)."""
    top = chart.vconcat[0] if hasattr(chart, "vconcat") else chart
    return {layer.name.rsplit("_", 1)[0] if layer.name[-2:] == "_0" else layer.name: layer for layer in top.layer}


def _emits(chart):
    lefts = _layers(chart)["left rows"].data
    ids = [row.split("order_id=")[1].split(",")[0] for row in lefts["row"]]
    return dict(zip(ids, zip(lefts["emit"], lefts["emitted"])))


def test_one_segment_per_version_to_the_next_and_links_to_the_version_joined(golden):
    layers = _layers(golden["charts"][60])
    versions = layers["versions"]
    assert versions.mark.type == "rule"
    enc = versions.to_dict()["encoding"]
    assert (enc["x"]["field"], enc["x2"]["field"], enc["y"]["field"]) == ("start", "end", "lane")
    # the file order has EUR 10:30 before 10:15: segments follow event time, not arrival
    assert versions.data[["lane", "start", "end", "until"]].values.tolist() == [
        ["EUR", _iso("10:00"), _iso("10:15"), "2024-01-01 10:15:00.000"],
        ["EUR", _iso("10:15"), _iso("10:30"), "2024-01-01 10:30:00.000"],
        ["EUR", _iso("10:30"), _iso("11:30"), "2024-01-01 11:30:00.000"],
        ["EUR", _iso("11:30"), END, "open (the last version)"],
        ["GBP", _iso("10:00"), _iso("10:45"), "2024-01-01 10:45:00.000"],
        ["GBP", _iso("10:45"), _iso("11:00"), "2024-01-01 11:00:00.000"],
        ["GBP", _iso("11:00"), END, "open (the last version)"]]
    # consecutive versions of a key alternate between two sub-rows, so each end shows
    assert versions.data["slot"].tolist() == ["v0", "v1", "v0", "v1", "v0", "v1", "v0"]
    assert list(versions.data["row"])[0] == "update_time=2024-01-01 10:00:00.000, currency=EUR, rate=1.1"
    links = layers["links"]
    assert (links.to_dict()["encoding"]["x"]["field"], links.to_dict()["encoding"]["x2"]["field"]) == (
        "version_time", "time")
    lefts = links.data
    ids = [row.split("order_id=")[1].split(",")[0] for row in lefts["row"]]
    # which version each order joined (rates delay 60: the golden's first run)
    assert dict(zip(ids, zip(lefts["version_time"], lefts["mark"]))) == {
        "o1": (None, PADDED), "o2": (_iso("10:00"), JOINED), "o3": (_iso("10:15"), JOINED),
        "o4": (_iso("10:00"), JOINED), "o5": (_iso("10:45"), JOINED), "o6": (_iso("11:00"), JOINED),
        "o7": (_iso("10:30"), JOINED), "o8": (_iso("11:30"), JOINED), "o9": (None, PADDED)}
    assert "rate=1.11" in lefts["version"][ids.index("o3")]
    # the link layer draws only the rows that met a version
    assert links.to_dict()["transform"][0] == {"filter": "datum.version_time != null"}


def test_emission_marks_sit_at_the_watermark_that_emitted_each_row(golden):
    slow, fast = _emits(golden["charts"][60]), _emits(golden["charts"][0])
    # rates 60 min behind hold the operator watermark back: most rows leave at the end of input
    assert slow == {
        "o1": (_iso("10:00"), "2024-01-01 10:00:00.000"), "o2": (_iso("10:00"), "2024-01-01 10:00:00.000"),
        "o3": (_iso("10:30"), "2024-01-01 10:30:00.000"), "o4": (_iso("10:30"), "2024-01-01 10:30:00.000"),
        **{o: (END, "end of input") for o in ("o5", "o6", "o7", "o8", "o9")}}
    # with no delay each row leaves as soon as both inputs pass its time
    assert fast == {
        "o1": (_iso("09:59"), "2024-01-01 09:59:00.000"), "o2": (_iso("10:00"), "2024-01-01 10:00:00.000"),
        "o3": (_iso("10:20"), "2024-01-01 10:20:00.000"), "o4": (_iso("10:30"), "2024-01-01 10:30:00.000"),
        "o5": (_iso("10:50"), "2024-01-01 10:50:00.000"), "o6": (_iso("11:00"), "2024-01-01 11:00:00.000"),
        "o7": (_iso("11:10"), "2024-01-01 11:10:00.000"),
        "o8": (END, "end of input"), "o9": (END, "end of input")}
    emissions = _layers(golden["charts"][0])["emissions"].to_dict()
    assert emissions["encoding"]["x"]["field"] == "emit"
    assert {"calculate": f'"{EMITTED}"', "as": "mark"} in emissions["transform"]
    # the dashed connector runs from the row's time to its emission
    waits = _layers(golden["charts"][0])["waits"].to_dict()["encoding"]
    assert (waits["x"]["field"], waits["x2"]["field"]) == ("time", "emit")
    # the x scale ends at the right edge, where end-of-input marks sit
    assert _layers(golden["charts"][0])["versions"].to_dict()["encoding"]["x"]["scale"]["domain"][1] == END


def test_cleanups_late_versions_and_the_legend(golden):
    late = _layers(golden["charts"][0])
    # rates delay 0: 10:15 EUR, 10:00 GBP (behind the 10:30 EUR rate) and 10:45 GBP arrive late
    versions = late["versions"].data
    assert versions.loc[versions["late"], ["lane", "start"]].values.tolist() == [
        ["EUR", _iso("10:15")], ["GBP", _iso("10:00")], ["GBP", _iso("10:45")]]
    assert late["late versions"].to_dict()["transform"][0] == {"filter": "datum.late"}
    assert not late["late left rows"].data["late"].any()
    # cleanups: an X at the watermark that dropped each version, on the version's sub-row
    assert late["cleanups"].data[["lane", "at", "slot", "when"]].values.tolist() == [
        ["EUR", _iso("10:30"), "v0", "2024-01-01 10:30:00.000"],
        ["EUR", _iso("10:30"), "v1", "2024-01-01 10:30:00.000"],
        ["EUR", END, "v0", "end of input"],
        ["GBP", _iso("11:00"), "v0", "2024-01-01 11:00:00.000"],
        ["GBP", _iso("11:00"), "v1", "2024-01-01 11:00:00.000"]]
    assert set(late["cleanups"].data["mark"]) == {CLEANED}
    chart = golden["charts"][0].to_dict()
    spec = chart["vconcat"][0]
    stroke = spec["layer"][0]["encoding"]["stroke"]
    assert stroke["scale"]["domain"] == [VERSION, JOINED, PADDED, LINK, EMITTED, LATE, CLEANED, KEPT]
    shapes = next(layer["encoding"]["shape"] for layer in spec["layer"] if layer.get("name", "").startswith("cleanups"))
    assert shapes["scale"]["range"][shapes["scale"]["domain"].index(CLEANED)] == X
    # a late arrival is a red ring around the row, in the chart and in the legend
    assert shapes["scale"]["range"][shapes["scale"]["domain"].index(LATE)] == RING
    assert chart["title"]["text"] == "Temporal join (LEFT) on currency: versions and left rows"
    assert chart["title"]["subtitle"] == ["7 versions, 9 left rows, 3 late arrivals"]
    # delay 60 covers the disorder: nothing late, so no late entry in the legend
    on_time = golden["charts"][60].to_dict()["vconcat"][0]["layer"][0]["encoding"]["stroke"]["scale"]["domain"]
    assert LATE not in on_time and CLEANED in on_time


def test_watermark_panel_over_merged_arrival_order(golden):
    panel = golden["charts"][0].vconcat[1]
    steps, dots = panel.layer
    assert steps.mark.interpolate == "step-after"
    data = panel.data
    assert data["pos"].tolist() == list(range(16))
    assert data.loc[data["late"], "pos"].tolist() == [2, 6, 10]
    assert set(data.loc[data["late"], "arrival"]) == {"late arrival (at or below its input's watermark)"}
    assert dots.to_dict()["encoding"]["size"]["condition"] == {"test": "datum.late", "value": 150}
    # the operator watermark: both inputs' minimum, NULL until the right input has one
    assert data["watermark"].tolist()[:4] == [None, _iso("09:59"), _iso("09:59"), _iso("10:00")]
    compiled = kit.viz.render.to_vega(golden["charts"][0].to_dict())      # vl-convert compiles it
    assert "/schema/vega/v" in compiled["$schema"] and compiled["marks"]


def test_key_selects_lanes_and_inner_drops_rows_without_version(golden):
    o, r = golden["joins"][0].left, golden["joins"][0].right
    inner = kit.viz.version_timeline(temporal_join(o, r, on="currency"), key=["USD", "GBP"],
                                     watermark_panel=False)
    layers = _layers(inner)
    assert sorted(set(layers["left rows"].data["lane"])) == ["GBP", "USD"]
    assert set(layers["versions"].data["lane"]) == {"GBP"}
    usd = layers["left rows"].data.set_index("lane").loc["USD"]
    assert (usd["mark"], usd["emit"], usd["emitted"]) == (
        "left row dropped (no version)", None, "never (INNER: no version)")


def test_wrong_arguments_say_what_is_wanted(golden):
    with pytest.raises(KitError, match="draws a temporal join .* got DataStream"):
        kit.viz.version_timeline(golden["orders"])
    with pytest.raises(KitError, match="give one key value"):
        kit.viz.version_timeline(golden["joins"][0], key=("EUR", "GBP"))
    with pytest.raises(KitError, match="max_rows must be a positive int"):
        kit.viz.version_timeline(golden["joins"][0], max_rows=0)
    with pytest.raises(KitError, match="no arrival has key 'CHF'"):
        kit.viz.version_timeline(golden["joins"][0], key="CHF")
    with pytest.raises(KitError, match="more than 5 arrivals of these keys: draw some keys"):
        kit.viz.version_timeline(golden["joins"][0], key="EUR", max_rows=5)


def test_expired_state_and_deletions_without_spark():
    """The fates' shaping on its own: a TTL expiry is drawn at the operator watermark then
    (its ``at`` is processing time), a deletion version is its own mark, an expired left row
    is never emitted, a row that met a deletion is NULL-padded (LEFT)."""
    from pyspark.sql import Row

    from kit.viz.joins import DELETION, EXPIRED_LEFT, EXPIRED_RIGHT, _shape

    def fate(side, seq, fate, at, at_pos, row, version=None):
        return Row(side=side, seq=seq, fate=fate, at=at, at_pos=at_pos, version_seq=None, version_time=None,
                   left=row if side == "left" else None, right=version if side == "left" else row, lane="a")

    rows = [fate("right", 0, "expired", 5000, 3, Row(k="a", t=10, op="+I")),
            fate("right", 1, "kept", None, None, Row(k="a", t=20, op="-D")),
            fate("left", 0, "expired", 5000, 3, Row(k="a", t=30)),
            fate("left", 1, "deleted", None, 4, Row(k="a", t=25), Row(k="a", t=20, op="-D"))]
    arrivals = pd.DataFrame({"pos": [0, 1, 2, 3], "side": ["right", "right", "left", "left"], "seq": [0, 1, 0, 1],
                             "ts": [10, 20, 30, 25], "late": [False, False, False, True], "W": [None, None, 22, 24]})
    versions, lefts, cleanups, (start, edge) = _shape(rows, arrivals, "left", False)
    assert (start, edge) == (9, 32)       # the processing time 5000 stays off the event-time axis
    assert cleanups[["at", "mark", "when"]].values.tolist() == [
        [24, EXPIRED_RIGHT, "24 (state TTL at processing time 5000)"]]
    assert versions[["start", "end", "mark"]].values.tolist() == [[10, 20, VERSION], [20, 32, DELETION]]
    assert lefts[["time", "mark", "emitted", "late"]].values.tolist() == [
        [25, PADDED, "end of input", True], [30, EXPIRED_LEFT, "never (state expired)", False]]


def test_a_processing_time_join_is_drawn_on_the_arrivals_processing_time(spark):
    from datetime import datetime

    from kit import Clock

    at = pd.to_datetime
    o = kit.stream(pd.DataFrame({"t": at(["2024-01-01"] * 3), "id": ["a", "b", "c"], "cur": ["EUR"] * 3}),
                   time="t", proctime=Clock(datetime(2024, 1, 1, 10), Duration.of_minutes(1)))
    r = kit.stream(pd.DataFrame({"t": at(["2024-01-01"] * 2), "cur": ["EUR"] * 2, "rate": [1.0, 2.0]}),
                   time="t", primary_key="cur", proctime=Clock(datetime(2024, 1, 1, 10), Duration.of_minutes(1)))
    # arrivals by processing time: rate 1.0, order a, rate 2.0, order b, order c (right first on ties)
    chart = kit.viz.version_timeline(temporal_join(o, r, on="cur", how="left", time="processing",
                                                   interleave="proctime"))
    assert not hasattr(chart, "vconcat")                   # no watermark panel: nothing waits for one
    layers = _layers(chart)
    assert layers["versions"].data[["start", "end"]].values.tolist() == [
        ["2024-01-01T10:00:00.000Z", "2024-01-01T10:01:00.000Z"],
        ["2024-01-01T10:01:00.000Z", "2024-01-01T10:02:12.000Z"]]
    lefts = layers["links"].data
    assert lefts[["time", "version_time", "emit", "emitted"]].values.tolist() == [
        ["2024-01-01T10:00:00.000Z", "2024-01-01T10:00:00.000Z", None, "at its arrival"],
        ["2024-01-01T10:01:00.000Z", "2024-01-01T10:01:00.000Z", None, "at its arrival"],
        ["2024-01-01T10:02:00.000Z", "2024-01-01T10:01:00.000Z", None, "at its arrival"]]
    spec = chart.to_dict()
    assert spec["layer"][0]["encoding"]["x"]["title"] == "processing time (arrival)"
    assert "Processing-time temporal join" in str(spec["title"])


def test_rows_a_deduplicated_view_dropped_are_crosses_not_versions(golden):
    o, r = golden["joins"][60].left, golden["joins"][60].right
    chart = kit.viz.version_timeline(temporal_join(o, r, on="currency", how="left", deduplicate="last"),
                                     watermark_panel=False)
    layers = _layers(chart)
    assert layers["versions"].data[["lane", "start"]].values.tolist() == [
        ["EUR", _iso("10:00")], ["EUR", _iso("10:30")], ["EUR", _iso("11:30")],
        ["GBP", _iso("10:00")], ["GBP", _iso("11:00")]]
    dropped = layers["cleanups"].data
    assert dropped.loc[dropped["mark"] == DEDUPLICATED, ["lane", "at"]].values.tolist() == [
        ["EUR", _iso("10:15")], ["GBP", _iso("10:45")]]


def test_state_cleanup_and_ttl_expiry_are_distinct_marks(golden):
    """A version the watermark dropped is a grey ×, one state TTL expired a brown hourglass:
    each its own legend entry."""
    from datetime import datetime

    from kit import Clock

    o, r = golden["joins"][0].left, golden["joins"][0].right
    join = temporal_join(o, r, on="currency", how="left", engine="replay",
                         clock=Clock(datetime(2024, 1, 1, 10), Duration.of_minutes(10)),
                         state_ttl=Duration.of_minutes(20))
    chart = kit.viz.version_timeline(join, watermark_panel=False)
    cleanups = _layers(chart)["cleanups"]
    assert {CLEANED, EXPIRED_RIGHT} <= set(cleanups.data["mark"])
    enc = cleanups.to_dict()["encoding"]
    domain = enc["shape"]["scale"]["domain"]
    mark = {label: (enc["shape"]["scale"]["range"][i], enc["stroke"]["scale"]["range"][i],
                    enc["fill"]["scale"]["range"][i]) for i, label in enumerate(domain)}
    assert mark[CLEANED] == (X, "#555555", "transparent")
    assert mark[EXPIRED_RIGHT] == (HOURGLASS, "#8c564b", "#8c564b")
    assert chart.to_dict()["title"]["subtitle"] == ["7 versions, 9 left rows, 3 late arrivals, state TTL 20 min"]


def test_the_title_can_be_given(golden):
    chart = kit.viz.version_timeline(golden["joins"][0], title="rates delay 0 min", watermark_panel=False)
    assert chart.to_dict()["title"]["text"] == "rates delay 0 min"
    with pytest.raises(KitError, match="title must be a str"):
        kit.viz.version_timeline(golden["joins"][0], title=0)
