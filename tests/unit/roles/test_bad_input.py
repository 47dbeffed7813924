"""Bad input fails before anything changes, with a message naming the variable.

Two layers: the roles' meta/argument_specs.yml through Ansible's own ArgumentSpecValidator (what the implicit
role argument validation runs), and real `ansible-playbook` runs of playbooks/deploy.yml on a throw-away local
inventory, checking the failure message and that no install/instance directory appeared.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from continuity_lab import schemas

from .render import ROLES, ROOT


def _spec(role):
    options = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"][
        "options"
    ]

    def clean(opts):  # documentation keys are not part of a module argument spec
        out = {}
        for name, o in opts.items():
            o = {k: v for k, v in o.items() if k not in ("description",)}
            if "options" in o:
                o["options"] = clean(o["options"])
            out[name] = o
        return out

    return clean(options)


def _validate(role, params):
    return ArgumentSpecValidator(_spec(role)).validate(params)


GOOD_BROKER = {"broker_admin_password": "x"}


def test_good_broker_input_passes_the_spec():
    result = _validate("broker", dict(GOOD_BROKER, broker_acceptors=[{"name": "a", "port": 1, "protocols": ["AMQP"]}]))
    assert not result.error_messages


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"broker_acceptors": [{"name": "a", "port": "sixty"}]}, "broker_acceptors"),
        ({"broker_acceptors": [{"name": "a", "port": 1, "protocols": ["AMQPS"]}]}, "protocols"),
        ({"broker_service_mode": "docker"}, "broker_service_mode"),
        ({"broker_ha_policy": {"type": "live-only"}}, "broker_ha_policy"),
        ({"broker_journal": {"type": "FAST"}}, "broker_journal"),
        ({"broker_web_tls": {"enabled": True, "keystore": "/x.p12"}}, "keystore"),
        ({"broker_web_tls": {"enabled": "sometimes"}}, "enabled"),
        ({"broker_connections": [{"name": "X", "uri": "tcp://a:1", "mirror": {"sink": True}}]}, "sink"),
        (
            {"broker_connections": [{"name": "X", "uri": "tcp://a:1", "reconnect_attempts": "forever"}]},
            "reconnect_attempts",
        ),
        ({"broker_users": [{"name": "u", "password": "p"}]}, "roles"),
        ({"broker_admin_password": None}, "broker_admin_password"),
        ({"broker_continuity_plugin": {"enabled": True, "initial_role": "standby"}}, "initial_role"),
        ({"broker_continuity_plugin": {"enabled": True, "latency_origin": "arrival"}}, "latency_origin"),
        ({"broker_continuity_plugin": {"enabled": True, "window_seconds": "a minute"}}, "window_seconds"),
        ({"broker_continuity_plugin": {"enabled": True, "mirror_users": {"mirror": 1}}}, "mirror_users"),
        ({"broker_continuity_plugin": {"enabled": True, "jar": "/x.jar"}}, "jar"),
        ({"broker_network_check": {"urls": "http://gw/health", "period": "often"}}, "period"),
        ({"broker_network_check": {"list": ["gw"], "interval": 5000}}, "interval"),
        ({"broker_network_check": {"list": {"gw": 1}}}, "list"),
    ],
)
def test_broker_spec_rejects_and_names_the_variable(params, needle):
    merged = dict(GOOD_BROKER)
    merged.update(params)
    if merged.get("broker_admin_password") is None:
        merged.pop("broker_admin_password")
    errors = _validate("broker", merged).error_messages
    assert errors and any(needle in e for e in errors), errors


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"mirror_sync": "sometimes"}, "mirror_sync"),
        ({"mirror_uri_scheme": "http"}, "mirror_uri_scheme"),
        ({"mirror_retry_interval": "1s"}, "mirror_retry_interval"),
    ],
)
def test_mirror_spec_rejects_and_names_the_variable(params, needle):
    errors = _validate("mirror", dict({"mirror_password": "p"}, **params)).error_messages
    assert errors and any(needle in e for e in errors), errors


# --------------------------------------------------------------------------------------------------------
# real playbook runs: the failure happens before any host change
# --------------------------------------------------------------------------------------------------------
SCHEMA_244 = schemas.path("2.44.0")


# Both hosts of the throw-away inventory as one shared-store pair (the peers named, the cluster credentials given).
SHARED_STORE = {"broker_ha_policy": {"type": "shared-store", "role": "primary"}, "broker_ha_peers": ["dc1-a", "dc2-a"],
                "broker_cluster_user": "cluster", "broker_cluster_password": "cluster-secret"}


def _inventory(tmp_path: Path, site_vars: dict) -> Path:
    archive = tmp_path / "apache-artemis-2.44.0-bin.tar.gz"
    archive.write_bytes(b"")  # never unpacked: validation must fail first (or broker_validate_only stops)
    common = {
        "ansible_connection": "local",
        "ansible_python_interpreter": str(ROOT / ".venv" / "bin" / "python"),
        "broker_archive_file": str(archive),
        "broker_schema_dir": str(SCHEMA_244),
        "broker_install_dir": str(tmp_path / "opt"),
        "broker_instance_dir": str(tmp_path / "instances" / "{{ inventory_hostname }}"),
        "broker_admin_password": "admin-secret",
        "mirror_password": "mirror-secret",
        "mirror_advertised_host": "127.0.0.1",
    }
    common.update(site_vars)
    inv = {
        "all": {
            "children": {
                "artemis": {
                    "vars": common,
                    "children": {
                        "dc1": {"hosts": {"dc1-a": {"broker_port_offset": 0}}},
                        "dc2": {"hosts": {"dc2-a": {"broker_port_offset": 100}}},
                    },
                }
            }
        }
    }
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inv))
    return path


def _play(tmp_path, site_vars, *extra):
    inv = _inventory(tmp_path, site_vars)
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "ansible-playbook"),
            "-i",
            str(inv),
            str(ROOT / "playbooks" / "deploy.yml"),
            *extra,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc, proc.stdout + proc.stderr


def _untouched(tmp_path):
    return not (tmp_path / "opt").exists() and not (tmp_path / "instances").exists()


def test_good_inventory_validates_without_touching_the_host(tmp_path):
    proc, out = _play(tmp_path, {"broker_validate_only": True})
    assert proc.returncode == 0, out[-4000:]
    assert _untouched(tmp_path)


@pytest.mark.parametrize(
    ("site_vars", "needle"),
    [
        ({"broker_service_mode": "docker"}, "broker_service_mode"),
        # issue 16: "*://127.0.0.1*" would also accept the Origin http://127.0.0.1.evil.example
        ({"broker_jolokia_origins": ["*://127.0.0.1:8161", "*://127.0.0.1*"]},
         'broker_jolokia_origins: ["*://127.0.0.1*"] would also accept an Origin such as http://127.0.0.1.evil.example'),
        ({"broker_admin_password": None}, "broker_admin_password"),
        ({"broker_admin_password": ""}, "broker_admin_password: must be a non-empty string"),
        ({"mirror_sites": ["dc1", "dc2", "dc3"]}, "mirror_sites: dual mirroring joins exactly two sites"),
        (
            {"broker_mirror_acceptor": {"enabled": True, "port": 61616}},
            "broker_mirror_acceptor.port: port 61616 is already used by broker_acceptors[0]",
        ),
        ({"mirror_peer_site": "dc9"}, 'mirror_peer_site: the peer site "dc9"'),
        ({"mirror_reconnect_attempts": 0}, "mirror_reconnect_attempts: must be -1 (forever) or > 0"),
        (
            {"mirror_address_filter": "orders.*"},
            "broker_connections[0].mirror.address_filter: 'orders.*' uses a wildcard",
        ),
        (
            {"broker_continuity_plugin": {"enabled": True, "jar_file": "/nonexistent/p.jar", "window_seconds": 5}},
            "broker_continuity_plugin.window_seconds: must be between 6 and 86400, got 5",
        ),
        (
            {"broker_continuity_plugin": {"enabled": True, "jar_file": "/nonexistent/continuity.jar"}},
            "broker_continuity_plugin.jar_file: /nonexistent/continuity.jar is not a file on the controller",
        ),
        (
            {"broker_continuity_plugin": {"enabled": True, "initial_role": "standby", "jar_file": "/x.jar"}},
            "broker_continuity_plugin",
        ),
        # issue 16: Jolokia over https
        (
            {"broker_web_tls": {"enabled": True, "keystore_password": "x"}},
            "broker_web_tls on dc1-a: give exactly one of broker_web_tls.keystore_path",
        ),
        (
            {"broker_web_tls": {"enabled": True, "keystore_path": "/etc/web.p12"}},
            "broker_web_tls.keystore_password must be set",
        ),
        (
            {"broker_web_tls": {"enabled": True, "keystore_file": "/nonexistent/web.p12", "keystore_password": "x"}},
            "broker_web_tls.keystore_file: /nonexistent/web.p12 is not a file on the controller",
        ),
        (
            {"broker_web_tls": {"enabled": True, "keystore_path": "/etc/web.p12", "keystore_password": "x",
                                "ca_path": "/nonexistent/ca.pem"}},
            "broker_web_tls.ca_path: /nonexistent/ca.pem is not a file on the controller",
        ),
        # issue 18: a shared-store broker must name the pair's one directory (broker_data_dir)
        ({**SHARED_STORE}, "broker_data_dir on dc1-a: required with broker_ha_policy.type=shared-store: give the "
                           "absolute path of the pair shared store directory"),
        ({**SHARED_STORE, "broker_data_dir": "store"},
         'broker_data_dir on dc1-a: "store" is relative: with broker_ha_policy.type=shared-store it must be an '
         "absolute path"),
        ({**SHARED_STORE, "broker_data_dir": "/srv/{{ inventory_hostname }}"},
         "broker_data_dir on dc1-a: /srv/dc1-a differs from the pair: dc2-a gives /srv/dc2-a; both brokers of a "
         "shared-store pair must give the same directory"),
        ({"broker_data_dir": "/"}, 'broker_data_dir on dc1-a: "/" is the root directory'),
        # issue 18: the network check (split brain) checks something, not loopback, with positive times
        ({"broker_network_check": {"period": 1000}},
         "broker_network_check on dc1-a: give list (hosts to ping) or urls (URLs to read)"),
        ({"broker_network_check": {"list": ["10.0.0.1", "127.0.0.1"]}},
         "broker_network_check.list on dc1-a: 127.0.0.1 is a loopback address, which Artemis ignores"),
        ({"broker_network_check": {"urls": ["http://10.0.0.1/health"], "period": 0}},
         "broker_network_check.period on dc1-a: must be > 0 ms, got 0"),
        ({"broker_network_check": {"urls": ["http://10.0.0.1/health"], "timeout": -5}},
         "broker_network_check.timeout on dc1-a: must be > 0 ms, got -5"),
        ({"broker_network_check": {"urls": ["10.0.0.1/health"]}},
         'broker_network_check.urls on dc1-a: absolute URLs with a scheme (http://host/path), one per entry: '
         '["10.0.0.1/health"]'),
    ],
)
def test_bad_inventory_fails_before_any_change(tmp_path, site_vars, needle):
    proc, out = _play(tmp_path, site_vars)
    assert proc.returncode != 0
    assert needle in out.replace("\n", " ").replace("  ", " ") or needle in out, out[-4000:]
    assert _untouched(tmp_path)


def _typed_options(role: str) -> dict:
    """The role's int, float and bool options that have a non-string default, with that default."""
    spec = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]
    defaults = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text()) or {}
    return {name: defaults[name] for name, o in spec["options"].items()
            if o.get("type") in ("int", "float", "bool") and name in defaults
            and not isinstance(defaults[name], str) and name != "broker_validate_only"}


def test_numbers_and_booleans_given_as_strings_work_as_typed(tmp_path):
    """`-e key=value` and AWX text surveys give every value as a string (issue 16): each int, float and bool option of
    both roles, given as a string, renders and validates like its typed default, and a string "false" is false."""
    typed = {**_typed_options("broker"), **_typed_options("mirror")}
    assert len(typed) >= 15, typed
    strings = [a for name, value in typed.items()
               for a in ("-e", f"{name}={str(value).lower() if isinstance(value, bool) else value}")]
    proc, out = _play(tmp_path, {}, "-e", "broker_validate_only=true", *strings, "-e", "mirror_sync=false",
                      "-e", "broker_persistence_enabled=false", "-vvv")
    assert proc.returncode == 0, out[-4000:]
    assert "<persistence-enabled>false</persistence-enabled>" in out, "a string 'false' was taken as true"
    assert 'sync="true"' not in out
    assert _untouched(tmp_path)
