"""match_timeline: lanes per partition, rows coloured by classifier, matches as labelled bands,
a legend of what is there, a time axis of real dates."""

import pandas as pd
import pytest

import kit
from kit.errors import KitError
from kit.viz.marks import BAR, LATE_COLOR, RING_X
from kit.viz.match import BAND, LATE, UNMATCHED, _time_format, match_timeline


def vshape(symbol="ACME", late_last=False):
    t = pd.date_range("2011-04-01 10:00:00", periods=11, freq="s")
    return pd.DataFrame({
        "symbol": symbol, "rowtime": t, "price": [12, 17, 19, 21, 25, 18, 15, 14, 24, 25, 19],
        "classifier": [None] * 4 + ["START_ROW"] + ["PRICE_DOWN"] * 3 + ["PRICE_UP", None, None],
        "match_number": [None] * 4 + [1] * 5 + [None, None],
        "late": [False] * 10 + [late_last]})


def datasets(chart):
    return list(chart.to_dict()["datasets"].values())


def scales(spec, channel):
    """The ``channel`` scale of the points layer."""
    return spec["layer"][2]["encoding"][channel]["scale"]


def test_one_band_per_match_labelled_with_its_number():
    chart = match_timeline(vshape(late_last=True), value="price", time="rowtime")
    rows, bands = sorted(datasets(chart), key=len, reverse=True)
    assert bands == [{"match_number": 1.0, "start": "2011-04-01T10:00:04.000Z", "end": "2011-04-01T10:00:08.000Z",
                      "top": 25, "label": "#1", "variable": BAND, "start (UTC)": "2011-04-01 10:00:04.000",
                      "end (UTC)": "2011-04-01 10:00:08.000"}]
    assert [r["variable"] for r in rows] == [UNMATCHED] * 4 + ["START_ROW"] + ["PRICE_DOWN"] * 3 + [
        "PRICE_UP", UNMATCHED, LATE]
    spec = chart.to_dict()
    assert scales(spec, "fill")["domain"] == ["PRICE_DOWN", "PRICE_UP", "START_ROW", UNMATCHED, LATE, BAND]
    # the late row is drawn as its legend entry says: a red × in a red ring; the band as a bar
    shapes = scales(spec, "shape")
    assert shapes["range"][4] == RING_X and scales(spec, "fill")["range"][4] == LATE_COLOR
    assert shapes["range"][5] == BAR
    assert spec["title"]["text"] == "1 match"
    assert spec["title"]["subtitle"] == ["11 rows, 1 late (dropped before matching)"]


def test_the_legend_lists_only_what_is_there():
    spec = match_timeline(vshape(), value="price", time="rowtime").to_dict()
    assert scales(spec, "fill")["domain"] == ["PRICE_DOWN", "PRICE_UP", "START_ROW", UNMATCHED, BAND]
    nothing = vshape().assign(classifier=None, match_number=float("nan"))
    spec = match_timeline(nothing, value="price", time="rowtime").to_dict()
    assert scales(spec, "fill")["domain"] == [UNMATCHED]
    assert spec["title"]["text"] == "0 matches"


def test_a_lane_per_partition():
    df = pd.concat([vshape("ACME"), vshape("XYZ").assign(match_number=float("nan"), classifier=None)])
    chart = match_timeline(df, value="price", time="rowtime", partition="symbol").to_dict()
    assert [lane["title"] for lane in chart["vconcat"]] == ["symbol = ACME", "symbol = XYZ"]
    assert chart["title"]["text"] == "1 match"
    assert chart["title"]["subtitle"] == ["22 rows in 2 partitions"]


def test_the_ticker_is_drawn_on_a_utc_time_axis(spark):
    """The seed's Ticker (TIMESTAMP rowtime) from kit.sql: real times on the axis, not numbers."""
    result = kit.sql("""SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime
        MEASURES FIRST(rowtime) AS s ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A+ C) DEFINE A AS SUM(A.price) < 30)""", Ticker=kit.data.load("ticker"))
    spec = match_timeline(result.match_details, value="price", time="rowtime", partition="symbol").to_dict()
    x = spec["vconcat"][0]["layer"][1]["encoding"]["x"]
    assert (x["type"], x["scale"], x["axis"]["format"], x["title"]) == ("temporal", {"type": "utc"}, "%H:%M:%S",
                                                                       "rowtime (UTC)")
    (rows,) = [d for d in spec["datasets"].values() if len(d) == 11]
    assert [r["rowtime"] for r in rows][:2] == ["2011-04-01T10:00:00.000Z", "2011-04-01T10:00:01.000Z"]


def test_the_axis_labels_fit_the_span():
    times = pd.Series(pd.to_datetime(["2000-01-01", "2010-03-01"]))
    assert _time_format(times) == "%Y"                                      # monthly prices, ten years
    assert _time_format(pd.Series(pd.to_datetime(["2024-01-01", "2024-03-01"]))) == "%b %d"
    assert _time_format(pd.Series(pd.to_datetime(["2024-01-01 12:00", "2024-01-01 14:30"]))) == "%H:%M"
    assert _time_format(pd.Series(pd.to_datetime(["2024-01-01 12:00:00", "2024-01-01 12:00:05"]))) == "%H:%M:%S"
    # monthly dates draw as dates on a UTC axis
    monthly = vshape().assign(rowtime=pd.date_range("2000-01-01", periods=11, freq="MS"))
    x = match_timeline(monthly, value="price", time="rowtime").to_dict()["layer"][1]["encoding"]["x"]
    assert (x["type"], x["axis"]["format"]) == ("temporal", "%b %Y")


def test_misspelled_columns_are_named(spark):
    details = vshape()
    with pytest.raises(KitError) as error:
        match_timeline(details, value="prize", time="rowtime")
    assert str(error.value) == (
        "match_timeline: value='prize' is not a column of the details (did you mean 'price'?); its columns are: "
        "symbol, rowtime, price, classifier, match_number, late")
    with pytest.raises(KitError, match="time='row_time' is not a column of the details .did you mean 'rowtime'"):
        match_timeline(details, value="price", time="row_time")
    with pytest.raises(KitError, match="partition='sym' is not a column"):
        match_timeline(spark.createDataFrame(details), value="price", time="rowtime", partition="sym")
    with pytest.raises(KitError, match="the details have no column 'classifier'"):
        match_timeline(details.drop(columns="classifier"), value="price", time="rowtime")
    with pytest.raises(KitError, match="draws MATCH_RECOGNIZE details .* got list"):
        match_timeline([1, 2], value="price", time="rowtime")


def test_the_title_can_be_given():
    spec = match_timeline(vshape(), value="price", time="rowtime", title="PATTERN (A+ C): 1 match").to_dict()
    assert spec["title"]["text"] == "PATTERN (A+ C): 1 match"
    assert spec["title"]["subtitle"] == ["11 rows"]
