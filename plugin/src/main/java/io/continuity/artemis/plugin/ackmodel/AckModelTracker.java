package io.continuity.artemis.plugin.ackmodel;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

import io.continuity.artemis.plugin.clients.SessionInfo;
import io.continuity.artemis.plugin.clients.SessionRegistry;
import io.continuity.artemis.plugin.stats.Json;
import io.continuity.artemis.plugin.stats.TimeSource;
import io.continuity.artemis.plugin.stats.WindowSnapshot;
import org.apache.activemq.artemis.core.postoffice.Binding;
import org.apache.activemq.artemis.core.postoffice.BindingType;
import org.apache.activemq.artemis.core.postoffice.QueueBinding;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.MessageReference;
import org.apache.activemq.artemis.core.server.Queue;
import org.apache.activemq.artemis.core.server.ServerConsumer;
import org.apache.activemq.artemis.core.server.ServerSession;
import org.apache.activemq.artemis.core.server.impl.AckReason;
import org.apache.activemq.artemis.core.transaction.Transaction;

/**
 * The ack model: per address (and per open consumer) deliveries, acks, ack calls, ack modes and deliver-to-ack
 * latency, fed by the plugin's delivery and acknowledgement hooks.
 *
 * <ul>
 *    <li>A delivery is counted in {@code beforeDeliver} and stamps the message reference with the time.</li>
 *    <li>An ack is classified when it happens (the transaction it runs in decides the ack mode) and counted when its
 *    transaction commits; one committed transaction is one ack call.</li>
 *    <li>Deliveries in flight are read from the broker's own delivering state when statistics are read, so they are
 *    exact whatever happened to a delivery (ack, rollback, consumer close, release).</li>
 * </ul>
 */
public final class AckModelTracker {

   /** Bound on transactions with acks waiting for their commit (beyond it, acks are not batched but counted alone). */
   private static final int MAX_PENDING_TX = 100_000;
   /** Consumers listed per address in the JSON (the ones with most deliveries in flight first). */
   private static final int MAX_CONSUMERS_LISTED = 50;
   private static final int MAX_RECENTLY_CLOSED = 256;

   private final ActiveMQServer server;
   private final SessionRegistry sessions;
   private final TimeSource time;
   private final boolean includeInternal;
   private final AckStats all;
   private final BoundedRegistry<AckStats> addresses;
   /** Never written: stands in for addresses that have deliveries in flight but no statistics yet. */
   private final AckStats empty;
   private final Map<Long, ConsumerAckStats> consumers = new ConcurrentHashMap<>();
   /** Recently closed consumers: acks of their deliveries can still commit after the close (JMS close-then-commit). */
   private final Map<Long, ConsumerAckStats> recentlyClosed = Collections.synchronizedMap(new LinkedHashMap<>(64, 0.75f, false) {
      @Override
      protected boolean removeEldestEntry(Map.Entry<Long, ConsumerAckStats> eldest) {
         return size() > MAX_RECENTLY_CLOSED;
      }
   });
   private final Map<Long, AckBatch> pending = new ConcurrentHashMap<>();

   public AckModelTracker(ActiveMQServer server, SessionRegistry sessions, TimeSource time, long windowMillis, int slots,
                          int maxAddresses, boolean includeInternal) {
      this.server = server;
      this.sessions = sessions;
      this.time = time;
      this.includeInternal = includeInternal;
      this.all = new AckStats(time, windowMillis, slots);
      this.addresses = new BoundedRegistry<>(maxAddresses, k -> new AckStats(time, windowMillis, slots));
      this.empty = new AckStats(time, windowMillis, slots);
   }

   private boolean tracked(Queue queue) {
      return queue != null && (includeInternal || !queue.isInternalQueue());
   }

   // ------------------------------------------------------------------ hooks

   public void consumerCreated(ServerConsumer consumer) {
      if (!consumer.isBrowseOnly() && tracked(consumer.getQueue())) {
         stats(consumer);
      }
   }

