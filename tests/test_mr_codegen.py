"""The generated DEFINE/MEASURES functions (codegen.py) equal the reference closures."""

import math
from decimal import Decimal

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from kit.match_recognize.codegen import (compile_blocks, compile_fast, compile_source, expand,
                                         vector_condition)
from kit.match_recognize.expressions import Env, compile_expr
from kit.match_recognize.spec import (Binary, Call, Case, Cast, Classifier, Column, IsNull, Literal,
                                      MatchNumber, Nav, Semantics, Unary)
from kit.match_recognize.types import coerce, measure_type

N = 8
VARS = ("A", "B")
columns = st.fixed_dictionaries({
    "a": st.lists(st.one_of(st.none(), st.integers(-3, 3)), min_size=N, max_size=N),
    "b": st.lists(st.one_of(st.none(), st.floats(-2, 2, allow_nan=False)), min_size=N, max_size=N),
})
var = st.sampled_from((None,) + VARS)
column = st.builds(Column, st.sampled_from(("a", "b")), var)
leaf = st.one_of(
    column,
    st.builds(Literal, st.one_of(st.none(), st.integers(-2, 2)), st.just("INT")),
    st.builds(Nav, st.sampled_from(("FIRST", "LAST")), column, st.integers(0, 2)),
    st.builds(Classifier), st.builds(MatchNumber))


