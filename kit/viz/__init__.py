"""Charts of what a stream operator did, drawn with altair and rendered offline."""

from . import render
from .stream import stream_timeline

render.enable()

__all__ = ["stream_timeline"]
