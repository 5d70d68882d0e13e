"""``window_timeline``: what a window operator did, per key, on event time.

Top panel, one lane per key:

- every element a point at its event time, coloured by its **fate** (fired, late, evicted,
  expired, pending, no window); late (dropped) elements are red crosses in a red ring --
  what Flink would drop without a trace;
- every window a bar ``[window_start, window_end)`` (sessions: the merged window); a window
  that never fired (its elements pending or expired) is drawn hollow;
- every firing a mark on its window's lane *where it fired*: at the timer's time for a
  timer firing (the window's end for the default trigger), at the element that caused it
  otherwise; its shape and colour give the kind (early, on-time, late), its label the pane;
  the tooltip has the watermark, the arrival it fired after, the number of elements it
  saw and the function's result.

Bottom panel: the watermark over arrival order (a staircase), each element's event time
above it; late elements (at or below it) are red crosses.

    user |  ·  · [=====window=====]▼0     · ×  [=====]▼0 ▶1
         |  arrival order ->  watermark staircase, elements above it

Processing-time assigners draw the top panel on processing time instead. At most
``max_keys`` lanes (the first keys in key order) and ``max_rows`` elements, firings and
arrivals are brought to the driver; the title says when something was left out.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
from pyspark.sql import Row, Window
from pyspark.sql import functions as F

from .stream import LATE_COLOR, TEXT, _plain

__all__ = ["window_timeline"]

FATES = ["fired", "late", "evicted", "expired", "pending", "no window"]
FATE_COLORS = ["#1f77b4", LATE_COLOR, "#9467bd", "#8c564b", "#ff7f0e", "#7f7f7f"]
FATE_SHAPES = ["circle", "cross", "diamond", "square", "triangle-up", "circle"]
KINDS = ["early", "on-time", "late"]
KIND_COLORS = ["#e69f00", "#2ca02c", LATE_COLOR]
KIND_SHAPES = ["triangle-left", "triangle-down", "triangle-right"]
OTHER = "other key"


def window_timeline(result, max_keys: int = 12, max_rows: int = 2000, width: int = 640,
                    lane_height: int = 44) -> alt.VConcatChart:
    """Draw a ``WindowResult`` (``stream.key_by(...).window(...)....reduce(...)``).

    ``max_keys``: lanes drawn (the first keys in key order); ``max_rows``: elements,
    firings and arrivals brought to the driver at most (the first in arrival order).
    """
    stream, spec = result.stream, result.spec
    keys = list(result.keys)
    proc = not spec.assigner.event_time and type(spec.assigner).__name__ != "GlobalWindows"
    x_is_ts = True if proc else stream.time_is_timestamp
    t = "T" if x_is_ts else "Q"
    scale = alt.Scale(type="utc") if x_is_ts else alt.Undefined
    time = stream.time
    x_col = "proctime" if proc else time

    elements, lanes, more_keys = _elements(result, keys, max_keys, max_rows, proc)
    cut = len(elements) > max_rows
    elements = elements.head(max_rows)
    firings = _firings(result, keys, lanes, max_rows)
    cut = cut or len(firings) > max_rows
    firings = firings.head(max_rows)
    windows = _windows(result, elements, firings, x_col, proc, max_rows)
    marks = _marks(result, elements, firings, x_col)
    arrivals = stream.df.select("seq", time, "watermark").limit(max_rows + 1).toPandas()
    cut = cut or len(arrivals) > max_rows
    arrivals = arrivals.head(max_rows)

    def when(column, title):
        return alt.Tooltip(f"{column}{TEXT}:N" if x_is_ts else f"{column}:Q", title=title)

    lane = alt.Y("lane:N", title=", ".join(keys) or None, sort=lanes,
                 axis=alt.Axis(labelLimit=120))
    x = alt.X(f"{x_col}:{t}", title=f"{'processing' if proc else 'event'} time ({x_col})", scale=scale)
    fate = alt.Color("fate:N", title="element fate", scale=alt.Scale(domain=FATES, range=FATE_COLORS))
    layers = []
    if len(windows):
        wtips = [alt.Tooltip("lane:N", title="key"), alt.Tooltip("window:N"),
                 alt.Tooltip("firings:Q"), alt.Tooltip("status:N")]
        bars = alt.Chart(_plain(windows)).encode(
            x=alt.X(f"window_start:{t}", scale=scale), x2="window_end", y=lane, tooltip=wtips)
        layers.append(bars.mark_bar(height=12, cornerRadius=2, yOffset=-8, stroke="#3b5b8f", strokeWidth=1,
                                    strokeOpacity=0.8, color="#6b8fbf").encode(
            fillOpacity=alt.FillOpacity("status:N", title="window", scale=alt.Scale(
                domain=["fired", "never fired"], range=[0.35, 0.0])),
            strokeDash=alt.StrokeDash("status:N", legend=None, scale=alt.Scale(
                domain=["fired", "never fired"], range=[[1, 0], [3, 2]]))))
    el = _plain(elements)
    etips = [alt.Tooltip("seq:Q", title="arrival"), when(x_col, "processing time" if proc else "event time"),
             alt.Tooltip("fate:N")] + ([alt.Tooltip("lane:N", title="key")] if keys else [])
    if proc:
        etips.insert(2, alt.Tooltip(f"{time}{TEXT}:N" if stream.time_is_timestamp else f"{time}:Q",
                                    title="event time"))
    points = alt.Chart(el).encode(x=x, y=lane)
    layers.append(points.mark_point(filled=True, size=70, yOffset=8, opacity=0.9).encode(
        color=fate, shape=alt.Shape("fate:N", title="element fate", scale=alt.Scale(domain=FATES, range=FATE_SHAPES)),
        tooltip=etips))
    layers.append(points.mark_point(size=330, strokeWidth=2, yOffset=8, color=LATE_COLOR).encode(
        tooltip=etips).transform_filter("datum.fate == 'late'"))
    if len(marks):
        ftips = ([alt.Tooltip("lane:N", title="key")] if keys else []) + [
            alt.Tooltip("window:N"), alt.Tooltip("firing:N", title="kind"), alt.Tooltip("pane:Q"),
            alt.Tooltip("cause:N"), when("at", "fired at"), alt.Tooltip("watermark_text:N", title="watermark"),
            alt.Tooltip("fired_after:N", title="after arrival"), alt.Tooltip("contents:Q", title="elements seen"),
            alt.Tooltip("result:N")]
        fired = alt.Chart(_plain(marks)).encode(x=alt.X(f"at:{t}", scale=scale), y=lane)
        layers.append(fired.mark_point(filled=True, size=120, yOffset=-8, opacity=1).encode(
            shape=alt.Shape("firing:N", title="firing", scale=alt.Scale(domain=KINDS, range=KIND_SHAPES)),
            color=alt.Color("firing:N", title="firing", scale=alt.Scale(domain=KINDS, range=KIND_COLORS)),
            tooltip=ftips))
        layers.append(fired.mark_text(dx=7, dy=-17, fontSize=9, align="left").encode(text="label:N"))

    n_late = int((elements["fate"] == "late").sum())
    n_fired = len(firings)
    notes = [f"{n_fired} firing{'s' if n_fired != 1 else ''}: ▼ on-time, ◀ early, ▶ late (label: pane); "
             f"bars: windows (hollow: never fired); "
             f"{n_late} late element{'s' if n_late != 1 else ''} dropped (× in a red ring)"]
    if more_keys or cut:
        notes.append(f"drawn: the first {len(lanes)} key{'s' if len(lanes) != 1 else ''}"
                     f"{' of more' if more_keys else ''}, at most {max_rows} rows each of elements, "
                     "firings and arrivals")
    lateness = f", allowed lateness {_duration(spec.allowed_lateness)}" if spec.allowed_lateness else ""
    evictor = f", {spec.evictor!r}" if spec.evictor is not None else ""
    top = alt.layer(*layers).resolve_scale(color="independent", shape="independent").properties(
        width=width, height=lane_height * max(len(lanes), 1),
        title=alt.TitleParams(f"{spec.assigner!r}, {spec.trigger!r}{evictor}{lateness}",
                              anchor="start", subtitle=notes))
    bottom = _watermark_panel(arrivals, elements, stream, keys, width)
    return alt.vconcat(top, bottom).resolve_scale(color="independent", shape="independent")


# ---------------------------------------------------------------- data


def _lane(df: pd.DataFrame, keys) -> pd.Series:
    if not keys:
        return pd.Series("all", index=df.index, dtype=object)
    return df[keys].astype(str).agg(" / ".join, axis=1)


def _elements(result, keys, max_keys, max_rows, proc):
    """The elements of the first ``max_keys`` keys, first ``max_rows + 1`` in arrival order,
    with ``lane``; the lanes in key order; whether keys were left out."""
    df = result.elements()
    more_keys = False
    if keys:
        # one pass: rank the keys over the whole (single-partition) result
        df = df.withColumn("_rank", F.dense_rank().over(Window.orderBy(*[F.col(k).asc_nulls_first()
                                                                           for k in keys])))
        df = df.withColumn("_keys", F.max("_rank").over(Window.partitionBy(F.lit(0))))
        df = df.filter(F.col("_rank") <= max_keys)
    if proc:
        df = df.join(result.stream.df.select("seq", "proctime"), "seq", "left")
    pdf = df.orderBy("seq").limit(max_rows + 1).toPandas()
    if keys:
        more_keys = bool(len(pdf)) and int(pdf["_keys"].max()) > max_keys
        ranks = pdf[["_rank"]].assign(lane=_lane(pdf, keys)).drop_duplicates().sort_values("_rank")
        pdf = pdf.drop(columns=["_rank", "_keys"])
        lanes = ranks["lane"].tolist()
    else:
        lanes = ["all"]
    pdf["lane"] = _lane(pdf, keys)
    return pdf, lanes, more_keys


def _firings(result, keys, lanes, max_rows):
    df = result.df
    if keys and lanes:
        # the lanes' key values, rebuilt from the lane text would lose types: filter by text
        text = (F.col("key").cast("string") if len(keys) == 1
                else F.concat_ws(" / ", *[F.col(f"key.{k}").cast("string") for k in keys]))
        df = df.filter(text.isin(lanes))
    pdf = df.limit(max_rows + 1).toPandas()
    if keys:
        if len(keys) == 1:
            pdf["lane"] = pdf["key"].astype(str)
        else:
            pdf["lane"] = pdf["key"].map(lambda k: " / ".join(str(getattr(k, c)) for c in keys))
        pdf = pdf.drop(columns=["key"])
    else:
        pdf["lane"] = "all"
    return pdf


def _ms(v):
    if v is None or v is pd.NaT or (isinstance(v, float) and v != v):
        return None
    if isinstance(v, pd.Timestamp):
        return int(v.value // 1_000_000)
    return int(v)


def _to_x(ms, like_ts):
    return pd.Timestamp(ms, unit="ms") if like_ts else ms


def _window_text(start, end):
    if start is None or start is pd.NaT or (isinstance(start, float) and start != start):
        return "GlobalWindow"
    return f"[{_text(start)}, {_text(end)})"


def _windows(result, elements, firings, x_col, proc, max_rows):
    """One row per window: fired windows from the firings, windows that never fired from
    the assigner applied to their pending and expired elements (sessions merged); at most
    ``max_rows`` of those (a 1-day window sliding by 1 s puts each element in 86,400)."""
    assigner = result.spec.assigner
    like_ts = pd.api.types.is_datetime64_any_dtype(elements[x_col]) if len(elements) else False
    rows = []
    glob = type(assigner).__name__ == "GlobalWindows"
    fired = {}
    for f in firings.itertuples(index=False):
        k = (f.lane, _ms(f.window_start), _ms(f.window_end))
        fired[k] = fired.get(k, 0) + 1
    span = {lane: (g[x_col].min(), g[x_col].max()) for lane, g in elements.groupby("lane")} if len(elements) else {}
    if glob:
        for lane in sorted(set(elements["lane"]) | {k[0] for k in fired}):
            lo, hi = span.get(lane, (None, None))
            if lo is None:
                continue
            hi = _to_x(_ms(hi) + 1, like_ts)
            rows.append((lane, lo, hi, fired.get((lane, None, None), 0), "GlobalWindow"))
    else:
        for (lane, s, e), n in fired.items():
            rows.append((lane, _to_x(s, like_ts), _to_x(e, like_ts), n, None))
        waiting = elements[elements["fate"].isin(["pending", "expired"])]
        value_cols = [c for c in result.values]
        for lane, g in waiting.groupby("lane", sort=False):
            found = []
            for d in g.to_dict("records"):
                ts = _ms(d[x_col])
                element = Row(**{c: d.get(c) for c in value_cols})
                try:
                    ws = assigner.assign_windows(element, None if proc else ts, ts if proc else None)
                except Exception:   # a dynamic gap that fails here failed in the run too
                    continue
                found += [(w.start, w.end) for w in ws]
                if len(found) > max_rows:
                    break
            if assigner.merging:
                found = _merge(found)
            fired_spans = [(s, e) for (ln, s, e) in fired if ln == lane]
            for s, e in sorted(set(found)):
                if len(rows) >= len(fired) + max_rows:
                    break
                if (s, e) in fired_spans or (assigner.merging and any(s <= fe and e >= fs for fs, fe in fired_spans)):
                    continue
                rows.append((lane, _to_x(s, like_ts), _to_x(e, like_ts), 0, None))
    out = pd.DataFrame(rows, columns=["lane", "window_start", "window_end", "firings", "window"])
    out["status"] = out["firings"].map(lambda n: "fired" if n else "never fired")
    out["window"] = [w or _window_text(s, e) for w, s, e in zip(out["window"], out["window_start"],
                                                              out["window_end"])]
    return out.sort_values(["lane", "window_start", "window_end"], kind="stable", ignore_index=True)


def _merge(spans):
    out = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:   # touching sessions merge, as TimeWindow.intersects
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _marks(result, elements, firings, x_col):
    """One row per firing, at where it fired: the timer's time, or the causing element's."""
    if not len(firings):
        return firings.assign(at=[], label=[], result=[], window=[], watermark_text=[])
    by_seq = dict(zip(elements["seq"].tolist(), elements[x_col].tolist()))
    like_ts = pd.api.types.is_datetime64_any_dtype(elements[x_col]) if len(elements) else False
    outputs = [c for c in result.output.fieldNames()]
    at = []
    for f in firings.itertuples(index=False):
        x = None
        if f.cause != "element" and _ms(f.timer) is not None:
            x = _ms(f.timer) + 1 if _ms(f.timer) == _ms(f.window_end) - 1 else _ms(f.timer)
            x = _to_x(x, like_ts)
        elif _ms(f.fired_after) is not None and _ms(f.fired_after) in by_seq:
            x = by_seq[_ms(f.fired_after)]
        if x is None and _ms(f.window_end) is not None:
            x = _to_x(_ms(f.window_end), like_ts)
        if x is None and len(elements):
            x = elements.loc[elements["lane"] == f.lane, x_col].max()
        at.append(x)
    out = firings.copy()
    out["at"] = pd.Series(at, index=out.index, dtype="datetime64[ns]" if like_ts else object)
    out["label"] = out["pane"].astype("Int64").astype(str)
    out["window"] = [_window_text(s, e) for s, e in zip(out["window_start"], out["window_end"])]
    out["result"] = [", ".join(f"{c}={_short(r.get(c))}" for c in outputs)
                     for r in out[outputs].to_dict("records")] if outputs else ""
    out["watermark_text"] = [("end of input" if pd.isna(a) else "none yet") if pd.isna(w) else _text(w)
                             for w, a in zip(out["watermark"], out["fired_after"])]
    out["fired_after"] = [("end of input" if pd.isna(a) else str(int(a))) for a in out["fired_after"]]
    keep = ["lane", "at", "window", "firing", "pane", "label", "cause", "watermark_text", "fired_after",
            "contents", "result"]
    return out[keep]


def _duration(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def _text(v):
    """A time as the tooltips show it: UTC with milliseconds, or integer milliseconds."""
    if isinstance(v, pd.Timestamp):
        return v.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return str(int(v))


def _short(v, limit=80):
    if isinstance(v, pd.Timestamp):
        return _text(v)
    if hasattr(v, "tolist"):
        v = v.tolist()
    text = str(v)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _watermark_panel(arrivals: pd.DataFrame, elements: pd.DataFrame, stream, keys, width):
    time = stream.time
    is_ts = stream.time_is_timestamp
    t = "T" if is_ts else "Q"
    scale = alt.Scale(type="utc") if is_ts else alt.Undefined
    data = arrivals.merge(elements[["seq", "fate", "lane"]], on="seq", how="left")
    data["fate"] = data["fate"].where(data["fate"].notna(), OTHER)
    data["lane"] = data["lane"].where(data["lane"].notna(), OTHER)
    data = _plain(data)

    def when(column, title):
        return alt.Tooltip(f"{column}{TEXT}:N" if is_ts else f"{column}:Q", title=title)

    base = alt.Chart(data).encode(x=alt.X("seq:Q", title="arrival order (seq)",
                                          axis=alt.Axis(format="d", tickMinStep=1)))
    steps = base.mark_line(interpolate="step-after", color="#555", strokeDash=[4, 3]).encode(
        y=alt.Y(f"watermark:{t}", title="event time / watermark", scale=scale), order="seq:Q",
        tooltip=[alt.Tooltip("seq:Q", title="arrival"), when("watermark", "watermark")]
    ).transform_filter("datum.watermark != null")
    tips = [alt.Tooltip("seq:Q", title="arrival"), when(time, "event time"),
            when("watermark", "watermark on arrival"), alt.Tooltip("fate:N")]
    if keys:
        tips.insert(1, alt.Tooltip("lane:N", title="key"))
    dots = base.mark_point(filled=True, size=45).encode(
        y=alt.Y(f"{time}:{t}", scale=scale),
        color=alt.Color("fate:N", legend=None, scale=alt.Scale(domain=FATES + [OTHER],
                                                               range=FATE_COLORS + ["#cccccc"])),
        shape=alt.Shape("fate:N", legend=None, scale=alt.Scale(domain=FATES + [OTHER],
                                                               range=FATE_SHAPES + ["circle"])),
        tooltip=tips)
    ring = base.mark_point(size=260, strokeWidth=2, color=LATE_COLOR).encode(
        y=alt.Y(f"{time}:{t}", scale=scale), tooltip=tips).transform_filter("datum.fate == 'late'")
    return alt.layer(steps, dots, ring).properties(width=width, height=170, title=alt.TitleParams(
        "Watermark over arrival order", anchor="start",
        subtitle=[f"watermark: {stream.watermark!r} (dashed staircase); an element at or below it "
                  "met a watermark past its time"]))
