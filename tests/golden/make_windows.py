"""Write tests/golden/flink-2.3/windows.json: real Flink 2.3's DataStream window operator on small
scenarios the kit's windows are compared with (not a test; see tests/golden/README.md)::

    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 .venv-flink/bin/python tests/golden/make_windows.py

Each scenario is its own job: ``StreamExecutionEnvironment`` at parallelism 1,
``python.execution-mode = thread`` (the window operator's timers live in the JVM's timer service,
called synchronously), ``from_collection(rows)`` (one source: arrival order = list order), a Python
timestamp assigner (the row's ``ts``) with a watermark generator that emits ``max_ts - delay - 1``
after *every* element (a small Java class compiled here against Flink's jar: PyFlink's built-in
strategies emit periodically), then ``key_by(row.k)``, ``window(assigner)``, ``trigger(...)``
and a ``ProcessWindowFunction`` (or ``reduce``). Each firing's row is what the function saw:
the key, the window's bounds, its elements' ``v`` in state order, and
``context.current_watermark()``. Rows are collected with ``execute_and_collect()`` in
emission order. (Importing this module runs nothing and needs no PyFlink.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "flink-2.3" / "windows.json"
FLINK_VERSION = "2.3.0"
CONFIG = {"parallelism.default": "1", "python.execution-mode": "thread"}

WATERMARKS_JAVA = """
package flinkkit.golden;

import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkGeneratorSupplier;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;

/** Bounded out-of-orderness, emitted after every element: max_ts - delay - 1. */
public class EveryElementWatermarks implements WatermarkStrategy<Object> {
    private final long delay;

    public EveryElementWatermarks(long delay) {
        this.delay = delay;
    }

    @Override
    public WatermarkGenerator<Object> createWatermarkGenerator(WatermarkGeneratorSupplier.Context context) {
        final long d = delay;
        return new WatermarkGenerator<Object>() {
            private long max = Long.MIN_VALUE;

            @Override
            public void onEvent(Object event, long timestamp, WatermarkOutput output) {
                if (timestamp > max) {
                    max = timestamp;
                    output.emitWatermark(new Watermark(max - d - 1));
                }
            }

            @Override
            public void onPeriodicEmit(WatermarkOutput output) {
            }
        };
    }
}
"""

SLIDING_CET = ("SlidingEventTimeWindows.of(Time.milliseconds(20), Time.milliseconds(5))",
               "ContinuousEventTimeTrigger.of(Time.milliseconds(5))")

# name, says, delay, assigner, trigger (None: the default), function ("process" or "reduce"),
# input rows (k, ts, v), and for "reduce" the names of the row's three fields.
SCENARIOS = [
    ("timers_same_time_one_key",
     "sliding windows under ContinuousEventTimeTrigger: several windows of one key have timers at one "
     "time; the order they fire in is the timer heap's", 0, *SLIDING_CET, "process",
     [("a", 1, 1), ("a", 7, 7), ("a", 12, 12), ("a", 3, 3), ("a", 26, 26), ("a", 40, 40), ("a", 44, 44),
      ("a", 61, 61)]),
    ("timers_same_time_two_keys",
     "the same with two keys whose timers share one heap (parallelism 1)", 0, *SLIDING_CET, "process",
     [("a", 1, 1), ("b", 2, 102), ("a", 7, 7), ("b", 9, 109), ("a", 12, 12), ("b", 13, 113), ("a", 3, 3),
      ("b", 26, 126), ("a", 26, 26), ("a", 40, 40), ("b", 41, 141), ("a", 44, 44), ("b", 61, 161)]),
    ("timers_same_time_many_keys",
     "several keys, each with several windows at the same timer times, registered interleaved", 1,
     *SLIDING_CET, "process",
     [(k, t, t * 10 + i) for t in (2, 8, 11, 17, 23, 30, 38, 52) for i, k in enumerate("cadbe")][::2]
     + [("e", 90, 900)]),
    ("watermark_in_timer_firing",
     "context.current_watermark() in a function run by an event-time timer: the watermark that crossed "
     "the timer (here emitted after another key's element), not the key's next one", 0,
     "TumblingEventTimeWindows.of(Time.milliseconds(10))", None, "process",
     [("a", 1, 1), ("b", 3, 3), ("b", 12, 12), ("a", 30, 30), ("b", 35, 35), ("a", 36, 36)]),
    ("watermark_continuous_jump",
     "a watermark jump over several ContinuousEventTimeTrigger boundaries fires once per boundary, all "
     "under the one watermark that crossed them", 0,
     "TumblingEventTimeWindows.of(Time.milliseconds(100))", "ContinuousEventTimeTrigger.of(Time.milliseconds(10))",
     "process", [("a", 1, 1), ("b", 5, 5), ("b", 47, 47), ("a", 48, 48), ("b", 99, 99), ("a", 150, 150)]),
    ("watermark_none_yet_and_end",
     "an element-caused firing before any watermark sees Long.MIN_VALUE; firings at the end of input "
     "see Long.MAX_VALUE", 0, "TumblingEventTimeWindows.of(Time.milliseconds(10))",
     "CountTrigger.of(1)", "process", [("a", 5, 5), ("a", 3, 3), ("b", 12, 12), ("a", 7, 7)]),
    ("watermark_none_yet_timer_at_end",
     "the event-time trigger's firings at the end of input run under Long.MAX_VALUE", 0,
     "TumblingEventTimeWindows.of(Time.milliseconds(10))", None, "process",
     [("a", 5, 5), ("b", 25, 25), ("a", 14, 14)]),
]
for _name in ("key", "window_start", "window_end", "pane", "watermark", "seq", "late", "firing", "cause",
              "timer", "proctime", "fired_after", "contents", "fate"):
    SCENARIOS.append(
        (f"column_named_{_name}",
         f"a reduce over rows whose key field is named {_name!r}: Flink has no reserved field names", 0,
         "TumblingEventTimeWindows.of(Time.milliseconds(10))", None, "reduce",
         [("a", 1, 1), ("b", 2, 20), ("a", 4, 3), ("a", 12, 5), ("b", 13, 7)], (_name, "ts", "v")))


def _jar(tmp: Path, flink_lib: Path) -> Path:
    """EveryElementWatermarks compiled against Flink's own jar, as a jar."""
    java_home = os.environ.get("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")
    src = tmp / "flinkkit" / "golden" / "EveryElementWatermarks.java"
    src.parent.mkdir(parents=True)
    src.write_text(WATERMARKS_JAVA)
    classpath = ":".join(str(p) for p in flink_lib.glob("flink-dist*.jar"))
    subprocess.run([f"{java_home}/bin/javac", "--release", "11", "-cp", classpath, "-d", str(tmp / "classes"),
                    str(src)], check=True)
    jar = tmp / "kit-golden-watermarks.jar"
    subprocess.run([f"{java_home}/bin/jar", "cf", str(jar), "-C", str(tmp / "classes"), "."], check=True)
    return jar


