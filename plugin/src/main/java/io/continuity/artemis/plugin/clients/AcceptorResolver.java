package io.continuity.artemis.plugin.clients;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.activemq.artemis.core.remoting.impl.invm.InVMAcceptor;
import org.apache.activemq.artemis.core.remoting.impl.netty.NettyServerConnection;
import org.apache.activemq.artemis.core.remoting.server.RemotingService;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.spi.core.protocol.RemotingConnection;
import org.apache.activemq.artemis.spi.core.remoting.Acceptor;
import org.apache.activemq.artemis.spi.core.remoting.Connection;

/**
 * Finds the acceptor (by its broker.xml name) an inbound connection arrived on. Artemis does not keep that name on
 * the connection, so it is matched from the connection's local address: the local port against each Netty
 * acceptor's bound port (and the local host when several acceptors share the port), or the in-VM server id against
 * each in-VM acceptor.
 */
public final class AcceptorResolver {

   private final ActiveMQServer server;

   public AcceptorResolver(ActiveMQServer server) {
      this.server = server;
   }

   /** True for connections that did not come in through an acceptor (the broker's own outgoing connections). */
   public static boolean isOutboundOrInternal(RemotingConnection connection) {
      if (connection == null) {
         return true;
      }
      Connection transport = connection.getTransportConnection();
      if (transport == null) {
         return true;
      }
      String local = transport.getLocalAddress();
      if (local != null && local.startsWith("invm:")) {
         return false;
      }
      return !(transport instanceof NettyServerConnection);
   }

   public String resolve(RemotingConnection connection) {
      if (connection == null || connection.getTransportConnection() == null) {
         return null;
      }
      String local = connection.getTransportConnection().getLocalAddress();
      RemotingService remoting = server.getRemotingService();
      if (local == null || remoting == null) {
         return null;
      }
      Map<String, Acceptor> acceptors = remoting.getAcceptors();
      if (local.startsWith("invm:")) {
         String id = local.substring("invm:".length());
         for (Map.Entry<String, Acceptor> e : acceptors.entrySet()) {
            if (e.getValue() instanceof InVMAcceptor) {
               Object serverId = e.getValue().getConfiguration().get("serverId");
               if (id.equals(String.valueOf(serverId == null ? 0 : serverId))) {
                  return e.getKey();
               }
            }
         }
         return null;
      }
      HostPort hp = HostPort.parse(local);
      if (hp == null) {
         return null;
      }
      List<Map.Entry<String, Acceptor>> samePort = new ArrayList<>();
      for (Map.Entry<String, Acceptor> e : acceptors.entrySet()) {
         if (e.getValue().getActualPort() == hp.port) {
            samePort.add(e);
         }
      }
      if (samePort.size() == 1) {
         return samePort.get(0).getKey();
      }
      for (Map.Entry<String, Acceptor> e : samePort) {
         Object host = e.getValue().getConfiguration().get("host");
         if (host != null && sameHost(String.valueOf(host), hp.host)) {
            return e.getKey();
         }
      }
      return samePort.isEmpty() ? null : samePort.get(0).getKey();
   }

   private static boolean sameHost(String configured, String actual) {
      if (configured.equals(actual)) {
         return true;
      }
      try {
         for (InetAddress a : InetAddress.getAllByName(configured)) {
            if (a.getHostAddress().equals(actual)) {
               return true;
            }
         }
      } catch (Exception ignored) {
         // unresolvable configured host: no match
      }
      return false;
   }

   /** Host and port out of "tcp:///127.0.0.1:61616", "/127.0.0.1:61616" or "tcp://[::1]:61616". */
   record HostPort(String host, int port) {
      static HostPort parse(String address) {
         int colon = address.lastIndexOf(':');
         if (colon < 0 || colon == address.length() - 1) {
            return null;
         }
         int port;
         try {
            port = Integer.parseInt(address.substring(colon + 1));
         } catch (NumberFormatException e) {
            return null;
         }
         String host = address.substring(0, colon);
         int slash = host.lastIndexOf('/');
         if (slash >= 0) {
            host = host.substring(slash + 1);
         }
         if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
         }
         return new HostPort(host, port);
      }
   }
}
