"""MATCH_RECOGNIZE's limits: run-time errors reach the user as the kit's own, DEFINEs that
are not conditions fail at planning, pathological patterns stop at the step budget, huge
bounded quantifiers are rejected; and a seeded fuzz of nasty patterns that each return or
fail with the budget error in a few seconds."""

import random
import re
import time

import numpy as np
import pytest

import kit
from kit.match_recognize.budget import DEFAULT_STEPS, STEPS_PER_ROW
from kit.match_recognize.errors import MatchRecognizeError, MatchRuntimeError, TooManyThreads
from kit.match_recognize.matcher import run_partition
from kit.match_recognize.operator import match_recognize
from kit.match_recognize.program import MAX_UNROLLED
from kit.sql import SqlError, parse_match_recognize

QUERY = """SELECT * FROM T MATCH_RECOGNIZE (
    PARTITION BY symbol ORDER BY rowtime
    MEASURES COUNT(*) AS n
    {after}PATTERN ({pattern})
    DEFINE {define})"""


def query(pattern, define, after=""):
    return QUERY.format(pattern=pattern, define=define, after=after and f"AFTER MATCH {after}\n    ")


def clause(pattern, define, after=""):
    text = query(pattern, define, after)
    return parse_match_recognize(text[text.index("MATCH_RECOGNIZE"):])


def walk(rows, seed=0):
    """One partition of a Ticker-like random walk, as the matcher's numpy columns."""
    rng = np.random.default_rng(seed)
    return {"symbol": np.array(["S"] * rows, dtype=object), "rowtime": np.arange(rows, dtype="int64") * 1000,
            "price": np.abs(150 + np.cumsum(rng.integers(-5, 6, rows)) - 1) + 1}


def clean(message):
    """The message is the kit's own: no Java or Python-worker traceback in it."""
    assert "java." not in message and "Traceback" not in message and "at org.apache" not in message, message


@pytest.fixture(scope="module")
def not_null(spark):
    """A partition column declared NOT NULL (Spark's range): the case that lost the message."""
    return spark.range(5).selectExpr("'S' AS symbol", "timestamp_millis(id * 1000) AS rowtime", "id AS price")


# ---------------------------------------------------------------- 2. run-time errors


def test_skip_to_first_error_is_the_kits_own_with_a_not_null_partition_column(not_null):
    q = query("A B", "A AS A.price >= 0", after="SKIP TO FIRST A")
    with pytest.raises(MatchRuntimeError, match="Could not skip to first element of a match") as error:
        kit.sql(q, T=not_null)
    assert "partition symbol='S'" in str(error.value)
    clean(str(error.value))


def test_budget_error_is_the_kits_own_through_spark(not_null):
    q = query("A+? B+ C", "A AS A.price >= 0, B AS B.price >= 0, C AS C.price < 0")
    with pytest.raises(TooManyThreads, match=r"\(A\+\? B\+ C\) took more than 10 steps") as error:
        kit.sql(q, T=not_null, config={"kit.match-recognize.step-budget": 10})
    clean(str(error.value))
    assert kit.sql(q, T=not_null).count() == 0    # the default budget lets it finish


def test_thread_bound_error_is_the_kits_own_through_spark(not_null):
    q = query("(A | B)+ C", "A AS A.price >= 0, B AS B.price >= 0, C AS SUM(A.price) < 0")
    with pytest.raises(TooManyThreads, match="more than 3 live threads") as error:
        kit.sql(q, T=not_null, semantics="standard", config={"kit.match-recognize.max-threads": 3})
    assert "kit.match-recognize.max-threads" in str(error.value)
    clean(str(error.value))


def test_limits_must_be_positive_ints(not_null):
    spec = clause("A B", "A AS A.price > 0")
    with pytest.raises(kit.KitError, match="step_budget must be a positive int; got 0"):
        match_recognize(not_null, spec, step_budget=0)


# ---------------------------------------------------------------- 3. DEFINE must be a condition


@pytest.mark.parametrize("semantics", ["flink", "standard"])
@pytest.mark.parametrize("define, message", [
    ("A AS A.price + 1", "the condition of A, A.price + 1, is BIGINT, not BOOLEAN: compare it"),
    ("A AS 1", "the condition of A, 1, is INT, not BOOLEAN"),
    ("A AS 'true'", "the condition of A, 'true', is STRING, not BOOLEAN: write a comparison"),
    ("A AS A.price > 'abc'", "cannot compare A.price (BIGINT) with 'abc' (STRING)"),
    ("A AS NOT A.price", "NOT needs BOOLEAN operands, not A.price (BIGINT)"),
])
def test_a_define_that_is_not_a_boolean_condition_fails_at_planning(not_null, semantics, define, message):
    with pytest.raises(SqlError, match="DEFINE: " + re.escape(message)) as error:
        kit.sql(query("A B", define + ", B AS B.price > 0"), T=not_null, semantics=semantics)
    assert (error.value.line, error.value.column) == (5, 17)    # where the condition begins
    clean(str(error.value))


def test_boolean_defines_still_run(not_null):
    q = query("A B", "A AS A.price IS NULL OR A.price IN (1, 3) OR (A.price > 2 AND NOT A.price > 9), "
                     "B AS B.price BETWEEN 0 AND 10")
    assert kit.sql(q, T=not_null).count() == 2


# ---------------------------------------------------------------- 4. bounded work