def run_scenario(jar: Path, scenario) -> dict:
    from pyflink.common import Configuration, Row, Time, Types, WatermarkStrategy
    from pyflink.common.watermark_strategy import TimestampAssigner
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.functions import ProcessWindowFunction
    from pyflink.datastream import window as W
    from pyflink.java_gateway import get_gateway

    name, says, delay, assigner, trigger, function, rows, *fields = scenario
    fields = fields[0] if fields else ("k", "ts", "v")
    conf = Configuration()
    for k, v in {**CONFIG, "python.executable": sys.executable, "python.client.executable": sys.executable}.items():
        conf.set_string(k, v)
    conf.set_string("pipeline.jars", jar.as_uri())
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    env.get_config().set_auto_watermark_interval(0)
    info = Types.ROW_NAMED(list(fields), [Types.STRING(), Types.LONG(), Types.LONG()])
    ds = env.from_collection([Row(*r) for r in rows], type_info=info)

    class Ts(TimestampAssigner):
        def extract_timestamp(self, value, record_timestamp):
            return value[1]

    j_strategy = get_gateway().jvm.flinkkit.golden.EveryElementWatermarks(delay)
    ds = ds.assign_timestamps_and_watermarks(WatermarkStrategy(j_strategy).with_timestamp_assigner(Ts()))
    names = {n: getattr(W, n) for n in dir(W)}
    names["Time"] = Time
    windowed = ds.key_by(lambda r: r[0], key_type=Types.STRING()).window(eval(assigner, names))  # noqa: S307
    if trigger:
        windowed = windowed.trigger(eval(trigger, names))  # noqa: S307

    class Collect(ProcessWindowFunction):
        def process(self, key, context, elements):
            w = context.window()
            yield json.dumps([key, w.start, w.end, [e[2] for e in elements], context.current_watermark()])

    if function == "process":
        out = windowed.process(Collect(), Types.STRING())
    else:
        out = windowed.reduce(lambda a, b: Row(a[0], max(a[1], b[1]), a[2] + b[2]), output_type=info) \
            .map(lambda r: json.dumps([r[0], r[1], r[2]]), Types.STRING())
    started = time.time()
    with out.execute_and_collect() as results:
        got = [json.loads(r) for r in results]
    result = {"name": name, "says": says, "delay": delay, "assigner": assigner, "trigger": trigger,
              "function": function, "fields": list(fields), "input": [list(r) for r in rows]}
    if function == "process":
        result["columns"] = ["key", "window", "values", "current_watermark"]
        result["firings"] = [[k, [s, e], vs, wm] for k, s, e, vs, wm in got]
    else:
        result["columns"] = list(fields)
        result["rows"] = got
    result["seconds"] = round(time.time() - started, 2)
    return result


def main(argv: list[str]) -> None:
    import site
    # thread mode embeds CPython in the JVM (pemja): it must find this environment's packages
    os.environ["PYTHONPATH"] = os.pathsep.join(site.getsitepackages() + [os.environ.get("PYTHONPATH", "")])
    import pyflink
    lib = Path(pyflink.__file__).parent / "lib"
    tmp = Path(tempfile.mkdtemp(prefix="flink-kit-windows-"))
    jar = _jar(tmp, lib)
    wanted = set(argv)
    old = {s["name"]: s for s in json.loads(OUT.read_text())["scenarios"]} if OUT.is_file() else {}
    out = []
    for scenario in SCENARIOS:
        if wanted and scenario[0] not in wanted and scenario[0] in old:
            out.append(old[scenario[0]])
            continue
        out.append(run_scenario(jar, scenario))
        print(scenario[0], len(out[-1].get("firings", out[-1].get("rows", []))), flush=True)
    OUT.write_text(json.dumps({
        "flink_version": FLINK_VERSION, "group": "windows",
        "about": "the DataStream window operator (PyFlink, thread mode) with a watermark after every "
                 "element; firings in emission order; Long.MIN_VALUE = -9223372036854775808, "
                 "Long.MAX_VALUE = 9223372036854775807",
        "program": "tests/golden/make_windows.py", "config": CONFIG,
        "watermarks": "max_ts - delay - 1 after every element (EveryElementWatermarks, in the program)",
        "scenarios": out}, indent=1) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main(sys.argv[1:])
