"""Widgets that re-run a function and redraw its result in place.

``bind(fn, **controls)`` shows the controls above an output area holding
``fn(**values)``; moving a control recomputes it and *replaces* the output (the output
area's ``outputs`` are set from the kernel, never appended with ``display()``), so the
area holds exactly one result and notebooks stay stable under nbval: the cell's own
output is just the widget, and its text form is a short fixed line.

Example::

    import altair as alt, ipywidgets as w, pandas as pd
    from kit.widgets import bind

    def squares(n):
        df = pd.DataFrame({"x": range(n), "y": [i * i for i in range(n)]})
        return alt.Chart(df).mark_line().encode(x="x", y="y")

    view = bind(squares, n=w.IntSlider(value=5, min=2, max=20, description="n"))
    view                      # the slider above the chart
    view.set(n=8)["text/plain"]   # what tests do: move a control, read the new output

The result may be an altair chart, a pandas or Spark DataFrame (shown as a table of its
first rows), or anything IPython can display. An altair chart's title gets a line naming
the values it shows (``n = 8``). An exception raised by ``fn`` is shown as one line,
``ErrorType: message``, in place of the result (``view.error`` keeps the exception,
traceback included).

Moving a control while a redraw runs does not queue another: the redraw runs in a
thread, a status line above the output says what is being computed, and when it ends
only the controls' latest values are drawn; the superseded redraw's Spark jobs are
cancelled. ``view.wait()`` returns once the output shows the latest values. All views'
redraws run one after another in one long-lived thread: with PySpark's pinned threads, a
new Python thread is a new JVM thread and connection, and a redraw's Spark jobs from a
fresh one took up to twice as long.

Values drawn before are drawn again from what they gave (the last ``KEPT`` outputs, by
values), not recomputed: moving a slider back and forth costs one computation per value.
What is kept is forgotten when a notebook cell runs (it may have changed what ``fn``
reads; what the cell itself drew stays), on ``refresh()`` and on ``visible_when``; only
charts, pandas tables and plain values are kept (a Spark DataFrame or a kit result may hold
data in Spark: recomputed), a failed redraw never, and a :func:`watch` view keeps nothing
(its query's data grow).
"""

from __future__ import annotations

import collections
import functools
import inspect
import queue
import textwrap
import threading
import time
import weakref
from typing import Any, Callable

import ipywidgets as widgets

from ..stream import Stream

__all__ = ["Bound", "Watched", "bind", "watch"]

MAX_ROWS = 50  # rows of a Spark DataFrame brought to the driver for display
KEPT = 32      # outputs a view keeps, by values, to draw again without recomputing


def bind(fn: Callable[..., Any], **controls: widgets.ValueWidget) -> "Bound":
    """Controls keyed by ``fn``'s parameter names, above the output of ``fn(**values)``; a
    text box redraws when Enter is pressed or it loses focus, not at every key."""
    return Bound(fn, controls)


class Superseded(Exception):
    """A redraw whose values the controls have moved on from."""


