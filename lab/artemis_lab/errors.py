"""Exceptions that the lab broker raises where Artemis raises a Java exception.

`java_class` is what Jolokia puts in `error_type`; `str(exc)` is the message after `<class> : `.
"""

from __future__ import annotations


class LabArtemisError(Exception):
    java_class = "java.lang.Exception"
    jolokia_status = 500

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class NonExistentQueue(LabArtemisError):
    java_class = "org.apache.activemq.artemis.api.core.ActiveMQNonExistentQueueException"

    def __init__(self, queue: str):
        super().__init__(f"AMQ229017: Queue {queue} does not exist")


class NonExistentAddress(LabArtemisError):
    java_class = "org.apache.activemq.artemis.api.core.ActiveMQAddressDoesNotExistException"

    def __init__(self, address: str):
        super().__init__(f"AMQ229036: Address {address} does not exist")


class QueueExists(LabArtemisError):
    java_class = "org.apache.activemq.artemis.api.core.ActiveMQQueueExistsException"

    def __init__(self, queue: str, address: str):
        super().__init__(f"AMQ229019: Queue {queue} already exists on address {address}")


class IllegalArgument(LabArtemisError):
    """Artemis' IllegalArgumentException; Jolokia reports these with status 400 for unknown names."""

    java_class = "java.lang.IllegalArgumentException"
    jolokia_status = 400


class IllegalState(LabArtemisError):
    java_class = "java.lang.IllegalStateException"


class SecurityError(LabArtemisError):
    java_class = "org.apache.activemq.artemis.api.core.ActiveMQSecurityException"


class ConfigurationError(LabArtemisError):
    """broker.xml that Artemis would reject: the broker refuses to start."""

    java_class = "org.apache.activemq.artemis.api.config.ActiveMQConfigurationException"
