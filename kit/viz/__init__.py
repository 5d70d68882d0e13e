"""Charts of what a stream operator did, drawn with altair and rendered offline."""

from . import render
from .changelog import changelog_timeline, table_history
from .joins import version_timeline
from .match import match_timeline
from .plan import plan
from .render import save
from .stream import stream_timeline
from .window import window_timeline

render.enable()

__all__ = ["changelog_timeline", "match_timeline", "plan", "save", "stream_timeline", "table_history",
           "version_timeline", "window_timeline"]
