package flinkkit;

import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.execution.ColumnarToRowExec;
import org.apache.spark.sql.execution.ProjectExec;
import org.apache.spark.sql.execution.datasources.parquet.ParquetDictionary;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.WholeStageCodegenExec;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A function over each partition of a DataFrame's rows in Spark's own form
 * ({@code InternalRow}: strings as {@code UTF8String}, timestamps as microseconds), giving
 * a DataFrame of {@code schema}: Dataset.mapPartitions without converting every row to a
 * {@code Row} and back. The function must not keep an input row past the next one without
 * copying it (Spark reuses them); the rows it gives are read once, in turn.
 *
 * <p>A DataFrame that only reads columns of a file (a scan whose column batches Spark turns
 * into rows), perhaps renamed or reordered, is read from the batches in place, each row a
 * view of its batch ({@link Memo}: work done once per value of a Parquet dictionary).
 * One that only reads columns of CSV or JSON-lines files is read by {@link LineScan}: their
 * plain lines parsed by the kit, the others by Spark's parser.
 *
 * <p>The input is planned without adaptive execution, so that a shuffle in it runs when
 * the result is read, not when it is built (adaptive plans run their shuffles to plan on).
 */
public final class Internal {
    private Internal() {
    }

    public static Dataset mapPartitions(org.apache.spark.sql.classic.Dataset df, MapPartitionsFunction f,
                                        StructType schema) {
        return mapPartitions(df, f, schema, null);
    }

    /**
     * The same, the input's partitions grouped by {@code groups} (null: as they are), each group
     * read in turn by one task ({@link Turns}).
     */
    static Dataset mapPartitions(org.apache.spark.sql.classic.Dataset df, MapPartitionsFunction f, StructType schema,
                                 Turns groups) {
        QueryExecution plan = df.queryExecution();
        SQLConf conf = df.sparkSession().sessionState().conf();
        String adaptive = "spark.sql.adaptive.enabled", before = conf.getConfString(adaptive, "true");
        conf.setConfString(adaptive, "false");
        try {
            plan.executedPlan();
        } finally {
            conf.setConfString(adaptive, before);
        }
        SparkPlan columnar = columnarSource(plan.executedPlan());
        RDD lines = columnar == null ? LineScan.rows(plan.executedPlan()) : null;   // CSV or JSON lines: plain ones parsed here
        RDD in = columnar != null ? columnar.executeColumnar() : lines != null ? lines : plan.toRdd();
        if (groups != null) in = in.coalesce(in.getNumPartitions(), false, scala.Option.apply(groups), null);
        RDD out = in.mapPartitionsWithIndex(new Partition(f, columnar != null,
                                                          columnar != null ? picks(plan.executedPlan()) : null), false, ROW);
        return df.sparkSession().internalCreateDataFrame(out, schema, false);
    }

    /**
     * Groups of partitions read in turn: {@code tasks} groups, each of them all, in order
     * (tasks that read the whole input, or as far as they need: {@code coalesce(1)} promises
     * no order).
     */
    static final class Turns implements org.apache.spark.rdd.PartitionCoalescer, java.io.Serializable {
        private final int tasks;

        Turns(int tasks) {
            this.tasks = tasks;
        }

        public org.apache.spark.rdd.PartitionGroup[] coalesce(int count, RDD parent) {
            org.apache.spark.Partition[] parts = parent.partitions();
            org.apache.spark.rdd.PartitionGroup[] groups = new org.apache.spark.rdd.PartitionGroup[tasks];
            for (int k = 0; k < groups.length; k++) {
                groups[k] = new org.apache.spark.rdd.PartitionGroup(scala.Option.apply(null));
                for (int j = 0; j < parts.length; j++) groups[k].partitions().addOne(parts[j]);
            }
            return groups;
        }
    }

