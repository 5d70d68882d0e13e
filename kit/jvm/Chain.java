package flinkkit;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Flink's group aggregates chained over one stream, each over the changelog of the one
 * before (kit/dynamic/aggregate.py's {@code chain}; the word-frequency cascade), fused into
 * one pass per chunk of arrivals: no shuffle, no sort. Each task reads one input partition
 * (a chunk of the stream, its rows in arrival order) and starts from the states the chunks
 * before it leave: an aggregate's state is a function of its input table (no TTL, no
 * mini-batch), so the first level is seeded with the earlier chunks' input rows, counted per
 * distinct keys and arguments ({@link Inputs}, collected on the driver and broadcast), and
 * each later level with the table the level below then holds, silently. Read straight from
 * the source with {@code spans}, a task takes a span of the arrivals instead, and reads the
 * stream from its start, folding the rows before its span in itself ({@link #run}).
 *
 * <p>Input columns: the first level's keys and arguments, {@code _w}, {@code seq},
 * {@code _n}, {@code _pt}; or, with {@code offsets=<each chunk's first seq>} ({@code 0} alone
 * where a task reads the stream from its start: spans, mini-batch) (and
 * {@code clock=<start ms>:<step ms>}) in the first level's settings, the keys and arguments
 * alone, read from the stream's source: each a {@code +I} whose {@code seq} is its place
 * (a one-column key that Parquet keeps in a dictionary finds its state once per column
 * chunk, {@link Internal.Memo}: the state of an insert-only input's key stays in the map).
 * Output as {@link GroupAggregate}'s, of the last level. Read from the source with
 * {@code marks=<each chunk's carried-in watermark, empty for none>} (one empty where a task
 * reads the stream from its start), each input row also has
 * {@code _g} last (the watermark it emits, as {@link ArrivalScan} reads it; with
 * {@code own=<t|l>:<shift>}, the event time as read, a TIMESTAMP or BIGINT ms, that many ms
 * ahead of it: {@link #later}, so a column read straight stays a column) and each change
 * {@code _wm} last: the watermark in force when its arrival came (the largest emitted before
 * it), as the stream's own rows have it -- a changelog that needs no join to get it. Settings:
 * each level's {@link GroupAggregate} settings, separated by {@code |}; a level after the
 * first also has {@code in=<column>,...}: its keys and arguments, as places in the output of
 * the level below (its keys, then its values). Where every level is one COUNT or SUM (the
 * cascade), a level's changes go up as longs, unboxed, and a level keyed by the value below
 * looks it up as one ({@code tally}): no arrays of values, no lists of changes.
 *
 * <pre>
 *   chunk 0: Hello World | chunk 1: Hello        COUNT(*) GROUP BY word, then COUNT(cnt) GROUP BY cnt
 *   chunk 1 starts at {Hello: 1, World: 1} and {1: 2}: -U 1 2, +U 1 1, +I 2 1 at Hello's arrival
 * </pre>
 */
public class Chain implements MapPartitionsFunction {
    final GroupAggregate[] levels;
    final int[][] inputs;          // per level after the first: its input columns in the output below
    final Broadcast before;        // Object[] per chunk: its distinct first-level inputs, weight last; or null
    final int seq, n, pt;
    final long[] offsets;          // read straight from the source: each chunk's first seq (else null)
    final long[] spans;            // and then each task's first seq, and the rows reckoned in all (else null)
    final boolean tableOnly;       // and final=1: the last level's table at the end alone, not the changes
    final long clockStart, clockStep;   // and the processing time of arrival seq: start + seq * step
    final boolean clocked;
    final Long[] marks;            // with offsets: each chunk's carried-in watermark, the changes then carry theirs
    final int own;                 // and the input's column of the watermark each row emits
    final char ownKind;            // how it is read there (own): ' ' as it is, else from the event time
    final long ownShift;
    final String ownTime;          // and the event time's name, for the error a NULL one raises
    final boolean ahead;           // and a file parsed row by row: read ahead where a task reads it alone (Inputs, one span)
    final boolean tallying;        // every level a single tally (GroupAggregate.single): its changes carry longs

    Chain(String settings, StructType schema, Broadcast before) {
        java.util.Map[] s = levelSettings(settings);
        levels = new GroupAggregate[s.length];
        for (int l = 0; l < s.length; l++) levels[l] = new GroupAggregate(s[l], l == 0 ? schema : null);
        inputs = inputs(s);
        boolean single = true;
        for (int l = 0; l < levels.length; l++) single &= levels[l].single;
        tallying = single;
        this.before = before;
        String[] starts = s[0].containsKey("offsets") ? ((String) s[0].get("offsets")).split(",") : null;
        offsets = starts == null ? null : new long[starts.length];
        for (int c = 0; offsets != null && c < starts.length; c++) offsets[c] = Long.parseLong(starts[c]);
        String[] bounds = s[0].containsKey("spans") ? ((String) s[0].get("spans")).split(",") : null;
        spans = bounds == null ? null : new long[bounds.length];
        for (int k = 0; spans != null && k < bounds.length; k++) spans[k] = Long.parseLong(bounds[k]);
        tableOnly = "1".equals(s[0].get("final"));
        ahead = "1".equals(s[0].get("ahead"));
        long[] clock = clock(s[0]);
        clocked = clock != null;
        clockStart = clocked ? clock[0] : 0;
        clockStep = clocked ? clock[1] : 0;
        marks = marks(s[0]);
        int last = schema.fields().length - 1;
        own = last;
        ownKind = ownKind(s[0]);
        ownShift = ownShift(s[0]);
        ownTime = ownTime(s[0]);
        pt = last;
        n = last - 1;
        seq = last - 2;
    }

    /**
     * The chain over {@code input} (its {@code chunks} partitions the stream's chunks), each
     * task after the first seeded from the inputs of the chunks before its own, counted by a
     * first job ({@link Inputs}) and sent to every task; as rows of {@code schema}; null when
     * those counts have more than {@code limit} rows (too many states to send every task).
     * With the arrivals numbered in the pass, the same job counts each chunk's rows and finds
     * the watermark it carries on, for the chunks' first seqs and carried-in watermarks (the
     * settings' {@code offsets} and {@code marks}, for the first chunk alone, are made whole).
     * With {@code prefixes} (the arrivals numbered in the pass: {@code offsets} and
     * {@code spans=<first seq of task 0>,...,<rows reckoned in all>}), task {@code k} reads the
     * stream from its start, folding the rows before its span in without emitting (no first
     * job), then emits for its span: seqs {@code spans[k]} up to {@code spans[k + 1]}, whatever
     * the chunks; the last task on to the end, so a reckoning of the rows that is off costs
     * balance, never rows.
     */
    public static Dataset run(org.apache.spark.sql.classic.Dataset input, int chunks, String settings,
                              StructType schema, int limit, boolean prefixes) {
        Broadcast before = null;
        if (prefixes) {
            Chain chain = new Chain(settings, input.schema(), null);
            if (chain.spans == null || chain.offsets == null) throw Internal.error("internal: prefixes need spans");
            // every task reads the stream from its start, as far as its span's end (its partitions are opened as read)
            return Internal.mapPartitions(input, chain, schema, new Internal.Turns(chain.spans.length - 1));
        }
        if (chunks > 1) {
            StructType in = input.schema();
            Chain plain = new Chain(settings, in, null);
            boolean numbered = plain.offsets != null;
            int width = Arrays.asList(in.fieldNames()).indexOf("_w");
            if (width < 0) width = Arrays.asList(in.fieldNames()).indexOf("_g");   // from the source, marked
            if (width < 0) width = in.fields().length;   // read straight from the source: the inputs alone
            StructType counted = new StructType().add("_chunk", DataTypes.IntegerType);
            for (int c = 0; c < width; c++) counted = counted.add(in.fields()[c]);
            counted = counted.add("_m", DataTypes.LongType).add("_s", DataTypes.BooleanType).add("_g", DataTypes.LongType);
            // a file parsed row by row, read ahead on a thread of its own where the chunks counted leave cores idle
            boolean ahead = plain.ahead && chunks - 1 < input.sparkSession().sparkContext().defaultParallelism();
            Inputs inputs = new Inputs(width, chunks - 1, limit, new Internal.Reader(in), plain, ahead);
            org.apache.spark.sql.classic.Dataset summary = (org.apache.spark.sql.classic.Dataset)
                Internal.mapPartitions(input, inputs, counted);
            InternalRow[] rows = (InternalRow[]) summary.queryExecution().executedPlan().executeCollect();
            if (rows.length - (numbered ? chunks - 1 : 0) > limit) return null;   // not the chunks' own rows
            Internal.Reader reader = new Internal.Reader(counted);
            ArrayList[] byChunk = new ArrayList[chunks];
            long[] sizes = new long[chunks];
            Long[] tops = new Long[chunks];
            for (int c = 0; c < chunks; c++) byChunk[c] = new ArrayList();
            for (int i = 0; i < rows.length; i++) {
                int chunk = rows[i].getInt(0);
                if (rows[i].getBoolean(width + 2)) {   // the chunk's rows and the largest watermark they emit
                    sizes[chunk] = rows[i].getLong(width + 1);
                    tops[chunk] = rows[i].isNullAt(width + 3) ? null : Long.valueOf(rows[i].getLong(width + 3));
                    continue;
                }
                Object[] entry = new Object[width + 1];
                for (int c = 0; c < width; c++) entry[c] = GroupAggregate.kept(reader.get(rows[i], c + 1));
                entry[width] = Long.valueOf(rows[i].getLong(width + 1));
                byChunk[chunk].add(entry);
            }
            Object[] value = new Object[chunks];
            for (int c = 0; c < chunks; c++) value[c] = byChunk[c].toArray();
            before = JavaSparkContext.fromSparkContext(input.sparkSession().sparkContext()).broadcast(value);
            if (numbered) settings = carriedIn(settings, sizes, tops);
        }
        return Internal.mapPartitions(input, new Chain(settings, input.schema(), before), schema);
    }

    /**
     * {@code settings} with each chunk's first seq ({@code offsets}) and carried-in watermark
     * ({@code marks}), from the rows of the chunks before it ({@code sizes}) and the largest
     * watermark each emits ({@code tops}, null: none).
     */
    static String carriedIn(String settings, long[] sizes, Long[] tops) {
        StringBuilder offsets = new StringBuilder(";offsets="), marks = new StringBuilder(";marks=");
        long seq = 0;
        Long mark = null;
        for (int c = 0; c < sizes.length; c++) {
            if (c > 0) {
                offsets.append(',');
                marks.append(',');
            }
            offsets.append(seq);
            if (mark != null) marks.append(mark.longValue());
            seq += sizes[c];
            if (tops[c] != null && (mark == null || tops[c].longValue() > mark.longValue())) mark = tops[c];
        }
        int bar = settings.indexOf('|');
        String first = bar < 0 ? settings : settings.substring(0, bar), rest = bar < 0 ? "" : settings.substring(bar);
        return first + offsets + (first.contains(";marks=") ? marks.toString() : "") + rest;
    }

    /**
     * Each chunk's distinct first-level inputs (its rows' first {@code width} columns) and how
     * many times each comes: rows {@code _chunk}, the columns, {@code _m}, {@code _s} false;
     * for the arrivals numbered in the pass also the chunk's own row ({@code _s} true): its
     * rows in {@code _m} and the largest watermark they emit in {@code _g} (read as the chain's
     * {@link #later} reads it, when marked), for each chunk's first seq and carried-in
     * watermark ({@link #carriedIn}). The last chunk is not read: no task starts after it. A
     * chunk with more than {@code limit} stops there (its counts are not complete, and too
     * many to use anyway), so the driver gets at most {@code limit + 1} rows of each.
     */
    static final class Inputs implements MapPartitionsFunction {
        private final int width, last, limit;
        private final Internal.Reader reader;
        private final Chain chain;   // its settings: whether the arrivals are numbered in the pass, marked, and how
        private final boolean ahead;

        Inputs(int width, int last, int limit, Internal.Reader reader, Chain chain, boolean ahead) {
            this.width = width;
            this.last = last;
            this.limit = limit;
            this.reader = reader;
            this.chain = chain;
            this.ahead = ahead;
        }

        public Iterator call(Iterator stream) {
            int chunk = Internal.partition();
            Iterator input = ahead && chunk != last ? Internal.ahead(stream) : stream;
            HashMap counts = new HashMap();   // the inputs (a value, or a list of them): {their count}
            Internal.Memo memo = new Internal.Memo(width == 1 ? input : null, 0);
            long rows = 0;
            Long top = null;   // the largest watermark the chunk's rows emit
            while (chunk != last && counts.size() <= limit && input.hasNext()) {
                InternalRow r = (InternalRow) input.next();
                rows++;
                if (chain.marks != null) top = later(top, r, chain.own, chain.ownKind, chain.ownShift, chain.ownTime);
                long[] count = (long[]) memo.get();
                if (count == null) {
                    Object[] values = new Object[width];
                    for (int c = 0; c < width; c++) values[c] = reader.get(r, c);
                    count = (long[]) counts.get(GroupAggregate.id(values));
                    if (count == null) {
                        for (int c = 0; c < width; c++) values[c] = GroupAggregate.kept(values[c]);
                        counts.put(GroupAggregate.id(values), count = new long[1]);
                    }
                    memo.put(count);
                }
                count[0]++;
            }
            ArrayList out = new ArrayList(counts.size() + 1);
            Iterator entries = counts.entrySet().iterator();
            while (entries.hasNext()) {
                java.util.Map.Entry e = (java.util.Map.Entry) entries.next();
                Object[] row = new Object[width + 4];
                row[0] = Integer.valueOf(chunk);
                if (width == 1) row[1] = e.getKey();
                else System.arraycopy(((java.util.List) e.getKey()).toArray(), 0, row, 1, width);
                row[width + 1] = Long.valueOf(((long[]) e.getValue())[0]);
                row[width + 2] = Boolean.FALSE;
                out.add(new GenericInternalRow(row));
            }
            if (chain.offsets != null && chunk != last) {   // the chunk's own row: its rows, the largest watermark they emit
                Object[] row = new Object[width + 4];
                row[0] = Integer.valueOf(chunk);
                row[width + 1] = Long.valueOf(rows);
                row[width + 2] = Boolean.TRUE;
                row[width + 3] = top;
                out.add(new GenericInternalRow(row));
            }
            return out.iterator();
        }
    }

    public Iterator call(final Iterator rows) {
        final int chunk = Internal.partition();   // with spans, the task
        // a file parsed row by row, read by one task alone: parsed on a thread of its own, beside the fold
        final Iterator stream = ahead && spans != null && spans.length == 2 ? Internal.ahead(rows) : rows;
        final StateTable[] states = new StateTable[levels.length];
        for (int l = 0; l < levels.length; l++) states[l] = new StateTable();
        seed(chunk, states);
        final GroupAggregate first = levels[0];
        final long offset = spans != null ? spans[chunk] : offsets == null ? 0 : offsets[chunk];
        // an insert-only stream read straight: a key's state, once made, stays in the map
        final Internal.Memo memo = new Internal.Memo(offsets != null && first.keys == 1 && stream == rows ? rows : null, 0);
        final long[] folded = {0};
        if (spans != null && tableOnly) {   // every row folded in silently, then the last level's table
            Long wm = silently(stream, Long.MAX_VALUE, states, memo, folded);
            return table(states[levels.length - 1], folded[0] - 1, wm);
        }
        // the rows before the task's span: folded in silently
        final Long start = spans != null && offset > 0 ? silently(stream, offset, states, memo, folded)
            : marks == null || spans != null ? null : marks[chunk];
        // the last span reads on to the end: its bound is where the rows were reckoned to end
        final boolean toEnd = spans == null || chunk == spans.length - 2;
        final Iterator input = toEnd ? stream : Internal.first(stream, spans[chunk + 1] - offset);
        return new Internal.Folding(input) {
            private long last = Long.MIN_VALUE, read;
            private final ArrayList changes = new ArrayList(4);
            private Long mark = start;   // the watermark in force: before the row
            private final Object[] key = new Object[first.keys];   // the row's key (views: a state copies them)
            private final ArrayList[] next = new ArrayList[levels.length];   // per level above the first: its changes
            private final Object[][] picked = new Object[levels.length][];   // and its inputs from a change below
            private final Object[][] keyed = new Object[levels.length][];    // and its keys

            void process(InternalRow r) {
                long s = offsets != null ? offset + read++ : r.getLong(seq);
                if (s <= last) throw Internal.error("internal: a chunk of the stream is not in arrival order (seq "
                                                    + s + " after " + last + ")");
                last = s;
                if (tallying) {
                    tally(r, s);
                    return;
                }
                changes.clear();
                if (offsets != null) {   // an arrival of the stream: +I, _n = [], its clock's time
                    GroupAggregate.State state = (GroupAggregate.State) memo.get();
                    if (state != null) first.update(state, false, 1, r, null, changes);   // its key's, in the map
                    else memo.put(state = first.fold(states[0], key(r, key), 1, r, null, changes));
                    Long before = mark;
                    if (marks != null) mark = later(mark, r, own, ownKind, ownShift, ownTime);
                    pass(0, state.key, changes, GroupAggregate.EMPTY, s, clocked ? Long.valueOf(clockStart + s * clockStep) : null,
                         before);
                    return;
                }
                GroupAggregate.State state = first.fold(states[0], key(r, key), r.getInt(first.w), r, null, changes);
                if (state != null)
                    pass(0, state.key, changes, GroupAggregate.place(r.getArray(n)), s,
                         r.isNullAt(pt) ? null : Long.valueOf(r.getLong(pt)), null);
            }

            /**
             * {@link #process} where every level is a single tally: the changes each makes go up
             * as a long (and whether it is NULL), boxed only in the rows that leave.
             */
            private void tally(InternalRow r, long s) {
                int weight = offsets != null ? 1 : r.getInt(first.w);
                GroupAggregate.State state = (GroupAggregate.State) memo.get();
                boolean made = false;
                if (state == null) {
                    state = (GroupAggregate.State) states[0].get(key(r, key));
                    if (state == null && weight < 0) return;   // a retraction of nothing: ignored
                    made = state == null;
                    if (made) {
                        state = first.made(key);
                        states[0].put(state.key, state);
                    }
                    memo.put(state);
                }
                Object v = first.args[0] < 0 ? null : first.reader.get(r, first.args[0]);
                if (offsets == null) {
                    tally(0, state, made, weight, first.argument(v), v == null, GroupAggregate.place(r.getArray(n)), s,
                          r.isNullAt(pt) ? null : Long.valueOf(r.getLong(pt)), null);
                    return;
                }
                Long before = mark;   // an arrival of the stream: +I, _n = [], its clock's time
                if (marks != null) mark = later(mark, r, own, ownKind, ownShift, ownTime);
                tally(0, state, made, 1, first.argument(v), v == null, GroupAggregate.EMPTY, s,
                      clocked ? Long.valueOf(clockStart + s * clockStep) : null, before);
            }

            /**
             * Folds into level {@code l}'s {@code state} ({@code made}: new, held since) a message of
             * {@code weight} and argument {@code v} ({@code none}: NULL or none), and passes on the
             * changes it makes ({@link GroupAggregate#decide}'s, of one value).
             */
            private void tally(int l, GroupAggregate.State state, boolean made, int weight, long v, boolean none,
                               int[] n0, long s, Long p, Long wm) {
                long before = state.value();
                boolean was = state.none();
                state.tally(weight, v, none);
                int changes = levels[l].decided(state, made, before, was), j = 0;
                if (state.count == 0) states[l].remove(state.key);
                if ((changes & GroupAggregate.DELETED) != 0)
                    up(l, GroupAggregate.DELETE, state.key, before, was, n0, j++, s, p, wm);
                if ((changes & GroupAggregate.INSERTED) != 0)
                    up(l, GroupAggregate.INSERT, state.key, state.value(), state.none(), n0, j++, s, p, wm);
                if ((changes & GroupAggregate.UPDATED_BEFORE) != 0)
                    up(l, GroupAggregate.UPDATE_BEFORE, state.key, before, was, n0, j++, s, p, wm);
                if ((changes & GroupAggregate.UPDATED_AFTER) != 0)
                    up(l, GroupAggregate.UPDATE_AFTER, state.key, state.value(), state.none(), n0, j, s, p, wm);
            }

            /**
             * Level {@code l}'s {@code j}-th change of an input, {@code key} and its value {@code v}
             * ({@code none}: NULL): out, from the last level; else folded into the next, whose key
             * of that value alone is looked up as a long.
             */
            private void up(int l, UTF8String op, Object[] key, long v, boolean none, int[] n0, int j, long s, Long p,
                            Long wm) {
                if (l == levels.length - 1) {
                    Object[] row = GroupAggregate.cells(op, key, new Object[] {none ? null : Long.valueOf(v)}, s, n0, j, p,
                                                        marks == null ? 0 : 1);
                    if (marks != null) row[row.length - 1] = wm;
                    out.add(new GenericInternalRow(row));
                    return;
                }
                int u = l + 1, below = key.length;   // the value's column in the change: after the keys
                GroupAggregate above = levels[u];
                int[] in = inputs[u];
                int weight = op == GroupAggregate.INSERT || op == GroupAggregate.UPDATE_AFTER ? 1 : -1;
                boolean byValue = above.keys == 1 && in[0] == below && !none;   // its key: the value alone
                GroupAggregate.State state;
                if (byValue) {
                    state = (GroupAggregate.State) states[u].get(v);
                } else {
                    if (keyed[u] == null) keyed[u] = new Object[above.keys];
                    for (int k = 0; k < above.keys; k++) keyed[u][k] = in[k] < below ? key[in[k]] : none ? null : Long.valueOf(v);
                    state = (GroupAggregate.State) states[u].get(keyed[u]);
                }
                if (state == null && weight < 0) return;   // a retraction of nothing: ignored
                boolean made = state == null;
                if (made) {
                    state = above.made(byValue ? new Object[] {Long.valueOf(v)} : keyed[u]);
                    states[u].put(state.key, state);
                }
                long a = 0;
                boolean absent = above.args[0] < 0;
                if (!absent && in[above.args[0]] == below) {
                    a = v;
                    absent = none;
                } else if (!absent) {
                    Object o = key[in[above.args[0]]];
                    absent = o == null;
                    a = above.argument(o);
                }
                tally(u, state, made, weight, a, absent, plus(n0, j), s, p, wm);
            }

            /** Level {@code l}'s changes of {@code key}: out, from the last level (with {@code wm}, when
             *  marked); else folded into the next. */
            private void pass(int l, Object[] key, ArrayList changes, int[] n0, long s, Long p, Long wm) {
                for (int c = 0; c < changes.size(); c += 2) {
                    UTF8String op = (UTF8String) changes.get(c);
                    Object[] values = (Object[]) changes.get(c + 1);
                    if (l == levels.length - 1) {
                        Object[] row = GroupAggregate.cells(op, key, values, s, n0, c / 2, p, marks == null ? 0 : 1);
                        if (marks != null) row[row.length - 1] = wm;
                        out.add(new GenericInternalRow(row));
                        continue;
                    }
                    boolean adds = op == GroupAggregate.INSERT || op == GroupAggregate.UPDATE_AFTER;
                    if (next[l + 1] == null) {
                        next[l + 1] = new ArrayList(4);
                        picked[l + 1] = new Object[inputs[l + 1].length];
                        keyed[l + 1] = new Object[levels[l + 1].keys];
                    }
                    next[l + 1].clear();   // (the level above is done with the last change's before this one)
                    GroupAggregate.State state = feed(l + 1, states[l + 1], key, values, adds ? 1 : -1, next[l + 1],
                                                      picked[l + 1], keyed[l + 1]);
                    if (state != null) pass(l + 1, state.key, next[l + 1], plus(n0, c / 2), s, p, wm);
                }
            }
        };
    }

    /**
     * Folds up to {@code rows} of the stream's first rows into the first level of {@code states}
     * without emitting (each state then settled), and the levels above from it, silently; the
     * watermark in force after them (when marked). {@code folded[0]}: the rows it folded.
     */
    private Long silently(Iterator stream, long rows, StateTable[] states, Internal.Memo memo, long[] folded) {
        GroupAggregate first = levels[0];
        Long mark = null;
        for (; folded[0] < rows && stream.hasNext(); folded[0]++) {
            InternalRow r = (InternalRow) stream.next();
            GroupAggregate.State state = (GroupAggregate.State) memo.get();
            if (state != null) state.add(1, r); else memo.put(first.accumulate(states[0], key(r), r));
            if (marks != null) mark = later(mark, r, own, ownKind, ownShift, ownTime);
        }
        Iterator made = states[0].states().iterator();
        while (made.hasNext()) ((GroupAggregate.State) made.next()).settle();
        seedAbove(states);
        return mark;
    }

    /** The last level's table ({@code states}): a {@code +I} per row, of arrival {@code s}, watermark {@code wm}. */
    private Iterator table(StateTable states, long s, Long wm) {
        ArrayList out = new ArrayList(states.size());
        Long p = clocked ? Long.valueOf(clockStart + s * clockStep) : null;
        int j = 0;
        Iterator held = states.states().iterator();
        while (held.hasNext()) {
            GroupAggregate.State state = (GroupAggregate.State) held.next();
            Object[] row = GroupAggregate.cells(GroupAggregate.INSERT, state.key, state.last(), s, GroupAggregate.EMPTY,
                                                j++, p, marks == null ? 0 : 1);
            if (marks != null) row[row.length - 1] = wm;
            out.add(new GenericInternalRow(row));
        }
        return out.iterator();
    }

    /** Each level's settings ({@code |} between levels), as maps. */
    static java.util.Map[] levelSettings(String settings) {
        String[] parts = settings.split("\\|");
        java.util.Map[] out = new java.util.Map[parts.length];
        for (int l = 0; l < parts.length; l++) out[l] = Internal.settings(parts[l]);
        return out;
    }

    /** Per level after the first, its {@code in} setting: places in the output of the level below (none for a
     *  {@code COUNT(*)} of its rows). */
    static int[][] inputs(java.util.Map[] levels) {
        int[][] out = new int[levels.length][];
        for (int l = 1; l < levels.length; l++) {
            String text = (String) levels[l].get("in");
            String[] in = text.length() == 0 ? new String[0] : text.split(",");
            out[l] = new int[in.length];
            for (int i = 0; i < in.length; i++) out[l][i] = Integer.parseInt(in[i]);
        }
        return out;
    }

    /** The first level's {@code clock=<start ms>:<step ms>}, the arrivals' processing time: {start, step}, or null. */
    static long[] clock(java.util.Map first) {
        if (!first.containsKey("clock")) return null;
        String[] clock = ((String) first.get("clock")).split(":");
        return new long[] {Long.parseLong(clock[0]), Long.parseLong(clock[1])};
    }

    /** The first level's {@code marks=<watermark>,...} (empty: none), each chunk's carried in; or null. */
    static Long[] marks(java.util.Map first) {
        if (!first.containsKey("marks")) return null;
        String[] text = ((String) first.get("marks")).split(",", -1);
        Long[] out = new Long[text.length];
        for (int c = 0; c < text.length; c++) out[c] = text[c].isEmpty() ? null : Long.valueOf(text[c]);
        return out;
    }

    /** The first level's {@code own=<t|l>:<shift>} kind ({@code ' '}: none, {@code _g} is the watermark itself). */
    static char ownKind(java.util.Map first) {
        return first.containsKey("own") ? ((String) first.get("own")).charAt(0) : ' ';
    }

    /** The first level's {@code time=<the event time's name, UTF-8 in hex>}, or null. */
    static String ownTime(java.util.Map first) {
        String hex = (String) first.get("time");
        if (hex == null) return null;
        byte[] bytes = new byte[hex.length() / 2];
        for (int i = 0; i < bytes.length; i++) bytes[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        return new String(bytes, java.nio.charset.StandardCharsets.UTF_8);
    }

    static long ownShift(java.util.Map first) {
        return first.containsKey("own") ? Long.parseLong(((String) first.get("own")).substring(2)) : 0;
    }

    /**
     * The watermark in force after row {@code r}, {@code mark} before it: the larger with the one
     * the row emits, read at {@code at} as {@code kind} says: {@code ' '} the watermark (ms) itself;
     * {@code t} (TIMESTAMP, micros) or {@code l} (BIGINT ms) the event time, the watermark
     * {@code shift} ms behind it (none below {@code Long.MIN_VALUE}, as {@code kit.stream}'s
     * {@code _candidate} says); a NULL event time (named {@code time}) fails the query, as Flink's job.
     */
    static Long later(Long mark, InternalRow r, int at, char kind, long shift, String time) {
        if (r.isNullAt(at)) {
            if (kind == ' ') return mark;
            throw Internal.error("row of the input has NULL event time in column '" + time
                                 + "'; Flink rejects such rows: filter or fill them first");
        }
        long v = r.getLong(at);
        if (kind != ' ') {
            if (kind == 't') v = Math.floorDiv(v, 1000L);
            if (v < Long.MIN_VALUE + shift) return mark;
            v -= shift;
        }
        return mark == null || v > mark.longValue() ? Long.valueOf(v) : mark;
    }

    /** The first level's key of row {@code r}, into {@code key}: views of the row, copied when a state is made. */
    private Object[] key(InternalRow r, Object[] key) {
        for (int k = 0; k < key.length; k++) key[k] = levels[0].reader.get(r, k);
        return key;
    }

    /** The same in a new array. */
    private Object[] key(InternalRow r) {
        return key(r, new Object[levels[0].keys]);
    }

    /**
     * Folds into level {@code l} the row {@code key ++ values} of the level below, with {@code weight}:
     * its inputs picked into {@code picked}, its keys (the first of them) into {@code keyed} (the fold
     * copies what it keeps).
     */
    GroupAggregate.State feed(int l, StateTable states, Object[] key, Object[] values, int weight, ArrayList changes,
                              Object[] picked, Object[] keyed) {
        int[] in = inputs[l];
        for (int i = 0; i < in.length; i++) picked[i] = in[i] < key.length ? key[in[i]] : values[in[i] - key.length];
        System.arraycopy(picked, 0, keyed, 0, keyed.length);
        return levels[l].fold(states, keyed, weight, null, picked, changes);
    }

    /** The states the chunks before {@code chunk} leave, built without emitting anything. */
    private void seed(int chunk, StateTable[] states) {
        if (before == null) return;
        Object[] byChunk = (Object[]) before.value();
        GroupAggregate first = levels[0];
        ArrayList ignored = new ArrayList();
        for (int c = 0; c < chunk && c < byChunk.length; c++) {
            Object[] entries = (Object[]) byChunk[c];
            for (int i = 0; i < entries.length; i++) {
                Object[] entry = (Object[]) entries[i];
                Object[] key = new Object[first.keys];
                System.arraycopy(entry, 0, key, 0, key.length);
                first.fold(states[0], key, (int) ((Long) entry[entry.length - 1]).longValue(), null, entry, ignored);
                ignored.clear();
            }
        }
        seedAbove(states);
    }

    /** Each level after the first seeded, silently, with the table the level below holds. */
    private void seedAbove(StateTable[] states) {
        ArrayList ignored = new ArrayList();
        for (int l = 1; l < levels.length; l++) {
            Iterator below = states[l - 1].states().iterator();
            Object[] picked = new Object[inputs[l].length], keyed = new Object[levels[l].keys];
            while (below.hasNext()) {
                GroupAggregate.State s = (GroupAggregate.State) below.next();
                feed(l, states[l], s.key, s.last(), 1, ignored, picked, keyed);
                ignored.clear();
            }
        }
    }

    /**
     * The chain with mini-batches (a {@link MiniBatchGroupAggregate} per level) over the whole
     * of {@code input}, read in one task, its partitions in turn (Flink's parallelism 1, as the
     * levels run one by one): each level's changes go to the next as its bundles flush, none
     * written out in between. The same settings as {@link #run}, with each level's mini-batch
     * ones; with {@code offsets}, the first level reads the stream's source straight; with
     * {@code ahead=1}, a thread of its own reads it (a file parsed row by row: {@link Internal#ahead}).
     */
    public static Dataset miniBatch(org.apache.spark.sql.classic.Dataset input, String settings, StructType schema) {
        return Internal.mapPartitions(input, new MiniBatch(settings, input.schema()), schema, new Internal.Turns(1));
    }

    /**
     * {@link #miniBatch}'s task. The first level runs on a thread of its own ({@link Internal.Pipe}),
     * the levels above on the task's. A level's keys are interned ({@link MiniBatchGroupAggregate.Level#known}):
     * one instance per value, which holds its state, so bundles and states compare keys by
     * reference. Read straight from the source, a one-column key that Parquet keeps in a
     * dictionary finds its key once per column chunk, and its arrivals share one message.
     *
     * <pre>
     *   size 2, ONE_PHASE, COUNT(*) GROUP BY word, then COUNT(cnt) GROUP BY cnt; words a b a:
     *   at b, level 1 flushes +I b 1, +I a 1 (its HashMap's order); level 2 holds two, flushes +I 1 2
     *   at the end, level 1 flushes -U a 1, +U a 2; level 2 +I 2 1, -U 1 2, +U 1 1
     * </pre>
     */
    static final class MiniBatch implements MapPartitionsFunction {
        final MiniBatchGroupAggregate[] levels;
        final int[][] inputs;   // per level after the first: its input columns in the output below
        final boolean[] keyed;  // and whether its keys give all of them (each argument a key's column): messages made once
        final long first;       // read straight from the source: the first arrival's seq (else -1)
        final long clockStart, clockStep;
        final boolean clocked;
        final int width;        // the first level's input values: its keys, then its arguments
        final Long[] marks;     // as Chain's: the changes carry the watermark of their seq (the chunks read in turn)
        final char ownKind;     // and the column after the inputs read as Chain's own
        final long ownShift;
        final String ownTime;
        final boolean ahead;    // the input read ahead on a thread of its own (Internal.ahead)

        MiniBatch(String settings, StructType schema) {
            java.util.Map[] s = levelSettings(settings);
            ahead = "1".equals(s[0].get("ahead"));   // as Chain's
            marks = marks(s[0]);
            ownKind = ownKind(s[0]);
            ownShift = ownShift(s[0]);
            ownTime = ownTime(s[0]);
            levels = new MiniBatchGroupAggregate[s.length];
            for (int l = 0; l < s.length; l++) {
                s[l].put("marked", marks == null ? "0" : "1");
                levels[l] = new MiniBatchGroupAggregate(s[l], l == 0 ? schema : null);
            }
            inputs = inputs(s);
            keyed = new boolean[levels.length];
            for (int l = 1; l < levels.length; l++) {
                keyed[l] = true;
                for (int i = levels[l].keys; i < inputs[l].length; i++) {
                    boolean repeats = false;
                    for (int k = 0; k < levels[l].keys; k++) repeats |= inputs[l][i] == inputs[l][k];
                    keyed[l] &= repeats;
                }
            }
            first = s[0].containsKey("offsets") ? Long.parseLong(((String) s[0].get("offsets")).split(",")[0]) : -1;
            long[] clock = clock(s[0]);
            clocked = clock != null;
            clockStart = clocked ? clock[0] : 0;
            clockStep = clocked ? clock[1] : 0;
            width = first < 0 ? levels[0].w : schema.fields().length - (marks == null ? 0 : 1);   // not _g
        }

        public Iterator call(final Iterator rows) {
            final Iterator input = ahead ? Internal.ahead(rows) : rows;
            final MiniBatchGroupAggregate.Level[] runs = new MiniBatchGroupAggregate.Level[levels.length];
            for (int l = 0; l < levels.length; l++) runs[l] = levels[l].new Level();
            final MiniBatchGroupAggregate bottom = levels[0];
            final boolean memo = first >= 0 && bottom.keys == 1 && width == 1;   // its key alone: memo the bundle key
            final Internal.Memo keys = new Internal.Memo(memo ? input : null, 0);
            final HashMap[] interned = new HashMap[levels.length];   // per level: its keys by value, one instance of each
            final Object[][] pick = new Object[levels.length][];     // per level its keys give whole: its inputs, in turn
            for (int l = 1; l < levels.length; l++) pick[l] = new Object[inputs[l].length];
            for (int l = 0; l < levels.length; l++) interned[l] = new HashMap();
            final Long[] mark = {marks == null ? null : marks[0]};   // the watermark in force, before the next row
            // the first level on a thread of its own, the levels above on the task's
            final Internal.Pipe pipe = levels.length == 1 ? null : new Internal.Pipe(new Internal.Pipe.Stage() {
                long read;

                public boolean fill(ArrayList batch) {
                    ArrayList changes = runs[0].run.out;
                    while (batch.size() < BATCH) {
                        if (!input.hasNext()) {
                            runs[0].end();
                            batch.addAll(changes);
                            return false;
                        }
                        read = read(runs[0], (InternalRow) input.next(), read, keys, interned[0], mark);
                        if (changes.isEmpty()) continue;   // (most rows: their bundle flushes later)
                        batch.addAll(changes);
                        changes.clear();
                    }
                    return true;
                }
            });
            return new MiniBatchGroupAggregate.Changes(runs[levels.length - 1].run.out) {
                long read;

                boolean step() {
                    if (pipe != null) {
                        ArrayList batch = pipe.take();
                        if (batch == null) return end(1);
                        climb(1, batch);
                    } else if (input.hasNext()) {
                        read = read(runs[0], (InternalRow) input.next(), read, keys, interned[0], mark);
                    } else {
                        return end(0);
                    }
                    return true;
                }

                /** The end of input, from level {@code from} up: each flushes, and the levels above read what it
                 *  flushed; false (no more input). */
                private boolean end(int from) {
                    for (int l = from; l < runs.length; l++) {
                        runs[l].end();
                        if (l + 1 < runs.length) climb(l + 1, runs[l].run.out);
                    }
                    return false;
                }

                /** Level {@code l - 1}'s {@code changes}, read by level {@code l}; what that flushes by the level above, and so on. */
                private void climb(int l, ArrayList changes) {
                    for (; l < runs.length; l++) {
                        MiniBatchGroupAggregate.Level above = runs[l];
                        int[] in = inputs[l];
                        for (int c = 0; c < changes.size(); c++) {
                            if (changes.get(c) instanceof MiniBatchGroupAggregate.Mark) {   // the level below's watermark: this one's too
                                above.tick((MiniBatchGroupAggregate.Mark) changes.get(c));
                                continue;
                            }
                            Object[] row = (Object[]) changes.get(c);   // _op, keys, values, seq, _n, _pt (, _wm)
                            Object[] picked = keyed[l] ? pick[l] : new Object[in.length];
                            for (int i = 0; i < in.length; i++) picked[i] = row[1 + in[i]];
                            boolean adds = row[0] == GroupAggregate.INSERT || row[0] == GroupAggregate.UPDATE_AFTER;
                            int at = row.length - (marks == null ? 3 : 4);
                            MiniBatchGroupAggregate.Key key = above.known(interned[l], picked);
                            if (keyed[l] && key.inserted == null) {   // its messages, one of each sign
                                key.inserted = new Object[] {ONE, picked.clone()};
                                key.retracted = new Object[] {MINUS_ONE, key.inserted[1]};
                            }
                            Object[] message = !keyed[l] ? new Object[] {adds ? ONE : MINUS_ONE, picked}
                                : adds ? key.inserted : key.retracted;
                            above.read(key, message, ((Long) row[at]).longValue(), (Long) row[at + 2],
                                       marks == null ? null : (Long) row[at + 3]);
                        }
                        changes.clear();
                        changes = above.run.out;
                        if (l == runs.length - 1) break;
                    }
                }
            };
        }

        /**
         * Reads input row {@code r} into the first level: a row of the stream's changelog, or an
         * arrival of the stream (a {@code +I}, its clock's time), the {@code read}-th of the task,
         * whose one-column key {@code keys} may memo, with the watermark in force {@code mark[0]}
         * (then moved on by the watermark it emits); the number of arrivals read after it.
         */
        private long read(MiniBatchGroupAggregate.Level level, InternalRow r, long read, Internal.Memo keys,
                          HashMap interned, Long[] mark) {
            MiniBatchGroupAggregate bottom = levels[0];
            Object[] in = null;
            if (first < 0) {
                level.read(r);
                return read;
            }
            long s = first + read;
            Long p = clocked ? Long.valueOf(clockStart + s * clockStep) : null;
            MiniBatchGroupAggregate.Key key = (MiniBatchGroupAggregate.Key) keys.get();
            if (key == null && width == bottom.keys) {   // the key alone: its one instance, with its message
                in = new Object[width];
                for (int c = 0; c < width; c++) in[c] = bottom.reader.get(r, c);
                key = level.known(interned, in);
                if (key.inserted == null) key.inserted = new Object[] {ONE, key.values};
                keys.put(key);
            } else if (key == null) {
                in = new Object[width];
                for (int c = 0; c < width; c++) in[c] = GroupAggregate.kept(bottom.reader.get(r, c));
                key = level.key(in);
            }
            Long wm = mark[0];
            if (marks != null) mark[0] = later(wm, r, width, ownKind, ownShift, ownTime);
            level.read(key, key.inserted != null ? key.inserted : new Object[] {ONE, in}, s, p, wm);
            return read + 1;
        }
    }

    static final Integer ONE = Integer.valueOf(1), MINUS_ONE = Integer.valueOf(-1);
    static final int BATCH = 4096;   // first-level changes handed to the levels above at a time

    /** {@code n0 + [j]}. */
    static int[] plus(int[] n0, int j) {
        if (n0.length == 0 && j < GroupAggregate.ONE.length) return GroupAggregate.ONE[j];
        int[] place = java.util.Arrays.copyOf(n0, n0.length + 1);
        place[n0.length] = j;
        return place;
    }
}
