"""What a continuous query's result did, change by change: ``changelog_timeline`` and
``table_history``.

``changelog_timeline(result)``: one lane per key of the result (its ``upsert_key``, else
the whole row), each change a mark at the arrival that caused it (``seq``): ``+I`` a green
dot, ``-U`` a red ring (the row taken back) followed by ``+U`` a blue dot (the new row),
``-D`` a red ×; beside each mark the values that are not the key. A cascade (an aggregate
over an aggregate, or the list of results you give) is drawn as panels on one axis of
arrivals, the input-most first, and the arrivals that retracted a row are shaded in every
panel, so a retraction is seen travelling from one table to the next::

    1. GroupAggregate(groupBy=[word], ...)      2. GroupAggregate(groupBy=[cnt], ...)
    Hello | ●1        ○1 ●2                     1 | ●1   ○1 ●2   ○2 ●1
    World |     ●1                              2 |              ●1
            0    1    2   seq                         0    1      2   seq

``table_history(result)``: the input table and the result table as of any arrival (the
seed's figures of the two clicks queries); ``history.chart(at=k)`` draws both, the row that
arrived and the result rows it changed highlighted; with a slider
(``kit.widgets.bind(history.chart, at=IntSlider(...))``) a reader steps through them.

Both bring their rows to the driver in one collect (every panel's changes in one union,
or the input rows with the changelog) and draw every later view from it: a slider move
runs no Spark job. Charts are for small results: at most ``max_rows`` changes (per panel)
are drawn, and the title says when some were left out.
"""

from __future__ import annotations

import textwrap

import altair as alt
import pandas as pd

from .. import sparksql
from ..sql.planner import logical as P
from ..sql.table import DynamicTable, PlanRun
from ..changelog import ADDS, DELETE, INSERT, META, UPDATE_AFTER, UPDATE_BEFORE
from ..errors import KitError
from .marks import LATE_COLOR, RING, X, Kind, check_title, legend, title_params
from .stream import check_max_rows
from .window import part_frame

__all__ = ["changelog_timeline", "table_history", "TableHistory", "KINDS"]

KINDS = [Kind("+I insert", "#2ca02c", "circle"), Kind("-U update before (retracted)", LATE_COLOR, RING),
         Kind("+U update after", "#1f77b4", "circle"), Kind("-D delete", "#7f0000", X, filled=False)]
LABELS = dict(zip((INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE), (k.label for k in KINDS)))
ADDED = "#dff0d8"      # a table row the arrival shown added