    /** The first {@code n} of {@code input}'s elements (fewer if it has fewer). */
    static java.util.Iterator first(final java.util.Iterator input, final long n) {
        return new java.util.Iterator() {
            private long left = n;

            public boolean hasNext() {
                return left > 0 && input.hasNext();
            }

            public Object next() {
                if (left <= 0) throw new java.util.NoSuchElementException();
                left--;
                return input.next();
            }
        };
    }

    static final String MARK = "flink-kit: ";

    private static final scala.reflect.ClassTag ROW = scala.reflect.ClassTag$.MODULE$.apply(InternalRow.class);

    /**
     * The columnar source of a plan that only turns it into rows (a file scan of the columns
     * read, as {@code spark.read.parquet(...).select(...)} plans it), perhaps picking,
     * renaming or reordering its columns, or null: its batches are then read row by row in
     * place, without Spark writing each row out first.
     */
    private static SparkPlan columnarSource(SparkPlan plan) {
        if (plan instanceof WholeStageCodegenExec) plan = ((WholeStageCodegenExec) plan).child();
        if (plan instanceof ProjectExec && picks(plan) != null) plan = ((ProjectExec) plan).child();
        if (!(plan instanceof ColumnarToRowExec)) return null;
        SparkPlan source = ((ColumnarToRowExec) plan).child();
        return source.supportsColumnar() ? source : null;
    }

    /**
     * For a plan that only picks columns of its child, perhaps renamed: the place of each in
     * the child's output; null for another plan.
     */
    static int[] picks(SparkPlan plan) {
        if (plan instanceof WholeStageCodegenExec) plan = ((WholeStageCodegenExec) plan).child();
        if (!(plan instanceof ProjectExec)) return null;
        java.util.List list = CollectionConverters.asJava(((ProjectExec) plan).projectList());
        java.util.List inputs = CollectionConverters.asJava(((ProjectExec) plan).child().output());
        int[] out = new int[list.size()];
        for (int i = 0; i < out.length; i++) {
            Object e = list.get(i);
            if (e instanceof Alias) e = ((Alias) e).child();
            if (!(e instanceof AttributeReference)) return null;
            out[i] = -1;
            for (int j = 0; j < inputs.size(); j++)
                if (((AttributeReference) inputs.get(j)).exprId().equals(((AttributeReference) e).exprId())) out[i] = j;
            if (out[i] < 0) return null;
        }
        return out;
    }

    /**
     * About how many rows {@code df} reads from its Parquet files (else -1, also for a filtered
     * scan): their bytes at the rows per byte of the first file's footer. One footer read, no
     * job (Spark's count reads every footer in a job: 0.2 s for one file); for splitting work.
     */
    public static long reckonParquet(org.apache.spark.sql.classic.Dataset df) throws java.io.IOException {
        scala.collection.Seq leaves = df.queryExecution().sparkPlan().collectLeaves();
        if (leaves.size() != 1 || !(leaves.head() instanceof org.apache.spark.sql.execution.FileSourceScanExec)) return -1;
        org.apache.spark.sql.execution.FileSourceScanExec scan = (org.apache.spark.sql.execution.FileSourceScanExec) leaves.head();
        Files files = Files.of(scan);
        if (files == null || !(scan.relation().fileFormat() instanceof org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat)
            || !scan.dataFilters().isEmpty() || !scan.partitionFilters().isEmpty()) return -1;
        if (files.first == null) return 0;
        org.apache.parquet.hadoop.ParquetFileReader footer = org.apache.parquet.hadoop.ParquetFileReader.open(
            org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(files.first.toPath(), files.conf));
        try {
            long size = files.first.fileSize();
            return size <= 0 ? -1 : Math.round((double) files.bytes * footer.getRecordCount() / size);
        } finally {
            footer.close();
        }
    }

    /** A file scan's files, as its splits read them: their bytes, the first split, the read's Hadoop settings. */
    static final class Files {
        long bytes;
        org.apache.spark.sql.execution.datasources.PartitionedFile first;   // null: no file
        org.apache.hadoop.conf.Configuration conf;

