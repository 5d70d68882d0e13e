package flinkkit;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeArrayData;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Flink's {@code GroupAggFunction.processElement} (kit/dynamic/aggregate.py, whose Python
 * replay is its twin) over Spark's internal rows: one pass over a task's changelog messages
 * in {@code (seq, _n)} order, every key's state in a {@link StateTable}, as a Flink task keeps it.
 *
 * <p>Input columns: the keys, the aggregates' arguments, {@code _w} (1 accumulate, -1
 * retract), {@code seq}, {@code _n}, {@code _pt}; all of a key's rows in the one partition.
 * Output: {@code _op}, the keys, one value per aggregate, {@code seq}, {@code _n + [j]},
 * {@code _pt}. Settings: {@code keys=<count>;calls=<function>:<argument column or -1>:<0|1
 * distinct>,...;ub=<0|1>}; functions {@code count}, {@code sum} and {@code avg} (of
 * integers), {@code min}, {@code max} (of values that compare: integers, strings).
 *
 * <pre>
 *   COUNT(*) GROUP BY word; Hello, World, Hello  ->  +I Hello 1 | +I World 1 | -U Hello 1, +U Hello 2
 * </pre>
 */
public class GroupAggregate implements MapPartitionsFunction {
    final int keys;
    final int[] kinds;   // each function's place in FUNCTIONS
    final boolean counting;   // every call a COUNT or a SUM (of integers), none DISTINCT: State keeps longs
    final boolean single;     // counting, and of one call: its value one long (Chain's tallies)
    static final String[] FUNCTIONS = {"count", "sum", "avg", "min", "max"};
    static final int COUNT = 0, SUM = 1, AVG = 2, MAX = 4;
    final int[] args;
    final boolean[] distinct;
    final boolean updateBefore;
    final Internal.Reader reader;
    final int w, seq, n, pt;   // the input's columns

    static final UTF8String INSERT = UTF8String.fromString("+I"), UPDATE_BEFORE = UTF8String.fromString("-U"),
        UPDATE_AFTER = UTF8String.fromString("+U"), DELETE = UTF8String.fromString("-D");

    public GroupAggregate(String settings, StructType schema) {
        this(Internal.settings(settings), schema);
    }

    /** Over {@code schema}'s rows (the layout above), or, with none, over values a {@link Chain} feeds. */
    GroupAggregate(Map s, StructType schema) {
        keys = Integer.parseInt((String) s.get("keys"));
        String calls = (String) s.get("calls");
        String[] parts = calls.length() == 0 ? new String[0] : calls.split(",");
        kinds = new int[parts.length];
        args = new int[parts.length];
        distinct = new boolean[parts.length];
        for (int i = 0; i < parts.length; i++) {
            String[] f = parts[i].split(":");
            kinds[i] = java.util.Arrays.asList(FUNCTIONS).indexOf(f[0]);
            args[i] = Integer.parseInt(f[1]);
            distinct[i] = "1".equals(f[2]);
        }
        updateBefore = "1".equals(s.get("ub"));
        boolean tallied = true;
        for (int i = 0; i < kinds.length; i++) tallied &= (kinds[i] == COUNT || kinds[i] == SUM) && !distinct[i];
        counting = tallied;
        single = tallied && kinds.length == 1;
        reader = schema == null ? null : new Internal.Reader(schema);
        int last = schema == null ? 3 : schema.fields().length - 1;
        pt = last;
        n = last - 1;
        seq = last - 2;
        w = last - 3;
    }

    /** One aggregate's accumulator: {@code add(v, w)} accumulates ({@code w > 0}) or retracts
     *  ({@code w < 0}) {@code |w|} copies of {@code v}. */
    abstract static class Acc {
        abstract void add(Object v, int w);

        abstract Object value();
    }

    static final class Count extends Acc {
        private final boolean star;
        private long count;

        Count(boolean star) {
            this.star = star;
        }

        void add(Object v, int w) {
            if (star || v != null) count += w;
        }

        Object value() {
            return Long.valueOf(count);
        }
    }

    /** SUM or AVG of integers: the total and the count of values (NULL when none), AVG a DOUBLE. */
    static final class Sum extends Acc {
        private final boolean avg;
        private long total, count;
        private double real;   // AVG sums DOUBLEs, as the replay does

        Sum(boolean avg) {
            this.avg = avg;
        }

