"""Spec objects back to Flink SQL text: ``to_sql(spec)`` parses back to an equal spec.

>>> from kit.sql import parse_match_recognize
>>> print(to_sql(parse_match_recognize("MATCH_RECOGNIZE (PATTERN (a (b|c)+?) DEFINE a AS x>1)")))
MATCH_RECOGNIZE (
    ONE ROW PER MATCH
    PATTERN (a (b | c)+?)
    DEFINE
        a AS x > 1
)
"""

from __future__ import annotations

import re

from . import spec as S
from .spec import INTERVAL_UNITS, RESERVED

__all__ = ["to_sql"]

# binding strength of expression operators, loosest first (as Flink SQL binds them)
_OR, _AND, _NOT, _PREDICATE, _CONCAT, _ADD, _MUL, _NEG, _PRIMARY = range(1, 10)
_BINARY = {"OR": _OR, "AND": _AND, "||": _CONCAT, "+": _ADD, "-": _ADD, "*": _MUL, "/": _MUL,
           "%": _MUL, "=": _PREDICATE, "<>": _PREDICATE, "!=": _PREDICATE, "<": _PREDICATE,
           "<=": _PREDICATE, ">": _PREDICATE, ">=": _PREDICATE}


def to_sql(node) -> str:
    """A MatchRecognize, pattern node or expression as Flink SQL."""
    if isinstance(node, S.MatchRecognize):
        return _clause(node)
    if isinstance(node, (S.Label, S.Concat, S.Alternation, S.Quantified, S.Permute, S.Exclusion,
                         S.Anchor, S.Empty)):
        return _pattern(node)
    return _expr(node)[0]


