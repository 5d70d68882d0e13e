"""kit.data: the documented tables (checked against the seeds and the golden inputs), generators."""

import csv
import datetime as dt
import decimal
from pathlib import Path

import pandas as pd
import pytest

import goldens
from kit import KitError, data

REPO = Path(__file__).resolve().parent.parent

TICKER = "struct<symbol:string,rowtime:timestamp,price:bigint,tax:bigint>"
NAV = "struct<symbol:string,rowtime:timestamp,price:bigint>"
CLICKS = "struct<user:string,url:string,cTime:timestamp>"

# name -> (rows, Spark schema)
EXPECTED = {
    "ticker": (11, TICKER),
    "ticker_aggregation": (12, TICKER),
    "ticker_greedy_reluctant": (6, TICKER),
    "ticker_within": (11, TICKER),
    "ticker_output_mode": (4, TICKER),
    "ticker_after_match": (7, TICKER),
    "ticker_navigation": (5, NAV),
    "ticker_navigation_abc": (3, NAV),
    "ticker_navigation_ac": (2, NAV),
    "clicks": (11, CLICKS),
    "clicks_groupby_figure": (4, CLICKS),
    "clicks_hourly_figure": (10, CLICKS),
    "currency_rates": (7, "struct<update_time:timestamp,currency:string,rate:decimal(10,4)>"),
    "orders": (9, "struct<order_time:timestamp,order_id:string,currency:string,amount:bigint>"),
    "words": (3, "struct<word:string>"),
    "shop_sales": (10, "struct<product_id:string,category:string,sales:bigint>"),
}


def _golden_input(file, part=None):
    """(column names or None, input rows) of a golden file; ``part`` picks rates/orders or a run."""
    golden = goldens.load(file)
    if part in ("rates", "orders"):
        return golden[f"{part}_columns"], golden[f"{part}_file_order"]
    if part is not None:  # the label of one run, with its own input
        run = next(r for r in golden["runs"] if r.get("label") == part)
        return golden["input_columns"], run["input"]
    return golden.get("input_columns"), golden["input"]


# (table, golden file, part): the table must equal that golden input row for row.
GOLDEN_CASES = [
    *[("ticker", f"mr_a_vshape_{m}.json", None) for m in ("batch", "streaming")],
    ("ticker", "mr_input_methods.json", None),
    *[("ticker_aggregation", f"mr_b_aggregation_{m}.json", None) for m in ("batch", "streaming")],
    *[("ticker_greedy_reluctant", f"mr_c_greedy_reluctant_{m}.json", None)
      for m in ("batch", "streaming")],
    *[("ticker_within", f"mr_d_within_{m}.json", None) for m in ("batch", "streaming")],
    *[("ticker_output_mode", f"mr_e_output_mode_{m}.json", None) for m in ("batch", "streaming")],
    *[("ticker_after_match", f"mr_f_after_match_{m}.json", None) for m in ("batch", "streaming")],
    ("clicks", "tumble_clicks.json", None),
    ("clicks", "groupby_changelog.json", "all 11 clicks"),
    ("clicks_groupby_figure", "groupby_changelog.json", "docs figure: first 4 clicks"),
    ("currency_rates", "temporal_join.json", "rates"),
    ("orders", "temporal_join.json", "orders"),
    ("words", "word_freq_changelog.json", None),
    ("shop_sales", "topn_changelog.json", None),
]


def _plain(value):
    """A loaded value the way the golden JSON writes it."""
    if isinstance(value, pd.Timestamp):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return text + (f".{value.microsecond // 1000:03d}" if value.microsecond else "")
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value.item() if hasattr(value, "item") else value


# ---------------------------------------------------------------------------- the tables


def test_registry_matches_the_files():
    assert data.names() == list(EXPECTED)
    assert data.DATA_DIR == REPO / "data"
    assert sorted(p.stem for p in data.DATA_DIR.glob("*.csv")) == sorted(EXPECTED)
    for name, table in data.TABLES.items():
        assert table.name == name and table.file == f"{name}.csv"
        assert table.description.startswith("Seed 00")


@pytest.mark.parametrize("name", list(EXPECTED))
def test_load_has_schema_rows_and_file_order(spark, name):
    rows, schema = EXPECTED[name]
    df = data.load(name)
    assert df.schema.simpleString() == schema
    got = df.toPandas()
    assert len(got) == rows
    pd.testing.assert_frame_equal(got, data.pandas(name))
    with open(data.DATA_DIR / f"{name}.csv", newline="") as f:
        assert list(got.columns) == next(csv.reader(f))


@pytest.mark.parametrize("name, file, part", GOLDEN_CASES)
def test_csv_equals_golden_input(spark, name, file, part):
    columns, rows = _golden_input(file, part)
    got = data.load(name).toPandas()
    assert columns is None or list(got.columns) == columns
    assert [[_plain(v) for v in row] for row in got.itertuples(index=False)] == rows


