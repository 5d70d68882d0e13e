package flinkkit;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Flink's MATCH_RECOGNIZE (ONE ROW PER MATCH) over a task's rows sorted by PARTITION BY, then
 * ORDER BY, then arrival: per partition, Flink's CEP NFA run row by row, AFTER MATCH and the
 * step budget as kit/match_recognize/flink.py's {@code NFA} (the reference, which the Python
 * runners equal) runs them. kit/match_recognize/compiled.py decides which queries it runs and
 * writes its settings:
 *
 * <pre>
 *   keys=0                       input fields of PARTITION BY
 *   states=1:1:-2:0:0|...        per NFA state: element, take, proceed (-2: none), not_take, ends
 *   start=0                      the start state
 *   define=|R2 A1,1,2 &lt;|...   per pattern element: its DEFINE in postfix (empty: always true)
 *   measures=A0,0,1|...          per measure: LAST (A) or FIRST (B) of element (-1: the whole
 *                                match), offset, input field
 *   after=P:-1                   AFTER MATCH: P(ast last row), N(ext row), F(irst) or L(ast) of an element
 *   budget=-1                    the step budget (-1: 1,000,000 + 200 per row of the partition)
 *   within=-1:0:1                WITHIN in ms (-1: none), inclusive (1: Flink's docs, t - start &gt; w
 *                                expires; 0: its 2.3 runtime, &gt;= w), the time field (ms)
 * </pre>
 *
 * DEFINE's postfix tokens: {@code R<field>} the row being classified, {@code A<element>,<n>,<field>}
 * / {@code B...} LAST / FIRST of an element's rows (element -1: the match's), {@code I<long>},
 * {@code D<double>}, {@code S<hex of UTF-8>}, {@code T}, {@code F}, {@code N} literals, then {@code + - * NEG
 * = <> < <= > >= AND OR NOT NULL NOTNULL}, with SQL's three-valued logic. A DOUBLE NaN is NULL, as the Python
 * runners read it. Output rows: the PARTITION BY values, the measures, {@code _kit_order} (the
 * match's place in its partition), and two NULLs; a partition whose run fails (AFTER MATCH onto a
 * match's first row or onto an element it lacks, the budget spent, an integer past BIGINT, a NULL
 * time under WITHIN) gives one row whose third column from the end says so, and
 * kit/match_recognize/operator.py runs the query again in Python: its error, or its rows.
 *
 * <pre>
 *   PATTERN (A B+ C), rows 10 9 8 12, B AS B.price &lt; LAST(B.price, 1) ... -> one match, rows 0..3
 * </pre>
 */
public class Matcher implements MapPartitionsFunction {
    private static final int FINAL = -1, NONE = -2;
    private final int[] keys;
    private final DataType[] types;
    private final int[] element, take, proceed;
    private final boolean[] notTake, ends;
    private final int start;
    private final Program[] define;
    private final int[][] measures;
    private final char after;
    private final int skipTo;
    private final long budget, within;
    private final boolean inclusive;
    private final int time;
    private final int[] fields;   // the input fields DEFINE and MEASURES read

