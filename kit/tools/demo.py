"""Run notebooks headless: HTML copies with charts drawn offline, or stored outputs.

    python -m kit.tools.demo notebooks build      # make demo: HTML copies in build/
    python -m kit.tools.demo --store notebooks    # make notebooks: outputs stored in place
    python -m kit.tools.demo --cluster notebooks build   # make demo CLUSTER=1: on a cluster and on Connect

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

``--store`` runs each notebook the same way and writes it back in place (a failed one is
left as it was), post-processed by :func:`stored` so that a notebook opened without running
shows what it teaches and stays unmodified:

- every chart output (the Vega mimetype, at top level or inside a widget's saved output)
  gets an ``image/png`` drawn by vl-convert. JupyterLab's vega renderer adds a PNG to a
  chart output it draws that has none, which marks a freshly opened notebook modified;
  GitHub and nbviewer show the PNG;
- a widget output gets an ``image/png`` of its first state: its chart, titled with the
  controls' values (``kit.widgets.bind`` does that) and :data:`WIDGET_PICTURE_LINE`.
  JupyterLab does not render widgets in an untrusted notebook (one opened from a
  checkout), so it shows the best *safe* mimetype: the PNG, where it showed the text
  ``bind(<lambda>, delay=0)``;
- a bound widget's saved state (``metadata.widgets``, which JupyterLab loads when the
  notebook is trusted, and nbviewer renders) says :data:`STATUS_LINE` in its status line;
- widget model ids are renumbered from the notebook's name, and execution times dropped,
  so storing a notebook again changes only what its outputs changed.

nbval compares every output mimetype except images and widget views with a fresh run:
nothing is added that a fresh run does not give, but PNGs.

``--cluster`` runs every notebook twice more: on a standalone cluster (``SPARK_MASTER``) and on
Spark Connect (``SPARK_REMOTE``), those ``make cluster`` started (``build/cluster``) or else a
local one (``kit.tools.cluster``) started for the run and stopped after it. The HTML copies go to
``build/standalone/`` and ``build/connect/``; a cell whose outputs differ from the ones stored
in the notebook (local mode's, which nbval checks) is named, as nbval compares them (stderr
aside), and the command exits 1.
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import html
import json
import os
import re
import struct
import sys
import tempfile
import zlib
from pathlib import Path

import jinja2
import nbformat
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbconvert import HTMLExporter

from ..viz.render import html_page_script, vega_div

__all__ = ["STATIC_LINE", "STATUS_LINE", "WIDGET_PICTURE_LINE", "main", "run", "store", "stored", "to_html"]

KERNEL = "kit-current-python"
CELL_TIMEOUT = 600  # seconds
_VEGA_PREFIXES = ("application/vnd.vega.", "application/vnd.vegalite.")
_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
_PNG = "image/png"
STATIC_LINE = "run the notebook to move the controls"
WIDGET_PICTURE_LINE = "Run the notebook to move the controls (a picture of their first state)"
STATUS_LINE = "<i class='kit-static'>Run the notebook to move the controls.</i>"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}

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
        return _html_output(vega_div(data[chart], embed))
    if _WIDGET_VIEW in data:
        model = data[_WIDGET_VIEW].get("model_id", "")
        return _html_output(_widget_snapshot(model, state))
    return out


def _widget_snapshot(model_id: str, state: dict, depth: int = 0) -> str:
    """Controls as ``description: value``, output areas as their outputs, in order."""
    model = state.get(model_id, {}).get("state", {})
    layout = state.get(str(model.get("layout", "")).removeprefix("IPY_MODEL_"), {}).get("state", {})
    if layout.get("display") == "none":  # hidden (kit.widgets' visible_when)
        return ""
    parts = []
    if model.get("_model_name") in ("HTMLModel", "HTMLMathModel"):  # e.g. a bound widget's status line
        if model.get("value"):
            parts.append(f"<div class='kit-control'>{model['value']}</div>")
    elif "outputs" in model:  # an Output widget
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


# -- stored outputs: what a notebook shows before it runs ------------------------------


def store(path: Path) -> nbformat.NotebookNode:
    """Run the notebook at ``path`` in a fresh kernel and write it back with the outputs
    :func:`stored` makes; raises :class:`NotebookFailed` (and writes nothing) if a cell fails."""
    nb = stored(run(path), name=path.stem)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return nb


def stored(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """An executed notebook as it is stored: PNGs beside charts and widgets, a static line
    in each bound widget's saved status, stable widget ids, no execution times."""
    nb = copy.deepcopy(nb)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    state = nb.metadata.get("widgets", {}).get(_WIDGET_STATE, {}).get("state", {})
    for model in state.values():
        for out in model.get("state", {}).get("outputs", []) or []:
            _add_chart_png(out)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        for out in cell.get("outputs", []):
            _add_chart_png(out)
            view = (out.get("data") or {}).get(_WIDGET_VIEW)
            if view:
                _mark_static(view.get("model_id", ""), state)
                png = _widget_png(view.get("model_id", ""), state)
                if png:
                    out["data"][_PNG] = png
    return _renumber_widgets(nb, name)


