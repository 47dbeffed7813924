"""The lab broker engine: AMQP 1.0 server, queues, journal, mirroring (see `artemis_lab.api.BrokerAPI`)."""
