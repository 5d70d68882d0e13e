"""Live mode (layer 4, a driver): the kit's operators on Spark Structured Streaming."""

from .driver import SHIFT_MS, LiveRun, arrival_ids

__all__ = ["LiveRun", "SHIFT_MS", "arrival_ids"]