        /** {@code scan}'s, or null where its splits are not a {@code FileScanRDD}'s. */
        static Files of(org.apache.spark.sql.execution.FileSourceScanExec scan) {
            if (!(scan.inputRDD() instanceof org.apache.spark.sql.execution.datasources.FileScanRDD)) return null;
            Files out = new Files();
            scala.collection.Iterator parts =
                ((org.apache.spark.sql.execution.datasources.FileScanRDD) scan.inputRDD()).filePartitions().iterator();
            while (parts.hasNext()) {
                org.apache.spark.sql.execution.datasources.PartitionedFile[] files =
                    ((org.apache.spark.sql.execution.datasources.FilePartition) parts.next()).files();
                for (int i = 0; i < files.length; i++) {
                    out.bytes += files[i].length();
                    if (out.first == null) out.first = files[i];
                }
            }
            org.apache.spark.sql.execution.datasources.HadoopFsRelation relation = scan.relation();
            out.conf = relation.sparkSession().sessionState().newHadoopConfWithOptions(relation.options());
            return out;
        }
    }

    /**
     * Whether {@code df} reads a file format that is parsed row by row (CSV, JSON, text: a file
     * scan that gives no column batches), so that every read of it parses it again.
     */
    public static boolean parsesRows(org.apache.spark.sql.classic.Dataset df) {
        java.util.Iterator leaves = CollectionConverters.asJava(df.queryExecution().sparkPlan().collectLeaves()).iterator();
        while (leaves.hasNext()) {
            SparkPlan leaf = (SparkPlan) leaves.next();
            if (leaf instanceof org.apache.spark.sql.execution.FileSourceScanExec && !leaf.supportsColumnar()) return true;
        }
        return false;
    }

    /**
     * Whether {@code df}'s answer is the same whatever order its input rows come in: its
     * analyzed plan is deterministic, and no aggregate but COUNT, MIN and MAX reads FLOAT or
     * DOUBLE values (the order of the additions changes a sum's last digits).
     */
    public static boolean orderFree(org.apache.spark.sql.classic.Dataset df) {
        org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan = df.queryExecution().analyzed();
        return plan.deterministic() && orderFree(plan);
    }

    private static boolean orderFree(org.apache.spark.sql.catalyst.trees.TreeNode node) {
        if (node instanceof org.apache.spark.sql.catalyst.expressions.aggregate.AggregateFunction
            && !(node instanceof org.apache.spark.sql.catalyst.expressions.aggregate.Count
                 || node instanceof org.apache.spark.sql.catalyst.expressions.aggregate.Min
                 || node instanceof org.apache.spark.sql.catalyst.expressions.aggregate.Max)) {
            java.util.Iterator args = CollectionConverters.asJava(
                ((org.apache.spark.sql.catalyst.expressions.Expression) node).children()).iterator();
            while (args.hasNext()) {
                DataType type = ((org.apache.spark.sql.catalyst.expressions.Expression) args.next()).dataType();
                if (type instanceof DoubleType || type instanceof org.apache.spark.sql.types.FloatType) return false;
            }
        }
        java.util.Iterator children = CollectionConverters.asJava(node.children()).iterator();
        while (children.hasNext()) if (!orderFree((org.apache.spark.sql.catalyst.trees.TreeNode) children.next())) return false;
        if (node instanceof org.apache.spark.sql.catalyst.plans.QueryPlan) {
            java.util.Iterator expressions = CollectionConverters.asJava(
                ((org.apache.spark.sql.catalyst.plans.QueryPlan) node).expressions()).iterator();
            while (expressions.hasNext())
                if (!orderFree((org.apache.spark.sql.catalyst.trees.TreeNode) expressions.next())) return false;
        }
        return true;
    }

