"""The altair renderer "kit": charts that draw offline in JupyterLab and in exported HTML.

Why a renderer of our own (checked in headless Chromium against JupyterLab 4.6):

- altair's default renderer writes HTML that loads vega, vega-lite and vega-embed from a
  CDN: with no internet a chart is an empty box;
- altair 6's "mimetype"/"jupyterlab" renderer emits ``application/vnd.vegalite.v6.json``,
  which JupyterLab does not know (it shows the text/plain fallback; nbformat even rejects a
  dict under that name, as it lacks the ``+json`` suffix);
- JupyterLab's built-in ``@jupyterlab/vega5-extension`` (vega 5.33, vega-lite 5.6,
  vega-embed 6.21, served by the Jupyter server itself, so offline) renders
  ``application/vnd.vega.v5+json`` and ``application/vnd.vegalite.v3/v4/v5+json`` only;
- inlining the ~900 kB JS bundle as ``text/html`` per chart is heavy, and JupyterLab runs
  no script in an untrusted (e.g. freshly opened) notebook.

So a chart output carries:

- ``application/vnd.vega.v5+json``: the chart compiled to a *Vega* spec in Python by
  vl-convert, with the Vega-Lite version the spec was written for (6.x for altair 6), so
  JupyterLab's older vega-lite never sees it; its vega 5.33 draws the compiled spec
  (Vega-Lite 6 output; vega-embed logs a version note in the browser console), interactive,
  with tooltips (vega-embed's tooltip handler), trusted or not. The vega renderer ranks
  after ``text/html`` in JupyterLab, so the bundle holds no HTML;
- ``text/plain``: one short line (``<kit chart 'title'>``) for other frontends.

Metadata under the vega mimetype holds ``embed_options``: SVG rendering (crisp, text
searchable, marks readable by tests) and export actions only (no link to the online Vega
editor). JupyterLab adds an ``image/png`` to the output once drawn; nbval ignores PNGs.

Stable outputs: the spec is a pure function of the chart. Altair names data sets by
content hash; its parameter and view names (``param_<hash>``/``view_<hash>`` in altair 6,
counters ``param_<n>``/``view_<n>`` in altair 5, which change with what ran before) are
renumbered ``param_1``, ``view_1``... in order of appearance, so re-running a notebook or
a cell gives byte-identical JSON: no random ids, timestamps or paths.

Beyond Vega-Lite: a chart's ``usermeta`` may name params its marks set when pressed or
dragged over (``SCRUB``: the rules chart's strip of steps); the compiled spec carries the
events (``_scrubbed``).

A chart as a page of its own: ``kit.viz.save(chart, "chart.html")`` (:func:`save`), the
compiled spec with the JavaScript inlined (altair's ``.save`` loads it from a CDN).

Exported HTML: nbconvert shows vega mimetypes as their text/plain; ``kit.tools.demo`` turns them
into ``<div>``s drawn by one inlined copy of ``vl_convert.javascript_bundle()`` per page
(:func:`html_page_script`).
"""

from __future__ import annotations

import functools
import html
import json
import re
import threading
from typing import Any

import altair as alt
import pandas as pd
import vl_convert as vlc

__all__ = ["MIMETYPE", "EMBED_OPTIONS", "SCRUB", "enable", "mimebundle", "spec_of", "to_vega", "stable_names",
           "save", "vega_div"]

NAME = "kit"
MIMETYPE = "application/vnd.vega.v5+json"
EMBED_OPTIONS = {
    "renderer": "svg",  # crisp, searchable text; marks a test can read
    "actions": {"export": True, "source": False, "compiled": False, "editor": False},
}

SCRUB = "kit_scrub"     # the usermeta key of the params a chart's marks set (``_scrubbed``)
_GENERATED_NAME = re.compile(r"\b(param|view)_([0-9a-f]{16}|[0-9]+)(?![0-9A-Za-z])")  # also in param_1_x
_SCHEMA_VERSION = re.compile(r"/vega-lite/v(\d+)(?:\.(\d+))?")


def enable() -> None:
    """Register the "kit" renderer with altair and make it the active one."""
    alt.renderers.register(NAME, mimebundle)
    alt.renderers.enable(NAME)


def mimebundle(spec: dict, **options: Any) -> tuple[dict, dict]:
    """Altair renderer: a Vega-Lite spec dict -> (data, metadata) for IPython's display."""
    embed = {**EMBED_OPTIONS, **options.get("embed_options", {})}
    return {MIMETYPE: to_vega(spec), "text/plain": _label(spec)}, {MIMETYPE: {"embed_options": embed}}


def spec_of(chart: alt.TopLevelMixin) -> dict:
    """``chart.to_dict(validate=False)`` with each pandas frame made into data once, however
    many layers draw it (altair's data transformer runs per layer: ~5 ms a frame); the
    same spec (the active transformer makes the data, its options kept)."""
    registry = alt.data_transformers
    with _ONCE_LOCK:
        transform, frames = registry.get(), {}
        if transform is None:
            return chart.to_dict(validate=False, context={"pre_transform": False})

        def once(data):
            if not isinstance(data, pd.DataFrame):
                return transform(data)
            if id(data) not in frames:
                frames[id(data)] = (data, transform(data))   # the frame held: its id stays its own
            return frames[id(data)][1]

        registry.register(_ONCE, once)
        try:
            with registry.enable(_ONCE):
                return chart.to_dict(validate=False, context={"pre_transform": False})
        finally:
            registry.register(_ONCE, None)


