"""bench/writers.py's CPU per publish by process: the local launcher's JVM (region server and Thrift gateway
in one) is found by the address it serves, and its CPU grows with the publishes it serves; any other address
has no known JVMs."""

from __future__ import annotations

import os
from pathlib import Path

from bench.gateway import tree_cpu
from bench.writers import local_jvms
from tms_hbase import MessagingClient, TopicId

from ..hbase_server import served_by_launcher
from ..tx_server import free_port


def test_an_address_the_launcher_does_not_serve_has_no_known_jvms() -> None:
    assert local_jvms(f"127.0.0.1:{free_port()}") == {}


def test_the_launchers_jvm_is_found_and_its_cpu_counts_publishes(hbase_address: str, client: MessagingClient) -> None:
    jvms = local_jvms(hbase_address)
    if not served_by_launcher(hbase_address):  # an external HBase: its JVMs are not this machine's to read
        assert jvms == {}
        return
    commands = {role: Path(f"/proc/{pid}/cmdline").read_bytes() for role, pid in jvms.items()}
    assert list(commands) == ["HBase JVM (region server + Thrift)"]
    assert b"HMaster" in commands["HBase JVM (region server + Thrift)"]
    assert b"hbase.regionserver.impl=ThriftRegionServer" in commands["HBase JVM (region server + Thrift)"]
    topic = TopicId("bench", "cpu")
    client.create_topic(topic)
    before = {role: tree_cpu(pid) for role, pid in jvms.items()}
    batch = [os.urandom(1024) for _ in range(100)]
    for _ in range(300):  # 30 MB through the JVM: far more than one 10 ms tick of its CPU
        client.publish(topic, batch)
    assert all(tree_cpu(pid) > before[role] for role, pid in jvms.items())
