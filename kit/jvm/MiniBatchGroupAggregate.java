package flinkkit;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeArrayData;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Flink's mini-batch group aggregation in one task (kit/dynamic/minibatch.py, whose Python
 * replay is its twin): bundle levels (ONE_PHASE; Local then Global; Local, Incremental and
 * Global for split distinct), each a {@code java.util.HashMap} keyed by the group key with
 * Flink's {@code BinaryRowData.hashCode()} as its hash, so a flush visits the keys in the
 * order Flink's bundle map does; the last level folds each key's messages with
 * {@link GroupAggregate}'s states and emits as {@code finishBundle} does.
 *
 * <p>Input: {@link GroupAggregate}'s columns, the whole input in one partition in arrival
 * order. Output: its columns with {@code _n = [place among the changes of that seq]} (in a
 * {@link Chain.MiniBatch} with {@code marked=1}, {@code _wm} last too). Extra
 * settings: {@code size} (records per bundle), {@code latency} (ms), {@code phase}
 * ({@code ONE_PHASE}, {@code TWO_PHASE}, {@code SPLIT}), {@code hash} (a code per key
 * column: {@code s} string, {@code l} bigint, {@code i} int, {@code h} smallint, {@code b}
 * tinyint, {@code z} boolean, {@code d} double, {@code f} float, {@code D} date, {@code t}
 * timestamp) and {@code split} ({@code <buckets>:<argument column>:<its code>}, SPLIT only).
 *
 * <pre>
 *   words a b a c b a c c a b d, COUNT(*) GROUP BY word, size 3, TWO_PHASE:
 *   +I b 2, +I a 2 | +I c 3, -U a 2, +U a 3 | -U b 2, +U b 3, -U a 3, +U a 4, +I d 1
 * </pre>
 */
public class MiniBatchGroupAggregate extends GroupAggregate {
    private final int size, buckets, splitColumn;
    private final long latency;
    private final boolean ticked;   // the input is a mini-batch aggregate's changes with its watermarks (_w = 0)
    final boolean marked;           // in a chain read from the source: each change also has _wm, last
    private final String phase;
    private final char[] hash;
    private final char splitType;

    public MiniBatchGroupAggregate(String settings, StructType schema) {
        this(Internal.settings(settings), schema);
    }

    /** Over {@code schema}'s rows, or, with none, over values a {@link Chain.MiniBatch} feeds. */
    MiniBatchGroupAggregate(Map s, StructType schema) {
        super(s, schema);
        size = Integer.parseInt((String) s.get("size"));
        latency = Long.parseLong((String) s.get("latency"));
        ticked = "1".equals(s.get("ticked"));
        marked = "1".equals(s.get("marked"));
        phase = (String) s.get("phase");
        hash = ((String) s.get("hash")).toCharArray();
        String[] split = ((String) s.get("split")).split(":");
        buckets = split.length == 3 ? Integer.parseInt(split[0]) : 0;
        splitColumn = split.length == 3 ? Integer.parseInt(split[1]) : -1;
        splitType = split.length == 3 ? split[2].charAt(0) : ' ';
    }

    /** A bundle map's key: the values, hashed as Flink hashes the key row. */
    static final class Key {
        final Object[] values;
        private final int hash;
        // interned: the one instance of its values in a task ({@link Level#known}); then its state at the last
        // level is kept here, not in a map, and the messages {1, values} and {-1, values} of an input its values
        // give whole made once
        boolean interned;
        Object state;
        Object[] inserted, retracted;

        Key(Object[] values, char[] types) {
            this.values = values;
            hash = rowHash(values, types);
        }

        public int hashCode() {
            return hash;
        }

        public boolean equals(Object o) {
            return o instanceof Key && Arrays.equals(values, ((Key) o).values);
        }
    }

    /** One bundle operator: its map (insertion into a map that is cleared, never shrunk) and record count. */
    final class Bundle {
        final HashMap map = new HashMap();
        final char[] types;
        int count;

        Bundle(char[] types) {
            this.types = types;
        }

