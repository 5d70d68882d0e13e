"""Headless Chromium: the first notebook in real JupyterLab (run it, move the slider, see
the chart change; no cell errors, nothing fetched from beyond 127.0.0.1), and the HTML
of ``python -m kit.demo`` (charts drawn with no network).

Chromium is Debian's package (``sh tests/browser/ensure-chromium.sh``) driven by
Playwright's Python API; no browser is downloaded. Without Chromium the test is skipped,
except when ``CI=true``, where it fails.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import altair as alt
import nbformat
import pandas as pd
import pytest

import kit.viz  # noqa: F401  (the "kit" renderer)
from kit.demo import to_html

pytestmark = [pytest.mark.browser, pytest.mark.timeout(150)]

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "00_time_and_watermarks.ipynb"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LOCAL = {"127.0.0.1"}

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


def _unavailable(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the browser test must run)")
    pytest.skip(reason)


def _chromium() -> str | None:
    for path in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if path and os.access(path, os.X_OK):
            return path
    return None


@pytest.fixture
def chromium() -> str:
    path = _chromium()
    if path is None:
        _unavailable("Debian's chromium is not installed (sh tests/browser/ensure-chromium.sh)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _unavailable("the playwright Python package is not installed")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    """JupyterLab on 127.0.0.1 over a temporary copy of notebooks/: (base url, token)."""
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    path = tmp_path / "notebooks" / NOTEBOOK
    if path.exists():  # no stored outputs: every output seen is fresh, every prompt "[ ]"
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        nbformat.write(nb, path)
    port, token = _free_port(), secrets.token_hex(16)
    home = tmp_path / "jupyter"
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"),
               JUPYTER_DATA_DIR=str(home / "data"), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               IPYTHONDIR=str(home / "ipython"))
    log = open(tmp_path / "jupyterlab.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={tmp_path / 'notebooks'}",
         f"--LabApp.workspaces_dir={home / 'workspaces'}", "--LabApp.extension_manager=readonly",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_server(base, token, server, tmp_path / "jupyterlab.log")
        yield base, token
    finally:
        try:  # shuts down the kernels, then the server
            _request(f"{base}/api/shutdown", token, method="POST")
            server.wait(timeout=15)
        except Exception:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        log.close()


def _request(url: str, token: str, method: str = "GET"):
    req = urllib.request.Request(url, method=method, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=5) as response:
        return response.read()


def _wait_for_server(base: str, token: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"JupyterLab exited early:\n{log.read_text()[-3000:]}")
        try:
            json.loads(_request(f"{base}/api/status", token))
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"JupyterLab did not answer in 60 s:\n{log.read_text()[-3000:]}")


def test_notebook_runs_and_slider_redraws_the_chart(chromium, lab, tmp_path):
    from playwright.sync_api import sync_playwright

    assert (ROOT / "notebooks" / NOTEBOOK).exists(), f"notebooks/{NOTEBOOK} is missing"
    base, token = lab
    outside: list[str] = []

    def only_local(route):
        url = route.request.url
        if url.startswith("data:") or urlsplit(url).hostname in LOCAL:
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=chromium, args=CHROMIUM_ARGS,
            headless=True, viewport={"width": 1400, "height": 1000})
        try:
            browser.route("**/*", only_local)
            page = browser.pages[0] if browser.pages else browser.new_page()
            page.on("websocket", lambda ws: urlsplit(ws.url).hostname in LOCAL
                    or outside.append(ws.url))
            page.set_default_timeout(60_000)
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
        finally:
            browser.close()
    assert outside == [], f"fetched from outside 127.0.0.1: {outside}"


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
