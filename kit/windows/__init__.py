"""Flink's DataStream windows on Spark (seed 000): assigners, triggers, evictors, functions."""
