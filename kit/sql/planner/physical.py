"""The changelog mode of every node of a continuous query, decided as Flink's planner decides it.

``physical_plan(query, sink, config, **streams)`` returns the physical plan Flink 2.3 makes for
``INSERT INTO <sink> <query>`` over ``kit.Stream``s, its nodes named as Flink names them
(``TableSourceScan``, ``WatermarkAssigner``, ``MiniBatchAssigner``, ``Calc``, ``Exchange``,
``GroupAggregate`` -- ``Local``/``Incremental``/``GlobalGroupAggregate`` with mini-batches --,
``Rank``, ``OverAggregate``, ``Join``, ``Union``, ``LocalWindowAggregate`` /
``GlobalWindowAggregate``, ``Match``, ``TemporalJoin``, ``IntervalJoin``, ``TemporalSort``,
``Sink``), each with its changelog mode; ``explain_changelog_mode`` prints it as
``EXPLAIN CHANGELOG_MODE`` does. The seed's two steps (004, 2.4.2):

1. **bottom-up, what each node may change** (Flink's ModifyKindSet): a source inserts
   (``[I]``); a Calc, an Exchange, a WatermarkAssigner and a Union pass their inputs' kinds
   on; a GroupAggregate updates (``I,U``) and, over an input that updates, also deletes
   (``D``: a group whose rows are all retracted goes away); a Top-N updates and deletes; a
   deduplication keeping the first row inserts only (``[I]``), keeping the last updates; an
   OVER aggregate on a non-time column updates and deletes, on the time attribute it inserts;
   an inner join changes what its inputs change, an outer join also updates and deletes
   (padded rows); windows, MATCH_RECOGNIZE, temporal and interval joins and a sort on the time
   attribute insert only, and fail on an input that updates.
2. **top-down, who needs update-before** (Flink's UpdateKindTrait): a retract sink (``print``)
   needs ``UB`` and ``UA``; an upsert sink (``blackhole``, a primary key) and a bare SELECT
   need ``UA`` only; an aggregate (or OVER aggregate) over updates needs ``UB`` from its
   input, whatever its consumer needs (its accumulators must subtract the old value: that is
   why it uses the ``_RETRACT`` variant of COUNT/SUM/AVG and of MIN/MAX unless the input only
   grows the way the function looks); a Top-N over updates needs ``UB`` unless its sort key
   only moves towards the top (Flink's UpdateFastStrategy, ``UA`` enough); a join needs ``UB``
   from an updating input unless the input's unique key is inside the join key; a Calc, an
   Exchange or a Union pass the need on. A node then emits ``UB`` only when its consumer
   needs it: into an upsert sink the outer aggregate of the cascade emits ``[I,UA,D]`` while
   the inner one still emits ``[I,UB,UA]``.

``sink``: ``"retract"`` (Flink's ``print``: every row kind), ``"upsert"`` (``blackhole``, or a
sink with a primary key: no ``UB``), ``"append"`` (``filesystem``: inserts only; an updating
query fails there with Flink's message) or ``None`` (the bare SELECT: no Sink node, no ``UB``
at the top).

What the kit cannot know (the normalization ``tests/test_changelog_mode.py`` compares on):
Flink places ``Calc`` nodes by its projection pushdown (into the scan and through joins),
merges them and materializes time attributes in them; the kit plans one Calc per SELECT
list and per aggregate's arguments. Here adjacent Calcs are merged and one that only copies
columns is dropped, which is often, not always, where Flink has none. A Calc passes its
input's changelog mode on unchanged, so dropping every Calc from both plans loses no mode;
every other node -- scans, watermark assigners, exchanges, operators, sinks -- is compared.
Flink 2.3 plans deduplication as a ``Rank`` (``AppendFastStrategy``, ``rankEnd=1``, ordered by
``ROWTIME ts`` or the proctime) and so does the kit here. Window aggregates are two-phase
(Local/Global) in Flink 2.3 by default (``table.optimizer.agg-phase-strategy`` AUTO); the
kit says so too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import SimpleNamespace

import sqlglot
from sqlglot import exp

from ...errors import KitError
from . import logical as P
from ...changelog import DELETE, INSERT, KINDS, UPDATE_AFTER, UPDATE_BEFORE, Options, mode_text
from ..options import dynamic_options

__all__ = ["PhysicalNode", "SINK_KINDS", "physical_plan", "explain_changelog_mode", "compared", "parse_explain",
           "table_plan", "messages"]

SINK_KINDS = ("retract", "upsert", "append", None)
_CONNECTORS = {"retract": "print", "upsert": "blackhole", "append": "filesystem"}
_TIMELESS = ("Calc", "Exchange", "WatermarkAssigner", "Union", "MiniBatchAssigner")
_INSERT_ONLY_OPERATORS = {"Match": "Match Recognize", "TemporalJoin": "TemporalJoin",
                          "IntervalJoin": "IntervalJoin", "LocalWindowAggregate": "WindowAggregate",
                          "TemporalSort": "TemporalSort", "OverAggregate": "OverAggregate"}


@dataclass
class PhysicalNode:
    """One node of the physical plan: Flink's ``name``, its attributes as Flink prints them
    (``detail``), its ``inputs``; ``kinds`` (step 1: a subset of ``I``, ``U``, ``D``) and
    ``mode`` (step 2: the row kinds it emits, ``+I``/``-U``/``+U``/``-D``; None for a Sink:
    ``NONE``). ``attrs`` holds what the decision reads (strategy, join inputs' unique keys)."""
    name: str
    detail: str = ""
    inputs: list = field(default_factory=list)
    kinds: frozenset = frozenset({"I"})
    mode: frozenset | None = None
    attrs: dict = field(default_factory=dict)

    def label(self) -> str:
        mode = "NONE" if self.mode is None else mode_text(self.mode)[1:-1]
        head = f"{self.detail}, " if self.detail else ""
        return f"{self.name}({head}changelogMode=[{mode}])"

    def flink_label(self) -> str:
        """The node as Flink's messages name it (no changelog mode)."""
        return f"{self.name}({self.detail})"

    def walk(self):
        yield self
        for child in self.inputs:
            yield from child.walk()

    def tree(self) -> str:
        """The plan as Flink's EXPLAIN draws it."""
        lines = []

        def draw(n, lead, branch):
            lines.append(lead + branch + n.label())
            inner = lead + ("" if not branch else ":  " if branch == ":- " else "   ")
            for i, child in enumerate(n.inputs):
                draw(child, inner, "+- " if i == len(n.inputs) - 1 else ":- ")
        draw(self, "", "")
        return "\n".join(lines)

    def __str__(self):
        return self.tree()


# ---------------------------------------------------------------------------- the two steps


def _kinds(n: PhysicalNode) -> frozenset:
    """Step 1, bottom-up: what ``n`` may change (Flink's ModifyKindSet)."""
    kids = [_kinds(c) for c in n.inputs]
    below = frozenset().union(*kids) if kids else frozenset({"I"})
    name = n.name
    if name == "TableSourceScan":
        kinds = frozenset({"I"})
    elif name in _TIMELESS or name == "Sink":
        kinds = below
    elif name == "GroupAggregate":
        kinds = frozenset({"I", "U"} | ({"D"} if below != {"I"} else set()))
    elif name in ("LocalGroupAggregate", "IncrementalGroupAggregate"):   # partial accumulators: appended
        kinds = frozenset({"I"})
    elif name == "GlobalGroupAggregate":    # deletes when the Local's input updates, or a split's FINAL
        kinds = frozenset({"I", "U"} | ({"D"} if n.attrs.get("deletes") else set()))
    elif name == "Rank":
        kinds = frozenset({"I"}) if n.attrs.get("insert_only") and below == {"I"} else frozenset({"I", "U", "D"})
    elif name == "OverAggregate" and not n.attrs.get("time_ordered"):
        kinds = frozenset({"I", "U", "D"})
    elif name == "Join":
        kinds = below if n.attrs["how"] == "inner" else frozenset({"I", "U", "D"})
    elif name in _INSERT_ONLY_OPERATORS or name == "GlobalWindowAggregate":
        if name == "TemporalJoin":      # the versioned side may be a changelog; the probe side may not
            below = kids[0]
        if below != {"I"}:
            raise KitError(f"{_INSERT_ONLY_OPERATORS.get(name, name)} doesn't support consuming "
                           f"{_changes(below)} which is produced by node {_producer(n.inputs[0]).flink_label()}"
                           f" (Flink 2.3's planner: {name} keeps no state to take back what it emitted, so it "
                           "reads an insert-only input)")
        kinds = frozenset({"I"})
    else:
        raise KitError(f"internal: no changelog rule for {name}")
    n.kinds = kinds
    return kinds


def _decide(n: PhysicalNode, need: str | None) -> None:
    """Step 2, top-down: ``need`` is what ``n``'s consumer needs of its updates: ``"BA"``
    (update-before and update-after) or ``"UA"`` (update-after only)."""
    if n.name == "Calc" and n.attrs.get("filter"):
        need = "BA"
    if n.name == "Sink":
        n.mode = None
    else:
        n.mode = frozenset({INSERT} | ({UPDATE_AFTER} if "U" in n.kinds else set())
                           | ({UPDATE_BEFORE} if "U" in n.kinds and need == "BA" else set())
                           | ({DELETE} if "D" in n.kinds else set()))
    for i, child in enumerate(n.inputs):
        if n.name == "Calc" and n.attrs.get("filter"):
            wants = "BA"     # a row an update takes out of the filter must be retracted: UB
        elif n.name in _TIMELESS or n.name == "Sink":
            wants = need
        elif n.name == "Rank":
            wants = "UA" if n.attrs.get("strategy") == "UpdateFastStrategy" else "BA"
        elif n.name == "Join":
            wants = need if n.attrs["specs"][i] == "JoinKeyContainsUniqueKey" else "BA"
        else:   # aggregates over updates retract what they accumulated: they need UB
            wants = "BA"
        _decide(child, wants)


def _changes(kinds) -> str:
    return "update and delete changes" if "D" in kinds and "U" in kinds else \
        "delete changes" if "D" in kinds else "update changes"


def _producer(n: PhysicalNode) -> PhysicalNode:
    """The node that makes the changes ``n`` carries (through Calcs and Exchanges)."""
    while n.name in _TIMELESS and n.inputs:
        n = next((c for c in n.inputs if c.kinds != {"I"}), n.inputs[0])
    return n


# ---------------------------------------------------------------------------- kit plan -> Flink nodes


def _join_needs(n: P.Join, times: bool = False) -> dict:
    """What a join reads of each side beyond what its consumer needs: its keys, its
    condition's columns, and (a temporal or interval join) each side's event time."""
    cond = set(_REF.findall(n.condition or ""))
    left = list(n.left_keys) + [c for c in n.left.columns if c in cond]
    right = list(n.right_keys) + [c for c in n.right.columns if c in cond]
    if times:
        left += [c for c, t in _times(n.left).items() if t == "rowtime"]
        right += [c for c, t in _times(n.right).items() if t == "rowtime"]
    return {"join": True, "left_needs": left, "right_needs": right, "out": list(n.columns)}


def _times(n: P.Node) -> dict:
    while isinstance(n, P.Calc) and not n.times:
        n = n.input
    return n.times


class _Converter:
    """The kit's operator tree (``plan.plan``) as Flink's physical nodes."""

    def __init__(self, special: dict, windows: dict | None = None):
        self.special = special       # placeholder table -> a function(Source node) -> (PhysicalNode, names)
        self.windows = windows or {}  # placeholder table of a window TVF -> (WindowCall, stream)

    def window_of(self, agg: P.GroupAggregate):
        """The window TVF (call, stream) a GroupAggregate keyed by window_start and window_end reads."""
        table = _source_table(agg.input)
        keys = {name.lower() for name in agg.names[:len(agg.keys)]}
        if table in self.windows and {"window_start", "window_end"} <= keys:
            return self.windows[table]
        return None

    def node(self, n: P.Node):
        """(PhysicalNode, {internal column: its name}, unique key as internal names or None)."""
        if isinstance(n, P.Calc):
            return self.calc(n)
        if isinstance(n, P.Source):
            if n.table in self.special:
                return self.special[n.table](n)
            return _scan(n.table, n.stream, list(n.columns), list(n.names)), dict(zip(n.columns, n.names)), None
        if isinstance(n, P.GroupAggregate):
            child, names, _ = self.node(n.input)
            window = self.window_of(n)
            if window is not None:
                return _window_aggregate(n, child, names, *window), dict(zip(n.columns, n.names)), None
            agg = PhysicalNode("GroupAggregate", _aggregate_detail(n, child, self._monotonic_calls(n)),
                               [_exchange(n.keys, names, child)],
                               attrs={"kit": n, "out": list(n.columns), "needs": list(n.keys) + [
                                   c.arg for c in n.calls if c.arg is not None], "pass": False,
                                      "aggregate": True})
            return agg, dict(zip(n.columns, n.names)), list(n.keys)
        if isinstance(n, (P.Rank, P.Deduplicate)):
            return self.rank(n)
        if isinstance(n, P.Over):
            child, names, _ = self.node(n.input)
            names = {**names, **dict(zip(n.columns, n.names))}
            order = ", ".join(f"{names.get(c, c)} {'ASC' if a else 'DESC'}" for c, a, _ in n.order)
            part = ", ".join(names.get(c, c) for c in n.partition)
            detail = (f"{'partitionBy=[' + part + '], ' if n.partition else ''}"
                      f"orderBy=[{order}], window=[ {n.frame} BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW], "
                      f"select=[{', '.join(n.names[:len(n.input.columns)] + n.shown_calls)}]")
            return PhysicalNode("OverAggregate", detail, [_exchange(n.partition, names, child)],
                                attrs={"kit": n, "pass": True, "added": [c for _, _, c in n.calls],
                                       "out": list(n.columns),
                                       "needs": list(n.partition) + [c for c, _, _ in n.order] + [
                                           a for _, a, _ in n.calls if a]}), names, None
        if isinstance(n, P.Join):
            return self.join(n)
        if isinstance(n, P.Union):
            parts = [self.node(p) for p in n.parts]
            return (PhysicalNode("Union", f"all=[true], union=[{', '.join(n.names)}]", [p for p, _, _ in parts],
                                 attrs={"kit": n, "union": True, "out": list(n.columns)}),
                    dict(zip(n.columns, n.names)), None)
        raise KitError(f"internal: no physical node for {type(n).__name__}")

    def calc(self, n: P.Calc):
        """A chain of Calcs merged into one, each output with the input columns it reads
        (``items``: (output, columns read, the column it copies or None, its SQL)); a chain
        that only copies columns is dropped here (the pruning pass decides the rest)."""
        chain = [n]
        while isinstance(chain[-1].input, P.Calc):
            chain.append(chain[-1].input)
        child, names, key = self.node(chain[-1].input)
        refs, copy_of, where_refs = {}, {}, set()
        for c in reversed(chain):     # bottom-up: each output's base columns, and what it copies
            step_refs, step_copy = {}, {}
            for text, out in zip(c.select, c.columns):
                used = set(_REF.findall(text)) - {out} if " AS " in text else set(_REF.findall(text))
                step_refs[out] = set().union(*[refs.get(u, {u}) for u in used]) if used else set()
                m = re.fullmatch(r"`?(\w+)`?(?: AS `?(\w+)`?)?", text.strip())
                step_copy[out] = copy_of.get(m.group(1), m.group(1)) if m and (
                    not refs or m.group(1) in copy_of) else None
            if c.where:
                where_refs |= set().union(*[refs.get(u, {u}) for u in _REF.findall(c.where)])
            refs, copy_of = step_refs, step_copy
        out_names = dict(zip(n.columns, n.names))
        if key is not None:
            back = {v: k for k, v in copy_of.items() if v is not None}
            key = [back[k] for k in key] if all(k in back for k in key) else None
        wheres = [c.shown_where for c in chain if c.shown_where]
        items = [(out, refs[out], copy_of[out], shown) for out, shown in zip(n.columns, n.shown)]
        detail = f"select=[{', '.join(n.shown)}]" + (f", where=[{' AND '.join(wheres)}]" if wheres else "")
        if "scan" in child.attrs:     # what the query names of the stream, needed or not (PROCTIME())
            child.attrs["referenced"] = set().union(*[r for _, r, _, _ in items]) | where_refs
        node = PhysicalNode("Calc", detail, [child], attrs={"filter": bool(wheres), "items": items,
                                                            "where_refs": where_refs, "wheres": wheres,
                                                            "out": list(n.columns)})
        return node, {**names, **out_names}, key

    def rank(self, n):
        child, names, _ = self.node(n.input)
        names = {**names, **dict(zip(n.columns, n.names))}
        if isinstance(n, P.Deduplicate):
            order_col = n.time or next((c for c, t in n.input.times.items() if t == "proctime"), None)
            order = f"{'ROWTIME ' if n.time else ''}{names.get(order_col, order_col)} " \
                    f"{'ASC' if n.keep == 'first' else 'DESC'}"
            partition, start, end, number = n.keys, 1, 1, n.row_number
            insert_only = n.keep == "first"
        else:
            order = ", ".join(f"{names.get(c, c)} {'ASC' if a else 'DESC'}" for c, a, _ in n.order)
            partition, start, end, number = n.partition, n.start, n.end, n.row_number
            insert_only = False
        below = _kinds(child)
        strategy = "AppendFastStrategy" if below == {"I"} else \
            "UpdateFastStrategy" if isinstance(n, P.Rank) and self._monotonic(n) else "RetractStrategy"
        select = [names.get(c, c) for c in n.input.columns] + ([names.get(number, number)] if number else [])
        detail = (f"strategy=[{strategy}], rankType=[ROW_NUMBER], rankRange=[rankStart={start}, rankEnd={end}], "
                  f"partitionBy=[{', '.join(names.get(c, c) for c in partition)}], orderBy=[{order}], "
                  f"select=[{', '.join(select)}]")
        node = PhysicalNode("Rank", detail, [_exchange(partition, names, child)],
                            attrs={"strategy": strategy, "insert_only": insert_only, "kit": n, "pass": True,
                                   "out": list(n.columns),
                                   "added": [number] if number else [],
                                   "needs": list(partition) + ([order_col] if isinstance(n, P.Deduplicate) and order_col
                                                               else [c for c, _, _ in getattr(n, "order", [])])})
        return node, names, (list(partition) if end == 1 else None)

    def join(self, n: P.Join):
        (left, lnames, lkey), (right, rnames, rkey) = self.node(n.left), self.node(n.right)
        names = {**lnames, **rnames, **dict(zip(n.columns, n.names))}

        def spec(key, keys):
            return "NoUniqueKey" if key is None else \
                "JoinKeyContainsUniqueKey" if set(key) <= set(keys) else "HasUniqueKey"
        specs = [spec(lkey, n.left_keys), spec(rkey, n.right_keys)]
        how = {"inner": "InnerJoin", "left": "LeftOuterJoin", "right": "RightOuterJoin",
               "full": "FullOuterJoin"}[n.how]
        detail = (f"joinType=[{how}], where=[{n.shown_condition}], select=[{', '.join(n.names)}], "
                  f"leftInputSpec=[{specs[0]}], rightInputSpec=[{specs[1]}]")
        kind = self.special.get(("join", _source_table(n.right)))
        if kind is not None:
            return kind(n, left, right, names)
        node = PhysicalNode("Join", detail,
                            [_exchange(n.left_keys, names, left), _exchange(n.right_keys, names, right)],
                            attrs={"how": n.how, "specs": specs, "kit": n, **_join_needs(n)})
        return node, names, None

    # -- what only moves one way (Flink's modified monotonicity)

    def _monotonic_calls(self, agg: P.GroupAggregate) -> dict:
        """{argument column: "up" | "down"} of the aggregate's input columns that only grow or
        only fall (a COUNT or MAX / a MIN of an aggregate over insert-only rows)."""
        out = {}
        for call in agg.calls:
            if call.arg is not None:
                d = self._direction(agg.input, call.arg)
                if d:
                    out[call.arg] = d
        return out

    def _direction(self, node, column) -> str | None:
        while isinstance(node, P.Calc):
            copies = {}
            for text, out in zip(node.select, node.columns):
                m = re.fullmatch(r"`?(\w+)`?(?: AS `?(\w+)`?)?", text.strip())
                if m:
                    copies[out] = m.group(1)
            if column not in copies or node.where:
                return None
            column, node = copies[column], node.input
        if not isinstance(node, P.GroupAggregate) or not _insert_only(node.input):
            return None
        if column in node.keys:
            return "constant"
        call = next((c for c in node.calls if c.name == column), None)
        return {"COUNT": "up", "MAX": "up", "MIN": "down"}.get(call.function) if call else None

    def _monotonic(self, rank: P.Rank) -> bool:
        for column, ascending, _ in rank.order:
            d = self._direction(rank.input, column)
            if d is None or (d == "up" and ascending) or (d == "down" and not ascending):
                return False
        return True


def _insert_only(node: P.Node) -> bool:
    """Whether a kit plan node emits inserts only (step 1 on the kit's own nodes)."""
    if isinstance(node, P.Source):
        return True
    if isinstance(node, (P.Calc,)):
        return _insert_only(node.input)
    if isinstance(node, P.Union):
        return all(_insert_only(p) for p in node.parts)
    if isinstance(node, P.Join):
        return node.how == "inner" and _insert_only(node.left) and _insert_only(node.right)
    if isinstance(node, P.Deduplicate):
        return node.keep == "first" and _insert_only(node.input)
    return False


def _source_table(n: P.Node):
    while isinstance(n, P.Calc):
        n = n.input
    return n.table if isinstance(n, P.Source) else None


_REF = re.compile(r"\b_c\d+\b")     # the planner's internal column names


def _exchange(keys, names, child) -> PhysicalNode:
    dist = f"hash[{', '.join(names.get(k, k) for k in keys)}]" if keys else "single"
    return PhysicalNode("Exchange", f"distribution=[{dist}]", [child])


def _aggregate_detail(n: P.GroupAggregate, child: PhysicalNode, monotonic: dict) -> str:
    updates = _kinds(child) != {"I"}
    calls = []
    for call, shown in zip(n.calls, n.shown_calls):
        retract = updates and not (call.function == "MAX" and monotonic.get(call.arg) in ("up", "constant")
                                   or call.function == "MIN" and monotonic.get(call.arg) in ("down", "constant"))
        calls.append(re.sub(r"^(\w+)\(", lambda m: m.group(1) + ("_RETRACT(" if retract else "("), shown, count=1))
    keys = n.names[:len(n.keys)]
    return (f"groupBy=[{', '.join(keys)}], " if keys else "") + f"select=[{', '.join(keys + calls)}]"


def _delay_ms(s) -> int | None:
    """The watermark delay of stream ``s`` in ms (None: not a delay, e.g. watermarks from a column)."""
    strategy = getattr(s, "watermark", None)
    if getattr(strategy, "kind", None) in ("bounded", "sql"):
        return strategy.delay.millis + (strategy.kind == "bounded")
    return None


def _scan(table: str, s, ids: list, names: list, needed=None, referenced=None) -> PhysicalNode:
    """A stream's scan: TableSourceScan (with ``project=[...]`` when it reads fewer columns
    than the stream has: Flink's projection pushdown), the proctime attribute (a Calc, as
    Flink computes ``PROCTIME()``), the WatermarkAssigner of its event time, then a Calc of
    the ``needed`` columns (ids) when they are not all the others. ``ids``: the columns'
    internal names, ``names`` their SQL names."""
    proctime = s.proctime if isinstance(getattr(s, "proctime", None), str) else None
    columns = [(i, c) for i, c in zip(ids, names) if not (c == "proctime" and proctime not in (None, "proctime"))]
    physical = [(i, c) for i, c in columns if c != proctime and not (c == "proctime" and s.proctime is not None)]
    time = getattr(s, "time", None)
    if needed is not None:
        kept = set(needed) | {i for i, c in physical if c == time}
        read = [(i, c) for i, c in physical if i in kept]
    else:
        read = physical
    project = "" if len(read) == len(physical) else f", project=[{', '.join(c for _, c in read)}], metadata=[]"
    node = PhysicalNode("TableSourceScan", f"table=[[default_catalog, default_database, {table}{project}]], "
                                           f"fields=[{', '.join(c for _, c in read)}]",
                        attrs={"out": [i for i, _ in read]})
    out = [i for i, _ in read]
    pid = next((i for i, c in columns if c == (proctime or "proctime")), "proctime")
    if getattr(s, "proctime", None) is not None and (needed is None or pid in set(needed) | set(referenced or ())):
        out = out + [pid]
        node = PhysicalNode("Calc", f"select=[{', '.join(c for _, c in read)}, PROCTIME() AS {proctime or 'proctime'}]",
                            [node], attrs={"out": out})
    if time is not None:
        delay = _delay_ms(s)
        mark = f"-({time}, {delay}:INTERVAL SECOND)" if delay is not None else time
        node = PhysicalNode("WatermarkAssigner", f"rowtime=[{time}], watermark=[{mark}]", [node], attrs={"out": out})
    if needed is not None:
        wanted = list(dict.fromkeys(needed))
        if wanted != out:
            shown = dict(columns)
            node = PhysicalNode("Calc", f"select=[{', '.join(shown.get(i, i) for i in wanted)}]", [node],
                                attrs={"out": wanted, "projection": True})
    node.attrs["scan"] = (table, s, ids, names)
    node.attrs["referenced"] = set(referenced or ())
    node.attrs.setdefault("out", out)
    node.attrs["rowtime"] = {i for i, c in physical if c == time}
    return node


# ---------------------------------------------------------------------------- what kit.sql runs elsewhere


def _tokens(query):
    from ..lexer import tokenize
    return tokenize(query)


class _Special:
    """The constructs kit.sql runs outside dynamic tables (window TVFs, MATCH_RECOGNIZE,
    temporal and interval joins, a sort on time, OVER on time): each becomes a placeholder
    table the dynamic planner reads (or a join it plans), and its Flink nodes replace it."""

    def __init__(self, query: str, streams: dict):
        self.query, self.streams = query, {k.lower(): (k, v) for k, v in streams.items()}
        self.tables = dict(streams)    # what the dynamic planner sees: streams and placeholders
        self.builders = {}
        self.windows = {}              # placeholder of a window TVF -> (WindowCall, stream)
        self.sort = None

    def rewrite(self) -> str:
        from ..interval import find_interval_joins
        from ..query import find_match_recognize
        from ..temporal import find_temporal_joins
        from ..windows import find_windows
        q = self.query
        tokens = _tokens(q)
        edits = []      # (start offset, end offset, replacement)
        for start, (m, end, spec) in find_match_recognize(q, tokens, ()).items():
            edits.append((tokens[start].start, tokens[end - 1].end, self._match(q, tokens, start, m, spec)))
        for i, (end, call) in find_windows(q, tokens).items():
            edits.append((tokens[i].start, tokens[end - 1].end, self._window(call)))
        for call in find_temporal_joins(q, tokens).values():
            # FOR SYSTEM_TIME AS OF <time>: a regular join to the dynamic planner, a TemporalJoin here
            first = next(j for j in range(call.start, call.end) if tokens[j].is_word("FOR"))
            time_end = next(j for j in range(first, len(tokens)) if tokens[j].is_word("AS") and j > first + 3)
            edits.append((tokens[first].start, tokens[time_end].start, ""))
            self.builders[("join", self._name(call.table))] = self._temporal
        for call in find_interval_joins(q, tokens, lambda n: self.streams.get(n.lower(), (None, None))[1]).values():
            self.builders[("join", self._name(call.right))] = self._interval
        out, at = "", 0
        for s, e, text in sorted(edits):
            out += q[at:s] + text
            at = e
        out += q[at:]
        return self._order_by(out)

    def _name(self, table):
        return self.streams.get(table.lower(), (table, None))[0]

    def _placeholder(self, columns, time, build) -> str:
        name = f"__kit_special_{len(self.builders)}"
        self.tables[name] = SimpleNamespace(source=SimpleNamespace(columns=list(columns)), time=time, proctime=None)
        self.builders[name] = build
        return name

    def _base(self, table: str):
        key = table.lower()
        if key not in self.streams:
            cte = _cte(self.query, table)
            if cte is not None and P.updating(cte):
                raise KitError("The window function requires the timecol is a time attribute type, but is "
                               f"TIMESTAMP(3). (Flink 2.3's planner: {table} is an updating query, whose columns "
                               "are no time attributes any more: a window needs a stream's event time)")
            raise KitError(f"table {table} is not a kit.Stream: a window TVF or MATCH_RECOGNIZE reads a table "
                           "passed to kit.sql")
        name, s = self.streams[key]
        columns = P.stream_columns(s)
        return name, s, columns

    # -- MATCH_RECOGNIZE: partition columns and measures (ONE ROW PER MATCH), insert-only

    def _match(self, q, tokens, start, m, spec) -> str:
        source = q[tokens[start].start:tokens[m - 1].end].strip()
        columns = [*spec.partition_by, *[x.alias for x in spec.measures]]

        def build(_node):
            if source.startswith("("):
                child = Planned(source[1:-1], {n: s for n, s in self.streams.values()}).node
            else:
                name, s, cols = self._base(source)
                child = _scan(name, s, cols, cols)
            order = ", ".join(f"{o.column} {'ASC' if o.ascending else 'DESC'}" for o in spec.order_by)
            measures = ", ".join(f"FINAL({x.expr}) AS {x.alias}" for x in spec.measures)
            detail = (f"partitionBy=[{', '.join(spec.partition_by)}], orderBy=[{order}], measures=[{measures}], "
                      f"rowsPerMatch=[{spec.rows_per_match}]")
            node = PhysicalNode("Match", detail, [_exchange(list(spec.partition_by), {}, child)],
                                attrs={"fixed": True, "out": list(_node.columns)})
            return node, {}, None
        return self._placeholder(columns, None, build)

    # -- window TVF: its table with window_start, window_end, window_time

    def _window(self, call) -> str:
        name, s, cols = self._base(call.table)
        columns = cols + ["window_start", "window_end", "window_time"]

        def build(node):
            return _scan(name, s, list(node.columns[:len(cols)]), cols), {}, None
        placeholder = self._placeholder(columns, "window_time", build)
        self.windows[placeholder] = (call, s)
        return placeholder

    # -- temporal and interval joins over the planned regular join

    def _temporal(self, n, left, right, names):
        detail = f"joinType=[{'InnerJoin' if n.how == 'inner' else 'LeftOuterJoin'}], where=[{n.shown_condition}], " \
                 f"select=[{', '.join(n.names)}]"
        node = PhysicalNode("TemporalJoin", detail, [_exchange(n.left_keys, names, left),
                                                     _exchange(n.right_keys, names, right)],
                            attrs=_join_needs(n, times=True))
        return node, names, None

    def _interval(self, n, left, right, names):
        how = {"inner": "InnerJoin", "left": "LeftOuterJoin", "right": "RightOuterJoin", "full": "FullOuterJoin"}
        detail = f"joinType=[{how[n.how]}], where=[{n.shown_condition}], select=[{', '.join(n.names)}]"
        node = PhysicalNode("IntervalJoin", detail, [_exchange(n.left_keys, names, left),
                                                     _exchange(n.right_keys, names, right)],
                            attrs=_join_needs(n, times=True))
        return node, names, None

    # -- ORDER BY: only the time attribute, ascending (TemporalSort)

    def _order_by(self, text: str) -> str:
        try:
            tree = sqlglot.parse_one(text, read="spark")
        except sqlglot.errors.ParseError:
            return text
        order = tree.args.get("order") if isinstance(tree, exp.Select) else None
        if order is None:
            return text
        if tree.args.get("limit"):
            raise KitError("ORDER BY ... LIMIT over a stream: a Top-N the kit plans from ROW_NUMBER() only")
        items = order.expressions
        times = {s.time.lower() for _, s in self.streams.values() if s.time}
        first = items[0]
        if not (isinstance(first.this, exp.Column) and first.this.name.lower() in times and not first.args.get("desc")):
            raise KitError("Sort on a non-time-attribute field is not supported. (Flink 2.3's planner: a stream "
                           "is sorted only by its event-time attribute, ascending, as rows pass the watermark; sort "
                           "the result, final() or changelog(), instead)")
        self.sort = ", ".join(f"{o.this.name} {'DESC' if o.args.get('desc') else 'ASC'}" for o in items)
        tree.set("order", None)
        return tree.sql(dialect="spark")


def _cte(query: str, name: str) -> str | None:
    """The query of WITH ``name`` in ``query``, or None."""
    try:
        tree = sqlglot.parse_one(re.sub(r"TABLE\s*\(\s*(TUMBLE|HOP|CUMULATE|SESSION)\b.*", "x", query,
                                        flags=re.S | re.I), read="spark")
    except sqlglot.errors.ParseError:
        return None
    with_ = tree.args.get("with_") or tree.args.get("with")
    for cte in (with_.expressions if with_ is not None else []):
        if cte.alias_or_name.lower() == name.lower():
            return cte.this.sql(dialect="spark")
    return None


@dataclass
class Planned:
    """``query`` over ``streams`` planned to Flink's physical nodes (no sink yet)."""
    query: str
    streams: dict
    node: PhysicalNode = None
    names: list = None

    def __post_init__(self):
        special = _Special(self.query, self.streams)
        text = special.rewrite()
        try:
            root, names = P.plan(text, special.tables)
        except KitError as error:
            raise _flink_error(error, text, special) from None
        converter = _Converter(special.builders, special.windows)
        node, _, _ = converter.node(root)
        node = _Pruner().prune(node, list(root.columns))     # the sink reads every column
        self.names = list(names)
        if special.sort:
            node = PhysicalNode("TemporalSort", f"orderBy=[{special.sort}]", [PhysicalNode(
                "Exchange", "distribution=[single]", [node])], attrs={"pass": True, "needs": []})
        self.node = node


class _Pruner:
    """Flink's projection pushdown on the converted plan, top-down: each node reads of its
    input only the columns it and its consumers need; a scan reads only those (and its event
    time, for the watermark), with a Calc above the WatermarkAssigner when they are fewer; a
    Calc whose outputs are its input's columns, in order, is gone, and one over such a
    projection takes its place; a rowtime column an aggregate reads is materialized in a Calc
    (Flink's CAST of the time attribute). Columns are the planner's internal names."""

    def __init__(self):
        self.alias = {}          # the columns of a dropped Calc -> the columns they copy
        self.materialize = set()
        self.rowtimes = set()

    def r(self, c):
        while c in self.alias:
            c = self.alias[c]
        return c

    def out(self, n) -> list:
        return [self.r(c) for c in n.attrs.get("out", [])]

    def prune(self, n: PhysicalNode, needed: list) -> PhysicalNode:
        a = n.attrs
        needed = [self.r(c) for c in needed]
        if "scan" in a:
            table, stream, ids, names = a["scan"]
            node = _scan(table, stream, ids, names, needed=[c for c in needed if c in ids],
                         referenced=a.get("referenced", set()))
            self.rowtimes |= node.attrs["rowtime"]
            return node
        if a.get("fixed"):
            return n
        if "items" in a:
            return self.calc(n, needed)
        if n.name in ("Sink",):
            n.inputs = [self.prune(n.inputs[0], self.out(n.inputs[0]))]
            return n
        if n.name == "Exchange":
            n.inputs = [self.prune(n.inputs[0], needed)]
            n.attrs["out"] = self.out(n.inputs[0])
            return n
        if a.get("union"):
            positions = [i for i, c in enumerate(self.out(n)) if c in needed] or list(range(len(a["out"])))
            n.inputs = [self.prune(p, [self.out(p)[i] for i in positions]) for p in n.inputs]
            return n
        if a.get("join"):
            lo, ro = self.out(_below(n.inputs[0])), self.out(_below(n.inputs[1]))
            sides = []
            for ex, own, extra in ((n.inputs[0], lo, a["left_needs"]), (n.inputs[1], ro, a["right_needs"])):
                want = {self.r(c) for c in extra} | set(needed)
                sides.append(self.prune(ex, [c for c in own if c in want]))
            n.inputs = sides
            n.attrs["out"] = self.out(sides[0]) + self.out(sides[1])
            return n
        if "needs" in a:
            child = n.inputs[0]
            below = self.out(_below(child))
            want = {self.r(c) for c in a["needs"]} | (set(needed) if a.get("pass") else set())
            if a.get("aggregate"):
                self.materialize |= {self.r(c) for c in a["needs"]}
                self.rowtimes |= self.rowtimes_of(child)
            n.inputs = [self.prune(child, [c for c in below if c in want])]
            if a.get("pass"):
                n.attrs["out"] = self.out(n.inputs[0]) + list(a.get("added", []))
            return n
        n.inputs = [self.prune(c, self.out(c)) for c in n.inputs]
        return n

    def rowtimes_of(self, n) -> set:
        out = set()
        for x in n.walk():
            if "scan" in x.attrs:
                _, stream, ids, names = x.attrs["scan"]
                out |= {i for i, c in zip(ids, names) if c == getattr(stream, "time", None)}
        return out

    def calc(self, n: PhysicalNode, needed: list) -> PhysicalNode:
        items = [it for it in n.attrs["items"] if self.r(it[0]) in needed or it[0] in needed]
        if not items and n.attrs["items"] and not needed:
            items = []
        reads = set().union(*[it[1] for it in items]) if items else set()
        reads |= n.attrs["where_refs"]
        child = n.inputs[0]
        below = self.out(_below(child))
        child = self.prune(child, [c for c in below if c in {self.r(x) for x in reads}])
        if child.name == "Calc" and child.attrs.get("projection"):
            child = child.inputs[0]          # one Calc above the scan, as Flink merges them
        copies = [self.r(it[2]) if it[2] is not None else None for it in items]
        materialized = any(self.r(it[0]) in self.materialize and c in self.rowtimes for it, c in zip(items, copies))
        if not n.attrs["wheres"] and None not in copies and copies == self.out(child) and not materialized:
            for it, c in zip(items, copies):
                self.alias[it[0]] = c
            return child
        shown = [it[3] for it in items]
        wheres = n.attrs["wheres"]
        detail = f"select=[{', '.join(shown)}]" + (f", where=[{' AND '.join(wheres)}]" if wheres else "")
        return PhysicalNode("Calc", detail, [child], attrs={**n.attrs, "out": [it[0] for it in items], "items": items})


def _below(n: PhysicalNode) -> PhysicalNode:
    """``n``, or what an Exchange above it carries."""
    return n.inputs[0] if n.name == "Exchange" else n


def _window_aggregate(n: P.GroupAggregate, child: PhysicalNode, names: dict, call, s) -> PhysicalNode:
    """A GroupAggregate keyed by a window TVF's window_start and window_end is Flink's window
    aggregate, two-phase by default: LocalWindowAggregate (over the scan, reading the keys,
    the arguments and the time column), Exchange, GlobalWindowAggregate."""
    keys = n.names[:len(n.keys)]
    rest = [k for k in keys if k.lower() not in ("window_start", "window_end", "window_time")]
    rest_keys = [c for c, name in zip(n.keys, keys) if name in rest]
    copies = {out: copy for out, _, copy, _ in child.attrs.get("items", [])}
    reads = {out: used for out, used, _, _ in child.attrs.get("items", [])}
    scan = next(x for x in child.walk() if "scan" in x.attrs)
    table, stream, ids, columns = scan.attrs["scan"]
    args = [c.arg for c in n.calls if c.arg is not None]
    needed = [copies.get(k) or k for k in rest_keys] + [i for a in args for i in sorted(reads.get(a, {a}))]
    needed += [i for i, c in zip(ids, columns) if c == call.time]
    sizes = ", ".join(f"{k}=[{v} ms]" for k, v in call.sizes.items())
    by = f"groupBy=[{', '.join(rest)}], " if rest else ""
    calls = ", ".join(n.shown_calls)
    local = PhysicalNode("LocalWindowAggregate", f"{by}window=[{call.kind}(time_col=[{call.time}], {sizes})], "
                                                 f"select=[{', '.join(rest + [calls])}]",
                         [_scan(table, stream, ids, columns, needed=needed)], attrs={"fixed": True})
    return PhysicalNode("GlobalWindowAggregate", f"{by}window=[{call.kind}({sizes})], "
                                                 f"select=[{', '.join(rest + [calls])}, "
                                                 "start('w$) AS window_start, end('w$) AS window_end]",
                        [_exchange(rest_keys, dict(zip(n.keys, keys)), local)],
                        attrs={"fixed": True, "out": rest_keys + [c.name for c in n.calls] + [
                            c for c, name in zip(n.keys, keys) if name.lower() in ("window_start", "window_end")]})


def _flink_error(error: KitError, text: str, special) -> KitError:
    """The kit planner's refusal as Flink's planner words it, where Flink refuses too."""
    message = str(error)
    if "OVER window ordered by a time attribute" in message or "a stream runs only BETWEEN" in message:
        times = {s.time.lower() for _, s in special.streams.values() if getattr(s, "time", None)}
        windows = list(sqlglot.parse_one(text, read="spark").find_all(exp.Window))
        if windows and all(w.args.get("order") and w.args["order"].expressions[0].this.name.lower() in times
                           for w in windows):
            return _TimeOver(text, special)
    return error


class _TimeOver(KitError):
    """Raised to route an OVER aggregate ordered by a time attribute (not a kit dynamic table)."""

    def __init__(self, text, special):
        super().__init__("an OVER aggregate ordered by a time attribute")
        self.text, self.special = text, special


def _time_over(text: str, special) -> PhysicalNode:
    """``SELECT ..., agg OVER (PARTITION BY p ORDER BY t ...) FROM stream``: Flink's OverAggregate
    on the time attribute (insert-only: each row's result is final when the watermark passes it)."""
    tree = sqlglot.parse_one(text, read="spark")
    table = tree.find(exp.Table)
    name, s, cols = special._base(table.name)
    windows = list(tree.find_all(exp.Window))
    w = windows[0]
    partition = [p.name for p in w.args.get("partition_by") or []]
    order = w.args["order"].expressions[0]
    spec = w.args.get("spec")
    frame = spec.sql(dialect="spark") if spec is not None else "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"
    calls = ", ".join(f"{x.this.sql(dialect='spark')} AS w0$o{i}" for i, x in enumerate(windows))
    node = PhysicalNode("OverAggregate", f"{'partitionBy=[' + ', '.join(partition) + '], ' if partition else ''}"
                        f"orderBy=[{order.this.name} ASC], window=[ {frame}], select=[{', '.join(cols)}, {calls}]",
                        [_exchange(partition, {}, _scan(name, s, cols, cols))],
                        attrs={"time_ordered": True, "fixed": True})
    return PhysicalNode("Calc", f"select=[{', '.join(e.alias_or_name for e in tree.expressions)}]", [node],
                        attrs={"fixed": True})


# ---------------------------------------------------------------------------- section 3's rewrites


def _optimized(n: PhysicalNode, options) -> PhysicalNode:
    """The plan with the rewrites ``options`` (``kit.changelog.Options``) ask for, as
    Flink 2.3 applies them (``minibatch.json``'s plans): a ``MiniBatchAssigner`` above each
    source (its scan, proctime and watermark assigner); each GroupAggregate split by
    ``MOD(HASH_CODE(x), buckets)`` into a PARTIAL and a FINAL one (split distinct), and, with
    mini-batches in two phases, into Local -> Exchange -> Global (split: Local -> Exchange ->
    Incremental -> Exchange -> Global). Labels name the kit's columns, not Flink's ``$f``s. A
    non-windowed aggregate's bundles end on processing time (``mode=[ProcTime]``), event time
    or not."""
    source = ("TableSourceScan", "WatermarkAssigner")
    in_source = n.name in source or (n.name == "Calc" and "PROCTIME()" in n.detail)
    inputs = [_optimized(c, options) for c in n.inputs]
    if options.mini_batch and not in_source:
        for i, c in enumerate(inputs):
            if c.name in source or (c.name == "Calc" and "PROCTIME()" in c.detail):
                inputs[i] = PhysicalNode("MiniBatchAssigner", f"interval=[{options.mini_batch[0]}ms], mode=[ProcTime]",
                                         [c], attrs={"out": c.attrs.get("out")})
    n.inputs = inputs
    if n.name != "GroupAggregate" or "kit" not in n.attrs:
        return n
    agg, below = n.attrs["kit"], inputs[0].inputs[0]          # below the aggregate's Exchange
    two_phase = options.mini_batch is not None and options.agg_phase != "ONE_PHASE"
    distinct = [c.arg for c in agg.calls if c.distinct]
    key_names = ", ".join(agg.names[:len(agg.keys)])
    keys = f"groupBy=[{key_names}]"
    updates = _kinds(below) != {"I"}
    if options.distinct_split and distinct:
        arg = _shown_name(agg, distinct[0])
        bucket = PhysicalNode("Calc", f"select=[*, MOD(HASH_CODE({arg}), {options.distinct_split}) AS $bucket]",
                              [below], attrs={"out": below.attrs.get("out")})
        split_keys = f"{key_names}, $bucket" if key_names else "$bucket"
        if two_phase:
            local = PhysicalNode("LocalGroupAggregate", f"groupBy=[{split_keys}], partialFinalType=[PARTIAL]", [bucket])
            incremental = PhysicalNode("IncrementalGroupAggregate", f"partialAggGrouping=[{split_keys}], "
                                       f"finalAggGrouping=[{key_names}]", [_hash_exchange(split_keys, local)])
            return PhysicalNode("GlobalGroupAggregate", f"{keys}, partialFinalType=[FINAL]",
                                [_hash_exchange(key_names, incremental)], attrs={"deletes": True})
        partial = PhysicalNode("GroupAggregate", f"groupBy=[{split_keys}], partialFinalType=[PARTIAL], select="
                               + n.detail.split("select=", 1)[1], [_hash_exchange(split_keys, bucket)])
        return PhysicalNode("GroupAggregate", f"{keys}, partialFinalType=[FINAL], select=[{key_names}, "
                            f"$SUM0_RETRACT(...)]", [_hash_exchange(key_names, partial)])
    if two_phase:
        local = PhysicalNode("LocalGroupAggregate", n.detail, [below])
        return PhysicalNode("GlobalGroupAggregate", n.detail, [_hash_exchange(key_names, local)],
                            attrs={"deletes": updates})
    return n


def _hash_exchange(keys: str, child: PhysicalNode) -> PhysicalNode:
    return PhysicalNode("Exchange", f"distribution=[{'hash[' + keys + ']' if keys else 'single'}]", [child])


def _shown_name(agg, column: str) -> str:
    """The SQL name of an aggregate's argument column, as its label shows it."""
    shown = dict(zip((c.arg for c in agg.calls), agg.shown_calls))
    text = shown.get(column, column)
    inner = re.search(r"\((?:DISTINCT )?([^)]*)\)", text)
    return inner.group(1) if inner else column


# ---------------------------------------------------------------------------- the public functions


def physical_plan(query: str, sink: str | None = "retract", config=None, **streams) -> PhysicalNode:
    """The physical plan of ``INSERT INTO <sink> query`` (``sink`` None: the bare query) over
    ``streams`` (``kit.Stream``s by the names the query uses), each node with the changelog
    mode Flink 2.3 gives it (module doc); ``config``: Flink's options by name, as ``kit.sql``
    takes them (mini-batch, agg-phase strategy, split distinct: ``_optimized``). Raises
    ``KitError`` with Flink's message where Flink's planner refuses the query."""
    if sink not in SINK_KINDS:
        raise KitError(f"sink={sink!r} is not one of {list(SINK_KINDS)}")
    options = config if isinstance(config, Options) else dynamic_options(config or {})[0]
    try:
        planned = Planned(query, streams)
        node, fields = _optimized(planned.node, options), ", ".join(planned.names)
    except _TimeOver as route:
        node = _time_over(route.text, route.special)
        fields = _fields(query)
    if sink is not None:
        node = PhysicalNode("Sink", f"table=[default_catalog.default_database.{sink}_sink], fields=[{fields}]",
                            [node])
    kinds = _kinds(node)
    if sink == "append" and kinds != {"I"}:
        raise KitError(f"Table sink 'default_catalog.default_database.{sink}_sink' doesn't support consuming "
                       f"{_changes(kinds)} which is produced by node {_producer(node.inputs[0]).flink_label()} "
                       f"(Flink 2.3's planner: an append-only ({_CONNECTORS[sink]}) sink takes inserts only, and this "
                       f"query's result changes rows it has emitted, changelog mode "
                       f"{mode_text(_kit_kinds(kinds))}: write it to a retract or upsert sink)")
    _decide(node, "BA" if sink == "retract" else "UA")
    return node


def _kit_kinds(kinds) -> frozenset:
    return frozenset({INSERT} | ({UPDATE_BEFORE, UPDATE_AFTER} if "U" in kinds else set())
                     | ({DELETE} if "D" in kinds else set()))


def _fields(query: str) -> str:
    try:
        tree = sqlglot.parse_one(query, read="spark")
        return ", ".join(e.alias_or_name for e in tree.expressions) if isinstance(tree, exp.Select) else ""
    except Exception:   # noqa: BLE001 - only a label
        return ""


def explain_changelog_mode(query: str, sink: str | None = "retract", config=None, **streams) -> str:
    """``physical_plan(...)`` drawn as Flink's ``EXPLAIN CHANGELOG_MODE`` draws it."""
    return physical_plan(query, sink, config, **streams).tree()


def parse_explain(text: str) -> list:
    """Flink's (or the kit's) plan text as ``[(depth, name, mode text, detail), ...]`` in
    pre-order; depth from the indentation."""
    out = []
    for line in text.strip().splitlines():
        m = re.match(r"^([\s:|+-]*?)(\w+)\((.*)\)\s*$", line)
        if not m:
            continue
        depth = len(m.group(1)) // 3
        mode = re.search(r"changelogMode=\[([^\]]*)\]\s*$", m.group(3))
        out.append((depth, m.group(2), mode.group(1) if mode else None, m.group(3)))
    return out


def compared(text: str, drop=("Calc",)) -> list:
    """The normalization both plans are compared on: each node's name and changelog mode,
    in pre-order, with its depth counted without the ``drop``ped nodes (Calcs: module doc);
    a GroupAggregate also with its aggregate functions (``COUNT`` vs ``COUNT_RETRACT``)."""
    nodes = parse_explain(text)
    out, stack = [], []      # stack: (original depth, depth kept)
    for depth, name, mode, detail in nodes:
        while stack and stack[-1][0] >= depth:
            stack.pop()
        kept_depth = (stack[-1][1] + 1) if stack else 0
        if name in drop:
            # children of a dropped node hang where it hung
            stack.append((depth, kept_depth - 1))
            continue
        item = (kept_depth, name, mode)
        if name == "GroupAggregate":
            select = detail.split("select=[", 1)[1] if "select=[" in detail else ""
            item += (tuple(re.findall(r"(?:^|, )([A-Z_]+)\(", select)),)
        out.append(item)
        stack.append((depth, kept_depth))
    return out


# ---------------------------------------------------------------------------- a DynamicTable's plan and messages


def table_plan(table) -> PhysicalNode:
    """The physical plan of a ``DynamicTable`` (``kit.sql``'s result) into its sink."""
    streams = {}

    def walk(n):
        if isinstance(n, P.Source):
            streams[n.table] = n.stream
        for child in n.inputs:
            walk(child)
    walk(table.root)
    return physical_plan(table.query, table.sink, table.options, **streams)


def messages(table) -> list:
    """What each operator of ``table``'s plan sends downstream when it runs: one dict per
    operator (top first) with ``node`` (Flink's label), ``changelogMode`` and the number of
    rows of each kind (``+I``, ``-U``, ``+U``, ``-D``). Each operator runs with the
    update-before decision of the plan (it sends ``-U`` only when its consumer needs them), so
    the same query into a retract and an upsert sink shows the messages the decision saves.
    Runs Spark jobs: one per operator."""
    from ..table import PlanRun
    out = []
    for node in table_plan(table).walk():
        kit_node = node.attrs.get("kit")
        if kit_node is None:
            continue
        log = PlanRun(table).node(kit_node, update_before=UPDATE_BEFORE in node.mode)
        counts = {r["_op"]: r["count"] for r in log.df.groupBy("_op").count().collect()}
        out.append({"node": node.flink_label(), "changelogMode": mode_text(node.mode),
                    **{k: int(counts.get(k, 0)) for k in KINDS}})
    return out
