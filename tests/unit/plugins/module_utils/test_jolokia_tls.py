"""TLS: verification on by default, a CA file via ca_path, validate_certs=false (local HTTPS server, 127.0.0.1)."""

from __future__ import annotations

import http.server
import json
import shutil
import ssl
import subprocess
import threading

import pytest

from ansible_collections.continuity.artemis.plugins.module_utils import jolokia

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl binary needed to make a test CA")


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps([{"request": r, "value": "tls-ok", "status": 200} for r in req]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def https_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    ca_key, ca_crt, key, csr, crt = (d / n for n in ("ca.key", "ca.crt", "srv.key", "srv.csr", "srv.crt"))
    ext = d / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")

    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca_crt), "-days", "1",
        "-subj", "/CN=continuity test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key), "-CAcreateserial", "-out",
        str(crt), "-days", "1", "-extfile", str(ext))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(crt), str(key))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}/console/jolokia", str(ca_crt)
    server.shutdown()
    server.server_close()


def test_unknown_ca_is_refused_by_default_with_a_hint(https_server):
    url, _ca = https_server
    c = jolokia.JolokiaClient(url, retries=0, timeout=5)
    with pytest.raises(jolokia.ConnectionFailed) as info:
        c.version()
    assert "could not be verified" in str(info.value) and "ca_path" in str(info.value)


def test_ca_path_verifies(https_server):
    url, ca = https_server
    c = jolokia.JolokiaClient(url, ca_path=ca, timeout=5)
    assert c.version() == "tls-ok"
    assert c.origin == url.rsplit("/console", 1)[0]


def test_validate_certs_false_skips_verification(https_server):
    url, _ca = https_server
    c = jolokia.JolokiaClient(url, validate_certs=False, timeout=5)
    assert c.version() == "tls-ok"
