"""Run every notebook headless and write HTML copies whose charts draw offline.

    python -m kit.demo notebooks build

Each ``notebooks/*.ipynb`` runs top to bottom in a fresh kernel on this interpreter
(nbclient), from the notebooks directory, and becomes ``build/<name>.html``:

- chart outputs (Vega / Vega-Lite mimetypes) become ``<div class="kit-vega">`` drawn by
  one inlined copy of vega, vega-lite and vega-embed per page
  (:func:`kit.viz.render.html_page_script`);
- a widget output becomes a static snapshot: its controls' values, then what its output
  areas showed when the notebook finished (widgets need a kernel to move);
- nothing is loaded from the network: the template's require.js, MathJax, mermaid and
  widget-manager scripts (all from CDNs) are left out.

A failing cell stops its notebook; the others still run, and the command exits 1 after
naming every notebook and cell that failed (the HTML is written anyway, error included).
"""

from __future__ import annotations

import argparse
import copy
import html
import json
import os
import sys
import tempfile
from pathlib import Path

import jinja2
import nbformat
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbconvert import HTMLExporter

from kit.viz.render import html_page_script

__all__ = ["main", "run", "to_html"]

KERNEL = "kit-current-python"
CELL_TIMEOUT = 600  # seconds
_VEGA_PREFIXES = ("application/vnd.vega.", "application/vnd.vegalite.")
_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

# The lab template, minus every script it would fetch from a CDN, plus the vega bundle.
_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}{{ resources.kit_vega_script }}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""


