package io.continuity.artemis.plugin.ackmodel;

import java.util.ArrayList;
import java.util.List;

import org.apache.activemq.artemis.core.transaction.Transaction;
import org.apache.activemq.artemis.core.transaction.TransactionOperationAbstract;

/**
 * The acks made in one transaction, i.e. one "ack call": the transaction a consumer opens for a stand-alone
 * (possibly cumulative) acknowledgement, or a client transaction / CLIENT_ACKNOWLEDGE session commit. Counted when
 * the transaction commits; dropped when it rolls back (the deliveries go back to the queue).
 */
final class AckBatch extends TransactionOperationAbstract {

   record Entry(ConsumerAckStats consumer, AckMode mode, long deliveredNanos) {
   }

   private final AckModelTracker tracker;
   private final long txId;
   private final List<Entry> entries = new ArrayList<>(4);

   AckBatch(AckModelTracker tracker, long txId) {
      this.tracker = tracker;
      this.txId = txId;
   }

   synchronized void add(Entry e) {
      entries.add(e);
   }

   synchronized List<Entry> entries() {
      return new ArrayList<>(entries);
   }

   @Override
   public void afterCommit(Transaction tx) {
      tracker.committed(txId, this);
   }

   @Override
   public void afterRollback(Transaction tx) {
      tracker.rolledBack(txId);
   }
}