def test_pandas_types():
    orders = data.pandas("orders")
    assert orders.dtypes.astype(str).tolist() == ["datetime64[ns]", "object", "object", "int64"]
    rates = data.pandas("currency_rates")
    assert rates.rate.tolist()[:3] == [decimal.Decimal(x) for x in ("1.1000", "1.3000", "1.1200")]
    assert rates.update_time[3] == pd.Timestamp("2024-01-01 10:15:00")


def test_ticker_tables_match_the_seed():
    # Seed 001 prints '01-Apr-11 10:00:07' 14 2 (V-shape), '01-Apr-11 13:00:00' 1 2 (WITHIN).
    ticker = data.pandas("ticker")
    assert ticker.iloc[7].tolist() == ["ACME", pd.Timestamp("2011-04-01 10:00:07"), 14, 2]
    assert ticker.price.tolist() == [12, 17, 19, 21, 25, 18, 15, 14, 24, 25, 19]
    assert data.pandas("ticker_aggregation").price.tolist() == [
        12, 17, 13, 16, 25, 2, 4, 10, 15, 25, 25, 30]
    within = data.pandas("ticker_within")
    assert within.iloc[9].tolist() == ["ACME", pd.Timestamp("2011-04-01 13:00:00"), 1, 2]
    assert (within.rowtime.diff().dropna() == pd.Timedelta(minutes=20)).all()
    greedy = data.pandas("ticker_greedy_reluctant")  # printed as: symbol tax price rowtime
    assert greedy[["tax", "price"]].values.tolist() == [
        [1, 10], [2, 11], [1, 12], [2, 13], [1, 14], [2, 16]]
    assert greedy.rowtime.iloc[0] == pd.Timestamp("2018-09-17 10:00:02")
    assert data.pandas("ticker_output_mode").price.tolist() == [10, 12, 13, 11]
    after = data.pandas("ticker_after_match")
    assert after.price.tolist() == [7, 9, 10, 5, 10, 7, 14]
    assert after.tax.tolist() == [1, 2, 1, 2, 2, 2, 2]
    assert data.pandas("ticker_navigation").price.tolist() == [10, 15, 20, 31, 35]
    assert data.pandas("ticker_navigation_abc").price.tolist() == [10, 15, 20]
    assert data.pandas("ticker_navigation_ac").price.tolist() == [10, 20]


def test_clicks_match_the_seed():
    # Seed 003: [Mary, ./home], [Bob, ./cart], [Mary, ./prod?id=1], [Liz, ./home].
    figure = data.pandas("clicks_groupby_figure")
    assert figure[["user", "url"]].values.tolist() == [
        ["Mary", "./home"], ["Bob", "./cart"], ["Mary", "./prod?id=1"], ["Liz", "./home"]]
    clicks = data.pandas("clicks")
    pd.testing.assert_frame_equal(clicks.head(4), figure)
    assert set(clicks.user) == {"Mary", "Bob", "Liz"}
    assert clicks.cTime.min() == pd.Timestamp("2024-01-01 12:00:00")
    assert clicks.cTime.max() < pd.Timestamp("2024-01-01 15:00:00")
    # The hourly figure's text: 4 rows of 2 users in 12:00-12:59:59, 3 rows of 2 in the next hour.
    hourly = data.pandas("clicks_hourly_figure")
    per_hour = hourly.groupby(hourly.cTime.dt.hour).user.agg(["size", "nunique"])
    assert per_hour.loc[12].tolist() == [4, 2] and per_hour.loc[13].tolist() == [3, 2]
    assert len(hourly) == len(clicks) - 1
    assert "Liz" not in hourly.user[hourly.cTime.dt.hour == 12].values


def test_words_match_the_seed():
    assert data.pandas("words").word.tolist() == ["Hello", "World", "Hello"]


def test_unknown_name_lists_the_valid_names():
    with pytest.raises(KitError, match=r"unknown table 'tickr'; valid names: ticker, ") as e:
        data.pandas("tickr")
    assert all(name in str(e.value) for name in EXPECTED)
    with pytest.raises(KitError, match="valid names"):
        data.load("nope")


# ---------------------------------------------------------------------------- generators


def test_ticker_walk_first_rows_are_pinned(spark):
    got = data.ticker_walk(6, symbols=2).toPandas().sort_values(["symbol", "rowtime"])
    t = [pd.Timestamp("2024-01-01 00:00:00") + pd.Timedelta(seconds=i) for i in range(3)]
    assert got.values.tolist() == [
        ["S0", t[0], 165, 3], ["S0", t[1], 169, 2], ["S0", t[2], 172, 2],
        ["S1", t[0], 152, 2], ["S1", t[1], 155, 2], ["S1", t[2], 153, 3]]


