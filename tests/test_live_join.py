"""The event-time temporal join live: ``kit.sql`` over two ``kit.live`` streams.

Each test drops micro-batches of orders and of rates as files into two folders (one file a
batch each), runs the join until both are read (``available_now``) and compares its rows
with the replay of the record (both inputs' arrivals, each with the operator watermark it
met): the same rows."""

import random
import sqlite3
from contextlib import closing

import pytest

import kit
from kit import Duration
from kit.errors import KitError

from test_live import drop

ORDERS, RATES = "id string, cur string, t long, qty long", "cur string, rt long, rate long"


def generated(seed: int, batches: int = 5):
    """Orders and rates per batch: three currencies, times out of order, rows far behind the
    watermark (late on either side), a NULL time now and then, a batch empty on one side."""
    rng, top, orders, rates = random.Random(seed), 0, [], []
    for b in range(batches):
        o, r = [], []
        for i in range(rng.randint(0, 6)):
            top += rng.randint(0, 15)
            t = None if rng.random() < 0.07 else max(0, top - rng.choice([0, 0, 4, 25, 60]))
            o.append((f"o{b}.{i}", rng.choice("ABC"), t, rng.randint(1, 9)))
        for i in range(rng.randint(0, 4)):
            t = None if rng.random() < 0.07 else max(0, top - rng.choice([0, 3, 10, 40]))
            r.append((rng.choice("ABC"), t, rng.randint(100, 120)))
        orders.append(o), rates.append(r)
    return orders, rates


def streams(spark, root, orders, rates, key="cur"):
    root.mkdir(exist_ok=True)
    drop(root / "orders", orders, ORDERS)
    drop(root / "rates", rates, RATES)

    def read(folder, columns):
        return spark.readStream.schema(columns).option("maxFilesPerTrigger", 1).parquet(str(root / folder))

    return (kit.live(read("orders", ORDERS), time="t", watermark=Duration.of_millis(10)),
            kit.live(read("rates", RATES), time="rt", watermark=Duration.of_millis(5), primary_key=key))


def rows(frame) -> list:
    return sorted((tuple(r) for r in frame.collect()), key=repr)


QUERIES = {
    "left": "SELECT o.id, o.t, o.qty, r.rate, r.rt FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.t AS r "
            "ON o.cur = r.cur",
    "inner with a condition": "SELECT o.id, o.t, o.qty * r.rate AS price FROM orders AS o JOIN rates "
                              "FOR SYSTEM_TIME AS OF o.t AS r ON o.cur = r.cur AND r.rate > 105 WHERE o.qty > 2",
    "versioned view": "WITH v AS (SELECT cur, rate, rt FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY cur "
                      "ORDER BY rt DESC) AS rownum FROM rates) WHERE rownum = 1) "
                      "SELECT o.id, o.t, v.rate FROM orders AS o LEFT JOIN v FOR SYSTEM_TIME AS OF o.t ON o.cur = v.cur",
}


@pytest.mark.parametrize("seed", [3, 8])
def test_a_live_temporal_join_gives_the_rows_of_its_replay(spark, tmp_path, seed):
    """LEFT and INNER joins (with a condition on the version and a WHERE), and a versioned
    view by deduplication, over inputs with disorder, late rows on both sides and NULL
    times: the live rows equal the replay's of the record, row for row."""
    orders, rates = generated(seed)
    left, right = streams(spark, tmp_path, orders, rates)
    plain = kit.live(right.source, time="rt", watermark=Duration.of_millis(5))   # the view makes the key
    runs = {name: kit.sql(q, orders=left, rates=plain if "view" in name else right)
            .start(str(tmp_path / name.replace(" ", "_")), trigger="available_now") for name, q in QUERIES.items()}
    nulls = sum(t is None for b in orders for _, _, t, _ in b) + sum(t is None for b in rates for _, t, _ in b)
    for name, run in runs.items():
        run.await_termination()
        assert rows(run.df) == rows(run.replay()), name
        assert run.bad.count() == nulls, name
    emitted = rows(runs["left"].df)
    assert len(emitted) >= 5 and any(r[3] is None for r in emitted) and any(r[3] is not None for r in emitted)


