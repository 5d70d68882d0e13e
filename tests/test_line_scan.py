"""The kit's read of CSV files (``kit/jvm/LineScan.java``): its plain lines parsed by the
kit, the others by Spark's parser; the rows equal Spark's own read of the files, whatever
the lines, options and columns picked."""

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

SCHEMA = "word STRING, n BIGINT, i INT, t TIMESTAMP"

WORDS = st.sampled_from(["w25", "a b", " lead", "trail ", "é", "中文", "x;y", "NA", "", '"a,b"', '"say ""hi"""',
                         'un"quoted', '"quoted"', "back\\slash", "#hash", "tab\there", "9"])
NUMBERS = st.sampled_from(["0", "7", "-12", "+5", "007", "-", "12345678901", "123456789012345678",
                           "1234567890123456789", "99999999999999999999", "1.5", " 3", "", "NA", "1e3"])
TIMES = st.sampled_from(["2024-01-01 00:00:00.000", "2024-02-29 23:59:59.999", "2023-02-29 00:00:00.000",
                         "2024-01-01 24:00:00.000", "2024-01-01T01:02:03.004", "2024-01-01 01:02:03",
                         "2024-01-01 01:02:03.5", "2024-01-01 01:02:03.123456", "2024-01-01 01:02:03.1234567",
                         "0000-01-01 00:00:00.000", "9999-12-31 23:59:59.999", "2024-1-01 00:00:00.000",
                         "2024-01-01 00:00:00.", "2024-01-01 00:00:00.000Z", "", "NA", "x"])


FORMATS = {None: "2024-03-04 05:06:07.089", "yyyy-MM-dd HH:mm:ss.SSS": "2024-03-04 05:06:07.089",
           "yyyy-MM-dd HH:mm:ss": "2024-03-04 05:06:07", "yyyy-MM-dd'T'HH:mm:ss.SSS": "2024-03-04T05:06:07.089",
           "yyyy-MM-dd HH:mm:ss.SSSSSS": "2024-03-04 05:06:07.089123", "dd/MM/yyyy HH:mm": "04/03/2024 05:06"}


@st.composite
def _line(draw, fmt):
    """A line: mostly a plain row, perhaps with one odd field, or a short, long, blank or comment line."""
    kind = draw(st.sampled_from(["row"] * 8 + ["short", "long", "blank", "spaces", "comment"]))
    if kind in ("blank", "spaces", "comment"):
        return {"blank": "", "spaces": "   ", "comment": "# a comment, 1"}[kind]
    k = draw(st.integers(0, 99))
    fields = [f"w{k}", str(k - 50), str(k), FORMATS[fmt].replace("07", f"{k % 60:02d}")]
    odd = draw(st.integers(-1, 3))
    if odd >= 0:
        fields[odd] = draw([WORDS, NUMBERS, NUMBERS, TIMES][odd])
    return ",".join(fields[:3] if kind == "short" else fields + ["extra"] if kind == "long" else fields)


@st.composite
def _cases(draw):
    fmt = draw(st.sampled_from(list(FORMATS)))
    lines = draw(st.lists(_line(fmt), max_size=12))
    options = {}
    if draw(st.booleans()):
        options["header"] = "true"
        lines = ["word,n,i,t"] + lines
    if fmt:
        options["timestampFormat"] = fmt
    if draw(st.booleans()):
        options["mode"] = draw(st.sampled_from(["DROPMALFORMED", "PERMISSIVE"]))
    if draw(st.booleans()):
        options["nullValue"] = "NA"
    if draw(st.booleans()):
        options["comment"] = "#"
    columns = draw(st.sampled_from([["word", "n", "i", "t"], ["t AS _g", "word AS k"], ["n"], ["i", "word"],
                                    ["word", "word AS again", "t"]]))
    files = draw(st.integers(1, 2))
    return lines, options, columns, files


