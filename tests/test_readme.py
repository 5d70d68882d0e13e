"""Every line of the README's tour runs, and what it says it shows is there."""

import contextlib
import io
import re
from pathlib import Path

import altair as alt
import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.timeout(600)


def tour_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


@pytest.fixture(scope="module")
def tour(spark):
    """The tour's python blocks run in order in one namespace: (namespace, what they printed)."""
    blocks = tour_blocks()
    assert blocks, "the README has no ```python block"
    namespace: dict = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for block in blocks:
            exec(compile(block, "README.md", "exec"), namespace)
    return namespace, printed.getvalue()


def test_the_tour_runs_and_its_late_rows_show_something(tour):
    namespace, printed = tour
    s, hourly, late = namespace["s"], namespace["hourly"], namespace["late"]
    assert [(r.user, r.cTime.strftime("%H:%M:%S")) for r in s.df.where("late").orderBy("seq").collect()] == [
        ("Liz", "13:30:00"), ("Liz", "13:59:59")]
    assert [(r.user, r.url) for r in hourly.get_side_output(late).collect()] == [("Liz", "./checkout")]
    assert namespace["vshape"].count() == 1


def test_the_tour_prints_readable_tables(tour):
    _, printed = tour
    assert "..." not in printed, "a column was truncated: show(truncate=False)"
    assert not re.search(r"\b1[67]\d{11}\b", printed), "a time printed as epoch milliseconds"
    assert "2024-01-01 13:59:59" in printed and "2011-04-01 10:00:04" in printed


def test_the_viz_calls_build_charts():
    """The tour's kit.viz lines are the expressions a notebook cell would draw."""
    calls = [line for block in tour_blocks() for line in block.splitlines() if line.startswith("kit.viz.")]
    assert len(calls) == 2 and all("# draws" in line for line in calls)


def test_a_viz_call_returns_an_altair_chart(tour):
    namespace, _ = tour
    chart = eval("kit.viz.stream_timeline(s, key='user')", namespace)
    assert isinstance(chart, alt.TopLevelMixin)