    public Matcher(String settings, StructType input) {
        Map s = Internal.settings(settings);
        types = new DataType[input.fields().length];
        for (int i = 0; i < types.length; i++) types[i] = input.fields()[i].dataType();
        keys = ints((String) s.get("keys"), ",");
        String[] st = ((String) s.get("states")).split("\\|");
        element = new int[st.length]; take = new int[st.length]; proceed = new int[st.length];
        notTake = new boolean[st.length]; ends = new boolean[st.length];
        for (int i = 0; i < st.length; i++) {
            int[] v = ints(st[i], ":");
            element[i] = v[0]; take[i] = v[1]; proceed[i] = v[2]; notTake[i] = v[3] == 1; ends[i] = v[4] == 1;
        }
        start = Integer.parseInt((String) s.get("start"));
        boolean[] read = new boolean[types.length];
        String[] ds = ((String) s.get("define")).split("\\|", -1);
        define = new Program[ds.length];
        for (int i = 0; i < ds.length; i++) define[i] = ds[i].isEmpty() ? null : new Program(ds[i], read);
        String ms = (String) s.get("measures");
        String[] mm = ms.isEmpty() ? new String[0] : ms.split("\\|");
        measures = new int[mm.length][];
        for (int i = 0; i < mm.length; i++) {
            int[] v = ints(mm[i].substring(1), ",");
            measures[i] = new int[] {mm[i].charAt(0) == 'A' ? 0 : 1, v[0], v[1], v[2]};
            read[v[2]] = true;
        }
        String[] a = ((String) s.get("after")).split(":");
        after = a[0].charAt(0);
        skipTo = Integer.parseInt(a[1]);
        budget = Long.parseLong((String) s.get("budget"));
        String[] w = ((String) s.get("within")).split(":");
        within = Long.parseLong(w[0]);
        inclusive = w[1].equals("1");
        time = Integer.parseInt(w[2]);
        if (within >= 0) read[time] = true;
        int n = 0;
        for (int i = 0; i < read.length; i++) if (read[i]) n++;
        fields = new int[n];
        n = 0;
        for (int i = 0; i < read.length; i++) if (read[i]) fields[n++] = i;
    }

    private static int[] ints(String text, String sep) {
        if (text.isEmpty()) return new int[0];
        String[] parts = text.split(sep);
        int[] out = new int[parts.length];
        for (int i = 0; i < parts.length; i++) out[i] = Integer.parseInt(parts[i]);
        return out;
    }

    public Iterator call(Iterator rows) {
        return new Task(rows);
    }

    // ------------------------------------------------------------------ a task's partitions

    /** The task's output, one partition's rows at a time. */
    private final class Task implements Iterator {
        private final Iterator rows;
        private InternalRow pending;   // the first row of the next partition (a copy)
        private Iterator out = Collections.emptyIterator();

        Task(Iterator rows) {
            this.rows = rows;
        }

        public boolean hasNext() {
            while (!out.hasNext() && (pending != null || rows.hasNext())) out = partition().iterator();
            return out.hasNext();
        }

        public Object next() {
            hasNext();
            return out.next();
        }

        /** The next partition's rows read, matched: its output rows. */
        private List partition() {
            InternalRow first = pending != null ? pending : ((InternalRow) rows.next()).copy();
            pending = null;
            Object[] key = new Object[keys.length];
            for (int k = 0; k < keys.length; k++) key[k] = keyValue(first, k);
            Columns cols = new Columns();
            cols.add(first);
            while (rows.hasNext()) {
                InternalRow row = (InternalRow) rows.next();
                if (!sameKey(key, row)) {
                    pending = row.copy();
                    break;
                }
                cols.add(row);
            }
            return new Run(cols, key).output();
        }

        private boolean sameKey(Object[] key, InternalRow row) {
            for (int k = 0; k < keys.length; k++) {
                Object v = keyValue(row, k);
                if (v == null ? key[k] != null : !v.equals(key[k])) return false;
            }
            return true;
        }

        /** The k-th PARTITION BY value of {@code row} (a view of it), or null. */
        private Object keyValue(InternalRow row, int k) {
            return row.isNullAt(keys[k]) ? null : row.get(keys[k], types[keys[k]]);
        }
    }

    /** A partition's values of the fields read, by field: Long, Double, UTF8String, Boolean or
     *  null (NULL, or a NaN); a timestamp's as epoch milliseconds (Long). */
    private final class Columns {
        final Object[][] values = new Object[types.length][];
        int rows, capacity = 64;

        Columns() {
            for (int i = 0; i < fields.length; i++) values[fields[i]] = new Object[capacity];
        }

        void add(InternalRow row) {
            if (rows == capacity) {
                capacity *= 2;
                for (int i = 0; i < fields.length; i++) {
                    Object[] bigger = new Object[capacity];
                    System.arraycopy(values[fields[i]], 0, bigger, 0, rows);
                    values[fields[i]] = bigger;
                }
            }
            for (int i = 0; i < fields.length; i++) {
                int f = fields[i];
                values[f][rows] = row.isNullAt(f) ? null : value(row, f, types[f]);
            }
            rows++;
        }

