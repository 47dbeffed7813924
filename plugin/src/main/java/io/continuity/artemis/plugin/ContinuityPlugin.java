package io.continuity.artemis.plugin;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import io.continuity.artemis.plugin.ackmodel.AckModelTracker;
import io.continuity.artemis.plugin.clients.AcceptorResolver;
import io.continuity.artemis.plugin.clients.SessionInfo;
import io.continuity.artemis.plugin.clients.SessionRegistry;
import io.continuity.artemis.plugin.guard.PassiveSiteGuard;
import io.continuity.artemis.plugin.guard.SiteRole;
import io.continuity.artemis.plugin.guard.SiteRoleStore;
import io.continuity.artemis.plugin.jmx.ContinuityControl;
import io.continuity.artemis.plugin.jmx.ControlRegistration;
import io.continuity.artemis.plugin.replication.ReplicationLatencyTracker;
import io.continuity.artemis.plugin.stats.TimeSource;
import org.apache.activemq.artemis.api.core.ActiveMQException;
import org.apache.activemq.artemis.api.core.ActiveMQSecurityException;
import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.core.persistence.OperationContext;
import org.apache.activemq.artemis.core.postoffice.RoutingStatus;
import org.apache.activemq.artemis.core.server.ActivateCallback;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.MessageReference;
import org.apache.activemq.artemis.core.server.RoutingContext;
import org.apache.activemq.artemis.core.server.ServerConsumer;
import org.apache.activemq.artemis.core.server.ServerSession;
import org.apache.activemq.artemis.core.server.impl.AckReason;
import org.apache.activemq.artemis.core.server.plugin.ActiveMQServerPlugin;
import org.apache.activemq.artemis.core.transaction.Transaction;
import org.apache.activemq.artemis.spi.core.protocol.RemotingConnection;
import org.apache.activemq.artemis.spi.core.protocol.SessionCallback;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The continuity broker plugin. This class only routes broker callbacks to the parts that do the work:
 * {@link PassiveSiteGuard} (refuse clients on a passive site), {@link AckModelTracker} (ack model),
 * {@link ReplicationLatencyTracker} (mirror replication latency), and exposes them through one MBean.
 *
 * <pre>{@code
 * <broker-plugins>
 *    <broker-plugin class-name="io.continuity.artemis.plugin.ContinuityPlugin">
 *       <property key="mirror-users" value="mirror"/>
 *    </broker-plugin>
 * </broker-plugins>
 * }</pre>
 *
 * A failure inside a measurement hook is logged (rate-limited) and swallowed: measuring must never break messaging.
 * Only the guard's refusals propagate to clients.
 */
public class ContinuityPlugin implements ActiveMQServerPlugin {

   private static final Logger LOG = LoggerFactory.getLogger(ContinuityPlugin.class);
   private static final long HOOK_ERROR_LOG_INTERVAL_MILLIS = 60_000;

   private final TimeSource time;
   private PluginConfig config = PluginConfig.parse(Map.of());

   private volatile ActiveMQServer server;
   private volatile SessionRegistry sessions;
   private volatile AcceptorResolver acceptorResolver;
   private volatile PassiveSiteGuard guard;
   private volatile AckModelTracker acks;
   private volatile ReplicationLatencyTracker replication;
   private volatile ControlRegistration registration;
   private volatile Instant statisticsSince = Instant.now();
   private ActivateCallback stopCallback;
   private ActiveMQServer callbackServer;
   private final AtomicLong lastHookErrorLog = new AtomicLong();

   public ContinuityPlugin() {
      this(TimeSource.SYSTEM);
   }

   /** For tests that drive the clock. */
   public ContinuityPlugin(TimeSource time) {
      this.time = time;
   }

   // ------------------------------------------------------------------ lifecycle

   @Override
   public void init(Map<String, String> properties) {
      config = PluginConfig.parse(properties);
      for (String unknown : PluginConfig.unknownKeys(properties)) {
         LOG.warn("continuity plugin: unknown property '{}' ignored (known: {})", unknown, PluginConfig.KNOWN);
      }
   }

