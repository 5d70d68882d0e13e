"""``python -m kit.tools.demo --store``: the outputs a notebook keeps, for reading it before running it.

nbval compares a fresh run's outputs with the stored ones, every mimetype but images and
widget views: what ``stored`` adds must be PNGs only, and leave the rest byte for byte.
"""

import base64
import copy
import json
import re
import zlib
from pathlib import Path

import altair as alt
import nbformat
import pandas as pd
import pytest

import kit.viz  # noqa: F401  (the "kit" renderer)
from kit.tools import demo

VEGA = "application/vnd.vega.v5+json"
VIEW = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def chart_output(n: int, title: str = "points"):
    data, metadata = alt.Chart(pd.DataFrame({"x": range(n)}), title=title).mark_point().encode(
        x="x")._repr_mimebundle_()
    return nbformat.v4.new_output("display_data", data=data, metadata=metadata)


def model(name: str, **state) -> dict:
    return {"model_name": name, "model_module": "@jupyter-widgets/controls", "model_module_version": "2.0.0",
            "state": {"_model_name": name, **state}}


def executed_notebook() -> nbformat.NotebookNode:
    """A notebook as nbclient leaves it: a chart, then a bound widget (kit.widgets.Bound's
    shape: a box of the controls' box, the status line and the output area)."""
    names = ["bound", "controls", "slider", "status", "output", "layout"]
    ids = {k: f"{i:032x}" for i, k in enumerate(names, 7)}
    ref = {k: f"IPY_MODEL_{v}" for k, v in ids.items()}
    state = {
        ids["bound"]: model("VBoxModel", children=[ref["controls"], ref["status"], ref["output"]]),
        ids["controls"]: model("VBoxModel", children=[ref["slider"]]),
        ids["slider"]: model("IntSliderModel", description="delay (min)", value=0, layout=ref["layout"]),
        ids["layout"]: model("LayoutModel", display=None),
        ids["status"]: model("HTMLModel", value=""),
        ids["output"]: model("OutputModel", outputs=[dict(chart_output(3, "in the widget"))]),
    }
    view = nbformat.v4.new_output("execute_result", execution_count=2, data={
        VIEW: {"model_id": ids["bound"], "version_major": 2, "version_minor": 0},
        "text/plain": "bind(<lambda>, delay=0)"})
    cells = [nbformat.v4.new_code_cell("chart(4)", outputs=[chart_output(4)], execution_count=1),
             nbformat.v4.new_code_cell("bind(...)", outputs=[view], execution_count=2),
             nbformat.v4.new_code_cell("x = 1", execution_count=3)]
    for cell in cells:
        cell.metadata["execution"] = {"iopub.status.busy": "2026-11-22T04:44:44.047180Z"}
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata.widgets = {STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    nb.metadata.kernelspec = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return nb


def png(data: str) -> bytes:
    raw = base64.b64decode(data)
    assert raw.startswith(PNG_SIGNATURE)
    return raw


@pytest.fixture(scope="module")
def before_after():
    before = executed_notebook()
    return before, demo.stored(before, "example")


def test_every_chart_gets_a_png_and_nothing_nbval_compares_changes(before_after):
    before, after = before_after
    nbformat.validate(after)
    chart = after.cells[0].outputs[0]
    png(chart.data["image/png"])
    assert {k: v for k, v in chart.data.items() if k != "image/png"} == before.cells[0].outputs[0].data
    assert chart.metadata == before.cells[0].outputs[0].metadata
    view = after.cells[1].outputs[0]
    assert view.data["text/plain"] == "bind(<lambda>, delay=0)"
    assert set(view.data) == {VIEW, "text/plain", "image/png"}
    state = after.metadata.widgets[STATE]["state"]
    output = next(m for m in state.values() if m["model_name"] == "OutputModel")
    png(output["state"]["outputs"][0]["data"]["image/png"])   # the chart inside the widget too


def test_the_widget_shows_a_picture_of_its_first_state_and_says_run_me(before_after, monkeypatch):
    _, after = before_after
    drawn = []
    monkeypatch.setattr(demo, "_png", lambda spec, line=None: drawn.append((spec, line)) or "")
    state = after.metadata.widgets[STATE]["state"]
    demo._widget_png(after.cells[1].outputs[0].data[VIEW]["model_id"], state)
    ((spec, line),) = drawn
    assert demo.STATIC_LINE in line.lower()
    titled = demo._with_line(spec, line)
    assert titled["title"]["subtitle"][0] == line and titled["title"]["text"] == "in the widget"
    status = next(m for m in state.values() if m["model_name"] == "HTMLModel")
    assert demo.STATIC_LINE in status["state"]["value"].lower()


def test_a_line_goes_under_any_title():
    assert demo._with_line({"title": "t"}, "l")["title"] == {"text": "t", "subtitle": ["l"],
                                                              "anchor": "start"}
    assert demo._with_line({}, "l")["title"] == {"text": "l", "anchor": "start"}
    assert demo._with_line({"title": {"text": "t", "subtitle": "s"}}, "l")["title"]["subtitle"] == ["l", "s"]


def test_the_pngs_are_recompressed_not_redrawn():
    raw = png(demo._png(chart_output(5).data[VEGA]))
    import vl_convert as vlc

    original = vlc.vega_to_png(chart_output(5).data[VEGA], scale=1)

    def pixels(data: bytes) -> bytes:
        chunks, pos = [], 8
        while pos < len(data):
            size = int.from_bytes(data[pos:pos + 4], "big")
            chunks.append((data[pos + 4:pos + 8], data[pos + 8:pos + 8 + size]))
            pos += 12 + size
        return zlib.decompress(b"".join(d for kind, d in chunks if kind == b"IDAT"))

    assert pixels(raw) == pixels(original) and len(raw) < len(original)


def test_widget_ids_are_stable_and_still_connected(before_after):
    before, after = before_after
    state = after.metadata.widgets[STATE]["state"]
    refs = set(re.findall(r"IPY_MODEL_([0-9a-f]{32})", json.dumps(state)))
    assert refs and refs <= set(state)
    assert after.cells[1].outputs[0].data[VIEW]["model_id"] in state
    assert not set(state) & set(before.metadata.widgets[STATE]["state"])
    # a second run's random ids give the same stored notebook, and storing again changes nothing
    other = copy.deepcopy(before)
    text = nbformat.writes(other)
    for i, old in enumerate(sorted(other.metadata.widgets[STATE]["state"])):
        text = text.replace(old, f"{i + 100:032x}")
    again = demo.stored(nbformat.reads(text, as_version=4), "example")
    assert nbformat.writes(again) == nbformat.writes(after)
    assert nbformat.writes(demo.stored(after, "example")) == nbformat.writes(after)


def test_no_execution_times_and_one_kernelspec(before_after):
    _, after = before_after
    assert all("execution" not in cell.metadata for cell in after.cells)
    assert after.metadata.kernelspec == demo.KERNELSPEC


def test_store_runs_a_notebook_in_place_and_leaves_a_failing_one(tmp_path, capsys):
    good, bad = tmp_path / "a.ipynb", tmp_path / "b.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import altair as alt, ipywidgets as w, pandas as pd\n"
        "import kit.viz\nfrom kit.widgets import bind\n"
        "def f(n):\n"
        "    return alt.Chart(pd.DataFrame({'x': range(n)})).mark_point().encode(x='x')\n"
        "bind(f, n=w.IntSlider(value=2, description='points'))")]), good)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 / 0")]), bad)
    untouched = bad.read_text()

    assert demo.main(["--store", str(tmp_path)]) == 1
    assert "b.ipynb: cell 1 (1 / 0) failed: ZeroDivisionError" in capsys.readouterr().err
    assert bad.read_text() == untouched
    nb = nbformat.read(good, as_version=4)
    (out,) = nb.cells[0].outputs
    png(out.data["image/png"])
    state = nb.metadata.widgets[STATE]["state"]
    status = [m for m in state.values() if m["model_name"] == "HTMLModel"]
    assert [demo.STATIC_LINE in m["state"]["value"].lower() for m in status] == [True]