def _read(spark, folder, lines, options, columns, files):
    header = lines[:1] if options.get("header") else []
    for f in range(files):   # each file its own header
        part = header + lines[len(header):][f::files]
        (folder / f"part-{f}.csv").write_text("\n".join(part) + "\n", encoding="utf-8")
    return spark.read.schema(SCHEMA).options(**options).csv(str(folder)).selectExpr(*columns)


def _taken(spark, df):
    """Whether the kit reads ``df`` by LineScan (its plan, as ``Internal.mapPartitions`` plans it)."""
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        plan = df._jdf.queryExecution().executedPlan()
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", "true")
    return spark._jvm.flinkkit.LineScan.rows(plan) is not None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_the_kits_read_of_csv_files_equals_sparks(spark, case):
    lines, options, columns, files = case
    with tempfile.TemporaryDirectory() as folder:
        df = _read(spark, Path(folder), lines, options, columns, files)
        assert _taken(spark, df) == (options.get("timestampFormat") != "dd/MM/yyyy HH:mm"
                                     or not any(c.startswith("t") for c in columns))
        assert _rows(spark, df) == _json(df)


def _rows(spark, df):
    """The kit's read of ``df``, each row as JSON (``_json``)."""
    return _json(DataFrame(spark._jvm.flinkkit.LineScan.read(df._jdf), spark))


def _json(df):
    """``df``'s rows in order, each as JSON (years before 1 in timestamps too)."""
    return [r[0] for r in df.select(F.to_json(F.struct("*"))).collect()]


def test_plain_lines_are_read_by_the_kit_and_the_others_by_spark(spark, tmp_path):
    """The example in LineScan's docstring: a plain line, a quoted field, an empty one."""
    (tmp_path / "words.csv").write_text('w25,1704067200000\n"a,b",7\nw26,\n', encoding="utf-8")
    df = spark.read.schema("word STRING, t BIGINT").csv(str(tmp_path))
    assert _taken(spark, df)
    assert _rows(spark, df) == ['{"word":"w25","t":1704067200000}', '{"word":"a,b","t":7}', '{"word":"w26"}']


def test_a_malformed_line_fails_a_failfast_read_as_it_fails_sparks(spark, tmp_path):
    (tmp_path / "words.csv").write_text("w25,1\nw26,x\n", encoding="utf-8")
    df = spark.read.schema("word STRING, t BIGINT").option("mode", "FAILFAST").csv(str(tmp_path))
    with pytest.raises(Exception, match="MALFORMED_RECORD_IN_PARSING|Malformed"):
        df.collect()
    with pytest.raises(Exception, match="MALFORMED_RECORD_IN_PARSING|Malformed"):
        _rows(spark, df)


JSON_ODD = st.sampled_from(['"w\\"q"', '"\\u00e9"', '"é"', '""', "007", "-0", "1.5", "1e3", '"12"', "12", "true",
                            "null", "[1]", '{"a":1}', "99999999999999999999", '"2024-02-30 00:00:00.000"',
                            '"2024-03-04 05:06:07"'])


@st.composite
def _json_line(draw, fmt):
    """A JSON line: mostly a plain object (its fields in any order, perhaps one more), perhaps
    with one odd value, a field missing or twice, a name in another case, whitespace; or not an object."""
    kind = draw(st.sampled_from(["row"] * 8 + ["blank", "broken", "array", "spaced"]))
    if kind in ("blank", "broken", "array"):
        return {"blank": "", "broken": '{"word":"w1",', "array": '[{"word":"w1"}]'}[kind]
    k = draw(st.integers(0, 99))
    time = FORMATS[fmt].replace("07", f"{k % 60:02d}") if fmt != "dd/MM/yyyy HH:mm" else FORMATS[fmt]
    fields = [["word", f'"w{k}"'], ["n", str(k - 50)], ["i", str(k)], ["t", f'"{time}"']]
    odd = draw(st.integers(-1, 3))
    if odd >= 0:
        fields[odd][1] = draw(JSON_ODD)
    change = draw(st.sampled_from([None] * 6 + ["missing", "twice", "case", "extra", "extra_nested"]))
    if change == "missing":
        fields.pop(draw(st.integers(0, 3)))
    elif change == "twice":
        fields.append(list(fields[draw(st.integers(0, 3))]))
    elif change == "case":
        fields[0][0] = "Word"
    elif change == "extra":
        fields.append(["more", draw(st.sampled_from(['"x"', "1", "true", "null", "007"]))])
    elif change == "extra_nested":
        fields.append(["more", '{"a":[1,2]}'])
    fields = draw(st.permutations(fields))
    sep = ", " if kind == "spaced" else ","
    return "{" + sep.join(f'"{name}":{value}' for name, value in fields) + "}"