def _add_chart_png(out: dict) -> None:
    data = out.get("data") or {}
    spec = next((data[k] for k in data if k.startswith(_VEGA_PREFIXES)), None)
    if spec is not None and _PNG not in data:
        data[_PNG] = _png(spec)


def _png(spec: dict, line: str | None = None) -> str:
    """A Vega (or Vega-Lite) spec drawn to a base64 PNG by vl-convert; ``line`` first under its title."""
    import vl_convert as vlc

    if line:
        spec = _with_line(spec, line)
    if str(spec.get("$schema", "")).startswith("https://vega.github.io/schema/vega-lite/"):
        png = vlc.vegalite_to_png(spec, scale=1)
    else:
        png = vlc.vega_to_png(spec, scale=1)
    return base64.b64encode(_recompressed(png)).decode("ascii")


def _with_line(spec: dict, line: str) -> dict:
    """``spec`` with ``line`` as the first line under its title (or as its title)."""
    spec = dict(spec)
    title = spec.get("title")
    if isinstance(title, dict):
        subtitle = title.get("subtitle", [])
        rest = [subtitle] if isinstance(subtitle, str) else list(subtitle)
        spec["title"] = {**title, "subtitle": [line] + rest}
    elif title:
        spec["title"] = {"text": title, "subtitle": [line], "anchor": "start"}
    else:
        spec["title"] = {"text": line, "anchor": "start"}
    return spec


