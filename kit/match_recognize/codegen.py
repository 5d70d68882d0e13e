"""DEFINE and MEASURES compiled to Python source: the fast path of ``expressions.py``.

``compile_fast(expr, env, current)`` returns a function with the signature and results of
``compile_expr(expr, env)`` (the reference), but the common nodes -- columns, FIRST/LAST of
a column, literals, comparisons, AND/OR/NOT, IS NULL, arithmetic, CLASSIFIER(),
MATCH_NUMBER() -- are written inline into one function body instead of a tree of closures,
so a row costs one Python call instead of ten. Any other node (aggregates, CASE, CAST,
PREV/NEXT, function calls, ...) is called through its reference closure. ``current`` is
the variable whose DEFINE this is: its columns are then the row being classified.

    DEFINE PRICE_UP AS PRICE_UP.price > LAST(PRICE_DOWN.price, 1)
    ->  def fast(R, L, m, F):
            return (None if (t0 := c0[R[-1]]) is None else
                    None if (t1 := (c1[R[t2]] if (t2 := last(L, 'PRICE_DOWN', 1)) >= 0 else None)) is None
                    else t0 > t1)
"""

from __future__ import annotations

import functools

from .expressions import _ARITH, Env, compile_expr
from .spec import Binary, Classifier, Column, IsNull, Literal, MatchNumber, Nav, Semantics, Unary

__all__ = ["compile_fast"]

_COMPARE = {"=": "==", "<>": "!=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def _last(L, var, n):
    """Index in ``L`` of the ``n``-th last ``var`` (0 = the last one), or -1."""
    i = len(L) - 1
    while i >= 0:
        if L[i] == var:
            if n == 0:
                return i
            n -= 1
        i -= 1
    return -1


def _last_in(L, labels, n):
    i = len(L) - 1
    while i >= 0:
        if L[i] in labels:
            if n == 0:
                return i
            n -= 1
        i -= 1
    return -1


def _first_in(L, labels, n):
    for i, label in enumerate(L):
        if label in labels:
            if n == 0:
                return i
            n -= 1
    return -1


@functools.lru_cache(maxsize=256)
def _compile(source: str, filename: str):
    """Python's compile, once per expression: every partition compiles the same source."""
    return compile(source, filename, "exec")


def compile_fast(expr, env: Env, current: str | None = None):
    """``compile_expr(expr, env)``, generated as one function (see the module docstring)."""
    reference = compile_expr(expr, env)  # raises the reference's errors, unchanged
    gen = _Generator(env, current if env.clause == "DEFINE" else None)
    try:
        body = gen.expr(expr)
        source = f"def fast(R, L, m, F):\n    return {body}\n"
        code = _compile(source, f"<{env.clause} {current or ''}>")
    except (RecursionError, SyntaxError, MemoryError):  # too deep for Python's parser
        return reference
    namespace = dict(gen.names, last=_last, last_in=_last_in, first_in=_first_in)
    exec(code, namespace)  # noqa: S102 -- source built above from the expression tree only
    fast = namespace["fast"]
    fast.source = source
    return fast


class _Generator:
    def __init__(self, env: Env, current):
        self.env, self.current = env, current
        self.names = {}   # name in the generated code -> value (columns, constants, closures)
        self.temps = 0

    def bind(self, value, prefix):
        name = f"{prefix}{len(self.names)}"
        self.names[name] = value
        return name

    def temp(self):
        self.temps += 1
        return f"t{self.temps}"

    def expr(self, e) -> str:
        method = getattr(self, "_" + type(e).__name__.lower(), None)
        code = method(e) if method is not None else None
        if code is None:  # not generated: call the reference closure for this node
            f = self.bind(compile_expr(e, self.env), "f")
            return f"{f}(R, L, m, F)"
        return code

    def _literal(self, e: Literal):
        return self.bind(compile_expr(e, self.env)(None, None, None, None), "k")

    def _at(self, col, index_code):
        return f"{col}[R[{index_code}]]"

    def _column(self, e: Column):
        col = self.bind(self.env.column(e.name, e.pos), "c")
        if e.var is None:
            return f"({col}[R[-1]] if R else None)"
        labels = self.env.labels(e.var, e.pos)
        if self.current is not None and self.current in labels:
            return f"{col}[R[-1]]"   # in DEFINE of the current variable: the row being classified
        return self._located(col, labels, 0, last=True)

    def _located(self, col, labels, n, last):
        i = self.temp()
        if len(labels) == 1 and last:
            (var,) = labels
            find = f"last(L, {self.bind(var, 'v')}, {n})"
        else:
            find = f"{'last_in' if last else 'first_in'}(L, {self.bind(frozenset(labels), 's')}, {n})"
        return f"({col}[R[{i}]] if ({i} := {find}) >= 0 else None)"

    def _nav(self, e: Nav):
        kind = e.kind.upper()
        if kind not in ("FIRST", "LAST") or not isinstance(e.arg, Column) or e.offset < 0:
            return None
        col = self.bind(self.env.column(e.arg.name, e.arg.pos), "c")
        n = e.offset
        if e.arg.var is None:
            index = f"-1 - {n}" if kind == "LAST" else f"{n}"
            return f"({col}[R[{index}]] if {n} < len(R) else None)"
        return self._located(col, self.env.labels(e.arg.var, e.arg.pos), n, last=kind == "LAST")

    def _binary(self, e: Binary):
        op = e.op.upper()
        a, b = self.expr(e.left), self.expr(e.right)
        ta, tb = self.temp(), self.temp()
        if op == "AND":
            return (f"(False if ({ta} := {a}) is False else False if ({tb} := {b}) is False "
                    f"else None if {ta} is None or {tb} is None else True)")
        if op == "OR":
            return (f"(True if ({ta} := {a}) is True else True if ({tb} := {b}) is True "
                    f"else None if {ta} is None or {tb} is None else False)")
        if op in _COMPARE:
            value = f"{ta} {_COMPARE[op]} {tb}"
        elif op in ("+", "-", "*"):
            value = f"{ta} {op} {tb}"
        elif op in _ARITH:
            value = f"{self.bind(_ARITH[op], 'op')}({ta}, {tb})"
        else:
            return None
        return f"(None if ({ta} := {a}) is None else None if ({tb} := {b}) is None else {value})"

    def _unary(self, e: Unary):
        op = e.op.upper()
        if op == "+":
            return self.expr(e.arg)
        if op not in ("NOT", "-"):
            return None
        t = self.temp()
        return f"(None if ({t} := {self.expr(e.arg)}) is None else {'not ' if op == 'NOT' else '-'}{t})"

    def _isnull(self, e: IsNull):
        return f"({self.expr(e.arg)} is {'not ' if e.negated else ''}None)"

    def _semantics(self, e: Semantics):
        return self.expr(e.arg) if e.kind.upper() == "RUNNING" else None

    def _classifier(self, e: Classifier):
        return "(L[-1] if L else None)"

    def _matchnumber(self, e: MatchNumber):
        return "m"
