package io.continuity.artemis.plugin.replication;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

import io.continuity.artemis.plugin.stats.Json;
import io.continuity.artemis.plugin.stats.SlidingWindow;
import io.continuity.artemis.plugin.stats.TimeSource;
import io.continuity.artemis.plugin.stats.WindowSnapshot;

/** Replication latency of one address (or of all): windowed histogram, counters and freshness marks. */
public final class ReplicationStats {

   static final int ARRIVALS = 0;
   static final int CLOCK_SKEW = 1;
   static final int UNTIMED = 2;
   private static final int COUNTERS = 3;

   private final TimeSource time;
   private final SlidingWindow window;
   private final LongAdder[] totals = {new LongAdder(), new LongAdder(), new LongAdder()};
   private final AtomicLong newestOriginMillis = new AtomicLong();
   private final AtomicLong lastArrivalMillis = new AtomicLong();

   ReplicationStats(TimeSource time, long windowMillis, int slots) {
      this.time = time;
      this.window = new SlidingWindow(time, windowMillis, slots, COUNTERS, true);
   }

   /** One mirrored message applied at {@code nowMillis}; {@code originMillis} 0 when unknown. */
   void arrived(long originMillis, long nowMillis) {
      add(ARRIVALS);
      lastArrivalMillis.accumulateAndGet(nowMillis, Math::max);
      if (originMillis <= 0) {
         add(UNTIMED);
         return;
      }
      newestOriginMillis.accumulateAndGet(originMillis, Math::max);
      long latencyMillis = nowMillis - originMillis;
      if (latencyMillis < 0) {
         add(CLOCK_SKEW); // origin clock ahead of ours: recorded as 0
      }
      window.record(Math.max(0, latencyMillis) * 1000);
   }

   private void add(int counter) {
      window.add(counter, 1);
      totals[counter].increment();
   }

   /** Samples of a window whose origin time was ahead of this broker's clock. */
   public static long clockSkewSamples(WindowSnapshot s) {
      return s.count(CLOCK_SKEW);
   }

   public WindowSnapshot snapshot() {
      return window.snapshot();
   }

   public long total() {
      return totals[ARRIVALS].sum();
   }

   /** Seconds since the origin time of the newest mirrored message applied, -1 if none (never below 0). */
   public double newestEventAgeSeconds() {
      long newest = newestOriginMillis.get();
      return newest == 0 ? -1 : Math.max(0, time.currentTimeMillis() - newest) / 1000.0;
   }

   /** Seconds since a mirrored message was last applied here, -1 if none. */
   public double lastArrivalAgeSeconds() {
      long last = lastArrivalMillis.get();
      return last == 0 ? -1 : Math.max(0, time.currentTimeMillis() - last) / 1000.0;
   }

   void reset() {
      window.reset();
      for (LongAdder t : totals) {
         t.reset();
      }
      newestOriginMillis.set(0);
      lastArrivalMillis.set(0);
   }

   void writeMembers(Json json) {
      WindowSnapshot s = window.snapshot();
      json.field("p50Seconds", s.quantileSeconds(0.50))
         .field("p99Seconds", s.quantileSeconds(0.99))
         .field("maxSeconds", s.maxSeconds())
         .field("messagesPerSecond", s.ratePerSecond(ARRIVALS))
         .field("newestEventAgeSeconds", newestEventAgeSeconds())
         .field("lastArrivalAgeSeconds", lastArrivalAgeSeconds());
      json.name("window").beginObject()
         .field("seconds", s.spanMillis() / 1000.0)
         .field("messages", s.count(ARRIVALS))
         .field("latencySamples", s.samples())
         .field("clockSkewSamples", s.count(CLOCK_SKEW))
         .field("untimed", s.count(UNTIMED))
         .endObject();
      json.name("total").beginObject()
         .field("messages", totals[ARRIVALS].sum())
         .field("clockSkewSamples", totals[CLOCK_SKEW].sum())
         .field("untimed", totals[UNTIMED].sum())
         .endObject();
   }
}
