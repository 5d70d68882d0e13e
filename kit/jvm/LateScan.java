package flinkkit;

import java.util.Collections;
import java.util.Iterator;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.MapPartitionsFunction;

/**
 * One pass over an input partition's event times (ms, in arrival order), each row emitting
 * the watermark {@code time - shift}: the partition's number, its smallest time, the largest
 * watermark its rows emit, and whether a row's time is at or behind the watermark before it
 * within the partition (a NULL time counts too: the replay then names the row). The driver
 * carries the watermark from one partition to the next.
 *
 * <p>The JVM twin of {@code _late_check} in kit/joins/asof.py, which gives the same rows
 * through Arrow and Python; Spark SQL could only write it with a sort.
 *
 * <pre>
 *   shift 5, times 10 12 8 20 (partition 0)  ->  (0, 8, 15, false): 8 > 7, the watermark before it
 *   shift 5, times 10 12 7 20 (partition 0)  ->  (0, .., .., true):  7 <= 7
 * </pre>
 */
public class LateScan implements MapPartitionsFunction {
    private final long shift;

    public LateScan(long shift) {
        this.shift = shift;
    }

    public Iterator call(Iterator times) {
        long low = Long.MAX_VALUE, high = Long.MIN_VALUE;
        boolean late = false;
        while (times.hasNext()) {
            Long time = (Long) times.next();
            if (time == null || time.longValue() <= high) {
                late = true;   // once late, the answer is known
                break;
            }
            long t = time.longValue();
            low = Math.min(low, t);
            high = Math.max(high, t - shift);
        }
        return Collections.singletonList(new scala.Tuple4(
            Integer.valueOf(TaskContext.getPartitionId()),
            low == Long.MAX_VALUE ? null : Long.valueOf(low),
            high == Long.MIN_VALUE ? null : Long.valueOf(high),
            Boolean.valueOf(late))).iterator();
    }
}
