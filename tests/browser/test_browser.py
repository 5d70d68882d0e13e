"""Headless Chromium: the first notebook in real JupyterLab (run it, move the slider, see
the chart change; no cell errors, nothing fetched from beyond 127.0.0.1), and the HTML
of ``python -m kit.tools.demo`` (charts drawn with no network).

Chromium is Debian's package (``sh tests/browser/ensure-chromium.sh``) driven by
Playwright's Python API; no browser is downloaded. Without Chromium the test is skipped,
except when ``CI=true``, where it fails.
"""

from __future__ import annotations

from pathlib import Path

import altair as alt
import nbformat
import pandas as pd
import pytest

import kit.viz  # noqa: F401  (the "kit" renderer)
from browsing import CHROMIUM_ARGS, ROOT, chromium, jupyterlab, local_page  # noqa: F401 (a fixture)
from kit.tools.demo import to_html

pytestmark = [pytest.mark.browser, pytest.mark.timeout(150)]

NOTEBOOK = "00_time_and_watermarks.ipynb"

# JS run in the page.
PROMPTS = "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(p => p.textContent.trim())"
ERRORS = """() => [...document.querySelectorAll(
    '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"],' +
    '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
  .map(o => o.textContent.trim().slice(0, 300))"""
CHART = """(cell) => {
  const svg = cell.querySelector('.vega-embed svg.marks');
  const canvas = cell.querySelector('.vega-embed canvas');
  return svg ? svg.outerHTML : canvas ? canvas.toDataURL() : null;
}"""


@pytest.fixture
def lab(chromium, tmp_path):
    """JupyterLab over a copy of notebooks/, notebook 00 without its stored outputs."""
    yield from jupyterlab(tmp_path, strip=(NOTEBOOK,))


def test_notebook_runs_and_slider_redraws_the_chart(chromium, lab, tmp_path):
    assert (ROOT / "notebooks" / NOTEBOOK).exists(), f"notebooks/{NOTEBOOK} is missing"
    base, token = lab
    with local_page(chromium, tmp_path / "chromium-profile") as page:
        page.goto(f"{base}/lab/tree/{NOTEBOOK}?token={token}")
        page.wait_for_selector(".jp-NotebookPanel .jp-CodeCell")
        page.wait_for_function("() => /\\| Idle/.test(document.body.innerText)")  # kernel up
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        # done when every cell has run, or one failed (Run All stops there)
        page.wait_for_function(f"() => ({PROMPTS})().every(p => /^\\[\\d+\\]:$/.test(p))"
                               f" || ({ERRORS})().length > 0", timeout=90_000)
        assert page.evaluate(ERRORS) == [], "a cell shows an error"
        cell = page.locator(".jp-CodeCell", has=page.locator(".widget-slider")).first
        cell.locator(".vega-embed svg.marks, .vega-embed canvas").first.wait_for()
        before = cell.evaluate(CHART)
        assert before, "the widget shows no chart"

        handle = cell.locator(".widget-slider .noUi-handle").first
        readout = cell.locator(".widget-slider .widget-readout").first
        value = readout.inner_text()
        at_max = handle.get_attribute("aria-valuenow") == handle.get_attribute("aria-valuemax")
        handle.focus()
        handle.press("ArrowLeft" if at_max else "ArrowRight")
        page.wait_for_function(f"([cell, before]) => ({CHART})(cell) && ({CHART})(cell) !== before",
                               arg=[cell.element_handle(), before], timeout=30_000)
        assert readout.inner_text() != value, "the slider did not move"
        assert page.evaluate(ERRORS) == [], "an error appeared after moving the slider"


