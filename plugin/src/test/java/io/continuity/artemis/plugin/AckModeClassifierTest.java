package io.continuity.artemis.plugin;

import java.lang.reflect.Proxy;

import io.continuity.artemis.plugin.ackmodel.AckMode;
import io.continuity.artemis.plugin.ackmodel.AckModeClassifier;
import io.continuity.artemis.plugin.clients.SessionInfo;
import org.apache.activemq.artemis.core.persistence.impl.nullpm.NullStorageManager;
import org.apache.activemq.artemis.core.server.ServerSession;
import org.apache.activemq.artemis.core.transaction.Transaction;
import org.apache.activemq.artemis.core.transaction.impl.TransactionImpl;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The classification table, with session flags as the JMS client sets them (ActiveMQConnection.createSessionInternal). */
class AckModeClassifierTest {

   private static final NullStorageManager STORAGE = new NullStorageManager();

   private static SessionInfo session(String protocol, boolean autoCommitSends, boolean autoCommitAcks, boolean preAck, boolean xa) {
      return new SessionInfo("s", "u", protocol, "a", false, 1, "/127.0.0.1:1", true, autoCommitSends, autoCommitAcks, preAck, xa);
   }

   private static ServerSession withCurrentTransaction(Transaction tx) {
      return (ServerSession) Proxy.newProxyInstance(ServerSession.class.getClassLoader(), new Class<?>[] {ServerSession.class},
                                                    (proxy, method, args) -> method.getName().equals("getCurrentTransaction") ? tx : null);
   }

   @Test
   void coreSessions() {
      Transaction sessionTx = new TransactionImpl(STORAGE);
      Transaction consumersOwnTx = new TransactionImpl(STORAGE);
      ServerSession s = withCurrentTransaction(sessionTx);

      // JMS AUTO_ACKNOWLEDGE / DUPS_OK: autoCommitAcks, the consumer acks in a transaction of its own
      assertEquals(AckMode.AUTO, AckModeClassifier.classify(session("CORE", true, true, false, false), s, consumersOwnTx));
      // JMS CLIENT_ACKNOWLEDGE: acks collect in the session transaction, committed by acknowledge()
      assertEquals(AckMode.CLIENT, AckModeClassifier.classify(session("CORE", true, false, false, false), s, sessionTx));
      // JMS SESSION_TRANSACTED
      assertEquals(AckMode.TRANSACTED, AckModeClassifier.classify(session("CORE", false, false, false, false), s, sessionTx));
      // XA
      assertEquals(AckMode.TRANSACTED, AckModeClassifier.classify(session("CORE", true, false, false, true), s, sessionTx));
      // pre-acknowledge: the broker acked before delivery, no transaction
      assertEquals(AckMode.AUTO, AckModeClassifier.classify(session("CORE", true, true, true, false), s, null));
   }

   @Test
   void amqpSessions() {
      ServerSession xaSessionWithoutTx = withCurrentTransaction(null);
      SessionInfo amqp = session("AMQP", false, false, false, true); // how AMQPSessionCallback opens its sessions
      Transaction coordinatorTx = new TransactionImpl(STORAGE) { }; // a protocol subclass, like ProtonTransactionImpl
      assertEquals(AckMode.TRANSACTED, AckModeClassifier.classify(amqp, xaSessionWithoutTx, coordinatorTx));
      assertEquals(AckMode.UNCLASSIFIED, AckModeClassifier.classify(amqp, xaSessionWithoutTx, new TransactionImpl(STORAGE)));
   }
}
