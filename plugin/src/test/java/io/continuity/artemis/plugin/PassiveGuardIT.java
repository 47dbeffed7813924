package io.continuity.artemis.plugin;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Consumer;

import javax.management.InstanceNotFoundException;
import javax.management.MBeanException;
import javax.management.MBeanInfo;
import javax.management.MBeanOperationInfo;

import org.apache.activemq.artemis.api.core.ActiveMQSecurityException;
import org.apache.activemq.artemis.api.core.QueueConfiguration;
import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.api.core.client.ClientConsumer;
import org.apache.activemq.artemis.api.core.client.ClientMessage;
import org.apache.activemq.artemis.api.core.client.ClientProducer;
import org.apache.activemq.artemis.api.core.client.ClientRequestor;
import org.apache.activemq.artemis.api.core.client.ClientSession;
import org.apache.activemq.artemis.api.core.client.ClientSessionFactory;
import org.apache.activemq.artemis.api.core.client.ServerLocator;
import org.apache.activemq.artemis.api.core.management.ManagementHelper;
import org.apache.activemq.artemis.api.core.management.ResourceNames;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The passive-site guard on a broker with security on, two acceptors ("clients", "mirror") and two users ("app",
 * "mirror"): the role is switched through the MBean, clients are refused while passive, the mirror user and the
 * mirror acceptor are let through, and the role survives a restart.
 */
class PassiveGuardIT {

   private static final String QUEUE = "orders";

   @TempDir
   Path dir;

   private EmbeddedBroker broker(Path stateFile) {
      return new EmbeddedBroker("guard", dir)
         .persistent() // the queue and its messages survive the restart too
         .acceptor("clients")
         .acceptor("mirror")
         .user("app", "app-pw")
         .user("mirror", "mirror-pw")
         .pluginProperty("mirror-users", "mirror")
         .pluginProperty("mirror-acceptors", "mirror")
         .pluginProperty("state-file", stateFile.toString());
   }

   /** Runs the body with a session of that user through that acceptor. */
   private static void as(EmbeddedBroker b, String acceptor, String user, Consumer<ClientSession> body) throws Exception {
      try (ServerLocator locator = b.locator(acceptor).setBlockOnDurableSend(true).setBlockOnNonDurableSend(true);
           ClientSessionFactory f = locator.createSessionFactory();
           ClientSession s = f.createSession(user, user + "-pw", false, true, true, false, 0)) {
         s.start();
         body.accept(s);
      }
   }

   private static void send(ClientSession s, String text) {
      try (ClientProducer p = s.createProducer(QUEUE)) {
         ClientMessage m = s.createMessage(true);
         m.getBodyBuffer().writeString(text);
         p.send(m);
      } catch (Exception e) {
         throw new RuntimeException(e);
      }
   }

   private static String receive(ClientSession s) {
      try (ClientConsumer c = s.createConsumer(QUEUE)) {
         ClientMessage m = c.receive(5_000);
         assertNotNull(m, "expected a message on " + QUEUE);
         m.acknowledge();
         return m.getBodyBuffer().readString();
      } catch (Exception e) {
         throw new RuntimeException(e);
      }
   }

   private static ActiveMQSecurityException refusal(Throwable t) {
      Throwable e = t instanceof RuntimeException && t.getCause() != null ? t.getCause() : t;
      ActiveMQSecurityException sec = assertInstanceOf(ActiveMQSecurityException.class, e);
      assertTrue(sec.getMessage().contains("is PASSIVE"), sec.getMessage());
      return sec;
   }

