"""``version_timeline``: what a temporal join did, per key, on event time (or, for a
processing-time join, on the processing time of the arrivals).

Top panel, one lane per key, each lane in sub-rows (two for versions, three for left rows):

- every right row a **version** segment from its time to the next version's time (the
  last one open to the right edge); a deletion (``-U``/``-D``) is drawn dashed; versions
  alternate between two sub-rows so that each ends visibly;
- every left row a point at its event time, coloured and shaped by its fate: **joined**,
  **NULL-padded** (LEFT join: no version, a deletion, or the condition failed),
  **dropped** (INNER join: the same, not emitted), **expired** (state retention cleared it
  before the watermark passed it: never emitted);
- a **link** (a rule) from the version a left row joined (its time) to the left row;
- the **emission**: a hollow diamond at the watermark that emitted the row (``at`` of its
  fate), connected to the row by a dashed rule; at the right edge when it left at the end
  of input (the tooltip says so);
- **late** arrivals (at or below the watermark of their input on arrival) in a red ring;
- **state cleanups**, two kinds with marks of their own: a grey × at the watermark that
  dropped a version from state (``cleaned``), a brown hourglass where state retention
  (the TTL) expired it (``expired``: at the operator watermark when its processing-time
  timer fired), on the version's sub-row, with a dotted rule from the end of its segment
  ("kept in state until");
- rows a versioned view's **deduplication** dropped (older than the key's current row): a
  grey cross at their time, never a version.

One legend lists the marks present (``KINDS``: each mark's colour and symbol, the same in
the chart and in the legend); the line under the title gives the counts.

A processing-time join (the temporal table function join) is drawn on processing time:
each version from its arrival until the next one replaced it, each left row at its arrival
(it is emitted then: no wait, no watermark panel).

Bottom panel (``watermark_panel=True``): the operator watermark over merged arrival order
(a dashed staircase), each arrival's event time above it (left rows circles, versions
squares), late arrivals a red × in a red ring.

    EUR | [==1.10==)       [==1.11==)  ···×
        |        [==1.12==)·×      [==1.15======>
        |   ●-- o2 - - ◇      ●--o3 - - - ◇

At most ``max_rows`` fates are brought to the driver (a chart is for looking), with the
merged arrivals in one collect: over that it asks for ``key=`` instead of drawing a part
of the story.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
from pyspark.sql import functions as F

from .. import sparksql
from ..errors import KitError
from .marks import (DASHED, DIAMOND_RING, DOTTED, HOURGLASS, LATE_COLOR, LINE, RING, RING_X, X, Kind,
                    check_title, legend, literal, title_params)
from .stream import TEXT, plain_frame
from .window import duration_text, short_text, time_text

__all__ = ["version_timeline", "MARKS", "KINDS"]

VERSION, DELETION = "version (valid until the next)", "deletion version (-U/-D)"
JOINED, PADDED, DROPPED, EXPIRED_LEFT = ("left row joined", "left row NULL-padded",
                                        "left row dropped (no version)", "left row expired (state TTL, never emitted)")
LINK, EMITTED, LATE = "link: version → left row", "emitted at the watermark (dashed: the wait)", "late arrival"
CLEANED, EXPIRED_RIGHT = "version cleaned by the watermark", "version expired (state TTL)"
KEPT = "kept in state until dropped"
DEDUPLICATED = "row dropped by the view's deduplication"
_SEGMENT = "M-1,-0.35H1V0.35H-1Z"
_DASHED_SEGMENT = "M-1,-0.35H-0.45V0.35H-1ZM-0.2,-0.35H0.2V0.35H-0.2ZM0.45,-0.35H1V0.35H0.45Z"
# every mark's meaning, in legend order: its colour and the symbol drawn, in the chart and the legend
KINDS = [
    Kind(VERSION, "#6b8fbf", _SEGMENT),
    Kind(DELETION, "#7f7f7f", _DASHED_SEGMENT),
    Kind(JOINED, "#1f77b4", "circle"),
    Kind(PADDED, "#ff7f0e", "square"),
    Kind(DROPPED, "#7f7f7f", "triangle-up"),
    Kind(EXPIRED_LEFT, "#8c564b", "diamond"),
    Kind(LINK, "#9ab3d5", LINE, filled=False),
    Kind(EMITTED, "#2ca02c", DIAMOND_RING),
    Kind(LATE, LATE_COLOR, RING),
    Kind(CLEANED, "#555555", X, filled=False),
    Kind(EXPIRED_RIGHT, "#8c564b", HOURGLASS),
    Kind(KEPT, "#555555", DOTTED, filled=False),
    Kind(DEDUPLICATED, "#aaaaaa", "cross"),
]
MARKS = [(k.label, k.color, k.symbol) for k in KINDS]   # (label, colour, symbol), as before
SLOTS = ["v0", "v1", "l0", "l1", "l2"]
END = "end of input"


def version_timeline(join, key=None, max_rows: int = 5000, watermark_panel: bool = True,
                     width: int = 640, lane_height: int = 90, title: str | None = None):
    """Draw a ``TemporalJoin`` (``kit.joins.temporal_join(...)``) from its ``fates()``:
    versions, left rows, links, emissions, late rows and state cleanups.

    ``key``: draw only this key (a value; a tuple of values for a key of several columns) or
    these keys (a list); None: every key. ``max_rows``: fates (one per arrival) brought to
    the driver at most; over it the function raises rather than draw part of a key's story.
    ``watermark_panel``: add the operator watermark over merged arrival order below (event
    time only). ``title``: the chart's title instead of the default (e.g. the parameter
    values a widget shows).
    """
    from ..joins.versioned import TemporalJoin

    if not isinstance(join, TemporalJoin):
        raise KitError(f"version_timeline draws a temporal join (kit.joins.temporal_join(...)); "
                       f"got {type(join).__name__}")
    check_title("version_timeline", title)
    if not isinstance(max_rows, int) or isinstance(max_rows, bool) or max_rows < 1:
        raise KitError(f"max_rows must be a positive int; got {max_rows!r}")
    lanes_wanted = _wanted(key, len(join.keys))
    fates, arrivals = _collect(join, lanes_wanted, max_rows)
    if not fates:
        raise KitError(f"no arrival has key {key!r}; the join's keys are: {_keys_of(join)}" if key is not None
                       else "the join has no arrival")
    proc = join.time == "processing"
    is_ts = proc or join.left.time_is_timestamp
    versions, lefts, cleanups, (start, edge) = _shape(fates, arrivals, join.how, is_ts, proc)
    lanes = sorted(set(versions["lane"]) | set(lefts["lane"]))

    t = "T" if is_ts else "Q"
    domain = ([plain_frame(pd.DataFrame({"x": pd.to_datetime([start, edge], unit="ms")}))["x"].tolist()]
              if is_ts else [[start, edge]])[0]
    scale = alt.Scale(type="utc", domain=domain) if is_ts else alt.Scale(domain=domain, nice=False, zero=False)
    conv = (lambda s: pd.to_datetime(s, unit="ms")) if is_ts else (lambda s: s.astype("Int64").astype(object))
    for df, cols in ((versions, ["start", "end", "cleanup"]), (lefts, ["time", "version_time", "emit"]),
                     (cleanups, ["at"])):
        for c in cols:
            df[c] = conv(df[c])
    present = {*versions["mark"], *lefts["mark"], *cleanups["mark"]}
    if len(lefts) and lefts["version_time"].notna().any():
        present.add(LINK)
    if len(lefts) and lefts["emit"].notna().any():
        present.add(EMITTED)
    if (len(lefts) and lefts["late"].any()) or (len(versions) and versions["late"].any()):
        present.add(LATE)
    if len(versions) and versions["cleanup"].notna().any():
        present.add(KEPT)
    marks = legend("mark", KINDS, present)
    fill, stroke, shape = marks["fill"], marks["stroke"], marks["shape"]
    key_title = ", ".join(l for l, _ in join.keys)
    y = alt.Y("lane:N", title=key_title, sort=lanes, axis=alt.Axis(labelLimit=120))
    y_off = alt.YOffset("slot:N", scale=alt.Scale(domain=SLOTS, paddingInner=0.15))
    x_title = "processing time (arrival)" if proc else f"event time ({join.left.time} / {join.right.time})"

    def x(col, title=x_title):
        return alt.X(f"{col}:{t}", title=title, scale=scale)

    def when(col, title):
        return alt.Tooltip(f"{col}{TEXT}:N" if is_ts else f"{col}:Q", title=title)

    def kind(chart, label):   # every row of ``chart`` drawn as the mark ``label``
        return chart.transform_calculate(mark=literal(label))

    V, L, C = plain_frame(versions), plain_frame(lefts), plain_frame(cleanups)
    vtips = [alt.Tooltip("lane:N", title="key"), alt.Tooltip("seq:Q", title="right arrival"),
             when("start", "valid from"), alt.Tooltip("until:N", title="valid until"),
             alt.Tooltip("op:N"), alt.Tooltip("fate:N"), alt.Tooltip("late:N"), alt.Tooltip("row:N", title="values"),
             alt.Tooltip("state:N", title="in state until")]
    ltips = [alt.Tooltip("lane:N", title="key"), alt.Tooltip("seq:Q", title="left arrival"),
             when("time", "event time"), alt.Tooltip("fate:N"), alt.Tooltip("late:N"),
             alt.Tooltip("row:N", title="values"), alt.Tooltip("version:N", title="joined version"),
             alt.Tooltip("emitted:N", title="emitted at watermark")]
    layers = []
    if len(V):
        seg = alt.Chart(V).encode(x=x("start"), x2="end", y=y, yOffset=y_off, tooltip=vtips)
        layers.append(seg.mark_rule(strokeWidth=7, opacity=0.85).encode(
            stroke=stroke, strokeDash=alt.StrokeDash("mark:N", legend=None, scale=alt.Scale(
                domain=[VERSION, DELETION], range=[[1, 0], [4, 3]]))).properties(name="versions"))
        layers.append(alt.Chart(V).mark_point(shape="stroke", size=90, strokeWidth=2, filled=False).encode(
            x=x("start"), y=y, yOffset=y_off, stroke=stroke, tooltip=vtips).properties(name="version starts"))
        kept = kind(alt.Chart(V).transform_filter("datum.cleanup != null"), KEPT).encode(
            x=x("end"), x2="cleanup", y=y, yOffset=y_off, tooltip=vtips)
        layers.append(kept.mark_rule(strokeDash=[1, 3], strokeWidth=1.5).encode(stroke=stroke).properties(
            name="kept in state"))
        late = kind(alt.Chart(V).transform_filter("datum.late"), LATE)
        layers.append(late.mark_point(size=260, strokeWidth=1).encode(
            x=x("start"), y=y, yOffset=y_off, fill=fill, stroke=stroke, shape=shape, tooltip=vtips).properties(
            name="late versions"))
    if len(L):
        link = kind(alt.Chart(L).transform_filter("datum.version_time != null"), LINK).encode(
            x=x("version_time"), x2="time", y=y, yOffset=y_off, tooltip=ltips)
        layers.append(link.mark_rule(strokeWidth=2).encode(stroke=stroke).properties(name="links"))
        emit = kind(alt.Chart(L).transform_filter("datum.emit != null"), EMITTED)
        layers.append(emit.mark_rule(strokeDash=[4, 3], strokeWidth=1.5).encode(
            x=x("time"), x2="emit", y=y, yOffset=y_off, stroke=stroke, tooltip=ltips).properties(name="waits"))
        layers.append(emit.mark_point(size=260, strokeWidth=1).encode(
            x=x("emit"), y=y, yOffset=y_off, fill=fill, stroke=stroke, shape=shape, tooltip=ltips).properties(
            name="emissions"))
        layers.append(alt.Chart(L).mark_point(size=80, strokeWidth=1, opacity=1).encode(
            x=x("time"), y=y, yOffset=y_off, fill=fill, stroke=stroke, shape=shape, tooltip=ltips).properties(
            name="left rows"))
        late = kind(alt.Chart(L).transform_filter("datum.late"), LATE)
        layers.append(late.mark_point(size=480, strokeWidth=1).encode(
            x=x("time"), y=y, yOffset=y_off, fill=fill, stroke=stroke, shape=shape, tooltip=ltips).properties(
            name="late left rows"))
    if len(C):
        ctips = [alt.Tooltip("lane:N", title="key"), alt.Tooltip("seq:Q", title="right arrival"),
                 alt.Tooltip("version:N"), alt.Tooltip("fate:N"), alt.Tooltip("when:N", title="at")]
        layers.append(alt.Chart(C).mark_point(size=110, strokeWidth=2.5).encode(
            x=x("at"), y=y, yOffset=y_off, fill=fill, stroke=stroke, shape=shape, tooltip=ctips).properties(
            name="cleanups"))

    n_left, n_ver = len(lefts), len(versions)
    n_late = int(lefts["late"].sum()) + int(versions["late"].sum())
    facts = [f"{n_ver} version{'s' if n_ver != 1 else ''}", f"{n_left} left row{'s' if n_left != 1 else ''}"]
    if proc:
        facts.append("each left row joins the version in state when it arrives")
    else:
        facts.append(f"{n_late} late arrival{'s' if n_late != 1 else ''}")
    retention = getattr(join, "retention", None)
    if retention is not None and getattr(retention, "ttl", None):
        facts.append(f"state TTL {duration_text(retention.ttl.millis)}")
    heading = title_params(f"{'Processing-time t' if proc else 'T'}emporal join ({join.how.upper()}) on "
                           f"{key_title}: versions and left rows", ", ".join(facts), title)
    alone = not watermark_panel or proc
    # the layers given once (each LayerChart made copies them all)
    top = alt.layer(*layers, width=width, height=lane_height * len(lanes), **({"title": heading} if alone else {}))
    if alone:
        return top
    return alt.vconcat(top, _watermark_panel(arrivals, max_rows, is_ts, width), title=heading).resolve_scale(
        fill="independent", stroke="independent", shape="independent")


# ---------------------------------------------------------------- data


def _wanted(key, n_cols):
    """The lane texts asked for, or None for every key."""
    if key is None:
        return None
    keys = list(key) if isinstance(key, list) else [key]
    out = []
    for k in keys:
        if n_cols > 1:
            if not isinstance(k, tuple) or len(k) != n_cols:
                raise KitError(f"key={k!r}: the join key has {n_cols} columns: give a tuple of {n_cols} values "
                               "(or a list of such tuples)")
            out.append(" / ".join(map(str, k)))
        else:
            if isinstance(k, (tuple, dict, set)):
                raise KitError(f"key={k!r}: give one key value (or a list of them)")
            out.append(str(k))
    return out


def _lane(parts: list) -> str:
    """SQL: a lane's text from its key's parts (SQL strings), ``' / '`` between them; a
    NULL key of one column reads ``None``."""
    return f"concat_ws(' / ', {', '.join(parts)})" if len(parts) > 1 else f"coalesce({parts[0]}, 'None')"


def _lane_col(join) -> str:
    """SQL: the lane of a row of ``join.fates()``."""
    from ..sparksql import name as q

    return _lane([f"coalesce(CAST(`left`.{q(l)} AS STRING), CAST(`right`.{q(r)} AS STRING))" for l, r in join.keys])


def _collect(join, lanes, max_rows):
    """The fates (of the keys asked for, as Rows with ``lane``) and the merged arrivals of
    those keys (pandas: ``pos``, ``side``, ``seq``, ``ts`` in ms, ``late``, ``W``, ``pt``),
    the first ``max_rows + 1`` of each by merged position, in one collect: both are kept
    (``localCheckpoint``), so one partition at the end reads them in one job, where a
    ``limit`` over several partitions had taken several."""
    from ..replay.interleave import LEFT

    fates = join.fates().selectExpr("'f' AS _part", "*", f"{_lane_col(join)} AS lane")
    merged = join.merged
    if lanes is not None:
        fates = fates.where(F.col("lane").isin(lanes))
        merged = merged.where(F.expr(_lane([f"CAST(_k{i} AS STRING)" for i in range(len(join.keys))])).isin(lanes))
    arrivals = sparksql.select(merged, "'a' AS _part", "_pos AS pos", f"IF(_side = {LEFT}, 'left', 'right') AS side",
                               "_seq AS seq", "_ts AS ts", "_late AS late", "_W AS W", "_pt AS pt")
    both = fates.unionByName(arrivals, allowMissingColumns=True).coalesce(1)
    rows = both.selectExpr("*", "row_number() OVER (PARTITION BY _part ORDER BY pos, side, seq) AS _n").where(
        f"_n <= {max_rows + 1}").collect()
    fates_rows = [r for r in rows if r["_part"] == "f"]
    if len(fates_rows) > max_rows:
        raise KitError(f"the join has more than {max_rows} arrivals{' of these keys' if lanes else ''}: "
                       "draw some keys (key=value or key=[...]) or raise max_rows")
    columns = ["pos", "side", "seq", "ts", "late", "W", "pt"]
    arrivals_pdf = pd.DataFrame([[r[c] for c in columns] for r in rows if r["_part"] == "a"], columns=columns)
    for c in ("pos", "seq", "ts", "W", "pt"):
        arrivals_pdf[c] = arrivals_pdf[c].astype("Int64")
    arrivals_pdf["late"] = arrivals_pdf["late"].astype(bool)
    return fates_rows, arrivals_pdf.sort_values("pos", ignore_index=True)


def _keys_of(join) -> str:
    """The join's keys, as ``key=`` takes them (read again: only when a key asked for is not there)."""
    lanes = [r.lane for r in join.fates().selectExpr(f"{_lane_col(join)} AS lane").distinct().orderBy("lane").collect()]
    return ", ".join(lanes[:20]) + (", ..." if len(lanes) > 20 else "")


