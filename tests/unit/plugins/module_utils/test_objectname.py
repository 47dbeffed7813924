"""ObjectName builders, quoting and the parser."""

from __future__ import annotations

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import objectname as on


def test_broker_and_queue_names_match_artemis_registration():
    assert on.broker("dc1") == 'org.apache.activemq.artemis:broker="dc1"'
    assert on.queue("dc1", "orders", "orders", "ANYCAST") == (
        'org.apache.activemq.artemis:broker="dc1",component=addresses,address="orders",'
        'subcomponent=queues,routing-type="anycast",queue="orders"')
    assert on.acceptor("dc1", "amqp").endswith(',component=acceptors,name="amqp"')
    assert on.broker_connection("dc1", "DC2").endswith(',component=broker-connections,name="DC2"')
    assert on.address("dc1", "$ACTIVEMQ_ARTEMIS_MIRROR_DC2").endswith('address="$ACTIVEMQ_ARTEMIS_MIRROR_DC2"')


@pytest.mark.parametrize(
    "raw,quoted",
    [("a\"b", '"a\\"b"'), ("a\\b", '"a\\\\b"'), ("a*b", '"a\\*b"'), ("a?b", '"a\\?b"'), ("a\nb", '"a\\nb"'),
     ("plain", '"plain"'), ("with,comma=eq:colon", '"with,comma=eq:colon"')],
)
def test_quote_roundtrip(raw, quoted):
    assert on.quote(raw) == quoted
    assert on.unquote(quoted) == raw


def test_bad_routing_type_and_escape():
    with pytest.raises(on.ObjectNameError):
        on.queue("b", "a", "q", "broadcast")
    with pytest.raises(on.ObjectNameError):
        on.unquote('"bad\\x"')
    with pytest.raises(on.ObjectNameError):
        on.quote(None)


def test_parse_canonical_name_with_quoted_commas():
    name = ('org.apache.activemq.artemis:address="a,b=c",broker="dc\\"1",component=addresses,'
            'queue="q*",routing-type="multicast",subcomponent=queues')
    domain, props = on.parse(name)
    assert domain == on.DOMAIN
    assert props == {"address": "a,b=c", "broker": 'dc"1', "component": "addresses", "queue": "q*",
                     "routing-type": "multicast", "subcomponent": "queues"}
    assert on.kind(name) == "queue"


def test_builder_parse_roundtrip():
    name = on.queue("dc1", "orders.$x", 'we"ird', "multicast")
    _, props = on.parse(name)
    assert props["queue"] == 'we"ird' and props["address"] == "orders.$x" and props["routing-type"] == "multicast"


@pytest.mark.parametrize(
    "name,kind",
    [('org.apache.activemq.artemis:broker="dc1"', "broker"),
     ('org.apache.activemq.artemis:address="x",broker="dc1",component=addresses', "address"),
     ('org.apache.activemq.artemis:broker="dc1",component=acceptors,name="amqp"', "acceptor"),
     ('org.apache.activemq.artemis:broker="dc1",component=broker-connections,name="DC2"', "broker-connection"),
     ('java.lang:type=Memory', None), ("garbage", None)],
)
def test_kind(name, kind):
    assert on.kind(name) == kind


def test_parse_errors():
    with pytest.raises(on.ObjectNameError):
        on.parse("nodomain")
    with pytest.raises(on.ObjectNameError):
        on.parse('d:k="unterminated')
    with pytest.raises(on.ObjectNameError):
        on.parse("d:novalue")


def test_patterns():
    assert on.all_queues("dc1").endswith('broker="dc1",component=addresses,address=*,subcomponent=queues,*')
    assert on.all_brokers() == "org.apache.activemq.artemis:broker=*"
    assert on.all_acceptors("dc1").endswith("component=acceptors,name=*")
    assert on.all_broker_connections("dc1").endswith("component=broker-connections,name=*")


def test_names_jolokia_returned_in_real_capture(recorded_capture):
    """Every name a real 2.44.0 search returned parses and classifies."""
    names = recorded_capture("10-search-queues.json")["response"]["body"]["value"]
    assert names
    for name in names:
        assert on.kind(name) == "queue", name
        _, props = on.parse(name)
        assert props["broker"] == "dc1" and props["routing-type"] in on.ROUTING_TYPES
