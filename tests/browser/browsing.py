"""What the browser tests share: Debian's Chromium driven by Playwright's Python API (no
browser downloaded; skipped without it, except when ``CI=true``, where it fails: the
``chromium`` fixture, which a test module imports), JupyterLab on 127.0.0.1 over a copy of
``notebooks/``, and a page that fetches nothing from beyond 127.0.0.1."""

from __future__ import annotations

import contextlib
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

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LOCAL = {"127.0.0.1"}


def unavailable(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the browser test must run)")
    pytest.skip(reason)


def chromium_path() -> str | None:
    for path in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if path and os.access(path, os.X_OK):
            return path
    return None


@pytest.fixture(scope="session")
def chromium() -> str:
    path = chromium_path()
    if path is None:
        unavailable("Debian's chromium is not installed (sh tests/browser/ensure-chromium.sh)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("the playwright Python package is not installed")
    return path


def jupyterlab(tmp: Path, strip: tuple[str, ...] = (), trust: tuple[str, ...] = ()):
    """JupyterLab on 127.0.0.1 over a copy of notebooks/ in ``tmp``, the notebooks named in
    ``strip`` without their stored outputs (every output seen is fresh, every prompt "[ ]")
    and those in ``trust`` signed with its key (as if the user had saved them) (``serve``).
    Yields (base url, token); then shuts the kernels and the server down."""
    if chromium_path() is None:   # before starting a server for nothing
        unavailable("Debian's chromium is not installed (sh tests/browser/ensure-chromium.sh)")
    shutil.copytree(ROOT / "notebooks", tmp / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for name in strip:
        path = tmp / "notebooks" / name
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        nbformat.write(nb, path)
    for name in trust:
        subprocess.run([sys.executable, "-m", "jupyter", "trust", str(tmp / "notebooks" / name)],
                       env=_jupyter_env(tmp), check=True, capture_output=True)
    with serve(tmp) as (base, token):
        yield base, token


def _jupyter_env(tmp: Path) -> dict:
    """The environment of a Jupyter of its own, its files in ``tmp/jupyter``."""
    home = tmp / "jupyter"
    return dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"),
                JUPYTER_RUNTIME_DIR=str(home / "runtime"), IPYTHONDIR=str(home / "ipython"))


@contextlib.contextmanager
def serve(tmp: Path):
    """JupyterLab on 127.0.0.1 over ``tmp/notebooks`` (its settings and log in ``tmp``), its
    app exposed to the page as ``window.jupyterapp`` (to run on past a failed cell). Yields
    (base url, token); then shuts the kernels and the server down."""
    port, token = _free_port(), secrets.token_hex(16)
    log = open(tmp / "jupyterlab.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp / 'notebooks'}",
         f"--LabApp.workspaces_dir={tmp / 'jupyter' / 'workspaces'}", "--LabApp.extension_manager=readonly",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.expose_app_in_browser=True"],
        env=_jupyter_env(tmp), stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_server(base, token, server, tmp / "jupyterlab.log")
        yield base, token
    finally:
        try:  # shuts down the kernels, then the server
            request(f"{base}/api/shutdown", token, method="POST")
            server.wait(timeout=15)
        except Exception:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        log.close()


@contextlib.contextmanager
def local_page(chromium: str, profile: Path):
    """A Chromium page (a persistent profile in ``profile``) that fetches from 127.0.0.1 and
    data: URLs only; on leaving, fails if anything reached for another host."""
    from playwright.sync_api import sync_playwright

    outside: list[str] = []

    def only_local(route):
        url = route.request.url
        if url.startswith("data:") or urlsplit(url).hostname in LOCAL:
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=chromium, args=CHROMIUM_ARGS, headless=True,
            viewport={"width": 1400, "height": 1000})
        try:
            context.route("**/*", only_local)
            page = context.pages[0] if context.pages else context.new_page()
            page.on("websocket", lambda ws: urlsplit(ws.url).hostname in LOCAL or outside.append(ws.url))
            page.set_default_timeout(60_000)
            yield page
        finally:
            context.close()
    assert outside == [], f"fetched from outside 127.0.0.1: {outside}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(url: str, token: str, method: str = "GET", timeout: float = 5):
    """A Jupyter server's answer to ``method url``, with ``token``."""
    req = urllib.request.Request(url, method=method, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=timeout) as response:
        return response.read()


def _wait_for_server(base: str, token: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"JupyterLab exited early:\n{log.read_text()[-3000:]}")
        try:
            json.loads(request(f"{base}/api/status", token))
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"JupyterLab did not answer in 60 s:\n{log.read_text()[-3000:]}")