   @Override
   public synchronized void registered(ActiveMQServer server) {
      this.server = server;
      Path dataDir = server.getConfiguration().getJournalLocation().toPath().toAbsolutePath().getParent();
      Path stateFile = config.stateFileOr(dataDir);
      if (!stateFile.isAbsolute() && server.getConfiguration().getBrokerInstance() != null) {
         stateFile = server.getConfiguration().getBrokerInstance().toPath().resolve(stateFile); // as Artemis does for its directories
      }
      SiteRoleStore store = new SiteRoleStore(stateFile.toAbsolutePath());
      SiteRoleStore.Loaded loaded = store.load(config.initialRole());
      if (loaded.problem() != null) {
         LOG.error("continuity plugin: {}; starting PASSIVE (fail closed). Fix or remove the file, or call setSiteRole.", loaded.problem());
      }
      String brokerName = server.getConfiguration().getName();
      SimpleString managementAddress = server.getConfiguration().getManagementAddress();

      this.acceptorResolver = new AcceptorResolver(server);
      this.sessions = new SessionRegistry(acceptorResolver);
      this.guard = new PassiveSiteGuard(store, loaded.role(), config.mirrorUsers(), config.mirrorAcceptors(),
                                        config.mirrorUserAcceptors(), managementAddress, brokerName, LOG::error);
      this.acks = new AckModelTracker(server, sessions, time, config.windowMillis(), PluginConfig.WINDOW_SLOTS,
                                      config.maxAddresses(), config.includeInternalQueues());
      this.replication = new ReplicationLatencyTracker(time, config.windowMillis(), PluginConfig.WINDOW_SLOTS,
                                                       config.maxAddresses(), config.latencyOrigin());
      this.statisticsSince = Instant.now();

      ContinuityControl control = new ContinuityControl(
         ContinuityAttributes.of(config, guard, acks, replication, () -> statisticsSince.toString()),
         this::setSiteRole, this::resetStatistics, LOG::warn);
      ControlRegistration reg = new ControlRegistration(server.getConfiguration().getJMXDomain(), brokerName);
      try {
         reg.register(control);
         this.registration = reg;
      } catch (Exception e) {
         LOG.error("continuity plugin: cannot register MBean {}: {}", reg.name(), e.toString());
      }
      if (stopCallback != null && callbackServer != null) {
         callbackServer.unregisterActivateCallback(stopCallback); // registered again by a restart of the same broker object
      }
      stopCallback = new ActivateCallback() {
         @Override
         public void stop(ActiveMQServer s) {
            unregisterMBean();
         }

         @Override
         public void shutdown(ActiveMQServer s) {
            unregisterMBean();
         }
      };
      server.registerActivateCallback(stopCallback);
      callbackServer = server;
      LOG.info("continuity plugin: site role {} ({} {}), MBean {}, mirror-users={}, mirror-acceptors={}, mirror-user-acceptors={}",
               loaded.role().label(), loaded.source(), store.file().toAbsolutePath(), reg.name(), config.mirrorUsers(),
               config.mirrorAcceptors(), config.mirrorUserAcceptors());
   }

   @Override
   public synchronized void unregistered(ActiveMQServer server) {
      unregisterMBean();
      if (stopCallback != null) {
         server.unregisterActivateCallback(stopCallback);
         stopCallback = null;
         callbackServer = null;
      }
   }

   private void unregisterMBean() {
      ControlRegistration reg = registration;
      if (reg != null) {
         try {
            reg.unregister();
         } catch (Exception e) {
            LOG.warn("continuity plugin: cannot unregister MBean {}: {}", reg.name(), e.toString());
         }
      }
   }

   // ------------------------------------------------------------------ operations (MBean)

   /** Sets the site role; returns the new role. IllegalArgumentException for a bad value. */
   public String setSiteRole(String value) {
      SiteRole role = SiteRole.parse(value);
      PassiveSiteGuard g = requireRegistered();
      try {
         SiteRole previous = g.setRole(role);
         if (previous != role) {
            LOG.warn("continuity plugin: site role of broker {} changed from {} to {} (persisted in {})",
                     server.getConfiguration().getName(), previous.label(), role.label(), g.store().file().toAbsolutePath());
         }
         return role.label();
      } catch (IOException e) {
         throw new IllegalStateException("site role NOT changed: cannot write state file " + g.store().file() + ": " + e, e);
      }
   }

   public void resetStatistics() {
      requireRegistered();
      acks.reset();
      replication.reset();
      guard.resetCounters();
      statisticsSince = Instant.now();
   }

   private PassiveSiteGuard requireRegistered() {
      PassiveSiteGuard g = guard;
      if (g == null) {
         throw new IllegalStateException("the continuity plugin is not registered with a broker");
      }
      return g;
   }

   // ------------------------------------------------------------------ accessors (tests, embedding)

   public PluginConfig config() {
      return config;
   }

   public PassiveSiteGuard guard() {
      return guard;
   }

   public AckModelTracker ackModel() {
      return acks;
   }

   public ReplicationLatencyTracker replication() {
      return replication;
   }

   public javax.management.ObjectName objectName() {
      ControlRegistration reg = registration;
      return reg == null ? null : reg.name();
   }

   // ------------------------------------------------------------------ broker callbacks

   @Override
   public void beforeCreateSession(String name, String username, int minLargeMessageSize, RemotingConnection connection,
                                   boolean autoCommitSends, boolean autoCommitAcks, boolean preAcknowledge, boolean xa,
                                   String defaultAddress, SessionCallback callback, boolean autoCreateQueues,
                                   OperationContext context, Map<SimpleString, RoutingType> prefixes)
      throws ActiveMQException {
      PassiveSiteGuard g = guard;
      AcceptorResolver resolver = acceptorResolver;
      if (g != null && resolver != null && connection != null && !AcceptorResolver.isOutboundOrInternal(connection)) {
         g.checkSession(username, resolver.resolve(connection), connection.getID(), connection.getRemoteAddress());
      }
      SessionRegistry s = sessions;
      if (s != null) {
         s.beforeCreate(name, autoCommitSends, autoCommitAcks, preAcknowledge, xa);
      }
   }

