package io.continuity.artemis.plugin;

import java.util.concurrent.atomic.AtomicLong;

import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.TestPlan;

/**
 * Prints one closing line with the test counts when the test plan finishes. Surefire's own "Tests run:" summary is
 * an INFO message that {@code mvn -q} (the CI build) hides; this line goes to the forked JVM's stdout, which Surefire
 * forwards regardless of the log level.
 */
public class TestSummaryListener implements TestExecutionListener {

   private final AtomicLong passed = new AtomicLong();
   private final AtomicLong failed = new AtomicLong();
   private final AtomicLong skipped = new AtomicLong();
   private volatile long startNanos;

   @Override
   public void testPlanExecutionStarted(TestPlan testPlan) {
      startNanos = System.nanoTime();
   }

   @Override
   public void executionSkipped(TestIdentifier test, String reason) {
      if (test.isTest()) {
         skipped.incrementAndGet();
      }
   }

   @Override
   public void executionFinished(TestIdentifier test, TestExecutionResult result) {
      if (test.isTest()) {
         if (result.getStatus() == TestExecutionResult.Status.SUCCESSFUL) {
            passed.incrementAndGet();
         } else if (result.getStatus() == TestExecutionResult.Status.ABORTED) {
            skipped.incrementAndGet();
         } else {
            failed.incrementAndGet();
         }
      } else if (result.getStatus() == TestExecutionResult.Status.FAILED) {
         failed.incrementAndGet(); // a container (class set-up) failure
      }
   }

   @Override
   public void testPlanExecutionFinished(TestPlan testPlan) {
      long seconds = Math.round((System.nanoTime() - startNanos) / 1e9);
      System.out.println("[continuity-plugin] tests finished in " + seconds + " s");
      System.out.println("plugin: " + passed.get() + " passed, " + failed.get() + " failed, " + skipped.get() + " skipped");
   }
}
