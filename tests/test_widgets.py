"""kit.widgets.bind: controls above an output that is recomputed and replaced in place."""

import json

import altair as alt
import ipywidgets as w
import pandas as pd
import pytest

import kit.viz  # noqa: F401  (enables the "kit" renderer)
from kit.viz import render
from kit.widgets import MAX_ROWS, bind

VEGA = render.MIMETYPE


def points(n, colour="steelblue"):
    df = pd.DataFrame({"x": range(n), "y": [i * i for i in range(n)]})
    return alt.Chart(df, title=f"{n} points").mark_point(color=colour).encode(x="x", y="y")


def test_the_output_starts_with_fn_of_the_initial_values():
    view = bind(points, n=w.IntSlider(value=3, min=1, max=10))
    assert view.values == {"n": 3}
    assert len(view.output.outputs) == 1
    assert view.data["text/plain"] == "<kit chart '3 points'>"
    assert VEGA in view.data
    assert view.elapsed > 0 and view.error is None


def test_moving_a_control_replaces_the_output(capsys):
    slider = w.IntSlider(value=3, min=1, max=10)
    view = bind(points, n=slider, colour=w.Dropdown(options=["steelblue", "red"]))
    first = view.data
    slider.value = 5  # as a user would: the callback runs (in a thread)
    view.wait()
    assert len(view.output.outputs) == 1, "replaced, not appended"
    assert view.data["text/plain"] == "<kit chart '5 points'>"
    assert view.data[VEGA] != first[VEGA]
    assert view.set(colour="red", n=4)["text/plain"] == "<kit chart '4 points'>"
    assert '"red"' in json.dumps(view.data[VEGA])
    assert len(view.output.outputs) == 1
    assert capsys.readouterr().out == "", "nothing is display()ed on the side"


def test_set_recomputes_once():
    calls = []
    view = bind(lambda a, b: calls.append((a, b)), a=w.IntSlider(), b=w.IntSlider())
    view.set(a=1, b=2)
    assert calls == [(0, 0), (1, 2)]


def test_the_same_values_give_the_same_output():
    view = bind(points, n=w.IntSlider(value=3))
    first = view.data
    view.set(n=4)
    assert view.set(n=3) == first


def test_a_redraw_shows_what_ipython_would_display():
    """The first draw goes through IPython's formatter (altair checks the whole spec); a
    redraw hands the chart to the renderer unchecked: the same output."""
    from IPython.core.formatters import DisplayFormatter

    view = bind(points, n=w.IntSlider(value=3))
    view.set(n=4)
    again = bind(points, n=w.IntSlider(value=4))
    assert view.output.outputs == again.output.outputs
    data, metadata = DisplayFormatter().format(view._result)
    assert view.output.outputs[0]["metadata"] == metadata
    assert view.data[VEGA]["$schema"] == data[VEGA]["$schema"]


def test_an_error_shows_as_one_line_not_a_traceback():
    def fragile(n):
        if n > 5:
            raise ValueError(f"n must be at most 5, got {n}\nsecond line of detail")
        return points(n)

    view = bind(fragile, n=w.IntSlider(value=2, max=10))
    (out,) = view.output.outputs
    assert out["output_type"] == "display_data"
    view.set(n=7)
    (out,) = view.output.outputs
    assert out == {"output_type": "stream", "name": "stderr",
                   "text": "ValueError: n must be at most 5, got 7\n"}
    assert view.data == {"text/plain": "ValueError: n must be at most 5, got 7\n"}
    assert isinstance(view.error, ValueError) and view.error.__traceback__ is not None
    view.set(n=4)  # and it recovers
    assert view.data["text/plain"] == "<kit chart '4 points'>" and view.error is None


def test_an_error_without_a_message_shows_its_type():
    def broken(n):
        raise KeyError

    assert bind(broken, n=w.IntSlider()).data == {"text/plain": "KeyError\n"}


def test_a_pandas_dataframe_is_shown_as_a_table():
    view = bind(lambda n: pd.DataFrame({"x": range(n)}), n=w.IntSlider(value=2))
    assert "<table" in view.data["text/html"]
    view.set(n=0)
    assert "<table" in view.data["text/html"]


