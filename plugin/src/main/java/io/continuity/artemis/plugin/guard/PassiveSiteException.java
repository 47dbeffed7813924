package io.continuity.artemis.plugin.guard;

import org.apache.activemq.artemis.api.core.ActiveMQException;
import org.apache.activemq.artemis.api.core.ActiveMQExceptionType;

/**
 * Thrown from the plugin hooks to refuse a client on a passive site. It carries the SECURITY_EXCEPTION type, so a
 * core client receives an {@code ActiveMQSecurityException} (JMS: {@code JMSSecurityException}) with this message,
 * an error clients do not retry in a loop.
 */
public final class PassiveSiteException extends ActiveMQException {

   private static final long serialVersionUID = 1L;

   public PassiveSiteException(String message) {
      super(ActiveMQExceptionType.SECURITY_EXCEPTION, message);
   }
}
