"""The hbase-site.xml and log4j2 configuration of the local standalone HBase."""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

from tms_hbase_launcher.paths import LauncherPaths

LOG4J2 = """\
status = warn
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = ${sys:tms.log.file}
appender.file.filePattern = ${sys:tms.log.file}.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %m%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 64MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger = INFO,file
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = WARN
logger.zookeeper.name = org.apache.zookeeper
logger.zookeeper.level = WARN
logger.hbase.name = org.apache.hadoop.hbase
logger.hbase.level = INFO
"""


def site_properties(paths: LauncherPaths, zk_port: int, web_port: int) -> dict[str, str]:
    """Standalone HBase (one JVM: master, region server, embedded ZooKeeper) bound to loopback; the region
    server's web UI (its status page, /jmx and /prometheus metrics) on ``web_port``, the master's off."""
    data = paths.data
    return {
        "hbase.cluster.distributed": "false",
        "hbase.rootdir": f"file://{data / 'hbase'}",
        "hbase.tmp.dir": str(data / "tmp"),
        "hbase.unsafe.stream.capability.enforce": "false",
        "hbase.wal.provider": "filesystem",
        "hbase.procedure.store.wal.use.hsync": "false",
        "hbase.zookeeper.quorum": "127.0.0.1",
        "hbase.zookeeper.property.clientPort": str(zk_port),
        "hbase.zookeeper.property.dataDir": str(data / "zookeeper"),
        "hbase.localcluster.assign.random.ports": "true",
        "hbase.master.ipc.address": "127.0.0.1",
        "hbase.regionserver.ipc.address": "127.0.0.1",
        "hbase.unsafe.regionserver.hostname": "localhost",
        "hbase.master.info.port": "-1",
        "hbase.regionserver.info.port": str(web_port),
        "hbase.regionserver.info.bindAddress": "127.0.0.1",
        # One batch is one cell and may hold up to 16 MiB of payloads (the default batch limit).
        "hbase.client.keyvalue.maxsize": str(64 * 1024 * 1024),
        "hbase.server.keyvalue.maxsize": str(64 * 1024 * 1024),
        # A local server that fails should say so in seconds, not after minutes of retries.
        "hbase.client.retries.number": "10",
        "hbase.client.operation.timeout": "60000",
        # After a crash the master first recovers the dead region server (its WAL split, hbase:meta reassigned):
        # on a busy machine that took over the 200 s the standalone master allows itself by default, and then
        # it gave up and exited. Ten minutes, as the launcher's own start is bounded by its caller's timeout.
        "hbase.master.init.timeout.localHBaseCluster": "600000",
        # A development server sees tables come and go by the thousand (tests, benchmarks): delete the WALs
        # and archived files of dropped and compacted tables after a minute instead of 10 and 5 minutes, so
        # that a few minutes of heavy writes cannot fill the disk (there are no snapshots or replication here).
        "hbase.master.logcleaner.ttl": "60000",
        "hbase.master.hfilecleaner.ttl": "60000",
        "hbase.master.cleaner.interval": "20000",
        # A one-region topic written flat out (the writers benchmark: four processes of 1 KiB batches) flushes a
        # 128 MiB store file every few seconds, faster than two cores compact them. At the default 16 files the
        # region server then delays flushes for up to 90 s and refuses writes once the memstore reaches 512 MiB,
        # so publishers time out. Allow more files before blocking, as HBase's guide advises for heavy writes;
        # compaction still merges them in the background.
        "hbase.hstore.blockingStoreFiles": "100",
        # Master, region server and ZooKeeper share one JVM, so a ZooKeeper session's expiry detects no failure
        # here; it only kills the region server after a stall (a paused process, a laptop under heavy load:
        # sessions expire when their owner is unscheduled past the timeout, 40 s at ZooKeeper's 2 s tick).
        # Allow two minutes (ZooKeeper caps a session at 20 ticks).
        "hbase.zookeeper.property.tickTime": "6000",
        "zookeeper.session.timeout": "120000",
    }


def site_xml(properties: dict[str, str]) -> str:
    """Render properties as a Hadoop configuration file."""
    rows = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n" for k, v in properties.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{rows}</configuration>\n'


def write_site(conf: Path, properties: dict[str, str]) -> None:
    """Write ``properties`` into ``conf``'s hbase-site.xml, and Hadoop's own (``hadoop.*``) into its core-site.xml
    too: Hadoop's UserGroupInformation, which decides whether a process uses Kerberos, reads only that file."""
    (conf / "hbase-site.xml").write_text(site_xml(properties))
    (conf / "core-site.xml").write_text(site_xml({k: v for k, v in properties.items() if k.startswith("hadoop.")}))


def write_conf(paths: LauncherPaths, zk_port: int, web_port: int, more: dict[str, str] | None = None) -> None:
    """Write the site files (:func:`site_properties` and ``more``, which win) and log4j2.properties into the
    launcher's conf folder."""
    paths.conf.mkdir(parents=True, exist_ok=True)
    write_site(paths.conf, site_properties(paths, zk_port, web_port) | (more or {}))
    (paths.conf / "log4j2.properties").write_text(LOG4J2)
