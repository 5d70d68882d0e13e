"""changelog_timeline and table_history: lanes per key, the row kinds' marks and legend, a
cascade as panels on one axis of arrivals, one collect; the tables as of an arrival equal
DynamicTable.snapshot(at=k) with no Spark job per arrival."""

import pandas as pd
import pytest

import kit
from kit.errors import KitError

from test_viz_jobs import jobs  # noqa: F401  (the fixture)

T0 = pd.Timestamp("2024-01-01 12:00:00")
CASCADE = "SELECT cnt, COUNT(cnt) AS freq FROM (SELECT word, COUNT(*) AS cnt FROM words GROUP BY word) GROUP BY cnt"


def clicks():
    return kit.stream(kit.data.load("clicks"), time="cTime")


def words(*ws):
    return kit.stream(pd.DataFrame({"word": ws, "t": [T0 + pd.Timedelta(seconds=i) for i in range(len(ws))]}),
                      time="t")


def _points(chart, i=0):
    """The data of panel ``i``'s changes (altair moves data its layers share up, as far as
    the whole chart)."""
    panel = chart.vconcat[i]
    (points,) = [layer for layer in panel.layer if layer.mark.type == "point"]
    return next(d for d in (points.data, panel.data, chart.data) if isinstance(d, pd.DataFrame))


def _cells(table):
    """The texts of a table drawn by table_history's chart."""
    text = table.layer[-1]
    return text.data if isinstance(text.data, pd.DataFrame) else table.data


def test_one_lane_per_key_each_change_at_its_arrival(spark):
    counts = kit.sql("SELECT user, COUNT(url) AS cnt FROM clicks GROUP BY user", clicks=clicks())
    chart = kit.viz.changelog_timeline(counts)
    data = _points(chart)
    assert data[["seq", "op", "lane", "label"]].values.tolist()[:6] == [
        [0, "+I", "Mary", "1"], [1, "+I", "Bob", "1"], [2, "-U", "Mary", "1"], [2, "+U", "Mary", "2"],
        [3, "+I", "Liz", "1"], [4, "-U", "Mary", "2"]]
    assert data["row"].iloc[3] == "user=Mary, cnt=2"
    # a -U/+U pair side by side around its arrival, a lone +I on it
    assert data["x"].iloc[2] < 2 < data["x"].iloc[3] and data["x"].iloc[0] == 0
    spec = chart.to_dict()
    encoding = spec["vconcat"][0]["layer"][0]["encoding"]
    assert encoding["y"]["sort"] == ["Mary", "Bob", "Liz"] and encoding["y"]["title"] == "user"
    # the legend lists the kinds present only, each with its symbol
    assert encoding["shape"]["scale"]["domain"] == ["+I insert", "-U update before (retracted)", "+U update after"]
    assert [t["field"] for t in encoding["tooltip"]] == ["seq", "op", "row"]
    assert spec["title"]["text"] == "Changelog per key over arrival order"
    assert spec["title"]["subtitle"] == ["19 changes: 3 +I, 8 -U, 8 +U"]


def test_a_cascade_is_stacked_so_a_retraction_travels_down(spark):
    outer = kit.sql(CASCADE, words=words("Hello", "World", "Hello"))
    chart = kit.viz.changelog_timeline(outer)
    inner_panel, outer_panel = chart.vconcat
    assert inner_panel.title.text == "1. GroupAggregate(groupBy=[word], select=[word, COUNT(*) AS cnt])"
    assert outer_panel.title.text.startswith("2. GroupAggregate(groupBy=[cnt]")
    inner, result = _points(chart, 0), _points(chart, 1)
    assert inner[["seq", "op", "lane", "label"]].values.tolist() == [
        [0, "+I", "Hello", "1"], [1, "+I", "World", "1"], [2, "-U", "Hello", "1"], [2, "+U", "Hello", "2"]]
    # the same arrival retracts Hello's count 1 above and the frequency of count 1 below
    assert result[["seq", "op", "lane", "label"]].values.tolist() == [
        [0, "+I", "1", "1"], [1, "-U", "1", "1"], [1, "+U", "1", "2"], [2, "-U", "1", "2"], [2, "+U", "1", "1"],
        [2, "+I", "2", "1"]]
    spec = chart.to_dict()
    assert spec["resolve"]["scale"]["x"] == "shared"
    shaded = [layer for layer in spec["vconcat"][1]["layer"] if layer["mark"]["type"] == "rect"]
    assert len(shaded) == 1 and "retracted a row" in spec["title"]["subtitle"][0]
    # a list of results gives the same panels, titled by their queries
    inner_t = kit.sql("SELECT word, COUNT(*) AS cnt FROM words GROUP BY word", words=words("Hello", "World", "Hello"))
    given = kit.viz.changelog_timeline([inner_t, outer])
    first, second = [p.title.text for p in given.vconcat]
    assert first == "1. SELECT word, COUNT(*) AS cnt FROM words GROUP BY word"
    assert len(second) == 2 and " ".join(second) == "2. " + CASCADE, "the whole query, on lines"
    assert _points(given, 1)[["seq", "op"]].values.tolist() == result[["seq", "op"]].values.tolist()


