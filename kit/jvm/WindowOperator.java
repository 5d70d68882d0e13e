package flinkkit;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Flink's WindowOperator (and EvictingWindowOperator) for the built-in assigners, triggers,
 * evictors and aggregates, one key after the other over a task's rows sorted by key and
 * arrival: the JVM twin of kit/windows/operator.py, method for method, giving the same
 * tagged rows as {@code WindowResult._run}'s Python replay (kit/windows/compiled.py says
 * which specs it takes and builds its settings).
 *
 * <pre>
 *   tumbling 10, CountTrigger 2, COUNT:  a@1 (seq 0), a@3 (seq 1), a@12 (seq 2)
 *   -> firing [0, 10) count 2 after seq 1 (early, pane 0); at the end, [0, 10) on-time
 *      count 2 and [10, 20) on-time count 1 (event-time timers); fates: fired
 * </pre>
 */
public class WindowOperator implements MapPartitionsFunction {
    static final long MIN = Long.MIN_VALUE, MAX = Long.MAX_VALUE;
    static final int FIRE = 1, PURGE = 2;
    static final int ELEMENT = 0, EVENT = 1, PROCESSING = 2;
    static final UTF8String[] CAUSES = {text("element"), text("event-time timer"), text("processing-time timer")};
    static final UTF8String FIRING = text("firing"), LATE = text("late"), ELEMENT_ROW = text("element");

    // the settings, "name=value;..." (see compiled.py)
    private final String assigner, trigger, triggerRepr, evictor;
    private final int maxFiringsAtEnd;
    private final boolean hasFinalPt;   // the stream's last processing time, the clock's at the end
    private final long finalPt, endSeq;   // the stream's last arrival: its processing time, its seq
    private final boolean eventTime, evictAfter, emitFirings, emitLate, emitElements;
    private final long size, slide, offset, lateness, evictArg;
    private final int[] keys;
    private final Aggregates aggregates;
    private final int seqAt, tsAt, wmAt, ptAt, width, firingAt, lateAt, elementAt;
    private final Internal.Reader reader;   // the input columns'

    /** {@code input}: the schema of the rows {@code call} reads (Spark's internal rows, kit/jvm/Internal.java). */
    public WindowOperator(String settings, StructType input) {
        Map s = Internal.settings(settings);
        assigner = (String) s.get("assigner");
        eventTime = "1".equals(s.get("event_time"));
        size = number(s, "size");
        slide = number(s, "slide");
        offset = number(s, "offset");
        lateness = number(s, "lateness");
        trigger = (String) s.get("trigger");
        triggerRepr = (String) s.get("trigger_repr");
        maxFiringsAtEnd = (int) number(s, "max_firings_at_end");
        hasFinalPt = ((String) s.get("final_pt")).length() > 0;
        finalPt = hasFinalPt ? number(s, "final_pt") : 0;
        endSeq = number(s, "end_seq");
        evictor = (String) s.get("evictor");
        evictArg = number(s, "evict_arg");
        evictAfter = "1".equals(s.get("evict_after"));
        String kinds = "," + s.get("kinds") + ",";
        emitFirings = kinds.contains(",firing,");
        emitLate = kinds.contains(",late,");
        emitElements = kinds.contains(",element,");
        keys = ints(s, "keys");
        seqAt = (int) number(s, "seq");
        tsAt = (int) number(s, "ts");
        wmAt = (int) number(s, "wm");
        ptAt = (int) number(s, "pt");
        width = (int) number(s, "width");
        firingAt = (int) number(s, "firing_at");
        lateAt = (int) number(s, "late_at");
        elementAt = (int) number(s, "element_at");
        reader = new Internal.Reader(input);
        aggregates = new Aggregates((String) s.get("agg_functions"), (String) s.get("agg_columns"),
                                    (String) s.get("agg_kinds"), reader, false, new int[0]);
    }

    private static long number(Map s, String name) {
        return Long.parseLong((String) s.get(name));
    }

    private static int[] ints(Map s, String name) {
        return Aggregates.ints((String) s.get(name));
    }

