package io.continuity.artemis.plugin;

import java.io.StringReader;
import java.nio.file.Path;
import java.time.Duration;

import org.apache.activemq.artemis.api.core.QueueConfiguration;
import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.api.core.client.ClientConsumer;
import org.apache.activemq.artemis.api.core.client.ClientMessage;
import org.apache.activemq.artemis.api.core.client.ClientProducer;
import org.apache.activemq.artemis.api.core.client.ClientSession;
import org.apache.activemq.artemis.api.core.client.ClientSessionFactory;
import org.apache.activemq.artemis.api.core.client.ServerLocator;
import org.apache.activemq.artemis.json.JsonObject;
import org.apache.activemq.artemis.utils.JsonLoader;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static io.continuity.artemis.plugin.EmbeddedBroker.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The ack model against known sequences of sends, deliveries and acks, read back through the MBean. The consumer
 * window is 0 so the broker delivers exactly one message per receive() and the delivery counts are deterministic.
 */
class AckModelIT {

   private static final Duration WAIT = Duration.ofSeconds(10);

   @TempDir
   static Path dir;

   static EmbeddedBroker broker;
   static ServerLocator locator;
   static ClientSessionFactory factory;

   @BeforeAll
   static void startBroker() throws Exception {
      broker = new EmbeddedBroker("ackmodel", dir).acceptor("clients").start();
      locator = broker.locator("clients").setConsumerWindowSize(0).setBlockOnAcknowledge(true).setBlockOnNonDurableSend(true);
      factory = locator.createSessionFactory();
   }

   @AfterAll
   static void stopBroker() throws Exception {
      if (factory != null) {
         factory.close();
      }
      if (locator != null) {
         locator.close();
      }
      broker.close();
   }

   private static void sendTo(String queue, int count) throws Exception {
      try (ClientSession session = factory.createSession()) {
         session.createQueue(QueueConfiguration.of(queue).setRoutingType(RoutingType.ANYCAST).setDurable(false));
         try (ClientProducer producer = session.createProducer(queue)) {
            for (int i = 0; i < count; i++) {
               producer.send(session.createMessage(false).putIntProperty("i", i));
            }
         }
      }
   }

   private static ClientMessage receive(ClientConsumer consumer) throws Exception {
      ClientMessage m = consumer.receive(5_000);
      assertNotNull(m, "expected a message");
      return m;
   }

   private static JsonObject addressStats(String address) throws Exception {
      JsonObject all = JsonLoader.readObject(new StringReader((String) broker.attribute("AckModel")));
      return all.getJsonObject(address);
   }

   private static long total(String address, String field) {
      try {
         JsonObject a = addressStats(address);
         return a == null ? -1 : a.getJsonObject("total").getJsonNumber(field).longValue();
      } catch (Exception e) {
         throw new IllegalStateException(e);
      }
   }

   private static long inFlight(String address) throws Exception {
      JsonObject a = addressStats(address);
      return a == null ? 0 : a.getJsonNumber("inFlight").longValue();
   }

