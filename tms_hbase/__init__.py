"""tms-hbase: a transactional messaging system stored in Apache HBase.

The public surface is small: :class:`MessagingClient`, :class:`TopicId`, :class:`TopicMetadata`,
:class:`Message`, :class:`RollbackDetail`, consuming (:class:`Consumer`, :class:`Subscription`,
:class:`Lag`, :class:`TopicStats`), the errors in :mod:`tms_hbase.errors`, and
:class:`tms_hbase.tx.Transaction`.
"""

from typing import TYPE_CHECKING, Any

from .errors import (
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
from .topic import TopicId, TopicMetadata

if TYPE_CHECKING:
    from .async_publisher import AsyncPublisher, PublisherStats
    from .client import MessagingClient
    from .consumer import Consumer, ConsumerSession
    from .message_id import MessageId
    from .reader import Message
    from .shared import DeadLetter, Delivery, PendingMessage, SharedConsumer, SharedStats
    from .stats import Lag, TopicStats
    from .subscriptions import Subscription
    from .wire import RollbackDetail

# Loaded on first use (PEP 562), so that `import tms_hbase` (and every command-line tool's start, its
# --help and --version included) does not import happybase, thriftpy2 and the whole client.
_LAZY = {
    "AsyncPublisher": ".async_publisher",
    "PublisherStats": ".async_publisher",
    "MessagingClient": ".client",
    "Consumer": ".consumer",
    "ConsumerSession": ".consumer",
    "MessageId": ".message_id",
    "Message": ".reader",
    "DeadLetter": ".shared",
    "Delivery": ".shared",
    "PendingMessage": ".shared",
    "SharedConsumer": ".shared",
    "SharedStats": ".shared",
    "Lag": ".stats",
    "TopicStats": ".stats",
    "Subscription": ".subscriptions",
    "RollbackDetail": ".wire",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "AsyncPublisher",
    "BatchTooLarge",
    "ClientClosed",
    "ConcurrentModification",
    "Consumer",
    "ConsumerSession",
    "CorruptData",
    "DeadLetter",
    "Delivery",
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
    "PublisherClosed",
    "PublisherStats",
    "QueueFull",
    "RollbackDetail",
    "SharedConsumer",
    "SharedStats",
    "Subscription",
    "SubscriptionAlreadyExists",
    "SubscriptionBusy",
    "SubscriptionNotFound",
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
]
