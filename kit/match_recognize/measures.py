"""MEASURES: the output rows of a match, and the row-by-row trace the seed's tables show.

ONE ROW PER MATCH gives one tuple of measures per match, evaluated over the whole match.
ALL ROWS PER MATCH gives, for every row of the match that is not inside ``{- -}``, the tuple
``(row_index, *measures)`` with RUNNING measures over the rows up to that one and FINAL ones
over the whole match; an empty match gives ``(row_index_where_it_was_found, *measures)``.

    PATTERN (A B+), rows 0..2 labelled A B B, MEASURES SUM(B.price) AS s
    ONE ROW -> (p1 + p2,)      ALL ROWS -> (0, None), (1, p1), (2, p1 + p2)
"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np

from .codegen import compile_fast
from .expressions import Env, compile_expr, is_timestamp, to_ms
from .spec import ALL_ROWS_OMIT, ALL_ROWS_SHOW, ALL_ROWS_WITH_UNMATCHED

__all__ = ["prepare_columns", "Measures", "trace"]


def prepare_columns(columns: dict):
    """numpy columns -> (plain lists, names of timestamp columns). datetime64 (and datetime
    objects) become epoch milliseconds; NaN/NaT/None/pandas NA become None; numpy scalars
    become Python scalars."""
    out, stamps = {}, set()
    for name, values in columns.items():
        arr = np.asarray(values)
        if arr.dtype.kind == "M":
            ms = arr.astype("datetime64[ms]")
            isnat = np.isnat(ms)
            ints = ms.astype("int64").tolist()
            out[name] = [None if nat else v for v, nat in zip(ints, isnat.tolist())] \
                if isnat.any() else ints
            stamps.add(name)
        elif arr.dtype.kind == "f":
            lst = arr.tolist()
            out[name] = [None if v != v else v for v in lst] if np.isnan(arr).any() else lst
        elif arr.dtype.kind == "O":
            lst = arr.tolist()
            if not all(type(v) is str for v in lst):
                if any(isinstance(v, (datetime, np.datetime64)) for v in lst):
                    stamps.add(name)
                lst = [_scalar(v) for v in lst]
            out[name] = lst
        else:
            out[name] = arr.tolist()
    return out, stamps


def _scalar(v):
    if v is None or type(v).__name__ in ("NAType", "NaTType"):   # pandas NA / NaT
        return None
    if isinstance(v, float) and v != v:
        return None
    if isinstance(v, np.datetime64):
        return None if np.isnat(v) else int(v.astype("datetime64[ms]").astype("int64"))
    if isinstance(v, datetime):
        return to_ms(np.datetime64(v.replace(tzinfo=None) if v.tzinfo is None else
                                   v.astimezone(timezone.utc).replace(tzinfo=None), "ms"))
    if isinstance(v, np.generic):
        return v.item()
    return v


class Measures:
    """The MEASURES of a clause, compiled against one partition."""

    def __init__(self, spec, env: Env, epoch_ms: bool = False):
        """``epoch_ms``: TIMESTAMP measures stay epoch milliseconds (ints), for a caller that
        builds Arrow columns of them at once (``kit.arrow.column``), not ``datetime64``s."""
        self.spec = spec
        self.names = [m.alias for m in spec.measures]
        self.fns = [compile_fast(m.expr, env) for m in spec.measures]
        self.stamps = [is_timestamp(m.expr, env) and not epoch_ms for m in spec.measures]
        if not any(self.stamps):
            self._out = tuple

    def _out(self, values):
        return tuple(np.datetime64(v, "ms") if s and v is not None else v
                     for v, s in zip(values, self.stamps))

    def one_row(self, R, L, m):
        F = (R, L)
        return self._out([f(R, L, m, F) for f in self.fns])

    def all_rows(self, R, L, X, m, start):
        """Rows of one match under ALL ROWS PER MATCH (``X``: excluded flags)."""
        F = (R, L)
        if not R:
            if self.spec.rows_per_match == ALL_ROWS_OMIT:
                return []
            return [(start,) + self._out([f((), (), m, F) for f in self.fns])]
        out = []
        for i, row in enumerate(R):
            if not X[i]:
                Ri, Li = R[:i + 1], L[:i + 1]
                out.append((row,) + self._out([f(Ri, Li, m, F) for f in self.fns]))
        return out

    def unmatched(self, row):
        return (row,) + (None,) * len(self.fns)

    @property
    def with_unmatched(self):
        return self.spec.rows_per_match == ALL_ROWS_WITH_UNMATCHED

    @property
    def show_empty(self):
        return self.spec.rows_per_match in (ALL_ROWS_SHOW, ALL_ROWS_WITH_UNMATCHED)


def trace(columns: dict, rows, labels, exprs: dict, variables=None, aggregates=None,
          subsets=None, avg_truncates=False):
    """The seed's evaluation table for one (partial) match: for each step ``i``, the row,
    its classifier, the rows mapped so far to each variable (``[A.price]`` lists, current row
    included) and the value of each expression as DEFINE sees it at that row.

    ``labels[i]`` is the variable row ``rows[i]`` is tried as (the last one may be a row
    that failed its condition, as row #5 in the seed's tables).
    """
    lists, stamps = prepare_columns(columns)
    variables = set(variables or labels)
    env = Env(lists, variables, subsets, aggregates, stamps, avg_truncates=avg_truncates)
    fns = {name: compile_expr(e, env) for name, e in exprs.items()}
    out = []
    for i in range(len(rows)):
        R, L = tuple(rows[:i + 1]), tuple(labels[:i + 1])
        step = {"row": rows[i], "classifier": labels[i],
                "rows": {v: [r for r, lab in zip(R, L) if lab == v] for v in sorted(variables)}}
        step.update({name: f(R, L, 1, (R, L)) for name, f in fns.items()})
        out.append(step)
    return out