@st.composite
def _json_cases(draw):
    fmt = draw(st.sampled_from(list(FORMATS)))
    lines = draw(st.lists(_json_line(fmt), max_size=12))
    options = {"timestampFormat": fmt} if fmt else {}
    if draw(st.booleans()):
        options["mode"] = draw(st.sampled_from(["DROPMALFORMED", "PERMISSIVE"]))
    columns = draw(st.sampled_from([["word", "n", "i", "t"], ["t AS _g", "word AS k"], ["n"], ["i", "word"],
                                    ["word", "word AS again", "t"]]))
    return lines, options, columns, draw(st.integers(1, 2))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json_cases())
def test_the_kits_read_of_json_lines_equals_sparks(spark, case):
    lines, options, columns, files = case
    with tempfile.TemporaryDirectory() as folder:
        for f in range(files):
            (Path(folder) / f"part-{f}.json").write_text("\n".join(lines[f::files]) + "\n", encoding="utf-8")
        df = spark.read.schema(SCHEMA).options(**options).json(folder).selectExpr(*columns)
        assert _taken(spark, df) == (options.get("timestampFormat") != "dd/MM/yyyy HH:mm"
                                     or not any(c.startswith("t") for c in columns))
        assert _rows(spark, df) == _json(df)


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_streams_rows_are_counted_by_the_kits_read(spark, tmp_path, monkeypatch, fmt):
    """``Stream.rows`` of CSV or JSON lines the kit reads: its own read's count (Spark's count
    of JSON lines parses each with Jackson), Spark's rows (a blank line none)."""
    import kit
    lines = {"csv": ["w1,1", "", "w2,2", "w3,3"], "json": ['{"word":"w1","t":1}', "", '{"word":"w2","t":2}',
                                                           '{"word":"w3","t":3}']}
    (tmp_path / f"part.{fmt}").write_text("\n".join(lines[fmt]) + "\n", encoding="utf-8")
    df = getattr(spark.read.schema("word STRING, t BIGINT"), fmt)(str(tmp_path))
    want = df.count()
    stream = kit.stream(df, time="t")
    counted = []   # the DataFrames Spark counts (its classic class's count)
    monkeypatch.setattr(type(df), "count", lambda self, count=type(df).count: counted.append(self) or count(self))
    assert stream.rows == want == 3
    assert df not in counted and len(counted) == 1   # the kit's read, counted


