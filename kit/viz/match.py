"""``match_timeline``: each partition's series, rows coloured by the variable they mapped to.

One lane per partition: the value column over the ORDER BY time as a grey line; each
row a point coloured by its classifier (grey when it is in no match); each match a
shaded band from its first to its last row, labelled ``#n`` with its match number; late
rows (dropped before matching, as Flink does) as red crosses.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from .stream import LATE_COLOR, TEXT, _plain

__all__ = ["match_timeline"]

UNMATCHED = "(no match)"


def match_timeline(details, value: str, time: str, partition: str | None = None,
                   max_rows: int = 2000, width: int = 640, height: int = 160) -> alt.FacetChart | alt.LayerChart:
    """Draw matches from ``details``: a Spark or pandas DataFrame with the input columns plus
    ``match_number`` and ``classifier`` (NULL for rows in no match) and ``late`` (see
    ``MatchResult.details()``)."""
    pdf = details if isinstance(details, pd.DataFrame) else details.limit(max_rows).toPandas()
    pdf = pdf.head(max_rows).copy()
    pdf["variable"] = pdf["classifier"].fillna(UNMATCHED)
    if "late" not in pdf:
        pdf["late"] = False
    pdf["late"] = pdf["late"].fillna(False).astype(bool)
    pdf.loc[pdf["late"], "variable"] = "late (dropped)"
    is_time = pd.api.types.is_datetime64_any_dtype(pdf[time])
    time_type = "T" if is_time else "Q"
    scale = alt.Scale(type="utc") if is_time else alt.Undefined
    group = [partition] if partition else []
    bands = (pdf.dropna(subset=["match_number"])
                .groupby(group + ["match_number"], as_index=False)
                .agg(start=(time, "min"), end=(time, "max"), top=(value, "max")))
    bands["label"] = "#" + bands["match_number"].astype(int).astype(str)
    variables = sorted(v for v in pdf["variable"].unique() if v not in (UNMATCHED, "late (dropped)"))
    domain = variables + [UNMATCHED, "late (dropped)"]
    palette = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#eeca3b", "#9d755d"]
    colors = [palette[i % len(palette)] for i in range(len(variables))] + ["#bbbbbb", LATE_COLOR]
    tooltip = [alt.Tooltip(f"{time}{TEXT}:N" if is_time else f"{time}:Q", title=time),
               alt.Tooltip(f"{value}:Q"), alt.Tooltip("variable:N", title="classifier"),
               alt.Tooltip("match_number:Q", title="match")]
    if partition:
        tooltip.insert(0, alt.Tooltip(f"{partition}:N"))
    x = alt.X(f"{time}:{time_type}", title=time, scale=scale,
              axis=alt.Axis(format="%H:%M:%S", tickCount=8) if is_time else alt.Undefined)
    series = alt.Chart().mark_line(color="#cccccc").encode(x=x, y=alt.Y(f"{value}:Q", title=value),
                                                          order=alt.Order(f"{time}:{time_type}"))
    points = alt.Chart().mark_point(filled=True, size=70, opacity=1).encode(
        x=x, y=f"{value}:Q",
        color=alt.Color("variable:N", title="classifier", scale=alt.Scale(domain=domain, range=colors)),
        shape=alt.condition("datum.late", alt.value("cross"), alt.value("circle")),
        tooltip=tooltip)
    band_data = _plain(bands)
    band = alt.Chart(band_data).mark_rect(opacity=0.12, color="#4c78a8").encode(
        x=alt.X(f"start:{time_type}", scale=scale), x2="end:" + time_type,
        tooltip=[alt.Tooltip("label:N", title="match")])
    label = alt.Chart(band_data).mark_text(align="left", dx=2, dy=-6, fontWeight="bold", color="#4c78a8").encode(
        x=alt.X(f"start:{time_type}", scale=scale), y=alt.Y("top:Q"), text="label:N")
    n_matches = len(bands)
    title = alt.TitleParams(f"{n_matches} match{'es' if n_matches != 1 else ''}",
                            subtitle=["bands: matches (#n = MATCH_NUMBER); colour: the variable each row mapped to"],
                            anchor="start")
    data = _plain(pdf)
    if not partition:
        return alt.layer(band.properties(data=band_data), series, points, label, data=data).properties(
            width=width, height=height, title=title)
    return _lanes(data, band_data, partition, band, series, points, label, width, height, title)


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