def _values(row) -> str:
    return ", ".join(f"{c}={short_text(_ts(v))}" for c, v in row.asDict().items()) if row is not None else ""


def _ts(v):
    return pd.Timestamp(v) if hasattr(v, "year") and hasattr(v, "hour") else v


def _shape(rows, arrivals, how, is_ts, proc=False):
    """(versions, left rows, cleanups, (left edge, right edge) in ms) as pandas frames (times
    in ms); event time (``proc``: processing time) and lateness from the merged ``arrivals``."""
    vs, ls, cs = [], [], []
    merged = {(s, q): (ts, late and not proc) for s, q, ts, late in
              zip(arrivals["side"], arrivals["seq"], arrivals["pt" if proc else "ts"], arrivals["late"])}

    def _text_ms(ms):
        return time_text(pd.Timestamp(ms, unit="ms")) if is_ts else str(int(ms))

    wm = {p: (None if pd.isna(w) else int(w)) for p, w in zip(arrivals["pos"], arrivals["W"])}
    ptime = {}
    for r in rows:
        ts, late = merged[(r.side, r.seq)]
        if r.fate == "deduplicated":
            cs.append(dict(lane=r.lane, seq=r.seq, at=ts, fate=r.fate, slot=SLOTS[0], mark=DEDUPLICATED,
                           version=f"{_values(r.right)} (older than the key's current row)", when=_text_ms(ts)))
        elif r.side == "right":
            op = (r.right.asDict().get("op") or "+I") if r.right is not None else "+I"
            at = r.at
            if r.fate == "expired" and not proc:   # at: the processing time of the TTL timer; draw it at
                at = wm.get(r.at_pos)     # the operator watermark then, on the event-time axis
                ptime[(r.lane, r.seq)] = r.at
            vs.append(dict(lane=r.lane, seq=r.seq, start=ts, fate=r.fate, at=at, at_pos=r.at_pos,
                           late=bool(late), op=op, row=_values(r.right),
                           mark=VERSION if op in ("+I", "+U") else DELETION))
        else:
            emitted = r.fate == "joined" or (how == "left" and r.fate in ("no_version", "deleted", "condition"))
            mark = (JOINED if r.fate == "joined" else EXPIRED_LEFT if r.fate == "expired"
                    else PADDED if emitted else DROPPED)
            met = (merged[("right", r.version_seq)][0] if proc else r.version_time) if r.fate == "joined" else None
            ls.append(dict(lane=r.lane, seq=r.seq, time=ts, fate=r.fate, at=r.at, emitted_flag=emitted and not proc,
                           late=bool(late), row=_values(r.left), version_seq=r.version_seq, version_time=met,
                           version=_values(r.right) if r.fate == "joined" else "", mark=mark))
    times = [v["start"] for v in vs] + [l["time"] for l in ls] + [c["at"] for c in cs] + \
        [v["at"] for v in vs if v["at"] is not None] + \
        [x["at"] for x in ls if x["at"] is not None and (proc or x["fate"] != "expired")]
    lo, hi = min(times), max(times)
    pad = max((hi - lo) // 20, 1)
    edge = hi + 2 * pad
    versions = pd.DataFrame(vs, columns=["lane", "seq", "start", "fate", "at", "at_pos", "late", "op", "row", "mark"])
    versions = versions.sort_values(["lane", "start", "seq"], ignore_index=True)
    ends, slots, untils, cleanup, state = [], [], [], [], []
    for lane, g in versions.groupby("lane", sort=False):
        starts = g["start"].tolist()
        for i, (s, fate, at) in enumerate(zip(starts, g["fate"], g["at"])):
            later = [x for x in starts[i + 1:] if x > s]
            end = later[0] if later else edge
            ends.append(end)
            slots.append(SLOTS[i % 2])
            untils.append(_text_ms(end) if later else "open (the last version)")
            gone = fate in ("cleaned", "expired")
            c = (edge if pd.isna(at) else at) if gone else None
            cleanup.append(c if c is not None and c > end else None)
            state.append((END if pd.isna(at) else _text_ms(at)) if gone else
                         ("the end (kept)" if fate == "kept" else fate))
            if gone:
                cs.append(dict(lane=lane, seq=g["seq"].iloc[i], at=c, fate=fate, slot=SLOTS[i % 2],
                               mark=CLEANED if fate == "cleaned" else EXPIRED_RIGHT,
                               version=f"valid from {_text_ms(s)}: {g['row'].iloc[i]}",
                               when=(END if pd.isna(at) else _text_ms(at)) + (
                                   f" (state TTL at processing time {ptime[(lane, g['seq'].iloc[i])]})"
                                   if (lane, g["seq"].iloc[i]) in ptime else "")))
    versions["end"], versions["slot"], versions["until"] = ends, slots, untils
    versions["cleanup"], versions["state"] = cleanup, state
    lefts = pd.DataFrame(ls, columns=["lane", "seq", "time", "fate", "at", "emitted_flag", "late", "row",
                                      "version_seq", "version_time", "version", "mark"])
    lefts = lefts.sort_values(["lane", "time", "seq"], ignore_index=True)
    lefts["slot"] = [SLOTS[2 + i % 3] for i in lefts.groupby("lane").cumcount()]
    lefts["emit"] = [(edge if pd.isna(at) else at) if e else None for e, at in zip(lefts["emitted_flag"], lefts["at"])]
    lefts["emitted"] = [(END if pd.isna(at) else _text_ms(at)) if e else
                        ("never (state expired)" if f == "expired" else "never (INNER: no version)"
                         if f != "joined" and how == "inner" else "at its arrival")
                        for e, at, f in zip(lefts["emitted_flag"], lefts["at"], lefts["fate"])]
    lefts = lefts.drop(columns=["emitted_flag", "at"])
    versions = versions.drop(columns=["at", "at_pos"])
    cleanups = pd.DataFrame(cs, columns=["lane", "seq", "at", "fate", "slot", "mark", "version", "when"])
    cleanups = cleanups.sort_values(["lane", "at"], kind="stable", ignore_index=True)
    return versions, lefts, cleanups, (lo - pad, edge)


ARRIVAL_KINDS = [Kind("operator watermark (min of both inputs')", "#555555", DASHED, filled=False),
                 Kind("left row", "#1f77b4", "circle"), Kind("version", "#6b8fbf", "square"),
                 Kind("late arrival (at or below its input's watermark)", LATE_COLOR, RING_X)]


def _watermark_panel(arrivals, max_rows, is_ts, width):
    cut = len(arrivals) > max_rows
    pdf = arrivals.head(max_rows).copy()
    watermark, left, version, late = (k.label for k in ARRIVAL_KINDS)
    pdf["arrival"] = [late if is_late else (left if side == "left" else version)
                      for side, is_late in zip(pdf["side"], pdf["late"])]
    for c in ("ts", "W"):
        pdf[c] = pd.to_datetime(pdf[c], unit="ms") if is_ts else pdf[c].astype("Int64").astype(object)
    pdf = plain_frame(pdf.rename(columns={"ts": "time", "W": "watermark"}))
    t = "T" if is_ts else "Q"
    scale = alt.Scale(type="utc") if is_ts else alt.Undefined
    marks = legend("arrival", ARRIVAL_KINDS,
                   set(pdf["arrival"]) | ({watermark} if pdf["watermark"].notna().any() else set()))

    def when(col, title):
        return alt.Tooltip(f"{col}{TEXT}:N" if is_ts else f"{col}:Q", title=title)

    base = alt.Chart(pdf).encode(x=alt.X("pos:Q", title="merged arrival order (pos)",
                                         axis=alt.Axis(format="d", tickMinStep=1)))
    steps = base.transform_filter("datum.watermark != null").transform_calculate(arrival=literal(watermark))
    steps = steps.mark_line(interpolate="step-after", strokeDash=[4, 3]).encode(
        y=alt.Y(f"watermark:{t}", title="event time / watermark", scale=scale), order="pos:Q",
        stroke=marks["stroke"],
        tooltip=[alt.Tooltip("pos:Q", title="arrival"), when("watermark", "operator watermark")])
    tips = [alt.Tooltip("pos:Q", title="arrival"), alt.Tooltip("side:N"), alt.Tooltip("seq:Q"),
            when("time", "event time"), when("watermark", "operator watermark after it"), alt.Tooltip("late:N")]
    dots = base.encode(y=alt.Y(f"time:{t}", scale=scale), fill=marks["fill"], stroke=marks["stroke"],
                       shape=marks["shape"], tooltip=tips)
    note = f" (the first {max_rows} arrivals)" if cut else ""
    dots = dots.mark_point(strokeWidth=1, opacity=1).encode(size=alt.condition("datum.late", alt.value(150),
                                                                               alt.value(50)))
    return alt.layer(steps, dots).properties(
        width=width, height=170, title=alt.TitleParams(f"Operator watermark over merged arrival order{note}",
                                                       anchor="start"))
