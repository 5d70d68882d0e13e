"""Durations, watermark strategies and the simulated processing-time clock (PyFlink's names).

Flink measures time in milliseconds since the epoch. A watermark ``W`` says "no more
elements with timestamp ``<= W``"; an element with ``ts <= W`` that still arrives is
*late*. The strategies compute the watermark from the elements seen so far, after each
element (the replay has no periodic emitter, so this is what Flink does with a
watermark after every element):

======================================================  ===========================================
strategy                                                watermark after elements ``e1..ei``
======================================================  ===========================================
``for_bounded_out_of_orderness(Duration.of_seconds(5))``  ``max(ts) - 5000 - 1``
``for_monotonous_timestamps()``                         ``max(ts) - 1``
``for_sql_delay(Duration.of_seconds(5))``               ``max(ts) - 5000`` (SQL ``WATERMARK FOR t AS t - INTERVAL '5' SECOND``)
``from_column("wm")``                                   ``max(wm)``: each row carries a watermark (punctuated)
``no_watermarks()``                                     none until the end of input
======================================================  ===========================================

Before the first element the watermark is ``Long.MIN_VALUE`` (the kit writes NULL);
the end of a bounded input sends ``Long.MAX_VALUE``, which fires every pending timer.

>>> WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5)).watermark(10_000)
4999
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .errors import KitError

__all__ = ["Duration", "Time", "WatermarkStrategy", "Clock"]


@dataclass(frozen=True, order=True)
class Duration:
    """A span of time in milliseconds: ``Duration.of_minutes(5).to_milliseconds() == 300000``."""

    millis: int

    @staticmethod
    def of_millis(n: int) -> "Duration":
        return Duration(int(n))

    @staticmethod
    def of_seconds(n: float) -> "Duration":
        return Duration(round(n * 1_000))

    @staticmethod
    def of_minutes(n: float) -> "Duration":
        return Duration(round(n * 60_000))

    @staticmethod
    def of_hours(n: float) -> "Duration":
        return Duration(round(n * 3_600_000))

    @staticmethod
    def of_days(n: float) -> "Duration":
        return Duration(round(n * 86_400_000))

    def to_milliseconds(self) -> int:
        return self.millis

    def __repr__(self) -> str:
        for unit, size in (("days", 86_400_000), ("hours", 3_600_000),
                           ("minutes", 60_000), ("seconds", 1_000)):
            if self.millis and self.millis % size == 0:
                return f"Duration.of_{unit}({self.millis // size})"
        return f"Duration.of_millis({self.millis})"


class Time:
    """Flink's legacy ``Time`` factory (``Time.hours(-8)`` in window offsets); returns a Duration."""

    milliseconds = staticmethod(Duration.of_millis)
    seconds = staticmethod(Duration.of_seconds)
    minutes = staticmethod(Duration.of_minutes)
    hours = staticmethod(Duration.of_hours)
    days = staticmethod(Duration.of_days)


def _duration(value, name: str) -> Duration:
    if not isinstance(value, Duration):
        raise KitError(f"{name} must be a Duration, e.g. Duration.of_seconds(5); got {value!r}")
    return value


@dataclass(frozen=True)
class WatermarkStrategy:
    """How the watermark follows the elements; build it with the class methods.

    ``kind`` is ``"bounded"`` (watermark ``max(ts) - delay - 1``), ``"sql"`` (``max(ts) -
    delay``), ``"column"`` (``max(column)``) or ``"none"``.
    """

    kind: str
    delay: Duration = Duration(0)
    column: str | None = None

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: Duration) -> "WatermarkStrategy":
        delay = _duration(max_out_of_orderness, "max_out_of_orderness")
        if delay.millis < 0:
            raise KitError(f"max_out_of_orderness must be >= 0 ms; got {delay!r}")
        return WatermarkStrategy("bounded", delay)

    @staticmethod
    def for_monotonous_timestamps() -> "WatermarkStrategy":
        return WatermarkStrategy("bounded", Duration(0))

    @staticmethod
    def for_sql_delay(delay: Duration) -> "WatermarkStrategy":
        """Flink SQL's ``WATERMARK FOR t AS t - INTERVAL ...``: no extra millisecond."""
        delay = _duration(delay, "delay")
        if delay.millis < 0:
            raise KitError(f"delay must be >= 0 ms; got {delay!r}")
        return WatermarkStrategy("sql", delay)

    @staticmethod
    def from_column(column: str) -> "WatermarkStrategy":
        """Punctuated watermarks: ``column`` holds the watermark emitted after its row (NULL: none)."""
        if not isinstance(column, str) or not column:
            raise KitError(f"from_column needs a column name; got {column!r}")
        return WatermarkStrategy("column", column=column)

    @staticmethod
    def no_watermarks() -> "WatermarkStrategy":
        return WatermarkStrategy("none")

    def watermark(self, max_timestamp: int) -> int | None:
        """The watermark after an element when the largest timestamp seen is ``max_timestamp``
        (ms); None for none, also where it would fall below ``Long.MIN_VALUE`` (Flink's
        generator starts its maximum at ``Long.MIN_VALUE + delay + 1``)."""
        if self.kind not in ("bounded", "sql"):
            return None
        watermark = max_timestamp - self.delay.millis - (self.kind == "bounded")
        return watermark if watermark >= -2 ** 63 else None

    def __repr__(self) -> str:
        if self.kind == "bounded":
            if self.delay.millis == 0:
                return "WatermarkStrategy.for_monotonous_timestamps()"
            return f"WatermarkStrategy.for_bounded_out_of_orderness({self.delay!r})"
        if self.kind == "sql":
            return f"WatermarkStrategy.for_sql_delay({self.delay!r})"
        if self.kind == "column":
            return f"WatermarkStrategy.from_column({self.column!r})"
        return "WatermarkStrategy.no_watermarks()"


@dataclass(frozen=True)
class Clock:
    """A simulated processing-time clock: arrival ``i`` happens at ``start + i * step``.

    >>> Clock(datetime(2024, 1, 1, 12), Duration.of_minutes(10))
    Clock(start=datetime(2024, 1, 1, 12, 0), step=Duration.of_minutes(10))
    """

    start: datetime
    step: Duration = Duration.of_seconds(1)

    def __post_init__(self):
        if isinstance(self.start, str):
            object.__setattr__(self, "start", datetime.fromisoformat(self.start))
        if not isinstance(self.start, datetime):
            raise KitError(f"Clock start must be a datetime or ISO string; got {self.start!r}")
        if _duration(self.step, "step").millis <= 0:
            raise KitError(f"Clock step must be > 0 ms; got {self.step!r}")

    def __repr__(self) -> str:
        start = repr(self.start).replace("datetime.datetime", "datetime")
        return f"Clock(start={start}, step={self.step!r})"
