"""Live mode (layer 4, a driver): the kit's operators on Spark Structured Streaming."""

from .driver import LiveRun, arrivals, per_key, watched

__all__ = ["LiveRun", "arrivals", "per_key", "watched"]