def _extend(inner):
    ops = ("=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "AND", "OR")
    return st.one_of(
        st.builds(Binary, st.sampled_from(ops), inner, inner),
        st.builds(Unary, st.sampled_from(("NOT", "-", "+")), inner),
        st.builds(IsNull, inner, st.booleans()),
        st.builds(Semantics, st.just("RUNNING"), inner),
        st.builds(Call, st.just("ABS"), st.tuples(inner)),          # not generated: fallback
        st.builds(Case, st.none(), st.tuples(st.tuples(inner, inner)), inner))


expressions = st.recursive(leaf, _extend, max_leaves=8)


@st.composite
def matches(draw):
    """Row indices (increasing, not always contiguous) and their labels."""
    rows = sorted(draw(st.sets(st.integers(0, N - 1), min_size=1, max_size=N)))
    labels = draw(st.lists(st.sampled_from(VARS), min_size=len(rows), max_size=len(rows)))
    return tuple(rows), tuple(labels)


def _outcome(f, R, L):
    try:
        v = f(R, L, 3, (R, L))
    except Exception as e:  # noqa: BLE001 -- the error type is part of the behaviour
        return ("raises", type(e))
    return ("nan",) if isinstance(v, float) and math.isnan(v) else (type(v), v)


@settings(max_examples=400, deadline=None)
@given(columns, expressions, matches(), st.sampled_from(("DEFINE", "MEASURES")))
def test_generated_equals_reference(cols, expr, match, clause):
    R, L = match
    env = Env(cols, variables=VARS, clause=clause)
    current = L[-1] if clause == "DEFINE" else None   # DEFINE of the row's own variable
    fast = compile_fast(expr, env, current)
    assert _outcome(fast, R, L) == _outcome(compile_expr(expr, env), R, L)


def test_generated_source_is_one_function_for_the_seed_define():
    env = Env({"price": [10, 9, 11]}, variables=("START_ROW", "PRICE_DOWN", "PRICE_UP"))
    up = Binary(">", Column("price", "PRICE_UP"), Nav("LAST", Column("price", "PRICE_DOWN"), 1))
    fast = compile_fast(up, env, "PRICE_UP")
    assert "f0(" not in fast.source and "f1(" not in fast.source   # no reference closure called
    assert fast((0, 1, 2), ("START_ROW", "PRICE_DOWN", "PRICE_UP"), 1, None) is None  # one PRICE_DOWN row
    assert fast((0, 1, 2, 2), ("START_ROW", "PRICE_DOWN", "PRICE_DOWN", "PRICE_UP"), 1, None) is True


def test_errors_are_the_reference_errors():
    env = Env({"price": [1]}, variables=("A",))
    with pytest.raises(Exception, match="unknown column 'volume'"):
        compile_fast(Column("volume", "A"), env, "A")


def test_an_expression_is_checked_once_per_shape_of_its_columns(monkeypatch):
    """A task runs one spec on key after key: the reference compile that checks for errors
    runs for the first key's columns, not again for the next key's; another shape (a column
    missing) is checked again and raises."""
    import kit.match_recognize.codegen as codegen

    calls = []
    monkeypatch.setattr(codegen, "compile_expr", lambda e, env, *a: calls.append((e, env)) or compile_expr(e, env, *a))
    monkeypatch.setattr(codegen, "_CHECKED", {})
    expr = Binary(">", Column("price", "A"), Literal(1, "INT"))
    for prices in ([1, 2], [3], [4, 5, 6]):
        f = compile_fast(expr, Env({"price": prices}, variables=("A",)), "A")
        assert f(range(len(prices)), ("A",) * len(prices), 1, None) is (prices[-1] > 1)
    assert [e for e, _ in calls if e is expr] == [expr]   # (the generator compiles some parts itself)
    with pytest.raises(Exception, match="unknown column 'price'"):
        compile_fast(expr, Env({"volume": [1]}, variables=("A",)), "A")


def test_generated_code_is_bound_to_each_keys_columns():
    """Generated once for a spec's expression, the code reads the columns of the key it runs
    on: a second key's rows, not the first one's."""
    expr = Binary(">", Column("price", "B"), Nav("LAST", Column("price", "A"), 0))
    first, second = ({"price": [1, 5]}, {"price": [7, 2]})
    for cols, want in ((first, True), (second, False)):
        env = Env(cols, variables=("A", "B"))
        fast = compile_fast(expr, env, "B")
        assert fast(range(2), ("A", "B"), 1, None) is want is compile_expr(expr, env)(range(2), ("A", "B"), 1, None)
        code, names = compile_blocks(expr, env, "B", (("A", 1), ("B", 1)))
        assert eval(compile_source(code, "<DEFINE>", "eval"), names, {"r": 1, "M": (("A", 0), ("B", 1))}) is want


@st.composite
def block_matches(draw):
    """A contiguous match as blocks ``M`` of the variables in pattern order (optional ones may
    be missing), ending at row ``r``; the last block's variable is the one being classified."""
    sizes = draw(st.lists(st.integers(0, 3), min_size=len(PATTERN), max_size=len(PATTERN)))
    start = draw(st.integers(0, 2))
    M, row = [], start
    for (var, minimum), size in zip(PATTERN, sizes):
        size = max(size, minimum)
        if size:
            M.append((var, row))
            row += size
    assume(M and row - 1 < N)
    return row - 1, tuple(M)


PATTERN = (("A", 1), ("B", 0), ("C", 1))   # A B* C: B's block may be missing


@settings(max_examples=400, deadline=None)
@given(columns, expressions_abc := st.recursive(
    st.one_of(st.builds(Column, st.sampled_from(("a", "b")), st.sampled_from((None, "A", "B", "C"))),
              st.builds(Literal, st.one_of(st.none(), st.booleans(), st.integers(-2, 2)), st.just("INT")),
              st.builds(Nav, st.sampled_from(("FIRST", "LAST")),
                        st.builds(Column, st.sampled_from(("a", "b")), st.sampled_from((None, "A", "B", "C"))),
                        st.integers(0, 2)),
              st.builds(Classifier)),
    _extend, max_leaves=8), block_matches())
def test_block_conditions_equal_the_reference(cols, expr, match):
    """``compile_blocks``' code is ``reference(R, L) is True`` on every contiguous match, or
    raises the same error."""
    r, M = match
    current = M[-1][0]
    env = Env(cols, variables=("A", "B", "C"), clause="DEFINE")
    code, names = compile_blocks(expr, env, current, PATTERN, tag="_x_")
    R, L = expand(r, M)
    assert len(R) == len(L) and L[-1] == current
    reference = _outcome(compile_fast(expr, env, current), R, L)
    if reference[0] == "raises":
        with pytest.raises(reference[1]):
            eval(compile_source(code, "<test>", "eval"), dict(names, r=r, M=M))  # noqa: S307
    else:
        fast = eval(compile_source(code, "<test>", "eval"), dict(names, r=r, M=M))  # noqa: S307
        assert fast is (reference == (bool, True))


_EDGE = (2 ** 53 - 1, 2 ** 53, 2 ** 53 + 1)   # from 2**53 on, an integer and a float compare inexactly in float64
_column_abc = st.builds(Column, st.sampled_from(("a", "b")), st.sampled_from((None, "A", "B", "C")))
_value = st.one_of(_column_abc, st.builds(Nav, st.sampled_from(("FIRST", "LAST")), _column_abc, st.integers(0, 3)),
                   st.builds(Literal, st.one_of(st.none(), st.integers(-2, 2)), st.just("BIGINT")),
                   st.builds(Literal, st.sampled_from((0.5, 2.0 ** 53)), st.just("DOUBLE")))
_condition = st.recursive(   # mostly inside vector_condition's subset
    st.one_of(st.builds(Binary, st.sampled_from(("=", "<>", "<", "<=", ">", ">=")), _value, _value),
              st.builds(IsNull, _value, st.booleans())),
    lambda inner: st.one_of(st.builds(Binary, st.sampled_from(("AND", "OR")), inner, inner),
                            st.builds(Unary, st.just("NOT"), inner), st.builds(Semantics, st.just("RUNNING"), inner)),
    max_leaves=6)


@settings(max_examples=400, deadline=None)
@given(st.fixed_dictionaries({
    "a": st.one_of(st.lists(st.integers(-3, 3), min_size=N, max_size=N), columns.map(lambda c: c["a"]),
                   st.lists(st.sampled_from(_EDGE), min_size=N, max_size=N)),
    "b": st.one_of(st.lists(st.sampled_from((-1.5, 0.0, 2.0, float(2 ** 53))), min_size=N, max_size=N),
                   columns.map(lambda c: c["b"]))}),
    st.one_of(_condition, expressions_abc), st.lists(st.sampled_from(("A", "B", "C")), min_size=1, max_size=3).map(sorted))
def test_vector_conditions_equal_the_reference(cols, expr, labels):
    """``vector_condition`` is ``reference(range(s, s + k), labels) is True`` for every start
    row ``s``, where the reference cannot raise; or None."""
    labels = tuple(labels)
    env = Env(cols, variables=("A", "B", "C"), clause="DEFINE")
    ok = vector_condition(expr, env, labels[-1], labels, N)
    if ok is not None:
        reference = compile_fast(expr, env, labels[-1])
        assert ok.tolist() == [s + len(labels) <= N and _outcome(reference, range(s, s + len(labels)), labels)
                               == (bool, True) for s in range(N)]


def test_vector_condition_of_the_seed_define():
    """PRICE_DOWN of the V-shape on its first row: a drop from START_ROW, from numpy."""
    env = Env({"price": [10, 9, 11, 7]}, variables=("START_ROW", "PRICE_DOWN", "PRICE_UP"), clause="DEFINE")
    down, start = Column("price", "PRICE_DOWN"), Column("price", "START_ROW")
    previous = Nav("LAST", down, 1)
    expr = Binary("OR", Binary("AND", IsNull(previous, False), Binary("<", down, start)),
                  Binary("<", down, previous))
    ok = vector_condition(expr, env, "PRICE_DOWN", ("START_ROW", "PRICE_DOWN"), 4)
    assert ok.tolist() == [True, False, True, False]
    beyond = IsNull(Nav("FIRST", Column("price"), 2), False)   # a two-row match has no third row
    assert vector_condition(beyond, env, "PRICE_DOWN", ("START_ROW", "PRICE_DOWN"), 4).tolist() == [True] * 3 + [False]
    assert vector_condition(expr, Env({"price": [10, None]}, variables=("START_ROW", "PRICE_DOWN"), clause="DEFINE"),
                            "PRICE_DOWN", ("START_ROW", "PRICE_DOWN"), 2) is None   # NULLs: not from numpy


def test_vector_condition_leaves_what_float64_would_round():
    """Past 2**53 Python compares an integer and a float exactly, float64 does not: not from numpy."""
    env = Env({"a": [2 ** 53 + 1], "b": [2.0 ** 53]}, variables=("A",), clause="DEFINE")
    big, rounded = Literal(2 ** 53 + 1, "BIGINT"), Literal(2.0 ** 53, "DOUBLE")
    for left, right in ((Column("a"), Column("b")), (Column("a"), rounded), (big, Column("b"))):
        assert compile_fast(Binary(">", left, right), env, "A")(range(1), ("A",), 0, None) is True
        assert vector_condition(Binary(">", left, right), env, "A", ("A",), 1) is None
    mixed = Env({"a": [2 ** 53 + 1, 2 ** 53, 0.5]}, variables=("A", "B"), clause="DEFINE")  # float64: 2**53 twice
    drop = Binary(">", Column("a", "A"), Column("a", "B"))
    assert compile_fast(drop, mixed, "B")(range(2), ("A", "B"), 0, None) is True
    assert vector_condition(drop, mixed, "B", ("A", "B"), 3) is None


DECIMALS = T.StructType([T.StructField("price", T.DecimalType(10, 2)), T.StructField("ratio", T.DoubleType()),
                         T.StructField("qty", T.LongType())])
PRICE, RATIO, QTY = Column("price", "A"), Column("ratio", "A"), Column("qty", "A")


@pytest.mark.parametrize("expr, value, dtype", [
    (Binary("+", PRICE, RATIO), 10.75, T.DoubleType()),                       # DECIMAL + DOUBLE: DOUBLE
    (Binary("*", RATIO, PRICE), 5.125, T.DoubleType()),
    (Binary("*", PRICE, Literal(Decimal("1.5"), "DECIMAL")), Decimal("15.375"), T.DecimalType(13, 3)),
    (Binary("*", RATIO, Literal(Decimal("1.5"), "DECIMAL")), 0.75, T.DoubleType()),
    (Binary("+", PRICE, Literal(1, "INT")), Decimal("11.25"), T.DecimalType(10, 2)),
    (Binary("+", PRICE, QTY), Decimal("13.25"), T.DecimalType(10, 2)),
    (Binary("/", PRICE, PRICE), Decimal(1), T.DecimalType(23, 13)),
    (Binary("%", PRICE, Literal(Decimal("0.1"), "DECIMAL")), Decimal("0.05"), T.DecimalType(3, 2)),
    (Binary(">", PRICE, RATIO), True, T.BooleanType()),
    (Binary("=", RATIO, Literal(Decimal("0.5"), "DECIMAL")), True, T.BooleanType()),
    (Binary("-", Cast(PRICE, "DECIMAL(10, 1)"), RATIO), 9.8, T.DoubleType()),
])
@pytest.mark.parametrize("clause", ["DEFINE", "MEASURES"])
@pytest.mark.parametrize("semantics", ["flink", "standard"])
def test_decimal_meets_double_as_in_flink(expr, value, dtype, clause, semantics):
    """DECIMAL op DOUBLE is DOUBLE (the DECIMAL cast at planning: Python's Decimal + float is
    a TypeError), DECIMAL op DECIMAL or INTEGER stays an exact Decimal, on both evaluators."""
    env = Env({"price": [Decimal("10.25")], "ratio": [0.5], "qty": [3]}, variables=VARS, clause=clause)
    coerced = coerce(expr, DECIMALS, semantics)
    assert measure_type(coerced, DECIMALS, semantics) == measure_type(expr, DECIMALS, semantics) == dtype
    for f in (compile_expr(coerced, env), compile_fast(coerced, env, "A")):
        got = f((0,), ("A",), 1, ((0,), ("A",)))
        assert got == value and type(got) is type(value)
