"""Projection pushdown on the physical plan: each node reads only the columns it needs.

``Pruner().prune(root, columns)`` walks the plan ``physical.Converter`` made, top-down, as
Flink's projection pushdown leaves it: a scan reads only what its consumers need (and its
event time), ``TableSourceScan(..., project=[user, url], ...)``; a Calc that only copies its
input's columns goes.
"""

from __future__ import annotations

from .physical import PhysicalNode, scan

__all__ = ["Pruner"]


class Pruner:
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
            node = scan(table, stream, ids, names, needed=[c for c in needed if c in ids],
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
