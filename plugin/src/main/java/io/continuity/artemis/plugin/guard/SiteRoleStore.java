package io.continuity.artemis.plugin.guard;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.List;

/**
 * Persists the site role in a small text file so a broker restart keeps it:
 *
 * <pre>
 * # written by the continuity broker plugin
 * role=passive
 * changed=2025-01-01T00:00:00Z
 * </pre>
 *
 * Written to a temporary file in the same directory, forced to disk, then renamed over the old file, so a crash
 * leaves either the old or the new role, never a torn file.
 */
public final class SiteRoleStore {

   /** What was found at start-up. */
   public record Loaded(SiteRole role, String source, String problem) {
   }

   private final Path file;

   public SiteRoleStore(Path file) {
      this.file = file;
   }

   public Path file() {
      return file;
   }

   /**
    * Reads the role. A missing file gives {@code initial}. A file that cannot be read or parsed gives
    * {@link SiteRole#PASSIVE} (fail closed: a DR site that cannot tell its role must not serve clients) together with
    * the problem, for the caller to log.
    */
   public Loaded load(SiteRole initial) {
      if (!Files.exists(file)) {
         return new Loaded(initial, "initial-role (no state file yet)", null);
      }
      try {
         List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
         for (String line : lines) {
            String l = line.trim();
            if (l.startsWith("role=")) {
               return new Loaded(SiteRole.parse(l.substring("role=".length())), "state file", null);
            }
         }
         return new Loaded(SiteRole.PASSIVE, "fail-closed default", "no 'role=' line in " + file);
      } catch (IOException | IllegalArgumentException e) {
         return new Loaded(SiteRole.PASSIVE, "fail-closed default", "cannot read " + file + ": " + e.getMessage());
      }
   }

   public void save(SiteRole role, Instant when) throws IOException {
      Path dir = file.toAbsolutePath().getParent();
      if (dir != null) {
         Files.createDirectories(dir);
      }
      String text = "# site role of this broker (active|passive), written by the continuity broker plugin\n" +
         "role=" + role.label() + "\n" +
         "changed=" + when + "\n";
      Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
      try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                                             StandardOpenOption.TRUNCATE_EXISTING)) {
         ch.write(java.nio.ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8)));
         ch.force(true);
      }
      try {
         Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
      } catch (AtomicMoveNotSupportedException e) {
         Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING);
      }
      if (dir != null) {
         try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
            d.force(true);
         } catch (IOException | UnsupportedOperationException ignored) {
            // directories cannot be opened for sync on every platform; the rename itself is done
         }
      }
   }
}
