package io.continuity.artemis.plugin.guard;

import java.util.Locale;

/** The disaster-recovery role of this broker's site. */
public enum SiteRole {
   /** Clients are served. */
   ACTIVE,
   /** Only the mirror (and the broker's own connections) may produce and consume; clients are refused. */
   PASSIVE;

   /** Parses "active" / "passive" (any case, surrounding blanks ignored); anything else is rejected. */
   public static SiteRole parse(String value) {
      if (value != null) {
         String v = value.trim().toLowerCase(Locale.ROOT);
         if (v.equals("active")) {
            return ACTIVE;
         }
         if (v.equals("passive")) {
            return PASSIVE;
         }
      }
      throw new IllegalArgumentException("site role must be 'active' or 'passive', got " +
                                            (value == null ? "null" : "'" + value + "'"));
   }

   public String label() {
      return name().toLowerCase(Locale.ROOT);
   }
}
