package io.continuity.artemis.plugin.guard;

import java.io.IOException;
import java.time.Instant;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

import io.continuity.artemis.plugin.clients.SessionInfo;
import org.apache.activemq.artemis.api.core.ActiveMQSecurityException;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.core.server.Queue;

/**
 * The passive-site guard. While the site is passive, producers and consumers are refused unless they are the mirror
 * (by user or acceptor) or the broker itself (its own outgoing connections such as the mirror source, management).
 * Refusals are counted; the first refusal of each client connection is logged as an error, later ones only counted.
 *
 * <p>A refusal is an {@link ActiveMQSecurityException}: a core client gets it as such (JMS: JMSSecurityException), and
 * the AMQP protocol turns it into an {@code amqp:unauthorized-access} error on the refused link or delivery while
 * the connection stays up (any other exception type closes the whole AMQP connection as an internal error).
 *
 * <p>Whatever the role, a mirror user that comes in through an acceptor other than its {@code mirror-user-acceptors}
 * gets no session ({@link #checkSession}): the mirror user may send to and consume from every mirrored address, so
 * through a client acceptor it could read or inject application messages.
 *
 * <p>Left alone on purpose: sends to the management address (CLI tools and the console work on a passive site),
 * consumers on temporary queues (their management replies), queue browsers (read only), and acks of messages delivered
 * before the switch to passive.
 */
public final class PassiveSiteGuard {

   private static final String PLUGIN_PROPERTY = "mirror-user-acceptors";

   /** Bound on remembered connections (entries leave when their connection is destroyed). */
   private static final int MAX_LOGGED_CONNECTIONS = 10_000;

   private final SiteRoleStore store;
   private final Set<String> mirrorUsers;
   private final Set<String> mirrorAcceptors;
   private final Set<String> mirrorUserAcceptors;
   private final SimpleString managementAddress;
   private final String brokerName;
   private final Consumer<String> errorLog;

   private volatile SiteRole role;
   private volatile Instant roleSince;
   private final Set<Object> loggedConnections = ConcurrentHashMap.newKeySet();
   private final AtomicLong refusedSends = new AtomicLong();
   private final AtomicLong refusedConsumers = new AtomicLong();
   private final AtomicLong refusedClients = new AtomicLong();
   private final AtomicLong refusedMirrorUserSessions = new AtomicLong();

   public PassiveSiteGuard(SiteRoleStore store, SiteRole initialRole, Set<String> mirrorUsers, Set<String> mirrorAcceptors,
                           SimpleString managementAddress, String brokerName, Consumer<String> errorLog) {
      this(store, initialRole, mirrorUsers, mirrorAcceptors, Set.of(), managementAddress, brokerName, errorLog);
   }

   public PassiveSiteGuard(SiteRoleStore store, SiteRole initialRole, Set<String> mirrorUsers, Set<String> mirrorAcceptors,
                           Set<String> mirrorUserAcceptors, SimpleString managementAddress, String brokerName,
                           Consumer<String> errorLog) {
      this.store = store;
      this.role = initialRole;
      this.roleSince = Instant.now();
      this.mirrorUsers = Set.copyOf(mirrorUsers);
      this.mirrorAcceptors = Set.copyOf(mirrorAcceptors);
      this.mirrorUserAcceptors = Set.copyOf(mirrorUserAcceptors);
      this.managementAddress = managementAddress;
      this.brokerName = brokerName;
      this.errorLog = errorLog;
   }

   public SiteRole role() {
      return role;
   }

   public Instant roleSince() {
      return roleSince;
   }

   public SiteRoleStore store() {
      return store;
   }

   /** Persists, then applies, a new role. Returns the previous one. If the file cannot be written nothing changes. */
   public synchronized SiteRole setRole(SiteRole newRole) throws IOException {
      SiteRole previous = role;
      Instant now = Instant.now();
      store.save(newRole, now);
      role = newRole;
      if (previous != newRole) {
         roleSince = now;
         loggedConnections.clear(); // a new passive period logs each client again
      }
      return previous;
   }

   /** True for the mirror and the broker's own sessions. */
   public boolean exempt(SessionInfo info) {
      if (info == null || info.internal()) {
         return true;
      }
      if (info.user() != null && mirrorUsers.contains(info.user())) {
         return true;
      }
      return info.acceptor() != null && mirrorAcceptors.contains(info.acceptor());
   }