   @Override
   public void afterCreateSession(ServerSession session) {
      SessionRegistry s = sessions;
      if (s != null) {
         guarded(() -> s.afterCreate(session));
      }
   }

   @Override
   public void afterCloseSession(ServerSession session, boolean failed) {
      SessionRegistry s = sessions;
      if (s != null) {
         s.closed(session);
      }
   }

   @Override
   public void afterDestroyConnection(RemotingConnection connection) {
      PassiveSiteGuard g = guard;
      if (g != null && connection != null) {
         g.connectionDestroyed(connection.getID());
      }
   }

   @Override
   public void afterCreateConsumer(ServerConsumer consumer) throws ActiveMQException {
      PassiveSiteGuard g = guard;
      if (g == null) {
         return;
      }
      if (g.role() == SiteRole.PASSIVE) {
         ServerSession session = server.getSessionByID(consumer.getSessionID());
         SessionInfo info = session == null ? null : sessions.get(session);
         if (!g.allowsConsumer(info, consumer.getQueue(), consumer.isBrowseOnly())) {
            ActiveMQSecurityException refusal = g.refuseConsumer(info, consumer.getQueue());
            // Detach the consumer from its queue and session without close(): close() would publish a
            // CONSUMER_CLOSED notification for a consumer whose CONSUMER_CREATED was never sent (the exception below
            // aborts createConsumer before it), skewing the post office's consumer counts. Nothing was delivered to it:
            // canAccept refuses every delivery to a refused client.
            try {
               consumer.removeItself();
            } catch (Exception e) {
               LOG.warn("continuity plugin: detaching refused consumer {} failed: {}", consumer.getID(), e.toString());
            }
            throw refusal;
         }
      }
      guarded(() -> acks.consumerCreated(consumer));
   }

   @Override
   public void afterCloseConsumer(ServerConsumer consumer, boolean failed) {
      AckModelTracker a = acks;
      if (a != null) {
         guarded(() -> a.consumerClosed(consumer));
      }
   }

   @Override
   public boolean canAccept(ServerConsumer consumer, MessageReference reference) {
      PassiveSiteGuard g = guard;
      if (g == null || g.role() == SiteRole.ACTIVE || consumer.isBrowseOnly()) {
         // a browser never acknowledges, so it cannot make the sites diverge: the collection's canary post-gate
         // browses the passive site to prove a message was mirrored
         return true;
      }
      try {
         ServerSession session = server.getSessionByID(consumer.getSessionID());
         return g.allowsDelivery(session == null ? null : sessions.get(session), consumer.getQueue());
      } catch (RuntimeException e) {
         hookFailed("canAccept", e);
         return true;
      }
   }

   @Override
   public void beforeSend(ServerSession session, Transaction tx, Message message, boolean direct, boolean noAutoCreateQueue)
      throws ActiveMQException {
      PassiveSiteGuard g = guard;
      if (g == null || g.role() == SiteRole.ACTIVE) {
         return;
      }
      g.checkSend(sessions.get(session), message.getAddressSimpleString());
   }

   @Override
   public void beforeDeliver(ServerConsumer consumer, MessageReference reference) {
      AckModelTracker a = acks;
      if (a != null) {
         guarded(() -> a.delivered(consumer, reference));
      }
   }

   @Override
   public void messageAcknowledged(Transaction tx, MessageReference ref, AckReason reason, ServerConsumer consumer) {
      AckModelTracker a = acks;
      if (a != null) {
         guarded(() -> a.acknowledged(tx, ref, reason, consumer));
      }
   }

   @Override
   public void afterMessageRoute(Message message, RoutingContext context, boolean direct, boolean rejectDuplicates,
                                 RoutingStatus result) {
      ReplicationLatencyTracker r = replication;
      if (r != null && ReplicationLatencyTracker.isMirrored(context)) {
         guarded(() -> r.routed(message, context));
      }
   }

   private void guarded(Runnable hook) {
      try {
         hook.run();
      } catch (RuntimeException e) {
         hookFailed("measurement hook", e);
      }
   }

   private void hookFailed(String where, RuntimeException e) {
      long now = System.currentTimeMillis();
      long last = lastHookErrorLog.get();
      if (now - last >= HOOK_ERROR_LOG_INTERVAL_MILLIS && lastHookErrorLog.compareAndSet(last, now)) {
         LOG.warn("continuity plugin: {} failed (logged at most once a minute): {}", where, e.toString(), e);
      }
   }
}
