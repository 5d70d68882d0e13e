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

import math
import numbers
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from .errors import KitError

__all__ = ["Duration", "Time", "WatermarkStrategy", "Clock"]

_MS = {"millis": 1, "milliseconds": 1, "seconds": 1_000, "minutes": 60_000, "hours": 3_600_000,
       "days": 86_400_000}


@dataclass(frozen=True, order=True)
class Duration:
    """A span of time in milliseconds: ``Duration.of_minutes(5).to_milliseconds() == 300000``.

    Flink's times have millisecond precision, so a factory refuses what is no whole number of
    milliseconds, and anything that is no number:

    >>> Duration.of_seconds(1.5)
    Duration.of_millis(1500)
    >>> Duration.of_millis(1.5)   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    kit.errors.KitError: Duration.of_millis(1.5) is 1.5 ms, not a whole number of milliseconds (...)
    >>> Duration.of_minutes("5")
    Traceback (most recent call last):
    kit.errors.KitError: Duration.of_minutes: minutes must be a number, e.g. Duration.of_minutes(5); not the str '5'
    """

    millis: int

    def __post_init__(self):
        if isinstance(self.millis, bool) or not isinstance(self.millis, numbers.Integral):
            raise KitError(f"Duration(millis): millis must be an int number of milliseconds (or use "
                           f"Duration.of_seconds(...), Time.minutes(...)); not {_described(self.millis)}")
        object.__setattr__(self, "millis", int(self.millis))

    @staticmethod
    def of_millis(millis) -> "Duration":
        return _of(millis, "Duration.of_millis", "millis")

    @staticmethod
    def of_seconds(seconds) -> "Duration":
        return _of(seconds, "Duration.of_seconds", "seconds")

    @staticmethod
    def of_minutes(minutes) -> "Duration":
        return _of(minutes, "Duration.of_minutes", "minutes")

    @staticmethod
    def of_hours(hours) -> "Duration":
        return _of(hours, "Duration.of_hours", "hours")

    @staticmethod
    def of_days(days) -> "Duration":
        return _of(days, "Duration.of_days", "days")

    def to_milliseconds(self) -> int:
        return self.millis

    def __repr__(self) -> str:
        for unit, size in (("days", 86_400_000), ("hours", 3_600_000),
                           ("minutes", 60_000), ("seconds", 1_000)):
            if self.millis and self.millis % size == 0:
                return f"Duration.of_{unit}({self.millis // size})"
        return f"Duration.of_millis({self.millis})"


class Time:
    """Flink's legacy ``Time`` factory (``Time.hours(-8)`` in window offsets); returns a Duration.

    >>> Time.minutes(1) == Duration.of_seconds(60)
    True
    """

    @staticmethod
    def milliseconds(milliseconds) -> Duration:
        return _of(milliseconds, "Time.milliseconds", "milliseconds")

    @staticmethod
    def seconds(seconds) -> Duration:
        return _of(seconds, "Time.seconds", "seconds")

    @staticmethod
    def minutes(minutes) -> Duration:
        return _of(minutes, "Time.minutes", "minutes")

    @staticmethod
    def hours(hours) -> Duration:
        return _of(hours, "Time.hours", "hours")

    @staticmethod
    def days(days) -> Duration:
        return _of(days, "Time.days", "days")


def _described(value) -> str:
    """``value`` named with its type, for "not ..." in a message: ``the int 60``."""
    if value is None:
        return "None"
    shown = value if isinstance(value, numbers.Number) and not isinstance(value, bool) else repr(value)
    return f"the {type(value).__name__} {shown}"   # a numpy int64 as 60, not np.int64(60)


def _of(n, call: str, param: str) -> Duration:
    """``n`` of the unit ``param`` names as a Duration, for the factory ``call``: a number
    (a float too: ``Time.seconds(1.5)``) that makes a whole number of milliseconds."""
    if isinstance(n, bool) or not isinstance(n, (numbers.Real, Decimal)):
        raise KitError(f"{call}: {param} must be a number, e.g. {call}(5); not {_described(n)}")
    try:
        if isinstance(n, numbers.Integral):
            exact = Fraction(int(n))
        elif isinstance(n, (numbers.Rational, Decimal)):
            exact = Fraction(n)
        else:   # a float as written: 1.1 seconds is 1100 ms, not 1100.0000000000002
            exact = Fraction(repr(float(n)))
    except (ValueError, OverflowError):   # NaN, infinity
        raise KitError(f"{call}: {param} must be a finite number; got {n!r}") from None
    ms = exact * _MS[param]
    if ms.denominator != 1:
        raise KitError(f"{call}({n!r}) is {float(ms):g} ms, not a whole number of milliseconds "
                       "(Flink's times have millisecond precision)")
    return Duration(int(ms))