        private Object value(InternalRow row, int f, DataType type) {
            if (type instanceof LongType) return Long.valueOf(row.getLong(f));
            if (type instanceof IntegerType) return Long.valueOf(row.getInt(f));
            if (type instanceof ShortType) return Long.valueOf(row.getShort(f));
            if (type instanceof ByteType) return Long.valueOf(row.getByte(f));
            if (type instanceof DoubleType || type instanceof FloatType) {
                double d = type instanceof DoubleType ? row.getDouble(f) : (double) row.getFloat(f);
                return d != d ? null : Double.valueOf(d);
            }
            if (type instanceof StringType) return row.getUTF8String(f).clone();
            if (type instanceof TimestampType || type instanceof TimestampNTZType)
                return Long.valueOf(Math.floorDiv(row.getLong(f), 1000L));
            return Boolean.valueOf(row.getBoolean(f));
        }
    }

    // ------------------------------------------------------------------ one partition's run

    /** A partial or completed match: its first row and its blocks, each an element and its
     *  first row, in pattern order (elements are unique and their rows contiguous). */
    private static final class Blocks {
        final int start, state;
        final int[] element, first;
        int end;   // a completed match's last row

        Blocks(int start, int state, int[] element, int[] first) {
            this.start = start; this.state = state; this.element = element; this.first = first;
        }
    }

    /** Per NFA step, the rows a DEFINE sees: its blocks, the current row last. */
    private static final class Step {
        int[] element, first;
        int row;
    }

    /** Flink's NFA over one partition (flink.py's NFA.advance and _Matches). */
    private final class Run {
        final Columns cols;
        final Object[] key;
        List partial = new ArrayList(), waiting = new ArrayList(), emitted = new ArrayList();
        String error;

        Run(Columns cols, Object[] key) {
            this.cols = cols;
            this.key = key;
        }

        List output() {
            run();
            List out = new ArrayList();
            if (error != null) {
                out.add(row(null, 0, error));
                return out;
            }
            for (int m = 0; m < emitted.size(); m++) out.add(row((Blocks) emitted.get(m), m, null));
            return out;
        }

        private InternalRow row(Blocks match, int order, String failure) {
            Object[] v = new Object[keys.length + measures.length + 3];
            for (int k = 0; k < keys.length; k++) v[k] = key[k];
            for (int i = 0; match != null && i < measures.length; i++) {
                int[] m = measures[i];
                int r = locate(m[0], m[1], m[2], match.element, match.first, match.element.length, match.end);
                Object value = r < 0 ? null : cols.values[m[3]][r];
                v[keys.length + i] = value == null ? null : internal(value, types[m[3]]);
            }
            v[keys.length + measures.length] = Long.valueOf(order);
            v[keys.length + measures.length + 1] = failure == null ? null : UTF8String.fromString(failure);
            return new GenericInternalRow(v);
        }

        private Object internal(Object value, DataType type) {
            if (type instanceof IntegerType) return Integer.valueOf(((Long) value).intValue());
            if (type instanceof ShortType) return Short.valueOf(((Long) value).shortValue());
            if (type instanceof ByteType) return Byte.valueOf(((Long) value).byteValue());
            if (type instanceof FloatType) return Float.valueOf(((Double) value).floatValue());
            if (type instanceof TimestampType || type instanceof TimestampNTZType)
                return Long.valueOf(((Long) value).longValue() * 1000L);
            return value;
        }

        private void run() {
            try {
                steps();
            } catch (ArithmeticException e) {
                error = "an integer out of BIGINT's range";
            }
        }