        /** Adds {@code messages} of {@code key}, a list of them or one; whether the bundle is full. */
        boolean add(Key key, Object messages) {
            ArrayList held = (ArrayList) map.get(key);
            if (held == null && messages instanceof ArrayList) map.put(key, messages);   // a list flushed below: ours now
            else if (messages instanceof ArrayList) held.addAll((ArrayList) messages);
            else {
                if (held == null) map.put(key, held = new ArrayList());
                add(held, (Object[]) messages);
            }
            return ++count >= size;
        }

        /** Adds one message: a repeat of the last one held (the same values, a weight of the same sign)
         *  adds its weight to it instead, which folds the same (weights count copies). */
        private void add(ArrayList held, Object[] message) {
            int n = held.size();
            if (n > 0) {
                Object[] last = (Object[]) held.get(n - 1);
                int a = ((Integer) last[0]).intValue(), b = ((Integer) message[0]).intValue();
                if (last[1] == message[1] && (a > 0) == (b > 0)) {
                    if (last.length == 3) last[0] = Integer.valueOf(a + b);   // one made here: ours to change
                    else held.set(n - 1, new Object[] {Integer.valueOf(a + b), last[1], null});
                    return;
                }
            }
            held.add(message);
        }

        /** The bundle's entries in the map's order, as {@code {key, messages}} pairs; the bundle is emptied. */
        ArrayList take() {
            ArrayList taken = new ArrayList(map.size());
            Iterator e = map.entrySet().iterator();
            while (e.hasNext()) {
                Map.Entry entry = (Map.Entry) e.next();
                taken.add(new Object[] {entry.getKey(), entry.getValue()});
            }
            map.clear();
            count = 0;
            return taken;
        }
    }

    /** One task's replay: the bundle levels, the last level's key states (by their {@link Key}, or in
     *  it when interned), the changes so far (rows of the output's values). */
    final class Run {
        final char[] levelTypes;
        final ArrayList levels = new ArrayList();
        final HashMap states = new HashMap();
        final ArrayList out = new ArrayList();
        long placeSeq = Long.MIN_VALUE;   // the seq of the last change, and its place among that seq's
        int place = -1;

        Run() {
            levelTypes = buckets > 0 ? Arrays.copyOf(hash, keys + 1) : hash;
            if (buckets > 0) levelTypes[keys] = 'i';
            levels.add(new Bundle(levelTypes));
            if ("SPLIT".equals(phase)) levels.add(new Bundle(levelTypes));
            if (!"ONE_PHASE".equals(phase)) levels.add(new Bundle(hash));
        }

        void push(int i, Key key, Object messages, long s, Long p, Long wm) {
            if (((Bundle) levels.get(i)).add(key, messages)) flush(i, s, p, wm);
        }

        void flush(int i, long s, Long p, Long wm) {
            ArrayList taken = ((Bundle) levels.get(i)).take();
            if (i == levels.size() - 1) {
                for (int e = 0; e < taken.size(); e++) {
                    Object[] entry = (Object[]) taken.get(e);
                    fold((Key) entry[0], (ArrayList) entry[1], s, p, wm);
                }
            } else if ("SPLIT".equals(phase) && i == 1) {   // Incremental: per group key, a fresh map's order
                HashMap grouped = new HashMap();
                for (int e = 0; e < taken.size(); e++) {
                    Object[] entry = (Object[]) taken.get(e);
                    Key key = new Key(Arrays.copyOf(((Key) entry[0]).values, keys), hash);
                    ArrayList held = (ArrayList) grouped.get(key);
                    if (held == null) grouped.put(key, held = new ArrayList());
                    held.addAll((ArrayList) entry[1]);
                }
                Iterator g = new ArrayList(grouped.entrySet()).iterator();
                while (g.hasNext()) {
                    Map.Entry e = (Map.Entry) g.next();
                    push(i + 1, (Key) e.getKey(), (ArrayList) e.getValue(), s, p, wm);
                }
            } else {
                for (int e = 0; e < taken.size(); e++) {
                    Object[] entry = (Object[]) taken.get(e);
                    push(i + 1, (Key) entry[0], (ArrayList) entry[1], s, p, wm);
                }
            }
        }

        void flushAll(long s, Long p, Long wm) {
            for (int i = 0; i < levels.size(); i++)
                if (!((Bundle) levels.get(i)).map.isEmpty()) flush(i, s, p, wm);
        }

