package io.continuity.artemis.plugin;

import java.io.StringReader;

import io.continuity.artemis.plugin.stats.Json;
import io.continuity.artemis.plugin.stats.LatencyHistogram;
import io.continuity.artemis.plugin.stats.SlidingWindow;
import io.continuity.artemis.plugin.stats.WindowSnapshot;
import org.apache.activemq.artemis.json.JsonObject;
import org.apache.activemq.artemis.utils.JsonLoader;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class StatsPrimitivesTest {

   @Test
   void bucketsCoverEveryValueOnceAndStayWithinTwelvePointFivePercent() {
      int previous = -1;
      for (long v = 0; v < 200_000; v++) {
         int b = LatencyHistogram.bucketOf(v);
         assertTrue(b == previous || b == previous + 1, "buckets must be contiguous at " + v);
         assertTrue(v <= LatencyHistogram.upperBound(b), "value above its bucket's upper bound: " + v);
         if (b > 0) {
            assertTrue(v > LatencyHistogram.upperBound(b - 1), "value also fits the previous bucket: " + v);
         }
         if (v >= 8) {
            assertTrue(LatencyHistogram.upperBound(b) <= v * 1.125 + 1, "bucket too wide at " + v);
         }
         previous = b;
      }
      assertEquals(LatencyHistogram.BUCKETS - 1, LatencyHistogram.bucketOf(Long.MAX_VALUE));
      assertEquals(0, LatencyHistogram.bucketOf(-5));
   }

   @Test
   void quantilesOfAKnownSequence() {
      ManualTime time = new ManualTime(1_000_000);
      SlidingWindow w = new SlidingWindow(time, 60_000, 6, 1, true);
      for (int ms = 1; ms <= 100; ms++) {
         w.record(ms * 1000L); // 1 ms .. 100 ms
      }
      WindowSnapshot s = w.snapshot();
      assertEquals(100, s.samples());
      // p50 is the 50th sample (50 ms), p99 the 99th (99 ms): reported as their bucket's upper bound (<= +12.5 %)
      assertBetween(0.050, 0.050 * 1.125, s.quantileSeconds(0.50));
      assertBetween(0.099, 0.100, s.quantileSeconds(0.99)); // capped by the observed max of 100 ms
      assertEquals(0.100, s.maxSeconds(), 1e-9);
      assertEquals(0.100, s.quantileSeconds(1.0), 1e-9);

      SlidingWindow small = new SlidingWindow(time, 60_000, 6, 1, true);
      for (int us = 0; us < 8; us++) {
         small.record(us); // exact buckets below 8 us
      }
      assertEquals(3e-6, small.snapshot().quantileSeconds(0.5), 1e-12);
   }

   @Test
   void windowForgetsOldSlotsAndComputesRatesOverItsSpan() {
      ManualTime time = new ManualTime(600_000); // slot-aligned start
      SlidingWindow w = new SlidingWindow(time, 60_000, 6, 2, true);
      for (int second = 0; second < 10; second++) {
         w.add(0, 3);          // 3 events per second for 10 s
         w.record(2_000_000);  // one 2 s latency per second
         time.advanceMillis(1000);
      }
      WindowSnapshot s = w.snapshot();
      assertEquals(30, s.count(0));
      assertEquals(0, s.count(1));
      assertEquals(10_000, s.spanMillis());
      assertEquals(3.0, s.ratePerSecond(0), 1e-9);
      assertEquals(10, s.samples());

      time.advanceMillis(45_000); // t = 55 s: the first slot (0-10 s) is still inside the 60 s window
      w.add(1, 1);
      assertEquals(30, w.snapshot().count(0));
      time.advanceMillis(10_000); // t = 65 s: slot 0-10 s has slid out
      WindowSnapshot later = w.snapshot();
      assertEquals(0, later.count(0));
      assertEquals(1, later.count(1));
      assertEquals(0, later.samples());
      assertEquals(-1, later.quantileSeconds(0.99));
      assertEquals(-1, later.maxSeconds());

      w.reset();
      assertEquals(0, w.snapshot().count(1));
      assertEquals(0, w.snapshot().spanMillis());
   }

   @Test
   void jsonIsWellFormedAndEscaped() {
      String text = new Json().beginObject()
         .field("plain", "a")
         .field("quote\"and\\slash", "line\nbreak\u0001")
         .field("n", 42L)
         .field("d", 0.1234567)
         .field("nan", Double.NaN)
         .name("arr").beginArray().beginObject().field("x", true).endObject().beginObject().endObject().endArray()
         .endObject().toString();
      JsonObject o = JsonLoader.readObject(new StringReader(text));
      assertEquals("line\nbreak\u0001", o.getString("quote\"and\\slash"));
      assertEquals(42, o.getJsonNumber("n").longValue());
      assertEquals(0.123457, o.getJsonNumber("d").doubleValue(), 1e-12);
      assertTrue(o.isNull("nan"));
      assertEquals(2, o.getJsonArray("arr").size());
   }

   static void assertBetween(double low, double high, double actual) {
      assertTrue(actual >= low && actual <= high, actual + " not in [" + low + ", " + high + "]");
   }
}
