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
    """A MATCH_RECOGNIZE clause that cannot run: ``clause`` names the part (PATTERN, DEFINE...).

    It pickles with its type, so a Spark task can hand it to the driver (``operator``)."""

    def __init__(self, clause: str, message: str, pos=None):
        self.clause, self.message, self.pos = clause, message, pos
        where = f" (line {pos[0]}, column {pos[1]})" if pos else ""
        super().__init__(f"{clause}: {message}{where}")

    def __reduce__(self):
        return _rebuild, (type(self), self.clause, self.message, self.pos)

    def in_partition(self, where: str) -> "MatchRecognizeError":
        """The same error, its message naming the PARTITION BY values ``where``."""
        return _rebuild(type(self), self.clause, f"{self.message} (partition {where})", self.pos)


def _rebuild(cls, clause, message, pos):
    error = cls.__new__(cls)
    MatchRecognizeError.__init__(error, clause, message, pos)
    return error


class NotSupportedByFlink(MatchRecognizeError):
    """A feature of the SQL standard that Flink's MATCH_RECOGNIZE rejects."""

    def __init__(self, clause: str, feature: str, pos=None):
        super().__init__(clause, f"{feature} is not supported by Flink; "
                                 f'use semantics="standard" for the SQL standard behaviour', pos)


class MatchRuntimeError(MatchRecognizeError):
    """An error Flink raises while running (e.g. ``AFTER MATCH SKIP TO FIRST A`` onto the
    match's first row)."""


class TooManyThreads(MatchRecognizeError):
    """A matcher exceeded its step budget or (the standard one) its bound on live threads:
    a pathological pattern."""