    /** The rows of one task: for each key, its firings, then its late elements and every
     *  element's fate. The task's rows, in no order, are held in memory: grouped by key in the
     *  order keys first appear, each key's sorted by seq (runs already in arrival order cost
     *  one pass: a merge sort). */
    public Iterator call(final Iterator rows) {
        final LinkedHashMap byKey = new LinkedHashMap();
        while (rows.hasNext()) {
            InternalRow r = ((InternalRow) rows.next()).copy();   // Spark reuses the row it gives
            Object key = keyOf(r);
            List group = (List) byKey.get(key);
            if (group == null) byKey.put(key, group = new ArrayList());
            group.add(r);
        }
        final Iterator groups = byKey.values().iterator();
        return new Iterator() {
            private Iterator out = null;
            private long order = 0;

            public boolean hasNext() {
                while (out == null || !out.hasNext()) {
                    if (!groups.hasNext()) return false;
                    List group = (List) groups.next();
                    groups.remove();   // its rows are garbage once replayed
                    Collections.sort(group, new java.util.Comparator() {
                        public int compare(Object a, Object b) {
                            long x = ((InternalRow) a).getLong(seqAt), y = ((InternalRow) b).getLong(seqAt);
                            return x < y ? -1 : x > y ? 1 : 0;
                        }
                    });
                    Key key = new Key(group);
                    key.run();
                    out = key.output.iterator();
                }
                return true;
            }

            public Object next() {
                if (!hasNext()) throw new NoSuchElementException();
                return out.next();
            }

            public void remove() {
                throw new UnsupportedOperationException();
            }

            /** One key's replay; its firings numbered on in the task's order. */
            class Key extends Operator {
                Key(List group) {
                    super(group);
                }

                long nextOrder() {
                    return order++;
                }
            }
        };
    }

    /** A row's key, equal for equal keys (binary ones by content). */
    private Object keyOf(InternalRow r) {
        if (keys.length == 1) return byContent(value(r, keys[0]));
        Object[] key = new Object[keys.length];
        for (int i = 0; i < keys.length; i++) key[i] = byContent(value(r, keys[i]));
        return Arrays.asList(key);
    }

    private static Object byContent(Object v) {
        return v instanceof byte[] ? ByteBuffer.wrap((byte[]) v) : v;
    }

    // ------------------------------------------------------------------ windows

    /** A TimeWindow [start, end), or the GlobalWindow. */
    static final class Window {
        static final Window GLOBAL = new Window(0, 0, true);
        final long start, end;
        final boolean global;

        Window(long start, long end, boolean global) {
            this.start = start;
            this.end = end;
            this.global = global;
        }

        long maxTimestamp() {
            return global ? MAX : end - 1;
        }

        boolean intersects(Window o) {
            return start <= o.end && end >= o.start;
        }

        Window cover(Window o) {
            return new Window(Math.min(start, o.start), Math.max(end, o.end), false);
        }

        public boolean equals(Object o) {
            if (!(o instanceof Window)) return false;
            Window w = (Window) o;
            return global == w.global && start == w.start && end == w.end;
        }

        /** Flink's TimeWindow.hashCode(): MathUtils.longToIntWithBitMixing(start + end). */
        public int hashCode() {
            return global ? 0 : mix(start + end);
        }
    }

    public static int mix(long in) {
        in = (in ^ (in >>> 30)) * 0xbf58476d1ce4e5b9L;
        in = (in ^ (in >>> 27)) * 0x94d049bb133111ebL;
        in = in ^ (in >>> 31);
        return (int) in;
    }

    /** The iteration order of a Java HashSet holding {@code windows} inserted in this order. */
    static List javaHashOrder(List windows) {
        int capacity = 16;
        while (windows.size() > capacity * 3 / 4) capacity *= 2;
        long[] order = new long[windows.size()];   // bucket, then insertion
        for (int i = 0; i < order.length; i++) {
            int h = windows.get(i).hashCode();
            order[i] = ((long) ((h ^ (h >>> 16)) & (capacity - 1)) << 32) | i;
        }
        Arrays.sort(order);
        List out = new ArrayList(order.length);
        for (int i = 0; i < order.length; i++) out.add(windows.get((int) order[i]));
        return out;
    }

    /** TimeWindow.mergeWindows over {@code windows} and {@code fresh}: [merged window, its members
     *  in start order] for every group of more than one. The windows of a merging window set
     *  never intersect one another (each addWindow merges what intersects), so the one group,
     *  if any, is {@code fresh} with the windows it intersects. */
    static List mergeWindows(java.util.Collection windows, Window fresh) {
        List members = new ArrayList(2);
        for (Iterator it = windows.iterator(); it.hasNext();) {
            Window w = (Window) it.next();
            if (w.intersects(fresh)) members.add(w);
        }
        if (!members.contains(fresh)) members.add(fresh);   // a set: an equal window is the same window
        if (members.size() < 2) return Collections.EMPTY_LIST;
        Collections.sort(members, new java.util.Comparator() {   // stable: ties keep their order
            public int compare(Object a, Object b) {
                return Long.compare(((Window) a).start, ((Window) b).start);
            }
        });
        Window merged = fresh;
        for (int i = 0; i < members.size(); i++) merged = merged.cover((Window) members.get(i));
        return Collections.singletonList(new Object[] {merged, members});
    }

    // ------------------------------------------------------------------ timers

    static final class Timer {
        final long time, floor;   // floor: for the placement (kit/windows/operator.py's floors)
        final Window window;
        int index;                // its place in the heap

        Timer(long time, Window window, long floor) {
            this.time = time;
            this.window = window;
            this.floor = floor;
        }

