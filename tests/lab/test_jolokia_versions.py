"""What the management surface shows depends on the emulated Artemis version (ARTEMIS-FACTS section 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import start_fake_lab


@pytest.mark.parametrize(
    ("version", "bconn_mbean", "pending_acks", "snf_mbean", "ha_policy"),
    [("2.30.0", False, False, False, "Live Only"), ("2.33.0", False, False, True, "Primary Only"),
     ("2.37.0", False, False, True, "Primary Only"), ("2.40.0", True, True, True, "Primary Only"),
     ("2.44.0", True, True, True, "Primary Only")],
)
def test_version_gated_surfaces(tmp_path: Path, version: str, bconn_mbean: bool, pending_acks: bool,
                                snf_mbean: bool, ha_policy: str) -> None:
    lab = start_fake_lab(tmp_path, version=version)
    try:
        j = lab.jolokia
        assert j.value({"type": "read", "mbean": j.bname(), "attribute": "Version"}) == f"{version}-lab"
        assert j.value({"type": "read", "mbean": j.bname(), "attribute": "HAPolicy"}) == ha_policy
        bconn = j.call({"type": "read", "mbean": j.cname("DC2")})
        assert (bconn["status"] == 200) is bconn_mbean
        if not bconn_mbean:
            assert bconn["error_type"] == "javax.management.InstanceNotFoundException"
        acks = j.call({"type": "read", "mbean": j.bname(), "attribute": "PendingMirrorAcks"})
        if pending_acks:
            assert acks["value"] == 0
        else:
            assert acks["status"] == 404 and acks["error"].endswith("No such attribute: PendingMirrorAcks")
        rows = json.loads(j.value({"type": "exec", "mbean": j.bname(), "operation": "listBrokerConnections()"}))
        expected = {"name", "protocol", "started"} | ({"uri", "connected"} if bconn_mbean else set())
        assert set(rows[0]) == expected
        snf = j.call({"type": "read", "mbean": j.qname("$ACTIVEMQ_ARTEMIS_MIRROR_DC2"), "attribute": "MessageCount"})
        assert (snf["status"] == 200) is snf_mbean
        queues = j.value({"type": "read", "mbean": j.bname(), "attribute": "QueueNames"})
        assert ("$ACTIVEMQ_ARTEMIS_MIRROR_DC2" in queues) is snf_mbean
    finally:
        lab.server.stop()
