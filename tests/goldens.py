"""The real-Flink outputs in ../shared/golden: facts the tests compare against."""

import json
from pathlib import Path

DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "golden" / "flink-2.3"


def load(name: str) -> dict:
    """Golden file ``name`` (e.g. ``"tumble_clicks.json"``); missing goldens fail the test."""
    path = DIR / name
    assert path.is_file(), f"golden file {path} is missing: the shared/ folder must sit beside the repo"
    return json.loads(path.read_text())
