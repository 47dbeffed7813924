package io.continuity.artemis.plugin;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;

import io.continuity.artemis.plugin.ackmodel.AckModelTracker;
import io.continuity.artemis.plugin.guard.PassiveSiteGuard;
import io.continuity.artemis.plugin.guard.SiteRole;
import io.continuity.artemis.plugin.guard.SiteRoleStore;
import io.continuity.artemis.plugin.jmx.ControlAttribute;
import io.continuity.artemis.plugin.replication.LatencyOrigin;
import io.continuity.artemis.plugin.replication.ReplicationLatencyTracker;
import io.continuity.artemis.plugin.stats.TimeSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertTrue;

/** docs/plugin.md documents every MBean attribute and every plugin property (the build runs from plugin/). */
class DocsTest {

   @TempDir
   Path dir;

   @Test
   void everyAttributeAndPropertyIsDocumented() throws Exception {
      String docs = Files.readString(Path.of("..", "docs", "plugin.md"));
      PluginConfig config = PluginConfig.parse(Map.of());
      PassiveSiteGuard guard = new PassiveSiteGuard(new SiteRoleStore(dir.resolve("role")), SiteRole.ACTIVE, Set.of(), Set.of(),
                                                    null, "docs", m -> { });
      List<ControlAttribute> attributes = ContinuityAttributes.of(
         config, guard, new AckModelTracker(null, null, TimeSource.SYSTEM, 60_000, 6, 10, false),
         new ReplicationLatencyTracker(TimeSource.SYSTEM, 60_000, 6, 10, LatencyOrigin.TIMESTAMP), () -> "now");
      for (ControlAttribute a : attributes) {
         String type = a.type().substring(a.type().lastIndexOf('.') + 1);
         String row = "| `" + a.name() + "` | " + type + " | " + a.unit() + " |";
         assertTrue(docs.contains(row), "docs/plugin.md lacks the row starting " + row);
      }
      for (String property : PluginConfig.KNOWN) {
         assertTrue(docs.contains("| `" + property + "` |"), "docs/plugin.md lacks property " + property);
      }
      assertTrue(docs.contains("org.apache.activemq.artemis:broker=\"<broker name>\",component=continuity"));
      assertTrue(docs.contains("`setSiteRole(String role)`") && docs.contains("`resetStatistics()`"));
   }
}