class Bound(widgets.VBox):
    """The widget :func:`bind` returns.

    ``controls`` (name -> widget), ``status`` (the line saying what is being computed),
    ``output`` (the output area), ``values`` (name -> current value), ``data`` (what the
    output area shows), ``error`` (the exception of the last run, for its traceback, or
    None), ``elapsed`` (seconds the last redraw took), ``set(**values)``, ``refresh()``,
    ``wait()`` and ``visible_when(**predicates)``.
    """

    _keeps = KEPT   # outputs kept by values (a ``Watched`` view: none)

    def __init__(self, fn: Callable[..., Any], controls: dict[str, widgets.ValueWidget]):
        params = inspect.signature(fn).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        unknown = [name for name in controls if name not in params and not takes_any]
        if unknown:
            raise TypeError(
                f"bind: {getattr(fn, '__name__', fn)!s} has no parameter {', '.join(unknown)}; "
                f"its parameters are {', '.join(params) or 'none'}"
            )
        for name, control in controls.items():
            if not hasattr(control, "value"):
                raise TypeError(f"bind: control {name!r} is a {type(control).__name__}, "
                                "not a widget with a value")
        self.fn = fn
        self.controls = dict(controls)
        self._visible: dict[str, Callable[[dict], bool]] = {}
        self._holding = False
        self._lock = threading.Lock()
        self._wanted = 0            # the number of the latest request; a redraw draws only if it is still it
        self._idle = threading.Event()   # cleared while a redraw is queued or running in the redraw thread
        self._idle.set()
        self.elapsed = 0.0
        self.error: Exception | None = None
        self._result: Any = None
        self._kept: list = []   # the Streams the last redraw read (Stream.holding)
        self._drawn: collections.OrderedDict = collections.OrderedDict()   # values -> (output, result, cell)
        self._forgotten = 0     # forget()s so far: a redraw that began before one is not kept
        self.status = widgets.HTML()
        self.output = widgets.Output()
        _label_width(self.controls.values())
        for control in self.controls.values():
            if isinstance(control, (widgets.Text, widgets.Textarea)):
                control.continuous_update = False   # redrawn on Enter or leaving the box, not per key
        super().__init__([widgets.VBox(list(controls.values())), self.status, self.output])
        for control in self.controls.values():
            control.observe(self._changed, names="value")
        _VIEWS.add(self)
        _forget_when_a_cell_runs()
        self.refresh()

    @property
    def values(self) -> dict[str, Any]:
        """The controls' current values, by parameter name."""
        return {name: control.value for name, control in self.controls.items()}

    @property
    def data(self) -> dict[str, Any]:
        """The mimebundle (``{"text/plain": ..., ...}``) the output area shows now."""
        (out,) = self.output.outputs or ({"data": {}},)
        return out.get("data") or {"text/plain": out.get("text", "")}

    def visible_when(self, **predicates: Callable[[dict], bool]) -> "Bound":
        """Show a control only while ``predicate(values)`` holds, e.g.
        ``view.visible_when(slide=lambda v: v["assigner"] == "sliding")``; a hidden
        control's value is still passed to ``fn`` but not named in the chart's title."""
        unknown = [name for name in predicates if name not in self.controls]
        if unknown:
            raise TypeError(f"visible_when: no control named {', '.join(unknown)}; "
                            f"the controls are {', '.join(self.controls)}")
        self._visible.update(predicates)
        self.forget()   # the title names other values now
        values = self.values
        self._show_controls(values)
        if self.error is None:   # the title names the visible values only: redrawn, not recomputed
            out = _output(self._result, self._shown(values))
            self.output.outputs = (out,)
            with self._lock:
                self._keep(_values_key(values), out, self._result)
        return self

    def set(self, **values: Any) -> dict[str, Any]:
        """Move controls as a user would, recompute once, return the new :attr:`data`."""
        self._idle.wait()   # no redraw running (``Bound.wait``; a ``Watched``'s waits for more)
        self._holding = True
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._holding = False
        self._redraw()
        return self.data

    def refresh(self) -> None:
        """Recompute ``fn(**values)`` now, in this thread, and replace the output with it
        (what was kept for other values is forgotten too)."""
        self.forget()
        self._redraw()

    def forget(self, before: int | None = None) -> None:
        """Forget the outputs kept for values drawn before (those drawn before notebook cell
        number ``before`` began, if given): the next redraws of them recompute."""
        with self._lock:
            for key in [k for k, kept in self._drawn.items() if before is None or kept[2] < before]:
                del self._drawn[key]
            self._forgotten += 1

    def _redraw(self) -> None:
        with self._lock:
            self._wanted += 1
            wanted = self._wanted
        self._draw(self.values, wanted)

    def wait(self, timeout: float | None = None) -> None:
        """Return once no redraw is running (the output shows the latest values)."""
        self._idle.wait(timeout)

    def _changed(self, change: dict) -> None:
        if self._holding:
            return
        with self._lock:
            self._wanted += 1
            if not self._idle.is_set():   # queued or running: it picks the latest values up when done
                _cancel(self._running_group)
                return
            self._idle.clear()
        _redraws().put(self)

    def _work(self) -> None:
        while True:
            with self._lock:
                wanted = self._wanted
            self._draw(self.values, wanted)
            with self._lock:
                if self._wanted == wanted:
                    self._idle.set()
                    return

    _running_group: str | None = None

    def _draw(self, values: dict[str, Any], wanted: int) -> None:
        """Compute ``fn(**values)`` (or take what it gave before) and show it, unless a newer
        request superseded it."""
        self._show_controls(values)
        shown = self._shown(values)
        key = _values_key(values)
        started = time.perf_counter()
        with self._lock:
            forgotten = self._forgotten
            drawn = self._drawn.get(key) if key is not None else None
            if drawn is not None:
                self._drawn.move_to_end(key)
                if self._wanted == wanted:
                    self.error, self._result = None, drawn[1]
                    self.output.outputs = (drawn[0],)
                    self.status.value = ""
                    self.elapsed = time.perf_counter() - started
                return
        self.status.value = (f"<span class='kit-computing'>computing {_escape(shown)}…</span>"
                             if shown else "<span class='kit-computing'>computing…</span>")
        group = self._running_group = f"kit-widgets-{id(self)}-{wanted}"
        error = result = None
        kept = self._kept
        try:
            with _job_group(group), Stream.holding() as made:   # held for the next redraw to reuse
                result = self.fn(**values)
                out = _output(result, shown, checked=self._result is None)
            kept = made
        except Exception as exc:  # shown, not raised: the user is moving a slider
            if self._wanted != wanted:
                return             # cancelled or superseded: the next redraw shows
            error = exc
            first = (str(exc).strip().splitlines() or [""])[0]
            text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
            out = {"output_type": "stream", "name": "stderr", "text": text + "\n"}
        with self._lock:
            if self._wanted != wanted:
                return
            self.error, self._result, self._kept = error, result, kept
            self.elapsed = time.perf_counter() - started
            self.output.outputs = (out,)
            self.status.value = ""
            if error is None and forgotten == self._forgotten:
                self._keep(key, out, result)

    def _keep(self, key, out: dict, result: Any) -> None:
        """Keep ``out`` (``fn``'s ``result`` shown) for the values of ``key``, if it can be
        (the caller holds ``_lock``)."""
        if key is None or not self._keeps or not _holds_no_spark_data(result):
            return
        self._drawn[key] = (out, result, _CELLS[0])
        while len(self._drawn) > self._keeps:
            self._drawn.popitem(last=False)

    def _show_controls(self, values: dict[str, Any]) -> None:
        for name, visible in self._visible.items():
            self.controls[name].layout.display = None if visible(values) else "none"

    def _shown(self, values: dict[str, Any]) -> str:
        """``label = value, ...`` for the visible controls."""
        return ", ".join(f"{_label(name, self.controls[name])} = {value}" for name, value in values.items()
                         if name not in self._visible or self._visible[name](values))

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={value!r}" for name, value in self.values.items())
        return f"bind({getattr(self.fn, '__name__', 'fn')}, {args})"