def _recompressed(png: bytes) -> bytes:
    """The same PNG with its image data deflated at level 9 (vl-convert's is about 3.5
    times larger): the pixels, and so what a reader sees, are unchanged."""
    chunks, pos = [], 8
    while pos < len(png):
        (size,) = struct.unpack(">I", png[pos:pos + 4])
        chunks.append((png[pos + 4:pos + 8], png[pos + 8:pos + 8 + size]))
        pos += 12 + size
    idat = zlib.compress(zlib.decompress(b"".join(d for kind, d in chunks if kind == b"IDAT")), 9)
    out, wrote = [png[:8]], False
    for kind, data in chunks:
        if kind == b"IDAT":
            if wrote:
                continue
            data, wrote = idat, True
        out.append(struct.pack(">I", len(data)) + kind + data
                   + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    return b"".join(out)


def _widget_png(model_id: str, state: dict) -> str | None:
    """The widget's first chart, drawn with :data:`WIDGET_PICTURE_LINE` under its title; None when
    it shows no chart."""
    spec = _widget_chart(model_id, state)
    return None if spec is None else _png(spec, WIDGET_PICTURE_LINE)


def _widget_chart(model_id: str, state: dict) -> dict | None:
    for out in _outputs_under(model_id, state):
        data = out.get("data") or {}
        spec = next((data[k] for k in data if k.startswith(_VEGA_PREFIXES)), None)
        if spec is not None:
            return spec
    return None


def _outputs_under(model_id: str, state: dict, depth: int = 0) -> list[dict]:
    """The outputs of every Output widget under ``model_id``, in order."""
    model = state.get(model_id, {}).get("state", {})
    if depth > 50:
        return []
    found = list(model.get("outputs", []) or [])
    for child in model.get("children", []) or []:
        found += _outputs_under(child.removeprefix("IPY_MODEL_"), state, depth + 1)
    return found


def _mark_static(model_id: str, state: dict) -> None:
    """A bound widget (``kit.widgets.Bound``: a box of the controls' box, the status line
    and the output) says :data:`STATUS_LINE` in its saved status line; the kernel's
    widget, when the notebook runs, starts with an empty one."""
    children = [c.removeprefix("IPY_MODEL_")
                for c in state.get(model_id, {}).get("state", {}).get("children", []) or []]
    names = [state.get(c, {}).get("model_name") or state.get(c, {}).get("state", {}).get("_model_name")
             for c in children]
    for i, name in enumerate(names[:-1]):
        if name == "HTMLModel" and names[i + 1] == "OutputModel":
            state[children[i]]["state"]["value"] = STATUS_LINE
            return


_MODEL_ID = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")  # also in IPY_MODEL_<id>


def _renumber_widgets(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """Widget model ids (random uuids) replaced by ids derived from ``name`` and the order
    in which they are reached: the widget views in cell order, then what each model refers
    to (``IPY_MODEL_<id>``), depth first; models nothing refers to last, by content."""
    state = nb.metadata.get("widgets", {}).get(_WIDGET_STATE, {}).get("state", {})
    if not state:
        return nb
    order: list[str] = []

    def visit(model_id: str) -> None:
        if model_id in state and model_id not in order:
            order.append(model_id)
            for ref in re.findall(r"IPY_MODEL_([0-9a-f]{32})", json.dumps(state[model_id], sort_keys=True)):
                visit(ref)

    for cell in nb.cells:
        for out in cell.get("outputs", []):
            visit(((out.get("data") or {}).get(_WIDGET_VIEW) or {}).get("model_id", ""))
    for model_id in sorted((m for m in state if m not in order),
                           key=lambda m: json.dumps(state[m], sort_keys=True)):
        visit(model_id)
    new = {old: hashlib.sha256(f"{name}:{n}".encode()).hexdigest()[:32] for n, old in enumerate(order)}
    text = _MODEL_ID.sub(lambda m: new.get(m.group(0), m.group(0)), nbformat.writes(nb))
    return nbformat.reads(text, as_version=4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kit.tools.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--store", action="store_true",
                        help="run the notebooks (directories or .ipynb files) and store their "
                             "outputs in place, for reading before running")
    parser.add_argument("--cluster", action="store_true",
                        help="run the notebooks on a local standalone cluster and on Spark Connect, "
                             "comparing their outputs with the stored (local) ones")
    parser.add_argument("paths", type=Path, nargs="*",
                        help="NOTEBOOKS [BUILD] (default: notebooks build); with --store, "
                             "notebook directories or files (default: notebooks)")
    args = parser.parse_args(argv)
    if args.store:
        return _store_all(args.paths or [Path("notebooks")])
    if len(args.paths) > 2:
        parser.error("at most two paths: NOTEBOOKS BUILD")
    notebooks, build = (list(args.paths) + [Path("notebooks"), Path("build")][len(args.paths):])
    paths = sorted(notebooks.glob("*.ipynb"))
    if not paths:
        print(f"kit.tools.demo: no notebooks in {notebooks}/", file=sys.stderr)
        return 1
    if args.cluster:
        return _on_cluster(paths, build)
    return _demo(paths, build)


def _demo(paths: list[Path], build: Path, compare: bool = False) -> int:
    """Run each notebook into ``build/<name>.html``; with ``compare``, name the cells whose
    outputs differ from the stored ones. 1 if any failed or differed."""
    build.mkdir(parents=True, exist_ok=True)
    failed = []
    for path in paths:
        try:
            nb = run(path)
        except NotebookFailed as exc:
            failed.append(str(exc))
            nb = exc.notebook
        else:
            differ = differences(nbformat.read(path, as_version=4), nb) if compare else {}
            for i, what in differ.items():
                failed.append(f"{path}: code cell {i}'s outputs differ from the stored ones: {what}")
        target = build / f"{path.stem}.html"
        target.write_text(to_html(nb, title=path.stem), encoding="utf-8")
        print(f"{path} -> {target}")
    for message in failed:
        print(f"kit.tools.demo: {message}", file=sys.stderr)
    return 1 if failed else 0


_UNCOMPARED = (_PNG, _WIDGET_VIEW, _WIDGET_STATE)   # what nbval does not compare either


def _comparable(cell) -> list:
    """A code cell's outputs as nbval compares them: no images, widget views nor counts,
    text without trailing blanks; and no stderr (where a ``ClusterWarning`` goes)."""
    def text(value):
        value = "".join(value) if isinstance(value, list) else value
        return "\n".join(line.rstrip() for line in value.rstrip().splitlines()) if isinstance(value, str) else value

    found = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream" and out.name != "stderr":
            if found and found[-1][:2] == ("stream", out.name):   # one text, however the kernel split it
                found[-1] = ("stream", out.name, found[-1][2] + "".join(out.text))
            else:
                found.append(("stream", out.name, "".join(out.text)))
        elif out.output_type == "stream":
            continue
        elif out.output_type == "error":
            found.append(("error", out.ename, out.evalue))
        else:
            data = out.get("data", {})
            found.append((out.output_type, {k: text(v) for k, v in data.items() if k not in _UNCOMPARED}))
    return [("stream", item[1], text(item[2])) if item[0] == "stream" else item for item in found]


_NBVAL_UNCHECKED = ("NBVAL_IGNORE_OUTPUT", "NBVAL_SKIP", "NBVAL_RAISES_EXCEPTION")   # nbval's cell markers


def _checked(cell) -> bool:
    """Whether nbval compares the cell's outputs (no marker or tag says otherwise)."""
    tags = {t.replace("-", "_").upper() for t in cell.get("metadata", {}).get("tags", [])}
    return cell.cell_type == "code" and not any(
        mark in cell.source or mark in tags for mark in _NBVAL_UNCHECKED)


def differences(stored: nbformat.NotebookNode, ran: nbformat.NotebookNode) -> dict[int, str]:
    """The code cells (by index among all cells) whose outputs differ between two runs, as
    nbval compares them, each with the first output that differs (stored, then ran)."""
    found = {}
    for i, (a, b) in enumerate(zip(stored.cells, ran.cells)):
        if _checked(a) and _comparable(a) != _comparable(b):
            found[i] = _first_line_apart(_comparable(a), _comparable(b))
    return found


def _first_line_apart(a: list, b: list) -> str:
    """The first line that differs between two cells' outputs: ``'stored' != 'ran'``."""
    lines = [json.dumps(x, indent=1, sort_keys=True).replace("\\n", "\n").splitlines() for x in (a, b)]
    for x, y in zip(lines[0] + ["(no more output)"], lines[1] + ["(no more output)"]):
        if x != y:
            x, y = (line.strip().rstrip(",").strip('"')[:150] for line in (x, y))
            return f"{x!r} != {y!r}"
    return "the same lines"


def _on_cluster(paths: list[Path], build: Path) -> int:
    """Every notebook on a standalone cluster and on Spark Connect (module doc)."""
    from .cluster import Cluster

    made = None
    if (Path("build/cluster") / "cluster.json").exists():   # make cluster's
        cluster = Cluster.load("build/cluster")
    else:
        made = cluster = Cluster(build / "demo-cluster", workers=2, cores=2, memory="2g", connect_cores=2).start()
    saved = {k: os.environ.pop(k, None) for k in ("SPARK_MASTER", "SPARK_REMOTE", "KIT_SPARK_MASTER")}
    failed = 0
    try:
        for name, variable, url in (("standalone", "SPARK_MASTER", cluster.master_url),
                                    ("connect", "SPARK_REMOTE", cluster.connect_url)):
            os.environ[variable] = url   # what each notebook's kernel starts with
            print(f"kit.tools.demo: on {name} ({variable}={url})")
            failed |= _demo(paths, build / name, compare=True)
            del os.environ[variable]
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})
        if made is not None:
            made.stop()
    return failed


def _store_all(targets: list[Path]) -> int:
    paths = [p for t in targets for p in (sorted(t.glob("*.ipynb")) if t.is_dir() else [t])]
    if not paths:
        print(f"kit.tools.demo: no notebooks in {', '.join(map(str, targets))}", file=sys.stderr)
        return 1
    failed = []
    for path in paths:
        try:
            store(path)
            print(f"{path}: outputs stored")
        except NotebookFailed as exc:
            failed.append(f"{exc} (left as it was)")
    for message in failed:
        print(f"kit.tools.demo: {message}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
