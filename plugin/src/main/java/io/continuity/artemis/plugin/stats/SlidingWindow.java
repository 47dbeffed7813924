package io.continuity.artemis.plugin.stats;

import java.util.Arrays;

/**
 * Counters and an optional latency histogram over the last {@code windowMillis}, kept as {@code slots} rotating
 * time slots (the oldest slot is dropped as a new one starts, so the window slides in steps of windowMillis/slots).
 * Memory is fixed at construction: slots x (counters + histogram buckets). Thread-safe; every method is a short
 * critical section on this object.
 */
public final class SlidingWindow {

   private final TimeSource time;
   private final long slotMillis;
   private final int slots;
   private final int counterCount;
   private final boolean withHistogram;

   private final long[] slotEpoch;
   private final long[][] counters;
   private final int[][] histograms;
   private final long[] slotMax;
   private final long[] slotSamples;
   private long startMillis;

   public SlidingWindow(TimeSource time, long windowMillis, int slots, int counterCount, boolean withHistogram) {
      if (slots < 2 || windowMillis < slots) {
         throw new IllegalArgumentException("window of " + windowMillis + " ms cannot have " + slots + " slots");
      }
      this.time = time;
      this.slots = slots;
      this.slotMillis = windowMillis / slots;
      this.counterCount = counterCount;
      this.withHistogram = withHistogram;
      this.slotEpoch = new long[slots];
      Arrays.fill(slotEpoch, Long.MIN_VALUE);
      this.counters = new long[slots][counterCount];
      this.histograms = new int[slots][];
      this.slotMax = new long[slots];
      this.slotSamples = new long[slots];
      this.startMillis = time.currentTimeMillis();
   }

   public synchronized void add(int counter, long delta) {
      counters[slot(time.currentTimeMillis())][counter] += delta;
   }

   /** Records one latency sample (negative values count as 0). */
   public synchronized void record(long micros) {
      if (!withHistogram) {
         throw new IllegalStateException("window has no histogram");
      }
      int s = slot(time.currentTimeMillis());
      int[] h = histograms[s];
      if (h == null) {
         h = new int[LatencyHistogram.BUCKETS];
         histograms[s] = h;
      }
      long v = Math.max(0, micros);
      h[LatencyHistogram.bucketOf(v)]++;
      slotSamples[s]++;
      if (v > slotMax[s]) {
         slotMax[s] = v;
      }
   }

   public synchronized WindowSnapshot snapshot() {
      long now = time.currentTimeMillis();
      long currentEpoch = Math.floorDiv(now, slotMillis);
      long[] sums = new long[counterCount];
      long[] merged = new long[withHistogram ? LatencyHistogram.BUCKETS : 0];
      long samples = 0;
      long max = 0;
      for (int s = 0; s < slots; s++) {
         long epoch = slotEpoch[s];
         if (epoch == Long.MIN_VALUE || epoch <= currentEpoch - slots || epoch > currentEpoch) {
            continue;
         }
         for (int c = 0; c < counterCount; c++) {
            sums[c] += counters[s][c];
         }
         int[] h = histograms[s];
         if (h != null && slotSamples[s] > 0) {
            for (int b = 0; b < h.length; b++) {
               merged[b] += h[b];
            }
            samples += slotSamples[s];
            max = Math.max(max, slotMax[s]);
         }
      }
      long covered = (slots - 1) * slotMillis + (now - currentEpoch * slotMillis);
      long span = Math.max(0, Math.min(covered, now - startMillis));
      return new WindowSnapshot(sums, merged, samples, max, span);
   }

   public synchronized void reset() {
      Arrays.fill(slotEpoch, Long.MIN_VALUE);
      for (int s = 0; s < slots; s++) {
         Arrays.fill(counters[s], 0);
         if (histograms[s] != null) {
            Arrays.fill(histograms[s], 0);
         }
         slotMax[s] = 0;
         slotSamples[s] = 0;
      }
      startMillis = time.currentTimeMillis();
   }

   private int slot(long now) {
      long epoch = Math.floorDiv(now, slotMillis);
      int s = (int) Math.floorMod(epoch, (long) slots);
      if (slotEpoch[s] != epoch) {
         slotEpoch[s] = epoch;
         Arrays.fill(counters[s], 0);
         if (histograms[s] != null) {
            Arrays.fill(histograms[s], 0);
         }
         slotMax[s] = 0;
         slotSamples[s] = 0;
      }
      return s;
   }
}
