"""Measure types follow Flink SQL's rules (the output schema is known before matching)."""

import pytest
from pyspark.sql import types as T

from kit.match_recognize.spec import (Aggregate, Binary, Case, Cast, Classifier, Column, IsNull,
                                      Literal, MatchNumber, MatchRowtime, Nav)
from kit.match_recognize.types import MeasureTypeError, measure_type, spark_type

TICKER = T.StructType([T.StructField("symbol", T.StringType()), T.StructField("rowtime", T.TimestampType()),
                       T.StructField("price", T.LongType()), T.StructField("tax", T.LongType()),
                       T.StructField("rate", T.DecimalType(10, 4)), T.StructField("n", T.IntegerType())])
price = Column("price", "A")


@pytest.mark.parametrize("expr, semantics, expected", [
    (Column("rowtime", "START_ROW"), "flink", T.TimestampType()),
    (Nav("LAST", Column("rowtime", "PRICE_DOWN"), 0), "flink", T.TimestampType()),
    (Aggregate("AVG", price), "flink-2.3", T.LongType()),       # golden: 14, 13
    (Aggregate("AVG", price), "flink", T.DoubleType()),         # documented: 14.5, 13.5
    (Aggregate("AVG", price), "standard", T.DoubleType()),
    (Aggregate("AVG", Cast(price, "DOUBLE")), "flink-2.3", T.DoubleType()),
    (Aggregate("SUM", price), "flink", T.LongType()),
    (Aggregate("SUM", Column("n")), "flink", T.IntegerType()),
    (Aggregate("SUM", Column("rate")), "flink", T.DecimalType(38, 4)),
    (Aggregate("COUNT", None), "flink", T.LongType()),
    (Aggregate("MAX", Column("symbol")), "flink", T.StringType()),
    (Binary("-", Column("price", "A"), Column("price", "C")), "flink", T.LongType()),
    (Binary("*", Column("n"), Literal(2, "INT")), "flink", T.IntegerType()),
    (Binary("*", Column("n"), Literal("1.5", "DECIMAL")), "flink", T.DecimalType(2, 1)),
    (Binary("+", price, Literal(1.0, "DOUBLE")), "flink", T.DoubleType()),
    (Binary(">", price, Literal(1, "INT")), "flink", T.BooleanType()),
    (IsNull(price), "flink", T.BooleanType()),
    (Case(None, ((IsNull(price), Literal(1, "INT")),), Column("price")), "flink", T.LongType()),
    (Cast(price, "DECIMAL(10, 2)"), "flink", T.DecimalType(10, 2)),
    (Classifier(), "standard", T.StringType()),
    (MatchNumber(), "standard", T.LongType()),
    (MatchRowtime(), "flink", T.TimestampType()),
])
def test_measure_types(expr, semantics, expected):
    assert measure_type(expr, TICKER, semantics) == expected


def test_user_aggregates_declare_their_type():
    class Weighted:
        result_type = "DOUBLE"
    assert measure_type(Aggregate("WAVG", price), TICKER, aggregates={"WAVG": Weighted}) == T.DoubleType()
    with pytest.raises(MeasureTypeError, match="user aggregate MYAGG needs a result_type"):
        measure_type(Aggregate("MYAGG", price), TICKER)


def test_unknown_columns_and_types_are_named():
    with pytest.raises(MeasureTypeError, match="column 'volume' is not in the input"):
        measure_type(Column("volume", "A"), TICKER)
    with pytest.raises(MeasureTypeError, match="unknown type 'MONEY'"):
        spark_type("MONEY")


@pytest.mark.parametrize("name, expected", [
    ("TIMESTAMP(3)", T.TimestampType()), ("VARCHAR(20)", T.StringType()), ("decimal(5,1)", T.DecimalType(5, 1)),
    ("TIMESTAMP(3) WITH LOCAL TIME ZONE", T.TimestampType()), ("BIGINT", T.LongType()),
])
def test_flink_type_names(name, expected):
    assert spark_type(name) == expected


def test_like_is_boolean():
    from kit.match_recognize.spec import Call
    assert measure_type(Call("LIKE", (Column("symbol"), Literal("AC%", "STRING"))), TICKER) == T.BooleanType()