def test_ticker_walk_shape_determinism_and_v_shapes(spark):
    walk = data.ticker_walk(3000, symbols=7, seed=3, start="2011-04-01 10:00:00", step_seconds=2,
                            partitions=1)
    assert walk.schema.simpleString() == TICKER
    one = walk.toPandas().sort_values(["symbol", "rowtime"], ignore_index=True)
    seven = (data.ticker_walk(3000, symbols=7, seed=3, start="2011-04-01 10:00:00",
                              step_seconds=2, partitions=7)
             .toPandas().sort_values(["symbol", "rowtime"], ignore_index=True))
    pd.testing.assert_frame_equal(one, seven)
    assert len(one) == 3000
    assert one.symbol.value_counts().sort_index().tolist() == [429] * 4 + [428] * 3
    assert sorted(one.symbol.unique()) == [f"S{i}" for i in range(7)]
    assert one.rowtime.min() == pd.Timestamp("2011-04-01 10:00:00")
    assert set(one.tax) == {1, 2, 3} and one.price.min() >= 1
    drops_then_rises = 0
    for _, g in one.groupby("symbol"):
        assert (g.rowtime.diff().dropna() == pd.Timedelta(seconds=2)).all()
        step = g.price.diff().dropna().to_numpy()
        assert set(step) <= set(range(-5, 6))
        drops_then_rises += int(((step[:-1] < 0) & (step[1:] > 0)).sum())
    # a drop followed by a rise: 5/11 * 5/11 of the ticks, about one in 5
    assert 3000 / 6 < drops_then_rises < 3000 / 4
    other = data.ticker_walk(3000, symbols=7, seed=4, start="2011-04-01 10:00:00",
                             step_seconds=2).toPandas()
    assert not other.sort_values(["symbol", "rowtime"], ignore_index=True).equals(one)


def test_ticker_walk_keeps_prices_positive(spark):
    low = data.ticker_walk(20_000, symbols=1, seed=0).toPandas()
    assert low.price.min() == 1  # the walk reaches the floor and is reflected
    assert set(low.sort_values("rowtime").price.diff().dropna()) == set(range(-5, 6))


def test_click_stream_first_rows_are_pinned(spark):
    got = data.click_stream(4, users=100).toPandas()
    ms = [1623, 2291, 1814, 1553]
    assert got.values.tolist() == [
        ["u71", "./prod?id=80", pd.Timestamp("2024-01-01") + pd.Timedelta(milliseconds=ms[0]), 0],
        ["u05", "./home", pd.Timestamp("2024-01-01") + pd.Timedelta(milliseconds=ms[1]), 1],
        ["u86", "./prod?id=1", pd.Timestamp("2024-01-01") + pd.Timedelta(milliseconds=ms[2]), 2],
        ["u72", "./checkout", pd.Timestamp("2024-01-01") + pd.Timedelta(milliseconds=ms[3]), 3]]


def test_click_stream_model(spark):
    n, disorder_ms, late_ms = 20_000, 5_000, 60_000
    args = dict(users=50, seed=0, start="2024-01-01 00:00:00", rate_per_second=1000,
                max_disorder_seconds=5, late_fraction=0.05, late_seconds=60)
    clicks = data.click_stream(n, partitions=1, **args)
    schema = "struct<user:string,url:string,cTime:timestamp,arrival:bigint>"
    assert clicks.schema.simpleString() == schema
    one = clicks.toPandas()
    seven = data.click_stream(n, partitions=7, **args).toPandas()
    pd.testing.assert_frame_equal(one, seven)  # same rows, already in arrival order
    assert one.arrival.tolist() == list(range(n))
    assert sorted(one.user.unique()) == [f"u{i:02d}" for i in range(50)]

    event = one.cTime.astype("int64") // 1_000_000
    clock = pd.Timestamp("2024-01-01").value // 1_000_000 + disorder_ms + one.arrival
    lag = clock - event
    built_late = lag >= disorder_ms + late_ms
    assert lag[~built_late].between(0, disorder_ms - 1).all()
    assert lag[built_late].between(disorder_ms + late_ms, 2 * disorder_ms + late_ms - 1).all()
    assert event[~built_late].min() >= pd.Timestamp("2024-01-01").value // 1_000_000
    assert int(built_late.sum()) == 962  # pinned for seed 0
    assert abs(built_late.mean() - 0.05) < 0.01

    # Behind a bounded-out-of-orderness watermark (delay 5 s) exactly when built late.
    watermark = event.cummax().shift(1) - disorder_ms - 1
    behind = event <= watermark
    assert behind.tolist() == built_late.tolist()


def test_click_stream_without_disorder_or_lateness_is_in_order(spark):
    got = data.click_stream(500, users=3, rate_per_second=10, max_disorder_seconds=0,
                            late_fraction=0).toPandas()
    expected = [dt.datetime(2024, 1, 1) + dt.timedelta(milliseconds=100 * a) for a in range(500)]
    assert got.cTime.tolist() == [pd.Timestamp(x) for x in expected]


@pytest.mark.parametrize("call, message", [
    (lambda: data.ticker_walk(-1), "rows must be an int >= 0, got -1"),
    (lambda: data.ticker_walk(10, symbols=0), "symbols must be an int >= 1, got 0"),
    (lambda: data.click_stream(10, late_fraction=1.5),
     r"late_fraction must be in \[0, 1\], got 1.5"),
    (lambda: data.click_stream(10, rate_per_second=0), "rate_per_second must be > 0, got 0"),
    (lambda: data.click_stream(10, partitions=0), "partitions must be None or an int >= 1, got 0"),
])
def test_generator_parameters_are_checked(call, message):
    with pytest.raises(KitError, match=message):
        call()
