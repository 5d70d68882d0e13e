"""``match_timeline``: each partition's series, rows coloured by the variable they mapped to.

One lane per partition: the value column over the ORDER BY time as a grey line; each
row a point coloured by its classifier (grey when it is in no match); each match a
shaded band from its first to its last row, labelled ``#n`` with its match number; late
rows (dropped before matching, as Flink does) as red × in a red ring. The legend lists
the variables, "(no match)", "late (dropped)" and the match band only when there are such
rows. A TIMESTAMP time is drawn on a UTC time axis whose labels fit the span (times of day
for seconds apart, dates for months apart).
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from ..errors import KitError
from .marks import BAR, LATE_COLOR, RING_X, Kind, check_column, check_title, legend, title_params
from .stream import TEXT, check_max_rows, plain_frame

__all__ = ["match_timeline"]

UNMATCHED = "(no match)"
LATE = "late (dropped)"
BAND = "match #n (MATCH_NUMBER)"
PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#eeca3b", "#9d755d"]
BAND_FILL = "rgba(76, 120, 168, 0.15)"


def match_timeline(details, value: str, time: str, partition: str | None = None,
                   max_rows: int = 2000, width: int = 640, height: int = 160,
                   title: str | None = None) -> alt.VConcatChart | alt.LayerChart:
    """Draw matches from ``details``: a Spark or pandas DataFrame with the input columns plus
    ``match_number`` and ``classifier`` (NULL for rows in no match) and ``late`` (see
    ``MatchResult.details()``). ``value``, ``time`` and ``partition`` name its columns;
    ``title``: the chart's title instead of the default (the number of matches).

    At most ``max_rows`` rows are drawn: a Spark DataFrame is read up to its first
    ``max_rows + 1`` rows in one collect (one partition at the end: the reading stops
    there); the subtitle says when rows were left out.
    """
    check_title("match_timeline", title)
    check_max_rows("match_timeline", max_rows)
    if not hasattr(details, "columns") or not (isinstance(details, pd.DataFrame) or hasattr(details, "toPandas")):
        raise KitError("match_timeline draws MATCH_RECOGNIZE details (result.match_details, a Spark or pandas "
                       f"DataFrame); got {type(details).__name__}")
    columns = list(details.columns)
    for parameter, name in (("value", value), ("time", time)) + ((("partition", partition),) if partition else ()):
        check_column("match_timeline", parameter, name, columns, "the details")
    missing = [c for c in ("match_number", "classifier") if c not in columns]
    if missing:
        raise KitError(f"match_timeline: the details have no column {' or '.join(map(repr, missing))}: draw "
                       "result.match_details (kit.sql) or MatchResult.details(); its columns are: "
                       + ", ".join(columns))
    pdf = details if isinstance(details, pd.DataFrame) else details.coalesce(1).limit(max_rows + 1).toPandas()
    cut = len(pdf) > max_rows
    pdf = pdf.head(max_rows).copy()
    pdf["variable"] = pdf["classifier"].fillna(UNMATCHED)
    if "late" not in pdf:
        pdf["late"] = False
    pdf["late"] = pdf["late"].fillna(False).astype(bool)
    pdf.loc[pdf["late"], "variable"] = LATE
    is_time = pd.api.types.is_datetime64_any_dtype(pdf[time])
    time_type = "T" if is_time else "Q"
    scale = alt.Scale(type="utc") if is_time else alt.Undefined
    group = [partition] if partition else []
    bands = (pdf.dropna(subset=["match_number"])
                .groupby(group + ["match_number"], as_index=False)
                .agg(start=(time, "min"), end=(time, "max"), top=(value, "max")))
    bands["label"] = "#" + bands["match_number"].astype(int).astype(str)
    bands["variable"] = BAND
    variables = sorted(v for v in pdf["variable"].unique() if v not in (UNMATCHED, LATE))
    kinds = ([Kind(v, PALETTE[i % len(PALETTE)], "circle") for i, v in enumerate(variables)]
             + [Kind(UNMATCHED, "#bbbbbb", "circle"), Kind(LATE, LATE_COLOR, RING_X),
                Kind(BAND, BAND_FILL, BAR)])
    marks = legend("variable", kinds, set(pdf["variable"]) | ({BAND} if len(bands) else set()),
                   title="classifier")
    tooltip = [alt.Tooltip(f"{time}{TEXT}:N" if is_time else f"{time}:Q", title=time),
               alt.Tooltip(f"{value}:Q"), alt.Tooltip("variable:N", title="classifier"),
               alt.Tooltip("match_number:Q", title="match")]
    if partition:
        tooltip.insert(0, alt.Tooltip(f"{partition}:N"))
    x = alt.X(f"{time}:{time_type}", title=f"{time} (UTC)" if is_time else time, scale=scale,
              axis=alt.Axis(format=_time_format(pdf[time]), labelOverlap=True) if is_time else alt.Undefined)
    series = alt.Chart().mark_line(color="#cccccc").encode(x=x, y=alt.Y(f"{value}:Q", title=value),
                                                          order=alt.Order(f"{time}:{time_type}"))
    point = alt.Chart().encode(x=x, y=f"{value}:Q", fill=marks["fill"], stroke=marks["stroke"],
                               shape=marks["shape"], tooltip=tooltip)
    points = point.mark_point(opacity=1, strokeWidth=1).encode(   # a late row's ⊗ big enough to show its ×
        size=alt.condition("datum.late", alt.value(180), alt.value(70)))
    band_data = plain_frame(bands)
    band = alt.Chart(band_data).mark_rect().encode(
        x=alt.X(f"start:{time_type}", scale=scale), x2="end:" + time_type,
        fill=marks["fill"], stroke=marks["stroke"], tooltip=[alt.Tooltip("label:N", title="match")])
    label = alt.Chart(band_data).mark_text(align="left", dx=2, dy=-6, fontWeight="bold", color="#4c78a8").encode(
        x=alt.X(f"start:{time_type}", scale=scale), y=alt.Y("top:Q"), text="label:N")
    n_matches = len(bands)
    n_late = int(pdf["late"].sum())
    facts = (f"{'the first ' if cut else ''}{len(pdf)} rows"
             + (f" in {_plural(pdf[partition].nunique(), 'partition')}" if partition else "")
             + (f", {n_late} late (dropped before matching)" if n_late else ""))
    title = title_params(f"{n_matches} match{'es' if n_matches != 1 else ''}", facts, title)
    data = plain_frame(pdf)
    if not partition:
        return alt.layer(band.properties(data=band_data), series, points, label, data=data).properties(
            width=width, height=height, title=title)
    return _lanes(data, band_data, partition, band, series, points, label, width, height, title)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _time_format(times: pd.Series) -> str:
    """A d3 time format for axis labels over ``times``: clock times within a day (seconds
    when they are not all whole minutes), month and day within a few months, else months
    of a year or two, else years."""
    times = times.dropna()
    if times.empty:
        return "%H:%M:%S"
    span = times.max() - times.min()
    if span <= pd.Timedelta(days=1):
        return "%H:%M:%S" if (times.dt.second != 0).any() or (times.dt.microsecond != 0).any() else "%H:%M"
    if span <= pd.Timedelta(days=90):
        midnight = (times.dt.normalize() == times).all()
        return "%b %d" if midnight else "%b %d %H:%M"
    return "%b %Y" if span <= pd.Timedelta(days=2 * 366) else "%Y"


def _lanes(data, band_data, partition, band, series, points, label, width, height, title):
    """One layered chart per partition key, stacked, sharing the time axis."""
    lanes = []
    for key in sorted(data[partition].dropna().unique()):
        rows = data[data[partition] == key]
        spans = band_data[band_data[partition] == key]
        lane = alt.layer(band.properties(data=spans), series.properties(data=rows),
                         points.properties(data=rows), label.properties(data=spans)).properties(
            width=width, height=height, title=f"{partition} = {key}")
        lanes.append(lane)
    return alt.vconcat(*lanes, title=title).resolve_scale(x="shared")
