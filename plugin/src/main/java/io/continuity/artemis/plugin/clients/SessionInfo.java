package io.continuity.artemis.plugin.clients;

/**
 * What the broker knows about the client behind one server session, captured once when the session is created.
 *
 * @param name            server session name
 * @param user            validated user if security is on, else the user name the client gave (may be null)
 * @param protocol        wire protocol of the connection (CORE, AMQP, OPENWIRE, ...)
 * @param acceptor        name of the acceptor the connection came in through, null if none matches
 * @param internal        true for sessions the broker opens itself: its own outgoing connections (AMQP broker
 *                        connections such as the mirror, federation), management, anything without an inbound
 *                        transport
 * @param connectionId    remoting connection id
 * @param remoteAddress   remote address of the connection
 * @param ackFlagsKnown   false when the session predates the plugin (then the four flags below are meaningless)
 * @param autoCommitSends core session flag
 * @param autoCommitAcks  core session flag
 * @param preAcknowledge  core session flag: messages are acked by the broker before delivery
 * @param xa              core session flag
 */
public record SessionInfo(String name,
                          String user,
                          String protocol,
                          String acceptor,
                          boolean internal,
                          Object connectionId,
                          String remoteAddress,
                          boolean ackFlagsKnown,
                          boolean autoCommitSends,
                          boolean autoCommitAcks,
                          boolean preAcknowledge,
                          boolean xa) {

   public boolean isCore() {
      return "CORE".equalsIgnoreCase(protocol);
   }

   /** Short description for log lines. */
   public String describe() {
      return "user=" + (user == null ? "<anonymous>" : user) + ", remote=" + remoteAddress + ", acceptor=" +
         (acceptor == null ? "<none>" : acceptor) + ", protocol=" + protocol + ", connection=" + connectionId;
   }
}