   @Test
   void passiveSiteRefusesClientsButNotTheMirrorAndSurvivesARestart() throws Exception {
      Path stateFile = dir.resolve("state/continuity-site-role");
      EmbeddedBroker b = broker(stateFile).start();
      try {
         b.server().createQueue(QueueConfiguration.of(QUEUE).setRoutingType(RoutingType.ANYCAST));
         assertEquals("active", b.attribute("SiteRole"));
         assertFalse(Files.exists(stateFile), "nothing persisted before the first change");

         // active: the application works
         as(b, "clients", "app", s -> {
            send(s, "while-active");
            assertEquals("while-active", receive(s));
         });

         // a consumer opened while active, still open when the site turns passive
         try (ServerLocator locator = b.locator("clients");
              ClientSessionFactory f = locator.createSessionFactory();
              ClientSession early = f.createSession("app", "app-pw", false, true, true, false, 0)) {
            ClientConsumer earlyConsumer = early.createConsumer(QUEUE);
            early.start();

            assertEquals("passive", b.invoke("setSiteRole", "passive"));
            assertEquals("passive", b.attribute("SiteRole"));
            assertTrue(Files.readString(stateFile).contains("role=passive"));

            // the application is refused: three sends and one consumer on one connection
            as(b, "clients", "app", s -> {
               for (int i = 0; i < 3; i++) {
                  refusal(assertThrows(RuntimeException.class, () -> send(s, "refused")));
               }
               refusal(assertThrows(Exception.class, () -> s.createConsumer(QUEUE)));
               assertEquals(1, b.server().locateQueue(QUEUE).getConsumerCount(), "the refused consumer is gone, the early one stays");
               // browsing does not consume and stays allowed
               try (ClientConsumer browser = s.createConsumer(QUEUE, true)) {
                  assertNotNull(browser);
               } catch (Exception e) {
                  throw new RuntimeException(e);
               }
               // management requests (CLI tools, console) keep working on a passive site
               try (ClientRequestor requestor = new ClientRequestor(s, "activemq.management")) {
                  ClientMessage request = s.createMessage(false);
                  ManagementHelper.putAttribute(request, ResourceNames.BROKER, "version");
                  ClientMessage reply = requestor.request(request, 5_000);
                  assertNotNull(reply);
                  assertTrue(ManagementHelper.hasOperationSucceeded(reply));
               } catch (Exception e) {
                  throw new RuntimeException(e);
               }
            });
            assertEquals(3L, b.attribute("PassiveGuardRefusedSends"));
            assertEquals(1L, b.attribute("PassiveGuardRefusedConsumers"));
            assertEquals(4L, b.attribute("PassiveGuardRefusals"));
            assertEquals(1L, b.attribute("PassiveGuardRefusedClients"), "logged once for the connection, not per refusal");

            // the mirror user is let through on the client acceptor, any user on the mirror acceptor
            as(b, "clients", "mirror", s -> send(s, "from-mirror-user"));
            as(b, "mirror", "app", s -> send(s, "via-mirror-acceptor"));
            assertEquals(4L, b.attribute("PassiveGuardRefusals"), "nothing refused for the mirror");

            // a browser sees what the mirror brought (the canary post-gate reads a passive site this way)
            as(b, "clients", "app", s -> {
               try (ClientConsumer browser = s.createConsumer(QUEUE, true)) {
                  s.start();
                  ClientMessage seen = browser.receive(5_000);
                  assertNotNull(seen, "the browser got nothing on the passive site");
                  assertEquals("from-mirror-user", seen.getBodyBuffer().readString());
               } catch (Exception e) {
                  throw new RuntimeException(e);
               }
            });
            assertEquals(4L, b.attribute("PassiveGuardRefusals"), "browsing is not refused");

            // the consumer opened before the switch gets nothing more
            assertNull(earlyConsumer.receive(500));
            as(b, "mirror", "mirror", s -> {
               assertEquals("from-mirror-user", receive(s));
               assertEquals("via-mirror-acceptor", receive(s));
            });
         }

         // a bad role is rejected clearly and changes nothing
         MBeanException bad = assertThrows(MBeanException.class, () -> b.invoke("setSiteRole", "bogus"));
         assertInstanceOf(IllegalArgumentException.class, bad.getCause());
         assertEquals("site role must be 'active' or 'passive', got 'bogus'", bad.getCause().getMessage());
         assertEquals("passive", b.attribute("SiteRole"));
         assertTrue(Files.readString(stateFile).contains("role=passive"));

         // restart: the broker stops (MBean gone), a new configuration and plugin instance start with the same file
         b.stop();
         assertThrows(InstanceNotFoundException.class, () -> b.attribute("SiteRole"));
         b.start();
         assertEquals("passive", b.attribute("SiteRole"));
         assertEquals(0L, b.attribute("PassiveGuardRefusals"), "a fresh plugin instance");
         as(b, "clients", "app", s -> refusal(assertThrows(RuntimeException.class, () -> send(s, "after-restart"))));
         assertEquals(1L, b.attribute("PassiveGuardRefusals"));

         // back to active
         assertEquals("active", b.invoke("setSiteRole", "ACTIVE"));
         as(b, "clients", "app", s -> {
            send(s, "active-again");
            assertEquals("active-again", receive(s));
         });
         assertTrue(Files.readString(stateFile).contains("role=active"));
      } finally {
         b.close();
      }
   }

