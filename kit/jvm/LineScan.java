package flinkkit;

import org.apache.hadoop.io.Text;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.FileSourceOptions;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.csv.CSVHeaderChecker;
import org.apache.spark.sql.catalyst.csv.CSVOptions;
import org.apache.spark.sql.catalyst.csv.UnivocityParser;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.json.CreateJacksonParser;
import org.apache.spark.sql.catalyst.json.JSONOptionsInRead;
import org.apache.spark.sql.catalyst.json.JacksonParser;
import org.apache.spark.sql.catalyst.util.FailureSafeParser;
import org.apache.spark.sql.execution.FileSourceScanExec;
import org.apache.spark.sql.execution.InputAdapter;
import org.apache.spark.sql.execution.ProjectExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.WholeStageCodegenExec;
import org.apache.spark.sql.execution.datasources.FileScanRDD;
import org.apache.spark.sql.execution.datasources.HadoopFileLinesReader;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.csv.CSVFileFormat;
import org.apache.spark.sql.execution.datasources.json.JsonFileFormat;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.util.SerializableConfiguration;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A scan of CSV or JSON-lines files, read by the kit: the lines Spark's reader reads (the
 * same files, splits and lines: Hadoop's line reader, as Spark's), each plain line parsed
 * here and any other by Spark's own parser exactly as Spark's reader does (a CSV header,
 * blank and comment lines; malformed rows by the read's mode). Spark spends most of such a
 * read in its tokenizer and date-time formatter: 10M lines {@code word,t} take it 1.8 s on
 * two cores with {@code t} BIGINT, 5 s with {@code t} a TIMESTAMP (JSON: 2.9 s, 5.7 s), against
 * 0.5 s for the lines alone.
 *
 * <p>Plain CSV ({@link Csv}): ASCII with no control character, quote or escape character,
 * not a comment; exactly one delimiter fewer than the file's columns; each field read not
 * empty and not the null value. Plain JSON: {@link Json}. A value read is as its column's
 * type reads it in the shape here: STRING anything; BIGINT and INT digits with an optional
 * minus (at most 18 and 9); TIMESTAMP {@code yyyy-MM-dd HH:mm:ss} with a fraction of as many
 * digits as the read's {@code timestampFormat} says (no format: a space or {@code T}, up to
 * 6 digits), a valid date and time, in the session's time zone.
 *
 * <pre>
 *   schema word STRING, t BIGINT     line                 row
 *   here                             w25,1704067200000    w25 | 1704067200000
 *   Spark's parser (a quote)         "a,b",7              a,b | 7
 *   Spark's parser (t empty)         w26,                 w26 | NULL
 * </pre>
 *
 * <p>Read this way: a scan that its plan only picks columns of (perhaps renamed), without
 * partition columns, pushed filters, buckets or file metadata, read line by line
 * ({@code multiLine} off, UTF-8), not under the legacy time parser, without a corrupt-record
 * column, picking STRING, BIGINT, INT and TIMESTAMP columns only; for CSV also no whitespace
 * trimmed, column pruning on, the delimiter one ASCII character, not the quote or escape one.
 *
 * <p>Why by hand: the rows must be Spark's reader's, so Spark's parsers stay the reference
 * and take every line that is not plain; what is left is a byte scan of the plain shape.
 * pyarrow's CSV and JSON readers (C++, threaded) parse as fast, but their rows would cross
 * into the JVM through Arrow, and they differ from Spark's in quoting, nulls and timestamps;
 * univocity and Jackson are what Spark already runs (the cost above).
 */
public final class LineScan {
    private LineScan() {
    }

    /** {@code df}'s rows as the kit's passes read them ({@link Internal#mapPartitions}; the tests compare them with Spark's). */
    public static org.apache.spark.sql.Dataset read(org.apache.spark.sql.classic.Dataset df) {
        return Internal.mapPartitions(df, new org.apache.spark.api.java.function.MapPartitionsFunction() {
            public java.util.Iterator call(java.util.Iterator rows) {
                return rows;
            }
        }, df.schema());
    }

