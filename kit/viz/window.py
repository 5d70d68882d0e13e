"""``window_timeline``: what a window operator did, per key, on event time.

Top panel, one lane per key: every element at its event time, coloured by its fate
(fired, late, evicted, expired, pending, no window); every window as a bar from its start
to its end; each firing as a mark at the window's end, shaped by its kind (early, on-time,
late) and labelled with its pane. Late (dropped) elements are crosses -- what Flink would
drop without a trace. Bottom panel: the watermark over arrival order, each element's event
time above it (late ones at or below it).

    key  |  ·  ·[====window====]▲0      ·  [====]▲0 ▲1
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from .stream import TEXT, _plain

__all__ = ["window_timeline"]

FATES = ["fired", "late", "evicted", "expired", "pending", "no window"]
FATE_COLORS = ["#1f77b4", "#d62728", "#9467bd", "#8c564b", "#ff7f0e", "#7f7f7f"]
KINDS = ["early", "on-time", "late"]


def window_timeline(result, max_keys: int = 12, max_rows: int = 2000, width: int = 640,
                    lane_height: int = 36) -> alt.VConcatChart:
    """Draw a ``WindowResult`` (``stream.key_by(...).window(...)...``): the first ``max_keys``
    keys (in key order) and at most ``max_rows`` elements and firings."""
    stream = result.stream
    time, keys = stream.time, list(result.keys)
    is_ts = stream.time_is_timestamp
    elements = result.elements().limit(max_rows).toPandas()
    firings = result.df.limit(max_rows).toPandas()
    if keys:
        elements["lane"] = elements[keys].astype(str).agg(" / ".join, axis=1)
        firings["lane"] = firings["key"].map(lambda k: " / ".join(map(str, k)) if isinstance(k, (tuple, list))
                                             else " / ".join(str(v) for v in k.asDict().values())
                                             if hasattr(k, "asDict") else str(k))
    else:
        elements["lane"], firings["lane"] = "all", "all"
    lanes = sorted(set(elements["lane"]) | set(firings["lane"]))[:max_keys]
    elements = elements[elements["lane"].isin(lanes)]
    firings = firings[firings["lane"].isin(lanes)].drop(columns=["key"])
    arrivals = stream.df.select("seq", time, "watermark").limit(max_rows).toPandas()
    t = "T" if is_ts else "Q"
    scale = alt.Scale(type="utc") if is_ts else alt.Undefined

    def when(column, title):
        return alt.Tooltip(f"{column}{TEXT}:N" if is_ts else f"{column}:Q", title=title)

    lane = alt.Y("lane:N", title=", ".join(keys) or None, sort=lanes)
    fate = alt.Color("fate:N", title="element", scale=alt.Scale(domain=FATES, range=FATE_COLORS))
    points = alt.Chart(_plain(elements)).mark_point(filled=True, size=70).encode(
        x=alt.X(f"{time}:{t}", title=f"event time ({time})", scale=scale), y=lane, color=fate,
        shape=alt.Shape("fate:N", legend=None, scale=alt.Scale(
            domain=FATES, range=["circle", "cross", "diamond", "square", "triangle-up", "stroke"])),
        tooltip=[alt.Tooltip("seq:Q", title="arrival"), when(time, "event time"), alt.Tooltip("fate:N")],
        yOffset=alt.value(6))
    layers = [points]
    spans = firings.dropna(subset=["window_start"]) if "window_start" in firings else firings.iloc[0:0]
    if len(spans):
        windows = (spans.groupby(["lane", "window_start", "window_end"], as_index=False)
                   .agg(firings=("pane", "size")))
        layers.insert(0, alt.Chart(_plain(windows)).mark_bar(height=10, opacity=0.35, color="#6b8fbf",
                                                             cornerRadius=2).encode(
            x=alt.X(f"window_start:{t}", scale=scale), x2="window_end", y=lane, yOffset=alt.value(-6),
            tooltip=[when("window_start", "window start"), when("window_end", "window end"),
                     alt.Tooltip("firings:Q", title="firings")]))
        marks = spans.assign(label=lambda d: d["pane"].astype(int).astype(str))
        at_end = alt.X(f"window_end:{t}", scale=scale)
        tips = [alt.Tooltip("firing:N", title="kind"), alt.Tooltip("pane:Q"), alt.Tooltip("cause:N"),
                when("watermark", "watermark"), alt.Tooltip("fired_after:Q", title="after arrival"),
                alt.Tooltip("contents:Q", title="elements")]
        fired = alt.Chart(_plain(marks))
        layers += [
            fired.mark_point(filled=True, size=110, yOffset=-6).encode(
                x=at_end, y=lane, shape=alt.Shape("firing:N", title="firing", scale=alt.Scale(
                    domain=KINDS, range=["triangle-left", "triangle-down", "triangle-right"])),
                color=alt.value("#222"), tooltip=tips),
            fired.mark_text(dx=9, dy=-14, fontSize=9, align="left").encode(x=at_end, y=lane, text="label:N")]
    n_late = int((elements["fate"] == "late").sum())
    top = alt.layer(*layers).properties(
        width=width, height=lane_height * max(len(lanes), 1),
        title=alt.TitleParams(f"Windows of {result.spec.assigner!r}", anchor="start", subtitle=[
            f"trigger {result.spec.trigger!r}; bars: windows; ▼ on-time, ◀ early, ▶ late firing "
            f"(label: pane); {n_late} late element{'s' if n_late != 1 else ''} (×)"]))
    bottom = _watermark_panel(arrivals, elements, time, t, scale, width)
    return alt.vconcat(top, bottom).resolve_scale(color="independent", shape="independent")


def _watermark_panel(arrivals: pd.DataFrame, elements: pd.DataFrame, time, t, scale, width):
    data = _plain(arrivals.merge(elements[["seq", "fate"]], on="seq", how="left"))
    base = alt.Chart(data).encode(x=alt.X("seq:Q", title="arrival order (seq)", axis=alt.Axis(format="d")))
    steps = base.mark_line(interpolate="step-after", color="#555", strokeDash=[4, 3]).encode(
        y=alt.Y(f"watermark:{t}", title="event time / watermark", scale=scale),
        order="seq:Q").transform_filter("datum.watermark != null")
    dots = base.mark_point(filled=True, size=40).encode(
        y=alt.Y(f"{time}:{t}", scale=scale),
        color=alt.Color("fate:N", legend=None, scale=alt.Scale(domain=FATES, range=FATE_COLORS)),
        tooltip=[alt.Tooltip("seq:Q", title="arrival"), alt.Tooltip("fate:N")])
    return alt.layer(steps, dots).properties(width=width, height=160, title=alt.TitleParams(
        "Watermark over arrival order", anchor="start",
        subtitle=["an element at or below the staircase met a watermark past its time"]))
