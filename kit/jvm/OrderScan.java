package flinkkit;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Ascending$;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.InterpretedOrdering;
import org.apache.spark.sql.catalyst.expressions.NullsLast$;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * One pass over an input partition's rows of the {@code order} columns: whether they are
 * already sorted ascending, NULLs last (each row at least the one before), with the
 * partition's number and its first and last rows, so the driver can tell whether the whole
 * input is in order (each partition's last row at most the next one's first).
 *
 * <p>The JVM twin of {@code _sorted_by} in kit/stream.py, which gives the same rows through
 * Arrow and Python.
 *
 * <pre>
 *   partition 0: 1 2 2 5   ->  (0, true, [1], [5])
 *   partition 1: 7 6 9     ->  (1, false, [7], [6]): the scan stops at the first row out of order
 * </pre>
 */
public class OrderScan implements MapPartitionsFunction {
    private final StructType schema;

    public OrderScan(StructType schema) {
        this.schema = schema;
    }

    public Iterator call(Iterator rows) {
        if (!rows.hasNext()) return Collections.emptyIterator();
        List orders = new ArrayList();
        for (int c = 0; c < schema.fields().length; c++) {
            BoundReference column = new BoundReference(c, schema.fields()[c].dataType(), true);
            orders.add(new SortOrder(column, Ascending$.MODULE$, NullsLast$.MODULE$,
                                     CollectionConverters.asScala(new ArrayList()).toSeq()));
        }
        InterpretedOrdering ordering = new InterpretedOrdering(CollectionConverters.asScala(orders).toSeq());
        InternalRow first = ((InternalRow) rows.next()).copy(), last = first;
        boolean sorted = true;
        while (sorted && rows.hasNext()) {   // out of order: the answer is known
            InternalRow row = (InternalRow) rows.next();
            sorted = ordering.compare(last, row) <= 0;
            last = row.copy();
        }
        return Collections.singletonList(new GenericInternalRow(new Object[] {
            Integer.valueOf(Internal.partition()), Boolean.valueOf(sorted), first, last})).iterator();
    }
}
