"""An interval literal of the tree in milliseconds: ``interval_ms``.

Flink's day-time intervals: ``INTERVAL '1' HOUR``, ``INTERVAL '1:30' HOUR TO MINUTE``,
``INTERVAL '1 02:03:04.5' DAY TO SECOND``, ``INTERVAL -'5' SECOND``, read by the kit's Flink
dialect into one ``exp.Interval`` whose value, units and sign carry their positions, so an
error names the user's line and column.

>>> from kit.sql.statement import Statement
>>> interval_ms(Statement("SELECT INTERVAL '1:30' HOUR TO MINUTE").tree.selects[0], "")
5400000
"""

from __future__ import annotations

import decimal
import re

from sqlglot import exp

from ..match_recognize.spec import INTERVAL_UNITS
from .dialect import first_token
from .errors import error_at

__all__ = ["LEADING_DIGITS", "fields_ms", "interval_ms"]

LEADING_DIGITS = 10   # Calcite's largest interval precision: DAY(10), HOUR(10)...


def interval_ms(node: exp.Interval, text: str) -> int:
    """``node`` (an ``INTERVAL`` of ``text``) in milliseconds; a SqlError at the user's line and
    column when it is no literal, names no day-time unit, or its value does not fit the units."""
    value = node.this
    negative = isinstance(value, exp.Neg)
    value = value.this if negative else value
    if not isinstance(value, exp.Literal):
        raise error_at(text, "expected an interval literal such as '1'", *(first_token(value) or first_token(node)))
    unit = node.args.get("unit")
    first, last = (unit.this, unit.expression) if isinstance(unit, exp.IntervalSpan) else (unit, unit)
    first, last = _unit(first, text), _unit(last, text)
    ms = fields_ms(value.name, first, last)
    if ms is None:
        raise error_at(text, f"invalid interval '{value.name}' for {first}" + (f" TO {last}" if last != first else "")
                       + f": give its fields as numbers (at most {LEADING_DIGITS} digits in the first), "
                       "e.g. '1' HOUR or '1:30' HOUR TO MINUTE", value.meta["start"])
    return -ms if negative else ms


def _unit(var: exp.Expression, text: str) -> str:
    """The day-time unit ``var`` names (``HOURS`` is ``HOUR``); a SqlError where it names none."""
    unit = var.name.upper() if isinstance(var, exp.Var) else ""
    if unit.endswith("S") and unit[:-1] in INTERVAL_UNITS:
        unit = unit[:-1]
    if unit not in INTERVAL_UNITS:
        raise error_at(text, "expected an interval unit (" + ", ".join(INTERVAL_UNITS) + ")", *first_token(var))
    return unit


def fields_ms(value: str, first: str, last: str):
    """``'1:30'`` HOUR TO MINUTE -> 5_400_000; None when the text does not fit the units or
    its first field has more than ``LEADING_DIGITS`` digits."""
    units = list(INTERVAL_UNITS)
    lo, hi = units.index(first), units.index(last)
    if hi < lo:
        return None
    fields = units[lo:hi + 1]
    text = value.strip()
    sign = -1 if text.startswith("-") else 1
    parts = re.split(r"[ :]", text.lstrip("+-"))
    if len(parts) != len(fields) or len(parts[0].split(".")[0]) > LEADING_DIGITS:
        return None
    try:
        total = decimal.Decimal(0)
        for i, (part, unit) in enumerate(zip(parts, fields)):
            if "." in part and not (i == len(parts) - 1 and unit == "SECOND"):
                return None
            total += decimal.Decimal(part) * INTERVAL_UNITS[unit]
    except decimal.InvalidOperation:
        return None
    return sign * int(total)