def name(text: str) -> str:
    """An identifier, back-quoted when it is not a plain word or is reserved."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text) and text.upper() not in RESERVED:
        return text
    return "`" + text.replace("`", "``") + "`"


def _clause(mr: S.MatchRecognize) -> str:
    lines = ["MATCH_RECOGNIZE ("]
    if mr.partition_by:
        lines.append("    PARTITION BY " + ", ".join(map(name, mr.partition_by)))
    if mr.order_by:
        lines.append("    ORDER BY " + ", ".join(
            name(o.column) + ("" if o.ascending else " DESC") for o in mr.order_by))
    if mr.measures:
        lines.append("    MEASURES")
        lines.append(",\n".join(f"        {to_sql(m.expr)} AS {name(m.alias)}"
                                for m in mr.measures))
    lines.append("    " + mr.rows_per_match)
    if mr.after_match is not None:
        kind, var = mr.after_match.kind, mr.after_match.var
        lines.append("    AFTER MATCH SKIP " + (f"{kind} {name(var)}" if var else kind))
    within = f" WITHIN {_interval(mr.within_ms)}" if mr.within_ms is not None else ""
    lines.append(f"    PATTERN ({_pattern(mr.pattern)}){within}")
    if mr.subsets:
        lines.append("    SUBSET " + ", ".join(
            f"{name(u)} = ({', '.join(map(name, vs))})" for u, vs in mr.subsets))
    if mr.define:
        lines.append("    DEFINE")
        lines.append(",\n".join(f"        {name(v)} AS {to_sql(e)}" for v, e in mr.define))
    lines.append(")")
    return "\n".join(lines)


def _pattern(node, inside: str = "") -> str:
    """``inside`` is the enclosing operator ("concat" or "quantified"), for parentheses."""
    if isinstance(node, S.Label):
        return name(node.name)
    if isinstance(node, S.Empty):
        return "()"
    if isinstance(node, S.Anchor):
        return node.kind
    if isinstance(node, S.Exclusion):
        return "{- " + _pattern(node.node) + " -}"
    if isinstance(node, S.Permute):
        return "PERMUTE(" + ", ".join(_pattern(i) for i in node.items) + ")"
    if isinstance(node, S.Alternation):
        text = " | ".join(_pattern(i, "alternation") for i in node.items)
        return f"({text})" if inside in ("concat", "quantified") else text
    if isinstance(node, S.Concat):
        text = " ".join(_pattern(i, "concat") for i in node.items)
        return f"({text})" if inside == "quantified" else text
    text = _pattern(node.node, "quantified") + _quantifier(node)
    return f"({text})" if inside == "quantified" else text


def _quantifier(q: S.Quantified) -> str:
    bounds = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((q.min, q.max))
    if bounds is None:
        if q.min == q.max:
            bounds = f"{{{q.min}}}"
        elif q.max is None:
            bounds = f"{{{q.min},}}"
        else:
            bounds = f"{{{q.min or ''},{q.max}}}"
    return bounds + ("" if q.greedy else "?")


def _interval(ms: int) -> str:
    unit = next(u for u, size in INTERVAL_UNITS.items() if ms % size == 0)
    return f"INTERVAL '{ms // INTERVAL_UNITS[unit]}' {unit}"


def _wrap(node, at_least: int) -> str:
    text, strength = _expr(node)
    return text if strength >= at_least else f"({text})"


def _expr(node) -> tuple:
    """(text, binding strength) of an expression."""
    if isinstance(node, S.Binary):
        level = _BINARY[node.op]
        return f"{_wrap(node.left, level)} {node.op} {_wrap(node.right, level + 1)}", level
    if isinstance(node, S.Unary):
        if node.op == "NOT":
            return "NOT " + _wrap(node.arg, _NOT), _NOT
        arg = _wrap(node.arg, _NEG)
        return ("- " if arg.startswith("-") else "-") + arg, _NEG
    if isinstance(node, S.IsNull):
        return f"{_wrap(node.arg, _PREDICATE)} IS {'NOT ' * node.negated}NULL", _PREDICATE
    if isinstance(node, S.Between):
        return (f"{_wrap(node.arg, _PREDICATE)} {'NOT ' * node.negated}BETWEEN "
                f"{_wrap(node.low, _CONCAT)} AND {_wrap(node.high, _CONCAT)}"), _PREDICATE
    if isinstance(node, S.InList):
        items = ", ".join(to_sql(i) for i in node.items)
        return f"{_wrap(node.arg, _PREDICATE)} {'NOT ' * node.negated}IN ({items})", _PREDICATE
    if isinstance(node, S.Call) and node.func == "LIKE" and len(node.args) == 2:
        left, right = node.args
        return f"{_wrap(left, _PREDICATE)} LIKE {_wrap(right, _CONCAT)}", _PREDICATE
    return _primary(node), _PRIMARY


def _primary(node) -> str:
    if isinstance(node, S.Column):
        return (name(node.var) + "." if node.var else "") + name(node.name)
    if isinstance(node, S.Literal):
        return _literal(node)
    if isinstance(node, S.Nav):
        default = 0 if node.kind in ("FIRST", "LAST") else 1
        offset = f", {node.offset}" if node.offset != default else ""
        return f"{node.kind}({to_sql(node.arg)}{offset})"
    if isinstance(node, S.Aggregate):
        args = node.arg if isinstance(node.arg, tuple) else (node.arg,)
        arg = "*" if node.arg is None else ("DISTINCT " * node.distinct) + ", ".join(
            to_sql(a) for a in args)
        return f"{node.func}({arg})"
    if isinstance(node, S.Subquery):
        return f"({node.text})"
    if isinstance(node, S.Call) and node.func == "ARRAY":
        return f"ARRAY[{', '.join(to_sql(a) for a in node.args)}]"
    if isinstance(node, S.Call):
        return f"{node.func}({', '.join(to_sql(a) for a in node.args)})"
    if isinstance(node, S.Case):
        parts = ["CASE"] + ([to_sql(node.operand)] if node.operand is not None else [])
        parts += [f"WHEN {to_sql(w)} THEN {to_sql(t)}" for w, t in node.whens]
        parts += [f"ELSE {to_sql(node.else_)}"] if node.else_ is not None else []
        return " ".join([*parts, "END"])
    if isinstance(node, S.Cast):
        return f"CAST({to_sql(node.arg)} AS {node.type})"
    if isinstance(node, S.Semantics):
        return f"{node.kind} {_primary(node.arg)}"
    if isinstance(node, S.MatchRowtime):
        return f"MATCH_ROWTIME({'' if node.arg is None else to_sql(node.arg)})"
    if isinstance(node, S.Classifier):
        return f"CLASSIFIER({'' if node.var is None else node.var})"
    return {S.MatchNumber: "MATCH_NUMBER()",
            S.MatchProctime: "MATCH_PROCTIME()"}[type(node)]


def _literal(lit: S.Literal) -> str:
    value = lit.value
    if lit.type == "STRING":
        return "'" + value.replace("'", "''") + "'"
    if lit.type == "BOOLEAN":
        return "TRUE" if value else "FALSE"
    if lit.type == "NULL":
        return "NULL"
    if lit.type == "DOUBLE":
        text = repr(float(value))
        return text if "e" in text else text + "E0"
    if lit.type in ("DATE", "TIMESTAMP"):
        return f"{lit.type} '{value.isoformat(sep=' ') if lit.type == 'TIMESTAMP' else value}'"
    if lit.type == "INTERVAL":
        return _interval(value)
    return str(value)
