package flinkkit;

import java.math.BigDecimal;
import java.math.MathContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The built-in aggregates ({@code SqlAggregate} of kit/windows/functions.py: COUNT, SUM,
 * AVG, MIN, MAX of a column) over Spark's internal rows, as the Python replay computes them.
 * An accumulator is a pair of arrays, one slot per aggregate: the values it counted and its
 * running sum, minimum or maximum (null before the first value).
 *
 * <pre>
 *   SUM(v), MIN(v) over v = 3, NULL, 1  ->  counts {2, 2}, accs {4, 1}  ->  results {4, 1}
 * </pre>
 *
 * <p>Partial aggregates that merge in Spark SQL (kit/windows/fast.py) keep the NaNs of a
 * FLOAT or DOUBLE MIN or MAX apart ({@code nanParts}): whether the first value was NaN is the
 * caller's to note, the accumulator takes the other values.
 *
 * <p>Each aggregate has a kind (kit/windows/compiled.py's {@code _aggregate_kind}): 0 adds and
 * compares integers, 1 doubles, 2 compares with {@code compareTo}, 3 compares strings by their
 * UTF-8 bytes (the order of code points).
 */
final class Aggregates implements java.io.Serializable {
    final String[] functions;
    final int[] columns, kinds;   // the input column of each (-1: none, COUNT(*))
    private final boolean[] counting;   // COUNT: reads no value
    private final Internal.Reader reader;   // the input rows'
    private final boolean copies;   // keep copies of the strings a row gives (Spark reuses rows)
    private final boolean[] nanApart;   // MIN or MAX whose NaNs the caller keeps apart: they change nothing here

    Aggregates(String functions, String columns, String kinds, Internal.Reader reader, boolean copies,
               int[] nanParts) {
        this.functions = functions.split(",");
        this.columns = ints(columns);
        this.kinds = ints(kinds);
        this.reader = reader;
        this.copies = copies;
        nanApart = new boolean[this.functions.length];
        for (int i = 0; i < nanParts.length; i++) nanApart[nanParts[i]] = true;
        counting = new boolean[this.functions.length];
        for (int p = 0; p < counting.length; p++) counting[p] = "count".equals(this.functions[p]);
    }

    static int[] ints(String text) {
        if (text.length() == 0) return new int[0];
        String[] parts = text.split(",");
        int[] out = new int[parts.length];
        for (int i = 0; i < parts.length; i++) out[i] = Integer.parseInt(parts[i]);
        return out;
    }

    int size() {
        return functions.length;
    }

    /** Adds row {@code r} to the accumulator ({@code counts}, {@code accs}). */
    void add(long[] counts, Object[] accs, InternalRow r) {
        for (int p = 0; p < functions.length; p++) {
            int c = columns[p];
            if (c >= 0 && r.isNullAt(c)) continue;
            counts[p]++;
            if (counting[p]) continue;
            Object v = reader.get(r, c);
            if (nanApart[p] && Double.isNaN(((Number) v).doubleValue())) continue;
            Object next = accs[p] == null ? first(p, v) : combine(p, accs[p], v);
            accs[p] = copies && next == v && v instanceof UTF8String ? ((UTF8String) v).clone() : next;
        }
    }

    /** Both accumulators in one, into {@code counts} and {@code accs}. */
    void merge(long[] aCounts, Object[] aAccs, long[] bCounts, Object[] bAccs, long[] counts, Object[] accs) {
        for (int p = 0; p < functions.length; p++) {
            Object x = aAccs[p], y = bAccs[p];
            counts[p] = aCounts[p] + bCounts[p];
            if (counting[p]) continue;
            accs[p] = x == null ? y : y == null ? x : combine(p, x, y);
        }
    }

    private Object first(int p, Object v) {
        if (!"sum".equals(functions[p]) && !"avg".equals(functions[p])) return v;
        return kinds[p] == 0 ? (Object) Long.valueOf(((Number) v).longValue())
                             : (Object) Double.valueOf(((Number) v).doubleValue());
    }

    /** Python's acc + v, min(acc, v) (v if v < acc) or max(acc, v) (v if v > acc). */
    private Object combine(int p, Object acc, Object v) {
        String f = functions[p];
        if ("sum".equals(f) || "avg".equals(f)) {
            if (kinds[p] == 0) return Long.valueOf(((Number) acc).longValue() + ((Number) v).longValue());
            return Double.valueOf(((Number) acc).doubleValue() + ((Number) v).doubleValue());
        }
        boolean less = less(p, v, acc), more = less(p, acc, v);
        return ("min".equals(f) ? less : more) ? v : acc;
    }

    private boolean less(int p, Object a, Object b) {
        if (kinds[p] == 0) return ((Number) a).longValue() < ((Number) b).longValue();
        if (kinds[p] == 1) return ((Number) a).doubleValue() < ((Number) b).doubleValue();
        if (kinds[p] == 3) return ((UTF8String) a).binaryCompare((UTF8String) b) < 0;   // UTF-8 bytes: code points
        return ((Comparable) a).compareTo(b) < 0;
    }

    /** The aggregates' values: COUNT as a long, AVG as a double, the others as accumulated. */
    Object[] results(long[] counts, Object[] accs) {
        Object[] out = new Object[functions.length];
        for (int p = 0; p < functions.length; p++) {
            long count = counts == null ? 0 : counts[p];
            Object acc = accs == null ? null : accs[p];
            if (counting[p]) {
                out[p] = Long.valueOf(count);
            } else if ("avg".equals(functions[p])) {
                out[p] = count == 0 || acc == null ? null : Double.valueOf(average(p, acc, count));
            } else {
                out[p] = acc;
            }
        }
        return out;
    }

    /** Python's acc / count: exact for integers, whatever their size. */
    private double average(int p, Object acc, long count) {
        if (kinds[p] != 0) return ((Number) acc).doubleValue() / count;
        long sum = ((Number) acc).longValue();
        if (Math.abs(sum) < (1L << 53)) return (double) sum / count;
        return new BigDecimal(sum).divide(new BigDecimal(count), new MathContext(80)).doubleValue();
    }
}
