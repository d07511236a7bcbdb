"""The one error hierarchy of tms-hbase: every failure a user can see derives from TmsError.

Every class says with ``retriable`` whether the same call, made again later unchanged, may succeed
(a server that was down, a race that was lost) or will fail the same way (bad input, a refusal);
retry loops retry only retriable errors. The command-line tools map these classes to exit codes in
one table.
"""

from __future__ import annotations


class TmsError(Exception):
    """Base class of every error raised by tms-hbase."""

    retriable: bool = False
    """True if the same call may succeed when made again later (see the module doc)."""


class InvalidArgument(TmsError, ValueError):
    """A caller passed a bad value (name, TTL, property, limit...); nothing was changed."""


class BatchTooLarge(InvalidArgument):
    """A publish or store batch is over the client's byte limit (``max_batch_bytes``); nothing was written."""


class TopicNotFound(TmsError):
    """The topic does not exist (never created, or deleted)."""

    def __init__(self, topic: object) -> None:
        super().__init__(f"topic {topic} does not exist")
        self.topic = topic


class TopicAlreadyExists(TmsError):
    """A topic of that name exists already; its properties were left unchanged."""

    def __init__(self, topic: object) -> None:
        super().__init__(f"topic {topic} already exists")
        self.topic = topic


class ConcurrentModification(TmsError):
    """A compare-and-set lost against another writer: the stored value is not the one expected."""

    retriable = True  # re-read, and try again on the new value


class SubscriptionNotFound(TmsError):
    """The subscription does not exist (never created, deleted, or its topic was deleted or re-created)."""

    def __init__(self, topic: object, name: str) -> None:
        super().__init__(f"subscription {name!r} of topic {topic} does not exist")
        self.topic = topic
        self.name = name


class SubscriptionAlreadyExists(TmsError):
    """A subscription of that name exists already on the topic; it was left unchanged."""

    def __init__(self, topic: object, name: str) -> None:
        super().__init__(f"subscription {name!r} of topic {topic} already exists")
        self.topic = topic
        self.name = name


class SubscriptionBusy(ConcurrentModification):
    """Another consumer holds the subscription's lease (one active consumer per subscription)."""


class LeaseLost(ConcurrentModification):
    """A lease this process held was taken over: a consumer's on its subscription (or the subscription
    was deleted; nothing it commits from now on is stored), or a sweeper's on a region (it stops
    touching that region). It must stop; trying again does not help."""

    retriable = False


class NotHeld(ConcurrentModification):
    """A delivery of a shared subscription is not held by this consumer any more, or never was: an
    unknown id, one claimed by another consumer, one whose deadline passed, one settled already, or one
    of a subscription that was reset or deleted since. Nothing was changed; trying again does not help."""

    retriable = False


class CorruptData(TmsError):
    """Stored bytes (a metadata row, a message row, a handle) could not be decoded.

    For a message row, ``topic`` (``"namespace:topic"``), ``generation`` and ``position`` say which
    row it is (None otherwise): an operator can inspect it, a reader can start after it.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str | None = None,
        generation: int | None = None,
        position: int | None = None,
    ) -> None:
        super().__init__(message)
        self.topic, self.generation, self.position = topic, generation, position


class TopicFull(TmsError):
    """The topic's generation has a row at the last position (2**64 - 1): it cannot grow further.

    Deleting and re-creating the topic starts a new generation at position 1.
    """


class InstallationNotFound(TmsError):
    """The tables of this table prefix do not (all) exist at this HBase: a mistyped prefix, or an
    installation nobody created yet (``tms-admin init`` or ``client.admin.init_tables()`` creates it), or, with
    HBase's AccessController on, tables this identity has no permission on (HBase does not list them).
    Read-only calls raise this instead of creating tables."""

    def __init__(self, prefix: str, address: str, missing: list[str]) -> None:
        super().__init__(
            f"no tms-hbase installation with table prefix {prefix!r} at {address} "
            f"(missing tables: {', '.join(missing)}); check the prefix, or create it with `tms-admin init` "
            "(with HBase's AccessController on, HBase hides tables this identity has no permission on: "
            "`tms-admin grants ROLE`)"
        )
        self.prefix, self.address, self.missing = prefix, address, missing


class TableNotFound(TmsError):
    """An application table (one a ``TransactionalTable`` writes) does not exist at this HBase;
    ``client.admin.create_table(name)`` creates one under the installation's prefix."""

    def __init__(self, table: str) -> None:
        super().__init__(f"table {table} does not exist; create it with client.admin.create_table(...)")
        self.table = table