   @Test
   void initialRoleAppliesOnlyWithoutAStateFileAndTheMBeanDescribesItself() throws Exception {
      Path stateFile = dir.resolve("role-file");
      EmbeddedBroker b = broker(stateFile).pluginProperty("initial-role", "passive").start();
      try {
         assertEquals("passive", b.attribute("SiteRole"));
         b.invoke("setSiteRole", "active");
         b.stop();
         b.start();
         assertEquals("active", b.attribute("SiteRole"), "the state file wins over initial-role");

         MBeanInfo info = EmbeddedBroker.MBEANS.getMBeanInfo(b.mbean());
         assertTrue(info.getAttributes().length >= 30);
         for (var a : info.getAttributes()) {
            assertFalse(a.isWritable(), a.getName() + " must be read-only");
            assertFalse(a.getDescription().isBlank(), a.getName());
         }
         MBeanOperationInfo[] ops = info.getOperations();
         assertEquals(2, ops.length);
         // every attribute can be read in one bulk call, as Jolokia does for a read without attribute list
         String[] names = java.util.Arrays.stream(info.getAttributes()).map(a -> a.getName()).toArray(String[]::new);
         var values = EmbeddedBroker.MBEANS.getAttributes(b.mbean(), names);
         assertEquals(names.length, values.size());
         values.asList().forEach(v -> assertNotNull(v.getValue(), v.getName()));

         // the same server object restarted (the embedded pattern): same plugin instance, registered again
         b.invoke("setSiteRole", "passive");
         b.server().stop();
         assertThrows(InstanceNotFoundException.class, () -> b.attribute("SiteRole"));
         b.server().start();
         assertTrue(b.server().waitForActivation(30, java.util.concurrent.TimeUnit.SECONDS));
         assertEquals("passive", b.attribute("SiteRole"));
      } finally {
         b.close();
      }
   }

   @Test
   void theMirrorUserComesInOnlyThroughTheMirrorAcceptor() throws Exception {
      EmbeddedBroker b = broker(dir.resolve("role2")).pluginProperty("mirror-user-acceptors", "mirror").start();
      try {
         b.server().createQueue(QueueConfiguration.of(QUEUE).setRoutingType(RoutingType.ANYCAST));
         as(b, "clients", "app", s -> send(s, "application data"));
         // through the client acceptor the mirror user gets no session, even on an active site: it can neither inject,
         // read nor browse application messages
         Exception refused = assertThrows(Exception.class, () -> as(b, "clients", "mirror", s -> send(s, "injected")));
         ActiveMQSecurityException sec = assertInstanceOf(ActiveMQSecurityException.class, refused);
         assertTrue(sec.getMessage().contains("is a mirror user and may only come in through mirror"), sec.getMessage());
         assertEquals("active", b.attribute("SiteRole"));
         assertEquals("mirror", b.attribute("MirrorUserAcceptors"));
         assertEquals(1L, b.attribute("MirrorUserRefusals"));
         // through the mirror acceptor it works as before (what an incoming mirror does)
         as(b, "mirror", "mirror", s -> {
            send(s, "mirrored");
            assertEquals("application data", receive(s));
            assertEquals("mirrored", receive(s));
         });
         assertEquals(2L, b.server().locateQueue(QUEUE).getMessagesAdded(), "the injected message never arrived");
      } finally {
         b.close();
      }
   }
}
