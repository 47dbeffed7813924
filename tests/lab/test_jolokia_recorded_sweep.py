"""Replay every side-effect-free request recorded on real Artemis 2.44.0 (dc1) against the lab's Jolokia layer
and compare the answer's shape: HTTP status, top-level keys, JSON status, error_type, and for values the keys
and JSON types (a lab value may omit attributes the lab does not model, never invent or retype one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import RECORDED, VIEWER, VIEWER_PW

SAFE_EXEC_PREFIXES = ("list", "count", "get")


def _replayable() -> list[str]:
    if not RECORDED.is_dir():
        return []
    names = []
    for path in sorted(RECORDED.glob("*.json")):
        rec = json.loads(path.read_text())
        text = json.dumps(rec["http"].get("body"))
        if 'broker=\\"dc2\\"' in text or "MIRROR_DC1" in text or "8261" in json.dumps(rec["http"]):
            continue  # needs the peer broker
        bodies = rec["http"].get("body")
        items = bodies if isinstance(bodies, list) else [bodies] if isinstance(bodies, dict) else []
        kinds_ok = all(
            i.get("type") in ("read", "search", "list", "version")
            or (i.get("type") == "exec" and str(i.get("operation", "")).startswith(SAFE_EXEC_PREFIXES))
            for i in items)
        if rec["http"]["method"] == "GET":
            kinds_ok = any(seg in rec["http"]["path"] for seg in ("/read/", "/search/", "/version", "/list"))
            kinds_ok = kinds_ok or rec["http"]["path"].endswith("/jolokia/")
            kinds_ok = kinds_ok or "listBrokerConnections" in rec["http"]["path"]
        if kinds_ok and (items or rec["http"]["method"] == "GET"):
            names.append(path.name)
    return names


def _type(value: Any) -> str:
    return type(value).__name__


def _compare_value(ours: Any, real: Any, where: str) -> None:
    if real is None or ours is None:
        return  # null-able attributes (FirstMessageAge on an empty queue, ...)
    if isinstance(real, dict) and isinstance(ours, dict):
        extra = set(ours) - set(real)
        assert not extra or where.endswith(":list") or where.endswith(":search"), f"{where}: invented keys {extra}"
        for key in set(ours) & set(real):
            _compare_value(ours[key], real[key], f"{where}.{key}")
        return
    if isinstance(real, bool) or isinstance(ours, bool):
        assert _type(ours) == _type(real), f"{where}: {ours!r} vs {real!r}"
        return
    if isinstance(real, int | float) and isinstance(ours, int | float):
        return
    assert _type(ours) == _type(real), f"{where}: {_type(ours)} vs {_type(real)}"


def _compare(ours: dict[str, Any], real: dict[str, Any], where: str) -> None:
    assert set(ours) == set(real), f"{where}: keys {set(ours)} vs {set(real)}"
    assert ours["status"] == real["status"], f"{where}: status {ours} vs {real}"
    if "error_type" in real:
        assert ours["error_type"] == real["error_type"]
    if "request" in real:
        assert ours["request"].get("type") == real["request"].get("type")
    if "value" in real and real["request"].get("type") == "read":
        _compare_value(ours["value"], real["value"], f"{where}:read")
    elif "value" in real and real["request"].get("type") == "exec" and isinstance(real["value"], str):
        try:
            real_v, ours_v = json.loads(real["value"]), json.loads(ours["value"])
        except (ValueError, TypeError):
            return
        if isinstance(real_v, dict) and "data" in real_v:
            assert set(ours_v) == set(real_v)
            if real_v["data"] and ours_v["data"]:
                assert set(ours_v["data"][0]) == set(real_v["data"][0])
        elif isinstance(real_v, list) and real_v and ours_v:
            assert set(ours_v[0]) == set(real_v[0])


@pytest.mark.parametrize("name", _replayable() or [pytest.param("none", marks=pytest.mark.skip(
    reason=f"recorded Artemis responses not available at {RECORDED}"))])
@pytest.mark.parametrize("target", ["fake", "engine"])
def test_replay_recorded_request(request: pytest.FixtureRequest, target: str, name: str) -> None:
    rec = json.loads((Path(RECORDED) / name).read_text())
    lab = request.getfixturevalue("fake_lab" if target == "fake" else "engine_lab")
    j = lab.jolokia
    http = rec["http"]
    # Same credentials class and Origin class as recorded: the broker's own origin maps to ours.
    origin = http["headers"].get("Origin")
    kw: dict[str, Any] = {"origin": j.origin if origin == "http://127.0.0.1:8161" else origin}
    auth = http.get("auth") or ""
    if auth.startswith("none"):
        kw["user"] = None
    elif "WRONG" in auth:
        kw["password"] = "wrong"
    elif "norole" in auth:
        kw.update(user=VIEWER, password=VIEWER_PW)
    if http["method"] == "GET":
        reply = j.get(http["path"].split("/console/jolokia", 1)[1] or "/", **kw)
    else:
        reply = j.post(http["body"], **kw)
    if reply.status == 401:
        assert rec["response"]["status_code"] == 401 and reply.raw == b""
        return
    assert reply.status == rec["response"]["status_code"], name
    ours, real = reply.json, rec["response"]["body"]
    if isinstance(real, list):
        assert isinstance(ours, list) and len(ours) == len(real)
        for i, (o, r) in enumerate(zip(ours, real, strict=True)):
            _compare(o, r, f"{name}[{i}]")
    else:
        _compare(ours, real, name)
