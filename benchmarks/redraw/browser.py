"""JupyterLab in headless Chromium: Run All, then each control changed as a user does, timed
from the input event to the new output."""

from __future__ import annotations

import json
import time
from pathlib import Path

from .plans import values_key
from .pressure import pressure_since, stall_seconds
from .settings import MARK, NOTEBOOKS, ROOT, TIMEOUT


WIDGET_JS = """(cell) => {
  const output = [...cell.querySelectorAll('.widget-output')].find(o => o.parentElement.children.length === 3);
  return output ? output.parentElement : null;
}"""


FIND_JS = f"""() => {{  // the widget of the cell holding {MARK} (its input may be collapsed: then the first widget)
  const find = {WIDGET_JS};
  const cells = [...document.querySelectorAll('.jp-CodeCell')];
  const text = (c) => (c.querySelector('.jp-InputArea') || {{textContent: ''}}).textContent;
  const marked = cells.filter(c => text(c).includes('{MARK}'));
  for (const c of [...marked, ...cells]) {{ const r = find(c); if (r) return r; }}
  return null;
}}"""


ARM_JS = """(root) => {
  if (!window.__benchListening) {
    window.__benchListening = true;
    for (const kind of ['keydown', 'input', 'change', 'pointerdown', 'mousedown']) {
      document.addEventListener(kind, () => {
        if (window.__benchArmed) { window.__benchArmed = false; window.__benchStart = performance.now(); }
      }, {capture: true});
    }
  }
  window.__benchBefore = root.lastElementChild.querySelector('.jp-OutputArea-output');
  window.__benchStart = window.__benchBusyAt = window.__benchOutputAt = null;
  window.__benchArmed = true;
}"""


DONE_JS = """(root) => {
  const now = performance.now();
  if (window.__benchStart === null) return false;
  if (root.querySelector('.kit-computing')) {
    if (window.__benchBusyAt === null) window.__benchBusyAt = now;
    return false;
  }
  const out = root.lastElementChild.querySelector('.jp-OutputArea-output');
  if (!out || out === window.__benchBefore) return false;
  if (window.__benchOutputAt === null) window.__benchOutputAt = now;
  const embed = out.querySelector('.vega-embed');
  if (embed) {
    const svg = embed.querySelector('svg.marks');
    if (!svg || svg.childElementCount === 0) return false;
  }
  const typed = out.querySelector('[data-mime-type]');
  const since = (t) => t === null ? null : (t - window.__benchStart) / 1000;
  return {seconds: since(now), computing_shown: since(window.__benchBusyAt), output: since(window.__benchOutputAt),
          chart: !!embed, mime: (typed && typed.getAttribute('data-mime-type')) || '',
          text: embed ? '' : out.textContent.trim().slice(0, 300)};
}"""


IDLE_JS = """(root) => !root.querySelector('.kit-computing') &&
  !!root.lastElementChild.querySelector('.jp-OutputArea-output')"""


PROMPTS = "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(p => p.textContent.trim())"