def changelog_timeline(result, max_rows: int = 500, width: int = 640, lane_height: int = 26,
                       title: str | None = None, proctime: bool = False) -> alt.VConcatChart:
    """Draw the changelog of ``result`` (a ``kit.sql`` result over streams), or of a list of
    results stacked as a cascade (e.g. ``[inner, outer]``), per key over arrival order.

        counts = kit.sql("SELECT user, COUNT(url) AS cnt FROM clicks GROUP BY user", clicks=clicks)
        kit.viz.changelog_timeline(counts)

    ``max_rows``: changes drawn per panel at most (the first in changelog order);
    ``lane_height``: pixels per key; ``title``: the chart's title instead of the default;
    ``proctime``: label each arrival with its processing time too (what a state TTL counts).
    """
    check_title("changelog_timeline", title)
    if not isinstance(proctime, bool):
        raise KitError(f"changelog_timeline: proctime must be True or False; got {proctime!r}")
    check_max_rows("changelog_timeline", max_rows)
    panels = _panels(result)
    changes = _collect(panels, max_rows)
    cut = [len(g) > max_rows for _, g in changes.groupby("panel")]
    changes = changes.groupby("panel", group_keys=False).head(max_rows)
    changes["kind"] = changes["op"].map(LABELS)
    # the changes one arrival made to one key side by side, centred on the arrival and within
    # its slot (+-0.35: never as far as a neighbour's)
    place = changes.groupby(["panel", "lane", "seq"]).cumcount()
    many = changes.groupby(["panel", "lane", "seq"])["seq"].transform("size")
    last = int(changes["seq"].max()) if len(changes) else 0
    step = (0.7 / (many - 1).clip(lower=1)).clip(upper=min(0.3, 18 * (last + 1) / width))
    changes["x"] = changes["seq"] + (place - (many - 1) / 2) * step
    retracting = pd.DataFrame({"seq": sorted(set(changes.loc[changes["op"].isin([UPDATE_BEFORE, DELETE]), "seq"]))
                               if len(panels) > 1 else []}, dtype=int)
    retracting["from"], retracting["to"] = retracting["seq"] - 0.5, retracting["seq"] + 0.5
    marks = legend("kind", KINDS, changes["kind"], title="change")
    scale = alt.Scale(domain=[-0.5, last + 0.5], nice=False, zero=False)
    axis = alt.Axis(format="d", tickMinStep=1, values=list(range(last + 1)) if last < 60 else alt.Undefined)
    x_title = "arrival order (seq)"
    if proctime:
        axis, x_title = _proctime_axis(changes), "arrival order (seq) and its processing time"
    changes = changes.drop(columns="pt")
    x = alt.X("x:Q", title=x_title, scale=scale, axis=axis)
    tips = [alt.Tooltip("seq:Q", title="arrival"), alt.Tooltip("op:N", title="row kind"),
            alt.Tooltip("row:N", title="values")]
    charts = []
    for i, (name, df, key) in enumerate(panels):
        data = changes[changes["panel"] == i]
        lanes = _lane_order(data["lane"])
        labelled = [c for c in df.columns if c not in (*META, "_wm", *key)] if key else []
        name = _lines(f"{i + 1}. {name}" if len(panels) > 1 else name)
        y = alt.Y("lane:N", sort=lanes, title=", ".join(key) if key else "row",
                  axis=alt.Axis(labelLimit=160))
        shade = alt.Chart(retracting).mark_rect(color="#888888", opacity=0.12).encode(
            x=alt.X("from:Q", scale=scale, axis=axis, title=x_title), x2="to:Q")
        layers = [shade] if len(retracting) else []
        points = alt.Chart(data).encode(x=x, y=y)
        layers.append(points.mark_point(size=110, strokeWidth=1.5, opacity=1).encode(
            fill=marks["fill"], stroke=marks["stroke"], shape=marks["shape"], tooltip=tips))
        layers.append(points.mark_text(dy=-11, fontSize=10).encode(text="label:N"))
        charts.append(alt.layer(*layers, width=width, height=lane_height * max(len(lanes), 1), title=alt.TitleParams(
            name, subtitle=f"numbers on the marks: {', '.join(labelled)}" if labelled else alt.Undefined,
            anchor="start", fontSize=12, subtitleFontSize=10)))
    counts = changes["op"].value_counts()
    per_table = changes["panel"].value_counts()
    facts = [f"{len(changes)} change{'s' if len(changes) != 1 else ''}"
             + (" (" + ", ".join(f"table {i + 1}: {per_table.get(i, 0)}" for i in range(len(panels)))
                + ", the last the result)" if len(panels) > 1 else "") + ": "
             + ", ".join(f"{counts[op]} {op}" for op in LABELS if op in counts)]
    silent = (last + 1 - changes["seq"].nunique()) if len(changes) else 0
    if silent:
        facts.append(f"{silent} arrival{'s' if silent != 1 else ''} changed nothing (no mark)")
    if len(retracting):
        facts.append("shaded: arrivals that retracted a row")
    if any(cut):
        facts.append(f"drawn: the first {max_rows} changes{' per table' if len(panels) > 1 else ''} of more")
    default = "Changelog per key over arrival order" + (" (a cascade: each table feeds the next)"
                                                          if len(panels) > 1 else "")
    return alt.vconcat(*charts, spacing=14, title=title_params(default, "; ".join(facts), title)).resolve_scale(
        x="shared")