        public boolean equals(Object o) {
            return o instanceof Timer && ((Timer) o).time == time && ((Timer) o).window.equals(window);
        }

        public int hashCode() {
            return 31 * Long.hashCode(time) + window.hashCode();
        }
    }

    /** One key's timers of one clock, kept as Flink's heap state backend keeps them
     *  (operator.py's _TimerHeap): a binary heap in an array from index 1, ordered by time
     *  alone, a set on (time, window) (a timer registered again keeps its first floor). Ties
     *  fire in the order the sift-ups, sift-downs and removals leave them. */
    static final class Timers {
        Timer[] queue = new Timer[16];
        int size = 0;
        final HashMap live = new HashMap();   // timer -> the one registered

        void add(long time, Window window, long floor) {
            Timer t = new Timer(time, window, floor);
            if (live.containsKey(t)) return;
            live.put(t, t);
            if (++size == queue.length) {
                Timer[] grown = new Timer[queue.length * 2];
                System.arraycopy(queue, 0, grown, 0, queue.length);
                queue = grown;
            }
            move(t, size);
            siftUp(size);
        }

        void delete(long time, Window window) {
            Timer t = (Timer) live.remove(new Timer(time, window, 0));
            if (t != null) removeAt(t.index);
        }

        Timer popUntil(long limit) {
            if (size == 0 || queue[1].time > limit) return null;
            Timer t = queue[1];
            removeAt(1);
            live.remove(t);
            return t;
        }

        void move(Timer t, int i) {
            queue[i] = t;
            t.index = i;
        }

        /** The last timer takes the hole, then moves up or down (still at the end while it sifts). */
        void removeAt(int i) {
            if (i != size) {
                Timer last = queue[size];
                move(last, i);
                Timer parent = queue[i >>> 1];
                if (parent != null && last.time < parent.time) siftUp(i);
                else siftDown(i);
            }
            queue[size--] = null;
        }

        void siftUp(int i) {
            Timer t = queue[i];
            int parent = i >>> 1;
            while (parent > 0 && t.time < queue[parent].time) {
                move(queue[parent], i);
                i = parent;
                parent >>>= 1;
            }
            move(t, i);
        }

        void siftDown(int i) {
            Timer t = queue[i];
            int child = i << 1;
            if (child + 1 <= size && queue[child + 1].time < queue[child].time) child++;
            while (child <= size && queue[child].time < t.time) {
                move(queue[child], i);
                i = child;
                child = i << 1;
                if (child + 1 <= size && queue[child + 1].time < queue[child].time) child++;
            }
            move(t, i);
        }
    }

    // ------------------------------------------------------------------ window contents

    /** A window's state: the accumulators (no evictor) or its elements (evictor), and the
     *  elements added (positions in the key's rows). */
    static final class Contents {
        long[] counts;
        Object[] accs;
        IntList elements;
        IntList seqs = new IntList();
    }

    static final class IntList {
        int[] items = new int[4];
        int size = 0;

        void add(int v) {
            if (size == items.length) items = java.util.Arrays.copyOf(items, size * 2);
            items[size++] = v;
        }

        void addAll(IntList o) {
            for (int i = 0; i < o.size; i++) add(o.items[i]);
        }

        int get(int i) {
            return items[i];
        }
    }

    // ------------------------------------------------------------------ one key

    /** The operator for one key's rows (kit/windows/operator.py's _Operator and run_key). */
    abstract class Operator {
        final List rows;
        final int n;
        final long[] ts, wm, pt, seq;
        final boolean[] hasTs, hasPt, fired, evicted;
        final String[] fates;
        final long[] lateWatermark;
        final List output = new ArrayList();
        final Object key;
        final boolean merging = "session".equals(assigner);
        long watermark = MIN, proctime = 0;
        boolean hasProctime = false;
        final Timers[] timers = {new Timers(), new Timers()};
        final HashMap triggerState = new HashMap();         // window -> Long
        final HashMap contents = new HashMap();             // state window -> Contents
        final LinkedHashMap mapping = new LinkedHashMap();  // merging: window -> state window
        final HashMap panes = new HashMap();                // window -> Long
        final HashSet onTimeDone = new HashSet();
        Window[] merged = new Window[0];                    // the windows being merged
        int cause = ELEMENT;
        // the floors of the timers registered now and of the timer firing now (operator.py's floors)
        long eventFloor = MIN, procFloor = MIN, timerFloor = 0, lastSeq = MIN;
        long timer = 0, firedAfter = 0;
        boolean hasFiredAfter = false;

