package io.continuity.artemis.plugin;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

import io.continuity.artemis.plugin.ackmodel.AckMode;
import io.continuity.artemis.plugin.ackmodel.AckModelTracker;
import io.continuity.artemis.plugin.ackmodel.AckStats;
import io.continuity.artemis.plugin.guard.PassiveSiteGuard;
import io.continuity.artemis.plugin.jmx.ControlAttribute;
import io.continuity.artemis.plugin.replication.ReplicationLatencyTracker;
import io.continuity.artemis.plugin.replication.ReplicationStats;
import io.continuity.artemis.plugin.stats.WindowSnapshot;

import static io.continuity.artemis.plugin.jmx.ControlAttribute.count;
import static io.continuity.artemis.plugin.jmx.ControlAttribute.number;
import static io.continuity.artemis.plugin.jmx.ControlAttribute.string;

/** The MBean's attribute table: name, unit, meaning and reader of every value the plugin exposes. */
final class ContinuityAttributes {

   private ContinuityAttributes() {
   }

   static List<ControlAttribute> of(PluginConfig config, PassiveSiteGuard guard, AckModelTracker acks,
                                    ReplicationLatencyTracker replication, Supplier<Object> statisticsSince) {
      List<ControlAttribute> a = new ArrayList<>();

      // ---- site role and passive-site guard
      a.add(string("SiteRole", "text", "Site role of this broker: 'active' (clients served) or 'passive' (only the mirror may produce and consume)",
                   () -> guard.role().label()));
      a.add(string("SiteRoleSince", "ISO-8601 instant", "When the current role was set, or when the plugin started with it",
                   () -> guard.roleSince().toString()));
      a.add(string("StateFile", "path", "File the site role is persisted in", () -> guard.store().file().toAbsolutePath().toString()));
      a.add(string("MirrorUsers", "comma list", "Users exempt from the passive guard (property mirror-users)",
                   () -> String.join(",", guard.mirrorUsers())));
      a.add(string("MirrorAcceptors", "comma list", "Acceptors whose connections are exempt from the passive guard (property mirror-acceptors)",
                   () -> String.join(",", guard.mirrorAcceptors())));
      a.add(string("MirrorUserAcceptors", "comma list", "The only acceptors the mirror users may come in through (property mirror-user-acceptors; empty = any)",
                   () -> String.join(",", new java.util.TreeSet<>(guard.mirrorUserAcceptors()))));
      a.add(count("MirrorUserRefusals", "Sends and consumers of a mirror user refused because they came in through another acceptor",
                  guard::refusedMirrorUserSessions));
      a.add(count("PassiveGuardRefusals", "Producer sends and consumer creations refused while passive (sum of the two below)",
                  guard::refusals));
      a.add(count("PassiveGuardRefusedSends", "Messages refused while passive", guard::refusedSends));
      a.add(count("PassiveGuardRefusedConsumers", "Consumer creations refused while passive", guard::refusedConsumers));
      a.add(count("PassiveGuardRefusedClients", "Distinct client connections refused while passive (one error log line each)",
                  guard::refusedClients));

      // ---- ack model (broker-wide headline; per address in AckModel)
      a.add(count("UnackedDeliveries", "Deliveries handed to consumers and not yet acknowledged (committed), all non-internal queues, now",
                  acks::unackedDeliveries));
      a.add(number("DeliveriesPerSecond", "1/s", "Deliveries to consumers per second over the window",
                   () -> AckStats.deliveriesPerSecond(acks.overall())));
      a.add(number("AcksPerSecond", "1/s", "Client acknowledgements per second over the window",
                   () -> AckStats.acksPerSecond(acks.overall())));
      a.add(number("AcksPerAckCall", "ratio", "Acknowledged deliveries per ack call (committed ack transaction) over the window; 0 without acks",
                   () -> AckStats.acksPerCall(acks.overall())));
      a.add(number("AckLatencyP50Seconds", "seconds", "Median deliver-to-ack latency over the window; -1 without samples",
                   () -> acks.overall().quantileSeconds(0.50)));
      a.add(number("AckLatencyP99Seconds", "seconds", "99th percentile deliver-to-ack latency over the window; -1 without samples",
                   () -> acks.overall().quantileSeconds(0.99)));
      a.add(number("TransactedAckShare", "ratio 0..1", "Share of the window's acks made in client transactions", () -> share(acks, AckMode.TRANSACTED)));
      a.add(number("ClientAckShare", "ratio 0..1", "Share of the window's acks from CLIENT_ACKNOWLEDGE-style core sessions", () -> share(acks, AckMode.CLIENT)));
      a.add(number("AutoAckShare", "ratio 0..1", "Share of the window's acks from auto-acknowledging (or pre-acknowledging) core sessions", () -> share(acks, AckMode.AUTO)));
      a.add(number("UnclassifiedAckShare", "ratio 0..1", "Share of the window's acks whose mode the broker cannot see (non-transacted AMQP, OpenWire, STOMP, MQTT)",
                   () -> share(acks, AckMode.UNCLASSIFIED)));
      a.add(count("TrackedConsumers", "Open consumers the ack model follows (browsers and internal queues excluded)",
                  () -> (long) acks.openConsumers()));
      a.add(string("AckModel", "JSON", "Per-address ack model: rates, latency percentiles, in-flight, acks per ack call, ack-mode shares, window and total counts, open consumers",
                   acks::toJson));

      // ---- replication latency (this broker as mirror target)
      a.add(number("ReplicationLatencyP50Seconds", "seconds", "Median mirror replication latency (arrival here minus origin time on the other site) over the window; -1 without samples",
                   () -> replication.overall().snapshot().quantileSeconds(0.50)));
      a.add(number("ReplicationLatencyP99Seconds", "seconds", "99th percentile mirror replication latency over the window; -1 without samples",
                   () -> replication.overall().snapshot().quantileSeconds(0.99)));
      a.add(number("ReplicationLatencyMaxSeconds", "seconds", "Largest mirror replication latency over the window; -1 without samples",
                   () -> replication.overall().snapshot().maxSeconds()));
      a.add(count("ReplicationSamplesInWindow", "Mirrored messages with an origin time applied here during the window",
                  () -> replication.overall().snapshot().samples()));
      a.add(count("MirroredMessagesTotal", "Mirrored messages applied here since start or reset", () -> replication.overall().total()));
      a.add(number("NewestMirroredEventAgeSeconds", "seconds", "Now minus the origin time of the newest mirrored message applied here; -1 if none yet",
                   () -> replication.overall().newestEventAgeSeconds()));
      a.add(number("LastMirroredArrivalAgeSeconds", "seconds", "Time since a mirrored message was last applied here; -1 if none yet",
                   () -> replication.overall().lastArrivalAgeSeconds()));
      a.add(count("ReplicationClockSkewSamples", "Mirrored messages in the window whose origin time was ahead of this broker's clock (counted as latency 0)",
                  () -> ReplicationStats.clockSkewSamples(replication.overall().snapshot())));
      a.add(string("ReplicationLatency", "JSON", "Per-address mirror replication latency: p50/p99/max, rate, newest event age, window and total counts",
                   replication::toJson));

      // ---- general
      a.add(new ControlAttribute("WindowSeconds", Integer.class.getName(), "seconds",
                                 "Length of the sliding window behind every per-second rate and percentile (property window-seconds)",
                                 config::windowSeconds));
      a.add(string("StatisticsSince", "ISO-8601 instant", "When statistics started (plugin start or last resetStatistics)", statisticsSince));
      a.add(string("PluginVersion", "text", "Version of the plugin jar", ContinuityAttributes::version));
      return a;
   }

   private static Object share(AckModelTracker acks, AckMode mode) {
      WindowSnapshot s = acks.overall();
      return AckStats.share(s, mode);
   }

   private static Object version() {
      String v = ContinuityAttributes.class.getPackage().getImplementationVersion();
      return v == null ? "development" : v;
   }

}