def test_deletes_and_rows_without_a_key(spark):
    # Top-N without the row number has no upsert key: a lane per row; a row pushed out is -D
    shop = kit.stream(pd.DataFrame({"p": ["p1", "p2", "p3"], "sales": [10, 20, 30],
                                    "t": [T0 + pd.Timedelta(seconds=i) for i in range(3)]}), time="t")
    top = kit.sql("SELECT p, sales FROM (SELECT *, ROW_NUMBER() OVER (ORDER BY sales DESC) AS rn FROM shop) "
                  "WHERE rn <= 2", shop=shop)
    chart = kit.viz.changelog_timeline(top)
    data = _points(chart)
    assert data[["seq", "op", "lane", "label"]].values.tolist() == [
        [0, "+I", "p1 / 10", ""], [1, "+I", "p2 / 20", ""], [2, "-D", "p1 / 10", ""], [2, "+I", "p3 / 30", ""]]
    encoding = chart.to_dict()["vconcat"][0]["layer"][0]["encoding"]
    assert encoding["y"]["title"] == "row" and "-D delete" in encoding["shape"]["scale"]["domain"]
    assert "1 arrival changed nothing (no mark)" not in chart.to_dict()["title"]["subtitle"][0]
    silent = kit.stream(pd.DataFrame({"p": ["p1", "p2", "p3", "p4"], "sales": [10, 20, 5, 30],
                                      "t": [T0 + pd.Timedelta(seconds=i) for i in range(4)]}), time="t")
    top = kit.sql("SELECT p, sales FROM (SELECT *, ROW_NUMBER() OVER (ORDER BY sales DESC) AS rn FROM shop) "
                  "WHERE rn <= 2", shop=silent)
    assert "1 arrival changed nothing (no mark)" in kit.viz.changelog_timeline(top).to_dict()["title"]["subtitle"][0]


def test_rows_are_capped_and_the_title_says_so(spark):
    counts = kit.sql("SELECT user, COUNT(url) AS cnt FROM clicks GROUP BY user", clicks=clicks())
    chart = kit.viz.changelog_timeline(counts, max_rows=5, title="five")
    assert len(_points(chart)) == 5
    spec = chart.to_dict()
    assert spec["title"]["text"] == "five" and "the first 5 changes of more" in spec["title"]["subtitle"][0]
    with pytest.raises(KitError, match="draws a continuous query's result"):
        kit.viz.changelog_timeline(counts.final())
    with pytest.raises(KitError, match="max_rows must be a positive int"):
        kit.viz.changelog_timeline(counts, max_rows=0)


def test_the_chart_collects_once(jobs):  # noqa: F811
    outer = kit.sql(CASCADE, words=words("a", "b", "a", "c"))
    n_log, collects, _ = jobs(lambda: outer.changelog().collect())
    n, collects, _ = jobs(lambda: kit.viz.changelog_timeline(outer))
    assert collects == ["toPandas"]
    assert n <= n_log + 2, "the two tables of the cascade in one job per stage of their union"


