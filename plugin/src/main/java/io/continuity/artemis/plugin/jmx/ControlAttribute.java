package io.continuity.artemis.plugin.jmx;

import java.util.function.Supplier;

/**
 * One read-only MBean attribute.
 *
 * @param name        attribute name as seen in JMX / Jolokia
 * @param type        Java class name of the value (wrapper types, so a failed read can be null)
 * @param unit        unit for the docs and the description ("seconds", "1/s", "count", "JSON", ...)
 * @param description what it means
 * @param value       reads the current value; must be cheap and must not block
 */
public record ControlAttribute(String name, String type, String unit, String description, Supplier<Object> value) {

   public static ControlAttribute string(String name, String unit, String description, Supplier<Object> value) {
      return new ControlAttribute(name, String.class.getName(), unit, description, value);
   }

   public static ControlAttribute number(String name, String unit, String description, Supplier<Object> value) {
      return new ControlAttribute(name, Double.class.getName(), unit, description, value);
   }

   public static ControlAttribute count(String name, String description, Supplier<Object> value) {
      return new ControlAttribute(name, Long.class.getName(), "count", description, value);
   }
}
