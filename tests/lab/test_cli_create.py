"""`bin/artemis create` and the archive layout, through the built lab archive only."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import ADMIN, ADMIN_PW, REPO, SCHEMAS, run_artemis

from artemis_lab import dist, security

EXPECTED_ETC = {"broker.xml", "bootstrap.xml", "jolokia-access.xml", "management.xml", "artemis-users.properties",
                "artemis-roles.properties", "login.config", "artemis.profile", "log4j2.properties"}


def _create(home: Path, target: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_artemis(home, "create", str(target), "--user", ADMIN, "--password", ADMIN_PW, "--require-login",
                       "--name", "dc1", *extra)


def test_archive_is_laid_out_like_apache(lab_home: Path) -> None:
    assert lab_home.name == "lab-artemis-2.44.0"
    assert (lab_home / "bin" / "artemis").stat().st_mode & 0o111
    assert (lab_home / "lib" / "artemis_lab" / "cli.py").exists()
    assert (lab_home / "lib" / "artemis_lab" / "EMULATED_VERSION").read_text().strip() == "2.44.0"
    schema = lab_home / "schema"
    if (SCHEMAS / "2.44.0").is_dir():
        assert (schema / "artemis-configuration.xsd").exists()
    else:
        assert (schema / "README").exists()


def test_schema_missing_gives_readme(tmp_path: Path) -> None:
    archive = dist.build(tmp_path / "out", "2.33.0", schema_root=tmp_path / "no-schemas")
    top = dist.extract(archive, tmp_path / "x")
    assert not list((top / "schema").glob("*.xsd"))
    assert "not available" in (top / "schema" / "README").read_text()


def test_no_xsd_or_recorded_file_is_tracked_in_git() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert not [p for p in tracked.splitlines() if p.endswith(".xsd")]
    assert not [p for p in tracked.splitlines() if re.match(r".*\d\d-(err|exec|read|list|bconn).*\.json$", p)]


def test_create_writes_real_instance_layout(lab_home: Path, fresh_dir: Path) -> None:
    result = _create(lab_home, fresh_dir, "--port-offset", "3", "--http-port", "8200")
    assert result.returncode == 0, result.stderr
    assert "emulating Artemis 2.44.0" in result.stdout and "Apache" not in result.stdout
    assert EXPECTED_ETC <= {p.name for p in (fresh_dir / "etc").iterdir()}
    for sub in ("journal", "bindings", "paging", "large-messages"):
        assert (fresh_dir / "data" / sub).is_dir()
    assert (fresh_dir / "log" / "artemis.log").exists()
    for script in ("artemis", "artemis-service"):
        assert (fresh_dir / "bin" / script).stat().st_mode & 0o111
    xml = (fresh_dir / "etc" / "broker.xml").read_text()
    assert 'xmlns="urn:activemq"' in xml and 'xmlns="urn:activemq:core"' in xml
    assert re.search(r'<acceptor name="artemis">tcp://0\.0\.0\.0:61619\?[^<]*protocols=CORE,AMQP', xml)
    assert re.search(r'<acceptor name="amqp">tcp://0\.0\.0\.0:5675\?[^<]*protocols=AMQP', xml)
    assert "<name>dc1</name>" in xml
    assert 'uri="http://localhost:8203"' in (fresh_dir / "etc" / "bootstrap.xml").read_text()
    access = (fresh_dir / "etc" / "jolokia-access.xml").read_text()
    assert "<allow-origin>*://localhost*</allow-origin>" in access and "<strict-checking/>" in access
    assert "HAWTIO_ROLE='amq'" in (fresh_dir / "etc" / "artemis.profile").read_text()
    assert (fresh_dir / "etc" / "artemis-utility.profile").exists()  # 2.37+


def test_password_is_stored_with_the_one_way_enc_format(lab_home: Path, fresh_dir: Path) -> None:
    assert _create(lab_home, fresh_dir).returncode == 0
    users = security.read_properties(fresh_dir / "etc" / "artemis-users.properties")
    stored = users[ADMIN]
    assert re.fullmatch(r"ENC\(1024:[0-9A-F]{64}:[0-9A-F]{128}\)", stored)
    assert security.verify_password(ADMIN_PW, stored) and not security.verify_password("nope", stored)
    roles = security.read_properties(fresh_dir / "etc" / "artemis-roles.properties")
    assert roles == {"amq": ADMIN}


def test_flags_no_web_no_acceptors_relax_jolokia(lab_home: Path, fresh_dir: Path) -> None:
    result = _create(lab_home, fresh_dir, "--no-web", "--no-amqp-acceptor", "--no-mqtt-acceptor",
                     "--no-stomp-acceptor", "--no-hornetq-acceptor", "--relax-jolokia", "--aio", "--data",
                     str(fresh_dir / "d2"))
    assert result.returncode == 0, result.stderr
    xml = (fresh_dir / "etc" / "broker.xml").read_text()
    assert re.findall(r'<acceptor name="(\w+)"', xml) == ["artemis"]
    assert "<journal-type>ASYNCIO</journal-type>" in xml
    assert "<binding" not in (fresh_dir / "etc" / "bootstrap.xml").read_text()
    assert "<strict-checking/>" not in (fresh_dir / "etc" / "jolokia-access.xml").read_text()
    assert (fresh_dir / "d2" / "journal").is_dir()


@pytest.mark.parametrize("flag", ["--bogus", "--clustered"])
def test_unknown_or_unsupported_flags_refused(lab_home: Path, fresh_dir: Path, flag: str) -> None:
    result = _create(lab_home, fresh_dir, flag)
    assert result.returncode == 2
    assert flag in result.stderr
    assert not (fresh_dir / "etc").exists()


def test_non_empty_directory_needs_force(lab_home: Path, fresh_dir: Path) -> None:
    assert _create(lab_home, fresh_dir).returncode == 0
    again = _create(lab_home, fresh_dir)
    assert again.returncode != 0 and "not empty" in again.stderr
    assert _create(lab_home, fresh_dir, "--force").returncode == 0


def test_version_and_user_commands(lab_home: Path, fresh_dir: Path) -> None:
    assert _create(lab_home, fresh_dir).returncode == 0
    version = run_artemis(fresh_dir, "version")
    assert version.returncode == 0 and "2.44.0-lab" in version.stdout and "Apache" not in version.stdout
    assert run_artemis(fresh_dir, "user", "add", "--user", "bob", "--password", "pw", "--role", "amq,view"
                       ).returncode == 0
    listed = run_artemis(fresh_dir, "user", "list").stdout
    assert '"bob"(amq,view)' in listed and f'"{ADMIN}"(amq)' in listed
    assert run_artemis(fresh_dir, "user", "rm", "--user", "bob").returncode == 0
    assert "bob" not in run_artemis(fresh_dir, "user", "list").stdout


def test_ensure_rebuilds_only_a_stale_archive(tmp_path: Path) -> None:
    import os

    first = dist.ensure(tmp_path, "2.44.0")
    stamp = first.stat().st_mtime_ns
    assert dist.ensure(tmp_path, "2.44.0").stat().st_mtime_ns == stamp  # up to date: kept
    os.utime(first, (1, 1))  # older than every source file
    assert dist.ensure(tmp_path, "2.44.0").stat().st_mtime > 1
