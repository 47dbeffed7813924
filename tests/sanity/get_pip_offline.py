"""Offline stand-in for get-pip.py, used by ansible-test to put pip into the virtual environments of its
sanity tests (see tests/sanity/run.sh). The real script is downloaded from a host this network refuses;
the standard library's ensurepip bootstraps pip instead, then pip installs the requested packages (pip,
setuptools, wheel at ansible-test's pinned versions) from the package index like the real script does.

ansible-test runs pip with a stripped environment (no SSL_CERT_FILE/PIP_CERT), so the system CA bundle that
the package index's certificate chain needs is written into the venv's own pip.conf, which every later pip
run in this venv reads."""

import ensurepip
import os
import subprocess
import sys

BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")
bundle = next((b for b in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE"), *BUNDLES)
               if b and os.path.exists(b)), None)
if bundle:
    with open(os.path.join(sys.prefix, "pip.conf"), "w", encoding="utf-8") as fh:
        fh.write(f"[global]\ncert = {bundle}\n")
    os.environ["SSL_CERT_FILE"] = bundle
ensurepip.bootstrap()
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
cert = ["--cert", bundle] if bundle else []
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "--upgrade", *cert, *args]))
