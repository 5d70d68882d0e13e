package flinkkit;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Flink's {@code RowTimeIntervalJoin} over a task's merged arrivals of two insert-only streams,
 * sorted by key, then merged position: per key, the steps of {@code RowTimeIntervalJoin} in
 * kit/joins/interval.py (the reference, whose rows it gives: the same outputs with the same
 * order columns, the same dropped rows), with the cleanup timers of the replay driver
 * (kit/replay/keyed.py): a timer fires when the watermark in force before one of the key's
 * arrivals, or the end of input, reaches it, at the first rise of the operator watermark to
 * reach it ({@link #rises}: every key's rises, broadcast). No extra condition, allowed lateness
 * 0 and no minimum cleanup interval, as SQL's interval join runs it.
 *
 * <pre>
 *   sizes=0,10000     leftRelativeSize, rightRelativeSize (ms)
 *   outer=1,0         whether the left, the right side is null-padded (LEFT JOIN)
 *   keys=1            key columns, after _pos, _side, _seq, _ts (ms), _Wb (ms, NULL: none yet)
 * </pre>
 *
 * Output rows: {@code _kind, _emitted_pos, _watermark, _phase, _timer, _index, _left_seq,
 * _right_seq, _left_time, _right_time, _reason}, then the key; a key holding a NULL never joins.
 *
 * <pre>
 *   lower -4, upper 0, LEFT JOIN, both watermarks the time: o1 a@10 (pos 0, left seq 0), s1 a@12
 *   (pos 1, right seq 0, no watermark yet before it: the right side had none)
 *   -> (joined, 1, NULL, 0, 0, 0, 0, 0, 10, 12, NULL, a); o1 stays cached until its timer at 15
 * </pre>
 */
public class IntervalJoin implements MapPartitionsFunction {
    private static final long MIN_TIME = Long.MIN_VALUE, MAX_TIME = Long.MAX_VALUE;
    private static final int LEFT = 0, RIGHT = 1, FIXED = 5, OUT = 11;   // input, output columns before the key
    private static final UTF8String JOINED = UTF8String.fromString("joined"),
        DROPPED = UTF8String.fromString("dropped"), CLEARED = UTF8String.fromString(
            "cleared: Flink's cleanup found no cached time above 0 and cleared the cache");
    private static final UTF8String[] UNMATCHED = {UTF8String.fromString("left_unmatched"),
                                                   UTF8String.fromString("right_unmatched")};
    private final long[] size = new long[2];
    private final boolean[] outer = new boolean[2];
    private final int keys;
    private final DataType[] keyTypes;
    private final Broadcast rises;   // long[][] {positions, values}, ending with (rows, MAX_TIME)

    public IntervalJoin(String settings, StructType input, Broadcast rises) {
        Map s = Internal.settings(settings);
        String[] sizes = ((String) s.get("sizes")).split(","), outers = ((String) s.get("outer")).split(",");
        for (int side = 0; side < 2; side++) {
            size[side] = Long.parseLong(sizes[side]);
            outer[side] = outers[side].equals("1");
        }
        keys = Integer.parseInt((String) s.get("keys"));
        keyTypes = new DataType[keys];
        for (int k = 0; k < keys; k++) keyTypes[k] = input.fields()[FIXED + k].dataType();
        this.rises = rises;
    }

    public Iterator call(Iterator rows) {
        return new Task(rows, (long[][]) rises.value());
    }

    /** An arrival kept in a side's cache, and whether it joined. */
    private static final class Cached {
        final long seq, time;
        boolean matched;

        Cached(long seq, long time, boolean matched) {
            this.seq = seq;
            this.time = time;
            this.matched = matched;
        }
    }

    /** The task's output, produced as its arrivals are read: one key's state at a time. */
    private final class Task implements Iterator {
        private final Iterator rows;
        private final long[] positions, values;
        private final ArrayDeque out = new ArrayDeque();
        private Object[] key;              // the current key's values (null: none yet)
        private boolean never;             // it holds a NULL: it joins nothing
        private final TreeMap[] cache = {new TreeMap(), new TreeMap()};   // time -> ArrayList of Cached
        private final long[] timer = new long[2], expiration = new long[2];
        private final boolean[] timed = new boolean[2];
        private final TreeSet timers = new TreeSet();
        private long watermark, index, last;
        private boolean done;

        Task(Iterator rows, long[][] rises) {
            this.rows = rows;
            positions = rises[0];
            values = rises[1];
        }

        public boolean hasNext() {
            while (out.isEmpty() && !done) {
                if (rows.hasNext()) {
                    step((InternalRow) rows.next());
                } else {
                    if (key != null) close();
                    done = true;
                }
            }
            return !out.isEmpty();
        }

        public Object next() {
            if (!hasNext()) throw new java.util.NoSuchElementException();
            return out.poll();
        }

        private void step(InternalRow row) {
            if (key == null || !sameKey(row)) {
                if (key != null) close();
                open(row);
            }
            long pos = row.getLong(0);
            if (pos <= last) throw Internal.error("internal: the interval join's arrivals out of order at pos " + pos);
            last = pos;
            if (row.isNullAt(3)) {
                throw Internal.error("arrival at pos " + pos + " has no event time; an event-time interval join "
                                     + "needs one on every row");
            }
            if (!row.isNullAt(4)) advance(row.getLong(4));
            element(pos, row.getInt(1), row.getLong(2), row.getLong(3));
        }

        private boolean sameKey(InternalRow row) {
            for (int k = 0; k < keys; k++) {
                Object v = row.isNullAt(FIXED + k) ? null : row.get(FIXED + k, keyTypes[k]);
                if (v == null ? key[k] != null : !v.equals(key[k])) return false;
            }
            return true;
        }

        private void open(InternalRow row) {
            key = new Object[keys];
            never = false;
            for (int k = 0; k < keys; k++) {
                if (row.isNullAt(FIXED + k)) {
                    never = true;
                } else {
                    key[k] = org.apache.spark.sql.catalyst.InternalRow$.MODULE$.copyValue(row.get(FIXED + k, keyTypes[k]));
                }
            }
            for (int side = 0; side < 2; side++) {
                cache[side].clear();
                timed[side] = false;
                expiration[side] = 0;
            }
            timers.clear();
            watermark = MIN_TIME;
            index = 0;
            last = -1;
        }

        /** The end of input for the key: the watermark at MAX_TIME fires every timer left. */
        private void close() {
            advance(MAX_TIME);
        }

        private void advance(long to) {
            if (to <= watermark) return;
            watermark = to;
            while (!timers.isEmpty() && ((Long) timers.first()).longValue() <= to) {
                onTimer(((Long) timers.pollFirst()).longValue());
            }
        }

        private long expirationTime(long operatorTime, long sideSize) {
            return operatorTime < MAX_TIME ? operatorTime - sideSize - 1 : MAX_TIME;
        }

        private void register(int side, long rowTime) {
            timer[side] = rowTime + size[side] + 1;
            timed[side] = true;
            timers.add(Long.valueOf(timer[side]));
        }

        private void element(long pos, int side, long seq, long t) {
            int other = 1 - side;
            long operatorTime = Math.max(watermark, 0);
            long low = t - size[other], high = t + size[side];
            boolean joined = false;
            if (expiration[other] < high) {
                long expired = expirationTime(operatorTime, size[other]);
                expiration[other] = expired;
                TreeMap theirs = cache[other];
                // ascending: the expired times, each joined if in the window, then removed ...
                Iterator it = theirs.entrySet().iterator();
                while (it.hasNext()) {
                    Map.Entry e = (Map.Entry) it.next();
                    long at = ((Long) e.getKey()).longValue();
                    if (at > expired) break;
                    ArrayList entries = (ArrayList) e.getValue();
                    if (low <= at && at <= high) joined |= join(pos, side, seq, t, entries);
                    padUnmatched(entries, pos, 0, 0, watermark, other);
                    it.remove();
                }
                // ... then the window's times above them
                long from = expired == MAX_TIME ? MAX_TIME : Math.max(low, expired + 1);
                if (expired < MAX_TIME && from <= high) {
                    Iterator w = theirs.subMap(Long.valueOf(from), true, Long.valueOf(high), true).values().iterator();
                    while (w.hasNext()) joined |= join(pos, side, seq, t, (ArrayList) w.next());
                }
            }
            if (operatorTime < high) {
                TreeMap mine = cache[side];
                Long at = Long.valueOf(t);
                ArrayList entries = (ArrayList) mine.get(at);
                if (entries == null) {
                    entries = new ArrayList(1);
                    mine.put(at, entries);
                }
                entries.add(new Cached(seq, t, joined));
                if (!timed[side]) register(side, t);
            } else if (!joined) {
                if (outer[side]) {
                    pad(pos, 0, 0, watermark, side, seq, t);
                } else {
                    dropped(side, seq, t, UTF8String.fromString(
                        "too late: operator time " + operatorTime + " >= " + high + " (time " + t + " + " + size[side]
                        + "); no cached row joined it and no later row can"));
                }
            }
        }

        /** The arrival joined with each of {@code entries} (none when the key holds a NULL). */
        private boolean join(long pos, int side, long seq, long t, ArrayList entries) {
            if (never) return false;
            for (int i = 0; i < entries.size(); i++) {
                Cached c = (Cached) entries.get(i);
                if (side == LEFT) {
                    emit(JOINED, pos, 0, 0, watermark, Long.valueOf(seq), Long.valueOf(c.seq), Long.valueOf(t),
                         Long.valueOf(c.time));
                } else {
                    emit(JOINED, pos, 0, 0, watermark, Long.valueOf(c.seq), Long.valueOf(seq), Long.valueOf(c.time),
                         Long.valueOf(t));
                }
                c.matched = true;
            }
            return !entries.isEmpty();
        }

        private void onTimer(long ts) {
            int i = java.util.Arrays.binarySearch(values, ts);   // rises: strictly increasing, MAX_TIME last
            if (i < 0) i = -i - 1;
            long firePos = positions[i], fireWatermark = values[i];
            long operatorTime = Math.max(fireWatermark, 0);
            for (int side = RIGHT; side >= LEFT; side--) {   // Flink: the right cache first
                if (timed[side] && timer[side] == ts) {
                    expiration[side] = expirationTime(operatorTime, size[side]);
                    removeExpired(firePos, ts, fireWatermark, side, expiration[side]);
                }
            }
        }

        private void removeExpired(long pos, long ts, long fireWatermark, int side, long expired) {
            long earliest = -1;
            Iterator it = cache[side].entrySet().iterator();
            while (it.hasNext()) {
                Map.Entry e = (Map.Entry) it.next();
                long at = ((Long) e.getKey()).longValue();
                if (at <= expired) {
                    padUnmatched((ArrayList) e.getValue(), pos, 1, ts, fireWatermark, side);
                    it.remove();
                } else {
                    if (at < earliest || earliest < 0) earliest = at;
                    if (earliest >= 0) break;   // ascending: no later time is earlier
                }
            }
            if (earliest > 0) {
                register(side, earliest);
                return;
            }
            timed[side] = false;
            Iterator left = cache[side].values().iterator();
            while (left.hasNext()) {
                ArrayList entries = (ArrayList) left.next();
                for (int i = 0; i < entries.size(); i++) {
                    Cached c = (Cached) entries.get(i);
                    dropped(side, c.seq, c.time, CLEARED);
                }
            }
            cache[side].clear();
        }

        /** Removed from {@code side}'s cache: its rows that never joined, padded if the side is preserved. */
        private void padUnmatched(ArrayList entries, long pos, int phase, long ts, long wm, int side) {
            if (!outer[side]) return;
            for (int i = 0; i < entries.size(); i++) {
                Cached c = (Cached) entries.get(i);
                if (!c.matched) pad(pos, phase, ts, wm, side, c.seq, c.time);
            }
        }

        private void pad(long pos, int phase, long ts, long wm, int side, long seq, long t) {
            Long s = Long.valueOf(seq), time = Long.valueOf(t);
            if (side == LEFT) {
                emit(UNMATCHED[LEFT], pos, phase, ts, wm, s, null, time, null);
            } else {
                emit(UNMATCHED[RIGHT], pos, phase, ts, wm, null, s, null, time);
            }
        }

        private void emit(UTF8String kind, long pos, int phase, long ts, long wm, Long leftSeq, Long rightSeq,
                          Long leftTime, Long rightTime) {
            Object[] v = new Object[OUT + keys];
            v[0] = kind;
            v[1] = Long.valueOf(pos);
            v[2] = wm == MIN_TIME || wm == MAX_TIME ? null : Long.valueOf(wm);
            v[3] = Integer.valueOf(phase);
            v[4] = Long.valueOf(ts);
            v[5] = Long.valueOf(index++);
            v[6] = leftSeq;
            v[7] = rightSeq;
            v[8] = leftTime;
            v[9] = rightTime;
            System.arraycopy(key, 0, v, OUT, keys);
            out.add(new GenericInternalRow(v));
        }

        private void dropped(int side, long seq, long t, UTF8String reason) {
            Object[] v = new Object[OUT + keys];
            v[0] = DROPPED;
            v[side == LEFT ? 6 : 7] = Long.valueOf(seq);
            v[side == LEFT ? 8 : 9] = Long.valueOf(t);
            v[10] = reason;
            System.arraycopy(key, 0, v, OUT, keys);
            out.add(new GenericInternalRow(v));
        }
    }

    // ------------------------------------------------------------------ the watermark's rises

    /**
     * Every rise of the operator watermark, broadcast as {@code long[][] {positions, values}}
     * ending with {@code (rows, MAX_TIME)}, the end of input: from {@code grouped}, the merged
     * rows grouped by {@code _W} (BIGINT, NULL: none yet) with {@code p}, the first position at
     * that watermark, and {@code n}, its rows, sorted by {@code _W}. Each task packs its rises
     * into one row, so the driver collects arrays, not a row per rise.
     */
    public static Broadcast rises(org.apache.spark.sql.classic.Dataset grouped) {
        StructType packed = new StructType().add("w", DataTypes.BinaryType).add("p", DataTypes.BinaryType)
            .add("n", DataTypes.LongType);
        InternalRow[] parts = ((org.apache.spark.sql.classic.Dataset) Internal.mapPartitions(grouped, new Pack(), packed))
            .queryExecution().executedPlan().executeCollect();
        int total = 1;
        long rows = 0;
        for (int i = 0; i < parts.length; i++) {
            total += parts[i].getBinary(0).length / 8;
            rows += parts[i].getLong(2);
        }
        long[] positions = new long[total], values = new long[total];
        int at = 0;
        for (int i = 0; i < parts.length; i++) {
            ByteBuffer w = ByteBuffer.wrap(parts[i].getBinary(0)), p = ByteBuffer.wrap(parts[i].getBinary(1));
            while (w.hasRemaining()) {
                values[at] = w.getLong();
                positions[at++] = p.getLong();
            }
        }
        positions[at] = rows;
        values[at] = MAX_TIME;
        return JavaSparkContext.fromSparkContext(grouped.sparkSession().sparkContext())
            .broadcast(new long[][] {positions, values});
    }

    /** A task's rises (rows {@code _W, p, n}) as one row: the watermarks, the positions, the rows. */
    private static final class Pack implements MapPartitionsFunction {
        public Iterator call(Iterator rows) {
            ByteBuffer w = ByteBuffer.allocate(1 << 10), p = ByteBuffer.allocate(1 << 10);
            long n = 0;
            while (rows.hasNext()) {
                InternalRow row = (InternalRow) rows.next();
                n += row.getLong(2);
                if (row.isNullAt(0)) continue;
                if (!w.hasRemaining()) {
                    w = grown(w);
                    p = grown(p);
                }
                w.putLong(row.getLong(0));
                p.putLong(row.getLong(1));
            }
            byte[] ws = java.util.Arrays.copyOf(w.array(), w.position()), ps = java.util.Arrays.copyOf(p.array(), p.position());
            return Collections.singletonList(new GenericInternalRow(new Object[] {ws, ps, Long.valueOf(n)})).iterator();
        }

        private static ByteBuffer grown(ByteBuffer b) {
            ByteBuffer bigger = ByteBuffer.allocate(b.capacity() * 2);
            bigger.put(b.array(), 0, b.position());
            return bigger;
        }
    }
}