def _proctime_axis(changes: pd.DataFrame) -> alt.Axis:
    """An axis labelling each arrival that changed something ``seq · HH:MM:SS``, its
    processing time (``pt``, ms)."""
    times = changes.dropna(subset=["pt"]).groupby("seq")["pt"].first()
    if times.empty:
        raise KitError("changelog_timeline: proctime=True needs a stream with a processing time "
                       "(kit.stream(..., proctime=Clock(...)) or a column)")
    shown = pd.to_datetime(times, unit="ms").dt.strftime("%H:%M:%S")
    cases = " : ".join(f"datum.value == {seq} ? '{seq} · {t}'" for seq, t in shown.items())
    return alt.Axis(format="d", tickMinStep=1, values=list(times.index), labelAngle=-40,
                    labelExpr=f"{cases} : datum.label")


def _lane_order(lanes: pd.Series) -> list:
    """The lanes top to bottom: by value when every one is a number (``cnt`` 1, 2, 3), else
    in order of first change."""
    first = list(dict.fromkeys(lanes))
    numbers = pd.to_numeric(pd.Series(first, dtype=object), errors="coerce")
    return [first[i] for i in numbers.sort_values(kind="stable").index] if numbers.notna().all() else first


def _panels(result) -> list:
    """[(panel title, changelog DataFrame with ``_op``, the columns, ``seq``, ``_n``), key
    columns or ()] for ``result`` (its cascade's tables too) or a list of results."""
    results = result if isinstance(result, (list, tuple)) else [result]
    if not results or not all(isinstance(r, DynamicTable) for r in results):
        raise KitError("changelog_timeline draws a continuous query's result (kit.sql(...) over kit.stream(...)) "
                       f"or a list of them; got {type(result).__name__}")
    if isinstance(result, (list, tuple)):
        return [(" ".join(r.query.split()) or f"table {i + 1}", r.log.df, r.upsert_key or ())
                for i, r in enumerate(results)]
    tables = _stateful(result.root)
    run = PlanRun(result)
    panels = []
    for shown, node in tables[:-1]:
        log = run.node(shown, update_before=True)
        names = dict(zip(shown.columns, shown.names))
        df = log.df.selectExpr("_op", *[f"{c} AS {sparksql.name(names[c])}" for c in shown.columns], "seq", "_n",
                               "_pt")
        panels.append((node.label(), df, tuple(names[c] for c in log.upsert_key or ())))
    name = tables[-1][1].label() if len(tables) > 1 else " ".join(result.query.split()) or "result"
    return panels + [(name, result.log.df, result.upsert_key or ())]


def _stateful(root: P.Node) -> list:
    """[(the node whose rows a panel shows, the stateful operator under it)], inputs first:
    each GroupAggregate, Rank or Deduplicate with the Calc just above it (its SQL names)."""
    out = []

    def walk(node, parent):
        for child in node.inputs:
            walk(child, node)
        if isinstance(node, (P.GroupAggregate, P.Rank, P.Deduplicate)):
            out.append((parent if isinstance(parent, P.Calc) else node, node))
    walk(root, None)
    return out


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _lines(query: str, width: int = 100, most: int = 4) -> str | list:
    """``query`` on lines of at most ``width`` characters (a panel's title: the whole query,
    not cut where it gets interesting), at most ``most`` of them; one line as a string."""
    lines = textwrap.wrap(" ".join(query.split()), width) or [""]
    lines = lines if len(lines) <= most else lines[:most - 1] + [lines[most - 1][:width - 1] + "…"]
    return lines[0] if len(lines) == 1 else lines


def _collect(panels: list, max_rows: int) -> pd.DataFrame:
    """Every panel's first ``max_rows + 1`` changes in one collect: ``panel``, ``seq``,
    ``op``, ``lane`` (the key's values), ``label`` (the other values), ``row`` (all, named)."""
    parts = None
    for i, (_, df, key) in enumerate(panels):
        columns = [c for c in df.columns if c not in (*META, "_wm")]
        text = {c: f"coalesce(CAST({sparksql.name(c)} AS STRING), 'NULL')" for c in columns}
        lane = [text[c] for c in key] or list(text.values())
        rest = [text[c] for c in columns if c not in key] if key else []
        named = ", ".join(f"concat('{_quoted(c)}=', {text[c]})" for c in columns)
        part = df.selectExpr(f"{i} AS panel", "seq", "_n", "_pt AS pt", "_op AS op", f"concat_ws(' / ', {', '.join(lane)}) AS lane",
                             f"concat_ws(', ', {', '.join(rest) or repr('')}) AS label",
                             f"concat_ws(', ', {named}) AS row")
        parts = part if parts is None else parts.unionByName(part)
    ranked = parts.selectExpr("*", "row_number() OVER (PARTITION BY panel ORDER BY seq, _n) AS _o").where(
        f"_o <= {max_rows + 1}")
    pdf = ranked.toPandas().sort_values(["panel", "_o"], ignore_index=True)
    return pdf.drop(columns=["_n", "_o"]).astype({"panel": int, "seq": int})


