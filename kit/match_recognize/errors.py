"""Errors raised by the MATCH_RECOGNIZE layer; each names the clause and, when known, the
line and column of the offending text.

    >>> raise NotSupportedByFlink("PATTERN", "alternation '|'")
    Traceback (most recent call last):
    kit.match_recognize.errors.NotSupportedByFlink: PATTERN: alternation '|' is not supported by Flink; use semantics="standard" for the SQL standard behaviour
"""

from __future__ import annotations

from ..errors import KitError

__all__ = ["MatchRecognizeError", "NotSupportedByFlink", "MatchRuntimeError", "TooManyThreads"]


class MatchRecognizeError(KitError):
    """A MATCH_RECOGNIZE clause that cannot run: ``clause`` names the part (PATTERN, DEFINE...)."""

    def __init__(self, clause: str, message: str, pos=None):
        self.clause, self.pos = clause, pos
        where = f" (line {pos[0]}, column {pos[1]})" if pos else ""
        super().__init__(f"{clause}: {message}{where}")


class NotSupportedByFlink(MatchRecognizeError):
    """A feature of the SQL standard that Flink's MATCH_RECOGNIZE rejects."""

    def __init__(self, clause: str, feature: str, pos=None):
        super().__init__(clause, f"{feature} is not supported by Flink; "
                                 f'use semantics="standard" for the SQL standard behaviour', pos)


class MatchRuntimeError(MatchRecognizeError):
    """An error Flink raises while running (e.g. ``AFTER MATCH SKIP TO FIRST A`` onto the
    match's first row)."""


class TooManyThreads(MatchRecognizeError):
    """The standard matcher exceeded its bound on live threads (a pathological pattern)."""
