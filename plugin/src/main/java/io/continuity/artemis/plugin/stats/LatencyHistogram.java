package io.continuity.artemis.plugin.stats;

/**
 * Fixed log-linear buckets for latencies in microseconds: exact below 8 us, then 8 buckets per power of two (each
 * bucket at most 12.5 % wide relative to its lower bound) up to 2^36 us (about 19 hours), plus one overflow bucket.
 * The bucket layout never changes, so a histogram is a plain {@code int[]} of {@link #BUCKETS} counters and memory
 * stays bounded whatever the traffic.
 */
public final class LatencyHistogram {

   private static final int SUB_BITS = 3;
   private static final int SUB = 1 << SUB_BITS;
   private static final int MAX_EXPONENT = 35;

   /** Number of counters in a histogram array. */
   public static final int BUCKETS = SUB + (MAX_EXPONENT - SUB_BITS + 1) * SUB + 1;

   private static final int OVERFLOW = BUCKETS - 1;

   private LatencyHistogram() {
   }

   /** Bucket of a value; negative values count as 0. */
   public static int bucketOf(long micros) {
      if (micros < SUB) {
         return (int) Math.max(micros, 0);
      }
      int exponent = 63 - Long.numberOfLeadingZeros(micros);
      if (exponent > MAX_EXPONENT) {
         return OVERFLOW;
      }
      int sub = (int) ((micros >>> (exponent - SUB_BITS)) & (SUB - 1));
      return SUB + (exponent - SUB_BITS) * SUB + sub;
   }

   /** Largest value that falls into a bucket (inclusive). */
   public static long upperBound(int bucket) {
      if (bucket < SUB) {
         return bucket;
      }
      if (bucket >= OVERFLOW) {
         return Long.MAX_VALUE;
      }
      int exponent = (bucket - SUB) / SUB + SUB_BITS;
      int sub = (bucket - SUB) % SUB;
      return ((long) (SUB + sub + 1) << (exponent - SUB_BITS)) - 1;
   }

   /**
    * The value at quantile {@code q} (0 &lt; q &le; 1) of a histogram: the upper bound of the bucket holding the
    * sample of rank ceil(q * n), capped at the largest value actually recorded. Returns -1 when empty.
    */
   public static long quantile(long[] counts, long total, double q, long observedMax) {
      if (total <= 0) {
         return -1;
      }
      long rank = Math.max(1, (long) Math.ceil(q * total));
      long seen = 0;
      for (int i = 0; i < counts.length; i++) {
         seen += counts[i];
         if (seen >= rank) {
            return Math.min(upperBound(i), observedMax);
         }
      }
      return observedMax;
   }
}