def test_a_files_lines_are_reckoned_from_their_bytes_without_a_job(spark, tmp_path):
    """``jvm.reckon``: about the lines of files the kit reads, their bytes over a line's among
    the first file's first bytes (exact for lines of one length, the first bytes whole lines), with no job; Parquet
    files from a footer; another source is counted."""
    from kit import jvm
    (tmp_path / "a.csv").write_text("".join(f"w{i:05d},{i:09d}\n" for i in range(10_000)))   # 17 bytes a line
    (tmp_path / "b.csv").write_text("".join(f"w{i % 7:05d},{i:09d}\n" for i in range(1_000)))
    df = spark.read.schema("word STRING, t BIGINT").csv(str(tmp_path))
    sc = spark.sparkContext
    sc.setJobGroup("reckon", "reckoned, not counted")
    try:
        assert jvm.reckon(df) == 11_000
        assert sc.statusTracker().getJobIdsForGroup("reckon") == []
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    uneven = tmp_path / "uneven"
    uneven.mkdir()   # short lines first: the first bytes hold more lines than the rest
    (uneven / "c.csv").write_text("".join(f"w,{i}\n" for i in range(100_000)) + "".join(
        f"{'w' * 60},{i}\n" for i in range(20_000)))
    assert jvm.reckon(spark.read.schema("word STRING, t BIGINT").csv(str(uneven))) > 200_000   # of 120,000
    parquet = str(tmp_path / "p.parquet")
    df.coalesce(1).write.parquet(parquet)   # Parquet: its bytes at the rows per byte of its first file's footer
    read = spark.read.parquet(parquet)   # (its schema read in a job of its own)
    sc.setJobGroup("reckon parquet", "reckoned, not counted")
    try:
        assert jvm.reckon(read) == 11_000
        assert sc.statusTracker().getJobIdsForGroup("reckon parquet") == []
        assert jvm.reckon(read.where("t > 5")) == 10_988   # filtered: counted
        assert sc.statusTracker().getJobIdsForGroup("reckon parquet") != []
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)


@pytest.mark.parametrize("reckoned", [0, 1, 3, 10**9])
def test_a_cascade_over_spans_of_a_file_gives_its_rows_however_its_lines_are_reckoned(spark, tmp_path,
                                                                                      monkeypatch, reckoned):
    """Tasks that take spans of a file's arrivals split them by a reckoning of its lines
    (``jvm.reckon``): one that is off costs balance, never rows."""
    import kit
    import kit.jvm
    (tmp_path / "w.csv").write_text("".join(f"w{(i * i) % 7},{i}\n" for i in range(40)))
    words = kit.stream(spark.read.schema("word STRING, t BIGINT").csv(str(tmp_path)), time="t")
    query = "SELECT cnt, COUNT(cnt) AS freq FROM (SELECT word, COUNT(*) AS cnt FROM words GROUP BY word) GROUP BY cnt"
    want = kit.sql(query, words=words).changelog().collect()
    asked = []
    monkeypatch.setattr(kit.jvm, "reckon", lambda df: asked.append(df) or reckoned)
    assert kit.sql(query, words=words).changelog().collect() == want
    assert len(asked) == 1 or spark.sparkContext.defaultParallelism == 1   # (one task: no spans)


@pytest.mark.parametrize("zone", ["America/New_York", "+05:30"])
def test_timestamps_read_in_a_sessions_zone_equal_sparks(spark, tmp_path, zone):
    """TIMESTAMPs read in the session's time zone: one with daylight saving (each time by its
    rules) and one of a fixed offset (a line's date, the same as the last one's, counted once),
    across a change of the clocks, a leap day and a date that does not exist; as Spark reads them."""
    times = ["2024-03-09 23:59:59.999", "2024-03-10 01:30:00.000", "2024-03-10 02:30:00.000", "2024-03-10 03:30:00.000",
             "2024-02-29 12:00:00.000", "2023-02-29 12:00:00.000", "2023-02-28 12:00:00.000", "2023-02-28 24:00:00.000",
             "2023-02-28 23:59:59.000", "2024-11-03 01:30:00.000", "2024-11-03 01:30:00.000"]
    (tmp_path / "t.csv").write_text("".join(f"w{i},{t}\n" for i, t in enumerate(times)), encoding="utf-8")
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        read = spark.read.schema("word STRING, t TIMESTAMP").option("timestampFormat", "yyyy-MM-dd HH:mm:ss.SSS") \
            .csv(str(tmp_path))
        assert _taken(spark, read)
        kit_read = DataFrame(spark._jvm.flinkkit.LineScan.read(read._jdf), spark)
        assert _json(kit_read.selectExpr("word", "unix_micros(t) AS t")) == _json(read.selectExpr("word", "unix_micros(t) AS t"))
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
