package flinkkit;

import java.util.ArrayList;
import java.util.HashMap;

/**
 * A group aggregate's states by key (the heap state backend's {@code StateTable} in Flink): a
 * key of one BIGINT column in a table of its own, open addressing over the long values with
 * linear probing -- no boxed key to follow and no node per entry, where the word-frequency
 * cascade's second level, keyed by a count, drops a state and makes one at almost every
 * change -- and every other key in a {@code HashMap} (by its value alone, else a list of them).
 *
 * <pre>
 *   put [7] s7, put ["a"] sa  ->  get [7] s7, size 2; remove [7]  ->  get [7] null, size 1
 * </pre>
 */
final class StateTable {
    private final HashMap others = new HashMap();
    private long[] keys = new long[16];
    private Object[] held = new Object[16];   // the state of the key in the same slot; null: a free slot
    private int shift = 64 - 4;               // a key's first slot: the top log2(slots) bits of its hash
    private int longs;                        // slots held

    /** The state of {@code key} (one value per key column), or null. */
    Object get(Object[] key) {
        return oneLong(key) ? get(((Long) key[0]).longValue()) : others.get(GroupAggregate.id(key));
    }

    /** The state of the one BIGINT key {@code k}, or null. */
    Object get(long k) {
        return held[find(k)];
    }

    /** Holds {@code state} as the state of {@code key}, which has none. */
    void put(Object[] key, Object state) {
        if (!oneLong(key)) {
            others.put(GroupAggregate.id(key), state);
            return;
        }
        if (2 * (longs + 1) > held.length) grow();
        place(((Long) key[0]).longValue(), state);
        longs++;
    }

    /** Drops the state of {@code key}, if any. */
    void remove(Object[] key) {
        if (!oneLong(key)) {
            others.remove(GroupAggregate.id(key));
            return;
        }
        int mask = held.length - 1, i = find(((Long) key[0]).longValue());
        if (held[i] == null) return;
        // the slot freed: each key after it in its run moves back into it, unless its first slot lies after the gap
        for (int j = (i + 1) & mask; held[j] != null; j = (j + 1) & mask) {
            int home = slot(keys[j]);
            boolean reached = i <= j ? i < home && home <= j : i < home || home <= j;
            if (reached) continue;
            keys[i] = keys[j];
            held[i] = held[j];
            i = j;
        }
        held[i] = null;
        longs--;
    }

    int size() {
        return longs + others.size();
    }

    /** Every state held, in no particular order. */
    ArrayList states() {
        ArrayList out = new ArrayList(size());
        for (int i = 0; i < held.length; i++) if (held[i] != null) out.add(held[i]);
        out.addAll(others.values());
        return out;
    }

    /** Whether {@code key} is one BIGINT value, held in the table of longs. */
    private static boolean oneLong(Object[] key) {
        return key.length == 1 && key[0] instanceof Long;
    }

    /** The slot holding {@code k}, else the free slot that ends its run. */
    private int find(long k) {
        int mask = held.length - 1, i = slot(k);
        while (held[i] != null && keys[i] != k) i = (i + 1) & mask;
        return i;
    }

    private int slot(long k) {
        return (int) ((k * 0x9E3779B97F4A7C15L) >>> shift);
    }

    /** Holds {@code state} for {@code k}, which has none. */
    private void place(long k, Object state) {
        int i = find(k);
        keys[i] = k;
        held[i] = state;
    }

    /** Twice the slots, each key placed again. */
    private void grow() {
        long[] oldKeys = keys;
        Object[] oldHeld = held;
        keys = new long[2 * oldKeys.length];
        held = new Object[2 * oldHeld.length];
        shift--;
        for (int i = 0; i < oldHeld.length; i++) if (oldHeld[i] != null) place(oldKeys[i], oldHeld[i]);
    }
}
