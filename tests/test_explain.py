"""explain(): the seed's navigation tables (001, «模式导航»), cell for cell, from the matcher's trace."""

import pandas as pd
import pytest

from kit.data import pandas as seed_table
from kit.match_recognize.errors import MatchRecognizeError
from kit.sql.explain_match import ExplainError, explain
from kit.sql.errors import SqlError

HEAD = "PARTITION BY symbol ORDER BY rowtime\n"

ROW_LISTS = HEAD + """PATTERN (A B+)
DEFINE
  A AS A.price >= 10,
  B AS B.price > A.price AND SUM(price) < 100 AND SUM(B.price) < 80"""

OFFSETS = HEAD + """PATTERN (A B+)
DEFINE
  A AS A.price >= 10,
  B AS (LAST(B.price, 1) IS NULL OR B.price > LAST(B.price, 1)) AND
       (LAST(B.price, 2) IS NULL OR B.price > 2 * LAST(B.price, 2))"""

DEFAULT_VARIABLE = HEAD + """PATTERN (A B? C)
DEFINE
  B AS B.price < 20,
  C AS LAST(price, 1) < C.price"""


def cells(frame: pd.DataFrame, columns) -> list:
    return [tuple(r) for r in frame[list(columns)].itertuples(index=False)]


def test_referencing_pattern_variables():
    # «引用模式变量» › «示例»: the seed's '-' is an empty row list or a NULL value
    got = explain(seed_table("ticker_navigation"), ROW_LISTS, semantics="standard",
                  expressions=["A.price", "B.price", "SUM(price)", "SUM(B.price)"])
    assert list(got.columns) == ["#", "price", "Classifier", "[A.price]", "[B.price]", "[price]",
                                 "A.price", "B.price", "SUM(price)", "SUM(B.price)", "DEFINE"]
    assert cells(got, got.columns[:-1]) == [
        ("#1", 10, "A", "#1", "-", "#1", 10, None, 10, None),
        ("#2", 15, "B", "#1", "#2", "#1, #2", 10, 15, 25, 15),
        ("#3", 20, "B", "#1", "#2, #3", "#1, #2, #3", 10, 20, 45, 35),
        ("#4", 31, "B", "#1", "#2, #3, #4", "#1, #2, #3, #4", 10, 31, 76, 66),
        ("#5", 35, "", "#1", "#2, #3, #4, #5", "#1, #2, #3, #4, #5", 10, 35, 111, 101),
    ]
    # the last row is what the matcher tried and rejected
    assert got["DEFINE"].tolist() == ["A true", "B true", "B true", "B true", "B false"]


def test_logical_offsets():
    # «Logical Offsets» › «示例»: null, null / 15, null / 20, 15 / 31, 20 (35 < 2 * 20: not mapped)
    got = explain(seed_table("ticker_navigation"), OFFSETS, semantics="standard",
                  expressions=["LAST(B.price, 1)", "LAST(B.price, 2)"])
    assert cells(got, ["price", "Classifier", "LAST(B.price, 1)", "LAST(B.price, 2)"]) == [
        (10, "A", None, None), (15, "B", None, None), (20, "B", 15, None),
        (31, "B", 20, 15), (35, "", 31, 20)]
    assert got["DEFINE"].iloc[-1] == "B false"


@pytest.mark.parametrize("name, expected", [
    ("ticker_navigation_abc", [(10, "A", None), (15, "B", 10), (20, "C", 15)]),
    ("ticker_navigation_ac", [(10, "A", None), (20, "C", 10)]),
])
def test_logical_offsets_of_the_default_variable(name, expected):
    # LAST(price, 1) is the previous row of the match, whatever variable it went to
    got = explain(seed_table(name), DEFAULT_VARIABLE, semantics="standard",
                  expressions=["LAST(price, 1)"])
    assert cells(got, ["price", "Classifier", "LAST(price, 1)"]) == expected


def test_the_row_tried_as_two_variables_shows_both_conditions():
    got = explain(seed_table("ticker_navigation_ac"), DEFAULT_VARIABLE, semantics="standard")
    assert got["DEFINE"].tolist() == ["A true", "B false, C true"]


def test_body_or_whole_clause_and_pandas_or_spark(spark):
    whole = "MATCH_RECOGNIZE (\n" + OFFSETS + "\n)"
    a = explain(seed_table("ticker_navigation"), OFFSETS, semantics="standard")
    b = explain(spark.createDataFrame(seed_table("ticker_navigation")), whole, semantics="standard")
    pd.testing.assert_frame_equal(a, b)


def test_flink_rejects_a_greedy_quantifier_last():
    with pytest.raises(MatchRecognizeError, match="Greedy quantifiers are not allowed"):
        explain(seed_table("ticker_navigation"), OFFSETS)


def test_errors_name_what_is_missing():
    t = seed_table("ticker_navigation")
    with pytest.raises(ExplainError, match="match 2 does not exist: the partition has 1 match$"):
        explain(t, OFFSETS, semantics="standard", match=2)
    with pytest.raises(ExplainError, match="no partition 'XYZ'"):
        explain(t, OFFSETS, "XYZ", semantics="standard")
    two = pd.concat([t, t.assign(symbol="XYZ")])
    with pytest.raises(ExplainError, match="2 partitions .* choose one with partition="):
        explain(two, OFFSETS, semantics="standard")
    assert explain(two, OFFSETS, "XYZ", semantics="standard")["price"].tolist() == [10, 15, 20, 31, 35]


def test_flink_semantics_v_shape_shows_both_conditions_tried_on_the_last_row():
    clause = HEAD + """PATTERN (START_ROW PRICE_DOWN+ PRICE_UP)
DEFINE
  PRICE_DOWN AS (LAST(PRICE_DOWN.price, 1) IS NULL AND PRICE_DOWN.price < START_ROW.price) OR
                PRICE_DOWN.price < LAST(PRICE_DOWN.price, 1),
  PRICE_UP AS PRICE_UP.price > LAST(PRICE_DOWN.price, 1)"""
    got = explain(seed_table("ticker"), clause, "ACME", ["LAST(PRICE_DOWN.price, 1)"])
    assert cells(got, ["#", "price", "Classifier", "LAST(PRICE_DOWN.price, 1)"]) == [
        ("#5", 25, "START_ROW", None), ("#6", 18, "PRICE_DOWN", None), ("#7", 15, "PRICE_DOWN", 18),
        ("#8", 14, "PRICE_DOWN", 15), ("#9", 24, "PRICE_UP", 15)]
    assert got["DEFINE"].iloc[-1] == "PRICE_DOWN false, PRICE_UP true"


def test_expressions_must_parse():
    with pytest.raises(SqlError, match=r"line 1, column 10: expected '\)'"):
        explain(seed_table("ticker_navigation"), OFFSETS, semantics="standard", expressions=["SUM(price"])
