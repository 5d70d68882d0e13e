"""Write the dynamic-table / changelog goldens of real Apache Flink 2.3.0 (not a test).

Run from the repository root, inside the real-Flink environment (``make .venv-flink/.installed``)
with Java 17 on PATH or in JAVA_HOME (``.venv/bin/python -c "import kit.java as j; print(j.java_home())"``
prints the JAVA_HOME to use, or None when ``java`` on PATH will do)::

    .venv-flink/bin/python tests/golden/make_changelog.py            # every group
    .venv-flink/bin/python tests/golden/make_changelog.py joins ttl  # some groups

Each scenario runs as its own job in a fresh ``TableEnvironment`` in STREAMING mode with
parallelism 1 and session time zone UTC. Inputs are CSV files read by the ``filesystem``
connector (one split at parallelism 1: rows arrive in file order). Where the arrival *time*
matters (two-input interleaving, idle-state TTL) a Python scalar function ``pace(ms)`` sleeps
``ms`` milliseconds on each row before the row goes on (Python bundle size 1, so each row is
handed downstream before the next one is read). The result is collected with
``TableResult.collect()`` and each row's ``get_row_kind()``. Output:
``tests/golden/flink-2.3/<group>.json``; see ``tests/golden/README.md``.
(Importing this module runs nothing and needs no PyFlink: pytest's doctest collection
imports it.)
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import re
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "flink-2.3"
FLINK_VERSION = "2.3.0"
BASE_CONFIG = {"parallelism.default": "1", "table.local-time-zone": "UTC"}
# Options set whenever a scenario uses pace(): Python rows are handed on one at a time.
# and every record is flushed to the network at once (no 100 ms buffer timeout between hops).
PACE_CONFIG = {"python.fn-execution.bundle.size": "1", "python.fn-execution.bundle.time": "1",
               "execution.buffer-timeout.interval": "0 ms", "python.executable": sys.executable}
TMP = Path(tempfile.gettempdir())  # replaced by a fresh directory in main()
GROUPS: dict[str, dict] = {}


def group(name: str, about: str, **notes) -> None:
    GROUPS[name] = {"about": about, "notes": notes, "cases": []}


def case(grp: str, name: str, says: str, tables: list, query: str, *, config: dict | None = None,
         expect: str = "rows", setup: tuple = (), repeat: int = 1, run=None, note: str | None = None,
         explain: str | None = None, stream: bool = False) -> None:
    """One scenario. ``tables``: (name, columns DDL, rows, extra WITH options or None); the CSV
    path is filled in. ``query``: a SELECT (collected), or an INSERT INTO (``setup`` creates
    the sink). ``expect``: "rows" or "error". ``run``: a custom runner ``run(env, query)``
    returning ``(columns, types, rows)``. ``repeat``: run that many times and compare."""
    GROUPS[grp]["cases"].append(dict(name=name, says=says, tables=tables, query=query,
                                     config=config or {}, expect=expect, setup=setup,
                                     repeat=repeat, run=run, note=note, explain=explain,
                                     stream=stream))


# --------------------------------------------------------------------------- running

def _csv_value(v) -> str:
    if v is None:
        return "NULL"
    s = str(v)
    if any(c in s for c in ',"\n'):
        s = '"' + s.replace('"', '""') + '"'
    return s


def _ddl(name: str, columns: str, extra: dict | None, path: str) -> str:
    opts = {"connector": "filesystem", "path": path, "format": "csv", "csv.null-literal": "NULL"}
    opts.update(extra or {})
    with_ = ",\n  ".join(f"'{k}' = '{v}'" for k, v in opts.items())
    return f"CREATE TEMPORARY TABLE {name} (\n  {columns}\n) WITH (\n  {with_}\n)"


def _json_value(v):
    if isinstance(v, (_dt.datetime, _dt.date, _dt.time)):
        return v.isoformat(sep=" ") if isinstance(v, _dt.datetime) else v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, (tuple, list)) or type(v).__name__ == "Row":
        return [_json_value(x) for x in v]
    return v


def _message(e: BaseException) -> str:
    """The Flink/Calcite message without the Java stack trace: the exception's text up to the
    first ``at ...`` frame, then each distinct 'Caused by' line."""
    text = str(e)
    lines, causes = [], []
    in_trace = False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("at ") or s.startswith("... ") and s.endswith("more"):
            in_trace = True
            continue
        if s.startswith("Caused by:"):
            causes.append(s)
            in_trace = True
            continue
        if not in_trace and s:
            lines.append(s)
    lines = [ln[2:] if ln.startswith(": ") else ln for ln in lines
             if not ln.startswith(("py4j.protocol.Py4JJavaError", "An error occurred while calling"))
             and ln not in (":",)]
    out = lines[:12]
    for c in causes:
        if not any(c.endswith(x) or x.endswith(c[len("Caused by: "):]) for x in out):
            out.append(c)
    return "\n".join(out).strip()


def _physical_plan(text: str) -> str:
    m = re.search(r"== Optimized Physical Plan ==\n(.*?)(?:\n== |\Z)", text, re.S)
    return (m.group(1) if m else text).strip()


def _sink_plan(env, query: str) -> str:
    """EXPLAIN CHANGELOG_MODE of ``INSERT INTO`` a ``print`` sink of the query's columns (only
    explained, never run): a sink that asks for -U rows, as ``collect()`` does. The plan of a bare
    SELECT is made for a consumer that may take upserts: its top shows no UB (``[I,UA]``), and a
    ``blackhole`` sink gets the same; ``collect()`` still receives -U rows."""
    from pyflink.table import ExplainDetail
    try:
        resolved = env.sql_query(query)._j_table.getResolvedSchema()
        cols = ", ".join(f"`{n}` {str(t).replace(' *ROWTIME*', '').replace(' *PROCTIME*', '')}"
                         for n, t in zip(resolved.getColumnNames(), resolved.getColumnDataTypes()))
        env.execute_sql(f"CREATE TEMPORARY TABLE kit_print_sink ({cols}) WITH ('connector' = 'print')")
        return _physical_plan(env.explain_sql(f"INSERT INTO kit_print_sink {query}",
                                              ExplainDetail.CHANGELOG_MODE))
    except Exception as e:  # noqa: BLE001
        return "EXPLAIN failed: " + _message(e)


def _new_env(config: dict, stream: bool = False):
    """A fresh streaming TableEnvironment; with ``stream``, a StreamTableEnvironment over a new
    StreamExecutionEnvironment (for DataStream inputs and conversions)."""
    from pyflink.table import EnvironmentSettings, TableEnvironment
    settings = EnvironmentSettings.in_streaming_mode()
    if stream:
        from pyflink.common import Configuration
        from pyflink.datastream import StreamExecutionEnvironment
        from pyflink.table import StreamTableEnvironment
        conf = Configuration()
        for k, v in {**BASE_CONFIG, **config}.items():
            conf.set_string(k, v)
        senv = StreamExecutionEnvironment.get_execution_environment(conf)
        senv.set_parallelism(1)
        env = StreamTableEnvironment.create(senv, settings)
        env._kit_senv = senv
    else:
        env = TableEnvironment.create(settings)
    for k, v in {**BASE_CONFIG, **config}.items():
        env.get_config().set(k, v)
    return env


def _sleep_then_pass(row):
    """The paced stream's map: sleep the row's last field (``d``, milliseconds), pass the row on."""
    if row[-1]:
        time.sleep(row[-1] / 1000.0)
    return row


_TYPES = {"STRING": "STRING", "INT": "INT", "BIGINT": "LONG", "BOOLEAN": "BOOLEAN"}


def _paced_stream(env, name: str, columns: str, rows: list) -> str:
    """Register view ``name`` over a DataStream: ``from_collection(rows)`` (one source, file
    order), then a Python ``map`` that sleeps ``d`` ms (the last column) before passing each row
    on, then ``from_data_stream``. Every use of the view reads this one stream."""
    from pyflink.common import Row, Types
    names, types = [], []
    for col in columns.split(","):
        n, t = col.split()
        names.append(n.strip("`"))
        types.append(getattr(Types, _TYPES[t.upper()])())
    info = Types.ROW_NAMED(names, types)
    ds = env._kit_senv.from_collection([Row(*r) for r in rows], type_info=info)
    ds = ds.map(_sleep_then_pass, output_type=info)
    env.create_temporary_view(name, env.from_data_stream(ds))
    return (f"-- {name}: DataStream from_collection(rows) -> Python map sleeping `{names[-1]}` ms "
            f"per row -> from_data_stream, registered as view {name} ({columns})")


def _register_pace(env) -> None:
    from pyflink.table import DataTypes
    from pyflink.table.udf import udf

    @udf(result_type=DataTypes.BOOLEAN(), deterministic=False)
    def pace(ms):
        if ms:
            time.sleep(ms / 1000.0)
        return True

    env.create_temporary_function("pace", pace)


def _collect(env, query: str):
    tbl = env.sql_query(query)
    resolved = tbl._j_table.getResolvedSchema()  # exact SQL types, with NOT NULL
    cols = [str(n) for n in resolved.getColumnNames()]
    types = [str(t) for t in resolved.getColumnDataTypes()]
    rows = []
    with tbl.execute().collect() as results:
        for r in results:
            rows.append({"kind": str(r.get_row_kind()), "values": [_json_value(v) for v in r]})
    return cols, types, rows


def run_case(c: dict) -> dict:
    from pyflink.table import ExplainDetail
    uses_pace = "pace(" in c["query"] or any("pace(" in s for s in c["setup"])
    config = {**c["config"]}
    env_config = {**config, **(PACE_CONFIG if uses_pace else {})}
    ddls, inputs = [], {}
    rec = {"flink_version": FLINK_VERSION, "name": c["name"], "says": c["says"]}
    runs = []
    for attempt in range(c["repeat"]):
        stream = c["stream"] or any(t[3] == "paced_stream" for t in c["tables"])
        if any(t[3] == "paced_stream" for t in c["tables"]):
            env_config.update(PACE_CONFIG)
        env = _new_env(env_config, stream)
        if uses_pace:
            _register_pace(env)
        ddls = []
        for name, columns, rows, extra in c["tables"]:
            if extra == "paced_stream":
                ddls.append(_paced_stream(env, name, columns, rows))
                inputs[name] = {"columns": [x.split()[0].strip("`") for x in columns.split(",")],
                                "rows": rows}
                continue
            path = TMP / f"{name}.csv"
            path.write_text("".join(",".join(_csv_value(v) for v in row) + "\n" for row in rows))
            env.execute_sql(_ddl(name, columns, extra, str(path)))
            ddls.append(_ddl(name, columns, extra, f"{name}.csv"))
            inputs[name] = {"columns": [x.strip().split()[0].strip("`") for x in
                                        re.split(r",(?![^()]*\))", columns)
                                        if not x.strip().upper().startswith(("WATERMARK", "PRIMARY"))
                                        and " AS " not in x.upper()],
                            "rows": rows}
        for stmt in c["setup"]:
            env.execute_sql(stmt)
        if attempt == 0:
            target = c["explain"] or c["query"]
            try:
                rec_plan = _physical_plan(env.explain_sql(target, ExplainDetail.CHANGELOG_MODE))
            except Exception as e:  # noqa: BLE001
                rec_plan = "EXPLAIN failed: " + _message(e)
        if attempt == 0 and c["explain"] is None and target.lstrip().upper().startswith(("SELECT", "WITH")):
            rec_sink_plan = _sink_plan(env, target)
        t0 = time.time()
        try:
            if c["run"] is not None:
                cols, types, rows = c["run"](env, c["query"])
            elif c["query"].lstrip().upper().startswith("INSERT"):
                env.execute_sql(c["query"]).wait()
                cols, types, rows = [], [], []
            else:
                cols, types, rows = _collect(env, c["query"])
            runs.append({"columns": cols, "types": types, "rows": rows,
                         "seconds": round(time.time() - t0, 3)})
        except Exception as e:  # noqa: BLE001
            runs.append({"error": _message(e), "exception": type(e).__name__,
                         "seconds": round(time.time() - t0, 3)})
    first = runs[0]
    rec.update({"ddl": ddls, "config": config, "inputs": inputs, "query": c["query"]})
    if c["setup"]:
        rec["setup"] = list(c["setup"])
    if uses_pace or any(t[3] == "paced_stream" for t in c["tables"]):
        rec["pace_config"] = {k: v for k, v in PACE_CONFIG.items() if k != "python.executable"}
    if "error" in first:
        rec.update({"error": first["error"], "exception": first["exception"]})
    else:
        rec.update({"columns": first["columns"], "types": first["types"], "rows": first["rows"]})
    rec["explain_changelog_mode"] = rec_plan
    if c["explain"] is None and c["query"].lstrip().upper().startswith(("SELECT", "WITH")):
        rec["explain_changelog_mode_print_sink"] = rec_sink_plan
    if c["explain"]:
        rec["explained"] = c["explain"]
    if c["repeat"] > 1:
        same = all(r.get("rows", r.get("error")) == first.get("rows", first.get("error"))
                   for r in runs)
        rec["runs"] = c["repeat"]
        rec["stable"] = same
        if not same:
            rec["other_runs"] = [r.get("rows", r.get("error")) for r in runs[1:]]
    if c["note"]:
        rec["note"] = c["note"]
    expected = c["expect"]
    if expected != "either" and (expected == "error") != ("error" in first):
        rec["unexpected"] = f"expected {expected}, got {'error' if 'error' in first else 'rows'}"
    rec["seconds"] = first["seconds"]
    return rec


def write_group(name: str) -> Path:
    g = GROUPS[name]
    cases = []
    for c in g["cases"]:
        t0 = time.time()
        rec = run_case(c)
        kinds = (" ".join(str(r["kind"]) for r in rec["rows"]) if "rows" in rec
                 else "ERROR " + rec["error"].splitlines()[0][:100])
        print(f"[{name}] {c['name']} ({time.time() - t0:.1f}s): {kinds}", flush=True)
        cases.append(rec)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.json"
    doc = {"flink_version": FLINK_VERSION, "group": name, "about": g["about"],
           "mode": "streaming", "base_config": BASE_CONFIG, **g["notes"], "scenarios": cases}
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return path


# --------------------------------------------------------------------------- scenarios

CLICKS = "`user` STRING, url STRING"
KV = "`user` STRING, v INT"


def _clicks(*users_urls):
    return [list(x) for x in users_urls]


# ---- group_agg
group("group_agg", "Non-windowed GROUP BY aggregates over an append-only input: which changes emit, and how.")

ROWS5 = [["Mary", "./home"], ["Bob", "./cart"], ["Mary", "./prod?id=1"], ["Liz", "./home"],
         ["Bob", "./prod?id=5"]]
case("group_agg", "count_star",
     "Each input row of a group emits +I on its first row, then -U old/+U new.",
     [("t", CLICKS, ROWS5, None)],
     "SELECT `user`, COUNT(*) AS c FROM t GROUP BY `user`")
NULL_URLS = [["Mary", "./home"], ["Bob", None], ["Mary", None], ["Bob", "./cart"], ["Mary", "./x"]]
case("group_agg", "count_col_nulls",
     "COUNT(col) skips NULLs: a group whose first row is NULL is inserted with 0; a NULL that leaves the count unchanged emits nothing.",
     [("t", CLICKS, NULL_URLS, None)],
     "SELECT `user`, COUNT(url) AS c FROM t GROUP BY `user`")
case("group_agg", "count_star_and_count_col_nulls",
     "COUNT(*) changes on every row, so every row emits even when COUNT(url) does not change.",
     [("t", CLICKS, NULL_URLS, None)],
     "SELECT `user`, COUNT(*) AS n, COUNT(url) AS c FROM t GROUP BY `user`")
case("group_agg", "count_distinct",
     "COUNT(DISTINCT) emits only when the distinct count changes; a repeated value emits nothing.",
     [("t", CLICKS, [["Mary", "a"], ["Mary", "b"], ["Mary", "a"], ["Bob", "a"], ["Mary", None],
                     ["Bob", "a"], ["Mary", "c"]], None)],
     "SELECT `user`, COUNT(DISTINCT url) AS d FROM t GROUP BY `user`")
SUMS = [["Mary", 5], ["Bob", None], ["Mary", 0], ["Bob", 3], ["Mary", -2], ["Liz", None]]
case("group_agg", "sum_int",
     "SUM of INT is INT; adding 0 emits nothing; a group of only NULLs is inserted with NULL; SUM ignores NULLs.",
     [("t", KV, SUMS, None)],
     "SELECT `user`, SUM(v) AS s FROM t GROUP BY `user`")
AVGS = [["Mary", 1], ["Mary", 2], ["Bob", 3], ["Mary", 4], ["Bob", 4], ["Bob", None]]
case("group_agg", "avg_int",
     "AVG of an INT column is INT (truncated: avg(1,2) = 1); an unchanged truncated average emits nothing.",
     [("t", KV, AVGS, None)],
     "SELECT `user`, AVG(v) AS a FROM t GROUP BY `user`")
case("group_agg", "avg_double",
     "AVG(CAST(v AS DOUBLE)) gives the exact average.",
     [("t", KV, AVGS, None)],
     "SELECT `user`, AVG(CAST(v AS DOUBLE)) AS a FROM t GROUP BY `user`")
MINMAX = [["Mary", 5], ["Mary", 3], ["Mary", 7], ["Bob", 2], ["Mary", 7], ["Bob", 2], ["Mary", 1]]
case("group_agg", "max_smaller_value_no_emission",
     "MAX: a smaller or equal value leaves the result unchanged and emits nothing.",
     [("t", KV, MINMAX, None)],
     "SELECT `user`, MAX(v) AS m FROM t GROUP BY `user`")
case("group_agg", "min",
     "MIN: a larger or equal value emits nothing; a new minimum emits -U/+U.",
     [("t", KV, MINMAX, None)],
     "SELECT `user`, MIN(v) AS m FROM t GROUP BY `user`")
case("group_agg", "several_aggregates",
     "Several aggregates in one query: one row per input row whose change alters any of them.",
     [("t", KV, MINMAX, None)],
     "SELECT `user`, COUNT(*) AS c, SUM(v) AS s, AVG(v) AS a, MIN(v) AS mn, MAX(v) AS mx "
     "FROM t GROUP BY `user`")
case("group_agg", "several_aggregates_no_count",
     "Several aggregates without COUNT(*): a row that changes none of them emits nothing.",
     [("t", KV, MINMAX, None)],
     "SELECT `user`, MIN(v) AS mn, MAX(v) AS mx FROM t GROUP BY `user`")
case("group_agg", "max_with_state_ttl",
     "With table.exec.state.ttl set, an unchanged result is emitted anyway as -U/+U of equal rows.",
     [("t", KV, MINMAX, None)],
     "SELECT `user`, MAX(v) AS m FROM t GROUP BY `user`",
     config={"table.exec.state.ttl": "1 d"})
case("group_agg", "count_col_nulls_with_state_ttl",
     "With table.exec.state.ttl set, a NULL that leaves COUNT(url) unchanged emits -U/+U of equal rows.",
     [("t", CLICKS, NULL_URLS, None)],
     "SELECT `user`, COUNT(url) AS c FROM t GROUP BY `user`",
     config={"table.exec.state.ttl": "1 d"})
case("group_agg", "global_count",
     "A global aggregate (no GROUP BY) is one group: +I for the first row, then -U/+U per row.",
     [("t", CLICKS, ROWS5[:4], None)],
     "SELECT COUNT(*) AS c FROM t")
case("group_agg", "global_count_no_rows",
     "A global aggregate over a streaming input that yields no row emits nothing (batch would give 0).",
     [("t", KV, [["Mary", 1], ["Bob", 2]], None)],
     "SELECT COUNT(*) AS c, SUM(v) AS s FROM t WHERE v > 100")
case("group_agg", "global_max",
     "A global MAX: unchanged results emit nothing.",
     [("t", KV, MINMAX, None)],
     "SELECT MAX(v) AS m FROM t")
case("group_agg", "null_group_key",
     "NULL is a group key like any other.",
     [("t", KV, [[None, 1], ["Mary", 2], [None, 3]], None)],
     "SELECT `user`, COUNT(*) AS c, SUM(v) AS s FROM t GROUP BY `user`")
case("group_agg", "group_by_two_columns_and_expression",
     "GROUP BY several columns / an expression: one group per distinct tuple.",
     [("t", KV, [["Mary", 1], ["Mary", 2], ["Bob", 3], ["Mary", 11], ["Mary", 12]], None)],
     "SELECT `user`, v / 10 AS bucket, COUNT(*) AS c FROM t GROUP BY `user`, v / 10")

# ---- filters
group("filters", "Projections and filters (WHERE / HAVING) over an updating input (a GROUP BY's changelog).")
FROWS = [["Mary", "./home"], ["Bob", "./cart"], ["Mary", "./prod?id=1"], ["Liz", "./home"],
         ["Mary", "./x"], ["Bob", "./y"]]
INNER = "SELECT `user`, COUNT(*) AS c FROM t GROUP BY `user`"
case("filters", "inner_changelog",
     "The unfiltered changelog the other scenarios filter.",
     [("t", CLICKS, FROWS, None)], INNER)
case("filters", "where_entering",
     "A group entering a filter over updates arrives as a lone +U (its -U was filtered out).",
     [("t", CLICKS, FROWS, None)], f"SELECT * FROM ({INNER}) WHERE c >= 2")
case("filters", "where_leaving",
     "A group leaving a filter over updates leaves as a lone -U (its +U was filtered out).",
     [("t", CLICKS, FROWS, None)], f"SELECT * FROM ({INNER}) WHERE c < 2")
case("filters", "having_entering",
     "HAVING is the same filter after the aggregate: lone +U on entering.",
     [("t", CLICKS, FROWS, None)],
     "SELECT `user`, COUNT(*) AS c FROM t GROUP BY `user` HAVING COUNT(*) >= 2")
case("filters", "having_leaving",
     "HAVING COUNT(*) < 2: lone -U on leaving.",
     [("t", CLICKS, FROWS, None)],
     "SELECT `user`, COUNT(*) AS c FROM t GROUP BY `user` HAVING COUNT(*) < 2")
case("filters", "where_on_key",
     "A filter on the group key passes whole -U/+U pairs.",
     [("t", CLICKS, FROWS, None)], f"SELECT * FROM ({INNER}) WHERE `user` <> 'Bob'")
case("filters", "project_drop_key",
     "A projection that drops the key keeps each row's kind: -U/+U of bare counts.",
     [("t", CLICKS, FROWS, None)], f"SELECT c FROM ({INNER})")
case("filters", "project_expression",
     "A computed projection over updates keeps kinds row by row.",
     [("t", CLICKS, FROWS, None)], f"SELECT `user`, c * 10 AS c10, c > 1 AS many FROM ({INNER})")
case("filters", "project_constant_result",
     "A projection making -U and +U equal still emits both (no dedup of equal pairs).",
     [("t", CLICKS, FROWS, None)], f"SELECT `user`, c > 0 AS seen FROM ({INNER})")
case("filters", "where_entering_and_drop_key",
     "Filter then drop the key: lone +U rows of bare values.",
     [("t", CLICKS, FROWS, None)], f"SELECT c FROM ({INNER}) WHERE c >= 2")

# ---- cascade
group("cascade", "Aggregates over updating inputs (an aggregate of an aggregate's changelog).")
WORDS = "word STRING"
WF_INNER = "SELECT word, COUNT(*) AS cnt FROM words GROUP BY word"
WF = f"SELECT cnt, COUNT(cnt) AS freq FROM ({WF_INNER}) GROUP BY cnt"
HWHW = [["Hello"], ["World"], ["Hello"], ["World"]]
case("cascade", "word_freq_inner",
     "The inner changelog of the word-frequency cascade.",
     [("words", WORDS, HWHW, None)], WF_INNER)
case("cascade", "word_freq_back_to_zero",
     "Outer group whose count returns to zero is deleted with -D (its last row); a retraction is applied before the following +U, so each inner -U/+U pair gives two outer changes.",
     [("words", WORDS, HWHW, None)], WF)
case("cascade", "word_freq_longer",
     "Word-frequency cascade over more words: groups appear, vanish (-D) and reappear (+I).",
     [("words", WORDS, [["a"], ["b"], ["a"], ["c"], ["b"], ["a"], ["c"], ["c"]], None)], WF)
SV = [["Mary", 5], ["Bob", 3], ["Mary", 2], ["Liz", 4], ["Bob", -3]]
S_INNER = "SELECT `user`, SUM(v) AS s FROM t GROUP BY `user`"
case("cascade", "sum_inner",
     "Inner SUM per user (the input of the next two).",
     [("t", KV, SV, None)], S_INNER)
case("cascade", "global_sum_avg_over_updates",
     "Global SUM/AVG over an updating input: the inner -U is applied (retract) and emitted as its own -U/+U before the inner +U's.",
     [("t", KV, SV, None)], f"SELECT SUM(s) AS total, AVG(s) AS avg_s, COUNT(*) AS n FROM ({S_INNER})")
case("cascade", "sum_of_counts_per_count",
     "SUM grouped by an updating value: rows move between groups (retract from one, accumulate in another).",
     [("t", CLICKS, FROWS, None)],
     f"SELECT c, COUNT(*) AS users, SUM(c) AS total FROM ({INNER}) GROUP BY c")
MM = [["Mary", 1], ["Bob", 2], ["Liz", 3], ["Mary", 5], ["Bob", 4], ["Liz", 6], ["Bob", 7]]
MM_INNER = "SELECT `user`, MAX(v) AS m FROM t GROUP BY `user`"
case("cascade", "max_inner",
     "Inner MAX per user.",
     [("t", KV, MM, None)], MM_INNER)
case("cascade", "min_max_over_updates_retract_current",
     "MIN/MAX over an updating input: when the current MIN is retracted, the next smallest of the kept multiset becomes the MIN.",
     [("t", KV, MM, None)], f"SELECT MIN(m) AS lo, MAX(m) AS hi FROM ({MM_INNER})")
case("cascade", "min_over_updates_duplicates",
     "MIN over an updating input with duplicate values: retracting one copy of the minimum keeps it (multiset, not set).",
     [("t", KV, [["Mary", 1], ["Bob", 1], ["Mary", 5], ["Bob", 6]], None)],
     f"SELECT MIN(m) AS lo FROM ({MM_INNER})")
case("cascade", "count_distinct_over_updates",
     "COUNT(DISTINCT) over an updating input: a value stays counted while any row holds it.",
     [("t", CLICKS, [["Mary", "a"], ["Bob", "b"], ["Liz", "c"], ["Mary", "d"], ["Bob", "e"], ["Liz", "f"],
                     ["Liz", "g"]], None)],
     f"SELECT COUNT(DISTINCT c) AS distinct_counts, COUNT(*) AS users FROM ({INNER})")
case("cascade", "count_over_filtered_updates",
     "COUNT(*) over a filter of updates (lone +U / lone -U): a lone +U counts as an insert, a lone -U as a retraction.",
     [("t", CLICKS, FROWS, None)],
     f"SELECT COUNT(*) AS heavy_users FROM ({INNER}) WHERE c >= 2")
case("cascade", "max_over_updates_is_retract_agg",
     "MAX over updates keeps all values: its input retractions are handled (plan shows a retracting GroupAggregate).",
     [("t", KV, SV, None)], f"SELECT MAX(s) AS best FROM ({S_INNER})")
LEADER = [["a"], ["a"], ["b"], ["a"], ["b"], ["b"], ["b"]]
case("cascade", "max_of_counts_is_not_retracted",
     "MAX over counts (which only grow) is the non-retracting MAX (modified monotonicity): the leader's -U does not lower it, so no transient runner-up is emitted.",
     [("words", WORDS, LEADER, None)], f"SELECT MAX(cnt) AS top FROM ({WF_INNER})")
case("cascade", "max_of_counts_beside_count",
     "The non-retracting MAX beside a retracting COUNT(*): the -U changes the count but not the MAX.",
     [("words", WORDS, LEADER, None)], f"SELECT MAX(cnt) AS top, COUNT(*) AS words FROM ({WF_INNER})")
case("cascade", "min_of_minimums_is_not_retracted",
     "MIN over per-user minimums (which only fall) is the non-retracting MIN.",
     [("t", KV, [["Mary", 5], ["Bob", 7], ["Mary", 3], ["Bob", 2], ["Mary", 1]], None)],
     "SELECT MIN(m) AS lo FROM (SELECT `user`, MIN(v) AS m FROM t GROUP BY `user`)")
case("cascade", "max_of_minimums_is_retracted",
     "MAX over per-user minimums (which fall) keeps retracting: the leader's fall lowers it.",
     [("t", KV, [["Mary", 5], ["Bob", 7], ["Mary", 3], ["Bob", 2], ["Mary", 1]], None)],
     "SELECT MAX(m) AS hi FROM (SELECT `user`, MIN(v) AS m FROM t GROUP BY `user`)")
case("cascade", "max_of_keys_grouped_by_count_is_retracted",
     "MAX/MIN of the inner keys grouped by the inner count: the count moves, so a row leaves its old group and the MAX/MIN there retracts (a moving grouping key voids the monotonicity).",
     [("t", CLICKS, [["Mary", "a"], ["Bob", "a"], ["Mary", "a"], ["Liz", "a"], ["Bob", "a"]], None)],
     f"SELECT c, MAX(`user`) AS m, MIN(`user`) AS n FROM ({INNER}) GROUP BY c")

# ---- joins
group("joins", "Regular (non-windowed, non-temporal) joins.",
      interleaving=("Both join inputs come from ONE stream `ev` with a `side` column, split into two "
                    "views by `side`: a DataStream from_collection(rows) (one source, row order), then a "
                    "Python map that sleeps `d` ms before passing each row on (bundle size 1), then "
                    "from_data_stream. Both views read that one operator's output, so rows reach the join "
                    "in row order, d ms apart; execution.buffer-timeout.interval = 0 ms flushes each record "
                    "to the next task at once. Each "
                    "scenario was run 3 times; `stable` says whether all runs gave the same rows. The "
                    "`*_two_csv_scans` scenarios read a CSV file twice instead (the filesystem source "
                    "takes each view's filter, so the scans are not shared): two independent sources, "
                    "interleaving left to thread timing."))
EV = "side STRING, k STRING, v STRING, d INT"
SPLIT = ("CREATE TEMPORARY VIEW L AS SELECT k, v AS lv FROM ev WHERE side = 'L'",
         "CREATE TEMPORARY VIEW R AS SELECT k, v AS rv FROM ev WHERE side = 'R'")


def _ev(*rows, d=200):
    return [[s, k, v, d] for s, k, v in rows]


J1 = _ev(("L", "a", "l1"), ("R", "b", "r1"), ("R", "a", "r2"), ("L", "c", "l2"), ("R", "a", "r3"),
         ("L", "b", "l3"), ("R", "d", "r4"))
for kind, says in [("INNER", "INNER join: each match emits +I when its second side arrives; no retractions."),
                   ("LEFT", "LEFT join: a left row without a match is emitted NULL-padded (+I); the first match retracts it (-D) and inserts the joined row (+I); a second match only adds +I."),
                   ("RIGHT", "RIGHT join: the mirror of LEFT."),
                   ("FULL", "FULL OUTER join: padding on both sides, retracted by -D when the first match arrives.")]:
    case("joins", f"{kind.lower()}_join", says, [("ev", EV, J1, "paced_stream")],
         f"SELECT L.k AS lk, lv, R.k AS rk, rv FROM L {kind} JOIN R ON L.k = R.k" if kind == "INNER" else
         f"SELECT L.k AS lk, lv, R.k AS rk, rv FROM L {kind} OUTER JOIN R ON L.k = R.k",
         setup=SPLIT, repeat=3)
J2 = _ev(("L", "a", "l1"), ("L", "a", "l2"), ("R", "a", "r1"), ("R", "a", "r2"), ("L", "a", "l3"))
case("joins", "inner_two_rows_each_side",
     "INNER join, a key with two rows on each side: every pair once (2x2), emitted as the later row of each pair arrives, in state order.",
     [("ev", EV, J2, "paced_stream")], "SELECT L.k, lv, rv FROM L JOIN R ON L.k = R.k", setup=SPLIT, repeat=3)
case("joins", "left_two_padded_then_match",
     "LEFT join: two padded left rows of one key; the first right match retracts both paddings (-D each, each followed by its joined +I); the second match adds +I only.",
     [("ev", EV, J2, "paced_stream")], "SELECT L.k, lv, rv FROM L LEFT JOIN R ON L.k = R.k", setup=SPLIT, repeat=3)
case("joins", "full_two_rows_each_side",
     "FULL join with two rows on each side of one key.",
     [("ev", EV, J2, "paced_stream")],
     "SELECT L.k AS lk, lv, R.k AS rk, rv FROM L FULL OUTER JOIN R ON L.k = R.k", setup=SPLIT, repeat=3)
J4 = _ev(("R", "a", "r1"), ("L", "a", "l1"), ("L", "a", "l2"), ("R", "a", "r2"))
case("joins", "right_two_rows_match_first",
     "RIGHT join where the padded right row is matched by two left rows: one -D, then +I per match.",
     [("ev", EV, J4, "paced_stream")],
     "SELECT L.k AS lk, lv, R.k AS rk, rv FROM L RIGHT JOIN R ON L.k = R.k", setup=SPLIT, repeat=3)
J3 = _ev(("C", "Mary", "./a"), ("N", "Mary", "Mary S."), ("C", "Mary", "./b"), ("C", "Bob", "./c"),
         ("N", "Liz", "Liz T."), ("C", "Liz", "./d"), ("N", "Bob", "Bob U."), ("C", "Bob", "./e"))
AGG_VIEWS = ("CREATE TEMPORARY VIEW clicks AS SELECT k AS `user`, v AS url FROM ev WHERE side = 'C'",
             "CREATE TEMPORARY VIEW names AS SELECT k AS `user`, v AS fullname FROM ev WHERE side = 'N'")
AGG = "(SELECT `user`, COUNT(*) AS c FROM clicks GROUP BY `user`)"
case("joins", "inner_join_aggregate_with_append",
     "INNER join of an updating aggregate with an append table: the aggregate's -U/+U pass through the join as -U/+U joined rows.",
     [("ev", EV, J3, "paced_stream")],
     f"SELECT a.`user`, a.c, n.fullname FROM {AGG} a JOIN names n ON a.`user` = n.`user`",
     setup=AGG_VIEWS, repeat=3)
case("joins", "left_join_aggregate_with_append",
     "LEFT join of an updating aggregate with an append table: what the aggregate's updates and the arriving match do to padded rows.",
     [("ev", EV, J3, "paced_stream")],
     f"SELECT a.`user`, a.c, n.fullname FROM {AGG} a LEFT JOIN names n ON a.`user` = n.`user`",
     setup=AGG_VIEWS, repeat=3)
case("joins", "right_join_append_with_aggregate",
     "Append table LEFT-preserved against an updating aggregate (names RIGHT JOIN agg... written as names LEFT JOIN agg): the padded name row is replaced when the aggregate inserts, then updated.",
     [("ev", EV, J3, "paced_stream")],
     f"SELECT n.`user`, n.fullname, a.c FROM names n LEFT JOIN {AGG} a ON a.`user` = n.`user`",
     setup=AGG_VIEWS, repeat=3)
CSV_SPLIT = ("CREATE TEMPORARY VIEW L AS SELECT k, v AS lv FROM ev WHERE side = 'L'",
             "CREATE TEMPORARY VIEW R AS SELECT k, v AS rv FROM ev WHERE side = 'R'")
case("joins", "inner_join_two_csv_scans",
     "INNER join of two views of one CSV table, unpaced: the planner makes two scans; the result set does not depend on interleaving, its order may.",
     [("ev", EV, J1, None)],
     "SELECT L.k AS lk, lv, R.k AS rk, rv FROM L JOIN R ON L.k = R.k", setup=CSV_SPLIT, repeat=3)
case("joins", "left_join_two_csv_scans",
     "LEFT join over two scans, unpaced: the padded rows (and their -D) depend on the interleaving, which is not deterministic.",
     [("ev", EV, J1, None)],
     "SELECT L.k AS lk, lv, R.k AS rk, rv FROM L LEFT JOIN R ON L.k = R.k", setup=CSV_SPLIT, repeat=3)

# ---- topn
group("topn", "Top-N (ROW_NUMBER and friends) and deduplication, non-windowed.")
SALES = "product_id STRING, category STRING, sales INT"
SROWS = [["p1", "A", 10], ["p2", "A", 20], ["p3", "A", 15], ["p4", "B", 5], ["p5", "A", 20],
         ["p6", "A", 25], ["p7", "B", 7], ["p8", "B", 7], ["p9", "A", 5], ["p10", "B", 9]]


def _topn(n, rn_out=True, fn="ROW_NUMBER()", where=None, cols="product_id, category, sales"):
    inner = (f"SELECT {cols}, {fn} OVER (PARTITION BY category ORDER BY sales DESC) AS rn FROM s")
    out = "*" if rn_out else cols
    return f"SELECT {out} FROM ({inner}) WHERE {where or f'rn <= {n}'}"


for n in (2, 1):
    case("topn", f"top{n}_with_rownum",
         f"Top-{n} with the row number in the output: an entering row shifts the rows below it (-U/+U per rank whose row changes); ties go to the earlier arrival.",
         [("s", SALES, SROWS, None)], _topn(n))
    case("topn", f"top{n}_without_rownum",
         f"Top-{n} without the row number: an entering row is +I and the row pushed out is -D; ranks below are not rewritten.",
         [("s", SALES, SROWS, None)], _topn(n, rn_out=False))
for rn_out in (True, False):
    case("topn", f"top1_asc_{'with' if rn_out else 'without'}_rownum",
         "Top-1 on a non-time order, ascending (ORDER BY sales ASC), over a table without a time attribute.",
         [("s", SALES, SROWS, None)], _topn(1, rn_out).replace("sales DESC", "sales ASC"))
for _name, _order in (("top1_asc_two_keys", "sales ASC, product_id ASC"),
                      ("top1_asc_then_desc", "sales ASC, product_id DESC"),
                      ("top1_asc_string", "product_id ASC")):
    case("topn", _name, f"Top-1 ordered by {_order}, without the row number (which rule makes a Top-1 insert-only).",
         [("s", SALES, SROWS, None)], _topn(1, False).replace("sales DESC", _order))
case("topn", "top2_asc_without_rownum", "Top-2 ordered by sales ASC, without the row number.",
     [("s", SALES, SROWS, None)], _topn(2, False).replace("sales DESC", "sales ASC"))
case("topn", "top1_asc_with_time_attribute",
     "Top-1 on a non-time order (v ASC) over a table with a rowtime attribute.",
     [("e", "k STRING, v STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND",
       [["a", "a1", "2024-01-01 00:00:02"], ["a", "a0", "2024-01-01 00:00:03"],
        ["b", "b1", "2024-01-01 00:00:04"], ["a", "a2", "2024-01-01 00:00:05"]], None)],
     "SELECT k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v ASC) AS rn FROM e) WHERE rn <= 1")
case("topn", "top3_offset_rownum_2_to_3",
     "Top-N with a lower bound (rn BETWEEN 2 AND 3).",
     [("s", SALES, SROWS, None)], _topn(0, where="rn > 1 AND rn <= 3"))
case("topn", "global_top2_no_partition",
     "Top-2 without PARTITION BY (one global ranking).",
     [("s", SALES, SROWS, None)],
     "SELECT * FROM (SELECT product_id, sales, ROW_NUMBER() OVER (ORDER BY sales DESC) AS rn FROM s) WHERE rn <= 2")
UROWS = [["Mary", "./a"], ["Bob", "./b"], ["Liz", "./c"], ["Bob", "./d"], ["Liz", "./e"], ["Liz", "./f"],
         ["Mary", "./g"], ["Mary", "./h"], ["Tom", "./i"]]
UAGG = "SELECT `user`, COUNT(*) AS c FROM t GROUP BY `user`"
case("topn", "top2_over_updating_input_with_rownum",
     "Top-2 over an updating input (ORDER BY an aggregate's result), with the row number: a retractable Top-N; its input -U/+U move rows between ranks.",
     [("t", CLICKS, UROWS, None)],
     f"SELECT * FROM (SELECT `user`, c, ROW_NUMBER() OVER (ORDER BY c DESC) AS rn FROM ({UAGG})) WHERE rn <= 2")
case("topn", "top2_over_updating_input_without_rownum",
     "Top-2 over an updating input, without the row number.",
     [("t", CLICKS, UROWS, None)],
     f"SELECT `user`, c FROM (SELECT `user`, c, ROW_NUMBER() OVER (ORDER BY c DESC) AS rn FROM ({UAGG})) WHERE rn <= 2")
for fn in ("RANK()", "DENSE_RANK()"):
    case("topn", f"{fn[:-2].lower()}_top2",
         f"{fn} <= 2 instead of ROW_NUMBER (error or result: recorded).",
         [("s", SALES, SROWS, None)], _topn(2, fn=fn), expect="either")
case("topn", "seed_rank_without_topn_filter",
     "The seed's RANK() OVER (ORDER BY lastAction) over an aggregate, with no Top-N filter (expected a planner error: recorded what happens).",
     [("clicks", "`user` STRING, url STRING, cTime TIMESTAMP(3)",
       [["Mary", "./home", "2024-01-01 12:00:00"], ["Bob", "./cart", "2024-01-01 12:00:00"],
        ["Mary", "./prod?id=1", "2024-01-01 12:02:00"], ["Liz", "./home", "2024-01-01 12:03:00"],
        ["Bob", "./prod?id=5", "2024-01-01 13:01:00"]], None)],
     "SELECT *, RANK() OVER (ORDER BY lastAction) FROM (SELECT `user`, MAX(cTime) AS lastAction FROM clicks GROUP BY `user`)",
     expect="either")
case("topn", "row_number_without_filter_append",
     "ROW_NUMBER() OVER (PARTITION BY .. ORDER BY a non-time column) over an append input with no Top-N filter (error or result: recorded).",
     [("s", SALES, SROWS[:5], None)],
     "SELECT product_id, category, sales, ROW_NUMBER() OVER (PARTITION BY category ORDER BY sales DESC) AS rn FROM s",
     expect="either")
case("topn", "row_number_without_filter_append_asc",
     "The same with ORDER BY sales ASC (error or result: recorded).",
     [("s", SALES, SROWS[:5], None)],
     "SELECT product_id, category, sales, ROW_NUMBER() OVER (PARTITION BY category ORDER BY sales ASC) AS rn FROM s",
     expect="either")
TS_T = ("k STRING, v STRING, ts TIMESTAMP(3), pt AS PROCTIME(), "
        "WATERMARK FOR ts AS ts - INTERVAL '5' SECOND")
TS_ROWS = [["a", "a1", "2024-01-01 00:00:02"], ["b", "b1", "2024-01-01 00:00:03"],
           ["a", "a2", "2024-01-01 00:00:04"], ["a", "a0", "2024-01-01 00:00:01"],
           ["b", "b2", "2024-01-01 00:00:03"], ["a", "a3", "2024-01-01 00:00:09"],
           ["b", "b3", "2024-01-01 00:00:02"], ["a", "late", "2024-01-01 00:00:00"]]
DEDUP_NOTE = ("Rows are in arrival order; watermark = max ts - 5 s, so 'a0' (00:00:01 after 00:00:04) is out of "
              "order but not late; 'late' (00:00:00 after 00:00:09, watermark 00:00:04) is late.")
for order, what in (("ts ASC", "keep first on rowtime"), ("ts DESC", "keep last on rowtime"),
                    ("pt ASC", "keep first on proctime"), ("pt DESC", "keep last on proctime")):
    tag = ("first" if "ASC" in order else "last") + ("_rowtime" if order.startswith("ts") else "_proctime")
    case("topn", f"dedup_keep_{tag}",
         f"Deduplication, {what}: ROW_NUMBER() OVER (PARTITION BY k ORDER BY {order}) = 1.",
         [("e", TS_T, TS_ROWS, None)],
         f"SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY {order}) AS rn FROM e) WHERE rn = 1",
         note=DEDUP_NOTE)
case("topn", "dedup_keep_last_proctime_with_rownum",
     "Keep-last deduplication on proctime with rn in the output.",
     [("e", TS_T, TS_ROWS, None)],
     "SELECT k, v, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY pt DESC) AS rn FROM e) WHERE rn = 1",
     note=DEDUP_NOTE)
case("topn", "dedup_rowtime_top2",
     "ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts ASC) <= 2: not a deduplication, an event-time Top-N (what does it emit).",
     [("e", TS_T, TS_ROWS, None)],
     "SELECT k, v, ts, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts ASC) AS rn FROM e) WHERE rn <= 2",
     note=DEDUP_NOTE, expect="either")
LATE_ROWS = [["a", "a1", "2024-01-01 00:00:02"], ["a", "a1 tie", "2024-01-01 00:00:02"],
             ["b", "b1", "2024-01-01 00:00:30"], ["a", "a0 late", "2024-01-01 00:00:01"],
             ["c", "c1 late", "2024-01-01 00:00:01"], ["d", "d0 at wm", "2024-01-01 00:00:24.999"],
             ["e", "e0", "2024-01-01 00:00:25"], ["f", "f0", "2024-01-01 00:00:25"],
             ["a", "a2", "2024-01-01 00:00:40"]]
case("topn", "dedup_keep_first_rowtime_late",
     "Keep first on rowtime, the edges: a tie on ts, a smaller ts arriving late (an emitted key, a new key), "
     "a ts equal to the watermark, two keys of one ts firing at one watermark, a key's row after its emission.",
     [("e", TS_T, LATE_ROWS, None)],
     "SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts ASC) AS rn FROM e) WHERE rn = 1",
     note="watermark = max ts - 5 s - 1 ms: 24.999 after b1, 34.999 after a2; a row at or below it is late.")

# ---- minibatch
group("minibatch", "Mini-batch aggregation, local-global (two-phase) aggregation and split distinct aggregation.",
      flushing=("allow-latency is 1 h, so no bundle is flushed by time: a bundle is flushed when it holds "
                "`table.exec.mini-batch.size` input rows, and the rest at end of input."))
MB_WORDS = [["a"], ["b"], ["a"], ["c"], ["b"], ["a"], ["c"], ["c"], ["a"], ["b"], ["d"]]


def _mb(size, **more):
    return {"table.exec.mini-batch.enabled": "true", "table.exec.mini-batch.allow-latency": "1 h",
            "table.exec.mini-batch.size": str(size), **more}


case("minibatch", "count_no_minibatch",
     "Baseline: GROUP BY COUNT without mini-batch, one change per input row.",
     [("words", WORDS, MB_WORDS, None)], WF_INNER)
for size in (2, 3, 5):
    case("minibatch", f"count_minibatch_size_{size}",
         f"Mini-batch size {size}, agg-phase-strategy left at AUTO (the planner then picks local-global: see the plan): bundles at two levels; keys of one bundle come out in hash-map order, not arrival order.",
         [("words", WORDS, MB_WORDS, None)], WF_INNER, config=_mb(size))
case("minibatch", "word_freq_no_minibatch",
     "Baseline: the word-frequency cascade without mini-batch.",
     [("words", WORDS, MB_WORDS, None)], WF)
for size in (3, 5):
    case("minibatch", f"word_freq_minibatch_size_{size}",
         f"Word-frequency cascade with mini-batch size {size}: both aggregates fold their bundles; fewer, later changes.",
         [("words", WORDS, MB_WORDS, None)], WF, config=_mb(size))
case("minibatch", "count_two_phase",
     "Mini-batch + agg-phase-strategy TWO_PHASE: LocalGroupAggregate/GlobalGroupAggregate (plan) and the changelog.",
     [("words", WORDS, MB_WORDS, None)], WF_INNER,
     config=_mb(3, **{"table.optimizer.agg-phase-strategy": "TWO_PHASE"}))
case("minibatch", "count_one_phase",
     "Mini-batch + agg-phase-strategy ONE_PHASE: a single mini-batch GroupAggregate.",
     [("words", WORDS, MB_WORDS, None)], WF_INNER,
     config=_mb(3, **{"table.optimizer.agg-phase-strategy": "ONE_PHASE"}))
for size in (2, 5):
    case("minibatch", f"count_one_phase_size_{size}",
         f"ONE_PHASE mini-batch size {size}: a bundle is {size} input rows; one change per key per bundle.",
         [("words", WORDS, MB_WORDS, None)], WF_INNER,
         config=_mb(size, **{"table.optimizer.agg-phase-strategy": "ONE_PHASE"}))
case("minibatch", "word_freq_one_phase_size_3",
     "The cascade with ONE_PHASE mini-batch size 3.",
     [("words", WORDS, MB_WORDS, None)], WF,
     config=_mb(3, **{"table.optimizer.agg-phase-strategy": "ONE_PHASE"}))
case("minibatch", "count_two_phase_without_minibatch",
     "TWO_PHASE without mini-batch: the planner keeps one phase (see plan).",
     [("words", WORDS, MB_WORDS, None)], WF_INNER,
     config={"table.optimizer.agg-phase-strategy": "TWO_PHASE"})
case("minibatch", "word_freq_two_phase",
     "The cascade with mini-batch and TWO_PHASE: the outer aggregate over updates also gets a local phase?",
     [("words", WORDS, MB_WORDS, None)], WF,
     config=_mb(3, **{"table.optimizer.agg-phase-strategy": "TWO_PHASE"}))
DROWS = [["Mary", "a"], ["Mary", "b"], ["Bob", "a"], ["Mary", "a"], ["Mary", "c"], ["Bob", "b"],
         ["Bob", "a"], ["Mary", "d"]]
DQ = "SELECT `user`, COUNT(DISTINCT url) AS d, COUNT(*) AS n FROM t GROUP BY `user`"
case("minibatch", "distinct_no_split",
     "Baseline: COUNT(DISTINCT) without split.",
     [("t", CLICKS, DROWS, None)], DQ)
case("minibatch", "distinct_split_bucket_2",
     "distinct-agg.split with bucket-num 2 (no mini-batch): a two-level aggregate (by key and hash bucket, then by key); the outer level sees the inner level's -U/+U and emits intermediate values.",
     [("t", CLICKS, DROWS, None)], DQ,
     config={"table.optimizer.distinct-agg.split.enabled": "true",
             "table.optimizer.distinct-agg.split.bucket-num": "2"})
case("minibatch", "distinct_split_bucket_2_minibatch_3",
     "distinct-agg.split with bucket-num 2 and mini-batch size 3.",
     [("t", CLICKS, DROWS, None)], DQ,
     config=_mb(3, **{"table.optimizer.distinct-agg.split.enabled": "true",
                      "table.optimizer.distinct-agg.split.bucket-num": "2"}))
case("minibatch", "global_count_minibatch_3",
     "Global COUNT(*) with mini-batch size 3.",
     [("words", WORDS, MB_WORDS, None)], "SELECT COUNT(*) AS c FROM words", config=_mb(3))

# ---- minibatch_latency
group("minibatch_latency", "Mini-batch bundles flushed by allow-latency (processing time), in a cascade.",
      timing=("Rows come from a DataStream from_collection -> Python map that sleeps `d` ms before "
              "passing the row on (bundle size 1, buffer timeout 0 ms), then from_data_stream. "
              "A sleep of 1500 ms crosses at least one 1 s interval boundary, whose mini-batch "
              "watermark flushes every level; rows 0 ms apart share an interval (unless a "
              "boundary falls between them, which the 3 runs would show as unstable)."))
MBL_ROWS = [["a", 0], ["b", 0], ["a", 0], ["c", 1500], ["a", 0], ["b", 1500], ["d", 0]]
MBL_WORDS = "word STRING, d INT"


def _mbl(**more):
    return {"table.exec.mini-batch.enabled": "true", "table.exec.mini-batch.allow-latency": "1 s",
            "table.exec.mini-batch.size": "1000", **more}


case("minibatch_latency", "count_latency_flush",
     "GROUP BY COUNT, mini-batch allow-latency 1 s, size 1000: each interval's rows are one bundle.",
     [("words", MBL_WORDS, MBL_ROWS, "paced_stream")], WF_INNER, config=_mbl(), repeat=3)
case("minibatch_latency", "word_freq_latency_flush",
     "The cascade with allow-latency 1 s, size 1000 (AUTO: local-global): does the outer level flush the "
     "inner level's flush at the same mini-batch watermark, or at the next?",
     [("words", MBL_WORDS, MBL_ROWS, "paced_stream")], WF, config=_mbl(), repeat=3)
case("minibatch_latency", "word_freq_latency_flush_one_phase",
     "The same cascade, ONE_PHASE.",
     [("words", MBL_WORDS, MBL_ROWS, "paced_stream")], WF,
     config=_mbl(**{"table.optimizer.agg-phase-strategy": "ONE_PHASE"}), repeat=3)
MBL_MIXED = [["a", 0], ["b", 0], ["a", 0], ["c", 1500], ["c", 0], ["a", 0], ["b", 0], ["d", 1500], ["a", 0]]
case("minibatch_latency", "word_freq_latency_and_size_3_one_phase",
     "The cascade, ONE_PHASE, allow-latency 1 s and size 3: bundles closed by size within an interval and "
     "by the interval's end, at both levels. (With size 2 the three runs differed: not kept.)",
     [("words", MBL_WORDS, MBL_MIXED, "paced_stream")], WF,
     config=_mbl(**{"table.exec.mini-batch.size": "3", "table.optimizer.agg-phase-strategy": "ONE_PHASE"}),
     repeat=3)
case("minibatch_latency", "word_freq_latency_flush_then_size_one_phase",
     "The cascade, ONE_PHASE, allow-latency 1 s, size 3: the first interval's two rows are flushed by its "
     "watermark (the outer level gets two changes, fewer than its size), then three rows fill a bundle by "
     "size: whether the outer level flushed the first two at that watermark decides what it emits.",
     [("words", MBL_WORDS, [["a", 0], ["b", 0], ["c", 1500], ["a", 0], ["b", 0]], "paced_stream")], WF,
     config=_mbl(**{"table.exec.mini-batch.size": "3", "table.optimizer.agg-phase-strategy": "ONE_PHASE"}),
     repeat=3)

# ---- ttl
group("ttl", "Idle state retention (table.exec.state.ttl) on processing time.",
      timing=("Rows come from a DataStream from_collection -> Python map that sleeps `d` ms before "
              "passing the row on (bundle size 1, buffer timeout 0 ms), then from_data_stream. "
              "The sleeps are the `d` column. Each scenario ran 3 times (`stable`)."))
TT = "k STRING, d INT"
TTL1 = {"table.exec.state.ttl": "1 s"}
GAP = [["a", 0], ["a", 0], ["b", 0], ["a", 2500], ["b", 0], ["a", 0]]
case("ttl", "count_after_gap_longer_than_ttl",
     "GROUP BY COUNT with TTL 1 s: after an idle gap longer than the TTL the group's state is gone; the next row starts a new group, emitted as +I with count 1 (no retraction of the old count).",
     [("t", TT, GAP, "paced_stream")], "SELECT k, COUNT(*) AS c FROM t GROUP BY k",
     config=TTL1, repeat=3)
case("ttl", "count_gap_shorter_than_ttl",
     "Control: gaps of 400 ms (< TTL 1 s) between writes keep the state (each write refreshes the TTL) even when the total span exceeds the TTL.",
     [("t", TT, [["a", 0], ["a", 400], ["a", 400], ["a", 400], ["a", 400]], "paced_stream")],
     "SELECT k, COUNT(*) AS c FROM t GROUP BY k", config=TTL1, repeat=3)
case("ttl", "count_after_gap_no_ttl",
     "Control: the same gap without TTL: the count continues.",
     [("t", TT, GAP, "paced_stream")], "SELECT k, COUNT(*) AS c FROM t GROUP BY k", repeat=1)
WGAP = [["Hello", 0], ["World", 0], ["Hello", 0], ["Hello", 2500], ["World", 0], ["Hello", 0]]
case("ttl", "word_freq_cascade_after_gap",
     "Word-frequency cascade with TTL 1 s: both levels forget; the inner +I after the gap reaches an outer state that has also expired.",
     [("t", "k STRING, d INT", WGAP, "paced_stream")],
     "SELECT cnt, COUNT(cnt) AS freq FROM (SELECT k, COUNT(*) AS cnt FROM t GROUP BY k) GROUP BY cnt",
     config=TTL1, repeat=3)
case("ttl", "word_freq_inner_after_gap",
     "The inner level of the same cascade with TTL 1 s.",
     [("t", "k STRING, d INT", WGAP, "paced_stream")],
     "SELECT k, COUNT(*) AS cnt FROM t GROUP BY k", config=TTL1, repeat=3)
JGAP = [["L", "a", "l1", 0], ["R", "b", "r1", 0], ["R", "a", "r2", 2500], ["L", "b", "l2", 0],
        ["L", "a", "l3", 0]]
case("ttl", "left_join_after_gap",
     "LEFT join with TTL 1 s: a right row arriving after the left row expired finds no match (no -D of the padding); rows after the gap match only what is still kept.",
     [("ev", "side STRING, k STRING, v STRING, d INT", JGAP, "paced_stream")],
     "SELECT L.k AS lk, lv, R.k AS rk, rv FROM L LEFT JOIN R ON L.k = R.k",
     setup=("CREATE TEMPORARY VIEW L AS SELECT k, v AS lv FROM ev WHERE side = 'L'",
            "CREATE TEMPORARY VIEW R AS SELECT k, v AS rv FROM ev WHERE side = 'R'"),
     config=TTL1, repeat=3)

# the operators that refuse a state TTL in the kit (issue 45 item 5): Top-N, a non-time OVER,
# keep-first deduplication on event time; each beside its control without TTL
TOPN_GAP = [["a", 5, 0], ["a", 3, 0], ["b", 4, 0], ["a", 4, 2500], ["a", 1, 0], ["b", 6, 0], ["a", 7, 0]]
TOPN2 = ("SELECT k, v, rn FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn "
         "FROM t) WHERE rn <= 2")
for _name, _config in (("top2_after_gap", TTL1), ("top2_after_gap_no_ttl", {})):
    case("ttl", _name,
         "Top-2 per key with TTL 1 s: after an idle gap longer than the TTL the partition's state is gone."
         if _config else "Control: the same Top-2 without TTL.",
         [("t", "k STRING, v INT, d INT", TOPN_GAP, "paced_stream")], TOPN2, config=_config, repeat=3)
# the rule the kit follows where Flink's cache and state disagree: an AppendOnlyTopNFunction
# reloads its buffer from state once its cache entry is older than the TTL (Guava's
# expireAfterWrite from the load), and each sort key's state entry expires on its own
# (written when a row joins it); a FastTop1Function's cache holds the row, written when it
# changes (no checkpoint here: its state is never written)
for _name, _config in (("top2_entries_expire_apart", TTL1), ("top2_entries_expire_apart_no_ttl", {})):
    case("ttl", _name,
         "Top-2 with TTL 1 s: the buffer is reloaded from state 1 s after it was loaded; the sort key written at 0 ms "
         "is gone, the one written at 600 ms is kept." if _config else "Control: the same Top-2 without TTL.",
         [("t", "k STRING, v INT, d INT", [["a", 5, 0], ["a", 3, 0], ["a", 4, 600], ["a", 1, 600]], "paced_stream")],
         TOPN2, config=_config, repeat=3)
TOP1 = ("SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn "
        "FROM t) WHERE rn <= 1")
for _name, _config in (("top1_unchanged_longer_than_ttl", TTL1), ("top1_unchanged_longer_than_ttl_no_ttl", {})):
    case("ttl", _name,
         "Top-1 with TTL 1 s: rows that do not replace the first row keep arriving (600 ms apart); 1.2 s after the "
         "first row was written it is forgotten." if _config else "Control: the same Top-1 without TTL.",
         [("t", "k STRING, v INT, d INT", [["a", 5, 0], ["a", 3, 600], ["a", 2, 600], ["a", 1, 0]], "paced_stream")],
         TOP1, config=_config, repeat=3)
# a Top-N over an updating input (RetractableTopNFunction: ORDER BY a count ascending is not
# monotonic in its direction): its sorted map (written at every message) and each sort key's
# rows (written when a row joins or leaves them) expire on their own; a sort key whose rows
# expired is dropped where it is read (Flink logs "The state is cleared because of state ttl")
TOPN_UPD = ("SELECT k, g, c, rn FROM (SELECT k, g, c, ROW_NUMBER() OVER (PARTITION BY k ORDER BY c ASC) AS rn "
            "FROM (SELECT k, g, COUNT(*) AS c FROM t GROUP BY k, g)) WHERE rn <= 2")
for _name, _rows in (("retract_top2_after_gap", [["a", "x", 0], ["a", "y", 0], ["a", "x", 0], ["a", "z", 2500],
                                                 ["a", "y", 0], ["a", "z", 0]]),
                     ("retract_top2_entries_expire_apart", [["a", "x", 0], ["a", "y", 0], ["a", "z", 600],
                                                            ["a", "z", 600], ["a", "w", 0], ["a", "y", 0]])):
    for _suffix, _config in (("", TTL1), ("_no_ttl", {})):
        case("ttl", _name + _suffix,
             "Top-2 by a count ascending (a retracting Top-N) with TTL 1 s." if _config else "Control: without TTL.",
             [("t", "k STRING, g STRING, d INT", _rows, "paced_stream")], TOPN_UPD, config=_config, repeat=3)
# a Top-N over updates ordered one way (UpdatableTopNFunction: COUNT(*) DESC): its buffer lives in a
# cache loaded from state, written back only at a checkpoint or when the cache is full (neither
# here): the TTL after the load the partition is read afresh, however busy
TOPN_FAST = ("SELECT k, g, c, rn FROM (SELECT k, g, c, ROW_NUMBER() OVER (PARTITION BY k ORDER BY c DESC) AS rn "
             "FROM (SELECT k, g, COUNT(*) AS c FROM t GROUP BY k, g)) WHERE rn <= 2")
for _suffix, _config in (("", TTL1), ("_no_ttl", {})):
    case("ttl", "update_fast_top2_busy_past_ttl" + _suffix,
         "Top-2 by a count descending (an UpdatableTopNFunction) with TTL 1 s, rows 600 ms apart."
         if _config else "Control: without TTL.",
         [("t", "k STRING, g STRING, d INT", [["a", "x", 0], ["a", "y", 0], ["a", "x", 600], ["a", "z", 600],
                                              ["a", "y", 0], ["a", "x", 600]], "paced_stream")],
         TOPN_FAST, config=_config, repeat=3)
OVER_SUM = "SELECT k, v, SUM(v) OVER (PARTITION BY k ORDER BY v) AS s, COUNT(*) OVER (PARTITION BY k ORDER BY v) AS c FROM t"
for _name, _config in (("non_time_over_after_gap", TTL1), ("non_time_over_after_gap_no_ttl", {})):
    case("ttl", _name,
         "A non-time OVER (ORDER BY v, RANGE) with TTL 1 s: after an idle gap the partition's sort keys are gone."
         if _config else "Control: the same OVER without TTL.",
         [("t", "k STRING, v INT, d INT", TOPN_GAP, "paced_stream")], OVER_SUM, config=_config, repeat=3)
case("ttl", "non_time_over_gaps_shorter_than_ttl",
     "Control: a non-time OVER with TTL 1 s and rows 600 ms apart: each row moves the partition's cleanup timer on.",
     [("t", "k STRING, v INT, d INT", [["a", 5, 0], ["a", 3, 600], ["a", 4, 600], ["a", 1, 600]], "paced_stream")],
     OVER_SUM, config=TTL1, repeat=3)
DEDUP_GAP = [["a", "2024-01-01 00:00:01", 0], ["a", "2024-01-01 00:00:02", 0], ["b", "2024-01-01 00:00:03", 0],
             ["a", "2024-01-01 00:00:04", 2500], ["b", "2024-01-01 00:00:05", 0], ["a", "2024-01-01 00:00:06", 0]]
DEDUP_FIRST = ("SELECT k, ts FROM (SELECT k, ts, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts ASC) AS rn "
               "FROM P) WHERE rn = 1")
for _name, _config in (("keep_first_rowtime_after_gap", TTL1), ("keep_first_rowtime_after_gap_no_ttl", {})):
    case("ttl", _name,
         "Keep-first deduplication on event time with TTL 1 s: after an idle gap the key's first row is forgotten."
         if _config else "Control: the same deduplication without TTL.",
         [("t", "k STRING, ts TIMESTAMP(3), d INT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND", DEDUP_GAP, None)],
         DEDUP_FIRST, setup=("CREATE TEMPORARY VIEW P AS SELECT k, ts FROM t WHERE pace(d)",), config=_config, repeat=3)


# ---- errors
def _ds_rows(env, ds, query):
    """Collect a DataStream of Rows with their kinds (columns from the query's schema)."""
    resolved = env.sql_query(query)._j_table.getResolvedSchema()
    cols = [str(n) for n in resolved.getColumnNames()]
    types = [str(t) for t in resolved.getColumnDataTypes()]
    rows = []
    with ds.execute_and_collect() as results:
        for r in results:
            if hasattr(r, "get_row_kind"):
                rows.append({"kind": str(r.get_row_kind()), "values": [_json_value(v) for v in r]})
            else:  # e.g. to_retract_stream's (flag, row) tuples
                rows.append({"kind": None, "element": _json_value(r)})
    return cols, types, rows


def _to_data_stream(env, query):
    return _ds_rows(env, env.to_data_stream(env.sql_query(query)), query)


def _to_changelog(mode: str, pk: str | None = None, schema_given: bool = True):
    """PyFlink's to_changelog_stream drops the changelog mode when no schema is passed, so an
    empty Schema is passed with the mode unless ``schema_given`` is False."""
    def run(env, query):
        from pyflink.table import ChangelogMode, Schema
        tbl = env.sql_query(query)
        schema = (Schema.new_builder().primary_key(pk).build() if pk else
                  Schema.new_builder().build() if schema_given and mode != "default" else None)
        cm = {"all": ChangelogMode.all(), "upsert": ChangelogMode.upsert(),
              "insert_only": ChangelogMode.insert_only(), "default": None}[mode]
        if schema is None and cm is None:
            ds = env.to_changelog_stream(tbl)
        else:
            ds = env.to_changelog_stream(tbl, schema, cm)
        return _ds_rows(env, ds, query)
    return run


def _to_legacy(method: str):
    def run(env, query):
        from pyflink.common import Types
        tbl = env.sql_query(query)
        info = Types.ROW([Types.STRING(), Types.LONG()])
        ds = getattr(env, method)(tbl, info)
        return _ds_rows(env, ds, query)
    return run


group("errors", "Updating results where only appends are accepted, and the DataStream conversions.")
NN_CLICKS = "`user` STRING NOT NULL, url STRING"
EROWS = [["Mary", "./home"], ["Bob", "./cart"], ["Mary", "./prod"]]
EQ = "SELECT `user`, COUNT(*) AS c FROM t GROUP BY `user`"
case("errors", "insert_updating_into_filesystem_sink",
     "INSERT INTO an append-only (filesystem) sink of a GROUP BY result fails at planning.",
     [("t", NN_CLICKS, EROWS, None)], "INSERT INTO fs_sink " + EQ,
     setup=("CREATE TEMPORARY TABLE fs_sink (`user` STRING, c BIGINT) WITH ("
            "'connector' = 'filesystem', 'path' = '/tmp/flink-kit-golden-never-written', 'format' = 'csv')",),
     expect="error", explain="INSERT INTO fs_sink " + EQ)
case("errors", "insert_updating_into_blackhole_sink",
     "INSERT INTO a blackhole sink accepts updates (blackhole takes every row kind; no error).",
     [("t", NN_CLICKS, EROWS, None)], "INSERT INTO bh_sink " + EQ,
     setup=("CREATE TEMPORARY TABLE bh_sink (`user` STRING, c BIGINT) WITH ('connector' = 'blackhole')",),
     explain="INSERT INTO bh_sink " + EQ)
case("errors", "insert_updating_into_print_sink_plan",
     "A print sink also accepts updates: its plan asks for -U rows ([I,UB,UA]) (explained only, not run).",
     [("t", NN_CLICKS, EROWS, None)], EQ,
     setup=("CREATE TEMPORARY TABLE pr_sink (`user` STRING, c BIGINT) WITH ('connector' = 'print')",),
     explain="INSERT INTO pr_sink " + EQ)
case("errors", "to_data_stream_updating",
     "StreamTableEnvironment.to_data_stream on an updating table fails: it accepts insert-only tables.",
     [("t", NN_CLICKS, EROWS, None)], EQ, run=_to_data_stream, stream=True, expect="error")
case("errors", "to_data_stream_append",
     "to_data_stream on an append-only table works (+I rows).",
     [("t", NN_CLICKS, EROWS, None)], "SELECT `user`, url FROM t", run=_to_data_stream, stream=True)
case("errors", "to_changelog_stream_default",
     "to_changelog_stream(table) with the default ChangelogMode (all kinds): -U and +U rows, as collect() gives.",
     [("t", NN_CLICKS, EROWS, None)], EQ, run=_to_changelog("default"), stream=True)
case("errors", "to_changelog_stream_upsert_with_pk",
     "to_changelog_stream(table, Schema with primary key user, ChangelogMode.upsert()): -U rows are dropped, updates arrive as lone +U.",
     [("t", NN_CLICKS, EROWS, None)], EQ, run=_to_changelog("upsert", pk="user"), stream=True,
     expect="either")
case("errors", "to_changelog_stream_upsert_without_pk",
     "to_changelog_stream with an empty Schema and ChangelogMode.upsert(), no primary key (error or result: recorded).",
     [("t", NN_CLICKS, EROWS, None)], EQ, run=_to_changelog("upsert"), stream=True, expect="either")
case("errors", "to_changelog_stream_mode_without_schema_pyflink",
     "PyFlink quirk: to_changelog_stream(table, None, ChangelogMode.insert_only()) ignores the mode when no schema is given (its code calls the one-argument Java method): all kinds arrive.",
     [("t", NN_CLICKS, EROWS, None)], EQ, run=_to_changelog("insert_only", schema_given=False),
     stream=True, expect="either")
case("errors", "to_changelog_stream_upsert_nullable_key",
     "Upsert with a primary key on a nullable column (error or result: recorded).",
     [("t", CLICKS, EROWS, None)], EQ, run=_to_changelog("upsert", pk="user"), stream=True,
     expect="either")
case("errors", "to_changelog_stream_insert_only_on_updates",
     "to_changelog_stream with an empty Schema and ChangelogMode.insert_only() on an updating table fails.",
     [("t", NN_CLICKS, EROWS, None)], EQ, run=_to_changelog("insert_only"), stream=True, expect="error")
case("errors", "to_append_stream_legacy",
     "to_append_stream (the legacy conversion) still exists in PyFlink 2.3; on an updating table it fails.",
     [("t", NN_CLICKS, EROWS, None)], EQ, run=_to_legacy("to_append_stream"), stream=True, expect="either")
case("errors", "to_retract_stream_legacy",
     "to_retract_stream (the legacy conversion) still exists in PyFlink 2.3: (True, row) for +I/+U, (False, row) for -U/-D; recorded as `element` = [flag, values], kind null.",
     [("t", NN_CLICKS, EROWS, None)], EQ, run=_to_legacy("to_retract_stream"), stream=True, expect="either")


group("match_errors", "MATCH_RECOGNIZE's validation: an input that updates, ORDER BY a time attribute then another field.")
MR_T = "`user` STRING, v INT, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts"
MR_ROWS = [["Mary", 1, "2024-01-01 00:00:01"], ["Bob", 2, "2024-01-01 00:00:02"], ["Mary", 3, "2024-01-01 00:00:03"]]


def _mr(source: str, order: str = "ts") -> str:
    return (f"SELECT * FROM {source} MATCH_RECOGNIZE (PARTITION BY `user` ORDER BY {order} "
            "MEASURES A.v AS av ONE ROW PER MATCH PATTERN (A) DEFINE A AS A.v > 0)")


for _name, _says, _source, _order in [
    ("over_group_by", "MATCH_RECOGNIZE over a GROUP BY's updating result (its MAX(ts) no time attribute).",
     "(SELECT `user`, MAX(v) AS v, MAX(ts) AS ts FROM t GROUP BY `user`)", "ts"),
    ("over_dedup_keep_last", "MATCH_RECOGNIZE over a keep-last deduplication on the rowtime (an updating input).",
     "(SELECT `user`, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY `user` ORDER BY ts DESC) AS rn "
     "FROM t) WHERE rn = 1)", "ts"),
    ("over_top2", "MATCH_RECOGNIZE over a Top-2 per user by v (an updating input).",
     "(SELECT `user`, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY `user` ORDER BY v DESC) AS rn "
     "FROM t) WHERE rn <= 2)", "ts"),
    ("over_dedup_keep_first", "MATCH_RECOGNIZE over a keep-first deduplication on the rowtime (insert-only).",
     "(SELECT `user`, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY `user` ORDER BY ts ASC) AS rn "
     "FROM t) WHERE rn = 1)", "ts"),
    ("order_by_proctime_then_field", "ORDER BY a processing-time attribute, then another field.", "t", "pt, v"),
    ("order_by_rowtime_then_field", "ORDER BY the rowtime, then another field (allowed).", "t", "ts, v"),
    ("order_by_proctime", "ORDER BY a processing-time attribute alone (allowed).", "t", "pt"),
]:
    case("match_errors", _name, _says, [("t", MR_T, MR_ROWS, None)], _mr(_source, _order), expect="either")


group("match_windows", "Windows over MATCH_RECOGNIZE's output: MATCH_ROWTIME() as the time attribute a group "
      "window (Flink's testWindowedGroupingAppliedToMatchRecognize) or a window TVF groups on.")
MW_ROWS = [["ACME", 12, "2024-01-01 00:00:01"], ["ACME", 17, "2024-01-01 00:00:02"], ["ACME", 13, "2024-01-01 00:00:03"],
           ["ACME", 16, "2024-01-01 00:00:04"], ["ACME", 25, "2024-01-01 00:00:05"], ["ACME", 2, "2024-01-01 00:00:06"],
           ["ACME", 4, "2024-01-01 00:00:07"], ["ACME", 10, "2024-01-01 00:00:08"], ["BETA", 30, "2024-01-01 00:00:02"],
           ["BETA", 20, "2024-01-01 00:00:07"], ["ACME", 7, "2024-01-01 00:00:10"], ["ACME", 9, "2024-01-01 00:00:11"]]
MW_RISE = ("{src} MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY {time} MEASURES A.price AS price, "
           "MATCH_ROWTIME() AS matchRowtime ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW "
           "PATTERN (A B) DEFINE B AS B.price > A.price)")
MW_GROUP = ("SELECT symbol, SUM(price) AS price, TUMBLE_START(matchRowtime, INTERVAL '3' SECOND) AS windowStart, "
            "TUMBLE_ROWTIME(matchRowtime, INTERVAL '3' SECOND) AS windowTime FROM {mr} "
            "GROUP BY symbol, TUMBLE(matchRowtime, INTERVAL '3' SECOND)")
case("match_windows", "group_window_over_match_timestamp",
     "GROUP BY TUMBLE(MATCH_ROWTIME() ...) over a MATCH_RECOGNIZE in FROM, the rowtime a TIMESTAMP(3).",
     [("Ticker", "symbol STRING, price INT, rowtime TIMESTAMP(3), WATERMARK FOR rowtime AS rowtime", MW_ROWS, None)],
     MW_GROUP.format(mr=MW_RISE.format(src="Ticker", time="rowtime")))
case("match_windows", "group_window_over_match_timestamp_ltz",
     "The same, the rowtime a TIMESTAMP_LTZ(3) (computed from epoch milliseconds).",
     [("Ticker", "symbol STRING, price INT, t BIGINT, rowtime AS TO_TIMESTAMP_LTZ(t, 3), "
                 "WATERMARK FOR rowtime AS rowtime",
       [[sym, p, int(_dt.datetime.fromisoformat(ts).replace(tzinfo=_dt.timezone.utc).timestamp() * 1000)]
        for sym, p, ts in MW_ROWS], None)],
     MW_GROUP.format(mr=MW_RISE.format(src="Ticker", time="rowtime")))
case("match_windows", "tvf_over_match_view",
     "TUMBLE(TABLE M, DESCRIPTOR(matchRowtime), ...) over a view of the MATCH_RECOGNIZE.",
     [("Ticker", "symbol STRING, price INT, rowtime TIMESTAMP(3), WATERMARK FOR rowtime AS rowtime", MW_ROWS, None)],
     "SELECT symbol, window_start, window_end, SUM(price) AS price, COUNT(*) AS n FROM "
     "TABLE(TUMBLE(TABLE M, DESCRIPTOR(matchRowtime), INTERVAL '3' SECOND)) GROUP BY symbol, window_start, window_end",
     setup=("CREATE TEMPORARY VIEW M AS SELECT * FROM " + MW_RISE.format(src="Ticker", time="rowtime"),))


group("types", "The result types of the aggregates (SUM, AVG, COUNT, MIN, MAX) over integer, DECIMAL and "
      "floating inputs, and their values: an AVG of integers is truncated toward zero, a SUM keeps its "
      "input's type.")
NUM = "k STRING, ti TINYINT, si SMALLINT, i INT, b BIGINT, dc DECIMAL(10, 2), f FLOAT, x DOUBLE"
NUM_ROWS = [["a", -7, -700, -70000, -7000000000, "-7.25", -7.5, -7.25],
            ["b", 3, 300, 30000, 3000000000, "3.10", 3.25, 3.1],
            ["a", -8, -800, -80000, -8000000000, "-8.50", -8.25, -8.5],
            ["b", 4, 400, 40000, 4000000000, "4.05", 4.5, 4.05],
            ["a", None, None, None, None, None, None, None],
            ["b", 2, 200, 20000, 2000000000, "2.00", 2.0, 2.0]]
case("types", "sum_avg_of_integers",
     "SUM and AVG of TINYINT, SMALLINT, INT, BIGINT: each keeps its input's type; AVG truncates toward zero (-7.5 -> -7).",
     [("n", NUM, NUM_ROWS, None)],
     "SELECT k, SUM(ti) AS s_ti, AVG(ti) AS a_ti, SUM(si) AS s_si, AVG(si) AS a_si, SUM(i) AS s_i, AVG(i) AS a_i, "
     "SUM(b) AS s_b, AVG(b) AS a_b, COUNT(i) AS c_i, COUNT(*) AS c FROM n GROUP BY k")
case("types", "sum_avg_of_decimal_and_floating",
     "SUM and AVG of DECIMAL(10, 2), FLOAT, DOUBLE; MIN and MAX keep the column's type.",
     [("n", NUM, NUM_ROWS, None)],
     "SELECT k, SUM(dc) AS s_dc, AVG(dc) AS a_dc, SUM(f) AS s_f, AVG(f) AS a_f, SUM(x) AS s_x, AVG(x) AS a_x, "
     "MIN(dc) AS lo_dc, MAX(f) AS hi_f, MIN(ti) AS lo_ti FROM n GROUP BY k")
case("types", "sum_overflows_its_type",
     "A SUM of TINYINT / INT past the type's range: Flink's result keeps the type (the sum wraps around).",
     [("n", NUM, [["a", 100, 1, 2147483647, 1, "1.00", 1.0, 1.0], ["a", 100, 1, 1, 1, "1.00", 1.0, 1.0]], None)],
     "SELECT SUM(ti) AS s_ti, AVG(ti) AS a_ti, SUM(i) AS s_i, AVG(i) AS a_i FROM n")
case("types", "avg_over_updates",
     "AVG and SUM over an updating input (a SUM per key): INT and DECIMAL, retractions applied.",
     [("n", NUM, NUM_ROWS, None)],
     "SELECT SUM(s) AS total, AVG(s) AS a, SUM(d) AS total_d, AVG(d) AS a_d, AVG(ff) AS a_f FROM "
     "(SELECT k, SUM(i) AS s, SUM(dc) AS d, SUM(f) AS ff FROM n GROUP BY k)")
case("types", "float_sum_rounding",
     "A FLOAT SUM of values a float does not hold exactly (0.1): Flink sums in FLOAT.",
     [("n", NUM, [["a", 1, 1, 1, 1, "0.10", 0.1, 0.1]] * 3 + [["a", 1, 1, 1, 1, "0.70", 0.7, 0.7]], None)],
     "SELECT SUM(f) AS s_f, AVG(f) AS a_f, SUM(x) AS s_x, AVG(x) AS a_x FROM n")

# non-time OVER aggregates (issue 45 item 2): Flink plans SUM(x) as CASE(COUNT(x) > 0, $SUM0(x), NULL)
# and AVG(x) from $SUM0 and COUNT; the types and the overflow show what each keeps
ONUM = "o INT, " + NUM
ONUM_ROWS = [[i, *r] for i, r in enumerate(NUM_ROWS)]


def _over(*calls):
    return ", ".join(f"{f}({a}) OVER (PARTITION BY k ORDER BY o) AS {n}" for f, a, n in calls)


case("types", "over_sum_avg_of_integers",
     "A non-time OVER's SUM and AVG of TINYINT, INT, BIGINT: their types and values (truncated toward zero).",
     [("n", ONUM, ONUM_ROWS, None)],
     "SELECT k, o, " + _over(("SUM", "ti", "s_ti"), ("AVG", "ti", "a_ti"), ("SUM", "i", "s_i"), ("AVG", "i", "a_i"),
                             ("SUM", "b", "s_b"), ("AVG", "b", "a_b"), ("COUNT", "i", "c_i")) + " FROM n")
case("types", "over_sum_avg_of_decimal_and_floating",
     "A non-time OVER's SUM and AVG of DECIMAL(10, 2), FLOAT, DOUBLE; MIN and MAX.",
     [("n", ONUM, ONUM_ROWS, None)],
     "SELECT k, o, " + _over(("SUM", "dc", "s_dc"), ("AVG", "dc", "a_dc"), ("SUM", "f", "s_f"), ("AVG", "f", "a_f"),
                             ("SUM", "x", "s_x"), ("AVG", "x", "a_x"), ("MIN", "dc", "lo_dc"), ("MAX", "f", "hi_f"))
     + " FROM n")
case("types", "over_sum_overflows_its_type",
     "A non-time OVER's SUM and AVG of TINYINT / INT past the type's range.",
     [("n", ONUM, [[0, "a", 100, 1, 2147483647, 1, "1.00", 1.0, 1.0], [1, "a", 100, 1, 1, 1, "1.00", 1.0, 1.0]], None)],
     "SELECT o, " + _over(("SUM", "ti", "s_ti"), ("AVG", "ti", "a_ti"), ("SUM", "i", "s_i"), ("AVG", "i", "a_i"))
     + " FROM n")


# window aggregates and MATCH_RECOGNIZE measures (issue 45 item 2): the same functions over a window
WNUM = NUM + ", t TIMESTAMP(3), WATERMARK FOR t AS t"
WNUM_ROWS = [[*r, f"2024-01-01 00:00:0{s}"] for r, s in zip(NUM_ROWS, (1, 2, 3, 6, 7, 8))]
WOVER_ROWS = [["a", 100, 1, 2147483647, 9223372036854775807, "1.00", 1.0, 1.0, "2024-01-01 00:00:01"],
              ["a", 100, 1, 1, 1, "1.00", 1.0, 1.0, "2024-01-01 00:00:02"],
              ["a", -100, 1, -2147483647, 1, "1.00", 1.0, 1.0, "2024-01-01 00:00:06"],
              ["a", -100, 1, -2, -1, "1.00", 1.0, 1.0, "2024-01-01 00:00:07"]]
W_INT = "SUM(ti) AS s_ti, AVG(ti) AS a_ti, SUM(si) AS s_si, AVG(si) AS a_si, SUM(i) AS s_i, AVG(i) AS a_i, " \
    "SUM(b) AS s_b, AVG(b) AS a_b, COUNT(i) AS c_i, COUNT(*) AS c"
W_DEC = "SUM(dc) AS s_dc, AVG(dc) AS a_dc, SUM(f) AS s_f, AVG(f) AS a_f, SUM(x) AS s_x, AVG(x) AS a_x, " \
    "MIN(dc) AS lo_dc, MAX(f) AS hi_f, MIN(ti) AS lo_ti"
W_OVER = "SUM(ti) AS s_ti, AVG(ti) AS a_ti, SUM(i) AS s_i, AVG(i) AS a_i, SUM(b) AS s_b, AVG(b) AS a_b"
TUMBLE5 = "TABLE(TUMBLE(TABLE n, DESCRIPTOR(t), INTERVAL '5' SECOND))"
case("types", "window_tvf_sum_avg_of_integers",
     "A TUMBLE window TVF's SUM and AVG of TINYINT, SMALLINT, INT, BIGINT: their types and values.",
     [("n", WNUM, WNUM_ROWS, None)],
     f"SELECT k, window_start, window_end, {W_INT} FROM {TUMBLE5} GROUP BY k, window_start, window_end")
case("types", "window_tvf_sum_avg_of_decimal_and_floating",
     "A TUMBLE window TVF's SUM and AVG of DECIMAL(10, 2), FLOAT, DOUBLE; MIN and MAX.",
     [("n", WNUM, WNUM_ROWS, None)],
     f"SELECT k, window_start, window_end, {W_DEC} FROM {TUMBLE5} GROUP BY k, window_start, window_end")
case("types", "window_tvf_sum_overflows_its_type",
     "A TUMBLE window TVF's SUM and AVG of TINYINT, INT, BIGINT past the type's range.",
     [("n", WNUM, WOVER_ROWS, None)],
     f"SELECT window_start, {W_OVER} FROM {TUMBLE5} GROUP BY window_start, window_end")
case("types", "hop_sum_overflows_its_type",
     "A HOP window TVF (slices merged) SUM and AVG past the type's range.",
     [("n", WNUM, WOVER_ROWS, None)],
     "SELECT window_start, window_end, " + W_OVER + " FROM TABLE(HOP(TABLE n, DESCRIPTOR(t), INTERVAL '5' SECOND, "
     "INTERVAL '10' SECOND)) GROUP BY window_start, window_end")
case("types", "cumulate_sum_avg",
     "A CUMULATE window TVF's SUM and AVG of INT and DECIMAL.",
     [("n", WNUM, WNUM_ROWS, None)],
     "SELECT k, window_start, window_end, SUM(i) AS s_i, AVG(i) AS a_i, SUM(dc) AS s_dc, AVG(dc) AS a_dc, "
     "AVG(f) AS a_f FROM TABLE(CUMULATE(TABLE n, DESCRIPTOR(t), INTERVAL '5' SECOND, INTERVAL '10' SECOND)) "
     "GROUP BY k, window_start, window_end")
case("types", "session_sum_avg",
     "A SESSION window TVF's SUM and AVG of INT, BIGINT and DECIMAL, past INT's range.",
     [("n", WNUM, WOVER_ROWS, None)],
     "SELECT k, window_start, window_end, SUM(i) AS s_i, AVG(i) AS a_i, SUM(b) AS s_b, AVG(b) AS a_b, "
     "SUM(dc) AS s_dc, AVG(dc) AS a_dc FROM TABLE(SESSION(TABLE n PARTITION BY k, DESCRIPTOR(t), "
     "INTERVAL '2' SECOND)) GROUP BY k, window_start, window_end")
case("types", "group_window_sum_avg",
     "A legacy group window (GROUP BY TUMBLE(t, ...)): SUM and AVG of INT, TINYINT, DECIMAL, FLOAT.",
     [("n", WNUM, WNUM_ROWS, None)],
     "SELECT k, TUMBLE_START(t, INTERVAL '5' SECOND) AS ws, SUM(ti) AS s_ti, AVG(ti) AS a_ti, SUM(i) AS s_i, "
     "AVG(i) AS a_i, SUM(dc) AS s_dc, AVG(dc) AS a_dc, AVG(f) AS a_f FROM n GROUP BY k, TUMBLE(t, INTERVAL '5' SECOND)")
case("types", "group_window_sum_overflows_its_type",
     "A legacy group window's SUM and AVG past the type's range.",
     [("n", WNUM, WOVER_ROWS, None)],
     "SELECT TUMBLE_START(t, INTERVAL '5' SECOND) AS ws, " + W_OVER + " FROM n GROUP BY TUMBLE(t, INTERVAL '5' SECOND)")
case("types", "sum_avg_bigint_overflow",
     "A group aggregate's SUM and AVG of BIGINT past its range: the sum wraps around at 64 bits before AVG divides.",
     [("n", WNUM, WOVER_ROWS, None)],
     "SELECT k, SUM(b) AS s_b, AVG(b) AS a_b, SUM(i) AS s_i, AVG(i) AS a_i FROM n GROUP BY k")
case("types", "over_sum_avg_bigint_overflow",
     "A non-time OVER's SUM and AVG of BIGINT past its range.",
     [("n", ONUM, [[i, *r[:-1]] for i, r in enumerate(WOVER_ROWS)], None)],
     "SELECT o, " + _over(("SUM", "b", "s_b"), ("AVG", "b", "a_b")) + " FROM n")
FLOAT_ROWS = [["a", 1, 1, 1, 1, "1.00", f, 1.0, "2024-01-01 00:00:01"] for f in (16777216.0, 1.0, 1.0)]
case("types", "window_float_sum_rounding",
     "A TUMBLE window's SUM and AVG of FLOAT values whose running sum a FLOAT does not hold (2^24 + 1 + 1).",
     [("n", WNUM, FLOAT_ROWS, None)],
     f"SELECT window_start, SUM(f) AS s_f, AVG(f) AS a_f FROM {TUMBLE5} GROUP BY window_start, window_end")
MR_TYPES = ("SELECT * FROM n MATCH_RECOGNIZE (PARTITION BY k ORDER BY t MEASURES {measures} "
            "ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A{{2}}) DEFINE A AS TRUE)")
case("types", "match_measures_sum_avg",
     "MATCH_RECOGNIZE measures SUM and AVG of integer, DECIMAL and floating columns; MIN, MAX, COUNT.",
     [("n", WNUM, WNUM_ROWS, None)],
     MR_TYPES.format(measures="SUM(A.ti) AS s_ti, AVG(A.ti) AS a_ti, SUM(A.i) AS s_i, AVG(A.i) AS a_i, "
                     "AVG(A.b) AS a_b, SUM(A.dc) AS s_dc, AVG(A.dc) AS a_dc, SUM(A.f) AS s_f, AVG(A.f) AS a_f, "
                     "AVG(A.x) AS a_x, MIN(A.dc) AS lo_dc, MAX(A.f) AS hi_f, COUNT(A.i) AS c_i"))
case("types", "match_measures_overflow",
     "MATCH_RECOGNIZE measures SUM and AVG of TINYINT, INT, BIGINT past the type's range.",
     [("n", WNUM, WOVER_ROWS, None)],
     MR_TYPES.format(measures="SUM(A.ti) AS s_ti, AVG(A.ti) AS a_ti, SUM(A.i) AS s_i, AVG(A.i) AS a_i, "
                     "SUM(A.b) AS s_b, AVG(A.b) AS a_b"))


# ---- nan (issue 47 item 1): NaN, infinities and -0.0 through aggregates
group("nan", "NaN, +-Infinity and -0.0 through group aggregates: MIN/MAX over insert-only input (Flink's MinAggFunction "
      "compares with Java's primitive operators) and over updates (MinWithRetractAggFunction: Double.compareTo, NaN "
      "above every number), SUM, AVG, COUNT(DISTINCT) (Double.equals: one NaN, -0.0 apart from 0.0).")
NAN_T = "k STRING, v DOUBLE"
NAN_ROWS = [["a", "1.5"], ["a", "NaN"], ["b", "NaN"], ["b", "1.5"], ["c", "0.0"], ["c", "-0.0"], ["d", "-0.0"],
            ["d", "0.0"], ["e", "Infinity"], ["e", "-Infinity"], ["f", "NaN"], ["f", "NaN"]]
case("nan", "min_max_insert_only",
     "MIN and MAX of a DOUBLE over insert-only input, NaN and -0.0 first and later.",
     [("t", NAN_T, NAN_ROWS, None)],
     "SELECT k, MIN(v) AS lo, MAX(v) AS hi, SUM(v) AS s, AVG(v) AS a, COUNT(v) AS c FROM t GROUP BY k")
case("nan", "count_distinct",
     "COUNT(DISTINCT v) over NaN, NaN, 0.0, -0.0, 1.5.",
     [("t", NAN_T, [["a", "NaN"], ["a", "NaN"], ["a", "0.0"], ["a", "-0.0"], ["a", "1.5"]], None)],
     "SELECT k, COUNT(DISTINCT v) AS n FROM t GROUP BY k")
case("nan", "cascade_min",
     "An aggregate over a retracting one: the NaN MIN of one key reaches SUM, MAX and MIN above.",
     [("t", NAN_T, [["a", "NaN"], ["b", "1.5"]], None)],
     "SELECT COUNT(*) AS c, SUM(mn) AS s, MAX(mn) AS hi, MIN(mn) AS lo FROM (SELECT k, MIN(v) AS mn FROM t GROUP BY k)")
case("nan", "cascade_sum_filtered",
     "The same over an inner SUM, with a filter in between.",
     [("t", NAN_T, [["a", "NaN"], ["b", "1.5"], ["a", "2.0"], ["c", "-0.0"]], None)],
     "SELECT COUNT(*) AS c, SUM(sm) AS s, MAX(sm) AS hi, MIN(sm) AS lo FROM (SELECT k, SUM(v) AS sm FROM t GROUP BY k) "
     "WHERE k <> 'z'")
case("nan", "cascade_retracts_nan",
     "MAX over updates where the NaN is retracted again (a Top-1 ascending: NaN sorts above every number): the "
     "maximum comes back to a number.",
     [("t", NAN_T, [["a", "NaN"], ["b", "1.5"], ["a", "2.0"]], None)],
     "SELECT MAX(v) AS hi, MIN(v) AS lo FROM (SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k "
     "ORDER BY v) AS rn FROM t) WHERE rn = 1)")


# ---- sort (issue 47 item 3): ORDER BY over a stream
group("sort", "ORDER BY over a streaming table: only its time attribute ascending first (a temporal sort), or with "
      "LIMIT (a Top-N); anything else is refused by the planner.")
SORT_T = [("t", "k STRING, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts",
           [["a", 3, "2024-01-01 00:00:01"], ["b", 1, "2024-01-01 00:00:02"], ["a", 2, "2024-01-01 00:00:03"]], None)]
case("sort", "order_by_a_column", "ORDER BY a column that is no time attribute.", SORT_T,
     "SELECT k, v FROM t ORDER BY v")
case("sort", "order_by_time_then_column", "ORDER BY the time attribute, then a column.", SORT_T,
     "SELECT k, v, ts FROM t ORDER BY ts, v")
case("sort", "order_by_time_desc", "ORDER BY the time attribute descending.", SORT_T,
     "SELECT k, v, ts FROM t ORDER BY ts DESC")
case("sort", "order_by_column_limit", "ORDER BY a column with LIMIT: a Top-N.", SORT_T,
     "SELECT k, v FROM t ORDER BY v LIMIT 2")
case("sort", "window_order_by_window_start", "A window aggregation ordered by window_start.", SORT_T,
     "SELECT k, window_start, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '2' SECOND)) "
     "GROUP BY k, window_start, window_end ORDER BY window_start")
case("sort", "window_order_by_window_time", "A window aggregation ordered by window_time, its time attribute.", SORT_T,
     "SELECT k, window_time, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '2' SECOND)) "
     "GROUP BY k, window_start, window_end, window_time ORDER BY window_time")
case("sort", "match_order_by_measure", "MATCH_RECOGNIZE's output ordered by a measure.", SORT_T,
     "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.v AS av ONE ROW PER MATCH "
     "PATTERN (A) DEFINE A AS A.v > 0) ORDER BY av")


# ---- no_time
group("no_time", "Tables without a time attribute (no WATERMARK, no PROCTIME()): what runs, and the errors of "
      "what needs one (issue 45 item 4).")
NT = "k STRING, v INT, ts TIMESTAMP(3)"
NT_ROWS = [["a", 1, "2024-01-01 00:00:01"], ["b", 2, "2024-01-01 00:00:02"], ["a", 3, "2024-01-01 00:00:03"],
           ["b", 4, "2024-01-01 00:00:01"], ["a", 5, "2024-01-01 00:00:05"]]
NT_T = [("t", NT, NT_ROWS, None)]
case("no_time", "group_by_count", "A GROUP BY runs on arrival order alone.", NT_T,
     "SELECT k, COUNT(*) AS c, SUM(v) AS s FROM t GROUP BY k")
case("no_time", "row_number_on_a_timestamp_is_top1",
     "ROW_NUMBER() ... ORDER BY a TIMESTAMP that is no time attribute, rn = 1: a Top-1, not a deduplication.", NT_T,
     "SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn FROM t) WHERE rn = 1")
case("no_time", "interval_condition_is_a_regular_join",
     "A join whose condition bounds two TIMESTAMPs that are no time attributes: a regular join with that condition.",
     NT_T, "SELECT a.k, a.v AS av, b.v AS bv FROM t a JOIN t b ON a.k = b.k AND a.ts BETWEEN b.ts - INTERVAL '1' "
     "SECOND AND b.ts AND a.v <> b.v")
case("no_time", "tumble_tvf", "A window TVF over a column that is no time attribute.", NT_T,
     "SELECT window_start, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '2' SECOND)) "
     "GROUP BY window_start, window_end", expect="error")
case("no_time", "group_window", "A group window (GROUP BY TUMBLE) over a column that is no time attribute.", NT_T,
     "SELECT TUMBLE_START(ts, INTERVAL '2' SECOND) AS ws, COUNT(*) AS c FROM t GROUP BY TUMBLE(ts, INTERVAL '2' SECOND)",
     expect="error")
case("no_time", "match_recognize", "MATCH_RECOGNIZE ordered by a column that is no time attribute.", NT_T,
     "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.v AS av ONE ROW PER MATCH "
     "PATTERN (A) DEFINE A AS A.v > 0)", expect="error")
case("no_time", "over_bounded_rows", "An OVER with a bounded ROWS frame ordered by a column that is no time attribute.",
     NT_T, "SELECT k, SUM(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM t",
     expect="error")
case("no_time", "temporal_join",
     "FOR SYSTEM_TIME AS OF a column of the probe side that is no time attribute.",
     [("t", NT, NT_ROWS, None),
      ("r", "k STRING, rate INT, rts TIMESTAMP(3), WATERMARK FOR rts AS rts, PRIMARY KEY (k) NOT ENFORCED",
       [["a", 10, "2024-01-01 00:00:00"], ["b", 20, "2024-01-01 00:00:00"]], None)],
     "SELECT t.k, t.v, r.rate FROM t JOIN r FOR SYSTEM_TIME AS OF t.ts ON t.k = r.k", expect="error")


def main(argv: list[str]) -> None:
    global TMP
    TMP = Path(tempfile.mkdtemp(prefix="flink-kit-golden-"))
    for g in argv or list(GROUPS):
        print("wrote", write_group(g), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
