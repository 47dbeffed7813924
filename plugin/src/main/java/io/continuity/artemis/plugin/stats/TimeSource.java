package io.continuity.artemis.plugin.stats;

/**
 * The two clocks the plugin reads: a monotonic one for intervals measured inside this JVM (deliver to ack) and the
 * wall clock for comparisons with timestamps written by another process (a message's send time on the other site).
 * Tests substitute a manual clock.
 */
public interface TimeSource {

   /** Monotonic nanoseconds, only meaningful as a difference. */
   long nanoTime();

   /** Wall-clock milliseconds since the epoch. */
   long currentTimeMillis();

   TimeSource SYSTEM = new TimeSource() {
      @Override
      public long nanoTime() {
         return System.nanoTime();
      }

      @Override
      public long currentTimeMillis() {
         return System.currentTimeMillis();
      }
   };
}