   @Test
   void clientAcknowledgeInBatchesOfFive() throws Exception {
      String q = "acks.client";
      sendTo(q, 10);
      // JMS CLIENT_ACKNOWLEDGE as the core JMS client opens it: autoCommitSends=true, autoCommitAcks=false
      try (ClientSession session = factory.createSession(true, false, 0)) {
         ClientConsumer consumer = session.createConsumer(q);
         session.start();
         for (int batch = 1; batch <= 2; batch++) {
            for (int i = 0; i < 5; i++) {
               receive(consumer).acknowledge();
            }
            assertEquals(5, inFlight(q), "5 delivered, acked by the client but not committed yet");
            assertEquals(5L * (batch - 1), total(q, "acks"), "acks count only once committed");
            Thread.sleep(300); // deliver-to-ack latency of at least 0.3 s
            session.commit();
            final int expected = 5 * batch;
            await("acks on " + q, () -> total(q, "acks"), v -> v == expected, WAIT);
         }
         assertEquals(0, inFlight(q));
         JsonObject a = addressStats(q);
         assertEquals(10, a.getJsonObject("total").getJsonNumber("deliveries").longValue());
         assertEquals(2, a.getJsonObject("total").getJsonNumber("ackCalls").longValue());
         assertEquals(5.0, a.getJsonNumber("acksPerAckCall").doubleValue(), 1e-9);
         assertEquals(1.0, a.getJsonObject("ackModeShare").getJsonNumber("clientAcknowledged").doubleValue(), 1e-9);
         assertEquals(10, a.getJsonObject("window").getJsonNumber("latencySamples").longValue());
         double p50 = a.getJsonNumber("ackLatencyP50Seconds").doubleValue();
         double p99 = a.getJsonNumber("ackLatencyP99Seconds").doubleValue();
         assertTrue(p50 >= 0.3 && p50 < 10, "p50 " + p50);
         assertTrue(p99 >= p50 && p99 < 10, "p99 " + p99);
         // the open consumer is listed with its own counts
         JsonObject c = a.getJsonArray("consumers").getJsonObject(0);
         assertEquals(10, c.getJsonNumber("acks").longValue());
         assertEquals(2, c.getJsonNumber("ackCalls").longValue());
         assertEquals("clientAcknowledged", c.getString("ackMode"));
         assertEquals(0, c.getJsonNumber("inFlight").longValue());
      }
   }

   @Test
   void autoAcknowledgeSingleAndCumulative() throws Exception {
      String single = "acks.auto.single";
      String cumulative = "acks.auto.cumulative";
      sendTo(single, 10);
      sendTo(cumulative, 10);
      // ackBatchSize 0: every acknowledge() goes to the broker on its own
      try (ClientSession session = factory.createSession(true, true, 0)) {
         ClientConsumer consumer = session.createConsumer(single);
         session.start();
         for (int i = 0; i < 10; i++) {
            receive(consumer).acknowledge();
         }
      }
      // ackBatchSize 1 MiB: the client holds acks back and sends one cumulative ack for all 10 when the session closes
      try (ClientSession session = factory.createSession(true, true, 1024 * 1024)) {
         ClientConsumer consumer = session.createConsumer(cumulative);
         session.start();
         for (int i = 0; i < 10; i++) {
            receive(consumer).acknowledge();
         }
         assertEquals(10, inFlight(cumulative), "acks still held by the client");
      }
      await("acks on " + single, () -> total(single, "acks"), v -> v == 10, WAIT);
      await("acks on " + cumulative, () -> total(cumulative, "acks"), v -> v == 10, WAIT);

      JsonObject s = addressStats(single);
      assertEquals(10, s.getJsonObject("total").getJsonNumber("ackCalls").longValue());
      assertEquals(1.0, s.getJsonNumber("acksPerAckCall").doubleValue(), 1e-9);
      assertEquals(1.0, s.getJsonObject("ackModeShare").getJsonNumber("autoAcknowledged").doubleValue(), 1e-9);

      JsonObject c = addressStats(cumulative);
      assertEquals(1, c.getJsonObject("total").getJsonNumber("ackCalls").longValue());
      assertEquals(10.0, c.getJsonNumber("acksPerAckCall").doubleValue(), 1e-9);
      assertEquals(1.0, c.getJsonObject("ackModeShare").getJsonNumber("autoAcknowledged").doubleValue(), 1e-9);
      assertEquals(0, inFlight(cumulative));
   }

