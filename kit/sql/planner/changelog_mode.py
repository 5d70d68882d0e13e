"""Changelog-mode inference: what every node of a physical plan emits, and who needs update-before.

Flink's ``FlinkChangelogModeInferenceProgram``, in the seed's two steps (004, 2.4.2), run by
``infer(root, sink)`` on a plan ``physical`` converted:

1. **bottom-up, what each node may change** (``modify_kinds``, Flink's ModifyKindSet): a
   source inserts (``[I]``); a Calc, an Exchange, a WatermarkAssigner and a Union pass their
   inputs' kinds on; a GroupAggregate updates (``I,U``) and, over an input that updates, also
   deletes (``D``: a group whose rows are all retracted goes away); a Top-N updates and
   deletes; a deduplication keeping the first row inserts only (``[I]``), keeping the last
   updates; an OVER aggregate on a non-time column updates and deletes, on the time attribute
   it inserts; an inner join changes what its inputs change, an outer join also updates and
   deletes (padded rows); windows, MATCH_RECOGNIZE, temporal and interval joins and a sort on
   the time attribute insert only, and fail on an input that updates.
2. **top-down, who needs update-before** (``update_kinds``, Flink's UpdateKindTrait): a
   retract sink (``print``) needs ``UB`` and ``UA``; an upsert sink (``blackhole``, a primary
   key) and a bare SELECT need ``UA`` only; an aggregate (or OVER aggregate) over updates needs
   ``UB`` from its input, whatever its consumer needs (its accumulators must subtract the old
   value: that is why it uses the ``_RETRACT`` variant of COUNT/SUM/AVG and of MIN/MAX unless
   the input only grows the way the function looks); a Top-N over updates needs ``UB`` unless
   its sort key only moves towards the top (Flink's UpdateFastStrategy, ``UA`` enough); a join
   needs ``UB`` from an updating input unless the input's unique key is inside the join key; a
   Calc, an Exchange or a Union pass the need on. A node then emits ``UB`` only when its
   consumer needs it: into an upsert sink the outer aggregate of the cascade emits
   ``[I,UA,D]`` while the inner one still emits ``[I,UB,UA]``.

An append-only sink (``filesystem``) takes inserts only: ``infer`` fails there, with Flink's
message, when the plan's root changes rows it has emitted.
"""

from __future__ import annotations

from ...errors import KitError
from ...changelog import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE, mode_text

__all__ = ["infer", "modify_kinds", "reads_inserts", "update_kinds"]

_CONNECTORS = {"retract": "print", "upsert": "blackhole", "append": "filesystem"}
_TIMELESS = ("Calc", "Exchange", "WatermarkAssigner", "Union", "MiniBatchAssigner")
_INSERT_ONLY_OPERATORS = {"Match": "Match Recognize", "TemporalJoin": "TemporalJoin",
                          "IntervalJoin": "IntervalJoin", "LocalWindowAggregate": "WindowAggregate",
                          "TemporalSort": "TemporalSort", "OverAggregate": "OverAggregate"}


def infer(root, sink: str | None) -> None:
    """Both steps on the physical plan ``root`` (a ``PhysicalNode``) into ``sink``: every
    node's ``kinds`` and ``mode`` set; ``KitError`` with Flink's message where Flink's planner
    refuses the plan (an insert-only operator over updates, an updating query into an append
    sink)."""
    kinds = modify_kinds(root)
    if sink == "append" and kinds != {"I"}:
        raise KitError(f"Table sink 'default_catalog.default_database.{sink}_sink' doesn't support consuming "
                       f"{_changes(kinds)} which is produced by node {_producer(root.inputs[0]).flink_label()} "
                       f"(Flink 2.3's planner: an append-only ({_CONNECTORS[sink]}) sink takes inserts only, and this "
                       f"query's result changes rows it has emitted, changelog mode "
                       f"{mode_text(_kit_kinds(kinds))}: write it to a retract or upsert sink)")
    update_kinds(root, "BA" if sink == "retract" else "UA")


def modify_kinds(n) -> frozenset:
    """Step 1, bottom-up: what ``n`` may change (Flink's ModifyKindSet)."""
    kids = [modify_kinds(c) for c in n.inputs]
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
        reads_inserts(name, n.inputs[0], below)
        kinds = frozenset({"I"})
    else:
        raise KitError(f"internal: no changelog rule for {name}")
    n.kinds = kinds
    return kinds


def reads_inserts(name: str, child, kinds: frozenset) -> None:
    """Flink's check that operator ``name`` (an insert-only one: ``Match``, ``TemporalJoin``...)
    reads inserts only: ``kinds``, what its input ``child`` may change, or a ``KitError`` with
    Flink's message naming the node that makes the changes."""
    if kinds != {"I"}:
        raise KitError(f"{_INSERT_ONLY_OPERATORS.get(name, name)} doesn't support consuming "
                       f"{_changes(kinds)} which is produced by node {_producer(child).flink_label()}"
                       f" (Flink 2.3's planner: {name} keeps no state to take back what it emitted, so it "
                       "reads an insert-only input)")


def update_kinds(n, need: str | None) -> None:
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
        update_kinds(child, wants)


def _changes(kinds) -> str:
    return "update and delete changes" if "D" in kinds and "U" in kinds else \
        "delete changes" if "D" in kinds else "update changes"


def _producer(n):
    """The node that makes the changes ``n`` carries (through Calcs and Exchanges)."""
    while n.name in _TIMELESS and n.inputs:
        n = next((c for c in n.inputs if c.kinds != {"I"}), n.inputs[0])
    return n


def _kit_kinds(kinds) -> frozenset:
    return frozenset({INSERT} | ({UPDATE_BEFORE, UPDATE_AFTER} if "U" in kinds else set())
                     | ({DELETE} if "D" in kinds else set()))

