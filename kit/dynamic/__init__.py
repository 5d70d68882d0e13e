"""Dynamic tables: continuous queries over ``kit.Stream``s and the changelogs they emit.

``kit.sql`` plans them (``plan``) and returns a ``DynamicTable`` (``table``); the operators
(``aggregate``, ``rank``, ``join``) read and write changelogs (``changelog``); Flink's table
options are in ``options``.
"""

from .options import idle_state_retention
from .table import DynamicTable

__all__ = ["DynamicTable", "idle_state_retention"]
