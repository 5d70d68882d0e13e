"""Flink's joins over time (seed 002): event-time and processing-time temporal joins,
lookup joins and interval joins, replayed on Spark (see ``replay.py``)."""