    /**
     * The error a kit class raises for the user: Spark's {@code USER_RAISED_EXCEPTION}, the
     * one SQL's {@code raise_error} raises, so PySpark shows its message alone, without a Java
     * stack trace.
     */
    public static RuntimeException error(String message) {   // marked as the kit's: kit/errors.py
        scala.collection.immutable.Map parameters = (scala.collection.immutable.Map)
            scala.collection.immutable.Map$.MODULE$.empty().updated("errorMessage", MARK + message);
        return new org.apache.spark.SparkRuntimeException("USER_RAISED_EXCEPTION", parameters, null,
                                                          new org.apache.spark.QueryContext[0], "");
    }

    /**
     * Reads the columns of rows of one schema in Spark's internal form ({@code UTF8String},
     * boxed numbers, microseconds, days), as {@code InternalRow.get} does, but with the
     * column's own getter for the common types: {@code get} looks the type up on every call.
     */
    static final class Reader implements java.io.Serializable {
        private final DataType[] types;
        private final int[] getters;   // 1 string, 2 long, 3 int, 4 double, 5 boolean, 0 InternalRow.get

        Reader(StructType schema) {
            types = new DataType[schema.fields().length];
            getters = new int[types.length];
            for (int c = 0; c < types.length; c++) {
                DataType t = types[c] = schema.fields()[c].dataType();
                getters[c] = t instanceof StringType ? 1
                    : t instanceof LongType || t instanceof TimestampType || t instanceof TimestampNTZType ? 2
                    : t instanceof IntegerType || t instanceof DateType ? 3
                    : t instanceof DoubleType ? 4 : t instanceof BooleanType ? 5 : 0;
            }
        }

        DataType type(int c) {
            return types[c];
        }

        /** Column {@code c} of {@code r}; NULL: null. A string is a view into the row. */
        Object get(InternalRow r, int c) {
            if (r.isNullAt(c)) return null;
            switch (getters[c]) {
                case 1: return r.getUTF8String(c);
                case 2: return Long.valueOf(r.getLong(c));
                case 3: return Integer.valueOf(r.getInt(c));
                case 4: return Double.valueOf(r.getDouble(c));
                case 5: return Boolean.valueOf(r.getBoolean(c));
                default: return r.get(c, types[c]);
            }
        }
    }

    /** The rows of column batches, in order; with {@code picks}, of the batches' columns at those places. */
    static final class BatchRows implements java.util.Iterator {
        private final java.util.Iterator batches;
        private final int[] picks;
        private ColumnarBatch batch;
        private int next, size, read;

        BatchRows(java.util.Iterator batches, int[] picks) {
            this.batches = batches;
            this.picks = picks;
        }

        public boolean hasNext() {
            while (next == size) {
                if (!batches.hasNext()) return false;
                batch = (ColumnarBatch) batches.next();
                if (picks != null) {
                    ColumnVector[] columns = new ColumnVector[picks.length];
                    for (int c = 0; c < picks.length; c++) columns[c] = batch.column(picks[c]);
                    batch = new ColumnarBatch(columns, batch.numRows());
                }
                next = 0;
                size = batch.numRows();
                read++;
            }
            return true;
        }

        public Object next() {
            if (!hasNext()) throw new java.util.NoSuchElementException();
            return batch.getRow(next++);
        }
    }

    /**
     * A value computed once per distinct value of a column that Parquet stores in a
     * dictionary, kept by dictionary id while the rows come from one column chunk (one
     * dictionary): a frequent key is then looked up once per chunk, not once per row. Keeps
     * nothing for rows not read from column batches, or of a column not in a dictionary.
     *
     * <pre>
     *   Object v = memo.get();   // for the row just read
     *   if (v == null) { v = ...; memo.put(v); }
     * </pre>
     */
    static final class Memo {
        private static final java.lang.reflect.Field VECTOR, FILE;   // each vector's dictionary, the file's in it
        static {
            java.lang.reflect.Field vector = null, file = null;
            try {
                vector = WritableColumnVector.class.getDeclaredField("dictionary");
                file = ParquetDictionary.class.getDeclaredField("dictionary");
                vector.setAccessible(true);
                file.setAccessible(true);
            } catch (Exception e) {   // another Spark: no memo
                vector = file = null;
            }
            VECTOR = vector;
            FILE = file;
        }