def watch(run, draw: Callable[..., Any], every: float = 0.5, **controls: widgets.ValueWidget) -> "Watched":
    """``draw(run, **values)`` (a chart, a table...) redrawn in place after each micro-batch
    the live query ``run`` (``start()``'s answer) commits, until it stops, and when a
    control moves (as :func:`bind`'s)::

        view = watch(run, lambda run: run.df.toPandas())
        view           # the table, growing batch by batch
        view.wait()    # returns once the query stopped and its last batch is drawn
    """
    return Watched(run, draw, every, controls)


class Watched(Bound):
    """The widget :func:`watch` returns: a ``Bound`` whose output is also redrawn (in the one
    redraw thread) when a thread that looks at the query every ``every`` seconds sees a new
    batch in its progress; ``redraws`` counts the drawings, ``elapsed`` is the last one's time."""

    _keeps = 0   # the same values draw more rows after each batch

    def __init__(self, run, draw: Callable[..., Any], every: float, controls: dict):
        self.run, self.redraws = run, 0
        self._stopped = threading.Event()
        super().__init__(functools.partial(draw, run), controls)
        threading.Thread(target=self._poll, args=(every,), name="kit-widgets-watch", daemon=True).start()

    def _poll(self, every: float) -> None:
        try:
            seen = self._batch()
            while True:
                active = self.run.query.isActive   # before the batch: a stopped query's last is seen
                batch = self._batch()
                if batch != seen:
                    seen = batch
                    self._changed({})
                if not active:
                    break
                time.sleep(every)
        except Exception as exc:   # the session went away under it: the view stays as last drawn
            self.error = exc
        finally:
            self._stopped.set()

    def _batch(self):
        return (self.run.query.lastProgress or {}).get("batchId")

    def _draw(self, values: dict[str, Any], wanted: int) -> None:
        self.redraws += 1
        super()._draw(values, wanted)

    def wait(self, timeout: float | None = None) -> None:
        """Return once the query stopped and the output shows its last batch."""
        self._stopped.wait(timeout)
        super().wait(timeout)

    def __repr__(self) -> str:
        args = "".join(f", {name}={value!r}" for name, value in self.values.items())
        return f"watch({type(self.run).__name__}{args})"


