package io.continuity.artemis.plugin.replication;

import java.util.Locale;

import org.apache.activemq.artemis.api.core.Message;

/** Which time on a mirrored message counts as its origin (the moment it was sent on the other site). */
public enum LatencyOrigin {
   /** The message timestamp (core: set by the client; AMQP: creation-time; JMS: JMSTimestamp), else ingress. */
   TIMESTAMP,
   /** The ingress timestamp the source broker stamped (address-setting enable-ingress-timestamp), else timestamp. */
   INGRESS;

   public static LatencyOrigin parse(String value) {
      try {
         return valueOf(value.trim().toUpperCase(Locale.ROOT));
      } catch (IllegalArgumentException e) {
         throw new IllegalArgumentException("latency-origin must be 'timestamp' or 'ingress', got '" + value + "'");
      }
   }

   /** Origin time in epoch milliseconds, or 0 when the message carries none. */
   public long originMillis(Message message) {
      long timestamp = message.getTimestamp();
      long ingress = ingress(message);
      if (this == INGRESS) {
         return ingress > 0 ? ingress : Math.max(timestamp, 0);
      }
      return timestamp > 0 ? timestamp : ingress;
   }

   private static long ingress(Message message) {
      try {
         Long ingress = message.getIngressTimestamp();
         return ingress == null ? 0 : Math.max(ingress, 0);
      } catch (RuntimeException e) {
         return 0;
      }
   }
}
