"""The kit's Flink dialect of sqlglot (kit.sql.dialect): every construct kit.sql accepts reads
into one tree, and its nodes know where the user wrote them."""

import pytest
import sqlglot
from sqlglot import exp

from kit.sql.dialect import Flink, MatchRecognize, TableArgument, at, position

# Flink SQL in, the query the dialect writes back (itself, or the second of a pair)
ROUND_TRIPS = [
    "SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), INTERVAL '1' HOUR))",
    "SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(c), INTERVAL '5' MINUTE, INTERVAL '1' HOUR)) AS w",
    "SELECT * FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(c), INTERVAL '5' MINUTE, INTERVAL '1' HOUR, "
    "INTERVAL '1' MINUTE))",
    "SELECT * FROM TABLE(SESSION(TABLE t PARTITION BY k, j, DESCRIPTOR(c), INTERVAL '1' HOUR))",
    "SELECT * FROM TABLE(SESSION(DATA => TABLE t PARTITION BY k, TIMECOL => DESCRIPTOR(c), "
    "GAP => INTERVAL '1' HOUR)) AS w",
    "SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(DATA => TABLE t, TIMECOL => DESCRIPTOR(c), "
    "SIZE => INTERVAL '1' HOUR)) GROUP BY window_start, window_end",
    "SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime MEASURES A.price AS p "
    "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+? {- C -} PERMUTE(D, E) | F{2,}) "
    "WITHIN INTERVAL '1' HOUR SUBSET U = (A, B) DEFINE B AS B.price > A.price) MR",
    "SELECT * FROM (SELECT * FROM t) MATCH_RECOGNIZE (ORDER BY rowtime MEASURES FIRST(A.x) AS f "
    "ALL ROWS PER MATCH AFTER MATCH SKIP TO LAST A PATTERN (A+ B) DEFINE A AS A.x > 0) m "
    "JOIN u ON m.f = u.f",
    "SELECT * FROM T MATCH_RECOGNIZE (ORDER BY id MEASURES CLASSIFIER(U) AS cu, PREV(RUNNING LAST(value)) AS prl, "
    "FINAL LAST(CLASSIFIER()) AS fl ALL ROWS PER MATCH PATTERN (A B+ C+) SUBSET U = (A, C) "
    "DEFINE B AS B.value < PREV(B.value))",
    "SELECT o.id, r.rate FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.t AS r ON o.c = r.c",
    ("SELECT * FROM orders AS o, LATERAL TABLE(RATES(o.t)) AS r WHERE o.c = r.c",
     "SELECT * FROM orders AS o CROSS JOIN LATERAL TABLE(RATES(o.t)) AS r WHERE o.c = r.c"),
    "SELECT TUMBLE_START(c, INTERVAL '1' HOUR), COUNT(*) FROM t GROUP BY TUMBLE(c, INTERVAL '1' HOUR), u",
    "SELECT CAST(a AS TIMESTAMP_LTZ), CAST(b AS BINARY) FROM t",
]


def flink(query):
    return sqlglot.parse_one(query, read=Flink)


def written(sql):
    """``sql`` as the Flink generator writes it (one space per gap, ``AS`` before aliases)."""
    return " ".join(sql.split()).replace("( ", "(")


@pytest.mark.parametrize("query", ROUND_TRIPS)
def test_one_tree_for_each_construct(query):
    query, back = query if isinstance(query, tuple) else (query, query)
    assert written(flink(query).sql(Flink)) == back


def test_flink_types_read_as_spark_writes_them():
    tree = flink("SELECT CAST(a AS TIMESTAMP(3) WITH LOCAL TIME ZONE), CAST(b AS BYTES), CAST(c AS VARCHAR) FROM t")
    assert tree.sql("spark") == "SELECT CAST(a AS TIMESTAMP_LTZ), CAST(b AS BINARY), CAST(c AS STRING) FROM t"


def test_window_tvf_nodes():
    query = "SELECT *\nFROM TABLE(SESSION(DATA => TABLE t PARTITION BY k, j, TIMECOL => DESCRIPTOR(c), GAP => INTERVAL '1' HOUR)) w"
    tree = flink(query)
    source = tree.args["from_"].this
    assert isinstance(source, exp.Table) and source.alias == "w"
    call = source.this.expressions[0]
    assert call.name == "SESSION"
    data = call.expressions[0]
    assert isinstance(data, exp.Kwarg) and data.name == "DATA"
    argument = data.expression
    assert isinstance(argument, TableArgument)
    assert argument.this.name == "t" and [c.name for c in argument.args["partition_by"]] == ["k", "j"]
    assert position(source) == (2, 6)
    assert position(argument) == (2, 28)
    assert at(tree, exp.Table, query.index("TABLE(")) is source


def test_match_recognize_node():
    query = ("SELECT * FROM Ticker\n  MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime\n"
             "    MEASURES A.price AS p PATTERN (A B*) WITHIN INTERVAL '1' HOUR\n"
             "    SUBSET U = (A, B) DEFINE B AS B.price > A.price) MR")
    tree = flink(query)
    match = tree.args["from_"].this
    assert isinstance(match, MatchRecognize)
    assert match.this.name == "Ticker" and match.alias == "MR"
    assert match.args["pattern"].name == "A B*"
    assert position(match.args["pattern"]) == (3, 36)
    assert match.args["within"].sql(Flink) == "INTERVAL '1' HOUR"
    assert [(k.name, [v.name for v in k.expression.expressions]) for k in match.args["subset"]] == [("U", ["A", "B"])]
    assert [d.alias for d in match.args["define"]] == ["B"]
    assert match.meta["start"] == query.index("Ticker") and match.meta["clause"] == query.index("MATCH_RECOGNIZE")
    assert at(tree, MatchRecognize, query.index("Ticker")) is match


def test_for_system_time_as_of():
    tree = flink("SELECT * FROM o JOIN r FOR SYSTEM_TIME AS OF o.t AS x ON o.c = x.c")
    table = tree.args["joins"][0].this
    assert table.name == "r" and table.alias == "x"
    assert table.args["version"].args["kind"] == "AS OF" and table.args["version"].expression.sql() == "o.t"


def test_a_parse_error_names_the_users_line_and_column():
    with pytest.raises(sqlglot.errors.ParseError) as error:
        flink("SELECT *\nFROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), INTERVAL '1' HOUR)\nWHERE")
    assert error.value.errors[0]["line"] == 3


def test_what_sqlglot_cannot_read_is_a_sql_error_at_the_users_line_and_column():
    from kit.sql.errors import SqlError
    from kit.sql.statement import Statement

    statement = Statement("SELECT a,\n  b FROM t WHERE )")
    assert statement.tree is None
    with pytest.raises(SqlError) as error:
        statement.mutable()
    assert (error.value.line, error.value.column) == (2, 18)
    assert str(error.value).startswith("line 2, column 18: cannot read the query: ")
    assert Statement("SELECT 'abc").parse_error.message.startswith("cannot read the query: Error tokenizing")
    assert Statement("SELECT " + "(" * 3000 + "1" + ")" * 3000).parse_error.message == \
        "cannot read the query: it nests too deeply for sqlglot"
