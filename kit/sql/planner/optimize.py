"""The optimizer's rewrites of seed 004's section 3, each a function named after Flink's rule.

``optimize(root, options)`` applies what ``options`` (``kit.changelog.Options``: Flink's
``table.exec.mini-batch.*`` and ``table.optimizer.*``) asks for, as Flink 2.3 does
(``minibatch.json``'s plans), bottom-up:

- ``mini_batch_assigner`` (MiniBatchIntervalInferRule): a ``MiniBatchAssigner`` above each
  source (its scan, proctime and watermark assigner);
- ``split_distinct_aggregate`` (SplitAggregateRule, with IncrementalAggregateRule): a
  GroupAggregate with a DISTINCT call split by ``MOD(HASH_CODE(x), buckets)`` into a PARTIAL
  and a FINAL one;
- ``two_stage_aggregate`` (TwoStageOptimizedAggregateRule): with mini-batches, a
  GroupAggregate in two phases, ``Local -> Exchange -> Global``.

For example, ``GroupAggregate(groupBy=[word], select=[word, COUNT(*) AS cnt])`` with
mini-batches becomes ``GlobalGroupAggregate`` over ``Exchange`` over ``LocalGroupAggregate``.
Labels name the kit's columns, not Flink's ``$f``s.
"""

from __future__ import annotations

import re

from .changelog_mode import modify_kinds
from .physical import PhysicalNode

__all__ = ["optimize", "mini_batch_assigner", "split_distinct_aggregate", "two_stage_aggregate"]

_SOURCE = ("TableSourceScan", "WatermarkAssigner")


def optimize(n: PhysicalNode, options) -> PhysicalNode:
    """The plan under ``n`` with the rewrites ``options`` ask for (module doc)."""
    inputs = [optimize(c, options) for c in n.inputs]
    n.inputs = mini_batch_assigner(n, inputs, options) if options.mini_batch else inputs
    if n.name != "GroupAggregate" or "kit" not in n.attrs:
        return n
    agg, below = n.attrs["kit"], inputs[0].inputs[0]          # below the aggregate's Exchange
    two_phase = options.mini_batch is not None and options.agg_phase != "ONE_PHASE"
    if options.distinct_split and any(c.distinct for c in agg.calls):
        return split_distinct_aggregate(n, below, options.distinct_split, two_phase)
    if two_phase:
        return two_stage_aggregate(n, below)
    return n


def _in_source(n: PhysicalNode) -> bool:
    return n.name in _SOURCE or (n.name == "Calc" and "PROCTIME()" in n.detail)


def mini_batch_assigner(n: PhysicalNode, inputs: list, options) -> list:
    """``n``'s ``inputs``, each that ends a source with a ``MiniBatchAssigner`` above it. A
    non-windowed aggregate's bundles end on processing time (``mode=[ProcTime]``), event time
    or not."""
    if _in_source(n):
        return inputs
    return [PhysicalNode("MiniBatchAssigner", f"interval=[{options.mini_batch[0]}ms], mode=[ProcTime]",
                         [c], attrs={"out": c.attrs.get("out")}) if _in_source(c) else c for c in inputs]


def split_distinct_aggregate(n: PhysicalNode, below: PhysicalNode, buckets: int, two_phase: bool) -> PhysicalNode:
    """The GroupAggregate ``n`` (over ``below``) with its first DISTINCT argument spread over
    ``buckets``: a PARTIAL aggregate by the keys and the bucket, a FINAL one by the keys; in two
    phases ``Local -> Exchange -> Incremental -> Exchange -> Global``."""
    agg = n.attrs["kit"]
    key_names = ", ".join(agg.names[:len(agg.keys)])
    arg = _shown_name(agg, next(c.arg for c in agg.calls if c.distinct))
    bucket = PhysicalNode("Calc", f"select=[*, MOD(HASH_CODE({arg}), {buckets}) AS $bucket]",
                          [below], attrs={"out": below.attrs.get("out")})
    split_keys = f"{key_names}, $bucket" if key_names else "$bucket"
    if two_phase:
        local = PhysicalNode("LocalGroupAggregate", f"groupBy=[{split_keys}], partialFinalType=[PARTIAL]", [bucket])
        incremental = PhysicalNode("IncrementalGroupAggregate", f"partialAggGrouping=[{split_keys}], "
                                   f"finalAggGrouping=[{key_names}]", [_hash_exchange(split_keys, local)])
        return PhysicalNode("GlobalGroupAggregate", f"groupBy=[{key_names}], partialFinalType=[FINAL]",
                            [_hash_exchange(key_names, incremental)], attrs={"deletes": True})
    partial = PhysicalNode("GroupAggregate", f"groupBy=[{split_keys}], partialFinalType=[PARTIAL], select="
                           + n.detail.split("select=", 1)[1], [_hash_exchange(split_keys, bucket)])
    return PhysicalNode("GroupAggregate", f"groupBy=[{key_names}], partialFinalType=[FINAL], select=[{key_names}, "
                        f"$SUM0_RETRACT(...)]", [_hash_exchange(key_names, partial)])


def two_stage_aggregate(n: PhysicalNode, below: PhysicalNode) -> PhysicalNode:
    """The GroupAggregate ``n`` (over ``below``) as ``LocalGroupAggregate`` (per bundle) ->
    Exchange -> ``GlobalGroupAggregate``, which deletes when ``below`` updates."""
    agg = n.attrs["kit"]
    local = PhysicalNode("LocalGroupAggregate", n.detail, [below])
    return PhysicalNode("GlobalGroupAggregate", n.detail,
                        [_hash_exchange(", ".join(agg.names[:len(agg.keys)]), local)],
                        attrs={"deletes": modify_kinds(below) != {"I"}})


def _hash_exchange(keys: str, child: PhysicalNode) -> PhysicalNode:
    return PhysicalNode("Exchange", f"distribution=[{'hash[' + keys + ']' if keys else 'single'}]", [child])


def _shown_name(agg, column: str) -> str:
    """The SQL name of an aggregate's argument column, as its label shows it."""
    shown = dict(zip((c.arg for c in agg.calls), agg.shown_calls))
    text = shown.get(column, column)
    inner = re.search(r"\((?:DISTINCT )?([^)]*)\)", text)
    return inner.group(1) if inner else column

