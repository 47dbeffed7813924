package io.continuity.artemis.plugin.replication;

import java.util.Map;

import io.continuity.artemis.plugin.ackmodel.BoundedRegistry;
import io.continuity.artemis.plugin.stats.Json;
import io.continuity.artemis.plugin.stats.TimeSource;
import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.core.server.RoutingContext;

/**
 * Replication latency on a mirror target. The AMQP mirror target ({@code AMQPMirrorControllerTarget}) routes each
 * replicated message through the post office with itself set as the routing context's mirror source; nothing else
 * in the broker sets that field, so {@code afterMessageRoute} with a non-null mirror source is exactly "a mirrored
 * message was applied here". Its latency is the wall-clock arrival time minus the origin time the message carries
 * from the other site.
 */
public final class ReplicationLatencyTracker {

   private final TimeSource time;
   private final LatencyOrigin origin;
   private final ReplicationStats all;
   private final BoundedRegistry<ReplicationStats> addresses;

   public ReplicationLatencyTracker(TimeSource time, long windowMillis, int slots, int maxAddresses, LatencyOrigin origin) {
      this.time = time;
      this.origin = origin;
      this.all = new ReplicationStats(time, windowMillis, slots);
      this.addresses = new BoundedRegistry<>(maxAddresses, k -> new ReplicationStats(time, windowMillis, slots));
   }

   /** True when the routing was done by the mirror target. */
   public static boolean isMirrored(RoutingContext context) {
      return context != null && context.getMirrorSource() != null;
   }

   public void routed(Message message, RoutingContext context) {
      if (!isMirrored(context)) {
         return;
      }
      long now = time.currentTimeMillis();
      long originMillis = origin.originMillis(message);
      String address = message.getAddress();
      addresses.get(address == null ? "(none)" : address).arrived(originMillis, now);
      all.arrived(originMillis, now);
   }

   public ReplicationStats overall() {
      return all;
   }

   public ReplicationStats address(String address) {
      return addresses.peek(address);
   }

   public void reset() {
      all.reset();
      addresses.clear();
   }

   /** The ReplicationLatency attribute: one JSON object keyed by address. */
   public String toJson() {
      Json json = new Json().beginObject();
      for (Map.Entry<String, ReplicationStats> e : addresses.sorted().entrySet()) {
         json.name(e.getKey()).beginObject();
         e.getValue().writeMembers(json);
         json.endObject();
      }
      return json.endObject().toString();
   }
}
