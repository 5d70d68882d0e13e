"""Charts of what a stream operator did, drawn with altair and rendered offline."""

from . import render
from .joins import version_timeline
from .match import match_timeline
from .stream import stream_timeline
from .window import window_timeline

render.enable()

__all__ = ["match_timeline", "stream_timeline", "version_timeline", "window_timeline"]