        Operator(List rows) {
            this.rows = rows;
            n = rows.size();
            ts = new long[n];
            wm = new long[n];
            pt = new long[n];
            seq = new long[n];
            hasTs = new boolean[n];
            hasPt = new boolean[n];
            fired = new boolean[n];
            evicted = new boolean[n];
            fates = new String[n];
            lateWatermark = new long[n];
            for (int i = 0; i < n; i++) {
                InternalRow r = (InternalRow) rows.get(i);
                seq[i] = r.getLong(seqAt);
                hasTs[i] = !r.isNullAt(tsAt);
                ts[i] = hasTs[i] ? r.getLong(tsAt) : 0;
                wm[i] = r.isNullAt(wmAt) ? MIN : r.getLong(wmAt);
                hasPt[i] = !r.isNullAt(ptAt);
                pt[i] = hasPt[i] ? r.getLong(ptAt) : 0;
            }
            InternalRow first = (InternalRow) rows.get(0);
            if (keys.length == 0) {
                key = null;
            } else if (keys.length == 1) {
                key = value(first, keys[0]);
            } else {
                Object[] k = new Object[keys.length];
                for (int i = 0; i < keys.length; i++) k[i] = value(first, keys[i]);
                key = new GenericInternalRow(k);
            }
        }

        abstract long nextOrder();

        void run() {
            for (int i = 0; i < n; i++) {
                advanceWatermark(wm[i]);
                if (hasPt[i]) advanceProcessingTime(pt[i]);
                process(i);
                if (hasPt[i]) advanceProcessingTime(pt[i]);   // a timer it registered behind the clock: at once
            }
            finish();
        }

        // ---------------------------------------------------------- time

        /** A watermark that does not rise fires nothing (Flink emits only rising watermarks). */
        void advanceWatermark(long w) {
            if (w <= watermark) return;
            watermark = w;
            Timer t, last = null;
            Map atEnd = w == MAX ? new HashMap() : null;
            while ((t = timers[0].popUntil(watermark)) != null) {
                last = notAgain(t, last, "event-time");
                if (atEnd != null) notEndless(t.window, atEnd);
                eventFloor = Math.max(t.time, t.floor);
                procFloor = next(lastSeq);
                timerFloor = t.floor;
                onTimer(t.time, t.window, true);
            }
        }

        void register(int clock, long time, Window w) {
            timers[clock].add(time, w, clock == 0 ? eventFloor : procFloor);
        }

        void advanceProcessingTime(long time) {
            Timer t, last = null;
            while ((t = timers[1].popUntil(time)) != null) {
                last = notAgain(t, last, "processing-time");
                proctime = hasProctime ? Math.max(proctime, t.time) : t.time;
                hasProctime = true;
                eventFloor = next(watermark);
                procFloor = t.floor;
                timerFloor = t.floor;
                onTimer(t.time, t.window, false);
            }
            proctime = hasProctime ? Math.max(proctime, time) : time;
            hasProctime = true;
        }

        long currentProcessingTime() {
            if (!hasProctime) throw Internal.error(
                "this stream has no processing time: build it with proctime=Clock(...) or a proctime column");
            return proctime;
        }

        // ---------------------------------------------------------- elements

        long cleanupTime(Window w) {
            if (!eventTime) return w.maxTimestamp();
            return w.maxTimestamp() > MAX - lateness ? MAX : w.maxTimestamp() + lateness;
        }

        boolean isWindowLate(Window w) {
            return eventTime && cleanupTime(w) <= watermark;
        }

        List assign(int i) {
            long t;
            if (!"global".equals(assigner) && eventTime) {
                if (!hasTs[i] || ts[i] == MIN) throw Internal.error(assignerName()
                    + " needs an event time on every element: the record has no timestamp (use kit.stream(df, time=...))");
                t = ts[i];
            } else if (!"global".equals(assigner)) {
                if (!hasPt[i]) throw Internal.error(assignerName()
                    + " needs processing time: build the stream with proctime=Clock(...) or a proctime column");
                t = pt[i];
            } else {
                t = 0;
            }
            List out = new ArrayList();
            if ("global".equals(assigner)) {
                out.add(Window.GLOBAL);
            } else if ("tumbling".equals(assigner)) {
                long start = t - Math.floorMod(t - offset, size);
                out.add(new Window(start, start + size, false));
            } else if ("sliding".equals(assigner)) {
                long start = t - Math.floorMod(t - offset, slide);   // Flink's loop, never around the long range
                for (long k = size / slide + (size % slide == 0 ? 0 : 1); k > 0 && start > t - size; k--, start -= slide) {
                    out.add(new Window(start, start + size, false));
                }
            } else {
                out.add(new Window(t, t + size, false));
            }
            return out;
        }

        String assignerName() {
            String clock = eventTime ? "EventTime" : "ProcessingTime";
            if ("session".equals(assigner)) return clock + "SessionWindows";
            return ("tumbling".equals(assigner) ? "Tumbling" : "Sliding") + clock + "Windows";
        }

