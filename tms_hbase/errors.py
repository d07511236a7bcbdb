"""The one error hierarchy of tms-hbase: every failure a user can see derives from TmsError."""

from __future__ import annotations


class TmsError(Exception):
    """Base class of every error raised by tms-hbase."""


class InvalidArgument(TmsError, ValueError):
    """A caller passed a bad value (name, TTL, property, limit...); nothing was changed."""


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
    """This consumer's lease on its subscription was taken over (or the subscription deleted): it must stop,
    and nothing it commits from now on is stored."""


class CorruptData(TmsError):
    """Stored bytes (a metadata row, a message row, a handle) could not be decoded."""


class HBaseError(TmsError):
    """HBase (through its Thrift gateway) failed or refused a request."""


class HBaseUnavailable(HBaseError):
    """The Thrift gateway could not be reached or did not answer in time."""

    timed_out: bool = False


class PublishOutcomeUnknown(HBaseUnavailable):
    """HBase stopped answering while a publish was being written: the batch may or may not be stored.

    Passing this error back as ``publish(..., resume=error)`` finishes the publish exactly once.
    """

    def __init__(self, message: str, resume: object) -> None:
        super().__init__(message)
        self.resume = resume


class QueueFull(TmsError):
    """The async publisher's queue is full (policy ``on_full="raise"``)."""


class LauncherError(TmsError):
    """The local HBase launcher could not do what was asked (missing java/mvn, port taken, start failed)."""


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
