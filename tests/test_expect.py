"""kit.expect: the notebooks' checks pass only on equal values and say where they differ."""

import math
from datetime import datetime

import numpy as np
import pandas as pd
import pytest

from kit.expect import ExpectationFailed, expect


def failure(actual, expected, what="") -> str:
    with pytest.raises(ExpectationFailed) as info:
        expect(actual, expected, what)
    return str(info.value)


def test_equal_values_pass_silently():
    assert expect([("Bob", "12:00", 1)], [("Bob", "12:00", 1)], "rows") is None
    expect({15}, {15})
    expect({"o3": 1.1}, {"o3": 1.1})
    expect(np.int64(7), 7)
    expect(pd.Timestamp("2024-01-01 12:00"), datetime(2024, 1, 1, 12))
    expect(True, True)


def test_a_difference_fails_naming_what_and_where():
    message = failure([("Bob", 1), ("Liz", 2)], [("Bob", 1), ("Liz", 3)], "clicks per user")
    assert message.startswith("clicks per user: item 1 differs: got ('Liz', 2), expected ('Liz', 3)")
    assert "got      [('Bob', 1), ('Liz', 2)]" in message
    assert isinstance(ExpectationFailed("x"), AssertionError)   # nbval and pytest see a failed check


@pytest.mark.parametrize("actual, expected, where", [
    ([1, 2], [1, 2, 3], "2 items, expected 3"),
    ({1, 2}, {2, 3}, "unexpected [1], missing [3]"),
    ({"a": 1}, {"a": 2}, "at key 'a': got 1, expected 2"),
    ({"a": 1}, {"a": 1, "b": 2}, "key 'b' missing"),
    ((1, 2), [1, 2], "values differ"),           # a tuple is not a list, as in Python
    (None, float("nan"), "values differ"),       # None is not NaN
    (1, True, None),                             # Python's 1 == True
])
def test_each_kind_of_difference(actual, expected, where):
    if where is None:
        expect(actual, expected)
    else:
        assert failure(actual, expected).startswith(where)


def test_missing_values_equal_themselves_only():
    expect(float("nan"), float("nan"))
    expect([1.0, math.nan], [1.0, np.float64("nan")])
    expect(pd.NaT, pd.NaT)
    expect(pd.NA, pd.NA)
    failure(pd.NaT, math.nan)
    failure(math.nan, 1.0)


def test_dataframes_compare_columns_then_cells():
    table = pd.DataFrame({"symbol": ["ACME"], "start": [pd.Timestamp("2011-04-01 10:00:04")],
                          "avg": [14.5], "n": [None]})
    expect(table, table.copy())
    expect(table, pd.DataFrame({"symbol": ["ACME"], "start": [pd.Timestamp("2011-04-01 10:00:04")],
                                "avg": [14.5], "n": [None]}, dtype=object))
    assert failure(table, table[["start", "symbol", "avg", "n"]]).startswith(
        "columns ['symbol', 'start', 'avg', 'n'], expected ['start', 'symbol', 'avg', 'n']")
    assert failure(table, table.assign(avg=[14.0])).startswith(
        "row 0 differs: got ['ACME', Timestamp('2011-04-01 10:00:04'), 14.5, None]")
    assert failure(table, pd.concat([table, table])).startswith("1 rows, expected 2")
    assert failure(table, [["ACME"]]).startswith("a DataFrame compared with a list")


def test_a_spark_dataframe_is_compared_as_pandas(spark):
    df = spark.createDataFrame([("Mary", 3)], "user string, clicks bigint")
    expect(df, pd.DataFrame({"user": ["Mary"], "clicks": [3]}))
    failure(df, pd.DataFrame({"user": ["Mary"], "clicks": [4]}))


def test_a_comparison_without_one_answer_is_an_error_not_a_pass():
    with pytest.raises(TypeError, match="compare lists or scalars"):
        expect(np.array([1, 2]), np.array([1, 2]))
    with pytest.raises(TypeError, match="compare lists or scalars"):
        expect(pd.Series([1, 2]), [1, 2])
    expect(list(pd.Series([1, 2])), [1, 2])


def test_long_values_are_cut_in_the_message():
    message = failure(list(range(1000)), list(range(999)) + [0])
    assert "item 999 differs: got 999, expected 0" in message and "…" in message