        void add(Object v, int w) {
            if (v == null) return;
            long x = ((Number) v).longValue();
            if (avg) real += (double) x * w;   // for w = -1 the same double as real - x
            else total += x * w;
            count += w;
        }

        Object value() {
            if (count == 0) return null;
            return avg ? (Object) Double.valueOf(real / count) : (Object) Long.valueOf(total);
        }
    }

    /** MIN or MAX over the multiset of values (Flink's {@code MinWithRetractAggFunction}). */
    static final class MinMax extends Acc {
        private final boolean max;
        private final TreeMap counts = new TreeMap();

        MinMax(boolean max) {
            this.max = max;
        }

        void add(Object v, int w) {
            if (v == null) return;
            Integer before = (Integer) counts.get(v);
            int after = (before == null ? 0 : before.intValue()) + w;
            if (after == 0) counts.remove(v); else counts.put(before == null ? kept(v) : v, Integer.valueOf(after));
        }

        Object value() {
            return counts.isEmpty() ? null : max ? counts.lastKey() : counts.firstKey();
        }
    }

    /** A DISTINCT aggregate: a count per value; the inner one sees each value's 0 -> 1 and 1 -> 0. */
    static final class Distinct extends Acc {
        private final Acc inner;
        private final HashMap counts = new HashMap();

        Distinct(Acc inner) {
            this.inner = inner;
        }

        void add(Object v, int w) {
            if (v == null) return;
            Integer b = (Integer) counts.get(v);
            int before = b == null ? 0 : b.intValue(), after = before + w;
            if (after == 0) counts.remove(v); else counts.put(b == null ? kept(v) : v, Integer.valueOf(after));
            if (before == 0 && after > 0) inner.add(v, 1);
            else if (before > 0 && after == 0) inner.add(v, -1);
        }

        Object value() {
            return inner.value();
        }
    }

    /**
     * A key's state: its accumulators, its record count and the values it emitted last (of
     * tallies, their values: not kept, which spares reading them back from memory).
     */
    final class State {
        final Acc[] accs = counting ? null : new Acc[kinds.length];
        final long[] tallies = counting ? new long[2 * kinds.length] : null;   // per call: its values, their total
        long count;
        Object[] key;   // copies
        private Object[] last;

        State() {
            for (int i = 0; !counting && i < accs.length; i++) {
                int k = kinds[i];
                Acc a = k == COUNT ? (Acc) new Count(args[i] < 0) : k == SUM || k == AVG ? (Acc) new Sum(k == AVG)
                    : (Acc) new MinMax(k == MAX);
                accs[i] = distinct[i] ? new Distinct(a) : a;
            }
            if (!counting) last = values();
        }

        /** The values it emitted last. */
        Object[] last() {
            return counting ? values() : last;
        }

        /** Takes its values as the ones it emitted last, after {@link #accumulate} (emitting nothing). */
        void settle() {
            if (!counting) last = values();
        }

        Object[] values() {
            Object[] out = new Object[kinds.length];
            for (int i = 0; i < out.length; i++)
                out[i] = !counting ? accs[i].value() : kinds[i] == COUNT ? (Object) Long.valueOf(tallies[2 * i])
                    : tallies[2 * i] == 0 ? null : (Object) Long.valueOf(tallies[2 * i + 1]);
            return out;
        }

        /** Accumulates ({@code w = 1}) or retracts the arguments of row {@code r}. */
        void add(int w, InternalRow r) {
            count += w;
            for (int i = 0; i < kinds.length; i++) add(i, args[i] < 0 ? null : reader.get(r, args[i]), w);
        }

        /** The same for arguments kept apart from their row ({@code values}: one per input column, or null). */
        void add(int w, Object[] values) {
            count += w;
            for (int i = 0; i < kinds.length; i++) add(i, args[i] < 0 ? null : values[args[i]], w);
        }

        /**
         * A single call's fold ({@link #single}): {@code w} records, the argument {@code v}
         * ({@code none}: NULL, or no argument).
         */
        void tally(int w, long v, boolean none) {
            count += w;
            if (args[0] < 0 || !none) {
                tallies[0] += w;
                if (kinds[0] == SUM) tallies[1] += v * w;
            }
        }

        /** A single call's value ({@link #single}): the count, or the sum (see {@link #none}). */
        long value() {
            return kinds[0] == COUNT ? tallies[0] : tallies[1];
        }

        /** Whether a single call's value is NULL: a SUM of no values. */
        boolean none() {
            return kinds[0] == SUM && tallies[0] == 0;
        }