_ONCE, _ONCE_LOCK = "kit-frames-once", threading.Lock()


def _label(spec: dict) -> str:
    """A chart's text: ``<kit chart 'its title'>``."""
    title = spec.get("title")
    title = title.get("text") if isinstance(title, dict) else title
    return f"<kit chart {title!r}>" if isinstance(title, str) else "<kit chart>"


def to_vega(spec: dict) -> dict:
    """Compile a Vega-Lite spec to a Vega spec offline, with stable generated names and the
    ``SCRUB`` signals its ``usermeta`` asks for."""
    version = _vl_version(spec.get("$schema", ""))
    return _scrubbed(vlc.vegalite_to_vega(stable_names(spec), vl_version=version), spec.get("usermeta"))


def _scrubbed(vega: dict, usermeta) -> dict:
    """``usermeta[SCRUB]`` = ``{param: {"mark": unit name, "min": a, "max": b}}``: pressing a
    mark of that unit, or dragging over its marks, sets the param to the mark's datum's field
    of the param's name, and the param's number box keeps to ``a``..``b`` (what Vega-Lite
    cannot say: its params take no events, its input bindings no bounds). A box, not a
    slider: JupyterLab takes the arrow keys of a focused slider to move between cells; a
    number box keeps them."""
    for name, how in ((usermeta or {}).get(SCRUB) or {}).items():
        marks = f"@{how['mark']}_marks"
        for signal in vega.get("signals", []):
            if signal["name"] == name:
                signal["on"] = [*signal.get("on", []),
                                {"events": f"{marks}:mousedown", "update": f"datum.{name}"},
                                {"events": f"[{marks}:mousedown, window:mouseup] > {marks}:mouseover",
                                 "update": f"datum.{name}"}]
                if "bind" in signal:
                    signal["bind"] = {**signal["bind"], "min": how["min"], "max": how["max"], "step": 1}
    return vega


def stable_names(spec: dict) -> dict:
    """``spec`` with altair's generated ``param_*``/``view_*`` names renumbered 1, 2...
    in order of appearance (data values are left alone)."""
    spec = dict(spec)
    datasets = spec.pop("datasets", None)
    names: dict[str, str] = {}

    def rename(m: re.Match) -> str:
        if m.group(0) not in names:
            kind = m.group(1)
            names[m.group(0)] = f"{kind}_{1 + sum(n.startswith(kind) for n in names)}"
        return names[m.group(0)]

    renamed = json.loads(_GENERATED_NAME.sub(rename, json.dumps(spec)))
    if datasets is not None:
        renamed["datasets"] = datasets
    return renamed


def _vl_version(schema: str) -> str | None:
    """The vl-convert Vega-Lite version nearest the spec's ``$schema`` (same major)."""
    m = _SCHEMA_VERSION.search(schema)
    if not m:
        return None
    return _nearest(int(m.group(1)), int(m.group(2) or 0))


@functools.lru_cache(maxsize=None)
def _nearest(major: int, minor: int) -> str | None:
    same = sorted(
        (tuple(map(int, v.split("."))) for v in vlc.get_vegalite_versions()
         if v.split(".")[0] == str(major)),
    )
    if not same:
        return None
    below = [v for v in same if v[1] <= minor]
    best = below[-1] if below else same[0]
    return f"{best[0]}.{best[1]}"


def save(chart: alt.TopLevelMixin, path) -> str:
    """Write ``chart`` to ``path`` as one HTML page that draws it with no network (vega,
    vega-lite and vega-embed inlined, ~0.9 MB; altair's own ``.save`` loads them from a CDN);
    returns the path.

    >>> import pandas as pd, tempfile, os
    >>> chart = alt.Chart(pd.DataFrame({"x": [1, 2]})).mark_point().encode(x="x")
    >>> page = save(chart, os.path.join(tempfile.mkdtemp(), "chart.html"))
    >>> "<script src=" in open(page).read()
    False
    """
    spec = chart.to_dict()
    vega, title = to_vega(spec), html.escape(_label(spec))
    with open(path, "w", encoding="utf-8") as page:
        page.write(f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head><body>\n'
                   f'{vega_div(vega, EMBED_OPTIONS)}\n{html_page_script()}\n</body></html>\n')
    return str(path)


def vega_div(spec: dict, embed: dict) -> str:
    """A ``<div class="kit-vega">`` that ``html_page_script`` draws: ``spec`` (Vega or
    Vega-Lite) with vega-embed's options ``embed`` (no action menu unless they say)."""
    payload = json.dumps({"spec": spec, "options": {"actions": False, **embed}})
    payload = payload.replace("</", "<\\/")  # stays inside its <script>
    return f'<div class="kit-vega"><script type="application/json">{payload}</script></div>'


@functools.lru_cache(maxsize=1)
def html_page_script() -> str:
    """One ``<script>`` for a whole HTML page: vega, vega-lite and vega-embed inlined
    (no network), then every ``<div class="kit-vega">`` is drawn from the JSON spec in
    its ``<script type="application/json">`` child."""
    boot = """
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("div.kit-vega").forEach((el) => {
    const data = JSON.parse(el.querySelector("script").textContent);
    vegaEmbed(el, data.spec, data.options).catch((e) => { el.textContent = String(e); });
  });
});"""
    # "</script" inside the bundle would end the element early
    bundle = vlc.javascript_bundle().replace("</script", "<\\/script")
    return f"<script>\n{bundle}\n{boot}\n</script>"
