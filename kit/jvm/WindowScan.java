package flinkkit;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * The fast path's one pass over a stream in input order (kit/windows/fast.py): event-time
 * tumbling or sliding windows, the default trigger, no allowed lateness, built-in
 * aggregates. Each input partition -- a chunk of the arrival order -- is read once, in
 * order, under the watermark its own rows emit (the running maximum of {@code own}, from
 * none), and gives rows {@code (tag, chunk, start, i, own, contents[, key], count_p, acc_p...)}:
 *
 * <ul>
 *   <li>tag 0: per key and window start, the partial aggregates ({@link Aggregates}) of the
 *       elements that watermark has not made late (window maximum above it); a chunk's
 *       partial counts when the chunks before it have not passed the window's maximum either;
 *   <li>tag 1: each row where that watermark first reaches a value of the grid of window
 *       maxima: {@code i} the row's {@code _in}, {@code own} its watermark;
 *   <li>tag 2: the chunk's rows ({@code i}) and largest watermark ({@code own}, NULL: none);
 *   <li>tag 3: a window start of its partials (each at least once).
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
 * <p>Partials are written out whenever a chunk has {@code flush} of them in memory, so a
 * partition of many keys and windows gives more rows, never more memory. The twin in Spark
 * SQL is {@code _in_input_order}'s two passes in kit/windows/fast.py.
 */
public class WindowScan implements MapPartitionsFunction {
    static final long MIN = Long.MIN_VALUE;

    private final long size, slide, offset, base;
    private final int keyAt, keyWidth, tsAt, ownAt, inAt, width, flush;
    private final Aggregates aggregates;

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
        ownAt = Integer.parseInt((String) s.get("own"));
        inAt = Integer.parseInt((String) s.get("in"));
        flush = Integer.parseInt((String) s.get("flush"));
        DataType[] types = new DataType[input.fields().length];
        for (int i = 0; i < types.length; i++) types[i] = input.fields()[i].dataType();
        aggregates = new Aggregates((String) s.get("agg_functions"), (String) s.get("agg_columns"),
                                    (String) s.get("agg_kinds"), types, true);
        width = 6 + (keyAt >= 0 ? 1 : 0) + 2 * aggregates.size();
    }

    /** A key's window in one chunk, and its partial aggregates. */
    static final class Group {
        InternalRow key;
        long start;
        int hash;
        long contents;
        long[] counts;
        Object[] accs;

        void set(InternalRow key, long start) {
            this.key = key;
            this.start = start;
            this.hash = (key == null ? 0 : key.hashCode()) * 31 + (int) (start ^ (start >>> 32));
        }

        public int hashCode() {
            return hash;
        }

        public boolean equals(Object o) {
            Group g = (Group) o;
            return g.start == start && (key == null ? g.key == null : key.equals(g.key));
        }
    }

    /** The greatest window maximum at or below {@code v}. */
    long cell(long v) {
        return v - Math.floorMod(v - base, slide);
    }

    public Iterator call(final Iterator input) {
        return new Iterator() {
            final Map groups = new HashMap();
            final Group probe = new Group();
            final HashSet starts = new HashSet();
            final List pending = new ArrayList();
            final int chunk = TaskContext.getPartitionId();
            int next = 0;
            long rows = 0, high = MIN;   // the chunk's watermark: none yet
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

            /** Reads rows until some are to be written: a crossing, a flush, the end. */
            void step() {
                while (pending.isEmpty() && groups.size() < flush && input.hasNext()) add((InternalRow) input.next());
                if (groups.size() >= flush) writeGroups();
                if (input.hasNext()) return;
                writeGroups();
                pending.add(row(2, MIN, rows, high == MIN ? null : Long.valueOf(high)));
                writeStarts();
                done = true;
            }

            void add(InternalRow r) {
                rows++;
                long ts = r.getLong(tsAt);
                InternalRow key = keyAt < 0 ? null : r.getStruct(keyAt, keyWidth);
                for (long start = ts - Math.floorMod(ts - offset, slide); start > ts - size; start -= slide) {
                    if (start + size - 1 <= high) break;   // late in this window and every earlier one
                    probe.set(key, start);
                    Group g = (Group) groups.get(probe);
                    if (g == null) {
                        g = new Group();
                        g.set(key == null ? null : key.copy(), start);
                        g.counts = new long[aggregates.size()];
                        g.accs = new Object[aggregates.size()];
                        groups.put(g, g);
                    }
                    g.contents++;
                    aggregates.add(g.counts, g.accs, r);
                }
                if (r.isNullAt(ownAt)) return;
                long own = r.getLong(ownAt);
                if (own <= high) return;
                if (high == MIN || cell(own) > cell(high)) pending.add(row(1, MIN, r.getLong(inAt), Long.valueOf(own)));
                high = own;
            }

            void writeGroups() {
                Iterator it = groups.values().iterator();
                while (it.hasNext()) {
                    Group g = (Group) it.next();
                    Object[] v = new Object[width];
                    fill(v, 0, g.key, g.start, 0, null);
                    v[5] = Long.valueOf(g.contents);
                    int at = keyAt >= 0 ? 7 : 6;
                    for (int p = 0; p < aggregates.size(); p++) {
                        v[at++] = Long.valueOf(g.counts[p]);
                        v[at++] = g.accs[p];
                    }
                    pending.add(new GenericInternalRow(v));
                    if (starts.add(Long.valueOf(g.start)) && starts.size() >= flush) writeStarts();
                }
                groups.clear();
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

            void fill(Object[] v, int tag, InternalRow key, long start, long i, Long own) {
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
