package io.continuity.artemis.plugin.jmx;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.UnaryOperator;

import javax.management.Attribute;
import javax.management.AttributeList;
import javax.management.AttributeNotFoundException;
import javax.management.DynamicMBean;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanException;
import javax.management.MBeanInfo;
import javax.management.MBeanOperationInfo;
import javax.management.MBeanParameterInfo;
import javax.management.ReflectionException;

/**
 * The plugin's single MBean. Every statistic is a read-only attribute (so one Jolokia {@code read} without an attribute
 * list returns all of them), plus two operations. Implemented as a {@link DynamicMBean} rather than an interface-based
 * standard MBean because the JMX introspector would turn {@code setSiteRole(String)} into the setter of a writable
 * {@code SiteRole} attribute instead of an operation.
 */
public final class ContinuityControl implements DynamicMBean {

   public static final String SET_SITE_ROLE = "setSiteRole";
   public static final String RESET_STATISTICS = "resetStatistics";

   private final Map<String, ControlAttribute> attributes = new LinkedHashMap<>();
   private final UnaryOperator<String> setSiteRole;
   private final Runnable resetStatistics;
   private final Consumer<String> warnLog;
   private final MBeanInfo info;

   /**
    * @param setSiteRole     applies a role given as text and returns the resulting role; throws
    *                        IllegalArgumentException for a bad value, IllegalStateException if it cannot be persisted
    * @param resetStatistics clears statistics
    * @param warnLog         where failures to read an attribute are reported
    */
   public ContinuityControl(List<ControlAttribute> attributes, UnaryOperator<String> setSiteRole, Runnable resetStatistics,
                            Consumer<String> warnLog) {
      attributes.forEach(a -> this.attributes.put(a.name(), a));
      this.setSiteRole = setSiteRole;
      this.resetStatistics = resetStatistics;
      this.warnLog = warnLog;
      this.info = buildInfo();
   }

   @Override
   public Object getAttribute(String name) throws AttributeNotFoundException {
      ControlAttribute a = attributes.get(name);
      if (a == null) {
         throw new AttributeNotFoundException("No attribute " + name + " on the continuity MBean");
      }
      return read(a);
   }

   /** Never throws: a failing reader yields null so a bulk Jolokia read still returns everything else. */
   private Object read(ControlAttribute a) {
      try {
         return a.value().get();
      } catch (RuntimeException e) {
         warnLog.accept("continuity MBean: reading " + a.name() + " failed: " + e);
         return null;
      }
   }

   @Override
   public AttributeList getAttributes(String[] names) {
      AttributeList list = new AttributeList();
      for (String name : names) {
         ControlAttribute a = attributes.get(name);
         if (a != null) {
            list.add(new Attribute(name, read(a)));
         }
      }
      return list;
   }

   @Override
   public void setAttribute(Attribute attribute) throws AttributeNotFoundException {
      throw new AttributeNotFoundException(attribute.getName() + " is read-only; use the setSiteRole operation to change the role");
   }

   @Override
   public AttributeList setAttributes(AttributeList attributes) {
      return new AttributeList();
   }

   @Override
   public Object invoke(String action, Object[] params, String[] signature) throws MBeanException, ReflectionException {
      int n = params == null ? 0 : params.length;
      if (SET_SITE_ROLE.equals(action) && n == 1) {
         Object role = params[0];
         try {
            return setSiteRole.apply(role == null ? null : String.valueOf(role));
         } catch (IllegalArgumentException | IllegalStateException e) {
            throw new MBeanException(e, e.getMessage());
         }
      }
      if (RESET_STATISTICS.equals(action) && n == 0) {
         resetStatistics.run();
         return null;
      }
      throw new ReflectionException(new NoSuchMethodException(action + " with " + n + " parameter(s)"),
                                    "The continuity MBean has no operation " + action + " taking " + n + " parameter(s)");
   }

   @Override
   public MBeanInfo getMBeanInfo() {
      return info;
   }

   public List<ControlAttribute> attributes() {
      return List.copyOf(attributes.values());
   }

   private MBeanInfo buildInfo() {
      MBeanAttributeInfo[] attrs = attributes.values().stream()
         .map(a -> new MBeanAttributeInfo(a.name(), a.type(), a.description() + " [" + a.unit() + "]", true, false, false))
         .toArray(MBeanAttributeInfo[]::new);
      MBeanOperationInfo[] ops = {
         new MBeanOperationInfo(SET_SITE_ROLE,
                                "Sets the site role to 'active' or 'passive', persists it in the state file and returns the new role",
                                new MBeanParameterInfo[] {
                                   new MBeanParameterInfo("role", String.class.getName(), "active | passive")},
                                String.class.getName(), MBeanOperationInfo.ACTION),
         new MBeanOperationInfo(RESET_STATISTICS,
                                "Clears the ack-model, replication-latency and guard statistics (not the site role)",
                                new MBeanParameterInfo[0], void.class.getName(), MBeanOperationInfo.ACTION)};
      return new MBeanInfo(ContinuityControl.class.getName(),
                           "Continuity broker plugin: ack model, mirror replication latency, passive-site guard",
                           attrs, null, ops, null);
   }
}