    private static final int STRING = 1, LONG = 2, INT = 3, TIMESTAMP = 4;

    /** Whether the kit's passes read {@code df} here (its plan a scan as above): rereading it costs little. */
    public static boolean reads(org.apache.spark.sql.classic.Dataset df) {
        return reader(df.queryExecution().sparkPlan()) != null;
    }

    /** The rows of {@code plan} (a scan as above, perhaps picking its columns), or null for another plan. */
    public static RDD rows(SparkPlan plan) {
        Read read = reader(plan);
        if (read == null || !(read.scan.inputRDD() instanceof FileScanRDD)) return null;
        FileSourceScanExec scan = read.scan;
        HadoopFsRelation relation = scan.relation();
        SparkSession session = relation.sparkSession();
        FileScanRDD spark = (FileScanRDD) scan.inputRDD();
        read.hadoop = JavaSparkContext.fromSparkContext(session.sparkContext()).broadcast(
            new SerializableConfiguration(session.sessionState().newHadoopConfWithOptions(relation.options())));
        return new FileScanRDD(session, read, spark.filePartitions(), read.out, spark.metadataColumns(),
                               (scala.collection.immutable.Map) scala.collection.immutable.Map$.MODULE$.empty(),
                               new FileSourceOptions(relation.options()));
    }

    /**
     * About how many lines {@code df}'s files hold, read here (else -1): their bytes over the
     * bytes a line takes among the first {@code SAMPLE} bytes of the first file. Cheap (no
     * job); for splitting work, never for counting rows: 10M lines {@code word,t} are counted
     * in 1.3 s on two cores, reckoned in milliseconds.
     */
    public static long reckon(org.apache.spark.sql.classic.Dataset df) throws java.io.IOException {
        Read read = reader(df.queryExecution().sparkPlan());
        Internal.Files files = read == null ? null : Internal.Files.of(read.scan);
        if (files == null) return -1;
        if (files.first == null) return 0;
        org.apache.hadoop.fs.Path path = files.first.toPath();
        byte[] sample = new byte[(int) Math.min(SAMPLE, files.first.length())];
        org.apache.hadoop.fs.FSDataInputStream in = path.getFileSystem(files.conf).open(path);
        int got = 0;
        try {
            in.seek(files.first.start());
            for (int r = 0; got < sample.length && (r = in.read(sample, got, sample.length - got)) > 0; ) got += r;
        } finally {
            in.close();
        }
        long lines = 0;
        for (int i = 0; i < got; i++) if (sample[i] == '\n') lines++;
        return lines == 0 ? -1 : Math.round((double) files.bytes * lines / got);
    }

    private static final int SAMPLE = 1 << 18;

