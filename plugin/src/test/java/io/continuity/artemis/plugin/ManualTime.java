package io.continuity.artemis.plugin;

import java.util.concurrent.atomic.AtomicLong;

import io.continuity.artemis.plugin.stats.TimeSource;

/** A clock the test moves by hand. */
public final class ManualTime implements TimeSource {

   private final AtomicLong millis;

   public ManualTime(long startMillis) {
      this.millis = new AtomicLong(startMillis);
   }

   public void advanceMillis(long delta) {
      millis.addAndGet(delta);
   }

   @Override
   public long nanoTime() {
      return millis.get() * 1_000_000L;
   }

   @Override
   public long currentTimeMillis() {
      return millis.get();
   }
}