        private void add(int i, Object v, int w) {
            if (!counting) accs[i].add(v, w);
            else if (args[i] < 0 || v != null) {
                tallies[2 * i] += w;
                if (kinds[i] == SUM) tallies[2 * i + 1] += ((Number) v).longValue() * w;
            }
        }
    }

    /**
     * What a state that folded messages emits (the module table of kit/dynamic/aggregate.py):
     * kinds and values in turn; {@code prev}: its values before them. Records the new values.
     */
    ArrayList decide(State state, boolean first, Object[] prev) {
        ArrayList out = new ArrayList(4);
        decide(state, first, prev, out);
        return out;
    }

    /** The same, added to {@code out}. */
    void decide(State state, boolean first, Object[] prev, ArrayList out) {
        if (state.count == 0) {
            if (!first) {
                out.add(DELETE);
                out.add(prev);
            }
            return;
        }
        Object[] now = state.values();
        if (!counting) state.last = now;
        if (first) {
            out.add(INSERT);
            out.add(now);
        } else if (!Arrays.equals(prev, now)) {
            if (updateBefore) {
                out.add(UPDATE_BEFORE);
                out.add(prev);
            }
            out.add(UPDATE_AFTER);
            out.add(now);
        }
    }

    // what a single tally emits ({@link #decided}): bits, each change in this order
    static final int DELETED = 1, INSERTED = 2, UPDATED_BEFORE = 4, UPDATED_AFTER = 8;

    /**
     * {@link #decide}'s table for a state of a single tally ({@link #single}) that folded
     * messages, its one value compared as a long: {@code before}, {@code was} (NULL) its value
     * before them. The changes as bits: {@link #DELETED} (of the value before), {@link #INSERTED},
     * {@link #UPDATED_BEFORE} (the value before), {@link #UPDATED_AFTER}.
     */
    int decided(State state, boolean first, long before, boolean was) {
        if (state.count == 0) return first ? 0 : DELETED;
        if (first) return INSERTED;
        if (state.value() == before && state.none() == was) return 0;
        return (updateBefore ? UPDATED_BEFORE : 0) | UPDATED_AFTER;
    }

    /**
     * Folds a message of {@code key} (views of the input, in an array the caller may use again:
     * copied when a state is made) with
     * {@code weight} into {@code states}: its arguments read from row {@code r}, or, with no
     * row, from {@code values} (one per input column). Adds the changes it causes to
     * {@code changes} (kinds and values in turn); the key's state, or null when the message
     * retracted a key without state (ignored).
     */
    State fold(StateTable states, Object[] key, int weight, InternalRow r, Object[] values, ArrayList changes) {
        State state = (State) states.get(key);
        if (state == null && weight < 0) return null;
        boolean first = state == null;
        if (first) state = made(key);
        update(state, first, weight, r, values, changes);
        if (state.count == 0) states.remove(state.key);
        else if (first) states.put(state.key, state);
        return state;
    }

    /** The hash map key of {@code values}: the value alone, else a list of them. */
    static Object id(Object[] values) {
        return values.length == 1 ? values[0] : Arrays.asList(values);
    }

    /** A single call's argument {@code v} as {@link State#tally} takes it: a SUM's, as a long (a COUNT needs none). */
    long argument(Object v) {
        return v != null && kinds[0] == SUM ? ((Number) v).longValue() : 0;
    }

    /** A new state of {@code key} (views of a row, in an array the caller may use again: copied). */
    State made(Object[] key) {
        State state = new State();
        state.key = new Object[keys];
        for (int k = 0; k < keys; k++) state.key[k] = kept(key[k]);
        return state;
    }

    /**
     * Accumulates row {@code r} into the state of {@code key}, made if new, and emits nothing:
     * a task's start from the rows before its own ({@link State#settle} each state then).
     */
    State accumulate(StateTable states, Object[] key, InternalRow r) {
        State state = (State) states.get(key);
        if (state == null) {
            state = made(key);
            states.put(state.key, state);
        }
        state.add(1, r);
        return state;
    }

    /** {@link #fold}'s work on the key's state: a new one ({@code first}) or one in the map, that it keeps there. */
    void update(State state, boolean first, int weight, InternalRow r, Object[] values, ArrayList changes) {
        Object[] prev = state.last();
        if (r != null) state.add(weight, r); else state.add(weight, values);
        decide(state, first, prev, changes);
    }

