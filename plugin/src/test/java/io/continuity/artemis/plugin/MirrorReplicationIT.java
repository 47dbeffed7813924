package io.continuity.artemis.plugin;

import java.io.StringReader;
import java.nio.file.Path;
import java.time.Duration;

import org.apache.activemq.artemis.api.core.ActiveMQSecurityException;
import org.apache.activemq.artemis.api.core.QueueConfiguration;
import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.api.core.client.ClientConsumer;
import org.apache.activemq.artemis.api.core.client.ClientMessage;
import org.apache.activemq.artemis.api.core.client.ClientProducer;
import org.apache.activemq.artemis.api.core.client.ClientSession;
import org.apache.activemq.artemis.api.core.client.ClientSessionFactory;
import org.apache.activemq.artemis.api.core.client.ServerLocator;
import org.apache.activemq.artemis.core.config.amqpBrokerConnectivity.AMQPBrokerConnectConfiguration;
import org.apache.activemq.artemis.core.config.amqpBrokerConnectivity.AMQPMirrorBrokerConnectionElement;
import org.apache.activemq.artemis.core.server.Queue;
import org.apache.activemq.artemis.json.JsonObject;
import org.apache.activemq.artemis.utils.JsonLoader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static io.continuity.artemis.plugin.EmbeddedBroker.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Two brokers in this JVM mirroring each other over AMQP broker connections (dc1 <-> dc2, dc2 passive). A sends while B is down,
 * so the mirrored messages wait in A's mirror queue for a known time: B's plugin must report a replication latency of
 * at least that wait, measured from the messages' own send time on A.
 */
class MirrorReplicationIT {

   private static final Duration WAIT = Duration.ofSeconds(30);
   private static final String QUEUE = "orders";
   private static final long OUTAGE_MILLIS = 1500;

   @TempDir
   Path dir;

   private static Object attr(EmbeddedBroker b, String name) {
      try {
         return b.attribute(name);
      } catch (Exception e) {
         throw new IllegalStateException(e);
      }
   }

   private static JsonObject replicationOf(EmbeddedBroker b, String address) {
      JsonObject all = JsonLoader.readObject(new StringReader((String) attr(b, "ReplicationLatency")));
      return all.getJsonObject(address);
   }

   private static void send(ServerLocator locator, int count) throws Exception {
      try (ClientSessionFactory f = locator.createSessionFactory(); ClientSession s = f.createSession()) {
         try (ClientProducer p = s.createProducer(QUEUE)) {
            for (int i = 0; i < count; i++) {
               p.send(s.createMessage(true)); // the core client stamps the message timestamp when it creates it
            }
         }
      }
   }