        void process(int i) {
            List windows = assign(i);
            cause = ELEMENT;
            eventFloor = next(watermark);
            procFloor = seq[i] + 1;
            lastSeq = seq[i];
            firedAfter = seq[i];
            hasFiredAfter = true;
            boolean skipped = true;
            for (int k = 0; k < windows.size(); k++) {
                Window window = (Window) windows.get(k);
                Window stateWindow;
                if (merging) {
                    window = addMergingWindow(window);
                    if (isWindowLate(window)) {
                        mapping.remove(window);
                        continue;
                    }
                    stateWindow = (Window) mapping.get(window);
                } else {
                    if (isWindowLate(window)) continue;
                    stateWindow = window;
                }
                skipped = false;
                Contents entry = (Contents) contents.get(stateWindow);
                if (entry == null) {
                    entry = new Contents();
                    if (evictor.length() > 0) entry.elements = new IntList();
                    contents.put(stateWindow, entry);
                }
                if (entry.elements != null) {
                    entry.elements.add(i);
                } else {
                    add(entry, i);
                }
                entry.seqs.add(i);
                apply(onElement(trigger, i, window), window, stateWindow);
                long cleanup = cleanupTime(window);
                if (cleanup != MAX) register(eventTime ? 0 : 1, cleanup, window);
            }
            if (skipped) {
                boolean late = eventTime && ts[i] + lateness <= watermark;
                if (late) lateWatermark[i] = watermark;
                fates[i] = late ? "late" : "no window";
            }
        }

        Window addMergingWindow(Window fresh) {
            Window result = fresh;
            boolean mergedNew = false;
            List groups = mergeWindows(mapping.keySet(), fresh);
            for (int g = 0; g < groups.size(); g++) {
                Window merged = (Window) ((Object[]) groups.get(g))[0];
                List members = (List) ((Object[]) groups.get(g))[1];
                List ordered = new ArrayList();
                List hashed = javaHashOrder(members);
                for (int i = 0; i < hashed.size(); i++) if (!hashed.get(i).equals(fresh)) ordered.add(hashed.get(i));
                if (ordered.size() < members.size()) {
                    mergedNew = true;
                    result = merged;
                }
                Window stateWindow = (Window) mapping.get(ordered.get(0));
                List mergedStateWindows = new ArrayList();
                for (int i = 0; i < ordered.size(); i++) mergedStateWindows.add(mapping.remove(ordered.get(i)));
                mapping.put(merged, stateWindow);
                mergedStateWindows.remove(stateWindow);
                if (!(ordered.contains(merged) && ordered.size() == 1)) {
                    merge(merged, ordered, stateWindow, mergedStateWindows);
                }
            }
            if (!mergedNew) mapping.put(fresh, fresh);
            return result;
        }

        void merge(Window window, List mergedWindows, Window stateWindow, List mergedStateWindows) {
            if (eventTime && cleanupTime(window) <= watermark) throw Internal.error(
                "The end timestamp of an event-time window cannot become earlier than the current watermark by "
                + "merging. Current watermark: " + watermark + " window: " + describe(window));
            // Python's `proctime or MIN_TIME`: a clock at 0 counts as none
            if (!eventTime && window.maxTimestamp() <= (hasProctime && proctime != 0 ? proctime : MIN)) throw Internal.error(
                "The end timestamp of a processing-time window cannot become earlier than the current processing "
                + "time by merging. Current processing time: " + (hasProctime ? String.valueOf(proctime) : "None")
                + " window: " + describe(window));
            merged = (Window[]) mergedWindows.toArray(new Window[0]);
            onMerge(trigger, window);
            merged = new Window[0];
            for (int i = 0; i < mergedWindows.size(); i++) {
                Window w = (Window) mergedWindows.get(i);
                clear(trigger, w);
                timers[eventTime ? 0 : 1].delete(cleanupTime(w), w);
                panes.remove(w);
                onTimeDone.remove(w);
            }
            // the merged state windows' contents, in order, into the state window's
            // (appended in place: a session growing by one element copies nothing)
            Contents target = (Contents) contents.get(stateWindow);
            Contents mergedState = null;
            IntList seqs = target == null ? new IntList() : target.seqs;
            for (int i = 0; i < mergedStateWindows.size(); i++) {
                Contents source = (Contents) contents.remove(mergedStateWindows.get(i));
                if (source == null) continue;
                mergedState = mergedState == null ? source : mergeContents(mergedState, source);
                seqs.addAll(source.seqs);
            }
            if (mergedState == null) return;
            Contents out = target == null ? mergedState : mergeContents(target, mergedState);
            out.seqs = seqs;
            contents.put(stateWindow, out);
        }

        String describe(Window w) {
            return w.global ? "GlobalWindow" : "TimeWindow{start=" + w.start + ", end=" + w.end + "}";
        }