    /** {@code plan}'s read (its Hadoop settings not yet sent), or null. */
    private static Read reader(SparkPlan plan) {
        if (plan instanceof WholeStageCodegenExec) plan = ((WholeStageCodegenExec) plan).child();
        int[] picks = null;
        if (plan instanceof ProjectExec) {
            picks = Internal.picks(plan);
            if (picks == null) return null;
            plan = ((ProjectExec) plan).child();
        }
        if (plan instanceof InputAdapter) plan = ((InputAdapter) plan).child();
        if (!(plan instanceof FileSourceScanExec) || plan.supportsColumnar()) return null;
        FileSourceScanExec scan = (FileSourceScanExec) plan;
        HadoopFsRelation relation = scan.relation();
        if (relation.partitionSchema().fields().length > 0 || !scan.dataFilters().isEmpty()
            || !scan.partitionFilters().isEmpty() || scan.bucketedScan() || !scan.fileConstantMetadataColumns().isEmpty())
            return null;
        SQLConf conf = relation.sparkSession().sessionState().conf();
        if ("LEGACY".equals(conf.legacyTimeParserPolicy().toString())) return null;
        StructType data = relation.dataSchema(), required = scan.requiredSchema();
        if (picks == null) {
            picks = new int[required.fields().length];
            for (int i = 0; i < picks.length; i++) picks[i] = i;
        }
        int[] kinds = new int[picks.length];
        StructType out = new StructType();
        for (int i = 0; i < picks.length; i++) {
            DataType type = required.fields()[picks[i]].dataType();
            kinds[i] = type == DataTypes.StringType ? STRING : type == DataTypes.LongType ? LONG
                : type == DataTypes.IntegerType ? INT : type == DataTypes.TimestampType ? TIMESTAMP : 0;
            if (kinds[i] == 0) return null;
            out = out.add(required.fields()[picks[i]]);
        }
        Read read;
        if (relation.fileFormat() instanceof CSVFileFormat) {
            CSVOptions options = new CSVOptions(relation.options(), conf.csvColumnPruning(), conf.sessionLocalTimeZone(),
                                                conf.columnNameOfCorruptRecord());
            String delimiter = options.delimiter();
            if (options.multiLine() || !options.columnPruning() || !"UTF-8".equalsIgnoreCase(options.charset())
                || options.ignoreLeadingWhiteSpaceInRead() || options.ignoreTrailingWhiteSpaceInRead()
                || delimiter.length() != 1 || delimiter.charAt(0) < 0x20 || delimiter.charAt(0) > 0x7e
                || delimiter.charAt(0) == options.quote() || delimiter.charAt(0) == options.escape()
                || java.util.Arrays.asList(data.fieldNames()).contains(options.columnNameOfCorruptRecord())) return null;
            read = new Csv(options, data);
        } else if (relation.fileFormat() instanceof JsonFileFormat) {
            JSONOptionsInRead options = new JSONOptionsInRead(relation.options(), conf.sessionLocalTimeZone(),
                                                              conf.columnNameOfCorruptRecord());
            if (options.multiLine() || options.encoding().isDefined()
                || java.util.Arrays.asList(data.fieldNames()).contains(options.columnNameOfCorruptRecord())) return null;
            read = new Json(options);
        } else {
            return null;
        }
        int[] shape = shape(read.timestampFormat);
        for (int i = 0; i < kinds.length; i++) if (kinds[i] == TIMESTAMP && shape == null) return null;
        read.set(scan, out, required, picks, kinds, shape);
        return read;
    }

    /**
     * The timestamps a format reads here: {separator, fraction digits}: a format
     * {@code yyyy-MM-dd HH:mm:ss} or {@code yyyy-MM-dd'T'HH:mm:ss}, perhaps with {@code .S} to
     * {@code .SSSSSS} (that many digits); no format ({@code null}, Spark's default parse):
     * {0, -1}, either separator and none to six digits; another format: null.
     */
    static int[] shape(String format) {
        if (format == null) return new int[] {0, -1};
        String date = "yyyy-MM-dd", time = "HH:mm:ss";
        for (int s = 0; s < 2; s++) {
            String start = date + (s == 0 ? " " : "'T'") + time;
            if (format.equals(start)) return new int[] {s == 0 ? ' ' : 'T', 0};
            for (int digits = 1; digits <= 6; digits++)
                if (format.equals(start + "." + "SSSSSS".substring(0, digits))) return new int[] {s == 0 ? ' ' : 'T', digits};
        }
        return null;
    }

    /** Spark's read of one file (its split), the plain lines parsed here: the format's part in {@link File}. */
    abstract static class Read extends scala.runtime.AbstractFunction1 implements java.io.Serializable {
        Broadcast hadoop;                      // the Hadoop settings (rows)
        transient FileSourceScanExec scan;     // Spark's scan (read on the driver)
        transient StructType out;              // the rows' schema
        StructType required;                   // the scan's columns
        int[] picks, kinds;                    // the rows' columns: their places in required, their kinds
        private int separator, digits;         // the timestamps' (shape)
        private long offset;                   // the time zone's, in seconds (a zone of one offset)
        private java.time.ZoneId zone;         // else the zone

        final String timestampFormat;                // the format's, null where not set
        private final java.time.ZoneId zoneId;       // the session's time zone
        private final scala.Option lineSeparator;    // the format's, as its reader takes it

