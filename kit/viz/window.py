"""``window_timeline``: what a window operator did, per key, on event time.

Top panel, one lane per key:

- every window a bar ``[window_start, window_end)`` (sessions: the merged window); a window
  that never fired (its elements pending or expired) is hollow and dashed. Windows that
  overlap (sliding windows) take rows of their own within the key's lane, each window the
  first row free at its start (at most ``MAX_WINDOW_ROWS``), so every window shows;
- every element a point at its event time, coloured and shaped by its **fate** (fired,
  late (dropped), evicted, expired, pending, no window); a late element is a red × in a
  red ring -- what Flink would drop without a trace;
- every firing a mark on its window's row *where it fired*: at the timer's time for a
  timer firing (the window's end for the default trigger), at the element that caused it
  otherwise; its shape and colour give the kind (early, on-time, late), its label the pane;
  the tooltip has the watermark, the arrival it fired after, the number of elements it
  saw and the function's result.

Bottom panel: the watermark over arrival order (a dashed staircase), each element's event
time above it, in the colour and shape of its fate.

    user |  [=====window=====]▼0         [=====]▼0 ▶1
         |  ·  ·                  · ⊗      ·
         |  arrival order ->  watermark staircase, elements above it

The legends list the kinds of window, element and firing present, nothing absent; the
one line under the title gives the counts. Processing-time assigners draw the top panel on
processing time instead. At most ``max_keys`` lanes (the first keys in key order) and
``max_rows`` elements, firings and arrivals are brought to the driver, all in one collect.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
from pyspark.sql import Row
from pyspark.sql import types as T

from .. import sparksql
from ..errors import KitError
from .marks import BAR, DASHED, LATE_COLOR, RING_X, Kind, check_title, legend, literal, present_kinds, title_params
from .stream import TEXT, check_max_rows, plain_frame, arrival_frame

__all__ = ["window_timeline", "MAX_WINDOW_ROWS"]

FATES = ["fired", "late", "evicted", "expired", "pending", "no window"]
FATE_LABELS = {"late": "late (dropped)"}
FATE_KINDS = [Kind("fired", "#1f77b4", "circle"), Kind("late (dropped)", LATE_COLOR, RING_X),
              Kind("evicted", "#9467bd", "diamond"), Kind("expired", "#8c564b", "square"),
              Kind("pending", "#ff7f0e", "triangle-up"), Kind("no window", "#7f7f7f", "circle")]
OTHER = "other key"
OTHER_KIND = Kind(OTHER, "#cccccc", "circle")
FIRING_KINDS = [Kind("early", "#e69f00", "triangle-left"), Kind("on-time", "#2ca02c", "triangle-down"),
                Kind("late", LATE_COLOR, "triangle-right")]
WINDOW_KINDS = [Kind("fired", "#3b5b8f", BAR, fill="rgba(107, 143, 191, 0.4)"),
                Kind("never fired", "#3b5b8f", BAR, filled=False)]
WATERMARK_KINDS = [Kind("watermark", "#555555", DASHED, filled=False)]
MAX_WINDOW_ROWS = 8     # rows of overlapping windows per key at most (then they share rows)
ELEMENTS = "elements"   # the sub-row of a key's lane its elements are drawn in


def window_timeline(result, max_keys: int = 12, max_rows: int = 2000, width: int = 640,
                    lane_height: int = 44, title: str | None = None) -> alt.VConcatChart:
    """Draw a ``WindowResult`` (``stream.key_by(...).window(...)....reduce(...)``).

    ``max_keys``: lanes drawn (the first keys in key order); ``max_rows``: elements,
    firings and arrivals brought to the driver at most (the first in arrival order);
    ``lane_height``: pixels per key for one row of windows (a key with overlapping windows
    gets more); ``title``: the chart's title instead of the default (the assigner and
    trigger), e.g. the parameter values a widget shows.
    """
    from ..windows.datastream import WindowResult

    if not isinstance(result, WindowResult):
        raise KitError("window_timeline draws a WindowResult (stream.key_by(...).window(...).reduce(...), "
                       f".aggregate(...), .process(...)); got {type(result).__name__}")
    check_title("window_timeline", title)
    check_max_rows("window_timeline", max_rows)
    if not isinstance(max_keys, int) or isinstance(max_keys, bool) or max_keys < 1:
        raise KitError(f"window_timeline: max_keys must be a positive int; got {max_keys!r}")
    stream, spec = result.stream, result.spec
    keys = list(result.keys)
    proc = not spec.assigner.event_time and type(spec.assigner).__name__ != "GlobalWindows"
    x_is_ts = True if proc else stream.time_is_timestamp
    t = "T" if x_is_ts else "Q"
    scale = alt.Scale(type="utc") if x_is_ts else alt.Undefined
    time = stream.time
    x_col = "proctime" if proc else time

    elements, firings, arrivals, lanes, more_keys = _collect(result, keys, max_keys, max_rows, proc)
    cut = len(elements) > max_rows or len(firings) > max_rows or len(arrivals) > max_rows
    elements, firings, arrivals = elements.head(max_rows), firings.head(max_rows), arrivals.head(max_rows)
    windows = _windows(result, elements, firings, x_col, proc, max_rows)
    marks = _marks(result, elements, firings, x_col, windows)
    rows_per_lane = int(windows["row"].max()) + 1 if len(windows) else 1
    slots = [f"window row {i}" for i in range(rows_per_lane)] + [ELEMENTS]

    def when(column, title):
        return alt.Tooltip(f"{column}{TEXT}:N" if x_is_ts else f"{column}:Q", title=title)

    lane = alt.Y("lane:N", title=", ".join(keys) or None, sort=lanes, axis=alt.Axis(labelLimit=120))
    slot = alt.YOffset("slot:N", scale=alt.Scale(domain=slots, paddingInner=0.25, paddingOuter=0.1))
    x = alt.X(f"{x_col}:{t}", title=f"{'processing' if proc else 'event'} time ({x_col})", scale=scale)
    layers = []
    if len(windows):
        status = legend("status", WINDOW_KINDS, windows["status"], title="window", symbolType=BAR)
        shown = [k.label for k in present_kinds(WINDOW_KINDS, windows["status"])]
        dash = alt.StrokeDash("status:N", title="window", legend=alt.Legend(title="window", symbolType=BAR),
                              scale=alt.Scale(domain=shown, range=[[1, 0] if s == "fired" else [4, 2] for s in shown]))
        wtips = [alt.Tooltip("lane:N", title="key"), alt.Tooltip("window:N"),
                 alt.Tooltip("firings:Q"), alt.Tooltip("status:N")]
        # a pixel off each end: windows that touch show as two
        layers.append(alt.Chart(plain_frame(windows.assign(slot=[slots[r] for r in windows["row"]]))).mark_bar(
            cornerRadius=2, strokeWidth=1.2, xOffset=1, x2Offset=-1).encode(
            x=alt.X(f"window_start:{t}", scale=scale), x2="window_end", y=lane, yOffset=slot,
            fill=status["fill"], stroke=status["stroke"], strokeDash=dash, tooltip=wtips))
    el = plain_frame(elements.assign(element=elements["fate"].map(lambda f: FATE_LABELS.get(f, f)), slot=ELEMENTS))
    etips = [alt.Tooltip("seq:Q", title="arrival"), when(x_col, "processing time" if proc else "event time"),
             alt.Tooltip("fate:N")] + ([alt.Tooltip("lane:N", title="key")] if keys else [])
    if proc:
        etips.insert(2, alt.Tooltip(f"{time}{TEXT}:N" if stream.time_is_timestamp else f"{time}:Q",
                                    title="event time"))
    fate = legend("element", FATE_KINDS, el["element"], title="element")
    points = alt.Chart(el).encode(
        x=x, y=lane, yOffset=slot, fill=fate["fill"], stroke=fate["stroke"], shape=fate["shape"], tooltip=etips)
    layers.append(_sized(points, 80, 200, opacity=0.9))
    if len(marks):
        ftips = ([alt.Tooltip("lane:N", title="key")] if keys else []) + [
            alt.Tooltip("window:N"), alt.Tooltip("firing:N", title="kind"), alt.Tooltip("pane:Q"),
            alt.Tooltip("cause:N"), when("at", "fired at"), alt.Tooltip("watermark_text:N", title="watermark"),
            alt.Tooltip("fired_after:N", title="after arrival"), alt.Tooltip("contents:Q", title="elements seen"),
            alt.Tooltip("result:N")]
        kind = legend("firing", FIRING_KINDS, marks["firing"], title="firing")
        fired = alt.Chart(plain_frame(marks.assign(slot=[slots[r] for r in marks["row"]]))).encode(
            x=alt.X(f"at:{t}", scale=scale), y=lane, yOffset=slot)
        layers.append(fired.mark_point(size=120, strokeWidth=1, opacity=1).encode(
            fill=kind["fill"], stroke=kind["stroke"], shape=kind["shape"], tooltip=ftips))
        layers.append(fired.mark_text(dx=7, dy=-7, fontSize=9, align="left").encode(text="label:N"))

    n_late = int((elements["fate"] == "late").sum())
    n_fired = len(firings)
    facts = [f"{n_fired} firing{'s' if n_fired != 1 else ''}",
             f"{n_late} late element{'s' if n_late != 1 else ''} dropped",
             f"watermark {stream.watermark!r}"]
    if more_keys or cut:
        facts.append(f"drawn: the first {len(lanes)} key{'s' if len(lanes) != 1 else ''}"
                     f"{' of more' if more_keys else ''}, at most {max_rows} elements, firings and arrivals")
    if len(windows) and windows["shared"].any():
        facts.append(f"overlapping windows share {MAX_WINDOW_ROWS} rows per key")
    lateness = f", allowed lateness {duration_text(spec.allowed_lateness)}" if spec.allowed_lateness else ""
    evictor = f", {spec.evictor!r}" if spec.evictor is not None else ""
    independent = dict(fill="independent", stroke="independent", shape="independent", strokeDash="independent")
    # each chart given its parts once (a LayerChart or VConcatChart made copies them all)
    resolve = alt.Resolve(scale=alt.ScaleResolveMap(**independent))
    top = alt.layer(*layers, resolve=resolve, width=width,
                    height=max(1, round(lane_height * len(slots) / 2)) * max(len(lanes), 1))
    bottom = _watermark_panel(arrivals, elements, stream, keys, width)
    return alt.vconcat(top, bottom, resolve=resolve, title=title_params(
        f"{spec.assigner!r}, {spec.trigger!r}{evictor}{lateness}", "; ".join(facts), title))


# ---------------------------------------------------------------- data


def _sized(points: alt.Chart, size: int, late: int, **mark) -> alt.Chart:
    """``points`` drawn: elements of ``size``, late elements' ⊗ of ``late`` (it has to show
    its ×)."""
    test = f"datum.element == {literal(FATE_LABELS['late'])}"
    # the channel object, not alt.condition's dict: altair checks a dict against its schema (~6 ms)
    return points.mark_point(strokeWidth=1, **mark).encode(
        size=alt.SizeValue(size, condition=alt.ConditionalPredicateValueDefnumberExprRef(test=test, value=late)))


def _collect(result, keys, max_keys, max_rows, proc):
    """``(elements, firings, arrivals, lanes, more_keys)`` in one collect: the
    elements of the first ``max_keys`` keys (in key order; the first ``max_rows + 1`` in
    arrival order, with ``lane``, and ``proctime`` for a processing-time window), their
    firings (the first ``max_rows + 1`` in the order the operator emitted them, with
    ``lane``), the stream's first ``max_rows + 1`` arrivals (its time, ``seq``,
    ``watermark``), the lanes in key order and whether keys were left out.

    One union of the three, each ranked by key and cut where it already is in one
    partition (``elements()`` and ``df`` end so), so the union adds no shuffle: a Spark
    job per stage of the parts' plans, where a collect per part (and a sort or ``limit``
    of each) had run their stages again. The firings keep the first ``max_keys`` keys of
    their own (a key with firings has elements: its rank among the firings' keys is at
    most its rank among the elements' keys), the keys drawn are chosen below."""
    stream = result.stream
    elements, firings = result.elements(), result.df
    if proc:   # each element's processing time, from its arrival (a shuffle: for these windows only)
        elements = elements.join(stream.df.select("seq", "proctime"), "seq", "left").repartition(1)
    key_cols = [f"_k{i}" for i in range(len(keys))]
    arrivals, _ = arrival_frame(stream, max_rows, columns=[stream.time])

    def part(df, name, order, key_exprs=()):
        """``df`` as the union's part ``name``: its columns prefixed, ``_o`` its order, the key
        as ``_k0..``, the first ``max_keys`` keys and ``max_rows + 1`` rows (Spark SQL text:
        a few py4j calls per step)."""
        df = sparksql.select(df, f"'{name}' AS _part", f"CAST({order} AS BIGINT) AS _o",
                           *[f"{e} AS {k}" for e, k in zip(key_exprs, key_cols)],
                           *[f"{sparksql.name(c)} AS {sparksql.name(f'{name}_{c}')}" for c in df.columns])
        if key_exprs:
            ranked = ", ".join(f"{k} ASC NULLS FIRST" for k in key_cols)
            df = df.selectExpr("*", f"dense_rank() OVER (ORDER BY {ranked}) AS _rank")
            df = df.selectExpr("*", "max(_rank) OVER () AS _keys").where(f"_rank <= {max_keys}")
        return df.selectExpr("*", "row_number() OVER (ORDER BY _o) AS _n").where(f"_n <= {max_rows + 1}")

    firing_keys = ["key"] if len(keys) == 1 else [f"key.{sparksql.name(k)}" for k in keys]
    union = (sparksql.select(arrivals, "'a' AS _part", "seq AS _o",
                             *[f"{sparksql.name(c)} AS {sparksql.name('a_' + c)}" for c in arrivals.columns])
             .unionByName(part(elements, "e", "seq", [sparksql.name(k) for k in keys]), allowMissingColumns=True)
             .unionByName(part(firings, "f", "monotonically_increasing_id()", firing_keys if keys else []),
                          allowMissingColumns=True))
    pdf = sparksql.small_pandas(union)

    e = part_frame(pdf, "e", elements.schema, key_cols + ["_rank", "_keys"])
    f = part_frame(pdf, "f", firings.schema, key_cols)
    arrivals_pdf = part_frame(pdf, "a", arrivals.schema)
    more_keys = bool(keys) and len(e) > 0 and int(e["_keys"].max()) > max_keys
    if keys:
        e["lane"] = _lane(e[key_cols].set_axis(keys, axis=1), keys) if len(e) else pd.Series(dtype=object)
        f["lane"] = _lane(f[key_cols].set_axis(keys, axis=1), keys) if len(f) else pd.Series(dtype=object)
        ranks = e[["_rank", "lane"]].drop_duplicates().sort_values("_rank", kind="stable")
        lanes = ranks["lane"].tolist()
        f = f[f["lane"].isin(lanes)].reset_index(drop=True)
        e, f = e.drop(columns=key_cols + ["_rank", "_keys"]), f.drop(columns=key_cols + ["key"])
    else:
        e["lane"], f["lane"], lanes = "all", "all", ["all"]
    return e, f, arrivals_pdf, lanes, more_keys


def part_frame(pdf: pd.DataFrame, name: str, schema: T.StructType, extra=()) -> pd.DataFrame:
    """The rows of one part of the union, its columns unprefixed (and ``extra`` kept) in
    the part's order; integer columns integers again (the union made them nullable:
    ``Int64`` where a value is missing)."""
    rows = pdf[pdf["_part"] == name].sort_values("_o", kind="stable")
    prefix = f"{name}_"
    out = rows[[c for c in extra if c in rows.columns] + [c for c in rows.columns if c.startswith(prefix)]]
    out = out.rename(columns=lambda c: c[len(prefix):] if c.startswith(prefix) else c).reset_index(drop=True)
    for field in schema.fields:
        if isinstance(field.dataType, T.IntegralType) and field.name in out.columns:
            column = out[field.name]
            out[field.name] = column.astype("Int64") if column.isna().any() else column.astype("int64")
    return out


def _lane(df: pd.DataFrame, keys) -> pd.Series:
    if not keys:
        return pd.Series("all", index=df.index, dtype=object)
    return df[keys].astype(str).agg(" / ".join, axis=1)


def _ms(v):
    if v is None or v is pd.NaT or v is pd.NA or (isinstance(v, float) and v != v):
        return None
    if isinstance(v, pd.Timestamp):
        return int(v.value // 1_000_000)
    if hasattr(v, "year"):      # a datetime
        return int(pd.Timestamp(v).value // 1_000_000)
    return int(v)


def _to_x(ms, like_ts):
    return pd.Timestamp(ms, unit="ms") if like_ts else ms


def _window_text(start, end):
    if _ms(start) is None:
        return "GlobalWindow"
    return f"[{time_text(start)}, {time_text(end)})"


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
    out = out.sort_values(["lane", "window_start", "window_end"], kind="stable", ignore_index=True)
    out["row"], out["shared"] = _window_rows(out)
    return out


def _window_rows(windows: pd.DataFrame) -> tuple[list, list]:
    """Each window's row in its key's lane, and whether it shares the row with a window it
    overlaps: in order of start, the first row whose windows all ended by its start (as
    few rows as the most windows open at once: ``size / slide`` for sliding windows, one
    for tumbling and session windows); past ``MAX_WINDOW_ROWS`` rows, the row that frees
    first. ``windows`` sorted by lane and start."""
    rows, shared = [0] * len(windows), [False] * len(windows)
    for _, g in windows.groupby("lane", sort=False):
        ends = []   # per row, where its last window ends (ms)
        for i, start, end in zip(g.index, g["window_start"], g["window_end"]):
            start, end = _ms(start), _ms(end)
            row = next((r for r, last in enumerate(ends) if start is None or last is None or last <= start), None)
            if row is None and len(ends) < MAX_WINDOW_ROWS:
                row = len(ends)
                ends.append(end)
            elif row is None:
                row, shared[i] = min(range(len(ends)), key=lambda r: ends[r]), True
            ends[row] = end
            rows[i] = row
    return rows, shared


def _merge(spans):
    out = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:   # touching sessions merge, as TimeWindow.intersects
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _marks(result, elements, firings, x_col, windows):
    """One row per firing, at where it fired: the timer's time, or the causing element's;
    on its window's ``row``."""
    if not len(firings):
        return firings.assign(at=[], label=[], result=[], window=[], watermark_text=[], row=[])
    row_of = {(lane, _ms(s), _ms(e)): r for lane, s, e, r, w in zip(
        windows["lane"], windows["window_start"], windows["window_end"], windows["row"], windows["window"])
        if w != "GlobalWindow"}
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
    out["row"] = [row_of.get((lane, _ms(s), _ms(e)), 0)
                  for lane, s, e in zip(out["lane"], out["window_start"], out["window_end"])]
    out["result"] = [", ".join(f"{c}={short_text(r.get(c))}" for c in outputs)
                     for r in out[outputs].to_dict("records")] if outputs else ""
    out["watermark_text"] = [("end of input" if pd.isna(a) else "none yet") if pd.isna(w) else time_text(w)
                             for w, a in zip(out["watermark"], out["fired_after"])]
    out["fired_after"] = [("end of input" if pd.isna(a) else str(int(a))) for a in out["fired_after"]]
    keep = ["lane", "at", "window", "firing", "pane", "label", "cause", "watermark_text", "fired_after",
            "contents", "result", "row"]
    return out[keep]


def duration_text(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def time_text(v):
    """A time as the tooltips show it: UTC with milliseconds, or integer milliseconds."""
    if isinstance(v, pd.Timestamp):
        return v.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return str(int(v))


def short_text(v, limit=80):
    if isinstance(v, pd.Timestamp):
        return time_text(v)
    if hasattr(v, "tolist"):
        v = v.tolist()
    text = str(v)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _watermark_panel(arrivals: pd.DataFrame, elements: pd.DataFrame, stream, keys, width):
    """The watermark over arrival order, each arrival's event time above it: elements in
    their fate's colour and shape (the top panel's legend), arrivals of keys not drawn
    above grey; its legend has the staircase (and those grey points)."""
    time = stream.time
    is_ts = stream.time_is_timestamp
    t = "T" if is_ts else "Q"
    scale = alt.Scale(type="utc") if is_ts else alt.Undefined
    data = arrivals.merge(elements[["seq", "fate", "lane"]], on="seq", how="left")
    data["fate"] = data["fate"].where(data["fate"].notna(), OTHER)
    data["lane"] = data["lane"].where(data["lane"].notna(), OTHER)
    data["element"] = data["fate"].map(lambda f: FATE_LABELS.get(f, f))
    data = plain_frame(data)

    def when(column, title):
        return alt.Tooltip(f"{column}{TEXT}:N" if is_ts else f"{column}:Q", title=title)

    present = set(data["element"]) | ({"watermark"} if data["watermark"].notna().any() else set())
    marks = legend("element", WATERMARK_KINDS + FATE_KINDS + [OTHER_KIND], present,
                   values=[k.label for k in present_kinds(WATERMARK_KINDS + [OTHER_KIND], present)])
    # the data given to the layer, not to both parts: altair hashes each part's whole spec
    # (checked against its schema) to hoist shared data (~10 ms)
    base = alt.Chart().encode(x=alt.X("seq:Q", title="arrival order (seq)",
                                      axis=alt.Axis(format="d", tickMinStep=1)))
    steps = base.transform_filter("datum.watermark != null").transform_calculate(element="'watermark'").mark_line(
        interpolate="step-after", strokeDash=[4, 3]).encode(
        y=alt.Y(f"watermark:{t}", title="event time / watermark", scale=scale), order="seq:Q",
        stroke=marks["stroke"], tooltip=[alt.Tooltip("seq:Q", title="arrival"), when("watermark", "watermark")])
    tips = [alt.Tooltip("seq:Q", title="arrival"), when(time, "event time"),
            when("watermark", "watermark on arrival"), alt.Tooltip("fate:N")]
    if keys:
        tips.insert(1, alt.Tooltip("lane:N", title="key"))
    dots = base.encode(
        y=alt.Y(f"{time}:{t}", scale=scale), fill=marks["fill"], stroke=marks["stroke"], shape=marks["shape"],
        tooltip=tips)
    return alt.layer(steps, _sized(dots, 55, 160, opacity=1), data=data, width=width, height=170,
                     title=alt.TitleParams("Watermark over arrival order", anchor="start"))
