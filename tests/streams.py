"""Random input for the window property tests: small streams stacked one after the other."""

from hypothesis import strategies as st

SPAN = 100_000   # each of the stacked streams in its own stretch of time


def stacked(draw, **columns) -> dict:
    """8 small streams, one after the other in one input, with keys of their own (so one
    Spark job checks them all): ``keys`` and ``times`` (disordered, some late), and for
    each ``name=strategy`` of ``columns`` a value per row. ``{"keys": [...], "times": [...], name: [...]}``"""
    rows = {"keys": [], "times": [], **{name: [] for name in columns}}
    for case in range(8):
        t = draw(st.integers(0, 20))
        for _ in range(draw(st.integers(1, 10))):
            t += draw(st.integers(0, 5))
            rows["keys"].append(f"{case}{draw(st.sampled_from('ab'))}")
            rows["times"].append(case * SPAN + t - draw(st.sampled_from([0, 0, 2, 7, 20])))
            for name, strategy in columns.items():
                rows[name].append(draw(strategy))
    return rows
