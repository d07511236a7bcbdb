"""Find or start the real HBase the test session runs against (DESIGN.md §2), in this order:

1. ``$TMS_HBASE_THRIFT`` names one: use it;
2. a Docker daemon answers: start an HBase image with testcontainers;
3. otherwise start the project's local launcher (``tms-admin hbase start``).

There is no fallback to a fake: if none of these works the session fails.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

import happybase

from tms_hbase.config import THRIFT_ENV, thrift_address
from tms_hbase.launcher import LocalHBase

DOCKER_IMAGE = os.environ.get("TMS_TEST_HBASE_IMAGE", "harisekhon/hbase:2.1")


def _answers(address: str, timeout_ms: int = 5000) -> bool:
    host, port = thrift_address(address)
    conn = happybase.Connection(host, port, timeout=timeout_ms, autoconnect=False)
    try:
        conn.open()
        conn.tables()
        return True
    except Exception:
        return False
    finally:
        conn.close()


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:
        return False


@contextmanager
def _docker_hbase() -> Iterator[str]:
    from testcontainers.core.container import DockerContainer

    with DockerContainer(DOCKER_IMAGE).with_exposed_ports(9090) as container:
        address = f"{container.get_container_host_ip()}:{container.get_exposed_port(9090)}"
        deadline = time.monotonic() + 300
        while not _answers(address):
            if time.monotonic() > deadline:
                raise RuntimeError(f"HBase in Docker ({DOCKER_IMAGE}) did not answer at {address}")
            time.sleep(1)
        yield address


@contextmanager
def hbase_for_tests() -> Iterator[tuple[str, str]]:
    """Yield (Thrift address, how it was found); stops only what it started itself."""
    address = os.environ.get(THRIFT_ENV)
    if address:
        if not _answers(address, 15000):
            raise RuntimeError(f"{THRIFT_ENV}={address} is set but no HBase Thrift gateway answers there")
        yield address, f"${THRIFT_ENV}"
        return
    if _docker_answers():
        with _docker_hbase() as address:
            yield address, f"docker image {DOCKER_IMAGE}"
        return
    launcher = LocalHBase()
    was_running = launcher.status().answering
    address = launcher.start()
    try:
        yield address, "local launcher" + (" (already running)" if was_running else "")
    finally:
        if not was_running:
            launcher.stop()
