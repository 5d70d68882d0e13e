"""Replaying recorded arrivals as a streaming operator would see them (layer 4, the driver).

``keyed``: the per-key replay driver and the operator interface every operator family runs
through (``KeyedOperator``: state declared up front, a step per element, timers, the end of
input). ``interleave``: two streams merged into the one arrival order a two-input operator
(a join) sees, with the operator's watermark at every position.
"""
