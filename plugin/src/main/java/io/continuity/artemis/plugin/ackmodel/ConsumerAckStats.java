package io.continuity.artemis.plugin.ackmodel;

import java.lang.ref.WeakReference;
import java.util.concurrent.atomic.LongAdder;

import io.continuity.artemis.plugin.clients.SessionInfo;
import io.continuity.artemis.plugin.stats.Json;
import org.apache.activemq.artemis.core.server.ServerConsumer;
import org.apache.activemq.artemis.core.server.ServerSession;

/** Cumulative per-consumer counters (cheap: three adders), kept while the consumer is open. */
final class ConsumerAckStats {

   final ServerConsumer consumer;
   /** Weak: a closed consumer's entry lingers a while (acks can commit after the close) and must not pin its session. */
   private final WeakReference<ServerSession> session;
   final SessionInfo info;
   final String addressKey;
   final LongAdder delivered = new LongAdder();
   final LongAdder acked = new LongAdder();
   final LongAdder ackCalls = new LongAdder();
   volatile AckMode lastMode;

   ConsumerAckStats(ServerConsumer consumer, ServerSession session, SessionInfo info, String addressKey) {
      this.consumer = consumer;
      this.session = new WeakReference<>(session);
      this.info = info;
      this.addressKey = addressKey;
   }

   ServerSession session() {
      return session.get();
   }

   /** Deliveries the broker has handed to this consumer that are not acknowledged (committed) yet. */
   long inFlight() {
      try {
         return consumer.getDeliveringMessages().size();
      } catch (RuntimeException e) {
         return 0;
      }
   }

   void write(Json json, long inFlight) {
      long calls = ackCalls.sum();
      long acks = acked.sum();
      json.beginObject()
         .field("id", consumer.getID())
         .field("session", consumer.getSessionID())
         .field("queue", String.valueOf(consumer.getQueue().getName()))
         .field("user", info == null ? null : info.user())
         .field("protocol", info == null ? null : info.protocol())
         .field("remoteAddress", info == null ? null : info.remoteAddress())
         .field("ackMode", lastMode == null ? null : lastMode.jsonName())
         .field("deliveries", delivered.sum())
         .field("acks", acks)
         .field("ackCalls", calls)
         .field("acksPerAckCall", calls == 0 ? 0 : (double) acks / calls)
         .field("inFlight", inFlight)
         .endObject();
   }
}
