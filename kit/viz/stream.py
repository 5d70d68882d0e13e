"""``stream_timeline``: event time against arrival order, the watermark as a staircase.

Each row of the stream is a point at (arrival ``seq``, event time), coloured by key;
the watermark in force at each arrival is a staircase beneath them; a row at or below
the staircase is late and drawn as a red cross. Reading it: the further a point sits
above the staircase, the longer Flink keeps its windows open for it.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from ..stream import Stream

__all__ = ["stream_timeline"]

LATE_COLOR = "#d62728"
TEXT = " (UTC)"  # suffix of the text copy of each timestamp column, for tooltips


def stream_timeline(stream: Stream, key: str | None = None, max_rows: int = 2000,
                    width: int = 640, height: int = 260) -> alt.LayerChart:
    """Draw ``stream``: points per row (colour = ``key``), the watermark, late rows marked.

    Only the first ``max_rows`` arrivals are drawn (a chart is for looking, not for
    millions of points); the title says when rows were left out.
    """
    rows = stream.df.limit(max_rows + 1).toPandas()
    shown = rows.head(max_rows)
    time_type = "T" if stream.time_is_timestamp else "Q"
    scale = alt.Scale(type="utc") if time_type == "T" else alt.Undefined

    def when(column: str, title: str) -> alt.Tooltip:
        # timestamps: the UTC text _plain() wrote, so tooltips show milliseconds in UTC
        return alt.Tooltip(f"{column}{TEXT}:N" if time_type == "T" else f"{column}:Q", title=title)

    tooltip = [alt.Tooltip("seq:Q", title="arrival"), when(stream.time, "event time"),
               when("watermark", "watermark on arrival"), alt.Tooltip("late:N")]
    if key:
        tooltip.insert(0, alt.Tooltip(f"{key}:N"))
    if "proctime" in shown.columns:
        tooltip.append(when("proctime", "processing time"))
    data = _plain(shown).assign(arrival=lambda d: d["late"].map({True: "late", False: "on time"}))
    base = alt.Chart(data).encode(x=alt.X("seq:Q", title="arrival order (seq)",
                                          axis=alt.Axis(tickMinStep=1, format="d")))
    event_time = alt.Y(f"{stream.time}:{time_type}", title=f"event time ({stream.time})", scale=scale)
    points = base.mark_point(filled=True, opacity=1).encode(
        y=event_time,
        color=(alt.Color(f"{key}:N", title=key) if key else alt.value("#1f77b4")),
        shape=alt.Shape("arrival:N", title="arrival", scale=alt.Scale(
            domain=["on time", "late"], range=["circle", "cross"])),
        size=alt.Size("arrival:N", legend=None, scale=alt.Scale(domain=["on time", "late"], range=[60, 160])),
        tooltip=tooltip,
    )
    late_ring = base.mark_point(size=420, strokeWidth=2, color=LATE_COLOR).encode(
        y=event_time).transform_filter("datum.late")
    # sort by arrival: a line with a temporal y would otherwise be drawn in y order
    staircase = base.mark_line(interpolate="step-after", color="#555", strokeDash=[4, 3]).encode(
        y=alt.Y(f"watermark:{time_type}"),
        order=alt.Order("seq:Q"),
        tooltip=[alt.Tooltip("seq:Q", title="arrival"), when("watermark", "watermark")],
    ).transform_filter("datum.watermark != null")
    n_late = int(shown["late"].sum())
    more = " (first %d arrivals)" % max_rows if len(rows) > max_rows else ""
    title = alt.TitleParams(
        f"Event time vs arrival{more}",
        subtitle=[f"watermark: {stream.watermark!r} — dashed staircase; "
                  f"{n_late} late row{'s' if n_late != 1 else ''} (× in a red ring)"],
        anchor="start")
    return alt.layer(staircase, late_ring, points).properties(width=width, height=height, title=title)


def _plain(df: pd.DataFrame) -> pd.DataFrame:
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
