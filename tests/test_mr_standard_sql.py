"""MATCH_RECOGNIZE through kit.sql under semantics="standard" (ISO/IEC 19075-5 as Trino runs it):
the output's shape (empty results, SELECT * layout), no ORDER BY, delimited identifiers,
CLASSIFIER and navigation over it, scalar functions and aggregates in MEASURES.

Every query reads ``T``: one partition ``p``, ids 1..8 in order, values
90 80 70 80 90 50 40 60. The pattern ``A B+ C+`` (B falling, C rising) matches it twice under
SKIP PAST LAST ROW: ids 1-5 as A B B C C (90 > 80 > 70 < 80 < 90; 50 does not rise) and
ids 6-8 as A B C (50 > 40 < 60). The expected rows below are worked out from those labels.
"""

import warnings

import pandas as pd
import pytest

import kit
from kit import KitError
from kit.match_recognize.errors import TooManyThreads
from kit.sql.errors import SqlError

T = pd.DataFrame({"id": range(1, 9), "part": ["p"] * 8, "value": [90, 80, 70, 80, 90, 50, 40, 60]})
VEE = """PATTERN (A B+ C+) {subset}
    DEFINE B AS B.value < PREV(B.value), C AS C.value > PREV(C.value))"""


def run(query, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # no PARTITION BY: one partition, as meant here
        return kit.sql(query, semantics="standard", T=T, **kw)


def rows(df):
    return [tuple(r) for r in df.collect()]


# ---------------------------------------------------------------- (1) empty results, giving up


def test_an_empty_match_result_has_the_querys_columns(spark):
    # no row is above 1000, so A never holds: no match, in either output mode
    one = run("""SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY part ORDER BY id
        MEASURES A.value AS av, CLASSIFIER() AS c ONE ROW PER MATCH
        PATTERN (A B) DEFINE A AS value > 1000)""")
    assert rows(one) == [] and one.columns == ["part", "av", "c"]
    assert [f.dataType.simpleString() for f in one.schema] == ["string", "bigint", "string"]
    every = run("""SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY part ORDER BY id
        MEASURES A.value AS av ALL ROWS PER MATCH PATTERN (A B) DEFINE A AS value > 1000)""")
    assert rows(every) == [] and every.columns == ["part", "id", "av", "value"]
    # an input with no rows (pandas: Spark cannot infer its types) gives the same empty result
    nothing = kit.sql("""SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY part ORDER BY id
        MEASURES A.value AS av ALL ROWS PER MATCH PATTERN (A B) DEFINE A AS value > 0)""",
                      semantics="standard", T=T.iloc[:0])
    assert rows(nothing) == [] and [f.dataType.simpleString() for f in nothing.schema] == [
        "string", "bigint", "bigint", "bigint"]


def test_a_matcher_that_gives_up_says_so(spark):
    # C reads the history, so threads of (A+ B+)+ cannot merge: past the budget the query
    # fails with TooManyThreads, never an empty result
    query = """SELECT * FROM T MATCH_RECOGNIZE (ORDER BY id MEASURES COUNT(*) AS n
        PATTERN ((A+ B+)+ C) DEFINE C AS SUM(A.value) < 0)"""
    with pytest.raises(TooManyThreads, match="steps"):
        run(query, config={"kit.match-recognize.step-budget": 20})


# ---------------------------------------------------------------- (2) SELECT * layout, (3) no ORDER BY


def test_select_star_layout_follows_the_standard(spark):
    # ONE ROW PER MATCH: the PARTITION BY columns, then the measures
    one = run(f"""SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY part ORDER BY id
        MEASURES FIRST(A.id) AS first_id, LAST(C.id) AS last_id ONE ROW PER MATCH {VEE.format(subset='')}""")
    assert one.columns == ["part", "first_id", "last_id"]
    assert rows(one) == [("p", 1, 5), ("p", 6, 8)]
    # ALL ROWS PER MATCH: PARTITION BY, ORDER BY, the measures, then the other input columns
    every = run(f"""SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY part ORDER BY id
        MEASURES MATCH_NUMBER() AS m ALL ROWS PER MATCH {VEE.format(subset='')}""")
    assert every.columns == ["part", "id", "m", "value"]
    assert rows(every)[:2] == [("p", 1, 1, 90), ("p", 2, 1, 80)]


def test_no_order_by_matches_in_input_order(spark):
    # the standard allows MATCH_RECOGNIZE without ORDER BY; the kit then reads the input's order
    # (ids 1..8 here), so the matches are those of ORDER BY id
    query = f"""SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY part {{order}}
        MEASURES FIRST(A.id) AS first_id, LAST(C.id) AS last_id {VEE.format(subset='')}"""
    assert rows(run(query.format(order=""))) == rows(run(query.format(order="ORDER BY id")))
    with pytest.raises(KitError, match="needs ORDER BY"):   # Flink requires it
        kit.sql(query.format(order=""), T=T)


# ---------------------------------------------------------------- (4) delimited identifiers


def test_delimited_identifiers_are_case_sensitive(spark):
    # "a" and "A" are two variables (a delimited identifier keeps its case); "Bv" keeps its case
    # as a column name. 90 > 85 is "a", then 80 < 85 is "A"; again at 90 (id 5), 50 (id 6).
    result = run("""SELECT * FROM T MATCH_RECOGNIZE (ORDER BY id
        MEASURES "a".value AS "Bv", CLASSIFIER() AS "cls", "A"."value" AS lower_v
        ALL ROWS PER MATCH PATTERN ("a" "A") DEFINE "a" AS value > 85, "A" AS "A".value < 85)""")
    assert result.columns == ["id", "Bv", "cls", "lower_v", "part", "value"]
    assert [(r.id, r.Bv, r.cls, r.lower_v) for r in result.collect()] == [
        (1, 90, "a", None), (2, 90, "A", 80), (5, 90, "a", None), (6, 90, "A", 50)]


def test_double_quotes_are_an_error_in_flink_sql(spark):
    with pytest.raises(SqlError, match="unexpected character"):
        kit.sql('SELECT * FROM T MATCH_RECOGNIZE (ORDER BY id PATTERN ("a") DEFINE "a" AS value > 85)', T=T)


# ---------------------------------------------------------------- (5) CLASSIFIER and navigation


def test_classifier_of_a_variable_and_navigation_over_classifiers(spark):
    # per row of each match (running semantics: the rows up to the current one), with U = (A, C):
    #   cu   CLASSIFIER(U): the variable of the last row mapped to A or C so far;
    #   pu   PREV(CLASSIFIER(U)): one row before that row -- NULL when it is outside the match;
    #   nc   NEXT(CLASSIFIER()): the next row's variable, NULL past the match's end;
    #   f3   FIRST(CLASSIFIER(), 3): the match's 4th row's, on every row (FIRST counts over the
    #        whole match in MEASURES, as Trino's testRowPatternMatching has it), NULL for a match
    #        of 3 rows; l3 LAST(CLASSIFIER(), 3): the 3rd row back, NULL until there is one;
    #   rl   RUNNING LAST(CLASSIFIER()): the current row's; fl FINAL LAST(...): the match's last;
    #   prl  PREV(RUNNING LAST(value)): the value of the row before the current one (outside the
    #        match too: physical offsets reach any row of the partition);
    #   fv2  FIRST(value, 2): the match's third value, on every row (Trino: 30, 30, 30 over 10, 20, 30).
    result = run(f"""SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY part ORDER BY id
        MEASURES CLASSIFIER(U) AS cu, PREV(CLASSIFIER(U)) AS pu, NEXT(CLASSIFIER()) AS nc,
                 FIRST(CLASSIFIER(), 3) AS f3, LAST(CLASSIFIER(), 3) AS l3,
                 RUNNING LAST(CLASSIFIER()) AS rl, FINAL LAST(CLASSIFIER()) AS fl,
                 PREV(RUNNING LAST(value)) AS prl, FIRST(value, 2) AS fv2
        ALL ROWS PER MATCH {VEE.format(subset='SUBSET U = (A, C)')}""")
    assert [tuple(r)[1:-1] for r in result.collect()] == [
        # id  cu   pu    nc    f3    l3    rl   fl   prl   fv2
        (1, "A", None, "B", "C", None, "A", "C", None, 70),
        (2, "A", None, "B", "C", None, "B", "C", 90, 70),
        (3, "A", None, "C", "C", None, "B", "C", 80, 70),
        (4, "C", "B", "C", "C", "A", "C", "C", 70, 70),
        (5, "C", "C", None, "C", "B", "C", "C", 80, 70),
        (6, "A", None, "B", None, None, "A", "C", 90, 60),
        (7, "A", None, "C", None, None, "B", "C", 50, 60),
        (8, "C", "B", None, None, None, "C", "C", 40, 60),
    ]


def test_define_reads_the_previous_rows_classifier(spark):
    # B holds only on a row right after an A row of the match (PREV(CLASSIFIER()) = 'A'). A is
    # preferred on every row (A: value > 60), B tried where A fails: 90 80 70 80 90 are A, 50 is
    # B (after an A), 40 fails B (after a B): the match is ids 1-6. At 40 the next search's
    # previous row is outside its match (NULL), so 40 and 60 match nothing.
    result = run("""SELECT * FROM T MATCH_RECOGNIZE (ORDER BY id
        MEASURES FIRST(id) AS first_id, LAST(id) AS last_id, LAST(CLASSIFIER()) AS last_cls
        PATTERN ((A | B)+) DEFINE A AS value > 60, B AS PREV(CLASSIFIER()) = 'A')""")
    assert rows(result) == [(1, 6, "B")]


# ---------------------------------------------------------------- (6) scalar functions, (7) aggregates


def test_functions_and_aggregates_over_classifiers(spark):
    # running semantics: each aggregate reads the match's rows up to the current one
    #   n    COUNT(): rows so far; nb COUNT(B.*): B rows so far; nu COUNT(U.*): A or C rows so far;
    #   fnu  FINAL COUNT(U.*): A or C rows of the whole match (3, then 2);
    #   mnb  MIN_BY(id, value): the id of the smallest value so far;
    #   mxc  MAX_BY(CLASSIFIER(), id): the variable of the largest id so far (the current row's);
    #   ac   ARBITRARY(C.value): a C value (the kit takes the first: 80, then 60), NULL before a C;
    #   sm   SUM(MATCH_NUMBER()): the match number times the rows so far;
    #   xc   MAX(CLASSIFIER()): the largest variable name so far;
    #   lc, cm, pc: LOWER, ||, CAST(... AS VARCHAR(n)) (keeps n characters) over CLASSIFIER(),
    #        MATCH_NUMBER() and PREV(CLASSIFIER()) (NULL on a match's first row: the row
    #        before it is outside the match, and NULL || 'xyz' is NULL).
    # B also counts its own rows in DEFINE (COUNT(B.*) < 3), which holds for both matches.
    result = run("""SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY part ORDER BY id
        MEASURES COUNT() AS n, COUNT(B.*) AS nb, COUNT(U.*) AS nu, FINAL COUNT(U.*) AS fnu,
                 MIN_BY(id, value) AS mnb, MAX_BY(CLASSIFIER(), id) AS mxc, ARBITRARY(C.value) AS ac,
                 SUM(MATCH_NUMBER()) AS sm, MAX(CLASSIFIER()) AS xc, LOWER(CLASSIFIER()) AS lc,
                 CLASSIFIER() || '-' || CAST(MATCH_NUMBER() AS VARCHAR(3)) AS cm,
                 CAST(PREV(CLASSIFIER()) || 'xyz' AS VARCHAR(2)) AS pc
        ALL ROWS PER MATCH PATTERN (A B+ C+) SUBSET U = (A, C)
        DEFINE B AS B.value < PREV(B.value) AND COUNT(B.*) < 3, C AS C.value > PREV(C.value))""")
    assert [tuple(r)[1:-1] for r in result.collect()] == [
        # id n nb nu fnu mnb mxc  ac   sm  xc   lc   cm     pc
        (1, 1, 0, 1, 3, 1, "A", None, 1, "A", "a", "A-1", None),
        (2, 2, 1, 1, 3, 2, "B", None, 2, "B", "b", "B-1", "Ax"),
        (3, 3, 2, 1, 3, 3, "B", None, 3, "B", "b", "B-1", "Bx"),
        (4, 4, 2, 2, 3, 3, "C", 80, 4, "C", "c", "C-1", "Bx"),
        (5, 5, 2, 3, 3, 3, "C", 80, 5, "C", "c", "C-1", "Cx"),
        (6, 1, 0, 1, 2, 6, "A", None, 2, "A", "a", "A-2", None),
        (7, 2, 1, 1, 2, 7, "B", None, 4, "B", "b", "B-2", "Ax"),
        (8, 3, 1, 2, 2, 7, "C", 60, 6, "C", "c", "C-2", "Bx"),
    ]
    with pytest.raises(KitError, match="MAX_BY.*not supported by Flink"):
        kit.sql("""SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY part ORDER BY id MEASURES MAX_BY(id, value) AS x
            PATTERN (A) DEFINE A AS value > 0)""", T=T)


def test_array_agg_array_literals_and_concat_ws(spark):
    # ARRAY_AGG collects in row order; over no row it is NULL. In DEFINE, B may not make the
    # labels so far A B B B (an ARRAY comparison): both matches have at most two B rows anyway.
    # CONCAT_WS('', array) joins the items; ARRAY_AGG(MATCH_NUMBER()) is [2, 2, 2] only in match 2.
    result = run("""SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY part ORDER BY id
        MEASURES ARRAY_AGG(CLASSIFIER()) AS labels, ARRAY_AGG(value) AS vals, ARRAY_AGG(B.value) AS bs,
                 ARRAY_AGG(X.value) AS xs, CONCAT_WS('', ARRAY_AGG(CLASSIFIER())) AS word,
                 ARRAY_AGG(MATCH_NUMBER()) = ARRAY[2, 2, 2] AS second
        ONE ROW PER MATCH PATTERN (A B+ C+ X?)
        DEFINE B AS B.value < PREV(B.value) AND ARRAY_AGG(CLASSIFIER()) <> ARRAY['A', 'B', 'B', 'B'],
               C AS C.value > PREV(C.value), X AS X.value > 1000)""")
    assert [f.dataType.simpleString() for f in result.schema][1:4] == ["array<string>", "array<bigint>", "array<bigint>"]
    assert rows(result) == [
        ("p", ["A", "B", "B", "C", "C"], [90, 80, 70, 80, 90], [80, 70], None, "ABBCC", False),
        ("p", ["A", "B", "C"], [50, 40, 60], [40], None, "ABC", True)]


# ---------------------------------------------------------------- (8) uncorrelated subqueries


def test_uncorrelated_subqueries_in_define_and_measures(spark):
    # run once before matching: (SELECT v ... 'low') is 55, the IN list is the values of ids
    # other than 1 and 5 (no 90), EXISTS of a row above 100 is FALSE. A holds on 80 70 80 (ids
    # 2-4) and on 60 (id 8): 90 is not in the list, 50 and 40 are not above 55.
    limits = pd.DataFrame({"k": ["low", "high"], "v": [55, 85]})
    query = """SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY part ORDER BY id
        MEASURES (SELECT MAX(v) FROM Limits) AS top, FIRST(A.id) AS first_id, LAST(A.id) AS last_id,
                 EXISTS (SELECT * FROM Limits WHERE v > 100) AS above
        PATTERN (A+)
        DEFINE A AS value > (SELECT v FROM Limits WHERE k = 'low')
                    AND value IN (SELECT value FROM T WHERE id NOT IN (1, 5)))"""
    result = run(query, Limits=limits)
    assert rows(result) == [("p", 85, 2, 4, False), ("p", 85, 8, 8, False)]
    with pytest.raises(SqlError, match="gives 2 rows; it must give at most one"):
        run(query.replace("WHERE k = 'low'", ""), Limits=limits)
    # a correlated one (it reads A.tax) runs once too, before matching: Spark cannot resolve
    # A.tax, and the error points at the subquery in the user's text
    with pytest.raises(SqlError, match=r"the subquery .* cannot be resolved") as info:
        run(query.replace("WHERE k = 'low'", "WHERE v > A.value"), Limits=limits)
    assert (info.value.line, info.value.column) == (5, 30)   # the SELECT in DEFINE
    with pytest.raises(KitError, match="subquery in DEFINE or MEASURES is not supported by Flink"):
        kit.sql(query, T=T, Limits=limits)


def test_unquoted_variable_names_fold_to_upper_case(spark):
    # standard SQL: an unquoted name is its upper-case form, so x, X and "X" are one variable and
    # "x" another. 90 > 85 is "x", 80 < 85 is X (written x and X below); CLASSIFIER() gives the names.
    result = run("""SELECT * FROM T MATCH_RECOGNIZE (ORDER BY id
        MEASURES CLASSIFIER() AS cls, LAST("X".value) AS x_value
        ALL ROWS PER MATCH PATTERN ("x" x) DEFINE "x" AS value > 85, X AS x.value < 85)""")
    assert [(r.id, r.cls, r.x_value) for r in result.collect()] == [
        (1, "x", None), (2, "X", 80), (5, "x", None), (6, "X", 50)]
    # Flink SQL keeps names as written: x and X are two variables there
    with pytest.raises(SqlError, match="DEFINE of X, which is not a variable of the PATTERN"):
        kit.sql("""SELECT * FROM T MATCH_RECOGNIZE (PARTITION BY part ORDER BY id
            MEASURES LAST(x.value) AS v PATTERN (x) DEFINE X AS value > 85)""", T=T)


# ---------------------------------------------------------------- Trino's own answers

TRINO_NAVIGATION = {   # a measure over (id, value) = (1, 10), (2, 20), (3, 30), PATTERN (A+), ALL ROWS PER MATCH
    "value": [10, 20, 30], "LAST(value)": [10, 20, 30], "FINAL LAST(value)": [30, 30, 30],
    "FIRST(value)": [10, 10, 10], "FINAL FIRST(value)": [10, 10, 10], "FINAL LAST(value, 2)": [10, 10, 10],
    "FIRST(value, 2)": [30, 30, 30], "RUNNING FIRST(value, 2)": [30, 30, 30], "LAST(value, 10)": [None] * 3,
    "FIRST(value, 10)": [None] * 3, "PREV(value)": [None, 10, 20], "NEXT(value)": [20, 30, None],
    "NEXT(FIRST(value), 2)": [30, 30, 30], "PREV(FIRST(value, 10), 2)": [None] * 3,
}


@pytest.mark.parametrize("measure", sorted(TRINO_NAVIGATION))
def test_navigation_in_all_rows_per_match_as_trino_answers(spark, measure):
    """Trino's testRowPatternMatching (its navigation cases): in MEASURES FIRST counts from the
    match's first row over the whole match, so FIRST(value, 2) is the third value on every
    row, while LAST counts back from the current row (RUNNING) or the match's end (FINAL)."""
    three = pd.DataFrame({"id": [1, 2, 3], "value": [10, 20, 30]})
    got = run(f"SELECT id, measure FROM U MATCH_RECOGNIZE (ORDER BY id MEASURES {measure} AS measure "
              "ALL ROWS PER MATCH PATTERN (A+) DEFINE A AS true) AS m", U=three).orderBy("id")
    assert [r.measure for r in got.collect()] == TRINO_NAVIGATION[measure]


def test_select_star_lists_a_column_ordered_by_twice_twice(spark):
    """Trino's testOutputLayout: ALL ROWS PER MATCH gives PARTITION BY, ORDER BY (as written,
    a column named twice twice), measures, the other columns; ONE ROW PER MATCH PARTITION BY
    and the measures."""
    one = pd.DataFrame({"id": ["ordering"], "part": ["partitioning"], "value": [90]})
    query = ("SELECT * FROM U MATCH_RECOGNIZE (PARTITION BY part ORDER BY {order} MEASURES CLASSIFIER() AS classy "
             "{rows} PATTERN (A) DEFINE A AS true) AS m")
    for order, per_match, columns, row in [
            ("id", "ALL ROWS PER MATCH", ["part", "id", "classy", "value"], ("partitioning", "ordering", "A", 90)),
            ("id", "ONE ROW PER MATCH", ["part", "classy"], ("partitioning", "A")),
            ("id ASC, id DESC", "ALL ROWS PER MATCH", ["part", "id", "id", "classy", "value"],
             ("partitioning", "ordering", "ordering", "A", 90))]:
        got = run(query.format(order=order, rows=per_match), U=one)
        assert got.columns == columns and rows(got) == [row]
