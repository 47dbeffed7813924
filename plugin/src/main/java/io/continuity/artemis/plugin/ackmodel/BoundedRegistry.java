package io.continuity.artemis.plugin.ackmodel;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;

/**
 * A concurrent map from address key to statistics holder that never grows past {@code max} keys: once full, new
 * keys share the {@link AddressKey#OTHER} entry.
 */
public final class BoundedRegistry<V> {

   private final int max;
   private final Function<String, V> factory;
   private final ConcurrentHashMap<String, V> entries = new ConcurrentHashMap<>();

   public BoundedRegistry(int max, Function<String, V> factory) {
      this.max = max;
      this.factory = factory;
   }

   public V get(String key) {
      V v = entries.get(key);
      if (v != null) {
         return v;
      }
      if (entries.size() >= max) {
         return entries.computeIfAbsent(AddressKey.OTHER, factory);
      }
      return entries.computeIfAbsent(key, factory);
   }

   public V peek(String key) {
      return entries.get(key);
   }

   /** A sorted copy for reporting. */
   public Map<String, V> sorted() {
      return new TreeMap<>(entries);
   }

   public void clear() {
      entries.clear();
   }

   public int size() {
      return entries.size();
   }
}
