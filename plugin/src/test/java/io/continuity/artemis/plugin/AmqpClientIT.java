package io.continuity.artemis.plugin;

import java.io.StringReader;
import java.nio.file.Path;
import java.time.Duration;

import javax.jms.Connection;
import javax.jms.JMSException;
import javax.jms.JMSSecurityException;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;

import org.apache.activemq.artemis.api.core.QueueConfiguration;
import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.json.JsonObject;
import org.apache.activemq.artemis.utils.JsonLoader;
import org.apache.qpid.jms.JmsConnectionFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static io.continuity.artemis.plugin.EmbeddedBroker.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** AMQP (qpid-jms) clients: what the broker can tell of their ack modes, and the guard's refusals over AMQP. */
class AmqpClientIT {

   private static final Duration WAIT = Duration.ofSeconds(10);

   @TempDir
   static Path dir;

   static EmbeddedBroker broker;
   static JmsConnectionFactory factory;

   @BeforeAll
   static void start() throws Exception {
      broker = new EmbeddedBroker("amqp", dir).acceptor("clients").start();
      factory = new JmsConnectionFactory("amqp://127.0.0.1:" + broker.port("clients"));
   }

   @AfterAll
   static void stop() throws Exception {
      broker.close();
   }

   private static void produce(String queue, int count) throws Exception {
      broker.server().createQueue(QueueConfiguration.of(queue).setRoutingType(RoutingType.ANYCAST).setDurable(false));
      try (Connection c = factory.createConnection()) {
         Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
         MessageProducer p = s.createProducer(s.createQueue(queue));
         for (int i = 0; i < count; i++) {
            p.send(s.createTextMessage("m" + i));
         }
      }
   }

   private static JsonObject stats(String address) throws Exception {
      JsonObject all = JsonLoader.readObject(new StringReader((String) broker.attribute("AckModel")));
      return all.getJsonObject(address);
   }

   private static long acks(String address) {
      try {
         JsonObject a = stats(address);
         return a == null ? -1 : a.getJsonObject("total").getJsonNumber("acks").longValue();
      } catch (Exception e) {
         throw new IllegalStateException(e);
      }
   }

   @Test
   void transactedAmqpConsumerIsSeenAsTransactedWithOneAckCallPerCommit() throws Exception {
      String q = "amqp.transacted";
      produce(q, 8);
      try (Connection c = factory.createConnection()) {
         c.start();
         Session s = c.createSession(true, Session.SESSION_TRANSACTED);
         MessageConsumer consumer = s.createConsumer(s.createQueue(q));
         for (int batch = 0; batch < 2; batch++) {
            for (int i = 0; i < 4; i++) {
               assertNotNull(consumer.receive(5_000));
            }
            s.commit();
         }
      }
      await("acks on " + q, () -> acks(q), v -> v == 8, WAIT);
      JsonObject a = stats(q);
      assertEquals(1.0, a.getJsonObject("ackModeShare").getJsonNumber("transacted").doubleValue(), 1e-9);
      assertEquals(2, a.getJsonObject("total").getJsonNumber("ackCalls").longValue());
      assertEquals(4.0, a.getJsonNumber("acksPerAckCall").doubleValue(), 1e-9);
   }

   @Test
   void clientAcknowledgedAmqpConsumerSettlesEachDeliveryAndIsUnclassified() throws Exception {
      String q = "amqp.client";
      produce(q, 5);
      try (Connection c = factory.createConnection()) {
         c.start();
         Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
         MessageConsumer consumer = s.createConsumer(s.createQueue(q));
         Message last = null;
         for (int i = 0; i < 5; i++) {
            last = consumer.receive(5_000);
            assertNotNull(last);
         }
         last.acknowledge(); // JMS: acknowledges all 5; AMQP settles them one disposition each
      }
      await("acks on " + q, () -> acks(q), v -> v == 5, WAIT);
      JsonObject a = stats(q);
      assertEquals(1.0, a.getJsonObject("ackModeShare").getJsonNumber("unclassified").doubleValue(), 1e-9);
      assertEquals(1.0, a.getJsonNumber("acksPerAckCall").doubleValue(), 1e-9);
      assertEquals(5, a.getJsonObject("window").getJsonNumber("latencySamples").longValue());
   }

   @Test
   void passiveSiteRefusesAmqpProducersAndConsumers() throws Exception {
      String q = "amqp.guarded";
      produce(q, 1);
      long before = (Long) broker.attribute("PassiveGuardRefusals");
      long clientsBefore = (Long) broker.attribute("PassiveGuardRefusedClients");
      broker.invoke("setSiteRole", "passive");
      try (Connection c = factory.createConnection()) {
         c.start();
         Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
         Queue queue = s.createQueue(q);
         // the link is refused as unauthorized access (JMSSecurityException), the connection stays up
         JMSException consumerRefused = assertThrows(JMSSecurityException.class, () -> s.createConsumer(queue));
         assertTrue(String.valueOf(consumerRefused.getMessage()).contains("is PASSIVE"), consumerRefused.getMessage());
         MessageProducer p = s.createProducer(queue);
         JMSException sendRefused = assertThrows(JMSException.class, () -> p.send(s.createTextMessage("refused")));
         assertTrue(String.valueOf(sendRefused.getMessage()).contains("is PASSIVE"), sendRefused.getMessage());
      } finally {
         broker.invoke("setSiteRole", "active");
      }
      assertEquals(before + 2, (Long) broker.attribute("PassiveGuardRefusals"));
      assertEquals(clientsBefore + 1, (Long) broker.attribute("PassiveGuardRefusedClients"), "one connection, logged once");
      assertEquals(1, broker.server().locateQueue(q).getMessageCount(), "nothing consumed or added while passive");
      assertEquals(0, broker.server().locateQueue(q).getConsumerCount(), "the refused AMQP consumer left nothing behind");
   }
}