        /** operator.py's _not_again: the timer that just fired, registered anew at its own time. */
        Timer notAgain(Timer fired, Timer last, String clock) {
            if (fired.equals(last)) throw Internal.error(
                "the " + clock + " timer at " + fired.time + " of window " + describe(fired.window) + " fires again "
                + "at once, without end: the trigger registers it anew at its own time. A processing-time trigger on "
                + "an event-time window that ends behind the processing clock does this: use a processing-time "
                + "window, or a clock within the windows' times");
            return fired;
        }

        /** operator.py's _not_endless: a window's timers that keep firing at the end of input. */
        void notEndless(Window w, Map fired) {
            int[] n = (int[]) fired.get(w);
            if (n == null) fired.put(w, n = new int[1]);
            if (++n[0] > maxFiringsAtEnd) throw Internal.error(
                "window " + describe(w) + " fired "
                + String.format(java.util.Locale.ROOT, "%,d", new Object[] {Integer.valueOf(maxFiringsAtEnd)})
                + " times at the end of input and " + triggerRepr + " registers its next timer every time, up to "
                + "the window's end (" + w.maxTimestamp() + "): when the input ends the watermark jumps to +inf "
                + "(Long.MAX_VALUE), so Flink would not finish either. Use windows that end with the data (an "
                + "event-time assigner) or a trigger without periodic timers");
        }

        // ---------------------------------------------------------- timers and firing

        void onTimer(long time, Window window, boolean eventClock) {
            Window stateWindow = window;
            if (merging) {
                stateWindow = (Window) mapping.get(window);
                if (stateWindow == null) return;   // a timer of a window merged away
            }
            cause = eventClock ? EVENT : PROCESSING;
            timer = time;
            hasFiredAfter = false;
            int result = eventClock ? onEventTime(trigger, time, window) : onProcessingTime(trigger, time, window);
            apply(result, window, stateWindow);
            if (eventClock == eventTime && time == cleanupTime(window)) clearAll(window, stateWindow);
        }

        void apply(int result, Window window, Window stateWindow) {
            if ((result & FIRE) != 0 && contents.containsKey(stateWindow)) emit(window, stateWindow);
            if ((result & PURGE) != 0) contents.remove(stateWindow);
        }

        void clearAll(Window window, Window stateWindow) {
            contents.remove(stateWindow);
            clear(trigger, window);
            triggerState.remove(window);
            mapping.remove(window);
            panes.remove(window);
        }

        void emit(Window window, Window stateWindow) {
            Contents entry = (Contents) contents.get(stateWindow);
            int count;
            Object[] outputs;
            if (entry.elements != null) {
                IntList elements = entry.elements;
                if (!evictAfter) elements = evict(elements);
                HashSet kept = new HashSet();
                for (int i = 0; i < elements.size; i++) kept.add(Integer.valueOf(elements.get(i)));
                for (int i = 0; i < entry.seqs.size; i++) {
                    if (!kept.contains(Integer.valueOf(entry.seqs.get(i)))) evicted[entry.seqs.get(i)] = true;
                }
                count = elements.size;
                for (int i = 0; i < elements.size; i++) fired[elements.get(i)] = true;
                Contents all = new Contents();
                for (int i = 0; i < elements.size; i++) add(all, elements.get(i));
                outputs = elements.size == 0 ? null : results(all);
                if (evictAfter) elements = evict(elements);
                if (elements.size > 0) {
                    Contents rest = new Contents();
                    rest.elements = elements;
                    rest.seqs = new IntList();
                    rest.seqs.addAll(elements);
                    contents.put(stateWindow, rest);
                } else {
                    contents.remove(stateWindow);
                }
            } else {
                outputs = results(entry);
                count = entry.seqs.size;
                for (int i = 0; i < count; i++) fired[entry.seqs.get(i)] = true;
            }
            Long pane = (Long) panes.get(window);
            long p = pane == null ? 0 : pane.longValue();
            panes.put(window, Long.valueOf(p + 1));
            String kind = kind(window);
            if (outputs == null || !emitFirings) return;
            Object[] row = new Object[width];
            row[0] = FIRING;
            int at = firingAt;
            if (keys.length > 0) row[at++] = key;
            row[at++] = window.global ? null : Long.valueOf(window.start);
            row[at++] = window.global ? null : Long.valueOf(window.end);
            for (int i = 0; i < outputs.length; i++) row[at++] = outputs[i];
            row[at++] = text(kind);
            row[at++] = Long.valueOf(p);
            row[at++] = CAUSES[cause];
            row[at++] = cause == ELEMENT ? null : Long.valueOf(timer);
            row[at++] = watermark == MIN || watermark == MAX ? null : Long.valueOf(watermark);
            row[at++] = hasProctime ? Long.valueOf(proctime) : null;
            row[at++] = hasFiredAfter ? Long.valueOf(firedAfter) : null;
            row[at++] = Long.valueOf(count);
            row[at++] = Long.valueOf(nextOrder());
            row[at] = cause == ELEMENT ? null : Long.valueOf(timerFloor);
            output.add(new GenericInternalRow(row));
        }