        Read(scala.Option timestampFormat, java.time.ZoneId zoneId, scala.Option lineSeparator) {
            this.timestampFormat = timestampFormat.isDefined() ? (String) timestampFormat.get() : null;
            this.zoneId = zoneId;
            this.lineSeparator = lineSeparator;
        }

        /** The format's reading of {@code file}, whose lines {@code text} gives (a header read off it). */
        abstract File open(PartitionedFile file, java.util.Iterator text);

        void set(FileSourceScanExec scan, StructType out, StructType required, int[] picks, int[] kinds, int[] shape) {
            this.scan = scan;
            this.out = out;
            this.required = required;
            this.picks = picks;
            this.kinds = kinds;
            separator = shape == null ? -1 : shape[0];
            digits = shape == null ? -1 : shape[1];
            java.time.zone.ZoneRules rules = zoneId.getRules();
            zone = rules.isFixedOffset() ? null : zoneId;
            offset = rules.isFixedOffset() ? rules.getOffset(java.time.Instant.EPOCH).getTotalSeconds() : 0;
        }

        public Object apply(Object split) {
            PartitionedFile file = (PartitionedFile) split;
            final HadoopFileLinesReader lines = new HadoopFileLinesReader(
                file, lineSeparator, ((SerializableConfiguration) hadoop.value()).value());
            TaskContext task = TaskContext.get();
            if (task != null) task.addTaskCompletionListener(new org.apache.spark.util.TaskCompletionListener() {
                public void onTaskCompletion(TaskContext context) {
                    lines.close();
                }
            });
            final java.util.Iterator text = CollectionConverters.asJava((scala.collection.Iterator) lines);
            final File format = open(file, text);
            return CollectionConverters.asScala(new java.util.Iterator() {
                private InternalRow next;
                private java.util.Iterator parsed;   // Spark's rows of a line not plain

                public boolean hasNext() {
                    while (next == null) {
                        if (parsed != null && parsed.hasNext()) {
                            InternalRow row = (InternalRow) parsed.next();
                            Object[] values = new Object[picks.length];
                            for (int i = 0; i < picks.length; i++)
                                values[i] = InternalRow.copyValue(row.get(picks[i], required.fields()[picks[i]].dataType()));
                            next = new GenericInternalRow(values);
                            break;
                        }
                        parsed = null;
                        if (!text.hasNext()) return false;
                        Text line = (Text) text.next();
                        next = format.plain(line.getBytes(), line.getLength());
                        if (next == null) parsed = format.spark(line);
                    }
                    return true;
                }

                public Object next() {
                    if (!hasNext()) throw new java.util.NoSuchElementException();
                    InternalRow row = next;
                    next = null;
                    return row;
                }
            });
        }

        /** One file's lines as its format reads them. */
        abstract class File {
            private final byte[] date = new byte[10];   // the last valid date read (yyyy-MM-dd), in a zone of one offset
            private long epochDay = Long.MIN_VALUE;     // and its day since the epoch (none yet: MIN_VALUE)

            /** The row of a plain line ({@code b}'s first {@code n} bytes), or null. */
            abstract InternalRow plain(byte[] b, int n);

            /** Spark's rows of any other line (of the scan's columns), as its reader parses it. */
            abstract java.util.Iterator spark(Text line);

            /** A field's value as column {@code k} reads it in the shape here, or null. */
            Object value(int k, byte[] b, int from, int to) {
                switch (kinds[k]) {
                    case STRING: return UTF8String.fromBytes(java.util.Arrays.copyOfRange(b, from, to));   // (b: the next line's too)
                    case LONG: return integer(b, from, to, 18);
                    case INT: {
                        Long v = integer(b, from, to, 9);
                        return v == null ? null : Integer.valueOf((int) v.longValue());
                    }
                    default: return timestamp(b, from, to);
                }
            }

