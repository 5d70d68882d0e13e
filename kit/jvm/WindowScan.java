package flinkkit;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The fast path's one pass over a stream in input order (kit/windows/fast.py): event-time
 * tumbling or sliding windows, the default trigger, no allowed lateness, built-in
 * aggregates. Each input partition -- a chunk of the arrival order -- is read once, in
 * order, under the watermark its own rows emit (the running maximum of {@code own}, from
 * none), and gives rows {@code (tag, chunk, start, i, own, contents[, key], count_p, acc_p...,
 * first_q, nan_q...)}:
 *
 * <ul>
 *   <li>tag 0: per key and window start, partial aggregates ({@link Aggregates}) of the
 *       elements that watermark has not made late (window maximum above it) -- and for each
 *       FLOAT or DOUBLE MIN or MAX ({@code nan_parts}), the arrival of its first value and
 *       whether it was NaN, which its accumulator leaves out; a chunk's partial counts when
 *       the chunks before it have not passed the window's maximum either;
 *   <li>tag 1: each row where that watermark first reaches a value of the grid of window
 *       maxima: {@code i} the row's {@code _in}, {@code own} its watermark;
 *   <li>tag 2: the chunk's rows ({@code i}) and largest watermark ({@code own}, NULL: none);
 *   <li>tag 3: a window start of its partials (each at least once);
 *   <li>tag 4: the chunk has a time or watermark beyond {@code ±limit} ms, where the window
 *       arithmetic could overflow: its rows after that one are not read (the replay then
 *       takes the window).
 * </ul>
 *
 * <pre>
 *   tumbling 10, COUNT, chunk 0: a@2 (own 1), a@12 (own 11), a@5 (own 4)
 *   -> (0, 0, start 0, .., contents 1, a, count 1): a@5 came after the watermark 11 passed 9
 *      (0, 0, start 10, .., contents 1, a, count 1)
 *      (1, 0, .., i 0, own 1), (1, 0, .., i 1, own 11)   -- grid of maxima 9, 19, ...
 *      (2, 0, .., i 3, own 11), (3, 0, start 0), (3, 0, start 10)
 * </pre>
 *
 * <p>The rows are the source's own columns (kit/windows/fast.py's {@code _scanned}): the key
 * -- a single key's value, or a struct of several --, the aggregated columns, the event time
 * (in {@code ts_unit} per ms: microseconds of a TIMESTAMP, or ms) and a watermark column if
 * the strategy reads one. Each row's arrival number ({@code _in}, as
 * {@code monotonically_increasing_id()} numbers it) and the watermark it emits (its time
 * less {@code own_shift}, or its watermark column) are computed here; a NULL time fails,
 * naming the row.
 *
 * <p>Each key keeps its open windows in a ring of {@code ring} slots by window number (start /
 * slide), so a row costs one lookup of its key (none where Parquet keeps the key in a
 * dictionary and its value came before in the column chunk: {@link Internal.Memo}); a
 * window that needs a slot held by another writes that one's partial out (a window of the
 * same key and chunk may give several partials, which merge like any). Partials are
 * written out too whenever a chunk holds
 * {@code flush} of them, so a partition of many keys and windows gives more rows, never more
 * memory. The twin in Spark SQL is {@code _in_input_order}'s two passes in
 * kit/windows/fast.py.
 */
public class WindowScan implements MapPartitionsFunction {
    static final long MIN = Long.MIN_VALUE;

    private final long size, slide, offset, base;
    private final int keyAt, keyWidth, tsAt, ownAt, width, flush, mask;
    private final long tsUnit, ownUnit, ownShift;   // micros or millis per ms; the own watermark's lag
    private final long limit;   // the largest time (ms, either sign) read
    private final String tsName;
    private final boolean shifted;   // the own watermark is the time - ownShift; else column ownAt (-1: none)
    private final boolean struct;   // several keys, in a struct
    private final Internal.Reader reader;
    private final Aggregates aggregates;
    private final int[] nanParts;   // FLOAT or DOUBLE MIN and MAX: NaN first or not is noted apart