def test_demo_html_draws_its_charts_offline(chromium, tmp_path):
    from playwright.sync_api import sync_playwright

    def chart_output(n):
        data, metadata = alt.Chart(pd.DataFrame({"x": range(n)})).mark_point().encode(
            x="x", tooltip="x")._repr_mimebundle_()
        return nbformat.v4.new_output("display_data", data=data, metadata=metadata)

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("chart(3)", outputs=[chart_output(3)]),
        nbformat.v4.new_code_cell("chart(5)", outputs=[chart_output(5)])])
    page_file = tmp_path / "demo.html"
    page_file.write_text(to_html(nb, title="demo"), encoding="utf-8")

    requests, errors = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=chromium, args=CHROMIUM_ARGS,
            headless=True)
        try:
            page = browser.pages[0] if browser.pages else browser.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_file.as_uri())
            page.wait_for_function(
                "() => document.querySelectorAll('div.kit-vega svg.marks').length === 2",
                timeout=30_000)
            counts = page.evaluate("() => [...document.querySelectorAll('div.kit-vega svg.marks')]"
                                   ".map(svg => svg.querySelectorAll('.mark-symbol path').length)")
        finally:
            browser.close()
    assert counts == [3, 5]
    assert errors == []
    assert [u for u in requests if not u.startswith(("file:", "data:"))] == []


def test_a_saved_chart_draws_offline(chromium, tmp_path):
    from playwright.sync_api import sync_playwright

    chart = alt.Chart(pd.DataFrame({"x": range(4)})).mark_point().encode(x="x")
    page_file = Path(kit.viz.save(chart, tmp_path / "chart.html"))
    requests, errors = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.pages[0] if browser.pages else browser.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_file.as_uri())
            page.wait_for_function("() => document.querySelectorAll('svg.marks .mark-symbol path').length === 4",
                                   timeout=30_000)
        finally:
            browser.close()
    assert errors == []
    assert [u for u in requests if not u.startswith(("file:", "data:"))] == []


def test_a_rules_chart_steps_by_its_strip_and_its_box(chromium, tmp_path):
    """The optimizer chart's step: pressed on the strip under the title, dragged along it, or
    typed and stepped with the arrow keys in the number box under the chart."""
    from playwright.sync_api import sync_playwright

    e = kit.explain("SELECT t1.id, 1 + 2 + t1.value AS v FROM t1, t2 WHERE t1.id = t2.id AND t2.id < 1000 - 1",
                    t1=pd.DataFrame({"id": [1, 2, 3], "value": [10, 20, 30]}), t2=pd.DataFrame({"id": [1, 2]}))
    n = len(e.rules)
    page_file = Path(kit.viz.save(kit.viz.plan(e, "rules"), tmp_path / "rules.html"))
    caption = "() => [...document.querySelectorAll('svg.marks text')].map(t => t.textContent).find(t => /^step \\d+ of/.test(t))"
    with sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.pages[0] if browser.pages else browser.new_page()
            page.goto(page_file.as_uri())
            cells = page.locator("svg.marks g.kit_steps_marks path")
            cells.first.wait_for()
            box = page.locator(".vega-bindings input[type=number]")
            assert cells.count() == n + 1 and page.evaluate(caption).startswith(f"step 0 of {n}: ")
            assert box.bounding_box()["y"] > cells.first.bounding_box()["y"] + 300    # the box under the tree
            cells.nth(3).click()
            page.wait_for_function(f"() => ({caption})().startsWith('step 3 of')")
            assert box.input_value() == "3"
            cells.nth(1).hover()
            page.mouse.down()
            cells.nth(2).hover()
            cells.nth(5).hover()
            page.mouse.up()
            cells.nth(4).hover()                       # after the button is up, passing over changes nothing
            page.wait_for_function(f"() => ({caption})().startsWith('step 5 of')")
            assert box.input_value() == "5"
            box.focus()
            box.press("ArrowDown")
            page.wait_for_function(f"() => ({caption})().startsWith('step 4 of')")
            for _ in range(n + 3):                     # the box stops at the last step
                box.press("ArrowUp")
            page.wait_for_function(f"() => ({caption})().startsWith('step {n} of')")
            box.fill("99")
            box.dispatch_event("input")
            page.wait_for_function(f"() => ({caption})().startsWith('step {n} of')")   # typed past it: the last
        finally:
            browser.close()
