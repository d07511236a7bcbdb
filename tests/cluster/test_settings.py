"""The settings docs/existing-cluster.md tells an operator to make, read back from the running cluster: each
region server's configuration in effect (its info server's ``/conf``), the WAL provider it instantiated (its
log), the gateways' ``hbase-site.xml`` and their answering, and a topic's messages written through a
gateway landing in a region server's WAL on HDFS (the region server's WAL metrics)."""

from __future__ import annotations

import json
import time
import urllib.request
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from tms_hbase import MessagingClient, TopicId
from tms_hbase_launcher.cluster import ClusterHBase
from tms_hbase_launcher.cluster_conf import HOST, split_name

from ..waiting import wait_for

MIB = 1024 * 1024


def _xml(text: str) -> dict[str, str]:
    return {p.findtext("name", ""): p.findtext("value", "") for p in ElementTree.fromstring(text).iter("property")}


def _http(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://{HOST}:{port}{path}", timeout=30) as reply:
        return reply.read().decode()


def _region_servers(cluster: ClusterHBase) -> list[tuple[str, int]]:
    """(name, info port) of every region server."""
    layout = cluster.layout
    return [
        (name, layout.regionserver_ports(split_name(name)[1])[1])
        for name in layout.process_names()
        if split_name(name)[0] == "regionserver"
    ]


def test_region_servers_run_with_the_documented_settings(cluster: ClusterHBase) -> None:
    for name, info in _region_servers(cluster):
        conf = _xml(_http(info, "/conf"))
        assert conf["hbase.rootdir"].startswith("hdfs://"), name  # data and WALs on HDFS
        assert conf["dfs.replication"] == "2"
        assert "hbase.wal.provider" not in conf  # HBase's default: AsyncFSWAL
        assert conf.get("hbase.unsafe.stream.capability.enforce", "true") == "true"  # hflush must be durable
        assert conf["zookeeper.session.timeout"] == "10000"
        assert int(conf["hbase.server.keyvalue.maxsize"]) >= 17 * MIB  # a 16 MiB batch is one cell
        assert int(conf["hbase.hstore.blockingStoreFiles"]) >= 100  # sustained writes are not blocked at 16 files
        assert int(conf["hbase.hregion.max.filesize"]) == 10 * 1024 * MIB  # the default: split at 10 GiB
        log = cluster.log_file(name)  # the provider it instantiated, in its log (or a rolled one)
        assert any("AsyncFSWALProvider" in p.read_text(errors="replace") for p in log.parent.glob(f"{log.name}*"))


def test_gateways_run_with_the_documented_timeouts_and_answer(cluster: ClusterHBase) -> None:
    layout = cluster.layout
    gateways = [n for n in layout.process_names() if split_name(n)[0] == "thrift"]
    assert len(gateways) >= 2
    for name in gateways:
        conf = _xml(Path(cluster.paths.conf(name), "hbase-site.xml").read_text())
        assert conf["hbase.client.operation.timeout"] == "60000" and conf["hbase.client.retries.number"] == "10"
        assert int(conf["hbase.client.keyvalue.maxsize"]) >= 17 * MIB
    # a gateway may still be reconnecting to the region servers an earlier test killed: wait for both to answer
    wait_for(lambda: all(cluster.status().thrift_answering.values()), "every gateway answering", 300, interval=1.0)


def test_published_messages_reach_a_write_ahead_log_on_hdfs(
    cluster: ClusterHBase, client: MessagingClient, prefix: str
) -> None:
    def appends() -> int:
        """WAL appends of the test's message table, summed over the region servers."""
        total = 0
        for _, info in _region_servers(cluster):
            beans = json.loads(_http(info, "/jmx?qry=Hadoop:service=HBase,name=RegionServer,sub=WAL"))["beans"]
            total += sum(int(b.get(f"{prefix}_messages.appendCount", 0)) for b in beans)
        return total

    topic = TopicId("cluster", "wal")
    client.create_topic(topic)
    before = appends()
    for i in range(20):
        client.publish(topic, [f"m{i}".encode()])
    deadline = time.monotonic() + 60  # the region server's metrics are taken every few seconds
    while appends() < before + 20:  # each acknowledged publish was appended to a WAL (on HDFS: rootdir above)
        assert time.monotonic() < deadline, f"{appends() - before} WAL appends for 20 publishes"
        time.sleep(1)