   public void consumerClosed(ServerConsumer consumer) {
      ConsumerAckStats cs = consumers.remove(consumer.sequentialID());
      if (cs != null) {
         recentlyClosed.put(consumer.sequentialID(), cs);
      }
   }

   public void delivered(ServerConsumer consumer, MessageReference ref) {
      if (consumer.isBrowseOnly() || !tracked(ref.getQueue())) {
         return;
      }
      ConsumerAckStats cs = stats(consumer);
      cs.delivered.increment();
      addresses.get(cs.addressKey).delivered();
      all.delivered();
      if (cs.info != null && cs.info.preAcknowledge()) {
         return; // acked by the broker before this delivery: nothing to wait for
      }
      ref.setProtocolData(DeliveryStamp.class, new DeliveryStamp(time.nanoTime(), consumer.sequentialID()));
   }

   public void acknowledged(Transaction tx, MessageReference ref, AckReason reason, ServerConsumer consumer) {
      Queue queue = ref.getQueue();
      if (!tracked(queue)) {
         return;
      }
      if (consumer == null || reason != AckReason.NORMAL) {
         // mirror-applied acks, expiry, dead-lettering, management removal, last-value replacement
         addresses.get(AddressKey.of(queue)).nonClientAck();
         all.nonClientAck();
         return;
      }
      ConsumerAckStats cs = stats(consumer);
      DeliveryStamp stamp = ref.getProtocolData(DeliveryStamp.class);
      long deliveredNanos = stamp != null && stamp.consumerSequence == consumer.sequentialID() ? stamp.deliveredNanos : -1;
      AckMode mode = AckModeClassifier.classify(cs.info, cs.session(), tx);
      cs.lastMode = mode;
      AckBatch.Entry entry = new AckBatch.Entry(cs, mode, deliveredNanos);
      if (tx == null) {
         apply(List.of(entry));
         return;
      }
      AckBatch batch = pending.get(tx.getID());
      if (batch == null) {
         if (pending.size() >= MAX_PENDING_TX) {
            apply(List.of(entry));
            return;
         }
         batch = pending.computeIfAbsent(tx.getID(), id -> {
            AckBatch b = new AckBatch(this, id);
            tx.addOperation(b);
            return b;
         });
      }
      batch.add(entry);
   }

   void committed(long txId, AckBatch batch) {
      pending.remove(txId);
      apply(batch.entries());
   }

   void rolledBack(long txId) {
      pending.remove(txId);
   }

   private void apply(List<AckBatch.Entry> entries) {
      if (entries.isEmpty()) {
         return;
      }
      long now = time.nanoTime();
      Map<AckStats, Boolean> touchedAddresses = new IdentityHashMap<>(2);
      Map<ConsumerAckStats, Boolean> touchedConsumers = new IdentityHashMap<>(2);
      for (AckBatch.Entry e : entries) {
         long latencyMicros = e.deliveredNanos() < 0 ? -1 : Math.max(0, (now - e.deliveredNanos()) / 1000);
         AckStats address = addresses.get(e.consumer().addressKey);
         address.acked(e.mode(), latencyMicros);
         all.acked(e.mode(), latencyMicros);
         e.consumer().acked.increment();
         touchedAddresses.put(address, Boolean.TRUE);
         touchedConsumers.put(e.consumer(), Boolean.TRUE);
      }
      touchedAddresses.keySet().forEach(AckStats::ackCall);
      touchedConsumers.keySet().forEach(c -> c.ackCalls.increment());
      all.ackCall();
   }

   private ConsumerAckStats stats(ServerConsumer consumer) {
      long seq = consumer.sequentialID();
      ConsumerAckStats cs = consumers.get(seq);
      if (cs != null) {
         return cs;
      }
      cs = recentlyClosed.get(seq);
      if (cs != null) {
         return cs;
      }
      ConsumerAckStats fresh = newStats(consumer);
      if (consumer.isClosed()) {
         return fresh; // not registered: nothing would remove it
      }
      ConsumerAckStats previous = consumers.putIfAbsent(seq, fresh);
      return previous != null ? previous : fresh;
   }

