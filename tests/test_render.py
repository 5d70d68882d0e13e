"""The "kit" altair renderer and the offline HTML of ``python -m kit.tools.demo``."""

import json
import re

import altair as alt
import nbformat
import pandas as pd
import pytest

import kit.viz  # noqa: F401  (enables the renderer)
from kit.tools import demo
from kit.viz import render

VEGA = render.MIMETYPE


def chart(n: int = 4, title: str = "clicks") -> alt.Chart:
    df = pd.DataFrame({"seq": range(n), "t": pd.date_range("2024-01-01 12:00", periods=n, freq="min"),
                       "user": ["Mary", "Bob"] * (n // 2) + ["Liz"] * (n % 2)})
    pick = alt.selection_point(fields=["user"], bind="legend")
    return (alt.Chart(df, title=title).mark_point()
            .encode(x="seq:Q", y="t:T", color="user:N", tooltip=["user:N", "t:T"],
                    opacity=alt.condition(pick, alt.value(1), alt.value(0.2)))
            .add_params(pick))


def test_kit_is_the_active_renderer():
    assert alt.renderers.active == "kit"


def test_a_chart_displays_as_a_vega_spec_and_one_line_of_text():
    data, metadata = chart()._repr_mimebundle_()
    assert set(data) == {VEGA, "text/plain"}
    assert data["text/plain"] == "<kit chart 'clicks'>"
    spec = data[VEGA]
    assert spec["$schema"].startswith("https://vega.github.io/schema/vega/")
    assert spec["marks"] and spec["data"]
    assert '"tooltip"' in json.dumps(spec["marks"]), "tooltips are kept"
    options = metadata[VEGA]["embed_options"]
    assert options["actions"]["editor"] is False  # no links to the online Vega editor
    assert options["renderer"] == "svg"


def test_outputs_are_byte_identical_across_runs():
    first = json.dumps(chart()._repr_mimebundle_())
    alt.Chart(pd.DataFrame({"x": [1]})).mark_bar().encode(x="x").add_params(alt.selection_interval())
    assert json.dumps(chart()._repr_mimebundle_()) == first


def test_generated_names_are_numbered_in_order_and_data_is_untouched():
    spec = {
        "datasets": {"d": [{"x": 1, "name": "param_7"}]},
        "params": [{"name": "param_7", "select": "point", "views": ["view_12"]},
                   {"name": "param_0123456789abcdef", "select": "interval"}],
        "name": "view_12",
        "encoding": {"color": {"condition": {"param": "param_7", "value": "red"},
                               "value": "grey"}},
        "transform": [{"filter": "datum.x > param_0123456789abcdef_x[0]"}],
    }
    assert render.stable_names(spec) == {
        "datasets": {"d": [{"x": 1, "name": "param_7"}]},
        "params": [{"name": "param_1", "select": "point", "views": ["view_1"]},
                   {"name": "param_2", "select": "interval"}],
        "name": "view_1",
        "encoding": {"color": {"condition": {"param": "param_1", "value": "red"},
                               "value": "grey"}},
        "transform": [{"filter": "datum.x > param_2_x[0]"}],
    }


def test_the_compiled_spec_uses_the_stable_names():
    signals = {s["name"] for s in chart()._repr_mimebundle_()[0][VEGA]["signals"]}
    assert "param_1" in signals
    assert not any(re.search(r"param_[0-9a-f]{16}", name) for name in signals)


@pytest.mark.parametrize("schema, version", [
    ("https://vega.github.io/schema/vega-lite/v6.4.1.json", "6.4"),
    ("https://vega.github.io/schema/vega-lite/v5.20.1.json", "5.20"),
    ("https://vega.github.io/schema/vega-lite/v5.9.0.json", "5.8"),
    ("https://vega.github.io/schema/vega-lite/v2.json", None),
    ("", None),
])
def test_the_spec_is_compiled_with_the_vega_lite_it_was_written_for(schema, version):
    assert render._vl_version(schema) == version


def test_nothing_in_a_chart_output_loads_from_the_network():
    text = json.dumps(chart()._repr_mimebundle_())
    assert "<script" not in text and "src=" not in text


# -- the HTML of `python -m kit.tools.demo` ------------------------------------------------

def _notebook_with_two_charts_and_a_widget() -> nbformat.NotebookNode:
    """An executed notebook as nbclient leaves it (no kernel needed to build it)."""
    def display(obj):
        data, metadata = obj._repr_mimebundle_()
        return nbformat.v4.new_output("display_data", data=data, metadata=metadata)

    widget_out = dict(display(chart(3, "in the widget")))
    state = {
        "box": {"state": {"_model_name": "VBoxModel", "children": ["IPY_MODEL_s", "IPY_MODEL_o"]}},
        "s": {"state": {"_model_name": "IntSliderModel", "description": "delay", "value": 7}},
        "o": {"state": {"_model_name": "OutputModel", "outputs": [widget_out]}},
    }
    view = nbformat.v4.new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": {"model_id": "box", "version_major": 2,
                                                     "version_minor": 0},
        "text/plain": "bind(f, delay=7)"})
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Two charts"),
        nbformat.v4.new_code_cell("chart(4)", outputs=[display(chart(4))]),
        nbformat.v4.new_code_cell("chart(5)", outputs=[display(chart(5, "second"))]),
        nbformat.v4.new_code_cell("bind(...)", outputs=[view]),
    ])
    nb.metadata.widgets = {"application/vnd.jupyter.widget-state+json": {"state": state}}
    return nb