   /**
    * Called before a client session is created (after authentication): a mirror user coming in through an acceptor
    * other than its {@code mirror-user-acceptors} gets no session at all, so it can neither send, consume nor browse,
    * and no per-message check is needed on an active site. {@code acceptor} is null for the broker's own connections.
    */
   public void checkSession(String user, String acceptor, Object connectionId, String client) throws ActiveMQSecurityException {
      if (mirrorUserAcceptors.isEmpty() || user == null || acceptor == null || !mirrorUsers.contains(user)
         || mirrorUserAcceptors.contains(acceptor)) {
         return;
      }
      refusedMirrorUserSessions.incrementAndGet();
      String message = "Broker '" + brokerName + "': user '" + user + "' is a mirror user and may only come in through "
         + String.join(", ", new TreeSet<>(mirrorUserAcceptors)) + " (continuity plugin, " + PLUGIN_PROPERTY
         + "): refused a session through acceptor '" + acceptor + "'.";
      if (loggedConnections.size() >= MAX_LOGGED_CONNECTIONS) {
         loggedConnections.clear();
      }
      if (connectionId == null || loggedConnections.add(connectionId)) {
         errorLog.accept(message + " Client: " + client + ".");
      }
      throw new ActiveMQSecurityException(message);
   }

   /** Called before a message from a client session is routed. */
   public void checkSend(SessionInfo info, SimpleString address) throws ActiveMQSecurityException {
      if (role == SiteRole.ACTIVE || exempt(info)) {
         return;
      }
      if (address != null && managementAddress != null && address.equals(managementAddress)) {
         return;
      }
      refusedSends.incrementAndGet();
      throw refuse(info, "send to address '" + address + "'");
   }

   /** Whether a new consumer may exist; false means the caller must close it and throw {@link #refuseConsumer}. */
   public boolean allowsConsumer(SessionInfo info, Queue queue, boolean browseOnly) {
      if (role == SiteRole.ACTIVE || browseOnly || exempt(info)) {
         return true;
      }
      return queue != null && queue.isTemporary();
   }

   public ActiveMQSecurityException refuseConsumer(SessionInfo info, Queue queue) {
      refusedConsumers.incrementAndGet();
      return refuse(info, "consumer on queue '" + (queue == null ? null : queue.getName()) + "'");
   }

   /** Per-delivery check, so consumers opened before the switch to passive receive nothing more. */
   public boolean allowsDelivery(SessionInfo info, Queue queue) {
      if (role == SiteRole.ACTIVE) {
         return true;
      }
      return exempt(info) || queue != null && queue.isTemporary();
   }

   private ActiveMQSecurityException refuse(SessionInfo info, String what) {
      String message = "Site of broker '" + brokerName + "' is PASSIVE (continuity site role, state file " +
         store.file() + "): refused " + what + ". Connect producers and consumers to the active site.";
      Object key = info.connectionId() == null ? info.name() : info.connectionId();
      if (loggedConnections.size() >= MAX_LOGGED_CONNECTIONS) {
         loggedConnections.clear(); // bounded memory; at worst a client is logged once more
      }
      if (loggedConnections.add(key)) {
         refusedClients.incrementAndGet();
         errorLog.accept(message + " Client: " + info.describe() +
                            ". Further refusals for this connection are only counted (PassiveGuardRefusals).");
      }
      return new ActiveMQSecurityException(message);
   }

   public Set<String> mirrorUserAcceptors() {
      return mirrorUserAcceptors;
   }

   public long refusedMirrorUserSessions() {
      return refusedMirrorUserSessions.get();
   }

   /** Forgets a destroyed connection so its entry does not linger. */
   public void connectionDestroyed(Object connectionId) {
      if (connectionId != null) {
         loggedConnections.remove(connectionId);
      }
   }

   public long refusedSends() {
      return refusedSends.get();
   }

   public long refusedConsumers() {
      return refusedConsumers.get();
   }

   public long refusals() {
      return refusedSends.get() + refusedConsumers.get();
   }

   /** Client connections refused (and logged) so far. */
   public long refusedClients() {
      return refusedClients.get();
   }

   public Set<String> mirrorUsers() {
      return mirrorUsers;
   }

   public Set<String> mirrorAcceptors() {
      return mirrorAcceptors;
   }

   public void resetCounters() {
      refusedSends.set(0);
      refusedConsumers.set(0);
      refusedClients.set(0);
   }
}
