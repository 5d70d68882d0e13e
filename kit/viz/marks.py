"""What the charts draw, said once: the kinds of mark each chart has (label, colour, symbol),
from which both the marks and their legend are drawn; the checks of the charts' arguments.

A legend entry shows the symbol the chart draws, because both come from one ``Kind``: the
chart encodes ``fill``, ``stroke`` and ``shape`` by the kind's label with the scales
``legend`` gives, and Vega-Lite merges the three into one legend. Only the kinds present in
the data get an entry (``present``). A symbol is a Vega shape name or an SVG path in the
square [-1, 1]²; a kind with ``filled=False`` is a stroke only (a line, an ×), the others are
filled and outlined in their colour, so a ring or a hollow diamond is a filled path with a
hole (it looks the same filled or stroked, in the chart and in the legend).
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass
from typing import Iterable

import altair as alt

from ..errors import KitError

__all__ = ["Kind", "legend", "literal", "present_kinds", "title_params", "check_column", "check_title",
           "LATE_COLOR", "RING", "RING_X", "X", "HOURGLASS", "DIAMOND_RING", "LINE", "DASHED", "DOTTED", "BAR"]

LATE_COLOR = "#d62728"


def _circle(r: float, clockwise: bool) -> str:
    sweep = 1 if clockwise else 0
    return f"M0,-{r}A{r},{r} 0 1,{sweep} 0,{r}A{r},{r} 0 1,{sweep} 0,-{r}Z"


def _cross(half_width: float, half_length: float) -> str:
    """An × as one filled outline: a plus of the given arm sizes turned by 45°."""
    w, n = half_width, half_length
    plus = [(w, -n), (w, -w), (n, -w), (n, w), (w, w), (w, n), (-w, n), (-w, w), (-n, w), (-n, -w), (-w, -w), (-w, -n)]
    turned = [((x - y) / math.sqrt(2), (x + y) / math.sqrt(2)) for x, y in plus]
    return "M" + "L".join(f"{x:.3f},{y:.3f}" for x, y in turned) + "Z"


RING = _circle(1, True) + _circle(0.72, False)                 # ○ (filled, with a hole)
RING_X = RING + _cross(0.11, 0.62)                              # ⊗: an × in a ring
X = "M-1,-1L1,1M-1,1L1,-1"                                       # × (a stroke)
HOURGLASS = "M-0.8,-1H0.8L-0.8,1H0.8Z"                          # ⧗ (filled)
DIAMOND_RING = "M0,-1L1,0L0,1L-1,0Z" + "M0,-0.6L-0.6,0L0,0.6L0.6,0Z"   # ◇ (filled, with a hole)
LINE = "M-1,0H1"                                                 # — (a stroke)
DASHED = "M-1,0H-0.55M-0.2,0H0.2M0.55,0H1"                       # - - (a stroke)
DOTTED = "M-1,0H-0.8M-0.5,0H-0.3M-0.1,0H0.1M0.3,0H0.5M0.8,0H1"    # ··· (a stroke)
BAR = "M-1,-0.5H1V0.5H-1Z"                                       # ▬ (filled)


@dataclass(frozen=True)
class Kind:
    """One kind of mark: its legend ``label``, ``color``, ``symbol`` and whether it is filled."""

    label: str
    color: str
    symbol: str
    filled: bool = True
    fill: str | None = None     # a fill other than ``color`` (e.g. a translucent one)


def present_kinds(kinds: Iterable[Kind], present: Iterable[str]) -> list[Kind]:
    """``kinds`` whose label is in ``present``, in ``kinds``' order."""
    present = set(present)
    return [k for k in kinds if k.label in present]


def legend(field: str, kinds: Iterable[Kind], present: Iterable[str], title: str | None = None,
           **options) -> dict:
    """The ``fill``, ``stroke`` and ``shape`` encodings of ``field`` (the kind's label) for
    the kinds present: one legend (``title``) listing them in ``kinds``' order. Lines and
    bars take ``stroke`` (and ``fill``) only."""
    shown = present_kinds(kinds, present)
    domain = [k.label for k in shown]
    shown_legend = alt.Legend(title=title, symbolStrokeWidth=1.5, labelLimit=260, symbolOpacity=1,
                              **options) if shown else None
    scale = dict(domain=domain or [""])

    def channel(kind, values, **extra):
        return kind(f"{field}:N", title=title, scale=alt.Scale(range=values or ["transparent"], **scale),
                    legend=shown_legend, **extra)

    return {
        "fill": channel(alt.Fill, [(k.fill or k.color) if k.filled else "transparent" for k in shown]),
        "stroke": channel(alt.Stroke, [k.color for k in shown]),
        "shape": channel(alt.Shape, [k.symbol for k in shown]),
    }


def literal(text: str) -> str:
    """``text`` as a string in a Vega expression (quotes and all)."""
    return json.dumps(text)


def title_params(default: str, facts: str | None = None, title: str | None = None) -> alt.TitleParams:
    """The chart's title: ``title`` if given (a widget names its values there), else
    ``default``; under it at most one line of facts."""
    return alt.TitleParams(default if title is None else title, subtitle=[facts] if facts else alt.Undefined,
                           anchor="start")


def check_title(function: str, title) -> None:
    if title is not None and not isinstance(title, str):
        raise KitError(f"{function}: title must be a str (or None for the default); got {type(title).__name__}")


def check_column(function: str, parameter: str, name, columns: Iterable[str], what: str = "the data") -> None:
    """A ``KitError`` naming ``parameter``, the bad ``name`` and the columns there are,
    unless ``name`` is one of ``columns``."""
    columns = list(columns)
    if not isinstance(name, str):
        raise KitError(f"{function}: {parameter} must be a column name (a str); got {name!r}. "
                       f"Columns of {what}: {', '.join(columns)}")
    if name in columns:
        return
    close = difflib.get_close_matches(name, columns, n=1) or [c for c in columns if c.lower() == name.lower()]
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise KitError(f"{function}: {parameter}={name!r} is not a column of {what}{hint}; "
                   f"its columns are: {', '.join(columns)}")