class _CurrentPython(KernelSpecManager):
    """Every kernel name means ipykernel on this interpreter (not whatever a
    ``python3`` kernelspec on the machine points to)."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return KernelSpec(
            argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            display_name=f"Python ({sys.executable})", language="python",
        )


class NotebookFailed(Exception):
    """A cell raised (or timed out, or the kernel died)."""


def run(path: Path) -> nbformat.NotebookNode:
    """Execute the notebook at ``path`` in a fresh kernel; return it with outputs.

    Raises :class:`NotebookFailed` naming the cell; the executed notebook (outputs so
    far, error included) is its ``notebook`` attribute."""
    nb = nbformat.read(path, as_version=4)
    started: list[int] = []
    with tempfile.TemporaryDirectory(prefix="kit-demo-") as sockets:
        # Local sockets (not TCP) for the kernel's channels: nothing listens on the network.
        ipc = {} if os.name == "nt" else {"transport": "ipc", "ip": os.path.join(sockets, "k")}
        km = KernelManager(kernel_name=KERNEL, kernel_spec_manager=_CurrentPython(), **ipc)
        client = NotebookClient(
            nb, km=km, timeout=CELL_TIMEOUT, store_widget_state=True,
            resources={"metadata": {"path": str(path.parent)}},
            on_cell_execute=lambda cell, cell_index: started.append(cell_index),
        )
        try:
            client.execute()
        except Exception as exc:
            raise _failure(path, nb, started, exc) from exc
        finally:  # nbclient leaves a kernel it was given running
            if km.has_kernel:
                km.shutdown_kernel(now=False)
    return nb


def _failure(path: Path, nb, started: list[int], exc: Exception) -> "NotebookFailed":
    where = "kernel"
    if started:
        source = nb.cells[started[-1]].source.strip().splitlines()
        where = f"cell {started[-1] + 1}" + (f" ({source[0][:60]})" if source else "")
    if hasattr(exc, "ename"):  # nbclient's CellExecutionError
        reason = f"{exc.ename}: {exc.evalue}"
    else:  # timeout, dead kernel...
        reason = f"{type(exc).__name__}: {''.join(str(exc).strip().splitlines()[-1:])}"
    error = NotebookFailed(f"{path.name}: {where} failed: {reason}")
    error.notebook = nb
    return error


def to_html(nb: nbformat.NotebookNode, title: str = "") -> str:
    """HTML of an executed notebook, charts drawn offline, widgets as snapshots."""
    nb = copy.deepcopy(nb)
    state = nb.metadata.pop("widgets", {}).get(_WIDGET_STATE, {}).get("state", {})
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [_static(out, state) for out in cell.outputs]
    exporter = HTMLExporter(
        template_name="lab", template_file="kit.html.j2",
        extra_loaders=[jinja2.DictLoader({"kit.html.j2": _TEMPLATE})],
    )
    charts = any('class="kit-vega"' in out.get("data", {}).get("text/html", "")
                 for cell in nb.cells for out in cell.get("outputs", []))
    resources = {"kit_vega_script": html_page_script() if charts else "",
                 "metadata": {"name": title}}
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    return body


def _static(out: dict, state: dict) -> dict:
    """An output as the HTML page can show it without a kernel or a CDN."""
    data = out.get("data") or {}
    chart = next((k for k in data if k.startswith(_VEGA_PREFIXES)), None)
    if chart:
        embed = (out.get("metadata") or {}).get(chart, {}).get("embed_options", {})
        return _html_output(_vega_div(data[chart], embed))
    if _WIDGET_VIEW in data:
        model = data[_WIDGET_VIEW].get("model_id", "")
        return _html_output(_widget_snapshot(model, state))
    return out


def _vega_div(spec: dict, embed: dict) -> str:
    payload = json.dumps({"spec": spec, "options": {"actions": False, **embed}})
    payload = payload.replace("</", "<\\/")  # stays inside its <script>
    return f'<div class="kit-vega"><script type="application/json">{payload}</script></div>'


def _widget_snapshot(model_id: str, state: dict, depth: int = 0) -> str:
    """Controls as ``description: value``, output areas as their outputs, in order."""
    model = state.get(model_id, {}).get("state", {})
    parts = []
    if "outputs" in model:  # an Output widget
        for out in model["outputs"]:
            parts.append(_render_output(_static(out, state)))
    elif "children" in model:  # a box
        parts += [_widget_snapshot(c.removeprefix("IPY_MODEL_"), state, depth + 1)
                  for c in model["children"]]
    elif "value" in model:  # a control
        label = model.get("description") or model.get("_model_name", "")
        parts.append(f"<div class='kit-control'><b>{html.escape(str(label))}</b> "
                     f"{html.escape(str(model['value']))}</div>")
    note = "" if depth else ("<div class='kit-control'><i>(static copy: the controls "
                             "move in JupyterLab)</i></div>")
    return note + "".join(parts)


def _render_output(out: dict) -> str:
    data = out.get("data") or {}
    if out.get("output_type") == "stream":
        return f"<pre>{html.escape(out.get('text', ''))}</pre>"
    if out.get("output_type") == "error":
        return f"<pre>{html.escape(out.get('ename', ''))}: {html.escape(out.get('evalue', ''))}</pre>"
    for kind in ("text/html", "image/svg+xml"):
        if kind in data:
            return "".join(data[kind])
    if "image/png" in data:
        return f"<img src='data:image/png;base64,{data['image/png']}'>"
    return f"<pre>{html.escape(''.join(data.get('text/plain', '')))}</pre>"


def _html_output(text: str) -> dict:
    return nbformat.v4.new_output("display_data", data={"text/html": text})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kit.demo", description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", type=Path, nargs="?", default=Path("notebooks"))
    parser.add_argument("build", type=Path, nargs="?", default=Path("build"))
    args = parser.parse_args(argv)
    paths = sorted(args.notebooks.glob("*.ipynb"))
    if not paths:
        print(f"kit.demo: no notebooks in {args.notebooks}/", file=sys.stderr)
        return 1
    args.build.mkdir(parents=True, exist_ok=True)
    failed = []
    for path in paths:
        try:
            nb = run(path)
        except NotebookFailed as exc:
            failed.append(str(exc))
            nb = exc.notebook
        target = args.build / f"{path.stem}.html"
        target.write_text(to_html(nb, title=path.stem), encoding="utf-8")
        print(f"{path} -> {target}")
    for message in failed:
        print(f"kit.demo: {message}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
