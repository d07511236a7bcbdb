"""tms-hbase: a transactional messaging system stored in Apache HBase.

The public surface is small: :class:`MessagingClient`, :class:`TopicId`, :class:`TopicMetadata`,
:class:`Message`, :class:`Record` (a payload with a key and headers), :class:`PublishResult`,
:class:`RollbackDetail`, consuming (:class:`Consumer`, :class:`Subscription`,
:class:`Lag`, :class:`TopicStats`), the errors in :mod:`tms_hbase.errors`, and
:class:`tms_hbase.tx.Transaction`.
"""

from typing import TYPE_CHECKING, Any

from tms_hbase.errors import (
    AccessDenied,
    BatchTooLarge,
    ClientClosed,
    ConcurrentModification,
    CorruptData,
    Fenced,
    HBaseError,
    HBaseUnavailable,
    InstallationNotFound,
    InvalidArgument,
    InvalidTruncateTime,
    LauncherError,
    LeaseLost,
    NotAuthenticated,
    NotAuthorized,
    NotHeld,
    PublisherClosed,
    PublishOutcomeUnknown,
    QueueFull,
    SubscriptionAlreadyExists,
    SubscriptionBusy,
    SubscriptionNotFound,
    TableNotFound,
    TmsError,
    TopicAlreadyExists,
    TopicFull,
    TopicNotFound,
    TransactionConflict,
    TransactionFailure,
    TransactionNotInProgress,
    TransactionServiceUnavailable,
    Unavailable,
)
from tms_hbase.model.topic import TopicId, TopicMetadata

if TYPE_CHECKING:
    from tms_hbase.client import MessagingClient
    from tms_hbase.consume.consumer import Consumer
    from tms_hbase.model.dead_letter import DeadLetter
    from tms_hbase.model.message import Delivery, DeliveryRef, Message
    from tms_hbase.model.message_id import MessageId
    from tms_hbase.model.published import PublishResult
    from tms_hbase.model.record import Record
    from tms_hbase.model.schedule import deliver_after, deliver_at
    from tms_hbase.model.stats import Lag, PublisherStats, SharedStats, TopicStats
    from tms_hbase.model.subscription import ConsumerSession, PendingMessage, Subscription
    from tms_hbase.model.wire import RollbackDetail
    from tms_hbase.publish.background import BackgroundPublisher
    from tms_hbase.shared import SharedConsumer

# Loaded on first use (PEP 562), so that `import tms_hbase` (and every command-line tool's start, its
# --help and --version included) does not import thriftpy2 and the whole client.
_LAZY = {
    "BackgroundPublisher": "tms_hbase.publish.background",
    "PublisherStats": "tms_hbase.model.stats",
    "MessagingClient": "tms_hbase.client",
    "Consumer": "tms_hbase.consume.consumer",
    "ConsumerSession": "tms_hbase.model.subscription",
    "MessageId": "tms_hbase.model.message_id",
    "Message": "tms_hbase.model.message",
    "Record": "tms_hbase.model.record",
    "DeadLetter": "tms_hbase.model.dead_letter",
    "Delivery": "tms_hbase.model.message",
    "DeliveryRef": "tms_hbase.model.message",
    "PendingMessage": "tms_hbase.model.subscription",
    "SharedConsumer": "tms_hbase.shared",
    "SharedStats": "tms_hbase.model.stats",
    "Lag": "tms_hbase.model.stats",
    "TopicStats": "tms_hbase.model.stats",
    "Subscription": "tms_hbase.model.subscription",
    "RollbackDetail": "tms_hbase.model.wire",
    "PublishResult": "tms_hbase.model.published",
    "deliver_at": "tms_hbase.model.schedule",
    "deliver_after": "tms_hbase.model.schedule",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "AccessDenied",
    "BackgroundPublisher",
    "BatchTooLarge",
    "ClientClosed",
    "ConcurrentModification",
    "Consumer",
    "ConsumerSession",
    "CorruptData",
    "DeadLetter",
    "Delivery",
    "DeliveryRef",
    "Fenced",
    "HBaseError",
    "HBaseUnavailable",
    "InstallationNotFound",
    "InvalidArgument",
    "InvalidTruncateTime",
    "Lag",
    "LauncherError",
    "LeaseLost",
    "Message",
    "MessageId",
    "MessagingClient",
    "NotAuthenticated",
    "NotAuthorized",
    "NotHeld",
    "PendingMessage",
    "PublishOutcomeUnknown",
    "PublishResult",
    "PublisherClosed",
    "PublisherStats",
    "QueueFull",
    "Record",
    "RollbackDetail",
    "SharedConsumer",
    "SharedStats",
    "Subscription",
    "SubscriptionAlreadyExists",
    "SubscriptionBusy",
    "SubscriptionNotFound",
    "TableNotFound",
    "TmsError",
    "TopicAlreadyExists",
    "TopicFull",
    "TopicId",
    "TopicMetadata",
    "TopicNotFound",
    "TopicStats",
    "TransactionConflict",
    "TransactionFailure",
    "TransactionNotInProgress",
    "TransactionServiceUnavailable",
    "Unavailable",
    "deliver_after",
    "deliver_at",
]
