"""The layout (ports, folders) and the Hadoop/HBase configuration files of the local HBase cluster.

Every process of the cluster gets a configuration folder of its own (``conf/<process>``) holding the same
``core-site.xml``, ``hdfs-site.xml`` and ``hbase-site.xml`` except for its own ports and scratch folders, so
that each one can be read on its own and nothing is passed on command lines.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from tms_hbase_launcher.paths import default_home
from tms_hbase_launcher.siteconf import LOG4J2, site_xml

HOST = "127.0.0.1"

DEFAULT_BASE_PORT = 19000
"""Every port of the cluster is this plus a fixed offset (see :class:`ClusterLayout`): below Linux's
ephemeral range (32768+), where the standalone HBase's randomly chosen ports live, and away from HBase's and
Hadoop's defaults (2181, 9090, 16000-16030, 9870, 9866...) that a real installation on the machine would use."""

ZNODE_PARENT = "/tms-cluster"
"""The cluster's root in ZooKeeper (its own ZooKeeper too; the distinct parent is a second guard)."""

HEAPS = {
    "namenode": "256m",
    "datanode": "192m",
    "zookeeper": "128m",
    "master": "384m",
    "regionserver": "512m",
    "thrift": "192m",
}
"""Maximum heap of each kind of process; sized so that the whole cluster fits a 2-core, 24 GiB machine."""