SLOW = [   # the patterns, which ran for minutes (the standard matcher finds the first
           # one's dead states and ends it in a second)
    ("flink", "A+? B+ C", "A AS A.price > 0, B AS B.price > 0, C AS C.price < 0", 1000),
    ("flink", "A+? B* C", "A AS A.price > 0, B AS B.price > AVG(A.price) - 1000, C AS C.price < 0", 2000),
    ("standard", "A+? B* C", "A AS A.price > 0, B AS B.price > AVG(A.price) - 1000, C AS C.price < 0", 2000),
    ("flink", "A{3} B*? C", "A AS A.price > 0, B AS B.price > 0, C AS C.price > AVG(B.price) + 1000", 10_000),
    ("standard", "A{3} B*? C", "A AS A.price > 0, B AS B.price > 0, C AS C.price > AVG(B.price) + 1000", 10_000),
    # each step carries the match's labels (C reads A's first row): 373 s to the budget once
    ("standard", "A+? B* C", "A AS A.price > 0, B AS B.price > 0, C AS C.price > FIRST(A.price) + 1000", 10_000),
]


@pytest.mark.parametrize("semantics, pattern, define, rows", SLOW)
def test_slow_patterns_stop_at_the_step_budget(semantics, pattern, define, rows):
    start = time.perf_counter()
    with pytest.raises(TooManyThreads) as error:
        run_partition(walk(rows), clause(pattern, define), semantics)
    assert time.perf_counter() - start < 10
    budget = DEFAULT_STEPS + STEPS_PER_ROW * rows
    assert f"({pattern}) took more than {budget:,} steps" in str(error.value)
    assert "config={'kit.match-recognize.step-budget': n}" in str(error.value)


def test_the_budget_is_deterministic_and_can_be_raised():
    spec = clause(*SLOW[0][1:3])
    for _ in range(2):
        with pytest.raises(TooManyThreads, match="more than 5,000 steps"):
            run_partition(walk(60), spec, "flink", step_budget=5_000)
    assert run_partition(walk(60), spec, "flink", step_budget=50_000).matches == []


@pytest.mark.parametrize("semantics", ["flink", "standard"])
def test_aggregates_read_in_define_count_against_the_budget(semantics):
    # the same partial matches (about 45,000 steps over 300 rows); C's AVG reads each one's rows
    plain = clause("A B*? C", "A AS A.price > 0, B AS B.price > 0, C AS C.price < 0")
    assert run_partition(walk(300), plain, semantics, step_budget=100_000).matches == []
    reading = clause("A B*? C", "A AS A.price > 0, B AS B.price > 0, C AS C.price > AVG(B.price) + 1000")
    with pytest.raises(TooManyThreads, match="more than 100,000 steps"):
        run_partition(walk(300), reading, semantics, step_budget=100_000)


@pytest.mark.parametrize("semantics", ["flink", "standard"])
@pytest.mark.parametrize("pattern, shown, column", [
    ("A B{10000} C", "B{10000} unrolls to 10,000 pattern variables", 16),
    ("A B{99999999999}? C", "B{99999999999}? unrolls to 99,999,999,999 pattern variables", 16),
    ("A B{2,1001}? C", "B{2,1001}? unrolls to 1,001", 16),
])
def test_huge_bounded_quantifiers_fail_at_planning(not_null, semantics, pattern, shown, column):
    start = time.perf_counter()
    with pytest.raises(SqlError, match=f"PATTERN: {re.escape(shown)}.*at most {MAX_UNROLLED:,}") as error:
        kit.sql(query(pattern, "A AS A.price > 0"), T=not_null, semantics=semantics)
    assert (error.value.line, error.value.column) == (4, column)
    assert time.perf_counter() - start < 10
    clean(str(error.value))


def test_nested_quantifiers_multiply_in_the_standard_semantics():
    with pytest.raises(MatchRecognizeError, match=r"\(A B\{10\}\)\{100\} unrolls to 1,100"):
        run_partition(walk(5), clause("(A B{10}){100}", "A AS A.price > 0"), "standard")
    assert run_partition(walk(5), clause("(A B{10}){90}", "A AS A.price > 0"), "standard").matches == []


# ---------------------------------------------------------------- fuzz: pathological patterns


def nasty(rng: random.Random, flink: bool):
    """A pattern and DEFINEs built to pile up partial matches: reluctant and greedy loops,
    (standard) alternations and groups under quantifiers, conditions that rarely end a match,
    DEFINEs reading the history through aggregates."""
    names = ["A", "B", "C", "D"]
    quantifiers = ["+", "*", "+?", "*?", "{2,}", "{1,3}?"]
    if flink:
        items = [n + rng.choice(quantifiers) for n in names[:3]] + ["D"]
    else:
        inner = f"(A{rng.choice(quantifiers)} | B)"
        items = [inner + rng.choice(["+", "*", "+?"]), "C" + rng.choice(quantifiers), "D"]
    conditions = ["{v}.price > 0", "{v}.price > AVG(A.price) - 1000", "{v}.price >= MIN(B.price) - 1000",
                  "SUM(A.price) > 0", "{v}.price > LAST(A.price) - 1000"]
    define = [f"{v} AS " + rng.choice(conditions).format(v=v) for v in names[:3]]
    define.append("D AS " + rng.choice(["D.price < 0", "D.price > AVG(C.price) + 100000", "COUNT(A.price) < 0"]))
    return " ".join(items), ", ".join(define)


@pytest.mark.parametrize("seed", range(6))
def test_pathological_patterns_return_or_stop_in_seconds(seed):
    rng = random.Random(seed)
    semantics = "flink" if seed % 2 else "standard"
    rows = rng.choice([300, 1000, 3000])
    pattern, define = nasty(rng, semantics == "flink")
    spec = clause(pattern, define)
    start = time.perf_counter()
    try:
        run_partition(walk(rows, seed), spec, semantics)
    except TooManyThreads as error:
        assert "took more than" in str(error) or "live threads" in str(error)
        clean(str(error))
    assert time.perf_counter() - start < 8, (pattern, define, rows)
