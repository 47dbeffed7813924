"""Version parsing and the feature matrix (ARTEMIS-FACTS section 5)."""

from __future__ import annotations

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import versions as v


@pytest.mark.parametrize(
    "text,expected",
    [("2.44.0", (2, 44, 0, "")), ("2.44.0-lab", (2, 44, 0, "lab")), ("2.33.0.redhat-00010", (2, 33, 0, "redhat-00010")),
     ("2.31", (2, 31, 0, "")), (" 2.40.1-SNAPSHOT ", (2, 40, 1, "SNAPSHOT"))],
)
def test_parse(text, expected):
    assert tuple(v.parse_version(text)) == expected


@pytest.mark.parametrize("bad", [None, "", "lab", "x.y.z"])
def test_parse_rejects(bad):
    with pytest.raises(v.VersionError):
        v.parse_version(bad)


def test_str_keeps_qualifier():
    assert str(v.parse_version("2.44.0-lab")) == "2.44.0-lab"


@pytest.mark.parametrize(
    "version,snf,bconn,pending",
    [("2.30.0", False, False, False), ("2.31.2", False, False, False), ("2.32.0", True, False, False),
     ("2.33.0", True, False, False), ("2.39.0", True, True, False), ("2.40.0", True, True, True),
     ("2.44.0-lab", True, True, True)],
)
def test_feature_boundaries(version, snf, bconn, pending):
    f = v.features(version)
    assert f["snf_queue_mbean"] is snf
    assert f["broker_connection_mbean"] is bconn
    assert f["list_broker_connections_uri_connected"] is bconn
    assert f["pending_mirror_acks"] is pending
    assert v.has(version, "pending_mirror_acks") is pending


def test_other_features_and_unknown_name():
    assert v.has("2.34.0", "mirror_ack_manager_settings") and not v.has("2.33.9", "mirror_ack_manager_settings")
    assert v.has("2.35.0", "queue_stat_json") and v.has("2.28.0", "mirror_sync")
    assert v.since("pending_mirror_acks") == "2.40"
    with pytest.raises(KeyError):
        v.has("2.44.0", "no_such_feature")