# ---------------------------------------------------------------- the tables as of an arrival


def table_history(result, max_rows: int = 2000) -> "TableHistory":
    """The input rows and the changelog of ``result`` (a ``kit.sql`` result over one
    stream), collected once, to show both tables as of any arrival.

        history = kit.viz.table_history(counts)
        history.snapshot(at=2)          # = counts.snapshot(at=2), as pandas
        history.chart(at=2)             # the input rows 0..2 beside the result then

    ``max_rows``: input rows and changes brought to the driver at most (the first ones);
    more raise an error: a table of thousands of rows is not for looking at.
    """
    if not isinstance(result, DynamicTable):
        raise KitError("table_history shows a continuous query's result (kit.sql(...) over kit.stream(...)); "
                       f"got {type(result).__name__}")
    check_max_rows("table_history", max_rows)
    sources = [n for n in _nodes(result.root) if isinstance(n, P.Source)]
    if len(result.streams) != 1:
        raise KitError(f"table_history shows a query over one stream; this one reads {len(result.streams)}")
    stream, name, columns = result.streams[0], sources[0].table, list(sources[0].source_columns)
    inputs = stream.df.selectExpr("'i' AS _part", "seq AS _o", "seq AS i_seq",
                                  *[f"{sparksql.name(c)} AS {sparksql.name('i_' + c)}" for c in columns])
    log = result.log.df
    changes = log.selectExpr("'c' AS _part", "row_number() OVER (ORDER BY seq, _n) - 1 AS _o", "seq AS c_seq",
                             "_op AS c_op", *[f"{sparksql.name(c)} AS {sparksql.name('c_' + c)}"
                                              for c in result.columns])
    pdf = inputs.where(f"_o < {max_rows + 1}").unionByName(changes.where(f"_o < {max_rows + 1}"),
                                                           allowMissingColumns=True).toPandas()
    schema = {f.name: f for f in stream.df.schema.fields}
    from pyspark.sql import types as T
    input_rows = part_frame(pdf, "i", T.StructType([T.StructField("seq", T.LongType())] + [
        schema[c] for c in columns]))
    change_rows = part_frame(pdf, "c", T.StructType([T.StructField("seq", T.LongType())] + list(
        result.final().schema.fields)))
    if len(input_rows) > max_rows or len(change_rows) > max_rows:
        raise KitError(f"table_history: more than {max_rows} input rows or changes; raise max_rows or draw "
                       "fewer rows")
    return TableHistory(name, input_rows, change_rows, list(result.columns), result.upsert_key or ())


def _nodes(root: P.Node):
    yield root
    for child in root.inputs:
        yield from _nodes(child)


