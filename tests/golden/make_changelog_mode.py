"""Write the changelog-mode goldens of real Apache Flink 2.3.0 (not a test): for a corpus of
continuous queries, the optimized physical plan that ``EXPLAIN CHANGELOG_MODE`` prints, with
each node's changelog mode, into each kind of sink; and the planner's errors for the queries
Flink cannot run continuously.

Run from the repository root, inside the real-Flink environment (``make .venv-flink/.installed``,
Java 17 as for ``make_changelog.py``)::

    .venv-flink/bin/python tests/golden/make_changelog_mode.py

Nothing runs: every statement is only explained (``TableEnvironment.explain_sql(statement,
ExplainDetail.CHANGELOG_MODE)``, which is what ``EXPLAIN CHANGELOG_MODE <statement>`` prints),
in one STREAMING ``TableEnvironment`` (parallelism 1, session time zone UTC), each sink a table of its own.
Every table is a ``filesystem`` CSV table (never read) with an event-time attribute and a
watermark, as each ``kit.Stream`` has; ``pt AS PROCTIME()`` where a query needs processing
time. Each query is explained:

- ``select``: the bare query (``EXPLAIN CHANGELOG_MODE SELECT ...``), whose consumer may take upserts;
- ``retract``: ``INSERT INTO`` a ``print`` sink (it asks for every row kind: the planner must
  send update-before rows);
- ``upsert``: ``INSERT INTO`` a ``blackhole`` sink (it takes INSERT, UPDATE_AFTER, DELETE:
  no update-before needed);
- ``retract_pk`` / ``upsert_pk``: the same sinks declaring ``PRIMARY KEY (...) NOT ENFORCED``
  (only for queries with a ``pk``);
- ``append``: ``INSERT INTO`` a ``filesystem`` CSV sink, which takes inserts only (an
  updating query fails there: the error is recorded).

Output: ``tests/golden/flink-2.3/changelog_mode.json`` (see ``tests/golden/README.md``).
(Importing this module runs nothing and needs no PyFlink.)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_changelog import BASE_CONFIG, FLINK_VERSION, OUT, _message, _physical_plan  # noqa: E402

SINKS = {
    "retract": "print",
    "upsert": "blackhole",
    "append": "filesystem",
}

# name -> columns (name, Flink type), the event-time column, the watermark delay (seconds),
# the processing-time attribute (a computed column PROCTIME()), the primary key
TABLES = {
    "words": {"columns": [["word", "STRING"], ["ts", "TIMESTAMP(3)"]], "rowtime": "ts"},
    "clicks": {"columns": [["usr", "STRING"], ["url", "STRING"], ["cTime", "TIMESTAMP(3)"]], "rowtime": "cTime"},
    "s": {"columns": [["product_id", "STRING"], ["category", "STRING"], ["sales", "INT"], ["ts", "TIMESTAMP(3)"]],
          "rowtime": "ts"},
    "e": {"columns": [["k", "STRING"], ["v", "INT"], ["ts", "TIMESTAMP(3)"]], "rowtime": "ts", "proctime": "pt"},
    "l": {"columns": [["k", "STRING"], ["lv", "STRING"], ["lt", "TIMESTAMP(3)"]], "rowtime": "lt"},
    "r": {"columns": [["k", "STRING"], ["rv", "STRING"], ["rt", "TIMESTAMP(3)"]], "rowtime": "rt"},
    "orders": {"columns": [["order_id", "STRING"], ["currency", "STRING"], ["amount", "INT"],
                           ["order_time", "TIMESTAMP(3)"]], "rowtime": "order_time"},
    "rates": {"columns": [["currency", "STRING NOT NULL"], ["rate", "INT"], ["update_time", "TIMESTAMP(3)"]],
              "rowtime": "update_time", "primary_key": ["currency"]},
    "shipments": {"columns": [["ship_id", "STRING"], ["order_id", "STRING"], ["ship_time", "TIMESTAMP(3)"]],
                  "rowtime": "ship_time"},
    "ticker": {"columns": [["symbol", "STRING"], ["price", "INT"], ["rowtime", "TIMESTAMP(3)"]], "rowtime": "rowtime"},
}
DELAY_S = 5   # every table's watermark: rowtime - 5 s (kit: watermark=Duration.of_seconds(5))

WF_INNER = "SELECT word, COUNT(*) AS cnt FROM words GROUP BY word"
WF = f"SELECT cnt, COUNT(cnt) AS freq FROM ({WF_INNER}) GROUP BY cnt"
CLICK_COUNTS = "SELECT usr, COUNT(*) AS c FROM clicks GROUP BY usr"
CLICK_SUMS = "SELECT usr, SUM(CHAR_LENGTH(url)) AS total FROM clicks GROUP BY usr"

# name, what it shows, query, pk (a key the result has, for the *_pk sinks) or None
QUERIES = [
    ("word_freq", "The seed's E.g.2: the word-frequency cascade; the outer aggregate over updates is COUNT_RETRACT "
     "and needs UB from the inner one whatever the sink; the sink decides whether the outer one sends UB.",
     WF, ["cnt"]),
    ("word_count", "The inner aggregate alone: [I,UB,UA] into a retract sink, [I,UA] into an upsert sink.",
     WF_INNER, ["word"]),
    ("having", "HAVING is a Calc over the aggregate: it keeps the aggregate's changelog mode.",
     "SELECT word, COUNT(*) AS cnt FROM words GROUP BY word HAVING COUNT(*) > 1", ["word"]),
    ("select_distinct", "SELECT DISTINCT is a GroupAggregate without aggregate calls.",
     "SELECT DISTINCT usr FROM clicks", ["usr"]),
    ("count_distinct", "COUNT(DISTINCT) per key.",
     "SELECT usr, COUNT(DISTINCT url) AS urls FROM clicks GROUP BY usr", ["usr"]),
    ("global_count", "A global aggregate (no GROUP BY): one group, an Exchange to a single task.",
     "SELECT COUNT(*) AS n FROM clicks", None),
    ("sum_over_updates", "An aggregate over an updating input uses the _RETRACT functions and emits D.",
     f"SELECT SUM(c) AS total, MAX(c) AS most FROM ({CLICK_COUNTS})", None),
    ("projection_filter", "A projection and filter of an append-only stream: insert-only all the way.",
     "SELECT usr, url FROM clicks WHERE url LIKE '/prod%'", None),
    ("top_n_with_row_number", "Top-N over an append-only input, the row number in the output.",
     "SELECT * FROM (SELECT product_id, category, sales, ROW_NUMBER() OVER (PARTITION BY category "
     "ORDER BY sales DESC) AS rn FROM s) WHERE rn <= 3", None),
    ("top_n_without_row_number", "Top-N over an append-only input, no row number: fewer updates.",
     "SELECT product_id, category, sales FROM (SELECT product_id, category, sales, ROW_NUMBER() OVER "
     "(PARTITION BY category ORDER BY sales DESC) AS rn FROM s) WHERE rn <= 3", None),
    ("top_n_over_updates_monotonic", "Top-N over an aggregate ordered by COUNT DESC (it only grows): "
     "UpdateFastStrategy, which needs only UA from its input.",
     f"SELECT usr, c, rn FROM (SELECT usr, c, ROW_NUMBER() OVER (ORDER BY c DESC) AS rn FROM ({CLICK_COUNTS})) "
     "WHERE rn <= 2", None),
    ("top_n_over_updates_retract", "Top-N over an aggregate ordered by COUNT ASC (against its growth): "
     "RetractStrategy, which needs UB from its input.",
     f"SELECT usr, c FROM (SELECT usr, c, ROW_NUMBER() OVER (ORDER BY c ASC) AS rn FROM ({CLICK_COUNTS})) "
     "WHERE rn <= 2", None),
    ("top_n_over_sum", "Top-N over a SUM (not monotonic: its values may fall).",
     f"SELECT usr, total FROM (SELECT usr, total, ROW_NUMBER() OVER (ORDER BY total DESC) AS rn FROM ({CLICK_SUMS})) "
     "WHERE rn <= 2", None),
    ("dedup_first_proctime", "Deduplication keeping the first row per key on processing time.",
     "SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY pt ASC) AS rn FROM e) WHERE rn = 1",
     None),
    ("dedup_last_proctime", "Deduplication keeping the last row per key on processing time.",
     "SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY pt DESC) AS rn FROM e) WHERE rn = 1",
     ["k"]),
    ("dedup_first_rowtime", "Deduplication keeping the first row per key on event time: insert-only.",
     "SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts ASC) AS rn FROM e) WHERE rn = 1",
     None),
    ("dedup_last_rowtime", "Deduplication keeping the last row per key on event time.",
     "SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM e) WHERE rn = 1",
     ["k"]),
    ("join_inner", "Regular inner join of two append-only streams: insert-only.",
     "SELECT l.k, lv, rv FROM l JOIN r ON l.k = r.k", None),
    ("join_left", "Regular LEFT join of append-only streams: padded rows are retracted later.",
     "SELECT l.k, lv, rv FROM l LEFT JOIN r ON l.k = r.k", None),
    ("join_full", "Regular FULL join of append-only streams.",
     "SELECT l.k AS lk, lv, r.k AS rk, rv FROM l FULL OUTER JOIN r ON l.k = r.k", None),
    ("join_inner_updating", "Inner join of an aggregate (updating, unique key = join key) with an append-only stream.",
     f"SELECT a.usr, a.c, r.rv FROM ({CLICK_COUNTS}) a JOIN r ON a.usr = r.k", None),
    ("join_left_updating", "LEFT join with the updating aggregate on the right.",
     f"SELECT l.k, l.lv, a.c FROM l LEFT JOIN ({CLICK_COUNTS}) a ON l.k = a.usr", None),
    ("join_two_aggregates", "Inner join of two aggregates.",
     f"SELECT a.usr, a.c, b.total FROM ({CLICK_COUNTS}) a JOIN ({CLICK_SUMS}) b ON a.usr = b.usr", None),
    ("union_all", "UNION ALL of an aggregate and an append-only projection.",
     f"SELECT usr, c FROM ({CLICK_COUNTS}) UNION ALL SELECT k AS usr, CAST(v AS BIGINT) AS c FROM e", None),
    ("over_rank_over_updates", "The seed's RANK() OVER (ORDER BY ...) without a Top-N filter over an updating "
     "input: Flink 2.3 plans an OverAggregate over updates.",
     "SELECT *, RANK() OVER (ORDER BY lastAction) AS rk FROM (SELECT usr, MAX(cTime) AS lastAction FROM clicks "
     "GROUP BY usr)", None),
    ("over_rows_rowtime", "OVER aggregation ordered by event time (ROWS): insert-only.",
     "SELECT usr, url, COUNT(*) OVER (PARTITION BY usr ORDER BY cTime ROWS BETWEEN UNBOUNDED PRECEDING AND "
     "CURRENT ROW) AS n FROM clicks", None),
    ("over_range_rowtime", "OVER aggregation ordered by event time with a RANGE interval: insert-only.",
     "SELECT usr, url, COUNT(*) OVER (PARTITION BY usr ORDER BY cTime RANGE BETWEEN INTERVAL '1' HOUR PRECEDING "
     "AND CURRENT ROW) AS n FROM clicks", None),
    ("window_tumble", "A window TVF aggregation: insert-only (a window's result is final when it fires).",
     "SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(cTime), "
     "INTERVAL '1' HOUR)) GROUP BY window_start, window_end", None),
    ("window_hop_keyed", "A HOP window TVF aggregation per key.",
     "SELECT window_start, window_end, usr, COUNT(url) AS n FROM TABLE(HOP(TABLE clicks, DESCRIPTOR(cTime), "
     "INTERVAL '30' MINUTE, INTERVAL '1' HOUR)) GROUP BY window_start, window_end, usr", None),
    ("window_then_aggregate", "A GROUP BY over a window aggregation's (insert-only) output.",
     "SELECT n, COUNT(*) AS windows FROM (SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(TUMBLE("
     "TABLE clicks, DESCRIPTOR(cTime), INTERVAL '1' HOUR)) GROUP BY window_start, window_end) GROUP BY n", ["n"]),
    ("match_recognize", "MATCH_RECOGNIZE: insert-only (a match is emitted once).",
     "SELECT * FROM ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime MEASURES A.price AS a_price, "
     "C.price AS c_price ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B* C) "
     "DEFINE B AS B.price > A.price, C AS C.price < A.price)", None),
    ("temporal_join", "An event-time temporal join against a versioned table: insert-only.",
     "SELECT o.order_id, o.amount * r.rate AS converted, o.order_time FROM orders AS o JOIN rates "
     "FOR SYSTEM_TIME AS OF o.order_time AS r ON o.currency = r.currency", None),
    ("interval_join", "An interval join: insert-only.",
     "SELECT o.order_id, s.ship_id FROM orders o, shipments s WHERE o.order_id = s.order_id AND "
     "s.ship_time BETWEEN o.order_time AND o.order_time + INTERVAL '4' HOUR", None),
    ("order_by_rowtime", "ORDER BY the event-time attribute ascending: a temporal sort, insert-only.",
     "SELECT usr, url, cTime FROM clicks ORDER BY cTime", None),
]

# queries Flink cannot run continuously: name, why, query, the sink it goes into
ERRORS = [
    ("rank_top_n", "RANK() with a Top-N filter: only ROW_NUMBER Top-N runs on streams.",
     "SELECT * FROM (SELECT product_id, category, sales, RANK() OVER (PARTITION BY category ORDER BY sales DESC) "
     "AS rk FROM s) WHERE rk <= 2", "select"),
    ("dense_rank_top_n", "DENSE_RANK() with a Top-N filter.",
     "SELECT * FROM (SELECT product_id, category, sales, DENSE_RANK() OVER (PARTITION BY category ORDER BY sales "
     "DESC) AS rk FROM s) WHERE rk <= 2", "select"),
    ("row_number_desc_without_filter", "ROW_NUMBER() OVER (... ORDER BY x DESC) without a Top-N filter: an "
     "OverAggregate on a non-time column, which must be ascending.",
     "SELECT product_id, sales, ROW_NUMBER() OVER (PARTITION BY category ORDER BY sales DESC) AS rn FROM s", "select"),
    ("over_rank_desc_over_updates", "RANK() OVER (ORDER BY x DESC) without a filter over an updating input.",
     f"SELECT usr, c, RANK() OVER (ORDER BY c DESC) AS rk FROM ({CLICK_COUNTS})", "select"),
    ("order_by_non_time", "ORDER BY a column that is not the event-time attribute.",
     "SELECT usr, url FROM clicks ORDER BY url", "select"),
    ("order_by_rowtime_desc", "ORDER BY the event-time attribute descending.",
     "SELECT usr, url, cTime FROM clicks ORDER BY cTime DESC", "select"),
    ("append_sink_fed_by_update", "An updating query INSERTed INTO an append-only (filesystem) sink.",
     WF_INNER, "append"),
    ("append_sink_fed_by_cascade", "The cascade (it deletes too) into an append-only sink.",
     WF, "append"),
    ("append_sink_fed_by_left_join", "A LEFT join (it retracts padded rows) into an append-only sink.",
     "SELECT l.k, lv, rv FROM l LEFT JOIN r ON l.k = r.k", "append"),
    ("match_recognize_over_updates", "MATCH_RECOGNIZE reads an updating input.",
     f"SELECT * FROM ({CLICK_COUNTS}) MATCH_RECOGNIZE (ORDER BY c MEASURES A.usr AS u PATTERN (A) DEFINE A AS "
     "A.c > 1)", "select"),
    ("window_over_updates", "A window TVF over an updating input: the aggregate's output has no time attribute.",
     "WITH last_click AS (SELECT usr, MAX(cTime) AS t FROM clicks GROUP BY usr) SELECT window_start, COUNT(*) AS n "
     "FROM TABLE(TUMBLE(TABLE last_click, DESCRIPTOR(t), INTERVAL '1' HOUR)) GROUP BY window_start, window_end",
     "select"),
]


def ddl(name: str, spec: dict) -> str:
    cols = [f"`{c}` {t}" for c, t in spec["columns"]]
    if spec.get("proctime"):
        cols.append(f"`{spec['proctime']}` AS PROCTIME()")
    cols.append(f"WATERMARK FOR `{spec['rowtime']}` AS `{spec['rowtime']}` - INTERVAL '{DELAY_S}' SECOND")
    if spec.get("primary_key"):
        cols.append(f"PRIMARY KEY ({', '.join(spec['primary_key'])}) NOT ENFORCED")
    body = ",\n  ".join(cols)
    return (f"CREATE TEMPORARY TABLE {name} (\n  {body}\n) WITH (\n  'connector' = 'filesystem',\n"
            f"  'path' = '{name}.csv',\n  'format' = 'csv'\n)")


def _env():
    from pyflink.table import EnvironmentSettings, TableEnvironment
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    for k, v in BASE_CONFIG.items():
        env.get_config().set(k, v)
    for name, spec in TABLES.items():
        env.execute_sql(ddl(name, spec).replace(f"'{name}.csv'", f"'/tmp/flink-kit-never-read/{name}.csv'"))
    return env


def _sink_ddl(env, query: str, sink: str, connector: str, pk) -> str:
    resolved = env.sql_query(query)._j_table.getResolvedSchema()
    cols = []
    for n, t in zip(resolved.getColumnNames(), resolved.getColumnDataTypes()):
        t = str(t).replace(" *ROWTIME*", "").replace(" *PROCTIME*", "")
        if pk and n in pk and "NOT NULL" not in t:
            t += " NOT NULL"
        cols.append(f"`{n}` {t}")
    if pk:
        cols.append(f"PRIMARY KEY ({', '.join(pk)}) NOT ENFORCED")
    opts = {"connector": connector}
    if connector == "filesystem":
        opts.update({"path": "/tmp/flink-kit-never-written", "format": "csv"})
    with_ = ", ".join(f"'{k}' = '{v}'" for k, v in opts.items())
    return f"CREATE TEMPORARY TABLE {sink} ({', '.join(cols)}) WITH ({with_})"


def explain(env, name: str, query: str, sink: str, pk=None) -> dict:
    """One statement explained: ``{"statement", "sink_ddl"?, "plan"}`` or ``{..., "error", "exception"}``.
    Each sink is a new table (``<query name>_<sink kind>``) of the one environment; the plan does not
    depend on the other tables there."""
    from pyflink.table import ExplainDetail
    out = {}
    try:
        if sink == "select":
            statement = query
        else:
            table = f"{name}_{sink}"
            connector = SINKS[sink.replace("_pk", "")]
            out["sink_ddl"] = _sink_ddl(env, query, table, connector, pk if sink.endswith("_pk") else None)
            env.execute_sql(out["sink_ddl"])
            statement = f"INSERT INTO {table} {query}"
        out["statement"] = "EXPLAIN CHANGELOG_MODE " + statement
        out["plan"] = _physical_plan(env.explain_sql(statement, ExplainDetail.CHANGELOG_MODE))
    except Exception as e:  # noqa: BLE001
        out["error"] = _message(e)
        out["exception"] = type(e).__name__.replace("Py4JJavaError", "") or "Py4JJavaError"
        text = str(e)
        for java in ("TableException", "ValidationException", "SqlParserException", "SqlValidatorException"):
            if java in text:
                out["java_exception"] = next(w for w in text.split() if w.endswith(java) or java + ":" in w).rstrip(":")
                break
    return out


def main() -> None:
    t0 = time.time()
    env = _env()
    queries = []
    for name, says, query, pk in QUERIES:
        rec = {"name": name, "says": says, "query": query, "pk": pk, "plans": {}}
        for sink in ("select", "retract", "upsert", "append") + (("retract_pk", "upsert_pk") if pk else ()):
            rec["plans"][sink] = explain(env, name, query, sink, pk)
        tables = sorted(t for t in TABLES if f" {t}" in f" {query} ".replace("(", " ").replace(",", " "))
        rec["tables"] = tables
        print(name, {k: ("ERROR" if "error" in v else "ok") for k, v in rec["plans"].items()}, flush=True)
        queries.append(rec)
    errors = []
    for name, says, query, sink in ERRORS:
        rec = {"name": name, "says": says, "query": query, "sink": sink, **explain(env, name, query, sink)}
        print(name, rec.get("error", "NO ERROR").splitlines()[0][:150], flush=True)
        errors.append(rec)
    doc = {"flink_version": FLINK_VERSION, "group": "changelog_mode",
           "about": "EXPLAIN CHANGELOG_MODE of continuous queries into each kind of sink, and the planner's "
                    "errors for queries Flink cannot run continuously (plans only: nothing was run).",
           "mode": "streaming", "base_config": BASE_CONFIG,
           "sinks": {"select": "the bare SELECT (EXPLAIN CHANGELOG_MODE SELECT ...)",
                     "retract": "INSERT INTO a 'print' sink: takes every row kind, asks for update-before",
                     "upsert": "INSERT INTO a 'blackhole' sink: takes +I, +U, -D (no update-before)",
                     "retract_pk": "the print sink with PRIMARY KEY (pk) NOT ENFORCED",
                     "upsert_pk": "the blackhole sink with PRIMARY KEY (pk) NOT ENFORCED",
                     "append": "INSERT INTO a 'filesystem' csv sink: inserts only"},
           "watermark_delay_seconds": DELAY_S,
           "tables": {name: {**spec, "ddl": ddl(name, spec)} for name, spec in TABLES.items()},
           "queries": queries, "errors": errors, "seconds": round(time.time() - t0, 1)}
    path = OUT / "changelog_mode.json"
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    print("wrote", path, f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