# from the notebook's model, not its DOM: a collapsed check cell's error is not drawn
ERRORS = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .flatMap(c => c.model.type === 'code' ? c.model.outputs.toJSON() : [])
  .filter(o => o.output_type === 'error').map(o => `${o.ename}: ${o.evalue}`.slice(0, 300))"""


def run_browser(notebooks: list[Path], plans: dict, folder: Path) -> dict:
    """Each notebook in JupyterLab in headless Chromium: Run All, then the plans' changes."""
    import shutil
    import sys
    import tempfile

    import nbformat

    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    from browsing import chromium_path, serve   # JupyterLab as the browser tests start it

    chromium = chromium_path()
    if chromium is None:
        return {"error": "no chromium (sh tests/browser/ensure-chromium.sh)"}
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {"error": "the playwright Python package is not installed"}
    results = {}
    with tempfile.TemporaryDirectory(prefix="kit-redraw-") as tmp:
        tmp = Path(tmp)
        # the checkout's layout, for the notebooks' relative paths: ../tests/golden (the kit's
        # goldens) and ../../shared/golden (real Flink's, beside the checkout)
        (tmp / "shared").symlink_to(ROOT.parent / "shared")
        tmp = tmp / "checkout"
        shutil.copytree(NOTEBOOKS, tmp / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        (tmp / "tests").symlink_to(ROOT / "tests")
        for nb in notebooks:  # no stored outputs: every chart seen is drawn now
            path = tmp / "notebooks" / nb.name
            book = nbformat.read(path, as_version=4)
            for cell in book.cells:
                if cell.cell_type == "code":
                    cell.outputs, cell.execution_count = [], None
            nbformat.write(book, path)
        with serve(tmp) as (base, token), sync_playwright() as p:
            browser = p.chromium.launch_persistent_context(
                str(tmp / "chromium-profile"), executable_path=chromium, headless=True,
                args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
                viewport={"width": 1400, "height": 1000})
            try:
                for nb in notebooks:
                    print(f"redraw: browser, {nb.name}", flush=True)
                    page = browser.new_page()
                    try:
                        results[nb.name] = _browse(page, base, token, nb.name, plans[nb.name])
                    except Exception as exc:
                        results[nb.name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
                        page.screenshot(path=str(folder / f"redraw-browser-{nb.stem}.png"))
                    finally:
                        page.close()
                        _shutdown_kernels(base, token)
            finally:
                browser.close()
    return results


def _browse(page, base: str, token: str, name: str, plans: dict) -> dict:
    import re

    messages = []
    page.on("console", lambda m: m.type == "error" and messages.append(f"console: {m.text[:300]}"))
    page.on("pageerror", lambda e: messages.append(f"page: {str(e)[:300]}"))
    page.set_default_timeout(60_000)
    workspace = re.sub(r"\W", "-", name)
    page.goto(f"{base}/lab/workspaces/{workspace}/tree/{name}?token={token}")
    page.wait_for_selector(".jp-NotebookPanel .jp-CodeCell")
    page.wait_for_function("() => /\\| Idle/.test(document.body.innerText)", timeout=120_000)
    started = time.perf_counter()
    result = {"errors": _run_all(page), "controls": {}}
    result["run_all"] = time.perf_counter() - started
    root = page.wait_for_function(FIND_JS, timeout=TIMEOUT * 1000).as_element()
    root.scroll_into_view_if_needed()
    page.wait_for_function(IDLE_JS, arg=root, timeout=TIMEOUT * 1000)
    controls = root.evaluate_handle("(r) => r.firstElementChild")
    values = {name: plan["original"] for name, plan in plans.items()}
    seen = {values_key(values)}
    for i, (cname, plan) in enumerate(plans.items()):
        if plan.get("skip"):
            continue
        ctrl = controls.evaluate_handle("(box, i) => box.children[i]", i).as_element()
        for other, label in plan.get("context_labels", {}).items():
            _change(page, root, controls, list(plans).index(other), plans[other], label)
            values[other] = plan["context"][other]
            seen.add(values_key(values))
        times = []
        for k, value in enumerate(plan["values"]):
            target = plan["labels"][k] if plan["kind"] == "options" else value
            new = values_key({**values, cname: value}) not in seen
            stall, t = stall_seconds(), time.perf_counter()
            times.append(_change(page, root, ctrl, None, plan, target, move=plan.get("moves", [None] * 99)[k]))
            times[-1].update(new=new, pressure=pressure_since(stall, time.perf_counter() - t))
            values[cname] = value
            seen.add(values_key(values))
        if plan["values"][-1] != plan["original"]:
            _change(page, root, ctrl, None, plan, plan.get("original_label", plan["original"]), move=None)
            values[cname] = plan["original"]
        for other, label in plan.get("context_back", {}).items():
            _change(page, root, controls, list(plans).index(other), plans[other], label)
            values[other] = plans[other]["original"]
        seen.add(values_key(values))
        result["controls"][cname] = times
        print(f"redraw: browser, {cname}: " + ", ".join("never" if t.get("seconds") is None else f"{t['seconds']:.2f}"
                                                         for t in times), flush=True)
    page.wait_for_timeout(1000)
    result["busy_after"] = page.evaluate("(r) => !!r.querySelector('.kit-computing')", root)
    result["kernel_idle_after"] = page.evaluate("() => /\\| Idle/.test(document.body.innerText)")
    result["messages"] = messages
    return result


def _menu(page, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text=item).first.click()


RUN_STATE = f"""(n) => {{
  if (({ERRORS})().length > n) return 'error';
  const prompts = ({PROMPTS})();
  const idle = /\\| Idle/.test(document.body.innerText);
  if (idle && prompts.some(p => /^\\[\\d+\\]:$/.test(p)) && !prompts.some(p => p === '[*]:' || p === '[ ]:'))
    return 'done';
  return false;
}}"""


CONTINUE_JS = """() => {  // select the cell after the last failed one, run it and all below
  const app = window.jupyterapp;
  const cells = app.shell.currentWidget.content.widgets;
  const failed = cells.map((c, i) => c.model.type === 'code' && c.model.outputs.toJSON()
    .some(o => o.output_type === 'error') ? i : -1).filter(i => i >= 0).pop();
  if (failed === undefined || failed + 1 >= cells.length) return false;
  app.shell.currentWidget.content.activeCellIndex = failed + 1;
  app.commands.execute('notebook:run-all-below');
  return true;
}"""


def _run_all(page) -> list[str]:
    """Run All; a cell that fails stops it, so run on from the cell after it, as a user
    would (Run Selected Cell and All Below, through window.jupyterapp). Done when no cell
    waits or runs and the kernel is idle, twice 3 s apart (a collapsed cell shows no
    prompt). The cells' errors."""
    _menu(page, "Run All Cells")
    seen = 0
    while True:
        state = page.wait_for_function(RUN_STATE, arg=seen, timeout=1_800_000, polling=1000).json_value()
        if state == "done":
            page.wait_for_timeout(3000)
            if page.evaluate(RUN_STATE, seen) == "done":
                return page.evaluate(ERRORS)
            continue
        errors = page.evaluate(ERRORS)
        seen = len(errors)
        print(f"redraw: a cell failed, running on past it: {errors[-1][:200]!r}", flush=True)
        page.wait_for_function("() => /\\| Idle/.test(document.body.innerText)", timeout=120_000)
        if not page.evaluate(CONTINUE_JS):
            return errors


def _change(page, root, box, index, plan: dict, target, move=None) -> dict:
    """Change one control as a user would and wait for the new output: {seconds, ...}."""
    ctrl = box if index is None else box.evaluate_handle("(b, i) => b.children[i]", index).as_element()
    kind = plan["kind"]
    page.wait_for_function(IDLE_JS, arg=root, timeout=TIMEOUT * 1000)
    page.evaluate(ARM_JS, root)
    if kind == "slider":
        handle = ctrl.query_selector(".noUi-handle")
        handle.focus()
        if move is None:  # back to ``target``: one step at a time
            now = float(handle.get_attribute("aria-valuenow"))
            step = 1 if float(target) > now else -1
            handle.press("ArrowRight" if step > 0 else "ArrowLeft")
        else:
            handle.press("ArrowRight" if move > 0 else "ArrowLeft")
    elif kind == "options":
        select = ctrl.query_selector("select")
        if select is not None:
            select.select_option(label=str(target))
        else:
            buttons = [b for b in ctrl.query_selector_all("button") if b.inner_text().strip() == str(target)]
            buttons[0].click()
    elif kind == "toggle":
        ctrl.query_selector("input, button").click()
    elif kind == "text":
        box_ = ctrl.query_selector("input, textarea")
        box_.fill(str(target))
        if box_.evaluate("e => e.tagName") == "INPUT":
            box_.press("Enter")
        else:
            box_.evaluate("e => e.blur()")
    try:
        done = page.wait_for_function(DONE_JS, arg=root, timeout=TIMEOUT * 1000, polling="raf").json_value()
    except Exception:
        done = {"seconds": None, "timeout": True}
    if kind == "slider":
        done["readout"] = ctrl.query_selector(".widget-readout").inner_text()
        if move is None and done.get("seconds") is not None and float(done["readout"]) != float(target):
            return _change(page, root, box, index, plan, target, move=None)
    done["target"] = target
    return done


def _shutdown_kernels(base: str, token: str) -> None:
    from browsing import request

    for session in json.loads(request(f"{base}/api/sessions", token, timeout=30)):
        request(f"{base}/api/sessions/{session['id']}", token, method="DELETE", timeout=30)
    time.sleep(2)
