package io.continuity.artemis.plugin.jmx;

import java.lang.management.ManagementFactory;

import javax.management.InstanceNotFoundException;
import javax.management.JMException;
import javax.management.MBeanServer;
import javax.management.MalformedObjectNameException;
import javax.management.ObjectName;

/** Registers the MBean as {@code <jmx-domain>:broker="<broker name>",component=continuity} in the platform MBeanServer. */
public final class ControlRegistration {

   private final MBeanServer mbeanServer;
   private final ObjectName name;

   public ControlRegistration(String jmxDomain, String brokerName) {
      this(ManagementFactory.getPlatformMBeanServer(), objectName(jmxDomain, brokerName));
   }

   ControlRegistration(MBeanServer mbeanServer, ObjectName name) {
      this.mbeanServer = mbeanServer;
      this.name = name;
   }

   public static ObjectName objectName(String jmxDomain, String brokerName) {
      try {
         return new ObjectName(jmxDomain + ":broker=" + ObjectName.quote(brokerName) + ",component=continuity");
      } catch (MalformedObjectNameException e) {
         throw new IllegalArgumentException("cannot build the continuity MBean name for broker " + brokerName, e);
      }
   }

   public ObjectName name() {
      return name;
   }

   /** Registers, replacing an instance left by an earlier start of the same broker in this JVM. */
   public void register(Object mbean) throws JMException {
      unregister();
      mbeanServer.registerMBean(mbean, name);
   }

   public void unregister() throws JMException {
      try {
         if (mbeanServer.isRegistered(name)) {
            mbeanServer.unregisterMBean(name);
         }
      } catch (InstanceNotFoundException alreadyGone) {
         // unregistered concurrently
      }
   }
}
