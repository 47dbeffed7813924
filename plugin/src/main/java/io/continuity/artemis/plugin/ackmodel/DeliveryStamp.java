package io.continuity.artemis.plugin.ackmodel;

/**
 * Attached to a message reference (via its protocol-data slot) when it is delivered to a consumer, so the ack can
 * compute deliver-to-ack latency without a global map. A redelivery replaces the stamp.
 */
final class DeliveryStamp {

   final long deliveredNanos;
   final long consumerSequence;

   DeliveryStamp(long deliveredNanos, long consumerSequence) {
      this.deliveredNanos = deliveredNanos;
      this.consumerSequence = consumerSequence;
   }
}
