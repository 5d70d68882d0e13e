"""Spark SQL text the kit writes: a projection written as text costs one py4j call
(``selectExpr``), where one built from ``Column`` objects costs one per function, column
and literal (thousands per widget redraw, ~0.1–0.8 ms each).

    name("a`b")        -> `a``b`
    string("it's")     -> 'it\\'s'
"""

__all__ = ["name", "string"]


def name(column: str) -> str:
    """``column`` as a Spark SQL identifier."""
    return "`" + column.replace("`", "``") + "`"


def string(text: str) -> str:
    """``text`` as a Spark SQL string literal (backslash escapes: Spark reads ``'a''b'`` as
    two literals)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