    /** {@code input}: the schema of the rows {@code call} reads; settings: see kit/windows/fast.py. */
    public WindowScan(String settings, StructType input) {
        Map s = Internal.settings(settings);
        size = Long.parseLong((String) s.get("size"));
        slide = Long.parseLong((String) s.get("slide"));
        offset = Long.parseLong((String) s.get("offset"));
        base = Math.floorMod(offset + size - 1, slide);
        keyAt = Integer.parseInt((String) s.get("key"));
        keyWidth = Integer.parseInt((String) s.get("key_width"));
        tsAt = Integer.parseInt((String) s.get("ts"));
        tsUnit = Long.parseLong((String) s.get("ts_unit"));
        tsName = (String) s.get("ts_name");
        shifted = "shift".equals(s.get("own_kind"));
        ownAt = Integer.parseInt((String) s.get("own"));
        ownUnit = Long.parseLong((String) s.get("own_unit"));
        ownShift = Long.parseLong((String) s.get("own_shift"));
        limit = Long.parseLong((String) s.get("limit"));
        flush = Integer.parseInt((String) s.get("flush"));
        mask = Integer.parseInt((String) s.get("ring")) - 1;
        reader = new Internal.Reader(input);
        struct = keyAt >= 0 && reader.type(keyAt) instanceof StructType;
        nanParts = Aggregates.ints((String) s.get("nan_parts"));
        aggregates = new Aggregates((String) s.get("agg_functions"), (String) s.get("agg_columns"),
                                    (String) s.get("agg_kinds"), reader, true, nanParts);
        width = 6 + (keyAt >= 0 ? 1 : 0) + 2 * aggregates.size() + 2 * nanParts.length;
    }

    /** A key's window in one chunk, and its partial aggregates; for each of the {@code
     *  nanParts}, the arrival of its first value (-1: none yet) and whether that was NaN. */
    static final class Group {
        final long start;
        long contents;
        final long[] counts, firsts;
        final Object[] accs;
        final boolean[] nans;

        Group(long start, int n, int nanParts) {
            this.start = start;
            counts = new long[n];
            accs = new Object[n];
            firsts = new long[nanParts];
            java.util.Arrays.fill(firsts, -1);
            nans = new boolean[nanParts];
        }
    }

    /** A key of one chunk, and its open windows by window number. */
    static final class Keyed {
        final Object key;
        final Group[] ring;

        Keyed(Object key, int slots) {
            this.key = key;
            ring = new Group[slots];
        }
    }

    /** The greatest window maximum at or below {@code v}. */
    long cell(long v) {
        return v - Math.floorMod(v - base, slide);
    }

    /** Row {@code r}'s key as Spark reads it (a view into the row: see {@link #kept}). */
    Object keyOf(InternalRow r) {
        if (keyAt < 0 || r.isNullAt(keyAt)) return null;
        return struct ? r.getStruct(keyAt, keyWidth) : reader.get(r, keyAt);
    }

    /** A key read by {@link #keyOf}, copied out of the row (Spark reuses rows). */
    static Object kept(Object key) {
        if (key instanceof UTF8String) return ((UTF8String) key).clone();
        if (key instanceof InternalRow) return ((InternalRow) key).copy();
        return key;
    }