def test_demo_html_draws_charts_offline_with_the_javascript_inlined_once():
    html = demo.to_html(_notebook_with_two_charts_and_a_widget(), title="two")
    assert html.count('class="kit-vega"') == 3  # two charts and the widget's
    assert html.count("window.vegaEmbed=") == 1  # one copy of vega for the page
    assert not re.search(r"<script[^>]*\bsrc=", html), "every script is inline"
    assert not re.search(r"<link[^>]*href=[\"']?(https?:)?//", html), "no remote stylesheet"
    assert "require.min.js" not in html and "mathjax" not in html.lower()
    assert "<b>delay</b> 7" in html  # the widget's control, as a snapshot
    assert "in the widget" in html


def test_demo_html_without_charts_carries_no_vega():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1", outputs=[
        nbformat.v4.new_output("execute_result", data={"text/plain": "1"}, execution_count=1)])])
    assert "vegaEmbed" not in demo.to_html(nb)


def test_demo_runs_notebooks_and_names_the_failing_cell(tmp_path, capsys):
    src, out = tmp_path / "notebooks", tmp_path / "build"
    src.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(
            "import altair as alt, ipywidgets as w, pandas as pd\n"
            "import kit.viz\nfrom kit.widgets import bind\n"
            "def f(n):\n"
            "    return alt.Chart(pd.DataFrame({'x': range(n)})).mark_point().encode(x='x')\n"
            "bind(f, n=w.IntSlider(value=2, description='points'))"),
        nbformat.v4.new_code_cell("f(3)"),
    ]), src / "a_good.ipynb")
    nbformat.write(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("text"), nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("1 / 0"), nbformat.v4.new_code_cell("never = 1"),
    ]), src / "b_bad.ipynb")

    assert demo.main([str(src), str(out)]) == 1
    err = capsys.readouterr().err
    assert "b_bad.ipynb: cell 3 (1 / 0) failed: ZeroDivisionError" in err
    assert "a_good" not in err
    good = (out / "a_good.html").read_text()
    assert good.count('class="kit-vega"') == 2 and "<b>points</b> 2" in good
    assert not re.search(r"<script[^>]*\bsrc=", good)
    assert "ZeroDivisionError" in (out / "b_bad.html").read_text()


def test_spec_of_makes_each_frame_into_data_once_and_gives_altairs_spec(monkeypatch):
    df = pd.DataFrame({"x": [1, 2, 3], "y": [2.5, None, 1.0], "k": ["a", None, "b"]})
    base = alt.Chart(df).encode(x="x:Q", y="y:Q", x2="x")   # untyped x2: altair infers from the frame
    chart = alt.vconcat(alt.layer(base.mark_point(), base.mark_line(), alt.Chart(df.copy()).mark_text()
                                  .encode(x="x:Q", text="k:N")), base.mark_bar())
    made = []
    real = alt.data_transformers.get()
    alt.data_transformers.register("counting", lambda data, **kw: made.append(id(data)) or real(data, **kw))
    with alt.data_transformers.enable("counting"):
        assert render.spec_of(chart) == chart.to_dict(validate=False, context={"pre_transform": False})
        made.clear()
        render.spec_of(chart)
    assert len(made) == 2, "two frames, four layers: each frame made into data once"
    assert alt.data_transformers.active == "default" and "kit-frames-once" not in alt.data_transformers.names()
    with alt.data_transformers.enable("default", max_rows=2), pytest.raises(alt.MaxRowsError):
        render.spec_of(chart)                                   # the active transformer's options hold
    alt.data_transformers.register("counting", None)
