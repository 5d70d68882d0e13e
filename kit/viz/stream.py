"""``stream_timeline``: event time against arrival order, the watermark as a staircase.

Each row of the stream is a point at (arrival ``seq``, event time), coloured by key;
the watermark in force at each arrival is a dashed staircase beneath them; a row at or
below the staircase is late, drawn as a red × in a red ring. Reading it: the further a
point sits above the staircase, the longer Flink keeps its windows open for it.

The rows come to the driver in one collect of ``stream.df`` (``arrival_rows``).
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from .. import sparksql
from ..errors import KitError
from ..stream import Stream
from .marks import DASHED, LATE_COLOR, RING_X, Kind, check_column, check_title, legend, literal, title_params

__all__ = ["stream_timeline"]

TEXT = " (UTC)"  # suffix of the text copy of each timestamp column, for tooltips
WATERMARK, LATE = "watermark", "late row"
KINDS = [Kind(WATERMARK, "#555555", DASHED, filled=False), Kind(LATE, LATE_COLOR, RING_X)]


def stream_timeline(stream: Stream, key: str | None = None, max_rows: int = 2000,
                    width: int = 640, height: int = 260, title: str | None = None) -> alt.LayerChart:
    """Draw ``stream``: points per row (colour = the column ``key``), the watermark, late rows.

    Only the first ``max_rows`` arrivals are drawn (a chart is for looking, not for
    millions of points); the subtitle says when rows were left out. ``title``: the chart's
    title instead of the default (e.g. the parameter values a widget shows).
    """
    if not isinstance(stream, Stream):
        raise KitError(f"stream_timeline draws a kit.Stream (kit.stream(df, time=...)); got {type(stream).__name__}")
    if stream.time is None:
        raise KitError("stream_timeline draws rows by event time, and this stream has none: "
                       "kit.stream(df, time=<column>, ...) gives it one")
    check_title("stream_timeline", title)
    check_max_rows("stream_timeline", max_rows)
    if key is not None:
        check_column("stream_timeline", "key", key, stream.df.columns, "the stream")
    rows, count = arrival_rows(stream, max_rows)
    shown = rows.head(max_rows)
    time_type = "T" if stream.time_is_timestamp else "Q"
    scale = alt.Scale(type="utc") if time_type == "T" else alt.Undefined

    def when(column: str, title: str) -> alt.Tooltip:
        # timestamps: the UTC text plain_frame() wrote, so tooltips show milliseconds in UTC
        return alt.Tooltip(f"{column}{TEXT}:N" if time_type == "T" else f"{column}:Q", title=title)

    tooltip = [alt.Tooltip("seq:Q", title="arrival"), when(stream.time, "event time"),
               when("watermark", "watermark on arrival"), alt.Tooltip("late:N")]
    if key:
        tooltip.insert(0, alt.Tooltip(f"{key}:N"))
    if "proctime" in shown.columns:
        tooltip.append(when("proctime", "processing time"))
    n_late = int(shown["late"].sum())
    present = ([WATERMARK] if shown["watermark"].notna().any() else []) + ([LATE] if n_late else [])
    marks = legend("mark", KINDS, present)
    data = plain_frame(shown).assign(mark=lambda d: d["late"].map({True: LATE, False: "on time"}))
    base = alt.Chart(data).encode(x=alt.X("seq:Q", title="arrival order (seq)",
                                          axis=alt.Axis(tickMinStep=1, format="d")))
    event_time = alt.Y(f"{stream.time}:{time_type}", title=f"event time ({stream.time})", scale=scale)
    points = base.transform_filter("!datum.late").mark_point(filled=True, size=60, opacity=1).encode(
        y=event_time, color=(alt.Color(f"{key}:N", title=key) if key else alt.value("#1f77b4")),
        tooltip=tooltip)
    late = base.transform_filter("datum.late").mark_point(size=220, strokeWidth=1, opacity=1).encode(
        y=event_time, fill=marks["fill"], stroke=marks["stroke"], shape=marks["shape"], tooltip=tooltip)
    # sort by arrival: a line with a temporal y would otherwise be drawn in y order
    staircase = base.transform_filter("datum.watermark != null").transform_calculate(
        mark=literal(WATERMARK)).mark_line(interpolate="step-after", strokeDash=[4, 3]).encode(
        y=alt.Y(f"watermark:{time_type}"), order=alt.Order("seq:Q"), stroke=marks["stroke"],
        tooltip=[alt.Tooltip("seq:Q", title="arrival"), when("watermark", "watermark")])
    more = f"the first {max_rows} of {count if count is not None else 'more'} arrivals; " \
        if len(rows) > max_rows else ""
    facts = f"{more}{stream.watermark!r}; {n_late} late row{'s' if n_late != 1 else ''}"
    return alt.layer(staircase, points, late).properties(
        width=width, height=height, title=title_params("Event time vs arrival", facts, title))


def check_max_rows(function: str, max_rows) -> None:
    if not isinstance(max_rows, int) or isinstance(max_rows, bool) or max_rows < 1:
        raise KitError(f"{function}: max_rows must be a positive int; got {max_rows!r}")


def arrival_rows(stream: Stream, max_rows: int) -> tuple[pd.DataFrame, int | None]:
    """The first ``max_rows + 1`` rows of ``stream.df`` in arrival order, in one collect,
    and how many arrivals the stream has (None: not known)."""
    df, count = arrival_frame(stream, max_rows)
    return df.toPandas().sort_values("seq", ignore_index=True), count


def arrival_frame(stream: Stream, max_rows: int | None, columns=None):
    """``stream.df`` (``columns`` of it: the time, ``seq``, ``watermark``, ``late`` and
    ``proctime`` always) up to arrival ``max_rows`` (None: all), not collected, and the
    number of arrivals if known. A filter on ``seq``, not a ``limit``: a limit over several
    partitions collects in several jobs."""
    stream.require_own_names("the stream's charts")
    df = stream.df
    if columns is not None:
        df = sparksql.select(df, *[sparksql.name(c) for c in df.columns
                                   if c in columns or c in (stream.time, "seq", "watermark", "late", "proctime")])
    scan = stream.arrivals     # its first pass has run once stream.df is read
    return (df if max_rows is None else df.where(f"seq <= {int(max_rows)}")), getattr(scan, "count", None)


def plain_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Columns altair serialises stably: timestamps as UTC ISO strings with milliseconds,
    plus a readable copy of each (``"<col> (UTC)"``) for tooltips."""
    out = df.copy()
    for col in df.columns:
        if pd.api.types.is_datetime64_any_dtype(out[col]):
            iso = out[col].dt.strftime("%Y-%m-%dT%H:%M:%S.%f").str[:-3]
            out[col + TEXT] = iso.str.replace("T", " ").where(out[col].notna(), None)
            out[col] = iso.add("Z").where(out[col].notna(), None)
        elif out[col].dtype == object:
            out[col] = out[col].where(out[col].notna(), None)
    return out
