package io.continuity.artemis.plugin.clients;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.activemq.artemis.core.server.ServerSession;
import org.apache.activemq.artemis.spi.core.protocol.RemotingConnection;

/**
 * Keeps one {@link SessionInfo} per open server session. The acknowledgement flags exist only in
 * {@code beforeCreateSession}, so they are parked under the session name until {@code afterCreateSession}.
 */
public final class SessionRegistry {

   /** Bound on flags parked for sessions whose creation failed after beforeCreateSession. */
   private static final int MAX_PENDING = 10_000;

   private record Flags(boolean autoCommitSends, boolean autoCommitAcks, boolean preAcknowledge, boolean xa) {
   }

   private final AcceptorResolver acceptors;
   private final Map<String, Flags> pending = new ConcurrentHashMap<>();
   private final Map<String, SessionInfo> sessions = new ConcurrentHashMap<>();

   public SessionRegistry(AcceptorResolver acceptors) {
      this.acceptors = acceptors;
   }

   public void beforeCreate(String name, boolean autoCommitSends, boolean autoCommitAcks, boolean preAcknowledge, boolean xa) {
      if (pending.size() >= MAX_PENDING) {
         pending.clear();
      }
      pending.put(name, new Flags(autoCommitSends, autoCommitAcks, preAcknowledge, xa));
   }

   public SessionInfo afterCreate(ServerSession session) {
      SessionInfo info = describe(session, pending.remove(session.getName()));
      sessions.put(session.getName(), info);
      return info;
   }

   /** Info of a session, computed on first use for sessions opened before the plugin was registered. */
   public SessionInfo get(ServerSession session) {
      SessionInfo info = sessions.get(session.getName());
      if (info == null) {
         info = sessions.computeIfAbsent(session.getName(), n -> describe(session, null));
      }
      return info;
   }

   public void closed(ServerSession session) {
      sessions.remove(session.getName());
      pending.remove(session.getName());
   }

   public int size() {
      return sessions.size();
   }

   private SessionInfo describe(ServerSession session, Flags flags) {
      RemotingConnection rc = session.getRemotingConnection();
      String user = session.getValidatedUser() != null ? session.getValidatedUser() : session.getUsername();
      boolean internal = AcceptorResolver.isOutboundOrInternal(rc);
      String acceptor = internal ? null : acceptors.resolve(rc);
      return new SessionInfo(session.getName(), user, rc == null ? "INTERNAL" : rc.getProtocolName(), acceptor, internal,
                             rc == null ? null : rc.getID(), rc == null ? null : rc.getRemoteAddress(), flags != null,
                             flags != null && flags.autoCommitSends, flags != null && flags.autoCommitAcks,
                             flags != null && flags.preAcknowledge, flags != null && flags.xa);
   }
}
