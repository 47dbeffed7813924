package io.continuity.artemis.plugin.ackmodel;

import org.apache.activemq.artemis.core.server.Queue;

/** The statistics key of a queue: its address, with all temporary queues folded into one key. */
public final class AddressKey {

   /** Key shared by every temporary queue (request/reply), whose random names would otherwise churn the table. */
   public static final String TEMPORARY = "(temporary)";

   /** Key receiving everything beyond the max-addresses bound. */
   public static final String OTHER = "(other)";

   private AddressKey() {
   }

   public static String of(Queue queue) {
      if (queue.isTemporary()) {
         return TEMPORARY;
      }
      return String.valueOf(queue.getAddress());
   }
}