        /** early (before the window's end), on-time (the first timer firing at or after it) or late. */
        String kind(Window window) {
            if (window.global) return "early";
            boolean clockCause = eventTime ? cause == EVENT : cause == PROCESSING;
            long now;
            if (clockCause) {
                now = timer;
            } else if (eventTime) {
                now = watermark;
            } else {
                now = hasProctime ? proctime : MIN;
            }
            if (now < window.maxTimestamp()) return "early";
            boolean first = cause != ELEMENT && !onTimeDone.contains(window);
            onTimeDone.add(window);
            return first ? "on-time" : "late";
        }

        /** operator.py's finish: the clock runs to the stream's last processing time when
         *  arrivals came after the key's last one, then the watermark jumps to Long.MAX_VALUE. */
        void finish() {
            if (hasFinalPt && seq[n - 1] < endSeq) advanceProcessingTime(finalPt);
            advanceWatermark(MAX);
            boolean[] pending = new boolean[n];
            for (Iterator it = contents.values().iterator(); it.hasNext(); ) {
                IntList seqs = ((Contents) it.next()).seqs;
                for (int i = 0; i < seqs.size; i++) pending[seqs.get(i)] = true;
            }
            for (int i = 0; i < n; i++) {
                if (fates[i] != null) continue;
                fates[i] = fired[i] ? "fired" : pending[i] ? "pending" : evicted[i] ? "evicted" : "expired";
            }
            for (int i = 0; i < n; i++) {
                InternalRow r = (InternalRow) rows.get(i);
                if (emitLate && "late".equals(fates[i])) output.add(elementRow(r, LATE, lateAt, i, Long.valueOf(lateWatermark[i])));
                if (emitElements) output.add(elementRow(r, ELEMENT_ROW, elementAt, i, text(fates[i])));
            }
        }

        InternalRow elementRow(InternalRow r, UTF8String kind, int at, int i, Object last) {
            Object[] row = new Object[width];
            row[0] = kind;
            for (int c = 0; c < seqAt; c++) row[at++] = value(r, c);   // the values come first
            row[at++] = Long.valueOf(seq[i]);
            row[at] = last;
            return new GenericInternalRow(row);
        }

        // ---------------------------------------------------------- evictors

        IntList evict(IntList elements) {
            int count = elements.size;
            IntList out = new IntList();
            if ("count".equals(evictor)) {
                int from = count > evictArg ? (int) (count - evictArg) : 0;
                for (int i = from; i < count; i++) out.add(elements.get(i));
                return out;
            }
            // time: keep timestamp > max timestamp - window size (no eviction without timestamps)
            if (count == 0) return elements;
            long high = MIN;
            for (int i = 0; i < count; i++) {
                if (!hasTs[elements.get(i)]) return elements;
                high = Math.max(high, ts[elements.get(i)]);
            }
            long cutoff = high - evictArg;
            for (int i = 0; i < count; i++) if (ts[elements.get(i)] > cutoff) out.add(elements.get(i));
            return out;
        }

        // ---------------------------------------------------------- aggregates

        void add(Contents c, int i) {
            if (c.counts == null) {
                c.counts = new long[aggregates.size()];
                c.accs = new Object[aggregates.size()];
            }
            aggregates.add(c.counts, c.accs, (InternalRow) rows.get(i));
        }

        Contents mergeContents(Contents a, Contents b) {
            Contents out = new Contents();
            if (a.elements != null) {
                out.elements = new IntList();
                out.elements.addAll(a.elements);
                out.elements.addAll(b.elements);
                return out;
            }
            out.counts = new long[aggregates.size()];
            out.accs = new Object[aggregates.size()];
            aggregates.merge(a.counts, a.accs, b.counts, b.accs, out.counts, out.accs);
            return out;
        }

        Object[] results(Contents c) {
            return aggregates.results(c.counts, c.accs);
        }

        // ---------------------------------------------------------- triggers
        // "event", "processing", "count:N", "purging:<trigger>", "continuous-event:MS",
        // "continuous-processing:MS", "never" (kit/windows/triggers.py)

        long state(Window w) {
            Long v = (Long) triggerState.get(w);
            return v == null ? MIN : v.longValue();
        }

        boolean hasState(Window w) {
            return triggerState.containsKey(w);
        }

        void reduceState(String t, Window w, long v) {
            Long current = (Long) triggerState.get(w);
            long out = current == null ? v : t.startsWith("count") ? current.longValue() + v
                                                                   : Math.min(current.longValue(), v);
            triggerState.put(w, Long.valueOf(out));
        }

        long argument(String t) {
            return Long.parseLong(t.substring(t.indexOf(':') + 1));
        }

