package io.continuity.artemis.plugin.ackmodel;

/** How a client acknowledged, as far as the broker can tell. */
public enum AckMode {
   /** The ack was part of a client transaction (core transacted or XA session, AMQP transactional disposition). */
   TRANSACTED("transacted"),
   /** Core session with autoCommitAcks=false and autoCommitSends=true: JMS CLIENT_ACKNOWLEDGE / INDIVIDUAL. */
   CLIENT("clientAcknowledged"),
   /** Core session with autoCommitAcks=true (JMS AUTO / DUPS_OK) or with broker-side pre-acknowledge. */
   AUTO("autoAcknowledged"),
   /**
    * A non-transactional ack on a protocol that leaves the ack mode to the client library (AMQP, OpenWire, STOMP,
    * MQTT settle each delivery individually), or a session opened before the plugin was loaded.
    */
   UNCLASSIFIED("unclassified");

   private final String jsonName;

   AckMode(String jsonName) {
      this.jsonName = jsonName;
   }

   public String jsonName() {
      return jsonName;
   }
}