def test_a_spark_dataframe_is_shown_as_a_table_of_its_first_rows(spark):
    view = bind(lambda n: spark.range(n), n=w.IntSlider(value=3, max=1000))
    assert view.data["text/html"].count("<tr") == 1 + 3
    view.set(n=1000)
    assert view.data["text/html"].count("<tr") == 1 + MAX_ROWS


def test_anything_ipython_can_display_and_none():
    view = bind(lambda word: None if word == "none" else word.upper(),
                word=w.Text(value="late"))
    assert view.data == {"text/plain": "'LATE'"}
    view.set(word="none")
    assert view.output.outputs == ({"output_type": "display_data", "data": {}, "metadata": {}},)


def test_the_cell_output_is_a_short_stable_line():
    view = bind(points, n=w.IntSlider(value=3))
    assert repr(view) == "bind(points, n=3)"
    assert view._repr_mimebundle_()["text/plain"] == "bind(points, n=3)"


def test_controls_come_first_then_the_output():
    slider, dropdown = w.IntSlider(), w.Dropdown(options=["a"])
    view = bind(lambda n, s: n, n=slider, s=dropdown)
    controls, status, output = view.children
    assert controls.children == (slider, dropdown) and output is view.output
    assert status is view.status and status.value == "", "the status line is empty when idle"


def test_controls_must_name_parameters_and_be_widgets():
    with pytest.raises(TypeError, match="points has no parameter size"):
        bind(points, size=w.IntSlider())
    with pytest.raises(TypeError, match="control 'n' is a int"):
        bind(points, n=3)
    bind(lambda **kw: kw, anything=w.IntSlider())  # **kwargs takes any name


def _title(view) -> dict:
    return view.data[VEGA]["title"]


def test_the_chart_title_names_the_values_it_shows():
    view = bind(points, n=w.IntSlider(value=3, description="points"), colour=w.Dropdown(options=["red", "blue"]))
    assert _title(view)["text"] == "3 points"
    assert _title(view)["subtitle"] == ["points = 3, colour = red"]
    view.set(n=4, colour="blue")
    assert _title(view)["subtitle"] == ["points = 4, colour = blue"]
    untitled = bind(lambda n: alt.Chart(pd.DataFrame({"x": [n]})).mark_point().encode(x="x"), n=w.IntSlider())
    assert _title(untitled)["text"] == "n = 0"


@pytest.mark.parametrize("title, text, subtitle", [
    (alt.Undefined, "n = {}", None),
    ("counts", "counts", ["n = {}"]),
    (["two", "lines"], ["two", "lines"], ["n = {}"]),
    (alt.TitleParams("counts", subtitle="per user", color="red"), "counts", ["n = {}", "per user"]),
])
def test_every_kind_of_title_gets_the_line_on_the_first_draw_and_on_redraws(title, text, subtitle):
    """The first draw titles the chart (altair checks it); a redraw titles its spec: the same title."""
    def layered(n):
        base = alt.Chart(pd.DataFrame({"x": [n]})).encode(x="x")
        return alt.vconcat(alt.layer(base.mark_point(), base.mark_tick()), title=title)

    view = bind(layered, n=w.IntSlider(value=1))
    for n in (1, 2):
        view.set(n=n)
        shown = _title(view)
        assert shown["text"] == (text.format(n) if isinstance(text, str) else text)
        assert shown.get("subtitle") == (None if subtitle is None else [subtitle[0].format(n)] + subtitle[1:])
        assert shown.get("color") == ("red" if isinstance(title, alt.TitleParams) else None)


def test_a_long_line_of_values_wraps_within_the_chart():
    controls = {f"p{i}": w.Dropdown(options=[f"Purging(CountTrigger({i}))"], description=f"trigger {i}")
                for i in range(6)}
    view = bind(lambda **v: alt.Chart(pd.DataFrame({"x": [1]})).mark_point().encode(x="x").properties(
        title="windows"), **controls)
    subtitle = _title(view)["subtitle"]
    assert len(subtitle) > 1 and all(len(line) <= 90 for line in subtitle)
    assert " ".join(subtitle) == ", ".join(f"trigger {i} = Purging(CountTrigger({i}))" for i in range(6))
    assert all(line.startswith("trigger ") and line.endswith((",", ")")) for line in subtitle), \
        "lines break between pairs, never inside one"