   @Test
   void mirroredMessagesCarryTheirEndToEndLatency() throws Exception {
      EmbeddedBroker a = new EmbeddedBroker("dc1", dir.resolve("dc1")).persistent().acceptor("clients");
      int aPort = a.port("clients");
      // dual mirroring: the passive dc2 mirrors back to dc1; its own outgoing mirror must not be refused
      EmbeddedBroker b = new EmbeddedBroker("dc2", dir.resolve("dc2")).persistent().acceptor("clients")
         .pluginProperty("initial-role", "passive")
         .pluginProperty("mirror-users", "mirror")
         .configure(c -> c.addAMQPConnection(new AMQPBrokerConnectConfiguration("to-dc1", "tcp://127.0.0.1:" + aPort)
                                                 .setRetryInterval(100).setReconnectAttempts(-1)
                                                 .addMirror(new AMQPMirrorBrokerConnectionElement())));
      int bPort = b.port("clients");
      a.configure(c -> c.addAMQPConnection(new AMQPBrokerConnectConfiguration("to-dc2", "tcp://127.0.0.1:" + bPort)
                                                .setRetryInterval(100).setReconnectAttempts(-1)
                                                .addMirror(new AMQPMirrorBrokerConnectionElement())));
      a.start();
      try (ServerLocator aLocator = a.locator("clients").setBlockOnDurableSend(true)) {
         a.server().createQueue(QueueConfiguration.of(QUEUE).setRoutingType(RoutingType.ANYCAST));

         long sendStart = System.currentTimeMillis();
         send(aLocator, 10);
         long sendEnd = System.currentTimeMillis();
         Thread.sleep(OUTAGE_MILLIS); // dc2 is down: the 10 messages wait in dc1's mirror queue
         b.start();

         assertEquals("passive", attr(b, "SiteRole"));
         await("mirrored messages on dc2", () -> (Long) attr(b, "MirroredMessagesTotal"), v -> v == 10, WAIT);
         long arrived = System.currentTimeMillis();

         JsonObject orders = replicationOf(b, QUEUE);
         assertNotNull(orders, "per-address replication stats for " + QUEUE);
         assertEquals(10, orders.getJsonObject("total").getJsonNumber("messages").longValue());
         assertEquals(10, orders.getJsonObject("window").getJsonNumber("latencySamples").longValue());
         assertEquals(0, orders.getJsonObject("total").getJsonNumber("untimed").longValue());
         assertEquals(0, orders.getJsonObject("total").getJsonNumber("clockSkewSamples").longValue());
         double p50 = orders.getJsonNumber("p50Seconds").doubleValue();
         double max = orders.getJsonNumber("maxSeconds").doubleValue();
         double outage = OUTAGE_MILLIS / 1000.0;
         double upperBound = (arrived - sendStart) / 1000.0;
         assertTrue(p50 >= outage && p50 <= upperBound, "p50 " + p50 + " within [" + outage + ", " + upperBound + "]");
         assertTrue(max >= p50 && max <= upperBound, "max " + max + " <= " + upperBound);
         double p99 = (Double) attr(b, "ReplicationLatencyP99Seconds");
         assertTrue(p99 >= outage && p99 <= upperBound, "headline p99 " + p99);
         assertEquals(10L, attr(b, "ReplicationSamplesInWindow"));
         // the newest origin time lies in [sendStart, sendEnd], the read happens in [beforeRead, afterRead]
         long beforeRead = System.currentTimeMillis();
         double newestAge = (Double) attr(b, "NewestMirroredEventAgeSeconds");
         long afterRead = System.currentTimeMillis();
         assertTrue(newestAge >= (beforeRead - sendEnd) / 1000.0 && newestAge <= (afterRead - sendStart) / 1000.0,
                    "newest event age " + newestAge);

         // dc2 is passive: a client producer there is refused while the mirror keeps flowing
         try (ServerLocator bLocator = b.locator("clients").setBlockOnDurableSend(true)) {
            ActiveMQSecurityException refused = assertThrows(ActiveMQSecurityException.class, () -> send(bLocator, 1));
            assertTrue(refused.getMessage().contains("is PASSIVE"), refused.getMessage());
         }
         send(aLocator, 5);
         await("mirrored messages on dc2", () -> (Long) attr(b, "MirroredMessagesTotal"), v -> v == 15, WAIT);
         assertTrue((Double) attr(b, "LastMirroredArrivalAgeSeconds") < 5.0);
         assertTrue((Double) attr(b, "NewestMirroredEventAgeSeconds") < 5.0);
         Queue replica = b.server().locateQueue(SimpleString.of(QUEUE));
         // arrivals are counted when routed; the mirror's transaction adds them to the queue right after
         await("replica message count", replica::getMessageCount, v -> v == 15, WAIT);

         // consuming on dc1 mirrors the acks: dc2 applies them without a consumer of its own
         try (ClientSessionFactory f = aLocator.createSessionFactory(); ClientSession s = f.createSession(true, true, 0)) {
            ClientConsumer c = s.createConsumer(QUEUE);
            s.start();
            for (int i = 0; i < 15; i++) {
               ClientMessage m = c.receive(5_000);
               assertNotNull(m);
               m.acknowledge();
            }
         }
         await("replica drained by mirrored acks", replica::getMessageCount, v -> v == 0, WAIT);
         // the plugin counts an ack in its hook, which may run just after the queue count dropped: wait for it too
         await("mirrored acks counted", () -> JsonLoader.readObject(new StringReader((String) attr(b, "AckModel")))
               .getJsonObject(QUEUE).getJsonObject("total").getJsonNumber("nonClientAcks").longValue(), v -> v == 15, WAIT);
         JsonObject ackModel = JsonLoader.readObject(new StringReader((String) attr(b, "AckModel"))).getJsonObject(QUEUE);
         assertEquals(15, ackModel.getJsonObject("total").getJsonNumber("nonClientAcks").longValue());
         assertEquals(0, ackModel.getJsonObject("total").getJsonNumber("acks").longValue(), "no client acked on dc2");

         // dc2's own outgoing mirror (an internal consumer on its mirror queue) was not refused
         Queue dc2MirrorQueue = b.server().locateQueue(SimpleString.of("$ACTIVEMQ_ARTEMIS_MIRROR_to-dc1"));
         assertNotNull(dc2MirrorQueue);
         await("dc2's mirror consumer", dc2MirrorQueue::getConsumerCount, v -> v == 1, WAIT);
         assertEquals(0L, attr(b, "PassiveGuardRefusedConsumers"));
         assertEquals(1L, attr(b, "PassiveGuardRefusals"), "only the client producer");

         // dc1 only receives mirror traffic for what happens on dc2, and nothing was produced there: its own sends are not mistaken for mirrored arrivals
         assertEquals(0L, attr(a, "MirroredMessagesTotal"));
         assertEquals(-1.0, (Double) attr(a, "NewestMirroredEventAgeSeconds"));
         JsonObject dc1Acks = JsonLoader.readObject(new StringReader((String) attr(a, "AckModel"))).getJsonObject(QUEUE);
         assertEquals(15, dc1Acks.getJsonObject("total").getJsonNumber("acks").longValue());
         assertInstanceOf(String.class, attr(a, "AckModel"));
      } finally {
         a.close();
         b.close();
      }
   }
}
