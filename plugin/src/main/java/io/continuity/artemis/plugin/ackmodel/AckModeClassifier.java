package io.continuity.artemis.plugin.ackmodel;

import io.continuity.artemis.plugin.clients.SessionInfo;
import org.apache.activemq.artemis.core.server.ServerSession;
import org.apache.activemq.artemis.core.transaction.Transaction;
import org.apache.activemq.artemis.core.transaction.impl.TransactionImpl;

/**
 * Classifies one acknowledgement. The broker sees the session flags the client chose at session creation and the
 * transaction the ack runs in: a consumer creates a plain {@link TransactionImpl} of its own for a stand-alone ack,
 * whereas a client transaction is the session's current transaction (core) or a protocol transaction subclass
 * (AMQP coordinator).
 */
public final class AckModeClassifier {

   private AckModeClassifier() {
   }

   public static AckMode classify(SessionInfo info, ServerSession session, Transaction tx) {
      if (info == null || !info.ackFlagsKnown()) {
         return explicit(session, tx) ? AckMode.TRANSACTED : AckMode.UNCLASSIFIED;
      }
      if (info.preAcknowledge()) {
         return AckMode.AUTO;
      }
      boolean explicit = explicit(session, tx);
      if (info.isCore()) {
         if (explicit) {
            return !info.autoCommitAcks() && info.autoCommitSends() && !info.xa() ? AckMode.CLIENT : AckMode.TRANSACTED;
         }
         return info.autoCommitAcks() ? AckMode.AUTO : AckMode.UNCLASSIFIED;
      }
      return explicit ? AckMode.TRANSACTED : AckMode.UNCLASSIFIED;
   }

   /** True when the ack belongs to a transaction the client controls, false for a consumer's own stand-alone one. */
   static boolean explicit(ServerSession session, Transaction tx) {
      if (tx == null) {
         return false;
      }
      if (session != null && tx == session.getCurrentTransaction()) {
         return true;
      }
      return tx.getClass() != TransactionImpl.class;
   }
}