def test_the_values_line_wraps_between_pairs_not_at_a_space_inside_one():
    controls = {f"p{i}": w.IntSlider(value=5, description=f"delay {i} (min)") for i in range(8)}
    view = bind(lambda **v: points(2), **controls)
    subtitle = _title(view)["subtitle"]
    assert subtitle == ["delay 0 (min) = 5, delay 1 (min) = 5, delay 2 (min) = 5, delay 3 (min) = 5,",
                        "delay 4 (min) = 5, delay 5 (min) = 5, delay 6 (min) = 5, delay 7 (min) = 5"]
    # the old wrap, at any space within 90 characters, gave "..., delay 3 (min) = 5, delay" / "4 (min) = 5, ..."


def test_hidden_controls_are_not_named_and_follow_the_values():
    shape = w.Dropdown(options=["tumbling", "sliding"])
    slide = w.IntSlider(value=5, description="slide")
    calls = []
    view = bind(lambda shape, slide: calls.append(slide) or points(3), shape=shape, slide=slide)
    assert view.visible_when(slide=lambda v: v["shape"] == "sliding") is view
    assert slide.layout.display == "none" and calls == [5], "hidden without a recomputation"
    assert _title(view)["subtitle"] == ["shape = tumbling"]
    view.set(shape="sliding")
    assert slide.layout.display is None and _title(view)["subtitle"] == ["shape = sliding, slide = 5"]
    with pytest.raises(TypeError, match="no control named gap; the controls are shape, slide"):
        view.visible_when(gap=lambda v: True)


def test_labels_get_room_for_the_longest_description():
    short, long = w.IntSlider(description="n"), w.IntSlider(description="orders delay (min)")
    bind(lambda a, b: None, a=short, b=long)
    assert short.style.description_width == long.style.description_width == "20ch"
    assert short.layout.width == long.layout.width == "calc(20ch + 22em)", "the label leaves the track its room"
    set_by_user = w.IntSlider(description="x", style={"description_width": "50px"})
    bind(lambda a: None, a=set_by_user)
    assert set_by_user.style.description_width == "50px"


def test_text_boxes_redraw_on_enter_not_at_every_key():
    pattern, define, n = w.Text(value="A+ C"), w.Textarea(value="A AS A.x > 1"), w.IntSlider()
    bind(lambda p, d, n: None, p=pattern, d=define, n=n)
    assert pattern.continuous_update is False and define.continuous_update is False
    assert n.continuous_update is True, "a slider still follows the drag"


def test_rapid_changes_coalesce_and_only_the_latest_values_are_drawn():
    import threading

    started, release, calls = threading.Event(), threading.Event(), []

    def slow(n):
        calls.append(n)
        if n == 1:           # the first change's redraw is still running while the control moves on
            started.set()
            release.wait(10)
        return points(n)

    slider = w.IntSlider(value=0, max=10)
    view = bind(slow, n=slider)
    slider.value = 1
    assert started.wait(10)
    assert view.status.value == "<span class='kit-computing'>computing n = 1…</span>", "text, no emoji a font may lack"
    for n in (2, 3, 4):      # while 1 computes: superseded, never computed
        slider.value = n
    release.set()
    view.wait(10)
    assert calls == [0, 1, 4]
    assert view.data["text/plain"] == "<kit chart '4 points'>" and view.status.value == ""


def test_a_superseded_redraw_cancels_its_spark_jobs(spark):
    import threading

    from pyspark.sql import functions as F

    started = threading.Event()

    def count(seconds):
        if seconds:
            started.set()
        slow = F.udf(lambda x: __import__("time").sleep(seconds) or x, "long")
        return pd.DataFrame({"n": [spark.range(2, numPartitions=1).select(slow("id")).count()]})

    slider = w.IntSlider(value=0, max=100)
    view = bind(count, seconds=slider)
    slider.value = 60        # a minute of Spark work...
    assert started.wait(10)
    __import__("time").sleep(1)
    slider.value = 0         # ...superseded: its job is cancelled, the new value drawn at once
    view.wait(30)
    assert view._idle.is_set(), "the superseded job was not cancelled"
    assert "<td>2</td>" in view.data["text/html"] and view.error is None