_VIEWS: "weakref.WeakSet[Bound]" = weakref.WeakSet()
_HOOKED: "weakref.WeakSet" = weakref.WeakSet()   # the IPython shells told to forget after each cell
_CELLS = [0]   # the notebook cells begun so far (IPython's pre_run_cell)


def _forget_when_a_cell_runs() -> None:
    """After each cell the running IPython executes, every view forgets what it kept from
    before the cell began (the cell may have changed what the views' functions read); what
    it drew during the cell -- a widget's first drawing, in the cell that binds it -- is what
    the cell left on screen, and stays. Registered once per shell."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        return
    if shell is None or shell in _HOOKED:
        return
    shell.events.register("pre_run_cell", _cell_begins)
    shell.events.register("post_run_cell", _forget_all)
    _HOOKED.add(shell)


def _cell_begins(*_) -> None:
    _CELLS[0] += 1


def _forget_all(*_) -> None:
    for view in list(_VIEWS):
        view.forget(before=_CELLS[0])


def _holds_no_spark_data(result: Any) -> bool:
    """Whether keeping ``result`` keeps nothing in Spark: an altair chart (its data
    collected), a pandas object or a plain value. A Spark DataFrame or a kit result is not
    kept (what it reads may be kept in Spark: owned by its result, not by a widget's memo)."""
    if result is None or isinstance(result, (str, bytes, int, float, bool)) or _is_altair_chart(result):
        return True
    return type(result).__module__.startswith("pandas")


def _values_key(values: dict[str, Any]):
    """``values`` as a dict key (None: a value that cannot be one, never kept)."""
    try:
        key = tuple((name, type(value), value) for name, value in values.items())
        hash(key)
    except TypeError:
        return None
    return key


_queue: queue.Queue | None = None
_queue_lock = threading.Lock()


def _redraws() -> queue.Queue:
    """The queue of views to redraw, served by the one redraw thread (started on first use)."""
    global _queue
    with _queue_lock:
        if _queue is None:
            _queue = queue.Queue()
            threading.Thread(target=_serve, args=(_queue,), name="kit-widgets-redraw", daemon=True).start()
    return _queue


def _serve(views: queue.Queue) -> None:
    while True:
        view = views.get()
        try:
            view._work()
        except Exception as exc:   # _draw shows fn's errors; one of its own must not stop the thread
            with view._lock:
                view.error = exc
                view._idle.set()


def _label(name: str, control: widgets.Widget) -> str:
    return (getattr(control, "description", "") or name).strip()


VALUE_WIDTH = "22em"   # beside the label: a slider's track, a dropdown's longest option


def _label_width(controls) -> None:
    """Room for the longest description, so no label is cut ("orders del…"), and beside it
    ``VALUE_WIDTH`` for the value, so a long label leaves a slider its track and a dropdown
    its text (unless the control's width was set)."""
    longest = max((len(getattr(c, "description", "") or "") for c in controls), default=0)
    for control in controls:
        style = getattr(control, "style", None)
        if longest and style is not None and hasattr(style, "description_width") and not style.description_width:
            style.description_width = f"{longest + 2}ch"
            if not control.layout.width:
                control.layout.width = f"calc({longest + 2}ch + {VALUE_WIDTH})"


def _escape(text: str) -> str:
    import html

    return html.escape(text)


class _job_group:
    """Spark jobs started inside run under ``group``, so a superseded redraw can cancel them."""

    def __init__(self, group: str):
        self.group = group

    def __enter__(self):
        self.sc = _spark_context()
        if self.sc is not None:
            self.sc.setJobGroup(self.group, "kit.widgets redraw", interruptOnCancel=True)

    def __exit__(self, *exc):
        if self.sc is not None:
            self.sc.setLocalProperty("spark.jobGroup.id", None)
            self.sc.setLocalProperty("spark.job.description", None)


def _cancel(group: str | None) -> None:
    sc = _spark_context()
    if sc is not None and group:
        sc.cancelJobGroup(group)


def _spark_context():
    """The running SparkContext (classic Spark only; None without one)."""
    import sys

    if "pyspark" not in sys.modules:
        return None
    from pyspark import SparkContext

    return SparkContext._active_spark_context


def _output(result: Any, shown: str, checked: bool = True) -> dict:
    data, metadata = _format(result, shown, checked)
    return {"output_type": "display_data", "data": data, "metadata": metadata}


def _format(result: Any, shown: str = "", checked: bool = True) -> tuple[dict, dict]:
    """(data, metadata) for ``result``, as IPython would display it; an altair chart's
    title gets the line ``shown``. Unless ``checked``, an altair chart goes to the active
    renderer without altair's check of the whole spec against its schema (~20–50 ms a
    chart): a redraw's; the first draw checks it all, and altair checks each part of a
    chart as it is built."""
    if result is None:
        return {}, {}
    if _is_spark_dataframe(result):
        result = result.limit(MAX_ROWS).toPandas()
    if not checked and _is_altair_chart(result) and hasattr(result, "to_dict"):
        import altair as alt

        renderer = alt.renderers.get()
        if renderer is not None:
            from ..viz.render import spec_of

            spec = spec_of(result)
            if shown:   # on the spec: a titled copy of a compound chart would copy all its parts
                spec["title"] = _title_with(spec.get("title"), shown)
            bundle = renderer(spec)
            return bundle if isinstance(bundle, tuple) else (bundle, {})
    if shown and _is_altair_chart(result):
        result = _titled(result, shown)
    try:
        from IPython import get_ipython

        formatter = get_ipython().display_formatter
    except AttributeError:  # no running IPython (plain pytest): a formatter of our own
        from IPython.core.formatters import DisplayFormatter

        formatter = DisplayFormatter()
    data, metadata = formatter.format(result)
    return data, metadata


def _titled(chart, line: str):
    """``chart`` with ``line`` first under its title."""
    import altair as alt

    title = chart.title
    if title is alt.Undefined:
        title = None
    elif not isinstance(title, (str, list)):
        title = title.to_dict() if hasattr(title, "to_dict") else dict(title)
    return chart.properties(title=alt.TitleParams(**_title_with(title, line)))


TITLE_WIDTH = 90   # characters of the values' line before it wraps (a chart is ~640 px wide)


def _title_with(title, line: str) -> dict:
    """A title's parameters (a Vega-Lite title: none, its text -- a string or lines -- or a
    dict) with ``line`` first under its text, wrapped at ``TITLE_WIDTH`` characters so it
    stays within the chart, between its ``name = value`` pairs only."""
    kept = "\0"   # textwrap breaks at spaces, not at this: the spaces inside a pair become it
    pairs = line.replace(kept, " ").split(", ")
    lines = [part.replace(kept, " ") for part in textwrap.wrap(
        ", ".join(pair.replace(" ", kept) for pair in pairs), TITLE_WIDTH,
        break_long_words=False, break_on_hyphens=False)] or [line]
    if title is None or title == "" or title == []:
        return {"text": lines[0] if len(lines) == 1 else lines, "anchor": "start"}
    if isinstance(title, (str, list)):
        return {"text": title, "subtitle": lines, "anchor": "start"}
    subtitle = title.get("subtitle", [])
    return {**title, "subtitle": lines + ([subtitle] if isinstance(subtitle, str) else list(subtitle))}


def _is_altair_chart(obj: Any) -> bool:
    return type(obj).__module__.startswith("altair") and hasattr(obj, "properties") and hasattr(obj, "title")


def _is_spark_dataframe(obj: Any) -> bool:
    return type(obj).__module__.startswith("pyspark.sql") and hasattr(obj, "toPandas")