        /** {@code finishBundle} for one key of the last level, at arrival {@code s} (its time {@code p},
         *  the watermark then {@code wm}: the changes' last column, when {@code marked}). */
        void fold(Key key, ArrayList messages, long s, Long p, Long wm) {
            Object[] group = key.values;   // the last level's keys are the group's
            boolean interned = key.interned;
            State state = (State) (interned ? key.state : states.get(key));
            int from = 0;
            if (state == null && "ONE_PHASE".equals(phase)) {   // a key without state drops leading retractions
                while (from < messages.size() && ((Integer) ((Object[]) messages.get(from))[0]).intValue() < 0) from++;
                if (from == messages.size()) return;
            }
            boolean first = state == null;
            if (first) {
                state = new State();
                state.key = group;
            }
            Object[] prev = single ? null : state.last();   // a single tally's value: compared as a long
            long before = single ? state.value() : 0;
            boolean was = single && state.none();
            for (int m = from; m < messages.size(); m++) {
                Object[] message = (Object[]) messages.get(m);
                state.add(((Integer) message[0]).intValue(), (Object[]) message[1]);
            }
            ArrayList changes = single ? null : decide(state, first, prev);
            int tallied = single ? decided(state, first, before, was) : 0;
            if (interned) key.state = state.count == 0 ? null : state;
            else if (state.count == 0) states.remove(key);
            else if (first) states.put(key, state);
            for (int c = 0; changes != null && c < changes.size(); c += 2)
                emit((UTF8String) changes.get(c), group, (Object[]) changes.get(c + 1), s, p, wm);
            Object[] then = (tallied & (DELETED | UPDATED_BEFORE)) == 0 ? null : new Object[] {was ? null : Long.valueOf(before)};
            Object[] now = (tallied & (INSERTED | UPDATED_AFTER)) == 0 ? null
                : new Object[] {state.none() ? null : Long.valueOf(state.value())};
            if ((tallied & DELETED) != 0) emit(DELETE, group, then, s, p, wm);
            if ((tallied & INSERTED) != 0) emit(INSERT, group, now, s, p, wm);
            if ((tallied & UPDATED_BEFORE) != 0) emit(UPDATE_BEFORE, group, then, s, p, wm);
            if ((tallied & UPDATED_AFTER) != 0) emit(UPDATE_AFTER, group, now, s, p, wm);
        }

        /** A change out: {@code op}, the group's keys and {@code values}, at arrival {@code s} (the next place
         *  among its changes), time {@code p} (and the watermark {@code wm}, when marked). */
        private void emit(UTF8String op, Object[] group, Object[] values, long s, Long p, Long wm) {
            if (placeSeq != s) {
                placeSeq = s;
                place = -1;
            }
            place++;
            Object[] row = new Object[keys + values.length + (marked ? 5 : 4)];
            row[0] = op;
            System.arraycopy(group, 0, row, 1, keys);
            System.arraycopy(values, 0, row, 1 + keys, values.length);
            int at = 1 + keys + values.length;
            row[at] = Long.valueOf(s);
            row[at + 1] = after(EMPTY, place);
            row[at + 2] = p;
            if (marked) row[at + 3] = wm;
            out.add(row);
        }
    }

    /** A task's input side: the run, and the last message read (its seq, interval, time, watermark). */
    final class Level {
        final Run run = new Run();
        private boolean any;
        private long lastSeq, lastInterval;
        private Long lastPt, lastWm;

        /** The bundle key of input values {@code in} (the keys, then the arguments; kept). */
        Key key(Object[] in) {
            Object[] key = new Object[buckets > 0 ? keys + 1 : keys];
            System.arraycopy(in, 0, key, 0, keys);
            if (buckets > 0) key[keys] = bucket(in[splitColumn]);
            return new Key(key, run.levelTypes);
        }

        /**
         * The one instance of the bundle key of input values {@code in} (views of a row: copied when
         * new) in {@code known}, found by the key's values (with a split, by the key itself).
         */
        Key known(HashMap known, Object[] in) {
            if (buckets > 0) {   // the bucket is the key's too
                Key key = key(copies(in));
                Key found = (Key) known.get(key);
                if (found != null) return found;
                key.interned = true;
                known.put(key, key);
                return key;
            }
            Key key = (Key) known.get(keys == 1 ? in[0] : id(in.length == keys ? in : Arrays.copyOf(in, keys)));
            if (key == null) {
                key = key(copies(in));
                key.interned = true;
                known.put(id(key.values), key);
            }
            return key;
        }