def test_redraws_run_in_one_long_lived_thread():
    import threading

    threads = []

    def draw(n):
        threads.append(threading.current_thread())
        return points(n)

    first, second = w.IntSlider(value=0, max=10), w.IntSlider(value=0, max=10)
    views = [bind(draw, n=first), bind(draw, n=second)]
    for n in (1, 2):
        first.value = n
        views[0].wait(10)
        second.value = n
        views[1].wait(10)
    moved = threads[2:]     # the first two drew in this thread, when bound
    assert len(moved) == 4 and len(set(moved)) == 1 and moved[0] is not threading.main_thread()
    assert views[0].data["text/plain"] == views[1].data["text/plain"] == "<kit chart '2 points'>"


def test_values_drawn_before_are_drawn_again_without_recomputing():
    calls = []

    def fn(n):
        calls.append(n)
        return points(n)

    view = bind(fn, n=w.IntSlider(value=3, min=1, max=10))
    first = view.data
    view.set(n=4)
    assert view.set(n=3) == first and calls == [3, 4], "3 was drawn before: kept, not recomputed"
    view.set(n=4)
    assert calls == [3, 4]
    view.refresh()
    assert calls == [3, 4, 4], "refresh() recomputes"
    view.set(n=3)
    assert calls == [3, 4, 4, 3], "refresh() forgot the other values too"


def test_what_is_kept_is_forgotten_when_a_cell_runs():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    calls = []
    shell.user_ns["fn"] = lambda n: calls.append(n) or points(n + shell.user_ns.get("extra", 0))
    view = bind(shell.user_ns["fn"], n=w.IntSlider(value=3, min=1, max=10))
    view.set(n=4)
    shell.run_cell("extra = 1")   # the function reads it: what was drawn is no longer its answer
    assert view.set(n=3)["text/plain"] == "<kit chart '4 points'>"
    assert calls == [3, 4, 3]


def test_a_widget_keeps_what_the_cell_that_binds_it_drew_and_forgets_it_after_the_next_cell():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    calls = []
    shell.user_ns.update(bind=bind, w=w, points=points, calls=calls)
    shell.run_cell("view = bind(lambda n: calls.append(n) or points(n), n=w.IntSlider(value=3, min=1, max=10))")
    view = shell.user_ns["view"]
    view.set(n=4)
    view.set(n=3)
    assert calls == [3, 4], "the first drawing, made in the cell that bound the widget, is kept"
    shell.run_cell("x = 1")
    view.set(n=4)
    view.set(n=3)
    assert calls == [3, 4, 4, 3], "a later cell forgets what was drawn before it began"


def test_visible_when_keeps_the_output_it_retitles():
    calls = []
    view = bind(lambda shape, slide: calls.append(shape) or points(3), shape=w.Dropdown(options=["a", "b"]),
                slide=w.IntSlider(value=5, description="slide")).visible_when(slide=lambda v: v["shape"] == "b")
    first = view.data
    view.set(shape="b")
    assert view.set(shape="a") == first and calls == ["a", "b"], "the retitled first drawing is kept"


def test_a_failed_redraw_is_not_kept_and_too_many_values_push_the_oldest_out(monkeypatch):
    import kit.widgets as kw

    monkeypatch.setattr(kw.Bound, "_keeps", 2)
    calls, fail = [], {"now": False}

    def fn(n):
        calls.append(n)
        if fail["now"]:
            raise ValueError("not now")
        return points(n)

    view = bind(fn, n=w.IntSlider(value=1, min=1, max=10))
    fail["now"] = True
    view.set(n=2)
    fail["now"] = False
    assert view.set(n=2)["text/plain"] == "<kit chart '2 points'>" and calls == [1, 2, 2]
    view.set(n=3)              # kept: 2, 3 (1 pushed out)
    view.set(n=2)
    view.set(n=1)
    assert calls == [1, 2, 2, 3, 1]


def test_a_spark_dataframe_drawn_is_not_kept(spark):
    calls = []

    def fn(n):
        calls.append(n)
        return spark.range(n)

    view = bind(fn, n=w.IntSlider(value=2, min=1, max=10))
    view.set(n=3)
    view.set(n=2)
    assert calls == [2, 3, 2], "what a Spark DataFrame reads is owned by it, not by the widget"
