"""The continuous-query planner: Flink SQL over streams -> the operators a Flink job runs.

``logical`` reads a SELECT into a tree of changelog operators; ``physical`` makes Flink's
physical plan of it, with every node's changelog mode and the update-before decision, as
``EXPLAIN CHANGELOG_MODE`` prints it. The operators themselves are ``kit.changelog``'s.
"""