def test_rows_leave_as_the_operator_watermark_passes_them_with_the_version_valid_then(spark, tmp_path):
    """The smaller of the inputs' watermarks (none until both have one), moved between
    micro-batches: a left row leaves in the first batch whose watermark reaches its time,
    joined with the version valid at its time among those the operator had then (a version
    arriving later misses it), or NULL-padded."""
    orders = [[("o1", "EUR", 5, 1), ("o2", "USD", 12, 1)], [("o3", "EUR", 30, 1), ("o4", "EUR", 8, 1)],
              [("o5", "USD", 50, 1)], [("o6", "EUR", 70, 1)]]
    rates = [[("EUR", 10, 1)], [("USD", 11, 2), ("EUR", 25, 3)], [("EUR", 4, 4)], [("USD", 60, 5)]]
    left, right = streams(spark, tmp_path, orders, rates)
    run = kit.sql(QUERIES["left"], orders=left, rates=right).start(str(tmp_path / "run"), trigger="available_now")
    run.await_termination()
    # watermarks: orders' largest time less 11 ms (10 ms out of orderness), rates' less 6 ms
    assert [(a.seq, a.side, a._ts, a._wm, a.batch) for a in run.arrivals.collect()] == [
        (0, "right", 10, None, 0), (1, "left", 5, None, 0), (2, "left", 12, None, 0),
        (3, "right", 11, 1, 1), (4, "right", 25, 1, 1), (5, "left", 30, 1, 1), (6, "left", 8, 1, 1),
        (7, "right", 4, 19, 2), (8, "left", 50, 19, 2), (9, "right", 60, 19, 3), (10, "left", 70, 19, 3)]
    assert [(r.left.id, r.right and r.right.rate, r.watermark, r.batch) for r in run.joined.collect()] == [
        ("o1", None, 19, 2), ("o4", None, 19, 2), ("o2", 2, 19, 2), ("o3", 3, 54, 4), ("o5", 2, 54, 4)]
    # o4 (EUR, 8) left before EUR's version at 4 came; batch 4 has no data: Spark runs it as the watermark rose
    assert run.applied() == 54 and rows(run.df) == [("o1", 5, 1, None, None), ("o2", 12, 1, 2, 11),
                                                    ("o3", 30, 1, 3, 25), ("o4", 8, 1, None, None),
                                                    ("o5", 50, 1, 2, 11)]
    assert rows(run.replay()) == rows(run.df)   # o1 met no version, o6 waits: 70 is above the watermark


def test_live_mode_says_which_temporal_joins_it_does_not_run(spark, tmp_path):
    orders, rates = generated(1, batches=1)
    left, right = streams(spark, tmp_path, orders, rates)
    join = QUERIES["left"]
    with pytest.raises(KitError, match="state retention and interleavings are the replay's"):
        kit.sql(join, orders=left, rates=right, config={"table.exec.state.ttl": "1 h"})
    with pytest.raises(KitError, match="reads the two live streams themselves"):
        kit.sql(f"{join} UNION ALL SELECT id, t, qty, qty, t FROM orders", orders=left, rates=right)
    with pytest.raises(KitError, match="requires primary key"):
        kit.sql(join, orders=left, rates=kit.live(right.source, time="rt"))


def test_a_live_temporal_join_started_again_goes_on_from_its_checkpoint(spark, tmp_path):
    """Stopped after two batches and started again on the same path when more files came:
    the waiting left rows and the versions come back from the checkpoint, and the rows (and
    the database sink's, batch by batch) are the uninterrupted run's."""
    orders, rates = generated(13, batches=4)
    left, right = streams(spark, tmp_path / "whole", orders, rates)
    whole = kit.sql(QUERIES["left"], orders=left, rates=right).start(str(tmp_path / "whole" / "run"),
                                                                      trigger="available_now")
    whole.await_termination()
    left, right = streams(spark, tmp_path / "parts", orders[:2], rates[:2])
    database = tmp_path / "sink.db"
    sink = kit.DbApiSink(lambda: sqlite3.connect(database), "priced")
    join = kit.sql(QUERIES["left"], orders=left, rates=right)
    join.start(str(tmp_path / "parts" / "run"), trigger="available_now", sink=sink).await_termination()
    drop(tmp_path / "parts" / "orders", orders[2:], ORDERS, first=2)
    drop(tmp_path / "parts" / "rates", rates[2:], RATES, first=2)
    again = join.start(str(tmp_path / "parts" / "run"), trigger="available_now", sink=sink)
    again.await_termination()
    assert rows(again.df) == rows(whole.df) and len(rows(whole.df)) >= 5
    with closing(sqlite3.connect(database)) as con:
        stored = con.execute("SELECT id, t, qty, rate, rt FROM priced").fetchall()
    assert sorted(stored, key=repr) == rows(whole.df)
