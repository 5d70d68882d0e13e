"""``EXPLAIN CHANGELOG_MODE`` as text: printing the kit's plan, parsing Flink's, comparing them.

``explain_changelog_mode(query, sink, config, **streams)`` is ``program.physical_plan``'s
plan drawn as Flink draws it; ``parse_explain`` reads such a text (Flink's or the kit's) back
into nodes; ``compared`` is the normalization both are compared on::

    >>> parse_explain("Sink(table=[t], changelogMode=[NONE])\\n+- Calc(select=[a], changelogMode=[I])")
    [(0, 'Sink', 'NONE', 'table=[t], changelogMode=[NONE]'), (1, 'Calc', 'I', 'select=[a], changelogMode=[I]')]
    >>> compared("Sink(table=[t], changelogMode=[NONE])\\n+- Calc(select=[a], changelogMode=[I])")
    [(0, 'Sink', 'NONE')]

What the kit cannot know (the normalization ``tests/test_changelog_mode.py`` compares on):
Flink places ``Calc`` nodes by its projection pushdown (into the scan and through joins),
merges them and materializes time attributes in them; the kit plans one Calc per SELECT
list and per aggregate's arguments. Here adjacent Calcs are merged and one that only copies
columns is dropped, which is often, not always, where Flink has none. A Calc passes its
input's changelog mode on unchanged, so dropping every Calc from both plans loses no mode;
every other node -- scans, watermark assigners, exchanges, operators, sinks -- is compared.
"""

from __future__ import annotations

import re

from .program import physical_plan

__all__ = ["explain_changelog_mode", "parse_explain", "compared"]


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
