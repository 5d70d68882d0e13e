"""Row-by-row explanation of one match: the seed's navigation tables, from the matcher's trace.

``explain(table, clause, ...)`` runs the clause on one partition with
``run_partition(..., trace=[...])``, takes the path of the chosen match (its rows and the
variable each row was mapped to) and adds the rows the matcher tried right after it and
rejected (row #5 of the seed's tables). For every row of that path it shows:

* ``#`` -- the row's position in the partition (``#1`` is the first row in ORDER BY order);
* the ``value`` column (``price``) and ``Classifier`` -- the variable the row is mapped to
  (empty for a row whose condition failed);
* ``[A.price]``, ``[B.price]``, ... ``[price]`` -- the rows mapped so far to each variable and
  to any variable (``*``), the current row included, as DEFINE sees them (``-`` = none);
* one column per expression, evaluated as DEFINE sees it at that row: for the row being
  tried as ``v``, ``v.price`` is its own price, ``SUM(price)`` sums the path up to it;
* ``DEFINE`` -- every condition the matcher evaluated for that row on this path, in order,
  with its result (``B false, C true``).

A NULL result is ``None`` (the seed prints it as ``-``, ``null`` or blank).

>>> import pandas as pd
>>> t = pd.DataFrame({"price": [10, 15, 20, 31, 35]})
>>> explain(t, "PATTERN (A B+) DEFINE A AS A.price >= 10, "
...            "B AS B.price > A.price AND SUM(price) < 100 AND SUM(B.price) < 80",
...         expressions=["SUM(price)"], semantics="standard")[["#", "price", "Classifier", "[B.price]", "SUM(price)"]]
    #  price Classifier       [B.price] SUM(price)
0  #1     10          A               -         10
1  #2     15          B              #2         25
2  #3     20          B          #2, #3         45
3  #4     31          B      #2, #3, #4         76
4  #5     35             #2, #3, #4, #5        111
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .match_recognize import expression_of, parse_match_recognize
from ..match_recognize import flink
from ..match_recognize.errors import MatchRecognizeError
from ..match_recognize.matcher import SEMANTICS, run_partition
from ..match_recognize.measures import trace as _evaluate
from ..match_recognize.program import labels_of

__all__ = ["ExplainError", "explain"]


class ExplainError(MatchRecognizeError):
    """``explain`` cannot show the asked match (no such partition or match number...)."""

    def __init__(self, message: str):
        super().__init__("explain", message)


def explain(table, clause: str, partition=None, expressions=(), *, match: int = 1,
            value: str = "price", semantics: str = "flink", aggregates: dict | None = None,
            rowtime: str | None = None) -> pd.DataFrame:
    """The evaluation table of match number ``match`` (1-based, in emission order) of one
    partition.

    ``table``: pandas or Spark DataFrame. ``clause``: ``MATCH_RECOGNIZE ( ... )`` or just its
    body (``PATTERN (...) DEFINE ...``). ``partition``: the PARTITION BY value(s) of the
    partition to explain (a scalar for one key, a tuple for several); may be left out when
    the table has one partition. ``expressions``: SQL expressions (``"A.price"``,
    ``"LAST(B.price, 1)"``, ``"SUM(price)"``) shown as one column each, named as written.
    """
    if semantics not in SEMANTICS:
        raise ExplainError(f"unknown semantics {semantics!r}; choose one of {', '.join(SEMANTICS)}")
    text = clause.strip()
    if not text.upper().startswith("MATCH_RECOGNIZE"):
        text = f"MATCH_RECOGNIZE (\n{text}\n)"
    spec = parse_match_recognize(text, aggregates=tuple(aggregates or ()))
    exprs = {e: expression_of(e, aggregates=tuple(aggregates or ())) for e in expressions}
    pdf = _one_partition(_pandas(table), spec.partition_by, partition)
    if value not in pdf.columns:
        raise ExplainError(f"no column {value!r} to show; the table has {', '.join(pdf.columns)}")
    if spec.order_by:
        pdf = pdf.sort_values([o.column for o in spec.order_by],
                              ascending=[o.ascending for o in spec.order_by],
                              kind="stable", ignore_index=True)
    columns = {c: pdf[c].to_numpy() for c in pdf.columns}
    seen = []
    result = run_partition(columns, spec, semantics, aggregates, rowtime=rowtime, trace=seen)
    if not 1 <= match <= len(result.matches):
        found = len(result.matches)
        raise ExplainError(f"match {match} does not exist: the partition has "
                           f"{found} match{'es' if found != 1 else ''}")
    chosen = result.matches[match - 1]
    rows, labels = list(chosen.rows), list(chosen.classifiers)
    if not rows:
        raise ExplainError(f"match {match} is empty: it has no rows to explain")
    tried = _tried(seen, rows, labels)
    failed = tried.get(len(rows), [])
    path_rows, path_labels = rows[:], labels[:]
    if failed:                 # the row tried after the match and rejected, as the seed shows it
        path_rows.append(failed[0][0])
        path_labels.append(failed[0][1])
    variables = ([element[0] for element in flink.validate(spec, semantics)]
                 if semantics != "standard" else labels_of(spec.pattern))
    steps = _evaluate(columns, path_rows, path_labels, exprs, variables=variables,
                      aggregates=aggregates, subsets=spec.subset_map,
                      avg_truncates=semantics == "flink-2.3")
    values = pdf[value].tolist()
    out = []
    for i, step in enumerate(steps):
        mapped = i < len(rows)
        row = {"#": f"#{step['row'] + 1}", value: values[step["row"]],
               "Classifier": step["classifier"] if mapped else ""}
        for v in variables:
            row[f"[{v}.{value}]"] = _ids(step["rows"][v])
        row[f"[{value}]"] = _ids(path_rows[:i + 1])
        for name in exprs:
            row[name] = _plain(step[name])
        row["DEFINE"] = ", ".join(f"{v} {'true' if ok else 'false'}" for _, v, ok in tried.get(i, []))
        out.append(row)
    frame = pd.DataFrame(out)
    for name in exprs:         # keep None as None and integers as integers
        frame[name] = pd.Series([r[name] for r in out], dtype=object)
    return frame


def _pandas(table) -> pd.DataFrame:
    if isinstance(table, pd.DataFrame):
        return table.reset_index(drop=True)
    if hasattr(table, "toPandas"):
        return table.toPandas()
    raise ExplainError(f"table must be a pandas or Spark DataFrame, not {type(table).__name__}")


def _one_partition(pdf: pd.DataFrame, keys: tuple, partition) -> pd.DataFrame:
    keys = list(keys)
    if not keys:
        if partition is not None:
            raise ExplainError("partition= given but the clause has no PARTITION BY")
        return pdf
    groups = pdf.groupby(keys, sort=True, dropna=False).indices
    if partition is None:
        if len(groups) != 1:
            names = ", ".join(repr(k) for k in list(groups)[:5])
            raise ExplainError(f"the table has {len(groups)} partitions ({names}...); "
                               f"choose one with partition=")
        return pdf.reset_index(drop=True)
    want = partition if isinstance(partition, tuple) or len(keys) == 1 else (partition,)
    for key, index in groups.items():
        if key == want or (isinstance(key, tuple) and len(key) == 1 and key[0] == want):
            return pdf.iloc[np.sort(index)].reset_index(drop=True)
    raise ExplainError(f"no partition {partition!r}; the table has "
                       f"{', '.join(repr(k) for k in list(groups)[:10])}")


def _tried(seen: list, rows: list, labels: list) -> dict:
    """Position on the path -> [(row, variable, result)] for every DEFINE evaluation whose
    history is the path up to that position (other threads' evaluations are left out)."""
    out = {}
    for t in seen:
        k = len(t["rows"]) - 1
        if k > len(rows):
            continue
        if list(t["rows"][:k]) == rows[:k] and list(t["classifiers"][:k]) == labels[:k] \
                and (k == len(rows) or t["row"] == rows[k]):
            entry = (t["row"], t["variable"], bool(t["result"]))
            if entry not in out.setdefault(k, []):
                out[k].append(entry)
    if len(rows) in out:       # after the match: only the rows that failed
        out[len(rows)] = [e for e in out[len(rows)] if not e[2]]
    return out


def _ids(rows) -> str:
    return ", ".join(f"#{r + 1}" for r in rows) if rows else "-"


def _plain(v):
    if isinstance(v, np.generic):
        return v.item()
    return v