   @Test
   void transactedWithARollback() throws Exception {
      String q = "acks.transacted";
      sendTo(q, 8);
      try (ClientSession session = factory.createSession(false, false)) {
         ClientConsumer consumer = session.createConsumer(q);
         session.start();
         for (int i = 0; i < 4; i++) {
            receive(consumer).acknowledge();
         }
         session.commit();
         for (int i = 0; i < 4; i++) {
            receive(consumer).acknowledge();
         }
         session.rollback(); // the 4 go back to the queue and are delivered again
         for (int i = 0; i < 4; i++) {
            receive(consumer).acknowledge();
         }
         session.commit();
         assertNull(consumer.receiveImmediate());
      }
      await("acks on " + q, () -> total(q, "acks"), v -> v == 8, WAIT);
      JsonObject a = addressStats(q);
      assertEquals(12, a.getJsonObject("total").getJsonNumber("deliveries").longValue(), "8 + 4 redeliveries");
      assertEquals(2, a.getJsonObject("total").getJsonNumber("ackCalls").longValue(), "the rolled back transaction is no ack call");
      assertEquals(4.0, a.getJsonNumber("acksPerAckCall").doubleValue(), 1e-9);
      assertEquals(1.0, a.getJsonObject("ackModeShare").getJsonNumber("transacted").doubleValue(), 1e-9);
      assertEquals(0, inFlight(q));
   }

   @Test
   void preAcknowledgeHasNothingInFlightAndNoLatency() throws Exception {
      String q = "acks.preack";
      sendTo(q, 6);
      try (ClientSession session = factory.createSession(null, null, false, true, true, true, 0)) {
         ClientConsumer consumer = session.createConsumer(q);
         session.start();
         for (int i = 0; i < 6; i++) {
            receive(consumer);
         }
      }
      await("acks on " + q, () -> total(q, "acks"), v -> v == 6, WAIT);
      JsonObject a = addressStats(q);
      assertEquals(6, a.getJsonObject("total").getJsonNumber("deliveries").longValue());
      assertEquals(0, a.getJsonObject("window").getJsonNumber("latencySamples").longValue());
      assertEquals(1.0, a.getJsonObject("ackModeShare").getJsonNumber("autoAcknowledged").doubleValue(), 1e-9);
      assertEquals(0, inFlight(q));
   }

   @Test
   void headlineAttributesAreConsistentWithTheAddresses() throws Exception {
      String q = "acks.headline";
      sendTo(q, 3);
      try (ClientSession session = factory.createSession(true, false, 0)) {
         ClientConsumer consumer = session.createConsumer(q);
         session.start();
         for (int i = 0; i < 3; i++) {
            receive(consumer).acknowledge();
         }
         // three deliveries on this address are in flight, the other tests' addresses have none left
         assertEquals(3L, broker.attribute("UnackedDeliveries"));
         session.commit();
         await("UnackedDeliveries", () -> {
            try {
               return (Long) broker.attribute("UnackedDeliveries");
            } catch (Exception e) {
               throw new IllegalStateException(e);
            }
         }, v -> v == 0, WAIT);
      }
      double acksPerSecond = (Double) broker.attribute("AcksPerSecond");
      double deliveriesPerSecond = (Double) broker.attribute("DeliveriesPerSecond");
      assertTrue(acksPerSecond > 0 && deliveriesPerSecond > 0, acksPerSecond + " / " + deliveriesPerSecond);
      // one snapshot: every delivery of this test class was acked (transacted redeliveries make deliveries larger)
      var window = broker.plugin().ackModel().overall();
      assertTrue(io.continuity.artemis.plugin.ackmodel.AckStats.deliveriesPerSecond(window) >= io.continuity.artemis.plugin.ackmodel.AckStats.acksPerSecond(window), "deliveries/s >= acks/s in one snapshot");
      double perCall = (Double) broker.attribute("AcksPerAckCall");
      assertTrue(perCall >= 1.0, "acks per call " + perCall);
      double shares = (Double) broker.attribute("TransactedAckShare") + (Double) broker.attribute("ClientAckShare") +
         (Double) broker.attribute("AutoAckShare") + (Double) broker.attribute("UnclassifiedAckShare");
      assertEquals(1.0, shares, 1e-9);
      assertEquals(-1.0, (Double) broker.attribute("ReplicationLatencyP99Seconds"), "no mirror on this broker");
   }
}