            /**
             * Microseconds since the epoch of {@code yyyy-MM-dd HH:mm:ss[.f]} in the read's shape, or
             * null. A line's date, the same as the last one's (as in a file in time order), is not
             * checked and counted again.
             */
            private Long timestamp(byte[] b, int from, int to) {
                int n = to - from;
                if (n < 19 || b[from + 4] != '-' || b[from + 7] != '-' || b[from + 13] != ':' || b[from + 16] != ':') return null;
                byte t = b[from + 10];
                int fraction = n == 19 ? 0 : n - 20;
                if (separator == 0 ? t != ' ' && t != 'T' : t != separator) return null;
                if (n == 20 || n > 19 && b[from + 19] != '.' || (digits < 0 ? fraction > 6 : fraction != digits)) return null;
                int hour = number(b, from + 11, 2), minute = number(b, from + 14, 2), second = number(b, from + 17, 2);
                int micros = fraction == 0 ? 0 : number(b, from + 20, fraction);
                if (hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59 || micros < 0) return null;
                for (int d = fraction; d < 6; d++) micros *= 10;
                boolean same = zone == null && epochDay != Long.MIN_VALUE;
                for (int i = 0; same && i < 10; i++) same = date[i] == b[from + i];
                long days = epochDay;
                int year = 0, month = 0, day = 0;
                if (!same) {
                    year = number(b, from, 4);
                    month = number(b, from + 5, 2);
                    day = number(b, from + 8, 2);
                    if (year < 1 || month < 1 || month > 12 || day < 1 || day > java.time.YearMonth.of(year, month).lengthOfMonth())
                        return null;
                    days = java.time.LocalDate.of(year, month, day).toEpochDay();
                    if (zone == null) {
                        System.arraycopy(b, from, date, 0, 10);
                        epochDay = days;
                    }
                }
                long seconds = zone == null ? days * 86400L + hour * 3600L + minute * 60L + second - offset
                    : java.time.ZonedDateTime.of(year, month, day, hour, minute, second, 0, zone).toEpochSecond();
                return Long.valueOf(seconds * 1_000_000L + micros);
            }
        }

        /** Digits with an optional minus, at most {@code most} of them; else null. */
        static Long integer(byte[] b, int from, int to, int most) {
            boolean minus = to > from && b[from] == '-';
            if (minus) from++;
            if (to == from || to - from > most) return null;
            long v = 0;
            for (int i = from; i < to; i++) {
                int d = b[i] - '0';
                if (d < 0 || d > 9) return null;
                v = v * 10 + d;
            }
            return Long.valueOf(minus ? -v : v);
        }

        /** The {@code n} digits at {@code from} as a number, or -1. */
        private static int number(byte[] b, int from, int n) {
            int v = 0;
            for (int i = from; i < from + n; i++) {
                int d = b[i] - '0';
                if (d < 0 || d > 9) return -1;
                v = v * 10 + d;
            }
            return v;
        }
    }

    /** CSV: Spark's {@code UnivocityParser} for the lines not plain, its header and comment handling. */
    static final class Csv extends Read {
        private final CSVOptions options;
        private final StructType data;
        private final byte delimiter, quote, escape;
        private final int comment;                  // a comment line's first character, or -1
        private final byte[] nullValue;
        private int[] columns;                      // the picks' places in the file's columns

        Csv(CSVOptions options, StructType data) {
            super(options.timestampFormatInRead(), options.zoneId(), options.lineSeparatorInRead());
            this.options = options;
            this.data = data;
            delimiter = (byte) options.delimiter().charAt(0);
            quote = (byte) options.quote();
            escape = (byte) options.escape();
            comment = options.isCommentSet() ? (int) options.comment() : -1;
            nullValue = options.nullValue().getBytes(java.nio.charset.StandardCharsets.UTF_8);
        }

        void set(FileSourceScanExec scan, StructType out, StructType required, int[] picks, int[] kinds, int[] shape) {
            super.set(scan, out, required, picks, kinds, shape);
            columns = new int[picks.length];
            for (int k = 0; k < picks.length; k++) columns[k] = data.fieldIndex(required.fields()[picks[k]].name());
        }