class TableHistory:
    """A continuous query's input and result as of each arrival (``table_history``):
    ``input`` (``seq`` and the stream's columns), ``changes`` (``seq``, ``op`` and the
    result's columns, in changelog order), ``arrivals`` (how many rows arrived);
    ``snapshot(at)`` and ``chart(at)``."""

    def __init__(self, name: str, input: pd.DataFrame, changes: pd.DataFrame, columns: list, key: tuple):
        self.name, self.input, self.changes, self.columns, self.key = name, input, changes, columns, key
        self.arrivals = len(input)

    def snapshot(self, at: int) -> pd.DataFrame:
        """The result after arrival ``at``: the changes up to it applied (``+I``/``+U`` add a
        row, ``-U``/``-D`` take one away), rows in the order their key first appeared."""
        done = self.changes[self.changes["seq"] <= at]
        weight = done["op"].isin(ADDS).map({True: 1, False: -1})
        counted = done.assign(_w=weight).groupby(self.columns, sort=False, dropna=False)["_w"].sum()
        rows = counted[counted > 0]
        out = pd.DataFrame([row for row, n in rows.items() for _ in range(n)], columns=self.columns)
        key = list(self.key) or self.columns
        first = {k: i for i, k in reversed(list(enumerate(done[key].itertuples(index=False, name=None))))}
        order = [first[k] for k in out[key].itertuples(index=False, name=None)]
        return out.iloc[sorted(range(len(out)), key=order.__getitem__)].reset_index(drop=True)

    def chart(self, at: int) -> alt.HConcatChart:
        """The input rows up to arrival ``at`` (the last one highlighted) beside the result
        table after it (the rows that arrival added highlighted) and the changes it sent."""
        if not isinstance(at, int) or not 0 <= at < max(self.arrivals, 1):
            raise KitError(f"at must be an arrival from 0 to {self.arrivals - 1}; got {at!r}")
        rows = self.input[self.input["seq"] <= at]
        sent = self.changes[self.changes["seq"] == at]
        result = self.snapshot(at)
        added = {tuple(r) for r in sent.loc[sent["op"].isin(ADDS), self.columns].itertuples(index=False)}
        marked = [ADDED if tuple(r) in added else None for r in result.itertuples(index=False)]
        log = "; ".join(f"{op} ({', '.join(_cell(v) for v in r)})"
                        for op, r in zip(sent["op"], sent[self.columns].itertuples(index=False))) or "no change"
        left = _table(rows, [ADDED if s == at else None for s in rows["seq"]],
                      f"{self.name}: the rows that have arrived", f"arrival {at} highlighted")
        right = _table(result, marked, "the result table after it", f"arrival {at} sent: {log}")
        return alt.hconcat(left, right, spacing=40, title=title_params(
            f"The input and the result as of arrival {at}", f"{self.arrivals} arrivals in all", None))


def _table(df: pd.DataFrame, fills: list, heading: str, line: str) -> alt.LayerChart:
    """``df`` drawn as a table: a bold header of its columns, a row per row, each column as
    wide as its longest text, ``fills`` the background of each row (None: none)."""
    columns = list(df.columns)
    texts = {c: [_cell(v) for v in df[c]] for c in columns}
    lefts, at = {}, 0
    for c in columns:
        lefts[c] = at
        at += 7 * max([len(c)] + [len(t) for t in texts[c]]) + 18
    cells = pd.DataFrame([(i, lefts[c], texts[c][i]) for c in columns for i in range(len(df))] +
                         [(-1, lefts[c], c) for c in columns], columns=["row", "x", "text"])
    cells["header"] = cells["row"] < 0
    width = max(at, 120)
    rows = list(range(-1, max(len(df), 1)))
    x = alt.X("x:Q", axis=None, scale=alt.Scale(domain=[0, width], nice=False, zero=True))
    y = alt.Y("row:O", axis=None, scale=alt.Scale(domain=rows))
    shaded = pd.DataFrame({"row": [i for i, f in enumerate(fills) if f], "fill": [f for f in fills if f]})
    layers = [alt.Chart(shaded).mark_rect().encode(y=y, color=alt.Color("fill:N", scale=None))] if len(shaded) else []
    if not len(df):
        cells = pd.concat([cells, pd.DataFrame({"row": [0], "x": [0], "text": ["(empty)"], "header": [False]})])
    text = alt.Chart(cells).encode(x=x, y=y, text="text:N")
    layers.append(text.transform_filter("datum.header").mark_text(align="left", dx=4, fontSize=12, fontWeight="bold"))
    layers.append(text.transform_filter("!datum.header").mark_text(align="left", dx=4, fontSize=12))
    return alt.layer(*layers, width=width, height=20 * len(rows),
                     title=alt.TitleParams(heading, subtitle=[line], anchor="start", fontSize=12))


def _cell(v) -> str:
    """A value as a table shows it: times to the second (milliseconds when there are some)."""
    if isinstance(v, pd.Timestamp):
        return v.strftime("%Y-%m-%d %H:%M:%S" + (".%f" if v.microsecond else ""))[:23]
    return "NULL" if v is None or (isinstance(v, float) and pd.isna(v)) else str(v)
