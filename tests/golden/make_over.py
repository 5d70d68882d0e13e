"""Write tests/golden/flink-2.3/over.json: real Flink 2.3's non-time OVER aggregates (no Top-N
filter), run as make_changelog.py runs its scenarios (not a test; see tests/golden/README.md)::

    .venv-flink/bin/python tests/golden/make_over.py
"""

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_changelog as m  # noqa: E402

T = ("t", "k STRING, s INT, x DOUBLE",
     [["a", 3, 1.0], ["a", 1, 2.0], ["b", 5, None], ["a", 3, 4.0], ["a", 2, 0.0], ["a", 1, 3.0],
      ["b", 4, 6.0], ["a", 0, 1.0], ["a", 3, None]], None)
U = ("u", "`user` STRING, url STRING",
     [["Mary", "./a"], ["Bob", "./b"], ["Liz", "./c"], ["Bob", "./d"], ["Mary", "./e"], ["Tom", "./f"],
      ["Liz", "./g"], ["Liz", "./h"], ["Tom", "./i"]], None)
CASES = [
 ("range_aggs_append", "RANGE aggregates and RANK/DENSE_RANK over an append input (ties, NULLs, a 0)", [T],
  "SELECT k, s, x, SUM(x) OVER w AS sx, COUNT(x) OVER w AS cx, COUNT(*) OVER w AS c, MIN(x) OVER w AS mn, "
  "MAX(x) OVER w AS mx, AVG(x) OVER w AS av, RANK() OVER w AS r, DENSE_RANK() OVER w AS dr "
  "FROM t WINDOW w AS (PARTITION BY k ORDER BY s)"),
 ("rows_aggs_append", "ROW_NUMBER with ROWS aggregates over an append input", [T],
  "SELECT k, s, x, ROW_NUMBER() OVER (PARTITION BY k ORDER BY s) AS rn, "
  "SUM(x) OVER (PARTITION BY k ORDER BY s ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS sx, "
  "MAX(x) OVER (PARTITION BY k ORDER BY s ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS mx FROM t"),
 ("range_over_updating", "RANGE SUM/RANK over a GROUP BY's changelog", [U],
  "SELECT `user`, c, SUM(c) OVER (ORDER BY c) AS sc, RANK() OVER (ORDER BY c) AS r "
  "FROM (SELECT `user`, COUNT(*) AS c FROM u GROUP BY `user`)"),
 ("rows_over_updating", "ROW_NUMBER over a GROUP BY's changelog", [U],
  "SELECT `user`, c, ROW_NUMBER() OVER (ORDER BY c) AS rn FROM (SELECT `user`, COUNT(*) AS c FROM u GROUP BY `user`)"),
 ("range_duplicate_rows", "RANK over an updating input holding equal rows", [U],
  "SELECT c, RANK() OVER (ORDER BY c) AS r FROM (SELECT `user`, COUNT(*) AS c FROM u GROUP BY `user`)"),
 ("rows_duplicate_rows", "ROW_NUMBER over an updating input holding equal rows", [U],
  "SELECT c, ROW_NUMBER() OVER (ORDER BY c) AS rn FROM (SELECT `user`, COUNT(*) AS c FROM u GROUP BY `user`)"),
 ("rows_avg_append", "AVG over ROWS (accumulator read back as a value?)", [T],
  "SELECT k, s, x, AVG(x) OVER (PARTITION BY k ORDER BY s ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS av FROM t"),
 ("two_order_columns", "two order columns", [T],
  "SELECT k, s, x, SUM(x) OVER (PARTITION BY k ORDER BY s, x) AS sx FROM t"),
]


def main():
    m.TMP = Path(tempfile.mkdtemp(prefix="flink-kit-over-"))
    out = []
    for name, says, tables, q in CASES:
        c = dict(name=name, says=says, tables=tables, query=q, config={}, expect="either", setup=(), repeat=1,
                 run=None, note=None, explain=None, stream=False)
        try:
            out.append(m.run_case(c))
        except Exception as e:
            out.append({"name": name, "crash": repr(e)})
        print(name, "error" if "error" in out[-1] else len(out[-1].get("rows", [])), flush=True)
    (m.OUT / "over.json").write_text(json.dumps({"flink_version": m.FLINK_VERSION, "group": "over", "base_config": m.BASE_CONFIG, "scenarios": out}, indent=1) + "\n")


if __name__ == "__main__":
    main()