        int onElement(String t, int i, Window w) {
            if (t.startsWith("purging:")) return purging(onElement(t.substring(8), i, w));
            if ("event".equals(t)) {
                if (w.maxTimestamp() <= watermark) return FIRE;
                register(0, w.maxTimestamp(), w);
                return 0;
            }
            if ("processing".equals(t)) {
                register(1, w.maxTimestamp(), w);
                return 0;
            }
            if (t.startsWith("count:")) {
                reduceState(t, w, 1);
                if (state(w) >= argument(t)) {
                    triggerState.remove(w);
                    return FIRE;
                }
                return 0;
            }
            if (t.startsWith("continuous-event:")) {
                if (w.maxTimestamp() <= watermark) return FIRE;
                register(0, w.maxTimestamp(), w);
                if (!hasState(w)) registerNext(t, firstFire(t, ts[i]), w);
                return 0;
            }
            if (t.startsWith("continuous-processing:")) {
                if (!hasState(w)) registerNext(t, firstFire(t, currentProcessingTime()), w);
                return 0;
            }
            return 0;   // never
        }

        int onEventTime(String t, long time, Window w) {
            if (t.startsWith("purging:")) return purging(onEventTime(t.substring(8), time, w));
            if ("event".equals(t)) return time == w.maxTimestamp() ? FIRE : 0;
            if (t.startsWith("continuous-event:")) {
                if (time == w.maxTimestamp()) return FIRE;
                if (hasState(w) && state(w) == time) {
                    triggerState.remove(w);
                    registerNext(t, time, w);
                    return FIRE;
                }
            }
            return 0;
        }

        int onProcessingTime(String t, long time, Window w) {
            if (t.startsWith("purging:")) return purging(onProcessingTime(t.substring(8), time, w));
            if ("processing".equals(t)) return FIRE;
            if (t.startsWith("continuous-processing:") && hasState(w) && state(w) == time) {
                triggerState.remove(w);
                registerNext(t, time, w);
                return FIRE;
            }
            return 0;
        }

        void onMerge(String t, Window w) {
            if (t.startsWith("purging:")) {
                onMerge(t.substring(8), w);
            } else if ("event".equals(t)) {
                if (w.maxTimestamp() > watermark) register(0, w.maxTimestamp(), w);
            } else if ("processing".equals(t)) {
                if (w.maxTimestamp() > currentProcessingTime()) register(1, w.maxTimestamp(), w);
            } else if (!"never".equals(t)) {
                mergeState(t, w);
                if (t.startsWith("continuous") && hasState(w)) register(t.startsWith("continuous-event") ? 0 : 1, state(w), w);
            }
        }

        /** StateStore.merge: the merged windows' states, reduced in order, into the window's. */
        void mergeState(String t, Window w) {
            Long mergedValue = null;
            for (int i = 0; i < merged.length; i++) {
                Long v = (Long) triggerState.remove(merged[i]);
                if (v == null) continue;
                mergedValue = mergedValue == null ? v : Long.valueOf(reduce(t, mergedValue.longValue(), v.longValue()));
            }
            if (mergedValue == null) return;
            Long current = (Long) triggerState.get(w);
            triggerState.put(w, current == null ? mergedValue
                : Long.valueOf(reduce(t, current.longValue(), mergedValue.longValue())));
        }

        long reduce(String t, long a, long b) {
            return t.startsWith("count") ? a + b : Math.min(a, b);
        }

        void clear(String t, Window w) {
            if (t.startsWith("purging:")) {
                clear(t.substring(8), w);
            } else if ("event".equals(t)) {
                timers[0].delete(w.maxTimestamp(), w);
            } else if ("processing".equals(t)) {
                timers[1].delete(w.maxTimestamp(), w);
            } else if (t.startsWith("count:")) {
                triggerState.remove(w);
            } else if (t.startsWith("continuous") && hasState(w)) {
                timers[t.startsWith("continuous-event") ? 0 : 1].delete(state(w), w);
                triggerState.remove(w);
            }
        }

        int purging(int result) {
            return (result & FIRE) != 0 ? FIRE | PURGE : result;
        }

        /** The interval's multiple at or before {@code time} (Java's %, toward zero). */
        long firstFire(String t, long time) {
            return time - time % argument(t);
        }

        void registerNext(String t, long time, Window w) {
            long interval = argument(t);
            long next = Math.min(time > MAX - interval ? MAX : time + interval, w.maxTimestamp());
            reduceState(t, w, next);
            register(t.startsWith("continuous-event") ? 0 : 1, next, w);
        }
    }

    static long next(long v) {
        return v >= MAX ? MAX : v + 1;
    }

    /** Column {@code c} of {@code r}, in Spark's internal form (NULL: null). */
    Object value(InternalRow r, int c) {
        return reader.get(r, c);
    }

    static UTF8String text(String s) {
        return s == null ? null : UTF8String.fromString(s);
    }
}
