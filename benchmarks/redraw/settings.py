"""The redraw benchmark's paths and numbers."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
MARK = "kit.widgets.bind("
CHANGES = 10
TIMEOUT = 120  # seconds a change may take before it counts as never finished
FLINK_FIRST_RESULT = 7.6
VEGA = "application/vnd.vega.v5+json"
