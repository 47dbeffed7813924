"""Local mode binds loopback only: the driver's listening sockets are on 127.0.0.1, never on the host's network."""

from __future__ import annotations

from pathlib import Path


def _listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp{,6} writes them) of the sockets listening on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].rsplit(":", 1)
            if int(port_hex, 16) == port and fields[3] == "0A":  # 0A = LISTEN
                found.add(address)
    return found


def test_local_driver_listens_on_loopback_only(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.host") == "127.0.0.1"
    port = int(conf.get("spark.driver.port"))
    addresses = _listening_addresses(port)
    loopback = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}
    assert addresses, f"nothing listens on the driver port {port}"
    assert addresses <= loopback, f"the driver port {port} listens on {addresses}, not only on 127.0.0.1"
