package io.continuity.artemis.plugin.stats;

/** An immutable copy of a {@link SlidingWindow}: counter sums, merged histogram and the time span they cover. */
public final class WindowSnapshot {

   private final long[] counters;
   private final long[] histogram;
   private final long samples;
   private final long maxMicros;
   private final long spanMillis;

   WindowSnapshot(long[] counters, long[] histogram, long samples, long maxMicros, long spanMillis) {
      this.counters = counters;
      this.histogram = histogram;
      this.samples = samples;
      this.maxMicros = maxMicros;
      this.spanMillis = spanMillis;
   }

   public long count(int counter) {
      return counters[counter];
   }

   /** Events per second of a counter over the covered span (at least one second, to avoid start-up spikes). */
   public double ratePerSecond(int counter) {
      return counters[counter] * 1000.0 / Math.max(spanMillis, 1000L);
   }

   /** Latency samples in the window. */
   public long samples() {
      return samples;
   }

   /** Quantile in seconds, or -1 without samples. */
   public double quantileSeconds(double q) {
      long micros = LatencyHistogram.quantile(histogram, samples, q, maxMicros);
      return micros < 0 ? -1 : micros / 1_000_000.0;
   }

   /** Largest sample in seconds, or -1 without samples. */
   public double maxSeconds() {
      return samples == 0 ? -1 : maxMicros / 1_000_000.0;
   }

   /** Milliseconds of history the sums cover (grows from 0 after a reset up to the window length). */
   public long spanMillis() {
      return spanMillis;
   }
}