   private ConsumerAckStats newStats(ServerConsumer consumer) {
      ServerSession session = null;
      SessionInfo info = null;
      try {
         session = server.getSessionByID(consumer.getSessionID());
         info = session == null ? null : sessions.get(session);
      } catch (RuntimeException e) {
         // a closing consumer may already have let go of its session
      }
      String key = AddressKey.of(consumer.getQueue());
      return new ConsumerAckStats(consumer, session, info, key);
   }

   // ------------------------------------------------------------------ reading

   /** Deliveries in flight per address key, from the broker's queues (exact, includes uncommitted acks). */
   public Map<String, Long> inFlightByAddress() {
      Map<String, Long> result = new HashMap<>();
      try {
         server.getPostOffice().getAllBindings().forEach((Binding b) -> {
            if (b.getType() == BindingType.LOCAL_QUEUE && b instanceof QueueBinding qb) {
               Queue q = qb.getQueue();
               if (tracked(q)) {
                  int delivering = q.getDeliveringCount();
                  if (delivering > 0) {
                     result.merge(AddressKey.of(q), (long) delivering, Long::sum);
                  }
               }
            }
         });
      } catch (RuntimeException e) {
         // the post office is not available while the broker stops
      }
      return result;
   }

   public long unackedDeliveries() {
      return inFlightByAddress().values().stream().mapToLong(Long::longValue).sum();
   }

   public WindowSnapshot overall() {
      return all.snapshot();
   }

   public AckStats overallStats() {
      return all;
   }

   public AckStats addressStats(String addressKey) {
      return addresses.peek(addressKey);
   }

   public int openConsumers() {
      return consumers.size();
   }

   public long pendingAckTransactions() {
      return pending.size();
   }

   public void reset() {
      all.reset();
      addresses.clear();
      recentlyClosed.clear();
      // consumers stay (they are open); their cumulative counters restart
      for (ConsumerAckStats cs : consumers.values()) {
         cs.delivered.reset();
         cs.acked.reset();
         cs.ackCalls.reset();
      }
   }

   /** The AckModel attribute: one JSON object keyed by address. */
   public String toJson() {
      Map<String, Long> inFlight = inFlightByAddress();
      Map<String, List<ConsumerAckStats>> byAddress = new TreeMap<>();
      for (ConsumerAckStats cs : consumers.values()) {
         byAddress.computeIfAbsent(cs.addressKey, k -> new ArrayList<>()).add(cs);
      }
      Map<String, AckStats> stats = addresses.sorted();
      TreeMap<String, Boolean> keys = new TreeMap<>();
      stats.keySet().forEach(k -> keys.put(k, Boolean.TRUE));
      inFlight.keySet().forEach(k -> keys.put(k, Boolean.TRUE));

      Json json = new Json().beginObject();
      for (String key : keys.keySet()) {
         AckStats s = stats.get(key);
         if (s == null) {
            s = empty; // only deliveries in flight known here (e.g. consumers older than the plugin): nothing to register
         }
         json.name(key).beginObject();
         s.writeMembers(json, inFlight.getOrDefault(key, 0L));
         List<ConsumerAckStats> list = byAddress.getOrDefault(key, List.of());
         json.field("openConsumers", list.size());
         json.name("consumers").beginArray();
         list.stream()
            .map(c -> Map.entry(c, c.inFlight()))
            .sorted(Comparator.comparingLong((Map.Entry<ConsumerAckStats, Long> e) -> e.getValue()).reversed())
            .limit(MAX_CONSUMERS_LISTED)
            .forEach(e -> e.getKey().write(json, e.getValue()));
         json.endArray();
         json.endObject();
      }
      return json.endObject().toString();
   }
}