    /** The error for a task's messages out of arrival order: the kit planned it wrong. */
    static RuntimeException outOfOrder(long seq, long before) {
        return Internal.error("internal: a task's changelog messages are not in arrival order (seq " + seq + " after "
                              + before + ")");
    }

    /** {@code v}, a string copied: a value read from a row is a view of it, and Spark reuses its rows. */
    static Object kept(Object v) {
        return v instanceof UTF8String ? ((UTF8String) v).clone() : v;
    }

    // the places most changes have (an input's _n of at most one index, then j < SMALL), made once;
    // a mini-batch's flush gives the changes of its one arrival places [0] up to [2 x its keys]
    private static final int SMALL = 4, FLUSHED = 1 << 14;
    static final int[][] ONE = new int[SMALL][];
    private static final UnsafeArrayData[] AFTER_EMPTY = new UnsafeArrayData[FLUSHED];
    private static final UnsafeArrayData[][] AFTER_ONE = new UnsafeArrayData[SMALL][SMALL];
    static final int[] EMPTY = new int[0];

    static {
        for (int j = 0; j < FLUSHED; j++) AFTER_EMPTY[j] = UnsafeArrayData.fromPrimitiveArray(new int[] {j});
        for (int a = 0; a < SMALL; a++) {
            ONE[a] = new int[] {a};
            for (int j = 0; j < SMALL; j++) AFTER_ONE[a][j] = UnsafeArrayData.fromPrimitiveArray(new int[] {a, j});
        }
    }

    /** An input row's {@code _n}. */
    static int[] place(org.apache.spark.sql.catalyst.util.ArrayData a) {
        int size = a.numElements();
        if (size == 0) return EMPTY;
        if (size == 1 && a.getInt(0) >= 0 && a.getInt(0) < SMALL) return ONE[a.getInt(0)];
        return a.toIntArray();
    }

    /** {@code n0 + [j]}: the place of an input's j-th change (Spark copies it into the row it writes). */
    static UnsafeArrayData after(int[] n0, int j) {
        if (j < FLUSHED && n0.length == 0) return AFTER_EMPTY[j];
        if (j < SMALL && n0.length == 1 && n0[0] >= 0 && n0[0] < SMALL) return AFTER_ONE[n0[0]][j];
        int[] place = Arrays.copyOf(n0, n0.length + 1);
        place[n0.length] = j;
        return UnsafeArrayData.fromPrimitiveArray(place);
    }

    /** The output row of a change: {@code _op}, the key, the values, {@code seq}, {@code n0 + [j]}, {@code _pt}. */
    static GenericInternalRow row(UTF8String op, Object[] key, Object[] values, long seq, int[] n0, int j, Long pt) {
        return new GenericInternalRow(cells(op, key, values, seq, n0, j, pt, 0));
    }

    /** The cells of {@link #row}, then {@code more} empty ones. */
    static Object[] cells(UTF8String op, Object[] key, Object[] values, long seq, int[] n0, int j, Long pt, int more) {
        Object[] row = new Object[key.length + values.length + 4 + more];
        row[0] = op;
        System.arraycopy(key, 0, row, 1, key.length);
        System.arraycopy(values, 0, row, 1 + key.length, values.length);
        int end = row.length - more;
        row[end - 3] = Long.valueOf(seq);
        row[end - 2] = after(n0, j);
        row[end - 1] = pt;
        return row;
    }

    public Iterator call(final Iterator input) {
        final StateTable states = new StateTable();
        return new Internal.Folding(input) {
            private final ArrayList changes = new ArrayList(4);
            private long last = Long.MIN_VALUE;

            void process(InternalRow r) {
                if (r.getLong(seq) < last) throw outOfOrder(r.getLong(seq), last);
                last = r.getLong(seq);
                Object[] key = new Object[keys];   // views of the row: copied when a state is made
                for (int k = 0; k < keys; k++) key[k] = reader.get(r, k);
                changes.clear();
                State state = fold(states, key, r.getInt(w), r, null, changes);
                if (state == null) return;   // a retraction of nothing: ignored
                int[] n0 = place(r.getArray(n));
                Long p = r.isNullAt(pt) ? null : Long.valueOf(r.getLong(pt));
                for (int c = 0; c < changes.size(); c += 2)
                    out.add(row((UTF8String) changes.get(c), state.key, (Object[]) changes.get(c + 1), r.getLong(seq),
                                n0, c / 2, p));
            }
        };
    }
}
