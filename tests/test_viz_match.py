"""match_timeline: lanes per partition, rows coloured by classifier, matches as labelled bands."""

import pandas as pd

from kit.viz.match import UNMATCHED, match_timeline


def vshape(symbol="ACME", late_last=False):
    t = pd.date_range("2011-04-01 10:00:00", periods=11, freq="s")
    return pd.DataFrame({
        "symbol": symbol, "rowtime": t, "price": [12, 17, 19, 21, 25, 18, 15, 14, 24, 25, 19],
        "classifier": [None] * 4 + ["START_ROW"] + ["PRICE_DOWN"] * 3 + ["PRICE_UP", None, None],
        "match_number": [None] * 4 + [1] * 5 + [None, None],
        "late": [False] * 10 + [late_last]})


def datasets(chart):
    return list(chart.to_dict()["datasets"].values())


def test_one_band_per_match_labelled_with_its_number():
    chart = match_timeline(vshape(late_last=True), value="price", time="rowtime")
    rows, bands = sorted(datasets(chart), key=len, reverse=True)
    assert bands == [{"match_number": 1.0, "start": "2011-04-01T10:00:04.000Z", "end": "2011-04-01T10:00:08.000Z",
                      "top": 25, "label": "#1", "start (UTC)": "2011-04-01 10:00:04.000",
                      "end (UTC)": "2011-04-01 10:00:08.000"}]
    assert [r["variable"] for r in rows] == [UNMATCHED] * 4 + ["START_ROW"] + ["PRICE_DOWN"] * 3 + [
        "PRICE_UP", UNMATCHED, "late (dropped)"]
    color = chart.to_dict()["layer"][2]["encoding"]["color"]["scale"]
    assert color["domain"] == ["PRICE_DOWN", "PRICE_UP", "START_ROW", UNMATCHED, "late (dropped)"]
    assert chart.to_dict()["title"]["text"] == "1 match"


def test_a_lane_per_partition():
    df = pd.concat([vshape("ACME"), vshape("XYZ").assign(match_number=float("nan"), classifier=None)])
    chart = match_timeline(df, value="price", time="rowtime", partition="symbol").to_dict()
    assert [lane["title"] for lane in chart["vconcat"]] == ["symbol = ACME", "symbol = XYZ"]
    assert chart["title"]["text"] == "1 match"
