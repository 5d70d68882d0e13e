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
first rows), or anything IPython can display. An exception raised by ``fn`` is shown as
one line, ``ErrorType: message``, in place of the result (``view.error`` keeps the
exception, traceback included).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import ipywidgets as widgets

__all__ = ["Bound", "bind"]

MAX_ROWS = 50  # rows of a Spark DataFrame brought to the driver for display


def bind(fn: Callable[..., Any], **controls: widgets.ValueWidget) -> "Bound":
    """Controls keyed by ``fn``'s parameter names, above the output of ``fn(**values)``."""
    return Bound(fn, controls)


class Bound(widgets.VBox):
    """The widget :func:`bind` returns.

    ``controls`` (name -> widget), ``output`` (the output area), ``values`` (name ->
    current value), ``data`` (what the output area shows), ``error`` (the exception of
    the last run, for its traceback, or None), ``set(**values)`` and ``refresh()``.
    """

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
        self._holding = False
        self.output = widgets.Output()
        super().__init__([widgets.VBox(list(controls.values())), self.output])
        for control in self.controls.values():
            control.observe(self._changed, names="value")
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

    def set(self, **values: Any) -> dict[str, Any]:
        """Move controls as a user would, recompute once, return the new :attr:`data`."""
        self._holding = True
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._holding = False
        self.refresh()
        return self.data

    def refresh(self) -> None:
        """Recompute ``fn(**values)`` and replace the output area's content with it."""
        self.error = None
        try:
            data, metadata = _format(self.fn(**self.values))
            out = {"output_type": "display_data", "data": data, "metadata": metadata}
        except Exception as exc:  # shown, not raised: the user is moving a slider
            self.error = exc
            first = (str(exc).strip().splitlines() or [""])[0]
            text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
            out = {"output_type": "stream", "name": "stderr", "text": text + "\n"}
        self.output.outputs = (out,)

    def _changed(self, change: dict) -> None:
        if not self._holding:
            self.refresh()

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={value!r}" for name, value in self.values.items())
        return f"bind({getattr(self.fn, '__name__', 'fn')}, {args})"


def _format(result: Any) -> tuple[dict, dict]:
    """(data, metadata) for ``result``, as IPython would display it."""
    if result is None:
        return {}, {}
    if _is_spark_dataframe(result):
        result = result.limit(MAX_ROWS).toPandas()
    try:
        from IPython import get_ipython

        formatter = get_ipython().display_formatter
    except AttributeError:  # no running IPython (plain pytest): a formatter of our own
        from IPython.core.formatters import DisplayFormatter

        formatter = DisplayFormatter()
    data, metadata = formatter.format(result)
    return data, metadata


def _is_spark_dataframe(obj: Any) -> bool:
    return type(obj).__module__.startswith("pyspark.sql") and hasattr(obj, "toPandas")
