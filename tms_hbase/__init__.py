"""tms-hbase: a transactional messaging system stored in Apache HBase.

The public surface is small: :class:`MessagingClient`, :class:`TopicId`, :class:`TopicMetadata`
and the errors in :mod:`tms_hbase.errors`.
"""

from .client import MessagingClient
from .errors import (
    ConcurrentModification,
    CorruptData,
    HBaseError,
    HBaseUnavailable,
    InvalidArgument,
    LauncherError,
    TmsError,
    TopicAlreadyExists,
    TopicNotFound,
)
from .topic import TopicId, TopicMetadata

__version__ = "0.1.0"

__all__ = [
    "ConcurrentModification",
    "CorruptData",
    "HBaseError",
    "HBaseUnavailable",
    "InvalidArgument",
    "LauncherError",
    "MessagingClient",
    "TmsError",
    "TopicAlreadyExists",
    "TopicId",
    "TopicMetadata",
    "TopicNotFound",
]