        private Object[] copies(Object[] in) {
            Object[] out = new Object[in.length];
            for (int i = 0; i < in.length; i++) out[i] = kept(in[i]);
            return out;
        }

        /** Reads {@code message} ({@code {w, values}}: the keys, then the arguments, kept, with weight {@code w})
         *  of {@code key}, of arrival {@code s} at {@code p} (the watermark then {@code wm}): over a stream's
         *  arrivals (not ticked), the bundles flush first when {@code p} starts a new interval (a mini-batch
         *  watermark: {@link #tick}'s mark follows the changes); then as they fill. */
        void read(Key key, Object[] message, long s, Long p, Long wm) {
            if (any && s < lastSeq) throw outOfOrder(s, lastSeq);
            long interval = p == null ? 0 : p.longValue() - Math.floorMod(p.longValue(), latency);
            if (any && !ticked && interval != lastInterval) tick(new Mark(lastSeq, lastInterval + latency, lastWm));
            run.push(0, key, message, s, p, wm);
            any = true;
            lastSeq = s;
            lastInterval = interval;
            lastPt = p;
            lastWm = wm;
        }

        /** Reads row {@code r} of this class's input (its keys, arguments, {@code _w}, {@code seq}, {@code _n},
         *  {@code _pt}): a mini-batch watermark ({@code _w = 0}: {@link #tick}), else a message. */
        void read(InternalRow r) {
            if (r.getInt(w) == 0) {
                tick(new Mark(r.getLong(seq), r.getLong(pt), null));
                return;
            }
            Object[] in = new Object[w];   // the keys and the arguments
            for (int c = 0; c < w; c++) in[c] = kept(reader.get(r, c));
            read(key(in), new Object[] {Integer.valueOf(r.getInt(w)), in}, r.getLong(seq),
                 r.isNullAt(pt) ? null : Long.valueOf(r.getLong(pt)), null);
        }

        /** A mini-batch watermark ({@link Mark}): every bundle flushes, and the mark follows the changes,
         *  for the level above. */
        void tick(Mark mark) {
            run.flushAll(mark.s, Long.valueOf(mark.at), mark.wm);
            run.out.add(mark);
        }

        /** The end of input: every bundle flushes. */
        void end() {
            if (any) run.flushAll(lastSeq, lastPt, lastWm);
        }
    }

    /** A mini-batch watermark right after arrival {@code s}, at interval start {@code at}; the stream's
     *  watermark at that arrival {@code wm} (or null). */
    static final class Mark {
        final long s, at;
        final Long wm;

        Mark(long s, long at, Long wm) {
            this.s = s;
            this.at = at;
            this.wm = wm;
        }
    }

    /**
     * The changes the bundles flush ({@code out}), as rows, in turn, the marks of {@link Level#tick}
     * left out: {@link #step} reads on (an input row, or the end of input) only when all are read,
     * so a task holds one bundle's changes at a time, not its whole output.
     */
    abstract static class Changes implements Iterator {
        private final ArrayList out;
        private int next;   // the next of out to return
        private boolean done;

        Changes(ArrayList out) {
            this.out = out;
        }

        /** Reads on, adding what flushes to {@code out}; false once the end of input has flushed. */
        abstract boolean step();

        public boolean hasNext() {
            while (true) {
                while (next < out.size() && out.get(next) instanceof Mark) next++;
                if (next < out.size() || done) return next < out.size();
                out.clear();
                next = 0;
                done = !step();
            }
        }

        public Object next() {
            if (!hasNext()) throw new java.util.NoSuchElementException();
            return new GenericInternalRow((Object[]) out.get(next++));
        }
    }

    /** The task's changes as the bundles flush them. */
    public Iterator call(final Iterator input) {
        final Level level = new Level();
        return new Changes(level.run.out) {
            boolean step() {
                if (!input.hasNext()) {
                    level.end();
                    return false;
                }
                level.read((InternalRow) input.next());
                return true;
            }
        };
    }