class HBaseError(TmsError):
    """HBase (through its Thrift gateway) failed or refused a request."""


class AccessDenied(HBaseError):
    """HBase's AccessController refused this identity a permission an operation needs (HBase's
    AccessDeniedException): ``user``, ``table`` (or namespace), ``family`` (``family:qualifier``) and
    ``permission`` (R, W, X, C or A) say which, as far as HBase named them. Nothing was done; the same call fails
    again until the identity is granted what its role needs (``tms-admin grants ROLE`` prints it)."""

    def __init__(
        self, what: str, *, user: str | None, table: str | None, family: str | None, permission: str | None
    ) -> None:
        who = f"user {user}" if user else "this identity"
        needs = f"the {permission} permission" if permission else "a permission"
        on = f"{table or 'the table'}" + (f" (column {family})" if family else "")
        super().__init__(f"{what}: HBase denied {who} {needs} on {on}; grant its role (tms-admin grants ROLE)")
        self.user, self.table, self.family, self.permission = user, table, family, permission


class Unavailable(TmsError):
    """A server (HBase's Thrift gateway, the transaction server) could not be reached or did not
    answer in time. ``timed_out`` says whether the deadline passed."""

    retriable = True
    timed_out: bool = False


class HBaseUnavailable(HBaseError, Unavailable):
    """The Thrift gateway could not be reached, did not answer within the client's timeout, or
    answered bytes that are not an HBase Thrift reply: the link is unusable. ``timed_out`` says
    whether the deadline passed."""

    retriable = True


class PublishOutcomeUnknown(HBaseUnavailable):
    """HBase stopped answering while a publish was being written: the batch may or may not be stored.

    Passing this error back as ``publish(..., resume=error)`` finishes the publish exactly once.
    """

    def __init__(self, message: str, resume: object) -> None:
        super().__init__(message)
        self.resume = resume


class NotAuthenticated(TmsError):
    """The messaging gateway needs credentials (a bearer token) and got none or an unknown one (HTTP 401)."""


class NotAuthorized(TmsError):
    """The messaging gateway knows the caller, whose rules do not allow this action on this topic (HTTP 403)."""


class QueueFull(TmsError):
    """The background publisher's queue is full (policy ``on_full="raise"``)."""

    retriable = True  # once the sender has caught up


class ClientClosed(TmsError):
    """A closed client (or background publisher) was used: open a new one."""


class PublisherClosed(TmsError):
    """The background publisher's ``close()`` deadline passed before these messages were sent: they were
    not stored (a batch whose write was under way gets that write's own error instead)."""


class LauncherError(TmsError):
    """The local HBase launcher could not do what was asked (not installed, missing java/mvn, port taken, start
    failed)."""


class TransactionConflict(TmsError):
    """A change set committed after this transaction started overlaps its own (Tephra's conflict exception)."""

    def __init__(self, tx_id: int, conflicting_key: bytes, conflicting_client: str | None = None) -> None:
        super().__init__(f"conflict detected for transaction {tx_id} on change {conflicting_key!r}")
        self.tx_id = tx_id
        self.conflicting_key = conflicting_key
        self.conflicting_client = conflicting_client


class TransactionNotInProgress(TmsError):
    """The transaction is not in progress: it committed, aborted, timed out or was invalidated, or never existed."""


class InvalidTruncateTime(TmsError):
    """The invalid list cannot be truncated before that time: a transaction started earlier is still in progress."""


class TransactionServiceUnavailable(Unavailable):
    """The transaction server could not be reached, did not answer in time, or answered garbage
    (HBase itself may be fine: non-transactional publishing keeps working)."""


class TransactionFailure(TmsError):
    """A participant could not persist its changes; the transaction was rolled back."""


class Fenced(TmsError):
    """Another transaction server appended to the edit log: this one must stop serving."""
