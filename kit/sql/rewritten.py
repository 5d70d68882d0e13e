"""``Rewritten``: Spark SQL built from pieces of the user's text, which maps an offset of it
back to the user's (so a Spark error names the user's line and column).

>>> r = Rewritten("SELECT a FROM t")
>>> r.copy(0, 9); r.replace("kit_view_1", 9)
>>> r.text, r.source_offset(12)
('SELECT a kit_view_1', 9)
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

__all__ = ["Rewritten"]


@dataclass
class Rewritten:
    """Spark SQL ``text`` built from pieces of the user's ``source``.

    ``pieces`` holds (start in ``text``, start in ``source``, verbatim); a verbatim piece maps
    offsets one to one, a replaced piece maps every offset to the start of what it replaced.
    """
    source: str
    text: str = ""
    pieces: list = field(default_factory=list)

    def copy(self, start: int, end: int):
        if end > start:
            self.pieces.append((len(self.text), start, True))
            self.text += self.source[start:end]

    def replace(self, text: str, at: int):
        self.pieces.append((len(self.text), at, False))
        self.text += text

    def extend(self, other: "Rewritten"):
        """``other``'s text (of the same source) appended, its pieces mapped as they were."""
        self.pieces.extend((len(self.text) + out, src, verbatim) for out, src, verbatim in other.pieces)
        self.text += other.text

    def source_offset(self, offset: int) -> int:
        """The offset of ``source`` that offset ``offset`` of ``text`` came from."""
        if not self.pieces:
            return 0
        k = max(0, bisect.bisect_right([p[0] for p in self.pieces], offset) - 1)
        out, src, verbatim = self.pieces[k]
        return src + (offset - out) if verbatim else src