def default_cluster_home() -> Path:
    """``$TMS_HBASE_CLUSTER_HOME`` if set, else ``~/.cache/tms-hbase-cluster`` (never the standalone's home)."""
    env = os.environ.get("TMS_HBASE_CLUSTER_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return default_home().parent / "tms-hbase-cluster"


@dataclass(frozen=True)
class ClusterLayout:
    """How many processes of each kind and on which ports: ``base_port`` plus a fixed offset each.

    =====================  ==================================================
    ZooKeeper              base+181
    NameNode               base+200 (RPC), base+201 (HTTP)
    DataNode i (1-based)   base+210+3(i-1): data transfer, HTTP, IPC
    HMaster                base+300 (RPC), base+301 (info/JMX)
    region server i        base+310+2(i-1): RPC, info/JMX
    Thrift gateway i       base+90+(i-1)  (19090, 19091, ... by default)
    =====================  ==================================================
    """

    base_port: int = DEFAULT_BASE_PORT
    datanodes: int = 2
    regionservers: int = 3
    thrift_gateways: int = 2

    def __post_init__(self) -> None:
        if not 1024 <= self.base_port <= 65535 - 400:
            raise ValueError(f"base port {self.base_port} must be within 1024..{65535 - 400}")
        for what, count, most in (
            ("datanodes", self.datanodes, 10),
            ("regionservers", self.regionservers, 20),
            ("thrift_gateways", self.thrift_gateways, 9),
        ):
            if not 1 <= count <= most:
                raise ValueError(f"{what} must be within 1..{most}, not {count}")

    @property
    def zookeeper_port(self) -> int:
        return self.base_port + 181

    @property
    def namenode_port(self) -> int:
        return self.base_port + 200

    @property
    def namenode_http_port(self) -> int:
        return self.base_port + 201

    def datanode_ports(self, i: int) -> tuple[int, int, int]:
        """Data transfer, HTTP and IPC ports of DataNode ``i`` (1-based)."""
        first = self.base_port + 210 + 3 * (i - 1)
        return first, first + 1, first + 2

    @property
    def master_port(self) -> int:
        return self.base_port + 300

    @property
    def master_info_port(self) -> int:
        return self.base_port + 301

    def regionserver_ports(self, i: int) -> tuple[int, int]:
        """RPC and info ports of region server ``i`` (1-based)."""
        first = self.base_port + 310 + 2 * (i - 1)
        return first, first + 1

    def thrift_port(self, i: int) -> int:
        """Port of Thrift gateway ``i`` (1-based)."""
        return self.base_port + 90 + (i - 1)

    @property
    def thrift_addresses(self) -> list[str]:
        return [f"{HOST}:{self.thrift_port(i)}" for i in range(1, self.thrift_gateways + 1)]

    @property
    def hdfs_uri(self) -> str:
        return f"hdfs://{HOST}:{self.namenode_port}"

    def process_names(self) -> list[str]:
        """Every process in start order: HDFS, ZooKeeper, master, region servers, gateways."""
        return [
            "namenode",
            *(f"datanode{i}" for i in range(1, self.datanodes + 1)),
            "zookeeper",
            "master",
            *(f"rs{i}" for i in range(1, self.regionservers + 1)),
            *(f"thrift{i}" for i in range(1, self.thrift_gateways + 1)),
        ]

    def ports_of(self, name: str) -> list[int]:
        """The ports process ``name`` listens on (the first one is the one it serves clients on)."""
        kind, i = split_name(name)
        if kind == "namenode":
            return [self.namenode_port, self.namenode_http_port]
        if kind == "datanode":
            return list(self.datanode_ports(i))
        if kind == "zookeeper":
            return [self.zookeeper_port]
        if kind == "master":
            return [self.master_port, self.master_info_port]
        if kind == "regionserver":
            return list(self.regionserver_ports(i))
        return [self.thrift_port(i)]

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def split_name(name: str) -> tuple[str, int]:
    """``("regionserver", 2)`` for ``rs2``, ``("namenode", 0)`` for ``namenode``; ValueError if unknown."""
    for prefix, kind in (("datanode", "datanode"), ("rs", "regionserver"), ("thrift", "thrift")):
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            return kind, int(name[len(prefix) :])
    if name in ("namenode", "zookeeper", "master"):
        return name, 0
    raise ValueError(f"unknown cluster process {name!r}")


@dataclass(frozen=True)
class ClusterPaths:
    """The folders below the cluster's home: ``conf/<process>``, ``data/<process>``, ``logs``, ``state.json``."""

    home: Path

    @property
    def run(self) -> Path:
        return self.home / "cluster"

    def conf(self, name: str) -> Path:
        return self.run / "conf" / name

    def data(self, name: str) -> Path:
        return self.run / "data" / name

    @property
    def logs(self) -> Path:
        return self.run / "logs"

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    @property
    def state(self) -> Path:
        return self.run / "state.json"

    @property
    def tools(self) -> Path:
        """Where the admin tool (ClusterAdmin.java) is compiled."""
        return self.run / "tools"


def core_site(layout: ClusterLayout, paths: ClusterPaths, name: str) -> dict[str, str]:
    return {
        "fs.defaultFS": layout.hdfs_uri,
        "hadoop.tmp.dir": str(paths.data(name) / "tmp"),
    }


def hdfs_site(layout: ClusterLayout, paths: ClusterPaths, name: str) -> dict[str, str]:
    """HDFS on loopback: two replicas (one per DataNode by default), no permission checks (one user)."""
    props = {
        "dfs.replication": str(min(2, layout.datanodes)),
        "dfs.permissions.enabled": "false",
        "dfs.namenode.name.dir": str(paths.data("namenode") / "name"),
        "dfs.namenode.rpc-address": f"{HOST}:{layout.namenode_port}",
        "dfs.namenode.http-address": f"{HOST}:{layout.namenode_http_port}",
        "dfs.namenode.safemode.min.datanodes": "1",
        "dfs.namenode.datanode.registration.ip-hostname-check": "false",
        # With two DataNodes there is no spare to replace a failed one in a write pipeline.
        "dfs.client.block.write.replace-datanode-on-failure.enable": "false",
        "dfs.heartbeat.interval": "1",
        "dfs.namenode.heartbeat.recheck-interval": "10000",
    }
    kind, i = split_name(name)
    if kind == "datanode":
        data, http, ipc = layout.datanode_ports(i)
        props |= {
            "dfs.datanode.data.dir": str(paths.data(name) / "data"),
            "dfs.datanode.address": f"{HOST}:{data}",
            "dfs.datanode.http.address": f"{HOST}:{http}",
            "dfs.datanode.ipc.address": f"{HOST}:{ipc}",
            "dfs.datanode.hostname": HOST,
        }
    return props


def hbase_site(layout: ClusterLayout, paths: ClusterPaths, name: str) -> dict[str, str]:
    """A distributed HBase: root directory and WALs on HDFS, the cluster's own ZooKeeper and znode."""
    props = {
        "hbase.cluster.distributed": "true",
        "hbase.rootdir": f"{layout.hdfs_uri}/hbase",
        "hbase.tmp.dir": str(paths.data(name) / "tmp"),
        "hbase.zookeeper.quorum": HOST,
        "hbase.zookeeper.property.clientPort": str(layout.zookeeper_port),
        "zookeeper.znode.parent": ZNODE_PARENT,
        # A SIGKILLed region server is noticed when its ZooKeeper session expires (90 s by default).
        "zookeeper.session.timeout": "10000",
        "hbase.master.port": str(layout.master_port),
        "hbase.master.info.port": str(layout.master_info_port),
        "hbase.master.info.bindAddress": HOST,
        "hbase.master.ipc.address": HOST,
        "hbase.regionserver.ipc.address": HOST,
        "hbase.unsafe.regionserver.hostname": "localhost",
        "hbase.regionserver.info.bindAddress": HOST,
        # As the standalone launcher (siteconf.py): one batch is one cell of up to 16 MiB.
        "hbase.client.keyvalue.maxsize": str(64 * 1024 * 1024),
        "hbase.server.keyvalue.maxsize": str(64 * 1024 * 1024),
        "hbase.client.retries.number": "10",
        "hbase.client.operation.timeout": "60000",
        # Three region servers on two cores: fewer handler threads than the default 30.
        "hbase.regionserver.handler.count": "10",
        "hbase.master.logcleaner.ttl": "60000",
        "hbase.master.hfilecleaner.ttl": "60000",
        "hbase.master.cleaner.interval": "20000",
        # As the standalone launcher (siteconf.py): more store files before a region server blocks writes.
        "hbase.hstore.blockingStoreFiles": "100",
        # Start with all region servers (the master waits for this many, at most 30 s).
        "hbase.master.wait.on.regionservers.mintostart": "1",
        "hbase.master.wait.on.regionservers.timeout": "5000",
        "dfs.client.block.write.replace-datanode-on-failure.enable": "false",
    }
    kind, i = split_name(name)
    if kind == "regionserver":
        rpc, info = layout.regionserver_ports(i)
        props |= {"hbase.regionserver.port": str(rpc), "hbase.regionserver.info.port": str(info)}
    else:
        props |= {"hbase.regionserver.info.port": "-1"}
    if kind == "zookeeper":
        props["hbase.zookeeper.property.dataDir"] = str(paths.data(name) / "zk")
    return props


WEBAPPS = ("hdfs", "datanode", "static", "secondary", "journal")
"""Hadoop's HTTP servers look up ``webapps/<name>`` on the class path; the Maven jars ship none of them
(only Hadoop's tarball has them), so each process's conf folder gets empty ones. JMX (``/jmx``), which the
launcher reads, needs no web application."""


def write_cluster_conf(layout: ClusterLayout, paths: ClusterPaths, name: str) -> Path:
    """Write the configuration folder of process ``name``; returns it."""
    conf = paths.conf(name)
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "core-site.xml").write_text(site_xml(core_site(layout, paths, name)))
    (conf / "hdfs-site.xml").write_text(site_xml(hdfs_site(layout, paths, name)))
    (conf / "hbase-site.xml").write_text(site_xml(hbase_site(layout, paths, name)))
    (conf / "log4j2.properties").write_text(LOG4J2)
    for app in WEBAPPS:
        (conf / "webapps" / app).mkdir(parents=True, exist_ok=True)
    paths.data(name).mkdir(parents=True, exist_ok=True)
    return conf
