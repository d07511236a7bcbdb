"""The local HBase launcher: a pinned standalone HBase with its Thrift gateway in one JVM, run from Maven jars."""

from tms_hbase_launcher.local import DEFAULT_THRIFT_PORT, LocalHBase, LocalStatus
from tms_hbase_launcher.paths import HBASE_VERSION, default_home

__all__ = ["DEFAULT_THRIFT_PORT", "HBASE_VERSION", "LocalHBase", "LocalStatus", "default_home"]
