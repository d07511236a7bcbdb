"""The five HBase tables of tms-hbase, their names under a prefix, and their column families (data
only: :class:`tms_hbase.storage.hbase.Installation` creates and drops them)."""

from __future__ import annotations

from dataclasses import dataclass

FAMILY = "d"
"""Every table has one column family, ``d``; a short name keeps every stored cell small."""

# Column-family settings per table (see docs/tables.md for the reasons):
# one version only (rows are immutable or compare-and-set), row bloom filters because every hot
# read is a point get or a prefix scan, block cache on; no HBase TTL, because TTL is per topic.
_DATA_FAMILY = {"max_versions": 1, "bloom_filter_type": "ROW", "block_cache_enabled": True}
FAMILIES = {
    "messages": _DATA_FAMILY,
    "payloads": _DATA_FAMILY,
    # tiny and read on every operation: keep it in memory
    "metadata": {**_DATA_FAMILY, "in_memory": True},
    # snapshots and edit log of the transaction server: written once, read at start
    "txstate": _DATA_FAMILY,
    # one small row per subscription (consume mark and lease), compare-and-set on every commit
    "subscriptions": {**_DATA_FAMILY, "in_memory": True},
}
CORE = ("messages", "payloads", "metadata", "txstate")
"""The tables a client creates on first use; ``subscriptions`` is created on the first use of
subscriptions, so installations that never consume through subscriptions do not have it."""
APPLICATION_MAX_VERSIONS = 100
"""The cell versions an application table keeps unless told (``client.admin.create_table``): one per transaction
that wrote the cell, as many as a :class:`~tms_hbase.txaware.table.TransactionalTable` reads."""


@dataclass(frozen=True)
class TableNames:
    """The HBase table names for one prefix: ``<prefix>_messages`` and so on."""

    prefix: str

    def name(self, kind: str) -> str:
        return f"{self.prefix}_{kind}"

    @property
    def messages(self) -> str:
        return self.name("messages")

    @property
    def payloads(self) -> str:
        return self.name("payloads")

    @property
    def metadata(self) -> str:
        return self.name("metadata")

    @property
    def txstate(self) -> str:
        return self.name("txstate")

    @property
    def subscriptions(self) -> str:
        return self.name("subscriptions")

    def all(self) -> list[str]:
        return [self.name(kind) for kind in FAMILIES]

    def core(self) -> list[str]:
        """The tables every installation has (:data:`CORE`; subscriptions come on first use)."""
        return [self.name(kind) for kind in CORE]
