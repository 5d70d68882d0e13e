package flinkkit;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;

/**
 * The stream's arrival scan (kit/stream.py) without a sort: each input partition is a chunk
 * of the arrival order, read in one pass per step; the driver carries each chunk's first
 * {@code seq}, watermark and processing time in from the chunks before it (kit/jvm/__init__.py).
 * Each row has the watermark it emits ({@code g}, NULL for none) and, for a proctime column,
 * its processing time ({@code p}); a clock gives {@code start + seq * step} instead.
 *
 * <ul>
 *   <li>{@code summary}: per chunk, its number, rows, largest emitted watermark, largest proctime;
 *   <li>{@code annotate}: each row followed by {@code seq}, the watermark before it and its
 *       processing time (the running maximum up to it, a clock never goes back);
 *   <li>{@code first}: for grids of sorted thresholds, each of the emitted watermark
 *       ({@code own}), of the processing time ({@code pt}) or of {@code seq}, the chunk's first row at or
 *       above each threshold, as (grid, threshold index, seq, own, watermark before,
 *       processing time); the driver takes the earliest over the chunks and the thresholds above.
 * </ul>
 *
 * <pre>
 *   chunk 1 carries seq 3 and watermark 7; its rows emit 5, 9, 8
 *   -> annotate: (.., seq 3, wm 7), (.., seq 4, wm 7), (.., seq 5, wm 9)
 *   -> first, grids "own:8,9": (0, 1, seq 4, own 9, wm 7) -- the first row at or above both
 * </pre>
 *
 * <p>The twins in Spark SQL and Python: {@code _scan} in kit/stream.py and
 * {@code first_at_least} in kit/windows/placement.py.
 */
public class ArrivalScan implements MapPartitionsFunction {
    private final String mode;
    private final int gAt, pAt;            // the emitted watermark's column, the proctime column's (-1: none)
    private final boolean clock;
    private final long clockStart, clockStep;
    private final long[] offsets, rows;    // per chunk: its first seq, its rows
    private final Long[] watermarks, proctimes;   // per chunk: carried in (NULL: none yet)
    private final long[][] grids;          // first: sorted thresholds,
    private final int[] of;                // each of the emitted watermark (0), processing time (1) or seq (2)

    public ArrivalScan(String settings) {
        Map s = Internal.settings(settings);
        mode = (String) s.get("mode");
        gAt = Integer.parseInt((String) s.get("g"));
        pAt = Integer.parseInt((String) s.get("p"));
        String[] c = ((String) s.get("clock")).split(":");
        clock = c.length == 2;
        clockStart = clock ? Long.parseLong(c[0]) : 0;
        clockStep = clock ? Long.parseLong(c[1]) : 0;
        String[] chunks = ((String) s.get("chunks")).length() == 0 ? new String[0] : ((String) s.get("chunks")).split(",");
        offsets = new long[chunks.length];
        rows = new long[chunks.length];
        watermarks = new Long[chunks.length];
        proctimes = new Long[chunks.length];
        for (int i = 0; i < chunks.length; i++) {
            String[] f = chunks[i].split(":", -1);
            offsets[i] = Long.parseLong(f[0]);
            rows[i] = Long.parseLong(f[1]);
            watermarks[i] = f[2].length() == 0 ? null : Long.valueOf(f[2]);
            proctimes[i] = f[3].length() == 0 ? null : Long.valueOf(f[3]);
        }
        String[] named = ((String) s.get("grids")).length() == 0 ? new String[0] : ((String) s.get("grids")).split("/");
        grids = new long[named.length][];
        of = new int[named.length];
        for (int i = 0; i < named.length; i++) {
            int colon = named[i].indexOf(':');
            of[i] = Arrays.asList(new String[] {"own", "pt", "seq"}).indexOf(named[i].substring(0, colon));
            grids[i] = longs(named[i].substring(colon + 1));
        }
    }

    private static long[] longs(String text) {
        if (text.length() == 0) return new long[0];
        String[] parts = text.split(",");
        long[] out = new long[parts.length];
        for (int i = 0; i < parts.length; i++) out[i] = Long.parseLong(parts[i]);
        return out;
    }