        private final BatchRows rows;
        private final int column;
        private int batch = -1, id;
        private WritableColumnVector ids;   // of the current batch; null: not in a dictionary
        private Object dictionary;
        private Object[] values;

        /** Of column {@code column} of {@code rows} (an input iterator: none kept unless of batches). */
        Memo(java.util.Iterator rows, int column) {
            this.rows = rows instanceof BatchRows && FILE != null ? (BatchRows) rows : null;
            this.column = column;
        }

        /** The value kept for the value of the row just read, or null. */
        Object get() {
            id = -1;
            if (rows == null) return null;
            if (rows.read != batch) {
                batch = rows.read;
                ids = dictionaryIds(rows.batch.column(column));
            }
            if (ids == null || rows.batch.column(column).isNullAt(rows.next - 1)) return null;
            id = ids.getDictId(rows.next - 1);
            return values[id];
        }

        /** Keeps {@code v} for the value of the row just read. */
        void put(Object v) {
            if (id >= 0) values[id] = v;
        }

        private WritableColumnVector dictionaryIds(ColumnVector vector) {
            if (!(vector instanceof WritableColumnVector) || !((WritableColumnVector) vector).hasDictionary()) return null;
            try {
                Object wrapper = VECTOR.get(vector);
                if (!(wrapper instanceof ParquetDictionary)) return null;
                Object file = FILE.get(wrapper);
                if (file != dictionary) {
                    dictionary = file;
                    values = new Object[((org.apache.parquet.column.Dictionary) file).getMaxId() + 1];
                }
            } catch (IllegalAccessException e) {
                return null;
            }
            return ((WritableColumnVector) vector).getDictionaryIds();
        }
    }

    /**
     * The rows a fold of a partition emits, in turn: {@code process} reads one input row and
     * adds what it emits to {@code out}; input is read only when {@code out} is empty.
     */
    abstract static class Folding implements java.util.Iterator {
        final java.util.Iterator input;
        final java.util.ArrayDeque out = new java.util.ArrayDeque();

        Folding(java.util.Iterator input) {
            this.input = input;
        }

        abstract void process(InternalRow r);

        public boolean hasNext() {
            while (out.isEmpty() && input.hasNext()) process((InternalRow) input.next());
            return !out.isEmpty();
        }

        public Object next() {
            if (!hasNext()) throw new java.util.NoSuchElementException();
            return out.poll();
        }

        public void remove() {
            throw new UnsupportedOperationException();
        }
    }

    /**
     * Two stages of a task's work side by side: a {@link Stage} runs on a thread of its own,
     * in the task's context, and hands what it makes in batches, in order, to the task's
     * thread, which reads them with {@link #take}. Its failure is raised there; the task's end
     * stops it.
     */
    static final class Pipe {
        /** The first stage: adds what it makes to {@code batch} (a batch's worth at most); false at its end. */
        interface Stage {
            boolean fill(java.util.ArrayList batch) throws Exception;
        }

        private static final Object END = new Object();
        private final java.util.concurrent.ArrayBlockingQueue queue = new java.util.concurrent.ArrayBlockingQueue(8);
        private volatile boolean stopped;