        File open(PartitionedFile file, final java.util.Iterator text) {
            final UnivocityParser parser = new UnivocityParser(data, required, options);
            // as Spark's reader: the header (the first line of the file that is not blank or a comment)
            new CSVHeaderChecker(required, options, "CSV file: " + file.urlEncodedPath(), file.start() == 0)
                .checkHeaderColumnNames(CollectionConverters.asScala(new java.util.Iterator() {
                    public boolean hasNext() {
                        return text.hasNext();
                    }

                    public Object next() {
                        return decoded((Text) text.next());
                    }
                }), parser.tokenizer());
            final FailureSafeParser spark = new FailureSafeParser(new scala.runtime.AbstractFunction1() {
                public Object apply(Object line) {
                    return ((scala.Option) parser.parse().apply(line)).toList();
                }
            }, options.parseMode(), required, options.columnNameOfCorruptRecord());
            final String commentLine = String.valueOf(options.comment());
            final int[] starts = new int[data.fields().length], ends = new int[starts.length];
            return new File() {
                InternalRow plain(byte[] b, int n) {
                    if (n == 0 || b[0] == comment) return null;
                    int column = 0;
                    for (int i = 0; i < n; i++) {
                        byte c = b[i];
                        if (c == delimiter) {
                            if (++column == starts.length) return null;
                            ends[column - 1] = i;
                            starts[column] = i + 1;
                        } else if (c < 0x20 || c == quote || c == escape) {   // (non-ASCII bytes are negative)
                            return null;
                        }
                    }
                    if (column != starts.length - 1) return null;
                    starts[0] = 0;
                    ends[column] = n;
                    Object[] values = new Object[picks.length];
                    for (int k = 0; k < picks.length; k++) {
                        int from = starts[columns[k]], to = ends[columns[k]];
                        if (from == to || to - from == nullValue.length && same(b, from, nullValue)) return null;
                        if ((values[k] = value(k, b, from, to)) == null) return null;
                    }
                    return new GenericInternalRow(values);
                }

                java.util.Iterator spark(Text line) {
                    String s = decoded(line);
                    if (s.trim().isEmpty() || options.isCommentSet() && s.startsWith(commentLine)) return null;
                    return CollectionConverters.asJava(spark.parse(s));
                }
            };
        }

        private static String decoded(Text line) {
            return new String(line.getBytes(), 0, line.getLength(), java.nio.charset.StandardCharsets.UTF_8);
        }

        private static boolean same(byte[] b, int from, byte[] value) {
            for (int i = 0; i < value.length; i++) if (b[from + i] != value[i]) return false;
            return true;
        }
    }

    /**
     * JSON lines: Spark's {@code JacksonParser} for the lines not plain. Plain: an object on one
     * line with no whitespace, its names and string values ASCII without escapes or control
     * characters, its other values integers (no leading zero), {@code true}, {@code false} or
     * {@code null}; each column read once, by its exact name, a string (STRING, TIMESTAMP) or an
     * integer (BIGINT, INT); no other name that differs from a column's by case alone.
     */
    static final class Json extends Read {
        private final JSONOptionsInRead options;
        private byte[][] names;                      // the scan's columns, as bytes

        Json(JSONOptionsInRead options) {
            super(options.timestampFormatInRead(), options.zoneId(), options.lineSeparatorInRead());
            this.options = options;
        }

        void set(FileSourceScanExec scan, StructType out, StructType required, int[] picks, int[] kinds, int[] shape) {
            super.set(scan, out, required, picks, kinds, shape);
            names = new byte[required.fields().length][];
            for (int c = 0; c < names.length; c++)
                names[c] = required.fields()[c].name().getBytes(java.nio.charset.StandardCharsets.UTF_8);
        }