    private static Long max(Long a, Long b) {
        return a == null ? b : b == null ? a : (b.longValue() > a.longValue() ? b : a);
    }

    /** The running values of one chunk's rows, in arrival order. */
    final class Fold {
        final int chunk = Internal.partition();
        long seq, count = 0;
        Long watermark, own, proctime;   // watermark: before the row; own, proctime: the row's

        Fold() {
            boolean summary = "summary".equals(mode);
            if (!summary && chunk >= offsets.length) throw changed();
            seq = summary ? 0 : offsets[chunk] - 1;
            watermark = summary ? null : watermarks[chunk];
            proctime = summary ? null : proctimes[chunk];
        }

        /** Steps past one row: its seq, the watermark before it, its own and its processing time. */
        void step(InternalRow r, Long before) {
            seq++;
            count++;
            own = r.isNullAt(gAt) ? null : Long.valueOf(r.getLong(gAt));
            if (pAt >= 0) proctime = max(proctime, r.isNullAt(pAt) ? null : Long.valueOf(r.getLong(pAt)));
            else if (clock) proctime = Long.valueOf(clockStart + seq * clockStep);
            watermark = max(before, own);
        }

        /** The chunk held as many rows as the summary counted (a source read twice must not change). */
        void finish() {
            if (!"summary".equals(mode) && count != rows[chunk]) throw changed();
        }

        RuntimeException changed() {
            return Internal.error("input partition " + chunk + " changed between the stream's passes "
                                             + "(a source that gives other rows when read again)");
        }
    }

    public Iterator call(final Iterator input) {
        final Fold fold = new Fold();
        if ("summary".equals(mode)) {
            Long high = null;
            while (input.hasNext()) {
                fold.step((InternalRow) input.next(), null);
                high = max(high, fold.own);
            }
            return Collections.singletonList(new GenericInternalRow(new Object[] {
                Integer.valueOf(fold.chunk), Long.valueOf(fold.count), high, pAt >= 0 ? fold.proctime : null})).iterator();
        }
        if ("first".equals(mode)) return first(fold, input);
        final UnsafeRow added = new UnsafeRow(3);   // seq, watermark before, processing time
        added.pointTo(new byte[32], 32);
        final JoinedRow out = new JoinedRow();
        return new Iterator() {
            public boolean hasNext() {
                if (input.hasNext()) return true;
                fold.finish();
                return false;
            }

            public Object next() {
                if (!input.hasNext()) throw new NoSuchElementException();
                InternalRow r = (InternalRow) input.next();
                Long before = fold.watermark;
                fold.step(r, before);
                added.setLong(0, fold.seq);
                if (before == null) added.setNullAt(1); else added.setLong(1, before.longValue());
                if (fold.proctime == null) added.setNullAt(2); else added.setLong(2, fold.proctime.longValue());
                return out.apply(r, added);   // read before the next row (kit/jvm/Internal.java)
            }

            public void remove() {
                throw new UnsupportedOperationException();
            }
        };
    }

    private Iterator first(Fold fold, Iterator input) {
        boolean[][] found = new boolean[grids.length][];
        for (int g = 0; g < grids.length; g++) found[g] = new boolean[grids[g].length];
        List out = new ArrayList();
        while (input.hasNext()) {
            Long before = fold.watermark;
            fold.step((InternalRow) input.next(), before);
            for (int g = 0; g < grids.length; g++) {
                Long value = of[g] == 0 ? fold.own : of[g] == 1 ? fold.proctime : Long.valueOf(fold.seq);
                if (value == null || grids[g].length == 0) continue;
                int at = Arrays.binarySearch(grids[g], value.longValue());
                int i = at >= 0 ? at : -at - 2;   // the greatest threshold at or below the value
                if (i < 0 || found[g][i]) continue;
                found[g][i] = true;
                out.add(new GenericInternalRow(new Object[] {Integer.valueOf(g), Long.valueOf(i), Long.valueOf(fold.seq),
                                                        fold.own, before, fold.proctime}));
            }
        }
        fold.finish();
        return out.iterator();
    }
}