def to_duration(value, owner: str, name: str, *, kinds: str = "a Time, Duration or timedelta",
                like: str = "Time", bare_ms: bool = False) -> Duration:
    """``value``, given to ``owner``'s parameter ``name`` as a span of time, as a Duration.

    It takes a Duration (what ``Time.*`` returns too) or a ``datetime.timedelta`` of whole
    milliseconds. A bare number is refused, as PyFlink refuses it (``of(size: Time)`` calls
    ``size.to_milliseconds()``): it says no unit, and ``of(60)`` is rarely meant as 60 ms.
    ``bare_ms``: an int is milliseconds, where Flink's own API takes a ``long`` (a dynamic
    gap's extractor) -- and for the kit's own callers. ``kinds`` names what the parameter
    takes, for the message, and ``like`` the factory its examples use (``"Duration"`` where
    PyFlink takes a Duration: watermarks, clocks, state TTL).

    >>> to_duration(timedelta(minutes=5), "EventTimeSessionWindows.with_gap", "gap")
    Duration.of_minutes(5)
    >>> to_duration(60, "TumblingEventTimeWindows.of", "size")   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    kit.errors.KitError: TumblingEventTimeWindows.of: size must be a Time, Duration or timedelta, ...; not the int 60
    """
    if isinstance(value, Duration):
        return value
    if bare_ms and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return Duration(int(value))
    if isinstance(value, timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        if micros % 1_000 or getattr(value, "nanoseconds", 0):   # pandas' Timedelta has nanoseconds
            raise KitError(f"{owner}: {name} {value!r} is not a whole number of milliseconds (Flink's "
                           "times have millisecond precision)")
        return Duration(micros // 1_000)
    seconds, ms = ("Time.seconds", "Time.milliseconds") if like == "Time" else ("Duration.of_seconds",
                                                                               "Duration.of_millis")
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
        example = (f"{seconds}({value}) or {ms}({value})" if isinstance(value, numbers.Integral)
                   else f"{seconds}({value})")
    else:
        example = f"{seconds}(5)"
    raise KitError(f"{owner}: {name} must be {kinds}, e.g. {example}; not {_described(value)}")


_UNITS = (("days", 86_400_000), ("hours", 3_600_000), ("minutes", 60_000), ("seconds", 1_000))


def time_repr(ms: int) -> str:
    """Milliseconds as the ``Time`` call a user would type, in the largest unit that divides
    them: ``time_repr(60000) == "Time.minutes(1)"``."""
    unit = next((f"{name}({ms // size})" for name, size in _UNITS if ms and ms % size == 0), None)
    return f"Time.{unit or f'milliseconds({ms})'}"


def millis(value, owner: str, name: str, **options) -> int:
    """``to_duration(value, owner, name, **options)`` in milliseconds: the one way the kit
    reads a span of time from its user (window sizes, gaps, offsets, lateness, bounds)."""
    return to_duration(value, owner, name, **options).millis


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
        delay = to_duration(max_out_of_orderness, "WatermarkStrategy.for_bounded_out_of_orderness",
                            "max_out_of_orderness", like="Duration")
        if delay.millis < 0:
            raise KitError(f"max_out_of_orderness must be >= 0 ms; got {delay!r}")
        return WatermarkStrategy("bounded", delay)

    @staticmethod
    def for_monotonous_timestamps() -> "WatermarkStrategy":
        return WatermarkStrategy("bounded", Duration(0))

    @staticmethod
    def for_sql_delay(delay: Duration) -> "WatermarkStrategy":
        """Flink SQL's ``WATERMARK FOR t AS t - INTERVAL ...``: no extra millisecond."""
        delay = to_duration(delay, "WatermarkStrategy.for_sql_delay", "delay", like="Duration")
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

    @property
    def lag(self) -> int:
        """How far a watermark of the largest timestamp seen stays behind it (ms)."""
        return -self.watermark(0)

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
        object.__setattr__(self, "step", to_duration(self.step, "Clock", "step", like="Duration"))
        if self.step.millis <= 0:
            raise KitError(f"Clock step must be > 0 ms; got {self.step!r}")

    def __repr__(self) -> str:
        start = repr(self.start).replace("datetime.datetime", "datetime")
        return f"Clock(start={start}, step={self.step!r})"
