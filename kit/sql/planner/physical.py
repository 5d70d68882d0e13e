"""Flink's physical nodes, and the kit's logical plan converted to them.

``PhysicalNode`` is one node as Flink's ``EXPLAIN`` prints it, named as Flink names them
(``TableSourceScan``, ``WatermarkAssigner``, ``Calc``, ``Exchange``, ``GroupAggregate``,
``Rank``, ``OverAggregate``, ``Join``, ``Union``, ``LocalWindowAggregate`` /
``GlobalWindowAggregate``, ...); ``Converter`` turns ``logical.plan``'s operator tree into
them (Flink's physical conversion rules), one Calc per merged chain of SELECT lists, an
Exchange below every keyed operator, a GroupAggregate keyed by a window TVF's bounds as
Flink's two-phase window aggregate. For example, keeping each user's first click::

    Rank(strategy=[AppendFastStrategy], ..., partitionBy=[user], orderBy=[ROWTIME ts ASC], ...)
    +- Exchange(distribution=[hash[user]])
       +- WatermarkAssigner(rowtime=[ts], watermark=[-(ts, 5001:INTERVAL SECOND)])
          +- TableSourceScan(table=[[default_catalog, default_database, clicks]], fields=[user, url, ts])

Where a strategy or an aggregate function depends on the changes a node reads (Rank's
``AppendFastStrategy`` / ``UpdateFastStrategy`` / ``RetractStrategy``, ``COUNT`` or
``COUNT_RETRACT``), the converter asks ``changelog_mode.modify_kinds``. Flink 2.3 plans
deduplication as a ``Rank`` (``AppendFastStrategy``, ``rankEnd=1``, ordered by ``ROWTIME ts``
or the proctime) and so does the kit here. Window aggregates are two-phase (Local/Global) in
Flink 2.3 by default (``table.optimizer.agg-phase-strategy`` AUTO); the kit says so too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...errors import KitError
from ...changelog import mode_text
from . import logical as P
from .changelog_mode import modify_kinds

__all__ = ["PhysicalNode", "Converter", "ascending_top1", "direction", "exchange", "ignores_retractions", "join_needs", "monotonic_order",
           "scan"]


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


# ---------------------------------------------------------------------------- kit plan -> Flink nodes


def join_needs(n: P.Join, times: bool = False) -> dict:
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


class Converter:
    """The kit's operator tree (``logical.plan``) as Flink's physical nodes."""

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
            return scan(n.table, n.stream, list(n.columns), list(n.names)), dict(zip(n.columns, n.names)), None
        if isinstance(n, P.GroupAggregate):
            child, names, _ = self.node(n.input)
            window = self.window_of(n)
            if window is not None:
                return _window_aggregate(n, child, names, *window), dict(zip(n.columns, n.names)), None
            agg = PhysicalNode("GroupAggregate", _aggregate_detail(n, child),
                               [exchange(n.keys, names, child)],
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
            return PhysicalNode("OverAggregate", detail, [exchange(n.partition, names, child)],
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
            insert_only = ascending_top1(n)
        below = modify_kinds(child)
        strategy = "AppendFastStrategy" if below == {"I"} else \
            "UpdateFastStrategy" if isinstance(n, P.Rank) and monotonic_order(n) else "RetractStrategy"
        select = [names.get(c, c) for c in n.input.columns] + ([names.get(number, number)] if number else [])
        detail = (f"strategy=[{strategy}], rankType=[ROW_NUMBER], rankRange=[rankStart={start}, rankEnd={end}], "
                  f"partitionBy=[{', '.join(names.get(c, c) for c in partition)}], orderBy=[{order}], "
                  f"select=[{', '.join(select)}]")
        node = PhysicalNode("Rank", detail, [exchange(partition, names, child)],
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
                            [exchange(n.left_keys, names, left), exchange(n.right_keys, names, right)],
                            attrs={"how": n.how, "specs": specs, "kit": n, **join_needs(n)})
        return node, names, None


# -- what only moves one way (Flink's modified monotonicity)

def direction(node: P.Node, column: str) -> str | None:
    """How column ``column`` of ``node`` moves: ``"up"`` (a COUNT or MAX of a group aggregate
    over insert-only rows only grows), ``"down"`` (such a MIN only falls; so does the first
    sort column of a Top-1 ascending over insert-only rows, per partition; descending it
    grows), ``"constant"`` (one of its keys, a Top-1's partition columns), found through the
    Calcs that copy it; None otherwise."""
    while isinstance(node, P.Calc):
        copies = {}
        for text, out in zip(node.select, node.columns):
            m = re.fullmatch(r"`?(\w+)`?(?: AS `?(\w+)`?)?", text.strip())
            if m:
                copies[out] = m.group(1)
        if column not in copies or node.where:
            return None
        column, node = copies[column], node.input
    if isinstance(node, P.Rank) and node.start == node.end == 1 and node.order and _insert_only(node.input):
        first, ascending, _ = node.order[0]
        return "constant" if column in node.partition else ("down" if ascending else "up") if column == first else None
    if not isinstance(node, P.GroupAggregate) or not _insert_only(node.input):
        return None
    if column in node.keys:
        return "constant"
    call = next((c for c in node.calls if c.name == column), None)
    return {"COUNT": "up", "MAX": "up", "MIN": "down"}.get(call.function) if call else None


def ignores_retractions(call, aggregate: P.GroupAggregate) -> bool:
    """Whether ``call`` of group aggregate ``aggregate`` is Flink's non-retracting MAX / MIN:
    its argument only moves its way (a MAX of counts), so a retraction never lowers it and
    Flink's planner drops its retract (``MAX`` in the plan, not ``MAX_RETRACT``). Only where
    every grouping key is constant in the input: a row whose key moves (``GROUP BY cnt``)
    leaves its old group, which must retract it."""
    node = aggregate.input
    if any(direction(node, k) != "constant" for k in aggregate.keys):
        return False
    moves = direction(node, call.arg) if call.arg is not None and not call.distinct else None
    return (call.function == "MAX" and moves in ("up", "constant")
            or call.function == "MIN" and moves in ("down", "constant"))


def ascending_top1(rank) -> bool:
    """Whether Flink 2.3's planner takes Top-N ``rank`` for insert-only: a Top-1 whose first
    sort key is ascending (measured on its runtime: ``changelogMode=[I]``, and a new first row
    comes as a lone ``+U``, its ``-U`` never asked for; descending it is ``[I,UA,D]``), over
    an insert-only input."""
    return isinstance(rank, P.Rank) and rank.start == 1 and rank.end == 1 and bool(rank.order) and rank.order[0][1]


def monotonic_order(rank: P.Rank) -> bool:
    """Whether each of a Top-N's sort columns only moves in its sort direction (increasing
    sorted DESC, decreasing ASC, or constant): then Flink picks its UpdateFast Top-N."""
    for column, ascending, _ in rank.order:
        d = direction(rank.input, column)
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


def exchange(keys, names, child) -> PhysicalNode:
    dist = f"hash[{', '.join(names.get(k, k) for k in keys)}]" if keys else "single"
    return PhysicalNode("Exchange", f"distribution=[{dist}]", [child])


def _aggregate_detail(n: P.GroupAggregate, child: PhysicalNode) -> str:
    updates = modify_kinds(child) != {"I"}
    calls = []
    for call, shown in zip(n.calls, n.shown_calls):
        retract = updates and not ignores_retractions(call, n)
        calls.append(re.sub(r"^(\w+)\(", lambda m: m.group(1) + ("_RETRACT(" if retract else "("), shown, count=1))
    keys = n.names[:len(n.keys)]
    return (f"groupBy=[{', '.join(keys)}], " if keys else "") + f"select=[{', '.join(keys + calls)}]"


def _delay_ms(s) -> int | None:
    """The watermark delay of stream ``s`` in ms (None: not a delay, e.g. watermarks from a column)."""
    strategy = getattr(s, "watermark", None)
    if getattr(strategy, "kind", None) in ("bounded", "sql"):
        return strategy.delay.millis + (strategy.kind == "bounded")
    return None


def scan(table: str, s, ids: list, names: list, needed=None, referenced=None) -> PhysicalNode:
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
                        attrs={"out": [i for i, _ in read], "stream": s})
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


def _window_aggregate(n: P.GroupAggregate, child: PhysicalNode, names: dict, call, s) -> PhysicalNode:
    """A GroupAggregate keyed by a window TVF's window_start and window_end is Flink's window
    aggregate, two-phase by default: LocalWindowAggregate (over the scan, reading the keys,
    the arguments and the time column), Exchange, GlobalWindowAggregate."""
    keys = n.names[:len(n.keys)]
    rest = [k for k in keys if k.lower() not in ("window_start", "window_end", "window_time")]
    rest_keys = [c for c, name in zip(n.keys, keys) if name in rest]
    copies = {out: copy for out, _, copy, _ in child.attrs.get("items", [])}
    reads = {out: used for out, used, _, _ in child.attrs.get("items", [])}
    source = next(x for x in child.walk() if "scan" in x.attrs)
    table, stream, ids, columns = source.attrs["scan"]
    args = [c.arg for c in n.calls if c.arg is not None]
    needed = [copies.get(k) or k for k in rest_keys] + [i for a in args for i in sorted(reads.get(a, {a}))]
    needed += [i for i, c in zip(ids, columns) if c == call.time]
    sizes = ", ".join(f"{k}=[{v} ms]" for k, v in call.sizes.items())
    by = f"groupBy=[{', '.join(rest)}], " if rest else ""
    calls = ", ".join(n.shown_calls)
    local = PhysicalNode("LocalWindowAggregate", f"{by}window=[{call.kind}(time_col=[{call.time}], {sizes})], "
                                                 f"select=[{', '.join(rest + [calls])}]",
                         [scan(table, stream, ids, columns, needed=needed)], attrs={"fixed": True})
    return PhysicalNode("GlobalWindowAggregate", f"{by}window=[{call.kind}({sizes})], "
                                                 f"select=[{', '.join(rest + [calls])}, "
                                                 "start('w$) AS window_start, end('w$) AS window_end]",
                        [exchange(rest_keys, dict(zip(n.keys, keys)), local)],
                        attrs={"fixed": True, "out": rest_keys + [c.name for c in n.calls] + [
                            c for c, name in zip(n.keys, keys) if name.lower() in ("window_start", "window_end")]})
