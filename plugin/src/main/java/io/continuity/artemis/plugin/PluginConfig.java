package io.continuity.artemis.plugin;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

import io.continuity.artemis.plugin.guard.SiteRole;
import io.continuity.artemis.plugin.replication.LatencyOrigin;

/**
 * The plugin's broker.xml properties, parsed and validated once in {@code init}. A bad value stops the broker with a
 * message naming the property, rather than running with a guess.
 */
public record PluginConfig(Path stateFile,
                           SiteRole initialRole,
                           Set<String> mirrorUsers,
                           Set<String> mirrorAcceptors,
                           Set<String> mirrorUserAcceptors,
                           int windowSeconds,
                           int maxAddresses,
                           LatencyOrigin latencyOrigin,
                           boolean includeInternalQueues) {

   public static final String STATE_FILE = "state-file";
   public static final String INITIAL_ROLE = "initial-role";
   public static final String MIRROR_USERS = "mirror-users";
   public static final String MIRROR_ACCEPTORS = "mirror-acceptors";
   /** The only acceptors the mirror users may come in through (empty: any); elsewhere their sessions are refused. */
   public static final String MIRROR_USER_ACCEPTORS = "mirror-user-acceptors";
   public static final String WINDOW_SECONDS = "window-seconds";
   public static final String MAX_ADDRESSES = "max-addresses";
   public static final String LATENCY_ORIGIN = "latency-origin";
   public static final String INCLUDE_INTERNAL_QUEUES = "include-internal-queues";

   public static final List<String> KNOWN = List.of(STATE_FILE, INITIAL_ROLE, MIRROR_USERS, MIRROR_ACCEPTORS,
                                                    MIRROR_USER_ACCEPTORS, WINDOW_SECONDS, MAX_ADDRESSES, LATENCY_ORIGIN,
                                                    INCLUDE_INTERNAL_QUEUES);

   /** File name used under the broker's data directory when state-file is not set. */
   public static final String DEFAULT_STATE_FILE_NAME = "continuity-site-role";

   /** Number of slots a window is divided into (it slides in steps of window-seconds / WINDOW_SLOTS). */
   public static final int WINDOW_SLOTS = 6;

   public static PluginConfig parse(Map<String, String> properties) {
      Map<String, String> p = properties == null ? Map.of() : properties;
      String stateFile = blankToNull(p.get(STATE_FILE));
      return new PluginConfig(stateFile == null ? null : Path.of(stateFile),
                              role(p.getOrDefault(INITIAL_ROLE, "active")),
                              list(p.get(MIRROR_USERS)),
                              list(p.get(MIRROR_ACCEPTORS)),
                              list(p.get(MIRROR_USER_ACCEPTORS)),
                              intIn(p, WINDOW_SECONDS, 60, WINDOW_SLOTS, 86_400),
                              intIn(p, MAX_ADDRESSES, 500, 1, 100_000),
                              LatencyOrigin.parse(p.getOrDefault(LATENCY_ORIGIN, "timestamp")),
                              bool(p, INCLUDE_INTERNAL_QUEUES, false));
   }

   /** Property names given that the plugin does not know (likely typos), for a warning. */
   public static Set<String> unknownKeys(Map<String, String> properties) {
      if (properties == null) {
         return Set.of();
      }
      return properties.keySet().stream().filter(k -> !KNOWN.contains(k)).collect(Collectors.toCollection(LinkedHashSet::new));
   }

   /** The state file, defaulting to {@value #DEFAULT_STATE_FILE_NAME} next to the journal directory (data/). */
   public Path stateFileOr(Path brokerDataDirectory) {
      return stateFile != null ? stateFile : brokerDataDirectory.resolve(DEFAULT_STATE_FILE_NAME);
   }

   public long windowMillis() {
      return windowSeconds * 1000L;
   }

   private static SiteRole role(String value) {
      try {
         return SiteRole.parse(value);
      } catch (IllegalArgumentException e) {
         throw new IllegalArgumentException(INITIAL_ROLE + ": " + e.getMessage());
      }
   }

   private static Set<String> list(String value) {
      if (value == null) {
         return Set.of();
      }
      return Arrays.stream(value.split(",")).map(String::trim).filter(s -> !s.isEmpty())
         .collect(Collectors.toCollection(LinkedHashSet::new));
   }

   private static int intIn(Map<String, String> p, String key, int def, int min, int max) {
      String v = blankToNull(p.get(key));
      if (v == null) {
         return def;
      }
      try {
         int i = Integer.parseInt(v.trim());
         if (i < min || i > max) {
            throw new IllegalArgumentException(key + " must be between " + min + " and " + max + ", got " + i);
         }
         return i;
      } catch (NumberFormatException e) {
         throw new IllegalArgumentException(key + " must be an integer, got '" + v + "'");
      }
   }

   private static boolean bool(Map<String, String> p, String key, boolean def) {
      String v = blankToNull(p.get(key));
      if (v == null) {
         return def;
      }
      return switch (v.trim().toLowerCase(java.util.Locale.ROOT)) {
         case "true" -> true;
         case "false" -> false;
         default -> throw new IllegalArgumentException(key + " must be true or false, got '" + v + "'");
      };
   }

   private static String blankToNull(String s) {
      return s == null || s.isBlank() ? null : s;
   }
}
