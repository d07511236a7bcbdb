"""The HBase permissions each role of tms-hbase needs on an installation's tables when HBase's AccessController
is on (``hbase.security.authorization``), as HBase shell ``grant`` commands or data (``tms-admin grants ROLE``).

They follow from what each role's code reads and writes (docs/existing-cluster.md, "Authorization"):

* every role reads topics and the installation's settings in the metadata table, and dates its work by HBase's
  clock, whose probe writes one cell there (:data:`~tms_hbase.installation.metadata.CLOCK_COLUMN`); every role
  needs some permission on each core table, as HBase lists a user only the tables it may use (a table it
  cannot see is missing: InstallationNotFound);
* a publisher reserves offsets (an increment of the sequencer's counter) and writes batch rows in the messages
  table, and transactional payloads in the payloads table;
* a consumer reads messages and payloads and the transaction state, keeps its marks and leases (and a shared
  subscription's deliveries) in the subscriptions table, and fills holes a dead writer left with skip markers,
  moving the generation's frontier up: two columns of the messages table, not its offset counter, so it cannot
  publish there;
* the sweeper deletes expired rows, marks invalid transactions' rows and keeps its skip index, low-water mark and
  byte totals in the messages table, deletes payloads and dead subscriptions, keeps its leases and records in the
  transaction-state table, and asks HBase to compact regions after many deletes (A: HBase has no narrower
  permission for a compaction);
* the admin creates the tables (C on their namespace: HBase grants table creation there only), drops them, and
  changes topics, settings and subscriptions;
* the messaging gateway does what its users do: publish, consume, and create and delete topics.
"""

from __future__ import annotations

from tms_hbase.errors import InvalidArgument
from tms_hbase.installation.metadata import CLOCK_COLUMN
from tms_hbase.model.grants import PERMISSIONS, Access, Grant
from tms_hbase.model.rows import FRONTIER_COLUMN, MESSAGE_COLUMN
from tms_hbase.model.tables import FAMILIES, TableNames

NAMESPACE = "default"
"""The HBase namespace of every installation's tables (a table prefix has no ``:``)."""


_CLOCK = ((CLOCK_COLUMN, "W", "HBase's clock: its probe writes this cell"),)
_READS_TOPICS = "reads topics and settings"
_SEES = "reads transaction state (and needs a permission here to see the table at all)"

ROLES: dict[str, tuple[Access, ...]] = {
    "publisher": (
        Access("metadata", "R", _READS_TOPICS, _CLOCK),
        Access("messages", "RW", "reserves offsets and writes batch rows"),
        Access("payloads", "RW", "stores the payloads of transactional publishes"),
        Access("txstate", "R", _SEES),
    ),
    "consumer": (
        Access("metadata", "R", _READS_TOPICS, _CLOCK),
        Access(
            "messages",
            "R",
            "reads messages",
            (
                (MESSAGE_COLUMN, "W", "fills the holes a dead writer left with skip markers"),
                (FRONTIER_COLUMN, "W", "moves a generation's frontier up (time seeks)"),
            ),
        ),
        Access("payloads", "R", "reads the payloads of transactional publishes"),
        Access("txstate", "R", "reads transaction state (committed reads)"),
        Access("subscriptions", "RW", "keeps subscriptions' marks, leases and deliveries"),
    ),
    "sweeper": (
        Access("metadata", "R", _READS_TOPICS, _CLOCK),
        Access("messages", "RWA", "deletes expired rows, marks invalid ones, keeps its indexes; compacts (A)"),
        Access("payloads", "RWA", "deletes expired payloads; compacts (A)"),
        Access("txstate", "RW", "keeps its region leases and records; prunes the invalid list"),
        Access("subscriptions", "RW", "deletes the rows of deleted subscriptions"),
    ),
    "admin": (
        Access(None, "C", "creates the tables (tms-admin init): HBase grants creation per namespace only"),
        *(Access(kind, "RWCA", "changes topics, settings, subscriptions; drops the table") for kind in FAMILIES),
    ),
    "gateway": (
        Access("metadata", "RW", "creates and deletes topics; HBase's clock probe"),
        Access("messages", "RW", "publishes and consumes"),
        Access("payloads", "RW", "publishes and consumes transactional payloads"),
        Access("txstate", "R", "reads transaction state (committed reads)"),
        Access("subscriptions", "RW", "keeps subscriptions' marks, leases and deliveries"),
    ),
}
"""Each role's needs, table kind by table kind (:data:`~tms_hbase.model.tables.FAMILIES` names them)."""


def grants(role: str, prefix: str, user: str) -> list[Grant]:
    """What ``user`` needs to act as ``role`` on the installation of table prefix ``prefix``, one grant per
    table (and per column where a role needs more there); InvalidArgument for an unknown role."""
    if role not in ROLES:
        raise InvalidArgument(f"unknown role {role!r}: one of {', '.join(ROLES)}")
    names = TableNames(prefix)
    found = []
    for access in ROLES[role]:
        if access.kind is None:
            found.append(Grant(user, access.permissions, access.why, namespace=NAMESPACE))
            continue
        table = names.name(access.kind)
        found.append(Grant(user, access.permissions, access.why, table=table))
        for column, permissions, why in access.columns:
            family, qualifier = column.decode().split(":", 1)
            found.append(Grant(user, _union(access.permissions, permissions), why, table, None, family, qualifier))
    return found


def _union(*letters: str) -> str:
    """The permissions of all of ``letters``, in HBase's order."""
    return "".join(p for p in PERMISSIONS if any(p in given for given in letters))