    /** {@code MOD(HASH_CODE(v), buckets)} as Flink 2.3 computes it: Java's {@code hashCode()}, Java's {@code %}. */
    private Integer bucket(Object v) {
        if (v == null) return null;
        int h;
        switch (splitType) {
            case 's': h = v.toString().hashCode(); break;
            case 'z': h = ((Boolean) v).booleanValue() ? 1231 : 1237; break;
            case 'd': {
                long bits = Double.doubleToRawLongBits(((Double) v).doubleValue());
                h = (int) (bits ^ (bits >>> 32));
                break;
            }
            case 'l': {
                long bits = ((Long) v).longValue();
                h = (int) (bits ^ (bits >>> 32));
                break;
            }
            default: h = ((Number) v).intValue();
        }
        return Integer.valueOf(h % buckets);
    }

    // ------------------------------------------------------------- Flink's hashes

    /** {@code BinaryRowData.hashCode()} of a key row of {@code values} (kit/dynamic/minibatch.py). */
    static int rowHash(Object[] values, char[] types) {
        int arity = values.length;
        int header = ((arity + 63 + 8) / 64) * 8, fixed = header + 8 * arity;
        byte[][] tails = new byte[arity][];
        int var = 0;
        for (int i = 0; i < arity; i++) {
            if (values[i] instanceof UTF8String && ((UTF8String) values[i]).numBytes() > 7) {
                tails[i] = ((UTF8String) values[i]).getBytes();
                var += (tails[i].length + 7) / 8 * 8;
            }
        }
        byte[] row = new byte[fixed + var];
        int at = fixed;
        for (int i = 0; i < arity; i++) {
            Object v = values[i];
            int slot = header + 8 * i;
            if (v == null) {
                row[(i + 8) >> 3] |= (byte) (1 << ((i + 8) & 7));
            } else if (tails[i] != null) {
                putLong(row, slot, ((long) at << 32) | tails[i].length);
                System.arraycopy(tails[i], 0, row, at, tails[i].length);
                at += (tails[i].length + 7) / 8 * 8;
            } else if (v instanceof UTF8String) {
                byte[] b = ((UTF8String) v).getBytes();
                System.arraycopy(b, 0, row, slot, b.length);
                row[slot + 7] = (byte) (0x80 | b.length);
            } else {
                putLong(row, slot, fixedBits(v, types[i]));
            }
        }
        return murmurWords(row);
    }

    /** A non-string field's 8-byte slot, as a little-endian long. */
    private static long fixedBits(Object v, char type) {
        switch (type) {
            case 'z': return ((Boolean) v).booleanValue() ? 1 : 0;
            case 'd': return Double.doubleToRawLongBits(((Double) v).doubleValue());
            case 'f': return Float.floatToRawIntBits(((Float) v).floatValue()) & 0xFFFFFFFFL;
            case 't': return Math.floorDiv(((Long) v).longValue(), 1000L);   // microseconds -> TIMESTAMP(3) millis
            case 'b': return ((Number) v).longValue() & 0xFFL;
            case 'h': return ((Number) v).longValue() & 0xFFFFL;
            case 'i': case 'D': return ((Number) v).longValue() & 0xFFFFFFFFL;
            default: return ((Number) v).longValue();
        }
    }

    private static void putLong(byte[] b, int at, long v) {
        for (int i = 0; i < 8; i++) b[at + i] = (byte) (v >>> (8 * i));
    }

    /** Flink's {@code MurmurHashUtils.hashBytesByWords}, seed 42, over {@code data} (a multiple of 4 bytes). */
    static int murmurWords(byte[] data) {
        int h = 42;
        for (int i = 0; i < data.length; i += 4) {
            int k = (data[i] & 0xFF) | (data[i + 1] & 0xFF) << 8 | (data[i + 2] & 0xFF) << 16 | (data[i + 3] & 0xFF) << 24;
            k *= 0xCC9E2D51;
            k = Integer.rotateLeft(k, 15);
            k *= 0x1B873593;
            h ^= k;
            h = Integer.rotateLeft(h, 13);
            h = h * 5 + 0xE6546B64;
        }
        h ^= data.length;
        h ^= h >>> 16;
        h *= 0x85EBCA6B;
        h ^= h >>> 13;
        h *= 0xC2B2AE35;
        return h ^ (h >>> 16);
    }
}