        Pipe(final Stage stage) {
            final org.apache.spark.TaskContext context = org.apache.spark.TaskContext.get();
            final Thread thread = new Thread("flink-kit pipe") {
                public void run() {
                    org.apache.spark.TaskContext$.MODULE$.setTaskContext(context);
                    try {
                        boolean more = true;
                        while (more && !stopped) {
                            java.util.ArrayList batch = new java.util.ArrayList();
                            more = stage.fill(batch);
                            if (!batch.isEmpty()) put(batch);
                        }
                        put(END);
                    } catch (Throwable e) {
                        put(e);
                    } finally {
                        org.apache.spark.TaskContext$.MODULE$.unset();
                    }
                }
            };
            thread.setDaemon(true);
            if (context != null) {
                context.addTaskCompletionListener(new org.apache.spark.util.TaskCompletionListener() {
                    public void onTaskCompletion(org.apache.spark.TaskContext c) {
                        stopped = true;
                        thread.interrupt();
                    }
                });
            }
            thread.start();
        }

        private void put(Object o) {
            try {
                while (!stopped && !queue.offer(o, 100, java.util.concurrent.TimeUnit.MILLISECONDS)) {
                    // the task's thread reads on, or the task ends
                }
            } catch (InterruptedException e) {
                stopped = true;
            }
        }

        /** The next batch, or null after the last. */
        java.util.ArrayList take() {
            Object o;
            try {
                o = queue.take();
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
            if (o == END) return null;
            if (o instanceof RuntimeException) throw (RuntimeException) o;
            if (o instanceof Error) throw (Error) o;
            if (o instanceof Throwable) throw new RuntimeException((Throwable) o);
            return (java.util.ArrayList) o;
        }
    }

    /**
     * {@code input}'s rows read ahead on a thread of their own ({@link Pipe}), each copied (Spark
     * reuses them): a file parsed row by row then parses beside the task's own work.
     */
    static java.util.Iterator ahead(final java.util.Iterator input) {
        final Pipe pipe = new Pipe(new Pipe.Stage() {
            public boolean fill(java.util.ArrayList batch) {
                while (batch.size() < 4096 && input.hasNext()) batch.add(((InternalRow) input.next()).copy());
                return input.hasNext();
            }
        });
        return new java.util.Iterator() {
            private java.util.ArrayList batch = new java.util.ArrayList();
            private int at;

            public boolean hasNext() {
                while (batch != null && at == batch.size()) {
                    batch = pipe.take();
                    at = 0;
                }
                return batch != null;
            }

            public Object next() {
                if (!hasNext()) throw new java.util.NoSuchElementException();
                return batch.get(at++);
            }
        };
    }

    /** A class's settings, {@code "name=value;..."} (the Python side writes them), as a map. */
    public static java.util.Map settings(String text) {
        java.util.Map out = new java.util.HashMap();
        String[] parts = text.split(";", -1);
        for (int i = 0; i < parts.length; i++) {
            int eq = parts[i].indexOf('=');
            out.put(parts[i].substring(0, eq), parts[i].substring(eq + 1));
        }
        return out;
    }

    /** The function, as Scala's RDD.mapPartitions takes it: over rows, or over the rows of
     *  column batches (each row a view of its batch, read before the next). */
    private static final ThreadLocal PARTITION = new ThreadLocal();   // Integer

    /**
     * The index of the input partition the running function reads: its chunk of the stream.
     * Not {@code TaskContext.getPartitionId()}, which is the task's, another number when the
     * result is read through a union or a zip.
     */
    public static int partition() {
        return ((Integer) PARTITION.get()).intValue();
    }

    static final class Partition extends scala.runtime.AbstractFunction2 implements java.io.Serializable {
        private final MapPartitionsFunction f;
        private final boolean batches;
        private final int[] picks;

        Partition(MapPartitionsFunction f, boolean batches, int[] picks) {
            this.f = f;
            this.batches = batches;
            this.picks = picks;
        }

        public Object apply(Object index, Object input) {
            java.util.Iterator rows = CollectionConverters.asJava((scala.collection.Iterator) input);
            PARTITION.set((Integer) index);
            try {
                return CollectionConverters.asScala(f.call(batches ? new BatchRows(rows, picks) : rows));
            } catch (RuntimeException e) {
                throw e;
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }
    }
}
