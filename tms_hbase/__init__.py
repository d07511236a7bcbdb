"""tms-hbase: a transactional messaging system stored in Apache HBase.

The public surface is small: :class:`MessagingClient`, :class:`TopicId`, :class:`TopicMetadata`,
:class:`Message`, :class:`RollbackDetail`, consuming (:class:`Consumer`, :class:`Subscription`,
:class:`Lag`, :class:`TopicStats`), the errors in :mod:`tms_hbase.errors`, and
:class:`tms_hbase.tx.Transaction`.
"""

from .async_publisher import AsyncPublisher, PublisherStats
from .client import MessagingClient
from .consumer import Consumer, ConsumerSession
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
from .message_id import MessageId
from .reader import Message
from .shared import DeadLetter, Delivery, PendingMessage, SharedConsumer, SharedStats
from .stats import Lag, TopicStats
from .subscriptions import Subscription
from .topic import TopicId, TopicMetadata
from .wire import RollbackDetail

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
