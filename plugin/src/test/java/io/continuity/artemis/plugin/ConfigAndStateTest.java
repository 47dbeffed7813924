package io.continuity.artemis.plugin;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Set;

import io.continuity.artemis.plugin.guard.SiteRole;
import io.continuity.artemis.plugin.guard.SiteRoleStore;
import io.continuity.artemis.plugin.replication.LatencyOrigin;
import org.apache.activemq.artemis.core.config.impl.FileConfiguration;
import org.apache.activemq.artemis.core.server.plugin.ActiveMQServerBasePlugin;
import org.apache.activemq.artemis.core.config.FileDeploymentManager;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ConfigAndStateTest {

   @TempDir
   Path dir;

   @Test
   void siteRoleAcceptsOnlyActiveOrPassive() {
      assertEquals(SiteRole.PASSIVE, SiteRole.parse(" Passive "));
      assertEquals(SiteRole.ACTIVE, SiteRole.parse("active"));
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SiteRole.parse("bogus"));
      assertEquals("site role must be 'active' or 'passive', got 'bogus'", e.getMessage());
      assertThrows(IllegalArgumentException.class, () -> SiteRole.parse(null));
      assertThrows(IllegalArgumentException.class, () -> SiteRole.parse(""));
   }

   @Test
   void stateFileRoundTripsAndFailsClosed() throws IOException {
      Path file = dir.resolve("sub/dir/site-role");
      SiteRoleStore store = new SiteRoleStore(file);
      assertEquals(SiteRole.ACTIVE, store.load(SiteRole.ACTIVE).role(), "no file: the initial role");
      assertNull(store.load(SiteRole.ACTIVE).problem());

      store.save(SiteRole.PASSIVE, Instant.parse("2025-01-02T03:04:05Z"));
      String text = Files.readString(file);
      assertTrue(text.contains("role=passive\n"), text);
      assertTrue(text.contains("changed=2025-01-02T03:04:05Z"), text);
      assertFalse(Files.exists(file.resolveSibling("site-role.tmp")), "temporary file renamed away");
      assertEquals(SiteRole.PASSIVE, new SiteRoleStore(file).load(SiteRole.ACTIVE).role());

      Files.writeString(file, "role=sideways\n", StandardCharsets.UTF_8);
      SiteRoleStore.Loaded corrupt = store.load(SiteRole.ACTIVE);
      assertEquals(SiteRole.PASSIVE, corrupt.role(), "unreadable state fails closed");
      assertTrue(corrupt.problem().contains("sideways"), corrupt.problem());
   }

   @Test
   void propertiesParseWithDefaultsAndRejectBadValues() {
      PluginConfig defaults = PluginConfig.parse(Map.of());
      assertNull(defaults.stateFile());
      assertEquals(dir.resolve("continuity-site-role"), defaults.stateFileOr(dir));
      assertEquals(SiteRole.ACTIVE, defaults.initialRole());
      assertEquals(Set.of(), defaults.mirrorUsers());
      assertEquals(60, defaults.windowSeconds());
      assertEquals(500, defaults.maxAddresses());
      assertEquals(LatencyOrigin.TIMESTAMP, defaults.latencyOrigin());
      assertFalse(defaults.includeInternalQueues());

      PluginConfig c = PluginConfig.parse(Map.of("mirror-users", " mirror , dr-link,,", "mirror-acceptors", "mirror",
                                                 "state-file", "/var/lib/x/role", "initial-role", "passive",
                                                 "window-seconds", "30", "latency-origin", "ingress"));
      assertEquals(List.of("mirror", "dr-link"), List.copyOf(c.mirrorUsers()));
      assertEquals(Set.of("mirror"), c.mirrorAcceptors());
      assertEquals(Path.of("/var/lib/x/role"), c.stateFileOr(dir));
      assertEquals(SiteRole.PASSIVE, c.initialRole());
      assertEquals(30_000, c.windowMillis());
      assertEquals(LatencyOrigin.INGRESS, c.latencyOrigin());

      assertEquals("window-seconds must be an integer, got 'soon'",
                   assertThrows(IllegalArgumentException.class, () -> PluginConfig.parse(Map.of("window-seconds", "soon"))).getMessage());
      assertEquals("window-seconds must be between 6 and 86400, got 1",
                   assertThrows(IllegalArgumentException.class, () -> PluginConfig.parse(Map.of("window-seconds", "1"))).getMessage());
      assertTrue(assertThrows(IllegalArgumentException.class, () -> PluginConfig.parse(Map.of("initial-role", "standby")))
                    .getMessage().startsWith("initial-role: site role must be 'active' or 'passive'"));
      assertEquals(Set.of("mirror-user"), PluginConfig.unknownKeys(Map.of("mirror-user", "typo", "state-file", "x")));
   }

   /** The snippet documented in docs/plugin.md, parsed by the broker's own configuration loader. */
   @Test
   void brokerXmlSnippetConfiguresThePlugin() throws Exception {
      Path xml = dir.resolve("broker.xml");
      Files.writeString(xml, """
         <configuration xmlns="urn:activemq" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
                        xsi:schemaLocation="urn:activemq /schema/artemis-configuration.xsd">
            <core xmlns="urn:activemq:core">
               <broker-plugins>
                  <broker-plugin class-name="io.continuity.artemis.plugin.ContinuityPlugin">
                     <property key="mirror-users" value="mirror"/>
                     <property key="mirror-acceptors" value="mirror"/>
                     <property key="state-file" value="/var/lib/artemis/continuity-site-role"/>
                     <property key="window-seconds" value="120"/>
                  </broker-plugin>
               </broker-plugins>
            </core>
         </configuration>
         """);
      FileConfiguration config = new FileConfiguration();
      new FileDeploymentManager(xml.toUri().toString()).addDeployable(config).readConfiguration();
      List<ActiveMQServerBasePlugin> plugins = config.getBrokerPlugins();
      assertEquals(1, plugins.size());
      ContinuityPlugin plugin = assertInstanceOf(ContinuityPlugin.class, plugins.get(0));
      assertEquals(Set.of("mirror"), plugin.config().mirrorUsers());
      assertEquals(Set.of("mirror"), plugin.config().mirrorAcceptors());
      assertEquals(Path.of("/var/lib/artemis/continuity-site-role"), plugin.config().stateFile());
      assertEquals(120, plugin.config().windowSeconds());
   }
}
