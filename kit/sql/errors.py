"""SQL errors that point at the line and column of the user's query text."""

from __future__ import annotations

from ..errors import KitError

__all__ = ["SqlError", "error_at", "position"]


class SqlError(KitError):
    """A parse, validation or analysis error at ``line``, ``column`` (1-based) of ``text``.

    ``str(error)`` quotes the offending line with a caret under the column::

        line 3, column 16: expected ')' but found 'DEFINE'
            PATTERN (A B C DEFINE
                           ^
    """

    def __init__(self, message: str, line: int, column: int, text: str | None = None):
        self.message = message
        self.line = line
        self.column = column
        self.text = text
        super().__init__(self._render())

    def _render(self) -> str:
        head = f"line {self.line}, column {self.column}: {self.message}"
        lines = (self.text or "").split("\n")
        if not self.text or not 1 <= self.line <= len(lines):
            return head
        source = lines[self.line - 1].rstrip("\r")
        # keep tabs so the caret lines up with the quoted text
        pad = "".join(c if c == "\t" else " " for c in source[: self.column - 1])
        return f"{head}\n    {source}\n    {pad}^"


def position(text: str, offset: int) -> tuple[int, int]:
    """(line, column), 1-based, of character ``offset`` of ``text``."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def error_at(text: str, message: str, start: int, end: int | None = None) -> SqlError:
    """A SqlError at character ``start`` of ``text``. Given the offending token's ``end`` (its last
    character, as sqlglot's tokens count), the message says what is there.

    >>> error_at("PATTERN (A) WEEK", "expected a unit", 12, 15).message
    "expected a unit but found 'WEEK'"
    """
    if end is not None:
        message += " but found " + ("end of input" if start >= len(text) else f"'{text[start:end + 1][:40]}'")
    return SqlError(message, *position(text, start), text)