        private void steps() {
            long left = budget >= 0 ? budget : 1000000L + 200L * cols.rows;
            Step step = new Step();
            for (int r = 0; r < cols.rows; r++) {
                if (within >= 0 && !expire(r)) return;
                partial.add(new Blocks(r, start, new int[0], new int[0]));
                left -= partial.size();
                if (left < 0) {
                    error = "the step budget is spent";
                    return;
                }
                List next = new ArrayList();
                step.row = r;
                for (int p = 0; p < partial.size(); p++) {
                    Blocks b = (Blocks) partial.get(p);
                    int state = b.state;
                    while (state != NONE) {
                        int e = element[state], n = b.element.length;
                        boolean extend = n > 0 && b.element[n - 1] == e;
                        int[] be = b.element, bf = b.first;
                        if (!extend) {
                            be = new int[n + 1]; bf = new int[n + 1];
                            System.arraycopy(b.element, 0, be, 0, n);
                            System.arraycopy(b.first, 0, bf, 0, n);
                            be[n] = e; bf[n] = r;
                        }
                        step.element = be; step.first = bf;
                        boolean ok = define[e] == null || define[e].holds(step, cols);
                        int now = state;
                        state = notTake[now] && ok ? NONE : proceed[now];
                        if (ok) {
                            if (take[now] == FINAL) {
                                complete(b.start, r, be, bf);
                                break;
                            }
                            next.add(new Blocks(b.start, take[now], be, bf));
                            if (ends[now]) complete(b.start, r, be, bf);
                        }
                    }
                }
                partial = next;
                if (!waiting.isEmpty() && !release()) return;
            }
            if (within >= 0) {   // the end of input: every partial match expires
                partial = new ArrayList();
                release();
            }
        }

        /** WITHIN before row {@code r}: the partial matches that started too long before its
         *  time dropped, and the waiting matches that releases; false on an error. */
        private boolean expire(int r) {
            Object[] times = cols.values[time];
            if (times[r] == null) {
                error = "a NULL time";
                return false;
            }
            long t = ((Long) times[r]).longValue();
            List kept = new ArrayList();
            for (int p = 0; p < partial.size(); p++) {
                Object began = times[((Blocks) partial.get(p)).start];
                if (began == null) {
                    error = "a NULL time";
                    return false;
                }
                long age = t - ((Long) began).longValue();
                if (inclusive ? age <= within : age < within) kept.add(partial.get(p));
            }
            if (kept.size() == partial.size()) return true;
            partial = kept;
            return release();
        }

        private void complete(int first, int r, int[] be, int[] bf) {
            Blocks m = new Blocks(first, 0, be, bf);
            m.end = r;
            int at = waiting.size();   // ordered by first row, then completion
            while (at > 0 && ((Blocks) waiting.get(at - 1)).start > first) at--;
            waiting.add(at, m);
        }

        /** The waiting matches no earlier partial match can still precede, emitted; false on
         *  an AFTER MATCH error. */
        private boolean release() {
            while (!waiting.isEmpty()) {
                Blocks m = (Blocks) waiting.get(0);
                for (int p = 0; p < partial.size(); p++) if (((Blocks) partial.get(p)).start < m.start) return true;
                waiting.remove(0);
                int target;
                if (after == 'P') target = m.end + 1;
                else if (after == 'N') target = m.start + 1;
                else {
                    int k = 0;
                    while (k < m.element.length && m.element[k] != skipTo) k++;
                    if (k == m.element.length) {
                        error = "AFTER MATCH: no row of the element to skip to";
                        return false;
                    }
                    target = after == 'F' ? m.first[k] : (k + 1 < m.element.length ? m.first[k + 1] - 1 : m.end);
                    if (target == m.start) {
                        error = "AFTER MATCH: skip to the match's first row";
                        return false;
                    }
                }
                List kept = new ArrayList();   // AFTER MATCH: what starts before the target is dropped
                for (int p = 0; p < partial.size(); p++) if (((Blocks) partial.get(p)).start >= target) kept.add(partial.get(p));
                partial = kept;
                kept = new ArrayList();
                for (int w = 0; w < waiting.size(); w++) if (((Blocks) waiting.get(w)).start >= target) kept.add(waiting.get(w));
                waiting = kept;
                emitted.add(m);
            }
            return true;
        }
    }

