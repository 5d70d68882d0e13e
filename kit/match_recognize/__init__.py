"""MATCH_RECOGNIZE (seed 001): row pattern recognition on Spark.

``spec`` holds the clause as plain objects; the SQL front end (``kit.sql``) builds them.
"""

from . import spec

__all__ = ["spec"]
