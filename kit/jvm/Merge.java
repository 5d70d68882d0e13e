package flinkkit;

import java.util.List;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;

/**
 * Two inputs of a join merged into one arrival order without sorting them together
 * (kit/replay/interleave.py's merge beside a small input): each input's merge key never
 * decreases along its arrivals, so a row of the large input comes after exactly the rows
 * of the small one whose keys are smaller (or, where ties go to the small one, no larger):
 * their number, found by binary search among the small input's keys, collected once and
 * broadcast. The large input is neither sorted nor moved.
 *
 * <pre>
 *   small input's keys (by seq)  3 5 5 8
 *   a large row's key            5      ties to the small input: 3 before it; else 1
 *                                2      0 before it either way
 * </pre>
 */
public final class Merge implements org.apache.spark.sql.api.java.UDF1 {
    private final Broadcast keys;   // long[]: the small input's merge keys by seq (NULL as Long.MIN_VALUE)
    private final boolean ties;     // a tie puts the small input's row first

    private Merge(Broadcast keys, boolean ties) {
        this.keys = keys;
        this.ties = ties;
    }

    /** The number of the small input's rows merged before a row of merge key {@code key}. */
    public Object call(Object key) {
        long[] a = (long[]) keys.value();
        long k = key == null ? Long.MIN_VALUE : ((Number) key).longValue();
        int low = 0, high = a.length;   // the first of them that comes after it
        while (low < high) {
            int mid = (low + high) >>> 1;
            if (a[mid] < k || ties && a[mid] == k) low = mid + 1;
            else high = mid;
        }
        return Long.valueOf(low);
    }

    /**
     * {@code large} with column {@code _c} LONG: for each row, how many rows of the small
     * input come before it, by the row's merge key {@code key} (a column, NULL first), among
     * {@code small}'s rows ({@code seq} LONG from 0 without gaps, its merge key LONG), collected
     * here; {@code ties}: an equal key puts the small input's row first.
     */
    public static Dataset counted(org.apache.spark.sql.classic.Dataset large, String key,
                                  org.apache.spark.sql.classic.Dataset small, boolean ties) {
        List rows = small.collectAsList();
        long[] a = new long[rows.size()];
        for (int i = 0; i < a.length; i++) {
            Row r = (Row) rows.get(i);
            a[(int) r.getLong(0)] = r.isNullAt(1) ? Long.MIN_VALUE : r.getLong(1);
        }
        Broadcast shared = JavaSparkContext.fromSparkContext(large.sparkSession().sparkContext()).broadcast(a);
        Column c = functions.udf(new Merge(shared, ties), DataTypes.LongType).apply(new Column[] {functions.col(key)});
        return large.withColumn("_c", c);
    }
}