# -- the notebooks in notebooks/ as they are stored ------------------------------------

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_notebooks_are_stored_for_reading_before_running(path):
    """Stored by `make notebooks` (python -m kit.tools.demo --store notebooks): run it after
    changing a notebook or what it draws."""
    nb = nbformat.read(path, as_version=4)
    outputs = [out for cell in nb.cells for out in cell.get("outputs", [])]
    assert outputs, f"{path.name} has no stored outputs"
    for out in outputs:
        data = out.get("data") or {}
        if VEGA in data or VIEW in data:
            png(data["image/png"])
    state = nb.metadata.get("widgets", {}).get(STATE, {}).get("state", {})
    views = [out.data[VIEW]["model_id"] for out in outputs if VIEW in (out.get("data") or {})]
    assert all(v in state for v in views)
    statuses = [m["state"]["value"] for m in state.values() if m["model_name"] == "HTMLModel"]
    assert statuses.count(demo.STATUS_LINE) == len(set(views)), "one status line per widget, shown once or again"
    assert all("execution" not in cell.metadata for cell in nb.cells)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_checks_sit_in_collapsed_check_cells_after_the_examples(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    checks = [c for c in code if "check" in c.metadata.get("tags", [])]
    for cell in code:
        if cell in checks:
            assert cell.metadata.get("jupyter", {}).get("source_hidden") is True, cell.source[:80]
            assert "expect(" in cell.source and not cell.outputs, cell.source[:80]
        else:
            assert not re.search(r"^\s*assert\b|\bexpect\(", cell.source, re.M), \
                f"a check in a teaching cell of {path.name}: {cell.source[:120]}"
