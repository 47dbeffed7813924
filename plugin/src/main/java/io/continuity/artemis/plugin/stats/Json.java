package io.continuity.artemis.plugin.stats;

/**
 * A minimal JSON text builder for the MBean's statistics attributes, so the plugin ships no JSON library. The caller
 * is responsible for well-formed nesting; commas are inserted automatically.
 */
public final class Json {

   private final StringBuilder out = new StringBuilder(256);
   private boolean needComma;

   public Json beginObject() {
      comma();
      out.append('{');
      needComma = false;
      return this;
   }

   public Json endObject() {
      out.append('}');
      needComma = true;
      return this;
   }

   public Json beginArray() {
      comma();
      out.append('[');
      needComma = false;
      return this;
   }

   public Json endArray() {
      out.append(']');
      needComma = true;
      return this;
   }

   /** Writes a member name; the next call writes its value. */
   public Json name(String name) {
      comma();
      string(name);
      out.append(':');
      needComma = false;
      return this;
   }

   public Json value(String value) {
      comma();
      if (value == null) {
         out.append("null");
      } else {
         string(value);
      }
      needComma = true;
      return this;
   }

   public Json value(long value) {
      comma();
      out.append(value);
      needComma = true;
      return this;
   }

   public Json value(boolean value) {
      comma();
      out.append(value);
      needComma = true;
      return this;
   }

   /** Doubles are rounded to 6 decimals; NaN and infinities become null. */
   public Json value(double value) {
      comma();
      if (Double.isNaN(value) || Double.isInfinite(value)) {
         out.append("null");
      } else {
         out.append(Math.round(value * 1_000_000d) / 1_000_000d);
      }
      needComma = true;
      return this;
   }

   public Json field(String name, String value) {
      return name(name).value(value);
   }

   public Json field(String name, long value) {
      return name(name).value(value);
   }

   public Json field(String name, double value) {
      return name(name).value(value);
   }

   public Json field(String name, boolean value) {
      return name(name).value(value);
   }

   @Override
   public String toString() {
      return out.toString();
   }

   private void comma() {
      if (needComma) {
         out.append(',');
      }
   }

   private void string(String s) {
      out.append('"');
      for (int i = 0; i < s.length(); i++) {
         char c = s.charAt(i);
         switch (c) {
            case '"' -> out.append("\\\"");
            case '\\' -> out.append("\\\\");
            case '\n' -> out.append("\\n");
            case '\r' -> out.append("\\r");
            case '\t' -> out.append("\\t");
            default -> {
               if (c < 0x20) {
                  out.append(String.format("\\u%04x", (int) c));
               } else {
                  out.append(c);
               }
            }
         }
      }
      out.append('"');
   }
}
