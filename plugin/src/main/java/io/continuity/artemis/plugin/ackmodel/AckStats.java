package io.continuity.artemis.plugin.ackmodel;

import java.util.concurrent.atomic.LongAdder;

import io.continuity.artemis.plugin.stats.Json;
import io.continuity.artemis.plugin.stats.SlidingWindow;
import io.continuity.artemis.plugin.stats.TimeSource;
import io.continuity.artemis.plugin.stats.WindowSnapshot;

/**
 * Ack-model statistics of one address (or of the whole broker): windowed counters and deliver-to-ack latency
 * histogram, plus totals since start or the last reset.
 */
public final class AckStats {

   static final int DELIVERED = 0;
   static final int ACKED = 1;
   static final int ACK_CALLS = 2;
   static final int NON_CLIENT_ACKS = 3;
   private static final int MODE_BASE = 4;
   private static final int COUNTERS = MODE_BASE + AckMode.values().length;

   private final SlidingWindow window;
   private final LongAdder[] totals = new LongAdder[COUNTERS];

   public AckStats(TimeSource time, long windowMillis, int slots) {
      this.window = new SlidingWindow(time, windowMillis, slots, COUNTERS, true);
      for (int i = 0; i < COUNTERS; i++) {
         totals[i] = new LongAdder();
      }
   }

   void delivered() {
      add(DELIVERED, 1);
   }

   void nonClientAck() {
      add(NON_CLIENT_ACKS, 1);
   }

   /** One acknowledged delivery; latency -1 when the delivery time is unknown. */
   void acked(AckMode mode, long latencyMicros) {
      add(ACKED, 1);
      add(MODE_BASE + mode.ordinal(), 1);
      if (latencyMicros >= 0) {
         window.record(latencyMicros);
      }
   }

   void ackCall() {
      add(ACK_CALLS, 1);
   }

   private void add(int counter, long n) {
      window.add(counter, n);
      totals[counter].add(n);
   }

   public WindowSnapshot snapshot() {
      return window.snapshot();
   }

   public long total(int counter) {
      return totals[counter].sum();
   }

   public void reset() {
      window.reset();
      for (LongAdder t : totals) {
         t.reset();
      }
   }

   public static double deliveriesPerSecond(WindowSnapshot s) {
      return s.ratePerSecond(DELIVERED);
   }

   public static double acksPerSecond(WindowSnapshot s) {
      return s.ratePerSecond(ACKED);
   }

   /** Acks per ack call in the window; 0 when there was no ack call. */
   public static double acksPerCall(WindowSnapshot s) {
      long calls = s.count(ACK_CALLS);
      return calls == 0 ? 0 : (double) s.count(ACKED) / calls;
   }

   /** Share (0..1) of the window's client acks made in a mode; 0 when there was no ack. */
   public static double share(WindowSnapshot s, AckMode mode) {
      long acked = s.count(ACKED);
      return acked == 0 ? 0 : (double) s.count(MODE_BASE + mode.ordinal()) / acked;
   }

   /** Writes the members of this address's JSON object (without braces). */
   void writeMembers(Json json, long inFlight) {
      WindowSnapshot s = window.snapshot();
      json.field("deliveriesPerSecond", s.ratePerSecond(DELIVERED));
      json.field("acksPerSecond", s.ratePerSecond(ACKED));
      json.field("ackLatencyP50Seconds", s.quantileSeconds(0.50));
      json.field("ackLatencyP99Seconds", s.quantileSeconds(0.99));
      json.field("ackLatencyMaxSeconds", s.maxSeconds());
      json.field("inFlight", inFlight);
      json.field("acksPerAckCall", acksPerCall(s));
      json.name("ackModeShare").beginObject();
      for (AckMode m : AckMode.values()) {
         json.field(m.jsonName(), share(s, m));
      }
      json.endObject();
      json.name("window").beginObject()
         .field("seconds", s.spanMillis() / 1000.0)
         .field("deliveries", s.count(DELIVERED))
         .field("acks", s.count(ACKED))
         .field("ackCalls", s.count(ACK_CALLS))
         .field("latencySamples", s.samples())
         .field("nonClientAcks", s.count(NON_CLIENT_ACKS))
         .endObject();
      json.name("total").beginObject()
         .field("deliveries", total(DELIVERED))
         .field("acks", total(ACKED))
         .field("ackCalls", total(ACK_CALLS))
         .field("nonClientAcks", total(NON_CLIENT_ACKS));
      for (AckMode m : AckMode.values()) {
         json.field(m.jsonName(), total(MODE_BASE + m.ordinal()));
      }
      json.endObject();
   }
}