    /** The row LAST (kind 0) or FIRST (1) ``n`` rows into an element's block (-1: the whole
     *  match's rows), or -1 when there is none. */
    private static int locate(int kind, int e, int n, int[] element, int[] first, int blocks, int end) {
        int from, to;
        if (e < 0) {
            if (blocks == 0) return -1;
            from = first[0];
            to = end;
        } else {
            int k = blocks - 1;
            while (k >= 0 && element[k] != e) k--;
            if (k < 0) return -1;
            from = first[k];
            to = k + 1 < blocks ? first[k + 1] - 1 : end;
        }
        int i = kind == 0 ? to - n : from + n;
        return i >= from && i <= to ? i : -1;
    }

    // ------------------------------------------------------------------ DEFINE

    /** A DEFINE condition in postfix, run on a stack of values. */
    private static final class Program implements java.io.Serializable {
        private static final int ROW = 0, NAV = 1, CONST = 2, CMP = 3, AND = 4, OR = 5, NOT = 6, NULL = 7, NOTNULL = 8,
            ARITH = 9, NEG = 10;
        final int[] op, a, b, c;
        final Object[] value;
        final Object[] stack;

        Program(String text, boolean[] read) {
            String[] t = text.split(" ");
            op = new int[t.length]; a = new int[t.length]; b = new int[t.length]; c = new int[t.length];
            value = new Object[t.length];
            stack = new Object[t.length];
            for (int i = 0; i < t.length; i++) {
                String x = t[i];
                char k = x.charAt(0);
                if (k == 'R') {
                    op[i] = ROW; a[i] = Integer.parseInt(x.substring(1)); read[a[i]] = true;
                } else if ((k == 'A' || k == 'B') && x.length() > 1 && !x.equals("AND")) {
                    int[] v = ints(x.substring(1), ",");
                    op[i] = NAV; a[i] = k == 'A' ? 0 : 1; b[i] = v[0]; c[i] = v[1]; value[i] = Integer.valueOf(v[2]);
                    read[v[2]] = true;
                } else if (k == 'I') {
                    op[i] = CONST; value[i] = Long.valueOf(Long.parseLong(x.substring(1)));
                } else if (k == 'D') {
                    op[i] = CONST; value[i] = Double.valueOf(Double.parseDouble(x.substring(1)));
                } else if (k == 'S') {
                    op[i] = CONST; value[i] = UTF8String.fromBytes(hex(x.substring(1)));
                } else if (x.equals("T") || x.equals("F")) {
                    op[i] = CONST; value[i] = Boolean.valueOf(k == 'T');
                } else if (x.equals("N")) {
                    op[i] = CONST;
                } else if (x.equals("AND")) op[i] = AND;
                else if (x.equals("OR")) op[i] = OR;
                else if (x.equals("NOT")) op[i] = NOT;
                else if (x.equals("NULL")) op[i] = NULL;
                else if (x.equals("NOTNULL")) op[i] = NOTNULL;
                else if (x.equals("NEG")) op[i] = NEG;
                else if (x.equals("+") || x.equals("-") || x.equals("*")) {
                    op[i] = ARITH;
                    a[i] = "+-*".indexOf(x.charAt(0));
                } else {
                    op[i] = CMP;
                    a[i] = x.equals("=") ? 0 : x.equals("<>") ? 1 : x.equals("<") ? 2 : x.equals("<=") ? 3 : x.equals(">") ? 4 : 5;
                    if (!x.equals(">=") && a[i] == 5) throw new IllegalArgumentException("unknown token " + x);
                }
            }
        }

        private static byte[] hex(String h) {
            byte[] out = new byte[h.length() / 2];
            for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
            return out;
        }