        File open(PartitionedFile file, java.util.Iterator text) {
            final JacksonParser parser = new JacksonParser(required, options, true,
                                                           scala.collection.immutable.Nil$.MODULE$);
            final scala.Function2 create = new scala.runtime.AbstractFunction2() {
                public Object apply(Object factory, Object line) {
                    return CreateJacksonParser.text((com.fasterxml.jackson.core.JsonFactory) factory, (Text) line);
                }
            };
            final scala.Function1 literal = new scala.runtime.AbstractFunction1() {
                public Object apply(Object line) {
                    return UTF8String.fromBytes(((Text) line).getBytes(), 0, ((Text) line).getLength());
                }
            };
            final FailureSafeParser spark = new FailureSafeParser(new scala.runtime.AbstractFunction1() {
                public Object apply(Object line) {
                    return parser.parse(line, create, literal);
                }
            }, options.parseMode(), required, options.columnNameOfCorruptRecord());
            final int[] at = new int[names.length];      // per column: where its value starts, or -1
            final int[] until = new int[names.length];
            final boolean[] quoted = new boolean[names.length];
            return new File() {
                InternalRow plain(byte[] b, int n) {
                    if (n < 2 || b[0] != '{' || b[n - 1] != '}' || b[1] == '}') return null;
                    java.util.Arrays.fill(at, -1);
                    int i = 1;
                    while (true) {
                        int name = string(b, i, n);   // the name's closing quote
                        if (name < 0 || name + 1 >= n || b[name + 1] != ':') return null;
                        int column = column(b, i + 1, name);
                        if (column == -2) return null;
                        int from = name + 2, to;
                        boolean text = from < n && b[from] == '"';
                        if (text) {
                            to = string(b, from, n);
                            if (to < 0) return null;
                            to++;
                        } else {
                            to = from;
                            while (to < n && b[to] != ',' && b[to] != '}') to++;
                            if (!literal(b, from, to)) return null;
                        }
                        if (column >= 0) {
                            if (at[column] >= 0) return null;   // a name twice
                            at[column] = text ? from + 1 : from;
                            until[column] = text ? to - 1 : to;
                            quoted[column] = text;
                        }
                        if (to == n - 1) break;
                        if (to >= n || b[to] != ',') return null;
                        i = to + 1;
                    }
                    Object[] values = new Object[picks.length];
                    for (int k = 0; k < picks.length; k++) {
                        int c = picks[k];
                        if (at[c] < 0 || quoted[c] != (kinds[k] == STRING || kinds[k] == TIMESTAMP)) return null;   // (literals checked)
                        if ((values[k] = value(k, b, at[c], until[c])) == null) return null;
                    }
                    return new GenericInternalRow(values);
                }

                java.util.Iterator spark(Text line) {
                    return CollectionConverters.asJava(spark.parse(line));
                }
            };
        }

        /** The closing quote of the plain string that opens at {@code from}, or -1. */
        private static int string(byte[] b, int from, int n) {
            if (from >= n || b[from] != '"') return -1;
            for (int i = from + 1; i < n; i++) {
                byte c = b[i];
                if (c == '"') return i;
                if (c < 0x20 || c == '\\') return -1;   // (non-ASCII bytes are negative)
            }
            return -1;
        }

        /** Whether {@code b[from, to)} is an integer (digits, an optional minus, no leading zero), true, false or null. */
        private static boolean literal(byte[] b, int from, int to) {
            int n = to - from;
            if (n == 4 && (b[from] == 't' && b[from + 1] == 'r' && b[from + 2] == 'u' && b[from + 3] == 'e'
                           || b[from] == 'n' && b[from + 1] == 'u' && b[from + 2] == 'l' && b[from + 3] == 'l')) return true;
            if (n == 5 && b[from] == 'f' && b[from + 1] == 'a' && b[from + 2] == 'l' && b[from + 3] == 's' && b[from + 4] == 'e')
                return true;
            int first = from < to && b[from] == '-' ? from + 1 : from;
            return integer(b, from, to, 18) != null && !(b[first] == '0' && to - first > 1);
        }

        /** The column named {@code b[from, to)}: its place, -1 for none, -2 for a name that differs from one by case alone. */
        private int column(byte[] b, int from, int to) {
            int found = -1;
            for (int c = 0; c < names.length; c++) {
                byte[] name = names[c];
                if (name.length != to - from) continue;
                int i = 0;
                while (i < name.length && name[i] == b[from + i]) i++;
                if (i == name.length) return c;
                boolean folded = true;   // from the first byte that differs
                for (; i < name.length && folded; i++)
                    folded = Character.toLowerCase((char) name[i]) == Character.toLowerCase((char) b[from + i]);
                if (folded) found = -2;
            }
            return found;
        }
    }
}