    public Iterator call(final Iterator input) {
        return new Iterator() {
            final Map keys = new HashMap();   // key -> Keyed
            final Iterator plain = keyAt >= 0 && !struct ? input : null;
            // a key's Keyed by the Parquet dictionary id of its value (while keys holds it)
            Internal.Memo memo = new Internal.Memo(plain, keyAt);
            final HashSet starts = new HashSet();
            final List pending = new ArrayList();
            final int chunk = Internal.partition();
            int next = 0, live = 0;
            long rows = 0, high = MIN, highCell = MIN;   // the chunk's watermark (none yet) and cell(high)
            boolean done = false;

            public boolean hasNext() {
                while (next == pending.size()) {
                    if (done) return false;
                    pending.clear();
                    next = 0;
                    step();
                }
                return true;
            }

            public Object next() {
                if (!hasNext()) throw new NoSuchElementException();
                return pending.get(next++);
            }

            public void remove() {
                throw new UnsupportedOperationException();
            }

            /** Reads rows until some are to be written: a crossing, an eviction, a flush, the end. */
            void step() {
                while (pending.isEmpty() && live < flush && input.hasNext()) {
                    if (!add((InternalRow) input.next())) {   // beyond the limit: nothing more to read
                        pending.add(row(4, MIN, rows, null));
                        done = true;
                        return;
                    }
                }
                if (live >= flush) writeGroups();
                if (input.hasNext()) return;
                writeGroups();
                pending.add(row(2, MIN, rows, high == MIN ? null : Long.valueOf(high)));
                writeStarts();
                done = true;
            }

            /** Adds row {@code r}; false (and nothing added) when a time is beyond the limit. */
            boolean add(InternalRow r) {
                long in = ((long) chunk << 33) | rows++;   // monotonically_increasing_id()'s
                if (r.isNullAt(tsAt)) throw Internal.error("row " + (rows - 1) + " of input partition " + chunk
                    + " has NULL event time in column '" + tsName + "'; Flink rejects such rows: filter or fill them first");
                long ts = Math.floorDiv(r.getLong(tsAt), tsUnit);
                // the watermark the row emits: its time - shift, its watermark column's, none (MIN)
                long own = shifted ? ts - ownShift
                    : ownAt < 0 || r.isNullAt(ownAt) ? MIN : Math.floorDiv(r.getLong(ownAt), ownUnit);
                if (ts < -limit || ts > limit || own != MIN && (own < -limit || own > limit)) return false;
                Keyed keyed = null;
                long number = Math.floorDiv(ts - offset, slide);   // of the last window that starts by ts
                for (long start = offset + number * slide; start > ts - size; start -= slide, number--) {
                    if (start + size - 1 <= high) break;   // late in this window and every earlier one
                    if (keyed == null && (keyed = (Keyed) memo.get()) == null) {
                        Object key = keyOf(r);
                        keyed = (Keyed) keys.get(key);
                        if (keyed == null) {
                            keyed = new Keyed(kept(key), mask + 1);
                            keys.put(keyed.key, keyed);
                        }
                        memo.put(keyed);
                    }
                    int slot = (int) number & mask;
                    Group g = keyed.ring[slot];
                    if (g == null || g.start != start) {
                        if (g != null) write(keyed.key, g);
                        else live++;
                        g = keyed.ring[slot] = new Group(start, aggregates.size(), nanParts.length);
                    }
                    g.contents++;
                    for (int i = 0; i < nanParts.length; i++) {
                        int c = aggregates.columns[nanParts[i]];
                        if (g.firsts[i] >= 0 || r.isNullAt(c)) continue;
                        g.firsts[i] = in;
                        g.nans[i] = Double.isNaN(((Number) reader.get(r, c)).doubleValue());
                    }
                    aggregates.add(g.counts, g.accs, r);
                }
                if (own <= high) return true;
                if (high == MIN || own >= highCell + slide) {   // into a later cell of the grid
                    pending.add(row(1, MIN, in, Long.valueOf(own)));
                    highCell = cell(own);
                }
                high = own;
                return true;
            }

            void writeGroups() {
                Iterator it = keys.values().iterator();
                while (it.hasNext()) {
                    Keyed keyed = (Keyed) it.next();
                    for (int i = 0; i < keyed.ring.length; i++) if (keyed.ring[i] != null) write(keyed.key, keyed.ring[i]);
                }
                keys.clear();
                memo = new Internal.Memo(plain, keyAt);
                live = 0;
            }

            void write(Object key, Group g) {
                Object[] v = new Object[width];
                fill(v, 0, key, g.start, 0, null);
                v[5] = Long.valueOf(g.contents);
                int at = keyAt >= 0 ? 7 : 6;
                for (int p = 0; p < aggregates.size(); p++) {
                    v[at++] = Long.valueOf(g.counts[p]);
                    v[at++] = g.accs[p];
                }
                for (int i = 0; i < nanParts.length; i++) {
                    v[at++] = g.firsts[i] < 0 ? null : Long.valueOf(g.firsts[i]);
                    v[at++] = Boolean.valueOf(g.nans[i]);
                }
                pending.add(new GenericInternalRow(v));
                if (starts.add(Long.valueOf(g.start)) && starts.size() >= flush) writeStarts();
            }

            /** The starts not yet written (one written again later costs a row, not memory). */
            void writeStarts() {
                Iterator it = starts.iterator();
                while (it.hasNext()) pending.add(row(3, ((Long) it.next()).longValue(), 0, null));
                starts.clear();
            }

            InternalRow row(int tag, long start, long i, Long own) {
                Object[] v = new Object[width];
                fill(v, tag, null, start, i, own);
                return new GenericInternalRow(v);
            }

            void fill(Object[] v, int tag, Object key, long start, long i, Long own) {
                v[0] = Integer.valueOf(tag);
                v[1] = Integer.valueOf(chunk);
                v[2] = start == MIN ? null : Long.valueOf(start);
                v[3] = tag == 1 || tag == 2 ? Long.valueOf(i) : null;
                v[4] = own;
                if (keyAt >= 0) v[6] = key;
            }
        };
    }
}
