"""Headless Chromium: the notebooks as a reader finds them in a checkout, opened in JupyterLab
without running them.

- untrusted (a notebook from a checkout is): every chart is drawn, every widget shows the
  picture of its first state ``python -m kit.tools.demo --store`` made (the line "run the notebook
  to move the controls" is drawn in it), not the text ``bind(<lambda>, delay=0)``; and
  opening the notebook does not mark it modified (JupyterLab's vega renderer adds a PNG to a
  chart output that has none);
- trusted (a notebook the user saved): the widgets are drawn from their saved state, say
  "run the notebook to move the controls", hide the controls that do nothing for the first
  choice, and cut no label.

Same rules as ``test_browser.py`` (``browsing.py``): Debian's Chromium driven by Playwright's Python API,
skipped without it unless ``CI=true``; nothing fetched from beyond 127.0.0.1.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from browsing import ROOT, chromium, jupyterlab, local_page  # noqa: F401 (a fixture)
from kit.tools.demo import STATIC_LINE

pytestmark = [pytest.mark.browser, pytest.mark.timeout(420)]

VEGA = "application/vnd.vega.v5+json"
VIEW = "application/vnd.jupyter.widget-view+json"
TRUSTED = ("01_click_windows.ipynb", "03_temporal_joins.ipynb")   # hidden controls; long labels

# JS run in the page (JupyterLab exposes its app as window.jupyterapp with expose_app_in_browser).
NOTEBOOK = "() => window.jupyterapp.shell.currentWidget"
SHOW_CELL = f"async (i) => {{ const nb = ({NOTEBOOK})().content; await nb.scrollToItem(i, 'center'); }}"
CELL_OUTPUTS = f"""(i) => {{
  const cell = ({NOTEBOOK})().content.widgets[i];
  return [...cell.node.querySelectorAll('.jp-OutputArea-output')].map(o => ({{
    mime: o.getAttribute('data-mime-type'), text: o.innerText.slice(0, 300),
    svg: o.querySelectorAll('.vega-embed svg.marks').length,
    img: [...o.querySelectorAll(':scope > img')].map(img => img.src.split(',').pop()),
    widget: o.querySelectorAll('.jupyter-widgets').length}}));
}}"""
DIRTY = f"() => ({NOTEBOOK})().context.model.dirty"
ERRORS = """() => [...document.querySelectorAll(
    '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"],' +
    '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
  .map(o => o.textContent.trim().slice(0, 300))"""
WIDGET = f"""(i) => {{
  const cell = ({NOTEBOOK})().content.widgets[i];
  const shown = (e) => e.offsetParent !== null;
  const labels = [...cell.node.querySelectorAll('.widget-label')].filter(shown);
  return {{
    text: cell.node.querySelector('.jp-OutputArea-output').innerText,
    labels: labels.map(l => l.textContent),
    cut: labels.filter(l => l.scrollWidth > l.clientWidth + 1).map(l => l.textContent),
    charts: cell.node.querySelectorAll('.jupyter-widgets .vega-embed svg.marks').length,
  }};
}}"""


@pytest.fixture(scope="module")
def untrusted_lab(tmp_path_factory):
    yield from jupyterlab(tmp_path_factory.mktemp("untrusted"))


@pytest.fixture(scope="module")
def trusted_lab(tmp_path_factory):
    yield from jupyterlab(tmp_path_factory.mktemp("trusted"), trust=TRUSTED)


def _stored(name: str):
    """(index, outputs) of each code cell of the stored notebook with outputs."""
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    return [(i, c.outputs) for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.outputs]


@pytest.fixture(scope="module")
def page(chromium, tmp_path_factory):
    """One page for the module's tests: JupyterLab loads once per lab, each test opens its
    notebook there and closes it after."""
    with local_page(chromium, tmp_path_factory.mktemp("chromium-profile")) as page:
        yield page


@pytest.fixture
def browser(page):
    yield page
    page.evaluate("() => window.jupyterapp?.shell.currentWidget?.dispose()")   # closed unsaved, unasked


def _open(page, base: str, token: str, name: str) -> None:
    if page.url.startswith(f"{base}/lab") and page.evaluate("() => !!window.jupyterapp"):
        page.evaluate("async (path) => { await window.jupyterapp.commands.execute('docmanager:open', {path}); }", name)
    else:
        page.goto(f"{base}/lab/tree/{name}?token={token}")
    page.wait_for_function(f"() => window.jupyterapp && ({NOTEBOOK})()?.context?.path === {name!r}"
                           f" && ({NOTEBOOK})().content.widgets.length > 0")
    page.wait_for_function(f"() => ({NOTEBOOK})().context.isReady")


def _show(page, index: int, ready: str, what: str) -> list[dict]:
    """Scroll cell ``index`` into view and wait until ``ready(outputs)`` (JS) holds; its outputs."""
    from playwright.sync_api import TimeoutError

    page.evaluate(SHOW_CELL, index)
    try:
        page.wait_for_function(f"(i) => {{ const outputs = ({CELL_OUTPUTS})(i); return {ready}; }}",
                               arg=index, timeout=30_000)
    except TimeoutError:
        shown = [{**o, "img": [i[:20] + "..." for i in o["img"]]} for o in page.evaluate(CELL_OUTPUTS, index)]
        pytest.fail(f"cell {index}: no {what} in 30 s; it shows {shown}")
    return page.evaluate(CELL_OUTPUTS, index)


@pytest.mark.parametrize("name", ["00_time_and_watermarks.ipynb", "01_click_windows.ipynb",
                                  "02_ticker_patterns.ipynb", "03_temporal_joins.ipynb",
                                  "04_dynamic_tables.ipynb", "05_sql_engine.ipynb", "06_live.ipynb"])
def test_an_unrun_notebook_shows_its_charts_and_widgets_and_stays_unmodified(untrusted_lab, browser, name):
    base, token = untrusted_lab
    page = browser
    _open(page, base, token, name)
    charts = widgets = 0
    for index, outputs in _stored(name):
        for out in outputs:
            data = out.get("data") or {}
            if VIEW in data:
                widgets += 1
                shown = _show(page, index, "outputs.some(o => o.img.length)", "picture of the widget")
                assert [o["img"] for o in shown if o["img"]] == [[data["image/png"]]], \
                    f"cell {index}: the widget is not shown as the picture stored with it"
                assert not any("bind(" in o["text"] for o in shown), f"cell {index}: {shown}"
            elif VEGA in data:
                charts += 1
                _show(page, index, "outputs.some(o => o.svg > 0)", "chart drawn")
    assert charts + widgets > 0
    assert page.evaluate(ERRORS) == []
    page.wait_for_timeout(1000)   # a renderer that changes the model does so once drawn
    assert page.evaluate(DIRTY) is False, f"{name} is marked modified by opening it"


@pytest.mark.parametrize("name", TRUSTED)
def test_a_trusted_notebook_draws_its_widgets_from_their_saved_state(trusted_lab, browser, name):
    base, token = trusted_lab
    page = browser
    _open(page, base, token, name)
    widget_cells = [i for i, outputs in _stored(name) if any(VIEW in (o.get("data") or {}) for o in outputs)]
    assert widget_cells
    for index in widget_cells:
        _show(page, index, "outputs.some(o => o.widget > 0 && o.svg > 0)", "widget with its chart")
        widget = page.evaluate(WIDGET, index)
        assert STATIC_LINE in widget["text"].lower(), widget["text"][:300]
        assert widget["charts"] >= 1
        assert widget["labels"] and widget["cut"] == [], f"labels cut: {widget['cut']}"
        if name == "01_click_windows.ipynb":   # tumbling: no slide, no gap
            assert "slide (min)" not in widget["labels"] and "gap (min)" not in widget["labels"]
            assert "size (min)" in widget["labels"]
    assert page.evaluate(ERRORS) == []
    page.wait_for_timeout(1000)
    assert page.evaluate(DIRTY) is False, f"{name} is marked modified by opening it"


def test_05s_charts_step_by_keys_and_fit_in_jupyterlab(untrusted_lab, browser):
    """Notebook 05 as a reader meets it: the optimizer chart's number box steps the rules
    with the arrow keys (JupyterLab takes a focused slider's arrow keys to move between
    cells), a press on its strip under the title too; the plan pair with both sinks fits the
    output area, legend and all."""
    name = "05_sql_engine.ipynb"
    base, token = untrusted_lab
    page = browser
    _open(page, base, token, name)

    def cell_with(text):
        return next(i for i, outputs in _stored(name) for o in outputs if text in json.dumps((o.get("data") or {}).get(VEGA)))

    rules = cell_with("kit_steps_marks")
    _show(page, rules, "outputs.some(o => o.svg > 0)", "chart drawn")
    node = page.evaluate_handle(f"(i) => ({NOTEBOOK})().content.widgets[i].node", rules)
    caption = ("(node) => [...node.querySelectorAll('svg.marks text')].map(t => t.textContent)"
               ".find(t => /^step \\d+ of/.test(t))")
    assert page.evaluate(caption, node).startswith("step 0 of")
    box = node.query_selector(".vega-bindings input[type=number]")
    box.focus()
    box.press("ArrowUp")
    box.press("ArrowUp")
    page.wait_for_function(f"(node) => ({caption})(node).startsWith('step 2 of')", arg=node)
    assert page.evaluate(f"() => ({NOTEBOOK})().content.activeCellIndex") == rules, "the keys moved the notebook"
    node.query_selector_all("svg.marks g.kit_steps_marks path")[5].click()
    page.wait_for_function(f"(node) => ({caption})(node).startsWith('step 5 of')", arg=node)
    assert box.input_value() == "5"

    pair = cell_with("into an upsert sink")
    _show(page, pair, "outputs.some(o => o.svg > 0)", "chart drawn")
    sizes = page.evaluate(f"""(i) => {{
      const out = ({NOTEBOOK})().content.widgets[i].node.querySelector('.jp-OutputArea-output');
      return [out.querySelector('svg.marks').getBoundingClientRect().width, out.getBoundingClientRect().width];
    }}""", pair)
    assert sizes[0] <= sizes[1], f"the plan pair ({sizes[0]} px) is wider than its output area ({sizes[1]} px)"
    assert page.evaluate(ERRORS) == []