        boolean holds(Step s, Columns cols) {
            int top = 0;
            for (int i = 0; i < op.length; i++) {
                switch (op[i]) {
                    case ROW:
                        stack[top++] = cols.values[a[i]][s.row];
                        break;
                    case NAV: {
                        int r = locate(a[i], b[i], c[i], s.element, s.first, s.element.length, s.row);
                        stack[top++] = r < 0 ? null : cols.values[((Integer) value[i]).intValue()][r];
                        break;
                    }
                    case CONST:
                        stack[top++] = value[i];
                        break;
                    case CMP: {
                        Object y = stack[--top], x = stack[top - 1];
                        stack[top - 1] = x == null || y == null ? null : Boolean.valueOf(compare(a[i], x, y));
                        break;
                    }
                    case AND: {
                        Object y = stack[--top], x = stack[top - 1];
                        stack[top - 1] = x == Boolean.FALSE || y == Boolean.FALSE ? Boolean.FALSE
                            : x == null || y == null ? null : Boolean.TRUE;
                        break;
                    }
                    case OR: {
                        Object y = stack[--top], x = stack[top - 1];
                        stack[top - 1] = x == Boolean.TRUE || y == Boolean.TRUE ? Boolean.TRUE
                            : x == null || y == null ? null : Boolean.FALSE;
                        break;
                    }
                    case ARITH: {
                        Object y = stack[--top], x = stack[top - 1];
                        stack[top - 1] = x == null || y == null ? null : arithmetic(a[i], x, y);
                        break;
                    }
                    case NEG: {
                        Object x = stack[top - 1];
                        stack[top - 1] = x == null ? null : x instanceof Long
                            ? (Object) Long.valueOf(Math.negateExact(((Long) x).longValue()))
                            : (Object) Double.valueOf(-((Double) x).doubleValue());
                        break;
                    }
                    case NOT:
                        stack[top - 1] = stack[top - 1] == null ? null : Boolean.valueOf(stack[top - 1] == Boolean.FALSE);
                        break;
                    case NULL:
                        stack[top - 1] = Boolean.valueOf(stack[top - 1] == null);
                        break;
                    default:
                        stack[top - 1] = Boolean.valueOf(stack[top - 1] != null);
                }
            }
            return stack[0] == Boolean.TRUE;
        }

        /** {@code x + y}, {@code x - y} or {@code x * y}: of two integers exactly (an
         *  ArithmeticException past BIGINT's range: Python's integers have none, so the
         *  partition fails here and runs in Python), else in double, as Python computes them. */
        private static Object arithmetic(int how, Object x, Object y) {
            if (x instanceof Long && y instanceof Long) {
                long p = ((Long) x).longValue(), q = ((Long) y).longValue();
                return Long.valueOf(how == 0 ? Math.addExact(p, q) : how == 1 ? Math.subtractExact(p, q)
                                    : Math.multiplyExact(p, q));
            }
            double p = ((Number) x).doubleValue(), q = ((Number) y).doubleValue();
            return Double.valueOf(how == 0 ? p + q : how == 1 ? p - q : p * q);
        }

        private static boolean compare(int how, Object x, Object y) {
            int c;
            if (x instanceof Double && ((Double) x).isNaN() || y instanceof Double && ((Double) y).isNaN())
                return how == 1;   // NaN (of arithmetic) equals nothing, is ordered before nothing
            if (x instanceof Long && y instanceof Long) c = Long.compare(((Long) x).longValue(), ((Long) y).longValue());
            else if (x instanceof Long) c = mixed(((Long) x).longValue(), ((Double) y).doubleValue());
            else if (y instanceof Long) c = -mixed(((Long) y).longValue(), ((Double) x).doubleValue());
            else if (x instanceof Double) {
                double p = ((Double) x).doubleValue(), q = ((Double) y).doubleValue();
                c = p < q ? -1 : p > q ? 1 : 0;
            } else if (x instanceof UTF8String) c = ((UTF8String) x).binaryCompare((UTF8String) y);
            else c = x.equals(y) ? 0 : 1;   // booleans: = and <> only
            switch (how) {
                case 0: return c == 0;
                case 1: return c != 0;
                case 2: return c < 0;
                case 3: return c <= 0;
                case 4: return c > 0;
                default: return c >= 0;
            }
        }

        /** The sign of {@code a - d}, exactly (as Python compares an int and a float). */
        private static int mixed(long a, double d) {
            if (d >= 9.223372036854775807E18) return -1;
            if (d < -9.223372036854775808E18) return 1;
            long t = (long) d;
            if (a != t) return a < t ? -1 : 1;
            double frac = d - (double) t;
            return frac > 0 ? -1 : frac < 0 ? 1 : 0;
        }
    }
}
