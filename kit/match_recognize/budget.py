"""The step budget: a bound on a matcher's work in one partition, so that a pathological
pattern fails with a clear error instead of running for minutes.

    steps = sum over rows r of (partial matches, or threads, that meet row r)
          + rows read by the DEFINE conditions' aggregates (``Env.reads``)

A thread of the standard matcher whose DEFINEs read the match's history carries its labels,
and each step of it costs time in their number: it counts one step more per
``HISTORY_ROWS`` of them (``A+? B* C`` with ``C AS C.price > FIRST(A.price)`` over 10,000
rows ran 373 s on its steps alone).

Both are counts, not times, so the same input always gives the same answer. The default
budget, ``DEFAULT_STEPS + STEPS_PER_ROW * rows``, is far above what an ordinary pattern
spends (a few steps per row) and is spent in a few seconds; ``A+? B+ C`` over 1,000 rows
whose C never holds needs about 170 million. Raise it with ``step_budget=`` (Python) or
``kit.sql(..., config={"kit.match-recognize.step-budget": n})``.

>>> from kit.match_recognize.spec import Label
>>> budget = Budget(Label("A"), rows=0, limit=3)
>>> budget.spend(2)  # doctest: +ELLIPSIS
>>> budget.spend(2)  # doctest: +ELLIPSIS
Traceback (most recent call last):
kit.match_recognize.errors.TooManyThreads: PATTERN: (A) took more than 3 steps in this \
partition...
"""

from __future__ import annotations

from .errors import TooManyThreads
from .format import to_sql

__all__ = ["Budget", "DEFAULT_STEPS", "STEPS_PER_ROW", "HISTORY_ROWS", "STEP_BUDGET", "MAX_THREADS"]

DEFAULT_STEPS, STEPS_PER_ROW, HISTORY_ROWS = 1_000_000, 200, 25

#: ``kit.sql`` config keys (Flink-style option names) of ``step_budget`` and ``max_threads``.
STEP_BUDGET, MAX_THREADS = "kit.match-recognize.step-budget", "kit.match-recognize.max-threads"


class Budget:
    """``limit`` steps (None: the default for ``rows``) for matching ``pattern``;
    ``reads``: the one-item list a DEFINE Env counts its aggregates' rows in."""

    def __init__(self, pattern, rows: int, limit: int | None = None, reads: list | None = None):
        self.pattern, self.reads = pattern, reads if reads is not None else [0]
        self.per_row = STEPS_PER_ROW if limit is None else 0
        self.limit = limit if limit is not None else DEFAULT_STEPS + STEPS_PER_ROW * rows
        self.left = self.limit

    def add_rows(self, rows: int):
        """``rows`` more in the partition (a stream's key, released in batches): a default
        limit grows as if they had been there from the start."""
        self.limit += self.per_row * rows
        self.left += self.per_row * rows

    def spend(self, steps: int):
        """Count ``steps`` more; TooManyThreads once they and the reads pass the limit."""
        self.left -= steps
        if self.left < self.reads[0]:
            raise TooManyThreads("PATTERN", f"({to_sql(self.pattern)}) took more than "
                                            f"{self.limit:,} steps in this partition (rows met by partial "
                                            "matches, and rows read by DEFINE's aggregates): nested or "
                                            "reluctant quantifiers whose match rarely completes? Simplify the "
                                            "pattern or its conditions, add WITHIN, or raise the budget: "
                                            f"config={{'{STEP_BUDGET}': n}} in kit.sql, step_budget=n in "
                                            "match_recognize")
