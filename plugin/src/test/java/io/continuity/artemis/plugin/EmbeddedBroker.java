package io.continuity.artemis.plugin;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Predicate;
import java.util.function.Supplier;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.activemq.artemis.api.core.client.ActiveMQClient;
import org.apache.activemq.artemis.api.core.client.ServerLocator;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.impl.ConfigurationImpl;
import org.apache.activemq.artemis.core.security.Role;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.ActiveMQServers;
import org.apache.activemq.artemis.core.server.JournalType;
import org.apache.activemq.artemis.spi.core.security.ActiveMQJAASSecurityManager;
import org.apache.activemq.artemis.spi.core.security.jaas.InVMLoginModule;
import org.apache.activemq.artemis.core.config.impl.SecurityConfiguration;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * A real Artemis broker in this JVM with Netty acceptors on 127.0.0.1 ports picked free at build time, and the
 * continuity plugin registered the way broker.xml does it (init with the properties, then registration). Each
 * {@link #start()} builds a fresh configuration and a fresh plugin instance, so a stop/start is a restart as far as
 * the plugin can tell.
 */
final class EmbeddedBroker implements AutoCloseable {

   static final MBeanServer MBEANS = ManagementFactory.getPlatformMBeanServer();

   private final String name;
   private final Path dir;
   private final Map<String, Integer> acceptors = new LinkedHashMap<>();
   private final Map<String, String> pluginProperties = new LinkedHashMap<>();
   private final Map<String, String> users = new LinkedHashMap<>();
   private final List<Consumer<Configuration>> customizers = new ArrayList<>();
   private boolean persistent;

   private ActiveMQServer server;
   private ContinuityPlugin plugin;

   EmbeddedBroker(String name, Path dir) {
      this.name = name;
      this.dir = dir;
   }

   EmbeddedBroker acceptor(String acceptorName) {
      acceptors.put(acceptorName, freePort());
      return this;
   }

   EmbeddedBroker pluginProperty(String key, String value) {
      pluginProperties.put(key, value);
      return this;
   }

   /** Turns security on with this user (role "amq", allowed everything). */
   EmbeddedBroker user(String user, String password) {
      users.put(user, password);
      return this;
   }

   EmbeddedBroker persistent() {
      this.persistent = true;
      return this;
   }

   EmbeddedBroker configure(Consumer<Configuration> customizer) {
      customizers.add(customizer);
      return this;
   }

   int port(String acceptorName) {
      return acceptors.get(acceptorName);
   }

   EmbeddedBroker start() throws Exception {
      ConfigurationImpl config = new ConfigurationImpl();
      config.setName(name);
      config.setJournalDirectory(dir.resolve("data/journal").toString());
      config.setBindingsDirectory(dir.resolve("data/bindings").toString());
      config.setPagingDirectory(dir.resolve("data/paging").toString());
      config.setLargeMessagesDirectory(dir.resolve("data/large-messages").toString());
      config.setNodeManagerLockDirectory(dir.resolve("data").toString());
      config.setJournalType(JournalType.NIO);
      config.setJournalFileSize(1024 * 1024);
      config.setJournalMinFiles(2);
      config.setJournalPoolFiles(2);
      config.setJMXManagementEnabled(true);
      config.setSecurityEnabled(!users.isEmpty());
      config.setConfigurationFileRefreshPeriod(-1);
      for (Map.Entry<String, Integer> a : acceptors.entrySet()) {
         config.addAcceptorConfiguration(a.getKey(), "tcp://127.0.0.1:" + a.getValue() + "?protocols=CORE,AMQP");
      }
      config.putSecurityRoles("#", Set.of(new Role("amq", true, true, true, true, true, true, true, true, true, true, true, true)));
      customizers.forEach(c -> c.accept(config));

      ContinuityPlugin p = new ContinuityPlugin();
      p.init(pluginProperties);
      config.registerBrokerPlugin(p);

      SecurityConfiguration security = new SecurityConfiguration();
      users.forEach((u, pw) -> {
         security.addUser(u, pw);
         security.addRole(u, "amq");
      });
      ActiveMQServer s = ActiveMQServers.newActiveMQServer(config, MBEANS,
                                                          new ActiveMQJAASSecurityManager(InVMLoginModule.class.getName(), security),
                                                          persistent);
      s.start();
      if (!s.waitForActivation(30, TimeUnit.SECONDS)) {
         throw new IllegalStateException("broker " + name + " did not activate");
      }
      this.server = s;
      this.plugin = p;
      return this;
   }

   void stop() throws Exception {
      if (server != null) {
         server.stop();
         server = null;
      }
   }

   @Override
   public void close() throws Exception {
      stop();
   }

   ActiveMQServer server() {
      return server;
   }

   ContinuityPlugin plugin() {
      return plugin;
   }

   ObjectName mbean() throws Exception {
      return new ObjectName("org.apache.activemq.artemis:broker=\"" + name + "\",component=continuity");
   }

   Object attribute(String attribute) throws Exception {
      return MBEANS.getAttribute(mbean(), attribute);
   }

   Object invoke(String operation, Object... args) throws Exception {
      String[] signature = new String[args.length];
      for (int i = 0; i < args.length; i++) {
         signature[i] = String.class.getName();
      }
      return MBEANS.invoke(mbean(), operation, args, signature);
   }

   ServerLocator locator(String acceptorName) throws Exception {
      return ActiveMQClient.createServerLocator("tcp://127.0.0.1:" + port(acceptorName))
         .setReconnectAttempts(0)
         .setCallTimeout(10_000);
   }

   static int freePort() {
      try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
         return socket.getLocalPort();
      } catch (IOException e) {
         throw new IllegalStateException(e);
      }
   }

   /** Polls until the value satisfies the condition; fails with the last value seen. */
   static <T> T await(String what, Supplier<T> value, Predicate<T> condition, Duration timeout) throws InterruptedException {
      long deadline = System.nanoTime() + timeout.toNanos();
      T last = value.get();
      while (!condition.test(last)) {
         if (System.nanoTime() > deadline) {
            fail("timed out after " + timeout + " waiting for " + what + "; last value: " + last);
         }
         Thread.sleep(20);
         last = value.get();
      }
      return last;
   }
}