def test_the_tables_as_of_each_arrival_are_the_snapshots(jobs):  # noqa: F811
    counts = kit.sql("SELECT user, COUNT(url) AS cnt FROM clicks GROUP BY user", clicks=clicks())
    n, collects, history = jobs(lambda: kit.viz.table_history(counts))
    assert collects == ["toPandas"] and history.arrivals == 11
    for k in range(history.arrivals):
        assert sorted(map(tuple, history.snapshot(k).values.tolist())) == sorted(
            map(tuple, counts.snapshot(at=k).collect())), k
    n, _, chart = jobs(lambda: history.chart(at=2))
    assert n == 0, "a slider move runs no Spark job"
    left, right = chart.hconcat
    assert left.title.text == "clicks: the rows that have arrived"
    assert right.title.subtitle == ["arrival 2 sent: -U (Mary, 1); +U (Mary, 2)"]
    cells = _cells(right)
    assert cells.sort_values(["row", "x"])["text"].tolist() == ["user", "cnt", "Mary", "2", "Bob", "1"]
    shaded = right.layer[0].data
    assert shaded["row"].tolist() == [0], "the row arrival 2 added"
    assert left.layer[0].data["row"].tolist() == [2], "the row that arrived"
    with pytest.raises(KitError, match="at must be an arrival from 0 to 10"):
        history.chart(at=11)


def test_an_empty_result_table_says_so(spark):
    few = kit.sql("SELECT user, COUNT(*) AS c FROM clicks GROUP BY user HAVING COUNT(*) > 1", clicks=clicks())
    history = kit.viz.table_history(few)
    assert history.snapshot(0).empty
    cells = _cells(history.chart(at=0).hconcat[1])
    assert "(empty)" in cells["text"].tolist()


def test_numbered_lanes_in_order_marks_named_and_each_tables_changes_counted(spark):
    outer = kit.sql(CASCADE, words=words("a", "b", "a", "a", "b", "c", "c", "c", "c"))
    chart = kit.viz.changelog_timeline(outer)
    spec = chart.to_dict()
    lanes = spec["vconcat"][1]["layer"][-2]["encoding"]["y"]["sort"]
    assert lanes == sorted(lanes, key=int) and len(lanes) == 4, "cnt 1, 2, 3, 4 top to bottom"
    assert [p.title.subtitle for p in chart.vconcat] == ["numbers on the marks: cnt", "numbers on the marks: freq"]
    inner, result = _points(chart, 0), _points(chart, 1)
    assert spec["title"]["subtitle"][0].startswith(
        f"{len(inner) + len(result)} changes (table 1: {len(inner)}, table 2: {len(result)}, the last the result): ")
    # however many changes one arrival makes to one lane, they stay within its slot (notebook
    # 04's mini-batches of 3 rows: a bundle's changes all come at its last arrival)
    batched = kit.sql(CASCADE, words=words(*"abacbaccabd"), config={
        "table.exec.mini-batch.enabled": "true", "table.exec.mini-batch.allow-latency": "1 h",
        "table.exec.mini-batch.size": "3", "table.optimizer.agg-phase-strategy": "ONE_PHASE"})
    data = pd.concat([_points(kit.viz.changelog_timeline(batched), i) for i in (0, 1)])
    assert data.groupby(["panel", "lane", "seq"]).size().max() >= 4, "as far as +-0.45 at 0.3 apart"
    assert ((data["x"] - data["seq"]).abs() <= 0.35 + 1e-9).all()


def test_arrivals_labelled_with_their_processing_time_for_a_ttl(spark):
    timed = kit.stream(kit.data.load("clicks"), time="cTime",
                       proctime=kit.Clock("2024-01-01 12:00:00", kit.Duration.of_minutes(10)))
    forgetful = kit.sql("SELECT user, COUNT(url) AS cnt FROM clicks GROUP BY user", clicks=timed,
                        config={"table.exec.state.ttl": "25 min"})
    axis = kit.viz.changelog_timeline(forgetful, proctime=True).to_dict()["vconcat"][0]["layer"][0]["encoding"]["x"]
    assert axis["title"] == "arrival order (seq) and its processing time"
    assert "datum.value == 4 ? '4 · 12:40:00'" in axis["axis"]["labelExpr"]
    with pytest.raises(KitError, match="proctime=True needs a stream with a processing time"):
        kit.viz.changelog_timeline(kit.sql("SELECT user, COUNT(url) AS cnt FROM clicks GROUP BY user",
                                           clicks=clicks()), proctime=True)
    with pytest.raises(KitError, match="proctime must be True or False; got 'yes'"):
        kit.viz.changelog_timeline(forgetful, proctime="yes")
